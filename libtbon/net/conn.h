/* conn.h - a data connection owned by a reactor: a frame decoder on the read
 * side, a queue of frames on the write side (packets are sent by reference,
 * header and payload gathered with writev). The queue is also the link
 * layer's retention (net/link.h): a sequenced frame stays in it, written,
 * until the peer acknowledges it, and the connection object outlives a
 * broken socket so that a new one (a relink) can take over its queue. */
#ifndef TB_CONN_H
#define TB_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <tbon/tbon.h>

#include "util/ring.h"
#include "codec/wire.h"
#include "net/loop.h"

typedef struct tb_conn tb_conn_t;

/* At most this many sequenced frames are written beyond the last one the
 * peer acknowledged (net/link.h): a resend request resends all of them, so
 * the window bounds that work, and at a bit error rate of one per 10,000
 * frames a resend completes (a window of the 4 MiB back-pressure mark of
 * small frames, ~70,000, would hold ~7 errors: never done). */
#define TB_LINK_WINDOW 1024

/* Serial-number order of 32-bit link sequence numbers (RFC 1982). */
static inline int tb_seq_lt(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }
static inline int tb_seq_le(uint32_t a, uint32_t b) { return (int32_t)(a - b) <= 0; }

/* One queued frame: its header and either a packet (a reference) or an
 * owned buffer holding the payload. */
/* The largest coverage a frame carries (docs/protocol.md 2.6): 1 MiB. */
#define TB_COVER_MAX_WIRE ((size_t)1 << 20)

typedef struct tb_outframe {
    uint8_t        hdr[TB_FRAME_HDR_SIZE];
    tbon_packet_t *pkt;
    uint8_t       *buf;
    size_t         off;        /* pkt: where in its payload this frame's piece starts */
    size_t         len;        /* payload bytes (the tail's included) */
    uint8_t       *tail;       /* written after the packet's bytes: its coverage
                                  (TB_FRAME_F_COVER), tail_len bytes; else NULL */
    size_t         tail_len;
    uint32_t       seq;        /* link sequence number; 0: not sequenced */
    int            done;       /* written and not to be kept (not sequenced), or
                                  acknowledged: counted nowhere, dropped at the head */
} tb_outframe_t;

struct tb_conn {
    int         fd;
    tbon_rank_t rank;          /* the peer */
    int         index;         /* owner's slot for it (child index, -1 = parent) */
    tb_fdec_t  *dec;
    tb_ring_t   q;             /* queued frames (tb_outframe_t), oldest first: the
                                  retained ones [0, wpos), then the unwritten */
    size_t      wpos;          /* the first frame not completely written */
    size_t      qoff;          /* bytes of frame wpos already written */
    size_t      out_bytes;     /* bytes queued, not yet written */
    size_t      ret_bytes;     /* bytes written, kept until acknowledged */
    /* the link layer (net/link.c; docs/protocol.md 2.4) */
    uint32_t    tx_next;       /* sequence number of the next sequenced frame */
    uint32_t    acked;         /* the peer has every frame up to this one */
    uint32_t    rx;            /* the last frame received in order */
    uint32_t    rx_high;       /* the newest frame received (kept ones too) */
    uint32_t    rx_unacked;    /* frames received since our last acknowledgement */
    size_t      rx_unacked_bytes; /* and their bytes on the wire */
    int         timed;         /* the timed state below (ack_due, nack_at, ctl_left,
                                  down, down_since, bad_at, hold) may have changed
                                  since the node last looked (node_link.c) */
    int64_t     ack_due;       /* when a lone ACK must go (0: none owed) */
    int         ack_lazy;      /* and it may wait longer (TB_LINK_ACK_LAZY_MS) */
    uint32_t    answer;        /* the peer asked for a resend after answer - 1: our
                                  next lone ACK says it was heard (key); 0: none */
    uint32_t    ack_sent;      /* the highest ack written to the peer: an ack on a
                                  frame that is queued, not written (held by the
                                  window, a relink or a full socket), is not one */
    uint32_t    nack_rx;       /* rx when we last asked for a resend */
    int64_t     nack_at;       /* ... and when (0: no resend asked for) */
    uint8_t     ctl[TB_FRAME_HDR_SIZE]; /* a lone ACK, written at a frame boundary */
    size_t      ctl_left;      /* its bytes not yet written (0: none) */
    int         win_blocked;   /* frames wait for acknowledgements (TB_LINK_WINDOW) */
    int         rewind;        /* resend from the first retained frame at the next
                                  frame boundary (the peer asked for it) */
    int         hold;          /* relinked: nothing sequenced goes until the
                                  peer's RESEND says what it has */
    int         down;          /* the socket broke: fd -1 until a relink */
    int64_t     down_since;    /* when the link went down (kept until the peer's
                                  RESEND on a new socket) */
    int64_t     bad_at;        /* a corrupt frame was skipped: the next good one
                                  tells what it was (0: none) */
    /* frames after a gap, kept until it is filled (net/link.c): slot seq %
       TB_LINK_WINDOW, hdr.seq 0 = empty; NULL until the first gap */
    tb_frame_t *ooo;
    size_t      ooo_n, ooo_bytes;
    /* frames the peer asked for again (a gap, TB_FRAME_F_SELECT): the
       retained ones from sel_next to sel_to are written again, one at a time,
       at frame boundaries; sel_seq is the one being written (sel_busy),
       sel_off bytes of it are gone */
    int         sel_active, sel_busy;
    uint32_t    sel_next, sel_to, sel_seq;
    size_t      sel_off;
    uint64_t    n_resent, n_dups, n_crc, n_relinks;   /* counters, for logs and tests */
    uint64_t    n_kept, n_selected;                   /* out of order kept; frames resent alone */
    tb_io_t     io;            /* in its owner's loop (io.fd is fd) */
    int         reading;       /* 0 while back-pressure pauses reading */
    int         more;          /* the last tb_conn_read stopped at its budget
                                  or before an end: the socket may hold more,
                                  with no new event to say so */
    int         dirty;         /* has queued frames not yet tried */
    int         closed;        /* EOF or error: to be freed after dispatch */
    int         peer_gone;     /* closed by the peer's end (EOF, a reset, a
                                  failed write), not by what it sent: what
                                  it wrote before may still be unread */
    int         at_eof;        /* a read found the end: nothing is left unread
                                  (link_broke reads no more) */
    struct tb_conn *next_dead; /* the owner's list of connections to free */
    char        why[600];      /* why it closed */
    /* a packet arriving in pieces (TB_FRAME_F_FRAG): what came so far, and
       the header of its first piece (tb_conn_reassemble) */
    uint8_t    *frag;
    size_t      frag_len, frag_cap;
    tb_frame_hdr_t frag_hdr;
    /* Cut-through (node/node_cut.c): a packet in pieces passed on as they
       come. As its source: the links its pieces go to (cut_n of them, none
       left when they all went away), its first piece's header and its bytes
       so far; cut_on while its last piece has not come. */
    struct tb_conn **cut_to;
    size_t      cut_n, cut_len;
    int         cut_on;
    tbon_packet_t **cut_keep;  /* the pieces passed on so far, kept until the
                                  last one (the packet may yet be put together
                                  here: node_cut.c, demote) */
    size_t      cut_nkeep, cut_capkeep;
    int64_t     cut_at;        /* when its last piece so far came (ms) */
    int         may_cut;       /* a commnode's: a first piece is not read into
                                  frag (it may be passed on) */
    tb_frame_hdr_t cut_hdr;
    /* As a link pieces go on (tb_conn_hold): the source, and the frames
       queued meanwhile, which wait unnumbered in held (pieces go with
       tb_conn_send_piece) until tb_conn_unhold. */
    struct tb_conn *cut_from;
    tb_ring_t   held;
    int         passing;       /* tb_conn_send_piece is queueing */
};

/* The largest packet a session carries: $TBON_MAX_PACKET (bytes, or with a
 * K, M or G suffix for KiB, MiB, GiB; from 1 MiB to 4 GiB - 1), else 2 GiB
 * (a packet of 1 GiB of values and its format fit).
 * Read once per process (util/config.h, tb_config_process). A larger one is
 * refused at tbon_stream_send (TBON_ETOOBIG). */
size_t tb_conn_max_packet(void);

/* A frame that may be a piece of a larger packet (TB_FRAME_F_FRAG), in the
 * order the link delivers them. 1: f is a whole packet's frame (as it came,
 * or its last piece now holding the whole payload); 0: a piece, taken (f
 * released); -1: pieces that do not fit together or a packet over the
 * maximum (f released, c->closed and c->why set). */
int tb_conn_reassemble(tb_conn_t *c, tb_frame_t *f);

/* Drop the packet under way in pieces (TB_FRAME_F_ABORT). */
void tb_conn_drop_packet(tb_conn_t *c);

/* A decoder for c's socket: pieces of a packet are read straight into its
 * reassembly (tb_conn_reassemble). NULL if out of memory. */
tb_fdec_t *tb_conn_decoder_new(tb_conn_t *c, uint32_t max_payload);

/* A connection for fd (made non-blocking) to peer rank; NULL if out of memory. */
tb_conn_t *tb_conn_new(int fd, tbon_rank_t rank, int index, uint32_t max_payload);

/* Close the fd and free everything queued. NULL is fine. */
void tb_conn_destroy(tb_conn_t *c);

/* Queue a frame carrying packet p (takes a new reference to p). source and
 * stream go in the header. A packet over TB_FRAME_MAX_DEFAULT goes in pieces
 * of TB_FRAME_PIECE (sequenced frames only). Returns 0, TBON_ENOMEM, or
 * TBON_ETOOBIG (over tb_conn_max_packet(): nothing queued). */
int tb_conn_send_packet(tb_conn_t *c, uint8_t type, uint32_t stream, int32_t tag,
                        tbon_rank_t source, tbon_packet_t *p);
/* The same with header flags (TB_FRAME_F_MORE). */
int tb_conn_send_packet_flags(tb_conn_t *c, uint8_t type, uint16_t flags, uint32_t stream,
                              int32_t tag, tbon_rank_t source, tbon_packet_t *p);
/* The same with a wave key in the header's seq field (docs/protocol.md 8.4). */
int tb_conn_send_packet_key(tb_conn_t *c, uint8_t type, uint16_t flags, uint32_t stream,
                            int32_t tag, tbon_rank_t source, uint64_t key, tbon_packet_t *p);

/* A request going down (DATA, key q), with the FE's delivered mark done
 * riding on it when not 0 (TB_FRAME_F_DONE). */
int tb_conn_send_request(tb_conn_t *c, uint32_t stream, int32_t tag, tbon_rank_t source,
                         uint64_t q, uint64_t done, tbon_packet_t *p);

/* The same, not sequenced: for frames read before the connection reaches
 * the peer's reactor (the topology, the join and adoption answers), which
 * the link layer can neither acknowledge nor resend. */
int tb_conn_send_packet_oob(tb_conn_t *c, uint8_t type, int32_t tag, tbon_rank_t source,
                            tbon_packet_t *p);

/* Hold c for the pieces of one packet coming from src (docs/protocol.md
 * 2.5: nothing else of a link goes between them): frames queued from now on
 * wait, in order, until tb_conn_unhold numbers them and queues them after
 * the last piece (or, out of memory, closes c). */
void tb_conn_hold(tb_conn_t *c, tb_conn_t *src);
void tb_conn_unhold(tb_conn_t *c);

/* Queue one piece of a packet passed on (node/node_cut.c), past a hold:
 * header h (its FRAG flag as it should go), the payload piece (a reference
 * taken; NULL: none, an ABORT) whose CRC is crc, and a tail after it (taken
 * over; NULL: none).
 * 0 or TBON_ENOMEM. */
int tb_conn_send_piece(tb_conn_t *c, const tb_frame_hdr_t *h, tbon_packet_t *piece,
                       uint32_t crc, uint8_t *tail, size_t tail_len);

/* Queue a frame whose payload is buf (taken over, freed after writing). */
int tb_conn_send_buf(tb_conn_t *c, const tb_frame_hdr_t *h, uint8_t *buf, size_t len);

/* Queue an already encoded frame (header included) in buf (taken over),
 * not sequenced, as it is (the topology frame, built once for all). */
int tb_conn_send_raw(tb_conn_t *c, uint8_t *frame, size_t len);

/* Write as much as the socket takes: the lone ACK at the next frame
 * boundary, then the frames not yet written (none while the link holds or
 * is down). Returns 1 if everything is written, 0 if some is left (wait for
 * EPOLLOUT), or TBON_EIO (c->closed set). */
int tb_conn_flush(tb_conn_t *c);

/* Read what is available (up to about max_bytes) into the decoder. Returns
 * bytes read (> 0), 0 on EAGAIN, or < 0 on EOF/error (c->closed, c->why and
 * c->peer_gone set). An end found after some bytes in the same call is left
 * for the next call, so that the frames read come first. Take the frames
 * with tb_fdec_next(c->dec, ...). */
long tb_conn_read(tb_conn_t *c, size_t max_bytes);

/* Bytes of frames the connection holds: queued and retained. */
static inline size_t tb_conn_held(const tb_conn_t *c)
{
    return c->out_bytes + c->ret_bytes;
}

/* Bytes that count toward the back-pressure marks (docs/protocol.md 7.4):
 * queued, not yet written. Not the retained ones: their acknowledgements
 * come on connections that back-pressure may stop reading. Counted, they
 * held a commnode whose parent had not yet acknowledged a wave from
 * reading its children, whose acknowledgements of the next request it then
 * never saw, so that it stopped reading its parent too, for good; and a
 * back-end whose application had the next 64 MiB request waiting stopped
 * reading its parent, whose acknowledgement of its answer its send then
 * waited for, for good. What is retained is bounded all the same: a peer
 * that reads acknowledges within TB_LINK_ACK_LAZY_MS, and one that stops
 * reading fills its socket, after which the bytes stay queued here. */
static inline size_t tb_conn_unwritten(const tb_conn_t *c)
{
    return c->out_bytes;
}

/* Whether a write is waiting for the socket (EPOLLOUT wanted). */
static inline int tb_conn_wants_write(const tb_conn_t *c)
{
    return c->fd >= 0 && (c->ctl_left || c->sel_busy || (c->sel_active && !c->hold) ||
                          (c->out_bytes && !c->hold && !c->win_blocked));
}

/* A retained frame acknowledged: its payload freed, dropped at the head. */
void tb_outframe_done(tb_outframe_t *f);

/* Free the frames the link layer kept out of order (net/link.c). */
void tb_conn_drop_kept(tb_conn_t *c);

/* Drop the frames at the head that are done (written unsequenced, or
 * acknowledged). */
void tb_conn_pop_done(tb_conn_t *c);

#endif
