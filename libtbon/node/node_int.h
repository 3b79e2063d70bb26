/* node_int.h - the node's private state, shared by node.c (loop, commands,
 * connections), node_start.c (launch, start-up, shutdown) and node_stream.c
 * (streams, synchronisation, filters) */
#ifndef TB_NODE_INT_H
#define TB_NODE_INT_H

#include <pthread.h>
#include <sys/socket.h>
#include <stdatomic.h>

#include "net/conn.h"
#include "filter/filter.h"
#include "node/node.h"

/* Back-pressure marks (bytes queued on one connection, or for the app). */
#define TB_HWM (4u << 20)
#define TB_LWM (1u << 20)

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
    /* membership (ft/view.c) */
    int         v_known;      /* it told us its view version (an adopted child
                                 has not yet: until then nothing is sent to it) */
    uint64_t    v_sent;       /* the last view version sent to it */
    uint64_t    v_acked;      /* the version its whole subtree has applied */
    uint64_t    chk;          /* the consistency check it owes us an answer to */
    int         joined;       /* it joined the running tree (not launched) */
    int64_t     join_due;     /* joined: it must have connected by then (ms; 0: has) */
    int         leaving;      /* it said it leaves: its end is no failure */
} tb_child_t;

/* A FIFO of packets (one child's queue on one stream). */
typedef struct tb_pq {
    tb_ring_t ring;           /* struct tb_pq_ent, oldest first */
    size_t units;             /* complete waves queued (packets with more == 0) */
    size_t bytes;
} tb_pq_t;
struct tb_pq_ent {
    tbon_packet_t *pkt;
    int more;                 /* the child's wave continues after this packet */
    uint64_t key;             /* the wave it belongs to (docs/protocol.md 8.4) */
};

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
    tbon_packet_list_t extra; /* stale input of a state-recoverable filter, for
                                 the next wave */
    tbon_packet_list_t kept;  /* BE: sent packets not yet folded into up_state */
} tb_stream_st_t;

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

/* What only the front-end holds (n->fe; NULL in every other node): the
 * membership root's pending changes and orphans (ft/view.c), the joins it
 * answers (ft/join.c), its Slurm steps (node_start.c) and its attach
 * file. Owned by the reactor thread. */
typedef struct tb_fe_state {
    /* membership root */
    struct tb_vchange *vpend; /* changes for the next version */
    size_t     nvpend, capvpend;
    int64_t    vpend_since;   /* when the first of them came (ms; 0: none) */
    int        vheld;         /* they wait because some node has no parent */
    struct tb_orphan *orph;   /* alive nodes without a parent, and since when */
    size_t     norph;
    int        orph_dirty;    /* the orphans must be counted again */
    /* joins */
    struct tb_pjoin *pjoin;   /* back-ends told to wait for their parent */
    size_t     npjoin;
    tbon_rank_t *announced;   /* joined ranks whose TBON_EV_NODE_JOINED went out */
    size_t     nannounced;
    /* under Slurm (slurm.h): the next depth to start and each depth's srun */
    uint32_t   slurm_next, slurm_depth;
    pid_t     *slurm_pid;     /* by depth; 0: not started */
    char      *attach_path;   /* the attach file written (its secret goes with
                                 the session: removed by tb_node_destroy) */
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
    const struct tb_ft_ops *ft; /* the fault-tolerance layer (cfg.ft) */
    uint32_t   depth;
    char       role_name[16];

    tb_loop_t *loop;          /* net/loop.h: connections, timers, and the
                                 command mailbox (the driver runs it) */
    tb_timer_t start_timer;   /* start_deadline: the tree must be up by then */
    tb_timer_t shutdown_timer;/* shutdown_deadline: the children must have left */
    tb_timer_t late_timer;    /* late_due: the lost parent's connection closes */
    tb_timer_t ft_timer;      /* the next of the fault-tolerance layer's times */
    tb_io_t    nfd_io;        /* the FE's notice socket (nfd) in the loop */
    int        lfd;
    uint16_t   port;
    tb_eds_t  *eds;
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
    tb_filter_reg_t *filters;

    /* commands: any thread posts them to the loop's mailbox (tb_node_post),
     * the driver drains it; the counters are atomic, written by the driver
     * (pending also by posters) and read by senders waiting on bcond (under
     * qmu) */
    pthread_mutex_t qmu;
    pthread_cond_t bcond;     /* senders waiting on the backlog */
    atomic_size_t pending;    /* bytes of SEND commands not yet taken */
    atomic_size_t queued;     /* bytes in connection queues */
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
    size_t     ready_count;
    size_t     total;

    /* fault tolerance (ft/recovery.c) */
    int        ft_ready;      /* the port table arrived: orphans get adopted */
    int        orphan;        /* the parent is gone, an adopter is being sought */
    tbon_rank_t lost_parent;
    int64_t    orphan_since;  /* us */
    tb_ring_t  obuf;          /* what went up while orphaned */
    tb_ring_t  held;          /* reports sent up, not yet back in a view */
    size_t     obytes;

    /* membership (ft/view.c) */
    uint64_t   view;          /* the view version applied here */
    uint64_t   view_sub;      /* the version this whole subtree has applied */
    uint64_t   view_up[2];    /* what went up last: applied, subtree (FE: the
                                 last version announced stable, in [1]) */
    tb_ring_t  vhist;         /* recent deltas (struct tb_vhist), oldest first */
    int        nfd;           /* UDP: the FE receives failure notices on it, the
                                 others send them from it */
    struct sockaddr_storage fe_addr; /* the FE's notice address */
    socklen_t  fe_addr_len;
    int        fe_addr_ok;
    uint64_t   chk_id;        /* the consistency check under way here */
    tbon_rank_t *chk_rank;    /* its answers so far: ranks, and whether they agree */
    uint8_t   *chk_ok;
    size_t     nchk, capchk;

    /* joins (ft/view.c) */
    size_t     njoining;      /* child slots waiting for a joined child (join_due) */

    /* attributes (ft/attr.c) */
    struct tb_attrs *attrs;   /* a back-end's own map (NULL until written) */
    int        attr_seen;     /* an attribute went up through here */
};

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
/* Send p up (to the app at the FE); more: other packets of the same wave
 * follow (TB_FRAME_F_MORE). Takes p. */
void tb_node_to_parent(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more, uint64_t key);
/* Send p (borrowed) down to child i as part of request q (docs/protocol.md 8.4). */
void tb_node_to_child(tb_node_t *n, size_t i, uint32_t stream, tbon_packet_t *p, uint64_t q);
void tb_node_fail(tb_node_t *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
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
/* c's events go to the node (node.c); tb_node_watch does it the first time. */
void tb_node_io_init(tb_node_t *n, tb_conn_t *c);
/* A new child slot (an adopted orphan); its index, or -1. */
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
void tb_node_watch(tb_node_t *n, tb_conn_t *c, uint32_t events);
void tb_node_bury(tb_node_t *n);                  /* free the connections retired */
void tb_node_bury_list(tb_conn_t **list);

/* The fault-tolerance layer (libtbon/ft/: recovery, membership views,
 * failure notices, joins, attributes, the EDS) sits above the node: the
 * node reaches it only through this table, which whoever creates a node
 * passes in tb_node_config_t.ft (ft/ft.h: tb_ft_ops). Each entry is the ft
 * function of the same name with tb_ in front. */
typedef struct tb_ft_ops {
    /* set-up and end */
    void (*view_init)(tb_node_t *n);
    int (*view_open_notices)(tb_node_t *n);
    tb_eds_t *(*eds_start)(tb_node_t *node, int listen_fd, int parent_event_fd,
                           const tb_topology_t *topo, tbon_rank_t rank,
                           const tb_session_t *s, tbon_error_t *err);
    int (*eds_watch_node)(tb_eds_t *e, int node_epfd);
    int (*eds_watch_parent)(tb_eds_t *e, int fd, tbon_rank_t parent);
    void (*eds_stop)(tb_eds_t *e);
    void (*eds_free)(tb_eds_t *e);
    void (*ft_free)(tb_node_t *n);
    void (*view_free)(tb_node_t *n);
    void (*attr_free)(tb_node_t *n);
    /* the loop: timers before a dispatch, the next one due, work after it;
     * the FE's notice socket */
    void (*view_timers)(tb_node_t *n, int64_t now);
    void (*view_next)(const tb_node_t *n, int64_t *next);
    void (*view_flush)(tb_node_t *n);
    void (*view_on_notices)(tb_node_t *n);
    /* commands the fault-tolerance layer owns */
    void (*ft_adopt_conn)(tb_node_t *n, tb_cmd_t *c);
    void (*ft_adopted)(tb_node_t *n, tb_cmd_t *c);
    void (*ft_adopt_failed)(tb_node_t *n, tbon_rank_t lost);
    void (*view_check)(tb_node_t *n, uint64_t id);
    void (*attr_set)(tb_node_t *n, const char *key, const char *value);
    void (*view_join)(tb_node_t *n, tb_cmd_t *c);
    /* control messages of the owners ft, view and attr (codec/ctl.c) */
    void (*ft_ctl)(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p);
    void (*view_ctl)(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p);
    void (*attr_ctl)(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p);
    /* links: a child lost, gone, left or joined; the parent lost; what goes
     * up while orphaned */
    void (*ft_child_lost)(tb_node_t *n, size_t i);
    void (*view_child_gone)(tb_node_t *n, size_t i);
    void (*view_left)(tb_node_t *n, size_t i);
    void (*view_joined)(tb_node_t *n, size_t i);
    int (*ft_parent_lost)(tb_node_t *n, tbon_rank_t lost);
    void (*ft_buffer)(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more,
                      uint64_t key);
    /* start-up: the tree is up (the port table goes down), a joiner adopted */
    void (*ft_send_ports)(tb_node_t *n);
    void (*view_adopted)(tb_node_t *n);
    /* the EDS's services to the node */
    void (*eds_arm_node)(tb_eds_t *e, int on);
    int (*eds_watch_child)(tb_eds_t *e, tbon_rank_t rank, pid_t pid);
    int (*eds_reaped)(tb_eds_t *e, pid_t pid);
    void (*eds_leave)(tb_eds_t *e);
} tb_ft_ops_t;

/* node_start.c */
int  tb_node_launch_children(tb_node_t *n, tbon_error_t *err);
void tb_node_check_ready(tb_node_t *n);
void tb_node_startup_timer(tb_node_t *n);
void tb_node_child_exited(tb_node_t *n, tbon_rank_t r, int status);
/* FE under Slurm: start every depth whose parents all listen (slurm.h). */
void tb_node_slurm_next(tb_node_t *n);
/* The pseudo-rank a depth's srun is watched under (by the EDS and the relay). */
#define TB_SLURM_STEP_RANK(d) ((tbon_rank_t)(TBON_RANK_NONE - 1 - (d)))
#define TB_SLURM_STEP_DEPTH(r) ((uint32_t)(TBON_RANK_NONE - 1 - (r)))
void tb_node_write_attach(tb_node_t *n);
void tb_node_reap_all(tb_node_t *n);

/* node_stream.c */
/* A packet from child (NULL: its wave had none); more: the child's wave
 * continues (TB_FRAME_F_MORE). */
void tb_stream_up(tb_node_t *n, size_t child, uint32_t stream, tbon_packet_t *p, int more,
                  uint64_t key);
/* A packet going down (takes p); q: its request number, 0 at the FE (which
 * numbers the requests of each stream). */
void tb_stream_down(tb_node_t *n, uint32_t stream, tbon_packet_t *p, uint64_t q);
int  tb_stream_create(tb_node_t *n, uint32_t id, int up, int sync, uint32_t timeout_ms,
                      int down, const tbon_rank_t *members, size_t nmembers);
void tb_stream_set_params(tb_node_t *n, uint32_t id, int which, tbon_packet_t *p); /* takes p */
void tb_stream_child_gone(tb_node_t *n, size_t child);
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
/* A joined child i learns every broadcast stream; a back-end takes part in
 * them from the next request on (a stream none of our children took part in
 * so far is grafted up), a commnode once something below it does. */
void tb_stream_bcast_join(tb_node_t *n, size_t i);
/* Graft stream s up to our parent (an adopted node, or one whose first
 * child joins it): its definition, the last key we sent, the last request
 * we saw. */
void tb_stream_graft(tb_node_t *n, tb_stream_st_t *s);
/* This node sent (or buffered) a unit with key up on stream id. */
void tb_stream_sent(tb_node_t *n, uint32_t id, uint64_t key);

#endif
