/* endian.h - little-endian byte access: every encoder and decoder of the
 * library (frames, handshake, control messages, failure notices) uses these
 *
 * Explicit byte-by-byte encoding: independent of host byte order, alignment
 * and struct padding. Compilers turn these into single loads and stores.
 */
#ifndef TB_UTIL_ENDIAN_H
#define TB_UTIL_ENDIAN_H

#include <stdint.h>

static inline void tb_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void tb_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void tb_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t tb_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t tb_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static inline uint64_t tb_get64(const uint8_t *p)
{
    return (uint64_t)tb_get32(p) | ((uint64_t)tb_get32(p + 4) << 32);
}

#endif
