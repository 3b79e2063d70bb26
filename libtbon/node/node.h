/* node.h - one process's place in the tree: the data-plane reactor (streams,
 * filters, routing, start-up and shutdown), fed by the EDS thread and by the
 * application's threads through a command queue and an eventfd */
#ifndef TB_NODE_H
#define TB_NODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tbon/tbon.h>

#include "codec/ctl.h"
#include "net/auth.h"
#include "net/loop.h"
#include "topo/topology.h"
#include "util/config.h"

/* The heartbeat timeout when the FE's options leave it 0: a peer silent this
 * long has failed. Long enough for hundreds of processes on two cores. */
#define TB_HEARTBEAT_DEFAULT_MS 3000

typedef struct tb_node tb_node_t;
typedef struct tb_cmd tb_cmd_t;

/* What a node tells its application (FE and BE libraries). */
enum tb_node_status {
    TB_NODE_READY = 1,      /* every process below is connected (FE) */
    TB_NODE_FAILED,         /* start-up failed: code and message */
    TB_NODE_CLOSED,         /* the session ended (code 0: orderly shutdown) */
    TB_NODE_STREAM_ERROR,   /* a filter failed somewhere: message */
    TB_NODE_MISSING,        /* FE: rank `code` was left out of the start-up:
                               message (its rank, host and why) */
};

/* Callbacks, all called on the reactor thread. */
typedef struct tb_node_cbs {
    void *arg;
    /* A packet for the application (takes the reference); q: at a back-end,
     * the request number it carries (docs/protocol.md 8.4). At the FE, p
     * NULL says that the wave of request q was lost whole (every part of it
     * died with failed nodes, and no node owes it any more). */
    void (*deliver)(void *arg, uint32_t stream, tbon_packet_t *p, uint64_t q);
    /* FE: the outcome of the wave of request q is an error (TBON_EFILTER: a
     * filter failed over its input, msg says where and why), in its place
     * among the waves. May be NULL: then the wave is given as lost. */
    void (*wave_error)(void *arg, uint32_t stream, uint64_t q, int code, const char *msg);
    void (*status)(void *arg, int what, int code, const char *msg);
    void (*progress)(void *arg, size_t ready, size_t total);
    /* 1 while the application's receive queue is above its high-water mark:
     * the node then stops reading from its children (back-pressure). */
    int  (*app_full)(void *arg);
    /* FE: a failure or an adoption somewhere in the tree. */
    void (*event)(void *arg, const tbon_event_t *ev);
    /* A node without a reactor thread (BE): run a turn now if no application
     * thread drives the node (tb_node_kick); arm: let whoever drives it while
     * the application does not (the API's kicker thread) watch the node's
     * loop (1), or not (0): tb_node_arm. Any thread. */
    void (*kick)(void *arg);
    void (*arm)(void *arg, int on);
    /* A message from another process for this one (tbon_net_recv_direct;
     * takes the reference). May be NULL: such messages are dropped. */
    void (*direct)(void *arg, tbon_rank_t from, tbon_packet_t *p);
    /* 1 while the application's messages not yet taken are above their
     * high-water mark: what comes then is kept unacknowledged, and so holds
     * its sender back (node_dlog.c); a TB_CMD_RESUME lets it in. */
    int  (*direct_full)(void *arg);
    /* View version applied here, with its changes (all of them, at the FE). */
    void (*view)(void *arg, uint64_t version, const tb_vchange_t *ch, size_t n);
    /* The answer to this process's ping id, with the route it took (this
     * process first, the target last). */
    void (*pong)(void *arg, uint64_t id, const uint32_t *route, size_t n);
    /* Not the FE: view version is stable (the FE said so: TB_CTL_STABLE). */
    void (*stable)(void *arg, uint64_t version);
    /* FE: consistency check id finished: the ranks that agree and those
     * that do not (both in no order). */
    void (*checked)(void *arg, uint64_t id, const tbon_rank_t *agree, size_t nagree,
                    const tbon_rank_t *bad, size_t nbad);
    /* FE: an attribute entry of source src arrived (value NULL: a tombstone). */
    void (*attr)(void *arg, tbon_rank_t src, const char *key, const char *value,
                 uint64_t version);
    /* FE: a stream the application did not make came with a child's graft
     * (a reattached FE takes over the tree's streams). May be NULL. */
    void (*stream_found)(void *arg, uint32_t id);
    /* FE: records of performance gathering id (node_perf.c): the part of
     * the answer that came; done 1 once this node's own answer is complete
     * (every child answered or was lost, or its wait ran out: later parts
     * come with done 0). May be NULL. */
    void (*perf)(void *arg, const tb_ctl_perf_data_t *d, int done);
} tb_node_cbs_t;

typedef struct tb_node_config {
    tb_role_t      role;
    tbon_rank_t    rank;
    tb_topology_t *topo;            /* taken over */
    tb_session_t   session;
    const char    *commnode_path;   /* for launching commnode children */
    const char    *backend_exe;     /* NULL: back-ends attach */
    const char *const *backend_argv;/* argv[0] first; NULL-terminated */
    const char    *rsh;
    const char    *attach_file;     /* FE in attach mode */
    int            startup_timeout_ms;
    int            parent_fd;       /* data connection to the parent, or -1 */
    int            parent_event_fd; /* event connection to the parent, or -1 */
    int            no_ft;           /* FE: no fault tolerance (a commnode failure
                                       ends the session) */
    int            heartbeat_ms;    /* FE: heartbeat timeout for every node (<= 0:
                                       none) */
    int            suspect_ms;      /* FE: how long a suspicion stands before it is
                                       confirmed (0: half the heartbeat timeout) */
    int            slurm;           /* FE: the commnodes and back-ends are started
                                       by Slurm, one srun step per depth (slurm.h);
                                       commnodes then launch nothing */
    int            require_all;     /* FE: any node that fails during start-up fails
                                       it (else it is left out: node_start.c) */
    int            exact_off;       /* FE: no stream is exact (node_exact.c) */
    int            joined;          /* joined the running tree (its view comes
                                       from its parent) */
    int            listening;       /* commnode: listen_fd (listening on port) is
                                       taken over, though we have no children yet */
    int            listen_fd;
    uint16_t       port;
    int            given_links;     /* the links are given, not made: see below */
    /* FE: the session outliving its front-end (docs/fault-tolerance.md,
     * "The root"). grace_ms: how long the tree holds after this FE's end;
     * reattach: this FE takes over a running tree (api/fe_session.c) - it
     * launches nothing, starts with no children (the old FE's adopt it) and
     * view version view_base; session_file: written once the tree is up,
     * and again as it changes (tb_node_write_session). */
    int            grace_ms;
    int            reattach;
    uint64_t       view_base;
    const char    *session_file;
    /* the fault-tolerance layer the node reaches (node_int.h, tb_ft_ops_t):
     * &tb_ft_ops of ft/ft.h; required */
    const struct tb_ft_ops *ft;
    /* the environment as it was when the network was created (util/config.h);
     * required, and the caller's: it must outlive the node */
    const tb_config_t *conf;
    /* The node cannot go on: a plug-in filter call hung past its limit on
     * the thread that drives the node (ft/eds_watch.c), and the report of it
     * has gone up. Called once, on the EDS thread, with TBON_EFILTER and the
     * report. The library ends nothing itself (the driving thread stays in
     * the call): tbon_commnode ends its process here. NULL: the report is
     * all, and the parent takes this node for failed. */
    void (*fatal)(int code, const char *msg);
    /* A back-end's kicker (api/kick.c): the node's loop shares its events
     * with the epoll set share_fd, whose events then name share_io, so that
     * the kicker wakes only when no thread waits in the node's loop
     * (tb_loop_share). NULL: not shared. */
    struct tb_io  *share_io;
    int            share_fd;
} tb_node_config_t;

/* Given links (cfg.given_links = 1): several nodes in one process, joined by
 * socketpair(AF_UNIX) instead of launched processes and TCP (tests/inproc/).
 * Such a node neither listens nor launches, and has no EDS thread: no
 * heartbeats, no failure notices, no search for an adopter. Its caller makes
 * every link and plays the EDS's part for it:
 *  - the parent: cfg.parent_fd, a connected socket whose other end the
 *    parent took with tb_node_link_child; the caller first reads the
 *    TOPOLOGY frame (and for a commnode the TB_CTL_LAUNCH one) off it, as a
 *    launched child does, and gives that topology as cfg.topo; there is no
 *    event connection (parent_event_fd -1);
 *  - a child: tb_node_link_child;
 *  - an adoption: TB_CMD_ADOPT_CONN (fd, rank: the orphan, status: its new
 *    incarnation) posted to the adopter, which answers TB_CTL_ADOPT_ACK on
 *    that link; the caller reads the ACK off the other end and posts
 *    TB_CMD_ADOPTED (fd: that end, rank: the adopter, status: the lost
 *    parent) to the orphan. An orphan waits for it (or TB_CMD_ADOPT_FAILED)
 *    however long it takes. */

/* Hand node n the data connection fd (connected, taken over) of its child
 * rank, as its EDS does once a child has connected and authenticated. Any
 * thread. 0, or TBON_ENOMEM (fd closed). */
int tb_node_link_child(tb_node_t *n, tbon_rank_t rank, int fd);

/* Listen (if the node has children), launch its children and start the EDS
 * thread. NULL with err filled on failure, with nothing left running. */
tb_node_t *tb_node_new(const tb_node_config_t *cfg, const tb_node_cbs_t *cbs,
                       tbon_error_t *err);

/* Run the reactor on a new thread (FE, BE) or on the caller's (commnode:
 * returns when the session is over). */
int  tb_node_start(tb_node_t *n);
int  tb_node_run(tb_node_t *n);

/* Without a reactor thread (a back-end: its application's calls drive the
 * node, one thread at a time, while the EDS thread keeps watching the
 * parent): one turn of the loop waiting at most timeout_ms (-1: until
 * something happens); returns 1 once the node has stopped. */
int  tb_node_step(tb_node_t *n, int timeout_ms);
/* Carry out a command at once (the caller drives the node). */
void tb_node_exec(tb_node_t *n, tb_cmd_t *cmd);
/* The same, for a send whose sender has more requests already waiting (a
 * back-end working through a backlog): what it writes to the parent stays
 * queued, to go in one system call with the answers that follow, at the
 * next turn, tb_node_exec or tb_node_flush; at most TB_NODE_HOLD_CMDS
 * commands and TB_NODE_HOLD_MS ms (a timer of the node's loop, which the
 * kicker honours while nobody drives the node). 1: output is held. */
int  tb_node_exec_held(tb_node_t *n, tb_cmd_t *cmd);
/* Write what tb_node_exec_held left queued (the caller drives the node). */
void tb_node_flush(tb_node_t *n);
#define TB_NODE_HOLD_CMDS 64
#define TB_NODE_HOLD_MS   1
/* 1 if other threads have queued commands (an adoption, say) that a node
 * without a reactor thread should take in with a tb_node_step(n, 0). */
int  tb_node_has_posted(tb_node_t *n);
/* A connection's last read stopped before its socket was drained (its
 * budget, or an end behind the data): an edge-triggered watcher (a
 * back-end's kicker) hears of no new event for what is left. The thread
 * that drives the node. */
int  tb_node_input_left(const tb_node_t *n);
/* Bytes queued for sending, and whether the node has stopped. */
size_t tb_node_backlog(const tb_node_t *n);
int  tb_node_stopped(const tb_node_t *n);
/* EDS thread: the event connection to rank (our parent?) has ended. */
void tb_node_parent_gone(tb_node_t *n, tbon_rank_t rank);

/* Where the node's EDS listens (a reattached FE tells the old FE's children). */
uint16_t tb_node_port(const tb_node_t *n);

/* Wait for the reactor thread to end, stop the EDS thread, reap every child
 * (killing what has not exited by the deadline) and free the node. */
void tb_node_destroy(tb_node_t *n);

/* ---- commands from other threads ---- */
enum tb_cmd_op {
    TB_CMD_CONN = 1,     /* EDS: an authenticated data connection */
    TB_CMD_PEER_LOST,    /* EDS: an event connection ended */
    TB_CMD_CHILD_EXIT,   /* EDS: a child process exited */
    TB_CMD_SEND,         /* app: a packet on a stream */
    TB_CMD_STREAM,       /* FE app: a new stream */
    TB_CMD_PARAMS,       /* FE app: filter parameters */
    TB_CMD_FILTER,       /* FE app: load a filter everywhere */
    TB_CMD_RESUME,       /* app: the receive queue drained */
    TB_CMD_SHUTDOWN,     /* FE app: end the session */
    TB_CMD_LEAVE,        /* BE app: leave */
    TB_CMD_ADOPT_CONN,   /* EDS: an orphan asks to be adopted */
    TB_CMD_ADOPTED,      /* EDS: we were adopted */
    TB_CMD_ADOPT_FAILED, /* EDS: no adopter took us: leave */
    TB_CMD_FENCE,        /* EDS: a child silent for good, nobody to confirm it */
    TB_CMD_SUSPECT,      /* EDS: a peer fell silent (on), or spoke again (off) */
    TB_CMD_CHECK,        /* FE app: a consistency check */
    TB_CMD_ATTR,         /* BE app: set or delete an attribute */
    TB_CMD_JOIN_CONN,    /* EDS (FE): a node asks to join */
    TB_CMD_RELINK,       /* EDS: a child's new data connection (its old one broke);
                            or the relink thread: ours to the parent (fd -1: refused) */
    TB_CMD_FILTER_FAULT, /* EDS: a child's filter hung (eds_watch.c): its
                            FILTER_FAULT control message, to send on up */
    TB_CMD_STREAM_END,   /* FE app: end a stream everywhere (tbon_stream_close) */
    TB_CMD_DETACH,       /* FE app: leave the tree running (tbon_fe_detach) */
    TB_CMD_DIRECT,       /* app: a message to other processes (node_direct.c) */
    TB_CMD_PING,         /* app: a ping to any rank (node_direct.c) */
    TB_CMD_PERF,         /* FE app: gather performance data (node_perf.c) */
};

/* A caller waiting for the reactor's answer to its command (TB_CMD_DETACH):
 * tb_node_answer fills it; a command freed unanswered answers
 * TBON_ECLOSED. */
typedef struct tb_node_reply {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, rc;
    char msg[512];
} tb_node_reply_t;
void tb_node_answer(tb_node_reply_t *r, int rc, const char *msg);

/* A command: op says which member of u is set. Made by the constructors
 * below, which take over what they are given (fds, packets, member lists)
 * even when they fail (NULL: out of memory); freed by tb_cmd_free, which
 * closes a command's fd and frees what it owns. */
struct tb_cmd {
    tb_mail_t      mail;          /* first: the node's loop's mailbox (net/loop.h) */
    int            op;            /* enum tb_cmd_op */
    size_t         bytes;         /* counted in the send backlog (TB_CMD_SEND) */
    union {
        struct { int fd; tbon_rank_t rank; } conn;          /* CONN */
        struct { tbon_rank_t rank; } peer_lost;             /* PEER_LOST */
        struct { tbon_rank_t rank; int status; } child_exit;/* CHILD_EXIT: wait status,
                                                               -1 if not ours */
        struct {                                            /* SEND */
            uint32_t stream;
            tbon_packet_t *pkt;
            uint64_t key;         /* at a back-end: the wave key */
        } send;
        struct {                                            /* STREAM */
            uint32_t id;
            int up, sync, down;   /* sync may carry TB_STREAM_BCAST */
            uint32_t timeout_ms;
            tbon_rank_t *members;
            size_t nmembers;
        } stream;
        struct { uint32_t stream; int which; tbon_packet_t *pkt; } params;   /* PARAMS */
        struct { tbon_packet_t *pkt; tbon_rank_t from; } fault;   /* FILTER_FAULT */
        struct { uint32_t id; } stream_end;                 /* STREAM_END */
        struct {                                            /* DETACH */
            char *file;           /* the session file to write */
            uint32_t hold_ms;     /* how long the tree waits (0: no limit) */
            tb_node_reply_t *reply;
        } detach;
        struct { int id; char *path, *func; } filter;       /* FILTER */
        struct {                                            /* DIRECT */
            tbon_rank_t *dst;     /* the destinations (NULL for a broadcast) */
            size_t ndst;
            uint32_t flags;       /* TB_DIRECT_* (codec/ctl.h) */
            tbon_packet_t *pkt;
        } direct;
        struct { tbon_rank_t target; uint64_t id; } ping;  /* PING */
        struct { int fd; tbon_rank_t rank; uint32_t inc; } adopt_conn;
                                  /* ADOPT_CONN: orphan rank at its new incarnation */
        struct {                                            /* ADOPTED */
            int fd;               /* the data connection to the new parent */
            tbon_rank_t parent, lost;
            uint64_t us[2];       /* recovery times (us): new_parent, connect */
        } adopted;
        struct { tbon_rank_t lost; } adopt_failed;          /* ADOPT_FAILED */
        struct { tbon_rank_t rank; int silent_ms; } fence;  /* FENCE */
        struct { tbon_rank_t rank; int on, silent_ms; } suspect;  /* SUSPECT */
        struct { uint64_t id; } check;                      /* CHECK */
        struct { uint64_t id; uint32_t wait_ms; } perf;     /* PERF */
        struct { char *key, *value; } attr;                 /* ATTR: value NULL deletes */
        struct {                                            /* JOIN_CONN */
            int fd;
            int role;             /* tb_role_t of the joiner */
            tbon_rank_t rank;     /* a restarted one's rank, or TBON_RANK_NONE */
            uint32_t port;        /* where a commnode listens */
        } join_conn;
        struct {                                            /* RELINK */
            int fd;               /* the new data connection; -1: none */
            tbon_rank_t rank;     /* the child (from the EDS) or the parent */
            int up;               /* 1: to our parent, from the relink thread */
            uint32_t gen;         /* up: which attempt */
            char why[200];        /* up, fd -1: why not */
        } relink;
    } u;
};

tb_cmd_t *tb_cmd_conn(int fd, tbon_rank_t rank);
tb_cmd_t *tb_cmd_filter_fault(tbon_packet_t *pkt, tbon_rank_t from);   /* NULL pkt: NULL */
tb_cmd_t *tb_cmd_peer_lost(tbon_rank_t rank);
tb_cmd_t *tb_cmd_child_exit(tbon_rank_t rank, int status);
/* bytes: what the packet counts in the send backlog (0: not counted). */
tb_cmd_t *tb_cmd_send(uint32_t stream, tbon_packet_t *pkt, uint64_t key, size_t bytes);
/* In tb_stream_create's order. */
tb_cmd_t *tb_cmd_stream(uint32_t id, int up, int sync, uint32_t timeout_ms, int down,
                        tbon_rank_t *members, size_t nmembers);
tb_cmd_t *tb_cmd_params(uint32_t stream, int which, tbon_packet_t *pkt);
/* path and func are copied. */
tb_cmd_t *tb_cmd_filter(int id, const char *path, const char *func);
/* file is copied; reply is answered (also if the command is never run). */
tb_cmd_t *tb_cmd_detach(const char *file, uint32_t hold_ms, tb_node_reply_t *reply);
tb_cmd_t *tb_cmd_resume(void);
tb_cmd_t *tb_cmd_shutdown(void);
tb_cmd_t *tb_cmd_leave(void);
tb_cmd_t *tb_cmd_adopt_conn(int fd, tbon_rank_t rank, uint32_t inc);
tb_cmd_t *tb_cmd_adopted(int fd, tbon_rank_t parent, tbon_rank_t lost, uint64_t new_parent_us,
                         uint64_t connect_us);
tb_cmd_t *tb_cmd_adopt_failed(tbon_rank_t lost);
tb_cmd_t *tb_cmd_fence(tbon_rank_t rank, int silent_ms);
/* on: rank has been silent for silent_ms; 0: it spoke again. */
/* on: 0 heard again, 1 silent past the heartbeat timeout, TB_SUSPECT_LINK
 * its link silent past the acknowledgement timeout (ft/eds.c). */
#define TB_SUSPECT_LINK 2
tb_cmd_t *tb_cmd_suspect(tbon_rank_t rank, int on, int silent_ms);
tb_cmd_t *tb_cmd_check(uint64_t id);
tb_cmd_t *tb_cmd_perf(uint64_t id, uint32_t wait_ms);
tb_cmd_t *tb_cmd_stream_end(uint32_t id);
/* dst (n ranks, malloc'd; NULL for a broadcast) and pkt are taken. */
tb_cmd_t *tb_cmd_direct(tbon_rank_t *dst, size_t n, uint32_t flags, tbon_packet_t *pkt,
                        size_t bytes);
tb_cmd_t *tb_cmd_ping(tbon_rank_t target, uint64_t id);
/* key and value (NULL: delete) are copied. */
tb_cmd_t *tb_cmd_attr(const char *key, const char *value);
tb_cmd_t *tb_cmd_join_conn(int fd, int role, tbon_rank_t rank, uint32_t port);
/* why may be NULL. */
tb_cmd_t *tb_cmd_relink(int fd, tbon_rank_t rank, int up, uint32_t gen, const char *why);

/* Queue a command (taken over) and wake the reactor. Any thread. */
void tb_node_post(tb_node_t *n, tb_cmd_t *cmd);
/* Any thread: a thread waiting in the node's loop (tb_node_step) returns
 * from its turn. */
void tb_node_wake(tb_node_t *n);
/* Queue it without waking the reactor: news that can wait for its next
 * turn (the reactor's own wake-ups bring it in). Any thread. */
void tb_node_queue(tb_node_t *n, tb_cmd_t *cmd);
void tb_cmd_free(tb_cmd_t *c);

/* The session's id (the log directory's name, util/log.h). */
uint64_t tb_node_session_id(const tb_node_t *n);

/* Back-pressure for application senders: block while the node's outgoing
 * backlog is above its high-water mark (flush: until it is empty), or until
 * the node is closed. Returns 0 or TBON_ECLOSED. Any thread but the reactor. */
int tb_node_wait_backlog(tb_node_t *n, int flush);
/* Messages sent from here not yet acknowledged by all their destinations
 * are over TB_DLOG_WINDOW bytes: a sender waits (docs/protocol.md 10.2). */
int tb_node_dlog_full(const tb_node_t *n);
/* A message counts in the window from its send call (any thread) until
 * every destination has acknowledged it: tb_dlog_window_add(n,
 * tb_dlog_bytes(p)) before the command goes to the node. */
size_t tb_dlog_bytes(const tbon_packet_t *p);
void tb_dlog_window_add(tb_node_t *n, size_t bytes);
/* Wait until they are not, or the node closed (TBON_ECLOSED); any thread
 * of a node with a reactor thread of its own. */
int tb_node_wait_dlog(tb_node_t *n);
/* The network is being destroyed: every sender waiting in the two calls
 * above returns TBON_ECLOSED, and none waits from now on; a thread
 * driving an inline node is woken in its loop (tb_node_wake). */
void tb_node_release_waiters(tb_node_t *n);


/* The event connection fd to the parent (taken over) goes to the event
 * detection service, which is the fault-tolerance layer's (ft/eds.h): a
 * commnode connects it after it is made. 0 or TBON_E*. */
int  tb_node_watch_parent(tb_node_t *n, int fd);
/* The application's threads stop (0) or start again (1) driving the node
 * of a back-end: while nobody drives it, the kicker does (cbs.arm). */
void tb_node_arm(tb_node_t *n, int on);
/* Run cbs.kick: from the EDS thread. */
void tb_node_kick(tb_node_t *n);
/* The node's loop descriptor: readable when the node has work (to watch it
 * from another thread's loop). */
int  tb_node_loop_fd(const tb_node_t *n);
/* When the node's first timer is due (INT64_MAX: none), from any thread:
 * its timers do not make the loop descriptor readable. Lazy timers (a
 * lone ACK that may wait) are left out: tb_loop_due. */
int64_t tb_node_next_due(const tb_node_t *n);
/* Watch io in the loop of the thread beside the node (its EDS; io's
 * callback runs there; once more for a one shot that went off), and take
 * it out again; any thread. TBON_EINVAL if the node has no such thread
 * (given links). */
int  tb_node_side_watch(tb_node_t *n, tb_io_t *io, uint32_t events);
void tb_node_side_forget(tb_node_t *n, tb_io_t *io);

/* On the wire (TB_CTL_STREAM, TB_CTL_GRAFT, TB_CMD_STREAM), a broadcast
 * stream's sync mode carries this flag: a stream over every back-end, those
 * that join later included. */
#define TB_STREAM_BCAST 0x100
/* On TB_CTL_STREAM only: an adopter telling an adopted child of a stream its
 * lost parent may have died before passing on (tb_stream_catch_up). */
#define TB_STREAM_CATCHUP 0x200
/* On TB_CTL_STREAM and TB_CTL_GRAFT: an exact stream (node_exact.c): its up
 * filter is associative, fault tolerance is on and it is not don't-wait. */
#define TB_STREAM_EXACT 0x400

/* Control messages (CONTROL frames: tag = op, payload = a packet): their
 * ops, structs, encoders and decoders, and the table of their directions and
 * owners are in codec/ctl.h (listed in docs/protocol.md, "Control messages").
 * enum tb_vkind and tb_vchange_t (a view's changes) are there too. */


#endif
