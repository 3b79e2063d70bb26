/* filter_fail.c - test plug-ins that fail, for tb_filter_run's error path:
 *   fail_plain     pushes one packet, then returns TBON_EFILTER (no message):
 *                  the pushed packet must be dropped
 *   fail_msg       says why with tbon_filter_error, returns TBON_EFORMAT
 *   fail_positive  returns 7 (not a TBON_E* code): taken as TBON_EFILTER
 */
#include <tbon/tbon.h>

/* Exported by libtbon; declared here until tbon/filter.h declares it. */
void tbon_filter_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

tbon_filter_fn fail_plain;
tbon_filter_fn fail_msg;
tbon_filter_fn fail_positive;

const char fail_plain_format_string[] = "";
const char fail_msg_format_string[] = "";
const char fail_positive_format_string[] = "";

int fail_plain(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out,
               void **state, const tbon_filter_ctx_t *ctx)
{
    (void)state;
    (void)ctx;
    if (n_in)
        tbon_packet_list_push(out, tbon_packet_ref(in[0]));
    return TBON_EFILTER;
}

int fail_msg(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out,
             void **state, const tbon_filter_ctx_t *ctx)
{
    (void)in;
    (void)out;
    (void)state;
    tbon_filter_error("wave of %zu packets at depth %u rejected", n_in,
                      ctx ? (unsigned)ctx->depth : 0u);
    return TBON_EFORMAT;
}

int fail_positive(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out,
                  void **state, const tbon_filter_ctx_t *ctx)
{
    (void)in;
    (void)n_in;
    (void)out;
    (void)state;
    (void)ctx;
    return 7;
}
