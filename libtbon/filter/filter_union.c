/* filter_union.c - the built-in union filter: the set of unique unsigned
 * integers seen on a stream, with recoverable state
 *
 * This is the integer-union computation of seed 003 (section IV-A, used as
 * the application of the evaluation in section VI-B): the distinct integers
 * of a stream, each reported once. Its join (set union) is associative,
 * commutative and idempotent, so it supports state composition (section IV-C): the state at a node is the set
 * of every value it has seen on the stream, and get_FilterState (section
 * V-B) returns that whole set, which an adopted orphan sends to its new
 * parent as ordinary input; values the parent already has cost nothing.
 *
 * Each wave outputs one "%auld" packet: the sorted values of the wave that
 * were not yet in the state (possibly none), so the union of everything the
 * FE application receives is the union of everything the back-ends sent.
 *
 * The state is an open-addressing hash (membership: one probe per value)
 * and the values in the order first seen; get_FilterState sorts a copy.
 * (A sorted set merged at every wave cost O(set) per wave: at the FE of
 * 8x8, with 262,144 values, that merge alone was the FE's hottest spot.)
 */
#include "filter/filter.h"

#include "codec/packet_int.h"

#include <stdlib.h>
#include <string.h>

/* Below this many values a wave is sorted by insertion, above by radix. */
#define SMALL_SORT 48

struct union_state {
    uint64_t *set;         /* every value seen, once each, in the order seen
                            * (the hash tells membership; get_state sorts) */
    size_t    n, cap;
    uint64_t *buf, *tmp;   /* scratch of one wave (kept: no malloc per wave) */
    size_t    bcap;
    int       tag;         /* of the last wave, for the state packet */
    /* The same values in an open-addressing hash (0 marks a free slot; the
     * value 0 itself is has_zero): most values of a long-running union were
     * seen before, and one probe tells, where sorting them and walking the
     * set cost O(log n) or more each. */
    uint64_t *h;
    size_t    hmask;       /* slots - 1 (a power of two), 0 before the first */
    int       has_zero;
    /* What tb_filter_union_keep appended and the set has not yet absorbed
     * (unsorted, with repeats). Part of the state: fn and get_state absorb
     * it first. */
    uint64_t *pend;
    size_t    pn, pcap;
};

/* A back-end keeps what it sends (tb_filter_union_keep) by appending it, and
 * the set absorbs the appended values in bulk, once there are this many: a
 * back-end runs among many processes, and its hash is cold whenever it gets
 * the CPU back; probing it for every value sent missed the cache most of the
 * time, where one pass over many values pays for warming it once. A sort
 * instead of probes cost more than twice as much (radix passes over values
 * that are mostly known). */
#define KEEP_BULK 16384

static inline size_t h_slot(uint64_t v, size_t mask)
{
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdULL;
    v ^= v >> 33;
    return (size_t)v & mask;
}

static int h_has(const struct union_state *st, uint64_t v)
{
    if (v == 0)
        return st->has_zero;
    if (!st->hmask)
        return 0;
    for (size_t i = h_slot(v, st->hmask);; i = (i + 1) & st->hmask) {
        if (st->h[i] == v)
            return 1;
        if (st->h[i] == 0)
            return 0;
    }
}

static void h_put(struct union_state *st, uint64_t v)
{
    if (v == 0) {
        st->has_zero = 1;
        return;
    }
    size_t i = h_slot(v, st->hmask);
    while (st->h[i] != 0 && st->h[i] != v)
        i = (i + 1) & st->hmask;
    st->h[i] = v;
}

/* Room in the hash for n values at most half full. 0 or TBON_ENOMEM (the
 * hash unchanged). */
static int h_reserve(struct union_state *st, size_t n)
{
    size_t slots = st->hmask ? st->hmask + 1 : 0;
    if (n * 2 <= slots)
        return 0;
    size_t ns = slots ? slots : 64;
    while (ns < n * 2)
        ns *= 2;
    uint64_t *nh = calloc(ns, sizeof *nh);
    if (!nh)
        return TBON_ENOMEM;
    uint64_t *old = st->h;
    size_t om = st->hmask;
    st->h = nh;
    st->hmask = ns - 1;
    for (size_t i = 0; old && i <= om; i++)
        if (old[i])
            h_put(st, old[i]);
    free(old);
    return 0;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_LE 1
#else
#define HOST_LE 0
#endif

static inline uint64_t ld64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

/* Swap v[0..n) between host and little-endian order (nothing on LE hosts). */
static void swap_le(uint64_t *v, size_t n)
{
    if (HOST_LE)
        return;
    for (size_t i = 0; i < n; i++) {
        uint8_t b[8];
        for (int k = 0; k < 8; k++)
            b[k] = (uint8_t)(v[i] >> (8 * k));
        memcpy(&v[i], b, 8);
    }
}

/* Grow *v (of capacity *cap) to hold need values. Returns 0 or TBON_ENOMEM
 * (*v unchanged). */
static int reserve(uint64_t **v, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    if (need > SIZE_MAX / sizeof(uint64_t))
        return TBON_ENOMEM;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c = c > SIZE_MAX / 2 / sizeof(uint64_t) ? need : c * 2;
    uint64_t *nv = realloc(*v, c * sizeof *nv);
    if (!nv)
        return TBON_ENOMEM;
    *v = nv;
    *cap = c;
    return 0;
}

/* LSD radix sort of a[0..n) by bytes, using tmp[0..n). Only the bytes that
 * differ between values get a pass (small numbers share their high bytes),
 * found from the OR and AND of all values in one pass first. */
static void radix_sort(uint64_t *a, uint64_t *tmp, size_t n)
{
    size_t cnt[8][256];   /* 16 KiB of stack */
    uint64_t *src = a, *dst = tmp, or_all = 0, and_all = ~(uint64_t)0;
    int pass[8], np = 0;

    for (size_t i = 0; i < n; i++) {
        or_all |= a[i];
        and_all &= a[i];
    }
    for (int b = 0; b < 8; b++)
        if (((or_all ^ and_all) >> (8 * b)) & 0xff)
            pass[np++] = b;
    memset(cnt, 0, sizeof cnt);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < np; k++)
            cnt[k][(a[i] >> (8 * pass[k])) & 0xff]++;
    for (int k = 0; k < np; k++) {
        size_t *c = cnt[k], sum = 0;
        int sh = 8 * pass[k];
        for (int v = 0; v < 256; v++) {
            size_t t = c[v];
            c[v] = sum;
            sum += t;
        }
        for (size_t i = 0; i < n; i++)
            dst[c[(src[i] >> sh) & 0xff]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, n * sizeof *a);
}

/* Sort v[0..n) ascending (tmp: scratch of n values). */
static void sort_values(uint64_t *v, uint64_t *tmp, size_t n)
{
    size_t i = 1;
    while (i < n && v[i - 1] <= v[i])
        i++;
    if (i >= n)
        return;   /* already sorted: one child, or the FE's own state packet */
    if (n <= SMALL_SORT) {
        for (i = 1; i < n; i++) {
            uint64_t x = v[i];
            size_t j = i;
            for (; j > 0 && v[j - 1] > x; j--)
                v[j] = v[j - 1];
            v[j] = x;
        }
        return;
    }
    radix_sort(v, tmp, n);
}

/* Remove duplicates from sorted v[0..n); returns the new count. */
static size_t unique(uint64_t *v, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (w == 0 || v[w - 1] != v[i])
            v[w++] = v[i];
    return w;
}

/* Make room for need values in the wave scratch buffers. 0 or TBON_ENOMEM. */
static int reserve_scratch(struct union_state *st, size_t need)
{
    if (need <= st->bcap)
        return 0;
    size_t c1 = st->bcap, c2 = st->bcap;
    if (reserve(&st->buf, &c1, need) || reserve(&st->tmp, &c2, need))
        return TBON_ENOMEM;
    st->bcap = c1 < c2 ? c1 : c2;
    return 0;
}

/* The hash holding the whole set (a new state has none). 0 or TBON_ENOMEM. */
static int build_hash(struct union_state *st)
{
    if (st->hmask || !st->n)
        return 0;
    if (h_reserve(st, st->n))
        return TBON_ENOMEM;
    st->has_zero = 0;
    for (size_t i = 0; i < st->n; i++)
        h_put(st, st->set[i]);
    return 0;
}

/* Fold the appended values into the set and the hash: one pass over them,
 * while the hash is warm. 0 or TBON_ENOMEM (what is left still appended). */
static int absorb(struct union_state *st)
{
    size_t j = 0;
    if (!st->pn)
        return 0;
    if (build_hash(st))
        return TBON_ENOMEM;
    for (; j < st->pn; j++) {
        uint64_t v = st->pend[j];
        /* The slot of a value a few ahead is fetched meanwhile. */
        if (j + 8 < st->pn && st->hmask)
            __builtin_prefetch(&st->h[h_slot(st->pend[j + 8], st->hmask)]);
        if (h_has(st, v))
            continue;
        if (reserve(&st->set, &st->cap, st->n + 1) || h_reserve(st, st->n + 1))
            break;
        st->set[st->n++] = v;
        h_put(st, v);
    }
    if (j < st->pn) {
        memmove(st->pend, st->pend + j, (st->pn - j) * sizeof *st->pend);
        st->pn -= j;
        return TBON_ENOMEM;
    }
    st->pn = 0;
    return 0;
}

/* Before a wave: the appended values absorbed, the hash built. 0 or
 * TBON_ENOMEM. */
static int ready_for_wave(struct union_state *st)
{
    return absorb(st) || build_hash(st) ? TBON_ENOMEM : 0;
}

/* Check the inputs ("%auld" or "%uld", one field) and count their values.
 * Returns 0 or TBON_EFORMAT with the reason set. */
static int check_inputs(tbon_packet_t *const in[], size_t n, size_t *total)
{
    char rb[16];
    *total = 0;
    for (size_t k = 0; k < n; k++) {
        size_t cnt;
        enum tb_ftype t = tb_packet_nfields(in[k]) == 1 ?
                          tb_packet_field_type(in[k], 0) : TB_F_COUNT;
        if (t != TB_F_AULD && t != TB_F_ULD) {
            tb_filter_errorf("input %zu (from rank %s) has format \"%s\"; union "
                             "takes \"%%auld\" or \"%%uld\"", k,
                             tb_filter_rank_str(tbon_packet_source(in[k]), rb),
                             tbon_packet_format(in[k]));
            return TBON_EFORMAT;
        }
        tb_packet_field(in[k], 0, &cnt);
        *total += cnt;
    }
    return 0;
}

/* The start of a call over in[0..n) (n > 0): the inputs checked and their
 * values counted (*m), the state made if there was none (*st), its tag set.
 * 0, or the error with the reason set. */
static int begin(tbon_packet_t *const in[], size_t n, void **state, struct union_state **st,
                 size_t *m)
{
    int rc = check_inputs(in, n, m);
    if (rc)
        return rc;
    if (!*state && !(*state = calloc(1, sizeof **st))) {
        tb_filter_errorf("out of memory for the union's state");
        return TBON_ENOMEM;
    }
    *st = *state;
    (*st)->tag = tbon_packet_tag(in[0]);
    return 0;
}

int tb_filter_union(tbon_packet_t *const in[], size_t n, tbon_packet_list_t *out,
                    void **state, const tbon_filter_ctx_t *ctx)
{
    struct union_state *st;
    struct tb_field f;
    tbon_error_t err;
    tbon_packet_t *p;
    size_t m = 0, d;
    int rc;

    (void)ctx;
    if (n == 0)
        return 0;
    if ((rc = begin(in, n, state, &st, &m)))
        return rc;
    if (ready_for_wave(st) || reserve_scratch(st, m))
        goto nomem;
    /* Only the values the hash has not seen go on to be sorted. */
    m = 0;
    for (size_t k = 0; k < n; k++) {
        size_t cnt;
        const uint8_t *b = tb_packet_field(in[k], 0, &cnt);
        for (size_t i = 0; i < cnt; i++) {
            uint64_t v;
            if (HOST_LE)
                memcpy(&v, b + 8 * i, 8);
            else
                v = ld64(b + 8 * i);
            if (!h_has(st, v))
                st->buf[m++] = v;
        }
    }
    sort_values(st->buf, st->tmp, m);
    d = unique(st->buf, m);
    /* Reserve before output so that nothing can fail after the push: the
     * state then always holds exactly what was sent up. */
    if (reserve(&st->set, &st->cap, st->n + d) || h_reserve(st, st->n + d))
        goto nomem;
    swap_le(st->buf, d);
    f = (struct tb_field){ TB_F_AULD, d, (const uint8_t *)st->buf, d * 8 };
    p = tb_packet_build(tbon_packet_tag(in[0]), &f, 1, &err);
    swap_le(st->buf, d);
    if (!p) {
        tb_filter_errorf("%s", err.msg);
        return err.code;
    }
    if ((rc = tbon_packet_list_push(out, p))) {
        tb_filter_errorf("cannot append the output packet: %s", tbon_strerror(rc));
        return rc;
    }
    memcpy(st->set + st->n, st->buf, d * sizeof *st->buf);
    st->n += d;
    for (size_t i = 0; i < d; i++)
        h_put(st, st->buf[i]);
    return 0;

nomem:
    tb_filter_errorf("out of memory for a wave of %zu values", m);
    return TBON_ENOMEM;
}

int tb_filter_union_keep(tbon_packet_t *const in[], size_t n, void **state)
{
    struct union_state *st;
    size_t m = 0;
    int rc;

    if (n == 0)
        return 0;
    if ((rc = begin(in, n, state, &st, &m)))
        return rc;
    if (reserve(&st->pend, &st->pcap, st->pn + m))
        goto nomem;
    for (size_t k = 0; k < n; k++) {
        size_t cnt;
        const uint8_t *b = tb_packet_field(in[k], 0, &cnt);
        if (HOST_LE) {
            memcpy(st->pend + st->pn, b, cnt * 8);
            st->pn += cnt;
        } else {
            for (size_t i = 0; i < cnt; i++)
                st->pend[st->pn++] = ld64(b + 8 * i);
        }
    }
    if (st->pn >= KEEP_BULK && absorb(st))
        goto nomem;
    return 0;

nomem:
    tb_filter_errorf("out of memory keeping %zu values", m);
    return TBON_ENOMEM;
}

tbon_packet_t *tb_filter_union_get_state(void **state, uint32_t stream)
{
    struct union_state *st = state ? *state : NULL;
    struct tb_field f;
    tbon_packet_t *p;

    (void)stream;
    /* Sorted, so that the packet is the same whatever the order seen. */
    if (!st || absorb(st) || reserve_scratch(st, st->n))
        return NULL;
    memcpy(st->buf, st->set, st->n * sizeof *st->buf);
    sort_values(st->buf, st->tmp, st->n);
    swap_le(st->buf, st->n);
    f = (struct tb_field){ TB_F_AULD, st->n, (const uint8_t *)st->buf, st->n * 8 };
    p = tb_packet_build(st->tag, &f, 1, NULL);
    swap_le(st->buf, st->n);
    return p;
}

void tb_filter_union_free_state(void *state)
{
    struct union_state *st = state;
    if (!st)
        return;
    free(st->set);
    free(st->buf);
    free(st->tmp);
    free(st->h);
    free(st->pend);
    free(st);
}
