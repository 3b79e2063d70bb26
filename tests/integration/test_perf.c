/* test_perf.c - tbon_fe_perf: run-time performance data gathered up the
 * tree (docs/user-guide.md, "Performance data"). The counters are checked
 * exactly against the waves the test ran: every process's packets each
 * way on the stream, the waves its filter ran over, the bytes that must
 * match from one level to the next; through a commnode's kill -9 while
 * waves are in flight (the orphans answer once adopted), and with a
 * commnode stopped (its subtree named as silent, the call back at its
 * timeout). */
#include "itest.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>
#include <string.h>

/* The record of stream sid at rank r in p, or NULL (failure recorded). */
static const tbon_perf_stream_t *srec(const tbon_perf_t *p, tbon_rank_t r, uint32_t sid)
{
    if (r >= p->nnodes) {
        th_fail(__FILE__, __LINE__, "rank %u beyond the %zu nodes", r, p->nnodes);
        return NULL;
    }
    const tbon_perf_node_t *n = &p->nodes[r];
    for (size_t i = n->first_stream; i < n->first_stream + n->nstreams; i++)
        if (p->streams[i].stream == sid && p->streams[i].rank == r)
            return &p->streams[i];
    th_fail(__FILE__, __LINE__, "rank %u has no record of stream %u", r, sid);
    return NULL;
}

static tbon_perf_t *gather(tbon_net_t *net, int want_rc)
{
    tbon_perf_t *p = NULL;
    int rc = tbon_fe_perf(net, &p, IT_RECV_MS);
    if (rc != want_rc)
        th_fail(__FILE__, __LINE__, "tbon_fe_perf: %d (%s), wanted %d", rc,
                rc ? tbon_net_error(net) : "ok", want_rc);
    if (!p)
        th_fail(__FILE__, __LINE__, "tbon_fe_perf gave no result");
    return p;
}

/* A 2x4 tree (commnodes 1 and 2, back-ends 3-10) after w sum waves: each
 * node's counts on the stream are what w waves make. */
static void check_quiet_counts(const tbon_perf_t *p, uint32_t sid, uint64_t w)
{
    const tbon_perf_stream_t *fe = srec(p, 0, sid), *c1 = srec(p, 1, sid);
    if (!fe || !c1)
        return;
    CHECK_UINT(fe->down_in_packets, w);         /* the application's requests */
    CHECK_UINT(fe->down_out_packets, 2 * w);    /* to two commnodes */
    CHECK_UINT(fe->up_in_packets, 2 * w);
    CHECK_UINT(fe->up_out_packets, w);          /* delivered */
    CHECK_UINT(fe->waves, w);
    CHECK_UINT(fe->filter_calls, w);            /* the sum, no down filter */
    CHECK(fe->filter_ns > 0);
    for (tbon_rank_t r = 1; r <= 2; r++) {
        const tbon_perf_stream_t *c = srec(p, r, sid);
        if (!c)
            continue;
        CHECK_UINT(c->down_in_packets, w);
        CHECK_UINT(c->down_out_packets, 4 * w);
        CHECK_UINT(c->up_in_packets, 4 * w);
        CHECK_UINT(c->up_out_packets, w);
        CHECK_UINT(c->waves, w);
        CHECK_UINT(c->filter_calls, w);
        CHECK_UINT(c->queued_bytes, 0);
        /* the same requests at every level; four answers make one */
        CHECK_UINT(c->down_in_bytes, fe->down_in_bytes);
        CHECK_UINT(c->down_out_bytes, 4 * c->down_in_bytes);
        CHECK_UINT(c->up_out_bytes * 2, fe->up_in_bytes);
    }
    CHECK(fe->down_in_bytes > 0 && fe->up_in_bytes > 0);
    uint64_t be_out = 0;
    for (tbon_rank_t r = 3; r <= 10; r++) {
        const tbon_perf_stream_t *b = srec(p, r, sid);
        if (!b)
            continue;
        CHECK_UINT(b->down_in_packets, w);
        CHECK_UINT(b->down_in_bytes, fe->down_in_bytes);
        CHECK_UINT(b->up_out_packets, w);
        CHECK_UINT(b->up_in_packets + b->down_out_packets + b->waves, 0);
        be_out += b->up_out_bytes;
    }
    CHECK_UINT(be_out, c1->up_in_bytes + srec(p, 2, sid)->up_in_bytes);
}

/* Sum waves [from, to) on s, one at a time, each checked; 0 or -1. */
static int sum_waves(tbon_stream_t *s, const it_tree_t *t, uint32_t from, uint32_t to)
{
    for (uint32_t w = from; w < to; w++)
        if (it_sum_wave(s, w, t->be, t->nbe) != 0)
            return -1;
    return 0;
}

/* Every node answers, its figures are its own, and the counts are exact;
 * a second gathering sees them grow by the waves between. */
ITEST(counts_are_exact_on_a_quiet_tree)
{
    it_tree_t t;
    if (it_start(&t, "2x4", NULL, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    uint32_t sid = tbon_stream_id(s);
    CHECK_INT(sum_waves(s, &t, 0, 25), 0);
    tbon_perf_t *p = gather(t.net, 0);
    if (p) {
        CHECK_UINT(p->nnodes, 11);
        CHECK_UINT(p->answered, 11);
        CHECK_UINT(p->silent, 0);
        CHECK_INT(p->rounds, 1);
        for (tbon_rank_t r = 0; r < 11 && r < p->nnodes; r++) {
            const tbon_perf_node_t *n = &p->nodes[r];
            CHECK_UINT(n->rank, r);
            CHECK(n->answered && n->alive);
            CHECK_INT(n->role, r == 0 ? 0 : r <= 2 ? 1 : 2);
            CHECK_STR(n->host, "localhost");
            CHECK(n->rss_bytes > 1024 * 1024 && n->cpu_us > 0);
            CHECK_UINT(n->children, r == 0 ? 2 : r <= 2 ? 4 : 0);
            CHECK_UINT(n->link_resends + n->relinks + n->crc_errors, 0);
            CHECK_UINT(n->nstreams, 1);
        }
        check_quiet_counts(p, sid, 25);
    }
    tbon_perf_free(p);
    CHECK_INT(sum_waves(s, &t, 25, 30), 0);
    p = gather(t.net, 0);
    if (p)
        check_quiet_counts(p, sid, 30);
    tbon_perf_free(p);
    /* wrong calls */
    tbon_perf_t *q = (tbon_perf_t *)&q;
    CHECK_INT(tbon_fe_perf(t.net, &q, 0), TBON_EINVAL);
    CHECK(q == NULL);
    CHECK_INT(tbon_fe_perf(NULL, &q, 100), TBON_EINVAL);
    CHECK_INT(tbon_fe_perf(t.net, NULL, 100), TBON_EINVAL);
    tbon_perf_free(NULL);
    it_stop(&t);
}

/* Commnode 1 is killed with waves in flight and the data gathered at
 * once, during the recovery: the call ends with every live node's answer
 * (its orphans asked again once adopted), the dead one down. Every wave's
 * sum is exact, and every back-end's counts say it got each request once
 * and answered it once. */
ITEST(perf_through_a_commnode_kill)
{
    it_tree_t t;
    if (it_start(&t, "2x4", NULL, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    uint32_t sid = tbon_stream_id(s);
    CHECK_INT(sum_waves(s, &t, 0, 10), 0);
    pid_t cn = it_pid_of("tbon_commnode", 1);
    REQUIRE(cn > 0);
    for (uint32_t w = 10; w < 20; w++)
        CHECK_INT(tbon_stream_send(s, IT_TAG_WAVE, "%ud", w), 0);
    kill(cn, SIGKILL);
    tbon_perf_t *p = gather(t.net, 0);
    if (p) {
        CHECK_UINT(p->silent, 0);
        CHECK(!p->nodes[1].alive && !p->nodes[1].answered);
        for (tbon_rank_t r = 0; r < 11; r++)
            if (r != 1)
                CHECK(p->nodes[r].answered);
        if (getenv("ITEST_VERBOSE"))
            fprintf(stderr, "    gathered in %.0f ms, %d rounds\n", p->elapsed_ms, p->rounds);
    }
    tbon_perf_free(p);
    for (uint32_t w = 10; w < 20; w++) {
        char what[32];
        snprintf(what, sizeof what, "wave %u", w);
        tbon_packet_t *r = it_recv(s, IT_RECV_MS, what);
        int64_t v = -1;
        if (r && tbon_packet_unpack(r, "%ld", &v) == 0)
            CHECK_INT(v, it_wave_sum(t.be, t.nbe, w));
        tbon_packet_unref(r);
    }
    p = gather(t.net, 0);
    if (p) {
        const tbon_perf_stream_t *fe = srec(p, 0, sid);
        if (fe) {
            CHECK_UINT(fe->down_in_packets, 20);
            CHECK_UINT(fe->up_out_packets, 20);
        }
        for (tbon_rank_t r = 3; r <= 10; r++) {
            const tbon_perf_stream_t *b = srec(p, r, sid);
            if (b) {
                CHECK_UINT(b->down_in_packets, 20);
                CHECK_UINT(b->up_out_packets, 20);
            }
        }
        /* the orphans are under new parents, whose records say so */
        uint64_t kids = 0;
        for (tbon_rank_t r = 0; r < 11; r++)
            if (p->nodes[r].answered && r != 1)
                kids += p->nodes[r].children;
        CHECK_UINT(kids, 9);                /* commnode 2 and the 8 back-ends */
    }
    tbon_perf_free(p);
    it_stop(&t);
}

/* A stopped commnode holds up only its own subtree's answers: the call
 * returns at its timeout with TBON_ETIMEOUT, the rest's figures, and the
 * silent ranks named; once it runs again every node answers. */
ITEST(a_stopped_commnode_is_named_silent)
{
    /* no heartbeats: the stopped node stays alive in the topology */
    tbon_fe_options_t o = { .startup_timeout_ms = 90000, .heartbeat_ms = -1 };
    it_tree_t t;
    if (it_start(&t, "2x4", NULL, &o))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s && it_sum_wave(s, 0, t.be, t.nbe) == 0);
    pid_t cn = it_pid_of("tbon_commnode", 2);
    REQUIRE(cn > 0);
    kill(cn, SIGSTOP);
    tbon_perf_t *p = NULL;
    int64_t t0 = it_now_ms();
    int timeout = IT_SLOW ? 6000 : 3000;
    CHECK_INT(tbon_fe_perf(t.net, &p, timeout), TBON_ETIMEOUT);
    int64_t took = it_now_ms() - t0;
    CHECK(took >= timeout - 50 && took < timeout + 2000);
    const char *e = tbon_net_error(t.net);
    CHECK(strstr(e, "5 live nodes did not answer") && strstr(e, "ranks 2, 7, 8, 9, 10"));
    if (p) {
        CHECK_UINT(p->answered, 6);
        CHECK_UINT(p->silent, 5);
        for (tbon_rank_t r = 0; r < 11; r++) {
            int under2 = r == 2 || r >= 7;
            CHECK_INT(p->nodes[r].answered, !under2);
            CHECK(p->nodes[r].alive);
        }
        const tbon_perf_stream_t *b = srec(p, 3, tbon_stream_id(s));
        if (b)
            CHECK_UINT(b->up_out_packets, 1);
    }
    tbon_perf_free(p);
    kill(cn, SIGCONT);
    p = gather(t.net, 0);
    if (p)
        CHECK_UINT(p->answered, 11);
    tbon_perf_free(p);
    CHECK_INT(it_sum_wave(s, 1, t.be, t.nbe), 0);
    it_stop(&t);
}

/* The front-end calls that wait for the tree, which a destroy must wake. */
enum waiting_call { CALL_PERF, CALL_CHECK_VIEWS, CALL_ATTRS_CHANGED };
static const char *const call_name[] = { "tbon_fe_perf", "tbon_fe_check_views",
                                         "tbon_fe_attrs_changed" };

struct gatherer {
    tbon_net_t *net;
    atomic_int tid, done;
    int rc;
    int64_t back_ms;
    pid_t stopped;
    enum waiting_call call;
};

static void *gather_long(void *arg)
{
    struct gatherer *g = arg;
    atomic_store(&g->tid, (int)gettid());
    tbon_perf_t *p = NULL;
    tbon_view_check_t vc;
    tbon_rank_t ranks[8];
    if (g->call == CALL_PERF)
        g->rc = tbon_fe_perf(g->net, &p, 60000);
    else if (g->call == CALL_CHECK_VIEWS)
        g->rc = tbon_fe_check_views(g->net, &vc, 60000);
    else
        g->rc = tbon_fe_attrs_changed(g->net, ranks, 8, 60000);
    g->back_ms = it_now_ms();
    tbon_perf_free(p);
    atomic_store(&g->done, 1);
    return NULL;
}

/* Once the gathering is back, the stopped commnode runs again, so that
 * the destroy's shutdown ends in order. */
static void *resume_after(void *arg)
{
    struct gatherer *g = arg;
    while (!atomic_load(&g->done))
        it_sleep_ms(5);
    kill(g->stopped, SIGCONT);
    return NULL;
}

/* A destroy while another thread waits in call (a stopped commnode keeps
 * a gathering or a check open; no attribute changes) wakes it with
 * TBON_ECLOSED at once, and frees nothing under it. */
static void destroy_wakes(enum waiting_call call)
{
    tbon_fe_options_t o = { .startup_timeout_ms = 90000, .heartbeat_ms = -1 };
    it_tree_t t;
    if (it_start(&t, "2x4", NULL, &o))
        return;
    pid_t cn = it_pid_of("tbon_commnode", 2);
    REQUIRE(cn > 0);
    kill(cn, SIGSTOP);
    struct gatherer g = { .net = t.net, .rc = 1, .stopped = cn, .call = call };
    pthread_t th, rt;
    REQUIRE(pthread_create(&th, NULL, gather_long, &g) == 0);
    REQUIRE(pthread_create(&rt, NULL, resume_after, &g) == 0);
    /* until the caller waits (the rest of the tree answers at once) */
    int64_t end = it_now_ms() + 4000;
    int seen = 0;
    for (; seen < 5 && it_now_ms() < end; it_sleep_ms(10))
        seen = atomic_load(&g.tid) && it_thread_asleep(atomic_load(&g.tid)) ? seen + 1 : 0;
    CHECK_INT(seen, 5);
    int64_t t0 = it_now_ms();
    tbon_net_destroy(t.net);
    t.net = NULL;
    pthread_join(th, NULL);
    pthread_join(rt, NULL);
    if (g.rc != TBON_ECLOSED)
        th_fail(__FILE__, __LINE__, "%s returned %d after the destroy, not TBON_ECLOSED",
                call_name[call], g.rc);
    int64_t bound = IT_SLOW ? 1000 : 100;
    if (g.back_ms - t0 > bound)
        th_fail(__FILE__, __LINE__, "%s came back %lld ms after the destroy began",
                call_name[call], (long long)(g.back_ms - t0));
}

ITEST(destroy_wakes_a_gathering)
{
    destroy_wakes(CALL_PERF);
}

ITEST(destroy_wakes_a_view_check_and_an_attribute_wait)
{
    destroy_wakes(CALL_CHECK_VIEWS);
    destroy_wakes(CALL_ATTRS_CHANGED);
}
