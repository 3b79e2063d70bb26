/* test_crypto.c - the handshake's cryptography through libsodium: HMAC-SHA256
 * (RFC 4231, incremental as the handshake feeds it and one-shot as the
 * failure notices use it), the handshake and welcome MACs against answers
 * computed independently (Python's hmac), the MAC compare, randomness, and
 * the once-only libsodium set-up from many threads. */
#include "../harness.h"

#include <pthread.h>

#include <sodium.h>

#include "codec/handshake.h"

/* Parse the hex digits of s into out (at most max bytes); returns the count. */
static size_t unhex(const char *s, uint8_t *out, size_t max)
{
    size_t n = 0;
    for (; s[0] && s[1] && n < max; s += 2) {
        unsigned v;
        if (sscanf(s, "%2x", &v) != 1)
            break;
        out[n++] = (uint8_t)v;
    }
    return n;
}

/* Check that the 32 bytes at d equal the expected hex string. */
#define CHECK_HEX32(d, hex) do { uint8_t th_x[32];                          \
    REQUIRE(unhex((hex), th_x, sizeof th_x) == 32);                       \
    CHECK_MEM((d), th_x, 32); } while (0)

/* ---- HMAC-SHA256, RFC 4231 section 4 ---- */

typedef struct rfc4231 {
    uint8_t key[131];
    size_t keylen;
    const char *data;    /* text, or hex when data_hex */
    int data_hex;
    const char *mac;     /* hex; case 5 gives only the first 128 bits */
} rfc4231_t;

/* The incremental API with the data in three pieces, as the handshake feeds
 * it (label, then two byte strings): every pair of cut points. */
static void check_rfc4231(int num, const rfc4231_t *t)
{
    uint8_t data[200], want[32], got[32];
    size_t n;
    if (t->data_hex) {
        n = unhex(t->data, data, sizeof data);
    } else {
        n = strlen(t->data);
        memcpy(data, t->data, n);
    }
    size_t nmac = unhex(t->mac, want, sizeof want);
    for (size_t i = 0; i <= n; i++) {
        for (size_t j = i; j <= n; j++) {
            crypto_auth_hmacsha256_state c;
            memset(got, 0, sizeof got);
            crypto_auth_hmacsha256_init(&c, t->key, t->keylen);
            crypto_auth_hmacsha256_update(&c, data, i);
            crypto_auth_hmacsha256_update(&c, data + i, j - i);
            crypto_auth_hmacsha256_update(&c, data + j, n - j);
            crypto_auth_hmacsha256_final(&c, got);
            if (memcmp(got, want, nmac) != 0) {
                th_fail(__FILE__, __LINE__, "RFC 4231 test case %d: HMAC cut at %zu and "
                        "%zu differs", num, i, j);
                return;
            }
        }
    }
}

TEST(hmac_rfc4231)
{
    static rfc4231_t t[7];
    memset(t, 0, sizeof t);
    /* 1: 20-byte key. */
    memset(t[0].key, 0x0b, 20);
    t[0].keylen = 20;
    t[0].data = "Hi There";
    t[0].mac = "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7";
    /* 2: key shorter than the output. */
    memcpy(t[1].key, "Jefe", 4);
    t[1].keylen = 4;
    t[1].data = "what do ya want for nothing?";
    t[1].mac = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
    /* 3: 50 bytes of 0xdd. */
    memset(t[2].key, 0xaa, 20);
    t[2].keylen = 20;
    t[2].data = "dddddddddddddddddddddddddddddddddddddddddddddddddd"
                "dddddddddddddddddddddddddddddddddddddddddddddddddd";
    t[2].data_hex = 1;
    t[2].mac = "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe";
    /* 4: 25-byte key 0x01..0x19, 50 bytes of 0xcd. */
    for (int i = 0; i < 25; i++)
        t[3].key[i] = (uint8_t)(i + 1);
    t[3].keylen = 25;
    t[3].data = "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
                "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd";
    t[3].data_hex = 1;
    t[3].mac = "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b";
    /* 5: truncation to 128 bits: only the prefix is specified. */
    memset(t[4].key, 0x0c, 20);
    t[4].keylen = 20;
    t[4].data = "Test With Truncation";
    t[4].mac = "a3b6167473100ee06e0c796c2955552b";
    /* 6: 131-byte key, longer than a block: hashed first. */
    memset(t[5].key, 0xaa, 131);
    t[5].keylen = 131;
    t[5].data = "Test Using Larger Than Block-Size Key - Hash Key First";
    t[5].mac = "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54";
    /* 7: long key and data longer than a block. */
    memset(t[6].key, 0xaa, 131);
    t[6].keylen = 131;
    t[6].data = "This is a test using a larger than block-size key and a larger "
                "than block-size data. The key needs to be hashed before being "
                "used by the HMAC algorithm.";
    t[6].mac = "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2";

    for (int i = 0; i < 7; i++)
        check_rfc4231(i + 1, &t[i]);
}

/* The one-shot API (fixed 32-byte key, as the session secret is) equals the
 * incremental one for messages of every length 0..168, and the SHA-256 of all
 * those MACs is what Python's hmac gives. */
TEST(hmac_one_shot_32_byte_key)
{
    uint8_t m[200], one[32], inc[32];
    for (int i = 0; i < 200; i++)
        m[i] = (uint8_t)(i * 7 + 3);
    const uint8_t *key = m;      /* m[0..32) */
    crypto_hash_sha256_state all;
    crypto_hash_sha256_init(&all);
    for (size_t l = 0; l <= 168; l++) {
        crypto_auth_hmacsha256(one, m + 32, l, key);
        crypto_auth_hmacsha256_state c;
        crypto_auth_hmacsha256_init(&c, key, 32);
        crypto_auth_hmacsha256_update(&c, m + 32, l);
        crypto_auth_hmacsha256_final(&c, inc);
        if (memcmp(one, inc, sizeof one) != 0)
            th_fail(__FILE__, __LINE__, "length %zu: one-shot and incremental differ", l);
        crypto_hash_sha256_update(&all, one, sizeof one);
    }
    uint8_t digest[32];
    crypto_hash_sha256_final(&all, digest);
    CHECK_HEX32(digest, "196d4fc85faf4c08c8bf9529a2cee4871fbddcb80e0cdb402078bc4e0e5eed35");
}

/* ---- the handshake's MACs, known answers ---- */

/* Fixed inputs: secret 00..1f, server nonce 80..9f, client nonce 40..5f,
 * session 0123456789abcdef, a BE of rank 7, incarnation 3, data purpose. */
static void fixed_exchange(uint8_t secret[TB_SECRET_SIZE], tb_hello_t *hello,
                           uint8_t hsb[TB_HANDSHAKE_SIZE])
{
    for (int i = 0; i < TB_SECRET_SIZE; i++)
        secret[i] = (uint8_t)i;
    uint8_t hb[TB_HELLO_SIZE] = { 1, 0, 0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01 };
    for (int i = 0; i < TB_NONCE_SIZE; i++)
        hb[10 + i] = (uint8_t)(0x80 + i);
    REQUIRE(tb_hello_decode(hello, hb, sizeof hb, NULL) == 0);
    static const uint8_t fields[20] = { 1, 0, 0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01,
                                        TB_ROLE_BE, TB_PURPOSE_DATA, 7, 0, 0, 0, 3, 0, 0, 0 };
    memcpy(hsb, fields, sizeof fields);
    for (int i = 0; i < TB_NONCE_SIZE; i++)
        hsb[20 + i] = (uint8_t)(0x40 + i);
    /* HMAC-SHA256(secret, "tbon handshake v1" || server nonce || hsb[0, 52)) */
    REQUIRE(unhex("545aaa803a8c79c8ccb465f71d0085fa9cb81b013bb94cfb7bbe6ca746d16052",
                  hsb + 52, 32) == 32);
}

/* The server verifies the known HANDSHAKE; a MAC with any one bit flipped
 * is refused with an authentication error. */
TEST(handshake_mac_known_answer)
{
    uint8_t secret[TB_SECRET_SIZE], hsb[TB_HANDSHAKE_SIZE];
    tb_hello_t hello;
    fixed_exchange(secret, &hello, hsb);
    tb_handshake_t hs;
    tbon_error_t err = { 0 };
    REQUIRE(tb_handshake_decode(&hs, hsb, sizeof hsb, &err) == 0);
    CHECK_INT(tb_handshake_verify(&hs, &hello, secret, &err), 0);
    for (int i = 0; i < TB_MAC_SIZE; i++) {
        for (int bit = 0; bit < 8; bit++) {
            hs.mac[i] ^= (uint8_t)(1u << bit);
            int rc = tb_handshake_verify(&hs, &hello, secret, &err);
            hs.mac[i] ^= (uint8_t)(1u << bit);
            if (rc != TBON_EAUTH || !strstr(err.msg, "MAC does not verify"))
                th_fail(__FILE__, __LINE__, "MAC byte %d bit %d flipped: %d (%s)", i, bit,
                        rc, err.msg);
        }
    }
}

/* The WELCOME answering the known HANDSHAKE has a known MAC; the client
 * accepts it and refuses it with any one bit flipped. */
TEST(welcome_mac_known_answer)
{
    uint8_t secret[TB_SECRET_SIZE], hsb[TB_HANDSHAKE_SIZE];
    tb_hello_t hello;
    fixed_exchange(secret, &hello, hsb);
    tb_handshake_t hs;
    tbon_error_t err = { 0 };
    REQUIRE(tb_handshake_decode(&hs, hsb, sizeof hsb, &err) == 0);
    tb_welcome_t w;
    REQUIRE(tb_welcome_make(&w, &hs, secret, TB_WELCOME_OK, 1, 5, &err) == 0);
    /* HMAC-SHA256(secret, "tbon welcome v1" || HANDSHAKE || 00 01000000 05000000) */
    CHECK_HEX32(w.mac, "5c1d111ab5f740247838f4fc5817772ac1b7a69a79f62f6559c936dbc030289d");
    CHECK_INT(tb_welcome_verify(&w, &hs, secret, &err), 0);
    for (int i = 0; i < TB_MAC_SIZE; i++) {
        w.mac[i] ^= 0x80;
        int rc = tb_welcome_verify(&w, &hs, secret, &err);
        w.mac[i] ^= 0x80;
        if (rc != TBON_EAUTH)
            th_fail(__FILE__, __LINE__, "WELCOME MAC byte %d flipped: %d (%s)", i, rc, err.msg);
    }
    /* Another secret: refused. */
    secret[31] ^= 1;
    CHECK_INT(tb_welcome_verify(&w, &hs, secret, &err), TBON_EAUTH);
}

/* ---- randomness and set-up ---- */

TEST(random_secrets_and_nonces)
{
    uint8_t a[TB_SECRET_SIZE], b[TB_SECRET_SIZE], zero[TB_SECRET_SIZE] = { 0 };
    tbon_error_t err = { 0 };
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    CHECK_INT(tb_secret_generate(a, &err), 0);
    CHECK_INT(tb_secret_generate(b, &err), 0);
    CHECK(memcmp(a, b, sizeof a) != 0);
    CHECK(memcmp(a, zero, sizeof a) != 0);
    tb_hello_t h1, h2;
    CHECK_INT(tb_hello_make(&h1, 1, &err), 0);
    CHECK_INT(tb_hello_make(&h2, 1, &err), 0);
    CHECK(memcmp(h1.nonce, h2.nonce, TB_NONCE_SIZE) != 0);
    CHECK(memcmp(h1.nonce, zero, TB_NONCE_SIZE) != 0);
}

static void *init_and_draw(void *arg)
{
    uint8_t *out = arg;
    if (tb_crypto_init(NULL) != 0)
        return arg;
    randombytes_buf(out, 16);
    return NULL;
}

/* Threads racing to the first use: one set-up, every thread gets its bytes
 * (the ThreadSanitizer build checks the set-up is ordered before them). */
TEST(crypto_init_from_many_threads)
{
    enum { NT = 8 };
    pthread_t t[NT];
    uint8_t out[NT][16];
    memset(out, 0, sizeof out);
    for (int i = 0; i < NT; i++)
        REQUIRE(pthread_create(&t[i], NULL, init_and_draw, out[i]) == 0);
    for (int i = 0; i < NT; i++) {
        void *rv = (void *)1;
        pthread_join(t[i], &rv);
        CHECK(rv == NULL);
    }
    for (int i = 1; i < NT; i++)
        CHECK(memcmp(out[0], out[i], 16) != 0);
    CHECK_INT(tb_crypto_init(NULL), 0);
}
