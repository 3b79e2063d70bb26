/* join.c - joins and leaves (seed 000 section 3.7; docs/protocol.md
 * 9.6): a new back-end asks the FE, gets its rank and parent once that
 * parent has the view version that adds it, and connects there; a leaving
 * one says so and is no failure. A join is a view change like any other
 * (ft/view.c). */
#include "ft/ft_int.h"
#include "util/hot.h"

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

/* A back-end that asked the FE to join: it is told its rank and parent once
 * the parent has the view that adds it (it would be refused before). */
struct tb_pjoin {
    tbon_rank_t r, parent;
    int fd;
    uint64_t version;   /* the version that adds it (0: not yet made) */
    int64_t due;        /* given up then (ms) */
};

/* Per child slot. */
struct jchild {
    int     joined;     /* it joined the running tree (not launched) */
    int64_t due;        /* joined: it must have connected by then (ms; 0: has) */
};

struct tb_joins {
    tb_ft_ctx_t *cx;
    struct jchild *ch;        /* by slot, grown as the node's children are */
    size_t     nch;
    struct jchild oom;        /* where a slot goes that could not be made */
    size_t     njoining;      /* slots waiting for a joined child (due set) */
    /* FE */
    struct tb_pjoin *pjoin;   /* back-ends told to wait for their parent */
    size_t     npjoin;
    tbon_rank_t *announced;   /* joined ranks whose TBON_EV_NODE_JOINED went out */
    size_t     nannounced;
};

tb_joins_t *tb_joins_new(tb_ft_ctx_t *cx)
{
    tb_joins_t *j = calloc(1, sizeof *j);
    if (j)
        j->cx = cx;
    return j;
}

void tb_joins_destroy(tb_joins_t *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->npjoin; i++)
        close(j->pjoin[i].fd);
    free(j->pjoin);
    free(j->announced);
    free(j->ch);
    free(j);
}

/* Slot i's state (the slots come from the node, which only adds them). */
static struct jchild *jch(tb_joins_t *j, size_t i)
{
    struct jchild *c = tb_ft_slot(&j->ch, &j->nch, sizeof *j->ch, i);
    if (!c) {
        j->oom = (struct jchild){ 0 };
        c = &j->oom;
    }
    return c;
}

size_t tb_joins_pending(const tb_joins_t *j)
{
    return j->npjoin;
}

/* ---- joins and leaves (seed 000 section 3.7; docs/protocol.md 9.6) ---- */

int tb_joins_add(tb_joins_t *j, const tb_vchange_t *c, int *slot)
{
    const tb_nft_t *nd = &j->cx->nd;
    tb_role_t role = c->kind == TB_V_JOIN_CN ? TB_ROLE_COMMNODE : TB_ROLE_BE;
    *slot = -1;
    int old = c->rank < tb_topology_size(nd->topo) ? nd->ops->child_index(nd->n, c->rank) : -1;
    if (old >= 0 && tb_ft_has_conn(j->cx, (size_t)old) &&
        tb_inc_gen(c->inc) > tb_inc_gen(tb_topology_incarnation(nd->topo, c->rank)))
        nd->ops->child_drop(nd->n, (size_t)old);    /* still connected to its old process */
    int rc = tb_report_join(nd->topo, role, c->rank, c->parent, c->host, c->lid, c->inc);
    if (rc <= 0)
        return rc < 0 ? -1 : 0;
    tbon_rank_t r = c->rank, p = tb_topology_parent(nd->topo, r);
    if (c->port)
        tb_topology_set_port(nd->topo, r, (uint16_t)c->port);
    nd->ops->topo_changed(nd->n);
    tb_eds_join(j->cx->eds, c);
    if (p != nd->rank)
        return 1;
    /* A restarted child takes its old slot again. */
    int i = nd->ops->child_rejoin(nd->n, r, role == TB_ROLE_BE);
    if (i >= 0) {
        struct jchild *ch = jch(j, (size_t)i);
        ch->joined = 1;
        j->njoining += !ch->due;
        ch->due = tb_now_ms() + TB_JOIN_CONNECT_MS;
        *slot = i;
    }
    return 1;
}

/* The host a joining back-end is known by: its address as we see it, or,
 * on the loopback, the FE's own topology host. */
static void peer_host(const tb_joins_t *j, int fd, char *out, size_t cap)
{
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    if (getpeername(fd, (struct sockaddr *)&a, &len) == 0 &&
        tb_sock_addr_string((struct sockaddr *)&a, out, cap) == 0 && strncmp(out, "127.", 4) != 0 &&
        strcmp(out, "::1") != 0)
        return;
    snprintf(out, cap, "%s", tb_topology_host(j->cx->nd.topo, 0));
}

/* Why the FE does not take rank r back as a restarted process of role, or
 * NULL if it does. */
static const char *no_restart(const tb_joins_t *j, tbon_rank_t r, tb_role_t role)
{
    const tb_topology_t *t = j->cx->nd.topo;
    if (r == 0 || r >= tb_topology_size(t))
        return "no such rank";
    if (tb_topology_role(t, r) != role)
        return "it had another role";
    if (tb_topology_alive(t, r))
        return "it is alive (not known to have failed yet)";
    if (tb_inc_gen(tb_topology_incarnation(t, r)) + 1 >= 1u << (32 - TB_INC_GEN_SHIFT))
        return "restarted too often";
    for (size_t i = 0; i < j->npjoin; i++)
        if (j->pjoin[i].r == r)
            return "it is coming back already";
    return NULL;
}

/* The change that adds the process asking on c: a new rank, or rank `back`
 * restarted at its next generation. */
static tb_vchange_t join_change(const tb_joins_t *j, const tb_cmd_t *c, tb_role_t role)
{
    const tb_topology_t *t = j->cx->nd.topo;
    tbon_rank_t back = c->u.join_conn.rank;
    tb_vchange_t ch = { role == TB_ROLE_BE ? TB_V_JOIN : TB_V_JOIN_CN,
                        (tbon_rank_t)tb_topology_size(t), tb_join_parent(t, role),
                        0, 0, "", role == TB_ROLE_BE ? 0 : c->u.join_conn.port };
    if (back != TBON_RANK_NONE) {
        /* A restarted process keeps its rank and name; its next generation
         * makes whatever its old one still says stale (reconfig.h). */
        ch.rank = back;
        ch.inc = tb_inc_next_gen(tb_topology_incarnation(t, back));
        ch.lid = tb_topology_local_id(t, back);
        snprintf(ch.host, sizeof ch.host, "%s", tb_topology_host(t, back));
    } else {
        peer_host(j, c->u.join_conn.fd, ch.host, sizeof ch.host);
        ch.lid = ch.rank;
        while (tb_topology_find(t, ch.host, ch.lid) != TBON_RANK_NONE)
            ch.lid++;
    }
    return ch;
}

int tb_joins_request(tb_joins_t *j, tb_cmd_t *c, int *slot)
{
    tb_ft_ctx_t *cx = j->cx;
    tbon_rank_t back = c->u.join_conn.rank;     /* a restarted one, or TBON_RANK_NONE */
    tb_role_t role = c->u.join_conn.role == TB_ROLE_COMMNODE ? TB_ROLE_COMMNODE : TB_ROLE_BE;
    const char *why = !cx->ready ? "the tree is not up yet"
                      : tb_ft_ending(cx) ? "shutting down"
                      : back != TBON_RANK_NONE ? no_restart(j, back, role) : NULL;
    *slot = -1;
    if (why) {
        if (back != TBON_RANK_NONE)
            TB_INFO("join", "refused to take rank %u back: %s", back, why);
        else
            TB_INFO("join", "refused a %s: %s", tb_role_name(role), why);
        return 0;                               /* the fd closes with the command */
    }
    struct tb_pjoin *pj = realloc(j->pjoin, (j->npjoin + 1) * sizeof *pj);
    if (!pj)
        return 0;
    j->pjoin = pj;
    tb_vchange_t ch = join_change(j, c, role);
    if (tb_joins_add(j, &ch, slot) != 1) {
        TB_WARN("join", "cannot add rank %u to the topology", ch.rank);
        return 0;
    }
    cx->up->view_note_change(cx->up_arg, &ch);
    cx->nd.ops->cover_joining(cx->nd.n, ch.rank);  /* expected in waves once it has joined */
    j->pjoin[j->npjoin++] = (struct tb_pjoin){ ch.rank, ch.parent, c->u.join_conn.fd, 0,
                                               tb_now_ms() + TB_JOIN_CONNECT_MS };
    c->u.join_conn.fd = -1;
    for (size_t i = 0; i < j->nannounced; i++)      /* its next JOINED is news */
        if (j->announced[i] == ch.rank)
            j->announced[i] = j->announced[--j->nannounced];
    TB_INFO("join", "rank %u (%s) %s under %u (%s)", ch.rank, tb_role_name(role),
            ch.inc ? "comes back" : "joins", ch.parent, ch.host);
    return 1;
}

void tb_joins_published(tb_joins_t *j, uint64_t v)
{
    for (size_t i = 0; i < j->npjoin; i++)
        if (!j->pjoin[i].version)
            j->pjoin[i].version = v;
}

/* Joiner x is told its rank and parent. */
static void answer(const tb_joins_t *j, const struct tb_pjoin *x, int64_t now)
{
    const tb_topology_t *t = j->cx->nd.topo;
    tb_ctl_join_ack_t a = { x->r, x->parent, tb_topology_host(t, x->parent),
                            tb_topology_port(t, x->parent), tb_topology_incarnation(t, x->r) };
    tbon_packet_t *p = tb_ctl_join_ack_encode(&a);
    size_t len = 0;
    const uint8_t *pl = p ? tb_packet_payload(p, &len) : NULL;
    tb_frame_hdr_t h = { .type = TB_FRAME_CONTROL, .tag = TB_CTL_JOIN_ACK, .source = 0 };
    tbon_error_t err;
    if (!pl || tb_sock_send_frame(x->fd, &h, pl, len, now + 1000, &err) != 0)
        TB_WARN("join", "rank %u: its rank could not be sent", x->r);
    tbon_packet_unref(p);
}

TB_HOT int tb_joins_replies(tb_joins_t *j)
{
    tb_ft_ctx_t *cx = j->cx;
    if (!j->npjoin)
        return 0;
    int64_t now = tb_now_ms();
    size_t had = j->npjoin;
    for (size_t i = 0; i < j->npjoin;) {
        struct tb_pjoin *x = &j->pjoin[i];
        int ready = x->version && cx->up->view_applied(cx->up_arg, x->parent, x->version);
        if (!ready && now < x->due) {
            i++;
            continue;
        }
        if (ready)
            answer(j, x, now);
        else
            TB_WARN("join", "rank %u: its parent %u did not take the view in time", x->r,
                    x->parent);
        close(x->fd);
        *x = j->pjoin[--j->npjoin];
    }
    return j->npjoin != had;
}

void tb_joins_child_up(tb_joins_t *j, size_t i)
{
    tb_ft_ctx_t *cx = j->cx;
    if (i >= j->nch || !j->ch[i].joined)
        return;
    struct jchild *ch = &j->ch[i];
    tbon_rank_t r = cx->nd.ops->child_rank(cx->nd.n, i);
    j->njoining -= !!ch->due;
    ch->due = 0;
    cx->up->send_ports_to(cx->up_arg, i);
    cx->nd.ops->bcast_join(cx->nd.n, i);
    TB_INFO("join", "rank %u joined", r);
    if (tb_ft_is_fe(cx))
        tb_joins_fe_joined(j, r, cx->nd.rank);
    else
        cx->up->report(cx->up_arg, TB_V_JOINED, r, cx->nd.rank, 0);
}

void tb_joins_fe_joined(tb_joins_t *j, tbon_rank_t r, tbon_rank_t parent)
{
    tb_ft_ctx_t *cx = j->cx;
    for (size_t i = 0; i < j->nannounced; i++)
        if (j->announced[i] == r)
            return;
    tbon_rank_t *v = realloc(j->announced, (j->nannounced + 1) * sizeof *v);
    if (!v)
        return;
    j->announced = v;
    v[j->nannounced++] = r;
    cx->up->view_note(cx->up_arg, TB_V_JOINED, r, parent, 0);
    tb_ft_emit(cx, TBON_EV_NODE_JOINED, r, parent, tb_topology_incarnation(cx->nd.topo, r), 0);
}

void tb_joins_fe_left(tb_joins_t *j, tbon_rank_t r, uint32_t inc)
{
    if (!j->cx->up->apply(j->cx->up_arg, TB_V_LEFT, r, TBON_RANK_NONE, inc))
        return;
    TB_INFO("view", "rank %u left", r);
    tb_ft_emit(j->cx, TBON_EV_NODE_LEFT, r, TBON_RANK_NONE, inc, 0);
}

void tb_joins_left(tb_joins_t *j, size_t i)
{
    tb_ft_ctx_t *cx = j->cx;
    tbon_rank_t r = cx->nd.ops->child_rank(cx->nd.n, i);
    uint32_t inc = tb_topology_incarnation(cx->nd.topo, r);
    if (tb_ft_is_fe(cx)) {
        tb_joins_fe_left(j, r, inc);
    } else if (cx->up->apply(cx->up_arg, TB_V_LEFT, r, TBON_RANK_NONE, inc)) {
        TB_INFO("view", "rank %u left", r);
        cx->up->report(cx->up_arg, TB_V_LEFT, r, TBON_RANK_NONE, inc);
    }
}

TB_HOT int tb_joins_timers(tb_joins_t *j, int64_t now)
{
    tb_ft_ctx_t *cx = j->cx;
    int acted = 0;
    /* Joined children that never connected are taken for failed. */
    for (size_t i = 0; j->njoining && i < j->nch; i++) {
        struct jchild *ch = &j->ch[i];
        if (!ch->joined || !ch->due || now < ch->due || tb_ft_has_conn(cx, i))
            continue;
        ch->due = 0;
        j->njoining--;
        TB_WARN("join", "rank %u did not connect after joining: taken for failed",
                cx->nd.ops->child_rank(cx->nd.n, i));
        cx->nd.ops->child_absent(cx->nd.n, i);
        cx->up->child_lost(cx->up_arg, i);
        acted = 1;
    }
    if (tb_ft_is_fe(cx) && cx->ready && !tb_ft_ending(cx))
        acted |= tb_joins_replies(j);
    return acted;
}

TB_HOT void tb_joins_next(const tb_joins_t *j, int64_t *next)
{
    /* A joined child's slot: a new one, or a restarted child's old one. */
    for (size_t i = 0; j->njoining && i < j->nch; i++)
        if (j->ch[i].due && j->ch[i].due < *next)
            *next = j->ch[i].due;
    for (size_t i = 0; i < j->npjoin; i++)
        if (j->pjoin[i].due < *next)
            *next = j->pjoin[i].due;
}
