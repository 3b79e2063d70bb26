/* node_peers.c - the node's parent and children as members of the tree:
 * a child added, lost or dropped (its
 * streams stop waiting for it, the start-up leaves it out), the parent
 * lost, a back-end leaving, and the start of an orderly end. Above the
 * connections (node_link.c), which hand it a peer lost for good through
 * n->lost = tb_node_peer_lost. */
#include "node/node_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"
#include "util/clock.h"
#include "codec/packet_int.h"
#include "util/array.h"

int tb_node_add_child(tb_node_t *n, tbon_rank_t rank, int is_be)
{
    if (TB_ARRAY_ROOM(n->child, n->nchild, n->capchild, 4))
        return TBON_ENOMEM;
    memset(&n->child[n->nchild], 0, sizeof *n->child);
    n->child[n->nchild].rank = rank;
    n->child[n->nchild].is_be = is_be;
    n->child[n->nchild].state = CH_CONNECTED;
    n->nchild++;
    if (tb_stream_add_child(n)) {
        n->nchild--;
        return TBON_ENOMEM;
    }
    return (int)n->nchild - 1;
}

void tb_node_emit(tb_node_t *n, tbon_event_type_t type, tbon_rank_t r, tbon_rank_t p,
                  uint32_t inc, uint64_t version)
{
    if (n->role != TB_ROLE_FE)
        return;
    tb_cover_member_event(n, type, r);
    if (!n->cbs.event)
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

/* Child i's connection is over: its streams and views stop waiting for it. */
/* (Its streams stop waiting for it after this, tb_stream_child_gone: the
 * report of its failure goes up first, so that the FE knows of it before
 * any wave that went on without it.) */
static void detach_child(tb_node_t *n, size_t i)
{
    tb_child_t *ch = &n->child[i];
    tb_node_retire(n, ch->conn);
    ch->conn = NULL;
    ch->state = CH_GONE;
    ch->suspect = 0;        /* its slot may take a restarted process */
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
    tb_stream_child_gone(n, i);
    tb_perf_child_gone(n, i);
    /* Until the whole tree is up, a child lost is left out of the start-up
     * (node_missing.c), or the tree would wait for it until the timeout. */
    if (tb_node_life(n) == TB_LIFE_STARTING)
        n->start_lost(n, i, why);
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
    tb_stream_child_gone(n, i);
    tb_perf_child_gone(n, i);
}

void tb_node_parent_lost(tb_node_t *n, const char *why_in)
{
    char why[600];   /* why_in may live in the connection freed below */
    snprintf(why, sizeof why, "%s", why_in);
    tbon_rank_t lost = n->parent ? n->parent->rank : TBON_RANK_NONE;
    if (n->parent) {
        tb_node_retire_late(n, n->parent);
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

void tb_node_child_dead(tb_node_t *n, tbon_rank_t r, const char *why)
{
    int i = tb_node_child_index(n, r);
    if (i < 0)
        return;
    tb_child_t *ch = &n->child[i];
    ch->ev_lost = 1;
    if (ch->conn && (ch->conn->down || ch->conn->hold) && !tb_node_parent_relinking(n))
        tb_node_close_child(n, (size_t)i, why);
}

void tb_node_peer_lost(tb_node_t *n, tb_conn_t *c, const char *why)
{
    if (c->index < 0)
        tb_node_parent_lost(n, why);
    else
        tb_node_close_child(n, (size_t)c->index, why);
}
