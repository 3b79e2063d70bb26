/* topology.c - the TBON tree every process holds: build it, answer queries on
 * it, apply failures, adoptions and joins to it (seed 003, section V-A).
 *
 * Storage is a structure of arrays indexed by rank, so that the 1,082,401-node
 * 32x32x32x32 tree costs about 50 bytes a node. Children live in one pool:
 * node r owns pool[coff[r] .. coff[r] + ccap[r]) of which ccnt[r] are used,
 * kept in increasing rank order. A finished build is plain CSR (ccap = ccnt);
 * a node that gains a child past its capacity moves its array to the end of
 * the pool with twice the room, and the pool is compacted when more than half
 * of it is abandoned space. Mutations never allocate anything else, so they
 * cannot fail half-way.
 */
#include "topo/topology.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "topo/topology_util.h"

struct tb_topology {
    uint32_t  n, cap;          /* nodes, room in the per-node arrays */
    bool      finished;
    uint32_t *parent, *host, *lid, *depth, *height, *inc;
    uint16_t *port;
    uint8_t  *role, *alive;
    uint32_t *coff, *ccnt, *ccap;
    uint32_t *pool;
    size_t    pool_len, pool_cap, pool_garbage;
    char    **hosts;           /* interned host names, by index */
    uint64_t *hhash;           /* their hashes */
    uint32_t  nhosts, hcap;
    uint32_t *hmap;            /* host hash slot -> index + 1 (0 = empty) */
    size_t    hmask;
    uint32_t *nmap;            /* (host, local id) slot -> rank + 1 (0 = empty) */
    size_t    nmask;
    size_t    nleaves;         /* alive back-ends */
    size_t    nbare;           /* alive commnodes without children */
    uint64_t  dsum;            /* sum of node_hash() over all ranks */
    uint32_t *pend;            /* pending claims: (rank, claimed parent) pairs, */
    uint32_t  npend, pcap;     /* sorted by rank; almost always empty */
};

#define NONE TBON_RANK_NONE

tb_topology_t *tb_topology_new(void)
{
    return calloc(1, sizeof(tb_topology_t));
}

void tb_topology_destroy(tb_topology_t *t)
{
    if (!t)
        return;
    free(t->parent);
    free(t->host);
    free(t->lid);
    free(t->depth);
    free(t->height);
    free(t->inc);
    free(t->port);
    free(t->role);
    free(t->alive);
    free(t->coff);
    free(t->ccnt);
    free(t->ccap);
    free(t->pool);
    for (uint32_t i = 0; i < t->nhosts; i++)
        free(t->hosts[i]);
    free(t->hosts);
    free(t->hhash);
    free(t->hmap);
    free(t->nmap);
    free(t->pend);
    free(t);
}

/* ---- hashing ------------------------------------------------------------- */

/* Everything the digest covers about rank r. */
static uint64_t node_hash(const tb_topology_t *t, uint32_t r)
{
    uint64_t h = tb_mix64(0x7462306e746f706fULL ^ r);
    h = tb_mix64(h ^ t->parent[r]);
    h = tb_mix64(h ^ t->hhash[t->host[r]]);
    h = tb_mix64(h ^ t->lid[r]);
    h = tb_mix64(h ^ ((uint64_t)t->inc[r] << 8 | (uint64_t)t->role[r] << 1 | t->alive[r]));
    return h;
}

/* Where host:lid's search starts. Eight consecutive ids on a host share an
 * aligned run of slots (one cache line): builds, parsers and the decoder meet
 * ids in order, and this spares them most cache misses. */
static size_t nmap_home(const tb_topology_t *t, uint32_t host, uint32_t lid)
{
    return (size_t)(tb_mix64((uint64_t)host << 32 | lid >> 3) << 3 | (lid & 7)) & t->nmask;
}

static size_t nmap_slot(const tb_topology_t *t, uint32_t host, uint32_t lid)
{
    size_t i = nmap_home(t, host, lid);
    for (;;) {
        uint32_t v = t->nmap[i];
        if (v == 0 || (t->host[v - 1] == host && t->lid[v - 1] == lid))
            return i;
        i = (i + 1) & t->nmask;
    }
}

/* Make room in the name map for `want` nodes at load <= 1/2. */
static int nmap_reserve(tb_topology_t *t, size_t want)
{
    if (t->nmap && want * 2 <= t->nmask + 1)
        return 0;
    size_t slots = 64;
    while (slots < want * 2)
        slots *= 2;
    uint32_t *m = calloc(slots, sizeof *m);
    if (!m)
        return TBON_ENOMEM;
    free(t->nmap);
    t->nmap = m;
    t->nmask = slots - 1;
    for (uint32_t r = 0; r < t->n; r++)
        t->nmap[nmap_slot(t, t->host[r], t->lid[r])] = r + 1;
    return 0;
}

static size_t hmap_slot(const tb_topology_t *t, const char *s, size_t len, uint64_t h)
{
    size_t i = (size_t)h & t->hmask;
    for (;;) {
        uint32_t v = t->hmap[i];
        if (v == 0 || (t->hhash[v - 1] == h && strncmp(t->hosts[v - 1], s, len) == 0 &&
                       t->hosts[v - 1][len] == '\0'))
            return i;
        i = (i + 1) & t->hmask;
    }
}

/* The index of host s[0..len), or UINT32_MAX if it is not interned. */
static uint32_t host_lookup(const tb_topology_t *t, const char *s, size_t len)
{
    if (!t->hmap)
        return UINT32_MAX;
    uint32_t v = t->hmap[hmap_slot(t, s, len, tb_hash_bytes(s, len))];
    return v ? v - 1 : UINT32_MAX;
}

int tb_topology_check_host(const char *s, size_t len)
{
    if (len == 0 || len > TB_TOPOLOGY_MAX_HOST)
        return TBON_EINVAL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '-' && c != '.' && c != '_')))
            return TBON_EINVAL;
    }
    return 0;
}

int tb_topology_intern_host(tb_topology_t *t, const char *s, size_t len, uint32_t *idx)
{
    uint64_t h = tb_hash_bytes(s, len);
    if (t->hmap) {
        uint32_t v = t->hmap[hmap_slot(t, s, len, h)];
        if (v) {
            *idx = v - 1;
            return 0;
        }
    }
    if (t->nhosts == t->hcap) {
        uint32_t cap = t->hcap ? t->hcap * 2 : 8;
        char **hs = realloc(t->hosts, cap * sizeof *hs);
        if (!hs)
            return TBON_ENOMEM;
        t->hosts = hs;
        uint64_t *hh = realloc(t->hhash, cap * sizeof *hh);
        if (!hh)
            return TBON_ENOMEM;
        t->hhash = hh;
        t->hcap = cap;
    }
    if (!t->hmap || (size_t)(t->nhosts + 1) * 2 > t->hmask + 1) {
        size_t slots = 16;
        while (slots < (size_t)(t->nhosts + 1) * 2)
            slots *= 2;
        uint32_t *m = calloc(slots, sizeof *m);
        if (!m)
            return TBON_ENOMEM;
        free(t->hmap);
        t->hmap = m;
        t->hmask = slots - 1;
        for (uint32_t i = 0; i < t->nhosts; i++) {
            const char *o = t->hosts[i];
            t->hmap[hmap_slot(t, o, strlen(o), t->hhash[i])] = i + 1;
        }
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return TBON_ENOMEM;
    memcpy(copy, s, len);
    copy[len] = '\0';
    t->hosts[t->nhosts] = copy;
    t->hhash[t->nhosts] = h;
    t->hmap[hmap_slot(t, s, len, h)] = t->nhosts + 1;
    *idx = t->nhosts++;
    return 0;
}

uint32_t tb_topology_num_hosts(const tb_topology_t *t)
{
    return t->nhosts;
}

const char *tb_topology_host_name(const tb_topology_t *t, uint32_t idx)
{
    return idx < t->nhosts ? t->hosts[idx] : NULL;
}

uint32_t tb_topology_host_index(const tb_topology_t *t, tbon_rank_t r)
{
    return r < t->n ? t->host[r] : UINT32_MAX;
}

/* ---- building ------------------------------------------------------------ */

#define GROW_ARRAY(field, count) do {                                      \
        void *p_ = realloc(t->field, (count) * sizeof *t->field);         \
        if (!p_)                                                           \
            return TBON_ENOMEM;                                            \
        t->field = p_;                                                     \
    } while (0)

/* Room for `want` nodes in every per-node array and in the name map; exactly
 * that many when `exact` (a reservation), else doubling. */
static int grow_room(tb_topology_t *t, size_t want, bool exact)
{
    if (want > TB_TOPOLOGY_MAX_NODES)
        return TBON_ETOPOLOGY;
    if (want > t->cap) {
        size_t cap = t->cap ? t->cap : 16;
        while (cap < want)
            cap *= 2;
        if (exact)
            cap = want;
        if (cap > TB_TOPOLOGY_MAX_NODES)
            cap = TB_TOPOLOGY_MAX_NODES;
        GROW_ARRAY(parent, cap);
        GROW_ARRAY(host, cap);
        GROW_ARRAY(lid, cap);
        GROW_ARRAY(depth, cap);
        GROW_ARRAY(height, cap);
        GROW_ARRAY(inc, cap);
        GROW_ARRAY(port, cap);
        GROW_ARRAY(role, cap);
        GROW_ARRAY(alive, cap);
        GROW_ARRAY(coff, cap);
        GROW_ARRAY(ccnt, cap);
        GROW_ARRAY(ccap, cap);
        t->cap = (uint32_t)cap;
    }
    return nmap_reserve(t, want);
}

static int grow_nodes(tb_topology_t *t, size_t want)
{
    return grow_room(t, want, false);
}

int tb_topology_reserve(tb_topology_t *t, size_t n)
{
    if (!t || n > TB_TOPOLOGY_MAX_NODES)
        return TBON_EINVAL;
    return grow_room(t, n, true);
}

/* Append a node whose room grow_nodes() has made, its name going to the
 * name map's empty slot `slot` (from name_free()); nothing can fail here. */
static uint32_t append_node(tb_topology_t *t, size_t slot, uint32_t host, uint32_t lid,
                            uint32_t parent, tb_role_t role, bool alive, uint32_t inc,
                            uint16_t port)
{
    uint32_t r = t->n++;
    t->parent[r] = parent;
    t->host[r] = host;
    t->lid[r] = lid;
    t->depth[r] = 0;
    t->height[r] = 0;
    t->inc[r] = inc;
    t->port[r] = port;
    t->role[r] = (uint8_t)role;
    t->alive[r] = alive;
    t->coff[r] = 0;
    t->ccnt[r] = 0;
    t->ccap[r] = 0;
    t->nmap[slot] = r + 1;
    return r;
}

/* The empty name-map slot for host:lid, or SIZE_MAX if the name is taken.
 * The map must have room (grow_nodes()). */
static size_t name_free(const tb_topology_t *t, uint32_t host, uint32_t lid)
{
    size_t slot = nmap_slot(t, host, lid);
    return t->nmap[slot] ? SIZE_MAX : slot;
}

int tb_topology_add_interned(tb_topology_t *t, uint32_t host_idx, uint32_t local_id,
                             tbon_rank_t parent)
{
    if (!t || t->finished || host_idx >= t->nhosts || local_id > TB_TOPOLOGY_MAX_ID)
        return TBON_EINVAL;
    if (t->n == 0 ? parent != NONE : parent >= t->n)
        return TBON_EINVAL;
    int rc = grow_nodes(t, (size_t)t->n + 1);
    if (rc)
        return rc;
    size_t slot = name_free(t, host_idx, local_id);
    if (slot == SIZE_MAX)
        return TBON_ETOPOLOGY;
    append_node(t, slot, host_idx, local_id, parent, TB_ROLE_COMMNODE, true, 0, 0);
    return 0;
}

int tb_topology_add(tb_topology_t *t, const char *host, uint32_t local_id,
                    tbon_rank_t parent)
{
    if (!t || !host || t->finished || local_id > TB_TOPOLOGY_MAX_ID)
        return TBON_EINVAL;
    size_t len = strlen(host);
    if (tb_topology_check_host(host, len) != 0)
        return TBON_EINVAL;
    if (t->n == 0 ? parent != NONE : parent >= t->n)
        return TBON_EINVAL;
    /* Everything that can fail comes before interning, so a failed add leaves
     * no unused host behind. */
    int rc = grow_nodes(t, (size_t)t->n + 1);
    if (rc)
        return rc;
    uint32_t h = host_lookup(t, host, len);
    size_t slot = 0;
    if (h != UINT32_MAX && (slot = name_free(t, h, local_id)) == SIZE_MAX)
        return TBON_ETOPOLOGY;
    if (h == UINT32_MAX) {
        if ((rc = tb_topology_intern_host(t, host, len, &h)) != 0)
            return rc;
        slot = nmap_slot(t, h, local_id);
    }
    append_node(t, slot, h, local_id, parent, TB_ROLE_COMMNODE, true, 0, 0);
    return 0;
}

int tb_topology_load_node(tb_topology_t *t, uint32_t host_idx, uint32_t local_id,
                          tbon_rank_t parent, tb_role_t role, bool alive,
                          uint32_t incarnation, uint16_t port)
{
    if (!t || t->finished || host_idx >= t->nhosts || local_id > TB_TOPOLOGY_MAX_ID ||
        (role != TB_ROLE_FE && role != TB_ROLE_COMMNODE && role != TB_ROLE_BE))
        return TBON_EINVAL;
    int rc = grow_nodes(t, (size_t)t->n + 1);
    if (rc)
        return rc;
    size_t slot = name_free(t, host_idx, local_id);
    if (slot == SIZE_MAX)
        return TBON_ETOPOLOGY;
    append_node(t, slot, host_idx, local_id, parent, role, alive, incarnation, port);
    return 0;
}

/* Children arrays as CSR from the parent array, each in rank order. */
static int build_children(tb_topology_t *t)
{
    size_t edges = 0;
    for (uint32_t r = 0; r < t->n; r++)
        edges += t->parent[r] != NONE;
    free(t->pool);
    t->pool = malloc((edges ? edges : 1) * sizeof *t->pool);
    if (!t->pool)
        return TBON_ENOMEM;
    t->pool_len = t->pool_cap = edges;
    t->pool_garbage = 0;
    memset(t->ccnt, 0, t->n * sizeof *t->ccnt);
    for (uint32_t r = 0; r < t->n; r++)
        if (t->parent[r] != NONE)
            t->ccnt[t->parent[r]]++;
    uint32_t off = 0;
    for (uint32_t r = 0; r < t->n; r++) {
        t->coff[r] = off;
        t->ccap[r] = t->ccnt[r];
        off += t->ccnt[r];
        t->ccnt[r] = 0;
    }
    for (uint32_t r = 0; r < t->n; r++) {
        uint32_t p = t->parent[r];
        if (p != NONE)
            t->pool[t->coff[p] + t->ccnt[p]++] = r;
    }
    return 0;
}

/* 1 if r is an alive commnode without children (counted in nbare). */
#define BARE(t, r) ((t)->alive[r] && (t)->role[r] == TB_ROLE_COMMNODE && (t)->ccnt[r] == 0)

static void finish_common(tb_topology_t *t)
{
    t->nleaves = 0;
    t->nbare = 0;
    t->dsum = 0;
    for (uint32_t r = 0; r < t->n; r++) {
        t->nleaves += t->alive[r] && t->role[r] == TB_ROLE_BE;
        t->nbare += BARE(t, r);
        t->dsum += node_hash(t, r);
    }
    t->finished = true;
}

int tb_topology_finish(tb_topology_t *t, tbon_error_t *err)
{
    if (!t || t->finished)
        return tb_error_set(err, TBON_EINVAL, "topology: finish called twice");
    if (t->n == 0)
        return tb_error_set(err, TBON_ETOPOLOGY, "empty topology: no nodes");
    if (build_children(t) != 0)
        return tb_error_set(err, TBON_ENOMEM, "topology: out of memory for %u nodes", t->n);
    /* Builder ranks have parent < rank: depths go forward, heights backward. */
    for (uint32_t r = 0; r < t->n; r++) {
        uint32_t p = t->parent[r];
        t->depth[r] = p == NONE ? 0 : t->depth[p] + 1;
        t->height[r] = 0;
        t->role[r] = r == 0 ? TB_ROLE_FE : t->ccnt[r] ? TB_ROLE_COMMNODE : TB_ROLE_BE;
    }
    for (uint32_t r = t->n; r-- > 1;) {
        uint32_t p = t->parent[r];
        if (t->height[p] < t->height[r] + 1)
            t->height[p] = t->height[r] + 1;
    }
    finish_common(t);
    return 0;
}

int tb_topology_load_finish(tb_topology_t *t, tbon_error_t *err)
{
    const char *what = "serialised topology";
    if (!t || t->finished)
        return tb_error_set(err, TBON_EINVAL, "%s: finish called twice", what);
    if (t->n == 0)
        return tb_error_set(err, TBON_EFORMAT, "%s: no nodes", what);
    if (t->parent[0] != NONE || t->role[0] != TB_ROLE_FE || !t->alive[0])
        return tb_error_set(err, TBON_EFORMAT,
                            "%s: rank 0 must be the alive front-end, without a parent", what);
    for (uint32_t r = 1; r < t->n; r++) {
        uint32_t p = t->parent[r];
        if (t->role[r] == TB_ROLE_FE)
            return tb_error_set(err, TBON_EFORMAT,
                                "%s: rank %u claims to be a second front-end", what, r);
        if (p == NONE)
            continue;
        if (p >= t->n)
            return tb_error_set(err, TBON_EFORMAT,
                                "%s: rank %u has parent %u, beyond the last rank %u",
                                what, r, p, t->n - 1);
        if (!t->alive[r] || !t->alive[p])
            return tb_error_set(err, TBON_EFORMAT,
                                "%s: rank %u and its parent %u must both be alive",
                                what, r, p);
        if (t->role[p] == TB_ROLE_BE)
            return tb_error_set(err, TBON_EFORMAT,
                                "%s: rank %u has the back-end %u as its parent", what, r, p);
    }
    if (build_children(t) != 0)
        return tb_error_set(err, TBON_ENOMEM, "%s: out of memory for %u nodes", what, t->n);
    /* Breadth-first from every root (rank 0, orphans, dead nodes): a node never
     * reached sits on a cycle. */
    uint32_t *queue = malloc(t->n * sizeof *queue);
    if (!queue)
        return tb_error_set(err, TBON_ENOMEM, "%s: out of memory for %u nodes", what, t->n);
    size_t head = 0, tail = 0;
    for (uint32_t r = 0; r < t->n; r++) {
        t->height[r] = UINT32_MAX;               /* not reached yet */
        if (t->parent[r] == NONE) {
            t->depth[r] = 0;
            queue[tail++] = r;
        }
    }
    while (head < tail) {
        uint32_t v = queue[head++];
        t->height[v] = 0;
        for (uint32_t i = 0; i < t->ccnt[v]; i++) {
            uint32_t c = t->pool[t->coff[v] + i];
            t->depth[c] = t->depth[v] + 1;
            queue[tail++] = c;
        }
    }
    if (tail < t->n) {
        /* An unreached node's parent is unreached too, so n steps up from one
         * land on the cycle itself. */
        uint32_t r = 0;
        while (t->height[r] != UINT32_MAX)
            r++;
        for (uint32_t i = 0; i < t->n; i++)
            r = t->parent[r];
        free(queue);
        return tb_error_set(err, TBON_EFORMAT,
                            "%s: rank %u is on a cycle of parent links (%zu of %u ranks "
                            "are not reachable from any root)", what, r, t->n - tail, t->n);
    }
    for (size_t i = tail; i-- > 0;) {
        uint32_t v = queue[i], p = t->parent[v];
        if (p != NONE && t->height[p] < t->height[v] + 1)
            t->height[p] = t->height[v] + 1;
    }
    free(queue);
    finish_common(t);
    return 0;
}

tb_topology_t *tb_topology_clone(const tb_topology_t *t)
{
    if (!t || !t->finished)
        return NULL;
    tb_topology_t *c = tb_topology_new();
    if (!c)
        return NULL;
    for (uint32_t i = 0; i < t->nhosts; i++) {
        uint32_t idx;
        if (tb_topology_intern_host(c, t->hosts[i], strlen(t->hosts[i]), &idx) != 0)
            goto fail;
    }
    if (grow_nodes(c, t->n) != 0)
        goto fail;
    size_t n = t->n;
    memcpy(c->parent, t->parent, n * sizeof *c->parent);
    memcpy(c->host, t->host, n * sizeof *c->host);
    memcpy(c->lid, t->lid, n * sizeof *c->lid);
    memcpy(c->depth, t->depth, n * sizeof *c->depth);
    memcpy(c->height, t->height, n * sizeof *c->height);
    memcpy(c->inc, t->inc, n * sizeof *c->inc);
    memcpy(c->port, t->port, n * sizeof *c->port);
    memcpy(c->role, t->role, n * sizeof *c->role);
    memcpy(c->alive, t->alive, n * sizeof *c->alive);
    c->n = t->n;
    for (uint32_t r = 0; r < c->n; r++)
        c->nmap[nmap_slot(c, c->host[r], c->lid[r])] = r + 1;
    /* The copy's children are compact CSR, whatever the original's pool holds. */
    if (build_children(c) != 0)
        goto fail;
    if (t->npend) {
        if (tb_topology_reserve_pending(c, t->npend) != 0)
            goto fail;
        memcpy(c->pend, t->pend, 2 * (size_t)t->npend * sizeof *c->pend);
        c->npend = t->npend;
    }
    c->nleaves = t->nleaves;
    c->nbare = t->nbare;
    c->dsum = t->dsum;
    c->finished = true;
    return c;
fail:
    tb_topology_destroy(c);
    return NULL;
}

/* ---- queries ------------------------------------------------------------- */

size_t tb_topology_size(const tb_topology_t *t)
{
    return t && t->finished ? t->n : 0;
}

#define VALID(t, r) ((t) && (t)->finished && (r) < (t)->n)

tbon_rank_t tb_topology_parent(const tb_topology_t *t, tbon_rank_t r)
{
    return VALID(t, r) ? t->parent[r] : NONE;
}

uint32_t tb_topology_depth(const tb_topology_t *t, tbon_rank_t r)
{
    return VALID(t, r) ? t->depth[r] : 0;
}

uint32_t tb_topology_height(const tb_topology_t *t, tbon_rank_t r)
{
    return VALID(t, r) ? t->height[r] : 0;
}

const char *tb_topology_host(const tb_topology_t *t, tbon_rank_t r)
{
    return VALID(t, r) ? t->hosts[t->host[r]] : NULL;
}

uint32_t tb_topology_local_id(const tb_topology_t *t, tbon_rank_t r)
{
    return VALID(t, r) ? t->lid[r] : 0;
}

tb_role_t tb_topology_role(const tb_topology_t *t, tbon_rank_t r)
{
    return VALID(t, r) ? (tb_role_t)t->role[r] : TB_ROLE_BE;
}

bool tb_topology_alive(const tb_topology_t *t, tbon_rank_t r)
{
    return VALID(t, r) && t->alive[r];
}

uint32_t tb_topology_incarnation(const tb_topology_t *t, tbon_rank_t r)
{
    return VALID(t, r) ? t->inc[r] : 0;
}

uint16_t tb_topology_port(const tb_topology_t *t, tbon_rank_t r)
{
    return VALID(t, r) ? t->port[r] : 0;
}

const tbon_rank_t *tb_topology_children(const tb_topology_t *t, tbon_rank_t r,
                                        size_t *count)
{
    if (!VALID(t, r) || t->ccnt[r] == 0) {
        *count = 0;
        return NULL;
    }
    *count = t->ccnt[r];
    return t->pool + t->coff[r];
}

size_t tb_topology_num_children(const tb_topology_t *t, tbon_rank_t r)
{
    return VALID(t, r) ? t->ccnt[r] : 0;
}

bool tb_topology_in_subtree(const tb_topology_t *t, tbon_rank_t root, tbon_rank_t r)
{
    if (!VALID(t, root) || !VALID(t, r))
        return false;
    for (uint32_t v = r; v != NONE; v = t->parent[v])
        if (v == root)
            return true;
    return false;
}

tbon_rank_t tb_topology_root_of(const tb_topology_t *t, tbon_rank_t r)
{
    if (!VALID(t, r))
        return NONE;
    while (t->parent[r] != NONE)
        r = t->parent[r];
    return r;
}

size_t tb_topology_num_leaves(const tb_topology_t *t)
{
    return t && t->finished ? t->nleaves : 0;
}

size_t tb_topology_num_childless(const tb_topology_t *t)
{
    return t && t->finished ? t->nbare : 0;
}

size_t tb_topology_leaves(const tb_topology_t *t, tbon_rank_t *out, size_t cap)
{
    size_t k = 0;
    if (!t || !t->finished)
        return 0;
    for (uint32_t r = 0; r < t->n; r++) {
        if (t->alive[r] && t->role[r] == TB_ROLE_BE) {
            if (k < cap)
                out[k] = r;
            k++;
        }
    }
    return k;
}

size_t tb_topology_path(const tb_topology_t *t, tbon_rank_t r, tbon_rank_t *out, size_t cap)
{
    if (!VALID(t, r))
        return 0;
    size_t k = 0;
    for (uint32_t v = r; v != NONE; v = t->parent[v]) {
        if (k < cap)
            out[k] = v;
        k++;
    }
    return k;
}

tbon_rank_t tb_topology_find(const tb_topology_t *t, const char *host, uint32_t local_id)
{
    if (!t || !host || !t->nmap)
        return NONE;
    uint32_t h = host_lookup(t, host, strlen(host));
    if (h == UINT32_MAX)
        return NONE;
    uint32_t v = t->nmap[nmap_slot(t, h, local_id)];
    return v ? v - 1 : NONE;
}

bool tb_topology_equal(const tb_topology_t *a, const tb_topology_t *b)
{
    if (!a || !b || !a->finished || !b->finished || a->n != b->n)
        return false;
    for (uint32_t r = 0; r < a->n; r++) {
        if (a->parent[r] != b->parent[r] || a->lid[r] != b->lid[r] ||
            a->role[r] != b->role[r] || a->alive[r] != b->alive[r] ||
            a->inc[r] != b->inc[r] || a->port[r] != b->port[r] ||
            a->depth[r] != b->depth[r] || a->height[r] != b->height[r] ||
            a->ccnt[r] != b->ccnt[r] ||
            strcmp(a->hosts[a->host[r]], b->hosts[b->host[r]]) != 0)
            return false;
        /* Children follow from parents, but comparing them checks that the
         * incremental upkeep agrees with a fresh build. */
        if (a->ccnt[r] && memcmp(a->pool + a->coff[r], b->pool + b->coff[r],
                                 a->ccnt[r] * sizeof *a->pool) != 0)
            return false;
    }
    return true;
}

uint64_t tb_topology_digest(const tb_topology_t *t)
{
    return t && t->finished ? tb_mix64(t->dsum ^ t->n) : 0;
}

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
    t->dsum -= node_hash(t, r);
    t->inc[r] = inc;
    t->dsum += node_hash(t, r);
    return 0;
}

int tb_topology_set_role(tb_topology_t *t, tbon_rank_t r, tb_role_t role)
{
    if (!VALID(t, r) || (role != TB_ROLE_FE && role != TB_ROLE_COMMNODE && role != TB_ROLE_BE))
        return TBON_EINVAL;
    if (r == 0 || role == TB_ROLE_FE || (role == TB_ROLE_BE && t->ccnt[r]))
        return TBON_ETOPOLOGY;
    t->dsum -= node_hash(t, r);
    if (t->alive[r])
        t->nleaves += (role == TB_ROLE_BE) - (t->role[r] == TB_ROLE_BE);
    t->nbare -= BARE(t, r);
    t->role[r] = (uint8_t)role;
    t->nbare += BARE(t, r);
    t->dsum += node_hash(t, r);
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
    t->dsum -= node_hash(t, r);
    t->nbare -= BARE(t, r);
    if (p != NONE)
        child_remove(t, p, r);
    for (uint32_t i = 0; i < t->ccnt[r]; i++) {
        uint32_t c = t->pool[t->coff[r] + i];
        t->dsum -= node_hash(t, c);
        t->parent[c] = NONE;
        t->dsum += node_hash(t, c);
        set_depths(t, c, 0);
    }
    t->ccnt[r] = 0;
    t->parent[r] = NONE;
    t->alive[r] = 0;
    t->depth[r] = 0;
    t->height[r] = 0;
    if (t->role[r] == TB_ROLE_BE)
        t->nleaves--;
    t->dsum += node_hash(t, r);
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
    t->dsum -= node_hash(t, r);
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
    t->dsum += node_hash(t, r);
    return 0;
}

int tb_topology_reparent(tb_topology_t *t, tbon_rank_t r, tbon_rank_t new_parent)
{
    if (!VALID(t, r) || !VALID(t, new_parent))
        return TBON_EINVAL;
    int rc = tb_topology_move(t, r, new_parent);
    if (rc)
        return rc;
    t->dsum -= node_hash(t, r);
    t->inc[r]++;
    t->dsum += node_hash(t, r);
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
    uint32_t h = host_lookup(t, host, len);
    if (h != UINT32_MAX && t->nmap[nmap_slot(t, h, local_id)])
        return TBON_ETOPOLOGY;
    int rc = grow_nodes(t, (size_t)t->n + 1);
    if (rc == 0)
        rc = child_reserve(t, parent);
    if (rc == 0 && h == UINT32_MAX)
        rc = tb_topology_intern_host(t, host, len, &h);
    if (rc)
        return rc;
    uint32_t r = append_node(t, nmap_slot(t, h, local_id), h, local_id, parent, role, true,
                             0, 0);
    t->depth[r] = t->depth[parent] + 1;
    child_insert(t, parent, r);
    heights_after_gain(t, parent, 0);
    t->nleaves += role == TB_ROLE_BE;
    t->nbare += BARE(t, r);
    t->dsum += node_hash(t, r);
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
    t->dsum -= node_hash(t, r);
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
    t->dsum += node_hash(t, r);
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

int tb_topology_reserve_pending(tb_topology_t *t, size_t more)
{
    if (!t)
        return TBON_EINVAL;
    if (t->npend + more <= t->pcap)
        return 0;
    if (more > TB_TOPOLOGY_MAX_NODES)
        return TBON_ENOMEM;
    size_t cap = t->pcap ? t->pcap : 4;
    while (cap < t->npend + more)
        cap *= 2;
    uint32_t *p = realloc(t->pend, 2 * cap * sizeof *p);
    if (!p)
        return TBON_ENOMEM;
    t->pend = p;
    t->pcap = (uint32_t)cap;
    return 0;
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
