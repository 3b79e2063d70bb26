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
 * The plug-in carries its own copy of st_ptree.c (the Makefile links it in);
 * the tbon_* functions come from the process that loads it. */
#include <tbon/tbon.h>

#include "st_ptree.h"

#include <stdlib.h>
#include <string.h>

struct stat_state {
    st_tree_t *tree[2];   /* 2D, 3D */
    int tag;              /* of the last wave, for the state packet */
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
    /* On ENOMEM a tree may hold part of an input: still a valid tree, and
     * a later merge of the same input completes it (merging is idempotent). */
    for (size_t i = 0; i < 2 * n_in; i++) {
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
