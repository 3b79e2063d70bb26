/* test_startup.c - starting and ending trees: start-up failures named by
 * node and host, the remote-shell path, attach mode, back-end arguments,
 * orderly shutdown and the death of the front-end
 */
#include "itest.h"

#include <ctype.h>

/* 1 if msg names one of ranks as "rank N" (N not followed by a digit). */
static int names_rank(const char *msg, const tbon_rank_t *ranks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char key[32];
        int kl = snprintf(key, sizeof key, "rank %u", (unsigned)ranks[i]);
        for (const char *p = strstr(msg, key); p; p = strstr(p + 1, key))
            if (!isdigit((unsigned char)p[kl]))
                return 1;
    }
    return 0;
}

/* tbon_fe_create must fail with one of the codes, naming one of ranks and
 * host (and `also`, if not NULL), within max_ms; nothing may be left. */
static void expect_start_failure(const char *topo, const char *be, const char *const *argv,
                                 const tbon_fe_options_t *o, int code1, int code2,
                                 const tbon_rank_t *ranks, size_t nr, const char *host,
                                 const char *also, int min_ms, int max_ms)
{
    tbon_error_t err = { 0, "" };
    int64_t t0 = it_now_ms();
    tbon_net_t *net = tbon_fe_create(topo, be, argv, o, &err);
    int64_t ms = it_now_ms() - t0;
    if (net) {
        th_fail(__FILE__, __LINE__, "tbon_fe_create succeeded");
        tbon_net_destroy(net);
        return;
    }
    fprintf(stderr, "    (%lld ms) %s: %s\n", (long long)ms, tbon_strerror(err.code), err.msg);
    if (err.code != code1 && err.code != code2)
        th_fail(__FILE__, __LINE__, "code %d (%s), expected %s or %s", err.code,
                tbon_strerror(err.code), tbon_strerror(code1), tbon_strerror(code2));
    if (!names_rank(err.msg, ranks, nr))
        th_fail(__FILE__, __LINE__, "message does not name the failed node's rank: %s",
                err.msg);
    if (host && !strstr(err.msg, host))
        th_fail(__FILE__, __LINE__, "message does not name host %s: %s", host, err.msg);
    if (also && !strstr(err.msg, also))
        th_fail(__FILE__, __LINE__, "message does not mention %s: %s", also, err.msg);
    CHECK(ms >= min_ms);
    CHECK(ms <= max_ms);
    /* "removing every process it started": at once, not after a while. */
    CHECK_UINT(it_left_after_reap(), 0);
}

ITEST(start_missing_be_exe_under_commnode)
{
    tbon_rank_t be[8];
    size_t n;
    const char *topo = it_topo_shape("1x2", be, 8, &n);
    expect_start_failure(topo, "/nonexistent/dir/tbon_nope", NULL, NULL, TBON_ELAUNCH,
                         TBON_ELAUNCH, be, n, "localhost", "/nonexistent/dir/tbon_nope",
                         0, 10000);
}

ITEST(start_missing_be_exe_under_fe)
{
    tbon_rank_t be[8];
    size_t n;
    const char *topo = it_topo_shape("3", be, 8, &n);
    expect_start_failure(topo, "/nonexistent/dir/tbon_nope", NULL, NULL, TBON_ELAUNCH,
                         TBON_ELAUNCH, be, n, "localhost", "/nonexistent/dir/tbon_nope",
                         0, 10000);
}

ITEST(start_be_dies_at_start)
{
    tbon_rank_t be[8];
    size_t n;
    const char *topo = it_topo_shape("2x2", be, 8, &n);
    const char *argv[] = { "--die-at-start", NULL };
    tbon_fe_options_t o = { .startup_timeout_ms = 10000 };
    expect_start_failure(topo, it_be_path(), argv, &o, TBON_ELAUNCH, TBON_ETIMEOUT, be, n,
                         "localhost", NULL, 0, 10000 + 3000);
}

ITEST(start_be_never_connects)
{
    tbon_rank_t ranks[8] = { 1 };
    size_t n;
    const char *topo = it_topo_shape("1x2", ranks + 1, 7, &n);
    const char *argv[] = { "--hang-at-start", NULL };
    /* require_all: the first back-end that does not connect fails the
     * start-up (by default both would be left out, and no back-end left
     * fails it: test_startup_ft). */
    tbon_fe_options_t o = { .startup_timeout_ms = 2000, .require_all = 1 };
    /* The commnode (rank 1) or, better, the back-end itself may be named. */
    expect_start_failure(topo, it_be_path(), argv, &o, TBON_ETIMEOUT, TBON_ETIMEOUT, ranks,
                         n + 1, "localhost", NULL, 1000, 2000 + 4000);
}

ITEST(start_missing_commnode)
{
    tbon_rank_t be[8], cn[2] = { 1, 2 };
    size_t n;
    const char *topo = it_topo_shape("2x2", be, 8, &n);
    /* require_all: the first failure ends the start (by default, every
     * commnode failing does: test_startup_ft,
     * missing_commnode_program_fails_the_start). */
    tbon_fe_options_t o = { .commnode_path = "/nonexistent/dir/tbon_commnode",
                            .require_all = 1 };
    expect_start_failure(topo, it_be_path(), NULL, &o, TBON_ELAUNCH, TBON_ELAUNCH, cn, 2,
                         "localhost", "/nonexistent/dir/tbon_commnode", 0, 10000);
}

ITEST(start_bad_topology)
{
    tbon_error_t err = { 0, "" };
    const char *missing = "/nonexistent/dir/none.top";
    tbon_net_t *net = tbon_fe_create(missing, it_be_path(), NULL, NULL, &err);
    CHECK(net == NULL);
    CHECK(err.code == TBON_EIO || err.code == TBON_ETOPOLOGY);
    CHECK(strstr(err.msg, missing) != NULL);
    const char *bad = th_write_file("bad.top", "localhost:0 => localhost:1\n");
    net = tbon_fe_create(bad, it_be_path(), NULL, NULL, &err);
    CHECK(net == NULL);
    CHECK_INT(err.code, TBON_ETOPOLOGY);
    if (!strstr(err.msg, "bad.top:"))
        th_fail(__FILE__, __LINE__, "message does not name the file: %s", err.msg);
    tbon_net_destroy(net);
}

/* ---- back-end arguments, orderly shutdown ---- */

/* Every back-end gets exactly the arguments given, spaces and quotes kept,
 * and none of the launcher's. */
static void check_argv(tbon_net_t *net, size_t nbe, const char *const *argv, size_t argc)
{
    tbon_stream_t *s = it_stream(net, TBON_FILTER_NULL, TBON_SYNC_WAITFORALL, 0);
    if (!s || tbon_stream_send(s, IT_TAG_ARGV, "%ud", 0u) != 0)
        return;
    for (size_t i = 0; i < nbe; i++) {
        tbon_packet_t *p = it_recv(s, IT_RECV_MS, "argv");
        if (!p)
            return;
        char **v = NULL;
        size_t n = 0;
        CHECK_INT(tbon_packet_unpack(p, "%as", &v, &n), 0);
        if (n != argc)
            th_fail(__FILE__, __LINE__, "back-end %u has %zu arguments, expected %zu%s%s",
                    (unsigned)tbon_packet_source(p), n, argc, n ? "; first: " : "",
                    n ? v[0] : "");
        for (size_t k = 0; k < n; k++) {
            if (k < argc)
                CHECK_STR(v[k], argv[k]);
            free(v[k]);
        }
        free(v);
        tbon_packet_unref(p);
    }
}

ITEST(backend_argv_passed)
{
    it_tree_t t;
    const char *argv[] = { "alpha", "two words", "it's $HOME `x`", "--beta=1", NULL };
    if (it_start(&t, "2x2", argv, NULL))
        return;
    check_argv(t.net, t.nbe, argv, 4);
    it_stop(&t);
}

/* tbon_net_destroy: every back-end sees TBON_ECLOSED and leaves cleanly
 * (its marker file exists once destroy has returned). */
ITEST(destroy_be_sees_closed)
{
    it_tree_t t;
    const char *argv[] = { "--marker", th_tmpdir(), NULL };
    if (it_start(&t, "2x3", argv, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    if (s)
        it_sum_wave(s, 1, t.be, t.nbe);
    it_stop(&t);
    for (size_t i = 0; i < t.nbe; i++) {
        char p[700];
        struct stat st;
        snprintf(p, sizeof p, "%s/closed.%u", th_tmpdir(), (unsigned)t.be[i]);
        if (stat(p, &st) != 0)
            th_fail(__FILE__, __LINE__, "back-end %u did not leave cleanly (no %s)",
                    (unsigned)t.be[i], p);
    }
    CHECK_UINT(it_left_after_reap(), 0);   /* destroy reaped them all */
}

/* Several trees one after the other in one process. */
ITEST(create_destroy_repeat)
{
    for (uint32_t i = 0; i < 4; i++) {
        it_tree_t t;
        if (it_start(&t, "1x2", NULL, NULL))
            return;
        tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
        if (s)
            it_sum_wave(s, i, t.be, t.nbe);
        it_stop(&t);
        CHECK_UINT(it_left_after_reap(), 0);
    }
}

/* ---- the remote-shell path ---- */

/* Hosts that are not this machine go through opts.rsh: here the stand-in
 * tests/integration/rsh-local, which logs each host. A child on its
 * parent's own topology host is started directly (the parent is there);
 * node-c:0 is started by the commnode on node-a through the remote shell. */
ITEST(rsh_standin)
{
    const char *rsh = it_src_path("tests/integration/rsh-local");
    char rshp[PATH_MAX + 256], log[700];
    snprintf(rshp, sizeof rshp, "%s", rsh);
    REQUIRE(access(rshp, X_OK) == 0);
    snprintf(log, sizeof log, "%s/rsh.log", th_tmpdir());
    setenv("TBON_RSH_LOG", log, 1);
    /* ranks: 1 node-a:0, 2 node-b:0, 3 node-c:0, 4 node-a:1, 5 node-b:1 */
    const char *topo = th_write_file("remote.top",
                                     "localhost:0 => node-a:0 node-b:0 ;\n"
                                     "node-a:0 => node-c:0 node-a:1 ;\n"
                                     "node-b:0 => node-b:1 ;\n");
    const tbon_rank_t be[] = { 3, 4, 5 };
    const char *argv[] = { "x y", "'quoted'", "$NOT_EXPANDED", NULL };
    tbon_fe_options_t o = { .rsh = rshp, .startup_timeout_ms = 15000 };
    tbon_error_t err = { 0, "" };
    tbon_net_t *net = tbon_fe_create(topo, it_be_path(), argv, &o, &err);
    if (!net) {
        th_fail(__FILE__, __LINE__, "tbon_fe_create: %s", err.msg);
        return;
    }
    CHECK_UINT(tbon_net_num_backends(net), 3);
    tbon_stream_t *s = it_stream(net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    if (s)
        it_sum_wave(s, 4, be, 3);
    check_argv(net, 3, argv, 3);
    tbon_net_destroy(net);
    /* The FE started node-a:0 and node-b:0, node-a:0 started node-c:0 remotely. */
    FILE *f = fopen(log, "r");
    int a = 0, b = 0, c = 0, other = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (strcmp(line, "node-a") == 0)
            a++;
        else if (strcmp(line, "node-b") == 0)
            b++;
        else if (strcmp(line, "node-c") == 0)
            c++;
        else
            other++;
    }
    if (f)
        fclose(f);
    CHECK_INT(a, 1);
    CHECK_INT(b, 1);
    CHECK_INT(c, 1);
    CHECK_INT(other, 0);
}

/* ---- attach mode ---- */

/* Parse the attach file: back-end ranks (and their parents) and the secret.
 * Returns the number of back-end lines (-1 if unreadable). */
static int parse_attach(const char *path, tbon_rank_t *be, tbon_rank_t *parent, int cap,
                        char *secret, size_t slen, int *nodes_with_port)
{
    FILE *f = fopen(path, "r");
    char line[512];
    int n = 0;
    if (!f)
        return -1;
    if (secret && slen)
        secret[0] = 0;
    if (nodes_with_port)
        *nodes_with_port = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned r, p, port;
        if (sscanf(line, "backend=%u parent=%u", &r, &p) == 2 && n < cap) {
            be[n] = r;
            parent[n] = p;
            n++;
        } else if (sscanf(line, "backend=%u", &r) == 1 && n < cap) {
            be[n] = r;
            parent[n] = TBON_RANK_NONE;
            n++;
        } else if (strncmp(line, "secret=", 7) == 0 && secret) {
            size_t l = strcspn(line + 7, "\r\n");
            l = l < slen - 1 ? l : slen - 1;
            memcpy(secret, line + 7, l);
            secret[l] = 0;
        } else if (nodes_with_port && sscanf(line, "node=%u", &r) == 1) {
            const char *pp = strstr(line, "port=");
            if (pp && sscanf(pp, "port=%u", &port) == 1 && port > 0 && port < 65536)
                (*nodes_with_port)++;
        }
    }
    fclose(f);
    return n;
}

/* In a child: start one tbon_test_be --attach per back-end, wait for
 * them; exit 0 if all exited 0. With ranks NULL, first wait for the attach
 * file and take the back-end lines from it; otherwise start the n given
 * ranks at once (their tbon_be_attach retries until the file exists). */
static void attach_launcher(const char *file, const char *marker,
                            const tbon_rank_t *ranks, int n)
{
    tbon_rank_t be[64], par[64];
    if (ranks) {
        for (int i = 0; i < n && i < 64; i++)
            be[i] = ranks[i];
    } else {
        n = -1;
        for (int i = 0; i < 400 && n <= 0; i++) {
            n = parse_attach(file, be, par, 64, NULL, 0, NULL);
            if (n <= 0)
                it_sleep_ms(50);
        }
    }
    if (n <= 0)
        _exit(20);
    pid_t pids[64];
    for (int i = 0; i < n; i++) {
        char r[16];
        snprintf(r, sizeof r, "%u", (unsigned)be[i]);
        pids[i] = fork();
        if (pids[i] == 0) {
            execl(it_be_path(), "tbon_test_be", "--attach", file, "--rank", r, "--marker",
                  marker, (char *)NULL);
            _exit(127);
        }
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int st = 0;
        if (pids[i] < 0 || waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) ||
            WEXITSTATUS(st) != 0)
            bad++;
    }
    _exit(bad ? 21 : 0);
}

/* 1 if some tbon_* process of ours has s on its command line. */
static int secret_on_cmdline(const char *s)
{
    pid_t pids[64];
    size_t n = it_our_procs("tbon_", pids, 64);
    for (size_t i = 0; i < n && i < 64; i++) {
        char path[64], buf[8192];
        snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pids[i]);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        for (ssize_t k = 0; k < len; k++)
            if (!buf[k])
                buf[k] = ' ';
        buf[len > 0 ? len : 0] = 0;
        if (strstr(buf, s))
            return 1;
    }
    return 0;
}

static void run_attach_mode(int be_first)
{
    char file[700];
    snprintf(file, sizeof file, "%s/attach", th_tmpdir());
    const char *topo = th_write_file("attach.top",
                                     "localhost:0 => localhost:1 localhost:2 ;\n"
                                     "localhost:1 => localhost:3 localhost:4 ;\n"
                                     "localhost:2 => localhost:5 localhost:6 ;\n");
    const tbon_rank_t want[] = { 3, 4, 5, 6 }, want_par[] = { 1, 1, 2, 2 };
    pid_t h = fork();
    REQUIRE(h >= 0);
    if (h == 0)
        attach_launcher(file, th_tmpdir(), be_first ? want : NULL, 4);
    tbon_fe_options_t o = { .attach_file = file, .startup_timeout_ms = 20000 };
    tbon_error_t err = { 0, "" };
    tbon_net_t *net = tbon_fe_create(topo, NULL, NULL, &o, &err);
    if (!net) {
        th_fail(__FILE__, __LINE__, "tbon_fe_create (attach): %s", err.msg);
        kill(h, SIGKILL);
        waitpid(h, NULL, 0);
        return;
    }
    struct stat st;
    CHECK_INT(stat(file, &st), 0);
    CHECK_INT(st.st_mode & 0777, 0600);
    tbon_rank_t be[16], par[16];
    char secret[200];
    int nodes = 0;
    int n = parse_attach(file, be, par, 16, secret, sizeof secret, &nodes);
    CHECK_INT(n, 4);
    for (int i = 0; i < n && i < 4; i++) {
        CHECK_UINT(be[i], want[i]);
        CHECK_UINT(par[i], want_par[i]);
    }
    CHECK_INT(nodes, 3);         /* the FE (where new back-ends join) and the two commnodes */
    CHECK_UINT(strlen(secret), 64);
    CHECK(!secret_on_cmdline(secret));
    CHECK_UINT(tbon_net_num_backends(net), 4);
    tbon_stream_t *s = it_stream(net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    if (s) {
        it_sum_wave(s, 1, want, 4);
        it_sum_wave(s, 2, want, 4);
    }
    tbon_net_destroy(net);
    int hst = 0;
    CHECK_INT(waitpid(h, &hst, 0), h);
    CHECK(WIFEXITED(hst));
    CHECK_INT(WEXITSTATUS(hst), 0);   /* every attached BE exited 0 on TBON_ECLOSED */
    for (int i = 0; i < 4; i++) {
        char p[800];
        snprintf(p, sizeof p, "%s/closed.%u", th_tmpdir(), (unsigned)want[i]);
        CHECK(access(p, F_OK) == 0);
    }
}

/* Back-ends started once the attach file is there (ranks read from it). */
ITEST(attach_mode) { run_attach_mode(0); }

/* Back-ends started before the front-end: they retry until the file is
 * there. */
ITEST(attach_mode_backends_first) { run_attach_mode(1); }

/* Without the file, tbon_be_attach says so at once. */
ITEST(attach_missing_file)
{
    tbon_error_t err = { 0, "" };
    int64_t t0 = it_now_ms();
    tbon_net_t *net = tbon_be_attach("/nonexistent/dir/attach", 3, &err);
    CHECK(net == NULL);
    CHECK_INT(err.code, TBON_ENOTFOUND);
    CHECK(strstr(err.msg, "/nonexistent/dir/attach") != NULL);
    CHECK(it_now_ms() - t0 < 1000);
    tbon_net_destroy(net);
}

/* ---- the front-end dies ---- */

/* A child process becomes the FE of a tree of shape and is killed with
 * SIGKILL: every other process of the tree must be gone within a
 * second (polled for up to 5 s). The FE's end is the session's: no commnode
 * asks anyone to adopt it (the FE's children shut their subtrees down; a
 * dead FE's port only refused them, round after round, 0.3 s on an idle
 * machine before). */
static void fe_death(const char *shape)
{
    int pfd[2];
    REQUIRE(pipe(pfd) == 0);
    size_t nbe = 0;
    tbon_rank_t be[16];
    const char *topo = it_topo_shape(shape, be, 16, &nbe);
    REQUIRE(topo != NULL);
    size_t nodes = it_last_total;
    pid_t fe = fork();
    REQUIRE(fe >= 0);
    if (fe == 0) {
        close(pfd[0]);
        tbon_error_t err = { 0, "" };
        tbon_net_t *net = tbon_fe_create(topo, it_be_path(), NULL, NULL, &err);
        char c = net ? 'R' : 'F';
        if (!net)
            fprintf(stderr, "    child FE: %s\n", err.msg);
        if (write(pfd[1], &c, 1) != 1)
            _exit(2);
        for (int i = 0; i < 600; i++)
            it_sleep_ms(100);
        _exit(3);
    }
    close(pfd[1]);
    struct pollfd pf = { .fd = pfd[0], .events = POLLIN };
    char c = 0;
    int ready = poll(&pf, 1, IT_RECV_MS) == 1 && read(pfd[0], &c, 1) == 1 && c == 'R';
    close(pfd[0]);
    if (!ready) {
        th_fail(__FILE__, __LINE__, "the child FE did not start its tree");
        kill(fe, SIGKILL);
        waitpid(fe, NULL, 0);
        return;
    }
    pid_t pids[32];
    CHECK_UINT(it_our_procs("tbon_", pids, 32), nodes - 1);
    CHECK_INT(kill(fe, SIGKILL), 0);
    CHECK_INT(waitpid(fe, NULL, 0), fe);
    int64_t ms = 0;
    size_t left = it_wait_no_procs(5000, &ms);
    fprintf(stderr, "    %s: tree gone %lld ms after the FE died (%zu left)\n", shape,
            (long long)ms, left);
    CHECK_UINT(left, 0);
    /* "within a second", with slack for a loaded machine; under the
     * sanitizers every exit runs their checks (2.1 s once, ASan, in a make
     * check with the load at 90): gone within the wait above */
    if (!IT_ASAN && !IT_TSAN)
        CHECK(ms <= 1500);
    /* every commnode's log (those below the FE's children left quietly,
     * told to): the leaves are the back-ends */
    for (tbon_rank_t r = 1; r < (tbon_rank_t)nodes; r++) {
        if (r >= be[0] && r <= be[nbe - 1])
            continue;
        CHECK_INT(it_log_lines(r, "adopt", NULL), 0);
    }
    if (nbe < nodes - 1)
        CHECK(it_log_lines(1, "lost the parent", NULL) >= 1);
}

ITEST(fe_death_kills_tree) { fe_death("2x2"); }

/* The FE's children are back-ends: their applications hear it at once. */
ITEST(fe_death_ends_backends_below_it) { fe_death("4"); }

/* Three levels: the FE's children shut their subtrees down, commnodes below
 * them included. */
ITEST(fe_death_ends_subtrees_without_adoption) { fe_death("2x2x2"); }
