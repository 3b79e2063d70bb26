/* link.c - (b') the streaming union under link faults, bench_ft --link:
 * the trees and rounds of (b) (throughput.c), one tree of each pair under
 * the fault shim (net/link.h, tests/faultshim/). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "ft.h"
#include "lib/bench.h"
#include "lib/faultlog.h"
#include "lib/watchdog.h"

/* The link layer's work under faults: the streaming union of (b), longer
 * rounds, on a tree whose processes run the fault shim (tests/faultshim/)
 * with one bit flipped per 10,000 frames written and, over the tree, about
 * one connection reset per second (each of the 72 processes resets one of
 * its data links at random, at a rate of one per 72 s), beside the same tree without the shim;
 * both with fault tolerance. Nothing may be evicted: a link fault is no
 * failure. */
#define LK_PACKETS 20000        /* per back-end and round: ~2 s at 5 M values/s */
#define LK_BLOCKS 4
#define LK_PAIRS 2
#define LK_ROUNDS (LK_BLOCKS * LK_PAIRS)

struct lk_result {
    double faulty, clean, ratio, rlo, rhi;   /* values/s (medians); faulty / clean */
    size_t evicted, suspected, flips, resets;
    double seconds;             /* of faulty rounds */
};
static struct lk_result lk_res;

/* The events so far: failures (evictions) counted, and suspicions (a
 * silent node, which heartbeats on the event connections, untouched by the
 * shim, report only when a process was starved). */
static size_t lk_evictions(tbon_net_t *net, size_t *suspected)
{
    size_t n = 0;
    tbon_event_t ev;
    while (tbon_net_next_event(net, &ev, 0) == 0) {
        n += ev.type == TBON_EV_NODE_FAILED;
        *suspected += ev.type == TBON_EV_NODE_SUSPECT;
    }
    return n;
}

/* LK_BLOCKS pairs of trees, one under the shim: their rounds alternate. */
void link_run(void)
{
    struct lk_result *out = &lk_res;
    size_t n, size;
    const char *topo = tp_topology("8x8-link", &n, &size);
    char shim[PATH_MAX], log[128], armf[128], reset_ms[32];
    snprintf(shim, sizeof shim, "%s", self_exe);
    char *slash = strrchr(shim, '/');
    if (slash)
        *slash = '\0';
    slash = strrchr(shim, '/');
    if (slash)
        *slash = '\0';
    strncat(shim, "/tests/lib/libtbon_faultshim.so", sizeof shim - strlen(shim) - 1);
    if (access(shim, R_OK) != 0)
        ft_die("%s: not built (make tests)", shim);
    snprintf(log, sizeof log, "%s/faults.log", tmpdir);
    snprintf(armf, sizeof armf, "%s/faults.arm", tmpdir);
    snprintf(reset_ms, sizeof reset_ms, "%zu", (size - 1) * 1000);
    double vf[LK_ROUNDS], vc[LK_ROUNDS], ratio[LK_ROUNDS], dummy;
    int np = 0;
    memset(out, 0, sizeof *out);
    for (int bl = 0; bl < LK_BLOCKS; bl++) {
        struct tp_tree a, b;
        for (int k = 0; k < 2; k++) {
            if ((k == 0) == (bl % 2 == 0)) {
                setenv("LD_PRELOAD", shim, 1);
                setenv("TBON_FAULT_FLIP", "0.0001", 1);
                setenv("TBON_FAULT_RESET_MS", reset_ms, 1);
                setenv("TBON_FAULT_ARM", armf, 1);
                setenv("TBON_FAULT_LOG", log, 1);
                char seed[32];
                snprintf(seed, sizeof seed, "%d", bl + 1);
                setenv("TBON_FAULT_SEED", seed, 1);
                tp_start(&a, topo, n, size, 0);
                unsetenv("LD_PRELOAD");
            } else {
                tp_start(&b, topo, n, size, 0);
            }
        }
        tb_wd_arm("link rounds", 120 + LK_PAIRS * 20);
        tp_round(&a, 1, &dummy);
        tp_round(&b, 1, &dummy);
        out->evicted += lk_evictions(a.net, &out->suspected);
        FILE *f = fopen(armf, "w");
        if (!f)
            ft_die("cannot create %s", armf);
        fclose(f);
        for (int r = 0; r < LK_PAIRS; r++, np++) {
            int a_first = (r + bl) % 2 == 0;
            double t0 = bench_now();
            double x = tp_round_n(a_first ? &a : &b, (uint32_t)r + 2, LK_PACKETS, &dummy);
            double t1 = bench_now();
            double y = tp_round_n(a_first ? &b : &a, (uint32_t)r + 2, LK_PACKETS, &dummy);
            out->seconds += a_first ? t1 - t0 : bench_now() - t1;
            vf[np] = a_first ? x : y;
            vc[np] = a_first ? y : x;
            ratio[np] = vf[np] / vc[np];
        }
        unlink(armf);
        out->evicted += lk_evictions(a.net, &out->suspected);
        out->evicted += lk_evictions(b.net, &out->suspected);
        tp_stop(&a);        /* checks the FE got exactly the union */
        tp_stop(&b);
    }
    out->flips = tb_fault_count(log, "flip");
    out->resets = tb_fault_count(log, "reset");
    out->faulty = bench_median(vf, np);
    out->clean = bench_median(vc, np);
    out->ratio = bench_median(ratio, np);
    out->rlo = out->rhi = ratio[0];
    for (int r = 0; r < np; r++) {
        out->rlo = ratio[r] < out->rlo ? ratio[r] : out->rlo;
        out->rhi = ratio[r] > out->rhi ? ratio[r] : out->rhi;
    }
    fprintf(stderr, "%s: streaming union 8x8 under link faults: %.0f vs %.0f values/s (x%.3f, "
            "%.3f-%.3f); %zu flips, %zu resets in %.1f s of faulty rounds; %zu evicted, %zu "
            "suspected\n", PROG, out->faulty, out->clean, out->ratio, out->rlo, out->rhi,
            out->flips, out->resets, out->seconds, out->evicted, out->suspected);
    if (out->evicted)
        ft_die("%zu nodes evicted under link faults (a link fault is no failure)", out->evicted);
}

void link_rows(void)
{
    const struct lk_result *r = &lk_res;
    bench_row("link", "streaming union 8x8 under link faults", "%.0f", r->faulty, "values/s",
              "(b) with %d packets per back-end and round, every tree process but the FE "
              "under tests/faultshim: one bit flipped per 10,000 frames written, about one "
              "data connection reset per second over the tree (%zu flips, %zu resets in %.0f s "
              "of these rounds); median of %d rounds (%d blocks of a fresh pair of trees, %d "
              "pairs of rounds each, alternating); the FE checks it got exactly the union",
              LK_PACKETS, r->flips, r->resets, r->seconds, LK_ROUNDS, LK_BLOCKS, LK_PAIRS);
    bench_row("link", "streaming union 8x8 without faults, beside it", "%.0f", r->clean,
              "values/s", "the same trees without the shim; median of %d rounds", LK_ROUNDS);
    bench_row("link", "throughput under link faults / without", "%.3f", r->ratio, "",
              "median of the per-pair ratios, from %.3f to %.3f", r->rlo, r->rhi);
    bench_row("link", "nodes evicted under link faults", "%.0f", (double)r->evicted, "",
              "TBON_EV_NODE_FAILED at the FE over all the rounds (must be 0)");
    bench_row("link", "nodes suspected under link faults", "%.0f", (double)r->suspected, "",
              "TBON_EV_NODE_SUSPECT at the FE, both trees: heartbeats go on the event "
              "connections, which the shim leaves alone, so only a starved process is "
              "suspected (a load figure, not a check)");
}
