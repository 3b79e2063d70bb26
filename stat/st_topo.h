/* st_topo.h - topology files in the text format for the trees tbon_stat
 * starts (st_topo.c). */
#ifndef TBON_ST_TOPO_H
#define TBON_ST_TOPO_H

#include <stddef.h>
#include <stdint.h>

/* A tree to write as a topology file in the text format (docs/topology.md):
 * n nodes in rank order, breadth-first (every parent before its children,
 * a parent's children one after the other, so parents never decrease
 * after node 0); node 0 the front-end, its parent unused. */
struct st_topo {
    const char **host;
    uint32_t *id;
    uint32_t *parent;
    size_t n;
};

/* Room for n nodes (zeroed), or death; st_topo_free releases it (not the
 * host names, which are the caller's). */
void st_topo_alloc(struct st_topo *t, size_t n);
void st_topo_free(struct st_topo *t);

/* Whether a topology file may name host h: 1 to 255 letters, digits, '-',
 * '.' and '_', starting with a letter or digit (docs/topology.md). */
int st_host_ok(const char *h);

/* Write t to path, the comment line first: 0, or -1 with why in err
 * ("PATH: cannot create: ...", "PATH: write error: ..."; the file removed). */
int st_topo_write(const struct st_topo *t, const char *path, const char *comment, char *err,
                  size_t errlen);

/* The tree of minimal depth over leaves back-ends with at most k (>= 2)
 * children per node, every node on localhost, into t (st_topo_alloc'ed
 * here). */
void st_topo_fanout(struct st_topo *t, uint32_t k, uint32_t leaves);
/* The same with commnodes set: at least one level of commnodes between the
 * front-end and the back-ends (a tree that outlives its front-end needs
 * them: --session). */
void st_topo_fanout_cn(struct st_topo *t, uint32_t k, uint32_t leaves, int commnodes);

#endif
