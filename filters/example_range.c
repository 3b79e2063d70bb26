/* example_range.c - an example filter plug-in to copy: the running range of
 * the 64-bit integers a stream carries
 *
 * Back-ends send one "%ld" per wave. Every node (commnodes and the FE) runs
 * this filter over the packets of a wave and sends up one "%ld %ld %uld":
 * the smallest and largest value seen on the stream so far below that node,
 * and how many values the wave brought. At the FE the application therefore
 * receives, per wave, the range over every back-end and all earlier waves.
 *
 * Build it as a shared object, with the tbon headers only (the tbon_*
 * functions it calls come from the process that loads it):
 *     cc -shared -fPIC -o range.so example_range.c $(pkg-config --cflags tbon)
 * Load it in the front-end and make a stream with it:
 *     int id = tbon_fe_load_filter(net, "./range.so", "range");
 *     tbon_stream_t *s = tbon_fe_stream_new(net, comm, id,
 *                                           TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
 * See docs/filter-guide.md for the whole contract.
 */
#include <tbon/tbon.h>

#include <stdlib.h>
#include <string.h>

/* What the filter keeps between waves, per stream and per node: the range of
 * everything seen so far. It starts as NULL; the first wave allocates it. */
struct range_state {
    int64_t min, max;
    int     tag;        /* of the last wave, for the state packet */
};

/* Declaring the exports with the typedefs of tbon/filter.h makes the
 * compiler check their signatures. A filter named "range" exports "range",
 * "range_format_string" and, optionally, the two state functions. */
tbon_filter_fn       range;
tbon_filter_state_fn range_get_FilterState;
tbon_filter_free_fn  range_free_state;

/* The format every input must have. tbon checks it before calling range()
 * and refuses the wave on a mismatch. "" accepts anything: this filter takes
 * two formats (a back-end's "%ld" and its own output "%ld %ld %uld", which
 * arrives from commnodes and from state composition), so it checks itself.
 * A filter with one input format should name it here, e.g. "%ld". */
const char range_format_string[] = "";

/* The filter: in[0..n_in) is one wave, one packet per child (with
 * TBON_SYNC_WAITFORALL). The inputs are only lent: to keep one, take a
 * reference (tbon_packet_ref). Outputs go to `out` with
 * tbon_packet_list_push, which takes the reference. Returns 0, or a negative
 * TBON_E* code: the wave's outputs are then dropped and the node logs the
 * failure. */
int range(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out,
          void **state, const tbon_filter_ctx_t *ctx)
{
    struct range_state *st = *state;
    int64_t lo = 0, hi = 0;
    uint64_t count = 0;
    int have = 0;

    /* ctx says where the filter runs: ctx->depth is 0 at the FE, ctx->rank
     * and ctx->num_children describe the node, and ctx->params is the last
     * packet given to tbon_stream_set_filter_params (NULL if none). This
     * filter needs none of them. */
    (void)ctx;
    if (n_in == 0)
        return 0;

    /* Check every input before changing anything, so that a bad wave leaves
     * the state as it was. */
    for (size_t i = 0; i < n_in; i++) {
        const char *fmt = tbon_packet_format(in[i]);  /* canonical form */
        int64_t a, b;
        uint64_t c;

        if (strcmp(fmt, "%ld") == 0) {
            if (tbon_packet_unpack(in[i], "%ld", &a) != 0)
                return TBON_EFORMAT;
            b = a;
            c = 1;
        } else if (strcmp(fmt, "%ld %ld %uld") == 0) {
            if (tbon_packet_unpack(in[i], "%ld %ld %uld", &a, &b, &c) != 0)
                return TBON_EFORMAT;
        } else {
            return TBON_EFORMAT;   /* the node logs the filter and the code */
        }
        if (!have || a < lo)
            lo = a;
        if (!have || b > hi)
            hi = b;
        have = 1;
        count += c;
    }

    /* Fold the wave into the state: min and max are idempotent, so a value
     * seen twice (after a failure, through state composition) changes
     * nothing. The count is per wave and is not kept. */
    if (!st) {
        if (!(st = malloc(sizeof *st)))
            return TBON_ENOMEM;
        st->min = lo;
        st->max = hi;
        *state = st;
    }
    if (lo < st->min)
        st->min = lo;
    if (hi > st->max)
        st->max = hi;
    st->tag = tbon_packet_tag(in[0]);

    /* One output packet. Its stream and source are set by the node. */
    tbon_packet_t *p = tbon_packet_new(st->tag, "%ld %ld %uld", st->min, st->max,
                                       count);
    if (!p)
        return TBON_ENOMEM;
    return tbon_packet_list_push(out, p);   /* takes p, even on failure */
}

/* State composition (Arnold and Miller, "State compensation for MRNet
 * TBONs"): when this node's parent dies and another
 * node adopts it, tbon calls this for every stream using the filter and
 * sends the returned packet to the new parent as ordinary input of the
 * stream, to make up for the state the dead parent took with it. So the
 * packet has a format the filter accepts, and folding it in again must not
 * change a result that already has it (idempotence): the range goes with a
 * count of 0, since its values were counted when they first went up.
 * Return NULL when there is nothing to send. Exporting this function is what
 * makes the filter "state recoverable". */
tbon_packet_t *range_get_FilterState(void **state, uint32_t stream)
{
    struct range_state *st = *state;

    (void)stream;   /* one state per stream: this is the stream's */
    if (!st)
        return NULL;
    return tbon_packet_new(st->tag, "%ld %ld %uld", st->min, st->max,
                           (uint64_t)0);
}

/* Free a state when its stream closes. Optional: without it tbon calls
 * free(), which would do here too; a state with pointers inside needs it. */
void range_free_state(void *state)
{
    free(state);
}
