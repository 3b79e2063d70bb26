/* node_direct.c - messages between any two processes (docs/protocol.md 10):
 * a back-end or the FE sends to one rank, to a set, or to every back-end
 * and the FE; each hop passes a DIRECT control message on by the topology
 * it holds: down to the child whose subtree holds a destination, else up,
 * a set split by the way each part goes (the message's copies part where
 * their paths do: Angskun, Bosilca, Fagg, Pjesivac-Grbovic and Dongarra, "A
 * self-healing network for scalable fault-tolerant runtime environments",
 * section 4). Never through the FE unless it is on the way. Commnodes pass
 * messages on; where this process is a destination the caller
 * (node_dlog.c) takes the message, once and in order. */
#include "node/node_int.h"

#include <stdlib.h>
#include <string.h>

#include "codec/ctl.h"
#include "codec/packet_int.h"
#include "util/log.h"

/* Where a destination goes from here. */
enum { HOP_HERE = TB_DIRECT_HERE, HOP_NONE = -2, HOP_UP = -1 };     /* >= 0: a child's index */

static int endpoint(const tb_node_t *n)
{
    return n->role != TB_ROLE_COMMNODE;
}

/* The hop towards rank d: HOP_HERE, a child's index, HOP_UP, or HOP_NONE
 * (no such rank, a commnode unless any, or below us through a child we do
 * not have). */
static int hop_any(const tb_node_t *n, tbon_rank_t d, int any)
{
    size_t size = tb_topology_size(n->topo);
    if (d >= size || (!any && tb_topology_role(n->topo, d) == TB_ROLE_COMMNODE))
        return HOP_NONE;
    if (d == n->rank)
        return HOP_HERE;
    tbon_rank_t r = d;
    for (size_t k = 0; k < size; k++) {
        tbon_rank_t p = tb_topology_parent(n->topo, r);
        if (p == TBON_RANK_NONE)
            break;
        if (p == n->rank) {
            int i = tb_node_child_index(n, r);
            return i >= 0 ? i : HOP_NONE;
        }
        r = p;
    }
    return n->parent ? HOP_UP : HOP_NONE;
}

/* The connection of hop h (a child's index or HOP_UP), or NULL. */
static int hop_to(const tb_node_t *n, tbon_rank_t d)
{
    return hop_any(n, d, 0);
}

static tb_conn_t *conn_of(tb_node_t *n, int h)
{
    if (h == HOP_UP)
        return n->parent;
    return h >= 0 && (size_t)h < n->nchild ? n->child[h].conn : NULL;
}

/* TBON_TEST_DROP_DIRECT=N: whether this commnode drops this message (its
 * Nth passed on): a hop with no way on, made at will, for the tests of the
 * senders' repair (node_dlog.c, resend_oldest). */
static int test_drop(tb_node_t *n)
{
    if (n->drop_every < 0) {
        const char *v = n->cfg.conf ? n->cfg.conf->test_drop_direct : NULL;
        n->drop_every = v && n->role == TB_ROLE_COMMNODE ? strtol(v, NULL, 10) : 0;
        if (n->drop_every < 0)
            n->drop_every = 0;
    }
    return n->drop_every > 0 && ++n->drop_passed % (uint64_t)n->drop_every == 0;
}

/* Whether the test hook drops the message from src (number seq) here. */
static int drop_here(tb_node_t *n, uint32_t src, uint64_t seq)
{
    if (!test_drop(n))
        return 0;
    n->direct_dropped++;
    TB_WARN("direct", "TBON_TEST_DROP_DIRECT: a message from rank %u (number %llu) dropped "
            "here", src, (unsigned long long)seq);
    return 1;
}

/* m, with dst[0..k) and their numbers dseq[0..k) as its destinations, on
 * hop h; orig: m's packet as it came (NULL: made here), sent on as it is
 * when the hop serves every destination of m (a unicast, a broadcast): no
 * encoding per hop. A hop with no connection (a dead child, an orphan's
 * parent) drops it: its sender sends it again once the tree has healed
 * (node_dlog.c). */
static void forward(tb_node_t *n, const tb_ctl_direct_t *m, tbon_packet_t *orig, int h,
                    const uint32_t *dst, const uint32_t *dseq, size_t k)
{
    tb_conn_t *c = conn_of(n, h);
    if (c && drop_here(n, m->src, m->seq))
        return;
    if (!c) {
        n->direct_dropped += k ? k : 1;
        TB_INFO("direct", "a message from rank %u (number %llu) has no way on from here "
                "(%s not connected); dropped", m->src, (unsigned long long)m->seq,
                h == HOP_UP ? "the parent" : "a child");
        return;
    }
    if (orig && k == m->ndst) {
        tb_node_send_ctl(n, c, TB_CTL_DIRECT, tbon_packet_ref(orig));
        return;
    }
    tb_ctl_direct_t f = *m;
    f.dst = dst;
    f.dseq = dseq;
    f.ndst = k;
    tbon_packet_t *p = tb_ctl_direct_encode(&f);
    if (p)
        tb_node_send_ctl(n, c, TB_CTL_DIRECT, p);
}

/* A broadcast names in dst only the destinations that must take a unicast
 * first: passed on whole. 1 if this process takes it. */
static int broadcast(tb_node_t *n, int from, const tb_ctl_direct_t *m, tbon_packet_t *orig)
{
    int here = from != HOP_HERE && endpoint(n) && m->src != n->rank;
    if (!orig)
        orig = tb_ctl_direct_encode(m);     /* once for every neighbour */
    else
        tbon_packet_ref(orig);
    if (from != HOP_UP && n->parent)
        forward(n, m, orig, HOP_UP, m->dst, m->dseq, m->ndst);
    for (size_t i = 0; i < n->nchild; i++)
        if ((int)i != from && n->child[i].conn)
            forward(n, m, orig, (int)i, m->dst, m->dseq, m->ndst);
    tbon_packet_unref(orig);
    return here;
}

struct hd {
    int hop;
    uint32_t dst, dseq;
};

static int by_hop(const void *a, const void *b)
{
    const struct hd *x = a, *y = b;
    return x->hop != y->hop ? (x->hop < y->hop ? -1 : 1)
                            : (x->dst < y->dst ? -1 : x->dst > y->dst);
}

/* m's destinations dst[0..k) (numbers dseq), all of which go by hop h from
 * here. 1 if this process is the one (*mine: its number). */
static int to_hop(tb_node_t *n, int from, const tb_ctl_direct_t *m, tbon_packet_t *orig, int h,
                   const uint32_t *dst, const uint32_t *dseq, size_t k, uint32_t *mine)
{
    if (h == HOP_HERE && endpoint(n)) {
        *mine = dseq[0];
        return 1;
    } else if (h == HOP_NONE || (h == from && from != HOP_HERE)) {
        /* Back where it came from: the topologies disagree (a view in
         * flight); never bounced. */
        n->direct_dropped += k;
        TB_INFO("direct", "a message from rank %u (number %llu) to rank %u has no way "
                "from rank %u; dropped", m->src, (unsigned long long)m->seq, dst[0], n->rank);
    } else {
        forward(n, m, orig, h, dst, dseq, k);
    }
    return 0;
}

/* from: the child it came from, HOP_UP (the parent) or HOP_HERE (made
 * here). A unicast goes on with no copy or sort. */
int tb_direct_route(tb_node_t *n, int from, const tb_ctl_direct_t *m, tbon_packet_t *orig,
                    uint32_t *mine)
{
    if (from < 0 && from != HOP_HERE)
        from = HOP_UP;
    if (m->flags & TB_DIRECT_BCAST) {
        *mine = 0;
        return broadcast(n, from, m, orig);
    }
    *mine = 0;
    if (m->ndst == 1)
        return to_hop(n, from, m, orig, hop_to(n, m->dst[0]), m->dst, m->dseq, 1, mine);
    struct hd *v = malloc(m->ndst * sizeof *v);
    uint32_t *dst = malloc(2 * m->ndst * sizeof *dst);
    if (!v || !dst) {
        free(v);
        free(dst);
        TB_WARN("direct", "out of memory: a message from rank %u dropped", m->src);
        return 0;
    }
    uint32_t *dseq = dst + m->ndst;
    for (size_t i = 0; i < m->ndst; i++)
        v[i] = (struct hd){ hop_to(n, m->dst[i]), m->dst[i], m->dseq[i] };
    qsort(v, m->ndst, sizeof *v, by_hop);
    int here = 0;
    for (size_t i = 0, j; i < m->ndst; i = j) {
        size_t k = 0;
        for (j = i; j < m->ndst && v[j].hop == v[i].hop; j++)
            if (j == i || v[j].dst != v[j - 1].dst) {   /* once each */
                dst[k] = v[j].dst;
                dseq[k++] = v[j].dseq;
            }
        here |= to_hop(n, from, m, orig, v[i].hop, dst, dseq, k, mine);
    }
    free(v);
    free(dst);
    return here;
}

/* ---- ping (docs/protocol.md 10.3) ---- */

void tb_direct_ping(tb_node_t *n, int from, const tb_ctl_ping_t *m)
{
    if (from < 0 && from != HOP_HERE)
        from = HOP_UP;
    tb_ctl_ping_t f = *m;
    uint32_t *route = NULL;
    if (!(m->flags & TB_PING_PONG)) {       /* on the way out: we are on its route */
        route = malloc((m->nroute + 1) * sizeof *route);
        if (!route)
            return;
        if (m->nroute)
            memcpy(route, m->route, m->nroute * sizeof *route);
        route[m->nroute] = n->rank;
        f.route = route;
        f.nroute = m->nroute + 1;
        if (m->target == n->rank)
            f.flags |= TB_PING_PONG;        /* answered here */
    }
    tbon_rank_t to = f.flags & TB_PING_PONG ? f.origin : f.target;
    int h = to == n->rank ? HOP_HERE : hop_any(n, to, 1);
    /* (never back where it came from, unless it turned here: an answer) */
    int turned = !(m->flags & TB_PING_PONG) && (f.flags & TB_PING_PONG);
    tb_conn_t *c = h == HOP_HERE || (h == from && from != HOP_HERE && !turned) ? NULL
                                                                             : conn_of(n, h);
    if (h == HOP_HERE) {
        if (n->cbs.pong)
            n->cbs.pong(n->cbs.arg, f.id, f.route, f.nroute);
    } else if (c) {
        tbon_packet_t *p = tb_ctl_ping_encode(&f);
        if (p)
            tb_node_send_ctl(n, c, TB_CTL_PING, p);
    } else {
        TB_INFO("direct", "a ping from rank %u to rank %u has no way on from rank %u; dropped",
                f.origin, f.target, n->rank);
    }
    free(route);
}
