/* harness.c - main() for test binaries: runs each TEST in a forked child */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Under AddressSanitizer each case checks for leaks before it exits (_exit
 * skips LeakSanitizer's own check at exit). */
#if defined(__SANITIZE_ADDRESS__)
#define TH_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TH_LSAN 1
#endif
#endif
#ifdef TH_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#define TH_MAX_CASES 512

static struct { const char *name; th_fn fn; int is_long; } cases[TH_MAX_CASES];
static int ncases;
int th_failures;
static char tmpdir[256];
static char planned[256];       /* the current case's, named by the harness */

void th_register(const char *name, th_fn fn, int is_long)
{
    if (ncases == TH_MAX_CASES) {
        fprintf(stderr, "harness: more than %d cases\n", TH_MAX_CASES);
        exit(2);
    }
    cases[ncases].name = name;
    cases[ncases].fn = fn;
    cases[ncases].is_long = is_long;
    ncases++;
}

void th_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "    %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    th_failures++;
}

const char *th_tmpdir(void)
{
    if (!tmpdir[0] && planned[0] && mkdir(planned, 0700) == 0)
        snprintf(tmpdir, sizeof tmpdir, "%s", planned);
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/tbon-test-XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("harness: mkdtemp");
            exit(2);
        }
    }
    return tmpdir;
}

/* The last `keep` lines of file path (those that fit a line of 400). */
#define TH_DUMP_MAX 40
static void dump_tail(const char *path, const char *name, size_t keep)
{
    static char line[TH_DUMP_MAX][400];
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = 0;
    while (fgets(line[n % keep], sizeof line[0], f))
        n++;
    fclose(f);
    if (n == 0)
        return;
    fprintf(stderr, "    --- %s (%zu lines%s)\n", name, n, n > keep ? ", the last ones" : "");
    for (size_t i = n > keep ? n - keep : 0; i < n; i++) {
        const char *l = line[i % keep];
        fprintf(stderr, "    | %s%s", l, l[0] && l[strlen(l) - 1] == '\n' ? "" : "\n");
    }
}

void th_dump_logs(const char *dir)
{
    DIR *d = opendir(dir);
    int files = 0;
    for (struct dirent *e; d && (e = readdir(d)) && files < 24;) {
        char p[PATH_MAX];
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        dump_tail(p, e->d_name, strcmp(e->d_name, "front-end.log") == 0 ? TH_DUMP_MAX : 12);
        files++;
    }
    if (d)
        closedir(d);
}

/* The case that ran in planned died of a signal: what its logs say; then
 * its directory goes (it could not remove it). */
static void after_death(void)
{
    struct stat st;
    if (!planned[0] || stat(planned, &st) != 0)
        return;
    char logs[300], cmd[300];
    snprintf(logs, sizeof logs, "%s/logs", planned);
    th_dump_logs(logs);
    if (getenv("TH_KEEP")) {
        fprintf(stderr, "harness: kept %s\n", planned);
        return;
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", planned);
    if (system(cmd) != 0)
        fprintf(stderr, "harness: could not remove %s\n", planned);
}

const char *th_write_file(const char *name, const char *text)
{
    static char paths[16][512];
    static int slot;
    char *path = paths[slot++ % 16];
    snprintf(path, sizeof paths[0], "%s/%s", th_tmpdir(), name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
    return path;
}

char *th_read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    if (!s) {
        if (f)
            fclose(f);
        return NULL;
    }
    while (f && !feof(f)) {
        if (n + 2048 > cap) {
            char *ns = realloc(s, cap *= 2);
            if (!ns)
                break;
            s = ns;
        }
        n += fread(s + n, 1, cap - n - 1, f);
    }
    s[n] = '\0';
    if (f)
        fclose(f);
    return s;
}

uint64_t th_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

void th_fill_random(void *p, size_t n, uint64_t seed)
{
    uint8_t *b = p;
    /* Spread the seed over the state; odd, hence never the stuck state 0. */
    uint64_t state = seed * 0x9E3779B97F4A7C15ull | 1;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t r = th_rand(&state);
        for (size_t k = 0; k < 8 && i + k < n; k++)
            b[i + k] = (uint8_t)(r >> (56 - 8 * k));
    }
}

static int run_case(int i, int timeout_s)
{
    const char *base = getenv("TMPDIR");
    snprintf(planned, sizeof planned, "%s/tbon-test-%ld-%d", base ? base : "/tmp",
             (long)getpid(), i);
    tmpdir[0] = '\0';
    pid_t pid = fork();
    if (pid < 0) {
        perror("harness: fork");
        return 1;
    }
    if (pid == 0) {
        alarm((unsigned)timeout_s);
        th_failures = 0;
        cases[i].fn();
        if (tmpdir[0] && getenv("TH_KEEP"))       /* debugging: keep the logs */
            fprintf(stderr, "harness: kept %s\n", tmpdir);
        else if (tmpdir[0]) {
            char cmd[300];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
            if (system(cmd) != 0)
                fprintf(stderr, "harness: could not remove %s\n", tmpdir);
        }
        fflush(NULL);
#ifdef TH_LSAN
        if (__lsan_do_recoverable_leak_check()) {
            fprintf(stderr, "  %s: memory leaked (see above)\n", cases[i].name);
            th_failures++;
        }
#endif
        _exit(th_failures ? 1 : 0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "    killed by signal %d%s\n", WTERMSIG(status),
                WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
        after_death();
        return 1;
    }
    return WEXITSTATUS(status) != 0;
}

int main(int argc, char **argv)
{
    const char *prog = strrchr(argv[0], '/');
    prog = prog ? prog + 1 : argv[0];
    const char *t = getenv("TBON_TEST_TIMEOUT");
    int timeout_s = t && atoi(t) > 0 ? atoi(t) : 60;
    const char *tier = getenv("TBON_TEST_TIER");
    int short_tier = tier && strcmp(tier, "short") == 0;
    if (tier && !short_tier && strcmp(tier, "full") != 0) {
        fprintf(stderr, "%s: TBON_TEST_TIER=%s: expected short or full\n", prog, tier);
        return 2;
    }
    int passed = 0, failed = 0, left = 0;

    /* --list: the cases, one a line ("NAME" or "NAME long"), nothing run */
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < ncases; i++)
            printf("%s%s\n", cases[i].name, cases[i].is_long ? " long" : "");
        return 0;
    }

    /* Arguments that name no case at all are an error, not a run of
     * nothing. (Words besides a case's name are allowed: a case may run
     * its own binary as a helper with arguments of its own.) */
    int known = 0;
    for (int a = 1; a < argc; a++)
        for (int i = 0; i < ncases && !known; i++)
            known = strcmp(argv[a], cases[i].name) == 0;
    if (argc > 1 && !known) {
        fprintf(stderr, "%s: no case named %s%s (--list lists them)\n", prog, argv[1],
                argc > 2 ? " or as the other arguments" : "");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 0; i < ncases; i++) {
        if (argc > 1) {
            int wanted = 0;
            for (int a = 1; a < argc; a++)
                wanted |= strcmp(argv[a], cases[i].name) == 0;
            if (!wanted)
                continue;
        } else if (short_tier && cases[i].is_long) {
            left++;
            continue;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int bad = run_case(i, timeout_s);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        printf("%s %s/%s (%.0f ms)\n", bad ? "FAIL" : "ok  ", prog, cases[i].name, ms);
        if (bad)
            failed++;
        else
            passed++;
    }
    if (left)
        printf("%s: %d long case%s left to the full tier\n", prog, left, left == 1 ? "" : "s");
    printf("%s: %d passed, %d failed\n", prog, passed, failed);
    return failed ? 1 : 0;
}

/* 1 once /proc/PID/environ has a byte (every process these tests start has
 * an environment). */
static int environ_set(int pid)
{
    char path[64], c;
    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, &c, 1);
    close(fd);
    return n == 1;
}

int th_wait_comm(int pid, const char *name, int ms)
{
    for (int waited = 0; waited <= ms; waited += 10) {
        char path[64], buf[64] = "";
        snprintf(path, sizeof path, "/proc/%d/comm", pid);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(buf, sizeof buf, f))
                buf[0] = 0;
            fclose(f);
        }
        /* The name changes in begin_new_exec, before create_elf_tables has
         * set the new image's arguments and environment: until then
         * /proc/PID/environ reads empty, and a test that reads it finds no
         * variable (test_tasks, once in a run under the thread sanitizer).
         * The environment's end is set last, so wait for it too. */
        if (strncmp(buf, name, strlen(name)) == 0 && environ_set(pid))
            return 1;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}
