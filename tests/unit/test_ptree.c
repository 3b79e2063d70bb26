/* test_ptree.c - tbon_stat's call-prefix trees (stat/st_ptree*.c) and its
 * merge filter (stat/stat_merge.c, compiled in here): sets, merge laws on
 * random trees, the binary form against every truncation and random damage,
 * and the outputs on a known tree */
#include "../harness.h"

#include "../../stat/st_ptree.h"
#include "../../stat/stat_merge.c"

#include <tbon/tbon.h>

#include "filter.h"      /* the library's packet lists */

#include <stdlib.h>

static const char *const A[] = { "_start", "main", "do_work", "exchange_data", "barrier_wait" };
static const char *const B[] = { "_start", "main", "do_work", "compute_loop", "spin" };
static const char *const C[] = { "_start", "main", "do_work", "write_checkpoint" };

/* The demo's shape: ranks 0 and 3..9 in A, 1 in B, 2 in C. */
static st_tree_t *demo(void)
{
    st_tree_t *t = st_tree_new();
    for (uint32_t r = 0; r < 10 && t; r++) {
        const char *const *p = r == 1 ? B : r == 2 ? C : A;
        size_t n = r == 1 ? 5 : r == 2 ? 4 : 5;
        if (st_tree_add(t, p, n, r) != 0)
            return NULL;
    }
    return t;
}

static char *text_of(const st_tree_t *t, int (*fn)(const st_tree_t *, FILE *))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fn(t, f);
    fclose(f);
    return buf;
}

static int classes_fn(const st_tree_t *t, FILE *f)
{
    return st_tree_write_classes(t, f);
}

TEST(labels)
{
    char buf[64];
    st_range_t r[] = { { 0, 2 }, { 7, 7 } };
    CHECK_UINT(st_tree_label(r, 2, buf, sizeof buf), 9);
    CHECK_STR(buf, "4:[0-2,7]");
    CHECK_UINT(st_tree_label(NULL, 0, buf, sizeof buf), 4);
    CHECK_STR(buf, "0:[]");
    st_range_t one = { 5, 5 };
    st_tree_label(&one, 1, buf, sizeof buf);
    CHECK_STR(buf, "1:[5]");
    /* Truncated output still says how long it would be. */
    CHECK_UINT(st_tree_label(r, 2, buf, 4), 9);
    CHECK_STR(buf, "4:[");
}

TEST(text_and_classes_of_a_known_tree)
{
    st_tree_t *t = demo();
    REQUIRE(t);
    char *txt = text_of(t, st_tree_write_text);
    CHECK_STR(txt, "all  10:[0-9]\n"
                   "  _start  10:[0-9]\n"
                   "    main  10:[0-9]\n"
                   "      do_work  10:[0-9]\n"
                   "        compute_loop  1:[1]\n"
                   "          spin  1:[1]\n"
                   "        exchange_data  8:[0,3-9]\n"
                   "          barrier_wait  8:[0,3-9]\n"
                   "        write_checkpoint  1:[2]\n");
    free(txt);
    char *cls = text_of(t, classes_fn);
    CHECK_STR(cls, "8:[0,3-9]  representative 0:  ... > do_work > exchange_data > barrier_wait\n"
                   "1:[1]  representative 1:  ... > do_work > compute_loop > spin\n"
                   "1:[2]  representative 2:  ... > main > do_work > write_checkpoint\n");
    free(cls);
    FILE *dn = fopen("/dev/null", "w");
    CHECK_INT(st_tree_write_classes(t, dn), 3);
    fclose(dn);
    const char **fr;
    size_t n = st_tree_path(t, 2, &fr);
    CHECK_UINT(n, 4);
    if (n == 4)
        CHECK_STR(fr[3], "write_checkpoint");
    free(fr);
    CHECK_UINT(st_tree_path(t, 99, &fr), 0);
    CHECK_UINT(st_tree_size(t), 9);
    st_tree_free(t);
}

/* A task in two paths (two threads, or two samples) is its own class. */
TEST(classes_with_several_paths)
{
    st_tree_t *t = demo();
    REQUIRE(t);
    REQUIRE(st_tree_add(t, B, 5, 4) == 0);       /* rank 4 also in spin */
    char *cls = text_of(t, classes_fn);
    CHECK(strstr(cls, "7:[0,3,5-9]  representative 0:") != NULL);
    CHECK(strstr(cls, "1:[4]  representative 4:  ... > do_work > compute_loop > spin"
                      "  |  ... > do_work > exchange_data > barrier_wait") != NULL);
    free(cls);
    st_tree_free(t);
}

TEST(dot_and_json)
{
    st_tree_t *t = st_tree_new();
    const char *const odd[] = { "main", "f\"q\\x\n" };
    REQUIRE(st_tree_add(t, odd, 2, 3) == 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_INT(st_tree_write_dot(t, f, "job"), 0);
    fclose(f);
    CHECK(strstr(buf, "digraph \"job\" {") != NULL);
    CHECK(strstr(buf, "n1 -> n2 [label=\"1:[3]\"]") != NULL);
    CHECK(strstr(buf, "label=\"f\\\"q\\\\x\\n\"") != NULL);
    free(buf);
    f = open_memstream(&buf, &len);
    CHECK_INT(st_tree_write_json(t, f), 0);
    fclose(f);
    CHECK(strstr(buf, "{\"frame\": null, \"count\": 1, \"tasks\": \"[3]\", \"children\": [") ==
          buf);
    CHECK(strstr(buf, "\"frame\": \"f\\\"q\\\\x\\n\"") != NULL);
    free(buf);
    st_tree_free(t);
}

/* ---- random trees ---- */

static uint64_t rng = 88172645463325252ULL;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static st_tree_t *random_tree(void)
{
    static const char *const fr[] = { "a", "b", "c", "main", "x", "yy", "zzz", "_start" };
    st_tree_t *t = st_tree_new();
    int paths = 1 + (int)rnd(20);
    for (int i = 0; i < paths && t; i++) {
        const char *p[12];
        size_t n = rnd(12);
        for (size_t k = 0; k < n; k++)
            p[k] = fr[rnd(8)];
        uint32_t task = rnd(4) == 0 ? UINT32_MAX - rnd(3) : rnd(200);
        if (st_tree_add(t, p, n, task) != 0)
            return NULL;
    }
    return t;
}

static st_tree_t *copy(const st_tree_t *t)
{
    st_tree_t *c = st_tree_new();
    if (c && st_tree_merge(c, t) != 0)
        return NULL;
    return c;
}

TEST(merge_is_associative_commutative_idempotent)
{
    for (int it = 0; it < 300; it++) {
        st_tree_t *a = random_tree(), *b = random_tree(), *c = random_tree();
        REQUIRE(a && b && c);
        /* (a+b)+c == a+(b+c) == c+(a+b); a+a == a; a+b == b+a */
        st_tree_t *ab = copy(a), *abc = NULL, *bc = copy(b), *a_bc = copy(a), *cab = copy(c);
        REQUIRE(ab && bc && a_bc && cab);
        CHECK(st_tree_merge(ab, b) == 0);
        abc = copy(ab);
        CHECK(st_tree_merge(abc, c) == 0);
        CHECK(st_tree_merge(bc, c) == 0);
        CHECK(st_tree_merge(a_bc, bc) == 0);
        CHECK(st_tree_merge(cab, ab) == 0);
        CHECK(st_tree_equal(abc, a_bc));
        CHECK(st_tree_equal(abc, cab));
        st_tree_t *ba = copy(b);
        CHECK(st_tree_merge(ba, a) == 0);
        CHECK(st_tree_equal(ab, ba));
        st_tree_t *aa = copy(a);
        CHECK(st_tree_merge(aa, a) == 0);
        CHECK(st_tree_equal(aa, a));
        /* Equal trees encode to the same bytes. */
        uint8_t *e1, *e2;
        size_t l1, l2;
        CHECK(st_tree_encode(abc, &e1, &l1) == 0 && st_tree_encode(cab, &e2, &l2) == 0);
        CHECK(l1 == l2 && memcmp(e1, e2, l1) == 0);
        free(e1);
        free(e2);
        st_tree_free(a);
        st_tree_free(b);
        st_tree_free(c);
        st_tree_free(ab);
        st_tree_free(abc);
        st_tree_free(bc);
        st_tree_free(a_bc);
        st_tree_free(cab);
        st_tree_free(ba);
        st_tree_free(aa);
        if (th_failures)
            return;
    }
}

TEST(encode_decode_round_trip)
{
    for (int it = 0; it < 300; it++) {
        st_tree_t *t = random_tree();
        REQUIRE(t);
        uint8_t *b;
        size_t l;
        REQUIRE(st_tree_encode(t, &b, &l) == 0);
        char err[256];
        st_tree_t *d = st_tree_decode(b, l, err, sizeof err);
        CHECK(d != NULL);
        CHECK(d && st_tree_equal(t, d));
        CHECK_UINT(st_tree_size(d), st_tree_size(t));
        st_tree_free(d);
        free(b);
        st_tree_free(t);
    }
}

/* Every truncation is refused with a message; random damage is refused or
 * decodes to a tree that encodes back to the same bytes; never a crash. */
TEST(decoder_against_damage)
{
    st_tree_t *t = demo();
    uint8_t *b;
    size_t l;
    REQUIRE(t && st_tree_encode(t, &b, &l) == 0);
    char err[256];
    for (size_t n = 0; n < l; n++) {
        err[0] = 0;
        st_tree_t *d = st_tree_decode(b, n, err, sizeof err);
        CHECK(d == NULL);
        CHECK(strncmp(err, "at byte ", 8) == 0);
        st_tree_free(d);
    }
    uint8_t *x = malloc(l + 1);
    REQUIRE(x);
    int accepted = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(x, b, l);
        int flips = 1 + (int)rnd(3);
        for (int k = 0; k < flips; k++)
            x[rnd((uint32_t)l)] ^= (uint8_t)(1u << rnd(8));
        st_tree_t *d = st_tree_decode(x, l, err, sizeof err);
        if (d) {
            accepted++;
            uint8_t *y;
            size_t ly;
            CHECK(st_tree_encode(d, &y, &ly) == 0);
            CHECK(ly == l && memcmp(x, y, l) == 0);
            free(y);
            st_tree_free(d);
        }
    }
    CHECK(accepted < 20000);
    /* Trailing bytes. */
    memcpy(x, b, l);
    x[l] = 0;
    CHECK(st_tree_decode(x, l + 1, err, sizeof err) == NULL);
    CHECK(strstr(err, "1 bytes after the tree") != NULL);
    free(x);
    free(b);
    st_tree_free(t);
}

/* Hand-made bad trees: each refused with the reason. */
static uint8_t *enc(size_t *len, const uint32_t *w, size_t nw, const char *frames)
{
    /* w: words; a word 0xFFFFFFF0 + k means "frame k of frames (| separated)". */
    uint8_t *b = malloc(4 + nw * 4 + 256);
    size_t o = 4;
    memcpy(b, "STP1", 4);
    for (size_t i = 0; i < nw; i++) {
        uint32_t v = w[i];
        if (v >= 0xFFFFFFF0u) {
            const char *f = frames;
            for (uint32_t k = v - 0xFFFFFFF0u; k > 0; k--)
                f = strchr(f, '|') + 1;
            size_t fl = strcspn(f, "|");
            uint32_t L = (uint32_t)fl;
            for (int k = 0; k < 4; k++)
                b[o++] = (uint8_t)(L >> (8 * k));
            memcpy(b + o, f, fl);
            o += fl;
            continue;
        }
        for (int k = 0; k < 4; k++)
            b[o++] = (uint8_t)(v >> (8 * k));
    }
    *len = o;
    return b;
}

TEST(decoder_names_what_is_wrong)
{
    struct { uint32_t w[24]; size_t nw; const char *frames, *says; } cases[] = {
        /* root: no frame, 1 range 5-3 */
        { { 0, 1, 5, 3, 0 }, 5, "", "runs backwards" },
        { { 0, 2, 1, 3, 4, 6, 0 }, 7, "", "overlaps or touches" },
        /* child's set 0-9 not within root's 0-3 */
        { { 0, 1, 0, 3, 1, 0xFFFFFFF0u, 1, 0, 9, 0 }, 10, "main", "not all in its caller's" },
        /* siblings out of order */
        { { 0, 1, 0, 3, 2, 0xFFFFFFF0u, 1, 0, 0, 0, 0xFFFFFFF1u, 1, 1, 1, 0 }, 15, "m|a",
          "out of order" },
        /* a root with a frame */
        { { 0xFFFFFFF0u, 0, 0 }, 3, "x", "the root has a frame" },
        /* an empty child frame */
        { { 0, 1, 0, 3, 1, 0, 0, 0 }, 8, "", "a frame of 0 bytes" },
        /* too many ranges for the bytes left */
        { { 0, 1000, 0 }, 3, "", "more than the" },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t len;
        uint8_t *b = enc(&len, cases[c].w, cases[c].nw, cases[c].frames);
        char err[256] = "";
        st_tree_t *d = st_tree_decode(b, len, err, sizeof err);
        CHECK(d == NULL);
        if (!strstr(err, cases[c].says))
            th_fail(__FILE__, __LINE__, "case %zu: \"%s\" lacks \"%s\"", c, err, cases[c].says);
        st_tree_free(d);
        free(b);
    }
    char err[64];
    CHECK(st_tree_decode((const uint8_t *)"XXXX", 4, err, sizeof err) == NULL);
    CHECK(strstr(err, "not a tbon_stat tree") != NULL);
}

/* ---- the filter ---- */

static tbon_packet_t *trees_packet(const st_tree_t *t2, const st_tree_t *t3)
{
    uint8_t *b2, *b3;
    size_t l2, l3;
    if (st_tree_encode(t2, &b2, &l2) || st_tree_encode(t3, &b3, &l3))
        return NULL;
    tbon_packet_t *p = tbon_packet_new(100, "%auc %auc", b2, l2, b3, l3);
    free(b2);
    free(b3);
    return p;
}

static st_tree_t *tree_of(tbon_packet_t *p, int which)
{
    uint8_t *b[2];
    size_t l[2];
    if (tbon_packet_unpack(p, "%auc %auc", &b[0], &l[0], &b[1], &l[1]) != 0)
        return NULL;
    st_tree_t *t = st_tree_decode(b[which], l[which], NULL, 0);
    free(b[0]);
    free(b[1]);
    return t;
}

TEST(filter_merges_keeps_state_and_refuses_bad_input)
{
    st_tree_t *a = st_tree_new(), *b = st_tree_new(), *want = st_tree_new();
    REQUIRE(a && b && want);
    REQUIRE(st_tree_add(a, A, 5, 0) == 0 && st_tree_add(b, C, 4, 1) == 0);
    REQUIRE(st_tree_merge(want, a) == 0 && st_tree_merge(want, b) == 0);
    tbon_packet_t *in[2] = { trees_packet(a, a), trees_packet(b, b) };
    REQUIRE(in[0] && in[1]);
    tbon_packet_list_t out = { 0 };
    void *state = NULL;
    tbon_filter_ctx_t ctx = { 0 };
    CHECK_INT(stat_merge(in, 2, &out, &state, &ctx), 0);
    CHECK_UINT(out.n, 1);
    st_tree_t *got = out.n ? tree_of(out.v[0], 1) : NULL;
    CHECK(got && st_tree_equal(got, want));
    st_tree_free(got);
    /* The state is the union so far; a wave with an input seen before
     * changes nothing (idempotent). */
    tbon_packet_t *st = stat_merge_get_FilterState(&state, 1);
    REQUIRE(st);
    tbon_packet_list_t out2 = { 0 };
    CHECK_INT(stat_merge(&st, 1, &out2, &state, &ctx), 0);
    got = out2.n ? tree_of(out2.v[0], 0) : NULL;
    CHECK(got && st_tree_equal(got, want));
    st_tree_free(got);
    /* A damaged input fails the wave and leaves the state alone. */
    uint8_t junk[] = { 'S', 'T', 'P', '1', 9, 9 };
    tbon_packet_t *bad[2] = { in[0], tbon_packet_new(100, "%auc %auc", junk, sizeof junk, junk,
                                                     sizeof junk) };
    tbon_packet_list_t out3 = { 0 };
    CHECK_INT(stat_merge(bad, 2, &out3, &state, &ctx), TBON_EFORMAT);
    tbon_packet_t *bad2 = tbon_packet_new(100, "%d", 7);
    CHECK_INT(stat_merge(&bad2, 1, &out3, &state, &ctx), TBON_EFORMAT);
    tbon_packet_t *st2 = stat_merge_get_FilterState(&state, 1);
    got = st2 ? tree_of(st2, 1) : NULL;
    CHECK(got && st_tree_equal(got, want));
    st_tree_free(got);
    tb_plist_free(&out);
    tb_plist_free(&out2);
    tb_plist_free(&out3);
    tbon_packet_unref(in[0]);
    tbon_packet_unref(in[1]);
    tbon_packet_unref(bad[1]);
    tbon_packet_unref(bad2);
    tbon_packet_unref(st);
    tbon_packet_unref(st2);
    stat_merge_free_state(state);
    st_tree_free(a);
    st_tree_free(b);
    st_tree_free(want);
}
