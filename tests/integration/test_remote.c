/* test_remote.c - starting trees whose nodes are "on other hosts", on one
 * machine: topology hosts that are not this machine go through the remote
 * shell stand-in tests/integration/rsh-local, which can give the remote
 * command a login's environment only (TBON_RSH_CLEAN_ENV) and take its time
 * (TBON_RSH_DELAY_S). The real thing, on the emulated cluster, is in
 * tests/cluster/. */
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
    const char *topo = th_write_file("env.top", "localhost:0 => node-a:0 ;\n"
                                                "node-a:0 => node-b:0 node-b:1 ;\n");
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
    const char *topo = th_write_file("else.top", "node-x:0 => localhost:1 localhost:2 ;\n");
    tbon_fe_options_t o = { .rsh = rsh() };
    tbon_error_t err = { 0 };
    char me[256] = "";
    gethostname(me, sizeof me - 1);
    tbon_net_t *net = tbon_fe_create(topo, it_be_path(), NULL, &o, &err);
    CHECK(net == NULL);
    CHECK_INT(err.code, TBON_ETOPOLOGY);
    CHECK(strstr(err.msg, "front-end on host node-x") != NULL);
    CHECK(strstr(err.msg, me) != NULL);
    CHECK(strstr(err.msg, "--fe-host") != NULL);
    tbon_net_destroy(net);
    o.fe_host = "node-y";                 /* not this host either */
    net = tbon_fe_create(topo, it_be_path(), NULL, &o, &err);
    CHECK(net == NULL);
    CHECK(strstr(err.msg, "node-y") != NULL);
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
    const char *topo = th_write_file("die.top", "localhost:0 => node-a:0 ;\n"
                                                "node-a:0 => node-c:0 node-c:1 ;\n");
    const char *argv[] = { "--die-at-start", NULL };
    tbon_fe_options_t o = { .rsh = rsh(), .startup_timeout_ms = 20000 };
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_fe_create(topo, it_be_path(), argv, &o, &err);
    CHECK(net == NULL);
    tbon_net_destroy(net);
    CHECK_INT(err.code, TBON_ELAUNCH);
    CHECK(strstr(err.msg, "on host node-c exited with status 3 before it was ready: "
                          "tbon_test_be: dying at start as asked") != NULL);
    it_check_no_procs("after a failed start");
}

/* Logins slower than the heartbeat timeout: nobody is taken for failed once
 * the tree is up (silence counts from the start of beating, not from the
 * connection), and waves are exact. */
ITEST(slow_logins_no_fencing)
{
    setenv("TBON_RSH_DELAY_S", "1.2", 1);
    const char *topo = th_write_file("slow.top", "localhost:0 => node-a:0 node-b:0 ;\n"
                                                 "node-a:0 => node-a:1 node-c:0 ;\n"
                                                 "node-b:0 => node-b:1 node-d:0 ;\n");
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
