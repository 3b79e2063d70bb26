/* bench_topology.c - the 32x32x32x32 topology of seed 003 (1,048,576
 * back-ends, 1,082,401 nodes): build, serialise, deserialise, text write +
 * parse, and the serialised size raw and zlib-compressed. Each time is the
 * median of RUNS runs; rows are printed as Markdown for bench/RESULTS.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "bench.h"
#include "topology.h"

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
    return 0;
}
