/* eds_int.h - the EDS's state, shared by eds.c (watches, admission,
 * heartbeats, the thread) and eds_adopt.c (the reconfigurator); nothing
 * else includes it: outside, a tb_eds_t is opaque (node.h). */
#ifndef TB_EDS_INT_H
#define TB_EDS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ft/eds.h"
#include "topo/reconfig.h"

/* How long a connecting peer has to finish the handshake. */
#define HANDSHAKE_MS 5000

/* On an event connection, the byte a parent sends its children before an
 * orderly end (docs/protocol.md 8.2): the connection's end is then no failure. */
#define TB_EVENT_BYE 'B'
/* A heartbeat on an event connection. */
#define TB_EVENT_BEAT 'H'
/* After an adoption, the event connection to the new parent waits this long
 * (at most a quarter of the heartbeat timeout), plus up to as much again by
 * rank: see events_delay(). */
#define TB_EVENTS_AFTER_ADOPTION_MS 40

enum { K_LISTEN, K_WAKE, K_PENDING, K_EVENT, K_PIDFD, K_NODE };

/* A watch is complete before add_watch publishes it; after that only the
 * EDS thread changes it (and reads it but for e->all's links, walked under
 * e->mu, and node_watch's dead, read by tb_eds_arm_node: set only by
 * tb_eds_stop, on the thread that owns the node). */
typedef struct watch {
    int kind;
    int fd;
    tbon_rank_t rank;
    pid_t pid;
    tb_auth_srv_t *auth;
    struct watch *next;        /* in the list of all watches */
    int dead;
    int64_t heard;             /* K_EVENT: when the peer last sent anything (ms) */
} watch_t;

/* Threads: the EDS thread owns everything here unless a field says
 * otherwise; the reactor (the node's thread, or for a back-end whoever
 * drives it) calls tb_eds_* and touches only what is under mu or atomic.
 * Fields set before the thread starts (node, rank, role, session, epfd,
 * wakefd) do not change. */
struct tb_eds {
    tb_node_t *node;
    tb_topology_t *topo;       /* a private copy: the EDS never shares it (the
                                  reactor reads its size under mu, and it
                                  grows only under mu: apply_reports) */
    tbon_rank_t rank;
    tb_role_t role;
    tb_session_t session;
    int epfd, wakefd;
    pthread_t thread;
    int running;               /* the thread that owns the node (start, stop) */
    pthread_mutex_t mu;
    watch_t *all;              /* list links under mu */
    uint8_t *data_seen;        /* per rank of the topology (reallocated under mu) */
    uint8_t *event_seen;       /* the same; the reactor clears entries: under mu */
    pid_t *reaped;             /* under mu (tb_eds_reaped) */
    size_t nreaped, capreaped;
    atomic_int stop;
    /* Fault tolerance (seed 003 V-A): the reconfigurator runs here. */
    tbon_rank_t parent;        /* the current parent (its event connection) */
    uint32_t incarnation;
    atomic_int ft_ready;       /* the tree is up and every port is known */
    int adopt_now;             /* the reactor asks for an adoption (under mu) */
    uint8_t *expect;           /* per rank: an adopted child may open events
                                  (under mu: the reactor sets entries) */
    /* reports to apply (tb_eds_report, tb_eds_join): */
    struct eds_rep { tb_eds_rep_kind_t kind; tbon_rank_t r, p; uint32_t inc; char *host;
                     uint32_t lid, port; tb_role_t role; } *reps;
    size_t nreps, capreps;     /* reports to apply to the private copy (mu) */
    tb_adopt_index_t *aidx;    /* adopter index over the private copy */
    atomic_int leaving;        /* an orderly end: tell the children, adopt nobody */
    int bye_sent;
    int parent_bye;            /* the parent said it leaves: its end is no failure */
    atomic_int hb_ms;          /* heartbeat timeout (0: none); a beat every quarter */
    int hb_on;                 /* EDS thread: heartbeats were on at its last look */
    int64_t next_beat;
    int64_t events_due;        /* when to open the new parent's event connection (0: no) */
    int grave[8];              /* the lost parent's event connections, closed later */
    watch_t *node_watch;       /* BE: the node's own epoll set, while nobody drives it
                                  (set under mu before the node is first armed,
                                  then read-only) */
    atomic_int node_armed;     /* it is armed (a fired one shot disarms it) */
    int ngrave;
};

/* Between eds.c and eds_adopt.c (EDS thread, unless said otherwise): */
watch_t *tb_eds_add_watch(tb_eds_t *e, int kind, int fd, uint32_t events, tbon_rank_t rank,
                          pid_t pid);
void tb_eds_drop_watch(tb_eds_t *e, watch_t *w);
void tb_eds_post(tb_eds_t *e, tb_cmd_t *c);
void tb_eds_apply_reports(tb_eds_t *e);
void tb_eds_parent_down(tb_eds_t *e, tbon_rank_t lost);
void tb_eds_parent_events(tb_eds_t *e);
void tb_eds_say_bye(tb_eds_t *e);
int tb_eds_grow_seen(tb_eds_t *e, size_t old, size_t n);
int64_t tb_eds_events_delay(const tb_eds_t *e);

#endif
