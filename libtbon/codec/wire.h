/* wire.h - tbon frames: the fixed header, the encoder and a streaming decoder
 *
 * Every byte on a tbon connection belongs to a frame: a 48-byte header,
 * explicitly encoded little-endian, followed by the payload; one CRC-32C
 * covers the header's first 40 bytes (so that a corrupt length is known
 * before the bytes it claims are waited for), another the payload as sent. docs/protocol.md
 * is the byte-exact description. Pure code: no sockets, no threads.
 */
#ifndef TB_WIRE_H
#define TB_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <tbon/tbon.h>

#define TB_FRAME_MAGIC      0x4E4F4254u   /* bytes 'T' 'B' 'O' 'N' on the wire */
#define TB_FRAME_VERSION    3            /* 2: seq/ack u32 and the wave key (docs/protocol.md
                                             2.4); 3: the header's own CRC */
#define TB_FRAME_HDR_SIZE   48
#define TB_FRAME_HCRC_OFFSET 40           /* CRC-32C of bytes [0, 40): the header */
#define TB_FRAME_CRC_OFFSET 44            /* CRC-32C of the payload */
#define TB_FRAME_SEQ_OFFSET 24            /* the header's seq field (u32 LE) */
#define TB_FRAME_ACK_OFFSET 28            /* the header's ack field (u32 LE) */

/* Frame types; the values are part of the protocol. */
enum tb_frame_type {
    TB_FRAME_DATA      = 1,   /* a packet of a stream */
    TB_FRAME_HELLO     = 2,   /* server -> client: version, session, nonce */
    TB_FRAME_HANDSHAKE = 3,   /* client -> server: who I am, HMAC */
    TB_FRAME_WELCOME   = 4,   /* server -> client: accepted or why not, HMAC */
    TB_FRAME_TOPOLOGY  = 5,   /* the serialised topology (compressed) */
    TB_FRAME_CONTROL   = 6,   /* stream and filter set-up, shutdown */
    TB_FRAME_HEARTBEAT = 7,
    TB_FRAME_ACK       = 8,   /* acknowledges up to hdr.ack, no payload needed */
    TB_FRAME_EVENT     = 9,   /* failure/adoption/membership traffic */
    TB_FRAME_REPORT    = 10,  /* failure and adoption reports */
};
#define TB_FRAME_TYPE_MIN TB_FRAME_DATA
#define TB_FRAME_TYPE_MAX TB_FRAME_REPORT

/* Header flags; any other bit set is an error. */
#define TB_FRAME_F_ZLIB  0x0001u  /* payload = u32 LE uncompressed length || zlib stream */
#define TB_FRAME_F_MORE  0x0002u  /* DATA upward: more packets of the same wave follow */
#define TB_FRAME_F_RESEND 0x0004u /* ACK: resend everything after hdr.ack (a CRC error,
                                     a gap, or the first frame on a relinked connection) */
#define TB_FRAME_F_SELECT 0x0010u /* ACK: resend only the frames after hdr.ack up to
                                     hdr.key (a gap; the frames after it are kept) */
#define TB_FRAME_F_FRAG  0x0020u  /* DATA, CONTROL: a piece of a packet larger than a frame;
                                     the rest follows in the next frames of this link, the
                                     last piece without this flag (docs/protocol.md 2.5) */
#define TB_FRAME_F_COVER 0x0008u  /* DATA upward: the payload ends with the packet's
                                     coverage, the back-end ranks it holds (a rank set's
                                     wire form, util/ranks.h; docs/protocol.md 2.6) */
#define TB_FRAME_F_LATE  0x0040u  /* DATA upward, on an exact stream: a partial result
                                     of a wave sent again after an adoption, or that came
                                     after its wave closed below: forwarded to the FE as
                                     it is, never folded on the way (docs/protocol.md 8.6) */
#define TB_FRAME_F_DONE  0x0080u  /* DATA downward, on an exact stream: the payload ends
                                     with a u64 LE wave key, up to which the FE has
                                     delivered every wave (DONE riding on a request;
                                     docs/protocol.md 8.6) */
#define TB_FRAME_F_ABORT 0x0100u  /* DATA, no payload: the packet whose pieces this link
                                     carries is dropped; its last piece never comes (a
                                     commnode passing pieces on as they came lost their
                                     source; docs/protocol.md 2.5) */
#define TB_FRAME_F_KNOWN (TB_FRAME_F_ZLIB | TB_FRAME_F_MORE | TB_FRAME_F_RESEND | \
                          TB_FRAME_F_SELECT | TB_FRAME_F_FRAG | TB_FRAME_F_COVER | \
                          TB_FRAME_F_LATE | TB_FRAME_F_DONE | TB_FRAME_F_ABORT)

/* The default payload limit a connection should use once authenticated;
 * before the handshake has succeeded use TB_FRAME_MAX_HANDSHAKE. */
#define TB_FRAME_MAX_DEFAULT   (16u * 1024 * 1024)
#define TB_FRAME_MAX_HANDSHAKE 256u
/* A packet larger than TB_FRAME_MAX_DEFAULT goes in pieces of this size. */
#define TB_FRAME_PIECE         (8u * 1024 * 1024)

typedef struct tb_frame_hdr {
    uint8_t  type;        /* enum tb_frame_type */
    uint16_t flags;       /* TB_FRAME_F_* */
    uint32_t len;         /* payload length */
    uint32_t stream;
    int32_t  tag;
    uint32_t source;      /* rank of the producer */
    uint32_t seq;         /* link sequence number, 0: not sequenced (net/conn.c) */
    uint32_t ack;         /* last sequence number received in order (link layer) */
    uint64_t key;         /* DATA: the wave key (docs/protocol.md 8.4); else 0 */
} tb_frame_hdr_t;

/* A decoded frame. hdr.len is the length of payload as delivered, i.e. after
 * decompression, and hdr.flags no longer carries TB_FRAME_F_ZLIB. */
typedef struct tb_frame {
    tb_frame_hdr_t hdr;
    uint8_t *payload;     /* malloc'd (or borrowed, placed: below), hdr.len bytes;
                             NULL when hdr.len == 0 */
    size_t   wire_len;    /* bytes this frame took on the wire, header included */
    int      placed;      /* payload is where the decoder's place function said
                             (tb_fdec_set_place): the owner's, not freed here */
    uint32_t crc;         /* the CRC of payload (checked as it came, or computed
                             after inflating): a piece passed on keeps it */
    int      borrowed;    /* payload lies in the decoder's buffer (a small frame
                             of a decoder that lends: tb_fdec_set_lend), valid
                             until the next call on that decoder (or its end); not
                             freed here. Whoever keeps the frame longer takes a
                             copy first (tb_frame_own). */
} tb_frame_t;

/* Name of a frame type ("DATA", ...) or "unknown". */
const char *tb_frame_type_name(int type);

/* Encode h into out, with the CRCs of out[0..40) and of payload[0..h->len).
 * h->len must be the payload length; payload may be NULL when it is 0.
 * Send with writev(out, payload): the payload is never copied. The fields
 * are written as given, unchecked (see tb_frame_build for a checked path). */
void tb_frame_hdr_encode(const tb_frame_hdr_t *h, const void *payload,
                         uint8_t out[TB_FRAME_HDR_SIZE]);

/* Like tb_frame_hdr_encode, given payload_crc = tb_crc32c(0, payload, h->len)
 * instead of the payload: for one payload sent on several links with
 * different seq/ack, the payload is checksummed once. */
void tb_frame_hdr_encode_crc(const tb_frame_hdr_t *h, uint32_t payload_crc,
                             uint8_t out[TB_FRAME_HDR_SIZE]);

/* Give an encoded header new seq and ack fields (its header CRC made again). */
void tb_frame_hdr_renumber(uint8_t hdr[TB_FRAME_HDR_SIZE], uint32_t seq, uint32_t ack);

/* Build one contiguous frame (header + payload) in a fresh malloc'd buffer
 * *out of *out_len bytes. h->len is ignored (len is used) and h->flags must
 * not carry TB_FRAME_F_ZLIB: the payload is zlib-compressed, and the flag set,
 * when compress_threshold != 0, len >= compress_threshold and compression
 * makes it smaller. Returns 0, TBON_EINVAL (bad type or flags, len too big)
 * or TBON_ENOMEM. */
int tb_frame_build(const tb_frame_hdr_t *h, const void *payload, size_t len,
                   size_t compress_threshold, uint8_t **out, size_t *out_len);

/* Free f->payload and clear it; f may be NULL. */
void tb_frame_release(tb_frame_t *f);
/* Make a borrowed frame's payload its own (a copy); 0, or TBON_ENOMEM (the
 * frame is then as it was). A frame that owns its payload is left alone. */
int tb_frame_own(tb_frame_t *f);

/* ---- streaming decoder ----------------------------------------------------
 * One per connection, used by one thread at a time (the reactor's). */

typedef struct tb_fdec tb_fdec_t;

/* What went wrong, from tb_fdec_error_kind(). */
enum tb_fdec_err {
    TB_FDEC_OK = 0,
    TB_FDEC_EMAGIC,     /* not a tbon frame (or lost framing) */
    TB_FDEC_EVERSION,   /* header version other than TB_FRAME_VERSION */
    TB_FDEC_ETYPE,      /* unknown frame type */
    TB_FDEC_EFLAGS,     /* unknown flag bits */
    TB_FDEC_ETOOBIG,    /* payload (or its uncompressed size) above the maximum */
    TB_FDEC_ECRC,       /* checksum mismatch: header or payload corrupt */
    TB_FDEC_EZLIB,      /* bad compressed payload, or size differs from its claim */
    TB_FDEC_ENOMEM,     /* could not allocate */
};

/* Read-chunk size: outside a large payload tb_fdec_reserve grows its buffer
 * by at most this much, so a decoder drained after every read holds at most
 * one maximum payload plus about 84 KiB (a partial small frame + a chunk). */
#define TB_FDEC_CHUNK (64u * 1024)

/* The first read size: a handshake or a control message needs a few hundred
 * bytes, and a first buffer of a page took a fresh heap page (a page fault,
 * 15 us on a virtual machine) for each connection an orphan and its adopter
 * open in a recovery (bench/RESULTS.md, "fresh pages"). */
#define TB_FDEC_FIRST 1024u

/* A decoder accepting payloads (compressed and uncompressed) of at most
 * max_payload bytes. Returns NULL only when out of memory. */
tb_fdec_t *tb_fdec_new(uint32_t max_payload);

/* Where a large payload (read straight into memory, not through the
 * decoder's buffer) goes: place returns room for h->len bytes, or NULL for
 * a buffer of the decoder's own. A frame read into such room comes out
 * with placed set; the room stays the caller's, also when the frame fails
 * its CRC or the decoder is destroyed half-way. Compressed payloads are
 * never placed. (net/conn.c: a packet's pieces, read into its reassembly.) */
typedef uint8_t *(*tb_fdec_place_fn)(void *arg, const tb_frame_hdr_t *h);
void tb_fdec_set_place(tb_fdec_t *d, tb_fdec_place_fn place, void *arg);

/* Lend small payloads: a frame of less than TB_FDEC_LEND_MAX bytes, not
 * compressed, comes out borrowed (tb_frame_t), pointing into the decoder's
 * buffer instead of a copy in fresh memory. For a reader that is done with
 * each frame before it reads again (the node's loop: a packet is decoded
 * out of its frame at once): a malloc, a copy and a free less per frame
 * (bench/RESULTS.md, "instructions per wave"). */
#define TB_FDEC_LEND_MAX (16u * 1024)
void tb_fdec_set_lend(tb_fdec_t *d, int on);

/* Free the decoder and whatever it buffers; NULL is fine. */
void tb_fdec_destroy(tb_fdec_t *d);

/* Change the maximum for frames whose header has not been decoded yet (e.g.
 * raise it from TB_FRAME_MAX_HANDSHAKE once the peer is authenticated). */
void tb_fdec_set_max(tb_fdec_t *d, uint32_t max_payload);

/* Append n received bytes (copied). Call tb_fdec_next until it returns 0
 * after each feed: the decoder keeps what has not been taken. Returns 0,
 * the sticky error (as tb_fdec_next) or TBON_ENOMEM. */
int tb_fdec_feed(tb_fdec_t *d, const void *bytes, size_t n);

/* Zero-copy receive: *ptr gets room for *avail bytes (1 <= *avail <= want;
 * want 0 means the decoder's own read size: 1 KiB at first, doubled up to
 * TB_FDEC_CHUNK by each read that fills it) to read() into, followed by
 * tb_fdec_commit(d, bytes_read). Inside a large payload the room is the
 * payload's final buffer, so its bytes are never copied. Returns 0, the
 * sticky error, or TBON_ENOMEM. */
int tb_fdec_reserve(tb_fdec_t *d, size_t want, void **ptr, size_t *avail);

/* Take n (<= *avail of the last reserve) bytes written at the reserved room. */
void tb_fdec_commit(tb_fdec_t *d, size_t n);

/* After a corrupt frame, go on with the next one, so that the link layer
 * can ask for a resend instead of closing. After TB_FDEC_ECRC the bad
 * frame's bytes are consumed as its header's length said; after a header
 * that failed its checks (EMAGIC, EVERSION, ETYPE, EFLAGS, ETOOBIG of the
 * header: a flipped bit there, or a length that lied) the decoder drops
 * bytes up to the next "TBON" magic, whose header and CRC must then hold.
 * Frames skipped that way are lost: the link layer sees the gap. Returns 0,
 * or the sticky error where there is nothing to resume (a payload that
 * inflates wrongly, out of memory). */
int tb_fdec_resume(tb_fdec_t *d);

/* The next complete frame: returns 1 and fills *out (the caller owns
 * out->payload, or borrows it until the next call on d: out->borrowed; either
 * way tb_frame_release ends it), 0 when more bytes are needed,
 * or TBON_EFORMAT / TBON_ENOMEM on an error. Errors are sticky: every later
 * call returns the same; the connection must be closed. */
int tb_fdec_next(tb_fdec_t *d, tb_frame_t *out);

/* The error kind (TB_FDEC_OK if none) and a sentence describing it with the
 * offending values ("" if none). The string lives as long as the decoder. */
int tb_fdec_error_kind(const tb_fdec_t *d);
const char *tb_fdec_error(const tb_fdec_t *d);

/* Name of an error kind ("ECRC", ...). */
const char *tb_fdec_kind_name(int kind);

/* Whether part of a frame is buffered (a header or payload incomplete). */
int tb_fdec_partial(const tb_fdec_t *d);

/* Bytes of memory the decoder holds right now (buffer + partial payload). */
size_t tb_fdec_memory(const tb_fdec_t *d);

#endif
