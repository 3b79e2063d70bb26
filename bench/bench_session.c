/* bench_session.c - a session that outlives its front-end (issue 33): how
 * long tbon_fe_reattach takes to become the front-end of a running tree of
 * 64 and 1,024 back-ends, beside tbon_fe_create of the same tree in the same
 * run; and tbon_fe_detach.
 *
 * Usage: bench_session [--rounds N] [SHAPE ...]   (default 5 rounds; 8x8 32x32)
 *
 * Each round: tbon_fe_create of the shape (commnodes, bin/tbon_example_be at
 * the leaves) with a sum stream and one exact wave; tbon_fe_detach; then
 * tbon_fe_reattach from the file and one exact wave on the stream it finds
 * by id (so the reattach is timed to a tree that answers); tbon_net_destroy,
 * and every process of the round waited for. A sum that is not exact ends
 * the run with no row.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "lib/bench.h"
#include "lib/watchdog.h"

#define PROG "bench_session"
#define TAG TBON_FIRST_APP_TAG

static char dir[64];

static void on_fire(const char *phase)
{
    fprintf(stderr, PROG ": %s took too long\n", phase);
    kill(0, SIGKILL);
    _exit(1);
}

/* The balanced topology of shape "AxB" under dir; its back-ends' rank sum. */
static const char *write_shape(const char *shape, uint32_t *nbe, int64_t *rank_sum)
{
    static char path[128];
    unsigned a, b;
    if (sscanf(shape, "%ux%u", &a, &b) != 2 || !a || !b || a * b > 4096)
        bench_die(PROG, "a shape (AxB)");
    snprintf(path, sizeof path, "%s/%s.top", dir, shape);
    FILE *f = fopen(path, "w");
    if (!f)
        bench_die(PROG, "the topology file");
    fprintf(f, "localhost:0 =>");
    for (unsigned i = 1; i <= a; i++)
        fprintf(f, " localhost:%u", i);
    fprintf(f, " ;\n");
    uint32_t next = a + 1;
    *rank_sum = 0;
    for (unsigned i = 1; i <= a; i++) {
        fprintf(f, "localhost:%u =>", i);
        for (unsigned k = 0; k < b; k++) {
            fprintf(f, " localhost:%u", next);
            *rank_sum += next++;
        }
        fprintf(f, " ;\n");
    }
    fclose(f);
    *nbe = a * b;
    return path;
}

/* One exact sum wave w on s. */
static void wave(tbon_stream_t *s, uint32_t w, uint32_t nbe, int64_t rank_sum)
{
    tbon_packet_t *p = NULL;
    int64_t v = 0;
    if (tbon_stream_send(s, TAG, "%ud %s", w, "int") != 0 ||
        tbon_stream_recv(s, &p, 60000) != 0 || tbon_packet_unpack(p, "%ld", &v) != 0 ||
        v != rank_sum + (int64_t)nbe * w)
        bench_die(PROG, "an exact sum wave");
    tbon_packet_unref(p);
}

static void round_of(const char *topo, const char *be, uint32_t nbe, int64_t rank_sum,
                     double *create, double *detach, double *reattach)
{
    char file[128];
    snprintf(file, sizeof file, "%s/session", dir);
    tbon_fe_options_t o = { 0 };
    o.detach_ms = 120000;
    tbon_error_t err;
    tb_wd_arm("tbon_fe_create", 120);
    double t0 = bench_now();
    tbon_net_t *net = tbon_fe_create(topo, be, NULL, &o, &err);
    if (!net) {
        fprintf(stderr, PROG ": tbon_fe_create: %s\n", err.msg);
        exit(1);
    }
    *create = bench_now() - t0;
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_SUM,
                                          TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    if (!s)
        bench_die(PROG, "the stream");
    uint32_t id = tbon_stream_id(s);
    wave(s, 1, nbe, rank_sum);
    tb_wd_arm("tbon_fe_detach", 60);
    t0 = bench_now();
    if (tbon_fe_detach(net, file) != 0)
        bench_die(PROG, "tbon_fe_detach");
    *detach = bench_now() - t0;
    tb_wd_arm("tbon_fe_reattach", 60);
    t0 = bench_now();
    net = tbon_fe_reattach(file, NULL, &err);
    if (!net) {
        fprintf(stderr, PROG ": tbon_fe_reattach: %s\n", err.msg);
        exit(1);
    }
    s = tbon_net_stream(net, id);
    if (!s)
        bench_die(PROG, "the stream after the reattach");
    wave(s, 2, nbe, rank_sum);
    *reattach = bench_now() - t0;
    tb_wd_arm("teardown", 120);
    tbon_net_destroy(net);
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
        ;   /* the commnodes are ours: every one gone before the next round */
    tb_wd_arm(NULL, 0);
}

int main(int argc, char **argv)
{
    int rounds = 5, first = 1;
    if (argc > 2 && strcmp(argv[1], "--rounds") == 0) {
        rounds = atoi(argv[2]);
        first = 3;
        if (rounds < 1 || rounds > 100)
            bench_die(PROG, "--rounds N (1 to 100)");
    }
    static const char *defaults[] = { "8x8", "32x32" };
    const char **shapes = first < argc ? (const char **)argv + first : defaults;
    int nshapes = first < argc ? argc - first : 2;
    char self[PATH_MAX], be[PATH_MAX + 32];
    ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
    if (l <= 0)
        bench_die(PROG, "readlink /proc/self/exe");
    self[l] = 0;
    *strrchr(self, '/') = 0;
    snprintf(be, sizeof be, "%s/../bin/tbon_example_be", self);
    snprintf(dir, sizeof dir, "/tmp/bench_session.XXXXXX");
    if (!mkdtemp(dir) || tb_wd_start(on_fire) != 0)
        bench_die(PROG, "set-up");
    setpgid(0, 0);
    signal(SIGPIPE, SIG_IGN);
    for (int k = 0; k < nshapes; k++) {
        uint32_t nbe;
        int64_t rank_sum;
        const char *topo = write_shape(shapes[k], &nbe, &rank_sum);
        double c[100], d[100], r[100];
        for (int i = 0; i < rounds; i++)
            round_of(topo, be, nbe, rank_sum, &c[i], &d[i], &r[i]);
        unlink(topo);
        double mc = bench_median(c, rounds) * 1e3, md = bench_median(d, rounds) * 1e3;
        double mr = bench_median(r, rounds) * 1e3;
        char metric[128];
        snprintf(metric, sizeof metric, "tbon_fe_reattach + one exact wave, %s (%u back-ends)",
                 shapes[k], nbe);
        bench_row("session", metric, "%.1f", mr, "ms",
                  "tbon_fe_create of the same tree (and its first wave's stream not "
                  "included) in the same run: %.1f ms, %.1fx the reattach; %d rounds",
                  mc, mc / mr, rounds);
        snprintf(metric, sizeof metric, "tbon_fe_detach, %s (%u back-ends)", shapes[k], nbe);
        bench_row("session", metric, "%.1f", md, "ms", "the session file written, the "
                  "children told; %d rounds", rounds);
    }
    char file[128];
    snprintf(file, sizeof file, "%s/session", dir);
    unlink(file);
    rmdir(dir);
    return 0;
}
