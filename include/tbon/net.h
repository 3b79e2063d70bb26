/* net.h - what front-ends and back-ends share: networks, streams, events, logging */
#ifndef TBON_NET_H
#define TBON_NET_H

#include <stddef.h>
#include <stdint.h>
#include <tbon/common.h>
#include <tbon/packet.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tbon_net    tbon_net_t;
typedef struct tbon_comm   tbon_comm_t;
typedef struct tbon_stream tbon_stream_t;

/* The stream with this id (a reattached front-end gets the tree's streams
 * this way), or NULL (none, or closed). Owned by net. */
tbon_stream_t *tbon_net_stream(tbon_net_t *net, uint32_t id);

/* This process's rank (0 at the FE). */
tbon_rank_t  tbon_net_rank(const tbon_net_t *net);

/* The number of alive back-ends, and their ranks (up to cap; returns the
 * count). */
size_t       tbon_net_num_backends(tbon_net_t *net);
int          tbon_net_backends(tbon_net_t *net, tbon_rank_t *out, size_t cap);

/* Receive the next packet of any stream: *pkt (one reference, the caller
 * releases it) and its stream *s. timeout_ms: -1 blocks, 0 polls. Returns 0,
 * TBON_ETIMEOUT, TBON_ECLOSED once the network has shut down, TBON_EFILTER
 * once for a filter failure somewhere on a stream (tbon_net_error says what),
 * or at the FE TBON_ELOST in the place of a wave that was lost whole: every
 * part of it died with failed nodes and no node owes it any more (all the
 * FE's children killed at once, say; *s is its stream, tbon_net_error names
 * the request). *pkt is NULL unless 0 is returned. */
int          tbon_net_recv(tbon_net_t *net, tbon_packet_t **pkt, tbon_stream_t **s, int timeout_ms);

/* Send a new packet on s (downstream from the FE, upstream from a BE), with
 * a tag of TBON_FIRST_APP_TAG or more (a reserved tag: TBON_EINVAL, nothing
 * sent). Blocks while the network's send queue is full (back-pressure; a
 * tbon_net_destroy meanwhile makes it return TBON_ECLOSED). A back-end with
 * received packets not yet taken may write its answer with the ones that
 * follow (within 1 ms): docs/api.md, "When a send is written". */
int          tbon_stream_send(tbon_stream_t *s, int tag, const char *fmt, ...);
int          tbon_stream_send_packet(tbon_stream_t *s, tbon_packet_t *p);  /* does not take the reference */

/* Return once everything sent on s so far has been written to the network. */
int          tbon_stream_flush(tbon_stream_t *s);

/* Receive the next packet of s only; as tbon_net_recv. */
int          tbon_stream_recv(tbon_stream_t *s, tbon_packet_t **pkt, int timeout_ms);

/* Requests and the waves that answer them (docs/protocol.md 8.4). The FE
 * numbers what it sends on a stream 1, 2, ...: request n. At a back-end,
 * tbon_stream_request gives the number of the packet last taken from s (by
 * tbon_net_recv or tbon_stream_recv); at the FE, the request whose wave the
 * result last taken from s is. 0 if nothing was taken yet (or it came with
 * no request).
 * A back-end's packets on s answer the last request it took, unless
 * tbon_stream_answer(s, n) named another: from then on they answer request
 * n (and go up in its wave). A back-end that takes several requests before
 * it answers them (it queues them, or answers after a delay) names each
 * one; one that answers each request before it takes the next needs
 * neither. tbon_stream_answer returns 0, or TBON_EINVAL at the FE or for a
 * number of 2^40 or more (tbon_net_error says which). */
uint64_t     tbon_stream_request(tbon_stream_t *s);
int          tbon_stream_answer(tbon_stream_t *s, uint64_t request);
uint32_t     tbon_stream_id(const tbon_stream_t *s);

/* Messages between processes (docs/user-guide.md, "Messages between
 * processes"): from any back-end or the FE to one back-end or the FE
 * (tbon_net_send_to), to a set of them (tbon_net_multicast: each once,
 * repeats counted once), or to every back-end and the FE but the sender
 * (tbon_net_broadcast). A message goes by the topology, up to the lowest
 * ancestor it shares with each destination and down from there, its
 * copies parting where their ways do; through the FE only when it is on
 * the way. From one sender to one receiver messages arrive in the order
 * sent; messages are not part of any stream or wave. The packet is made
 * as by tbon_stream_send (tag >= TBON_FIRST_APP_TAG). Returns 0 once the
 * message is on its way, TBON_EINVAL for a NULL argument, a reserved tag,
 * no destination, or a destination that is no rank of the tree, a
 * commnode, or failed (tbon_net_error names it; nothing is sent),
 * TBON_ETOOBIG past the maximum packet, TBON_ECLOSED once the network
 * has shut down. */
int          tbon_net_send_to(tbon_net_t *net, tbon_rank_t to, int tag, const char *fmt, ...);
int          tbon_net_multicast(tbon_net_t *net, const tbon_rank_t *to, size_t n, int tag,
                                const char *fmt, ...);
int          tbon_net_broadcast(tbon_net_t *net, int tag, const char *fmt, ...);

/* The next message sent to this process by another (or by itself):
 * *pkt (one reference, the caller's), its sender in *from (may be NULL).
 * timeout_ms: -1 blocks, 0 polls. 0, TBON_ETIMEOUT, or TBON_ECLOSED once
 * the network has shut down. Stream packets are not taken here, nor
 * messages by tbon_net_recv. */
/* Ping rank (any process of the tree, commnodes too): the round trip in
 * *rtt_ms and the route the ping took, this process first and rank last,
 * in route[0..cap) with its length in *nroute (either may be NULL). The
 * ping goes by the topology as a message does. 0, TBON_ETIMEOUT (no answer
 * within timeout_ms), TBON_EINVAL (no such rank, or failed), TBON_ECLOSED. */
int          tbon_net_ping(tbon_net_t *net, tbon_rank_t rank, int timeout_ms, double *rtt_ms,
                           tbon_rank_t *route, size_t cap, size_t *nroute);
int          tbon_net_recv_direct(tbon_net_t *net, tbon_rank_t *from, tbon_packet_t **pkt,
                                  int timeout_ms);

/* FE: flush, tell every node to exit and reap the tree. BE: leave. Frees net
 * and everything it owns. NULL is fine. Another thread waiting in
 * tbon_net_recv, tbon_stream_recv, tbon_net_recv_direct, tbon_net_next_event
 * or tbon_net_ping returns TBON_ECLOSED first (at a back-end, a thread
 * driving the node is woken in its loop), and is out of the call before net
 * is freed; no thread may start a call on net once the destroy has begun. */
void         tbon_net_destroy(tbon_net_t *net);

/* The session's log directory on this host: where commnodes here write
 * commnode-RANK.log (what went wrong at a node is there, as well as on the
 * front-end's terminal). $TBON_LOG_DIR if set, else
 * ${TMPDIR:-/tmp}/tbon-USER-SESSION; the same name on every host, each
 * holding its own commnodes' logs. An empty log goes when its commnode
 * ends, and the directory when the session ends with nothing in it (one of
 * $TBON_LOG_DIR stays). Owned by net; NULL only for a NULL net. */
const char  *tbon_net_log_dir(tbon_net_t *net);

/* The message of the last failed library call on net, whichever thread
 * made it ("" if none); with net NULL, of the last failed call made by
 * this thread (a call given no network, or one that failed before it had
 * one: tbon_fe_create, tbon_be_create). A packet call of this thread
 * that failed after net's last failure (tbon_packet_unpack on a format
 * that does not match, say) is the one net names: its message says both
 * formats. The text is copied for the caller: it stays until this
 * thread's next tbon_net_error. */
const char  *tbon_net_error(const tbon_net_t *net);

/* --- events --- */

typedef enum {
    TBON_EV_NODE_FAILED, TBON_EV_NODE_ADOPTED, TBON_EV_NODE_JOINED,
    TBON_EV_NODE_LEFT, TBON_EV_VIEW_STABLE,
    /* An event beyond the base set (docs/api.md): node `rank` was adopted by `parent` on a
     * stream whose upstream filter keeps no recoverable state (no
     * F_get_FilterState): results of the waves in flight at the failure may
     * miss its subtree. Always right after its TBON_EV_NODE_ADOPTED. */
    TBON_EV_DATA_LOST,
    /* Additions for suspicion (docs/fault-tolerance.md): node `rank` has been
     * silent past its heartbeat timeout and is suspected (`parent`: the
     * first observer). Waves stop waiting for its subtree, nothing is fenced
     * yet. Confirmed, it is followed by TBON_EV_NODE_FAILED; refuted (it
     * spoke again) by TBON_EV_NODE_ALIVE, and it counts in the next waves. */
    TBON_EV_NODE_SUSPECT,
    TBON_EV_NODE_ALIVE,
    /* A plug-in filter crashed (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) or
     * ran past its limit (TBON_FILTER_PARAM_LIMIT) on node `rank`, on stream
     * `stream` - or a filter returned an error over a wave's input (signal
     * -1): `filter` is its id, `signal` the signal (0: past its limit),
     * `detail` names the filter, the stream, the signal and where, and the
     * ranks whose packets were its input. A crash drops that call's input
     * (the wave goes on without it) and the node goes on; a filter past its
     * limit ends its commnode, which is then taken for failed
     * (TBON_EV_NODE_FAILED follows) and whose orphans do not send that
     * stream's input again (at the front-end, rank 0, the call is left to
     * a thread of its own and the front-end goes on). On a wait-for-all or
     * timeout stream the outcome of that wave is TBON_EFILTER from the
     * receive, in its place among the waves (tbon_stream_request names it);
     * on a don't-wait stream the stream's next receive returns TBON_EFILTER.
     * docs/filter-guide.md, "When a filter crashes or hangs". */
    TBON_EV_FILTER_ERROR,
    /* At the sender of a message (tbon_net_send_to, tbon_net_multicast):
     * destination `rank` failed or left (`incarnation`: the one the
     * message was for) before it took message number `message` (the
     * sender's messages are numbered 1, 2, ... in the order of the calls
     * that returned 0) of tag `tag`; that destination never gets it. One
     * event per message and destination. */
    TBON_EV_UNREACHABLE,
} tbon_event_type_t;

typedef struct tbon_event {
    tbon_event_type_t type;
    tbon_rank_t rank;          /* the node concerned */
    tbon_rank_t parent;        /* its (new) parent, for ADOPTED and JOINED */
    uint32_t    incarnation;
    uint64_t    view_version;  /* for VIEW_STABLE */
    /* FILTER_ERROR only: */
    uint32_t    stream;
    int         filter;
    int         signal;
    char        detail[384];
    /* UNREACHABLE only: */
    uint64_t    message;
    int         tag;
} tbon_event_t;

/* The next membership event seen by this process. Returns 0, TBON_ETIMEOUT or
 * TBON_ECLOSED. */
int tbon_net_next_event(tbon_net_t *net, tbon_event_t *ev, int timeout_ms);

/* A descriptor for the application's own event loop (poll, epoll, select,
 * asyncio): readable while a call with timeout 0 would return at once -
 * tbon_net_recv (a packet, a wave's error, a filter failure),
 * tbon_net_next_event (an event) or tbon_net_recv_direct (a message) - and
 * for good once the network has shut down (each then says TBON_ECLOSED).
 * Level-triggered: it stays readable until all of those are taken, so a
 * loop takes what each of them has with timeout 0 (an event left untaken
 * keeps it readable). Owned by net (closed by tbon_net_destroy): only
 * watch it, never read or close it. The same descriptor every call; a
 * negative error code if none can be made (tbon_net_error says why).
 * Nothing is needed to drive the network meanwhile: no thread of the
 * application's own (docs/api.md, "An event loop of your own"). */
int tbon_net_fd(tbon_net_t *net);

/* --- membership views (docs/user-guide.md, "Membership") ---
 * The FE numbers every change of the session's membership (failures,
 * adoptions) with a view version and sends it to every process; once every
 * live process has applied version v and every live node has a parent, the
 * FE gets TBON_EV_VIEW_STABLE with view_version v. Version 1 is the tree as
 * it started. */
/* The last view version this process has applied. */
uint64_t tbon_net_view_version(tbon_net_t *net);
/* The live nodes of this process's view (FE, commnodes, back-ends), in rank
 * order: writes up to cap ranks, returns how many there are. At the FE the
 * view follows its events at once, before the version that carries them is
 * made. */
int      tbon_net_view(tbon_net_t *net, tbon_rank_t *ranks, size_t cap);

/* --- attributes (docs/user-guide.md, "Attributes") ---
 * Every process may publish key/value attributes (NUL-terminated strings:
 * a key of 1 to 255 bytes, a value of at most 65,536); they are replicated
 * to the FE (tbon_fe_get_attr). Set key to value, or delete it with value
 * NULL. Only the change travels; it reaches the FE even if a parent on the
 * way fails. Returns 0, TBON_EINVAL, TBON_ENOMEM or TBON_ECLOSED. */
int      tbon_net_set_attr(tbon_net_t *net, const char *key, const char *value);

/* --- logging --- */

enum { TBON_LOG_ERROR = 0, TBON_LOG_WARN = 1, TBON_LOG_INFO = 2, TBON_LOG_DEBUG = 3 };

/* A logger gets each line, already formatted with time, rank, role and tag,
 * without a newline. It may be called from any library thread. */
typedef void tbon_log_fn(void *arg, int level, const char *line);

/* Replace the logger of this process (NULL restores the default: stderr, or
 * the session's log file in a commnode). Level: from $TBON_LOG
 * (error|warn|info|debug; default warn) unless set here. */
void tbon_log_set_handler(tbon_log_fn *fn, void *arg);
void tbon_log_set_level(int level);

#ifdef __cplusplus
}
#endif

#endif
