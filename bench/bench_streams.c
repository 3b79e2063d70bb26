/* bench_streams.c - how fast a tree takes 10,000 new streams and ends them
 * (issue 19), beside the same tree carrying 10,000 small packets down one
 * stream.
 *
 * A 16x16 tree (256 back-ends: this program) is started for each round.
 * Creation: tbon_fe_stream_new 10,000 times over every back-end (sum, wait
 * for all), then one wave on the last stream, waited for: the time until the
 * last stream is known at every node and answers. The baseline, in the same
 * tree: 10,000 packets sent down one stream that the back-ends take and do
 * not answer (a stream's definition is a message sent to every node too; it
 * holds the same fixed fields and, here, the 256 members), then one wave.
 * Then a wave on each of the 10,000, all sent before any answer is taken,
 * the answers taken as they come (tbon_net_recv).
 * Ending: tbon_stream_close on all 10,000, then a wave on the first stream,
 * which follows the ends down every connection: its answer means every node
 * has ended them all. Median of ROUNDS.
 *
 *   bench_streams          the rows (BENCH_STREAMS=N: N instead of 10,000)
 *   bench_streams --be     a back-end (started by the tree)
 *
 */
#include <tbon/tbon.h>

#include <string.h>

#include "lib/bench.h"

#define PROG "bench_streams"
#define ROUNDS 3

static int NSTREAMS = 10000;     /* $BENCH_STREAMS overrides it */
#define TAG_WAVE 100         /* "%ud" -> "%ld" 1 */
#define TAG_QUIET 101        /* taken, not answered */

static int be_main(int argc, char **argv)
{
    tbon_net_t *net = bench_be_create(PROG, &argc, &argv);
    tbon_packet_t *p;
    tbon_stream_t *s;
    while (tbon_net_recv(net, &p, &s, -1) == 0) {
        if (tbon_packet_tag(p) == TAG_WAVE)
            tbon_stream_send(s, TAG_WAVE, "%ld", (int64_t)1);
        tbon_packet_unref(p);
    }
    tbon_net_destroy(net);
    return 0;
}

/* One wave on s: every back-end's 1, summed. */
static void wave(tbon_net_t *net, tbon_stream_t *s, size_t nbe)
{
    tbon_packet_t *p = NULL;
    int64_t v = 0;
    if (tbon_stream_send(s, TAG_WAVE, "%ud", 1u) || tbon_stream_recv(s, &p, 120000) ||
        tbon_packet_unpack(p, "%ld", &v) || v != (int64_t)nbe) {
        fprintf(stderr, PROG ": the wave: %s (sum %lld of %zu)\n", tbon_net_error(net),
                (long long)v, nbe);
        exit(1);
    }
    tbon_packet_unref(p);
}

static char *topology(void)
{
    size_t cap = 64 * 1024, at = 0;
    char *t = malloc(cap);
    if (!t)
        bench_die(PROG, "malloc");
    at += (size_t)snprintf(t + at, cap - at, "localhost:0 =>");
    for (int c = 1; c <= 16; c++)
        at += (size_t)snprintf(t + at, cap - at, " localhost:%d", c);
    at += (size_t)snprintf(t + at, cap - at, " ;\n");
    for (int c = 1; c <= 16; c++) {
        at += (size_t)snprintf(t + at, cap - at, "localhost:%d =>", c);
        for (int b = 0; b < 16; b++)
            at += (size_t)snprintf(t + at, cap - at, " localhost:%d", 17 + 16 * (c - 1) + b);
        at += (size_t)snprintf(t + at, cap - at, " ;\n");
    }
    return t;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        printf("usage: " PROG "\n"
               "The time a 16x16 tree takes to set up %d new streams, a wave on each,\n"
               "and to end them,\n"
               "beside the time it takes to carry as many small packets down one stream;\n"
               "Markdown rows on stdout (bench/run.sh collects them).\n", NSTREAMS);
        return 0;
    }
    if (bench_is_be(argc, argv))
        return be_main(argc, argv);
    const char *ns = getenv("BENCH_STREAMS");
    if (ns && atoi(ns) > 0)
        NSTREAMS = atoi(ns);
    char *topo = topology();
    double create[ROUNDS], carry[ROUNDS], end[ROUNDS], each[ROUNDS];
    tbon_stream_t **made = malloc((size_t)NSTREAMS * sizeof *made);
    if (!made)
        bench_die(PROG, "malloc");
    for (int r = 0; r < ROUNDS; r++) {
        tbon_net_t *net = bench_start_tree(PROG, topo, "--be");
        tbon_comm_t *all = tbon_fe_broadcast_comm(net);
        size_t nbe = (size_t)tbon_net_num_backends(net);
        tbon_stream_t *one = all ? tbon_fe_stream_new(net, all, TBON_FILTER_SUM,
                                                      TBON_SYNC_WAITFORALL, TBON_FILTER_NULL)
                                 : NULL;
        if (!one)
            bench_die(PROG, "the first stream");
        wave(net, one, nbe);
        /* the baseline first: 10,000 packets down one stream */
        double t0 = bench_now();
        for (int i = 0; i < NSTREAMS; i++)
            if (tbon_stream_send(one, TAG_QUIET, "%ud %d %d %ud %d", (uint32_t)i, 1, 0, 0u, 0))
                bench_die(PROG, "tbon_stream_send");
        wave(net, one, nbe);
        carry[r] = bench_now() - t0;
        /* then 10,000 streams */
        tbon_stream_t *s = NULL;
        t0 = bench_now();
        for (int i = 0; i < NSTREAMS; i++)
            if (!(s = made[i] = tbon_fe_stream_new(net, all, TBON_FILTER_SUM,
                                                   TBON_SYNC_WAITFORALL, TBON_FILTER_NULL)))
                bench_die(PROG, "tbon_fe_stream_new");
        wave(net, s, nbe);
        create[r] = bench_now() - t0;
        /* a wave on each, all sent before any answer is taken, the answers
         * taken as they come (tbon_net_recv: any stream) */
        t0 = bench_now();
        for (int i = 0; i < NSTREAMS; i++)
            if (tbon_stream_send(made[i], TAG_WAVE, "%ud", 1u))
                bench_die(PROG, "tbon_stream_send");
        for (int i = 0; i < NSTREAMS; i++) {
            tbon_packet_t *p = NULL;
            tbon_stream_t *from = NULL;
            int64_t v = 0;
            if (tbon_net_recv(net, &p, &from, 120000) || tbon_packet_unpack(p, "%ld", &v) ||
                v != (int64_t)nbe)
                bench_die(PROG, "a wave on each stream");
            tbon_packet_unref(p);
        }
        each[r] = bench_now() - t0;
        /* and their end */
        t0 = bench_now();
        for (int i = 0; i < NSTREAMS; i++)
            if (tbon_stream_close(made[i]))
                bench_die(PROG, "tbon_stream_close");
        wave(net, one, nbe);
        end[r] = bench_now() - t0;
        tbon_net_destroy(net);
    }
    free(topo);
    free(made);
    double cm = bench_median(create, ROUNDS), bm = bench_median(carry, ROUNDS),
           em = bench_median(end, ROUNDS);
    char what[96];
    snprintf(what, sizeof what, "%d new streams on 16x16, until the last answers", NSTREAMS);
    bench_row("streams", what, "%.0f", NSTREAMS / cm, "streams/s",
              "%.2f s; median of %d rounds, a new tree each; each stream over all 256 "
              "back-ends (sum, wait for all); the last row is its baseline", cm, ROUNDS);
    double wm = bench_median(each, ROUNDS);
    snprintf(what, sizeof what, "a wave on each of %d streams, all sent, then taken as they "
             "come", NSTREAMS);
    bench_row("streams", what, "%.0f", NSTREAMS / wm, "waves/s",
              "%.2f s; the same rounds; %zu answers in all; every stream exact", wm,
              (size_t)NSTREAMS * 256);
    snprintf(what, sizeof what, "%d streams ended (tbon_stream_close), until a wave behind "
             "them answers", NSTREAMS);
    bench_row("streams", what, "%.0f", NSTREAMS / em, "streams/s",
              "%.2f s; the same rounds; every node frees each stream's state; %.1fx the "
              "baseline below", em, em / bm);
    snprintf(what, sizeof what, "baseline: %d packets down one stream of the same tree",
             NSTREAMS);
    bench_row("streams", what, "%.0f", NSTREAMS / bm, "packets/s",
              "%.2f s; \"%%ud %%d %%d %%ud %%d\", a stream definition's fixed fields (the "
              "definition also lists its 256 members), taken by every back-end and not "
              "answered, then one wave; creation costs %.1fx this", bm, cm / bm);
    return 0;
}
