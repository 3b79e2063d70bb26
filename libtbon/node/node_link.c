/* node_link.c - the node's links to its parent and children: sending up and
 * down, watching connections, adding and losing children, losing the parent,
 * and the start of an orderly end. */
#include "node/node_int.h"

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
#include "net/sock.h"

/* ---- sending ---- */

void tb_node_send_ctl(tb_node_t *n, tb_conn_t *c, int op, tbon_packet_t *p)
{
    if (c && p && !c->closed)
        tb_conn_send_packet(c, TB_FRAME_CONTROL, 0, op, n->rank, p);
    tbon_packet_unref(p);
}

void tb_node_to_parent(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more, uint64_t key)
{
    if (!p)
        return;
    tbon_rank_t src = tbon_packet_source(p);
    if (src == TBON_RANK_NONE)
        src = n->rank;
    if (n->role == TB_ROLE_FE) {
        /* The FE's upstream output is the application's input. */
        if (tbon_packet_source(p) == TBON_RANK_NONE || tbon_packet_stream(p) != stream) {
            size_t len;
            const uint8_t *pl = tb_packet_payload(p, &len);
            tbon_packet_t *q = tb_packet_decode(pl, len, tbon_packet_tag(p), stream, src, NULL);
            tbon_packet_unref(p);
            p = q;
        }
        if (p && n->cbs.deliver)
            n->cbs.deliver(n->cbs.arg, stream, p, 0);
        else
            tbon_packet_unref(p);
        return;
    }
    if (!more)
        tb_stream_sent(n, stream, key);
    if (n->parent && !n->parent->closed) {
        tb_conn_send_packet_key(n->parent, TB_FRAME_DATA, more ? TB_FRAME_F_MORE : 0, stream,
                                tbon_packet_tag(p), src, key, p);
    } else if (tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_ORPHAN_UP,
                                              .u.up = { stream, p, more, key } })) {
        return;     /* an orphan's: it goes to the adopter */
    }
    tbon_packet_unref(p);
}

void tb_node_to_child(tb_node_t *n, size_t i, uint32_t stream, tbon_packet_t *p, uint64_t q)
{
    tb_conn_t *c = n->child[i].conn;
    if (!c || c->closed)
        return;
    tbon_rank_t src = tbon_packet_source(p);
    tb_conn_send_packet_key(c, TB_FRAME_DATA, 0, stream, tbon_packet_tag(p),
                            src == TBON_RANK_NONE ? n->rank : src, q, p);
}

void tb_node_fail(tb_node_t *n, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n->failed)
        return;
    n->failed = 1;
    TB_ERROR("startup", "%s", msg);
    if (n->role == TB_ROLE_FE) {
        if (n->cbs.status)
            n->cbs.status(n->cbs.arg, TB_NODE_FAILED, code, msg);
    } else {
        tb_node_send_ctl(n, n->parent, TB_CTL_FAIL,
                         tb_ctl_fail_encode(&(tb_ctl_fail_t){ code, msg }));
    }
}

/* ---- connections ---- */

void tb_node_watch(tb_node_t *n, tb_conn_t *c, uint32_t events)
{
    if (!c->io.fn)
        tb_node_io_init(n, c);
    tb_loop_watch(n->loop, &c->io, events);
}

/* Take c out of the loop; it is freed after the current batch of events,
 * which may still name it (STYLE.md: never free a connection inside its own
 * dispatch). */
void tb_node_watch_conn(tb_node_t *n, tb_conn_t *c)
{
    tb_node_watch(n, c, EPOLLIN);
}

int tb_node_add_child(tb_node_t *n, tbon_rank_t rank, int is_be)
{
    if (n->nchild == n->capchild) {
        size_t nc = n->capchild ? 2 * n->capchild : 4;
        tb_child_t *v = realloc(n->child, nc * sizeof *v);
        if (!v)
            return -1;
        n->child = v;
        n->capchild = nc;
    }
    memset(&n->child[n->nchild], 0, sizeof *n->child);
    n->child[n->nchild].rank = rank;
    n->child[n->nchild].is_be = is_be;
    n->child[n->nchild].state = CH_CONNECTED;
    n->nchild++;
    if (tb_stream_add_child(n)) {
        n->nchild--;
        return -1;
    }
    return (int)n->nchild - 1;
}

void tb_node_emit(tb_node_t *n, tbon_event_type_t type, tbon_rank_t r, tbon_rank_t p,
                  uint32_t inc, uint64_t version)
{
    if (n->role != TB_ROLE_FE || !n->cbs.event)
        return;
    tbon_event_t ev = { .type = type, .rank = r, .parent = p, .incarnation = inc,
                        .view_version = version };
    n->cbs.event(n->cbs.arg, &ev);
}

void tb_node_fault_end(tb_node_t *n, tbon_rank_t r)
{
    char msg[300];
    snprintf(msg, sizeof msg, "rank %u on host %s failed and fault tolerance is off: the "
             "session ends", r, tb_topology_host(n->topo, r));
    TB_ERROR("ft", "%s", msg);
    if (n->cbs.status)
        n->cbs.status(n->cbs.arg, TB_NODE_CLOSED, TBON_ECLOSED, msg);
    tb_node_begin_shutdown(n);
}

static void retire(tb_node_t *n, tb_conn_t *c)
{
    tb_loop_forget(n->loop, &c->io);
    c->closed = 1;
    c->next_dead = n->dead;
    n->dead = c;
}

void tb_node_bury_list(tb_conn_t **list)
{
    while (*list) {
        tb_conn_t *c = *list;
        *list = c->next_dead;
        tb_conn_destroy(c);
    }
}

void tb_node_bury(tb_node_t *n)
{
    tb_node_bury_list(&n->dead);
}

/* A lost parent's connection is closed a little later: when a parent dies
 * all its children recover at once, on every core, and its close (the
 * socket's teardown, the buffers) is work that can wait for the burst to
 * pass (docs/protocol.md 8.3). */
#define TB_LATE_CLOSE_MS 50

static void retire_late(tb_node_t *n, tb_conn_t *c)
{
    tb_loop_forget(n->loop, &c->io);
    c->closed = 1;
    c->next_dead = n->dead_late;
    n->dead_late = c;
    if (!n->late_due) {
        n->late_due = tb_now_ms() + TB_LATE_CLOSE_MS;
        tb_timer_at(n->loop, &n->late_timer, n->late_due);
    }
}

/* Child i's connection is over: its streams and views stop waiting for it. */
static void detach_child(tb_node_t *n, size_t i)
{
    tb_child_t *ch = &n->child[i];
    retire(n, ch->conn);
    ch->conn = NULL;
    ch->state = CH_GONE;
    ch->suspect = 0;        /* its slot may take a restarted process */
    tb_stream_child_gone(n, i);
    tb_node_ft_child(n, TB_FT_EV_CHILD_GONE, i);
}

void tb_node_close_child(tb_node_t *n, size_t i, const char *why)
{
    tb_child_t *ch = &n->child[i];
    if (!ch->conn)
        return;
    if (!tb_node_ending(n))
        TB_WARN("conn", "lost child rank %u (%s): %s", ch->rank,
                tb_topology_host(n->topo, ch->rank), why);
    detach_child(n, i);
    if (tb_node_life(n) == TB_LIFE_RUNNING && ch->leaving) {
        ch->released = 1;
        tb_node_ft_child(n, TB_FT_EV_CHILD_LEFT, i);
    } else if (tb_node_life(n) == TB_LIFE_RUNNING) {
        /* With fault tolerance it may live on under another parent (after
         * we were fenced, say): it is no longer ours to kill. */
        ch->released = n->ft->ready(n);
        tb_node_ft_child(n, TB_FT_EV_CHILD_LOST, i);
    }
    /* Until the whole tree is up, a child lost is left out of the start-up
     * (node_missing.c), or the tree would wait for it until the timeout. */
    if (tb_node_life(n) == TB_LIFE_STARTING)
        tb_node_child_lost_at_start(n, i, why);
}

void tb_node_drop_child(tb_node_t *n, size_t i)
{
    tb_child_t *ch = &n->child[i];
    if (!ch->conn)
        return;
    TB_WARN("conn", "rank %u was restarted: the connection of its old process closed",
            ch->rank);
    ch->released = 1;
    detach_child(n, i);
}

void tb_node_parent_lost(tb_node_t *n, const char *why_in)
{
    char why[600];   /* why_in may live in the connection freed below */
    snprintf(why, sizeof why, "%s", why_in);
    tbon_rank_t lost = n->parent ? n->parent->rank : TBON_RANK_NONE;
    if (n->parent) {
        retire_late(n, n->parent);
        n->parent = NULL;
    }
    /* An orphan already, or one from now on: ft seeks an adopter. */
    if (tb_node_ending(n) ||
        tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_PARENT_LOST, .u.rank = lost }))
        return;
    TB_WARN("conn", "lost the parent: %s; leaving", why);
    atomic_store(&n->closed, 1);
    if (n->cbs.status)
        n->cbs.status(n->cbs.arg, TB_NODE_CLOSED, TBON_ECLOSED, why);
    tb_node_begin_shutdown(n);
    /* The session is gone: give the children half a second to leave, then
     * they are killed, so that everything is gone within a second. */
    tb_node_shutdown_at(n, tb_now_ms() + 500);
}

void tb_node_leave(tb_node_t *n)
{
    /* A back-end that leaves a running tree says so first: its parent then
     * reports it left, not failed (TBON_EV_NODE_LEFT). */
    if (n->role == TB_ROLE_BE && n->ft->ready(n) && !tb_node_ending(n) && n->parent &&
        !n->parent->closed)
        tb_node_send_ctl(n, n->parent, TB_CTL_LEAVE, tb_ctl_leave_encode(&(tb_ctl_leave_t){ 0 }));
    tb_node_enter(n, TB_LIFE_STOPPED);
}

void tb_node_begin_shutdown(tb_node_t *n)
{
    if (!tb_node_enter(n, TB_LIFE_SHUTTING_DOWN))
        return;
    tb_node_shutdown_at(n, tb_now_ms() + 3000);
    tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_SHUTDOWN });
    for (size_t i = 0; i < n->nchild; i++)
        if (n->child[i].conn)
            tb_node_send_ctl(n, n->child[i].conn, TB_CTL_SHUTDOWN,
                             tb_ctl_shutdown_encode(&(tb_ctl_shutdown_t){ 0 }));
}

/* A new authenticated data connection from the EDS. */
