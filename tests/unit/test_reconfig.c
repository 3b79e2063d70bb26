/* test_reconfig.c - adopter choice and topology reports (reconfig.c): hand-made
 * trees for the rules, and random trees against brute-force references */
#include "../harness.h"

#include <stdlib.h>

#include "topo/reconfig.h"
#include "topo/topology.h"

#define NONE TBON_RANK_NONE

static const char *const HOSTS[] = { "h" };

static tb_topology_t *shape(const uint32_t *fan, size_t levels)
{
    return tb_topology_gen_shape(fan, levels, HOSTS, 1, NULL);
}

/* A tree built from a parent list (parent[0] = NONE, parent[r] < r). */
static tb_topology_t *from_parents(const tbon_rank_t *parent, size_t n)
{
    tb_topology_t *t = tb_topology_new();
    for (size_t r = 0; t && r < n; r++)
        if (tb_topology_add(t, "h", (uint32_t)r, parent[r]) != 0)
            goto fail;
    if (t && tb_topology_finish(t, NULL) == 0)
        return t;
fail:
    tb_topology_destroy(t);
    return NULL;
}

/* A random tree of n nodes: each rank hangs under an earlier one, close to it
 * when `deep` (long chains), anywhere otherwise. */
static tb_topology_t *random_tree(uint64_t *st, size_t n, bool deep)
{
    tbon_rank_t *par = malloc(n * sizeof *par);
    if (!par)
        return NULL;
    par[0] = NONE;
    for (size_t r = 1; r < n; r++) {
        size_t lo = deep && r > 3 ? r - 3 : 0;
        par[r] = (tbon_rank_t)(lo + th_rand(st) % (r - lo));
    }
    tb_topology_t *t = from_parents(par, n);
    free(par);
    return t;
}

/* Every parent chain ends at rank 0 or at an alive orphan, within size steps;
 * dead nodes are isolated. */
static void check_forest(const tb_topology_t *t)
{
    size_t n = tb_topology_size(t);
    for (tbon_rank_t r = 0; r < n; r++) {
        if (!tb_topology_alive(t, r)) {
            CHECK(tb_topology_parent(t, r) == NONE);
            CHECK_UINT(tb_topology_num_children(t, r), 0);
            continue;
        }
        tbon_rank_t v = r;
        size_t steps = 0;
        while (tb_topology_parent(t, v) != NONE && steps <= n) {
            v = tb_topology_parent(t, v);
            CHECK(tb_topology_alive(t, v));
            steps++;
        }
        CHECK(steps <= n);
        CHECK(v == 0 || tb_topology_alive(t, v));
    }
}

/* ---- brute-force reference for adopter choice --------------------------- */

typedef struct { uint32_t h, f, r; } rkey_t;

static int key_cmp(const void *pa, const void *pb)
{
    const rkey_t *a = pa, *b = pb;
    if (a->h != b->h)
        return a->h < b->h ? -1 : 1;
    if (a->f != b->f)
        return a->f < b->f ? -1 : 1;
    return (a->r > b->r) - (a->r < b->r);
}

/* The rules of reconfig.h written out plainly: filter every node, sort, rotate
 * by rank, the FE last, the FE in the last place if cap cuts it off. */
static size_t ref_candidates(const tb_topology_t *t, tbon_rank_t o, tbon_rank_t p,
                             uint32_t oh, tbon_rank_t *out, size_t cap)
{
    size_t n = tb_topology_size(t);
    if (cap == 0 || o == 0 || o >= n || !tb_topology_alive(t, o) || p == 0 || p >= n ||
        p == o)
        return 0;
    uint32_t h0 = oh ? oh : 1;
    rkey_t *k = malloc((n + 1) * sizeof *k);
    size_t len = 0;
    for (tbon_rank_t a = 1; a < n; a++) {      /* the FE comes last, below */
        /* A commnode without children above the deepest level counts as
         * height 1. */
        uint32_t h = tb_topology_height(t, a);
        if (h == 0 && tb_topology_role(t, a) == TB_ROLE_COMMNODE &&
            tb_topology_depth(t, a) < tb_topology_height(t, 0))
            h = 1;
        if (a == o || a == p || !tb_topology_alive(t, a) ||
            tb_topology_role(t, a) == TB_ROLE_BE || h < h0 ||
            tb_topology_in_subtree(t, o, a) || tb_topology_in_subtree(t, p, a) ||
            tb_topology_root_of(t, a) != 0)
            continue;
        k[len++] = (rkey_t){ h, (uint32_t)tb_topology_num_children(t, a), a };
    }
    qsort(k, len, sizeof *k, key_cmp);
    tbon_rank_t *full = malloc((len + 1) * sizeof *full);
    size_t m = 0;
    bool fe = false;
    for (size_t j = 0; j < len; j++) {
        full[m] = k[(o % len + j) % len].r;
        fe |= full[m++] == 0;
    }
    if (!fe)
        full[m++] = 0;
    size_t w = m < cap ? m : cap;
    memcpy(out, full, w * sizeof *out);
    bool have = false;
    for (size_t j = 0; j < w; j++)
        have |= out[j] == 0;
    if (!have)
        out[w - 1] = 0;
    free(full);
    free(k);
    return w;
}

/* Index and reference agree for orphan o of p (cap 8 and cap large). */
static void check_against_ref(const tb_adopt_index_t *x, const tb_topology_t *t,
                              tbon_rank_t o, tbon_rank_t p, uint32_t oh)
{
    static tbon_rank_t a[4096], b[4096];
    size_t caps[] = { 1, 3, 8, 4096 };
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++) {
        size_t na = tb_adopt_candidates(x, t, o, p, oh, a, caps[i]);
        size_t nb = ref_candidates(t, o, p, oh, b, caps[i]);
        CHECK_UINT(na, nb);
        if (na == nb && memcmp(a, b, na * sizeof *a) != 0) {
            th_fail(__FILE__, __LINE__, "o=%u p=%u oh=%u cap=%zu: lists differ", o, p, oh,
                    caps[i]);
            return;
        }
    }
}

static int rank_cmp(const void *pa, const void *pb)
{
    tbon_rank_t a = *(const tbon_rank_t *)pa, b = *(const tbon_rank_t *)pb;
    return (a > b) - (a < b);
}

/* For any (o, p), even ones that are not orphan and failed parent: the index
 * offers exactly the nodes the rules allow (the order may then differ from
 * the reference, whose rotation counts o's own subtree out). */
static void check_same_set(const tb_adopt_index_t *x, const tb_topology_t *t,
                           tbon_rank_t o, tbon_rank_t p, uint32_t oh)
{
    static tbon_rank_t a[4096], b[4096];
    size_t na = tb_adopt_candidates(x, t, o, p, oh, a, 4096);
    size_t nb = ref_candidates(t, o, p, oh, b, 4096);
    CHECK_UINT(na, nb);
    if (na != nb)
        return;
    qsort(a, na, sizeof *a, rank_cmp);
    qsort(b, nb, sizeof *b, rank_cmp);
    if (memcmp(a, b, na * sizeof *a) != 0)
        th_fail(__FILE__, __LINE__, "o=%u p=%u oh=%u: sets differ", o, p, oh);
}

/* ---- adopter choice --------------------------------------------------------- */

/* 0 -> 1 2 3; 1 -> 4 5; 2 -> 6 7; 3 -> 8; 4 -> 9 10; 5 -> 11 12; 6 -> 13 14;
 * 7 -> 15; 8 -> 16. Heights: 0:3, 1-3:2, 4-8:1, 9-16:0. */
static tb_topology_t *small_tree(void)
{
    static const tbon_rank_t par[] = { NONE, 0, 0, 0, 1, 1, 2, 2, 3, 4, 4, 5, 5, 6, 6, 7, 8 };
    return from_parents(par, sizeof par / sizeof *par);
}

TEST(candidates_order_weight_and_rotation)
{
    tb_topology_t *t = small_tree();
    REQUIRE(t);
    uint32_t oh = tb_topology_height(t, 4);
    CHECK_UINT(oh, 1);
    REQUIRE(tb_topology_remove(t, 4) == 0);
    tb_adopt_index_t *x = tb_adopt_index_new(t);
    REQUIRE(x);
    tbon_rank_t out[16];
    /* Sorted: height 1 by fan-out then rank: 7 8 (one child), 5 6 (two);
     * height 2: 1 (one child left), 3 (one), 2 (two); the FE is not rotated
     * but always last. Orphan 9 starts at 9 mod 7 = 2, orphan 10 at 3. */
    static const tbon_rank_t want9[] = { 5, 6, 1, 3, 2, 7, 8, 0 };
    static const tbon_rank_t want10[] = { 6, 1, 3, 2, 7, 8, 5, 0 };
    CHECK_UINT(tb_adopt_candidates(x, t, 9, 4, oh, out, 16), 8);
    CHECK_MEM(out, want9, sizeof want9);
    CHECK_UINT(tb_adopt_candidates(x, t, 10, 4, oh, out, 16), 8);
    CHECK_MEM(out, want10, sizeof want10);
    /* A short cap keeps the FE in its last place. */
    CHECK_UINT(tb_adopt_candidates(x, t, 9, 4, oh, out, 3), 3);
    CHECK_UINT(out[0], 5);
    CHECK_UINT(out[1], 6);
    CHECK_UINT(out[2], 0);
    CHECK_UINT(tb_adopt_candidates(x, t, 9, 4, oh, out, 1), 1);
    CHECK_UINT(out[0], 0);
    /* Bad arguments give nothing. */
    CHECK_UINT(tb_adopt_candidates(x, t, 0, 4, oh, out, 16), 0);
    CHECK_UINT(tb_adopt_candidates(x, t, 9, 0, oh, out, 16), 0);
    CHECK_UINT(tb_adopt_candidates(x, t, 9, 9, oh, out, 16), 0);
    CHECK_UINT(tb_adopt_candidates(x, t, 4, 1, oh, out, 16), 0);     /* dead orphan */
    CHECK_UINT(tb_adopt_candidates(x, t, 99, 4, oh, out, 16), 0);
    CHECK_UINT(tb_adopt_candidates(x, t, 9, 4, oh, out, 0), 0);
    check_against_ref(x, t, 9, 4, oh);
    tb_adopt_index_destroy(x);
    tb_topology_destroy(t);
}

TEST(candidates_height_rule_and_exclusions)
{
    tb_topology_t *t = small_tree();
    REQUIRE(t);
    tb_adopt_index_t *x = tb_adopt_index_new(t);
    REQUIRE(x);
    tbon_rank_t out[16];
    /* Commnode 1 (height 2) fails: only height >= 2 qualifies, 1's own
     * children (orphans now) and their subtrees do not. 3 and 2, then the FE. */
    REQUIRE(tb_topology_remove(t, 1) == 0);
    REQUIRE(tb_adopt_index_update(x, t) == 0);
    static const tbon_rank_t want4[] = { 3, 2, 0 };   /* sorted 3 2; 4 mod 2 = 0; FE last */
    static const tbon_rank_t want5[] = { 2, 3, 0 };
    CHECK_UINT(tb_adopt_candidates(x, t, 4, 1, 2, out, 16), 3);
    CHECK_MEM(out, want4, sizeof want4);
    CHECK_UINT(tb_adopt_candidates(x, t, 5, 1, 2, out, 16), 3);
    CHECK_MEM(out, want5, sizeof want5);
    check_against_ref(x, t, 4, 1, 2);
    /* Another failure: dead nodes drop out; 6's BEs are out (height 0). */
    REQUIRE(tb_topology_remove(t, 6) == 0);
    REQUIRE(tb_adopt_index_update(x, t) == 0);
    size_t k = tb_adopt_candidates(x, t, 13, 6, 1, out, 16);
    for (size_t i = 0; i < k; i++) {
        CHECK(out[i] != 6 && out[i] != 1 && out[i] != 13 && out[i] != 14);
        CHECK(tb_topology_role(t, out[i]) != TB_ROLE_BE);
        CHECK(tb_topology_root_of(t, out[i]) == 0);     /* orphans 4, 5 are not attached */
    }
    check_against_ref(x, t, 13, 6, 1);
    /* A childless commnode above the deepest level counts as height 1: 8
     * loses its only BE and may adopt 13 then; a childless one at the
     * deepest level (12's place, were it a commnode) may not. */
    REQUIRE(tb_topology_remove(t, 16) == 0);
    REQUIRE(tb_adopt_index_update(x, t) == 0);
    k = tb_adopt_candidates(x, t, 13, 6, 1, out, 16);
    int has8 = 0;
    for (size_t i = 0; i < k; i++)
        has8 |= out[i] == 8;
    CHECK(has8);
    CHECK_UINT(tb_adopt_height(t, 8), 1);
    check_against_ref(x, t, 13, 6, 1);
    CHECK_UINT(tb_topology_depth(t, 15), tb_topology_height(t, 0));
    REQUIRE(tb_topology_set_role(t, 15, TB_ROLE_COMMNODE) == 0);
    CHECK_UINT(tb_adopt_height(t, 15), 0);
    tb_adopt_index_destroy(x);
    tb_topology_destroy(t);
}

TEST(candidates_skip_own_and_failed_subtrees)
{
    /* Ask before the failure is applied (parent still in the copy), and for
     * an attached orphan whose subtree holds tall nodes: neither its subtree
     * nor the failed node's may appear. */
    tb_topology_t *t = small_tree();
    REQUIRE(t);
    tb_adopt_index_t *x = tb_adopt_index_new(t);
    REQUIRE(x);
    tbon_rank_t out[16];
    size_t k = tb_adopt_candidates(x, t, 1, 3, 1, out, 16);
    for (size_t i = 0; i < k; i++)
        CHECK(out[i] != 1 && out[i] != 4 && out[i] != 5 && out[i] != 3 && out[i] != 8);
    CHECK_UINT(k, 4);                        /* 7 6 2 0, in some rotation */
    check_same_set(x, t, 1, 3, 1);
    /* Failed parent not removed yet, with its old height: same list as after. */
    tbon_rank_t before[16], after[16];
    size_t nb = tb_adopt_candidates(x, t, 9, 4, 1, before, 16);
    check_against_ref(x, t, 9, 4, 1);
    tb_topology_t *u = tb_topology_clone(t);
    REQUIRE(u);
    REQUIRE(tb_topology_remove(u, 4) == 0);
    tb_adopt_index_t *y = tb_adopt_index_new(u);
    REQUIRE(y);
    size_t na = tb_adopt_candidates(y, u, 9, 4, 1, after, 16);
    /* The lists hold the same nodes; only 1's fan-out (and so its place)
     * differs between the two copies. */
    CHECK_UINT(na, nb);
    CHECK(tb_adopt_would_cycle(t, 1, 9));
    CHECK(tb_adopt_would_cycle(t, 1, 1));
    CHECK(!tb_adopt_would_cycle(t, 1, 2));
    CHECK(!tb_adopt_would_cycle(t, 9, 0));
    CHECK(tb_adopt_would_cycle(t, 1, 999));
    tb_adopt_index_destroy(y);
    tb_topology_destroy(u);
    tb_adopt_index_destroy(x);
    tb_topology_destroy(t);
}

TEST(candidates_spread_over_adopters)
{
    /* 3 x 4 x 32: removing one height-1 commnode orphans 32 BEs with
     * consecutive ranks; 11 + 3 adopters (the FE is the last resort). First
     * choices spread evenly. */
    static const uint32_t fan[] = { 3, 4, 32 };
    tb_topology_t *t = shape(fan, 3);
    REQUIRE(t);
    tbon_rank_t p = 4;
    uint32_t oh = tb_topology_height(t, p);
    size_t nk;
    const tbon_rank_t *kids = tb_topology_children(t, p, &nk);
    REQUIRE(nk == 32);
    tbon_rank_t orphans[32];
    memcpy(orphans, kids, sizeof orphans);
    REQUIRE(tb_topology_remove(t, p) == 0);
    tb_adopt_index_t *x = tb_adopt_index_new(t);
    REQUIRE(x);
    size_t n = tb_topology_size(t);
    unsigned *count = calloc(n, sizeof *count);
    REQUIRE(count);
    tbon_rank_t out[8];
    for (int i = 0; i < 32; i++) {
        REQUIRE(tb_adopt_candidates(x, t, orphans[i], p, oh, out, 8) == 8);
        count[out[0]]++;
        check_against_ref(x, t, orphans[i], p, oh);
    }
    unsigned lo = ~0u, hi = 0, adopters = 0;
    for (tbon_rank_t a = 1; a < n; a++) {      /* the FE is only the last resort */
        if (!tb_topology_alive(t, a) || tb_topology_height(t, a) < oh)
            continue;
        adopters++;
        lo = count[a] < lo ? count[a] : lo;
        hi = count[a] > hi ? count[a] : hi;
    }
    CHECK_UINT(adopters, 14);
    CHECK_UINT(count[0], 0);
    CHECK(hi - lo <= 1);
    CHECK_UINT(hi, 3);
    free(count);
    tb_adopt_index_destroy(x);
    tb_topology_destroy(t);
}

TEST(candidates_small_tree_only_fe)
{
    static const uint32_t fan[] = { 1, 4 };
    tb_topology_t *t = shape(fan, 2);
    REQUIRE(t);
    REQUIRE(tb_topology_remove(t, 1) == 0);
    tb_adopt_index_t *x = tb_adopt_index_new(t);
    REQUIRE(x);
    tbon_rank_t out[8];
    for (tbon_rank_t o = 2; o < 6; o++) {
        CHECK_UINT(tb_adopt_candidates(x, t, o, 1, 1, out, 8), 1);
        CHECK_UINT(out[0], 0);
    }
    tb_adopt_index_destroy(x);
    tb_topology_destroy(t);
    /* A flat tree: a BE's failure orphans nobody, the FE is still offered. */
    static const uint32_t flat[] = { 4 };
    t = shape(flat, 1);
    REQUIRE(t);
    x = tb_adopt_index_new(t);
    REQUIRE(x);
    CHECK_UINT(tb_adopt_candidates(x, t, 2, 1, 1, out, 8), 1);
    CHECK_UINT(out[0], 0);
    tb_adopt_index_destroy(x);
    tb_topology_destroy(t);
}

TEST(candidates_deep_chain)
{
    /* 0 -> 1 -> ... -> 20, with a BE on each of 5..20 as well. */
    tbon_rank_t par[37];
    par[0] = NONE;
    for (int r = 1; r <= 20; r++)
        par[r] = (tbon_rank_t)(r - 1);
    for (int r = 21; r < 37; r++)
        par[r] = (tbon_rank_t)(r - 16);
    tb_topology_t *t = from_parents(par, 37);
    REQUIRE(t);
    tb_adopt_index_t *x = tb_adopt_index_new(t);
    REQUIRE(x);
    for (tbon_rank_t p = 2; p < 20; p++) {
        uint32_t oh = tb_topology_height(t, p);
        tb_topology_t *u = tb_topology_clone(t);
        REQUIRE(u);
        REQUIRE(tb_topology_remove(u, p) == 0);
        REQUIRE(tb_adopt_index_update(x, u) == 0);
        check_against_ref(x, u, p + 1, p, oh);
        check_against_ref(x, u, p + 16 > 20 ? p + 16 : p + 1, p, oh);
        tb_topology_destroy(u);
    }
    tb_adopt_index_destroy(x);
    tb_topology_destroy(t);
}

/* Random trees, random failures, adoptions along the first candidate and
 * joins: after each step the incrementally updated index agrees with the
 * reference for every orphan of the step, and for random (o, p) pairs. */
TEST(index_follows_mutations)
{
    uint64_t st = 0x5eed;
    for (int round = 0; round < 40; round++) {
        tb_topology_t *t = random_tree(&st, 30 + th_rand(&st) % 150, round % 3 == 0);
        REQUIRE(t);
        tb_adopt_index_t *x = tb_adopt_index_new(t);
        REQUIRE(x);
        for (int step = 0; step < 25; step++) {
            size_t n = tb_topology_size(t);
            tbon_rank_t p = (tbon_rank_t)(1 + th_rand(&st) % (n - 1));
            uint64_t what = th_rand(&st) % 4;
            if (what == 0 && tb_topology_role(t, p) != TB_ROLE_BE && tb_topology_alive(t, p)) {
                tbon_rank_t r;
                tb_topology_add_child(t, p, "j", (uint32_t)(round * 100 + step),
                                      th_rand(&st) % 2 ? TB_ROLE_BE : TB_ROLE_COMMNODE, &r);
                REQUIRE(tb_adopt_index_update(x, t) == 0);
                continue;
            }
            if (!tb_topology_alive(t, p) || tb_topology_num_children(t, p) == 0)
                continue;
            uint32_t oh = tb_topology_height(t, p), top = tb_topology_height(t, 0);
            size_t nk;
            const tbon_rank_t *k = tb_topology_children(t, p, &nk);
            tbon_rank_t orphans[256];
            nk = nk < 256 ? nk : 256;
            memcpy(orphans, k, nk * sizeof *orphans);
            /* Half the time ask before the removal is applied. */
            if (th_rand(&st) % 2) {
                REQUIRE(tb_adopt_index_update(x, t) == 0);
                for (size_t i = 0; i < nk; i++)
                    check_against_ref(x, t, orphans[i], p, oh);
            }
            REQUIRE(tb_topology_remove(t, p) == 0);
            REQUIRE(tb_adopt_index_update(x, t) == 0);
            for (size_t i = 0; i < nk; i++) {
                tbon_rank_t out[8];
                check_against_ref(x, t, orphans[i], p, oh);
                size_t m = tb_adopt_candidates(x, t, orphans[i], p, oh, out, 8);
                REQUIRE(m >= 1);
                CHECK(!tb_adopt_would_cycle(t, orphans[i], out[0]));
                /* Adopt by the first candidate; the next orphans see it. */
                CHECK_INT(tb_topology_reparent(t, orphans[i], out[0]), 0);
                CHECK(tb_topology_height(t, 0) <= top);    /* never above the old height */
                REQUIRE(tb_adopt_index_update(x, t) == 0);
            }
            for (int j = 0; j < 5; j++) {
                tbon_rank_t o = (tbon_rank_t)(1 + th_rand(&st) % (n - 1));
                tbon_rank_t q = (tbon_rank_t)(1 + th_rand(&st) % (n - 1));
                check_same_set(x, t, o, q, (uint32_t)(th_rand(&st) % 4));
            }
            check_forest(t);
        }
        /* A fresh index over the final tree gives the same answers. */
        tb_adopt_index_t *y = tb_adopt_index_new(t);
        REQUIRE(y);
        size_t n = tb_topology_size(t);
        for (tbon_rank_t o = 1; o < n; o += 3) {
            tbon_rank_t a[64], b[64];
            tbon_rank_t q = (tbon_rank_t)(1 + (o * 7) % (n - 1));
            size_t na = tb_adopt_candidates(x, t, o, q, 1, a, 64);
            size_t nb = tb_adopt_candidates(y, t, o, q, 1, b, 64);
            CHECK_UINT(na, nb);
            CHECK_MEM(a, b, na * sizeof *a);
        }
        tb_adopt_index_destroy(y);
        tb_adopt_index_destroy(x);
        tb_topology_destroy(t);
    }
}

/* Adoptions in the real tree must not raise its height (the seed's rule),
 * on the 8 x 8 x 32 shape: every orphan of a failed height-1 commnode goes
 * to its first candidate. */
TEST(adoptions_keep_height)
{
    static const uint32_t fan[] = { 8, 8, 32 };
    tb_topology_t *t = shape(fan, 3);
    REQUIRE(t);
    tb_adopt_index_t *x = tb_adopt_index_new(t);
    REQUIRE(x);
    uint64_t st = 99;
    for (int f = 0; f < 30; f++) {
        tbon_rank_t p = (tbon_rank_t)(9 + th_rand(&st) % 64);
        if (!tb_topology_alive(t, p) || tb_topology_num_children(t, p) == 0)
            continue;
        uint32_t oh = tb_topology_height(t, p);
        size_t nk;
        const tbon_rank_t *k = tb_topology_children(t, p, &nk);
        tbon_rank_t orphans[64];
        memcpy(orphans, k, nk * sizeof *orphans);
        REQUIRE(tb_report_failure(t, p, tb_topology_incarnation(t, p)) == 1);
        for (size_t i = 0; i < nk; i++) {
            tbon_rank_t out[8];
            REQUIRE(tb_adopt_index_update(x, t) == 0);
            REQUIRE(tb_adopt_candidates(x, t, orphans[i], p, oh, out, 8) >= 1);
            uint32_t inc = tb_topology_incarnation(t, orphans[i]) + 1;
            CHECK_INT(tb_report_adoption(t, orphans[i], out[0], inc), 1);
            CHECK_UINT(tb_topology_parent(t, orphans[i]), out[0]);
            CHECK_UINT(tb_topology_height(t, 0), 3);
        }
    }
    tb_adopt_index_destroy(x);
    tb_topology_destroy(t);
}

/* A joining commnode hangs where it adds no height: under the least loaded
 * node of height >= 2 (the FE in a two-level tree); once there, childless,
 * it counts as height 1: the next back-end joins under it, and orphans of a
 * failed height-1 commnode may be adopted by it. */
TEST(join_commnode_then_adopter)
{
    const uint32_t fan[] = { 2, 3 };            /* 0 -> 1, 2; 1 -> 3..5; 2 -> 6..8 */
    tb_topology_t *t = shape(fan, 2);
    REQUIRE(t);
    CHECK_UINT(tb_join_parent(t, TB_ROLE_COMMNODE), 0);
    CHECK_INT(tb_report_join(t, TB_ROLE_COMMNODE, 9, 0, "j", 1, 0), 1);
    CHECK_INT(tb_report_join(t, TB_ROLE_COMMNODE, 9, 0, "j", 1, 0), 0);   /* have it */
    CHECK_INT(tb_report_join(t, TB_ROLE_BE, 11, 0, "j", 2, 0), TBON_EINVAL);  /* a gap */
    CHECK_UINT(tb_topology_height(t, 9), 0);
    CHECK_UINT(tb_adopt_height(t, 9), 1);
    CHECK_UINT(tb_topology_height(t, 0), 2);
    CHECK_UINT(tb_join_parent(t, TB_ROLE_BE), 9);   /* no children yet: first */
    /* 1 fails: its orphans 3..5 rotate over 2 and 9 (the FE last). */
    tb_adopt_index_t *x = tb_adopt_index_new(t);
    REQUIRE(x);
    CHECK_INT(tb_report_failure(t, 1, 0), 1);
    REQUIRE(tb_adopt_index_update(x, t) == 0);
    int by9 = 0;
    for (tbon_rank_t o = 3; o <= 5; o++) {
        tbon_rank_t out[8];
        size_t k = tb_adopt_candidates(x, t, o, 1, 1, out, 8);
        CHECK_UINT(k, 3);
        CHECK_UINT(out[k - 1], 0);
        by9 += out[0] == 9;
        check_against_ref(x, t, o, 1, 1);
    }
    CHECK(by9 >= 1);
    /* Under a node of height 1 too, a childless commnode is found. */
    CHECK_INT(tb_report_join(t, TB_ROLE_COMMNODE, 10, 2, "j", 3, 0), 1);
    CHECK_UINT(tb_topology_height(t, 2), 1);
    REQUIRE(tb_adopt_index_update(x, t) == 0);
    check_against_ref(x, t, 6, 2, 1);
    check_forest(t);
    tb_adopt_index_destroy(x);
    tb_topology_destroy(t);
}

/* A restarted process: a join of a later generation brings a failed rank
 * back, childless, under its new parent; failures and adoptions of its old
 * generation are stale from then on; a join of the same generation is a
 * duplicate; a rank its copy still has alive is taken for failed first. */
TEST(restart_generation_rules)
{
    tb_topology_t *t = small_tree();
    REQUIRE(t);
    uint32_t g1 = tb_inc_next_gen(0), g2 = tb_inc_next_gen(g1);
    CHECK_UINT(tb_inc_gen(g1), 1);
    CHECK_UINT(tb_inc_gen(g1 + 3), 1);
    CHECK_INT(tb_report_failure(t, 9, 0), 1);
    CHECK_INT(tb_report_adoption(t, 9, 5, 2), 1);          /* dead: recorded only */
    CHECK_INT(tb_report_join(t, TB_ROLE_BE, 9, 5, "h", 9, 0), 0);   /* same generation */
    CHECK_INT(tb_report_join(t, TB_ROLE_COMMNODE, 9, 5, "h", 9, g1), TBON_EINVAL); /* role */
    CHECK_INT(tb_report_join(t, TB_ROLE_BE, 9, 5, "h", 9, g1), 1);
    CHECK(tb_topology_alive(t, 9));
    CHECK_UINT(tb_topology_parent(t, 9), 5);
    CHECK_UINT(tb_topology_incarnation(t, 9), g1);
    CHECK_INT(tb_report_join(t, TB_ROLE_BE, 9, 5, "h", 9, g1), 0);
    /* What its old process says is stale. */
    CHECK_INT(tb_report_failure(t, 9, 2), 0);
    CHECK_INT(tb_report_failure(t, 9, 7), 0);
    CHECK_INT(tb_report_adoption(t, 9, 6, 3), 0);
    CHECK(tb_topology_alive(t, 9));
    CHECK_UINT(tb_topology_parent(t, 9), 5);
    /* Its new process is adopted and fails like any other. */
    CHECK_INT(tb_report_adoption(t, 9, 6, g1 + 1), 1);
    CHECK_UINT(tb_topology_parent(t, 9), 6);
    CHECK_INT(tb_report_failure(t, 9, g1), 1);
    CHECK(!tb_topology_alive(t, 9));
    /* A copy that missed the failure: the restart ends the old process. */
    CHECK_INT(tb_report_join(t, TB_ROLE_BE, 10, 4, "h", 10, g1), 1);
    CHECK(tb_topology_alive(t, 10));
    CHECK_UINT(tb_topology_incarnation(t, 10), g1);
    /* A dead parent: under the FE. */
    CHECK_INT(tb_report_failure(t, 8, 0), 1);
    CHECK_INT(tb_report_join(t, TB_ROLE_BE, 9, 8, "h", 9, g2), 1);
    CHECK_UINT(tb_topology_parent(t, 9), 0);
    check_forest(t);
    tb_topology_destroy(t);
}

/* ---- reports: hand-made cases ------------------------------------------------ */

TEST(report_failure_rules)
{
    tb_topology_t *t = small_tree();
    REQUIRE(t);
    CHECK_INT(tb_report_failure(t, 4, 0), 1);
    CHECK(!tb_topology_alive(t, 4));
    CHECK(tb_topology_parent(t, 9) == NONE);
    CHECK_INT(tb_report_failure(t, 4, 0), 0);          /* duplicate */
    CHECK_INT(tb_report_failure(t, 4, 3), 1);          /* raises the incarnation */
    CHECK_UINT(tb_topology_incarnation(t, 4), 3);
    CHECK_INT(tb_report_failure(t, 4, 2), 0);
    CHECK_UINT(tb_topology_incarnation(t, 4), 3);
    CHECK_INT(tb_report_failure(t, 0, 0), TBON_ETOPOLOGY);
    CHECK_INT(tb_report_failure(t, 17, 0), TBON_EINVAL);
    CHECK_INT(tb_report_failure(NULL, 1, 0), TBON_EINVAL);
    check_forest(t);
    tb_topology_destroy(t);
}

TEST(report_adoption_rules)
{
    tb_topology_t *t = small_tree();
    REQUIRE(t);
    /* Malformed. */
    CHECK_INT(tb_report_adoption(t, 0, 1, 1), TBON_EINVAL);
    CHECK_INT(tb_report_adoption(t, 5, 5, 1), TBON_EINVAL);
    CHECK_INT(tb_report_adoption(t, 5, 1, 0), TBON_EINVAL);
    CHECK_INT(tb_report_adoption(t, 5, 9, 1), TBON_EINVAL);   /* a BE adopter */
    CHECK_INT(tb_report_adoption(t, 5, 17, 1), TBON_EINVAL);
    CHECK_INT(tb_report_adoption(t, 17, 1, 1), TBON_EINVAL);
    /* 4 fails; its BE 9 is adopted by 5 at incarnation 1, then by 6 at 2. */
    REQUIRE(tb_report_failure(t, 4, 0) == 1);
    CHECK_INT(tb_report_adoption(t, 9, 5, 1), 1);
    CHECK_UINT(tb_topology_parent(t, 9), 5);
    CHECK_UINT(tb_topology_incarnation(t, 9), 1);
    CHECK_INT(tb_report_adoption(t, 9, 5, 1), 0);             /* duplicate */
    CHECK_INT(tb_report_adoption(t, 9, 6, 2), 1);
    CHECK_UINT(tb_topology_parent(t, 9), 6);
    CHECK_INT(tb_report_adoption(t, 9, 5, 1), 0);             /* stale */
    CHECK_UINT(tb_topology_parent(t, 9), 6);
    CHECK_UINT(tb_topology_incarnation(t, 9), 2);
    /* The adopter dies: 9 is an orphan again, incarnation kept; a late copy
     * of the adoption does not bring it back. */
    CHECK_INT(tb_report_failure(t, 6, 0), 1);
    CHECK(tb_topology_parent(t, 9) == NONE);
    CHECK_INT(tb_report_adoption(t, 9, 6, 2), 0);
    CHECK(tb_topology_parent(t, 9) == NONE);
    /* Adopted by a node already dead: parentless, incarnation recorded. */
    CHECK_INT(tb_report_adoption(t, 10, 6, 1), 1);
    CHECK(tb_topology_parent(t, 10) == NONE);
    CHECK_UINT(tb_topology_incarnation(t, 10), 1);
    CHECK_INT(tb_report_adoption(t, 10, 7, 2), 1);
    CHECK_UINT(tb_topology_parent(t, 10), 7);
    /* A conflict: two adopters at one incarnation leave the orphan waiting
     * for a higher one, in either order. */
    tb_topology_t *u = tb_topology_clone(t);
    REQUIRE(u);
    CHECK_INT(tb_report_adoption(t, 11, 7, 1), 1);
    CHECK_INT(tb_report_adoption(t, 11, 8, 1), 1);
    CHECK_INT(tb_report_adoption(u, 11, 8, 1), 1);
    CHECK_INT(tb_report_adoption(u, 11, 7, 1), 1);
    CHECK(tb_topology_parent(t, 11) == NONE);
    CHECK(tb_topology_equal(t, u));
    CHECK_INT(tb_report_adoption(t, 11, 7, 1), 0);
    CHECK_INT(tb_report_adoption(t, 11, 8, 2), 1);
    CHECK_UINT(tb_topology_parent(t, 11), 8);
    /* A dead orphan records incarnations only. */
    CHECK_INT(tb_report_adoption(t, 4, 2, 5), 1);
    CHECK(!tb_topology_alive(t, 4));
    CHECK_UINT(tb_topology_incarnation(t, 4), 5);
    check_forest(t);
    tb_topology_destroy(u);
    tb_topology_destroy(t);
}

/* 0 -> 1 2; 1 -> 3; 2 -> 4; 3 -> 5; 4 -> 6. Commnode 1 adopted inside 2's
 * subtree and 2 inside 1's: a cycle, in either order; 1 (the lowest rank on
 * it) waits. Breaking the cycle later honours the pending claim. */
TEST(report_cycle_waits_and_resumes)
{
    static const tbon_rank_t par[] = { NONE, 0, 0, 1, 2, 3, 4 };
    for (int order = 0; order < 2; order++) {
        for (int breaker = 0; breaker < 3; breaker++) {
            tb_topology_t *t = from_parents(par, 7);
            REQUIRE(t);
            if (order == 0) {
                CHECK_INT(tb_report_adoption(t, 1, 4, 1), 1);
                CHECK_INT(tb_report_adoption(t, 2, 3, 1), 1);
            } else {
                CHECK_INT(tb_report_adoption(t, 2, 3, 1), 1);
                CHECK_INT(tb_report_adoption(t, 1, 4, 1), 1);
            }
            check_forest(t);
            CHECK(tb_topology_parent(t, 1) == NONE);
            CHECK_UINT(tb_topology_pending(t, 1), 4);
            CHECK_UINT(tb_topology_parent(t, 2), 3);
            CHECK_UINT(tb_topology_num_pending(t), 1);
            CHECK_INT(tb_report_adoption(t, 1, 4, 1), 0);      /* duplicate */
            if (breaker == 0) {
                /* 3 dies: 2 loses its parent, 1's claim on 4 now stands. */
                CHECK_INT(tb_report_failure(t, 3, 0), 1);
                CHECK(tb_topology_parent(t, 2) == NONE);
                CHECK_UINT(tb_topology_parent(t, 1), 4);
            } else if (breaker == 1) {
                /* 2 is adopted by the FE at a higher incarnation. */
                CHECK_INT(tb_report_adoption(t, 2, 0, 2), 1);
                CHECK_UINT(tb_topology_parent(t, 2), 0);
                CHECK_UINT(tb_topology_parent(t, 1), 4);
            } else {
                /* 4 dies: 1's claim is void, 1 stays an orphan. */
                CHECK_INT(tb_report_failure(t, 4, 0), 1);
                CHECK(tb_topology_parent(t, 1) == NONE);
                CHECK_UINT(tb_topology_parent(t, 2), 3);
            }
            CHECK_UINT(tb_topology_num_pending(t), 0);
            check_forest(t);
            tb_topology_destroy(t);
        }
    }
}

/* ---- reports: random sets against the definition ------------------------------ */

typedef struct { bool adopt; tbon_rank_t r, p; uint32_t inc; } rep_t;

static int apply(tb_topology_t *t, const rep_t *x)
{
    return x->adopt ? tb_report_adoption(t, x->r, x->p, x->inc)
                    : tb_report_failure(t, x->r, x->inc);
}

/* The copy the definition in reconfig.h gives for the set S over t0 (all
 * incarnations 0): winning claims d(o), the lowest rank on each cycle
 * pending. pend[] gets every rank's pending claim. */
static tb_topology_t *reference(const tb_topology_t *t0, const rep_t *S, size_t ns,
                                tbon_rank_t *pend)
{
    size_t n = tb_topology_size(t0);
    bool *dead = calloc(n, sizeof *dead);
    uint32_t *inc = calloc(n, sizeof *inc);
    tbon_rank_t *d = malloc(n * sizeof *d);
    uint8_t *color = calloc(n, 1);
    tb_topology_t *u = tb_topology_clone(t0);
    if (!dead || !inc || !d || !color || !u)
        goto fail;
    for (size_t i = 0; i < ns; i++) {
        if (!S[i].adopt)
            dead[S[i].r] = true;
        if (S[i].inc > inc[S[i].r])
            inc[S[i].r] = S[i].inc;
    }
    for (tbon_rank_t o = 0; o < n; o++) {
        pend[o] = NONE;
        d[o] = NONE;
        if (o == 0 || dead[o] || !tb_topology_alive(t0, o))
            continue;
        if (inc[o] == 0) {
            d[o] = tb_topology_parent(t0, o);
        } else {
            bool conflict = false;
            for (size_t i = 0; i < ns; i++) {
                if (!S[i].adopt || S[i].r != o || S[i].inc != inc[o])
                    continue;
                if (d[o] != NONE && d[o] != S[i].p)
                    conflict = true;
                d[o] = S[i].p;
            }
            if (conflict)
                d[o] = NONE;
        }
        if (d[o] != NONE && dead[d[o]])
            d[o] = NONE;
    }
    /* Cycles of o -> d(o): walk from each unvisited node marking the path
     * (1); meeting the path again closes a cycle. */
    for (tbon_rank_t s = 0; s < n; s++) {
        tbon_rank_t v = s;
        while (v != NONE && color[v] == 0) {
            color[v] = 1;
            v = d[v];
        }
        if (v != NONE && color[v] == 1) {
            tbon_rank_t m = v;
            for (tbon_rank_t w = d[v]; w != v; w = d[w])
                m = w < m ? w : m;
            pend[m] = d[m];
        }
        for (v = s; v != NONE && color[v] == 1; v = d[v])
            color[v] = 2;
    }
    for (tbon_rank_t r = 1; r < n; r++) {
        if (dead[r] && tb_topology_remove(u, r) != 0)
            goto fail;
        tb_topology_set_incarnation(u, r, inc[r]);
    }
    for (tbon_rank_t r = 1; r < n; r++)
        if (!dead[r] && tb_topology_move(u, r, NONE) != 0)
            goto fail;
    for (tbon_rank_t r = 1; r < n; r++)
        if (d[r] != NONE && pend[r] == NONE && tb_topology_move(u, r, d[r]) != 0)
            goto fail;
    free(dead);
    free(inc);
    free(d);
    free(color);
    return u;
fail:
    free(dead);
    free(inc);
    free(d);
    free(color);
    tb_topology_destroy(u);
    return NULL;
}

static void check_same_pending(const tb_topology_t *t, const tbon_rank_t *pend)
{
    size_t n = tb_topology_size(t), k = 0;
    for (tbon_rank_t r = 0; r < n; r++) {
        CHECK_UINT(tb_topology_pending(t, r), pend[r]);
        k += pend[r] != NONE;
    }
    CHECK_UINT(tb_topology_num_pending(t), k);
}

/* Random report sets over random trees; each applied to several copies in
 * random orders with duplicates; every copy equals the reference. */
TEST(reports_converge_in_any_order)
{
    uint64_t st = 0xc0ffee;
    for (int round = 0; round < 150; round++) {
        tb_topology_t *t0 = random_tree(&st, 8 + th_rand(&st) % 40, round % 4 == 0);
        REQUIRE(t0);
        size_t n = tb_topology_size(t0);
        size_t ns = 1 + th_rand(&st) % 30;
        rep_t S[30];
        uint32_t maxinc = 1 + (uint32_t)(round % 4);   /* small: many ties, conflicts */
        for (size_t i = 0; i < ns; i++) {
            S[i].adopt = th_rand(&st) % 4 != 0;
            S[i].r = (tbon_rank_t)(1 + th_rand(&st) % (n - 1));
            S[i].inc = (uint32_t)(th_rand(&st) % (maxinc + 1));
            if (S[i].adopt) {
                do
                    S[i].p = (tbon_rank_t)(th_rand(&st) % n);
                while (S[i].p == S[i].r || tb_topology_role(t0, S[i].p) == TB_ROLE_BE);
                if (S[i].inc == 0)
                    S[i].inc = 1;
            }
        }
        tbon_rank_t *pend = malloc(n * sizeof *pend);
        REQUIRE(pend);
        tb_topology_t *ref = reference(t0, S, ns, pend);
        REQUIRE(ref);
        check_forest(ref);
        for (int copy = 0; copy < 6; copy++) {
            /* Each report one to three times, shuffled. */
            rep_t seq[90];
            size_t m = 0;
            for (size_t i = 0; i < ns; i++)
                for (uint64_t k = 1 + th_rand(&st) % 3; k > 0; k--)
                    seq[m++] = S[i];
            for (size_t i = m; i > 1; i--) {
                size_t j = th_rand(&st) % i;
                rep_t tmp = seq[i - 1];
                seq[i - 1] = seq[j];
                seq[j] = tmp;
            }
            tb_topology_t *t = tb_topology_clone(t0);
            REQUIRE(t);
            for (size_t i = 0; i < m; i++) {
                int rc = apply(t, &seq[i]);
                CHECK(rc == 0 || rc == 1);
            }
            check_forest(t);
            if (!tb_topology_equal(t, ref))
                th_fail(__FILE__, __LINE__, "round %d copy %d differs from the reference",
                        round, copy);
            CHECK_UINT(tb_topology_digest(t), tb_topology_digest(ref));
            check_same_pending(t, pend);
            /* Everything again: nothing changes. */
            for (size_t i = 0; i < m; i++)
                CHECK_INT(apply(t, &seq[i]), 0);
            CHECK(tb_topology_equal(t, ref));
            tb_topology_destroy(t);
        }
        free(pend);
        tb_topology_destroy(ref);
        tb_topology_destroy(t0);
    }
}

/* The realistic flow on a shape: failures, orphans choosing adopters from
 * their own (possibly stale) copies, reports flooding late: all copies end
 * equal and acyclic. */
TEST(reports_from_reconfiguration_converge)
{
    static const uint32_t fan[] = { 4, 4, 8 };
    uint64_t st = 4242;
    for (int round = 0; round < 20; round++) {
        tb_topology_t *t0 = shape(fan, 3);
        REQUIRE(t0);
        tb_topology_t *truth = tb_topology_clone(t0);
        REQUIRE(truth);
        tb_adopt_index_t *x = tb_adopt_index_new(truth);
        REQUIRE(x);
        rep_t S[600];
        size_t ns = 0;
        for (int f = 0; f < 6; f++) {
            tbon_rank_t p = (tbon_rank_t)(1 + th_rand(&st) % 20);
            if (!tb_topology_alive(truth, p) || tb_topology_num_children(truth, p) == 0)
                continue;
            uint32_t oh = tb_topology_height(truth, p);
            size_t nk;
            const tbon_rank_t *k = tb_topology_children(truth, p, &nk);
            tbon_rank_t orphans[64];
            memcpy(orphans, k, nk * sizeof *orphans);
            S[ns++] = (rep_t){ false, p, 0, tb_topology_incarnation(truth, p) };
            REQUIRE(tb_report_failure(truth, p, S[ns - 1].inc) == 1);
            for (size_t i = 0; i < nk && ns < 600; i++) {
                tbon_rank_t out[4];
                REQUIRE(tb_adopt_index_update(x, truth) == 0);
                REQUIRE(tb_adopt_candidates(x, truth, orphans[i], p, oh, out, 4) >= 1);
                uint32_t inc = tb_topology_incarnation(truth, orphans[i]) + 1;
                S[ns++] = (rep_t){ true, orphans[i], out[0], inc };
                REQUIRE(tb_report_adoption(truth, orphans[i], out[0], inc) == 1);
            }
        }
        for (int copy = 0; copy < 4; copy++) {
            rep_t seq[600];
            memcpy(seq, S, ns * sizeof *seq);
            for (size_t i = ns; i > 1; i--) {
                size_t j = th_rand(&st) % i;
                rep_t tmp = seq[i - 1];
                seq[i - 1] = seq[j];
                seq[j] = tmp;
            }
            tb_topology_t *t = tb_topology_clone(t0);
            REQUIRE(t);
            for (size_t i = 0; i < ns; i++)
                CHECK(apply(t, &seq[i]) >= 0);
            check_forest(t);
            CHECK(tb_topology_equal(t, truth));
            CHECK_UINT(tb_topology_num_pending(t), 0);
            tb_topology_destroy(t);
        }
        check_forest(truth);
        tb_adopt_index_destroy(x);
        tb_topology_destroy(truth);
        tb_topology_destroy(t0);
    }
}

/* A joining back-end's parent: the least loaded node of the lowest height
 * >= 1 attached to the FE; joins spread over them one at a time; dead and
 * detached nodes are passed over; the FE when nothing else qualifies. */
TEST(join_parent_least_loaded)
{
    const uint32_t fan[] = { 2, 3 };            /* 0 -> 1, 2; 1 -> 3..5; 2 -> 6..8 */
    tb_topology_t *t = shape(fan, 2);
    REQUIRE(t);
    CHECK_UINT(tb_join_parent(t, TB_ROLE_BE), 1);            /* equal: the lower rank */
    tbon_rank_t r;
    uint32_t lid = 100;
    /* Four joins alternate between 1 and 2 as each gains a child. */
    tbon_rank_t want[] = { 1, 2, 1, 2 };
    for (int i = 0; i < 4; i++) {
        tbon_rank_t p = tb_join_parent(t, TB_ROLE_BE);
        CHECK_UINT(p, want[i]);
        REQUIRE(tb_topology_add_child(t, p, "h", lid++, TB_ROLE_BE, &r) == 0);
    }
    /* 1 dies: its children are orphans, 2 is the only one left. */
    CHECK_INT(tb_report_failure(t, 1, 0), 1);
    CHECK_UINT(tb_join_parent(t, TB_ROLE_BE), 2);
    /* 2 dies too: the FE. */
    CHECK_INT(tb_report_failure(t, 2, 0), 1);
    CHECK_UINT(tb_join_parent(t, TB_ROLE_BE), 0);
    tb_topology_destroy(t);
    /* A flat tree: the FE. */
    const uint32_t flat[] = { 4 };
    t = shape(flat, 1);
    REQUIRE(t);
    CHECK_UINT(tb_join_parent(t, TB_ROLE_BE), 0);
    tb_topology_destroy(t);
}
