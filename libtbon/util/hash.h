/* hash.h - the library's one hash: FNV-1a over bytes, and a 64-bit finaliser
 * (splitmix64's) for keys whose low bits cluster. Used by the topology's name
 * and rank maps and by the membership view's digest (ft/view.c), which
 * every node computes the same way for the consistency check. */
#ifndef TB_UTIL_HASH_H
#define TB_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TB_FNV1A_INIT 0xcbf29ce484222325ULL

/* Continue an FNV-1a hash h over n bytes at p (start from TB_FNV1A_INIT). */
static inline uint64_t tb_fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static inline uint64_t tb_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* FNV-1a over bytes, then mixed (FNV alone clusters in the low bits). */
static inline uint64_t tb_hash_bytes(const char *s, size_t len)
{
    return tb_mix64(tb_fnv1a(TB_FNV1A_INIT, s, len));
}

#endif
