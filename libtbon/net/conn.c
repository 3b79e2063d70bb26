/* conn.c - a reactor's data connection: decoder in, frame queue out */
#include "net/conn.h"
#include "util/hot.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "codec/packet_int.h"
#include "util/sanitizer.h"
#include "util/bigmem.h"
#include "util/endian.h"
#include "util/clock.h"
#include "util/config.h"
#include "util/crc32c.h"
#include "util/log.h"
#include "util/ranks.h"
#include "net/sock.h"

static uint8_t *place_piece(void *arg, const tb_frame_hdr_t *h);

tb_fdec_t *tb_conn_decoder_new(tb_conn_t *c, uint32_t max_payload)
{
    tb_fdec_t *d = tb_fdec_new(max_payload);
    if (d) {
        tb_fdec_set_place(d, place_piece, c);
        tb_fdec_set_lend(d, 1);     /* node.c, on_frames: done with each at once */
    }
    return d;
}

tb_conn_t *tb_conn_new(int fd, tbon_rank_t rank, int index, uint32_t max_payload)
{
    tb_conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->dec = tb_conn_decoder_new(c, max_payload);
    if (!c->dec) {
        free(c);
        return NULL;
    }
    tb_sock_nonblock(fd, 1);
    tb_ring_init(&c->q, sizeof(tb_outframe_t));
    tb_ring_init(&c->held, sizeof(tb_outframe_t));
    /* Room for a few frames, doubled as needed: a first push's 16 (1.6 KiB)
     * took a fresh heap page for each connection opened in a recovery
     * (bench/RESULTS.md, "fresh pages"). Failure is no error: a push tries
     * again. */
    (void)tb_ring_reserve(&c->q, 4);
    c->fd = c->io.fd = fd;
    c->rank = rank;
    c->index = index;
    c->reading = 1;
    c->tx_next = 1;
    return c;
}

static void outframe_free(tb_outframe_t *f)
{
    tbon_packet_unref(f->pkt);
    free(f->buf);
    free(f->tail);
}

void tb_conn_drop_kept(tb_conn_t *c)
{
    if (c->ooo)
        for (size_t i = 0; i < TB_LINK_WINDOW; i++)
            tb_frame_release(&c->ooo[i]);
    free(c->ooo);
    c->ooo = NULL;
    c->ooo_n = c->ooo_bytes = 0;
}

void tb_conn_destroy(tb_conn_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->q.len; i++)
        outframe_free(tb_ring_at(&c->q, i));
    tb_ring_free(&c->q);
    for (size_t i = 0; i < c->held.len; i++)
        outframe_free(tb_ring_at(&c->held, i));
    tb_ring_free(&c->held);
    free(c->cut_to);
    for (size_t i = 0; i < c->cut_nkeep; i++)
        tbon_packet_unref(c->cut_keep[i]);
    free(c->cut_keep);
    tb_conn_drop_kept(c);
    tb_fdec_destroy(c->dec);
    tb_big_free(c->frag);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

/* A zeroed frame at the tail of the queue; with sequenced, h gets the next
 * link sequence number, and the acknowledgement of what we received rides
 * on it (no lone ACK is owed then). */
TB_HOT static tb_outframe_t *q_push(tb_conn_t *c, tb_frame_hdr_t *h, int sequenced)
{
    if (c->cut_from && !c->passing) {
        /* held behind a packet's pieces: numbered at tb_conn_unhold */
        tb_outframe_t *f = tb_ring_push(&c->held);
        if (f)
            f->seq = sequenced;
        return f;
    }
    tb_outframe_t *f = tb_ring_push(&c->q);
    if (!f)
        return NULL;
    c->dirty = 1;
    if (sequenced) {
        f->seq = h->seq = c->tx_next;
        c->tx_next = c->tx_next + 1 ? c->tx_next + 1 : 1;   /* 0 is "not sequenced" */
        h->ack = c->rx;     /* owed until written (ack_written) */
    }
    return f;
}

#define TB_MAX_PACKET_DEFAULT ((size_t)2 << 30)
static size_t max_packet;

/* $TBON_MAX_PACKET, once (tb_conn_max_packet): the process's configuration. */
static void read_max_packet(void)
{
    max_packet = TB_MAX_PACKET_DEFAULT;
    const char *v = tb_config_process()->max_packet;
    if (!v || !*v)
        return;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20
                : *end == 'G' || *end == 'g' ? 30 : 0;
    if (shift)
        end++;
    if (errno || end == v || *end || x > (UINT32_MAX >> shift) ||
        (x << shift) < ((unsigned long long)1 << 20)) {
        TB_WARN("conn", "TBON_MAX_PACKET=\"%s\" is not a size from 1M to 4294967295 bytes; "
                "using 2G", v);
        return;
    }
    max_packet = (size_t)(x << shift);
}

size_t tb_conn_max_packet(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_max_packet);
    return max_packet;
}

/* TB_FRAME_F_COVER asked and p covers something: its coverage in a fresh
 * buffer, its size in *len; else NULL (and the flag is dropped). */
static uint8_t *cover_tail(tb_frame_hdr_t *h, const tbon_packet_t *p, size_t *len)
{
    if (!(h->flags & TB_FRAME_F_COVER))
        return NULL;
    const tb_ranks_t *cv = tb_packet_cover(p);
    /* (A coverage of more ranges than TB_COVER_MAX_WIRE holds - over 130,000
     * - is not sent: the packet then claims nothing.) */
    uint8_t *t = cv->n && tb_ranks_wire_size(cv) <= TB_COVER_MAX_WIRE
                     ? malloc(tb_ranks_wire_size(cv)) : NULL;
    if (!t) {
        h->flags &= (uint16_t)~TB_FRAME_F_COVER;
        return NULL;
    }
    *len = tb_ranks_wire_size(cv);
    tb_ranks_encode(cv, t);
    return t;
}

/* TB_FRAME_F_DONE asked: the mark in a fresh buffer of 8 bytes, for a
 * packet that goes in one frame; else NULL (and the flag is dropped: the
 * mark rides on a later request, or goes alone). */
static uint8_t *done_tail(tb_frame_hdr_t *h, size_t len, uint64_t done, size_t *tlen)
{
    if (!(h->flags & TB_FRAME_F_DONE))
        return NULL;
    uint8_t *t = len + 8 <= TB_FRAME_MAX_DEFAULT ? malloc(8) : NULL;
    if (!t) {
        h->flags &= (uint16_t)~TB_FRAME_F_DONE;
        return NULL;
    }
    tb_put64(t, done);
    *tlen = 8;
    return t;
}

TB_HOT static int send_packet(tb_conn_t *c, tb_frame_hdr_t *h, tbon_packet_t *p, int sequenced,
                       uint64_t done)
{
    size_t len, tlen = 0;
    const uint8_t *payload = tb_packet_payload(p, &len);
    uint8_t *tail = h->flags & TB_FRAME_F_DONE ? done_tail(h, len, done, &tlen)
                                               : cover_tail(h, p, &tlen);
    if (len + tlen <= TB_FRAME_MAX_DEFAULT) {
        tb_outframe_t *f = q_push(c, h, sequenced);
        if (!f) {
            free(tail);
            return TBON_ENOMEM;
        }
        h->len = (uint32_t)(len + tlen);
        /* The payload's CRC is the packet's, computed once for every link it
         * goes on (the header has its own), continued over the tail. */
        uint32_t crc = tb_packet_payload_crc(p);
        if (tail)
            crc = tb_crc32c(crc, tail, tlen);
        tb_frame_hdr_encode_crc(h, crc, f->hdr);
        f->pkt = tbon_packet_ref(p);
        f->len = len + tlen;
        f->tail = tail;
        f->tail_len = tlen;
        c->out_bytes += TB_FRAME_HDR_SIZE + len + tlen;
        return 0;
    }
    /* Never put on the wire what the peer must refuse (and take for a
     * broken link): over the maximum, nothing is sent; pieces go only on the
     * link's sequence, which keeps them in order and whole. The coverage
     * goes with the last piece (a piece of its own when the packet's last
     * piece is full). */
    if (len > tb_conn_max_packet() || !sequenced) {
        free(tail);
        return TBON_ETOOBIG;
    }
    size_t pieces = (len + TB_FRAME_PIECE - 1) / TB_FRAME_PIECE;
    if (tb_ring_reserve(&c->q, c->q.len + pieces) != 0) {
        free(tail);
        return TBON_ENOMEM;
    }
    for (size_t off = 0; off < len; off += TB_FRAME_PIECE) {
        size_t k = len - off < TB_FRAME_PIECE ? len - off : TB_FRAME_PIECE;
        int last = off + k >= len;
        tb_frame_hdr_t ph = *h;
        if (!last)
            ph.flags |= TB_FRAME_F_FRAG;
        tb_outframe_t *f = q_push(c, &ph, 1);   /* room reserved above */
        uint32_t crc = tb_crc32c(0, payload + off, k);
        if (last && tail) {
            crc = tb_crc32c(crc, tail, tlen);
            f->tail = tail;
            f->tail_len = tlen;
        }
        ph.len = (uint32_t)(k + f->tail_len);
        tb_frame_hdr_encode_crc(&ph, crc, f->hdr);
        f->pkt = tbon_packet_ref(p);
        f->off = off;
        f->len = k + f->tail_len;
        c->out_bytes += TB_FRAME_HDR_SIZE + f->len;
    }
    return 0;
}

/* The room for a packet in pieces is the largest packet there can be, taken
 * at the first piece: only address space until the pieces fill it (the C
 * library maps a block this large on its own, and its untouched pages cost
 * no memory), so the packet never moves while it grows. Growing it moved
 * it: the huge-page advice (util/bigmem.c) splits the mapping, so realloc
 * cannot mremap it and copies, into pages faulted 4 KiB at a time - 260 ms
 * for a 64 MiB packet on this project's test machine. Where the address
 * space is refused (a strict overcommit policy), the room starts at this
 * and doubles (tb_big_realloc: each doubling one copy into huge pages). */
#define TB_FRAG_FIRST_CAP ((size_t)64 << 20)

/* Under ThreadSanitizer the room grows as the pieces come, as where the
 * address space is refused: at free it clears its records of the whole
 * block, faulting in their pages, and for the largest packet (1 GiB) that
 * took about 2.5 s per packet received in pieces. */
#define TB_FRAG_ROOM_AT_ONCE (!TB_UNDER_TSAN)

/* Do two pieces' headers belong to one packet? */
static int same_packet(const tb_frame_hdr_t *a, const tb_frame_hdr_t *b)
{
    return a->type == b->type && a->stream == b->stream && a->tag == b->tag &&
           a->source == b->source && a->key == b->key;
}

/* Whether a piece with header h fits the packet under way (NULL), or why
 * not; its room made in c->frag (max: the packet's maximum, coverage
 * included). */
static const char *piece_room(tb_conn_t *c, const tb_frame_hdr_t *h, size_t max)
{
    if (h->type != TB_FRAME_DATA && h->type != TB_FRAME_CONTROL)
        return "a piece of a packet in a frame that is not DATA or CONTROL";
    if (h->len == 0)
        return "an empty piece of a packet";
    if (c->frag_len && !same_packet(&c->frag_hdr, h))
        return "a piece of another packet before the last piece of the one under way";
    if (h->len > max - c->frag_len)
        return "a packet over the maximum";
    if (c->frag_len + h->len <= c->frag_cap)
        return NULL;
    /* the maximum at once (above), else grown as the pieces come, never
     * past the maximum (with its coverage) */
    size_t most = tb_conn_max_packet() + TB_COVER_MAX_WIRE;
    uint8_t *nb = c->frag || !TB_FRAG_ROOM_AT_ONCE ? NULL : tb_big_alloc(most); /* first piece */
    size_t cap = most;
    if (!nb) {
        cap = c->frag_cap ? c->frag_cap : TB_FRAG_FIRST_CAP < max ? TB_FRAG_FIRST_CAP : max;
        while (cap < c->frag_len + h->len)
            cap = cap > max / 2 ? max : cap * 2;
        nb = tb_big_realloc(c->frag, cap);
    }
    if (!nb)
        return "out of memory for a packet in pieces";
    c->frag = nb;
    c->frag_cap = cap;
    return NULL;
}

/* The last piece may end with the packet's coverage (TB_FRAME_F_COVER),
 * beyond the packet's maximum. */
static size_t piece_max(const tb_frame_hdr_t *h)
{
    return tb_conn_max_packet() + (h->flags & TB_FRAME_F_COVER ? TB_COVER_MAX_WIRE : 0);
}

/* The decoder's place function (tb_fdec_set_place): a piece of a packet
 * is read straight into the packet's reassembly, if it is the next frame
 * of the link's sequence (which the link layer will take, not keep for
 * later or drop) and fits; else NULL, and tb_conn_reassemble copies it or
 * says why not. */
static uint8_t *place_piece(void *arg, const tb_frame_hdr_t *h)
{
    tb_conn_t *c = arg;
    uint32_t want = c->rx + 1 ? c->rx + 1 : 1;
    if (c->cut_on || (c->may_cut && !c->frag_len))
        return NULL;    /* a piece that may be passed on: a buffer of its own */
    if ((!(h->flags & TB_FRAME_F_FRAG) && !c->frag_len) || !h->seq || h->seq != want ||
        piece_room(c, h, piece_max(h)))
        return NULL;
    return c->frag + c->frag_len;
}

void tb_conn_drop_packet(tb_conn_t *c)
{
    tb_big_free(c->frag);
    c->frag = NULL;
    c->frag_len = c->frag_cap = 0;
}

int tb_conn_reassemble(tb_conn_t *c, tb_frame_t *f)
{
    int piece = (f->hdr.flags & TB_FRAME_F_FRAG) != 0;
    if (!piece && !c->frag_len)
        return 1;
    size_t max = piece_max(&f->hdr);
    /* read into place already (place_piece): its room was checked */
    const char *bad = f->placed ? NULL : piece_room(c, &f->hdr, max);
    if (bad) {
        snprintf(c->why, sizeof c->why, "%s (%zu bytes so far, maximum %zu: TBON_MAX_PACKET)",
                 bad, c->frag_len + f->hdr.len, max);
        c->closed = 1;
        tb_frame_release(f);
        return TBON_EFORMAT;
    }
    if (!c->frag_len)
        c->frag_hdr = f->hdr;
    assert(!f->placed || f->payload == c->frag + c->frag_len);
    if (!f->placed)
        memcpy(c->frag + c->frag_len, f->payload, f->hdr.len);
    c->frag_len += f->hdr.len;
    if (piece) {
        tb_frame_release(f);
        return 0;
    }
    /* The last piece: the frame now carries the whole packet. */
    tb_frame_release(f);
    f->placed = 0;
    f->payload = c->frag;
    f->hdr.len = (uint32_t)c->frag_len;
    c->frag = NULL;
    c->frag_len = c->frag_cap = 0;
    return 1;
}

int tb_conn_send_packet(tb_conn_t *c, uint8_t type, uint32_t stream, int32_t tag,
                        tbon_rank_t source, tbon_packet_t *p)
{
    return tb_conn_send_packet_flags(c, type, 0, stream, tag, source, p);
}

int tb_conn_send_packet_flags(tb_conn_t *c, uint8_t type, uint16_t flags, uint32_t stream,
                              int32_t tag, tbon_rank_t source, tbon_packet_t *p)
{
    return tb_conn_send_packet_key(c, type, flags, stream, tag, source, 0, p);
}

int tb_conn_send_packet_key(tb_conn_t *c, uint8_t type, uint16_t flags, uint32_t stream,
                            int32_t tag, tbon_rank_t source, uint64_t key, tbon_packet_t *p)
{
    tb_frame_hdr_t h = { .type = type, .flags = flags, .stream = stream, .tag = tag,
                         .source = source, .key = key };
    return send_packet(c, &h, p, 1, 0);
}

int tb_conn_send_request(tb_conn_t *c, uint32_t stream, int32_t tag, tbon_rank_t source,
                         uint64_t q, uint64_t done, tbon_packet_t *p)
{
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .flags = done ? TB_FRAME_F_DONE : 0,
                         .stream = stream, .tag = tag, .source = source, .key = q };
    return send_packet(c, &h, p, 1, done);
}

int tb_conn_send_packet_oob(tb_conn_t *c, uint8_t type, int32_t tag, tbon_rank_t source,
                            tbon_packet_t *p)
{
    tb_frame_hdr_t h = { .type = type, .tag = tag, .source = source };
    return send_packet(c, &h, p, 0, 0);
}

void tb_conn_hold(tb_conn_t *c, tb_conn_t *src)
{
    c->cut_from = src;
}

void tb_conn_unhold(tb_conn_t *c)
{
    c->cut_from = NULL;
    if (!c->held.len)
        return;
    c->dirty = 1;
    if (tb_ring_reserve(&c->q, c->q.len + c->held.len) != 0) {
        /* they cannot keep their place: the link breaks (and is relinked) */
        snprintf(c->why, sizeof c->why, "out of memory for %zu frames held behind a packet's "
                 "pieces", c->held.len);
        c->closed = 1;
        return;
    }
    while (c->held.len) {
        tb_outframe_t *h = tb_ring_at(&c->held, 0);
        tb_outframe_t *f = tb_ring_push(&c->q);     /* room reserved above */
        *f = *h;
        if (f->seq) {
            f->seq = c->tx_next;
            c->tx_next = c->tx_next + 1 ? c->tx_next + 1 : 1;
            tb_frame_hdr_renumber(f->hdr, f->seq, c->rx);
        }
        tb_ring_drop(&c->held);
    }
}

int tb_conn_send_piece(tb_conn_t *c, const tb_frame_hdr_t *h, tbon_packet_t *piece,
                       uint32_t crc, uint8_t *tail, size_t tail_len)
{
    tb_frame_hdr_t ph = *h;
    c->passing = 1;
    tb_outframe_t *f = q_push(c, &ph, 1);
    c->passing = 0;
    if (!f) {
        free(tail);
        return TBON_ENOMEM;
    }
    size_t len = 0;
    if (piece)
        tb_packet_payload(piece, &len);
    if (tail)
        crc = tb_crc32c(crc, tail, tail_len);
    ph.len = (uint32_t)(len + tail_len);
    tb_frame_hdr_encode_crc(&ph, crc, f->hdr);
    f->pkt = piece ? tbon_packet_ref(piece) : NULL;
    f->len = len + tail_len;
    f->tail = tail;
    f->tail_len = tail_len;
    c->out_bytes += TB_FRAME_HDR_SIZE + f->len;
    return 0;
}

int tb_conn_send_buf(tb_conn_t *c, const tb_frame_hdr_t *h, uint8_t *buf, size_t len)
{
    tb_frame_hdr_t hh = *h;
    tb_outframe_t *f = q_push(c, &hh, 1);
    if (!f) {
        free(buf);
        return TBON_ENOMEM;
    }
    hh.len = (uint32_t)len;
    tb_frame_hdr_encode(&hh, buf, f->hdr);
    f->buf = buf;
    f->len = len;
    c->out_bytes += TB_FRAME_HDR_SIZE + len;
    return 0;
}

int tb_conn_send_raw(tb_conn_t *c, uint8_t *frame, size_t len)
{
    if (len < TB_FRAME_HDR_SIZE) {
        free(frame);
        return TBON_EINVAL;
    }
    tb_outframe_t *f = q_push(c, &(tb_frame_hdr_t){ 0 }, 0);
    if (!f) {
        free(frame);
        return TBON_ENOMEM;
    }
    memcpy(f->hdr, frame, TB_FRAME_HDR_SIZE);
    memmove(frame, frame + TB_FRAME_HDR_SIZE, len - TB_FRAME_HDR_SIZE);
    f->buf = frame;
    f->len = len - TB_FRAME_HDR_SIZE;
    c->out_bytes += len;
    return 0;
}

TB_HOT void tb_conn_pop_done(tb_conn_t *c)
{
    while (c->q.len > 0) {
        tb_outframe_t *f = tb_ring_at(&c->q, 0);
        if (!f->done || (c->wpos == 0 && c->qoff))
            break;
        outframe_free(f);
        tb_ring_drop(&c->q);
        if (c->wpos)
            c->wpos--;
    }
}

/* Resend from the first retained frame: everything written and not yet
 * acknowledged is unwritten again. Only at a frame boundary. */
static void rewind_queue(tb_conn_t *c)
{
    c->rewind = 0;
    c->sel_active = 0;          /* all of it goes again anyway */
    c->win_blocked = 0;         /* looked at again from the first frame */
    c->out_bytes += c->ret_bytes;
    c->ret_bytes = 0;
    c->wpos = 0;
    c->n_resent++;
}

/* A frame whose header carries an ack was written whole: the peer has that
 * ack (once it arrives); if it is all we received, no lone ACK is owed. */
TB_HOT static void ack_written(tb_conn_t *c, const uint8_t *hdr)
{
    uint32_t a = tb_get32(hdr + TB_FRAME_ACK_OFFSET);
    if (tb_seq_lt(c->ack_sent, a))
        c->ack_sent = a;
    if (c->ack_sent == c->rx && !c->answer) {
        c->rx_unacked = 0;
        c->rx_unacked_bytes = 0;
        if (c->ack_due) {
            c->ack_due = 0;     /* (an answer owed goes alone all the same) */
            c->timed = 1;
        }
    }
}

/* w bytes went out: the lone ACK first when it led the write, then frames. */
static void consumed(tb_conn_t *c, size_t w, int ctl_first)
{
    if (ctl_first) {
        size_t k = w < c->ctl_left ? w : c->ctl_left;
        c->ctl_left -= k;
        w -= k;
        if (k && !c->ctl_left) {
            c->timed = 1;       /* the owed ones wait for it to be gone */
            ack_written(c, c->ctl);
        }
    }
    while (w > 0) {
        while (c->wpos < c->q.len && ((tb_outframe_t *)tb_ring_at(&c->q, c->wpos))->done)
            c->wpos++;
        tb_outframe_t *f = tb_ring_at(&c->q, c->wpos);
        size_t size = TB_FRAME_HDR_SIZE + f->len, rest = size - c->qoff;
        if (w < rest) {
            c->qoff += w;
            c->out_bytes -= w;
            return;
        }
        w -= rest;
        c->out_bytes -= rest;
        c->qoff = 0;
        if (f->seq)
            ack_written(c, f->hdr);
        if (f->seq && tb_seq_lt(c->acked, f->seq))
            c->ret_bytes += size;   /* kept until acknowledged (net/link.c) */
        else
            f->done = 1;            /* unsequenced, or acknowledged while half written */
        c->wpos++;
    }
}

/* The iovs (at most 3, from iov[n]) of frame f from byte off of it (header
 * included): the header, the packet's bytes, the tail; the new count. */
TB_HOT static int frame_iov(const tb_outframe_t *f, size_t off, struct iovec *iov, int n)
{
    const uint8_t *payload = f->pkt ? tb_packet_payload(f->pkt, &(size_t){0}) + f->off : f->buf;
    size_t body = f->len - f->tail_len;
    if (off < TB_FRAME_HDR_SIZE) {
        iov[n].iov_base = (void *)(f->hdr + off);
        iov[n++].iov_len = TB_FRAME_HDR_SIZE - off;
        off = 0;
    } else {
        off -= TB_FRAME_HDR_SIZE;
    }
    if (body > off) {
        iov[n].iov_base = (void *)(payload + off);
        iov[n++].iov_len = body - off;
        off = 0;
    } else {
        off -= body;
    }
    if (f->tail_len > off) {
        iov[n].iov_base = (void *)(f->tail + off);
        iov[n++].iov_len = f->tail_len - off;
    }
    return n;
}

void tb_outframe_done(tb_outframe_t *f)
{
    f->done = 1;
    tbon_packet_unref(f->pkt);
    f->pkt = NULL;
    free(f->buf);
    f->buf = NULL;
    free(f->tail);
    f->tail = NULL;
    f->len = f->tail_len = 0;
}

/* The retained frame (written, not acknowledged) with sequence number seq:
 * its queue index, or -1. */
static long retained_index(const tb_conn_t *c, uint32_t seq)
{
    for (size_t i = 0; i < c->wpos; i++) {
        const tb_outframe_t *f = tb_ring_at(&c->q, i);
        if (f->seq == seq)
            return f->done ? -1 : (long)i;
        if (f->seq && tb_seq_lt(seq, f->seq))
            break;
    }
    return -1;
}

/* The next frame the peer asked for alone (TB_FRAME_F_SELECT), picked at a
 * frame boundary: its index, or -1 when none is left (the range is done). */
static long selected(tb_conn_t *c)
{
    if (c->sel_busy) {
        long i = retained_index(c, c->sel_seq);
        if (i >= 0)
            return i;
        c->sel_busy = 0;        /* acknowledged before any of it went */
        c->sel_off = 0;
    }
    while (c->sel_active && tb_seq_le(c->sel_next, c->sel_to)) {
        uint32_t s = c->sel_next;
        c->sel_next = s + 1 ? s + 1 : 1;
        long i = retained_index(c, s);
        if (i >= 0) {
            c->sel_seq = s;
            c->sel_busy = 1;
            return i;
        }
    }
    c->sel_active = 0;
    return -1;
}

/* Write the selected frame i again (from sel_off), the lone ACK before it if
 * one waits at this boundary. 1: written whole, 0: the socket is full,
 * TBON_EIO. */
static int write_selected(tb_conn_t *c, long i)
{
    tb_outframe_t *f = tb_ring_at(&c->q, (size_t)i);
    struct iovec iov[4];
    int n = 0;
    size_t ctl = c->sel_off == 0 ? c->ctl_left : 0;
    if (ctl) {
        iov[n].iov_base = c->ctl + TB_FRAME_HDR_SIZE - ctl;
        iov[n++].iov_len = ctl;
    }
    n = frame_iov(f, c->sel_off, iov, n);
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
    ssize_t w;
    do
        w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    if (w < 0) {
        if (errno == EAGAIN)
            return 0;
        snprintf(c->why, sizeof c->why, "write: %s", strerror(errno));
        c->closed = 1;
        c->peer_gone = 1;
        return TBON_EIO;
    }
    size_t left = (size_t)w;
    if (ctl) {
        size_t k = left < ctl ? left : ctl;
        c->ctl_left -= k;
        left -= k;
        if (k && !c->ctl_left) {
            c->timed = 1;       /* the owed ones wait for it to be gone */
            ack_written(c, c->ctl);
        }
    }
    c->sel_off += left;
    if (c->sel_off < TB_FRAME_HDR_SIZE + f->len)
        return 0;
    c->sel_off = 0;
    c->sel_busy = 0;
    c->n_selected++;
    if (tb_seq_le(f->seq, c->acked)) {
        /* acknowledged while it was being written (take_ack left it) */
        c->ret_bytes -= TB_FRAME_HDR_SIZE + f->len;
        tb_outframe_done(f);
        tb_conn_pop_done(c);
    }
    return 1;
}

TB_HOT int tb_conn_flush(tb_conn_t *c)
{
    enum { MAXV = 128 };
    c->dirty = 0;
    if (c->fd < 0)
        return 1;
    for (;;) {
        if (c->rewind && c->qoff == 0 && c->sel_off == 0)
            rewind_queue(c);
        if (c->qoff == 0 && !c->hold && (c->sel_busy || c->sel_active)) {
            /* frames asked for again go first, each whole, at a boundary */
            long i = selected(c);
            if (i >= 0) {
                int rc = write_selected(c, i);
                if (rc <= 0)
                    return rc;  /* TBON_EIO, or the socket is full */
                continue;
            }
        }
        struct iovec iov[MAXV];
        int n = 0;
        int ctl_first = c->ctl_left && c->qoff == 0;
        if (ctl_first) {
            iov[n].iov_base = c->ctl + TB_FRAME_HDR_SIZE - c->ctl_left;
            iov[n++].iov_len = c->ctl_left;
        }
        size_t off = c->qoff;
        for (size_t i = c->wpos; !c->hold && i < c->q.len && n + 3 <= MAXV; i++) {
            tb_outframe_t *f = tb_ring_at(&c->q, i);
            if (f->done)
                continue;
            if (c->ctl_left && !ctl_first && off == 0)
                break;      /* the ACK goes at this boundary, on the next round */
            if (f->seq && off == 0 && tb_seq_lt(c->acked + TB_LINK_WINDOW, f->seq)) {
                c->win_blocked = 1;     /* an acknowledgement unblocks it */
                break;
            }
            n = frame_iov(f, off, iov, n);
            off = 0;
        }
        if (n == 0)
            break;
        struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
        ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            snprintf(c->why, sizeof c->why, "write: %s", strerror(errno));
            c->closed = 1;
            c->peer_gone = 1;
            return TBON_EIO;
        }
        consumed(c, (size_t)w, ctl_first);
        tb_conn_pop_done(c);
    }
    tb_conn_pop_done(c);
    return 1;
}

TB_HOT long tb_conn_read(tb_conn_t *c, size_t max_bytes)
{
    size_t total = 0;
    c->more = 1;            /* unless it ends below with the socket drained */
    while (total < max_bytes) {
        void *p;
        size_t avail;
        int rc = tb_fdec_reserve(c->dec, 0, &p, &avail);
        if (rc) {
            snprintf(c->why, sizeof c->why, "bad frame: %s", tb_fdec_error(c->dec));
            c->closed = 1;
            return TBON_EFORMAT;
        }
        ssize_t n = recv(c->fd, p, avail, MSG_DONTWAIT);
        if (n > 0) {
            tb_fdec_commit(c->dec, (size_t)n);
            total += (size_t)n;
            if ((size_t)n < avail) {
                c->more = 0;
                break;
            }
            continue;
        }
        if (total)
            break;      /* the end again on the next call, after these frames */
        if (n == 0) {
            snprintf(c->why, sizeof c->why, "connection closed by the peer");
            c->closed = 1;
            c->peer_gone = 1;
            c->at_eof = 1;
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN) {
            c->more = 0;
            break;
        }
        snprintf(c->why, sizeof c->why, "read: %s", strerror(errno));
        c->closed = 1;
        c->peer_gone = 1;
        return -1;
    }
    return (long)total;
}
