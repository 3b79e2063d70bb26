/* topology.c - the TBON tree every process holds: build it and answer queries
 * on it (seed 003, section V-A); topology_edit.c applies failures, adoptions
 * and joins to it.
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
#include "topo/topology_int.h"


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
uint64_t tb_topo_node_hash(const tb_topology_t *t, uint32_t r)
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

size_t tb_topo_nmap_slot(const tb_topology_t *t, uint32_t host, uint32_t lid)
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
        t->nmap[tb_topo_nmap_slot(t, t->host[r], t->lid[r])] = r + 1;
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
uint32_t tb_topo_host_lookup(const tb_topology_t *t, const char *s, size_t len)
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

int tb_topo_grow_nodes(tb_topology_t *t, size_t want)
{
    return grow_room(t, want, false);
}

int tb_topology_reserve(tb_topology_t *t, size_t n)
{
    if (!t || n > TB_TOPOLOGY_MAX_NODES)
        return TBON_EINVAL;
    return grow_room(t, n, true);
}

/* Append a node whose room tb_topo_grow_nodes() has made, its name going to the
 * name map's empty slot `slot` (from name_free()); nothing can fail here. */
uint32_t tb_topo_append_node(tb_topology_t *t, size_t slot, uint32_t host, uint32_t lid,
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
 * The map must have room (tb_topo_grow_nodes()). */
static size_t name_free(const tb_topology_t *t, uint32_t host, uint32_t lid)
{
    size_t slot = tb_topo_nmap_slot(t, host, lid);
    return t->nmap[slot] ? SIZE_MAX : slot;
}

int tb_topology_add_interned(tb_topology_t *t, uint32_t host_idx, uint32_t local_id,
                             tbon_rank_t parent)
{
    if (!t || t->finished || host_idx >= t->nhosts || local_id > TB_TOPOLOGY_MAX_ID)
        return TBON_EINVAL;
    if (t->n == 0 ? parent != NONE : parent >= t->n)
        return TBON_EINVAL;
    int rc = tb_topo_grow_nodes(t, (size_t)t->n + 1);
    if (rc)
        return rc;
    size_t slot = name_free(t, host_idx, local_id);
    if (slot == SIZE_MAX)
        return TBON_ETOPOLOGY;
    tb_topo_append_node(t, slot, host_idx, local_id, parent, TB_ROLE_COMMNODE, true, 0, 0);
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
    int rc = tb_topo_grow_nodes(t, (size_t)t->n + 1);
    if (rc)
        return rc;
    uint32_t h = tb_topo_host_lookup(t, host, len);
    size_t slot = 0;
    if (h != UINT32_MAX && (slot = name_free(t, h, local_id)) == SIZE_MAX)
        return TBON_ETOPOLOGY;
    if (h == UINT32_MAX) {
        if ((rc = tb_topology_intern_host(t, host, len, &h)) != 0)
            return rc;
        slot = tb_topo_nmap_slot(t, h, local_id);
    }
    tb_topo_append_node(t, slot, h, local_id, parent, TB_ROLE_COMMNODE, true, 0, 0);
    return 0;
}

int tb_topology_load_node(tb_topology_t *t, uint32_t host_idx, uint32_t local_id,
                          tbon_rank_t parent, tb_role_t role, bool alive,
                          uint32_t incarnation, uint16_t port)
{
    if (!t || t->finished || host_idx >= t->nhosts || local_id > TB_TOPOLOGY_MAX_ID ||
        (role != TB_ROLE_FE && role != TB_ROLE_COMMNODE && role != TB_ROLE_BE))
        return TBON_EINVAL;
    int rc = tb_topo_grow_nodes(t, (size_t)t->n + 1);
    if (rc)
        return rc;
    size_t slot = name_free(t, host_idx, local_id);
    if (slot == SIZE_MAX)
        return TBON_ETOPOLOGY;
    tb_topo_append_node(t, slot, host_idx, local_id, parent, role, alive, incarnation, port);
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

static void finish_common(tb_topology_t *t)
{
    t->nleaves = 0;
    t->nbare = 0;
    t->dsum = 0;
    for (uint32_t r = 0; r < t->n; r++) {
        t->nleaves += t->alive[r] && t->role[r] == TB_ROLE_BE;
        t->nbare += BARE(t, r);
        t->dsum += tb_topo_node_hash(t, r);
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
    if (tb_topo_grow_nodes(c, t->n) != 0)
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
        c->nmap[tb_topo_nmap_slot(c, c->host[r], c->lid[r])] = r + 1;
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
    uint32_t h = tb_topo_host_lookup(t, host, strlen(host));
    if (h == UINT32_MAX)
        return NONE;
    uint32_t v = t->nmap[tb_topo_nmap_slot(t, h, local_id)];
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
