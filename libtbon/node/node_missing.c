/* node_missing.c - a start-up that survives failures (docs/protocol.md 7.1):
 * a child that cannot be launched, exits or closes before it is ready, or
 * does not connect in time is left out; its parent launches its children
 * itself, in its place, and tells the FE (TB_CTL_MISSING, applied by every
 * node on the way). The FE starts the tree without it, or, with
 * require_all, fails the start-up with the same words. */
#include "node/node_int.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "proc/relay.h"

static const char *host_of(const tb_node_t *n, tbon_rank_t r)
{
    return tb_topology_host(n->topo, r);
}

/* The FE fails the start-up on the first failure: with require_all, and
 * under Slurm (a depth is one step: its tasks are not launched one by one). */
static int strict(const tb_node_t *n)
{
    return n->cfg.require_all || n->cfg.slurm;
}

void tb_node_connect_due(tb_node_t *n, size_t i, int64_t now)
{
    /* A back-end has until our deadline: nothing waits to be launched in
     * its place. A commnode, half of what is left: if it never comes, the
     * other half is for its children, which we then launch. On a loaded
     * machine its siblings may still be coming in then: while they do, it
     * may come too, up to three quarters of what was left (connect_quiet). */
    tb_child_t *ch = &n->child[i];
    int64_t left = n->start_deadline - now;
    if (left < 4)
        left = 4;
    ch->launched_at = now;
    ch->due = ch->is_be ? 0 : now + left / 2;
    ch->due_max = ch->is_be ? 0 : now + left * 3 / 4;
}

/* How long without any child connecting means the start-up has stopped
 * moving here: a quarter of child ch's own time (at least 200 ms). */
static int64_t connect_quiet(const tb_child_t *ch)
{
    int64_t q = (ch->due - ch->launched_at) / 4;
    return q > 200 ? q : 200;
}

/* When child ch is to be looked at: its due, or later while children still
 * connect, up to its due_max. */
static int64_t connect_check(const tb_node_t *n, const tb_child_t *ch)
{
    int64_t t = n->last_conn + connect_quiet(ch);
    if (t > ch->due_max)
        t = ch->due_max;
    return t > ch->due ? t : ch->due;
}

void tb_node_arm_start(tb_node_t *n)
{
    if (tb_node_life(n) != TB_LIFE_STARTING)
        return;
    int64_t next = n->start_deadline;
    for (size_t i = 0; i < n->nchild; i++) {
        const tb_child_t *ch = &n->child[i];
        if (ch->state == CH_LAUNCHED && !ch->left_out && ch->due && connect_check(n, ch) < next)
            next = connect_check(n, ch);
    }
    tb_timer_at(n->loop, &n->start_timer, next);
}

/* The FE: rank r is missing (why: msg). */
static void fe_missing(tb_node_t *n, int code, tbon_rank_t r, const char *msg)
{
    if (strict(n)) {
        tb_node_fail(n, code, "%s", msg);
        return;
    }
    if (!n->fe->nmissing++)
        snprintf(n->fe->first_missing, sizeof n->fe->first_missing, "%s", msg);
    TB_WARN("startup", "%s; the tree starts without it", msg);
    if (n->cbs.status)
        n->cbs.status(n->cbs.arg, TB_NODE_MISSING, (int)r, msg);
    tb_node_emit(n, TBON_EV_NODE_FAILED, r, TBON_RANK_NONE, tb_topology_incarnation(n->topo, r),
                 0);
}

/* r is left out; moved (k) are launched by parent in its place. Applied
 * here, then up to the FE. */
static void report(tb_node_t *n, int code, tbon_rank_t r, tbon_rank_t parent, const char *msg,
                   const tbon_rank_t *moved, size_t k)
{
    tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_MISSING,
                                   .u.missing = { r, parent, moved, k } });
    if (n->role == TB_ROLE_FE)
        fe_missing(n, code, r, msg);
    else
        tb_node_send_ctl(n, n->parent, TB_CTL_MISSING,
                         tb_ctl_missing_encode(&(tb_ctl_missing_t){ code, r, parent, msg, moved,
                                                                    k }));
}

/* The alive ranks below r in our copy (not r), malloc'd; *k their number. */
static tbon_rank_t *subtree_of(const tb_node_t *n, tbon_rank_t r, size_t *k)
{
    size_t size = tb_topology_size(n->topo), top = 0;
    tbon_rank_t *v = malloc(size * sizeof *v);
    *k = 0;
    if (!v)
        return NULL;
    v[top++] = r;
    /* v[0..*k) are done, v[*k..top) to visit; r itself is dropped at the end. */
    for (size_t at = 0; at < top; at++) {
        size_t nc;
        const tbon_rank_t *kids = tb_topology_children(n->topo, v[at], &nc);
        for (size_t j = 0; j < nc && top < size; j++)
            if (tb_topology_alive(n->topo, kids[j]))
                v[top++] = kids[j];
    }
    memmove(v, v + 1, (top - 1) * sizeof *v);
    *k = top - 1;
    return v;
}

void tb_node_left_out(tb_node_t *n, size_t i, int code, int whole, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tb_child_t *ch = &n->child[i];
    if (ch->left_out)
        return;
    ch->left_out = 1;
    tbon_rank_t r = ch->rank;
    /* It never comes back: a late process would find its place taken. */
    if (ch->pid > 0 && !ch->exited)
        kill(ch->pid, SIGKILL);
    if (ch->conn)
        tb_node_close_child(n, i, msg);
    n->child[i].state = CH_GONE;
    /* Its children (in our copy, before its failure is applied) come
     * under us and are launched by us; at the deadline there is no time
     * left for that, and its whole subtree is left out with it. */
    size_t k = 0;
    const tbon_rank_t *kids = tb_topology_children(n->topo, r, &k);
    tbon_rank_t *moved = whole ? subtree_of(n, r, &k)
                               : malloc((k ? k : 1) * sizeof *moved);
    if (!moved)
        k = 0;
    else if (!whole && k)
        memcpy(moved, kids, k * sizeof *moved);     /* (kids is NULL for a leaf) */
    for (size_t j = 0; j < k && !whole; j++) {
        int c = tb_node_add_child(n, moved[j],
                                  tb_topology_role(n->topo, moved[j]) == TB_ROLE_BE);
        if (c >= 0)
            n->child[c].state = CH_LAUNCHED;
        else
            TB_ERROR("startup", "rank %u: no slot for it (out of memory)", moved[j]);
    }
    report(n, code, r, n->rank, msg, whole ? NULL : moved, whole ? 0 : k);
    for (size_t j = 0; j < k && whole; j++) {
        char also[600];
        snprintf(also, sizeof also, "rank %u on host %s is left out with its ancestor: %s",
                 moved[j], host_of(n, moved[j]), msg);
        report(n, code, moved[j], n->rank, also, NULL, 0);
    }
    free(moved);
}

void tb_node_relaunch(tb_node_t *n)
{
    tbon_error_t err = { 0 };
    if (tb_node_life(n) != TB_LIFE_STARTING || n->failed)
        return;
    if (tb_node_launch_pending(n, &err))
        tb_node_fail(n, err.code, "%s", err.msg);
    tb_node_check_ready(n);
}

int tb_node_fe_no_backend(tb_node_t *n)
{
    size_t size = tb_topology_size(n->topo);
    for (tbon_rank_t r = 1; r < size; r++)
        if (tb_topology_role(n->topo, r) == TB_ROLE_BE && tb_topology_alive(n->topo, r))
            return 0;
    tb_node_fail(n, TBON_ELAUNCH, "no back-end could be started (%zu node%s left out); the "
                 "first: %s", n->fe->nmissing, n->fe->nmissing == 1 ? "" : "s",
                 n->fe->first_missing);
    return 1;
}

void tb_node_child_lost_at_start(tb_node_t *n, size_t i, const char *why)
{
    tb_child_t *ch = &n->child[i];
    /* A child we launched is left out when it exits, with its own words (a
     * remote one's stderr may come after its connection's end); the
     * deadline covers one that lives on. */
    if (ch->left_out || (ch->pid > 0 && !ch->exited))
        return;
    tb_node_left_out(n, i, TBON_ELAUNCH, 0,
                     "rank %u on host %s closed its connection before the tree was ready: %s",
                     ch->rank, host_of(n, ch->rank), why);
    tb_node_relaunch(n);
}

int tb_node_launch_pending(tb_node_t *n, tbon_error_t *err)
{
    tb_launch_round_t *c = tb_node_round_new(n, err);
    if (!c)
        return TBON_ENOMEM;
    int rc = 0;
    /* n->nchild grows while we go: the children of one left out are ours
     * to launch, in this same round. Once the start-up has failed (the FE
     * with require_all), nothing more is started. */
    for (size_t i = 0; i < n->nchild && !rc && !n->failed; i++) {
        tb_child_t *ch = &n->child[i];
        const char *exe = ch->is_be ? n->cfg.backend_exe : n->cfg.commnode_path;
        if (!exe || ch->launched_at || ch->left_out || ch->state != CH_LAUNCHED)
            continue;   /* attach mode: the back-end comes by itself */
        tbon_error_t lerr = { 0 };
        int lrc = tb_node_launch_one(n, i, exe, c, &lerr);
        if (lrc == TBON_ENOMEM)
            rc = tb_error_set(err, lrc, "%s", lerr.msg);
        else if (lrc)
            tb_node_left_out(n, i, TBON_ELAUNCH, 0, "%s", lerr.msg);
        else
            tb_node_connect_due(n, i, tb_now_ms());
    }
    tb_node_round_destroy(c);
    tb_node_arm_start(n);
    return rc;
}

int tb_node_launch_children(tb_node_t *n, tbon_error_t *err)
{
    if (n->nchild == 0)
        return 0;
    int slurm;
    int rc = tb_node_launch_prepare(n, &slurm, err);
    if (rc || slurm)
        return rc;      /* under Slurm the steps start the children */
    return tb_node_launch_pending(n, err);
}

void tb_node_check_ready(tb_node_t *n)
{
    if (tb_node_life(n) != TB_LIFE_STARTING || n->failed || n->role == TB_ROLE_BE)
        return;
    if (n->cfg.reattach) {
        /* A new FE of a running tree: up at once; the old FE's children
         * come as orphans it adopts (api/fe_session.c waits for them). */
        tb_node_enter(n, TB_LIFE_RUNNING);
        tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_TREE_UP });
        if (n->cbs.status)
            n->cbs.status(n->cbs.arg, TB_NODE_READY, 0, "ready");
        return;
    }
    size_t count = 1, ready = 0, out = 0;
    for (size_t i = 0; i < n->nchild; i++) {
        if (n->child[i].left_out) {
            out++;
        } else if (n->child[i].state == CH_READY) {
            count += n->child[i].count;
            ready++;
        }
    }
    if (n->role == TB_ROLE_FE && n->cbs.progress && ready > n->ready_count)
        n->cbs.progress(n->cbs.arg, count, n->total);
    n->ready_count = ready;
    if (ready + out < n->nchild)
        return;
    if (n->role == TB_ROLE_FE && tb_node_fe_no_backend(n))
        return;     /* the start-up failed: a tree without back-ends is of no use */
    tb_node_enter(n, TB_LIFE_RUNNING);
    TB_DEBUG("startup", "subtree of %zu processes ready", count);
    if (n->role == TB_ROLE_FE) {
        /* Every node learns where the FE and the commnodes listen: an orphan
         * asks one of them to adopt it (docs/protocol.md 8.1). */
        if (!n->cfg.no_ft)
            tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_TREE_UP });
        /* The nodes left out go to every process in the first view now,
         * and into the application's copy before it hears that the tree
         * is ready (docs/protocol.md 7.1). */
        n->ft->flush(n);
        tb_node_session_changed(n);
        if (n->cbs.status)
            n->cbs.status(n->cbs.arg, TB_NODE_READY, 0, "ready");
    } else {
        tb_node_send_ctl(n, n->parent, TB_CTL_READY,
                         tb_ctl_ready_encode(&(tb_ctl_ready_t){ (uint32_t)count }));
    }
}

void tb_node_child_exited(tb_node_t *n, tbon_rank_t r, int status)
{
    if (tb_node_slurm_exited(n, r, status))
        return;
    int i = tb_node_child_index(n, r);
    if (i < 0)
        return;
    tb_child_t *ch = &n->child[i];
    ch->exited = 1;
    ch->status = status;
    if (tb_node_life(n) != TB_LIFE_STARTING || ch->state == CH_READY || ch->left_out)
        return;
    char how[64];
    tb_node_describe_exit(status, how, sizeof how);
    /* Its own words, when it said something: they travelled up the remote
     * shell's stderr and are at hand (docs/cluster.md, "Errors and logs"). */
    char said[320];
    int has = tb_relay_first_line(n->relay, r, said, sizeof said);
    tb_node_left_out(n, (size_t)i, TBON_ELAUNCH, 0, "rank %u on host %s %s before it was ready%s%s",
                     r, host_of(n, r), how, has ? ": " : "", has ? said : "");
    tb_node_relaunch(n);
}

void tb_node_on_missing(tb_node_t *n, const tb_ctl_missing_t *m, tbon_packet_t *p)
{
    size_t size = tb_topology_size(n->topo);
    if (m->rank == 0 || m->rank >= size || m->parent >= size) {
        TB_WARN("startup", "MISSING of rank %u (parent %u) is not about our tree; ignored",
                m->rank, m->parent);
        return;
    }
    if (n->role != TB_ROLE_FE) {
        tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_MISSING,
                                       .u.missing = { m->rank, m->parent, m->moved,
                                                      m->nmoved } });
        tb_node_send_ctl(n, n->parent, TB_CTL_MISSING, tbon_packet_ref(p));
        return;
    }
    if (tb_node_life(n) != TB_LIFE_STARTING)
        return;
    report(n, m->code, m->rank, m->parent, m->msg, m->moved, m->nmoved);
}

void tb_node_startup_timer(tb_node_t *n)
{
    int64_t now = tb_now_ms();
    if (now < n->start_deadline) {
        /* A child that has not connected by its time is left out. */
        for (size_t i = 0; i < n->nchild; i++) {
            tb_child_t *ch = &n->child[i];
            if (ch->state == CH_LAUNCHED && !ch->left_out && ch->due &&
                connect_check(n, ch) <= now)
                tb_node_left_out(n, i, TBON_ETIMEOUT, 0,
                                 "rank %u on host %s did not connect within %lld ms", ch->rank,
                                 host_of(n, ch->rank), (long long)(now - ch->launched_at));
        }
        tb_node_relaunch(n);
        if (!n->failed)
            tb_node_arm_start(n);
        return;
    }
    int ms = n->cfg.startup_timeout_ms > 0 ? n->cfg.startup_timeout_ms : 30000;
    for (size_t i = 0; i < n->nchild && !n->failed; i++) {
        tb_child_t *ch = &n->child[i];
        if (ch->left_out || ch->state == CH_READY)
            continue;
        const char *what = ch->state == CH_LAUNCHED ? "did not connect"
                         : ch->state == CH_CONNECTED ? "did not report its subtree ready"
                         : "closed its connection and did not exit";
        if (n->role == TB_ROLE_FE && strict(n))
            tb_node_fail(n, TBON_ETIMEOUT, "rank %u on host %s %s within %d ms", ch->rank,
                         host_of(n, ch->rank), what, ms);
        else
            tb_node_left_out(n, i, TBON_ETIMEOUT, 1, "rank %u on host %s %s within %d ms",
                             ch->rank, host_of(n, ch->rank), what, ms);
    }
    tb_node_check_ready(n);
    if (tb_node_life(n) == TB_LIFE_STARTING)
        tb_node_fail(n, TBON_ETIMEOUT, "rank %u on host %s: start-up timed out after %d ms",
                     n->rank, host_of(n, n->rank), ms);
}
