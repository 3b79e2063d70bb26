/* node.c - the data-plane reactor of a tree process: one epoll loop over the
 * connections to the parent and the children, the command queue and timers.
 * It never blocks on anything but epoll_wait (docs/architecture.md, "Two threads per process"). */
#include "node/node_int.h"
#include "util/hot.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/error.h"
#include "util/log.h"
#include "proc/relay.h"
#include "proc/sshmux.h"
#include "codec/packet_int.h"
#include "net/link.h"
#include "net/sock.h"

/* Read at most this much from one connection per wake-up, so one busy child
 * cannot starve the others. */
#define READ_BUDGET (256u * 1024)

/* A payload this large becomes its packet's own buffer (tb_packet_decode_take)
 * instead of being copied into one. */
#define TB_DECODE_IN_PLACE (64u * 1024)

/* The frames a connection's decoder holds. Each passes the link layer
 * first (net/link.h: acknowledgements taken, duplicates and frames after a
 * gap dropped); a corrupt frame (its CRC, or a header that fails its
 * checks: tb_fdec_resume) is skipped and a resend asked for, so only a
 * framing not found again (or a packet that does not decode) ends the
 * socket, which the link layer then tries to replace (node_link.c). */
/* An authenticated peer broke the protocol (a frame or packet that does not
 * decode, pieces that do not fit): said at the default level, naming the
 * peer and why, unlike a connection that merely broke (node_link.c). */
static void violation(const tb_conn_t *c)
{
    TB_WARN_LIMITED("conn", "rank %u (%s) broke the protocol: %s; its connection is closed",
                    c->rank, c->index < 0 ? "the parent" : "a child", c->why);
}

/* A piece of a large packet (or what ends one) is kept or passed on beyond
 * this read of the socket: it gets its own copy of a borrowed payload
 * (codec/wire.h). 0 if there is no memory for it: c is closed. */
static int own_piece(tb_conn_t *c, tb_frame_t *f)
{
    if (!(f->hdr.flags & (TB_FRAME_F_FRAG | TB_FRAME_F_ABORT) || c->cut_on || c->frag_len) ||
        tb_frame_own(f) == 0)
        return 1;
    snprintf(c->why, sizeof c->why, "out of memory for a %u-byte piece", (unsigned)f->hdr.len);
    c->closed = 1;
    return 0;
}

TB_HOT static void on_frames(tb_node_t *n, tb_conn_t *c)
{
    tb_frame_t f;
    int64_t now = tb_now_ms();
    for (;;) {
        while (!c->closed) {
            /* the frames kept after a gap first, once it is filled */
            if (tb_link_next(c, &f, now) != 1) {
                if (tb_fdec_next(c->dec, &f) != 1)
                    break;
                int r = tb_link_rx(c, &f, now);
                if (r == 2)
                    continue;   /* kept by the link */
                if (r == 0) {
                    tb_frame_release(&f);
                    continue;
                }
            }
            if (!own_piece(c, &f))
                break;
            if (f.hdr.flags & (TB_FRAME_F_FRAG | TB_FRAME_F_ABORT) || c->cut_on) {
                /* a piece passed on as it came (node_cut.c), or an abort */
                int r = tb_cut_frame(n, c, &f);
                if (r < 0)
                    violation(c);
                if (r)
                    continue;
            }
            if ((f.hdr.flags & TB_FRAME_F_FRAG) || c->frag_len) {
                int r = tb_conn_reassemble(c, &f);
                if (r < 0)
                    violation(c);
                if (r != 1)
                    continue;   /* a piece taken, or the link closed */
            }
            if (f.hdr.type == TB_FRAME_DATA && f.hdr.len == 0 && c->index >= 0) {
                /* A child's wave with no packet (node_wave.c, tb_wave_empty_up). */
                tb_stream_up(n, (size_t)c->index, f.hdr.stream, NULL, 0, f.hdr.key, 0);
            } else if (f.hdr.type == TB_FRAME_DATA || f.hdr.type == TB_FRAME_CONTROL) {
                tbon_error_t err;
                tb_ranks_t cv;
                tb_ranks_init(&cv);
                tbon_packet_t *p = NULL;
                uint64_t done = 0;
                if (tb_cover_take(n, c, &f, &cv) == 0 && tb_exact_take_mark(c, &f, &done) == 0) {
                    /* a large payload becomes the packet's own (no copy) */
                    p = f.hdr.len >= TB_DECODE_IN_PLACE && !f.borrowed
                            ? tb_packet_decode_take(&f.payload, f.hdr.len, f.hdr.tag,
                                                    f.hdr.stream, f.hdr.source, &err)
                            : tb_packet_decode(f.payload, f.hdr.len, f.hdr.tag, f.hdr.stream,
                                               f.hdr.source, &err);
                    if (!p)
                        snprintf(c->why, sizeof c->why, "bad packet: %s", err.msg);
                }
                if (!p) {
                    tb_ranks_free(&cv);
                    c->closed = 1;
                    violation(c);
                } else if (f.hdr.type == TB_FRAME_DATA) {
                    tb_cover_received(n, c, p, &cv);
                    if (done)
                        tb_exact_done(n, f.hdr.stream, done, 0);
                    if (c->index < 0)
                        tb_stream_down(n, f.hdr.stream, p, f.hdr.key);
                    else
                        tb_stream_up(n, (size_t)c->index, f.hdr.stream, p,
                                     (f.hdr.flags & TB_FRAME_F_MORE) != 0, f.hdr.key,
                                     (f.hdr.flags & TB_FRAME_F_LATE) != 0);
                    p = NULL;
                } else {
                    tb_node_on_ctl(n, c->index < 0 ? -1 : c->index, f.hdr.tag, p);
                }
                tbon_packet_unref(p);
            } else if (f.hdr.type != TB_FRAME_TOPOLOGY && f.hdr.type != TB_FRAME_HEARTBEAT) {
                snprintf(c->why, sizeof c->why, "unexpected %s frame",
                         tb_frame_type_name(f.hdr.type));
                c->closed = 1;
                violation(c);
            }
            tb_frame_release(&f);
        }
        if (c->closed || tb_fdec_error_kind(c->dec) == TB_FDEC_OK)
            break;
        TB_DEBUG("link", "rank %u: %s; asking for a resend after %u", c->rank,
                 tb_fdec_error(c->dec), c->rx);
        if (tb_fdec_resume(c->dec) != 0)
            break;
        tb_link_bad_frame(c, now);
    }
    if (!c->closed && tb_fdec_error_kind(c->dec) != TB_FDEC_OK) {
        snprintf(c->why, sizeof c->why, "bad frame: %s", tb_fdec_error(c->dec));
        c->closed = 1;
        violation(c);
    }
}

/* The frames of c read already, then all the socket still holds, until
 * its end (or a frame that breaks the protocol). */
static void take_the_rest(tb_node_t *n, tb_conn_t *c)
{
    on_frames(n, c);
    /* A read that found the end has left nothing behind it: one recv less
     * per broken link (every orphan's, every adopter's lost child). */
    while (!c->closed && !c->at_eof && tb_conn_read(c, READ_BUDGET) > 0)
        on_frames(n, c);
}

/* c closed. If by its peer's end (an EOF, a reset, a write that failed),
 * what the peer wrote before it went may still be in the socket, and is
 * taken first: a back-end's last answers before it died, say, when a write
 * of ours found the reset before a read took them. Then the link broke. */
static void link_broke(tb_node_t *n, tb_conn_t *c)
{
    n->churn++;
    if (c->peer_gone && !c->down && c->fd >= 0) {
        char why[sizeof c->why];
        memcpy(why, c->why, sizeof why);
        c->peer_gone = 0;
        c->closed = 0;
        take_the_rest(n, c);
        if (c->peer_gone || !c->closed)
            memcpy(c->why, why, sizeof why);    /* not a frame's fault */
        c->closed = 1;
    }
    tb_node_link_broke(n, c);
}

/* The parent's event connection ended (the EDS posts it only when the
 * parent died before the tree was up here, or said it leaves). What the
 * parent sent before it ended may still be unread in its data connection,
 * the port table among it: without that an orphan cannot be adopted, and
 * in a tree just up it is often still in the socket. So that is read
 * first, then the parent is lost (both its connections ended: no relink). */
static void parent_events_ended(tb_node_t *n)
{
    tb_conn_t *pc = n->parent;
    if (!pc->closed && !pc->down)
        take_the_rest(n, pc);
    if (n->parent == pc)
        tb_node_parent_lost(n, "the event connection to the parent ended");
}

/* TB_CMD_FENCE: the EDS found child rank silent past its heartbeat. */
static void on_fence(tb_node_t *n, tb_cmd_t *c)
{
    int i = tb_node_child_index(n, c->u.fence.rank);
    if (i >= 0 && n->child[i].conn) {
        char why[96];
        snprintf(why, sizeof why, "no heartbeat for %d ms: fenced", c->u.fence.silent_ms);
        tb_node_close_child(n, (size_t)i, why);
        /* Fenced, it is stale: still ours to kill at the end if it is
         * still there (stopped for good, say). */
        n->child[i].released = 0;
    }
}

/* TB_CMD_SEND: the application's packet, down (FE) or up (back-end). */
static void on_send(tb_node_t *n, tb_cmd_t *c)
{
    if (n->role == TB_ROLE_FE)
        tb_stream_down(n, c->u.send.stream, c->u.send.pkt, 0);
    else {
        tb_stream_keep(n, c->u.send.stream, c->u.send.pkt);
        tb_node_to_parent(n, c->u.send.stream, c->u.send.pkt, 0, c->u.send.key);
    }
    c->u.send.pkt = NULL;
}

/* TB_CMD_FILTER: the FE's application loaded a plug-in filter. */
static void on_filter(tb_node_t *n, tb_cmd_t *c)
{
    tbon_error_t err;
    tb_ctl_filter_t f = { c->u.filter.id, c->u.filter.path, c->u.filter.func };
    if (tb_filter_reg_load(n->filters, f.path, f.func, f.id, &err) < 0) {
        TB_ERROR("filter", "%s", err.msg);
    } else {
        tb_node_filter_loaded(n);
        tb_node_session_changed(n);
    }
    /* to every child: back-ends load plug-ins too (their state for an
     * adoption, docs/filter-guide.md) */
    for (size_t i = 0; i < n->nchild; i++)
        if (n->child[i].conn)
            tb_node_send_ctl(n, n->child[i].conn, TB_CTL_FILTER, tb_ctl_filter_encode(&f));
}

/* TB_CMD_FILTER_FAULT: a child's report of its hung filter, from its
 * event connection: handled at the FE, passed up elsewhere. */
static void on_filter_fault(tb_node_t *n, tb_cmd_t *c)
{
    tb_ctl_msg_t m;
    tbon_error_t err;
    if (tb_ctl_decode(TB_CTL_FILTER_FAULT, c->u.fault.pkt, &m, &err) != 0) {
        TB_WARN("filter", "a child's word on its hung filter: %s", err.msg);
    } else {
        if (n->role == TB_ROLE_FE)
            tb_stream_on_filter_fault(n, &m.u.filter_fault);
        else if (n->parent)
            tb_node_send_ctl(n, n->parent, TB_CTL_FILTER_FAULT,
                             tbon_packet_ref(c->u.fault.pkt));
        tb_ctl_free(TB_CTL_FILTER_FAULT, &m.u.filter_fault);
    }
    /* the child may end now: its report is ahead of its end here */
    tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_FAULT_TAKEN, .u.rank = c->u.fault.from });
}

TB_HOT static void on_cmd(tb_node_t *n, tb_cmd_t *c)
{
    if (c->bytes)
        atomic_fetch_sub(&n->pending, c->bytes);
    switch (c->op) {
    case TB_CMD_CONN:
        tb_node_on_conn(n, c);
        break;
    case TB_CMD_PEER_LOST:
        if (n->parent && c->u.peer_lost.rank == n->parent->rank)
            parent_events_ended(n);
        else
            tb_node_child_dead(n, c->u.peer_lost.rank, "its event connection ended");
        break;
    case TB_CMD_RELINK:
        tb_node_on_relink(n, c);
        break;
    case TB_CMD_FENCE:
        on_fence(n, c);
        break;
    case TB_CMD_ADOPTED:
        /* The lost parent's data connection may not have ended here yet. */
        if (n->parent && n->parent->rank == c->u.adopted.lost)
            tb_node_parent_lost(n, "the event connection to the parent ended");
        tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_CMD, .u.cmd = c }); /* still an orphan? */
        break;
    /* the commands fault tolerance owns (ft/ops.c takes them apart) */
    case TB_CMD_ADOPT_CONN:
    case TB_CMD_ADOPT_FAILED:
    case TB_CMD_CHECK:
    case TB_CMD_ATTR:
    case TB_CMD_JOIN_CONN:
    case TB_CMD_SUSPECT:
        tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_CMD, .u.cmd = c });
        break;
    case TB_CMD_CHILD_EXIT:
        tb_node_child_exited(n, c->u.child_exit.rank, c->u.child_exit.status);
        tb_node_child_dead(n, c->u.child_exit.rank, "its process exited");
        break;
    case TB_CMD_SEND:
        on_send(n, c);
        break;
    case TB_CMD_STREAM:
        tb_stream_create(n, c->u.stream.id, c->u.stream.up, c->u.stream.sync,
                         c->u.stream.timeout_ms, c->u.stream.down, c->u.stream.members,
                         c->u.stream.nmembers);
        break;
    case TB_CMD_PARAMS:
        tb_stream_set_params(n, c->u.params.stream, c->u.params.which, c->u.params.pkt);
        c->u.params.pkt = NULL;
        break;
    case TB_CMD_FILTER:
        on_filter(n, c);
        break;
    case TB_CMD_FILTER_FAULT:
        on_filter_fault(n, c);
        break;
    case TB_CMD_STREAM_END:
        tb_stream_end(n, c->u.stream_end.id);
        break;
    case TB_CMD_RESUME:
        tb_dlog_resume(n);  /* messages kept back; for streams the back-pressure
                               check after the dispatch does the work */
        break;
    case TB_CMD_SHUTDOWN:
        tb_node_begin_shutdown(n);
        break;
    case TB_CMD_DETACH:
        tb_node_detach(n, c->u.detach.file, c->u.detach.hold_ms, c->u.detach.reply);
        c->u.detach.reply = NULL;
        break;
    case TB_CMD_LEAVE:
        tb_node_leave(n);
        break;
    case TB_CMD_DIRECT:
        tb_dlog_send(n, c);
        break;
    case TB_CMD_PERF:
        tb_perf_start(n, c->u.perf.id, c->u.perf.wait_ms);
        break;
    case TB_CMD_PING:
        tb_direct_ping(n, TB_DIRECT_HERE, &(tb_ctl_ping_t){ .origin = n->rank,
                                                           .target = c->u.ping.target,
                                                           .id = c->u.ping.id });
        break;
    }
    tb_cmd_free(c);
}

/* The loop's mailbox: the commands posted since the last turn, in order. */
TB_HOT static void on_mail(void *arg, tb_mail_t *list)
{
    tb_node_t *n = arg;
    while (list) {
        tb_cmd_t *c = (tb_cmd_t *)list;
        list = list->next;
        on_cmd(n, c);
    }
}

static void free_cmds(tb_mail_t *list)
{
    while (list) {
        tb_cmd_t *c = (tb_cmd_t *)list;
        list = list->next;
        tb_cmd_free(c);
    }
}

/* Back-pressure (docs/protocol.md 7.4): stop reading children
 * while the way up is full, stop reading the parent while a way down is. */
static void pressure(tb_node_t *n)
{
    size_t up = n->parent ? tb_conn_unwritten(n->parent) : 0;
    int app_full = n->cbs.app_full ? n->cbs.app_full(n->cbs.arg) : 0;
    if (!n->up_paused && (up > TB_HWM || app_full))
        n->up_paused = 1;
    else if (n->up_paused && up < TB_LWM && !app_full)
        n->up_paused = 0;
    size_t down = 0;
    for (size_t i = 0; i < n->nchild; i++) {
        tb_child_t *ch = &n->child[i];
        if (!ch->conn)
            continue;
        if (tb_conn_unwritten(ch->conn) > down)
            down = tb_conn_unwritten(ch->conn);
        size_t qb = tb_stream_child_bytes(n, i);
        if (!ch->blocked && qb > TB_HWM)
            ch->blocked = 1;
        else if (ch->blocked && qb < TB_LWM)
            ch->blocked = 0;
        /* A child whose packet goes up piece by piece (node_cut.c) is read
         * on while the parent link is full: what fills it may be frames
         * held behind that packet, which only its last piece lets go (it
         * adds one packet at most, which the commnode keeps anyway). And a
         * child whose event connection ended is read to its end whatever
         * the pressure: its process is gone, its end is only seen after the
         * bytes it left in the socket (its kernel sends the FIN after what
         * we have not taken yet), and no more than those can come. */
        int want = ((!n->up_paused || ch->conn->cut_on) && !ch->blocked) || ch->ev_lost;
        if (want != ch->conn->reading) {
            ch->conn->reading = want;
            tb_node_watch(n, ch->conn, (want ? EPOLLIN : 0) |
                          (tb_conn_wants_write(ch->conn) ? EPOLLOUT : 0));
        }
    }
    /* A back-end whose application does not take what arrives stops
     * reading too (its EDS would otherwise read everything into memory). */
    int be_full = n->role == TB_ROLE_BE && app_full;
    if (!n->down_paused && (down > TB_HWM || be_full))
        n->down_paused = 1;
    else if (n->down_paused && down < TB_LWM && !be_full)
        n->down_paused = 0;
    if (n->parent && n->parent->reading == n->down_paused) {
        n->parent->reading = !n->down_paused;
        tb_node_watch(n, n->parent, (n->parent->reading ? EPOLLIN : 0) |
                      (tb_conn_wants_write(n->parent) ? EPOLLOUT : 0));
    }
}

static void flush_conn(tb_node_t *n, tb_conn_t *c)
{
    if (c->closed)
        return;
    int rc = tb_conn_flush(c);
    if (rc >= 0)
        tb_node_watch(n, c, (c->reading ? EPOLLIN : 0) | (rc == 0 ? EPOLLOUT : 0));
}

/* After a dispatch: write what was queued, retire closed connections,
 * publish the backlog for blocked senders. */
TB_HOT static void after_dispatch(tb_node_t *n)
{
    size_t queued = 0;
    unsigned churn = n->churn;
    n->ft->flush(n);
    tb_node_links(n);
    if (n->parent) {
        if (!n->hold_up) {
            if (n->held) {
                n->held = 0;
                /* not left due: a kicker would wake for it (kick.c) */
                tb_timer_cancel(n->loop, &n->hold_timer);
            }
            if (n->parent->dirty)
                flush_conn(n, n->parent);
        }
        if (n->parent->closed)
            link_broke(n, n->parent);
        if (n->parent)
            queued += tb_conn_unwritten(n->parent);
    }
    for (size_t i = 0; i < n->nchild; i++) {
        tb_conn_t *c = n->child[i].conn;
        if (!c)
            continue;
        if (c->dirty)
            flush_conn(n, c);
        if (c->closed)
            link_broke(n, c);
        if (n->child[i].conn)
            queued += tb_conn_unwritten(c);
    }
    tb_stream_settle_due(n);
    pressure(n);
    /* Work this pass left for the next: a parent's queue held back, the
     * messages of a link lost after the pass wrote the others'. */
    n->flushed = !n->hold_up && n->churn == churn;
    atomic_store(&n->queued, queued);
    if (atomic_load(&n->waiters) > 0) {
        pthread_mutex_lock(&n->qmu);
        pthread_cond_broadcast(&n->bcond);
        pthread_mutex_unlock(&n->qmu);
    }
    if (tb_node_life(n) == TB_LIFE_SHUTTING_DOWN) {
        /* A child whose link is down (waiting for its relink) cannot take
         * the SHUTDOWN now: it does not hold the end up (tb_node_destroy
         * waits for it with the rest, then kills it). Nor is the reactor
         * woken for its event connection's end meanwhile:
         * tb_eds_post_child_end. */
        int open = 0;
        for (size_t i = 0; i < n->nchild; i++)
            open += n->child[i].conn != NULL && !n->child[i].conn->down;
        if (!open)
            tb_node_enter(n, TB_LIFE_STOPPED);
    }
}

/* A connection's events. A connection closed earlier in this batch is out
 * of the loop but may still be named by it (it is freed after the batch,
 * tb_node_bury): only live ones are looked at. */
TB_HOT static void on_conn_io(tb_io_t *io, uint32_t events)
{
    tb_node_t *n = io->arg;
    tb_conn_t *c = (tb_conn_t *)((char *)io - offsetof(tb_conn_t, io));
    if (c->index >= 0 ? (size_t)c->index >= n->nchild || n->child[c->index].conn != c
                      : n->parent != c)
        return;
    if (events & EPOLLOUT)
        flush_conn(n, c);
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) &&
        (c->reading || (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)))) {
        tb_conn_read(c, READ_BUDGET);
        on_frames(n, c);
    }
    if (c->closed)
        link_broke(n, c);
}

/* ---- timers (each on the loop's heap) ---- */

static void on_start_timer(tb_timer_t *t, int64_t now)
{
    (void)now;
    tb_node_t *n = t->arg;
    if (tb_node_life(n) == TB_LIFE_STARTING && !n->failed)
        tb_node_startup_timer(n);
}

static void on_shutdown_timer(tb_timer_t *t, int64_t now)
{
    (void)now;
    tb_node_t *n = t->arg;
    if (tb_node_ending(n) && !tb_node_stopped(n)) {
        TB_WARN("shutdown", "children did not leave in time; going on");
        tb_node_enter(n, TB_LIFE_STOPPED);
    }
}

static void on_late_timer(tb_timer_t *t, int64_t now)
{
    (void)now;
    tb_node_t *n = t->arg;
    n->late_due = 0;
    tb_node_bury_list(&n->dead_late);
}

TB_HOT static void on_link_timer(tb_timer_t *t, int64_t now)
{
    (void)now;      /* wakes the loop: after_dispatch runs tb_node_links */
    tb_node_t *n = t->arg;
    n->links_whole = 1;
}

static void on_ft_timer(tb_timer_t *t, int64_t now)
{
    (void)t;
    (void)now;      /* only wakes the loop: the turn runs ft's timers */
}

/* One turn of the loop: the timers due, writes, then wait (at most
 * timeout_ms, -1 = until a timer) and dispatch what came. The writes
 * before the wait are those of the timers; if none fired and ft's did
 * nothing, the last dispatch's flush left nothing to write (n->flushed):
 * a back-end's wave was three passes of after_dispatch, now two. */
TB_HOT static void turn(tb_node_t *n, int timeout_ms)
{
    int acted = tb_loop_fire(n->loop) > 0;
    if (tb_node_stopped(n))
        return;
    acted |= n->ft->timers(n, tb_now_ms());
    if (acted || !n->flushed) {
        after_dispatch(n);
        if (tb_node_stopped(n))
            return;
    }
    int64_t next = INT64_MAX;
    n->ft->next(n, &next);
    if (next == INT64_MAX)
        tb_timer_cancel(n->loop, &n->ft_timer);
    else
        tb_timer_at(n->loop, &n->ft_timer, next);
    if (tb_loop_wait(n->loop, timeout_ms) < 0) {
        TB_ERROR("reactor", "epoll_wait: %s", strerror(errno));
        tb_node_enter(n, TB_LIFE_STOPPED);
        return;
    }
    after_dispatch(n);
    tb_node_bury(n);
}

/* After the last turn: tell everyone waiting that the node is done. */
static void finish(tb_node_t *n)
{
    if (!tb_node_enter(n, TB_LIFE_FINISHED))
        return;
    after_dispatch(n);
    /* Nobody is adopted or watched from now on (the children that are left
     * are reaped by tb_node_destroy): the EDS thread winds down while the
     * node is torn down. */
    tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_FINISHED });
    atomic_store(&n->closed, 1);
    pthread_mutex_lock(&n->qmu);
    pthread_cond_broadcast(&n->bcond);
    pthread_mutex_unlock(&n->qmu);
    if (n->cbs.status && n->role != TB_ROLE_FE)
        n->cbs.status(n->cbs.arg, TB_NODE_CLOSED, 0, "left the session");
}

TB_HOT int tb_node_run(tb_node_t *n)
{
    while (!tb_node_stopped(n))
        turn(n, -1);
    finish(n);
    return 0;
}

TB_HOT int tb_node_step(tb_node_t *n, int timeout_ms)
{
    if (!tb_node_stopped(n))
        turn(n, timeout_ms);
    if (tb_node_stopped(n))
        finish(n);
    return tb_node_stopped(n);
}

TB_HOT void tb_node_exec(tb_node_t *n, tb_cmd_t *cmd)
{
    if (tb_node_stopped(n)) {
        if (cmd->bytes)
            atomic_fetch_sub(&n->pending, cmd->bytes);
        tb_cmd_free(cmd);
        return;
    }
    on_cmd(n, cmd);
    after_dispatch(n);
    if (tb_node_stopped(n))
        finish(n);
}

int tb_node_exec_held(tb_node_t *n, tb_cmd_t *cmd)
{
    if (tb_node_stopped(n) || !n->parent || n->held + 1 >= TB_NODE_HOLD_CMDS) {
        tb_node_exec(n, cmd);
        return 0;
    }
    n->hold_up = 1;
    on_cmd(n, cmd);
    after_dispatch(n);
    n->hold_up = 0;
    if (tb_node_stopped(n)) {
        finish(n);
        return 0;
    }
    if (!n->parent || !n->parent->dirty)
        return 0;
    if (n->held++ == 0 && !tb_timer_armed(&n->hold_timer))
        tb_timer_at(n->loop, &n->hold_timer, tb_now_ms() + TB_NODE_HOLD_MS);
    return 1;
}

void tb_node_flush(tb_node_t *n)
{
    if (tb_node_stopped(n))
        return;
    after_dispatch(n);
    if (tb_node_stopped(n))
        finish(n);
}

void tb_node_kick(tb_node_t *n)
{
    if (n->cbs.kick)
        n->cbs.kick(n->cbs.arg);
}

void tb_node_arm(tb_node_t *n, int on)
{
    if (n->cbs.arm && !tb_node_stopped(n))
        n->cbs.arm(n->cbs.arg, on);
}

int tb_node_loop_fd(const tb_node_t *n)
{
    return tb_loop_fd(n->loop);
}

int64_t tb_node_next_due(const tb_node_t *n)
{
    return tb_loop_due(n->loop);
}

int tb_node_side_watch(tb_node_t *n, tb_io_t *io, uint32_t events)
{
    return n->ft->side_watch(n, io, events);
}

void tb_node_side_forget(tb_node_t *n, tb_io_t *io)
{
    n->ft->side_forget(n, io);
}

int tb_node_input_left(const tb_node_t *n)
{
    const tb_conn_t *c = n->parent;
    if (c && !c->closed && c->fd >= 0 && c->reading && c->more)
        return 1;
    for (size_t i = 0; i < n->nchild; i++) {
        c = n->child[i].conn;
        if (c && !c->closed && c->fd >= 0 && c->reading && c->more)
            return 1;
    }
    return 0;
}

int tb_node_has_posted(tb_node_t *n)
{
    return tb_loop_has_mail(n->loop);
}

size_t tb_node_backlog(const tb_node_t *n)
{
    return atomic_load(&n->pending) + atomic_load(&n->queued);
}

int tb_node_link_child(tb_node_t *n, tbon_rank_t rank, int fd)
{
    tb_cmd_t *c = tb_cmd_conn(fd, rank);    /* closes fd if it fails */
    if (!c)
        return TBON_ENOMEM;
    tb_node_post(n, c);
    return 0;
}

int tb_node_watch_parent(tb_node_t *n, int fd)
{
    return tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_PARENT_EVENTS, .u.fd = fd });
}

void tb_node_parent_gone(tb_node_t *n, tbon_rank_t rank)
{
    /* From the EDS thread, for a node nobody may be driving (a back-end whose
     * application is busy): its application hears of it now. */
    if (n->role == TB_ROLE_BE && rank == n->parent_rank && n->cbs.status)
        n->cbs.status(n->cbs.arg, TB_NODE_CLOSED, TBON_ECLOSED, "the parent is gone");
}

TB_HOT static void *node_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "tbon-node");
    tb_node_run(arg);
    return NULL;
}

uint16_t tb_node_port(const tb_node_t *n)
{
    return n->port;
}

int tb_node_start(tb_node_t *n)
{
    if (pthread_create(&n->thread, NULL, node_thread, n))
        return TBON_ENOMEM;
    n->threaded = 1;
    return 0;
}

/* The default limit of a plug-in filter call (ms): conf's
 * TBON_FILTER_LIMIT_MS, else 5000. */
static int filter_limit_default(const tb_config_t *conf)
{
    const char *fl = conf->filter_limit_ms;
    char *fend = NULL;
    long flv = fl && *fl ? strtol(fl, &fend, 10) : -1;
    if (fl && *fl && (*fend || flv < 0 || flv > INT32_MAX)) {
        TB_WARN("filter", "TBON_FILTER_LIMIT_MS=%s is not a number of ms: 5000 it is", fl);
        flv = -1;
    }
    return flv >= 0 ? (int)flv : 5000;
}

/* The node's locks, filters, children slots, loop and timers (n->topo and
 * n->rank set). 0, or TBON_ENOMEM (what could not be made is NULL). */
static int node_parts(tb_node_t *n)
{
    pthread_mutex_init(&n->qmu, NULL);
    pthread_mutex_init(&n->fw.mu, NULL);
    n->fw_default = filter_limit_default(n->cfg.conf);
    pthread_cond_init(&n->bcond, NULL);
    n->filters = tb_filter_reg_new();
    size_t nc;
    const tbon_rank_t *kids = tb_topology_children(n->topo, n->rank, &nc);
    if (n->cfg.reattach)
        nc = 0;         /* the old FE's children come as adopted ones */
    n->child = calloc(nc ? nc : 1, sizeof *n->child);
    n->loop = tb_loop_new(on_mail, n);
    n->start_timer = (tb_timer_t){ .fn = on_start_timer, .arg = n };
    n->shutdown_timer = (tb_timer_t){ .fn = on_shutdown_timer, .arg = n };
    n->conn_io = on_conn_io;
    n->lost = tb_node_peer_lost;
    n->start_lost = tb_node_child_lost_at_start;
    n->late_timer = (tb_timer_t){ .fn = on_late_timer, .arg = n };
    n->ft_timer = (tb_timer_t){ .fn = on_ft_timer, .arg = n };
    n->link_timer = (tb_timer_t){ .fn = on_link_timer, .arg = n };
    n->ack_timer = (tb_timer_t){ .fn = on_link_timer, .arg = n, .lazy = 1 };
    n->hold_timer = (tb_timer_t){ .fn = on_link_timer, .arg = n };
    tb_node_links_init(n);
    if (!n->filters || !n->child || !n->loop)
        return TBON_ENOMEM;
    if (n->cfg.share_io) {
        int rc = tb_loop_share(n->loop, n->cfg.share_fd, n->cfg.share_io);
        if (rc)
            return rc;
    }
    n->nchild = n->nsorted = nc;
    n->capchild = nc ? nc : 1;
    for (size_t i = 0; i < nc; i++) {
        n->child[i].rank = kids[i];
        n->child[i].is_be = tb_topology_role(n->topo, kids[i]) == TB_ROLE_BE;
    }
    return 0;
}

/* The start-up begins (fault tolerance started): our port to the parent,
 * the start deadline, the children launched, the attach file. 0, or an
 * error (err) that ends the node: the FE's own launch failing (below the
 * FE a launch failure goes up by name instead). */
static int node_begin(tb_node_t *n, tbon_error_t *err)
{
    const tb_node_config_t *cfg = &n->cfg;
    n->total = tb_topology_size(n->topo);
    if (n->parent)
        tb_node_send_ctl(n, n->parent, TB_CTL_PORT,
                         tb_ctl_port_encode(&(tb_ctl_port_t){ n->rank, n->port }));
    else
        tb_topology_set_port(n->topo, n->rank, n->port);
    n->start_deadline = tb_now_ms() + (cfg->startup_timeout_ms > 0 ? cfg->startup_timeout_ms : 30000);
    tb_timer_at(n->loop, &n->start_timer, n->start_deadline);
    if (n->role == TB_ROLE_BE)
        tb_node_enter(n, TB_LIFE_RUNNING);   /* a back-end is ready once connected */
    if (!cfg->given_links && !cfg->reattach && tb_node_launch_children(n, err)) {
        if (!n->parent)
            return err && err->code ? err->code : TBON_ELAUNCH;
        /* Below the FE, a failure travels up to it by name; the children
         * already started are reaped when the FE ends the session. */
        tb_node_fail(n, err ? err->code : TBON_ELAUNCH, "%s", err ? err->msg : "launch failed");
    }
    if (n->role == TB_ROLE_FE && !cfg->reattach)
        tb_node_write_attach(n);
    if (cfg->joined)
        tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_JOINED }); /* the parent sends a view */
    return 0;
}

tb_node_t *tb_node_new(const tb_node_config_t *cfg, const tb_node_cbs_t *cbs, tbon_error_t *err)
{
    if (!cfg->ft || !cfg->conf) {
        tb_error_set(err, TBON_EINVAL, "a node needs its fault-tolerance layer (cfg.ft) and "
                     "its configuration (cfg.conf)");
        tb_topology_destroy(cfg->topo);
        return NULL;
    }
    tb_node_t *n = calloc(1, sizeof *n);
    if (!n) {
        tb_error_set(err, TBON_ENOMEM, "out of memory");
        tb_topology_destroy(cfg->topo);
        return NULL;
    }
    n->cfg = *cfg;
    if (cbs)
        n->cbs = *cbs;
    n->topo = cfg->topo;
    n->rank = cfg->rank;
    n->role = cfg->role;
    n->ft = cfg->ft;
    n->drop_every = -1;     /* TBON_TEST_DROP_DIRECT: read at the first message */
    n->born_ms = tb_now_ms();
    if (n->role == TB_ROLE_FE && !(n->fe = calloc(1, sizeof *n->fe))) {
        free(n);
        tb_topology_destroy(cfg->topo);
        tb_error_set(err, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    n->depth = tb_topology_depth(n->topo, n->rank);
    n->parent_rank = tb_topology_parent(n->topo, n->rank);
    n->lfd = -1;
    if (cfg->listening) {
        /* A commnode that joined the running tree: the FE has told every
         * node where it listens already (the socket is ours from here). */
        n->lfd = cfg->listen_fd;
        n->port = cfg->port;
    }
    if (node_parts(n) != 0) {
        tb_error_set(err, TBON_ENOMEM, "cannot set up the reactor: %s", strerror(errno));
        goto error;
    }
    if (cfg->parent_fd >= 0) {
        n->parent = tb_node_conn_new(n, cfg->parent_fd, tb_topology_parent(n->topo, n->rank),
                                     -1);
        if (!n->parent) {
            tb_error_set(err, TBON_ENOMEM, "out of memory");
            goto error;
        }
        tb_node_watch(n, n->parent, EPOLLIN);
    }
    if (cfg->given_links) {
        /* node.h, "Given links": the caller makes the links and plays the
         * EDS's part; no port, no notices, no EDS thread. */
        if (cfg->parent_event_fd >= 0)
            close(cfg->parent_event_fd);
    } else if ((n->nchild > 0 || cfg->reattach) && !cfg->listening) {
        n->lfd = tb_sock_listen(&n->port, err);
        if (n->lfd < 0)
            goto error;
    }
    /* Fault tolerance's state and first view; with an EDS, the FE's notice
     * socket and the EDS thread, which takes n->lfd (set to -1). */
    if (n->ft->start(n, err))
        goto error;
    if (node_begin(n, err) != 0)
        goto error;
    tb_node_check_ready(n);
    return n;
error:
    tb_node_destroy(n);
    return NULL;
}

void tb_node_destroy(tb_node_t *n)
{
    if (!n)
        return;
    if (n->threaded)
        pthread_join(n->thread, NULL);
    else if (tb_node_life(n) != TB_LIFE_FINISHED && n->role == TB_ROLE_BE) {
        /* A back-end driven by its application leaves here. */
        tb_node_leave(n);
        finish(n);
    }
    tb_node_links_free(n);
    if (n->parent)
        tb_conn_destroy(n->parent);
    n->parent = NULL;
    tb_node_bury(n);
    tb_node_bury_list(&n->dead_late);
    for (size_t i = 0; i < n->nchild; i++) {
        tb_conn_destroy(n->child[i].conn);
        n->child[i].conn = NULL;
    }
    n->ft->stop(n);
    tb_node_reap_all(n);
    /* the children are gone: so are the masters' sessions (detached: they
     * live on, and the masters with them) */
    if (!n->detached)
        tb_sshmux_destroy(n->sshmux, tb_now_ms() + 2000);
    tb_relay_destroy(n->relay);
    tb_stream_free_all(n);
    tb_perf_free(n);
    tb_dlog_free(n);
    tb_cover_free(n);
    n->ft->free(n);
    if (n->fecall_left)
        tb_filter_reg_abandon(n->filters);  /* a call left behind may still run */
    else
        tb_filter_reg_destroy(n->filters);
    if (n->fe) {
        if (n->fe->attach_path && unlink(n->fe->attach_path) != 0 && errno != ENOENT)
            TB_WARN("attach", "cannot remove the attach file %s: %s", n->fe->attach_path,
                    strerror(errno));
        /* The session's end (not a detach): its file names nothing now. */
        if (n->session_written && !n->detached && n->cfg.session_file)
            unlink(n->cfg.session_file);
        free(n->fe->attach_path);
        free(n->fe->slurm_pid);
        free(n->fe);
    }
    tb_topology_destroy(n->topo);
    free(n->topo_frame);
    if (n->lfd >= 0)
        close(n->lfd);
    if (n->loop) {
        free_cmds(tb_loop_take(n->loop));
        tb_loop_destroy(n->loop);
    }
    pthread_mutex_destroy(&n->qmu);
    pthread_mutex_destroy(&n->fw.mu);
    tb_fecall_free(n);
    pthread_cond_destroy(&n->bcond);
    free(n->child);
    free(n);
}
