/* frontend.h - the front-end API: launch a tree, streams, receive results */
#ifndef TBON_FRONTEND_H
#define TBON_FRONTEND_H

#include <tbon/net.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tbon_fe_options {         /* zero-initialise: every field has a default */
    const char *commnode_path;           /* default: $TBON_COMMNODE, else the built tbon_commnode */
    const char *rsh;                     /* remote shell; default $TBON_RSH, else "ssh" */
    const char *attach_file;             /* write attach info here (mode 0600): for the
                                            back-ends of attach mode (backend_exe NULL),
                                            and for nodes that join later; removed by
                                            tbon_net_destroy */
    int         startup_timeout_ms;      /* default 30000 */
    int         heartbeat_ms;            /* default chosen by the library; <0 disables heartbeats */
    int         no_fault_tolerance;      /* 1: a commnode failure ends the session */
    /* How long a node silent past its heartbeat timeout stays suspected
     * before the front-end confirms it failed, given a second observer
     * (three times that with one); default half the heartbeat timeout.
     * docs/fault-tolerance.md. */
    int         suspect_ms;
    /* Called now and then while the tree starts (ready = processes connected
     * so far, total = processes in the tree); may be NULL. Runs on the
     * caller's thread, inside tbon_fe_create. */
    void      (*progress)(void *arg, size_t ready, size_t total);
    void       *progress_arg;
    /* The front-end's host as the other hosts know it (default $TBON_FE_HOST):
     * it must name this host; it replaces the topology's front-end host, so a
     * topology made elsewhere runs from here. Without it, a topology whose
     * front-end host is not this host is an error (TBON_ETOPOLOGY) naming
     * both; a front-end host of "localhost" in a tree with other hosts is
     * replaced by this host's name. docs/cluster.md, "The front-end's host". */
    const char *fe_host;
    /* More environment variables that travel to processes on other hosts:
     * names separated by blanks or commas (added to $TBON_ENV); TBON_* and
     * LD_LIBRARY_PATH always travel. docs/cluster.md, "What travels". */
    const char *env;
    /* Inside a Slurm allocation (salloc, sbatch): 1 builds the tree over the
     * allocation's nodes - the front-end here, on every node one commnode
     * with slurm_be_per_node back-ends, commnodes of at most slurm_fanout
     * children above them - and starts each depth as one srun step;
     * topology_file is then NULL. docs/cluster.md, "Slurm". */
    int         slurm;
    unsigned    slurm_fanout;            /* default 32 */
    unsigned    slurm_be_per_node;       /* default $SLURM_NTASKS_PER_NODE, else the
                                            allocation's tasks per node, else 1 */
    /* 1: every process must start, as before: the first commnode or back-end
     * that cannot be launched, exits before it is ready or does not connect
     * in time fails tbon_fe_create, naming its rank, host and why. 0 (the
     * default): such a node is left out - its parent launches its children
     * in its place - and the tree starts without it (tbon_fe_missing).
     * Under Slurm a start-up always needs every process. docs/user-guide.md,
     * "Start-up failures". */
    int         require_all;
    /* 1: no stream is exact. By default a wait-for-all stream whose filter
     * is associative (sum, min, max, avg, concat, or a plug-in declaring
     * F_associative) folds every back-end's contribution exactly once when
     * commnodes die, for a reference kept per sent unit and a DONE message
     * per 32 waves (docs/fault-tolerance.md, "Exact results when commnodes
     * die"); off, such a stream behaves as any other: waves in flight at a
     * failure may miss a subtree (their coverage says so). */
    int         exact_off;
    /* A session that outlives its front-end (docs/user-guide.md,
     * "Sessions"). session_file: written (mode 0600) once the tree is up,
     * kept current, removed at the session's end; tbon_fe_reattach takes
     * the tree over from it. grace_ms: when this front-end dies (its
     * connections end without a word), the tree waits this long for a new
     * one (tbon_fe_reattach) before every process exits; 0, the default:
     * it exits at once. A grace needs a session_file. detach_ms: after
     * tbon_fe_detach, how long the tree waits for a new front-end (0, the
     * default: until one comes). Both need commnodes, not back-ends, as the
     * front-end's children. */
    const char *session_file;
    int         grace_ms;
    int         detach_ms;
    /* 1 (or $TBON_ALLOW_FLAT=1): go on when every commnode of the topology
     * was left out of the start-up - the front-end then holds every
     * back-end itself. 0, the default: tbon_fe_create fails, naming the
     * first commnode's reason (usually one mistake made everywhere: a wrong
     * commnode path, a binary missing on the hosts). */
    int         allow_flat;
} tbon_fe_options_t;

/* Launch the tree of topology_file (text or XML): its commnodes, and at its
 * leaves backend_exe with backend_argv (NULL-terminated; may be NULL) plus
 * the launcher's own arguments. With backend_exe NULL, the leaves are left for
 * back-ends that call tbon_be_attach with opts->attach_file, which this call
 * writes (mode 0600) before it waits for them. Returns when every process is
 * connected or left out (a node that cannot be launched, exits before it is
 * ready, or does not connect in time: tbon_fe_missing says which, and a
 * TBON_EV_NODE_FAILED event per rank waits in tbon_net_next_event), or NULL
 * with err filled (naming the node and host) after removing every process it
 * started: with opts->require_all on the first failure, else when no
 * back-end is left. Call from one thread; the returned network may then be
 * used from any thread. */
tbon_net_t  *tbon_fe_create(const char *topology_file, const char *backend_exe,
                            const char *const backend_argv[],
                            const tbon_fe_options_t *opts, tbon_error_t *err);

/* Leave the tree running (docs/user-guide.md, "Sessions"): its processes,
 * streams and their filters' state stay; file (mode 0600, as the attach
 * file) gets what a new front-end needs - the session's secret, where this
 * front-end's children listen, the plug-ins loaded. The children buffer
 * what comes up meanwhile (64 MiB each at most; past it, dropped, and a
 * TBON_EV_DATA_LOST at the reattach says so) and wait opts->detach_ms (0:
 * until a front-end comes). On 0, net is gone, as after tbon_net_destroy
 * (what it had received and not handed out is dropped); on an error
 * (TBON_EINVAL: a back-end is a child of the front-end, or no fault
 * tolerance; TBON_EIO: the file; TBON_ECLOSED) net is as it was, with the
 * reason in tbon_net_error(net). Call from one thread, with no other call
 * on net under way. */
int          tbon_fe_detach(tbon_net_t *net, const char *file);

/* Become the front-end of the tree that file names (written by
 * tbon_fe_detach, or kept by a front-end made with opts->session_file that
 * has died within its grace), on this host or another: claim each of the
 * old front-end's children (proving the session's secret), take the
 * topology and view from them, and have them adopted. Their streams come
 * with them (tbon_net_stream finds one by id), and each stream's filter
 * state is composed up (seed 003 IV-C): the first result of a stream whose
 * filter keeps state (union, a plug-in's F_get_FilterState) covers all that
 * was sent before. opts: as for tbon_fe_create (its grace_ms, detach_ms and
 * session_file for this front-end; the topology, launch and Slurm fields
 * are not used). NULL with err filled: the file unreadable or malformed
 * (its line), TBON_EAUTH (another session's file, or a wrong secret),
 * TBON_ECLOSED (the session has ended: nobody answers), TBON_EBUSY (the
 * session has a front-end, or another one is reattaching: exactly one of
 * two that race wins). */
tbon_net_t  *tbon_fe_reattach(const char *file, const tbon_fe_options_t *opts,
                              tbon_error_t *err);

/* The ranks left out of the start-up (tbon_fe_create's default, see
 * tbon_fe_options_t.require_all): commnodes and back-ends that could not be
 * launched, exited before they were ready, or did not connect in time, and
 * with a node that hung after connecting, its whole subtree. Each is dead in
 * every process's view; a commnode's children were launched by its parent
 * instead and take part. Writes up to cap ranks (in rank order) to out;
 * returns how many there are (0: the whole topology started), or
 * TBON_EINVAL. Any thread. docs/user-guide.md, "Start-up failures". */
int          tbon_fe_missing(tbon_net_t *net, tbon_rank_t *out, size_t cap);

/* The live back-ends cut off from the front-end: their parent (or a node
 * above it) failed and nobody has adopted them yet - an orphan looking for a
 * new parent, or one on a host that fell off the network with its parent.
 * Waves do not wait for them, so results miss their answers until they are
 * adopted (they count again) or taken for failed (TBON_EV_NODE_FAILED).
 * Writes up to cap ranks (in rank order) to out; returns how many there are,
 * or a negative error code. docs/fault-tolerance.md. */
int          tbon_fe_cut_off(tbon_net_t *net, tbon_rank_t *out, size_t cap);

/* --- the tree's status (tbon_frontend --status) --- */
typedef enum {
    TBON_NODE_OK,           /* up, under the parent it started with */
    TBON_NODE_SUSPECT,      /* silent past its heartbeat timeout, not yet confirmed */
    TBON_NODE_ADOPTED,      /* up, under a new parent after a failure */
    TBON_NODE_FAILED,       /* failed (confirmed, or its connection ended) */
    TBON_NODE_MISSING,      /* left out of the start-up (tbon_fe_missing) */
    TBON_NODE_JOINED,       /* joined the running tree */
    TBON_NODE_LEFT,         /* a back-end that left in order */
} tbon_node_state_t;

typedef struct tbon_node_status {
    tbon_rank_t rank;
    tbon_rank_t parent;     /* its parent now (TBON_RANK_NONE for the FE) */
    int         role;       /* 0 the FE, 1 a commnode, 2 a back-end */
    tbon_node_state_t state;
    double      since_s;    /* seconds in that state (since the tree was up, if it
                               never changed) */
    char        host[128];  /* as the topology names it */
    double      rtt_ms;     /* a ping's round trip; -1: not asked, down, or no answer */
} tbon_node_status_t;

/* "ok", "suspect", "adopted", "failed", "missing", "joined", "left". */
const char *tbon_node_state_name(tbon_node_state_t s);

/* Every node of the tree, by rank (the FE first), as the front-end's events
 * left it: writes min(cap, count) entries to out and returns the count, or
 * a negative error code. With ping_ms > 0 every node that is not down is
 * pinged, one after another, waiting at most ping_ms for each answer
 * (tbon_net_ping); 0: no round trips. Costs nothing until it is called. */
int tbon_fe_status(tbon_net_t *net, tbon_node_status_t *out, size_t cap, int ping_ms);

/* --- run-time performance data (tbon_frontend --perf) --- */

/* One stream at one node. "Up" is towards the FE, "down" towards the
 * back-ends; packets are counted with their payload's bytes. */
typedef struct tbon_perf_stream {
    tbon_rank_t rank;
    uint32_t    stream;
    uint64_t    up_in_packets, up_in_bytes;      /* from its children */
    uint64_t    up_out_packets, up_out_bytes;    /* to its parent (a back-end: what it
                                                    sent; the FE: delivered to the
                                                    application) */
    uint64_t    down_in_packets, down_in_bytes;  /* from its parent (the FE: sent by
                                                    the application) */
    uint64_t    down_out_packets, down_out_bytes;/* to its children, each counted */
    uint64_t    waves;          /* waves its up filter ran over (not at back-ends) */
    uint64_t    filter_calls;   /* up and down filter calls */
    uint64_t    filter_ns;      /* their wall time */
    uint64_t    filter_cpu_ns;  /* their CPU time, estimated from one call in 16
                                   since the node's first gathering (0: none
                                   measured; the FE's plug-in calls, which run on
                                   a worker thread, are not) */
    uint64_t    queued_bytes;   /* waiting in its wave queues now */
} tbon_perf_stream_t;

typedef struct tbon_perf_node {
    tbon_rank_t rank;
    int         role;           /* 0 the FE, 1 a commnode, 2 a back-end */
    int         alive;          /* alive in the front-end's topology */
    int         answered;       /* 0: no answer (down, or silent past the timeout):
                                   the figures below are 0 */
    char        host[128];      /* as the topology names it */
    uint64_t    rss_bytes;      /* resident memory of its process */
    uint64_t    cpu_us;         /* CPU time of its process (user and system) */
    uint64_t    queued_bytes;   /* written to its connections, not yet sent */
    uint64_t    stream_queued_bytes; /* in its streams' wave queues */
    uint64_t    link_resends;   /* frames its live links sent again */
    uint64_t    relinks;        /* times its live links were made again */
    uint64_t    crc_errors;     /* frames its live links took in damaged */
    uint64_t    uptime_ms;
    uint64_t    children;       /* connected now */
    uint64_t    messages_dropped; /* messages between processes it could not pass on */
    size_t      first_stream, nstreams; /* its entries of tbon_perf_t.streams */
} tbon_perf_node_t;

typedef struct tbon_perf {
    size_t              nnodes;    /* every rank of the topology, by rank */
    tbon_perf_node_t   *nodes;
    size_t              nstreams;  /* by rank, then stream */
    tbon_perf_stream_t *streams;
    size_t              answered;  /* nodes that answered */
    size_t              silent;    /* nodes alive that did not */
    int                 rounds;    /* gatherings it took (a failure may need more) */
    double              elapsed_ms;
} tbon_perf_t;

/* Gather every node's performance data up the tree (docs/user-guide.md,
 * "Performance data"). The counters are kept always, at a few additions per
 * packet; the gathering costs one small message per node. From a node's
 * first gathering on, its filter calls' CPU time is sampled too. A node waits for
 * its children at most part of timeout_ms (> 0), so that a stopped process
 * holds up only its own answer; the nodes that lost their parent answer
 * again once adopted. 0 when every node alive answered; TBON_ETIMEOUT when
 * some did not within timeout_ms (the message names them; *out holds what
 * came); another negative error code otherwise (*out NULL). Free *out with
 * tbon_perf_free. */
int  tbon_fe_perf(tbon_net_t *net, tbon_perf_t **out, int timeout_ms);
void tbon_perf_free(tbon_perf_t *perf);

/* Load filter func from the shared object so_path here and in every other
 * process of the tree (commnodes, and back-ends, which keep state for an
 * adoption), all or nothing: it returns once every live node has said
 * whether it loaded. Returns its id (>= TBON_FILTER_BUILTIN_COUNT); or
 * TBON_EFILTER when it cannot load here or at any node, with the reason in
 * tbon_net_error(net): each node that failed by rank, role and host, with
 * dlerror's text (at most three named, then "..."); TBON_ETIMEOUT if some
 * node said nothing within 60 s (a hung node); TBON_ECLOSED. After a
 * failure nothing may use the filter, and a later call with the same path
 * and function tries again. A process that opened libtbon.so with
 * RTLD_LOCAL (Python's ctypes or cffi) loads plug-ins as well as any:
 * the library makes its own symbols global first (docs/filter-guide.md). */
int          tbon_fe_load_filter(tbon_net_t *net, const char *so_path, const char *func);

/* The communicator of every back-end (owned by net). */
tbon_comm_t *tbon_fe_broadcast_comm(tbon_net_t *net);

/* A communicator of n back-end ranks (owned by net; duplicates are ignored).
 * NULL if a rank is not a back-end of the tree. */
tbon_comm_t *tbon_fe_comm_new(tbon_net_t *net, const tbon_rank_t *backends, size_t n);

/* A new stream over comm: up_filter aggregates upstream with sync mode sync
 * (TBON_SYNC_*), down_filter transforms downstream. The stream reaches exactly
 * the commnodes whose subtree holds a member. Owned by net. NULL on error
 * (reason in tbon_net_error). */
tbon_stream_t *tbon_fe_stream_new(tbon_net_t *net, tbon_comm_t *comm,
                                  int up_filter, int sync, int down_filter);

/* End stream s everywhere: every node frees what it holds for it (its
 * waves in flight, its filters' state), and what is still on its way for it
 * is dropped, here too. s stays valid - tbon_stream_id, and TBON_ECLOSED from
 * tbon_stream_send and tbon_stream_recv - until the network is destroyed.
 * Returns 0, or TBON_EINVAL (not a front-end stream, or closed already).
 * A back-end keeps its handle of the stream, which gets nothing more. */
int tbon_stream_close(tbon_stream_t *s);

/* Set the parameters of the up or down filter (a packet of fmt, given to the
 * filter as ctx->params everywhere it runs), or with TBON_FILTER_PARAM_SYNC
 * the timeout "%ud" in ms of a TBON_SYNC_TIMEOUT stream. */
int tbon_stream_set_filter_params(tbon_stream_t *s, int which, const char *fmt, ...);

/* The consistency check: every live node compares its view version and a
 * digest of its topology copy (who is alive; the parent, incarnation, role,
 * host and id of each) with the FE's. Run it once the view is stable
 * (TBON_EV_VIEW_STABLE): during a view change nodes differ by design. */
typedef struct tbon_view_check {
    uint64_t    view_version;   /* the FE's view when the check ended */
    size_t      nodes;          /* live nodes in the FE's view, the FE included */
    size_t      agree;          /* nodes whose view and topology equal the FE's */
    size_t      ndisagree;      /* nodes that answered with something else */
    size_t      nmissing;       /* live nodes (in the FE's view) that did not answer */
    tbon_rank_t disagree[32];   /* the first 32 of each, in rank order */
    tbon_rank_t missing[32];
} tbon_view_check_t;
/* Returns 0 when every live node answered and agrees, TBON_ETOPOLOGY when
 * some disagree or did not answer (out says which; tbon_net_error says how
 * many), TBON_ETIMEOUT if an answer is still out after timeout_ms (a node
 * hung: its parent waits for it), TBON_ECLOSED or TBON_EINVAL. */
int tbon_fe_check_views(tbon_net_t *net, tbon_view_check_t *out, int timeout_ms);

/* The attribute key of node rank (the FE is rank 0) as it reached the FE:
 * copied into buf (cap bytes, NUL-terminated, truncated if need be, as
 * snprintf). Returns the value's length, or TBON_ENOTFOUND if rank never
 * set key, deleted it, or failed (a failed node's attributes are dropped);
 * TBON_EINVAL. */
int tbon_fe_get_attr(tbon_net_t *net, tbon_rank_t rank, const char *key, char *buf, size_t cap);
/* The nodes whose attributes changed since the last call (set, deleted, or
 * dropped with the node's failure): writes up to cap ranks, in rank order,
 * waiting up to timeout_ms (-1: for ever, 0: not at all) for a first one.
 * Returns how many it wrote (those beyond cap stay for the next call),
 * TBON_ETIMEOUT, TBON_ECLOSED or TBON_EINVAL. */
int tbon_fe_attrs_changed(tbon_net_t *net, tbon_rank_t *ranks, size_t cap, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif
