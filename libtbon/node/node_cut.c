/* node_cut.c - cut-through at a commnode: the pieces of a large packet
 * (docs/protocol.md 2.5) passed on as they come, where the whole packet
 * would have been passed on unchanged, instead of held here until its last
 * piece came (store and forward: every hop then took as long as the one
 * before it, and a two-hop packet twice as long as a one-hop one;
 * bench/RESULTS.md, issue 32).
 *
 * A packet is passed on when its first piece shows that this node would
 * forward it as it is: a downstream DATA packet on a stream with no
 * downstream filter and no wait (TBON_SYNC_DONTWAIT: nothing is kept to be
 * asked again), not an exact one. Its pieces then go to the children that
 * would have got it, each holding its link (tb_conn_hold) so that nothing
 * else goes between them; the frames queued meanwhile go after the last
 * piece. If the source goes away first, the children are told to drop what
 * they have (TB_FRAME_F_ABORT): the packet is lost, as it was when it never
 * reached this node whole. A child that goes away leaves the packet's
 * links. Any other packet is reassembled here as before.
 */
#include "node/node_int.h"

#include <stdio.h>
#include <stdlib.h>

#include "codec/packet_int.h"
#include "util/log.h"

/* The children a downstream packet with header h goes to, as tb_stream_down
 * would send it, in c->cut_to; 0 if it cannot be passed on piece by piece
 * (then nothing is changed). */
static int begin_down(tb_node_t *n, tb_conn_t *c, const tb_frame_hdr_t *h)
{
    if (h->type != TB_FRAME_DATA || h->flags != TB_FRAME_F_FRAG)
        return 0;
    tb_stream_st_t *s = tb_stream_get(n, h->stream);
    if (!s || tb_stream_ended(n, h->stream) || s->down != TBON_FILTER_NULL ||
        s->sync != TBON_SYNC_DONTWAIT || s->exact)
        return 0;
    uint64_t q = h->key;
    tb_conn_t **to = malloc(n->nchild * sizeof *to + 1);
    if (!to)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < n->nchild; i++) {
        tb_conn_t *t = n->child[i].conn;
        if (!t || t->closed || n->child[i].released)
            continue;
        if (!s->part[i] || t->cut_from) {
            /* A child that does not take part may be one just adopted
             * whose graft of s has not come: by the time the packet is
             * whole here it may have, and get it (node_stream.c). */
            free(to);
            return 0;
        }
        if (s->seen_to[i] == UINT64_MAX || q > s->seen_to[i])
            to[k++] = t;
    }
    if (k == 0) {
        free(to);
        return 0;
    }
    /* what tb_stream_down does before it sends (the request counts as
     * seen here once it is whole: pass_piece) */
    for (size_t i = 0; i < n->nchild; i++)
        if (s->part[i] && !s->fwd_from[i] && s->seen_to[i] != UINT64_MAX && q > s->seen_to[i])
            s->fwd_from[i] = q;
    for (size_t j = 0; j < k; j++)
        tb_conn_hold(to[j], c);
    c->cut_to = to;
    c->cut_n = k;
    return 1;
}

/* The end of c's packet: its links let go (after an ABORT when aborted). */
static void end_cut(tb_conn_t *c, int aborted)
{
    if (aborted)
        TB_INFO("cut", "a packet on stream %u from rank %u ended after %zu bytes: the %zu "
                "links it went on drop it", c->cut_hdr.stream, c->rank, c->cut_len, c->cut_n);
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .flags = TB_FRAME_F_ABORT,
                         .stream = c->cut_hdr.stream, .tag = c->cut_hdr.tag,
                         .source = c->cut_hdr.source, .key = c->cut_hdr.key };
    for (size_t j = 0; j < c->cut_n; j++) {
        if (aborted)
            tb_conn_send_piece(c->cut_to[j], &h, NULL, 0, NULL, 0);
        tb_conn_unhold(c->cut_to[j]);
    }
    free(c->cut_to);
    c->cut_to = NULL;
    c->cut_n = c->cut_len = 0;
    c->cut_on = 0;
}

/* Whether f is the next piece of c's packet (NULL), or why not. */
static const char *bad_piece(const tb_conn_t *c, const tb_frame_hdr_t *h)
{
    const tb_frame_hdr_t *a = &c->cut_hdr;
    if (h->type != a->type || h->stream != a->stream || h->tag != a->tag ||
        h->source != a->source || h->key != a->key)
        return "a piece of another packet before the last piece of the one under way";
    if (h->flags & ~TB_FRAME_F_FRAG)
        return "a piece with flags its first piece did not have";
    if (h->len == 0)
        return "an empty piece of a packet";
    if (h->len > tb_conn_max_packet() - c->cut_len)
        return "a packet over the maximum";
    return NULL;
}

/* Pass f, the next piece of c's packet, on to its links. */
static int pass_piece(tb_node_t *n, tb_conn_t *c, tb_frame_t *f)
{
    const char *bad = bad_piece(c, &f->hdr);
    if (bad) {
        snprintf(c->why, sizeof c->why, "%s (%zu bytes so far, maximum %zu: TBON_MAX_PACKET)",
                 bad, c->cut_len + f->hdr.len, tb_conn_max_packet());
        c->closed = 1;
        end_cut(c, 1);
        tb_frame_release(f);
        return -1;
    }
    int last = !(f->hdr.flags & TB_FRAME_F_FRAG);
    c->cut_len += f->hdr.len;
    tbon_packet_t *piece = tb_packet_raw(f->payload, f->hdr.len);
    if (!piece) {
        TB_WARN("cut", "out of memory for a piece of a packet from rank %u on stream %u: "
                "the packet is dropped", c->rank, f->hdr.stream);
        tb_frame_release(f);
        /* its links drop what they have; the rest of it goes nowhere */
        size_t so_far = c->cut_len;
        end_cut(c, 1);
        c->cut_on = !last;
        c->cut_len = so_far;
        return 1;
    }
    f->payload = NULL;      /* the piece's now */
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .flags = last ? 0 : TB_FRAME_F_FRAG,
                         .stream = f->hdr.stream, .tag = f->hdr.tag,
                         .source = f->hdr.source == TBON_RANK_NONE ? n->rank : f->hdr.source,
                         .key = f->hdr.key };
    for (size_t j = 0; j < c->cut_n; j++)
        if (tb_conn_send_piece(c->cut_to[j], &h, piece, f->crc, NULL, 0) != 0) {
            snprintf(c->cut_to[j]->why, sizeof c->cut_to[j]->why,
                     "out of memory for a piece of a packet");
            c->cut_to[j]->closed = 1;
        }
    tbon_packet_unref(piece);
    tb_frame_release(f);
    if (last) {
        tb_stream_st_t *s = tb_stream_get(n, h.stream);
        if (s && h.key > s->last_q)
            s->last_q = h.key;
        end_cut(c, 0);
    }
    return 1;
}

int tb_cut_frame(tb_node_t *n, tb_conn_t *c, tb_frame_t *f)
{
    if (f->hdr.flags & TB_FRAME_F_ABORT) {
        if (f->hdr.type != TB_FRAME_DATA || f->hdr.len || f->hdr.flags != TB_FRAME_F_ABORT) {
            snprintf(c->why, sizeof c->why, "an ABORT frame with a payload or other flags");
            c->closed = 1;
            tb_frame_release(f);
            return -1;
        }
        tb_conn_drop_packet(c);
        if (c->cut_on)
            end_cut(c, 1);
        tb_frame_release(f);
        return 1;
    }
    if (c->cut_on)
        return pass_piece(n, c, f);
    if (!(f->hdr.flags & TB_FRAME_F_FRAG) || c->frag_len || f->placed || !c->may_cut ||
        n->role != TB_ROLE_COMMNODE || c->index >= 0 || !begin_down(n, c, &f->hdr))
        return 0;
    c->cut_on = 1;
    c->cut_hdr = f->hdr;
    c->cut_len = 0;
    return pass_piece(n, c, f);
}

void tb_cut_forget(tb_conn_t *c)
{
    if (c->cut_on)
        end_cut(c, 1);
    tb_conn_t *src = c->cut_from;
    if (!src)
        return;
    for (size_t j = 0; j < src->cut_n; j++)
        if (src->cut_to[j] == c) {
            src->cut_to[j] = src->cut_to[--src->cut_n];
            break;
        }
    tb_conn_unhold(c);
}
