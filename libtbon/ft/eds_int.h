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

/* The longest host name an adoption plan holds (with its NUL). */
#define TB_ADOPT_HOST_MAX 256
#include "net/loop.h"

/* How long a connecting peer has to finish the handshake: a slowloris is
 * closed by then, and a process starved by a loaded host is not (5 s cut
 * back-ends of a 16x16 start under CI's load). */
#define HANDSHAKE_MS 10000

/* On an event connection, the byte a parent sends its children before an
 * orderly end (docs/protocol.md 8.2): the connection's end is then no failure. */
#define TB_EVENT_BYE 'B'
/* The byte the FE sends a child before it closes the child's event
 * connection (fenced, failed in the view, or a bad message): the child,
 * woken from a stop say, then knows the FE alive, not its end the
 * session's (tb_eds_drop_watch). */
#define TB_EVENT_FENCED 'X'
/* From the FE to a child, a u32 after each (docs/protocol.md 8.7): 'G', how
 * long (ms) the tree holds when the FE's connections end without a word
 * (its grace; 0: the session ends with it); 'D', the FE detaches on purpose
 * and the tree holds this long for a new one (0: until one comes). */
#define TB_EVENT_GRACE 'G'
#define TB_EVENT_DETACH 'D'
/* A heartbeat on an event connection. */
#define TB_EVENT_BEAT 'H'
/* A node whose plug-in filter hung (eds_watch.c): to its parent 'F', a u32
 * length and a FILTER_FAULT control message's payload; to its children 'P'
 * and the stream (u32), whose input they must not hand on. */
#define TB_EVENT_FAULT 'F'
#define TB_EVENT_POISON 'P'
/* The parent's answer to 'F', once its reactor has taken the report (before
 * it can see the child's data connection end and close the wave without it). */
#define TB_EVENT_FAULT_TAKEN 'K'
/* After an adoption, the event connection to the new parent waits this long
 * (at most a quarter of the heartbeat timeout), plus up to as much again by
 * rank: see events_delay(). */
#define TB_EVENTS_AFTER_ADOPTION_MS 40

enum { K_LISTEN, K_PENDING, K_EVENT, K_PIDFD, K_CLAIM };

/* A watch is complete before add_watch publishes it; after that only the
 * EDS thread changes it (and reads it but for e->all's links, walked under
 * e->mu). */
typedef struct watch {
    tb_io_t io;                /* in the EDS's loop (io.fd is fd; io.arg the EDS) */
    tb_timer_t timer;          /* K_PENDING: the handshake's deadline; K_CLAIM:
                                  the claim's (eds_fe.c) */
    int kind;
    int fd;
    tbon_rank_t rank;
    pid_t pid;
    tb_auth_srv_t *auth;
    struct watch *next;        /* in the list of all watches */
    int dead;
    int64_t heard;             /* K_EVENT: when the peer last sent anything (ms) */
    int suspected;             /* K_EVENT: silent past the timeout (eds.c, silent()) */
    int64_t suspected_at;      /* since when (ms) */
    int64_t looked;            /* heartbeats(): the turn that last looked at it */
    int link_quiet;            /* K_EVENT: its kernel has acknowledged nothing for
                                  this long (ms), past the acknowledgement timeout;
                                  0: the link is fine (eds.c, link_look()); local
                                  health does not discount it */
    /* K_EVENT: a message read in part (eds_watch.c, tb_eds_scan_events) */
    uint8_t ev_hdr[5];
    uint8_t ev_hdr_have;
    uint8_t *ev_msg;
    uint32_t ev_need, ev_have;
} watch_t;

/* A message from the reactor (tb_eds_report, tb_eds_join, tb_eds_expect,
 * tb_eds_request_adoption): queued in the EDS loop's mailbox, applied on
 * the EDS thread (tb_eds_apply_reports, the loop's drain). */
enum eds_mail_kind { M_REPORT, M_EXPECT, M_ADOPT, M_FAULT_TAKEN,
                     /* from the adopter thread (eds_adopt.c) */
                     M_ADOPTED, M_PARENT_EVENTS, M_ADOPT_FAILED,
                     /* FE: tb_eds_detach (port: how long the tree waits) */
                     M_DETACH };
struct eds_mail {
    tb_mail_t mail;            /* first */
    enum eds_mail_kind what;
    tb_eds_rep_kind_t kind;    /* M_REPORT */
    tbon_rank_t r, p;          /* r: the rank (M_ADOPT: the lost parent) */
    uint32_t inc, lid, port;
    tb_role_t role;
    char *host;
    int fd;                    /* M_ADOPTED, M_PARENT_EVENTS: taken over (-1: none) */
    uint64_t us[2];            /* M_ADOPTED: recovery times */
    int last;                  /* the adopter thread's last word */
    int gone;                  /* M_PARENT_EVENTS: the new parent refused the
                                  connection: nobody listens there any more */
};

/* Threads: the EDS thread owns everything here unless a field says
 * otherwise. The reactor (the node's thread, or for a back-end whoever
 * drives it) reaches the EDS through its loop's mailbox (struct eds_mail)
 * and the atomics; it reads only what is under mu. Fields set before the
 * thread starts (node, rank, role, session, loop) do not change. */
struct tb_eds {
    tb_node_t *node;
    tb_topology_t *topo;       /* a private copy, the EDS thread's: the reactor's
                                  reports reach it as messages; written under mu,
                                  which the adopter thread takes to copy it */
    tbon_rank_t rank;
    tb_role_t role;
    tb_session_t session;
    tb_loop_t *loop;           /* net/loop.h: watches, timers, the mailbox */
    /* eds.c's dispatch of a watch's events and handshake deadline, given
     * to each watch eds_io.c adds */
    void (*watch_io)(tb_io_t *io, uint32_t events);
    void (*handshake_timer)(tb_timer_t *t, int64_t now);
    pthread_t thread;
    int running;               /* the thread that owns the node (start, stop) */
    pthread_mutex_t mu;
    watch_t *all;              /* list links under mu */
    uint8_t *data_seen;        /* per rank of the topology */
    uint8_t *event_seen;       /* the same */
    pid_t *reaped;             /* under mu (tb_eds_reaped) */
    size_t nreaped, capreaped;
    atomic_int stop;
    atomic_int fe_gone;        /* the FE's event connection ended, not fencing
                                  us: the session's end (tb_eds_fe_gone) */
    atomic_uint gone_parent;   /* rank + 1 of the last parent given up
                                  (tb_eds_parent_down, tb_eds_parent_gone) */
    atomic_ullong parent_watch; /* (parent rank + 1) << 32 | fd of the parent's
                                   event connection while watched, else 0
                                   (eds_io.c; tb_eds_parent_gone looks at it) */
    /* Fault tolerance (seed 003 V-A): the reconfigurator runs here. */
    tbon_rank_t parent;        /* the current parent (its event connection) */
    uint32_t incarnation;
    atomic_int ft_ready;       /* the tree is up and every port is known */
    int adopt_want;            /* 1 + the lost parent the reactor asked an
                                  adoption for (M_ADOPT), or 0 */
    uint32_t adopt_want_inc;   /* our incarnation as the reactor saw the loss */
    uint32_t adopt_inc;        /* the incarnation the last adoption job gives
                                  us (0 after one failed): a loss the reactor
                                  saw below it was of a link it replaces */
    uint8_t *expect;           /* per rank: an adopted child may open events */
    atomic_int leaving;        /* an orderly end: tell the children, adopt nobody */
    int bye_sent;
    int parent_bye;            /* the parent said it leaves: its end is no failure */
    int fenced;                /* the parent fenced us (TB_EVENT_FENCED) */
    atomic_int hb_ms;          /* heartbeat timeout (0: none); a beat every quarter */
    int hb_seen;               /* EDS thread: hb_ms at its last look */
    int hb_on;                 /* EDS thread: heartbeats were on at its last look */
    int64_t next_beat;         /* when the timer beats, unless the parent's beat comes */
    int64_t last_beat;
    int64_t hb_due;            /* when the heartbeat timer was due (its lateness
                                  says the EDS was starved) */
    int ack_conf;              /* TBON_ACK_TIMEOUT_MS: -1 the default (a third of
                                  the heartbeat timeout), 0 off */
    int adopt_delay_ms;        /* TBON_TEST_ADOPT_DELAY_MS (tests only): an orphan
                                  waits this long before it asks anyone */
    int adopt_stall_ms;        /* TBON_TEST_ADOPT_STALL_MS (tests only): an orphan
                                  leaves its first candidate's answer unread this
                                  long, then gives up on it */
    int lh;                    /* local health: timeouts are (1 + lh) x hb_ms */
    int64_t lh_since;          /* its last change (ms) */
    atomic_int verdicts;       /* the node can hear the FE's verdicts (notice.c):
                                  silence waits for the FE's confirmation */
    tb_timer_t hb_timer;       /* the next beat, or the first silence to look at */
    pthread_t adopter;         /* the adopter thread (eds_adopt.c) */
    int adopter_up;            /* it runs (started by the EDS thread as it starts) */
    pthread_mutex_t amu;       /* job, between the EDS and the adopter thread */
    pthread_cond_t acv;
    struct adopt_job *job;     /* under amu: the adoption to run next */
    tb_adopt_index_t *aidx;    /* EDS thread: the adopters of topo, kept up to
                                  date (topo/reconfig.h), for the first plan */
    /* A back-end's adoption runs on the EDS thread (eds_adopt.c, adopt_here):
     * the event connection to its new parent, due at ev_timer */
    tb_timer_t ev_timer;
    tbon_rank_t ev_p;
    uint16_t ev_port;
    uint32_t ev_inc;
    char ev_host[TB_ADOPT_HOST_MAX];
    int adopting;              /* EDS thread: a job given, its last word not heard */
    int adopt_next;            /* 1 + a parent lost while it ran: adopt after it */
    unsigned accept_paused;    /* times accepting paused for want of fds or memory
                                  since it last succeeded (eds.c, on_listen) */
    int grave[8];              /* the lost parent's event connections, closed later */
    int ngrave;
    /* The reactor's plug-in calls (eds_watch.c) */
    atomic_int fw_want;        /* a plug-in is loaded: watch n->fw */
    int fw_on, fw_fired;
    tb_timer_t watch_timer;    /* filter calls and memory (eds_watch.c) */
    int64_t fw_due;            /* when watch_timer was due */
    int64_t fw_call;           /* the call looked at (its since) */
    int64_t fw_grace;          /* ms of it this thread was kept from running
                                  (paused, starved): not held against it */
    int64_t fw_last, fw_cpu;   /* the last look: when, and the process's CPU ms */
    uint32_t hung[8];          /* under mu: streams whose filter hung above us */
    int64_t mem_mark, mem_next;/* MiB: the mark, and the next warning's */
    int64_t mem_due;
    size_t nhung;
    /* The front-end's absence (eds_fe.c): what it said, and the hold */
    atomic_int fe_grace_ms;    /* 'G': the tree holds this long after the FE's end */
    int detached;              /* 'D': the FE detached on purpose ... */
    uint32_t detach_ms;        /* ... and the tree holds this long (0: no limit) */
    atomic_int headless;       /* our parent the FE is gone and we wait for a new
                                  one (tb_eds_headless) */
    tb_timer_t hold_timer;     /* the end of the wait */
    watch_t *claim;            /* K_CLAIM: the new FE that claimed us, until its
                                  word (where it listens) or its end */
    atomic_ullong view;        /* the view version the reactor last applied */
    atomic_int fe_grace_sent;  /* FE: the grace to tell each child's event
                                  connection as it comes ('G') */
    atomic_int detaching;      /* FE: tb_eds_detach: no 'X' as connections close */
    int detach_done;           /* under mu: the children were told (dcv) */
    int64_t detach_until;      /* the detach waits for children's event
                                  connections until then (ms) */
    uint32_t detach_hold;
    tb_timer_t detach_timer;
    pthread_cond_t dcv;
};

/* Between eds.c and eds_adopt.c (EDS thread, unless said otherwise): */
watch_t *tb_eds_add_watch(tb_eds_t *e, int kind, int fd, uint32_t events, tbon_rank_t rank,
                          pid_t pid);
void tb_eds_drop_watch(tb_eds_t *e, watch_t *w);
void tb_eds_post(tb_eds_t *e, tb_cmd_t *c);
/* A child's end while the node shuts down (tb_eds_leave): the reactor is
 * not woken for it. It waits for the children's data connections to end,
 * which wake it on their own; each of these wake-ups was a thread switch
 * per child (64 per commnode at a teardown of 32x32, where 93e5160's
 * commnode had 8). */
void tb_eds_post_child_end(tb_eds_t *e, tb_cmd_t *c);
void tb_eds_apply_reports(tb_eds_t *e);
/* The loop's drain: apply what the reactor sent. */
void tb_eds_on_mail(void *arg, tb_mail_t *list);
/* Start the adopter thread (the EDS thread, as it starts); 0 or TBON_ENOMEM. */
int tb_eds_start_adopter(tb_eds_t *e);
/* The adopter thread, after e->stop is set: woken to see it (any thread),
 * and ended (the thread that stops the EDS). */
void tb_eds_wake_adopter(tb_eds_t *e);
void tb_eds_join_adopter(tb_eds_t *e);
void tb_eds_parent_down(tb_eds_t *e, tbon_rank_t lost);
void tb_eds_say_bye(tb_eds_t *e);
/* eds_watch.c: after each batch, start watching the plug-in calls once one
 * is loaded; the bytes buf[0..n) read on event connection w: bit 1 if a BYE
 * was among them, bit 2 if a FENCED, -1 if w sent something malformed (drop
 * it), else 0. */
void tb_eds_filters_after_batch(tb_eds_t *e);
/* Arm the watch timer (memory) as the EDS thread starts. */
void tb_eds_watch_start(tb_eds_t *e);
/* Answer child rank's 'F' (its report reached our reactor). */
void tb_eds_say_fault_taken(tb_eds_t *e, tbon_rank_t rank);
int tb_eds_scan_events(tb_eds_t *e, watch_t *w, const uint8_t *buf, size_t n);
/* eds_fe.c: the FE, our parent, is gone (its event connection ended without
 * fencing us, or the reactor saw it go): 1 if the tree holds for a new FE
 * (headless now, or already), 0 if its end is the session's. */
int tb_eds_fe_end(tb_eds_t *e);
/* A 'G' or 'D' from parent w, with its value. */
void tb_eds_fe_said(tb_eds_t *e, watch_t *w, uint8_t what, uint32_t v);
/* A new FE's claim (purpose REATTACH, authentic): refused, or taken, with
 * what it needs sent (the topology and the view). */
void tb_eds_claim(tb_eds_t *e, watch_t *w);
/* The claim connection is readable: 1 with host and *port set when the FE
 * said where it listens (the watch is dropped), else 0. */
int tb_eds_claim_read(tb_eds_t *e, watch_t *w, char *host, size_t hostlen, uint16_t *port);
/* FE: a child's event connection was admitted: tell it the grace. */
void tb_eds_tell_grace(tb_eds_t *e, watch_t *w);
/* eds_adopt.c: be adopted by the new FE at host:port (a claim's word). */
void tb_eds_adopt_to(tb_eds_t *e, const char *host, uint16_t port);
int tb_eds_grow_seen(tb_eds_t *e, size_t old, size_t n);
int64_t tb_eds_events_delay(const tb_eds_t *e);

#endif
