/* test_fd.c - tbon_net_fd: the network in an application's own event loop
 * (docs/api.md, "An event loop of your own"). The descriptor is readable
 * exactly while a call with timeout 0 has something to return, stays so
 * until that is taken (level-triggered), and for good once the network has
 * shut down; a front-end with no thread of its own runs a thousand exact
 * waves in epoll while a commnode is killed; back-ends that wait in poll
 * answer them and leave cleanly at the end, never woken for nothing. */
#include "itest.h"

#include <errno.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/wait.h>

static int readable(int fd, int ms)
{
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    int n;
    do
        n = poll(&pf, 1, ms);
    while (n < 0 && errno == EINTR);
    return n == 1 && (pf.revents & POLLIN);
}

/* Take every event queued now; how many. */
static int drain_events(tbon_net_t *net)
{
    tbon_event_t ev;
    int n = 0;
    while (tbon_net_next_event(net, &ev, 0) == 0)
        n++;
    return n;
}

/* Nothing but events waits: once the events that come (a late view, a
 * suspicion on a loaded machine) are taken, the descriptor is not readable;
 * a back-end said failed among them is noted in failed[] (may be NULL).
 * 0 if it stays readable with no event: a packet or a message waits. */
static int only_events(tbon_net_t *net, int fd, uint8_t *failed, size_t nfailed)
{
    while (readable(fd, 0)) {
        tbon_event_t ev;
        if (tbon_net_next_event(net, &ev, 0) != 0)
            return 0;
        if (failed && ev.type == TBON_EV_NODE_FAILED && ev.rank < nfailed)
            failed[ev.rank] = 1;
    }
    return 1;
}

/* Start a tree of shape whose back-ends wait in poll on their descriptor
 * and leave a marker in dir (made here) at the end (tbon_test_be --fd
 * --marker), with a sum stream *s: 0, or -1 (recorded). */
static int start_fd_tree(it_tree_t *t, const char *shape, char *dir, size_t len,
                         tbon_stream_t **s)
{
    snprintf(dir, len, "%s/marks", th_tmpdir());
    if (mkdir(dir, 0755) != 0) {
        th_fail(__FILE__, __LINE__, "mkdir %s: %s", dir, strerror(errno));
        return -1;
    }
    const char *argv[] = { "--fd", "--marker", dir, NULL };
    if (it_start(t, shape, argv, NULL))
        return -1;
    if (!(*s = it_stream(t->net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0))) {
        it_stop(t);
        return -1;
    }
    return 0;
}

/* Wait (up to IT_RECV_MS) for the descriptor, then take one sum result:
 * its value, or -1 (recorded). */
static int64_t take_sum(tbon_net_t *net, int fd, const char *what)
{
    if (!readable(fd, IT_RECV_MS)) {
        th_fail(__FILE__, __LINE__, "%s: the descriptor did not turn readable", what);
        return -1;
    }
    tbon_packet_t *p = NULL;
    tbon_stream_t *s = NULL;
    int rc = tbon_net_recv(net, &p, &s, 0);
    int64_t v = -1;
    if (rc != 0 || tbon_packet_unpack(p, "%ld", &v) != 0) {
        th_fail(__FILE__, __LINE__, "%s: readable, but tbon_net_recv(0) gave %d (%s)", what,
                rc, tbon_net_error(net));
        v = -1;
    }
    tbon_packet_unref(p);
    return v;
}

/* Each back-end of t (tbon_test_be --fd --marker dir) left cleanly, its
 * marker written after its close, and says it was never woken for
 * nothing. */
static void check_marks(const char *dir, const it_tree_t *t)
{
    for (size_t i = 0; i < t->nbe; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/closed.%u", dir, (unsigned)t->be[i]);
        char *text = th_read_file(path);
        if (!text || !text[0])
            th_fail(__FILE__, __LINE__, "back-end %u did not leave cleanly", t->be[i]);
        else if (atol(text) != 0)
            th_fail(__FILE__, __LINE__, "back-end %u: %ld wake-ups found nothing", t->be[i],
                    atol(text));
        free(text);
    }
}

ITEST(fd_is_level_triggered)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "2x2", NULL);
    REQUIRE(s);
    int fd = tbon_net_fd(t.net);
    CHECK(fd >= 0);
    CHECK_INT(tbon_net_fd(t.net), fd);            /* the same one every call */
    drain_events(t.net);
    CHECK(only_events(t.net, fd, NULL, 0));       /* nothing waits */
    CHECK_INT(tbon_net_fd(NULL), TBON_EINVAL);

    /* one result: readable until it is taken, however often we look */
    REQUIRE(tbon_stream_send(s, IT_TAG_WAVE, "%ud", 1u) == 0);
    CHECK(readable(fd, IT_RECV_MS));
    CHECK(readable(fd, 0));
    CHECK(readable(fd, 0));
    CHECK_INT(take_sum(t.net, fd, "wave 1"), it_wave_sum(t.be, t.nbe, 1));
    CHECK(only_events(t.net, fd, NULL, 0));

    /* two: still readable after the first is taken */
    REQUIRE(tbon_stream_send(s, IT_TAG_WAVE, "%ud", 2u) == 0);
    REQUIRE(tbon_stream_send(s, IT_TAG_WAVE, "%ud", 3u) == 0);
    CHECK_INT(take_sum(t.net, fd, "wave 2"), it_wave_sum(t.be, t.nbe, 2));
    CHECK_INT(take_sum(t.net, fd, "wave 3"), it_wave_sum(t.be, t.nbe, 3));
    CHECK(only_events(t.net, fd, NULL, 0));

    /* taken by stream, not by tbon_net_recv: the same */
    REQUIRE(tbon_stream_send(s, IT_TAG_WAVE, "%ud", 4u) == 0);
    CHECK(readable(fd, IT_RECV_MS));
    tbon_packet_t *p = it_recv(s, 0, "wave 4 by stream");
    tbon_packet_unref(p);
    CHECK(only_events(t.net, fd, NULL, 0));

    /* an event makes it readable, taking it makes it quiet: kill commnode 1
     * and take what comes until the view is stable again */
    pid_t pid = it_pid_of("tbon_commnode", 1);
    REQUIRE(pid > 0);
    kill(pid, SIGKILL);
    int stable = 0, events = 0;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (!stable && it_now_ms() < end && readable(fd, (int)(end - it_now_ms()))) {
        tbon_event_t ev;
        int got = 0;
        while (tbon_net_next_event(t.net, &ev, 0) == 0) {
            got = 1;
            events++;
            stable |= ev.type == TBON_EV_VIEW_STABLE;
        }
        CHECK(got);                 /* readable: something was there */
    }
    CHECK(stable);
    CHECK(events >= 2);             /* the failure and the adoption at least */
    /* (a suspicion's late refutation may still come: take it too) */
    drain_events(t.net);

    /* the tree still answers, through the descriptor */
    REQUIRE(tbon_stream_send(s, IT_TAG_WAVE, "%ud", 5u) == 0);
    CHECK_INT(take_sum(t.net, fd, "wave 5"), it_wave_sum(t.be, t.nbe, 5));
    it_stop(&t);
}

/* An FE with no thread of its own: epoll on the descriptor alone, waves
 * kept WINDOW deep, a commnode killed a third of the way. Every wave
 * exactly once, in order, its value what the back-ends it holds make,
 * and lacking only back-ends said failed. The back-ends wait in poll on
 * theirs (tbon_test_be --fd) and count the wake-ups that found nothing. */
ITEST_LONG(epoll_fe_1000_waves_8x8_commnode_killed)
{
    enum { WINDOW = 32 };
    const uint32_t waves = IT_SLOW ? 200 : 1000;
    char dir[PATH_MAX];
    it_tree_t t;
    tbon_stream_t *s;
    if (start_fd_tree(&t, "8x8", dir, sizeof dir, &s))
        return;
    int fd = tbon_net_fd(t.net), ep = epoll_create1(EPOLL_CLOEXEC);
    REQUIRE(fd >= 0 && ep >= 0);
    struct epoll_event want = { .events = EPOLLIN };
    REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &want) == 0);
    pid_t victim = it_pid_of("tbon_commnode", 3);
    REQUIRE(victim > 0);

    static uint8_t failed[IT_MAX_BE * 2], short_of[IT_MAX_BE * 2];
    static tbon_rank_t cov[IT_MAX_BE], mis[IT_MAX_BE];
    memset(failed, 0, sizeof failed);
    memset(short_of, 0, sizeof short_of);
    uint32_t sent = 0, got = 0;
    long empty = 0, nevents = 0;
    int bad = 0;
    while (got < waves && bad < 5) {
        while (sent < waves && sent - got < WINDOW) {
            REQUIRE(tbon_stream_send(s, IT_TAG_WAVE, "%ud", sent) == 0);
            if (++sent == waves / 3)
                kill(victim, SIGKILL);
        }
        struct epoll_event ev;
        int n = epoll_wait(ep, &ev, 1, IT_RECV_MS);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 1) {
            th_fail(__FILE__, __LINE__, "no result for wave %u in %d ms", got, IT_RECV_MS);
            break;
        }
        int took = 0;
        tbon_event_t e;
        while (tbon_net_next_event(t.net, &e, 0) == 0) {
            took = 1;
            nevents++;
            if (e.type == TBON_EV_NODE_FAILED && e.rank < sizeof failed)
                failed[e.rank] = 1;
            if (e.type == TBON_EV_DATA_LOST)
                th_fail(__FILE__, __LINE__, "TBON_EV_DATA_LOST for rank %u", e.rank);
        }
        tbon_packet_t *p = NULL;
        tbon_stream_t *from = NULL;
        int rc;
        while ((rc = tbon_net_recv(t.net, &p, &from, 0)) == 0) {
            took = 1;
            size_t nc = tbon_packet_covered(p, cov, IT_MAX_BE);
            size_t nm = tbon_packet_missing(p, mis, IT_MAX_BE);
            int64_t v = -1;
            if (from != s || tbon_packet_unpack(p, "%ld", &v) != 0 ||
                v != it_wave_sum(cov, nc, got) || nc + nm != t.nbe) {
                th_fail(__FILE__, __LINE__, "wave %u: sum %lld over %zu held, %zu missing; "
                        "expected %lld over %zu", got, (long long)v, nc, nm,
                        (long long)it_wave_sum(t.be, t.nbe, got), t.nbe);
                bad++;
            }
            for (size_t i = 0; i < nm; i++)
                if (mis[i] < sizeof short_of)
                    short_of[mis[i]] = 1;
            tbon_packet_unref(p);
            got++;
        }
        if (rc != TBON_ETIMEOUT) {
            th_fail(__FILE__, __LINE__, "tbon_net_recv(0): %d (%s)", rc, tbon_net_error(t.net));
            break;
        }
        empty += !took;
    }
    CHECK_UINT(got, waves);
    /* (a late event is taken here; a failure it says counts below) */
    CHECK(only_events(t.net, fd, failed, sizeof failed));
    long lacking = 0;
    for (size_t r = 0; r < sizeof short_of; r++)
        lacking += short_of[r] && !failed[r];
    CHECK_INT(lacking, 0);              /* only failed back-ends may be missing */
    CHECK_INT(empty, 0);                /* never readable for nothing */
    CHECK(nevents >= 2);                /* the failure and its adoptions */
    close(ep);
    it_stop(&t);
    /* every back-end saw the close through its descriptor, and was never
     * woken for nothing */
    check_marks(dir, &t);
}

/* A back-end whose loop waits in poll: the close reaches it through the
 * descriptor, which stays readable (every call says TBON_ECLOSED). */
ITEST(fd_backends_see_the_close)
{
    char dir[PATH_MAX];
    it_tree_t t;
    tbon_stream_t *s;
    if (start_fd_tree(&t, "1x3", dir, sizeof dir, &s))
        return;
    for (uint32_t w = 0; w < 20; w++)
        CHECK(it_sum_wave(s, w, t.be, t.nbe) == 0);
    it_stop(&t);
    check_marks(dir, &t);
}

/* The example tool (examples/event_loop): its waves all exact; and a
 * SIGINT, which comes through its loop too, ends a long run cleanly. */
ITEST(example_event_loop)
{
    char fe[PATH_MAX + 32], topo[PATH_MAX + 300];
    snprintf(fe, sizeof fe, "%s/examples/event_loop/fe", it_build_dir());
    snprintf(topo, sizeof topo, "%s", it_src_path("topologies/local-4x4.top"));
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "%s %s 500 2>&1", fe, topo);
    FILE *f = popen(cmd, "r");
    REQUIRE(f);
    char line[256];
    int ok = 0;
    while (fgets(line, sizeof line, f))
        ok += strcmp(line, "500 waves, every sum exact\n") == 0;
    CHECK_INT(pclose(f), 0);
    CHECK_INT(ok, 1);
    it_check_no_procs("after the example");

    /* a run that would not end by itself, interrupted once it has a tree */
    char out[PATH_MAX + 16];
    snprintf(out, sizeof out, "%s/fe.out", th_tmpdir());
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(fe, fe, topo, "100000000", (char *)NULL);
        _exit(127);
    }
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (it_our_procs("be", NULL, 0) < 16 && it_now_ms() < end)
        it_sleep_ms(20);      /* the tree is up (a signal before would do too) */
    kill(pid, SIGINT);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char *text = th_read_file(out);
    CHECK(text && strstr(text, "fe: interrupted after ") && strstr(text, "every sum exact"));
    if (text && !strstr(text, "every sum exact"))
        fprintf(stderr, "    fe said: %s\n", text);
    free(text);
    it_check_no_procs("after the interrupted example");
}
