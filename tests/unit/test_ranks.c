/* test_ranks.c - sets of ranks as ranges (util/ranks.h): merging, union,
 * difference, queries, text, and the wire trailer with every way it can be
 * malformed */
#include "../harness.h"

#include <stdint.h>
#include <stdlib.h>

#include <tbon/common.h>

#include "util/endian.h"
#include "util/ranks.h"

/* s as text, in one of a few static buffers (so that two can be compared in
 * one CHECK). */
static const char *txt(const tb_ranks_t *s)
{
    static char bufs[4][8192];
    static int slot;
    char *b = bufs[slot++ % 4];
    tb_ranks_format(s, b, sizeof bufs[0]);
    return b;
}

/* The invariants every set keeps: canonical ranges, and r right for readers. */
static int canonical(const tb_ranks_t *s)
{
    if (s->cap == 0 && s->n > 1)
        return 0;
    if (s->n && s->r != (s->cap ? s->r : s->one))
        return 0;
    for (size_t i = 0; i < s->n; i++) {
        if (tb_ranks_lo(s, i) > tb_ranks_hi(s, i))
            return 0;
        if (i && (uint64_t)tb_ranks_hi(s, i - 1) + 1 >= tb_ranks_lo(s, i))
            return 0;
    }
    return 1;
}

/* A set from pairs lo, hi, ... (k pairs). */
static void make(tb_ranks_t *s, const uint32_t *pairs, size_t k)
{
    tb_ranks_clear(s);
    for (size_t i = 0; i < k; i++)
        if (tb_ranks_add_range(s, pairs[2 * i], pairs[2 * i + 1]) != 0)
            abort();
}
#define MAKE(s, ...) make((s), (const uint32_t[]){ __VA_ARGS__ }, \
    sizeof((const uint32_t[]){ __VA_ARGS__ }) / (2 * sizeof(uint32_t)))

/* Adding a rank or a range joins every range it touches or borders. */
TEST(adding_merges_adjacent_ranges)
{
    tb_ranks_t s = TB_RANKS_INIT;
    CHECK_INT(tb_ranks_add_range(&s, 0, 4), 0);
    CHECK_INT(tb_ranks_add_range(&s, 6, 9), 0);
    CHECK_STR(txt(&s), "0-4 and 6-9");
    CHECK_INT(tb_ranks_add(&s, 5), 0);
    CHECK_UINT(s.n, 1);
    CHECK_UINT(tb_ranks_lo(&s, 0), 0);
    CHECK_UINT(tb_ranks_hi(&s, 0), 9);

    CHECK_INT(tb_ranks_add(&s, 10), 0);                 /* after, adjacent */
    CHECK_STR(txt(&s), "0-10");
    CHECK_INT(tb_ranks_add_range(&s, 12, 20), 0);
    CHECK_STR(txt(&s), "0-10 and 12-20");
    CHECK_INT(tb_ranks_add(&s, 11), 0);                 /* fills the gap */
    CHECK_STR(txt(&s), "0-20");
    CHECK_INT(tb_ranks_add_range(&s, 3, 7), 0);         /* inside: nothing */
    CHECK_STR(txt(&s), "0-20");

    CHECK_INT(tb_ranks_add_range(&s, 50, 60), 0);
    CHECK_INT(tb_ranks_add_range(&s, 30, 40), 0);       /* between */
    CHECK_INT(tb_ranks_add_range(&s, 25, 26), 0);
    CHECK_STR(txt(&s), "0-20, 25-26, 30-40 and 50-60");
    CHECK_INT(tb_ranks_add_range(&s, 21, 49), 0);       /* bridges four */
    CHECK_STR(txt(&s), "0-60");
    CHECK_INT(tb_ranks_add_range(&s, 70, 80), 0);
    CHECK_INT(tb_ranks_add_range(&s, 90, 100), 0);
    CHECK_INT(tb_ranks_add_range(&s, 75, 95), 0);       /* overlaps two ends */
    CHECK_STR(txt(&s), "0-60 and 70-100");
    CHECK_INT(tb_ranks_add_range(&s, 65, 120), 0);      /* swallows one, grows */
    CHECK_STR(txt(&s), "0-60 and 65-120");

    CHECK_INT(tb_ranks_add_range(&s, 9, 5), TBON_EINVAL);
    CHECK_STR(txt(&s), "0-60 and 65-120");

    MAKE(&s, 10, 20);
    CHECK_INT(tb_ranks_add(&s, 5), 0);                  /* before the first */
    CHECK_STR(txt(&s), "5 and 10-20");
    CHECK_INT(tb_ranks_add_range(&s, 0, 4), 0);
    CHECK_STR(txt(&s), "0-5 and 10-20");
    CHECK_INT(tb_ranks_add(&s, 9), 0);
    CHECK_STR(txt(&s), "0-5 and 9-20");
    CHECK_INT(tb_ranks_add_range(&s, 6, 8), 0);
    CHECK_STR(txt(&s), "0-20");
    CHECK(canonical(&s));
    tb_ranks_free(&s);
}

/* The wave's case: one-range sets from the children, adjacent, unioned one
 * by one, stay one range in the struct itself in any order that keeps
 * them contiguous, and come out right in any order. */
TEST(union_of_many)
{
    tb_ranks_t acc = TB_RANKS_INIT, o = TB_RANKS_INIT;
    for (uint32_t k = 0; k < 64; k++) {
        MAKE(&o, 8 * k, 8 * k + 7);
        CHECK_INT(tb_ranks_union(&acc, &o), 0);
        CHECK_UINT(acc.n, 1);
        CHECK_UINT(acc.cap, 0);
    }
    CHECK_STR(txt(&acc), "0-511");
    CHECK_UINT(tb_ranks_count(&acc), 512);

    uint32_t perm[64];
    for (uint32_t k = 0; k < 64; k++)
        perm[k] = k;
    uint64_t st = 11;
    for (int k = 63; k > 0; k--) {
        int x = (int)(th_rand(&st) % (uint64_t)(k + 1));
        uint32_t t = perm[k];
        perm[k] = perm[x];
        perm[x] = t;
    }
    tb_ranks_free(&acc);
    for (int k = 0; k < 64; k++) {
        MAKE(&o, 8 * perm[k], 8 * perm[k] + 7);
        CHECK_INT(tb_ranks_union(&acc, &o), 0);
        CHECK(canonical(&acc));
    }
    CHECK_STR(txt(&acc), "0-511");

    /* Sets of many ranges: evens and odds interleave into one. */
    tb_ranks_t ev = TB_RANKS_INIT, od = TB_RANKS_INIT;
    for (uint32_t r = 0; r < 100; r += 2) {
        CHECK_INT(tb_ranks_add(&ev, r), 0);
        CHECK_INT(tb_ranks_add(&od, r + 1), 0);
    }
    CHECK_UINT(ev.n, 50);
    CHECK_INT(tb_ranks_union(&ev, &od), 0);
    CHECK_STR(txt(&ev), "0-99");

    MAKE(&acc, 0, 10, 20, 30, 40, 50);
    MAKE(&o, 5, 25, 45, 60, 70, 70);
    CHECK_INT(tb_ranks_union(&acc, &o), 0);
    CHECK_STR(txt(&acc), "0-30, 40-60 and 70");
    MAKE(&o, 62, 65, 100, 200);                         /* all after */
    CHECK_INT(tb_ranks_union(&acc, &o), 0);
    CHECK_STR(txt(&acc), "0-30, 40-60, 62-65, 70 and 100-200");
    MAKE(&o, 61, 61, 66, 69);                           /* bridges only */
    CHECK_INT(tb_ranks_union(&acc, &o), 0);
    CHECK_STR(txt(&acc), "0-30, 40-70 and 100-200");

    tb_ranks_clear(&o);                                 /* with the empty set */
    CHECK_INT(tb_ranks_union(&acc, &o), 0);
    CHECK_STR(txt(&acc), "0-30, 40-70 and 100-200");
    CHECK_INT(tb_ranks_union(&o, &acc), 0);
    CHECK(tb_ranks_equal(&o, &acc));
    CHECK(canonical(&o));

    tb_ranks_free(&acc);
    tb_ranks_free(&o);
    tb_ranks_free(&ev);
    tb_ranks_free(&od);
}

TEST(minus)
{
    tb_ranks_t a = TB_RANKS_INIT, b = TB_RANKS_INIT, d = TB_RANKS_INIT;
    MAKE(&a, 0, 63);
    MAKE(&b, 17, 17, 20, 30);
    CHECK_INT(tb_ranks_minus(&d, &a, &b), 0);
    CHECK_STR(txt(&d), "0-16, 18-19 and 31-63");
    CHECK_INT(tb_ranks_minus(&d, &b, &a), 0);          /* d had ranges */
    CHECK_STR(txt(&d), "none");

    tb_ranks_clear(&b);
    CHECK_INT(tb_ranks_minus(&d, &a, &b), 0);
    CHECK(tb_ranks_equal(&d, &a));
    MAKE(&b, 64, 100);                                  /* disjoint, adjacent */
    CHECK_INT(tb_ranks_minus(&d, &a, &b), 0);
    CHECK(tb_ranks_equal(&d, &a));
    CHECK_INT(tb_ranks_minus(&d, &a, &a), 0);
    CHECK_UINT(d.n, 0);

    MAKE(&a, 0, 10, 20, 30, 40, 50);                    /* one b range cuts two */
    MAKE(&b, 5, 25, 50, 50, 60, 70);
    CHECK_INT(tb_ranks_minus(&d, &a, &b), 0);
    CHECK_STR(txt(&d), "0-4, 26-30 and 40-49");
    MAKE(&b, 0, 0, 10, 10, 20, 20, 30, 45);             /* at the ends */
    CHECK_INT(tb_ranks_minus(&d, &a, &b), 0);
    CHECK_STR(txt(&d), "1-9, 21-29 and 46-50");

    MAKE(&a, 0, UINT32_MAX);
    MAKE(&b, 0, 0, UINT32_MAX, UINT32_MAX);
    CHECK_INT(tb_ranks_minus(&d, &a, &b), 0);
    CHECK_STR(txt(&d), "1-4294967294");
    MAKE(&b, 1, UINT32_MAX - 1);
    CHECK_INT(tb_ranks_minus(&d, &a, &b), 0);
    CHECK_STR(txt(&d), "0 and 4294967295");
    tb_ranks_clear(&a);
    CHECK_INT(tb_ranks_minus(&d, &a, &b), 0);
    CHECK_STR(txt(&d), "none");
    CHECK(canonical(&d));

    tb_ranks_free(&a);
    tb_ranks_free(&b);
    tb_ranks_free(&d);
}

TEST(overlap_contains_count_equal)
{
    tb_ranks_t a = TB_RANKS_INIT, b = TB_RANKS_INIT;
    MAKE(&a, 0, 4);
    MAKE(&b, 5, 9);
    CHECK_INT(tb_ranks_overlaps(&a, &b), 0);            /* adjacent is not shared */
    MAKE(&a, 0, 5);
    CHECK_INT(tb_ranks_overlaps(&a, &b), 1);
    CHECK_INT(tb_ranks_overlaps(&b, &a), 1);
    MAKE(&a, 0, 1, 10, 11, 20, 21);
    MAKE(&b, 2, 9, 12, 19, 21, 21);
    CHECK_INT(tb_ranks_overlaps(&a, &b), 1);
    MAKE(&b, 2, 9, 12, 19, 22, 30);
    CHECK_INT(tb_ranks_overlaps(&a, &b), 0);
    CHECK_INT(tb_ranks_overlaps(&b, &a), 0);
    MAKE(&b, 3, 100);
    CHECK_INT(tb_ranks_overlaps(&a, &b), 1);
    tb_ranks_clear(&b);
    CHECK_INT(tb_ranks_overlaps(&a, &b), 0);
    CHECK_INT(tb_ranks_overlaps(&b, &b), 0);

    tb_ranks_clear(&a);
    for (uint32_t i = 0; i < 1000; i++)
        CHECK_INT(tb_ranks_add_range(&a, 10 * i, 10 * i + 4), 0);
    CHECK_UINT(a.n, 1000);
    int wrong = 0;
    for (uint32_t x = 0; x < 10020; x++)
        wrong += tb_ranks_contains(&a, x) != (x % 10 < 5 && x < 10000);
    CHECK_INT(wrong, 0);
    CHECK_INT(tb_ranks_contains(&a, UINT32_MAX), 0);
    CHECK_INT(tb_ranks_contains(&b, 0), 0);
    CHECK_UINT(tb_ranks_count(&a), 5000);
    CHECK_UINT(tb_ranks_count(&b), 0);
    MAKE(&b, 0, UINT32_MAX);
    CHECK_UINT(tb_ranks_count(&b), (uint64_t)1 << 32);
    CHECK_INT(tb_ranks_contains(&b, 0), 1);
    CHECK_INT(tb_ranks_contains(&b, UINT32_MAX), 1);

    CHECK_INT(tb_ranks_equal(&a, &b), 0);
    CHECK_INT(tb_ranks_copy(&b, &a), 0);
    CHECK_INT(tb_ranks_equal(&a, &b), 1);
    CHECK_INT(tb_ranks_add(&b, 5), 0);                  /* same n, one differs */
    CHECK_UINT(b.n, a.n);
    CHECK_INT(tb_ranks_equal(&a, &b), 0);
    tb_ranks_clear(&a);
    tb_ranks_clear(&b);
    CHECK_INT(tb_ranks_equal(&a, &b), 1);
    tb_ranks_free(&a);
    tb_ranks_free(&b);
}

TEST(list_with_small_cap)
{
    tb_ranks_t s = TB_RANKS_INIT;
    MAKE(&s, 3, 5, 9, 9, 12, 13);
    uint32_t out[8];
    for (int i = 0; i < 8; i++)
        out[i] = 0xdeadbeef;
    CHECK_UINT(tb_ranks_list(&s, out, 4), 6);
    CHECK_UINT(out[0], 3);
    CHECK_UINT(out[1], 4);
    CHECK_UINT(out[2], 5);
    CHECK_UINT(out[3], 9);
    CHECK_UINT(out[4], 0xdeadbeef);                     /* not past cap */
    CHECK_UINT(tb_ranks_list(&s, NULL, 0), 6);
    CHECK_UINT(tb_ranks_list(&s, out, 8), 6);
    CHECK_UINT(out[4], 12);
    CHECK_UINT(out[5], 13);
    CHECK_UINT(out[6], 0xdeadbeef);

    MAKE(&s, UINT32_MAX - 1, UINT32_MAX);               /* the loop ends at the top */
    CHECK_UINT(tb_ranks_list(&s, out, 8), 2);
    CHECK_UINT(out[0], UINT32_MAX - 1);
    CHECK_UINT(out[1], UINT32_MAX);
    tb_ranks_clear(&s);
    CHECK_UINT(tb_ranks_list(&s, out, 8), 0);
    tb_ranks_free(&s);
}

TEST(format_text)
{
    tb_ranks_t s = TB_RANKS_INIT;
    char b[64];
    CHECK_INT(tb_ranks_format(&s, b, sizeof b), 4);
    CHECK_STR(b, "none");
    MAKE(&s, 17, 17);
    CHECK_INT(tb_ranks_format(&s, b, sizeof b), 2);
    CHECK_STR(b, "17");
    MAKE(&s, 0, 15);
    CHECK_STR(txt(&s), "0-15");
    MAKE(&s, 0, 4, 6, 9);
    CHECK_STR(txt(&s), "0-4 and 6-9");
    MAKE(&s, 0, 15, 17, 17, 20, 63);
    CHECK_INT(tb_ranks_format(&s, b, sizeof b), 18);
    CHECK_STR(b, "0-15, 17 and 20-63");
    MAKE(&s, 0, UINT32_MAX);
    CHECK_STR(txt(&s), "0-4294967295");

    /* Exactly fits, then one byte short: no range fits with the rest
     * counted after it, so the whole set is counted. */
    MAKE(&s, 0, 15, 17, 17, 20, 63);
    CHECK_INT(tb_ranks_format(&s, b, 19), 18);
    CHECK_STR(b, "0-15, 17 and 20-63");
    CHECK_INT(tb_ranks_format(&s, b, 18), 18);
    CHECK_STR(b, "61 ranks");
    CHECK_INT(tb_ranks_format(&s, b, 8), 18);           /* not even that: empty */
    CHECK_STR(b, "");
    CHECK_INT(tb_ranks_format(&s, b, 1), 18);
    CHECK_STR(b, "");
    CHECK_INT(tb_ranks_format(&s, NULL, 0), 18);
    MAKE(&s, 4000000000u, 4000000000u);
    CHECK_INT(tb_ranks_format(&s, b, 8), 10);
    CHECK_STR(b, "1 rank");

    /* Many ranges into a line: as many leading ranges as fit. */
    tb_ranks_clear(&s);
    for (uint32_t r = 0; r < 200; r += 2)
        CHECK_INT(tb_ranks_add(&s, r), 0);
    const char *full = txt(&s);
    CHECK_INT(tb_ranks_format(&s, b, sizeof b), (int)strlen(full));
    CHECK_STR(b, "0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24 and 87 more ranks");
    CHECK_UINT(strlen(b), 63);
    CHECK(strncmp(full, b, 45) == 0);
    CHECK(strcmp(full + strlen(full) - 11, "196 and 198") == 0);
    CHECK_INT(tb_ranks_format(&s, b, 63), (int)strlen(full));   /* one short */
    CHECK_STR(b, "0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22 and 88 more ranks");
    tb_ranks_free(&s);
}

TEST(wire_round_trip)
{
    tb_ranks_t s = TB_RANKS_INIT, d = TB_RANKS_INIT;
    uint8_t buf[64];
    char msg[100] = "untouched";
    MAKE(&s, 0, 15, 17, 17, 20, 63);
    CHECK_UINT(tb_ranks_wire_size(&s), 28);
    memset(buf, 0xab, sizeof buf);
    tb_ranks_encode(&s, buf + 10);                      /* after a payload */
    CHECK_UINT(buf[10 + 28], 0xab);
    CHECK_UINT(tb_get32(buf + 10), 0);
    CHECK_UINT(tb_get32(buf + 14), 15);
    CHECK_UINT(tb_get32(buf + 18), 17);
    CHECK_UINT(tb_get32(buf + 30), 63);
    const uint8_t n3[4] = { 3, 0, 0, 0 };               /* little-endian, last */
    CHECK_MEM(buf + 34, n3, 4);
    MAKE(&d, 1000, 2000);
    CHECK_INT(tb_ranks_decode_tail(&d, buf, 38, msg, sizeof msg), 28);
    CHECK(tb_ranks_equal(&s, &d));
    CHECK_STR(msg, "untouched");

    tb_ranks_clear(&s);                                 /* the empty set: n only */
    CHECK_UINT(tb_ranks_wire_size(&s), 4);
    tb_ranks_encode(&s, buf);
    CHECK_INT(tb_ranks_decode_tail(&d, buf, 4, msg, sizeof msg), 4);
    CHECK_UINT(d.n, 0);

    tb_ranks_free(&d);
    MAKE(&s, UINT32_MAX - 3, UINT32_MAX);
    tb_ranks_encode(&s, buf);
    CHECK_INT(tb_ranks_decode_tail(&d, buf, 12, NULL, 0), 12);
    CHECK_STR(txt(&d), "4294967292-4294967295");
    CHECK_UINT(d.cap, 0);                               /* one range: no malloc */

    tb_ranks_clear(&s);
    for (uint32_t i = 0; i < 1000; i++)
        CHECK_INT(tb_ranks_add_range(&s, 7 * i, 7 * i + (i % 5)), 0);
    size_t ws = tb_ranks_wire_size(&s);
    uint8_t *big = malloc(ws + 3);
    REQUIRE(big);
    tb_ranks_encode(&s, big + 3);
    CHECK_INT(tb_ranks_decode_tail(&d, big, ws + 3, msg, sizeof msg), (int)ws);
    CHECK(tb_ranks_equal(&s, &d));
    CHECK(canonical(&d));
    free(big);
    tb_ranks_free(&s);
    tb_ranks_free(&d);
}

/* Decode the u32 words w[0..nw) as a frame payload ending in a trailer. */
static int decode_words(tb_ranks_t *s, const uint32_t *w, size_t nw, char *msg, size_t msglen)
{
    uint8_t buf[64];
    for (size_t i = 0; i < nw; i++)
        tb_put32(buf + 4 * i, w[i]);
    return tb_ranks_decode_tail(s, buf, 4 * nw, msg, msglen);
}

/* Each malformed trailer is refused with its reason, and the set is left
 * empty whatever it held. */
#define REFUSED(msgtext, ...) do {                                            \
    const uint32_t w_[] = { __VA_ARGS__ };                                    \
    MAKE(&s, 1, 2, 4, 5);                                                     \
    msg[0] = 0;                                                               \
    CHECK_INT(decode_words(&s, w_, sizeof w_ / 4, msg, sizeof msg), TBON_EFORMAT); \
    CHECK_STR(msg, msgtext);                                                  \
    CHECK_UINT(s.n, 0);                                                       \
} while (0)

TEST(malformed_trailers_refused)
{
    tb_ranks_t s = TB_RANKS_INIT;
    char msg[128];
    uint8_t three[3] = { 0, 0, 0 };
    MAKE(&s, 1, 2);
    CHECK_INT(tb_ranks_decode_tail(&s, three, 3, msg, sizeof msg), TBON_EFORMAT);
    CHECK_STR(msg, "trailer of 3 bytes, shorter than its count");
    CHECK_UINT(s.n, 0);
    CHECK_INT(tb_ranks_decode_tail(&s, NULL, 0, msg, sizeof msg), TBON_EFORMAT);
    CHECK_STR(msg, "trailer of 0 bytes, shorter than its count");

    REFUSED("count 1048577 over the limit of 1048576", 0, 0, (1u << 20) + 1);
    REFUSED("count 4294967295 over the limit of 1048576", UINT32_MAX);
    REFUSED("count 2 needs 20 bytes, only 12 there", 5, 9, 2);
    REFUSED("count 1 needs 12 bytes, only 4 there", 1);
    REFUSED("range 9-5 runs backwards", 9, 5, 1);
    REFUSED("range 9-5 runs backwards", 0, 1, 9, 5, 2);
    REFUSED("ranges 10-12 and 1-3 out of order", 10, 12, 1, 3, 2);
    REFUSED("ranges 10-12 and 1-9 out of order", 10, 12, 1, 9, 2);
    REFUSED("ranges 5-9 and 8-12 overlap", 5, 9, 8, 12, 2);
    REFUSED("ranges 5 and 5 overlap", 5, 5, 5, 5, 2);
    REFUSED("ranges 5-9 and 0-100 overlap", 5, 9, 0, 100, 2);
    REFUSED("ranges 5-9 and 10-12 adjacent, not merged", 5, 9, 10, 12, 2);
    REFUSED("ranges 0-4294967294 and 4294967295 adjacent, not merged",
            0, UINT32_MAX - 1, UINT32_MAX, UINT32_MAX, 2);
    REFUSED("ranges 30-40 and 35-50 overlap", 1, 2, 20, 20, 30, 40, 35, 50, 3);

    /* What precedes the trailer is the payload, not looked at. */
    const uint32_t ok[] = { 9, 5, 7, 8, 1 };
    CHECK_INT(decode_words(&s, ok, 5, msg, sizeof msg), 12);
    CHECK_STR(txt(&s), "7-8");

    /* No room for the message, or none asked for: refused all the same. */
    const uint32_t bad[] = { 5, 9, 8, 12, 2 };
    CHECK_INT(decode_words(&s, bad, 5, NULL, 0), TBON_EFORMAT);
    CHECK_UINT(s.n, 0);
    CHECK_INT(decode_words(&s, bad, 5, msg, 7), TBON_EFORMAT);
    CHECK_STR(msg, "ranges");

    /* The limit itself is accepted. */
    size_t n = (size_t)1 << 20, len = 8 * n + 4;
    uint8_t *big = malloc(len);
    REQUIRE(big);
    for (size_t i = 0; i < n; i++) {
        tb_put32(big + 8 * i, (uint32_t)(2 * i));
        tb_put32(big + 8 * i + 4, (uint32_t)(2 * i));
    }
    tb_put32(big + 8 * n, (uint32_t)n);
    CHECK_INT(tb_ranks_decode_tail(&s, big, len, msg, sizeof msg), (int)len);
    CHECK_UINT(s.n, n);
    CHECK_UINT(tb_ranks_hi(&s, n - 1), 2 * n - 2);
    free(big);
    tb_ranks_free(&s);
}

/* A set of one range lives in the struct: made, copied, unioned, cut and
 * decoded without an allocation (cap stays 0), and freed to nothing. */
TEST(one_range_needs_no_allocation)
{
    tb_ranks_t a = TB_RANKS_INIT, b, c = TB_RANKS_INIT, o = TB_RANKS_INIT;
    tb_ranks_init(&b);
    CHECK_INT(tb_ranks_add_range(&a, 5, 9), 0);
    CHECK_INT(tb_ranks_add(&a, 10), 0);
    CHECK_INT(tb_ranks_add(&a, 4), 0);
    CHECK_INT(tb_ranks_add(&a, 7), 0);
    CHECK_UINT(a.cap, 0);
    CHECK(a.r == a.one);
    CHECK_STR(txt(&a), "4-10");

    CHECK_INT(tb_ranks_copy(&b, &a), 0);
    CHECK_UINT(b.cap, 0);
    CHECK(b.r == b.one);
    CHECK(tb_ranks_equal(&a, &b));
    CHECK_INT(tb_ranks_copy(&b, &b), 0);
    CHECK(tb_ranks_equal(&a, &b));

    MAKE(&o, 11, 20);
    CHECK_INT(tb_ranks_union(&a, &o), 0);
    CHECK_STR(txt(&a), "4-20");
    CHECK_UINT(a.cap, 0);
    MAKE(&o, 0, 3);
    CHECK_INT(tb_ranks_union(&a, &o), 0);
    CHECK_STR(txt(&a), "0-20");
    CHECK_UINT(a.cap, 0);

    MAKE(&o, 0, 10);
    CHECK_INT(tb_ranks_minus(&c, &a, &o), 0);
    CHECK_STR(txt(&c), "11-20");
    CHECK_UINT(c.cap, 0);
    CHECK(c.r == c.one);

    uint8_t w[12];
    tb_ranks_encode(&c, w);
    tb_ranks_free(&c);
    CHECK_INT(tb_ranks_decode_tail(&c, w, sizeof w, NULL, 0), 12);
    CHECK_UINT(c.cap, 0);
    CHECK(c.r == c.one);
    CHECK_STR(txt(&c), "11-20");

    /* A set moved by struct assignment: its r still points into the old
     * struct, but every call reads its own one[] and sets r right again. */
    tb_ranks_t moved = a;
    CHECK_UINT(tb_ranks_lo(&moved, 0), 0);
    CHECK_UINT(tb_ranks_hi(&moved, 0), 20);
    CHECK_INT(tb_ranks_add(&moved, 21), 0);
    CHECK(moved.r == moved.one);
    CHECK_STR(txt(&moved), "0-21");
    CHECK_STR(txt(&a), "0-20");

    tb_ranks_free(&a);
    CHECK(a.r == NULL);
    CHECK_UINT(a.n, 0);
    CHECK_UINT(a.cap, 0);
    CHECK_INT(tb_ranks_add(&a, 3), 0);                  /* usable after free */
    CHECK_STR(txt(&a), "3");

    /* Past one range it allocates; clear keeps that memory for reuse, and a
     * heap set of one range copies into a small one. */
    CHECK_INT(tb_ranks_add(&a, 5), 0);
    CHECK(a.cap >= 2);
    size_t cap = a.cap;
    uint32_t *mem = a.r;
    tb_ranks_clear(&a);
    CHECK_UINT(a.n, 0);
    CHECK_UINT(a.cap, cap);
    CHECK_INT(tb_ranks_add_range(&a, 100, 200), 0);
    CHECK(a.r == mem);
    tb_ranks_free(&b);
    CHECK_INT(tb_ranks_copy(&b, &a), 0);
    CHECK_UINT(b.cap, 0);
    CHECK_STR(txt(&b), "100-200");
    CHECK_INT(tb_ranks_union(&b, &o), 0);
    CHECK_STR(txt(&b), "0-10 and 100-200");
    CHECK(b.cap >= 2);

    tb_ranks_free(&a);
    tb_ranks_free(&b);
    tb_ranks_free(&c);
    tb_ranks_free(&o);
    tb_ranks_free(&moved);
}

/* A range ending at UINT32_MAX must not wrap when its neighbour's adjacency
 * is checked: UINT32_MAX + 1 is not 0. */
TEST(ranks_near_uint32_max)
{
    tb_ranks_t s = TB_RANKS_INIT, o = TB_RANKS_INIT, d = TB_RANKS_INIT;
    CHECK_INT(tb_ranks_add(&s, UINT32_MAX), 0);
    CHECK_INT(tb_ranks_add(&s, UINT32_MAX), 0);
    CHECK_INT(tb_ranks_add_range(&s, UINT32_MAX, UINT32_MAX), 0);
    CHECK_STR(txt(&s), "4294967295");
    CHECK_INT(tb_ranks_add(&s, 0), 0);
    CHECK_STR(txt(&s), "0 and 4294967295");
    CHECK_INT(tb_ranks_add(&s, UINT32_MAX - 1), 0);
    CHECK_STR(txt(&s), "0 and 4294967294-4294967295");
    CHECK_INT(tb_ranks_add_range(&s, 1, UINT32_MAX - 3), 0);
    CHECK_STR(txt(&s), "0-4294967292 and 4294967294-4294967295");
    CHECK_INT(tb_ranks_add(&s, UINT32_MAX - 2), 0);
    CHECK_STR(txt(&s), "0-4294967295");
    CHECK_UINT(tb_ranks_count(&s), (uint64_t)1 << 32);

    MAKE(&s, UINT32_MAX, UINT32_MAX);
    MAKE(&o, 0, 0, 5, 5);
    CHECK_INT(tb_ranks_union(&s, &o), 0);
    CHECK_STR(txt(&s), "0, 5 and 4294967295");
    MAKE(&o, 0, 0, UINT32_MAX - 1, UINT32_MAX - 1);
    CHECK_INT(tb_ranks_union(&s, &o), 0);
    CHECK_STR(txt(&s), "0, 5 and 4294967294-4294967295");
    MAKE(&o, UINT32_MAX, UINT32_MAX);
    CHECK_INT(tb_ranks_overlaps(&s, &o), 1);
    CHECK_INT(tb_ranks_minus(&d, &s, &o), 0);
    CHECK_STR(txt(&d), "0, 5 and 4294967294");
    CHECK_INT(tb_ranks_union(&d, &o), 0);
    CHECK(tb_ranks_equal(&d, &s));
    CHECK_INT(tb_ranks_contains(&d, UINT32_MAX), 1);
    CHECK_INT(tb_ranks_contains(&d, UINT32_MAX - 2), 0);

    tb_ranks_free(&s);
    tb_ranks_free(&o);
    tb_ranks_free(&d);
}

/* The model: a bitmap over ranks 0..4095 and the 64 ranks up to UINT32_MAX
 * (two separate stretches, so a range never crosses from one to the other). */
#define NLOW  4096
#define NHIGH 64
#define NSLOT (NLOW + NHIGH)
#define NSETS 4

static uint32_t slot_rank(size_t k)
{
    return k < NLOW ? (uint32_t)k : UINT32_MAX - (uint32_t)(NSLOT - 1 - k);
}

/* s holds exactly the ranges of model m. */
static int matches(const tb_ranks_t *s, const unsigned char *m)
{
    if (!canonical(s))
        return 0;
    size_t i = 0;
    for (size_t k = 0; k < NSLOT; k++) {
        if (!m[k])
            continue;
        size_t e = k;
        while (e + 1 < NSLOT && e + 1 != NLOW && m[e + 1])
            e++;
        if (i == s->n || tb_ranks_lo(s, i) != slot_rank(k) || tb_ranks_hi(s, i) != slot_rank(e))
            return 0;
        i++;
        k = e;
    }
    return i == s->n;
}

/* A random range of slots within one stretch: mostly short, some long. */
static void rand_slots(uint64_t *st, size_t *lo, size_t *hi)
{
    size_t base = 0, size = NLOW;
    if (th_rand(st) % 6 == 0) {
        base = NLOW;
        size = NHIGH;
    }
    size_t len = th_rand(st) % 8 == 0 ? 1 + th_rand(st) % 600 : 1 + th_rand(st) % 12;
    *lo = base + th_rand(st) % size;
    *hi = *lo + len - 1;
    if (*hi >= base + size)
        *hi = base + size - 1;
}

TEST(random_against_bitmap)
{
    static unsigned char m[NSETS][NSLOT], t[NSLOT];
    tb_ranks_t s[NSETS];
    for (int i = 0; i < NSETS; i++)
        tb_ranks_init(&s[i]);
    uint64_t st = 0x5eed;
    uint8_t wire[8 * NSLOT + 64];
    uint32_t out[16];
    for (int step = 0; step < 6000; step++) {
        int i = (int)(th_rand(&st) % NSETS), j = (int)(th_rand(&st) % NSETS);
        int k = (i + 1 + (int)(th_rand(&st) % (NSETS - 1))) % NSETS;   /* != i */
        if (j == k)
            j = i;                       /* minus: k is neither i nor j */
        size_t lo, hi;
        int op = (int)(th_rand(&st) % 12), changed = i;
        switch (op) {
        case 0: case 1: case 2:
            rand_slots(&st, &lo, &hi);
            CHECK_INT(tb_ranks_add(&s[i], slot_rank(lo)), 0);
            m[i][lo] = 1;
            break;
        case 3: case 4:
            rand_slots(&st, &lo, &hi);
            CHECK_INT(tb_ranks_add_range(&s[i], slot_rank(lo), slot_rank(hi)), 0);
            memset(&m[i][lo], 1, hi - lo + 1);
            break;
        case 5: {
            /* added only if the set has none of them */
            rand_slots(&st, &lo, &hi);
            int met = 0;
            for (size_t x = lo; x <= hi; x++)
                met |= m[i][x];
            CHECK_INT(tb_ranks_add_new(&s[i], slot_rank(lo), slot_rank(hi)), met);
            if (!met)
                memset(&m[i][lo], 1, hi - lo + 1);
            break;
        }
        case 6: case 7:
            if (j == i)
                j = k;
            CHECK_INT(tb_ranks_union(&s[i], &s[j]), 0);
            for (size_t x = 0; x < NSLOT; x++)
                m[i][x] |= m[j][x];
            break;
        case 8:
            CHECK_INT(tb_ranks_minus(&s[k], &s[i], &s[j]), 0);
            for (size_t x = 0; x < NSLOT; x++)
                m[k][x] = m[i][x] && !m[j][x];
            changed = k;
            break;
        case 9:
            CHECK_INT(tb_ranks_copy(&s[k], &s[i]), 0);
            memcpy(m[k], m[i], NSLOT);
            changed = k;
            break;
        case 10: {
            size_t pre = th_rand(&st) % 9, ws = tb_ranks_wire_size(&s[i]);
            REQUIRE(pre + ws <= sizeof wire);
            th_fill_random(wire, pre, th_rand(&st));
            tb_ranks_encode(&s[i], wire + pre);
            CHECK_INT(tb_ranks_decode_tail(&s[k], wire, pre + ws, NULL, 0), (int)ws);
            memcpy(m[k], m[i], NSLOT);
            changed = k;
            break;
        }
        default:
            /* Now and then empty a set; else cut a random range out of it. */
            if (th_rand(&st) % 8 == 0) {
                if (th_rand(&st) % 2)
                    tb_ranks_clear(&s[i]);
                else
                    tb_ranks_free(&s[i]);
                memset(m[i], 0, NSLOT);
            } else {
                tb_ranks_t cut = TB_RANKS_INIT, tmp = TB_RANKS_INIT;
                rand_slots(&st, &lo, &hi);
                CHECK_INT(tb_ranks_add_range(&cut, slot_rank(lo), slot_rank(hi)), 0);
                CHECK_INT(tb_ranks_minus(&tmp, &s[i], &cut), 0);
                CHECK_INT(tb_ranks_copy(&s[i], &tmp), 0);
                memset(&m[i][lo], 0, hi - lo + 1);
                tb_ranks_free(&cut);
                tb_ranks_free(&tmp);
            }
            break;
        }
        if (!matches(&s[changed], m[changed]))
            th_fail(__FILE__, __LINE__, "step %d op %d: set %d is %s", step, op, changed,
                    txt(&s[changed]));
        REQUIRE(th_failures == 0);

        /* The queries, against the model. */
        rand_slots(&st, &lo, &hi);
        CHECK_INT(tb_ranks_contains(&s[i], slot_rank(lo)), m[i][lo]);
        CHECK_INT(tb_ranks_contains(&s[i], NLOW + (uint32_t)lo), 0);
        uint64_t cnt = 0;
        int share = 0, same = 1;
        size_t first = NSLOT;
        for (size_t x = 0; x < NSLOT; x++) {
            cnt += m[i][x];
            share |= m[i][x] && m[j][x];
            same &= m[i][x] == m[j][x];
            if (m[i][x] && first == NSLOT)
                first = x;
        }
        CHECK_UINT(tb_ranks_count(&s[i]), cnt);
        CHECK_INT(tb_ranks_overlaps(&s[i], &s[j]), share);
        CHECK_INT(tb_ranks_equal(&s[i], &s[j]), same);
        size_t cap = th_rand(&st) % 17;
        CHECK_UINT(tb_ranks_list(&s[i], out, cap), cnt);
        size_t x = first;
        for (size_t q = 0; q < cap && q < cnt; q++, x++) {
            while (!m[i][x])
                x++;
            CHECK_UINT(out[q], slot_rank(x));
        }
        REQUIRE(th_failures == 0);
    }
    /* Everything at once: the union of all against the OR of the models. */
    tb_ranks_t all = TB_RANKS_INIT;
    memset(t, 0, sizeof t);
    for (int i = 0; i < NSETS; i++) {
        CHECK_INT(tb_ranks_union(&all, &s[i]), 0);
        for (size_t x = 0; x < NSLOT; x++)
            t[x] |= m[i][x];
    }
    CHECK(matches(&all, t));
    tb_ranks_free(&all);
    for (int i = 0; i < NSETS; i++)
        tb_ranks_free(&s[i]);
}
