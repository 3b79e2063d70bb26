/* test_join.c - back-ends joining a running tree (seed 000 section 3.7)
 * while a broadcast stream is streaming, and leaving it in order: a joiner
 * gets a rank and a parent from the FE, appears in tbon_net_backends and in
 * the broadcast stream (every wave sent after its TBON_EV_NODE_JOINED sums
 * it in, exactly), and a back-end that leaves is TBON_EV_NODE_LEFT, not a
 * failure; the views stay consistent throughout */
#include "itest.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_JOIN 128

/* Start a tbon_test_be that joins through the attach file; its pid. */
static pid_t spawn_joiner(const char *file)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl(it_be_path(), "tbon_test_be", "--attach", file, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int in(const tbon_rank_t *v, size_t n, tbon_rank_t r)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == r)
            return 1;
    return 0;
}

/* Concat waves on s while `want` joiners come in. Each wave lists who
 * answered, once each: the original back-ends and every joiner whose
 * TBON_EV_NODE_JOINED came before the wave was sent must be there, exactly
 * once; anyone else must be a joiner not yet announced. Returns the number
 * of joiners seen (their ranks in joined[]). */
static size_t stream_through_joins(it_tree_t *t, tbon_stream_t *s, size_t want,
                                   tbon_rank_t *joined)
{
    size_t nj = 0, bad = 0, after = 0;
    uint32_t w = 1;
    int64_t end = it_now_ms() + IT_RECV_MS * 2;
    while (it_now_ms() < end && bad < 5 && (nj < want || after < 5)) {
        tbon_event_t ev;
        while (tbon_net_next_event(t->net, &ev, 0) == 0)
            if (ev.type == TBON_EV_NODE_JOINED && nj < MAX_JOIN) {
                CHECK(ev.parent != TBON_RANK_NONE);
                joined[nj++] = ev.rank;
            }
        size_t known = nj;           /* joined before this wave was sent */
        if (tbon_stream_send(s, IT_TAG_CONCAT, "%ud", w) != 0) {
            th_fail(__FILE__, __LINE__, "tbon_stream_send: %s", tbon_net_error(t->net));
            return nj;
        }
        tbon_packet_t *p = it_recv(s, IT_RECV_MS, "a wave during the joins");
        if (!p)
            return nj;
        int32_t *v = NULL;
        size_t nv = 0;
        CHECK_INT(tbon_packet_unpack(p, "%ad", &v, &nv), 0);
        /* the result's own count (coverage) is the answers it holds, joiners
         * included: never one of its own making */
        size_t held = tbon_packet_covered(p, NULL, 0);
        tbon_packet_unref(p);
        if (held != nv / 2)
            th_fail(__FILE__, __LINE__, "wave %u: %zu answers, coverage says %zu", w, nv / 2,
                    held);
        static tbon_rank_t who[IT_MAX_BE + MAX_JOIN];
        size_t nw = 0, missing = 0, strange = 0;
        for (size_t i = 0; i + 1 < nv; i += 2) {
            tbon_rank_t r = (tbon_rank_t)v[i];
            /* Its own wave, once, and an original back-end or a joiner. */
            if ((uint32_t)v[i + 1] != w || in(who, nw, r) || nw == IT_MAX_BE + MAX_JOIN ||
                (r < t->total && !in(t->be, t->nbe, r)))
                strange++;
            else
                who[nw++] = r;
        }
        free(v);
        for (size_t i = 0; i < t->nbe; i++)
            missing += !in(who, nw, t->be[i]);
        for (size_t i = 0; i < known; i++)
            missing += !in(who, nw, joined[i]);
        if (missing || strange) {
            bad++;
            th_fail(__FILE__, __LINE__, "wave %u: %zu answers, %zu expected missing, %zu "
                    "duplicate or out of place", w, nw, missing, strange);
        }
        if (nj == want)
            after++;
        w++;
    }
    return nj;
}

static void reap_joiners(const pid_t *pids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int st = 0;
        int64_t end = it_now_ms() + 10000;
        while (waitpid(pids[i], &st, WNOHANG) == 0 && it_now_ms() < end)
            it_sleep_ms(10);
        if (kill(pids[i], 0) == 0) {
            th_fail(__FILE__, __LINE__, "joiner %d still running", (int)pids[i]);
            kill(pids[i], SIGKILL);
            waitpid(pids[i], &st, 0);
        } else {
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
    }
}

/* The views and copies agree once stable, with joined ranks included. */
static void check_views(it_tree_t *t, size_t live_be)
{
    tbon_event_t ev;
    while (tbon_net_next_event(t->net, &ev, 300) == 0)
        ;
    tbon_view_check_t c;
    int rc = tbon_fe_check_views(t->net, &c, IT_RECV_MS);
    CHECK_INT(rc, 0);
    if (rc)
        th_fail(__FILE__, __LINE__, "%s", tbon_net_error(t->net));
    CHECK_UINT(tbon_net_num_backends(t->net), live_be);
}

static void joins(const char *shape, size_t k)
{
    char file[600];
    snprintf(file, sizeof file, "%s/attach-%zu", th_tmpdir(), k);
    tbon_fe_options_t o = { 0 };
    o.attach_file = file;
    it_tree_t t;
    if (it_start(&t, shape, NULL, &o))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_CONCAT, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    static pid_t pids[MAX_JOIN];
    static tbon_rank_t joined[MAX_JOIN];
    for (size_t i = 0; i < k; i++)
        REQUIRE((pids[i] = spawn_joiner(file)) > 0);
    size_t nj = stream_through_joins(&t, s, k, joined);
    CHECK_UINT(nj, k);
    /* Every joined rank is new, a back-end, and in tbon_net_backends. */
    tbon_rank_t all[IT_MAX_BE + MAX_JOIN];
    int n = tbon_net_backends(t.net, all, sizeof all / sizeof all[0]);
    CHECK_INT(n, (long long)(t.nbe + k));
    for (size_t i = 0; i < nj; i++) {
        CHECK(joined[i] >= t.total);
        int found = 0;
        for (int j = 0; j < n; j++)
            found |= all[j] == joined[i];
        CHECK(found);
    }
    /* A stream made now on the broadcast communicator includes them. */
    tbon_stream_t *s2 = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s2);
    tbon_rank_t every[IT_MAX_BE + MAX_JOIN];
    memcpy(every, t.be, t.nbe * sizeof *every);
    memcpy(every + t.nbe, joined, nj * sizeof *every);
    for (uint32_t w = 1000; w < 1003; w++)
        it_sum_wave(s2, w, every, t.nbe + nj);
    check_views(&t, t.nbe + k);
    CHECK(access(file, F_OK) == 0);
    it_stop(&t);
    CHECK(access(file, F_OK) != 0);         /* its secret goes with the session */
    reap_joiners(pids, k);
}

ITEST(one_backend_joins_while_streaming) { joins("2x2", 1); }
ITEST(hundred_backends_join_while_streaming) { joins("4x4", 100); }

/* A joined back-end and an original one leave in order (TBON_EV_NODE_LEFT,
 * no failure), another is killed (TBON_EV_NODE_FAILED): the stream goes on
 * with exactly the others. */
ITEST(leave_is_not_a_failure)
{
    char file[600];
    snprintf(file, sizeof file, "%s/attach-leave", th_tmpdir());
    tbon_fe_options_t o = { 0 };
    o.attach_file = file;
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "2x2", &o);
    if (!s)
        return;
    pid_t jp = spawn_joiner(file);
    REQUIRE(jp > 0);
    tbon_event_t ev;
    tbon_rank_t j = TBON_RANK_NONE;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (j == TBON_RANK_NONE && tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) == 0)
        if (ev.type == TBON_EV_NODE_JOINED)
            j = ev.rank;
    REQUIRE(j != TBON_RANK_NONE);
    /* The joiner (7) and back-end 3 leave. */
    const uint32_t go[] = { j, 3 };
    REQUIRE(tbon_stream_send(s, IT_TAG_LEAVE, "%aud", go, (size_t)2) == 0);
    tbon_packet_unref(it_recv(s, IT_RECV_MS, "the leave answers"));
    int left = 0;
    end = it_now_ms() + IT_RECV_MS;
    while (left < 2 && tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) == 0) {
        CHECK(ev.type != TBON_EV_NODE_FAILED);
        if (ev.type == TBON_EV_NODE_LEFT) {
            CHECK(ev.rank == j || ev.rank == 3);
            left++;
        }
    }
    CHECK_INT(left, 2);
    reap_joiners(&jp, 1);
    /* Back-end 4 dies: that one is a failure. */
    pid_t p4 = it_pid_of("tbon_test_be", 4);
    REQUIRE(p4 > 0);
    kill(p4, SIGKILL);
    int failed = 0;
    end = it_now_ms() + IT_RECV_MS;
    while (!failed && tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) == 0)
        failed = ev.type == TBON_EV_NODE_FAILED && ev.rank == 4;
    CHECK(failed);
    const tbon_rank_t rest[] = { 5, 6 };
    for (uint32_t w = 10; w < 13; w++)
        it_sum_wave(s, w, rest, 2);
    check_views(&t, 2);
    it_stop(&t);
}

/* The next event of type within IT_RECV_MS (for rank r, or any rank if r is
 * TBON_RANK_NONE) into *ev; 0, or -1 (failure recorded). Other events are
 * checked by bad: a failure of a rank not in ok[0..nok) is one. */
static int wait_event(tbon_net_t *net, tbon_event_type_t type, tbon_rank_t r, tbon_event_t *ev,
                      const tbon_rank_t *ok, size_t nok)
{
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (tbon_net_next_event(net, ev, (int)(end - it_now_ms())) == 0) {
        if (ev->type == TBON_EV_NODE_FAILED && !in(ok, nok, ev->rank))
            th_fail(__FILE__, __LINE__, "rank %u reported failed", ev->rank);
        if (ev->type == type && (r == TBON_RANK_NONE || ev->rank == r))
            return 0;
    }
    th_fail(__FILE__, __LINE__, "no event %d for rank %u", (int)type, (unsigned)r);
    return -1;
}

/* Start shape (it_start_summing) with an attach file, th_tmpdir()/NAME, its
 * path in file; hb: the heartbeat timeout (0: the default). */
static tbon_stream_t *start_attached(it_tree_t *t, const char *shape, const char *name, int hb,
                                     char *file, size_t cap)
{
    snprintf(file, cap, "%s/%s", th_tmpdir(), name);
    tbon_fe_options_t o = { 0 };
    o.attach_file = file;
    o.heartbeat_ms = hb;
    return it_start_summing(t, shape, &o);
}

/* Stop (SIGSTOP) or kill pid, rank r, and wait for its TBON_EV_NODE_FAILED:
 * the incarnation it had, or UINT32_MAX (failure recorded). */
static uint32_t fail_rank(it_tree_t *t, pid_t pid, int sig, tbon_rank_t r)
{
    tbon_event_t ev;
    kill(pid, sig);
    return wait_event(t->net, TBON_EV_NODE_FAILED, r, &ev, &r, 1) == 0 ? ev.incarnation
                                                                        : UINT32_MAX;
}

static pid_t spawn(const char *exe, const char *const *argv)
{
    pid_t pid = fork();
    if (pid == 0) {
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Commnode 1 of the 2x3 tree dies: its orphans 3 4 5 rotate over 2 and c,
 * which must adopt at least one. */
static void kill_one_adopted_by(it_tree_t *t, tbon_rank_t c)
{
    pid_t p1 = it_pid_of("tbon_commnode", 1);
    REQUIRE(p1 > 0);
    kill(p1, SIGKILL);
    int adopted = 0, by_c = 0;
    tbon_event_t ev;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (adopted < 3 && tbon_net_next_event(t->net, &ev, (int)(end - it_now_ms())) == 0) {
        if (ev.type == TBON_EV_NODE_FAILED && ev.rank != 1)
            th_fail(__FILE__, __LINE__, "rank %u reported failed", ev.rank);
        if (ev.type == TBON_EV_NODE_ADOPTED) {
            CHECK(ev.rank >= 3 && ev.rank <= 5);
            CHECK(ev.parent == 2 || ev.parent == c);
            adopted++;
            by_c += ev.parent == c;
        }
    }
    CHECK_INT(adopted, 3);
    CHECK(by_c >= 1);
}

/* A commnode joins the running tree (tbon_commnode --join): the FE gets
 * TBON_EV_NODE_JOINED; a back-end joining later is given to it (the least
 * loaded parent), and when commnode 1 is killed the new commnode adopts at
 * least one of its orphans - before that back-end joins (kill_first: the
 * orphans are the first of its children to take part in the stream, and
 * graft it up through it) or after. The sum waves are exact throughout,
 * with the joined back-end in them, and the copies agree. */
static void commnode_join(int kill_first)
{
    char file[600], cn[PATH_MAX + 64];
    snprintf(cn, sizeof cn, "%s/bin/tbon_commnode", it_build_dir());
    it_tree_t t;     /* 1: 3 4 5, 2: 6 7 8 */
    tbon_stream_t *s = start_attached(&t, "2x3", kill_first ? "attach-cn1" : "attach-cn2", 0,
                                      file, sizeof file);
    if (!s)
        return;
    const char *cargv[] = { "tbon_commnode", "--join", file, NULL };
    pid_t cp = spawn(cn, cargv);
    REQUIRE(cp > 0);
    tbon_event_t ev;
    const tbon_rank_t one[] = { 1 };
    REQUIRE(wait_event(t.net, TBON_EV_NODE_JOINED, TBON_RANK_NONE, &ev, NULL, 0) == 0);
    tbon_rank_t c = ev.rank;
    CHECK_UINT(c, t.total);
    CHECK_UINT(ev.parent, 0);               /* the only node of height >= 2 */
    CHECK_UINT(tbon_net_num_backends(t.net), t.nbe);    /* a commnode is no back-end */
    /* The FE announces a join when it takes the new commnode as a child; the
     * commnode takes orphans only once it has the port table, which the FE
     * sent it just before the view that carries its join. So the view that
     * first comes back stable after the join has passed through the new
     * commnode after its port table: from then on it can adopt. */
    uint64_t join_view = tbon_net_view_version(t.net);
    REQUIRE(wait_event(t.net, TBON_EV_VIEW_STABLE, TBON_RANK_NONE, &ev, NULL, 0) == 0);
    CHECK(ev.view_version >= join_view);
    for (uint32_t w = 1; w < 4; w++)
        it_sum_wave(s, w, t.be, t.nbe);
    if (kill_first) {
        kill_one_adopted_by(&t, c);
        for (uint32_t w = 5; w < 8; w++)
            it_sum_wave(s, w, t.be, t.nbe);
    }
    /* A back-end joins: under the new commnode, the least loaded. */
    pid_t jp = spawn_joiner(file);
    REQUIRE(jp > 0);
    REQUIRE(wait_event(t.net, TBON_EV_NODE_JOINED, TBON_RANK_NONE, &ev, one, 1) == 0);
    tbon_rank_t j = ev.rank;
    CHECK_UINT(j, c + 1);
    CHECK_UINT(ev.parent, c);
    tbon_rank_t every[16];
    memcpy(every, t.be, t.nbe * sizeof *every);
    every[t.nbe] = j;
    for (uint32_t w = 10; w < 13; w++)
        it_sum_wave(s, w, every, t.nbe + 1);
    if (!kill_first)
        kill_one_adopted_by(&t, c);
    for (uint32_t w = 20; w < 25; w++)
        it_sum_wave(s, w, every, t.nbe + 1);
    check_views(&t, t.nbe + 1);
    it_stop(&t);
    reap_joiners(&jp, 1);
    reap_joiners(&cp, 1);
}

ITEST(commnode_join_then_adopter) { commnode_join(0); }
ITEST(commnode_join_adopts_first) { commnode_join(1); }

/* A restarted back-end comes back with a higher incarnation, and its old
 * process is ignored: back-end 3 is stopped (SIGSTOP) until it is fenced, a
 * new process takes rank 3 back (tbon_be_attach with the rank), then the
 * old one is woken up (SIGCONT): it finds its parent gone, asks to be
 * adopted with its old incarnation and tells the FE its parent failed;
 * every node refuses it and it exits, and no one else is reported failed.
 * The sum waves count rank 3 exactly once throughout. */
ITEST_LONG(restart_stale_incarnation_ignored)
{
    char file[600];
    it_tree_t t;     /* 1: 3 4, 2: 5 6 */
    tbon_stream_t *s = start_attached(&t, "2x2", "attach-restart", 1000, file, sizeof file);
    if (!s)
        return;
    pid_t old = it_pid_of("tbon_test_be", 3);
    REQUIRE(old > 0);
    uint32_t old_inc = fail_rank(&t, old, SIGSTOP, 3);
    REQUIRE(old_inc != UINT32_MAX);
    tbon_event_t ev;
    const tbon_rank_t three[] = { 3 };
    const tbon_rank_t rest[] = { 4, 5, 6 };
    it_sum_wave(s, 1, rest, 3);
    /* Its restarted process. */
    const char *bargv[] = { "tbon_test_be", "--attach", file, "--rank", "3", NULL };
    pid_t np = spawn(it_be_path(), bargv);
    REQUIRE(np > 0);
    REQUIRE(wait_event(t.net, TBON_EV_NODE_JOINED, 3, &ev, three, 1) == 0);
    CHECK(ev.incarnation > old_inc);
    CHECK_UINT(ev.incarnation >> 16, (old_inc >> 16) + 1);
    CHECK_UINT(tbon_net_num_backends(t.net), t.nbe);
    for (uint32_t w = 10; w < 13; w++)
        it_sum_wave(s, w, t.be, t.nbe);
    REQUIRE(wait_event(t.net, TBON_EV_VIEW_STABLE, TBON_RANK_NONE, &ev, three, 1) == 0);
    /* The old process wakes up. */
    kill(old, SIGCONT);
    int64_t end = it_now_ms() + 10000;     /* (only the old one has --tbon-rank 3) */
    while (it_pid_of("tbon_test_be", 3) == old && it_now_ms() < end)
        it_sleep_ms(20);
    if (it_pid_of("tbon_test_be", 3) == old) {
        th_fail(__FILE__, __LINE__, "the old process still runs");
        kill(old, SIGKILL);
    }
    while (tbon_net_next_event(t.net, &ev, 500) == 0) {
        if (ev.type == TBON_EV_NODE_FAILED)
            th_fail(__FILE__, __LINE__, "rank %u reported failed after the wake-up", ev.rank);
        if (ev.type == TBON_EV_NODE_ADOPTED)
            th_fail(__FILE__, __LINE__, "rank %u adopted after the wake-up", ev.rank);
    }
    for (uint32_t w = 20; w < 25; w++)
        it_sum_wave(s, w, t.be, t.nbe);
    check_views(&t, t.nbe);
    /* The new process fails like any other: its failure is news. */
    CHECK_UINT(fail_rank(&t, np, SIGKILL, 3) >> 16, (old_inc >> 16) + 1);
    it_sum_wave(s, 30, rest, 3);
    check_views(&t, t.nbe - 1);
    it_stop(&t);
    int st;
    waitpid(np, &st, 0);
}

/* Run tbon_commnode with args (stderr to a file); its exit status, and its
 * stderr in *err (malloc'd). */
static int run_commnode(const char *const *args, char **err)
{
    char cn[PATH_MAX + 64], out[700];
    snprintf(cn, sizeof cn, "%s/bin/tbon_commnode", it_build_dir());
    snprintf(out, sizeof out, "%s/commnode-stderr", th_tmpdir());
    const char *argv[12] = { "tbon_commnode" };
    for (size_t i = 0; args[i] && i + 2 < sizeof argv / sizeof *argv; i++)
        argv[i + 1] = args[i];
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(out, "w", stderr) || !freopen("/dev/null", "w", stdout))
            _exit(126);
        execv(cn, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    *err = th_read_file(out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* tbon_commnode --join with bad arguments, a missing attach file, or a rank
 * the FE will not take back: a non-zero exit, a message naming what, and
 * the tree untouched. */
ITEST(commnode_join_refusals)
{
    char file[600];
    it_tree_t t;     /* 1: 3 4, 2: 5 6 */
    tbon_stream_t *s = start_attached(&t, "2x2", "attach-refuse", 0, file, sizeof file);
    if (!s)
        return;
    static const struct {
        const char *args[6];
        int status;
        const char *says;
    } cases[] = {
        { { "--rank", "3", NULL }, 2, "--rank goes with --join" },
        { { "--join", NULL }, 2, "--join needs a value" },
        { { "--join", "/nonexistent/attach", NULL }, 1, "cannot open the attach file "
                                                         "/nonexistent/attach" },
        { { "--join", "F", "--rank", "zero", NULL }, 1, "--rank: bad rank \"zero\"" },
        { { "--join", "F", "--tbon-rank", "3", NULL }, 2, "do not go together" },
        /* getopt_long: a bad option named, launcher options in any spelling
         * getopt takes, no stray words. */
        { { "--bogus", NULL }, 2, "unknown or ambiguous option '--bogus'" },
        { { "-x", NULL }, 2, "unknown option '-x'" },
        { { "--tbon-secret-stdin=1", NULL }, 2,
          "option '--tbon-secret-stdin=1': unknown, or it takes no value" },
        { { "--join", "F", "stray", NULL }, 2, "unexpected argument 'stray'" },
        { { "--join", "F", "--tbon-ra=3", NULL }, 2,
          "--join and the launcher's --tbon-rank do not go together" },
        { { "--tbon-parent", NULL }, 2, "--tbon-parent needs a value" },
        { { "--tbon-rank", "3", NULL }, 2, "not started by a tbon launcher" },
        { { "--tbon-parent=localhost:1", "--tbon-rank", "3", "--tbon-session", "zz", NULL }, 2,
          "--tbon-session: bad id \"zz\"" },
        { { "--help", NULL }, 0, "" },
        /* Alive: not taken back. */
        { { "--join", "F", "--rank", "1", NULL }, 1, "did not take rank 1 back" },
        /* A back-end's rank (and alive). */
        { { "--join", "F", "--rank", "3", NULL }, 1, "did not take rank 3 back" },
        { { "--join", "F", "--rank", "99", NULL }, 1, "did not take rank 99 back" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[6];
        size_t k = 0;
        for (; cases[i].args[k]; k++)
            args[k] = strcmp(cases[i].args[k], "F") == 0 ? file : cases[i].args[k];
        args[k] = NULL;
        char *err = NULL;
        int st = run_commnode(args, &err);
        if (st != cases[i].status || !err || !strstr(err, cases[i].says))
            th_fail(__FILE__, __LINE__, "case %zu: exit %d, stderr \"%s\" without \"%s\"", i,
                    st, err ? err : "", cases[i].says);
        free(err);
    }
    tbon_event_t ev;
    while (tbon_net_next_event(t.net, &ev, 200) == 0)
        CHECK(ev.type != TBON_EV_NODE_FAILED && ev.type != TBON_EV_NODE_JOINED);
    for (uint32_t w = 1; w < 4; w++)
        it_sum_wave(s, w, t.be, t.nbe);
    check_views(&t, t.nbe);
    it_stop(&t);
}

/* A commnode killed with kill -9 comes back (tbon_commnode --join FILE
 * --rank 1) at the next generation, childless: its orphans stay with their
 * adopters, the back-end that joins next goes to it, and the sums include
 * that back-end exactly. */
ITEST(commnode_restart)
{
    char file[600], cn[PATH_MAX + 64];
    snprintf(cn, sizeof cn, "%s/bin/tbon_commnode", it_build_dir());
    it_tree_t t;     /* 1: 4 5, 2: 6 7, 3: 8 9 */
    tbon_stream_t *s = start_attached(&t, "3x2", "attach-cn-restart", 0, file, sizeof file);
    if (!s)
        return;
    pid_t p1 = it_pid_of("tbon_commnode", 1);
    REQUIRE(p1 > 0);
    uint32_t old_inc = fail_rank(&t, p1, SIGKILL, 1);
    REQUIRE(old_inc != UINT32_MAX);
    tbon_event_t ev;
    const tbon_rank_t one[] = { 1 };
    REQUIRE(wait_event(t.net, TBON_EV_VIEW_STABLE, TBON_RANK_NONE, &ev, one, 1) == 0);
    for (uint32_t w = 1; w < 4; w++)
        it_sum_wave(s, w, t.be, t.nbe);
    const char *cargv[] = { "tbon_commnode", "--join", file, "--rank", "1", NULL };
    pid_t cp = spawn(cn, cargv);
    REQUIRE(cp > 0);
    REQUIRE(wait_event(t.net, TBON_EV_NODE_JOINED, 1, &ev, one, 1) == 0);
    CHECK_UINT(ev.incarnation >> 16, (old_inc >> 16) + 1);
    CHECK_UINT(ev.parent, 0);
    pid_t jp = spawn_joiner(file);
    REQUIRE(jp > 0);
    REQUIRE(wait_event(t.net, TBON_EV_NODE_JOINED, TBON_RANK_NONE, &ev, one, 1) == 0);
    CHECK_UINT(ev.rank, t.total);
    CHECK_UINT(ev.parent, 1);               /* no children: the least loaded */
    tbon_rank_t every[16];
    memcpy(every, t.be, t.nbe * sizeof *every);
    every[t.nbe] = ev.rank;
    for (uint32_t w = 10; w < 15; w++)
        it_sum_wave(s, w, every, t.nbe + 1);
    check_views(&t, t.nbe + 1);
    it_stop(&t);
    reap_joiners(&jp, 1);
    reap_joiners(&cp, 1);
}
