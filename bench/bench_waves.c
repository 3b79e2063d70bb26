/* bench_waves.c - a given number of SUM waves, one after the other, on a
 * tree of the build's tbon_commnode and tbon_example_be: what
 * bench/instr.sh runs under valgrind to count the instructions a process of
 * the tree spends per wave (the difference of two runs of different
 * lengths; the tree's start-up and teardown cancel out).
 *
 * Usage: bench_waves [--waves N] [--backend PATH] TOPOLOGY
 * Each wave: a request "%ud %s" (the wave, "int") on a stream of the
 * broadcast communicator with the SUM filter and wait-for-all, then its one
 * answer, checked: the sum over the back-ends of rank + wave (what
 * tbon_example_be answers for kind "int"). 50 waves before the N counted.
 * Prints "waves N, round trip R ms" on stdout; exit 1 with a message on
 * any error. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tbon/tbon.h>

#define PROG "bench_waves"
#define WARM 50

static void usage(FILE *f)
{
    fprintf(f, "usage: " PROG " [--waves N] [--backend PATH] TOPOLOGY\n"
               "  Runs N SUM waves (default 1000) after %d more, one after the other, on a\n"
               "  tree of TOPOLOGY with the build's tbon_example_be as back-ends (beside\n"
               "  this program: ../bin/; or PATH, which runs it), each answer checked.\n"
               "  bench/instr.sh runs it.\n",
            WARM);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    long waves = 1000;
    const char *topo = NULL, *be_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--waves") == 0 && i + 1 < argc) {
            char *end;
            waves = strtol(argv[++i], &end, 10);
            if (*end || waves < 1 || waves > 100000000) {
                fprintf(stderr, PROG ": --waves: expected 1 to 100000000, got \"%s\"\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            be_path = argv[++i];
        } else if (argv[i][0] == '-' || topo) {
            fprintf(stderr, PROG ": unexpected argument \"%s\"\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            topo = argv[i];
        }
    }
    if (!topo) {
        usage(stderr);
        return 2;
    }
    char be[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", be, sizeof be - 64);
    if (n <= 0) {
        fprintf(stderr, PROG ": cannot find this program's directory\n");
        return 1;
    }
    be[n] = '\0';
    char *slash = strrchr(be, '/');
    snprintf(slash ? slash : be, sizeof be - (size_t)(slash ? slash - be : 0),
             "/../bin/tbon_example_be");
    if (be_path)
        snprintf(be, sizeof be, "%s", be_path);
    tbon_fe_options_t o = { 0 };
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_fe_create(topo, be, NULL, &o, &err);
    if (!net) {
        fprintf(stderr, PROG ": %s: %s\n", topo, err.msg);
        return 1;
    }
    int rc = 1;
    tbon_rank_t bes[4096];
    int nb = tbon_net_backends(net, bes, sizeof bes / sizeof bes[0]);
    size_t nbe = nb > 0 ? (size_t)nb : 0;
    int64_t ranks = 0;
    for (size_t i = 0; i < nbe && i < sizeof bes / sizeof bes[0]; i++)
        ranks += bes[i];
    if (nb <= 0 || nbe > sizeof bes / sizeof bes[0]) {
        fprintf(stderr, PROG ": %s: %d back-ends (1 to 4096 here)\n", topo, nb);
        tbon_net_destroy(net);
        return 1;
    }
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_SUM,
                                          TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    double t0 = 0;
    for (long w = 0; s && w < waves + WARM; w++) {
        if (w == WARM)
            t0 = now_ms();
        int e = tbon_stream_send(s, 100, "%ud %s", (uint32_t)w, "int");
        tbon_packet_t *p = NULL;
        if (!e)
            e = tbon_stream_recv(s, &p, 30000);
        int64_t sum = 0;
        if (!e && tbon_packet_unpack(p, "%ld", &sum) != 0)
            e = TBON_EFORMAT;
        tbon_packet_unref(p);
        if (e || sum != ranks + (int64_t)nbe * w) {
            fprintf(stderr, PROG ": wave %ld: %s\n", w,
                    e ? tbon_strerror(e) : "a wrong sum");
            goto out;
        }
    }
    if (s) {
        printf("waves %ld, round trip %.3f ms\n", waves, (now_ms() - t0) / (double)waves);
        rc = 0;
    } else {
        fprintf(stderr, PROG ": cannot make the stream: %s\n", tbon_net_error(net));
    }
out:
    tbon_net_destroy(net);
    return rc;
}
