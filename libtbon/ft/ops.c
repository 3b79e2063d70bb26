/* ops.c - the fault-tolerance layer's composer and its table for the node
 * (node/node_ft.h, tb_ft_ops_t). It makes ft's parts (ft_int.h: recovery,
 * view, joins, notice, suspect, attr, the EDS), owns them, wires the calls
 * up between them (tb_ft_up_t), and passes them the node's events, the
 * control messages and commands ft owns, and the loop's hooks. Every node
 * is created with it (tb_node_config_t.ft). The table's entries find ft's
 * state in the node and call tb_ft_event, tb_ft_ctl, tb_ft_timers and
 * tb_ft_next, which a unit test drives on a fake node of its own
 * (tests/unit/test_ft_ops.c). */
#include "ft/ft_int.h"
#include "util/hot.h"

#include <stdlib.h>
#include <unistd.h>

#include "util/error.h"

/* ft's state in one node (n->ftst, opaque there). */
struct tb_ft {
    tb_ft_ctx_t    cx;        /* what every part reads (cx.up_arg: this) */
    tb_recovery_t *rec;
    tb_view_t     *view;
    tb_joins_t    *joins;
    tb_notice_t   *notice;
    tb_suspect_t  *suspect;
    tb_attr_t     *attr;
};

/* ---- the calls up (tb_ft_up_t): what the lower parts tell the higher ---- */

static int up_apply(void *a, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    return tb_recovery_apply(((struct tb_ft *)a)->rec, kind, r, p, inc);
}
static void up_confirm(void *a, const tb_vchange_t *ch, size_t k)
{
    tb_recovery_confirm(((struct tb_ft *)a)->rec, ch, k);
}
static void up_failed(void *a, tbon_rank_t r, uint32_t inc, const char *how)
{
    tb_recovery_failed(((struct tb_ft *)a)->rec, r, inc, how);
}
static void up_report(void *a, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    tb_recovery_report(((struct tb_ft *)a)->rec, kind, r, p, inc);
}
static void up_child_lost(void *a, size_t i)
{
    tb_recovery_child_lost(((struct tb_ft *)a)->rec, i);
}
static void up_send_ports_to(void *a, size_t i)
{
    tb_recovery_send_ports_to(((struct tb_ft *)a)->rec, i);
}
static void up_view_note(void *a, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    tb_view_note(((struct tb_ft *)a)->view, kind, r, p, inc);
}
static void up_view_note_change(void *a, const tb_vchange_t *c)
{
    tb_view_note_change(((struct tb_ft *)a)->view, c);
}
static int up_view_applied(void *a, tbon_rank_t p, uint64_t v)
{
    return tb_view_applied(((struct tb_ft *)a)->view, p, v);
}
static void up_view_orphan_heard(void *a, tbon_rank_t r)
{
    tb_view_orphan_heard(((struct tb_ft *)a)->view, r);
}
static void up_notice_send(void *a, int kind, tbon_rank_t r, uint32_t inc)
{
    tb_notice_send(((struct tb_ft *)a)->notice, kind, r, inc);
}
static void up_notice_verdict(void *a, const void *addr, socklen_t alen, tbon_rank_t r,
                              uint32_t inc, int verdict)
{
    tb_notice_verdict(((struct tb_ft *)a)->notice, addr, alen, r, inc, verdict);
}

static const tb_ft_up_t up = {
    .apply = up_apply,
    .confirm = up_confirm,
    .failed = up_failed,
    .report = up_report,
    .child_lost = up_child_lost,
    .send_ports_to = up_send_ports_to,
    .view_note = up_view_note,
    .view_note_change = up_view_note_change,
    .view_applied = up_view_applied,
    .view_orphan_heard = up_view_orphan_heard,
    .notice_send = up_notice_send,
    .notice_verdict = up_notice_verdict,
};

/* ---- life ---- */

void tb_ft_destroy(struct tb_ft *ft)
{
    if (!ft)
        return;
    tb_eds_free(ft->cx.eds);
    tb_recovery_destroy(ft->rec);
    tb_view_destroy(ft->view);
    tb_joins_destroy(ft->joins);
    tb_notice_destroy(ft->notice);
    tb_suspect_destroy(ft->suspect);
    tb_attr_destroy(ft->attr);
    free(ft);
}

/* The parts, lowest first, each given the ones below it. */
struct tb_ft *tb_ft_new(const tb_nft_t *nd)
{
    struct tb_ft *ft = calloc(1, sizeof *ft);
    if (!ft)
        return NULL;
    ft->cx.nd = *nd;
    ft->cx.up = &up;
    ft->cx.up_arg = ft;
    tb_ft_ctx_t *cx = &ft->cx;
    if (!(ft->suspect = tb_suspect_new(cx)) || !(ft->notice = tb_notice_new(cx, ft->suspect)) ||
        !(ft->joins = tb_joins_new(cx)) || !(ft->view = tb_view_new(cx, ft->joins)) ||
        !(ft->attr = tb_attr_new(cx)) ||
        !(ft->rec = tb_recovery_new(cx, ft->view, ft->notice, ft->suspect, ft->joins,
                                    ft->attr))) {
        tb_ft_destroy(ft);
        return NULL;
    }
    return ft;
}

tb_ft_ctx_t *tb_ft_ctx(struct tb_ft *ft)
{
    return &ft->cx;
}

static int ft_start(tb_node_t *n, tbon_error_t *err)
{
    tb_nft_t made;
    tb_nft_make(n, &made);
    struct tb_ft *ft = tb_ft_new(&made);
    if (!ft)
        return tb_error_set(err, TBON_ENOMEM, "out of memory");
    tb_nft_set_state(n, ft);
    const tb_nft_t *nd = &ft->cx.nd;
    if (nd->given_links)
        return 0;       /* node.h, "Given links": no notices, no EDS thread */
    int lfd;
    uint16_t port;
    tb_nft_listener(n, &lfd, &port);
    if (nd->role == TB_ROLE_FE) {
        tb_notice_open(ft->notice, &lfd, &port);
        tb_nft_set_listener(n, lfd, port);
    }
    ft->cx.eds = tb_eds_start(n, lfd, nd->parent_event_fd, nd->topo, nd->rank, nd->session,
                              err);
    if (!ft->cx.eds)
        return err && err->code ? err->code : TBON_ENOMEM;
    tb_nft_set_listener(n, -1, port);   /* the EDS owns it now */
    if (nd->role == TB_ROLE_FE)
        tb_eds_set_grace(ft->cx.eds, nd->grace_ms);
    return 0;
}

static void ft_stop(tb_node_t *n)
{
    struct tb_ft *ft = tb_nft_state(n);
    if (ft)
        tb_eds_stop(ft->cx.eds);
}

static void ft_free(tb_node_t *n)
{
    struct tb_ft *ft = tb_nft_state(n);
    tb_ft_destroy(ft);
    tb_nft_set_state(n, NULL);
}

/* ---- events ---- */

/* The commands ft owns (TB_FT_EV_CMD). */
static void on_cmd(struct tb_ft *ft, tb_cmd_t *c)
{
    const tb_nft_t *nd = &ft->cx.nd;
    int slot;
    switch (c->op) {
    case TB_CMD_ADOPT_CONN:
        tb_recovery_adopt_conn(ft->rec, c);
        break;
    case TB_CMD_ADOPTED:
        /* (the node has let go of the lost parent's data connection) */
        if (tb_recovery_orphan(ft->rec) && !(nd->ops->parent_flags(nd->n) & TB_NFT_CONN) &&
            !tb_ft_ending(&ft->cx))
            tb_recovery_adopted(ft->rec, c);
        break;
    case TB_CMD_ADOPT_FAILED:
        if (tb_recovery_orphan(ft->rec)) {
            tb_recovery_adopt_failed(ft->rec);
            nd->ops->parent_lost(nd->n, c->u.adopt_failed.lost == 0
                                            ? "the front-end is gone: the session is over"
                                            : "no node would adopt us");
        }
        break;
    case TB_CMD_CHECK:
        tb_view_check(ft->view, c->u.check.id);
        break;
    case TB_CMD_SUSPECT:
        tb_suspect_cmd(ft->suspect, c->u.suspect.rank, c->u.suspect.on, c->u.suspect.silent_ms);
        break;
    case TB_CMD_ATTR:
        tb_attr_set(ft->attr, c->u.attr.key, c->u.attr.value);
        break;
    case TB_CMD_JOIN_CONN:
        if (tb_joins_request(ft->joins, c, &slot) && slot >= 0)
            tb_view_child_reset(ft->view, (size_t)slot);
        break;
    default:
        break;
    }
}

/* A node left out of the start-up (TB_FT_EV_MISSING, docs/protocol.md 7.1):
 * dead from now on, and its children under the node that launches them in
 * its place, at their next incarnation, as after an adoption. At the FE the
 * changes wait for the first view after the start-up (view.c). */
static void start_missing(struct tb_ft *ft, tbon_rank_t r, tbon_rank_t p,
                          const tbon_rank_t *moved, size_t k)
{
    const tb_nft_t *nd = &ft->cx.nd;
    size_t size = tb_topology_size(nd->topo);
    tb_recovery_apply(ft->rec, TB_V_FAILED, r, TBON_RANK_NONE,
                      tb_topology_incarnation(nd->topo, r));
    for (size_t j = 0; j < k; j++) {
        tbon_rank_t c = moved[j];
        if (c == 0 || c >= size || c == p)
            continue;
        tb_recovery_apply(ft->rec, TB_V_ADOPTED, c, p, tb_topology_incarnation(nd->topo, c) + 1);
        /* A slot of ours: it counts for views from the first, as a child
         * launched at once does (tb_view_new). */
        int i = nd->ops->child_index(nd->n, c);
        if (i >= 0)
            tb_view_child_known(ft->view, (size_t)i);
    }
}

/* The events about one child (u.child). */
static void on_child(struct tb_ft *ft, tb_ft_ev_kind_t kind, size_t i)
{
    switch (kind) {
    case TB_FT_EV_CHILD_GONE:
        tb_view_child_gone(ft->view, i);
        break;
    case TB_FT_EV_CHILD_LOST:
        tb_recovery_child_lost(ft->rec, i);
        break;
    case TB_FT_EV_CHILD_LEFT:
        tb_joins_left(ft->joins, i);
        break;
    case TB_FT_EV_CHILD_UP:
        tb_joins_child_up(ft->joins, i);
        break;
    default:
        break;
    }
}

int tb_ft_event(struct tb_ft *ft, const tb_ft_event_t *ev)
{
    tb_eds_t *eds = ft->cx.eds;
    switch (ev->kind) {
    case TB_FT_EV_CMD:
        on_cmd(ft, ev->u.cmd);
        break;
    case TB_FT_EV_TREE_UP:
        tb_recovery_send_ports(ft->rec);
        break;
    case TB_FT_EV_JOINED:
        tb_view_adopted(ft->view);
        break;
    case TB_FT_EV_LAUNCHED:
        tb_eds_watch_child(eds, ev->u.launched.rank, ev->u.launched.pid);
        break;
    case TB_FT_EV_FILTER_LOADED:
        tb_eds_watch_filters(eds);
        break;
    case TB_FT_EV_FAULT_TAKEN:
        tb_eds_fault_taken(eds, ev->u.rank);
        break;
    case TB_FT_EV_DETACH:
        return tb_eds_detach(eds, (uint32_t)ev->u.fd);
    case TB_FT_EV_PARENT_EVENTS:
        return tb_eds_watch_parent(eds, ev->u.fd, ft->cx.nd.ops->parent_rank(ft->cx.nd.n));
    case TB_FT_EV_PARENT_LOST:
        /* An orphan stays one until adopted (or given up: ADOPT_FAILED). */
        return tb_recovery_orphan(ft->rec) ||
               (ev->u.rank != TBON_RANK_NONE && tb_recovery_parent_lost(ft->rec, ev->u.rank));
    case TB_FT_EV_ORPHAN_UP:
        if (!tb_recovery_orphan(ft->rec))
            return 0;
        tb_recovery_buffer(ft->rec, ev->u.up.stream, ev->u.up.p, ev->u.up.more, ev->u.up.key);
        return 1;
    case TB_FT_EV_CHILD_GONE:
    case TB_FT_EV_CHILD_LOST:
    case TB_FT_EV_CHILD_LEFT:
    case TB_FT_EV_CHILD_UP:
        on_child(ft, ev->kind, ev->u.child);
        break;
    case TB_FT_EV_SHUTDOWN:
        tb_eds_leave(eds);
        break;
    case TB_FT_EV_FINISHED:
        tb_eds_quit(eds);
        break;
    case TB_FT_EV_MISSING:
        start_missing(ft, ev->u.missing.rank, ev->u.missing.parent, ev->u.missing.moved,
                      ev->u.missing.nmoved);
        break;
    }
    return 0;
}

static int ft_event(tb_node_t *n, const tb_ft_event_t *ev)
{
    struct tb_ft *ft = tb_nft_state(n);
    return ft ? tb_ft_event(ft, ev) : 0;
}

/* Control messages by owner (codec/ctl.c's table). */
void tb_ft_ctl(struct tb_ft *ft, int child, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    const tb_ctl_info_t *info = tb_ctl_info(m->op);
    switch (info ? info->owner : -1) {
    case TB_CTL_OWN_FT:
        tb_recovery_ctl(ft->rec, child, m, p);
        break;
    case TB_CTL_OWN_VIEW:
        tb_view_ctl(ft->view, child, m, p);
        break;
    case TB_CTL_OWN_ATTR:
        tb_attr_ctl(ft->attr, child, m, p);
        break;
    default:
        break;
    }
}

static void ft_ctl(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    struct tb_ft *ft = tb_nft_state(n);
    if (ft)
        tb_ft_ctl(ft, child, m, p);
}

/* ---- the loop ---- */

int tb_ft_timers(struct tb_ft *ft, int64_t now)
{
    int acted = tb_joins_timers(ft->joins, now);
    acted |= tb_view_timers(ft->view, now);
    acted |= tb_suspect_timers(ft->suspect, now);
    acted |= tb_recovery_timers(ft->rec, now);
    return acted;
}

void tb_ft_next(const struct tb_ft *ft, int64_t *next)
{
    tb_joins_next(ft->joins, next);
    tb_view_next(ft->view, next);
    tb_suspect_next(ft->suspect, next);
    tb_recovery_next(ft->rec, next);
}

TB_HOT static int ft_timers(tb_node_t *n, int64_t now)
{
    struct tb_ft *ft = tb_nft_state(n);
    return ft ? tb_ft_timers(ft, now) : 0;
}

TB_HOT static void ft_next(const tb_node_t *n, int64_t *next)
{
    const struct tb_ft *ft = tb_nft_state(n);
    if (ft)
        tb_ft_next(ft, next);
}

TB_HOT static void ft_flush(tb_node_t *n)
{
    struct tb_ft *ft = tb_nft_state(n);
    if (ft)
        tb_view_flush(ft->view);
}

TB_HOT static int ft_ready(const tb_node_t *n)
{
    const struct tb_ft *ft = tb_nft_state(n);
    return ft && ft->cx.ready;
}

static int ft_parent_gone(tb_node_t *n, tbon_rank_t parent)
{
    const struct tb_ft *ft = tb_nft_state(n);
    return ft && tb_eds_parent_gone(ft->cx.eds, parent);
}

static int ft_reaped(tb_node_t *n, pid_t pid)
{
    const struct tb_ft *ft = tb_nft_state(n);
    return ft && tb_eds_reaped(ft->cx.eds, pid);
}

static int ft_side_watch(tb_node_t *n, tb_io_t *io, uint32_t events)
{
    const struct tb_ft *ft = tb_nft_state(n);
    return ft ? tb_eds_side_watch(ft->cx.eds, io, events) : TBON_EINVAL;
}

static void ft_side_forget(tb_node_t *n, tb_io_t *io)
{
    const struct tb_ft *ft = tb_nft_state(n);
    if (ft)
        tb_eds_side_forget(ft->cx.eds, io);
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
    .parent_gone = ft_parent_gone,
    .side_watch = ft_side_watch,
    .side_forget = ft_side_forget,
};
