/* ft_int.h - the fault-tolerance layer's private state and the functions
 * its files share: recovery of orphans and reports (recovery.c), membership
 * views and the consistency check (view.c), failure notices (notice.c),
 * joins and leaves (join.c), attribute replication (attr.c), the EDS
 * (eds.h), and the node's way in (ops.c: tb_ft_ops). Nothing outside ft/
 * includes it: the node holds struct tb_ft as the opaque n->ftst.
 *
 * ft works on the node too (node/node_int.h: its links, children, streams,
 * topology), as the layer above it; what is ft's alone is here. */
#ifndef TB_FT_INT_H
#define TB_FT_INT_H

#include <sys/socket.h>

#include "ft/ft.h"
#include "util/ring.h"
#include "ft/eds.h"

/* What only the front-end's fault tolerance holds (f->fe; NULL in every
 * other node): the membership root's pending changes and orphans (view.c)
 * and the joins it answers (join.c). */
struct tb_ft_fe {
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
    /* suspicions (suspect.c): ranks some observer finds silent */
    struct tb_susp *susp;
    size_t     nsusp;
    uint64_t  *notice_seq;    /* per rank: the last notice sequence taken
                                 from it (replays are dropped) */
    size_t     nnotice_seq;
};

/* Fault tolerance's state in one node (n->ftst), made by tb_ft_ops.start
 * and freed by tb_ft_ops.free (ops.c).
 *
 * Threads: like the node's own fields, everything here belongs to the
 * thread that drives the node (node_int.h, "Threads") and is touched by no
 * other, with one exception: eds, which tb_ft_ops.arm reads from the
 * application's threads; it is written once by start, before the node is
 * handed to any other thread, and not again until free, when they are done
 * with the node. The EDS thread has its own state (eds_int.h) and reaches
 * the reactor through the node's mailbox only. Per child, the membership
 * fields (v_known, v_sent, v_acked, chk, joined, join_due, leaving) stay in
 * tb_child_t (node_int.h), also the driver's: they live with the child's
 * slot, which the node makes and grows, and the node reads or writes two
 * of them itself (docs/architecture.md, "Fault tolerance behind one
 * table"). */
/* The calls a part of ft makes to a part above it. ft's files run one way
 * (docs/architecture.md, "Every file, and which way its calls run"): ops.c,
 * the composer, calls recovery.c, which calls view.c (which calls join.c)
 * and notice.c (which calls suspect.c); what a lower part has to tell a
 * higher one (a failure found, a change for the view, a report to send up)
 * goes through this table, which ops.c fills once with the higher parts'
 * functions. No file names a function of a file above it. */
typedef struct tb_ft_up {
    /* recovery.c (the declarations below say what each does) */
    int  (*apply)(tb_node_t *n, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc);
    void (*confirm)(tb_node_t *n, const tb_vchange_t *ch, size_t k);
    void (*failed)(tb_node_t *n, tbon_rank_t r, uint32_t inc, const char *how);
    void (*report)(tb_node_t *n, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc);
    void (*child_lost)(tb_node_t *n, size_t i);
    void (*send_ports_to)(tb_node_t *n, tb_conn_t *c);
    /* view.c */
    void (*view_note)(tb_node_t *n, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc);
    void (*view_note_change)(tb_node_t *n, const tb_vchange_t *c);
    /* notice.c */
    void (*notice_send)(tb_node_t *n, int kind, tbon_rank_t r, uint32_t inc);
    void (*notice_verdict)(tb_node_t *n, const void *addr, socklen_t alen, tbon_rank_t r,
                           uint32_t inc, int verdict);
} tb_ft_up_t;

struct tb_ft {
    const tb_ft_up_t *up;     /* set by ops.c at start; read only */
    tb_eds_t  *eds;           /* the EDS thread; NULL with given links */
    struct tb_ft_fe *fe;      /* the FE's own part; NULL elsewhere */

    /* recovery (recovery.c) */
    int        ft_ready;      /* the port table arrived: orphans get adopted */
    int        orphan;        /* the parent is gone, an adopter is being sought */
    int        gave_up;       /* no node would adopt us: we leave */
    tbon_rank_t lost_parent;
    int64_t    orphan_since;  /* us */
    tb_ring_t  obuf;          /* what went up while orphaned */
    tb_ring_t  held;          /* reports sent up, not yet back in a view */
    size_t     obytes;
    size_t     odropped;      /* packets not buffered: past TB_OBUF_MAX */

    /* membership (view.c, notice.c) */
    uint64_t   view;          /* the view version applied here */
    uint64_t   view_sub;      /* the version this whole subtree has applied */
    uint64_t   view_up[2];    /* what went up last: applied, subtree (FE: the
                                 last version announced stable, in [1]) */
    tb_ring_t  vhist;         /* recent deltas (struct tb_vhist), oldest first */
    int        nfd;           /* UDP: the FE receives failure notices on it (in
                                 the node's loop: nfd_io), the others send
                                 them from it; -1: none */
    tb_io_t    nfd_io;
    uint64_t   notice_out;    /* the sequence of the last notice sent */
    uint64_t   verdict_in;    /* the sequence of the last verdict taken */
    int64_t    nt_win;        /* notice.c, within_budget(): the current window (ms) */
    uint32_t   nt_macs;       /* HMACs checked in it */
    uint16_t  *nt_from;       /* per sender rank: notices taken in it */
    size_t     nnt_from;
    uint64_t   nt_over;       /* notices dropped unchecked, over a budget */
    struct sockaddr_storage fe_addr; /* the FE's notice address */
    socklen_t  fe_addr_len;
    int        fe_addr_ok;
    uint64_t   chk_id;        /* the consistency check under way here */
    tbon_rank_t *chk_rank;    /* its answers so far: ranks, and whether they agree */
    uint8_t   *chk_ok;
    size_t     nchk, capchk;

    /* joins (join.c) */
    size_t     njoining;      /* child slots waiting for a joined child (join_due) */

    /* attributes (attr.c) */
    struct tb_attrs *attrs;   /* a back-end's own map (NULL until written) */
    int        attr_seen;     /* an attribute went up through here */
};

/* recovery.c */
void tb_ft_send_ports(tb_node_t *n);
/* The port table to one (joined) child. */
void tb_ft_send_ports_to(tb_node_t *n, tb_conn_t *c);
/* A report of ours (kind: TB_V_FAILED, TB_V_ADOPTED, TB_V_JOINED or TB_V_LEFT;
 * on the wire the same numbers) up to the FE, kept until a view brings it
 * back. */
void tb_ft_report(tb_node_t *n, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc);
void tb_ft_ctl(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p);
int  tb_ft_parent_lost(tb_node_t *n, tbon_rank_t lost);
void tb_ft_child_lost(tb_node_t *n, size_t i);
void tb_ft_buffer(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more,
                  uint64_t key);  /* takes p */
void tb_ft_adopted(tb_node_t *n, tb_cmd_t *c);
void tb_ft_adopt_failed(tb_node_t *n, tbon_rank_t lost);
void tb_ft_adopt_conn(tb_node_t *n, tb_cmd_t *c);
void tb_ft_free(tb_node_t *n);
/* Apply a change (enum tb_vkind: TB_V_FAILED or TB_V_LEFT of r, both dead
 * from now on, or TB_V_ADOPTED of r by p) to our topology and the EDS's; 1
 * if it was news (at the FE it then goes into the next view as that kind). */
int  tb_ft_apply(tb_node_t *n, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc);
/* A view brought these changes: reports of ours they cover are done. */
void tb_ft_confirm(tb_node_t *n, const tb_vchange_t *ch, size_t k);
/* FE: a failure learned first hand (a notice, an orphan that never came
 * back): applied, announced (TBON_EV_NODE_FAILED) and put in the view. */
void tb_ft_failed(tb_node_t *n, tbon_rank_t r, uint32_t inc, const char *how);

/* A back-end that asked the FE to join: it is told its rank and parent once
 * the parent has the view that adds it (it would be refused before). */
struct tb_pjoin {
    tbon_rank_t r, parent;
    int fd;
    uint64_t version;   /* the version that adds it (0: not yet made) */
    int64_t due;        /* given up then (ms) */
};

/* A call up (tb_ft_up_t) from a lower part of ft. */
static inline const tb_ft_up_t *tb_ft_up(const tb_node_t *n)
{
    return n->ftst->up;
}

/* A child counts for acknowledgements, checks and joins while its
 * connection is open. */
static inline int tb_child_counted(const tb_child_t *ch)
{
    return ch->conn && !ch->conn->closed;
}

/* view.c: views, their acknowledgements, the consistency check;
 * notice.c: failure notices; join.c: joins and leaves */
void tb_view_init(tb_node_t *n);
/* FE: a change for the next view version. */
void tb_view_note(tb_node_t *n, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc);
/* After each dispatch: publish what is due, acknowledge what is new. */
void tb_view_flush(tb_node_t *n);
/* FE: declare failed the orphans that waited too long (before a dispatch);
 * then (after it, when the orphans are counted) lower *next to when the
 * next batch or orphan is due. */
void tb_view_timers(tb_node_t *n, int64_t now);
void tb_view_next(const tb_node_t *n, int64_t *next);
/* Membership control messages (TB_CTL_OWN_VIEW), m decoded from p. */
void tb_view_ctl(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p);
/* A child's connection ended; we were adopted (send our versions up). */
void tb_view_child_gone(tb_node_t *n, size_t i);
void tb_view_adopted(tb_node_t *n);
/* The port table arrived: where failure notices go (non-FE), or the FE's
 * socket for them was opened at start-up. */
void tb_view_notice_setup(tb_node_t *n);
/* Tell the FE directly that r (incarnation inc) failed (seed 002 section 3,
 * "high priority monitoring"). */
void tb_view_notice(tb_node_t *n, tbon_rank_t r, uint32_t inc);
/* suspect.c: suspicion (seed 002 section 3; docs/fault-tolerance.md). */
enum tb_notice_kind { TB_NOTICE_FAILED, TB_NOTICE_SUSPECT, TB_NOTICE_ALIVE, TB_NOTICE_VERDICT };
enum tb_verdict { TB_VERDICT_SUSPECTED = 1, TB_VERDICT_FAILED, TB_VERDICT_CLEARED };
/* A notice of kind about r (inc: its incarnation) to the FE (not at the FE). */
void tb_notice_send(tb_node_t *n, int kind, tbon_rank_t r, uint32_t inc);
/* FE: answer a notice's sender (addr) with the verdict on r. */
void tb_notice_verdict(tb_node_t *n, const void *addr, socklen_t alen, tbon_rank_t r,
                       uint32_t inc, int verdict);
/* Our EDS found r silent (on) or speaking again (off): TB_CMD_SUSPECT. */
void tb_suspect_cmd(tb_node_t *n, tbon_rank_t r, int on, int silent_ms);
/* FE: observer from suspects r (on) or heard it again (off); addr: where to
 * send the verdict (NULL: the FE itself observed). */
void tb_suspect_fe(tb_node_t *n, tbon_rank_t r, uint32_t inc, tbon_rank_t from, int on,
                   const void *addr, socklen_t alen);
/* Not at the FE: the FE's verdict on r arrived. */
void tb_suspect_verdict(tb_node_t *n, tbon_rank_t r, uint32_t inc, int verdict);
/* FE: confirm what has stood long enough; the next time to look. */
void tb_suspect_timers(tb_node_t *n, int64_t now);
void tb_suspect_next(const tb_node_t *n, int64_t *next);
/* r is dead (in the view): its suspicion ends with it. */
void tb_suspect_forget(tb_node_t *n, tbon_rank_t r);
void tb_suspect_free(tb_node_t *n);
/* How long a suspicion stands before it is confirmed (ms). */
int  tb_suspect_window_ms(const tb_node_t *n);
/* FE: datagrams arrived on the notice socket. */
void tb_view_on_notices(tb_node_t *n);
/* FE: open the notice socket on our port (0, or TBON_EIO with a warning). */
int  tb_view_open_notices(tb_node_t *n);
/* FE: a back-end asks to join on c->fd. */
void tb_view_join(tb_node_t *n, tb_cmd_t *c);
/* A joined child connected (on_conn): it gets the port table and the
 * broadcast streams, and its joining is reported. */
void tb_view_joined(tb_node_t *n, size_t i);
/* A child that said it leaves has gone: not a failure. */
void tb_view_left(tb_node_t *n, size_t i);
/* Reports of kinds 4 (joined) and 5 (left), at the FE. */
void tb_view_fe_joined(tb_node_t *n, tbon_rank_t r, tbon_rank_t parent);
void tb_view_fe_left(tb_node_t *n, tbon_rank_t r, uint32_t inc);
/* FE app: start consistency check id. */
void tb_view_check(tb_node_t *n, uint64_t id);
/* Answer the check under way if no child still owes its part. */
void tb_view_check_progress(tb_node_t *n);
void tb_view_free(tb_node_t *n);
/* FE: change c goes into the next view version. */
void tb_view_note_change(tb_node_t *n, const tb_vchange_t *c);
/* join.c, for view.c: a view brought joined rank c (its slot here,
 * 1 if it is our child); the joiners whose parents now have their version
 * are answered; joiners that missed their deadline are given up. */
int  tb_join_add(tb_node_t *n, const tb_vchange_t *c);
void tb_join_replies(tb_node_t *n);
void tb_join_timeouts(tb_node_t *n, int64_t now);

/* attr.c: attribute replication (seed 002 section 4) */
/* A back-end writes key (value NULL: deletes it); the change goes up. */
void tb_attr_set(tb_node_t *n, const char *key, const char *value);
void tb_attr_ctl(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p);
/* Adopted: our map, and those of our subtree, go up again. */
void tb_attr_resync(tb_node_t *n);
void tb_attr_free(tb_node_t *n);

/* The digest the consistency check compares (view.c): every rank's
 * liveness and, for the alive ones, parent, incarnation, role, host and
 * local id. Dead nodes' incarnations are left out: they may legitimately
 * differ (a report that reached only part of the tree before its sender
 * died). O(size). */
uint64_t tb_view_digest(const tb_topology_t *t);

#endif
