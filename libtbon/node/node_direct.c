/* node_direct.c - messages between any two processes (docs/protocol.md 10):
 * a back-end or the FE sends to one rank, to a set, or to every back-end
 * and the FE; each hop passes a DIRECT control message on by the topology
 * it holds: down to the child whose subtree holds a destination, else up,
 * a set split by the way each part goes (the message's copies part where
 * their paths do: Angskun, Bosilca, Fagg, Pjesivac-Grbovic and Dongarra, "A
 * self-healing network for scalable fault-tolerant runtime environments",
 * section 4). Never through the FE unless it is on the way. Commnodes pass
 * messages on; back-ends and the FE take theirs (tb_node_cbs_t.direct). */
#include "node/node_int.h"

#include <stdlib.h>
#include <string.h>

#include "codec/ctl.h"
#include "codec/packet_int.h"
#include "util/log.h"

/* Where a destination goes from here. */
enum { HOP_HERE = -3, HOP_NONE = -2, HOP_UP = -1 };     /* >= 0: a child's index */

static int endpoint(const tb_node_t *n)
{
    return n->role != TB_ROLE_COMMNODE;
}

/* The hop towards rank d: HOP_HERE, a child's index, HOP_UP, or HOP_NONE
 * (no such rank, a commnode, or below us through a child we do not have). */
static int hop_to(const tb_node_t *n, tbon_rank_t d)
{
    size_t size = tb_topology_size(n->topo);
    if (d >= size || tb_topology_role(n->topo, d) == TB_ROLE_COMMNODE)
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
static tb_conn_t *conn_of(tb_node_t *n, int h)
{
    if (h == HOP_UP)
        return n->parent;
    return h >= 0 && (size_t)h < n->nchild ? n->child[h].conn : NULL;
}

static void deliver(tb_node_t *n, const tb_ctl_direct_t *m)
{
    if (!n->cbs.direct)
        return;
    tbon_error_t err;
    tbon_packet_t *p = tb_packet_decode(m->body, m->len, m->tag, 0, m->src, &err);
    if (!p) {
        TB_WARN("direct", "a message from rank %u (number %llu) cannot be read: %s; dropped",
                m->src, (unsigned long long)m->seq, err.msg);
        return;
    }
    n->cbs.direct(n->cbs.arg, m->src, p);
}

/* m, with dst[0..k) as its destinations, on hop h; orig: m's packet as it
 * came (NULL: from our application), sent on as it is when the hop serves
 * every destination of m (a unicast, a broadcast): no encoding per hop. */
static void forward(tb_node_t *n, const tb_ctl_direct_t *m, tbon_packet_t *orig, int h,
                    const uint32_t *dst, size_t k)
{
    tb_conn_t *c = conn_of(n, h);
    if (!c) {
        n->direct_dropped += k ? k : 1;
        TB_WARN("direct", "a message from rank %u (number %llu) has no way on from here "
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
    f.ndst = k;
    tbon_packet_t *p = tb_ctl_direct_encode(&f);
    if (p)
        tb_node_send_ctl(n, c, TB_CTL_DIRECT, p);
}

static void broadcast(tb_node_t *n, int from, const tb_ctl_direct_t *m, tbon_packet_t *orig)
{
    if (from != HOP_HERE && endpoint(n) && m->src != n->rank)
        deliver(n, m);
    if (!orig)
        orig = tb_ctl_direct_encode(m);     /* once for every neighbour */
    else
        tbon_packet_ref(orig);
    if (from != HOP_UP && n->parent)
        forward(n, m, orig, HOP_UP, NULL, 0);
    for (size_t i = 0; i < n->nchild; i++)
        if ((int)i != from && n->child[i].conn)
            forward(n, m, orig, (int)i, NULL, 0);
    tbon_packet_unref(orig);
}

struct hd {
    int hop;
    uint32_t dst;
};

static int by_hop(const void *a, const void *b)
{
    const struct hd *x = a, *y = b;
    return x->hop != y->hop ? (x->hop < y->hop ? -1 : 1)
                            : (x->dst < y->dst ? -1 : x->dst > y->dst);
}

/* m's destinations dst[0..k), all of which go by hop h from here. */
static void to_hop(tb_node_t *n, int from, const tb_ctl_direct_t *m, tbon_packet_t *orig, int h,
                   const uint32_t *dst, size_t k)
{
    if (h == HOP_HERE && endpoint(n)) {
        deliver(n, m);
    } else if (h == HOP_NONE || (h == from && from != HOP_HERE)) {
        /* Back where it came from: the topologies disagree (a view in
         * flight); never bounced. */
        n->direct_dropped += k;
        TB_WARN("direct", "a message from rank %u (number %llu) to rank %u has no way "
                "from rank %u; dropped", m->src, (unsigned long long)m->seq, dst[0], n->rank);
    } else {
        forward(n, m, orig, h, dst, k);
    }
}

/* from: the child it came from, HOP_UP (the parent) or HOP_HERE (our
 * application). A unicast goes on with no copy or sort. */
static void route(tb_node_t *n, int from, const tb_ctl_direct_t *m, tbon_packet_t *orig)
{
    if (m->flags & TB_DIRECT_BCAST) {
        broadcast(n, from, m, orig);
        return;
    }
    if (m->ndst == 1) {
        to_hop(n, from, m, orig, hop_to(n, m->dst[0]), m->dst, 1);
        return;
    }
    struct hd *v = malloc(m->ndst * sizeof *v);
    uint32_t *dst = malloc(m->ndst * sizeof *dst);
    if (!v || !dst) {
        free(v);
        free(dst);
        TB_WARN("direct", "out of memory: a message from rank %u dropped", m->src);
        return;
    }
    for (size_t i = 0; i < m->ndst; i++)
        v[i] = (struct hd){ hop_to(n, m->dst[i]), m->dst[i] };
    qsort(v, m->ndst, sizeof *v, by_hop);
    for (size_t i = 0, j; i < m->ndst; i = j) {
        size_t k = 0;
        for (j = i; j < m->ndst && v[j].hop == v[i].hop; j++)
            if (j == i || v[j].dst != v[j - 1].dst)     /* once each */
                dst[k++] = v[j].dst;
        to_hop(n, from, m, orig, v[i].hop, dst, k);
    }
    free(v);
    free(dst);
}

void tb_direct_route(tb_node_t *n, int from, const tb_ctl_direct_t *m, tbon_packet_t *p)
{
    route(n, from < 0 ? HOP_UP : from, m, p);
}

void tb_direct_send(tb_node_t *n, tb_cmd_t *c)
{
    size_t len = 0;
    const uint8_t *body = tb_packet_payload(c->u.direct.pkt, &len);
    tb_ctl_direct_t m = {
        .src = n->rank, .seq = ++n->direct_seq, .tag = tbon_packet_tag(c->u.direct.pkt),
        .flags = c->u.direct.flags, .dst = c->u.direct.dst, .ndst = c->u.direct.ndst,
        .body = body, .len = len,
    };
    route(n, HOP_HERE, &m, NULL);
}
