/* node_reqs.c - the requests a stream keeps after passing them down, until
 * their waves close (or, on an exact stream, until the FE has them): for
 * children adopted before they got them (docs/protocol.md 8.4), and at the
 * FE to tell a request with a wave from one without, and to number the
 * expected back-ends of its result (node_cover.c). */
#include "node/node_int.h"
#include "util/hot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "codec/packet_int.h"

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

TB_HOT static void reqs_drop_oldest(tb_stream_st_t *s)
{
    struct tb_req *e = tb_ring_at(&s->rq.ring, 0);
    if (e->q > s->rq.dropped && (!s->has_closed || e->q > s->closed >> 24))
        s->rq.dropped = e->q;     /* its wave is open: dropped for room */
    size_t len;
    tb_packet_payload(e->p, &len);
    s->rq.bytes -= len;
    tbon_packet_unref(e->p);
    tb_ring_drop(&s->rq.ring);
}

TB_HOT void tb_reqs_keep(tb_stream_st_t *s, uint64_t q, tbon_packet_t *p, uint64_t at)
{
    if (!s->rq.ring.size)
        tb_ring_init(&s->rq.ring, sizeof(struct tb_req));
    size_t len;
    tb_packet_payload(p, &len);
    while (s->rq.ring.len && (s->rq.ring.len >= TB_REQS_KEEP_MAX ||
                           s->rq.bytes + len > TB_REQS_KEEP_BYTES))
        reqs_drop_oldest(s);
    struct tb_req *e = tb_ring_push(&s->rq.ring);
    if (e) {
        *e = (struct tb_req){ q, tbon_packet_ref(p), at };
        s->rq.bytes += len;
    }
}

/* Drop the kept requests up to request q (their waves closed). */
void tb_reqs_trim(tb_stream_st_t *s, uint64_t q)
{
    while (s->rq.ring.len && ((struct tb_req *)tb_ring_at(&s->rq.ring, 0))->q <= q)
        reqs_drop_oldest(s);
}


int tb_reqs_find(const tb_stream_st_t *s, uint64_t q, uint64_t *at)
{
    for (size_t j = 0; j < s->rq.ring.len; j++) {
        const struct tb_req *e = tb_ring_at(&s->rq.ring, j);
        if (e->q == q) {
            *at = e->at;
            return 1;
        }
        if (e->q > q)
            break;
    }
    *at = 0;
    return 0;
}

/* FE: whether request q went down (is kept for its wave) and has a wave. */
int tb_reqs_has_wave(const tb_stream_st_t *s, uint64_t q)
{
    if (q <= s->rq.dropped)
        return 1;               /* dropped from the full ring: assume so */
    for (size_t j = 0; j < s->rq.ring.len; j++) {
        uint64_t r = ((const struct tb_req *)tb_ring_at(&s->rq.ring, j))->q;
        if (r >= q)
            return r == q;
    }
    return 0;
}
void tb_reqs_resend(tb_node_t *n, tb_stream_st_t *s, size_t child, uint64_t seen_to)
{
    for (size_t j = 0; j < s->rq.ring.len; j++) {
        const struct tb_req *e = tb_ring_at(&s->rq.ring, j);
        if (e->q <= seen_to)
            continue;
        if (!s->fwd_from[child])
            s->fwd_from[child] = e->q;
        tb_node_to_child(n, child, s->id, e->p, e->q, 0);
    }
}

void tb_reqs_free(tb_stream_st_t *s)
{
    tb_reqs_trim(s, UINT64_MAX);
    tb_ring_free(&s->rq.ring);
}
