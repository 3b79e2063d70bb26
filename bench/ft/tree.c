/* tree.c - bench_ft's run as a whole: finding and killing its processes,
 * its temporary directory, fatal errors and the watchdog, the FE's log
 * handler (the runtime's recovery lines), and the trees: written, started,
 * stopped with no process left, sent requests. */
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "ft.h"
#include "lib/bench.h"
#include "lib/procscan.h"
#include "lib/watchdog.h"

/* ------------------------------------------------ finding the run's processes */

char session_kv[64];
static struct { tbon_net_t *net; char kv[80]; } trees[4];   /* the trees up */
char self_exe[4096];
char tmpdir[64];

/* Walk the live processes of the tree whose environment holds kv (NULL: of
 * every tree of the run) other than this one. With pids != NULL, store the
 * pid of each one launched as rank r < npids in pids[r]; with sig, send it to
 * each. Returns how many there are. */
long scan_session(const char *kv, int sig, pid_t *pids, size_t npids)
{
    return tb_proc_scan_env(kv ? kv : session_kv, !kv, sig, pids, npids);
}

/* SIGKILL every process of the run, rescanning until none is found. */
void kill_session(void)
{
    for (int i = 0; i < 10 && scan_session(NULL, SIGKILL, NULL, 0) > 0; i++)
        ;
}

/* Reap the zombies handed to us (we are a subreaper: the back-ends of a
 * killed commnode become our children). */
void reap_all(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* Remove tmpdir and what is in it (once). */
void remove_tmpdir(void)
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
__attribute__((noreturn, format(printf, 1, 2))) void ft_die(const char *fmt, ...)
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
void wd_fire(const char *phase)
{
    fprintf(stderr, PROG ": watchdog: %s took too long; killing the tree; no rows printed\n",
            phase);
    kill_session();
    _exit(1);
}

/* CLOCK_MONOTONIC seconds t as a timespec for the timed waits. */
struct timespec abs_ts(double t)
{
    struct timespec ts = { .tv_sec = (time_t)t };
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    return ts;
}

/* A condition variable whose timed waits are on CLOCK_MONOTONIC. */
void cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

/* ------------------------------------------------------------ the FE state */

struct ft_fe fe = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* The runtime's line per adopted orphan (tag "recovery"): "rank R adopted
 * by A (incarnation I): new_parent N us, connect C us, compensate P us,
 * cleanup Q us". Other lines go to stderr if the user's level wants them.
 * Runs on library threads under the logger's lock: it must not log. */
void log_handler(void *arg, int level, const char *line)
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
void fe_wait(double deadline)
{
    struct timespec ts = abs_ts(deadline);
    pthread_cond_timedwait(&fe.cv, &fe.mu, &ts);
}

/* ------------------------------------------------------------- the trees */

/* As many open files as the hard limit allows: a tree of 1,024 back-ends. */
void set_nofile_max(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Write t into tmpdir as NAME.top; returns the path (static). Takes t. */
const char *write_topology(tb_topology_t *t, const char *name)
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
const char *tree_kv(const tbon_net_t *net)
{
    for (size_t i = 0; i < sizeof trees / sizeof trees[0]; i++)
        if (trees[i].net == net)
            return trees[i].kv;
    ft_die("a tree without its session entry");
}

int start_heartbeat_ms;
const char *start_attach_file;
int start_exact_off;

/* Start a tree of topo (n back-ends, this program at each), with fault
 * tolerance unless no_ft; its processes carry the entry tree_kv gives. */
tbon_net_t *start(const char *topo, size_t n, int no_ft)
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
void stop(tbon_net_t *net)
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

/* Send request op (w, arg) on s and flush it. */
void request(tbon_stream_t *s, uint32_t op, uint32_t w, uint32_t arg)
{
    int rc = tbon_stream_send(s, TAG, "%ud %ud %ud", op, w, arg);
    if (rc == 0)
        rc = tbon_stream_flush(s);
    if (rc != 0)
        ft_die("request %u: %s", op, tbon_strerror(rc));
}

tbon_net_t *start_streamed(const char *topo, size_t n, int hb_ms, int filter, int sync,
                           tbon_stream_t **s)
{
    start_heartbeat_ms = hb_ms;
    tbon_net_t *net = start(topo, n, 0);
    *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), filter, sync, TBON_FILTER_NULL);
    if (!*s)
        ft_die("a stream over every back-end: %s", tbon_net_error(net));
    return net;
}

/* Kill victim (pid) and time the FE's TBON_EV_NODE_FAILED for it and the
 * TBON_EV_VIEW_STABLE after it (and after every adoption it causes), ms. */
void kill_settle(tbon_net_t *net, tbon_rank_t victim, pid_t pid, size_t orphans,
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
