/* filter_silent.c - a test plug-in that sometimes has nothing to say:
 *   silent_at_1  format "%ld": at rank 1 it outputs nothing; elsewhere "%ld",
 *                the sum of its inputs (tag of the first input)
 * A wave that yields no packet must still count as that node's contribution
 * to its parent's wait-for-all wave. */
#include <tbon/tbon.h>

tbon_filter_fn silent_at_1;

const char silent_at_1_format_string[] = "%ld";

int silent_at_1(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out,
                void **state, const tbon_filter_ctx_t *ctx)
{
    int64_t sum = 0, v;

    (void)state;
    if (ctx->rank == 1 || n_in == 0)
        return 0;
    for (size_t i = 0; i < n_in; i++) {
        if (tbon_packet_unpack(in[i], "%ld", &v))
            return TBON_EFORMAT;
        sum += v;
    }
    return tbon_packet_list_push(out, tbon_packet_new(tbon_packet_tag(in[0]), "%ld", sum));
}
