/* be.c - the integer_addition back-end: answers each request "%d" (the wave)
 * with "%d" rank * (wave + 1), until the front-end shuts the tree down
 *
 * Started by fe (through the tree), never by hand: tbon_be_create reads the
 * launcher's arguments and connects to the parent.
 */
#include <tbon/tbon.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: be (started by the example's fe through tbon_fe_create)\n"
               "Answers each request \"%%d\" w with rank * (w + 1), as \"%%d\".\n");
        return 0;
    }
    tbon_error_t err;
    tbon_net_t *net = tbon_be_create(&argc, &argv, &err);  /* removes tbon's arguments */
    if (!net) {
        fprintf(stderr, "be: %s\n", err.msg);
        return 1;
    }
    tbon_rank_t rank = tbon_net_rank(net);

    for (;;) {
        tbon_packet_t *p;
        tbon_stream_t *s;
        int rc = tbon_net_recv(net, &p, &s, -1);   /* -1: block */
        if (rc == TBON_ECLOSED)
            break;                                 /* the front-end is done */
        if (rc != 0) {
            fprintf(stderr, "be %u: %s\n", (unsigned)rank, tbon_strerror(rc));
            tbon_net_destroy(net);
            return 1;
        }
        int32_t wave;
        if (tbon_packet_unpack(p, "%d", &wave) == 0) {
            /* Answer on the stream the request came on, with the same tag. */
            rc = tbon_stream_send(s, tbon_packet_tag(p), "%d", (int32_t)rank * (wave + 1));
            if (rc != 0)
                fprintf(stderr, "be %u: %s\n", (unsigned)rank, tbon_strerror(rc));
        }
        tbon_packet_unref(p);
    }
    tbon_net_destroy(net);
    return 0;
}
