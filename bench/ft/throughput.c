/* throughput.c - (b) the throughput of a streaming union with fault
 * tolerance on and off, bench_ft --throughput: pairs of 8x8 trees, one
 * with and one without, their rounds alternating; the cost is the mean of
 * the per-pair differences, beside an A/A run of the same method. The
 * trees and rounds here serve link.c too. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "ft.h"
#include "lib/bench.h"
#include "lib/watchdog.h"

#define TP_PACKETS 2500         /* per back-end and round */
#define TP_BLOCKS 16            /* fresh pairs of trees */
#define TP_PAIRS 4              /* pairs of rounds per block, after a warm-up round each */
#define TP_ROUNDS (TP_BLOCKS * TP_PAIRS)

/* The machine's busy time so far, in clock ticks (/proc/stat: user, nice,
 * system, irq, softirq, steal). Per-process accounting (/proc/PID/stat,
 * schedstat) undercounts badly on this VM; the machine-wide count does not. */
static double busy_ticks(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = { 0 };
    if (!f)
        return 0;
    int k = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    return k == 8 ? (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) : 0;
}

/* Start a tree of (b) on topo, its union stream, and a first wave. */
void tp_start(struct tp_tree *t, const char *topo, size_t n, size_t size, int no_ft)
{
    t->n = n;
    t->size = size;
    t->net = start(topo, n, no_ft);
    union_stream(t->net, &t->u, n, size, &t->th);
    union_wave(&t->u, 1, 30);
}

/* One round: every back-end sends TP_PACKETS packets and its mark; the FE
 * waits for every mark. Returns the values sent per second, from the request
 * to the last mark's arrival. */
double tp_round(struct tp_tree *t, uint32_t round, double *cpu_per_value)
{
    return tp_round_n(t, round, TP_PACKETS, cpu_per_value);
}

/* The same with `packets` packets per back-end. */
double tp_round_n(struct tp_tree *t, uint32_t round, uint32_t packets, double *cpu_per_value)
{
    struct uwatch *u = &t->u;
    pthread_mutex_lock(&fe.mu);
    u->round = round;
    u->nmarks = 0;
    u->mark_total = 0;
    memset(u->marked, 0, t->size);
    pthread_mutex_unlock(&fe.mu);
    double t0 = bench_now(), dl = t0 + 30, b0 = busy_ticks();
    request(u->s, OP_STREAM, round, packets);
    pthread_mutex_lock(&fe.mu);
    while (u->nmarks < t->n && !u->error[0] && bench_now() < dl)
        fe_wait(dl);
    size_t marks = u->nmarks;
    uint64_t total = u->mark_total;
    double t1 = u->last_mark;
    pthread_mutex_unlock(&fe.mu);
    *cpu_per_value = total ? (busy_ticks() - b0) * 1e9 / (double)sysconf(_SC_CLK_TCK) /
                             (double)total : 0;
    if (u->error[0])
        ft_die("%s", u->error);
    if (marks < t->n) {
        char late[160] = "";
        size_t k = 0;
        for (size_t r = 1; r < t->size && k + 12 < sizeof late; r++)
            if (u->sent[r] && !u->marked[r])
                k += (size_t)snprintf(late + k, sizeof late - k, " %zu", r);
        ft_die("streaming round %u: %zu of %zu back-ends finished within 30 s (not:%s)", round,
               marks, t->n, late);
    }
    return (double)total / (t1 - t0);
}

/* Check that the FE got the union of everything sent, then tear down. */
void tp_stop(struct tp_tree *t)
{
    struct uwatch *u = &t->u;
    union_stream_end(u, t->th);     /* no more results: read without the lock */
    for (size_t r = 0; r < t->size; r++) {
        uint64_t want = u->sent[r] < STREAM_POOL ? u->sent[r] : STREAM_POOL;
        if (u->distinct[r] != want)
            ft_die("streaming: rank %zu sent %" PRIu64 " values (%" PRIu64 " distinct), the "
                   "FE got %u of them", r, u->sent[r], want, u->distinct[r]);
    }
    union_stream_free(u);
    stop(t->net);
}

struct tp_result {
    double on, off;             /* medians of the rounds, values/s */
    double con, coff, cmean, cci; /* CPU ns per value (machine-wide): means, and the
                                   * per-pair cost (con - coff) / coff in %, 95% half-width */
    double mean, ci;            /* per-pair cost (off - on) / off in %: mean, 95% half-width */
    double pmed, lo, hi;        /* median and range of the per-pair costs */
    double aa_mean, aa_ci;      /* the same of an A/A run (both without), if one was made */
    double aa_cmean, aa_cci;
    int blocks;
};

/* Student's t for a two-sided 95% interval with df degrees of freedom. */
static double t95(int df)
{
    static const double t[] = { 12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23 };
    return df < 1 ? 0 : df <= 10 ? t[df - 1] : df <= 30 ? 2.04 : df <= 60 ? 2.00 : 1.98;
}

/* Mean of v[0..n) and the half-width of its 95% interval. */
static void mean_ci(const double *v, int n, double *mean, double *ci)
{
    double sum = 0, ss = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    *mean = n ? sum / n : 0;
    for (int i = 0; i < n; i++)
        ss += (v[i] - *mean) * (v[i] - *mean);
    *ci = n > 1 ? t95(n - 1) * sqrt(ss / (n - 1) / n) : 0;
}

/* The 8x8 topology of (b) written as name; its back-ends and size. */
const char *tp_topology(const char *name, size_t *n, size_t *size)
{
    const uint32_t fan[] = { 8, 8 };
    const char *hosts[] = { "localhost" };
    tbon_error_t err = { 0 };
    tb_topology_t *t = tb_topology_gen_shape(fan, 2, hosts, 1, &err);
    if (!t)
        ft_die("8x8: %s", err.msg);
    *n = tb_topology_num_leaves(t);
    *size = tb_topology_size(t);
    return write_topology(t, name);
}

/* Pairs of rounds of two trees, one with fault tolerance (no_ft_a = 0) and
 * one without, or both without (no_ft_a = 1: the A/A check of the method).
 * Round times on this machine vary by +-20% from one round to the next, and
 * by a few percent from one pair of trees to another (where their processes
 * land), so the trees are started afresh in blocks, in alternating order,
 * and within a block the rounds alternate a, b, b, a, ...; the cost is the
 * mean of the per-pair differences, with its 95% interval. */
static void tp_run(int blocks, int no_ft_a, struct tp_result *out)
{
    size_t n, size;
    const char *topo = tp_topology("8x8", &n, &size);
    double va[TP_ROUNDS], vb[TP_ROUNDS], d[TP_ROUNDS], ca[TP_ROUNDS], cb[TP_ROUNDS],
           cd[TP_ROUNDS], dummy;
    int np = 0;
    for (int bl = 0; bl < blocks; bl++) {
        struct tp_tree a, b;
        if (bl % 2 == 0) {
            tp_start(&a, topo, n, size, no_ft_a);
            tp_start(&b, topo, n, size, 1);
        } else {
            tp_start(&b, topo, n, size, 1);
            tp_start(&a, topo, n, size, no_ft_a);
        }
        tb_wd_arm("throughput rounds", 60 + TP_PAIRS * 3);
        tp_round(&a, 1, &dummy);
        tp_round(&b, 1, &dummy);
        for (int r = 0; r < TP_PAIRS && np < TP_ROUNDS; r++, np++) {
            int a_first = (r + bl) % 2 == 0;
            double cx, cy;
            double x = tp_round(a_first ? &a : &b, (uint32_t)r + 2, &cx);
            double y = tp_round(a_first ? &b : &a, (uint32_t)r + 2, &cy);
            va[np] = a_first ? x : y;
            vb[np] = a_first ? y : x;
            ca[np] = a_first ? cx : cy;
            cb[np] = a_first ? cy : cx;
            d[np] = (vb[np] - va[np]) / vb[np] * 100;
            cd[np] = (ca[np] - cb[np]) / cb[np] * 100;
        }
        tp_stop(&a);
        tp_stop(&b);
    }
    out->lo = out->hi = d[0];
    for (int r = 0; r < np; r++) {
        out->lo = d[r] < out->lo ? d[r] : out->lo;
        out->hi = d[r] > out->hi ? d[r] : out->hi;
    }
    mean_ci(d, np, &out->mean, &out->ci);
    mean_ci(cd, np, &out->cmean, &out->cci);
    double ci;
    mean_ci(ca, np, &out->con, &ci);
    mean_ci(cb, np, &out->coff, &ci);
    out->pmed = bench_median(d, np);
    out->on = bench_median(va, np);
    out->off = bench_median(vb, np);
    out->blocks = blocks;
    fprintf(stderr, "%s: streaming union 8x8%s: %.0f vs %.0f values/s; per pair %+.1f%% +- %.1f "
            "(median %+.1f, %+.1f to %+.1f); CPU %.0f vs %.0f ns/value, %+.1f%% +- %.1f\n", PROG,
            no_ft_a ? " (A/A)" : "", out->on, out->off, out->mean, out->ci, out->pmed, out->lo,
            out->hi, out->con, out->coff, out->cmean, out->cci);
}

/* The A/A run, then the run of on against off: throughput_rows's figures. */
static struct tp_result tp_res;

void throughput_run(void)
{
    struct tp_result aa;
    tp_run(TP_BLOCKS, 1, &aa);
    tp_run(TP_BLOCKS, 0, &tp_res);
    tp_res.aa_mean = aa.mean;
    tp_res.aa_ci = aa.ci;
    tp_res.aa_cmean = aa.cmean;
    tp_res.aa_cci = aa.cci;
}

void throughput_rows(void)
{
    const struct tp_result *r = &tp_res;
    int rounds = r->blocks * TP_PAIRS;
    bench_row("ft", "streaming union 8x8, fault tolerance on", "%.0f", r->on, "values/s",
              "64 BEs each send %d %%auld packets of %d values (cycling through %d of their "
              "own) as fast as back-pressure lets them, then a mark; values sent / time from "
              "the request to the last mark at the FE; the FE checks it got exactly the union; "
              "median of %d rounds: %d blocks of a fresh pair of trees (on and off, started in "
              "alternating order), %d pairs of rounds each, alternating", TP_PACKETS,
              STREAM_VALS, STREAM_POOL, rounds, r->blocks, TP_PAIRS);
    bench_row("ft", "streaming union 8x8, fault tolerance off", "%.0f", r->off, "values/s",
              "the same with tbon_fe_options_t.no_fault_tolerance = 1; median of %d rounds",
              rounds);
    bench_row("ft", "streaming union 8x8, cost of fault tolerance", "%+.1f", r->mean, "%",
              "mean over the %d pairs of rounds of (off - on) / off, 95%% interval +-%.1f; "
              "median pair %+.1f%%, from %+.1f%% to %+.1f%% (the machine's noise); the same "
              "method with both trees without fault tolerance (A/A): %+.1f%% +-%.1f; target "
              "within 3%%: %s", rounds, r->ci, r->pmed, r->lo, r->hi, r->aa_mean, r->aa_ci,
              fabs(r->mean) <= 3 ? (fabs(r->mean) + r->ci <= 3 ? "met" :
                                    "met by the mean, not by the whole interval") : "MISSED");
    bench_row("ft", "streaming union 8x8, CPU per value, fault tolerance on", "%.0f", r->con,
              "ns", "the machine's busy time (/proc/stat) during a round / values sent; mean of "
              "the %d rounds; off: %.0f ns; cost of fault tolerance (on - off) / off, mean of the "
              "pairs: %+.1f%% +-%.1f (95%%); A/A: %+.1f%% +-%.1f", rounds, r->coff, r->cmean,
              r->cci, r->aa_cmean, r->aa_cci);
}
