/* bench_suspect.c - failure detection that tells slowness from death
 * (docs/fault-tolerance.md), through the public API, with the default
 * settings (heartbeat 3000 ms, suspicion window 1500 ms):
 *
 *  - false suspicions: a 16x16 tree runs sum waves back to back for S
 *    seconds, first on the machine as it is (the baseline), then with K busy
 *    loops per core beside it; every TBON_EV_NODE_SUSPECT and
 *    TBON_EV_NODE_FAILED is counted (target 0 under load), and every wave
 *    is checked (exact, or short by a suspected subtree);
 *  - a stopped commnode: SIGSTOP of a commnode of 16x16 until its 16
 *    back-ends are adopted (target: at most twice the heartbeat timeout),
 *    beside kill -9 of one (the baseline), each the median of N runs.
 *
 * Usage: bench_suspect [--seconds S] [--load K] [--reps N] [--tiny]
 * The back-ends are tbon_example_be (kind "int": rank + wave, summed). Every
 * process a run starts carries BENCH_SUSPECT_SESSION=<pid> in its
 * environment; all are killed at the end, and on any failure.
 */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "lib/bench.h"
#include "lib/procscan.h"

#define PROG "bench_suspect"
#define SESSION_ENV "BENCH_SUSPECT_SESSION"

static char session_kv[64];
static char topo_path[64];
static pid_t loaders[64];
static int nloaders;

/* pids[r] for every process of the run launched as rank r < n; the count. */
static long scan(int sig, pid_t *pids, size_t n)
{
    return tb_proc_scan_env(session_kv, 0, sig, pids, n);
}

static void unload(void)
{
    for (int i = 0; i < nloaders; i++) {
        kill(loaders[i], SIGKILL);
        waitpid(loaders[i], NULL, 0);
    }
    nloaders = 0;
}

/* Every process of the run gone (the busy loops too). */
static void cleanup(void)
{
    unload();
    for (int i = 0; i < 10 && scan(SIGKILL, NULL, 0) > 0; i++)
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
}

__attribute__((noreturn)) static void die(const char *what)
{
    cleanup();
    if (topo_path[0])
        unlink(topo_path);
    bench_die(PROG, what);
}

/* k busy loops per core, each its own process. */
static void load(int k)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i < k * (cores > 0 ? cores : 1) && nloaders < 64; i++) {
        pid_t p = fork();
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (volatile unsigned long x = 0;; x++)
                ;
        }
        if (p > 0)
            loaders[nloaders++] = p;
    }
}

/* FE, 16 commnodes (1..16), 16 back-ends under each (17..272). */
static void write_topology(void)
{
    snprintf(topo_path, sizeof topo_path, "/tmp/bench_suspect.%d.top", (int)getpid());
    FILE *f = fopen(topo_path, "w");
    if (!f)
        die("writing the topology");
    fprintf(f, "localhost:0 =>");
    for (int c = 1; c <= 16; c++)
        fprintf(f, " localhost:%d", c);
    fprintf(f, ";\n");
    for (int c = 1; c <= 16; c++) {
        fprintf(f, "localhost:%d =>", c);
        for (int b = 0; b < 16; b++)
            fprintf(f, " localhost:%d", 100 + c * 16 + b);
        fprintf(f, ";\n");
    }
    fclose(f);
}

static tbon_net_t *start(tbon_stream_t **s)
{
    /* build/bench/bench_suspect -> build/bin/tbon_example_be */
    char self[4096], be[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        die("finding this program");
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = 0;
    snprintf(be, sizeof be, "%s/../bin/tbon_example_be", self);
    tbon_error_t err;
    tbon_net_t *net = tbon_fe_create(topo_path, be, NULL, NULL, &err);
    if (!net) {
        fprintf(stderr, "%s: %s\n", PROG, err.msg);
        die("starting the 16x16 tree");
    }
    *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_SUM,
                            TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    if (!*s)
        die("making the stream");
    return net;
}

/* The sum of rank + wave over the back-ends of net now. */
static int64_t expected(tbon_net_t *net, uint32_t w)
{
    tbon_rank_t be[512];
    int n = tbon_net_backends(net, be, 512);
    int64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += (int64_t)be[i] + w;
    return sum;
}

/* One wave: 1 exact, 0 short (a suspected subtree missing), -1 wrong. */
static int wave(tbon_net_t *net, tbon_stream_t *s, uint32_t w)
{
    if (tbon_stream_send(s, TBON_FIRST_APP_TAG, "%ud %s", w, "int"))
        die("sending a wave");
    tbon_packet_t *p = NULL;
    if (tbon_stream_recv(s, &p, 60000))
        die("receiving a wave");
    int64_t v = 0;
    int ok = tbon_packet_unpack(p, "%ld", &v) == 0;
    tbon_packet_unref(p);
    int64_t want = expected(net, w);
    return !ok || v > want ? -1 : v == want;
}

/* Waves back to back for secs: the suspicions and failures seen. */
static void run_waves(double secs, long *susp, long *failed, long *waves, long *shorts)
{
    tbon_stream_t *s;
    tbon_net_t *net = start(&s);
    *susp = *failed = *waves = *shorts = 0;
    double end = bench_now() + secs;
    for (uint32_t w = 1; bench_now() < end; w++) {
        int r = wave(net, s, w);
        if (r < 0)
            die("a wave's check (a sum over the back-ends)");
        (*waves)++;
        *shorts += r == 0;
        tbon_event_t ev;
        while (tbon_net_next_event(net, &ev, 0) == 0) {
            *susp += ev.type == TBON_EV_NODE_SUSPECT;
            *failed += ev.type == TBON_EV_NODE_FAILED;
        }
    }
    tbon_net_destroy(net);
    cleanup();
}

/* Stop (sig SIGSTOP) or kill commnode 1; ms until its 16 back-ends are
 * adopted. */
static double stop_to_adopted(int sig)
{
    tbon_stream_t *s;
    tbon_net_t *net = start(&s);
    if (wave(net, s, 1) != 1)
        die("the first wave");
    pid_t pids[2] = { 0, 0 };
    scan(0, pids, 2);
    if (!pids[1])
        die("finding commnode 1");
    double t0 = bench_now();
    kill(pids[1], sig);
    int adopted = 0;
    tbon_event_t ev;
    while (adopted < 16 && tbon_net_next_event(net, &ev, 60000) == 0)
        adopted += ev.type == TBON_EV_NODE_ADOPTED;
    double ms = (bench_now() - t0) * 1e3;
    if (adopted < 16)
        die("the adoption of the stopped commnode's back-ends");
    /* The waves in flight may miss the adopted subtree (a sum keeps no
     * state to recover); one soon after must be exact. */
    int exact = 0;
    for (uint32_t w = 2; w < 12 && !exact; w++) {
        int r = wave(net, s, w);
        if (r < 0)
            die("a wave's check after the adoption");
        exact = r == 1;
    }
    if (!exact)
        die("an exact wave after the adoption");
    kill(pids[1], SIGKILL);
    tbon_net_destroy(net);
    cleanup();
    return ms;
}

int main(int argc, char **argv)
{
    double secs = 300;
    int k = 4, reps = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            secs = atof(argv[++i]);
        else if (!strcmp(argv[i], "--load") && i + 1 < argc)
            k = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tiny"))
            secs = 10, reps = 1;
        else {
            fprintf(stderr, "usage: %s [--seconds S] [--load K] [--reps N] [--tiny]\n", PROG);
            return !strcmp(argv[i], "--help") ? 0 : 2;
        }
    }
    if (secs <= 0 || k < 0 || reps < 1 || reps > 15) {
        fprintf(stderr, "%s: bad --seconds, --load or --reps\n", PROG);
        return 2;
    }
    snprintf(session_kv, sizeof session_kv, SESSION_ENV "=%d", (int)getpid());
    putenv(session_kv);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    write_topology();

    long s0, f0, w0, sh0, s1, f1, w1, sh1;
    run_waves(secs, &s0, &f0, &w0, &sh0);
    load(k);
    run_waves(secs, &s1, &f1, &w1, &sh1);
    unload();
    bench_row("detection", "false suspicions, 16x16, loaded", "%.0f", (double)s1, "count",
              "%.0f s of sum waves (%ld, %ld short) beside %d busy loops per core; "
              "%ld failures; baseline unloaded: %ld suspicions, %ld failures in %ld waves",
              secs, w1, sh1, k, f1, s0, f0, w0);

    double stop[15], kill9[15];
    for (int r = 0; r < reps; r++) {
        kill9[r] = stop_to_adopted(SIGKILL);
        stop[r] = stop_to_adopted(SIGSTOP);
    }
    double ms_kill = bench_median(kill9, reps), ms_stop = bench_median(stop, reps);
    bench_row("detection", "SIGSTOP of a commnode to its 16 children adopted", "%.0f", ms_stop,
              "ms", "16x16, heartbeat 3000 ms (target <= 6000); baseline kill -9: %.0f ms; "
              "median of %d", ms_kill, reps);
    cleanup();
    unlink(topo_path);
    return 0;
}
