/* test_link.c - the link layer over real trees (net/link.h, docs/protocol.md
 * 2.4): bits flipped, connections reset and frames delayed on random data
 * links by the fault shim (tests/faultshim/, LD_PRELOAD in every tree
 * process but the FE, which is this program) while sum and union waves run;
 * no node may be taken for failed, every result must be exact, none may
 * come twice. And a dead commnode is still found at once, not after the
 * relink deadline; a child whose link is down neither holds up the tree's
 * end nor outlives it. */
#include "itest.h"
#include "lib/faultlog.h"

#include <dirent.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One union wave (number w, each number used once): the union stream
 * answers what is new since the last wave: the first time every back-end's
 * rank, 0, 1, 2 and 1000000 + w, afterwards only 1000000 + w. */
static int union_result(tbon_stream_t *s, const it_tree_t *t, uint32_t w, int first)
{
    uint64_t exp[IT_MAX_BE + 8];
    size_t ne = 0;
    if (first) {
        for (size_t i = 0; i < t->nbe; i++)
            exp[ne++] = t->be[i];
        exp[ne++] = 0;
        exp[ne++] = 1;
        exp[ne++] = 2;
    }
    exp[ne++] = 1000000u + w;
    qsort(exp, ne, sizeof exp[0], cmp_u64);
    char what[64];
    snprintf(what, sizeof what, "union wave %u", w);
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, what);
    if (!p)
        return -1;
    uint64_t *v = NULL;
    size_t n = 0;
    int rc = tbon_packet_unpack(p, "%auld", &v, &n);
    if (rc || n != ne || (n && memcmp(v, exp, n * sizeof *v) != 0)) {
        th_fail(__FILE__, __LINE__, "%s: %zu values (rc %d), expected %zu", what, n, rc, ne);
        rc = -1;
    }
    free(v);
    tbon_packet_unref(p);
    return rc ? -1 : 0;
}

/* A sum wave's answer (sent before): exactly the sum over every back-end. */
static int sum_result(tbon_stream_t *s, const it_tree_t *t, uint32_t w)
{
    char what[64];
    snprintf(what, sizeof what, "sum wave %u", w);
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, what);
    if (!p)
        return -1;
    int64_t v = 0;
    int rc = tbon_packet_unpack(p, "%ld", &v);
    if (rc || v != it_wave_sum(t->be, t->nbe, w)) {
        th_fail(__FILE__, __LINE__, "%s: %lld (rc %d), expected %lld", what, (long long)v, rc,
                (long long)it_wave_sum(t->be, t->nbe, w));
        rc = -1;
    }
    tbon_packet_unref(p);
    return rc ? -1 : 0;
}

/* No node failed, left or was adopted: the links hid every fault. */
static void no_membership_events(tbon_net_t *net)
{
    tbon_event_t ev;
    while (tbon_net_next_event(net, &ev, 50) == 0)
        if (ev.type == TBON_EV_NODE_FAILED || ev.type == TBON_EV_NODE_ADOPTED ||
            ev.type == TBON_EV_DATA_LOST)
            th_fail(__FILE__, __LINE__, "event %d for rank %u: a link fault was not hidden",
                    (int)ev.type, ev.rank);
}

/* Rounds of `burst` sum waves and one union wave, pipelined, on shape,
 * with the given fault rates; at least min_flips bit flips and min_resets
 * resets must have happened. */
static void waves_under_faults(const char *shape, int rounds, int burst, const char *flip,
                               const char *rflip, const char *reset, size_t min_flips,
                               size_t min_resets, unsigned seed)
{
    char log[PATH_MAX], armf[PATH_MAX];
    /* To hunt a rare failure: another seed, other rates ("flip,rflip,reset"). */
    const char *seed_env = getenv("TEST_LINK_SEED"), *rates = getenv("TEST_LINK_RATES");
    char rbuf[3][32];
    if (seed_env && *seed_env)
        seed = (unsigned)strtoul(seed_env, NULL, 10);
    if (rates && sscanf(rates, "%31[^,],%31[^,],%31s", rbuf[0], rbuf[1], rbuf[2]) == 3) {
        flip = rbuf[0];
        rflip = rbuf[1];
        reset = rbuf[2];
    }
    snprintf(log, sizeof log, "%s/faults.log", th_tmpdir());
    snprintf(armf, sizeof armf, "%s/faults.arm", th_tmpdir());
    it_fault_env(flip, rflip, reset, "0.01", log, armf, seed);
    /* Relinks and resend requests are logged ("debug"), the back-ends'
     * lines to files beside the commnodes': shown if a wave fails. */
    setenv("TBON_LOG", "debug", 1);
    setenv("TBON_TEST_BE_LOG", "1", 1);
    it_tree_t t;
    tbon_stream_t *sum = it_start_summing(&t, shape, NULL);
    if (!sum)
        return;
    tbon_stream_t *uni = it_stream(t.net, TBON_FILTER_UNION, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(uni);
    REQUIRE(tbon_stream_send(uni, IT_TAG_UNION, "%ud", 0u) == 0);
    REQUIRE(union_result(uni, &t, 0, 1) == 0);
    no_membership_events(t.net);
    it_arm(armf, 1);
    uint32_t w = 1000;
    int bad = 0;
    for (int r = 0; r < rounds && !bad; r++) {
        uint32_t first = w;
        for (int k = 0; k < burst; k++)
            REQUIRE(tbon_stream_send(sum, IT_TAG_WAVE, "%ud", w + (uint32_t)k) == 0);
        REQUIRE(tbon_stream_send(uni, IT_TAG_UNION, "%ud", w) == 0);
        for (int k = 0; k < burst && !bad; k++)
            bad = sum_result(sum, &t, first + (uint32_t)k) != 0;
        if (!bad)
            bad = union_result(uni, &t, first, 0) != 0;
        w += (uint32_t)burst;
    }
    it_arm(armf, 0);
    it_expect_nothing(sum, 200, "sum (a duplicate?)");
    it_expect_nothing(uni, 10, "union (a duplicate?)");
    no_membership_events(t.net);
    size_t flips = tb_fault_count(log, "flip") + tb_fault_count(log, "rflip"), resets = tb_fault_count(log, "reset");
    if (getenv("ITEST_VERBOSE"))
        fprintf(stderr, "    %s: %zu bits flipped, %zu resets, %zu delays over %d rounds\n",
                shape, flips, resets, tb_fault_count(log, "delay"), rounds);
    CHECK(flips >= min_flips);
    CHECK(resets >= min_resets);
    /* and the tree still ends in order */
    it_stop(&t);
}

ITEST(bits_flipped_and_links_reset_4x4)
{
    waves_under_faults("4x4", IT_SLOW ? 60 : 150, 4, "0.01", "0.002", "0.004", 5, 3, 7);
}

ITEST(bits_flipped_and_links_reset_8x8)
{
    waves_under_faults("8x8", IT_SLOW ? 25 : 60, 4, "0.005", "0.001", "0.002", 5, 3, 11);
}

/* The FE's events after victim's kill at t0 until its failure (*failed_at:
 * when) and n adoptions (of ranks from first on; first 0: any) are in, or
 * IT_RECV_MS has passed. Returns how many adoptions came. */
static size_t await_recovery(tbon_net_t *net, tbon_rank_t victim, tbon_rank_t first, size_t n,
                             int64_t t0, int64_t *failed_at)
{
    size_t adopted = 0;
    while ((!*failed_at || adopted < n) && it_now_ms() - t0 < IT_RECV_MS) {
        tbon_event_t ev;
        if (tbon_net_next_event(net, &ev, 500) != 0)
            continue;
        if (ev.type == TBON_EV_NODE_FAILED && ev.rank == victim && !*failed_at)
            *failed_at = it_now_ms();
        adopted += ev.type == TBON_EV_NODE_ADOPTED && ev.rank >= first &&
                   (first == 0 || ev.rank < first + n);
    }
    return adopted;
}

/* A commnode killed with the link layer on: its parent (the FE) has its
 * process's end from the event connection and closes the broken link at
 * once, without waiting out TBON_RELINK_MS; its children find the parent's
 * port closed and are adopted. */
ITEST(dead_commnode_found_at_once)
{
    setenv("TBON_RELINK_MS", "20000", 1);
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4", NULL);
    if (!s)
        return;
    pid_t victim = it_pid_of("tbon_commnode", 2);
    REQUIRE(victim > 0);
    int64_t t0 = it_now_ms(), failed_at = 0;
    kill(victim, SIGKILL);
    size_t adopted = await_recovery(t.net, 2, 0, 4, t0, &failed_at);
    CHECK(failed_at > 0);
    CHECK_UINT(adopted, 4);
    if (failed_at)
        CHECK(failed_at - t0 < 5000);    /* far below the 20 s relink deadline */
    for (uint32_t w = 0; w < 5; w++)
        if (it_sum_wave(s, 300 + w, t.be, t.nbe) != 0)
            break;
    it_stop(&t);
}

/* A thread's state letter (/proc/PID/task/TID/stat), or 0 if it is gone. */
static char task_state(pid_t pid, pid_t tid)
{
    char path[96], buf[512];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] && p[2] ? p[2] : 0;
}

/* The thread of pid named name (its comm), or 0. */
static pid_t task_named(pid_t pid, const char *name)
{
    char path[400], comm[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    pid_t found = 0;
    struct dirent *e;
    while (d && !found && (e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/comm", (int)pid, e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(comm, sizeof comm, f)) {
            comm[strcspn(comm, "\n")] = '\0';
            if (strcmp(comm, name) == 0)
                found = (pid_t)atoi(e->d_name);
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return found;
}

/* A killed commnode closes its children's data and event connections at
 * once. Here each orphan's EDS thread is held (ptrace, that thread alone)
 * through the kill, so that its reactor reads the data connection's end
 * first, with the event connection's end unread: the parent is dead, not
 * the link, and no orphan may try to reconnect to it (a thread and a
 * handshake that fails, in the middle of the recovery). The code before
 * the EDS published the parent's event socket relinked every time here. */
ITEST(no_relink_toward_a_killed_parent)
{
    setenv("TBON_RELINK_MS", "20000", 1);
    setenv("TBON_LOG", "info", 1);          /* "...: reconnecting" is an info line */
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4x4", NULL);   /* 1-4, 5-20, BEs */
    if (!s)
        return;
    const tbon_rank_t victim = 1, first = 5;
    pid_t vp = it_pid_of("tbon_commnode", victim), op[4], eds[4], main_tid[4];
    REQUIRE(vp > 0);
    for (int i = 0; i < 4; i++) {
        op[i] = it_pid_of("tbon_commnode", first + (tbon_rank_t)i);
        REQUIRE(op[i] > 0);
        main_tid[i] = op[i];                /* a commnode's reactor is its main thread */
        eds[i] = task_named(op[i], "tbon-eds");
        REQUIRE(eds[i] > 0);
        REQUIRE(ptrace(PTRACE_SEIZE, eds[i], NULL, NULL) == 0);
        REQUIRE(ptrace(PTRACE_INTERRUPT, eds[i], NULL, NULL) == 0);
        int st;
        REQUIRE(waitpid(eds[i], &st, __WALL) == eds[i]);
    }
    kill(vp, SIGKILL);
    int64_t t0 = it_now_ms();
    char vs;
    while ((vs = task_state(vp, vp)) != 0 && vs != 'Z' && it_now_ms() - t0 < IT_RECV_MS)
        it_sleep_ms(2);
    /* Its sockets are closed; each orphan's reactor was woken by the data
     * connection's end, and is back asleep once it has dealt with it. */
    for (int i = 0; i < 4; i++)
        while (task_state(op[i], main_tid[i]) != 'S' && it_now_ms() - t0 < IT_RECV_MS)
            it_sleep_ms(2);
    for (int i = 0; i < 4; i++)
        CHECK(ptrace(PTRACE_DETACH, eds[i], NULL, NULL) == 0);
    int64_t failed_at = 0;
    size_t adopted = await_recovery(t.net, victim, first, 4, t0, &failed_at);
    CHECK(failed_at > 0);
    CHECK_UINT(adopted, 4);
    for (int i = 0; i < 4; i++) {
        tbon_rank_t r = first + (tbon_rank_t)i;
        int total = 0;
        CHECK_INT(it_log_lines(r, "reconnecting", &total), 0);
        CHECK(total > 0);                   /* its log is there, info lines too */
    }
    for (uint32_t w = 0; w < 3; w++)
        if (it_sum_wave(s, 400 + w, t.be, t.nbe) != 0)
            break;
    it_stop(&t);
}

/* A child whose data link is down when the tree ends: a back-end, stopped
 * (SIGSTOP), whose connection its commnode has just reset (the fault shim in
 * commnode 1 only, at the first write of a wave of stream 2, which only that
 * back-end takes). The commnode waits for it to reconnect (TBON_RELINK_MS,
 * 20 s here) when the FE ends the tree. The end must not wait for it (no
 * "children did not leave in time", the commnode's 3 s deadline), and it
 * must not outlive the session: a child lost while the tree ran is not its
 * parent's to kill, but once it runs again it finds its parent gone and the
 * tree with it, and exits on its own. */
ITEST(down_child_does_not_hold_the_shutdown)
{
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/faults.log", th_tmpdir());
    setenv("TBON_RELINK_MS", "20000", 1);
    it_fault_env("0", "0", "0", "0", log, "", 5);
    setenv("TBON_FAULT_RANKS", "1", 1);
    setenv("TBON_FAULT_RESET_STREAM", "2", 1);
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "4x4", NULL);   /* 1-4, BEs 5-20 */
    unsetenv("TBON_FAULT_RANKS");
    unsetenv("TBON_FAULT_RESET_STREAM");
    if (!s)
        return;
    const tbon_rank_t be = 5;               /* under commnode 1 */
    pid_t bp = it_pid_of("tbon_test_be", be);
    REQUIRE(bp > 0);
    tbon_comm_t *c = tbon_fe_comm_new(t.net, &be, 1);
    REQUIRE(c);
    tbon_stream_t *one = tbon_fe_stream_new(t.net, c, TBON_FILTER_SUM, TBON_SYNC_DONTWAIT,
                                            TBON_FILTER_NULL);
    REQUIRE(one);
    REQUIRE(tbon_stream_id(one) == 2);
    REQUIRE(kill(bp, SIGSTOP) == 0);
    int64_t t0 = it_now_ms();
    while (task_state(bp, bp) != 'T' && it_now_ms() - t0 < IT_RECV_MS)
        it_sleep_ms(2);
    REQUIRE(task_state(bp, bp) == 'T');
    REQUIRE(tbon_stream_send(one, IT_TAG_WAVE, "%ud", 7u) == 0);
    /* The write that fails is the reactor's: its link is down (waiting for
     * the back-end to reconnect) before it reads anything more, the
     * SHUTDOWN among it. */
    while (tb_fault_count(log, "reset") == 0 && it_now_ms() - t0 < IT_RECV_MS)
        it_sleep_ms(5);
    CHECK_UINT(tb_fault_count(log, "reset"), 1);
    int64_t t1 = it_now_ms();
    it_stop(&t);
    int64_t took = it_now_ms() - t1;
    CHECK_INT(it_log_lines(1, "did not leave in time", NULL), 0);
    if (getenv("ITEST_VERBOSE"))
        fprintf(stderr, "    teardown with the down child: %lld ms\n", (long long)took);
    /* Ours now (the subreaper) if it is still there: it runs again, finds
     * the tree gone and leaves. */
    kill(bp, SIGCONT);
    t0 = it_now_ms();
    int st = 0;
    pid_t w = 0;
    while ((w = waitpid(bp, &st, WNOHANG)) == 0 && it_now_ms() - t0 < IT_RECV_MS)
        it_sleep_ms(10);
    CHECK(w == bp || (w < 0 && errno == ECHILD));
    if (w == 0)
        kill(bp, SIGKILL);
}
