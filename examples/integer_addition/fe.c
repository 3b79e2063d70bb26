/* fe.c - the integer_addition front-end: launch a tree, load the integer_add
 * filter into it, send waves of requests and check every sum that comes back
 *
 * usage: fe TOPOLOGY [WAVES]
 * The back-end (be) and the filter (filter.so) are found next to this program.
 * A model to copy: it uses only the public API (#include <tbon/tbon.h>).
 */
#include <tbon/tbon.h>

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG_ADD (TBON_FIRST_APP_TAG + 1)   /* tags below TBON_FIRST_APP_TAG are tbon's */

/* What back-end `rank` answers in wave `wave`; be.c computes the same. */
static int64_t be_value(tbon_rank_t rank, int32_t wave)
{
    return (int64_t)rank * (wave + 1);
}

/* The directory this program lives in (Linux: /proc/self/exe), into dir. */
static int own_dir(char *dir, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", dir, len - 1);
    if (n <= 0)
        return -1;
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    return 0;
}

int main(int argc, char **argv)
{
    char dir[PATH_MAX], be[PATH_MAX + 8], so[PATH_MAX + 16];
    int waves = 3, status = 1;
    tbon_error_t err;
    tbon_rank_t *ranks = NULL;

    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: %s TOPOLOGY [WAVES]\n"
               "Launch the tree of TOPOLOGY with ./be at its leaves, load ./filter.so's\n"
               "integer_add, and check WAVES (default 3) broadcast + sum waves.\n", argv[0]);
        return 0;
    }
    if (argc < 2 || argc > 3 || (argc == 3 && (waves = atoi(argv[2])) <= 0)) {
        fprintf(stderr, "usage: %s TOPOLOGY [WAVES]   (WAVES >= 1, default 3)\n", argv[0]);
        return 2;
    }
    if (own_dir(dir, sizeof dir) != 0) {
        fprintf(stderr, "fe: cannot find my own directory\n");
        return 1;
    }
    snprintf(be, sizeof be, "%s/be", dir);
    snprintf(so, sizeof so, "%s/filter.so", dir);

    /* 1. Launch the tree: the commnodes of the topology, `be` at its leaves.
     *    Returns once every process is connected. */
    tbon_net_t *net = tbon_fe_create(argv[1], be, NULL, NULL, &err);
    if (!net) {
        fprintf(stderr, "fe: %s\n", err.msg);
        return 1;
    }

    /* 2. Load our filter here and in every commnode; it gets an id. */
    int filter = tbon_fe_load_filter(net, so, "integer_add");
    if (filter < 0) {
        fprintf(stderr, "fe: %s\n", tbon_net_error(net));
        goto out;
    }

    /* 3. A stream to every back-end: integer_add upstream, one result per wave. */
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), filter,
                                          TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    if (!s) {
        fprintf(stderr, "fe: %s\n", tbon_net_error(net));
        goto out;
    }

    /* The back-ends' ranks, to know which sum to expect. */
    size_t n = tbon_net_num_backends(net);
    ranks = calloc(n ? n : 1, sizeof *ranks);
    if (!ranks)
        goto out;
    n = (size_t)tbon_net_backends(net, ranks, n);
    printf("fe: %zu back-ends connected\n", n);

    /* 4. Waves: a request down to every back-end, one sum back up. */
    status = 0;
    for (int32_t w = 0; w < waves; w++) {
        int64_t expected = 0;
        for (size_t i = 0; i < n; i++)
            expected += be_value(ranks[i], w);

        int rc = tbon_stream_send(s, TAG_ADD, "%d", w);
        tbon_packet_t *p = NULL;
        if (rc == 0)
            rc = tbon_stream_recv(s, &p, 30000);   /* ms; -1 would wait for ever */
        int32_t sum = 0;
        if (rc == 0)
            rc = tbon_packet_unpack(p, "%d", &sum);
        tbon_packet_unref(p);
        if (rc != 0) {
            fprintf(stderr, "fe: wave %" PRId32 ": %s %s\n", w, tbon_strerror(rc),
                    tbon_net_error(net));
            status = 1;
            break;
        }
        printf("wave %" PRId32 ": sum = %" PRId32 " (expected %" PRId64 ") %s\n", w, sum,
               expected, sum == expected ? "ok" : "WRONG");
        if (sum != expected)
            status = 1;
    }

out:
    /* 5. Shut the whole tree down: every back-end sees TBON_ECLOSED. */
    tbon_net_destroy(net);
    free(ranks);
    return status;
}
