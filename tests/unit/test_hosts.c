/* test_hosts.c - what running across hosts rests on, with real sockets and
 * processes: the address a node gives its children (routed toward their
 * host, TBON_IFACE), dual-stack listening, host:port forms, the front-end
 * moved to another host name, the Slurm tree and step maps, and the relay of
 * a remote child's stderr, and connecting to the first of several that
 * answers */
#include "../harness.h"
#include "proc/launch.h"
#include "proc/relay.h"
#include "proc/slurm.h"
#include "net/sock.h"
#include "topo/topology.h"
#include "util/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The environment as the library would read it now, at a network's creation
 * (util/config.h). Valid until the next call. */
static const tb_config_t *conf_now(void)
{
    static tb_config_t c;
    tb_config_free(&c);
    if (tb_config_load(&c, NULL) != 0)
        th_fail(__FILE__, __LINE__, "tb_config_load: out of memory");
    return &c;
}

static int have_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_DGRAM, 0);
    struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* ---- the address children reach us at ---- */

TEST(route_addr_loopback_and_names)
{
    char a[64];
    tbon_error_t err = { 0 };
    unsetenv("TBON_IFACE");
    CHECK_INT(tb_sock_route_addr(conf_now(), "127.0.0.1", a, sizeof a, &err), 0);
    CHECK_STR(a, "127.0.0.1");
    CHECK_INT(tb_sock_route_addr(conf_now(), "127.3.4.5", a, sizeof a, &err), 0);
    CHECK_STR(a, "127.0.0.1");
    if (have_ipv6_loopback()) {
        CHECK_INT(tb_sock_route_addr(conf_now(), "::1", a, sizeof a, &err), 0);
        CHECK_STR(a, "::1");
    }
    /* a name that cannot resolve (.invalid is reserved, RFC 2606) */
    CHECK_INT(tb_sock_route_addr(conf_now(), "no-such-host.invalid", a, sizeof a, &err), TBON_EIO);
    CHECK(strstr(err.msg, "no-such-host.invalid") != NULL);
    CHECK_STR(a, "");
}

TEST(route_addr_iface)
{
    char a[64];
    tbon_error_t err = { 0 };
    setenv("TBON_IFACE", "lo", 1);
    CHECK_INT(tb_sock_route_addr(conf_now(), "192.0.2.1", a, sizeof a, &err), 0);
    CHECK_STR(a, "127.0.0.1");
    /* an address is taken as it is */
    setenv("TBON_IFACE", "10.77.0.5", 1);
    CHECK_INT(tb_sock_route_addr(conf_now(), "192.0.2.1", a, sizeof a, &err), 0);
    CHECK_STR(a, "10.77.0.5");
    setenv("TBON_IFACE", "nosuchif9", 1);
    CHECK_INT(tb_sock_route_addr(conf_now(), "127.0.0.1", a, sizeof a, &err), TBON_EINVAL);
    CHECK(strstr(err.msg, "TBON_IFACE=nosuchif9") != NULL);
    unsetenv("TBON_IFACE");
}

TEST(hostport_forms)
{
    char b[80];
    tb_sock_format_hostport("10.0.0.1", 4000, b, sizeof b);
    CHECK_STR(b, "10.0.0.1:4000");
    tb_sock_format_hostport("fd00::11", 4000, b, sizeof b);
    CHECK_STR(b, "[fd00::11]:4000");
    tb_sock_format_hostport("n3", 7, b, sizeof b);
    CHECK_STR(b, "n3:7");
}

/* One listening socket takes IPv4 and IPv6 peers. */
TEST(listen_dual_stack)
{
    uint16_t port = 0;
    tbon_error_t err = { 0 };
    int lfd = tb_sock_listen(&port, &err);
    REQUIRE(lfd >= 0);
    CHECK(port != 0);
    int c4 = tb_sock_connect("127.0.0.1", port, tb_now_ms() + 5000, &err);
    CHECK(c4 >= 0);
    if (have_ipv6_loopback()) {
        int c6 = tb_sock_connect("::1", port, tb_now_ms() + 5000, &err);
        CHECK(c6 >= 0);
        if (c6 >= 0)
            close(c6);
    }
    if (c4 >= 0) {
        /* accepted, and named by its IPv4 form */
        int fd = -1;
        for (int i = 0; i < 500 && fd < 0; i++) {
            fd = tb_sock_accept(lfd);
            if (fd < 0)
                usleep(2000);
        }
        REQUIRE(fd >= 0);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        char s[64];
        REQUIRE(getpeername(fd, (struct sockaddr *)&ss, &sl) == 0);
        CHECK_INT(tb_sock_addr_string((struct sockaddr *)&ss, s, sizeof s), 0);
        CHECK_STR(s, "127.0.0.1");
        close(fd);
        close(c4);
    }
    close(lfd);
}

/* ---- the front-end on another host name ---- */

/* The relink's connect in two steps: a closed port on this host is refused
 * as the connect is made (or, at the latest, when it ends), an open one
 * connects; neither waits for the deadline. */
TEST(connect_begin_refused_at_once_or_connects)
{
    uint16_t port = 0;
    tbon_error_t err = { 0 };
    int lfd = tb_sock_listen(&port, &err);
    REQUIRE(lfd >= 0);
    int fd = tb_sock_connect_begin("127.0.0.1", port, NULL, &err);
    REQUIRE(fd >= 0);
    int64_t t0 = tb_now_ms();
    CHECK_INT(tb_sock_connect_end(fd, "127.0.0.1", port, t0 + 5000, &err), fd);
    close(fd);
    /* Connected at once (loopback, usually): as _end leaves it, blocking. */
    int up = -1;
    fd = tb_sock_connect_begin("127.0.0.1", port, &up, &err);
    REQUIRE(fd >= 0);
    CHECK(up == 0 || up == 1);
    if (up)
        CHECK_INT(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    else
        CHECK_INT(tb_sock_connect_end(fd, "127.0.0.1", port, tb_now_ms() + 5000, &err), fd);
    close(fd);
    close(lfd);                 /* the port is closed now */
    t0 = tb_now_ms();
    fd = tb_sock_connect_begin("127.0.0.1", port, NULL, &err);
    if (fd >= 0) {              /* the refusal not known yet: _end says it */
        CHECK_INT(tb_sock_connect_end(fd, "127.0.0.1", port, t0 + 5000, &err), TBON_EIO);
    } else {
        CHECK_INT(fd, TBON_EIO);
    }
    CHECK_INT(errno, ECONNREFUSED);
    CHECK(strstr(err.msg, "127.0.0.1") != NULL);
    CHECK(tb_now_ms() - t0 < 2500);
    CHECK_INT(tb_sock_connect_begin("localhost", port, NULL, &err), TBON_EINVAL);
}

/* A listener on the loopback that answers no connect: its queue of
 * connections not yet accepted (backlog 0) holds one, made here, and the
 * kernel drops every later SYN, as a host that is down does. Its port in
 * *port; *held: that one connection. */
static int black_hole(uint16_t *port, int *held)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 0) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &al) != 0)
        return -1;
    *port = ntohs(a.sin_port);
    *held = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*held < 0 || connect(*held, (struct sockaddr *)&a, sizeof a) != 0)
        return -1;
    return lfd;
}

/* tb_dial_t: the first endpoint alone, the next as soon as the one before is
 * refused, or as well when it has not answered in the stagger; the lowest
 * index first among those connected; -1 when all are over. */
TEST(dial_tries_the_next_on_refusal_or_silence)
{
    tbon_error_t err = { 0 };
    uint16_t live = 0, hole = 0, closed = 0;
    int held = -1;
    int lfd = tb_sock_listen(&live, &err);
    int hfd = black_hole(&hole, &held);
    int cfd = tb_sock_listen(&closed, &err);
    REQUIRE(lfd >= 0 && hfd >= 0 && cfd >= 0);
    close(cfd);                 /* nobody listens there now: refused */
    /* A silent endpoint first: the live one is tried after the stagger, while
     * the first is still under way, long before its own timeout. */
    tb_dial_t d = { .k = 4, .host = { "127.0.0.1", "127.0.0.1", "localhost", "127.0.0.1" },
                    .port = { 0, hole, closed, live }, .stagger_ms = 50, .timeout_ms = 20000 };
    int64_t t0 = tb_now_ms();
    size_t which = 99;
    int fd = tb_sock_dial_next(&d, &which);
    CHECK_INT(which, 3);
    CHECK(fd >= 0 && (fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
    CHECK(tb_now_ms() - t0 < 20000);
    CHECK_INT(d.st[1], 1);          /* the silent one: still waited for */
    if (fd >= 0)
        close(fd);
    /* Nothing left but the silent one: it runs out (a short timeout now). */
    d.until[1] = tb_now_ms() + 100;
    CHECK_INT(tb_sock_dial_next(&d, &which), -1);
    tb_sock_dial_end(&d);
    /* Two that answer: the preferred one first, then the other. */
    tb_dial_t d2 = { .k = 2, .host = { "127.0.0.1", "127.0.0.1" }, .port = { live, live },
                     .stagger_ms = 0, .timeout_ms = 5000 };
    int a = tb_sock_dial_next(&d2, &which);
    CHECK(a >= 0 && which == 0);
    int b = tb_sock_dial_next(&d2, &which);
    CHECK(b >= 0 && which == 1);
    CHECK_INT(tb_sock_dial_next(&d2, &which), -1);
    tb_sock_dial_end(&d2);
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
    /* A connection begun elsewhere, and the dial ended with one not taken:
     * closed by tb_sock_dial_end (the listener sees its end). */
    tb_dial_t d3 = { .k = 2, .host = { "127.0.0.1", "127.0.0.1" }, .port = { live, live },
                     .stagger_ms = 0, .timeout_ms = 5000 };
    int up = 0;
    int f0 = tb_sock_connect_begin("127.0.0.1", live, &up, &err);
    REQUIRE(f0 >= 0);
    tb_sock_dial_adopt(&d3, 0, f0, up);
    CHECK_INT(tb_sock_dial_next(&d3, &which), f0);
    CHECK_INT(which, 0);
    close(f0);
    CHECK_INT(d3.next, 1);
    tb_sock_dial_end(&d3);
    close(held);
    close(hfd);
    close(lfd);
}

TEST(fe_host_moved_keeps_ranks)
{
    tbon_error_t err = { 0 };
    const char *text = "n1:0 => n2:0 n1:1 ;\nn2:0 => head:0 n2:1 ;\nn1:1 => n3:0 ;\n";
    tb_topology_t *t = tb_topology_parse(text, strlen(text), "t", &err);
    REQUIRE(t);
    tb_topology_t *c = tb_topology_with_fe_host(t, "head", &err);
    REQUIRE(c);
    CHECK_UINT(tb_topology_size(c), tb_topology_size(t));
    CHECK_STR(tb_topology_host(c, 0), "head");
    /* head:0 is taken (rank 3): the FE gets another local id */
    CHECK(tb_topology_local_id(c, 0) != 0);
    for (tbon_rank_t r = 1; r < tb_topology_size(t); r++) {
        CHECK_STR(tb_topology_host(c, r), tb_topology_host(t, r));
        CHECK_UINT(tb_topology_local_id(c, r), tb_topology_local_id(t, r));
        CHECK_UINT(tb_topology_parent(c, r), tb_topology_parent(t, r));
        CHECK_INT(tb_topology_role(c, r), tb_topology_role(t, r));
    }
    CHECK(tb_topology_with_fe_host(t, "bad host", &err) == NULL);
    tb_topology_destroy(c);
    tb_topology_destroy(t);
}

/* ---- the Slurm tree ---- */

static char **node_names(size_t n)
{
    char **v = calloc(n, sizeof *v);
    for (size_t i = 0; v && i < n; i++) {
        v[i] = malloc(32);
        snprintf(v[i], 32, "n%zu", i + 1);
    }
    return v;
}

/* Every shape: one commnode per node at one depth with that node's
 * back-ends, fan-out bounded, and every depth a valid step whose map puts
 * each task at its rank under its parent. */
TEST(slurm_tree_shapes_and_steps)
{
    const size_t counts[] = { 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33, 70 };
    for (unsigned fan = 2; fan <= 8; fan += 3) {
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            size_t n = counts[ci];
            unsigned per = (unsigned)(ci % 3) + 1;
            char **h = node_names(n);
            tbon_error_t err = { 0 };
            tb_topology_t *t = tb_slurm_topology(n > 2 ? "n2" : "login", h, n, per, fan, &err);
            REQUIRE(t);
            uint32_t depth = tb_slurm_depth(t);
            size_t size = tb_topology_size(t);
            CHECK_UINT(tb_topology_num_leaves(t), n * per);
            tb_topology_set_port(t, 0, 1000);
            for (tbon_rank_t r = 1; r < size; r++) {
                CHECK(tb_topology_num_children(t, r) <= (tb_topology_role(t, r) == TB_ROLE_BE
                                                         ? 0 : fan > per ? fan : per));
                if (tb_topology_role(t, r) == TB_ROLE_BE) {
                    tbon_rank_t p = tb_topology_parent(t, r);
                    CHECK_UINT(tb_topology_depth(t, r), depth);
                    CHECK_STR(tb_topology_host(t, p), tb_topology_host(t, r));
                    CHECK_UINT(tb_topology_num_children(t, p), per);
                }
                tb_topology_set_port(t, r, (uint16_t)(1000 + r));
            }
            CHECK(tb_topology_num_children(t, 0) <= fan);
            for (uint32_t d = 1; d <= depth; d++) {
                char *nl = NULL, *map = NULL;
                unsigned k = 0;
                size_t nn = 0;
                REQUIRE(tb_slurm_step(t, d, "10.0.0.1", &nl, &k, &nn, &map, &err) == 0);
                CHECK_UINT(k, d == depth ? per : 1);
                /* each task of the step finds its place */
                size_t found = 0;
                for (tbon_rank_t r = 1; r < size; r++) {
                    if (tb_topology_depth(t, r) != d)
                        continue;
                    const char *node = tb_topology_host(t, r);
                    /* its local index among this depth's ranks on its node */
                    unsigned lid = 0;
                    for (tbon_rank_t q = 1; q < r; q++)
                        lid += tb_topology_depth(t, q) == d &&
                               strcmp(tb_topology_host(t, q), node) == 0;
                    tbon_rank_t got;
                    char ph[64];
                    uint16_t pp;
                    if (tb_slurm_map_find(map, node, lid, &got, ph, sizeof ph, &pp, &err)) {
                        th_fail(__FILE__, __LINE__, "n=%zu fan=%u d=%u rank %u: %s (map %s)", n, fan, d, r, err.msg, map);
                        return;
                    }
                    CHECK_UINT(got, r);
                    tbon_rank_t p = tb_topology_parent(t, r);
                    CHECK_STR(ph, p == 0 ? "10.0.0.1" : tb_topology_host(t, p));
                    CHECK_UINT(pp, 1000 + p);
                    found++;
                }
                CHECK_UINT(found, nn * k);
                free(nl);
                free(map);
            }
            tb_topology_destroy(t);
            for (size_t i = 0; i < n; i++)
                free(h[i]);
            free(h);
        }
    }
}

TEST(slurm_map_errors_and_ipv6)
{
    tbon_rank_t r;
    char h[64];
    uint16_t p;
    tbon_error_t err = { 0 };
    CHECK_INT(tb_slurm_map_find("n1=5@[fd00::1]:4000;n2=9@n1:4001", "n1", 2, &r, h, sizeof h, &p,
                                &err), 0);
    CHECK_UINT(r, 7);
    CHECK_STR(h, "fd00::1");
    CHECK_UINT(p, 4000);
    CHECK_INT(tb_slurm_map_find("n1=5@[fd00::1]:4000;n2=9@n1:4001", "n2", 0, &r, h, sizeof h, &p,
                                &err), 0);
    CHECK_UINT(r, 9);
    CHECK_STR(h, "n1");
    const char *bad[] = { "n1=5@n0:0", "n1=x@n0:4", "n1=5n0:4", "n1=5@n0", "n1=5@:4",
                          "n2=5@n0:4", "", "n1", "n1=5@n0:70000" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_INT(tb_slurm_map_find(bad[i], "n1", 0, &r, h, sizeof h, &p, &err), TBON_EINVAL);
        CHECK(strstr(err.msg, "n1") != NULL);
    }
}

TEST(slurm_tasks_per_node_from_env)
{
    unsetenv("SLURM_NTASKS_PER_NODE");
    unsetenv("SLURM_TASKS_PER_NODE");
    CHECK_UINT(tb_slurm_default_per_node(conf_now()), 1);
    setenv("SLURM_TASKS_PER_NODE", "4(x2),2,3(x5)", 1);
    CHECK_UINT(tb_slurm_default_per_node(conf_now()), 2);
    setenv("SLURM_NTASKS_PER_NODE", "6", 1);
    CHECK_UINT(tb_slurm_default_per_node(conf_now()), 6);
    unsetenv("SLURM_NTASKS_PER_NODE");
    unsetenv("SLURM_TASKS_PER_NODE");
    tbon_error_t err = { 0 };
    char **h;
    size_t n;
    unsetenv("SLURM_JOB_NODELIST");
    unsetenv("SLURM_NODELIST");
    CHECK_INT(tb_slurm_nodes(conf_now(), &h, &n, &err), TBON_EINVAL);
    CHECK(strstr(err.msg, "salloc") != NULL);
}

/* ---- a remote child's stderr ---- */

/* A child whose stderr is a pipe to a relay: what it writes reaches our
 * stderr (here a file), and its first line, time stamp off, is kept. */
TEST(relay_first_line_and_copy)
{
    const char *exe = th_write_file("talker.sh",
        "#!/bin/sh\n"
        "printf '\\n2026-11-25T09:02:05.186608Z error rank=3 commnode [startup] cannot "
        "connect to n1:40985: Connection refused\\nsecond line\\n' >&2\n"
        "exit 1\n");
    chmod(exe, 0755);
    char out[600];
    snprintf(out, sizeof out, "%s/relayed", th_tmpdir());
    int saved = dup(2);
    int f = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(saved >= 0 && f >= 0);
    tb_relay_t *r = tb_relay_new();
    REQUIRE(r);
    dup2(f, 2);
    close(f);
    const char *av[] = { "talker.sh", NULL };
    int efd = -1;
    pid_t pid;
    tbon_error_t err = { 0 };
    tb_launch_spec_t s = { .host = "localhost", .exe = exe, .argv = av, .stderr_pipe = &efd };
    int rc = tb_launch(&s, &pid, &err);
    if (rc == 0) {
        tb_relay_add(r, 3, efd);
        tb_reap(pid, 10000);
    }
    char line[200];
    int has = tb_relay_first_line(r, 3, line, sizeof line);
    tb_relay_destroy(r);
    dup2(saved, 2);
    close(saved);
    REQUIRE(rc == 0);
    CHECK_INT(has, 1);
    CHECK_STR(line, "error rank=3 commnode [startup] cannot connect to n1:40985: "
                    "Connection refused");
    CHECK_INT(tb_relay_first_line(NULL, 3, line, sizeof line), 0);
    FILE *in = fopen(out, "r");
    REQUIRE(in);
    char buf[400] = "";
    size_t n = fread(buf, 1, sizeof buf - 1, in);
    buf[n] = 0;
    fclose(in);
    CHECK(strstr(buf, "Connection refused\nsecond line\n") != NULL);
}

/* A listening socket and a connection to it on loopback, both ends. 0 or -1. */
static int loopback_pair(int *lfd, int *c, int *a)
{
    uint16_t port = 0;
    tbon_error_t err;
    *lfd = tb_sock_listen(&port, &err);
    *c = *lfd >= 0 ? tb_sock_connect("127.0.0.1", port, tb_now_ms() + 5000, &err) : -1;
    *a = *c >= 0 ? tb_sock_accept(*lfd) : -1;
    return *a >= 0 ? 0 : -1;
}

/* Tree connections, both ends: no Nagle delay and TCP keepalive (10 s
 * idle, 5 s apart, 3 probes), so a quiet connection to a vanished host
 * ends without heartbeats (net/sock.c). */
TEST(tree_connections_keep_alive)
{
    int lfd, c, a;
    REQUIRE(loopback_pair(&lfd, &c, &a) == 0);
    int fds[2] = { c, a };
    for (int i = 0; i < 2; i++) {
        int v = 0;
        socklen_t len = sizeof v;
        CHECK(getsockopt(fds[i], SOL_SOCKET, SO_KEEPALIVE, &v, &len) == 0 && v == 1);
        CHECK(getsockopt(fds[i], IPPROTO_TCP, TCP_KEEPIDLE, &v, &len) == 0 && v == 10);
        CHECK(getsockopt(fds[i], IPPROTO_TCP, TCP_KEEPINTVL, &v, &len) == 0 && v == 5);
        CHECK(getsockopt(fds[i], IPPROTO_TCP, TCP_KEEPCNT, &v, &len) == 0 && v == 3);
        CHECK(getsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &v, &len) == 0 && v == 1);
    }
    close(a);
    close(c);
    close(lfd);
}

/* The acknowledgement timeout's measure (net/sock.c, tb_sock_unacked_ms):
 * a peer that is stopped (SIGSTOP) and never reads is not a silent link:
 * its kernel acknowledges what comes, then shuts its window, and the
 * sender's data is never left unacknowledged past a retransmission. */
TEST(stopped_reader_is_no_silent_link)
{
    int lfd, c, a;
    REQUIRE(loopback_pair(&lfd, &c, &a) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(c);
        raise(SIGSTOP);         /* holds a, never reads it */
        _exit(0);
    }
    close(a);
    int st;
    REQUIRE(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
    tb_sock_nonblock(c, 1);
    static char buf[65536];
    size_t sent = 0;
    ssize_t k;
    while ((k = send(c, buf, sizeof buf, MSG_NOSIGNAL)) > 0)
        sent += (size_t)k;
    CHECK(k < 0 && errno == EAGAIN);
    CHECK(sent > 0);
    /* Four of the shortest acknowledgement timeouts (250 ms): never silent. */
    int worst = 0;
    for (int64_t end = tb_now_ms() + 1000; tb_now_ms() < end;) {
        int q = tb_sock_unacked_ms(c);
        worst = q > worst ? q : worst;
        CHECK(q >= 0);
        poll(NULL, 0, 20);
    }
    CHECK_INT(worst, 0);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    close(c);
    close(lfd);
}

/* A connection whose packets a firewall drops (in a network namespace of
 * its own: iptables on its loopback) is a silent link once TCP has sent
 * the data again and nothing came back. Needs root and iptables (scripts/
 * deps.sh installs it). Exit codes of the child say which step failed. */
static int silent_link_child(void)
{
    if (unshare(CLONE_NEWNET) != 0 || system("ip link set lo up") != 0)
        return 10;
    uint16_t port = 0;
    tbon_error_t err;
    int lfd = tb_sock_listen(&port, &err);
    int c = lfd >= 0 ? tb_sock_connect("127.0.0.1", port, tb_now_ms() + 5000, &err) : -1;
    int a = c >= 0 ? tb_sock_accept(lfd) : -1;
    if (a < 0)
        return 11;
    if (tb_sock_unacked_ms(c) != 0)
        return 12;                  /* an idle link is fine */
    char cmd[200];
    snprintf(cmd, sizeof cmd, "iptables -A INPUT -p tcp --dport %u -j DROP", port);
    if (system(cmd) != 0)
        return 13;
    if (send(c, "beat", 4, MSG_NOSIGNAL) != 4)
        return 14;
    for (int64_t end = tb_now_ms() + 10000; tb_now_ms() < end; poll(NULL, 0, 20))
        if (tb_sock_unacked_ms(c) >= 300)
            return 0;
    return 15;
}

TEST(dropped_packets_make_a_silent_link)
{
    if (geteuid() != 0 || system("iptables -V >/dev/null 2>&1") != 0) {
        fprintf(stderr, "    skipped: needs root and iptables\n");
        return;
    }
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0)
        _exit(silent_link_child());
    int st;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st));
    CHECK_INT(WEXITSTATUS(st), 0);
}
