/* topology_edit.c - the changes a running tree makes to its topology:
 * failures, adoptions, joins and restarts, and the pending claims of
 * reconfig.c (seed 003, section V-A). The storage is described in topology.c;
 * a change never allocates outside the children pool, so it cannot fail
 * half-way. */
#include <stdlib.h>
#include <string.h>

#include "topo/topology.h"
#include "topo/topology_int.h"
#include "topo/topology_util.h"
#include "util/error.h"

/* ---- children arrays ----------------------------------------------------- */

/* Index of c among p's children (present, by the invariants). */
static uint32_t child_index(const tb_topology_t *t, uint32_t p, uint32_t c)
{
    const uint32_t *a = t->pool + t->coff[p];
    uint32_t lo = 0, hi = t->ccnt[p];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Rebuild the pool compactly; on allocation failure keep the old one. */
static void pool_compact(tb_topology_t *t)
{
    size_t used = 0;
    for (uint32_t r = 0; r < t->n; r++)
        used += t->ccnt[r];
    uint32_t *np = malloc((used + 64) * sizeof *np);
    if (!np)
        return;
    uint32_t off = 0;
    for (uint32_t r = 0; r < t->n; r++) {
        memcpy(np + off, t->pool + t->coff[r], t->ccnt[r] * sizeof *np);
        t->coff[r] = off;
        t->ccap[r] = t->ccnt[r];
        off += t->ccnt[r];
    }
    free(t->pool);
    t->pool = np;
    t->pool_len = off;
    t->pool_cap = used + 64;
    t->pool_garbage = 0;
}

static int pool_room(tb_topology_t *t, size_t more)
{
    if (t->pool_len + more <= t->pool_cap)
        return 0;
    if (t->pool_len + more > UINT32_MAX)
        return TBON_ENOMEM;
    size_t cap = t->pool_cap ? t->pool_cap : 64;
    while (cap < t->pool_len + more)
        cap *= 2;
    uint32_t *np = realloc(t->pool, cap * sizeof *np);
    if (!np)
        return TBON_ENOMEM;
    t->pool = np;
    t->pool_cap = cap;
    return 0;
}

/* Make sure p can take one more child. The only step of a mutation that may
 * fail, so mutations call it before changing anything. */
static int child_reserve(tb_topology_t *t, uint32_t p)
{
    if (t->ccnt[p] < t->ccap[p])
        return 0;
    uint32_t cap = t->ccap[p] ? t->ccap[p] * 2 : 2;
    if (t->pool_garbage > 4096 && t->pool_garbage > t->pool_len / 2)
        pool_compact(t);
    if ((size_t)t->coff[p] + t->ccap[p] == t->pool_len) {  /* last: grow in place */
        if (pool_room(t, cap - t->ccap[p]) != 0)
            return TBON_ENOMEM;
        t->pool_len += cap - t->ccap[p];
    } else {
        if (pool_room(t, cap) != 0)
            return TBON_ENOMEM;
        memcpy(t->pool + t->pool_len, t->pool + t->coff[p], t->ccnt[p] * sizeof *t->pool);
        t->pool_garbage += t->ccap[p];
        t->coff[p] = (uint32_t)t->pool_len;
        t->pool_len += cap;
    }
    t->ccap[p] = cap;
    return 0;
}

static void child_insert(tb_topology_t *t, uint32_t p, uint32_t c)
{
    uint32_t *a = t->pool + t->coff[p];
    uint32_t i = child_index(t, p, c);
    memmove(a + i + 1, a + i, (t->ccnt[p] - i) * sizeof *a);
    a[i] = c;
    t->nbare -= BARE(t, p);
    t->ccnt[p]++;
}

static void child_remove(tb_topology_t *t, uint32_t p, uint32_t c)
{
    uint32_t *a = t->pool + t->coff[p];
    uint32_t i = child_index(t, p, c);
    memmove(a + i, a + i + 1, (t->ccnt[p] - i - 1) * sizeof *a);
    t->ccnt[p]--;
    t->nbare += BARE(t, p);
}

/* ---- upkeep of depths and heights ----------------------------------------- */

/* Give r depth d and its whole subtree the matching depths. Walks the subtree
 * without a stack (down to the first child, across to the next sibling found
 * by binary search, up when a level is done), so it cannot fail. */
static void set_depths(tb_topology_t *t, uint32_t r, uint32_t d)
{
    uint32_t v = r;
    t->depth[r] = d;
    for (;;) {
        if (t->ccnt[v]) {
            uint32_t c = t->pool[t->coff[v]];
            t->depth[c] = t->depth[v] + 1;
            v = c;
            continue;
        }
        for (;;) {
            if (v == r)
                return;
            uint32_t p = t->parent[v];
            uint32_t i = child_index(t, p, v);
            if (i + 1 < t->ccnt[p]) {
                v = t->pool[t->coff[p] + i + 1];
                t->depth[v] = t->depth[p] + 1;
                break;
            }
            v = p;
        }
    }
}

/* p lost a child (or a child got lower): lower heights up the chain while they
 * change. A scan stops as soon as one child still justifies the old height. */
static void heights_after_loss(tb_topology_t *t, uint32_t p)
{
    while (p != NONE) {
        uint32_t old = t->height[p], h = 0;
        const uint32_t *a = t->pool + t->coff[p];
        for (uint32_t i = 0; i < t->ccnt[p] && h != old; i++)
            if (t->height[a[i]] + 1 > h)
                h = t->height[a[i]] + 1;
        if (h == old)
            return;
        t->height[p] = h;
        p = t->parent[p];
    }
}

/* p gained a child of height ch: raise heights up the chain while needed. */
static void heights_after_gain(tb_topology_t *t, uint32_t p, uint32_t ch)
{
    uint32_t h = ch + 1;
    while (p != NONE && t->height[p] < h) {
        t->height[p] = h++;
        p = t->parent[p];
    }
}

/* ---- mutations ----------------------------------------------------------- */

int tb_topology_set_port(tb_topology_t *t, tbon_rank_t r, uint16_t port)
{
    if (!VALID(t, r))
        return TBON_EINVAL;
    t->port[r] = port;
    return 0;
}

int tb_topology_set_incarnation(tb_topology_t *t, tbon_rank_t r, uint32_t inc)
{
    if (!VALID(t, r))
        return TBON_EINVAL;
    t->dsum -= tb_topo_node_hash(t, r);
    t->inc[r] = inc;
    t->dsum += tb_topo_node_hash(t, r);
    return 0;
}

int tb_topology_set_role(tb_topology_t *t, tbon_rank_t r, tb_role_t role)
{
    if (!VALID(t, r) || (role != TB_ROLE_FE && role != TB_ROLE_COMMNODE && role != TB_ROLE_BE))
        return TBON_EINVAL;
    if (r == 0 || role == TB_ROLE_FE || (role == TB_ROLE_BE && t->ccnt[r]))
        return TBON_ETOPOLOGY;
    t->dsum -= tb_topo_node_hash(t, r);
    if (t->alive[r])
        t->nleaves += (role == TB_ROLE_BE) - (t->role[r] == TB_ROLE_BE);
    t->nbare -= BARE(t, r);
    t->role[r] = (uint8_t)role;
    t->nbare += BARE(t, r);
    t->dsum += tb_topo_node_hash(t, r);
    return 0;
}

int tb_topology_remove(tb_topology_t *t, tbon_rank_t r)
{
    if (!VALID(t, r))
        return TBON_EINVAL;
    if (r == 0)
        return TBON_ETOPOLOGY;
    if (!t->alive[r])
        return 0;
    uint32_t p = t->parent[r];
    t->dsum -= tb_topo_node_hash(t, r);
    t->nbare -= BARE(t, r);
    if (p != NONE)
        child_remove(t, p, r);
    for (uint32_t i = 0; i < t->ccnt[r]; i++) {
        uint32_t c = t->pool[t->coff[r] + i];
        t->dsum -= tb_topo_node_hash(t, c);
        t->parent[c] = NONE;
        t->dsum += tb_topo_node_hash(t, c);
        set_depths(t, c, 0);
    }
    t->ccnt[r] = 0;
    t->parent[r] = NONE;
    t->alive[r] = 0;
    t->depth[r] = 0;
    t->height[r] = 0;
    if (t->role[r] == TB_ROLE_BE)
        t->nleaves--;
    t->dsum += tb_topo_node_hash(t, r);
    if (p != NONE)
        heights_after_loss(t, p);
    return 0;
}

int tb_topology_move(tb_topology_t *t, tbon_rank_t r, tbon_rank_t new_parent)
{
    if (!VALID(t, r) || (new_parent != NONE && !VALID(t, new_parent)))
        return TBON_EINVAL;
    if (r == 0 || !t->alive[r])
        return TBON_ETOPOLOGY;
    if (new_parent != NONE &&
        (!t->alive[new_parent] || t->role[new_parent] == TB_ROLE_BE ||
         tb_topology_in_subtree(t, r, new_parent)))
        return TBON_ETOPOLOGY;
    if (new_parent != NONE) {
        int rc = child_reserve(t, new_parent);
        if (rc)
            return rc;
    }
    uint32_t old = t->parent[r];
    t->dsum -= tb_topo_node_hash(t, r);
    if (old != NONE) {
        child_remove(t, old, r);
        heights_after_loss(t, old);
    }
    t->parent[r] = new_parent;
    if (new_parent != NONE) {
        child_insert(t, new_parent, r);
        set_depths(t, r, t->depth[new_parent] + 1);
        heights_after_gain(t, new_parent, t->height[r]);
    } else {
        set_depths(t, r, 0);
    }
    t->dsum += tb_topo_node_hash(t, r);
    return 0;
}

int tb_topology_reparent(tb_topology_t *t, tbon_rank_t r, tbon_rank_t new_parent)
{
    if (!VALID(t, r) || !VALID(t, new_parent))
        return TBON_EINVAL;
    int rc = tb_topology_move(t, r, new_parent);
    if (rc)
        return rc;
    t->dsum -= tb_topo_node_hash(t, r);
    t->inc[r]++;
    t->dsum += tb_topo_node_hash(t, r);
    return 0;
}

int tb_topology_add_child(tb_topology_t *t, tbon_rank_t parent, const char *host,
                          uint32_t local_id, tb_role_t role, tbon_rank_t *rank)
{
    if (!VALID(t, parent) || !host || local_id > TB_TOPOLOGY_MAX_ID ||
        (role != TB_ROLE_COMMNODE && role != TB_ROLE_BE))
        return TBON_EINVAL;
    size_t len = strlen(host);
    if (tb_topology_check_host(host, len) != 0)
        return TBON_EINVAL;
    if (!t->alive[parent] || t->role[parent] == TB_ROLE_BE)
        return TBON_ETOPOLOGY;
    uint32_t h = tb_topo_host_lookup(t, host, len);
    if (h != UINT32_MAX && t->nmap[tb_topo_nmap_slot(t, h, local_id)])
        return TBON_ETOPOLOGY;
    int rc = tb_topo_grow_nodes(t, (size_t)t->n + 1);
    if (rc == 0)
        rc = child_reserve(t, parent);
    if (rc == 0 && h == UINT32_MAX)
        rc = tb_topology_intern_host(t, host, len, &h);
    if (rc)
        return rc;
    uint32_t r = tb_topo_append_node(t, tb_topo_nmap_slot(t, h, local_id), h, local_id, parent, role, true,
                             0, 0);
    t->depth[r] = t->depth[parent] + 1;
    child_insert(t, parent, r);
    heights_after_gain(t, parent, 0);
    t->nleaves += role == TB_ROLE_BE;
    t->nbare += BARE(t, r);
    t->dsum += tb_topo_node_hash(t, r);
    if (rank)
        *rank = r;
    return 0;
}

int tb_topology_revive(tb_topology_t *t, tbon_rank_t r, tbon_rank_t parent, uint32_t inc)
{
    if (!VALID(t, r) || !VALID(t, parent))
        return TBON_EINVAL;
    if (r == 0 || t->alive[r] || !t->alive[parent] || t->role[parent] == TB_ROLE_BE)
        return TBON_ETOPOLOGY;
    int rc = child_reserve(t, parent);
    if (rc)
        return rc;
    t->dsum -= tb_topo_node_hash(t, r);
    t->alive[r] = 1;
    t->nbare += BARE(t, r);
    t->inc[r] = inc;
    t->port[r] = 0;
    t->parent[r] = parent;
    t->depth[r] = t->depth[parent] + 1;
    t->height[r] = 0;
    child_insert(t, parent, r);
    heights_after_gain(t, parent, 0);
    t->nleaves += t->role[r] == TB_ROLE_BE;
    t->dsum += tb_topo_node_hash(t, r);
    return 0;
}

/* ---- pending claims (for reconfig.c's report rules) ----------------------- */

/* Index of r in the sorted pending pairs, or where it would go. */
static uint32_t pend_index(const tb_topology_t *t, uint32_t r)
{
    uint32_t lo = 0, hi = t->npend;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->pend[2 * mid] < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int tb_topology_set_pending(tb_topology_t *t, tbon_rank_t r, tbon_rank_t claim)
{
    if (!VALID(t, r) || (claim != NONE && !VALID(t, claim)))
        return TBON_EINVAL;
    uint32_t i = pend_index(t, r);
    bool present = i < t->npend && t->pend[2 * i] == r;
    if (claim == NONE) {
        if (present) {
            memmove(t->pend + 2 * i, t->pend + 2 * i + 2,
                    2 * (size_t)(t->npend - i - 1) * sizeof *t->pend);
            t->npend--;
        }
        return 0;
    }
    if (!present) {
        int rc = tb_topology_reserve_pending(t, 1);
        if (rc)
            return rc;
        memmove(t->pend + 2 * i + 2, t->pend + 2 * i,
                2 * (size_t)(t->npend - i) * sizeof *t->pend);
        t->npend++;
        t->pend[2 * i] = r;
    }
    t->pend[2 * i + 1] = claim;
    return 0;
}

tbon_rank_t tb_topology_pending(const tb_topology_t *t, tbon_rank_t r)
{
    if (!VALID(t, r))
        return NONE;
    uint32_t i = pend_index(t, r);
    return i < t->npend && t->pend[2 * i] == r ? t->pend[2 * i + 1] : NONE;
}

size_t tb_topology_num_pending(const tb_topology_t *t)
{
    return t ? t->npend : 0;
}

tbon_rank_t tb_topology_pending_rank(const tb_topology_t *t, size_t i)
{
    return t && i < t->npend ? t->pend[2 * i] : NONE;
}
