/* test_topology.c - the topology object: builder, queries, mutations,
 * comparison and digest (parsers, wire and generators have their own files). */
#include "../harness.h"

#include <stdlib.h>

#include "topo/topology.h"
#include "topology_helpers.h"

static tb_topology_t *sample(const char *name)
{
    char path[256];
    tbon_error_t err = { 0 };
    snprintf(path, sizeof path, "topologies/%s", name);
    tb_topology_t *t = tb_topology_parse_file(path, &err);
    if (!t)
        fprintf(stderr, "    %s\n", err.msg);
    return t;
}

/* Children of r as a string "a b c", for compact exact checks. */
static const char *kids(const tb_topology_t *t, tbon_rank_t r)
{
    static char buf[512];
    size_t n, off = 0;
    const tbon_rank_t *c = tb_topology_children(t, r, &n);
    buf[0] = '\0';
    for (size_t i = 0; i < n && off < sizeof buf; i++)
        off += (size_t)snprintf(buf + off, sizeof buf - off, i ? " %u" : "%u", c[i]);
    return buf;
}

/* fe => a b ; a => c d ; b => e ;  (ranks: fe 0, a 1, b 2, c 3, d 4, e 5) */
static const char small[] = "fe:0 => a:0 b:0 ;\na:0 => c:0 c:1 ;\nb:0 => e:0 ;\n";

TEST(builder_assigns_ranks_in_order_and_computes_fields)
{
    tb_topology_t *t = tb_topology_new();
    REQUIRE(t);
    CHECK_INT(tb_topology_add(t, "fe", 0, TBON_RANK_NONE), 0);
    CHECK_INT(tb_topology_add(t, "n", 0, 0), 0);
    CHECK_INT(tb_topology_add(t, "n", 1, 0), 0);
    CHECK_INT(tb_topology_add(t, "n", 2, 1), 0);
    CHECK_INT(tb_topology_finish(t, NULL), 0);
    CHECK_UINT(tb_topology_size(t), 4);
    CHECK_UINT(tb_topology_parent(t, 0), TBON_RANK_NONE);
    CHECK_UINT(tb_topology_parent(t, 3), 1);
    CHECK_STR(kids(t, 0), "1 2");
    CHECK_STR(kids(t, 1), "3");
    CHECK_UINT(tb_topology_depth(t, 3), 2);
    CHECK_UINT(tb_topology_height(t, 0), 2);
    CHECK_UINT(tb_topology_height(t, 1), 1);
    CHECK_UINT(tb_topology_height(t, 2), 0);
    CHECK_INT(tb_topology_role(t, 0), TB_ROLE_FE);
    CHECK_INT(tb_topology_role(t, 1), TB_ROLE_COMMNODE);
    CHECK_INT(tb_topology_role(t, 2), TB_ROLE_BE);
    CHECK_INT(tb_topology_role(t, 3), TB_ROLE_BE);
    CHECK_STR(tb_topology_host(t, 2), "n");
    CHECK_UINT(tb_topology_local_id(t, 2), 1);
    CHECK(tb_topology_alive(t, 3));
    CHECK_UINT(tb_topology_incarnation(t, 3), 0);
    CHECK_UINT(tb_topology_port(t, 3), 0);
    CHECK_UINT(tb_topology_num_hosts(t), 2);
    tb_topology_destroy(t);
}

TEST(builder_rejects_bad_input)
{
    tb_topology_t *t = tb_topology_new();
    tbon_error_t err = { 0 };
    REQUIRE(t);
    CHECK_INT(tb_topology_finish(t, &err), TBON_ETOPOLOGY);
    CHECK_STR(err.msg, "empty topology: no nodes");
    CHECK_INT(tb_topology_add(t, "fe", 0, 0), TBON_EINVAL);         /* FE must be a root */
    CHECK_INT(tb_topology_add(t, "fe", 0, TBON_RANK_NONE), 0);
    CHECK_INT(tb_topology_add(t, "a", 0, TBON_RANK_NONE), TBON_EINVAL); /* second root */
    CHECK_INT(tb_topology_add(t, "a", 0, 1), TBON_EINVAL);          /* parent not there */
    CHECK_INT(tb_topology_add(t, "fe", 0, 0), TBON_ETOPOLOGY);       /* duplicate name */
    CHECK_INT(tb_topology_add(t, "-a", 0, 0), TBON_EINVAL);         /* bad host */
    CHECK_INT(tb_topology_add(t, "a b", 0, 0), TBON_EINVAL);
    CHECK_INT(tb_topology_add(t, "", 0, 0), TBON_EINVAL);
    CHECK_INT(tb_topology_add(t, "a", 2147483648u, 0), TBON_EINVAL); /* id too large */
    CHECK_INT(tb_topology_add(t, "a", 2147483647u, 0), 0);
    CHECK_INT(tb_topology_reserve(t, TB_TOPOLOGY_MAX_NODES + 1ull), TBON_EINVAL);
    /* Failed adds intern no host: only fe and a. */
    CHECK_UINT(tb_topology_num_hosts(t), 2);
    CHECK_INT(tb_topology_finish(t, &err), 0);
    CHECK_INT(tb_topology_add(t, "b", 0, 0), TBON_EINVAL);          /* after finish */
    CHECK_INT(tb_topology_finish(t, &err), TBON_EINVAL);
    tb_topology_destroy(t);
    tb_topology_destroy(NULL);
}

TEST(host_names_checked)
{
    CHECK_INT(tb_topology_check_host("node-1.example_a", 16), 0);
    CHECK_INT(tb_topology_check_host("9abc", 4), 0);
    CHECK_INT(tb_topology_check_host("_a", 2), TBON_EINVAL);
    CHECK_INT(tb_topology_check_host(".a", 2), TBON_EINVAL);
    CHECK_INT(tb_topology_check_host("a:b", 3), TBON_EINVAL);
    CHECK_INT(tb_topology_check_host("", 0), TBON_EINVAL);
    char big[300];
    memset(big, 'a', sizeof big);
    CHECK_INT(tb_topology_check_host(big, 255), 0);
    CHECK_INT(tb_topology_check_host(big, 256), TBON_EINVAL);
}

TEST(bfs_ranks_follow_file_order)
{
    /* Statements out of BFS order; children in file order, not name order. */
    tb_topology_t *t = tt_parse_text("fe:0 => z:0 y:0 ;\n y:0 => q:1 q:0 ;\n z:0 => p:0 ;\n"
                                     "q:0 => r:0;");
    REQUIRE(t);
    const char *want[] = { "fe:0", "z:0", "y:0", "p:0", "q:1", "q:0", "r:0" };
    CHECK_UINT(tb_topology_size(t), 7);
    for (tbon_rank_t r = 0; r < 7; r++) {
        char name[64];
        snprintf(name, sizeof name, "%s:%u", tb_topology_host(t, r), tb_topology_local_id(t, r));
        CHECK_STR(name, want[r]);
    }
    CHECK_STR(kids(t, 2), "4 5");
    CHECK_STR(kids(t, 5), "6");
    CHECK_UINT(tb_topology_find(t, "q", 0), 5);
    CHECK_UINT(tb_topology_find(t, "q", 2), TBON_RANK_NONE);
    CHECK_UINT(tb_topology_find(t, "nosuch", 0), TBON_RANK_NONE);
    tb_topology_destroy(t);
}

TEST(queries_on_sample_4x4)
{
    tb_topology_t *t = sample("local-4x4.top");
    REQUIRE(t);
    CHECK_UINT(tb_topology_size(t), 21);
    CHECK_UINT(tb_topology_num_leaves(t), 16);
    CHECK_STR(kids(t, 0), "1 2 3 4");
    CHECK_STR(kids(t, 3), "13 14 15 16");
    CHECK_UINT(tb_topology_num_children(t, 20), 0);
    CHECK_UINT(tb_topology_height(t, 0), 2);
    CHECK_UINT(tb_topology_height(t, 4), 1);
    CHECK_UINT(tb_topology_depth(t, 20), 2);
    CHECK_UINT(tb_topology_parent(t, 20), 4);
    tbon_rank_t leaves[32];
    CHECK_UINT(tb_topology_leaves(t, leaves, 32), 16);
    for (int i = 0; i < 16; i++)
        CHECK_UINT(leaves[i], 5 + i);
    CHECK_UINT(tb_topology_leaves(t, leaves, 3), 16);   /* fills 3, counts all */
    tbon_rank_t path[8];
    CHECK_UINT(tb_topology_path(t, 14, path, 8), 3);
    CHECK_UINT(path[0], 14);
    CHECK_UINT(path[1], 3);
    CHECK_UINT(path[2], 0);
    CHECK_UINT(tb_topology_path(t, 14, path, 1), 3);
    CHECK_UINT(tb_topology_path(t, 99, path, 8), 0);
    CHECK(tb_topology_in_subtree(t, 3, 14));
    CHECK(tb_topology_in_subtree(t, 0, 14));
    CHECK(tb_topology_in_subtree(t, 14, 14));
    CHECK(!tb_topology_in_subtree(t, 2, 14));
    CHECK(!tb_topology_in_subtree(t, 14, 3));
    CHECK(!tb_topology_in_subtree(t, 99, 3));
    CHECK_UINT(tb_topology_root_of(t, 14), 0);
    CHECK_UINT(tb_topology_find(t, "localhost", 13), 13);
    for (tbon_rank_t r = 0; r < 21; r++)
        CHECK_INT(tb_topology_role(t, r),
                  r == 0 ? TB_ROLE_FE : r < 5 ? TB_ROLE_COMMNODE : TB_ROLE_BE);
    tb_topology_destroy(t);
}

TEST(queries_on_other_samples)
{
    static const struct { const char *file; size_t size, leaves; uint32_t height, fan; } s[] = {
        { "local-1x4.top", 6, 4, 2, 1 },
        { "local-8x8.top", 73, 64, 2, 8 },
        { "local-4x4x4.top", 85, 64, 3, 4 },
        { "local-32x32.top", 1057, 1024, 2, 32 },
        { "local-4x4.xml", 21, 16, 2, 4 },
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        tb_topology_t *t = sample(s[i].file);
        REQUIRE(t);
        CHECK_UINT(tb_topology_size(t), s[i].size);
        CHECK_UINT(tb_topology_num_leaves(t), s[i].leaves);
        CHECK_UINT(tb_topology_height(t, 0), s[i].height);
        CHECK_UINT(tb_topology_num_children(t, 0), s[i].fan);
        CHECK_UINT(tb_topology_depth(t, (tbon_rank_t)s[i].size - 1), s[i].height);
        tb_topology_destroy(t);
    }
}

TEST(out_of_range_queries_are_harmless)
{
    tb_topology_t *t = tt_parse_text(small);
    REQUIRE(t);
    size_t n = 7;
    CHECK(tb_topology_children(t, 6, &n) == NULL);
    CHECK_UINT(n, 0);
    CHECK_UINT(tb_topology_parent(t, 6), TBON_RANK_NONE);
    CHECK(tb_topology_host(t, 6) == NULL);
    CHECK(!tb_topology_alive(t, 6));
    CHECK_UINT(tb_topology_depth(t, TBON_RANK_NONE), 0);
    CHECK_UINT(tb_topology_root_of(t, 6), TBON_RANK_NONE);
    CHECK_INT(tb_topology_set_port(t, 6, 1), TBON_EINVAL);
    CHECK_INT(tb_topology_remove(t, 6), TBON_EINVAL);
    CHECK_INT(tb_topology_reparent(t, 6, 0), TBON_EINVAL);
    CHECK_INT(tb_topology_reparent(t, 1, 6), TBON_EINVAL);
    CHECK_INT(tb_topology_set_incarnation(t, 6, 1), TBON_EINVAL);
    CHECK_INT(tb_topology_set_role(t, 6, TB_ROLE_BE), TBON_EINVAL);
    CHECK_UINT(tb_topology_size(NULL), 0);
    CHECK_UINT(tb_topology_find(t, NULL, 0), TBON_RANK_NONE);
    tb_topology_destroy(t);
}

TEST(remove_orphans_children_and_lowers_heights)
{
    tb_topology_t *t = tt_parse_text(small);
    REQUIRE(t);
    uint64_t d0 = tb_topology_digest(t);
    CHECK_UINT(tb_topology_num_leaves(t), 3);
    CHECK_INT(tb_topology_remove(t, 1), 0);           /* a:0, parent of c:0 c:1 */
    CHECK(!tb_topology_alive(t, 1));
    CHECK_UINT(tb_topology_parent(t, 1), TBON_RANK_NONE);
    CHECK_UINT(tb_topology_num_children(t, 1), 0);
    CHECK_STR(kids(t, 0), "2");
    CHECK_UINT(tb_topology_parent(t, 3), TBON_RANK_NONE);   /* orphans */
    CHECK_UINT(tb_topology_parent(t, 4), TBON_RANK_NONE);
    CHECK(tb_topology_alive(t, 3));
    CHECK_UINT(tb_topology_depth(t, 3), 0);           /* roots of their fragments */
    CHECK_UINT(tb_topology_root_of(t, 3), 3);
    CHECK(!tb_topology_in_subtree(t, 0, 3));
    CHECK_UINT(tb_topology_height(t, 0), 2);          /* still fe -> b -> e */
    CHECK_UINT(tb_topology_num_leaves(t), 3);         /* orphaned BEs still alive */
    CHECK(tb_topology_digest(t) != d0);
    tt_round_trip(t);
    uint64_t d1 = tb_topology_digest(t);
    CHECK_INT(tb_topology_remove(t, 1), 0);           /* duplicate report: no change */
    CHECK_UINT(tb_topology_digest(t), d1);
    CHECK_INT(tb_topology_remove(t, 5), 0);           /* e:0, a BE */
    CHECK_UINT(tb_topology_num_leaves(t), 2);
    CHECK_UINT(tb_topology_height(t, 2), 0);
    CHECK_UINT(tb_topology_height(t, 0), 1);
    CHECK_INT(tb_topology_remove(t, 0), TBON_ETOPOLOGY);
    tt_round_trip(t);
    tb_topology_destroy(t);
}

TEST(remove_deep_node_updates_depths_of_orphan_subtrees)
{
    tb_topology_t *t = sample("local-4x4x4.top");
    REQUIRE(t);
    CHECK_INT(tb_topology_remove(t, 1), 0);
    /* Rank 1's children 5..8 are orphans of height 1; their leaves at depth 1. */
    for (tbon_rank_t r = 5; r <= 8; r++) {
        CHECK_UINT(tb_topology_depth(t, r), 0);
        CHECK_UINT(tb_topology_height(t, r), 1);
    }
    CHECK_UINT(tb_topology_depth(t, 21), 1);
    CHECK_UINT(tb_topology_root_of(t, 21), 5);
    CHECK_UINT(tb_topology_height(t, 0), 3);
    tt_round_trip(t);
    tb_topology_destroy(t);
}

TEST(heights_drop_along_the_chain_when_the_deepest_branch_goes)
{
    tb_topology_t *t = tt_parse_text("r:0 => a:0 b:0 ; a:0 => a:1 ; a:1 => a:2 ; a:2 => a:3 ;");
    REQUIRE(t);
    CHECK_UINT(tb_topology_height(t, 0), 4);
    tbon_rank_t a2 = tb_topology_find(t, "a", 2);
    CHECK_INT(tb_topology_remove(t, a2), 0);
    CHECK_UINT(tb_topology_height(t, 0), 2);
    CHECK_UINT(tb_topology_height(t, 1), 1);
    CHECK_INT(tb_topology_remove(t, 1), 0);
    CHECK_UINT(tb_topology_height(t, 0), 1);
    tt_round_trip(t);
    tb_topology_destroy(t);
}

TEST(reparent_moves_subtree_and_bumps_incarnation)
{
    tb_topology_t *t = tt_parse_text(small);
    REQUIRE(t);
    CHECK_INT(tb_topology_remove(t, 2), 0);   /* b:0 dies; e:0 (5) orphaned */
    CHECK_INT(tb_topology_reparent(t, 5, 1), 0);
    CHECK_UINT(tb_topology_parent(t, 5), 1);
    CHECK_STR(kids(t, 1), "3 4 5");
    CHECK_UINT(tb_topology_depth(t, 5), 2);
    CHECK_UINT(tb_topology_incarnation(t, 5), 1);
    CHECK_UINT(tb_topology_root_of(t, 5), 0);
    tt_round_trip(t);

    /* Moving a whole attached subtree: a:0 (with c:0 c:1 e:0) under... the FE
     * is its parent already; the same parent still counts as an adoption. */
    CHECK_INT(tb_topology_reparent(t, 1, 0), 0);
    CHECK_UINT(tb_topology_incarnation(t, 1), 1);
    CHECK_STR(kids(t, 0), "1");
    tt_round_trip(t);
    tb_topology_destroy(t);
}

TEST(reparent_inserts_in_rank_order_and_updates_both_chains)
{
    tb_topology_t *t = sample("local-4x4x4.top");
    REQUIRE(t);
    /* Move commnode 8 (under 1, with 4 leaves) to commnode 20 (under 4). */
    CHECK_INT(tb_topology_reparent(t, 8, 20), 0);
    CHECK_UINT(tb_topology_depth(t, 8), 3);
    CHECK_UINT(tb_topology_depth(t, 33), 4);
    CHECK_UINT(tb_topology_height(t, 20), 2);
    CHECK_UINT(tb_topology_height(t, 4), 3);
    CHECK_UINT(tb_topology_height(t, 0), 4);
    CHECK_UINT(tb_topology_height(t, 1), 2);
    CHECK_STR(kids(t, 1), "5 6 7");
    CHECK_STR(kids(t, 20), "8 81 82 83 84");
    tt_round_trip(t);
    /* And back under 1: the height of 4 and 0 drop again. */
    CHECK_INT(tb_topology_reparent(t, 8, 1), 0);
    CHECK_STR(kids(t, 1), "5 6 7 8");
    CHECK_UINT(tb_topology_height(t, 0), 3);
    CHECK_UINT(tb_topology_height(t, 4), 2);
    CHECK_UINT(tb_topology_incarnation(t, 8), 2);
    tt_round_trip(t);
    tb_topology_destroy(t);
}

TEST(reparent_refuses_cycles_and_dead_or_backend_targets)
{
    tb_topology_t *t = sample("local-4x4x4.top");
    REQUIRE(t);
    uint64_t d = tb_topology_digest(t);
    CHECK_INT(tb_topology_reparent(t, 1, 5), TBON_ETOPOLOGY);   /* into own subtree */
    CHECK_INT(tb_topology_reparent(t, 1, 1), TBON_ETOPOLOGY);   /* itself */
    CHECK_INT(tb_topology_reparent(t, 0, 2), TBON_ETOPOLOGY);   /* the FE */
    CHECK_INT(tb_topology_reparent(t, 5, 21), TBON_ETOPOLOGY);  /* under a BE */
    CHECK_INT(tb_topology_reparent(t, 5, 26), TBON_ETOPOLOGY);  /* BE of another branch */
    CHECK_UINT(tb_topology_digest(t), d);
    CHECK_INT(tb_topology_remove(t, 2), 0);
    CHECK_INT(tb_topology_reparent(t, 5, 2), TBON_ETOPOLOGY);   /* dead target */
    CHECK_INT(tb_topology_reparent(t, 2, 1), TBON_ETOPOLOGY);   /* dead node */
    /* The orphan 9 (was under 2) goes under 1; then 1 cannot go under 9. */
    CHECK_INT(tb_topology_reparent(t, 9, 1), 0);
    CHECK_UINT(tb_topology_incarnation(t, 9), 1);
    CHECK_INT(tb_topology_reparent(t, 1, 9), TBON_ETOPOLOGY);
    CHECK_UINT(tb_topology_incarnation(t, 1), 0);
    tt_round_trip(t);
    tb_topology_destroy(t);
}

TEST(set_incarnation_and_port)
{
    tb_topology_t *t = tt_parse_text(small);
    REQUIRE(t);
    uint64_t d = tb_topology_digest(t);
    CHECK_INT(tb_topology_set_port(t, 3, 40000), 0);
    CHECK_UINT(tb_topology_port(t, 3), 40000);
    CHECK_UINT(tb_topology_digest(t), d);           /* ports are not in the digest */
    CHECK_INT(tb_topology_set_incarnation(t, 3, 7), 0);
    CHECK_UINT(tb_topology_incarnation(t, 3), 7);
    CHECK(tb_topology_digest(t) != d);
    CHECK_INT(tb_topology_set_incarnation(t, 3, 0), 0);
    CHECK_UINT(tb_topology_digest(t), d);           /* the digest is a function */
    tb_topology_destroy(t);
}

TEST(set_role)
{
    tb_topology_t *t = tt_parse_text(small);
    REQUIRE(t);
    CHECK_INT(tb_topology_set_role(t, 3, TB_ROLE_COMMNODE), 0);
    CHECK_UINT(tb_topology_num_leaves(t), 2);
    CHECK_INT(tb_topology_set_role(t, 3, TB_ROLE_BE), 0);
    CHECK_UINT(tb_topology_num_leaves(t), 3);
    CHECK_INT(tb_topology_set_role(t, 1, TB_ROLE_BE), TBON_ETOPOLOGY);  /* has children */
    CHECK_INT(tb_topology_set_role(t, 0, TB_ROLE_COMMNODE), TBON_ETOPOLOGY);
    CHECK_INT(tb_topology_set_role(t, 3, TB_ROLE_FE), TBON_ETOPOLOGY);
    CHECK_INT(tb_topology_set_role(t, 3, (tb_role_t)7), TBON_EINVAL);
    tt_round_trip(t);
    tb_topology_destroy(t);
}

TEST(add_child_joins)
{
    tb_topology_t *t = tt_parse_text(small);
    REQUIRE(t);
    tbon_rank_t r = 0;
    CHECK_INT(tb_topology_add_child(t, 2, "new", 0, TB_ROLE_COMMNODE, &r), 0);
    CHECK_UINT(r, 6);
    CHECK_UINT(tb_topology_size(t), 7);
    CHECK_STR(kids(t, 2), "5 6");
    CHECK_UINT(tb_topology_depth(t, 6), 2);
    CHECK_UINT(tb_topology_find(t, "new", 0), 6);
    CHECK_INT(tb_topology_add_child(t, 6, "new", 1, TB_ROLE_BE, &r), 0);
    CHECK_UINT(r, 7);
    CHECK_UINT(tb_topology_height(t, 0), 3);
    CHECK_UINT(tb_topology_num_leaves(t), 4);
    CHECK_INT(tb_topology_add_child(t, 7, "new", 2, TB_ROLE_BE, &r), TBON_ETOPOLOGY); /* BE */
    CHECK_INT(tb_topology_add_child(t, 6, "new", 1, TB_ROLE_BE, &r), TBON_ETOPOLOGY); /* dup */
    CHECK_INT(tb_topology_add_child(t, 6, "new", 2, TB_ROLE_FE, &r), TBON_EINVAL);
    CHECK_INT(tb_topology_add_child(t, 6, "b d", 2, TB_ROLE_BE, &r), TBON_EINVAL);
    CHECK_INT(tb_topology_add_child(t, 99, "x", 2, TB_ROLE_BE, &r), TBON_EINVAL);
    CHECK_INT(tb_topology_remove(t, 6), 0);
    CHECK_INT(tb_topology_add_child(t, 6, "x", 0, TB_ROLE_BE, &r), TBON_ETOPOLOGY); /* dead */
    tt_round_trip(t);
    tb_topology_destroy(t);
}

TEST(many_joins_under_one_parent_grow_and_compact_the_pool)
{
    tb_topology_t *t = sample("local-4x4.top");
    REQUIRE(t);
    /* Alternate joins between two parents so that arrays keep moving. */
    for (uint32_t i = 0; i < 20000; i++) {
        tbon_rank_t r;
        REQUIRE(tb_topology_add_child(t, 1 + i % 4, "j", i, TB_ROLE_BE, &r) == 0);
        CHECK_UINT(r, 21 + i);
    }
    CHECK_UINT(tb_topology_num_children(t, 1), 4 + 5000);
    size_t n;
    const tbon_rank_t *c = tb_topology_children(t, 2, &n);
    REQUIRE(n == 5004);
    for (size_t i = 1; i < n; i++)
        CHECK(c[i - 1] < c[i]);
    /* Moves between the big arrays keep rank order too. */
    CHECK_INT(tb_topology_reparent(t, 22, 1), 0);
    CHECK_INT(tb_topology_reparent(t, 5, 4), 0);
    tt_round_trip(t);
    tb_topology_destroy(t);
}

TEST(equal_and_digest_see_every_field)
{
    tb_topology_t *a = tt_parse_text(small), *b = tt_parse_text(small);
    REQUIRE(a && b);
    CHECK(tb_topology_equal(a, b));
    CHECK_UINT(tb_topology_digest(a), tb_topology_digest(b));
    CHECK_INT(tb_topology_set_port(b, 4, 1), 0);
    CHECK(!tb_topology_equal(a, b));
    CHECK_INT(tb_topology_set_port(b, 4, 0), 0);
    CHECK(tb_topology_equal(a, b));
    tb_topology_t *c = tt_parse_text("fe:0 => a:0 b:0 ;\na:0 => c:0 c:2 ;\nb:0 => e:0 ;\n");
    tb_topology_t *d = tt_parse_text("fe:0 => a:0 b:0 ;\na:0 => c:0 c:1 ;\nb:0 => f:0 ;\n");
    tb_topology_t *e = tt_parse_text("fe:0 => a:0 b:0 ;\na:0 => c:0 ;\nb:0 => c:1 e:0 ;\n");
    REQUIRE(c && d && e);
    CHECK(!tb_topology_equal(a, c));
    CHECK(!tb_topology_equal(a, d));
    CHECK(!tb_topology_equal(a, e));
    CHECK(tb_topology_digest(a) != tb_topology_digest(c));
    CHECK(tb_topology_digest(a) != tb_topology_digest(d));
    CHECK(tb_topology_digest(a) != tb_topology_digest(e));
    CHECK(!tb_topology_equal(a, NULL));
    /* The same mutations in either order give the same topology. */
    CHECK_INT(tb_topology_remove(a, 1), 0);
    CHECK_INT(tb_topology_reparent(a, 3, 2), 0);
    CHECK_INT(tb_topology_remove(b, 1), 0);
    CHECK_INT(tb_topology_reparent(b, 3, 2), 0);
    CHECK(tb_topology_equal(a, b));
    CHECK_UINT(tb_topology_digest(a), tb_topology_digest(b));
    tb_topology_destroy(a);
    tb_topology_destroy(b);
    tb_topology_destroy(c);
    tb_topology_destroy(d);
    tb_topology_destroy(e);
}

TEST(clone_is_deep_and_equal)
{
    tb_topology_t *t = sample("local-4x4x4.top");
    REQUIRE(t);
    CHECK_INT(tb_topology_remove(t, 2), 0);
    CHECK_INT(tb_topology_reparent(t, 9, 3), 0);
    CHECK_INT(tb_topology_set_port(t, 9, 5555), 0);
    tb_topology_t *c = tb_topology_clone(t);
    REQUIRE(c);
    CHECK(tb_topology_equal(t, c));
    CHECK_UINT(tb_topology_digest(t), tb_topology_digest(c));
    CHECK_INT(tb_topology_reparent(c, 10, 3), 0);
    CHECK(!tb_topology_equal(t, c));
    CHECK_UINT(tb_topology_parent(t, 10), TBON_RANK_NONE);
    CHECK_UINT(tb_topology_find(c, "localhost", 84), 84);
    tb_topology_destroy(c);
    tb_topology_destroy(t);
}

/* Random mutations against a full rebuild, on a 4x4x4 tree plus joins. */
TEST(random_mutations_stay_consistent)
{
    tb_topology_t *t = sample("local-4x4x4.top");
    REQUIRE(t);
    srand(12345);
    int ok = 0;
    for (int step = 0; step < 1000; step++) {
        tbon_rank_t n = (tbon_rank_t)tb_topology_size(t);
        /* Half the targets among the original FE and commnodes (ranks < 21). */
        tbon_rank_t a = (tbon_rank_t)rand() % n;
        tbon_rank_t b = (tbon_rank_t)rand() % (rand() % 2 ? 21 : n);
        switch (rand() % 4) {
        case 0:
            if (rand() % 3 == 0 && tb_topology_remove(t, a) == 0)
                ok++;
            break;
        case 1: case 2: {
            bool legal = a != 0 && tb_topology_alive(t, a) && tb_topology_alive(t, b) &&
                         tb_topology_role(t, b) != TB_ROLE_BE &&
                         !tb_topology_in_subtree(t, a, b);
            int rc = tb_topology_reparent(t, a, b);
            CHECK_INT(rc, legal ? 0 : TBON_ETOPOLOGY);
            ok += rc == 0;
            break;
        }
        default: {
            tbon_rank_t r;
            if (tb_topology_add_child(t, b, "j", (uint32_t)step, rand() % 2 ? TB_ROLE_BE
                                      : TB_ROLE_COMMNODE, &r) == 0)
                ok++;
            /* A dead node comes back now and then (a restart). */
            if (!tb_topology_alive(t, a) && rand() % 2 &&
                tb_topology_revive(t, a, b, (uint32_t)step) == 0)
                ok++;
        }
        }
        /* The count of childless commnodes follows every change. */
        size_t bare = 0;
        for (tbon_rank_t r = 1; r < tb_topology_size(t); r++)
            bare += tb_topology_alive(t, r) && tb_topology_role(t, r) == TB_ROLE_COMMNODE &&
                    tb_topology_num_children(t, r) == 0;
        CHECK_UINT(tb_topology_num_childless(t), bare);
        if (step % 50 == 0)
            tt_round_trip(t);
    }
    CHECK(ok > 250);
    tt_round_trip(t);
    /* Whatever happened, parents are acyclic: every path ends at a root. */
    for (tbon_rank_t r = 0; r < tb_topology_size(t); r++) {
        tbon_rank_t path[512];
        size_t len = tb_topology_path(t, r, path, 512);
        CHECK(len >= 1 && len <= 512);
        CHECK_UINT(len, tb_topology_depth(t, r) + 1);
    }
    tb_topology_destroy(t);
}
