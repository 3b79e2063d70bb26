/* eds.h - the event detection service thread (seed 003 V-A; ft/eds.c,
 * ft/eds_adopt.c) */
#ifndef TB_FT_EDS_H
#define TB_FT_EDS_H

#include <sys/types.h>

#include "node/node.h"

typedef struct tb_eds tb_eds_t;

/* The EDS side. A node with given links has none: the functions
 * below that take an EDS accept NULL and do nothing (the tb_eds_watch_* ones
 * then fail with TBON_EINVAL, tb_eds_reaped says 0). */
tb_eds_t *tb_eds_start(tb_node_t *node, int listen_fd, int parent_event_fd,
                       const tb_topology_t *topo, tbon_rank_t rank,
                       const tb_session_t *s, tbon_error_t *err);
/* Watch the event connection fd to the parent (taken over). Any thread. */
int  tb_eds_watch_parent(tb_eds_t *e, int fd, tbon_rank_t parent);
/* Watch a child process (pidfd) for the node. */
int  tb_eds_watch_child(tb_eds_t *e, tbon_rank_t rank, pid_t pid);
/* Stop the thread and close its sockets (the reaped-children record stays
 * until tb_eds_free). NULL is fine. */
void tb_eds_stop(tb_eds_t *e);
/* Ask the thread (and a commnode's adopter thread) to end, without waiting:
 * a node that has finished lets them wind down while it tears down the
 * rest; tb_eds_stop then joins them. Any thread; NULL is fine. */
void tb_eds_quit(tb_eds_t *e);
void tb_eds_free(tb_eds_t *e);
/* 1 if the EDS has reaped that child. */
int  tb_eds_reaped(tb_eds_t *e, pid_t pid);
/* 1 if the EDS has given parent (our parent, or the last one we had) up:
 * its event connection ended or fell silent, and an adoption is under
 * way (tb_eds_parent_down); or if that connection's end has arrived and
 * the EDS has not read it yet. Any thread; NULL is fine. */
int  tb_eds_parent_gone(tb_eds_t *e, tbon_rank_t parent);
/* Whether the FE, our parent, is gone: its event connection ended without
 * its word that it fenced us. Nobody can take its place: the session is
 * over. Any thread. */
int  tb_eds_fe_gone(tb_eds_t *e);
/* Watch io in the EDS thread's loop (its callback runs on that thread; an
 * io watched already is armed again, for a one shot that went off), or take
 * it out (tb_node_side_watch). Any thread; NULL: TBON_EINVAL, nothing. */
int  tb_eds_side_watch(tb_eds_t *e, tb_io_t *io, uint32_t events);
void tb_eds_side_forget(tb_eds_t *e, tb_io_t *io);
/* Fault tolerance (seed 003 V-A). The reactor keeps the EDS's private copy
 * of the topology in step: a report is queued and applied on the EDS thread. */
typedef enum tb_eds_rep_kind {
    TB_EDS_FAILED = 1,      /* r failed (or left): dead from now on */
    TB_EDS_ADOPTED,         /* r was adopted by p */
    TB_EDS_PORT,            /* r listens on port p (the port table) */
    TB_EDS_JOINED,          /* r joined, or came back restarted (tb_eds_join) */
} tb_eds_rep_kind_t;
/* wake: the EDS thread is woken for it (the failure of a neighbour, whose
 * event connection it fences at once); else it waits in the mailbox for
 * the EDS's next need of its copy or next wake-up. */
void tb_eds_report(tb_eds_t *e, tb_eds_rep_kind_t kind, tbon_rank_t r, tbon_rank_t p,
                   uint32_t inc, int wake);
/* A node joined, or a restarted one came back (a view's TB_V_JOIN or
 * TB_V_JOIN_CN change c, applied by tb_report_join): the same in our copy. */
void tb_eds_join(tb_eds_t *e, const tb_vchange_t *c);
/* The tree is up and the ports known: orphans may now be adopted. */
void tb_eds_set_ft_ready(tb_eds_t *e);
/* The session outliving its front-end (eds_fe.c; docs/fault-tolerance.md,
 * "The root"). FE: the grace each child is told (ms; 0: none), and
 * tb_eds_detach, which tells every child the FE detaches and the tree waits
 * hold_ms for a new one (0: no limit), returning once said (0 or
 * TBON_ETIMEOUT). Any node: the view version applied (for a new FE's
 * claim). Any thread; NULL is fine. */
void tb_eds_set_grace(tb_eds_t *e, int ms);
int  tb_eds_detach(tb_eds_t *e, uint32_t hold_ms);
void tb_eds_set_view(tb_eds_t *e, uint64_t v);
/* The reactor lost its parent (rank lost) first, when our incarnation was
 * inc: adopt us now (unless an adoption started since gives a new link). */
void tb_eds_request_adoption(tb_eds_t *e, tbon_rank_t lost, uint32_t inc);
/* An adopted child rank will open its event connection. */
void tb_eds_expect(tb_eds_t *e, tbon_rank_t rank);
/* The node leaves in order: the children are told, nobody is adopted. */
void tb_eds_leave(tb_eds_t *e);
/* Heartbeats on the event connections: a peer silent for timeout_ms has
 * failed (0: no heartbeats). */
void tb_eds_set_heartbeat(tb_eds_t *e, int timeout_ms);
/* A plug-in filter is loaded: watch the node's plug-in calls (n->fw) and
 * take the node for failed when one runs past its limit (eds_watch.c). */
void tb_eds_watch_filters(tb_eds_t *e);
/* The streams whose filter hung in our parent over what we sent (reactor,
 * at the adoption that follows): up to cap into out, how many; forgotten. */
size_t tb_eds_take_hung_streams(tb_eds_t *e, uint32_t *out, size_t cap);
/* The reactor has taken child rank's report of its hung filter: say so to
 * the child, which then ends (eds_watch.c). */
void tb_eds_fault_taken(tb_eds_t *e, tbon_rank_t rank);
/* on: the node hears the FE's verdicts on its suspicions (notice.c), so a
 * silent peer waits for the FE to confirm it; 0: nobody can confirm, and a
 * suspicion that stands long enough is taken for a failure here. */
void tb_eds_set_verdicts(tb_eds_t *e, int on);

#endif
