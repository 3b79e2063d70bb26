/* stat_merge.c - tbon_stat's merge filter plug-in: the union of the
 * call-prefix trees the back-ends sample (docs/stat.md)
 *
 * Every input is "%auc %auc": the binary forms (st_tree_encode) of a 2D tree
 * (call paths) and a 3D tree (call paths with more detail). The filter folds
 * each wave into the trees it keeps and outputs them whole, as one
 * "%auc %auc" packet: the FE thus always holds the complete merge so far.
 * Tree merging is union, so the filter is associative, commutative and
 * idempotent, and its state can be composed after a failure (filter guide,
 * "State composition"): stat_merge_get_FilterState returns the same packet.
 *
 * Counts-only trees (tbon_stat --counts-only) do not add up idempotently:
 * the filter keeps each source's newest trees (a source sends the whole of
 * what it has each time) and outputs the sum of those of the newest round
 * (a round is one ask of the front-end; each ask again counts up, and every
 * live back-end answers it), larger first. A source whose tasks are all in
 * already adds nothing (a task's stacks are sampled once: the same); one
 * that shares only some of its tasks with those in (after a failure moved
 * tasks to another parent) is left out until the next round sorts it out,
 * and the front-end, missing them, asks again.
 *
 * The plug-in carries its own copy of st_ptree.c (the Makefile links it in);
 * the tbon_* functions come from the process that loads it. */
#include <tbon/tbon.h>

#include "st_ptree.h"

#include <stdlib.h>
#include <string.h>

/* A source's newest counts-only trees. */
struct source {
    uint32_t rank;
    st_tree_t *tree[2];
    uint64_t ntasks;      /* in its trees (their roots' sets) */
};

struct stat_state {
    st_tree_t *tree[2];   /* 2D, 3D: the union, or the counts-only sum */
    int tag;              /* of the last wave, for the state packet */
    int counts;           /* the inputs are counts-only trees */
    struct source *src;   /* counts-only: each source's newest */
    size_t nsrc;
};

tbon_filter_fn       stat_merge;
tbon_filter_state_fn stat_merge_get_FilterState;
tbon_filter_free_fn  stat_merge_free_state;

const char stat_merge_format_string[] = "%auc %auc";

static const char *const dim_name[2] = { "2D", "3D" };

void stat_merge_free_state(void *state)
{
    struct stat_state *st = state;
    if (!st)
        return;
    st_tree_free(st->tree[0]);
    st_tree_free(st->tree[1]);
    for (size_t i = 0; i < st->nsrc; i++) {
        st_tree_free(st->src[i].tree[0]);
        st_tree_free(st->src[i].tree[1]);
    }
    free(st->src);
    free(st);
}

/* The state as one "%auc %auc" packet, or NULL when out of memory. */
static tbon_packet_t *state_packet(const struct stat_state *st)
{
    uint8_t *b[2] = { NULL, NULL };
    size_t n[2] = { 0, 0 };
    tbon_packet_t *p = NULL;

    if (st_tree_encode(st->tree[0], &b[0], &n[0]) == 0 &&
        st_tree_encode(st->tree[1], &b[1], &n[1]) == 0)
        p = tbon_packet_new(st->tag, "%auc %auc", b[0], n[0], b[1], n[1]);
    free(b[0]);
    free(b[1]);
    return p;
}

/* Decode input i's two trees into t[0..2); TBON_EFORMAT or TBON_ENOMEM
 * after tbon_filter_error. */
static int decode_input(tbon_packet_t *in, size_t i, st_tree_t *t[2])
{
    uint8_t *b[2] = { NULL, NULL };
    size_t n[2] = { 0, 0 };
    char err[256];
    int rc = tbon_packet_unpack(in, "%auc %auc", &b[0], &n[0], &b[1], &n[1]);

    if (rc) {
        tbon_filter_error("input %zu (from rank %lu): cannot unpack \"%%auc %%auc\" (%s)", i,
                          (unsigned long)tbon_packet_source(in), tbon_strerror(rc));
        return rc == TBON_ENOMEM ? rc : TBON_EFORMAT;
    }
    for (int d = 0; d < 2 && rc == 0; d++) {
        if (!(t[d] = st_tree_decode(b[d], n[d], err, sizeof err))) {
            tbon_filter_error("input %zu (from rank %lu): %s tree: %s", i,
                              (unsigned long)tbon_packet_source(in), dim_name[d], err);
            rc = strstr(err, "out of memory") ? TBON_ENOMEM : TBON_EFORMAT;
        }
    }
    free(b[0]);
    free(b[1]);
    return rc;
}

/* Counts-only: input i's trees t[0..2) become its source's newest (they
 * are taken: *t set to NULL), unless that source already sent a later
 * round. 0 or TBON_ENOMEM. */
static int counts_take(struct stat_state *st, uint32_t rank, st_tree_t *t[2])
{
    size_t i = 0;
    while (i < st->nsrc && st->src[i].rank != rank)
        i++;
    if (i == st->nsrc) {
        struct source *v = realloc(st->src, (st->nsrc + 1) * sizeof *v);
        if (!v)
            return TBON_ENOMEM;
        st->src = v;
        st->src[st->nsrc++] = (struct source){ rank, { NULL, NULL }, 0 };
    } else if (st_tree_round(st->src[i].tree[0]) > st_tree_round(t[0])) {
        return 0;   /* an older round's, late: the one kept is newer */
    }
    for (int d = 0; d < 2; d++) {
        st_tree_free(st->src[i].tree[d]);
        st->src[i].tree[d] = t[d];
        t[d] = NULL;
    }
    st_tree_tasks(st->src[i].tree[0], NULL, &st->src[i].ntasks);
    return 0;
}

static int by_tasks_desc(const void *a, const void *b)
{
    const struct source *x = *(const struct source *const *)a,
                        *y = *(const struct source *const *)b;
    if (x->ntasks != y->ntasks)
        return x->ntasks > y->ntasks ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Counts-only: the output trees, the sum of the newest round's sources
 * (see the top). 0 or TBON_ENOMEM. */
static int counts_compose(struct stat_state *st)
{
    uint32_t round = 0;
    for (size_t i = 0; i < st->nsrc; i++)
        if (st_tree_round(st->src[i].tree[0]) > round)
            round = st_tree_round(st->src[i].tree[0]);
    const struct source **order = malloc((st->nsrc ? st->nsrc : 1) * sizeof *order);
    st_tree_t *sum[2] = { st_tree_new(), st_tree_new() };
    int rc = order && sum[0] && sum[1] ? 0 : TBON_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; rc == 0 && i < st->nsrc; i++)
        if (st_tree_round(st->src[i].tree[0]) == round)
            order[n++] = &st->src[i];
    if (n > 1)
        qsort(order, n, sizeof *order, by_tasks_desc);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int r = st_tree_merge(sum[0], order[i]->tree[0]);
        if (r == ST_OVERLAP)
            continue;
        rc = r ? r : st_tree_merge(sum[1], order[i]->tree[1]);
        if (rc == ST_OVERLAP)
            rc = TBON_EINVAL;   /* a 3D tree of other tasks than its 2D tree */
    }
    free(order);
    if (rc) {
        tbon_filter_error("%s adding up the counts-only trees",
                          rc == TBON_ENOMEM ? "out of memory" : "a 3D tree not of its 2D tree's "
                          "tasks");
        st_tree_free(sum[0]);
        st_tree_free(sum[1]);
        return rc;
    }
    for (int d = 0; d < 2; d++) {
        st_tree_free(st->tree[d]);
        st->tree[d] = sum[d];
    }
    return 0;
}

int stat_merge(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out,
               void **state, const tbon_filter_ctx_t *ctx)
{
    struct stat_state *st = *state;
    st_tree_t **trees;
    int rc = 0;

    (void)ctx;   /* the same merge at every level, the FE included */
    if (n_in == 0)
        return 0;

    /* Decode the whole wave before touching the state: a bad input leaves
     * it as it was. */
    if (!(trees = calloc(2 * n_in, sizeof *trees)))
        return TBON_ENOMEM;
    for (size_t i = 0; i < n_in && rc == 0; i++)
        rc = decode_input(in[i], i, &trees[2 * i]);
    if (rc)
        goto out;

    if (!st) {
        if (!(st = calloc(1, sizeof *st)) || !(st->tree[0] = st_tree_new()) ||
            !(st->tree[1] = st_tree_new())) {
            stat_merge_free_state(st);
            rc = TBON_ENOMEM;
            goto out;
        }
        *state = st;
    }
    /* One kind of tree on a stream (a request asks for one). */
    if (st->nsrc == 0 && st_tree_size(st->tree[0]) == 1)
        st->counts = st_tree_is_counts(trees[0]);
    for (size_t i = 0; i < 2 * n_in && rc == 0; i++) {
        if (st_tree_is_counts(trees[i]) != st->counts) {
            tbon_filter_error("input %zu (from rank %lu): a %s tree on a stream of %s trees",
                              i / 2, (unsigned long)tbon_packet_source(in[i / 2]),
                              st->counts ? "full" : "counts-only",
                              st->counts ? "counts-only" : "full");
            rc = TBON_EFORMAT;
        }
    }
    if (rc)
        goto out;
    if (st->counts) {
        for (size_t i = 0; i < n_in && rc == 0; i++)
            rc = counts_take(st, (uint32_t)tbon_packet_source(in[i]), &trees[2 * i]);
        if (rc == 0)
            rc = counts_compose(st);
        if (rc)
            goto out;
    }
    /* On ENOMEM a tree may hold part of an input: still a valid tree, and
     * a later merge of the same input completes it (merging is idempotent). */
    for (size_t i = 0; i < 2 * n_in && !st->counts; i++) {
        if ((rc = st_tree_merge(st->tree[i % 2], trees[i]))) {
            tbon_filter_error("out of memory merging the %s tree of input %zu",
                              dim_name[i % 2], i / 2);
            goto out;
        }
    }
    st->tag = tbon_packet_tag(in[0]);

    tbon_packet_t *p = state_packet(st);
    rc = p ? tbon_packet_list_push(out, p) : TBON_ENOMEM;
out:
    for (size_t i = 0; i < 2 * n_in; i++)
        st_tree_free(trees[i]);
    free(trees);
    return rc;
}

tbon_packet_t *stat_merge_get_FilterState(void **state, uint32_t stream)
{
    struct stat_state *st = *state;
    (void)stream;   /* one state per stream: this is the stream's */
    return st ? state_packet(st) : NULL;
}
