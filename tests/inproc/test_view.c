/* test_view.c - membership views in one process (ft/view.c): a commnode's
 * view acknowledgements, with the test as its parent and children (what the
 * whole subtree applied, only once every live child has; a gap asked for
 * again); the FE's view after a failure going down and coming back stable
 * through real nodes; and the consistency check, which names the node whose
 * copy of the topology differs (the copy is changed before that node takes
 * it: no hook in the library). */
#include "../harness.h"

#include <stdlib.h>

#include "fabric.h"
#include "api/net_int.h"

/* FE 0 - commnode 1 - back-ends 2 and 3 */
#define TREE "h:0 => h:1 ; h:1 => h:2 h:3 ;"

static const tbon_rank_t BES[] = { 2, 3 };

/* TB_CTL_VIEW v following prev, with one change (kind 0: none). */
static tbon_packet_t *view_pkt(uint64_t v, uint64_t prev, int32_t kind, tbon_rank_t r,
                               tbon_rank_t parent)
{
    size_t k = kind ? 1 : 0;
    int32_t kinds[1] = { kind };
    uint32_t ranks[1] = { r }, parents[1] = { parent }, incs[1] = { 0 }, lids[1] = { 0 },
             ports[1] = { 0 };
    const char *hosts[1] = { "" };
    return tbon_packet_new(TB_CTL_VIEW, "%uld %uld %ad %aud %aud %aud %as %aud %aud", v, prev,
                           kinds, k, ranks, k, parents, k, incs, k, hosts, k, lids, k, ports, k);
}

/* The next frame at pe is TB_CTL_VIEW v following prev with n changes. */
static void expect_view(fab_peer_t *pe, uint64_t v, uint64_t prev, size_t n)
{
    tbon_packet_t *p = fab_peer_expect_ctl(pe, TB_CTL_VIEW, FAB_MS);
    if (!p)
        return;
    uint64_t gv = 0, gprev = 0;
    int32_t *kinds = NULL;
    uint32_t *r = NULL, *par = NULL, *inc = NULL, *lid = NULL, *port = NULL;
    char **hosts = NULL;
    size_t nk = 0, nr = 0, np = 0, ni = 0, nh = 0, nl = 0, npo = 0;
    CHECK_INT(tbon_packet_unpack(p, "%uld %uld %ad %aud %aud %aud %as %aud %aud", &gv, &gprev,
                                 &kinds, &nk, &r, &nr, &par, &np, &inc, &ni, &hosts, &nh, &lid,
                                 &nl, &port, &npo), 0);
    CHECK_UINT(gv, v);
    CHECK_UINT(gprev, prev);
    CHECK_UINT(nk, n);
    free(kinds);
    free(r);
    free(par);
    free(inc);
    free(lid);
    free(port);
    for (size_t i = 0; i < nh; i++)
        free(hosts[i]);
    free(hosts);
    tbon_packet_unref(p);
}

/* The next frame at pe is TB_CTL_VIEW_ACK (applied, subtree, want). */
static void expect_ack(fab_peer_t *pe, uint64_t applied, uint64_t sub, int want)
{
    tbon_packet_t *p = fab_peer_expect_ctl(pe, TB_CTL_VIEW_ACK, FAB_MS);
    if (!p)
        return;
    uint64_t a = 0, s = 0;
    int w = -1;
    CHECK_INT(tbon_packet_unpack(p, "%uld %uld %d", &a, &s, &w), 0);
    CHECK_UINT(a, applied);
    CHECK_UINT(s, sub);
    CHECK_INT(w, want);
    tbon_packet_unref(p);
}

static void ack(fab_peer_t *pe, uint64_t applied, uint64_t sub, int want)
{
    fab_peer_ctl(pe, TB_CTL_VIEW_ACK,
                 tbon_packet_new(TB_CTL_VIEW_ACK, "%uld %uld %d", applied, sub, want));
}

/* The next frame at pe is DATA on stream with value v. */
static void expect_data(fab_peer_t *pe, uint32_t stream, long v)
{
    fab_msg_t m;
    CHECK_INT(fab_peer_next(pe, &m, FAB_MS), 1);
    CHECK_UINT(m.hdr.type, TB_FRAME_DATA);
    CHECK_UINT(m.hdr.stream, stream);
    CHECK_INT(m.pkt ? fab_long(m.pkt) : -1, v);
    fab_msg_clear(&m);
}

/* Commnode 1 between the test as its parent (0) and as its children (2, 3):
 * a version is acknowledged at once as applied here (subtree still 1), and
 * for the whole subtree only once both children have acknowledged it (a
 * marker that child 2 sends after its own acknowledgement comes up first);
 * a child whose link ends is no longer waited for (and its failure goes up
 * as a report); a version after a gap is not applied but asked for again
 * (want = 1), and the versions sent then reach the child in order. */
TEST(acknowledgements_aggregate_the_subtree)
{
    fab_t *f = fab_new(TREE);
    REQUIRE(f);
    fab_peer_t *p0 = NULL;
    fab_node_t *cn = fab_node_under_peer(f, 1, &p0);
    REQUIRE(cn && p0);
    fab_peer_t *p2 = fab_peer_under(f, cn, 2);
    fab_peer_t *p3 = fab_peer_under(f, cn, 3);
    REQUIRE(p2 && p3);
    tbon_packet_t *p = fab_peer_expect_ctl(p0, TB_CTL_PORT, FAB_MS);
    tbon_packet_unref(p);
    p = fab_peer_expect_ctl(p0, TB_CTL_READY, FAB_MS);
    uint32_t count = 0;
    CHECK(p && tbon_packet_unpack(p, "%ud", &count) == 0);
    CHECK_UINT(count, 3);
    tbon_packet_unref(p);
    /* a stream for markers: child 2 -> commnode -> the test, at once */
    fab_peer_ctl(p0, TB_CTL_STREAM, tbon_packet_new(TB_CTL_STREAM, "%ud %d %d %ud %d %aud", 5u,
                                                     TBON_FILTER_NULL, TBON_SYNC_DONTWAIT, 0u,
                                                     TBON_FILTER_NULL, BES, (size_t)2));
    tbon_packet_unref(fab_peer_expect_ctl(p2, TB_CTL_STREAM, FAB_MS));
    tbon_packet_unref(fab_peer_expect_ctl(p3, TB_CTL_STREAM, FAB_MS));

    /* version 2: applied here at once, the subtree follows its slowest child */
    fab_peer_ctl(p0, TB_CTL_VIEW, view_pkt(2, 1, TB_V_JOINED, 2, 1));
    expect_view(p2, 2, 1, 1);
    expect_view(p3, 2, 1, 1);
    expect_ack(p0, 2, 1, 0);
    size_t nch = 0;
    CHECK(fab_wait_view(cn, 2, FAB_MS, &nch));
    CHECK_UINT(nch, 1);
    ack(p2, 2, 2, 0);
    fab_peer_data(p2, 5, 0, 0, tbon_packet_new(1, "%ld", 1L));
    expect_data(p0, 5, 1);          /* child 2's ack is in: no ack went up */
    ack(p3, 2, 2, 0);
    expect_ack(p0, 2, 2, 0);

    /* version 3: child 3 acknowledges nothing, its link ends */
    fab_peer_ctl(p0, TB_CTL_VIEW, view_pkt(3, 2, 0, 0, 0));
    expect_view(p2, 3, 2, 0);
    expect_view(p3, 3, 2, 0);
    expect_ack(p0, 3, 2, 0);
    ack(p2, 3, 3, 0);
    fab_peer_data(p2, 5, 0, 0, tbon_packet_new(1, "%ld", 2L));
    expect_data(p0, 5, 2);
    fab_peer_close(p3);
    expect_ack(p0, 3, 3, 0);
    p = fab_peer_expect_ctl(p0, TB_CTL_REPORT, FAB_MS);
    int kind = 0;
    uint32_t r = 0, par = 0, inc = 9;
    uint64_t *us = NULL;
    size_t nus = 0;
    CHECK(p && tbon_packet_unpack(p, "%d %ud %ud %ud %auld", &kind, &r, &par, &inc, &us,
                                  &nus) == 0);
    CHECK_INT(kind, TB_V_FAILED);
    CHECK_UINT(r, 3);
    CHECK_UINT(inc, 0);
    free(us);
    tbon_packet_unref(p);

    /* version 5 after a gap (4 never came): asked for again, not applied */
    fab_peer_ctl(p0, TB_CTL_VIEW, view_pkt(5, 4, 0, 0, 0));
    expect_ack(p0, 3, 3, 1);
    fab_peer_ctl(p0, TB_CTL_VIEW, view_pkt(4, 3, 0, 0, 0));
    fab_peer_ctl(p0, TB_CTL_VIEW, view_pkt(5, 4, 0, 0, 0));
    expect_view(p2, 4, 3, 0);
    expect_view(p2, 5, 4, 0);
    expect_ack(p0, 4, 3, 0);
    expect_ack(p0, 5, 3, 0);
    ack(p2, 5, 5, 0);
    expect_ack(p0, 5, 5, 0);
    fab_peer_quiet(p0, 100);
    fab_free(f);
}

/* Through real nodes: back-end 3 (the test) goes away; the commnode reports
 * it, the FE makes version 2 of the view from it, every live node applies
 * it, and once it is back from all of them the FE says the view is stable:
 * exactly NODE_FAILED 3, then VIEW_STABLE 2. A consistency check then finds
 * the live nodes 0, 1 and 2 agreeing. */
TEST(a_failure_makes_a_view_that_comes_back_stable)
{
    fab_t *f = fab_new(TREE);
    REQUIRE(f);
    fab_node_t *fe = fab_fe(f);
    fab_node_t *cn = fab_node_under(f, fe, 1, NULL);
    fab_node_t *b2 = fab_node_under(f, cn, 2, NULL);
    fab_peer_t *p3 = fab_peer_under(f, cn, 3);
    if (fe && cn && b2 && p3 && fab_wait_status(fe, TB_NODE_READY, FAB_MS)) {
        /* the port table has reached 3 (and so 2): fault tolerance is on */
        tbon_packet_unref(fab_peer_until_ctl(p3, TB_CTL_PORTS, FAB_MS));
        fab_peer_close(p3);
        tbon_event_t ev;
        CHECK(fab_take_event(fe, &ev, FAB_MS));
        CHECK_INT(ev.type, TBON_EV_NODE_FAILED);
        CHECK_UINT(ev.rank, 3);
        CHECK(fab_take_event(fe, &ev, FAB_MS));
        CHECK_INT(ev.type, TBON_EV_VIEW_STABLE);
        CHECK_UINT(ev.view_version, 2);
        size_t n0 = 0, n1 = 0, n2 = 0;
        CHECK(fab_wait_view(fe, 2, FAB_MS, &n0));
        CHECK(fab_wait_view(cn, 2, FAB_MS, &n1));
        CHECK(fab_wait_view(b2, 2, FAB_MS, &n2));
        CHECK_UINT(n0, 1);
        CHECK_UINT(n1, 1);
        CHECK_UINT(n2, 1);
        tb_cmd_t *c = tb_cmd_check(1);
        REQUIRE(c);
        fab_post(fe, c);
        tbon_rank_t *agree = NULL, *bad = NULL;
        size_t na = 0, nb = 0;
        CHECK(fab_take_checked(fe, 1, FAB_MS, &agree, &na, &bad, &nb));
        CHECK_UINT(na, 3);
        CHECK_UINT(nb, 0);
        for (size_t i = 0; i < na && i < 3; i++)
            CHECK_UINT(agree[i], i);
        free(agree);
        free(bad);
        CHECK(!fab_take_event(fe, &ev, 100));      /* nothing more */
    } else {
        CHECK(!"the tree did not come up");
    }
    fab_free(f);
}

/* A copy of the topology that differs (what TBON_TEST_CORRUPT_VIEW did in
 * the library before): the rank's own incarnation off by 7. */
static void spoil(tb_topology_t *t, tbon_rank_t r)
{
    tb_topology_set_incarnation(t, r, tb_topology_incarnation(t, r) + 7);
}

/* The children of a spoilt commnode 2 get their copy from it: they are given
 * back the true one (rank 2 at incarnation 0), as if it had been spoilt
 * after they connected. */
static void unspoil_2(tb_topology_t *t, tbon_rank_t r)
{
    (void)r;
    tb_topology_set_incarnation(t, 2, 0);
}

/* FE 0, commnodes 1 and 2, back-ends 3 to 6 as nodes, rank bad's copy
 * spoilt; tbon_fe_check_views through the API names it, and only it. */
static void check_with_spoilt(tbon_rank_t bad)
{
    fab_t *f = fab_new("h:0 => h:1 h:2 ; h:1 => h:3 h:4 ; h:2 => h:5 h:6 ;");
    REQUIRE(f);
    CHECK_UINT(tb_topology_parent(fab_topo(f), 5), 2);
    CHECK_UINT(tb_topology_incarnation(fab_topo(f), 2), 0);
    tbon_net_t *net = tb_net_alloc(1);
    REQUIRE(net);
    net->topo = tb_topology_clone(fab_topo(f));
    tb_node_cbs_t cbs = tb_net_callbacks(net);
    fab_node_t *fe = fab_fe_also(f, &cbs);
    if (fe) {
        net->node = fab_tb(fe);
        fab_node_t *c1 = fab_node_under(f, fe, 1, bad == 1 ? spoil : NULL);
        fab_node_t *c2 = fab_node_under(f, fe, 2, bad == 2 ? spoil : NULL);
        for (tbon_rank_t r = 3; r <= 6 && c1 && c2; r++)
            fab_node_under(f, r < 5 ? c1 : c2, r,
                           r == bad ? spoil : bad == 2 && r >= 5 ? unspoil_2 : NULL);
        REQUIRE(fab_wait_status(fe, TB_NODE_READY, FAB_MS));
        tbon_view_check_t c;
        CHECK_INT(tbon_fe_check_views(net, &c, FAB_MS), TBON_ETOPOLOGY);
        CHECK_UINT(c.nodes, 7);
        CHECK_UINT(c.agree, 6);
        CHECK_UINT(c.ndisagree, 1);
        CHECK_UINT(c.disagree[0], bad);
        CHECK_UINT(c.nmissing, 0);
        CHECK(strstr(tbon_net_error(net), "1 of 7") != NULL);
        /* Bad arguments are refused. */
        CHECK_INT(tbon_fe_check_views(net, NULL, 10), TBON_EINVAL);
        CHECK_INT(tbon_fe_check_views(NULL, &c, 10), TBON_EINVAL);
    }
    fab_free(f);        /* the FE's callbacks reach net until here */
    tb_net_free(net);
}

/* The check fails for a real difference (the copy is changed before the
 * node takes it: no hook in the library): a commnode's, its children
 * agreeing; a back-end's, through its commnode. */
TEST(check_finds_a_corrupted_copy)
{
    check_with_spoilt(2);
}

TEST(check_finds_a_corrupted_back_end_copy)
{
    check_with_spoilt(5);
}
