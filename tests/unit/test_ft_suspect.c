/* test_ft_suspect.c - suspicion (ft/suspect.c) against a fake node
 * (ft_fake.h): the FE confirms a suspicion after its window (one observer
 * for a back-end, two for a node with live children, or one for three
 * windows), an observer that hears the suspect again clears it, and a
 * node's own EDS marks its child suspected once */
#include "../harness.h"

#include "ft_fake.h"
#include "topo/reconfig.h"
#include "util/clock.h"

static const uint32_t FAN[] = { 2, 2 };     /* 0; 1, 2; 3, 4 under 1; 5, 6 under 2 */

TEST(backend_suspicion_confirmed_after_its_window)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    int64_t t0 = tb_now_ms();
    tb_suspect_fe(f->sp, 3, 0, 1, 1, NULL, 0);
    CHECK_UINT(tb_suspect_observers(f->sp, 3), 1);
    CHECK_UINT(ff_events(f, TBON_EV_NODE_SUSPECT), 1);
    int64_t next = INT64_MAX;
    tb_suspect_next(f->sp, &next);
    CHECK(next >= t0 + 200 && next <= tb_now_ms() + 200);
    tb_suspect_timers(f->sp, t0 + 100);         /* within the window */
    CHECK(tb_topology_alive(f->node.topo, 3));
    tb_suspect_timers(f->sp, tb_now_ms() + 200);
    CHECK(!tb_topology_alive(f->node.topo, 3));
    CHECK_INT(f->ups_failed, 1);
    CHECK_UINT(ff_events(f, TBON_EV_NODE_FAILED), 1);
    CHECK_UINT(tb_suspect_observers(f->sp, 3), 0);
    ff_free(f);
}

TEST(suspicion_cleared_by_alive)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    tb_suspect_fe(f->sp, 4, 0, 1, 1, NULL, 0);
    tb_suspect_fe(f->sp, 4, 0, 1, 0, NULL, 0);  /* heard again */
    CHECK_UINT(tb_suspect_observers(f->sp, 4), 0);
    CHECK_UINT(ff_events(f, TBON_EV_NODE_ALIVE), 1);
    tb_suspect_timers(f->sp, tb_now_ms() + 10000);
    CHECK(tb_topology_alive(f->node.topo, 4));
    CHECK_INT(f->ups_failed, 0);
    ff_free(f);
}

TEST(commnode_needs_two_observers_or_three_windows)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    int64_t t0 = tb_now_ms();
    tb_suspect_fe(f->sp, 1, 0, 0, 1, NULL, 0);  /* the FE, its parent */
    tb_suspect_timers(f->sp, t0 + 250);
    CHECK(tb_topology_alive(f->node.topo, 1));
    tb_suspect_fe(f->sp, 1, 0, 3, 1, NULL, 0);  /* and one of its children */
    CHECK_UINT(tb_suspect_observers(f->sp, 1), 2);
    tb_suspect_timers(f->sp, tb_now_ms() + 200);
    CHECK(!tb_topology_alive(f->node.topo, 1));
    /* rank 2, one observer only: after three windows */
    int64_t t1 = tb_now_ms();
    tb_suspect_fe(f->sp, 2, 0, 0, 1, NULL, 0);
    tb_suspect_timers(f->sp, t1 + 400);
    CHECK(tb_topology_alive(f->node.topo, 2));
    tb_suspect_timers(f->sp, tb_now_ms() + 600);
    CHECK(!tb_topology_alive(f->node.topo, 2));
    ff_free(f);
}

TEST(stale_incarnation_is_not_suspected)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    tb_suspect_fe(f->sp, 3, 1u << TB_INC_GEN_SHIFT, 1, 1, NULL, 0);
    CHECK_UINT(tb_suspect_observers(f->sp, 3), 0);
    CHECK_UINT(ff_events(f, TBON_EV_NODE_SUSPECT), 0);
    ff_free(f);
}

TEST(own_child_marked_suspected_once)
{
    ff_t *f = ff_new(FAN, 2, 1);
    REQUIRE(f);
    tb_suspect_cmd(f->sp, 4, 1, 1500);
    CHECK_INT(f->node.suspect[1], 1);
    tb_suspect_cmd(f->sp, 4, 1, 1500);           /* again on the next beat */
    CHECK_INT(f->node.suspect[1], 1);
    tb_suspect_cmd(f->sp, 4, 0, 0);
    CHECK_INT(f->node.suspect[1], 0);
    ff_free(f);
}

TEST(fe_verdict_on_the_parent_leaves_it)
{
    ff_t *f = ff_new(FAN, 2, 3);
    REQUIRE(f);
    tb_suspect_verdict(f->sp, 1, 0, TB_VERDICT_SUSPECTED);
    CHECK_INT(f->node.parent_lost, 0);
    tb_suspect_verdict(f->sp, 2, 0, TB_VERDICT_FAILED);     /* not our parent */
    CHECK_INT(f->node.parent_lost, 0);
    tb_suspect_verdict(f->sp, 1, 0, TB_VERDICT_FAILED);
    CHECK_INT(f->node.parent_lost, 1);
    ff_free(f);
}
