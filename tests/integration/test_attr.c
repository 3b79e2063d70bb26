/* test_attr.c - attribute replication over real trees (seed 002 section
 * 4): back-ends set, overwrite and delete attributes and the FE sees each
 * change; attributes written while the path up is blocked still arrive
 * after the blocked commnode dies and the writers are adopted; a failed
 * node's attributes are dropped */
#include "itest.h"

#include <signal.h>

/* The listed back-ends set key to "value.RANK" (or delete it); every
 * back-end answers on s (a sum stream), 0 unless its call failed. */
static void set_attrs(tbon_stream_t *s, const uint32_t *ranks, size_t n, const char *key,
                      const char *value, int del)
{
    REQUIRE(tbon_stream_send(s, IT_TAG_ATTR, "%aud %s %s %d %ud", ranks, n, key, value, del,
                             0u) == 0);
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, "the attribute answers");
    int64_t sum = -1;
    if (p)
        CHECK_INT(tbon_packet_unpack(p, "%ld", &sum), 0);
    tbon_packet_unref(p);
    CHECK_INT(sum, 0);
}

/* Wait until tbon_fe_attrs_changed has named every rank of want[]. */
static void wait_changed(tbon_net_t *net, const tbon_rank_t *want, size_t n)
{
    uint8_t seen[1024] = { 0 };
    size_t got = 0;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (got < n && it_now_ms() < end) {
        tbon_rank_t r[64];
        int k = tbon_fe_attrs_changed(net, r, 64, (int)(end - it_now_ms()));
        if (k < 0)
            break;
        for (int i = 0; i < k; i++)
            for (size_t j = 0; j < n; j++)
                if (want[j] == r[i] && !seen[j]) {
                    seen[j] = 1;
                    got++;
                }
    }
    if (got < n)
        th_fail(__FILE__, __LINE__, "%zu of %zu ranks reported with changed attributes", got, n);
}

static void expect_attr(tbon_net_t *net, tbon_rank_t r, const char *key, const char *want)
{
    char buf[128];
    int rc = tbon_fe_get_attr(net, r, key, buf, sizeof buf);
    if (!want) {
        if (rc != TBON_ENOTFOUND)
            th_fail(__FILE__, __LINE__, "rank %u %s: %d \"%s\", expected none", r, key, rc,
                    rc >= 0 ? buf : "");
        return;
    }
    if (rc != (int)strlen(want) || strcmp(buf, want) != 0)
        th_fail(__FILE__, __LINE__, "rank %u %s: %d \"%s\", expected \"%s\"", r, key, rc,
                rc >= 0 ? buf : "", want);
}

ITEST(attributes_set_overwritten_deleted)
{
    it_tree_t t;
    if (it_start(&t, "4x4", NULL, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    const uint32_t four[] = { 5, 6, 7, 8 };
    set_attrs(s, four, 4, "load", "1", 0);
    wait_changed(t.net, four, 4);
    expect_attr(t.net, 5, "load", "1.5");
    expect_attr(t.net, 8, "load", "1.8");
    expect_attr(t.net, 9, "load", NULL);           /* never set */
    expect_attr(t.net, 5, "other", NULL);
    /* Overwritten, then deleted: only those two ranks change. */
    const uint32_t five[] = { 5 }, six[] = { 6 };
    set_attrs(s, five, 1, "load", "2", 0);
    set_attrs(s, six, 1, "load", "", 1);
    wait_changed(t.net, four, 2);
    expect_attr(t.net, 5, "load", "2.5");
    expect_attr(t.net, 6, "load", NULL);
    expect_attr(t.net, 7, "load", "1.7");
    tbon_rank_t r[8];
    CHECK_INT(tbon_fe_attrs_changed(t.net, r, 8, 200), TBON_ETIMEOUT);   /* nothing more */
    /* Set again after the delete. */
    set_attrs(s, six, 1, "load", "3", 0);
    wait_changed(t.net, six, 1);
    expect_attr(t.net, 6, "load", "3.6");
    /* The FE's own, and a value longer than the buffer (as snprintf). */
    CHECK_INT(tbon_net_set_attr(t.net, "role", "front-end"), 0);
    const tbon_rank_t fe[] = { 0 };
    wait_changed(t.net, fe, 1);
    char small[6];
    CHECK_INT(tbon_fe_get_attr(t.net, 0, "role", small, sizeof small), 9);
    CHECK_STR(small, "front");
    /* Bad arguments. */
    CHECK_INT(tbon_net_set_attr(t.net, "", "x"), TBON_EINVAL);
    CHECK_INT(tbon_net_set_attr(t.net, NULL, "x"), TBON_EINVAL);
    CHECK_INT(tbon_fe_get_attr(t.net, 0, NULL, small, sizeof small), TBON_EINVAL);
    CHECK_INT(tbon_fe_attrs_changed(t.net, NULL, 8, 0), TBON_EINVAL);
    it_stop(&t);
}

/* Back-end `be` is asked (on a stream of its own) to write key after 300
 * ms; once it says it sleeps, commnode `blocker` on its path up is stopped,
 * so the write waits in it; it is killed after the back-end's sleep. The FE
 * must not have the value while the blocker is stopped, and must have it
 * once the orphans are adopted (the orphan's map, or its whole subtree's,
 * goes up again). */
static void blocked_write(it_tree_t *t, tbon_rank_t be, tbon_rank_t blocker, const char *val)
{
    tbon_comm_t *c = tbon_fe_comm_new(t->net, &be, 1);
    REQUIRE(c);
    tbon_stream_t *s = tbon_fe_stream_new(t->net, c, TBON_FILTER_NULL, TBON_SYNC_DONTWAIT, 0);
    REQUIRE(s);
    pid_t pb = it_pid_of("tbon_commnode", blocker);
    REQUIRE(pb > 0);
    const uint32_t who[] = { be };
    REQUIRE(tbon_stream_send(s, IT_TAG_ATTR, "%aud %s %s %d %ud", who, (size_t)1, "k", val, 0,
                             300u) == 0);
    char buf[64];
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (tbon_fe_get_attr(t->net, be, "k.asleep", buf, sizeof buf) < 0 && it_now_ms() < end) {
        tbon_rank_t r[64];
        tbon_fe_attrs_changed(t->net, r, 64, 100);
    }
    REQUIRE(tbon_fe_get_attr(t->net, be, "k.asleep", buf, sizeof buf) == 1);
    kill(pb, SIGSTOP);
    it_sleep_ms(600);                 /* past the back-end's 300 ms: it wrote into the blocker */
    char want[64];
    snprintf(want, sizeof want, "%s.%u", val, be);
    CHECK_INT(tbon_fe_get_attr(t->net, be, "k", buf, sizeof buf), TBON_ENOTFOUND);
    kill(pb, SIGKILL);
    end = it_now_ms() + IT_RECV_MS;
    while (tbon_fe_get_attr(t->net, be, "k", buf, sizeof buf) < 0 && it_now_ms() < end) {
        tbon_rank_t r[64];
        tbon_fe_attrs_changed(t->net, r, 64, 100);
    }
    CHECK_STR(buf, want);
}

ITEST(attributes_survive_reparenting)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4x4", NULL);
    if (!s)
        return;
    /* Earlier attributes of the subtrees concerned stay. */
    const uint32_t early[] = { 22, 30 };
    set_attrs(s, early, 2, "e", "early", 0);
    wait_changed(t.net, early, 2);
    /* Lost in the direct parent: back-end 21 under commnode 5. */
    blocked_write(&t, 21, 5, "parent");
    /* Lost two levels up: back-end 29 under 7 under 1; 7 sends its
     * subtree's maps again once adopted. */
    blocked_write(&t, 29, 1, "grandparent");
    expect_attr(t.net, 22, "e", "early.22");
    expect_attr(t.net, 30, "e", "early.30");
    it_stop(&t);
}

/* A failed node's attributes are dropped (seed 002: valid while alive). */
ITEST(failed_node_attributes_dropped)
{
    it_tree_t t;
    if (it_start(&t, "4x4", NULL, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    const uint32_t nine[] = { 9 }, ten[] = { 10 };
    set_attrs(s, nine, 1, "state", "running", 0);
    set_attrs(s, ten, 1, "state", "running", 0);
    wait_changed(t.net, (const tbon_rank_t[]){ 9, 10 }, 2);
    expect_attr(t.net, 9, "state", "running.9");
    pid_t p9 = it_pid_of("tbon_test_be", 9);
    REQUIRE(p9 > 0);
    kill(p9, SIGKILL);
    wait_changed(t.net, nine, 1);
    expect_attr(t.net, 9, "state", NULL);
    expect_attr(t.net, 10, "state", "running.10");
    it_stop(&t);
}
