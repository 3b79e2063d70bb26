/* fe_status.c - the tree's status at the front-end (tbon_fe_status,
 * tbon_frontend --status): each node's state as the FE's events made it -
 * ok, suspect, adopted, failed, missing (left out of the start-up), joined,
 * left - since when, its host and parent, and a ping's round trip.
 *
 * The states follow the node's callbacks (net_cb.c calls tb_fe_status_note
 * with net->mu held, for every event, also those the application never
 * takes), so a status costs nothing until it is asked for but a store per
 * event. */
#include "api/net_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topology.h"
#include "util/clock.h"

/* One node's record: its state, the one it goes back to when a suspicion
 * is refuted, and since when (tb_now_ms; 0: since the tree was ready). */
struct tb_nstat {
    uint8_t state, base;
    int64_t since;
};

static const char *const state_names[] = {
    "ok", "suspect", "adopted", "failed", "missing", "joined", "left",
};

const char *tbon_node_state_name(tbon_node_state_t s)
{
    return (unsigned)s < sizeof state_names / sizeof *state_names ? state_names[s] : "?";
}

static struct tb_nstat *slot(tbon_net_t *net, tbon_rank_t r)
{
    if (r == TBON_RANK_NONE)
        return NULL;
    if (r >= net->nnstat) {
        size_t n = net->nnstat ? net->nnstat : 64;
        while (n <= r)
            n *= 2;
        struct tb_nstat *v = realloc(net->nstat, n * sizeof *v);
        if (!v)
            return NULL;
        memset(v + net->nnstat, 0, (n - net->nnstat) * sizeof *v);
        net->nstat = v;
        net->nnstat = n;
    }
    return &net->nstat[r];
}

void tb_fe_status_note(tbon_net_t *net, tbon_rank_t r, int what)
{
    struct tb_nstat *s = net->is_fe ? slot(net, r) : NULL;
    if (!s)
        return;
    int st;
    switch (what) {
    case TBON_EV_NODE_FAILED:
        st = s->state == TBON_NODE_MISSING ? TBON_NODE_MISSING : TBON_NODE_FAILED;
        break;
    case TBON_EV_NODE_SUSPECT:
        st = TBON_NODE_SUSPECT;
        break;
    case TBON_EV_NODE_ALIVE:
        st = s->base;
        break;
    case TBON_EV_NODE_ADOPTED:
        st = s->base = TBON_NODE_ADOPTED;
        break;
    case TBON_EV_NODE_JOINED:
        st = s->base = TBON_NODE_JOINED;
        break;
    case TBON_EV_NODE_LEFT:
        st = TBON_NODE_LEFT;
        break;
    case -1:                    /* left out of the start-up (TB_NODE_MISSING) */
        st = TBON_NODE_MISSING;
        break;
    default:
        return;
    }
    if (st != s->state || what == TBON_EV_NODE_ADOPTED) {
        s->state = (uint8_t)st;
        s->since = tb_now_ms();
    }
}

/* Entry r of the topology, under net->mu. */
static void fill(tbon_net_t *net, tbon_rank_t r, int64_t now, tbon_node_status_t *o)
{
    const struct tb_nstat *s = r < net->nnstat ? &net->nstat[r] : NULL;
    memset(o, 0, sizeof *o);
    o->rank = r;
    o->role = (int)tb_topology_role(net->topo, r);
    o->state = s ? (tbon_node_state_t)s->state : TBON_NODE_OK;
    if (!tb_topology_alive(net->topo, r) && o->state != TBON_NODE_MISSING &&
        o->state != TBON_NODE_LEFT)
        o->state = TBON_NODE_FAILED;        /* (before its event came) */
    int64_t since = s && s->since ? s->since : net->ready_ms;
    o->since_s = since && now > since ? (double)(now - since) / 1000.0 : 0;
    o->parent = r == 0 ? TBON_RANK_NONE : tb_topology_parent(net->topo, r);
    const char *h = tb_topology_host(net->topo, r);
    snprintf(o->host, sizeof o->host, "%s", h ? h : "?");
    o->rtt_ms = -1;
}

int tbon_fe_status(tbon_net_t *net, tbon_node_status_t *out, size_t cap, int ping_ms)
{
    if (!net || !net->is_fe || (!out && cap))
        return tb_net_fail(net, TBON_EINVAL, "tbon_fe_status needs a front-end network and "
                           "room for the answer");
    pthread_mutex_lock(&net->mu);
    size_t n = tb_topology_size(net->topo);
    int64_t now = tb_now_ms();
    for (size_t r = 0; r < n && r < cap; r++)
        fill(net, (tbon_rank_t)r, now, &out[r]);
    pthread_mutex_unlock(&net->mu);
    /* the round trips, one live node after another (a ping goes by the
     * topology as a message does: docs/user-guide.md) */
    for (size_t r = 1; ping_ms > 0 && r < n && r < cap; r++) {
        tbon_node_state_t st = out[r].state;
        if (st == TBON_NODE_FAILED || st == TBON_NODE_MISSING || st == TBON_NODE_LEFT)
            continue;
        double rtt;
        int rc = tbon_net_ping(net, (tbon_rank_t)r, ping_ms, &rtt, NULL, 0, NULL);
        if (rc == 0)
            out[r].rtt_ms = rtt;
        else if (rc == TBON_ECLOSED)
            return rc;
    }
    if (cap)
        out[0].rtt_ms = 0;
    return (int)n;
}
