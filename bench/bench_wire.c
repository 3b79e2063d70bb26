/* bench_wire.c - CRC-32C, frame encode/decode and compression costs
 *
 * Prints Markdown rows "| wire | metric | median | unit | notes |". Each
 * figure is the median of RUNS runs; memcpy over the same sizes is measured
 * in the same run as the baseline for the checksum rates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "lib/bench.h"
#include "util/crc32c.h"
#include "codec/wire.h"

#define RUNS 7
#define KIB 1024u
#define MIB (1024u * 1024u)
#define PROG "bench_wire"

static volatile uint32_t sink;

enum { K_HW, K_SW, K_MEMCPY, K_COPYCRC, K_MEMCPY_THEN_CRC };

/* GB/s of one kind of pass over `size` bytes, repeated to `total` bytes. */
static double rate(int kind, uint8_t *dst, const uint8_t *src, size_t size, size_t total)
{
    double v[RUNS];
    size_t reps = total / size ? total / size : 1;
    for (int r = 0; r < RUNS; r++) {
        uint32_t c = 0;
        double t0 = bench_now();
        for (size_t i = 0; i < reps; i++) {
            switch (kind) {
            case K_HW:     c = tb_crc32c_hw(c, src, size); break;
            case K_SW:     c = tb_crc32c_sw(c, src, size); break;
            case K_MEMCPY: memcpy(dst, src, size); c += dst[i % size]; break;
            case K_COPYCRC: c = tb_crc32c_copy(c, dst, src, size); break;
            case K_MEMCPY_THEN_CRC:
                memcpy(dst, src, size);
                c = tb_crc32c(c, dst, size);
                break;
            }
        }
        double t = bench_now() - t0;
        sink += c;
        v[r] = (double)(reps * size) / t / 1e9;
    }
    return bench_median(v, RUNS);
}

static void bench_crc(void)
{
    size_t big = 16 * MIB;
    uint8_t *src = malloc(big), *dst = malloc(big);
    if (!src || !dst)
        bench_die(PROG, "malloc");
    for (size_t i = 0; i < big; i++)
        src[i] = (uint8_t)(i * 2654435761u >> 13);
    memset(dst, 1, big);
    int hw = tb_crc32c_hw_available();
    struct { size_t size, total; const char *sz, *name; } sizes[] = {
        { 64 * KIB, 256 * MIB, "64 KiB", "64 KiB buffer (in cache), looped" },
        { 16 * MIB, 128 * MIB, "16 MiB", "16 MiB buffer (memory)" },
    };
    for (int s = 0; s < 2; s++) {
        char metric[80];
        size_t size = sizes[s].size, total = sizes[s].total;
        const char *sz = sizes[s].sz;
        double mc = rate(K_MEMCPY, dst, src, size, total);
        snprintf(metric, sizeof metric, "memcpy %s", sz);
        bench_row("wire", metric, "%.3g", mc, "GB/s", "baseline for the CRC rows; %s",
                  sizes[s].name);
        if (hw) {
            double h = rate(K_HW, dst, src, size, total);
            snprintf(metric, sizeof metric, "crc32c hardware %s", sz);
            bench_row("wire", metric, "%.3g", h, "GB/s",
                      "SSE4.2, 3 interleaved streams; %.2fx memcpy", h / mc);
        }
        double t = rate(K_SW, dst, src, size, total / (hw ? 8 : 1));
        snprintf(metric, sizeof metric, "crc32c tables %s", sz);
        bench_row("wire", metric, "%.3g", t, "GB/s", "slicing-by-8 fallback; %.2fx memcpy",
                  t / mc);
        double cc = rate(K_COPYCRC, dst, src, size, total);
        double sep = rate(K_MEMCPY_THEN_CRC, dst, src, size, total);
        snprintf(metric, sizeof metric, "copy+crc32c one pass %s", sz);
        bench_row("wire", metric, "%.3g", cc, "GB/s",
                  "tb_crc32c_copy; memcpy then tb_crc32c: %.3g GB/s", sep);
    }
    free(src);
    free(dst);
}

/* Frames per second for build + decode of a payload of len bytes. */
static void bench_frames(size_t len, double seconds_per_run)
{
    uint8_t *pay = malloc(len);
    if (!pay)
        bench_die(PROG, "malloc");
    for (size_t i = 0; i < len; i++)
        pay[i] = (uint8_t)(i * 31 + 7);
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .stream = 1, .tag = 100, .source = 3 };
    tb_fdec_t *d = tb_fdec_new(TB_FRAME_MAX_DEFAULT);
    double v[RUNS];
    for (int r = 0; r < RUNS; r++) {
        size_t n = 0;
        double t0 = bench_now(), t;
        do {
            for (int k = 0; k < 64; k++) {
                uint8_t *f;
                size_t fl;
                h.seq++;
                if (tb_frame_build(&h, pay, len, 0, &f, &fl) != 0)
                    bench_die(PROG, "tb_frame_build");
                if (tb_fdec_feed(d, f, fl) != 0)
                    bench_die(PROG, "tb_fdec_feed");
                tb_frame_t fr;
                if (tb_fdec_next(d, &fr) != 1)
                    bench_die(PROG, "tb_fdec_next");
                sink += fr.hdr.len;
                tb_frame_release(&fr);
                free(f);
            }
            n += 64;
            t = bench_now() - t0;
        } while (t < seconds_per_run);
        v[r] = (double)n / t;
    }
    char metric[80];
    double fps = bench_median(v, RUNS);
    snprintf(metric, sizeof metric, "frame build+decode, %zu B payload", len);
    bench_row("wire", metric, "%.3g", fps, "frames/s",
              "tb_frame_build + tb_fdec_feed/next, one thread; %.3g GB/s of payload",
              fps * (double)len / 1e9);
    tb_fdec_destroy(d);
    free(pay);
}

/* A serialised-topology-like 1 MiB text: cost of compressing and inflating. */
static void bench_compress(void)
{
    size_t len = MIB, i = 0;
    uint8_t *text = malloc(len);
    if (!text)
        bench_die(PROG, "malloc");
    for (unsigned k = 0; i < len; k++) {
        char line[96];
        int m = snprintf(line, sizeof line, "rank %u host node%04u.cluster.example port %u parent %u depth %u\n",
                         k, k / 8, 40000 + k % 1000, k / 16, k % 5);
        for (int j = 0; j < m && i < len; j++)
            text[i++] = (uint8_t)line[j];
    }
    tb_frame_hdr_t h = { .type = TB_FRAME_TOPOLOGY };
    double vb[RUNS], vd[RUNS];
    size_t wire = 0;
    tb_fdec_t *d = tb_fdec_new(TB_FRAME_MAX_DEFAULT);
    for (int r = 0; r < RUNS; r++) {
        uint8_t *f;
        double t0 = bench_now();
        if (tb_frame_build(&h, text, len, 1, &f, &wire) != 0)
            bench_die(PROG, "compressed tb_frame_build");
        double t1 = bench_now();
        tb_fdec_feed(d, f, wire);
        tb_frame_t fr;
        if (tb_fdec_next(d, &fr) != 1 || fr.hdr.len != len)
            bench_die(PROG, "compressed frame decode");
        double t2 = bench_now();
        tb_frame_release(&fr);
        free(f);
        vb[r] = (t1 - t0) * 1e3;
        vd[r] = (t2 - t1) * 1e3;
    }
    bench_row("wire", "compress 1 MiB frame (build)", "%.3g", bench_median(vb, RUNS), "ms",
              "zlib level 1, topology-like text; %zu bytes on the wire (%.1f%%)",
              wire, 100.0 * (double)wire / (double)len);
    bench_row("wire", "decompress 1 MiB frame (decode)", "%.3g", bench_median(vd, RUNS), "ms",
              "inflate + CRC of the compressed bytes");

    /* The default level beside it, to justify level 1. */
    double v[RUNS];
    uLongf clen = 0;
    uint8_t *out = malloc(compressBound(len));
    if (!out)
        bench_die(PROG, "malloc");
    for (int r = 0; r < RUNS; r++) {
        clen = compressBound(len);
        double t0 = bench_now();
        if (compress2(out, &clen, text, len, 6) != Z_OK)
            bench_die(PROG, "compress2");
        v[r] = (bench_now() - t0) * 1e3;
    }
    bench_row("wire", "compress 1 MiB, zlib level 6", "%.3g", bench_median(v, RUNS), "ms",
              "for comparison: %lu bytes (%.1f%%)",
              (unsigned long)clen, 100.0 * (double)clen / (double)len);
    free(out);
    tb_fdec_destroy(d);
    free(text);
}

int main(void)
{
    bench_crc();
    bench_frames(64, 0.1);
    bench_frames(64 * KIB, 0.1);
    bench_compress();
    return 0;
}
