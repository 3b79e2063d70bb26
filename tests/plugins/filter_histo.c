/* filter_histo.c - a user filter that earns exact results: histo adds
 * histograms ("%auld" arrays of bucket counts) bucket by bucket. Adding is
 * associative and commutative, so it declares histo_associative and tbon
 * folds each back-end's histogram once, also when commnodes die
 * (docs/filter-guide.md, "Exact results when commnodes die"). Not
 * idempotent: a histogram counted twice would show. */
#include <tbon/tbon.h>

#include <stdlib.h>
#include <string.h>

tbon_filter_fn histo;
const char histo_format_string[] = "%auld";
const int histo_associative = 1;

int histo(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out, void **state,
          const tbon_filter_ctx_t *ctx)
{
    (void)state;
    (void)ctx;
    uint64_t *sum = NULL;
    size_t len = 0;
    for (size_t i = 0; i < n_in; i++) {
        uint64_t *v = NULL;
        size_t n = 0;
        if (tbon_packet_unpack(in[i], "%auld", &v, &n) != 0) {
            free(sum);
            tbon_filter_error("input %zu is \"%s\", not a histogram \"%%auld\"", i,
                              tbon_packet_format(in[i]));
            return TBON_EFORMAT;
        }
        if (n > len) {
            uint64_t *g = realloc(sum, n * sizeof *g);
            if (!g) {
                free(v);
                free(sum);
                return TBON_ENOMEM;
            }
            memset(g + len, 0, (n - len) * sizeof *g);
            sum = g;
            len = n;
        }
        for (size_t b = 0; b < n; b++)
            sum[b] += v[b];
        free(v);
    }
    int rc = tbon_packet_list_push(out, tbon_packet_new(tbon_packet_tag(in[0]), "%auld",
                                                        sum, len));
    free(sum);
    return rc;
}

/* histo_max: the bucket-by-bucket maximum of histograms, idempotent and
 * state recoverable (F_get_FilterState: the maximum so far), declaring
 * nothing else: state composition (seed 003) is its way through a failure,
 * at commnodes and at back-ends alike. */
tbon_filter_fn histo_max;
tbon_filter_state_fn histo_max_get_FilterState;
tbon_filter_free_fn histo_max_free_state;
const char histo_max_format_string[] = "%auld";

struct hmax {
    uint64_t *v;
    size_t n;
};

static int hmax_fold(struct hmax *h, tbon_packet_t *p)
{
    uint64_t *v = NULL;
    size_t n = 0;
    if (tbon_packet_unpack(p, "%auld", &v, &n) != 0) {
        tbon_filter_error("\"%s\" is not a histogram \"%%auld\"", tbon_packet_format(p));
        return TBON_EFORMAT;
    }
    if (n > h->n) {
        uint64_t *g = realloc(h->v, n * sizeof *g);
        if (!g) {
            free(v);
            return TBON_ENOMEM;
        }
        memset(g + h->n, 0, (n - h->n) * sizeof *g);
        h->v = g;
        h->n = n;
    }
    for (size_t b = 0; b < n; b++)
        if (v[b] > h->v[b])
            h->v[b] = v[b];
    free(v);
    return 0;
}

int histo_max(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out, void **state,
              const tbon_filter_ctx_t *ctx)
{
    (void)ctx;
    struct hmax *st = *state, wave = { NULL, 0 };
    if (!st && !(st = *state = calloc(1, sizeof *st)))
        return TBON_ENOMEM;
    for (size_t i = 0; i < n_in; i++) {
        int rc = hmax_fold(&wave, in[i]);
        if (rc == 0)
            rc = hmax_fold(st, in[i]);
        if (rc) {
            free(wave.v);
            return rc;
        }
    }
    int rc = n_in ? tbon_packet_list_push(out, tbon_packet_new(tbon_packet_tag(in[0]), "%auld",
                                                              wave.v, wave.n))
                  : 0;
    free(wave.v);
    return rc;
}

tbon_packet_t *histo_max_get_FilterState(void **state, uint32_t stream)
{
    (void)stream;
    struct hmax *st = *state;
    return st && st->n ? tbon_packet_new(TBON_FIRST_APP_TAG + 1, "%auld", st->v, st->n) : NULL;
}

void histo_max_free_state(void *state)
{
    struct hmax *st = state;
    if (st)
        free(st->v);
    free(st);
}
