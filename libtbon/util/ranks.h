/* ranks.h - a set of ranks kept as sorted, disjoint, non-adjacent ranges: which
 * back-ends a partial result of a reduction covers ("0-15, 17 and 20-63")
 *
 * On the data path of every wave, so the common cases cost no allocation: a
 * set of one range lives in the struct itself (one[]), and adding a rank or
 * a one-range set that is adjacent to or inside a one-range set keeps it one
 * range. Only a set that needs two or more ranges at once allocates; the
 * memory is kept by tb_ranks_clear() and reused.
 *
 * Every set is in canonical form after every call: ranges ascending, lo <= hi,
 * and between two ranges at least one rank that is in neither, so that equal
 * sets have equal ranges (and one wire encoding).
 *
 * A set of one range held in one[] has r pointing into the struct itself, so
 * a set is moved with tb_ranks_copy(), not by struct assignment or memcpy (the
 * functions here cope with a moved set, but its r would point into the old
 * one). tb_ranks_lo() and tb_ranks_hi() read a range whatever the case.
 * A set must be initialized (tb_ranks_init or TB_RANKS_INIT) before any call;
 * the result arguments (dst of copy and minus, s of decode) too: their memory
 * is reused. On TBON_ENOMEM the set written to is unchanged (decode's is
 * left empty).
 */
#ifndef TB_RANKS_H
#define TB_RANKS_H

#include <stddef.h>
#include <stdint.h>

typedef struct tb_ranks {
    uint32_t *r;      /* 2*n values: lo0, hi0, lo1, hi1, ... ascending */
    size_t n;         /* ranges */
    size_t cap;       /* ranges allocated; 0: r is one[] (or NULL when empty) */
    uint32_t one[2];  /* storage for a single range without malloc */
} tb_ranks_t;

/* The empty set, as a static initializer. */
#define TB_RANKS_INIT { NULL, 0, 0, { 0, 0 } }

/* The ends of range i (i < n). Unlike s->r, right even for a set of one range
 * that was copied by struct assignment. */
static inline uint32_t tb_ranks_lo(const tb_ranks_t *s, size_t i)
{
    return (s->cap ? s->r : s->one)[2 * i];
}

static inline uint32_t tb_ranks_hi(const tb_ranks_t *s, size_t i)
{
    return (s->cap ? s->r : s->one)[2 * i + 1];
}

void tb_ranks_init(tb_ranks_t *s);
/* Back to empty, memory released. */
void tb_ranks_free(tb_ranks_t *s);
/* Empty, memory kept. */
void tb_ranks_clear(tb_ranks_t *s);

/* Add the ranks lo..hi (both in): 0, TBON_EINVAL if lo > hi (s unchanged),
 * or TBON_ENOMEM. tb_ranks_merge_range does it wherever they fall;
 * tb_ranks_add_range does the cases of a wave's coverage inline (the first
 * range of an empty set, or one that joins the last range from its start on:
 * a commnode of 32 children made about 100 calls per wave). */
int tb_ranks_merge_range(tb_ranks_t *s, uint32_t lo, uint32_t hi);
static inline int tb_ranks_add_range(tb_ranks_t *s, uint32_t lo, uint32_t hi)
{
    size_t n = s->n;
    if (lo > hi)
        return tb_ranks_merge_range(s, lo, hi);
    if (!s->cap)
        s->r = s->one;      /* right again for a set moved by assignment */
    uint32_t *v = s->r;
    if (n == 0) {
        v[0] = lo;
        v[1] = hi;
        s->n = 1;
        return 0;
    }
    if (lo >= v[2 * n - 2] && (uint64_t)v[2 * n - 1] + 1 >= lo) {
        if (hi > v[2 * n - 1])
            v[2 * n - 1] = hi;
        return 0;
    }
    return tb_ranks_merge_range(s, lo, hi);
}
/* Add one rank: 0 or TBON_ENOMEM. */
static inline int tb_ranks_add(tb_ranks_t *s, uint32_t r)
{
    return tb_ranks_add_range(s, r, r);
}
/* Add lo..hi unless s holds one of them: 0 (added), 1 (they meet; s
 * unchanged), TBON_EINVAL (lo > hi) or TBON_ENOMEM. */
int tb_ranks_add_new(tb_ranks_t *s, uint32_t lo, uint32_t hi);
/* s |= o (s must not be o): 0 or TBON_ENOMEM. */
int tb_ranks_union(tb_ranks_t *s, const tb_ranks_t *o);
/* dst = src (dst == src is allowed and does nothing): 0 or TBON_ENOMEM. */
int tb_ranks_copy(tb_ranks_t *dst, const tb_ranks_t *src);
/* dst = a \ b, dst distinct from a and b: 0 or TBON_ENOMEM. */
int tb_ranks_minus(tb_ranks_t *dst, const tb_ranks_t *a, const tb_ranks_t *b);

/* 1 if a and b share a rank, else 0. */
int tb_ranks_overlaps(const tb_ranks_t *a, const tb_ranks_t *b);
/* 1 if r is in s, else 0 (a binary search). */
int tb_ranks_contains(const tb_ranks_t *s, uint32_t r);
/* 1 if a and b hold the same ranks, else 0. */
int tb_ranks_equal(const tb_ranks_t *a, const tb_ranks_t *b);
/* How many ranks s holds (up to 2^32). */
uint64_t tb_ranks_count(const tb_ranks_t *s);

/* The ranks in ascending order, at most cap into out; returns how many the
 * set has (may be more than cap, then only cap were written; SIZE_MAX if the
 * count does not fit a size_t). */
size_t tb_ranks_list(const tb_ranks_t *s, uint32_t *out, size_t cap);

/* Wire form (docs/protocol.md; little-endian u32s, util/endian.h): the n
 * ranges as (lo, hi) pairs, then u32 n -- the count last, because the form is
 * a trailer read from the end of a frame's payload. */
size_t tb_ranks_wire_size(const tb_ranks_t *s);                /* 8*n + 4 */
void tb_ranks_encode(const tb_ranks_t *s, uint8_t *out);      /* wire_size bytes */

/* Read a trailer from the END of buf[0..len): the last 4 bytes are n, the 8*n
 * before them the ranges. Returns the trailer's size in bytes (>= 4), or
 * TBON_EFORMAT if len < 4, 8*n+4 > len, n > 1<<20, any lo > hi, or the ranges
 * are not ascending, disjoint and non-adjacent (the canonical form only: every
 * set has exactly one encoding), or TBON_ENOMEM. On error s is left empty and
 * msg (if not NULL, msglen bytes) says what was wrong in one short phrase,
 * e.g. "ranges 5-9 and 8-12 overlap"; on success msg is not touched. */
int tb_ranks_decode_tail(tb_ranks_t *s, const uint8_t *buf, size_t len, char *msg,
                         size_t msglen);

/* s as text into buf: "0-15, 17 and 20-63" (two ranges: "0-4 and 6-9"; a range
 * of one rank is that rank; the empty set: "none"). Returns the length of the
 * whole text (like snprintf, without the NUL; INT_MAX at most), whether or
 * not it fitted. buf is always NUL-terminated when len > 0 (buf may be NULL
 * when len is 0). When the whole text does not fit, buf gets as many leading
 * ranges as fit followed by " and N more ranks" (N the ranks left out, "rank"
 * when 1): "0-15, 17 and 44 more ranks"; if not even one range fits that way,
 * "N ranks" for the whole set; if that does not fit either, "" -- never a
 * number cut short. */
int tb_ranks_format(const tb_ranks_t *s, char *buf, size_t len);

#endif
