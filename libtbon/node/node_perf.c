/* node_perf.c - run-time performance data, gathered up the tree on request
 * (tbon_fe_perf, docs/protocol.md 10.4).
 *
 * The counters cost nothing to gather until somebody asks: the streams keep
 * theirs as packets pass (node_int.h, TB_PERF_PKT), the connections theirs
 * (resends, relinks, CRC errors), and what a process's memory and CPU are
 * is read only when a gathering comes. A gathering goes down like a check
 * (TB_CTL_PERF to every child with a connection); each node adds its own
 * records to its children's and sends the whole up (TB_CTL_PERF_DATA) once
 * every child has answered or been lost, or its wait has run out - a
 * stopped child holds nobody up for longer than that. What comes after a
 * node has answered passes on as it is, so that the FE still gets it while
 * it waits. The FE's application counts who answered (api/fe_perf.c). */
#include "node/node_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"

struct tb_nperf {
    tb_node_t  *n;
    uint64_t    id;           /* the gathering answered now (0: none yet) */
    int         answered;     /* our answer went: what comes later passes on */
    tbon_rank_t *owe;         /* the children whose answers we wait for */
    size_t      nowe, capowe;
    uint64_t   *node, *strm;  /* the records so far (TB_PERF_NW, TB_PERF_SW wide) */
    size_t      nnode, capnode, nstrm, capstrm;
    tb_timer_t  timer;        /* the wait for the children */
};

static int grow(uint64_t **v, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    uint64_t *nv = realloc(*v, c * sizeof *nv);
    if (!nv)
        return -1;
    *v = nv;
    *cap = c;
    return 0;
}

/* Append k records of width w from src, keeping the first `keep` fields of
 * each (the ones this version knows; a newer sender's extra ones go). */
static void add_records(uint64_t **v, size_t *n, size_t *cap, const uint64_t *src, size_t nvals,
                        size_t w, size_t keep)
{
    size_t k = nvals / w;
    if (!k || grow(v, cap, *n + k * keep) != 0)
        return;
    for (size_t r = 0; r < k; r++)
        memcpy(*v + *n + r * keep, src + r * w, keep * sizeof **v);
    *n += k * keep;
}

/* The resident memory of this process, in bytes (0 if unknown). */
static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &res) != 2)
        res = 0;
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return res * (uint64_t)(page > 0 ? page : 4096);
}

static void conn_counts(const tb_conn_t *c, uint64_t *rec)
{
    if (!c)
        return;
    rec[TB_PERF_N_RESENT] += c->n_resent;
    rec[TB_PERF_N_RELINKS] += c->n_relinks;
    rec[TB_PERF_N_CRC] += c->n_crc;
}

/* This node's own records: one for the node, one per stream it has. */
static void own_records(tb_node_t *n, struct tb_nperf *P)
{
    uint64_t rec[TB_PERF_NW] = { 0 };
    struct rusage ru;
    rec[TB_PERF_N_RANK] = n->rank;
    rec[TB_PERF_N_ROLE] = (uint64_t)n->role;
    rec[TB_PERF_N_RSS] = rss_bytes();
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        rec[TB_PERF_N_CPU_US] = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
                                (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    rec[TB_PERF_N_QUEUED] = atomic_load(&n->queued);
    conn_counts(n->parent, rec);
    for (size_t i = 0; i < n->nchild; i++) {
        rec[TB_PERF_N_STREAM_QUEUED] += n->child[i].qbytes;
        conn_counts(n->child[i].conn, rec);
        rec[TB_PERF_N_CHILDREN] += n->child[i].conn != NULL;
    }
    int64_t up = tb_now_ms() - n->born_ms;
    rec[TB_PERF_N_UPTIME_MS] = up > 0 ? (uint64_t)up : 0;
    rec[TB_PERF_N_MSGS_DROPPED] = n->direct_dropped;
    add_records(&P->node, &P->nnode, &P->capnode, rec, TB_PERF_NW, TB_PERF_NW, TB_PERF_NW);
    for (size_t id = 0; id < n->nstreams; id++) {
        tb_stream_st_t *s = n->streams[id];
        if (!s)
            continue;
        uint64_t sr[TB_PERF_SW];
        memcpy(sr, s->perf, sizeof sr);
        sr[TB_PERF_S_RANK] = n->rank;
        sr[TB_PERF_S_STREAM] = s->id;
        sr[TB_PERF_S_QUEUED] = 0;
        for (size_t i = 0; s->q && i < n->nchild; i++)
            sr[TB_PERF_S_QUEUED] += s->q[i].bytes;
        add_records(&P->strm, &P->nstrm, &P->capstrm, sr, TB_PERF_SW, TB_PERF_SW, TB_PERF_SW);
    }
}

/* Records go up: to the FE's application, or to the parent. */
static void send_up(tb_node_t *n, const tb_ctl_perf_data_t *d, tbon_packet_t *p, int done)
{
    if (n->role == TB_ROLE_FE) {
        if (n->cbs.perf)
            n->cbs.perf(n->cbs.arg, d, done);
        tbon_packet_unref(p);
        return;
    }
    if (!p)
        p = tb_ctl_perf_data_encode(d);
    tb_node_send_ctl(n, n->parent, TB_CTL_PERF_DATA, p);   /* (no parent: dropped) */
}

static void answer(tb_node_t *n, struct tb_nperf *P)
{
    if (!P->id || P->answered)
        return;
    P->answered = 1;
    tb_timer_cancel(n->loop, &P->timer);
    if (P->nowe)
        TB_DEBUG("perf", "gathering %llu: answered without %zu children (rank %u first)",
                 (unsigned long long)P->id, P->nowe, P->owe[0]);
    TB_DEBUG("perf", "gathering %llu: answering with %zu node records",
             (unsigned long long)P->id, P->nnode / TB_PERF_NW);
    tb_ctl_perf_data_t d = { .id = P->id, .nw = TB_PERF_NW, .sw = TB_PERF_SW,
                             .node = P->node, .nnode = P->nnode,
                             .strm = P->strm, .nstrm = P->nstrm };
    send_up(n, &d, NULL, 1);
    P->nnode = P->nstrm = 0;
    P->nowe = 0;
}

static void on_timer(tb_timer_t *t, int64_t now)
{
    (void)now;
    struct tb_nperf *P = t->arg;
    answer(P->n, P);
}

static struct tb_nperf *state(tb_node_t *n)
{
    if (!n->perf) {
        n->perf = calloc(1, sizeof *n->perf);
        if (n->perf) {
            n->perf->n = n;
            n->perf->timer.fn = on_timer;
            n->perf->timer.arg = n->perf;
        }
    }
    return n->perf;
}

void tb_perf_start(tb_node_t *n, uint64_t id, uint32_t wait_ms)
{
    struct tb_nperf *P = state(n);
    if (!P)
        return;
    answer(n, P);                   /* an older one still open: what it has */
    P->id = id;
    P->answered = 0;
    P->nnode = P->nstrm = P->nowe = 0;
    own_records(n, P);
    /* The children's answers must reach us before our own wait ends. */
    uint32_t child_wait = wait_ms - wait_ms / 4;
    tbon_packet_t *p = NULL;
    for (size_t i = 0; i < n->nchild; i++) {
        tb_conn_t *c = n->child[i].conn;
        if (!c || c->closed)
            continue;
        if (P->nowe == P->capowe) {
            size_t cap = P->capowe ? 2 * P->capowe : 16;
            tbon_rank_t *v = realloc(P->owe, cap * sizeof *v);
            if (!v)
                continue;           /* not asked: not waited for */
            P->owe = v;
            P->capowe = cap;
        }
        if (!p && !(p = tb_ctl_perf_encode(&(tb_ctl_perf_t){ id, child_wait })))
            break;
        P->owe[P->nowe++] = n->child[i].rank;
        tb_node_send_ctl(n, c, TB_CTL_PERF, tbon_packet_ref(p));
    }
    tbon_packet_unref(p);
    TB_DEBUG("perf", "gathering %llu: asked %zu children, waiting up to %u ms",
             (unsigned long long)id, P->nowe, wait_ms);
    if (!P->nowe)
        answer(n, P);
    else
        tb_timer_at(n->loop, &P->timer, tb_now_ms() + wait_ms);
}

/* Child rank r owes us no more; 1 if it did. */
static int settle(struct tb_nperf *P, tbon_rank_t r)
{
    for (size_t j = 0; j < P->nowe; j++)
        if (P->owe[j] == r) {
            P->owe[j] = P->owe[--P->nowe];
            return 1;
        }
    return 0;
}

void tb_perf_on_data(tb_node_t *n, size_t child, const tb_ctl_perf_data_t *m, tbon_packet_t *p)
{
    struct tb_nperf *P = n->perf;
    if (P && m->id == P->id && !P->answered && settle(P, n->child[child].rank)) {
        TB_DEBUG("perf", "gathering %llu: rank %u answered (%zu records)",
                 (unsigned long long)m->id, n->child[child].rank, m->nnode / m->nw);
        add_records(&P->node, &P->nnode, &P->capnode, m->node, m->nnode, m->nw, TB_PERF_NW);
        add_records(&P->strm, &P->nstrm, &P->capstrm, m->strm, m->nstrm, m->sw, TB_PERF_SW);
        if (!P->nowe)
            answer(n, P);
        return;
    }
    /* late, or of an older gathering: on as it is */
    TB_DEBUG("perf", "gathering %llu: %zu records from rank %u passed on (ours: %llu%s)",
             (unsigned long long)m->id, m->nnode / m->nw, n->child[child].rank,
             (unsigned long long)(P ? P->id : 0), P && P->answered ? ", answered" : "");
    send_up(n, m, tbon_packet_ref(p), 0);
}

void tb_perf_child_gone(tb_node_t *n, size_t child)
{
    struct tb_nperf *P = n->perf;
    if (P && P->id && !P->answered && settle(P, n->child[child].rank) && !P->nowe)
        answer(n, P);
}

void tb_perf_free(tb_node_t *n)
{
    struct tb_nperf *P = n->perf;
    if (!P)
        return;
    tb_timer_cancel(n->loop, &P->timer);
    free(P->owe);
    free(P->node);
    free(P->strm);
    free(P);
    n->perf = NULL;
}
