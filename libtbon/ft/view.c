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
/* An alive node without a parent for this long is taken for failed (ms):
 * one heartbeat timeout, at least a second; 10 s without heartbeats. A live
 * orphan learns of its parent's failure when the FE does (the connection's
 * end, or the same silence: beats go to parent and children together) and
 * is adopted within milliseconds; one that never asks is cut off with its
 * parent (a host that lost its network, the orphan on the same host), and
 * only this deadline finds it. It was twice the timeout, which found such an
 * orphan only three timeouts after the loss; half of it left a live orphan
 * whose own look came late on a starved machine too little slack (its
 * detection may trail the FE's by up to a quarter of the timeout, a beat's
 * period, plus the time its EDS thread waits for a CPU). */
#define TB_VIEW_ORPHAN_MIN_MS 1000
#define TB_VIEW_ORPHAN_NOHB_MS 10000

struct tb_vhist {
    uint64_t v;
    tbon_packet_t *p;
};

struct tb_orphan {
    tbon_rank_t r;
    int64_t since;      /* ms */
};

void tb_view_init(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    ft->view = 1;        /* the tree as it started: the same copy everywhere */
    ft->view_sub = 1;
    ft->view_up[0] = ft->view_up[1] = 1;
    for (size_t i = 0; i < n->nchild; i++) {
        n->child[i].v_known = 1;
        n->child[i].v_sent = n->child[i].v_acked = 1;
    }
    tb_ring_init(&ft->vhist, sizeof(struct tb_vhist));
}

/* ---- acknowledgements ---- */

/* The highest version every process of our subtree has applied: ours, or
 * less while a child's subtree lags (0 while an adopted child has not said). */
static uint64_t subtree(const tb_node_t *n)
{
    uint64_t v = n->ftst->view;
    for (size_t i = 0; i < n->nchild; i++) {
        const tb_child_t *ch = &n->child[i];
        if (!tb_child_counted(ch))
            continue;
        if (!ch->v_known)
            return 0;
        if (ch->v_acked < v)
            v = ch->v_acked;
    }
    return v;
}

static void emit_stable(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    struct tb_ft_fe *fe = ft->fe;
    if (ft->view_sub != ft->view || ft->view <= ft->view_up[1] || fe->norph || fe->nvpend ||
        fe->orph_dirty || tb_node_ending(n))
        return;
    ft->view_up[1] = ft->view;
    TB_DEBUG("view", "view %llu is stable", (unsigned long long)ft->view);
    tb_node_emit(n, TBON_EV_VIEW_STABLE, 0, TBON_RANK_NONE, 0, ft->view);
}

static void send_ack(tb_node_t *n, int want)
{
    struct tb_ft *ft = n->ftst;
    ft->view_up[0] = ft->view;
    ft->view_up[1] = ft->view_sub;
    tb_node_send_ctl(n, n->parent, TB_CTL_VIEW_ACK,
                     tb_ctl_view_ack_encode(&(tb_ctl_view_ack_t){ ft->view, ft->view_sub, want }));
}

/* Recompute our subtree's version; tell the parent if it moved (FE: is the
 * view stable now? may joiners be answered?). */
static void ack_up(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    ft->view_sub = subtree(n);
    if (n->role == TB_ROLE_FE) {
        emit_stable(n);
        tb_join_replies(n);
        return;
    }
    if (n->parent && !n->parent->closed &&
        (ft->view != ft->view_up[0] || ft->view_sub > ft->view_up[1]))
        send_ack(n, 0);
}

/* ---- sending versions down ---- */

static tbon_packet_t *hist_find(const tb_node_t *n, uint64_t v)
{
    for (size_t i = n->ftst->vhist.len; i-- > 0;) {
        const struct tb_vhist *h = tb_ring_at(&n->ftst->vhist, i);
        if (h->v == v)
            return h->p;
        if (h->v < v)
            break;
    }
    return NULL;
}

static void hist_push(tb_node_t *n, uint64_t v, tbon_packet_t *p)
{
    struct tb_ft *ft = n->ftst;
    if (ft->vhist.len == TB_VIEW_HISTORY) {
        tbon_packet_unref(((struct tb_vhist *)tb_ring_at(&ft->vhist, 0))->p);
        tb_ring_drop(&ft->vhist);
    }
    struct tb_vhist *h = tb_ring_push(&ft->vhist);
    if (h) {
        h->v = v;
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
static tbon_packet_t *whole_view(const tb_node_t *n)
{
    size_t size = tb_topology_size(n->topo), k = 0;
    tb_vchange_t *ch = malloc(2 * (size ? size : 1) * sizeof *ch);    /* at most 2 per rank */
    if (!ch)
        return NULL;
    /* Every rank as a join first (the receiver adds those it does not have,
     * in rank order, under their parent now, or the FE's), then the facts. */
    for (tbon_rank_t r = 1; r < size; r++) {
        tbon_rank_t p = tb_topology_parent(n->topo, r);
        tb_vchange_t *c = &ch[k++];
        int cn = tb_topology_role(n->topo, r) == TB_ROLE_COMMNODE;
        /* The incarnation's generation brings back a rank restarted since. */
        uint32_t inc = tb_topology_incarnation(n->topo, r);
        *c = (tb_vchange_t){ cn ? TB_V_JOIN_CN : TB_V_JOIN, r, p == TBON_RANK_NONE ? 0 : p,
                             inc & ~((1u << TB_INC_GEN_SHIFT) - 1),
                             tb_topology_local_id(n->topo, r), "",
                             cn ? tb_topology_port(n->topo, r) : 0 };
        snprintf(c->host, sizeof c->host, "%s", tb_topology_host(n->topo, r));
    }
    for (tbon_rank_t r = 1; r < size; r++) {
        uint32_t inc = tb_topology_incarnation(n->topo, r);
        if (!tb_topology_alive(n->topo, r))
            ch[k++] = (tb_vchange_t){ TB_V_FAILED, r, TBON_RANK_NONE, inc, 0, "", 0 };
        else if (inc > 0 && tb_topology_parent(n->topo, r) != TBON_RANK_NONE)
            ch[k++] = (tb_vchange_t){ TB_V_ADOPTED, r, tb_topology_parent(n->topo, r), inc, 0, "",
                                      0 };
    }
    tbon_packet_t *p = view_packet(n->ftst->view, 0, ch, k);
    free(ch);
    return p;
}

/* Bring child i up to our version, from where it is. */
static void catch_up(tb_node_t *n, size_t i)
{
    struct tb_ft *ft = n->ftst;
    tb_child_t *ch = &n->child[i];
    while (tb_child_counted(ch) && ch->v_known && ch->v_sent < ft->view) {
        tbon_packet_t *p = hist_find(n, ch->v_sent + 1);
        if (!p) {
            TB_INFO("view", "rank %u is at view %llu, beyond what we keep: it gets view %llu "
                    "whole", ch->rank, (unsigned long long)ch->v_sent,
                    (unsigned long long)ft->view);
            tb_node_send_ctl(n, ch->conn, TB_CTL_VIEW, whole_view(n));
            ch->v_sent = ft->view;
            break;
        }
        tb_node_send_ctl(n, ch->conn, TB_CTL_VIEW, tbon_packet_ref(p));
        ch->v_sent++;
    }
}

/* Version v (packet p) is ours now: keep it, pass it on. */
static void pass_down(tb_node_t *n, uint64_t v, tbon_packet_t *p)
{
    hist_push(n, v, p);
    for (size_t i = 0; i < n->nchild; i++)
        catch_up(n, i);
}

/* ---- the FE: making versions ---- */

void tb_view_note(tb_node_t *n, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    tb_vchange_t c = { kind, r, p, inc, 0, "", 0 };
    tb_view_note_change(n, &c);
}

void tb_view_note_change(tb_node_t *n, const tb_vchange_t *c)
{
    struct tb_ft_fe *fe = n->ftst->fe;
    if (n->role != TB_ROLE_FE)
        return;
    fe->orph_dirty = 1;
    if (TB_ARRAY_ROOM(fe->vpend, fe->nvpend, fe->capvpend, 16))
        return;
    fe->vpend[fe->nvpend++] = *c;
    if (!fe->vpend_since)
        fe->vpend_since = tb_now_ms();
}

static void publish(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    struct tb_ft_fe *fe = ft->fe;
    tbon_packet_t *p = view_packet(ft->view + 1, ft->view, fe->vpend, fe->nvpend);
    if (!p)
        return;         /* out of memory: tried again after the next turn */
    ft->view++;
    TB_DEBUG("view", "view %llu: %zu changes", (unsigned long long)ft->view, fe->nvpend);
    if (n->cbs.view)
        n->cbs.view(n->cbs.arg, ft->view, fe->vpend, fe->nvpend);
    fe->nvpend = 0;
    fe->vpend_since = 0;
    fe->vheld = 0;
    pass_down(n, ft->view, p);
    tbon_packet_unref(p);
    for (size_t i = 0; i < fe->npjoin; i++)
        if (!fe->pjoin[i].version)
            fe->pjoin[i].version = ft->view;
    tb_join_replies(n);
}

/* The FE's alive nodes without a parent (orphans, and nodes whose claimed
 * adopter closes a cycle), in rank order, each with when it was first seen
 * so. */
static void count_orphans(tb_node_t *n, int64_t now)
{
    struct tb_ft_fe *fe = n->ftst->fe;
    size_t size = tb_topology_size(n->topo), k = 0, j = 0, cap = 0;
    struct tb_orphan *v = NULL;
    for (tbon_rank_t r = 1; r < size; r++) {
        if (!tb_topology_alive(n->topo, r) || tb_topology_parent(n->topo, r) != TBON_RANK_NONE)
            continue;
        while (j < fe->norph && fe->orph[j].r < r)
            j++;
        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            struct tb_orphan *nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                free(v);
                return;             /* still dirty: counted again next turn */
            }
            v = nv;
        }
        v[k++] = (struct tb_orphan){ r, j < fe->norph && fe->orph[j].r == r ? fe->orph[j].since : now };
    }
    free(fe->orph);
    fe->orph = v;
    fe->norph = k;
    fe->orph_dirty = 0;
}

void tb_view_flush(tb_node_t *n)
{
    struct tb_ft_fe *fe = n->ftst->fe;
    if (n->role != TB_ROLE_FE)
        return;
    /* Stability depends on the orphans and on what is pending: look again
     * only when those changed (acknowledgements call ack_up themselves). */
    int changed = fe->orph_dirty;
    if (fe->orph_dirty)
        count_orphans(n, tb_now_ms());
    /* At once when nothing is in flight and every node has a parent, or
     * when the last orphan has just been adopted; else batched. Nodes left
     * out of the start-up wait for the tree to be up (docs/protocol.md
     * 7.1): every process has connected then, and the view reaches all. */
    if (fe->nvpend && tb_node_life(n) != TB_LIFE_STARTING) {
        int now = !fe->norph && (n->ftst->view_sub == n->ftst->view || fe->vheld);
        if (now || tb_now_ms() - fe->vpend_since >= (fe->norph ? TB_VIEW_HOLD_MS : TB_VIEW_BATCH_MS)) {
            publish(n);
            changed = 1;
        } else if (fe->norph) {
            fe->vheld = 1;
        }
    }
    if (changed)
        ack_up(n);
}

static int64_t orphan_ms(const tb_node_t *n)
{
    int hb = n->cfg.heartbeat_ms;
    if (hb <= 0)
        return TB_VIEW_ORPHAN_NOHB_MS;
    return hb > TB_VIEW_ORPHAN_MIN_MS ? hb : TB_VIEW_ORPHAN_MIN_MS;
}

void tb_view_timers(tb_node_t *n, int64_t now)
{
    struct tb_ft_fe *fe = n->ftst->fe;
    tb_join_timeouts(n, now);
    if (n->role != TB_ROLE_FE || !n->ftst->ft_ready || tb_node_ending(n))
        return;
    if (fe->npjoin)
        tb_join_replies(n);
    int64_t limit = orphan_ms(n);
    for (size_t j = 0; j < fe->norph; j++) {
        struct tb_orphan o = fe->orph[j];
        if (now - o.since < limit)
            continue;
        /* Seed 000 section 3.5: a node that does not acknowledge is taken
         * for failed. Its adoption never came: fenced like a silent node. */
        TB_WARN("view", "rank %u has had no parent for %lld ms: taken for failed", o.r,
                (long long)(now - o.since));
        tb_ft_up(n)->failed(n, o.r, tb_topology_incarnation(n->topo, o.r), "never adopted");
    }
}

void tb_view_next(const tb_node_t *n, int64_t *next)
{
    const struct tb_ft *ft = n->ftst;
    const struct tb_ft_fe *fe = ft->fe;
    /* A joined child's slot: a new one, or a restarted child's old one. */
    for (size_t i = 0; ft->njoining && i < n->nchild; i++)
        if (n->child[i].join_due && n->child[i].join_due < *next)
            *next = n->child[i].join_due;
    if (!n->ftst->fe)
        return;
    for (size_t i = 0; i < fe->npjoin; i++)
        if (fe->pjoin[i].due < *next)
            *next = fe->pjoin[i].due;
    if (!ft->ft_ready || tb_node_ending(n))
        return;
    if (fe->vpend_since) {
        int64_t due = fe->vpend_since + (fe->norph ? TB_VIEW_HOLD_MS : TB_VIEW_BATCH_MS);
        if (due < *next)
            *next = due;
    }
    int64_t limit = orphan_ms(n);
    for (size_t j = 0; j < fe->norph; j++)
        if (fe->orph[j].since + limit < *next)
            *next = fe->orph[j].since + limit;
}

/* ---- versions arriving (every node but the FE) ---- */

static void on_view(tb_node_t *n, const tb_ctl_view_t *m, tbon_packet_t *p)
{
    struct tb_ft *ft = n->ftst;
    /* The decoder checked the shape (kinds, ports, hosts, prev < v); the
     * ranks need the topology. */
    uint64_t v = m->version, prev = m->prev;
    if (v <= ft->view)
        return;                         /* had it (sent again after an adoption) */
    if (prev > ft->view) {
        /* A gap: ask for everything after what we have. */
        TB_INFO("view", "view %llu follows %llu but we have %llu: asking again",
                (unsigned long long)v, (unsigned long long)prev, (unsigned long long)ft->view);
        send_ack(n, 1);
        return;
    }
    tb_vchange_t *ch = malloc((m->n ? m->n : 1) * sizeof *ch);
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        const tb_vchange_t *c = &m->ch[i];
        if (c->kind == TB_V_JOIN || c->kind == TB_V_JOIN_CN) {
            /* Joins come in rank order; the ones we have are skipped. */
            if (tb_join_add(n, c) < 0)
                TB_WARN("view", "view %llu: the join of rank %u cannot be applied",
                        (unsigned long long)v, c->rank);
        } else if (c->rank >= tb_topology_size(n->topo) || c->rank == 0 ||
                   (c->kind == TB_V_ADOPTED && c->parent >= tb_topology_size(n->topo))) {
            TB_WARN("view", "view %llu: a malformed change ignored", (unsigned long long)v);
            continue;
        } else if (c->kind != TB_V_JOINED) {
            tb_ft_up(n)->apply(n, c->kind, c->rank, c->parent, c->inc);
        }
        if (ch)
            ch[k++] = *c;
    }
    ft->view = v;
    if (ch)
        tb_ft_up(n)->confirm(n, ch, k);
    if (n->cbs.view && ch)
        n->cbs.view(n->cbs.arg, v, ch, k);
    free(ch);
    pass_down(n, v, p);
    ack_up(n);
}

static void on_ack(tb_node_t *n, size_t i, const tb_ctl_view_ack_t *m)
{
    tb_child_t *ch = &n->child[i];
    ch->v_acked = m->sub;
    if (!ch->v_known || m->want) {
        ch->v_known = 1;
        ch->v_sent = m->applied;
        catch_up(n, i);
    }
    ack_up(n);
}

void tb_view_child_gone(tb_node_t *n, size_t i)
{
    tb_child_t *ch = &n->child[i];
    if (ch->chk && ch->chk == n->ftst->chk_id) {
        ch->chk = 0;
        tb_view_check_progress(n);
    }
    ack_up(n);
}

void tb_view_adopted(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    if (n->cfg.joined && ft->view == 1 && !ft->ft_ready) {
        /* A back-end that joined the running tree has the topology of its
         * parent but no view version yet: version 0 asks for a whole one. */
        ft->view = 0;
    }
    /* The new parent does not know where we are: say it, and ask. */
    ft->view_sub = subtree(n);
    send_ack(n, 1);
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

static void chk_add(tb_node_t *n, tbon_rank_t r, int ok)
{
    struct tb_ft *ft = n->ftst;
    if (ft->nchk == ft->capchk) {
        size_t nc = ft->capchk ? 2 * ft->capchk : 64;
        tbon_rank_t *v = realloc(ft->chk_rank, nc * sizeof *v);
        if (v)
            ft->chk_rank = v;
        uint8_t *o = realloc(ft->chk_ok, nc);
        if (o)
            ft->chk_ok = o;
        if (!v || !o)
            return;
        ft->capchk = nc;
    }
    ft->chk_rank[ft->nchk] = r;
    ft->chk_ok[ft->nchk++] = (uint8_t)ok;
}

/* Our answer is complete when no child owes one. */
void tb_view_check_progress(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    if (!ft->chk_id)
        return;
    for (size_t i = 0; i < n->nchild; i++)
        if (n->child[i].chk == ft->chk_id && tb_child_counted(&n->child[i]))
            return;
    size_t na = 0, nb = 0;
    for (size_t i = 0; i < ft->nchk; i++)
        na += ft->chk_ok[i];
    nb = ft->nchk - na;
    tbon_rank_t *a = malloc((na ? na : 1) * sizeof *a), *b = malloc((nb ? nb : 1) * sizeof *b);
    if (a && b) {
        na = nb = 0;
        for (size_t i = 0; i < ft->nchk; i++) {
            if (ft->chk_ok[i])
                a[na++] = ft->chk_rank[i];
            else
                b[nb++] = ft->chk_rank[i];
        }
        if (n->role == TB_ROLE_FE) {
            if (n->cbs.checked)
                n->cbs.checked(n->cbs.arg, ft->chk_id, a, na, b, nb);
        } else {
            tb_node_send_ctl(n, n->parent, TB_CTL_CHECKED,
                             tb_ctl_checked_encode(&(tb_ctl_checked_t){ ft->chk_id, a, b, na,
                                                                        nb }));
        }
    }
    free(a);
    free(b);
    ft->chk_id = 0;
    ft->nchk = 0;
}

static void check_start(tb_node_t *n, uint64_t id, uint64_t version, uint64_t digest)
{
    struct tb_ft *ft = n->ftst;
    ft->chk_id = id;
    ft->nchk = 0;
    chk_add(n, n->rank, ft->view == version && tb_view_digest(n->topo) == digest);
    tbon_packet_t *p = tb_ctl_check_encode(&(tb_ctl_check_t){ id, version, digest });
    for (size_t i = 0; p && i < n->nchild; i++) {
        tb_child_t *ch = &n->child[i];
        ch->chk = 0;
        if (!tb_child_counted(ch))
            continue;
        ch->chk = id;
        tb_node_send_ctl(n, ch->conn, TB_CTL_CHECK, tbon_packet_ref(p));
    }
    tbon_packet_unref(p);
    tb_view_check_progress(n);
}

void tb_view_check(tb_node_t *n, uint64_t id)
{
    check_start(n, id, n->ftst->view, tb_view_digest(n->topo));
}

static void on_checked(tb_node_t *n, size_t i, const tb_ctl_checked_t *m)
{
    if (m->id == n->ftst->chk_id && n->child[i].chk == m->id) {
        for (size_t j = 0; j < m->nagree; j++)
            chk_add(n, m->agree[j], 1);
        for (size_t j = 0; j < m->nbad; j++)
            chk_add(n, m->bad[j], 0);
        n->child[i].chk = 0;
        tb_view_check_progress(n);
    }
}

/* ---- dispatch ---- */

void tb_view_ctl(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    switch (m->op) {
    case TB_CTL_VIEW:
        on_view(n, &m->u.view, p);
        break;
    case TB_CTL_VIEW_ACK:
        on_ack(n, (size_t)child, &m->u.view_ack);
        break;
    case TB_CTL_CHECK:
        /* A newer check replaces an older one. */
        check_start(n, m->u.check.id, m->u.check.version, m->u.check.digest);
        break;
    case TB_CTL_CHECKED:
        on_checked(n, (size_t)child, &m->u.checked);
        break;
    default:
        break;
    }
}

void tb_view_free(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    struct tb_ft_fe *fe = ft->fe;
    if (n->ftst->fe) {
        for (size_t i = 0; i < fe->npjoin; i++)
            close(fe->pjoin[i].fd);
        free(fe->pjoin);
        free(fe->announced);
        free(fe->vpend);
        free(fe->orph);
    }
    while (ft->vhist.len) {
        tbon_packet_unref(((struct tb_vhist *)tb_ring_at(&ft->vhist, 0))->p);
        tb_ring_drop(&ft->vhist);
    }
    tb_ring_free(&ft->vhist);
    free(ft->chk_rank);
    free(ft->chk_ok);
    free(ft->nt_from);
    ft->nt_from = NULL;
    if (ft->nfd >= 0)
        close(ft->nfd);
    ft->nfd = -1;
}
