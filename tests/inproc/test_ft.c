/* test_ft.c - fault tolerance in one process (ft/recovery.c, node_wave.c, node_exact.c):
 * reports of failures forwarded once and held until a view brings them
 * back; an orphan's hand-off to its adopter (its streams grafted, its filter
 * state and buffered output sent up, held reports sent again), seen from
 * the orphan with the test as every neighbour; the adopter's side, where
 * the adopted child's late and new units join the right waves and requests
 * it saw are not sent again; and a whole adoption between real nodes. */
#include "../harness.h"

#include <stdlib.h>
#include <unistd.h>

#include "fabric.h"

/* FE 0; commnodes 1 and 2 under it; commnode 3 under 1, back-end 4 under 2;
 * back-ends 5 and 6 under 3. */
#define TREE "h:0 => h:1 h:2 ; h:1 => h:3 ; h:2 => h:4 ; h:3 => h:5 h:6 ;"

#define KEY(q, i) (((uint64_t)(q) << 24) | (i))

static const uint64_t ZERO_US[5] = { 0, 0, 0, 0, 0 };

static tbon_packet_t *set_pkt(const uint64_t *v, size_t n)
{
    return tbon_packet_new(1, "%auld", v, n);
}

/* p is the "%auld" set want[0..n) exactly. */
static void check_set(const tbon_packet_t *p, const uint64_t *want, size_t n, int line)
{
    uint64_t *v = NULL;
    size_t k = 0;
    if (!p || tbon_packet_unpack(p, "%auld", &v, &k) != 0) {
        th_fail(__FILE__, line, "not a \"%%auld\" packet");
        return;
    }
    if (k != n || (n && memcmp(v, want, n * sizeof *v) != 0)) {
        char got[256] = "";
        for (size_t i = 0, o = 0; i < k && o < sizeof got - 24; i++)
            o += (size_t)snprintf(got + o, sizeof got - o, " %llu", (unsigned long long)v[i]);
        th_fail(__FILE__, line, "set {%s } is not the one expected (%zu values)", got, n);
    }
    free(v);
}
#define CHECK_SET(p, ...) do { const uint64_t w_[] = { __VA_ARGS__ };          \
    check_set((p), w_, sizeof w_ / sizeof w_[0], __LINE__); } while (0)

static tbon_packet_t *report_pkt(int kind, tbon_rank_t r, tbon_rank_t parent, uint32_t inc)
{
    return tbon_packet_new(TB_CTL_REPORT, "%d %ud %ud %ud %auld", kind, r, parent, inc, ZERO_US,
                           (size_t)5);
}

/* The next frame at pe is TB_CTL_REPORT kind of r (parent, incarnation);
 * lossy: its fifth time (1: a stream may have lost data), or -1 (unchecked). */
static void expect_report(fab_peer_t *pe, int kind, tbon_rank_t r, tbon_rank_t parent,
                          uint32_t inc, int lossy, int line)
{
    tbon_packet_t *p = fab_peer_expect_ctl(pe, TB_CTL_REPORT, FAB_MS);
    int k = 0;
    uint32_t gr = 0, gp = 0, gi = 0;
    uint64_t *us = NULL;
    size_t nus = 0;
    if (!p || tbon_packet_unpack(p, "%d %ud %ud %ud %auld", &k, &gr, &gp, &gi, &us, &nus)) {
        th_fail(__FILE__, line, "no report");
    } else if (k != kind || gr != r || gp != parent || gi != inc || nus != 5 ||
               (lossy >= 0 && us[4] != (uint64_t)lossy)) {
        th_fail(__FILE__, line, "report kind %d rank %u parent %u inc %u (lost %llu), expected "
                "kind %d rank %u parent %u inc %u", k, gr, gp, gi,
                nus == 5 ? (unsigned long long)us[4] : 99ull, kind, r, parent, inc);
    }
    free(us);
    tbon_packet_unref(p);
}

/* The next frame at pe is DATA on stream with key; its packet. */
static tbon_packet_t *expect_data(fab_peer_t *pe, uint32_t stream, uint64_t key, int line)
{
    fab_msg_t m;
    int rc = fab_peer_next(pe, &m, FAB_MS);
    if (rc != 1 || m.hdr.type != TB_FRAME_DATA || m.hdr.stream != stream || m.hdr.key != key) {
        th_fail(__FILE__, line, "expected DATA on stream %u with key %#llx, got %s %d stream "
                "%u key %#llx", stream, (unsigned long long)key,
                rc == 1 ? tb_frame_type_name(m.hdr.type) : "nothing", m.hdr.tag, m.hdr.stream,
                (unsigned long long)m.hdr.key);
        fab_msg_clear(&m);
        return NULL;
    }
    return m.pkt;
}

/* TB_CTL_GRAFT for stream id: the last key sent up and the last request
 * seen. */
static void expect_graft(fab_peer_t *pe, uint32_t id, uint64_t sent, uint64_t seen, int line)
{
    tbon_packet_t *p = fab_peer_expect_ctl(pe, TB_CTL_GRAFT, FAB_MS);
    uint32_t gid = 0, timeout = 0;
    int up, sync, down;
    uint32_t *members = NULL;
    size_t nm = 0;
    uint64_t gs = 0, gq = 0;
    if (!p || tbon_packet_unpack(p, "%ud %d %d %ud %d %aud %uld %uld", &gid, &up, &sync,
                                 &timeout, &down, &members, &nm, &gs, &gq) != 0)
        th_fail(__FILE__, line, "no graft");
    else if (gid != id || gs != sent || gq != seen)
        th_fail(__FILE__, line, "graft of stream %u (sent %#llx, seen %llu), expected %u "
                "(%#llx, %llu)", gid, (unsigned long long)gs, (unsigned long long)gq, id,
                (unsigned long long)sent, (unsigned long long)seen);
    free(members);
    tbon_packet_unref(p);
}

static tbon_packet_t *stream_pkt(uint32_t id, int up, int sync, const tbon_rank_t *m, size_t n)
{
    return tbon_packet_new(TB_CTL_STREAM, "%ud %d %d %ud %d %aud", id, up, sync, 0u,
                           TBON_FILTER_NULL, m, n);
}

static tbon_packet_t *view_pkt(uint64_t v, uint64_t prev, int32_t kind, tbon_rank_t r)
{
    int32_t kinds[1] = { kind };
    uint32_t ranks[1] = { r }, parents[1] = { TBON_RANK_NONE }, zero[1] = { 0 };
    const char *hosts[1] = { "" };
    size_t k = 1;
    return tbon_packet_new(TB_CTL_VIEW, "%uld %uld %ad %aud %aud %aud %as %aud %aud", v, prev,
                           kinds, k, ranks, k, parents, k, zero, k, hosts, k, zero, k, zero, k);
}

/* Child pe asks its parent for every view again (applied 0), as a child
 * that lost track does, and acknowledges version v after: the whole view
 * that comes back shows what the parent's copy holds now, and that it has
 * taken what pe sent before. 1 if that copy has rank r failed. */
static int parent_has_failed(fab_peer_t *pe, uint64_t v, tbon_rank_t r)
{
    fab_peer_ctl(pe, TB_CTL_VIEW_ACK, tbon_packet_new(TB_CTL_VIEW_ACK, "%uld %uld %d", 0ul, 0ul,
                                                      1));
    tbon_packet_t *p = fab_peer_expect_ctl(pe, TB_CTL_VIEW, FAB_MS);
    fab_peer_ctl(pe, TB_CTL_VIEW_ACK, tbon_packet_new(TB_CTL_VIEW_ACK, "%uld %uld %d", v, v, 0));
    uint64_t gv = 0, prev = 1;
    int32_t *kinds = NULL;
    uint32_t *rk = NULL, *par = NULL, *inc = NULL, *lid = NULL, *port = NULL;
    char **hosts = NULL;
    size_t nk = 0, nr = 0, np = 0, ni = 0, nh = 0, nl = 0, npo = 0;
    int found = 0;
    if (p && tbon_packet_unpack(p, "%uld %uld %ad %aud %aud %aud %as %aud %aud", &gv, &prev,
                                &kinds, &nk, &rk, &nr, &par, &np, &inc, &ni, &hosts, &nh, &lid,
                                &nl, &port, &npo) == 0) {
        CHECK_UINT(gv, v);
        CHECK_UINT(prev, 0);        /* whole */
        for (size_t i = 0; i < nk && i < nr; i++)
            found |= kinds[i] == TB_V_FAILED && rk[i] == r;
    } else {
        th_fail(__FILE__, __LINE__, "no whole view");
    }
    free(kinds);
    free(rk);
    free(par);
    free(inc);
    free(lid);
    free(port);
    for (size_t i = 0; i < nh; i++)
        free(hosts[i]);
    free(hosts);
    tbon_packet_unref(p);
    return found;
}

/* Commnode 3 as a node, up, with fault tolerance on (the test sent the
 * empty port table), its parent 1 and children 5 and 6 played by the test. */
static fab_t *commnode_3(fab_node_t **cn, fab_peer_t **p1, fab_peer_t **p5, fab_peer_t **p6)
{
    fab_t *f = fab_new(TREE);
    if (!f)
        return NULL;
    *p1 = NULL;
    *cn = fab_node_under_peer(f, 3, p1);
    *p5 = *cn ? fab_peer_under(f, *cn, 5) : NULL;
    *p6 = *cn ? fab_peer_under(f, *cn, 6) : NULL;
    if (!*cn || !*p1 || !*p5 || !*p6) {
        fab_free(f);
        return NULL;
    }
    tbon_packet_unref(fab_peer_expect_ctl(*p1, TB_CTL_PORT, FAB_MS));
    tbon_packet_unref(fab_peer_expect_ctl(*p1, TB_CTL_READY, FAB_MS));
    fab_peer_ctl(*p1, TB_CTL_PORTS, tbon_packet_new(TB_CTL_PORTS, "%aud %aud %d", NULL,
                                                    (size_t)0, NULL, (size_t)0, 0));
    return f;
}

/* Commnode 3 as a node, everything around it the test: parent 1, children
 * 5 and 6, later adopter 2.
 * - Reports: child 6's end goes up as a failure report; a report that
 *   child 5 sends twice goes up once.
 * - Held: the parent dies before a view brought back the report of 4 (that
 *   of 6 came back in version 2): the adopter gets 4's again, not 6's.
 * - Buffered: what the orphan's wave produced meanwhile (52) goes up after
 *   the adoption, behind the graft of each stream and the union filter's
 *   whole state as input (key 0); then the reports (the lost parent's
 *   failure, the adoption, flagged lossy: stream 2's filter keeps no state)
 *   and the acknowledgement asking for the views it missed. */
TEST(orphan_hands_over_streams_state_buffer_and_held_reports)
{
    fab_peer_t *p1, *p5, *p6;
    fab_node_t *cn;
    fab_t *f = commnode_3(&cn, &p1, &p5, &p6);
    REQUIRE(f);
    const tbon_rank_t kids[] = { 5, 6 };
    fab_peer_ctl(p1, TB_CTL_STREAM, stream_pkt(1, TBON_FILTER_UNION, TBON_SYNC_WAITFORALL,
                                               kids, 2));
    fab_peer_ctl(p1, TB_CTL_STREAM, stream_pkt(2, TBON_FILTER_NULL, TBON_SYNC_DONTWAIT, kids, 2));
    for (int i = 0; i < 2; i++) {
        fab_peer_t *k = i ? p6 : p5;
        tbon_packet_unref(fab_peer_expect_ctl(k, TB_CTL_PORTS, FAB_MS));
        tbon_packet_unref(fab_peer_expect_ctl(k, TB_CTL_STREAM, FAB_MS));
        tbon_packet_unref(fab_peer_expect_ctl(k, TB_CTL_STREAM, FAB_MS));
    }
    /* request 1 and its wave */
    fab_peer_data(p1, 1, 1, 0, tbon_packet_new(1, "%ld", 0L));
    tbon_packet_unref(expect_data(p5, 1, 1, __LINE__));
    tbon_packet_unref(expect_data(p6, 1, 1, __LINE__));
    fab_peer_data(p5, 1, KEY(1, 0), 0, set_pkt((uint64_t[]){ 51 }, 1));
    fab_peer_data(p6, 1, KEY(1, 0), 0, set_pkt((uint64_t[]){ 61 }, 1));
    tbon_packet_t *p = expect_data(p1, 1, KEY(1, 0), __LINE__);
    CHECK_SET(p, 51, 61);
    tbon_packet_unref(p);

    /* reports: 6 is gone; 5 says 4 failed, twice */
    fab_peer_close(p6);
    expect_report(p1, TB_V_FAILED, 6, TBON_RANK_NONE, 0, -1, __LINE__);
    fab_peer_ctl(p5, TB_CTL_REPORT, report_pkt(TB_V_FAILED, 4, TBON_RANK_NONE, 0));
    fab_peer_ctl(p5, TB_CTL_REPORT, report_pkt(TB_V_FAILED, 4, TBON_RANK_NONE, 0));
    fab_peer_data(p5, 2, 0, 0, tbon_packet_new(2, "%ld", 1L));
    expect_report(p1, TB_V_FAILED, 4, TBON_RANK_NONE, 0, -1, __LINE__);
    tbon_packet_unref(expect_data(p1, 2, 0, __LINE__));    /* and no second report */

    /* version 2 brings back 6's failure only */
    fab_peer_ctl(p1, TB_CTL_VIEW, view_pkt(2, 1, TB_V_FAILED, 6));
    tbon_packet_unref(fab_peer_expect_ctl(p5, TB_CTL_VIEW, FAB_MS));
    tbon_packet_unref(fab_peer_expect_ctl(p1, TB_CTL_VIEW_ACK, FAB_MS));
    fab_peer_ctl(p5, TB_CTL_VIEW_ACK, tbon_packet_new(TB_CTL_VIEW_ACK, "%uld %uld %d", 2ul, 2ul,
                                                      0));
    tbon_packet_unref(fab_peer_expect_ctl(p1, TB_CTL_VIEW_ACK, FAB_MS));

    /* The parent dies (once 3 knows, its copy has 1 failed); 5's next
     * unit makes a wave the orphan buffers (its arrival shown by the next
     * whole view). */
    CHECK(!parent_has_failed(p5, 2, 1));
    fab_peer_close(p1);
    int64_t dl = tb_now_ms() + FAB_MS;
    while (!parent_has_failed(p5, 2, 1) && tb_now_ms() < dl)
        ;
    fab_peer_data(p5, 1, KEY(1, 1), 0, set_pkt((uint64_t[]){ 52 }, 1));
    CHECK(parent_has_failed(p5, 2, 1));

    /* adopted by 2 (the test) */
    fab_peer_t *p2 = fab_adopt_by_peer(f, cn, 2, 1);
    REQUIRE(p2);
    expect_graft(p2, 1, KEY(1, 1), 1, __LINE__);
    p = expect_data(p2, 1, 0, __LINE__);
    CHECK_SET(p, 51, 52, 61);
    tbon_packet_unref(p);
    expect_graft(p2, 2, 0, 0, __LINE__);
    /* what it has, for the adopter to send what it lacks: no plug-in, and
     * the port table */
    p = fab_peer_expect_ctl(p2, TB_CTL_CATCH_UP, FAB_MS);
    uint32_t nf = 9;
    int ports = 9;
    CHECK(p && tbon_packet_unpack(p, "%ud %d", &nf, &ports) == 0);
    CHECK_UINT(nf, 0);
    CHECK_INT(ports, 1);
    tbon_packet_unref(p);
    p = expect_data(p2, 1, KEY(1, 1), __LINE__);
    CHECK_SET(p, 52);
    tbon_packet_unref(p);
    expect_report(p2, TB_V_FAILED, 4, TBON_RANK_NONE, 0, -1, __LINE__);    /* held */
    expect_report(p2, TB_V_FAILED, 1, TBON_RANK_NONE, 0, -1, __LINE__);
    expect_report(p2, TB_V_ADOPTED, 3, 2, 1, 1, __LINE__);
    p = fab_peer_expect_ctl(p2, TB_CTL_VIEW_ACK, FAB_MS);
    uint64_t a = 0, s = 0;
    int want = 0;
    CHECK(p && tbon_packet_unpack(p, "%uld %uld %d", &a, &s, &want) == 0);
    CHECK_UINT(a, 2);
    CHECK_UINT(s, 2);
    CHECK_INT(want, 1);
    tbon_packet_unref(p);
    fab_peer_quiet(p2, 100);
    fab_free(f);
}

/* ---- exact streams (node_exact.c) ---- */

/* The next frame at pe is DATA on stream with key, flags and value v
 * ("%ld"), covering exactly cov[0..ncov). */
static void expect_unit(fab_peer_t *pe, uint32_t stream, uint64_t key, uint16_t flags, long v,
                        const tbon_rank_t *cov, size_t ncov, int line)
{
    fab_msg_t m;
    int rc = fab_peer_next(pe, &m, FAB_MS);
    tbon_rank_t got[8];
    size_t ng = rc == 1 && m.pkt ? tbon_packet_covered(m.pkt, got, 8) : 0;
    int same = ng == ncov;
    for (size_t i = 0; same && i < ncov; i++)
        same = got[i] == cov[i];
    if (rc != 1 || m.hdr.type != TB_FRAME_DATA || m.hdr.stream != stream || m.hdr.key != key ||
        (m.hdr.flags & (TB_FRAME_F_LATE | TB_FRAME_F_MORE)) != flags || !m.pkt ||
        fab_long(m.pkt) != v || !same)
        th_fail(__FILE__, line, "expected DATA stream %u key %#llx flags %#x value %ld over "
                "%zu back-ends; got %s stream %u key %#llx flags %#x value %ld over %zu",
                stream, (unsigned long long)key, flags, v, ncov,
                rc == 1 ? tb_frame_type_name(m.hdr.type) : "nothing", m.hdr.stream,
                (unsigned long long)m.hdr.key, m.hdr.flags, m.pkt ? fab_long(m.pkt) : -1, ng);
    fab_msg_clear(&m);
}

/* Commnode 3 as a node on an exact sum stream, everything around it the
 * test (parent 1, back-ends 5 and 6, later adopter 2): each unit goes up
 * with its coverage; a unit for a wave closed here goes on up flagged late,
 * not folded; what it sent is kept until DONE says the FE has it, and sent
 * again, flagged late and in order, to its adopter after its graft - what
 * it made while orphaned among it. */
/* Stream 1, an exact sum over back-ends 5 and 6, defined from parent p1 of
 * commnode 3 and passed on to both. */
static void exact_sum_on_3(fab_peer_t *p1, fab_peer_t *p5, fab_peer_t *p6)
{
    const tbon_rank_t kids[] = { 5, 6 };
    fab_peer_ctl(p1, TB_CTL_STREAM, stream_pkt(1, TBON_FILTER_SUM,
                                               TBON_SYNC_WAITFORALL | TB_STREAM_EXACT, kids, 2));
    for (int i = 0; i < 2; i++) {
        fab_peer_t *k = i ? p6 : p5;
        tbon_packet_unref(fab_peer_expect_ctl(k, TB_CTL_PORTS, FAB_MS));
        tbon_packet_unref(fab_peer_expect_ctl(k, TB_CTL_STREAM, FAB_MS));
    }
}

TEST(exact_stream_keeps_and_sends_again)
{
    fab_peer_t *p1, *p5, *p6;
    fab_node_t *cn;
    fab_t *f = commnode_3(&cn, &p1, &p5, &p6);
    REQUIRE(f);
    const tbon_rank_t kids[] = { 5, 6 }, k5[] = { 5 };
    exact_sum_on_3(p1, p5, p6);
    long sums[4] = { 0, 11, 110, 1100 };
    for (uint64_t q = 1; q <= 2; q++) {
        fab_peer_data(p1, 1, q, 0, tbon_packet_new(1, "%ld", 0L));
        tbon_packet_unref(expect_data(p5, 1, q, __LINE__));
        tbon_packet_unref(expect_data(p6, 1, q, __LINE__));
        fab_peer_data(p5, 1, KEY(q, 0), 0, tbon_packet_new(1, "%ld", sums[q] * 5 / 11));
        fab_peer_data(p6, 1, KEY(q, 0), 0, tbon_packet_new(1, "%ld", sums[q] * 6 / 11));
        expect_unit(p1, 1, KEY(q, 0), 0, sums[q], kids, 2, __LINE__);
        if (q == 1) {
            /* 5 again for wave 1, closed here: on up as it is, flagged late */
            fab_peer_data(p5, 1, KEY(1, 0), 0, tbon_packet_new(1, "%ld", 7L));
            expect_unit(p1, 1, KEY(1, 0), TB_FRAME_F_LATE, 7, k5, 1, __LINE__);
        }
    }
    /* The FE has wave 1: what was kept of it goes. */
    fab_peer_ctl(p1, TB_CTL_DONE, tbon_packet_new(TB_CTL_DONE, "%ud %uld", 1u, KEY(1, 0)));
    tbon_packet_unref(fab_peer_expect_ctl(p5, TB_CTL_DONE, FAB_MS));   /* passed on */
    tbon_packet_unref(fab_peer_expect_ctl(p6, TB_CTL_DONE, FAB_MS));
    /* request 3: 5 answers, the parent dies, then 6: the orphan's wave 3 */
    fab_peer_data(p1, 1, 3, 0, tbon_packet_new(1, "%ld", 0L));
    tbon_packet_unref(expect_data(p5, 1, 3, __LINE__));
    tbon_packet_unref(expect_data(p6, 1, 3, __LINE__));
    fab_peer_data(p5, 1, KEY(3, 0), 0, tbon_packet_new(1, "%ld", 500L));
    fab_peer_close(p1);
    int64_t dl = tb_now_ms() + FAB_MS;
    while (!parent_has_failed(p5, 1, 1) && tb_now_ms() < dl)
        ;
    fab_peer_data(p6, 1, KEY(3, 0), 0, tbon_packet_new(1, "%ld", 600L));
    CHECK(parent_has_failed(p6, 1, 1));     /* 3 has taken 6's unit */
    fab_peer_t *p2 = fab_adopt_by_peer(f, cn, 2, 1);
    REQUIRE(p2);
    expect_graft(p2, 1, KEY(3, 0), 3, __LINE__);
    expect_unit(p2, 1, KEY(2, 0), TB_FRAME_F_LATE, 110, kids, 2, __LINE__);
    expect_unit(p2, 1, KEY(3, 0), TB_FRAME_F_LATE, 1100, kids, 2, __LINE__);
    fab_free(f);
}

/* The FE's delivered mark riding on a request (TB_FRAME_F_DONE): the
 * commnode passes it on with the request to each child, and what it kept
 * of the waves up to the mark goes: after an adoption only the later wave
 * is sent again. */
TEST(exact_mark_rides_on_requests)
{
    fab_peer_t *p1, *p5, *p6;
    fab_node_t *cn;
    fab_t *f = commnode_3(&cn, &p1, &p5, &p6);
    REQUIRE(f);
    const tbon_rank_t kids[] = { 5, 6 };
    exact_sum_on_3(p1, p5, p6);
    for (uint64_t q = 1; q <= 3; q++) {
        if (q == 3)     /* waves 1 and 2 are delivered */
            fab_peer_request(p1, 1, q, KEY(2, 0), tbon_packet_new(1, "%ld", 0L));
        else
            fab_peer_data(p1, 1, q, 0, tbon_packet_new(1, "%ld", 0L));
        for (int i = 0; i < 2; i++) {
            fab_msg_t m;
            int rc = fab_peer_next(i ? p6 : p5, &m, FAB_MS);
            CHECK_INT(rc, 1);
            if (rc == 1) {
                CHECK_INT(m.hdr.type, TB_FRAME_DATA);
                CHECK_INT(m.hdr.key, q);
                CHECK_INT(m.done, q == 3 ? KEY(2, 0) : 0);
            }
            fab_msg_clear(&m);
        }
        fab_peer_data(p5, 1, KEY(q, 0), 0, tbon_packet_new(1, "%ld", 5L * (long)q));
        fab_peer_data(p6, 1, KEY(q, 0), 0, tbon_packet_new(1, "%ld", 6L * (long)q));
        expect_unit(p1, 1, KEY(q, 0), 0, 11 * (long)q, kids, 2, __LINE__);
    }
    fab_peer_close(p1);
    fab_peer_t *p2 = fab_adopt_by_peer(f, cn, 2, 1);
    REQUIRE(p2);
    expect_graft(p2, 1, KEY(3, 0), 3, __LINE__);
    expect_unit(p2, 1, KEY(3, 0), TB_FRAME_F_LATE, 33, kids, 2, __LINE__);
    fab_free(f);
}

/* No node folds two units whose coverages overlap: a child's unit that
 * claims a back-end another unit of the wave already holds is dropped (a
 * copy), and the wave goes up with the rest, its coverage saying so. */
TEST(exact_commnode_refuses_overlapping_units)
{
    fab_peer_t *p1, *p5, *p6;
    fab_node_t *cn;
    fab_t *f = commnode_3(&cn, &p1, &p5, &p6);
    REQUIRE(f);
    const tbon_rank_t kids[] = { 5, 6 }, k5[] = { 5 }, k56[] = { 5, 6 }, k6[] = { 6 };
    exact_sum_on_3(p1, p5, p6);
    fab_peer_data(p1, 1, 1, 0, tbon_packet_new(1, "%ld", 0L));
    tbon_packet_unref(expect_data(p5, 1, 1, __LINE__));
    tbon_packet_unref(expect_data(p6, 1, 1, __LINE__));
    fab_peer_unit(p5, 1, KEY(1, 0), 0, tbon_packet_new(1, "%ld", 5L), k5, 1);
    fab_peer_unit(p6, 1, KEY(1, 0), 0, tbon_packet_new(1, "%ld", 11L), k56, 2);
    expect_unit(p1, 1, KEY(1, 0), 0, 5, k5, 1, __LINE__);
    /* the next wave, disjoint, is folded whole */
    fab_peer_data(p1, 1, 2, 0, tbon_packet_new(1, "%ld", 0L));
    tbon_packet_unref(expect_data(p5, 1, 2, __LINE__));
    tbon_packet_unref(expect_data(p6, 1, 2, __LINE__));
    fab_peer_unit(p5, 1, KEY(2, 0), 0, tbon_packet_new(1, "%ld", 50L), k5, 1);
    fab_peer_unit(p6, 1, KEY(2, 0), 0, tbon_packet_new(1, "%ld", 60L), k6, 1);
    expect_unit(p1, 1, KEY(2, 0), 0, 110, kids, 2, __LINE__);
    fab_free(f);
}

/* The next DATA frame at pe (other frames skipped): on stream, request q. */
static void until_request(fab_peer_t *pe, uint32_t stream, uint64_t q, int line)
{
    int64_t dl = tb_now_ms() + FAB_MS;
    for (;;) {
        fab_msg_t m;
        int64_t left = dl - tb_now_ms();
        int rc = fab_peer_next(pe, &m, left > 0 ? (int)left : 0);
        if (rc != 1) {
            th_fail(__FILE__, line, "no request %llu on stream %u", (unsigned long long)q,
                    stream);
            return;
        }
        int data = m.hdr.type == TB_FRAME_DATA;
        if (data && (m.hdr.stream != stream || m.hdr.key != q))
            th_fail(__FILE__, line, "DATA on stream %u, request %llu: expected %u, %llu",
                    m.hdr.stream, (unsigned long long)m.hdr.key, stream,
                    (unsigned long long)q);
        fab_msg_clear(&m);
        if (data)
            return;
    }
}

/* The adopter's side, through real nodes FE 0, commnode 2 and back-end 4;
 * the test plays commnode 1 (it answers for 5 and 6, then dies) and the
 * orphan 3. Commnode 2 adopts 3 and takes its graft of the union stream:
 * 3's state (key 0) and its buffered unit of request 1 make a wave of their
 * own, which waits for 4's next unit, as 4 owes every wave; request 2 is
 * forwarded to 3, the first it gets from 2; what reaches the FE is every
 * value exactly once, in three waves: {41 51 61}, {52 62} (51 and 61 known),
 * {42 53 63}. */
TEST(adopter_grafts_the_orphan_into_its_waves)
{
    fab_t *f = fab_new(TREE);
    REQUIRE(f);
    fab_node_t *fe = fab_fe(f);
    fab_peer_t *p1 = fab_peer_under(f, fe, 1);
    fab_node_t *cn2 = fab_node_under(f, fe, 2, NULL);
    fab_node_t *b4 = fab_node_under(f, cn2, 4, NULL);
    REQUIRE(fe && p1 && cn2 && b4);
    fab_peer_ctl(p1, TB_CTL_READY, tbon_packet_new(TB_CTL_READY, "%ud", 4u));
    REQUIRE(fab_wait_status(fe, TB_NODE_READY, FAB_MS));
    tbon_packet_unref(fab_peer_until_ctl(p1, TB_CTL_PORTS, FAB_MS));
    const tbon_rank_t bes[] = { 4, 5, 6 };
    fab_stream(fe, 1, TBON_FILTER_UNION, TBON_SYNC_WAITFORALL, 0, bes, 3);
    tbon_packet_unref(fab_peer_expect_ctl(p1, TB_CTL_STREAM, FAB_MS));
    fab_send(fe, 1, tbon_packet_new(1, "%ld", 0L), 0);
    uint64_t q = 0;
    tbon_packet_unref(fab_take_packet(b4, 1, FAB_MS, &q));  /* the port table passed 2 */
    CHECK_UINT(q, 1);
    until_request(p1, 1, 1, __LINE__);
    fab_send(b4, 1, set_pkt((uint64_t[]){ 41 }, 1), KEY(1, 0));
    fab_peer_data(p1, 1, KEY(1, 0), 0, set_pkt((uint64_t[]){ 51, 61 }, 2));
    tbon_packet_t *p = fab_take_packet(fe, 1, FAB_MS, NULL);
    CHECK_SET(p, 41, 51, 61);
    tbon_packet_unref(p);

    /* 1 dies; 2 adopts the orphan 3 */
    fab_peer_close(p1);
    tbon_event_t ev;
    CHECK(fab_take_event(fe, &ev, FAB_MS));
    CHECK_INT(ev.type, TBON_EV_NODE_FAILED);
    CHECK_UINT(ev.rank, 1);
    fab_peer_t *p3 = fab_adopt_peer(f, 3, 1, cn2);
    REQUIRE(p3);
    fab_peer_ctl(p3, TB_CTL_GRAFT, tbon_packet_new(TB_CTL_GRAFT, "%ud %d %d %ud %d %aud %uld %uld",
                                                   1u, TBON_FILTER_UNION, TBON_SYNC_WAITFORALL,
                                                   0u, TBON_FILTER_NULL, bes, (size_t)3,
                                                   KEY(1, 0), 1ul));
    fab_peer_data(p3, 1, 0, 0, set_pkt((uint64_t[]){ 51, 61 }, 2));
    fab_peer_data(p3, 1, KEY(1, 1), 0, set_pkt((uint64_t[]){ 52, 62 }, 2));
    fab_peer_ctl(p3, TB_CTL_REPORT, report_pkt(TB_V_FAILED, 1, TBON_RANK_NONE, 0));
    fab_peer_ctl(p3, TB_CTL_REPORT, report_pkt(TB_V_ADOPTED, 3, 2, 1));
    fab_peer_ctl(p3, TB_CTL_VIEW_ACK, tbon_packet_new(TB_CTL_VIEW_ACK, "%uld %uld %d", 1ul, 1ul,
                                                      1));
    CHECK(fab_take_event(fe, &ev, FAB_MS));
    CHECK_INT(ev.type, TBON_EV_NODE_ADOPTED);
    CHECK_UINT(ev.rank, 3);
    CHECK_UINT(ev.parent, 2);
    CHECK_UINT(ev.incarnation, 1);
    CHECK_UINT(fab_pending_packets(fe, 1), 0);  /* 3's units wait for 4's next one */

    /* request 2: to 4, and to 3 (its first from 2) */
    fab_send(fe, 1, tbon_packet_new(1, "%ld", 0L), 0);
    tbon_packet_unref(fab_take_packet(b4, 1, FAB_MS, &q));
    CHECK_UINT(q, 2);
    until_request(p3, 1, 2, __LINE__);
    fab_send(b4, 1, set_pkt((uint64_t[]){ 42 }, 1), KEY(2, 0));
    fab_peer_data(p3, 1, KEY(2, 0), 0, set_pkt((uint64_t[]){ 53, 63 }, 2));
    p = fab_take_packet(fe, 1, FAB_MS, NULL);
    CHECK_SET(p, 52, 62);
    tbon_packet_unref(p);
    p = fab_take_packet(fe, 1, FAB_MS, NULL);
    CHECK_SET(p, 42, 53, 63);
    tbon_packet_unref(p);
    CHECK_UINT(fab_pending_packets(fe, 1), 0);
    fab_free(f);
}

/* Commnode 2 under the test as the FE (p0), back-end 4 a node below it,
 * through its start-up to the port table, then given union stream 1 over
 * back-ends 4-6; NULL if it could not be made. */
static const tbon_rank_t bes3[] = { 4, 5, 6 };

static fab_node_t *adopter_cn2(fab_t *f, fab_peer_t **p0, fab_node_t **b4)
{
    fab_node_t *cn2 = fab_node_under_peer(f, 2, p0);
    if (!cn2 || !*p0 || !(*b4 = fab_node_under(f, cn2, 4, NULL)))
        return NULL;
    tbon_packet_unref(fab_peer_expect_ctl(*p0, TB_CTL_PORT, FAB_MS));
    tbon_packet_unref(fab_peer_expect_ctl(*p0, TB_CTL_READY, FAB_MS));
    tbon_packet_unref(fab_peer_expect_ctl(*p0, TB_CTL_PORT, FAB_MS));  /* 4's, passed on */
    fab_peer_ctl(*p0, TB_CTL_PORTS, tbon_packet_new(TB_CTL_PORTS, "%aud %aud %d", NULL,
                                                    (size_t)0, NULL, (size_t)0, 0));
    fab_peer_ctl(*p0, TB_CTL_STREAM, stream_pkt(1, TBON_FILTER_UNION, TBON_SYNC_WAITFORALL,
                                                bes3, 3));
    return cn2;
}

/* An orphan whose lost parent died before passing a stream on grafts only
 * what it knows; its TB_CTL_CATCH_UP (it has the port table) brings it the
 * stream it lacks, flagged as a catch-up, and nothing else (docs/protocol.md
 * 8.3). */
TEST(adopter_catches_an_orphan_up_on_what_it_lacks)
{
    fab_t *f = fab_new(TREE);
    REQUIRE(f);
    fab_peer_t *p0 = NULL;
    fab_node_t *b4 = NULL, *cn2 = adopter_cn2(f, &p0, &b4);
    REQUIRE(cn2);
    fab_peer_data(p0, 1, 1, 0, tbon_packet_new(1, "%ld", 0L));
    uint64_t q = 0;
    tbon_packet_unref(fab_take_packet(b4, 1, FAB_MS, &q));  /* stream 1 is in place */
    fab_peer_t *p3 = fab_adopt_peer(f, 3, 1, cn2);
    REQUIRE(p3);
    fab_peer_ctl(p3, TB_CTL_CATCH_UP, tbon_packet_new(TB_CTL_CATCH_UP, "%ud %d", 0u, 1));
    tbon_packet_t *cu = fab_peer_expect_ctl(p3, TB_CTL_STREAM, FAB_MS);
    uint32_t cid = 0, cms = 0;
    int cup = 0, csync = 0, cdown = 0;
    uint32_t *cmem = NULL;
    size_t cn = 0;
    CHECK_INT(cu ? tbon_packet_unpack(cu, "%ud %d %d %ud %d %aud", &cid, &cup, &csync, &cms,
                                      &cdown, &cmem, &cn) : -1, 0);
    CHECK_UINT(cid, 1);
    CHECK((csync & TB_STREAM_CATCHUP) != 0);
    CHECK_UINT(cn, 3);
    free(cmem);
    tbon_packet_unref(cu);
    fab_peer_quiet(p3, 100);                    /* no port table, nothing else */
    fab_free(f);
}

/* Wave keys at the adopter (docs/protocol.md 8.4), with the test as the FE
 * above commnode 2 (back-end 4 below it a node) and as the orphan 3: 3 saw
 * request 2 from its old parent before 2 did; 2 does not send it that
 * request again, but its wave waits for 3's answer to it; request 3 is the
 * first 2 sends it. The waves above carry exactly their keys. */
TEST(adopter_does_not_resend_a_request_the_orphan_saw)
{
    fab_t *f = fab_new(TREE);
    REQUIRE(f);
    fab_peer_t *p0 = NULL;
    fab_node_t *b4 = NULL, *cn2 = adopter_cn2(f, &p0, &b4);
    REQUIRE(cn2);
    const tbon_rank_t *bes = bes3;
    fab_peer_ctl(p0, TB_CTL_STREAM, stream_pkt(2, TBON_FILTER_NULL, TBON_SYNC_DONTWAIT, bes, 1));
    fab_peer_data(p0, 1, 1, 0, tbon_packet_new(1, "%ld", 0L));
    uint64_t q = 0;
    tbon_packet_unref(fab_take_packet(b4, 1, FAB_MS, &q));  /* the port table passed 2 */
    CHECK_UINT(q, 1);
    fab_send(b4, 1, set_pkt((uint64_t[]){ 41 }, 1), KEY(1, 0));
    tbon_packet_t *p = expect_data(p0, 1, KEY(1, 0), __LINE__);
    CHECK_SET(p, 41);
    tbon_packet_unref(p);

    /* 3, which answered request 1 and saw request 2, is adopted */
    fab_peer_t *p3 = fab_adopt_peer(f, 3, 1, cn2);
    REQUIRE(p3);
    fab_peer_ctl(p3, TB_CTL_GRAFT, tbon_packet_new(TB_CTL_GRAFT, "%ud %d %d %ud %d %aud %uld %uld",
                                                   1u, TBON_FILTER_UNION, TBON_SYNC_WAITFORALL,
                                                   0u, TBON_FILTER_NULL, bes, (size_t)3,
                                                   KEY(1, 0), 2ul));
    /* 3 says it has no port table (docs/protocol.md 8.3): the adopter sends
     * it, and no stream: 3 grafted stream 1, and stream 2's one member (4)
     * is not below 3. (What comes next at p3 is the view.) */
    fab_peer_ctl(p3, TB_CTL_CATCH_UP, tbon_packet_new(TB_CTL_CATCH_UP, "%ud %d", 0u, 0));
    tbon_packet_unref(fab_peer_expect_ctl(p3, TB_CTL_PORTS, FAB_MS));
    /* 3 asks for every view (applied 0): the whole view it gets back shows
     * that 2 has taken the graft before the requests come */
    fab_peer_ctl(p3, TB_CTL_VIEW_ACK, tbon_packet_new(TB_CTL_VIEW_ACK, "%uld %uld %d", 0ul, 0ul,
                                                      1));
    tbon_packet_unref(fab_peer_expect_ctl(p3, TB_CTL_VIEW, FAB_MS));
    fab_peer_ctl(p3, TB_CTL_VIEW_ACK, tbon_packet_new(TB_CTL_VIEW_ACK, "%uld %uld %d", 1ul, 1ul,
                                                      0));
    /* requests 2 and 3 reach 2 now */
    fab_peer_data(p0, 1, 2, 0, tbon_packet_new(1, "%ld", 0L));
    fab_peer_data(p0, 1, 3, 0, tbon_packet_new(1, "%ld", 0L));
    tbon_packet_unref(fab_take_packet(b4, 1, FAB_MS, &q));
    CHECK_UINT(q, 2);
    tbon_packet_unref(fab_take_packet(b4, 1, FAB_MS, &q));
    CHECK_UINT(q, 3);
    until_request(p3, 1, 3, __LINE__);      /* 3's first: request 3, not 2 */
    /* wave 2 waits for 3's answer to request 2 (a marker from 4 behind its
     * own answer comes up first) */
    fab_send(b4, 1, set_pkt((uint64_t[]){ 42 }, 1), KEY(2, 0));
    fab_send(b4, 2, tbon_packet_new(2, "%ld", 7L), KEY(2, 1));
    p = expect_data(p0, 2, KEY(2, 1), __LINE__);
    CHECK_INT(p ? fab_long(p) : -1, 7);
    tbon_packet_unref(p);
    fab_peer_data(p3, 1, KEY(2, 0), 0, set_pkt((uint64_t[]){ 52 }, 1));
    p = expect_data(p0, 1, KEY(2, 0), __LINE__);
    CHECK_SET(p, 42, 52);
    tbon_packet_unref(p);
    fab_peer_data(p3, 1, KEY(3, 0), 0, set_pkt((uint64_t[]){ 53 }, 1));
    fab_send(b4, 1, set_pkt((uint64_t[]){ 43 }, 1), KEY(3, 0));
    p = expect_data(p0, 1, KEY(3, 0), __LINE__);
    CHECK_SET(p, 43, 53);
    tbon_packet_unref(p);
    fab_peer_quiet(p3, 100);
    fab_free(f);
}

/* Forward frames from one peer to another until one of type (CONTROL: with
 * tag op) has passed (the test plays a commnode as a relay). */
static void relay_until(fab_peer_t *from, fab_peer_t *to, int type, int op, int line)
{
    int64_t dl = tb_now_ms() + FAB_MS;
    for (;;) {
        fab_msg_t m;
        int64_t left = dl - tb_now_ms();
        if (fab_peer_next(from, &m, left > 0 ? (int)left : 0) != 1) {
            th_fail(__FILE__, line, "no %s frame (%d) came to relay", tb_frame_type_name(type),
                    op);
            return;
        }
        fab_peer_send(to, &m);
        int done = m.hdr.type == type && (type != TB_FRAME_CONTROL || m.hdr.tag == op);
        fab_msg_clear(&m);
        if (done)
            return;
    }
}

/* Take the FE's packets on stream until their union is want[0..n): each
 * value exactly once over all of them, nothing else. */
static void union_exactly(fab_node_t *fe, uint32_t stream, const uint64_t *want, size_t n,
                          int line)
{
    uint8_t seen[128] = { 0 };
    size_t got = 0;
    while (got < n) {
        tbon_packet_t *p = fab_take_packet(fe, stream, FAB_MS, NULL);
        uint64_t *v = NULL;
        size_t k = 0;
        if (!p || tbon_packet_unpack(p, "%auld", &v, &k) != 0) {
            th_fail(__FILE__, line, "%zu of %zu values came", got, n);
            tbon_packet_unref(p);
            return;
        }
        for (size_t i = 0; i < k; i++) {
            size_t j = 0;
            while (j < n && want[j] != v[i])
                j++;
            if (j == n || seen[j]++)
                th_fail(__FILE__, line, "value %llu %s", (unsigned long long)v[i],
                        j == n ? "not expected" : "came twice");
            else
                got++;
        }
        free(v);
        tbon_packet_unref(p);
    }
    CHECK_UINT(fab_pending_packets(fe, stream), 0);
}

/* The whole adoption through real nodes: FE 0, commnodes 2 and 3, back-ends
 * 4, 5 and 6; the test plays commnode 1 as a relay between 0 and 3, then
 * kills it. Commnode 2 adopts the orphan 3 (the test hands it over as the
 * EDS does): the FE sees exactly 1 fail, 3 adopted by 2 at incarnation 1,
 * and the view stable; the values sent before and around the failure and
 * after the adoption reach it exactly once; every live node's copy agrees. */
TEST(adoption_between_real_nodes)
{
    fab_t *f = fab_new(TREE);
    REQUIRE(f);
    fab_node_t *fe = fab_fe(f);
    fab_peer_t *p1a = fab_peer_under(f, fe, 1);     /* 1 as 0's child */
    fab_node_t *cn2 = fab_node_under(f, fe, 2, NULL);
    fab_node_t *b4 = fab_node_under(f, cn2, 4, NULL);
    fab_peer_t *p1b = NULL;                         /* 1 as 3's parent */
    fab_node_t *cn3 = fab_node_under_peer(f, 3, &p1b);
    REQUIRE(fe && p1a && cn2 && b4 && cn3 && p1b);
    fab_node_t *b5 = fab_node_under(f, cn3, 5, NULL);
    fab_node_t *b6 = fab_node_under(f, cn3, 6, NULL);
    REQUIRE(b5 && b6);
    tbon_packet_unref(fab_peer_until_ctl(p1b, TB_CTL_READY, FAB_MS));
    fab_peer_ctl(p1a, TB_CTL_READY, tbon_packet_new(TB_CTL_READY, "%ud", 4u));
    REQUIRE(fab_wait_status(fe, TB_NODE_READY, FAB_MS));
    relay_until(p1a, p1b, TB_FRAME_CONTROL, TB_CTL_PORTS, __LINE__);
    const tbon_rank_t bes[] = { 4, 5, 6 };
    fab_stream(fe, 1, TBON_FILTER_UNION, TBON_SYNC_WAITFORALL, 0, bes, 3);
    relay_until(p1a, p1b, TB_FRAME_CONTROL, TB_CTL_STREAM, __LINE__);
    fab_send(fe, 1, tbon_packet_new(1, "%ld", 0L), 0);
    fab_msg_t m;
    CHECK_INT(fab_peer_next(p1a, &m, FAB_MS), 1);   /* request 1, relayed */
    CHECK_UINT(m.hdr.type, TB_FRAME_DATA);
    CHECK_UINT(m.hdr.key, 1);
    fab_peer_send(p1b, &m);
    fab_msg_clear(&m);
    fab_node_t *be[3] = { b4, b5, b6 };
    for (int i = 0; i < 3; i++) {
        uint64_t q = 0;
        tbon_packet_unref(fab_take_packet(be[i], 1, FAB_MS, &q));
        CHECK_UINT(q, 1);
        fab_send(be[i], 1, set_pkt((uint64_t[]){ (uint64_t)(41 + 10 * i) }, 1), KEY(1, 0));
    }
    relay_until(p1b, p1a, TB_FRAME_DATA, 0, __LINE__);  /* 3's wave (and 5's, 6's ports) */
    tbon_packet_t *p = fab_take_packet(fe, 1, FAB_MS, NULL);
    CHECK_SET(p, 41, 51, 61);
    tbon_packet_unref(p);

    /* 1 dies while 5 and 6 send more (it goes up before the adoption or
     * after it, in 3's state or its buffer: once either way) */
    fab_peer_close(p1a);
    fab_peer_close(p1b);
    fab_send(b5, 1, set_pkt((uint64_t[]){ 52 }, 1), KEY(1, 1));
    fab_send(b6, 1, set_pkt((uint64_t[]){ 62 }, 1), KEY(1, 1));
    tbon_event_t ev;
    CHECK(fab_take_event(fe, &ev, FAB_MS));
    CHECK_INT(ev.type, TBON_EV_NODE_FAILED);
    CHECK_UINT(ev.rank, 1);
    CHECK(fab_adopt(cn3, cn2, 1));
    CHECK(fab_take_event(fe, &ev, FAB_MS));
    CHECK_INT(ev.type, TBON_EV_NODE_ADOPTED);
    CHECK_UINT(ev.rank, 3);
    CHECK_UINT(ev.parent, 2);
    CHECK_UINT(ev.incarnation, 1);
    CHECK(fab_take_event(fe, &ev, FAB_MS));
    CHECK_INT(ev.type, TBON_EV_VIEW_STABLE);

    /* request 2 reaches every back-end through the new parent */
    fab_send(fe, 1, tbon_packet_new(1, "%ld", 0L), 0);
    for (int i = 0; i < 3; i++) {
        uint64_t q = 0;
        tbon_packet_unref(fab_take_packet(be[i], 1, FAB_MS, &q));
        CHECK_UINT(q, 2);
        fab_send(be[i], 1, set_pkt((uint64_t[]){ (uint64_t)(42 + 10 * i + (i > 0)) }, 1),
                 KEY(2, 0));
    }
    const uint64_t rest[] = { 42, 52, 53, 62, 63 };
    union_exactly(fe, 1, rest, 5, __LINE__);

    /* every live node agrees with the FE */
    tb_cmd_t *c = tb_cmd_check(1);
    REQUIRE(c);
    fab_post(fe, c);
    tbon_rank_t *agree = NULL, *bad = NULL;
    size_t na = 0, nb = 0;
    CHECK(fab_take_checked(fe, 1, FAB_MS, &agree, &na, &bad, &nb));
    const tbon_rank_t live[] = { 0, 2, 3, 4, 5, 6 };
    CHECK_UINT(na, 6);
    CHECK_UINT(nb, 0);
    for (size_t i = 0; i < na && i < 6; i++)
        CHECK_UINT(agree[i], live[i]);
    free(agree);
    free(bad);
    CHECK(!fab_take_event(fe, &ev, 100));
    fab_free(f);
}

/* No request DATA frame reaches pe within ms (other frames are skipped). */
static void no_request(fab_peer_t *pe, int ms, int line)
{
    int64_t dl = tb_now_ms() + ms;
    for (;;) {
        fab_msg_t m;
        int64_t left = dl - tb_now_ms();
        if (left <= 0 || fab_peer_next(pe, &m, (int)left) != 1)
            return;
        if (m.hdr.type == TB_FRAME_DATA)
            th_fail(__FILE__, line, "request %llu on stream %u sent again",
                    (unsigned long long)m.hdr.seq, m.hdr.stream);
        fab_msg_clear(&m);
    }
}

/* The tree of the two tests below, up, with a union/wait-for-all stream 1
 * over back-ends 4, 5 and 6; requests 1-3 out to the FE's children 1 and 2
 * (played by the test), both answer request 1, then die together. */

/* The tree up, the FE a node and its children 1 and 2 the test, with a
 * wait-for-all stream 1 of filter `up` over back-ends 4, 5 and 6. */
static fab_t *fe_over_two_peers(int up, fab_node_t **fe_out, fab_peer_t **p1_out,
                                fab_peer_t **p2_out)
{
    fab_t *f = fab_new(TREE);
    if (!f)
        return NULL;
    fab_node_t *fe = fab_fe(f);
    fab_peer_t *p1 = fab_peer_under(f, fe, 1), *p2 = fab_peer_under(f, fe, 2);
    if (!fe || !p1 || !p2) {
        fab_free(f);
        return NULL;
    }
    fab_peer_ctl(p1, TB_CTL_READY, tbon_packet_new(TB_CTL_READY, "%ud", 4u));
    fab_peer_ctl(p2, TB_CTL_READY, tbon_packet_new(TB_CTL_READY, "%ud", 2u));
    if (!fab_wait_status(fe, TB_NODE_READY, FAB_MS)) {
        fab_free(f);
        return NULL;
    }
    tbon_packet_unref(fab_peer_until_ctl(p1, TB_CTL_PORTS, FAB_MS));
    tbon_packet_unref(fab_peer_until_ctl(p2, TB_CTL_PORTS, FAB_MS));
    fab_stream(fe, 1, up, TBON_SYNC_WAITFORALL, 0, bes3, 3);
    tbon_packet_unref(fab_peer_expect_ctl(p1, TB_CTL_STREAM, FAB_MS));
    tbon_packet_unref(fab_peer_expect_ctl(p2, TB_CTL_STREAM, FAB_MS));
    *fe_out = fe;
    *p1_out = p1;
    *p2_out = p2;
    return f;
}

static fab_t *both_children_die(fab_node_t **fe_out)
{
    fab_node_t *fe;
    fab_peer_t *p1, *p2;
    fab_t *f = fe_over_two_peers(TBON_FILTER_UNION, &fe, &p1, &p2);
    if (!f)
        return NULL;
    for (int i = 0; i < 3; i++)
        fab_send(fe, 1, tbon_packet_new(1, "%ld", 0L), 0);
    for (uint64_t q = 1; q <= 3; q++) {
        until_request(p1, 1, q, __LINE__);
        until_request(p2, 1, q, __LINE__);
    }
    fab_peer_data(p1, 1, KEY(1, 0), 0, set_pkt((uint64_t[]){ 51, 61 }, 2));
    fab_peer_data(p2, 1, KEY(1, 0), 0, set_pkt((uint64_t[]){ 41 }, 1));
    tbon_packet_t *p = fab_take_packet(fe, 1, FAB_MS, NULL);
    CHECK_SET(p, 41, 51, 61);
    tbon_packet_unref(p);

    fab_peer_close(p1);
    fab_peer_close(p2);
    int failed = 0;
    tbon_event_t ev;
    while (failed < 2 && fab_take_event(fe, &ev, FAB_MS))
        failed += ev.type == TBON_EV_NODE_FAILED && (ev.rank == 1 || ev.rank == 2);
    CHECK_INT(failed, 2);
    *fe_out = fe;
    return f;
}

/* A graft of stream 1 from an orphan that had sent up to key sent and seen
 * request seen. */
static void graft(fab_peer_t *pe, uint64_t sent, uint64_t seen)
{
    fab_peer_ctl(pe, TB_CTL_GRAFT, tbon_packet_new(TB_CTL_GRAFT, "%ud %d %d %ud %d %aud %uld %uld",
                                                   1u, TBON_FILTER_UNION, TBON_SYNC_WAITFORALL,
                                                   0u, TBON_FILTER_NULL, bes3, (size_t)3,
                                                   sent, seen));
}

/* Every child of the FE dies at once (the test plays commnodes 1 and 2, and
 * then the orphans 3 and 4, both adopted by the FE). Requests 1-3 were out;
 * both answered request 1; request 2's answers died with them; 3 never got
 * request 3, 4 did. The FE sends 3 the request it missed (kept until its
 * wave closes), not 4; wave 2, which nobody owes any more, reaches the
 * application as lost (a NULL packet with its request number); wave 3 is
 * exact. docs/protocol.md 8.4. */
TEST(fe_resends_requests_and_gives_lost_waves)
{
    fab_node_t *fe;
    fab_t *f = both_children_die(&fe);
    REQUIRE(f);
    tbon_packet_t *p;
    CHECK_UINT(fab_pending_packets(fe, 1), 0);      /* cut off: nothing lost yet */

    fab_peer_t *p3 = fab_adopt_peer(f, 3, 1, fe), *p4 = fab_adopt_peer(f, 4, 1, fe);
    REQUIRE(p3 && p4);
    graft(p3, KEY(2, 0), 2);
    graft(p4, KEY(2, 0), 3);
    fab_peer_ctl(p3, TB_CTL_REPORT, report_pkt(TB_V_ADOPTED, 3, 0, 1));
    fab_peer_ctl(p4, TB_CTL_REPORT, report_pkt(TB_V_ADOPTED, 4, 0, 1));
    until_request(p3, 1, 3, __LINE__);             /* the one it missed */
    uint64_t q = 0;
    p = fab_take_packet(fe, 1, FAB_MS, &q);
    CHECK(p == NULL);
    CHECK_UINT(q, 2);                               /* wave 2: lost */
    tbon_packet_unref(p);
    fab_peer_data(p3, 1, KEY(3, 0), 0, set_pkt((uint64_t[]){ 53, 63 }, 2));
    fab_peer_data(p4, 1, KEY(3, 0), 0, set_pkt((uint64_t[]){ 43 }, 1));
    p = fab_take_packet(fe, 1, FAB_MS, &q);
    CHECK_SET(p, 43, 53, 63);
    CHECK_UINT(q, 3);                               /* the result names its request */
    tbon_packet_unref(p);
    no_request(p4, 100, __LINE__);
    CHECK_UINT(fab_pending_packets(fe, 1), 0);
    fab_free(f);
}

/* As above, but the orphans come one by one, and the first brings wave 3
 * before the second is adopted. Wave 2, which both had answered to their
 * dead parents, may still come from the second (it could have missed
 * request 2): wave 3 waits. Once the second is grafted, nobody owes wave 2:
 * it reaches the application as lost, then wave 3, whole. Wave 3 used to go
 * at once, and wave 2 was never said (test_ft/
 * all_fe_children_killed_waves_complete, 1 run in 20 under load). */
TEST(later_wave_waits_for_an_earlier_one_nobody_brought)
{
    fab_node_t *fe;
    fab_t *f = both_children_die(&fe);
    REQUIRE(f);
    tbon_packet_t *p;

    /* 4 first: it answered 2 to its dead parent, gets 3 again, answers it */
    fab_peer_t *p4 = fab_adopt_peer(f, 4, 1, fe);
    REQUIRE(p4);
    graft(p4, KEY(2, 0), 2);
    fab_peer_ctl(p4, TB_CTL_REPORT, report_pkt(TB_V_ADOPTED, 4, 0, 1));
    until_request(p4, 1, 3, __LINE__);
    fab_peer_data(p4, 1, KEY(3, 0), 0, set_pkt((uint64_t[]){ 43 }, 1));
    /* 3 is still an orphan: neither wave 2 nor wave 3 may go yet */
    int64_t dl = tb_now_ms() + 200;
    while (fab_pending_packets(fe, 1) == 0 && tb_now_ms() < dl)
        usleep(5000);
    CHECK_UINT(fab_pending_packets(fe, 1), 0);

    fab_peer_t *p3 = fab_adopt_peer(f, 3, 1, fe);
    REQUIRE(p3);
    graft(p3, KEY(2, 0), 2);
    fab_peer_ctl(p3, TB_CTL_REPORT, report_pkt(TB_V_ADOPTED, 3, 0, 1));
    until_request(p3, 1, 3, __LINE__);
    uint64_t q = 0;
    p = fab_take_packet(fe, 1, FAB_MS, &q);
    CHECK(p == NULL);
    CHECK_UINT(q, 2);                               /* wave 2: lost, first */
    tbon_packet_unref(p);
    fab_peer_data(p3, 1, KEY(3, 0), 0, set_pkt((uint64_t[]){ 53, 63 }, 2));
    p = fab_take_packet(fe, 1, FAB_MS, NULL);
    CHECK_SET(p, 43, 53, 63);
    tbon_packet_unref(p);
    CHECK_UINT(fab_pending_packets(fe, 1), 0);
    fab_free(f);
}

/* The FE on an exact sum stream over 4 (under the test's commnode 2) and 5
 * and 6 (under the test's commnode 1, through 3):
 * - a partial of 5 sent again (late) and the unit of 1 over 5 and 6: the
 *   copy overlaps, so it is dropped: the wave counts 5 once;
 * - commnode 1 dies (reported by 2 first) with wave 2 answered by 2 only:
 *   the wave waits (5 and
 *   6 live, expected, nothing later from them), not delivered short; the
 *   orphan 3, adopted by the FE, sends its unit of wave 2 again, flagged
 *   late: the wave is whole, each back-end once. */
TEST(fe_drops_copies_and_waits_for_partials_sent_again)
{
    fab_node_t *fe;
    fab_peer_t *p1, *p2;
    fab_t *f = fe_over_two_peers(TBON_FILTER_SUM, &fe, &p1, &p2);
    REQUIRE(f);
    const tbon_rank_t c4[] = { 4 }, c5[] = { 5 }, c56[] = { 5, 6 };
    fab_send(fe, 1, tbon_packet_new(1, "%ld", 0L), 0);
    until_request(p1, 1, 1, __LINE__);
    until_request(p2, 1, 1, __LINE__);
    fab_peer_unit(p2, 1, KEY(1, 0), 0, tbon_packet_new(1, "%ld", 4L), c4, 1);
    fab_peer_unit(p1, 1, KEY(1, 0), TB_FRAME_F_LATE, tbon_packet_new(1, "%ld", 5L), c5, 1);
    fab_peer_unit(p1, 1, KEY(1, 0), 0, tbon_packet_new(1, "%ld", 11L), c56, 2);
    tbon_packet_t *p = fab_take_packet(fe, 1, FAB_MS, NULL);
    CHECK_INT(p ? fab_long(p) : -1, 15);
    CHECK_UINT(tbon_packet_covered(p, NULL, 0), 3);
    CHECK_UINT(tbon_packet_missing(p, NULL, 0), 0);
    tbon_packet_unref(p);

    fab_send(fe, 1, tbon_packet_new(1, "%ld", 0L), 0);
    until_request(p1, 1, 2, __LINE__);
    until_request(p2, 1, 2, __LINE__);
    fab_peer_unit(p2, 1, KEY(2, 0), 0, tbon_packet_new(1, "%ld", 40L), c4, 1);
    /* 1's failure comes as a report first (from 2): the FE closes 1 as
     * failed in its view before it says TBON_EV_NODE_FAILED - the wave
     * must wait all the same. */
    fab_peer_ctl(p2, TB_CTL_REPORT, report_pkt(TB_V_FAILED, 1, TBON_RANK_NONE, 0));
    tbon_event_t ev;
    CHECK(fab_take_event(fe, &ev, FAB_MS));
    CHECK_INT(ev.type, TBON_EV_NODE_FAILED);
    int64_t dl = tb_now_ms() + 200;
    while (fab_pending_packets(fe, 1) == 0 && tb_now_ms() < dl)
        usleep(5000);
    CHECK_UINT(fab_pending_packets(fe, 1), 0);          /* not short: it waits */
    fab_peer_t *p3 = fab_adopt_peer(f, 3, 1, fe);
    REQUIRE(p3);
    fab_peer_ctl(p3, TB_CTL_GRAFT, tbon_packet_new(TB_CTL_GRAFT, "%ud %d %d %ud %d %aud %uld %uld",
                                                   1u, TBON_FILTER_SUM,
                                                   TBON_SYNC_WAITFORALL | TB_STREAM_EXACT, 0u,
                                                   TBON_FILTER_NULL, bes3, (size_t)3,
                                                   KEY(2, 0), 2ul));
    fab_peer_unit(p3, 1, KEY(2, 0), TB_FRAME_F_LATE, tbon_packet_new(1, "%ld", 110L), c56, 2);
    fab_peer_ctl(p3, TB_CTL_REPORT, report_pkt(TB_V_ADOPTED, 3, 0, 1));
    uint64_t q = 0;
    p = fab_take_packet(fe, 1, FAB_MS, &q);
    CHECK_UINT(q, 2);
    CHECK_INT(p ? fab_long(p) : -1, 150);
    CHECK_UINT(tbon_packet_covered(p, NULL, 0), 3);
    tbon_packet_unref(p);
    fab_free(f);
}
