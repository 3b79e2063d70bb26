/* suspect.c - silence is suspicion, not death (seed 002 section 3:
 * suspicion reports, a threshold, refutation; docs/fault-tolerance.md).
 *
 * The EDS finds a peer silent past its heartbeat timeout (or its link
 * acknowledging nothing past the acknowledgement timeout) and tells the
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
#include "util/hot.h"

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

/* The suspicions (FE: one per rank, with its observers; empty elsewhere). */
struct tb_suspect {
    tb_ft_ctx_t *cx;
    struct tb_susp *susp;
    size_t nsusp;
};

tb_suspect_t *tb_suspect_new(tb_ft_ctx_t *cx)
{
    tb_suspect_t *sp = calloc(1, sizeof *sp);
    if (sp)
        sp->cx = cx;
    return sp;
}

void tb_suspect_destroy(tb_suspect_t *sp)
{
    if (!sp)
        return;
    free(sp->susp);
    free(sp);
}

int tb_suspect_window_ms(const tb_suspect_t *sp)
{
    const tb_nft_t *nd = &sp->cx->nd;
    if (nd->suspect_ms > 0)
        return nd->suspect_ms;
    int w = nd->heartbeat_ms / 2;
    return w < 100 ? 100 : w;
}

void tb_suspect_cmd(tb_suspect_t *sp, tbon_rank_t r, int on, int silent_ms)
{
    tb_ft_ctx_t *cx = sp->cx;
    const tb_nft_t *nd = &cx->nd;
    int i = nd->ops->child_index(nd->n, r);
    int how = on;
    on = on != 0;
    if (i >= 0 && nd->ops->child_suspect(nd->n, (size_t)i, on)) {
        if (how == TB_SUSPECT_LINK)
            TB_WARN("ft", "rank %u: its kernel has acknowledged nothing for %d ms (a cut link? "
                    "its host gone?): suspected; the waves go on without it", r, silent_ms);
        else if (on)
            TB_WARN("ft", "rank %u sent nothing for %d ms: suspected; the waves go on "
                    "without it", r, silent_ms);
        else
            TB_INFO("ft", "rank %u is heard again: no longer suspected", r);
    }
    if (!cx->ready || tb_ft_ending(cx) || r >= tb_topology_size(nd->topo) ||
        !tb_topology_alive(nd->topo, r))
        return;
    uint32_t inc = tb_topology_incarnation(nd->topo, r);
    if (tb_ft_is_fe(cx))
        tb_suspect_fe(sp, r, inc, 0, on, NULL, 0);
    else        /* sent again on every beat while it lasts: a datagram may be lost */
        cx->up->notice_send(cx->up_arg, on ? TB_NOTICE_SUSPECT : TB_NOTICE_ALIVE, r, inc);
}

static struct tb_susp *find(const tb_suspect_t *sp, tbon_rank_t r)
{
    for (size_t i = 0; i < sp->nsusp; i++)
        if (sp->susp[i].r == r)
            return &sp->susp[i];
    return NULL;
}

static void drop(tb_suspect_t *sp, struct tb_susp *s)
{
    *s = sp->susp[--sp->nsusp];
}

static void verdict(tb_suspect_t *sp, const void *addr, socklen_t alen, tbon_rank_t r,
                    uint32_t inc, int v)
{
    sp->cx->up->notice_verdict(sp->cx->up_arg, addr, alen, r, inc, v);
}

/* A new suspicion of r (incarnation inc), first reported by from. */
static struct tb_susp *suspect_new(tb_suspect_t *sp, tbon_rank_t r, uint32_t inc,
                                   tbon_rank_t from)
{
    struct tb_susp *v = realloc(sp->susp, (sp->nsusp + 1) * sizeof *v);
    if (!v)
        return NULL;
    sp->susp = v;
    struct tb_susp *s = &sp->susp[sp->nsusp++];
    memset(s, 0, sizeof *s);
    s->r = r;
    s->inc = inc;
    s->since = tb_now_ms();
    TB_WARN("ft", "rank %u suspected by rank %u: nothing heard from it in time (past its "
            "heartbeat timeout, or its link acknowledging nothing)", r, from);
    tb_ft_emit(sp->cx, TBON_EV_NODE_SUSPECT, r, from, inc, 0);
    return s;
}

void tb_suspect_fe(tb_suspect_t *sp, tbon_rank_t r, uint32_t inc, tbon_rank_t from, int on,
                   const void *addr, socklen_t alen)
{
    const tb_topology_t *t = sp->cx->nd.topo;
    if (!tb_ft_is_fe(sp->cx) || r == 0 || r >= tb_topology_size(t))
        return;
    if (!tb_topology_alive(t, r)) {         /* confirmed already */
        if (on)
            verdict(sp, addr, alen, r, tb_topology_incarnation(t, r), TB_VERDICT_FAILED);
        return;
    }
    if (tb_inc_gen(inc) != tb_inc_gen(tb_topology_incarnation(t, r)))
        return;                 /* about an older (or unknown) process of r */
    struct tb_susp *s = find(sp, r);
    if (!on) {
        /* Refuted: the suspect spoke to one of its observers. */
        if (s) {
            drop(sp, s);
            TB_INFO("ft", "rank %u is heard again (by rank %u): no longer suspected", r, from);
            tb_ft_emit(sp->cx, TBON_EV_NODE_ALIVE, r, from, inc, 0);
        }
        verdict(sp, addr, alen, r, inc, TB_VERDICT_CLEARED);
        return;
    }
    if (!s && !(s = suspect_new(sp, r, inc, from)))
        return;
    size_t k = 0;
    while (k < s->nobs && s->obs[k] != from)
        k++;
    if (k == s->nobs && k < MAX_OBS)
        s->obs[s->nobs++] = from;
    if (k < MAX_OBS && addr && alen <= sizeof s->addr[k]) {
        memcpy(&s->addr[k], addr, alen);
        s->alen[k] = alen;
    }
    verdict(sp, addr, alen, r, inc, TB_VERDICT_SUSPECTED);
}

/* How many observers confirm r: two where a second can see it (a parent and
 * a live child), else one. */
static size_t needed(const tb_suspect_t *sp, tbon_rank_t r)
{
    const tb_topology_t *t = sp->cx->nd.topo;
    size_t nk = 0;
    const tbon_rank_t *kids = tb_topology_children(t, r, &nk);
    for (size_t i = 0; i < nk; i++)
        if (tb_topology_alive(t, kids[i]))
            return 2;
    return 1;
}

TB_HOT int tb_suspect_timers(tb_suspect_t *sp, int64_t now)
{
    if (!tb_ft_is_fe(sp->cx) || tb_ft_ending(sp->cx))
        return 0;
    int acted = 0;
    int64_t w = tb_suspect_window_ms(sp);
    for (size_t i = 0; i < sp->nsusp;) {
        struct tb_susp s = sp->susp[i];
        int64_t age = now - s.since;
        if (!((s.nobs >= needed(sp, s.r) && age >= w) || age >= 3 * w)) {
            i++;
            continue;
        }
        drop(sp, &sp->susp[i]);
        for (size_t k = 0; k < s.nobs; k++)
            if (s.alen[k])
                verdict(sp, &s.addr[k], s.alen[k], s.r, s.inc, TB_VERDICT_FAILED);
        char how[160];
        snprintf(how, sizeof how, "suspected by %zu observer%s (first rank %u) and not heard "
                 "from for %lld ms since", s.nobs, s.nobs == 1 ? "" : "s", s.obs[0],
                 (long long)age);
        TB_WARN("ft", "rank %u: %s: taken for failed", s.r, how);
        sp->cx->up->failed(sp->cx->up_arg, s.r, s.inc, how);
        acted = 1;
    }
    return acted;
}

TB_HOT void tb_suspect_next(const tb_suspect_t *sp, int64_t *next)
{
    if (!sp->nsusp)
        return;         /* every turn of every node: the window costs more */
    int64_t w = tb_suspect_window_ms(sp);
    for (size_t i = 0; i < sp->nsusp; i++) {
        const struct tb_susp *s = &sp->susp[i];
        int64_t due = s->since + (s->nobs >= needed(sp, s->r) ? w : 3 * w);
        if (due < *next)
            *next = due;
    }
}

void tb_suspect_forget(tb_suspect_t *sp, tbon_rank_t r)
{
    struct tb_susp *s = find(sp, r);
    if (s)
        drop(sp, s);
}

size_t tb_suspect_observers(const tb_suspect_t *sp, tbon_rank_t r)
{
    const struct tb_susp *s = find(sp, r);
    return s ? s->nobs : 0;
}

void tb_suspect_verdict(tb_suspect_t *sp, tbon_rank_t r, uint32_t inc, int verdict)
{
    tb_ft_ctx_t *cx = sp->cx;
    const tb_nft_t *nd = &cx->nd;
    if (verdict != TB_VERDICT_FAILED || r >= tb_topology_size(nd->topo) ||
        tb_inc_gen(inc) != tb_inc_gen(tb_topology_incarnation(nd->topo, r)))
        return;
    /* The FE has failed our parent: it is fenced, and its view may never
     * reach us through it (it is stopped, say). Leave it for an adopter. */
    if ((nd->ops->parent_flags(nd->n) & TB_NFT_CONN) && nd->ops->parent_rank(nd->n) == r &&
        !tb_ft_ending(cx)) {
        TB_WARN("ft", "the front-end confirmed that the parent (rank %u) failed: leaving it", r);
        nd->ops->parent_lost(nd->n, "the front-end confirmed the parent failed");
    }
}
