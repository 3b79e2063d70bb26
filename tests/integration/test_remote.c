/* test_remote.c - starting trees whose nodes are "on other hosts", on one
 * machine. Topology hosts that are not this machine are TEST-NET-2 addresses
 * (RFC 5737: no resolver is asked, and a UDP socket's route lookup sends
 * nothing); they go through the remote shell stand-in
 * tests/integration/rsh-local, which can give the remote command a login's
 * environment only (TBON_RSH_CLEAN_ENV) and take its time (TBON_RSH_DELAY_S).
 * The real thing, on the emulated cluster, is in tests/cluster/. */
#include "itest.h"

static const char *rsh(void)
{
    static char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s", it_src_path("tests/integration/rsh-local"));
    return p;
}

/* A stream's wave of IT_TAG_ENV for name: every back-end's value must be
 * want. */
static void check_env(tbon_net_t *net, size_t nbe, const char *name, const char *want)
{
    tbon_stream_t *s = it_stream(net, TBON_FILTER_NULL, TBON_SYNC_WAITFORALL, 0);
    if (!s || tbon_stream_send(s, IT_TAG_ENV, "%s", name) != 0)
        return;
    for (size_t i = 0; i < nbe; i++) {
        tbon_packet_t *p = it_recv(s, IT_RECV_MS, name);
        if (!p)
            return;
        char *v = NULL;
        CHECK_INT(tbon_packet_unpack(p, "%s", &v), 0);
        if (v && strcmp(v, want) != 0)
            th_fail(__FILE__, __LINE__, "back-end %u: %s=\"%s\", expected \"%s\"",
                    (unsigned)tbon_packet_source(p), name, v, want);
        free(v);
        tbon_packet_unref(p);
    }
}

/* What travels to a remote process: TBON_*, LD_LIBRARY_PATH and the names
 * the front-end was given; nothing else of the launcher's environment, and
 * never the secret. Back-ends are under a commnode on a remote host too,
 * so the commnode passes on what it got. */
ITEST(remote_environment_travels)
{
    setenv("TBON_RSH_CLEAN_ENV", "1", 1);
    setenv("TBON_T_TRAVELS", "yes", 1);
    setenv("LD_LIBRARY_PATH", "/opt/x/lib", 1);
    setenv("MY_TOOL_CONF", "a b 'c'", 1);
    setenv("NOT_ASKED_FOR", "no", 1);
    const char *topo = th_write_file("env.top", "localhost:0 => 198.51.100.1:0 ;\n"
                                                "198.51.100.1:0 => 198.51.100.2:0 198.51.100.2:1 ;\n");
    tbon_fe_options_t o = { .rsh = rsh(), .env = "MY_TOOL_CONF", .startup_timeout_ms = 20000 };
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_fe_create(topo, it_be_path(), NULL, &o, &err);
    unsetenv("TBON_RSH_CLEAN_ENV");
    if (!net) {
        th_fail(__FILE__, __LINE__, "tbon_fe_create: %s", err.msg);
        return;
    }
    check_env(net, 2, "TBON_T_TRAVELS", "yes");
    check_env(net, 2, "LD_LIBRARY_PATH", "/opt/x/lib");
    check_env(net, 2, "MY_TOOL_CONF", "a b 'c'");
    check_env(net, 2, "NOT_ASKED_FOR", "(unset)");
    check_env(net, 2, "TBON_SECRET", "(unset)");
    tbon_net_destroy(net);
    unsetenv("TBON_T_TRAVELS");
    unsetenv("LD_LIBRARY_PATH");
}

/* A topology whose front-end host is another host is refused, naming both
 * hosts and the way out; with fe_host naming this host it runs, and the
 * nodes on the old front-end host stay where the topology put them. */
ITEST(fe_host_elsewhere)
{
    const char *topo = th_write_file("else.top", "198.51.100.9:0 => localhost:1 localhost:2 ;\n");
    tbon_fe_options_t o = { .rsh = rsh() };
    tbon_error_t err = { 0 };
    char me[256] = "";
    gethostname(me, sizeof me - 1);
    tbon_net_t *net = tbon_fe_create(topo, it_be_path(), NULL, &o, &err);
    CHECK(net == NULL);
    CHECK_INT(err.code, TBON_ETOPOLOGY);
    CHECK(strstr(err.msg, "front-end on host 198.51.100.9") != NULL);
    CHECK(strstr(err.msg, me) != NULL);
    CHECK(strstr(err.msg, "--fe-host") != NULL);
    tbon_net_destroy(net);
    o.fe_host = "198.51.100.10";                 /* not this host either */
    net = tbon_fe_create(topo, it_be_path(), NULL, &o, &err);
    CHECK(net == NULL);
    CHECK(strstr(err.msg, "198.51.100.10") != NULL);
    tbon_net_destroy(net);
    o.fe_host = "localhost";
    net = tbon_fe_create(topo, it_be_path(), NULL, &o, &err);
    if (!net) {
        th_fail(__FILE__, __LINE__, "with fe_host: %s", err.msg);
        return;
    }
    const tbon_rank_t be[] = { 1, 2 };
    tbon_stream_t *s = it_stream(net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    if (s)
        it_sum_wave(s, 3, be, 2);
    tbon_net_destroy(net);
}

/* A remote child that dies during start-up: the front-end's error says
 * what it said, not only that it exited. */
ITEST(remote_failure_explained)
{
    const char *topo = th_write_file("die.top", "localhost:0 => 198.51.100.1:0 ;\n"
                                                "198.51.100.1:0 => 198.51.100.3:0 198.51.100.3:1 ;\n");
    const char *argv[] = { "--die-at-start", NULL };
    tbon_fe_options_t o = { .rsh = rsh(), .startup_timeout_ms = 20000 };
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_fe_create(topo, it_be_path(), argv, &o, &err);
    CHECK(net == NULL);
    tbon_net_destroy(net);
    CHECK_INT(err.code, TBON_ELAUNCH);
    CHECK(strstr(err.msg, "on host 198.51.100.3 exited with status 3 before it was ready: "
                          "tbon_test_be: dying at start as asked") != NULL);
    it_check_no_procs("after a failed start");
}

/* Logins slower than the heartbeat timeout: nobody is taken for failed once
 * the tree is up (silence counts from the start of beating, not from the
 * connection), and waves are exact. */
ITEST_LONG(slow_logins_no_fencing)
{
    setenv("TBON_RSH_DELAY_S", "1.2", 1);
    const char *topo = th_write_file("slow.top", "localhost:0 => 198.51.100.1:0 198.51.100.2:0 ;\n"
                                                 "198.51.100.1:0 => 198.51.100.1:1 198.51.100.3:0 ;\n"
                                                 "198.51.100.2:0 => 198.51.100.2:1 198.51.100.4:0 ;\n");
    tbon_fe_options_t o = { .rsh = rsh(), .heartbeat_ms = 500, .startup_timeout_ms = 20000 };
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_fe_create(topo, it_be_path(), NULL, &o, &err);
    unsetenv("TBON_RSH_DELAY_S");
    if (!net) {
        th_fail(__FILE__, __LINE__, "tbon_fe_create: %s", err.msg);
        return;
    }
    const tbon_rank_t be[] = { 3, 4, 5, 6 };
    tbon_stream_t *s = it_stream(net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    /* three heartbeat timeouts of waves: a fencing would show as an event
     * and a smaller sum */
    int64_t end = it_now_ms() + 1500;
    for (uint32_t w = 0; s && it_now_ms() < end; w++)
        if (it_sum_wave(s, w, be, 4) != 0)
            break;
    tbon_event_t ev;
    while (tbon_net_next_event(net, &ev, 0) == 0)
        if (ev.type == TBON_EV_NODE_FAILED)
            th_fail(__FILE__, __LINE__, "rank %u taken for failed", (unsigned)ev.rank);
    CHECK_UINT(tbon_net_num_backends(net), 4);
    tbon_net_destroy(net);
}

/* A "host" that falls off the network, on one machine: a commnode and its
 * back-ends stopped together. The commnode is fenced for its silence; its
 * back-ends cannot ask anyone to adopt them, so they are cut off
 * (tbon_fe_cut_off names them, waves are exact over the others and
 * tbon_frontend says so) until they are taken for failed too. */
ITEST(cut_off_backends_named)
{
    tbon_fe_options_t o = { .heartbeat_ms = 500 };
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "2x3", &o);
    if (!s)
        return;
    /* 2x3: commnodes 1 and 2; back-ends 3-5 under 1, 6-8 under 2 */
    pid_t p1 = it_pid_of("tbon_commnode", 1);
    pid_t pb[3] = { it_pid_of("tbon_test_be", 3), it_pid_of("tbon_test_be", 4),
                    it_pid_of("tbon_test_be", 5) };
    REQUIRE(p1 > 0 && pb[0] > 0 && pb[1] > 0 && pb[2] > 0);
    for (int i = 0; i < 3; i++)
        kill(pb[i], SIGSTOP);
    kill(p1, SIGSTOP);
    tbon_event_t ev;
    int failed1 = 0;
    int64_t end = it_now_ms() + 15000;
    while (!failed1 && it_now_ms() < end)
        if (tbon_net_next_event(t.net, &ev, 200) == 0 && ev.type == TBON_EV_NODE_FAILED)
            failed1 = ev.rank == 1;
    REQUIRE(failed1);
    tbon_rank_t cut[8];
    int n = tbon_fe_cut_off(t.net, cut, 8);
    /* cut off until taken for failed: at least a second (2 heartbeats) */
    CHECK_INT(n, 3);
    for (int i = 0; i < n && i < 3; i++)
        CHECK_UINT(cut[i], 3 + (unsigned)i);
    const tbon_rank_t others[] = { 6, 7, 8 };
    it_sum_wave(s, 7, others, 3);
    /* then they are taken for failed, and nothing is cut off any more */
    int gone = 0;
    while (gone < 3 && it_now_ms() < end)
        if (tbon_net_next_event(t.net, &ev, 200) == 0 && ev.type == TBON_EV_NODE_FAILED &&
            ev.rank >= 3 && ev.rank <= 5)
            gone++;
    CHECK_INT(gone, 3);
    CHECK_INT(tbon_fe_cut_off(t.net, cut, 8), 0);
    CHECK_UINT(tbon_net_num_backends(t.net), 3);
    it_sum_wave(s, 8, others, 3);
    CHECK_INT(tbon_fe_cut_off(NULL, cut, 8), TBON_EINVAL);
    kill(p1, SIGCONT);
    for (int i = 0; i < 3; i++)
        kill(pb[i], SIGCONT);
    it_stop(&t);
}

/* tbon_frontend when every back-end is gone (their host fell off, say): the
 * wave under way ends with an error naming why, instead of a wait for ever. */
ITEST(frontend_ends_when_no_backend_is_left)
{
    char fe[PATH_MAX + 32], be[PATH_MAX + 32], out[600], err[600];
    snprintf(fe, sizeof fe, "%s/bin/tbon_frontend", it_build_dir());
    snprintf(be, sizeof be, "%s/bin/tbon_example_be", it_build_dir());
    snprintf(out, sizeof out, "%s/fe.out", th_tmpdir());
    snprintf(err, sizeof err, "%s/fe.err", th_tmpdir());
    const char *topo = th_write_file("two.top", "localhost:0 => localhost:1 localhost:2 ;\n");
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(o, 1);
        dup2(e, 2);
        execl(fe, fe, "-t", topo, "-b", be, "-w", "100000", "--", "--delay", "30", (char *)NULL);
        _exit(127);
    }
    /* wait for wave 1, then kill both back-ends */
    int64_t end = it_now_ms() + 20000;
    char *text = NULL;
    while (it_now_ms() < end) {
        free(text);
        text = th_read_file(out);
        if (text && strstr(text, "wave 1:"))
            break;
        it_sleep_ms(20);
    }
    CHECK(text && strstr(text, "wave 1:"));
    free(text);
    pid_t b1 = it_pid_of("tbon_example_be", 1), b2 = it_pid_of("tbon_example_be", 2);
    CHECK(b1 > 0 && b2 > 0);
    if (b1 > 0)
        kill(b1, SIGKILL);
    if (b2 > 0)
        kill(b2, SIGKILL);
    int st = -1;
    pid_t r = 0;
    while (it_now_ms() < end && (r = waitpid(pid, &st, WNOHANG)) == 0)
        it_sleep_ms(20);
    if (r != pid) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        th_fail(__FILE__, __LINE__, "tbon_frontend still waiting 20 s after its back-ends died");
        return;
    }
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    text = th_read_file(err);
    CHECK(text && strstr(text, "no back-end is left to answer"));
    free(text);
    it_check_no_procs("after tbon_frontend ended");
}
