/* test_filter_fault.c - a user filter's fault stays with its input (issue
 * 19, item 1; docs/filter-guide.md, "When a filter crashes or hangs"): a
 * plug-in that crashes on one back-end's data loses that wave only, the FE
 * gets TBON_EV_FILTER_ERROR naming the filter, the stream and the source
 * ranks, and every process lives on; one that hangs is found within its
 * limit, its node is taken for failed, and the orphans do not hand the
 * poisoned input to their adopter.
 */
#include "itest.h"

#include <signal.h>

#define HOW_SEGV 1
#define HOW_FPE 2
#define HOW_ABORT 3
#define HOW_OVERFLOW 4
#define HOW_SPIN 5
#define HOW_SLOW 6
#define HOW_SPIN_3S 8

/* Start the tree of shape (opts may be NULL) with a wait-for-all stream of
 * filter_poison.so's func; NULL (and the tree stopped) on failure. */
static tbon_stream_t *start_poisoned(it_tree_t *t, const char *shape,
                                     const tbon_fe_options_t *o, const char *func)
{
    if (it_start(t, shape, NULL, o))
        return NULL;
    int id = it_load_plugin(t->net, "filter_poison", func);
    tbon_stream_t *s = id >= 0 ? it_stream(t->net, id, TBON_SYNC_WAITFORALL, 0) : NULL;
    if (!s)
        it_stop(t);
    return s;
}

/* The poisoned wave: its result does not come, TBON_EFILTER does (the
 * library's message names the filter). */
static void poisoned_wave(tbon_net_t *net, tbon_stream_t *s, uint32_t wave)
{
    CHECK_INT(tbon_stream_send(s, IT_TAG_WAVE, "%ud", wave), 0);
    tbon_packet_t *p = NULL;
    int rc = tbon_stream_recv(s, &p, IT_RECV_MS);
    if (rc != TBON_EFILTER) {
        th_fail(__FILE__, __LINE__, "wave %u: tbon_stream_recv returned %d (%s), expected "
                "TBON_EFILTER", wave, rc, tbon_strerror(rc));
        tbon_packet_unref(p);
        return;
    }
    if (!strstr(tbon_net_error(net), "poison"))
        th_fail(__FILE__, __LINE__, "the error does not name the filter: %s",
                tbon_net_error(net));
}

/* The next event must be FILTER_ERROR on rank, stream and signal, its
 * detail naming the filter, the signal and source (and no failure first). */
static void expect_filter_event(tbon_net_t *net, tbon_rank_t rank, uint32_t stream, int sig,
                                tbon_rank_t source)
{
    tbon_event_t ev;
    int rc = tbon_net_next_event(net, &ev, IT_RECV_MS);
    if (rc) {
        th_fail(__FILE__, __LINE__, "no event: %d (%s)", rc, tbon_strerror(rc));
        return;
    }
    if (ev.type != TBON_EV_FILTER_ERROR) {
        th_fail(__FILE__, __LINE__, "event %d of rank %u, expected FILTER_ERROR", (int)ev.type,
                ev.rank);
        return;
    }
    CHECK_UINT(ev.rank, rank);
    CHECK_UINT(ev.stream, stream);
    CHECK_INT(ev.signal, sig);
    char src[32];
    snprintf(src, sizeof src, "%u", (unsigned)source);
    const char *sname = sig == SIGSEGV ? "SIGSEGV" : sig == SIGFPE ? "SIGFPE"
                      : sig == SIGABRT ? "SIGABRT" : "past its limit";
    if (!strstr(ev.detail, "\"poison\"") || !strstr(ev.detail, sname) ||
        !strstr(ev.detail, src))
        th_fail(__FILE__, __LINE__, "the event's detail does not name the filter, %s and rank "
                "%s: %s", sname, src, ev.detail);
    if (getenv("ITEST_VERBOSE"))
        fprintf(stderr, "    event: %s\n", ev.detail);
}

/* 16x16: back-end 100 (under commnode 6) answers wave 5 with the poison;
 * the filter dereferences NULL at commnode 6. Wave 5 is lost, the FE gets
 * the event naming rank 6, the stream and back-end 100, and waves 1-4 and
 * 6-12 are exact; all 272 processes live on, nothing is taken for failed. */
ITEST(poison_on_16x16_loses_only_its_wave)
{
    it_tree_t t;
    tbon_stream_t *s = start_poisoned(&t, "16x16", NULL, "poison");
    if (!s)
        return;
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_UP, "%ld %d",
                                            (int64_t)100 * 1000 + 5, HOW_SEGV), 0);
    pid_t pids[IT_MAX_BE];
    size_t before = it_our_procs("tbon_", pids, IT_MAX_BE);
    CHECK_UINT(before, t.total - 1);
    for (uint32_t w = 1; w <= 12; w++) {
        if (w == 5)
            poisoned_wave(t.net, s, w);
        else
            it_sum_wave(s, w, t.be, t.nbe);
    }
    expect_filter_event(t.net, 6, tbon_stream_id(s), SIGSEGV, 100);
    tbon_event_t ev;
    if (tbon_net_next_event(t.net, &ev, 0) == 0)
        th_fail(__FILE__, __LINE__, "another event: %d of rank %u", (int)ev.type, ev.rank);
    CHECK_UINT(it_our_procs("tbon_", pids, IT_MAX_BE), before);
    it_stop(&t);
}

/* 2x2 (back-ends 3, 4 under commnode 1; 5, 6 under 2): a divide by zero, an
 * abort() and a stack overflow, each set off by another back-end's answer,
 * one after the other on the same stream: each loses its own wave only. */
ITEST(fpe_abort_and_stack_overflow_each_lose_their_wave)
{
    it_tree_t t;
    tbon_stream_t *s = start_poisoned(&t, "2x2", NULL, "poison");
    if (!s)
        return;
    const struct { int how, sig; tbon_rank_t be, cn; uint32_t wave; } c[] = {
        { HOW_FPE, SIGFPE, 3, 1, 3 },
        { HOW_ABORT, SIGABRT, 6, 2, 6 },
        { HOW_OVERFLOW, SIGSEGV, 4, 1, 9 },
    };
    uint32_t w = 1;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_UP, "%ld %d",
                                                (int64_t)c[i].be * 1000 + c[i].wave, c[i].how),
                  0);
        for (; w < c[i].wave; w++)
            it_sum_wave(s, w, t.be, t.nbe);
        poisoned_wave(t.net, s, w++);
        expect_filter_event(t.net, c[i].cn, tbon_stream_id(s), c[i].sig, c[i].be);
    }
    for (; w <= 12; w++)
        it_sum_wave(s, w, t.be, t.nbe);
    pid_t pids[16];
    CHECK_UINT(it_our_procs("tbon_", pids, 16), t.total - 1);
    it_stop(&t);
}

/* A flat tree: the FE's own filter crashes (the FE is the application's
 * process): the FE reports it to itself and goes on. */
ITEST(front_end_survives_its_filter)
{
    it_tree_t t;
    tbon_stream_t *s = start_poisoned(&t, "4", NULL, "poison");
    if (!s)
        return;
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_UP, "%ld %d",
                                            (int64_t)t.be[2] * 1000 + 2, HOW_SEGV), 0);
    it_sum_wave(s, 1, t.be, t.nbe);
    poisoned_wave(t.net, s, 2);
    expect_filter_event(t.net, 0, tbon_stream_id(s), SIGSEGV, t.be[2]);
    for (uint32_t w = 3; w <= 6; w++)
        it_sum_wave(s, w, t.be, t.nbe);
    it_stop(&t);
}

/* The commnodes of ours still running, once they are want (waiting up to
 * IT_RECV_MS for it), else as many as there are then. */
static size_t commnodes_left(size_t want)
{
    pid_t pids[64];
    size_t n;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while ((n = it_our_procs("tbon_commnode", pids, 64)) != want && it_now_ms() < end)
        it_sleep_ms(10);
    return n;
}

/* The next event of one of the types in want[0..nw) (others are skipped,
 * up to 50); 0 and *ev, or -1 (recorded). */
static int next_event_of(tbon_net_t *net, const tbon_event_type_t *want, size_t nw,
                         tbon_event_t *ev, int ms)
{
    int64_t end = it_now_ms() + ms;
    for (int skipped = 0; skipped < 50;) {
        int left = (int)(end - it_now_ms());
        int rc = tbon_net_next_event(net, ev, left > 0 ? left : 0);
        if (rc) {
            th_fail(__FILE__, __LINE__, "no event of the kind awaited: %d (%s)", rc,
                    tbon_strerror(rc));
            return -1;
        }
        for (size_t i = 0; i < nw; i++)
            if (ev->type == want[i])
                return 0;
        skipped++;
    }
    th_fail(__FILE__, __LINE__, "50 other events and not the one awaited");
    return -1;
}

/* 2x2 with a filter limit of 1 s: back-end 3's answer to wave 3 sets the
 * filter spinning at commnode 1. Within the limit (and a poll's time) the
 * FE hears of it (signal 0), commnode 1 ends and is taken for failed, its
 * back-ends are adopted, wave 3 is lost and every later wave is exact over
 * all four back-ends. */
ITEST(spinning_filter_found_within_its_limit)
{
    it_tree_t t;
    tbon_stream_t *s = start_poisoned(&t, "2x2", NULL, "poison");
    if (!s)
        return;
    const int limit = 1000;
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_LIMIT, "%ud", limit), 0);
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_UP, "%ld %d", (int64_t)3003,
                                            HOW_SPIN), 0);
    it_sum_wave(s, 1, t.be, t.nbe);
    it_sum_wave(s, 2, t.be, t.nbe);
    int64_t t0 = it_now_ms();
    CHECK_INT(tbon_stream_send(s, IT_TAG_WAVE, "%ud", 3), 0);
    tbon_event_t ev;
    const tbon_event_type_t fe[] = { TBON_EV_FILTER_ERROR };
    if (next_event_of(t.net, fe, 1, &ev, IT_RECV_MS) == 0) {
        int64_t took = it_now_ms() - t0;
        if (getenv("ITEST_VERBOSE"))
            fprintf(stderr, "    found after %lld ms: %s\n", (long long)took, ev.detail);
        CHECK_UINT(ev.rank, 1);
        CHECK_UINT(ev.stream, tbon_stream_id(s));
        CHECK_INT(ev.signal, 0);
        if (!strstr(ev.detail, "past its limit of 1000 ms") || !strstr(ev.detail, "3"))
            th_fail(__FILE__, __LINE__, "the detail does not say why: %s", ev.detail);
        /* the limit, then at most a poll (500 ms) and the machine's delays */
        if (took < limit || took > limit + (IT_SLOW ? 6000 : 3000))
            th_fail(__FILE__, __LINE__, "found after %lld ms, limit %d ms", (long long)took,
                    limit);
    }
    const tbon_event_type_t failed[] = { TBON_EV_NODE_FAILED };
    if (next_event_of(t.net, failed, 1, &ev, IT_RECV_MS) == 0)
        CHECK_UINT(ev.rank, 1);
    /* wave 3: lost (its input never came out of the hung filter) */
    tbon_packet_t *p = NULL;
    int rc = tbon_stream_recv(s, &p, IT_RECV_MS);
    if (rc != TBON_EFILTER)
        th_fail(__FILE__, __LINE__, "wave 3: %d (%s), expected TBON_EFILTER", rc,
                tbon_strerror(rc));
    tbon_packet_unref(p);
    /* the orphans come back under their adopter: every back-end counts */
    const tbon_event_type_t stable[] = { TBON_EV_VIEW_STABLE };
    next_event_of(t.net, stable, 1, &ev, IT_RECV_MS);
    for (uint32_t w = 4; w <= 8; w++)
        it_sum_wave(s, w, t.be, t.nbe);
    /* commnode 1 has ended (its sockets close a moment before it is gone) */
    CHECK_UINT(commnodes_left(1), 1);
    it_stop(&t);
}

/* Slow is not hung: a filter that takes 1.5 s over one wave, under the
 * default limit (5 s), delays that wave only; nothing is reported. */
ITEST(slow_filter_within_its_limit_is_left_alone)
{
    it_tree_t t;
    tbon_stream_t *s = start_poisoned(&t, "2x2", NULL, "poison");
    if (!s)
        return;
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_UP, "%ld %d", (int64_t)5002,
                                            HOW_SLOW), 0);
    for (uint32_t w = 1; w <= 4; w++)
        it_sum_wave(s, w, t.be, t.nbe);
    tbon_event_t ev;
    if (tbon_net_next_event(t.net, &ev, 0) == 0)
        th_fail(__FILE__, __LINE__, "event %d of rank %u", (int)ev.type, ev.rank);
    pid_t pids[16];
    CHECK_UINT(it_our_procs("tbon_", pids, 16), t.total - 1);
    it_stop(&t);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* One wave of poison_kept: exactly {be * 1000 + wave} over be[0..n). */
static void kept_wave(tbon_stream_t *s, uint32_t wave, const tbon_rank_t *be, size_t n)
{
    CHECK_INT(tbon_stream_send(s, IT_TAG_WAVE, "%ud", wave), 0);
    char what[32];
    snprintf(what, sizeof what, "wave %u", wave);
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, what);
    if (!p)
        return;
    int64_t *v = NULL;
    size_t k = 0;
    if (tbon_packet_unpack(p, "%ald", &v, &k) != 0) {
        th_fail(__FILE__, __LINE__, "%s: format \"%s\"", what, tbon_packet_format(p));
    } else {
        qsort(v, k, sizeof *v, cmp_i64);
        int64_t want[IT_MAX_BE];
        for (size_t i = 0; i < n; i++)
            want[i] = (int64_t)be[i] * 1000 + wave;
        qsort(want, n, sizeof *want, cmp_i64);
        if (k != n || memcmp(v, want, n * sizeof *v) != 0)
            th_fail(__FILE__, __LINE__, "%s: %zu values (first %lld), expected the %zu answers "
                    "of this wave exactly", what, k, k ? (long long)v[0] : 0LL, n);
    }
    free(v);
    tbon_packet_unref(p);
}

/* 2x2x2 with a recoverable filter (poison_kept: its state is its last
 * output): back-end 7's answer to wave 3 passes commnode 3 and hangs the
 * filter at commnode 1. Commnode 1 ends; its orphans, commnodes 3 and 4,
 * hold wave 3's values as state - the poison among them - and would hand it
 * to their adopter as composed state (seed 003 IV-C), where it would hang
 * the filter again (at the FE: for good). They were told which stream hung
 * their parent: they hand on nothing of it. Later waves are exact. */
ITEST(orphans_do_not_hand_on_the_poison)
{
    it_tree_t t;
    tbon_stream_t *s = start_poisoned(&t, "2x2x2", NULL, "poison_kept");
    if (!s)
        return;
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_LIMIT, "%ud", 1000), 0);
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_UP, "%ld %d", (int64_t)7003,
                                            HOW_SPIN), 0);
    kept_wave(s, 1, t.be, t.nbe);
    kept_wave(s, 2, t.be, t.nbe);
    CHECK_INT(tbon_stream_send(s, IT_TAG_WAVE, "%ud", 3), 0);
    tbon_event_t ev;
    const tbon_event_type_t fe[] = { TBON_EV_FILTER_ERROR };
    if (next_event_of(t.net, fe, 1, &ev, IT_RECV_MS) == 0) {
        CHECK_UINT(ev.rank, 1);
        CHECK_INT(ev.signal, 0);
    }
    tbon_packet_t *p = NULL;
    int rc = tbon_stream_recv(s, &p, IT_RECV_MS);
    if (rc != TBON_EFILTER)
        th_fail(__FILE__, __LINE__, "wave 3: %d (%s), expected TBON_EFILTER", rc,
                tbon_strerror(rc));
    tbon_packet_unref(p);
    /* both orphans adopted, the view settled */
    int adopted = 0;
    const tbon_event_type_t want[] = { TBON_EV_NODE_ADOPTED, TBON_EV_FILTER_ERROR };
    while (adopted < 2 && next_event_of(t.net, want, 2, &ev, IT_RECV_MS) == 0) {
        if (ev.type == TBON_EV_FILTER_ERROR) {
            th_fail(__FILE__, __LINE__, "a second filter error: %s", ev.detail);
            break;
        }
        adopted += ev.rank == 3 || ev.rank == 4;
    }
    const tbon_event_type_t stable[] = { TBON_EV_VIEW_STABLE };
    next_event_of(t.net, stable, 1, &ev, IT_RECV_MS);
    for (uint32_t w = 4; w <= 7; w++)
        kept_wave(s, w, t.be, t.nbe);
    while (tbon_net_next_event(t.net, &ev, 0) == 0)
        if (ev.type == TBON_EV_FILTER_ERROR)
            th_fail(__FILE__, __LINE__, "a second filter error: %s", ev.detail);
    CHECK_UINT(commnodes_left(5), 5);
    it_stop(&t);
}

/* Paused is not hung either: commnode 1 is stopped (SIGSTOP) for 3 s in the
 * middle of a 1.5 s filter call whose limit is 2 s. The call ran for 1.5 s
 * of the process's time, not 4.5: nothing is reported, the wave is exact.
 * (Heartbeats off: the pause must not be taken for a death either.) */
ITEST(paused_in_a_filter_call_is_not_hung)
{
    char mark[700];
    snprintf(mark, sizeof mark, "%s/in-the-call", th_tmpdir());
    setenv("POISON_MARK", mark, 1);
    it_tree_t t;
    tbon_fe_options_t o = { .heartbeat_ms = -1 };
    tbon_stream_t *s = start_poisoned(&t, "2x2", &o, "poison");
    unsetenv("POISON_MARK");
    if (!s)
        return;
    pid_t cn1 = it_pid_of("tbon_commnode", 1);
    if (!cn1) {
        th_fail(__FILE__, __LINE__, "no commnode 1");
        it_stop(&t);
        return;
    }
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_LIMIT, "%ud", 2000), 0);
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_UP, "%ld %d", (int64_t)3002,
                                            HOW_SLOW), 0);
    it_sum_wave(s, 1, t.be, t.nbe);
    CHECK_INT(tbon_stream_send(s, IT_TAG_WAVE, "%ud", 2), 0);
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (access(mark, F_OK) != 0 && it_now_ms() < end)
        it_sleep_ms(5);
    REQUIRE(access(mark, F_OK) == 0);
    kill(cn1, SIGSTOP);
    it_sleep_ms(3000);      /* the pause itself is what is tested */
    kill(cn1, SIGCONT);
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, "wave 2");
    int64_t v = 0;
    if (p && tbon_packet_unpack(p, "%ld", &v) == 0)
        CHECK(v == it_wave_sum(t.be, t.nbe, 2));
    tbon_packet_unref(p);
    for (uint32_t w = 3; w <= 5; w++)
        it_sum_wave(s, w, t.be, t.nbe);
    tbon_event_t ev;
    if (tbon_net_next_event(t.net, &ev, 0) == 0)
        th_fail(__FILE__, __LINE__, "event %d of rank %u: %s", (int)ev.type, ev.rank, ev.detail);
    pid_t pids[16];
    CHECK_UINT(it_our_procs("tbon_", pids, 16), t.total - 1);
    it_stop(&t);
}

/* The front-end's own filter hangs (a flat tree: the FE runs the filter over
 * the back-ends' answers). The FE cannot be taken for failed: its reactor
 * leaves the call to the worker thread it made it on (node_fecall.c) after
 * the limit, reports it to itself, loses that wave and goes on: later waves
 * are exact, on a new worker. (The call here ends 3 s later by itself.) */
ITEST(front_end_leaves_a_hung_filter_behind)
{
    it_tree_t t;
    tbon_stream_t *s = start_poisoned(&t, "4", NULL, "poison");
    if (!s)
        return;
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_LIMIT, "%ud", 1000), 0);
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_UP, "%ld %d",
                                            (int64_t)t.be[1] * 1000 + 2, HOW_SPIN_3S), 0);
    it_sum_wave(s, 1, t.be, t.nbe);
    int64_t t0 = it_now_ms();
    poisoned_wave(t.net, s, 2);
    int64_t took = it_now_ms() - t0;
    CHECK(took >= 1000);
    expect_filter_event(t.net, 0, tbon_stream_id(s), 0, t.be[1]);
    for (uint32_t w = 3; w <= 6; w++)
        it_sum_wave(s, w, t.be, t.nbe);
    if (getenv("ITEST_VERBOSE"))
        fprintf(stderr, "    the wave's error after %lld ms\n", (long long)took);
    it_stop(&t);
}

/* One outcome per wave, in order (issue 31, item 4): on 2x2, requests sent
 * back to back, the poison's wave twice (request 3 and 5: the same wave
 * number, 5) and one wave every back-end answers in a format the filter
 * refuses (request 7: a string): each of those three is TBON_EFILTER in its
 * place, tbon_stream_request naming it, never a partial result; every other
 * wave is its exact sum, none shifted. */
ITEST(pipelined_faults_one_outcome_per_wave)
{
    it_tree_t t;
    tbon_stream_t *s = start_poisoned(&t, "2x2", NULL, "poison");
    if (!s)
        return;
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_UP, "%ld %d",
                                            (int64_t)4 * 1000 + 5, HOW_SEGV), 0);
    /* request n (from 1) asks for wave w[n - 1]; 0: a string instead */
    const uint32_t w[] = { 1, 2, 5, 3, 5, 4, 0, 6, 7 };
    const size_t nw = sizeof w / sizeof w[0];
    for (size_t i = 0; i < nw; i++) {
        if (w[i])
            CHECK_INT(tbon_stream_send(s, IT_TAG_WAVE, "%ud", w[i]), 0);
        else
            CHECK_INT(tbon_stream_send(s, IT_TAG_ECHO, "%s", "not a number"), 0);
    }
    for (size_t i = 0; i < nw; i++) {
        tbon_packet_t *p = NULL;
        int rc = tbon_stream_recv(s, &p, IT_RECV_MS);
        uint64_t q = tbon_stream_request(s);
        int bad = w[i] == 5 || w[i] == 0;
        CHECK_UINT(q, i + 1);
        if (bad) {
            if (rc != TBON_EFILTER)
                th_fail(__FILE__, __LINE__, "request %zu: rc %d (%s), expected TBON_EFILTER",
                        i + 1, rc, tbon_strerror(rc));
        } else {
            int64_t v = 0;
            if (rc != 0 || tbon_packet_unpack(p, "%ld", &v) != 0 ||
                v != it_wave_sum(t.be, t.nbe, w[i]))
                th_fail(__FILE__, __LINE__, "request %zu (wave %u): rc %d, sum %lld, expected "
                        "%lld", i + 1, w[i], rc, (long long)v,
                        (long long)it_wave_sum(t.be, t.nbe, w[i]));
        }
        tbon_packet_unref(p);
    }
    it_expect_nothing(s, 200, "after the last wave");
    it_stop(&t);
}

/* filter_fe_only.so needs this symbol, which only this process has (the
 * test programs export theirs: --export-dynamic): it loads here and at no
 * commnode or back-end. */
int tbon_test_fe_only(void);
int tbon_test_fe_only(void)
{
    return 1;
}

/* A filter that loads at the FE but not at the commnodes and back-ends
 * fails the load, naming each node's role, rank, host and dlerror's text;
 * nothing of it reaches a receive later, the tree is untouched, a good
 * plug-in loads after it, and the failed one is tried afresh (not taken
 * from a cache). */
ITEST(filter_missing_at_the_commnodes_fails_the_load)
{
    it_tree_t t;
    if (it_start(&t, "2x2", NULL, NULL))
        return;
    char path[PATH_MAX + 64], host[256] = "";
    snprintf(path, sizeof path, "%.*s/tests/plugins/filter_fe_only.so", PATH_MAX,
             it_build_dir());
    gethostname(host, sizeof host - 1);
    for (int round = 0; round < 2; round++) {
        CHECK_INT(tbon_fe_load_filter(t.net, path, "fe_only"), TBON_EFILTER);
        const char *e = tbon_net_error(t.net);
        if (!strstr(e, "did not load on 6 nodes") || !strstr(e, "(commnode on ") ||
            !strstr(e, host) || !strstr(e, "undefined symbol: tbon_test_fe_only") ||
            !strstr(e, "rank "))
            th_fail(__FILE__, __LINE__, "load %d: %s", round, e);
    }
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    CHECK(it_sum_wave(s, 1, t.be, t.nbe) == 0);
    it_expect_nothing(s, 100, "an error of the failed load");
    CHECK(it_load_plugin(t.net, "filter_histo", "histo") >= TBON_FILTER_BUILTIN_COUNT);
    it_stop(&t);
}
