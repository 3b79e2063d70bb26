/* test_sha256.c - SHA-256 (FIPS 180-2 vectors), HMAC-SHA256 (RFC 4231), compare, randomness */
#include "../harness.h"

#include <stdlib.h>

#include "util/sha256.h"

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

/* Check that the 32-byte digest d equals the expected hex string. */
#define CHECK_DIGEST(d, hex) do { uint8_t th_x[TB_SHA256_SIZE];            \
    REQUIRE(unhex((hex), th_x, sizeof th_x) == TB_SHA256_SIZE);           \
    CHECK_MEM((d), th_x, TB_SHA256_SIZE); } while (0)

static void sha_str(const char *s, uint8_t out[TB_SHA256_SIZE])
{
    tb_sha256(s, strlen(s), out);
}

/* ---- SHA-256, FIPS 180-2 appendix B and the NIST examples ---- */

TEST(sha256_fips_vectors)
{
    uint8_t d[TB_SHA256_SIZE];
    sha_str("abc", d);
    CHECK_DIGEST(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha_str("", d);
    CHECK_DIGEST(d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    tb_sha256(NULL, 0, d);
    CHECK_DIGEST(d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* 448 bits: the length no longer fits the first block, padding takes two. */
    sha_str("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", d);
    CHECK_DIGEST(d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* 896 bits. */
    sha_str("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
            "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu", d);
    CHECK_DIGEST(d, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(sha256_million_a)
{
    const char *want = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    uint8_t d[TB_SHA256_SIZE];
    char *m = malloc(1000000);
    REQUIRE(m);
    memset(m, 'a', 1000000);
    tb_sha256(m, 1000000, d);
    CHECK_DIGEST(d, want);
    free(m);

    /* The same in 997-byte pieces, which end at every phase of a block. */
    tb_sha256_t c;
    char a[997];
    memset(a, 'a', sizeof a);
    tb_sha256_init(&c);
    size_t left = 1000000;
    while (left) {
        size_t k = left < sizeof a ? left : sizeof a;
        tb_sha256_update(&c, a, k);
        left -= k;
    }
    tb_sha256_final(&c, d);
    CHECK_DIGEST(d, want);
}

/* Every length 0..200 (every padding case: 55, 56, 63, 64, 119, 120, ...):
 * the SHA-256 of the 201 digests concatenated, computed with Python hashlib. */
TEST(sha256_every_length)
{
    uint8_t m[200], d[TB_SHA256_SIZE], all[TB_SHA256_SIZE];
    for (int i = 0; i < 200; i++)
        m[i] = (uint8_t)(i * 7 + 3);
    tb_sha256_t outer;
    tb_sha256_init(&outer);
    for (size_t len = 0; len <= sizeof m; len++) {
        tb_sha256(m, len, d);
        tb_sha256_update(&outer, d, sizeof d);
    }
    tb_sha256_final(&outer, all);
    CHECK_DIGEST(all, "3275febb4612d86d586eb9f11cd21e648a9fc7d95e0f6b8d362786e28c9c5b79");
}

TEST(sha256_split_at_every_offset)
{
    uint8_t m[200], one[TB_SHA256_SIZE], d[TB_SHA256_SIZE];
    th_fill_random(m, sizeof m, 42);
    tb_sha256(m, sizeof m, one);
    for (size_t i = 0; i <= sizeof m; i++) {
        tb_sha256_t c;
        tb_sha256_init(&c);
        tb_sha256_update(&c, m, i);
        tb_sha256_update(&c, m + i, sizeof m - i);
        tb_sha256_final(&c, d);
        if (memcmp(d, one, sizeof d) != 0)
            th_fail(__FILE__, __LINE__, "split at %zu differs from one-shot", i);
    }
    /* Two splits, and byte-at-a-time. */
    for (size_t i = 0; i <= sizeof m; i += 7) {
        for (size_t j = i; j <= sizeof m; j += 13) {
            tb_sha256_t c;
            tb_sha256_init(&c);
            tb_sha256_update(&c, m, i);
            tb_sha256_update(&c, m + i, j - i);
            tb_sha256_update(&c, m + j, sizeof m - j);
            tb_sha256_final(&c, d);
            if (memcmp(d, one, sizeof d) != 0)
                th_fail(__FILE__, __LINE__, "splits at %zu and %zu differ", i, j);
        }
    }
    tb_sha256_t c;
    tb_sha256_init(&c);
    for (size_t i = 0; i < sizeof m; i++)
        tb_sha256_update(&c, m + i, 1);
    tb_sha256_final(&c, d);
    CHECK_MEM(d, one, sizeof d);
}

/* ---- HMAC-SHA256, RFC 4231 section 4 ---- */

typedef struct rfc4231 {
    uint8_t key[131];
    size_t keylen;
    const char *data;    /* text, or hex when data_hex */
    int data_hex;
    const char *mac;     /* hex; case 5 gives only the first 128 bits */
} rfc4231_t;

static void check_rfc4231(int num, const rfc4231_t *t)
{
    uint8_t data[200], want[TB_SHA256_SIZE], got[TB_SHA256_SIZE];
    size_t n;
    if (t->data_hex) {
        n = unhex(t->data, data, sizeof data);
    } else {
        n = strlen(t->data);
        memcpy(data, t->data, n);
    }
    size_t nmac = unhex(t->mac, want, sizeof want);
    tb_hmac_sha256(t->key, t->keylen, data, n, got);
    if (memcmp(got, want, nmac) != 0)
        th_fail(__FILE__, __LINE__, "RFC 4231 test case %d: one-shot HMAC differs", num);
    /* Incremental, data split in the middle. */
    tb_hmac_sha256_t c;
    memset(got, 0, sizeof got);
    tb_hmac_sha256_init(&c, t->key, t->keylen);
    tb_hmac_sha256_update(&c, data, n / 2);
    tb_hmac_sha256_update(&c, data + n / 2, n - n / 2);
    tb_hmac_sha256_final(&c, got);
    if (memcmp(got, want, nmac) != 0)
        th_fail(__FILE__, __LINE__, "RFC 4231 test case %d: incremental HMAC differs", num);
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

    /* Case 5's truncated length really is a prefix check of a full MAC. */
    uint8_t mac[TB_SHA256_SIZE];
    tb_hmac_sha256(t[4].key, 20, t[4].data, strlen(t[4].data), mac);
    CHECK_DIGEST(mac, "a3b6167473100ee06e0c796c2955552bfa6f7c0a6a8aef8b93f860aab0cd20c5");
}

/* Keys and messages of every length 0..200 with every split point: the
 * SHA-256 of HMAC(m[0..L), m[L..200)) for all L, computed with Python hmac. */
TEST(hmac_key_lengths_and_splits)
{
    uint8_t m[200], mac[TB_SHA256_SIZE], one[TB_SHA256_SIZE], all[TB_SHA256_SIZE];
    for (int i = 0; i < 200; i++)
        m[i] = (uint8_t)(i * 7 + 3);
    tb_sha256_t outer;
    tb_sha256_init(&outer);
    for (size_t l = 0; l <= sizeof m; l++) {
        tb_hmac_sha256(m, l, m + l, sizeof m - l, mac);
        tb_sha256_update(&outer, mac, sizeof mac);
    }
    tb_sha256_final(&outer, all);
    CHECK_DIGEST(all, "49251980fd95bf4072251f99a64ed78690a2d0a8f969b75a487b4fd125cc9ab9");

    /* Incremental HMAC of a 200-byte message split at every offset. */
    static const uint8_t key[32] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    th_fill_random(m, sizeof m, 7);
    tb_hmac_sha256(key, sizeof key, m, sizeof m, one);
    for (size_t i = 0; i <= sizeof m; i++) {
        tb_hmac_sha256_t c;
        tb_hmac_sha256_init(&c, key, sizeof key);
        tb_hmac_sha256_update(&c, m, i);
        tb_hmac_sha256_update(&c, m + i, sizeof m - i);
        tb_hmac_sha256_final(&c, mac);
        if (memcmp(mac, one, sizeof mac) != 0)
            th_fail(__FILE__, __LINE__, "HMAC split at %zu differs from one-shot", i);
    }
    /* A different key gives a different MAC. */
    uint8_t key2[32];
    memcpy(key2, key, sizeof key2);
    key2[31] ^= 1;
    tb_hmac_sha256(key2, sizeof key2, m, sizeof m, mac);
    CHECK(memcmp(mac, one, sizeof mac) != 0);
}

/* ---- compare, wipe, randomness ---- */

TEST(ct_equal)
{
    uint8_t a[32], b[32];
    th_fill_random(a, sizeof a, 3);
    memcpy(b, a, sizeof b);
    CHECK_INT(tb_ct_equal(a, b, sizeof a), 1);
    CHECK_INT(tb_ct_equal(a, b, 0), 1);
    for (size_t i = 0; i < sizeof a; i++) {
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (uint8_t)(1u << bit);
            if (tb_ct_equal(a, b, sizeof a) != 0)
                th_fail(__FILE__, __LINE__, "byte %zu bit %d flipped, still equal", i, bit);
            b[i] ^= (uint8_t)(1u << bit);
        }
    }
    b[31] ^= 0xFF;
    CHECK_INT(tb_ct_equal(a, b, sizeof a), 0);
    CHECK_INT(tb_ct_equal(a, b, 31), 1);   /* only the first n bytes count */
}

TEST(secure_zero)
{
    uint8_t a[40];
    memset(a, 0x5A, sizeof a);
    tb_secure_zero(a + 4, 32);
    CHECK_UINT(a[3], 0x5A);
    for (int i = 4; i < 36; i++)
        CHECK_UINT(a[i], 0);
    CHECK_UINT(a[36], 0x5A);
    tb_secure_zero(NULL, 0);
}

TEST(random_bytes)
{
    uint8_t a[32], b[32], zero[32];
    memset(zero, 0, sizeof zero);
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    CHECK_INT(tb_random_bytes(a, sizeof a), 0);
    CHECK_INT(tb_random_bytes(b, sizeof b), 0);
    CHECK(memcmp(a, b, sizeof a) != 0);
    CHECK(memcmp(a, zero, sizeof a) != 0);
    /* Zero bytes: succeeds and writes nothing. */
    uint8_t c[4] = { 9, 9, 9, 9 };
    CHECK_INT(tb_random_bytes(c, 0), 0);
    CHECK_UINT(c[0], 9);
    CHECK_INT(tb_random_bytes(NULL, 0), 0);
    /* A large request (more than one getrandom call may return) is filled to the end. */
    size_t big = 1 << 20;
    uint8_t *p = calloc(1, big);
    REQUIRE(p);
    CHECK_INT(tb_random_bytes(p, big), 0);
    CHECK(memcmp(p + big - sizeof zero, zero, sizeof zero) != 0);
    free(p);
}
