/* link.h - the link layer of a parent-child data connection (seed 004:
 * acknowledgements, sender-side retention, resending, duplicates found by
 * sequence number; docs/protocol.md 2.4)
 *
 * Every frame a tb_conn_t sends after the handshake, but for the few read
 * before the peer's reactor has the connection (tb_conn_send_packet_oob,
 * tb_conn_send_raw), carries the next link sequence number; every frame
 * carries in its `ack` field the last sequence number received in order.
 * A sent frame stays in the connection's queue until the peer acknowledges
 * it (its bytes count toward the node's back-pressure marks, so a peer that
 * does not acknowledge stops the sender rather than growing its memory).
 * The receiver delivers a frame only if it is the next in order: a
 * duplicate (a resent frame it has) is dropped; the frames after a gap
 * (after one that failed its CRC) are kept, and the gap is answered with an
 * ACK frame flagged SELECT naming the last good one and the last missing
 * one: the sender writes again only those (selective repeat), and the kept
 * frames follow them in order. What cannot be said so (nothing kept, a quiet
 * link, a relink) is asked for with the flag RESEND: the sender resends
 * everything after it (go-back-N). At most TB_LINK_WINDOW frames go out
 * beyond the last acknowledged one. A broken socket is replaced by a new one (a relink) on the same
 * tb_conn_t: both sides first send RESEND with what they have, and hold
 * everything else until the peer's arrives.
 *
 * Retention is also what exactly-once results for non-idempotent filters
 * would replay from: a retained DATA frame keeps its packet (a reference)
 * and its wave key, so a sender asked for a wave's partial results again
 * (after its parent's failure) could resend the retained frames of that
 * key instead of recomputing them (docs/protocol.md 8.6).
 *
 * All of it runs on the reactor's thread, like the connection itself.
 */
#ifndef TB_LINK_H
#define TB_LINK_H

#include <stdint.h>

#include "net/conn.h"

/* An acknowledgement rides on the next frame going the other way. A lone
 * ACK goes only when this many frames are unacknowledged, or this long
 * after the first of them: TB_LINK_ACK_DELAY_MS once the frames waiting for
 * it hold TB_LINK_ACK_BYTES (the peer keeps them, and they count toward its
 * back-pressure), else TB_LINK_ACK_LAZY_MS. A request and its answer carry
 * each other's acknowledgements; only a link idle past the lazy delay (a
 * wave's round trip at 1,024 back-ends is 25-45 ms) sends lone ones, where
 * a 2 ms delay had every commnode write one to every back-end per wave and
 * woke every back-end to read it. A relink resends what is unacknowledged:
 * the lazier the ACK, the more duplicates it drops, nothing else. */
#define TB_LINK_ACK_EVERY    64
#define TB_LINK_ACK_DELAY_MS 2
#define TB_LINK_ACK_LAZY_MS  500
#define TB_LINK_ACK_BYTES    (64u << 10)
/* A resend asked for and not seen after this long is asked for again. */
#define TB_LINK_NACK_RETRY_MS 50
/* (A frame begun and not continued is not taken for a broken socket: the
 * header's own CRC finds a corrupted length at once, and a peer stuck in the
 * middle of a frame is slow, or stopped, or dead - heartbeats tell which.
 * The 2 s rule that was here broke healthy links when 273 processes starved
 * each other on two cores, issue 19.) */
/* How long a broken link may stay without a socket, and then how long a new
 * socket may take to hear the peer's RESEND, before the peer is lost
 * (TBON_RELINK_MS overrides it; 0 turns relinking off). A dead peer is
 * found otherwise (a refused relink, the pidfd, the event connection). */
#define TB_LINK_RELINK_MS 5000

/* A good frame f (its CRC checked) arrived: take its acknowledgement, and
 * say whether to deliver it (1), drop it (0: an ACK frame, a duplicate; the
 * caller releases it) or whether the link kept it (2: a frame after a gap,
 * delivered later by tb_link_next; f's payload is the link's now).
 * now: tb_now_ms(). */
int tb_link_rx(tb_conn_t *c, tb_frame_t *f, int64_t now);

/* The next frame in order from those kept after a gap, once the gap is
 * filled: 1 (*f is the caller's to deliver and release) or 0. Call after
 * every delivered frame until it gives 0. */
int tb_link_next(tb_conn_t *c, tb_frame_t *f, int64_t now);

/* A frame failed its checks (the decoder skipped it): the next good frame
 * shows what was lost, and the resend asked for is only that (SELECT); a
 * quiet link asks for everything after TB_LINK_ACK_DELAY_MS. */
void tb_link_bad_frame(tb_conn_t *c, int64_t now);

/* Queue a lone ACK now (flag RESEND: ask for everything after it). */
void tb_link_ack(tb_conn_t *c, int resend, int64_t now);

/* The timed part: owed ACKs and resend requests go; *next gets the
 * earliest time this connection needs a look again (unchanged if none),
 * *lazy that of a lone ACK that may wait (TB_LINK_ACK_LAZY_MS). */
void tb_link_tick(tb_conn_t *c, int64_t now, int64_t *next, int64_t *lazy);

/* The socket broke: out of the loop (the caller's tb_loop_forget first),
 * closed, its partial input dropped, everything retained to be resent on
 * the next socket. c->closed is cleared: the connection lives on. */
void tb_link_down(tb_conn_t *c, int64_t now);

/* A new socket fd (connected, authenticated) for a link that is down:
 * RESEND with what we have goes first, the rest waits for the peer's.
 * 0, or TBON_ENOMEM. */
int tb_link_up(tb_conn_t *c, int fd, int64_t now);

#endif
