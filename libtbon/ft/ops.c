/* ops.c - the fault-tolerance layer's table for the node (node_int.h,
 * tb_ft_ops_t): ft's state made and freed, the node's events and the
 * control messages and commands ft owns taken apart to recovery.c,
 * view.c, notice.c, join.c and attr.c, the loop's hooks, and the EDS's
 * services. Every node is created with it (tb_node_config_t.ft). */
#include "ft/ft_int.h"

#include <stdlib.h>
#include <unistd.h>

#include "util/error.h"

/* The composer's wiring: what the lower parts of ft tell the higher ones
 * (ft_int.h, tb_ft_up_t). */
static const tb_ft_up_t up = {
    .apply = tb_ft_apply,
    .confirm = tb_ft_confirm,
    .failed = tb_ft_failed,
    .report = tb_ft_report,
    .child_lost = tb_ft_child_lost,
    .send_ports_to = tb_ft_send_ports_to,
    .view_note = tb_view_note,
    .view_note_change = tb_view_note_change,
    .notice_send = tb_notice_send,
    .notice_verdict = tb_notice_verdict,
};

static int ft_start(tb_node_t *n, tbon_error_t *err)
{
    struct tb_ft *ft = calloc(1, sizeof *ft);
    if (!ft || (n->role == TB_ROLE_FE && !(ft->fe = calloc(1, sizeof *ft->fe)))) {
        free(ft);
        return tb_error_set(err, TBON_ENOMEM, "out of memory");
    }
    ft->up = &up;
    ft->nfd = -1;
    n->ftst = ft;
    tb_view_init(n);
    if (n->cfg.given_links)
        return 0;       /* node.h, "Given links": no notices, no EDS thread */
    if (n->role == TB_ROLE_FE)
        tb_view_open_notices(n);
    ft->eds = tb_eds_start(n, n->lfd, n->cfg.parent_event_fd, n->topo, n->rank, &n->cfg.session,
                           err);
    if (!ft->eds)
        return err && err->code ? err->code : TBON_ENOMEM;
    n->lfd = -1;   /* the EDS owns it now */
    return 0;
}

static void ft_stop(tb_node_t *n)
{
    if (n->ftst)
        tb_eds_stop(n->ftst->eds);
}

static void ft_free(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    if (!ft)
        return;
    tb_eds_free(ft->eds);
    tb_ft_free(n);
    tb_view_free(n);
    tb_suspect_free(n);
    tb_attr_free(n);
    free(ft->fe);
    free(ft);
    n->ftst = NULL;
}

/* The commands ft owns (TB_FT_EV_CMD). */
static void on_cmd(tb_node_t *n, tb_cmd_t *c)
{
    struct tb_ft *ft = n->ftst;
    switch (c->op) {
    case TB_CMD_ADOPT_CONN:
        tb_ft_adopt_conn(n, c);
        break;
    case TB_CMD_ADOPTED:
        /* (the node has let go of the lost parent's data connection) */
        if (ft->orphan && !n->parent && !tb_node_ending(n))
            tb_ft_adopted(n, c);
        break;
    case TB_CMD_ADOPT_FAILED:
        if (ft->orphan) {
            tb_ft_adopt_failed(n, c->u.adopt_failed.lost);
            tb_node_parent_lost(n, "no node would adopt us");
        }
        break;
    case TB_CMD_CHECK:
        tb_view_check(n, c->u.check.id);
        break;
    case TB_CMD_SUSPECT:
        tb_suspect_cmd(n, c->u.suspect.rank, c->u.suspect.on, c->u.suspect.silent_ms);
        break;
    case TB_CMD_ATTR:
        tb_attr_set(n, c->u.attr.key, c->u.attr.value);
        break;
    case TB_CMD_JOIN_CONN:
        tb_view_join(n, c);
        break;
    default:
        break;
    }
}

/* A node left out of the start-up (TB_FT_EV_MISSING, docs/protocol.md 7.1):
 * dead from now on, and its children under the node that launches them in
 * its place, at their next incarnation, as after an adoption. At the FE the
 * changes wait for the first view after the start-up (view.c). */
static void start_missing(tb_node_t *n, tbon_rank_t r, tbon_rank_t p, const tbon_rank_t *moved,
                          size_t k)
{
    size_t size = tb_topology_size(n->topo);
    tb_ft_apply(n, TB_V_FAILED, r, TBON_RANK_NONE, tb_topology_incarnation(n->topo, r));
    for (size_t j = 0; j < k; j++) {
        tbon_rank_t c = moved[j];
        if (c == 0 || c >= size || c == p)
            continue;
        tb_ft_apply(n, TB_V_ADOPTED, c, p, tb_topology_incarnation(n->topo, c) + 1);
        /* A slot of ours: it counts for views from the first, as a child
         * launched at once does (tb_view_init). */
        int i = tb_node_child_index(n, c);
        if (i >= 0) {
            n->child[i].v_known = 1;
            n->child[i].v_sent = n->child[i].v_acked = n->ftst->view;
        }
    }
}

static int ft_event(tb_node_t *n, const tb_ft_event_t *ev)
{
    struct tb_ft *ft = n->ftst;
    if (!ft)
        return 0;
    switch (ev->kind) {
    case TB_FT_EV_CMD:
        on_cmd(n, ev->u.cmd);
        break;
    case TB_FT_EV_TREE_UP:
        tb_ft_send_ports(n);
        break;
    case TB_FT_EV_JOINED:
        tb_view_adopted(n);
        break;
    case TB_FT_EV_LAUNCHED:
        tb_eds_watch_child(ft->eds, ev->u.launched.rank, ev->u.launched.pid);
        break;
    case TB_FT_EV_FILTER_LOADED:
        tb_eds_watch_filters(ft->eds);
        break;
    case TB_FT_EV_FAULT_TAKEN:
        tb_eds_fault_taken(ft->eds, ev->u.rank);
        break;
    case TB_FT_EV_PARENT_EVENTS:
        return tb_eds_watch_parent(ft->eds, ev->u.fd, n->parent_rank);
    case TB_FT_EV_PARENT_LOST:
        /* An orphan stays one until adopted (or given up: ADOPT_FAILED). */
        return ft->orphan || (ev->u.rank != TBON_RANK_NONE && tb_ft_parent_lost(n, ev->u.rank));
    case TB_FT_EV_ORPHAN_UP:
        if (!ft->orphan)
            return 0;
        tb_ft_buffer(n, ev->u.up.stream, ev->u.up.p, ev->u.up.more, ev->u.up.key);
        return 1;
    case TB_FT_EV_CHILD_GONE:
        tb_view_child_gone(n, ev->u.child);
        break;
    case TB_FT_EV_CHILD_LOST:
        tb_ft_child_lost(n, ev->u.child);
        break;
    case TB_FT_EV_CHILD_LEFT:
        tb_view_left(n, ev->u.child);
        break;
    case TB_FT_EV_CHILD_JOINED:
        tb_view_joined(n, ev->u.child);
        break;
    case TB_FT_EV_SHUTDOWN:
        tb_eds_leave(ft->eds);
        break;
    case TB_FT_EV_MISSING:
        start_missing(n, ev->u.missing.rank, ev->u.missing.parent, ev->u.missing.moved,
                      ev->u.missing.nmoved);
        break;
    }
    return 0;
}

/* Control messages by owner (codec/ctl.c's table). */
static void ft_ctl(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    const tb_ctl_info_t *info = tb_ctl_info(m->op);
    switch (info ? info->owner : -1) {
    case TB_CTL_OWN_FT:
        tb_ft_ctl(n, child, m, p);
        break;
    case TB_CTL_OWN_VIEW:
        tb_view_ctl(n, child, m, p);
        break;
    case TB_CTL_OWN_ATTR:
        tb_attr_ctl(n, child, m, p);
        break;
    default:
        break;
    }
}

static void ft_timers(tb_node_t *n, int64_t now)
{
    if (!n->ftst)
        return;
    tb_view_timers(n, now);
    tb_suspect_timers(n, now);
}

static void ft_next(const tb_node_t *n, int64_t *next)
{
    if (!n->ftst)
        return;
    tb_view_next(n, next);
    tb_suspect_next(n, next);
}

static void ft_flush(tb_node_t *n)
{
    if (n->ftst)
        tb_view_flush(n);
}

static int ft_ready(const tb_node_t *n)
{
    return n->ftst && n->ftst->ft_ready;
}

static int ft_reaped(tb_node_t *n, pid_t pid)
{
    return n->ftst && tb_eds_reaped(n->ftst->eds, pid);
}

const tb_ft_ops_t tb_ft_ops = {
    .start = ft_start,
    .stop = ft_stop,
    .free = ft_free,
    .event = ft_event,
    .ctl = ft_ctl,
    .timers = ft_timers,
    .next = ft_next,
    .flush = ft_flush,
    .ready = ft_ready,
    .reaped = ft_reaped,
};
