/* bench_fd.c - what waiting on tbon_net_fd costs a front-end, beside
 * waiting in tbon_net_recv, on the same tree in the same run.
 *
 * An 8x8 and a 16x16 tree (the back-ends: this program with --be, which
 * answer a SUM request with rank + wave). On each, rounds alternate the two
 * ways of waiting for a result, the order swapped every round:
 *   recv  tbon_stream_recv with a time limit (the thread sleeps in the
 *         library);
 *   fd    poll on tbon_net_fd, then tbon_net_recv with timeout 0 (the thread
 *         sleeps in the application's own loop, as under epoll or asyncio).
 * Each round measures the wave round trip (median of RTT_WAVES waves one
 * after the other) and pipelined waves/s (PIPE waves sent, then taken in
 * order). Every sum is checked exactly. Medians of the rounds.
 *
 *   bench_fd [8x8|16x16 ...]   the rows (default: both)
 *   bench_fd --recv-only SHAPE the tbon_stream_recv figures alone, as one line
 *                              "rtt_ms R waves_per_s W" (bench/bench_python.py's
 *                              baseline)
 *   bench_fd --be              a back-end (started by the tree) */
#include <tbon/tbon.h>

#include <errno.h>
#include <poll.h>
#include <string.h>

#include "lib/bench.h"

#define PROG "bench_fd"
#define TAG 100
#define ROUNDS 7
#define RTT_WAVES 200
#define PIPE 1000
#define WARM 50
#define RECV_MS 60000

static int recv_only;       /* --recv-only: tbon_stream_recv alone, one line */

static int be_main(int argc, char **argv)
{
    tbon_net_t *net = bench_be_create(PROG, &argc, &argv);
    int64_t rank = tbon_net_rank(net);
    tbon_packet_t *p;
    tbon_stream_t *s;
    while (tbon_net_recv(net, &p, &s, -1) == 0) {
        uint32_t w = 0;
        if (tbon_packet_tag(p) == TAG && tbon_packet_unpack(p, "%ud", &w) == 0)
            tbon_stream_send(s, TAG, "%ld", rank + (int64_t)w);
        tbon_packet_unref(p);
    }
    tbon_net_destroy(net);
    return 0;
}

static char *topology(int a, int b)
{
    size_t cap = 64 * 1024, at = 0;
    char *t = malloc(cap);
    if (!t)
        bench_die(PROG, "malloc");
    at += (size_t)snprintf(t + at, cap - at, "localhost:0 =>");
    for (int c = 1; c <= a; c++)
        at += (size_t)snprintf(t + at, cap - at, " localhost:%d", c);
    at += (size_t)snprintf(t + at, cap - at, " ;\n");
    for (int c = 1; c <= a; c++) {
        at += (size_t)snprintf(t + at, cap - at, "localhost:%d =>", c);
        for (int k = 0; k < b; k++)
            at += (size_t)snprintf(t + at, cap - at, " localhost:%d", a + 1 + b * (c - 1) + k);
        at += (size_t)snprintf(t + at, cap - at, " ;\n");
    }
    return t;
}

struct tree {
    tbon_net_t *net;
    tbon_stream_t *s;
    int fd;
    int64_t rank_sum;       /* of the back-ends */
    int64_t n;
    uint32_t w;             /* the next wave */
};

/* The next result, waited for one way or the other, checked against
 * wave w's sum. */
static void take(struct tree *t, int use_fd, uint32_t w)
{
    tbon_packet_t *p = NULL;
    int rc;
    if (use_fd) {
        for (;;) {
            struct pollfd pf = { .fd = t->fd, .events = POLLIN };
            if (poll(&pf, 1, RECV_MS) != 1 && errno != EINTR)
                bench_die(PROG, "poll on tbon_net_fd: no result");
            tbon_stream_t *from;
            rc = tbon_net_recv(t->net, &p, &from, 0);
            if (rc != TBON_ETIMEOUT)
                break;
            tbon_event_t ev;        /* readable for an event: take it */
            while (tbon_net_next_event(t->net, &ev, 0) == 0)
                ;
        }
    } else {
        rc = tbon_stream_recv(t->s, &p, RECV_MS);
    }
    int64_t v = 0;
    if (rc != 0 || tbon_packet_unpack(p, "%ld", &v) != 0 || v != t->rank_sum + t->n * w) {
        fprintf(stderr, PROG ": wave %u: %s (sum %lld)\n", w, tbon_net_error(t->net),
                (long long)v);
        exit(1);
    }
    tbon_packet_unref(p);
}

static void send_wave(struct tree *t, uint32_t w)
{
    if (tbon_stream_send(t->s, TAG, "%ud", w) != 0) {
        fprintf(stderr, PROG ": send: %s\n", tbon_net_error(t->net));
        exit(1);
    }
}

static double round_trip(struct tree *t, int use_fd)
{
    double v[RTT_WAVES];
    for (int i = 0; i < RTT_WAVES; i++) {
        double t0 = bench_now();
        send_wave(t, t->w);
        take(t, use_fd, t->w++);
        v[i] = bench_now() - t0;
    }
    return bench_median(v, RTT_WAVES);
}

static double pipelined(struct tree *t, int use_fd)
{
    double t0 = bench_now();
    for (int i = 0; i < PIPE; i++)
        send_wave(t, t->w + (uint32_t)i);
    for (int i = 0; i < PIPE; i++)
        take(t, use_fd, t->w++);
    return PIPE / (bench_now() - t0);
}

static void run(int a, int b)
{
    char *text = topology(a, b);
    struct tree t = { .net = bench_start_tree(PROG, text, "--be") };
    free(text);
    t.n = (int64_t)a * b;
    for (int64_t k = 0; k < t.n; k++)
        t.rank_sum += a + 1 + k;
    tbon_comm_t *all = tbon_fe_broadcast_comm(t.net);
    t.s = all ? tbon_fe_stream_new(t.net, all, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL,
                                   TBON_FILTER_NULL) : NULL;
    t.fd = tbon_net_fd(t.net);
    if (!t.s || t.fd < 0)
        bench_die(PROG, "the stream or the descriptor");
    for (int i = 0; i < WARM; i++) {
        send_wave(&t, t.w);
        take(&t, i & 1, t.w++);
    }
    double rtt[2][ROUNDS], rate[2][ROUNDS];
    if (recv_only) {                /* the C baseline of bench/bench_python.py */
        for (int r = 0; r < ROUNDS; r++) {
            rtt[0][r] = round_trip(&t, 0);
            rate[0][r] = pipelined(&t, 0);
        }
        tbon_net_destroy(t.net);
        printf("rtt_ms %.4f waves_per_s %.1f\n", bench_median(rtt[0], ROUNDS) * 1e3,
               bench_median(rate[0], ROUNDS));
        return;
    }
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < 2; k++) {
            int use_fd = (r + k) & 1;
            rtt[use_fd][r] = round_trip(&t, use_fd);
            rate[use_fd][r] = pipelined(&t, use_fd);
        }
    tbon_net_destroy(t.net);
    char shape[32];
    snprintf(shape, sizeof shape, "%dx%d", a, b);
    double r0 = bench_median(rtt[0], ROUNDS), r1 = bench_median(rtt[1], ROUNDS);
    double p0 = bench_median(rate[0], ROUNDS), p1 = bench_median(rate[1], ROUNDS);
    bench_row("event loop", "wave round trip, poll on tbon_net_fd", "%.3f", r1 * 1e3, "ms",
              "%s; baseline tbon_stream_recv %.3f ms in the same run: ratio %.3f (target "
              "at most 1.05); medians of %d rounds of %d waves, alternating", shape,
              r0 * 1e3, r1 / r0, ROUNDS, RTT_WAVES);
    bench_row("event loop", "pipelined waves, poll on tbon_net_fd", "%.0f", p1, "waves/s",
              "%s; baseline tbon_stream_recv %.0f waves/s in the same run: ratio %.3f "
              "(target at least 0.95); %d waves a round, %d rounds", shape, p0, p1 / p0, PIPE,
              ROUNDS);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: " PROG " [--recv-only] [8x8|16x16 ...]\n"
               "A front-end waiting on tbon_net_fd (poll, then tbon_net_recv with timeout 0)\n"
               "beside one waiting in tbon_stream_recv, on the same tree, rounds alternating:\n"
               "the wave round trip and pipelined waves/s, each sum checked. Markdown rows on\n"
               "stdout (bench/run.sh collects them).\n");
        return 0;
    }
    if (bench_is_be(argc, argv))
        return be_main(argc, argv);
    int any = 0;
    for (int i = 1; i < argc; i++) {
        int a, b;
        if (strcmp(argv[i], "--recv-only") == 0) {
            recv_only = 1;
            continue;
        }
        if (sscanf(argv[i], "%dx%d", &a, &b) != 2 || a < 1 || b < 1 || a > 64 || b > 64) {
            fprintf(stderr, PROG ": expected a shape AxB (at most 64x64), got \"%s\"\n",
                    argv[i]);
            return 2;
        }
        run(a, b);
        any = 1;
    }
    if (!any) {
        run(8, 8);
        run(16, 16);
    }
    return 0;
}
