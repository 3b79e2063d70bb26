/* conn.h - a data connection owned by a reactor: a frame decoder on the read
 * side, a queue of frames on the write side (packets are sent by reference,
 * header and payload gathered with writev) */
#ifndef TB_CONN_H
#define TB_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <tbon/tbon.h>

#include "util/ring.h"
#include "codec/wire.h"
#include "net/loop.h"

typedef struct tb_conn tb_conn_t;

/* One queued frame: its header and either a packet (a reference) or an
 * owned buffer holding the payload. */
typedef struct tb_outframe {
    uint8_t        hdr[TB_FRAME_HDR_SIZE];
    tbon_packet_t *pkt;
    uint8_t       *buf;
    size_t         len;        /* payload bytes */
} tb_outframe_t;

struct tb_conn {
    int         fd;
    tbon_rank_t rank;          /* the peer */
    int         index;         /* owner's slot for it (child index, -1 = parent) */
    tb_fdec_t  *dec;
    tb_ring_t   q;             /* queued frames (tb_outframe_t), oldest first */
    size_t      qoff;          /* bytes of the oldest already written */
    size_t      out_bytes;     /* bytes queued, not yet written */
    tb_io_t     io;            /* in its owner's loop (io.fd is fd) */
    int         reading;       /* 0 while back-pressure pauses reading */
    int         dirty;         /* has queued frames not yet tried */
    int         closed;        /* EOF or error: to be freed after dispatch */
    struct tb_conn *next_dead; /* the owner's list of connections to free */
    char        why[600];      /* why it closed */
};

/* A connection for fd (made non-blocking) to peer rank; NULL if out of memory. */
tb_conn_t *tb_conn_new(int fd, tbon_rank_t rank, int index, uint32_t max_payload);

/* Close the fd and free everything queued. NULL is fine. */
void tb_conn_destroy(tb_conn_t *c);

/* Queue a frame carrying packet p (takes a new reference to p). source and
 * stream go in the header. Returns 0 or TBON_ENOMEM. */
int tb_conn_send_packet(tb_conn_t *c, uint8_t type, uint32_t stream, int32_t tag,
                        tbon_rank_t source, tbon_packet_t *p);
/* The same with header flags (TB_FRAME_F_MORE). */
int tb_conn_send_packet_flags(tb_conn_t *c, uint8_t type, uint16_t flags, uint32_t stream,
                              int32_t tag, tbon_rank_t source, tbon_packet_t *p);
/* The same with a wave key in the header's seq field (docs/protocol.md 8.4). */
int tb_conn_send_packet_key(tb_conn_t *c, uint8_t type, uint16_t flags, uint32_t stream,
                            int32_t tag, tbon_rank_t source, uint64_t key, tbon_packet_t *p);

/* Queue a frame whose payload is buf (taken over, freed after writing). */
int tb_conn_send_buf(tb_conn_t *c, const tb_frame_hdr_t *h, uint8_t *buf, size_t len);

/* Queue an already encoded frame (header included) in buf (taken over). */
int tb_conn_send_raw(tb_conn_t *c, uint8_t *frame, size_t len);

/* Write as much as the socket takes. Returns 1 if everything is written, 0 if
 * some is left (wait for EPOLLOUT), or TBON_EIO (c->closed set). */
int tb_conn_flush(tb_conn_t *c);

/* Read what is available (up to about max_bytes) into the decoder. Returns
 * bytes read (> 0), 0 on EAGAIN, or < 0 on EOF/error (c->closed and c->why
 * set). Take the frames with tb_fdec_next(c->dec, ...). */
long tb_conn_read(tb_conn_t *c, size_t max_bytes);

#endif
