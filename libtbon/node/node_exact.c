/* node_exact.c - exact streams: every back-end's contribution folded once,
 * also when commnodes die (docs/fault-tolerance.md, "Exact results when
 * commnodes die"; docs/protocol.md 8.6).
 *
 * A stream is exact when its up filter is associative (filter.h: partials
 * may be folded in any grouping and order), fault tolerance is on and it
 * waits for waves. Then:
 *  - every node keeps the units it sent up (the ret ring) until the FE says
 *    their waves are delivered (TB_CTL_DONE, every TB_DONE_EVERY waves);
 *  - an adopted node sends its kept units to its new parent again, flagged
 *    LATE; a unit that comes for a wave a node has closed is LATE too;
 *  - a LATE unit is never folded below the FE: each node sends it on up as
 *    it is (and keeps it, in case it is orphaned in turn);
 *  - the FE folds a LATE unit into its wave unless its coverage overlaps
 *    what the wave holds (it was counted before the failure: a copy), and
 *    holds a wave that lacks back-ends alive and expected while a failure is
 *    being repaired (an orphan cut off, a graft to come): what they had sent
 *    comes back with their adoption, ahead of its report;
 *  - no node folds two units whose coverages overlap (tb_exact_disjoint).
 * Seed 003 (Arnold and Miller, section IV-D) left exact results for filters
 * that are not idempotent as future work; this is tbon's answer for the
 * associative ones. */
#include "node/node_int.h"
#include "util/hot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/packet_int.h"
#include "util/endian.h"
#include "util/log.h"

/* Bounds of what a stream keeps of its sent units: past them the oldest go
 * (a failure may then lose that wave here: the FE says what it lacks). */
#define TB_RET_MAX       65536
#define TB_RET_BYTES     (64u << 20)
/* The FE's late partials of waves not delivered: after a failure every
 * orphan sends again what it has of the waves in flight (128 orphans of a
 * 32x32 tree with 64 waves in flight: 8,192 of them). Past these bounds the
 * oldest go, and the waves up to them are no longer waited for. */
#define TB_LATE_MAX      (1u << 20)
#define TB_LATE_BYTES    (256u << 20)
/* The FE's mark moves every this many delivered waves, and rides down on
 * the stream's next request (TB_FRAME_F_DONE); it goes alone (TB_CTL_DONE)
 * when it has moved this many times with no request to carry it (waves
 * sent in a burst, then received, or sent by back-ends unasked): a frame to
 * every node for each TB_DONE_EVERY waves cost pipelined 8x8 waves 5%, one
 * for each 256 still 2,000 wake-ups in a bench_tree run (bench/RESULTS.md).
 * What a node keeps meanwhile is bounded (TB_RET_MAX, TB_RET_BYTES). */
#define TB_DONE_EVERY    32
#define TB_DONE_ALONE    64

struct tb_ret {
    uint64_t key;
    tbon_packet_t *p;
    int more;
};

static size_t pbytes(const tbon_packet_t *p)
{
    size_t len;
    tb_packet_payload(p, &len);
    return len + 64;
}

TB_HOT static void ret_drop_head(tb_ring_t *r, size_t *bytes)
{
    struct tb_ret *e = tb_ring_at(r, 0);
    if (bytes)
        *bytes -= pbytes(e->p);
    tbon_packet_unref(e->p);
    tb_ring_drop(r);
}

TB_HOT static void ret_push(tb_ring_t *r, size_t *bytes, tbon_packet_t *p, int more, uint64_t key)
{
    if (!r->size)
        tb_ring_init(r, sizeof(struct tb_ret));
    struct tb_ret *e = tb_ring_push(r);
    if (!e) {
        tbon_packet_unref(p);
        return;
    }
    *e = (struct tb_ret){ key, p, more };
    if (bytes)
        *bytes += pbytes(p);
}

/* A back-end keeps what it sent as bytes in one buffer, not as packets:
 * with many waves in flight a thousand back-ends keeping a packet each per
 * wave made pipelined waves on 32x32 15% slower (the memory, not the CPU:
 * bench/RESULTS.md); its parent knows whose they are (a back-end's unit
 * covers the back-end). Entries: struct tb_bret in s->ex.ret, bytes from
 * s->ex.bbuf + bhead on. */
struct tb_bret {
    uint64_t key;
    uint32_t len;
    int32_t  tag;
    int      more;
};

static void be_retain(tb_stream_st_t *s, const tbon_packet_t *p, int more, uint64_t key)
{
    size_t len;
    const uint8_t *pl = tb_packet_payload(p, &len);
    while (s->ex.ret.len && (s->ex.ret.len >= TB_RET_MAX || s->ex.ret_bytes + len > TB_RET_BYTES)) {
        const struct tb_bret *e = tb_ring_at(&s->ex.ret, 0);
        s->ex.bhead += e->len;
        s->ex.ret_bytes -= e->len;
        tb_ring_drop(&s->ex.ret);
    }
    if (!s->ex.ret.len)
        s->ex.bhead = s->ex.btail = 0;
    if (s->ex.btail + len > s->ex.bcap) {
        if (s->ex.bhead > 0) {         /* compact, then grow if still short */
            memmove(s->ex.bbuf, s->ex.bbuf + s->ex.bhead, s->ex.btail - s->ex.bhead);
            s->ex.btail -= s->ex.bhead;
            s->ex.bhead = 0;
        }
        if (s->ex.btail + len > s->ex.bcap) {
            /* small at first: a tool may have thousands of streams, each
             * keeping one small answer (4 KiB each was 40 MiB a back-end
             * at 10,000 streams, and most of its time in page faults) */
            size_t nc = s->ex.bcap ? s->ex.bcap : 128;
            while (nc < s->ex.btail + len)
                nc *= 2;
            uint8_t *nb = realloc(s->ex.bbuf, nc);
            if (!nb)
                return;
            s->ex.bbuf = nb;
            s->ex.bcap = nc;
        }
    }
    if (!s->ex.ret.size)
        tb_ring_init(&s->ex.ret, sizeof(struct tb_bret));
    if (!s->ex.ret.cap)
        (void)tb_ring_reserve(&s->ex.ret, 4);   /* one per stream: small first */
    struct tb_bret *e = tb_ring_push(&s->ex.ret);
    if (!e)
        return;
    memcpy(s->ex.bbuf + s->ex.btail, pl, len);
    s->ex.btail += len;
    s->ex.ret_bytes += len;
    *e = (struct tb_bret){ key, (uint32_t)len, tbon_packet_tag(p), more };
}

static void be_trim(tb_stream_st_t *s, uint64_t key)
{
    while (s->ex.ret.len && ((struct tb_bret *)tb_ring_at(&s->ex.ret, 0))->key <= key) {
        const struct tb_bret *e = tb_ring_at(&s->ex.ret, 0);
        s->ex.bhead += e->len;
        s->ex.ret_bytes -= e->len;
        tb_ring_drop(&s->ex.ret);
    }
    if (!s->ex.ret.len && s->ex.bcap) {    /* all delivered: an idle stream keeps nothing */
        free(s->ex.bbuf);
        s->ex.bbuf = NULL;
        s->ex.bcap = s->ex.bhead = s->ex.btail = 0;
        tb_ring_free(&s->ex.ret);
    }
}

TB_HOT void tb_exact_retain(tb_node_t *n, tb_stream_st_t *s, tbon_packet_t *p, int more, uint64_t key)
{
    if (key <= s->ex.done && s->ex.done)
        return;             /* delivered already */
    if (n->role == TB_ROLE_BE) {
        be_retain(s, p, more, key);
        return;
    }
    while (s->ex.ret.len && (s->ex.ret.len >= TB_RET_MAX || s->ex.ret_bytes + pbytes(p) > TB_RET_BYTES))
        ret_drop_head(&s->ex.ret, &s->ex.ret_bytes);
    ret_push(&s->ex.ret, &s->ex.ret_bytes, tbon_packet_ref(p), more, key);
}

static void ret_trim(tb_ring_t *r, size_t *bytes, uint64_t key)
{
    while (r->len && ((struct tb_ret *)tb_ring_at(r, 0))->key <= key)
        ret_drop_head(r, bytes);
}

/* TB_CTL_DONE for s up to key, to the children that take part. */
static void send_done(tb_node_t *n, const tb_stream_st_t *s, uint64_t key)
{
    tbon_packet_t *p = tb_ctl_done_encode(&(tb_ctl_done_t){ s->id, key });
    for (size_t i = 0; p && i < n->nchild; i++)
        if (s->part[i] && n->child[i].conn)
            tb_node_send_ctl(n, n->child[i].conn, TB_CTL_DONE, tbon_packet_ref(p));
    tbon_packet_unref(p);
}

TB_HOT void tb_exact_done(tb_node_t *n, uint32_t stream, uint64_t key, int alone)
{
    tb_stream_st_t *s = stream < n->nstreams ? n->streams[stream] : NULL;
    if (!s || key <= s->ex.done || n->role == TB_ROLE_FE)
        return;
    s->ex.done = key;
    /* Kept units are in the order they went; a late one may follow a later
     * wave's, and then waits for a later DONE (the ring is not walked). */
    if (n->role == TB_ROLE_BE)
        be_trim(s, key);
    else
        ret_trim(&s->ex.ret, &s->ex.ret_bytes, key);
    tb_reqs_trim(s, key >> 24);
    if (alone && n->role != TB_ROLE_BE) {
        s->ex.done_down = key;
        send_done(n, s, key);
    }
}

uint64_t tb_exact_mark(tb_stream_st_t *s)
{
    if (s->ex.done <= s->ex.done_down)
        return 0;
    s->ex.done_down = s->ex.done;
    s->ex.marks_held = 0;
    return s->ex.done;
}

TB_HOT int tb_exact_take_mark(const tb_conn_t *c, tb_frame_t *f, uint64_t *done)
{
    *done = 0;
    if (!(f->hdr.flags & TB_FRAME_F_DONE))
        return 0;
    if (f->hdr.type != TB_FRAME_DATA || c->index >= 0 || f->hdr.len <= 8) {
        snprintf(((tb_conn_t *)c)->why, sizeof c->why, "a delivered mark on %s",
                 f->hdr.type != TB_FRAME_DATA ? "a frame that is not DATA"
                 : c->index >= 0 ? "a frame from a child" : "a frame with no packet before it");
        return TBON_EFORMAT;
    }
    f->hdr.len -= 8;
    *done = tb_get64(f->payload + f->hdr.len);
    if (!*done) {
        snprintf(((tb_conn_t *)c)->why, sizeof c->why, "a delivered mark of wave 0");
        return TBON_EFORMAT;
    }
    return 0;
}

TB_HOT void tb_exact_delivered(tb_node_t *n, tb_stream_st_t *s, uint64_t key)
{
    ret_trim(&s->ex.late, &s->ex.late_bytes, key);
    if (++s->ex.undone < TB_DONE_EVERY)
        return;
    s->ex.undone = 0;
    s->ex.done = key;
    if (++s->ex.marks_held < TB_DONE_ALONE)
        return;             /* it rides on the next request */
    s->ex.marks_held = 0;
    s->ex.done_down = key;
    send_done(n, s, key);
}

static void send_late(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more, uint64_t key)
{
    tbon_rank_t src = tbon_packet_source(p);
    uint16_t fl = TB_FRAME_F_LATE | TB_FRAME_F_COVER | (more ? TB_FRAME_F_MORE : 0);
    if (n->parent && !n->parent->closed)
        tb_conn_send_packet_key(n->parent, TB_FRAME_DATA, fl, stream, tbon_packet_tag(p),
                                src == TBON_RANK_NONE ? n->rank : src, key, p);
}

void tb_exact_replay(tb_node_t *n, tb_stream_st_t *s)
{
    if (!s->ex.ret.len)
        return;
    TB_INFO("ft", "stream %u: %zu unit%s sent up before the adoption go again to the new "
            "parent", s->id, s->ex.ret.len, s->ex.ret.len == 1 ? "" : "s");
    size_t off = s->ex.bhead;
    for (size_t j = 0; j < s->ex.ret.len; j++) {
        if (n->role == TB_ROLE_BE) {
            const struct tb_bret *b = tb_ring_at(&s->ex.ret, j);
            tbon_packet_t *p = tb_packet_decode(s->ex.bbuf + off, b->len, b->tag, s->id, n->rank,
                                                NULL);
            off += b->len;
            if (p)
                send_late(n, s->id, p, b->more, b->key);
            tbon_packet_unref(p);
            continue;
        }
        const struct tb_ret *e = tb_ring_at(&s->ex.ret, j);
        send_late(n, s->id, e->p, e->more, e->key);
    }
}

void tb_exact_late(tb_node_t *n, tb_stream_st_t *s, tbon_packet_t *p, int more, uint64_t key)
{
    if (tb_log_enabled(TBON_LOG_DEBUG)) {
        char who[80];
        tb_ranks_format(tb_packet_cover(p), who, sizeof who);
        TB_DEBUG("stream", "stream %u: a late partial of wave %llu.%llu over %s%s", s->id,
                 (unsigned long long)(key >> 24), (unsigned long long)(key & 0xffffff), who,
                 n->role != TB_ROLE_FE ? ": sent on" : "");
    }
    if (n->role != TB_ROLE_FE) {
        /* Kept as what we sent (we may be orphaned before it is delivered),
         * and sent on as it is. */
        tb_exact_retain(n, s, p, more, key);
        send_late(n, s->id, p, more, key);
        tbon_packet_unref(p);
        return;
    }
    if ((s->has_closed && key <= s->closed) || (s->ex.done && key <= s->ex.done)) {
        TB_DEBUG("stream", "stream %u: a late partial of wave %llu.%llu, delivered already, "
                 "dropped", s->id, (unsigned long long)(key >> 24),
                 (unsigned long long)(key & 0xffffff));
        tbon_packet_unref(p);
        return;
    }
    while (s->ex.late.len && (s->ex.late.len >= TB_LATE_MAX ||
                           s->ex.late_bytes + pbytes(p) > TB_LATE_BYTES)) {
        uint64_t k = ((struct tb_ret *)tb_ring_at(&s->ex.late, 0))->key;
        if (k > s->ex.late_lost)
            s->ex.late_lost = k;
        TB_WARN_LIMITED("stream", "stream %u: more late partials than kept (%u or %u MiB): "
                        "the waves up to %llu go without what they lack", s->id, TB_LATE_MAX,
                        TB_LATE_BYTES >> 20, (unsigned long long)(k >> 24));
        ret_drop_head(&s->ex.late, &s->ex.late_bytes);
    }
    ret_push(&s->ex.late, &s->ex.late_bytes, p, more, key);
}

int tb_exact_hold(tb_node_t *n, tb_stream_st_t *s, uint64_t key)
{
    /* No membership change ever, no partial sent again: nothing to wait for;
     * nor for a wave whose late partials may have been dropped for room. */
    if ((!n->cover.changes && !s->ex.late.len) || key <= s->ex.late_lost)
        return 0;
    /* What the wave holds: its units at the children's heads and its late
     * partials. Only when that lacks a live expected back-end are the later
     * units looked at (the common case, a whole wave, costs no more). */
    tb_ranks_t u, later, d, w;
    tb_ranks_init(&u);
    tb_ranks_init(&later);
    tb_ranks_init(&d);
    tb_ranks_init(&w);
    int blocked = 0;
    for (size_t i = 0; i < n->nchild; i++) {
        blocked |= n->child[i].blocked;
        for (size_t j = 0; j < s->q[i].ring.len; j++) {
            const struct tb_pq_ent *e = tb_ring_at(&s->q[i].ring, j);
            if (e->key != key)
                break;
            if (e->pkt)
                tb_ranks_union(&u, tb_packet_cover(e->pkt));
        }
    }
    for (size_t j = 0; j < s->ex.late.len; j++) {
        const struct tb_ret *e = tb_ring_at(&s->ex.late, j);
        if (e->key == key)
            tb_ranks_union(&u, tb_packet_cover(e->p));
    }
    /* Waited for: a back-end the wave expected, alive and not silent, that
     * has sent nothing for a later wave either (its partials come in order
     * on any path, the ones sent again ahead of the adoption's report and of
     * its answers to requests sent again). One with a later answer here
     * passed this request over, or lost its part of it for good. Not while
     * back-pressure keeps us from reading a child: the wave goes short. */
    tb_cover_awaited(n, s, key >> 24, &u, &d);
    int hold = 0;
    if (d.n && !blocked) {
        for (size_t i = 0; i < n->nchild; i++)
            for (size_t j = 0; j < s->q[i].ring.len; j++) {
                const struct tb_pq_ent *e = tb_ring_at(&s->q[i].ring, j);
                if (e->key > key && e->pkt)
                    tb_ranks_union(&later, tb_packet_cover(e->pkt));
            }
        for (size_t j = 0; j < s->ex.late.len; j++) {
            const struct tb_ret *e = tb_ring_at(&s->ex.late, j);
            if (e->key > key)
                tb_ranks_union(&later, tb_packet_cover(e->p));
        }
        tb_ranks_minus(&w, &d, &later);
        hold = w.n > 0;
    }
    if (hold && tb_log_enabled(TBON_LOG_DEBUG)) {
        char who[160];
        tb_ranks_format(&w, who, sizeof who);
        TB_DEBUG("stream", "stream %u: wave %llu.%llu waits for back-ends %s", s->id,
                 (unsigned long long)(key >> 24), (unsigned long long)(key & 0xffffff), who);
    }
    tb_ranks_free(&w);
    tb_ranks_free(&u);
    tb_ranks_free(&later);
    tb_ranks_free(&d);
    return hold;
}

size_t tb_exact_count_late(const tb_stream_st_t *s, uint64_t key)
{
    size_t c = 0;
    for (size_t j = 0; j < s->ex.late.len; j++)
        c += ((const struct tb_ret *)tb_ring_at(&s->ex.late, j))->key == key;
    return c;
}

size_t tb_exact_take_late(tb_stream_st_t *s, uint64_t key, tbon_packet_t **in)
{
    size_t len = s->ex.late.len, taken = 0;
    for (size_t j = 0; j < len; j++) {
        struct tb_ret e = *(struct tb_ret *)tb_ring_at(&s->ex.late, 0);
        tb_ring_drop(&s->ex.late);
        if (e.key == key) {
            s->ex.late_bytes -= pbytes(e.p);
            in[taken++] = e.p;
        }
        else
            *(struct tb_ret *)tb_ring_push(&s->ex.late) = e;    /* room: one was dropped */
    }
    return taken;
}

TB_HOT size_t tb_exact_disjoint(tb_node_t *n, tb_stream_st_t *s, tbon_packet_t **in, size_t k,
                         const size_t *start, size_t nunits)
{
    tb_ranks_t all, u;
    tb_ranks_init(&all);
    tb_ranks_init(&u);
    size_t out = 0, dropped = 0;
    for (size_t un = 0; un < nunits; un++) {
        size_t a = start[un], b = un + 1 < nunits ? start[un + 1] : k;
        const tb_ranks_t *c1 = b - a == 1 ? tb_packet_cover(in[a]) : NULL;
        /* The common unit: one packet from one range of back-ends, added
         * unless it meets what is counted (then, or with no memory for it,
         * the long way below says so). */
        if (c1 && c1->n == 1 &&
            tb_ranks_add_new(&all, tb_ranks_lo(c1, 0), tb_ranks_hi(c1, 0)) == 0) {
            in[out++] = in[a];
            continue;
        }
        tb_ranks_clear(&u);
        for (size_t j = a; j < b; j++)
            tb_ranks_union(&u, tb_packet_cover(in[j]));
        if (u.n && tb_ranks_overlaps(&all, &u)) {
            char what[120];
            tb_ranks_format(&u, what, sizeof what);
            TB_INFO("stream", "stream %u: a partial result over back-ends %s was counted "
                    "already: this copy is dropped", s->id, what);
            for (size_t j = a; j < b; j++)
                tbon_packet_unref(in[j]);
            dropped += b - a;
            continue;
        }
        tb_ranks_union(&all, &u);
        for (size_t j = a; j < b; j++)
            in[out++] = in[j];
    }
    (void)n;
    (void)dropped;
    tb_ranks_free(&all);
    tb_ranks_free(&u);
    return out;
}

void tb_exact_free(tb_node_t *n, tb_stream_st_t *s)
{
    while (n->role == TB_ROLE_BE && s->ex.ret.len)
        tb_ring_drop(&s->ex.ret);          /* bytes in bbuf: no packets */
    while (s->ex.ret.len)
        ret_drop_head(&s->ex.ret, &s->ex.ret_bytes);
    free(s->ex.bbuf);
    tb_ring_free(&s->ex.ret);
    while (s->ex.late.len)
        ret_drop_head(&s->ex.late, &s->ex.late_bytes);
    tb_ring_free(&s->ex.late);
}
