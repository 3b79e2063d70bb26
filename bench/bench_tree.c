/* bench_tree.c - the running tree of issue 3 through the public API: start-up,
 * the CPU the started tree takes while idle, one broadcast + sum wave,
 * pipelined waves and teardown, for trees of 16 to 1024 back-ends on this
 * machine, each beside the flat TCP baseline.
 *
 * Usage: bench_tree [--flat ROWS_FILE] [--self-be] [--exact-off] [SHAPE ...]
 *        (default: every shape; --exact-off: tbon_fe_options_t.exact_off, the
 *        sum stream not exact, for bench/exact_cost.sh)
 *        bench_tree --be ...       (a back-end; started by the tree with --self-be)
 * ROWS_FILE holds bench_flat's rows of the same run (bench/run.sh writes it):
 * each tree row's notes name the flat figure, and the flat rows are printed
 * next to the tree rows of the same N, so that RESULTS.md shows them side by
 * side. Every sum is checked exactly, in wave order.
 *
 * The back-ends are the build's bin/tbon_example_be (request "%ud %s" = wave,
 * "int"; answer "%ld" rank + wave), or with --self-be this program with --be,
 * which answers the same way. tbon_example_be is the default because it is a
 * lean back-end: this program is also a front-end, so it links libxml2 (and
 * through it ICU and libstdc++), whose loading costs about 2 ms per exec here;
 * 1024 back-ends would measure that, not the tree.
 *
 * The processes of a run carry BENCH_TREE_SESSION=<FE pid> in their
 * environment: on any failure (or the watchdog) they are found in /proc and
 * killed, and after every tbon_net_destroy none may be left.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "lib/bench.h"
#include "lib/procscan.h"
#include "lib/watchdog.h"
#include "topo/topology.h"

#define PROG "bench_tree"
#define TAG TBON_FIRST_APP_TAG
#define RTT_WAVES 300
#define WARMUP_WAVES 20
#define PIPE_RUNS 3
#define RECV_TIMEOUT_MS 60000
#define SESSION_ENV "BENCH_TREE_SESSION"
#define MAX_STARTS 7

/* ---------------------------------------------------------------- back-end */

/* Join the tree; answer every request "%ud %s" (w, kind) on its stream with
 * the int64 rank + w (same tag), as tbon_example_be does for kind "int",
 * until the FE shuts the network down. */
static int be_main(int argc, char **argv)
{
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_be_create(&argc, &argv, &err);
    if (!net) {
        fprintf(stderr, PROG " --be: tbon_be_create: %s\n", err.msg);
        return 1;
    }
    int64_t rank = (int64_t)tbon_net_rank(net);
    int rc;
    for (;;) {
        tbon_packet_t *p = NULL;
        tbon_stream_t *s = NULL;
        rc = tbon_net_recv(net, &p, &s, -1);
        if (rc != 0)
            break;
        uint32_t w;
        char *kind = NULL;
        if (tbon_packet_unpack(p, "%ud %s", &w, &kind) != 0) {
            fprintf(stderr, PROG " --be: rank %lld: request of format \"%s\"\n",
                    (long long)rank, tbon_packet_format(p));
            tbon_packet_unref(p);
            rc = TBON_EFORMAT;
            break;
        }
        free(kind);
        rc = tbon_stream_send(s, tbon_packet_tag(p), "%ld", rank + (int64_t)w);
        tbon_packet_unref(p);
        if (rc != 0)
            break;
    }
    if (rc != TBON_ECLOSED)
        fprintf(stderr, PROG " --be: rank %lld: %s (%s)\n", (long long)rank,
                tbon_strerror(rc), tbon_net_error(net));
    tbon_net_destroy(net);
    return rc == TBON_ECLOSED ? 0 : 1;
}

/* ------------------------------------------------ finding the run's processes */

static char session_kv[64];     /* "BENCH_TREE_SESSION=<pid>" */
static char self_exe[4096];
static char be_exe[4096];       /* the back-end program */
static const char *be_name;     /* its name, for the notes */
static char tmpdir[64];         /* the generated topologies; "" when none */
static int exact_off;           /* --exact-off: tbon_fe_options_t.exact_off */
static const char *const shape_names[] = { "4x4", "4x4x4", "8x8", "16x16", "32x32" };

/* Remove the generated topology files and their directory. */
static void remove_tmpdir(void)
{
    if (!tmpdir[0])
        return;
    for (size_t k = 0; k < sizeof shape_names / sizeof shape_names[0]; k++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s.top", tmpdir, shape_names[k]);
        unlink(p);
    }
    rmdir(tmpdir);
    tmpdir[0] = '\0';
}

/* The processes (other than this one) whose environment holds session_kv:
 * counted, and sent sig unless sig is 0. */
static int scan_session(int sig)
{
    enum { ENV_MAX = 1 << 18 };
    DIR *d = opendir("/proc");
    char *buf = malloc(ENV_MAX);    /* not static: the watchdog may scan too */
    if (!d || !buf) {
        if (d)
            closedir(d);
        free(buf);
        return 0;
    }
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid() ||
            !tb_proc_env_has(pid, session_kv, 0, buf, ENV_MAX))
            continue;
        found++;
        if (sig)
            kill((pid_t)pid, sig);
    }
    closedir(d);
    free(buf);
    return found;
}

/* SIGKILL every process of the run, rescanning until none is found (a
 * commnode may have been spawning while we scanned). */
static void kill_session(void)
{
    for (int i = 0; i < 10 && scan_session(SIGKILL) > 0; i++)
        ;
}

/* A measurement failed: say what, remove the whole tree, exit 1. */
__attribute__((noreturn)) static void tree_die(const char *what, int rc)
{
    fprintf(stderr, "%s: %s failed (%s)\n", PROG, what, rc ? tbon_strerror(rc) : "check");
    kill_session();
    remove_tmpdir();
    exit(1);
}

/* ---------------------------------------------------------------- watchdog */

/* The watchdog (tests/lib/watchdog.h) fired: a hang must not stall `make bench`. */
static void wd_fire(const char *phase)
{
    fprintf(stderr, "%s: watchdog: %s took too long; killing the tree\n", PROG, phase);
    kill_session();
    _exit(1);
}

/* ---------------------------------------------------------------- front-end */

struct shape {
    const char *name;
    uint32_t fan[3];
    size_t levels;
    int run;                    /* selected on the command line */
    /* results */
    size_t n;                   /* back-ends */
    size_t nodes;               /* processes: FE, commnodes, BEs */
    int starts, k;
    double st, rtt, rate, td, idle;
};

static struct shape shapes[] = {
    { .name = "4x4", .fan = { 4, 4 }, .levels = 2 },
    { .name = "4x4x4", .fan = { 4, 4, 4 }, .levels = 3 },
    { .name = "8x8", .fan = { 8, 8 }, .levels = 2 },
    { .name = "16x16", .fan = { 16, 16 }, .levels = 2 },
    { .name = "32x32", .fan = { 32, 32 }, .levels = 2 },
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])


static void set_nofile_max(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The back-end program: $(B)/bin/tbon_example_be beside this $(B)/bench/
 * program, unless self_be or it is missing; then this program. */
static void choose_be(int self_be)
{
    char *slash = strrchr(self_exe, '/');
    snprintf(be_exe, sizeof be_exe, "%.*s/../bin/tbon_example_be",
             slash ? (int)(slash - self_exe) : 1, slash ? self_exe : ".");
    if (self_be || access(be_exe, X_OK) != 0) {
        if (!self_be)
            fprintf(stderr, "%s: %s missing; this program is the back-end\n", PROG, be_exe);
        snprintf(be_exe, sizeof be_exe, "%s", self_exe);
        be_name = "bench_tree --be";
    } else {
        be_name = "tbon_example_be";
    }
}

/* After tbon_net_destroy nothing of the run may be left; allow the kernel a
 * moment (bounded) to finish exits the library has already reaped. */
static void check_no_leftovers(void)
{
    for (int i = 0; i < 100; i++) {
        if (scan_session(0) == 0)
            return;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "%s: %d processes left after tbon_net_destroy\n", PROG, scan_session(0));
    tree_die("teardown (leftover processes)", 0);
}

/* Write the topology of sh into tmpdir; returns its path (static). */
static const char *write_topology(struct shape *sh, tbon_rank_t **leaves)
{
    static char path[128];
    tbon_error_t err = { 0 };
    const char *hosts[] = { "localhost" };
    tb_topology_t *t = tb_topology_gen_shape(sh->fan, sh->levels, hosts, 1, &err);
    snprintf(path, sizeof path, "%s/%s.top", tmpdir, sh->name);
    if (!t || tb_topology_write_file(t, path, false, "bench_tree", &err) != 0) {
        fprintf(stderr, "%s: %s: %s\n", PROG, sh->name, err.msg);
        bench_die(PROG, "topology generation");
    }
    sh->n = tb_topology_num_leaves(t);
    sh->nodes = tb_topology_size(t);
    *leaves = malloc(sh->n * sizeof **leaves);
    if (!*leaves || tb_topology_leaves(t, *leaves, sh->n) != sh->n)
        bench_die(PROG, "topology leaves");
    tb_topology_destroy(t);
    return path;
}

static tbon_net_t *start(const char *topo, size_t n, double *secs)
{
    const char *const self_argv[] = { "--be", NULL };
    const char *const *be_argv = strcmp(be_exe, self_exe) == 0 ? self_argv : NULL;
    tbon_fe_options_t o = { 0 };
    o.exact_off = exact_off;
    o.startup_timeout_ms = n >= 1024 ? 120000 : 30000;
    tbon_error_t err = { 0 };
    tb_wd_arm("tbon_fe_create", n >= 1024 ? 180 : 60);
    double t0 = bench_now();
    tbon_net_t *net = tbon_fe_create(topo, be_exe, be_argv, &o, &err);
    *secs = bench_now() - t0;
    if (!net) {
        fprintf(stderr, "%s: tbon_fe_create: %s\n", PROG, err.msg);
        tree_die("tbon_fe_create", err.code);
    }
    return net;
}

static double stop(tbon_net_t *net)
{
    tb_wd_arm("tbon_net_destroy", 60);
    double t0 = bench_now();
    tbon_net_destroy(net);
    double t = bench_now() - t0;
    check_no_leftovers();
    tb_wd_arm("", 0);
    return t;
}

/* Receive one result and check it is the sum of wave w. */
static void recv_sum(tbon_stream_t *s, int64_t expect)
{
    tbon_packet_t *p = NULL;
    int rc = tbon_stream_recv(s, &p, RECV_TIMEOUT_MS);
    if (rc != 0)
        tree_die("tbon_stream_recv", rc);
    int64_t v = 0;
    rc = tbon_packet_unpack(p, "%ld", &v);
    if (rc != 0 || v != expect) {
        fprintf(stderr, "%s: result \"%s\" = %lld, expected %lld\n", PROG,
                tbon_packet_format(p), (long long)v, (long long)expect);
        tbon_packet_unref(p);
        tree_die("sum check", rc);
    }
    tbon_packet_unref(p);
}

/* The machine's busy time (user, nice, system, irq, softirq) in clock ticks,
 * from /proc/stat's first line; -1 if unreadable. */
static long long busy_ticks(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long u, ni, sy, id, io, irq, sirq;
    int ok = f && fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &u, &ni, &sy, &id, &io,
                         &irq, &sirq) == 7;
    if (f)
        fclose(f);
    return ok ? (long long)(u + ni + sy + irq + sirq) : -1;
}

/* What the whole machine spends while the tree just started sits idle
 * (heartbeats, timers, memory looks): the busy time over IDLE_S seconds,
 * after a second to settle, as a percentage of one core; -1 if /proc/stat
 * cannot be read. Nothing else should run (bench/run.sh and compare.sh wait
 * for a quiet machine before each program). */
#define IDLE_S 3
static double idle_cpu(void)
{
    sleep(1);
    long long b0 = busy_ticks();
    double t0 = bench_now();
    sleep(IDLE_S);
    long long b1 = busy_ticks();
    double dt = bench_now() - t0;
    long hz = sysconf(_SC_CLK_TCK);
    if (b0 < 0 || b1 < 0 || hz <= 0)
        return -1;
    return (double)(b1 - b0) / (double)hz / dt * 100.0;
}

static void run_shape(struct shape *sh)
{
    tbon_rank_t *leaves;
    const char *topo = write_topology(sh, &leaves);
    size_t n = sh->n;
    sh->starts = n >= 1024 ? 3 : n >= 256 ? 5 : MAX_STARTS;
    sh->k = n >= 1024 ? 200 : n >= 256 ? 500 : 2000;
    double st[MAX_STARTS], td[MAX_STARTS], rtt[RTT_WAVES], rate[PIPE_RUNS];
    tbon_net_t *net = NULL;
    for (int r = 0; r < sh->starts; r++) {
        net = start(topo, n, &st[r]);
        if (r < sh->starts - 1)
            td[r] = stop(net);
    }

    /* The BE ranks the FE sees must be the topology's leaves. */
    tbon_rank_t *got = calloc(n + 1, sizeof *got);
    if (!got)
        bench_die(PROG, "calloc");
    int c = tbon_net_backends(net, got, n + 1);
    if (c != (int)n || tbon_net_num_backends(net) != n)
        tree_die("tbon_net_backends (count)", c < 0 ? c : 0);
    int64_t rank_sum = 0, leaf_sum = 0;
    for (size_t i = 0; i < n; i++) {
        rank_sum += got[i];
        leaf_sum += leaves[i];
    }
    if (rank_sum != leaf_sum)
        tree_die("tbon_net_backends (ranks)", 0);
    free(got);
    free(leaves);

    sh->idle = idle_cpu();

    tb_wd_arm("waves", n >= 1024 ? 120 : 60);
    tbon_comm_t *comm = tbon_fe_broadcast_comm(net);
    tbon_stream_t *s = comm ? tbon_fe_stream_new(net, comm, TBON_FILTER_SUM,
                                                 TBON_SYNC_WAITFORALL, TBON_FILTER_NULL) : NULL;
    if (!s) {
        fprintf(stderr, "%s: stream: %s\n", PROG, tbon_net_error(net));
        tree_die("tbon_fe_stream_new", 0);
    }
    uint32_t w = 0;
    int rc;
    for (int i = 0; i < WARMUP_WAVES; i++, w++) {
        if ((rc = tbon_stream_send(s, TAG, "%ud %s", w, "int")) != 0)
            tree_die("tbon_stream_send", rc);
        recv_sum(s, rank_sum + (int64_t)n * w);
    }
    for (int i = 0; i < RTT_WAVES; i++, w++) {
        double t0 = bench_now();
        if ((rc = tbon_stream_send(s, TAG, "%ud %s", w, "int")) != 0)
            tree_die("tbon_stream_send", rc);
        recv_sum(s, rank_sum + (int64_t)n * w);
        rtt[i] = bench_now() - t0;
    }
    for (int r = 0; r < PIPE_RUNS; r++) {
        double t0 = bench_now();
        for (int i = 0; i < sh->k; i++)
            if ((rc = tbon_stream_send(s, TAG, "%ud %s", w + (uint32_t)i, "int")) != 0)
                tree_die("tbon_stream_send (pipelined)", rc);
        for (int i = 0; i < sh->k; i++, w++)
            recv_sum(s, rank_sum + (int64_t)n * w);   /* in wave order */
        rate[r] = sh->k / (bench_now() - t0);
    }
    td[sh->starts - 1] = stop(net);

    sh->st = bench_median(st, sh->starts);
    sh->td = bench_median(td, sh->starts);
    sh->rtt = bench_median(rtt, RTT_WAVES);
    sh->rate = bench_median(rate, PIPE_RUNS);
    fprintf(stderr, "%s: %s done: start-up %.2f ms, RTT %.3f ms, %.0f waves/s\n", PROG,
            sh->name, sh->st * 1e3, sh->rtt * 1e3, sh->rate);
}

/* ---------------------------------------------------------------- output */

enum { M_START, M_RTT, M_RATE, M_TEARDOWN, M_IDLE, M_COUNT };
static const char *const metric_name[M_COUNT] = {
    "start-up to ready", "wave round trip", "pipelined waves", "teardown", "CPU while idle",
};

/* bench_flat's rows of this run: for each N and metric, the value and the line. */
struct flat_row { int n, m, bare; double v; char line[512]; };
static struct flat_row flat[64];
static int nflat;

static void read_flat(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot read %s; no flat baseline\n", PROG, path);
        return;
    }
    char line[512];
    while (nflat < 64 && fgets(line, sizeof line, f)) {
        int n, a, b, bare = 0;
        char metric[64];
        double v;
        if (sscanf(line, "| bare tree %dx%d, %d BEs | %63[^|]| %lf |", &a, &b, &n, metric, &v) == 5)
            bare = 1;       /* the floor: relays over TCP without tbon */
        else if (sscanf(line, "| flat, %d BEs | %63[^|]| %lf |", &n, metric, &v) != 3)
            continue;
        size_t ml = strlen(metric);
        while (ml > 0 && metric[ml - 1] == ' ')
            metric[--ml] = '\0';
        for (int m = 0; m < M_COUNT; m++) {
            if (strcmp(metric, metric_name[m]) == 0) {
                struct flat_row *fr = &flat[nflat++];
                fr->n = n;
                fr->m = m;
                fr->bare = bare;
                fr->v = v;
                snprintf(fr->line, sizeof fr->line, "%s", line);
            }
        }
    }
    fclose(f);
}

static const struct flat_row *flat_of(size_t n, int m, int bare)
{
    for (int i = 0; i < nflat; i++)
        if (flat[i].n == (int)n && flat[i].m == m && flat[i].bare == bare)
            return &flat[i];
    return NULL;
}

/* "met" or "MISSED" for a target; less is better unless more. */
static const char *verdict(double v, double target, int more)
{
    return (more ? v >= target : v <= target) ? "met" : "MISSED";
}

/* The notes of one tree row: what was measured, the flat baseline, the
 * target and the MRNet reference where the issue gives them. */
static void print_tree_row(const struct shape *sh, int m)
{
    char area[48], base[160] = "", goal[200] = "";
    snprintf(area, sizeof area, "tree %s, %zu BEs", sh->name, sh->n);
    const struct flat_row *fr = flat_of(sh->n, m, 0), *bare = flat_of(sh->n, m, 1);
    double v = 0;
    const char *unit = "ms", *fmt = "%.3f";
    char desc[160];
    switch (m) {
    case M_START:
        v = sh->st * 1e3;
        fmt = "%.2f";
        snprintf(desc, sizeof desc, "tbon_fe_create, %zu processes, BE %s; median of %d",
                 sh->nodes, be_name, sh->starts);
        break;
    case M_RTT:
        v = sh->rtt * 1e3;
        snprintf(desc, sizeof desc, "send \"%%ud %%s\" + recv SUM/WAITFORALL, checked; median of %d waves",
                 RTT_WAVES);
        break;
    case M_RATE:
        v = sh->rate;
        fmt = "%.0f";
        unit = "waves/s";
        snprintf(desc, sizeof desc, "%d sends back-to-back, then %d checked sums; median of %d bursts",
                 sh->k, sh->k, PIPE_RUNS);
        break;
    case M_IDLE:
        v = sh->idle;
        fmt = "%.1f";
        unit = "% of a core";
        snprintf(desc, sizeof desc, "the machine's busy time over %d s while the started tree "
                 "sits idle (heartbeats, timers), in %% of one core", IDLE_S);
        break;
    default:
        v = sh->td * 1e3;
        fmt = "%.2f";
        snprintf(desc, sizeof desc, "tbon_net_destroy until every process is reaped; median of %d",
                 sh->starts);
        break;
    }
    if (fr)
        snprintf(base, sizeof base, "; flat: %.4g %s (tree/flat %.2f)", fr->v, unit, v / fr->v);
    int is16 = sh->n == 16, is64 = sh->n == 64, is1024 = sh->n == 1024;
    if (m == M_START && is16)
        snprintf(goal, sizeof goal, "; target <= 15 ms: %s; MRNet 5.0.1: 32-41 ms",
                 verdict(v, 15, 0));
    else if (m == M_RTT && is16)
        snprintf(goal, sizeof goal, "; target <= 0.3 ms: %s; MRNet 5.0.1: 0.78-0.92 ms",
                 verdict(v, 0.3, 0));
    else if (m == M_RATE && is16)
        snprintf(goal, sizeof goal, "; target >= 10,000/s: %s; MRNet 5.0.1: ~2,600/s",
                 verdict(v, 10000, 1));
    else if (m == M_START && is64)
        snprintf(goal, sizeof goal, "; MRNet 5.0.1 (64 BEs): 380 ms");
    else if (m == M_RTT && is64)
        snprintf(goal, sizeof goal, "; target <= 2 ms: %s; MRNet 5.0.1 (64 BEs): 10.8 ms",
                 verdict(v, 2, 0));
    else if (m == M_START && is1024)
        snprintf(goal, sizeof goal, "; target <= 1000 ms: %s", verdict(v, 1000, 0));
    else if (m == M_RTT && is1024)
        snprintf(goal, sizeof goal, "; target <= half of flat: %s", fr ? verdict(v, fr->v / 2, 0)
                 : "no flat baseline");
    if (m == M_RTT && bare && fr)
        snprintf(goal + strlen(goal), sizeof goal - strlen(goal),
                 "; bare tree (no tbon): %.4g ms, %.2f of flat", bare->v, bare->v / fr->v);
    bench_row(area, metric_name[m], fmt, v, unit, "%s%s%s", desc, base, goal);
}

/* For each N: per metric, the rows of every tree shape with N back-ends, then
 * the flat row of N (as bench_flat printed it). */
static void print_results(void)
{
    size_t ns[NSHAPES];
    int nn = 0;
    for (size_t i = 0; i < NSHAPES; i++) {
        if (!shapes[i].run)
            continue;
        int seen = 0;
        for (int j = 0; j < nn; j++)
            seen |= ns[j] == shapes[i].n;
        if (!seen)
            ns[nn++] = shapes[i].n;
    }
    for (int j = 0; j < nn; j++)
        for (int m = 0; m < M_COUNT; m++) {
            for (size_t i = 0; i < NSHAPES; i++)
                if (shapes[i].run && shapes[i].n == ns[j])
                    print_tree_row(&shapes[i], m);
            for (int bare = 0; bare <= 1; bare++) {
                const struct flat_row *fr = flat_of(ns[j], m, bare);
                if (fr)
                    fputs(fr->line, stdout);
            }
        }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--be") == 0)
            return be_main(argc, argv);

    set_nofile_max();
    ssize_t l = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (l <= 0)
        bench_die(PROG, "readlink /proc/self/exe");
    self_exe[l] = '\0';
    signal(SIGPIPE, SIG_IGN);
    snprintf(session_kv, sizeof session_kv, SESSION_ENV "=%ld", (long)getpid());
    if (setenv(SESSION_ENV, session_kv + strlen(SESSION_ENV "="), 1) != 0)
        bench_die(PROG, "setenv");

    int any = 0, self_be = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--flat") == 0 && i + 1 < argc) {
            read_flat(argv[++i]);
            continue;
        }
        if (strcmp(argv[i], "--self-be") == 0) {
            self_be = 1;
            continue;
        }
        if (strcmp(argv[i], "--exact-off") == 0) {
            exact_off = 1;
            continue;
        }
        size_t k = 0;
        while (k < NSHAPES && strcmp(shapes[k].name, argv[i]) != 0)
            k++;
        if (k == NSHAPES) {
            fprintf(stderr, "usage: %s [--flat ROWS_FILE] [--self-be] [--exact-off] "
                    "[4x4|4x4x4|8x8|16x16|32x32 ...]\n", PROG);
            return 2;
        }
        shapes[k].run = any = 1;
    }
    for (size_t k = 0; k < NSHAPES; k++)
        shapes[k].run |= !any;
    choose_be(self_be);

    snprintf(tmpdir, sizeof tmpdir, "/tmp/bench_tree.XXXXXX");
    if (!mkdtemp(tmpdir))
        bench_die(PROG, "mkdtemp");
    if (tb_wd_start(wd_fire) != 0)
        bench_die(PROG, "pthread_create (watchdog)");
    for (size_t k = 0; k < NSHAPES; k++)
        if (shapes[k].run)
            run_shape(&shapes[k]);
    remove_tmpdir();
    print_results();
    return 0;
}
