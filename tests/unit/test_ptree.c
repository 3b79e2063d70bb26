/* test_ptree.c - tbon_stat's call-prefix trees (stat/st_ptree.h): task sets,
 * building and merging (with randomized checks of associativity,
 * commutativity and idempotence against trees built from all the samples),
 * the binary form and its decoder on truncated, bit-flipped and hand-made
 * hostile inputs, paths, labels and the DOT, JSON, text and class outputs */
#include "../harness.h"
#include "../../stat/st_ptree.h"
#include "../../stat/st_view.h"

#include <tbon/common.h>
#include <jansson.h>

#include <stdlib.h>

/* ---- helpers ---- */

/* Add a stack given as "main;foo;bar" (outermost first; "" is no frame). */
static int addp(st_tree_t *t, uint32_t task, const char *path)
{
    const char *frames[64];
    char buf[1024];
    size_t n = 0;
    snprintf(buf, sizeof buf, "%s", path);
    for (char *s = buf, *e; *s && n < 64; s = e + 1) {
        frames[n++] = s;
        if (!(e = strchr(s, ';')))
            break;
        *e = '\0';
    }
    return st_tree_add(t, frames, n, task);
}

/* What a writer prints, as a malloc'ed string (the caller frees). */
typedef int (*writer_fn)(const st_tree_t *, FILE *);
static char *out_of(const st_tree_t *t, writer_fn w, int *rc)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f)
        return NULL;
    int r = w(t, f);
    if (rc)
        *rc = r;
    fclose(f);
    return s;
}

static int write_dot_t(const st_tree_t *t, FILE *f)
{
    return st_tree_write_dot(t, f, "t");
}

static char *enc(const st_tree_t *t, size_t *len)
{
    uint8_t *b = NULL;
    if (st_tree_encode(t, &b, len) != 0)
        return NULL;
    return (char *)b;
}

/* 1 if a and b are equal trees with identical encodings. */
static int same(const st_tree_t *a, const st_tree_t *b)
{
    size_t la, lb;
    char *ea = enc(a, &la), *eb = enc(b, &lb);
    int ok = ea && eb && la == lb && memcmp(ea, eb, la) == 0 && st_tree_equal(a, b) &&
             st_tree_size(a) == st_tree_size(b);
    free(ea);
    free(eb);
    return ok;
}

static st_tree_t *copy(const st_tree_t *t)
{
    st_tree_t *c = st_tree_new();
    if (c && st_tree_merge(c, t) != 0) {
        st_tree_free(c);
        return NULL;
    }
    return c;
}

/* The known tree of the output tests: 8 tasks. */
static st_tree_t *known_tree(void)
{
    st_tree_t *t = st_tree_new();
    if (!t)
        return NULL;
    for (uint32_t i = 0; i < 3; i++)
        addp(t, i, "_start;main;MPI_Barrier;poll");
    addp(t, 7, "_start;main;MPI_Barrier;poll");
    addp(t, 3, "_start;main;compute");
    addp(t, 4, "_start;main;compute");
    addp(t, 5, "_start;main;compute;sqrt");
    addp(t, 6, "_start;main");
    return t;
}

static const char *tasks_str(const st_tree_t *t)
{
    static char buf[256];
    st_range_t *r;
    size_t n = st_tree_tasks(t, &r, NULL);
    st_tree_label(r, n, buf, sizeof buf);
    free(r);
    return buf;
}

/* ---- task sets and building ---- */

TEST(task_sets_coalesce_in_any_order)
{
    st_tree_t *t = st_tree_new();
    REQUIRE(t);
    uint32_t tasks[] = { 5, 3, 10, 4, 0, 2, 1, UINT32_MAX, 12, UINT32_MAX - 1, 11, 3, 7 };
    for (size_t i = 0; i < sizeof tasks / sizeof *tasks; i++)
        CHECK_INT(st_tree_add(t, NULL, 0, tasks[i]), 0);
    st_range_t *r = NULL;
    uint64_t count = 0;
    size_t n = st_tree_tasks(t, &r, &count);
    REQUIRE(n == 4 && r);
    CHECK(r[0].lo == 0 && r[0].hi == 5);
    CHECK(r[1].lo == 7 && r[1].hi == 7);
    CHECK(r[2].lo == 10 && r[2].hi == 12);
    CHECK(r[3].lo == UINT32_MAX - 1 && r[3].hi == UINT32_MAX);
    CHECK_UINT(count, 12);
    free(r);
    CHECK_STR(tasks_str(t), "12:[0-5,7,10-12,4294967294-4294967295]");
    /* 6 closes the gap between two ranges. */
    CHECK_INT(st_tree_add(t, NULL, 0, 6), 0);
    CHECK_STR(tasks_str(t), "13:[0-7,10-12,4294967294-4294967295]");
    CHECK_UINT(st_tree_size(t), 1);
    st_tree_free(t);

    /* An empty tree: no ranges, count 0. */
    t = st_tree_new();
    REQUIRE(t);
    r = (st_range_t *)1;
    CHECK_UINT(st_tree_tasks(t, &r, &count), 0);
    CHECK(r == NULL && count == 0);
    st_tree_free(t);
    st_tree_free(NULL);
}

TEST(add_builds_sorted_prefix_tree)
{
    st_tree_t *t = known_tree();
    REQUIRE(t);
    CHECK_UINT(st_tree_size(t), 7);
    char *s = out_of(t, st_tree_write_text, NULL);
    CHECK_STR(s, "/  8:[0-7]\n"
                 "  _start  8:[0-7]\n"
                 "    main  8:[0-7]\n"
                 "      MPI_Barrier  4:[0-2,7]\n"
                 "        poll  4:[0-2,7]\n"
                 "      compute  3:[3-5]\n"
                 "        sqrt  1:[5]\n");
    free(s);

    /* The same samples in reverse order give the same tree and bytes. */
    st_tree_t *u = st_tree_new();
    REQUIRE(u);
    addp(u, 6, "_start;main");
    addp(u, 5, "_start;main;compute;sqrt");
    addp(u, 4, "_start;main;compute");
    addp(u, 3, "_start;main;compute");
    addp(u, 7, "_start;main;MPI_Barrier;poll");
    for (uint32_t i = 3; i-- > 0;)
        addp(u, i, "_start;main;MPI_Barrier;poll");
    CHECK(same(t, u));
    addp(u, 6, "_start;main");   /* again: nothing changes */
    CHECK(same(t, u));
    addp(u, 8, "_start");
    CHECK(!st_tree_equal(t, u));
    st_tree_free(t);
    st_tree_free(u);
}

TEST(add_refuses_bad_stacks_and_changes_nothing)
{
    st_tree_t *t = known_tree(), *ref = known_tree();
    REQUIRE(t && ref);
    const char *withnull[] = { "main", NULL };
    CHECK_INT(st_tree_add(t, withnull, 2, 9), TBON_EINVAL);
    CHECK_INT(st_tree_add(t, NULL, 1, 9), TBON_EINVAL);
    CHECK_INT(st_tree_add(NULL, NULL, 0, 9), TBON_EINVAL);

    const char **deep = malloc((ST_MAX_DEPTH + 1) * sizeof *deep);
    REQUIRE(deep);
    for (size_t i = 0; i <= ST_MAX_DEPTH; i++)
        deep[i] = "f";
    CHECK_INT(st_tree_add(t, deep, ST_MAX_DEPTH + 1, 9), TBON_EINVAL);

    char *longf = malloc(ST_MAX_FRAME + 2);
    REQUIRE(longf);
    memset(longf, 'x', ST_MAX_FRAME + 1);
    longf[ST_MAX_FRAME + 1] = '\0';
    const char *lf[] = { "main", longf };
    CHECK_INT(st_tree_add(t, lf, 2, 9), TBON_EINVAL);
    CHECK(same(t, ref));

    /* At the limits it works, and the result encodes and decodes. */
    longf[ST_MAX_FRAME] = '\0';
    CHECK_INT(st_tree_add(t, lf, 2, 9), 0);
    CHECK_INT(st_tree_add(t, deep, ST_MAX_DEPTH, 10), 0);
    CHECK_UINT(st_tree_size(t), 7 + 2 + ST_MAX_DEPTH);   /* main, longf; f... */
    size_t len;
    char err[200];
    char *b = enc(t, &len);
    REQUIRE(b);
    st_tree_t *d = st_tree_decode((uint8_t *)b, len, err, sizeof err);
    if (!d)
        fprintf(stderr, "    decode: %s\n", err);
    REQUIRE(d);
    CHECK(same(t, d));
    const char **path;
    CHECK_UINT(st_tree_path(d, 10, &path), ST_MAX_DEPTH);
    free(path);
    free(b);
    free(deep);
    free(longf);
    st_tree_free(d);
    st_tree_free(t);
    st_tree_free(ref);
}

/* ---- labels and paths ---- */

TEST(labels)
{
    char buf[64];
    st_range_t one = { 5, 5 };
    st_range_t four[] = { { 0, 2 }, { 7, 7 } };
    st_range_t all = { 0, UINT32_MAX };

    CHECK_UINT(st_tree_label(&one, 1, buf, sizeof buf), 5);
    CHECK_STR(buf, "1:[5]");
    CHECK_UINT(st_tree_label(four, 2, buf, sizeof buf), 9);
    CHECK_STR(buf, "4:[0-2,7]");
    CHECK_UINT(st_tree_label(NULL, 0, buf, sizeof buf), 4);
    CHECK_STR(buf, "0:[]");
    st_tree_label(&all, 1, buf, sizeof buf);
    CHECK_STR(buf, "4294967296:[0-4294967295]");

    /* As snprintf: truncated with a NUL, the needed length returned. */
    memset(buf, '#', sizeof buf);
    CHECK_UINT(st_tree_label(four, 2, buf, 5), 9);
    CHECK_STR(buf, "4:[0");
    CHECK_UINT(st_tree_label(four, 2, NULL, 0), 9);
    buf[0] = '#';
    CHECK_UINT(st_tree_label(four, 2, buf, 1), 9);
    CHECK(buf[0] == '\0');
}

TEST(path_is_the_deepest_then_first_in_frame_order)
{
    st_tree_t *t = known_tree();
    REQUIRE(t);
    const char **p = NULL;
    REQUIRE(st_tree_path(t, 5, &p) == 4);
    CHECK_STR(p[0], "_start");
    CHECK_STR(p[1], "main");
    CHECK_STR(p[2], "compute");
    CHECK_STR(p[3], "sqrt");
    free(p);
    REQUIRE(st_tree_path(t, 7, &p) == 4);
    CHECK_STR(p[2], "MPI_Barrier");
    CHECK_STR(p[3], "poll");
    free(p);
    REQUIRE(st_tree_path(t, 6, &p) == 2);
    CHECK_STR(p[1], "main");
    free(p);
    p = (const char **)1;
    CHECK_UINT(st_tree_path(t, 9, &p), 0);   /* absent */
    CHECK(p == NULL);
    addp(t, 9, "");
    CHECK_UINT(st_tree_path(t, 9, &p), 0);   /* in the root only */
    CHECK(p == NULL);

    /* Threads: two paths of one task. */
    addp(t, 20, "_start;main;b;c");
    addp(t, 20, "_start;main;a;d");
    addp(t, 20, "_start;main;a");
    REQUIRE(st_tree_path(t, 20, &p) == 4);
    CHECK_STR(p[2], "a");
    CHECK_STR(p[3], "d");
    free(p);
    addp(t, 20, "_start;main;b;c;e");
    REQUIRE(st_tree_path(t, 20, &p) == 5);
    CHECK_STR(p[2], "b");
    CHECK_STR(p[4], "e");
    free(p);
    st_tree_free(t);
}

/* ---- merging ---- */

TEST(merge_basics)
{
    st_tree_t *a = st_tree_new(), *b = st_tree_new(), *all = known_tree();
    REQUIRE(a && b && all);
    /* The known tree's samples split in two halves. */
    for (uint32_t i = 0; i < 3; i++)
        addp(i % 2 ? a : b, i, "_start;main;MPI_Barrier;poll");
    addp(a, 7, "_start;main;MPI_Barrier;poll");
    addp(b, 3, "_start;main;compute");
    addp(a, 4, "_start;main;compute");
    addp(b, 5, "_start;main;compute;sqrt");
    addp(a, 6, "_start;main");
    CHECK(!st_tree_equal(a, all));
    CHECK_INT(st_tree_merge(a, b), 0);
    CHECK(same(a, all));
    CHECK_INT(st_tree_merge(a, a), 0);
    CHECK_INT(st_tree_merge(a, all), 0);
    CHECK(same(a, all));
    CHECK_INT(st_tree_merge(NULL, a), TBON_EINVAL);
    CHECK_INT(st_tree_merge(a, NULL), TBON_EINVAL);

    /* Into an empty tree: a copy; an empty tree into one: no change. */
    st_tree_t *e = st_tree_new();
    REQUIRE(e);
    CHECK_INT(st_tree_merge(a, e), 0);
    CHECK(same(a, all));
    CHECK_INT(st_tree_merge(e, a), 0);
    CHECK(same(e, all));
    st_tree_free(a);
    st_tree_free(b);
    st_tree_free(e);
    st_tree_free(all);
}

/* Random samples over a small alphabet, so that paths share prefixes. */
struct sample {
    uint32_t task;
    size_t n;
    const char *f[7];
};

static const char *const alphabet[] = {
    "_start", "main", "MPI_Barrier", "poll", "a", "b", "ab", "", "x\"y\\z", "caf\xc3\xa9",
};

static size_t gen(uint64_t *rs, struct sample *s, size_t max)
{
    size_t n = th_rand(rs) % (max + 1);
    /* Tasks mostly small (ranges form), a few near the top of uint32. */
    uint32_t span = th_rand(rs) % 2 ? 48 : 4096;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = th_rand(rs);
        s[i].task = x % 16 == 0 ? UINT32_MAX - (uint32_t)(x >> 8) % 4 : (uint32_t)(x >> 8) % span;
        s[i].n = th_rand(rs) % 7;
        for (size_t k = 0; k < s[i].n; k++)
            s[i].f[k] = alphabet[th_rand(rs) % (k < 2 ? 3 : 10)];
    }
    return n;
}

static st_tree_t *build(const struct sample *s, size_t n, int reverse)
{
    st_tree_t *t = st_tree_new();
    for (size_t i = 0; t && i < n; i++) {
        const struct sample *x = &s[reverse ? n - 1 - i : i];
        if (st_tree_add(t, x->f, x->n, x->task) != 0) {
            st_tree_free(t);
            return NULL;
        }
    }
    return t;
}

static st_tree_t *merged(const st_tree_t *a, const st_tree_t *b)
{
    st_tree_t *c = copy(a);
    if (c && st_tree_merge(c, b) != 0) {
        st_tree_free(c);
        return NULL;
    }
    return c;
}

TEST(merge_properties_random)
{
    uint64_t rs = 0x5eed5eedULL;
    struct sample s[3 * 60];
    for (int iter = 0; iter < 300; iter++) {
        size_t na = gen(&rs, s, 60);
        size_t nb = gen(&rs, s + na, 60);
        size_t nc = gen(&rs, s + na + nb, 60);
        st_tree_t *a = build(s, na, 0), *b = build(s + na, nb, 0),
                  *c = build(s + na + nb, nc, 0);
        st_tree_t *ab = merged(a, b), *ba = merged(b, a);
        st_tree_t *ab_c = ab ? merged(ab, c) : NULL, *bc = merged(b, c);
        st_tree_t *a_bc = bc ? merged(a, bc) : NULL, *aa = merged(a, a);
        st_tree_t *ref_ab = build(s, na + nb, 1), *ref_abc = build(s, na + nb + nc, 0);
        st_tree_t *abb = ab ? merged(ab, b) : NULL, *ar = build(s, na, 1);
        REQUIRE(a && b && c && ab && ba && ab_c && bc && a_bc && aa && ref_ab && ref_abc &&
                abb && ar);

        CHECK(same(ab, ba));             /* commutative */
        CHECK(same(ab_c, a_bc));         /* associative */
        CHECK(same(aa, a));              /* idempotent */
        CHECK(same(abb, ab));
        CHECK(same(ab, ref_ab));         /* = the tree of all the samples */
        CHECK(same(ab_c, ref_abc));
        CHECK(same(ar, a));              /* insertion order does not matter */
        if (th_failures) {
            fprintf(stderr, "    iteration %d\n", iter);
            iter = 1 << 30;
        }
        st_tree_t *all[] = { a, b, c, ab, ba, ab_c, bc, a_bc, aa, ref_ab, ref_abc, abb, ar };
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            st_tree_free(all[i]);
    }
}

/* ---- the binary form ---- */

/* decode(encode(t)) is t, and encoding it again gives the same bytes. */
static void check_round_trip(const st_tree_t *t)
{
    size_t len, len2;
    char err[200] = "";
    char *b = enc(t, &len);
    REQUIRE(b);
    st_tree_t *d = st_tree_decode((const uint8_t *)b, len, err, sizeof err);
    if (!d)
        fprintf(stderr, "    decode: %s\n", err);
    REQUIRE(d);
    CHECK(st_tree_equal(t, d));
    CHECK_UINT(st_tree_size(d), st_tree_size(t));
    char *b2 = enc(d, &len2);
    CHECK(b2 && len2 == len && memcmp(b, b2, len) == 0);
    free(b);
    free(b2);
    st_tree_free(d);
}

TEST(encode_decode_round_trip)
{
    st_tree_t *t = st_tree_new();
    REQUIRE(t);
    check_round_trip(t);   /* empty */
    size_t len;
    char *b = enc(t, &len);
    REQUIRE(b);
    CHECK_UINT(len, 7);
    CHECK_MEM(b, "STPT\x01\x00\x00", 7);
    free(b);
    st_tree_free(t);

    t = known_tree();
    REQUIRE(t);
    check_round_trip(t);
    /* 1,024 tasks in one call path cost one range per node. */
    for (uint32_t i = 0; i < 1024; i++)
        addp(t, i, "_start;main;MPI_Barrier;poll");
    b = enc(t, &len);
    REQUIRE(b);
    CHECK(len < 100);
    free(b);
    check_round_trip(t);
    st_tree_free(t);

    uint64_t rs = 77;
    struct sample s[200];
    for (int i = 0; i < 100; i++) {
        t = build(s, gen(&rs, s, 200), 0);
        REQUIRE(t);
        check_round_trip(t);
        st_tree_free(t);
    }
}

/* A tree whose encoding has a bit of everything, for the damage tests. */
static char *damage_sample(size_t *len)
{
    uint64_t rs = 4242;
    struct sample s[40];
    st_tree_t *t = build(s, gen(&rs, s, 40), 0);
    if (!t)
        return NULL;
    addp(t, 300, "_start;main;MPI_Barrier;poll");
    addp(t, 70000, "_start;main;a");
    char *b = enc(t, len);
    st_tree_free(t);
    return b;
}

/* Decode buf: either a refusal with an "at byte N: ..." message, or a tree
 * whose encoding is exactly buf (every accepted input is canonical). */
static int decode_checked(const uint8_t *buf, size_t len)
{
    char err[256];
    memset(err, 0, sizeof err);
    st_tree_t *d = st_tree_decode(buf, len, err, sizeof err);
    if (!d) {
        if (strncmp(err, "at byte ", 8) != 0) {
            fprintf(stderr, "    bad message \"%s\"\n", err);
            return -1;
        }
        return 0;
    }
    size_t l2;
    char *b2 = enc(d, &l2);
    int ok = b2 && l2 == len && memcmp(b2, buf, len) == 0;
    if (ok) {
        st_tree_t *c = copy(d);
        ok = c && same(c, d);
        st_tree_free(c);
    }
    free(b2);
    st_tree_free(d);
    return ok ? 1 : -1;
}

TEST(decoder_refuses_every_truncation)
{
    size_t len;
    char *b = damage_sample(&len);
    REQUIRE(b && len > 100);
    for (size_t n = 0; n < len; n++) {
        /* A copy of exactly n bytes, so that ASan sees any over-read. */
        uint8_t *p = malloc(n ? n : 1);
        REQUIRE(p);
        memcpy(p, b, n);
        int r = decode_checked(n ? p : NULL, n);
        if (r != 0)
            th_fail(__FILE__, __LINE__, "length %zu of %zu: %s", n, len,
                    r > 0 ? "accepted" : "bad result");
        free(p);
    }
    CHECK_INT(decode_checked((const uint8_t *)b, len), 1);
    /* Trailing bytes. */
    char *p = malloc(len + 1);
    REQUIRE(p);
    memcpy(p, b, len);
    p[len] = 0;
    char err[128];
    CHECK(st_tree_decode((uint8_t *)p, len + 1, err, sizeof err) == NULL);
    char want[64];
    snprintf(want, sizeof want, "at byte %zu: 1 bytes after the end of the tree", len);
    CHECK_STR(err, want);
    free(p);
    free(b);
}

TEST(decoder_survives_bit_flips_and_garbage)
{
    size_t len;
    char *b = damage_sample(&len);
    REQUIRE(b);
    uint8_t *p = malloc(len);
    REQUIRE(p);
    size_t accepted = 0, refused = 0;
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(p, b, len);
            p[i] ^= (uint8_t)(1u << bit);
            int r = decode_checked(p, len);
            if (r < 0)
                th_fail(__FILE__, __LINE__, "flip of bit %d of byte %zu", bit, i);
            r > 0 ? accepted++ : refused++;
        }
    }
    CHECK(refused > 0);
    CHECK(accepted > 0);   /* e.g. a changed task number or frame letter */

    /* Random bytes after a valid header. */
    uint8_t g[64];
    for (uint64_t seed = 0; seed < 3000; seed++) {
        size_t n = 5 + seed % 59;
        th_fill_random(g, n, seed);
        memcpy(g, "STPT\x01", 5);
        uint8_t *q = malloc(n);
        REQUIRE(q);
        memcpy(q, g, n);
        if (decode_checked(q, n) < 0)
            th_fail(__FILE__, __LINE__, "random input, seed %llu", (unsigned long long)seed);
        free(q);
    }
    free(p);
    free(b);
}

/* A byte builder for hand-made encodings. */
struct bb {
    uint8_t *b;
    size_t n, cap;
};

static void bb_raw(struct bb *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->b = realloc(b->b, b->cap);
        if (!b->b)
            abort();
    }
    memcpy(b->b + b->n, p, n);
    b->n += n;
}

static void bb_num(struct bb *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        bb_raw(b, &c, 1);
    } while (v);
}

static void bb_frame(struct bb *b, const char *f)
{
    bb_num(b, strlen(f));
    bb_raw(b, f, strlen(f));
}

/* One range set of one range. */
static void bb_set1(struct bb *b, uint32_t lo, uint32_t hi)
{
    bb_num(b, 1);
    bb_num(b, lo);
    bb_num(b, hi - lo);
}

static void bb_header(struct bb *b)
{
    b->n = 0;
    bb_raw(b, "STPT\x01", 5);
}

/* Decoding b fails with exactly "at byte AT: MSG". */
static void expect_refusal(const struct bb *b, size_t at, const char *msg, int line)
{
    char err[256] = "", want[256];
    uint8_t *p = malloc(b->n ? b->n : 1);   /* exact size, for ASan */
    if (!p)
        abort();
    memcpy(p, b->b, b->n);
    st_tree_t *t = st_tree_decode(p, b->n, err, sizeof err);
    snprintf(want, sizeof want, "at byte %zu: %s", at, msg);
    if (t)
        th_fail(__FILE__, line, "accepted; expected \"%s\"", want);
    else if (strcmp(err, want) != 0)
        th_fail(__FILE__, line, "message \"%s\", expected \"%s\"", err, want);
    st_tree_free(t);
    free(p);
}

#define REFUSED(b, at, msg) expect_refusal((b), (at), (msg), __LINE__)

TEST(decoder_refuses_hostile_input_with_the_offset)
{
    struct bb b = { 0 };
    size_t at;

    bb_raw(&b, "STPX\x01", 5);
    REFUSED(&b, 3, "bad magic: not a tbon_stat prefix tree");
    b.n = 0;
    bb_raw(&b, "STPT\x03\x00\x00", 7);
    REFUSED(&b, 4, "version 3, this code reads versions 1 and 2");
    b.n = 3;
    REFUSED(&b, 3, "truncated header (3 bytes)");
    b.n = 4;
    REFUSED(&b, 4, "truncated header (4 bytes)");

    /* A valid two-level tree, then variations of it. */
    bb_header(&b);
    bb_set1(&b, 0, 9);
    bb_num(&b, 2);
    bb_frame(&b, "a");
    bb_set1(&b, 0, 3);
    bb_num(&b, 0);
    bb_frame(&b, "b");
    bb_set1(&b, 4, 9);
    bb_num(&b, 0);
    {
        st_tree_t *t = st_tree_decode(b.b, b.n, NULL, 0);
        REQUIRE(t);
        char *s = out_of(t, st_tree_write_text, NULL);
        CHECK_STR(s, "/  10:[0-9]\n  a  4:[0-3]\n  b  6:[4-9]\n");
        free(s);
        st_tree_free(t);
    }

    /* Children out of order, or twice. */
    bb_header(&b);
    bb_set1(&b, 0, 9);
    bb_num(&b, 2);
    bb_frame(&b, "b");
    bb_set1(&b, 0, 3);
    bb_num(&b, 0);
    at = b.n;
    bb_frame(&b, "a");
    bb_set1(&b, 4, 9);
    bb_num(&b, 0);
    REFUSED(&b, at, "sibling frames not in strictly increasing order");
    b.b[at + 1] = 'b';
    REFUSED(&b, at, "sibling frames not in strictly increasing order");

    /* A child with tasks its parent lacks. */
    bb_header(&b);
    bb_set1(&b, 0, 9);
    bb_num(&b, 1);
    bb_frame(&b, "a");
    at = b.n;
    bb_set1(&b, 5, 10);
    bb_num(&b, 0);
    REFUSED(&b, at, "the tasks of a node are not a subset of its parent's");

    /* A child with no tasks; an empty root with a child. */
    bb_header(&b);
    bb_set1(&b, 0, 9);
    bb_num(&b, 2);
    bb_frame(&b, "a");
    at = b.n;
    bb_num(&b, 0);
    bb_num(&b, 0);
    bb_frame(&b, "b");
    bb_set1(&b, 4, 9);
    bb_num(&b, 0);
    REFUSED(&b, at, "a node below the root with no tasks");
    bb_header(&b);
    bb_num(&b, 0);
    bb_num(&b, 1);
    bb_frame(&b, "a");
    at = b.n;
    bb_set1(&b, 1, 1);
    bb_num(&b, 0);
    REFUSED(&b, at, "the tasks of a node are not a subset of its parent's");

    /* Ranges past the last task: by length, and by gap. */
    bb_header(&b);
    bb_num(&b, 1);
    at = b.n;
    bb_num(&b, UINT32_MAX - 1);
    bb_num(&b, 2);
    bb_num(&b, 0);
    REFUSED(&b, at, "range 4294967294-4294967296 goes past task 4294967295");
    bb_header(&b);
    bb_num(&b, 2);
    bb_num(&b, 0);
    bb_num(&b, UINT32_MAX - 3);   /* [0, 2^32-4] */
    at = b.n;
    bb_num(&b, 2);                /* starts at 2^32-4 + 2 + 2 */
    bb_num(&b, 0);
    bb_num(&b, 0);
    REFUSED(&b, at, "range 4294967296-4294967296 goes past task 4294967295");
    b.b[at] = 1;                  /* starts at 2^32-1: fine */
    {
        st_tree_t *t = st_tree_decode(b.b, b.n, NULL, 0);
        CHECK(t && strcmp(tasks_str(t), "4294967294:[0-4294967292,4294967295]") == 0);
        st_tree_free(t);
    }

    /* More ranges or children than the bytes left could hold. */
    bb_header(&b);
    at = b.n;
    bb_num(&b, 3);
    bb_num(&b, 0);
    bb_num(&b, 0);
    bb_num(&b, 0);
    bb_num(&b, 0);
    REFUSED(&b, at, "3 ranges but only 4 bytes left");
    bb_header(&b);
    bb_set1(&b, 0, 9);
    at = b.n;
    bb_num(&b, 1000000);
    bb_frame(&b, "a");
    bb_set1(&b, 0, 3);
    bb_num(&b, 0);
    REFUSED(&b, at, "1000000 children but only 6 bytes left");

    /* Numbers: truncated, with a superfluous zero byte, too long, too big. */
    bb_header(&b);
    bb_raw(&b, "\x81", 1);
    REFUSED(&b, 5, "range count: truncated (the data ends inside it)");
    bb_header(&b);
    bb_raw(&b, "\x81\x00\x00\x00\x00", 5);
    REFUSED(&b, 5, "range count: superfluous zero byte at the end of a number");
    bb_header(&b);
    bb_raw(&b, "\x80\x80\x80\x80\x80\x01", 6);
    REFUSED(&b, 5, "range count: a number of more than 5 bytes");
    bb_header(&b);
    bb_num(&b, 1);
    bb_num(&b, (uint64_t)UINT32_MAX + 1);
    bb_num(&b, 0);
    bb_num(&b, 0);
    REFUSED(&b, 6, "range start 4294967296 exceeds the limit 4294967295");

    /* Frames: too long for the limit, for the data, or with a NUL. */
    bb_header(&b);
    bb_set1(&b, 0, 0);
    bb_num(&b, 1);
    at = b.n;
    bb_num(&b, ST_MAX_FRAME + 1);
    for (int i = 0; i <= ST_MAX_FRAME; i++)
        bb_raw(&b, "x", 1);
    bb_set1(&b, 0, 0);
    bb_num(&b, 0);
    REFUSED(&b, at, "frame length 65536 exceeds the limit 65535");
    bb_header(&b);
    bb_set1(&b, 0, 0);
    bb_num(&b, 1);
    at = b.n;
    bb_num(&b, 10);
    bb_raw(&b, "abcd", 4);
    REFUSED(&b, at, "frame length 10 but only 4 bytes left");
    bb_header(&b);
    bb_set1(&b, 0, 0);
    bb_num(&b, 1);
    at = b.n;
    bb_num(&b, 3);
    bb_raw(&b, "a\0b", 3);
    bb_set1(&b, 0, 0);
    bb_num(&b, 0);
    REFUSED(&b, at + 2, "NUL byte inside a frame");

    /* Nesting: 4096 frames decode, 4097 do not. */
    for (int extra = 0; extra < 2; extra++) {
        bb_header(&b);
        bb_set1(&b, 0, 0);
        bb_num(&b, 1);
        for (int d = 1; d <= ST_MAX_DEPTH + extra; d++) {
            at = b.n;
            bb_frame(&b, "f");
            bb_set1(&b, 0, 0);
            bb_num(&b, d < ST_MAX_DEPTH + extra);
        }
        if (extra) {
            REFUSED(&b, at, "nodes nested deeper than 4096 frames");
        } else {
            st_tree_t *t = st_tree_decode(b.b, b.n, NULL, 0);
            CHECK(t && st_tree_size(t) == ST_MAX_DEPTH + 1);
            st_tree_free(t);
        }
    }

    /* No data at all, and a NULL err. */
    CHECK(st_tree_decode(NULL, 0, NULL, 0) == NULL);
    char err[64];
    CHECK(st_tree_decode(NULL, 0, err, sizeof err) == NULL);
    CHECK_STR(err, "at byte 0: truncated header (0 bytes)");
    CHECK(st_tree_decode(NULL, 5, err, sizeof err) == NULL);
    CHECK_STR(err, "at byte 0: no data");
    /* A short err buffer holds a truncated message. */
    CHECK(st_tree_decode((const uint8_t *)"XX", 2, err, 12) == NULL);
    CHECK_STR(err, "at byte 0: ");
    free(b.b);
}

/* ---- outputs ---- */

TEST(text_dot_json_of_a_known_tree)
{
    st_tree_t *t = known_tree();
    REQUIRE(t);
    int rc = -1;
    char *s = out_of(t, write_dot_t, &rc);
    CHECK_INT(rc, 0);
    CHECK_STR(s, "digraph \"t\" {\n"
                 "  node [shape=box];\n"
                 "  n0 [label=\"/\"];\n"
                 "  n1 [label=\"_start\"];\n"
                 "  n0 -> n1 [label=\"8:[0-7]\"];\n"
                 "  n2 [label=\"main\"];\n"
                 "  n1 -> n2 [label=\"8:[0-7]\"];\n"
                 "  n3 [label=\"MPI_Barrier\"];\n"
                 "  n2 -> n3 [label=\"4:[0-2,7]\"];\n"
                 "  n4 [label=\"poll\"];\n"
                 "  n3 -> n4 [label=\"4:[0-2,7]\"];\n"
                 "  n5 [label=\"compute\"];\n"
                 "  n2 -> n5 [label=\"3:[3-5]\"];\n"
                 "  n6 [label=\"sqrt\"];\n"
                 "  n5 -> n6 [label=\"1:[5]\"];\n"
                 "}\n");
    free(s);
    s = out_of(t, st_tree_write_json, &rc);
    CHECK_INT(rc, 0);
    CHECK_STR(s, "{\"frame\":\"/\",\"tasks\":\"[0-7]\",\"count\":8,\"children\":["
                 "{\"frame\":\"_start\",\"tasks\":\"[0-7]\",\"count\":8,\"children\":["
                 "{\"frame\":\"main\",\"tasks\":\"[0-7]\",\"count\":8,\"children\":["
                 "{\"frame\":\"MPI_Barrier\",\"tasks\":\"[0-2,7]\",\"count\":4,\"children\":["
                 "{\"frame\":\"poll\",\"tasks\":\"[0-2,7]\",\"count\":4,\"children\":[]}]},"
                 "{\"frame\":\"compute\",\"tasks\":\"[3-5]\",\"count\":3,\"children\":["
                 "{\"frame\":\"sqrt\",\"tasks\":\"[5]\",\"count\":1,\"children\":[]}]}]}]}]}\n");
    free(s);
    st_tree_free(t);

    /* The empty tree. */
    t = st_tree_new();
    REQUIRE(t);
    s = out_of(t, st_tree_write_text, NULL);
    CHECK_STR(s, "/  0:[]\n");
    free(s);
    s = out_of(t, st_tree_write_json, NULL);
    CHECK_STR(s, "{\"frame\":\"/\",\"tasks\":\"[]\",\"count\":0,\"children\":[]}\n");
    free(s);
    s = out_of(t, st_tree_write_classes, &rc);
    CHECK_STR(s, "");
    CHECK_INT(rc, 0);
    free(s);
    st_tree_free(t);
}

/* Folded stacks: a line per node where tasks end, with how many. */
TEST(folded_stacks_of_known_trees)
{
    st_tree_t *t = known_tree();
    REQUIRE(t);
    int rc = -1;
    char *s = out_of(t, st_tree_write_folded, &rc);
    CHECK_INT(rc, 0);
    CHECK_STR(s, "_start;main 1\n"                       /* task 6 */
                 "_start;main;MPI_Barrier;poll 4\n"
                 "_start;main;compute 2\n"               /* 3 and 4; 5 goes on */
                 "_start;main;compute;sqrt 1\n");
    free(s);
    st_tree_free(t);
    /* Threads: a task ends once per distinct path, and not above a node
     * where another of its threads goes on; ';' in a frame is escaped. */
    t = st_tree_new();
    REQUIRE(t);
    addp(t, 0, "a;b");
    addp(t, 0, "a;c");
    addp(t, 1, "a;c");
    addp(t, 2, "a");
    const char *odd[] = { "x;y", "z" };
    REQUIRE(st_tree_add(t, odd, 2, 3) == 0);
    s = out_of(t, st_tree_write_folded, NULL);
    CHECK_STR(s, "a 1\n"
                 "a;b 1\n"
                 "a;c 2\n"
                 "x\\x3by;z 1\n");
    free(s);
    st_tree_free(t);
    t = st_tree_new();
    REQUIRE(t);
    s = out_of(t, st_tree_write_folded, &rc);
    CHECK_STR(s, "");
    CHECK_INT(rc, 0);
    free(s);
    CHECK_INT(st_tree_write_folded(NULL, stdout), TBON_EINVAL);
    st_tree_free(t);
}

/* The folded lines of a JSON tree of one path per task: each node's count
 * less its children's, where that is not 0. */
static void folded_of_json(json_t *n, char *path, size_t len, FILE *f)
{
    json_t *kids = json_object_get(n, "children");
    long long left = json_integer_value(json_object_get(n, "count"));
    for (size_t i = 0; i < json_array_size(kids); i++)
        left -= json_integer_value(json_object_get(json_array_get(kids, i), "count"));
    if (len && left)
        fprintf(f, "%.*s %lld\n", (int)len, path, left);
    for (size_t i = 0; i < json_array_size(kids); i++) {
        json_t *k = json_array_get(kids, i);
        const char *fr = json_string_value(json_object_get(k, "frame"));
        size_t l = len + (len ? 1 : 0) + strlen(fr);
        if (l >= 4096)
            continue;
        char *p = path + len;
        if (len)
            *p++ = ';';
        memcpy(p, fr, strlen(fr));
        folded_of_json(k, path, l, f);
    }
}

/* Random trees, one path per task: the folded output says what the JSON
 * does. */
TEST(folded_agrees_with_the_json)
{
    static const char *const names[] = { "main", "poll", "wait", "MPI_Recv", "compute" };
    srand(7);
    for (int round = 0; round < 20; round++) {
        st_tree_t *t = st_tree_new();
        REQUIRE(t);
        for (uint32_t task = 0; task < 200; task++) {
            const char *st[6];
            size_t depth = 1 + (size_t)(rand() % 6);
            for (size_t i = 0; i < depth; i++)
                st[i] = names[rand() % 5];
            REQUIRE(st_tree_add(t, st, depth, task) == 0);
        }
        char *js = out_of(t, st_tree_write_json, NULL), *fo = out_of(t, st_tree_write_folded,
                                                                      NULL);
        json_error_t je;
        json_t *j = js ? json_loads(js, 0, &je) : NULL;
        REQUIRE(j && fo);
        char *want = NULL, path[4096];
        size_t wn = 0;
        FILE *f = open_memstream(&want, &wn);
        REQUIRE(f);
        folded_of_json(j, path, 0, f);
        fclose(f);
        CHECK_STR(fo, want);
        long long sum = 0;
        for (const char *l = fo; (l = strchr(l, ' ')); l++)
            sum += atoll(l + 1);
        CHECK_INT(sum, 200);
        free(want);
        free(js);
        free(fo);
        json_decref(j);
        st_tree_free(t);
    }
}

TEST(outputs_escape_frames)
{
    st_tree_t *t = st_tree_new();
    REQUIRE(t);
    const char *frames[] = { "say \"hi\"", "a\\b", "line1\nline2", "\x01", "caf\xc3\xa9",
                             "\xff", "tab\there" };
    for (uint32_t i = 0; i < 7; i++)
        REQUIRE(st_tree_add(t, &frames[i], 1, i) == 0);
    char *s = out_of(t, st_tree_write_text, NULL);
    CHECK_STR(s, "/  7:[0-6]\n"
                 "  \\x01  1:[3]\n"
                 "  a\\\\b  1:[1]\n"
                 "  caf\xc3\xa9  1:[4]\n"
                 "  line1\\nline2  1:[2]\n"
                 "  say \"hi\"  1:[0]\n"
                 "  tab\\x09here  1:[6]\n"
                 "  \\xff  1:[5]\n");
    free(s);
    s = out_of(t, st_tree_write_json, NULL);
    CHECK_STR(s, "{\"frame\":\"/\",\"tasks\":\"[0-6]\",\"count\":7,\"children\":["
                 "{\"frame\":\"\\u0001\",\"tasks\":\"[3]\",\"count\":1,\"children\":[]},"
                 "{\"frame\":\"a\\\\b\",\"tasks\":\"[1]\",\"count\":1,\"children\":[]},"
                 "{\"frame\":\"caf\xc3\xa9\",\"tasks\":\"[4]\",\"count\":1,\"children\":[]},"
                 "{\"frame\":\"line1\\nline2\",\"tasks\":\"[2]\",\"count\":1,\"children\":[]},"
                 "{\"frame\":\"say \\\"hi\\\"\",\"tasks\":\"[0]\",\"count\":1,\"children\":[]},"
                 "{\"frame\":\"tab\\there\",\"tasks\":\"[6]\",\"count\":1,\"children\":[]},"
                 /* Not UTF-8: U+FFFD, as UTF-8 (jansson escapes only what JSON requires). */
                 "{\"frame\":\"\xef\xbf\xbd\",\"tasks\":\"[5]\",\"count\":1,\"children\":[]}]}\n");
    free(s);
    char *d = NULL;
    size_t dn = 0;
    FILE *f = open_memstream(&d, &dn);
    REQUIRE(f);
    CHECK_INT(st_tree_write_dot(t, f, "run \"1\"\n"), 0);
    fclose(f);
    CHECK(strstr(d, "digraph \"run \\\"1\\\"\\n\" {\n"));
    CHECK(strstr(d, "  n1 [label=\"\\\\x01\"];\n"));
    CHECK(strstr(d, "  n2 [label=\"a\\\\b\"];\n"));
    CHECK(strstr(d, "  n4 [label=\"line1\\nline2\"];\n"));
    CHECK(strstr(d, "  n5 [label=\"say \\\"hi\\\"\"];\n"));
    CHECK(strstr(d, "  n6 [label=\"tab\\\\x09here\"];\n"));
    CHECK(strstr(d, "  n7 [label=\"\\\\xff\"];\n"));
    free(d);
    st_tree_free(t);
}

/* The JSON reads back (jansson's parser) to the frames given, in the order
 * of the tree, with their task sets: the escaping loses nothing but the
 * byte that is not UTF-8. */
TEST(json_reads_back)
{
    st_tree_t *t = st_tree_new();
    REQUIRE(t);
    const char *frames[] = { "say \"hi\"", "a\\b", "line1\nline2", "\x01", "caf\xc3\xa9",
                             "\xff", "tab\there", "\x7f/\x1f\r" };
    enum { NF = sizeof frames / sizeof frames[0] };
    for (uint32_t i = 0; i < NF; i++)
        REQUIRE(st_tree_add(t, &frames[i], 1, i) == 0);
    char *s = out_of(t, st_tree_write_json, NULL);
    REQUIRE(s);
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    if (!root)
        th_fail(__FILE__, __LINE__, "JSON does not parse: %s at %d: %s", je.text,
                je.position, s);
    REQUIRE(root);
    CHECK_STR(json_string_value(json_object_get(root, "frame")), "/");
    CHECK_INT(json_integer_value(json_object_get(root, "count")), NF);
    json_t *kids = json_object_get(root, "children");
    REQUIRE(json_array_size(kids) == NF);
    /* Children come in frame byte order; find each frame's task by its set. */
    for (size_t k = 0; k < NF; k++) {
        json_t *c = json_array_get(kids, k);
        const char *tasks = json_string_value(json_object_get(c, "tasks"));
        unsigned task = 0;
        REQUIRE(tasks && sscanf(tasks, "[%u]", &task) == 1 && task < NF);
        const char *want = task == 5 ? "\xef\xbf\xbd" : frames[task];
        CHECK_STR(json_string_value(json_object_get(c, "frame")), want);
        CHECK_INT(json_integer_value(json_object_get(c, "count")), 1);
        CHECK_INT(json_array_size(json_object_get(c, "children")), 0);
    }
    json_decref(root);
    free(s);
    st_tree_free(t);
}

TEST(equivalence_classes)
{
    st_tree_t *t = known_tree();
    REQUIRE(t);
    int rc = -1;
    char *s = out_of(t, st_tree_write_classes, &rc);
    CHECK_INT(rc, 4);
    CHECK_STR(s, "4:[0-2,7]  rep 0  poll\n"
                 "2:[3-4]  rep 3  compute\n"
                 "1:[5]  rep 5  sqrt\n"
                 "1:[6]  rep 6  main\n");
    free(s);
    st_tree_free(t);

    /* Threads: a task ending at two nodes is in the class of both. A task
     * with an empty stack ends at the root. */
    t = st_tree_new();
    REQUIRE(t);
    addp(t, 0, "main;a");
    addp(t, 0, "main;b");
    addp(t, 1, "main;a");
    addp(t, 2, "main;b");
    addp(t, 3, "main;b");
    addp(t, 3, "main;a");
    addp(t, 4, "");
    addp(t, 5, "main;a");
    addp(t, 6, "main;a");
    /* A thread stopped in main itself, while another is in a: the sets
     * cannot tell (main holds 6 because a does), so 6 ends at a only. */
    addp(t, 6, "main");
    s = out_of(t, st_tree_write_classes, &rc);
    CHECK_INT(rc, 4);
    CHECK_STR(s, "2:[0,3]  rep 0  a | b\n"
                 "3:[1,5-6]  rep 1  a\n"
                 "1:[2]  rep 2  b\n"
                 "1:[4]  rep 4  /\n");
    free(s);
    st_tree_free(t);
}

/* The key of a task's class computed from the samples alone: its sampled
 * paths that are no proper prefix of another of its paths, sorted. */
static int path_prefix(const struct sample *a, const struct sample *b)
{
    if (a->n >= b->n)
        return 0;
    for (size_t k = 0; k < a->n; k++)
        if (strcmp(a->f[k], b->f[k]) != 0)
            return 0;
    return 1;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *ref_key(const struct sample *s, size_t n, uint32_t task)
{
    char *paths[120];
    size_t np = 0, len = 1;
    for (size_t i = 0; i < n; i++) {
        if (s[i].task != task)
            continue;
        int maximal = 1;
        for (size_t j = 0; j < n && maximal; j++)
            if (s[j].task == task && path_prefix(&s[i], &s[j]))
                maximal = 0;
        if (!maximal)
            continue;
        char buf[256] = "";
        for (size_t k = 0; k < s[i].n; k++) {
            strcat(buf, s[i].f[k]);
            strcat(buf, "\x1f");
        }
        paths[np++] = strdup(buf);
        len += strlen(buf) + 1;
    }
    qsort(paths, np, sizeof *paths, str_cmp);
    char *key = calloc(1, len);
    for (size_t i = 0; i < np; i++) {
        if (!i || strcmp(paths[i], paths[i - 1]) != 0) {
            strcat(key, paths[i]);
            strcat(key, "\x1e");
        }
    }
    for (size_t i = 0; i < np; i++)
        free(paths[i]);
    return key;
}

/* The frames of the JSON tree j in pre-order, into fr[*n..cap). */
static void preorder_frames(json_t *j, const char **fr, size_t *n, size_t cap)
{
    if (*n < cap)
        fr[(*n)++] = json_string_value(json_object_get(j, "frame"));
    json_t *k;
    size_t i;
    json_array_foreach(json_object_get(j, "children"), i, k)
        preorder_frames(k, fr, n, cap);
}

/* The classes as JSON (st_tree_classes_json) say what the text (out) says:
 * the same sets, counts and representatives, in the same order, and the
 * nodes "ends" numbers in the JSON tree's pre-order have the frames the
 * text names. */
static void check_classes_json(const st_tree_t *t, const char *out)
{
    json_t *cj = st_tree_classes_json(t), *tj = st_tree_json(t);
    REQUIRE(cj && tj);
    static const char *fr[8192];
    size_t nfr = 0;
    preorder_frames(tj, fr, &nfr, 8192);
    CHECK_UINT(nfr, st_tree_size(t));
    const char *l = out;
    json_t *c;
    size_t i;
    json_array_foreach(cj, i, c) {
        char want[8192];
        size_t w = (size_t)snprintf(want, sizeof want, "%lld:%s  rep %lld  ",
                                    (long long)json_integer_value(json_object_get(c, "count")),
                                    json_string_value(json_object_get(c, "tasks")),
                                    (long long)json_integer_value(json_object_get(c, "rep")));
        json_t *e;
        size_t k;
        json_array_foreach(json_object_get(c, "ends"), k, e) {
            json_int_t id = json_integer_value(e);
            REQUIRE(id >= 0 && (size_t)id < nfr);
            w += (size_t)snprintf(want + w, sizeof want - w, "%s", k ? " | " : "");
            /* the text's escapes of the generated frames (all UTF-8) */
            for (const char *p = fr[id]; *p && w + 8 < sizeof want; p++)
                w += (size_t)snprintf(want + w, sizeof want - w, *p == '\\' ? "\\\\"
                                      : (unsigned char)*p < 0x20 ? "\\x%02x" : "%c", *p);
        }
        const char *nl = strchr(l, '\n');
        REQUIRE(nl != NULL);
        if (strlen(want) != (size_t)(nl - l) || strncmp(want, l, (size_t)(nl - l)) != 0)
            th_fail(__FILE__, __LINE__, "class %zu: JSON says \"%s\", the text \"%.*s\"", i,
                    want, (int)(nl - l), l);
        l = nl + 1;
    }
    CHECK(*l == '\0');
    json_decref(cj);
    json_decref(tj);
}

TEST(classes_agree_with_a_per_task_reference)
{
    uint64_t rs = 99;
    struct sample s[120];
    for (int iter = 0; iter < 60 && !th_failures; iter++) {
        size_t n = gen(&rs, s, 120);
        st_tree_t *t = build(s, n, 0);
        REQUIRE(t);
        uint32_t tasks[120];
        char *keys[120];
        int cls[120];
        size_t nt = 0;
        for (size_t i = 0; i < n; i++) {
            size_t k = 0;
            while (k < nt && tasks[k] != s[i].task)
                k++;
            if (k == nt) {
                tasks[nt] = s[i].task;
                keys[nt] = ref_key(s, n, s[i].task);
                cls[nt++] = -1;
            }
        }
        int rc = -1;
        char *out = out_of(t, st_tree_write_classes, &rc);
        REQUIRE(out);
        /* Each line: "N:[ranges]  rep R  frames"; note each task's line. */
        int line = 0;
        for (char *l = out; *l; line++) {
            unsigned long long cnt = strtoull(l, &l, 10), seen = 0;
            uint32_t lowest = UINT32_MAX;
            REQUIRE(l[0] == ':' && l[1] == '[');
            l += 2;
            while (*l != ']') {
                uint32_t lo = (uint32_t)strtoul(l, &l, 10), hi = lo;
                if (*l == '-')
                    hi = (uint32_t)strtoul(l + 1, &l, 10);
                if (*l == ',')
                    l++;
                for (uint64_t x = lo; x <= hi; x++) {
                    size_t k = 0;
                    while (k < nt && tasks[k] != x)
                        k++;
                    REQUIRE(k < nt);
                    CHECK_INT(cls[k], -1);   /* in one class only */
                    cls[k] = line;
                    seen++;
                }
                if (lo < lowest)
                    lowest = lo;
            }
            CHECK_UINT(seen, cnt);
            REQUIRE(strncmp(l, "]  rep ", 7) == 0);
            CHECK_UINT(strtoul(l + 7, NULL, 10), lowest);
            char *e = strchr(l, '\n');
            REQUIRE(e);
            l = e + 1;
        }
        CHECK_INT(rc, line);
        /* Same class exactly when same key. */
        for (size_t a = 0; a < nt; a++) {
            CHECK(cls[a] >= 0);
            for (size_t b = a + 1; b < nt; b++)
                if ((cls[a] == cls[b]) != (strcmp(keys[a], keys[b]) == 0))
                    th_fail(__FILE__, __LINE__, "iteration %d: tasks %lu and %lu:\n%s", iter,
                            (unsigned long)tasks[a], (unsigned long)tasks[b], out);
        }
        check_classes_json(t, out);
        for (size_t k = 0; k < nt; k++)
            free(keys[k]);
        free(out);
        st_tree_free(t);
    }
}

/* ---- counts-only trees ---- */

/* a converted copy of t, of round r */
static st_tree_t *counts_of(const st_tree_t *t, uint32_t r)
{
    st_tree_t *c = copy(t);
    if (c && st_tree_to_counts(c, r) != 0) {
        st_tree_free(c);
        return NULL;
    }
    return c;
}

/* Every node of the JSON of a counts-only tree (c) has the count of the
 * full tree's node (f) and the lowest of its tasks. */
static void check_counts_json(json_t *f, json_t *c, const char *where)
{
    const char *tasks = json_string_value(json_object_get(f, "tasks"));
    REQUIRE(tasks && tasks[0] == '[');
    long long lowest = tasks[1] == ']' ? 0 : atoll(tasks + 1);
    if (json_integer_value(json_object_get(f, "count")) !=
            json_integer_value(json_object_get(c, "count")) ||
        json_integer_value(json_object_get(c, "rep")) != lowest ||
        json_object_get(c, "tasks") != NULL ||
        json_array_size(json_object_get(f, "children")) !=
            json_array_size(json_object_get(c, "children"))) {
        th_fail(__FILE__, __LINE__, "%s: node %s: full %s, counts-only %lld (rep %lld)", where,
                json_string_value(json_object_get(f, "frame")), tasks,
                (long long)json_integer_value(json_object_get(c, "count")),
                (long long)json_integer_value(json_object_get(c, "rep")));
        return;
    }
    for (size_t i = 0; i < json_array_size(json_object_get(f, "children")); i++)
        check_counts_json(json_array_get(json_object_get(f, "children"), i),
                          json_array_get(json_object_get(c, "children"), i), where);
}

/* Counts-only trees: counts and representatives are the full tree's;
 * the binary form (version 2, with its round) reads back; trees of
 * disjoint tasks add up to the counts-only tree of all; a tree whose tasks
 * are in already changes nothing; one that shares only some is refused
 * (ST_OVERLAP) with the sum unchanged; folded stacks of single-path trees
 * are the full tree's; what needs the sets says so. */
TEST(counts_only_trees)
{
    uint64_t rs = 0xc0c0;
    struct sample s[120];
    for (int iter = 0; iter < 200 && !th_failures; iter++) {
        size_t n = gen(&rs, s, 120);
        /* two disjoint halves by task: below and from a cut */
        uint32_t cut = (uint32_t)(th_rand(&rs) % 64);
        struct sample lo[120], hi[120];
        size_t nl = 0, nh = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i].task < cut)
                lo[nl++] = s[i];
            else
                hi[nh++] = s[i];
        }
        st_tree_t *all = build(s, n, 0), *a = build(lo, nl, 0), *b = build(hi, nh, 1);
        REQUIRE(all && a && b);
        st_tree_t *ca = counts_of(a, 4), *cb = counts_of(b, 4), *call = counts_of(all, 4);
        REQUIRE(ca && cb && call);
        CHECK(st_tree_is_counts(call) && !st_tree_is_counts(all));
        CHECK_UINT(st_tree_round(call), 4);
        json_t *jf = st_tree_json(all), *jc = st_tree_json(call);
        REQUIRE(jf && jc);
        check_counts_json(jf, jc, "converted");
        json_decref(jf);
        json_decref(jc);
        check_round_trip(call);
        /* disjoint: the sum is the counts-only tree of all (an empty tree
         * takes the first one's kind and round) */
        st_tree_t *sum = st_tree_new();
        REQUIRE(sum);
        CHECK_INT(st_tree_merge(sum, ca), 0);
        CHECK_INT(st_tree_merge(sum, cb), 0);
        if (nl && nh)
            CHECK(same(sum, call));
        /* all in already: nothing changes */
        CHECK_INT(st_tree_merge(sum, ca), 0);
        CHECK_INT(st_tree_merge(sum, call), 0);
        if (nl && nh)
            CHECK(same(sum, call));
        /* some in, some not: refused, unchanged */
        if (nl && nh) {
            CHECK_INT(st_tree_merge(ca, call), ST_OVERLAP);
            st_tree_t *ca2 = counts_of(a, 4);
            CHECK(ca2 && same(ca, ca2));
            st_tree_free(ca2);
        }
        /* kinds do not mix; sets are needed for adding, paths, classes */
        CHECK_INT(st_tree_merge(call, all), TBON_EINVAL);
        if (n)      /* (an empty tree takes the kind of what comes) */
            CHECK_INT(st_tree_merge(all, call), TBON_EINVAL);
        CHECK_INT(st_tree_to_counts(call, 5), TBON_EINVAL);
        const char *fr[] = { "x" };
        CHECK_INT(st_tree_add(call, fr, 1, 7), TBON_EINVAL);
        const char **path = NULL;
        CHECK_UINT(st_tree_path(call, n ? s[0].task : 0, &path), 0);
        int rc = 0;
        char *out = out_of(call, st_tree_write_classes, &rc);
        CHECK(rc < 0);
        free(out);
        st_tree_t *v[] = { all, a, b, ca, cb, call, sum };
        for (size_t i = 0; i < sizeof v / sizeof *v; i++)
            st_tree_free(v[i]);
    }
    /* folded stacks of a tree where every task has one path */
    st_tree_t *k = known_tree(), *ck = counts_of(k, 0);
    REQUIRE(k && ck);
    char *ff = out_of(k, st_tree_write_folded, NULL), *fc = out_of(ck, st_tree_write_folded, NULL);
    CHECK(ff && fc);
    if (ff && fc)
        CHECK_STR(fc, ff);
    free(ff);
    free(fc);
    char *txt = out_of(ck, st_tree_write_text, NULL);
    CHECK(txt && strstr(txt, "/  8:[0-7]\n  _start  8 (rep 0)\n") == txt);
    CHECK(txt && strstr(txt, "      compute  3 (rep 3)\n        sqrt  1 (rep 5)\n"));
    free(txt);
    st_tree_free(k);
    st_tree_free(ck);
}

/* The version-2 decoder refuses counts that cannot be, with the offset. */
TEST(decoder_refuses_bad_counts)
{
    struct bb b = { 0 };
    size_t at;
    /* root 0-9, child "a" of count C rep R, no children */
    const struct {
        uint64_t count, rep;
        const char *msg;
    } bad[] = {
        { 0, 0, "a node of 0 tasks below one of 10" },
        { 11, 0, "a node of 11 tasks below one of 10" },
        { 3, 12, "representative 12 is not one of its parent's tasks" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        b.n = 0;
        bb_raw(&b, "STPT\x02", 5);
        bb_num(&b, 3);              /* round */
        bb_set1(&b, 0, 9);
        bb_num(&b, 1);
        bb_frame(&b, "a");
        at = b.n;
        bb_num(&b, bad[i].count);
        bb_num(&b, bad[i].rep);
        bb_num(&b, 0);
        REFUSED(&b, at, bad[i].msg);
    }
    /* a grandchild below its parent's representative */
    b.n = 0;
    bb_raw(&b, "STPT\x02", 5);
    bb_num(&b, 0);
    bb_set1(&b, 0, 9);
    bb_num(&b, 1);
    bb_frame(&b, "a");
    bb_num(&b, 5);
    bb_num(&b, 4);
    bb_num(&b, 1);
    bb_frame(&b, "b");
    at = b.n;
    bb_num(&b, 2);
    bb_num(&b, 3);
    bb_num(&b, 0);
    REFUSED(&b, at, "representative 3 is not one of its parent's tasks");
    /* the same with rep 6: accepted, and it reads back as it was */
    b.b[at + 1] = 6;
    char err[200] = "";
    st_tree_t *t = st_tree_decode(b.b, b.n, err, sizeof err);
    CHECK(t != NULL);
    if (!t)
        fprintf(stderr, "    %s\n", err);
    char *txt = t ? out_of(t, st_tree_write_text, NULL) : NULL;
    CHECK(txt && strcmp(txt, "/  10:[0-9]\n  a  5 (rep 4)\n    b  2 (rep 6)\n") == 0);
    free(txt);
    st_tree_free(t);
    free(b.b);
}

/* ---- the viewer page (st_view.c) ---- */

/* The page carries the data so that no frame can end its script element or
 * open a comment that swallows the rest: no '<' in the data's line, '/'
 * escaped, and the line reads back as the same JSON. */
TEST(view_page_escapes_the_data)
{
    st_tree_t *t = st_tree_new();
    REQUIRE(t);
    addp(t, 0, "_start;main;</script><script>alert(1)</script>");
    addp(t, 1, "_start;main;<!--;<script>");
    json_t *d = json_pack("{s:s, s:o}", "format", "tbon_stat-view 1", "tree", st_tree_json(t));
    REQUIRE(d);
    char *page = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&page, &n);
    REQUIRE(f);
    CHECK_INT(st_view_write(f, d), 0);
    fclose(f);
    /* the template's text, the data line, the rest */
    const char *line = page ? strstr(page, "\n{\"format\"") : NULL;
    REQUIRE(line);
    line++;
    const char *end = strchr(line, '\n');
    REQUIRE(end);
    CHECK(memchr(line, '<', (size_t)(end - line)) == NULL);
    CHECK(strstr(page, "@STAT_DATA@") == NULL);
    CHECK(strstr(end, "</html>") != NULL);
    json_error_t je;
    json_t *back = json_loadb(line, (size_t)(end - line), 0, &je);
    CHECK(back && json_equal(back, d));
    json_decref(back);
    json_decref(d);
    free(page);
    st_tree_free(t);
}
