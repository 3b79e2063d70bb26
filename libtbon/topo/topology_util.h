/* topology_util.h - small helpers shared by the topology files: hashing, a
 * u64 -> u32 open-addressing map and a growable string buffer. Internal to
 * topology*.c; everything is static inline so each file gets its own copy. */
#ifndef TB_TOPOLOGY_UTIL_H
#define TB_TOPOLOGY_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/hash.h"

/* splitmix64's finaliser: a cheap, well-mixing 64-bit permutation. */
/* Room for one more element in arr (n used of *cap, elem bytes each),
 * doubling from 64: returns arr itself, a grown copy (and updates *cap), or
 * NULL when out of memory (arr untouched and still owned by the caller). */
static inline void *tb_grow(void *arr, uint32_t n, uint32_t *cap, size_t elem)
{
    if (n < *cap)
        return arr;
    uint32_t ncap = *cap ? *cap * 2 : 64;
    void *na = realloc(arr, (size_t)ncap * elem);
    if (na)
        *cap = ncap;
    return na;
}

/* ---- u64 -> u32 map (no deletion; values must not be UINT32_MAX) -------- */

typedef struct tb_u64map {
    uint64_t *keys;
    uint32_t *vals;      /* UINT32_MAX marks an empty slot */
    size_t    mask;      /* slots - 1 */
    size_t    count;
} tb_u64map_t;

/* Size the map for `expect` entries at load <= 1/2. 0 or TBON_ENOMEM. */
static inline int tb_u64map_init(tb_u64map_t *m, size_t expect)
{
    size_t slots = 16;
    while (slots < expect * 2)
        slots *= 2;
    m->keys = malloc(slots * sizeof *m->keys);
    m->vals = malloc(slots * sizeof *m->vals);
    if (!m->keys || !m->vals) {
        free(m->keys);
        free(m->vals);
        m->keys = NULL;
        m->vals = NULL;
        return TBON_ENOMEM;
    }
    memset(m->vals, 0xff, slots * sizeof *m->vals);
    m->mask = slots - 1;
    m->count = 0;
    return 0;
}

static inline void tb_u64map_free(tb_u64map_t *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
}

/* The slot holding key, or the empty slot where it would go. Keys that differ
 * only in their low three bits share an aligned run of eight slots (a cache
 * line of values): our keys are (host << 32 | id), met mostly with ids in
 * order, so this spares most cache misses. */
static inline size_t tb_u64map_slot(const tb_u64map_t *m, uint64_t key)
{
    size_t i = (size_t)(tb_mix64(key >> 3) << 3 | (key & 7)) & m->mask;
    while (m->vals[i] != UINT32_MAX && m->keys[i] != key)
        i = (i + 1) & m->mask;
    return i;
}

static inline uint32_t tb_u64map_get(const tb_u64map_t *m, uint64_t key)
{
    return m->vals[tb_u64map_slot(m, key)];
}

/* Insert key -> val if key is absent; returns the value now stored (the old
 * one if present), or UINT32_MAX when out of memory. */
static inline uint32_t tb_u64map_put(tb_u64map_t *m, uint64_t key, uint32_t val)
{
    size_t i = tb_u64map_slot(m, key);
    if (m->vals[i] != UINT32_MAX)
        return m->vals[i];
    if ((m->count + 1) * 2 > m->mask + 1) {
        tb_u64map_t big;
        if (tb_u64map_init(&big, (m->mask + 1)) != 0)
            return UINT32_MAX;
        for (size_t j = 0; j <= m->mask; j++) {
            if (m->vals[j] != UINT32_MAX) {
                size_t k = tb_u64map_slot(&big, m->keys[j]);
                big.keys[k] = m->keys[j];
                big.vals[k] = m->vals[j];
            }
        }
        big.count = m->count;
        tb_u64map_free(m);
        *m = big;
        i = tb_u64map_slot(m, key);
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->count++;
    return val;
}

/* ---- string buffer ------------------------------------------------------ */

typedef struct tb_sbuf {
    char  *p;
    size_t len, cap;
    int    failed;       /* an allocation failed; the content is incomplete */
} tb_sbuf_t;

static inline int tb_sbuf_reserve(tb_sbuf_t *b, size_t more)
{
    if (b->failed)
        return TBON_ENOMEM;
    if (b->len + more + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return TBON_ENOMEM;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline void tb_sbuf_add(tb_sbuf_t *b, const char *s, size_t n)
{
    if (tb_sbuf_reserve(b, n) != 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static inline void tb_sbuf_str(tb_sbuf_t *b, const char *s)
{
    tb_sbuf_add(b, s, strlen(s));
}

/* Append a decimal number (faster than printf on million-node outputs). */
static inline void tb_sbuf_u32(tb_sbuf_t *b, uint32_t v)
{
    char tmp[10];
    size_t n = 0;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    tb_sbuf_add(b, tmp + sizeof tmp - n, n);
}

#endif
