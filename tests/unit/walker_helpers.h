/* walker_helpers.h - what the stack walker tests share: running the example
 * target stat/examples/stat_hang (started, waited for until its workers are
 * stuck, always stopped), a target's state from /proc, and the stacks
 * eu-stack prints for the same process. Header-only, included after
 * harness.h by test_walker.c. */
#ifndef TW_WALKER_HELPERS_H
#define TW_WALKER_HELPERS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TW_MAX_WORKERS 8
#define TW_MAX_FRAMES  64
#define TW_MAX_THREADS 8

/* A running stat_hang: its parent and workers (by rank), and the path each
 * worker ends in as it printed it ("main>do_work>..."). */
typedef struct tw_hang {
    pid_t parent;
    int n;
    pid_t pid[TW_MAX_WORKERS];
    char path[TW_MAX_WORKERS][128];
} tw_hang_t;

static inline double tw_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static inline void tw_nap(void)
{
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* /proc/PID/REL into buf (NUL-terminated); its length, or -1. */
static inline ssize_t tw_read(pid_t pid, const char *rel, char *buf, size_t cap)
{
    char path[512];
    snprintf(path, sizeof path, "/proc/%ld/%s", (long)pid, rel);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/* The state letter of pid (0 if it is gone). */
static inline char tw_state(pid_t pid)
{
    char buf[1024];
    if (tw_read(pid, "stat", buf, sizeof buf) < 0)
        return 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : 0;
}

/* TracerPid of pid (-1 if it is gone). */
static inline long tw_tracer(pid_t pid)
{
    char buf[4096];
    if (tw_read(pid, "status", buf, sizeof buf) < 0)
        return -1;
    const char *p = strstr(buf, "TracerPid:");
    return p ? strtol(p + 10, NULL, 10) : -1;
}

/* Neither stopped nor traced: what every sample must leave behind. */
static inline bool tw_running(pid_t pid)
{
    char st = tw_state(pid);
    return st != 0 && st != 't' && st != 'T' && tw_tracer(pid) == 0;
}

/* stat_hang in the build directory of this test binary
 * (build/tests/unit/test_walker -> build/stat/examples/stat_hang). */
static inline const char *tw_hang_exe(void)
{
    static char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 64);
    if (n <= 0)
        return NULL;
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    if (!slash)
        return NULL;
    strcpy(slash, "/../../stat/examples/stat_hang");
    return access(path, X_OK) == 0 ? path : NULL;
}

/* Whether every thread of pid sits in one of the syscalls nr[0..nn). */
static inline bool tw_in_syscall(pid_t pid, const long *nr, int nn, int threads)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
    DIR *d = opendir(path);
    if (!d)
        return false;
    int seen = 0, ok = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char rel[320], buf[256];
        snprintf(rel, sizeof rel, "task/%s/syscall", e->d_name);
        seen++;
        if (tw_read(pid, rel, buf, sizeof buf) < 0 || buf[0] < '0' || buf[0] > '9')
            continue;
        long s = strtol(buf, NULL, 10);
        for (int i = 0; i < nn; i++)
            ok += s == nr[i];
    }
    closedir(d);
    return seen == threads && ok == threads;
}

/* Whether worker r of h is where its rank leads (the spinner: exec'd). */
static inline bool tw_worker_ready(const tw_hang_t *h, int r)
{
    static const long rd[] = {0};                   /* read */
    static const long sleep[] = {230, 35, 219};     /* clock_nanosleep, nanosleep, restart */
    if (r == 1) {
        /* PMI_RANK is in the environment from the exec on (the spin test
         * then samples until the stack ends in spin). */
        char env[16384];
        ssize_t n = tw_read(h->pid[r], "environ", env, sizeof env);
        return n > 0 && memmem(env, (size_t)n, "PMI_RANK=1", 11) != NULL;
    }
    if (r == 2)
        return tw_in_syscall(h->pid[r], sleep, 3, 1);
    return tw_in_syscall(h->pid[r], rd, 1, r == 3 ? 2 : 1);
}

/* Stop h: SIGTERM to the parent (it kills its workers), then reap it. */
static inline void tw_hang_stop(tw_hang_t *h)
{
    if (h->parent <= 0)
        return;
    kill(h->parent, SIGTERM);
    int st;
    while (waitpid(h->parent, &st, 0) < 0 && errno == EINTR)
        ;
    h->parent = 0;
}

/* Start stat_hang n and wait (bounded) until its workers are stuck. false,
 * with a message and nothing left running, on failure. */
static inline bool tw_hang_start(tw_hang_t *h, int n)
{
    memset(h, 0, sizeof *h);
    const char *exe = tw_hang_exe();
    if (!exe || n > TW_MAX_WORKERS) {
        fprintf(stderr, "    no stat_hang next to this test binary (make all builds it)\n");
        return false;
    }
    int fds[2];
    if (pipe(fds) != 0)
        return false;
    pid_t me = getpid();
    h->parent = fork();
    if (h->parent == 0) {
        /* Dies with the test case however it ends; its workers die with it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != me)
            _exit(127);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        char arg[16];
        snprintf(arg, sizeof arg, "%d", n);
        execl(exe, "stat_hang", arg, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    if (h->parent < 0) {
        close(fds[0]);
        return false;
    }
    /* The parent prints its lines at once; a bounded wait for them. */
    char buf[4096];
    size_t len = 0;
    double t0 = tw_now_ms();
    while (h->n < n && tw_now_ms() - t0 < 10000) {
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t got = read(fds[0], buf + len, sizeof buf - 1 - len);
        if (got <= 0)
            break;
        len += (size_t)got;
        buf[len] = '\0';
        char *nl;
        while ((nl = strchr(buf, '\n')) != NULL) {
            *nl = '\0';
            int r;
            long pid;
            char path[128];
            if (sscanf(buf, "%d %ld %127s", &r, &pid, path) == 3 && r == h->n && r < n) {
                h->pid[r] = (pid_t)pid;
                snprintf(h->path[r], sizeof h->path[r], "%s", path);
                h->n++;
            }
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len + 1);
        }
    }
    close(fds[0]);
    bool ready = h->n == n;
    for (int r = 0; ready && r < n; r++) {
        while (!tw_worker_ready(h, r) && tw_now_ms() - t0 < 10000)
            tw_nap();
        ready = tw_worker_ready(h, r);
    }
    if (!ready) {
        fprintf(stderr, "    stat_hang %d: %d workers started, not all stuck within 10 s\n",
                n, h->n);
        tw_hang_stop(h);
    }
    return ready;
}

/* The stacks eu-stack prints for pid: per thread (in its order) the frames'
 * names, outermost first. With detail: "module`name@file:line" as a walker
 * with ST_WALK_MODULES | ST_WALK_LINES names them (base names). */
typedef struct tw_eu {
    int nthreads;
    pid_t tid[TW_MAX_THREADS];
    int n[TW_MAX_THREADS];
    char name[TW_MAX_THREADS][TW_MAX_FRAMES][256];
} tw_eu_t;

static inline const char *tw_base(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static inline bool tw_eu_stack(pid_t pid, bool detail, tw_eu_t *eu)
{
    memset(eu, 0, sizeof *eu);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "eu-stack %s -p %ld 2>/dev/null", detail ? "-s -m" : "", (long)pid);
    FILE *f = popen(cmd, "r");
    if (!f)
        return false;
    char line[1024];
    int t = -1;
    char (*last)[256] = NULL;                        /* the frame a source line belongs to */
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        long tid;
        if (sscanf(line, "TID %ld:", &tid) == 1 && eu->nthreads < TW_MAX_THREADS) {
            t = eu->nthreads++;
            eu->tid[t] = (pid_t)tid;
            last = NULL;
            continue;
        }
        if (t >= 0 && line[0] == '#' && eu->n[t] < TW_MAX_FRAMES) {
            /* "#N  0xADDR NAME" or, with -m, "#N  0xADDR NAME - MODULE" */
            char *p = strstr(line, "0x");
            p = p ? strchr(p, ' ') : NULL;
            char name[256] = "", module[1024] = "";
            if (p) {
                char *dash = strstr(p, " - ");
                if (dash) {
                    snprintf(module, sizeof module, "%s", tw_base(dash + 3));
                    *dash = '\0';
                }
                snprintf(name, sizeof name, "%s", p + 1);
            }
            last = &eu->name[t][eu->n[t]++];
            char full[sizeof module + sizeof name + 1];
            if (detail)
                snprintf(full, sizeof full, "%s`%s", module, name);
            else
                snprintf(full, sizeof full, "%s", name);
            snprintf(*last, sizeof *last, "%.255s", full);   /* (cut short) */
            continue;
        }
        if (detail && last && strncmp(line, "    ", 4) == 0) {
            /* "    FILE:LINE:COL" or "    FILE:LINE" */
            char file[1024];
            int lineno;
            char *colon = strchr(line + 4, ':');
            if (colon && sscanf(colon + 1, "%d", &lineno) == 1) {
                *colon = '\0';
                snprintf(file, sizeof file, "%s", tw_base(line + 4));
                size_t l = strlen(*last);
                snprintf(*last + l, sizeof *last - l, "@%s:%d", file, lineno);
            }
            last = NULL;
        }
    }
    int rc = pclose(f);
    /* Innermost first as printed; reverse into outermost first. */
    for (int i = 0; i < eu->nthreads; i++)
        for (int a = 0, b = eu->n[i] - 1; a < b; a++, b--) {
            char tmp[256];
            memcpy(tmp, eu->name[i][a], sizeof tmp);
            memcpy(eu->name[i][a], eu->name[i][b], sizeof tmp);
            memcpy(eu->name[i][b], tmp, sizeof tmp);
        }
    return rc != -1 && eu->nthreads > 0;
}

#endif
