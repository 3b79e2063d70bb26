/* topology_gen.c - generated topologies (what tbon_topgen writes): balanced
 * by levels, minimal-depth for a fan-out bound, k-nomial, and flat.
 *
 * Each generator describes its tree as the number of children of every node
 * in breadth-first order; from_counts() turns that into a topology with BFS
 * ranks and hosts assigned round-robin in rank order (rank r on host
 * hosts[r % nhosts], local ids counted per distinct host).
 */
#include "topo/topology.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static tb_topology_t *from_counts(const uint32_t *kids, size_t n, const char *const *hosts,
                                  size_t nhosts, tbon_error_t *err)
{
    static const char *const local[] = { "localhost" };
    if (!hosts || nhosts == 0) {
        hosts = local;
        nhosts = 1;
    }
    tb_topology_t *t = tb_topology_new();
    uint32_t *hidx = malloc(nhosts * sizeof *hidx);
    uint32_t *next_id = NULL;
    if (!t || !hidx || tb_topology_reserve(t, n) != 0)
        goto oom;
    for (size_t i = 0; i < nhosts; i++) {
        size_t len = strlen(hosts[i]);
        if (tb_topology_check_host(hosts[i], len) != 0) {
            tb_error_set(err, TBON_EINVAL, "bad host name \"%.60s\" (letters, digits, '-', "
                         "'.' and '_', starting with a letter or digit, at most %u)",
                         hosts[i], TB_TOPOLOGY_MAX_HOST);
            goto fail;
        }
        if (tb_topology_intern_host(t, hosts[i], len, &hidx[i]) != 0)
            goto oom;
    }
    next_id = calloc(tb_topology_num_hosts(t), sizeof *next_id);
    if (!next_id)
        goto oom;
    uint32_t added = 0;
    for (size_t r = 0; r < n; r++) {
        /* Rank r itself was added as its parent's child (rank 0 up front). */
        if (r == 0) {
            uint32_t h = hidx[0];
            if (tb_topology_add_interned(t, h, next_id[h]++, TBON_RANK_NONE) != 0)
                goto oom;
            added = 1;
        }
        for (uint32_t j = 0; j < kids[r]; j++) {
            uint32_t h = hidx[added % nhosts];
            if (next_id[h] > TB_TOPOLOGY_MAX_ID) {
                tb_error_set(err, TBON_EINVAL, "too many nodes on host \"%s\"",
                             tb_topology_host_name(t, h));
                goto fail;
            }
            if (tb_topology_add_interned(t, h, next_id[h]++, (tbon_rank_t)r) != 0)
                goto oom;
            added++;
        }
    }
    if (tb_topology_finish(t, err) != 0)
        goto fail;
    free(hidx);
    free(next_id);
    return t;
oom:
    tb_error_set(err, TBON_ENOMEM, "out of memory generating a topology of %zu nodes", n);
fail:
    free(hidx);
    free(next_id);
    tb_topology_destroy(t);
    return NULL;
}

static tb_topology_t *too_many(uint64_t n, tbon_error_t *err)
{
    tb_error_set(err, TBON_EINVAL, "too many nodes: %llu (at most %u)",
                 (unsigned long long)n, TB_TOPOLOGY_MAX_NODES);
    return NULL;
}

/* The zeroed child-count array for n nodes, or NULL with err filled. */
static uint32_t *new_counts(uint64_t n, tbon_error_t *err)
{
    uint32_t *kids = calloc(n, sizeof *kids);
    if (!kids)
        tb_error_set(err, TBON_ENOMEM, "out of memory");
    return kids;
}

/* The leaf count the fan-out, k-nomial and flat generators accept: 1 up to
 * one less than the node limit (there is a front-end above the leaves).
 * Returns 0, or -1 with err filled. */
static int check_leaves(uint32_t leaves, tbon_error_t *err)
{
    if (leaves < 1) {
        tb_error_set(err, TBON_EINVAL, "at least one leaf is needed");
        return TBON_EINVAL;
    }
    if (leaves >= TB_TOPOLOGY_MAX_NODES) {
        too_many((uint64_t)leaves + 1, err);
        return TBON_EINVAL;
    }
    return 0;
}

/* What the fan-out and k-nomial generators check first: a degree k of at
 * least 2 (`what` names it in the message), then the leaf count. */
static int check_degree_and_leaves(uint32_t k, const char *what, uint32_t leaves,
                                   tbon_error_t *err)
{
    if (k < 2) {
        tb_error_set(err, TBON_EINVAL, "%s must be at least 2 (got %u)", what, k);
        return TBON_EINVAL;
    }
    return check_leaves(leaves, err);
}

tb_topology_t *tb_topology_gen_shape(const uint32_t *fanout, size_t levels,
                                     const char *const *hosts, size_t nhosts,
                                     tbon_error_t *err)
{
    if (!fanout || levels == 0) {
        tb_error_set(err, TBON_EINVAL, "a shape needs at least one level");
        return NULL;
    }
    uint64_t n = 1, width = 1;
    for (size_t i = 0; i < levels; i++) {
        if (fanout[i] == 0) {
            tb_error_set(err, TBON_EINVAL, "level %zu of the shape has 0 children per node",
                         i + 1);
            return NULL;
        }
        if (fanout[i] > TB_TOPOLOGY_MAX_NODES)
            return too_many((uint64_t)fanout[i] + 1, err);
        width *= fanout[i];
        n += width;
        if (n > TB_TOPOLOGY_MAX_NODES)
            return too_many(n, err);
    }
    uint32_t *kids = new_counts(n, err);
    if (!kids)
        return NULL;
    size_t r = 0;
    width = 1;
    for (size_t i = 0; i <= levels; i++) {
        for (uint64_t j = 0; j < width; j++)
            kids[r++] = i < levels ? fanout[i] : 0;
        if (i < levels)
            width *= fanout[i];
    }
    tb_topology_t *t = from_counts(kids, n, hosts, nhosts, err);
    free(kids);
    return t;
}

tb_topology_t *tb_topology_gen_fanout(uint32_t k, uint32_t leaves, const char *const *hosts,
                                      size_t nhosts, tbon_error_t *err)
{
    if (check_degree_and_leaves(k, "the fan-out", leaves, err) != 0)
        return NULL;
    /* Level widths bottom-up: each level holds ceil(below / k) nodes, up to a
     * single root; at least one level above the leaves. */
    uint64_t width[32];
    size_t nl = 0;
    uint64_t n = leaves;
    width[nl++] = leaves;
    do {
        width[nl] = (width[nl - 1] + k - 1) / k;
        n += width[nl];
        nl++;
    } while (width[nl - 1] > 1);
    if (n > TB_TOPOLOGY_MAX_NODES)
        return too_many(n, err);
    uint32_t *kids = new_counts(n, err);
    if (!kids)
        return NULL;
    /* Top-down: a level of w nodes shares the next level's w' nodes out as
     * evenly as possible (the first w' % w get one more). */
    size_t r = 0;
    for (size_t lv = nl; lv-- > 0;) {
        uint64_t w = width[lv], below = lv ? width[lv - 1] : 0;
        for (uint64_t j = 0; j < w; j++)
            kids[r++] = lv ? (uint32_t)(below / w + (j < below % w)) : 0;
    }
    tb_topology_t *t = from_counts(kids, n, hosts, nhosts, err);
    free(kids);
    return t;
}

/* The smallest power of k above slot i (1 for slot 0): slot i's k-nomial
 * children are i + j * p for p = that power, p * k, ... and j = 1 .. k-1. */
static uint64_t first_stride(uint64_t i, uint64_t k)
{
    uint64_t p = 1;
    while (p <= i)
        p *= k;
    return p;
}

static bool kn_has_children(uint64_t i, uint64_t k, uint64_t n)
{
    return i + first_stride(i, k) < n;
}

tb_topology_t *tb_topology_gen_knomial(uint32_t k, uint32_t leaves, const char *const *hosts,
                                       size_t nhosts, tbon_error_t *err)
{
    if (check_degree_and_leaves(k, "the k-nomial degree", leaves, err) != 0)
        return NULL;
    /* Nodes: the FE (standing for slot 0), a commnode for every other slot
     * with k-nomial children, and a back-end per slot. */
    uint64_t n = 1 + (uint64_t)leaves;
    for (uint64_t i = 1; i < leaves; i++)
        n += kn_has_children(i, k, leaves);
    if (n > TB_TOPOLOGY_MAX_NODES)
        return too_many(n, err);
    uint32_t *kids = malloc(n * sizeof *kids);
    uint32_t *slot = malloc(n * sizeof *slot);   /* BFS queue: slot, high bit = BE */
    if (!kids || !slot) {
        free(kids);
        free(slot);
        tb_error_set(err, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    const uint32_t BE = 0x80000000u;
    size_t head = 0, tail = 0;
    slot[tail++] = 0;
    while (head < tail) {
        uint32_t s = slot[head];
        uint32_t cnt = 0;
        if (!(s & BE)) {
            slot[tail++] = s | BE;          /* the slot's own back-end first */
            cnt++;
            for (uint64_t p = first_stride(s, k); s + p < leaves; p *= k) {
                for (uint64_t j = 1; j < k && s + j * p < leaves; j++) {
                    uint64_t c = s + j * p;
                    slot[tail++] = (uint32_t)c | (kn_has_children(c, k, leaves) ? 0 : BE);
                    cnt++;
                }
            }
        }
        kids[head++] = cnt;
    }
    tb_topology_t *t = from_counts(kids, n, hosts, nhosts, err);
    free(kids);
    free(slot);
    return t;
}

tb_topology_t *tb_topology_gen_flat(uint32_t leaves, const char *const *hosts, size_t nhosts,
                                    tbon_error_t *err)
{
    if (check_leaves(leaves, err) != 0)
        return NULL;
    uint32_t *kids = new_counts((uint64_t)leaves + 1, err);
    if (!kids)
        return NULL;
    kids[0] = leaves;
    tb_topology_t *t = from_counts(kids, (size_t)leaves + 1, hosts, nhosts, err);
    free(kids);
    return t;
}

tb_topology_t *tb_topology_with_fe_host(const tb_topology_t *t, const char *host,
                                        tbon_error_t *err)
{
    size_t n = tb_topology_size(t), len = strlen(host);
    if (tb_topology_check_host(host, len) != 0) {
        tb_error_set(err, TBON_EINVAL, "bad host name \"%.60s\" for the front-end", host);
        return NULL;
    }
    /* Its local id: the one it had, unless host has a node with that id. */
    uint32_t lid = tb_topology_local_id(t, 0);
    for (size_t r = 1; r < n; r++)
        if (strcmp(tb_topology_host(t, (tbon_rank_t)r), host) == 0 &&
            tb_topology_local_id(t, (tbon_rank_t)r) >= lid)
            lid = tb_topology_local_id(t, (tbon_rank_t)r) + 1;
    tb_topology_t *c = tb_topology_new();
    if (!c || tb_topology_reserve(c, n) != 0) {
        tb_topology_destroy(c);
        tb_error_set(err, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    /* Ranks are breadth-first: adding them in rank order keeps every rank. */
    for (size_t r = 0; r < n; r++) {
        int rc = r == 0 ? tb_topology_add(c, host, lid, TBON_RANK_NONE)
                        : tb_topology_add(c, tb_topology_host(t, (tbon_rank_t)r),
                                          tb_topology_local_id(t, (tbon_rank_t)r),
                                          tb_topology_parent(t, (tbon_rank_t)r));
        if (rc != 0) {
            tb_topology_destroy(c);
            tb_error_set(err, rc, "cannot move the front-end to host %s", host);
            return NULL;
        }
    }
    if (tb_topology_finish(c, err) != 0) {
        tb_topology_destroy(c);
        return NULL;
    }
    return c;
}
