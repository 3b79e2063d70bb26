/* test_launch.c - the launcher with real processes: local spawn, the remote
 * shell path through tests/integration/rsh-local, secret delivery, quoting,
 * errors, reaping with and without pidfd, host locality */
#include "../harness.h"
#include "proc/launch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SECRET "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define REMOTE "198.51.100.7"          /* TEST-NET-2: never this machine */

/* ---- helpers ---- */

/* The whole file as a malloc'd string (NULL if unreadable). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = malloc(65537);
    size_t n = buf ? fread(buf, 1, 65536, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* An executable script in the tmpdir; returns its path (th_write_file slot). */
static const char *script(const char *name, const char *text)
{
    const char *p = th_write_file(name, text);
    chmod(p, 0755);
    return p;
}

/* A path in the tmpdir (static, one of 8 slots). */
static const char *tmp_path(const char *name)
{
    static char paths[8][512];
    static int slot;
    char *p = paths[slot++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", th_tmpdir(), name);
    return p;
}

/* tests/integration/rsh-local: from $TBON_SRC_DIR, the current directory, or
 * a parent of this binary's directory (build dirs live in the checkout). */
static const char *rsh_local(void)
{
    static char path[PATH_MAX + 64];
    const char *rel = "tests/integration/rsh-local";
    const char *src = getenv("TBON_SRC_DIR");
    if (src && snprintf(path, sizeof path, "%s/%s", src, rel) > 0 && access(path, X_OK) == 0)
        return path;
    char dir[PATH_MAX];
    if (getcwd(dir, sizeof dir) && snprintf(path, sizeof path, "%s/%s", dir, rel) > 0 &&
        access(path, X_OK) == 0)
        return path;
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0)
        return NULL;
    dir[n] = '\0';
    char *slash;
    while ((slash = strrchr(dir, '/')) && slash != dir) {
        *slash = '\0';
        snprintf(path, sizeof path, "%s/%s", dir, rel);
        if (access(path, X_OK) == 0)
            return path;
    }
    return NULL;
}

/* A symlink name -> target in the tmpdir, so the process is called name. */
static const char *named_link(const char *name, const char *target)
{
    const char *p = tmp_path(name);
    unlink(p);
    if (symlink(target, p) != 0)
        return NULL;
    return p;
}

static const char *sleep_bin(void)
{
    return access("/usr/bin/sleep", X_OK) == 0 ? "/usr/bin/sleep" : "/bin/sleep";
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n - 1;                     /* the directory itself */
}

/* Launch and wait (up to 10 s); returns the wait status or -1000 - error. */
static int run(const tb_launch_spec_t *s, tbon_error_t *err)
{
    pid_t pid = -1;
    int rc = tb_launch(s, &pid, err);
    if (rc != 0)
        return -1000 + rc;
    return tb_reap(pid, 10000);
}

#define CHECK_EXIT(st, code) do { int th_st = (st);                          \
    CHECK(th_st >= 0 && WIFEXITED(th_st));                                   \
    if (th_st >= 0 && WIFEXITED(th_st)) CHECK_INT(WEXITSTATUS(th_st), code); \
} while (0)

/* ---- local launch ---- */

TEST(local_true_and_false)
{
    tbon_error_t err;
    const char *av[] = { "tbon_true", NULL };
    tb_launch_spec_t s = { .host = "localhost", .exe = "/bin/true", .argv = av,
                           .secret = SECRET, .rsh = "ssh" };
    CHECK_EXIT(run(&s, &err), 0);
    s.exe = "/bin/false";
    CHECK_EXIT(run(&s, &err), 1);
    s.host = NULL;                     /* no host: here */
    s.exe = "/bin/true";
    s.secret = NULL;
    CHECK_EXIT(run(&s, &err), 0);
}

TEST(local_env_args_and_secret)
{
    const char *out = tmp_path("out");
    const char *exe = script("tbon_env.sh",
        "#!/bin/sh\n"
        "printf '%s|%s|%s|%s|%s|%s|%s\\n' \"$TBON_SECRET\" \"$FOO\" \"$TBON_T_INHERIT\" "
        "\"$0\" \"$1\" \"$2\" \"$#\" > \"$OUT\"\n"
        "env | grep -c '^TBON_SECRET=' >> \"$OUT\"\n"
        "env | grep -c '^FOO=' >> \"$OUT\"\n");
    char outkv[600];
    snprintf(outkv, sizeof outkv, "OUT=%s", out);
    setenv("FOO", "old value", 1);            /* replaced, not duplicated */
    setenv("TBON_SECRET", "stale", 1);        /* the spec's secret wins */
    setenv("TBON_T_INHERIT", "inherited", 1);
    const char *av[] = { "tbon_env.sh", "x y", "it's", NULL };
    const char *env[] = { "FOO=bar baz", outkv, NULL };
    tb_launch_spec_t s = { .host = "localhost", .exe = exe, .argv = av, .env = env,
                           .secret = SECRET };
    tbon_error_t err;
    CHECK_EXIT(run(&s, &err), 0);
    char *got = slurp(out);
    REQUIRE(got);
    char want[1024];
    snprintf(want, sizeof want, SECRET "|bar baz|inherited|%s|x y|it's|2\n1\n1\n", exe);
    CHECK_STR(got, want);
    free(got);
}

TEST(local_stdin_devnull_no_fd_leak)
{
    /* A descriptor without close-on-exec in the launcher must not reach the
     * child; stdin is /dev/null; stdout and stderr are inherited. */
    int leak = open("/dev/null", O_RDONLY);
    REQUIRE(leak >= 0);
    REQUIRE(dup2(leak, 9) == 9);
    const char *out = tmp_path("fds");
    char cmd[1024];
    /* exec > file: no saved copy of stdout in the shell's own table. */
    snprintf(cmd, sizeof cmd, "exec > '%s'; readlink /proc/$$/fd/0; ls /proc/$$/fd; exit 0", out);
    const char *av[] = { "sh", "-c", cmd, NULL };
    tb_launch_spec_t s = { .host = "localhost", .exe = "/bin/sh", .argv = av, .secret = SECRET };
    tbon_error_t err;
    CHECK_EXIT(run(&s, &err), 0);
    char *got = slurp(out);
    REQUIRE(got);
    CHECK_STR(got, "/dev/null\n0\n1\n2\n");
    free(got);
    close(9);
    close(leak);
}

TEST(local_missing_exe_message)
{
    tbon_error_t err = { 0, "" };
    pid_t pid = -1;
    const char *av[] = { "x", NULL };
    tb_launch_spec_t s = { .host = "localhost", .exe = "/nonexistent/tbon_nope", .argv = av,
                           .secret = SECRET };
    CHECK_INT(tb_launch(&s, &pid, &err), TBON_ELAUNCH);
    CHECK_INT(err.code, TBON_ELAUNCH);
    CHECK_STR(err.msg, "cannot launch /nonexistent/tbon_nope on host localhost: "
                       "No such file or directory");
    CHECK_INT(pid, -1);
}

TEST(local_not_executable_or_directory)
{
    tbon_error_t err;
    pid_t pid = -1;
    const char *plain = th_write_file("tbon_plain", "#!/bin/sh\nexit 0\n");
    chmod(plain, 0644);
    const char *av[] = { "x", NULL };
    tb_launch_spec_t s = { .host = "127.0.0.1", .exe = plain, .argv = av, .secret = SECRET };
    CHECK_INT(tb_launch(&s, &pid, &err), TBON_ELAUNCH);
    char want[1024];
    snprintf(want, sizeof want, "cannot launch %s on host 127.0.0.1: Permission denied", plain);
    CHECK_STR(err.msg, want);
    s.exe = th_tmpdir();
    CHECK_INT(tb_launch(&s, &pid, &err), TBON_ELAUNCH);
    snprintf(want, sizeof want, "cannot launch %s on host 127.0.0.1: Is a directory", th_tmpdir());
    CHECK_STR(err.msg, want);
    CHECK_INT(pid, -1);
}

TEST(local_exec_failure_reported)
{
    /* Executable files the kernel cannot run: the checks before spawning pass,
     * so this is the error posix_spawn reports from the exec itself. */
    tbon_error_t err;
    pid_t pid = -1;
    const char *badinterp = script("tbon_badinterp", "#!/nonexistent/interpreter\n");
    const char *av[] = { "x", NULL };
    tb_launch_spec_t s = { .host = "localhost", .exe = badinterp, .argv = av, .secret = SECRET };
    CHECK_INT(tb_launch(&s, &pid, &err), TBON_ELAUNCH);
    char want[1024];
    snprintf(want, sizeof want, "cannot launch %s on host localhost: No such file or directory",
             badinterp);
    CHECK_STR(err.msg, want);
    const char *garbage = script("tbon_garbage", "\x7f\x01\x02 not a program\n");
    s.exe = garbage;
    CHECK_INT(tb_launch(&s, &pid, &err), TBON_ELAUNCH);
    snprintf(want, sizeof want, "cannot launch %s on host localhost: Exec format error", garbage);
    CHECK_STR(err.msg, want);
    CHECK_INT(pid, -1);
    /* No child was left behind either. */
    CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
}

TEST(launch_bad_arguments)
{
    tbon_error_t err;
    pid_t pid = -1;
    const char *av[] = { "x", NULL };
    const char *env[] = { "NOEQUALS", NULL };
    tb_launch_spec_t s = { .host = "localhost", .exe = "/bin/true", .argv = av, .env = env };
    CHECK_INT(tb_launch(&s, &pid, &err), TBON_EINVAL);
    CHECK_STR(err.msg, "cannot launch /bin/true on host localhost: environment entry "
                       "\"NOEQUALS\" is not NAME=VALUE");
    s.env = NULL;
    s.argv = NULL;
    CHECK_INT(tb_launch(&s, &pid, &err), TBON_EINVAL);
    CHECK_INT(tb_launch(NULL, &pid, &err), TBON_EINVAL);
    s.argv = av;
    s.host = "-oProxyCommand=touch /tmp/x";
    CHECK_INT(tb_launch(&s, &pid, &err), TBON_ELAUNCH);
    CHECK_STR(err.msg, "cannot launch /bin/true on host -oProxyCommand=touch /tmp/x: "
                       "a host name cannot start with '-'");
    CHECK_INT(pid, -1);
}

/* ---- remote launch through a stand-in remote shell ---- */

TEST(remote_secret_on_stdin_not_argv)
{
    const char *rl = rsh_local();
    REQUIRE(rl);
    const char *args = tmp_path("rsh_args");
    const char *rshenv = tmp_path("rsh_env");
    const char *rlog = tmp_path("rsh_log");
    const char *out = tmp_path("remote_out");
    /* A stand-in that records what it was given, then behaves as rsh-local. */
    char text[2048];
    snprintf(text, sizeof text,
             "#!/bin/sh\n"
             "for a in \"$@\"; do printf '%%s\\n' \"$a\"; done > '%s'\n"
             "printf '%%s\\n' \"${TBON_SECRET-unset}\" > '%s'\n"
             "exec '%s' \"$@\"\n", args, rshenv, rl);
    const char *rsh = script("tbon_rsh.sh", text);
    const char *exe = script("tbon_remote.sh",
        "#!/bin/sh\n"
        "IFS= read -r line\n"
        "{ printf 'secret=%s\\n' \"$line\"; printf 'foo=%s\\n' \"$FOO\";\n"
        "  for a in \"$@\"; do printf 'arg=%s\\n' \"$a\"; done;\n"
        "  printf 'envsecret=%s\\n' \"${TBON_SECRET-unset}\";\n"
        "  if read -r more; then echo more; else echo eof; fi; } > \"$OUT\"\n");
    setenv("TBON_RSH_LOG", rlog, 1);
    setenv("TBON_SECRET", SECRET, 1);          /* must not reach the shell */
    char outkv[600];
    snprintf(outkv, sizeof outkv, "OUT=%s", out);
    const char *av[] = { "tbon_remote.sh", "x y", "it's", "$HOME", "`echo pwned`;exit 3",
                         "", NULL };
    const char *env[] = { "FOO=a b'c", outkv, NULL };
    tb_launch_spec_t s = { .host = REMOTE, .exe = exe, .argv = av, .env = env,
                           .secret = SECRET, .rsh = rsh };
    tbon_error_t err;
    CHECK_EXIT(run(&s, &err), 0);

    char want[4096];
    char *got = slurp(args);
    REQUIRE(got);
    snprintf(want, sizeof want,
             REMOTE "\nenv\n'FOO=a b'\\''c'\n'%s'\n'%s'\n'x y'\n'it'\\''s'\n'$HOME'\n"
             "'`echo pwned`;exit 3'\n''\n'--tbon-secret-stdin'\n", outkv, exe);
    CHECK_STR(got, want);
    CHECK(strstr(got, SECRET) == NULL);
    free(got);

    got = slurp(rshenv);
    REQUIRE(got);
    CHECK_STR(got, "unset\n");
    free(got);

    got = slurp(rlog);
    REQUIRE(got);
    CHECK_STR(got, REMOTE "\n");
    free(got);

    got = slurp(out);
    REQUIRE(got);
    CHECK_STR(got, "secret=" SECRET "\nfoo=a b'c\narg=x y\narg=it's\narg=$HOME\n"
                   "arg=`echo pwned`;exit 3\narg=\narg=--tbon-secret-stdin\n"
                   "envsecret=unset\neof\n");
    free(got);
}

TEST(remote_rsh_split_and_default)
{
    const char *rl = rsh_local();
    REQUIRE(rl);
    const char *rlog = tmp_path("rsh_log");
    setenv("TBON_RSH_LOG", rlog, 1);
    const char *av[] = { "tbon_true", NULL };
    tb_launch_spec_t s = { .host = REMOTE, .exe = "/bin/true", .argv = av, .secret = SECRET,
                           .rsh = rl };
    tbon_error_t err;
    CHECK_EXIT(run(&s, &err), 0);
    /* Several words: a program and its options. */
    char two[PATH_MAX + 16];
    snprintf(two, sizeof two, "/bin/sh  %s", rl);
    s.rsh = two;
    s.host = "other.example";
    CHECK_EXIT(run(&s, &err), 0);
    /* An exit status travels back as ssh's does. */
    s.exe = "/bin/false";
    s.host = REMOTE;
    CHECK_EXIT(run(&s, &err), 1);
    /* None given: TB_DEFAULT_RSH, whose ssh is found in PATH (here one that
     * says so and runs the command here); $TBON_RSH is the caller's to
     * pass (the library's configuration, util/config.h), not read here. */
    char ssh[PATH_MAX + 256], path[PATH_MAX + 64];
    snprintf(ssh, sizeof ssh, "#!/bin/sh\nwhile [ \"$1\" = -o ]; do shift 2; done\n"
             "echo \"ssh $1\" >>'%s'\nexec '%s' \"$@\"\n", rlog, rl);
    mkdir(tmp_path("bin"), 0700);
    script("bin/ssh", ssh);
    snprintf(path, sizeof path, "%s:/usr/bin:/bin", tmp_path("bin"));
    setenv("PATH", path, 1);
    setenv("TBON_RSH", "/nonexistent/tbon_rsh", 1);
    s.exe = "/bin/true";
    s.rsh = NULL;
    CHECK_EXIT(run(&s, &err), 0);
    s.rsh = "";
    CHECK_EXIT(run(&s, &err), 0);
    unsetenv("TBON_RSH");
    char *got = slurp(rlog);
    REQUIRE(got);
    CHECK_STR(got, REMOTE "\nother.example\n" REMOTE "\nssh " REMOTE "\n" REMOTE "\nssh "
                   REMOTE "\n" REMOTE "\n");
    free(got);
}

TEST(remote_missing_rsh_named)
{
    tbon_error_t err;
    pid_t pid = -1;
    const char *av[] = { "x", NULL };
    tb_launch_spec_t s = { .host = REMOTE, .exe = "/bin/true", .argv = av, .secret = SECRET,
                           .rsh = "/nonexistent/tbon_rsh" };
    CHECK_INT(tb_launch(&s, &pid, &err), TBON_ELAUNCH);
    CHECK_STR(err.msg, "cannot launch /bin/true on host " REMOTE ": remote shell "
                       "/nonexistent/tbon_rsh: No such file or directory");
    s.rsh = "tbon-no-such-remote-shell -x";     /* searched in PATH */
    CHECK_INT(tb_launch(&s, &pid, &err), TBON_ELAUNCH);
    CHECK_STR(err.msg, "cannot launch /bin/true on host " REMOTE ": remote shell "
                       "tbon-no-such-remote-shell: No such file or directory");
    CHECK_INT(pid, -1);
}

TEST(launcher_keeps_no_descriptors)
{
    const char *rl = rsh_local();
    REQUIRE(rl);
    int before = count_fds();
    const char *av[] = { "tbon_true", NULL };
    tb_launch_spec_t s = { .host = "localhost", .exe = "/bin/true", .argv = av,
                           .secret = SECRET, .rsh = rl };
    pid_t pids[60];
    tbon_error_t err;
    for (int i = 0; i < 60; i++) {
        s.host = i % 6 == 0 ? REMOTE : "localhost";
        pids[i] = -1;
        CHECK_INT(tb_launch(&s, &pids[i], &err), 0);
    }
    for (int i = 0; i < 60; i++)
        CHECK_EXIT(tb_reap(pids[i], 10000), 0);
    CHECK_INT(count_fds(), before);
    CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
}

/* ---- the launched side: tb_launch_take_secret, also end to end ---- */

/* Not a test of its own: run by local_and_remote_take_secret_end_to_end in a
 * launched copy of this binary (TBON_T_HELPER_OUT set). It takes the secret
 * from its real argv and reports what it got. */
TEST(helper_take_secret)
{
    const char *outp = getenv("TBON_T_HELPER_OUT");
    if (!outp)
        return;
    static char cmdline[8192], *argv[64];
    int fd = open("/proc/self/cmdline", O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, cmdline, sizeof cmdline - 1) : -1;
    if (fd >= 0)
        close(fd);
    int argc = 0;
    for (ssize_t i = 0; i < n && argc < 63; i += (ssize_t)strlen(cmdline + i) + 1)
        argv[argc++] = cmdline + i;
    argv[argc] = NULL;
    char secret[128] = "untouched";
    int rc = tb_launch_take_secret(&argc, argv, secret, sizeof secret);
    FILE *f = fopen(outp, "w");
    REQUIRE(f);
    fprintf(f, "rc=%d secret=%s env=%s argc=%d", rc, secret,
            getenv("TBON_SECRET") ? "set" : "unset", argc);
    for (int i = 1; i < argc; i++)
        fprintf(f, " [%s]", argv[i]);
    char target[64] = "";
    n = readlink("/proc/self/fd/0", target, sizeof target - 1);
    if (n > 0)
        target[n] = '\0';
    fprintf(f, " stdin=%s\n", target);
    fclose(f);
}

TEST(local_and_remote_take_secret_end_to_end)
{
    const char *rl = rsh_local();
    REQUIRE(rl);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    REQUIRE(n > 0);
    self[n] = '\0';
    const char *out = tmp_path("helper_out");
    char outkv[600];
    snprintf(outkv, sizeof outkv, "TBON_T_HELPER_OUT=%s", out);
    /* The harness prints to stdout: keep the helper quiet. */
    const char *av[] = { "sh", "-c", "exec \"$0\" helper_take_secret \"$@\" >/dev/null 2>&1",
                         self, "a b", NULL };
    const char *env[] = { outkv, NULL };
    tb_launch_spec_t s = { .host = "localhost", .exe = "/bin/sh", .argv = av, .env = env,
                           .secret = SECRET, .rsh = rl };
    tbon_error_t err;
    unsetenv("TBON_SECRET");
    CHECK_EXIT(run(&s, &err), 0);
    char *got = slurp(out);
    REQUIRE(got);
    CHECK_STR(got, "rc=0 secret=" SECRET " env=unset argc=3 [helper_take_secret] [a b] "
                   "stdin=/dev/null\n");
    free(got);
    unlink(out);

    s.host = REMOTE;
    CHECK_EXIT(run(&s, &err), 0);
    got = slurp(out);
    REQUIRE(got);
    CHECK_STR(got, "rc=0 secret=" SECRET " env=unset argc=3 [helper_take_secret] [a b] "
                   "stdin=/dev/null\n");
    free(got);
}

TEST(take_secret_from_env)
{
    setenv("TBON_SECRET", "abcdef", 1);
    char *argv[] = { "prog", "a", NULL };
    int argc = 2;
    char out[64];
    CHECK_INT(tb_launch_take_secret(&argc, argv, out, sizeof out), 0);
    CHECK_STR(out, "abcdef");
    CHECK(getenv("TBON_SECRET") == NULL);
    CHECK_INT(argc, 2);
    CHECK_STR(argv[1], "a");
    /* Taken once: a second call finds nothing. */
    CHECK_INT(tb_launch_take_secret(&argc, argv, out, sizeof out), TBON_EAUTH);
    /* Too long for out. */
    setenv("TBON_SECRET", "abcdef", 1);
    CHECK_INT(tb_launch_take_secret(&argc, argv, out, 4), TBON_EAUTH);
    CHECK(getenv("TBON_SECRET") == NULL);
}

/* Make fd 0 a pipe holding text (then end-of-file). */
static void stdin_from(const char *text, size_t len)
{
    int p[2];
    if (pipe(p) != 0)
        return;
    if (write(p[1], text, len) != (ssize_t)len)
        th_fail(__FILE__, __LINE__, "pipe write");
    close(p[1]);
    dup2(p[0], 0);
    close(p[0]);
}

static void stdin_target(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/fd/0", out, cap - 1);
    out[n > 0 ? n : 0] = '\0';
}

TEST(take_secret_from_stdin)
{
    unsetenv("TBON_SECRET");
    stdin_from("deadbeef\r\nmore input\n", 20);
    char *argv[] = { "prog", "x", "--tbon-secret-stdin", "y", NULL };
    int argc = 4;
    char out[64], target[64];
    CHECK_INT(tb_launch_take_secret(&argc, argv, out, sizeof out), 0);
    CHECK_STR(out, "deadbeef");
    CHECK_INT(argc, 3);
    CHECK_STR(argv[0], "prog");
    CHECK_STR(argv[1], "x");
    CHECK_STR(argv[2], "y");
    CHECK(argv[3] == NULL);
    stdin_target(target, sizeof target);
    CHECK_STR(target, "/dev/null");

    /* Last argument, no newline before end-of-file; the variable is dropped. */
    setenv("TBON_SECRET", "ignored", 1);
    stdin_from("cafe", 4);
    char *argv2[] = { "prog", "--tbon-secret-stdin", NULL };
    argc = 2;
    CHECK_INT(tb_launch_take_secret(&argc, argv2, out, sizeof out), 0);
    CHECK_STR(out, "cafe");
    CHECK_INT(argc, 1);
    CHECK(argv2[1] == NULL);
    CHECK(getenv("TBON_SECRET") == NULL);
}

TEST(take_secret_failures)
{
    unsetenv("TBON_SECRET");
    char out[64];
    char *argv[] = { "prog", "a", NULL };
    int argc = 2;
    CHECK_INT(tb_launch_take_secret(&argc, argv, out, sizeof out), TBON_EAUTH);
    CHECK_STR(out, "");
    CHECK_INT(argc, 2);

    /* Announced but empty stdin: the argument is still removed. */
    stdin_from("", 0);
    char *argv2[] = { "prog", "--tbon-secret-stdin", "b", NULL };
    argc = 3;
    CHECK_INT(tb_launch_take_secret(&argc, argv2, out, sizeof out), TBON_EAUTH);
    CHECK_INT(argc, 2);
    CHECK_STR(argv2[1], "b");
    CHECK(argv2[2] == NULL);

    /* An empty line. */
    stdin_from("\n", 1);
    char *argv3[] = { "prog", "--tbon-secret-stdin", NULL };
    argc = 2;
    CHECK_INT(tb_launch_take_secret(&argc, argv3, out, sizeof out), TBON_EAUTH);

    /* Longer than out, and a line longer than any secret. */
    stdin_from("0123456789\n", 11);
    char *argv4[] = { "prog", "--tbon-secret-stdin", NULL };
    argc = 2;
    CHECK_INT(tb_launch_take_secret(&argc, argv4, out, 8), TBON_EAUTH);
    static char big[3000];
    memset(big, 'a', sizeof big);
    stdin_from(big, sizeof big);
    char *argv5[] = { "prog", "--tbon-secret-stdin", NULL };
    argc = 2;
    CHECK_INT(tb_launch_take_secret(&argc, argv5, out, sizeof out), TBON_EAUTH);
    char target[64];
    stdin_target(target, sizeof target);
    CHECK_STR(target, "/dev/null");
}

/* ---- reaping ---- */

/* Start tbon_sleep 100 (a link to sleep, named so leaks are caught). */
static pid_t start_sleeper(void)
{
    const char *exe = named_link("tbon_sleep", sleep_bin());
    const char *av[] = { "tbon_sleep", "100", NULL };
    tb_launch_spec_t s = { .host = "localhost", .exe = exe, .argv = av, .secret = SECRET };
    pid_t pid = -1;
    tbon_error_t err;
    if (!exe || tb_launch(&s, &pid, &err) != 0)
        return -1;
    return pid;
}

static void reap_cases(void)
{
    tbon_error_t err;
    pid_t pid = -1;
    const char *av[] = { "sh", "-c", "exit 7", NULL };
    tb_launch_spec_t s = { .host = "localhost", .exe = "/bin/sh", .argv = av, .secret = SECRET };
    REQUIRE(tb_launch(&s, &pid, &err) == 0);
    double t0 = now_ms();
    CHECK_EXIT(tb_reap(pid, 10000), 7);
    CHECK(now_ms() - t0 < 5000);

    /* One that must be killed: no sooner than asked, and soon after. */
    pid = start_sleeper();
    REQUIRE(pid > 0);
    t0 = now_ms();
    int st = tb_reap(pid, 300);
    double took = now_ms() - t0;
    CHECK(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(took >= 290);
    CHECK(took < 3000);
    CHECK(kill(pid, 0) < 0 && errno == ESRCH);

    /* Timeout 0: killed at once. */
    pid = start_sleeper();
    REQUIRE(pid > 0);
    t0 = now_ms();
    st = tb_reap(pid, 0);
    CHECK(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(now_ms() - t0 < 3000);

    /* Already exited before the call. */
    const char *av2[] = { "sh", "-c", "exit 3", NULL };
    s.argv = av2;
    REQUIRE(tb_launch(&s, &pid, &err) == 0);
    siginfo_t si;
    REQUIRE(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) == 0);
    CHECK_EXIT(tb_reap(pid, 0), 3);

    /* Killed by someone else while we wait. */
    pid = start_sleeper();
    REQUIRE(pid > 0);
    kill(pid, SIGTERM);
    st = tb_reap(pid, 10000);
    CHECK(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
}

TEST(reap_exit_and_kill_pidfd)
{
    reap_cases();
}

TEST(reap_exit_and_kill_fallback)
{
    tb_reap_force_fallback(1);
    reap_cases();
    tb_reap_force_fallback(0);
}

TEST(reap_not_a_child)
{
    CHECK_INT(tb_reap(getpid(), 100), -1);
    CHECK_INT(tb_reap(getppid(), 100), -1);    /* and it was not signalled */
    CHECK(kill(getppid(), 0) == 0);
    CHECK_INT(tb_reap(0, 100), -1);
    CHECK_INT(tb_reap(-1, 100), -1);
    /* Reaped twice. */
    const char *av[] = { "tbon_true", NULL };
    tb_launch_spec_t s = { .host = "localhost", .exe = "/bin/true", .argv = av };
    pid_t pid = -1;
    tbon_error_t err;
    REQUIRE(tb_launch(&s, &pid, &err) == 0);
    CHECK_EXIT(tb_reap(pid, -1), 0);
    CHECK_INT(tb_reap(pid, 100), -1);
}

/* ---- host locality ---- */

TEST(host_is_local_names_and_addresses)
{
    CHECK_INT(tb_host_is_local(NULL), 1);
    CHECK_INT(tb_host_is_local(""), 1);
    CHECK_INT(tb_host_is_local("localhost"), 1);
    CHECK_INT(tb_host_is_local("LocalHost"), 1);
    CHECK_INT(tb_host_is_local("127.0.0.1"), 1);
    CHECK_INT(tb_host_is_local("127.3.4.5"), 1);
    CHECK_INT(tb_host_is_local("::1"), 1);
    CHECK_INT(tb_host_is_local(REMOTE), 0);
    CHECK_INT(tb_host_is_local("2001:db8::17"), 0);
    CHECK_INT(tb_host_is_local(REMOTE), 0);               /* cached, same answer */
    CHECK_INT(tb_host_is_local("128.0.0.1"), 0);

    char hn[256];
    REQUIRE(gethostname(hn, sizeof hn) == 0);
    CHECK_INT(tb_host_is_local(hn), 1);
    hn[strcspn(hn, ".")] = '\0';
    CHECK_INT(tb_host_is_local(hn), 1);

    /* Every address of every interface. */
    struct ifaddrs *ifs = NULL, *i;
    REQUIRE(getifaddrs(&ifs) == 0);
    int checked = 0;
    for (i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
                             i->ifa_addr->sa_family != AF_INET6))
            continue;
        char num[INET6_ADDRSTRLEN + 32];
        socklen_t len = i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                          : sizeof(struct sockaddr_in6);
        if (getnameinfo(i->ifa_addr, len, num, sizeof num, NULL, 0, NI_NUMERICHOST) != 0)
            continue;
        if (tb_host_is_local(num) != 1)
            th_fail(__FILE__, __LINE__, "interface address %s not local", num);
        checked++;
    }
    freeifaddrs(ifs);
    CHECK(checked >= 1);
}
