/* join.c - joins and leaves (seed 000 section 3.7; docs/protocol.md
 * 9.6): a new back-end asks the FE, gets its rank and parent once that
 * parent has the view version that adds it, and connects there; a leaving
 * one says so and is no failure. A join is a view change like any other
 * (ft/view.c). */
#include "ft/ft_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/log.h"
#include "codec/packet_int.h"
#include "topo/reconfig.h"
#include "net/sock.h"

/* A joined back-end must connect to its parent within this (ms), or it is
 * taken for failed. */
#define TB_JOIN_CONNECT_MS 10000

/* ---- joins and leaves (seed 000 section 3.7; docs/protocol.md 9.6) ---- */

/* Apply join c (a new node, or a restarted one) to our copies, and take it
 * as a child slot if its parent is us. 1 if applied, 0 if we have it, -1 if
 * it cannot be (not the next rank, out of memory). */
int tb_join_add(tb_node_t *n, const tb_vchange_t *c)
{
    tb_role_t role = c->kind == TB_V_JOIN_CN ? TB_ROLE_COMMNODE : TB_ROLE_BE;
    int old = c->rank < tb_topology_size(n->topo) ? tb_node_child_index(n, c->rank) : -1;
    if (old >= 0 && n->child[old].conn &&
        tb_inc_gen(c->inc) > tb_inc_gen(tb_topology_incarnation(n->topo, c->rank)))
        tb_node_drop_child(n, (size_t)old);     /* still connected to its old process */
    int rc = tb_report_join(n->topo, role, c->rank, c->parent, c->host, c->lid, c->inc);
    if (rc <= 0)
        return rc < 0 ? -1 : 0;
    tbon_rank_t r = c->rank, p = tb_topology_parent(n->topo, r);
    if (c->port)
        tb_topology_set_port(n->topo, r, (uint16_t)c->port);
    free(n->topo_frame);
    n->topo_frame = NULL;
    tb_eds_join(n->ftst->eds, c);
    if (p == n->rank) {
        /* A restarted child takes its old slot again. */
        int i = tb_node_child_index(n, r);
        if (i < 0)
            i = tb_node_add_child(n, r, role == TB_ROLE_BE);
        if (i >= 0) {
            tb_child_t *ch = &n->child[i];
            ch->state = CH_LAUNCHED;
            ch->joined = 1;
            ch->leaving = 0;
            ch->suspect = 0;
            ch->ev_lost = 0;    /* the old process's end: its link may relink */
            ch->v_known = 0;
            ch->v_sent = ch->v_acked = 0;
            n->ftst->njoining += !ch->join_due;
            ch->join_due = tb_now_ms() + TB_JOIN_CONNECT_MS;
        }
    }
    return 1;
}

/* The host a joining back-end is known by: its address as we see it, or,
 * on the loopback, the FE's own topology host. */
static void peer_host(tb_node_t *n, int fd, char *out, size_t cap)
{
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    if (getpeername(fd, (struct sockaddr *)&a, &len) == 0 &&
        tb_sock_addr_string((struct sockaddr *)&a, out, cap) == 0 && strncmp(out, "127.", 4) != 0 &&
        strcmp(out, "::1") != 0)
        return;
    snprintf(out, cap, "%s", tb_topology_host(n->topo, 0));
}

/* Why the FE does not take rank r back as a restarted process of role, or
 * NULL if it does. */
static const char *no_restart(const tb_node_t *n, tbon_rank_t r, tb_role_t role)
{
    const struct tb_ft_fe *fe = n->ftst->fe;
    if (r == 0 || r >= tb_topology_size(n->topo))
        return "no such rank";
    if (tb_topology_role(n->topo, r) != role)
        return "it had another role";
    if (tb_topology_alive(n->topo, r))
        return "it is alive (not known to have failed yet)";
    if (tb_inc_gen(tb_topology_incarnation(n->topo, r)) + 1 >=
        1u << (32 - TB_INC_GEN_SHIFT))
        return "restarted too often";
    for (size_t i = 0; i < fe->npjoin; i++)
        if (fe->pjoin[i].r == r)
            return "it is coming back already";
    return NULL;
}

void tb_view_join(tb_node_t *n, tb_cmd_t *c)
{
    struct tb_ft_fe *fe = n->ftst->fe;
    tbon_rank_t back = c->u.join_conn.rank;     /* a restarted one, or TBON_RANK_NONE */
    tb_role_t role = c->u.join_conn.role == TB_ROLE_COMMNODE ? TB_ROLE_COMMNODE : TB_ROLE_BE;
    const char *why = !n->ftst->ft_ready ? "the tree is not up yet"
                      : tb_node_ending(n) ? "shutting down"
                      : back != TBON_RANK_NONE ? no_restart(n, back, role) : NULL;
    if (why) {
        if (back != TBON_RANK_NONE)
            TB_INFO("join", "refused to take rank %u back: %s", back, why);
        else
            TB_INFO("join", "refused a %s: %s", tb_role_name(role), why);
        return;                                 /* the fd closes with the command */
    }
    struct tb_pjoin *pj = realloc(fe->pjoin, (fe->npjoin + 1) * sizeof *pj);
    if (!pj)
        return;
    fe->pjoin = pj;
    tb_vchange_t ch = { role == TB_ROLE_BE ? TB_V_JOIN : TB_V_JOIN_CN,
                        (tbon_rank_t)tb_topology_size(n->topo), tb_join_parent(n->topo, role),
                        0, 0, "", role == TB_ROLE_BE ? 0 : c->u.join_conn.port };
    if (back != TBON_RANK_NONE) {
        /* A restarted process keeps its rank and name; its next generation
         * makes whatever its old one still says stale (reconfig.h). */
        ch.rank = back;
        ch.inc = tb_inc_next_gen(tb_topology_incarnation(n->topo, back));
        ch.lid = tb_topology_local_id(n->topo, back);
        snprintf(ch.host, sizeof ch.host, "%s", tb_topology_host(n->topo, back));
    } else {
        peer_host(n, c->u.join_conn.fd, ch.host, sizeof ch.host);
        ch.lid = ch.rank;
        while (tb_topology_find(n->topo, ch.host, ch.lid) != TBON_RANK_NONE)
            ch.lid++;
    }
    if (tb_join_add(n, &ch) != 1) {
        TB_WARN("join", "cannot add rank %u to the topology", ch.rank);
        return;
    }
    tb_ft_up(n)->view_note_change(n, &ch);
    tb_cover_joining(n, ch.rank);       /* expected in waves once it has joined */
    fe->pjoin[fe->npjoin++] = (struct tb_pjoin){ ch.rank, ch.parent, c->u.join_conn.fd, 0,
                                               tb_now_ms() + TB_JOIN_CONNECT_MS };
    c->u.join_conn.fd = -1;
    for (size_t i = 0; i < fe->nannounced; i++)     /* its next JOINED is news */
        if (fe->announced[i] == ch.rank)
            fe->announced[i] = fe->announced[--fe->nannounced];
    TB_INFO("join", "rank %u (%s) %s under %u (%s)", ch.rank, tb_role_name(role),
            ch.inc ? "comes back" : "joins", ch.parent, ch.host);
}

/* Has parent p applied version v? Its subtree's ancestor among our children
 * says so (every process below it has). */
static int applied_at(const tb_node_t *n, tbon_rank_t p, uint64_t v)
{
    if (p == 0)
        return n->ftst->view >= v;
    tbon_rank_t c = p;
    while (c != TBON_RANK_NONE && tb_topology_parent(n->topo, c) != 0)
        c = tb_topology_parent(n->topo, c);
    int i = c == TBON_RANK_NONE ? -1 : tb_node_child_index(n, c);
    return i >= 0 && tb_child_counted(&n->child[i]) && n->child[i].v_known && n->child[i].v_acked >= v;
}

void tb_join_replies(tb_node_t *n)
{
    struct tb_ft_fe *fe = n->ftst->fe;
    if (!n->ftst->fe)
        return;
    int64_t now = tb_now_ms();
    for (size_t i = 0; i < fe->npjoin;) {
        struct tb_pjoin *j = &fe->pjoin[i];
        int ready = j->version && applied_at(n, j->parent, j->version);
        if (!ready && now < j->due) {
            i++;
            continue;
        }
        if (ready) {
            tb_ctl_join_ack_t a = { j->r, j->parent, tb_topology_host(n->topo, j->parent),
                                    tb_topology_port(n->topo, j->parent),
                                    tb_topology_incarnation(n->topo, j->r) };
            tbon_packet_t *p = tb_ctl_join_ack_encode(&a);
            size_t len = 0;
            const uint8_t *pl = p ? tb_packet_payload(p, &len) : NULL;
            tb_frame_hdr_t h = { .type = TB_FRAME_CONTROL, .tag = TB_CTL_JOIN_ACK, .source = 0 };
            tbon_error_t err;
            if (!pl || tb_sock_send_frame(j->fd, &h, pl, len, now + 1000, &err) != 0)
                TB_WARN("join", "rank %u: its rank could not be sent", j->r);
            tbon_packet_unref(p);
        } else {
            TB_WARN("join", "rank %u: its parent %u did not take the view in time", j->r,
                    j->parent);
        }
        close(j->fd);
        *j = fe->pjoin[--fe->npjoin];
    }
}

void tb_view_joined(tb_node_t *n, size_t i)
{
    tb_child_t *ch = &n->child[i];
    n->ftst->njoining -= !!ch->join_due;
    ch->join_due = 0;
    tb_ft_up(n)->send_ports_to(n, ch->conn);
    tb_stream_bcast_join(n, i);
    TB_INFO("join", "rank %u joined", ch->rank);
    if (n->role == TB_ROLE_FE)
        tb_view_fe_joined(n, ch->rank, n->rank);
    else
        tb_ft_up(n)->report(n, TB_V_JOINED, ch->rank, n->rank, 0);
}

void tb_view_fe_joined(tb_node_t *n, tbon_rank_t r, tbon_rank_t parent)
{
    struct tb_ft_fe *fe = n->ftst->fe;
    for (size_t i = 0; i < fe->nannounced; i++)
        if (fe->announced[i] == r)
            return;
    tbon_rank_t *v = realloc(fe->announced, (fe->nannounced + 1) * sizeof *v);
    if (!v)
        return;
    fe->announced = v;
    v[fe->nannounced++] = r;
    tb_ft_up(n)->view_note(n, TB_V_JOINED, r, parent, 0);
    tb_node_emit(n, TBON_EV_NODE_JOINED, r, parent, tb_topology_incarnation(n->topo, r), 0);
}

void tb_view_fe_left(tb_node_t *n, tbon_rank_t r, uint32_t inc)
{
    if (!tb_ft_up(n)->apply(n, TB_V_LEFT, r, TBON_RANK_NONE, inc))
        return;
    TB_INFO("view", "rank %u left", r);
    tb_node_emit(n, TBON_EV_NODE_LEFT, r, TBON_RANK_NONE, inc, 0);
}

void tb_view_left(tb_node_t *n, size_t i)
{
    tbon_rank_t r = n->child[i].rank;
    uint32_t inc = tb_topology_incarnation(n->topo, r);
    if (n->role == TB_ROLE_FE) {
        tb_view_fe_left(n, r, inc);
    } else if (tb_ft_up(n)->apply(n, TB_V_LEFT, r, TBON_RANK_NONE, inc)) {
        TB_INFO("view", "rank %u left", r);
        tb_ft_up(n)->report(n, TB_V_LEFT, r, TBON_RANK_NONE, inc);
    }
}

/* Joined children that never connected are taken for failed. */
void tb_join_timeouts(tb_node_t *n, int64_t now)
{
    for (size_t i = 0; n->ftst->njoining && i < n->nchild; i++) {
        tb_child_t *ch = &n->child[i];
        if (!ch->joined || !ch->join_due || now < ch->join_due || ch->conn)
            continue;
        ch->join_due = 0;
        n->ftst->njoining--;
        ch->state = CH_GONE;
        TB_WARN("join", "rank %u did not connect after joining: taken for failed", ch->rank);
        tb_stream_child_gone(n, i);
        tb_ft_up(n)->child_lost(n, i);
    }
}

