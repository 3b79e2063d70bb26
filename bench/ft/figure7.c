/* figure7.c - (c') Figure 7 as seed 003 ran it (VI-B, VI-D), bench_ft
 * --figure7: a wait-for-all union on 32x32 (kills.c), each back-end a new
 * integer at 10 Hz, commnodes killed four times; the FE's throughput over
 * its ten most recent output packets, and every integer sent checked. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tbon/tbon.h>

#include "ft.h"
#include "lib/bench.h"
#include "lib/watchdog.h"

#define F7_TICK_MS 100          /* 10 Hz per back-end (seed 003 VI-B) */
#define F7_LAST 10              /* throughput over the ten most recent output packets */
#define F7_TICKS_MAX 4096       /* ticks checked per back-end (150 s at 10 Hz: 1,500) */
#define F7_SPAN 5.0             /* s: the windows compared before and after each kill */

/* The FE's throughput at output packet i >= F7_LAST, packets/s: the last
 * F7_LAST packets over the time they took. */
static double f7_tput(const double *t, size_t i)
{
    double dt = t[i] - t[i - F7_LAST];
    return dt > 0 ? F7_LAST / dt : 0;
}

/* The throughputs of the packets that came in [a, b): their lowest, and
 * their median (NAN when none came). */
static void f7_window(const struct uwatch *u, double a, double b, double *lowest, double *med)
{
    double *v = malloc((u->npkt + 1) * sizeof *v);
    size_t k = 0;
    *lowest = *med = NAN;
    if (!v)
        return;
    for (size_t i = F7_LAST; i < u->npkt; i++)
        if (u->pkt_t[i] >= a && u->pkt_t[i] < b)
            v[k++] = f7_tput(u->pkt_t, i);
    if (k) {
        *med = bench_median(v, (int)k);     /* sorts v */
        *lowest = v[0];
    }
    free(v);
}

/* Stop the ticks: each back-end says how many it sent (round 2's mark),
 * after them on the same path; then stop u's receiver. */
static void f7_stop_ticks(struct uwatch *u, pthread_t th, size_t n)
{
    pthread_mutex_lock(&fe.mu);
    u->round = 2;
    pthread_mutex_unlock(&fe.mu);
    request(u->s, OP_TICK, 2, 0);
    double dl = bench_now() + 60;
    pthread_mutex_lock(&fe.mu);
    while (u->nmarks < n && !u->error[0] && bench_now() < dl)
        fe_wait(dl);
    pthread_mutex_unlock(&fe.mu);
    union_stream_end(u, th);
    if (u->error[0])
        ft_die("figure 7: %s", u->error);
    if (u->nmarks < n)
        ft_die("figure 7: %zu of %zu back-ends said how many values they sent", u->nmarks, n);
}

/* Every integer each back-end says it sent, against what the FE got. */
struct f7_count {
    uint64_t sent, missing, extra;
    tbon_rank_t first_missing;
};

static void f7_check(const struct uwatch *u, size_t size, struct f7_count *c)
{
    c->sent = c->missing = c->extra = 0;
    c->first_missing = TBON_RANK_NONE;
    for (size_t r = 0; r < size; r++) {
        if (!u->marked[r])
            continue;
        if (u->sent[r] > F7_TICKS_MAX)
            ft_die("figure 7: rank %zu sent %" PRIu64 " values, over %d", r, u->sent[r],
                   F7_TICKS_MAX);
        c->sent += u->sent[r];
        for (size_t q = 0; q < F7_TICKS_MAX; q++) {
            int got = u->tick_seen[r * F7_TICKS_MAX + q] != 0;
            if (q < u->sent[r] && !got) {
                c->missing++;
                if (c->first_missing == TBON_RANK_NONE)
                    c->first_missing = (tbon_rank_t)r;
            }
            c->extra += q >= u->sent[r] && got;
        }
    }
}

/* --csv: the throughput at every output packet, and the kills. */
static void f7_write_csv(const char *csv, const struct uwatch *u, int victims)
{
    FILE *f = fopen(csv, "w");
    if (!f)
        ft_die("--csv %s: %s", csv, strerror(errno));
    fprintf(f, "time_s,packets_per_s_over_last_%d,event\n", F7_LAST);
    int k = 0;
    for (size_t i = F7_LAST; i < u->npkt; i++) {
        char ev[64] = "";
        if (k < pt.kills_done && pt.kill_t[k] <= u->pkt_t[i])
            snprintf(ev, sizeof ev, "kill %d commnode%s before", victims,
                     victims == 1 ? "" : "s"), k++;
        fprintf(f, "%.3f,%.2f,%s\n", u->pkt_t[i] - pt.t0, f7_tput(u->pkt_t, i), ev);
    }
    if (fclose(f) != 0)
        ft_die("--csv %s: %s", csv, strerror(errno));
}

/* The rows of (c'): n back-ends, the kills of `rounds` rounds. */
static void f7_rows(const struct uwatch *u, size_t n, int victims, double period, int rounds,
                    const struct f7_count *c)
{
    double before_low, before_med, x;
    f7_window(u, pt.t0 + 1, pt.kill_t[0], &x, &before_med);
    char pre[200] = "", post[200] = "", ad[160] = "";
    size_t o1 = 0, o2 = 0, o3 = 0;
    double worst_pre = INFINITY, worst_post = INFINITY;
    for (int k = 0; k < rounds; k++) {
        double lo_a, lo_b, m;
        f7_window(u, pt.kill_t[k] - F7_SPAN, pt.kill_t[k], &lo_b, &m);
        f7_window(u, pt.kill_t[k], pt.kill_t[k] + F7_SPAN, &lo_a, &m);
        worst_pre = lo_b < worst_pre ? lo_b : worst_pre;
        worst_post = lo_a < worst_post ? lo_a : worst_post;
        o1 += (size_t)snprintf(pre + o1, sizeof pre - o1, "%s%.1f", k ? ", " : "", lo_b);
        o2 += (size_t)snprintf(post + o2, sizeof post - o2, "%s%.1f", k ? ", " : "", lo_a);
        o3 += (size_t)snprintf(ad + o3, sizeof ad - o3, "%s%.0f", k ? ", " : "",
                               (pt.last_adopted[k] - pt.kill_t[k]) * 1e3);
    }
    before_low = worst_pre;
    char shape[300];
    snprintf(shape, sizeof shape, "32x32 (%zu BEs), UNION/WAITFORALL, each back-end a new "
             "integer every %d ms; %d commnode%s killed at %g, %g, %g and %g s%s", n,
             F7_TICK_MS, victims, victims == 1 ? "" : "s", period, 2 * period, 3 * period,
             4 * period, period == 30 ? " (seed 003 VI-D)" : " (shortened: the seed kills "
             "every 30 s)");
    bench_row("ft", "figure 7, union at 10 Hz: throughput before the first kill", "%.1f",
              before_med, "packets/s", "%s; the FE's throughput over its %d most recent output "
              "packets, median from 1 s to the first kill; %zu output packets in all; "
              "bench/figure7.csv", shape, F7_LAST, u->npkt);
    bench_row("ft", "figure 7, lowest in the 5 s after a kill", "%.1f", worst_post,
              "packets/s", "per kill: %s; the same in the 5 s before each kill (a dip that "
              "is no failure's): %s, lowest %.1f; kill to the last ADOPTED event (ms): %s",
              post, pre, before_low, ad);
    char who[64] = "";
    if (c->first_missing != TBON_RANK_NONE)
        snprintf(who, sizeof who, ", the first from rank %u", c->first_missing);
    bench_row("ft", "figure 7, values missing at the FE", "%.0f", (double)c->missing, "values",
              "of %" PRIu64 " integers the back-ends sent (each says how many at the end)%s; "
              "%" PRIu64 " came twice, %" PRIu64 " were never sent; target 0", c->sent, who,
              u->tick_dups, c->extra + u->tick_bad);
}

/* 32x32, a wait-for-all union over every back-end, each sending a new
 * integer at 10 Hz; every period seconds (30 as the seed ran it) `victims`
 * random commnodes are killed, four times; the FE's throughput over its ten
 * most recent output packets, and at the end every integer sent checked
 * against what the FE got. */
void figure7_run(int victims, double period, const char *csv)
{
    const int rounds = 4;
    size_t n;
    tbon_net_t *net = pt_tree(period, rounds, victims, &n);
    size_t size = n + pt.ncomm + 1;
    double dur = period * (rounds + 1);
    struct uwatch u;
    pthread_t th;
    union_stream_sync(net, &u, n, size, TBON_SYNC_WAITFORALL, F7_TICKS_MAX, &th);
    tb_wd_arm("figure 7 run", dur + 180);
    union_wave(&u, 1, 60);              /* every back-end in; the port table everywhere */
    request(u.s, OP_TICK, 0, F7_TICK_MS);

    pt_kills_start();
    struct timespec ts = abs_ts(pt.t0 + dur);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
    pt_kills_wait(rounds, victims, n, "figure 7");
    f7_stop_ticks(&u, th, n);
    struct f7_count c;
    f7_check(&u, size, &c);
    stop(net);
    remove_tmpdir();
    if (u.npkt <= F7_LAST)
        ft_die("figure 7: %zu output packets", u.npkt);
    if (csv)
        f7_write_csv(csv, &u, victims);
    f7_rows(&u, n, victims, period, rounds, &c);
    union_stream_free(&u);
    pt_free();
}
