/* test_log.c - the logger: line format, levels from $TBON_LOG, handlers, file
 * output, atomic lines across threads, session directories, a stderr that
 * is gone */
#include "../harness.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <regex.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The environment as the library would read it now, at a network's creation
 * (util/config.h). Valid until the next call. */
static const tb_config_t *conf_now(void)
{
    static tb_config_t c;
    tb_config_free(&c);
    if (tb_config_load(&c, NULL) != 0)
        th_fail(__FILE__, __LINE__, "tb_config_load: out of memory");
    return &c;
}

/* ---- helpers ---- */

#define MAXLINES 64
static char cap_lines[MAXLINES][4200];
static int  cap_levels[MAXLINES];
static int  cap_count;
static int  cap_arg_ok;

/* A handler that keeps the lines it gets. */
static void capture(void *arg, int level, const char *line)
{
    cap_arg_ok = arg == (void *)&cap_count;
    if (cap_count < MAXLINES) {
        snprintf(cap_lines[cap_count], sizeof cap_lines[0], "%s", line);
        cap_levels[cap_count] = level;
    }
    cap_count++;
}

static int other_count;
static void other_handler(void *arg, int level, const char *line)
{
    (void)arg; (void)level; (void)line;
    other_count++;
}

/* 1 if s matches the extended regex re. */
static int matches(const char *s, const char *re)
{
    regex_t r;
    if (regcomp(&r, re, REG_EXTENDED | REG_NOSUB) != 0)
        return 0;
    int ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

#define TIME_RE "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z"

/* The whole file as a malloc'd string (NULL if unreadable). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap + 1);
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Point fd at a fresh file in the tmpdir; returns the saved old fd. */
static int redirect_fd(int fd, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", th_tmpdir(), name);
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int saved = dup(fd);
    dup2(f, fd);
    close(f);
    return saved;
}

static void restore_fd(int fd, int saved)
{
    dup2(saved, fd);
    close(saved);
}

/* ---- line format ---- */

TEST(line_format_exact)
{
    unsetenv("TBON_LOG");
    tbon_log_set_handler(capture, &cap_count);
    tb_log_set_identity(3, "commnode");
    /* Bounds read from the clock the logger reads: time() reads the kernel's
     * coarse clock, which may still show the previous second for up to a tick
     * after CLOCK_REALTIME has crossed into the next (a CI failure). */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    time_t before = ts.tv_sec;
    tb_log(TBON_LOG_WARN, "conn", "hello %d from %s", 42, "peer");
    clock_gettime(CLOCK_REALTIME, &ts);
    time_t after = ts.tv_sec;
    REQUIRE(cap_count == 1);
    CHECK(cap_arg_ok);
    CHECK_INT(cap_levels[0], TBON_LOG_WARN);
    CHECK(matches(cap_lines[0], "^" TIME_RE " warn rank=3 commnode \\[conn\\] hello 42 from peer$"));
    /* The time is now, in UTC. */
    struct tm tm = { 0 };
    long usec = -1;
    REQUIRE(sscanf(cap_lines[0], "%d-%d-%dT%d:%d:%d.%ldZ", &tm.tm_year, &tm.tm_mon,
                   &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &usec) == 7);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    CHECK(t >= before && t <= after);
    CHECK(usec >= 0 && usec < 1000000);
}

TEST(line_rank_unknown_and_defaults)
{
    unsetenv("TBON_LOG");
    tbon_log_set_handler(capture, &cap_count);
    tb_log(TBON_LOG_ERROR, "launch", "first");            /* no identity yet */
    tb_log_set_identity(7, "be");
    tb_log(TBON_LOG_ERROR, NULL, "second");
    tb_log_set_identity(TBON_RANK_NONE, "fe");
    tb_log(TBON_LOG_WARN, "x", "third");
    tb_log_set_identity(0, "fe");
    tb_log(TBON_LOG_WARN, "x", "fourth");
    REQUIRE(cap_count == 4);
    CHECK(matches(cap_lines[0], "^" TIME_RE " error rank=- - \\[launch\\] first$"));
    CHECK(matches(cap_lines[1], "^" TIME_RE " error rank=7 be \\[-\\] second$"));
    CHECK(matches(cap_lines[2], "^" TIME_RE " warn rank=- fe \\[x\\] third$"));
    CHECK(matches(cap_lines[3], "^" TIME_RE " warn rank=0 fe \\[x\\] fourth$"));
}

TEST(line_levels_named)
{
    tbon_log_set_level(TBON_LOG_DEBUG);
    tbon_log_set_handler(capture, &cap_count);
    tb_log_set_identity(1, "commnode");
    TB_ERROR("t", "e");
    TB_WARN("t", "w");
    TB_INFO("t", "i");
    TB_DEBUG("t", "d");
    REQUIRE(cap_count == 4);
    CHECK(matches(cap_lines[0], "^" TIME_RE " error rank=1 commnode \\[t\\] e$"));
    CHECK(matches(cap_lines[1], "^" TIME_RE " warn rank=1 commnode \\[t\\] w$"));
    CHECK(matches(cap_lines[2], "^" TIME_RE " info rank=1 commnode \\[t\\] i$"));
    CHECK(matches(cap_lines[3], "^" TIME_RE " debug rank=1 commnode \\[t\\] d$"));
    for (int i = 0; i < 4; i++)
        CHECK_INT(cap_levels[i], i);
}

TEST(line_newlines_flattened_and_errno_kept)
{
    tbon_log_set_handler(capture, &cap_count);
    errno = ENOENT;
    tb_log(TBON_LOG_ERROR, "t", "a\nb\r\nc: %m");
    CHECK_INT(errno, ENOENT);
    REQUIRE(cap_count == 1);
    CHECK(matches(cap_lines[0], " \\[t\\] a b  c: No such file or directory$"));
}

TEST(line_truncated_at_4k)
{
    static char big[10000];
    memset(big, 'a', sizeof big - 1);
    tbon_log_set_handler(capture, &cap_count);
    tb_log(TBON_LOG_ERROR, "t", "%s", big);
    REQUIRE(cap_count == 1);
    CHECK_UINT(strlen(cap_lines[0]), 4095);           /* + newline = 4096 */
    CHECK_STR(cap_lines[0] + 4095 - 4, "a...");

    /* The default handler writes it as one 4096-byte line. */
    tbon_log_set_handler(NULL, NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/big.log", th_tmpdir());
    REQUIRE(tb_log_to_file(path) == 0);
    tb_log(TBON_LOG_ERROR, "t", "%s", big);
    tb_log(TBON_LOG_ERROR, "t", "short");
    char *s = slurp(path);
    REQUIRE(s);
    CHECK_INT(count_lines(s), 2);
    char *nl = strchr(s, '\n');
    REQUIRE(nl);
    CHECK_INT(nl - s, 4095);
    CHECK(strncmp(nl - 3, "...", 3) == 0);
    free(s);
}

/* ---- levels ---- */

/* In a child (the level is read once per process): TBON_LOG=value (NULL:
 * unset); returns the highest enabled level, or -1 for none. */
static int level_with_env(const char *value)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (value)
            setenv("TBON_LOG", value, 1);
        else
            unsetenv("TBON_LOG");
        tbon_log_set_handler(other_handler, NULL);    /* quiet */
        int top = -1;
        for (int l = TBON_LOG_ERROR; l <= TBON_LOG_DEBUG; l++)
            if (tb_log_enabled(l))
                top = l;
        _exit(top + 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) - 1 : -100;
}

TEST(level_from_env)
{
    CHECK_INT(level_with_env(NULL), TBON_LOG_WARN);
    CHECK_INT(level_with_env(""), TBON_LOG_WARN);
    CHECK_INT(level_with_env("error"), TBON_LOG_ERROR);
    CHECK_INT(level_with_env("warn"), TBON_LOG_WARN);
    CHECK_INT(level_with_env("info"), TBON_LOG_INFO);
    CHECK_INT(level_with_env("debug"), TBON_LOG_DEBUG);
    CHECK_INT(level_with_env("DEBUG"), TBON_LOG_DEBUG);
    CHECK_INT(level_with_env("Info"), TBON_LOG_INFO);
    CHECK_INT(level_with_env("ERROR"), TBON_LOG_ERROR);
    CHECK_INT(level_with_env("loud"), TBON_LOG_WARN);
    CHECK_INT(level_with_env("debug2"), TBON_LOG_WARN);
}

TEST(level_bad_env_warned_once)
{
    setenv("TBON_LOG", "Loud", 1);
    tbon_log_set_handler(capture, &cap_count);
    CHECK(!tb_log_enabled(TBON_LOG_INFO));
    CHECK(tb_log_enabled(TBON_LOG_WARN));
    CHECK(tb_log_enabled(TBON_LOG_ERROR));
    TB_INFO("t", "not shown");
    TB_WARN("t", "shown");
    REQUIRE(cap_count == 2);
    CHECK_INT(cap_levels[0], TBON_LOG_WARN);
    CHECK(matches(cap_lines[0], "^" TIME_RE " warn rank=- - \\[log\\] TBON_LOG=\"Loud\" "
                  "is not one of error, warn, info, debug; using warn$"));
    CHECK(matches(cap_lines[1], " \\[t\\] shown$"));
}

TEST(level_set_overrides_env)
{
    setenv("TBON_LOG", "error", 1);
    CHECK(!tb_log_enabled(TBON_LOG_WARN));
    tbon_log_set_level(TBON_LOG_DEBUG);
    CHECK(tb_log_enabled(TBON_LOG_DEBUG));
    tbon_log_set_level(TBON_LOG_INFO);
    CHECK(tb_log_enabled(TBON_LOG_INFO));
    CHECK(!tb_log_enabled(TBON_LOG_DEBUG));
    tbon_log_set_level(99);                            /* clamped */
    CHECK(tb_log_enabled(TBON_LOG_DEBUG));
    tbon_log_set_level(-5);
    CHECK(tb_log_enabled(TBON_LOG_ERROR));
    CHECK(!tb_log_enabled(TBON_LOG_WARN));
}

TEST(level_set_before_env_is_read)
{
    /* Setting first: the environment, read lazily, must not undo it. */
    setenv("TBON_LOG", "error", 1);
    tbon_log_set_level(TBON_LOG_DEBUG);
    CHECK(tb_log_enabled(TBON_LOG_DEBUG));
}

TEST(level_filters_macros_without_evaluating)
{
    unsetenv("TBON_LOG");
    tbon_log_set_handler(capture, &cap_count);
    int evaluated = 0;
    TB_DEBUG("t", "%d", ++evaluated);
    TB_INFO("t", "%d", ++evaluated);
    CHECK_INT(evaluated, 0);
    CHECK_INT(cap_count, 0);
    TB_WARN("t", "%d", ++evaluated);
    CHECK_INT(evaluated, 1);
    CHECK_INT(cap_count, 1);
}

/* A site that a stranger can make log at will writes 10 lines in a window;
 * the rest are counted and said before the next line of a later window. */
TEST(limited_lines_counted)
{
    unsetenv("TBON_LOG");
    tbon_log_set_handler(capture, &cap_count);
    tb_log_limit_t rl = { 0, 0, 0 };
    int written = 0;
    for (int i = 0; i < 25; i++)
        if (tb_log_limit(&rl, TBON_LOG_WARN, "t")) {
            tb_log(TBON_LOG_WARN, "t", "line %d", i);
            written++;
        }
    CHECK_INT(written, TB_LOG_LIMIT_LINES);
    CHECK_INT(cap_count, TB_LOG_LIMIT_LINES);
    rl.start_ms -= TB_LOG_LIMIT_MS;          /* the window has passed */
    CHECK(tb_log_limit(&rl, TBON_LOG_WARN, "t"));
    CHECK_INT(cap_count, TB_LOG_LIMIT_LINES + 1);
    CHECK(matches(cap_lines[TB_LOG_LIMIT_LINES],
                  "warn .* \\[t\\] 15 more lines like the next one were not shown \\(at most "
                  "10 every 10 s\\)$"));
    /* and the macro does the same */
    for (int i = 0; i < 12; i++)
        TB_WARN_LIMITED("u", "from the macro %d", i);
    CHECK_INT(cap_count, 2 * TB_LOG_LIMIT_LINES + 1);
}

/* ---- handlers and output ---- */

TEST(handler_replace_and_restore)
{
    unsetenv("TBON_LOG");
    int saved = redirect_fd(STDERR_FILENO, "stderr");
    tbon_log_set_handler(capture, &cap_count);
    TB_WARN("t", "to capture");
    tbon_log_set_handler(other_handler, NULL);
    TB_WARN("t", "to other");
    TB_WARN("t", "to other again");
    tbon_log_set_handler(NULL, NULL);
    TB_WARN("t", "to stderr");
    restore_fd(STDERR_FILENO, saved);
    CHECK_INT(cap_count, 1);
    CHECK_INT(other_count, 2);
    char path[512];
    snprintf(path, sizeof path, "%s/stderr", th_tmpdir());
    char *s = slurp(path);
    REQUIRE(s);
    CHECK(matches(s, "^" TIME_RE " warn rank=- - \\[t\\] to stderr\n$"));
    free(s);
}

TEST(never_writes_stdout)
{
    fflush(stdout);
    int saved_out = redirect_fd(STDOUT_FILENO, "stdout");
    int saved_err = redirect_fd(STDERR_FILENO, "stderr");
    setenv("TBON_LOG", "bogus", 1);                    /* the warning too */
    tbon_log_set_level(TBON_LOG_DEBUG);
    for (int l = TBON_LOG_ERROR; l <= TBON_LOG_DEBUG; l++)
        tb_log(l, "t", "line %d", l);
    char path[512];
    snprintf(path, sizeof path, "%s/file.log", th_tmpdir());
    REQUIRE(tb_log_to_file(path) == 0);
    TB_ERROR("t", "to the file");
    fflush(stdout);
    restore_fd(STDERR_FILENO, saved_err);
    restore_fd(STDOUT_FILENO, saved_out);
    snprintf(path, sizeof path, "%s/stdout", th_tmpdir());
    char *s = slurp(path);
    REQUIRE(s);
    CHECK_STR(s, "");
    free(s);
    snprintf(path, sizeof path, "%s/stderr", th_tmpdir());
    s = slurp(path);
    REQUIRE(s);
    CHECK_INT(count_lines(s), 5);                      /* warning + 4 levels */
    free(s);
}

/* A stderr whose reader is gone (a pipe from a parent, or a remote shell,
 * that died): the lines are lost, the process lives on, with SIGPIPE at its
 * default action and unblocked, and nothing of it left pending. */
TEST(stderr_pipe_without_reader_costs_lines_not_the_process)
{
    int p[2];
    REQUIRE(pipe(p) == 0);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        close(p[0]);                                    /* nobody reads */
        dup2(p[1], STDERR_FILENO);
        close(p[1]);
        tbon_log_set_level(TBON_LOG_WARN);
        for (int i = 0; i < 3; i++)
            TB_WARN("t", "lost the parent %d", i);
        sigset_t cur, pend;
        sigprocmask(SIG_SETMASK, NULL, &cur);
        sigpending(&pend);
        _exit(sigismember(&cur, SIGPIPE) ? 3 : sigismember(&pend, SIGPIPE) ? 4 : 0);
    }
    close(p[0]);
    close(p[1]);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st));
    if (WIFSIGNALED(st))
        th_fail(__FILE__, __LINE__, "the child died of signal %d", WTERMSIG(st));
    CHECK_INT(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0);
}

TEST(file_output_appends_0600_cloexec)
{
    unsetenv("TBON_LOG");
    char path[512];
    snprintf(path, sizeof path, "%s/cn.log", th_tmpdir());
    int saved = redirect_fd(STDERR_FILENO, "stderr");
    tb_log_set_identity(5, "commnode");
    REQUIRE(tb_log_to_file(path) == 0);
    TB_WARN("conn", "one");
    TB_ERROR("conn", "two");
    restore_fd(STDERR_FILENO, saved);

    struct stat st;
    REQUIRE(stat(path, &st) == 0);
    CHECK_INT(st.st_mode & 0777, 0600);
    char *s = slurp(path);
    REQUIRE(s);
    CHECK(matches(s, "^" TIME_RE " warn rank=5 commnode \\[conn\\] one\n"
                     TIME_RE " error rank=5 commnode \\[conn\\] two\n$"));
    free(s);

    /* Nothing went to stderr. */
    char epath[512];
    snprintf(epath, sizeof epath, "%s/stderr", th_tmpdir());
    s = slurp(epath);
    REQUIRE(s);
    CHECK_STR(s, "");
    free(s);

    /* The descriptor is close-on-exec: find it through /proc. */
    int found = 0;
    for (int fd = 3; fd < 256; fd++) {
        char link[64], target[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strcmp(target, path) == 0) {
            found++;
            CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        }
    }
    CHECK_INT(found, 1);

    /* Reopening appends (a restarted commnode keeps its history). */
    REQUIRE(tb_log_to_file(path) == 0);
    TB_WARN("conn", "three");
    s = slurp(path);
    REQUIRE(s);
    CHECK_INT(count_lines(s), 3);
    free(s);

    /* A handler takes precedence; NULL restores the file, not stderr. */
    tbon_log_set_handler(capture, &cap_count);
    TB_WARN("conn", "captured");
    tbon_log_set_handler(NULL, NULL);
    TB_WARN("conn", "four");
    CHECK_INT(cap_count, 1);
    s = slurp(path);
    REQUIRE(s);
    CHECK_INT(count_lines(s), 4);
    CHECK(strstr(s, "captured") == NULL);
    free(s);
}

TEST(file_output_errors_and_back_to_stderr)
{
    unsetenv("TBON_LOG");
    char path[512];
    snprintf(path, sizeof path, "%s/no/such/dir.log", th_tmpdir());
    CHECK_INT(tb_log_to_file(path), TBON_EIO);
    snprintf(path, sizeof path, "%s/a.log", th_tmpdir());
    int saved = redirect_fd(STDERR_FILENO, "stderr");
    REQUIRE(tb_log_to_file(path) == 0);
    TB_WARN("t", "in file");
    REQUIRE(tb_log_to_file(NULL) == 0);
    TB_WARN("t", "in stderr");
    restore_fd(STDERR_FILENO, saved);
    char *s = slurp(path);
    REQUIRE(s);
    CHECK(matches(s, "^" TIME_RE " warn rank=- - \\[t\\] in file\n$"));
    free(s);
    snprintf(path, sizeof path, "%s/stderr", th_tmpdir());
    s = slurp(path);
    REQUIRE(s);
    CHECK(matches(s, "^" TIME_RE " warn rank=- - \\[t\\] in stderr\n$"));
    free(s);
}

#define NTHREADS 4
#define NPERTHREAD 500

static void *log_many(void *arg)
{
    int id = (int)(intptr_t)arg;
    char pad[300];
    memset(pad, 'a' + id, sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    for (int i = 0; i < NPERTHREAD; i++)
        TB_WARN("thread", "t%d i%d %s", id, i, pad);
    return NULL;
}

TEST(threads_lines_never_interleave)
{
    unsetenv("TBON_LOG");
    char path[512];
    snprintf(path, sizeof path, "%s/threads.log", th_tmpdir());
    REQUIRE(tb_log_to_file(path) == 0);
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&th[i], NULL, log_many, (void *)(intptr_t)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    char *s = slurp(path);
    REQUIRE(s);
    CHECK_INT(count_lines(s), NTHREADS * NPERTHREAD);
    int seen[NTHREADS] = { 0 }, bad = 0;
    regex_t r;
    REQUIRE(regcomp(&r, "^" TIME_RE " warn rank=- - \\[thread\\] t([0-9]) i([0-9]+) ([a-z]+)$",
                    REG_EXTENDED) == 0);
    char *save = NULL;
    for (char *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        regmatch_t m[4];
        if (regexec(&r, line, 4, m, 0) != 0) {
            bad++;
            continue;
        }
        int id = atoi(line + m[1].rm_so), i = atoi(line + m[2].rm_so);
        int padlen = m[3].rm_eo - m[3].rm_so;
        if (id >= NTHREADS || i != seen[id] || padlen != 299 || line[m[3].rm_so] != 'a' + id)
            bad++;
        else
            seen[id]++;
    }
    regfree(&r);
    CHECK_INT(bad, 0);
    for (int i = 0; i < NTHREADS; i++)
        CHECK_INT(seen[i], NPERTHREAD);
    free(s);
}

/* ---- session directory ---- */

static void my_user(char *out, size_t cap)
{
    struct passwd *pw = getpwuid(geteuid());
    snprintf(out, cap, "%s", pw ? pw->pw_name : getenv("USER"));
}

TEST(session_dir_default)
{
    unsetenv("TBON_LOG_DIR");
    setenv("TMPDIR", th_tmpdir(), 1);
    char user[256], want[1024], got[1024];
    my_user(user, sizeof user);
    snprintf(want, sizeof want, "%s/tbon-%s-000000001234abcd", th_tmpdir(), user);
    REQUIRE(tb_log_session_dir(conf_now(), 0x1234abcdULL, got, sizeof got) == 0);
    CHECK_STR(got, want);
    struct stat st;
    REQUIRE(lstat(got, &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK_INT(st.st_mode & 0777, 0700);
    /* Again: it exists and is ours, fine. */
    REQUIRE(tb_log_session_dir(conf_now(), 0x1234abcdULL, got, sizeof got) == 0);
    CHECK_STR(got, want);
    /* All 16 hex digits. */
    REQUIRE(tb_log_session_dir(conf_now(), 0xfedcba9876543210ULL, got, sizeof got) == 0);
    snprintf(want, sizeof want, "%s/tbon-%s-fedcba9876543210", th_tmpdir(), user);
    CHECK_STR(got, want);
    /* A commnode's log file goes there. */
    char path[1100];
    snprintf(path, sizeof path, "%s/commnode-4.log", got);
    CHECK_INT(tb_log_to_file(path), 0);
}

TEST(session_dir_from_env)
{
    char dir[512], got[1024];
    snprintf(dir, sizeof dir, "%s/logs/run1", th_tmpdir());
    setenv("TBON_LOG_DIR", dir, 1);
    REQUIRE(tb_log_session_dir(conf_now(), 42, got, sizeof got) == 0);
    CHECK_STR(got, dir);
    struct stat st;
    REQUIRE(stat(dir, &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    REQUIRE(tb_log_session_dir(conf_now(), 42, got, sizeof got) == 0);
    /* Not a directory. */
    setenv("TBON_LOG_DIR", th_write_file("plain", "x"), 1);
    CHECK_INT(tb_log_session_dir(conf_now(), 42, got, sizeof got), TBON_EIO);
    /* Writable by others without the sticky bit: another user could put
     * their own files (a log, an ssh master's socket) in it. Not used. */
    snprintf(dir, sizeof dir, "%s/logs/open", th_tmpdir());
    REQUIRE(mkdir(dir, 0700) == 0 && chmod(dir, 0777) == 0);
    setenv("TBON_LOG_DIR", dir, 1);
    CHECK_INT(tb_log_session_dir(conf_now(), 42, got, sizeof got), TBON_EIO);
    REQUIRE(chmod(dir, 0770) == 0);
    CHECK_INT(tb_log_session_dir(conf_now(), 42, got, sizeof got), TBON_EIO);
    /* Sticky (a /tmp): others cannot rename or remove what is ours. */
    REQUIRE(chmod(dir, 01777) == 0);
    CHECK_INT(tb_log_session_dir(conf_now(), 42, got, sizeof got), 0);
    unsetenv("TBON_LOG_DIR");
}

/* A symlink at the log file's name is not followed. */
TEST(log_file_not_through_a_symlink)
{
    char link[1024];
    const char *target = th_write_file("target", "theirs\n");
    snprintf(link, sizeof link, "%s/commnode-9.log", th_tmpdir());
    REQUIRE(symlink(target, link) == 0);
    CHECK_INT(tb_log_to_file(link), TBON_EIO);
    char buf[64] = "";
    FILE *f = fopen(target, "r");
    REQUIRE(f);
    CHECK(fgets(buf, sizeof buf, f) != NULL);
    fclose(f);
    CHECK_STR(buf, "theirs\n");
}

TEST(session_dir_refuses_unsafe)
{
    unsetenv("TBON_LOG_DIR");
    setenv("TMPDIR", th_tmpdir(), 1);
    char user[256], path[1024], got[1024];
    my_user(user, sizeof user);
    /* A symlink planted under the predictable name. */
    snprintf(path, sizeof path, "%s/tbon-%s-0000000000000001", th_tmpdir(), user);
    REQUIRE(symlink(th_tmpdir(), path) == 0);
    CHECK_INT(tb_log_session_dir(conf_now(), 1, got, sizeof got), TBON_EIO);
    /* A plain file. */
    snprintf(path, sizeof path, "tbon-%s-0000000000000002", user);
    th_write_file(path, "x");
    CHECK_INT(tb_log_session_dir(conf_now(), 2, got, sizeof got), TBON_EIO);
    /* Too small a buffer. */
    CHECK_INT(tb_log_session_dir(conf_now(), 3, got, 10), TBON_EIO);
    /* A missing parent. */
    snprintf(path, sizeof path, "%s/nope", th_tmpdir());
    setenv("TMPDIR", path, 1);
    CHECK_INT(tb_log_session_dir(conf_now(), 4, got, sizeof got), TBON_EIO);
}
