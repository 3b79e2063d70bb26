/* crc32c.c - CRC-32C: SSE4.2 instruction (3 interleaved streams) or slicing-by-8
 *
 * The crc32 instruction has a latency of about 3 cycles but a throughput of
 * one per cycle, so one dependent chain uses a third of the unit. Large
 * buffers are therefore cut into three lanes checksummed independently and
 * joined by "shifting" a lane's CRC over the length of the lanes after it: a
 * linear map on the 32-bit register, precomputed as 4 byte-indexed tables.
 * The tables (slicing-by-8 and the two shift maps) are built once, together
 * with the run-time CPU check, under pthread_once (entered only until a flag
 * says they are there: a frame's checksums are a few per wave, and the call
 * cost more than a small frame's sum). Every process of a tree does this at
 * its start, so it is kept cheap: a shift map is linear, so each of its
 * tables is built from 8 products by XOR (not 256 products of 32 steps
 * each), and the CPU check reads what the C library found at its own start
 * (CPUID is a trap to the hypervisor on a virtual machine, and the
 * compiler's own check runs a dozen of them in every process that links
 * it). Setting TBON_CRC32C=sw in
 * the environment selects the tables even where the instruction exists (read
 * with the process's configuration, util/config.h).
 */
#include "util/crc32c.h"
#include "util/hot.h"
#include "util/config.h"
#include "util/endian.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define POLY 0x82F63B78u     /* Castagnoli, bit-reflected */

/* -DTB_CRC32C_NO_HW builds the portable code only, as on other CPUs. */
#if (defined(__x86_64__) || defined(__i386__)) && !defined(TB_CRC32C_NO_HW)
#define HAVE_HW 1
#include <nmmintrin.h>
#if defined(__GLIBC__)
#if __GLIBC_PREREQ(2, 33)
#include <sys/platform/x86.h>
#define HW_PRESENT() CPU_FEATURE_ACTIVE(SSE4_2)
#endif
#endif
#ifndef HW_PRESENT
#define HW_PRESENT() (__builtin_cpu_init(), __builtin_cpu_supports("sse4.2"))
#endif
#endif

/* Lane lengths of the interleaved hardware loop: a long lane amortises the
 * join (two table shifts) over 24 KiB; short lanes cover what is left. */
#define LANE_LONG  8192
#define LANE_SHORT 256

static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static uint32_t tab[8][256];           /* slicing-by-8 */
static uint32_t shift_long[4][256];    /* register -> register after LANE_LONG zero bytes */
static uint32_t shift_short[4][256];   /* same for LANE_SHORT */
static int hw_ok;
static atomic_int crc_ready;            /* set once crc_init is done */

/* a * b modulo POLY, both polynomials in the reflected representation
 * (bit 31 is the coefficient of x^0). */
static uint32_t gf2_mulmod(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m)
            p ^= b;
        b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
    }
    return p;
}

/* x^(8n) modulo POLY: the operator that appends n zero bytes to a register. */
static uint32_t xpow8n(uint64_t n)
{
    uint32_t r = 1u << 31;     /* x^0 */
    uint32_t sq = 1u << 23;    /* x^8 */
    while (n) {
        if (n & 1)
            r = gf2_mulmod(r, sq);
        sq = gf2_mulmod(sq, sq);
        n >>= 1;
    }
    return r;
}

/* t[k][b] = op * (b << 8k): linear in b, so each entry is the one without
 * b's lowest set bit XOR the entry of that bit alone. */
static void build_shift(uint32_t t[4][256], uint64_t nbytes)
{
    uint32_t op = xpow8n(nbytes);
    for (int k = 0; k < 4; k++) {
        t[k][0] = 0;
        for (int bit = 0; bit < 8; bit++)
            t[k][1u << bit] = gf2_mulmod(op, (1u << bit) << (8 * k));
        for (uint32_t b = 3; b < 256; b++)
            if (b & (b - 1))
                t[k][b] = t[k][b & (b - 1)] ^ t[k][b & -b];
    }
}

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++)
            tab[k][i] = (tab[k - 1][i] >> 8) ^ tab[0][tab[k - 1][i] & 0xff];
    build_shift(shift_long, LANE_LONG);
    build_shift(shift_short, LANE_SHORT);
#ifdef HAVE_HW
    /* TBON_CRC32C=sw forces the tables: to test and measure the fallback on
     * machines that have the instruction (the process's configuration). */
    const char *force = tb_config_process()->crc32c;
    hw_ok = HW_PRESENT() != 0 && !(force && strcmp(force, "sw") == 0);
#endif
    atomic_store_explicit(&crc_ready, 1, memory_order_release);
}

static inline void crc_setup(void)
{
    if (!atomic_load_explicit(&crc_ready, memory_order_acquire))
        pthread_once(&crc_once, crc_init);
}

static inline uint32_t crc_shift(const uint32_t t[4][256], uint32_t c)
{
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

/* Slicing-by-8 over src, copying to dst unless dst is NULL. Always inlined
 * into two wrappers so that the dst test is folded away in each. */
static inline __attribute__((always_inline))
uint32_t sw_kernel(uint32_t crc, uint8_t *dst, const uint8_t *src, size_t len)
{
    uint32_t c = ~crc;
    while (len >= 8) {
        uint64_t w = tb_get64(src);
        if (dst) {
            memcpy(dst, src, 8);
            dst += 8;
        }
        uint32_t lo = c ^ (uint32_t)w, hi = (uint32_t)(w >> 32);
        c = tab[7][lo & 0xff] ^ tab[6][(lo >> 8) & 0xff] ^
            tab[5][(lo >> 16) & 0xff] ^ tab[4][lo >> 24] ^
            tab[3][hi & 0xff] ^ tab[2][(hi >> 8) & 0xff] ^
            tab[1][(hi >> 16) & 0xff] ^ tab[0][hi >> 24];
        src += 8;
        len -= 8;
    }
    while (len--) {
        uint8_t b = *src++;
        if (dst)
            *dst++ = b;
        c = (c >> 8) ^ tab[0][(c ^ b) & 0xff];
    }
    return ~c;
}

uint32_t tb_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    crc_setup();
    return sw_kernel(crc, NULL, buf, len);
}

static uint32_t sw_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
    return sw_kernel(crc, dst, src, len);
}

#ifdef HAVE_HW
#if defined(__x86_64__)
typedef uint64_t hw_word_t;
#define HW_CRC(c, w) ((uint32_t)_mm_crc32_u64((c), (w)))
#else
typedef uint32_t hw_word_t;
#define HW_CRC(c, w) _mm_crc32_u32((c), (w))
#endif
#define W sizeof(hw_word_t)

static inline __attribute__((always_inline, target("sse4.2")))
hw_word_t hw_load(const uint8_t *p)
{
    hw_word_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

/* One interleaved pass of three lanes of `lane` bytes each (lane % W == 0). */
#define HW_LANES(lane, shift_tab)                                           \
    while (len >= 3 * (size_t)(lane)) {                                     \
        uint32_t c1 = 0, c2 = 0;                                            \
        const uint8_t *end = src + (lane);                                  \
        do {                                                                \
            hw_word_t a = hw_load(src), b = hw_load(src + (lane)),          \
                      d = hw_load(src + 2 * (lane));                        \
            c0 = HW_CRC(c0, a);                                             \
            c1 = HW_CRC(c1, b);                                             \
            c2 = HW_CRC(c2, d);                                             \
            if (dst) {                                                      \
                memcpy(dst, &a, W);                                         \
                memcpy(dst + (lane), &b, W);                                \
                memcpy(dst + 2 * (lane), &d, W);                            \
                dst += W;                                                   \
            }                                                               \
            src += W;                                                       \
        } while (src < end);                                                \
        c0 = crc_shift(shift_tab, c0) ^ c1;                                 \
        c0 = crc_shift(shift_tab, c0) ^ c2;                                 \
        src += 2 * (lane);                                                  \
        if (dst)                                                            \
            dst += 2 * (lane);                                              \
        len -= 3 * (size_t)(lane);                                          \
    }

static inline __attribute__((always_inline, target("sse4.2")))
uint32_t hw_kernel(uint32_t crc, uint8_t *dst, const uint8_t *src, size_t len)
{
    uint32_t c0 = ~crc;
    /* Align the source so that the word loads never straddle a line. */
    while (len && ((uintptr_t)src & (W - 1))) {
        uint8_t b = *src++;
        if (dst)
            *dst++ = b;
        c0 = _mm_crc32_u8(c0, b);
        len--;
    }
    HW_LANES(LANE_LONG, shift_long)
    HW_LANES(LANE_SHORT, shift_short)
    while (len >= W) {
        hw_word_t a = hw_load(src);
        if (dst) {
            memcpy(dst, &a, W);
            dst += W;
        }
        c0 = HW_CRC(c0, a);
        src += W;
        len -= W;
    }
    while (len--) {
        uint8_t b = *src++;
        if (dst)
            *dst++ = b;
        c0 = _mm_crc32_u8(c0, b);
    }
    return ~c0;
}

__attribute__((target("sse4.2")))
TB_HOT static uint32_t hw_crc(uint32_t crc, const void *buf, size_t len)
{
    return hw_kernel(crc, NULL, buf, len);
}

__attribute__((target("sse4.2")))
TB_HOT static uint32_t hw_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
    return hw_kernel(crc, dst, src, len);
}
#endif /* HAVE_HW */

uint32_t tb_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    /* The dispatch already takes the instruction when there is one; without
     * it, falling back to the tables keeps a careless caller correct. */
    return tb_crc32c(crc, buf, len);
}

int tb_crc32c_hw_available(void)
{
    crc_setup();
    return hw_ok;
}

TB_HOT uint32_t tb_crc32c(uint32_t crc, const void *buf, size_t len)
{
    crc_setup();
#ifdef HAVE_HW
    if (hw_ok)
        return hw_crc(crc, buf, len);
#endif
    return sw_kernel(crc, NULL, buf, len);
}

TB_HOT uint32_t tb_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
    crc_setup();
#ifdef HAVE_HW
    if (hw_ok)
        return hw_copy(crc, dst, src, len);
#endif
    return sw_copy(crc, dst, src, len);
}

uint32_t tb_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    /* Linear algebra on the final values works because the pre- and
     * post-inversions cancel: crc(a||b) = crc_a * x^(8|b|) + crc_b. */
    return gf2_mulmod(xpow8n(len_b), crc_a) ^ crc_b;
}
