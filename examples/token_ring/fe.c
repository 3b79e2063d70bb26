/* fe.c - the token_ring front-end: launch a tree, tell every back-end the
 * ring (tbon_net_broadcast), then send tokens round it (tbon_net_send_to to
 * the first back-end; each passes it to the next with its rank added, the
 * last back to us) and check each that comes back: the sum of every
 * back-end's rank, one hop per back-end. Messages go between back-ends
 * directly: through their commnode, or their lowest common ancestor.
 *
 * usage: fe TOPOLOGY [TOKENS]
 * The back-end (be) is found next to this program.
 */
#include <tbon/tbon.h>

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TAG_RING  (TBON_FIRST_APP_TAG + 1)  /* "%aud": the ring, in order */
#define TAG_TOKEN (TBON_FIRST_APP_TAG + 2)  /* "%uld %ud": the sum so far, the hops */

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

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    char dir[PATH_MAX], be[PATH_MAX + 8];
    int tokens = 3, status = 1;
    tbon_error_t err;
    tbon_rank_t *ring = NULL;

    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: %s TOPOLOGY [TOKENS]\n"
               "Launch the tree of TOPOLOGY with ./be at its leaves, and send TOKENS\n"
               "(default 3) tokens round the ring of its back-ends, checking each.\n",
               argv[0]);
        return 0;
    }
    if (argc < 2 || argc > 3 || (argc == 3 && (tokens = atoi(argv[2])) <= 0)) {
        fprintf(stderr, "usage: %s TOPOLOGY [TOKENS]   (TOKENS >= 1, default 3)\n", argv[0]);
        return 2;
    }
    if (own_dir(dir, sizeof dir) != 0) {
        fprintf(stderr, "fe: cannot find my own directory\n");
        return 1;
    }
    snprintf(be, sizeof be, "%s/be", dir);

    tbon_net_t *net = tbon_fe_create(argv[1], be, NULL, NULL, &err);
    if (!net) {
        fprintf(stderr, "fe: %s\n", err.msg);
        return 1;
    }
    size_t n = tbon_net_num_backends(net);
    ring = calloc(n ? n : 1, sizeof *ring);
    if (!ring)
        goto out;
    n = (size_t)tbon_net_backends(net, ring, n);       /* in rank order */
    uint64_t expected = 0;
    for (size_t i = 0; i < n; i++)
        expected += ring[i];
    printf("fe: %zu back-ends in the ring\n", n);

    /* Every back-end learns the ring; a message sent after this one by the
     * same sender comes after it, so the tokens find it known. */
    if (tbon_net_broadcast(net, TAG_RING, "%aud", ring, n) != 0) {
        fprintf(stderr, "fe: %s\n", tbon_net_error(net));
        goto out;
    }
    status = 0;
    for (int k = 0; k < tokens && n; k++) {
        double t0 = now_ms();
        tbon_rank_t from = 0;
        tbon_packet_t *p = NULL;
        uint64_t sum = 0;
        uint32_t hops = 0;
        int rc = tbon_net_send_to(net, ring[0], TAG_TOKEN, "%uld %ud", (uint64_t)0, 0u);
        if (rc == 0)
            rc = tbon_net_recv_direct(net, &from, &p, 30000);  /* ms */
        if (rc == 0)
            rc = tbon_packet_unpack(p, "%uld %ud", &sum, &hops);
        tbon_packet_unref(p);
        if (rc != 0) {
            fprintf(stderr, "fe: token %d: %s\n", k, tbon_net_error(net));
            status = 1;
            break;
        }
        int ok = sum == expected && hops == n && from == ring[n - 1];
        printf("token %d: sum %" PRIu64 " over %" PRIu32 " hops from rank %u in %.2f ms %s\n",
               k, sum, hops, from, now_ms() - t0, ok ? "ok" : "WRONG");
        status |= !ok;
    }
out:
    tbon_net_destroy(net);
    free(ring);
    return status;
}
