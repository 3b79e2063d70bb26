/* bench_topology.c - the 32x32x32x32 topology of seed 003 (1,048,576
 * back-ends, 1,082,401 nodes): build, serialise, deserialise, text write +
 * parse, and the serialised size raw and zlib-compressed; then reconfiguration
 * on it (reconfig.c): the adopter index, and the adopter choice of the 32
 * orphans of a failed height-1 commnode. Each time is the median of repeated
 * runs; rows are printed as Markdown for bench/RESULTS.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "lib/bench.h"
#include "topo/reconfig.h"
#include "topo/topology.h"

#define RUNS 5
#define NODES 1082401u
#define PROG "bench_topology"

/* The tree in BFS order through the builder, as a generator would. */
static tb_topology_t *build(void)
{
    tb_topology_t *t = tb_topology_new();
    if (!t || tb_topology_reserve(t, NODES) != 0 ||
        tb_topology_add(t, "localhost", 0, TBON_RANK_NONE) != 0)
        bench_die(PROG, "build");
    uint32_t r = 1, first = 0, width = 1;
    for (int level = 0; level < 4; level++) {
        for (uint32_t p = first; p < first + width; p++)
            for (int c = 0; c < 32; c++, r++)
                if (tb_topology_add(t, "localhost", r, p) != 0)
                    bench_die(PROG, "add");
        first += width;
        width *= 32;
    }
    if (tb_topology_finish(t, NULL) != 0)
        bench_die(PROG, "finish");
    return t;
}

#define FAILS   9      /* height-1 commnodes failed one after another */
#define BATCHES 101    /* timings of the 32 orphans' choices per failure */
#define NCAND   8      /* candidates computed per orphan */

/* Seed 003 V-A on the 1,048,576-leaf tree: build the adopter index; then, for
 * each of FAILS height-1 commnodes, apply its failure report, update the
 * index, let its 32 orphans compute their first NCAND candidates (timed
 * BATCHES times), and apply their adoption reports (by the first candidate). */
static void bench_reconfig(void)
{
    static const uint32_t fan[] = { 32, 32, 32, 32 };
    static const char *const hosts[] = { "localhost" };
    tb_topology_t *t = tb_topology_gen_shape(fan, 4, hosts, 1, NULL);
    if (!t || tb_topology_size(t) != NODES)
        bench_die(PROG, "gen_shape");
    double tbuild[RUNS], tupd[FAILS], trep[FAILS], tcand[FAILS * BATCHES];
    tb_adopt_index_t *x = NULL;
    for (int i = 0; i < RUNS; i++) {
        tb_adopt_index_destroy(x);
        double t0 = bench_now();
        x = tb_adopt_index_new(t);
        tbuild[i] = (bench_now() - t0) * 1e3;
        if (!x)
            bench_die(PROG, "tb_adopt_index_new");
    }
    const tbon_rank_t first_h1 = 1 + 32 + 32 * 32;          /* BFS ranks */
    size_t adopted = 0;
    for (int f = 0; f < FAILS; f++) {
        tbon_rank_t p = first_h1 + (tbon_rank_t)(f * 3637 % 32768);
        uint32_t oh = tb_topology_height(t, p);
        size_t nk;
        const tbon_rank_t *k = tb_topology_children(t, p, &nk);
        tbon_rank_t orphans[32];
        if (oh != 1 || nk != 32)
            bench_die(PROG, "picking a height-1 commnode");
        memcpy(orphans, k, sizeof orphans);
        double t0 = bench_now();
        if (tb_report_failure(t, p, tb_topology_incarnation(t, p)) != 1)
            bench_die(PROG, "tb_report_failure");
        double t1 = bench_now();
        if (tb_adopt_index_update(x, t) != 0)
            bench_die(PROG, "tb_adopt_index_update");
        tupd[f] = (bench_now() - t1) * 1e6;
        tbon_rank_t out[32][NCAND];
        size_t got = 0;
        for (int b = 0; b < BATCHES; b++) {
            double c0 = bench_now();
            for (int i = 0; i < 32; i++)
                got += tb_adopt_candidates(x, t, orphans[i], p, oh, out[i], NCAND);
            tcand[f * BATCHES + b] = (bench_now() - c0) * 1e6 / 32;
        }
        if (got != (size_t)BATCHES * 32 * NCAND)
            bench_die(PROG, "tb_adopt_candidates");
        double r0 = bench_now();
        for (int i = 0; i < 32; i++) {
            uint32_t inc = tb_topology_incarnation(t, orphans[i]) + 1;
            if (tb_report_adoption(t, orphans[i], out[i][0], inc) != 1)
                bench_die(PROG, "tb_report_adoption");
            adopted += tb_topology_parent(t, orphans[i]) == out[i][0];
        }
        trep[f] = (bench_now() - r0 + (t1 - t0)) * 1e6;
    }
    if (adopted != FAILS * 32 || tb_topology_height(t, 0) != 4)
        bench_die(PROG, "adoptions");
    const char *sz = "32x32x32x32, 1,048,576 leaves";
    bench_row("reconfig", "adopter index build", "%.2f", bench_median(tbuild, RUNS), "ms",
              "%s; 33,825 non-leaves sorted by (height, fan-out, rank); median of %d",
              sz, RUNS);
    bench_row("reconfig", "adopter index update after a failure", "%.1f",
              bench_median(tupd, FAILS), "us",
              "%s; one height-1 commnode removed; median of %d failures", sz, FAILS);
    bench_row("reconfig", "adopter choice, 1,048,576 leaves", "%.3f",
              bench_median(tcand, FAILS * BATCHES), "us",
              "per orphan: first %d candidates for each of the 32 orphans of a failed "
              "height-1 commnode; median of %d x %d batches; target <= 10 us",
              NCAND, FAILS, BATCHES);
    bench_row("reconfig", "apply 1 failure + 32 adoption reports", "%.1f",
              bench_median(trep, FAILS), "us", "%s; median of %d failures", sz, FAILS);
    tb_adopt_index_destroy(x);
    tb_topology_destroy(t);
}

int main(void)
{
    double tb[RUNS], ts[RUNS], td[RUNS], tw[RUNS], tp[RUNS], tz[RUNS];
    size_t len = 0, zlen = 0, tlen = 0;
    for (int i = 0; i < RUNS; i++) {
        double t0 = bench_now();
        tb_topology_t *t = build();
        double t1 = bench_now();
        uint8_t *buf;
        if (tb_topology_serialize(t, &buf, &len) != 0)
            bench_die(PROG, "serialize");
        double t2 = bench_now();
        tb_topology_t *u = tb_topology_deserialize(buf, len, NULL);
        double t3 = bench_now();
        if (!u || !tb_topology_equal(t, u))
            bench_die(PROG, "deserialize");
        uLongf zcap = compressBound(len);
        uint8_t *z = malloc(zcap);
        double t4 = bench_now();
        if (!z || compress2(z, &zcap, buf, len, 1) != Z_OK)
            bench_die(PROG, "compress");
        double t5 = bench_now();
        zlen = zcap;
        char *text;
        double t6 = bench_now();
        if (tb_topology_format_text(t, &text, &tlen) != 0)
            bench_die(PROG, "format");
        double t7 = bench_now();
        tb_topology_t *p = tb_topology_parse_text(text, tlen, "bench", NULL);
        double t8 = bench_now();
        if (!p || !tb_topology_equal(t, p))
            bench_die(PROG, "parse");
        tb[i] = (t1 - t0) * 1e3;
        ts[i] = (t2 - t1) * 1e3;
        td[i] = (t3 - t2) * 1e3;
        tz[i] = (t5 - t4) * 1e3;
        tw[i] = (t7 - t6) * 1e3;
        tp[i] = (t8 - t7) * 1e3;
        free(text);
        free(z);
        free(buf);
        tb_topology_destroy(p);
        tb_topology_destroy(u);
        tb_topology_destroy(t);
    }
    const char *sz = "32x32x32x32, 1,082,401 nodes";
    bench_row("topology", "build via builder", "%.1f", bench_median(tb, RUNS), "ms",
              "%s; target < 1000 ms", sz);
    bench_row("topology", "serialise", "%.1f", bench_median(ts, RUNS), "ms",
              "%s; target < 1000 ms", sz);
    bench_row("topology", "deserialise (validating)", "%.1f", bench_median(td, RUNS), "ms",
              "%s; target < 1000 ms", sz);
    bench_row("topology", "serialised size", "%.0f", (double)len, "bytes",
              "%s (%.2f bytes/node); target < 16 MiB (16,777,216)", sz, (double)len / NODES);
    bench_row("topology", "serialised size, zlib level 1", "%.0f", (double)zlen, "bytes",
              "%s; compressed in %.1f ms (median)", sz, bench_median(tz, RUNS));
    bench_row("topology", "write text", "%.1f", bench_median(tw, RUNS), "ms",
              "%s; %zu bytes of text", sz, tlen);
    bench_row("topology", "parse text", "%.1f", bench_median(tp, RUNS), "ms",
              "%s; target < 1000 ms", sz);
    bench_reconfig();
    return 0;
}
