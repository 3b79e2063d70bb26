/* stat_merge.c - tbon_stat's merge filter, a tbon plug-in: unites the
 * call-prefix trees of a wave (docs/stat.md)
 *
 * Every input is "%auc %auc": the binary forms of a 2D tree (the last sample
 * of each task) and a 3D tree (all samples). The filter decodes every input
 * of the wave first (a malformed one fails the wave and changes nothing),
 * unites them into its state, and outputs the whole state in the same
 * format. Union node by node is associative, commutative and idempotent, so
 * the state is recoverable (seed 003, IV-C): stat_merge_get_FilterState
 * returns it, an adopted orphan sends it to its new parent, and what the
 * parent already had changes nothing. A model for users' filters: it checks
 * its inputs itself and names what is wrong.
 */
#include <tbon/tbon.h>

#include "st_ptree.h"

#include <stdlib.h>
#include <string.h>

tbon_filter_fn       stat_merge;
tbon_filter_state_fn stat_merge_get_FilterState;
tbon_filter_free_fn  stat_merge_free_state;

const char stat_merge_format_string[] = "%auc %auc";

struct merge_state {
    st_tree_t *t2, *t3;
    int tag;
};

/* The state as an output packet (NULL when out of memory). */
static tbon_packet_t *state_packet(const struct merge_state *st)
{
    uint8_t *b2 = NULL, *b3 = NULL;
    size_t l2 = 0, l3 = 0;
    tbon_packet_t *p = NULL;
    if (st_tree_encode(st->t2, &b2, &l2) == 0 && st_tree_encode(st->t3, &b3, &l3) == 0)
        p = tbon_packet_new(st->tag, "%auc %auc", b2, l2, b3, l3);
    free(b2);
    free(b3);
    return p;
}

int stat_merge(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out, void **state,
               const tbon_filter_ctx_t *ctx)
{
    (void)ctx;
    if (n_in == 0)
        return 0;
    struct merge_state *st = *state;
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st || !(st->t2 = st_tree_new()) || !(st->t3 = st_tree_new())) {
            if (st) {
                st_tree_free(st->t2);
                free(st);
            }
            tbon_filter_error("out of memory");
            return TBON_ENOMEM;
        }
        *state = st;
    }
    /* Decode the whole wave before touching the state. */
    st_tree_t **trees = calloc(2 * n_in, sizeof *trees);
    if (!trees) {
        tbon_filter_error("out of memory for a wave of %zu inputs", n_in);
        return TBON_ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; i < n_in && rc == 0; i++) {
        uint8_t *b[2] = { NULL, NULL };
        size_t l[2] = { 0, 0 };
        if (tbon_packet_unpack(in[i], "%auc %auc", &b[0], &l[0], &b[1], &l[1]) != 0) {
            tbon_filter_error("input %zu (from rank %u) has format \"%s\", not \"%%auc %%auc\"",
                              i, tbon_packet_source(in[i]), tbon_packet_format(in[i]));
            rc = TBON_EFORMAT;
        }
        for (int k = 0; k < 2 && rc == 0; k++) {
            char err[256];
            trees[2 * i + (size_t)k] = st_tree_decode(b[k], l[k], err, sizeof err);
            if (!trees[2 * i + (size_t)k]) {
                tbon_filter_error("input %zu (from rank %u): its %s tree: %s", i,
                                  tbon_packet_source(in[i]), k ? "3D" : "2D", err);
                rc = TBON_EFORMAT;
            }
        }
        free(b[0]);
        free(b[1]);
    }
    for (size_t i = 0; i < n_in && rc == 0; i++)
        if (st_tree_merge(st->t2, trees[2 * i]) || st_tree_merge(st->t3, trees[2 * i + 1])) {
            tbon_filter_error("out of memory merging input %zu", i);
            rc = TBON_ENOMEM;
        }
    for (size_t i = 0; i < 2 * n_in; i++)
        st_tree_free(trees[i]);
    free(trees);
    if (rc)
        return rc;
    st->tag = tbon_packet_tag(in[0]);
    tbon_packet_t *p = state_packet(st);
    if (!p) {
        tbon_filter_error("out of memory for the merged trees");
        return TBON_ENOMEM;
    }
    return tbon_packet_list_push(out, p);
}

tbon_packet_t *stat_merge_get_FilterState(void **state, uint32_t stream)
{
    (void)stream;
    struct merge_state *st = state ? *state : NULL;
    return st ? state_packet(st) : NULL;
}

void stat_merge_free_state(void *state)
{
    struct merge_state *st = state;
    if (!st)
        return;
    st_tree_free(st->t2);
    st_tree_free(st->t3);
    free(st);
}
