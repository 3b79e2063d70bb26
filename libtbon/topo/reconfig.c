/* reconfig.c - adopter choice for orphans and the rules that apply failure and
 * adoption reports to a topology copy (seed 003 V-A; see reconfig.h)
 *
 * The adopter index is one array of the nodes of height >= 1 attached to the
 * FE, sorted by (height, fan-out, rank): the buckets by height are its runs,
 * so "every potential adopter for old height h, sorted" is the suffix from
 * the first entry of height >= h, and the rotated order is read off it
 * without sorting anything per orphan. A per-rank slot array says where each
 * rank sits, so that an update keeps the entries whose key did not change
 * (already in order) and sorts only the others before merging.
 */
#include "topo/reconfig.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

#define NONE  TBON_RANK_NONE
#define NOPOS UINT32_MAX

typedef struct ent {
    uint32_t h, f, r;            /* height, fan-out, rank */
} ent_t;

struct tb_adopt_index {
    bool      valid;             /* e[] reflects the topology with this digest */
    uint64_t  digest;
    size_t    size;
    ent_t    *e, *spare;         /* sorted entries; the next sorted array */
    uint32_t  len, ecap;         /* entries; room in e, spare and fresh */
    ent_t    *fresh;             /* scratch: entries new or changed */
    uint32_t *slot;              /* rank -> position in e, NOPOS if absent */
    uint32_t  nslot;
    uint32_t *queue;             /* scratch: breadth-first walk */
    uint32_t  qcap;
    uint8_t  *keep;              /* scratch: old entries still right */
    uint32_t  kcap;
};

/* ---- the index ----------------------------------------------------------- */

static int ent_cmp(const void *pa, const void *pb)
{
    const ent_t *a = pa, *b = pb;
    if (a->h != b->h)
        return a->h < b->h ? -1 : 1;
    if (a->f != b->f)
        return a->f < b->f ? -1 : 1;
    return (a->r > b->r) - (a->r < b->r);
}

static bool ent_less(const ent_t *a, const ent_t *b)
{
    return ent_cmp(a, b) < 0;
}

/* Grow *arr (room for *cap elements of elem bytes) to hold want; 0 or -1. */
static int grow(void **arr, uint32_t *cap, size_t want, size_t elem)
{
    if (want <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < want)
        c *= 2;
    void *p = realloc(*arr, c * elem);
    if (!p)
        return TBON_ENOMEM;
    *arr = p;
    *cap = (uint32_t)c;
    return 0;
}

/* Room for want entries in e, spare and fresh (one capacity); 0 or -1. */
static int reserve_entries(tb_adopt_index_t *x, size_t want)
{
    if (want <= x->ecap)
        return 0;
    size_t c = x->ecap ? x->ecap : 64;
    while (c < want)
        c *= 2;
    ent_t **arrs[3] = { &x->e, &x->spare, &x->fresh };
    for (int i = 0; i < 3; i++) {
        ent_t *p = realloc(*arrs[i], c * sizeof **arrs[i]);
        if (!p)
            return TBON_ENOMEM;      /* the ones grown so far are merely larger */
        *arrs[i] = p;
    }
    x->ecap = (uint32_t)c;
    return 0;
}

/* Forget every entry (after a failed update). */
static void index_clear(tb_adopt_index_t *x)
{
    for (uint32_t i = 0; i < x->len; i++)
        x->slot[x->e[i].r] = NOPOS;
    x->len = 0;
    x->valid = false;
}

tb_adopt_index_t *tb_adopt_index_new(const tb_topology_t *t)
{
    if (!t)
        return NULL;
    tb_adopt_index_t *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    if (tb_adopt_index_update(x, t) != 0) {
        tb_adopt_index_destroy(x);
        return NULL;
    }
    return x;
}

void tb_adopt_index_destroy(tb_adopt_index_t *x)
{
    if (!x)
        return;
    free(x->e);
    free(x->spare);
    free(x->fresh);
    free(x->slot);
    free(x->queue);
    free(x->keep);
    free(x);
}

/* Breadth-first from the FE over nodes of height >= 1 as adopters
 * (tb_adopt_height: childless commnodes too). Children of a height-1 node
 * are all of height 0, so they are not even looked at unless some commnode
 * has no children (it may hang under a height-1 node): the walk costs
 * O(nodes of height >= 1) then, O(size) while such a commnode exists.
 * Returns the
 * number of nodes in x->queue and their largest rank in *maxr, or -1. */
static long walk_adopters(tb_adopt_index_t *x, const tb_topology_t *t, uint32_t *maxr)
{
    size_t cnt = 0;
    *maxr = 0;
    if (tb_topology_size(t) == 0)
        return 0;
    if (grow((void **)&x->queue, &x->qcap, 1, sizeof *x->queue) != 0)
        return TBON_ENOMEM;
    x->queue[cnt++] = 0;
    /* Children of a node of height 1 are looked at only when some commnode
     * has no children (they are all of height 0 otherwise). */
    uint32_t min = tb_topology_num_childless(t) ? 1 : 2;
    for (size_t i = 0; i < cnt; i++) {
        uint32_t v = x->queue[i];
        if (v > *maxr)
            *maxr = v;
        if (tb_topology_height(t, v) < min)
            continue;
        size_t k;
        const tbon_rank_t *kids = tb_topology_children(t, v, &k);
        if (grow((void **)&x->queue, &x->qcap, cnt + k, sizeof *x->queue) != 0)
            return TBON_ENOMEM;
        for (size_t j = 0; j < k; j++)
            if (tb_topology_height(t, kids[j]) >= 1 ||
                (min == 1 && tb_adopt_height(t, kids[j]) >= 1))
                x->queue[cnt++] = kids[j];
    }
    return (long)cnt;
}

int tb_adopt_index_update(tb_adopt_index_t *x, const tb_topology_t *t)
{
    if (!x || !t)
        return TBON_EINVAL;
    uint64_t digest = tb_topology_digest(t);
    size_t size = tb_topology_size(t);
    if (x->valid && x->digest == digest && x->size == size)
        return 0;
    x->valid = false;
    uint32_t maxr;
    long cnt = walk_adopters(x, t, &maxr);
    if (cnt < 0)
        goto nomem;
    /* Every allocation before the first change, so failure loses nothing but
     * the entries themselves. */
    if (reserve_entries(x, (size_t)cnt) != 0)
        goto nomem;
    if (grow((void **)&x->keep, &x->kcap, x->len, 1) != 0)
        goto nomem;
    if (cnt > 0 && maxr >= x->nslot) {
        uint32_t old = x->nslot;
        if (grow((void **)&x->slot, &x->nslot, (size_t)maxr + 1, sizeof *x->slot) != 0)
            goto nomem;
        memset(x->slot + old, 0xff, (size_t)(x->nslot - old) * sizeof *x->slot);
    }

    /* Keep the old entries whose key is unchanged; collect the rest. */
    if (x->len)
        memset(x->keep, 0, x->len);
    uint32_t nf = 0;
    for (long i = 0; i < cnt; i++) {
        uint32_t v = x->queue[i];
        ent_t k = { tb_adopt_height(t, v), (uint32_t)tb_topology_num_children(t, v), v };
        uint32_t s = x->slot[v];
        if (s != NOPOS && x->e[s].h == k.h && x->e[s].f == k.f)
            x->keep[s] = 1;
        else
            x->fresh[nf++] = k;
    }
    if (nf > 1)                 /* (fresh is NULL while nothing was ever indexed) */
        qsort(x->fresh, nf, sizeof *x->fresh, ent_cmp);

    /* Merge the kept old entries (in order) with the sorted fresh ones. */
    for (uint32_t i = 0; i < x->len; i++)
        x->slot[x->e[i].r] = NOPOS;
    uint32_t i = 0, j = 0, k = 0;
    for (;;) {
        while (i < x->len && !x->keep[i])
            i++;
        const ent_t *next;
        if (i < x->len && (j == nf || ent_less(&x->e[i], &x->fresh[j])))
            next = &x->e[i++];
        else if (j < nf)
            next = &x->fresh[j++];
        else
            break;
        x->spare[k] = *next;
        x->slot[next->r] = k++;
    }
    ent_t *tmp = x->e;
    x->e = x->spare;
    x->spare = tmp;
    x->len = k;
    x->digest = digest;
    x->size = size;
    x->valid = true;
    return 0;
nomem:
    index_clear(x);
    return TBON_ENOMEM;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Whether a may adopt o now that p failed (the rules of reconfig.h). */
static bool acceptable(const tb_topology_t *t, tbon_rank_t a, tbon_rank_t o,
                       tbon_rank_t p, uint32_t min_height)
{
    if (a == o || a == p || !tb_topology_alive(t, a) ||
        tb_topology_role(t, a) == TB_ROLE_BE || tb_adopt_height(t, a) < min_height)
        return false;
    tbon_rank_t v = a;
    for (;;) {
        tbon_rank_t up = tb_topology_parent(t, v);
        if (up == NONE)
            return v == 0;
        if (up == o || up == p)
            return false;
        v = up;
    }
}

size_t tb_adopt_candidates(const tb_adopt_index_t *x, const tb_topology_t *t,
                           tbon_rank_t o, tbon_rank_t failed_parent, uint32_t old_height,
                           tbon_rank_t *out, size_t cap)
{
    size_t n = tb_topology_size(t);
    if (!x || !out || cap == 0 || o == 0 || o >= n || !tb_topology_alive(t, o) ||
        failed_parent == 0 || failed_parent >= n || failed_parent == o)
        return 0;
    uint32_t h0 = old_height ? old_height : 1;
    /* The adopters for h0, in weight order, are the suffix of e from the
     * first entry of height >= h0. */
    uint32_t lo = 0, hi = x->len;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (x->e[mid].h < h0)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t base = lo, len = x->len - base;
    /* The FE is the adopter of last resort (docs/fault-tolerance.md), never a regular
     * candidate: it has the greatest height, so it is the last entry; it is
     * left out of the rotation and appended below. */
    if (len && x->e[x->len - 1].r == 0)
        len--;
    /* The failed parent is still there when o's copy has not removed it yet:
     * leave it out of the list itself, so that all its orphans rotate over
     * the same list whichever the copy. */
    size_t npk = 0;
    const tbon_rank_t *pk = tb_topology_children(t, failed_parent, &npk);
    uint32_t one[1], *skip = one, nskip = 0;
    if (npk && h0 == 1) {
        /* So are its children that are childless commnodes (height 1 as
         * adopters, the orphan among them): they are in the list only
         * while the copy has not removed their parent. */
        skip = malloc((npk + 1) * sizeof *skip);
        if (!skip) {
            skip = one;
            npk = 0;
        }
    } else {
        npk = 0;
    }
    uint32_t ps = failed_parent < x->nslot ? x->slot[failed_parent] : NOPOS;
    if (ps != NOPOS && ps >= base)
        skip[nskip++] = ps;
    for (size_t i = 0; i < npk; i++) {
        uint32_t cs = pk[i] < x->nslot ? x->slot[pk[i]] : NOPOS;
        if (cs != NOPOS && cs >= base && x->e[cs].r != 0)
            skip[nskip++] = cs;
    }
    if (nskip > 1)
        qsort(skip, nskip, sizeof *skip, u32_cmp);
    len -= nskip;
    size_t w = 0;
    bool fe = false;
    if (len) {
        /* Round-robin by rank (seed 003 V-A): the i-th orphan starts at
         * position rank mod len, so adoptions spread evenly. */
        uint32_t start = (uint32_t)(o % len);
        for (uint32_t j = 0; j < len && w < cap; j++) {
            uint32_t k = start + j;
            if (k >= len)
                k -= len;
            uint32_t idx = base + k;
            for (uint32_t q = 0; q < nskip && idx >= skip[q]; q++)
                idx++;
            tbon_rank_t a = x->e[idx].r;
            if (!acceptable(t, a, o, failed_parent, h0))
                continue;
            out[w++] = a;
            fe |= a == 0;
        }
    }
    if (skip != one)
        free(skip);
    /* The FE is the adopter of last resort. */
    if (!fe) {
        if (w < cap)
            out[w++] = 0;
        else
            out[cap - 1] = 0;
    }
    return w;
}

uint32_t tb_adopt_height(const tb_topology_t *t, tbon_rank_t r)
{
    uint32_t h = tb_topology_height(t, r);
    return h == 0 && r != 0 && tb_topology_alive(t, r) &&
           tb_topology_role(t, r) == TB_ROLE_COMMNODE &&
           tb_topology_depth(t, r) < tb_topology_height(t, 0) ? 1 : h;
}

tbon_rank_t tb_join_parent(const tb_topology_t *t, tb_role_t role)
{
    tbon_rank_t best = 0;
    uint32_t bh = UINT32_MAX, min = role == TB_ROLE_BE ? 1 : 2;
    size_t bk = SIZE_MAX, size = tb_topology_size(t);
    for (tbon_rank_t r = 1; r < size; r++) {
        uint32_t h = tb_adopt_height(t, r);
        if (!tb_topology_alive(t, r) || tb_topology_role(t, r) == TB_ROLE_BE || h < min ||
            h > bh)
            continue;
        size_t k = tb_topology_num_children(t, r);
        if ((h == bh && k >= bk) || tb_topology_root_of(t, r) != 0)
            continue;
        best = r;
        bh = h;
        bk = k;
    }
    return best;
}

bool tb_adopt_would_cycle(const tb_topology_t *t, tbon_rank_t o, tbon_rank_t adopter)
{
    size_t n = tb_topology_size(t);
    if (o >= n || adopter >= n)
        return true;
    return adopter == o || tb_topology_in_subtree(t, o, adopter);
}

/* ---- reports ------------------------------------------------------------- */

/* Re-establish the invariant of the pending claims after a change: each
 * pending node is an alive orphan whose claimed adopter is alive and inside
 * its subtree, and it is the lowest rank on that cycle. A claim whose cycle
 * is gone is honoured; a claim whose adopter died is dropped; on a cycle whose
 * lowest rank is another member, that member waits instead. Each step drops a
 * claim or hands it to a lower rank, so this ends. */
static int settle(tb_topology_t *t)
{
    bool again = true;
    while (again) {
        again = false;
        for (size_t i = 0; i < tb_topology_num_pending(t); i++) {
            tbon_rank_t r = tb_topology_pending_rank(t, i);
            tbon_rank_t c = tb_topology_pending(t, r);
            if (!tb_topology_alive(t, r) || !tb_topology_alive(t, c) ||
                tb_topology_role(t, c) == TB_ROLE_BE ||
                tb_topology_parent(t, r) != NONE) {
                tb_topology_set_pending(t, r, NONE);
                again = true;
                break;
            }
            if (tb_topology_root_of(t, c) != r) {
                int rc = tb_topology_move(t, r, c);
                if (rc)
                    return rc;
                tb_topology_set_pending(t, r, NONE);
                again = true;
                break;
            }
            /* c -> ... -> r -> (claim) c is a cycle: find its lowest rank. */
            tbon_rank_t m = r;
            for (tbon_rank_t v = c; v != r; v = tb_topology_parent(t, v))
                if (v < m)
                    m = v;
            if (m == r)
                continue;
            tbon_rank_t pm = tb_topology_parent(t, m);
            int rc = tb_topology_move(t, m, NONE);
            if (rc == 0)
                rc = tb_topology_move(t, r, c);
            if (rc)
                return rc;
            tb_topology_set_pending(t, r, NONE);
            tb_topology_set_pending(t, m, pm);   /* room: one was just freed */
            again = true;
            break;
        }
    }
    return 0;
}

int tb_report_failure(tb_topology_t *t, tbon_rank_t r, uint32_t inc)
{
    if (!t || r >= tb_topology_size(t))
        return TBON_EINVAL;
    if (r == 0)
        return TBON_ETOPOLOGY;
    int changed = 0;
    if (tb_inc_gen(inc) < tb_inc_gen(tb_topology_incarnation(t, r)))
        return 0;           /* about a process since restarted */
    if (inc > tb_topology_incarnation(t, r)) {
        tb_topology_set_incarnation(t, r, inc);
        changed = 1;
    }
    if (tb_topology_alive(t, r)) {
        tb_topology_remove(t, r);
        changed = 1;
        /* Its death may break a cycle that kept a claim pending, and voids
         * the claims naming it (settle drops those). */
        int rc = settle(t);
        if (rc)
            return rc;
    }
    return changed;
}

int tb_report_adoption(tb_topology_t *t, tbon_rank_t o, tbon_rank_t p, uint32_t inc)
{
    size_t n = tb_topology_size(t);
    if (!t || o >= n || p >= n || o == 0 || o == p || inc == 0 ||
        tb_topology_role(t, p) == TB_ROLE_BE)
        return TBON_EINVAL;
    uint32_t cur = tb_topology_incarnation(t, o);
    if (inc < cur)
        return 0;                                   /* stale */
    if (!tb_topology_alive(t, o)) {
        if (inc == cur)
            return 0;
        tb_topology_set_incarnation(t, o, inc);     /* dead, but record it */
        return 1;
    }
    int rc = tb_topology_reserve_pending(t, 1);
    if (rc)
        return rc;
    if (inc == cur) {
        tbon_rank_t claim = tb_topology_parent(t, o);
        if (claim == NONE)
            claim = tb_topology_pending(t, o);
        /* Same adopter: a duplicate. No claim: the winner at this
         * incarnation was already void (dead adopter or a conflict). */
        if (claim == p || claim == NONE)
            return 0;
        /* Two adopters at one incarnation: a conflict, the orphan waits for a
         * higher incarnation. */
        tb_topology_set_pending(t, o, NONE);
        if ((rc = tb_topology_move(t, o, NONE)) != 0)
            return rc;
        rc = settle(t);
        return rc ? rc : 1;
    }
    /* A newer incarnation wins: detach o and let settle() attach it under p,
     * or leave it pending if that would close a cycle. */
    tb_topology_set_incarnation(t, o, inc);
    if ((rc = tb_topology_move(t, o, NONE)) != 0)
        return rc;
    tb_topology_set_pending(t, o, tb_topology_alive(t, p) ? p : NONE);
    rc = settle(t);
    return rc ? rc : 1;
}

int tb_report_join(tb_topology_t *t, tb_role_t role, tbon_rank_t r, tbon_rank_t p,
                   const char *host, uint32_t lid, uint32_t inc)
{
    size_t size = tb_topology_size(t);
    if (!t || !host || r == 0 || r > size || (role != TB_ROLE_BE && role != TB_ROLE_COMMNODE))
        return TBON_EINVAL;
    /* A parent dead by now (or, in a whole view, one that comes later): under
     * the FE until the reports say more. */
    if (p >= size || !tb_topology_alive(t, p) || tb_topology_role(t, p) == TB_ROLE_BE)
        p = 0;
    if (r == size) {
        tbon_rank_t got;
        int rc = tb_topology_add_child(t, p, host, lid, role, &got);
        if (rc == 0 && inc)
            rc = tb_topology_set_incarnation(t, got, inc);
        return rc ? rc : 1;
    }
    uint32_t cur = tb_topology_incarnation(t, r);
    if (tb_inc_gen(inc) <= tb_inc_gen(cur))
        return 0;
    if (tb_topology_role(t, r) != role)
        return TBON_EINVAL;
    if (tb_topology_alive(t, r)) {
        int rc = tb_report_failure(t, r, cur);     /* its old process is gone */
        if (rc < 0)
            return rc;
    }
    int rc = tb_topology_revive(t, r, p, inc);
    return rc ? rc : 1;
}
