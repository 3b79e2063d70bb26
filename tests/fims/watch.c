/* watch.c - the front-end's state (struct fe) and what fills it while the
 * run goes: the runtime's recovery lines, the union's results (elements and
 * coverage), the membership events on the private copy of the topology;
 * and the wait for the end of the results. */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tbon/tbon.h>

#include "fims.h"

struct fe fe = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* The injection whose orphans include r (the latest one), or SIZE_MAX. */
size_t injection_of_orphan(tbon_rank_t r, size_t *idx)
{
    for (size_t i = fe.ninj; i-- > 0;)
        for (size_t k = 0; k < fe.inj[i].norph; k++)
            if (fe.inj[i].orphan[k] == r) {
                *idx = k;
                return i;
            }
    return SIZE_MAX;
}

/* The recovery line the runtime logs at the FE for each adopted orphan:
 * "rank R adopted by A (incarnation I): new_parent N us, connect C us,
 * compensate P us, cleanup Q us". Other lines go on to stderr as the default
 * logger would write them, if their level is enabled for the user. Runs on
 * library threads, under the library's logger lock: it must not log. */
void log_handler(void *arg, int level, const char *line)
{
    (void)arg;
    const char *m = strstr(line, " [recovery] ");
    if (m) {
        struct recovery r = { .inj = SIZE_MAX };
        int end = 0;
        if (sscanf(m + 12, "rank %" SCNu32 " adopted by %" SCNu32 " (incarnation %" SCNu32
                   "): new_parent %lld us, connect %lld us, compensate %lld us, "
                   "cleanup %lld us%n", &r.orphan, &r.adopter, &r.incarnation, &r.part[0],
                   &r.part[1], &r.part[2], &r.part[3], &end) == 7 && m[12 + end] == '\0') {
            pthread_mutex_lock(&fe.mu);
            size_t k;
            r.inj = injection_of_orphan(r.orphan, &k);
            r.victim = r.inj == SIZE_MAX ? TBON_RANK_NONE : fe.inj[r.inj].old_parent[k];
            if (fe.nrec == fe.caprec) {
                size_t nc = fe.caprec ? fe.caprec * 2 : 64;
                struct recovery *nr = realloc(fe.rec, nc * sizeof *nr);
                if (nr) {
                    fe.rec = nr;
                    fe.caprec = nc;
                }
            }
            if (fe.nrec < fe.caprec)
                fe.rec[fe.nrec++] = r;
            pthread_mutex_unlock(&fe.mu);
            if (fe.user_level < TBON_LOG_INFO)
                return;
        } else {
            pthread_mutex_lock(&fe.mu);
            fe.bad_recovery_lines++;
            pthread_mutex_unlock(&fe.mu);
        }
    }
    if (level <= fe.user_level)
        fprintf(stderr, "%s\n", line);
}

/* Under fe.mu: result p's coverage kept (its index: UINT32_MAX if none). */
static uint32_t note_coverage(const tbon_packet_t *p)
{
    size_t n = tbon_packet_covered(p, NULL, 0);
    if (fe.ncov == fe.capcov) {
        size_t nc = fe.capcov ? fe.capcov * 2 : 1024;
        struct cov *c = realloc(fe.cov, nc * sizeof *c);
        if (!c)
            return UINT32_MAX;
        fe.cov = c;
        fe.capcov = nc;
    }
    tbon_rank_t *r = malloc((n ? n : 1) * sizeof *r);
    if (!r)
        return UINT32_MAX;
    tbon_packet_covered(p, r, n);
    fe.cov[fe.ncov] = (struct cov){ r, n };
    return (uint32_t)fe.ncov++;
}

/* Under fe.mu: private element v came first in result res. */
static void note_element(uint64_t v, uint32_t res)
{
    if (fe.nvres == fe.capvres) {
        size_t nc = fe.capvres ? fe.capvres * 2 : 4096;
        struct vres *x = realloc(fe.vres, nc * sizeof *x);
        if (!x)
            return;
        fe.vres = x;
        fe.capvres = nc;
    }
    fe.vres[fe.nvres++] = (struct vres){ v, res };
}

/* Results: keep the union; an element that comes twice was reported as new
 * twice. */
void *results_main(void *arg)
{
    tbon_stream_t *s = arg;
    for (;;) {
        pthread_mutex_lock(&fe.mu);
        int stop = fe.stop;
        pthread_mutex_unlock(&fe.mu);
        if (stop)
            break;
        tbon_packet_t *p = NULL;
        int rc = tbon_stream_recv(s, &p, 200);
        if (rc == TBON_ETIMEOUT)
            continue;
        if (rc == TBON_ECLOSED)
            break;
        uint64_t *v = NULL;
        size_t n = 0;
        if (rc == 0 && tbon_packet_unpack(p, "%auld", &v, &n) != 0)
            rc = TBON_EFORMAT;
        pthread_mutex_lock(&fe.mu);
        if (rc != 0) {
            if (fe.stream_errors++ == 0)
                snprintf(fe.stream_error, sizeof fe.stream_error, "%s%s%s", tbon_strerror(rc),
                         rc == TBON_EFORMAT ? ": a result of format " : "",
                         rc == TBON_EFORMAT ? tbon_packet_format(p) : "");
        } else {
            fe.packets++;
            uint32_t res = note_coverage(p);
            for (size_t i = 0; i < n; i++) {
                if (!set_add(&fe.out, v[i])) {
                    if (fe.twice++ < SHOW_MAX)
                        fe.twice_first[fe.twice - 1] = v[i];
                } else if (v[i] >= SHARED_POOL) {
                    note_element(v[i], res);
                }
            }
        }
        fe.last_result_us = now_us();
        pthread_cond_broadcast(&fe.cv);
        pthread_mutex_unlock(&fe.mu);
        free(v);
        tbon_packet_unref(p);
    }
    return NULL;
}

/* Membership events: apply them to the private topology copy and match them
 * with the injections. */
void *events_main(void *arg)
{
    tbon_net_t *net = arg;
    for (;;) {
        pthread_mutex_lock(&fe.mu);
        int stop = fe.stop;
        pthread_mutex_unlock(&fe.mu);
        if (stop)
            break;
        tbon_event_t ev;
        int rc = tbon_net_next_event(net, &ev, 200);
        if (rc == TBON_ETIMEOUT)
            continue;
        if (rc != 0)
            break;
        int64_t t = now_us();
        pthread_mutex_lock(&fe.mu);
        if (ev.type == TBON_EV_NODE_FAILED && ev.rank != 0) {
            tb_topology_remove(fe.topo, ev.rank);
            int ours = 0;
            for (size_t i = 0; i < fe.ninj; i++)
                for (size_t k = 0; k < fe.inj[i].nv; k++)
                    if (fe.inj[i].victim[k] == ev.rank && !fe.inj[i].failed_us[k]) {
                        fe.inj[i].failed_us[k] = t;
                        ours = 1;
                    }
            int known = ev.rank < tb_topology_size(fe.topo);
            if (known && !fe.failed_us[ev.rank])
                fe.failed_us[ev.rank] = t;
            if (!ours && !(known && fe.killed[ev.rank])) {
                fe.other_failed++;
                /* Said at once: a test may wait for it (a host cut off). */
                printf("t=%.3f s: %s %u%s%s failed (not killed by this run)\n",
                       (double)(t - fe.t0) / 1e6, known && fe.is_be[ev.rank] ? "back-end" : "node",
                       (unsigned)ev.rank, known ? " on " : "",
                       known ? hosts[host_of[ev.rank]].name : "");
                fflush(stdout);
            }
        } else if (ev.type == TBON_EV_NODE_ADOPTED) {
            if (tb_topology_reparent(fe.topo, ev.rank, ev.parent) == 0)
                tb_topology_set_incarnation(fe.topo, ev.rank, ev.incarnation);
            size_t k, i = injection_of_orphan(ev.rank, &k);
            if (i != SIZE_MAX && !fe.inj[i].adopted_us[k])
                fe.inj[i].adopted_us[k] = t;    /* its first adoption after the kill */
            if (i == SIZE_MAX && ev.rank < tb_topology_size(fe.topo)) {
                printf("t=%.3f s: %s %u on %s adopted by %u (after a failure this run did "
                       "not cause)\n", (double)(t - fe.t0) / 1e6,
                       fe.is_be[ev.rank] ? "back-end" : "node", (unsigned)ev.rank,
                       hosts[host_of[ev.rank]].name, (unsigned)ev.parent);
                fflush(stdout);
            }
        }
        pthread_cond_broadcast(&fe.cv);
        pthread_mutex_unlock(&fe.mu);
    }
    return NULL;
}

/* ----------------------------------------------------------------- the end */

/* 1 when every kill has its FAILED event and every orphan an ADOPTED one
 * (under fe.mu). */
static int all_recovered(void)
{
    for (size_t i = 0; i < fe.ninj; i++) {
        for (size_t k = 0; k < fe.inj[i].nv; k++)
            if (fe.inj[i].pid[k] && !fe.inj[i].failed_us[k])
                return 0;
        for (size_t k = 0; k < fe.inj[i].norph; k++)
            if (!fe.inj[i].adopted_us[k] && tb_topology_alive(fe.topo, fe.inj[i].orphan[k]))
                return 0;
    }
    return 1;
}

/* Wait (blocking on fe.cv) until the results have been quiet for QUIET_MS
 * after end_us and the injections have recovered, or the bounds pass. */
void wait_quiet(int64_t end_us)
{
    int64_t hard = end_us + (int64_t)RECOVER_MS * 1000 + QUIET_MS * 1000;
    pthread_mutex_lock(&fe.mu);
    for (;;) {
        int64_t t = now_us(), last = fe.last_result_us > end_us ? fe.last_result_us : end_us;
        int quiet = t - last >= QUIET_MS * 1000;
        if (t >= hard || (quiet && (all_recovered() || t >= end_us + RECOVER_MS * 1000LL)))
            break;
        int64_t wake = quiet ? t + 100000 : last + QUIET_MS * 1000;
        if (wake > hard)
            wake = hard;
        struct timespec ts = { .tv_sec = (time_t)(wake / 1000000),
                               .tv_nsec = (long)(wake % 1000000) * 1000 };
        pthread_cond_timedwait(&fe.cv, &fe.mu, &ts);
    }
    pthread_mutex_unlock(&fe.mu);
}
