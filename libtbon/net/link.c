/* link.c - the link layer of a data connection: acknowledgements,
 * retention, resend requests, duplicates, a socket replaced (link.h) */
#include "net/link.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/endian.h"
#include "net/sock.h"

/* The peer has everything up to a: what we kept for it is done. */
static void take_ack(tb_conn_t *c, uint32_t a)
{
    uint32_t last = c->tx_next - 1 ? c->tx_next - 1 : UINT32_MAX;
    if (!tb_seq_lt(c->acked, a) || tb_seq_lt(last, a))
        return;                 /* old news, or more than was ever sent */
    c->acked = a;
    if (c->win_blocked) {
        c->win_blocked = 0;     /* frames held back by the window may go */
        c->dirty = 1;
    }
    for (size_t i = 0; i < c->q.len; i++) {
        tb_outframe_t *f = tb_ring_at(&c->q, i);
        if (f->done || !f->seq)
            continue;
        if (!tb_seq_le(f->seq, a))
            break;
        size_t size = TB_FRAME_HDR_SIZE + f->len;
        if (i < c->wpos)
            c->ret_bytes -= size;
        else if (i == c->wpos && c->qoff)
            continue;           /* half written on this socket: it must finish (the
                                   framing), and is done then (conn.c, consumed) */
        else
            c->out_bytes -= size;
        f->done = 1;
        tbon_packet_unref(f->pkt);
        f->pkt = NULL;
        free(f->buf);
        f->buf = NULL;
        f->len = 0;
    }
    tb_conn_pop_done(c);
}

void tb_link_ack(tb_conn_t *c, int resend, int64_t now)
{
    if (c->ctl_left && c->ctl_left < TB_FRAME_HDR_SIZE) {
        /* One half written: the timer sends the next. A resend request
         * must not be forgotten meanwhile (the frame it asks for may have
         * been the last one coming): it is due again in
         * TB_LINK_NACK_RETRY_MS, as if it had gone. */
        if (resend && now) {
            c->nack_rx = c->rx;
            c->nack_at = now;
        }
        return;
    }
    uint16_t flags = resend ? TB_FRAME_F_RESEND : 0;
    if (c->ctl_left)
        flags |= tb_get16(c->ctl + 6) & TB_FRAME_F_RESEND;  /* not yet gone: keep its ask */
    tb_frame_hdr_t h = { .type = TB_FRAME_ACK, .flags = flags, .ack = c->rx };
    tb_frame_hdr_encode(&h, NULL, c->ctl);
    c->ctl_left = TB_FRAME_HDR_SIZE;
    c->rx_unacked = 0;
    c->ack_due = 0;
    c->dirty = 1;
    if (resend) {
        c->nack_rx = c->rx;
        c->nack_at = now;
    }
}

/* What we hold since a relink may go: from the peer's acknowledgement on. */
static void release(tb_conn_t *c)
{
    c->hold = 0;
    c->down_since = 0;
    c->rewind = 1;
    c->dirty = 1;
}

int tb_link_rx(tb_conn_t *c, const tb_frame_hdr_t *h, int64_t now)
{
    take_ack(c, h->ack);
    if (h->type == TB_FRAME_ACK && (h->flags & TB_FRAME_F_RESEND)) {
        /* After a relink: the peer's first word; after a bad frame: resend
         * from there, at the next frame boundary. And say where we are: the
         * asker may be one whose own first word from us (the RESEND after a
         * relink) or whose acknowledgement from us was the frame it lost,
         * and nothing else may be coming from us to tell it (a window
         * blocked on that acknowledgement, a link held since the relink). */
        release(c);
        if (!c->ack_due)
            c->ack_due = now;
        return 0;
    }
    if (c->hold) {
        /* The peer's first frame on a new socket is its RESEND: if another
         * comes first, that one was lost (a corrupt frame), and the ack of
         * this one (a lower bound of what the peer has) serves instead. */
        release(c);
    }
    if (h->type == TB_FRAME_ACK)
        return 0;
    if (!h->seq)
        return 1;               /* read before the link began (link.h) */
    uint32_t want = c->rx + 1 ? c->rx + 1 : 1;
    if (h->seq == want) {
        c->rx = want;
        c->nack_at = 0;
        if (++c->rx_unacked >= TB_LINK_ACK_EVERY)
            tb_link_ack(c, 0, now);
        else if (!c->ack_due)
            c->ack_due = now + TB_LINK_ACK_DELAY_MS;
        return 1;
    }
    if (tb_seq_le(h->seq, c->rx)) {
        c->n_dups++;
        return 0;
    }
    /* A gap: the frames after one we dropped. Ask once, again later. */
    if (!c->nack_at || c->nack_rx != c->rx || now - c->nack_at >= TB_LINK_NACK_RETRY_MS)
        tb_link_ack(c, 1, now);
    return 0;
}

void tb_link_bad_frame(tb_conn_t *c, int64_t now)
{
    c->n_crc++;
    if (!c->nack_at || c->nack_rx != c->rx || now - c->nack_at >= TB_LINK_NACK_RETRY_MS)
        tb_link_ack(c, 1, now);
}

int tb_link_tick(tb_conn_t *c, int64_t now, int64_t *next)
{
    if (c->fd < 0)
        return 0;
    int64_t due = INT64_MAX;
    /* A lone ACK half written waits for the socket (EPOLLOUT), not for a
     * time: the owed ones are looked at once it is gone. */
    if (!c->ctl_left || c->ctl_left == TB_FRAME_HDR_SIZE) {
        if (c->ack_due && now >= c->ack_due)
            tb_link_ack(c, 0, now);
        if (c->nack_at && c->nack_rx == c->rx && now - c->nack_at >= TB_LINK_NACK_RETRY_MS)
            tb_link_ack(c, 1, now);
        if (c->ack_due)
            due = c->ack_due;
        if (c->nack_at && c->nack_at + TB_LINK_NACK_RETRY_MS < due)
            due = c->nack_at + TB_LINK_NACK_RETRY_MS;
    }
    if (c->reading && tb_fdec_partial(c->dec)) {
        if (now - c->rx_last >= TB_LINK_STALL_MS)
            return 1;
        if (c->rx_last + TB_LINK_STALL_MS < due)
            due = c->rx_last + TB_LINK_STALL_MS;
    }
    if (due < *next)
        *next = due;
    return 0;
}

void tb_link_down(tb_conn_t *c, int64_t now)
{
    if (c->fd >= 0) {
        shutdown(c->fd, SHUT_RDWR);
        close(c->fd);
    }
    c->fd = c->io.fd = -1;
    c->down = 1;
    c->closed = 0;
    if (!c->down_since)
        c->down_since = now;
    /* A frame half written on the old socket is written whole on the next;
     * a half-read one comes again. */
    c->out_bytes += c->qoff;
    c->qoff = 0;
    c->rewind = 1;
    c->ctl_left = 0;
    c->nack_at = 0;
    tb_fdec_t *d = tb_fdec_new(TB_FRAME_MAX_DEFAULT);
    if (d) {
        tb_fdec_destroy(c->dec);
        c->dec = d;
    }
    /* (no new decoder: the old one's sticky error breaks the next socket too) */
}

int tb_link_up(tb_conn_t *c, int fd, int64_t now)
{
    tb_sock_nonblock(fd, 1);
    c->fd = c->io.fd = fd;
    c->down = 0;
    c->closed = 0;
    c->hold = 1;
    c->rx_last = 0;
    if (c->down_since)
        c->down_since = now;    /* a new window for the peer's RESEND */
    c->n_relinks++;
    tb_link_ack(c, 1, 0);
    c->nack_at = 0;             /* not a resend request for a bad frame */
    return 0;
}
