/* topology_int.h - the topology's storage, shared by topology.c (building,
 * queries) and topology_edit.c (failures, adoptions, joins); nothing else
 * includes it: outside topo/ a topology is opaque (topology.h). */
#ifndef TB_TOPOLOGY_INT_H
#define TB_TOPOLOGY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "topo/topology.h"

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
    uint64_t  dsum;            /* sum of tb_topo_node_hash() over all ranks */
    uint32_t *pend;            /* pending claims: (rank, claimed parent) pairs, */
    uint32_t  npend, pcap;     /* sorted by rank; almost always empty */
};

#define NONE TBON_RANK_NONE
#define BARE(t, r) ((t)->alive[r] && (t)->role[r] == TB_ROLE_COMMNODE && (t)->ccnt[r] == 0)
#define VALID(t, r) ((t) && (t)->finished && (r) < (t)->n)

uint64_t tb_topo_node_hash(const tb_topology_t *t, uint32_t r);
size_t tb_topo_nmap_slot(const tb_topology_t *t, uint32_t host, uint32_t lid);
uint32_t tb_topo_host_lookup(const tb_topology_t *t, const char *s, size_t len);
int tb_topo_grow_nodes(tb_topology_t *t, size_t want);
uint32_t tb_topo_append_node(tb_topology_t *t, size_t slot, uint32_t host, uint32_t lid,
                            uint32_t parent, tb_role_t role, bool alive, uint32_t inc,
                            uint16_t port);

#endif
