/* ranks.c - sets of ranks as sorted, disjoint, non-adjacent ranges */
#include "util/ranks.h"
#include "util/hot.h"
#include "util/endian.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tbon/common.h>

#define MAX_WIRE_RANGES (1u << 20)

/* The ranges of s for reading: one[] while nothing is allocated, whatever r
 * says (a set copied by struct assignment still has r pointing at the old
 * struct's one[]). */
static const uint32_t *rd(const tb_ranks_t *s)
{
    return s->cap ? s->r : s->one;
}

/* The same for writing; puts r right again for readers of s->r. */
static uint32_t *wr(tb_ranks_t *s)
{
    if (!s->cap)
        s->r = s->one;
    return s->r;
}

/* Room for k ranges, keeping the n there are. One range needs no allocation
 * while none was made; past that the array grows by doubling. 0 or
 * TBON_ENOMEM (s unchanged). */
TB_HOT static int room(tb_ranks_t *s, size_t k)
{
    if (k <= (s->cap ? s->cap : 1)) {
        wr(s);
        return 0;
    }
    size_t nc = s->cap ? 2 * s->cap : 4;
    if (nc < k)
        nc = k;
    if (nc > SIZE_MAX / (2 * sizeof(uint32_t)))
        return TBON_ENOMEM;
    uint32_t *v;
    if (s->cap) {
        v = realloc(s->r, nc * 2 * sizeof *v);
    } else {
        v = malloc(nc * 2 * sizeof *v);
        if (v && s->n)
            memcpy(v, s->one, sizeof s->one);
    }
    if (!v)
        return TBON_ENOMEM;
    s->r = v;
    s->cap = nc;
    return 0;
}

void tb_ranks_init(tb_ranks_t *s)
{
    *s = (tb_ranks_t)TB_RANKS_INIT;
}

void tb_ranks_free(tb_ranks_t *s)
{
    if (s->cap)
        free(s->r);
    tb_ranks_init(s);
}

void tb_ranks_clear(tb_ranks_t *s)
{
    s->n = 0;
}

int tb_ranks_merge_range(tb_ranks_t *s, uint32_t lo, uint32_t hi)
{
    if (lo > hi)
        return TBON_EINVAL;
    size_t n = s->n;
    uint32_t *v = wr(s);
    /* Comparisons with a neighbour's end + 1 are done in 64 bits, so that a
     * range ending at UINT32_MAX does not wrap to 0 and look adjacent to
     * everything. */
    uint64_t hi1 = (uint64_t)hi + 1;
    /* Most adds land at the end (ranks come in order): after the last
     * range, or joining it from its start on. */
    if (n == 0 || (uint64_t)v[2 * n - 1] + 1 < lo) {
        if (room(s, n + 1) != 0)
            return TBON_ENOMEM;
        v = s->r;
        v[2 * n] = lo;
        v[2 * n + 1] = hi;
        s->n = n + 1;
        return 0;
    }
    if (lo >= v[2 * n - 2]) {
        if (hi > v[2 * n - 1])
            v[2 * n - 1] = hi;
        return 0;
    }
    /* i: the first range that ends at or after lo - 1 (touches [lo, hi] or
     * lies after it). */
    size_t i = 0, b = n - 1;
    while (i < b) {
        size_t mid = i + (b - i) / 2;
        if ((uint64_t)v[2 * mid + 1] + 1 < lo)
            i = mid + 1;
        else
            b = mid;
    }
    /* j: the first range from i on that starts after hi + 1; i..j-1 merge. */
    size_t j = i;
    while (j < n && v[2 * j] <= hi1)
        j++;
    if (i == j) {
        if (room(s, n + 1) != 0)
            return TBON_ENOMEM;
        v = s->r;
        if (n > i)
            memmove(v + 2 * (i + 1), v + 2 * i, 2 * (n - i) * sizeof *v);
        v[2 * i] = lo;
        v[2 * i + 1] = hi;
        s->n = n + 1;
        return 0;
    }
    if (v[2 * i] < lo)
        lo = v[2 * i];
    if (v[2 * j - 1] > hi)
        hi = v[2 * j - 1];
    v[2 * i] = lo;
    v[2 * i + 1] = hi;
    if (n > j)
        memmove(v + 2 * (i + 1), v + 2 * j, 2 * (n - j) * sizeof *v);
    s->n = n - (j - i - 1);
    return 0;
}

TB_HOT int tb_ranks_add_new(tb_ranks_t *s, uint32_t lo, uint32_t hi)
{
    if (lo > hi)
        return TBON_EINVAL;
    size_t n = s->n;
    const uint32_t *v = rd(s);
    if (n && v[2 * n - 1] >= lo) {
        /* the first range that ends at or after lo: [lo, hi] meets s iff
         * it starts at or before hi */
        size_t a = 0, b = n - 1;
        while (a < b) {
            size_t mid = a + (b - a) / 2;
            if (v[2 * mid + 1] < lo)
                a = mid + 1;
            else
                b = mid;
        }
        if (v[2 * a] <= hi)
            return 1;
    }
    return tb_ranks_add_range(s, lo, hi);
}

TB_HOT int tb_ranks_union(tb_ranks_t *s, const tb_ranks_t *o)
{
    size_t n = s->n, m = o->n;
    if (m == 0)
        return 0;
    if (n == 0)
        return tb_ranks_copy(s, o);
    const uint32_t *ov = rd(o);
    /* The common case (a child's one range into the wave's set) allocates
     * only if the result needs another range. */
    if (m == 1)
        return tb_ranks_add_range(s, ov[0], ov[1]);
    /* A merge in place: s's ranges move to the end of an array with room
     * for both, and the result is written from the front. Each result range
     * written consumed at least one input range and the one being looked
     * at is already read, so the writes stay behind s's unread ranges. */
    if (room(s, n + m) != 0)
        return TBON_ENOMEM;
    uint32_t *v = s->r;
    memmove(v + 2 * m, v, 2 * n * sizeof *v);
    const uint32_t *sv = v + 2 * m;
    size_t i = 0, j = 0, w = 0;
    uint32_t lo, hi;
    if (sv[0] <= ov[0]) {
        lo = sv[0];
        hi = sv[1];
        i = 1;
    } else {
        lo = ov[0];
        hi = ov[1];
        j = 1;
    }
    while (i < n || j < m) {
        uint32_t nlo, nhi;
        if (j == m || (i < n && sv[2 * i] <= ov[2 * j])) {
            nlo = sv[2 * i];
            nhi = sv[2 * i + 1];
            i++;
        } else {
            nlo = ov[2 * j];
            nhi = ov[2 * j + 1];
            j++;
        }
        if ((uint64_t)hi + 1 >= nlo) {
            if (nhi > hi)
                hi = nhi;
        } else {
            v[2 * w] = lo;
            v[2 * w + 1] = hi;
            w++;
            lo = nlo;
            hi = nhi;
        }
    }
    v[2 * w] = lo;
    v[2 * w + 1] = hi;
    s->n = w + 1;
    return 0;
}

TB_HOT int tb_ranks_copy(tb_ranks_t *dst, const tb_ranks_t *src)
{
    if (dst == src)
        return 0;
    if (room(dst, src->n) != 0)
        return TBON_ENOMEM;
    if (src->n)
        memcpy(dst->r, rd(src), 2 * src->n * sizeof *dst->r);
    dst->n = src->n;
    return 0;
}

/* The ranges of a \ b into out (NULL: only count them); returns how many. */
static size_t minus_into(uint32_t *out, const tb_ranks_t *a, const tb_ranks_t *b)
{
    const uint32_t *av = rd(a), *bv = rd(b);
    size_t k = 0, j = 0;
    for (size_t i = 0; i < a->n; i++) {
        uint32_t cur = av[2 * i], hi = av[2 * i + 1];
        int left = 1;    /* cur..hi is still to be emitted */
        while (j < b->n && bv[2 * j + 1] < cur)
            j++;
        /* A range of b that runs past hi may cut the next range of a too:
         * j stays on it. */
        while (j < b->n && bv[2 * j] <= hi) {
            if (bv[2 * j] > cur) {
                if (out) {
                    out[2 * k] = cur;
                    out[2 * k + 1] = bv[2 * j] - 1;
                }
                k++;
            }
            if (bv[2 * j + 1] >= hi) {
                left = 0;
                break;
            }
            cur = bv[2 * j + 1] + 1;    /* < hi: no wrap */
            j++;
        }
        if (left) {
            if (out) {
                out[2 * k] = cur;
                out[2 * k + 1] = hi;
            }
            k++;
        }
    }
    return k;
}

int tb_ranks_minus(tb_ranks_t *dst, const tb_ranks_t *a, const tb_ranks_t *b)
{
    /* Counting first costs a pass but sizes dst exactly, and a result of one
     * range stays in one[]. */
    size_t k = b->n ? minus_into(NULL, a, b) : a->n;
    if (room(dst, k) != 0)
        return TBON_ENOMEM;
    minus_into(dst->r, a, b);
    dst->n = k;
    return 0;
}

int tb_ranks_overlaps(const tb_ranks_t *a, const tb_ranks_t *b)
{
    const uint32_t *av = rd(a), *bv = rd(b);
    size_t i = 0, j = 0;
    while (i < a->n && j < b->n) {
        if (av[2 * i + 1] < bv[2 * j])
            i++;
        else if (bv[2 * j + 1] < av[2 * i])
            j++;
        else
            return 1;
    }
    return 0;
}

int tb_ranks_contains(const tb_ranks_t *s, uint32_t r)
{
    const uint32_t *v = rd(s);
    /* The last range starting at or before r is the only one that may hold it. */
    size_t a = 0, b = s->n;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (v[2 * mid] <= r)
            a = mid + 1;
        else
            b = mid;
    }
    return a > 0 && v[2 * (a - 1) + 1] >= r;
}

int tb_ranks_equal(const tb_ranks_t *a, const tb_ranks_t *b)
{
    /* Canonical form: the same ranks are the same ranges. */
    return a->n == b->n && (a->n == 0 || memcmp(rd(a), rd(b), 2 * a->n * sizeof(uint32_t)) == 0);
}

uint64_t tb_ranks_count(const tb_ranks_t *s)
{
    const uint32_t *v = rd(s);
    uint64_t c = 0;
    for (size_t i = 0; i < s->n; i++)
        c += (uint64_t)v[2 * i + 1] - v[2 * i] + 1;
    return c;
}

size_t tb_ranks_list(const tb_ranks_t *s, uint32_t *out, size_t cap)
{
    const uint32_t *v = rd(s);
    size_t k = 0;
    for (size_t i = 0; i < s->n && k < cap; i++)
        for (uint64_t x = v[2 * i]; x <= v[2 * i + 1] && k < cap; x++)
            out[k++] = (uint32_t)x;
    uint64_t c = tb_ranks_count(s);
    return c > SIZE_MAX ? SIZE_MAX : (size_t)c;
}

size_t tb_ranks_wire_size(const tb_ranks_t *s)
{
    return 8 * s->n + 4;
}

TB_HOT void tb_ranks_encode(const tb_ranks_t *s, uint8_t *out)
{
    const uint32_t *v = rd(s);
    for (size_t i = 0; i < 2 * s->n; i++)
        tb_put32(out + 4 * i, v[i]);
    tb_put32(out + 8 * s->n, (uint32_t)s->n);
}

/* "7" or "5-9", as tb_ranks_format writes a range. */
static int range_text(char *buf, size_t len, uint32_t lo, uint32_t hi)
{
    if (lo == hi)
        return snprintf(buf, len, "%" PRIu32, lo);
    return snprintf(buf, len, "%" PRIu32 "-%" PRIu32, lo, hi);
}

__attribute__((format(printf, 4, 5)))
static int refuse(tb_ranks_t *s, char *msg, size_t msglen, const char *fmt, ...)
{
    s->n = 0;
    if (msg && msglen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msglen, fmt, ap);
        va_end(ap);
    }
    return TBON_EFORMAT;
}

TB_HOT int tb_ranks_decode_tail(tb_ranks_t *s, const uint8_t *buf, size_t len, char *msg,
                         size_t msglen)
{
    if (len < 4)
        return refuse(s, msg, msglen, "trailer of %zu bytes, shorter than its count", len);
    uint32_t n = tb_get32(buf + len - 4);
    if (n > MAX_WIRE_RANGES)
        return refuse(s, msg, msglen, "count %" PRIu32 " over the limit of %u", n,
                      MAX_WIRE_RANGES);
    size_t size = 8 * (size_t)n + 4;
    if (size > len)
        return refuse(s, msg, msglen, "count %" PRIu32 " needs %zu bytes, only %zu there", n,
                      size, len);
    /* All of it is checked before s changes: a malformed trailer costs no
     * allocation. */
    const uint8_t *p = buf + len - size;
    uint32_t plo = 0, phi = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t lo = tb_get32(p + 8 * i), hi = tb_get32(p + 8 * i + 4);
        if (lo > hi)
            return refuse(s, msg, msglen, "range %" PRIu32 "-%" PRIu32 " runs backwards", lo, hi);
        if (i == 0) {
            plo = lo;
            phi = hi;
            continue;
        }
        const char *why = NULL;
        if (lo <= phi && plo <= hi)
            why = "overlap";
        else if (hi < plo)
            why = "out of order";
        else if ((uint64_t)phi + 1 == lo)
            why = "adjacent, not merged";
        if (why) {
            char a[24], b[24];
            range_text(a, sizeof a, plo, phi);
            range_text(b, sizeof b, lo, hi);
            return refuse(s, msg, msglen, "ranges %s and %s %s", a, b, why);
        }
        plo = lo;
        phi = hi;
    }
    if (room(s, n) != 0) {
        s->n = 0;
        if (msg && msglen)
            snprintf(msg, msglen, "out of memory for %" PRIu32 " ranges", n);
        return TBON_ENOMEM;
    }
    for (size_t i = 0; i < 2 * (size_t)n; i++)
        s->r[i] = tb_get32(p + 4 * i);
    s->n = n;
    return (int)size;
}

static size_t digits(uint64_t x)
{
    size_t d = 1;
    while (x >= 10) {
        x /= 10;
        d++;
    }
    return d;
}

static size_t range_len(uint32_t lo, uint32_t hi)
{
    return digits(lo) + (lo == hi ? 0 : 1 + digits(hi));
}

/* " and N more ranks" or "N ranks" (lead 0): its length, or write it. */
static size_t rest_text(char *buf, size_t len, int lead, uint64_t nr)
{
    const char *unit = nr == 1 ? "rank" : "ranks";
    if (buf)
        snprintf(buf, len, "%s%" PRIu64 "%s%s", lead ? " and " : "", nr,
                 lead ? " more " : " ", unit);
    return (lead ? 5 + 6 : 1) + digits(nr) + strlen(unit);
}

int tb_ranks_format(const tb_ranks_t *s, char *buf, size_t len)
{
    const uint32_t *v = rd(s);
    size_t n = s->n;
    size_t want = n ? 0 : 4;
    for (size_t i = 0; i < n; i++)
        want += (i == 0 ? 0 : i + 1 == n ? 5 : 2) + range_len(v[2 * i], v[2 * i + 1]);
    int ret = want > INT_MAX ? INT_MAX : (int)want;
    if (len == 0)
        return ret;
    if (n == 0) {
        snprintf(buf, len, "none");
        return ret;
    }
    size_t k = n;        /* ranges listed */
    size_t at = 0;
    if (want >= len) {
        /* The most leading ranges that fit with the rest counted after them
         * (the count shrinks as ranges are listed, so try every k). */
        uint64_t left = tb_ranks_count(s);
        size_t pre = 0;
        k = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            pre += (i ? 2 : 0) + range_len(v[2 * i], v[2 * i + 1]);
            left -= (uint64_t)v[2 * i + 1] - v[2 * i] + 1;
            if (pre + 16 >= len)     /* " and 1 more rank" is the shortest rest */
                break;
            if (pre + rest_text(NULL, 0, 1, left) < len)
                k = i + 1;
        }
        if (k == 0) {
            uint64_t all = tb_ranks_count(s);
            if (rest_text(NULL, 0, 0, all) < len)
                rest_text(buf, len, 0, all);
            else
                buf[0] = 0;
            return ret;
        }
    }
    for (size_t i = 0; i < k; i++) {
        if (i)
            at += (size_t)snprintf(buf + at, len - at, "%s", i + 1 == n ? " and " : ", ");
        at += (size_t)range_text(buf + at, len - at, v[2 * i], v[2 * i + 1]);
    }
    if (k < n) {
        uint64_t left = 0;
        for (size_t i = k; i < n; i++)
            left += (uint64_t)v[2 * i + 1] - v[2 * i] + 1;
        rest_text(buf + at, len - at, 1, left);
    }
    return ret;
}
