/* test_topology_wire.c - serialise/deserialise: exact bytes, round trips
 * after mutations, every decoder error, truncations, random and bit-flipped
 * inputs, and the 1,048,576-leaf tree. */
#include "../harness.h"

#include <stdlib.h>

#include "topo/topology.h"
#include "lib/sanitizer.h"
#include "topology_helpers.h"

/* ---- a test-side encoder, to write invalid inputs on purpose ------------ */

typedef struct wn {
    uint64_t p1;            /* parent + 1, 0 for none */
    uint64_t host, lid, inc, port;
    uint8_t  flags;         /* alive | role << 1 */
} wn_t;

#define FE_ 1                 /* alive front-end */
#define CN_ 3                 /* alive commnode */
#define BE_ 5                 /* alive back-end */

static size_t put_varint(uint8_t *o, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        o[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    o[n++] = (uint8_t)v;
    return n;
}

static uint64_t zz(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static size_t encode(uint8_t *o, const char *const *hosts, size_t nh, const wn_t *nd, size_t n)
{
    size_t k = 0;
    int64_t last[8];
    o[k++] = 1;
    k += put_varint(o + k, nh);
    for (size_t i = 0; i < nh; i++) {
        size_t hl = strlen(hosts[i]);
        k += put_varint(o + k, hl);
        memcpy(o + k, hosts[i], hl);
        k += hl;
    }
    k += put_varint(o + k, n);
    int64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        k += put_varint(o + k, zz((int64_t)nd[i].p1 - prev));
        prev = (int64_t)nd[i].p1;
    }
    prev = 0;
    for (size_t i = 0; i < n; i++) {
        k += put_varint(o + k, zz((int64_t)nd[i].host - prev));
        prev = (int64_t)nd[i].host;
    }
    for (size_t i = 0; i < 8; i++)
        last[i] = -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = nd[i].host < 8 ? nd[i].host : 0;
        k += put_varint(o + k, zz((int64_t)nd[i].lid - (last[h] + 1)));
        last[h] = (int64_t)nd[i].lid;
    }
    for (size_t i = 0; i < n; i++)
        k += put_varint(o + k, nd[i].inc);
    for (size_t i = 0; i < n; i++)
        k += put_varint(o + k, nd[i].port);
    for (size_t i = 0; i < n; i++)
        o[k++] = nd[i].flags;
    return k;
}

static void expect_error_bytes(const uint8_t *b, size_t len, const char *msg)
{
    tbon_error_t err = { 0 };
    tb_topology_t *t = tb_topology_deserialize(b, len, &err);
    CHECK(t == NULL);
    CHECK_INT(err.code, TBON_EFORMAT);
    CHECK_STR(err.msg, msg);
    tb_topology_destroy(t);
}

static const char *const H2[] = { "fe", "a" };

static void expect_error(const wn_t *nd, size_t n, const char *msg)
{
    uint8_t b[512];
    expect_error_bytes(b, encode(b, H2, 2, nd, n), msg);
}

/* ---- tests ------------------------------------------------------------------ */

TEST(exact_bytes_of_a_small_topology)
{
    tb_topology_t *t = tt_parse_text("fe:0 => a:0;");
    REQUIRE(t);
    uint8_t *buf;
    size_t len;
    REQUIRE(tb_topology_serialize(t, &buf, &len) == 0);
    static const uint8_t want[] = {
        1,                          /* version */
        2, 2, 'f', 'e', 1, 'a',     /* hosts */
        2,                          /* nodes */
        0, 2,                       /* parent + 1: 0, then +1 */
        0, 2,                       /* host: 0, then +1 */
        0, 0,                       /* local id: each the next on its host */
        0, 0,                       /* incarnation */
        0, 0,                       /* port */
        1, 5,                       /* alive FE, alive BE */
    };
    CHECK_UINT(len, sizeof want);
    CHECK_MEM(buf, want, sizeof want);
    /* The test encoder agrees with the library. */
    wn_t nd[] = { { 0, 0, 0, 0, 0, FE_ }, { 1, 1, 0, 0, 0, BE_ } };
    uint8_t mine[64];
    CHECK_UINT(encode(mine, H2, 2, nd, 2), sizeof want);
    CHECK_MEM(mine, want, sizeof want);
    free(buf);
    tb_topology_destroy(t);
}

TEST(round_trip_of_samples)
{
    const char *names[] = { "topologies/local-4x4.top", "topologies/local-4x4x4.top",
                            "topologies/local-32x32.top", "topologies/local-4x4.xml" };
    for (size_t i = 0; i < 4; i++) {
        tb_topology_t *t = tb_topology_parse_file(names[i], NULL);
        REQUIRE(t);
        tt_round_trip(t);
        tb_topology_destroy(t);
    }
}

TEST(round_trip_after_every_kind_of_mutation)
{
    tb_topology_t *t = tb_topology_parse_file("topologies/local-4x4x4.top", NULL);
    REQUIRE(t);
    CHECK_INT(tb_topology_remove(t, 2), 0);            /* 9..12 orphaned */
    tt_round_trip(t);
    CHECK_INT(tb_topology_reparent(t, 9, 1), 0);       /* parent 1 < 9 */
    CHECK_INT(tb_topology_reparent(t, 6, 10), 0);      /* orphan 10 keeps children */
    CHECK_INT(tb_topology_reparent(t, 3, 20), 0);      /* parent rank > child rank */
    tt_round_trip(t);
    tbon_rank_t r;
    CHECK_INT(tb_topology_add_child(t, 12, "joined.example", 7, TB_ROLE_COMMNODE, &r), 0);
    CHECK_INT(tb_topology_add_child(t, r, "joined.example", 8, TB_ROLE_BE, &r), 0);
    CHECK_INT(tb_topology_set_port(t, 0, 65535), 0);
    CHECK_INT(tb_topology_set_port(t, 84, 1), 0);
    CHECK_INT(tb_topology_set_incarnation(t, 50, UINT32_MAX), 0);
    CHECK_INT(tb_topology_set_role(t, 21, TB_ROLE_COMMNODE), 0);
    CHECK_INT(tb_topology_remove(t, 22), 0);           /* a dead BE */
    tt_round_trip(t);
    tb_topology_destroy(t);
}

TEST(every_truncation_fails_cleanly)
{
    tb_topology_t *t = tb_topology_parse_file("topologies/local-4x4.top", NULL);
    REQUIRE(t);
    CHECK_INT(tb_topology_remove(t, 1), 0);
    CHECK_INT(tb_topology_reparent(t, 5, 2), 0);
    uint8_t *buf;
    size_t len;
    REQUIRE(tb_topology_serialize(t, &buf, &len) == 0);
    for (size_t k = 0; k < len; k++) {
        /* A fresh copy of exactly k bytes, so ASan sees any read past it. */
        uint8_t *cut = malloc(k ? k : 1);
        REQUIRE(cut);
        memcpy(cut, buf, k);
        tbon_error_t err = { 0 };
        tb_topology_t *u = tb_topology_deserialize(cut, k, &err);
        CHECK(u == NULL);
        CHECK_INT(err.code, TBON_EFORMAT);
        CHECK(strncmp(err.msg, "serialised topology: ", 21) == 0);
        tb_topology_destroy(u);
        free(cut);
    }
    free(buf);
    tb_topology_destroy(t);
}

TEST(trailing_bytes_rejected)
{
    wn_t nd[] = { { 0, 0, 0, 0, 0, FE_ }, { 1, 1, 0, 0, 0, BE_ } };
    uint8_t b[64];
    size_t len = encode(b, H2, 2, nd, 2);
    b[len++] = 0;
    expect_error_bytes(b, len, "serialised topology: trailing bytes after the last column: 1");
}

TEST(header_errors)
{
    expect_error_bytes((const uint8_t *)"", 0, "serialised topology: no bytes");
    expect_error_bytes((const uint8_t *)"\x02", 1,
                       "serialised topology: unknown version 2 (this is version 1)");
    expect_error_bytes((const uint8_t *)"\x01", 1,
                       "serialised topology: truncated before the host count");
    expect_error_bytes((const uint8_t *)"\x01\x64\x01\x61\x01\x00", 6,
                       "serialised topology: bad host count 100 for 4 remaining bytes");
    expect_error_bytes((const uint8_t *)"\x01\x00\x01", 3,
                       "serialised topology: bad host count 0 for 1 remaining bytes");
    expect_error_bytes((const uint8_t *)"\x01\x01\x00\x61\x00\x00", 6,
                       "serialised topology: host 0 has a bad length 0");
    expect_error_bytes((const uint8_t *)"\x01\x01\x05\x61\x00\x00", 6,
                       "serialised topology: host 0 has a bad length 5");
    expect_error_bytes((const uint8_t *)"\x01\x01\x01-\x00\x00", 6,
                       "serialised topology: host 0 is not a valid host name");
    expect_error_bytes((const uint8_t *)"\x01\x02\x01\x61\x01\x61\x00\x00", 8,
                       "serialised topology: host 1 repeats host 0");
    /* Eleven-byte varint as the host count. */
    expect_error_bytes((const uint8_t *)"\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f\x00", 12,
                       "serialised topology: truncated before the host count");
}

TEST(node_count_checked_against_remaining_bytes)
{
    /* One host "a", then a node count of 1000 with 12 bytes left. */
    uint8_t b[32] = { 1, 1, 1, 'a' };
    size_t k = 4 + put_varint(b + 4, 1000);
    memset(b + k, 0, 12);
    expect_error_bytes(b, k + 12, "serialised topology: bad node count 1000 for 1 hosts and "
                       "12 remaining bytes");
    /* 2^24 + 1 nodes: over the maximum whatever the length. */
    k = 4 + put_varint(b + 4, (1u << 24) + 1);
    expect_error_bytes(b, k + 12, "serialised topology: bad node count 16777217 for 1 hosts "
                       "and 12 remaining bytes");
    /* More hosts than nodes. */
    expect_error_bytes((const uint8_t *)"\x01\x02\x01\x61\x01\x62\x01\x00\x00\x00\x00\x00\x01",
                       13, "serialised topology: bad node count 1 for 2 hosts and 6 remaining "
                       "bytes");
}

TEST(column_truncated_mid_varint)
{
    wn_t nd[] = { { 0, 0, 0, 0, 0, FE_ }, { 1, 1, 0, 0, 300, BE_ } };
    uint8_t b[64];
    size_t len = encode(b, H2, 2, nd, 2);
    /* Drop the flags and the last port byte, keeping a dangling continuation. */
    expect_error_bytes(b, len - 3, "serialised topology: bad node count 2 for 2 hosts and 10 "
                       "remaining bytes");
    /* With the count checks passed, a bad varint inside a column is named:
     * here an eleven-byte one for rank 1's parent. */
    uint8_t c[64] = { 1, 2, 2, 'f', 'e', 1, 'a', 3, 0 };
    memset(c + 9, 0x80, 10);
    c[19] = 1;
    expect_error_bytes(c, 20 + 18, "serialised topology: truncated or bad varint in the "
                       "parent column at rank 1");
}

TEST(value_range_errors)
{
    wn_t nd[3] = { { 0, 0, 0, 0, 0, FE_ }, { 1, 1, 0, 0, 0, CN_ }, { 2, 1, 1, 0, 0, BE_ } };
    wn_t bad[3];

    memcpy(bad, nd, sizeof nd);
    bad[2].p1 = 4;
    expect_error(bad, 3, "serialised topology: rank 2 has a parent out of range");
    memcpy(bad, nd, sizeof nd);
    bad[1].host = 2;
    expect_error(bad, 3, "serialised topology: rank 1 has a host index out of range");
    memcpy(bad, nd, sizeof nd);
    bad[2].lid = 2147483648u;
    expect_error(bad, 3, "serialised topology: rank 2 has a local id out of range");
    memcpy(bad, nd, sizeof nd);
    bad[2].inc = 1ull << 32;
    expect_error(bad, 3, "serialised topology: rank 2 has a bad incarnation, port or flags");
    memcpy(bad, nd, sizeof nd);
    bad[2].port = 65536;
    expect_error(bad, 3, "serialised topology: rank 2 has a bad incarnation, port or flags");
    memcpy(bad, nd, sizeof nd);
    bad[2].flags = 7;            /* role 3 */
    expect_error(bad, 3, "serialised topology: rank 2 has a bad incarnation, port or flags");
    memcpy(bad, nd, sizeof nd);
    bad[2].flags = 0x80 | BE_;
    expect_error(bad, 3, "serialised topology: rank 2 has a bad incarnation, port or flags");
    memcpy(bad, nd, sizeof nd);
    bad[2].lid = 0;
    expect_error(bad, 3, "serialised topology: rank 2 repeats the name \"a:0\"");
}

TEST(structure_errors)
{
    wn_t nd[3] = { { 0, 0, 0, 0, 0, FE_ }, { 1, 1, 0, 0, 0, CN_ }, { 2, 1, 1, 0, 0, BE_ } };
    wn_t bad[3];

    memcpy(bad, nd, sizeof nd);
    bad[0].flags = CN_;
    expect_error(bad, 3, "serialised topology: rank 0 must be the alive front-end, without a "
                 "parent");
    memcpy(bad, nd, sizeof nd);
    bad[0].flags = 0;            /* dead FE */
    expect_error(bad, 3, "serialised topology: rank 0 must be the alive front-end, without a "
                 "parent");
    memcpy(bad, nd, sizeof nd);
    bad[0].p1 = 2;
    expect_error(bad, 3, "serialised topology: rank 0 must be the alive front-end, without a "
                 "parent");
    memcpy(bad, nd, sizeof nd);
    bad[2].flags = FE_;
    expect_error(bad, 3, "serialised topology: rank 2 claims to be a second front-end");
    memcpy(bad, nd, sizeof nd);
    bad[2].flags = BE_ & ~1;     /* dead, but still hanging under 1 */
    expect_error(bad, 3, "serialised topology: rank 2 and its parent 1 must both be alive");
    memcpy(bad, nd, sizeof nd);
    bad[1].flags = CN_ & ~1;     /* dead parent */
    bad[1].p1 = 0;
    expect_error(bad, 3, "serialised topology: rank 2 and its parent 1 must both be alive");
    memcpy(bad, nd, sizeof nd);
    bad[1].flags = BE_;
    expect_error(bad, 3, "serialised topology: rank 2 has the back-end 1 as its parent");
    memcpy(bad, nd, sizeof nd);
    bad[1].p1 = 3;               /* 1 under 2 under 1 */
    bad[2].flags = CN_;
    expect_error(bad, 3, "serialised topology: rank 2 is on a cycle of parent links (2 of 3 "
                 "ranks are not reachable from any root)");
    memcpy(bad, nd, sizeof nd);
    bad[2].p1 = 3;               /* its own parent */
    bad[2].flags = CN_;
    expect_error(bad, 3, "serialised topology: rank 2 is on a cycle of parent links (1 of 3 "
                 "ranks are not reachable from any root)");
    /* Orphans (alive, no parent) and isolated dead nodes are fine. */
    memcpy(bad, nd, sizeof nd);
    bad[1].p1 = 0;
    uint8_t b[128];
    tbon_error_t err;
    tb_topology_t *t = tb_topology_deserialize(b, encode(b, H2, 2, bad, 3), &err);
    REQUIRE(t);
    CHECK_UINT(tb_topology_root_of(t, 2), 1);
    CHECK_UINT(tb_topology_depth(t, 2), 1);
    CHECK_UINT(tb_topology_height(t, 0), 0);
    tb_topology_destroy(t);
}

/* A decoded input must be a valid topology: it serialises back and decodes
 * to an equal one. */
static void check_decoded(const uint8_t *b, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    REQUIRE(copy);
    memcpy(copy, b, len);
    tbon_error_t err = { 0 };
    tb_topology_t *t = tb_topology_deserialize(copy, len, &err);
    if (t) {
        tt_round_trip(t);
        tb_topology_destroy(t);
    } else {
        CHECK_INT(err.code, TBON_EFORMAT);
        CHECK(err.msg[0] != '\0');
    }
    free(copy);
}

TEST(random_buffers_fail_cleanly)
{
    uint8_t b[256];
    uint64_t rs = 88172645463325252ULL;
    for (int i = 0; i < 3000; i++) {
        size_t len = th_rand(&rs) % sizeof b;
        for (size_t k = 0; k < len; k++)
            b[k] = (uint8_t)th_rand(&rs);
        if (len && i % 2)
            b[0] = 1;           /* get past the version byte half the time */
        if (len > 2 && i % 4 == 1)
            b[1] = (uint8_t)(th_rand(&rs) % 4);   /* and a plausible host count */
        check_decoded(b, len);
    }
}

TEST(bit_flips_fail_cleanly_or_decode_to_valid_topologies)
{
    tb_topology_t *t = tb_topology_parse_file("topologies/local-4x4x4.top", NULL);
    REQUIRE(t);
    CHECK_INT(tb_topology_remove(t, 2), 0);
    CHECK_INT(tb_topology_reparent(t, 9, 3), 0);
    uint8_t *buf;
    size_t len;
    REQUIRE(tb_topology_serialize(t, &buf, &len) == 0);
    uint8_t *orig = malloc(len);
    REQUIRE(orig);
    memcpy(orig, buf, len);
    uint64_t rs = 88172645463325252ULL;
    int decoded = 0;
    for (int i = 0; i < 3000; i++) {
        memcpy(buf, orig, len);
        for (int f = 1 + (int)(th_rand(&rs) % 3); f > 0; f--)
            buf[th_rand(&rs) % len] ^= (uint8_t)(1u << (th_rand(&rs) % 8));
        tb_topology_t *u = tb_topology_deserialize(buf, len, NULL);
        decoded += u != NULL;
        tb_topology_destroy(u);
        check_decoded(buf, len);
    }
    free(orig);
    /* Flips in ports and incarnations decode; most others are caught. */
    CHECK(decoded > 0 && decoded < 3000);
    free(buf);
    tb_topology_destroy(t);
}

/* The 32x32x32x32 tree of seed 003: 1,048,576 back-ends, 1,082,401 nodes. */
TEST(million_leaf_topology_builds_serialises_and_decodes)
{
    if (UNDER_TSAN) {
        /* one thread: nothing for ThreadSanitizer to see, 6 s of its time */
        printf("    (skipped under TSan: single-threaded; plain and ASan run it)\n");
        return;
    }
    tb_topology_t *t = tb_topology_new();
    REQUIRE(t);
    REQUIRE(tb_topology_reserve(t, 1082401) == 0);
    REQUIRE(tb_topology_add(t, "localhost", 0, TBON_RANK_NONE) == 0);
    uint32_t r = 1, first = 0, width = 1;
    for (int level = 0; level < 4; level++) {
        for (uint32_t p = first; p < first + width; p++)
            for (int c = 0; c < 32; c++, r++)
                if (tb_topology_add(t, "localhost", r, p) != 0)
                    REQUIRE(0);
        first += width;
        width *= 32;
    }
    REQUIRE(tb_topology_finish(t, NULL) == 0);
    CHECK_UINT(tb_topology_size(t), 1082401);
    CHECK_UINT(tb_topology_num_leaves(t), 1048576);
    CHECK_UINT(tb_topology_height(t, 0), 4);
    CHECK_UINT(tb_topology_parent(t, 1082400), 33824);
    CHECK_UINT(tb_topology_find(t, "localhost", 1082400), 1082400);
    uint8_t *buf;
    size_t len;
    REQUIRE(tb_topology_serialize(t, &buf, &len) == 0);
    CHECK(len < 16u * 1024 * 1024);
    tbon_error_t err = { 0 };
    tb_topology_t *u = tb_topology_deserialize(buf, len, &err);
    REQUIRE(u);
    CHECK(tb_topology_equal(t, u));
    CHECK_UINT(tb_topology_digest(t), tb_topology_digest(u));
    /* A failure near the root orphans 32 subtrees of 1,057 nodes each. */
    CHECK_INT(tb_topology_remove(u, 1), 0);
    CHECK_UINT(tb_topology_root_of(u, 1057), 33);
    CHECK_UINT(tb_topology_depth(u, 1057), 1);
    CHECK_UINT(tb_topology_depth(u, 33825), 2);
    CHECK_UINT(tb_topology_height(u, 0), 4);
    CHECK_UINT(tb_topology_num_leaves(u), 1048576);
    free(buf);
    tb_topology_destroy(u);
    tb_topology_destroy(t);
}
