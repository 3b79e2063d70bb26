/* net_int.h - tbon_net_t, tbon_stream_t and tbon_comm_t: the application's
 * side of a node, shared by the FE and BE libraries */
#ifndef TB_NET_INT_H
#define TB_NET_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include <tbon/tbon.h>

#include "node/node.h"
#include "util/config.h"
#include "util/ring.h"

/* The application's receive queue: past HIGH bytes the node stops reading
 * from its children until it is back under LOW. */
#define TB_APP_HIGH (8u << 20)
#define TB_APP_LOW  (2u << 20)

typedef struct tb_dent {
    tbon_packet_t *pkt;    /* NULL: the wave's outcome is an error (code) */
    uint64_t seq;
    uint64_t q;            /* the request number it came with (BE), or at the FE
                              the request whose wave it is */
    int code;              /* pkt NULL: TBON_ELOST (0 too) or TBON_EFILTER */
    char *msg;             /* pkt NULL: why (malloc'd), or NULL */
} tb_dent_t;

/* tbon_net_recv's order: every entry put on a stream's queue, as (stream,
 * seq), oldest first. The first whose seq is still its stream's head is the
 * oldest packet of all; entries already taken (tbon_stream_recv, a close)
 * are dropped as they come to the front, or by a compaction (net.c). */
typedef struct tb_rent {
    uint32_t stream;
    uint64_t seq;
} tb_rent_t;

/* A message from another process (tbon_net_recv_direct). */
typedef struct tb_dmsg {
    tbon_rank_t from;
    tbon_packet_t *pkt;
} tb_dmsg_t;

/* tbon_net_ping: answers kept for their callers, and the route's length. */
#define TB_NET_PONGS 8
#define TB_NET_PING_ROUTE 64
struct tb_pong {
    uint64_t id;
    size_t n;
    tbon_rank_t route[TB_NET_PING_ROUTE];
};

struct tbon_comm {
    tbon_rank_t *ranks;
    size_t n;
    struct tbon_comm *next;
};

/* Everything but net and id is under net->mu: the node's callbacks fill q. */
struct tbon_stream {
    tbon_net_t *net;
    uint32_t id;
    tb_ring_t q;           /* received packets (tb_dent_t), oldest first */
    int error;             /* a filter failed: recv returns TBON_EFILTER once */
    atomic_int closed;     /* FE: tbon_stream_close (set under the net's mu) */
    /* BE: the wave key of the next packet sent up (docs/protocol.md 8.4):
     * the request it answers (the last one the application took, or the
     * one tbon_stream_answer named), and its answers since. */
    uint64_t epoch;
    uint32_t idx;
    uint64_t taken;        /* the request of the last packet taken (tbon_stream_request) */
};

typedef struct tb_kicker tb_kicker_t;

/* Threads: the application's threads call the API; the node's callbacks
 * (net.c: on the thread that drives the node, for a back-end possibly the
 * EDS's) feed it. is_fe, rank, node, inline_node, progress, progress_arg
 * and argv_keep are set by create and do not change; want_resume is atomic;
 * app_bytes is changed under mu, and atomic for cb_app_full's look without
 * it; every other field is under mu (a communicator's ranks too: cb_event
 * grows the broadcast one). */
struct tbon_net {
    int            is_fe;
    tbon_rank_t    rank;
    tb_node_t     *node;
    tb_config_t    conf;   /* the environment at create (util/config.h): the
                              node's cfg.conf; freed by tb_net_free */
    tb_topology_t *topo;   /* the application's copy, for rank queries */
    pthread_mutex_t mu;
    pthread_cond_t  cond;
    pthread_cond_t  ev_cond;       /* FE: tbon_net_next_event's alone (an event
                                      or the close): the views, packets and
                                      attributes that come with every event of
                                      a recovery do not wake it (two thread
                                      switches per orphan at the FE) */
    tbon_stream_t **streams;       /* by id */
    size_t         nstreams;
    uint64_t       seq;
    tb_ring_t      arrived;        /* tb_rent_t: the order of arrival */
    size_t         arrived_kept;   /* arrived.len after its last compaction */
    atomic_size_t  app_bytes;
    atomic_int     want_resume;
    int            closed;
    atomic_int     inside;         /* threads in a receive (call_enter) */
    atomic_int     destroying;     /* tbon_net_destroy has begun: they leave */
    int            inline_node;    /* BE: no reactor thread; callers drive it */
    tb_kicker_t   *kicker;         /* BE: drives it while they do not (kick.c) */
    int            driving;        /* a caller is driving the node now */
    int            kick_missed;    /* the kicker found it driven: the driver
                                      runs one more turn before it lets go */
    int            ready, failed, fail_code;
    char           fail_msg[512];
    tbon_rank_t   *missing;        /* FE: ranks left out of the start-up (by the
                                      reactor, before ready; in rank order) */
    size_t         nmissing, capmissing;
    int            any_error;      /* a stream error not yet returned by tbon_net_recv */
    tb_ring_t      events;         /* tbon_event_t not yet taken (FE; a back-end
                                      with be_events) */
    int            be_events;      /* BE: membership events asked for */
    tb_ring_t      direct;         /* tb_dmsg_t: messages from other processes,
                                      oldest first (tbon_net_recv_direct) */
    atomic_size_t  direct_bytes;   /* theirs (tb_net_pkt_size; changed under mu):
                                      over TB_APP_HIGH the node keeps the next
                                      ones back */
    int            direct_resume;  /* it did: a RESUME goes below TB_APP_LOW */
    /* tbon_net_ping: the last id given, and the latest answers
     * (TB_NET_PONGS of them, made at the first ping: kept out of this
     * struct, whose hot fields keep their places) */
    uint64_t       ping_next;
    struct tb_pong *pong;
    size_t         pong_next;      /* the slot the next answer takes */
    uint64_t       view_version;   /* the last view applied by the node */
    /* FE: consistency checks (tbon_fe_check_views) */
    uint64_t       chk_next, chk_done;
    tbon_rank_t   *chk_agree, *chk_bad;
    size_t         chk_nagree, chk_nbad;
    /* FE: every node's attributes as they reached us (by rank), and which
     * sources changed since tbon_fe_attrs_changed last said */
    struct tb_attrs **rep;
    uint8_t       *chg;
    size_t         nrep, nchg;
    char           error_msg[512];
    /* The last failed call's message on this net, from any thread
     * (tbon_net_error(net)); under errmu, a leaf lock. */
    pthread_mutex_t errmu;
    char           last_error[512];
    /* FE */
    tbon_comm_t   *comms;
    tbon_comm_t   *bcast;
    uint32_t       next_stream;
    int            next_filter;
    struct tb_loaded { char *path, *func; int id; } *loaded;
    size_t         nloaded;
    void         (*progress)(void *arg, size_t ready, size_t total);
    void          *progress_arg;
    size_t         prog_ready, prog_total;
    const char   **argv_keep;      /* the back-end argv the node points to */
    /* FE: a session that outlives its front-end (fe_session.c) */
    char          *session_file;   /* the node's cfg.session_file (a copy) */
    uint32_t       detach_ms;      /* opts.detach_ms, for tbon_fe_detach */
    tbon_rank_t   *rwait;          /* reattach: the claimed children not yet
                                      adopted (their TBON_EV_NODE_ADOPTED is
                                      the reattach's, not queued) */
    size_t         nrwait;
    unsigned       burst;          /* messages sent since a receiver's last turn
                                      (tb_net_submit_burst) */
    /* tbon_net_fd (net_fd.c): an eventfd, readable while something waits
     * to be taken (-1 until asked for; set once, under mu), and whether
     * it is readable now */
    int            evfd;
    int            evfd_on;
    size_t         nqueued;        /* entries on every stream's queue */
    char           log_dir[4096];  /* tbon_net_log_dir's answer, once asked */
    /* FE: each node's state for tbon_fe_status (fe_status.c), by rank, and
     * when the tree was ready (tb_now_ms) */
    struct tb_nstat *nstat;
    size_t         nnstat;
    int64_t        ready_ms;
    /* (Added at the end, so that the fields above keep their places.) */
    char           first_missing[512];  /* FE: the first node left out: why */
    uint64_t       last_seq;       /* last_error's place among failures (util/error.h) */
    int            loading;        /* FE: tbon_fe_load_filter calls waiting */
    char         **lerr;           /* while they wait: the nodes' failed loads
                                      ("filter ID did not load at ...") */
    size_t         nlerr;
    /* FE: performance gatherings (fe_perf.c asks; net_cb.c's cb_perf
     * collects): the last id posted, the running call's first (0: no call
     * runs; answers of older ones are dropped), the last whose answer at
     * the FE was complete, and what has come */
    uint64_t       perf_next, perf_first, perf_done;
    struct tb_perf_acc *perf_acc;
};

/* What a performance gathering collected, by rank (fe_perf.c): each node's
 * latest record and its streams' records (a node answering a later round
 * again replaces what it said before). */
struct tb_perf_acc {
    size_t    n;              /* ranks it has room for */
    uint64_t *node;           /* n records of TB_PERF_NW */
    uint8_t  *got;            /* per rank: its record came */
    size_t    nanswered;
    uint64_t *strm;           /* nstrm records of TB_PERF_SW */
    size_t    nstrm, capstrm;
};

/* FE, with mu held: node r's state changes with event type what
 * (TBON_EV_*; -1: it was left out of the start-up). */
void tb_fe_status_note(tbon_net_t *net, tbon_rank_t r, int what);

/* A blocking call's way in and out (net->inside, an atomic):
 * tbon_net_destroy wakes every thread inside one (net->closed:
 * TBON_ECLOSED) and waits for it to leave before it frees what the thread
 * uses. tb_net_call_leave returns rc. */
static inline void tb_net_call_enter(tbon_net_t *net)
{
    atomic_fetch_add(&net->inside, 1);
}
int tb_net_call_leave(tbon_net_t *net, int rc);

/* tbon_net_fd's descriptor follows what is waiting to be taken (with mu
 * held, after any change to it): nothing to do until it was asked for. */
void tb_net_fd_update(tbon_net_t *net);
void tb_net_fd_close(tbon_net_t *net);
static inline void tb_net_fd_sync(tbon_net_t *net)
{
    if (net->evfd >= 0)
        tb_net_fd_update(net);
}

/* A back-end's node while nobody drives it (kick.c): a thread that runs a
 * turn when node's loop has something; armed (any thread) while no
 * application thread drives the node. The thread starts the first time
 * it is needed, from the node's EDS thread (tb_node_side_watch). */
/* kick(arg) runs a turn of node (or leaves a note for the thread that
 * drives it); the kicker calls it from its own thread when something
 * arrives and no thread waits in the node's loop, or at due while armed
 * (ms, tb_now_ms's clock; INT64_MAX: no timer). Made before the node, whose
 * loop shares its events with tb_kicker_share_fd (naming
 * tb_kicker_share_io: tb_node_config_t), and started once the node is
 * there: 0 or TBON_ENOMEM. */
/* Carry out command c now (a back-end's inline node, unless another thread
 * drives it) or post it to the node (net.c). */
int tb_net_wait_dlog(tbon_net_t *net);
void tb_net_submit(tbon_net_t *net, tb_cmd_t *c);
/* The same for a message between processes: at a back-end, the second and
 * later of a burst (sends with no wait between) stay queued, to go in one
 * write with the rest (tb_node_exec_held): at most 64 of them or 1 ms, or
 * until the application's next wait. */
void tb_net_submit_burst(tbon_net_t *net, tb_cmd_t *c);

tb_kicker_t *tb_kicker_new(void (*kick)(void *arg), void *arg);
int tb_kicker_share_fd(const tb_kicker_t *k);
tb_io_t *tb_kicker_share_io(tb_kicker_t *k);
int tb_kicker_start(tb_kicker_t *k, tb_node_t *node);
void tb_kicker_arm(tb_kicker_t *k, int on, int64_t due);
/* Any thread: have the kicker run a turn soon (the node's events will not
 * tell it: tb_node_input_left). */
void tb_kicker_poke(tb_kicker_t *k);
/* Stop the thread (before node is destroyed); free the rest with
 * tb_kicker_destroy after it (its EDS thread may still have looked at the
 * kicker until then). NULL is fine for both. */
void tb_kicker_stop(tb_kicker_t *k);
void tb_kicker_destroy(tb_kicker_t *k);
/* Ask the kicker thread to end without waiting (any thread, the kicker's
 * own too): the node has finished and needs no driver. NULL is fine. */
void tb_kicker_quit(tb_kicker_t *k);

/* Set up the locks and queues of a new net (the node comes later). */
tbon_net_t *tb_net_alloc(int is_fe);
/* The callbacks a node needs to feed net (net_cb.c). */
tb_node_cbs_t tb_net_callbacks(tbon_net_t *net);
/* A back-end's inline node has work: run it now if no application thread
 * drives the node (net.c; called by the kicker thread). */
void tb_net_kick(void *arg);
/* The same: 1 if it ran a turn, 0 if another thread drives the node, -1 if
 * the node has stopped. */
int tb_net_kick_ran(tbon_net_t *net);
/* The node's arm callback: let the kicker run the node (1) or not (0). */
void tb_net_arm(void *arg, int on);
/* The stream with this id, created if create and missing (under net->mu). */
tbon_stream_t *tb_net_stream_locked(tbon_net_t *net, uint32_t id, int create);
/* A new entry at the tail of s's queue (net->mu held), its seq set and its
 * place in net->arrived kept; the caller fills the rest. NULL if out of
 * memory (nothing changed). */
tb_dent_t *tb_net_queue_locked(tbon_net_t *net, tbon_stream_t *s);
/* Wait on net->cond (net->mu held) until abs (NULL: for ever); as
 * pthread_cond_timedwait. The deadline timeout_ms from now in *ts (NULL if
 * timeout_ms < 0). (net.c) */
int tb_net_wait_until(tbon_net_t *net, const struct timespec *abs);
/* The same on another condition of net's (net->ev_cond). */
int tb_net_wait_on(tbon_net_t *net, pthread_cond_t *cond, const struct timespec *abs);
struct timespec *tb_net_deadline(int timeout_ms, struct timespec *ts);
/* FE: the replica of rank r's attributes, made if make (under net->mu;
 * net_cb.c). */
struct tb_attrs *tb_net_replica(tbon_net_t *net, tbon_rank_t r, int make);
/* FE: rank r's attributes changed (under net->mu; net_cb.c). */
void tb_net_attrs_changed_locked(tbon_net_t *net, tbon_rank_t r);
/* What a packet counts for in the queues' byte marks (net.c). */
size_t tb_net_pkt_size(const tbon_packet_t *p);
/* FE (fe.c), shared with fe_session.c: the node's configuration from the
 * options (commnode "" if none; no secret yet); the session options checked
 * into net and cfg (0 or an error code, err); waiting for the tree (1 if it
 * is up); the broadcast communicator made once it is. */
tb_node_config_t tb_fe_config(const tbon_fe_options_t *o, const tb_config_t *conf,
                              tb_topology_t *topo, const char *commnode, const char *bexe,
                              const char **argv);
int tb_fe_session_opts(tbon_net_t *net, const tbon_fe_options_t *o, tb_node_config_t *cfg,
                       tbon_error_t *err);
int tb_fe_wait_ready(tbon_net_t *net);
void tb_fe_ready(tbon_net_t *net);
/* Free everything but the node. */
void tb_net_free(tbon_net_t *net);
/* Set the calling thread's error message for tbon_net_error; returns code. */
int tb_net_seterr(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, and kept as net's last error too (net may be NULL). */
int tb_net_fail(tbon_net_t *net, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
