/* test_limits.c - a tree at the limits of its machine (issue 19, item 4): a
 * commnode out of file descriptors pauses accepting instead of spinning, and
 * the orphans it cannot take find another adopter; connection churn from
 * strangers leaves a node's memory flat and its log short.
 */
#include "itest.h"

#include <sys/resource.h>

#include "util/log.h"

/* Shape 2x2: commnodes 1 and 2, back-ends 3 4 under 1 and 5 6 under 2.
 * Commnode 2 is held at its fd limit by strangers' connections that never
 * say a word; then commnode 1 is killed. Commnode 2 does not spin (before:
 * accept4 failing with EMFILE in a tight loop, ~100% CPU), says once why it
 * cannot accept, the orphans 3 and 4 are adopted elsewhere and the waves are
 * exact; once the strangers go, it accepts again and says so. */
ITEST(adopter_at_its_fd_limit_pauses_accepting)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "2x2", NULL);
    if (!s)
        return;
    pid_t cn1 = it_pid_of("tbon_commnode", 1), cn2 = it_pid_of("tbon_commnode", 2);
    REQUIRE(cn1 > 0 && cn2 > 0);
    struct it_addr a[4];
    REQUIRE(it_listen_addrs(cn2, a, 4) >= 1);

    char fds[64];
    snprintf(fds, sizeof fds, "/proc/%d/fd", (int)cn2);
    int open_fds = it_dir_entries(fds);
    REQUIRE(open_fds > 0);
    struct rlimit old, lim;
    REQUIRE(prlimit(cn2, RLIMIT_NOFILE, NULL, &old) == 0);
    lim = old;
    lim.rlim_cur = (rlim_t)open_fds + 2;
    REQUIRE(prlimit(cn2, RLIMIT_NOFILE, &lim, NULL) == 0);
    int held[8];
    for (int i = 0; i < 8; i++)
        held[i] = it_connect(&a[0]);
    for (int i = 0; i < 8; i++)
        CHECK(held[i] >= 0);
    if (it_wait_log(2, "cannot accept connections", IT_RECV_MS))
        goto out;
    long c0 = it_cpu_ms(cn2);
    int64_t t0 = it_now_ms();

    kill(cn1, SIGKILL);
    /* The orphans find another adopter (commnode 2 cannot take them). */
    const tbon_rank_t live[] = { 3, 4, 5, 6 };
    int adopted = 0;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (adopted < 2 && it_now_ms() < end) {
        tbon_event_t ev;
        if (tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) != 0)
            break;
        if (ev.type == TBON_EV_NODE_ADOPTED && (ev.rank == 3 || ev.rank == 4))
            adopted++;
    }
    CHECK_INT(adopted, 2);
    for (uint32_t w = 1; w <= 3; w++)
        it_sum_wave(s, w, live, 4);

    /* All the while at its limit, it was not busy. */
    long used = it_cpu_ms(cn2) - c0;
    int64_t spent = it_now_ms() - t0;
    CHECK_INT(it_log_lines(2, "cannot accept connections", NULL), 1);
    if (used * 10 > spent)
        th_fail(__FILE__, __LINE__, "commnode 2 used %ld ms of CPU in %lld ms at its fd limit",
                used, (long long)spent);

out:
    for (int i = 0; i < 8; i++)
        if (held[i] >= 0)
            close(held[i]);
    prlimit(cn2, RLIMIT_NOFILE, &old, NULL);
    if (!it_wait_log(2, "accepting connections again", IT_RECV_MS))
        it_sum_wave(s, 4, live, 4);
    it_stop(&t);
}

/* One stranger's visit to a: connect, wait for the server's first bytes
 * (its HELLO: the connection was accepted), leave. Odd visits reset the
 * connection (SO_LINGER 0); even ones close it in order, from one of eight
 * loopback addresses so that their TIME_WAITs spread over eight port
 * ranges. 0 or -1. */
static int visit(const struct it_addr *a, unsigned i)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in src = { .sin_family = AF_INET };
    src.sin_addr.s_addr = htonl(0x7f010000u + 1 + (i / 2) % 8);    /* 127.1.0.1-8 */
    struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(a->port) };
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;     /* the port at connect(): a bind's search is slow among TIME_WAITs */
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    char b[64];
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    int ok = (i % 2 || bind(fd, (struct sockaddr *)&src, sizeof src) == 0) &&
             connect(fd, (struct sockaddr *)&dst, sizeof dst) == 0 &&
             poll(&pf, 1, 5000) == 1 && read(fd, b, sizeof b) > 0;
    if (i % 2) {
        struct linger l = { 1, 0 };
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    close(fd);
    return ok ? 0 : -1;
}

/* 100,000 strangers connect to a commnode and leave, half of them with a
 * reset: its memory stays flat (each connection's records go with it; before,
 * ~64 bytes per connection stayed until exit), its log stays short (before,
 * one line per connection), and the tree answers exactly afterwards. */
ITEST_LONG(connection_churn_leaves_memory_and_log_flat)
{
    it_asan_quarantine_mb(0);
    /* about 11 s of CPU for the connections alone (the kernel's part, in
     * this process): minutes on a loaded machine or under a sanitizer */
    alarm(280);
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "1x2", NULL);
    if (!s)
        return;
    pid_t cn = it_pid_of("tbon_commnode", 1);
    REQUIRE(cn > 0);
    struct it_addr a[4];
    REQUIRE(it_listen_addrs(cn, a, 4) >= 1);
    enum { WARM = 10000, ALL = 100000 };
    unsigned failed = 0;
    long rss0 = 0;
    int lines0 = 0;
    int64_t t0 = it_now_ms();
    for (unsigned i = 0; i < ALL; i++) {
        if (i == WARM) {
            rss0 = it_proc_status(cn, "VmRSS");
            it_log_lines(1, "", &lines0);
        }
        failed += visit(&a[0], i) != 0;
    }
    long rss1 = it_proc_status(cn, "VmRSS");
    int lines1;
    it_log_lines(1, "", &lines1);
    int64_t secs = (it_now_ms() - t0) / 1000 + 1;
    CHECK_UINT(failed, 0);
    /* flat: well under the 5.6 MB that 64 bytes per connection made */
    if (rss0 <= 0 || rss1 - rss0 > 1024)
        th_fail(__FILE__, __LINE__, "the commnode's RSS went from %ld kB to %ld kB over %d "
                "connections", rss0, rss1, ALL - WARM);
    /* at most 10 lines per 10 s per kind of line (two kinds here), and one
     * saying how many were not shown */
    long most = (secs / 10 + 2) * 2 * (TB_LOG_LIMIT_LINES + 1);
    if (lines1 > most)
        th_fail(__FILE__, __LINE__, "%d log lines for %d connections in %lld s (at most %ld)",
                lines1, ALL, (long long)secs, most);
    /* What was not shown is counted: the next line after the window says so
     * (one more stranger now and then until the window has passed). */
    for (int64_t end = it_now_ms() + 3 * TB_LOG_LIMIT_MS;
         !it_log_lines(1, "more lines like the next one were not shown", NULL);) {
        if (it_now_ms() > end) {
            th_fail(__FILE__, __LINE__, "no line says how many were not shown");
            break;
        }
        visit(&a[0], 1);
        it_sleep_ms(200);
    }
    if (getenv("ITEST_VERBOSE"))
        fprintf(stderr, "    %d connections in %lld s: RSS %ld -> %ld kB, %d -> %d log lines\n",
                ALL, (long long)secs, rss0, rss1, lines0, lines1);
    it_sum_wave(s, 1, t.be, t.nbe);
    it_stop(&t);
}

/* A filter that keeps 1 MiB more on every call (issue 19: ~31 MB/s per node,
 * no bound, no word) with TBON_MEM_WARN_MB=200: no warning while the
 * commnodes are small, then each says it passed the mark, naming it. */
ITEST(memory_past_the_mark_is_said)
{
    setenv("TBON_MEM_WARN_MB", "200", 1);
    it_tree_t t;
    int bad = it_start(&t, "2x2", NULL, NULL);
    unsetenv("TBON_MEM_WARN_MB");
    if (bad)
        return;
    int id = it_load_plugin(t.net, "filter_poison", "poison");
    tbon_stream_t *s = id >= 0 ? it_stream(t.net, id, TBON_SYNC_WAITFORALL, 0) : NULL;
    if (!s) {
        it_stop(&t);
        return;
    }
    it_sum_wave(s, 1, t.be, t.nbe);
    const char *said = "past the mark of 200 MiB";
    /* small at first: the mark is not passed */
    pid_t cn1 = it_pid_of("tbon_commnode", 1);
    CHECK(cn1 > 0 && it_proc_status(cn1, "VmRSS") < 150 * 1024);
    CHECK_INT(it_log_lines(1, said, NULL), 0);
    CHECK_INT(tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_UP, "%ld %d", (int64_t)0, 7),
              0);
    for (uint32_t w = 2; w <= 260; w++)
        if (it_sum_wave(s, w, t.be, t.nbe))
            break;
    /* each commnode has kept 259 MiB: both say so within a look or two */
    if (it_wait_log(1, said, 10000) == 0 && it_wait_log(2, said, 10000) == 0) {
        /* once, and again only each time it doubles: as many warnings as
         * doublings of 200 MiB up to what the commnode holds now (under TSan
         * a kept MiB costs more than one, so there are more of them) */
        long rss = cn1 > 0 ? it_proc_status(cn1, "VmRSS") / 1024 : 0;
        int most = 1;
        for (long m = 400; m <= rss; m *= 2)
            most++;
        int k = it_log_lines(1, said, NULL);
        if (k < 1 || k > most)
            th_fail(__FILE__, __LINE__, "%d warnings for %ld MiB held (1 to %d)", k, rss, most);
    }
    it_stop(&t);
}
