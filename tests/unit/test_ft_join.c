/* test_ft_join.c - joins (ft/join.c) against a fake node (ft_fake.h): the
 * FE answers a joiner once its parent has the version that adds it; a
 * joined child that never connects is taken for failed; one that does is
 * announced */
#include "../harness.h"

#include <sys/socket.h>

#include "ft_fake.h"
#include "codec/wire.h"
#include "net/sock.h"
#include "topo/reconfig.h"
#include "util/clock.h"

static const uint32_t FAN[] = { 2, 2 };     /* 0; 1, 2; 3, 4 under 1; 5, 6 under 2 */

/* Whether a frame waits on fd (MSG_PEEK, no wait). */
static int readable(int fd)
{
    uint8_t c;
    return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
}

TEST(joiner_answered_once_its_parent_has_the_version)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    tb_topology_set_port(f->node.topo, 1, 5001);
    tb_topology_set_port(f->node.topo, 2, 5002);
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    tb_cmd_t *c = tb_cmd_join_conn(sv[0], TB_ROLE_BE, TBON_RANK_NONE, 0);
    int slot;
    CHECK_INT(tb_joins_request(f->jn, c, &slot), 1);
    tb_cmd_free(c);                             /* the fd is the joins' now */
    CHECK_INT(slot, -1);                        /* under a commnode, not us */
    CHECK_UINT(tb_topology_size(f->node.topo), 8);
    tbon_rank_t parent = tb_topology_parent(f->node.topo, 7);
    CHECK(parent == 1 || parent == 2);
    CHECK_UINT(tb_joins_pending(f->jn), 1);
    /* the version that adds it goes down; its parent has not taken it */
    tb_view_flush(f->v);
    CHECK_UINT(tb_view_version(f->v), 2);
    CHECK_UINT(tb_joins_pending(f->jn), 1);
    CHECK(!readable(sv[1]));
    /* the other commnode takes it: nothing yet */
    size_t other = parent == 1 ? 1 : 0, mine = parent == 1 ? 0 : 1;
    FF_DELIVER(tb_view_ctl, f->v, (int)other, TB_CTL_VIEW_ACK,
               tb_ctl_view_ack_encode(&(tb_ctl_view_ack_t){ 2, 2, 0 }));
    CHECK(!readable(sv[1]));
    /* the parent's subtree has it: the joiner gets its rank and parent */
    FF_DELIVER(tb_view_ctl, f->v, (int)mine, TB_CTL_VIEW_ACK,
               tb_ctl_view_ack_encode(&(tb_ctl_view_ack_t){ 2, 2, 0 }));
    CHECK_UINT(tb_joins_pending(f->jn), 0);
    tb_frame_t fr;
    REQUIRE(tb_sock_recv_frame(sv[1], 1 << 16, &fr, tb_now_ms() + 1000, NULL) == 0);
    CHECK_INT(fr.hdr.tag, TB_CTL_JOIN_ACK);
    tb_ctl_msg_t m;
    REQUIRE(tb_ctl_decode_bytes(TB_CTL_JOIN_ACK, fr.payload, fr.hdr.len, &m, NULL) == 0);
    CHECK_UINT(m.u.join_ack.rank, 7);
    CHECK_UINT(m.u.join_ack.parent, parent);
    CHECK_UINT(m.u.join_ack.port, 5000 + parent);
    tb_ctl_msg_free(&m);
    tb_frame_release(&fr);
    close(sv[1]);
    ff_free(f);
}

TEST(join_refused_before_the_port_table)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    f->cx.ready = 0;
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    tb_cmd_t *c = tb_cmd_join_conn(sv[0], TB_ROLE_BE, TBON_RANK_NONE, 0);
    int slot;
    CHECK_INT(tb_joins_request(f->jn, c, &slot), 0);
    tb_cmd_free(c);
    CHECK_UINT(tb_topology_size(f->node.topo), 7);
    CHECK_UINT(tb_joins_pending(f->jn), 0);
    close(sv[1]);
    ff_free(f);
}

/* Rank 7 joins under commnode 1 (the view that adds it arrives there). */
static int join_under_1(ff_t *f)
{
    tb_vchange_t ch = { TB_V_JOIN, 7, 1, 0, 7, "h", 0 };
    int slot;
    if (tb_joins_add(f->jn, &ch, &slot) != 1)
        return -1;
    return slot;
}

TEST(joined_child_that_never_connects_fails)
{
    ff_t *f = ff_new(FAN, 2, 1);
    REQUIRE(f);
    int slot = join_under_1(f);
    CHECK_INT(slot, 2);
    CHECK_UINT(f->node.child[2], 7);
    int64_t next = INT64_MAX;
    tb_joins_next(f->jn, &next);
    CHECK(next > tb_now_ms() + 9000 && next <= tb_now_ms() + 10000);
    tb_joins_timers(f->jn, tb_now_ms() + 1000);
    CHECK_INT(f->ups_child_lost, 0);
    tb_joins_timers(f->jn, next);
    CHECK_INT(f->node.absent, 1);
    CHECK_INT(f->ups_child_lost, 1);
    CHECK(!tb_topology_alive(f->node.topo, 7));
    const ff_sent_t *r = ff_find(f, TB_CTL_REPORT, 0);
    REQUIRE(r);
    CHECK_INT(r->m.u.report.kind, TB_V_FAILED);
    CHECK_UINT(r->m.u.report.rank, 7);
    ff_free(f);
}

TEST(joined_child_connects_and_is_reported)
{
    ff_t *f = ff_new(FAN, 2, 1);
    REQUIRE(f);
    tb_joins_child_up(f->jn, 0);                /* a launched child: nothing */
    CHECK_INT(f->ups_report, 0);
    int slot = join_under_1(f);
    REQUIRE(slot == 2);
    f->node.flags[2] |= TB_NFT_CONN | TB_NFT_OPEN;
    tb_joins_child_up(f->jn, 2);
    CHECK_INT(f->ups_report, 1);
    const ff_sent_t *r = ff_find(f, TB_CTL_REPORT, 0);
    REQUIRE(r);
    CHECK_INT(r->m.u.report.kind, TB_V_JOINED);
    CHECK_UINT(r->m.u.report.rank, 7);
    CHECK_UINT(r->m.u.report.parent, 1);
    CHECK_UINT(ff_count(f, TB_CTL_PORTS), 1);
    int64_t next = INT64_MAX;
    tb_joins_next(f->jn, &next);
    CHECK(next == INT64_MAX);                   /* no deadline left */
    ff_free(f);
}
