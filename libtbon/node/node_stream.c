/* node_stream.c - streams inside a node: which children take part, the
 * upstream waves under the three synchronisation modes, the filters up and
 * down (DESIGN.md, "Streams and filters") */
#include "node/node_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "codec/packet_int.h"
#include "net/sock.h"

static tb_stream_st_t *get(const tb_node_t *n, uint32_t id)
{
    return id < n->nstreams ? n->streams[id] : NULL;
}

static size_t pkt_bytes(const tbon_packet_t *p)
{
    size_t len;
    tb_packet_payload(p, &len);
    return len + 64;
}

static int pq_push(tb_pq_t *q, tbon_packet_t *p, int more, uint64_t key)
{
    if (!q->ring.size)
        tb_ring_init(&q->ring, sizeof(struct tb_pq_ent));
    struct tb_pq_ent *e = tb_ring_push(&q->ring);
    if (!e)
        return TBON_ENOMEM;
    e->pkt = p;                /* NULL: a child's empty wave */
    e->more = more != 0;
    e->key = key;
    q->bytes += p ? pkt_bytes(p) : 0;
    if (!more) {
        q->units++;
        q->open_bytes = 0;      /* the unit is whole */
    } else {
        q->open_bytes += p ? pkt_bytes(p) : 0;
    }
    return 0;
}

/* The oldest packet; *more says whether its wave continues. */
static tbon_packet_t *pq_pop(tb_pq_t *q, int *more)
{
    if (!q->ring.len)
        return NULL;
    struct tb_pq_ent *e = tb_ring_at(&q->ring, 0);
    tbon_packet_t *p = e->pkt;
    int m = e->more;
    tb_ring_drop(&q->ring);
    size_t b = p ? pkt_bytes(p) : 0;
    q->bytes -= b;
    if (!q->units)              /* the open unit's (a wave cut short) */
        q->open_bytes -= b < q->open_bytes ? b : q->open_bytes;
    if (!m && q->units)
        q->units--;
    if (more)
        *more = m;
    return p;
}

static void pq_free(tb_pq_t *q)
{
    while (q->ring.len)
        tbon_packet_unref(pq_pop(q, NULL));
    tb_ring_free(&q->ring);
}

static void waves(tb_node_t *n, tb_stream_st_t *s, int cut);
static void settle_stream(tb_node_t *n, tb_stream_st_t *s);
static int members_settled(const tb_node_t *n, const tb_stream_st_t *s);
static void wave_lost(tb_node_t *n, tb_stream_st_t *s, uint64_t q);

/* A TIMEOUT stream's wave is cut when its timer fires. */
static void on_wave_timer(tb_timer_t *t, int64_t now)
{
    (void)now;
    tb_stream_st_t *s = (tb_stream_st_t *)((char *)t - offsetof(tb_stream_st_t, timer));
    s->deadline = 0;
    waves(t->arg, s, 1);
}

/* When the current wave is cut (0: never), on the loop's timer heap. */
static void set_deadline(tb_node_t *n, tb_stream_st_t *s, int64_t due)
{
    s->deadline = due;
    s->timer.fn = on_wave_timer;
    s->timer.arg = n;
    if (due)
        tb_timer_at(n->loop, &s->timer, due);
    else if (n->loop)
        tb_timer_cancel(n->loop, &s->timer);
}

/* A request kept until its wave closes here (docs/protocol.md 8.4): a child
 * adopted before it got it gets it then (tb_stream_join). */
struct tb_req {
    uint64_t q;
    tbon_packet_t *p;
    uint64_t at;            /* FE: its number among all streams' requests */
};

/* Bounds of what a stream keeps: a stream whose requests get no answers
 * (commands sent down a wait-for-all stream) would keep them for ever. Past
 * them the oldest go: an orphan adopted later misses those, as it would
 * without keeping. */
#define TB_REQS_KEEP_MAX   1024
#define TB_REQS_KEEP_BYTES (16u << 20)

static void reqs_drop_oldest(tb_stream_st_t *s)
{
    struct tb_req *e = tb_ring_at(&s->reqs, 0);
    if (e->q > s->reqs_dropped && (!s->has_closed || e->q > s->closed >> 24))
        s->reqs_dropped = e->q;     /* its wave is open: dropped for room */
    size_t len;
    tb_packet_payload(e->p, &len);
    s->reqs_bytes -= len;
    tbon_packet_unref(e->p);
    tb_ring_drop(&s->reqs);
}

static void reqs_keep(tb_stream_st_t *s, uint64_t q, tbon_packet_t *p, uint64_t at)
{
    if (!s->reqs.size)
        tb_ring_init(&s->reqs, sizeof(struct tb_req));
    size_t len;
    tb_packet_payload(p, &len);
    while (s->reqs.len && (s->reqs.len >= TB_REQS_KEEP_MAX ||
                           s->reqs_bytes + len > TB_REQS_KEEP_BYTES))
        reqs_drop_oldest(s);
    struct tb_req *e = tb_ring_push(&s->reqs);
    if (e) {
        *e = (struct tb_req){ q, tbon_packet_ref(p), at };
        s->reqs_bytes += len;
    }
}

/* FE: the wave of request q is delivered next: its number among all
 * streams' requests, for its expected back-ends (node_cover.c). */
static void note_request(tb_stream_st_t *s, uint64_t q)
{
    s->cover_q = s->cover_at = 0;
    for (size_t j = 0; j < s->reqs.len; j++) {
        const struct tb_req *e = tb_ring_at(&s->reqs, j);
        if (e->q == q) {
            s->cover_q = q;
            s->cover_at = e->at;
        }
        if (e->q >= q)
            break;
    }
}

/* Drop the kept requests up to request q (their waves closed). */
static void reqs_trim(tb_stream_st_t *s, uint64_t q)
{
    while (s->reqs.len && ((struct tb_req *)tb_ring_at(&s->reqs, 0))->q <= q)
        reqs_drop_oldest(s);
}

void tb_stream_reqs_trim(tb_stream_st_t *s, uint64_t q)
{
    reqs_trim(s, q);
}

uint64_t tb_stream_request_at(const tb_stream_st_t *s, uint64_t q)
{
    for (size_t j = 0; j < s->reqs.len; j++) {
        const struct tb_req *e = tb_ring_at(&s->reqs, j);
        if (e->q == q)
            return e->at;
        if (e->q > q)
            break;
    }
    return 0;
}

static void stream_free(tb_node_t *n, tb_stream_st_t *s)
{
    if (!s)
        return;
    set_deadline(n, s, 0);
    for (size_t i = 0; s->q && i < n->nchild; i++) {
        n->child[i].qbytes -= s->q[i].bytes;
        n->child[i].qbytes_open -= s->q[i].open_bytes;
        pq_free(&s->q[i]);
    }
    free(s->q);
    free(s->part);
    free(s->seen_to);
    free(s->fwd_from);
    free(s->sent);
    free(s->members);
    tb_plist_free(&s->extra);
    tb_plist_free(&s->kept);
    tb_ranks_free(&s->exp);
    tb_exact_free(s);
    reqs_trim(s, UINT64_MAX);
    tb_ring_free(&s->reqs);
    tb_filter_state_free(tb_filter_reg_get(n->filters, s->up), &s->up_state);
    tb_filter_state_free(tb_filter_reg_get(n->filters, s->down), &s->down_state);
    tbon_packet_unref(s->up_params);
    tbon_packet_unref(s->down_params);
    free(s);
}

void tb_stream_free_all(tb_node_t *n)
{
    for (size_t i = 0; i < n->nstreams; i++)
        stream_free(n, n->streams[i]);
    free(n->streams);
    n->streams = NULL;
    n->nstreams = 0;
    free(n->ended);
    n->ended = NULL;
    n->nended = 0;
}

static int ended(const tb_node_t *n, uint32_t id)
{
    return id / 8 < n->nended && (n->ended[id / 8] >> (id % 8) & 1);
}

void tb_stream_end(tb_node_t *n, uint32_t id)
{
    tb_stream_st_t *s = get(n, id);
    if (!s)
        return;
    if (id / 8 >= n->nended) {
        size_t nb = n->nended ? n->nended : 64;
        while (nb <= id / 8)
            nb *= 2;
        uint8_t *e = realloc(n->ended, nb);
        if (e) {
            memset(e + n->nended, 0, nb - n->nended);
            n->ended = e;
            n->nended = nb;
        }
    }
    if (id / 8 < n->nended)
        n->ended[id / 8] |= (uint8_t)(1u << (id % 8));
    /* the children that heard of it (tb_stream_create) hear of its end */
    tbon_packet_t *p = tb_ctl_stream_end_encode(&(tb_ctl_stream_end_t){ id });
    for (size_t i = 0; p && i < n->nchild; i++)
        if ((s->part[i] || (s->bcast && !n->child[i].is_be)) && n->child[i].conn)
            tb_node_send_ctl(n, n->child[i].conn, TB_CTL_STREAM_END, tbon_packet_ref(p));
    tbon_packet_unref(p);
    n->streams[id] = NULL;
    stream_free(n, s);
}

/* Report a filter failure towards the FE, where tbon_*_recv returns it. */
static void stream_error(tb_node_t *n, uint32_t id, const char *msg)
{
    TB_ERROR("filter", "stream %u: %s", id, msg);
    if (n->role == TB_ROLE_FE) {
        if (n->cbs.status)
            n->cbs.status(n->cbs.arg, TB_NODE_STREAM_ERROR, (int)id, msg);
    } else {
        tb_node_send_ctl(n, n->parent, TB_CTL_STREAM_ERR,
                         tb_ctl_stream_err_encode(&(tb_ctl_stream_err_t){ id, msg }));
    }
}

void tb_stream_on_filter_fault(tb_node_t *n, const tb_ctl_filter_fault_t *m)
{
    TB_ERROR("filter", "%s", m->msg);
    /* The wave goes on without the input dropped below; what it would
     * bring here is not the wave's result: it is not delivered. */
    tb_stream_st_t *s = m->key && m->rank != n->rank ? get(n, m->stream) : NULL;
    if (s) {
        size_t i = 0;
        while (i < 7 && s->poisoned[i] && s->poisoned[i] != m->key)
            i++;
        s->poisoned[i] = m->key;        /* full: the last slot is reused */
    }
    if (n->cbs.status)
        n->cbs.status(n->cbs.arg, TB_NODE_STREAM_ERROR, (int)m->stream, m->msg);
    if (!n->cbs.event)
        return;
    tbon_event_t ev = { .type = TBON_EV_FILTER_ERROR, .rank = m->rank,
                        .parent = TBON_RANK_NONE, .stream = m->stream, .filter = m->filter,
                        .signal = m->sig };
    snprintf(ev.detail, sizeof ev.detail, "%s", m->msg);
    n->cbs.event(n->cbs.arg, &ev);
}

size_t tb_stream_sources(tbon_packet_t *const in[], size_t k, uint32_t *out, size_t cap)
{
    size_t ns = 0;
    for (size_t i = 0; i < k && ns < cap; i++) {
        uint32_t r = tbon_packet_source(in[i]);
        size_t j = 0;
        while (j < ns && out[j] != r)
            j++;
        if (j == ns)
            out[ns++] = r;
    }
    return ns;
}

void tb_node_filter_loaded(tb_node_t *n)
{
    if (!atomic_exchange(&n->fw_armed, 1))
        tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_FILTER_LOADED });
}

/* A plug-in call of stream s over in[0..k) of the wave key begins: the EDS
 * may look (built-ins are ours: not watched). */
static void fw_begin(tb_node_t *n, const tb_stream_st_t *s, const tb_filter_t *f, uint64_t key,
                     tbon_packet_t *const in[], size_t k)
{
    if (!f->dl || n->role == TB_ROLE_FE)
        return;
    struct tb_fwatch *w = &n->fw;
    pthread_mutex_lock(&w->mu);
    w->since = tb_now_ms();
    w->limit = s->limit_ms >= 0 ? s->limit_ms : n->fw_default;
    w->filter = f->id;
    w->stream = s->id;
    w->key = key;
    w->nin = k;
    w->nsrc = tb_stream_sources(in, k, w->src, sizeof w->src / sizeof w->src[0]);
    w->name = f->name;
    w->path = f->path;
    pthread_mutex_unlock(&w->mu);
}

static void fw_end(tb_node_t *n, const tb_filter_t *f)
{
    if (!f->dl || n->role == TB_ROLE_FE)
        return;
    pthread_mutex_lock(&n->fw.mu);
    n->fw.since = 0;
    pthread_mutex_unlock(&n->fw.mu);
}

/* Run f for stream s: at the FE a plug-in runs on its worker thread, within
 * its limit (node_fecall.c); elsewhere here, watched by the EDS (fw_begin). */
static int run_filter(tb_node_t *n, const tb_stream_st_t *s, const tb_filter_t *f, uint64_t key,
                      tbon_packet_t *const in[], size_t k, tbon_packet_list_t *out, void **state,
                      const tbon_filter_ctx_t *ctx, tbon_error_t *err)
{
    int limit = s->limit_ms >= 0 ? s->limit_ms : n->fw_default;
    if (n->role == TB_ROLE_FE && f->dl && limit > 0)
        return tb_fecall_run(n, f, in, k, out, state, ctx, limit, err);
    fw_begin(n, s, f, key, in, k);
    int rc = tb_filter_run(f, in, k, out, state, ctx, err);
    fw_end(n, f);
    return rc;
}

void tb_stream_rank_list(const uint32_t *v, size_t k, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < k && i < 16 && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%u",
                               i == 0 ? "" : i + 1 == k ? " and " : ", ", v[i]);
    if (k > 16 && at < len)
        snprintf(buf + at, len - at, " and %zu more", k - 16);
}

void tb_stream_filter_fault(tb_node_t *n, uint32_t stream, const tb_filter_t *f, int sig,
                            uint64_t key, tbon_packet_t *const in[], size_t k, const char *why)
{
    uint32_t *src = malloc((k ? k : 1) * sizeof *src);
    size_t ns = src ? tb_stream_sources(in, k, src, k) : 0;
    char ranks[200], msg[900];
    tb_stream_rank_list(src, ns, ranks, sizeof ranks);
    if (k)
        snprintf(msg, sizeof msg, "rank %u, stream %u: %s, over %zu packet%s from rank%s %s; "
                 "that input is dropped", n->rank, stream, why, k, k == 1 ? "" : "s",
                 ns == 1 ? "" : "s", ranks);
    else
        snprintf(msg, sizeof msg, "rank %u, stream %u: %s", n->rank, stream, why);
    tb_ctl_filter_fault_t m = { stream, f ? f->id : -1, n->rank, sig, key, src, ns, msg };
    if (n->role == TB_ROLE_FE) {
        tb_stream_on_filter_fault(n, &m);
    } else {
        TB_ERROR("filter", "%s", msg);
        if (n->parent)
            tb_node_send_ctl(n, n->parent, TB_CTL_FILTER_FAULT, tb_ctl_filter_fault_encode(&m));
    }
    free(src);
}

/* The definition of s as the control messages carry it. */
static tb_ctl_stream_t stream_def(const tb_stream_st_t *s)
{
    return (tb_ctl_stream_t){ s->id, s->up,
                              s->sync | (s->bcast ? TB_STREAM_BCAST : 0) |
                                  (s->exact ? TB_STREAM_EXACT : 0),
                              s->timeout_ms, s->down, s->members, s->nmembers };
}

/* The definition of s for a child (TB_CTL_STREAM). */
static tbon_packet_t *stream_packet(const tb_stream_st_t *s)
{
    tb_ctl_stream_t d = stream_def(s);
    return tb_ctl_stream_encode(&d);
}

/* The child of ours whose subtree holds rank r takes part in s: walk up from
 * r to it, O(depth). A child we adopted counts as soon as it is ours, before
 * the view that says so has come (the topology would still lead from r to its
 * dead parent). */
static void mark_part(tb_node_t *n, tb_stream_st_t *s, tbon_rank_t r)
{
    while (r != TBON_RANK_NONE && r != n->rank) {
        tbon_rank_t p = tb_topology_parent(n->topo, r);
        int i = p == n->rank || n->nsorted < n->nchild ? tb_node_child_index(n, r) : -1;
        if (i >= 0) {
            s->part[i] = 1;
            return;
        }
        r = p;
    }
}

int tb_stream_create(tb_node_t *n, uint32_t id, int up, int sync, uint32_t timeout_ms,
                     int down, const tbon_rank_t *members, size_t nmembers)
{
    int bcast = (sync & TB_STREAM_BCAST) != 0, exact = (sync & TB_STREAM_EXACT) != 0;
    sync &= ~(TB_STREAM_BCAST | TB_STREAM_CATCHUP | TB_STREAM_EXACT);
    if (n->role == TB_ROLE_FE) {
        /* The FE decides (node_exact.c); the others are told. */
        const tb_filter_t *uf = tb_filter_reg_get(n->filters, up);
        exact = uf && uf->assoc && sync == TBON_SYNC_WAITFORALL && n->ft->ready(n) &&
                !n->cfg.exact_off;
    }
    if (id == 0 || id > (1u << 24) || get(n, id))
        return TBON_EINVAL;
    if (id >= n->nstreams) {
        size_t nc = n->nstreams ? n->nstreams : 16;
        while (nc <= id)
            nc *= 2;
        tb_stream_st_t **ns = realloc(n->streams, nc * sizeof *ns);
        if (!ns)
            return TBON_ENOMEM;
        memset(ns + n->nstreams, 0, (nc - n->nstreams) * sizeof *ns);
        n->streams = ns;
        n->nstreams = nc;
    }
    tb_stream_st_t *s = calloc(1, sizeof *s);
    if (!s)
        return TBON_ENOMEM;
    tb_ranks_init(&s->exp);
    s->id = id;
    s->up = up;
    s->sync = sync;
    s->bcast = bcast;
    s->exact = exact;
    s->timeout_ms = timeout_ms;
    s->limit_ms = -1;
    s->down = down;
    tb_plist_init(&s->extra);
    tb_plist_init(&s->kept);
    s->members = malloc((nmembers ? nmembers : 1) * sizeof *members);
    s->part = calloc(n->nchild ? n->nchild : 1, 1);
    s->q = calloc(n->nchild ? n->nchild : 1, sizeof *s->q);
    s->seen_to = malloc((n->nchild ? n->nchild : 1) * sizeof *s->seen_to);
    s->fwd_from = calloc(n->nchild ? n->nchild : 1, sizeof *s->fwd_from);
    s->sent = calloc(n->nchild ? n->nchild : 1, sizeof *s->sent);
    if (!s->members || !s->part || !s->q || !s->seen_to || !s->fwd_from || !s->sent) {
        stream_free(n, s);
        return TBON_ENOMEM;
    }
    memcpy(s->members, members, nmembers * sizeof *members);
    for (size_t i = 0; i < n->nchild; i++)
        s->seen_to[i] = UINT64_MAX;     /* an original child answers every request */
    s->nmembers = nmembers;
    /* A child takes part when a member lies in its subtree: walk up from each
     * member to the child of ours on its path. O(members x depth); nothing
     * at a back-end, which has no children (that walk was most of what a
     * stream's creation cost a 16x16 tree: bench_streams). */
    size_t size = tb_topology_size(n->topo);
    for (size_t m = 0; n->nchild && m < nmembers; m++)
        if (members[m] < size)
            mark_part(n, s, members[m]);
    n->streams[id] = s;
    /* Exactly the children whose subtree holds a member hear of it; of a
     * broadcast stream every commnode does, so that a back-end joining
     * anywhere finds it at its parent. */
    tbon_packet_t *p = stream_packet(s);
    for (size_t i = 0; p && i < n->nchild; i++)
        if ((s->part[i] || (bcast && !n->child[i].is_be)) && n->child[i].conn)
            tb_node_send_ctl(n, n->child[i].conn, TB_CTL_STREAM, tbon_packet_ref(p));
    tbon_packet_unref(p);
    return 0;
}

void tb_stream_set_params(tb_node_t *n, uint32_t id, int which, tbon_packet_t *p)
{
    tb_stream_st_t *s = get(n, id);
    if (!s) {
        tbon_packet_unref(p);
        return;
    }
    if (which == TBON_FILTER_PARAM_SYNC) {
        uint32_t ms;
        if (tbon_packet_unpack(p, "%ud", &ms) == 0)
            s->timeout_ms = ms;
    } else if (which == TBON_FILTER_PARAM_LIMIT) {
        uint32_t ms;
        if (tbon_packet_unpack(p, "%ud", &ms) == 0)
            s->limit_ms = ms > INT32_MAX ? INT32_MAX : (int32_t)ms;
    }
    size_t len;
    const uint8_t *pl = tb_packet_payload(p, &len);
    tbon_packet_t *fwd = tb_ctl_params_encode(&(tb_ctl_params_t){ id, which, tbon_packet_tag(p),
                                                                 pl, len });
    for (size_t i = 0; fwd && i < n->nchild; i++)
        if (s->part[i] && n->child[i].conn && !n->child[i].is_be)
            tb_node_send_ctl(n, n->child[i].conn, TB_CTL_PARAMS, tbon_packet_ref(fwd));
    tbon_packet_unref(fwd);
    tbon_packet_t **slot = which == TBON_FILTER_PARAM_DOWN ? &s->down_params
                         : which == TBON_FILTER_PARAM_UP ? &s->up_params : NULL;
    if (slot) {
        tbon_packet_unref(*slot);
        *slot = p;
    } else {
        tbon_packet_unref(p);
    }
}

/* Whether any child still takes part in s. */
static int takes_part(const tb_node_t *n, const tb_stream_st_t *s);
int tb_stream_members_settled(const tb_node_t *n, const tb_stream_st_t *s)
{
    return members_settled(n, s);
}

static int takes_part(const tb_node_t *n, const tb_stream_st_t *s)
{
    for (size_t i = 0; i < n->nchild; i++)
        if (s->part[i])
            return 1;
    return 0;
}

/* Run the up filter over a wave and send what it makes up (or to the app). */
/* A wave that gave no packet still counts as this node's contribution to
 * its parent's wave: it goes up as an empty DATA frame (docs/protocol.md
 * 7.3), so no wave waits forever for a child that had nothing to say. */
static void empty_up(tb_node_t *n, tb_stream_st_t *s, uint64_t key)
{
    if (n->role == TB_ROLE_FE || s->sync == TBON_SYNC_DONTWAIT || !n->parent || n->parent->closed)
        return;
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .stream = s->id, .source = n->rank, .key = key };
    tb_conn_send_buf(n->parent, &h, NULL, 0);
}

/* FE: the wave with this key lost input to a filter crash below: 1, and
 * forgotten. */
static int poisoned(tb_stream_st_t *s, uint64_t key)
{
    for (size_t i = 0; key && i < 8 && s->poisoned[i]; i++) {
        if (s->poisoned[i] != key)
            continue;
        memmove(&s->poisoned[i], &s->poisoned[i + 1], (7 - i) * sizeof s->poisoned[0]);
        s->poisoned[7] = 0;
        return 1;
    }
    return 0;
}

static void run_up(tb_node_t *n, tb_stream_st_t *s, tbon_packet_t **in, size_t k, uint64_t key)
{
    const tb_filter_t *f = tb_filter_reg_get(n->filters, s->up);
    if (n->role == TB_ROLE_FE && poisoned(s, key)) {
        TB_INFO("filter", "stream %u: the wave of key %llu lost input to a filter crash: "
                "not delivered", s->id, (unsigned long long)key);
        for (size_t i = 0; i < k; i++)
            tbon_packet_unref(in[i]);
        return;
    }
    if (k == 0) {
        empty_up(n, s, key);
        return;
    }
    if (!f || s->up == TBON_FILTER_NULL) {
        if (!f && s->up != TBON_FILTER_NULL) {
            char msg[128];
            snprintf(msg, sizeof msg, "rank %u has no filter %d", n->rank, s->up);
            stream_error(n, s->id, msg);
        }
        for (size_t i = 0; i < k; i++)
            tb_node_to_parent(n, s->id, in[i], i + 1 < k, key);
        return;
    }
    tbon_packet_list_t out;
    tb_plist_init(&out);
    tbon_filter_ctx_t ctx = { .rank = n->rank, .num_children = (uint32_t)n->nchild,
                              .depth = n->depth, .stream = s->id, .params = s->up_params };
    tbon_error_t err;
    int rc = run_filter(n, s, f, key, in, k, &out, &s->up_state, &ctx, &err);
    if (rc == TB_FILTER_CRASHED || rc == TB_FILTER_HUNG)
        tb_stream_filter_fault(n, s->id, f, rc == TB_FILTER_HUNG ? 0 : tb_filter_crash_signal(),
                               key, in, k, err.msg);
    tb_cover_outputs(in, k, &out);
    for (size_t i = 0; i < k; i++)
        tbon_packet_unref(in[i]);
    if (rc && rc != TB_FILTER_CRASHED && rc != TB_FILTER_HUNG) {
        char msg[600];
        snprintf(msg, sizeof msg, "rank %u: %s", n->rank, err.msg);
        stream_error(n, s->id, msg);
    }
    for (size_t i = 0; i < out.n; i++) {
        tb_node_to_parent(n, s->id, out.v[i], i + 1 < out.n, key);
        out.v[i] = NULL;
    }
    if (out.n == 0)
        empty_up(n, s, key);
    out.n = 0;
    tb_plist_free(&out);
}

/* Does child i owe a unit to the wave with this key? An adopted child owes
 * the waves of the requests it had seen before its adoption (seen_to) but not
 * yet answered (keys after sent), and those of the requests its new parent
 * has sent it since (from fwd_from on); not the ones in between, which died
 * with its old parent. */
static int owes(const tb_stream_st_t *s, size_t i, uint64_t key)
{
    if (s->seen_to[i] == UINT64_MAX)
        return 1;
    uint64_t epoch = key >> 24;
    return (key > s->sent[i] && epoch <= s->seen_to[i]) ||
           (s->fwd_from[i] && epoch >= s->fwd_from[i]);
}

static uint64_t head_key(const tb_pq_t *q)
{
    return ((const struct tb_pq_ent *)tb_ring_at(&q->ring, 0))->key;
}

/* FE: whether request q went down (is kept for its wave) and has a wave. */
static int has_wave(const tb_stream_st_t *s, uint64_t q)
{
    if (q <= s->reqs_dropped)
        return 1;               /* dropped from the full ring: assume so */
    for (size_t j = 0; j < s->reqs.len; j++) {
        uint64_t r = ((const struct tb_req *)tb_ring_at(&s->reqs, j))->q;
        if (r >= q)
            return r == q;
    }
    return 0;
}

/* FE, before the wave of request e reaches the application: the waves of
 * the requests between the last one closed and e have no unit here (every
 * child's oldest unit is for e or later). Waves reach the application in
 * order, so one of them that died with failed nodes - no child owes it any
 * more (settle_stream) - is given as lost first. A child that owes it and has
 * a later unit queued skipped it (a back-end need not answer every request;
 * an original child owes them all): it is passed over unsaid, as it always
 * was. While an orphan is not grafted yet, or a child that owes it has
 * nothing queued, it may still come: 0, and e waits (unless cut: a timeout
 * stream's deadline passes over it). A request that sent nothing down (its
 * down filter made no packet) has no wave. Without this, the wave of a
 * request that every back-end had answered to a dead parent was passed over
 * unsaid, and the application waited for it forever (test_ft/
 * all_fe_children_killed_waves_complete). */
static int gap_settled(tb_node_t *n, tb_stream_st_t *s, uint64_t e, int cut)
{
    uint64_t from = s->has_closed ? (s->closed >> 24) + 1 : 1;
    if (n->role != TB_ROLE_FE || e <= from || !n->ft->ready(n))
        return 1;
    for (uint64_t q = from; q < e; q++) {
        if (!has_wave(s, q))
            continue;
        if (!cut && !members_settled(n, s))
            return 0;
        int skipped = cut;
        for (size_t i = 0; i < n->nchild && !skipped; i++) {
            if (!s->part[i] || !n->child[i].conn || n->child[i].suspect || !owes(s, i, q << 24))
                continue;
            if (!s->q[i].units)
                return 0;
            skipped = 1;
        }
        if (!skipped)
            wave_lost(n, s, q);
    }
    return 1;
}

/* Collect waves while one is complete (or, cut = 1, take what is there). A
 * wave is the units with the smallest key at the head of any child's queue
 * (docs/protocol.md 8.4); it is complete when every child that counts has a
 * unit queued: a child whose oldest unit has a later key had nothing for it
 * (it never got that request, as after an adoption) and is not waited for.
 * A unit is a child's packets up to the first without TB_FRAME_F_MORE. */
static void waves(tb_node_t *n, tb_stream_st_t *s, int cut)
{
    tbon_packet_t *stackv[64];
    size_t stacku[65];
    int fe_exact = s->exact && n->role == TB_ROLE_FE;
    while (s->nonempty > 0) {
        uint64_t key = UINT64_MAX;
        size_t total = s->extra.n;
        for (size_t i = 0; i < n->nchild; i++)
            if (s->q[i].units && head_key(&s->q[i]) < key)
                key = head_key(&s->q[i]);
        /* Complete when every live child that takes part and owes this wave
         * has a unit queued. A dead child's queued units still count, but it
         * is not waited for; neither is an adopted child for the requests it
         * never got (docs/protocol.md 8.4). */
        int missing = 0;
        for (size_t i = 0; i < n->nchild && !cut && !missing; i++)
            missing = s->part[i] && n->child[i].conn && !n->child[i].suspect &&
                      !s->q[i].units && owes(s, i, key);
        if (missing || !gap_settled(n, s, key >> 24, cut))
            break;
        /* An exact stream's wave that lacks back-ends a failure being
         * repaired may bring back waits (node_exact.c). */
        if (fe_exact && !cut && tb_exact_hold(n, s, key))
            break;
        size_t nlate = fe_exact ? tb_exact_count_late(s, key) : 0, nunit = nlate;
        total += nlate;
        for (size_t i = 0; i < n->nchild; i++)
            if (s->q[i].units && head_key(&s->q[i]) == key) {
                total += s->q[i].ring.len;
                nunit++;
            }
        tbon_packet_t **in = total <= 64 ? stackv : malloc(total * sizeof *in);
        size_t *start = nunit < 65 ? stacku : malloc(nunit * sizeof *start);
        if (!in || !start) {
            if (in != stackv)
                free(in);
            if (start != stacku)
                free(start);
            return;
        }
        size_t k = 0;
        nunit = 0;              /* counted again as the units are taken */
        uint64_t who = 0;       /* for the debug line: which children took part */
        for (size_t i = 0; i < n->nchild; i++) {
            if (!s->q[i].units || head_key(&s->q[i]) != key)
                continue;
            start[nunit++] = k;
            who |= i < 64 ? (uint64_t)1 << i : 0;
            int more = 1;
            size_t before = s->q[i].bytes, before_open = s->q[i].open_bytes;
            while (more && s->q[i].ring.len) {
                tbon_packet_t *p = pq_pop(&s->q[i], &more);
                if (p)
                    in[k++] = p;
            }
            n->child[i].qbytes -= before - s->q[i].bytes;
            n->child[i].qbytes_open -= before_open - s->q[i].open_bytes;
            if (!s->q[i].units)
                s->nonempty--;
        }
        for (size_t j = 0; j < s->extra.n; j++)
            in[k++] = s->extra.v[j];
        s->extra.n = 0;
        if (s->exact) {
            /* The FE's late partials of this wave, each a unit of its own;
             * then no two units over the same back-end. */
            size_t k0 = k;
            if (nlate)
                k += tb_exact_take_late(s, key, in + k);
            for (size_t j = k0; j < k; j++)
                start[nunit++] = j;
            k = tb_exact_disjoint(n, s, in, k, start, nunit);
        }
        set_deadline(n, s, 0);
        TB_DEBUG("wave", "stream %u: wave %llu.%llu of %zu packets, children %#llx; %zu still "
                 "have units", s->id, (unsigned long long)(key >> 24),
                 (unsigned long long)(key & 0xffffff), k, (unsigned long long)who, s->nonempty);
        s->closed = key;
        s->has_closed = 1;
        if (n->role == TB_ROLE_FE)
            note_request(s, key >> 24);
        /* An exact stream keeps its requests until the FE has the wave: an
         * orphan adopted here later may not have had them. */
        if (!s->exact || n->role == TB_ROLE_FE)
            reqs_trim(s, key >> 24);
        run_up(n, s, in, k, key);
        if (fe_exact)
            tb_exact_delivered(n, s, key);
        if (in != stackv)
            free(in);
        if (start != stacku)
            free(start);
        cut = 0;
    }
    if (s->sync == TBON_SYNC_TIMEOUT && s->nonempty > 0 && !s->deadline)
        set_deadline(n, s, tb_now_ms() + s->timeout_ms);
    if (s->unsettled && n->role == TB_ROLE_FE)
        settle_stream(n, s);
}

void tb_stream_up(tb_node_t *n, size_t child, uint32_t stream, tbon_packet_t *p, int more,
                  uint64_t key, int late)
{
    tb_stream_st_t *s = get(n, stream);
    if (!s || !s->part[child]) {
        if (!ended(n, stream))
            TB_WARN("stream", "packet from rank %u on unknown stream %u dropped",
                    n->child[child].rank, stream);
        tbon_packet_unref(p);
        return;
    }
    if (s->exact && n->ft->ready(n) && (late || (s->has_closed && key <= s->closed))) {
        /* A partial sent again after an adoption, or for a wave closed
         * here: never folded below the FE (node_exact.c). */
        if (p)
            tb_exact_late(n, s, p, more, key);
        if (p && n->role == TB_ROLE_FE)
            waves(n, s, 0);
        return;
    }
    if (s->sync == TBON_SYNC_WAITFORALL && s->has_closed && key <= s->closed) {
        /* A unit of a wave already sent up without this child: that happens
         * only around a failure (an orphan's late output). A state-recoverable
         * filter is idempotent: the packet joins the next wave. Any other
         * would count it in the wrong wave: it is dropped. */
        const tb_filter_t *f = tb_filter_reg_get(n->filters, s->up);
        if (p && f && f->get_state) {
            tbon_packet_list_push(&s->extra, p);
        } else if (p) {
            TB_INFO("stream", "stream %u: a late packet of rank %u for a closed wave dropped",
                    stream, n->child[child].rank);
            tbon_packet_unref(p);
        }
        return;
    }
    if (s->sync == TBON_SYNC_DONTWAIT) {
        if (p)
            run_up(n, s, &p, 1, key);
        return;
    }
    tb_pq_t *q = &s->q[child];
    size_t before = q->bytes, before_open = q->open_bytes;
    if (pq_push(q, p, more, key)) {
        tbon_packet_unref(p);
        return;
    }
    n->child[child].qbytes += q->bytes - before;
    n->child[child].qbytes_open += q->open_bytes;
    n->child[child].qbytes_open -= before_open;
    if (!more && q->units == 1) {
        s->nonempty++;
        if (s->sync == TBON_SYNC_TIMEOUT && !s->deadline)
            set_deadline(n, s, tb_now_ms() + s->timeout_ms);
    }
    waves(n, s, 0);
}

void tb_stream_down(tb_node_t *n, uint32_t stream, tbon_packet_t *p, uint64_t q)
{
    tb_stream_st_t *s = get(n, stream);
    uint64_t at = 0;
    if (s && n->role == TB_ROLE_FE) {
        q = ++s->down_q;           /* requests are numbered per stream at the FE */
        at = tb_cover_request(n);
    }
    if (s && q > s->last_q)
        s->last_q = q;
    if (ended(n, stream)) {
        tbon_packet_unref(p);       /* sent before its end reached us */
        return;
    }
    if (n->role == TB_ROLE_BE) {
        if (n->cbs.deliver)
            n->cbs.deliver(n->cbs.arg, stream, p, q);
        else
            tbon_packet_unref(p);
        return;
    }
    if (!s) {
        TB_WARN("stream", "downstream packet on unknown stream %u dropped", stream);
        tbon_packet_unref(p);
        return;
    }
    tbon_packet_list_t out;
    tb_plist_init(&out);
    const tb_filter_t *f = tb_filter_reg_get(n->filters, s->down);
    if (f && s->down != TBON_FILTER_NULL) {
        tbon_filter_ctx_t ctx = { .rank = n->rank, .num_children = (uint32_t)n->nchild,
                                  .depth = n->depth, .stream = s->id, .params = s->down_params };
        tbon_error_t err;
        int rc = run_filter(n, s, f, 0, &p, 1, &out, &s->down_state, &ctx, &err);
        if (rc == TB_FILTER_CRASHED || rc == TB_FILTER_HUNG) {
            tb_stream_filter_fault(n, s->id, f, rc == TB_FILTER_HUNG ? 0 : tb_filter_crash_signal(),
                                   0, &p, 1, err.msg);
        } else if (rc) {
            char msg[600];
            snprintf(msg, sizeof msg, "rank %u: %s", n->rank, err.msg);
            stream_error(n, s->id, msg);
        }
        tbon_packet_unref(p);
    } else {
        tbon_packet_list_push(&out, p);
    }
    /* An adopted child does not get a request again that its old parent had
     * already passed down to it (it answered that one, or will): a second
     * copy would be answered twice. */
    for (size_t i = 0; out.n && i < n->nchild; i++)
        if (s->part[i] && !s->fwd_from[i] && s->seen_to[i] != UINT64_MAX && q > s->seen_to[i])
            s->fwd_from[i] = q;     /* an adopted child's first new request here */
    int keep = s->sync != TBON_SYNC_DONTWAIT && n->ft->ready(n);
    for (size_t j = 0; j < out.n; j++) {
        if (keep)
            reqs_keep(s, q, out.v[j], at);
        for (size_t i = 0; i < n->nchild; i++)
            if (s->part[i] && (s->seen_to[i] == UINT64_MAX || q > s->seen_to[i]))
                tb_node_to_child(n, i, stream, out.v[j], q);
    }
    tb_plist_free(&out);
    if (!takes_part(n, s))
        empty_up(n, s, q << 24);    /* nobody below answers: we do, with nothing */
}


/* FE: is every live member of s reached through a child of ours that takes
 * part in s? Not while a member is cut off (an orphan looking for a parent)
 * or under a child whose graft of s has not come (just adopted): either may
 * still bring a wave that nobody owes yet. */
static int members_settled(const tb_node_t *n, const tb_stream_st_t *s)
{
    size_t size = tb_topology_size(n->topo), cnt = s->bcast ? size : s->nmembers;
    for (size_t m = 0; m < cnt; m++) {
        tbon_rank_t r = s->bcast ? (tbon_rank_t)m : s->members[m];
        if (r >= size || !tb_topology_alive(n->topo, r) || tb_topology_role(n->topo, r) != TB_ROLE_BE)
            continue;
        tbon_rank_t top = r, p;
        while ((p = tb_topology_parent(n->topo, top)) != n->rank) {
            if (p == TBON_RANK_NONE)
                return 0;
            top = p;
        }
        int i = tb_node_child_index(n, top);
        if (i < 0 || !s->part[i] || !n->child[i].conn)
            return 0;
    }
    return 1;
}

/* FE: the requests of s whose wave no node can bring any more - every part
 * of it died with failed nodes (all the FE's children at once, say), and no
 * child that takes part owes it or has a unit of it queued - are given to
 * the application as lost, in order, so that no receive waits for them
 * forever; a unit of such a wave that comes after all is late (tb_stream_up).
 * The first wave still owed stops the scan: waves reach the application in
 * order. */
static void settle_stream(tb_node_t *n, tb_stream_st_t *s)
{
    uint64_t from = s->has_closed ? (s->closed >> 24) + 1 : 1;
    if (s->sync == TBON_SYNC_DONTWAIT || from > s->down_q) {
        s->unsettled = 0;       /* nothing in flight: no wave can be lost */
        return;
    }
    s->unsettled = 1;
    if (!members_settled(n, s))
        return;
    for (uint64_t q = from; q <= s->down_q; q++) {
        uint64_t key = q << 24;
        for (size_t i = 0; i < n->nchild; i++) {
            if (!s->part[i] || !n->child[i].conn)
                continue;
            /* An original child owes every request: nothing can be lost
             * until it fails (which settles again). */
            if (s->seen_to[i] == UINT64_MAX) {
                s->unsettled = 0;
                return;
            }
            if (owes(s, i, key) || (s->q[i].units && head_key(&s->q[i]) >> 24 == q))
                return;
        }
        wave_lost(n, s, q);
    }
    s->unsettled = 0;
}

/* FE: the wave of request q is given to the application as lost. */
static void wave_lost(tb_node_t *n, tb_stream_st_t *s, uint64_t q)
{
    TB_WARN("stream", "stream %u: the wave of request %llu was lost with the nodes that "
            "held it", s->id, (unsigned long long)q);
    s->closed = (q << 24) | 0xffffff;
    s->has_closed = 1;
    reqs_trim(s, q);
    if (n->cbs.deliver)
        n->cbs.deliver(n->cbs.arg, s->id, NULL, q);
}

void tb_stream_settle(tb_node_t *n)
{
    /* At the end of the turn (tb_stream_settle_due): the events of this
     * failure or adoption reach the application before a wave it lost. */
    if (n->role == TB_ROLE_FE)
        n->settle_due = 1;
}

void tb_stream_settle_due(tb_node_t *n)
{
    if (!n->settle_due)
        return;
    n->settle_due = 0;
    for (size_t id = 0; id < n->nstreams; id++) {
        tb_stream_st_t *s = n->streams[id];
        if (!s)
            continue;
        /* Waves held back by an earlier one nobody had brought (gap_settled)
         * may go now; then the waves nobody can bring are lost. */
        if (s->nonempty && s->sync != TBON_SYNC_DONTWAIT)
            waves(n, s, 0);
        settle_stream(n, s);
    }
}

void tb_stream_child_gone(tb_node_t *n, size_t child)
{
    for (size_t id = 0; id < n->nstreams; id++) {
        tb_stream_st_t *s = n->streams[id];
        if (!s || !s->part[child])
            continue;
        /* DESIGN.md: a dead child is dropped from the wave being collected;
         * what it already sent still counts. */
        s->part[child] = 0;
        if (s->sync != TBON_SYNC_DONTWAIT)
            waves(n, s, 0);
        /* The last one gone (every back-end below left or died): the
         * requests it had not answered are answered here, empty, so that no
         * wave above waits for us forever. */
        if (!takes_part(n, s) && s->sync != TBON_SYNC_DONTWAIT && n->role != TB_ROLE_FE) {
            uint64_t from = s->has_closed ? (s->closed >> 24) + 1 : 1;
            for (uint64_t q = from; q <= s->last_q; q++)
                empty_up(n, s, q << 24);
        }
    }
    tb_stream_settle(n);
}

void tb_stream_child_suspect(tb_node_t *n, size_t child)
{
    /* A suspect stays a member (its late units of closed waves are dropped,
     * or join the next wave of a state-recoverable filter: tb_stream_up);
     * the waves it held up complete now. */
    for (size_t id = 0; id < n->nstreams; id++) {
        tb_stream_st_t *s = n->streams[id];
        if (s && s->part[child] && s->sync != TBON_SYNC_DONTWAIT)
            waves(n, s, 0);
    }
}

int tb_stream_add_child(tb_node_t *n)
{
    /* n->nchild already counts the new slot. */
    for (size_t id = 0; id < n->nstreams; id++) {
        tb_stream_st_t *s = n->streams[id];
        if (!s)
            continue;
        uint8_t *np = realloc(s->part, n->nchild);
        if (!np)
            return TBON_ENOMEM;
        s->part = np;
        tb_pq_t *nq = realloc(s->q, n->nchild * sizeof *nq);
        if (!nq)
            return TBON_ENOMEM;
        s->q = nq;
        uint64_t *st = realloc(s->seen_to, n->nchild * sizeof *st);
        if (!st)
            return TBON_ENOMEM;
        s->seen_to = st;
        uint64_t *ff = realloc(s->fwd_from, n->nchild * sizeof *ff);
        if (!ff)
            return TBON_ENOMEM;
        s->fwd_from = ff;
        uint64_t *se = realloc(s->sent, n->nchild * sizeof *se);
        if (!se)
            return TBON_ENOMEM;
        s->sent = se;
        s->sent[n->nchild - 1] = 0;
        s->part[n->nchild - 1] = 0;
        s->seen_to[n->nchild - 1] = 0;
        s->fwd_from[n->nchild - 1] = 0;
        memset(&s->q[n->nchild - 1], 0, sizeof *nq);
    }
    return 0;
}

int tb_stream_known(const tb_node_t *n, uint32_t id)
{
    return get(n, id) != NULL;
}

int tb_stream_join(tb_node_t *n, uint32_t id, size_t child, uint64_t sent, uint64_t seen_to)
{
    tb_stream_st_t *s = get(n, id);
    if (!s || child >= n->nchild || s->part[child])
        return 0;
    int first = !takes_part(n, s);
    s->part[child] = 1;
    s->sent[child] = sent;
    s->seen_to[child] = seen_to;
    s->fwd_from[child] = 0;
    /* The requests that passed here after the last one the child saw (they
     * died with its old parent, or were sent while it was an orphan) and
     * whose waves are still open: it gets them now, and owes their waves. */
    for (size_t j = 0; j < s->reqs.len; j++) {
        const struct tb_req *e = tb_ring_at(&s->reqs, j);
        if (e->q <= seen_to)
            continue;
        if (!s->fwd_from[child])
            s->fwd_from[child] = e->q;
        tb_node_to_child(n, child, id, e->p, e->q);
    }
    return first;
}

/* Fold in[0..k) into s's filter state, the output dropped. */
static void keep_run(tb_node_t *n, tb_stream_st_t *s, const tb_filter_t *f,
                     tbon_packet_t *const in[], size_t k)
{
    tbon_filter_ctx_t ctx = { .rank = n->rank, .stream = s->id, .params = s->up_params };
    tbon_error_t err;
    fw_begin(n, s, f, 0, in, k);
    int rc = tb_filter_keep(f, in, k, &s->up_state, &ctx, &err);
    fw_end(n, f);
    if (rc == TB_FILTER_CRASHED)
        tb_stream_filter_fault(n, s->id, f, tb_filter_crash_signal(), 0, in, k, err.msg);
    else if (rc)
        TB_WARN("ft", "stream %u: keeping what was sent: %s", s->id, err.msg);
}

/* Fold the packets a back-end kept into its filter state, all at once. */
void tb_stream_fold_kept(tb_node_t *n, tb_stream_st_t *s)
{
    const tb_filter_t *f = tb_filter_reg_get(n->filters, s->up);
    if (!s->kept.n || !f)
        return;
    keep_run(n, s, f, s->kept.v, s->kept.n);
    tb_plist_clear(&s->kept);
}

void tb_stream_keep(tb_node_t *n, uint32_t id, tbon_packet_t *p)
{
    tb_stream_st_t *s = n->ft->ready(n) ? get(n, id) : NULL; /* no fault tolerance: no cost */
    const tb_filter_t *f = s ? tb_filter_reg_get(n->filters, s->up) : NULL;
    if (!f || !f->get_state || !p)
        return;
    /* A filter with a keep function takes each packet at once, while it is
     * in the cache; the others run over 64 packets at a time, since one
     * pass of a filter over a batch costs about what one packet's does. */
    if (f->keep) {
        keep_run(n, s, f, &p, 1);
        return;
    }
    tbon_packet_list_push(&s->kept, tbon_packet_ref(p));
    if (s->kept.n >= 64)
        tb_stream_fold_kept(n, s);
}

void tb_stream_graft(tb_node_t *n, tb_stream_st_t *s)
{
    tb_ctl_graft_t g = { stream_def(s), s->sent_key, s->last_q };
    tb_node_send_ctl(n, n->parent, TB_CTL_GRAFT, tb_ctl_graft_encode(&g));
}

/* Does the subtree of rank o hold a member of s (for a broadcast stream:
 * any back-end, or a commnode that back-ends may join)? */
static int concerns(const tb_node_t *n, const tb_stream_st_t *s, tbon_rank_t o)
{
    if (s->bcast)
        return 1;
    for (size_t m = 0; m < s->nmembers; m++)
        for (tbon_rank_t r = s->members[m]; r != TBON_RANK_NONE && r < tb_topology_size(n->topo);
             r = tb_topology_parent(n->topo, r))
            if (r == o)
                return 1;
    return 0;
}

/* The parameters of s for a child (TB_CTL_PARAMS), or NULL if none are set. */
static tbon_packet_t *params_packet(const tb_stream_st_t *s, int which)
{
    const tbon_packet_t *p = which == TBON_FILTER_PARAM_DOWN ? s->down_params : s->up_params;
    if (!p)
        return NULL;
    size_t len;
    const uint8_t *pl = tb_packet_payload(p, &len);
    return tb_ctl_params_encode(&(tb_ctl_params_t){ s->id, which, tbon_packet_tag(p), pl, len });
}

void tb_stream_catch_up(tb_node_t *n, size_t i)
{
    tb_child_t *ch = &n->child[i];
    if (!ch->conn)
        return;
    if (!ch->is_be)
        tb_node_send_filters(n, ch->conn);
    for (size_t id = 0; id < n->nstreams; id++) {
        tb_stream_st_t *s = n->streams[id];
        if (!s || s->part[i] || !concerns(n, s, ch->rank))
            continue;
        tb_ctl_stream_t d = stream_def(s);
        d.sync |= TB_STREAM_CATCHUP;
        tb_node_send_ctl(n, ch->conn, TB_CTL_STREAM, tb_ctl_stream_encode(&d));
        for (int which = TBON_FILTER_PARAM_UP; which <= TBON_FILTER_PARAM_DOWN; which++) {
            tbon_packet_t *p = params_packet(s, which);
            if (p)
                tb_node_send_ctl(n, ch->conn, TB_CTL_PARAMS, p);
        }
    }
}

void tb_stream_caught_up(tb_node_t *n, const tb_ctl_stream_t *d)
{
    if (tb_stream_known(n, d->id))
        return;         /* it grafted the stream itself when it was adopted */
    if (tb_stream_create(n, d->id, d->up, d->sync & ~TB_STREAM_CATCHUP, d->timeout_ms, d->down,
                         d->members, d->nmembers) == 0 && n->parent)
        tb_stream_graft(n, n->streams[d->id]);  /* nothing seen, nothing sent */
}

void tb_stream_bcast_join(tb_node_t *n, size_t i)
{
    for (size_t id = 0; id < n->nstreams; id++) {
        tb_stream_st_t *s = n->streams[id];
        if (!s || !s->bcast || s->part[i])
            continue;
        tb_node_send_ctl(n, n->child[i].conn, TB_CTL_STREAM, stream_packet(s));
        /* A commnode takes part once a back-end below it does: it grafts
         * the stream up then. */
        if (!n->child[i].is_be)
            continue;
        /* It owes the waves of the requests after the last one that passed
         * here (docs/protocol.md 8.4): as an adopted child that had seen
         * them all and answered them all. */
        uint64_t seen = s->last_q;
        if (tb_stream_join(n, s->id, i, ((seen + 1) << 24) - 1, seen) && n->role != TB_ROLE_FE &&
            n->parent)
            tb_stream_graft(n, s);
    }
}

void tb_stream_sent(tb_node_t *n, uint32_t id, uint64_t key)
{
    tb_stream_st_t *s = get(n, id);
    if (s && key > s->sent_key)
        s->sent_key = key;
}

size_t tb_stream_child_bytes(const tb_node_t *n, size_t child)
{
    /* A unit the child has not finished does not count: holding its reading
     * back until that unit is taken would wait forever, the wave needing the
     * rest of it (a wave of packets larger than TB_HWM). */
    return n->child[child].qbytes - n->child[child].qbytes_open;
}
