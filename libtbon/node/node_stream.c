/* node_stream.c - the stream object inside a node: its definition, which
 * children take part, its creation, end and parameters, the requests going
 * down, and the grafts and catch-ups that bring adopted and joined children
 * into it. Its waves are node_wave.c's, the requests it keeps
 * node_reqs.c's, its filter calls and their faults node_ffault.c's, what
 * its results hold node_cover.c's, exactness node_exact.c's. */
#include "node/node_int.h"
#include "util/hot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "codec/packet_int.h"

static void stream_free(tb_node_t *n, tb_stream_st_t *s)
{
    if (!s)
        return;
    tb_wave_free(n, s);
    free(s->part);
    free(s->seen_to);
    free(s->fwd_from);
    free(s->sent);
    free(s->members);
    tb_plist_free(&s->extra);
    tb_plist_free(&s->kept);
    tb_cover_st_free(&s->cov);
    tb_exact_free(n, s);
    tb_ffault_st_free(&s->ff);
    tb_reqs_free(s);
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

void tb_stream_end(tb_node_t *n, uint32_t id)
{
    tb_stream_st_t *s = tb_stream_get(n, id);
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
    if (id == 0 || id > (1u << 24) || tb_stream_get(n, id))
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
    tb_cover_st_init(&s->cov);
    tb_ffault_st_init(&s->ff);
    s->id = id;
    s->up = up;
    s->sync = sync;
    s->bcast = bcast;
    s->exact = exact;
    s->timeout_ms = timeout_ms;
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
    tb_stream_st_t *s = tb_stream_get(n, id);
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
            tb_ffault_set_limit(&s->ff, ms);
    }
    size_t len;
    const uint8_t *pl = tb_packet_payload(p, &len);
    tbon_packet_t *fwd = tb_ctl_params_encode(&(tb_ctl_params_t){ id, which, tbon_packet_tag(p),
                                                                 pl, len });
    for (size_t i = 0; fwd && i < n->nchild; i++)
        if (s->part[i] && n->child[i].conn)    /* back-ends run the up filter too */
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

TB_HOT void tb_stream_down(tb_node_t *n, uint32_t stream, tbon_packet_t *p, uint64_t q)
{
    tb_stream_st_t *s = tb_stream_get(n, stream);
    uint64_t at = 0;
    if (s && n->role == TB_ROLE_FE) {
        q = ++s->down_q;           /* requests are numbered per stream at the FE */
        at = tb_cover_request(n);
    }
    if (s && q > s->last_q)
        s->last_q = q;
    if (s && p)
        TB_PERF_PKT(s, TB_PERF_S_DOWN_IN, p);
    if (tb_stream_ended(n, stream)) {
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
        int rc = tb_stream_run_filter(n, s, f, 0, &p, 1, &out, &s->down_state, &ctx, &err);
        if (rc == TB_FILTER_CRASHED || rc == TB_FILTER_HUNG) {
            tb_stream_filter_fault(n, s->id, f, rc == TB_FILTER_HUNG ? 0 : tb_filter_crash_signal(),
                                   0, &p, 1, err.msg);
        } else if (rc) {
            char msg[600];
            snprintf(msg, sizeof msg, "rank %u: %s", n->rank, err.msg);
            tb_stream_error(n, s->id, msg);
        }
        tbon_packet_unref(p);
    } else {
        tbon_packet_list_push(&out, p);
    }
    if (out.n)
        tb_stream_forward_from(n, s, q);
    int keep = s->sync != TBON_SYNC_DONTWAIT && n->ft->ready(n);
    uint64_t done = out.n ? tb_exact_mark(s) : 0;
    for (size_t j = 0; j < out.n; j++) {
        if (keep)
            tb_reqs_keep(s, q, out.v[j], at);
        for (size_t i = 0; i < n->nchild; i++)
            if (tb_stream_child_gets(s, i, q)) {
                TB_PERF_PKT(s, TB_PERF_S_DOWN_OUT, out.v[j]);
                tb_node_to_child(n, i, stream, out.v[j], q, j == 0 ? done : 0);
            }
    }
    tb_plist_free(&out);
    if (!tb_stream_takes_part(n, s))
        tb_wave_empty_up(n, s, q << 24);    /* nobody below answers: we do, with nothing */
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
    return tb_stream_get(n, id) != NULL;
}

int tb_stream_join(tb_node_t *n, uint32_t id, size_t child, uint64_t sent, uint64_t seen_to)
{
    tb_stream_st_t *s = tb_stream_get(n, id);
    if (!s || child >= n->nchild || s->part[child])
        return 0;
    int first = !tb_stream_takes_part(n, s);
    s->part[child] = 1;
    s->sent[child] = sent;
    s->seen_to[child] = seen_to;
    s->fwd_from[child] = 0;
    /* The requests that passed here after the last one the child saw (they
     * died with its old parent, or were sent while it was an orphan) and
     * whose waves are still open: it gets them now, and owes their waves. */
    tb_reqs_resend(n, s, child, seen_to);
    return first;
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

void tb_stream_catch_up(tb_node_t *n, size_t i, uint32_t filters)
{
    tb_child_t *ch = &n->child[i];
    if (!ch->conn)
        return;
    tb_stream_filters_to(n, ch->conn, filters);
    /* A stream it grafted takes part here already (s->part[i]). */
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

size_t tb_stream_child_bytes(const tb_node_t *n, size_t child)
{
    /* A unit the child has not finished does not count: holding its reading
     * back until that unit is taken would wait forever, the wave needing the
     * rest of it (a wave of packets larger than TB_HWM). */
    return n->child[child].qbytes - n->child[child].qbytes_open;
}

uint32_t tb_stream_filters_loaded(const tb_node_t *n)
{
    uint32_t k = 0;
    while (tb_filter_reg_get(n->filters, TBON_FILTER_BUILTIN_COUNT + (int)k))
        k++;
    return k;
}

/* Every plug-in filter loaded so far but the first `skip`, as TB_CTL_FILTER
 * to c (a new child: before any stream that may name one). */
void tb_stream_filters_to(tb_node_t *n, tb_conn_t *c, uint32_t skip)
{
    for (uint32_t k = skip, have = tb_stream_filters_loaded(n); k < have; k++) {
        const tb_filter_t *f = tb_filter_reg_get(n->filters, TBON_FILTER_BUILTIN_COUNT + (int)k);
        tb_node_send_ctl(n, c, TB_CTL_FILTER,
                         tb_ctl_filter_encode(&(tb_ctl_filter_t){ f->id, f->path, f->name }));
    }
}
