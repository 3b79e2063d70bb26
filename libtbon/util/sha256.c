/* sha256.c - SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104), compare, randomness
 *
 * Plain C11. Words are read and written big-endian byte by byte, as FIPS
 * 180-4 section 3.1 specifies, so the result is the same on any host byte
 * order and alignment. Speed is not a goal: the handshake hashes a few
 * hundred bytes per connection.
 */
#include "util/sha256.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <tbon/tbon.h>

/* FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the
 * cube roots of the first 64 primes. */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* Through a volatile pointer, so the compiler cannot prove the call is a
 * dead store and drop it (C11 has no memset_s guarantee we can rely on). */
static void *(*const volatile tb_memset_v)(void *, int, size_t) = memset;

void tb_secure_zero(void *p, size_t n)
{
    if (n)
        tb_memset_v(p, 0, n);
}

static inline uint32_t ror(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));   /* n is 2..25 here, never 0 */
}

static inline uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* One block of the compression function, FIPS 180-4 section 6.2.2. */
static void compress(uint32_t h[8], const uint8_t block[TB_SHA256_BLOCK])
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = get_be32(block + 4 * t);
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = ror(w[t - 15], 7) ^ ror(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = ror(w[t - 2], 17) ^ ror(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    uint32_t e = h[4], f = h[5], g = h[6], k = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t S1 = ror(e, 6) ^ ror(e, 11) ^ ror(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = k + S1 + ch + K[t] + w[t];
        uint32_t S0 = ror(a, 2) ^ ror(a, 13) ^ ror(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
    /* The schedule is derived from the message, which may be a key block. */
    tb_secure_zero(w, sizeof w);
}

/* Initial hash value, FIPS 180-4 section 5.3.3. */
void tb_sha256_init(tb_sha256_t *c)
{
    static const uint32_t h0[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    memcpy(c->h, h0, sizeof h0);
    c->len = 0;
    c->nbuf = 0;
}

void tb_sha256_update(tb_sha256_t *c, const void *data, size_t n)
{
    const uint8_t *p = data;
    c->len += n;
    if (c->nbuf) {
        size_t take = TB_SHA256_BLOCK - c->nbuf;
        if (take > n)
            take = n;
        memcpy(c->buf + c->nbuf, p, take);
        c->nbuf += take;
        p += take;
        n -= take;
        if (c->nbuf < TB_SHA256_BLOCK)
            return;
        compress(c->h, c->buf);
        c->nbuf = 0;
    }
    for (; n >= TB_SHA256_BLOCK; p += TB_SHA256_BLOCK, n -= TB_SHA256_BLOCK)
        compress(c->h, p);
    if (n) {
        memcpy(c->buf, p, n);
        c->nbuf = n;
    }
}

/* Padding, FIPS 180-4 section 5.1.1: a 1 bit, zeros, and the message length
 * in bits as a 64-bit big-endian number, ending on a block boundary. */
void tb_sha256_final(tb_sha256_t *c, uint8_t out[TB_SHA256_SIZE])
{
    uint64_t bits = c->len << 3;   /* the length modulo 2^64 bits, as specified */
    c->buf[c->nbuf++] = 0x80;
    if (c->nbuf > TB_SHA256_BLOCK - 8) {
        memset(c->buf + c->nbuf, 0, TB_SHA256_BLOCK - c->nbuf);
        compress(c->h, c->buf);
        c->nbuf = 0;
    }
    memset(c->buf + c->nbuf, 0, TB_SHA256_BLOCK - 8 - c->nbuf);
    for (int i = 0; i < 8; i++)
        c->buf[TB_SHA256_BLOCK - 1 - i] = (uint8_t)(bits >> (8 * i));
    compress(c->h, c->buf);
    for (int i = 0; i < 8; i++)
        put_be32(out + 4 * i, c->h[i]);
    tb_secure_zero(c, sizeof *c);
}

void tb_sha256(const void *data, size_t n, uint8_t out[TB_SHA256_SIZE])
{
    tb_sha256_t c;
    tb_sha256_init(&c);
    tb_sha256_update(&c, data, n);
    tb_sha256_final(&c, out);
}

/* RFC 2104 section 2: K0 is the key, hashed if longer than a block, padded
 * with zeros; inner = H(K0 ^ ipad || text), MAC = H(K0 ^ opad || inner). */
void tb_hmac_sha256_init(tb_hmac_sha256_t *c, const void *key, size_t keylen)
{
    uint8_t k0[TB_SHA256_BLOCK], pad[TB_SHA256_BLOCK];
    memset(k0, 0, sizeof k0);
    if (keylen > TB_SHA256_BLOCK)
        tb_sha256(key, keylen, k0);
    else if (keylen)
        memcpy(k0, key, keylen);
    for (int i = 0; i < TB_SHA256_BLOCK; i++)
        pad[i] = k0[i] ^ 0x36;
    tb_sha256_init(&c->inner);
    tb_sha256_update(&c->inner, pad, sizeof pad);
    for (int i = 0; i < TB_SHA256_BLOCK; i++)
        pad[i] = k0[i] ^ 0x5c;
    tb_sha256_init(&c->outer);
    tb_sha256_update(&c->outer, pad, sizeof pad);
    tb_secure_zero(k0, sizeof k0);
    tb_secure_zero(pad, sizeof pad);
}

void tb_hmac_sha256_update(tb_hmac_sha256_t *c, const void *data, size_t n)
{
    tb_sha256_update(&c->inner, data, n);
}

void tb_hmac_sha256_final(tb_hmac_sha256_t *c, uint8_t out[TB_SHA256_SIZE])
{
    uint8_t inner[TB_SHA256_SIZE];
    tb_sha256_final(&c->inner, inner);
    tb_sha256_update(&c->outer, inner, sizeof inner);
    tb_sha256_final(&c->outer, out);
    tb_secure_zero(inner, sizeof inner);
}

void tb_hmac_sha256(const void *key, size_t keylen, const void *data, size_t n,
                    uint8_t out[TB_SHA256_SIZE])
{
    tb_hmac_sha256_t c;
    tb_hmac_sha256_init(&c, key, keylen);
    tb_hmac_sha256_update(&c, data, n);
    tb_hmac_sha256_final(&c, out);
}

/* No early exit and no data-dependent branch: the differences are OR-ed
 * together and only the total is turned into the answer. */
int tb_ct_equal(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a, *y = b;
    uint32_t d = 0;
    for (size_t i = 0; i < n; i++)
        d |= (uint32_t)(x[i] ^ y[i]);
    return (int)(1 & ((d - 1) >> 8));   /* d in 0..255: 1 only when d == 0 */
}

/* getrandom(2) returns at most 32 MiB per call and may be cut short by a
 * signal for large requests, hence the loop. */
int tb_random_bytes(void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return TBON_EIO;
        }
        if (got == 0) {   /* not documented to happen; do not spin on it */
            errno = EIO;
            return TBON_EIO;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}
