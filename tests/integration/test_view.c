/* test_view.c - the membership layer over real trees: views that become
 * stable after single, multiple and cascading failures and after a node
 * that dies before it acknowledges; the failure notice that reaches the FE
 * while the tree path is blocked; every back-end's own view and, asked
 * for, its membership events (the FE's own); and the
 * consistency check (passing after each scenario; failing on a copy that
 * differs: tests/inproc/test_view.c, check_finds_a_corrupted_copy)
 */
#include "itest.h"

#include <signal.h>

static int in(const tbon_rank_t *v, size_t n, tbon_rank_t r)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == r)
            return 1;
    return 0;
}

/* Wait until every rank of failed[] was reported failed, every rank of
 * adopted[] adopted, and then the view is stable. Returns the stable
 * version, or 0 (failure recorded). Checks that no stable view comes while
 * an expected orphan is not yet adopted. */
static uint64_t wait_stable(tbon_net_t *net, const tbon_rank_t *failed, size_t nf,
                            const tbon_rank_t *adopted, size_t na)
{
    uint8_t fseen[64] = { 0 }, aseen[64] = { 0 };
    size_t nfs = 0, nas = 0;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (it_now_ms() < end) {
        tbon_event_t ev;
        if (tbon_net_next_event(net, &ev, (int)(end - it_now_ms())) != 0)
            break;
        if (ev.type == TBON_EV_NODE_FAILED) {
            for (size_t i = 0; i < nf && i < 64; i++)
                if (failed[i] == ev.rank && !fseen[i]) {
                    fseen[i] = 1;
                    nfs++;
                }
            if (!in(failed, nf, ev.rank))
                th_fail(__FILE__, __LINE__, "unexpected failure of rank %u", ev.rank);
        } else if (ev.type == TBON_EV_NODE_ADOPTED) {
            for (size_t i = 0; i < na && i < 64; i++)
                if (adopted[i] == ev.rank && !aseen[i]) {
                    aseen[i] = 1;
                    nas++;
                }
        } else if (ev.type == TBON_EV_VIEW_STABLE) {
            /* An orphan still waiting for its adopter means no stable view. */
            if (nfs == nf && nas < na)
                th_fail(__FILE__, __LINE__, "view %llu stable with %zu of %zu orphans adopted",
                        (unsigned long long)ev.view_version, nas, na);
            if (nfs == nf && nas == na) {
                CHECK(ev.view_version >= 2);
                return ev.view_version;
            }
        }
    }
    th_fail(__FILE__, __LINE__, "no stable view: %zu of %zu failures, %zu of %zu adoptions "
            "seen", nfs, nf, nas, na);
    return 0;
}

/* After a stable view v: nothing newer comes, the FE's view holds exactly
 * the nodes of the topology less dead[], the consistency check passes, and
 * every live back-end has applied v and holds the FE's view. */
static void check_everyone(it_tree_t *t, uint64_t v, const tbon_rank_t *dead, size_t nd)
{
    tbon_event_t ev;
    while (tbon_net_next_event(t->net, &ev, 200) == 0)
        if (ev.type == TBON_EV_VIEW_STABLE)
            v = ev.view_version;
    CHECK_UINT(tbon_net_view_version(t->net), v);
    static tbon_rank_t live[IT_MAX_BE + 512];
    int n = tbon_net_view(t->net, live, sizeof live / sizeof live[0]);
    CHECK_INT(n, (long long)(t->total - nd));
    for (int i = 0; i < n; i++)
        if (in(dead, nd, live[i]))
            th_fail(__FILE__, __LINE__, "dead rank %u in the FE's view", live[i]);
    tbon_view_check_t c;
    int rc = tbon_fe_check_views(t->net, &c, IT_RECV_MS);
    CHECK_INT(rc, 0);
    if (rc != 0)
        th_fail(__FILE__, __LINE__, "check: %s (first disagreeing %u, first missing %u)",
                tbon_net_error(t->net), c.ndisagree ? c.disagree[0] : 0,
                c.nmissing ? c.missing[0] : 0);
    CHECK_UINT(c.nodes, (size_t)n);
    CHECK_UINT(c.agree, (size_t)n);
    CHECK_UINT(c.view_version, v);
    /* Each back-end's own view, through a stream of every live one. */
    tbon_stream_t *s = it_stream(t->net, TBON_FILTER_NULL, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    REQUIRE(tbon_stream_send(s, IT_TAG_VIEW, "%ud", 0u) == 0);
    size_t want = tbon_net_num_backends(t->net);
    for (size_t k = 0; k < want; k++) {
        tbon_packet_t *p = it_recv(s, IT_RECV_MS, "a back-end's view");
        if (!p)
            break;
        uint32_t r = 0, *ranks = NULL;
        uint64_t bv = 0;
        size_t nr = 0;
        CHECK_INT(tbon_packet_unpack(p, "%ud %uld %aud", &r, &bv, &ranks, &nr), 0);
        tbon_packet_unref(p);
        if (bv != v || nr != (size_t)n || (nr && memcmp(ranks, live, nr * sizeof *ranks)))
            th_fail(__FILE__, __LINE__, "back-end %u: view %llu of %zu nodes, FE: view %llu "
                    "of %d", r, (unsigned long long)bv, nr, (unsigned long long)v, n);
        free(ranks);
    }
}

/* The back-ends of t less dead[]. */
static size_t alive_be(const it_tree_t *t, const tbon_rank_t *dead, size_t nd, tbon_rank_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < t->nbe; i++)
        if (!in(dead, nd, t->be[i]))
            out[k++] = t->be[i];
    return k;
}

static void waves_exact(it_tree_t *t, tbon_stream_t *s, const tbon_rank_t *dead, size_t nd,
                        uint32_t from)
{
    static tbon_rank_t be[IT_MAX_BE];
    size_t k = alive_be(t, dead, nd, be);
    for (uint32_t w = from; w < from + 5; w++)
        if (it_sum_wave(s, w, be, k) != 0)
            break;
}

/* A back-end dies: the failure is a new view, stable once the other 19
 * processes have it. */
ITEST(backend_failure_gives_a_stable_view)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4", NULL);
    if (!s)
        return;
    CHECK_UINT(tbon_net_view_version(t.net), 1);
    check_everyone(&t, 1, NULL, 0);
    const tbon_rank_t dead[] = { 9 };
    pid_t victim = it_pid_of("tbon_test_be", 9);
    REQUIRE(victim > 0);
    kill(victim, SIGKILL);
    uint64_t v = wait_stable(t.net, dead, 1, NULL, 0);
    REQUIRE(v >= 2);
    check_everyone(&t, v, dead, 1);
    waves_exact(&t, s, dead, 1, 1);
    it_stop(&t);
}

/* A commnode dies: its four commnode children are adopted, and only then
 * is the view stable (no orphan is left out of it). */
ITEST(commnode_failure_stable_after_adoptions)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4x4", NULL);
    if (!s)
        return;
    const tbon_rank_t dead[] = { 1 }, orphans[] = { 5, 6, 7, 8 };
    pid_t victim = it_pid_of("tbon_commnode", 1);
    REQUIRE(victim > 0);
    kill(victim, SIGKILL);
    uint64_t v = wait_stable(t.net, dead, 1, orphans, 4);
    REQUIRE(v >= 2);
    check_everyone(&t, v, dead, 1);
    waves_exact(&t, s, dead, 1, 1);
    it_stop(&t);
}

/* Back-ends that asked for membership events (--events) get the same
 * changes as the FE: commnode 1 killed, every live back-end's events are
 * exactly FAILED 1 and ADOPTED 5-8 (by the adopters the FE named), each
 * with a view version no later than the stable one, in version order, and
 * last VIEW_STABLE with the FE's stable version. */
ITEST(backends_get_the_fes_membership_events)
{
    it_tree_t t;
    const char *argv[] = { "--events", NULL };
    if (it_start(&t, "4x4x4", argv, NULL))
        return;
    pid_t victim = it_pid_of("tbon_commnode", 1);
    REQUIRE(victim > 0);
    kill(victim, SIGKILL);
    /* The FE's own events, kept to compare. */
    tbon_rank_t adopter[9] = { 0 };     /* 0 too: the FE may adopt */
    int failed = 0, seen = 0;
    uint64_t v = 0;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (!v && it_now_ms() < end) {
        tbon_event_t ev;
        if (tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) != 0)
            break;
        if (ev.type == TBON_EV_NODE_FAILED && ev.rank == 1)
            failed = 1;
        else if (ev.type == TBON_EV_NODE_ADOPTED && ev.rank >= 5 && ev.rank <= 8) {
            adopter[ev.rank] = ev.parent;
            seen |= 1 << (ev.rank - 5);
        } else if (ev.type == TBON_EV_VIEW_STABLE && failed && seen == 15) {
            v = ev.view_version;
        }
    }
    REQUIRE(v >= 2);
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_NULL, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    REQUIRE(tbon_stream_send(s, IT_TAG_EVENTS, "%ud", 0u) == 0);
    size_t want = tbon_net_num_backends(t.net);
    CHECK_UINT(want, 64);
    for (size_t k = 0; k < want; k++) {
        tbon_packet_t *p = it_recv(s, IT_RECV_MS, "a back-end's events");
        if (!p)
            break;
        int32_t *type = NULL;
        uint32_t *who = NULL, *par = NULL;
        uint64_t *ver = NULL;
        size_t n1 = 0, n2 = 0, n3 = 0, n4 = 0;
        CHECK_INT(tbon_packet_unpack(p, "%ad %aud %aud %auld", &type, &n1, &who, &n2, &par, &n3,
                                     &ver, &n4), 0);
        tbon_rank_t be = tbon_packet_source(p);
        tbon_packet_unref(p);
        int f = 0, a = 0, st = 0, bad = n1 != 6;
        for (size_t i = 0; i < n1 && i < n2 && i < n3 && i < n4; i++) {
            if (type[i] == TBON_EV_NODE_FAILED && who[i] == 1)
                f++;
            else if (type[i] == TBON_EV_NODE_ADOPTED && who[i] >= 5 && who[i] <= 8 &&
                     par[i] == adopter[who[i]])
                a++;
            else if (type[i] == TBON_EV_VIEW_STABLE && ver[i] == v && i + 1 == n1)
                st++;           /* the FE's stable view, last */
            else
                bad = 1;
            bad |= ver[i] > v || (i && ver[i] < ver[i - 1]);
        }
        if (bad || f != 1 || a != 4 || st != 1)
            th_fail(__FILE__, __LINE__, "back-end %u: %zu events, %d failures of 1, %d "
                    "adoptions of 5-8 as the FE saw them, %d stable views %llu", be, n1, f,
                    a, st, (unsigned long long)v);
        free(type);
        free(who);
        free(par);
        free(ver);
    }
    it_stop(&t);
}

/* An orphan that is slow to find its adopter holds the view back: commnode
 * 5 is stopped when its parent 1 dies, so 6, 7 and 8 are adopted but 5 has
 * no parent, and no view is stable until 5 runs again and is adopted too. */
ITEST(orphan_holds_the_view_until_adopted)
{
    tbon_fe_options_t o = { 0 };
    o.heartbeat_ms = 20000;     /* 5 must not be fenced while it is stopped */
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4x4", &o);
    if (!s)
        return;
    pid_t p1 = it_pid_of("tbon_commnode", 1), p5 = it_pid_of("tbon_commnode", 5);
    REQUIRE(p1 > 0 && p5 > 0);
    kill(p5, SIGSTOP);
    kill(p1, SIGKILL);
    tbon_event_t ev;
    size_t adopted = 0;
    int stable = 0;
    int64_t end = it_now_ms() + 1000;
    while (it_now_ms() < end && tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) == 0) {
        adopted += ev.type == TBON_EV_NODE_ADOPTED;
        stable |= ev.type == TBON_EV_VIEW_STABLE;
        CHECK(ev.type != TBON_EV_NODE_ADOPTED || ev.rank != 5);
    }
    CHECK_UINT(adopted, 3);
    CHECK(!stable);
    kill(p5, SIGCONT);
    const tbon_rank_t dead[] = { 1 }, orphans[] = { 5 };
    uint64_t v = wait_stable(t.net, NULL, 0, orphans, 1);
    REQUIRE(v >= 2);
    check_everyone(&t, v, dead, 1);
    waves_exact(&t, s, dead, 1, 1);
    it_stop(&t);
}

/* An orphan that never comes back is taken for failed after one
 * heartbeat timeout (at least a second), so the view does not wait for it
 * for ever: back-end 5 is stopped when its parent 1 dies (no one else
 * watches it); 6, 7 and 8 find other parents; the FE declares 5 failed and
 * the view is stable without it. Woken up, 5 is refused by every adopter
 * and leaves. */
ITEST(orphan_never_adopted_is_declared_failed)
{
    tbon_fe_options_t o = { 0 };
    /* Short, so that the test is short, but not so short that a loaded
     * machine makes the back-ends suspects before the first wave. */
    o.heartbeat_ms = IT_SLOW ? 2500 : 1000;
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4", &o);
    if (!s)
        return;
    pid_t p1 = it_pid_of("tbon_commnode", 1), p5 = it_pid_of("tbon_test_be", 5);
    REQUIRE(p1 > 0 && p5 > 0);
    kill(p5, SIGSTOP);
    int64_t t0 = it_now_ms();
    kill(p1, SIGKILL);
    const tbon_rank_t dead[] = { 1, 5 }, orphans[] = { 6, 7, 8 };
    uint64_t v = wait_stable(t.net, dead, 2, orphans, 3);
    CHECK(it_now_ms() - t0 >= o.heartbeat_ms - 100);
    REQUIRE(v >= 2);
    check_everyone(&t, v, dead, 2);
    waves_exact(&t, s, dead, 2, 1);
    kill(p5, SIGCONT);
    int64_t end = it_now_ms() + 5000;
    while (it_pid_of("tbon_test_be", 5) && it_now_ms() < end)
        it_sleep_ms(20);
    CHECK(it_pid_of("tbon_test_be", 5) == 0);
    it_stop(&t);
}

/* Failures at three levels at once (seed 000 section 3.5): a commnode at
 * depth 1, one at depth 2 elsewhere, and a back-end elsewhere again. */
ITEST(multiple_failures_at_once)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4x4", NULL);
    if (!s)
        return;
    /* 2 has commnodes 9..12; 14 (under 3) has back-ends 57..60; 80 is a
     * back-end under 19 (under 4). */
    const tbon_rank_t dead[] = { 2, 14, 80 };
    const tbon_rank_t orphans[] = { 9, 10, 11, 12, 57, 58, 59, 60 };
    pid_t p2 = it_pid_of("tbon_commnode", 2), p14 = it_pid_of("tbon_commnode", 14);
    pid_t p80 = it_pid_of("tbon_test_be", 80);
    REQUIRE(p2 > 0 && p14 > 0 && p80 > 0);
    kill(p2, SIGKILL);
    kill(p14, SIGKILL);
    kill(p80, SIGKILL);
    uint64_t v = wait_stable(t.net, dead, 3, orphans, 8);
    REQUIRE(v >= 2);
    check_everyone(&t, v, dead, 3);
    waves_exact(&t, s, dead, 3, 1);
    it_stop(&t);
}

/* Failures in the middle of a view change: commnode 1 dies, and as soon as
 * the first of its orphans is adopted, that orphan's adopter (unless it is
 * the FE) and another orphan die too, while their own views are still
 * travelling. The view becomes stable later, with everything in it. */
ITEST(cascading_failures)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4x4", NULL);
    if (!s)
        return;
    pid_t victim = it_pid_of("tbon_commnode", 1);
    REQUIRE(victim > 0);
    kill(victim, SIGKILL);
    tbon_rank_t dead[3] = { 1 }, first = TBON_RANK_NONE, adopter = TBON_RANK_NONE;
    size_t nd = 1;
    tbon_event_t ev;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (first == TBON_RANK_NONE && tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) == 0)
        if (ev.type == TBON_EV_NODE_ADOPTED && ev.rank >= 5 && ev.rank <= 8) {
            first = ev.rank;
            adopter = ev.parent;
        }
    REQUIRE(first != TBON_RANK_NONE);
    /* Another orphan of 1 (commnode 5..8, not the first) dies... */
    tbon_rank_t other = first == 8 ? 7 : first + 1;
    pid_t po = it_pid_of("tbon_commnode", other);
    REQUIRE(po > 0);
    kill(po, SIGKILL);
    dead[nd++] = other;
    /* ...and the first orphan's adopter, one level up. */
    if (adopter != 0) {
        pid_t pa = it_pid_of("tbon_commnode", adopter);
        REQUIRE(pa > 0);
        kill(pa, SIGKILL);
        dead[nd++] = adopter;
    }
    /* Every orphan left must be adopted in the end: the other commnodes of
     * 5..8, the dead one's back-ends, and if the adopter died, its
     * children: all of them are alive nodes without the dead parent. The
     * stable view says the whole tree has a parent. */
    uint64_t v = 0;
    end = it_now_ms() + IT_RECV_MS;
    while (!v && tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) == 0) {
        if (ev.type == TBON_EV_NODE_FAILED && !in(dead, nd, ev.rank))
            th_fail(__FILE__, __LINE__, "unexpected failure of rank %u", ev.rank);
        if (ev.type == TBON_EV_VIEW_STABLE) {
            int all = 1;
            tbon_rank_t live[128];
            int n = tbon_net_view(t.net, live, 128);
            all = n == (int)(t.total - nd);
            if (all)
                v = ev.view_version;
        }
    }
    REQUIRE(v >= 2);
    check_everyone(&t, v, dead, nd);
    waves_exact(&t, s, dead, nd, 1);
    it_stop(&t);
}

/* A node that dies before it acknowledges (seed 000 section 3.5): back-end
 * 6 is stopped, so the view with back-end 9's failure cannot become stable;
 * when 6 is killed, a later view does. */
ITEST(node_dies_before_acknowledging)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4", NULL);
    if (!s)
        return;
    pid_t p6 = it_pid_of("tbon_test_be", 6), p9 = it_pid_of("tbon_test_be", 9);
    REQUIRE(p6 > 0 && p9 > 0);
    kill(p6, SIGSTOP);
    kill(p9, SIGKILL);
    tbon_event_t ev;
    int failed9 = 0, stable = 0;
    int64_t end = it_now_ms() + 500;
    while (it_now_ms() < end && tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) == 0) {
        failed9 |= ev.type == TBON_EV_NODE_FAILED && ev.rank == 9;
        stable |= ev.type == TBON_EV_VIEW_STABLE;
    }
    CHECK(failed9);
    CHECK(!stable);             /* 6 has not acknowledged */
    kill(p6, SIGKILL);
    const tbon_rank_t dead[] = { 6 }, both[] = { 6, 9 };
    uint64_t v = wait_stable(t.net, dead, 1, NULL, 0);
    REQUIRE(v >= 3);
    check_everyone(&t, v, both, 2);
    waves_exact(&t, s, both, 2, 1);
    it_stop(&t);
}

/* A back-end whose application is busy (outside every tbon call) still
 * applies and acknowledges views: its event detection thread runs the node
 * when something arrives. Back-end 6 sleeps 3 s in its request handler;
 * back-end 9 dies meanwhile; the view is stable long before 6 wakes up. */
ITEST(busy_backend_still_acknowledges)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4", NULL);
    if (!s)
        return;
    /* 6 sleeps 3 s in its handler (and says so first: "busy.asleep"). */
    const uint32_t slow[] = { 6 };
    REQUIRE(tbon_stream_send(s, IT_TAG_ATTR, "%aud %s %s %d %ud", slow, (size_t)1, "busy", "x",
                             0, 3000u) == 0);
    char buf[8];
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (tbon_fe_get_attr(t.net, 6, "busy.asleep", buf, sizeof buf) < 0 && it_now_ms() < end) {
        tbon_rank_t r[16];
        tbon_fe_attrs_changed(t.net, r, 16, 100);
    }
    REQUIRE(tbon_fe_get_attr(t.net, 6, "busy.asleep", buf, sizeof buf) == 1);
    pid_t p9 = it_pid_of("tbon_test_be", 9);
    REQUIRE(p9 > 0);
    int64_t t0 = it_now_ms();
    kill(p9, SIGKILL);
    const tbon_rank_t dead[] = { 9 };
    uint64_t v = wait_stable(t.net, dead, 1, NULL, 0);
    CHECK(it_now_ms() - t0 < 2000);
    REQUIRE(v >= 2);
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, "the slow wave");
    tbon_packet_unref(p);
    check_everyone(&t, v, dead, 1);
    it_stop(&t);
}

/* The failure notice goes straight to the FE (seed 002 section 3): with
 * commnode 1 stopped, the report of back-end 21's death (from commnode 5,
 * 1's child) cannot travel up the tree, yet the FE hears of it at once.
 * Once 1 runs again the view becomes stable. */
ITEST(failure_notice_bypasses_a_stopped_path)
{
    tbon_fe_options_t o = { 0 };
    o.heartbeat_ms = 20000;     /* 1 must not be fenced while it is stopped */
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4x4", &o);
    if (!s)
        return;
    pid_t p1 = it_pid_of("tbon_commnode", 1), p21 = it_pid_of("tbon_test_be", 21);
    REQUIRE(p1 > 0 && p21 > 0);
    kill(p1, SIGSTOP);
    int64_t t0 = it_now_ms();
    kill(p21, SIGKILL);
    tbon_event_t ev;
    int rc = tbon_net_next_event(t.net, &ev, 5000);
    int64_t took = it_now_ms() - t0;
    CHECK_INT(rc, 0);
    CHECK_INT(ev.type, TBON_EV_NODE_FAILED);
    CHECK_UINT(ev.rank, 21);
    CHECK(took < 3000);
    CHECK_INT(tbon_net_next_event(t.net, &ev, 300), TBON_ETIMEOUT);  /* not stable: 1 is stopped */
    kill(p1, SIGCONT);
    const tbon_rank_t dead[] = { 21 };
    uint64_t v = 0;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (!v && tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) == 0)
        if (ev.type == TBON_EV_VIEW_STABLE)
            v = ev.view_version;
        else
            th_fail(__FILE__, __LINE__, "unexpected event %d for rank %u", ev.type, ev.rank);
    REQUIRE(v >= 2);
    check_everyone(&t, v, dead, 1);
    waves_exact(&t, s, dead, 1, 1);
    it_stop(&t);
}
