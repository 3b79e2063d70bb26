/* bench_ft.c - fault tolerance through the public API: recovery latency
 * against the victim's fan-out (seed 003, VI-C, Figure 5), the throughput of
 * a streaming union with fault tolerance on and off, and the perturbation of
 * a running computation by failures (VI-D, Figure 7).
 *
 * Usage: bench_ft [--recovery] [--throughput] [--reps N]   (default: both)
 *        bench_ft --perturbation [--period S] [--rounds K] [--csv FILE] [--svg FILE]
 *        bench_ft --figure7 [--victims K] [--period S] [--csv FILE]
 *        bench_ft --be ...          (a back-end; started by the tree)
 *
 * Every tree is started with tbon_fe_create, this program at every leaf. The
 * processes of a run carry BENCH_FT_SESSION=<FE pid> in their environment: a
 * victim is found in /proc by that and "--tbon-rank R" on its command line; on
 * any failure (or the watchdog) every process of the run is killed, and after
 * each tbon_net_destroy none may be left. Every result is checked (each
 * union wave complete, each element once, each sum exact or a strict subset);
 * a check that fails ends the program with status 1 and no rows.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <limits.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "lib/bench.h"
#include "lib/faultlog.h"
#include "lib/procscan.h"
#include "lib/watchdog.h"
#include "topo/topology.h"

#define PROG        "bench_ft"
#define TAG         TBON_FIRST_APP_TAG
#define SESSION_ENV "BENCH_FT_SESSION"

/* Requests "%ud %ud %ud" (op, w, arg) from the FE to every back-end. */
enum {
    OP_WAVE = 1,    /* union: send {w << 32 | rank} once */
    OP_STREAM = 2,  /* union: send arg packets as fast as possible, then mark w */
    OP_SUM = 3,     /* sum: send "%ld %ld" (w, 1) */
    OP_TICK = 4,    /* union: send one new value every arg ms from now on; arg 0
                       stops it, and with w the count sent goes as round w's mark */
};

/* The union values: what each one is, from its top bits. */
#define V_MARK   (UINT64_C(1) << 63)    /* end of a round: w << 52 | rank << 40 | count */
#define V_DATA   (UINT64_C(1) << 62)    /* stream: rank << 12 | i, i < STREAM_POOL */
#define V_TICK   (UINT64_C(1) << 61)    /* traffic: seq << 11 | rank */
#define V_RANK   0x7ffu                 /* ranks in V_TICK values */
#define STREAM_VALS 8                   /* values per stream packet */
#define STREAM_POOL 4096                /* distinct stream values per back-end */

/* ---------------------------------------------------------------- back-end */

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* OP_STREAM: npkt packets of STREAM_VALS values as fast as back-pressure
 * allows, cycling through this back-end's own STREAM_POOL values (so the
 * union sets stay small and most of the input is duplicates the tree
 * removes, as in seed 003 VI-B), then the mark of round w with the count. */
static int be_stream(tbon_stream_t *s, uint64_t rank, uint32_t w, uint32_t npkt)
{
    static uint64_t next;       /* the pool position carries over the rounds */
    uint64_t v[STREAM_VALS];
    int rc;
    for (uint32_t k = 0; k < npkt; k++) {
        for (int i = 0; i < STREAM_VALS; i++, next++)
            v[i] = V_DATA | rank << 12 | (next & (STREAM_POOL - 1));
        if ((rc = tbon_stream_send(s, TAG, "%auld", v, (size_t)STREAM_VALS)) != 0)
            return rc;
    }
    v[0] = V_MARK | (uint64_t)(w & 0x3ff) << 52 | rank << 40 | (uint64_t)npkt * STREAM_VALS;
    return tbon_stream_send(s, TAG, "%auld", v, (size_t)1);
}

/* Join the tree and answer the FE's requests (see the OP_ enum) until it
 * shuts the network down. */
static int be_main(int argc, char **argv)
{
    tbon_error_t err = { 0 };
    const char *attach = NULL;      /* --attach FILE: join the running tree */
    tbon_rank_t as = TBON_RANK_NONE;  /* --rank R: as rank R, restarted */
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--attach") == 0)
            attach = argv[i + 1];
        else if (strcmp(argv[i], "--rank") == 0)
            as = (tbon_rank_t)strtoul(argv[i + 1], NULL, 10);
    }
    tbon_net_t *net = attach ? tbon_be_attach(attach, as, &err)
                             : tbon_be_create(&argc, &argv, &err);
    if (!net) {
        fprintf(stderr, PROG " --be: tbon_be_create: %s\n", err.msg);
        return 1;
    }
    uint64_t rank = tbon_net_rank(net), seq = 0;
    tbon_stream_t *tick_s = NULL;
    int64_t tick_us = 0, next_tick = 0;
    int rc;
    for (;;) {
        int timeout = -1;
        if (tick_s) {
            int64_t d = next_tick - now_us();
            timeout = d <= 0 ? 0 : (int)((d + 999) / 1000);
        }
        tbon_packet_t *p = NULL;
        tbon_stream_t *s = NULL;
        rc = tbon_net_recv(net, &p, &s, timeout);
        if (rc == TBON_ETIMEOUT) {
            uint64_t v = V_TICK | seq++ << 11 | rank;
            if ((rc = tbon_stream_send(tick_s, TAG, "%auld", &v, (size_t)1)) != 0)
                break;
            next_tick += tick_us;
            continue;
        }
        if (rc != 0)
            break;
        uint32_t op, w, arg;
        if (tbon_packet_unpack(p, "%ud %ud %ud", &op, &w, &arg) != 0) {
            fprintf(stderr, PROG " --be: rank %" PRIu64 ": request of format \"%s\"\n", rank,
                    tbon_packet_format(p));
            tbon_packet_unref(p);
            rc = TBON_EFORMAT;
            break;
        }
        tbon_packet_unref(p);
        if (rank > V_RANK && (op == OP_STREAM || op == OP_TICK)) {   /* fits the values */
            fprintf(stderr, PROG " --be: rank %" PRIu64 " too large for op %u\n", rank, op);
            rc = TBON_EINVAL;
            break;
        }
        uint64_t v = (uint64_t)w << 32 | rank;
        switch (op) {
        case OP_WAVE:
            rc = tbon_stream_send(s, TAG, "%auld", &v, (size_t)1);
            break;
        case OP_STREAM:
            rc = be_stream(s, rank, w, arg);
            break;
        case OP_SUM:
            rc = tbon_stream_send(s, TAG, "%ld %ld", (int64_t)w, (int64_t)1);
            break;
        case OP_TICK:
            if (!arg && w && tick_s) {
                /* stop, and say how many were sent: the mark of round w */
                uint64_t m = V_MARK | (uint64_t)(w & 0x3ff) << 52 | rank << 40 | seq;
                rc = tbon_stream_send(tick_s, TAG, "%auld", &m, (size_t)1);
            }
            tick_s = arg ? s : NULL;
            tick_us = (int64_t)arg * 1000;
            next_tick = now_us() + tick_us;
            break;
        default:
            rc = TBON_EINVAL;
        }
        if (rc != 0)
            break;
    }
    if (rc != TBON_ECLOSED)
        fprintf(stderr, PROG " --be: rank %" PRIu64 ": %s (%s)\n", rank, tbon_strerror(rc),
                tbon_net_error(net));
    tbon_net_destroy(net);
    return rc == TBON_ECLOSED ? 0 : 1;
}

/* ------------------------------------------------ finding the run's processes */

static char session_kv[64];     /* "BENCH_FT_SESSION=<pid>"; a tree adds ".K" */
static struct { tbon_net_t *net; char kv[80]; } trees[4];   /* the trees up */
static char self_exe[4096];
static char tmpdir[64];         /* the topologies written; "" when none */

/* Walk the live processes of the tree whose environment holds kv (NULL: of
 * every tree of the run) other than this one. With pids != NULL, store the
 * pid of each one launched as rank r < npids in pids[r]; with sig, send it to
 * each. Returns how many there are. */
static long scan_session(const char *kv, int sig, pid_t *pids, size_t npids)
{
    return tb_proc_scan_env(kv ? kv : session_kv, !kv, sig, pids, npids);
}

/* SIGKILL every process of the run, rescanning until none is found. */
static void kill_session(void)
{
    for (int i = 0; i < 10 && scan_session(NULL, SIGKILL, NULL, 0) > 0; i++)
        ;
}

/* Reap the zombies handed to us (we are a subreaper: the back-ends of a
 * killed commnode become our children). */
static void reap_all(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* The machine's busy time so far, in clock ticks (/proc/stat: user, nice,
 * system, irq, softirq, steal). Per-process accounting (/proc/PID/stat,
 * schedstat) undercounts badly on this VM; the machine-wide count does not. */
static double busy_ticks(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = { 0 };
    if (!f)
        return 0;
    int k = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    return k == 8 ? (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) : 0;
}

static void remove_tmpdir(void)
{
    if (!tmpdir[0])
        return;
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[600];
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(tmpdir);
    tmpdir[0] = '\0';
}

/* A measurement failed: say what, remove the whole tree, exit 1. */
__attribute__((noreturn, format(printf, 1, 2))) static void ft_die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, PROG ": ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "; no rows printed\n");
    kill_session();
    remove_tmpdir();
    exit(1);
}

/* ---------------------------------------------------------------- watchdog */

/* The watchdog (tests/lib/watchdog.h) fired: no rows, no process left. */
static void wd_fire(const char *phase)
{
    fprintf(stderr, PROG ": watchdog: %s took too long; killing the tree; no rows printed\n",
            phase);
    kill_session();
    _exit(1);
}

static struct timespec abs_ts(double t)
{
    struct timespec ts = { .tv_sec = (time_t)t };
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    return ts;
}

static void cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

/* ------------------------------------------------------------ the FE state */

/* One "recovery" line of the runtime at the FE. */
struct rec {
    tbon_rank_t orphan, adopter;
    uint32_t incarnation;
    long long part[4];          /* new_parent, connect, compensate, cleanup (us) */
};

/* What the receiver thread of a union stream saw. */
#define MAX_WAVES 4
struct uwatch {
    tbon_stream_t *s;
    size_t n, size;             /* back-ends; ranks below size */
    uint8_t *seen[MAX_WAVES];   /* per wave, per rank */
    size_t wave_count[MAX_WAVES];
    uint32_t round;             /* of OP_STREAM */
    uint8_t *marked;            /* per rank: mark of this round seen */
    uint64_t *sent;             /* per rank: values sent in all rounds (the marks) */
    uint32_t *distinct;         /* per rank: stream values received */
    uint8_t *got;               /* per rank * STREAM_POOL: that value received */
    size_t nmarks;
    uint64_t mark_total, data, ticks;
    double last_mark;
    size_t tick_max;            /* > 0: each tick value is checked, below */
    uint8_t *tick_seen;         /* per rank * tick_max: times that tick came */
    uint64_t tick_dups, tick_bad;
    double *pkt_t;              /* with tick_max: when each packet came */
    size_t npkt, cappkt;
    int stop;
    char error[256];            /* "" while every check holds */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* a recovery line or union result arrived */
    struct rec *rec;
    size_t nrec, caprec, bad_lines;
    int user_level;             /* level for lines other than recovery */
} fe = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* The runtime's line per adopted orphan (tag "recovery"): "rank R adopted
 * by A (incarnation I): new_parent N us, connect C us, compensate P us,
 * cleanup Q us". Other lines go to stderr if the user's level wants them.
 * Runs on library threads under the logger's lock: it must not log. */
static void log_handler(void *arg, int level, const char *line)
{
    (void)arg;
    const char *m = strstr(line, " [recovery] ");
    if (m) {
        struct rec r;
        int end = 0;
        pthread_mutex_lock(&fe.mu);
        if (sscanf(m + 12, "rank %" SCNu32 " adopted by %" SCNu32 " (incarnation %" SCNu32
                   "): new_parent %lld us, connect %lld us, compensate %lld us, "
                   "cleanup %lld us%n", &r.orphan, &r.adopter, &r.incarnation, &r.part[0],
                   &r.part[1], &r.part[2], &r.part[3], &end) == 7 && m[12 + end] == '\0') {
            if (fe.nrec == fe.caprec) {
                size_t nc = fe.caprec ? fe.caprec * 2 : 256;
                struct rec *nr = realloc(fe.rec, nc * sizeof *nr);
                if (nr) {
                    fe.rec = nr;
                    fe.caprec = nc;
                }
            }
            if (fe.nrec < fe.caprec)
                fe.rec[fe.nrec++] = r;
            else
                fe.bad_lines++;
        } else {
            fe.bad_lines++;
        }
        pthread_cond_broadcast(&fe.cv);
        pthread_mutex_unlock(&fe.mu);
        if (fe.user_level < TBON_LOG_INFO)
            return;
    }
    if (level <= fe.user_level)
        fprintf(stderr, "%s\n", line);
}

/* Wait on fe.cv until the deadline (bench_now() seconds); under fe.mu. */
static void fe_wait(double deadline)
{
    struct timespec ts = abs_ts(deadline);
    pthread_cond_timedwait(&fe.cv, &fe.mu, &ts);
}

/* The receiver of a union stream: classify each element, check the waves. */
static void *urecv_main(void *arg)
{
    struct uwatch *u = arg;
    for (;;) {
        pthread_mutex_lock(&fe.mu);
        int stop = u->stop;
        pthread_mutex_unlock(&fe.mu);
        if (stop)
            break;
        tbon_packet_t *p = NULL;
        int rc = tbon_stream_recv(u->s, &p, 200);
        if (rc == TBON_ETIMEOUT)
            continue;
        uint64_t *v = NULL;
        size_t nv = 0;
        if (rc == 0 && tbon_packet_unpack(p, "%auld", &v, &nv) != 0)
            rc = TBON_EFORMAT;
        double t = bench_now();
        pthread_mutex_lock(&fe.mu);
        if (rc != 0 && !u->error[0])
            snprintf(u->error, sizeof u->error, "union stream: %s", tbon_strerror(rc));
        if (rc == 0 && u->tick_max) {
            if (u->npkt == u->cappkt) {
                size_t nc = u->cappkt ? u->cappkt * 2 : 4096;
                double *nt = realloc(u->pkt_t, nc * sizeof *nt);
                if (nt) {
                    u->pkt_t = nt;
                    u->cappkt = nc;
                }
            }
            if (u->npkt < u->cappkt)
                u->pkt_t[u->npkt++] = t;
        }
        for (size_t i = 0; i < nv && !u->error[0]; i++) {
            uint64_t x = v[i];
            if (x & V_MARK) {
                uint64_t r = (x >> 40) & 0xfff, c = x & ((UINT64_C(1) << 40) - 1);
                if (r >= u->size || ((x >> 52) & 0x3ff) != (u->round & 0x3ff) ||
                    u->marked[r]++) {
                    snprintf(u->error, sizeof u->error, "stream mark of rank %" PRIu64
                             " bad, of another round or twice", r);
                    break;
                }
                u->nmarks++;
                u->sent[r] += c;
                u->mark_total += c;
                u->last_mark = t;
            } else if (x & V_DATA) {
                uint64_t r = (x & ~V_DATA) >> 12, k = x & (STREAM_POOL - 1);
                if (r >= u->size || u->got[r * STREAM_POOL + k]++) {
                    snprintf(u->error, sizeof u->error, "stream value %" PRIu64 " of rank %"
                             PRIu64 " bad or received twice", k, r);
                    break;
                }
                u->distinct[r]++;
                u->data++;
            } else if (x & V_TICK) {
                u->ticks++;
                uint64_t r = x & V_RANK, q = (x & ~V_TICK) >> 11;
                if (u->tick_max && (r >= u->size || q >= u->tick_max))
                    u->tick_bad++;
                else if (u->tick_max && u->tick_seen[r * u->tick_max + q]++)
                    u->tick_dups++;
            } else {
                uint64_t w = x >> 32, r = x & 0xffffffffu;
                if (w >= MAX_WAVES || r >= u->size || u->seen[w][r]++) {
                    snprintf(u->error, sizeof u->error, "union wave value %" PRIu64 " (wave %"
                             PRIu64 ", rank %" PRIu64 ") bad or received twice", x, w, r);
                    break;
                }
                u->wave_count[w]++;
            }
        }
        pthread_cond_broadcast(&fe.cv);
        pthread_mutex_unlock(&fe.mu);
        free(v);
        tbon_packet_unref(p);
        if (rc == TBON_ECLOSED)
            break;
    }
    return NULL;
}

/* ------------------------------------------------------------- the trees */

static void set_nofile_max(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Write t into tmpdir as NAME.top; returns the path (static). Takes t. */
static const char *write_topology(tb_topology_t *t, const char *name)
{
    static char path[128];
    tbon_error_t err = { 0 };
    snprintf(path, sizeof path, "%s/%s.top", tmpdir, name);
    if (!t || tb_topology_write_file(t, path, false, PROG, &err) != 0)
        ft_die("topology %s: %s", name, err.msg);
    tb_topology_destroy(t);
    return path;
}

/* The environment entry of net's processes. */
static const char *tree_kv(const tbon_net_t *net)
{
    for (size_t i = 0; i < sizeof trees / sizeof trees[0]; i++)
        if (trees[i].net == net)
            return trees[i].kv;
    ft_die("a tree without its session entry");
}

/* The heartbeat and attach-file options of the next trees started (0,
 * NULL: the defaults). */
static int start_heartbeat_ms;
static const char *start_attach_file;

/* --exact-off: tbon_fe_options_t.exact_off for every tree (the sum of the
 * perturbation run then loses waves in flight at a kill, as before exact
 * streams). */
static int start_exact_off;

static tbon_net_t *start(const char *topo, size_t n, int no_ft)
{
    static unsigned seq;
    size_t slot = 0;
    while (slot < sizeof trees / sizeof trees[0] && trees[slot].net)
        slot++;
    if (slot == sizeof trees / sizeof trees[0])
        ft_die("too many trees at once");
    /* The tree's processes inherit SESSION_ENV=<pid>.<seq>. */
    snprintf(trees[slot].kv, sizeof trees[slot].kv, "%s.%u", session_kv, ++seq);
    if (setenv(SESSION_ENV, strchr(trees[slot].kv, '=') + 1, 1) != 0)
        ft_die("setenv");
    const char *const be_argv[] = { "--be", NULL };
    tbon_fe_options_t o = { 0 };
    o.startup_timeout_ms = n >= 1024 ? 120000 : 30000;
    o.no_fault_tolerance = no_ft;
    o.heartbeat_ms = start_heartbeat_ms;
    o.attach_file = start_attach_file;
    o.exact_off = start_exact_off;
    tbon_error_t err = { 0 };
    tb_wd_arm("tbon_fe_create", n >= 1024 ? 180 : 60);
    tbon_net_t *net = tbon_fe_create(topo, self_exe, be_argv, &o, &err);
    if (!net)
        ft_die("tbon_fe_create: %s", err.msg);
    trees[slot].net = net;
    if (tbon_net_num_backends(net) != n)
        ft_die("%zu back-ends, expected %zu", tbon_net_num_backends(net), n);
    return net;
}

/* Destroy the network, then require that no process of its tree is left. */
static void stop(tbon_net_t *net)
{
    const char *kv = tree_kv(net);
    tb_wd_arm("tbon_net_destroy", 60);
    tbon_net_destroy(net);
    long left = 0;
    for (int i = 0; i < 200; i++) {
        reap_all();
        if ((left = scan_session(kv, 0, NULL, 0)) == 0)
            break;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    if (left)
        ft_die("%ld processes left after tbon_net_destroy", left);
    for (size_t i = 0; i < sizeof trees / sizeof trees[0]; i++)
        if (trees[i].net == net)
            trees[i].net = NULL;
    tb_wd_arm("", 0);
}

/* A union stream over every back-end with its receiver thread. */
static tbon_stream_t *union_stream_sync(tbon_net_t *net, struct uwatch *u, size_t n, size_t size,
                                        int sync, size_t tick_max, pthread_t *th)
{
    memset(u, 0, sizeof *u);
    u->n = n;
    u->size = size;
    for (int w = 0; w < MAX_WAVES; w++)
        u->seen[w] = calloc(size, 1);
    u->marked = calloc(size, 1);
    u->sent = calloc(size, sizeof *u->sent);
    u->distinct = calloc(size, sizeof *u->distinct);
    u->got = calloc(size, STREAM_POOL);
    u->tick_max = tick_max;
    u->tick_seen = tick_max ? calloc(size, tick_max) : NULL;
    if (tick_max && !u->tick_seen)
        ft_die("calloc");
    u->s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_UNION, sync,
                              TBON_FILTER_NULL);
    if (!u->s || !u->marked || !u->sent || !u->distinct || !u->got || !u->seen[MAX_WAVES - 1])
        ft_die("union stream: %s", tbon_net_error(net));
    if (pthread_create(th, NULL, urecv_main, u) != 0)
        ft_die("pthread_create");
    return u->s;
}

/* The streaming union of seed 003 (don't-wait). */
static tbon_stream_t *union_stream(tbon_net_t *net, struct uwatch *u, size_t n, size_t size,
                                   pthread_t *th)
{
    return union_stream_sync(net, u, n, size, TBON_SYNC_DONTWAIT, 0, th);
}

/* Stop the receiver thread. */
static void union_stream_end(struct uwatch *u, pthread_t th)
{
    pthread_mutex_lock(&fe.mu);
    u->stop = 1;
    pthread_mutex_unlock(&fe.mu);
    pthread_join(th, NULL);
}

static void union_stream_free(struct uwatch *u)
{
    for (int w = 0; w < MAX_WAVES; w++)
        free(u->seen[w]);
    free(u->marked);
    free(u->sent);
    free(u->distinct);
    free(u->got);
    free(u->tick_seen);
    free(u->pkt_t);
}

static void request(tbon_stream_t *s, uint32_t op, uint32_t w, uint32_t arg)
{
    int rc = tbon_stream_send(s, TAG, "%ud %ud %ud", op, w, arg);
    if (rc == 0)
        rc = tbon_stream_flush(s);
    if (rc != 0)
        ft_die("request %u: %s", op, tbon_strerror(rc));
}

/* Ask for union wave w and wait until every back-end's value is in. */
static void union_wave(struct uwatch *u, uint32_t w, double secs)
{
    request(u->s, OP_WAVE, w, 0);
    double dl = bench_now() + secs;
    pthread_mutex_lock(&fe.mu);
    while (u->wave_count[w] < u->n && !u->error[0] && bench_now() < dl)
        fe_wait(dl);
    size_t got = u->wave_count[w];
    pthread_mutex_unlock(&fe.mu);
    if (u->error[0])
        ft_die("%s", u->error);
    if (got < u->n)
        ft_die("union wave %u: %zu of %zu back-ends answered within %.0f s", w, got, u->n, secs);
}

/* ------------------------------------------ (a) recovery against fan-out */

#define REC_ADOPTERS 16         /* other commnodes at depth 1 (seed 003, Figure 5) */
#define REC_THEIR_BES 2         /* back-ends under each of them */
#define REC_TICK_MS 100         /* 10 Hz per back-end, the rate of seed 003 VI-B */
#define REC_WAIT_S 10.0         /* the recovery must be over by then */

static const uint32_t rec_fanouts[] = { 16, 32, 64, 128 };
#define NFANOUTS (sizeof rec_fanouts / sizeof rec_fanouts[0])

struct rec_result {             /* medians over the repetitions */
    double overall, failed, first, max, mean, part[4];
    size_t adopters_min, adopters_max, by_fe;
    size_t sum_waves, sum_short;    /* --with-sum: over all repetitions */
};

/* The tree of Figure 5: the FE over 17 commnodes; commnode 1, the victim,
 * over f back-ends, each other over REC_THEIR_BES. */
static const char *rec_topology(uint32_t f, size_t *n, size_t *size)
{
    tb_topology_t *t = tb_topology_new();
    uint32_t id = 0;
    int rc = t ? tb_topology_add(t, "localhost", id++, TBON_RANK_NONE) : TBON_ENOMEM;
    for (int i = 0; i <= REC_ADOPTERS && rc == 0; i++)
        rc = tb_topology_add(t, "localhost", id++, 0);
    for (tbon_rank_t c = 1; c <= REC_ADOPTERS + 1 && rc == 0; c++)
        for (uint32_t k = 0; k < (c == 1 ? f : REC_THEIR_BES) && rc == 0; k++)
            rc = tb_topology_add(t, "localhost", id++, c);
    tbon_error_t err = { 0 };
    if (rc != 0 || tb_topology_finish(t, &err) != 0)
        ft_die("building the fan-out %u topology: %s", f, rc ? tbon_strerror(rc) : err.msg);
    size_t nk;
    tb_topology_children(t, 1, &nk);
    *n = tb_topology_num_leaves(t);
    *size = tb_topology_size(t);
    if (nk != f || *n != f + REC_ADOPTERS * REC_THEIR_BES)
        ft_die("the fan-out %u topology has %zu children under the victim", f, nk);
    char name[32];
    snprintf(name, sizeof name, "fanout%u", f);
    return write_topology(t, name);
}

/* --with-sum: beside the union, an exact sum stream with waves sent back to
 * back (SUM_WINDOW in flight) through the kill; every result is checked:
 * in order, of every back-end (or short, counted), its coverage matching. */
#define SUM_WINDOW 8
static int rec_with_sum;

struct sumwatch {
    tbon_stream_t *s;
    size_t n;
    int stop;                   /* under fe.mu: send no more, take what is in flight */
    size_t waves, shortw;
    char error[256];
};

static void *sum_main(void *arg)
{
    struct sumwatch *sw = arg;
    uint32_t next = 1, want = 1;
    size_t inflight = 0;
    double stalled = bench_now() + 30;
    for (;;) {
        pthread_mutex_lock(&fe.mu);
        int stop = sw->stop;
        pthread_mutex_unlock(&fe.mu);
        while (!stop && inflight < SUM_WINDOW) {
            int rc = tbon_stream_send(sw->s, TAG, "%ud %ud %ud", OP_SUM, next, 0);
            if (rc != 0) {
                snprintf(sw->error, sizeof sw->error, "sum wave %u: %s", next,
                         tbon_strerror(rc));
                return NULL;
            }
            next++;
            inflight++;
        }
        if (!inflight)
            return NULL;
        tbon_packet_t *p = NULL;
        int rc = tbon_stream_recv(sw->s, &p, 200);
        if (rc == TBON_ETIMEOUT && bench_now() < stalled)
            continue;
        int64_t sum = 0, cnt = 0;
        if (rc != 0 || tbon_packet_unpack(p, "%ld %ld", &sum, &cnt) != 0) {
            snprintf(sw->error, sizeof sw->error, "sum wave %u: %s", want,
                     rc ? tbon_strerror(rc) : "a result of another format");
            tbon_packet_unref(p);
            return NULL;
        }
        size_t cov = tbon_packet_covered(p, NULL, 0);
        tbon_packet_unref(p);
        if (cnt < 1 || cnt > (int64_t)sw->n || sum != (int64_t)want * cnt ||
            cov != (size_t)cnt) {
            snprintf(sw->error, sizeof sw->error, "sum wave %u: (%" PRId64 ", %" PRId64 ") "
                     "covering %zu: not that wave, in order, from distinct back-ends", want,
                     sum, cnt, cov);
            return NULL;
        }
        sw->shortw += cnt < (int64_t)sw->n;
        sw->waves++;
        want++;
        inflight--;
        stalled = bench_now() + 30;
    }
}

/* One repetition: start, a wave, traffic, kill commnode 1, wait for the
 * adoption of its f orphans (ranks 18 .. 17 + f: breadth-first), check with
 * a second wave that every back-end is back, tear down. With rec_with_sum,
 * sums go all along (sumw: what they gave). */
static void rec_once(const char *topo, uint32_t f, size_t n, size_t size, double *res,
                     size_t *nadopters, size_t *by_fe, struct sumwatch *sumw)
{
    const tbon_rank_t victim = 1, first = REC_ADOPTERS + 2;
    tbon_net_t *net = start(topo, n, 0);
    struct uwatch u;
    pthread_t th, sth;
    union_stream(net, &u, n, size, &th);
    tb_wd_arm("recovery run", 60);
    union_wave(&u, 1, 30);              /* the port table is everywhere now */
    request(u.s, OP_TICK, 0, REC_TICK_MS);
    if (sumw) {
        memset(sumw, 0, sizeof *sumw);
        sumw->n = n;
        sumw->s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_SUM,
                                     TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
        if (!sumw->s || pthread_create(&sth, NULL, sum_main, sumw) != 0)
            ft_die("sum stream: %s", tbon_net_error(net));
    }
    pid_t *pids = calloc(size, sizeof *pids);
    double *adopted = calloc(f, sizeof *adopted);
    tbon_rank_t *parent = calloc(f, sizeof *parent);
    if (!pids || !adopted || !parent)
        ft_die("calloc");
    scan_session(tree_kv(net), 0, pids, size);
    if (!pids[victim])
        ft_die("no process for commnode %u", victim);
    /* Let the traffic run a few periods. */
    struct timespec ts = { 0, 3 * REC_TICK_MS * 1000 * 1000 };
    nanosleep(&ts, NULL);
    tbon_event_t ev;
    while (tbon_net_next_event(net, &ev, 0) == 0)
        ft_die("event %d for rank %u before the kill", (int)ev.type, ev.rank);

    pthread_mutex_lock(&fe.mu);
    fe.nrec = 0;
    fe.bad_lines = 0;
    pthread_mutex_unlock(&fe.mu);
    double t_kill = bench_now(), t_failed = 0, dl = t_kill + REC_WAIT_S;
    kill(pids[victim], SIGKILL);
    size_t left = f;
    while (left > 0 || t_failed == 0) {
        int ms = (int)((dl - bench_now()) * 1e3);
        int rc = ms > 0 ? tbon_net_next_event(net, &ev, ms) : TBON_ETIMEOUT;
        if (rc != 0)
            ft_die("fan-out %u: %zu of %u orphans adopted, failure %sseen, within %.0f s "
                   "(%s)", f, f - left, f, t_failed ? "" : "not ", REC_WAIT_S, tbon_strerror(rc));
        double t = bench_now();
        if (ev.type == TBON_EV_NODE_FAILED && ev.rank == victim) {
            if (!t_failed)
                t_failed = t;
        } else if (ev.type == TBON_EV_NODE_ADOPTED && ev.rank >= first && ev.rank < first + f) {
            if (!adopted[ev.rank - first]) {
                adopted[ev.rank - first] = t;
                parent[ev.rank - first] = ev.parent;
                left--;
            }
        } else {
            ft_die("fan-out %u: unexpected event %d for rank %u (parent %u)", f, (int)ev.type,
                   ev.rank, ev.parent);
        }
    }
    if (getenv("BENCH_FT_DEBUG")) {
        /* The kill's time lets a system-wide profile (perf record -k
         * CLOCK_MONOTONIC) be cut to the recovery. */
        fprintf(stderr, "fan-out %u, kill at %.6f s (CLOCK_MONOTONIC); failed %.2f ms; "
                "adopted:", f, t_kill, (t_failed - t_kill) * 1e3);
        for (uint32_t k = 0; k < f; k++)
            fprintf(stderr, " %.1f", (adopted[k] - t_kill) * 1e3);
        fprintf(stderr, "\n");
    }
    double last = 0, firsta = adopted[0];
    for (uint32_t k = 0; k < f; k++) {
        last = adopted[k] > last ? adopted[k] : last;
        firsta = adopted[k] < firsta ? adopted[k] : firsta;
    }

    /* The recovery lines of the f orphans (one each). */
    pthread_mutex_lock(&fe.mu);
    double dl2 = bench_now() + 5;
    while (fe.nrec < f && !fe.bad_lines && bench_now() < dl2)
        fe_wait(dl2);
    size_t nrec = fe.nrec, bad = fe.bad_lines;
    struct rec *recs = malloc(f * sizeof *recs);
    if (recs && nrec == f)
        memcpy(recs, fe.rec, f * sizeof *recs);
    pthread_mutex_unlock(&fe.mu);
    if (!recs || nrec != f || bad)
        ft_die("fan-out %u: %zu recovery lines for %u orphans (%zu unreadable)", f, nrec, f, bad);
    double mx = 0, sum = 0, ps[4] = { 0 };
    uint8_t *seen = calloc(size, 1), *adopter = calloc(size, 1);
    if (!seen || !adopter)
        ft_die("calloc");
    *nadopters = 0;
    *by_fe = 0;
    for (uint32_t k = 0; k < f; k++) {
        const struct rec *r = &recs[k];
        if (r->orphan < first || r->orphan >= first + f || seen[r->orphan]++ ||
            r->adopter >= size || r->adopter != parent[r->orphan - first])
            ft_die("fan-out %u: recovery line of rank %u (adopter %u) does not match the "
                   "events", f, r->orphan, r->adopter);
        double tot = 0;
        for (int p = 0; p < 4; p++) {
            ps[p] += (double)r->part[p];
            tot += (double)r->part[p];
        }
        mx = tot > mx ? tot : mx;
        sum += tot;
        *nadopters += !adopter[r->adopter]++;
        *by_fe += r->adopter == 0;
    }
    free(seen);
    free(adopter);
    free(recs);

    union_wave(&u, 2, 30);              /* every back-end, orphans too, answers */
    if (sumw) {
        pthread_mutex_lock(&fe.mu);
        sumw->stop = 1;
        pthread_mutex_unlock(&fe.mu);
        pthread_join(sth, NULL);
        if (sumw->error[0])
            ft_die("fan-out %u: %s", f, sumw->error);
    }
    union_stream_end(&u, th);
    union_stream_free(&u);
    stop(net);
    free(pids);
    free(adopted);
    free(parent);
    res[0] = (last - t_kill) * 1e3;
    res[1] = (t_failed - t_kill) * 1e3;
    res[2] = (firsta - t_kill) * 1e3;
    res[3] = mx / 1e3;
    res[4] = sum / f / 1e3;
    for (int p = 0; p < 4; p++)
        res[5 + p] = ps[p] / f;
}

static void rec_run(uint32_t f, int reps, struct rec_result *out)
{
    size_t sum_waves = 0, sum_short = 0;
    size_t n, size;
    const char *topo = rec_topology(f, &n, &size);
    double v[9][16];
    out->adopters_min = SIZE_MAX;
    out->adopters_max = out->by_fe = 0;
    for (int r = 0; r < reps; r++) {
        double res[9];
        size_t na, nfe;
        struct sumwatch sw;
        rec_once(topo, f, n, size, res, &na, &nfe, rec_with_sum ? &sw : NULL);
        if (rec_with_sum) {
            sum_waves += sw.waves;
            sum_short += sw.shortw;
        }
        for (int k = 0; k < 9; k++)
            v[k][r] = res[k];
        out->adopters_min = na < out->adopters_min ? na : out->adopters_min;
        out->adopters_max = na > out->adopters_max ? na : out->adopters_max;
        out->by_fe += nfe;
        fprintf(stderr, "%s: fan-out %u, run %d: overall %.2f ms, max %.2f ms, mean %.2f ms, "
                "first ADOPTED %.2f ms, %zu adopters\n", PROG, f, r + 1, res[0], res[3], res[4],
                res[2], na);
    }
    out->overall = bench_median(v[0], reps);
    out->failed = bench_median(v[1], reps);
    out->first = bench_median(v[2], reps);
    out->max = bench_median(v[3], reps);
    out->mean = bench_median(v[4], reps);
    for (int p = 0; p < 4; p++)
        out->part[p] = bench_median(v[5 + p], reps);
    out->sum_waves = sum_waves;
    out->sum_short = sum_short;
}

static uint32_t rec_only;      /* --fanout F: that fan-out alone (0: all) */

static int valid_fanout(int f)
{
    for (size_t i = 0; i < NFANOUTS; i++)
        if (f > 0 && rec_fanouts[i] == (uint32_t)f)
            return 1;
    return 0;
}

static void rec_rows(const struct rec_result *res, int reps)
{
    for (size_t i = 0; i < NFANOUTS; i++) {
        const struct rec_result *r = &res[i];
        if (rec_only && rec_fanouts[i] != rec_only)
            continue;
        uint32_t f = rec_fanouts[i];
        char metric[64], adopters[48], goal[200];
        snprintf(metric, sizeof metric, "recovery, victim fan-out %u%s", f,
                 rec_with_sum ? ", a sum beside" : "");
        if (r->adopters_min == r->adopters_max)
            snprintf(adopters, sizeof adopters, "%zu", r->adopters_min);
        else
            snprintf(adopters, sizeof adopters, "%zu-%zu", r->adopters_min, r->adopters_max);
        if (rec_with_sum)
            snprintf(goal, sizeof goal, "; beside it an exact SUM/WAITFORALL stream, %d waves "
                     "in flight: %zu waves, %zu short (target 0)", SUM_WINDOW, r->sum_waves,
                     r->sum_short);
        else if (f == 128)
            snprintf(goal, sizeof goal, "; target overall <= 20 ms at F=128: %s",
                     r->overall <= 20 ? "met" : "MISSED");
        else
            goal[0] = '\0';
        bench_row("ft", metric, "%.2f", r->overall, "ms",
                  "overall: kill -9 to the FE's last ADOPTED event of the %u orphans, median of "
                  "%d; orphan recovery max %.2f ms, mean %.3f ms; parts (mean, us): new_parent "
                  "%.0f, connect %.0f, compensate %.0f, cleanup %.0f; FAILED event after %.2f ms, "
                  "first ADOPTED after %.2f ms; %s adopters%s; union/don't-wait stream, %u+%d BEs at %d Hz%s; seed 003: "
                  "under 80 ms at 128",
                  f, reps, r->max, r->mean, r->part[0], r->part[1], r->part[2], r->part[3],
                  r->failed, r->first, adopters, r->by_fe ? " (the FE too)" : "", f,
                  REC_ADOPTERS * REC_THEIR_BES, 1000 / REC_TICK_MS, goal);
    }
}

/* ----------------------------- (b) streaming union, fault tolerance on/off */

#define TP_PACKETS 2500         /* per back-end and round */
#define TP_BLOCKS 16            /* fresh pairs of trees */
#define TP_PAIRS 4              /* pairs of rounds per block, after a warm-up round each */
#define TP_ROUNDS (TP_BLOCKS * TP_PAIRS)

/* A tree of (b): 8x8, with or without fault tolerance, its union stream. */
struct tp_tree {
    tbon_net_t *net;
    struct uwatch u;
    pthread_t th;
    size_t n, size;
};

static void tp_start(struct tp_tree *t, const char *topo, size_t n, size_t size, int no_ft)
{
    t->n = n;
    t->size = size;
    t->net = start(topo, n, no_ft);
    union_stream(t->net, &t->u, n, size, &t->th);
    union_wave(&t->u, 1, 30);
}

/* One round: every back-end sends TP_PACKETS packets and its mark; the FE
 * waits for every mark. Returns the values sent per second, from the request
 * to the last mark's arrival. */
static double tp_round_n(struct tp_tree *t, uint32_t round, uint32_t packets,
                         double *cpu_per_value);

static double tp_round(struct tp_tree *t, uint32_t round, double *cpu_per_value)
{
    return tp_round_n(t, round, TP_PACKETS, cpu_per_value);
}

static double tp_round_n(struct tp_tree *t, uint32_t round, uint32_t packets,
                         double *cpu_per_value)
{
    struct uwatch *u = &t->u;
    pthread_mutex_lock(&fe.mu);
    u->round = round;
    u->nmarks = 0;
    u->mark_total = 0;
    memset(u->marked, 0, t->size);
    pthread_mutex_unlock(&fe.mu);
    double t0 = bench_now(), dl = t0 + 30, b0 = busy_ticks();
    request(u->s, OP_STREAM, round, packets);
    pthread_mutex_lock(&fe.mu);
    while (u->nmarks < t->n && !u->error[0] && bench_now() < dl)
        fe_wait(dl);
    size_t marks = u->nmarks;
    uint64_t total = u->mark_total;
    double t1 = u->last_mark;
    pthread_mutex_unlock(&fe.mu);
    *cpu_per_value = total ? (busy_ticks() - b0) * 1e9 / (double)sysconf(_SC_CLK_TCK) /
                             (double)total : 0;
    if (u->error[0])
        ft_die("%s", u->error);
    if (marks < t->n) {
        char late[160] = "";
        size_t k = 0;
        for (size_t r = 1; r < t->size && k + 12 < sizeof late; r++)
            if (u->sent[r] && !u->marked[r])
                k += (size_t)snprintf(late + k, sizeof late - k, " %zu", r);
        ft_die("streaming round %u: %zu of %zu back-ends finished within 30 s (not:%s)", round,
               marks, t->n, late);
    }
    return (double)total / (t1 - t0);
}

/* Check that the FE got the union of everything sent, then tear down. */
static void tp_stop(struct tp_tree *t)
{
    struct uwatch *u = &t->u;
    union_stream_end(u, t->th);     /* no more results: read without the lock */
    for (size_t r = 0; r < t->size; r++) {
        uint64_t want = u->sent[r] < STREAM_POOL ? u->sent[r] : STREAM_POOL;
        if (u->distinct[r] != want)
            ft_die("streaming: rank %zu sent %" PRIu64 " values (%" PRIu64 " distinct), the "
                   "FE got %u of them", r, u->sent[r], want, u->distinct[r]);
    }
    union_stream_free(u);
    stop(t->net);
}

struct tp_result {
    double on, off;             /* medians of the rounds, values/s */
    double con, coff, cmean, cci; /* CPU ns per value (machine-wide): means, and the
                                   * per-pair cost (con - coff) / coff in %, 95% half-width */
    double mean, ci;            /* per-pair cost (off - on) / off in %: mean, 95% half-width */
    double pmed, lo, hi;        /* median and range of the per-pair costs */
    double aa_mean, aa_ci;      /* the same of an A/A run (both without), if one was made */
    double aa_cmean, aa_cci;
    int blocks;
};

/* Student's t for a two-sided 95% interval with df degrees of freedom. */
static double t95(int df)
{
    static const double t[] = { 12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23 };
    return df < 1 ? 0 : df <= 10 ? t[df - 1] : df <= 30 ? 2.04 : df <= 60 ? 2.00 : 1.98;
}

/* Mean of v[0..n) and the half-width of its 95% interval. */
static void mean_ci(const double *v, int n, double *mean, double *ci)
{
    double sum = 0, ss = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    *mean = n ? sum / n : 0;
    for (int i = 0; i < n; i++)
        ss += (v[i] - *mean) * (v[i] - *mean);
    *ci = n > 1 ? t95(n - 1) * sqrt(ss / (n - 1) / n) : 0;
}

/* Pairs of rounds of two trees, one with fault tolerance (no_ft_a = 0) and
 * one without, or both without (no_ft_a = 1: the A/A check of the method).
 * Round times on this machine vary by +-20% from one round to the next, and
 * by a few percent from one pair of trees to another (where their processes
 * land), so the trees are started afresh in blocks, in alternating order,
 * and within a block the rounds alternate a, b, b, a, ...; the cost is the
 * mean of the per-pair differences, with its 95% interval. */
/* The 8x8 topology of (b) written as name; its back-ends and size. */
static const char *tp_topology(const char *name, size_t *n, size_t *size)
{
    const uint32_t fan[] = { 8, 8 };
    const char *hosts[] = { "localhost" };
    tbon_error_t err = { 0 };
    tb_topology_t *t = tb_topology_gen_shape(fan, 2, hosts, 1, &err);
    if (!t)
        ft_die("8x8: %s", err.msg);
    *n = tb_topology_num_leaves(t);
    *size = tb_topology_size(t);
    return write_topology(t, name);
}

static void tp_run(int blocks, int no_ft_a, struct tp_result *out)
{
    size_t n, size;
    const char *topo = tp_topology("8x8", &n, &size);
    double va[TP_ROUNDS], vb[TP_ROUNDS], d[TP_ROUNDS], ca[TP_ROUNDS], cb[TP_ROUNDS],
           cd[TP_ROUNDS], dummy;
    int np = 0;
    for (int bl = 0; bl < blocks; bl++) {
        struct tp_tree a, b;
        if (bl % 2 == 0) {
            tp_start(&a, topo, n, size, no_ft_a);
            tp_start(&b, topo, n, size, 1);
        } else {
            tp_start(&b, topo, n, size, 1);
            tp_start(&a, topo, n, size, no_ft_a);
        }
        tb_wd_arm("throughput rounds", 60 + TP_PAIRS * 3);
        tp_round(&a, 1, &dummy);
        tp_round(&b, 1, &dummy);
        for (int r = 0; r < TP_PAIRS && np < TP_ROUNDS; r++, np++) {
            int a_first = (r + bl) % 2 == 0;
            double cx, cy;
            double x = tp_round(a_first ? &a : &b, (uint32_t)r + 2, &cx);
            double y = tp_round(a_first ? &b : &a, (uint32_t)r + 2, &cy);
            va[np] = a_first ? x : y;
            vb[np] = a_first ? y : x;
            ca[np] = a_first ? cx : cy;
            cb[np] = a_first ? cy : cx;
            d[np] = (vb[np] - va[np]) / vb[np] * 100;
            cd[np] = (ca[np] - cb[np]) / cb[np] * 100;
        }
        tp_stop(&a);
        tp_stop(&b);
    }
    out->lo = out->hi = d[0];
    for (int r = 0; r < np; r++) {
        out->lo = d[r] < out->lo ? d[r] : out->lo;
        out->hi = d[r] > out->hi ? d[r] : out->hi;
    }
    mean_ci(d, np, &out->mean, &out->ci);
    mean_ci(cd, np, &out->cmean, &out->cci);
    double ci;
    mean_ci(ca, np, &out->con, &ci);
    mean_ci(cb, np, &out->coff, &ci);
    out->pmed = bench_median(d, np);
    out->on = bench_median(va, np);
    out->off = bench_median(vb, np);
    out->blocks = blocks;
    fprintf(stderr, "%s: streaming union 8x8%s: %.0f vs %.0f values/s; per pair %+.1f%% +- %.1f "
            "(median %+.1f, %+.1f to %+.1f); CPU %.0f vs %.0f ns/value, %+.1f%% +- %.1f\n", PROG,
            no_ft_a ? " (A/A)" : "", out->on, out->off, out->mean, out->ci, out->pmed, out->lo,
            out->hi, out->con, out->coff, out->cmean, out->cci);
}

static void tp_rows(const struct tp_result *r)
{
    int rounds = r->blocks * TP_PAIRS;
    bench_row("ft", "streaming union 8x8, fault tolerance on", "%.0f", r->on, "values/s",
              "64 BEs each send %d %%auld packets of %d values (cycling through %d of their "
              "own) as fast as back-pressure lets them, then a mark; values sent / time from "
              "the request to the last mark at the FE; the FE checks it got exactly the union; "
              "median of %d rounds: %d blocks of a fresh pair of trees (on and off, started in "
              "alternating order), %d pairs of rounds each, alternating", TP_PACKETS,
              STREAM_VALS, STREAM_POOL, rounds, r->blocks, TP_PAIRS);
    bench_row("ft", "streaming union 8x8, fault tolerance off", "%.0f", r->off, "values/s",
              "the same with tbon_fe_options_t.no_fault_tolerance = 1; median of %d rounds",
              rounds);
    bench_row("ft", "streaming union 8x8, cost of fault tolerance", "%+.1f", r->mean, "%",
              "mean over the %d pairs of rounds of (off - on) / off, 95%% interval +-%.1f; "
              "median pair %+.1f%%, from %+.1f%% to %+.1f%% (the machine's noise); the same "
              "method with both trees without fault tolerance (A/A): %+.1f%% +-%.1f; target "
              "within 3%%: %s", rounds, r->ci, r->pmed, r->lo, r->hi, r->aa_mean, r->aa_ci,
              fabs(r->mean) <= 3 ? (fabs(r->mean) + r->ci <= 3 ? "met" :
                                    "met by the mean, not by the whole interval") : "MISSED");
    bench_row("ft", "streaming union 8x8, CPU per value, fault tolerance on", "%.0f", r->con,
              "ns", "the machine's busy time (/proc/stat) during a round / values sent; mean of "
              "the %d rounds; off: %.0f ns; cost of fault tolerance (on - off) / off, mean of the "
              "pairs: %+.1f%% +-%.1f (95%%); A/A: %+.1f%% +-%.1f", rounds, r->coff, r->cmean,
              r->cci, r->aa_cmean, r->aa_cci);
}

/* ----------------------- (b') streaming union under link faults (net/link.h) */

/* The link layer's work under faults: the streaming union of (b), longer
 * rounds, on a tree whose processes run the fault shim (tests/faultshim/)
 * with one bit flipped per 10,000 frames written and, over the tree, about
 * one connection reset per second (each of the 72 processes resets one of
 * its data links at random, at a rate of one per 72 s), beside the same tree without the shim;
 * both with fault tolerance. Nothing may be evicted: a link fault is no
 * failure. */
#define LK_PACKETS 20000        /* per back-end and round: ~2 s at 5 M values/s */
#define LK_BLOCKS 4
#define LK_PAIRS 2
#define LK_ROUNDS (LK_BLOCKS * LK_PAIRS)

struct lk_result {
    double faulty, clean, ratio, rlo, rhi;   /* values/s (medians); faulty / clean */
    size_t evicted, suspected, flips, resets;
    double seconds;             /* of faulty rounds */
};

/* The events so far: failures (evictions) counted, and suspicions (a
 * silent node, which heartbeats on the event connections, untouched by the
 * shim, report only when a process was starved). */
static size_t lk_evictions(tbon_net_t *net, size_t *suspected)
{
    size_t n = 0;
    tbon_event_t ev;
    while (tbon_net_next_event(net, &ev, 0) == 0) {
        n += ev.type == TBON_EV_NODE_FAILED;
        *suspected += ev.type == TBON_EV_NODE_SUSPECT;
    }
    return n;
}

static void lk_run(struct lk_result *out)
{
    size_t n, size;
    const char *topo = tp_topology("8x8-link", &n, &size);
    char shim[PATH_MAX], log[128], armf[128], reset_ms[32];
    snprintf(shim, sizeof shim, "%s", self_exe);
    char *slash = strrchr(shim, '/');
    if (slash)
        *slash = '\0';
    slash = strrchr(shim, '/');
    if (slash)
        *slash = '\0';
    strncat(shim, "/tests/lib/libtbon_faultshim.so", sizeof shim - strlen(shim) - 1);
    if (access(shim, R_OK) != 0)
        ft_die("%s: not built (make tests)", shim);
    snprintf(log, sizeof log, "%s/faults.log", tmpdir);
    snprintf(armf, sizeof armf, "%s/faults.arm", tmpdir);
    snprintf(reset_ms, sizeof reset_ms, "%zu", (size - 1) * 1000);
    double vf[LK_ROUNDS], vc[LK_ROUNDS], ratio[LK_ROUNDS], dummy;
    int np = 0;
    memset(out, 0, sizeof *out);
    for (int bl = 0; bl < LK_BLOCKS; bl++) {
        struct tp_tree a, b;
        for (int k = 0; k < 2; k++) {
            if ((k == 0) == (bl % 2 == 0)) {
                setenv("LD_PRELOAD", shim, 1);
                setenv("TBON_FAULT_FLIP", "0.0001", 1);
                setenv("TBON_FAULT_RESET_MS", reset_ms, 1);
                setenv("TBON_FAULT_ARM", armf, 1);
                setenv("TBON_FAULT_LOG", log, 1);
                char seed[32];
                snprintf(seed, sizeof seed, "%d", bl + 1);
                setenv("TBON_FAULT_SEED", seed, 1);
                tp_start(&a, topo, n, size, 0);
                unsetenv("LD_PRELOAD");
            } else {
                tp_start(&b, topo, n, size, 0);
            }
        }
        tb_wd_arm("link rounds", 120 + LK_PAIRS * 20);
        tp_round(&a, 1, &dummy);
        tp_round(&b, 1, &dummy);
        out->evicted += lk_evictions(a.net, &out->suspected);
        FILE *f = fopen(armf, "w");
        if (!f)
            ft_die("cannot create %s", armf);
        fclose(f);
        for (int r = 0; r < LK_PAIRS; r++, np++) {
            int a_first = (r + bl) % 2 == 0;
            double t0 = bench_now();
            double x = tp_round_n(a_first ? &a : &b, (uint32_t)r + 2, LK_PACKETS, &dummy);
            double t1 = bench_now();
            double y = tp_round_n(a_first ? &b : &a, (uint32_t)r + 2, LK_PACKETS, &dummy);
            out->seconds += a_first ? t1 - t0 : bench_now() - t1;
            vf[np] = a_first ? x : y;
            vc[np] = a_first ? y : x;
            ratio[np] = vf[np] / vc[np];
        }
        unlink(armf);
        out->evicted += lk_evictions(a.net, &out->suspected);
        out->evicted += lk_evictions(b.net, &out->suspected);
        tp_stop(&a);        /* checks the FE got exactly the union */
        tp_stop(&b);
    }
    out->flips = tb_fault_count(log, "flip");
    out->resets = tb_fault_count(log, "reset");
    out->faulty = bench_median(vf, np);
    out->clean = bench_median(vc, np);
    out->ratio = bench_median(ratio, np);
    out->rlo = out->rhi = ratio[0];
    for (int r = 0; r < np; r++) {
        out->rlo = ratio[r] < out->rlo ? ratio[r] : out->rlo;
        out->rhi = ratio[r] > out->rhi ? ratio[r] : out->rhi;
    }
    fprintf(stderr, "%s: streaming union 8x8 under link faults: %.0f vs %.0f values/s (x%.3f, "
            "%.3f-%.3f); %zu flips, %zu resets in %.1f s of faulty rounds; %zu evicted, %zu "
            "suspected\n", PROG, out->faulty, out->clean, out->ratio, out->rlo, out->rhi,
            out->flips, out->resets, out->seconds, out->evicted, out->suspected);
    if (out->evicted)
        ft_die("%zu nodes evicted under link faults (a link fault is no failure)", out->evicted);
}

static void lk_rows(const struct lk_result *r)
{
    bench_row("link", "streaming union 8x8 under link faults", "%.0f", r->faulty, "values/s",
              "(b) with %d packets per back-end and round, every tree process but the FE "
              "under tests/faultshim: one bit flipped per 10,000 frames written, about one "
              "data connection reset per second over the tree (%zu flips, %zu resets in %.0f s "
              "of these rounds); median of %d rounds (%d blocks of a fresh pair of trees, %d "
              "pairs of rounds each, alternating); the FE checks it got exactly the union",
              LK_PACKETS, r->flips, r->resets, r->seconds, LK_ROUNDS, LK_BLOCKS, LK_PAIRS);
    bench_row("link", "streaming union 8x8 without faults, beside it", "%.0f", r->clean,
              "values/s", "the same trees without the shim; median of %d rounds", LK_ROUNDS);
    bench_row("link", "throughput under link faults / without", "%.3f", r->ratio, "",
              "median of the per-pair ratios, from %.3f to %.3f", r->rlo, r->rhi);
    bench_row("link", "nodes evicted under link faults", "%.0f", (double)r->evicted, "",
              "TBON_EV_NODE_FAILED at the FE over all the rounds (must be 0)");
    bench_row("link", "nodes suspected under link faults", "%.0f", (double)r->suspected, "",
              "TBON_EV_NODE_SUSPECT at the FE, both trees: heartbeats go on the event "
              "connections, which the shim leaves alone, so only a starved process is "
              "suspected (a load figure, not a check)");
}

/* ------------------------------------- (c) perturbation on 32x32 (Figure 7) */

#define PT_BIN 0.1              /* s */
#define PT_SMOOTH 5             /* bins of the moving mean (the waves come in bursts) */
#define PT_WINDOW 64            /* waves in flight */
#define PT_VICTIMS 4            /* commnodes killed per round (--perturbation) */
#define PT_MAX_ROUNDS 8
#define PT_STALL_MS 5000

static struct {
    double t0, period;
    int rounds, victims;
    size_t nbins, ncomm;
    uint32_t *waves, *shortw, *failed, *adopted;  /* per bin */
    uint8_t *killed;            /* per commnode rank */
    pid_t *pids;
    double kill_t[PT_MAX_ROUNDS], last_adopted[PT_MAX_ROUNDS];
    tbon_rank_t victim[PT_MAX_ROUNDS][PT_VICTIMS];
    int kills_done;
    size_t nfailed, nadopted;
    int stop;
    tbon_net_t *net;
} pt;

static size_t pt_bin(double t)
{
    double b = (t - pt.t0) / PT_BIN;
    return b < 0 ? 0 : (size_t)b < pt.nbins ? (size_t)b : pt.nbins - 1;
}

static void *pt_events_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&fe.mu);
        int stop = pt.stop;
        pthread_mutex_unlock(&fe.mu);
        if (stop)
            break;
        tbon_event_t ev;
        int rc = tbon_net_next_event(pt.net, &ev, 200);
        if (rc == TBON_ETIMEOUT)
            continue;
        if (rc != 0)
            break;
        size_t b = pt_bin(bench_now());
        pthread_mutex_lock(&fe.mu);
        if (ev.type == TBON_EV_NODE_FAILED) {
            pt.failed[b]++;
            pt.nfailed++;
        } else if (ev.type == TBON_EV_NODE_ADOPTED) {
            pt.adopted[b]++;
            pt.nadopted++;
            if (pt.kills_done > 0)
                pt.last_adopted[pt.kills_done - 1] = bench_now();
        }
        pthread_cond_broadcast(&fe.cv);
        pthread_mutex_unlock(&fe.mu);
    }
    return NULL;
}

/* Every period: pt.victims random live commnodes (depth 1), back to back. */
static void *pt_killer_main(void *arg)
{
    (void)arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    for (int k = 0; k < pt.rounds; k++) {
        double at = pt.t0 + pt.period * (k + 1);
        struct timespec ts = abs_ts(at);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        tbon_rank_t v[PT_VICTIMS] = { 0 };
        for (int i = 0; i < pt.victims; i++) {
            tbon_rank_t r;
            do {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                r = 1 + (tbon_rank_t)((rng >> 33) % pt.ncomm);
            } while (pt.killed[r]);
            pt.killed[r] = 1;
            v[i] = r;
        }
        double t = bench_now();
        for (int i = 0; i < pt.victims; i++)
            kill(pt.pids[v[i]], SIGKILL);
        pthread_mutex_lock(&fe.mu);
        pt.kill_t[k] = t;
        memcpy(pt.victim[k], v, sizeof v);
        pt.kills_done = k + 1;
        pthread_mutex_unlock(&fe.mu);
    }
    return NULL;
}

/* Mean rate (waves/s) of the bins [a, b). */
static double pt_rate(size_t a, size_t b)
{
    if (b > pt.nbins)
        b = pt.nbins;
    if (a >= b)
        return 0;
    double s = 0;
    for (size_t i = a; i < b; i++)
        s += pt.waves[i];
    return s / (double)(b - a) / PT_BIN;
}

static void pt_write_csv(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        ft_die("--csv %s: %s", path, strerror(errno));
    fprintf(f, "time_s,waves_per_s,events\n");
    for (size_t b = 0; b < pt.nbins; b++) {
        char ev[160] = "";
        size_t o = 0;
        for (int k = 0; k < pt.kills_done; k++)
            if (pt_bin(pt.kill_t[k]) == b) {
                o += (size_t)snprintf(ev + o, sizeof ev - o, "kill");
                for (int i = 0; i < PT_VICTIMS; i++)
                    o += (size_t)snprintf(ev + o, sizeof ev - o, " %u", pt.victim[k][i]);
            }
        if (pt.failed[b])
            o += (size_t)snprintf(ev + o, sizeof ev - o, "%sfailed %u", o ? "; " : "",
                                  pt.failed[b]);
        if (pt.adopted[b])
            o += (size_t)snprintf(ev + o, sizeof ev - o, "%sadopted %u", o ? "; " : "",
                                  pt.adopted[b]);
        if (pt.shortw[b])
            snprintf(ev + o, sizeof ev - o, "%sshort waves %u", o ? "; " : "", pt.shortw[b]);
        fprintf(f, "%.1f,%.0f,%s\n", (double)b * PT_BIN, pt.waves[b] / PT_BIN, ev);
    }
    if (fclose(f) != 0)
        ft_die("--csv %s: %s", path, strerror(errno));
}

/* A round step for an axis up to max: 1, 2 or 5 times a power of ten. */
static double nice_step(double max, int ticks)
{
    double raw = max / ticks, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* The plot of Figure 7: waves/s per bin, a red marker at each kill. */
static void pt_write_svg(const char *path, double before)
{
    FILE *f = fopen(path, "w");
    if (!f)
        ft_die("--svg %s: %s", path, strerror(errno));
    const double W = 900, H = 380, L = 70, R = 20, T = 40, B = 50;
    double dur = (double)pt.nbins * PT_BIN, ymax = 0;
    for (size_t b = 0; b < pt.nbins; b++)
        ymax = pt.waves[b] / PT_BIN > ymax ? pt.waves[b] / PT_BIN : ymax;
    double ystep = nice_step(ymax > 0 ? ymax : 1, 5);
    ymax = ceil(ymax / ystep + 0.2) * ystep;
    double xstep = nice_step(dur, 10);
#define X(t) (L + (t) / dur * (W - L - R))
#define Y(v) (H - B - (v) / ymax * (H - T - B))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">tbon 32x32 "
            "(1,024 back-ends): SUM waves/s in %.0f ms bins, %d commnodes killed every %g s"
            "</text>\n", W / 2, PT_BIN * 1e3, PT_VICTIMS, pt.period);
    for (double y = 0; y <= ymax + 1e-9; y += ystep) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                L, Y(y), W - R, Y(y));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n", L - 6,
                Y(y) + 4, y);
    }
    for (double x = 0; x <= dur + 1e-9; x += xstep) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
                X(x), H - B, X(x), H - B + 5);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", X(x),
                H - B + 18, x);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
            L, H - B, W - R, H - B);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
            L, T, L, H - B);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time (s)</text>\n",
            (L + W - R) / 2, H - 12);
    fprintf(f, "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
            "%.1f)\">waves/s</text>\n", (T + H - B) / 2, (T + H - B) / 2);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" "
            "stroke-dasharray=\"2,3\"/>\n", L, Y(before), W - R, Y(before));
    for (int k = 0; k < pt.kills_done; k++) {
        double x = X(pt.kill_t[k] - pt.t0);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"red\" "
                "stroke-dasharray=\"5,4\"/>\n", x, T, x, H - B);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"red\" text-anchor=\"middle\">kill %d"
                "</text>\n", x, T - 4, PT_VICTIMS);
    }
    fprintf(f, "<polyline fill=\"none\" stroke=\"#9bb8e6\" stroke-width=\"1\" points=\"");
    for (size_t b = 0; b < pt.nbins; b++)
        fprintf(f, "%s%.1f,%.1f", b ? " " : "", X(((double)b + 0.5) * PT_BIN),
                Y(pt.waves[b] / PT_BIN));
    fprintf(f, "\"/>\n<polyline fill=\"none\" stroke=\"#1f4fa0\" stroke-width=\"2\" "
            "points=\"");
    for (size_t b = 0; b + PT_SMOOTH <= pt.nbins; b++)
        fprintf(f, "%s%.1f,%.1f", b ? " " : "", X(((double)b + PT_SMOOTH / 2.0) * PT_BIN),
                Y(pt_rate(b, b + PT_SMOOTH)));
    fprintf(f, "\"/>\n");
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#1f4fa0\">thin: "
            "%.0f ms bins; thick: mean of %d bins; dotted: before the first kill</text>\n",
            W - R - 4, T + 14, PT_BIN * 1e3, PT_SMOOTH);
    fprintf(f, "</svg>\n");
#undef X
#undef Y
    if (fclose(f) != 0)
        ft_die("--svg %s: %s", path, strerror(errno));
}

/* The 32x32 tree of a Figure 7 run started, with pt set up for `rounds`
 * kills of `victims` commnodes every `period` s; its back-ends in *n. */
static tbon_net_t *pt_tree(double period, int rounds, int victims, size_t *n)
{
    const uint32_t fan[] = { 32, 32 };
    const char *hosts[] = { "localhost" };
    tbon_error_t err = { 0 };
    tb_topology_t *t = tb_topology_gen_shape(fan, 2, hosts, 1, &err);
    if (!t)
        ft_die("32x32: %s", err.msg);
    size_t size = tb_topology_size(t);
    *n = tb_topology_num_leaves(t);
    const char *topo = write_topology(t, "32x32");
    double dur = period * (rounds + 1);
    memset(&pt, 0, sizeof pt);
    pt.period = period;
    pt.rounds = rounds;
    pt.victims = victims;
    pt.ncomm = 32;
    pt.nbins = (size_t)(dur / PT_BIN + 0.5);
    pt.waves = calloc(pt.nbins, sizeof *pt.waves);
    pt.shortw = calloc(pt.nbins, sizeof *pt.shortw);
    pt.failed = calloc(pt.nbins, sizeof *pt.failed);
    pt.adopted = calloc(pt.nbins, sizeof *pt.adopted);
    pt.killed = calloc(size, 1);
    pt.pids = calloc(size, sizeof *pt.pids);
    if (!pt.waves || !pt.shortw || !pt.failed || !pt.adopted || !pt.killed || !pt.pids)
        ft_die("calloc");
    tbon_net_t *net = start(topo, *n, 0);
    pt.net = net;
    scan_session(tree_kv(net), 0, pt.pids, size);
    for (tbon_rank_t r = 1; r <= pt.ncomm; r++)
        if (!pt.pids[r])
            ft_die("no process for commnode %u", r);
    return net;
}

static void pt_free(void)
{
    free(pt.waves);
    free(pt.shortw);
    free(pt.failed);
    free(pt.adopted);
    free(pt.killed);
    free(pt.pids);
    memset(&pt, 0, sizeof pt);
}

static void pt_run(double period, int rounds, const char *csv, const char *svg)
{
    size_t n;
    tbon_net_t *net = pt_tree(period, rounds, PT_VICTIMS, &n);
    double dur = period * (rounds + 1);
    size_t maxw = (size_t)(dur * 20000) + 1024;     /* far above any rate here */
    uint8_t *out = calloc(maxw, 1);                 /* per wave: in flight */
    if (!out)
        ft_die("calloc");
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_SUM,
                                          TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    if (!s)
        ft_die("sum stream: %s", tbon_net_error(net));
    tb_wd_arm("perturbation run", dur + 120);
    uint32_t w = 1;
    int rc;
    /* Warm-up: complete, exact waves (and the port table everywhere). */
    for (int i = 0; i < 20; i++, w++) {
        tbon_packet_t *p = NULL;
        int64_t sw = 0, cnt = 0;
        request(s, OP_SUM, w, 0);
        if ((rc = tbon_stream_recv(s, &p, 30000)) != 0 ||
            tbon_packet_unpack(p, "%ld %ld", &sw, &cnt) != 0 || cnt != (int64_t)n ||
            sw != (int64_t)n * w)
            ft_die("warm-up wave %u: %s", w, rc ? tbon_strerror(rc) : "wrong sum");
        tbon_packet_unref(p);
    }

    pthread_t et, kt;
    pt.t0 = bench_now();
    double end = pt.t0 + dur;
    if (pthread_create(&et, NULL, pt_events_main, NULL) != 0 ||
        pthread_create(&kt, NULL, pt_killer_main, NULL) != 0)
        ft_die("pthread_create");
    size_t inflight = 0, nshort = 0, total = 0;
    uint32_t first = w;
    for (;;) {
        while (inflight < PT_WINDOW && bench_now() < end) {
            if (w >= maxw)
                ft_die("more than %zu waves", maxw);
            if ((rc = tbon_stream_send(s, TAG, "%ud %ud %ud", OP_SUM, w, 0)) != 0)
                ft_die("sending wave %u: %s", w, tbon_strerror(rc));
            out[w++] = 1;
            inflight++;
        }
        if (inflight == 0)
            break;
        tbon_packet_t *p = NULL;
        if ((rc = tbon_stream_recv(s, &p, PT_STALL_MS)) != 0)
            ft_die("perturbation: no result for %d ms with %zu waves in flight (%s) at t=%.1f s",
                   PT_STALL_MS, inflight, tbon_strerror(rc), bench_now() - pt.t0);
        int64_t sw = 0, cnt = 0;
        if (tbon_packet_unpack(p, "%ld %ld", &sw, &cnt) != 0)
            ft_die("perturbation: a result of format \"%s\"", tbon_packet_format(p));
        /* the result's own word on who is in it (docs/api.md, "Coverage") */
        if (tbon_packet_covered(p, NULL, 0) != (size_t)cnt)
            ft_die("perturbation: a result of %" PRId64 " back-ends says it holds %zu", cnt,
                   tbon_packet_covered(p, NULL, 0));
        tbon_packet_unref(p);
        /* sum of w over cnt back-ends: cnt * w, with cnt <= n; fewer than
         * n when a wave in flight lost a dead commnode's subtree. */
        int64_t wv = cnt > 0 ? sw / cnt : 0;
        if (cnt < 1 || cnt > (int64_t)n || sw != wv * cnt || wv < first || wv >= w || !out[wv])
            ft_die("perturbation: result (%" PRId64 ", %" PRId64 ") is no wave in flight "
                   "(counted twice, or never sent)", sw, cnt);
        out[wv] = 0;
        inflight--;
        total++;
        size_t b = pt_bin(bench_now());
        pt.waves[b]++;
        if (cnt < (int64_t)n) {
            pt.shortw[b]++;
            nshort++;
        }
    }
    pthread_join(kt, NULL);
    /* The last round's adoptions must be in before we stop watching. */
    size_t want = (size_t)(rounds * PT_VICTIMS) * (n / pt.ncomm);
    double dl = bench_now() + 10;
    pthread_mutex_lock(&fe.mu);
    while ((pt.nadopted < want || pt.nfailed < (size_t)(PT_VICTIMS * rounds)) &&
           bench_now() < dl)
        fe_wait(dl);
    pt.stop = 1;
    size_t nfailed = pt.nfailed, nadopted = pt.nadopted;
    pthread_mutex_unlock(&fe.mu);
    pthread_join(et, NULL);
    if (nfailed < (size_t)(PT_VICTIMS * rounds) || nadopted < want)
        ft_die("perturbation: %zu FAILED events for %d kills, %zu ADOPTED for %zu orphans",
               nfailed, PT_VICTIMS * rounds, nadopted, want);
    /* A final wave must be complete and exact: every orphan is back. */
    {
        tbon_packet_t *p = NULL;
        int64_t sw = 0, cnt = 0;
        request(s, OP_SUM, w, 0);
        if ((rc = tbon_stream_recv(s, &p, 30000)) != 0 ||
            tbon_packet_unpack(p, "%ld %ld", &sw, &cnt) != 0 || cnt != (int64_t)n ||
            sw != (int64_t)n * w)
            ft_die("final wave %u: %s (%" PRId64 " of %zu back-ends)", w,
                   rc ? tbon_strerror(rc) : "incomplete", cnt, n);
        tbon_packet_unref(p);
    }
    stop(net);
    free(out);

    /* Before: from 1 s to the first kill. During: the first 0.5 s after each
     * kill. Recovery: from the kill to the first bin from which the mean of
     * three bins is within 10% of the 2 s before that kill. */
    size_t k0 = pt_bin(pt.kill_t[0]);
    double before = pt_rate((size_t)(1.0 / PT_BIN), k0);
    double during[PT_MAX_ROUNDS], rec[PT_MAX_ROUNDS], lowest[PT_MAX_ROUNDS];
    int never = 0;
    for (int k = 0; k < rounds; k++) {
        size_t kb = pt_bin(pt.kill_t[k]), nb = k + 1 < rounds ? pt_bin(pt.kill_t[k + 1]) : pt.nbins;
        size_t span = (size_t)(0.5 / PT_BIN);
        during[k] = pt_rate(kb, kb + span);
        lowest[k] = 1e300;
        for (size_t b = kb; b < kb + span && b < pt.nbins; b++)
            lowest[k] = pt.waves[b] / PT_BIN < lowest[k] ? pt.waves[b] / PT_BIN : lowest[k];
        double base = pt_rate(kb >= 20 ? kb - 20 : 0, kb);
        rec[k] = -1;
        for (size_t b = kb; b + PT_SMOOTH <= nb; b++)
            if (pt_rate(b, b + PT_SMOOTH) >= 0.9 * base) {
                double dt = pt.t0 + (double)b * PT_BIN - pt.kill_t[k];
                rec[k] = dt > 0 ? dt : 0;
                break;
            }
        never += rec[k] < 0;
    }
    double after = pt_rate(pt_bin(pt.kill_t[rounds - 1]) + (size_t)(1.0 / PT_BIN), pt.nbins);
    if (csv)
        pt_write_csv(csv);
    if (svg)
        pt_write_svg(svg, before);
    remove_tmpdir();

    char dl_s[160] = "", low_s[160] = "", rec_s[400] = "", ad_s[160] = "";
    size_t o1 = 0, o2 = 0, o3 = 0, o4 = 0;
    for (int k = 0; k < rounds; k++) {
        o4 += (size_t)snprintf(ad_s + o4, sizeof ad_s - o4, "%s%.0f", k ? ", " : "",
                               (pt.last_adopted[k] - pt.kill_t[k]) * 1e3);
        o1 += (size_t)snprintf(dl_s + o1, sizeof dl_s - o1, "%s%.0f", k ? ", " : "", during[k]);
        o2 += (size_t)snprintf(low_s + o2, sizeof low_s - o2, "%s%.0f", k ? ", " : "", lowest[k]);
        if (rec[k] < 0)
            o3 += (size_t)snprintf(rec_s + o3, sizeof rec_s - o3, "%snot before the next kill",
                                   k ? ", " : "");
        else
            o3 += (size_t)snprintf(rec_s + o3, sizeof rec_s - o3, "%s%.0f", k ? ", " : "",
                                   rec[k] * 1e3);
    }
    double d_sorted[PT_MAX_ROUNDS], r_sorted[PT_MAX_ROUNDS];
    memcpy(d_sorted, during, sizeof during);
    for (int k = 0; k < rounds; k++)
        r_sorted[k] = rec[k] < 0 ? 1e9 : rec[k] * 1e3;
    char shape[256];
    snprintf(shape, sizeof shape, "32x32 (%zu BEs), SUM/WAITFORALL waves, %d in flight, "
             "%.0f ms bins; %d commnodes killed at %g s, every %g s, %d times%s", n, PT_WINDOW,
             PT_BIN * 1e3, PT_VICTIMS, period, period, rounds,
             period < 10 || rounds < 4 ? " (shortened: seed 003 kills every 30 s)" : "");
    bench_row("ft", "perturbation, before the first kill", "%.0f", before, "waves/s",
              "%s; mean of the bins from 1 s to the first kill; %zu waves in all, every one "
              "checked, its coverage too (%zu short: a subtree lost in flight, never counted "
              "twice; %s); "
              "bench/perturbation.csv, bench/perturbation.svg", shape, total, nshort,
              start_exact_off ? "exactness off: --exact-off" : "the sum stream is exact: target 0");
    bench_row("ft", "perturbation, 0.5 s after each kill", "%.0f", bench_median(d_sorted, rounds),
              "waves/s", "median over the %d kills of the mean of the 5 bins after it; per "
              "kill: %s; lowest bin: %s; %.0f%% of before", rounds, dl_s, low_s,
              bench_median(d_sorted, rounds) / before * 100);
    bench_row("ft", "perturbation, back within 10% of before", "%.0f",
              never ? NAN : bench_median(r_sorted, rounds), "ms",
              "median over the kills: kill to the first bin from which %d bins average >= 90%% "
              "of the 2 s before that kill (0: no dip the mean shows); per kill: %s; "
              "kill to the last ADOPTED event at the FE (ms): %s", PT_SMOOTH, rec_s, ad_s);
    bench_row("ft", "perturbation, after the last kill", "%.0f", after, "waves/s",
              "from 1 s after the last kill to the end; %zu of 32 commnodes left, the %zu BEs "
              "adopted by them; %.0f%% of before", pt.ncomm - (size_t)(PT_VICTIMS * rounds),
              n, after / before * 100);
    pt_free();
}

/* ------------------------- (c') Figure 7 as seed 003 ran it (VI-B, VI-D) */

#define F7_TICK_MS 100          /* 10 Hz per back-end (seed 003 VI-B) */
#define F7_LAST 10              /* throughput over the ten most recent output packets */
#define F7_TICKS_MAX 4096       /* ticks checked per back-end (150 s at 10 Hz: 1,500) */
#define F7_SPAN 5.0             /* s: the windows compared before and after each kill */

/* The FE's throughput at output packet i >= F7_LAST, packets/s: the last
 * F7_LAST packets over the time they took. */
static double f7_tput(const double *t, size_t i)
{
    double dt = t[i] - t[i - F7_LAST];
    return dt > 0 ? F7_LAST / dt : 0;
}

/* The throughputs of the packets that came in [a, b): their lowest, and
 * their median (NAN when none came). */
static void f7_window(const struct uwatch *u, double a, double b, double *lowest, double *med)
{
    double *v = malloc((u->npkt + 1) * sizeof *v);
    size_t k = 0;
    *lowest = *med = NAN;
    if (!v)
        return;
    for (size_t i = F7_LAST; i < u->npkt; i++)
        if (u->pkt_t[i] >= a && u->pkt_t[i] < b)
            v[k++] = f7_tput(u->pkt_t, i);
    if (k) {
        *med = bench_median(v, (int)k);     /* sorts v */
        *lowest = v[0];
    }
    free(v);
}

/* 32x32, a wait-for-all union over every back-end, each sending a new
 * integer at 10 Hz; every period seconds (30 as the seed ran it) `victims`
 * random commnodes are killed, four times; the FE's throughput over its ten
 * most recent output packets, and at the end every integer sent checked
 * against what the FE got. */
static void f7_run(int victims, double period, const char *csv)
{
    const int rounds = 4;
    size_t n;
    tbon_net_t *net = pt_tree(period, rounds, victims, &n);
    size_t size = n + pt.ncomm + 1;
    double dur = period * (rounds + 1);
    struct uwatch u;
    pthread_t th;
    union_stream_sync(net, &u, n, size, TBON_SYNC_WAITFORALL, F7_TICKS_MAX, &th);
    tb_wd_arm("figure 7 run", dur + 180);
    union_wave(&u, 1, 60);              /* every back-end in; the port table everywhere */
    request(u.s, OP_TICK, 0, F7_TICK_MS);

    pthread_t et, kt;
    pt.t0 = bench_now();
    if (pthread_create(&et, NULL, pt_events_main, NULL) != 0 ||
        pthread_create(&kt, NULL, pt_killer_main, NULL) != 0)
        ft_die("pthread_create");
    struct timespec ts = abs_ts(pt.t0 + dur);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
    pthread_join(kt, NULL);
    size_t want = (size_t)(rounds * victims) * (n / pt.ncomm);
    double dl = bench_now() + 10;
    pthread_mutex_lock(&fe.mu);
    while ((pt.nadopted < want || pt.nfailed < (size_t)(victims * rounds)) && bench_now() < dl)
        fe_wait(dl);
    pt.stop = 1;
    size_t nfailed = pt.nfailed, nadopted = pt.nadopted;
    u.round = 2;
    pthread_mutex_unlock(&fe.mu);
    pthread_join(et, NULL);
    if (nfailed < (size_t)(victims * rounds) || nadopted < want)
        ft_die("figure 7: %zu FAILED events for %d kills, %zu ADOPTED for %zu orphans",
               nfailed, victims * rounds, nadopted, want);
    /* Stop the ticks: each back-end says how many it sent (round 2's mark),
     * after them on the same path. */
    request(u.s, OP_TICK, 2, 0);
    dl = bench_now() + 60;
    pthread_mutex_lock(&fe.mu);
    while (u.nmarks < n && !u.error[0] && bench_now() < dl)
        fe_wait(dl);
    pthread_mutex_unlock(&fe.mu);
    union_stream_end(&u, th);
    if (u.error[0])
        ft_die("figure 7: %s", u.error);
    if (u.nmarks < n)
        ft_die("figure 7: %zu of %zu back-ends said how many values they sent", u.nmarks, n);
    uint64_t sent = 0, missing = 0, extra = 0;
    tbon_rank_t first_missing = TBON_RANK_NONE;
    for (size_t r = 0; r < size; r++) {
        if (!u.marked[r])
            continue;
        if (u.sent[r] > F7_TICKS_MAX)
            ft_die("figure 7: rank %zu sent %" PRIu64 " values, over %d", r, u.sent[r],
                   F7_TICKS_MAX);
        sent += u.sent[r];
        for (size_t q = 0; q < F7_TICKS_MAX; q++) {
            int got = u.tick_seen[r * F7_TICKS_MAX + q] != 0;
            if (q < u.sent[r] && !got) {
                missing++;
                if (first_missing == TBON_RANK_NONE)
                    first_missing = (tbon_rank_t)r;
            }
            extra += q >= u.sent[r] && got;
        }
    }
    stop(net);
    remove_tmpdir();
    if (u.npkt <= F7_LAST)
        ft_die("figure 7: %zu output packets", u.npkt);

    if (csv) {
        FILE *f = fopen(csv, "w");
        if (!f)
            ft_die("--csv %s: %s", csv, strerror(errno));
        fprintf(f, "time_s,packets_per_s_over_last_%d,event\n", F7_LAST);
        int k = 0;
        for (size_t i = F7_LAST; i < u.npkt; i++) {
            char ev[64] = "";
            if (k < pt.kills_done && pt.kill_t[k] <= u.pkt_t[i])
                snprintf(ev, sizeof ev, "kill %d commnode%s before", victims,
                         victims == 1 ? "" : "s"), k++;
            fprintf(f, "%.3f,%.2f,%s\n", u.pkt_t[i] - pt.t0, f7_tput(u.pkt_t, i), ev);
        }
        if (fclose(f) != 0)
            ft_die("--csv %s: %s", csv, strerror(errno));
    }
    double before_low, before_med, x;
    f7_window(&u, pt.t0 + 1, pt.kill_t[0], &x, &before_med);
    char pre[200] = "", post[200] = "", ad[160] = "";
    size_t o1 = 0, o2 = 0, o3 = 0;
    double worst_pre = INFINITY, worst_post = INFINITY;
    for (int k = 0; k < rounds; k++) {
        double lo_a, lo_b, m;
        f7_window(&u, pt.kill_t[k] - F7_SPAN, pt.kill_t[k], &lo_b, &m);
        f7_window(&u, pt.kill_t[k], pt.kill_t[k] + F7_SPAN, &lo_a, &m);
        worst_pre = lo_b < worst_pre ? lo_b : worst_pre;
        worst_post = lo_a < worst_post ? lo_a : worst_post;
        o1 += (size_t)snprintf(pre + o1, sizeof pre - o1, "%s%.1f", k ? ", " : "", lo_b);
        o2 += (size_t)snprintf(post + o2, sizeof post - o2, "%s%.1f", k ? ", " : "", lo_a);
        o3 += (size_t)snprintf(ad + o3, sizeof ad - o3, "%s%.0f", k ? ", " : "",
                               (pt.last_adopted[k] - pt.kill_t[k]) * 1e3);
    }
    before_low = worst_pre;
    char shape[300];
    snprintf(shape, sizeof shape, "32x32 (%zu BEs), UNION/WAITFORALL, each back-end a new "
             "integer every %d ms; %d commnode%s killed at %g, %g, %g and %g s%s", n,
             F7_TICK_MS, victims, victims == 1 ? "" : "s", period, 2 * period, 3 * period,
             4 * period, period == 30 ? " (seed 003 VI-D)" : " (shortened: the seed kills "
             "every 30 s)");
    bench_row("ft", "figure 7, union at 10 Hz: throughput before the first kill", "%.1f",
              before_med, "packets/s", "%s; the FE's throughput over its %d most recent output "
              "packets, median from 1 s to the first kill; %zu output packets in all; "
              "bench/figure7.csv", shape, F7_LAST, u.npkt);
    bench_row("ft", "figure 7, lowest in the 5 s after a kill", "%.1f", worst_post,
              "packets/s", "per kill: %s; the same in the 5 s before each kill (a dip that "
              "is no failure's): %s, lowest %.1f; kill to the last ADOPTED event (ms): %s",
              post, pre, before_low, ad);
    char who[64] = "";
    if (first_missing != TBON_RANK_NONE)
        snprintf(who, sizeof who, ", the first from rank %u", first_missing);
    bench_row("ft", "figure 7, values missing at the FE", "%.0f", (double)missing, "values",
              "of %" PRIu64 " integers the back-ends sent (each says how many at the end)%s; "
              "%" PRIu64 " came twice, %" PRIu64 " were never sent; target 0", sent, who,
              u.tick_dups, extra + u.tick_bad);
    union_stream_free(&u);
    pt_free();
}

/* ------------------------------------------------------- (d) membership */

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

/* Kill victim (pid) and time the FE's TBON_EV_NODE_FAILED for it and the
 * TBON_EV_VIEW_STABLE after it (and after every adoption it causes), ms. */
static void mb_kill(tbon_net_t *net, tbon_rank_t victim, pid_t pid, size_t orphans,
                    double *failed, double *stable)
{
    tbon_event_t ev;
    while (tbon_net_next_event(net, &ev, 0) == 0)
        ;
    size_t adopted = 0;
    double t0 = bench_now(), dl = t0 + 30;
    *failed = *stable = -1;
    kill(pid, SIGKILL);
    while (*stable < 0) {
        int ms = (int)((dl - bench_now()) * 1e3);
        if (ms <= 0 || tbon_net_next_event(net, &ev, ms) != 0)
            ft_die("no stable view within 30 s of killing rank %u", victim);
        double t = (bench_now() - t0) * 1e3;
        if (ev.type == TBON_EV_NODE_FAILED && ev.rank == victim)
            *failed = t;
        else if (ev.type == TBON_EV_NODE_FAILED)
            ft_die("rank %u reported failed, not the victim %u", ev.rank, victim);
        adopted += ev.type == TBON_EV_NODE_ADOPTED;
        if (ev.type == TBON_EV_VIEW_STABLE && *failed >= 0 && adopted >= orphans)
            *stable = t;
    }
    reap_all();
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

    start_heartbeat_ms = 0;
    tbon_net_t *net = start(topo, n, 0);
    tb_wd_arm("membership run", 240);
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_SUM,
                                          TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    if (!s)
        ft_die("membership stream: %s", tbon_net_error(net));
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
        mb_kill(net, v, pids[v], 0, &bf[i], &bs[i]);
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
        mb_kill(net, v, pids[v], nk, &cf[i], &cs[i]);
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
        start_heartbeat_ms = -1;
        net = start(topo, n, 0);
        s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_SUM,
                               TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
        if (!s)
            ft_die("membership stream: %s", tbon_net_error(net));
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
        net = start(topo, n, 0);
        start_attach_file = NULL;
        tb_wd_arm("joins", 120);
        tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_SUM,
                                              TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
        if (!s)
            ft_die("join stream: %s", tbon_net_error(net));
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
        mb_kill(net, v, pids[v], 0, &failed, &stable);
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

static void mb_rows(const struct mb_result *r)
{
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

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [--recovery] [--throughput] [--membership] [--link] [--fanout F] [--reps N]\n"
"       " PROG " --recovery --fanout F --with-sum [--reps N]\n"
"       " PROG " --perturbation [--period S] [--rounds K] [--csv FILE] [--svg FILE]\n"
"       " PROG " --figure7 [--victims K] [--period S] [--csv FILE]\n"
"\n"
"Fault-tolerance benchmarks; Markdown rows on stdout (bench/run.sh collects them).\n"
"  --recovery      seed 003 Figure 5: kill -9 a commnode of fan-out 16, 32, 64\n"
"                  and 128 beside 16 possible adopters; recovery latencies\n"
"  --throughput    a streaming union on 8x8, fault tolerance on vs off, after the\n"
"                  same with both off (the A/A control); 16 blocks of fresh trees\n"
"  --membership    trees of 64, 256 and 1,024 nodes: kill -9 of back-ends and\n"
"                  commnodes to the FE's NODE_FAILED and VIEW_STABLE events; the\n"
"                  idle traffic per node with and without heartbeats\n"
"  --link          the streaming union on 8x8 under link faults (one bit flipped per\n"
"                  10,000 frames, one reset per second) beside the same without\n"
"  --fanout F      --recovery at that fan-out only (16, 32, 64 or 128)\n"
"  --with-sum      --recovery with an exact sum stream beside the union, waves\n"
"                  sent back to back through the kill, each checked\n"
"  --reps N        repetitions of each recovery (default 5)\n"
"  --exact-off     every tree with tbon_fe_options_t.exact_off (streams not exact)\n"
"  --perturbation  seed 003 Figure 7: waves/s on 32x32 while %d commnodes are\n"
"                  killed every --period S (default 10) seconds, --rounds K\n"
"                  (default 4) times; --csv and --svg write the trace and its plot\n"
"  --figure7       seed 003 Figure 7 as the seed ran it: a wait-for-all union on\n"
"                  32x32, each back-end a new integer at 10 Hz, --victims K\n"
"                  (default 4) commnodes killed at 1, 2, 3 and 4 times --period S\n"
"                  (default 30); throughput over the last 10 output packets; every\n"
"                  integer sent checked at the FE; --csv writes the trace\n"
"With no option: --recovery --throughput --membership. With BENCH_FT_DEBUG set, --recovery\n"
"prints the time of each orphan's ADOPTED event to stderr.\n", PT_VICTIMS);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--be") == 0)
            return be_main(argc, argv);

    int do_rec = 0, do_tp = 0, do_pt = 0, do_mb = 0, do_lk = 0, do_f7 = 0, reps = 5;
    int rounds = 4, victims = 4, period_set = 0;
    double period = 10;
    const char *csv = NULL, *svg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--recovery") == 0)
            do_rec = 1;
        else if (strcmp(a, "--throughput") == 0)
            do_tp = 1;
        else if (strcmp(a, "--perturbation") == 0)
            do_pt = 1;
        else if (strcmp(a, "--figure7") == 0)
            do_f7 = 1;
        else if (strcmp(a, "--victims") == 0 && v && (victims = atoi(v)) >= 1 &&
                 victims <= PT_VICTIMS)
            i++;
        else if (strcmp(a, "--membership") == 0)
            do_mb = 1;
        else if (strcmp(a, "--link") == 0)
            do_lk = 1;
        else if (strcmp(a, "--exact-off") == 0)
            start_exact_off = 1;
        else if (strcmp(a, "--with-sum") == 0)
            rec_with_sum = 1, do_rec = 1;
        else if (strcmp(a, "--fanout") == 0 && v && valid_fanout(atoi(v)))
            rec_only = (uint32_t)atoi(v), do_rec = 1, i++;
        else if (strcmp(a, "--reps") == 0 && v && (reps = atoi(v)) >= 1 && reps <= 15)
            i++;
        else if (strcmp(a, "--rounds") == 0 && v && (rounds = atoi(v)) >= 1 &&
                 rounds <= PT_MAX_ROUNDS && rounds * PT_VICTIMS < 32)
            i++;
        else if (strcmp(a, "--period") == 0 && v && (period = atof(v)) >= 2 && period <= 120)
            i++, period_set = 1;
        else if (strcmp(a, "--csv") == 0 && v)
            csv = argv[++i];
        else if (strcmp(a, "--svg") == 0 && v)
            svg = argv[++i];
        else {
            usage(strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 ? stdout : stderr);
            if (strcmp(a, "--help") != 0 && strcmp(a, "-h") != 0)
                fprintf(stderr, PROG ": bad option or value: %s%s%s\n", a, v ? " " : "",
                        v ? v : "");
            return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 ? 0 : 2;
        }
    }
    if (do_f7 && (do_rec || do_tp || do_pt || do_mb || do_lk)) {
        fprintf(stderr, PROG ": --figure7 runs alone\n");
        return 2;
    }
    if (!do_rec && !do_tp && !do_pt && !do_mb && !do_lk && !do_f7)
        do_rec = do_tp = do_mb = 1;

    set_nofile_max();
    ssize_t l = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (l <= 0)
        bench_die(PROG, "readlink /proc/self/exe");
    self_exe[l] = '\0';
    signal(SIGPIPE, SIG_IGN);
    /* The back-ends of a killed commnode become our children: we reap them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    snprintf(session_kv, sizeof session_kv, SESSION_ENV "=%ld", (long)getpid());
    if (setenv(SESSION_ENV, session_kv + strlen(SESSION_ENV "="), 1) != 0)
        bench_die(PROG, "setenv");
    /* Orphans warn when they lose their parent: expected here, so the tree
     * logs errors only unless $TBON_LOG says otherwise. The FE takes its
     * recovery lines (info) through the handler either way. */
    fe.user_level = TBON_LOG_WARN;
    const char *lv = getenv("TBON_LOG");
    if (!lv || !*lv) {
        setenv("TBON_LOG", "error", 1);
        fe.user_level = TBON_LOG_ERROR;
    } else {
        fe.user_level = strcmp(lv, "debug") == 0 ? TBON_LOG_DEBUG : strcmp(lv, "info") == 0 ?
                        TBON_LOG_INFO : strcmp(lv, "error") == 0 ? TBON_LOG_ERROR : TBON_LOG_WARN;
    }
    tbon_log_set_handler(log_handler, NULL);
    tbon_log_set_level(fe.user_level > TBON_LOG_INFO ? fe.user_level : TBON_LOG_INFO);
    cond_init_mono(&fe.cv);
    if (tb_wd_start(wd_fire) != 0)
        bench_die(PROG, "pthread_create (watchdog)");

    snprintf(tmpdir, sizeof tmpdir, "/tmp/bench_ft.XXXXXX");
    if (!mkdtemp(tmpdir))
        bench_die(PROG, "mkdtemp");
    struct rec_result rec[NFANOUTS];
    struct tp_result tp = { 0 };
    int tp_blocks = TP_BLOCKS;
    if (do_rec)
        for (size_t i = 0; i < NFANOUTS; i++)
            if (!rec_only || rec_fanouts[i] == rec_only)
                rec_run(rec_fanouts[i], reps, &rec[i]);
    if (do_tp) {
        struct tp_result aa;
        tp_run(tp_blocks, 1, &aa);
        tp_run(tp_blocks, 0, &tp);
        tp.aa_mean = aa.mean;
        tp.aa_ci = aa.ci;
        tp.aa_cmean = aa.cmean;
        tp.aa_cci = aa.cci;
    }
    struct lk_result lk;
    if (do_lk)
        lk_run(&lk);
    struct mb_result mb[MB_SHAPES];
    if (do_mb) {
        for (size_t k = 0; k < MB_SHAPES; k++)
            mb_run(k, &mb[k]);
        mb_joins(&mb_join_ms, &mb_start_ms);
    }
    /* The rows of a part once all of its runs have passed. */
    if (do_rec)
        rec_rows(rec, reps);
    if (do_tp)
        tp_rows(&tp);
    if (do_lk)
        lk_rows(&lk);
    if (do_mb)
        mb_rows(mb);
    fflush(stdout);
    if (do_pt)
        pt_run(period, rounds, csv, svg);
    if (do_f7)
        f7_run(victims, period_set ? period : 30, csv);
    remove_tmpdir();
    fflush(stdout);
    free(fe.rec);
    return 0;
}
