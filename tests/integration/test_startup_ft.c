/* test_startup_ft.c - a start-up that survives failures (docs/protocol.md
 * 7.1, docs/user-guide.md "Start-up failures"): a 16x16 tree in which three
 * commnodes and five back-ends fail in different ways starts without them,
 * their children launched by their parents; the missing ranks are exactly
 * those (events and tbon_fe_missing), waves are exact over the rest, every
 * copy of the view agrees; require_all keeps the old all-or-nothing start;
 * a tree with no back-end left, or nothing launched at all, still fails.
 *
 * How each failure is made real:
 *  - rank 3, a commnode, cannot be launched: its host is another one
 *    (198.51.100.7, TEST-NET-2) and the remote shell does not exist;
 *  - rank 7, a commnode, exits before it connects, and rank 12 stops
 *    itself (SIGSTOP) right after its launch and never connects: the
 *    commnode program is a wrapper script that does this for those ranks
 *    and execs tbon_commnode for the others;
 *  - back-ends 20, 60 and 250 exit at once, 100 and 200 hang before they
 *    connect (tbon_test_be --die-at-start-ranks, --hang-at-start-ranks).
 *    60 and 200 are children of failed commnodes (3 and 12): the FE
 *    launches them in their parent's place, and leaves them out in turn.
 */
#include "itest.h"

#include <ctype.h>

#define NCN 16
#define NBE (NCN * 16)
#define SIZE (1 + NCN + NBE)

/* A commnode that never connects is found when half the time its parent
 * had left has passed (or up to three quarters, while its siblings still
 * come in), a back-end at its parent's deadline: keep it short, but with
 * room for a slow machine - 256 back-ends of a sanitizer build take many
 * seconds to start on two cores. */
#define START_MS (IT_TSAN ? 40000 : IT_ASAN ? 30000 : 12000)
/* The case's own bound (s): the harness's minute is too short for a tree
 * that waits that long in a sanitizer build. */
#define CASE_S (IT_SLOW ? 170 : 60)

static const tbon_rank_t missing_want[] = { 3, 7, 12, 20, 60, 100, 200, 250 };
#define NMISSING (sizeof missing_want / sizeof missing_want[0])

static int in(const tbon_rank_t *v, size_t n, tbon_rank_t r)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == r)
            return 1;
    return 0;
}

/* The 16x16 topology, ranks in BFS order (FE 0, commnodes 1-16, back-ends
 * 17-272, commnode k's are 17 + 16 (k - 1) ...); bad_host: commnode 3's
 * host, or NULL for localhost. */
static const char *topo_16x16(const char *bad_host)
{
    static char text[SIZE * 32];
    char *p = text;
    p += sprintf(p, "localhost:0 =>");
    for (int k = 1; k <= NCN; k++)
        p += k == 3 && bad_host ? sprintf(p, " %s:0", bad_host) : sprintf(p, " localhost:%d", k);
    p += sprintf(p, " ;\n");
    for (int k = 1; k <= NCN; k++) {
        p += k == 3 && bad_host ? sprintf(p, "%s:0 =>", bad_host)
                                : sprintf(p, "localhost:%d =>", k);
        for (int j = 0; j < 16; j++)
            p += sprintf(p, " localhost:%d", 1 + NCN + 16 * (k - 1) + j);
        p += sprintf(p, " ;\n");
    }
    return th_write_file(bad_host ? "16x16-bad.top" : "16x16.top", text);
}

/* The commnode wrapper (its name starts with tbon_, so the leftover check
 * sees it): rank 7 exits at once, rank 12 stops itself, the others are
 * tbon_commnode. */
static const char *cn_wrapper(void)
{
    static char path[PATH_MAX + 64];
    char text[PATH_MAX + 1024];
    snprintf(text, sizeof text,
             "#!/bin/sh\n"
             "rank=\nprev=\n"
             "for a in \"$@\"; do\n"
             "    [ \"$prev\" = --tbon-rank ] && rank=$a\n"
             "    prev=$a\n"
             "done\n"
             "case \"$rank\" in\n"
             "7) echo \"tbon_cn_wrap: rank 7 exits before connecting, as asked\" >&2; exit 7 ;;\n"
             "12) kill -STOP $$ ;;\n"
             "esac\n"
             "exec '%s/bin/tbon_commnode' \"$@\"\n", it_build_dir());
    snprintf(path, sizeof path, "%s", th_write_file("tbon_cn_wrap", text));
    if (chmod(path, 0755) != 0)
        th_fail(__FILE__, __LINE__, "chmod %s: %s", path, strerror(errno));
    return path;
}

static const char *const be_argv[] = { "--die-at-start-ranks", "20,60,250",
                                       "--hang-at-start-ranks", "100,200", NULL };

static tbon_fe_options_t bad_tree_options(void)
{
    return (tbon_fe_options_t){ .commnode_path = cn_wrapper(), .rsh = "/nonexistent/tbon-rsh",
                                .startup_timeout_ms = START_MS };
}

/* The live back-ends: every one but the missing. */
static size_t live_backends(tbon_rank_t *out)
{
    size_t n = 0;
    for (tbon_rank_t r = 1 + NCN; r < SIZE; r++)
        if (!in(missing_want, NMISSING, r))
            out[n++] = r;
    return n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One union wave: the built-in union outputs the values the stream has not
 * seen before (filter_union.c): for the first wave exactly {rank, rank % 3,
 * 1000000 + wave} over be[], after it only 1000000 + wave. */
static void union_wave(tbon_stream_t *s, uint32_t wave, const tbon_rank_t *be, size_t n)
{
    REQUIRE(tbon_stream_send(s, IT_TAG_UNION, "%ud", wave) == 0);
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, "union wave");
    if (!p)
        return;
    uint64_t *v = NULL;
    size_t k = 0;
    CHECK_INT(tbon_packet_unpack(p, "%auld", &v, &k), 0);
    tbon_packet_unref(p);
    uint8_t want[SIZE] = { 0 };
    size_t nwant = 1;
    for (size_t i = 0; i < n && wave == 0; i++) {
        nwant += !want[be[i]];
        want[be[i]] = 1;
        nwant += !want[be[i] % 3];
        want[be[i] % 3] = 1;
    }
    if (v)
        qsort(v, k, sizeof *v, cmp_u64);
    CHECK_UINT(k, nwant);
    for (size_t i = 0; v && i < k; i++) {
        if (i && v[i] == v[i - 1])
            th_fail(__FILE__, __LINE__, "union wave %u: %llu twice", wave,
                    (unsigned long long)v[i]);
        else if (v[i] == 1000000u + wave)
            continue;
        else if (v[i] >= SIZE || !want[v[i]])
            th_fail(__FILE__, __LINE__, "union wave %u: %llu was not sent", wave,
                    (unsigned long long)v[i]);
    }
    free(v);
}

/* Wait for a stable view (of the start-up's changes): its version, or 0. */
static uint64_t wait_stable(tbon_net_t *net)
{
    int64_t end = it_now_ms() + IT_RECV_MS;
    tbon_event_t ev;
    while (it_now_ms() < end && tbon_net_next_event(net, &ev, (int)(end - it_now_ms())) == 0) {
        if (ev.type == TBON_EV_VIEW_STABLE)
            return ev.view_version;
        th_fail(__FILE__, __LINE__, "event %d of rank %u after the start-up", (int)ev.type,
                ev.rank);
    }
    th_fail(__FILE__, __LINE__, "no stable view");
    return 0;
}

ITEST_LONG(tree_starts_without_three_commnodes_and_five_backends)
{
    alarm(CASE_S);
    tbon_fe_options_t o = bad_tree_options();
    tbon_error_t err = { 0, "" };
    int64_t t0 = it_now_ms();
    tbon_net_t *net = tbon_fe_create(topo_16x16("198.51.100.7"), it_be_path(), be_argv, &o, &err);
    if (!net) {
        th_fail(__FILE__, __LINE__, "tbon_fe_create: %s", err.msg);
        return;
    }
    if (getenv("ITEST_VERBOSE"))
        fprintf(stderr, "    tree up in %lld ms\n", (long long)(it_now_ms() - t0));
    /* The events came before tbon_fe_create returned: one per missing rank. */
    tbon_event_t ev;
    uint8_t seen[SIZE] = { 0 };
    size_t nfailed = 0;
    uint64_t stable = 0;
    while (tbon_net_next_event(net, &ev, 0) == 0) {
        if (ev.type == TBON_EV_VIEW_STABLE) {
            stable = ev.view_version;
            continue;
        }
        if (ev.type != TBON_EV_NODE_FAILED || ev.rank >= SIZE || seen[ev.rank]++ ||
            !in(missing_want, NMISSING, ev.rank))
            th_fail(__FILE__, __LINE__, "unexpected event %d of rank %u", (int)ev.type, ev.rank);
        else
            nfailed++;
        if (stable)
            th_fail(__FILE__, __LINE__, "rank %u's failure after the stable view", ev.rank);
    }
    CHECK_UINT(nfailed, NMISSING);
    /* The accessor: the same ranks, in rank order. */
    tbon_rank_t got[64];
    int n = tbon_fe_missing(net, got, 64);
    CHECK_INT(n, (long long)NMISSING);
    for (int i = 0; i < n && i < (int)NMISSING; i++)
        CHECK_UINT(got[i], missing_want[i]);
    CHECK_INT(tbon_fe_missing(net, NULL, 0), (long long)NMISSING);
    /* The back-ends: every one but the five. */
    static tbon_rank_t live[NBE], have[NBE];
    size_t nlive = live_backends(live);
    CHECK_UINT(nlive, NBE - 5);
    CHECK_UINT(tbon_net_num_backends(net), nlive);
    int nb = tbon_net_backends(net, have, NBE);
    CHECK_INT(nb, (long long)nlive);
    for (int i = 0; i < nb; i++)
        if (in(missing_want, NMISSING, have[i]))
            th_fail(__FILE__, __LINE__, "missing rank %u among the back-ends", have[i]);
    /* Waves are exact over the rest (none waits for a missing rank). */
    tbon_stream_t *sum = it_stream(net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    tbon_stream_t *uni = it_stream(net, TBON_FILTER_UNION, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(sum && uni);
    for (uint32_t w = 0; w < 3; w++) {
        CHECK_INT(it_sum_wave(sum, w, live, nlive), 0);
        union_wave(uni, w, live, nlive);
    }
    /* Every process's copy says they are dead: the view settles and the
     * consistency check passes over exactly the live nodes. */
    if (!stable)
        stable = wait_stable(net);
    CHECK(stable >= 2);
    tbon_view_check_t c;
    int rc = tbon_fe_check_views(net, &c, IT_RECV_MS);
    if (rc != 0)
        th_fail(__FILE__, __LINE__, "check: %s (first disagreeing %u, first missing %u)",
                tbon_net_error(net), c.ndisagree ? c.disagree[0] : 0,
                c.nmissing ? c.missing[0] : 0);
    CHECK_UINT(c.nodes, SIZE - NMISSING);
    CHECK_UINT(c.agree, SIZE - NMISSING);
    static tbon_rank_t view[SIZE];
    int nv = tbon_net_view(net, view, SIZE);
    CHECK_INT(nv, (long long)(SIZE - NMISSING));
    for (int i = 0; i < nv; i++)
        if (in(missing_want, NMISSING, view[i]))
            th_fail(__FILE__, __LINE__, "missing rank %u in the FE's view", view[i]);
    it_stop(&(it_tree_t){ .net = net });
}

/* 1 if msg names "rank R" (R not followed by a digit). */
static int names_rank(const char *msg, tbon_rank_t r)
{
    char key[32];
    int kl = snprintf(key, sizeof key, "rank %u", (unsigned)r);
    for (const char *p = strstr(msg, key); p; p = strstr(p + 1, key))
        if (!isdigit((unsigned char)p[kl]))
            return 1;
    return 0;
}

/* tbon_fe_create fails with code, naming rank and host (and also); nothing
 * is left running. */
static void expect_failure(const char *topo, const char *be, const char *const *argv,
                           const tbon_fe_options_t *o, int code, const tbon_rank_t *ranks,
                           size_t nr, const char *host, const char *also)
{
    tbon_error_t err = { 0, "" };
    tbon_net_t *net = tbon_fe_create(topo, be, argv, o, &err);
    if (net) {
        th_fail(__FILE__, __LINE__, "tbon_fe_create succeeded");
        tbon_net_destroy(net);
        return;
    }
    if (getenv("ITEST_VERBOSE"))
        fprintf(stderr, "    %s: %s\n", tbon_strerror(err.code), err.msg);
    CHECK_INT(err.code, code);
    int named = 0;
    for (size_t i = 0; i < nr; i++)
        named |= names_rank(err.msg, ranks[i]);
    if (!named)
        th_fail(__FILE__, __LINE__, "the message does not name rank %u%s: %s", ranks[0],
                nr > 1 ? " or another of the failed" : "", err.msg);
    if (host && !strstr(err.msg, host))
        th_fail(__FILE__, __LINE__, "the message does not name host %s: %s", host, err.msg);
    if (also && !strstr(err.msg, also))
        th_fail(__FILE__, __LINE__, "the message does not say \"%s\": %s", also, err.msg);
    CHECK_UINT(it_left_after_reap(), 0);
}

/* require_all: today's all-or-nothing start-up, with today's message (the
 * first failure: commnode 3's launch). */
ITEST(require_all_fails_on_the_first_failure)
{
    tbon_fe_options_t o = bad_tree_options();
    o.require_all = 1;
    expect_failure(topo_16x16("198.51.100.7"), it_be_path(), be_argv, &o, TBON_ELAUNCH,
                   (const tbon_rank_t[]){ 3 }, 1, "198.51.100.7", "/nonexistent/tbon-rsh");
}

/* require_all and a back-end that never connects: the timeout names it. */
ITEST_LONG(require_all_names_a_backend_that_never_connects)
{
    tbon_rank_t be[8];
    size_t n;
    const char *topo = it_topo_shape("2x2", be, 8, &n);
    const char *argv[] = { "--hang-at-start-ranks", "5", NULL };
    tbon_fe_options_t o = { .startup_timeout_ms = IT_SLOW ? 8000 : 2000, .require_all = 1 };
    expect_failure(topo, it_be_path(), argv, &o, TBON_ETIMEOUT,
                   (const tbon_rank_t[]){ 5 }, 1, "localhost",
                   "did not connect");
}

/* The commnode program is missing: every commnode fails the same way, and
 * tbon_fe_create fails, naming the path and the way to go on anyway (the
 * FE holding every back-end: at scale, thousands of connections). */
ITEST(missing_commnode_program_fails_the_start)
{
    tbon_rank_t be[32];
    size_t nbe;
    const char *topo = it_topo_shape("2x8", be, 32, &nbe);
    tbon_fe_options_t o = { .commnode_path = "/nonexistent/dir/tbon_commnode",
                            .startup_timeout_ms = START_MS };
    expect_failure(topo, it_be_path(), NULL, &o, TBON_ELAUNCH, (const tbon_rank_t[]){ 1, 2 },
                   2, "localhost", "/nonexistent/dir/tbon_commnode");
    tbon_error_t err = { 0, "" };
    CHECK(tbon_fe_create(topo, it_be_path(), NULL, &o, &err) == NULL);
    CHECK(strstr(err.msg, "every commnode (2) failed to start") != NULL);
    CHECK(strstr(err.msg, "allow_flat") != NULL);
    CHECK_UINT(it_left_after_reap(), 0);
}

/* ... unless asked to go on (allow_flat, or TBON_ALLOW_FLAT=1): the FE
 * launches every back-end itself, and the tree starts flat. */
ITEST(missing_commnode_program_starts_a_flat_tree_if_allowed)
{
    tbon_rank_t be[32];
    size_t nbe;
    const char *topo = it_topo_shape("2x8", be, 32, &nbe);
    tbon_fe_options_t o = { .commnode_path = "/nonexistent/dir/tbon_commnode",
                            .startup_timeout_ms = START_MS };
    setenv("TBON_ALLOW_FLAT", "1", 1);
    tbon_error_t err = { 0, "" };
    tbon_net_t *net = tbon_fe_create(topo, it_be_path(), NULL, &o, &err);
    unsetenv("TBON_ALLOW_FLAT");
    if (!net) {
        th_fail(__FILE__, __LINE__, "tbon_fe_create: %s", err.msg);
        return;
    }
    tbon_event_t ev;
    size_t nfailed = 0;
    while (tbon_net_next_event(net, &ev, 0) == 0 && ev.type == TBON_EV_NODE_FAILED)
        nfailed++;
    CHECK_UINT(nfailed, 2);
    tbon_rank_t got[8];
    CHECK_INT(tbon_fe_missing(net, got, 8), 2);
    CHECK_UINT(got[0], 1);
    CHECK_UINT(got[1], 2);
    CHECK_UINT(tbon_net_num_backends(net), nbe);
    tbon_stream_t *s = it_stream(net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    CHECK_INT(it_sum_wave(s, 1, be, nbe), 0);
    CHECK(wait_stable(net) >= 2);
    tbon_view_check_t c;
    CHECK_INT(tbon_fe_check_views(net, &c, IT_RECV_MS), 0);
    CHECK_UINT(c.nodes, 1 + nbe);
    it_stop(&(it_tree_t){ .net = net });
}

/* Every back-end fails: no tree (of no use), a clear error. */
ITEST(no_backend_left_fails)
{
    tbon_rank_t be[8];
    size_t n;
    const char *topo = it_topo_shape("2x2", be, 8, &n);
    const char *argv[] = { "--die-at-start", NULL };
    tbon_fe_options_t o = { .startup_timeout_ms = START_MS };
    expect_failure(topo, it_be_path(), argv, &o, TBON_ELAUNCH, be, n, "localhost",
                   "no back-end could be started (4 nodes left out)");
}

/* Nothing can be launched at all (neither program exists). */
ITEST(nothing_launched_fails)
{
    tbon_rank_t be[8];
    size_t n;
    const char *topo = it_topo_shape("2x2", be, 8, &n);
    tbon_fe_options_t o = { .commnode_path = "/nonexistent/dir/tbon_commnode",
                            .startup_timeout_ms = START_MS };
    expect_failure(topo, "/nonexistent/dir/tbon_nope", NULL, &o, TBON_ELAUNCH,
                   (const tbon_rank_t[]){ 1, 2, 3, 4, 5, 6 }, 6, "localhost",
                   "no back-end could be started (6 nodes left out)");
}
