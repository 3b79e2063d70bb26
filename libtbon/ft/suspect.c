/* suspect.c - silence is suspicion, not death (seed 002 section 3:
 * suspicion reports, a threshold, refutation; docs/fault-tolerance.md).
 *
 * The EDS finds a peer silent past its heartbeat timeout and tells the
 * reactor (TB_CMD_SUSPECT); the reactor stops waiting for a suspected child
 * in its waves and tells the FE: directly at the FE, else by a notice
 * (notice.c). The FE keeps one suspicion per rank with the observers that
 * hold it. It confirms a suspicion that has stood for the suspicion window
 * with two independent observers (the suspect's parent and one of its
 * children, say), or with one where there can be no second (a back-end, a
 * node with no live child), or with one for three windows (the others
 * could not say: stopped or busy): the rank is then failed in the view,
 * which fences it everywhere, and its observers get the verdict, so that
 * the suspect's children leave it for an adopter. Any observer that hears
 * the suspect again refutes the suspicion: it ends
 * (TBON_EV_NODE_ALIVE), and the suspect counts in the next waves. The FE
 * itself is never suspected (eds.c): only its end ends the session. */
#include "ft/ft_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/clock.h"
#include "util/log.h"
#include "topo/reconfig.h"

#define MAX_OBS 8

struct tb_susp {
    tbon_rank_t r;
    uint32_t inc;
    int64_t since;                    /* ms: the first observer's report */
    size_t nobs;
    tbon_rank_t obs[MAX_OBS];         /* the observers (0: the FE) */
    struct sockaddr_storage addr[MAX_OBS];   /* where their verdicts go */
    socklen_t alen[MAX_OBS];          /* 0: the FE's own */
};

int tb_suspect_window_ms(const tb_node_t *n)
{
    if (n->cfg.suspect_ms > 0)
        return n->cfg.suspect_ms;
    int w = n->cfg.heartbeat_ms / 2;
    return w < 100 ? 100 : w;
}

void tb_suspect_cmd(tb_node_t *n, tbon_rank_t r, int on, int silent_ms)
{
    struct tb_ft *ft = n->ftst;
    int i = tb_node_child_index(n, r);
    if (i >= 0 && n->child[i].conn && n->child[i].suspect != on) {
        n->child[i].suspect = on;
        if (on) {
            TB_WARN("ft", "rank %u sent nothing for %d ms: suspected; the waves go on "
                    "without it", r, silent_ms);
            tb_stream_child_suspect(n, (size_t)i);
        } else {
            TB_INFO("ft", "rank %u is heard again: no longer suspected", r);
        }
    }
    if (!ft->ft_ready || tb_node_ending(n) || r >= tb_topology_size(n->topo) ||
        !tb_topology_alive(n->topo, r))
        return;
    uint32_t inc = tb_topology_incarnation(n->topo, r);
    if (n->role == TB_ROLE_FE)
        tb_suspect_fe(n, r, inc, 0, on, NULL, 0);
    else        /* sent again on every beat while it lasts: a datagram may be lost */
        tb_ft_up(n)->notice_send(n, on ? TB_NOTICE_SUSPECT : TB_NOTICE_ALIVE, r, inc);
}

static struct tb_susp *find(const struct tb_ft_fe *fe, tbon_rank_t r)
{
    for (size_t i = 0; i < fe->nsusp; i++)
        if (fe->susp[i].r == r)
            return &fe->susp[i];
    return NULL;
}

static void drop(struct tb_ft_fe *fe, struct tb_susp *s)
{
    *s = fe->susp[--fe->nsusp];
}

void tb_suspect_fe(tb_node_t *n, tbon_rank_t r, uint32_t inc, tbon_rank_t from, int on,
                   const void *addr, socklen_t alen)
{
    struct tb_ft_fe *fe = n->ftst->fe;
    if (!fe || r == 0 || r >= tb_topology_size(n->topo))
        return;
    if (!tb_topology_alive(n->topo, r)) {         /* confirmed already */
        if (on)
            tb_ft_up(n)->notice_verdict(n, addr, alen, r, tb_topology_incarnation(n->topo, r),
                              TB_VERDICT_FAILED);
        return;
    }
    if (tb_inc_gen(inc) != tb_inc_gen(tb_topology_incarnation(n->topo, r)))
        return;                 /* about an older (or unknown) process of r */
    struct tb_susp *s = find(fe, r);
    if (!on) {
        /* Refuted: the suspect spoke to one of its observers. */
        if (s) {
            drop(fe, s);
            TB_INFO("ft", "rank %u is heard again (by rank %u): no longer suspected", r, from);
            tb_node_emit(n, TBON_EV_NODE_ALIVE, r, from, inc, 0);
        }
        tb_ft_up(n)->notice_verdict(n, addr, alen, r, inc, TB_VERDICT_CLEARED);
        return;
    }
    if (!s) {
        struct tb_susp *v = realloc(fe->susp, (fe->nsusp + 1) * sizeof *v);
        if (!v)
            return;
        fe->susp = v;
        s = &fe->susp[fe->nsusp++];
        memset(s, 0, sizeof *s);
        s->r = r;
        s->inc = inc;
        s->since = tb_now_ms();
        TB_WARN("ft", "rank %u suspected by rank %u: it has been silent past its heartbeat "
                "timeout", r, from);
        tb_node_emit(n, TBON_EV_NODE_SUSPECT, r, from, inc, 0);
    }
    size_t k = 0;
    while (k < s->nobs && s->obs[k] != from)
        k++;
    if (k == s->nobs && k < MAX_OBS)
        s->obs[s->nobs++] = from;
    if (k < MAX_OBS && addr && alen <= sizeof s->addr[k]) {
        memcpy(&s->addr[k], addr, alen);
        s->alen[k] = alen;
    }
    tb_ft_up(n)->notice_verdict(n, addr, alen, r, inc, TB_VERDICT_SUSPECTED);
}

/* How many observers confirm r: two where a second can see it (a parent and
 * a live child), else one. */
static size_t needed(const tb_node_t *n, tbon_rank_t r)
{
    size_t nk = 0;
    const tbon_rank_t *kids = tb_topology_children(n->topo, r, &nk);
    for (size_t i = 0; i < nk; i++)
        if (tb_topology_alive(n->topo, kids[i]))
            return 2;
    return 1;
}

void tb_suspect_timers(tb_node_t *n, int64_t now)
{
    struct tb_ft_fe *fe = n->ftst->fe;
    if (!fe || tb_node_ending(n))
        return;
    int64_t w = tb_suspect_window_ms(n);
    for (size_t i = 0; i < fe->nsusp;) {
        struct tb_susp s = fe->susp[i];
        int64_t age = now - s.since;
        if (!((s.nobs >= needed(n, s.r) && age >= w) || age >= 3 * w)) {
            i++;
            continue;
        }
        drop(fe, &fe->susp[i]);
        for (size_t k = 0; k < s.nobs; k++)
            if (s.alen[k])
                tb_ft_up(n)->notice_verdict(n, &s.addr[k], s.alen[k], s.r, s.inc, TB_VERDICT_FAILED);
        char how[160];
        snprintf(how, sizeof how, "suspected by %zu observer%s (first rank %u) and not heard "
                 "from for %lld ms since", s.nobs, s.nobs == 1 ? "" : "s", s.obs[0],
                 (long long)age);
        TB_WARN("ft", "rank %u: %s: taken for failed", s.r, how);
        tb_ft_up(n)->failed(n, s.r, s.inc, how);
    }
}

void tb_suspect_next(const tb_node_t *n, int64_t *next)
{
    const struct tb_ft_fe *fe = n->ftst->fe;
    if (!fe)
        return;
    int64_t w = tb_suspect_window_ms(n);
    for (size_t i = 0; i < fe->nsusp; i++) {
        int64_t due = fe->susp[i].since + (fe->susp[i].nobs >= needed(n, fe->susp[i].r) ? w
                                                                                        : 3 * w);
        if (due < *next)
            *next = due;
    }
}

void tb_suspect_forget(tb_node_t *n, tbon_rank_t r)
{
    struct tb_ft_fe *fe = n->ftst->fe;
    struct tb_susp *s = fe ? find(fe, r) : NULL;
    if (s)
        drop(fe, s);
}

void tb_suspect_verdict(tb_node_t *n, tbon_rank_t r, uint32_t inc, int verdict)
{
    if (verdict != TB_VERDICT_FAILED || r >= tb_topology_size(n->topo) ||
        tb_inc_gen(inc) != tb_inc_gen(tb_topology_incarnation(n->topo, r)))
        return;
    /* The FE has failed our parent: it is fenced, and its view may never
     * reach us through it (it is stopped, say). Leave it for an adopter. */
    if (n->parent && n->parent->rank == r && !tb_node_ending(n)) {
        TB_WARN("ft", "the front-end confirmed that the parent (rank %u) failed: leaving it", r);
        tb_node_parent_lost(n, "the front-end confirmed the parent failed");
    }
}

void tb_suspect_free(tb_node_t *n)
{
    struct tb_ft_fe *fe = n->ftst ? n->ftst->fe : NULL;
    if (!fe)
        return;
    free(fe->susp);
    fe->susp = NULL;
    fe->nsusp = 0;
    free(fe->notice_seq);
    fe->notice_seq = NULL;
}
