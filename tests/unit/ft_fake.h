/* ft_fake.h - a small fake node for the unit tests of ft/'s parts
 * (test_ft_*.c): a real topology (topo/, a generated shape), the node's
 * side of node/node_ft.h (tb_nft_ops_t) as a table of its own that records
 * the control messages sent and the events emitted, and every part of ft
 * made and wired as ft/ops.c does, with the calls up counted on their way.
 *
 * The parts reach the node only through the handle they are given
 * (tb_nft_t: the node pointer and the table), so nothing of libtbon's node
 * is linked in their place: struct tb_node here is this file's own, which
 * the parts never look into. Header-only, included after harness.h. */
#ifndef TT_FT_FAKE_H
#define TT_FT_FAKE_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft/ft_int.h"
#include "topo/topology.h"

#define FF_MAX_CHILD 16
#define FF_MAX_SENT  256
#define FF_MAX_EV    64

/* A control message the part sent, decoded. */
typedef struct ff_sent {
    int to;                 /* a slot, or TB_NFT_PARENT */
    tb_ctl_msg_t m;
} ff_sent_t;

typedef struct ff_ev {
    tbon_event_type_t type;
    tbon_rank_t r, p;
    uint32_t inc;
    uint64_t version;
} ff_ev_t;

struct tb_node {
    tb_topology_t *topo;
    int life;                               /* enum tb_nft_life */
    size_t nchild;
    tbon_rank_t child[FF_MAX_CHILD];
    int flags[FF_MAX_CHILD];                /* enum tb_nft_conn_flags */
    int suspect[FF_MAX_CHILD];
    int pflags;
    tbon_rank_t prank;
    ff_sent_t sent[FF_MAX_SENT];
    size_t nsent;
    ff_ev_t ev[FF_MAX_EV];
    size_t nev;
    int topo_changes, settles, parent_lost, fault_ends, absent, closed;
    size_t resent;                          /* adopt_resend calls */
    uint32_t filters;                       /* plug-ins "loaded" (filters_loaded) */
    int caught_up;                          /* catch_up calls ... */
    size_t cu_slot;                         /* ... the last one's child */
    uint32_t cu_filters;                    /* ... and what it said it had */
};

typedef struct ff {
    struct tb_node node;
    tb_node_cbs_t cbs;
    tb_session_t session;
    tb_ft_ctx_t cx;
    tb_suspect_t *sp;
    tb_notice_t *nt;
    tb_joins_t *jn;
    tb_view_t *v;
    tb_attr_t *at;
    tb_recovery_t *rc;
    /* the calls up, counted */
    int ups_apply, ups_confirm, ups_failed, ups_report, ups_child_lost;
    /* the consistency check's answer at the FE (cbs.checked) */
    int checked;
    size_t nagree, nbad;
} ff_t;

/* ---- the node's side ---- */

static int ff_life(const tb_node_t *n) { return n->life; }
static size_t ff_nchild(const tb_node_t *n) { return n->nchild; }
static tbon_rank_t ff_child_rank(const tb_node_t *n, size_t i) { return n->child[i]; }
static int ff_child_flags(const tb_node_t *n, size_t i) { return n->flags[i]; }

static int ff_child_index(const tb_node_t *n, tbon_rank_t r)
{
    for (size_t i = 0; i < n->nchild; i++)
        if (n->child[i] == r)
            return (int)i;
    return -1;
}

static int ff_add(tb_node_t *n, tbon_rank_t r, int flags)
{
    if (n->nchild == FF_MAX_CHILD)
        return -1;
    n->child[n->nchild] = r;
    n->flags[n->nchild] = flags;
    return (int)n->nchild++;
}

static int ff_child_rejoin(tb_node_t *n, tbon_rank_t r, int is_be)
{
    int i = ff_child_index(n, r);
    if (i < 0)
        i = ff_add(n, r, is_be ? TB_NFT_BE : 0);
    return i;
}

static int ff_child_adopt(tb_node_t *n, tbon_rank_t r, int is_be, int fd)
{
    close(fd);
    return ff_add(n, r, TB_NFT_CONN | TB_NFT_OPEN | (is_be ? TB_NFT_BE : 0));
}

static void ff_child_close(tb_node_t *n, size_t i, const char *why)
{
    (void)why;
    n->flags[i] &= ~(TB_NFT_CONN | TB_NFT_OPEN);
    n->closed++;
}

static void ff_child_drop(tb_node_t *n, size_t i)
{
    n->flags[i] &= ~(TB_NFT_CONN | TB_NFT_OPEN);
}

static void ff_child_absent(tb_node_t *n, size_t i)
{
    (void)i;
    n->absent++;
}

static int ff_child_suspect(tb_node_t *n, size_t i, int on)
{
    if (!(n->flags[i] & TB_NFT_CONN) || n->suspect[i] == on)
        return 0;
    n->suspect[i] = on;
    return 1;
}

static int ff_parent_flags(const tb_node_t *n) { return n->pflags; }
static tbon_rank_t ff_parent_rank(const tb_node_t *n) { return n->prank; }

static int ff_parent_set(tb_node_t *n, tbon_rank_t r, int fd)
{
    close(fd);
    n->prank = r;
    n->pflags = TB_NFT_CONN | TB_NFT_OPEN;
    return 0;
}

static void ff_parent_lost(tb_node_t *n, const char *why)
{
    (void)why;
    n->parent_lost++;
}

static void ff_send_ctl(tb_node_t *n, int to, int op, tbon_packet_t *p)
{
    int conn = to == TB_NFT_PARENT ? n->pflags : n->flags[to];
    if (p && (conn & TB_NFT_CONN) && n->nsent < FF_MAX_SENT) {
        ff_sent_t *s = &n->sent[n->nsent];
        if (tb_ctl_decode(op, p, &s->m, NULL) == 0) {
            s->to = to;
            n->nsent++;
        }
    }
    tbon_packet_unref(p);
}

static void ff_emit(tb_node_t *n, tbon_event_type_t type, tbon_rank_t r, tbon_rank_t p,
                    uint32_t inc, uint64_t version)
{
    if (n->nev < FF_MAX_EV)
        n->ev[n->nev++] = (ff_ev_t){ type, r, p, inc, version };
}

static void ff_fault_end(tb_node_t *n, tbon_rank_t r) { (void)r; n->fault_ends++; }
static void ff_topo_changed(tb_node_t *n) { n->topo_changes++; }
static void ff_settle(tb_node_t *n) { n->settles++; }
static void ff_slot_nop(tb_node_t *n, size_t i) { (void)n; (void)i; }
static void ff_rank_nop(tb_node_t *n, tbon_rank_t r) { (void)n; (void)r; }
static uint32_t ff_filters_loaded(const tb_node_t *n) { return n->filters; }

static void ff_catch_up(tb_node_t *n, size_t i, uint32_t filters)
{
    n->caught_up++;
    n->cu_slot = i;
    n->cu_filters = filters;
}

static void ff_graft(tb_node_t *n, size_t i, const tb_ctl_graft_t *m, tbon_packet_t *p)
{
    (void)n; (void)i; (void)m; (void)p;
}

static int ff_adopt_streams(tb_node_t *n, const uint32_t *hung, size_t k)
{
    (void)n; (void)hung; (void)k;
    return 0;
}

static int ff_adopt_resend(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more,
                           uint64_t key)
{
    (void)stream; (void)more; (void)key;
    tbon_packet_unref(p);
    n->resent++;
    return 0;
}

static void ff_adopt_done(tb_node_t *n) { (void)n; }

static int ff_watch(tb_node_t *n, tb_io_t *io)
{
    (void)n; (void)io;
    return 0;
}

static const tb_nft_ops_t ff_ops = {
    .life = ff_life, .nchild = ff_nchild, .child_rank = ff_child_rank,
    .child_flags = ff_child_flags, .child_index = ff_child_index,
    .child_rejoin = ff_child_rejoin, .child_adopt = ff_child_adopt,
    .child_close = ff_child_close, .child_drop = ff_child_drop,
    .child_absent = ff_child_absent, .child_suspect = ff_child_suspect,
    .parent_flags = ff_parent_flags, .parent_rank = ff_parent_rank,
    .parent_set = ff_parent_set, .parent_lost = ff_parent_lost, .send_ctl = ff_send_ctl,
    .emit = ff_emit, .fault_end = ff_fault_end, .topo_changed = ff_topo_changed,
    .settle = ff_settle, .catch_up = ff_catch_up,
    .filters_loaded = ff_filters_loaded, .bcast_join = ff_slot_nop,
    .graft = ff_graft, .adopt_streams = ff_adopt_streams, .adopt_resend = ff_adopt_resend,
    .adopt_done = ff_adopt_done, .cover_joining = ff_rank_nop, .watch = ff_watch,
};

/* ---- the calls up: counted, then on to the real parts (as ops.c) ---- */

static int ffu_apply(void *a, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    ((ff_t *)a)->ups_apply++;
    return tb_recovery_apply(((ff_t *)a)->rc, kind, r, p, inc);
}
static void ffu_confirm(void *a, const tb_vchange_t *ch, size_t k)
{
    ((ff_t *)a)->ups_confirm++;
    tb_recovery_confirm(((ff_t *)a)->rc, ch, k);
}
static void ffu_failed(void *a, tbon_rank_t r, uint32_t inc, const char *how)
{
    ((ff_t *)a)->ups_failed++;
    tb_recovery_failed(((ff_t *)a)->rc, r, inc, how);
}
static void ffu_report(void *a, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    ((ff_t *)a)->ups_report++;
    tb_recovery_report(((ff_t *)a)->rc, kind, r, p, inc);
}
static void ffu_child_lost(void *a, size_t i)
{
    ((ff_t *)a)->ups_child_lost++;
    tb_recovery_child_lost(((ff_t *)a)->rc, i);
}
static void ffu_send_ports_to(void *a, size_t i)
{
    tb_recovery_send_ports_to(((ff_t *)a)->rc, i);
}
static void ffu_view_note(void *a, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    tb_view_note(((ff_t *)a)->v, kind, r, p, inc);
}
static void ffu_view_note_change(void *a, const tb_vchange_t *c)
{
    tb_view_note_change(((ff_t *)a)->v, c);
}
static int ffu_view_applied(void *a, tbon_rank_t p, uint64_t ver)
{
    return tb_view_applied(((ff_t *)a)->v, p, ver);
}
static void ffu_view_orphan_heard(void *a, tbon_rank_t r)
{
    tb_view_orphan_heard(((ff_t *)a)->v, r);
}
static void ffu_notice_send(void *a, int kind, tbon_rank_t r, uint32_t inc)
{
    tb_notice_send(((ff_t *)a)->nt, kind, r, inc);
}
static void ffu_notice_verdict(void *a, const void *addr, socklen_t alen, tbon_rank_t r,
                               uint32_t inc, int verdict)
{
    tb_notice_verdict(((ff_t *)a)->nt, addr, alen, r, inc, verdict);
}

static const tb_ft_up_t ff_up = {
    .apply = ffu_apply, .confirm = ffu_confirm, .failed = ffu_failed, .report = ffu_report,
    .child_lost = ffu_child_lost, .send_ports_to = ffu_send_ports_to,
    .view_note = ffu_view_note, .view_note_change = ffu_view_note_change,
    .view_applied = ffu_view_applied, .view_orphan_heard = ffu_view_orphan_heard,
    .notice_send = ffu_notice_send,
    .notice_verdict = ffu_notice_verdict,
};

static void ff_checked(void *arg, uint64_t id, const tbon_rank_t *agree, size_t nagree,
                       const tbon_rank_t *bad, size_t nbad)
{
    (void)id; (void)agree; (void)bad;
    ff_t *f = arg;
    f->checked++;
    f->nagree = nagree;
    f->nbad = nbad;
}

/* ---- making one ---- */

/* Node `rank` of a generated tree (fanout[0..levels)), running, its
 * children and parent connected, and the handle the parts reach it by
 * (f->cx.nd); no part made (test_ft_ops.c composes them with ft/ops.c). */
static inline ff_t *ff_new_node(const uint32_t *fanout, size_t levels, tbon_rank_t rank)
{
    static const char *const hosts[] = { "h" };
    ff_t *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    tb_node_t *n = &f->node;
    n->topo = tb_topology_gen_shape(fanout, levels, hosts, 1, NULL);
    if (!n->topo) {
        free(f);
        return NULL;
    }
    n->life = TB_NFT_RUNNING;
    size_t nk = 0;
    const tbon_rank_t *kids = tb_topology_children(n->topo, rank, &nk);
    for (size_t i = 0; i < nk && i < FF_MAX_CHILD; i++)
        ff_add(n, kids[i], TB_NFT_CONN | TB_NFT_OPEN |
                           (tb_topology_role(n->topo, kids[i]) == TB_ROLE_BE ? TB_NFT_BE : 0));
    n->prank = tb_topology_parent(n->topo, rank);
    n->pflags = rank ? TB_NFT_CONN | TB_NFT_OPEN : 0;
    f->cbs = (tb_node_cbs_t){ .arg = f, .checked = ff_checked };
    f->session.id = 0x5e55;
    memset(f->session.secret, 7, sizeof f->session.secret);
    f->cx.nd = (tb_nft_t){ .n = n, .ops = &ff_ops, .topo = n->topo, .rank = rank,
                           .role = tb_topology_role(n->topo, rank), .session = &f->session,
                           .cbs = &f->cbs, .heartbeat_ms = 1000, .suspect_ms = 200,
                           .parent_event_fd = -1 };
    return f;
}

/* The same with the port table here (ready) and every part made and wired
 * as ft/ops.c does, the calls up counted on their way. */
static inline ff_t *ff_new(const uint32_t *fanout, size_t levels, tbon_rank_t rank)
{
    ff_t *f = ff_new_node(fanout, levels, rank);
    if (!f)
        return NULL;
    f->cx.up = &ff_up;
    f->cx.up_arg = f;
    f->cx.ready = 1;
    tb_ft_ctx_t *cx = &f->cx;
    f->sp = tb_suspect_new(cx);
    f->nt = tb_notice_new(cx, f->sp);
    f->jn = tb_joins_new(cx);
    f->v = tb_view_new(cx, f->jn);
    f->at = tb_attr_new(cx);
    f->rc = tb_recovery_new(cx, f->v, f->nt, f->sp, f->jn, f->at);
    return f;
}

static inline void ff_free(ff_t *f)
{
    if (!f)
        return;
    tb_recovery_destroy(f->rc);
    tb_view_destroy(f->v);
    tb_joins_destroy(f->jn);
    tb_notice_destroy(f->nt);
    tb_suspect_destroy(f->sp);
    tb_attr_destroy(f->at);
    for (size_t i = 0; i < f->node.nsent; i++)
        tb_ctl_msg_free(&f->node.sent[i].m);
    tb_topology_destroy(f->node.topo);
    free(f);
}

/* The k-th message sent with op (to: its destination, or any if NULL). */
static inline const ff_sent_t *ff_find(const ff_t *f, int op, size_t k)
{
    for (size_t i = 0; i < f->node.nsent; i++)
        if (f->node.sent[i].m.op == op && k-- == 0)
            return &f->node.sent[i];
    return NULL;
}

static inline size_t ff_count(const ff_t *f, int op)
{
    size_t k = 0;
    for (size_t i = 0; i < f->node.nsent; i++)
        k += f->node.sent[i].m.op == op;
    return k;
}

/* The events of type emitted so far. */
static inline size_t ff_events(const ff_t *f, tbon_event_type_t type)
{
    size_t k = 0;
    for (size_t i = 0; i < f->node.nev; i++)
        k += f->node.ev[i].type == type;
    return k;
}

/* Control message op (its packet p, taken) arrives from `from`, for the
 * part that owns it: fn has tb_view_ctl's shape. */
#define FF_DELIVER(fn, obj, from, op, p)                                    \
    do {                                                                    \
        tbon_packet_t *ff_p = (p);                                          \
        tb_ctl_msg_t ff_m;                                                  \
        REQUIRE(ff_p && tb_ctl_decode((op), ff_p, &ff_m, NULL) == 0);       \
        fn(obj, from, &ff_m, ff_p);                                         \
        tb_ctl_msg_free(&ff_m);                                             \
        tbon_packet_unref(ff_p);                                            \
    } while (0)

#endif
