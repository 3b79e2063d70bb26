/* node_cut.c - cut-through at a commnode: the pieces of a large packet
 * (docs/protocol.md 2.5) passed on as they come, where the whole packet
 * would have been passed on unchanged, instead of held here until its last
 * piece came (store and forward: every hop then took as long as the one
 * before it, and a two-hop packet twice as long as a one-hop one;
 * bench/RESULTS.md, issue 32).
 *
 * A packet is passed on when its first piece shows that this node would
 * forward it as it is, on a stream that waits for nothing
 * (TBON_SYNC_DONTWAIT) and is not exact:
 * - down, from the parent, with no downstream filter, when every connected
 *   child takes part in the stream (one just adopted may not have grafted
 *   it yet, and would miss it); it goes to the children tb_stream_down
 *   would send it to;
 * - up, from a child, with no upstream filter, while we have a parent; the
 *   last piece gets the packet's coverage as tb_stream_up would give it.
 * Each link a packet's pieces go on is held for them (tb_conn_hold): what
 * is queued on it meanwhile goes after the last piece. Two things end a
 * packet early:
 * - its source goes away: the links are told to drop what they have
 *   (TB_FRAME_F_ABORT), and the packet is lost, as it was when it never
 *   reached this node whole;
 * - its source stalls (a paused process) for TB_CUT_STALL_MS while other
 *   frames wait on its links: it is "demoted" - the links drop it, and the
 *   pieces so far, kept for this, become the start of a packet put
 *   together here as any other, sent on when whole.
 * A link that goes away leaves the packet; the others still get it.
 */
#include "node/node_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/packet_int.h"
#include "util/bigmem.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/ranks.h"

/* A source silent this long while frames wait on its links is demoted. */
#define TB_CUT_STALL_MS 250

/* Can a packet on stream h->stream, whose first piece is h, be passed on
 * down? Its links in *to (k of them, malloc'd); 0 if not (then nothing is
 * changed). */
static int targets_down(tb_node_t *n, const tb_frame_hdr_t *h, tb_conn_t ***to, size_t *k)
{
    if (h->flags != TB_FRAME_F_FRAG)
        return 0;
    tb_stream_st_t *s = tb_stream_get(n, h->stream);
    if (!s || s->down != TBON_FILTER_NULL)
        return 0;
    uint64_t q = h->key;
    tb_conn_t **v = malloc(n->nchild * sizeof *v + 1);
    if (!v)
        return 0;
    size_t m = 0;
    for (size_t i = 0; i < n->nchild; i++) {
        tb_conn_t *t = n->child[i].conn;
        if (!t || t->closed || n->child[i].released)
            continue;
        if (!s->part[i] || t->cut_from) {
            /* A child that does not take part may be one just adopted
             * whose graft of s has not come: by the time the packet is
             * whole here it may have, and get it (node_stream.c). */
            free(v);
            return 0;
        }
        if (tb_stream_child_gets(s, i, q))
            v[m++] = t;
    }
    if (m == 0) {
        free(v);
        return 0;
    }
    /* as tb_stream_down before it sends (the request counts as seen here
     * once it is whole: pass_piece) */
    tb_stream_forward_from(n, s, q);
    *to = v;
    *k = m;
    return 1;
}

/* The same up, from child slot i: to the parent. */
static int targets_up(tb_node_t *n, size_t i, const tb_frame_hdr_t *h, tb_conn_t ***to,
                      size_t *k)
{
    if (h->flags & ~(TB_FRAME_F_FRAG | TB_FRAME_F_MORE | TB_FRAME_F_COVER))
        return 0;
    tb_stream_st_t *s = tb_stream_get(n, h->stream);
    tb_conn_t *p = n->parent;
    if (!s || i >= n->nchild || !s->part[i] || s->up != TBON_FILTER_NULL || !p || p->closed ||
        p->cut_from)
        return 0;
    if (!(*to = malloc(sizeof **to)))
        return 0;
    (*to)[0] = p;
    *k = 1;
    return 1;
}

static void arm(tb_node_t *n, int64_t now);

/* Does the packet whose first piece is f, from c, go on piece by piece? */
static int begin(tb_node_t *n, tb_conn_t *c, const tb_frame_t *f)
{
    const tb_frame_hdr_t *h = &f->hdr;
    if (!c->may_cut || h->type != TB_FRAME_DATA ||
        !(h->flags & TB_FRAME_F_FRAG) || c->frag_len || f->placed)
        return 0;
    tb_stream_st_t *s = tb_stream_get(n, h->stream);
    if (!s || tb_stream_ended(n, h->stream) || s->sync != TBON_SYNC_DONTWAIT || s->exact)
        return 0;
    tb_conn_t **to = NULL;
    size_t k = 0;
    if (c->index < 0 ? !targets_down(n, h, &to, &k)
                     : !targets_up(n, (size_t)c->index, h, &to, &k))
        return 0;
    for (size_t j = 0; j < k; j++)
        tb_conn_hold(to[j], c);
    c->cut_to = to;
    c->cut_n = k;
    c->cut_on = 1;
    c->cut_hdr = *h;
    c->cut_len = 0;
    arm(n, tb_now_ms());
    return 1;
}

static void drop_kept(tb_conn_t *c)
{
    for (size_t i = 0; i < c->cut_nkeep; i++)
        tbon_packet_unref(c->cut_keep[i]);
    free(c->cut_keep);
    c->cut_keep = NULL;
    c->cut_nkeep = c->cut_capkeep = 0;
}

/* The end of c's packet: its links let go (after an ABORT when aborted). */
static void end_cut(tb_conn_t *c, int aborted)
{
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
    drop_kept(c);
}

/* Give up passing c's packet on: its links drop it, and what came of it
 * so far becomes the start of its reassembly here (net/conn.c), which its
 * next pieces join. Out of memory, the packet is dropped here too. */
static void demote(tb_conn_t *c, const char *why)
{
    size_t len = c->cut_len;
    uint8_t *buf = tb_big_alloc(len);
    size_t off = 0;
    for (size_t i = 0; buf && i < c->cut_nkeep; i++) {
        size_t k;
        const uint8_t *b = tb_packet_payload(c->cut_keep[i], &k);
        memcpy(buf + off, b, k);
        off += k;
    }
    tb_frame_hdr_t first = c->cut_hdr;
    TB_INFO("cut", "a packet on stream %u from rank %u no longer goes on as it comes "
            "(%s) after %zu bytes: put together here%s", first.stream, c->rank, why, len,
            buf ? "" : ", but there is no memory for it: dropped");
    end_cut(c, 1);
    if (!buf) {
        c->cut_on = 1;      /* (no links: the rest of it goes nowhere) */
        c->cut_len = len;
        return;
    }
    c->frag = buf;
    c->frag_len = c->frag_cap = len;
    c->frag_hdr = first;
}

/* Whether f is the next piece of c's packet (NULL), or why not. */
static const char *bad_piece(const tb_conn_t *c, const tb_frame_hdr_t *h)
{
    const tb_frame_hdr_t *a = &c->cut_hdr;
    uint16_t ok = c->index < 0 ? TB_FRAME_F_FRAG
                               : TB_FRAME_F_FRAG | TB_FRAME_F_MORE | TB_FRAME_F_COVER;
    size_t max = tb_conn_max_packet() + (h->flags & TB_FRAME_F_COVER ? TB_COVER_MAX_WIRE : 0);
    if (h->type != a->type || h->stream != a->stream || h->tag != a->tag ||
        h->source != a->source || h->key != a->key)
        return "a piece of another packet before the last piece of the one under way";
    if (h->flags & ~ok)
        return "a piece with flags its first piece could not have";
    if (h->len == 0)
        return "an empty piece of a packet";
    if (h->len > max - c->cut_len)
        return "a packet over the maximum";
    return NULL;
}

/* The coverage a packet's last piece f from child c goes up with, as
 * tb_cover_take and tb_cover_received make it: the one it came with (its
 * tail, checked, stays part of the piece), else the child's rank if it is
 * a back-end (a new tail in *tail), else none. 0, or TBON_EFORMAT (c->why
 * set). */
static int cover_up(tb_node_t *n, tb_conn_t *c, const tb_frame_t *f, uint16_t *flags,
                    uint8_t **tail, size_t *tlen)
{
    *tail = NULL;
    *tlen = 0;
    if (f->hdr.flags & TB_FRAME_F_COVER) {
        tb_ranks_t cv;
        tb_ranks_init(&cv);
        char why[120];
        int t = tb_ranks_decode_tail(&cv, f->payload, f->hdr.len, why, sizeof why);
        tb_ranks_free(&cv);
        if (t < 0 || (size_t)t >= f->hdr.len) {
            snprintf(c->why, sizeof c->why, "bad coverage on a DATA frame: %s",
                     t < 0 ? why : "no packet before it");
            return TBON_EFORMAT;
        }
        *flags |= TB_FRAME_F_COVER;
        return 0;
    }
    if (!n->child[c->index].is_be)
        return 0;
    tb_ranks_t cv;
    tb_ranks_init(&cv);
    if (tb_ranks_add(&cv, c->rank) == 0 && (*tail = malloc(tb_ranks_wire_size(&cv)))) {
        *tlen = tb_ranks_wire_size(&cv);
        tb_ranks_encode(&cv, *tail);
        *flags |= TB_FRAME_F_COVER;
    }
    tb_ranks_free(&cv);
    return 0;
}

/* A piece of c's packet refused: the links drop the packet, c is closed. */
static int refuse(tb_conn_t *c, tb_frame_t *f)
{
    c->closed = 1;
    end_cut(c, 1);
    tb_frame_release(f);
    return -1;
}

/* Pass f, the next piece of c's packet, on to its links. */
static int pass_piece(tb_node_t *n, tb_conn_t *c, tb_frame_t *f)
{
    const char *bad = bad_piece(c, &f->hdr);
    if (bad) {
        snprintf(c->why, sizeof c->why, "%s (%zu bytes so far, maximum %zu: TBON_MAX_PACKET)",
                 bad, c->cut_len + f->hdr.len, tb_conn_max_packet());
        return refuse(c, f);
    }
    int last = !(f->hdr.flags & TB_FRAME_F_FRAG);
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .flags = last ? 0 : TB_FRAME_F_FRAG,
                         .stream = f->hdr.stream, .tag = f->hdr.tag,
                         .source = f->hdr.source == TBON_RANK_NONE ? n->rank : f->hdr.source,
                         .key = f->hdr.key };
    uint8_t *tail = NULL;
    size_t tlen = 0;
    if (last && c->index >= 0 && cover_up(n, c, f, &h.flags, &tail, &tlen) != 0)
        return refuse(c, f);
    c->cut_len += f->hdr.len;
    c->cut_at = tb_now_ms();
    tbon_packet_t *piece = tb_packet_raw(f->payload, f->hdr.len);
    tbon_packet_t **kv = c->cut_keep;
    if (c->cut_nkeep == c->cut_capkeep) {
        size_t cap = c->cut_capkeep * 2 + 8;
        if ((kv = realloc(c->cut_keep, cap * sizeof *kv))) {
            c->cut_keep = kv;
            c->cut_capkeep = cap;
        }
    }
    if (!piece || !kv) {
        TB_WARN("cut", "out of memory for a piece of a packet from rank %u on stream %u: "
                "the packet is dropped", c->rank, f->hdr.stream);
        tbon_packet_unref(piece);
        free(tail);
        if (!piece)
            tb_frame_release(f);
        size_t so_far = c->cut_len;
        end_cut(c, 1);
        c->cut_on = !last;  /* (no links: the rest of it goes nowhere) */
        c->cut_len = so_far;
        return 1;
    }
    f->payload = NULL;      /* the piece's now */
    tb_frame_release(f);
    c->cut_keep[c->cut_nkeep++] = tbon_packet_ref(piece);
    for (size_t j = 0; j < c->cut_n; j++) {
        uint8_t *t = NULL;
        if (tail && (t = malloc(tlen)))
            memcpy(t, tail, tlen);
        if (tb_conn_send_piece(c->cut_to[j], &h, piece, f->crc, t, t ? tlen : 0) != 0) {
            snprintf(c->cut_to[j]->why, sizeof c->cut_to[j]->why,
                     "out of memory for a piece of a packet");
            c->cut_to[j]->closed = 1;
        }
    }
    free(tail);
    tbon_packet_unref(piece);
    if (last) {
        /* what the whole packet's way would have left behind */
        tb_stream_st_t *s = tb_stream_get(n, h.stream);
        if (c->index < 0 && s && h.key > s->last_q)
            s->last_q = h.key;
        if (c->index >= 0 && c->cut_n)
            tb_stream_sent(n, h.stream, h.key);
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
    if (c->cut_on || begin(n, c, f))
        return pass_piece(n, c, f);
    return 0;
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
    /* The last of its links gone (a parent lost while a child's packet went
     * up through us): it is put together here after all, and goes where
     * a whole packet would (to an adopter, for an orphan). */
    if (!src->cut_n && src->cut_on)
        demote(src, "the link it went on is gone");
}

/* c's packet, if c passes one on: demoted if c stalls while frames wait on
 * its links; 1 if it goes on. */
static int watch(tb_conn_t *c, int64_t now)
{
    if (!c || !c->cut_on || !c->cut_n)
        return 0;
    int waiting = 0;
    for (size_t j = 0; j < c->cut_n; j++)
        waiting |= c->cut_to[j]->held.len > 0;
    if (!waiting || now - c->cut_at < TB_CUT_STALL_MS)
        return 1;
    demote(c, "it stalled while other frames waited behind it");
    return 0;
}

static void on_cut_timer(tb_timer_t *t, int64_t now)
{
    tb_node_t *n = t->arg;
    int open = watch(n->parent, now);
    for (size_t i = 0; i < n->nchild; i++)
        open |= watch(n->child[i].conn, now);
    if (open)
        arm(n, now);
}

static void arm(tb_node_t *n, int64_t now)
{
    if (!n->cut_timer.fn)
        n->cut_timer = (tb_timer_t){ .fn = on_cut_timer, .arg = n };
    if (!n->cut_timer.slot)
        tb_timer_at(n->loop, &n->cut_timer, now + TB_CUT_STALL_MS / 2);
}
