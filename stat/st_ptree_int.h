/* st_ptree_int.h - the inside of st_tree_t, shared by st_ptree.c (the tree,
 * merging and the binary form) and st_ptree_out.c (queries and outputs).
 * Nothing outside those two files includes it. */
#ifndef TBON_ST_PTREE_INT_H
#define TBON_ST_PTREE_INT_H

#include "st_ptree.h"

/* A task set: sorted, disjoint, non-adjacent ranges (r[i].hi + 1 < r[i+1].lo).
 * Most sets are one range: r then points to `one`, saving an allocation
 * per node (the set must then stay where it is: it lives in a node). */
typedef struct st_rset {
    st_range_t *r;
    size_t n, cap;
    st_range_t one;
} st_rset_t;

/* The number of tasks in r[0..n). */
uint64_t st_ranges_count(const st_range_t *r, size_t n);

/* A node: its task set and its children, sorted by frame (bytewise, as
 * memcmp, shorter first on a common prefix) so that walks, outputs and the
 * binary form do not depend on the order of insertion. The frame is stored
 * in the same allocation; the root's is "". An only child is kept in kid1
 * (kids == &kid1), like a set of one range. */
typedef struct st_node {
    st_rset_t set;
    struct st_node **kids;
    size_t nkids, kcap;
    struct st_node *kid1;
    uint64_t count;     /* a counts-only tree's: how many tasks, */
    uint32_t rep;       /* the lowest of them (the root keeps its set too) */
    size_t flen;
    char frame[];
} st_node_t;

struct st_tree {
    st_node_t *root;
    size_t nnodes;      /* root included */
    int counts;         /* counts-only (st_tree_to_counts) */
    uint32_t round;     /* its round (st_tree_round) */
};

/* A node's number of tasks and lowest task, in either kind of tree. */
static inline uint64_t st_node_count(const st_tree_t *t, const st_node_t *nd)
{
    return t->counts ? nd->count : st_ranges_count(nd->set.r, nd->set.n);
}

static inline uint32_t st_node_rep(const st_tree_t *t, const st_node_t *nd)
{
    return t->counts ? nd->rep : nd->set.n ? nd->set.r[0].lo : 0;
}

/* 1 if task is in s (binary search). */
int st_rset_has(const st_rset_t *s, uint32_t task);


#endif
