/* net.c - the calls front-ends and back-ends share: receiving (from the
 * queues the reactor fills), sending (commands to the reactor), ranks */
#include "api/net_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/error.h"
#include "util/log.h"
#include <unistd.h>
#include "util/attrs.h"
#include "codec/packet_int.h"
#include "topo/reconfig.h"

static __thread char tls_error[512];

/* Back-end networks not yet destroyed in this process (see be_watchdog). */
static atomic_int live_be_nets;

/* DESIGN.md, "Processes": when the front-end is gone, every process of the
 * session exits within a second. A back-end application hears TBON_ECLOSED;
 * if it has not left by then (busy elsewhere, or ignoring it), the process
 * ends here rather than linger as a stray. */
static void *be_watchdog(void *arg)
{
    (void)arg;
    struct timespec ts = { .tv_sec = 0, .tv_nsec = 900 * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
    if (atomic_load(&live_be_nets) > 0) {
        TB_WARN("session", "the session is gone and the application did not leave; exiting");
        _exit(1);
    }
    return NULL;
}

int tb_net_seterr(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_error, sizeof tls_error, fmt, ap);
    va_end(ap);
    return code;
}

const char *tbon_net_error(const tbon_net_t *net)
{
    (void)net;
    return tls_error;
}

static size_t pkt_size(const tbon_packet_t *p)
{
    size_t len;
    tb_packet_payload(p, &len);
    return len + 64;
}

tbon_net_t *tb_net_alloc(int is_fe)
{
    tbon_net_t *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->is_fe = is_fe;
    if (!is_fe)
        atomic_fetch_add(&live_be_nets, 1);
    pthread_mutex_init(&n->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&n->cond, &ca);
    pthread_condattr_destroy(&ca);
    n->next_stream = 1;
    n->next_filter = TBON_FILTER_BUILTIN_COUNT;
    n->view_version = 1;      /* the tree as it started (node_view.c) */
    return n;
}

tbon_stream_t *tb_net_stream_locked(tbon_net_t *net, uint32_t id, int create)
{
    if (id < net->nstreams && net->streams[id])
        return net->streams[id];
    if (!create || id == 0 || id > (1u << 24))
        return NULL;
    if (id >= net->nstreams) {
        size_t nc = net->nstreams ? net->nstreams : 16;
        while (nc <= id)
            nc *= 2;
        tbon_stream_t **ns = realloc(net->streams, nc * sizeof *ns);
        if (!ns)
            return NULL;
        memset(ns + net->nstreams, 0, (nc - net->nstreams) * sizeof *ns);
        net->streams = ns;
        net->nstreams = nc;
    }
    tbon_stream_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->net = net;
    s->id = id;
    tb_ring_init(&s->q, sizeof(tb_dent_t));
    net->streams[id] = s;
    return s;
}

/* ---- node callbacks (reactor thread) ----
 * Run by whichever thread drives the node (for a back-end, the application's
 * or the EDS's in cb_kick); cb_status also by the EDS thread directly
 * (tb_node_parent_gone). Each takes net->mu for what it touches. */

static void cb_deliver(void *arg, uint32_t stream, tbon_packet_t *p, uint64_t q)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    tbon_stream_t *s = tb_net_stream_locked(net, stream, !net->is_fe);
    if (!s) {
        pthread_mutex_unlock(&net->mu);
        tbon_packet_unref(p);
        return;
    }
    tb_dent_t *e = tb_ring_push(&s->q);
    if (!e) {
        pthread_mutex_unlock(&net->mu);
        tbon_packet_unref(p);
        return;
    }
    *e = (tb_dent_t){ p, ++net->seq, q };
    net->app_bytes += pkt_size(p);
    pthread_cond_broadcast(&net->cond);
    pthread_mutex_unlock(&net->mu);
}

static void cb_status(void *arg, int what, int code, const char *msg)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    switch (what) {
    case TB_NODE_READY:
        net->ready = 1;
        break;
    case TB_NODE_FAILED:
        if (!net->failed) {
            net->failed = 1;
            net->fail_code = code;
            snprintf(net->fail_msg, sizeof net->fail_msg, "%s", msg);
        }
        break;
    case TB_NODE_CLOSED:
        if (!net->closed && !net->is_fe && code != 0) {
            pthread_t t;
            if (pthread_create(&t, NULL, be_watchdog, NULL) == 0)
                pthread_detach(t);
        }
        net->closed = 1;
        break;
    case TB_NODE_STREAM_ERROR: {
        tbon_stream_t *s = tb_net_stream_locked(net, (uint32_t)code, 0);
        if (s)
            s->error = 1;
        net->any_error = 1;
        snprintf(net->error_msg, sizeof net->error_msg, "%s", msg);
        break;
    }
    }
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

static int cb_app_full(void *arg)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    int full = net->app_bytes > TB_APP_HIGH;
    if (full)
        atomic_store(&net->want_resume, 1);
    pthread_mutex_unlock(&net->mu);
    return full;
}

static void cb_kick(void *arg);

/* FE: the replica of rank r's attributes, made if make (under net->mu). */
static tb_attrs_t *replica(tbon_net_t *net, tbon_rank_t r, int make)
{
    if (r >= net->nrep) {
        if (!make)
            return NULL;
        size_t nc = net->nrep ? net->nrep : 64;
        while (nc <= r)
            nc *= 2;
        tb_attrs_t **nv = realloc(net->rep, nc * sizeof *nv);
        if (!nv)
            return NULL;
        net->rep = nv;
        uint8_t *nchg = realloc(net->chg, nc);
        if (!nchg)
            return NULL;
        net->chg = nchg;
        memset(net->rep + net->nrep, 0, (nc - net->nrep) * sizeof *nv);
        memset(net->chg + net->nrep, 0, nc - net->nrep);
        net->nrep = nc;
    }
    if (!net->rep[r] && make)
        net->rep[r] = tb_attrs_new();
    return net->rep[r];
}

static void attrs_changed_locked(tbon_net_t *net, tbon_rank_t r)
{
    if (r < net->nrep && !net->chg[r]) {
        net->chg[r] = 1;
        net->nchg++;
    }
    pthread_cond_broadcast(&net->cond);
}

/* FE: an attribute entry from src (the node checked src is alive). */
static void cb_attr(void *arg, tbon_rank_t src, const char *key, const char *value,
                    uint64_t version)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    tb_attrs_t *a = replica(net, src, 1);
    if (a && tb_attrs_apply(a, key, value, version) == 1)
        attrs_changed_locked(net, src);
    pthread_mutex_unlock(&net->mu);
}

/* A failure or adoption (FE): the application's topology follows it, and
 * tbon_net_next_event hands it out. */
static void cb_event(void *arg, const tbon_event_t *ev)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
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
            tb_attrs_free(net->rep[ev->rank]);
            net->rep[ev->rank] = NULL;
            attrs_changed_locked(net, ev->rank);
        }
    }
    else if (ev->type == TBON_EV_NODE_ADOPTED)
        tb_report_adoption(net->topo, ev->rank, ev->parent, ev->incarnation);
    if (!net->events.size)
        tb_ring_init(&net->events, sizeof(tbon_event_t));
    tbon_event_t *e = tb_ring_push(&net->events);
    if (e)
        *e = *ev;
    pthread_cond_broadcast(&net->cond);
    pthread_mutex_unlock(&net->mu);
}

/* A view version the node applied: the application's copy follows it (at
 * the FE the events already did, and applying a report twice changes
 * nothing). */
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
    pthread_cond_broadcast(&net->cond);
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

tb_node_cbs_t tb_net_callbacks(tbon_net_t *net)
{
    return (tb_node_cbs_t){ .arg = net, .deliver = cb_deliver, .status = cb_status,
                            .progress = cb_progress, .app_full = cb_app_full,
                            .event = cb_event, .kick = net->inline_node ? cb_kick : NULL,
                            .view = cb_view, .checked = cb_checked, .attr = cb_attr };
}

/* ---- receiving ---- */

static int wait_until(tbon_net_t *net, const struct timespec *abs)
{
    if (!abs) {
        pthread_cond_wait(&net->cond, &net->mu);
        return 0;
    }
    return pthread_cond_timedwait(&net->cond, &net->mu, abs);
}

static struct timespec *deadline_of(int timeout_ms, struct timespec *ts)
{
    if (timeout_ms < 0)
        return NULL;
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += timeout_ms / 1000;
    ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
    return ts;
}

static uint64_t head_seq(const tbon_stream_t *s)
{
    return ((const tb_dent_t *)tb_ring_at(&s->q, 0))->seq;
}

static tbon_packet_t *pop_locked(tbon_net_t *net, tbon_stream_t *s)
{
    tb_dent_t *e = tb_ring_at(&s->q, 0);
    tbon_packet_t *p = e->pkt;
    if (e->q > s->epoch) {
        s->epoch = e->q;
        s->idx = 0;
    }
    tb_ring_drop(&s->q);
    net->app_bytes -= pkt_size(p);
    return p;
}

/* After taking packets: let the reactor read again once the queue drained. */
static void maybe_resume(tbon_net_t *net)
{
    if (atomic_load(&net->want_resume) && net->app_bytes < TB_APP_LOW) {
        atomic_store(&net->want_resume, 0);
        tb_cmd_t *c = tb_cmd_resume();
        if (c)
            tb_node_post(net->node, c);
    }
}

/* ms left until abs (NULL: -1 = no limit). */
static int ms_left(const struct timespec *abs)
{
    if (!abs)
        return -1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long ms = (long long)(abs->tv_sec - now.tv_sec) * 1000 +
                   (abs->tv_nsec - now.tv_nsec) / 1000000;
    return ms < 0 ? 0 : ms > 1000000000 ? 1000000000 : (int)ms;
}

/* Let go of an inline node (with net->mu held): first run what other
 * threads posted while we drove it, so nothing waits for the next call. */
static void release(tbon_net_t *net)
{
    while (tb_node_has_posted(net->node) && !tb_node_stopped(net->node)) {
        pthread_mutex_unlock(&net->mu);
        tb_node_step(net->node, 0);
        pthread_mutex_lock(&net->mu);
    }
    net->driving = 0;
    /* Nobody drives it now: the EDS kicks it when something arrives
     * (armed only now, or a kick could find it still driven and be lost). */
    tb_node_arm(net->node, 1);
    pthread_cond_broadcast(&net->cond);
}

/* Drive an inline node for one turn (called with net->mu held and nobody
 * driving; returns with it held). Back-ends have no reactor thread: the
 * thread that waits for data reads it itself, so a request costs the
 * back-end one wake-up, not three (DESIGN.md, changed here: see
 * docs/protocol.md 7.4 and the user guide). */
static void drive(tbon_net_t *net, int timeout_ms)
{
    net->driving = 1;
    if (timeout_ms != 0)
        tb_node_arm(net->node, 0);     /* we wait on it ourselves */
    pthread_mutex_unlock(&net->mu);
    tb_node_step(net->node, timeout_ms);
    pthread_mutex_lock(&net->mu);
    release(net);
}

/* Take the node to run a command now, or post it if another thread drives
 * it (under net->mu, so the driver sees it before it lets go: release). */
static void exec_or_post(tbon_net_t *net, tb_cmd_t *c)
{
    pthread_mutex_lock(&net->mu);
    if (net->driving) {
        tb_node_post(net->node, c);
        pthread_mutex_unlock(&net->mu);
        return;
    }
    net->driving = 1;
    pthread_mutex_unlock(&net->mu);
    c->bytes = 0;   /* never counted as pending: it is carried out now */
    tb_node_exec(net->node, c);
    /* Back-pressure: while the way up is full, wait for it here. */
    while (tb_node_backlog(net->node) > TB_APP_HIGH && !tb_node_stopped(net->node))
        tb_node_step(net->node, -1);
    pthread_mutex_lock(&net->mu);
    release(net);
    pthread_mutex_unlock(&net->mu);
}

/* The EDS thread queued work for a node nobody may be driving (a back-end
 * whose application is busy elsewhere): run it now unless someone drives. */
static void cb_kick(void *arg)
{
    tbon_net_t *net = arg;
    pthread_mutex_lock(&net->mu);
    if (net->node && !net->driving && !tb_node_stopped(net->node)) {
        net->driving = 1;
        pthread_mutex_unlock(&net->mu);
        tb_node_step(net->node, 0);
        pthread_mutex_lock(&net->mu);
        release(net);
    }
    pthread_mutex_unlock(&net->mu);
}

static int recv_common(tbon_net_t *net, tbon_stream_t *only, tbon_packet_t **pkt,
                       tbon_stream_t **sout, int timeout_ms)
{
    if (!net || !pkt)
        return tb_net_seterr(TBON_EINVAL, "NULL argument");
    *pkt = NULL;            /* nothing received unless 0 is returned */
    struct timespec ts, *abs = deadline_of(timeout_ms, &ts);
    int turned = 0;
    pthread_mutex_lock(&net->mu);
    for (;;) {
        tbon_stream_t *best = NULL;
        if (only) {
            if (only->q.len)
                best = only;
        } else {
            for (size_t i = 0; i < net->nstreams; i++) {
                tbon_stream_t *s = net->streams[i];
                if (s && s->q.len && (!best || head_seq(s) < head_seq(best)))
                    best = s;
            }
        }
        if (best) {
            *pkt = pop_locked(net, best);
            if (sout)
                *sout = best;
            maybe_resume(net);
            pthread_mutex_unlock(&net->mu);
            return 0;
        }
        if ((only && only->error) || (!only && net->any_error)) {
            if (only)
                only->error = 0;
            else {
                net->any_error = 0;
                for (size_t i = 0; i < net->nstreams; i++)
                    if (net->streams[i])
                        net->streams[i]->error = 0;
            }
            tb_net_seterr(TBON_EFILTER, "%s", net->error_msg);
            pthread_mutex_unlock(&net->mu);
            return TBON_EFILTER;
        }
        if (net->closed) {
            pthread_mutex_unlock(&net->mu);
            return tb_net_seterr(TBON_ECLOSED, "the network has shut down");
        }
        if (net->inline_node && !net->driving && !tb_node_stopped(net->node)) {
            int left = ms_left(abs);
            if (turned && left == 0)
                break;
            drive(net, left);
            turned = 1;
            continue;
        }
        if (timeout_ms == 0 || wait_until(net, abs) != 0) {
            pthread_mutex_unlock(&net->mu);
            return tb_net_seterr(TBON_ETIMEOUT, "nothing received within %d ms", timeout_ms);
        }
    }
    pthread_mutex_unlock(&net->mu);
    return tb_net_seterr(TBON_ETIMEOUT, "nothing received within %d ms", timeout_ms);
}

int tbon_net_recv(tbon_net_t *net, tbon_packet_t **pkt, tbon_stream_t **s, int timeout_ms)
{
    return recv_common(net, NULL, pkt, s, timeout_ms);
}

int tbon_stream_recv(tbon_stream_t *s, tbon_packet_t **pkt, int timeout_ms)
{
    if (!s)
        return tb_net_seterr(TBON_EINVAL, "NULL stream");
    return recv_common(s->net, s, pkt, NULL, timeout_ms);
}

/* ---- sending ---- */

int tbon_stream_send_packet(tbon_stream_t *s, tbon_packet_t *p)
{
    if (!s || !p)
        return tb_net_seterr(TBON_EINVAL, "NULL argument");
    tbon_net_t *net = s->net;
    if (!net->inline_node && tb_node_wait_backlog(net->node, 0))
        return tb_net_seterr(TBON_ECLOSED, "the network has shut down");
    if (net->inline_node && tb_node_stopped(net->node))
        return tb_net_seterr(TBON_ECLOSED, "the network has shut down");
    tb_cmd_t *c = tb_cmd_send(s->id, tbon_packet_ref(p), 0, pkt_size(p));
    if (!c)
        return tb_net_seterr(TBON_ENOMEM, "out of memory");
    pthread_mutex_lock(&net->mu);
    c->u.send.key = (s->epoch << 24) | s->idx;     /* the wave key, in send order */
    if (s->idx < 0xffffff)
        s->idx++;
    pthread_mutex_unlock(&net->mu);
    if (net->inline_node)
        exec_or_post(net, c);
    else
        tb_node_post(net->node, c);
    return 0;
}

int tbon_stream_send(tbon_stream_t *s, int tag, const char *fmt, ...)
{
    if (!s || !fmt)
        return tb_net_seterr(TBON_EINVAL, "NULL argument");
    va_list ap;
    va_start(ap, fmt);
    tbon_error_t err;
    tbon_packet_t *p = tb_packet_vcreate(tag, fmt, ap, &err);
    va_end(ap);
    if (!p)
        return tb_net_seterr(err.code, "%s", err.msg);
    int rc = tbon_stream_send_packet(s, p);
    tbon_packet_unref(p);
    return rc;
}

int tbon_stream_flush(tbon_stream_t *s)
{
    if (!s)
        return tb_net_seterr(TBON_EINVAL, "NULL stream");
    tbon_net_t *net = s->net;
    if (!net->inline_node)
        return tb_node_wait_backlog(net->node, 1);
    pthread_mutex_lock(&net->mu);
    while (tb_node_backlog(net->node) > 0 && !tb_node_stopped(net->node)) {
        if (net->driving)
            wait_until(net, NULL);
        else
            drive(net, -1);
    }
    pthread_mutex_unlock(&net->mu);
    return 0;
}

uint32_t tbon_stream_id(const tbon_stream_t *s)
{
    return s ? s->id : 0;
}

/* ---- ranks and events ---- */

tbon_rank_t tbon_net_rank(const tbon_net_t *net)
{
    return net ? net->rank : TBON_RANK_NONE;
}

int tbon_net_backends(tbon_net_t *net, tbon_rank_t *out, size_t cap)
{
    if (!net)
        return tb_net_seterr(TBON_EINVAL, "NULL network");
    /* Under mu: the node's callbacks apply failures and joins to net->topo. */
    pthread_mutex_lock(&net->mu);
    size_t n = 0, size = tb_topology_size(net->topo);
    for (tbon_rank_t r = 0; r < size; r++) {
        if (tb_topology_role(net->topo, r) != TB_ROLE_BE || !tb_topology_alive(net->topo, r))
            continue;
        if (out && n < cap)
            out[n] = r;
        n++;
    }
    pthread_mutex_unlock(&net->mu);
    return (int)n;
}

int tbon_fe_cut_off(tbon_net_t *net, tbon_rank_t *out, size_t cap)
{
    if (!net || (cap && !out))
        return tb_net_seterr(TBON_EINVAL, "tbon_fe_cut_off needs a network and room for ranks");
    pthread_mutex_lock(&net->mu);
    size_t n = 0, size = tb_topology_size(net->topo);
    for (tbon_rank_t r = 1; r < size; r++) {
        if (tb_topology_role(net->topo, r) != TB_ROLE_BE || !tb_topology_alive(net->topo, r) ||
            tb_topology_root_of(net->topo, r) == 0)
            continue;
        if (n < cap)
            out[n] = r;
        n++;
    }
    pthread_mutex_unlock(&net->mu);
    return (int)n;
}

size_t tbon_net_num_backends(tbon_net_t *net)
{
    int n = tbon_net_backends(net, NULL, 0);
    return n < 0 ? 0 : (size_t)n;
}

uint64_t tbon_net_view_version(tbon_net_t *net)
{
    if (!net)
        return 0;
    pthread_mutex_lock(&net->mu);
    uint64_t v = net->view_version;
    pthread_mutex_unlock(&net->mu);
    return v;
}

int tbon_net_view(tbon_net_t *net, tbon_rank_t *ranks, size_t cap)
{
    if (!net || (cap && !ranks))
        return tb_net_seterr(TBON_EINVAL, "tbon_net_view needs a network and room for ranks");
    pthread_mutex_lock(&net->mu);
    size_t n = 0, size = tb_topology_size(net->topo);
    for (tbon_rank_t r = 0; r < size; r++) {
        if (!tb_topology_alive(net->topo, r))
            continue;
        if (n < cap)
            ranks[n] = r;
        n++;
    }
    pthread_mutex_unlock(&net->mu);
    return (int)n;
}

static void note_rank(tbon_rank_t *v, size_t cap, size_t *n, tbon_rank_t r)
{
    if (*n < cap)
        v[*n] = r;
    (*n)++;
}

static int cmp_rank(const void *a, const void *b)
{
    tbon_rank_t x = *(const tbon_rank_t *)a, y = *(const tbon_rank_t *)b;
    return x < y ? -1 : x > y;
}

int tbon_fe_check_views(tbon_net_t *net, tbon_view_check_t *out, int timeout_ms)
{
    if (!net || !net->is_fe || !out)
        return tb_net_seterr(TBON_EINVAL, "tbon_fe_check_views needs a front-end network and a result");
    memset(out, 0, sizeof *out);
    struct timespec ts, *abs = deadline_of(timeout_ms, &ts);
    pthread_mutex_lock(&net->mu);
    uint64_t id = net->chk_next + 1;
    tb_cmd_t *c = tb_cmd_check(id);
    if (!c) {
        pthread_mutex_unlock(&net->mu);
        return tb_net_seterr(TBON_ENOMEM, "out of memory");
    }
    net->chk_next = id;
    tb_node_post(net->node, c);
    int rc = 0;
    while (net->chk_done != id && !net->closed && rc == 0)
        rc = timeout_ms == 0 ? TBON_ETIMEOUT : wait_until(net, abs);
    if (net->chk_done != id) {
        int closed = net->closed;
        pthread_mutex_unlock(&net->mu);
        if (closed)
            return tb_net_seterr(TBON_ECLOSED, "the network has shut down");
        return tb_net_seterr(TBON_ETIMEOUT, "not every node answered the check within %d ms",
                             timeout_ms);
    }
    /* Every live node of our view should have answered and agreed. */
    out->view_version = net->view_version;
    qsort(net->chk_agree, net->chk_nagree, sizeof *net->chk_agree, cmp_rank);
    qsort(net->chk_bad, net->chk_nbad, sizeof *net->chk_bad, cmp_rank);
    const size_t cap = sizeof out->disagree / sizeof out->disagree[0];
    for (size_t i = 0; i < net->chk_nbad; i++)
        note_rank(out->disagree, cap, &out->ndisagree, net->chk_bad[i]);
    out->agree = net->chk_nagree;
    size_t size = tb_topology_size(net->topo), ia = 0, ib = 0;
    for (tbon_rank_t r = 0; r < size; r++) {
        if (!tb_topology_alive(net->topo, r))
            continue;
        out->nodes++;
        while (ia < net->chk_nagree && net->chk_agree[ia] < r)
            ia++;
        while (ib < net->chk_nbad && net->chk_bad[ib] < r)
            ib++;
        if ((ia == net->chk_nagree || net->chk_agree[ia] != r) &&
            (ib == net->chk_nbad || net->chk_bad[ib] != r))
            note_rank(out->missing, cap, &out->nmissing, r);
    }
    pthread_mutex_unlock(&net->mu);
    if (out->ndisagree || out->nmissing)
        return tb_net_seterr(TBON_ETOPOLOGY, "%zu of %zu live nodes disagree with the front-end's "
                             "view and topology, %zu did not answer", out->ndisagree, out->nodes,
                             out->nmissing);
    return 0;
}

int tbon_net_set_attr(tbon_net_t *net, const char *key, const char *value)
{
    if (!net)
        return tb_net_seterr(TBON_EINVAL, "NULL network");
    if (tb_attrs_check(key, value) != 0)
        return tb_net_seterr(TBON_EINVAL, "an attribute key is 1 to %u bytes, a value at most %u",
                             TB_ATTR_KEY_MAX, TB_ATTR_VALUE_MAX);
    if (net->is_fe) {
        /* The FE's own map is its replica of itself: nothing travels. */
        pthread_mutex_lock(&net->mu);
        tb_attrs_t *a = replica(net, 0, 1);
        int ok = a && tb_attrs_set(a, key, value) != 0;
        if (ok)
            attrs_changed_locked(net, 0);
        pthread_mutex_unlock(&net->mu);
        return ok ? 0 : tb_net_seterr(TBON_ENOMEM, "out of memory");
    }
    tb_cmd_t *c = tb_cmd_attr(key, value);
    if (!c)
        return tb_net_seterr(TBON_ENOMEM, "out of memory");
    pthread_mutex_lock(&net->mu);
    int closed = net->closed;
    pthread_mutex_unlock(&net->mu);
    if (closed) {
        tb_cmd_free(c);
        return tb_net_seterr(TBON_ECLOSED, "the network has shut down");
    }
    exec_or_post(net, c);
    return 0;
}

int tbon_fe_get_attr(tbon_net_t *net, tbon_rank_t rank, const char *key, char *buf, size_t cap)
{
    if (!net || !net->is_fe || !key || (cap && !buf))
        return tb_net_seterr(TBON_EINVAL, "tbon_fe_get_attr needs a front-end network, a key and "
                             "a buffer");
    pthread_mutex_lock(&net->mu);
    const char *v = tb_attrs_get(replica(net, rank, 0), key);
    size_t len = v ? strlen(v) : 0;
    if (v && cap) {
        size_t k = len < cap - 1 ? len : cap - 1;
        memcpy(buf, v, k);
        buf[k] = 0;
    }
    pthread_mutex_unlock(&net->mu);
    if (!v)
        return tb_net_seterr(TBON_ENOTFOUND, "rank %u has no attribute \"%s\"", rank, key);
    return len > INT32_MAX ? INT32_MAX : (int)len;
}

int tbon_fe_attrs_changed(tbon_net_t *net, tbon_rank_t *ranks, size_t cap, int timeout_ms)
{
    if (!net || !net->is_fe || !ranks || !cap)
        return tb_net_seterr(TBON_EINVAL, "tbon_fe_attrs_changed needs a front-end network and "
                             "room for ranks");
    struct timespec ts, *abs = deadline_of(timeout_ms, &ts);
    pthread_mutex_lock(&net->mu);
    while (!net->nchg && !net->closed && timeout_ms != 0 && wait_until(net, abs) == 0)
        ;
    size_t k = 0;
    for (size_t r = 0; r < net->nrep && k < cap && net->nchg; r++)
        if (net->chg[r]) {
            net->chg[r] = 0;
            net->nchg--;
            ranks[k++] = (tbon_rank_t)r;
        }
    int closed = net->closed;
    pthread_mutex_unlock(&net->mu);
    if (k)
        return (int)k;
    if (closed)
        return tb_net_seterr(TBON_ECLOSED, "the network has shut down");
    return tb_net_seterr(TBON_ETIMEOUT, "no attribute changed within %d ms", timeout_ms);
}

int tbon_net_next_event(tbon_net_t *net, tbon_event_t *ev, int timeout_ms)
{
    if (!net || !ev)
        return tb_net_seterr(TBON_EINVAL, "NULL argument");
    struct timespec ts, *abs = deadline_of(timeout_ms, &ts);
    pthread_mutex_lock(&net->mu);
    int rc = TBON_ETIMEOUT;
    for (;;) {
        if (net->events.len) {
            *ev = *(tbon_event_t *)tb_ring_at(&net->events, 0);
            tb_ring_drop(&net->events);
            rc = 0;
            break;
        }
        if (net->closed) {
            rc = TBON_ECLOSED;
            break;
        }
        if (timeout_ms == 0 || wait_until(net, abs) != 0)
            break;
    }
    pthread_mutex_unlock(&net->mu);
    if (rc == TBON_ETIMEOUT)
        return tb_net_seterr(rc, "no event within %d ms", timeout_ms);
    if (rc == TBON_ECLOSED)
        return tb_net_seterr(rc, "the network has shut down");
    return rc;
}

void tbon_net_destroy(tbon_net_t *net)
{
    if (!net)
        return;
    if (!net->inline_node) {
        tb_cmd_t *c = net->is_fe ? tb_cmd_shutdown() : tb_cmd_leave();
        if (c)
            tb_node_post(net->node, c);
    } else if (net->node) {
        /* The node is ours to the end: wait for a turn the EDS thread may be
         * running (cb_kick), and keep it from starting another. */
        pthread_mutex_lock(&net->mu);
        while (net->driving)
            pthread_cond_wait(&net->cond, &net->mu);
        net->driving = 1;
        pthread_mutex_unlock(&net->mu);
        tb_node_arm(net->node, 0);
    }
    tb_node_destroy(net->node);
    tb_net_free(net);
}

void tb_net_free(tbon_net_t *net)
{
    if (!net)
        return;
    if (!net->is_fe)
        atomic_fetch_sub(&live_be_nets, 1);
    tb_ring_free(&net->events);
    free(net->chk_agree);
    free(net->chk_bad);
    for (size_t i = 0; i < net->nrep; i++)
        tb_attrs_free(net->rep[i]);
    free(net->rep);
    free(net->chg);
    for (size_t i = 0; i < net->nstreams; i++) {
        tbon_stream_t *s = net->streams[i];
        if (!s)
            continue;
        while (s->q.len)
            tbon_packet_unref(pop_locked(net, s));
        tb_ring_free(&s->q);
        free(s);
    }
    free(net->streams);
    tbon_comm_t *c = net->comms;
    while (c) {
        tbon_comm_t *next = c->next;
        free(c->ranks);
        free(c);
        c = next;
    }
    for (size_t i = 0; i < net->nloaded; i++) {
        free(net->loaded[i].path);
        free(net->loaded[i].func);
    }
    free(net->loaded);
    free((void *)net->argv_keep);
    tb_topology_destroy(net->topo);
    pthread_mutex_destroy(&net->mu);
    pthread_cond_destroy(&net->cond);
    free(net);
}
