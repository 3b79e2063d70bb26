/* ft.h - the fault-tolerance layer (seed 003 V-A; seed 000 section 3;
 * seed 002 sections 3-4): recovery of orphans and reports (recovery.c),
 * membership views and the consistency check (view.c), failure notices
 * (notice.c), joins and leaves (join.c), attribute replication (attr.c),
 * and the EDS (eds.h). It works on the node's state (node/node_int.h); the
 * node reaches it only through tb_ft_ops (node_int.h, tb_ft_ops_t). */
#ifndef TB_FT_H
#define TB_FT_H

#include "node/node_int.h"
#include "ft/eds.h"

/* The table every node is created with (tb_node_config_t.ft). */
extern const tb_ft_ops_t tb_ft_ops;

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
/* FE: datagrams arrived on the notice socket. */
void tb_view_on_notices(tb_node_t *n);
/* FE: open the notice socket on our port (0, or -1 with a warning). */
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
