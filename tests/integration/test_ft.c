/* test_ft.c - fault tolerance over real trees: kill -9 of commnodes in the
 * middle of work, orphans (commnodes and back-ends) adopted, exact results
 * afterwards, events at the FE, and the session's end without fault tolerance
 */
#include "itest.h"

/* Wait for the FE's events until `failed` was reported failed and every
 * rank of adopted[] adopted; 0, or -1 (recorded). */
static int wait_recovery(tbon_net_t *net, tbon_rank_t failed, const tbon_rank_t *adopted,
                         size_t nadopted, int want_lost)
{
    size_t nlost = 0;
    int seen_failed = 0;
    uint8_t done[64] = { 0 };
    size_t ndone = 0;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while ((!seen_failed || ndone < nadopted) && it_now_ms() < end) {
        tbon_event_t ev;
        int rc = tbon_net_next_event(net, &ev, (int)(end - it_now_ms()));
        if (rc != 0)
            break;
        if (ev.type == TBON_EV_NODE_FAILED && ev.rank == failed)
            seen_failed = 1;
        nlost += ev.type == TBON_EV_DATA_LOST;
        if (ev.type != TBON_EV_NODE_ADOPTED)
            continue;
        CHECK(ev.parent != failed);
        CHECK(ev.incarnation >= 1);
        for (size_t i = 0; i < nadopted && i < 64; i++)
            if (adopted[i] == ev.rank && !done[i]) {
                done[i] = 1;
                ndone++;
            }
    }
    /* TBON_EV_DATA_LOST comes right after its orphan's adoption event: a
     * stream whose filter keeps no state (sum) may have lost waves in flight,
     * one that does (union) lost nothing. */
    tbon_event_t ev;
    while (nlost < (want_lost ? nadopted : 0) && tbon_net_next_event(net, &ev, 2000) == 0)
        nlost += ev.type == TBON_EV_DATA_LOST;
    while (tbon_net_next_event(net, &ev, 100) == 0)
        nlost += ev.type == TBON_EV_DATA_LOST;
    CHECK_UINT(nlost, want_lost ? nadopted : 0);
    if (!seen_failed || ndone < nadopted) {
        th_fail(__FILE__, __LINE__, "events: failure of %u %s, %zu of %zu orphans adopted",
                failed, seen_failed ? "seen" : "NOT seen", ndone, nadopted);
        return -1;
    }
    return 0;
}

/* One result of slow requests (each back-end's bit) on s: its sum *v and,
 * as masks, what it covers, expected and misses (*nmis of them). 0, or -1
 * (recorded) when none came. */
static int slow_result(tbon_stream_t *s, const char *what, uint64_t *v, uint64_t *cov,
                       uint64_t *exp, uint64_t *mis, size_t *nmis)
{
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, what);
    if (!p)
        return -1;
    *v = 0;
    CHECK_INT(tbon_packet_unpack(p, "%uld", v), 0);
    *cov = it_cover_mask(p, tbon_packet_covered);
    *exp = it_cover_mask(p, tbon_packet_expected);
    *mis = it_cover_mask(p, tbon_packet_missing);
    *nmis = tbon_packet_missing(p, NULL, 0);
    tbon_packet_unref(p);
    return 0;
}

/* Sum waves in flight on shape while commnode `victim` is killed in the
 * middle. Each back-end answers the bit 1 << (rank % 64), so a wave's sum
 * says exactly who contributed, once each. Every wave completes; a wave may
 * miss only the victim's back-ends (lost); the orphans are adopted (events);
 * afterwards every wave holds every back-end exactly once. */
static void sum_waves_across_kill(const char *shape, tbon_rank_t victim_rank,
                                  const tbon_rank_t *orphans, size_t norphans,
                                  tbon_rank_t lost_lo, tbon_rank_t lost_hi)
{
    /* One wave first: the port table travels right after start-up and is in
     * place everywhere once a wave has come back (a failure before that is
     * commnode_dead_before_passing_the_port_table's case). */
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, shape, NULL);
    REQUIRE(s);
    pid_t victim = it_pid_of("tbon_commnode", victim_rank);
    REQUIRE(victim > 0);
    uint64_t full = 0, lost = 0;
    for (size_t i = 0; i < t.nbe; i++)
        full |= (uint64_t)1 << (t.be[i] % 64);
    for (tbon_rank_t r = lost_lo; r <= lost_hi; r++)
        lost |= (uint64_t)1 << (r % 64);
    const uint32_t none[1] = { 0 };
    const uint32_t waves = 300;
    for (uint32_t w = 0; w < waves; w++) {
        REQUIRE(tbon_stream_send(s, IT_TAG_SLOW, "%ud %aud", 0u, none, (size_t)0) == 0);
        if (w == waves / 3)
            kill(victim, SIGKILL);
    }
    size_t bad = 0;
    for (uint32_t w = 0; w < waves && bad < 5; w++) {
        /* The result says exactly who is in it (no more, no fewer), and
         * that it expected every back-end (none died). */
        uint64_t v, cov, exp, mis;
        size_t nmis;
        if (slow_result(s, "wave around the kill", &v, &cov, &exp, &mis, &nmis))
            break;
        /* Sum is exact (node_exact.c): no wave misses anyone. */
        (void)lost;
        if (v != full || cov != v || exp != full || mis != 0) {
            bad++;
            th_fail(__FILE__, __LINE__, "wave %u: contributors %#llx, expected %#llx less "
                    "at most %#llx; coverage %#llx, expected %#llx, missing %#llx", w,
                    (unsigned long long)v, (unsigned long long)full, (unsigned long long)lost,
                    (unsigned long long)cov, (unsigned long long)exp, (unsigned long long)mis);
        }
    }
    if (wait_recovery(t.net, victim_rank, orphans, norphans, 0) == 0) {
        CHECK_UINT(tbon_net_num_backends(t.net), t.nbe);
        for (uint32_t w = 0; w < 30 && bad < 5; w++) {
            REQUIRE(tbon_stream_send(s, IT_TAG_SLOW, "%ud %aud", 0u, none, (size_t)0) == 0);
            tbon_packet_t *p = it_recv(s, IT_RECV_MS, "wave after the adoption");
            if (!p)
                break;
            uint64_t v = 0;
            CHECK_INT(tbon_packet_unpack(p, "%uld", &v), 0);
            tbon_packet_unref(p);
            if (v != full) {
                bad++;
                th_fail(__FILE__, __LINE__, "wave %u after adoption: %#llx, expected %#llx", w,
                        (unsigned long long)v, (unsigned long long)full);
            }
        }
    }
    CHECK(it_pid_of("tbon_commnode", victim_rank) == 0);
    it_stop(&t);
}

/* 4x4, 60 slow-request waves sent back to back; back-end 13 dies (_exit)
 * after answering 20 of them. Each result's coverage is exactly the
 * back-ends in its sum; every wave whose request went before the death was
 * known expects back-end 13, and those it did not answer name it missing;
 * the others are complete over the 15 left. */
ITEST(backend_killed_named_missing)
{
    const char *argv[] = { "--exit-after", "20", "--exit-after-ranks", "13", NULL };
    it_tree_t t;
    if (it_start(&t, "4x4", argv, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    REQUIRE(s);
    uint64_t full = 0, victim = (uint64_t)1 << 13;
    for (size_t i = 0; i < t.nbe; i++)
        full |= (uint64_t)1 << (t.be[i] % 64);
    const uint32_t none[1] = { 0 };
    const uint32_t waves = 60;
    for (uint32_t w = 0; w < waves; w++)
        REQUIRE(tbon_stream_send(s, IT_TAG_SLOW, "%ud %aud", 0u, none, (size_t)0) == 0);
    size_t named = 0, bad = 0;
    for (uint32_t w = 0; w < waves && bad < 5; w++) {
        uint64_t v, cov, exp, mis;
        size_t nmis;
        if (slow_result(s, "wave around the back-end's death", &v, &cov, &exp, &mis, &nmis))
            break;
        /* answered by everyone, or by all but the victim, who is named
         * missing unless the wave's request went after its death was known */
        int ok = cov == v && (v == full ? exp == full && mis == 0
                                        : v == (full & ~victim) && mis == (exp & victim) &&
                                          (exp | victim) == full);
        named += mis == victim && nmis == 1;
        if (w < 19)
            ok &= v == full;
        if (!ok) {
            bad++;
            th_fail(__FILE__, __LINE__, "wave %u: sum %#llx, coverage %#llx, expected %#llx, "
                    "missing %#llx (%zu)", w, (unsigned long long)v, (unsigned long long)cov,
                    (unsigned long long)exp, (unsigned long long)mis, nmis);
        }
    }
    CHECK(named > 0);       /* some waves were in flight when it died */
    it_stop(&t);
}

/* 4x4: commnode 2's back-ends 9-12 are the orphans. */
ITEST(backend_orphans_adopted_waves_exact)
{
    const tbon_rank_t orphans[] = { 9, 10, 11, 12 };
    sum_waves_across_kill("4x4", 2, orphans, 4, 9, 12);
}

/* 4x4x4: depth-1 commnode 1's commnode children 5-8 are the orphans; its
 * back-ends are 21-36. */
ITEST(commnode_orphans_adopted_waves_exact)
{
    const tbon_rank_t orphans[] = { 5, 6, 7, 8 };
    sum_waves_across_kill("4x4x4", 1, orphans, 4, 21, 36);
}

/* 4x4x4, union with don't-wait (seed 003's integer union): commnode 1 (depth
 * 1, four commnode children) is killed while waves go on. Its orphans are
 * commnodes: they compose their filter state into their new parents. The
 * FE's union must be exactly every element any back-end sent, none of them
 * announced as new twice. */
ITEST(commnode_orphans_union_exact)
{
    it_tree_t t;
    if (it_start(&t, "4x4x4", NULL, NULL))
        return;
    tbon_stream_t *sum = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(sum);
    REQUIRE(it_sum_wave(sum, 0, t.be, t.nbe) == 0);   /* the port table is in place */
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_UNION, TBON_SYNC_DONTWAIT, 0);
    REQUIRE(s);
    pid_t victim = it_pid_of("tbon_commnode", 1);
    REQUIRE(victim > 0);
    const uint32_t waves = 120;
    uint8_t *have = calloc(1000000 + waves, 1);
    REQUIRE(have);
    size_t twice = 0, got = 0;
    for (uint32_t w = 0; w < waves; w++) {
        REQUIRE(tbon_stream_send(s, IT_TAG_UNION, "%ud", w) == 0);
        if (w == waves / 2)
            kill(victim, SIGKILL);
        if (w % 8 == 7) {
            struct timespec ts = { 0, 5000000 };
            nanosleep(&ts, NULL);
        }
    }
    const tbon_rank_t orphans[] = { 5, 6, 7, 8 };
    /* nothing lost: the union composes its state, the sum stream is exact */
    wait_recovery(t.net, 1, orphans, 4, 0);
    for (;;) {
        tbon_packet_t *p = NULL;
        if (tbon_stream_recv(s, &p, 1500) != 0)
            break;
        uint64_t *v = NULL;
        size_t n = 0;
        CHECK_INT(tbon_packet_unpack(p, "%auld", &v, &n), 0);
        for (size_t i = 0; i < n; i++) {
            if (v[i] >= 1000000 + waves) {
                th_fail(__FILE__, __LINE__, "element %llu was never sent",
                        (unsigned long long)v[i]);
                continue;
            }
            if (have[v[i]]++)
                twice++;
            else
                got++;
        }
        free(v);
        tbon_packet_unref(p);
    }
    /* Sent: every back-end rank, rank % 3, and 1000000 + w for every wave. */
    size_t want = 0;
    for (size_t i = 0; i < t.nbe; i++)
        CHECK(have[t.be[i]]);
    for (uint64_t x = 0; x < 3; x++)
        CHECK(have[x]);
    for (uint32_t w = 0; w < waves; w++)
        CHECK(have[1000000 + w]);
    want = t.nbe + 3 + waves;
    CHECK_UINT(got, want);
    CHECK_UINT(twice, 0);
    free(have);
    it_stop(&t);
}

/* no_fault_tolerance: a commnode's death ends the session, cleanly: the FE
 * hears of the failure, receiving ends with TBON_ECLOSED, and nothing is
 * left running. */
ITEST(no_fault_tolerance_ends_session)
{
    tbon_fe_options_t o = { 0 };
    o.no_fault_tolerance = 1;
    it_tree_t t;
    if (it_start(&t, "4x4", NULL, &o))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    REQUIRE(it_sum_wave(s, 1, t.be, t.nbe) == 0);
    pid_t victim = it_pid_of("tbon_commnode", 3);
    REQUIRE(victim > 0);
    kill(victim, SIGKILL);
    tbon_event_t ev;
    int rc = tbon_net_next_event(t.net, &ev, IT_RECV_MS);
    CHECK_INT(rc, 0);
    CHECK_INT(ev.type, TBON_EV_NODE_FAILED);
    CHECK_UINT(ev.rank, 3);
    tbon_packet_t *p = NULL;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (it_now_ms() < end && (rc = tbon_stream_recv(s, &p, 500)) != TBON_ECLOSED)
        tbon_packet_unref(p);
    CHECK_INT(rc, TBON_ECLOSED);
    it_stop(&t);
}

/* Heartbeats and fencing: commnode 1 of 4x4x4 is stopped (SIGSTOP), not
 * killed. Past the heartbeat timeout it is taken for failed: the FE hears
 * of it, its children are adopted, and waves are exact again. Woken up
 * (SIGCONT), it finds itself out and exits; nothing else is reported failed
 * and the waves stay exact. */
ITEST(stopped_commnode_fenced_then_exits)
{
    tbon_fe_options_t o = { 0 };
    /* Short, but safe on two busy cores: 85 ThreadSanitizer processes
     * starting together left back-ends silent for over a second (their
     * suspicion cut the first wave short), so longer there. */
    o.heartbeat_ms = IT_TSAN ? 2500 : 1000;
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4x4", &o);
    REQUIRE(s);
    pid_t victim = it_pid_of("tbon_commnode", 1);
    REQUIRE(victim > 0);
    uint64_t full = 0, lost = 0;
    for (size_t i = 0; i < t.nbe; i++)
        full |= (uint64_t)1 << (t.be[i] % 64);
    for (tbon_rank_t r = 21; r <= 36; r++)
        lost |= (uint64_t)1 << (r % 64);
    const uint32_t none[1] = { 0 };
    int64_t t0 = it_now_ms();
    kill(victim, SIGSTOP);
    /* The wave sent now waits for the stopped subtree until it is fenced. */
    REQUIRE(tbon_stream_send(s, IT_TAG_SLOW, "%ud %aud", 0u, none, (size_t)0) == 0);
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, "the wave across the stop");
    uint64_t v = 0;
    if (p)
        CHECK_INT(tbon_packet_unpack(p, "%uld", &v), 0);
    tbon_packet_unref(p);
    CHECK((v | lost) == full);
    /* Not at once: silence counts from the victim's last beat, which may be
     * up to a quarter of the timeout (more if it was starved) before the
     * stop, so the stop is no exact origin. */
    CHECK(it_now_ms() - t0 >= 400);
    const tbon_rank_t orphans[] = { 5, 6, 7, 8 };
    if (wait_recovery(t.net, 1, orphans, 4, 0) == 0) {     /* sum: exact */
        for (uint32_t w = 0; w < 10; w++)
            REQUIRE(it_sum_wave(s, 100 + w, t.be, t.nbe) == 0 ||
                    (th_fail(__FILE__, __LINE__, "wave %u after fencing", w), 0));
    }
    /* Woken up, it must leave on its own, and no one else is hurt. */
    kill(victim, SIGCONT);
    int64_t end = it_now_ms() + 5000;
    while (kill(victim, 0) == 0 && it_now_ms() < end) {
        pid_t cn[64];
        int alive = 0;
        size_t n = it_our_procs("tbon_commnode", cn, 64);
        for (size_t i = 0; i < n && i < 64; i++)
            alive |= cn[i] == victim;
        if (!alive)
            break;
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
    }
    CHECK(it_pid_of("tbon_commnode", 1) == 0);
    tbon_event_t ev;
    while (tbon_net_next_event(t.net, &ev, 300) == 0)
        if (ev.type == TBON_EV_NODE_FAILED && ev.rank != 1)
            th_fail(__FILE__, __LINE__, "rank %u reported failed after the wake-up", ev.rank);
    for (uint32_t w = 0; w < 10; w++)
        if (it_sum_wave(s, 200 + w, t.be, t.nbe) != 0)
            th_fail(__FILE__, __LINE__, "wave %u after the wake-up", w);
    CHECK_UINT(tbon_net_num_backends(t.net), t.nbe);
    it_stop(&t);
}

/* A back-end's death is an event, and the stream goes on with the others:
 * back-end 9 of 4x4 is killed; the FE hears of it, the count of back-ends
 * drops by one, and every later wave is exactly the sum of the others. */
ITEST(backend_death_is_an_event)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4", NULL);
    REQUIRE(s);
    pid_t be[64];
    REQUIRE(it_our_procs("tbon_test_be", be, 64) == 16);
    pid_t victim = be[0];     /* any one; its rank comes from the event */
    kill(victim, SIGKILL);
    tbon_event_t ev;
    CHECK_INT(tbon_net_next_event(t.net, &ev, IT_RECV_MS), 0);
    CHECK_INT(ev.type, TBON_EV_NODE_FAILED);
    tbon_rank_t dead = ev.rank, rest[16];
    size_t nrest = 0;
    for (size_t i = 0; i < t.nbe; i++)
        if (t.be[i] != dead)
            rest[nrest++] = t.be[i];
    CHECK_UINT(nrest, 15);
    CHECK_UINT(tbon_net_num_backends(t.net), 15);
    for (uint32_t w = 1; w <= 10; w++)
        if (it_sum_wave(s, w, rest, nrest) != 0)
            break;
    it_stop(&t);
}

/* Every child of the FE killed at once while sum waves are in flight: all
 * four commnodes of 4x4 die together, their back-ends 5-20 are all adopted
 * (by the FE: no other node is left). Every wave sent comes back - one in
 * flight completes with what reached the FE, or with nothing - and none
 * holds a back-end twice; afterwards every wave holds every back-end. */
ITEST(all_fe_children_killed_waves_complete)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4", NULL);
    REQUIRE(s);
    pid_t victim[4];
    for (tbon_rank_t r = 1; r <= 4; r++)
        REQUIRE((victim[r - 1] = it_pid_of("tbon_commnode", r)) > 0);
    uint64_t full = 0;
    for (size_t i = 0; i < t.nbe; i++)
        full |= (uint64_t)1 << (t.be[i] % 64);
    const uint32_t none[1] = { 0 };
    const uint32_t waves = 200;
    for (uint32_t w = 0; w < waves; w++) {
        REQUIRE(tbon_stream_send(s, IT_TAG_SLOW, "%ud %aud", 0u, none, (size_t)0) == 0);
        if (w == waves / 4)
            for (int i = 0; i < 4; i++)
                kill(victim[i], SIGKILL);
    }
    size_t bad = 0, nlost = 0;
    for (uint32_t w = 0; w < waves && bad < 5; w++) {
        tbon_packet_t *p = NULL;
        int rc = tbon_stream_recv(s, &p, IT_RECV_MS);
        if (rc == TBON_ELOST) {         /* said for the waves lost whole */
            nlost++;
            continue;
        }
        if (rc != 0) {
            th_fail(__FILE__, __LINE__, "wave %u of %u: %s (%s)", w, waves, tbon_strerror(rc),
                    tbon_net_error(t.net));
            break;
        }
        uint64_t v = 0;
        CHECK_INT(tbon_packet_unpack(p, "%uld", &v), 0);
        tbon_packet_unref(p);
        if (v > full || (v | full) != full) {
            bad++;
            th_fail(__FILE__, __LINE__, "wave %u: contributors %#llx, not a part of %#llx", w,
                    (unsigned long long)v, (unsigned long long)full);
        }
    }
    /* Failures of 1-4, adoptions of 5-20 by the FE. The four kills are not
     * one instant: an orphan may first be adopted by a commnode still
     * alive (and is adopted again when that one is found dead). */
    int failed = 0, adopted = 0;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while ((failed < 4 || adopted < 16) && it_now_ms() < end) {
        tbon_event_t ev;
        if (tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) != 0)
            break;
        failed += ev.type == TBON_EV_NODE_FAILED && ev.rank >= 1 && ev.rank <= 4;
        if (ev.type == TBON_EV_NODE_ADOPTED) {
            CHECK(ev.parent <= 4);
            adopted += ev.parent == 0;
        }
        CHECK(ev.type != TBON_EV_NODE_FAILED || ev.rank <= 4);
    }
    CHECK_INT(failed, 4);
    CHECK_INT(adopted, 16);
    if (getenv("TH_VERBOSE"))
        fprintf(stderr, "    %zu of %u waves lost whole\n", nlost, waves);
    CHECK_UINT(tbon_net_num_backends(t.net), t.nbe);
    for (uint32_t w = 0; w < 20 && bad < 5; w++)
        if (it_sum_wave(s, 100 + w, t.be, t.nbe) != 0)
            bad++;
    it_stop(&t);
}

/* Collect the answers to request w on the int_only stream s (don't-wait: a
 * packet per back-end, "%d" = it_type_ival(IT_T_D, rank, w)) until want[]
 * all answered or ms passed; seen[r] counts rank r's answers. Late answers
 * to requests late_from..w-1 are passed over (those asked while orphans were
 * being caught up); any other answer is a failure. The number of ranks of want[] that
 * answered. */
static size_t collect_ranks(tbon_stream_t *s, uint32_t w, uint32_t late_from,
                            const tbon_rank_t *want, size_t nwant, uint8_t seen[128], int ms)
{
    memset(seen, 0, 128);
    size_t have = 0;
    int64_t end = it_now_ms() + ms;
    while (have < nwant && it_now_ms() < end) {
        tbon_packet_t *p = NULL;
        if (tbon_stream_recv(s, &p, (int)(end - it_now_ms())) != 0)
            break;
        int32_t v = 0;
        CHECK_INT(tbon_packet_unpack(p, "%d", &v), 0);
        tbon_packet_unref(p);
        int64_t r = ((int64_t)v + 3000000) / 100000, vw = ((int64_t)v + 3000000) % 100000;
        if (vw >= late_from && vw < w)
            continue;
        if (vw != w || r >= 128) {
            th_fail(__FILE__, __LINE__, "request %u: %d is no back-end's answer to it", w, v);
            continue;
        }
        for (size_t i = 0; i < nwant; i++)
            have += want[i] == r && !seen[r];
        seen[r]++;
    }
    return have;
}

/* A stream made while a commnode is stopped (about to die) never reaches
 * its subtree through it: 4x4x4, a filter is loaded, commnode 1 is
 * stopped, a don't-wait stream is made with the filter (the 48 back-ends
 * under commnodes 2-4 answer on it), then commnode 1 is killed. Its
 * orphans, commnodes 5-8, are adopted; their adopters tell them of the
 * stream (tb_stream_catch_up), so soon a request on the stream is answered
 * by all 64 back-ends, and from then on every one is, exactly once each. */
ITEST(stream_made_while_commnode_dying_reaches_orphans)
{
    it_tree_t t;
    tbon_stream_t *sum = it_start_summing(&t, "4x4x4", NULL);
    REQUIRE(sum);
    pid_t victim = it_pid_of("tbon_commnode", 1);
    REQUIRE(victim > 0);
    /* (The filter is loaded first: tbon_fe_load_filter is all or nothing,
     * so with commnode 1 stopped it would wait until commnode 1 was found
     * failed, and its orphans adopted, before the stream is made.) */
    int id = it_load_plugin(t.net, "filter_int_only", "int_only");
    REQUIRE(id >= 0);
    REQUIRE(kill(victim, SIGSTOP) == 0);
    tbon_stream_t *s = it_stream(t.net, id, TBON_SYNC_DONTWAIT, 0);
    REQUIRE(s);
    tbon_rank_t rest[64];
    size_t nrest = 0;
    for (size_t i = 0; i < t.nbe; i++)
        if (t.be[i] < 21 || t.be[i] > 36)       /* commnode 1's back-ends: 21-36 */
            rest[nrest++] = t.be[i];
    REQUIRE(nrest == 48);
    uint8_t seen[128];
    uint32_t w = 1;
    REQUIRE(tbon_stream_send(s, IT_TAG_TYPE0 + IT_T_D, "%ud", w) == 0);
    CHECK_UINT(collect_ranks(s, w, w, rest, nrest, seen, IT_RECV_MS), nrest);
    REQUIRE(kill(victim, SIGKILL) == 0);
    const tbon_rank_t orphans[] = { 5, 6, 7, 8 };
    /* the orphans had only the sum stream when adopted: exact, nothing lost */
    REQUIRE(wait_recovery(t.net, 1, orphans, 4, 0) == 0);
    /* An orphan's catch-up may still be on its way when the FE hears of its
     * adoption (a don't-wait stream keeps no requests for it): ask until
     * every back-end answers, then every request must be answered whole. */
    size_t have = 0;
    uint32_t first = w + 1;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (have < t.nbe && it_now_ms() < end) {
        REQUIRE(tbon_stream_send(s, IT_TAG_TYPE0 + IT_T_D, "%ud", ++w) == 0);
        have = collect_ranks(s, w, first, t.be, t.nbe, seen, 500);
    }
    CHECK_UINT(have, t.nbe);
    /* Each back-end answers in order, over one path since its adoption: once
     * all answered request w, no earlier answer is on its way. */
    for (int k = 0; k < 5 && have == t.nbe; k++) {
        REQUIRE(tbon_stream_send(s, IT_TAG_TYPE0 + IT_T_D, "%ud", ++w) == 0);
        have = collect_ranks(s, w, w, t.be, t.nbe, seen, IT_RECV_MS);
        CHECK_UINT(have, t.nbe);
        for (size_t i = 0; i < t.nbe; i++)
            CHECK_INT(seen[t.be[i]], 1);
    }
    it_expect_nothing(s, 200, "a second answer");
    CHECK(it_pid_of("tbon_commnode", 1) == 0);
    it_stop(&t);
}

/* Start shape with commnode 1 killed by the fault shim as it writes the
 * port table (TB_CTL_PORTS), once it has accepted the data and event
 * connections of its 4 children; 0, or -1 (recorded) if the start failed. */
static int start_with_death_at_ports(it_tree_t *t, const char *shape)
{
    it_preload_faultshim();
    setenv("TBON_FAULT_RANKS", "1", 1);
    setenv("TBON_FAULT_DIE_AT_CTL", "10", 1);   /* TB_CTL_PORTS */
    setenv("TBON_FAULT_DIE_AFTER_ACCEPTS", "8", 1);
    int rc = it_start(t, shape, NULL, NULL);
    unsetenv("LD_PRELOAD");
    unsetenv("TBON_FAULT_RANKS");
    unsetenv("TBON_FAULT_DIE_AT_CTL");
    unsetenv("TBON_FAULT_DIE_AFTER_ACCEPTS");
    return rc;
}

/* A commnode that dies right after the tree came up, before it passed the
 * port table on (the fault shim kills commnode 1 of 4x4 at its first write
 * of TB_CTL_PORTS): its back-ends 5-8 know no adopter but the FE and their
 * ancestors, yet they are adopted (by the FE) and get the table from it, and
 * every wave afterwards holds every back-end exactly.
 * A commnode counts a back-end once it has sent it the topology, so on a
 * loaded machine a back-end may still be inside tbon_be_create when its
 * parent dies: one that has the topology starts without its event
 * connection and is adopted like the others; one whose connection was reset
 * before the topology could be read knows nobody to ask, fails
 * tbon_be_create and exits, and the FE takes it for failed. Under load all
 * four were once in that window, and none was adopted: so the shim kills
 * the commnode only once it has accepted its 8 connections from 5-8 (data,
 * then events, which a back-end opens after it has read the topology). */
ITEST(commnode_dead_before_passing_the_port_table)
{
    it_tree_t t;
    if (start_with_death_at_ports(&t, "4x4") != 0)
        return;
    /* The failure of 1, then each of 5-8 adopted by the FE or failed. */
    int failed1 = 0, adopted = 0, nfailed = 0;
    uint8_t done[4] = { 0 }, gone[4] = { 0 };
    int64_t end = it_now_ms() + IT_RECV_MS;
    while ((!failed1 || adopted + nfailed < 4) && it_now_ms() < end) {
        tbon_event_t ev;
        if (tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) != 0)
            break;
        failed1 |= ev.type == TBON_EV_NODE_FAILED && ev.rank == 1;
        if (ev.rank < 5 || ev.rank > 8 || done[ev.rank - 5])
            continue;
        if (ev.type == TBON_EV_NODE_ADOPTED) {
            CHECK_INT(ev.parent, 0);
            done[ev.rank - 5] = 1;
            adopted++;
        } else if (ev.type == TBON_EV_NODE_FAILED) {
            done[ev.rank - 5] = gone[ev.rank - 5] = 1;
            nfailed++;
        }
    }
    CHECK(failed1);
    CHECK_INT(adopted + nfailed, 4);
    CHECK(adopted >= 1);        /* each had its event connection in */
    if (getenv("TH_VERBOSE"))
        fprintf(stderr, "    %d adopted, %d failed before they had joined\n", adopted, nfailed);
    tbon_rank_t live[64];
    size_t nlive = 0;
    for (size_t i = 0; i < t.nbe; i++)
        if (t.be[i] < 5 || t.be[i] > 8 || !gone[t.be[i] - 5])
            live[nlive++] = t.be[i];
    CHECK_UINT(tbon_net_num_backends(t.net), nlive);
    tbon_stream_t *s = failed1 && adopted + nfailed == 4
                       ? it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0) : NULL;
    for (uint32_t w = 1; s && w <= 5; w++)
        if (it_sum_wave(s, w, live, nlive) != 0)
            break;
    CHECK(it_pid_of("tbon_commnode", 1) == 0);
    it_stop(&t);
}

/* The same death one level up, and what it costs the level below: commnode
 * 1 of 4x4x4 dies as it writes the port table, after its commnode children
 * 5-8 are connected. They are adopted by the FE, say in TB_CTL_CATCH_UP that
 * they have no table, get it from the FE and pass it on to their back-ends.
 * So when 5 is killed next (after a wave, which went down 5's links behind
 * the table), its back-ends 21-24 know every commnode's port and are
 * adopted by commnodes, not by the FE, the last of their candidates; and
 * every wave holds every back-end. */
ITEST(commnode_orphan_without_port_table_gets_it_from_its_adopter)
{
    it_tree_t t;
    if (start_with_death_at_ports(&t, "4x4x4") != 0)
        return;
    const tbon_rank_t low[] = { 21, 22, 23, 24 };
    int failed1 = 0;
    size_t adopted = 0;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while ((!failed1 || adopted < 4) && it_now_ms() < end) {
        tbon_event_t ev;
        if (tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) != 0)
            break;
        failed1 |= ev.type == TBON_EV_NODE_FAILED && ev.rank == 1;
        if (ev.type == TBON_EV_NODE_ADOPTED && ev.rank >= 5 && ev.rank <= 8) {
            CHECK_INT(ev.parent, 0);        /* the only one whose port they knew */
            adopted++;
        }
    }
    CHECK(failed1);
    CHECK_UINT(adopted, 4);
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    REQUIRE(it_sum_wave(s, 1, t.be, t.nbe) == 0);
    pid_t victim = it_pid_of("tbon_commnode", 5);
    REQUIRE(victim > 0);
    REQUIRE(kill(victim, SIGKILL) == 0);
    uint8_t done[4] = { 0 };
    size_t ndone = 0;
    end = it_now_ms() + IT_RECV_MS;
    while (ndone < 4 && it_now_ms() < end) {
        tbon_event_t ev;
        if (tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) != 0)
            break;
        if (ev.type != TBON_EV_NODE_ADOPTED || ev.rank < low[0] || ev.rank > low[3] ||
            done[ev.rank - low[0]])
            continue;
        done[ev.rank - low[0]] = 1;
        ndone++;
        if (ev.parent == 0 || ev.parent == 5)
            th_fail(__FILE__, __LINE__, "rank %u adopted by %u: it had no port table",
                    ev.rank, ev.parent);
    }
    CHECK_UINT(ndone, 4);
    for (uint32_t w = 2; w <= 4; w++)
        if (it_sum_wave(s, w, t.be, t.nbe) != 0)
            break;
    CHECK(it_pid_of("tbon_commnode", 1) == 0);
    it_stop(&t);
}

/* The max of rank bucket by bucket over histogram answers {rank, rank % 3,
 * 1000000 + w} from back-ends have[0..n): what histo_max must give. */
static int histo_max_right(const tbon_packet_t *p, uint32_t w, const tbon_rank_t *have, size_t n)
{
    uint64_t want[3] = { 0, 0, 1000000u + w }, *v = NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        want[0] = have[i] > want[0] ? have[i] : want[0];
        want[1] = have[i] % 3 > want[1] ? have[i] % 3 : want[1];
    }
    int ok = tbon_packet_unpack(p, "%auld", &v, &m) == 0 && m == 3 &&
             memcmp(v, want, sizeof want) == 0;
    if (!ok)
        th_fail(__FILE__, __LINE__, "wave %u: histo_max {%llu, %llu, %llu}, expected {%llu, "
                "%llu, %llu} over %zu back-ends", w, m > 0 ? (unsigned long long)v[0] : 0,
                m > 1 ? (unsigned long long)v[1] : 0, m > 2 ? (unsigned long long)v[2] : 0,
                (unsigned long long)want[0], (unsigned long long)want[1],
                (unsigned long long)want[2], n);
    free(v);
    return ok ? 0 : -1;
}

/* Back-ends load plug-ins (issue 31, item 2): on 8x8 a state-recoverable
 * plug-in (histo_max, the bucket-by-bucket maximum: idempotent, with
 * F_get_FilterState, declaring nothing else), commnode 8 killed with a wave
 * in flight. Its back-end orphans 65-72 keep the plug-in's state and send it
 * on adoption: no TBON_EV_DATA_LOST (before, a back-end had no state for a
 * plug-in and each orphan said so). The wave in flight holds what its
 * coverage says, its value made of exactly those back-ends; every wave
 * after is whole. */
ITEST(backend_orphans_compose_a_plugins_state)
{
    it_tree_t t;
    if (it_start(&t, "8x8", NULL, NULL))
        return;
    int id = it_load_plugin(t.net, "filter_histo", "histo_max");
    tbon_stream_t *s = id >= 0 ? it_stream(t.net, id, TBON_SYNC_WAITFORALL, 0) : NULL;
    if (!s) {
        it_stop(&t);
        return;
    }
    static tbon_rank_t have[IT_MAX_BE];
    tbon_packet_t *p;
    pid_t victim = it_pid_of("tbon_commnode", 8);
    REQUIRE(victim > 0);
    for (uint32_t w = 0; w <= 10; w++) {
        REQUIRE(tbon_stream_send(s, IT_TAG_UNION, "%ud", w) == 0);
        if (w == 1) {
            kill(victim, SIGKILL);
            const tbon_rank_t orphans[] = { 65, 66, 67, 68, 69, 70, 71, 72 };
            p = it_recv(s, IT_RECV_MS, "the wave across the kill");
            size_t n = p ? tbon_packet_covered(p, have, IT_MAX_BE) : 0;
            if (p)
                histo_max_right(p, w, have, n);
            tbon_packet_unref(p);
            wait_recovery(t.net, 8, orphans, 8, 0);
            continue;
        }
        p = it_recv(s, IT_RECV_MS, "a histo_max wave");
        size_t n = p ? tbon_packet_covered(p, have, IT_MAX_BE) : 0;
        CHECK_UINT(n, t.nbe);
        if (p)
            histo_max_right(p, w, have, n);
        tbon_packet_unref(p);
    }
    it_stop(&t);
}
