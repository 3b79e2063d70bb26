/* sha256.h - SHA-256, HMAC-SHA256, constant-time compare, OS randomness
 *
 * Our own small implementation, so that no tree process has to load
 * libcrypto at start-up just for the handshake MACs and nonces. SHA-256
 * follows FIPS 180-4, HMAC follows RFC 2104 (tested with RFC 4231 vectors).
 * Everything here is a pure function of its inputs except tb_random_bytes;
 * any thread may call any function on its own context.
 */
#ifndef TB_SHA256_H
#define TB_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define TB_SHA256_SIZE  32   /* digest bytes */
#define TB_SHA256_BLOCK 64   /* block bytes (also the HMAC pad length) */

typedef struct tb_sha256 {
    uint32_t h[8];                  /* chaining state */
    uint64_t len;                   /* message bytes so far */
    uint8_t  buf[TB_SHA256_BLOCK];  /* the incomplete block */
    size_t   nbuf;                  /* bytes in buf, < TB_SHA256_BLOCK */
} tb_sha256_t;

typedef struct tb_hmac_sha256 {
    tb_sha256_t inner;   /* H((K ^ ipad) || ...) in progress */
    tb_sha256_t outer;   /* H((K ^ opad) ||, waiting for the inner digest */
} tb_hmac_sha256_t;

/* Incremental SHA-256: init, update any number of times with any split,
 * final writes the 32-byte digest and wipes the context (init it again to
 * reuse it). data may be NULL when n is 0. */
void tb_sha256_init(tb_sha256_t *c);
void tb_sha256_update(tb_sha256_t *c, const void *data, size_t n);
void tb_sha256_final(tb_sha256_t *c, uint8_t out[TB_SHA256_SIZE]);

/* One-shot SHA-256 of data[0..n). */
void tb_sha256(const void *data, size_t n, uint8_t out[TB_SHA256_SIZE]);

/* Incremental HMAC-SHA256 keyed with key[0..keylen) (any length: a key longer
 * than a block is hashed first, RFC 2104). final writes the 32-byte MAC and
 * wipes the context, which held key-derived state. */
void tb_hmac_sha256_init(tb_hmac_sha256_t *c, const void *key, size_t keylen);
void tb_hmac_sha256_update(tb_hmac_sha256_t *c, const void *data, size_t n);
void tb_hmac_sha256_final(tb_hmac_sha256_t *c, uint8_t out[TB_SHA256_SIZE]);

/* One-shot HMAC-SHA256(key, data). */
void tb_hmac_sha256(const void *key, size_t keylen, const void *data, size_t n,
                    uint8_t out[TB_SHA256_SIZE]);

/* 1 if a[0..n) equals b[0..n), else 0; the time taken depends on n only, not
 * on where the buffers differ (for comparing MACs). */
int tb_ct_equal(const void *a, const void *b, size_t n);

/* Zero p[0..n) in a way the compiler may not drop as a dead store (for
 * secrets about to go out of scope). */
void tb_secure_zero(void *p, size_t n);

/* Fill buf[0..n) from the kernel's random generator (getrandom(2), blocking
 * only until it is first seeded at boot). Returns 0, or TBON_EIO with errno
 * telling why; n == 0 succeeds without a system call. */
int tb_random_bytes(void *buf, size_t n);

#endif
