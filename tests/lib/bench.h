/* bench.h - what every benchmark (bench/) shares: a monotonic clock, the
 * median of repeated runs, a fatal-error exit, and the Markdown row format
 * "| area | metric | value | unit | notes |" that bench/run.sh collects.
 * Header-only (static inline functions, no state).
 */
#ifndef TB_BENCH_H
#define TB_BENCH_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC; only differences mean anything. */
static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (the upper one for even n); sorts v in place. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

/* A measurement could not be taken: say which ("PROG: WHAT failed") and exit 1,
 * so that no row is printed for it. */
__attribute__((noreturn)) static inline void bench_die(const char *prog, const char *what)
{
    fprintf(stderr, "%s: %s failed\n", prog, what);
    exit(1);
}

/* Print one row "| area | metric | value | unit | notes |" to stdout, value
 * formatted by value_fmt (one double conversion, e.g. "%.1f"), the notes by
 * the printf format notes_fmt and its arguments. */
__attribute__((format(printf, 6, 7)))
static inline void bench_row(const char *area, const char *metric, const char *value_fmt,
                             double value, const char *unit, const char *notes_fmt, ...)
{
    va_list ap;
    printf("| %s | %s | ", area, metric);
    printf(value_fmt, value);
    printf(" | %s | ", unit);
    va_start(ap, notes_fmt);
    vprintf(notes_fmt, ap);
    va_end(ap);
    printf(" |\n");
}

#ifdef TBON_TBON_H
#include <string.h>
#include <unistd.h>

/* This program was started as a back-end of its own tree (bench_start_tree
 * gives "--be"). */
static inline int bench_is_be(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--be") == 0)
            return 1;
    return 0;
}

/* The back-end's network (tbon_be_create), or exit 1 with a message. */
static inline tbon_net_t *bench_be_create(const char *prog, int *argc, char ***argv)
{
    tbon_error_t err = { 0, "" };
    tbon_net_t *net = tbon_be_create(argc, argv, &err);
    if (!net) {
        fprintf(stderr, "%s --be: %s\n", prog, err.msg);
        exit(1);
    }
    return net;
}

/* A front-end over the topology text (written to a temporary file, removed
 * once read), this very program (/proc/self/exe) at every back-end with
 * argument be_arg; default options. Exits with a message on failure. */
static inline tbon_net_t *bench_start_tree(const char *prog, const char *text,
                                           const char *be_arg)
{
    static char self[4096];
    ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
    if (l <= 0)
        bench_die(prog, "readlink /proc/self/exe");
    self[l] = 0;
    char topo[] = "/tmp/bench_tree.XXXXXX";
    int fd = mkstemp(topo);
    size_t len = strlen(text);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len)
        bench_die(prog, "the topology file");
    close(fd);
    const char *const be_argv[] = { be_arg, NULL };
    tbon_error_t err = { 0, "" };
    tbon_net_t *net = tbon_fe_create(topo, self, be_argv, NULL, &err);
    unlink(topo);
    if (!net) {
        fprintf(stderr, "%s: tbon_fe_create: %s\n", prog, err.msg);
        exit(1);
    }
    return net;
}
#endif

#endif
