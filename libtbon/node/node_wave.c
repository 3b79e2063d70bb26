/* node_wave.c - the waves of a stream going up: each child's queue of
 * units, a wave collected when every child that owes it has a unit (or, on
 * a timeout stream, when the timer cuts it), the up filter run over it and
 * its output sent on; at the FE, waves that nobody can bring any more given
 * as lost, in order (docs/protocol.md 7.3, 8.4). */
#include "node/node_int.h"
#include "util/hot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "codec/packet_int.h"

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
int tb_stream_members_settled(const tb_node_t *n, const tb_stream_st_t *s)
{
    return members_settled(n, s);
}

/* Run the up filter over a wave and send what it makes up (or to the app). */
/* A wave that gave no packet still counts as this node's contribution to
 * its parent's wave: it goes up as an empty DATA frame (docs/protocol.md
 * 7.3), so no wave waits forever for a child that had nothing to say. */
void tb_wave_empty_up(tb_node_t *n, tb_stream_st_t *s, uint64_t key)
{
    if (n->role == TB_ROLE_FE || s->sync == TBON_SYNC_DONTWAIT || !n->parent || n->parent->closed)
        return;
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .stream = s->id, .source = n->rank, .key = key };
    tb_conn_send_buf(n->parent, &h, NULL, 0);
}

/* FE: the outcome of the wave with key is an error, in its place. */
static void wave_error(tb_node_t *n, tb_stream_st_t *s, uint64_t key, const char *msg)
{
    TB_INFO("filter", "stream %u: the wave of request %llu: %s", s->id,
            (unsigned long long)(key >> 24), msg);
    if (n->cbs.wave_error)
        n->cbs.wave_error(n->cbs.arg, s->id, key >> 24, TBON_EFILTER, msg);
    else if (n->cbs.deliver)
        n->cbs.deliver(n->cbs.arg, s->id, NULL, key >> 24);
}

TB_HOT static void run_up(tb_node_t *n, tb_stream_st_t *s, tbon_packet_t **in, size_t k, uint64_t key)
{
    const tb_filter_t *f = tb_filter_reg_get(n->filters, s->up);
    /* One outcome per wave (docs/api.md): a wave a filter failed over is
     * that error, never a partial result. */
    int per_wave = s->sync != TBON_SYNC_DONTWAIT && key != 0;
    char msg[600];
    TB_PERF_ADD(s, TB_PERF_S_WAVES, 1);
    if (n->role == TB_ROLE_FE && tb_ffault_take_poison(&s->ff, key, msg, sizeof msg)) {
        for (size_t i = 0; i < k; i++)
            tbon_packet_unref(in[i]);
        wave_error(n, s, key, msg);
        return;
    }
    if (k == 0) {
        tb_wave_empty_up(n, s, key);
        return;
    }
    if (!f || s->up == TBON_FILTER_NULL) {
        if (!f && s->up != TBON_FILTER_NULL) {
            snprintf(msg, sizeof msg, "rank %u has no filter %d", n->rank, s->up);
            tb_stream_error(n, s->id, msg);
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
    int rc = tb_stream_run_filter(n, s, f, key, in, k, &out, &s->up_state, &ctx, &err);
    if (rc == TB_FILTER_CRASHED || rc == TB_FILTER_HUNG)
        tb_stream_filter_fault(n, s->id, f, rc == TB_FILTER_HUNG ? 0 : tb_filter_crash_signal(),
                               key, in, k, err.msg);
    else if (rc && per_wave)       /* it returned an error: as a fault of this wave */
        tb_stream_filter_fault(n, s->id, f, -1, key, in, k, err.msg);
    if (rc)
        snprintf(msg, sizeof msg, "rank %u: %s", n->rank, err.msg);
    tb_cover_outputs(in, k, &out, f->get_state ? tb_cover_state(s) : NULL);
    for (size_t i = 0; i < k; i++)
        tbon_packet_unref(in[i]);
    if (rc && !per_wave && rc != TB_FILTER_CRASHED && rc != TB_FILTER_HUNG)
        tb_stream_error(n, s->id, msg);
    if (rc && per_wave) {
        /* what the filter made before it failed is not the wave's result */
        tb_plist_free(&out);
        if (n->role == TB_ROLE_FE)
            wave_error(n, s, key, msg);
        else
            tb_wave_empty_up(n, s, key);
        return;
    }
    for (size_t i = 0; i < out.n; i++) {
        tb_node_to_parent(n, s->id, out.v[i], i + 1 < out.n, key);
        out.v[i] = NULL;
    }
    if (out.n == 0)
        tb_wave_empty_up(n, s, key);
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
        if (!tb_reqs_has_wave(s, q))
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

/* The smallest key at the head of any child's queue. */
static uint64_t next_wave_key(const tb_node_t *n, const tb_stream_st_t *s)
{
    uint64_t key = UINT64_MAX;
    for (size_t i = 0; i < n->nchild; i++)
        if (s->q[i].units && head_key(&s->q[i]) < key)
            key = head_key(&s->q[i]);
    return key;
}

/* Whether the wave of key is complete: every live child that takes part
 * and owes this wave has a unit queued. A dead child's queued units still
 * count, but it is not waited for; neither is an adopted child for the
 * requests it never got (docs/protocol.md 8.4). */
static int wave_complete(const tb_node_t *n, const tb_stream_st_t *s, uint64_t key)
{
    for (size_t i = 0; i < n->nchild; i++)
        if (s->part[i] && n->child[i].conn && !n->child[i].suspect && !s->q[i].units &&
            owes(s, i, key))
            return 0;
    return 1;
}

/* Whether no wave can be complete, whatever its key: a live child that
 * takes part and owes every wave (one not adopted here) has nothing queued.
 * Asked before the wave's key is looked for, which walks every child: this
 * stops at the first such child, starting from the one that held the wave
 * back last time. As a wave's units come in (one per child, in any order),
 * that child is mostly still missing, so each unit but the wave's last
 * costs a look or two instead of two walks over all the children (with 32
 * children, about a sixth of a commnode's instructions per wave went to
 * those walks). */
static int held_back(const tb_node_t *n, tb_stream_st_t *s)
{
    size_t nc = n->nchild, i = s->waiting_on < nc ? s->waiting_on : 0;
    for (size_t k = 0; k < nc; k++, i = i + 1 < nc ? i + 1 : 0) {
        if (!s->q[i].units && s->part[i] && s->seen_to[i] == UINT64_MAX &&
            n->child[i].conn && !n->child[i].suspect) {
            s->waiting_on = i;
            return 1;
        }
    }
    return 0;
}

/* Take the units of key off the children's queues into in[], unit u
 * beginning at in[start[u]]; the number of packets (*nunit: of units).
 * *who: the children that took part (for the debug line). */
static size_t take_units(tb_node_t *n, tb_stream_st_t *s, uint64_t key, tbon_packet_t **in,
                         size_t *start, size_t *nunit, uint64_t *who)
{
    size_t k = 0;
    for (size_t i = 0; i < n->nchild; i++) {
        if (!s->q[i].units || head_key(&s->q[i]) != key)
            continue;
        start[(*nunit)++] = k;
        *who |= i < 64 ? (uint64_t)1 << i : 0;
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
    return k;
}

/* The wave of key is closed here (its k packets taken): its deadline
 * goes, and at the FE its request's number is noted for its expected
 * back-ends; its kept requests go (an exact stream keeps them below the FE
 * until the FE has the wave: an orphan adopted here later may not have
 * had them). */
static void close_wave(tb_node_t *n, tb_stream_st_t *s, uint64_t key, size_t k, uint64_t who)
{
    set_deadline(n, s, 0);
    TB_DEBUG("wave", "stream %u: wave %llu.%llu of %zu packets, children %#llx; %zu still "
             "have units", s->id, (unsigned long long)(key >> 24),
             (unsigned long long)(key & 0xffffff), k, (unsigned long long)who, s->nonempty);
    s->closed = key;
    s->has_closed = 1;
    if (n->role == TB_ROLE_FE) {
        uint64_t at;
        if (tb_reqs_find(s, key >> 24, &at))
            tb_cover_wave(s, key >> 24, at);
        else
            tb_cover_wave(s, 0, 0);
    }
    if (!s->exact || n->role == TB_ROLE_FE)
        tb_reqs_trim(s, key >> 24);
}

/* Collect waves while one is complete (or, cut = 1, take what is there). A
 * wave is the units with the smallest key at the head of any child's queue
 * (docs/protocol.md 8.4); it is complete when every child that counts has a
 * unit queued: a child whose oldest unit has a later key had nothing for it
 * (it never got that request, as after an adoption) and is not waited for.
 * A unit is a child's packets up to the first without TB_FRAME_F_MORE. */
TB_HOT static void waves(tb_node_t *n, tb_stream_st_t *s, int cut)
{
    tbon_packet_t *stackv[64];
    size_t stacku[65];
    int fe_exact = s->exact && n->role == TB_ROLE_FE;
    while (s->nonempty > 0) {
        if (!cut && held_back(n, s))
            break;
        uint64_t key = next_wave_key(n, s);
        if ((!cut && !wave_complete(n, s, key)) || !gap_settled(n, s, key >> 24, cut))
            break;
        /* An exact stream's wave that lacks back-ends a failure being
         * repaired may bring back waits (node_exact.c). */
        if (fe_exact && !cut && tb_exact_hold(n, s, key))
            break;
        size_t nlate = fe_exact ? tb_exact_count_late(s, key) : 0, nunit = nlate;
        size_t total = s->extra.n + nlate;
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
        nunit = 0;              /* counted again as the units are taken */
        uint64_t who = 0;
        size_t k = take_units(n, s, key, in, start, &nunit, &who);
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
        close_wave(n, s, key, k, who);
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

TB_HOT void tb_stream_up(tb_node_t *n, size_t child, uint32_t stream, tbon_packet_t *p, int more,
                  uint64_t key, int late)
{
    tb_stream_st_t *s = tb_stream_get(n, stream);
    if (!s || !s->part[child]) {
        if (!tb_stream_ended(n, stream))
            TB_WARN("stream", "packet from rank %u on unknown stream %u dropped",
                    n->child[child].rank, stream);
        tbon_packet_unref(p);
        return;
    }
    if (p)
        TB_PERF_PKT(s, TB_PERF_S_UP_IN, p);
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
    tb_reqs_trim(s, q);
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

TB_HOT void tb_stream_settle_due(tb_node_t *n)
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
    /* FE: a membership change, whatever said it first: a failure found in
     * the view closes a child here before its TBON_EV_NODE_FAILED is
     * emitted, and the waves below must already know that an exact wave
     * short of that subtree may be waited for (tb_exact_hold). */
    if (n->role == TB_ROLE_FE)
        n->cover.changes++;
    for (size_t id = 0; id < n->nstreams; id++) {
        tb_stream_st_t *s = n->streams[id];
        if (!s || !s->part[child])
            continue;
        /* A dead child is dropped from the wave being collected (docs/protocol.md 7.3);
         * what it already sent still counts. */
        s->part[child] = 0;
        if (s->sync != TBON_SYNC_DONTWAIT)
            waves(n, s, 0);
        /* The last one gone (every back-end below left or died): the
         * requests it had not answered are answered here, empty, so that no
         * wave above waits for us forever. */
        if (!tb_stream_takes_part(n, s) && s->sync != TBON_SYNC_DONTWAIT && n->role != TB_ROLE_FE) {
            uint64_t from = s->has_closed ? (s->closed >> 24) + 1 : 1;
            for (uint64_t q = from; q <= s->last_q; q++)
                tb_wave_empty_up(n, s, q << 24);
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
void tb_wave_free(tb_node_t *n, tb_stream_st_t *s)
{
    set_deadline(n, s, 0);
    for (size_t i = 0; s->q && i < n->nchild; i++) {
        n->child[i].qbytes -= s->q[i].bytes;
        n->child[i].qbytes_open -= s->q[i].open_bytes;
        pq_free(&s->q[i]);
    }
    free(s->q);
    s->q = NULL;
}
