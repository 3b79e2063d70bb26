/* fe.c - the front-end's run: this process set up, the topology and its
 * hosts, the back-ends' directory, the tree started with this program at
 * every leaf, the union stream and its start packet, the schedule carried
 * out, the tree destroyed and the hosts searched for leftovers; then the
 * checks (checks.c). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "fims.h"
#include "lib/watchdog.h"
#include "util/log.h"

/* This process: the run's environment entry (its children carry it), a
 * subreaper, no SIGPIPE, as many open files as allowed. 0, or 1. */
static int fe_process(const struct opts *o, int64_t run_t0)
{
    snprintf(run_kv, sizeof run_kv, RUN_ENV "=%ld.%llx", (long)getpid(),
             (unsigned long long)(run_t0 ^ (int64_t)o->seed));
    if (setenv(RUN_ENV, strchr(run_kv, '=') + 1, 1) != 0) {
        perror(PROG ": setenv");
        return 1;
    }
    /* Orphans of the tree (processes whose parent was killed) come back to
     * us, so the leftover check still sees them and we reap them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    return 0;
}

/* The private copy of the topology (*size ranks, *nbe back-ends), the
 * per-rank arrays, the hosts and their agents. 0, or the exit status. */
static int fe_topology(const struct opts *o, const char *self, size_t *size, size_t *nbe)
{
    tbon_error_t err = { 0 };
    fe.topo = tb_topology_parse_file(o->topo, &err);
    if (!fe.topo) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        return 2;
    }
    *size = tb_topology_size(fe.topo);
    *nbe = tb_topology_num_leaves(fe.topo);
    fe.killed = calloc(*size, 1);
    fe.failed_us = calloc(*size, sizeof *fe.failed_us);
    fe.is_be = calloc(*size, 1);
    if (!fe.killed || !fe.failed_us || !fe.is_be || hosts_init(self) != 0)
        return 1;
    return 0;
}

/* DIR (a buffer of PATH_MAX), where the back-ends write: --dir (made if
 * need be, its old be-*.txt removed), else a new directory in $TMPDIR
 * (*own_dir: removed when the run passes). 0, or the exit status. */
static int fe_dir(const struct opts *o, char *dir, size_t cap, int *own_dir)
{
    *own_dir = !o->dir;
    if (*own_dir) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, cap, "%s/tbon-fims-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            fprintf(stderr, PROG ": mkdtemp %s: %s\n", dir, strerror(errno));
            return 1;
        }
    } else {
        if (!realpath(o->dir, dir) && (mkdir(o->dir, 0700) != 0 || !realpath(o->dir, dir))) {
            fprintf(stderr, PROG ": --dir %s: %s\n", o->dir, strerror(errno));
            return 2;
        }
        clean_dir(dir, 0);
    }
    return 0;
}

/* The log handler (our recovery lines are info lines; the others keep the
 * user's level), fe.cv on CLOCK_MONOTONIC, the seed of the choices. */
static void fe_logging(const struct opts *o)
{
    fe.user_level = TBON_LOG_WARN;
    for (int l = TBON_LOG_DEBUG; l >= TBON_LOG_ERROR; l--)
        if (tb_log_enabled(l)) {
            fe.user_level = l;
            break;
        }
    tbon_log_set_handler(log_handler, NULL);
    if (fe.user_level < TBON_LOG_INFO)
        tbon_log_set_level(TBON_LOG_INFO);

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&fe.cv, &ca);
    pthread_condattr_destroy(&ca);
    pick_rng = o->seed ^ 0x5DEECE66Dull;
}

/* Start the tree (this program at every leaf), tell the agents the
 * session (read from the attach file, which lets nothing else in: it is
 * mode 0600 and removed with the session), open the union stream and send
 * it the run's parameters. Returns the network, *sp its stream; NULL after
 * a FAIL line, every process of the run killed. */
static tbon_net_t *fe_start(const struct opts *o, const char *self, const char *dir,
                            const char *attach, tbon_stream_t **sp)
{
    tbon_error_t err = { 0 };
    tbon_fe_options_t fo = { 0 };
    fo.heartbeat_ms = o->heartbeat_ms;
    fo.attach_file = attach;
    const char *const be_argv[] = { "--be", NULL };
    int64_t t_create = now_us();
    tbon_net_t *net = tbon_fe_create(o->topo, self, be_argv, &fo, &err);
    if (!net) {
        printf(PROG ": FAIL: tbon_fe_create: %s\n", err.msg);
        kill_run();
        return NULL;
    }
    printf(PROG ": tree up in %.0f ms\n", (double)(now_us() - t_create) / 1e3);
    if (hosts_session(attach) != 0) {
        tbon_net_destroy(net);
        kill_run();
        return NULL;
    }
    size_t nremote = 0;
    for (size_t i = 0; i < nhosts; i++)
        nremote += !hosts[i].local;
    if (nremote)
        printf(PROG ": session %s; an agent on each of the %zu other host%s\n", session_id,
               nremote, nremote == 1 ? "" : "s");
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_UNION,
                                          TBON_SYNC_DONTWAIT, TBON_FILTER_NULL);
    int rc = s ? tbon_stream_send(s, TAG_START, "%lf %lf %uld %s", o->rate, o->duration,
                                  o->seed, dir) : TBON_EINVAL;
    if (rc == 0)
        rc = tbon_stream_flush(s);
    if (rc != 0) {
        printf(PROG ": FAIL: starting the stream: %s (%s)\n", tbon_strerror(rc),
               tbon_net_error(net));
        tbon_net_destroy(net);
        kill_run();
        return NULL;
    }
    *sp = s;
    return net;
}

/* The run, from now (*t0p): the threads of results and events, each
 * schedule item at its time, the end of --duration, the results' quiet;
 * then the tree destroyed and every host searched for leftovers (killed).
 * Returns hosts_left's count. */
static long fe_run(const struct opts *o, tbon_net_t *net, tbon_stream_t *s, int64_t run_t0,
                   int64_t *t0p)
{
    int64_t t0 = now_us();
    *t0p = t0;
    fe.t0 = t0;
    pthread_t rt, et;
    pthread_create(&rt, NULL, results_main, s);
    pthread_create(&et, NULL, events_main, net);

    double left_s = o->timeout - (double)(t0 - run_t0) / 1e6;
    tb_wd_arm("the run", left_s > 0.001 ? left_s : 0.001);
    for (size_t i = 0; i < o->nitems; i++) {
        sleep_until_us(t0 + (int64_t)(o->items[i].at * 1e6));
        inject(&o->items[i], t0);
    }
    int64_t end = t0 + (int64_t)(o->duration * 1e6);
    sleep_until_us(end);
    wait_quiet(end);

    pthread_mutex_lock(&fe.mu);
    fe.stop = 1;
    pthread_mutex_unlock(&fe.mu);
    pthread_join(rt, NULL);
    pthread_join(et, NULL);
    tb_wd_arm("tbon_net_destroy", 60);
    tbon_net_destroy(net);
    /* Every host of the topology, for up to 5 s (the tree's processes
     * exit within a second of the end of the session). */
    long left = hosts_left(5000);
    if (left != 0) {
        if (left > 0)
            printf(PROG ": %ld process%s of the run left after tbon_net_destroy; killing "
                   "them\n", left, left == 1 ? "" : "es");
        kill_run();
    }
    for (size_t i = 0; i < nhosts; i++)
        agent_stop(&hosts[i], 3000);
    return left;
}

int fe_main(struct opts *o, const char *self)
{
    int64_t run_t0 = now_us();
    if (fe_process(o, run_t0) != 0)
        return 1;
    size_t size, nbe;
    int rc = fe_topology(o, self, &size, &nbe);
    if (rc != 0)
        return rc;
    char dir[4096];
    int own_dir;
    if ((rc = fe_dir(o, dir, sizeof dir, &own_dir)) != 0)
        return rc;
    fe_logging(o);

    tb_wd_start(wd_fire);
    tb_wd_arm("start-up", o->timeout);
    printf(PROG ": %s: %zu processes (%zu back-ends), duration %g s at %g Hz, seed %" PRIu64
           ", %zu injection%s, files in %s\n", o->topo, size, nbe, o->duration, o->rate,
           o->seed, o->nitems, o->nitems == 1 ? "" : "s", dir);
    fflush(stdout);
    /* The attach file tells us the session id (fe_start). */
    char attach[4200];
    snprintf(attach, sizeof attach, "%s/attach", dir);
    tbon_stream_t *s = NULL;
    tbon_net_t *net = fe_start(o, self, dir, attach, &s);
    if (!net)
        return 1;
    int64_t t0;
    long left = fe_run(o, net, s, run_t0, &t0);
    tb_wd_arm("the checks", 60);
    int fail = fims_verdict(o, dir, own_dir, size, left, t0);
    tb_wd_arm("exit", 0);
    return fail;
}
