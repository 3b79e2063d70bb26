/* net.c - the calls front-ends and back-ends share: receiving (from the
 * queues the reactor fills), sending (commands to the reactor), ranks */
#include "api/net_int.h"
#include "util/hot.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/error.h"
#include "util/log.h"
#include <unistd.h>
#include "util/attrs.h"
#include "util/bigmem.h"
#include "codec/packet_int.h"
#include "net/conn.h"
#include "topo/reconfig.h"

size_t tb_net_pkt_size(const tbon_packet_t *p)
{
    if (!p)
        return 0;       /* a lost wave's place (cb_deliver) */
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
    tb_ring_init(&n->arrived, sizeof(tb_rent_t));
    tb_ring_init(&n->direct, sizeof(tb_dmsg_t));
    pthread_mutex_init(&n->mu, NULL);
    pthread_mutex_init(&n->errmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&n->cond, &ca);
    pthread_cond_init(&n->ev_cond, &ca);
    pthread_condattr_destroy(&ca);
    n->next_stream = 1;
    n->next_filter = TBON_FILTER_BUILTIN_COUNT;
    n->view_version = 1;      /* the tree as it started (ft/view.c) */
    n->evfd = -1;
    return n;
}

TB_HOT tbon_stream_t *tb_net_stream_locked(tbon_net_t *net, uint32_t id, int create)
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
    (void)tb_ring_reserve(&s->q, 4);    /* small: a tool may make 10,000 (a push grows it) */
    net->streams[id] = s;
    return s;
}

static uint64_t head_seq(const tbon_stream_t *s)
{
    return ((const tb_dent_t *)tb_ring_at(&s->q, 0))->seq;
}

/* r's stream if r is still on its queue, else NULL. (A queue holds what
 * was put on it but a prefix taken, in seq order.) */
TB_HOT static tbon_stream_t *arrived_live(const tbon_net_t *net, const tb_rent_t *r)
{
    tbon_stream_t *s = r->stream < net->nstreams ? net->streams[r->stream] : NULL;
    return s && s->q.len && head_seq(s) <= r->seq ? s : NULL;
}

/* An application that takes packets by stream only leaves every entry of
 * net->arrived behind: once it is twice as long as what was live at the last
 * compaction (and some), the entries taken go, in O(len) once per as many
 * pushes. */
static void arrived_compact(tbon_net_t *net)
{
    if (net->arrived.len < 2 * net->arrived_kept + 1024)
        return;
    tb_ring_t keep;
    tb_ring_init(&keep, sizeof(tb_rent_t));
    if (tb_ring_reserve(&keep, net->arrived.len) != 0)
        return;                 /* no memory now: the next push tries again */
    for (size_t i = 0; i < net->arrived.len; i++) {
        const tb_rent_t *r = tb_ring_at(&net->arrived, i);
        if (arrived_live(net, r))
            *(tb_rent_t *)tb_ring_push(&keep) = *r;
    }
    tb_ring_free(&net->arrived);
    net->arrived = keep;
    net->arrived_kept = keep.len;
}

TB_HOT tb_dent_t *tb_net_queue_locked(tbon_net_t *net, tbon_stream_t *s)
{
    arrived_compact(net);
    if (tb_ring_reserve(&net->arrived, net->arrived.len + 1) != 0)
        return NULL;
    tb_dent_t *e = tb_ring_push(&s->q);
    if (!e)
        return NULL;
    e->seq = ++net->seq;
    *(tb_rent_t *)tb_ring_push(&net->arrived) = (tb_rent_t){ s->id, e->seq };
    net->nqueued++;
    return e;
}

/* The stream whose head is the oldest packet of all, or NULL. */
static tbon_stream_t *oldest_locked(tbon_net_t *net)
{
    while (net->arrived.len) {
        /* Every queued packet has its entry here, in seq order: the first
         * live entry is its stream's head. */
        tbon_stream_t *s = arrived_live(net, tb_ring_at(&net->arrived, 0));
        if (s)
            return s;
        tb_ring_drop(&net->arrived);      /* taken already */
        if (net->arrived_kept > net->arrived.len)
            net->arrived_kept = net->arrived.len;
    }
    return NULL;
}

/* ---- receiving ---- */

int tb_net_wait_on(tbon_net_t *net, pthread_cond_t *cond, const struct timespec *abs)
{
    if (!abs) {
        pthread_cond_wait(cond, &net->mu);
        return 0;
    }
    return pthread_cond_timedwait(cond, &net->mu, abs);
}

int tb_net_wait_until(tbon_net_t *net, const struct timespec *abs)
{
    return tb_net_wait_on(net, &net->cond, abs);
}

struct timespec *tb_net_deadline(int timeout_ms, struct timespec *ts)
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

/* The oldest entry of s's queue, taken: its packet (NULL: an error outcome,
 * whose code and message go to *code and msg[0..len) when not NULL). */
TB_HOT static tbon_packet_t *pop_locked(tbon_net_t *net, tbon_stream_t *s, int *code, char *msg,
                                 size_t len)
{
    tb_dent_t *e = tb_ring_at(&s->q, 0);
    tbon_packet_t *p = e->pkt;
    if (code)
        *code = e->code ? e->code : TBON_ELOST;
    if (msg && len) {
        msg[0] = '\0';
        if (e->msg)
            snprintf(msg, len, "%s", e->msg);
    }
    free(e->msg);
    s->taken = e->q;
    if (!net->is_fe && e->q > s->epoch) {
        s->epoch = e->q;
        s->idx = 0;
    }
    tb_ring_drop(&s->q);
    net->nqueued--;
    net->app_bytes -= tb_net_pkt_size(p);
    return p;
}

/* After taking packets: let the reactor read again once the queue drained. */
TB_HOT static void maybe_resume(tbon_net_t *net)
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
 * threads posted while we drove it, and what arrived while we drove it
 * but did not wait in its loop (the kicker heard of it and left a note:
 * kick.c), so nothing waits for the next call. */
TB_HOT static void release(tbon_net_t *net)
{
    while ((net->kick_missed || tb_node_has_posted(net->node)) && !tb_node_stopped(net->node)) {
        net->kick_missed = 0;
        pthread_mutex_unlock(&net->mu);
        tb_node_step(net->node, 0);
        pthread_mutex_lock(&net->mu);
    }
    /* What a read left in a socket brings the kicker no new event: ask it
     * for a turn (a stream that fills the socket faster than a turn's
     * budget reads it, while the application goes away). Looked at while
     * we still drive the node. */
    int left = net->kicker && !tb_node_stopped(net->node) && tb_node_input_left(net->node);
    net->driving = 0;
    /* Nobody drives it now: the kicker runs it when something arrives
     * (armed only now, or a kick could find it still driven and be lost). */
    tb_node_arm(net->node, 1);
    if (left)
        tb_kicker_poke(net->kicker);
    pthread_cond_broadcast(&net->cond);
}

/* A turn of an inline node for a receiver that keeps it from one turn to
 * the next until what it waits for comes (*held: it drives the node; it
 * lets go with release). Letting go and taking it again between turns
 * armed and disarmed the kicker each time: four system calls per turn that
 * brought the application nothing (a recovery's control messages, a
 * view), 7 timer settings and 9 epoll_ctl per orphan of a recovery at
 * fan-out 128 (bench/RESULTS.md). Other threads still hear of every turn:
 * what it queued for them, a backlog it drained. */
static void drive_held(tbon_net_t *net, int timeout_ms, int *held)
{
    net->burst = 0;             /* the application waits: a burst has ended */
    if (!*held) {
        net->driving = 1;
        *held = 1;
        if (timeout_ms != 0)
            tb_node_arm(net->node, 0);     /* we wait on it ourselves */
    }
    pthread_mutex_unlock(&net->mu);
    tb_node_step(net->node, timeout_ms);
    pthread_mutex_lock(&net->mu);
    pthread_cond_broadcast(&net->cond);
}

/* Drive an inline node for one turn (called with net->mu held and nobody
 * driving; returns with it held). Back-ends have no reactor thread: the
 * thread that waits for data reads it itself, so a request costs the
 * back-end one wake-up, not three (docs/protocol.md 7.4 and the user guide). */
static void drive(tbon_net_t *net, int timeout_ms)
{
    int held = 0;
    drive_held(net, timeout_ms, &held);
    release(net);
}

/* When a command may leave its output queued for the next ones. */
enum { HOLD_NO, HOLD_BACKLOG, HOLD_BURST };

/* Take the node to run a command now, or post it if another thread drives
 * it (under net->mu, so the driver sees it before it lets go: release).
 * hold: HOLD_BACKLOG, a send of a back-end whose application has more
 * packets waiting to be taken: its answer may wait for the next ones
 * (tb_node_exec_held), to go up in one write with them; HOLD_BURST, a
 * message that is not the first sent since the application last waited.
 * The last answer of a backlog, 64 held commands, 1 ms, or the
 * application's next wait write them all. */
TB_HOT static void exec_or_post(tbon_net_t *net, tb_cmd_t *c, int hold)
{
    pthread_mutex_lock(&net->mu);
    if (net->driving) {
        tb_node_post(net->node, c);
        pthread_mutex_unlock(&net->mu);
        return;
    }
    net->driving = 1;
    hold = hold == HOLD_BURST ? net->burst++ > 0 : hold == HOLD_BACKLOG && net->app_bytes > 0;
    pthread_mutex_unlock(&net->mu);
    c->bytes = 0;   /* never counted as pending: it is carried out now */
    if (hold)
        tb_node_exec_held(net->node, c);
    else
        tb_node_exec(net->node, c);
    /* Back-pressure: while the way up is full, wait for it here (a
     * destroy wakes the loop: tb_node_release_waiters). */
    while (tb_node_backlog(net->node) > TB_APP_HIGH && !tb_node_stopped(net->node) &&
           !atomic_load(&net->destroying))
        tb_node_step(net->node, -1);
    pthread_mutex_lock(&net->mu);
    release(net);
    pthread_mutex_unlock(&net->mu);
}

void tb_net_submit(tbon_net_t *net, tb_cmd_t *c)
{
    if (net->inline_node)
        exec_or_post(net, c, HOLD_NO);
    else
        tb_node_post(net->node, c);
}

void tb_net_submit_burst(tbon_net_t *net, tb_cmd_t *c)
{
    if (net->inline_node)
        exec_or_post(net, c, HOLD_BURST);
    else
        tb_node_post(net->node, c);
}

/* Back-pressure for messages: wait while this process has more of them
 * unacknowledged than the window (node_dlog.c). 0 or TBON_ECLOSED. */
int tb_net_wait_dlog(tbon_net_t *net)
{
    if (!net->inline_node)
        return tb_node_wait_dlog(net->node);
    pthread_mutex_lock(&net->mu);
    while (tb_node_dlog_full(net->node) && !tb_node_stopped(net->node) &&
           !atomic_load(&net->destroying)) {
        if (net->driving)
            tb_net_wait_until(net, NULL);
        else
            drive(net, -1);
    }
    int rc = tb_node_stopped(net->node) || atomic_load(&net->destroying) ? TBON_ECLOSED : 0;
    pthread_mutex_unlock(&net->mu);
    return rc;
}

TB_HOT void tb_net_arm(void *arg, int on)
{
    tbon_net_t *net = arg;
    tb_kicker_arm(net->kicker, on, on && net->node ? tb_node_next_due(net->node) : INT64_MAX);
}

/* Work arrived for a node nobody may be driving (a back-end whose
 * application is busy elsewhere): run it now unless someone drives. The
 * kicker thread calls it (kick.c). */
int tb_net_kick_ran(tbon_net_t *net)
{
    int ran = 0;
    pthread_mutex_lock(&net->mu);
    if (!net->node || tb_node_stopped(net->node)) {
        ran = -1;
    } else if (!net->driving) {
        net->driving = 1;
        pthread_mutex_unlock(&net->mu);
        tb_node_step(net->node, 0);
        pthread_mutex_lock(&net->mu);
        release(net);
        ran = 1;
    } else {
        net->kick_missed = 1;   /* for the driver's release */
    }
    pthread_mutex_unlock(&net->mu);
    return ran;
}

void tb_net_kick(void *arg)
{
    tb_net_kick_ran(arg);
}

/* One step of a receiver's wait, with net->mu held: a turn of an inline
 * node that nobody else drives (kept, *held, until the receiver lets go),
 * else a wait on net->cond. 1: look again; 0: the time is up. */
TB_HOT static int wait_step(tbon_net_t *net, const struct timespec *abs, int timeout_ms,
                            int *turned, int *held)
{
    if (net->inline_node && (*held || !net->driving) && !tb_node_stopped(net->node)) {
        int left = ms_left(abs);
        if (*turned && left == 0)
            return 0;
        drive_held(net, left, held);
        *turned = 1;
        return 1;
    }
    if (*held) {
        release(net);       /* the node stopped */
        *held = 0;
    }
    return timeout_ms != 0 && tb_net_wait_until(net, abs) == 0;
}

TB_HOT static int recv_inner(tbon_net_t *net, tbon_stream_t *only, tbon_packet_t **pkt,
                              tbon_stream_t **sout, int timeout_ms)
{
    if (!net || !pkt)
        return tb_net_fail(net, TBON_EINVAL, "NULL argument");
    *pkt = NULL;            /* nothing received unless 0 is returned */
    struct timespec ts, *abs = tb_net_deadline(timeout_ms, &ts);
    int turned = 0, held = 0;
    pthread_mutex_lock(&net->mu);
    for (;;) {
        tbon_stream_t *best = only ? (only->q.len ? only : NULL) : oldest_locked(net);
        if (best) {
            uint64_t q = ((const tb_dent_t *)tb_ring_at(&best->q, 0))->q;
            int code = 0;
            char why[400];
            *pkt = pop_locked(net, best, &code, why, sizeof why);
            if (sout)
                *sout = best;
            maybe_resume(net);
            tb_net_fd_sync(net);
            if (held)
                release(net);
            pthread_mutex_unlock(&net->mu);
            if (*pkt)
                return 0;
            /* One outcome per wave, in order: this wave's is an error. */
            if (code == TBON_EFILTER)
                return tb_net_fail(net, TBON_EFILTER, "stream %u, the wave of request %llu: %s",
                                   best->id, (unsigned long long)q, why);
            return tb_net_fail(net, TBON_ELOST, "stream %u: the wave of request %llu was lost "
                               "with the nodes that held it", best->id, (unsigned long long)q);
        }
        if (only && atomic_load(&only->closed)) {
            if (held)
                release(net);
            pthread_mutex_unlock(&net->mu);
            return tb_net_fail(net, TBON_ECLOSED, "stream %u was closed", only->id);
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
            tb_net_fail(net, TBON_EFILTER, "%s", net->error_msg);
            tb_net_fd_sync(net);
            if (held)
                release(net);
            pthread_mutex_unlock(&net->mu);
            return TBON_EFILTER;
        }
        if (net->closed) {
            if (held)
                release(net);
            pthread_mutex_unlock(&net->mu);
            return tb_net_fail(net, TBON_ECLOSED, "the network has shut down");
        }
        if (!wait_step(net, abs, timeout_ms, &turned, &held))
            break;
    }
    if (held)
        release(net);
    pthread_mutex_unlock(&net->mu);
    return tb_net_fail(net, TBON_ETIMEOUT, "nothing received within %d ms", timeout_ms);
}

int tb_net_call_leave(tbon_net_t *net, int rc)
{
    if (atomic_load(&net->destroying)) {
        pthread_mutex_lock(&net->mu);           /* the destroy waits on cond */
        atomic_fetch_sub(&net->inside, 1);
        pthread_cond_broadcast(&net->cond);
        pthread_mutex_unlock(&net->mu);
    } else {
        /* A destroy begun meanwhile sees it at its next look (it looks
         * every 20 ms): net may be freed after this. */
        atomic_fetch_sub(&net->inside, 1);
    }
    return rc;
}

TB_HOT static int recv_common(tbon_net_t *net, tbon_stream_t *only, tbon_packet_t **pkt,
                              tbon_stream_t **sout, int timeout_ms)
{
    if (!net)
        return recv_inner(net, only, pkt, sout, timeout_ms);
    tb_net_call_enter(net);
    return tb_net_call_leave(net, recv_inner(net, only, pkt, sout, timeout_ms));
}

TB_HOT int tbon_net_recv(tbon_net_t *net, tbon_packet_t **pkt, tbon_stream_t **s, int timeout_ms)
{
    return recv_common(net, NULL, pkt, s, timeout_ms);
}

TB_HOT int tbon_stream_recv(tbon_stream_t *s, tbon_packet_t **pkt, int timeout_ms)
{
    if (!s)
        return tb_net_fail(s ? s->net : NULL, TBON_EINVAL, "NULL stream");
    return recv_common(s->net, s, pkt, NULL, timeout_ms);
}

/* Wait, driving the node as a receive does, until ready(net, arg), the
 * network's end or timeout_ms: 0, TBON_ECLOSED or TBON_ETIMEOUT. Called and
 * returns under net->mu. */
static int wait_ready(tbon_net_t *net, int timeout_ms, int (*ready)(tbon_net_t *, void *),
                      void *arg)
{
    struct timespec ts, *abs = tb_net_deadline(timeout_ms, &ts);
    int turned = 0, held = 0, rc = TBON_ETIMEOUT;
    for (;;) {
        if (ready(net, arg)) {
            rc = 0;
            break;
        }
        if (net->closed) {
            rc = TBON_ECLOSED;
            break;
        }
        if (!wait_step(net, abs, timeout_ms, &turned, &held))
            break;
    }
    if (held)
        release(net);
    return rc;
}

static int direct_ready(tbon_net_t *net, void *arg)
{
    (void)arg;
    return net->direct.len > 0;
}

static int recv_direct(tbon_net_t *net, tbon_rank_t *from, tbon_packet_t **pkt,
                       int timeout_ms);

int tbon_net_recv_direct(tbon_net_t *net, tbon_rank_t *from, tbon_packet_t **pkt,
                         int timeout_ms)
{
    if (!net)
        return recv_direct(net, from, pkt, timeout_ms);
    tb_net_call_enter(net);
    return tb_net_call_leave(net, recv_direct(net, from, pkt, timeout_ms));
}

static int recv_direct(tbon_net_t *net, tbon_rank_t *from, tbon_packet_t **pkt,
                       int timeout_ms)
{
    if (!net || !pkt)
        return tb_net_fail(net, TBON_EINVAL, "NULL argument");
    *pkt = NULL;
    pthread_mutex_lock(&net->mu);
    int rc = wait_ready(net, timeout_ms, direct_ready, NULL);
    if (rc == 0) {
        tb_dmsg_t *m = tb_ring_at(&net->direct, 0);
        *pkt = m->pkt;
        if (from)
            *from = m->from;
        tb_ring_drop(&net->direct);
        tb_net_fd_sync(net);
        atomic_fetch_sub(&net->direct_bytes, tb_net_pkt_size(*pkt));
        if (net->direct_resume && atomic_load(&net->direct_bytes) < TB_APP_LOW) {
            net->direct_resume = 0;
            tb_cmd_t *c = tb_cmd_resume();
            if (c)
                tb_node_post(net->node, c);
        }
    }
    pthread_mutex_unlock(&net->mu);
    if (rc == TBON_ECLOSED)
        return tb_net_fail(net, rc, "the network has shut down");
    if (rc == TBON_ETIMEOUT)
        return tb_net_fail(net, rc, "no message within %d ms", timeout_ms);
    return 0;
}

/* The answer to ping *id, if it is here (under net->mu). */
static const struct tb_pong *pong_of(const tbon_net_t *net, uint64_t id)
{
    for (size_t i = 0; net->pong && i < TB_NET_PONGS; i++)
        if (net->pong[i].id == id)
            return &net->pong[i];
    return NULL;
}

static int pong_ready(tbon_net_t *net, void *arg)
{
    return pong_of(net, *(const uint64_t *)arg) != NULL;
}

static int ping(tbon_net_t *net, tbon_rank_t rank, int timeout_ms, double *rtt_ms,
                tbon_rank_t *route, size_t cap, size_t *nroute);

int tbon_net_ping(tbon_net_t *net, tbon_rank_t rank, int timeout_ms, double *rtt_ms,
                  tbon_rank_t *route, size_t cap, size_t *nroute)
{
    if (!net)
        return ping(net, rank, timeout_ms, rtt_ms, route, cap, nroute);
    tb_net_call_enter(net);
    return tb_net_call_leave(net, ping(net, rank, timeout_ms, rtt_ms, route, cap, nroute));
}

static int ping(tbon_net_t *net, tbon_rank_t rank, int timeout_ms, double *rtt_ms,
                tbon_rank_t *route, size_t cap, size_t *nroute)
{
    if (!net)
        return tb_net_fail(net, TBON_EINVAL, "NULL argument");
    pthread_mutex_lock(&net->mu);
    const char *why = rank >= tb_topology_size(net->topo) ? "is not a rank of the tree"
                      : !tb_topology_alive(net->topo, rank) ? "has failed or left" : NULL;
    uint64_t id = ++net->ping_next;
    int oom = !net->pong && !why && !(net->pong = calloc(TB_NET_PONGS, sizeof *net->pong));
    pthread_mutex_unlock(&net->mu);
    if (oom)
        return tb_net_fail(net, TBON_ENOMEM, "out of memory");
    if (why)
        return tb_net_fail(net, TBON_EINVAL, "rank %u %s: no ping sent", rank, why);
    tb_cmd_t *c = tb_cmd_ping(rank, id);
    if (!c)
        return tb_net_fail(net, TBON_ENOMEM, "out of memory");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tb_net_submit(net, c);
    pthread_mutex_lock(&net->mu);
    int rc = wait_ready(net, timeout_ms, pong_ready, &id);
    if (rc == 0) {
        const struct tb_pong *p = pong_of(net, id);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (rtt_ms)
            *rtt_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                      (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        size_t k = p->n < cap ? p->n : cap;
        if (route && k)
            memcpy(route, p->route, k * sizeof *route);
        if (nroute)
            *nroute = p->n;
    }
    pthread_mutex_unlock(&net->mu);
    if (rc == TBON_ECLOSED)
        return tb_net_fail(net, rc, "the network has shut down");
    if (rc == TBON_ETIMEOUT)
        return tb_net_fail(net, rc, "rank %u did not answer within %d ms", rank, timeout_ms);
    return 0;
}

/* ---- sending ---- */

int tbon_stream_close(tbon_stream_t *s)
{
    if (!s || !s->net->is_fe)
        return tb_net_fail(s ? s->net : NULL, TBON_EINVAL,
                           "tbon_stream_close needs a front-end stream");
    tbon_net_t *net = s->net;
    pthread_mutex_lock(&net->mu);
    if (atomic_load(&s->closed)) {
        pthread_mutex_unlock(&net->mu);
        return tb_net_fail(net, TBON_EINVAL, "stream %u is closed already", s->id);
    }
    atomic_store(&s->closed, 1);
    s->error = 0;
    while (s->q.len)
        tbon_packet_unref(pop_locked(net, s, NULL, NULL, 0));
    maybe_resume(net);
    tb_net_fd_sync(net);
    pthread_cond_broadcast(&net->cond);     /* a receiver waiting on it */
    pthread_mutex_unlock(&net->mu);
    tb_cmd_t *c = tb_cmd_stream_end(s->id);
    if (!c)
        return tb_net_fail(net, TBON_ENOMEM, "out of memory");
    tb_node_post(net->node, c);
    return 0;
}

TB_HOT static int send_packet(tbon_stream_t *s, tbon_packet_t *p)
{
    tbon_net_t *net = s->net;
    if (tbon_packet_tag(p) < TBON_FIRST_APP_TAG)
        return tb_net_fail(net, TBON_EINVAL, "tag %d is reserved (an application's tags start "
                           "at %d): not sent on stream %u", tbon_packet_tag(p),
                           TBON_FIRST_APP_TAG, s->id);
    if (atomic_load(&s->closed))
        return tb_net_fail(net, TBON_ECLOSED, "stream %u was closed", s->id);
    if (!net->inline_node && tb_node_wait_backlog(net->node, 0))
        return tb_net_fail(net, TBON_ECLOSED, "the network has shut down");
    if (net->inline_node && tb_node_stopped(net->node))
        return tb_net_fail(net, TBON_ECLOSED, "the network has shut down");
    size_t len;
    tb_packet_payload(p, &len);
    if (len > tb_conn_max_packet())
        return tb_net_fail(net, TBON_ETOOBIG, "a packet of %zu bytes is over the session's "
                           "maximum of %zu bytes (TBON_MAX_PACKET): not sent", len,
                           tb_conn_max_packet());
    tb_cmd_t *c = tb_cmd_send(s->id, tbon_packet_ref(p), 0, tb_net_pkt_size(p));
    if (!c)
        return tb_net_fail(net, TBON_ENOMEM, "out of memory");
    pthread_mutex_lock(&net->mu);
    c->u.send.key = (s->epoch << 24) | s->idx;     /* the wave key, in send order */
    if (s->idx < 0xffffff)
        s->idx++;
    pthread_mutex_unlock(&net->mu);
    if (net->inline_node)
        exec_or_post(net, c, net->is_fe ? HOLD_NO : HOLD_BACKLOG);
    else
        tb_node_post(net->node, c);
    return 0;
}

/* (A send may wait for back-pressure: a destroy wakes it.) */
TB_HOT int tbon_stream_send_packet(tbon_stream_t *s, tbon_packet_t *p)
{
    if (!s || !p)
        return tb_net_fail(s ? s->net : NULL, TBON_EINVAL, "NULL argument");
    tb_net_call_enter(s->net);
    return tb_net_call_leave(s->net, send_packet(s, p));
}

TB_HOT int tbon_stream_send(tbon_stream_t *s, int tag, const char *fmt, ...)
{
    if (!s || !fmt)
        return tb_net_fail(s ? s->net : NULL, TBON_EINVAL, "NULL argument");
    va_list ap;
    va_start(ap, fmt);
    tbon_error_t err;
    tbon_packet_t *p = tb_packet_vcreate(tag, fmt, ap, &err);
    va_end(ap);
    if (!p)
        return tb_net_fail(s ? s->net : NULL, err.code, "%s", err.msg);
    int rc = tbon_stream_send_packet(s, p);
    tbon_packet_unref(p);
    return rc;
}

static int flush(tbon_stream_t *s)
{
    tbon_net_t *net = s->net;
    if (!net->inline_node)
        return tb_node_wait_backlog(net->node, 1);
    pthread_mutex_lock(&net->mu);
    while (tb_node_backlog(net->node) > 0 && !tb_node_stopped(net->node) &&
           !atomic_load(&net->destroying)) {
        if (net->driving)
            tb_net_wait_until(net, NULL);
        else
            drive(net, -1);
    }
    int rc = atomic_load(&net->destroying) ? TBON_ECLOSED : 0;
    pthread_mutex_unlock(&net->mu);
    return rc;
}

int tbon_stream_flush(tbon_stream_t *s)
{
    if (!s)
        return tb_net_fail(NULL, TBON_EINVAL, "NULL stream");
    tb_net_call_enter(s->net);
    return tb_net_call_leave(s->net, flush(s));
}

uint32_t tbon_stream_id(const tbon_stream_t *s)
{
    return s ? s->id : 0;
}

uint64_t tbon_stream_request(tbon_stream_t *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->net->mu);
    uint64_t q = s->taken;
    pthread_mutex_unlock(&s->net->mu);
    return q;
}

/* docs/protocol.md 8.4: the wave key of what is sent next is request << 24
 * plus the packets sent for it since; going back to an earlier request
 * starts its count again (its answers belong together). */
int tbon_stream_answer(tbon_stream_t *s, uint64_t request)
{
    if (!s)
        return tb_net_fail(s ? s->net : NULL, TBON_EINVAL, "NULL stream");
    tbon_net_t *net = s->net;
    if (net->is_fe)
        return tb_net_fail(net, TBON_EINVAL, "stream %u: only a back-end answers requests", s->id);
    if (request >= (UINT64_C(1) << 40))
        return tb_net_fail(net, TBON_EINVAL, "stream %u: request %llu is out of range", s->id,
                           (unsigned long long)request);
    pthread_mutex_lock(&net->mu);
    if (request != s->epoch) {
        s->epoch = request;
        s->idx = 0;
    }
    pthread_mutex_unlock(&net->mu);
    return 0;
}

/* ---- ranks and events ---- */

tbon_rank_t tbon_net_rank(const tbon_net_t *net)
{
    return net ? net->rank : TBON_RANK_NONE;
}

int tbon_net_backends(tbon_net_t *net, tbon_rank_t *out, size_t cap)
{
    if (!net)
        return tb_net_fail(net, TBON_EINVAL, "NULL network");
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
        return tb_net_fail(net, TBON_EINVAL, "tbon_net_view needs a network and room for ranks");
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

int tbon_net_set_attr(tbon_net_t *net, const char *key, const char *value)
{
    if (!net)
        return tb_net_fail(net, TBON_EINVAL, "NULL network");
    if (tb_attrs_check(key, value) != 0)
        return tb_net_fail(net, TBON_EINVAL,
                           "an attribute key is 1 to %u bytes, a value at most %u",
                           TB_ATTR_KEY_MAX, TB_ATTR_VALUE_MAX);
    if (net->is_fe) {
        /* The FE's own map is its replica of itself: nothing travels. */
        pthread_mutex_lock(&net->mu);
        tb_attrs_t *a = tb_net_replica(net, 0, 1);
        int ok = a && tb_attrs_set(a, key, value) != 0;
        if (ok)
            tb_net_attrs_changed_locked(net, 0);
        pthread_mutex_unlock(&net->mu);
        return ok ? 0 : tb_net_fail(net, TBON_ENOMEM, "out of memory");
    }
    tb_cmd_t *c = tb_cmd_attr(key, value);
    if (!c)
        return tb_net_fail(net, TBON_ENOMEM, "out of memory");
    pthread_mutex_lock(&net->mu);
    int closed = net->closed;
    pthread_mutex_unlock(&net->mu);
    if (closed) {
        tb_cmd_free(c);
        return tb_net_fail(net, TBON_ECLOSED, "the network has shut down");
    }
    exec_or_post(net, c, HOLD_NO);
    return 0;
}

static int next_event(tbon_net_t *net, tbon_event_t *ev, int timeout_ms);

int tbon_net_next_event(tbon_net_t *net, tbon_event_t *ev, int timeout_ms)
{
    if (!net)
        return next_event(net, ev, timeout_ms);
    tb_net_call_enter(net);
    return tb_net_call_leave(net, next_event(net, ev, timeout_ms));
}

static int next_event(tbon_net_t *net, tbon_event_t *ev, int timeout_ms)
{
    if (!net || !ev)
        return tb_net_fail(net, TBON_EINVAL, "NULL argument");
    struct timespec ts, *abs = tb_net_deadline(timeout_ms, &ts);
    pthread_mutex_lock(&net->mu);
    int rc = TBON_ETIMEOUT;
    for (;;) {
        if (net->events.len) {
            *ev = *(tbon_event_t *)tb_ring_at(&net->events, 0);
            tb_ring_drop(&net->events);
            tb_net_fd_sync(net);
            rc = 0;
            break;
        }
        if (net->closed) {
            rc = TBON_ECLOSED;
            break;
        }
        if (timeout_ms == 0 || tb_net_wait_on(net, &net->ev_cond, abs) != 0)
            break;
    }
    pthread_mutex_unlock(&net->mu);
    if (rc == TBON_ETIMEOUT)
        return tb_net_fail(net, rc, "no event within %d ms", timeout_ms);
    if (rc == TBON_ECLOSED)
        return tb_net_fail(net, rc, "the network has shut down");
    return rc;
}

tbon_stream_t *tbon_net_stream(tbon_net_t *net, uint32_t id)
{
    if (!net) {
        tb_net_seterr(TBON_EINVAL, "tbon_net_stream needs a network");
        return NULL;
    }
    pthread_mutex_lock(&net->mu);
    tbon_stream_t *s = tb_net_stream_locked(net, id, 0);
    if (s && atomic_load(&s->closed))
        s = NULL;
    pthread_mutex_unlock(&net->mu);
    if (!s)
        tb_net_fail(net, TBON_ENOTFOUND, "no stream %u here", id);
    return s;
}

/* Every thread in a receive returns TBON_ECLOSED (an inline node's driver
 * is woken in its loop), and is gone, before tbon_net_destroy frees what it
 * uses. */
static void wake_receivers(tbon_net_t *net)
{
    pthread_mutex_lock(&net->mu);
    atomic_store(&net->destroying, 1);
    net->closed = 1;
    tb_net_fd_sync(net);
    while (atomic_load(&net->inside) > 0) {
        pthread_cond_broadcast(&net->cond);
        pthread_cond_broadcast(&net->ev_cond);
        if (net->node)
            tb_node_release_waiters(net->node);     /* senders held back, and
                                                       a driver in its loop */
        struct timespec ts;
        tb_net_wait_until(net, tb_net_deadline(20, &ts));   /* call_leave says */
    }
    pthread_mutex_unlock(&net->mu);
}

void tbon_net_destroy(tbon_net_t *net)
{
    if (!net)
        return;
    wake_receivers(net);
    tb_kicker_t *k = NULL;
    if (!net->inline_node) {
        tb_cmd_t *c = net->is_fe ? tb_cmd_shutdown() : tb_cmd_leave();
        if (c)
            tb_node_post(net->node, c);
    } else if (net->node) {
        /* The node is ours to the end: wait for a turn the kicker may be
         * running (tb_net_kick), and keep it from starting another. */
        pthread_mutex_lock(&net->mu);
        while (net->driving)
            pthread_cond_wait(&net->cond, &net->mu);
        net->driving = 1;
        /* Taken out under mu: the EDS thread may still read it (cb_status). */
        k = net->kicker;
        net->kicker = NULL;
        pthread_mutex_unlock(&net->mu);
        tb_node_arm(net->node, 0);
        tb_kicker_stop(k);
    }
    uint64_t session = net->node ? tb_node_session_id(net->node) : 0;
    tb_node_destroy(net->node);
    tb_kicker_destroy(k);       /* after its EDS thread has ended */
    /* The FE ends the session: its log directory here goes if nothing was
     * logged (the commnodes took their empty logs with them). */
    if (net->is_fe && net->node)
        tb_log_drop_session_dir(&net->conf, session, NULL);
    tb_net_free(net);
    tb_big_trim();              /* the large buffers kept for reuse */
}

void tb_net_free(tbon_net_t *net)
{
    if (!net)
        return;
    tb_config_free(&net->conf);
    tb_ring_free(&net->events);
    tb_ring_free(&net->arrived);
    while (net->direct.len) {
        tbon_packet_unref(((tb_dmsg_t *)tb_ring_at(&net->direct, 0))->pkt);
        tb_ring_drop(&net->direct);
    }
    tb_ring_free(&net->direct);
    free(net->pong);
    free(net->chk_agree);
    free(net->chk_bad);
    free(net->missing);
    for (size_t i = 0; i < net->nrep; i++)
        tb_attrs_destroy(net->rep[i]);
    free(net->rep);
    free(net->chg);
    for (size_t i = 0; i < net->nstreams; i++) {
        tbon_stream_t *s = net->streams[i];
        if (!s)
            continue;
        while (s->q.len)
            tbon_packet_unref(pop_locked(net, s, NULL, NULL, 0));
        tb_ring_free(&s->q);
        free(s);
    }
    free(net->streams);
    free(net->session_file);
    free(net->rwait);
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
    for (size_t i = 0; i < net->nlerr; i++)
        free(net->lerr[i]);
    free(net->lerr);
    free(net->nstat);
    free((void *)net->argv_keep);
    tb_topology_destroy(net->topo);
    pthread_mutex_destroy(&net->mu);
    pthread_mutex_destroy(&net->errmu);
    pthread_cond_destroy(&net->cond);
    pthread_cond_destroy(&net->ev_cond);
    tb_net_fd_close(net);
    free(net);
}

const char *tbon_net_log_dir(tbon_net_t *net)
{
    if (!net || !net->node) {
        tb_net_fail(net, TBON_EINVAL, "tbon_net_log_dir needs a network");
        return NULL;
    }
    pthread_mutex_lock(&net->mu);
    if (!net->log_dir[0] && tb_log_session_path(&net->conf, tb_node_session_id(net->node),
                                                net->log_dir, sizeof net->log_dir) != 0)
        net->log_dir[0] = 0;
    pthread_mutex_unlock(&net->mu);
    if (!net->log_dir[0]) {
        tb_net_fail(net, TBON_EIO, "the log directory's path is too long");
        return NULL;
    }
    return net->log_dir;
}
