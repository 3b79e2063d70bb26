/* ft_int.h - the fault-tolerance layer's parts, as objects, and what they
 * share. Nothing outside ft/ (and its unit tests) includes it: the node
 * holds ft's state as the opaque n->ftst (node/node_ft.h).
 *
 * Each part owns an opaque struct with the fields only it uses, made by
 * its _new and freed by its _destroy, and its functions are named for its
 * file:
 *   recovery.c  tb_recovery_t  the port table, reports, orphans, adoptions
 *   view.c      tb_view_t      view versions, acknowledgements, the
 *                              consistency check (per child: versions sent
 *                              and acknowledged, the check owed)
 *   join.c      tb_joins_t     joins and leaves (per child: joined, when it
 *                              must have connected)
 *   notice.c    tb_notice_t    failure notices and verdicts (UDP)
 *   suspect.c   tb_suspect_t   suspicions (the FE's list, its verdicts)
 *   attr.c      tb_attr_t      attribute replication
 *   eds*.c      tb_eds_t       the EDS thread (eds.h)
 * ops.c, the composer, makes them, owns them, and passes the node's events
 * to them (tb_ft_ops). The calls between parts run one way (docs/
 * architecture.md, "Every file, and which way its calls run"): ops.c calls
 * every part; recovery.c calls view.c, notice.c, suspect.c, join.c and
 * attr.c; view.c calls join.c; notice.c calls suspect.c. Each part is given
 * the parts below it at _new. What a lower part has to tell a higher one
 * (a failure found, a change for the view, a report to send up) goes
 * through tb_ft_up_t, which ops.c fills with the higher parts' functions.
 *
 * Every part reaches the node only through the handle in tb_ft_ctx_t
 * (node/node_ft.h, tb_nft_t): a unit test gives it a fake node.
 *
 * Threads: everything here belongs to the thread that drives the node
 * (node_int.h, "Threads"), except the EDS, which has its own state
 * (eds_int.h) and reaches the reactor through the node's mailbox only; its
 * pointer (ctx.eds) is written once by ft's start, before the node is
 * handed to any other thread, and not again until ft's free. */
#ifndef TB_FT_INT_H
#define TB_FT_INT_H

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ft/ft.h"
#include "util/ring.h"
#include "ft/eds.h"

typedef struct tb_recovery tb_recovery_t;
typedef struct tb_view tb_view_t;
typedef struct tb_joins tb_joins_t;
typedef struct tb_notice tb_notice_t;
typedef struct tb_suspect tb_suspect_t;
typedef struct tb_attr tb_attr_t;

/* The calls a part of ft makes to a part above it; arg is ctx.up_arg. */
typedef struct tb_ft_up {
    /* recovery.c (tb_recovery_apply and the rest say what each does) */
    int  (*apply)(void *arg, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc);
    void (*confirm)(void *arg, const tb_vchange_t *ch, size_t k);
    void (*failed)(void *arg, tbon_rank_t r, uint32_t inc, const char *how);
    void (*report)(void *arg, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc);
    void (*child_lost)(void *arg, size_t i);
    void (*send_ports_to)(void *arg, size_t i);
    /* view.c */
    void (*view_note)(void *arg, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc);
    void (*view_note_change)(void *arg, const tb_vchange_t *c);
    int  (*view_applied)(void *arg, tbon_rank_t p, uint64_t v);
    void (*view_orphan_heard)(void *arg, tbon_rank_t r);
    /* notice.c */
    void (*notice_send)(void *arg, int kind, tbon_rank_t r, uint32_t inc);
    void (*notice_verdict)(void *arg, const void *addr, socklen_t alen, tbon_rank_t r,
                           uint32_t inc, int verdict);
} tb_ft_up_t;

/* What every part reads: the node, the calls up, the EDS; and two facts
 * recovery.c alone writes. */
typedef struct tb_ft_ctx {
    tb_nft_t   nd;            /* the node (nd.heartbeat_ms: recovery.c sets the
                                 port table's when it comes) */
    const tb_ft_up_t *up;
    void      *up_arg;
    tb_eds_t  *eds;           /* the EDS thread; NULL with given links */
    int        ready;         /* the port table arrived: orphans get adopted
                                 (until an adoption fails) */
} tb_ft_ctx_t;

/* The node's calls, short. */
static inline int tb_ft_life(const tb_ft_ctx_t *cx)
{
    return cx->nd.ops->life(cx->nd.n);
}
static inline int tb_ft_ending(const tb_ft_ctx_t *cx)
{
    return tb_ft_life(cx) == TB_NFT_ENDING;
}
static inline int tb_ft_is_fe(const tb_ft_ctx_t *cx)
{
    return cx->nd.role == TB_ROLE_FE;
}
static inline size_t tb_ft_nchild(const tb_ft_ctx_t *cx)
{
    return cx->nd.ops->nchild(cx->nd.n);
}
/* A child counts for acknowledgements, checks and joins while its
 * connection is open. */
static inline int tb_ft_counted(const tb_ft_ctx_t *cx, size_t i)
{
    return (cx->nd.ops->child_flags(cx->nd.n, i) & TB_NFT_OPEN) != 0;
}
static inline int tb_ft_has_conn(const tb_ft_ctx_t *cx, size_t i)
{
    return (cx->nd.ops->child_flags(cx->nd.n, i) & TB_NFT_CONN) != 0;
}
static inline void tb_ft_send(const tb_ft_ctx_t *cx, int to, int op, tbon_packet_t *p)
{
    cx->nd.ops->send_ctl(cx->nd.n, to, op, p);
}
static inline void tb_ft_emit(const tb_ft_ctx_t *cx, tbon_event_type_t type, tbon_rank_t r,
                              tbon_rank_t p, uint32_t inc, uint64_t version)
{
    cx->nd.ops->emit(cx->nd.n, type, r, p, inc, version);
}

/* Element i (of elem bytes) of a part's per-child array *arrp of *n
 * elements, grown (doubling, zeroed) to reach it; NULL out of memory. A
 * child's slot index never moves (the node only adds slots), so a part
 * keeps its per-child state by slot and grows it on first use. */
static inline void *tb_ft_slot(void *arrp, size_t *n, size_t elem, size_t i)
{
    uint8_t **a = arrp;
    if (i >= *n) {
        size_t nn = i + 1 > 2 * *n ? i + 1 : 2 * *n;
        uint8_t *v = realloc(*a, nn * elem);
        if (!v)
            return NULL;
        memset(v + *n * elem, 0, (nn - *n) * elem);
        *a = v;
        *n = nn;
    }
    return *a + i * elem;
}

/* ---- ops.c: the composer ---- */
/* ft's state in one node: every part made over a copy of nd and wired up;
 * no EDS (ft_start starts it on a real node). NULL out of memory. */
struct tb_ft *tb_ft_new(const tb_nft_t *nd);
void tb_ft_destroy(struct tb_ft *ft);
/* The context the parts share (its ready flag, its EDS). */
tb_ft_ctx_t *tb_ft_ctx(struct tb_ft *ft);
/* A node event, to the part it concerns (tb_ft_ops_t.event's result). */
int  tb_ft_event(struct tb_ft *ft, const tb_ft_event_t *ev);
/* A control message ft owns, to its owner (codec/ctl.c's table). */
void tb_ft_ctl(struct tb_ft *ft, int child, const tb_ctl_msg_t *m, tbon_packet_t *p);
/* The parts' timers (1 if one acted: the node's state changed), and the
 * earliest time one wants. */
int  tb_ft_timers(struct tb_ft *ft, int64_t now);
void tb_ft_next(const struct tb_ft *ft, int64_t *next);

/* ---- recovery.c ---- */
/* recovery.c calls view, notice, suspect, joins and attr. */
tb_recovery_t *tb_recovery_new(tb_ft_ctx_t *cx, tb_view_t *v, tb_notice_t *nt,
                               tb_suspect_t *sp, tb_joins_t *jn, tb_attr_t *at);
void tb_recovery_destroy(tb_recovery_t *rc);
/* The tree is up: the port table to every child. */
void tb_recovery_send_ports(tb_recovery_t *rc);
/* The port table to one (joined or adopted) child. */
void tb_recovery_send_ports_to(tb_recovery_t *rc, size_t i);
/* A report of ours (kind: TB_V_FAILED, TB_V_ADOPTED, TB_V_JOINED or
 * TB_V_LEFT; on the wire the same numbers) up to the FE, kept until a view
 * brings it back. */
void tb_recovery_report(tb_recovery_t *rc, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc);
/* Control messages TB_CTL_OWN_FT (child TB_NFT_PARENT: from the parent). */
void tb_recovery_ctl(tb_recovery_t *rc, int child, const tb_ctl_msg_t *m, tbon_packet_t *p);
/* The parent (rank lost) is gone: 1 if we stay as an orphan seeking an
 * adopter, 0 if the node must leave. */
int  tb_recovery_parent_lost(tb_recovery_t *rc, tbon_rank_t lost);
int  tb_recovery_orphan(const tb_recovery_t *rc);
/* An orphan not yet adopted tells the FE, once, that it is still looking
 * (its failure notice); then (after the dispatch) *next lowered to when. */
int  tb_recovery_timers(tb_recovery_t *rc, int64_t now);
void tb_recovery_next(const tb_recovery_t *rc, int64_t *next);
/* A child's connection ended after start-up: its failure reported. */
void tb_recovery_child_lost(tb_recovery_t *rc, size_t i);
/* An orphan keeps what would go up (takes p). */
void tb_recovery_buffer(tb_recovery_t *rc, uint32_t stream, tbon_packet_t *p, int more,
                        uint64_t key);
/* What an orphan has buffered: packets, and the bytes counted against its
 * bound; packets dropped past it. */
void tb_recovery_buffered(const tb_recovery_t *rc, size_t *npkt, size_t *bytes,
                          size_t *dropped);
/* TB_CMD_ADOPTED, TB_CMD_ADOPT_FAILED (orphan), TB_CMD_ADOPT_CONN (adopter). */
void tb_recovery_adopted(tb_recovery_t *rc, tb_cmd_t *c);
void tb_recovery_adopt_failed(tb_recovery_t *rc);
void tb_recovery_adopt_conn(tb_recovery_t *rc, tb_cmd_t *c);
/* Apply a change (enum tb_vkind: TB_V_FAILED or TB_V_LEFT of r, both dead
 * from now on, or TB_V_ADOPTED of r by p) to our topology and the EDS's; 1
 * if it was news (at the FE it then goes into the next view as that kind). */
int  tb_recovery_apply(tb_recovery_t *rc, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc);
/* A view brought these changes: reports of ours they cover are done. */
void tb_recovery_confirm(tb_recovery_t *rc, const tb_vchange_t *ch, size_t k);
/* Reports kept until a view brings them back. */
size_t tb_recovery_held(const tb_recovery_t *rc);
/* FE: a failure learned first hand (a notice, an orphan that never came
 * back): applied, announced (TBON_EV_NODE_FAILED) and put in the view. */
void tb_recovery_failed(tb_recovery_t *rc, tbon_rank_t r, uint32_t inc, const char *how);

/* The unit of the FE's deadlines for an orphan's adoption (view.c), for a
 * heartbeat timeout of hb ms (0: none): the timeout, at least a second;
 * 10 s without heartbeats. */
static inline int64_t tb_orphan_unit_ms(int hb)
{
    if (hb <= 0)
        return 10000;
    return hb > 1000 ? hb : 1000;
}

/* ---- view.c ---- */
/* view.c calls join.c. */
tb_view_t *tb_view_new(tb_ft_ctx_t *cx, tb_joins_t *jn);   /* version 1 */
void tb_view_destroy(tb_view_t *v);
uint64_t tb_view_version(const tb_view_t *v);
/* The version our whole subtree has applied. */
uint64_t tb_view_subtree(const tb_view_t *v);
/* FE: a change for the next view version. */
void tb_view_note(tb_view_t *v, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc);
void tb_view_note_change(tb_view_t *v, const tb_vchange_t *c);
/* After each dispatch: publish what is due, acknowledge what is new. */
void tb_view_flush(tb_view_t *v);
/* FE: declare failed the orphans that waited too long (before a dispatch);
 * then (after it, when the orphans are counted) lower *next to when the
 * next batch or orphan is due. */
int  tb_view_timers(tb_view_t *v, int64_t now);
void tb_view_next(const tb_view_t *v, int64_t *next);
/* FE: orphan r has said that it is alive and looking for an adopter (its
 * failure notice about its parent): it gets the longer deadline. */
void tb_view_orphan_heard(tb_view_t *v, tbon_rank_t r);
/* Membership control messages (TB_CTL_OWN_VIEW), m decoded from p. */
void tb_view_ctl(tb_view_t *v, int child, const tb_ctl_msg_t *m, tbon_packet_t *p);
/* Child i's connection ended. */
void tb_view_child_gone(tb_view_t *v, size_t i);
/* Slot i has a new process (joined, restarted): it has said nothing yet. */
void tb_view_child_reset(tb_view_t *v, size_t i);
/* Slot i counts for views from our version on (a child we launch). */
void tb_view_child_known(tb_view_t *v, size_t i);
/* We were adopted, or joined: our versions go up, and we ask for the rest. */
void tb_view_adopted(tb_view_t *v);
/* FE app: start consistency check id. */
void tb_view_check(tb_view_t *v, uint64_t id);
/* Has parent p (its subtree, seen from here) applied version ver? */
int  tb_view_applied(const tb_view_t *v, tbon_rank_t p, uint64_t ver);
/* The digest the consistency check compares: every rank's liveness and,
 * for the alive ones, parent, incarnation, role, host and local id. Dead
 * nodes' incarnations are left out: they may legitimately differ (a report
 * that reached only part of the tree before its sender died). O(size). */
uint64_t tb_view_digest(const tb_topology_t *t);

/* ---- join.c ---- */
tb_joins_t *tb_joins_new(tb_ft_ctx_t *cx);
void tb_joins_destroy(tb_joins_t *j);
/* Apply join c (a new node, or a restarted one) to our copies, taking it as
 * a child slot if its parent is us (*slot: its index, else -1). 1 if
 * applied, 0 if we have it, -1 if it cannot be (not the next rank, out of
 * memory). */
int  tb_joins_add(tb_joins_t *j, const tb_vchange_t *c, int *slot);
/* FE: a back-end (or commnode) asks to join on c's fd (TB_CMD_JOIN_CONN).
 * 1 if taken: its change went to the view, *slot as tb_joins_add. */
int  tb_joins_request(tb_joins_t *j, tb_cmd_t *c, int *slot);
/* FE: view version v was published: the joiners waiting for one have it. */
void tb_joins_published(tb_joins_t *j, uint64_t v);
/* FE: answer the joiners whose parents have their version; give up on
 * those past their deadline. */
int  tb_joins_replies(tb_joins_t *j);
/* Joined children that never connected are failed; FE: joiners answered. */
int  tb_joins_timers(tb_joins_t *j, int64_t now);
void tb_joins_next(const tb_joins_t *j, int64_t *next);
/* Child i connected: if it joined, it gets the port table and the broadcast
 * streams, and its joining is reported. */
void tb_joins_child_up(tb_joins_t *j, size_t i);
/* A child that said it leaves has gone: not a failure. */
void tb_joins_left(tb_joins_t *j, size_t i);
/* FE: reports of kinds TB_V_JOINED and TB_V_LEFT. */
void tb_joins_fe_joined(tb_joins_t *j, tbon_rank_t r, tbon_rank_t parent);
void tb_joins_fe_left(tb_joins_t *j, tbon_rank_t r, uint32_t inc);
/* FE: joiners waiting for their answer. */
size_t tb_joins_pending(const tb_joins_t *j);

/* ---- notice.c: the fast failure notice, suspicions' datagrams ---- */
/* notice.c calls suspect.c. */
enum tb_notice_kind { TB_NOTICE_FAILED, TB_NOTICE_SUSPECT, TB_NOTICE_ALIVE, TB_NOTICE_VERDICT };
enum tb_verdict { TB_VERDICT_SUSPECTED = 1, TB_VERDICT_FAILED, TB_VERDICT_CLEARED };
/* A notice's size on the wire. */
#define TB_NOTICE_SIZE 72
tb_notice_t *tb_notice_new(tb_ft_ctx_t *cx, tb_suspect_t *sp);
void tb_notice_destroy(tb_notice_t *nt);
/* FE: open the notice socket on the UDP port of our TCP port (*lfd, *port:
 * the listening socket, replaced by another if that UDP port is taken). 0,
 * or TBON_EIO with a warning. */
int  tb_notice_open(tb_notice_t *nt, int *lfd, uint16_t *port);
/* Not at the FE: the port table arrived: where notices go. */
void tb_notice_setup(tb_notice_t *nt);
/* A notice of kind about r (inc: its incarnation) to the FE (not at the FE). */
void tb_notice_send(tb_notice_t *nt, int kind, tbon_rank_t r, uint32_t inc);
/* Tell the FE directly that r (incarnation inc) failed (seed 002 section 3,
 * "high priority monitoring"). */
void tb_notice_failed(tb_notice_t *nt, tbon_rank_t r, uint32_t inc);
/* FE: answer a notice's sender (addr) with the verdict on r. */
void tb_notice_verdict(tb_notice_t *nt, const void *addr, socklen_t alen, tbon_rank_t r,
                       uint32_t inc, int verdict);
/* One datagram b[0..len) from src, as the socket hands it over. */
void tb_notice_take(tb_notice_t *nt, const uint8_t *b, size_t len,
                    const struct sockaddr_storage *src, socklen_t slen);
/* Sign a notice into b[TB_NOTICE_SIZE] as rank `from` (incarnation
 * from_inc) would, with sequence seq (tests). */
void tb_notice_encode(uint8_t *b, const tb_session_t *s, int kind, int verdict,
                      tbon_rank_t from, uint32_t from_inc, tbon_rank_t r, uint32_t inc,
                      uint64_t seq);

/* ---- suspect.c: suspicion ---- */
tb_suspect_t *tb_suspect_new(tb_ft_ctx_t *cx);
void tb_suspect_destroy(tb_suspect_t *sp);
/* How long a suspicion stands before it is confirmed (ms). */
int  tb_suspect_window_ms(const tb_suspect_t *sp);
/* Our EDS found r silent (on) or speaking again (off): TB_CMD_SUSPECT. */
void tb_suspect_cmd(tb_suspect_t *sp, tbon_rank_t r, int on, int silent_ms);
/* FE: observer from suspects r (on) or heard it again (off); addr: where to
 * send the verdict (NULL: the FE itself observed). */
void tb_suspect_fe(tb_suspect_t *sp, tbon_rank_t r, uint32_t inc, tbon_rank_t from, int on,
                   const void *addr, socklen_t alen);
/* Not at the FE: the FE's verdict on r arrived. */
void tb_suspect_verdict(tb_suspect_t *sp, tbon_rank_t r, uint32_t inc, int verdict);
/* FE: confirm what has stood long enough; the next time to look. */
int  tb_suspect_timers(tb_suspect_t *sp, int64_t now);
void tb_suspect_next(const tb_suspect_t *sp, int64_t *next);
/* r is dead (in the view): its suspicion ends with it. */
void tb_suspect_forget(tb_suspect_t *sp, tbon_rank_t r);
/* FE: the observers of r's suspicion (0: none). */
size_t tb_suspect_observers(const tb_suspect_t *sp, tbon_rank_t r);

/* ---- attr.c: attribute replication ---- */
tb_attr_t *tb_attr_new(tb_ft_ctx_t *cx);
void tb_attr_destroy(tb_attr_t *at);
/* A back-end writes key (value NULL: deletes it); the change goes up. */
void tb_attr_set(tb_attr_t *at, const char *key, const char *value);
void tb_attr_ctl(tb_attr_t *at, int child, const tb_ctl_msg_t *m, tbon_packet_t *p);
/* Adopted: our map, and those of our subtree, go up again. */
void tb_attr_resync(tb_attr_t *at);

#endif
