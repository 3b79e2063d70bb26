/* packet_priv.h - the packet object's private parts (its layout, format
 * iteration, little-endian element coding), shared by the packet*.c files
 * only; the rest of the library uses packet_int.h */
#ifndef TB_PACKET_PRIV_H
#define TB_PACKET_PRIV_H

#include "codec/packet_int.h"
#include "util/hot.h"
#include "util/ranks.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TB_HOST_LE 1
#else
#define TB_HOST_LE 0
#endif

/* One allocation: this header, then offs[nfields + 1], the payload, the
 * types and the NUL-terminated canonical format. offs[i] is the payload
 * offset where field i starts (its count for arrays and strings) and
 * offs[nfields] the payload length, so field access is O(1). Everything but
 * refs is immutable once the packet is shared. */
struct tbon_packet {
    atomic_uint refs;
    atomic_uint crc_known;  /* crc below is valid (set once, any thread) */
    atomic_uint crc;        /* CRC32C of the payload, for frames on many links
                               (atomic: two threads may store it at once) */
    int         tag;
    uint32_t    stream;
    tbon_rank_t source;
    uint32_t    nfields;
    uint32_t    len;        /* payload bytes */
    uint8_t    *payload;    /* u16 format length, format, values */
    uint8_t    *types;      /* nfields enum tb_ftype values */
    char       *format;     /* canonical, NUL-terminated */
    /* A result's coverage (docs/api.md, "Coverage"): the back-ends whose
     * contributions it holds, set by the node that received or made it
     * before anyone else sees the packet; the front-end adds the set its
     * wave expected (NULL elsewhere). Freed with the packet. */
    tb_ranks_t  cover;
    tb_ranks_t *expect;
    uint8_t    *own;        /* the payload, when it is a buffer of its own (a
                               large payload decoded in place); else NULL */
    uint32_t    offs[];
};

/* Allocate a packet for nfields fields, a canonical format of flen characters
 * and a payload of len bytes (which must include 2 + flen); set refs to 1,
 * source to TBON_RANK_NONE and the pointers. The caller fills in the rest.
 * NULL if out of memory. */
tbon_packet_t *tb_packet_alloc(int tag, size_t nfields, size_t flen, size_t len);

/* The same around a payload of len bytes already in memory of its own
 * (malloc'd), which the packet takes over and frees (NULL if out of
 * memory: the payload stays the caller's). */
tbon_packet_t *tb_packet_alloc_around(int tag, size_t nfields, size_t flen, uint8_t *payload,
                                      size_t len);

/* Fill in p's types, canonical format (of flen characters: canon if not
 * NULL, else built from the types) and the payload's format header; returns
 * the payload offset where values start. */
size_t tb_packet_put_format(tbon_packet_t *p, const uint8_t *types,
                            const char *canon, size_t flen);

/* Walks the conversions of a format string. Lenient mode (user formats)
 * skips any whitespace around conversions; strict mode (wire formats) accepts
 * only the canonical form: single spaces between conversions, nothing else. */
struct tb_fmt_iter {
    const char *s;
    size_t      len;
    size_t      pos;
    int         strict;
};

#define TB_FMT_END (-1)   /* no more conversions */
#define TB_FMT_BAD (-2)   /* malformed at it->pos */

/* Start iterating over s[0..len). */
static inline void tb_fmt_init(struct tb_fmt_iter *it, const char *s, size_t len,
                               int strict)
{
    it->s = s;
    it->len = len;
    it->pos = 0;
    it->strict = strict;
}

/* Tables indexed by enum tb_ftype (packet_fmt.c). */
extern const char *const tb_ftype_names[TB_F_COUNT];
extern const uint8_t tb_ftype_name_len[TB_F_COUNT];
extern const uint8_t tb_ftype_size[TB_F_COUNT];

/* One conversion at s[*pos]: '%', optional 'a', optional 'u', then c, hd, d,
 * ld, or (without 'u') f, lf, s. Inline (as is tb_fmt_next) because
 * compiling the format is a visible part of creating a small packet. */
TB_HOT static inline int tb_fmt_conv(const char *s, size_t len, size_t *pos)
{
    size_t i = *pos;
    int arr = 0, uns = 0, t;

    if (i >= len || s[i] != '%')
        return TB_FMT_BAD;
    i++;
    if (i < len && s[i] == 'a') {
        arr = 1;
        i++;
    }
    if (i < len && s[i] == 'u') {
        uns = 1;
        i++;
    }
    if (i >= len)
        goto bad;
    switch (s[i]) {
    case 'c': t = TB_F_C; i++; break;
    case 'd': t = TB_F_D; i++; break;
    case 'f': t = TB_F_F; i++; break;
    case 's': t = TB_F_S; i++; break;
    case 'h':
        if (i + 1 >= len || s[i + 1] != 'd') {
            i++;
            goto bad;
        }
        t = TB_F_HD;
        i += 2;
        break;
    case 'l':
        if (i + 1 < len && s[i + 1] == 'd')
            t = TB_F_LD;
        else if (i + 1 < len && s[i + 1] == 'f')
            t = TB_F_LF;
        else {
            i++;
            goto bad;
        }
        i += 2;
        break;
    default:
        goto bad;
    }
    if (uns) {
        if (t == TB_F_F || t == TB_F_LF || t == TB_F_S)
            goto bad_conv;
        t += 1;
    }
    if (arr)
        t += TB_F_AC;
    *pos = i;
    return t;
bad_conv:
    i = *pos;   /* the whole conversion is wrong: point at its '%' */
bad:
    *pos = i;
    return TB_FMT_BAD;
}

static inline int tb_fmt_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
           c == '\v';
}

/* The next conversion (an enum tb_ftype), TB_FMT_END or TB_FMT_BAD. After
 * TB_FMT_BAD, it->pos is the offset of the offending character. */
static inline int tb_fmt_next(struct tb_fmt_iter *it)
{
    if (it->strict) {
        if (it->pos == it->len)
            return TB_FMT_END;
        if (it->pos > 0) {
            if (it->s[it->pos] != ' ')
                return TB_FMT_BAD;
            it->pos++;
        }
    } else {
        while (it->pos < it->len && tb_fmt_is_space(it->s[it->pos]))
            it->pos++;
        if (it->pos == it->len)
            return TB_FMT_END;
    }
    return tb_fmt_conv(it->s, it->len, &it->pos);
}

/* Characters of the canonical form of n types (names joined by spaces). */
size_t tb_fmt_canonical_len(const uint8_t *types, size_t n);

/* Write the canonical form of n types to out (no NUL); returns the end. */
char *tb_fmt_write_canonical(char *out, const uint8_t *types, size_t n);

/* Little-endian loads and stores, written byte by byte so they are right on
 * any host; compilers turn them into single moves on little-endian ones. */
static inline uint16_t tb_ld16(const uint8_t *b)
{
    return (uint16_t)(b[0] | (unsigned)b[1] << 8);
}

static inline uint32_t tb_ld32(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
           (uint32_t)b[3] << 24;
}

static inline uint64_t tb_ld64(const uint8_t *b)
{
    return (uint64_t)tb_ld32(b) | (uint64_t)tb_ld32(b + 4) << 32;
}

static inline void tb_st16(uint8_t *b, uint16_t v)
{
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
}

static inline void tb_st32(uint8_t *b, uint32_t v)
{
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
    b[2] = (uint8_t)(v >> 16);
    b[3] = (uint8_t)(v >> 24);
}

static inline void tb_st64(uint8_t *b, uint64_t v)
{
    tb_st32(b, (uint32_t)v);
    tb_st32(b + 4, (uint32_t)(v >> 32));
}

/* Copy n elements of esz bytes, reversing the bytes of each: the conversion
 * between host and little-endian order on a big-endian host (either way). */
static inline void tb_copy_swapped(void *dst, const void *src, size_t n, size_t esz)
{
    const uint8_t *s = src;
    uint8_t *d = dst;
    for (size_t i = 0; i < n; i++, s += esz, d += esz)
        for (size_t k = 0; k < esz; k++)
            d[k] = s[esz - 1 - k];
}

/* Copy n elements of esz bytes between host order (src) and little-endian
 * order (dst); the same copy works both ways. Floats travel as their IEEE-754
 * bit patterns, so they take the integer path of their width. */
static inline void tb_copy_le(void *dst, const void *src, size_t n, size_t esz)
{
    if (TB_HOST_LE || esz == 1) {
        if (n)
            memcpy(dst, src, n * esz);
    } else {
        tb_copy_swapped(dst, src, n, esz);
    }
}

#endif
