/* test_direct.c - messages between processes (tbon_net_send_to,
 * tbon_net_multicast, tbon_net_broadcast, tbon_net_recv_direct) over real
 * trees of 16x16: a ring of every back-end, a broadcast from a back-end, a
 * multicast to a random set, the FE as sender and receiver, and the errors.
 * Each message is "%ud %ud" {sender, k}, checked by the receiver against the
 * sender the library names; every count and order is checked exactly. */
#include "itest.h"

#define WAIT_MS 60000     /* for answers: generous, the machine may be loaded */

/* A stream over the back-ends of ranks[0..n) (all of them: NULL), answers
 * as they come. */
static tbon_stream_t *answers(it_tree_t *t, const tbon_rank_t *ranks, size_t n)
{
    tbon_comm_t *c = ranks ? tbon_fe_comm_new(t->net, ranks, n) : tbon_fe_broadcast_comm(t->net);
    tbon_stream_t *s = c ? tbon_fe_stream_new(t->net, c, TBON_FILTER_NULL, TBON_SYNC_DONTWAIT, 0)
                         : NULL;
    if (!s)
        th_fail(__FILE__, __LINE__, "a stream: %s", tbon_net_error(t->net));
    return s;
}

/* n answers "%ld" 0 of tag on s. */
static void expect_zeros(tbon_stream_t *s, int tag, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        tbon_packet_t *p = it_recv(s, WAIT_MS, what);
        if (!p)
            return;
        int64_t v = -1;
        CHECK_INT(tbon_packet_tag(p), tag);
        CHECK_INT(tbon_packet_unpack(p, "%ld", &v), 0);
        if (v != 0)
            th_fail(__FILE__, __LINE__, "%s: rank %u answered %lld", what,
                    tbon_packet_source(p), (long long)v);
        tbon_packet_unref(p);
    }
}

/* One DRECV answer: whom the messages came from and their numbers. */
struct got {
    tbon_rank_t rank;
    uint32_t *from, *num, bad;
    size_t n;
};

/* n DRECV answers from s, into g[] (sorted by the answering rank). */
static int collect(tbon_stream_t *s, struct got *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tbon_packet_t *p = it_recv(s, WAIT_MS, "the messages received");
        if (!p)
            return -1;
        size_t n1 = 0, n2 = 0;
        g[i] = (struct got){ .rank = tbon_packet_source(p) };
        CHECK_INT(tbon_packet_tag(p), IT_TAG_DRECV);
        CHECK_INT(tbon_packet_unpack(p, "%aud %aud %ud", &g[i].from, &n1, &g[i].num, &n2,
                                     &g[i].bad), 0);
        CHECK_UINT(n1, n2);
        g[i].n = n1;
        CHECK_UINT(g[i].bad, 0);
        tbon_packet_unref(p);
    }
    return 0;
}

static void free_got(struct got *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(g[i].from);
        free(g[i].num);
    }
}

/* g holds exactly count messages from sender, numbered 1..count in order. */
static void check_from(const struct got *g, tbon_rank_t sender, uint32_t count)
{
    if (g->n != count) {
        th_fail(__FILE__, __LINE__, "rank %u got %zu messages, not %u (from %u)", g->rank, g->n,
                count, sender);
        return;
    }
    for (size_t k = 0; k < g->n; k++)
        if (g->from[k] != sender || g->num[k] != k + 1) {
            th_fail(__FILE__, __LINE__, "rank %u: message %zu is %u from %u, not %zu from %u",
                    g->rank, k, g->num[k], g->from[k], k + 1, sender);
            return;
        }
}

/* The FE receives count messages from sender, 1..count in order, then
 * the sender's marker (nothing more from it before). */
static void fe_gets(tbon_net_t *net, tbon_rank_t sender, uint32_t count)
{
    for (uint32_t k = 1; k <= count + 1; k++) {
        tbon_packet_t *p = NULL;
        tbon_rank_t from = TBON_RANK_NONE;
        int rc = tbon_net_recv_direct(net, &from, &p, WAIT_MS);
        if (rc != 0) {
            th_fail(__FILE__, __LINE__, "the FE's message %u from %u: %s", k, sender,
                    tbon_net_error(net));
            return;
        }
        uint32_t r = 0, n = 0;
        CHECK_INT(tbon_packet_unpack(p, "%ud %ud", &r, &n), 0);
        CHECK_INT(tbon_packet_tag(p), k <= count ? IT_TAG_DMSG : IT_TAG_DMARK);
        CHECK_UINT(from, sender);
        CHECK_UINT(r, sender);
        CHECK_UINT(n, k <= count ? k : 0);
        tbon_packet_unref(p);
    }
}

/* Every back-end sends count messages to the next one (a ring in rank
 * order): each gets exactly its predecessor's, in order. */
static void ring(const char *shape, uint32_t count)
{
    it_tree_t t;
    if (it_start(&t, shape, NULL, NULL))
        return;
    tbon_stream_t *s = answers(&t, NULL, 0);
    if (s && tbon_stream_send(s, IT_TAG_DRING, "%aud %ud", t.be, t.nbe, count) == 0) {
        expect_zeros(s, IT_TAG_DRING, t.nbe, "the ring's sends");
        /* Every back-end marks the end of its burst: all markers in, all in. */
        REQUIRE(tbon_stream_send(s, IT_TAG_DRECV, "%ud %ud", (uint32_t)t.nbe, WAIT_MS) == 0);
        struct got *g = calloc(t.nbe, sizeof *g);
        if (g && collect(s, g, t.nbe) == 0)
            for (size_t i = 0; i < t.nbe; i++) {
                size_t me = 0;
                while (me < t.nbe && t.be[me] != g[i].rank)
                    me++;
                REQUIRE(me < t.nbe);
                check_from(&g[i], t.be[(me + t.nbe - 1) % t.nbe], count);
            }
        free_got(g, t.nbe);
        free(g);
    }
    it_stop(&t);
}

ITEST(ring_of_every_backend_16x16)
{
    ring("16x16", 20);
}

/* The same on 4x4, with more messages (also under the sanitizers). */
ITEST(ring_of_every_backend_4x4)
{
    ring("4x4", 200);
}

/* A back-end in the middle broadcasts 5 messages: every other back-end
 * and the FE get the 5, in order; the sender none. */
ITEST(broadcast_from_a_backend_reaches_all_once)
{
    it_tree_t t;
    if (it_start(&t, "16x16", NULL, NULL))
        return;
    tbon_rank_t sender = t.be[t.nbe / 2 + 3];
    tbon_stream_t *one = answers(&t, &sender, 1), *all = answers(&t, NULL, 0);
    const uint32_t count = 5;
    if (one && all && tbon_stream_send(one, IT_TAG_DBCAST, "%ud", count) == 0) {
        expect_zeros(one, IT_TAG_DBCAST, 1, "the broadcast");
        fe_gets(t.net, sender, count);
        /* Each takes what came before the sender's marker: the sender
         * nothing, a duplicate anywhere would be counted. */
        REQUIRE(tbon_stream_send(all, IT_TAG_DRECV, "%ud %ud", 1u, WAIT_MS) == 0);
        struct got *g = calloc(t.nbe, sizeof *g);
        if (g && collect(all, g, t.nbe) == 0)
            for (size_t i = 0; i < t.nbe; i++)
                check_from(&g[i], sender, g[i].rank == sender ? 0 : count);
        free_got(g, t.nbe);
        free(g);
        tbon_packet_t *p = NULL;
        CHECK_INT(tbon_net_recv_direct(t.net, NULL, &p, 0), TBON_ETIMEOUT);
    }
    it_stop(&t);
}

/* A back-end multicasts 10 messages to a random set of back-ends and the
 * FE (some named twice): each of them gets the 10 once each, in order;
 * the others none. */
ITEST(multicast_to_a_random_set_16x16)
{
    it_tree_t t;
    if (it_start(&t, "16x16", NULL, NULL))
        return;
    unsigned seed = (unsigned)it_now_ms();
    fprintf(stderr, "    seed %u\n", seed);
    srand(seed);
    tbon_rank_t sender = t.be[(size_t)rand() % t.nbe];
    tbon_rank_t set[80];
    size_t n = 0;
    set[n++] = 0;                                       /* the FE */
    while (n < 60)
        set[n++] = t.be[(size_t)rand() % t.nbe];
    set[n++] = set[5];                                  /* twice */
    set[n++] = sender;                                  /* itself too */
    tbon_stream_t *one = answers(&t, &sender, 1), *all = answers(&t, NULL, 0);
    const uint32_t count = 10;
    if (one && all && tbon_stream_send(one, IT_TAG_DSEND, "%aud %ud", set, n, count) == 0) {
        expect_zeros(one, IT_TAG_DSEND, 1, "the multicast");
        fe_gets(t.net, sender, count);
        REQUIRE(tbon_stream_send(all, IT_TAG_DRECV, "%ud %ud", 1u, WAIT_MS) == 0);
        struct got *g = calloc(t.nbe, sizeof *g);
        if (g && collect(all, g, t.nbe) == 0)
            for (size_t i = 0; i < t.nbe; i++) {
                int in = 0;
                for (size_t k = 0; k < n; k++)
                    in |= set[k] == g[i].rank;
                check_from(&g[i], sender, in ? count : 0);
            }
        free_got(g, t.nbe);
        free(g);
    }
    it_stop(&t);
}

/* The FE sends to one back-end and multicasts to two; the errors: a
 * commnode, no such rank, a reserved tag, no destination, NULL. */
ITEST(fe_sends_and_bad_calls_are_refused)
{
    it_tree_t t;
    if (it_start(&t, "4x4", NULL, NULL))
        return;
    tbon_net_t *net = t.net;
    tbon_rank_t a = t.be[3], b[2] = { t.be[0], t.be[15] };
    for (uint32_t k = 1; k <= 3; k++)
        CHECK_INT(tbon_net_send_to(net, a, IT_TAG_DMSG, "%ud %ud", 0u, k), 0);
    CHECK_INT(tbon_net_multicast(net, b, 2, IT_TAG_DMSG, "%ud %ud", 0u, 1u), 0);
    CHECK_INT(tbon_net_broadcast(net, IT_TAG_DMARK, "%ud %ud", 0u, 0u), 0);
    tbon_stream_t *s = answers(&t, NULL, 0);
    if (s && tbon_stream_send(s, IT_TAG_DRECV, "%ud %ud", 1u, WAIT_MS) == 0) {
        struct got g[16];
        if (collect(s, g, t.nbe) == 0)
            for (size_t i = 0; i < t.nbe; i++)
                check_from(&g[i], 0, g[i].rank == a ? 3 : g[i].rank == b[0] ||
                                                          g[i].rank == b[1] ? 1 : 0);
        free_got(g, t.nbe);
    }
    CHECK_INT(tbon_net_send_to(net, 1, IT_TAG_DMSG, "%ud", 1u), TBON_EINVAL);
    CHECK(strstr(tbon_net_error(net), "rank 1 is a commnode") != NULL);
    CHECK_INT(tbon_net_send_to(net, 9999, IT_TAG_DMSG, "%ud", 1u), TBON_EINVAL);
    CHECK(strstr(tbon_net_error(net), "rank 9999 is not a rank of the tree") != NULL);
    CHECK_INT(tbon_net_send_to(net, a, 5, "%ud", 1u), TBON_EINVAL);
    CHECK(strstr(tbon_net_error(net), "tag 5 is reserved") != NULL);
    CHECK_INT(tbon_net_multicast(net, b, 0, IT_TAG_DMSG, "%ud", 1u), TBON_EINVAL);
    CHECK_INT(tbon_net_broadcast(net, IT_TAG_DMSG, NULL), TBON_EINVAL);
    tbon_packet_t *p = NULL;
    CHECK_INT(tbon_net_recv_direct(net, NULL, &p, 50), TBON_ETIMEOUT);
    CHECK(p == NULL);
    it_stop(&t);
    it_check_no_procs("after the tree");
}
