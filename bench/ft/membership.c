/* membership.c - (d) membership, bench_ft --membership: on trees of 64,
 * 256 and 1,024 nodes, kill -9 of back-ends and commnodes to the FE's
 * NODE_FAILED and VIEW_STABLE events, the idle traffic per node with and
 * without heartbeats; then joins, a commnode's join and a restart. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "ft.h"
#include "lib/bench.h"
#include "lib/watchdog.h"

/* Trees of 64, 256 and 1,024 nodes, three levels (FE, two commnode levels,
 * back-ends), so that a back-end's failure is two hops from the FE through
 * the tree and one through its parent's failure notice. */
#define MB_KILLS 7              /* victims of each kind per tree */
#define MB_IDLE_S 5.0           /* idle measurement */
static const uint32_t mb_fan[][3] = { { 3, 4, 4 }, { 5, 5, 9 }, { 11, 4, 22 } };
#define MB_SHAPES (sizeof mb_fan / sizeof mb_fan[0])

struct mb_result {
    size_t nodes;
    double be_failed, be_stable, cn_failed, cn_stable;  /* medians, ms */
    double wave;                /* a sum wave's round trip on the same tree, ms */
    double idle, idle_nohb;     /* loopback bytes/s per node (idle_nohb: 1,024 only) */
};
static struct mb_result mb_res[MB_SHAPES];

/* Bytes received on the loopback interface so far (/proc/net/dev): every
 * byte between processes of this machine, headers included. */
static double lo_bytes(void)
{
    FILE *f = fopen("/proc/net/dev", "r");
    char line[512];
    double v = -1;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long rx;
        if (sscanf(line, " lo: %llu", &rx) == 1)
            v = (double)rx;
    }
    if (f)
        fclose(f);
    if (v < 0)
        ft_die("no loopback counters in /proc/net/dev");
    return v;
}

/* Loopback bytes per second and node while net sits idle. */
static double mb_idle(size_t size)
{
    struct timespec ts = { 1, 0 };
    nanosleep(&ts, NULL);           /* the start-up's last frames are gone */
    double b0 = lo_bytes(), t0 = bench_now();
    ts = (struct timespec){ (time_t)MB_IDLE_S, 0 };
    nanosleep(&ts, NULL);
    return (lo_bytes() - b0) / (bench_now() - t0) / (double)size;
}

/* A sum wave over the live back-ends, checked: each answers (w, 1).
 * Returns its round trip (ms). */
static double mb_wave(tbon_stream_t *s, uint32_t w, size_t live)
{
    double t0 = bench_now();
    request(s, OP_SUM, w, 0);
    tbon_packet_t *p = NULL;
    int rc = tbon_stream_recv(s, &p, 30000);
    int64_t a = 0, b = 0;
    if (rc == 0)
        rc = tbon_packet_unpack(p, "%ld %ld", &a, &b);
    tbon_packet_unref(p);
    if (rc != 0 || a != (int64_t)w * (int64_t)live || b != (int64_t)live)
        ft_die("membership wave %u: (%lld, %lld), expected (%lld, %zu): %s", w, (long long)a,
               (long long)b, (long long)w * (long long)live, live, tbon_strerror(rc));
    return (bench_now() - t0) * 1e3;
}

static void mb_run(size_t k, struct mb_result *out)
{
    const uint32_t *fan = mb_fan[k];
    const char *host = "localhost";
    tbon_error_t err = { 0 };
    tb_topology_t *t = tb_topology_gen_shape(fan, 3, &host, 1, &err);
    if (!t)
        ft_die("membership topology: %s", err.msg);
    size_t size = tb_topology_size(t), n = tb_topology_num_leaves(t);
    size_t ncn = (size_t)fan[0] * fan[1];          /* commnodes at depth 2 */
    tbon_rank_t first_cn = 1 + fan[0], first_be = (tbon_rank_t)(1 + fan[0] + ncn);
    char name[32];
    snprintf(name, sizeof name, "members%zu", size);
    const char *topo = write_topology(t, name);
    out->nodes = size;

    tbon_stream_t *s;
    tbon_net_t *net = start_streamed(topo, n, 0, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, &s);
    tb_wd_arm("membership run", 240);
    mb_wave(s, 1, n);                   /* the port table is everywhere now */
    out->idle = mb_idle(size);
    pid_t *pids = calloc(size, sizeof *pids);
    double bf[MB_KILLS], bs[MB_KILLS], cf[MB_KILLS], cs[MB_KILLS], wv[2 * MB_KILLS];
    if (!pids)
        ft_die("calloc");
    size_t live = n;
    uint32_t w = 2;
    /* Back-ends spread over the tree, then commnodes at depth 2 (each with
     * fan[2] back-ends that are adopted by the others). Each kill starts
     * from a stable view, and a wave checks the survivors after it. */
    for (int i = 0; i < MB_KILLS; i++) {
        tbon_rank_t v = first_be + (tbon_rank_t)((size_t)(i * 2 + 1) * n / (2 * MB_KILLS));
        scan_session(tree_kv(net), 0, pids, size);
        if (!pids[v])
            ft_die("no process for back-end %u", v);
        kill_settle(net, v, pids[v], 0, &bf[i], &bs[i]);
        wv[i] = mb_wave(s, w++, --live);
    }
    for (int i = 0; i < MB_KILLS; i++) {
        tbon_rank_t v = first_cn + (tbon_rank_t)((size_t)(i * 2 + 1) * ncn / (2 * MB_KILLS));
        memset(pids, 0, size * sizeof *pids);
        scan_session(tree_kv(net), 0, pids, size);
        if (!pids[v])
            ft_die("no process for commnode %u", v);
        size_t nk = 0;
        for (tbon_rank_t r = first_be; r < size; r++)   /* its live back-ends */
            nk += (r - first_be) / fan[2] == v - first_cn && pids[r];
        kill_settle(net, v, pids[v], nk, &cf[i], &cs[i]);
        wv[MB_KILLS + i] = mb_wave(s, w++, live);
    }
    tbon_view_check_t c;
    if (tbon_fe_check_views(net, &c, 30000) != 0)
        ft_die("consistency check after the kills: %s", tbon_net_error(net));
    free(pids);
    stop(net);
    out->be_failed = bench_median(bf, MB_KILLS);
    out->be_stable = bench_median(bs, MB_KILLS);
    out->cn_failed = bench_median(cf, MB_KILLS);
    out->cn_stable = bench_median(cs, MB_KILLS);
    out->wave = bench_median(wv, 2 * MB_KILLS);
    out->idle_nohb = -1;
    if (k + 1 == MB_SHAPES) {
        /* The same tree without heartbeats: what the membership layer alone
         * sends when nothing happens. */
        net = start_streamed(topo, n, -1, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, &s);
        mb_wave(s, 1, n);
        out->idle_nohb = mb_idle(size);
        stop(net);
        start_heartbeat_ms = 0;
    }
    tb_wd_arm("", 0);
}

/* The FE's TBON_EV_NODE_JOINED for rank r (TBON_RANK_NONE: any) within 60 s
 * of t0; its rank. */
static tbon_rank_t mb_joined(tbon_net_t *net, tbon_rank_t r, double t0, const char *what)
{
    tbon_event_t ev;
    for (;;) {
        int ms = (int)((t0 + 60 - bench_now()) * 1e3);
        if (ms <= 0 || tbon_net_next_event(net, &ev, ms) != 0)
            ft_die("%s: no TBON_EV_NODE_JOINED within 60 s", what);
        if (ev.type == TBON_EV_NODE_JOINED && (r == TBON_RANK_NONE || ev.rank == r))
            return ev.rank;
    }
}

/* Joins (seed 000 section 3.7): MB_JOINERS back-ends started at once join
 * a running tree of 256 nodes; from the first fork to the FE's last
 * TBON_EV_NODE_JOINED, then a wave that must sum them all. Beside it, the
 * start-up of a tree with as many back-ends (10x10) in the same run. Then a
 * commnode joins (tbon_commnode --join), and a back-end killed with kill -9
 * is restarted (tbon_be_attach with its rank, once the FE has its failure):
 * each from its fork to its TBON_EV_NODE_JOINED, and a wave after. */
#define MB_JOINERS 100
#define MB_JOIN_REPS 3

static double mb_cn_join_ms, mb_restart_ms;

static void mb_joins(double *join_ms, double *start_ms)
{
    double jv[MB_JOIN_REPS], sv[MB_JOIN_REPS], cv[MB_JOIN_REPS], rv[MB_JOIN_REPS];
    const uint32_t fan[3] = { 5, 5, 9 }, fan10[2] = { 10, 10 };
    const char *host = "localhost";
    tbon_error_t err = { 0 };
    tb_topology_t *t = tb_topology_gen_shape(fan, 3, &host, 1, &err);
    tb_topology_t *t10 = tb_topology_gen_shape(fan10, 2, &host, 1, &err);
    if (!t || !t10)
        ft_die("join topologies: %s", err.msg);
    size_t n = tb_topology_num_leaves(t);
    char topo[160], topo10[160], attach[128];      /* write_topology's path is static */
    snprintf(topo, sizeof topo, "%s", write_topology(t, "joins256"));
    snprintf(topo10, sizeof topo10, "%s", write_topology(t10, "start100"));
    snprintf(attach, sizeof attach, "%s/attach", tmpdir);
    for (int rep = 0; rep < MB_JOIN_REPS; rep++) {
        double t0 = bench_now();
        tbon_net_t *net = start(topo10, 100, 0);
        sv[rep] = (bench_now() - t0) * 1e3;
        stop(net);
        start_attach_file = attach;
        tbon_stream_t *s;
        net = start_streamed(topo, n, 0, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, &s);
        start_attach_file = NULL;
        tb_wd_arm("joins", 120);
        mb_wave(s, 1, n);
        t0 = bench_now();
        for (int i = 0; i < MB_JOINERS; i++) {
            pid_t pid = fork();
            if (pid == 0) {
                execl(self_exe, self_exe, "--be", "--attach", attach, (char *)NULL);
                _exit(127);
            }
            if (pid < 0)
                ft_die("fork");
        }
        for (int joined = 0; joined < MB_JOINERS; joined++)
            mb_joined(net, TBON_RANK_NONE, t0, "the joins");
        jv[rep] = (bench_now() - t0) * 1e3;
        mb_wave(s, 2, n + MB_JOINERS);      /* the old stream waits for them all */
        /* A commnode joins. */
        t0 = bench_now();
        pid_t cp = fork();
        if (cp == 0) {
            execl(TBON_BUILD_BINDIR "/tbon_commnode", "tbon_commnode", "--join", attach,
                  (char *)NULL);
            _exit(127);
        }
        if (cp < 0)
            ft_die("fork");
        mb_joined(net, TBON_RANK_NONE, t0, "the commnode join");
        cv[rep] = (bench_now() - t0) * 1e3;
        /* The first back-end dies and is restarted. */
        size_t size = tb_topology_size(t) + MB_JOINERS + 1;
        pid_t *pids = calloc(size, sizeof *pids);
        tbon_rank_t v = (tbon_rank_t)(1 + fan[0] + fan[0] * fan[1]);
        if (!pids)
            ft_die("calloc");
        scan_session(tree_kv(net), 0, pids, size);
        if (!pids[v])
            ft_die("no process for back-end %u", v);
        double failed, stable;
        kill_settle(net, v, pids[v], 0, &failed, &stable);
        free(pids);
        char rank[16];
        snprintf(rank, sizeof rank, "%u", v);
        t0 = bench_now();
        pid_t rp = fork();
        if (rp == 0) {
            execl(self_exe, self_exe, "--be", "--attach", attach, "--rank", rank, (char *)NULL);
            _exit(127);
        }
        if (rp < 0)
            ft_die("fork");
        mb_joined(net, v, t0, "the restart");
        rv[rep] = (bench_now() - t0) * 1e3;
        mb_wave(s, 3, n + MB_JOINERS);      /* the restarted one answers again */
        stop(net);
        tb_wd_arm("", 0);
    }
    *join_ms = bench_median(jv, MB_JOIN_REPS);
    *start_ms = bench_median(sv, MB_JOIN_REPS);
    mb_cn_join_ms = bench_median(cv, MB_JOIN_REPS);
    mb_restart_ms = bench_median(rv, MB_JOIN_REPS);
}

static double mb_join_ms, mb_start_ms;

/* Every tree shape, then the joins. */
void membership_run(void)
{
    for (size_t k = 0; k < MB_SHAPES; k++)
        mb_run(k, &mb_res[k]);
    mb_joins(&mb_join_ms, &mb_start_ms);
}

void membership_rows(void)
{
    const struct mb_result *r = mb_res;
    bench_row("membership", "100 back-ends join a running tree", "%.1f", mb_join_ms, "ms",
              "256 nodes (5x5x9) with a broadcast sum stream; %d tbon_be_attach(FILE, "
              "TBON_RANK_NONE) processes forked at once, to the FE's last TBON_EV_NODE_JOINED; a "
              "wave then sums them all; median of %d; baseline: tbon_fe_create of a 10x10 tree "
              "(100 back-ends) in the same run %.1f ms", MB_JOINERS, MB_JOIN_REPS, mb_start_ms);
    bench_row("membership", "a commnode joins a running tree", "%.1f", mb_cn_join_ms, "ms",
              "the same tree after the joins: tbon_commnode --join FILE forked, to its "
              "TBON_EV_NODE_JOINED; median of %d", MB_JOIN_REPS);
    bench_row("membership", "a killed back-end restarted", "%.1f", mb_restart_ms, "ms",
              "the same tree: once the FE has the failure of a back-end killed with kill -9, "
              "a new process with its rank (tbon_be_attach(FILE, RANK)) forked, to its "
              "TBON_EV_NODE_JOINED at the next incarnation generation; a wave then counts it "
              "again; median of %d", MB_JOIN_REPS);
    for (size_t k = 0; k < MB_SHAPES; k++) {
        const uint32_t *f = mb_fan[k];
        char shape[64];
        snprintf(shape, sizeof shape, "%zu nodes (%ux%ux%u)", r[k].nodes, f[0], f[1], f[2]);
        int last = k + 1 == MB_SHAPES;
        bench_row("membership", "kill -9 of a back-end to TBON_EV_NODE_FAILED", "%.2f",
                  r[k].be_failed, "ms", "%s; median of %d back-ends, one at a time%s", shape,
                  MB_KILLS, last ? "; target <= 2 ms at 1,024" : "");
        bench_row("membership", "kill -9 of a back-end to TBON_EV_VIEW_STABLE", "%.2f",
                  r[k].be_stable, "ms", "%s; every live process has the view; median of %d; "
                  "baseline: a sum wave's round trip on the same tree %.2f ms%s", shape,
                  MB_KILLS, r[k].wave, last ? "; target <= 5 ms at 1,024" : "");
        bench_row("membership", "sum wave round trip (baseline)", "%.2f", r[k].wave, "ms",
                  "%s; the request down to every back-end and the sum back, as a view goes "
                  "down and its acknowledgements up; median of %d waves after the kills",
                  shape, 2 * MB_KILLS);
        bench_row("membership", "kill -9 of a commnode to TBON_EV_NODE_FAILED", "%.2f",
                  r[k].cn_failed, "ms", "%s; depth 2, %u back-ends; median of %d", shape, f[2],
                  MB_KILLS);
        bench_row("membership", "kill -9 of a commnode to TBON_EV_VIEW_STABLE", "%.2f",
                  r[k].cn_stable, "ms", "%s; after its %u orphans are adopted and every "
                  "process has the view; median of %d", shape, f[2], MB_KILLS);
        bench_row("membership", "idle traffic, default heartbeats", "%.1f", r[k].idle,
                  "bytes/s per node", "%s; loopback bytes (headers included) over %.0f s with "
                  "nothing happening: the heartbeats (a 1-byte segment each way per "
                  "connection every 750 ms) and their TCP acknowledgements", shape, MB_IDLE_S);
        if (r[k].idle_nohb >= 0)
            bench_row("membership", "idle traffic, heartbeats off", "%.1f", r[k].idle_nohb,
                      "bytes/s per node", "%s; the same without heartbeats: what the "
                      "membership layer sends when nothing changes; target 0", shape);
    }
}
