/* test_ft_view.c - the membership view (ft/view.c) against a fake node
 * (ft_fake.h): a version from the parent applied, passed down and
 * acknowledged as the subtree takes it; the FE's versions made, and stable
 * once every child has them; the consistency check's answers counted */
#include "../harness.h"

#include "ft_fake.h"
#include "topo/reconfig.h"

static const uint32_t FAN[] = { 2, 2 };     /* 0; 1, 2; 3, 4 under 1; 5, 6 under 2 */

static tbon_packet_t *view_of(uint64_t v, uint64_t prev, const tb_vchange_t *ch, size_t k)
{
    return tb_ctl_view_encode(&(tb_ctl_view_t){ v, prev, ch, k });
}

static void ack(ff_t *f, size_t slot, uint64_t applied, uint64_t sub)
{
    FF_DELIVER(tb_view_ctl, f->v, (int)slot, TB_CTL_VIEW_ACK,
               tb_ctl_view_ack_encode(&(tb_ctl_view_ack_t){ applied, sub, 0 }));
}

TEST(version_applied_passed_down_and_acknowledged)
{
    ff_t *f = ff_new(FAN, 2, 1);
    REQUIRE(f);
    CHECK_UINT(tb_view_version(f->v), 1);
    /* version 2: rank 5 failed (not ours) */
    tb_vchange_t ch = { TB_V_FAILED, 5, TBON_RANK_NONE, 0, 0, "", 0 };
    FF_DELIVER(tb_view_ctl, f->v, TB_NFT_PARENT, TB_CTL_VIEW, view_of(2, 1, &ch, 1));
    CHECK_UINT(tb_view_version(f->v), 2);
    CHECK(!tb_topology_alive(f->node.topo, 5));
    CHECK_INT(f->ups_apply, 1);
    CHECK_INT(f->ups_confirm, 1);
    CHECK_INT(f->node.topo_changes, 1);
    /* passed to both children; acknowledged up: applied 2, subtree still 1 */
    CHECK_UINT(ff_count(f, TB_CTL_VIEW), 2);
    CHECK_INT(ff_find(f, TB_CTL_VIEW, 0)->to, 0);
    CHECK_INT(ff_find(f, TB_CTL_VIEW, 1)->to, 1);
    CHECK_UINT(ff_find(f, TB_CTL_VIEW, 1)->m.u.view.version, 2);
    const ff_sent_t *a = ff_find(f, TB_CTL_VIEW_ACK, 0);
    REQUIRE(a);
    CHECK_INT(a->to, TB_NFT_PARENT);
    CHECK_UINT(a->m.u.view_ack.applied, 2);
    CHECK_UINT(a->m.u.view_ack.sub, 1);
    /* one child has it: no news up; both: the subtree has 2 */
    ack(f, 0, 2, 2);
    CHECK_UINT(ff_count(f, TB_CTL_VIEW_ACK), 1);
    ack(f, 1, 2, 2);
    CHECK_UINT(tb_view_subtree(f->v), 2);
    CHECK_UINT(ff_count(f, TB_CTL_VIEW_ACK), 2);
    CHECK_UINT(ff_find(f, TB_CTL_VIEW_ACK, 1)->m.u.view_ack.sub, 2);
    /* the same version again (after an adoption) changes nothing */
    FF_DELIVER(tb_view_ctl, f->v, TB_NFT_PARENT, TB_CTL_VIEW, view_of(2, 1, &ch, 1));
    CHECK_UINT(ff_count(f, TB_CTL_VIEW), 2);
    CHECK_INT(f->ups_apply, 1);
    ff_free(f);
}

TEST(gap_asks_the_parent_again)
{
    ff_t *f = ff_new(FAN, 2, 2);
    REQUIRE(f);
    FF_DELIVER(tb_view_ctl, f->v, TB_NFT_PARENT, TB_CTL_VIEW, view_of(4, 3, NULL, 0));
    CHECK_UINT(tb_view_version(f->v), 1);
    const ff_sent_t *a = ff_find(f, TB_CTL_VIEW_ACK, 0);
    REQUIRE(a);
    CHECK_UINT(a->m.u.view_ack.applied, 1);
    CHECK_INT(a->m.u.view_ack.want, 1);
    CHECK_UINT(ff_count(f, TB_CTL_VIEW), 0);
    ff_free(f);
}

TEST(child_gone_is_not_waited_for)
{
    ff_t *f = ff_new(FAN, 2, 1);
    REQUIRE(f);
    FF_DELIVER(tb_view_ctl, f->v, TB_NFT_PARENT, TB_CTL_VIEW, view_of(2, 1, NULL, 0));
    ack(f, 0, 2, 2);
    CHECK_UINT(tb_view_subtree(f->v), 1);
    f->node.flags[1] = 0;               /* slot 1's connection ended */
    tb_view_child_gone(f->v, 1);
    CHECK_UINT(tb_view_subtree(f->v), 2);
    ff_free(f);
}

TEST(fe_version_stable_once_every_child_has_it)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    /* a failure first hand: applied, announced, and the next version */
    tb_recovery_failed(f->rc, 6, 0, "test");
    CHECK_UINT(ff_events(f, TBON_EV_NODE_FAILED), 1);
    tb_view_flush(f->v);
    CHECK_UINT(tb_view_version(f->v), 2);
    CHECK_UINT(ff_count(f, TB_CTL_VIEW), 2);
    const ff_sent_t *s = ff_find(f, TB_CTL_VIEW, 0);
    CHECK_UINT(s->m.u.view.n, 1);
    CHECK_INT(s->m.u.view.ch[0].kind, TB_V_FAILED);
    CHECK_UINT(s->m.u.view.ch[0].rank, 6);
    ack(f, 0, 2, 2);
    CHECK_UINT(ff_events(f, TBON_EV_VIEW_STABLE), 0);
    ack(f, 1, 2, 2);
    CHECK_UINT(ff_events(f, TBON_EV_VIEW_STABLE), 1);
    CHECK_UINT(f->node.ev[f->node.nev - 1].version, 2);
    ff_free(f);
}

TEST(fe_holds_changes_while_a_node_has_no_parent)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    /* rank 1 failed: 3 and 4 are orphans; the version waits for them */
    tb_recovery_failed(f->rc, 1, 0, "test");
    tb_view_flush(f->v);
    CHECK_UINT(tb_view_version(f->v), 1);
    /* 3 and 4 adopted by 2: published at once */
    tb_recovery_apply(f->rc, TB_V_ADOPTED, 3, 2, 1);
    tb_recovery_apply(f->rc, TB_V_ADOPTED, 4, 2, 1);
    tb_view_flush(f->v);
    CHECK_UINT(tb_view_version(f->v), 2);
    CHECK_UINT(ff_find(f, TB_CTL_VIEW, 0)->m.u.view.n, 3);
    ff_free(f);
}

TEST(consistency_check_counts_answers)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    tb_view_check(f->v, 9);
    CHECK_UINT(ff_count(f, TB_CTL_CHECK), 2);
    CHECK_INT(f->checked, 0);
    uint32_t agree[] = { 1, 3 }, bad[] = { 4 };
    FF_DELIVER(tb_view_ctl, f->v, 0, TB_CTL_CHECKED,
               tb_ctl_checked_encode(&(tb_ctl_checked_t){ 9, agree, bad, 2, 1 }));
    CHECK_INT(f->checked, 0);
    /* the other child's connection ends: the answer is complete without it */
    f->node.flags[1] = 0;
    tb_view_child_gone(f->v, 1);
    CHECK_INT(f->checked, 1);
    CHECK_UINT(f->nagree, 3);       /* the FE itself, 1 and 3 */
    CHECK_UINT(f->nbad, 1);
    ff_free(f);
}
