/* test_suspect.c - silence is suspicion, not death (docs/fault-tolerance.md):
 * a stopped commnode is suspected, then confirmed by a second observer and
 * its children adopted; one woken before confirmation is cleared and
 * counts again; a front-end stopped for a long time (Ctrl-Z, a debugger)
 * resumes with the whole tree intact. Real processes, SIGSTOP/SIGCONT. */
#include "itest.h"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* The next event of type for rank r (TBON_RANK_NONE: any rank) within ms;
 * counts the failures seen on the way in *failed (may be NULL). 0 or -1. */
static int next_of(tbon_net_t *net, tbon_event_type_t type, tbon_rank_t r, int ms,
                   tbon_event_t *out, int *failed)
{
    int64_t end = it_now_ms() + ms;
    tbon_event_t ev;
    while (tbon_net_next_event(net, &ev, (int)(end - it_now_ms() > 0 ? end - it_now_ms() : 0))
           == 0) {
        if (failed && ev.type == TBON_EV_NODE_FAILED)
            (*failed)++;
        if (ev.type == type && (r == TBON_RANK_NONE || ev.rank == r)) {
            if (out)
                *out = ev;
            return 0;
        }
    }
    return -1;
}

/* The back-ends of 4x4 but those of commnode 1 (5..8). */
static size_t others(const it_tree_t *t, tbon_rank_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < t->nbe; i++)
        if (t->be[i] < 5 || t->be[i] > 8)
            out[k++] = t->be[i];
    return k;
}

/* Commnode 1 of 4x4 stopped: the FE and its four back-ends find it silent.
 * It is suspected first (waves go on without its subtree), then confirmed
 * - two observers, past the suspicion window - and failed; its back-ends
 * are adopted and the waves are exact over all 16 again. Woken up, it
 * finds itself out and leaves. */
ITEST(stopped_commnode_suspected_confirmed_adopted)
{
    tbon_fe_options_t o = { 0 };
    o.heartbeat_ms = 1000;
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4", &o);
    REQUIRE(s);
    pid_t victim = it_pid_of("tbon_commnode", 1);
    REQUIRE(victim > 0);
    int64_t t0 = it_now_ms();
    kill(victim, SIGSTOP);
    tbon_event_t ev;
    int failed = 0;
    REQUIRE(next_of(t.net, TBON_EV_NODE_SUSPECT, 1, IT_RECV_MS, &ev, &failed) == 0);
    int64_t t_susp = it_now_ms() - t0;
    CHECK_INT(failed, 0);                     /* suspected before anything failed */
    /* Not before the heartbeat timeout (1000 ms) of silence, which began at
     * its last beat: up to a beat's period (250 ms) before the stop, more
     * if its heartbeat thread waited for a CPU. A sanitizer build on a
     * loaded machine starves it longer than any bound worth checking. */
    if (!IT_TSAN && !IT_ASAN)
        CHECK(t_susp >= 400);
    /* While it is suspected, a wave goes on without its subtree. */
    tbon_rank_t rest[16];
    size_t nrest = others(&t, rest);
    REQUIRE(next_of(t.net, TBON_EV_NODE_FAILED, 1, IT_RECV_MS, &ev, NULL) == 0);
    int adopted = 0;
    while (adopted < 4 && next_of(t.net, TBON_EV_NODE_ADOPTED, TBON_RANK_NONE, IT_RECV_MS, &ev,
                                  &failed) == 0) {
        CHECK(ev.rank >= 5 && ev.rank <= 8);
        CHECK(ev.parent != 1);
        adopted++;
    }
    CHECK_INT(adopted, 4);
    CHECK_INT(failed, 0);                     /* no one else */
    if (getenv("ITEST_VERBOSE"))
        fprintf(stderr, "    suspected after %lld ms, all adopted after %lld ms\n",
                (long long)t_susp, (long long)(it_now_ms() - t0));
    (void)nrest;
    for (uint32_t w = 1; w <= 5; w++)
        if (it_sum_wave(s, w, t.be, t.nbe) != 0)
            th_fail(__FILE__, __LINE__, "wave %u after the adoption", w);
    kill(victim, SIGCONT);
    int64_t end = it_now_ms() + 10000;
    while (it_pid_of("tbon_commnode", 1) == victim && it_now_ms() < end)
        it_sleep_ms(20);
    CHECK(it_pid_of("tbon_commnode", 1) != victim);
    for (uint32_t w = 10; w <= 12; w++)
        if (it_sum_wave(s, w, t.be, t.nbe) != 0)
            th_fail(__FILE__, __LINE__, "wave %u after the wake-up", w);
    it_stop(&t);
}

/* Commnode 1 stopped, then woken before the (long) suspicion window ends:
 * suspected, then cleared (TBON_EV_NODE_ALIVE), never failed; the waves
 * during the suspicion complete without its subtree (exactly the other
 * twelve back-ends), and after it the waves count it again. */
ITEST(suspect_woken_in_time_is_cleared)
{
    tbon_fe_options_t o = { 0 };
    o.heartbeat_ms = 1000;
    o.suspect_ms = 60000;       /* far longer than the test: no confirmation */
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4", &o);
    REQUIRE(s);
    pid_t victim = it_pid_of("tbon_commnode", 1);
    REQUIRE(victim > 0);
    kill(victim, SIGSTOP);
    int failed = 0;
    if (next_of(t.net, TBON_EV_NODE_SUSPECT, 1, IT_RECV_MS, NULL, &failed) != 0) {
        kill(victim, SIGCONT);
        th_fail(__FILE__, __LINE__, "commnode 1 never suspected");
        it_stop(&t);
        return;
    }
    /* the status says so (tbon_fe_status), and its children are as they were */
    tbon_node_status_t st[21];
    CHECK_INT(tbon_fe_status(t.net, st, 21, 0), 21);
    CHECK_STR(tbon_node_state_name(st[1].state), "suspect");
    CHECK_STR(tbon_node_state_name(st[5].state), "ok");
    tbon_rank_t rest[16];
    size_t nrest = others(&t, rest);
    for (uint32_t w = 1; w <= 3; w++)
        if (it_sum_wave(s, w, rest, nrest) != 0)
            th_fail(__FILE__, __LINE__, "wave %u during the suspicion", w);
    kill(victim, SIGCONT);
    CHECK(next_of(t.net, TBON_EV_NODE_ALIVE, 1, IT_RECV_MS, NULL, &failed) == 0);
    /* Its back-ends may have suspected it too and clear it in their turn:
     * what counts is that it ends cleared and nobody fails. */
    tbon_event_t ev;
    int suspected = 0;
    while (tbon_net_next_event(t.net, &ev, 1500) == 0) {
        failed += ev.type == TBON_EV_NODE_FAILED;
        if (ev.type == TBON_EV_NODE_SUSPECT && ev.rank == 1)
            suspected = 1;
        if (ev.type == TBON_EV_NODE_ALIVE && ev.rank == 1)
            suspected = 0;
    }
    CHECK_INT(suspected, 0);
    CHECK_INT(failed, 0);
    CHECK_INT(tbon_fe_status(t.net, st, 21, 0), 21);
    CHECK_STR(tbon_node_state_name(st[1].state), "ok");
    /* Its late answers to the waves that closed without it are dropped; the
     * next ones count all sixteen. */
    for (uint32_t w = 10; w <= 14; w++)
        if (it_sum_wave(s, w, t.be, t.nbe) != 0)
            th_fail(__FILE__, __LINE__, "wave %u after the wake-up", w);
    CHECK(it_pid_of("tbon_commnode", 1) == victim);
    CHECK_UINT(tbon_net_num_backends(t.net), t.nbe);
    it_stop(&t);
}

/* ---- a front-end stopped for a long time ---- */

/* The front-end runs in a child process that takes one-letter commands on
 * a pipe ('w': five sum waves; 'e': the failures and suspicions it has
 * seen; 'q': the end) and answers each with a line. */
static void fe_child(int in, int out)
{
    tbon_fe_options_t o = { 0 };
    o.heartbeat_ms = 1000;
    it_tree_t t;
    char line[128];
    if (it_start(&t, "4x4", NULL, &o)) {
        if (write(out, "start failed\n", 13) < 0)
            _exit(3);
        _exit(2);
    }
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    int bad = !s || it_sum_wave(s, 0, t.be, t.nbe) != 0;
    int n = snprintf(line, sizeof line, "ready %d\n", bad);
    if (write(out, line, (size_t)n) < 0)
        _exit(3);
    uint32_t w = 1;
    int failed = 0, suspected = 0;
    char c;
    while (read(in, &c, 1) == 1 && c != 'q') {
        if (c == 'w') {
            int ok = 0;
            for (int i = 0; i < 5; i++, w++)
                ok += s && it_sum_wave(s, w, t.be, t.nbe) == 0;
            n = snprintf(line, sizeof line, "waves %d\n", ok);
        } else {
            tbon_event_t ev;
            while (tbon_net_next_event(t.net, &ev, 200) == 0) {
                failed += ev.type == TBON_EV_NODE_FAILED;
                suspected += ev.type == TBON_EV_NODE_SUSPECT;
            }
            n = snprintf(line, sizeof line, "events %d %d %zu\n", failed, suspected,
                         (size_t)tbon_net_num_backends(t.net));
        }
        if (write(out, line, (size_t)n) < 0)
            break;
    }
    it_stop(&t);
    _exit(th_failures ? 1 : 0);
}

static int ask(int to, int from, char c, char *line, size_t cap, int ms)
{
    if (write(to, &c, 1) != 1)
        return -1;
    size_t k = 0;
    int64_t end = it_now_ms() + ms;
    while (k + 1 < cap && it_now_ms() < end) {
        struct pollfd p = { .fd = from, .events = POLLIN };
        if (poll(&p, 1, 200) <= 0)
            continue;
        if (read(from, &line[k], 1) != 1)
            break;
        if (line[k++] == '\n')
            break;
    }
    line[k] = 0;
    return k > 0 && line[k - 1] == '\n' ? 0 : -1;
}

/* The front-end stopped (SIGSTOP, as Ctrl-Z or a debugger does) for 20 s -
 * seven heartbeat timeouts (3 s) and four relink deadlines (5 s);
 * TBON_TEST_FE_PAUSE_S to make it longer - and resumed: nobody fenced,
 * nobody suspected the FE or left, every back-end still there, the waves
 * exact. */
ITEST_LONG(front_end_paused_tree_intact)
{
    const char *ps = getenv("TBON_TEST_FE_PAUSE_S");
    int pause_s = ps && atoi(ps) > 0 ? atoi(ps) : 20;
    alarm((unsigned)pause_s + 120);     /* the harness's limit, made room for the pause */
    int down[2], up[2];
    REQUIRE(pipe(down) == 0 && pipe(up) == 0);
    pid_t fe = fork();
    REQUIRE(fe >= 0);
    if (fe == 0) {
        /* Dies with the case, even stopped: a case killed by its alarm
         * during the pause left a stopped front-end and its tree behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(down[1]);
        close(up[0]);
        fe_child(down[0], up[1]);
    }
    close(down[0]);
    close(up[1]);
    char line[128] = "";
    size_t k = 0;
    int64_t end = it_now_ms() + 3 * IT_RECV_MS;
    while (k + 1 < sizeof line && it_now_ms() < end) {
        struct pollfd p = { .fd = up[0], .events = POLLIN };
        if (poll(&p, 1, 200) > 0 && (read(up[0], &line[k], 1) != 1 || line[k++] == '\n'))
            break;
    }
    line[k] = 0;
    if (strcmp(line, "ready 0\n") != 0) {
        th_fail(__FILE__, __LINE__, "the front-end did not start: \"%s\"", line);
        kill(fe, SIGKILL);
        waitpid(fe, NULL, 0);
        return;
    }
    kill(fe, SIGSTOP);
    /* The pause is what is tested: a fixed time, not a condition. */
    struct timespec ts = { pause_s, 0 };
    while (nanosleep(&ts, &ts) != 0)
        ;
    kill(fe, SIGCONT);
    CHECK(ask(down[1], up[0], 'w', line, sizeof line, 2 * IT_RECV_MS) == 0);
    CHECK_STR(line, "waves 5\n");
    CHECK(ask(down[1], up[0], 'e', line, sizeof line, IT_RECV_MS) == 0);
    CHECK_STR(line, "events 0 0 16\n");
    CHECK(ask(down[1], up[0], 'w', line, sizeof line, 2 * IT_RECV_MS) == 0);
    CHECK_STR(line, "waves 5\n");
    if (write(down[1], "q", 1) != 1)
        th_fail(__FILE__, __LINE__, "cannot tell the front-end to end");
    int st = 0;
    end = it_now_ms() + IT_RECV_MS;
    while (waitpid(fe, &st, WNOHANG) == 0 && it_now_ms() < end)
        it_sleep_ms(20);
    if (kill(fe, 0) == 0) {
        th_fail(__FILE__, __LINE__, "the front-end did not end");
        kill(fe, SIGKILL);
        waitpid(fe, &st, 0);
    }
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(down[1]);
    close(up[0]);
}

/* Back-ends whose application is away (a long computation outside the
 * library) are run by their kicker thread, which wakes for what arrives and
 * for the node's timers (the link layer's acknowledgements and resends):
 * it must not spin. 16 back-ends of 4x4 are away for 2 s in a wave: they
 * use a few ms of CPU in all, and the wave is exact. */
ITEST(away_backends_do_not_spin)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4", NULL);
    REQUIRE(s);
    pid_t be[64];
    size_t n = it_our_procs("tbon_test_be", be, 64);
    REQUIRE(n == 16);
    long before = 0, after = 0;
    for (size_t i = 0; i < n; i++)
        before += it_cpu_ms(be[i]);
    REQUIRE(tbon_stream_send(s, IT_TAG_SLOW, "%ud %aud", 2000u, t.be, t.nbe) == 0);
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, "the wave of the away back-ends");
    uint64_t v = 0, full = 0;
    for (size_t i = 0; i < t.nbe; i++)
        full |= (uint64_t)1 << (t.be[i] % 64);
    if (p)
        CHECK_INT(tbon_packet_unpack(p, "%uld", &v), 0);
    tbon_packet_unref(p);
    CHECK(v == full);
    for (size_t i = 0; i < n; i++)
        after += it_cpu_ms(be[i]);
    /* Spinning would cost seconds; idle costs milliseconds. */
    if (getenv("TH_VERBOSE"))
        fprintf(stderr, "    16 away back-ends: %ld ms of CPU\n", after - before);
    if (after - before > 400)
        th_fail(__FILE__, __LINE__, "16 away back-ends used %ld ms of CPU in 2 s", after - before);
    it_stop(&t);
}

/* While a back-end's application is away, its node's timers go off through
 * the kicker's timer descriptor: here the link layer's acknowledgement of
 * what arrived (owed 2 ms after fewer than 64 frames, net/link.h), without
 * which the FE keeps every byte it sent and its sends block for good once
 * 8 MiB are held (the application's back-pressure mark). The back-end is
 * sent 12 packets of 1 MiB while its application sleeps (a request that
 * has it sleep, seen in /proc as its thread's nanosleep): the sends must
 * all return while it still sleeps, and everything then comes back exact. */
ITEST_LONG(away_backend_acknowledges_what_arrives)
{
    it_tree_t t;
    if (it_start(&t, "1", NULL, NULL))
        return;
    REQUIRE(t.nbe == 1);
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_NULL, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    pid_t be = it_pid_of("tbon_test_be", t.be[0]);
    REQUIRE(be > 0);
    const uint32_t away_ms = IT_SLOW ? 10000 : 5000;
    REQUIRE(tbon_stream_send(s, IT_TAG_SLOW, "%ud %aud", away_ms, t.be, t.nbe) == 0);
    REQUIRE(tbon_stream_flush(s) == 0);
    /* Wait for its application to be asleep (clock_nanosleep). */
    int64_t dl = it_now_ms() + IT_RECV_MS;
    while (tb_proc_syscall(be, be) != SYS_clock_nanosleep && it_now_ms() < dl)
        it_sleep_ms(5);
    REQUIRE(tb_proc_syscall(be, be) == SYS_clock_nanosleep);
    int64_t t0 = it_now_ms();
    const size_t N = 1u << 20, K = 12;
    uint8_t *buf = malloc(N);
    REQUIRE(buf);
    for (uint32_t k = 0; k < K; k++) {
        it_pattern(buf, N, 5, k);
        CHECK_INT(tbon_stream_send(s, IT_TAG_BYTES, "%auc", buf, N), 0);
    }
    int64_t took = it_now_ms() - t0;
    long still = tb_proc_syscall(be, be);
    if (getenv("TH_VERBOSE"))
        fprintf(stderr, "    12 MiB sent to an away back-end in %lld ms\n", (long long)took);
    if (still != SYS_clock_nanosleep)
        th_fail(__FILE__, __LINE__, "12 MiB to the away back-end took %lld ms: the sends "
                "returned only once its application came back", (long long)took);
    /* Its answer to the sleep, then the 12 echoes in order. */
    tbon_packet_t *p = it_recv(s, away_ms + IT_RECV_MS, "the away back-end's answer");
    CHECK(p && tbon_packet_tag(p) == IT_TAG_SLOW);
    tbon_packet_unref(p);
    for (uint32_t k = 0; k < K; k++) {
        p = it_recv(s, IT_RECV_MS, "an echo");
        if (!p)
            break;
        uint8_t *b = NULL;
        size_t n = 0;
        CHECK_INT(tbon_packet_unpack(p, "%auc", &b, &n), 0);
        it_pattern(buf, N, 5, k);
        if (n != N || !b || memcmp(b, buf, N) != 0)
            th_fail(__FILE__, __LINE__, "echo %u differs (%zu bytes)", k, n);
        free(b);
        tbon_packet_unref(p);
    }
    free(buf);
    it_stop(&t);
}
