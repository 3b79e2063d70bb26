/* filter_bad_format.c - a test plug-in whose format string is not a valid
 * packet format: loading must fail with TBON_EFILTER */
#include <tbon/tbon.h>

tbon_filter_fn badfmt;

const char badfmt_format_string[] = "%d %q";

int badfmt(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out,
           void **state, const tbon_filter_ctx_t *ctx)
{
    (void)in;
    (void)n_in;
    (void)out;
    (void)state;
    (void)ctx;
    return 0;
}
