/* test_fims.c - tbon_fims (tests/fims/) on real trees: the integer union
 * without failures, the tool's argument checks, and the failure scenarios of
 * issue 4 (seed 003 VI).
 *
 * Each case runs build/bin/tbon_fims as a child with its own watchdog
 * (--timeout) and waits for it with a bound of its own; the tool's output is
 * shown when a case fails.
 */
#include "itest.h"

#define PROG_VERDICT_PASS "tbon_fims: PASS"

/* The tool, from this build. */
static const char *fims_path(void)
{
    static char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/bin/tbon_fims", it_build_dir());
    return p;
}

struct run {
    int   status;          /* exit status, or -1 if killed at our bound */
    char *out, *err;       /* its stdout and stderr */
};

/* Start tbon_fims with args (NULL-terminated, without argv[0]), its stdout
 * and stderr into th_tmpdir()/fims.out and fims.err. Returns its pid. */
static pid_t fims_start(const char *const *args)
{
    char outp[700], errp[700];
    snprintf(outp, sizeof outp, "%s/fims.out", th_tmpdir());
    snprintf(errp, sizeof errp, "%s/fims.err", th_tmpdir());
    const char *argv[40];
    size_t n = 0;
    argv[n++] = fims_path();
    for (size_t i = 0; args[i] && n < 39; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0)
            _exit(127);
        dup2(o, 1);
        dup2(e, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Wait for the tbon_fims of fims_start at most bound_s seconds, then kill
 * it; its exit status and output go to r. */
static void fims_wait(struct run *r, pid_t pid, int bound_s)
{
    char outp[700], errp[700];
    snprintf(outp, sizeof outp, "%s/fims.out", th_tmpdir());
    snprintf(errp, sizeof errp, "%s/fims.err", th_tmpdir());
    r->status = -1;
    int64_t deadline = it_now_ms() + (int64_t)bound_s * 1000;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        if (it_now_ms() >= deadline) {
            th_fail(__FILE__, __LINE__, "tbon_fims still running after %d s; killed", bound_s);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        it_sleep_ms(50);
    }
    r->out = th_read_file(outp);
    r->err = th_read_file(errp);
}

/* Run tbon_fims with args; wait at most bound_s seconds, then kill it. */
static void fims_run(struct run *r, const char *const *args, int bound_s)
{
    fims_wait(r, fims_start(args), bound_s);
}

static void fims_show(const struct run *r)
{
    fprintf(stderr, "    --- tbon_fims exit %d; stdout:\n%s    --- stderr:\n%s", r->status,
            r->out ? r->out : "", r->err ? r->err : "");
}

static void fims_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

/* Run a scenario on a tree of shape: duration seconds with schedule (NULL:
 * none). It must pass (exit 0, "PASS" verdict); with want_recovery, the CSV
 * must hold at least one recovered orphan. */
static void scenario(const char *shape, int duration, const char *schedule, int want_recovery)
{
    tbon_rank_t be[IT_MAX_BE];
    size_t nbe;
    const char *topo = it_topo_shape(shape, be, IT_MAX_BE, &nbe);
    REQUIRE(topo);
    char dur[16], tmo[16], csv[700], dir[700];
    snprintf(dur, sizeof dur, "%d", duration);
    /* The tool's own watchdog first; then ours, then the harness's alarm. */
    int tool_s = duration + (IT_SLOW ? 150 : 90);
    snprintf(tmo, sizeof tmo, "%d", tool_s);
    alarm((unsigned)tool_s + 60);
    snprintf(csv, sizeof csv, "%s/recovery.csv", th_tmpdir());
    snprintf(dir, sizeof dir, "%s/values", th_tmpdir());
    const char *args[] = { "-t", topo, "--duration", dur, "--timeout", tmo, "--csv", csv,
                           "--dir", dir, schedule ? "--schedule" : NULL, schedule, NULL };
    struct run r;
    fims_run(&r, args, tool_s + 30);
    int ok = r.status == 0 && r.out && strstr(r.out, PROG_VERDICT_PASS);
    if (!ok)
        th_fail(__FILE__, __LINE__, "tbon_fims on %s, schedule %s: exit %d, no PASS verdict",
                shape, schedule ? schedule : "(none)", r.status);
    /* every element checked against its sender's file: in its result's coverage */
    const char *cv = r.out ? strstr(r.out, "tbon_fims: coverage: ") : NULL;
    size_t nres = 0, nel = 0, nbad = 1;
    if (!cv || sscanf(cv, "tbon_fims: coverage: %zu results, %zu elements each checked against "
                      "its sender's file: %zu not covered", &nres, &nel, &nbad) != 3 ||
        nres == 0 || nel == 0 || nbad != 0)
        th_fail(__FILE__, __LINE__, "tbon_fims on %s: coverage %zu results, %zu elements, %zu "
                "not covered", shape, nres, nel, nbad);
    char *rows = th_read_file(csv);
    CHECK(rows && strncmp(rows, "injection,victim,orphan,adopter,", 32) == 0);
    if (want_recovery && rows && !strchr(strchr(rows, '\n') ? strchr(rows, '\n') + 1 : "", ','))
        th_fail(__FILE__, __LINE__, "%s: no orphan recovery reported in %s", shape, csv);
    if (th_failures)
        fims_show(&r);
    free(rows);
    fims_free(&r);
}


/* ---- today: no failures ---- */

/* 4x4 for 3 s without a kill: the front-end's set is exactly the union of
 * what the 16 back-ends sent, nothing is new twice, nothing is left. */
ITEST_LONG(fims_no_kills_4x4)
{
    scenario("4x4", 3, NULL, 0);
}

/* Bad arguments: exit 2 with a message that names what is wrong; --help
 * exits 0; nothing is started. */
ITEST(fims_bad_arguments)
{
    tbon_rank_t be[IT_MAX_BE];
    size_t nbe;
    const char *topo = it_topo_shape("2x2", be, IT_MAX_BE, &nbe);
    REQUIRE(topo);
    static const struct {
        const char *args[8];
        const char *says;
    } cases[] = {
        { { "--duration", "3", NULL }, "-t TOPOLOGY is required" },
        { { "-t", NULL }, "-t needs a value" },
        { { "--bogus", NULL }, "unknown option \"--bogus\"" },
        { { "-t", "T", "--rate", "fast", NULL }, "--rate: expected a positive number" },
        { { "-t", "T", "--schedule", "2", NULL }, "expected T:KIND" },
        { { "-t", "T", "--schedule", "1:explode", NULL }, "unknown kind \"explode\"" },
        { { "-t", "T", "--schedule", "1:several=0", NULL }, "several=K needs K" },
        { { "-t", "T", "--duration", "5", "--schedule", "7:one", NULL },
          "7 s is not before the end of the run" },
        { { "-t", "T", "--schedule", "x:one", NULL }, "the time \"x\"" },
        { { "-t", "T", "--seed", "-3", NULL }, "--seed: expected an unsigned integer" },
        { { "-t", "/nonexistent/t.top", NULL }, "/nonexistent/t.top" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[10];
        size_t k = 0;
        for (; cases[i].args[k]; k++)
            args[k] = strcmp(cases[i].args[k], "T") == 0 ? topo : cases[i].args[k];
        args[k] = NULL;
        struct run r;
        fims_run(&r, args, 30);
        if (r.status != 2 || !r.err || !strstr(r.err, cases[i].says)) {
            th_fail(__FILE__, __LINE__, "case %zu: exit %d, stderr without \"%s\"", i,
                    r.status, cases[i].says);
            fims_show(&r);
        }
        fims_free(&r);
    }
    const char *help[] = { "--help", NULL };
    struct run r;
    fims_run(&r, help, 30);
    CHECK_INT(r.status, 0);
    CHECK(r.out && strstr(r.out, "--schedule SPEC") && strstr(r.out, "every=P"));
    fims_free(&r);
}

/* ---- failures ---- */

/* One random commnode of 4x4x4 killed at 1 s. */
ITEST(fims_single_kill)
{
    scenario("4x4x4", 4, "1:one", 1);
}

/* Three commnodes of 4x4x4 at once. */
ITEST_LONG(fims_several_at_once)
{
    scenario("4x4x4", 4, "1:several=3", 1);
}

/* A child of the front-end (its subtree holds 16 back-ends). */
ITEST_LONG(fims_depth1)
{
    scenario("4x4x4", 4, "1:depth1", 1);
}

/* A commnode, then the likely adopter of its first orphan while it adopts. */
ITEST_LONG(fims_adopter_while_adopting)
{
    scenario("4x4x4", 5, "1:adopter", 1);
}

/* A commnode and its parent at once: two levels of orphans. */
ITEST_LONG(fims_node_and_parent)
{
    scenario("4x4x4", 5, "1:parent", 1);
}

/* Issue 4: 8x8 with a failure every 2 s for 20 s (the 9th finds no
 * commnode left: the tree is flat by then). */
ITEST_LONG(fims_8x8_every_2s)
{
    scenario("8x8", 20, "2:every=2", 1);
}

/* 8x8, four commnodes killed (one, two at once, a child of the FE): each
 * result's coverage holds the sender of every element it brought, as the
 * back-ends' own files say (issue 31). */
ITEST_LONG(fims_8x8_four_kills_coverage)
{
    scenario("8x8", 8, "2:one,3:several=2,5:depth1", 1);
}

/* ---- other hosts (issue 16) ---- */

/* The FE on localhost, commnodes and back-ends also on two made-up hosts
 * reached through the stand-in remote shell (tests/integration/rsh-local):
 * the victims there are found and killed by the tool's agent on that host,
 * which it started through that shell ($TBON_RSH), as it would over ssh.
 * The made-up hosts are addresses of TEST-NET-2 and -3 (RFC 5737; this
 * machine may have one of TEST-NET-1, as here): no resolver is
 * asked (a name that does not resolve may take seconds to fail), and they
 * are not this machine's, so every process there goes through rsh-local. */
#define HOST_A "198.51.100.1"
#define HOST_B "203.0.113.1"
ITEST_LONG(fims_remote_kills)
{
    const char *rsh = it_src_path("tests/integration/rsh-local");
    char rshp[PATH_MAX + 256], log[700];
    snprintf(rshp, sizeof rshp, "%s", rsh);
    REQUIRE(access(rshp, X_OK) == 0);
    snprintf(log, sizeof log, "%s/rsh.log", th_tmpdir());
    setenv("TBON_RSH", rshp, 1);
    setenv("TBON_RSH_LOG", log, 1);
    /* ranks 1 A:0, 2 B:0, 3 localhost:1, 4 A:1 are the commnodes */
    const char *topo = th_write_file("hosts.top",
        "localhost:0 => " HOST_A ":0 " HOST_B ":0 localhost:1 " HOST_A ":1 ;\n"
        HOST_A ":0 => " HOST_B ":1 localhost:2 " HOST_A ":2 " HOST_B ":2 ;\n"
        HOST_B ":0 => localhost:3 " HOST_A ":3 " HOST_B ":3 localhost:4 ;\n"
        "localhost:1 => " HOST_A ":4 " HOST_B ":4 localhost:5 " HOST_A ":5 ;\n"
        HOST_A ":1 => " HOST_B ":5 localhost:6 " HOST_A ":6 " HOST_B ":6 ;\n");
    int tool_s = IT_SLOW ? 150 : 90;
    char tmo[16];
    snprintf(tmo, sizeof tmo, "%d", tool_s);
    alarm((unsigned)tool_s + 60);
    /* Every commnode in turn: three of the four live on the made-up hosts. */
    const char *args[] = { "-t", topo, "--duration", "5", "--timeout", tmo, "--seed", "7",
                           "--schedule", "1:one,2:one,3:one,4:one", NULL };
    struct run r;
    fims_run(&r, args, tool_s + 30);
    unsetenv("TBON_RSH");
    unsetenv("TBON_RSH_LOG");
    int ok = r.status == 0 && r.out && strstr(r.out, PROG_VERDICT_PASS);
    if (!ok)
        th_fail(__FILE__, __LINE__, "tbon_fims over made-up hosts: exit %d, no PASS verdict",
                r.status);
    /* 4 kills, 3 of them on other hosts, and the agents named their pids. */
    CHECK(r.out && strstr(r.out, "4 kills (3 on other hosts), each reported failed"));
    CHECK(r.out && strstr(r.out, "on " HOST_A " (pid ") && strstr(r.out, "on " HOST_B " (pid "));
    CHECK(r.out && strstr(r.out, "no process left on 3 hosts"));
    /* Every orphan adopted, none of the living taken for failed: neither a
     * back-end whose stderr (a pipe the remote shell gave it from its killed
     * parent) is gone, nor one whose first candidates answer no connect (the
     * made-up hosts' addresses lead nowhere, as a host that is down). */
    CHECK(r.out && !strstr(r.out, "never reported adopted"));
    CHECK(r.out && !strstr(r.out, "for nodes this run did not kill"));
    /* The agents went through the remote shell: one per made-up host. */
    char *hl = th_read_file(log);
    CHECK(hl && strstr(hl, HOST_A "\n") && strstr(hl, HOST_B "\n") && !strstr(hl, "localhost"));
    free(hl);
    if (th_failures)
        fims_show(&r);
    fims_free(&r);
}

/* A schedule that finds nothing to kill (a tree without commnodes) must
 * not pass as a run "with no kills": it says so and fails. */
ITEST_LONG(fims_schedule_without_kills_fails)
{
    tbon_rank_t be[IT_MAX_BE];
    size_t nbe;
    const char *topo = it_topo_shape("4", be, IT_MAX_BE, &nbe);
    REQUIRE(topo);
    alarm(120);
    const char *args[] = { "-t", topo, "--duration", "2", "--timeout", "60", "--schedule",
                           "0.5:every=0.5", NULL };
    struct run r;
    fims_run(&r, args, 90);
    CHECK_INT(r.status, 1);
    CHECK(r.out && strstr(r.out, "tbon_fims: FAIL: ") &&
          strstr(r.out, "the schedule asked for 3 injections and no process was killed"));
    CHECK(r.out && !strstr(r.out, PROG_VERDICT_PASS));
    if (th_failures)
        fims_show(&r);
    fims_free(&r);
}

/* A back-end killed with SIGKILL in the middle of the run (by the test, not
 * by the tool): the tool prints its failure when the event comes, counts
 * what it sent and did not arrive as lost with it (or says nothing was
 * lost), and passes: every value of the live back-ends arrived. */
ITEST_LONG(fims_backend_failure_is_loss_not_missing)
{
    tbon_rank_t be[IT_MAX_BE];
    size_t nbe;
    const char *topo = it_topo_shape("2x2", be, IT_MAX_BE, &nbe);
    REQUIRE(topo && nbe == 4);
    alarm(150);
    char dir[700], file[800];
    snprintf(dir, sizeof dir, "%s/values", th_tmpdir());
    snprintf(file, sizeof file, "%s/be-%u.txt", dir, (unsigned)be[1]);
    const char *args[] = { "-t", topo, "--duration", "4", "--rate", "50", "--timeout", "90",
                           "--dir", dir, NULL };
    pid_t fims = fims_start(args);
    /* Once it has sent for a while (50 packets of 4 values: 1 s). */
    int64_t end = it_now_ms() + 30000;
    char *text = NULL;
    size_t lines = 0;
    while (it_now_ms() < end) {
        free(text);
        text = th_read_file(file);
        lines = 0;
        for (const char *c = text; c && *c; c++)
            lines += *c == '\n';
        if (lines >= 200)
            break;
        it_sleep_ms(20);
    }
    free(text);
    pid_t victim = it_pid_of("tbon_fims", be[1]);
    if (lines < 200 || !victim)
        th_fail(__FILE__, __LINE__, "back-end %u: %zu values sent, pid %d", (unsigned)be[1],
                lines, (int)victim);
    else
        kill(victim, SIGKILL);
    struct run r;
    fims_wait(&r, fims, 120);
    char said[160], counted[160];
    snprintf(said, sizeof said, "back-end %u on localhost failed (not killed by this run)",
             (unsigned)be[1]);
    snprintf(counted, sizeof counted, "  back-end %u on localhost failed: sent ", (unsigned)be[1]);
    CHECK_INT(r.status, 0);
    CHECK(r.out && strstr(r.out, said) && strstr(r.out, counted));
    CHECK(r.out && strstr(r.out, "tbon_fims: PASS: ") &&
          strstr(r.out, "output == union of the live back-ends' inputs, "));
    CHECK(r.out && (strstr(r.out, "lost with failed back-end ") ||
                    strstr(r.out, "nothing lost with the 1 failed back-end")));
    CHECK(r.out && !strstr(r.out, "missing at the front-end"));
    if (th_failures)
        fims_show(&r);
    fims_free(&r);
}
