/* filter_int_only.c - test plug-ins with fixed input formats, for the format
 * check of tb_filter_run:
 *   int_only  format "%d": outputs "%d" the sum of its inputs
 *   spaced    format " %d   %ld ": white space around conversions is allowed;
 *             outputs "%ld" the sum of all values
 */
#include <tbon/tbon.h>

tbon_filter_fn int_only;
tbon_filter_fn spaced;

const char int_only_format_string[] = "%d";
const char spaced_format_string[] = " %d   %ld ";

int int_only(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out,
             void **state, const tbon_filter_ctx_t *ctx)
{
    int32_t sum = 0, v;

    (void)state;
    (void)ctx;
    for (size_t i = 0; i < n_in; i++) {
        if (tbon_packet_unpack(in[i], "%d", &v))
            return TBON_EFORMAT;
        sum += v;
    }
    return tbon_packet_list_push(out, tbon_packet_new(TBON_FIRST_APP_TAG, "%d", sum));
}

int spaced(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out,
           void **state, const tbon_filter_ctx_t *ctx)
{
    int64_t sum = 0, b;
    int32_t a;

    (void)state;
    (void)ctx;
    for (size_t i = 0; i < n_in; i++) {
        if (tbon_packet_unpack(in[i], "%d %ld", &a, &b))
            return TBON_EFORMAT;
        sum += a + b;
    }
    return tbon_packet_list_push(out, tbon_packet_new(TBON_FIRST_APP_TAG, "%ld", sum));
}
