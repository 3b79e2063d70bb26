/* be.c - the token_ring back-end: learns the ring from the front-end's
 * broadcast, then passes each token it gets to the next back-end of the
 * ring (the last one to the front-end), its own rank added, until the
 * front-end shuts the tree down
 *
 * Started by fe (through the tree), never by hand.
 */
#include <tbon/tbon.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_RING  (TBON_FIRST_APP_TAG + 1)  /* "%aud": the ring, in order */
#define TAG_TOKEN (TBON_FIRST_APP_TAG + 2)  /* "%uld %ud": the sum so far, the hops */

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: be (started by the example's fe through tbon_fe_create)\n"
               "Passes each token to the next back-end of the ring, its rank added.\n");
        return 0;
    }
    tbon_error_t err;
    tbon_net_t *net = tbon_be_create(&argc, &argv, &err);
    if (!net) {
        fprintf(stderr, "be: %s\n", err.msg);
        return 1;
    }
    tbon_rank_t me = tbon_net_rank(net), next = 0;  /* 0: the front-end */
    int status = 0;
    for (;;) {
        tbon_rank_t from;
        tbon_packet_t *p;
        int rc = tbon_net_recv_direct(net, &from, &p, -1);  /* -1: block */
        if (rc == TBON_ECLOSED)
            break;                          /* the front-end is done */
        if (rc != 0) {
            fprintf(stderr, "be %u: %s\n", me, tbon_net_error(net));
            status = 1;
            break;
        }
        if (tbon_packet_tag(p) == TAG_RING) {
            uint32_t *ring = NULL;
            size_t n = 0;
            if (tbon_packet_unpack(p, "%aud", &ring, &n) == 0)
                for (size_t i = 0; i < n; i++)
                    if (ring[i] == me)
                        next = i + 1 < n ? ring[i + 1] : 0;
            free(ring);
        } else if (tbon_packet_tag(p) == TAG_TOKEN) {
            uint64_t sum;
            uint32_t hops;
            if (tbon_packet_unpack(p, "%uld %ud", &sum, &hops) == 0 &&
                tbon_net_send_to(net, next, TAG_TOKEN, "%uld %ud", sum + me, hops + 1) != 0)
                fprintf(stderr, "be %u: %s\n", me, tbon_net_error(net));
        }
        tbon_packet_unref(p);
    }
    tbon_net_destroy(net);
    return status;
}
