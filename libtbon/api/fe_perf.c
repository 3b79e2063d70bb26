/* fe_perf.c - run-time performance data at the front-end (tbon_fe_perf,
 * tbon_frontend --perf).
 *
 * A call posts a gathering (node_perf.c takes it down the tree and the
 * answers up); net_cb.c's cb_perf collects what comes into net->perf_acc.
 * The call ends once every node alive in the FE's topology has answered.
 * A round whose answer is complete while some live node is still silent
 * was cut short by a failure: the orphans' answers went to the dead parent.
 * The call then waits for those nodes to be adopted (or taken for failed)
 * and asks again, until its time runs out. */
#include "api/net_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/node.h"
#include "topo/topology.h"
#include "util/clock.h"
#include "util/log.h"

/* The most gatherings one call makes. */
#define MAX_ROUNDS 8

static struct tb_perf_acc *acc_new(size_t n)
{
    struct tb_perf_acc *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->n = n;
    a->node = calloc(n ? n : 1, TB_PERF_NW * sizeof *a->node);
    a->got = calloc(n ? n : 1, 1);
    if (!a->node || !a->got) {
        free(a->node);
        free(a->got);
        free(a);
        return NULL;
    }
    return a;
}

static void acc_free(struct tb_perf_acc *a)
{
    if (!a)
        return;
    free(a->node);
    free(a->got);
    free(a->strm);
    free(a);
}

/* Under net->mu: the live nodes that have not answered (up to cap of them
 * in v), and how many there are. */
static size_t silent(tbon_net_t *net, const struct tb_perf_acc *a, tbon_rank_t *v, size_t cap)
{
    size_t k = 0, size = tb_topology_size(net->topo);
    for (tbon_rank_t r = 0; r < size && r < a->n; r++)
        if (tb_topology_alive(net->topo, r) && !a->got[r]) {
            if (k < cap)
                v[k] = r;
            k++;
        }
    return k;
}

/* Under net->mu: rank r's parent now, TBON_RANK_NONE if it is not alive
 * (failed, left, or cut off from the tree until adopted). */
static tbon_rank_t parent_now(tbon_net_t *net, tbon_rank_t r)
{
    return r && r < tb_topology_size(net->topo) && tb_topology_alive(net->topo, r)
               ? tb_topology_parent(net->topo, r) : TBON_RANK_NONE;
}

/* Under net->mu: has any node that has not answered changed its place
 * (adopted, cut off, come back, failed) since par[] was taken? */
static int moved(tbon_net_t *net, const struct tb_perf_acc *a, const tbon_rank_t *par)
{
    for (tbon_rank_t r = 1; r < a->n; r++)
        if (!a->got[r] && parent_now(net, r) != par[r])
            return 1;
    return 0;
}

static void parents(tbon_net_t *net, const struct tb_perf_acc *a, tbon_rank_t *par)
{
    for (tbon_rank_t r = 0; r < a->n; r++)
        par[r] = parent_now(net, r);
}

static int cmp_stream(const void *a, const void *b)
{
    const tbon_perf_stream_t *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/* Under net->mu: the result from what came. */
static tbon_perf_t *result(tbon_net_t *net, const struct tb_perf_acc *a)
{
    tbon_perf_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->nnodes = a->n;
    p->nodes = calloc(a->n ? a->n : 1, sizeof *p->nodes);
    p->streams = calloc(a->nstrm ? a->nstrm : 1, sizeof *p->streams);
    if (!p->nodes || !p->streams) {
        tbon_perf_free(p);
        return NULL;
    }
    for (size_t j = 0; j < a->nstrm; j++) {
        const uint64_t *s = a->strm + j * TB_PERF_SW;
        tbon_perf_stream_t *o = &p->streams[p->nstreams++];
        o->rank = (tbon_rank_t)s[TB_PERF_S_RANK];
        o->stream = (uint32_t)s[TB_PERF_S_STREAM];
        o->up_in_packets = s[TB_PERF_S_UP_IN];
        o->up_in_bytes = s[TB_PERF_S_UP_IN_BYTES];
        o->up_out_packets = s[TB_PERF_S_UP_OUT];
        o->up_out_bytes = s[TB_PERF_S_UP_OUT_BYTES];
        o->down_in_packets = s[TB_PERF_S_DOWN_IN];
        o->down_in_bytes = s[TB_PERF_S_DOWN_IN_BYTES];
        o->down_out_packets = s[TB_PERF_S_DOWN_OUT];
        o->down_out_bytes = s[TB_PERF_S_DOWN_OUT_BYTES];
        o->waves = s[TB_PERF_S_WAVES];
        o->filter_calls = s[TB_PERF_S_FCALLS];
        o->filter_ns = s[TB_PERF_S_FWALL_NS];
        /* the sampled calls' CPU time, scaled to all of them */
        uint64_t samples = s[TB_PERF_S_FCPU_SAMPLES];
        o->filter_cpu_ns = samples ? (uint64_t)((double)s[TB_PERF_S_FCPU_NS] *
                                                (double)o->filter_calls / (double)samples)
                                   : 0;
        o->queued_bytes = s[TB_PERF_S_QUEUED];
    }
    qsort(p->streams, p->nstreams, sizeof *p->streams, cmp_stream);
    size_t j = 0;
    for (tbon_rank_t r = 0; r < a->n; r++) {
        tbon_perf_node_t *o = &p->nodes[r];
        const uint64_t *v = a->node + (size_t)r * TB_PERF_NW;
        o->rank = r;
        o->role = (int)tb_topology_role(net->topo, r);
        o->alive = tb_topology_alive(net->topo, r);
        const char *h = tb_topology_host(net->topo, r);
        snprintf(o->host, sizeof o->host, "%s", h ? h : "?");
        while (j < p->nstreams && p->streams[j].rank < r)
            j++;
        o->first_stream = j;
        while (j + o->nstreams < p->nstreams && p->streams[j + o->nstreams].rank == r)
            o->nstreams++;
        if (!a->got[r]) {
            p->silent += o->alive;
            continue;
        }
        o->answered = 1;
        p->answered++;
        o->rss_bytes = v[TB_PERF_N_RSS];
        o->cpu_us = v[TB_PERF_N_CPU_US];
        o->queued_bytes = v[TB_PERF_N_QUEUED];
        o->stream_queued_bytes = v[TB_PERF_N_STREAM_QUEUED];
        o->link_resends = v[TB_PERF_N_RESENT];
        o->relinks = v[TB_PERF_N_RELINKS];
        o->crc_errors = v[TB_PERF_N_CRC];
        o->uptime_ms = v[TB_PERF_N_UPTIME_MS];
        o->children = v[TB_PERF_N_CHILDREN];
        o->messages_dropped = v[TB_PERF_N_MSGS_DROPPED];
    }
    return p;
}

void tbon_perf_free(tbon_perf_t *perf)
{
    if (!perf)
        return;
    free(perf->nodes);
    free(perf->streams);
    free(perf);
}

/* Under net->mu: post gathering id, asking each node to wait wait_ms for
 * its children. */
static int post(tbon_net_t *net, uint64_t id, int wait_ms)
{
    tb_cmd_t *c = tb_cmd_perf(id, (uint32_t)(wait_ms > 0 ? wait_ms : 1));
    if (!c)
        return TBON_ENOMEM;
    net->perf_next = id;
    tb_node_post(net->node, c);
    return 0;
}

/* Under net->mu: gather until every live node answered, the deadline, or
 * the network's end; the rounds it took. */
static int gather(tbon_net_t *net, struct tb_perf_acc *a, const struct timespec *abs,
                  int64_t due, int *rc)
{
    int rounds = 0;
    *rc = 0;
    tbon_rank_t *par = malloc((a->n ? a->n : 1) * sizeof *par);
    if (!par) {
        *rc = TBON_ENOMEM;
        return 0;
    }
    while (rounds < MAX_ROUNDS && !net->closed) {
        int64_t left = due - tb_now_ms();
        if (left <= 0)
            break;
        uint64_t id = net->perf_next + 1;
        parents(net, a, par);
        /* the FE's own wait ends before the call's, so that the round's
         * answer comes within it */
        if ((*rc = post(net, id, (int)(left - left / 4))) != 0)
            break;
        rounds++;
        while (net->perf_done < id && silent(net, a, NULL, 0) && !net->closed &&
               tb_net_wait_until(net, abs) == 0)
            ;
        TB_DEBUG("perf", "gathering %llu: %s, %zu nodes alive and silent",
                 (unsigned long long)id, net->perf_done < id ? "not answered" : "answered",
                 silent(net, a, NULL, 0));
        if (!silent(net, a, NULL, 0) || net->perf_done < id)
            break;              /* all there, or the time is up */
        /* Its answer is in, yet some are silent: cut off by a failure
         * (their answers went to a dead parent, or the request never
         * reached them) or stopped. Ask again once one of them has a new
         * parent - maybe already - or is no longer alive. */
        while (!moved(net, a, par) && !net->closed && tb_net_wait_until(net, abs) == 0)
            ;
        if (!moved(net, a, par))
            break;
    }
    free(par);
    return rounds;
}

static int perf_call(tbon_net_t *net, tbon_perf_t **out, int timeout_ms)
{
    int64_t t0 = tb_now_ms(), due = t0 + timeout_ms;
    struct timespec ts, *abs = tb_net_deadline(timeout_ms, &ts);
    pthread_mutex_lock(&net->mu);
    /* one call at a time */
    while (net->perf_first && !net->closed && tb_net_wait_until(net, abs) == 0)
        ;
    if (net->closed || net->perf_first) {
        int closed = net->closed;
        pthread_mutex_unlock(&net->mu);
        return closed ? tb_net_fail(net, TBON_ECLOSED, "the network has shut down")
                      : tb_net_fail(net, TBON_ETIMEOUT, "another tbon_fe_perf call held the "
                                    "network for %d ms", timeout_ms);
    }
    struct tb_perf_acc *a = acc_new(tb_topology_size(net->topo));
    if (!a) {
        pthread_mutex_unlock(&net->mu);
        return tb_net_fail(net, TBON_ENOMEM, "out of memory");
    }
    net->perf_acc = a;
    net->perf_first = net->perf_next + 1;
    int rc;
    int rounds = gather(net, a, abs, due, &rc);
    tbon_rank_t sv[8];
    size_t nsilent = silent(net, a, sv, 8);
    tbon_perf_t *p = rc ? NULL : result(net, a);
    int closed = net->closed;
    net->perf_acc = NULL;
    net->perf_first = 0;
    pthread_cond_broadcast(&net->cond);     /* the next call may go */
    pthread_mutex_unlock(&net->mu);
    acc_free(a);
    if (rc || !p) {
        tbon_perf_free(p);
        return tb_net_fail(net, rc ? rc : TBON_ENOMEM, "out of memory");
    }
    p->rounds = rounds;
    p->elapsed_ms = (double)(tb_now_ms() - t0);
    *out = p;
    if (!nsilent)
        return 0;
    char list[200] = "";
    size_t len = 0;
    for (size_t i = 0; i < nsilent && i < 8 && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%u", i ? ", " : "", sv[i]);
    if (closed)
        return tb_net_fail(net, TBON_ECLOSED, "the network shut down before %zu nodes "
                           "answered (rank %s%s)", nsilent, list, nsilent > 8 ? ", ..." : "");
    return tb_net_fail(net, TBON_ETIMEOUT, "%zu live node%s did not answer within %d ms "
                       "(rank%s %s%s)", nsilent, nsilent == 1 ? "" : "s", timeout_ms,
                       nsilent == 1 ? "" : "s", list, nsilent > 8 ? ", ..." : "");
}

int tbon_fe_perf(tbon_net_t *net, tbon_perf_t **out, int timeout_ms)
{
    if (out)
        *out = NULL;
    if (!net || !net->is_fe || !out || timeout_ms <= 0)
        return tb_net_fail(net, TBON_EINVAL, "tbon_fe_perf needs a front-end network, a place "
                           "for the result and a timeout over 0 ms");
    /* (a destroy wakes the call, and waits for it to be gone) */
    tb_net_call_enter(net);
    return tb_net_call_leave(net, perf_call(net, out, timeout_ms));
}
