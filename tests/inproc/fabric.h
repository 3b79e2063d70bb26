/* fabric.h - the in-process test tier: the nodes of one tree
 * (libtbon/node/node.h) in this one test process, each with its reactor on a
 * thread of its own, linked by socketpair(AF_UNIX) through the node's given
 * links (node.h, "Given links") instead of launched processes and TCP.
 *
 * Two kinds of link ends:
 *  - a node: a real tb_node_t; what it tells its application (its
 *    callbacks: deliveries, status, events, views, checks) is recorded, and
 *    the test waits for those records;
 *  - a peer: an end the test drives itself, frame by frame, in the place of
 *    a parent or a child, to send exactly what it wants and to see exactly
 *    what a node sends (every frame, in order).
 * The test only posts commands to a node and reads its callbacks and links:
 * it never touches a node's state, which its reactor thread owns.
 *
 * Every wait has a bound (ms); a helper that finds something wrong fails the
 * case with th_fail and returns a value the test can REQUIRE.
 */
#ifndef TB_FABRIC_H
#define TB_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#include <tbon/tbon.h>

#include "codec/wire.h"
#include "net/sock.h"
#include "node/node.h"
#include "topo/topology.h"

/* How long a test waits for something that must come (ms). Absence is shown
 * with a marker instead: something sent behind it on the same link that
 * comes while it did not. */
#define FAB_MS 5000

typedef struct fab fab_t;
typedef struct fab_node fab_node_t;
typedef struct fab_peer fab_peer_t;

/* A tree from topology text (docs/topology.md), e.g. "h:0 => h:1 ; h:1 => h:2
 * h:3 ;". NULL (the case failed) if it does not parse. */
fab_t *fab_new(const char *topology_text);
/* Stop every node (whatever its state), destroy them, close the peers. */
void fab_free(fab_t *f);
/* The tree as it started (ranks, roles, parents). */
const tb_topology_t *fab_topo(const fab_t *f);

/* ---- nodes ---- */

/* Rank 0, the FE, as a node. */
fab_node_t *fab_fe(fab_t *f);
/* The same, its callbacks passed on to also's too (an API network's, say:
 * tb_net_callbacks). Those run on the FE's reactor thread. */
fab_node_t *fab_fe_also(fab_t *f, const tb_node_cbs_t *also);
/* Rank r as a node under the node parent, linked as a launched child is:
 * the parent gets its end with tb_node_link_child, the child reads the
 * TOPOLOGY frame (and a commnode TB_CTL_LAUNCH) off its own, then its node is
 * made from that topology. edit (may be NULL) changes that copy first. */
fab_node_t *fab_node_under(fab_t *f, fab_node_t *parent, tbon_rank_t r,
                           void (*edit)(tb_topology_t *t, tbon_rank_t r));
/* Rank r as a node whose parent is a peer (returned in *parent), with a copy
 * of the fabric's topology. The node's first frame up is TB_CTL_PORT. */
fab_node_t *fab_node_under_peer(fab_t *f, tbon_rank_t r, fab_peer_t **parent);
tb_node_t *fab_tb(fab_node_t *n);

/* Post a command to the node (taken over). */
void fab_post(fab_node_t *n, tb_cmd_t *c);
/* FE: a stream id over members (up filter, sync mode, timeout, down filter
 * TBON_FILTER_NULL), as tbon_fe_stream_new does. */
void fab_stream(fab_node_t *fe, uint32_t id, int up, int sync, uint32_t timeout_ms,
                const tbon_rank_t *members, size_t nmembers);
/* Send p (taken) on stream: down from the FE, up from a back-end with wave
 * key key (docs/protocol.md 8.4). */
void fab_send(fab_node_t *n, uint32_t stream, tbon_packet_t *p, uint64_t key);

/* The oldest delivery on stream not yet taken (the reference is the
 * caller's; *q: its request number at a back-end), waiting at most ms; NULL
 * if none came. */
tbon_packet_t *fab_take_packet(fab_node_t *n, uint32_t stream, int ms, uint64_t *q);
/* Deliveries on stream not yet taken. */
size_t fab_pending_packets(fab_node_t *n, uint32_t stream);
/* The oldest FE event not yet taken; 1, or 0 if none came within ms. */
int fab_take_event(fab_node_t *n, tbon_event_t *ev, int ms);
/* Wait until the node has reported status what (TB_NODE_*); 1 or 0. */
int fab_wait_status(fab_node_t *n, int what, int ms);
/* Wait until the node has applied view version v (its view callback); 1 or
 * 0. *changes: how many changes version v brought (if it was seen). */
int fab_wait_view(fab_node_t *n, uint64_t v, int ms, size_t *changes);
/* FE: the answer to consistency check id: the ranks that agree and those
 * that do not, each sorted (malloc'd, the caller frees); 1 or 0. */
int fab_take_checked(fab_node_t *n, uint64_t id, int ms, tbon_rank_t **agree, size_t *na,
                     tbon_rank_t **bad, size_t *nb);

/* ---- peers ---- */

/* A peer in the place of child r of the node parent. Its setup (TOPOLOGY,
 * and TB_CTL_LAUNCH for a commnode) is read and checked here. */
fab_peer_t *fab_peer_under(fab_t *f, fab_node_t *parent, tbon_rank_t r);

/* A frame a peer read; pkt: its packet (DATA or CONTROL with a payload),
 * else NULL. */
typedef struct fab_msg {
    tb_frame_hdr_t hdr;
    tbon_packet_t *pkt;
    uint64_t done;          /* the FE's delivered mark on a request (TB_FRAME_F_DONE), or 0 */
} fab_msg_t;
void fab_msg_clear(fab_msg_t *m);

/* The next frame; 1, 0 if none came within ms, -1 if the link ended. */
int fab_peer_next(fab_peer_t *p, fab_msg_t *m, int ms);
/* The next frame, which must be CONTROL op: its packet (the caller's), or
 * NULL (case failed, naming what came instead). */
tbon_packet_t *fab_peer_expect_ctl(fab_peer_t *p, int op, int ms);
/* Read frames until CONTROL op comes (those before are dropped); its packet,
 * or NULL (case failed). */
tbon_packet_t *fab_peer_until_ctl(fab_peer_t *p, int op, int ms);
/* Nothing arrives within ms (else the case fails, naming it). */
void fab_peer_quiet(fab_peer_t *p, int ms);

/* Send on the peer's link (p taken): a CONTROL frame op; a DATA frame
 * (key: the wave key up, the request number down; more: TB_FRAME_F_MORE); an
 * empty wave (a DATA frame without payload). */
void fab_peer_ctl(fab_peer_t *pe, int op, tbon_packet_t *p);
void fab_peer_data(fab_peer_t *pe, uint32_t stream, uint64_t key, int more, tbon_packet_t *p);
void fab_peer_empty(fab_peer_t *pe, uint32_t stream, uint64_t key);
/* Request q going down with the FE's delivered mark done on it
 * (TB_FRAME_F_DONE, docs/protocol.md 8.6). Takes p. */
void fab_peer_request(fab_peer_t *pe, uint32_t stream, uint64_t q, uint64_t done,
                      tbon_packet_t *p);
/* A DATA frame with flags (TB_FRAME_F_MORE, _LATE) and the coverage
 * cov[0..ncov) as a commnode sends it (docs/protocol.md 2.6). Takes p. */
void fab_peer_unit(fab_peer_t *pe, uint32_t stream, uint64_t key, uint16_t flags,
                   tbon_packet_t *p, const tbon_rank_t *cov, size_t ncov);
/* Send a frame as it was read (by another peer: the test relays). */
void fab_peer_send(fab_peer_t *pe, const fab_msg_t *m);
/* Close the peer's end: for the node, its parent or child is gone. */
void fab_peer_close(fab_peer_t *pe);

/* ---- adoptions (the EDS's part, node.h "Given links") ---- */

/* The node adopter adopts rank orphan (a node, whose parent lost was): a new
 * link, TB_CMD_ADOPT_CONN to the adopter, its TB_CTL_ADOPT_ACK read off the
 * orphan's end, TB_CMD_ADOPTED to the orphan. 1, or 0 if the adopter
 * refused (closed the link). */
int fab_adopt(fab_node_t *orphan, fab_node_t *adopter, tbon_rank_t lost);
/* The same with a peer as the adopter (rank adopter): the peer is the
 * orphan's new parent. */
fab_peer_t *fab_adopt_by_peer(fab_t *f, fab_node_t *orphan, tbon_rank_t adopter,
                              tbon_rank_t lost);
/* The same with a peer as the orphan (rank orphan, new incarnation inc): the
 * peer is the adopter's new child; NULL if the adopter refused. */
fab_peer_t *fab_adopt_peer(fab_t *f, tbon_rank_t orphan, uint32_t inc, fab_node_t *adopter);

/* ---- packets ---- */

/* "%ld" value of p (case failed and -1 if it is not one). */
long fab_long(const tbon_packet_t *p);

#endif
