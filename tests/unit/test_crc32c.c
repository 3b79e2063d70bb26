/* test_crc32c.c - CRC-32C: known vectors, hardware == tables, chaining, copy, combine */
#include "../harness.h"

#include <stdlib.h>

#include "util/crc32c.h"

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void check_vectors(crc_fn f)
{
    uint8_t buf[32];
    CHECK_UINT(f(0, "123456789", 9), 0xE3069283u);
    CHECK_UINT(f(0, "", 0), 0u);
    CHECK_UINT(f(0, NULL, 0), 0u);
    /* RFC 3720 (iSCSI) B.4 test vectors. */
    memset(buf, 0, sizeof buf);
    CHECK_UINT(f(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, sizeof buf);
    CHECK_UINT(f(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    CHECK_UINT(f(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    CHECK_UINT(f(0, buf, 32), 0x113FDB5Cu);
}

TEST(known_vectors_dispatch)
{
    check_vectors(tb_crc32c);
}

TEST(known_vectors_tables)
{
    check_vectors(tb_crc32c_sw);
}

TEST(known_vectors_hardware)
{
    if (!tb_crc32c_hw_available())
        printf("    (no SSE4.2 here: tb_crc32c_hw falls back to the tables)\n");
    check_vectors(tb_crc32c_hw);
}

/* A bit-at-a-time reference, the definition itself, to check the tables. */
static uint32_t crc_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

/* Every length 0..1024 at every alignment 0..7: tables, hardware, dispatch and
 * copy agree with the bitwise definition (covers the short-lane join). */
TEST(every_length_and_alignment)
{
    static uint8_t buf[1024 + 8 + 8], dst[1024 + 8 + 8];
    th_fill_random(buf, sizeof buf, 1);
    int bad = 0;
    for (size_t len = 0; len <= 1024 && bad < 5; len++) {
        for (size_t al = 0; al < 8; al++) {
            uint32_t ref = crc_bitwise(0, buf + al, len);
            uint32_t sw = tb_crc32c_sw(0, buf + al, len);
            uint32_t hw = tb_crc32c_hw(0, buf + al, len);
            uint32_t d = tb_crc32c(0, buf + al, len);
            memset(dst, 0xA5, sizeof dst);
            uint32_t c = tb_crc32c_copy(0, dst + (7 - al), buf + al, len);
            int copied = memcmp(dst + (7 - al), buf + al, len) == 0 &&
                         dst[7 - al + len] == 0xA5 && (al == 7 || dst[6 - al] == 0xA5);
            if (sw != ref || hw != ref || d != ref || c != ref || !copied) {
                th_fail(__FILE__, __LINE__, "len %zu align %zu: ref %08x sw %08x hw %08x "
                        "dispatch %08x copy %08x copied %d", len, al, ref, sw, hw, d, c, copied);
                bad++;
            }
        }
    }
}

/* Lengths around the long-lane block (3 x 8192) and far beyond, odd offsets. */
TEST(large_buffers_hw_equals_sw)
{
    size_t n = 3 * 8192 * 4 + 999;
    uint8_t *buf = malloc(n + 8), *dst = malloc(n + 8);
    REQUIRE(buf && dst);
    th_fill_random(buf, n + 8, 2);
    size_t lens[] = { 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1, 3 * 8192 + 768 + 7,
                      2 * 3 * 8192 + 5, n };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        for (size_t al = 0; al < 8; al += 3) {
            uint32_t sw = tb_crc32c_sw(0x12345678, buf + al, lens[i]);
            CHECK_UINT(tb_crc32c_hw(0x12345678, buf + al, lens[i]), sw);
            CHECK_UINT(tb_crc32c_copy(0x12345678, dst, buf + al, lens[i]), sw);
            CHECK_MEM(dst, buf + al, lens[i]);
        }
    }
    CHECK_UINT(crc_bitwise(0, buf, n), tb_crc32c_sw(0, buf, n));
    free(buf);
    free(dst);
}

/* tb_crc32c(tb_crc32c(0, a), b) == tb_crc32c(0, a||b) at every split point. */
TEST(chaining_and_combine)
{
    uint8_t buf[600];
    th_fill_random(buf, sizeof buf, 3);
    uint32_t whole = tb_crc32c(0, buf, sizeof buf);
    for (size_t cut = 0; cut <= sizeof buf; cut++) {
        uint32_t a = tb_crc32c(0, buf, cut);
        CHECK_UINT(tb_crc32c(a, buf + cut, sizeof buf - cut), whole);
        CHECK_UINT(tb_crc32c_sw(tb_crc32c_sw(0, buf, cut), buf + cut, sizeof buf - cut), whole);
        uint32_t b = tb_crc32c(0, buf + cut, sizeof buf - cut);
        CHECK_UINT(tb_crc32c_combine(a, b, sizeof buf - cut), whole);
    }
    /* Three pieces, the middle one empty. */
    uint32_t c = tb_crc32c(tb_crc32c(tb_crc32c(0, buf, 100), buf + 100, 0), buf + 100, 500);
    CHECK_UINT(c, whole);
}

TEST(combine_large_length)
{
    /* crc(zeros(n)) chained must equal combine over the same length, also for
     * lengths above 4 GiB where only the algebra can go. */
    static uint8_t zeros[1 << 16];
    uint32_t z = 0;
    for (int i = 0; i < 16; i++)
        z = tb_crc32c(z, zeros, sizeof zeros);                 /* 1 MiB of zeros */
    uint32_t a = tb_crc32c(0, "abc", 3);
    uint32_t chained = a;
    for (int i = 0; i < 16; i++)
        chained = tb_crc32c(chained, zeros, sizeof zeros);
    CHECK_UINT(tb_crc32c_combine(a, z, 16u << 16), chained);
    /* combine is associative: (a.b).c == a.(b.c) for a 5 GiB b. */
    uint64_t big = 5ull << 30;
    uint32_t b = 0xDEADBEEF, cc = tb_crc32c(0, "xyz", 3);
    uint32_t left = tb_crc32c_combine(tb_crc32c_combine(a, b, big), cc, 3);
    uint32_t right = tb_crc32c_combine(a, tb_crc32c_combine(b, cc, 3), big + 3);
    CHECK_UINT(left, right);
    CHECK_UINT(tb_crc32c_combine(a, 0, 0), a);
}

/* The environment switch really selects the tables (run in the forked case,
 * before anything in this process has initialised the CRC). */
TEST(env_forces_tables)
{
    setenv("TBON_CRC32C", "sw", 1);
    CHECK_INT(tb_crc32c_hw_available(), 0);
    check_vectors(tb_crc32c);
    uint8_t buf[3000], dst[3000];
    th_fill_random(buf, sizeof buf, 4);
    CHECK_UINT(tb_crc32c_copy(7, dst, buf, sizeof buf), crc_bitwise(7, buf, sizeof buf));
    CHECK_MEM(dst, buf, sizeof buf);
}
