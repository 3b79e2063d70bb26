/* link.c - the link layer of a data connection: acknowledgements,
 * retention, resend requests, duplicates, a socket replaced (link.h) */
#include "net/link.h"
#include "util/hot.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/endian.h"
#include "util/log.h"
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
        if (c->sel_busy && c->sel_off && f->seq == c->sel_seq)
            continue;           /* half written again: done when whole (conn.c) */
        size_t size = TB_FRAME_HDR_SIZE + f->len;
        if (i < c->wpos)
            c->ret_bytes -= size;
        else if (i == c->wpos && c->qoff)
            continue;           /* half written on this socket: it must finish (the
                                   framing), and is done then (conn.c, consumed) */
        else
            c->out_bytes -= size;
        tb_outframe_done(f);
    }
    tb_conn_pop_done(c);
}

/* Queue a lone ACK with flags (0, RESEND, or SELECT up to `last`). */
static void lone_ack(tb_conn_t *c, uint16_t flags, uint32_t last, int64_t now)
{
    int ask = flags != 0;
    c->timed = 1;
    if (c->ctl_left && c->ctl_left < TB_FRAME_HDR_SIZE) {
        /* One half written: the timer sends the next. A resend request
         * must not be forgotten meanwhile (the frame it asks for may have
         * been the last one coming): it is due again in
         * TB_LINK_NACK_RETRY_MS, as if it had gone. */
        if (ask && now) {
            c->nack_rx = c->rx;
            c->nack_at = now;
        }
        return;
    }
    if (c->ctl_left) {
        /* not yet gone: keep its ask (RESEND asks for more than SELECT) */
        uint16_t had = tb_get16(c->ctl + 6);
        if ((had & TB_FRAME_F_RESEND) || ((had & TB_FRAME_F_SELECT) && !flags)) {
            flags = had;
            last = (uint32_t)tb_get64(c->ctl + 32);
        }
    }
    if (flags & (TB_FRAME_F_RESEND | TB_FRAME_F_SELECT))
        TB_DEBUG("link", "rank %u: asking for %s after %u (up to %u)", c->rank,
                 flags & TB_FRAME_F_RESEND ? "everything" : "the frames", c->rx,
                 flags & TB_FRAME_F_RESEND ? 0 : last);
    /* A plain one answers the peer's last ask, if one is unanswered. */
    uint64_t key = flags & TB_FRAME_F_SELECT ? last : flags ? 0 : c->answer;
    if (!flags)
        c->answer = 0;
    tb_frame_hdr_t h = { .type = TB_FRAME_ACK, .flags = flags, .ack = c->rx, .key = key };
    tb_frame_hdr_encode(&h, NULL, c->ctl);
    c->ctl_left = TB_FRAME_HDR_SIZE;
    c->rx_unacked = 0;
    c->rx_unacked_bytes = 0;
    c->ack_due = 0;
    c->dirty = 1;
    if (ask) {
        c->nack_rx = c->rx;
        c->nack_at = now;
    }
}

void tb_link_ack(tb_conn_t *c, int resend, int64_t now)
{
    lone_ack(c, resend ? TB_FRAME_F_RESEND : 0, 0, now);
}

/* Ask for what is missing after rx: the frames up to the first one kept
 * out of order (SELECT), or, with none kept, everything (RESEND). */
static void ask_missing(tb_conn_t *c, int64_t now)
{
    if (c->ooo_n) {
        for (uint32_t k = 2; k <= TB_LINK_WINDOW; k++) {
            uint32_t s = c->rx + k;
            if (s && c->ooo[s % TB_LINK_WINDOW].hdr.seq == s) {
                lone_ack(c, TB_FRAME_F_SELECT, s - 1, now);
                return;
            }
        }
    }
    lone_ack(c, TB_FRAME_F_RESEND, 0, now);
}

/* Ask now unless the same ask went less than TB_LINK_NACK_RETRY_MS ago. */
static void maybe_ask(tb_conn_t *c, int64_t now)
{
    if (!c->nack_at || c->nack_rx != c->rx || now - c->nack_at >= TB_LINK_NACK_RETRY_MS)
        ask_missing(c, now);
}

/* Out of order frames kept: at most the window's span and this many bytes
 * (beyond, a frame is dropped and asked for again later). */
#define OOO_MAX_BYTES (4u << 20)

/* Keep f (a frame after a gap) for later: 1 if kept (it is ours now). */
static int keep(tb_conn_t *c, tb_frame_t *f)
{
    uint32_t s = f->hdr.seq;
    if (s - c->rx > TB_LINK_WINDOW || c->ooo_bytes + f->wire_len > OOO_MAX_BYTES)
        return 0;
    if (!c->ooo && !(c->ooo = calloc(TB_LINK_WINDOW, sizeof *c->ooo)))
        return 0;
    tb_frame_t *slot = &c->ooo[s % TB_LINK_WINDOW];
    if (slot->hdr.seq == s) {
        c->n_dups++;
        return 0;
    }
    if (tb_frame_own(f) != 0)   /* it outlives the decoder's buffer */
        return 0;
    if (slot->hdr.seq)          /* a stale one: older than rx, never delivered */
        tb_frame_release(slot);
    else
        c->ooo_n++;
    *slot = *f;
    c->ooo_bytes += f->wire_len;
    c->n_kept++;
    return 1;
}

/* The next frame in order (of len bytes on the wire) arrived, or was taken
 * from those kept. Its acknowledgement rides on the next frame we send; a
 * lone ACK goes only when none goes soon enough (link.h): after
 * TB_LINK_ACK_EVERY frames, after TB_LINK_ACK_DELAY_MS once the peer holds
 * TB_LINK_ACK_BYTES or more for us, else after TB_LINK_ACK_LAZY_MS. */
TB_HOT static void in_order(tb_conn_t *c, uint32_t seq, size_t len, int64_t now)
{
    c->rx = seq;
    c->nack_at = 0;
    c->rx_unacked_bytes += len;
    if (++c->rx_unacked >= TB_LINK_ACK_EVERY) {
        tb_link_ack(c, 0, now);
        return;
    }
    int lazy = c->rx_unacked_bytes < TB_LINK_ACK_BYTES;
    int64_t due = now + (lazy ? TB_LINK_ACK_LAZY_MS : TB_LINK_ACK_DELAY_MS);
    if (!c->ack_due || due < c->ack_due) {
        c->ack_due = due;
        c->ack_lazy = lazy;
    }
}

/* What we hold since a relink may go: from the peer's acknowledgement on. */
static void release(tb_conn_t *c)
{
    c->timed = 1;
    c->hold = 0;
    c->down_since = 0;
    c->rewind = 1;
    c->dirty = 1;
}

TB_HOT int tb_link_rx(tb_conn_t *c, tb_frame_t *f, int64_t now)
{
    const tb_frame_hdr_t *h = &f->hdr;
    c->timed = 1;
    take_ack(c, h->ack);
    if (h->type == TB_FRAME_ACK && (h->flags & (TB_FRAME_F_RESEND | TB_FRAME_F_SELECT))) {
        TB_DEBUG("link", "rank %u asks for %s after %u (up to %u)%s", c->rank,
                 h->flags & TB_FRAME_F_RESEND ? "everything" : "the frames", h->ack,
                 (uint32_t)h->key, c->hold ? "; we were held" : "");
        if ((h->flags & TB_FRAME_F_RESEND) || c->hold) {
            /* After a relink: the peer's first word; after a corrupt frame
             * or a gap we could not say more of: resend everything from
             * there, at the next frame boundary. */
            release(c);
        } else if (!c->rewind) {
            /* A gap: only the frames up to `key` (the peer kept the rest).
             * A range already being written is replaced: what it still
             * lacks is in this one. */
            uint32_t from = h->ack + 1 ? h->ack + 1 : 1;
            c->sel_active = tb_seq_le(from, (uint32_t)h->key);
            c->sel_next = from;
            c->sel_to = (uint32_t)h->key;
            c->dirty = 1;
        }
        /* And say where we are: the asker may be one whose own first word
         * from us (the RESEND after a relink) or whose acknowledgement from
         * us was the frame it lost, and nothing else may be coming from us
         * to tell it (a window blocked on that acknowledgement, a link held
         * since the relink). */
        c->answer = h->ack + 1 ? h->ack + 1 : 1;
        c->ack_due = now;
        c->ack_lazy = 0;
        return 0;
    }
    if (h->type == TB_FRAME_ACK && h->key && c->nack_at && (uint32_t)(h->key - 1) == c->nack_rx) {
        /* The answer to our ask: it was heard, and what the peer had to
         * resend follows it; a loss among that is a new corrupt frame or
         * gap. No more asking (on a quiet link the asks went on for good). */
        c->nack_at = 0;
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
    /* Frames come in order but for those written again (SELECT): a frame
     * newer than any seen shows whether a corrupt one before it was of the
     * sequence (a gap) or not (a lone ACK, say). */
    int fresh = tb_seq_lt(c->rx_high, h->seq);
    if (fresh)
        c->rx_high = h->seq;
    if (h->seq == want) {
        if (fresh && c->bad_at) {
            /* The corrupt frame was none of the sequence. It may have been
             * the peer's acknowledgement, which it may be waiting on: ask
             * for it again (an empty SELECT: nothing is resent). */
            c->bad_at = 0;
            lone_ack(c, TB_FRAME_F_SELECT, c->rx, now);
        }
        in_order(c, want, f->wire_len, now);
        return 1;
    }
    if (tb_seq_le(h->seq, c->rx)) {
        c->n_dups++;
        return 0;
    }
    /* A gap: the frames after one that was lost. Kept (so that only the
     * missing ones are sent again); asked for once, again later. */
    if (fresh)
        c->bad_at = 0;          /* the corrupt one is among the missing */
    int kept = keep(c, f);
    maybe_ask(c, now);
    return kept ? 2 : 0;
}

TB_HOT int tb_link_next(tb_conn_t *c, tb_frame_t *f, int64_t now)
{
    if (!c->ooo_n)
        return 0;
    uint32_t want = c->rx + 1 ? c->rx + 1 : 1;
    tb_frame_t *slot = &c->ooo[want % TB_LINK_WINDOW];
    c->timed = 1;
    if (slot->hdr.seq != want) {
        maybe_ask(c, now);      /* another gap after the one filled */
        return 0;
    }
    *f = *slot;
    memset(slot, 0, sizeof *slot);
    c->ooo_n--;
    c->ooo_bytes -= f->wire_len;
    if (!c->ooo_n)
        tb_conn_drop_kept(c);   /* the gap is filled: its buffer (a window of slots) goes */
    in_order(c, want, f->wire_len, now);
    return 1;
}

void tb_link_bad_frame(tb_conn_t *c, int64_t now)
{
    /* What was lost shows with the next good frame (a gap, or none); if
     * none comes soon (the link is quiet) the tick asks for everything. */
    c->n_crc++;
    c->timed = 1;
    if (!c->bad_at)
        c->bad_at = now;
}

TB_HOT void tb_link_tick(tb_conn_t *c, int64_t now, int64_t *next, int64_t *lazy)
{
    if (c->fd < 0)
        return;
    int64_t due = INT64_MAX;
    /* A lone ACK half written waits for the socket (EPOLLOUT), not for a
     * time: the owed ones are looked at once it is gone. */
    if (!c->ctl_left || c->ctl_left == TB_FRAME_HDR_SIZE) {
        if (c->ack_due && now >= c->ack_due)
            tb_link_ack(c, 0, now);
        if (c->nack_at && c->nack_rx == c->rx && now - c->nack_at >= TB_LINK_NACK_RETRY_MS)
            ask_missing(c, now);
        if (c->bad_at && now - c->bad_at >= TB_LINK_ACK_DELAY_MS) {
            /* Nothing newer came to show what the corrupt frame was: with
             * frames kept, the gap before them first (the corrupt one may
             * still be after them: looked at again later); else everything
             * after rx (RESEND: cheap on a quiet link). */
            if (c->ooo_n) {
                c->bad_at = now;
                maybe_ask(c, now);
            } else {
                c->bad_at = 0;
                lone_ack(c, TB_FRAME_F_RESEND, 0, now);
            }
        }
        if (c->ack_due && c->ack_lazy) {
            if (c->ack_due < *lazy)
                *lazy = c->ack_due;
        } else if (c->ack_due) {
            due = c->ack_due;
        }
        if (c->nack_at && c->nack_at + TB_LINK_NACK_RETRY_MS < due)
            due = c->nack_at + TB_LINK_NACK_RETRY_MS;
        if (c->bad_at && c->bad_at + TB_LINK_ACK_DELAY_MS < due)
            due = c->bad_at + TB_LINK_ACK_DELAY_MS;
    }
    if (due < *next)
        *next = due;
}

void tb_link_down(tb_conn_t *c, int64_t now)
{
    c->timed = 1;
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
    c->bad_at = 0;
    /* The peer resends everything after rx on the next socket (its RESEND
     * from us); a frame asked for alone and half written is not finished. */
    tb_conn_drop_kept(c);
    c->sel_active = c->sel_busy = 0;
    c->sel_off = 0;
    tb_fdec_t *d = tb_conn_decoder_new(c, TB_FRAME_MAX_DEFAULT);
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
    c->peer_gone = 0;
    c->at_eof = 0;
    c->hold = 1;
    if (c->down_since)
        c->down_since = now;    /* a new window for the peer's RESEND */
    c->n_relinks++;
    tb_link_ack(c, 1, 0);
    c->nack_at = 0;             /* not a resend request for a bad frame */
    return 0;
}
