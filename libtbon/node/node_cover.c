/* node_cover.c - coverage: which back-ends a partial result holds, as it
 * travels up (docs/api.md, "Coverage"; docs/protocol.md 2.6).
 *
 * A back-end's packet covers the back-end itself: its parent says so when it
 * takes the packet, so back-ends send nothing for it. Every packet a filter
 * makes covers the union of its wave's input; one it passes on unchanged
 * keeps what it had. A commnode sends a packet's coverage with it (a trailer,
 * TB_FRAME_F_COVER); the front-end adds to each result the back-ends its wave
 * expected: the stream's members in the tree when the wave's request went
 * down. Membership changes are numbered by the requests sent so far
 * (tb_cover_member_event), so that a back-end that failed after a request
 * went is expected in that wave, and one that joined after it is not. */
#include "node/node_int.h"
#include "util/hot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/packet_int.h"
#include "util/log.h"

TB_HOT int tb_cover_take(tb_node_t *n, const tb_conn_t *c, tb_frame_t *f, tb_ranks_t *cv)
{
    if (!(f->hdr.flags & TB_FRAME_F_COVER))
        return 0;
    char why[120];
    int t = tb_ranks_decode_tail(cv, f->payload, f->hdr.len, why, sizeof why);
    if (t < 0 || f->hdr.type != TB_FRAME_DATA || (size_t)t >= f->hdr.len) {
        snprintf(((tb_conn_t *)c)->why, sizeof c->why, "bad coverage on a %s frame: %s",
                 f->hdr.type != TB_FRAME_DATA ? "non-DATA" : "DATA",
                 t < 0 ? why : "no packet before it");
        tb_ranks_free(cv);
        return TBON_EFORMAT;
    }
    (void)n;
    f->hdr.len -= (uint32_t)t;
    return 0;
}

TB_HOT void tb_cover_received(tb_node_t *n, const tb_conn_t *c, tbon_packet_t *p, tb_ranks_t *cv)
{
    if (c->index < 0) {
        tb_ranks_free(cv);          /* downstream: no result */
        return;
    }
    tb_ranks_t *pc = tb_packet_cover_mut(p);
    if (cv->n)
        tb_ranks_copy(pc, cv);
    else if (n->child[c->index].is_be)
        tb_ranks_add(pc, n->child[c->index].rank);
    tb_ranks_free(cv);
}

TB_HOT void tb_cover_outputs(tbon_packet_t *const in[], size_t k, tbon_packet_list_t *out,
                      tb_ranks_t *state)
{
    tb_ranks_t u;
    tb_ranks_init(&u);
    for (size_t i = 0; i < k; i++)
        tb_ranks_union(&u, tb_packet_cover(in[i]));
    for (size_t j = 0; j < out->n; j++)
        if (!tb_packet_cover(out->v[j])->n)
            tb_ranks_copy(tb_packet_cover_mut(out->v[j]), &u);
    if (state)
        tb_ranks_union(state, &u);
    tb_ranks_free(&u);
}

/* FE: the members of s (all back-ends for a broadcast stream) that its wave
 * of request q expected: in the tree when q went down (their join numbered
 * before it) and not failed or gone before it. */
static void expected(const tb_node_t *n, const tb_stream_st_t *s, uint64_t at, tb_ranks_t *e)
{
    size_t size = tb_topology_size(n->topo), cnt = s->bcast ? size : s->nmembers;
    const struct tb_cover_fe *cf = &n->cover;
    for (size_t m = 0; m < cnt; m++) {
        tbon_rank_t r = s->bcast ? (tbon_rank_t)m : s->members[m];
        if (r >= size || tb_topology_role(n->topo, r) != TB_ROLE_BE)
            continue;
        uint64_t born = r < cf->n ? cf->born[r] : 0, gone = r < cf->n ? cf->gone[r] : 0;
        int alive = tb_topology_alive(n->topo, r);
        if (born > at)
            continue;           /* joined after the request went (or joins still) */
        if (!alive && (!gone || gone <= at))
            continue;           /* gone before it (or before we kept count) */
        tb_ranks_add(e, r);
    }
}

/* expected() of the request numbered at, into e (emptied first). The set of
 * a request sent after the last membership change is the members in the
 * tree now: kept with the stream, and made again only after a change (an
 * FE with waves in flight asks for it at every wave: made each time, it
 * walked every member per wave, 5% of pipelined 8x8 waves). */
TB_HOT static void expected_at(tb_node_t *n, tb_stream_st_t *s, uint64_t at, tb_ranks_t *e)
{
    const struct tb_cover_fe *cf = &n->cover;
    if (at >= cf->changed && s->cov.exp_changes == cf->changes && s->cov.exp_valid) {
        tb_ranks_copy(e, &s->cov.exp);
        return;
    }
    tb_ranks_clear(e);
    expected(n, s, at, e);
    if (at >= cf->changed) {
        tb_ranks_copy(&s->cov.exp, e);
        s->cov.exp_changes = cf->changes;
        s->cov.exp_valid = 1;
    }
}

/* Rank r, or a node above it, is suspected now (silent: waves do not wait
 * for it). */
static int under_suspicion(const tb_node_t *n, tbon_rank_t r)
{
    const struct tb_cover_fe *cf = &n->cover;
    for (int hops = 0; r != TBON_RANK_NONE && r != n->rank && hops < 64; hops++) {
        if (r < cf->n && cf->susp[r])
            return 1;
        r = tb_topology_parent(n->topo, r);
    }
    return 0;
}

void tb_cover_awaited(tb_node_t *n, tb_stream_st_t *s, uint64_t q, const tb_ranks_t *have,
                      tb_ranks_t *out)
{
    uint64_t at = 0;
    if (q)
        tb_reqs_find(s, q, &at);
    tb_ranks_t e, d;
    tb_ranks_init(&e);
    tb_ranks_init(&d);
    expected_at(n, s, at ? at : n->cover.reqs, &e);
    tb_ranks_minus(&d, &e, have);
    tb_ranks_clear(out);
    for (size_t i = 0; i < d.n; i++)
        for (uint32_t r = tb_ranks_lo(&d, i);; r++) {
            if (tb_topology_alive(n->topo, r) && !under_suspicion(n, r))
                tb_ranks_add(out, r);
            if (r == tb_ranks_hi(&d, i))
                break;
        }
    tb_ranks_free(&e);
    tb_ranks_free(&d);
}

TB_HOT void tb_cover_deliver(tb_node_t *n, uint32_t stream, tbon_packet_t *p, uint64_t q)
{
    tb_stream_st_t *s = stream < n->nstreams ? n->streams[stream] : NULL;
    if (!s || s->sync == TBON_SYNC_DONTWAIT)
        return;                 /* no waves: each packet is all it says */
    uint64_t at = q && q == s->cov.q ? s->cov.at : n->cover.reqs;
    tb_ranks_t e;
    tb_ranks_init(&e);
    expected_at(n, s, at, &e);
    tb_ranks_union(&e, tb_packet_cover(p));
    tb_packet_set_expect(p, &e);
    tb_ranks_free(&e);
}

uint64_t tb_cover_request(tb_node_t *n)
{
    return ++n->cover.reqs;
}

/* Room for rank r in the per-rank arrays; 0 or TBON_ENOMEM. */
static int cover_room(struct tb_cover_fe *cf, tbon_rank_t r)
{
    if (r < cf->n)
        return 0;
    size_t nn = cf->n ? cf->n : 64;
    while (nn <= r)
        nn *= 2;
    uint64_t *b = realloc(cf->born, nn * sizeof *b);
    if (!b)
        return TBON_ENOMEM;
    cf->born = b;
    uint64_t *g = realloc(cf->gone, nn * sizeof *g);
    if (!g)
        return TBON_ENOMEM;
    cf->gone = g;
    uint8_t *sp = realloc(cf->susp, nn);
    if (!sp)
        return TBON_ENOMEM;
    cf->susp = sp;
    memset(cf->born + cf->n, 0, (nn - cf->n) * sizeof *b);
    memset(cf->gone + cf->n, 0, (nn - cf->n) * sizeof *g);
    memset(cf->susp + cf->n, 0, nn - cf->n);
    cf->n = nn;
    return 0;
}

void tb_cover_joining(tb_node_t *n, tbon_rank_t r)
{
    struct tb_cover_fe *cf = &n->cover;
    if (r == TBON_RANK_NONE || cover_room(cf, r))
        return;
    cf->born[r] = UINT64_MAX;       /* until its TBON_EV_NODE_JOINED */
    cf->gone[r] = 0;
    cf->susp[r] = 0;
    cf->changes++;
}

void tb_cover_member_event(tb_node_t *n, tbon_event_type_t type, tbon_rank_t r)
{
    struct tb_cover_fe *cf = &n->cover;
    if (r == TBON_RANK_NONE)
        return;
    if (cover_room(cf, r))
        return;
    if (type == TBON_EV_NODE_SUSPECT || type == TBON_EV_NODE_ALIVE) {
        cf->susp[r] = type == TBON_EV_NODE_SUSPECT;
        cf->changes++;
        return;
    }
    /* Numbered one past the requests sent so far: the waves of those
     * requests expected (or did not expect) the rank as it was before. */
    if (type == TBON_EV_NODE_JOINED) {
        cf->born[r] = cf->reqs + 1;
        cf->gone[r] = 0;
    } else if (type == TBON_EV_NODE_FAILED || type == TBON_EV_NODE_LEFT) {
        cf->gone[r] = cf->reqs + 1;
        cf->susp[r] = 0;
    } else {
        return;
    }
    cf->changes++;
    cf->changed = cf->reqs + 1;
}

void tb_cover_free(tb_node_t *n)
{
    free(n->cover.born);
    free(n->cover.gone);
    free(n->cover.susp);
    memset(&n->cover, 0, sizeof n->cover);
}

/* ---- the stream's part (tb_cover_st_t) ---- */

void tb_cover_st_init(tb_cover_st_t *cv)
{
    memset(cv, 0, sizeof *cv);
    tb_ranks_init(&cv->state);
    tb_ranks_init(&cv->exp);
}

void tb_cover_st_free(tb_cover_st_t *cv)
{
    tb_ranks_free(&cv->state);
    tb_ranks_free(&cv->exp);
}

void tb_cover_wave(tb_stream_st_t *s, uint64_t q, uint64_t at)
{
    s->cov.q = q;
    s->cov.at = at;
}

tb_ranks_t *tb_cover_state(tb_stream_st_t *s)
{
    return &s->cov.state;
}
