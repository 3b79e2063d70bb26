/* bench.h - what every bench/bench_*.c program shares: a monotonic clock, the
 * median of repeated runs, a fatal-error exit, and the Markdown row format
 * "| area | metric | value | unit | notes |" that bench/run.sh collects.
 * Header-only: each benchmark is a single-file program.
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

#endif
