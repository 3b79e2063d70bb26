/* backend.c - tbon_fims --be: the back-end at every leaf of the tree. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tbon/tbon.h>

#include "fims.h"

/* Join the tree, wait for the start packet ("%lf %lf %uld %s": rate, duration,
 * seed, directory), send VALS_PER_PKT values per period for the duration and
 * append each successfully sent packet's values to DIR/be-RANK.txt; then stay
 * until the front-end closes the network. */
int be_main(int argc, char **argv)
{
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_be_create(&argc, &argv, &err);
    if (!net) {
        fprintf(stderr, PROG " --be: tbon_be_create: %s\n", err.msg);
        return 1;
    }
    tbon_rank_t rank = tbon_net_rank(net);
    tbon_packet_t *p = NULL;
    tbon_stream_t *s = NULL;
    int rc = tbon_net_recv(net, &p, &s, -1);
    double rate = 0, dur = 0;
    uint64_t seed = 0;
    char *dir = NULL;
    if (rc == 0 && (tbon_packet_tag(p) != TAG_START ||
                    tbon_packet_unpack(p, "%lf %lf %uld %s", &rate, &dur, &seed, &dir) != 0)) {
        fprintf(stderr, PROG " --be: rank %u: unexpected first packet (tag %d, \"%s\")\n",
                (unsigned)rank, tbon_packet_tag(p), tbon_packet_format(p));
        rc = TBON_EFORMAT;
    }
    tbon_packet_unref(p);
    p = NULL;
    FILE *out = NULL;
    if (rc == 0) {
        char path[4200];
        snprintf(path, sizeof path, "%s/be-%u.txt", dir, (unsigned)rank);
        out = fopen(path, "w");
        if (!out) {
            fprintf(stderr, PROG " --be: rank %u: %s: %s\n", (unsigned)rank, path,
                    strerror(errno));
            rc = TBON_EIO;
        }
    }
    free(dir);
    if (rc == 0) {
        /* Every back-end draws from its own sequence; half of the values
         * fall in a small range all of them share, so the same value comes
         * from several back-ends (and the union has duplicates to remove). */
        uint64_t st = seed ^ ((uint64_t)rank * 0xD1B54A32D192ED03ull);
        int64_t period = (int64_t)(1e6 / rate), t = now_us(), end = t + (int64_t)(dur * 1e6);
        while (t < end) {
            uint64_t v[VALS_PER_PKT];
            for (int i = 0; i < VALS_PER_PKT; i++)
                v[i] = i < VALS_PER_PKT / 2 ? rng_next(&st) % SHARED_POOL : rng_next(&st);
            /* Written down before they go: a back-end killed between the
             * two must not have values at the front-end that its file
             * lacks ("received but never sent"); the other way round they
             * are counted as lost with it, which a failed back-end may be. */
            for (int i = 0; i < VALS_PER_PKT; i++)
                fprintf(out, "%" PRIu64 "\n", v[i]);
            fflush(out);
            rc = tbon_stream_send(s, TAG_DATA, "%auld", v, (size_t)VALS_PER_PKT);
            if (rc != 0)
                break;
            t += period;
            sleep_until_us(t);
        }
        fclose(out);
    }
    /* Stay (answering nothing) until the front-end shuts the tree down. */
    while (rc == 0) {
        rc = tbon_net_recv(net, &p, &s, -1);
        tbon_packet_unref(p);
        p = NULL;
    }
    if (rc != TBON_ECLOSED)
        fprintf(stderr, PROG " --be: rank %u: %s (%s)\n", (unsigned)rank, tbon_strerror(rc),
                tbon_net_error(net));
    tbon_net_destroy(net);
    return rc == TBON_ECLOSED ? 0 : 1;
}
