/* net_cb.c - the node's callbacks into the API (node.h, tb_node_cbs_t):
 * packets into the streams' receive queues, status, events, views, checks
 * and attributes. */
#include "api/net_int.h"
#include "util/hot.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include <unistd.h>
#include "util/attrs.h"
#include "codec/packet_int.h"
#include "topo/reconfig.h"
#include "util/array.h"

/* ---- node callbacks (reactor thread) ----
 * Run by whichever thread drives the node (for a back-end, the application's
 * or the EDS's in cb_kick); cb_status also by the EDS thread directly
 * (tb_node_parent_gone). Each takes net->mu for what it touches. */

TB_HOT static void cb_deliver(void *arg, uint32_t stream, tbon_packet_t *p, uint64_t q)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    tbon_stream_t *s = tb_net_stream_locked(net, stream, !net->is_fe);
    if (!s || atomic_load(&s->closed)) {
        pthread_mutex_unlock(&net->mu);
        tbon_packet_unref(p);
        return;
    }
    tb_dent_t *e = tb_net_queue_locked(net, s);
    if (!e) {
        pthread_mutex_unlock(&net->mu);
        tbon_packet_unref(p);
        return;
    }
    *e = (tb_dent_t){ p, e->seq, q, 0, NULL };
    net->app_bytes += tb_net_pkt_size(p);
    tb_net_fd_sync(net);
    pthread_cond_broadcast(&net->cond);
    pthread_mutex_unlock(&net->mu);
}

/* FE: the outcome of the wave of request q on stream is an error (code,
 * msg), in its place among the waves. */
static void cb_wave_error(void *arg, uint32_t stream, uint64_t q, int code, const char *msg)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    tbon_stream_t *s = tb_net_stream_locked(net, stream, 0);
    tb_dent_t *e = s && !atomic_load(&s->closed) ? tb_net_queue_locked(net, s) : NULL;
    if (e) {
        *e = (tb_dent_t){ NULL, e->seq, q, code, msg ? strdup(msg) : NULL };
        tb_net_fd_sync(net);
        pthread_cond_broadcast(&net->cond);
    }
    pthread_mutex_unlock(&net->mu);
}

static void cb_status(void *arg, int what, int code, const char *msg)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    switch (what) {
    case TB_NODE_READY:
        net->ready = 1;
        net->ready_ms = tb_now_ms();
        break;
    case TB_NODE_FAILED:
        if (!net->failed) {
            net->failed = 1;
            net->fail_code = code;
            snprintf(net->fail_msg, sizeof net->fail_msg, "%s", msg);
        }
        break;
    case TB_NODE_CLOSED:
        /* Every call from now on says TBON_ECLOSED; the application leaves
         * when it sees it (the library ends no process: docs/api.md). */
        net->closed = 1;
        pthread_cond_broadcast(&net->ev_cond);
        /* A back-end's node has finished: nothing is left for the kicker
         * to run, and its thread ends while the application sees the
         * close (tbon_net_destroy joins it). */
        if (net->kicker && net->node && tb_node_stopped(net->node))
            tb_kicker_quit(net->kicker);
        break;
    case TB_NODE_MISSING: {
        /* Kept in rank order (tbon_fe_missing). */
        tbon_rank_t r = (tbon_rank_t)code;
        tb_fe_status_note(net, r, -1);
        if (!net->first_missing[0] && msg)
            snprintf(net->first_missing, sizeof net->first_missing, "%s", msg);
        if (TB_ARRAY_ROOM(net->missing, net->nmissing, net->capmissing, 16))
            break;
        size_t k = net->nmissing;
        while (k > 0 && net->missing[k - 1] > r)
            k--;
        if (k > 0 && net->missing[k - 1] == r)
            break;
        memmove(net->missing + k + 1, net->missing + k, (net->nmissing - k) * sizeof r);
        net->missing[k] = r;
        net->nmissing++;
        break;
    }
    case TB_NODE_STREAM_ERROR: {
        if (code == 0 && net->loading && !strncmp(msg, "filter ", 7)) {
            /* a node's failed load, for the tbon_fe_load_filter that waits */
            char **v = realloc(net->lerr, (net->nlerr + 1) * sizeof *v);
            char *m = strdup(msg);
            if (v && m) {
                net->lerr = v;
                v[net->nlerr++] = m;
                break;
            }
            if (v)
                net->lerr = v;
            free(m);
        }
        tbon_stream_t *s = tb_net_stream_locked(net, (uint32_t)code, 0);
        if (s)
            s->error = 1;
        net->any_error = 1;
        snprintf(net->error_msg, sizeof net->error_msg, "%s", msg);
        break;
    }
    }
    tb_net_fd_sync(net);
    pthread_cond_broadcast(&net->cond);
    pthread_mutex_unlock(&net->mu);
}

static void cb_progress(void *arg, size_t ready, size_t total)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    net->prog_ready = ready;
    net->prog_total = total;
    pthread_cond_broadcast(&net->cond);
    pthread_mutex_unlock(&net->mu);
}

TB_HOT static int cb_app_full(void *arg)
{
    tbon_net_t *net = arg;
    /* Only this thread adds to app_bytes (cb_deliver): below the mark now,
     * it stays below until this thread adds more. Above it, want_resume is
     * set under mu, or a drain in between (maybe_resume) could miss it. */
    if (atomic_load_explicit(&net->app_bytes, memory_order_relaxed) <= TB_APP_HIGH)
        return 0;
    pthread_mutex_lock(&net->mu);
    int full = net->app_bytes > TB_APP_HIGH;
    if (full)
        atomic_store(&net->want_resume, 1);
    pthread_mutex_unlock(&net->mu);
    return full;
}

/* FE: an attribute entry from src (the node checked src is alive). */
static void cb_attr(void *arg, tbon_rank_t src, const char *key, const char *value,
                    uint64_t version)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    tb_attrs_t *a = tb_net_replica(net, src, 1);
    if (a && tb_attrs_apply(a, key, value, version) == 1)
        tb_net_attrs_changed_locked(net, src);
    pthread_mutex_unlock(&net->mu);
}

/* A failure or adoption (FE): the application's topology follows it, and
 * tbon_net_next_event hands it out. */
static void cb_event(void *arg, const tbon_event_t *ev)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    tb_fe_status_note(net, ev->rank, (int)ev->type);
    if (ev->type == TBON_EV_NODE_ADOPTED && ev->parent == 0 && net->nrwait) {
        /* A child of the old FE, adopted by us: the reattach's own work
         * (tbon_fe_reattach waits for it), not news for the application. */
        for (size_t i = 0; i < net->nrwait; i++)
            if (net->rwait[i] == ev->rank) {
                net->rwait[i] = net->rwait[--net->nrwait];
                tb_report_adoption(net->topo, ev->rank, ev->parent, ev->incarnation);
                pthread_cond_broadcast(&net->cond);
                pthread_mutex_unlock(&net->mu);
                return;
            }
    }
    if (ev->type == TBON_EV_NODE_JOINED && net->bcast &&
        tb_topology_role(net->topo, ev->rank) == TB_ROLE_BE) {
        /* Streams made on the broadcast communicator from now on reach it
         * too (those made before take it in at its parent); a restarted
         * back-end is there already. */
        size_t k = 0;
        while (k < net->bcast->n && net->bcast->ranks[k] != ev->rank)
            k++;
        tbon_rank_t *v = k < net->bcast->n ? NULL
                         : realloc(net->bcast->ranks, (net->bcast->n + 1) * sizeof *v);
        if (v) {
            v[net->bcast->n++] = ev->rank;
            net->bcast->ranks = v;
        }
    }
    if (ev->type == TBON_EV_NODE_FAILED || ev->type == TBON_EV_NODE_LEFT) {
        tb_report_failure(net->topo, ev->rank, ev->incarnation);
        /* Seed 002: a node's attributes are valid while it is alive. */
        if (ev->rank < net->nrep && net->rep[ev->rank]) {
            tb_attrs_destroy(net->rep[ev->rank]);
            net->rep[ev->rank] = NULL;
            tb_net_attrs_changed_locked(net, ev->rank);
        }
    }
    else if (ev->type == TBON_EV_NODE_ADOPTED)
        tb_report_adoption(net->topo, ev->rank, ev->parent, ev->incarnation);
    if (!net->events.size)
        tb_ring_init(&net->events, sizeof(tbon_event_t));
    tbon_event_t *e = tb_ring_push(&net->events);
    if (e)
        *e = *ev;
    tb_net_fd_sync(net);
    /* tbon_net_next_event's waiters; and tbon_fe_perf's, while one runs
     * (it waits for adoptions on net->cond). No other call waits on
     * net->cond for the topology (the attributes' waiters are woken by
     * tb_net_attrs_changed_locked), and a receiver woken for every event
     * of a recovery found nothing new each time. */
    if (net->perf_first)
        pthread_cond_broadcast(&net->cond);
    pthread_cond_broadcast(&net->ev_cond);
    pthread_mutex_unlock(&net->mu);
}

/* A view version the node applied: the application's copy follows it (at
 * the FE the events already did, and applying a report twice changes
 * nothing). */
/* A back-end that asked for them: the view's changes as events (under
 * net->mu). How many were queued. */
static size_t be_events(tbon_net_t *net, uint64_t version, const tb_vchange_t *ch, size_t n)
{
    size_t queued = 0;
    if (!net->events.size)
        tb_ring_init(&net->events, sizeof(tbon_event_t));
    for (size_t i = 0; i < n; i++) {
        const tb_vchange_t *c = &ch[i];
        int type = c->kind == TB_V_FAILED ? TBON_EV_NODE_FAILED
                   : c->kind == TB_V_ADOPTED ? TBON_EV_NODE_ADOPTED
                   : c->kind == TB_V_JOINED ? TBON_EV_NODE_JOINED
                   : c->kind == TB_V_LEFT ? TBON_EV_NODE_LEFT : -1;
        tbon_event_t *e = type >= 0 ? tb_ring_push(&net->events) : NULL;
        if (!e)
            continue;
        *e = (tbon_event_t){ .type = (tbon_event_type_t)type, .rank = c->rank,
                             .parent = c->parent, .incarnation = c->inc,
                             .view_version = version };
        queued++;
    }
    return queued;
}

static void cb_view(void *arg, uint64_t version, const tb_vchange_t *ch, size_t n)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    for (size_t i = 0; i < n; i++) {
        const tb_vchange_t *c = &ch[i];
        if (c->kind == TB_V_FAILED || c->kind == TB_V_LEFT)
            tb_report_failure(net->topo, c->rank, c->inc);
        else if (c->kind == TB_V_ADOPTED)
            tb_report_adoption(net->topo, c->rank, c->parent, c->inc);
        else if (c->kind == TB_V_JOIN || c->kind == TB_V_JOIN_CN)
            tb_report_join(net->topo, c->kind == TB_V_JOIN ? TB_ROLE_BE : TB_ROLE_COMMNODE,
                           c->rank, c->parent, c->host, c->lid, c->inc);
    }
    net->view_version = version;
    if (!net->is_fe && net->be_events && be_events(net, version, ch, n)) {
        tb_net_fd_sync(net);
        pthread_cond_broadcast(&net->ev_cond);
    }
    pthread_mutex_unlock(&net->mu);     /* else nobody waits for a view: no wake-up */
}

/* The answer to one of our pings: kept for the caller waiting for it. */
static void cb_pong(void *arg, uint64_t id, const uint32_t *route, size_t n)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    if (!net->pong) {               /* (made by tbon_net_ping; a stray answer) */
        pthread_mutex_unlock(&net->mu);
        return;
    }
    struct tb_pong *p = &net->pong[net->pong_next++ % TB_NET_PONGS];
    p->id = id;
    p->n = n < TB_NET_PING_ROUTE ? n : TB_NET_PING_ROUTE;
    memcpy(p->route, route, p->n * sizeof *route);
    pthread_cond_broadcast(&net->cond);
    pthread_mutex_unlock(&net->mu);
}

/* A back-end: the FE said view version is stable. */
static void cb_stable(void *arg, uint64_t version)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    if (!net->is_fe && net->be_events) {
        if (!net->events.size)
            tb_ring_init(&net->events, sizeof(tbon_event_t));
        tbon_event_t *e = tb_ring_push(&net->events);
        if (e) {
            *e = (tbon_event_t){ .type = TBON_EV_VIEW_STABLE, .rank = TBON_RANK_NONE,
                                 .parent = TBON_RANK_NONE, .view_version = version };
            tb_net_fd_sync(net);
            pthread_cond_broadcast(&net->ev_cond);
        }
    }
    pthread_mutex_unlock(&net->mu);
}

static tbon_rank_t *dup_ranks(const tbon_rank_t *r, size_t n)
{
    tbon_rank_t *v = malloc((n ? n : 1) * sizeof *v);
    if (v && n)
        memcpy(v, r, n * sizeof *v);
    return v;
}

/* FE: a consistency check came back. */
static void cb_checked(void *arg, uint64_t id, const tbon_rank_t *agree, size_t nagree,
                       const tbon_rank_t *bad, size_t nbad)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    if (id == net->chk_next) {
        free(net->chk_agree);
        free(net->chk_bad);
        net->chk_agree = dup_ranks(agree, nagree);
        net->chk_bad = dup_ranks(bad, nbad);
        net->chk_nagree = net->chk_agree ? nagree : 0;
        net->chk_nbad = net->chk_bad ? nbad : 0;
        net->chk_done = id;
        pthread_cond_broadcast(&net->cond);
    }
    pthread_mutex_unlock(&net->mu);
}

/* FE: a stream that came with a child's graft (a reattached FE). */
static void cb_stream_found(void *arg, uint32_t id)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    if (tb_net_stream_locked(net, id, 1) && id >= net->next_stream)
        net->next_stream = id + 1;
    pthread_mutex_unlock(&net->mu);
}

/* A message from another process: queued for tbon_net_recv_direct. */
static void cb_direct(void *arg, tbon_rank_t from, tbon_packet_t *p)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    tb_dmsg_t *m = tb_ring_push(&net->direct);
    if (m) {
        *m = (tb_dmsg_t){ from, p };
        atomic_fetch_add(&net->direct_bytes, tb_net_pkt_size(p));
    } else {
        tbon_packet_unref(p);
    }
    tb_net_fd_sync(net);
    pthread_cond_broadcast(&net->cond);
    pthread_mutex_unlock(&net->mu);
}

/* Whether the messages not yet taken are over the mark (the node then
 * keeps the next ones back until tbon_net_recv_direct drains them). */
static int cb_direct_full(void *arg)
{
    tbon_net_t *net = arg;
    /* Only this thread adds (cb_direct): below the mark now, it stays so
     * until this thread adds more (as cb_app_full). */
    if (atomic_load_explicit(&net->direct_bytes, memory_order_relaxed) <= TB_APP_HIGH)
        return 0;
    pthread_mutex_lock(&net->mu);
    int full = atomic_load(&net->direct_bytes) > TB_APP_HIGH;
    if (full)
        net->direct_resume = 1;
    pthread_mutex_unlock(&net->mu);
    return full;
}

/* FE: records of a performance gathering (node_perf.c) into the running
 * call's collection; a node that answers again replaces its records. */
static void perf_take(struct tb_perf_acc *a, const tb_ctl_perf_data_t *d)
{
    for (size_t i = 0; i + d->nw <= d->nnode; i += d->nw) {
        uint64_t r = d->node[i + TB_PERF_N_RANK];
        if (r >= a->n)
            continue;       /* (joined after the call began) */
        if (a->got[r]) {    /* its streams' older records go */
            size_t k = 0;
            for (size_t j = 0; j < a->nstrm; j++)
                if (a->strm[j * TB_PERF_SW + TB_PERF_S_RANK] != r)
                    memmove(a->strm + k++ * TB_PERF_SW, a->strm + j * TB_PERF_SW,
                            TB_PERF_SW * sizeof *a->strm);
            a->nstrm = k;
        } else {
            a->got[r] = 1;
            a->nanswered++;
        }
        memcpy(a->node + r * TB_PERF_NW, d->node + i, TB_PERF_NW * sizeof *a->node);
    }
    size_t k = d->nstrm / d->sw;
    if (a->nstrm + k > a->capstrm) {
        size_t cap = a->capstrm ? a->capstrm : 64;
        while (cap < a->nstrm + k)
            cap *= 2;
        uint64_t *v = realloc(a->strm, cap * TB_PERF_SW * sizeof *v);
        if (!v)
            return;
        a->strm = v;
        a->capstrm = cap;
    }
    for (size_t j = 0; j < k; j++)
        if (d->strm[j * d->sw + TB_PERF_S_RANK] < a->n)
            memcpy(a->strm + a->nstrm++ * TB_PERF_SW, d->strm + j * d->sw,
                   TB_PERF_SW * sizeof *a->strm);
}

static void cb_perf(void *arg, const tb_ctl_perf_data_t *d, int done)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    if (net->perf_first && net->perf_acc && d->id >= net->perf_first) {
        perf_take(net->perf_acc, d);
        if (done && d->id > net->perf_done)
            net->perf_done = d->id;
        pthread_cond_broadcast(&net->cond);
    }
    pthread_mutex_unlock(&net->mu);
}

tb_node_cbs_t tb_net_callbacks(tbon_net_t *net)
{
    return (tb_node_cbs_t){ .arg = net, .deliver = cb_deliver, .wave_error = cb_wave_error,
                            .status = cb_status,
                            .progress = cb_progress, .app_full = cb_app_full,
                            .event = cb_event, .kick = net->inline_node ? tb_net_kick : NULL,
                            .arm = net->inline_node ? tb_net_arm : NULL,
                            .view = cb_view, .stable = cb_stable, .pong = cb_pong, .checked = cb_checked, .attr = cb_attr,
                            .stream_found = cb_stream_found, .direct = cb_direct,
                            .direct_full = cb_direct_full, .perf = cb_perf };
}

