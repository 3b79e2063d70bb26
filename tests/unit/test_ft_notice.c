/* test_ft_notice.c - failure notices (ft/notice.c) against a fake node
 * (ft_fake.h): a signed notice taken; one with a bad MAC, another
 * session's, a replayed or older sequence, or a fenced sender's dropped */
#include "../harness.h"

#include "ft_fake.h"
#include "topo/reconfig.h"
#include "util/clock.h"

static const uint32_t FAN[] = { 2, 2 };     /* 0; 1, 2; 3, 4 under 1; 5, 6 under 2 */

static void take(ff_t *f, int kind, tbon_rank_t from, tbon_rank_t r, uint64_t seq, int spoil)
{
    uint8_t b[TB_NOTICE_SIZE];
    tb_notice_encode(b, &f->session, kind, 0, from, 0, r, 0, seq);
    if (spoil)
        b[TB_NOTICE_SIZE - 1] ^= 1;
    tb_notice_take(f->nt, b, sizeof b, NULL, 0);
}

TEST(failure_notice_taken)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    take(f, TB_NOTICE_FAILED, 3, 1, 5, 0);
    CHECK(!tb_topology_alive(f->node.topo, 1));
    CHECK_INT(f->ups_failed, 1);
    CHECK_UINT(ff_events(f, TBON_EV_NODE_FAILED), 1);
    ff_free(f);
}

TEST(bad_mac_dropped)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    take(f, TB_NOTICE_FAILED, 3, 1, 5, 1);
    CHECK(tb_topology_alive(f->node.topo, 1));
    /* another session's secret */
    uint8_t b[TB_NOTICE_SIZE];
    tb_session_t other = f->session;
    other.secret[0] ^= 1;
    tb_notice_encode(b, &other, TB_NOTICE_FAILED, 0, 3, 0, 1, 0, 6);
    tb_notice_take(f->nt, b, sizeof b, NULL, 0);
    CHECK(tb_topology_alive(f->node.topo, 1));
    /* cut short */
    tb_notice_encode(b, &f->session, TB_NOTICE_FAILED, 0, 3, 0, 1, 0, 7);
    tb_notice_take(f->nt, b, sizeof b - 1, NULL, 0);
    CHECK(tb_topology_alive(f->node.topo, 1));
    CHECK_INT(f->ups_failed, 0);
    ff_free(f);
}

TEST(replayed_sequence_dropped)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    take(f, TB_NOTICE_SUSPECT, 1, 3, 10, 0);
    CHECK_UINT(tb_suspect_observers(f->sp, 3), 1);
    take(f, TB_NOTICE_ALIVE, 1, 3, 10, 0);      /* the same sequence */
    take(f, TB_NOTICE_ALIVE, 1, 3, 9, 0);       /* an older one */
    CHECK_UINT(tb_suspect_observers(f->sp, 3), 1);
    take(f, TB_NOTICE_ALIVE, 1, 3, 11, 1);      /* newer, but a bad MAC */
    CHECK_UINT(tb_suspect_observers(f->sp, 3), 1);
    take(f, TB_NOTICE_ALIVE, 1, 3, 11, 0);
    CHECK_UINT(tb_suspect_observers(f->sp, 3), 0);
    CHECK_UINT(ff_events(f, TBON_EV_NODE_ALIVE), 1);
    /* another sender's sequences are its own */
    take(f, TB_NOTICE_SUSPECT, 4, 3, 1, 0);
    CHECK_UINT(tb_suspect_observers(f->sp, 3), 1);
    ff_free(f);
}

TEST(fenced_sender_not_believed)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    tb_recovery_apply(f->rc, TB_V_FAILED, 2, TBON_RANK_NONE, 0);
    take(f, TB_NOTICE_FAILED, 2, 1, 5, 0);
    CHECK(tb_topology_alive(f->node.topo, 1));
    /* nor anything before the port table */
    f->cx.ready = 0;
    take(f, TB_NOTICE_FAILED, 3, 1, 6, 0);
    CHECK(tb_topology_alive(f->node.topo, 1));
    ff_free(f);
}

TEST(verdict_taken_only_from_the_fe)
{
    ff_t *f = ff_new(FAN, 2, 3);
    REQUIRE(f);
    uint8_t b[TB_NOTICE_SIZE];
    tb_notice_encode(b, &f->session, TB_NOTICE_VERDICT, TB_VERDICT_FAILED, 2, 0, 1, 0, 5);
    tb_notice_take(f->nt, b, sizeof b, NULL, 0);
    CHECK_INT(f->node.parent_lost, 0);
    tb_notice_encode(b, &f->session, TB_NOTICE_VERDICT, TB_VERDICT_FAILED, 0, 0, 1, 0, 6);
    tb_notice_take(f->nt, b, sizeof b, NULL, 0);
    CHECK_INT(f->node.parent_lost, 1);
    tb_notice_take(f->nt, b, sizeof b, NULL, 0);    /* replayed */
    CHECK_INT(f->node.parent_lost, 1);
    ff_free(f);
}

/* Every orphan's notice about its parent says it is alive and looking for
 * an adopter: the FE gives it four heartbeat timeouts to be adopted, where
 * an orphan never heard from gets one and a half (ft/view.c; the fake's
 * heartbeat is 1000 ms). A notice from a rank that is no child of the
 * failed one marks nobody. */
TEST(orphan_heard_from_waits_longer_for_its_adoption)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    take(f, TB_NOTICE_FAILED, 3, 1, 5, 0);      /* 3 and 4 are orphans; 3 said so */
    take(f, TB_NOTICE_FAILED, 5, 1, 6, 0);      /* 5 is 2's child: no orphan of 1 */
    CHECK(!tb_topology_alive(f->node.topo, 1));
    int64_t t0 = tb_now_ms();
    tb_view_flush(f->v);
    CHECK_INT(tb_view_timers(f->v, t0 + 1400), 0);
    CHECK_INT(tb_view_timers(f->v, t0 + 1600), 1);     /* 4: never heard from */
    CHECK(tb_topology_alive(f->node.topo, 3));
    CHECK(!tb_topology_alive(f->node.topo, 4));
    tb_view_flush(f->v);
    CHECK_INT(tb_view_timers(f->v, t0 + 3900), 0);
    CHECK(tb_topology_alive(f->node.topo, 3));
    CHECK(tb_topology_alive(f->node.topo, 5));
    CHECK_INT(tb_view_timers(f->v, t0 + 4100), 1);     /* 3: its time is up too */
    CHECK(!tb_topology_alive(f->node.topo, 3));
    ff_free(f);
}
