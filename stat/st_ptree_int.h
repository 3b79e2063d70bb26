/* st_ptree_int.h - the inside of a call-prefix tree, for st_ptree.c and its
 * outputs (st_ptree_out.c); nothing else sees it */
#ifndef TBON_ST_PTREE_INT_H
#define TBON_ST_PTREE_INT_H

#include "st_ptree.h"

typedef struct st_node {
    char *frame;                /* NULL at the root */
    struct st_node *parent;
    st_range_t *r;              /* the task set: sorted, disjoint, not adjacent */
    size_t nr, cr;
    struct st_node **kid;       /* sorted by frame (strcmp) */
    size_t nk, ck;
} st_node_t;

struct st_tree {
    st_node_t *root;
    size_t nnodes;
};

uint64_t st_set_count(const st_range_t *r, size_t nr);
int st_set_has(const st_range_t *r, size_t nr, uint32_t x);

#endif
