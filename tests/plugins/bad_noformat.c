/* bad_noformat.c - a test plug-in whose filter lacks bad_noformat_format_string:
 * loading it must fail with TBON_EFILTER naming that symbol */
#include <tbon/tbon.h>

tbon_filter_fn bad_noformat;

int bad_noformat(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out,
                 void **state, const tbon_filter_ctx_t *ctx)
{
    (void)in;
    (void)n_in;
    (void)out;
    (void)state;
    (void)ctx;
    return 0;
}
