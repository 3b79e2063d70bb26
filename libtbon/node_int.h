/* node_int.h - the node's private state, shared by node.c (loop, commands,
 * connections), node_start.c (launch, start-up, shutdown) and node_stream.c
 * (streams, synchronisation, filters) */
#ifndef TB_NODE_INT_H
#define TB_NODE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "conn.h"
#include "filter.h"
#include "node.h"

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
    uint32_t  timeout_ms;
    tbon_rank_t *members;
    size_t    nmembers;
    uint8_t  *part;           /* per child: takes part */
    tb_pq_t  *q;              /* per child: packets of the wave being collected */
    size_t    nonempty;       /* children with a complete unit queued */
    int64_t   deadline;       /* TIMEOUT: when the current wave is cut; 0 = none */
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
    uint32_t   depth;
    char       role_name[16];

    int        epfd, evfd, tfd;
    int        lfd;
    uint16_t   port;
    tb_eds_t  *eds;
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

    /* commands */
    pthread_mutex_t qmu;
    tb_cmd_t  *qhead, *qtail;
    pthread_cond_t bcond;     /* senders waiting on the backlog */
    atomic_size_t pending;    /* bytes of SEND commands not yet taken */
    atomic_size_t queued;     /* bytes in connection queues */
    atomic_int    waiters;
    atomic_int    closed;
    atomic_int    posted;     /* commands are queued (an inline node checks it) */

    /* state */
    int64_t    start_deadline;
    int        ready_sent;
    int        failed;
    int        shutting_down;
    int64_t    shutdown_deadline;
    int        stop;
    int        finished;
    int        up_paused, down_paused;
    int        attach_written;
    size_t     ready_count;
    size_t     total;

    /* fault tolerance (node_ft.c) */
    int        ft_ready;      /* the port table arrived: orphans get adopted */
    int        orphan;        /* the parent is gone, an adopter is being sought */
    tbon_rank_t lost_parent;
    int64_t    orphan_since;  /* us */
    tb_ring_t  obuf;          /* what went up while orphaned */
    size_t     obytes;
    tb_ring_t  down_reps;     /* reports for the commnode children, batched */
    int64_t    down_due;      /* when they go (ms; 0: none waiting) */
};

/* node.c */
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
void tb_node_begin_shutdown(tb_node_t *n);
void tb_node_watch_conn(tb_node_t *n, tb_conn_t *c);       /* EPOLLIN */
/* A new child slot (an adopted orphan); its index, or -1. */
int  tb_node_add_child(tb_node_t *n, tbon_rank_t rank, int is_be);
/* FE without fault tolerance: commnode r failed, the session ends. */
void tb_node_fault_end(tb_node_t *n, tbon_rank_t r);

/* node_ft.c */
void tb_ft_send_ports(tb_node_t *n);
int  tb_ft_ctl(tb_node_t *n, int child, int op, tbon_packet_t *p);
int  tb_ft_parent_lost(tb_node_t *n, tbon_rank_t lost);
void tb_ft_child_lost(tb_node_t *n, size_t i);
void tb_ft_buffer(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more,
                  uint64_t key);  /* takes p */
void tb_ft_adopted(tb_node_t *n, tb_cmd_t *c);
void tb_ft_adopt_failed(tb_node_t *n, tbon_rank_t lost);
void tb_ft_adopt_conn(tb_node_t *n, tb_cmd_t *c);
void tb_ft_free(tb_node_t *n);
/* Send the batched reports down when due; lowers *next to when they are. */
void tb_ft_timers(tb_node_t *n, int64_t now, int64_t *next);

/* node_start.c */
int  tb_node_launch_children(tb_node_t *n, tbon_error_t *err);
void tb_node_check_ready(tb_node_t *n);
void tb_node_startup_timer(tb_node_t *n);
void tb_node_child_exited(tb_node_t *n, tbon_rank_t r, int status);
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
void tb_stream_timers(tb_node_t *n, int64_t now, int64_t *next);
void tb_stream_free_all(tb_node_t *n);
size_t tb_stream_child_bytes(const tb_node_t *n, size_t child);
/* A child slot was added: every stream grows its per-child arrays. */
int  tb_stream_add_child(tb_node_t *n);
int  tb_stream_known(const tb_node_t *n, uint32_t id);
/* An adopted child takes part in stream id; before, it had sent up to key
 * sent and seen the requests up to seen_to (docs/protocol.md 8.4). */
void tb_stream_join(tb_node_t *n, uint32_t id, size_t child, uint64_t sent, uint64_t seen_to);
/* A back-end sends p up on stream id: if the stream's filter can compose
 * state, fold p into the back-end's own state of that filter, so that after
 * an adoption it can send everything it ever sent again in one packet (what
 * it wrote to a parent that then died is lost in the socket). */
void tb_stream_keep(tb_node_t *n, uint32_t id, tbon_packet_t *p);
void tb_stream_fold_kept(tb_node_t *n, tb_stream_st_t *s);
/* This node sent (or buffered) a unit with key up on stream id. */
void tb_stream_sent(tb_node_t *n, uint32_t id, uint64_t key);

#endif
