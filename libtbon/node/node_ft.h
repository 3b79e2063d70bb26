/* node_ft.h - the node and the fault-tolerance layer (libtbon/ft/), the
 * one header between them, both ways:
 *
 *   - the table the node reaches ft by (tb_ft_ops_t: events, control
 *     messages, the loop's hooks), which whoever creates a node passes in
 *     tb_node_config_t.ft;
 *   - the node as ft reaches it (tb_nft_t): its topology, its children by
 *     slot, sending a control message, emitting events, its streams' part
 *     in an adoption. ft's parts hold a tb_nft_t and call only through its
 *     table of function pointers (tb_nft_ops_t), which node_ft.c fills with
 *     the node's functions; a unit test gives them a fake node instead
 *     (tests/unit/ft_fake.h). The composer (ft/ops.c) makes the handle
 *     with tb_nft_make and finds ft's state with tb_nft_state;
 *   - what the EDS thread reads of the node (tb_node_fwatch and the
 *     rest at the end), direct calls: the EDS runs with a real node only.
 *
 * node/ is below ft/: the node calls ft only through tb_ft_ops_t, never by
 * name (scripts/layers.sh). Nothing of node_int.h is visible here. */
#ifndef TB_NODE_FT_H
#define TB_NODE_FT_H

#include <pthread.h>

#include "node/node.h"

struct tb_ft;

/* The fault-tolerance layer (libtbon/ft/: recovery, membership views,
 * failure notices, joins, attributes, the EDS) sits above the node: the
 * node reaches it only through this table, which whoever creates a node
 * passes in tb_node_config_t.ft (ft/ft.h: tb_ft_ops), and holds its state
 * only as the opaque n->ftst.
 *
 * The node does not call ft's functions one by one: it tells ft what
 * happened (event: a child gone, lost, left or connected; the parent lost; the
 * tree up; a command ft owns; ...), hands it every control message ft owns
 * (ctl: ft dispatches by the owner codec/ctl.c gives the op), and runs its
 * hooks in the loop. What the node must know of ft's state it learns from
 * an event's result (PARENT_LOST, ORPHAN_UP: is the node an orphan?) or
 * from ready(); it keeps no copy of ft's flags.
 *
 * Threads: every entry is for the thread that drives the node (node_int.h,
 * "Threads"), except arm (any thread). Before ft's start (a node whose
 * creation failed early is destroyed through them) only stop, free, event,
 * flush, ready, arm and reaped may be called: they then do nothing (or
 * answer 0). */
typedef enum tb_ft_ev_kind {
    TB_FT_EV_CMD,           /* u.cmd: a command ft owns (ADOPT_CONN, ADOPTED,
                               ADOPT_FAILED, CHECK, ATTR, JOIN_CONN); ft may
                               take its fd (setting it to -1) */
    TB_FT_EV_TREE_UP,       /* the whole subtree is up (READY): the port
                               table goes down, orphans may be adopted */
    TB_FT_EV_JOINED,        /* this node joined the running tree (cfg.joined)
                               and is set up: it asks its parent for the view */
    TB_FT_EV_FILTER_LOADED, /* a plug-in filter is loaded: the EDS watches
                               the node's plug-in calls (n->fw) */
    TB_FT_EV_FAULT_TAKEN,   /* u.rank: the child whose hung filter's report
                               we took (TB_CMD_FILTER_FAULT): it may end */
    TB_FT_EV_LAUNCHED,      /* u.launched: we started pid for rank (a child,
                               or a Slurm step's pseudo-rank): the EDS watches it */
    TB_FT_EV_PARENT_EVENTS, /* u.fd: the event connection to the parent, taken
                               over by the EDS; result 0 or TBON_E* */
    TB_FT_EV_PARENT_LOST,   /* u.rank: the parent whose data connection ended
                               (TBON_RANK_NONE: none was connected); result 1
                               if ft keeps the node as an orphan (an adopter is
                               sought), 0 if the node must leave */
    TB_FT_EV_ORPHAN_UP,     /* u.up: a packet for the parent we do not have;
                               result 1 if ft took it (an orphan buffers it),
                               0 if it is still the caller's */
    TB_FT_EV_CHILD_GONE,    /* u.child: its connection ended, whatever the
                               cause (checks, acknowledgements stop waiting) */
    TB_FT_EV_CHILD_LOST,    /* u.child: ... while the tree ran, and it did not
                               say it leaves: a failure, reported */
    TB_FT_EV_CHILD_LEFT,    /* u.child: ... and it had said it leaves */
    TB_FT_EV_CHILD_UP,      /* u.child: a child connected (its hello came):
                               ft answers one that joined the running tree
                               (ft keeps which did: ft/join.c) */
    TB_FT_EV_SHUTDOWN,      /* the orderly end begins: the EDS tells the
                               children and adopts nobody */
    TB_FT_EV_FINISHED,      /* the node has finished (its loop is over): the
                               EDS thread may end now, while the node is torn
                               down (stop joins it) */
    TB_FT_EV_DETACH,        /* u.fd: the FE detaches; the tree waits this many
                               ms for a new one (0: no limit): the children
                               are told; result 0 or TBON_E* */
    TB_FT_EV_MISSING,       /* u.missing: rank failed during start-up (it is
                               dead from now on) and its children moved under
                               parent, which launches them (their slots here
                               are made already, if they are ours); at the
                               FE the changes go into the first view after
                               the start-up */
} tb_ft_ev_kind_t;

typedef struct tb_ft_event {
    tb_ft_ev_kind_t kind;
    union {
        tb_cmd_t   *cmd;
        size_t      child;      /* an index in n->child */
        tbon_rank_t rank;
        int         fd;
        struct { tbon_rank_t rank; pid_t pid; } launched;
        struct { uint32_t stream; tbon_packet_t *p; int more; uint64_t key; } up;
        struct { tbon_rank_t rank, parent; const tbon_rank_t *moved; size_t nmoved; } missing;
    } u;
} tb_ft_event_t;

typedef struct tb_ft_ops {
    /* life: start sets up everything of ft's for node n once its listening
     * socket is made (its state, the first view; unless n has given links,
     * the FE's notice socket and the EDS, which takes n->lfd); stop ends the
     * EDS thread (before the children are reaped); free frees the rest. */
    int  (*start)(tb_node_t *n, tbon_error_t *err);
    void (*stop)(tb_node_t *n);
    void (*free)(tb_node_t *n);
    /* what happened (tb_ft_ev_kind_t); the result is 0 unless the kind says */
    int  (*event)(tb_node_t *n, const tb_ft_event_t *ev);
    /* a control message whose owner is ft, view or attr (codec/ctl.c), from
     * the parent (child < 0) or child; m decoded from p (both borrowed) */
    void (*ctl)(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p);
    /* the loop: timers fires what is due (before the turn's first flush;
     * 1 if it acted, and the flush must run even if nothing else happened);
     * next lowers *next to ft's next deadline (after that flush, which may
     * have counted new orphans: their deadline is known only then); flush
     * is the work after each dispatch (views published, acknowledgements).
     * ft's own descriptors (the FE's notice socket) are tb_io_t's of its
     * own in the node's loop (n->loop): no entry here */
    int  (*timers)(tb_node_t *n, int64_t now);
    void (*next)(const tb_node_t *n, int64_t *next);
    void (*flush)(tb_node_t *n);
    /* 1 once the port table is here (from the tree's READY, or from the
     * parent) until an adoption fails: orphans get adopted, a back-end keeps
     * what it sends, a leaving back-end says so, a lost child may live on */
    int  (*ready)(const tb_node_t *n);
    /* the EDS's service: reaped says if the EDS has reaped pid (0 without
     * an EDS) */
    int  (*reaped)(tb_node_t *n, pid_t pid);
    /* 1 if the EDS has given parent up (its event connection ended, or it
     * fell silent) and seeks an adopter already: a broken data connection
     * to it is not worth a relink (0 without an EDS) */
    int  (*parent_gone)(tb_node_t *n, tbon_rank_t parent);
    /* a descriptor watched by the EDS thread's loop, io's callback run on
     * that thread, and taken out again (any thread): a back-end's kicker
     * waits there until it first has work (api/kick.c). TBON_EINVAL
     * without an EDS */
    int  (*side_watch)(tb_node_t *n, tb_io_t *io, uint32_t events);
    void (*side_forget)(tb_node_t *n, tb_io_t *io);
} tb_ft_ops_t;

/* ---- the node as ft reaches it ---- */

/* Where a control message goes (or came from): a child's slot (0, 1, ...:
 * the index the node gives its children, which never moves; slots are only
 * added), or the parent. */
#define TB_NFT_PARENT (-1)

/* A slot's (or the parent's) connection: child_flags, parent_flags. */
enum tb_nft_conn_flags {
    TB_NFT_CONN = 1,        /* it has a connection */
    TB_NFT_OPEN = 2,        /* ... not closed: it counts for acknowledgements,
                               checks and joins */
    TB_NFT_BE   = 4,        /* the child is a back-end */
};

/* Where the node is in its life, as ft tells it apart. */
enum tb_nft_life {
    TB_NFT_STARTING,        /* the tree is not up yet */
    TB_NFT_RUNNING,
    TB_NFT_ENDING,          /* shutting down or past it: no new work, no
                               failure reports */
};

/* The calls. n is tb_nft_t.n; a child is a slot index below nchild(). */
typedef struct tb_nft_ops {
    int    (*life)(const tb_node_t *n);                 /* enum tb_nft_life */
    /* children, by slot */
    size_t (*nchild)(const tb_node_t *n);
    tbon_rank_t (*child_rank)(const tb_node_t *n, size_t i);
    int    (*child_flags)(const tb_node_t *n, size_t i);    /* tb_nft_conn_flags */
    int    (*child_index)(const tb_node_t *n, tbon_rank_t r); /* -1: not ours */
    /* A slot for rank r, which joined or came back restarted: its old one,
     * or a new one; waiting for the new process to connect. Its index, or
     * < 0. */
    int    (*child_rejoin)(tb_node_t *n, tbon_rank_t r, int is_be);
    /* Adopt orphan r on fd (taken on success): a new slot, connected and
     * ready. Its index, or < 0 (fd still the caller's). */
    int    (*child_adopt)(tb_node_t *n, tbon_rank_t r, int is_be, int fd);
    void   (*child_close)(tb_node_t *n, size_t i, const char *why);
    /* Child i's rank was restarted: its old process's connection ends with
     * no report, its end being known. */
    void   (*child_drop)(tb_node_t *n, size_t i);
    /* A joined child that never connected: its slot is gone, its streams
     * stop waiting for it. */
    void   (*child_absent)(tb_node_t *n, size_t i);
    /* Child i is silent (on: the waves go on without it) or speaks again;
     * 1 if that is news (nothing if it has no connection). */
    int    (*child_suspect)(tb_node_t *n, size_t i, int on);
    /* the parent */
    int    (*parent_flags)(const tb_node_t *n);         /* tb_nft_conn_flags */
    tbon_rank_t (*parent_rank)(const tb_node_t *n);     /* its connection's */
    /* Adopted: fd (taken on success) is the new parent's connection. 0 or < 0. */
    int    (*parent_set)(tb_node_t *n, tbon_rank_t r, int fd);
    /* The parent is gone for good (the node leaves, or ft keeps it as an
     * orphan: TB_FT_EV_PARENT_LOST). */
    void   (*parent_lost)(tb_node_t *n, const char *why);
    /* Control message op to `to` (a slot or TB_NFT_PARENT); takes p, and
     * drops it if there is no connection. */
    void   (*send_ctl)(tb_node_t *n, int to, int op, tbon_packet_t *p);
    /* FE: an event for the application (nothing elsewhere). */
    void   (*emit)(tb_node_t *n, tbon_event_type_t type, tbon_rank_t r, tbon_rank_t p,
                   uint32_t inc, uint64_t version);
    /* FE without the port table: commnode r failed, the session ends. */
    void   (*fault_end)(tb_node_t *n, tbon_rank_t r);
    /* ft changed the topology (tb_nft_t.topo): what the node made of it
     * (the frame new children get) is stale. */
    void   (*topo_changed)(tb_node_t *n);
    /* streams */
    void   (*settle)(tb_node_t *n);              /* FE: waves may be lost now */
    /* Adopted child i's TB_CTL_CATCH_UP: the plug-ins after its first
     * `filters` and the streams concerning it that it did not graft. */
    void   (*catch_up)(tb_node_t *n, size_t i, uint32_t filters);
    uint32_t (*filters_loaded)(const tb_node_t *n);  /* tb_ctl_catch_up_t.filters */
    void   (*bcast_join)(tb_node_t *n, size_t i);/* a joined child's streams */
    /* TB_CTL_GRAFT m (packet p) from child i: its stream taken in here (and
     * grafted further up if it is new here). */
    void   (*graft)(tb_node_t *n, size_t i, const tb_ctl_graft_t *m, tbon_packet_t *p);
    /* Adopted: every stream grafted to the new parent and its state
     * composed up; hung[0..k): streams whose filter hung in the lost parent
     * over what we sent (none of it goes up). 1 if something is lost. */
    int    (*adopt_streams)(tb_node_t *n, const uint32_t *hung, size_t k);
    /* ... then each packet buffered while orphaned (takes p): sent up, or
     * dropped (1: a loss) where its waves closed without it; then done. */
    int    (*adopt_resend)(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more,
                           uint64_t key);
    void   (*adopt_done)(tb_node_t *n);
    /* FE: rank r was given to a joining process: not expected in waves
     * until its TBON_EV_NODE_JOINED. */
    void   (*cover_joining)(tb_node_t *n, tbon_rank_t r);
    /* Watch io (EPOLLIN) in the node's loop; 0 or < 0. */
    int    (*watch)(tb_node_t *n, tb_io_t *io);
} tb_nft_ops_t;

/* ft's handle on its node: the calls, and what does not change (set by
 * tb_nft_make at ft's start; a fake fills its own). */
typedef struct tb_nft {
    tb_node_t *n;
    const tb_nft_ops_t *ops;
    tb_topology_t *topo;      /* the node's copy: ft applies the view's changes
                                 to it (then ops->topo_changed) */
    tbon_rank_t rank;
    tb_role_t role;
    const tb_session_t *session;
    const tb_node_cbs_t *cbs; /* the FE application's view, checked, attr */
    int  heartbeat_ms;        /* the configured heartbeat timeout (0: none) */
    int  suspect_ms;          /* the configured suspicion window (0: default) */
    int  joined;              /* the node joined the running tree */
    int  given_links;         /* node.h, "Given links": no notices, no EDS */
    int  parent_event_fd;     /* the event connection to the parent (EDS) */
    int  grace_ms;            /* FE: how long the tree holds after its end */
    uint64_t view_base;       /* FE: the first view version (0: 1); a
                                 reattached FE goes on from its children's */
} tb_nft_t;

/* The handle on node n (node_ft.c's calls). */
void tb_nft_make(tb_node_t *n, tb_nft_t *h);
/* ft's state in n (NULL before ft's start), set by ft's start. */
struct tb_ft *tb_nft_state(const tb_node_t *n);
void tb_nft_set_state(tb_node_t *n, struct tb_ft *ft);
/* The node's listening socket and port: ft's start may replace it (the FE's
 * notice socket needs the UDP port of the same number), then hands it to
 * the EDS (set -1). */
void tb_nft_listener(const tb_node_t *n, int *fd, uint16_t *port);
void tb_nft_set_listener(tb_node_t *n, int fd, uint16_t port);

/* ---- what the EDS thread reads of the node ---- */

/* The plug-in filter call running now, if any (node_ffault.c), for the
 * EDS thread, which takes the node for failed when it runs past its
 * limit (ft/eds_watch.c). Under mu. */
struct tb_fwatch {
    pthread_mutex_t mu;
    int64_t  since;       /* ms (tb_now_ms); 0: no plug-in call running */
    int      limit;       /* ms; 0: none */
    int      filter;
    uint32_t stream;
    uint64_t key;         /* the wave's (0: none) */
    uint32_t src[16];     /* the first distinct sources of its input */
    size_t   nsrc, nin;
    const char *name, *path;  /* the filter's (the registry outlives the EDS) */
};
struct tb_fwatch *tb_node_fwatch(tb_node_t *n);
const tb_config_t *tb_node_conf(const tb_node_t *n);
/* The fatal hook of whoever drives the node (tb_node_config_t.fatal), if any. */
void tb_node_fatal(tb_node_t *n, int code, const char *msg);
/* "5, 6 and 7" (the first 16 of v[0..k), and how many more), into buf. */
void tb_stream_rank_list(const uint32_t *v, size_t k, char *buf, size_t len);

#endif
