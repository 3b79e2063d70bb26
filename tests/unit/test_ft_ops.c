/* test_ft_ops.c - ft's composer (ft/ops.c) against a fake node (ft_fake.h):
 * the parts made by tb_ft_new and wired by ops.c's own table of calls up,
 * each node event and control message passed to the part that owns it, and
 * the parts' timers run through tb_ft_timers / tb_ft_next. The other
 * test_ft_*.c test each part alone, wired by the fake; this one tests the
 * wiring the library uses. */
#include "../harness.h"

#include <sys/socket.h>

#include "ft_fake.h"
#include "topo/reconfig.h"
#include "util/clock.h"

static const uint32_t FAN[] = { 2, 2 };     /* 0; 1, 2; 3, 4 under 1; 5, 6 under 2 */
static const uint32_t FLAT[] = { 2 };       /* 0; back-ends 1, 2 */

/* Node rank of fanout, its parts made by ops.c; ready (the port table here). */
static struct tb_ft *composed(ff_t **fp, const uint32_t *fanout, size_t levels,
                              tbon_rank_t rank)
{
    ff_t *f = ff_new_node(fanout, levels, rank);
    struct tb_ft *ft = f ? tb_ft_new(&f->cx.nd) : NULL;
    if (ft)
        tb_ft_ctx(ft)->ready = 1;
    *fp = f;
    return ft;
}

static int event(struct tb_ft *ft, tb_ft_ev_kind_t kind, size_t child)
{
    tb_ft_event_t ev = { .kind = kind, .u.child = child };
    return tb_ft_event(ft, &ev);
}

static void command(struct tb_ft *ft, tb_cmd_t *c)
{
    tb_ft_event_t ev = { .kind = TB_FT_EV_CMD, .u.cmd = c };
    tb_ft_event(ft, &ev);
    tb_cmd_free(c);
}

static void ctl(struct tb_ft *ft, int from, int op, tbon_packet_t *p)
{
    tb_ctl_msg_t m;
    REQUIRE(p && tb_ctl_decode(op, p, &m, NULL) == 0);
    tb_ft_ctl(ft, from, &m, p);
    tb_ctl_msg_free(&m);
    tbon_packet_unref(p);
}

/* A lost child goes to recovery (a report up), and a view from the parent
 * goes to view (passed down, acknowledged up), whose confirmation reaches
 * recovery through ops.c's calls up: the report is not sent again when
 * the child's parent asks where we are. */
TEST(child_lost_to_recovery_and_view_to_view)
{
    ff_t *f;
    struct tb_ft *ft = composed(&f, FAN, 2, 1);
    REQUIRE(ft);
    CHECK_INT(event(ft, TB_FT_EV_CHILD_LOST, 0), 0);    /* rank 3 */
    CHECK(!tb_topology_alive(f->node.topo, 3));
    CHECK_INT(f->node.closed, 1);
    const ff_sent_t *r = ff_find(f, TB_CTL_REPORT, 0);
    REQUIRE(r);
    CHECK_INT(r->to, TB_NFT_PARENT);
    CHECK_UINT(r->m.u.report.rank, 3);
    tb_vchange_t it = { TB_V_FAILED, 3, TBON_RANK_NONE, 0, 0, "", 0 };
    ctl(ft, TB_NFT_PARENT, TB_CTL_VIEW, tb_ctl_view_encode(&(tb_ctl_view_t){ 2, 1, &it, 1 }));
    const ff_sent_t *v = ff_find(f, TB_CTL_VIEW, 0);
    REQUIRE(v);
    CHECK_INT(v->to, 1);                                /* to rank 4 only: 3 is dead */
    CHECK_UINT(v->m.u.view.version, 2);
    const ff_sent_t *a = ff_find(f, TB_CTL_VIEW_ACK, 0);
    REQUIRE(a);
    CHECK_UINT(a->m.u.view_ack.applied, 2);
    CHECK_UINT(ff_count(f, TB_CTL_REPORT), 1);
    tb_ft_destroy(ft);
    ff_free(f);
}

/* The EDS's commands: a child found silent marks the node's child
 * suspected; an attribute written at a back-end goes up. */
TEST(commands_to_suspect_and_attr)
{
    ff_t *f;
    struct tb_ft *ft = composed(&f, FAN, 2, 1);
    REQUIRE(ft);
    command(ft, tb_cmd_suspect(4, 1, 1000));
    CHECK_INT(f->node.suspect[1], 1);
    CHECK_INT(f->node.suspect[0], 0);
    command(ft, tb_cmd_suspect(4, 0, 0));
    CHECK_INT(f->node.suspect[1], 0);
    tb_ft_destroy(ft);
    ff_free(f);

    ft = composed(&f, FAN, 2, 3);
    REQUIRE(ft);
    command(ft, tb_cmd_attr("phase", "io"));
    const ff_sent_t *s = ff_find(f, TB_CTL_ATTR, 0);
    REQUIRE(s);
    CHECK_INT(s->to, TB_NFT_PARENT);
    tb_ft_destroy(ft);
    ff_free(f);
}

/* The parent lost: an orphan, whose output is held for the adopter (the
 * event's result says it took the packet) until the adoption, which
 * sends it on; a second loss while an orphan changes nothing. */
TEST(orphan_holds_its_output_until_adopted)
{
    ff_t *f;
    struct tb_ft *ft = composed(&f, FAN, 2, 3);
    REQUIRE(ft);
    tbon_packet_t *p = tbon_packet_new(100, "%d", 7);
    REQUIRE(p);
    tb_ft_event_t up = { .kind = TB_FT_EV_ORPHAN_UP, .u.up = { 9, p, 0, 1 } };
    CHECK_INT(tb_ft_event(ft, &up), 0);                 /* not an orphan: the node sends it */
    f->node.pflags = 0;
    tb_ft_event_t lost = { .kind = TB_FT_EV_PARENT_LOST, .u.rank = 1 };
    CHECK_INT(tb_ft_event(ft, &lost), 1);
    CHECK(!tb_topology_alive(f->node.topo, 1));
    CHECK_INT(tb_ft_event(ft, &lost), 1);
    CHECK_UINT(ff_count(f, TB_CTL_REPORT), 0);          /* no parent to tell yet */
    tb_ft_event_t held = up;
    held.u.up.p = tbon_packet_ref(p);
    CHECK_INT(tb_ft_event(ft, &held), 1);               /* held: it took that reference */
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    close(sv[1]);
    command(ft, tb_cmd_adopted(sv[0], 2, 1, 10, 20));
    CHECK_UINT(f->node.resent, 1);
    CHECK_UINT(tb_topology_parent(f->node.topo, 3), 2);
    CHECK_UINT(ff_count(f, TB_CTL_REPORT), 2);          /* 1 failed; 3 adopted by 2 */
    CHECK_INT(tb_ft_event(ft, &up), 0);
    tbon_packet_unref(p);
    tb_ft_destroy(ft);
    ff_free(f);
}

/* Nodes left out at start-up: dead, and their children under the node that
 * launched them in their place. */
TEST(missing_at_start_applied)
{
    ff_t *f;
    struct tb_ft *ft = composed(&f, FAN, 2, 0);
    REQUIRE(ft);
    const tbon_rank_t moved[] = { 3, 4 };
    tb_ft_event_t ev = { .kind = TB_FT_EV_MISSING, .u.missing = { 1, 2, moved, 2 } };
    CHECK_INT(tb_ft_event(ft, &ev), 0);
    CHECK(!tb_topology_alive(f->node.topo, 1));
    CHECK_UINT(tb_topology_parent(f->node.topo, 3), 2);
    CHECK_UINT(tb_topology_parent(f->node.topo, 4), 2);
    CHECK(tb_topology_alive(f->node.topo, 3));
    tb_ft_destroy(ft);
    ff_free(f);
}

/* The FE's own suspicion of a back-end stands for its window, then the
 * timers confirm it: tb_ft_next names the time, tb_ft_timers acts. A
 * control message ft does not own is left alone. */
TEST(fe_suspicion_confirmed_by_the_timers)
{
    ff_t *f;
    struct tb_ft *ft = composed(&f, FLAT, 1, 0);
    REQUIRE(ft);
    int64_t t0 = tb_now_ms();
    command(ft, tb_cmd_suspect(1, 1, 1000));
    CHECK_UINT(ff_events(f, TBON_EV_NODE_SUSPECT), 1);
    int64_t next = INT64_MAX;
    tb_ft_next(ft, &next);
    CHECK(next >= t0 + 200 && next <= tb_now_ms() + 200);
    tb_ft_timers(ft, t0 + 100);
    CHECK(tb_topology_alive(f->node.topo, 1));
    tb_ft_timers(ft, tb_now_ms() + 200);
    CHECK(!tb_topology_alive(f->node.topo, 1));
    CHECK_UINT(ff_events(f, TBON_EV_NODE_FAILED), 1);
    size_t sent = f->node.nsent;
    ctl(ft, 0, TB_CTL_SHUTDOWN, tb_ctl_shutdown_encode(&(tb_ctl_shutdown_t){ 0 }));
    CHECK_UINT(f->node.nsent, sent);
    tb_ft_destroy(ft);
    ff_free(f);
}
