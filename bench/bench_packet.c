/* bench_packet.c - packet pack/unpack and payload decode rates
 *
 * Each measurement runs RUNS times; the row gives the median. Rows:
 * | packet | <metric> | <median> | <unit> | <notes> |
 */
#include "codec/packet_int.h"

#include <stdlib.h>
#include <string.h>

#include "lib/bench.h"

#define RUNS 7
#define PROG "bench_packet"

static volatile uint64_t sink;

/* Operations per second of one run of fn(iters). */
static double rate(void (*fn)(long), long iters)
{
    double t0 = bench_now();
    fn(iters);
    return (double)iters / (bench_now() - t0);
}

static double median_rate(void (*fn)(long), long iters)
{
    double r[RUNS];
    fn(iters / 10 + 1);   /* warm-up */
    for (int i = 0; i < RUNS; i++)
        r[i] = rate(fn, iters);
    return bench_median(r, RUNS);
}

static void ld_pack_unpack(long iters)
{
    for (long i = 0; i < iters; i++) {
        tbon_packet_t *p = tbon_packet_new(TBON_FIRST_APP_TAG, "%ld", (int64_t)i);
        int64_t v = 0;
        if (!p || tbon_packet_unpack(p, "%ld", &v) != 0)
            bench_die(PROG, "%ld pack/unpack");
        sink += (uint64_t)v;
        tbon_packet_unref(p);
    }
}

static void ld_new_only(long iters)
{
    for (long i = 0; i < iters; i++) {
        tbon_packet_t *p = tbon_packet_new(TBON_FIRST_APP_TAG, "%ld", (int64_t)i);
        if (!p)
            bench_die(PROG, "%ld pack");
        tbon_packet_unref(p);
    }
}

/* The baseline: what a single malloc/free of the same size costs. */
static void malloc_free(long iters)
{
    for (long i = 0; i < iters; i++) {
        void *volatile m = malloc(96);
        if (!m)
            bench_die(PROG, "malloc");
        ((char *)m)[0] = (char)i;
        free(m);
    }
}

#define BIG (64 * 1024)
static char *big_src;

static void big_pack_unpack(long iters)
{
    for (long i = 0; i < iters; i++) {
        big_src[0] = (char)i;
        tbon_packet_t *p = tbon_packet_new(TBON_FIRST_APP_TAG, "%ac", big_src, (size_t)BIG);
        char *out = NULL;
        size_t n = 0;
        if (!p || tbon_packet_unpack(p, "%ac", &out, &n) != 0 || n != BIG)
            bench_die(PROG, "%ac pack/unpack");
        sink += (uint64_t)out[0];
        free(out);
        tbon_packet_unref(p);
    }
}

static const uint8_t *dec_buf;
static size_t dec_len;

static void decode_loop(long iters)
{
    for (long i = 0; i < iters; i++) {
        tbon_packet_t *p = tb_packet_decode(dec_buf, dec_len, 1, 1, 1, NULL);
        if (!p)
            bench_die(PROG, "decode");
        sink += tb_packet_nfields(p);
        tbon_packet_unref(p);
    }
}

/* Packets per second decoding p's payload, iters times a run; p is released. */
static double decode_rate(tbon_packet_t *p, long iters)
{
    if (!p)
        bench_die(PROG, "pack");
    const uint8_t *b = tb_packet_payload(p, &dec_len);
    uint8_t *c = malloc(dec_len);
    if (!c)
        bench_die(PROG, "malloc");
    memcpy(c, b, dec_len);
    free((void *)dec_buf);
    dec_buf = c;
    tbon_packet_unref(p);
    return median_rate(decode_loop, iters);
}

int main(void)
{
    double r;

    r = median_rate(ld_pack_unpack, 2000000);
    bench_row("packet", "pack+unpack %ld", "%.0f", r, "packets/s", "median of %d runs of 2M; "
              "tbon_packet_new + tbon_packet_unpack + unref", RUNS);
    r = median_rate(ld_new_only, 2000000);
    double base = median_rate(malloc_free, 2000000);
    bench_row("packet", "pack %ld", "%.1f", 1e9 / r, "ns/packet", "median of %d runs of 2M; "
              "baseline malloc(96)+free %.1f ns", RUNS, 1e9 / base);

    big_src = malloc(BIG);
    if (!big_src)
        bench_die(PROG, "malloc");
    memset(big_src, 'x', BIG);
    r = median_rate(big_pack_unpack, 20000);
    bench_row("packet", "pack+unpack 64 KiB %ac", "%.0f", r, "packets/s",
              "median of %d runs of 20k", RUNS);
    bench_row("packet", "pack+unpack 64 KiB %ac", "%.0f", r * BIG / 1e6, "MB/s",
              "same runs; payload bytes (1 MB = 1e6 B)");

    r = decode_rate(tbon_packet_new(1, "%ld", (int64_t)-42), 2000000);
    bench_row("packet", "decode %ld payload", "%.0f", r, "packets/s",
              "median of %d runs of 2M; %zu-byte payload", RUNS, dec_len);

    r = decode_rate(tbon_packet_new(1, "%ac", big_src, (size_t)BIG), 20000);
    bench_row("packet", "decode 64 KiB %ac payload", "%.0f", r * (double)dec_len / 1e6, "MB/s",
              "median of %d runs of 20k (%.0f packets/s)", RUNS, r);

    const char *strs[64];
    for (int i = 0; i < 64; i++)
        strs[i] = "a moderately long string of forty bytes";
    r = decode_rate(tbon_packet_new(1, "%d %as %alf", 7, strs, (size_t)64,
                                    (const double[]){1, 2, 3, 4}, (size_t)4), 500000);
    bench_row("packet", "decode %d %as(64) %alf(4) payload", "%.0f", r, "packets/s",
              "median of %d runs of 500k; %zu-byte payload, validates 64 string lengths",
              RUNS, dec_len);

    free((void *)dec_buf);
    free(big_src);
    return 0;
}
