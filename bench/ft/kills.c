/* kills.c - what the perturbation (c) and Figure 7 (c') runs share: the
 * 32x32 tree, a thread that kills pt.victims random commnodes every period,
 * a thread that bins the FE's FAILED and ADOPTED events, and the wait for
 * the last round's adoptions. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tbon/tbon.h>

#include "ft.h"
#include "lib/bench.h"

struct pt_state pt;

static pthread_t pt_events_th, pt_killer_th;

/* The FE's events: FAILED and ADOPTED counted per bin, the time of the
 * last ADOPTED after each round of kills. */
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

/* The 32x32 tree of a Figure 7 run started, with pt set up for `rounds`
 * kills of `victims` commnodes every `period` s; its back-ends in *n. */
tbon_net_t *pt_tree(double period, int rounds, int victims, size_t *n)
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

/* Free what pt_tree set up. */
void pt_free(void)
{
    free(pt.waves);
    free(pt.shortw);
    free(pt.failed);
    free(pt.adopted);
    free(pt.killed);
    free(pt.pids);
    memset(&pt, 0, sizeof pt);
}

/* Time 0 of the run (pt.t0) is now; the threads of the events and the
 * kills start. */
void pt_kills_start(void)
{
    pt.t0 = bench_now();
    if (pthread_create(&pt_events_th, NULL, pt_events_main, NULL) != 0 ||
        pthread_create(&pt_killer_th, NULL, pt_killer_main, NULL) != 0)
        ft_die("pthread_create");
}

/* After the last round of kills: wait until every FAILED event and the last
 * round's adoptions are in (10 s at most), stop watching the events, and
 * require all of them (what: the run's name for the message). */
void pt_kills_wait(int rounds, int victims, size_t n, const char *what)
{
    pthread_join(pt_killer_th, NULL);
    /* The last round's adoptions must be in before we stop watching. */
    size_t want = (size_t)(rounds * victims) * (n / pt.ncomm);
    double dl = bench_now() + 10;
    pthread_mutex_lock(&fe.mu);
    while ((pt.nadopted < want || pt.nfailed < (size_t)(victims * rounds)) && bench_now() < dl)
        fe_wait(dl);
    pt.stop = 1;
    size_t nfailed = pt.nfailed, nadopted = pt.nadopted;
    pthread_mutex_unlock(&fe.mu);
    pthread_join(pt_events_th, NULL);
    if (nfailed < (size_t)(victims * rounds) || nadopted < want)
        ft_die("%s: %zu FAILED events for %d kills, %zu ADOPTED for %zu orphans", what,
               nfailed, victims * rounds, nadopted, want);
}
