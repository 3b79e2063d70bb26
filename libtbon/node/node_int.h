/* node_int.h - the node's private state, shared by node.c (loop, commands,
 * connections), node_start.c (launch, start-up, shutdown) and the parts of a
 * stream: node_stream.c (the stream), node_wave.c (its waves), node_reqs.c
 * (its kept requests), node_ffault.c (its filter calls and faults),
 * node_cover.c (what results hold) and node_exact.c (exact streams) */
#ifndef TB_NODE_INT_H
#define TB_NODE_INT_H

#include <pthread.h>
#include <sys/socket.h>
#include <stdatomic.h>

#include "codec/ctl.h"
#include "codec/packet_int.h"
#include "net/conn.h"
#include "filter/filter.h"
#include "node/node.h"
#include "node/node_ft.h"
#include "util/hot.h"
#include "util/ranks.h"

/* Back-pressure marks (bytes queued on one connection, or for the app). */
#define TB_HWM (4u << 20)
#define TB_LWM (1u << 20)
/* The most bytes of messages a process may have sent and not yet seen
 * acknowledged by their destinations before its next send waits. */
#define TB_DLOG_WINDOW (4u << 20)

enum child_state { CH_LAUNCHED, CH_CONNECTED, CH_READY, CH_GONE };

typedef struct tb_child {
    tbon_rank_t rank;
    int         is_be;
    pid_t       pid;          /* 0 if not launched by us (attach) */
    int         state;
    uint32_t    count;        /* processes in its subtree, once ready */
    int         exited;
    int         status;
    int         released;     /* it left us while the tree ran (dead, fenced or
                                 adopted elsewhere): never waited for or killed */
    tb_conn_t  *conn;
    int         blocked;      /* reading paused for its stream queues */
    size_t      qbytes;       /* bytes it has queued in all streams' waves */
    size_t      qbytes_open;  /* of them, in units it has not finished (they do not
                                 count against it: node.c, pressure()) */
    /* The fault-tolerance layer's own per-child state (its view
     * versions, consistency checks, joins) is ft's, by slot index
     * (node_ft.h); the node keeps the one flag it acts on itself: */
    int         leaving;      /* it said it leaves (TB_CTL_LEAVE, a node message):
                                 its end is no failure, and its link is not
                                 relinked (node_link.c) */
    /* start-up (node_start.c) */
    int64_t     launched_at;  /* when we launched it (ms; 0: not launched by us) */
    int64_t     due;          /* it should have connected by then (ms; 0: no
                                 limit), or later while its siblings still
                                 come in, up to due_max */
    int64_t     due_max;
    int         left_out;     /* it failed during start-up: the tree starts
                                 without it */
    int         suspect;      /* silent past the heartbeat timeout (ft/suspect.c):
                                 waves do not wait for it until it speaks */
    int         ev_lost;      /* its event connection ended: its data link's end
                                 is its death, not a break to wait out */
} tb_child_t;

/* A FIFO of packets (one child's queue on one stream). */
typedef struct tb_pq {
    tb_ring_t ring;           /* struct tb_pq_ent, oldest first */
    size_t units;             /* complete waves queued (packets with more == 0) */
    size_t bytes;
    size_t open_bytes;        /* of them, in the unit still open at the tail */
} tb_pq_t;
struct tb_pq_ent {
    tbon_packet_t *pkt;
    int more;                 /* the child's wave continues after this packet */
    uint64_t key;             /* the wave it belongs to (docs/protocol.md 8.4) */
};

/* The parts of a stream's state, each owned by the file that keeps it; the
 * others read them only through that file's calls (node_int.h below). */

/* node_reqs.c: the requests a node passed down whose waves are not closed
 * here (struct tb_req), for children adopted before they got them (fault
 * tolerance on, not DONTWAIT; bounded). */
typedef struct tb_reqs_st {
    tb_ring_t ring;
    size_t    bytes;          /* their payloads' bytes */
    uint64_t  dropped;        /* the last of them dropped for room, its wave open */
} tb_reqs_st_t;

/* node_ffault.c: a stream's filter faults. */
typedef struct tb_ffault_st {
    int32_t   limit_ms;       /* a plug-in call's limit (TBON_FILTER_PARAM_LIMIT);
                                 -1: the node's default */
    uint8_t   hung_above;     /* the parent's filter of this stream hung over
                                 what we sent: none of it goes to an adopter */
    uint64_t  poisoned[8];    /* FE: keys of waves whose input a filter fault
                                 below dropped: their outcome is TBON_EFILTER
                                 (0 = free) */
    char     *poison_msg[8];  /* FE: why, for each (malloc'd, or NULL) */
} tb_ffault_st_t;

/* node_cover.c: a stream's coverage. */
typedef struct tb_cover_st {
    uint64_t  q, at;          /* FE: the request of the wave being delivered and
                                 its number among all streams' requests (0: not
                                 known) */
    tb_ranks_t state;         /* the back-ends whose input the up filter's state
                                 holds: its composed state's coverage */
    tb_ranks_t exp;           /* FE: the members a request sent now expects, */
    uint64_t  exp_changes;    /* as of this many membership changes */
    int       exp_valid;
} tb_cover_st_t;

/* node_exact.c: what an exact stream keeps. */
typedef struct tb_exact_st {
    tb_ring_t ret;            /* the units this node sent up and the FE has not
                                 said delivered (struct tb_ret), to send again
                                 after an adoption; bounded */
    size_t    ret_bytes;
    uint8_t  *bbuf;           /* BE: the bytes of what ret keeps */
    size_t    bcap, bhead, btail;
    uint64_t  done;           /* the FE delivered every wave up to this key */
    tb_ring_t late;           /* FE: partials that came after their wave closed
                                 below (struct tb_ret), for waves not delivered */
    size_t    late_bytes;
    uint64_t  late_lost;      /* FE: the last key whose late partials were dropped
                                 for room: waves up to it are not waited for */
    uint64_t  done_down;      /* the last mark passed down (on a request, or alone) */
    uint32_t  undone;         /* FE: waves delivered since the mark last moved */
    uint32_t  marks_held;     /* FE: times it moved since one last went down */
} tb_exact_st_t;

typedef struct tb_stream_st {
    uint32_t  id;
    int       up, sync, down;
    int       bcast;          /* over every back-end, joiners included */
    uint32_t  timeout_ms;
    tbon_rank_t *members;
    size_t    nmembers;
    uint8_t  *part;           /* per child: takes part */
    tb_pq_t  *q;              /* per child: packets of the wave being collected */
    size_t    nonempty;       /* children with a complete unit queued */
    size_t    waiting_on;     /* the child found last to hold a wave back
                                 (node_wave.c: only a hint, looked at first) */
    int64_t   deadline;       /* TIMEOUT: when the current wave is cut; 0 = none */
    tb_timer_t timer;         /* armed for deadline (arg: the node) */
    void     *up_state, *down_state;
    tbon_packet_t *up_params, *down_params;
    /* wave keys (docs/protocol.md 8.4) */
    uint64_t  down_q;         /* FE: requests sent so far on this stream */
    uint64_t  last_q;         /* the last request that came down */
    uint64_t *seen_to;        /* per child: the last request it saw before it was
                                 adopted here (UINT64_MAX: not adopted) */
    uint64_t *fwd_from;       /* per adopted child: the first request sent to it here */
    uint64_t *sent;           /* per adopted child: the last key it had sent up before */
    uint64_t  sent_key;       /* the last key this node sent up (or buffered) */
    uint64_t  closed;         /* the key of the last wave sent up */
    int       has_closed;
    tb_reqs_st_t rq;          /* requests kept for adopted children (node_reqs.c) */
    int       unsettled;      /* FE: nodes failed or were adopted since the
                                 requests in flight went: look for lost waves
                                 as waves close (settle_stream) */
    tbon_packet_list_t extra; /* stale input of a state-recoverable filter, for
                                 the next wave */
    tbon_packet_list_t kept;  /* BE: sent packets not yet folded into up_state */
    tb_ffault_st_t ff;        /* filter faults (node_ffault.c) */
    tb_cover_st_t cov;        /* coverage (node_cover.c) */
    int       exact;          /* an exact stream: an associative up filter, fault
                                 tolerance on, not don't-wait */
    tb_exact_st_t ex;         /* what an exact stream keeps (node_exact.c) */
    /* Its performance counters (node_perf.c reads them), by TB_PERF_S_*
     * (codec/ctl.h); the rank, stream and queue fields are filled there.
     * Kept always: a few adds per packet (bench/bench_perf.sh). */
    uint64_t  perf[TB_PERF_SW];
} tb_stream_st_t;

/* Counting into a stream's counters; compiled out with -DTB_PERF_OFF (the
 * baseline bench/bench_perf.sh measures them against). */
#ifdef TB_PERF_OFF
#define TB_PERF_ADD(s, f, v) ((void)0)
#define TB_PERF_PKT(s, f, p) ((void)0)
#else
#define TB_PERF_ADD(s, f, v) ((void)((s)->perf[f] += (v)))
/* a packet and its payload's bytes: f and the field after it */
#define TB_PERF_PKT(s, f, p)                                                   \
    do {                                                                       \
        size_t pl_len_;                                                        \
        tb_packet_payload((p), &pl_len_);                                      \
        (s)->perf[f]++;                                                        \
        (s)->perf[(f) + 1] += pl_len_;                                         \
    } while (0)
#endif

/* The node's life (seed 003's processes start, serve, and end in order).
 * The transitions tb_node_enter allows:
 *   STARTING      -> RUNNING        the whole subtree is connected (READY
 *                                   went up); a back-end once connected
 *   STARTING      -> SHUTTING_DOWN  the session ends before the tree is up
 *   RUNNING       -> SHUTTING_DOWN  an orderly end: the children are told
 *   any of these  -> STOPPED        the loop ends (the children left, a
 *                                   back-end leaves, the session is gone)
 *   STOPPED       -> FINISHED       everyone waiting was told
 * Any other move is refused (tb_node_enter returns 0), which is how a
 * second shutdown or a late READY are ignored. */
enum tb_life {
    TB_LIFE_STARTING,
    TB_LIFE_RUNNING,
    TB_LIFE_SHUTTING_DOWN,
    TB_LIFE_STOPPED,
    TB_LIFE_FINISHED,
};

/* What only the front-end's node holds (n->fe; NULL in every other node):
 * its Slurm steps (node_start.c) and its attach file. What the front-end's
 * fault tolerance holds (the membership root's pending changes and orphans,
 * the joins it answers, its suspicions) is ft's, in its parts' objects
 * (ft/ft_int.h). Owned by the reactor thread. */
typedef struct tb_fe_state {
    /* under Slurm (slurm.h): the next depth to start and each depth's srun */
    uint32_t   slurm_next, slurm_depth;
    pid_t     *slurm_pid;     /* by depth; 0: not started */
    char      *attach_path;   /* the attach file written (its secret goes with
                                 the session: removed by tb_node_destroy) */
    size_t     nmissing;      /* ranks left out of the start-up so far */
    char       first_missing[512]; /* why the first of them was */
} tb_fe_state_t;

/* Threads. The node is owned by the thread that drives it: its own thread
 * (tb_node_start), or for a back-end's inline node whoever set
 * net->driving under net->mu (the application's thread, or the EDS's in
 * cb_kick): that hand-over is the synchronisation, and every field not
 * marked otherwise is the driver's alone. Other threads reach it through
 * the command queue (tb_node_post), and read only what is marked below.
 * cfg, cbs, rank and role do not change after tb_node_new (the EDS thread
 * reads role and cbs: tb_node_parent_gone). */
struct tb_node {
    tb_node_config_t cfg;
    tb_node_cbs_t cbs;
    tb_topology_t *topo;
    uint8_t   *topo_frame;    /* the TOPOLOGY frame every new child gets; to be
                                 dropped whenever the topology changes */
    size_t     topo_frame_len;
    tbon_rank_t rank;
    _Atomic tbon_rank_t parent_rank; /* the EDS thread reads it */
    tb_role_t  role;
    tb_fe_state_t *fe;        /* the front-end's own state; NULL elsewhere */
    /* FE: what a result's expected back-ends are made of (node_cover.c):
     * the requests sent so far on all streams, and per rank the number of
     * the first request after its join (born) and after its failure or
     * departure (gone; 0: none). The reactor's. */
    struct tb_cover_fe {
        uint64_t  reqs;
        uint64_t  changes;    /* membership changes so far */
        uint64_t  changed;    /* the number of the first request after the last */
        uint64_t *born, *gone;
        uint8_t  *susp;       /* suspected now (TBON_EV_NODE_SUSPECT) */
        size_t    n;
    } cover;
    int        settle_due;    /* FE: look for lost waves after this dispatch
                                 (tb_stream_settle); the reactor's */
    const struct tb_ft_ops *ft; /* the fault-tolerance layer (cfg.ft) */
    /* Fault tolerance's own state (ft/ops.c's struct tb_ft, which owns the
     * objects of ft/ft_int.h: recovery, views, joins, notices, suspicions,
     * attributes, the EDS), opaque here (node_ft.h: tb_nft_state): the
     * node asks for what it needs through n->ft (tb_ft_ops_t). Set by ft's start in tb_node_new,
     * before any other thread sees the node, and freed by ft's free in
     * tb_node_destroy, after they are done with it; NULL before start. */
    struct tb_ft *ftst;
    uint32_t   depth;
    char       role_name[16];

    tb_loop_t *loop;          /* net/loop.h: connections, timers, and the
                                 command mailbox (the driver runs it) */
    tb_timer_t start_timer;   /* start_deadline: the tree must be up by then */
    tb_timer_t shutdown_timer;/* shutdown_deadline: the children must have left */
    /* What a connection's events go to (node.c's dispatch), set once at
     * create: tb_node_watch gives it to each connection it first watches. */
    void (*conn_io)(tb_io_t *io, uint32_t events);
    /* What the link layer calls when a peer is lost for good
     * (tb_node_peer_lost), set once at create. */
    void (*lost)(struct tb_node *n, struct tb_conn *c, const char *why);
    /* What losing a child during the start-up means for it
     * (tb_node_child_lost_at_start), set once at create: node_peers.c
     * calls it, and node_missing.c calls node_peers.c. */
    void (*start_lost)(struct tb_node *n, size_t i, const char *why);
    tb_timer_t late_timer;    /* late_due: the lost parent's connection closes */
    tb_timer_t cut_timer;     /* a packet passed on piece by piece whose source
                                 stalls while other frames wait (node_cut.c) */
    tb_timer_t ft_timer;      /* the next of the fault-tolerance layer's times */
    /* Answers held for the parent (tb_node_exec_held): while hold_up, a
     * dispatch leaves the parent's queue unwritten; held counts the
     * commands whose output waits; hold_timer bounds the wait. */
    int        hold_up;
    unsigned   held;
    tb_timer_t hold_timer;
    /* A turn's flush before it waits (after_dispatch, node.c) is needed
     * only if something happened since the last one: a timer, ft's timers
     * acting, or work that flush itself left (flushed 0). churn counts the
     * links lost or broken, which queue work behind the flush's pass. */
    int        flushed;
    unsigned   churn;
    /* the link layer (node_link.c, net/link.h) */
    tb_timer_t link_timer;    /* owed ACKs, resend requests, stalls, relink deadlines */
    tb_timer_t ack_timer;     /* lazy lone ACKs (lazy: a kicker does not wake for them) */
    /* tb_node_links' next pass is whole (a link timer went off), or is
     * whole if churn or the parent's relinking moved since the last one
     * (links_steady: the parent's link was not relinking then) */
    int        links_whole;
    unsigned   links_churn;
    int        links_steady;
    int        relink_ms;     /* how long a broken link may take (0: no relinking) */
    pthread_t  relink_th;     /* connecting to the parent again (relink_busy) */
    int        relink_busy;
    uint32_t   relink_gen;    /* the attempt whose answer is awaited */
    int        lfd;
    uint16_t   port;
    struct tb_relay *relay;   /* the children's stderr (relay.h); NULL until a launch */
    struct tb_sshmux *sshmux; /* ssh masters to the children's hosts (sshmux.h), or NULL */
    pthread_t  thread;
    int        threaded;

    tb_conn_t *parent;
    tb_conn_t *dead;          /* retired connections, freed after each turn */
    tb_conn_t *dead_late;     /* a lost parent's, freed at late_due (ms) */
    int64_t    late_due;
    tb_child_t *child;
    size_t     nchild;
    size_t     nsorted;       /* child[0..nsorted) in rank order; adopted ones follow */
    size_t     capchild;
    tbon_rank_t *child_ranks;

    tb_stream_st_t **streams; /* by id */
    size_t     nstreams;
    uint8_t   *ended;         /* bit per stream id: ended (tbon_stream_close);
                                 what still comes for it is dropped quietly */
    size_t     nended;        /* bytes */
    tb_filter_reg_t *filters;
    /* The plug-in filter call running now, if any (node_ffault.c), for the
     * EDS thread, which takes the node for failed when it runs past its
     * limit (ft/eds.c, watch_filter). Under fw.mu. */
    struct tb_fwatch fw;
    atomic_int fw_armed;      /* a plug-in is loaded: the EDS watches fw */
    struct tb_fecall *fecall; /* FE: the worker of plug-in calls (node_fecall.c) */
    int        fecall_left;   /* FE: a call was left to its thread: the filters
                                 stay loaded for the process's life */
    int        fw_default;    /* ms: $TBON_FILTER_LIMIT_MS, else 5000 */

    /* commands: any thread posts them to the loop's mailbox (tb_node_post),
     * the driver drains it; the counters are atomic, written by the driver
     * (pending also by posters) and read by senders waiting on bcond (under
     * qmu) */
    pthread_mutex_t qmu;
    pthread_cond_t bcond;     /* senders waiting on the backlog */
    atomic_size_t pending;    /* bytes of SEND commands not yet taken */
    atomic_size_t queued;     /* bytes in connection queues */
    atomic_size_t dlog_bytes; /* bytes of messages sent from here that are not
                                 acknowledged yet (node_dlog.c) */
    atomic_int    waiters;
    atomic_int    closed;


    /* state */
    /* The node's life, one value (enum tb_life; tb_node_enter keeps to its
     * transitions). Written by whichever thread drives the node (its own
     * thread; for a back-end's inline node, the thread that set
     * net->driving: the application's or the EDS's in cb_kick), read by the
     * others without a lock (tb_node_stopped): atomic, release/acquire. */
    atomic_int life;
    int        failed;        /* a fatal failure was reported (the first only
                                 goes up, or to the application) */
    int64_t    start_deadline;
    int64_t    shutdown_deadline;
    int        up_paused, down_paused;
    int        attach_written;
    int        session_written; /* FE: cfg.session_file is there (node_session.c) */
    int        detached;      /* FE: tbon_fe_detach: the tree goes on without us */
    uint64_t   direct_seq;    /* the number of the last message sent from here
                                 to other processes (node_direct.c) */
    uint64_t   direct_dropped; /* messages passing here with no way on */
    struct tb_dlog *dlog;     /* their order, acknowledgements and resends
                                 (node_dlog.c); NULL until the first */
    size_t     ready_count;
    size_t     total;
    int64_t    last_conn;     /* when a child last connected (ms; start-up) */
    int64_t    drop_every;    /* TBON_TEST_DROP_DIRECT: a commnode drops every
                                 Nth message it passes on (0: none; -1: not
                                 read yet) */
    uint64_t   drop_passed;
    atomic_int released;      /* tb_node_release_waiters: no sender waits any
                                 more (read under qmu by senders, as closed) */
    /* Performance data (node_perf.c): when the node was made (ms), and the
     * gathering it answers now (NULL before the first). The driver's. */
    int64_t    born_ms;
    struct tb_nperf *perf;
};

/* node_session.c: the FE's session file written again (the tree is up, its
 * children or plug-ins changed), if it has one; the detach (TB_CMD_DETACH),
 * answered through reply. */
void tb_node_session_changed(tb_node_t *n);
void tb_node_detach(tb_node_t *n, const char *file, uint32_t hold_ms, tb_node_reply_t *reply);

/* node.c */
/* Move the node's life to `to` if the table above allows it; 1 if it moved. */
int  tb_node_enter(tb_node_t *n, enum tb_life to);
static inline enum tb_life tb_node_life(const tb_node_t *n)
{
    return (enum tb_life)atomic_load_explicit(&n->life, memory_order_acquire);
}
/* Shutting down or past it (no new work, no failure reports). */
static inline int tb_node_ending(const tb_node_t *n)
{
    return tb_node_life(n) >= TB_LIFE_SHUTTING_DOWN;
}
void tb_node_send_ctl(tb_node_t *n, tb_conn_t *c, int op, tbon_packet_t *p); /* takes p */
/* Messages between any two processes. node_direct.c: m (decoded from p, or
 * p NULL) passed on towards its destinations from where it came: the
 * parent (-1), child `from`, or this process (TB_DIRECT_HERE); 1 if this
 * process is a destination too (*mine: its number for a unicast), which
 * the caller takes. */
#define TB_DIRECT_HERE (-3)
int  tb_direct_route(tb_node_t *n, int from, const tb_ctl_direct_t *m, tbon_packet_t *p,
                     uint32_t *mine);
/* node_dlog.c, above it: the application's message (TB_CMD_DIRECT)
 * numbered, kept and sent; one that came (m, decoded from p) from the
 * parent (-1) or child `from` routed, and taken in order here if this
 * process is a destination (or an acknowledgement taken); the topology
 * changed (what is not yet acknowledged goes again); the state freed. */
/* A ping (m; from as above) passed on, answered here if we are its
 * target, or its answer taken here (cbs.pong) if we are its origin. */
void tb_direct_ping(tb_node_t *n, int from, const tb_ctl_ping_t *m);
typedef struct tb_dlog tb_dlog_t;
void tb_dlog_send(tb_node_t *n, tb_cmd_t *c);
void tb_dlog_route(tb_node_t *n, int from, const tb_ctl_direct_t *m, tbon_packet_t *p);
void tb_dlog_topo(tb_node_t *n);
void tb_dlog_ride(tb_node_t *n);
void tb_dlog_free(tb_node_t *n);
void tb_dlog_resume(tb_node_t *n);
/* TB_CTL_FILTER for every plug-in loaded so far but the first skip (to a
 * child; node_stream.c). */
void tb_stream_filters_to(tb_node_t *n, tb_conn_t *c, uint32_t skip);
/* How many plug-ins are loaded here, from the first plug-in id on without a
 * gap (TB_CTL_CATCH_UP). */
uint32_t tb_stream_filters_loaded(const tb_node_t *n);
/* Send p up (to the app at the FE); more: other packets of the same wave
 * follow (TB_FRAME_F_MORE). Takes p. */
void tb_node_to_parent(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more, uint64_t key);
/* Send p (borrowed) down to child i as part of request q (docs/protocol.md 8.4). */
/* Request q (DATA) to child i; done: the FE's delivered mark riding on it
 * (TB_FRAME_F_DONE), or 0. */
void tb_node_to_child(tb_node_t *n, size_t i, uint32_t stream, tbon_packet_t *p, uint64_t q,
                      uint64_t done);
void tb_node_fail(tb_node_t *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4))) TB_COLD;
int  tb_node_child_index(const tb_node_t *n, tbon_rank_t r);
void tb_node_close_child(tb_node_t *n, size_t i, const char *why);
/* Child i's rank was restarted (a view brought its next generation): the
 * connection of its old process ends with no report, its end being known. */
void tb_node_drop_child(tb_node_t *n, size_t i);
void tb_node_begin_shutdown(tb_node_t *n);
/* The children must have left by due (ms): the shutdown timer. */
void tb_node_shutdown_at(tb_node_t *n, int64_t due);
/* A back-end leaves (its application destroys the network). */
void tb_node_leave(tb_node_t *n);
void tb_node_watch_conn(tb_node_t *n, tb_conn_t *c);       /* EPOLLIN */
/* A new child slot (an adopted orphan); its index, or TBON_ENOMEM. */
int  tb_node_add_child(tb_node_t *n, tbon_rank_t rank, int is_be);
/* FE: hand the application an event (nothing elsewhere). */
void tb_node_emit(tb_node_t *n, tbon_event_type_t type, tbon_rank_t r, tbon_rank_t p,
                  uint32_t inc, uint64_t version);
/* FE without fault tolerance: commnode r failed, the session ends. */
void tb_node_fault_end(tb_node_t *n, tbon_rank_t r);

/* Between node.c (the loop), node_link.c (links) and node_ctl.c (control
 * messages): */
void tb_node_on_conn(tb_node_t *n, tb_cmd_t *cmd);          /* a child connected */
void tb_node_on_ctl(tb_node_t *n, int child, int op, tbon_packet_t *p); /* child -1: parent */
void tb_node_parent_lost(tb_node_t *n, const char *why);
/* The link layer's part (node_link.c; net/link.h). c (the parent's or a
 * child's connection) has c->closed set: replace its socket (a relink) if
 * its peer may still live, else lose the peer as before. */
void tb_node_link_broke(tb_node_t *n, tb_conn_t *c);
/* After every dispatch: owed ACKs and resend requests, stalled frames,
 * relink deadlines; arms link_timer for the next. */
void tb_node_links(tb_node_t *n);
/* TB_CMD_RELINK: a child's new socket, or ours to the parent. */
void tb_node_on_relink(tb_node_t *n, tb_cmd_t *cmd);
/* Child r's process is gone (its event connection ended, it exited): a
 * broken link of its is not waited out. */
void tb_node_child_dead(tb_node_t *n, tbon_rank_t r, const char *why);
void tb_node_links_init(tb_node_t *n);   /* TBON_RELINK_MS */
void tb_node_links_free(tb_node_t *n);   /* joins the relink thread */
void tb_node_watch(tb_node_t *n, tb_conn_t *c, uint32_t events);
void tb_node_bury(tb_node_t *n);                  /* free the connections retired */
void tb_node_bury_list(tb_conn_t **list);
/* Out of the loop, freed after the batch (tb_node_bury); _late: some 50 ms
 * later (a lost parent's, while its orphans recover). */
void tb_node_retire(tb_node_t *n, tb_conn_t *c);
void tb_node_retire_late(tb_node_t *n, tb_conn_t *c);

/* A connection of this node to peer rank (child slot index, -1: the
 * parent) over fd; NULL if out of memory (fd is the caller's then). A
 * commnode's may pass a packet's pieces on as they come (node_cut.c). */
static inline tb_conn_t *tb_node_conn_new(const tb_node_t *n, int fd, tbon_rank_t rank,
                                          int index)
{
    tb_conn_t *c = tb_conn_new(fd, rank, index, TB_FRAME_MAX_DEFAULT);
    if (c)
        c->may_cut = n->role == TB_ROLE_COMMNODE;
    return c;
}

/* node_cut.c: a large packet's pieces passed on as they come. A frame from
 * c that is a piece, an abort (TB_FRAME_F_ABORT), or comes while c passes a
 * packet on: 1 if handled here (passed on or dropped; f released), -1 if it
 * broke the protocol (c closed, c->why set, f released), 0 if it goes the
 * usual way (reassembly). */
int  tb_cut_frame(tb_node_t *n, tb_conn_t *c, tb_frame_t *f);
/* c goes away: the links of its packet under way told to drop it, or c out
 * of the links of the packet it was taking. */
void tb_cut_forget(tb_conn_t *c);
/* Our own link to the parent is being replaced: a child's loss waits. */
int  tb_node_parent_relinking(const tb_node_t *n);
/* A packet over the session's maximum: said (rate-limited), not sent. */
void tb_node_too_big(uint32_t stream, tbon_packet_t *p, tbon_rank_t to) TB_COLD;
/* A peer lost for good (node_peers.c): n->lost, called by node_link.c. */
void tb_node_peer_lost(tb_node_t *n, tb_conn_t *c, const char *why);

/* Tell ft that event ev happened; its result (tb_ft_ev_kind_t). */
static inline int tb_node_ft(tb_node_t *n, tb_ft_event_t ev)
{
    return n->ft->event(n, &ev);
}
/* The same for an event with a child index or nothing. */
static inline int tb_node_ft_child(tb_node_t *n, tb_ft_ev_kind_t kind, size_t i)
{
    return tb_node_ft(n, (tb_ft_event_t){ .kind = kind, .u.child = i });
}

/* node_start.c: launching children */
/* What the launches of one round share (the secret and session as
 * arguments, the environment that travels, each host's address for us). */
typedef struct tb_launch_round tb_launch_round_t;
tb_launch_round_t *tb_node_round_new(tb_node_t *n, tbon_error_t *err);   /* NULL: ENOMEM */
void tb_node_round_destroy(tb_launch_round_t *c);
/* Launch child i (its program is exe). 0, TBON_ENOMEM (err), or another
 * code with err naming the rank, host and why. */
int  tb_node_launch_one(tb_node_t *n, size_t i, const char *exe, tb_launch_round_t *c,
                        tbon_error_t *err);
/* Before the first round: under Slurm at the FE, the first step (*slurm set:
 * the steps start every child); else ssh masters for hosts with several
 * children. 0 or an error (err). */
int  tb_node_launch_prepare(tb_node_t *n, int *slurm, tbon_error_t *err);
/* FE under Slurm: r is the rank of an srun step's process: its end is
 * handled (1), or r is no step (0). */
int  tb_node_slurm_exited(tb_node_t *n, tbon_rank_t r, int status);
/* "exited with status 1", "was killed by signal 9" */
void tb_node_describe_exit(int status, char *how, size_t len);
/* node_missing.c: a start-up that survives failures (docs/protocol.md 7.1) */
/* Launch the children (tb_node_launch_prepare, then a first round). */
int  tb_node_launch_children(tb_node_t *n, tbon_error_t *err);
/* Launch every child slot not launched yet (those of a child left out, in
 * the same round); a launch that fails leaves that child out. 0 or
 * TBON_ENOMEM. */
int  tb_node_launch_pending(tb_node_t *n, tbon_error_t *err);
void tb_node_check_ready(tb_node_t *n);
void tb_node_startup_timer(tb_node_t *n);
void tb_node_child_exited(tb_node_t *n, tbon_rank_t r, int status);
/* Child i's connection closed before the tree was up (why): it is left out
 * of the start-up, unless we launched it and it still runs (its exit, with
 * its own words, says why). Reached from node_peers.c through n->start_lost. */
void tb_node_child_lost_at_start(tb_node_t *n, size_t i, const char *why);
/* A MISSING message from a child (m decoded from p): applied here, passed
 * up (FE: the start-up goes on without the rank, or fails with
 * require_all). */
void tb_node_on_missing(tb_node_t *n, const tb_ctl_missing_t *m, tbon_packet_t *p);
/* Child i failed during start-up (code; the message names its rank, host
 * and why): it is killed if it runs, and left out; its children become ours
 * (slots made, launched by the next tb_node_launch_pending), or with whole
 * its whole subtree is left out with it. The FE hears of each rank. */
void tb_node_left_out(tb_node_t *n, size_t i, int code, int whole, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Launch what is pending (tb_node_launch_pending), then see if we are ready. */
void tb_node_relaunch(tb_node_t *n);
/* When child i, launched now, should have connected (sets due, due_max). */
void tb_node_connect_due(tb_node_t *n, size_t i, int64_t now);
/* Arm the start timer for the next child due, or the deadline. */
void tb_node_arm_start(tb_node_t *n);
/* FE: 1 (and the start-up failed) if no back-end is left in the tree. */
int  tb_node_fe_no_backend(tb_node_t *n);
/* FE under Slurm: start every depth whose parents all listen (slurm.h). */
void tb_node_slurm_next(tb_node_t *n);
/* The pseudo-rank a depth's srun is watched under (by the EDS and the relay). */
#define TB_SLURM_STEP_RANK(d) ((tbon_rank_t)(TBON_RANK_NONE - 1 - (d)))
#define TB_SLURM_STEP_DEPTH(r) ((uint32_t)(TBON_RANK_NONE - 1 - (r)))
void tb_node_write_attach(tb_node_t *n);
void tb_node_reap_all(tb_node_t *n);

/* node_stream.c */
/* A packet from child (NULL: its wave had none); more: the child's wave
 * continues (TB_FRAME_F_MORE); late: sent again, or after its wave closed
 * below (TB_FRAME_F_LATE, exact streams). */
void tb_stream_up(tb_node_t *n, size_t child, uint32_t stream, tbon_packet_t *p, int more,
                  uint64_t key, int late);

/* A packet going down (takes p); q: its request number, 0 at the FE (which
 * numbers the requests of each stream). */
void tb_stream_down(tb_node_t *n, uint32_t stream, tbon_packet_t *p, uint64_t q);
int  tb_stream_create(tb_node_t *n, uint32_t id, int up, int sync, uint32_t timeout_ms,
                      int down, const tbon_rank_t *members, size_t nmembers);
void tb_stream_set_params(tb_node_t *n, uint32_t id, int which, tbon_packet_t *p); /* takes p */
void tb_stream_child_gone(tb_node_t *n, size_t child);
/* FE: after a failure or an adoption, the waves no node can bring any more
 * are given to the application as lost (docs/protocol.md 8.4). */
void tb_stream_settle(tb_node_t *n);
/* The node, after each dispatch: a settle asked for is done now. */
void tb_stream_settle_due(tb_node_t *n);
/* Child i's suspicion changed (child[i].suspect): the waves waiting for it
 * go on without it. */
void tb_stream_child_suspect(tb_node_t *n, size_t child);
void tb_stream_free_all(tb_node_t *n);
size_t tb_stream_child_bytes(const tb_node_t *n, size_t child);
/* A child slot was added: every stream grows its per-child arrays. */
int  tb_stream_add_child(tb_node_t *n);
int  tb_stream_known(const tb_node_t *n, uint32_t id);
/* An adopted child takes part in stream id; before, it had sent up to key
 * sent and seen the requests up to seen_to (docs/protocol.md 8.4). 1 if it
 * is the first of our children that does (the stream must be grafted up). */
int  tb_stream_join(tb_node_t *n, uint32_t id, size_t child, uint64_t sent, uint64_t seen_to);
/* A back-end sends p up on stream id: if the stream's filter can compose
 * state, fold p into the back-end's own state of that filter, so that after
 * an adoption it can send everything it ever sent again in one packet (what
 * it wrote to a parent that then died is lost in the socket). */
void tb_stream_keep(tb_node_t *n, uint32_t id, tbon_packet_t *p);
void tb_stream_fold_kept(tb_node_t *n, tb_stream_st_t *s);
/* Stream id ends here: the children that know it hear so (STREAM_END), and
 * what this node holds for it is freed; what still comes for it is dropped
 * quietly. Nothing if it is not known here. */
void tb_stream_end(tb_node_t *n, uint32_t id);
/* A plug-in filter of stream s crashed or ran past its limit here (sig 0)
 * over in[0..k) of the wave with this key (k 0, key 0: over its state or
 * kept sends): logged, and told to the FE
 * (TB_CTL_FILTER_FAULT). why: the filter layer's message. */
void tb_stream_filter_fault(tb_node_t *n, uint32_t stream, const tb_filter_t *f, int sig,
                            uint64_t key, tbon_packet_t *const in[], size_t k, const char *why);
/* FE: run plug-in f as tb_filter_run does, on the worker thread, waiting at
 * most limit ms (0: for ever) of the time the process could run; past it
 * TB_FILTER_HUNG (err says so), the call left to its thread with its input
 * and *state (set NULL). node_fecall.c. */
int tb_fecall_run(tb_node_t *n, const tb_filter_t *f, tbon_packet_t *const in[], size_t k,
                  tbon_packet_list_t *out, void **state, const tbon_filter_ctx_t *ctx,
                  int limit, tbon_error_t *err);
/* End the worker (it is idle: calls are waited for). */
void tb_fecall_free(tb_node_t *n);
/* The distinct sources of in[0..k), in input order: up to cap into out;
 * returns how many went. */
size_t tb_stream_sources(tbon_packet_t *const in[], size_t k, uint32_t *out, size_t cap);
/* A plug-in loaded here: the EDS watches its calls (TB_FT_EV_FILTER_LOADED). */
void tb_node_filter_loaded(tb_node_t *n);
/* FE: a FILTER_FAULT from below (or from here): the stream's error and a
 * TBON_EV_FILTER_ERROR event. */
void tb_stream_on_filter_fault(tb_node_t *n, const tb_ctl_filter_fault_t *m);
/* A joined child i learns every broadcast stream; a back-end takes part in
 * them from the next request on (a stream none of our children took part in
 * so far is grafted up), a commnode once something below it does. */
void tb_stream_bcast_join(tb_node_t *n, size_t i);
/* Adopter, on adopted child i's TB_CTL_CATCH_UP (after its grafts): tell it
 * of the plug-ins it lacks (it has the first `filters`) and of the streams
 * that concern its subtree and that it did not graft (TB_CTL_FILTER,
 * TB_CTL_STREAM flagged TB_STREAM_CATCHUP, TB_CTL_PARAMS). Adopted child:
 * such a stream, created here and grafted up if it is new; ignored if known
 * (the adoption grafted it). */
void tb_stream_catch_up(tb_node_t *n, size_t i, uint32_t filters);
void tb_stream_caught_up(tb_node_t *n, const tb_ctl_stream_t *d);
/* Graft stream s up to our parent (an adopted node, or one whose first
 * child joins it): its definition, the last key we sent, the last request
 * we saw. */
void tb_stream_graft(tb_node_t *n, tb_stream_st_t *s);

/* node_cover.c: coverage (docs/api.md, "Coverage") */
/* A received frame f flagged TB_FRAME_F_COVER: its coverage into cv (which
 * the caller has initialised) and f's length cut to the packet's. 0 (also
 * for a frame without the flag), or TBON_EFORMAT with c->why said. */
int  tb_cover_take(tb_node_t *n, const tb_conn_t *c, tb_frame_t *f, tb_ranks_t *cv);
/* p came from c with coverage cv (empty: none sent): p covers cv, or a
 * back-end child itself. cv is freed. */
void tb_cover_received(tb_node_t *n, const tb_conn_t *c, tbon_packet_t *p, tb_ranks_t *cv);
/* A filter made out[] of in[0..k): each output that covers nothing (one
 * the filter made) covers the union of the inputs; state (if not NULL)
 * gets that union too: what the filter's state holds. */
void tb_cover_outputs(tbon_packet_t *const in[], size_t k, tbon_packet_list_t *out,
                      tb_ranks_t *state);
/* FE: a request goes down; its number among all streams' requests. */
uint64_t tb_cover_request(tb_node_t *n);
/* FE: rank r was given to a joining process (ft/join.c): not expected in
 * any wave until its TBON_EV_NODE_JOINED. */
void tb_cover_joining(tb_node_t *n, tbon_rank_t r);
/* FE: rank r failed, left or joined (tb_node_emit). */
void tb_cover_member_event(tb_node_t *n, tbon_event_type_t type, tbon_rank_t r);
/* FE: p, a result of request q on stream, gets the back-ends its wave
 * expected. */
void tb_cover_deliver(tb_node_t *n, uint32_t stream, tbon_packet_t *p, uint64_t q);
void tb_cover_free(tb_node_t *n);
/* A stream's part: set up, released. */
void tb_cover_st_init(tb_cover_st_t *cv);
void tb_cover_st_free(tb_cover_st_t *cv);
/* FE: the wave of request q (at: its number among all streams' requests;
 * 0, 0: not known) is delivered next. */
void tb_cover_wave(tb_stream_st_t *s, uint64_t q, uint64_t at);
/* The back-ends whose input s's up filter state holds (a composed state's
 * coverage). */
tb_ranks_t *tb_cover_state(tb_stream_st_t *s);

/* node_exact.c: exact streams (docs/fault-tolerance.md, "Exact results") */
/* A unit this node sends up on s: kept until the FE says its wave is
 * delivered (TB_CTL_DONE), for an adoption. */
void tb_exact_retain(tb_node_t *n, tb_stream_st_t *s, tbon_packet_t *p, int more, uint64_t key);
/* The FE delivered every wave up to key: what is kept for them goes. alone:
 * the mark came as TB_CTL_DONE, and goes on to the children that take part
 * the same way; else it came on a request, and rides on it further down
 * (tb_exact_mark). */
void tb_exact_done(tb_node_t *n, uint32_t stream, uint64_t key, int alone);
/* A down DATA frame f flagged TB_FRAME_F_DONE: its mark into *done and f's
 * length cut to the packet's. 0 (*done = 0 without the flag), or
 * TBON_EFORMAT with c->why said. */
int  tb_exact_take_mark(const tb_conn_t *c, tb_frame_t *f, uint64_t *done);
/* The mark to put on a request s passes down now (0: none new); noted as
 * gone. */
uint64_t tb_exact_mark(tb_stream_st_t *s);
/* FE: the wave with key was delivered; now and then the children hear so. */
void tb_exact_delivered(tb_node_t *n, tb_stream_st_t *s, uint64_t key);
/* Adopted: the kept units of s go to the new parent again, flagged LATE. */
void tb_exact_replay(tb_node_t *n, tb_stream_st_t *s);
/* A unit of s that came late (flagged, or for a wave closed here): at the
 * FE kept for its wave (dropped if it was delivered), elsewhere sent on up
 * as it is. Takes p. */
void tb_exact_late(tb_node_t *n, tb_stream_st_t *s, tbon_packet_t *p, int more, uint64_t key);
/* FE: whether the wave with key, whose units are all here, should wait: it
 * lacks back-ends that are alive and expected, and a failure is still being
 * repaired (they may yet come, sent again by their adopted ancestors). */
int  tb_exact_hold(tb_node_t *n, tb_stream_st_t *s, uint64_t key);
/* FE: how many late partials the wave with key has; take them into in[]
 * (room for that many), returning how many went. */
size_t tb_exact_count_late(const tb_stream_st_t *s, uint64_t key);
size_t tb_exact_take_late(tb_stream_st_t *s, uint64_t key, tbon_packet_t **in);
/* Units of in[0..k) (unit u is in[start[u]..start[u+1])) whose coverage
 * overlaps an earlier one's are dropped: no node folds a back-end twice. The
 * new count. */
size_t tb_exact_disjoint(tb_node_t *n, tb_stream_st_t *s, tbon_packet_t **in, size_t k,
                         const size_t *start, size_t nunits);
void tb_exact_free(tb_node_t *n, tb_stream_st_t *s);
/* node_stream.c: the stream object, for the other parts of a stream */
static inline tb_stream_st_t *tb_stream_get(const tb_node_t *n, uint32_t id)
{
    return id < n->nstreams ? n->streams[id] : NULL;
}
/* (The three below are read by the waves and what sends up, which the
 * stream object calls in turn: inline, so that the calls run one way.) */
/* Stream id was ended here (tbon_stream_close): what comes for it is dropped. */
static inline int tb_stream_ended(const tb_node_t *n, uint32_t id)
{
    return id / 8 < n->nended && (n->ended[id / 8] >> (id % 8) & 1);
}
/* Whether any child still takes part in s. */
static inline int tb_stream_takes_part(const tb_node_t *n, const tb_stream_st_t *s)
{
    for (size_t i = 0; i < n->nchild; i++)
        if (s->part[i])
            return 1;
    return 0;
}
/* Does child i get request q of s going down? It takes part in s, and its
 * old parent had not passed q down to it already (an adopted child answered
 * that one, or will: a second copy would be answered twice). */
static inline int tb_stream_child_gets(const tb_stream_st_t *s, size_t i, uint64_t q)
{
    return s->part[i] && (s->seen_to[i] == UINT64_MAX || q > s->seen_to[i]);
}
/* Request q of s goes down: an adopted child's first new request here. */
static inline void tb_stream_forward_from(const tb_node_t *n, tb_stream_st_t *s, uint64_t q)
{
    for (size_t i = 0; i < n->nchild; i++)
        if (s->part[i] && !s->fwd_from[i] && s->seen_to[i] != UINT64_MAX && q > s->seen_to[i])
            s->fwd_from[i] = q;
}
/* This node sent (or buffered) a unit with key up on stream id. */
static inline void tb_stream_sent(tb_node_t *n, uint32_t id, uint64_t key)
{
    tb_stream_st_t *s = tb_stream_get(n, id);
    if (s && key > s->sent_key)
        s->sent_key = key;
}
/* node_wave.c: the waves of a stream */
/* FE: is every live member of s reached through a child that takes part? */
int  tb_stream_members_settled(const tb_node_t *n, const tb_stream_st_t *s);
/* A wave with no packet goes up as an empty DATA frame (protocol.md 7.3). */
void tb_wave_empty_up(tb_node_t *n, tb_stream_st_t *s, uint64_t key);
/* s's child queues and wave timer, freed (the stream ends). */
void tb_wave_free(tb_node_t *n, tb_stream_st_t *s);
/* node_reqs.c: the requests a stream keeps */
/* Keep request q (its packet p, borrowed; at: its number among all the FE's
 * requests) until its wave closes; bounded. */
void tb_reqs_keep(tb_stream_st_t *s, uint64_t q, tbon_packet_t *p, uint64_t at);
/* Drop the kept requests up to q. */
void tb_reqs_trim(tb_stream_st_t *s, uint64_t q);
void tb_reqs_free(tb_stream_st_t *s);
/* FE: whether request q is kept; *at its number among all streams'
 * requests (0 if not kept). */
int  tb_reqs_find(const tb_stream_st_t *s, uint64_t q, uint64_t *at);
/* FE: whether request q went down (is kept for its wave) and has a wave. */
int  tb_reqs_has_wave(const tb_stream_st_t *s, uint64_t q);
/* An adopted child gets the kept requests after seen_to, and owes them. */
void tb_reqs_resend(tb_node_t *n, tb_stream_st_t *s, size_t child, uint64_t seen_to);
/* node_ffault.c: filter calls and their faults */
/* A stream's part: set up (no limit of its own), released. */
void tb_ffault_st_init(tb_ffault_st_t *ff);
void tb_ffault_st_free(tb_ffault_st_t *ff);
/* TBON_FILTER_PARAM_LIMIT: a plug-in call's limit on this stream. */
void tb_ffault_set_limit(tb_ffault_st_t *ff, uint32_t ms);
/* The parent's filter hung over what this node sent on the stream (set
 * until the node's adoption is over): none of it goes to an adopter. */
void tb_ffault_set_hung_above(tb_ffault_st_t *ff, int hung);
int  tb_ffault_hung_above(const tb_ffault_st_t *ff);
/* FE: the wave with key lost input to a filter fault below: 1, and
 * forgotten; why into msg. 0 if not. */
int  tb_ffault_take_poison(tb_ffault_st_t *ff, uint64_t key, char *msg, size_t len);
/* Report a filter failure of stream id toward the FE (TB_CTL_STREAM_ERR). */
void tb_stream_error(tb_node_t *n, uint32_t id, const char *msg);
/* node_perf.c: performance data gathered up the tree (docs/protocol.md
 * 10.4). A gathering begins at the FE (TB_CMD_PERF) or comes from the
 * parent (TB_CTL_PERF); a child's answer (TB_CTL_PERF_DATA, m decoded from
 * p) joins ours, or passes on if ours has gone; a child lost owes none. */
void tb_perf_start(tb_node_t *n, uint64_t id, uint32_t wait_ms);
void tb_perf_on_data(tb_node_t *n, size_t child, const tb_ctl_perf_data_t *m, tbon_packet_t *p);
void tb_perf_child_gone(tb_node_t *n, size_t child);
void tb_perf_free(tb_node_t *n);

/* Run filter f of stream s over in[0..k) for the wave with key: at the FE a
 * plug-in on its worker thread within its limit, elsewhere watched by the
 * EDS; as tb_filter_run. */
int  tb_stream_run_filter(tb_node_t *n, tb_stream_st_t *s, const tb_filter_t *f,
                          uint64_t key, tbon_packet_t *const in[], size_t k,
                          tbon_packet_list_t *out, void **state, const tbon_filter_ctx_t *ctx,
                          tbon_error_t *err);
/* node_cover.c: the members of s that the wave of request q expected, that
 * have lacks, and that are alive and not under suspicion now, into out. */
void tb_cover_awaited(tb_node_t *n, tb_stream_st_t *s, uint64_t q, const tb_ranks_t *have,
                      tb_ranks_t *out);

#endif
