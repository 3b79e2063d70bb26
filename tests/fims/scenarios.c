/* scenarios.c - the kinds of failure a schedule item asks for (--schedule
 * T:KIND): which live commnodes each one kills, chosen on the front-end's
 * private copy of the topology, and whose orphans the kill makes.
 *   one, every=P  one random live commnode (every=P: one each P seconds)
 *   several=K     K random live commnodes at once
 *   depth1        a child of the front-end
 *   adopter       a commnode with children, then (ADOPTER_DELAY_MS later)
 *                 the node most likely to adopt its first orphan
 *   parent        a commnode and its parent at once */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <tbon/tbon.h>

#include "fims.h"
#include "topo/reconfig.h"

uint64_t pick_rng;

static int is_live_commnode(tbon_rank_t r)
{
    return tb_topology_role(fe.topo, r) == TB_ROLE_COMMNODE && tb_topology_alive(fe.topo, r) &&
           !fe.killed[r];
}

/* A random live commnode satisfying ok (NULL: any) and not in excl[0..nex),
 * or TBON_RANK_NONE. */
static tbon_rank_t pick(int (*ok)(tbon_rank_t), const tbon_rank_t *excl, size_t nex)
{
    size_t size = tb_topology_size(fe.topo), n = 0;
    tbon_rank_t *c = malloc(size * sizeof *c);
    if (!c)
        return TBON_RANK_NONE;
    for (tbon_rank_t r = 1; r < size; r++) {
        int skip = !is_live_commnode(r) || (ok && !ok(r));
        for (size_t i = 0; i < nex && !skip; i++)
            skip = excl[i] == r;
        if (!skip)
            c[n++] = r;
    }
    tbon_rank_t r = n ? c[rng_next(&pick_rng) % n] : TBON_RANK_NONE;
    free(c);
    return r;
}

static int at_depth1(tbon_rank_t r)
{
    return tb_topology_parent(fe.topo, r) == 0;
}

static int has_children(tbon_rank_t r)
{
    return tb_topology_num_children(fe.topo, r) > 0;
}

static int parent_is_commnode(tbon_rank_t r)
{
    tbon_rank_t p = tb_topology_parent(fe.topo, r);
    return p != TBON_RANK_NONE && p != 0 && is_live_commnode(p);
}

/* The node that will adopt the first orphan of victim: the first of the
 * library's own candidates (libtbon/reconfig.h), computed on a copy of our
 * topology as the orphan will, or NONE if that is the FE (the last resort). */
static tbon_rank_t likely_adopter(tbon_rank_t victim)
{
    size_t n;
    const tbon_rank_t *kids = tb_topology_children(fe.topo, victim, &n);
    if (n == 0)
        return TBON_RANK_NONE;
    tbon_rank_t o = kids[0], out[4], a = TBON_RANK_NONE;
    uint32_t old_height = tb_topology_height(fe.topo, o) + 1;
    tb_topology_t *t = tb_topology_clone(fe.topo);
    if (!t)
        return TBON_RANK_NONE;
    tb_report_failure(t, victim, tb_topology_incarnation(t, victim));
    tb_adopt_index_t *x = tb_adopt_index_new(t);
    size_t k = x ? tb_adopt_candidates(x, t, o, victim, old_height, out, 4) : 0;
    if (k > 0 && out[0] != 0)
        a = out[0];
    tb_adopt_index_destroy(x);
    tb_topology_destroy(t);
    return a;
}

/* Add the children of v (not themselves victims of in) to in's orphans. */
void add_orphans(struct injection *in, tbon_rank_t v)
{
    size_t n;
    const tbon_rank_t *kids = tb_topology_children(fe.topo, v, &n);
    for (size_t i = 0; i < n; i++) {
        int dup = 0;
        for (size_t k = 0; k < in->nv && !dup; k++)
            dup = in->victim[k] == kids[i];
        for (size_t k = 0; k < in->norph && !dup; k++)
            dup = in->orphan[k] == kids[i];
        if (dup)
            continue;
        size_t m = in->norph + 1;
        tbon_rank_t *o = realloc(in->orphan, m * sizeof *o);
        tbon_rank_t *op = realloc(in->old_parent, m * sizeof *op);
        int64_t *a = realloc(in->adopted_us, m * sizeof *a);
        if (o)
            in->orphan = o;
        if (op)
            in->old_parent = op;
        if (a)
            in->adopted_us = a;
        if (!o || !op || !a)
            return;
        in->orphan[in->norph] = kids[i];
        in->old_parent[in->norph] = v;
        in->adopted_us[in->norph] = 0;
        in->norph = m;
    }
}

/* Choose the victims of in (under fe.mu). Returns 0, or -1 with in->note
 * saying why there is nothing to kill. */
int choose_victims(struct injection *in)
{
    const struct item *it = in->item;
    tbon_rank_t r;
    switch (it->kind) {
    case K_ONE:
    case K_EVERY:
        r = pick(NULL, NULL, 0);
        if (r == TBON_RANK_NONE)
            break;
        in->victim[in->nv++] = r;
        return 0;
    case K_SEVERAL:
        while (in->nv < it->k && (r = pick(NULL, in->victim, in->nv)) != TBON_RANK_NONE)
            in->victim[in->nv++] = r;
        if (in->nv == it->k)
            return 0;
        snprintf(in->note, sizeof in->note, "only %zu live commnode%s, %u wanted", in->nv,
                 in->nv == 1 ? "" : "s", it->k);
        in->nv = 0;
        return -1;
    case K_DEPTH1:
        r = pick(at_depth1, NULL, 0);
        if (r == TBON_RANK_NONE)
            break;
        in->victim[in->nv++] = r;
        return 0;
    case K_ADOPTER:
        r = pick(has_children, NULL, 0);
        if (r == TBON_RANK_NONE)
            break;
        in->victim[in->nv++] = r;
        tbon_rank_t a = likely_adopter(r);
        if (a == TBON_RANK_NONE)
            snprintf(in->note, sizeof in->note, "no commnode can adopt (the front-end "
                     "will): the victim only");
        else
            in->victim[in->nv++] = a;
        return 0;
    case K_PARENT:
        r = pick(parent_is_commnode, NULL, 0);
        if (r == TBON_RANK_NONE) {
            snprintf(in->note, sizeof in->note, "no live commnode has a live commnode parent");
            return -1;
        }
        in->victim[in->nv++] = r;
        in->victim[in->nv++] = tb_topology_parent(fe.topo, r);
        return 0;
    }
    snprintf(in->note, sizeof in->note, "no live commnode%s to kill",
             it->kind == K_DEPTH1 ? " at depth 1" : it->kind == K_ADOPTER ? " with children" : "");
    return -1;
}
