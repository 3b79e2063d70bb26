/* test_waves.c - a stream's waves through real nodes in one process
 * (node_stream.c, node_wave.c): requests going down numbered, the children's answers
 * coming up through the filter, synchronised (wait for all) and with a
 * timeout; and, with the test in the place of the back-ends, the units of
 * a wave (several packets, none), a late packet, and the last answer of a
 * back-end gone while the FE wrote to it. */
#include "../harness.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fabric.h"

/* FE 0 - commnode 1 - back-ends 2 and 3 */
#define TREE "h:0 => h:1 ; h:1 => h:2 h:3 ;"

static const tbon_rank_t BES[] = { 2, 3 };

#define KEY(q, i) (((uint64_t)(q) << 24) | (i))

/* The tree as nodes, ready (the FE said so). */
static int tree(fab_t *f, fab_node_t **fe, fab_node_t **cn, fab_node_t **b2, fab_node_t **b3)
{
    *fe = fab_fe(f);
    *cn = fab_node_under(f, *fe, 1, NULL);
    *b2 = fab_node_under(f, *cn, 2, NULL);
    *b3 = fab_node_under(f, *cn, 3, NULL);
    if (!*fe || !*cn || !*b2 || !*b3)
        return 0;
    CHECK_UINT(tb_topology_role(fab_topo(f), 1), TB_ROLE_COMMNODE);
    CHECK_UINT(tb_topology_role(fab_topo(f), 2), TB_ROLE_BE);
    CHECK_UINT(tb_topology_role(fab_topo(f), 3), TB_ROLE_BE);
    int ready = fab_wait_status(*fe, TB_NODE_READY, FAB_MS);
    CHECK(ready);
    return ready;
}

/* Back-end be takes the request on stream; it must be number q. */
static void take_request(fab_node_t *be, uint32_t stream, uint64_t q, long value)
{
    uint64_t got = 0;
    tbon_packet_t *p = fab_take_packet(be, stream, FAB_MS, &got);
    CHECK(p != NULL);
    CHECK_UINT(got, q);
    CHECK_INT(fab_long(p), value);
    tbon_packet_unref(p);
}

/* The FE sends value v down stream as its request q; both back-ends take it. */
static void request_both(fab_node_t *fe, fab_node_t *b2, fab_node_t *b3, uint32_t stream,
                         uint64_t q, long v)
{
    fab_send(fe, stream, tbon_packet_new((int)stream, "%ld", v), 0);
    take_request(b2, stream, q, v);
    take_request(b3, stream, q, v);
}

/* One packet on stream at the FE: its value (-1: none). */
static long fe_value(fab_node_t *fe, uint32_t stream)
{
    tbon_packet_t *p = fab_take_packet(fe, stream, FAB_MS, NULL);
    CHECK(p != NULL);
    long v = p ? fab_long(p) : -1;
    tbon_packet_unref(p);
    return v;
}

/* A wave goes up only once every child has answered: after back-end 2's
 * answer and a marker behind it on the same links (a DONTWAIT stream) have
 * passed the commnode, the FE has nothing on the waiting stream; back-end
 * 3's answer completes it, with the sum of both. Two waves, the answers in
 * either order, each exactly once. */
TEST(wait_for_all_waves_wait_for_every_child)
{
    fab_t *f = fab_new(TREE);
    REQUIRE(f);
    fab_node_t *fe, *cn, *b2, *b3;
    if (tree(f, &fe, &cn, &b2, &b3)) {
        fab_stream(fe, 1, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0, BES, 2);
        fab_stream(fe, 2, TBON_FILTER_NULL, TBON_SYNC_DONTWAIT, 0, BES, 2);
        /* wave 1: 2 answers, then 3 */
        request_both(fe, b2, b3, 1, 1, 100);
        fab_send(b2, 1, tbon_packet_new(1, "%ld", 20L), KEY(1, 0));
        fab_send(b2, 2, tbon_packet_new(2, "%ld", 7L), KEY(0, 0));
        CHECK_INT(fe_value(fe, 2), 7);
        CHECK_UINT(fab_pending_packets(fe, 1), 0);      /* waits for 3 */
        fab_send(b3, 1, tbon_packet_new(1, "%ld", 30L), KEY(1, 0));
        CHECK_INT(fe_value(fe, 1), 50);
        /* wave 2: 3 answers, then 2 */
        request_both(fe, b2, b3, 1, 2, 200);
        fab_send(b3, 1, tbon_packet_new(1, "%ld", 41L), KEY(2, 0));
        fab_send(b3, 2, tbon_packet_new(2, "%ld", 8L), KEY(0, 1));
        CHECK_INT(fe_value(fe, 2), 8);
        CHECK_UINT(fab_pending_packets(fe, 1), 0);      /* waits for 2 */
        fab_send(b2, 1, tbon_packet_new(1, "%ld", 42L), KEY(2, 0));
        CHECK_INT(fe_value(fe, 1), 83);
        /* nothing else went up on the waiting stream */
        fab_send(b2, 2, tbon_packet_new(2, "%ld", 9L), KEY(0, 1));
        CHECK_INT(fe_value(fe, 2), 9);
        CHECK_UINT(fab_pending_packets(fe, 1), 0);
    }
    fab_free(f);
}

/* TIMEOUT: a wave that lacks a child is cut once the timeout has passed
 * since its first packet, with what came (5 alone); the next wave, complete,
 * goes at once (the other stream's timeout of 60 s would outlast the wait
 * for it). */
TEST(timeout_waves_are_cut_and_complete_ones_do_not_wait)
{
    fab_t *f = fab_new(TREE);
    REQUIRE(f);
    fab_node_t *fe, *cn, *b2, *b3;
    if (tree(f, &fe, &cn, &b2, &b3)) {
        fab_stream(fe, 1, TBON_FILTER_SUM, TBON_SYNC_TIMEOUT, 300, BES, 2);
        fab_stream(fe, 2, TBON_FILTER_SUM, TBON_SYNC_TIMEOUT, 60000, BES, 2);
        request_both(fe, b2, b3, 1, 1, 1);
        int64_t t0 = tb_now_ms();
        fab_send(b2, 1, tbon_packet_new(1, "%ld", 5L), KEY(1, 0));
        CHECK_INT(fe_value(fe, 1), 5);
        int64_t took = tb_now_ms() - t0;
        CHECK(took >= 300);
        /* the stream goes on: both answer the next request */
        request_both(fe, b2, b3, 1, 2, 2);
        fab_send(b2, 1, tbon_packet_new(1, "%ld", 10L), KEY(2, 0));
        fab_send(b3, 1, tbon_packet_new(1, "%ld", 20L), KEY(2, 0));
        CHECK_INT(fe_value(fe, 1), 30);
        /* complete: no waiting for 60 s */
        request_both(fe, b2, b3, 2, 1, 3);
        fab_send(b3, 2, tbon_packet_new(2, "%ld", 11L), KEY(1, 0));
        fab_send(b2, 2, tbon_packet_new(2, "%ld", 12L), KEY(1, 0));
        CHECK_INT(fe_value(fe, 2), 23);
        CHECK_UINT(fab_pending_packets(fe, 1), 0);
    }
    fab_free(f);
}

/* Next DATA frame at peer pe: on stream, request q, value v. */
static void peer_request(fab_peer_t *pe, uint32_t stream, uint64_t q, long v)
{
    fab_msg_t m;
    int rc = fab_peer_next(pe, &m, FAB_MS);
    CHECK_INT(rc, 1);
    CHECK_UINT(m.hdr.type, TB_FRAME_DATA);
    CHECK_UINT(m.hdr.stream, stream);
    CHECK_UINT(m.hdr.key, q);
    CHECK_INT(m.pkt ? fab_long(m.pkt) : -1, v);
    fab_msg_clear(&m);
}

/* The test in the place of the back-ends, to send units as it likes: a unit
 * of two packets (TB_FRAME_F_MORE) counts as one child's answer, an empty
 * unit (a DATA frame without a packet) as an answer with nothing; a packet
 * for a wave already closed is dropped (SUM keeps no state to take it into
 * the next wave), so the next wave's sum is exactly its own. */
TEST(units_empty_answers_and_late_packets)
{
    fab_t *f = fab_new(TREE);
    REQUIRE(f);
    fab_node_t *fe = fab_fe(f);
    fab_node_t *cn = fab_node_under(f, fe, 1, NULL);
    fab_peer_t *p2 = fab_peer_under(f, cn, 2);
    fab_peer_t *p3 = fab_peer_under(f, cn, 3);
    if (fe && cn && p2 && p3) {
        REQUIRE(fab_wait_status(fe, TB_NODE_READY, FAB_MS));
        tbon_packet_unref(fab_peer_until_ctl(p2, TB_CTL_PORTS, FAB_MS));
        tbon_packet_unref(fab_peer_until_ctl(p3, TB_CTL_PORTS, FAB_MS));
        fab_stream(fe, 1, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0, BES, 2);
        tbon_packet_unref(fab_peer_expect_ctl(p2, TB_CTL_STREAM, FAB_MS));
        tbon_packet_unref(fab_peer_expect_ctl(p3, TB_CTL_STREAM, FAB_MS));
        fab_send(fe, 1, tbon_packet_new(1, "%ld", 0L), 0);
        peer_request(p2, 1, 1, 0);
        peer_request(p3, 1, 1, 0);
        fab_peer_data(p2, 1, KEY(1, 0), 1, tbon_packet_new(1, "%ld", 1L));
        fab_peer_data(p2, 1, KEY(1, 1), 0, tbon_packet_new(1, "%ld", 2L));
        fab_peer_empty(p3, 1, KEY(1, 0));
        CHECK_INT(fe_value(fe, 1), 3);
        /* 3's answer to request 1 after all: late, dropped */
        fab_peer_data(p3, 1, KEY(1, 0), 0, tbon_packet_new(1, "%ld", 1000L));
        fab_send(fe, 1, tbon_packet_new(1, "%ld", 0L), 0);
        peer_request(p2, 1, 2, 0);
        peer_request(p3, 1, 2, 0);
        fab_peer_data(p3, 1, KEY(2, 0), 0, tbon_packet_new(1, "%ld", 40L));
        fab_peer_data(p2, 1, KEY(2, 0), 0, tbon_packet_new(1, "%ld", 60L));
        CHECK_INT(fe_value(fe, 1), 100);
        CHECK_UINT(fab_pending_packets(fe, 1), 0);
    }
    fab_free(f);
}

/* A back-end need not answer every request: when none answers request 1
 * and both answer request 2, the FE's application gets wave 2, and nothing
 * for request 1 - not a lost wave, which is said only of a wave that died
 * with failed nodes (node_wave.c, gap_settled). */
TEST(request_nobody_answers_is_passed_over_unsaid)
{
    fab_t *f = fab_new(TREE);
    REQUIRE(f);
    fab_node_t *fe, *cn, *b2, *b3;
    if (tree(f, &fe, &cn, &b2, &b3)) {
        fab_stream(fe, 1, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0, BES, 2);
        request_both(fe, b2, b3, 1, 1, 100);
        request_both(fe, b2, b3, 1, 2, 200);
        fab_send(b2, 1, tbon_packet_new(1, "%ld", 20L), KEY(2, 0));
        fab_send(b3, 1, tbon_packet_new(1, "%ld", 30L), KEY(2, 0));
        CHECK_INT(fe_value(fe, 1), 50);
        CHECK_UINT(fab_pending_packets(fe, 1), 0);
    }
    fab_free(f);
}

/* The FE's reactor held in its delivery of a marker (stream 2, value 99)
 * until the test lets it go: what peers do meanwhile comes to it at once. */
static struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int held, open;
} gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };

static void gate_deliver(void *arg, uint32_t stream, tbon_packet_t *p, uint64_t q)
{
    (void)arg;
    (void)q;
    if (stream == 2 && p && strcmp(tbon_packet_format(p), "%ld") == 0 && fab_long(p) == 99) {
        pthread_mutex_lock(&gate.mu);
        gate.held = 1;
        pthread_cond_broadcast(&gate.cond);
        while (!gate.open)
            pthread_cond_wait(&gate.cond, &gate.mu);
        pthread_mutex_unlock(&gate.mu);
    }
    tbon_packet_unref(p);
}

static int gate_wait_held(int ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    pthread_mutex_lock(&gate.mu);
    int rc = 0;
    while (!gate.held && rc == 0)
        rc = pthread_cond_timedwait(&gate.cond, &gate.mu, &dl);
    int held = gate.held;
    pthread_mutex_unlock(&gate.mu);
    return held;
}

/* Closed again, for the next case. */
static void gate_reset(void)
{
    pthread_mutex_lock(&gate.mu);
    gate.held = gate.open = 0;
    pthread_mutex_unlock(&gate.mu);
}

static void gate_open(void)
{
    pthread_mutex_lock(&gate.mu);
    gate.open = 1;
    pthread_cond_broadcast(&gate.cond);
    pthread_mutex_unlock(&gate.mu);
}

/* FE 0 over back-ends 1 and 2 as peers (fe, p1, p2 in f): streams 1 (SUM,
 * waiting for all) and 2 (NULL, DONTWAIT), request 1 on stream 1 taken by
 * both, then 2 MiB down stream 2, which 1 does not read: once 2 has all of
 * it, the FE has queued it for 1 too, far past what 1's socket holds. Then
 * the FE's reactor is held in the delivery of 2's marker. 1 if all went so
 * (else the case failed, and the gate is open). */
static int fe_held_with_writes_to_1(fab_t *f, fab_node_t **fe, fab_peer_t **p1, fab_peer_t **p2)
{
    static const tbon_rank_t bes[] = { 1, 2 };
    gate_reset();
    tb_node_cbs_t also = { .deliver = gate_deliver };
    *fe = fab_fe_also(f, &also);
    *p1 = *fe ? fab_peer_under(f, *fe, 1) : NULL;
    *p2 = *fe ? fab_peer_under(f, *fe, 2) : NULL;
    int ok = *fe && *p1 && *p2 && fab_wait_status(*fe, TB_NODE_READY, FAB_MS);
    CHECK(ok);
    if (!ok) {
        gate_open();
        return 0;
    }
    tbon_packet_unref(fab_peer_until_ctl(*p1, TB_CTL_PORTS, FAB_MS));
    tbon_packet_unref(fab_peer_until_ctl(*p2, TB_CTL_PORTS, FAB_MS));
    fab_stream(*fe, 1, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0, bes, 2);
    fab_stream(*fe, 2, TBON_FILTER_NULL, TBON_SYNC_DONTWAIT, 0, bes, 2);
    for (int s = 1; s <= 2; s++) {
        tbon_packet_unref(fab_peer_expect_ctl(*p1, TB_CTL_STREAM, FAB_MS));
        tbon_packet_unref(fab_peer_expect_ctl(*p2, TB_CTL_STREAM, FAB_MS));
    }
    fab_send(*fe, 1, tbon_packet_new(1, "%ld", 0L), 0);
    peer_request(*p1, 1, 1, 0);
    peer_request(*p2, 1, 1, 0);
    enum { NBIG = 4, BIG = 512 * 1024 };
    uint8_t *big = calloc(1, BIG);
    CHECK(big != NULL);
    for (int i = 0; big && i < NBIG; i++)
        fab_send(*fe, 2, tbon_packet_new(2, "%auc", big, (size_t)BIG), 0);
    free(big);
    for (int i = 0; i < NBIG; i++) {
        fab_msg_t m;
        CHECK_INT(fab_peer_next(*p2, &m, FAB_MS), 1);
        CHECK_UINT(m.hdr.stream, 2);
        fab_msg_clear(&m);
    }
    fab_peer_data(*p2, 2, KEY(0, 0), 0, tbon_packet_new(2, "%ld", 99L));
    if (!gate_wait_held(FAB_MS)) {
        CHECK(!"the FE delivered 2's marker");
        gate_open();
        return 0;
    }
    return 1;
}

/* A child's last words: back-end 1 answers and is gone, all of it while
 * the FE's reactor is held with frames to write to 1. Let go, the FE finds
 * the socket writable and its write fails before it has read 1's answer,
 * which is still in the socket: it must be taken all the same, and the wave
 * is whole at once (20 + 30, both back-ends in it), not cut without 1 once
 * the link is given up. */
TEST(answer_of_a_child_gone_while_written_to_is_taken)
{
    fab_t *f = fab_new("h:0 => h:1 h:2 ;");
    REQUIRE(f);
    fab_node_t *fe;
    fab_peer_t *p1, *p2;
    if (fe_held_with_writes_to_1(f, &fe, &p1, &p2)) {
        fab_peer_data(p1, 1, KEY(1, 0), 0, tbon_packet_new(1, "%ld", 30L));
        fab_peer_close(p1);
        fab_peer_data(p2, 1, KEY(1, 0), 0, tbon_packet_new(1, "%ld", 20L));
        gate_open();
        tbon_packet_t *p = fab_take_packet(fe, 1, FAB_MS, NULL);
        CHECK(p != NULL);
        if (p) {
            tbon_rank_t cov[4];
            CHECK_INT(fab_long(p), 50);
            CHECK_UINT(tbon_packet_covered(p, cov, 4), 2);
            tbon_packet_unref(p);
        }
    }
    fab_free(f);
}

/* The same with a LEAVE as the last words: back-end 1 left, it did not
 * fail (TBON_EV_NODE_LEFT at once, no TBON_EV_NODE_FAILED). */
TEST(leave_of_a_child_gone_while_written_to_is_taken)
{
    fab_t *f = fab_new("h:0 => h:1 h:2 ;");
    REQUIRE(f);
    fab_node_t *fe;
    fab_peer_t *p1, *p2;
    if (fe_held_with_writes_to_1(f, &fe, &p1, &p2)) {
        fab_peer_ctl(p1, TB_CTL_LEAVE, tb_ctl_leave_encode(&(tb_ctl_leave_t){ 0 }));
        fab_peer_close(p1);
        gate_open();
        tbon_event_t ev;
        int got = fab_take_event(fe, &ev, FAB_MS);
        CHECK(got);
        if (got) {
            CHECK_INT(ev.type, TBON_EV_NODE_LEFT);
            CHECK_UINT(ev.rank, 1);
        }
    }
    fab_free(f);
}
