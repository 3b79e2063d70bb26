/* filter.c - the integer_add filter plug-in: sums its inputs' "%d" values
 *
 * Every commnode (and the front-end) calls integer_add with one packet from
 * each child per wave and sends the one packet it returns to its parent. It
 * is built as a shared object and not linked with libtbon: the tbon_*
 * functions it calls come from the process that loads it.
 */
#include <tbon/tbon.h>

/* The format every input must have; the library checks it before calling. */
const char integer_add_format_string[] = "%d";

int integer_add(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out,
                void **state, const tbon_filter_ctx_t *ctx)
{
    int64_t sum = 0;

    (void)state;   /* no state kept between waves */
    (void)ctx;
    if (n_in == 0)
        return 0;
    for (size_t i = 0; i < n_in; i++) {
        int32_t v;
        if (tbon_packet_unpack(in[i], "%d", &v) != 0)
            return TBON_EFORMAT;
        sum += v;
    }
    if (sum < INT32_MIN || sum > INT32_MAX)
        return TBON_EFILTER;          /* the sum does not fit in "%d" */
    tbon_packet_t *p = tbon_packet_new(tbon_packet_tag(in[0]), "%d", (int32_t)sum);
    if (!p)
        return TBON_ENOMEM;
    return tbon_packet_list_push(out, p);   /* takes our reference */
}
