/* view.c - the membership layer in the reactor (docs/fault-tolerance.md;
 * docs/protocol.md 9).
 *
 * The FE is the membership root (seed 000 section 3.4). Every failure or
 * adoption that is news to it becomes part of the next *view version*,
 * which travels down the tree to every process, back-ends included; each
 * node acknowledges up the highest version its whole subtree has applied,
 * once its children have (seed 000: "higher nodes acknowledge ... once they
 * have received the acknowledgments from their children"). When the FE's
 * own version has come back from every child and no alive node is without a
 * parent, the view is stable: TBON_EV_VIEW_STABLE.
 *
 * Failures during a view change (seed 000 section 3.5) need no special
 * case: a dead child is simply no longer waited for, its failure is the
 * next version, and an adopted node is brought up to date by its adopter
 * from the recent versions it keeps (or, if it lags further, with a whole
 * view). A node alive in the FE's copy but left without a parent for too
 * long (its adoption never came) is declared failed, so no view waits for
 * ever.
 *
 * The consistency check, which compares every node's copy with the FE's,
 * lives here too. The fast failure notice is in ft/notice.c, joins and
 * leaves in ft/join.c.
 */
#include "ft/ft_int.h"
#include "util/hot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/log.h"
#include "codec/packet_int.h"
#include "util/hash.h"
#include "net/sock.h"
#include "topo/reconfig.h"
#include "util/array.h"

/* Versions kept for children that lag (an adopted one). */
#define TB_VIEW_HISTORY 256
/* While a version is in flight (not yet back from every child), new changes
 * wait at most this long to go together. */
#define TB_VIEW_BATCH_MS 5
/* While some alive node has no parent (a recovery is under way), changes
 * wait until the last orphan is adopted, at most this long: the view cannot
 * be stable before, and in a recovery burst every version sent wakes every
 * process of the tree, which slows the adoptions themselves. Seed 003's
 * recovery at fan-out 128 (bench_ft --fanout 128, 2 cores, 2026-11-27):
 * 17 ms without views and 28 ms with a version every 5 ms on an idle
 * machine; later, on a slower one, 365 ms with a version every 50 ms and
 * 245 ms with one every 250 ms. An orphan never adopted delays the view of
 * the others' adoptions by this much; the FAILED and ADOPTED events do not
 * wait for it. */
#define TB_VIEW_HOLD_MS 250
/* An alive node without a parent is taken for failed after a deadline
 * counted from its parent's failure, in units of one heartbeat timeout (at
 * least a second; 10 s without heartbeats: tb_orphan_unit_ms). A live
 * orphan learns of its parent's failure when the FE does (the connection's
 * end, or the same silence: beats go to parent and children together) and
 * is adopted within milliseconds, or, if not within a quarter unit, tells
 * the FE that it is still looking (recovery.c); one that never asks
 * is cut off with its parent (a host that lost its network, the orphan on
 * the same host), and only the deadline finds it.
 * - Not heard from: one and a half units, as a silent back-end's (its
 *   heartbeat timeout, then the suspicion window with its one observer):
 *   an orphan stopped across its parent's death is treated no worse than
 *   a stopped child of a live parent. (One unit was once the rule; twice
 *   the timeout before that found a cut-off orphan only three timeouts
 *   after the loss.)
 * - Heard from: four units. Its adoption is under way, and on a starved
 *   machine it can take seconds (each candidate has a second to answer,
 *   eds_adopt.c): under ThreadSanitizer in a loaded CI run, orphans adopted
 *   after the one unit were fenced by their adopter as the late verdict
 *   came, and left the tree. */
#define TB_VIEW_ORPHAN_QUIET(unit) ((unit) + (unit) / 2)
#define TB_VIEW_ORPHAN_HEARD(unit) (4 * (unit))

struct tb_vhist {
    uint64_t v;
    tbon_packet_t *p;
};

struct tb_orphan {
    tbon_rank_t r;
    int     heard;      /* it said it is looking for an adopter */
    int64_t since;      /* ms */
};

/* Per child slot. */
struct vchild {
    int      known;     /* it told us its view version (an adopted child has
                           not yet: until then nothing is sent to it) */
    uint64_t sent;      /* the last view version sent to it */
    uint64_t acked;     /* the version its whole subtree has applied */
    uint64_t chk;       /* the consistency check it owes us an answer to */
};

struct tb_view {
    tb_ft_ctx_t *cx;
    tb_joins_t *jn;
    uint64_t   view;          /* the view version applied here */
    uint64_t   sub;           /* the version this whole subtree has applied */
    uint64_t   up[2];         /* what went up last: applied, subtree (FE: the
                                 last version announced stable, in [1]) */
    uint64_t   stable;        /* not the FE: the last version said stable */
    tb_ring_t  hist;          /* recent deltas (struct tb_vhist), oldest first */
    struct vchild *ch;        /* by slot, grown as the node's children are */
    size_t     nch;
    struct vchild oom;        /* where a slot goes that could not be made */
    /* the consistency check under way here, and its answers so far: ranks,
     * and whether they agree */
    uint64_t   chk_id;
    tbon_rank_t *chk_rank;
    uint8_t   *chk_ok;
    size_t     nchk, capchk;
    /* FE: the membership root */
    tb_vchange_t *vpend;      /* changes for the next version */
    size_t     nvpend, capvpend;
    int64_t    vpend_since;   /* when the first of them came (ms; 0: none) */
    int        vheld;         /* they wait because some node has no parent */
    struct tb_orphan *orph;   /* alive nodes without a parent, and since when */
    size_t     norph;
    int        orph_dirty;    /* the orphans must be counted again */
};

/* Slot i's state (the slots come from the node, which only adds them). */
static struct vchild *vch(tb_view_t *v, size_t i)
{
    struct vchild *c = tb_ft_slot(&v->ch, &v->nch, sizeof *v->ch, i);
    if (!c) {
        v->oom = (struct vchild){ 0 };
        c = &v->oom;
    }
    return c;
}

tb_view_t *tb_view_new(tb_ft_ctx_t *cx, tb_joins_t *jn)
{
    tb_view_t *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->cx = cx;
    v->jn = jn;
    /* The tree as it started: the same copy everywhere; a reattached FE
     * goes on from the version its children have (nd.view_base). */
    uint64_t base = cx->nd.view_base ? cx->nd.view_base : 1;
    v->view = base;
    v->sub = base;
    v->up[0] = v->up[1] = base;
    tb_ring_init(&v->hist, sizeof(struct tb_vhist));
    for (size_t i = 0, k = tb_ft_nchild(cx); i < k; i++)
        tb_view_child_known(v, i);
    return v;
}

void tb_view_destroy(tb_view_t *v)
{
    if (!v)
        return;
    while (v->hist.len) {
        tbon_packet_unref(((struct tb_vhist *)tb_ring_at(&v->hist, 0))->p);
        tb_ring_drop(&v->hist);
    }
    tb_ring_free(&v->hist);
    free(v->ch);
    free(v->chk_rank);
    free(v->chk_ok);
    free(v->vpend);
    free(v->orph);
    free(v);
}

uint64_t tb_view_version(const tb_view_t *v)
{
    return v->view;
}

uint64_t tb_view_subtree(const tb_view_t *v)
{
    return v->sub;
}

void tb_view_child_known(tb_view_t *v, size_t i)
{
    struct vchild *c = vch(v, i);
    c->known = 1;
    c->sent = c->acked = v->view;
}

void tb_view_child_reset(tb_view_t *v, size_t i)
{
    struct vchild *c = vch(v, i);
    c->known = 0;
    c->sent = c->acked = 0;
}

/* ---- acknowledgements ---- */

/* The highest version every process of our subtree has applied: ours, or
 * less while a child's subtree lags (0 while an adopted child has not said). */
static uint64_t subtree(tb_view_t *v)
{
    uint64_t s = v->view;
    for (size_t i = 0, k = tb_ft_nchild(v->cx); i < k; i++) {
        if (!tb_ft_counted(v->cx, i))
            continue;
        const struct vchild *c = vch(v, i);
        if (!c->known)
            return 0;
        if (c->acked < s)
            s = c->acked;
    }
    return s;
}

/* Version ver is stable: every process hears of it (back-ends that asked
 * for membership events get TBON_EV_VIEW_STABLE). One message per node and
 * stable version: only after changes. */
static void stable_down(tb_view_t *v, uint64_t ver)
{
    tbon_packet_t *p = NULL;
    for (size_t i = 0, k = tb_ft_nchild(v->cx); i < k; i++)
        if (tb_ft_has_conn(v->cx, i) &&
            (p || (p = tb_ctl_stable_encode(&(tb_ctl_stable_t){ ver }))))
            tb_ft_send(v->cx, (int)i, TB_CTL_STABLE, tbon_packet_ref(p));
    tbon_packet_unref(p);
}

static void on_stable(tb_view_t *v, uint64_t ver)
{
    if (tb_ft_is_fe(v->cx) || ver <= v->stable || ver > v->view)
        return;                 /* had it, or a version not applied here */
    v->stable = ver;
    const tb_node_cbs_t *cbs = v->cx->nd.cbs;
    if (cbs->stable)
        cbs->stable(cbs->arg, ver);
    stable_down(v, ver);
}

static void emit_stable(tb_view_t *v)
{
    if (v->sub != v->view || v->view <= v->up[1] || v->norph || v->nvpend || v->orph_dirty ||
        tb_ft_ending(v->cx))
        return;
    v->up[1] = v->view;
    TB_DEBUG("view", "view %llu is stable", (unsigned long long)v->view);
    tb_ft_emit(v->cx, TBON_EV_VIEW_STABLE, 0, TBON_RANK_NONE, 0, v->view);
    stable_down(v, v->view);
}

static void send_ack(tb_view_t *v, int want)
{
    v->up[0] = v->view;
    v->up[1] = v->sub;
    tb_ft_send(v->cx, TB_NFT_PARENT, TB_CTL_VIEW_ACK,
               tb_ctl_view_ack_encode(&(tb_ctl_view_ack_t){ v->view, v->sub, want }));
}

/* Recompute our subtree's version; tell the parent if it moved (FE: is the
 * view stable now? may joiners be answered?). */
static void ack_up(tb_view_t *v)
{
    const tb_nft_t *nd = &v->cx->nd;
    v->sub = subtree(v);
    if (tb_ft_is_fe(v->cx)) {
        emit_stable(v);
        tb_joins_replies(v->jn);
        return;
    }
    if ((nd->ops->parent_flags(nd->n) & TB_NFT_OPEN) &&
        (v->view != v->up[0] || v->sub > v->up[1]))
        send_ack(v, 0);
}

/* ---- sending versions down ---- */

static tbon_packet_t *hist_find(const tb_view_t *v, uint64_t ver)
{
    for (size_t i = v->hist.len; i-- > 0;) {
        const struct tb_vhist *h = tb_ring_at(&v->hist, i);
        if (h->v == ver)
            return h->p;
        if (h->v < ver)
            break;
    }
    return NULL;
}

static void hist_push(tb_view_t *v, uint64_t ver, tbon_packet_t *p)
{
    if (v->hist.len == TB_VIEW_HISTORY) {
        tbon_packet_unref(((struct tb_vhist *)tb_ring_at(&v->hist, 0))->p);
        tb_ring_drop(&v->hist);
    }
    struct tb_vhist *h = tb_ring_push(&v->hist);
    if (h) {
        h->v = ver;
        h->p = tbon_packet_ref(p);
    }
}

static tbon_packet_t *view_packet(uint64_t v, uint64_t prev, const tb_vchange_t *ch, size_t k)
{
    return tb_ctl_view_encode(&(tb_ctl_view_t){ v, prev, ch, k });
}

/* A whole view (prev 0) for a child that lags beyond our history: every
 * fact of our copy as a report. Applying reports is idempotent and order
 * does not matter (reconfig.h), so the child ends up with what we have. */
static tbon_packet_t *whole_view(const tb_view_t *v)
{
    const tb_topology_t *t = v->cx->nd.topo;
    size_t size = tb_topology_size(t), k = 0;
    tb_vchange_t *ch = malloc(2 * (size ? size : 1) * sizeof *ch);    /* at most 2 per rank */
    if (!ch)
        return NULL;
    /* Every rank as a join first (the receiver adds those it does not have,
     * in rank order, under their parent now, or the FE's), then the facts. */
    for (tbon_rank_t r = 1; r < size; r++) {
        tbon_rank_t p = tb_topology_parent(t, r);
        tb_vchange_t *c = &ch[k++];
        int cn = tb_topology_role(t, r) == TB_ROLE_COMMNODE;
        /* The incarnation's generation brings back a rank restarted since. */
        uint32_t inc = tb_topology_incarnation(t, r);
        *c = (tb_vchange_t){ cn ? TB_V_JOIN_CN : TB_V_JOIN, r, p == TBON_RANK_NONE ? 0 : p,
                             inc & ~((1u << TB_INC_GEN_SHIFT) - 1),
                             tb_topology_local_id(t, r), "",
                             cn ? tb_topology_port(t, r) : 0 };
        snprintf(c->host, sizeof c->host, "%s", tb_topology_host(t, r));
    }
    for (tbon_rank_t r = 1; r < size; r++) {
        uint32_t inc = tb_topology_incarnation(t, r);
        if (!tb_topology_alive(t, r))
            ch[k++] = (tb_vchange_t){ TB_V_FAILED, r, TBON_RANK_NONE, inc, 0, "", 0 };
        else if (inc > 0 && tb_topology_parent(t, r) != TBON_RANK_NONE)
            ch[k++] = (tb_vchange_t){ TB_V_ADOPTED, r, tb_topology_parent(t, r), inc, 0, "",
                                      0 };
    }
    tbon_packet_t *p = view_packet(v->view, 0, ch, k);
    free(ch);
    return p;
}

/* Bring child i up to our version, from where it is. */
static void catch_up(tb_view_t *v, size_t i)
{
    struct vchild *c = vch(v, i);
    while (tb_ft_counted(v->cx, i) && c->known && c->sent < v->view) {
        tbon_packet_t *p = hist_find(v, c->sent + 1);
        if (!p) {
            TB_INFO("view", "rank %u is at view %llu, beyond what we keep: it gets view %llu "
                    "whole", v->cx->nd.ops->child_rank(v->cx->nd.n, i),
                    (unsigned long long)c->sent, (unsigned long long)v->view);
            tb_ft_send(v->cx, (int)i, TB_CTL_VIEW, whole_view(v));
            c->sent = v->view;
            break;
        }
        tb_ft_send(v->cx, (int)i, TB_CTL_VIEW, tbon_packet_ref(p));
        c->sent++;
    }
}

/* Version ver (packet p) is ours now: keep it, pass it on. */
static void pass_down(tb_view_t *v, uint64_t ver, tbon_packet_t *p)
{
    hist_push(v, ver, p);
    for (size_t i = 0, k = tb_ft_nchild(v->cx); i < k; i++)
        catch_up(v, i);
}

/* ---- the FE: making versions ---- */

void tb_view_note(tb_view_t *v, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    tb_vchange_t c = { kind, r, p, inc, 0, "", 0 };
    tb_view_note_change(v, &c);
}

void tb_view_note_change(tb_view_t *v, const tb_vchange_t *c)
{
    if (!tb_ft_is_fe(v->cx))
        return;
    v->orph_dirty = 1;
    if (TB_ARRAY_ROOM(v->vpend, v->nvpend, v->capvpend, 16))
        return;
    v->vpend[v->nvpend++] = *c;
    if (!v->vpend_since)
        v->vpend_since = tb_now_ms();
}

static void publish(tb_view_t *v)
{
    const tb_node_cbs_t *cbs = v->cx->nd.cbs;
    tbon_packet_t *p = view_packet(v->view + 1, v->view, v->vpend, v->nvpend);
    if (!p)
        return;         /* out of memory: tried again after the next turn */
    v->view++;
    TB_DEBUG("view", "view %llu: %zu changes", (unsigned long long)v->view, v->nvpend);
    if (cbs->view)
        cbs->view(cbs->arg, v->view, v->vpend, v->nvpend);
    v->nvpend = 0;
    v->vpend_since = 0;
    v->vheld = 0;
    pass_down(v, v->view, p);
    tbon_packet_unref(p);
    tb_joins_published(v->jn, v->view);
    tb_joins_replies(v->jn);
}

/* The FE's alive nodes without a parent (orphans, and nodes whose claimed
 * adopter closes a cycle), in rank order, each with when it was first seen
 * so. */
static void count_orphans(tb_view_t *v, int64_t now)
{
    const tb_topology_t *t = v->cx->nd.topo;
    size_t size = tb_topology_size(t), k = 0, j = 0, cap = 0;
    struct tb_orphan *o = NULL;
    for (tbon_rank_t r = 1; r < size; r++) {
        if (!tb_topology_alive(t, r) || tb_topology_parent(t, r) != TBON_RANK_NONE)
            continue;
        while (j < v->norph && v->orph[j].r < r)
            j++;
        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            struct tb_orphan *no = realloc(o, cap * sizeof *no);
            if (!no) {
                free(o);
                return;             /* still dirty: counted again next turn */
            }
            o = no;
        }
        int old = j < v->norph && v->orph[j].r == r;
        o[k++] = (struct tb_orphan){ r, old && v->orph[j].heard, old ? v->orph[j].since : now };
    }
    free(v->orph);
    v->orph = o;
    v->norph = k;
    v->orph_dirty = 0;
}

TB_HOT void tb_view_flush(tb_view_t *v)
{
    if (!tb_ft_is_fe(v->cx))
        return;
    /* Stability depends on the orphans and on what is pending: look again
     * only when those changed (acknowledgements call ack_up themselves). */
    int changed = v->orph_dirty;
    if (v->orph_dirty)
        count_orphans(v, tb_now_ms());
    /* At once when nothing is in flight and every node has a parent, or
     * when the last orphan has just been adopted; else batched. Nodes left
     * out of the start-up wait for the tree to be up (docs/protocol.md
     * 7.1): every process has connected then, and the view reaches all. */
    if (v->nvpend && tb_ft_life(v->cx) != TB_NFT_STARTING) {
        int now = !v->norph && (v->sub == v->view || v->vheld);
        if (now || tb_now_ms() - v->vpend_since >= (v->norph ? TB_VIEW_HOLD_MS : TB_VIEW_BATCH_MS)) {
            publish(v);
            changed = 1;
        } else if (v->norph) {
            v->vheld = 1;
        }
    }
    if (changed)
        ack_up(v);
}

static int64_t orphan_ms(const tb_view_t *v)
{
    return tb_orphan_unit_ms(v->cx->nd.heartbeat_ms);
}

static int64_t orphan_limit(const tb_view_t *v, const struct tb_orphan *o)
{
    int64_t unit = orphan_ms(v);
    return o->heard ? TB_VIEW_ORPHAN_HEARD(unit) : TB_VIEW_ORPHAN_QUIET(unit);
}

void tb_view_orphan_heard(tb_view_t *v, tbon_rank_t r)
{
    if (!tb_ft_is_fe(v->cx))
        return;
    if (v->orph_dirty)
        count_orphans(v, tb_now_ms());
    size_t lo = 0, hi = v->norph;       /* in rank order */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->orph[mid].r < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < v->norph && v->orph[lo].r == r)
        v->orph[lo].heard = 1;
}

TB_HOT int tb_view_timers(tb_view_t *v, int64_t now)
{
    tb_ft_ctx_t *cx = v->cx;
    if (!tb_ft_is_fe(cx) || !cx->ready || tb_ft_ending(cx))
        return 0;
    int acted = 0;
    for (size_t j = 0; j < v->norph; j++) {
        struct tb_orphan o = v->orph[j];
        if (now - o.since < orphan_limit(v, &o))
            continue;
        /* Seed 000 section 3.5: a node that does not acknowledge is taken
         * for failed. Its adoption never came: fenced like a silent node. */
        TB_WARN("view", "rank %u has had no parent for %lld ms%s: taken for failed", o.r,
                (long long)(now - o.since), o.heard ? " (it was looking for one)" : "");
        cx->up->failed(cx->up_arg, o.r, tb_topology_incarnation(cx->nd.topo, o.r),
                       "never adopted");
        acted = 1;
    }
    return acted;
}

TB_HOT void tb_view_next(const tb_view_t *v, int64_t *next)
{
    if (!tb_ft_is_fe(v->cx) || !v->cx->ready || tb_ft_ending(v->cx))
        return;
    if (v->vpend_since) {
        int64_t due = v->vpend_since + (v->norph ? TB_VIEW_HOLD_MS : TB_VIEW_BATCH_MS);
        if (due < *next)
            *next = due;
    }
    for (size_t j = 0; j < v->norph; j++) {
        int64_t due = v->orph[j].since + orphan_limit(v, &v->orph[j]);
        if (due < *next)
            *next = due;
    }
}

/* ---- versions arriving (every node but the FE) ---- */

/* Change c of version ver, applied here; 0 if it is malformed. */
static int apply_change(tb_view_t *v, uint64_t ver, const tb_vchange_t *c)
{
    tb_ft_ctx_t *cx = v->cx;
    size_t size = tb_topology_size(cx->nd.topo);
    if (c->kind == TB_V_JOIN || c->kind == TB_V_JOIN_CN) {
        /* Joins come in rank order; the ones we have are skipped. */
        int slot;
        if (tb_joins_add(v->jn, c, &slot) < 0)
            TB_WARN("view", "view %llu: the join of rank %u cannot be applied",
                    (unsigned long long)ver, c->rank);
        if (slot >= 0)
            tb_view_child_reset(v, (size_t)slot);
    } else if (c->rank >= size || c->rank == 0 ||
               (c->kind == TB_V_ADOPTED && c->parent >= size)) {
        TB_WARN("view", "view %llu: a malformed change ignored", (unsigned long long)ver);
        return 0;
    } else if (c->kind != TB_V_JOINED) {
        cx->up->apply(cx->up_arg, c->kind, c->rank, c->parent, c->inc);
    }
    return 1;
}

static void on_view(tb_view_t *v, const tb_ctl_view_t *m, tbon_packet_t *p)
{
    tb_ft_ctx_t *cx = v->cx;
    /* The decoder checked the shape (kinds, ports, hosts, prev < v); the
     * ranks need the topology. */
    uint64_t ver = m->version, prev = m->prev;
    if (ver <= v->view)
        return;                         /* had it (sent again after an adoption) */
    if (prev > v->view) {
        /* A gap: ask for everything after what we have. */
        TB_INFO("view", "view %llu follows %llu but we have %llu: asking again",
                (unsigned long long)ver, (unsigned long long)prev, (unsigned long long)v->view);
        send_ack(v, 1);
        return;
    }
    tb_vchange_t *ch = malloc((m->n ? m->n : 1) * sizeof *ch);
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++)
        if (apply_change(v, ver, &m->ch[i]) && ch)
            ch[k++] = m->ch[i];
    v->view = ver;
    tb_eds_set_view(cx->eds, ver);      /* for a new FE's claim (eds_fe.c) */
    if (ch)
        cx->up->confirm(cx->up_arg, ch, k);
    if (cx->nd.cbs->view && ch)
        cx->nd.cbs->view(cx->nd.cbs->arg, ver, ch, k);
    free(ch);
    pass_down(v, ver, p);
    ack_up(v);
}

static void on_ack(tb_view_t *v, size_t i, const tb_ctl_view_ack_t *m)
{
    struct vchild *c = vch(v, i);
    c->acked = m->sub;
    if (!c->known || m->want) {
        c->known = 1;
        c->sent = m->applied;
        catch_up(v, i);
    }
    ack_up(v);
}

static void check_progress(tb_view_t *v);

void tb_view_child_gone(tb_view_t *v, size_t i)
{
    struct vchild *c = vch(v, i);
    if (c->chk && c->chk == v->chk_id) {
        c->chk = 0;
        check_progress(v);
    }
    ack_up(v);
}

void tb_view_adopted(tb_view_t *v)
{
    if (v->cx->nd.joined && v->view == 1 && !v->cx->ready) {
        /* A back-end that joined the running tree has the topology of its
         * parent but no view version yet: version 0 asks for a whole one. */
        v->view = 0;
    }
    /* The new parent does not know where we are: say it, and ask. */
    v->sub = subtree(v);
    send_ack(v, 1);
}

int tb_view_applied(const tb_view_t *v, tbon_rank_t p, uint64_t ver)
{
    /* Its subtree's ancestor among our children says so (every process
     * below it has). */
    const tb_nft_t *nd = &v->cx->nd;
    if (p == nd->rank)
        return v->view >= ver;
    tbon_rank_t c = p;
    while (c != TBON_RANK_NONE && tb_topology_parent(nd->topo, c) != nd->rank)
        c = tb_topology_parent(nd->topo, c);
    int i = c == TBON_RANK_NONE ? -1 : nd->ops->child_index(nd->n, c);
    return i >= 0 && (size_t)i < v->nch && tb_ft_counted(v->cx, (size_t)i) &&
           v->ch[i].known && v->ch[i].acked >= ver;
}

/* ---- the consistency check ---- */

uint64_t tb_view_digest(const tb_topology_t *t)
{
    uint64_t h = TB_FNV1A_INIT;
    size_t size = tb_topology_size(t);
    h = tb_fnv1a(h, &size, sizeof size);
    for (tbon_rank_t r = 0; r < size; r++) {
        uint32_t f[5] = { r, 0, 0, 0, 0 };
        if (tb_topology_alive(t, r)) {
            f[1] = 1;
            f[2] = tb_topology_parent(t, r);
            f[3] = tb_topology_incarnation(t, r);
            f[4] = (uint32_t)tb_topology_role(t, r) | tb_topology_local_id(t, r) << 2;
            const char *host = tb_topology_host(t, r);
            h = tb_fnv1a(h, host, strlen(host) + 1);
        }
        h = tb_fnv1a(h, f, sizeof f);
    }
    return h;
}

static void chk_add(tb_view_t *v, tbon_rank_t r, int ok)
{
    if (v->nchk == v->capchk) {
        size_t nc = v->capchk ? 2 * v->capchk : 64;
        tbon_rank_t *rv = realloc(v->chk_rank, nc * sizeof *rv);
        if (rv)
            v->chk_rank = rv;
        uint8_t *o = realloc(v->chk_ok, nc);
        if (o)
            v->chk_ok = o;
        if (!rv || !o)
            return;
        v->capchk = nc;
    }
    v->chk_rank[v->nchk] = r;
    v->chk_ok[v->nchk++] = (uint8_t)ok;
}

/* Our answer (who agrees, who does not) goes up, or to the FE's app. */
static void check_answer(tb_view_t *v)
{
    const tb_node_cbs_t *cbs = v->cx->nd.cbs;
    size_t na = 0, nb = 0;
    for (size_t i = 0; i < v->nchk; i++)
        na += v->chk_ok[i];
    nb = v->nchk - na;
    tbon_rank_t *a = malloc((na ? na : 1) * sizeof *a), *b = malloc((nb ? nb : 1) * sizeof *b);
    if (a && b) {
        na = nb = 0;
        for (size_t i = 0; i < v->nchk; i++) {
            if (v->chk_ok[i])
                a[na++] = v->chk_rank[i];
            else
                b[nb++] = v->chk_rank[i];
        }
        if (tb_ft_is_fe(v->cx)) {
            if (cbs->checked)
                cbs->checked(cbs->arg, v->chk_id, a, na, b, nb);
        } else {
            tb_ft_send(v->cx, TB_NFT_PARENT, TB_CTL_CHECKED,
                       tb_ctl_checked_encode(&(tb_ctl_checked_t){ v->chk_id, a, b, na, nb }));
        }
    }
    free(a);
    free(b);
}

/* Our answer is complete when no child owes one. */
static void check_progress(tb_view_t *v)
{
    if (!v->chk_id)
        return;
    for (size_t i = 0; i < v->nch; i++)
        if (v->ch[i].chk == v->chk_id && tb_ft_counted(v->cx, i))
            return;
    check_answer(v);
    v->chk_id = 0;
    v->nchk = 0;
}

static void check_start(tb_view_t *v, uint64_t id, uint64_t version, uint64_t digest)
{
    const tb_nft_t *nd = &v->cx->nd;
    v->chk_id = id;
    v->nchk = 0;
    chk_add(v, nd->rank, v->view == version && tb_view_digest(nd->topo) == digest);
    tbon_packet_t *p = tb_ctl_check_encode(&(tb_ctl_check_t){ id, version, digest });
    for (size_t i = 0, k = tb_ft_nchild(v->cx); p && i < k; i++) {
        struct vchild *c = vch(v, i);
        c->chk = 0;
        if (!tb_ft_counted(v->cx, i))
            continue;
        c->chk = id;
        tb_ft_send(v->cx, (int)i, TB_CTL_CHECK, tbon_packet_ref(p));
    }
    tbon_packet_unref(p);
    check_progress(v);
}

void tb_view_check(tb_view_t *v, uint64_t id)
{
    check_start(v, id, v->view, tb_view_digest(v->cx->nd.topo));
}

static void on_checked(tb_view_t *v, size_t i, const tb_ctl_checked_t *m)
{
    struct vchild *c = vch(v, i);
    if (m->id == v->chk_id && c->chk == m->id) {
        for (size_t j = 0; j < m->nagree; j++)
            chk_add(v, m->agree[j], 1);
        for (size_t j = 0; j < m->nbad; j++)
            chk_add(v, m->bad[j], 0);
        c->chk = 0;
        check_progress(v);
    }
}

/* ---- dispatch ---- */

void tb_view_ctl(tb_view_t *v, int child, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    switch (m->op) {
    case TB_CTL_VIEW:
        on_view(v, &m->u.view, p);
        break;
    case TB_CTL_VIEW_ACK:
        on_ack(v, (size_t)child, &m->u.view_ack);
        break;
    case TB_CTL_CHECK:
        /* A newer check replaces an older one. */
        check_start(v, m->u.check.id, m->u.check.version, m->u.check.digest);
        break;
    case TB_CTL_CHECKED:
        on_checked(v, (size_t)child, &m->u.checked);
        break;
    case TB_CTL_STABLE:
        on_stable(v, m->u.stable.version);
        break;
    default:
        break;
    }
}
