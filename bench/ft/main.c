/* main.c - bench_ft: fault tolerance through the public API: recovery
 * latency against the victim's fan-out (seed 003, VI-C, Figure 5), the
 * throughput of a streaming union with fault tolerance on and off, the
 * perturbation of a running computation by failures (VI-D, Figure 7), and
 * membership. One file per benchmark (ft.h lists them).
 *
 * Usage: bench_ft [--recovery] [--throughput] [--reps N]   (default: both)
 *        bench_ft --perturbation [--period S] [--rounds K] [--csv FILE] [--svg FILE]
 *        bench_ft --figure7 [--victims K] [--period S] [--csv FILE]
 *        bench_ft --be ...          (a back-end; started by the tree)
 *
 * Every tree is started with tbon_fe_create, this program at every leaf. The
 * processes of a run carry BENCH_FT_SESSION=<FE pid> in their environment: a
 * victim is found in /proc by that and "--tbon-rank R" on its command line; on
 * any failure (or the watchdog) every process of the run is killed, and after
 * each tbon_net_destroy none may be left. Every result is checked (each
 * union wave complete, each element once, each sum exact or a strict subset);
 * a check that fails ends the program with status 1 and no rows.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "ft.h"
#include "lib/bench.h"
#include "lib/watchdog.h"

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [--recovery] [--throughput] [--membership] [--link] [--hops] [--fanout F]\n"
"                [--reps N]\n"
"       " PROG " --recovery --fanout F --with-sum [--reps N]\n"
"       " PROG " --perturbation [--period S] [--rounds K] [--csv FILE] [--svg FILE]\n"
"       " PROG " --figure7 [--victims K] [--period S] [--csv FILE]\n"
"\n"
"Fault-tolerance benchmarks; Markdown rows on stdout (bench/run.sh collects them).\n"
"  --recovery      seed 003 Figure 5: kill -9 a commnode of fan-out 16, 32, 64\n"
"                  and 128 beside 16 possible adopters; recovery latencies\n"
"  --throughput    a streaming union on 8x8, fault tolerance on vs off, after the\n"
"                  same with both off (the A/A control); 16 blocks of fresh trees\n"
"  --membership    trees of 64, 256 and 1,024 nodes: kill -9 of back-ends and\n"
"                  commnodes to the FE's NODE_FAILED and VIEW_STABLE events; the\n"
"                  idle traffic per node with and without heartbeats\n"
"  --link          the streaming union on 8x8 under link faults (one bit flipped per\n"
"                  10,000 frames, one reset per second) beside the same without\n"
"  --hops          seed 001 Figure 3 on 8x8x16 (1,024 back-ends): hops of unicast,\n"
"                  multicast and broadcast from back-ends, with 0, 1 and 2 dead\n"
"                  commnodes, beside the same relayed by the FE\n"
"  --fanout F      --recovery at that fan-out only (16, 32, 64 or 128)\n"
"  --with-sum      --recovery with an exact sum stream beside the union, waves\n"
"                  sent back to back through the kill, each checked\n"
"  --reps N        repetitions of each recovery (default 5)\n"
"  --exact-off     every tree with tbon_fe_options_t.exact_off (streams not exact)\n"
"  --perturbation  seed 003 Figure 7: waves/s on 32x32 while %d commnodes are\n"
"                  killed every --period S (default 10) seconds, --rounds K\n"
"                  (default 4) times; --csv and --svg write the trace and its plot\n"
"  --figure7       seed 003 Figure 7 as the seed ran it: a wait-for-all union on\n"
"                  32x32, each back-end a new integer at 10 Hz, --victims K\n"
"                  (default 4) commnodes killed at 1, 2, 3 and 4 times --period S\n"
"                  (default 30); throughput over the last 10 output packets; every\n"
"                  integer sent checked at the FE; --csv writes the trace\n"
"With no option: --recovery --throughput --membership. With BENCH_FT_DEBUG set, --recovery\n"
"prints the time of each orphan's ADOPTED event to stderr.\n", PT_VICTIMS);
}

/* The parts asked for and their options. */
struct args {
    int do_rec, do_tp, do_pt, do_mb, do_lk, do_f7, do_hops, reps;
    int rounds, victims, period_set;
    double period;
    const char *csv, *svg;
};

/* The options into *o (and rec_only, rec_with_sum, start_exact_off).
 * Returns -1 to go on, or the exit status: 0 after --help, 2 for a bad
 * option (usage printed). */
static int parse_args(int argc, char **argv, struct args *o)
{
    *o = (struct args){ .reps = 5, .rounds = 4, .victims = 4, .period = 10 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--recovery") == 0)
            o->do_rec = 1;
        else if (strcmp(a, "--throughput") == 0)
            o->do_tp = 1;
        else if (strcmp(a, "--perturbation") == 0)
            o->do_pt = 1;
        else if (strcmp(a, "--figure7") == 0)
            o->do_f7 = 1;
        else if (strcmp(a, "--victims") == 0 && v && (o->victims = atoi(v)) >= 1 &&
                 o->victims <= PT_VICTIMS)
            i++;
        else if (strcmp(a, "--membership") == 0)
            o->do_mb = 1;
        else if (strcmp(a, "--link") == 0)
            o->do_lk = 1;
        else if (strcmp(a, "--hops") == 0)
            o->do_hops = 1;
        else if (strcmp(a, "--exact-off") == 0)
            start_exact_off = 1;
        else if (strcmp(a, "--with-sum") == 0)
            rec_with_sum = 1, o->do_rec = 1;
        else if (strcmp(a, "--fanout") == 0 && v && valid_fanout(atoi(v)))
            rec_only = (uint32_t)atoi(v), o->do_rec = 1, i++;
        else if (strcmp(a, "--reps") == 0 && v && (o->reps = atoi(v)) >= 1 && o->reps <= 15)
            i++;
        else if (strcmp(a, "--rounds") == 0 && v && (o->rounds = atoi(v)) >= 1 &&
                 o->rounds <= PT_MAX_ROUNDS && o->rounds * PT_VICTIMS < 32)
            i++;
        else if (strcmp(a, "--period") == 0 && v && (o->period = atof(v)) >= 2 &&
                 o->period <= 120)
            i++, o->period_set = 1;
        else if (strcmp(a, "--csv") == 0 && v)
            o->csv = argv[++i];
        else if (strcmp(a, "--svg") == 0 && v)
            o->svg = argv[++i];
        else {
            usage(strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 ? stdout : stderr);
            if (strcmp(a, "--help") != 0 && strcmp(a, "-h") != 0)
                fprintf(stderr, PROG ": bad option or value: %s%s%s\n", a, v ? " " : "",
                        v ? v : "");
            return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 ? 0 : 2;
        }
    }
    return -1;
}

/* The run's set-up: limits, this program's path, the session entry its
 * trees inherit, the log levels and handler, the watchdog, the directory
 * of the topologies. */
static void setup(void)
{
    set_nofile_max();
    ssize_t l = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (l <= 0)
        bench_die(PROG, "readlink /proc/self/exe");
    self_exe[l] = '\0';
    signal(SIGPIPE, SIG_IGN);
    /* The back-ends of a killed commnode become our children: we reap them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    snprintf(session_kv, sizeof session_kv, SESSION_ENV "=%ld", (long)getpid());
    if (setenv(SESSION_ENV, session_kv + strlen(SESSION_ENV "="), 1) != 0)
        bench_die(PROG, "setenv");
    /* Orphans warn when they lose their parent: expected here, so the tree
     * logs errors only unless $TBON_LOG says otherwise. The FE takes its
     * recovery lines (info) through the handler either way. */
    fe.user_level = TBON_LOG_WARN;
    const char *lv = getenv("TBON_LOG");
    if (!lv || !*lv) {
        setenv("TBON_LOG", "error", 1);
        fe.user_level = TBON_LOG_ERROR;
    } else {
        fe.user_level = strcmp(lv, "debug") == 0 ? TBON_LOG_DEBUG : strcmp(lv, "info") == 0 ?
                        TBON_LOG_INFO : strcmp(lv, "error") == 0 ? TBON_LOG_ERROR : TBON_LOG_WARN;
    }
    tbon_log_set_handler(log_handler, NULL);
    tbon_log_set_level(fe.user_level > TBON_LOG_INFO ? fe.user_level : TBON_LOG_INFO);
    cond_init_mono(&fe.cv);
    if (tb_wd_start(wd_fire) != 0)
        bench_die(PROG, "pthread_create (watchdog)");

    snprintf(tmpdir, sizeof tmpdir, "/tmp/bench_ft.XXXXXX");
    if (!mkdtemp(tmpdir))
        bench_die(PROG, "mkdtemp");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--be") == 0)
            return be_main(argc, argv);

    struct args o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.do_f7 && (o.do_rec || o.do_tp || o.do_pt || o.do_mb || o.do_lk)) {
        fprintf(stderr, PROG ": --figure7 runs alone\n");
        return 2;
    }
    if (!o.do_rec && !o.do_tp && !o.do_pt && !o.do_mb && !o.do_lk && !o.do_f7 && !o.do_hops)
        o.do_rec = o.do_tp = o.do_mb = 1;

    setup();
    if (o.do_rec)
        recovery_run(o.reps);
    if (o.do_tp)
        throughput_run();
    if (o.do_lk)
        link_run();
    if (o.do_mb)
        membership_run();
    if (o.do_hops)
        hops_run();
    /* The rows of a part once all of its runs have passed. */
    if (o.do_rec)
        recovery_rows(o.reps);
    if (o.do_tp)
        throughput_rows();
    if (o.do_lk)
        link_rows();
    if (o.do_mb)
        membership_rows();
    if (o.do_hops)
        hops_rows();
    fflush(stdout);
    if (o.do_pt)
        perturbation_run(o.period, o.rounds, o.csv, o.svg);
    if (o.do_f7)
        figure7_run(o.victims, o.period_set ? o.period : 30, o.csv);
    remove_tmpdir();
    fflush(stdout);
    free(fe.rec);
    return 0;
}
