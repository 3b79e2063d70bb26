/* test_frontend.c - tbon_frontend --json: every line a JSON object (read
 * back with jansson) with the keys in the documented order and the exact
 * values of each kind of answer; the readable lines say the same. */
#include "itest.h"

#include <fcntl.h>
#include <signal.h>
#include <jansson.h>
#include <sys/wait.h>

/* Start tbon_frontend on the tree of topology text topo with args, its
 * stdout and stderr to fe.out and fe.err in the case's directory; its pid
 * (or -1). */
static pid_t spawn_frontend_on(const char *topo_text, const char *const *args)
{
    char fe[PATH_MAX + 32], be[PATH_MAX + 32], outf[600], errf[600];
    snprintf(fe, sizeof fe, "%s/bin/tbon_frontend", it_build_dir());
    snprintf(be, sizeof be, "%s/bin/tbon_example_be", it_build_dir());
    snprintf(outf, sizeof outf, "%s/fe.out", th_tmpdir());
    snprintf(errf, sizeof errf, "%s/fe.err", th_tmpdir());
    const char *topo = th_write_file("tree.top", topo_text);
    const char *argv[24] = { fe, "-t", topo, "-b", be };
    size_t k = 5;
    for (size_t i = 0; args[i] && k + 1 < sizeof argv / sizeof *argv; i++)
        argv[k++] = args[i];
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int o = open(outf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0)
            _exit(126);
        dup2(o, 1);
        dup2(e, 2);
        execv(fe, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Wait for the tbon_frontend of spawn_frontend_on: its exit status, and its
 * stdout in *out (malloc'd); a failure recorded unless it exited 0. */
static int wait_frontend(pid_t pid, char **out)
{
    char outf[600], errf[600];
    snprintf(outf, sizeof outf, "%s/fe.out", th_tmpdir());
    snprintf(errf, sizeof errf, "%s/fe.err", th_tmpdir());
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    *out = th_read_file(outf);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char *err = th_read_file(errf);
        th_fail(__FILE__, __LINE__, "tbon_frontend exit status 0x%x: %s", st, err ? err : "");
        free(err);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Run tbon_frontend on the tree of topology text topo with args; its exit
 * status, and its stdout in *out (malloc'd). */
static int run_frontend_on(const char *topo_text, const char *const *args, char **out)
{
    return wait_frontend(spawn_frontend_on(topo_text, args), out);
}

/* The same on a 2-back-end tree (ranks 1 and 2 under the FE). */
static int run_frontend(const char *const *args, char **out)
{
    return run_frontend_on("localhost:0 => localhost:1 localhost:2 ;\n", args, out);
}

/* The lines of text as parsed JSON objects, at most cap; how many. Each
 * line must be one object with exactly the keys in want_keys, in order. */
static size_t parse_lines(char *text, json_t **v, size_t cap, const char *const *want_keys)
{
    size_t n = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l;
         l = strtok_r(NULL, "\n", &save)) {
        json_error_t je;
        json_t *j = json_loads(l, 0, &je);
        if (!j || !json_is_object(j)) {
            th_fail(__FILE__, __LINE__, "not a JSON object: %s (%s)", l, je.text);
            json_decref(j);
            continue;
        }
        size_t k = 0;
        const char *key;
        json_t *val;
        json_object_foreach(j, key, val) {
            if (!want_keys[k] || strcmp(key, want_keys[k]) != 0)
                th_fail(__FILE__, __LINE__, "key %zu is \"%s\", expected \"%s\": %s", k, key,
                        want_keys[k] ? want_keys[k] : "(none)", l);
            if (want_keys[k])
                k++;
        }
        if (want_keys[k])
            th_fail(__FILE__, __LINE__, "no key \"%s\": %s", want_keys[k], l);
        if (n < cap)
            v[n++] = j;
        else
            json_decref(j);
    }
    return n;
}

static const char *const RESULT_KEYS[] = { "wave", "stream", "source", "format", "values",
                                           NULL };

/* The waves of one kind under the sum filter: tbon_example_be answers
 * rank + wave (int), (rank + wave) / 4 (double), {rank, wave} (array); a
 * kind of the user's own goes to the back-ends as it is (tbon_example_be
 * answers one it does not know as int). */
ITEST(json_results_of_each_kind)
{
    static const struct {
        const char *kind, *format;
    } kinds[] = { { "int", "%ld" }, { "double", "%lf" }, { "array", "%ald" },
                  { "histogram-of-my-own", "%ld" } };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const char *args[] = { "-w", "3", "-k", kinds[i].kind, "--json", NULL };
        char *out = NULL;
        if (run_frontend(args, &out) != 0 || !out) {
            free(out);
            return;
        }
        json_t *v[8];
        size_t n = parse_lines(out, v, 8, RESULT_KEYS);
        CHECK_INT(n, 3);
        for (size_t w = 0; w < n; w++) {
            CHECK_INT(json_integer_value(json_object_get(v[w], "wave")), (long long)w);
            CHECK(json_integer_value(json_object_get(v[w], "stream")) > 0);
            /* A filtered result is the front-end's (rank 0). */
            json_t *src = json_object_get(v[w], "source");
            CHECK(json_is_integer(src) && json_integer_value(src) == 0);
            CHECK_STR(json_string_value(json_object_get(v[w], "format")), kinds[i].format);
            json_t *vals = json_object_get(v[w], "values");
            REQUIRE(json_array_size(vals) == 1);
            json_t *x = json_array_get(vals, 0);
            if (i == 0 || i == 3) {
                CHECK(json_is_integer(x));
                CHECK_INT(json_integer_value(x), (long long)(3 + 2 * w));
            } else if (i == 1) {
                CHECK(json_is_real(x));
                CHECK(json_real_value(x) == (double)(3 + 2 * w) / 4);
            } else {
                REQUIRE(json_array_size(x) == 2);
                CHECK_INT(json_integer_value(json_array_get(x, 0)), 3);
                CHECK_INT(json_integer_value(json_array_get(x, 1)), (long long)(2 * w));
            }
            json_decref(v[w]);
        }
        free(out);
    }
}

/* The null filter: one object per back-end and wave, its source the
 * back-end; the readable form of the same run says the same numbers. */
ITEST(json_and_readable_null_filter)
{
    const char *args[] = { "-w", "2", "-f", "null", "--json", NULL };
    char *out = NULL;
    if (run_frontend(args, &out) != 0 || !out) {
        free(out);
        return;
    }
    json_t *v[8];
    size_t n = parse_lines(out, v, 8, RESULT_KEYS);
    CHECK_INT(n, 4);
    int seen[2][3] = { { 0 } };
    for (size_t i = 0; i < n; i++) {
        long long w = json_integer_value(json_object_get(v[i], "wave"));
        long long src = json_integer_value(json_object_get(v[i], "source"));
        json_t *x = json_array_get(json_object_get(v[i], "values"), 0);
        if (w >= 0 && w < 2 && src >= 1 && src <= 2) {
            seen[w][src]++;
            CHECK_INT(json_integer_value(x), src + w);
        } else {
            th_fail(__FILE__, __LINE__, "wave %lld from %lld", w, src);
        }
        json_decref(v[i]);
    }
    for (int w = 0; w < 2; w++)
        for (int r = 1; r <= 2; r++)
            CHECK_INT(seen[w][r], 1);
    free(out);

    const char *hargs[] = { "-w", "2", "-f", "null", NULL };
    if (run_frontend(hargs, &out) != 0 || !out) {
        free(out);
        return;
    }
    CHECK(strstr(out, "wave 0: back-end 1 sent 1\n"));
    CHECK(strstr(out, "wave 1: back-end 2 sent 3\n"));
    free(out);
}

/* dontwait: a wave ends after --idle ms without a result, and an answer
 * that comes later is printed under its own wave, marked late, not counted
 * in the wave under way. Back-ends 1-4 answer {rank, wave} after 3 s times
 * (rank % 4): rank 4 at once, the others after the wave's gap of 2 s. */
ITEST_LONG(late_answers_go_under_their_own_wave)
{
    const char *args[] = { "-w", "2", "-f", "concat", "-k", "array", "--sync", "dontwait",
                           "--idle", "2000", "--", "--delay", "3000", NULL };
    char *out = NULL;
    if (run_frontend_on("localhost:0 => localhost:1 localhost:2 localhost:3 localhost:4 ;\n",
                        args, &out) != 0 || !out) {
        free(out);
        return;
    }
    size_t nlate = 0, nlines = 0, counted[2] = { 0, 0 };
    for (char *save = NULL, *l = strtok_r(out, "\n", &save); l;
         l = strtok_r(NULL, "\n", &save)) {
        unsigned long w;
        int off = 0;
        nlines++;
        if (sscanf(l, "wave %lu: concat = [%n", &w, &off) != 1 || !off || w > 1) {
            th_fail(__FILE__, __LINE__, "not a result line of wave 0 or 1: %s", l);
            continue;
        }
        /* [rank, wave, rank, wave, ...]: every wave in it is the line's */
        const char *v = l + off;
        long x[16];
        size_t n = 0;
        for (char *end; n < 16 && *v && *v != ']'; v = end + (end[0] == ',')) {
            x[n++] = strtol(v, &end, 10);
            if (end == v)
                break;
            while (end[0] == ' ')
                end++;
        }
        CHECK(n >= 2 && n % 2 == 0);
        for (size_t i = 1; i < n; i += 2)
            if ((unsigned long)x[i] != w)
                th_fail(__FILE__, __LINE__, "an answer of wave %ld under wave %lu: %s", x[i],
                        w, l);
        unsigned long during;
        const char *late = strstr(l, "(late: came during wave ");
        if (late) {
            nlate++;
            CHECK(sscanf(late, "(late: came during wave %lu)", &during) == 1 && during > w);
        } else {
            const char *r = strstr(l, "(result ");
            size_t k;
            CHECK(r && sscanf(r, "(result %zu of the wave)", &k) == 1 && k == ++counted[w]);
        }
    }
    CHECK(counted[0] >= 1 && counted[1] >= 1);
    CHECK(nlate >= 1);      /* rank 1's answer to wave 0 comes during wave 1 */
    free(out);
}

/* --ping: the route from the FE down to a back-end of a two-level tree
 * (FE, commnode 2, back-end 6) and a round trip for each hop, readable and
 * as one JSON line; a commnode answers too. */
ITEST(ping_shows_the_route_and_each_hop)
{
    const char *topo = "localhost:0 => localhost:1 localhost:2 ;\n"
                       "localhost:1 => localhost:3 localhost:4 ;\n"
                       "localhost:2 => localhost:5 localhost:6 ;\n";
    char *out = NULL;
    const char *args[] = { "--ping", "6", "--ping-count", "5", NULL };
    if (run_frontend_on(topo, args, &out) == 0 && out) {
        CHECK(strstr(out, "ping rank 6: route 0 -> 2 -> 6 (2 hops)\n") != NULL);
        double a = -1, b = -1;
        const char *h1 = strstr(out, "  hop 1: rank 2  "), *h2 = strstr(out, "  hop 2: rank 6  ");
        CHECK(h1 && sscanf(h1, "  hop 1: rank 2  %lf ms (median of 5)", &a) == 1 && a > 0);
        CHECK(h2 && sscanf(h2, "  hop 2: rank 6  %lf ms (median of 5)", &b) == 1 && b > 0);
    }
    free(out);
    out = NULL;
    const char *jargs[] = { "--ping", "1", "--json", NULL };
    if (run_frontend_on(topo, jargs, &out) == 0 && out) {
        json_error_t e;
        json_t *o = json_loads(out, 0, &e);
        json_t *hops = o ? json_object_get(o, "hops") : NULL;
        CHECK(o && json_integer_value(json_object_get(o, "ping")) == 1);
        CHECK(hops && json_array_size(hops) == 1);
        json_t *h = hops ? json_array_get(hops, 0) : NULL;
        CHECK(h && json_integer_value(json_object_get(h, "rank")) == 1 &&
              json_real_value(json_object_get(h, "rtt_ms")) > 0);
        json_decref(o);
    }
    free(out);
}

/* The status of a tree (tbon_fe_status) through a commnode's death and a
 * back-end left out of the start-up: the dead commnode failed, its children
 * adopted under another parent, the missing back-end missing, every other
 * node ok with its host and a round trip, the FE first. */
ITEST(status_through_a_commnode_kill)
{
    const char *argv[] = { "--die-at-start-ranks", "10", NULL };
    it_tree_t t;
    if (it_start(&t, "2x4", argv, NULL))        /* commnodes 1, 2; back-ends 3-10 */
        return;
    tbon_node_status_t v[16];
    CHECK_INT(tbon_fe_status(t.net, v, 16, 5000), 11);
    for (int r = 0; r < 11; r++) {
        CHECK_INT(v[r].rank, r);
        CHECK_STR(v[r].host, "localhost");
        CHECK_INT(v[r].state, r == 10 ? TBON_NODE_MISSING : TBON_NODE_OK);
        CHECK(r == 10 ? v[r].rtt_ms < 0 : v[r].rtt_ms >= 0);
    }
    CHECK_INT(v[0].role, 0);
    CHECK_INT(v[1].role, 1);
    CHECK_INT(v[3].role, 2);
    CHECK_INT(v[3].parent, 1);
    CHECK_INT(v[0].parent, TBON_RANK_NONE);
    pid_t cn = it_pid_of("tbon_commnode", 1);
    REQUIRE(cn > 0);
    kill(cn, SIGKILL);
    /* until its four children are adopted */
    int adopted = 0;
    tbon_event_t ev;
    int64_t end = it_now_ms() + IT_RECV_MS;
    while (adopted < 4 && tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) == 0)
        adopted += ev.type == TBON_EV_NODE_ADOPTED;
    CHECK_INT(adopted, 4);
    CHECK_INT(tbon_fe_status(t.net, v, 16, 5000), 11);
    CHECK_STR(tbon_node_state_name(v[1].state), "failed");
    CHECK(v[1].rtt_ms < 0);
    for (int r = 3; r <= 6; r++) {
        CHECK_STR(tbon_node_state_name(v[r].state), "adopted");
        CHECK(v[r].parent != 1 && v[r].parent != TBON_RANK_NONE);
        CHECK(v[r].rtt_ms >= 0);
        CHECK(v[r].since_s < v[7].since_s);     /* changed after the start */
    }
    for (int r = 7; r <= 9; r++)
        CHECK_STR(tbon_node_state_name(v[r].state), "ok");
    CHECK_STR(tbon_node_state_name(v[10].state), "missing");
    CHECK_INT(tbon_fe_status(t.net, NULL, 0, 0), 11);      /* the count alone */
    it_stop(&t);
}

/* Once the front-end's second result is out (the tree is up, the waves
 * run), kill -9 commnode rank; 0, or -1 if it is not there. */
static int kill_once_waves_run(tbon_rank_t rank)
{
    char outf[600];
    snprintf(outf, sizeof outf, "%s/fe.out", th_tmpdir());
    int64_t end = it_now_ms() + IT_RECV_MS;
    for (;;) {
        char *so_far = th_read_file(outf);
        int going = so_far && strstr(so_far, "\"wave\":1,");
        free(so_far);
        if (going || it_now_ms() > end)
            break;
        it_sleep_ms(10);
    }
    pid_t cn = it_pid_of("tbon_commnode", rank);
    if (cn <= 0)
        return -1;
    return kill(cn, SIGKILL);
}

/* tbon_frontend --status --json after waves during which a commnode was
 * killed: one JSON line, the commnode failed, its children adopted. */
ITEST(frontend_status_after_a_kill)
{
    const char *args[] = { "-w", "40", "--status", "--json", "--", "--delay", "15", NULL };
    pid_t fe = spawn_frontend_on("localhost:0 => localhost:1 localhost:2 ;\n"
                                 "localhost:1 => localhost:3 localhost:4 ;\n"
                                 "localhost:2 => localhost:5 localhost:6 ;\n", args);
    REQUIRE(fe > 0);
    /* once the second result is out (the tree is up, the waves run: 40 of
     * 45 ms each), kill commnode 2 */
    REQUIRE(kill_once_waves_run(2) == 0);
    char *out = NULL;
    CHECK_INT(wait_frontend(fe, &out), 0);
    REQUIRE(out);
    const char *line = strstr(out, "{\"status\":");
    json_error_t je;
    json_t *j = line ? json_loadb(line, strcspn(line, "\n"), 0, &je) : NULL;
    json_t *all = j ? json_object_get(j, "status") : NULL;
    if (!all || json_array_size(all) != 7) {
        th_fail(__FILE__, __LINE__, "no status line of 7 nodes: %s", out);
    } else {
        static const char *const want[] = { "ok", "ok", "failed", "ok", "ok", "adopted",
                                            "adopted" };
        for (size_t r = 0; r < 7; r++) {
            json_t *n = json_array_get(all, r);
            CHECK_INT(json_integer_value(json_object_get(n, "rank")), (long long)r);
            CHECK_STR(json_string_value(json_object_get(n, "state")), want[r]);
            CHECK_STR(json_string_value(json_object_get(n, "host")), "localhost");
            CHECK(json_is_number(json_object_get(n, "since_s")));
            CHECK(r == 2 ? json_is_null(json_object_get(n, "rtt_ms"))
                         : json_is_real(json_object_get(n, "rtt_ms")));
        }
    }
    json_decref(j);
    free(out);
}

/* The stream record of rank r in --perf's JSON, or NULL. */
static json_t *perf_stream_of(json_t *streams, long long r)
{
    for (size_t i = 0; i < json_array_size(streams); i++) {
        json_t *o = json_array_get(streams, i);
        if (json_integer_value(json_object_get(o, "rank")) == r)
            return o;
    }
    return NULL;
}

/* tbon_frontend --perf --json after waves during which a commnode was
 * killed: one JSON line; the dead commnode down, every other node's
 * figures there, and each back-end (its orphans too) answered each of the
 * 40 requests once, as the front-end delivered each wave once. */
ITEST(frontend_perf_after_a_kill)
{
    const char *args[] = { "-w", "40", "--perf", "--json", "--", "--delay", "15", NULL };
    pid_t fe = spawn_frontend_on("localhost:0 => localhost:1 localhost:2 ;\n"
                                 "localhost:1 => localhost:3 localhost:4 ;\n"
                                 "localhost:2 => localhost:5 localhost:6 ;\n", args);
    REQUIRE(fe > 0);
    REQUIRE(kill_once_waves_run(2) == 0);
    char *out = NULL;
    CHECK_INT(wait_frontend(fe, &out), 0);
    REQUIRE(out);
    const char *line = strstr(out, "{\"perf\":");
    json_error_t je;
    json_t *j = line ? json_loadb(line, strcspn(line, "\n"), 0, &je) : NULL;
    json_t *perf = j ? json_object_get(j, "perf") : NULL;
    json_t *nodes = json_object_get(perf, "nodes"), *streams = json_object_get(perf, "streams");
    if (!perf || json_array_size(nodes) != 7) {
        th_fail(__FILE__, __LINE__, "no perf line of 7 nodes: %s", out);
    } else {
        CHECK_INT(json_integer_value(json_object_get(perf, "answered")), 6);
        CHECK_INT(json_integer_value(json_object_get(perf, "silent")), 0);
        for (size_t r = 0; r < 7; r++) {
            json_t *n = json_array_get(nodes, r);
            CHECK_INT(json_integer_value(json_object_get(n, "rank")), (long long)r);
            CHECK_STR(json_string_value(json_object_get(n, "host")), "localhost");
            CHECK(json_is_true(json_object_get(n, "answered")) == (r != 2));
            if (r != 2)
                CHECK(json_integer_value(json_object_get(n, "rss_bytes")) > 0);
        }
        for (long long r = 3; r <= 6; r++) {
            json_t *b = perf_stream_of(streams, r);
            CHECK(b != NULL);
            CHECK_INT(json_integer_value(json_object_get(b, "down_in_packets")), 40);
            CHECK_INT(json_integer_value(json_object_get(b, "up_out_packets")), 40);
        }
        json_t *f = perf_stream_of(streams, 0);
        CHECK(f != NULL);
        CHECK_INT(json_integer_value(json_object_get(f, "up_out_packets")), 40);
        CHECK_INT(json_integer_value(json_object_get(f, "waves")), 40);
    }
    json_decref(j);
    free(out);
}

/* --perf's table: a line per node and per stream at each, the header
 * saying every node answered. */
ITEST(frontend_perf_table)
{
    const char *args[] = { "-w", "3", "--perf", NULL };
    pid_t fe = spawn_frontend_on("localhost:0 => localhost:1 localhost:2 ;\n", args);
    REQUIRE(fe > 0);
    char *out = NULL;
    CHECK_INT(wait_frontend(fe, &out), 0);
    REQUIRE(out);
    CHECK(strstr(out, "perf: 3 nodes, 3 answered, 0 alive and silent (1 round,") != NULL);
    CHECK(strstr(out, "localhost") && strstr(out, "filter ms"));
    int rows = 0;
    for (const char *l = strstr(out, "filter ms"); l && (l = strchr(l, '\n')) && l[1]; l++)
        rows++;
    CHECK_INT(rows, 3);             /* stream 1 at ranks 0, 1, 2 */
    if (rows != 3)
        fprintf(stderr, "    the front-end said: %s\n", out);
    free(out);
}
