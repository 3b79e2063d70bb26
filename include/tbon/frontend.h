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
    const char *attach_file;             /* with backend_exe == NULL: write attach info here */
    int         startup_timeout_ms;      /* default 30000 */
    int         heartbeat_ms;            /* default chosen by the library; <0 disables heartbeats */
    int         no_fault_tolerance;      /* 1: a commnode failure ends the session */
    /* Called now and then while the tree starts (ready = processes connected
     * so far, total = processes in the tree); may be NULL. Runs on the
     * caller's thread, inside tbon_fe_create. */
    void      (*progress)(void *arg, size_t ready, size_t total);
    void       *progress_arg;
} tbon_fe_options_t;

/* Launch the tree of topology_file (text or XML): its commnodes, and at its
 * leaves backend_exe with backend_argv (NULL-terminated; may be NULL) plus
 * the launcher's own arguments. With backend_exe NULL, the leaves are left for
 * back-ends that call tbon_be_attach with opts->attach_file, which this call
 * writes (mode 0600) before it waits for them. Returns when every process is
 * connected, or NULL with err filled (naming the node and host) after
 * removing every process it started. Call from one thread; the returned
 * network may then be used from any thread. */
tbon_net_t  *tbon_fe_create(const char *topology_file, const char *backend_exe,
                            const char *const backend_argv[],
                            const tbon_fe_options_t *opts, tbon_error_t *err);

/* Load filter func from the shared object so_path here and in every commnode.
 * Returns its id (>= TBON_FILTER_BUILTIN_COUNT) or TBON_EFILTER, with the
 * reason (dlerror's text) in tbon_net_error(net). */
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

/* Set the parameters of the up or down filter (a packet of fmt, given to the
 * filter as ctx->params everywhere it runs), or with TBON_FILTER_PARAM_SYNC
 * the timeout "%ud" in ms of a TBON_SYNC_TIMEOUT stream. */
int tbon_stream_set_filter_params(tbon_stream_t *s, int which, const char *fmt, ...);

#ifdef __cplusplus
}
#endif

#endif
