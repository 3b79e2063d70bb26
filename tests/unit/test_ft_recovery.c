/* test_ft_recovery.c - recovery (ft/recovery.c) against a fake node
 * (ft_fake.h): a report held until a view brings its fact back, sent again
 * to an adopter; an orphan's buffer and its bound; the adopter's refusals */
#include "../harness.h"

#include <sys/socket.h>

#include "ft_fake.h"
#include "topo/reconfig.h"

static const uint32_t FAN[] = { 2, 2 };     /* 0; 1, 2; 3, 4 under 1; 5, 6 under 2 */

TEST(report_held_until_a_view_confirms_it)
{
    ff_t *f = ff_new(FAN, 2, 1);
    REQUIRE(f);
    tb_recovery_child_lost(f->rc, 0);           /* rank 3 */
    CHECK(!tb_topology_alive(f->node.topo, 3));
    CHECK_INT(f->node.closed, 1);
    const ff_sent_t *r = ff_find(f, TB_CTL_REPORT, 0);
    REQUIRE(r);
    CHECK_INT(r->to, TB_NFT_PARENT);
    CHECK_INT(r->m.u.report.kind, TB_V_FAILED);
    CHECK_UINT(r->m.u.report.rank, 3);
    CHECK_UINT(tb_recovery_held(f->rc), 1);
    /* a view about another rank leaves it held */
    tb_vchange_t other = { TB_V_FAILED, 5, TBON_RANK_NONE, 0, 0, "", 0 };
    tb_recovery_confirm(f->rc, &other, 1);
    CHECK_UINT(tb_recovery_held(f->rc), 1);
    /* the view that brings it back ends it */
    tb_vchange_t it = { TB_V_FAILED, 3, TBON_RANK_NONE, 0, 0, "", 0 };
    FF_DELIVER(tb_view_ctl, f->v, TB_NFT_PARENT, TB_CTL_VIEW,
               tb_ctl_view_encode(&(tb_ctl_view_t){ 2, 1, &it, 1 }));
    CHECK_UINT(tb_recovery_held(f->rc), 0);
    ff_free(f);
}

TEST(report_from_a_child_goes_up_once)
{
    ff_t *f = ff_new(FAN, 2, 1);
    REQUIRE(f);
    tbon_packet_t *p = tb_ctl_report_encode(&(tb_ctl_report_t){ TB_V_FAILED, 6, 0, 0, { 0 } });
    tb_ctl_msg_t m;
    REQUIRE(p && tb_ctl_decode(TB_CTL_REPORT, p, &m, NULL) == 0);
    tb_recovery_ctl(f->rc, 0, &m, p);
    tb_recovery_ctl(f->rc, 1, &m, p);       /* the same fact from the other child */
    CHECK_UINT(ff_count(f, TB_CTL_REPORT), 1);
    CHECK(!tb_topology_alive(f->node.topo, 6));
    /* from the parent: applied, not sent back up */
    tb_ctl_msg_free(&m);
    tbon_packet_unref(p);
    p = tb_ctl_report_encode(&(tb_ctl_report_t){ TB_V_FAILED, 5, 0, 0, { 0 } });
    REQUIRE(p && tb_ctl_decode(TB_CTL_REPORT, p, &m, NULL) == 0);
    tb_recovery_ctl(f->rc, TB_NFT_PARENT, &m, p);
    CHECK(!tb_topology_alive(f->node.topo, 5));
    CHECK_UINT(ff_count(f, TB_CTL_REPORT), 1);
    tb_ctl_msg_free(&m);
    tbon_packet_unref(p);
    ff_free(f);
}

TEST(orphan_buffer_bound_counts_drops)
{
    ff_t *f = ff_new(FAN, 2, 3);
    REQUIRE(f);
    f->node.pflags = 0;                         /* the parent's connection ended */
    CHECK_INT(tb_recovery_parent_lost(f->rc, 1), 1);
    CHECK_INT(tb_recovery_orphan(f->rc), 1);
    CHECK(!tb_topology_alive(f->node.topo, 1));
    /* 16 MiB packets: three fit under the 64 MiB bound with their overhead,
     * the fourth and fifth are dropped and counted */
    size_t big = 16u << 20;
    char *s = malloc(big);
    REQUIRE(s);
    memset(s, 'x', big - 1);
    s[big - 1] = 0;
    tbon_packet_t *p = tbon_packet_new(1, "%s", s);
    free(s);
    REQUIRE(p);
    for (int i = 0; i < 5; i++)
        tb_recovery_buffer(f->rc, 7, tbon_packet_ref(p), 0, (uint64_t)i + 1);
    tbon_packet_unref(p);
    size_t npkt, bytes, dropped;
    tb_recovery_buffered(f->rc, &npkt, &bytes, &dropped);
    CHECK_UINT(npkt, 3);
    CHECK_UINT(dropped, 2);
    CHECK(bytes <= 64u << 20);
    /* adopted by 2: what was kept goes up, and the loss is reported */
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    close(sv[1]);
    tb_cmd_t *c = tb_cmd_adopted(sv[0], 2, 1, 10, 20);
    REQUIRE(c);
    f->node.filters = 2;
    tb_recovery_adopted(f->rc, c);
    tb_cmd_free(c);
    CHECK_INT(tb_recovery_orphan(f->rc), 0);
    CHECK_UINT(f->node.resent, 3);
    tb_recovery_buffered(f->rc, &npkt, &bytes, &dropped);
    CHECK_UINT(npkt, 0);
    CHECK_UINT(dropped, 0);
    CHECK_UINT(tb_topology_parent(f->node.topo, 3), 2);
    /* the lost parent's failure, then our adoption with the loss flagged */
    const ff_sent_t *r0 = ff_find(f, TB_CTL_REPORT, 0), *r1 = ff_find(f, TB_CTL_REPORT, 1);
    REQUIRE(r0 && r1);
    CHECK_INT(r0->m.u.report.kind, TB_V_FAILED);
    CHECK_UINT(r0->m.u.report.rank, 1);
    CHECK_INT(r1->m.u.report.kind, TB_V_ADOPTED);
    CHECK_UINT(r1->m.u.report.parent, 2);
    CHECK_UINT(r1->m.u.report.us[0], 10);
    CHECK_UINT(r1->m.u.report.us[4], 1);
    /* ahead of them, what we have, for the adopter to send what we lack */
    const ff_sent_t *cu = ff_find(f, TB_CTL_CATCH_UP, 0);
    REQUIRE(cu);
    CHECK_INT(cu->to, TB_NFT_PARENT);
    CHECK(cu < r0);
    CHECK_UINT(cu->m.u.catch_up.filters, 2);
    CHECK_INT(cu->m.u.catch_up.ports, 1);
    /* and the view asks the new parent where we are */
    CHECK_INT(ff_find(f, TB_CTL_VIEW_ACK, 0)->m.u.view_ack.want, 1);
    ff_free(f);
}

TEST(parent_lost_without_port_table_leaves)
{
    ff_t *f = ff_new(FAN, 2, 3);
    REQUIRE(f);
    f->cx.ready = 0;                            /* and no EDS */
    CHECK_INT(tb_recovery_parent_lost(f->rc, 1), 0);
    CHECK_INT(tb_recovery_orphan(f->rc), 0);
    ff_free(f);
}

static int adopt(ff_t *f, tbon_rank_t o, uint32_t inc)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return -1;
    close(sv[1]);
    tb_cmd_t *c = tb_cmd_adopt_conn(sv[0], o, inc);
    size_t before = f->node.nchild;
    tb_recovery_adopt_conn(f->rc, c);
    tb_cmd_free(c);
    return f->node.nchild > before;
}

TEST(adopter_takes_an_orphan_and_refuses_a_cycle)
{
    ff_t *f = ff_new(FAN, 2, 2);
    REQUIRE(f);
    tb_recovery_apply(f->rc, TB_V_FAILED, 1, TBON_RANK_NONE, 0);
    CHECK_INT(adopt(f, 0, 1), 0);               /* the FE: a cycle */
    CHECK_INT(adopt(f, 3, 1), 1);
    CHECK_UINT(f->node.child[2], 3);
    const ff_sent_t *a = ff_find(f, TB_CTL_ADOPT_ACK, 0);
    REQUIRE(a);
    CHECK_INT(a->to, 2);
    /* nothing else until the orphan says what it lacks */
    CHECK_UINT(f->node.nsent, 1);
    CHECK_INT(f->node.caught_up, 0);
    CHECK_INT(adopt(f, 3, 1), 0);               /* already ours */
    CHECK_INT(adopt(f, 1, 1), 0);               /* fenced */
    ff_free(f);
}

static void catch_up_from(ff_t *f, int child, uint32_t filters, int32_t ports)
{
    tb_ctl_msg_t m = { .op = TB_CTL_CATCH_UP, .u.catch_up = { filters, ports } };
    tbon_packet_t *p = tb_ctl_catch_up_encode(&m.u.catch_up);
    tb_recovery_ctl(f->rc, child, &m, p);
    tbon_packet_unref(p);
}

/* After its grafts the orphan says what it has (TB_CTL_CATCH_UP): one with
 * the port table gets none, one without gets it; the node sends the filters
 * after those it has and the streams it did not graft. */
TEST(adopter_sends_an_orphan_only_what_it_lacks)
{
    ff_t *f = ff_new(FAN, 2, 2);
    REQUIRE(f);
    tb_recovery_apply(f->rc, TB_V_FAILED, 1, TBON_RANK_NONE, 0);
    CHECK_INT(adopt(f, 3, 1), 1);
    CHECK_INT(adopt(f, 4, 1), 1);
    size_t sent = f->node.nsent;
    catch_up_from(f, 2, 3, 1);
    CHECK_UINT(f->node.nsent, sent);            /* it has the port table */
    CHECK_INT(f->node.caught_up, 1);
    CHECK_UINT(f->node.cu_slot, 2);
    CHECK_UINT(f->node.cu_filters, 3);
    catch_up_from(f, 3, 0, 0);                  /* rank 4 lacks everything */
    const ff_sent_t *p = ff_find(f, TB_CTL_PORTS, 0);
    REQUIRE(p);
    CHECK_INT(p->to, 3);
    CHECK_UINT(ff_count(f, TB_CTL_PORTS), 1);
    CHECK_INT(f->node.caught_up, 2);
    CHECK_UINT(f->node.cu_slot, 3);
    CHECK_UINT(f->node.cu_filters, 0);
    catch_up_from(f, TB_NFT_PARENT, 0, 0);      /* not from a parent */
    CHECK_INT(f->node.caught_up, 2);
    ff_free(f);
}
