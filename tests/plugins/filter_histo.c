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
