/* tbon_stat.c - tbon_stat: sample the stack traces of many processes with a
 * tree of back-ends and merge them up the tree into one call-prefix tree whose
 * nodes carry the tasks that took each path (docs/stat.md).
 *
 * The front-end finds the tasks (-p, --pids-file, -P, -C), starts a tree
 * whose leaves are this program in back-end mode (--be), gives each back-end
 * a contiguous block of ranks, and broadcasts one request; every back-end
 * samples its tasks (st_walker), builds a 2D tree (the last sample) and a 3D
 * tree (all samples) and sends both up, where the stat_merge filter unites
 * them (stat/stat_merge.c). A task the merged tree lacks (its back-end's
 * packet died with a commnode) is asked for again; a task nobody could
 * sample shows as a named frame, never as a gap. */
#include <tbon/tbon.h>

#include "st_job.h"
#include "st_ptree.h"
#include "st_tasks.h"
#include "st_walker.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdatomic.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define PROG       "tbon_stat"
#define EXIT_RUN   1
#define EXIT_USAGE 2
#define EXIT_UNREACHED 3    /* some tasks could not be reached: their back-end
                               did not start (the rest were sampled) */
/* --jobid: the back-ends not all attached after this long: say so. */
#define SRUN_NOTE_S 30.0
#define TAG_SAMPLE (TBON_FIRST_APP_TAG)
#define TAG_RESEND (TBON_FIRST_APP_TAG + 1)
#define FMT_REQ    "%ad %aud %aud %ud %ud %ud"
#define FMT_TREES  "%auc %auc"
#define TAG_DISCOVER (TBON_FIRST_APP_TAG + 2)
/* job (0: the pids given), steps (none: all), pids, their back-ends */
#define FMT_DISCOVER "%ud %aud %ad %aud"
/* back-end, pids, ranks, sizes, steps, states (FOUND_*), an executable, a note */
#define FMT_FOUND  "%ud %ad %ad %ad %aud %aud %s %s"
#define FOUND_OK   0u
#define FOUND_GONE 1u
#define ATTACH_WAIT_S 60.0  /* --be-attach: for the front-end's attach file */
#define FLAG_THREADS 1u
#define FLAG_LINES   2u
#define FLAG_MODULES 4u
#define TASKS_PER_BE 16     /* default topology: one back-end per this many tasks, */
#define BES_PER_CPU 2       /* and at most this many per CPU of this host */
#define DEFAULT_FANOUT 8
#define RESEND_QUIET_S 0.5  /* asks again for missing tasks after this long without a result, */
#define RESEND_MAX_S 4.0    /* ... doubling up to this */

#define ST_MAX_STEPS 64

struct cli {
    const char *pids, *pids_file, *topology, *outdir;
    uint32_t jobid;          /* --jobid, 0: none */
    uint32_t steps[ST_MAX_STEPS];
    size_t nsteps;           /* --step: 0 = all */
    pid_t launcher;
    char **command;          /* -C: argv of the command to launch */
    unsigned samples, interval_ms, flags;
    double wait_s;           /* -C: before sampling */
    int quiet, keep;
};

static volatile sig_atomic_t g_stop;
/* The self-pipe of SIGINT and SIGTERM: whichever thread the signal lands on,
 * a wait of the main thread (wait_child) wakes. */
static int g_sigpipe[2] = { -1, -1 };

static void on_signal(int sig)
{
    (void)sig;
    int e = errno;
    g_stop = 1;
    if (g_sigpipe[1] >= 0) {
        ssize_t k = write(g_sigpipe[1], "", 1);     /* full: a wake-up is there already */
        (void)k;
    }
    errno = e;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Milliseconds from now to the time dl (now_s's clock), at least 0. */
static int ms_until(double dl)
{
    double ms = (dl - now_s()) * 1e3;
    return ms <= 0 ? 0 : ms >= 1e9 ? 1000000000 : (int)ms + 1;
}

/* Wait until the child pid ends, fd (if >= 0) becomes readable, the first
 * SIGINT or SIGTERM comes, or ms pass (ms < 0: no limit). The child's end
 * comes through a pidfd, so this blocks instead of looking again and again;
 * on a kernel without pidfd_open (before 5.3) it wakes every 20 ms for the
 * caller to look. Returns 1 with the wait status in *status (if not NULL)
 * once the child has ended and is reaped (or is no child of ours), else 0. */
static int wait_child(pid_t pid, int fd, int ms, int *status)
{
    int st = 0;
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == 0) {
        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        /* Negative fds are skipped: after a signal, its pipe is left out
         * (it stays readable; the waits that follow are the clean-up's). */
        struct pollfd p[3] = { { pfd, POLLIN, 0 }, { fd, POLLIN, 0 },
                               { g_stop ? -1 : g_sigpipe[0], POLLIN, 0 } };
        int cap = pfd < 0 ? 20 : g_sigpipe[0] < 0 ? 200 : -1;
        poll(p, 3, cap >= 0 && (ms < 0 || ms > cap) ? cap : ms);
        if (pfd >= 0)
            close(pfd);
        w = waitpid(pid, &st, WNOHANG);
    }
    if (w == 0 || (w < 0 && errno != ECHILD))
        return 0;
    if (status)
        *status = st;
    return 1;
}

/* --jobid's step of back-ends and attach file while they exist: a failure
 * ends the step and removes the file (the back-ends would also end once the
 * front-end is gone, but not before they noticed). */
static pid_t g_srun;
static char *g_attach;
static char *g_topo, *g_topodir;   /* a topology written to a temporary directory */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (g_attach)
        unlink(g_attach);
    if (g_topo) {
        unlink(g_topo);
        rmdir(g_topodir);
    }
    if (g_srun > 0) {
        kill(g_srun, SIGTERM);      /* srun passes it on to the step's tasks */
        waitpid(g_srun, NULL, 0);
    }
    exit(EXIT_RUN);
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [options] -p [HOST:]PID,[HOST:]PID,...\n"
"       " PROG " [options] --pids-file FILE\n"
"       " PROG " [options] -P LAUNCHER_PID\n"
"       " PROG " [options] -C COMMAND [ARGS...]\n"
"       " PROG " [options] --jobid JOB [--step S,S,...]\n"
"\n"
"Sample the stack traces of a job's processes with a tree of back-ends and\n"
"merge them into one call-prefix tree: each edge is labelled with the number\n"
"of tasks that took it and their ranks, e.g. 4:[0-2,7].\n"
"\n"
"Which tasks:\n"
"  -p TASKS           a comma-separated list of process ids; HOST:PID is a\n"
"                     process of another host (a back-end is started there\n"
"                     over $TBON_RSH, default ssh), a plain PID one of this host\n"
"  --pids-file FILE   the same, one or more per line ('#' comments)\n"
"  -P PID             the descendants of a launcher (mpirun, a shell) that run\n"
"                     the executable most of them run; for an srun (or a\n"
"                     launcher that started one), its job step's tasks on the\n"
"                     job's nodes, as with --jobid\n"
"  -C COMMAND...      launch COMMAND (the rest of the line), wait -s seconds,\n"
"                     sample its descendants (or itself), then stop it\n"
"  -s SECONDS         with -C: how long to let it run first (default 1)\n"
"  --keep             with -C: leave the command running at the end\n"
"  --jobid JOB        the tasks of a running Slurm job on all its nodes: the\n"
"                     back-ends run as one step of the job (srun --overlap\n"
"                     --jobid JOB, one task per node) and attach to the tree\n"
"                     through a file in -o's directory, which the nodes must\n"
"                     share; each finds the job's tasks on its node (scontrol\n"
"                     listpids and SLURM_JOB_ID/SLURM_STEP_ID in /proc)\n"
"  --step S,S,...     with --jobid: these steps only (default: every step but\n"
"                     the batch and extern steps)\n"
"A task is HOST:PID and a rank. The rank comes from OMPI_COMM_WORLD_RANK,\n"
"PMI_RANK, PMIX_RANK or SLURM_PROCID in its environment when every task has\n"
"one and no two share it, else from its position in the list (reported).\n"
"\n"
"Sampling:\n"
"  -n N               samples per task (default 10)\n"
"  -i MS              milliseconds between samples (default 100)\n"
"  --threads          every thread of each task (default: the main thread)\n"
"  --lines            source file:line of each frame, where known\n"
"  --modules          the shared object of each frame\n"
"  -t FILE            the tree's topology for tasks of this host (default: one\n"
"                     back-end per %d tasks, at most %d per CPU, fan-out %d);\n"
"                     tasks on other hosts get one back-end per host\n"
"\n"
"Output:\n"
"  -o DIR             results under DIR/<exe>.NNNN/ (default stat_results;\n"
"                     made with its parents when missing): <exe>.2D.dot (last\n"
"                     sample), <exe>.3D.dot (all samples), .json, .txt\n"
"                     (indented) and .classes.txt of both, .svg when\n"
"                     Graphviz's dot is installed, <exe>.tasks.txt and .json\n"
"                     (each task's number, rank, host, pid and step) and\n"
"                     <exe>.perf\n"
"  -q                 no tree on the terminal (the summary only)\n"
"  -h, --help         this text\n"
"\n"
"Targets are stopped only while sampled (ptrace interrupt, no SIGSTOP) and\n"
"always resumed, also when " PROG " is killed. A back-end that does not start\n"
"is left out: on this host the others sample its tasks; the tasks of another\n"
"host whose back-end did not start are named on stdout and stderr (\"not\n"
"reached\") and the tree of the rest is written. Exit: 0 done, 1 failure\n"
"(also: a listed process is not there, or tasks of the job were not found),\n"
"2 usage, 3 done but some tasks not reached (their back-end did not start).\n",
            TASKS_PER_BE, BES_PER_CPU, DEFAULT_FANOUT);
}

static unsigned parse_uint(const char *opt, const char *v, unsigned lo, unsigned hi)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi || v[0] == '-') {
        fprintf(stderr, PROG ": %s \"%s\": expected a whole number from %u to %u\n", opt, v,
                lo, hi);
        exit(EXIT_USAGE);
    }
    return (unsigned)x;
}

enum { OPT_PIDS_FILE = 256, OPT_THREADS, OPT_LINES, OPT_MODULES, OPT_KEEP, OPT_BE, OPT_JOBID,
       OPT_STEP };

/* --step S,S,...: step ids. */
static void parse_steps(struct cli *c, const char *v)
{
    char *copy = strdup(v), *save = NULL;
    if (!copy) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(EXIT_RUN);
    }
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (c->nsteps == ST_MAX_STEPS) {
            fprintf(stderr, PROG ": --step: at most %d steps\n", ST_MAX_STEPS);
            exit(EXIT_USAGE);
        }
        c->steps[c->nsteps++] = parse_uint("--step", tok, 0, 0xfffffff0u);
    }
    free(copy);
    if (c->nsteps == 0) {
        fprintf(stderr, PROG ": --step \"%s\": no step id\n", v);
        exit(EXIT_USAGE);
    }
}

static void parse_cli(int argc, char **argv, struct cli *c)
{
    static const struct option longs[] = {
        { "pids-file", required_argument, NULL, OPT_PIDS_FILE },
        { "threads", no_argument, NULL, OPT_THREADS },
        { "lines", no_argument, NULL, OPT_LINES },
        { "modules", no_argument, NULL, OPT_MODULES },
        { "keep", no_argument, NULL, OPT_KEEP },
        { "jobid", required_argument, NULL, OPT_JOBID },
        { "step", required_argument, NULL, OPT_STEP },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    *c = (struct cli){ .outdir = "stat_results", .samples = 10, .interval_ms = 100,
                       .wait_s = 1 };
    int o, sources = 0;
    /* "+": stop at -C's command, whose options are its own. */
    while ((o = getopt_long(argc, argv, "+p:P:Cs:n:i:t:o:qh", longs, NULL)) != -1) {
        switch (o) {
        case 'p': c->pids = optarg; sources++; break;
        case OPT_PIDS_FILE: c->pids_file = optarg; sources++; break;
        case 'P': c->launcher = (pid_t)parse_uint("-P", optarg, 1, INT_MAX); sources++; break;
        case 'C':
            sources++;
            c->command = argv + optind;
            if (!c->command[0]) {
                fprintf(stderr, PROG ": -C: no command given\n");
                exit(EXIT_USAGE);
            }
            optind = argc;          /* the rest is the command */
            break;
        case 's': {
            char *end;
            errno = 0;
            c->wait_s = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(c->wait_s >= 0 && c->wait_s <= 3600)) {
                fprintf(stderr, PROG ": -s \"%s\": expected seconds from 0 to 3600\n", optarg);
                exit(EXIT_USAGE);
            }
            break;
        }
        case 'n': c->samples = parse_uint("-n", optarg, 1, 100000); break;
        case 'i': c->interval_ms = parse_uint("-i", optarg, 0, 3600000); break;
        case 't': c->topology = optarg; break;
        case 'o': c->outdir = optarg; break;
        case 'q': c->quiet = 1; break;
        case OPT_THREADS: c->flags |= FLAG_THREADS; break;
        case OPT_LINES: c->flags |= FLAG_LINES; break;
        case OPT_MODULES: c->flags |= FLAG_MODULES; break;
        case OPT_KEEP: c->keep = 1; break;
        case OPT_JOBID: c->jobid = parse_uint("--jobid", optarg, 1, 0xfffffff0u); sources++; break;
        case OPT_STEP: parse_steps(c, optarg); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(EXIT_USAGE);
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument \"%s\" (see --help)\n", argv[optind]);
        exit(EXIT_USAGE);
    }
    if (sources != 1) {
        fprintf(stderr, PROG ": give exactly one of -p, --pids-file, -P, -C and --jobid (see "
                "--help)\n");
        exit(EXIT_USAGE);
    }
    if (c->nsteps && !c->jobid) {
        fprintf(stderr, PROG ": --step goes with --jobid\n");
        exit(EXIT_USAGE);
    }
}

/* ------------------------------------------------------------ back-end */

/* A walker for the request's flags (NULL when out of memory). */
static st_walker_t *be_walker(unsigned flags)
{
    return st_walker_new((flags & FLAG_THREADS ? ST_WALK_THREADS : 0) |
                         (flags & FLAG_LINES ? ST_WALK_LINES : 0) |
                         (flags & FLAG_MODULES ? ST_WALK_MODULES : 0));
}

/* Whether the session has ended under us (the front-end gone): the
 * library ends no process, so a back-end busy sampling asks between
 * samples (the kicker thread has run the node meanwhile). */
static int session_over(tbon_net_t *net)
{
    tbon_event_t ev;
    int rc;
    while ((rc = tbon_net_next_event(net, &ev, 0)) == 0)
        ;
    return rc == TBON_ECLOSED;
}

/* Sample the tasks given to rank me with w: n samples, interval ms apart;
 * the 2D tree has the last one, the 3D tree all of them. TBON_ECLOSED if
 * the session ends meanwhile. */
static int be_sample(tbon_net_t *net, st_walker_t *w, const int32_t *pids,
                     const uint32_t *ranks, const uint32_t *owner, size_t nt, tbon_rank_t me,
                     unsigned n, unsigned interval, st_tree_t *t2, st_tree_t *t3)
{
    int rc = 0;
    for (unsigned s = 0; s < n && rc == 0; s++) {
        if (session_over(net))
            return TBON_ECLOSED;
        if (s > 0 && interval) {
            struct timespec ts = { interval / 1000, (long)(interval % 1000) * 1000000L };
            nanosleep(&ts, NULL);
        }
        size_t i = 0;
        while (i < nt && owner[i] != me)
            i++;
        for (size_t next; i < nt && rc == 0; i = next) {
            next = i + 1;
            while (next < nt && owner[next] != me)
                next++;
            st_stack_t *st = NULL;
            size_t ns = 0;
            /* The next task starts stopping as soon as this one runs again. */
            if (st_sample_then(w, (pid_t)pids[i], next < nt ? (pid_t)pids[next] : 0, &st,
                               &ns) < 0) {
                rc = TBON_ENOMEM;
                break;
            }
            for (size_t k = 0; k < ns && rc == 0; k++) {
                /* A runaway recursion keeps its outermost ST_MAX_DEPTH frames
                 * (what a tree can hold): where it started is what tells. */
                const char *const *fr = (const char *const *)st[k].frames;
                size_t depth = st[k].n < ST_MAX_DEPTH ? st[k].n : ST_MAX_DEPTH;
                rc = st_tree_add(t3, fr, depth, ranks[i]);
                if (rc == 0 && s + 1 == n)
                    rc = st_tree_add(t2, fr, depth, ranks[i]);
            }
            st_stacks_free(st, ns);
        }
    }
    return rc;
}

static int be_send(tbon_stream_t *s, int tag, const st_tree_t *t2, const st_tree_t *t3)
{
    uint8_t *b2 = NULL, *b3 = NULL;
    size_t l2 = 0, l3 = 0;
    int rc = st_tree_encode(t2, &b2, &l2);
    if (rc == 0)
        rc = st_tree_encode(t3, &b3, &l3);
    if (rc == 0)
        rc = tbon_stream_send(s, tag, FMT_TREES, b2, l2, b3, l3);
    free(b2);
    free(b3);
    return rc;
}

/* For the tests only: $TBON_STAT_TEST_HOLD = "RANK:DIR". Every back-end
 * writes DIR/sent.ITS_RANK once its result is sent; back-end RANK writes
 * DIR/held and holds its result back until DIR/go exists (60 s at most).
 * A test then kills RANK's commnode after its siblings' results went to it
 * and before this one did (the packets die with it, and the front-end must
 * ask again) - on conditions, however slow the machine. */
static void test_mark(const char *dir, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
}

static void test_hold(tbon_rank_t me, int sent)
{
    const char *v = getenv("TBON_STAT_TEST_HOLD");
    unsigned r;
    int off = 0;
    if (!v || sscanf(v, "%u:%n", &r, &off) != 1 || off == 0)
        return;
    const char *dir = v + off;
    if (sent) {
        char name[32];
        snprintf(name, sizeof name, "sent.%u", me);
        test_mark(dir, name);
        return;
    }
    if (r != me)
        return;
    test_mark(dir, "held");
    char go[PATH_MAX];
    snprintf(go, sizeof go, "%s/go", dir);
    for (int i = 0; i < 6000 && access(go, F_OK) != 0; i++) {
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
}

/* The open-file limit up to the hard limit (at most 65,536): the walker
 * keeps each task's state (a few open files) for the next sample, up to
 * RLIMIT_NOFILE / 16 tasks, and a common soft limit of 1,024 would keep 64. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
        if (want > rl.rlim_cur) {
            rl.rlim_cur = want;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
}

/* The executable's base name of the first of pids that has one ("?"). */
static void exe_of_first(const int32_t *pids, size_t n, char *out, size_t cap)
{
    snprintf(out, cap, "?");
    for (size_t i = 0; i < n; i++) {
        const char *e = st_task_exe_name((pid_t)pids[i]);
        if (strcmp(e, "?") != 0) {
            snprintf(out, cap, "%s", e);
            return;
        }
    }
}

/* What a back-end found (TAG_DISCOVER's answer), a column per field. */
struct found {
    int32_t *pids, *ranks, *sizes;
    uint32_t *tsteps, *states;
    size_t n;
};

/* Room for cap tasks (states zeroed): 0, or TBON_ENOMEM. */
static int found_alloc(struct found *f, size_t cap)
{
    size_t c = cap ? cap : 1;
    f->pids = malloc(c * sizeof *f->pids);
    f->ranks = malloc(c * sizeof *f->ranks);
    f->sizes = malloc(c * sizeof *f->sizes);
    f->tsteps = malloc(c * sizeof *f->tsteps);
    f->states = calloc(c, sizeof *f->states);
    f->n = 0;
    return f->pids && f->ranks && f->sizes && f->tsteps && f->states ? 0 : TBON_ENOMEM;
}

static void found_free(struct found *f)
{
    free(f->pids);
    free(f->ranks);
    free(f->sizes);
    free(f->tsteps);
    free(f->states);
}

/* The tasks of job on this node (steps[0..nsteps) or all, never this
 * back-end's own step). A trouble that leaves tasks unknown goes in note. */
static int found_job(struct found *f, uint32_t job, const uint32_t *steps, size_t nsteps,
                     const char *self, char *note, size_t notelen)
{
    char err[512] = "";
    pid_t *allowed = NULL;
    size_t nallowed = 0, n = 0;
    if (st_job_listpids(job, &allowed, &nallowed, err, sizeof err) != 0) {
        snprintf(note, notelen, "%s; tasks taken from their environment alone", err);
        allowed = NULL;
    }
    /* This back-end's own step is never a target. */
    const char *mj = getenv("SLURM_JOB_ID"), *ms = getenv("SLURM_STEP_ID");
    uint32_t skip = ST_STEP_NONE;
    if (mj && ms && strtoul(mj, NULL, 10) == job)
        skip = (uint32_t)strtoul(ms, NULL, 10);
    st_jtask_t *jt = NULL;
    int rc = st_job_scan(job, steps, nsteps, skip, note[0] ? NULL : allowed,
                         note[0] ? 0 : nallowed, self, &jt, &n, err, sizeof err);
    free(allowed);
    if (rc != 0) {
        snprintf(note, notelen, "%s", err);
        n = 0;
    }
    rc = found_alloc(f, n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        f->pids[i] = jt[i].pid;
        f->ranks[i] = jt[i].rank;
        f->sizes[i] = jt[i].size;
        f->tsteps[i] = jt[i].step;
    }
    f->n = rc == 0 ? n : 0;
    free(jt);
    return rc;
}

/* The pids of want[] whose owner is me: each one's rank and size from its
 * environment, and whether it is gone. */
static int found_pids(struct found *f, const int32_t *want, const uint32_t *owner,
                      size_t nwant, tbon_rank_t me)
{
    size_t cnt = 0;
    for (size_t i = 0; i < nwant; i++)
        cnt += owner[i] == me;
    if (found_alloc(f, cnt) != 0)
        return TBON_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < nwant; i++) {
        if (owner[i] != me)
            continue;
        size_t len = 0;
        char *env = st_proc_environ((pid_t)want[i], &len);
        f->pids[n] = want[i];
        f->ranks[n] = f->sizes[n] = -1;
        f->tsteps[n] = ST_STEP_NONE;
        if (env) {
            st_env_rank(env, len, &f->ranks[n], &f->sizes[n]);
            const char *sid = st_env_get(env, len, "SLURM_STEP_ID");
            if (sid)
                f->tsteps[n] = (uint32_t)strtoul(sid, NULL, 10);
            free(env);
        }
        /* Gone, or a zombie (no environment, no stack): not there. */
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/exe", (int)want[i]);
        struct stat sb;
        if (kill((pid_t)want[i], 0) != 0 && errno == ESRCH)
            f->states[n] = FOUND_GONE;
        else if (stat(path, &sb) != 0 && errno == ENOENT)
            f->states[n] = FOUND_GONE;
        n++;
    }
    f->n = n;
    return 0;
}

/* TAG_DISCOVER: which tasks are here. With a job id, the job's tasks on this
 * node (steps[] or all, never this back-end's own step); without, the state
 * of the pids owned by me. The answer (FMT_FOUND) names me, so that the
 * front-end knows the host. */
static int be_discover(tbon_stream_t *s, tbon_packet_t *p, tbon_rank_t me, const char *self)
{
    uint32_t job = 0, *steps = NULL, *owner = NULL;
    int32_t *want = NULL;
    size_t nsteps = 0, nwant = 0, nowner = 0;
    if (tbon_packet_unpack(p, FMT_DISCOVER, &job, &steps, &nsteps, &want, &nwant, &owner,
                           &nowner) != 0 || nwant != nowner) {
        fprintf(stderr, PROG " --be: rank %u: malformed discovery (\"%s\")\n", me,
                tbon_packet_format(p));
        return TBON_EFORMAT;
    }
    char note[600] = "";
    struct found f = { 0 };
    int rc = job ? found_job(&f, job, steps, nsteps, self, note, sizeof note)
                 : found_pids(&f, want, owner, nwant, me);
    char exe[NAME_MAX + 1];
    exe_of_first(f.pids, rc == 0 ? f.n : 0, exe, sizeof exe);
    size_t n = f.n;
    if (rc == 0)
        rc = tbon_stream_send(s, TAG_DISCOVER, FMT_FOUND, (uint32_t)me, f.pids, n, f.ranks, n,
                              f.sizes, n, f.tsteps, n, f.states, n, exe, note);
    found_free(&f);
    free(steps);
    free(want);
    free(owner);
    return rc;
}

/* Sample what the request p names (TAG_SAMPLE, or an ask again that
 * carries it) into fresh trees and send them with tag. */
static int be_sample_req(tbon_net_t *net, tbon_stream_t *s, tbon_packet_t *p, tbon_rank_t me,
                         int tag, st_tree_t **t2, st_tree_t **t3)
{
    int32_t *pids = NULL;
    uint32_t *ranks = NULL, *owner = NULL, n, interval, flags;
    size_t np = 0, nr = 0, no = 0;
    int rc;
    if (tbon_packet_unpack(p, FMT_REQ, &pids, &np, &ranks, &nr, &owner, &no, &n, &interval,
                           &flags) != 0 || np != nr || np != no) {
        fprintf(stderr, PROG " --be: rank %u: malformed request (\"%s\")\n", me,
                tbon_packet_format(p));
        rc = TBON_EFORMAT;
    } else {
        st_tree_free(*t2);
        st_tree_free(*t3);
        *t2 = st_tree_new();
        *t3 = st_tree_new();
        st_walker_t *w = *t2 && *t3 ? be_walker(flags) : NULL;
        rc = w ? be_sample(net, w, pids, ranks, owner, np, me, n, interval, *t2, *t3)
               : TBON_ENOMEM;
        test_hold(me, 0);
        if (rc == 0)
            rc = be_send(s, tag, *t2, *t3);
        test_hold(me, 1);
        /* The walker's files and maps go after the result did. */
        st_walker_free(w);
    }
    free(pids);
    free(ranks);
    free(owner);
    return rc;
}

/* The back-end's requests until the front-end closes the tree. An ask again
 * (TAG_RESEND) carries the request: a back-end that sampled sends what it
 * has (the merge is idempotent); one the request never reached (its
 * commnode died before passing it on, and the adopter's wave was closed by
 * then) samples now. */
static int be_loop(tbon_net_t *net, const char *self)
{
    tbon_rank_t me = tbon_net_rank(net);
    st_tree_t *t2 = st_tree_new(), *t3 = st_tree_new();
    int rc = t2 && t3 ? 0 : TBON_ENOMEM, sampled = 0;
    while (rc == 0) {
        tbon_packet_t *p = NULL;
        tbon_stream_t *s = NULL;
        rc = tbon_net_recv(net, &p, &s, -1);
        if (rc != 0)
            break;
        int tag = tbon_packet_tag(p);
        if (tag == TAG_DISCOVER) {
            rc = be_discover(s, p, me, self);
        } else if (tag == TAG_SAMPLE || (tag == TAG_RESEND && !sampled)) {
            rc = be_sample_req(net, s, p, me, tag, &t2, &t3);
            sampled = rc == 0;
        } else if (tag == TAG_RESEND) {
            rc = be_send(s, TAG_RESEND, t2, t3);
        }
        tbon_packet_unref(p);
    }
    st_tree_free(t2);
    st_tree_free(t3);
    if (rc != TBON_ECLOSED)
        fprintf(stderr, PROG " --be: rank %u: %s (%s)\n", me, tbon_strerror(rc),
                tbon_net_error(net));
    tbon_net_destroy(net);
    return rc == TBON_ECLOSED ? 0 : EXIT_RUN;
}

static void self_exe(char *buf, size_t cap)
{
    ssize_t k = readlink("/proc/self/exe", buf, cap - 1);
    buf[k > 0 ? k : 0] = '\0';
}

/* A back-end the tree launched: "tbon_stat --be <the tree's arguments>". */
static int be_main(int argc, char **argv)
{
    raise_nofile();
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_be_create(&argc, &argv, &err);
    if (!net) {
        fprintf(stderr, PROG " --be: %s\n", err.msg);
        return EXIT_RUN;
    }
    char self[PATH_MAX];
    self_exe(self, sizeof self);
    return be_loop(net, self);
}

/* A back-end of --jobid, one per node in an srun step of the job:
 * "tbon_stat --be-attach FILE NODE=RANK,NODE=RANK,...". It takes the rank of
 * its node (SLURMD_NODENAME, else its host name), waits for the front-end's
 * attach file and attaches. */
static int be_attach_main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, PROG " --be-attach: expected FILE NODE=RANK,... (it is started by "
                PROG " --jobid)\n");
        return EXIT_USAGE;
    }
    raise_nofile();
    const char *file = argv[2], *map = argv[3];
    char node[256] = "";
    const char *env = getenv("SLURMD_NODENAME");
    if (env && *env)
        snprintf(node, sizeof node, "%s", env);
    else if (gethostname(node, sizeof node - 1) != 0)
        node[0] = '\0';
    size_t nl = strlen(node);
    tbon_rank_t rank = TBON_RANK_NONE;
    for (const char *m = map; *m && rank == TBON_RANK_NONE;) {
        size_t len = strcspn(m, ",");
        const char *eq = memchr(m, '=', len);
        if (eq && (size_t)(eq - m) == nl && strncmp(m, node, nl) == 0)
            rank = (tbon_rank_t)strtoul(eq + 1, NULL, 10);
        m += len + (m[len] == ',');
    }
    if (rank == TBON_RANK_NONE) {
        fprintf(stderr, PROG " --be-attach: node \"%s\" has no place in the tree (%s)\n", node,
                map);
        return EXIT_RUN;
    }
    /* The front-end writes the file (atomically) while this step starts,
     * into a directory this node must share. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    struct stat sb;
    if (slash && dir[0] && stat(dir, &sb) != 0) {
        fprintf(stderr, PROG " --be-attach: on %s: %s: %s: -o's directory must be on a file "
                "system this node shares with the front-end's host\n", node, dir,
                strerror(errno));
        return EXIT_RUN;
    }
    /* The file may come over a shared file system, where no inotify
     * sees it: look again after 5 ms, then less often, up to every 100. */
    double dl = now_s() + ATTACH_WAIT_S;
    long step_ms = 5;
    while (stat(file, &sb) != 0) {
        if (errno != ENOENT || now_s() > dl) {
            fprintf(stderr, PROG " --be-attach: on %s: %s: %s\n", node, file,
                    errno == ENOENT ? "the front-end's attach file is not there: is -o's "
                    "directory shared with this node?" : strerror(errno));
            return EXIT_RUN;
        }
        struct timespec ts = { 0, step_ms * 1000 * 1000 };
        nanosleep(&ts, NULL);
        step_ms = step_ms * 2 > 100 ? 100 : step_ms * 2;
    }
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_be_attach(file, rank, &err);
    if (!net) {
        fprintf(stderr, PROG " --be-attach: on %s: rank %u: %s\n", node, rank, err.msg);
        return EXIT_RUN;
    }
    char self[PATH_MAX];
    self_exe(self, sizeof self);
    return be_loop(net, self);
}

/* ----------------------------------------------------------- front-end */

/* The merge filter: $TBON_STAT_FILTER, next to the build's bin/, or the
 * installed one. */
static char *filter_path(void)
{
    const char *env = getenv("TBON_STAT_FILTER");
    if (env && *env)
        return strdup(env);
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
        return NULL;
    exe[k] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    static const char *const rel[] = { "/../stat/stat_merge.so", "/../lib/tbon/filters/stat_merge.so" };
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s%s", exe, rel[i]);
        char *real = realpath(path, NULL);
        if (real)
            return real;
    }
    return NULL;
}

/* -C: start the command in its own process group. */
static pid_t launch(char **cmd, double wait_s)
{
    pid_t pid = fork();
    if (pid < 0)
        die("-C: fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        execvp(cmd[0], cmd);
        fprintf(stderr, PROG ": -C %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    double end = now_s() + wait_s;
    while (now_s() < end && !g_stop) {
        int status;
        if (wait_child(pid, -1, ms_until(end), &status))
            die("-C %s: it ended (status %d) before it could be sampled", cmd[0],
                WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    return pid;
}

/* SIGTERM to the command's group, SIGKILL after 2 s; reaped if it ended. */
static void stop_command(pid_t pid)
{
    kill(-pid, SIGTERM);
    double end = now_s() + 2;
    while (!wait_child(pid, -1, ms_until(end), NULL) && now_s() < end)
        ;
    kill(-pid, SIGKILL);
    wait_child(pid, -1, 1000, NULL);
}

/* ----------------------------------------------------- topology files */

/* A tree to write as a topology file in the text format (docs/topology.md):
 * n nodes in rank order, breadth-first (every parent before its children,
 * a parent's children one after the other, so parents never decrease
 * after node 0); node 0 the front-end, its parent unused. */
struct topo {
    const char **host;
    uint32_t *id;
    uint32_t *parent;
    size_t n;
};

static void topo_alloc(struct topo *t, size_t n)
{
    t->n = n;
    t->host = calloc(n, sizeof *t->host);
    t->id = calloc(n, sizeof *t->id);
    t->parent = calloc(n, sizeof *t->parent);
    if (!t->host || !t->id || !t->parent)
        die("out of memory");
}

static void topo_free(struct topo *t)
{
    free(t->host);
    free(t->id);
    free(t->parent);
}

/* Whether a topology file may name host h: 1 to 255 letters, digits, '-',
 * '.' and '_', starting with a letter or digit (docs/topology.md). */
static int host_ok(const char *h)
{
    size_t len = strlen(h);
    if (len == 0 || len > 255)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)h[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '-' && c != '.' && c != '_')))
            return 0;
    }
    return 1;
}

/* t's statements, "host:id => host:id ... ;" for each node with children,
 * long lines wrapped with indented continuations. */
static void topo_print(const struct topo *t, FILE *f)
{
    size_t c = 1;
    for (size_t r = 0; r < t->n && c < t->n; r++) {
        if (t->parent[c] != r)
            continue;
        int col = fprintf(f, "%s:%u =>", t->host[r], t->id[r]);
        for (size_t j = 0; c < t->n && t->parent[c] == r; c++, j++) {
            if (col + (int)strlen(t->host[c]) + 12 > 79 && j > 0) {
                fputs("\n   ", f);
                col = 3;
            }
            col += fprintf(f, " %s:%u", t->host[c], t->id[c]);
        }
        fputs(" ;\n", f);
    }
}

/* Write t to path with a comment line first: 0, or -1 with why in err (the
 * file removed). */
static int topo_write(const struct topo *t, const char *path, const char *comment, char *err,
                      size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "# %s\n", comment);
    topo_print(t, f);
    int rc = 0;
    if (fflush(f) != 0 || ferror(f)) {
        snprintf(err, errlen, "%s: write error: %s", path, strerror(errno));
        rc = -1;
    }
    if (fclose(f) != 0 && rc == 0) {
        snprintf(err, errlen, "%s: write error: %s", path, strerror(errno));
        rc = -1;
    }
    if (rc)
        unlink(path);
    return rc;
}

/* The tree of minimal depth over leaves back-ends with at most k children
 * per node, every node on localhost (ids in rank order): level widths
 * bottom-up, each ceil(below / k), up to one root; then each level shares
 * the next one out as evenly as possible (the first get one more). */
static void topo_fanout(struct topo *t, uint32_t k, uint32_t leaves)
{
    uint64_t width[32];
    size_t nl = 0;
    uint64_t n = leaves;
    width[nl++] = leaves;
    do {
        width[nl] = (width[nl - 1] + k - 1) / k;
        n += width[nl];
        nl++;
    } while (width[nl - 1] > 1);
    topo_alloc(t, (size_t)n);
    size_t r = 0, next = 1;
    for (size_t lv = nl; lv-- > 0;) {
        uint64_t w = width[lv], below = lv ? width[lv - 1] : 0;
        for (uint64_t j = 0; j < w; j++, r++) {
            t->host[r] = "localhost";
            t->id[r] = (uint32_t)r;
            for (uint64_t c = 0; lv && c < below / w + (j < below % w); c++)
                t->parent[next++] = (uint32_t)r;
        }
    }
}

/* The default topology, written to a temporary file: one back-end per
 * TASKS_PER_BE tasks but at most BES_PER_CPU per CPU, fan-out
 * DEFAULT_FANOUT, every process on this host. A sample spends part of its
 * time waiting for the target to stop, so a few back-ends per CPU overlap
 * those waits; more only cost their start (on 2 CPUs, 256 tasks: 16
 * back-ends took 60-70 ms, 4 or 8 about 40-60 ms, 2 50-70 ms). */
static char *default_topology(size_t ntasks, char *dir_out, size_t cap)
{
    uint32_t nbe = (uint32_t)((ntasks + TASKS_PER_BE - 1) / TASKS_PER_BE);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t most = (uint32_t)(ncpu > 0 ? ncpu : 1) * BES_PER_CPU;
    if (nbe > most)
        nbe = most;
    if (nbe < 1)
        nbe = 1;
    struct topo t;
    topo_fanout(&t, DEFAULT_FANOUT, nbe);
    snprintf(dir_out, cap, "/tmp/tbon_stat.XXXXXX");
    if (!mkdtemp(dir_out))
        die("mkdtemp: %s", strerror(errno));
    char *path = malloc(strlen(dir_out) + 16);
    if (!path)
        die("out of memory");
    sprintf(path, "%s/tree.top", dir_out);
    char err[PATH_MAX + 128];
    if (topo_write(&t, path, PROG " default topology", err, sizeof err) != 0)
        die("writing %s: %s", path, err);
    topo_free(&t);
    return path;
}

/* DIR/<exe>.NNNN, the first that does not exist yet (created). */
static char *run_dir(const char *outdir, const char *exe)
{
    if (mkdir(outdir, 0755) != 0 && errno != EEXIST)
        die("-o %s: %s", outdir, strerror(errno));
    for (unsigned i = 0; i < 10000; i++) {
        char *d = malloc(strlen(outdir) + strlen(exe) + 16);
        if (!d)
            die("out of memory");
        sprintf(d, "%s/%s.%04u", outdir, exe, i);
        if (mkdir(d, 0755) == 0)
            return d;
        int e = errno;
        free(d);
        if (e != EEXIST)
            die("-o %s: %s", outdir, strerror(e));
    }
    die("-o %s: no free run number", outdir);
}

/* Open DIR/NAME for writing, or die. */
static FILE *out_file(const char *dir, const char *exe, const char *suffix, char *path,
                      size_t cap)
{
    snprintf(path, cap, "%s/%s.%s", dir, exe, suffix);
    FILE *f = fopen(path, "w");
    if (!f)
        die("%s: %s", path, strerror(errno));
    return f;
}

static void close_file(FILE *f, const char *path)
{
    if (ferror(f) | fclose(f))
        die("%s: write error", path);
}

/* dot -Tsvg IN -o OUT, without a shell (any character may be in a path):
 * 0 when it succeeded, 1 when there is no dot on the PATH, -1 when it
 * failed. */
static int run_dot(const char *in, const char *out)
{
    char *const argv[] = { "dot", "-Tsvg", (char *)in, "-o", (char *)out, NULL };
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -1;
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, "dot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    int st;
    if (rc != 0)
        return rc == ENOENT ? 1 : -1;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Write one tree's files; also its SVG while *svg (cleared when there is no
 * dot to draw it). */
static void write_tree(const char *dir, const char *exe, const char *which,
                       const st_tree_t *t, int *svg)
{
    char path[PATH_MAX], suffix[32];
    snprintf(suffix, sizeof suffix, "%s.dot", which);
    FILE *f = out_file(dir, exe, suffix, path, sizeof path);
    char title[128];
    snprintf(title, sizeof title, "%s %s", exe, which);
    if (st_tree_write_dot(t, f, title) != 0)
        die("%s: write error", path);
    close_file(f, path);
    if (*svg) {
        char svgpath[PATH_MAX + NAME_MAX + 16];
        snprintf(svgpath, sizeof svgpath, "%s/%s.%s.svg", dir, exe, which);
        int r = run_dot(path, svgpath);
        if (r < 0)
            fprintf(stderr, PROG ": note: dot could not draw %s\n", path);
        *svg = r == 0;
    }
    snprintf(suffix, sizeof suffix, "%s.json", which);
    f = out_file(dir, exe, suffix, path, sizeof path);
    if (st_tree_write_json(t, f) != 0)
        die("%s: write error", path);
    close_file(f, path);
    snprintf(suffix, sizeof suffix, "%s.txt", which);
    f = out_file(dir, exe, suffix, path, sizeof path);
    if (st_tree_write_text(t, f) != 0)
        die("%s: write error", path);
    close_file(f, path);
}

/* Add the tasks missing from t (the root's set) under one frame naming why. */
/* ---------------------------------------------------------- the tasks */

/* One task of the run: where it runs, its pid, its rank. */
struct task {
    char *host;         /* malloc'ed */
    int32_t pid;
    int32_t rank;       /* from its environment, -1: none */
    int32_t size;       /* the job size its environment says, -1: unknown */
    uint32_t step;      /* its Slurm step, ST_STEP_NONE: none */
    uint32_t id;        /* its number in the trees */
    uint32_t be;        /* the back-end that samples it */
};

/* Everything one run found and started. */
struct run {
    struct task *t;
    size_t n;
    uint32_t *absent;   /* ids given to tasks of the job that no node had */
    size_t nabsent;
    tbon_net_t *net;
    char exe[NAME_MAX + 1];
    const char *ranks_from;
    int incomplete;     /* exit 1: tasks were missing */
    size_t nhosts;
    double t_find, t_launch;
    char tmpdir[64];
    char *topo;
    pid_t launched;     /* -C's command */
    pid_t srun;         /* --jobid's step of back-ends */
    char *attach;       /* its attach file */
    uint32_t job;
    char **unreached;   /* "HOST:PID" (--jobid: "HOST") of the tasks whose
                           back-end did not start: not sampled (exit 3) */
    size_t nunreached;
};

static char g_host[256];

/* This host's name (gethostname), as the tree and the tasks name it. */
static const char *this_host(void)
{
    if (!g_host[0] && gethostname(g_host, sizeof g_host - 1) != 0)
        snprintf(g_host, sizeof g_host, "localhost");
    return g_host;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d)
        die("out of memory");
    return d;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        die("out of memory");
    return p;
}

static int by_id(const void *a, const void *b)
{
    const struct task *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* "host:pid" of the task numbered id (NULL if none): for the classes. */
static const char *task_name(void *arg, uint32_t id)
{
    const struct run *r = arg;
    static char buf[300];
    struct task key = { .id = id };
    const struct task *t = bsearch(&key, r->t, r->n, sizeof *r->t, by_id);
    if (!t)
        return NULL;
    snprintf(buf, sizeof buf, "%s:%d", t->host, (int)t->pid);
    return buf;
}

/* The indexes in r->t of the tasks missing from tr (the root's set), into a
 * malloc'd array (NULL when none); *n gets their count. */
static size_t *missing_tasks(const st_tree_t *tr, const struct run *r, size_t *n)
{
    st_range_t *rg = NULL;
    uint64_t cnt = 0;
    size_t nr = st_tree_tasks(tr, &rg, &cnt), j = 0;
    size_t *v = NULL;
    *n = 0;
    for (size_t i = 0; i < r->n; i++) {         /* r->t is sorted by id */
        uint32_t x = r->t[i].id;
        while (j < nr && rg[j].hi < x)
            j++;
        if (j < nr && rg[j].lo <= x)
            continue;
        if (!v)
            v = xcalloc(r->n, sizeof *v);
        v[(*n)++] = i;
    }
    free(rg);
    return v;
}

/* Add the tasks missing from tr under one frame naming why. */
static size_t fill_missing(st_tree_t *tr, const struct run *r, const char *why)
{
    size_t n, added = 0;
    size_t *miss = missing_tasks(tr, r, &n);
    const char *frame[] = { why };
    for (size_t k = 0; k < n; k++)
        added += st_tree_add(tr, frame, 1, r->t[miss[k]].id) == 0;
    free(miss);
    return added;
}

/* How many tasks missing from tr belong to a back-end that is alive in the
 * front-end's view (they may still come). */
static size_t missing_alive(const st_tree_t *tr, const struct run *r, tbon_net_t *net)
{
    int cap = tbon_net_view(net, NULL, 0);
    tbon_rank_t *live = cap > 0 ? xcalloc((size_t)cap, sizeof *live) : NULL;
    int nv = live ? tbon_net_view(net, live, (size_t)cap) : 0;
    size_t nlive = nv < 0 ? 0 : nv < cap ? (size_t)nv : (size_t)cap;  /* joins in between */
    size_t n, k = 0;
    size_t *miss = missing_tasks(tr, r, &n);
    for (size_t m = 0; m < n; m++) {
        tbon_rank_t be = r->t[miss[m]].be;      /* the view is in rank order */
        size_t lo = 0, hi = nlive;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (live[mid] < be)
                lo = mid + 1;
            else
                hi = mid;
        }
        k += lo < nlive && live[lo] == be;
    }
    free(miss);
    free(live);
    return k;
}

/* Merge the packet's trees into t2 and t3. */
static int take(tbon_packet_t *p, st_tree_t *t2, st_tree_t *t3, char *err, size_t errlen)
{
    uint8_t *b2 = NULL, *b3 = NULL;
    size_t l2 = 0, l3 = 0;
    if (tbon_packet_unpack(p, FMT_TREES, &b2, &l2, &b3, &l3) != 0) {
        snprintf(err, errlen, "a result of format \"%s\"", tbon_packet_format(p));
        return TBON_EFORMAT;
    }
    st_tree_t *a = st_tree_decode(b2, l2, err, errlen);
    st_tree_t *b = a ? st_tree_decode(b3, l3, err, errlen) : NULL;
    int rc = a && b ? 0 : TBON_EFORMAT;
    if (rc == 0)
        rc = st_tree_merge(t2, a);
    if (rc == 0)
        rc = st_tree_merge(t3, b);
    st_tree_free(a);
    st_tree_free(b);
    free(b2);
    free(b3);
    return rc;
}

/* The tree of tbon_stat back-ends (tbon_fe_create, from a thread). */
struct start {
    const char *topo;
    const char *be_exe;         /* NULL: attach mode, through attach */
    const char *attach;
    tbon_net_t *net;
    tbon_error_t err;
    atomic_int done;
    int done_fd;                /* an eventfd written when done, or -1 */
};

static void *start_tree(void *arg)
{
    struct start *st = arg;
    const char *const be_argv[] = { "--be", NULL };
    tbon_fe_options_t o = { 0 };
    o.startup_timeout_ms = 120000;
    o.attach_file = st->attach;
    st->net = tbon_fe_create(st->topo, st->be_exe, st->be_exe ? be_argv : NULL, &o, &st->err);
    atomic_store(&st->done, 1);
    if (st->done_fd >= 0)
        eventfd_write(st->done_fd, 1);
    return NULL;
}

/* ------------------------------------------------- tasks on this host */

/* -p, --pids-file, -P and -C on this host: the tasks' ranks are read here
 * while the tree (every process on this host) starts. */
static void plan_local(const struct cli *c, const char *self, st_tasks_t *tasks, struct run *r)
{
    double t0 = now_s();
    r->topo = c->topology ? xstrdup(c->topology)
                          : default_topology(tasks->n, r->tmpdir, sizeof r->tmpdir);
    struct start st = { .topo = r->topo, .be_exe = self, .done_fd = -1 };
    pthread_t starter;
    bool threaded = pthread_create(&starter, NULL, start_tree, &st) == 0;
    if (!threaded)
        start_tree(&st);
    int env_ranks = st_tasks_rank(tasks);
    if (threaded)
        pthread_join(starter, NULL);
    snprintf(r->exe, sizeof r->exe, "%s", st_task_exe_name(tasks->v[0].pid));
    if (!st.net) {
        if (r->launched && !c->keep)
            stop_command(r->launched);
        die("starting the tree of %s: %s", r->topo, st.err.msg);
    }
    r->net = st.net;
    r->t_launch = now_s() - t0;
    r->ranks_from = env_ranks ? "their environment" : "list order";
    /* Back-ends that did not start: every task is on this host, the others
     * sample them all. */
    int nm = tbon_fe_missing(r->net, NULL, 0);
    if (nm > 0)
        fprintf(stderr, PROG ": note: %d process%s of the tree did not start (the library's "
                "warnings above say why); the tasks are shared among the %zu back-ends "
                "that did\n", nm, nm == 1 ? "" : "es", tbon_net_num_backends(r->net));
    size_t nbe = tbon_net_num_backends(r->net);
    tbon_rank_t *bes = xcalloc(nbe, sizeof *bes);
    if (tbon_net_backends(r->net, bes, nbe) != (int)nbe)
        die("out of memory");
    r->n = tasks->n;
    r->t = xcalloc(r->n, sizeof *r->t);
    for (size_t i = 0; i < r->n; i++)
        r->t[i] = (struct task){ .host = xstrdup(this_host()), .pid = tasks->v[i].pid,
                                 .rank = env_ranks ? (int32_t)tasks->v[i].rank : -1,
                                 .size = -1,
                                 .step = ST_STEP_NONE, .id = tasks->v[i].rank,
                                 .be = bes[i * nbe / r->n] };   /* blocks of ranks */
    r->nhosts = 1;
    free(bes);
}

/* ------------------------------------------- tasks on other hosts, jobs */

/* A host and where it is in a list, to find the first repeat. */
struct host_at {
    const char *host;
    size_t i;
};

static int by_host_at(const void *a, const void *b)
{
    const struct host_at *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* The first i whose hosts[i] an earlier one names too, or n. */
static size_t first_repeat(char **hosts, size_t n)
{
    struct host_at *v = xcalloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = (struct host_at){ hosts[i], i };
    qsort(v, n, sizeof *v, by_host_at);
    size_t first = n;
    for (size_t k = 1; k < n; k++)
        if (strcmp(v[k].host, v[k - 1].host) == 0 && v[k].i < first)
            first = v[k].i;
    free(v);
    return first;
}

/* The tree for back-ends on hosts[0..n): the front-end on this host (its
 * real name, so that the other hosts reach it), each host's back-end its
 * child, or with more than DEFAULT_FANOUT hosts commnodes on this host
 * between them. leaf[i] is hosts[i]'s rank. Written to r->tmpdir. */
static void remote_topology(struct run *r, char **hosts, size_t n, tbon_rank_t *leaf)
{
    const char *me = this_host();
    /* $TBON_STAT_FANOUT: a smaller fan-out, so that the tests see commnodes
     * with a few hosts. */
    size_t fanout = DEFAULT_FANOUT;
    const char *fo = getenv("TBON_STAT_FANOUT");
    if (fo && atoi(fo) >= 2 && atoi(fo) <= 1024)
        fanout = (size_t)atoi(fo);
    size_t ncn = n > fanout ? (n + fanout - 1) / fanout : 0;
    if (!host_ok(me))
        die("a topology for %zu hosts: out of memory", n);
    struct topo t;
    topo_alloc(&t, 1 + ncn + n);
    for (size_t k = 0; k <= ncn; k++)       /* the front-end, the commnodes */
        t.host[k] = me, t.id[k] = (uint32_t)k, t.parent[k] = 0;
    size_t rep = first_repeat(hosts, n);
    for (size_t i = 0; i < n; i++) {
        if (!host_ok(hosts[i]) || i == rep)
            die("a topology for host \"%s\": %s", hosts[i],
                host_ok(hosts[i]) ? "given twice" : "not a usable host name");
        /* A back-end on this host needs an id the front-end and commnodes
         * do not have. */
        leaf[i] = (tbon_rank_t)(1 + ncn + i);
        t.host[leaf[i]] = hosts[i];
        t.id[leaf[i]] = strcmp(hosts[i], me) == 0 ? (uint32_t)(ncn + 1) : 0;
        t.parent[leaf[i]] = ncn ? (uint32_t)(1 + i * ncn / n) : 0;
    }
    snprintf(r->tmpdir, sizeof r->tmpdir, "/tmp/tbon_stat.XXXXXX");
    if (!mkdtemp(r->tmpdir))
        die("mkdtemp: %s", strerror(errno));
    r->topo = malloc(strlen(r->tmpdir) + 16);
    if (!r->topo)
        die("out of memory");
    sprintf(r->topo, "%s/tree.top", r->tmpdir);
    g_topo = r->topo;
    g_topodir = r->tmpdir;
    char err[PATH_MAX + 128];
    if (topo_write(&t, r->topo, PROG " tree over hosts", err, sizeof err) != 0)
        die("writing %s: %s", r->topo, err);
    topo_free(&t);
}

/* The environment of the back-ends' srun: this one without SLURM_* (an
 * allocation tbon_stat may run in would set srun's task count and the
 * rest), but with SLURM_CONF. */
static char **srun_env(void)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **e = xcalloc(n + 1, sizeof *e);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "SLURM_", 6) != 0 || strncmp(environ[i], "SLURM_CONF=", 11) == 0)
            e[k++] = environ[i];
    e[k] = NULL;
    return e;
}

/* One srun step of the job, one task per node: tbon_stat --be-attach. */
static pid_t start_srun(uint32_t job, char **nodes, size_t n, const tbon_rank_t *leaf,
                        const char *self, const char *attach)
{
    size_t cap = 64, len = 0;
    for (size_t i = 0; i < n; i++)
        cap += strlen(nodes[i]) + 16;
    char *map = xcalloc(cap, 1), *list = xcalloc(cap, 1);
    for (size_t i = 0; i < n; i++) {
        len += (size_t)snprintf(map + len, cap - len, "%s%s=%u", i ? "," : "", nodes[i],
                                leaf[i]);
        strcat(list, i ? "," : "");
        strcat(list, nodes[i]);
    }
    char jobopt[32], nopt[32], topt[32];
    snprintf(jobopt, sizeof jobopt, "--jobid=%u", job);
    snprintf(nopt, sizeof nopt, "--nodes=%zu", n);
    snprintf(topt, sizeof topt, "--ntasks=%zu", n);
    char *wl = malloc(strlen(list) + 16);
    if (!wl)
        die("out of memory");
    sprintf(wl, "--nodelist=%s", list);
    char *const argv[] = { "srun", "--overlap", jobopt, nopt, topt, "--ntasks-per-node=1", wl,
                           "--kill-on-bad-exit=1", "--quiet", (char *)self, "--be-attach",
                           (char *)attach, map, NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
    char **env = srun_env();
    pid_t pid;
    int rc = posix_spawnp(&pid, "srun", &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    free(map);
    free(list);
    free(wl);
    if (rc != 0)
        die("--jobid %u: cannot run srun: %s", job, strerror(rc));
    return pid;
}

/* Wait for the back-ends' srun to end (it does once the tree is closed):
 * then interrupt it as srun wants (two SIGINTs end a step), then kill it. */
static void stop_srun(pid_t pid, double wait_s)
{
    double dl = now_s() + wait_s;
    int sent = 0;
    while (!wait_child(pid, -1, ms_until(dl), NULL)) {
        if (now_s() < dl)
            continue;           /* a signal came */
        if (sent == 4) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return;
        }
        kill(pid, sent < 2 ? SIGINT : SIGTERM);
        sent++;
        dl = now_s() + (sent == 2 ? 1.0 : 0.2);
    }
}

/* Give every task its number in the trees. With one Slurm step, or pids
 * given one by one: the ranks from the environments when every task has one
 * and no two share it; with several steps, (step, rank) order. Ranks of a
 * step that no node had (the environments say how many there are) become
 * r->absent. Reports on stderr what is odd. */
static int by_step_rank_host(const void *a, const void *b)
{
    const struct task *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    int h = strcmp(x->host, y->host);
    return h ? h : (x->pid > y->pid) - (x->pid < y->pid);
}

static void number_tasks(struct run *r, bool job_mode)
{
    /* Listed pids are one set of tasks, whatever steps they are of. */
    if (!job_mode)
        for (size_t i = 0; i < r->n; i++)
            r->t[i].step = ST_STEP_NONE;
    qsort(r->t, r->n, sizeof *r->t, by_step_rank_host);
    size_t nsteps = 0, dups = 0, norank = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (i == 0 || r->t[i].step != r->t[i - 1].step)
            nsteps++;
        if (r->t[i].rank < 0) {
            norank++;
        } else if (i > 0 && r->t[i].step == r->t[i - 1].step &&
                   r->t[i].rank == r->t[i - 1].rank) {
            if (dups++ < 10)
                fprintf(stderr, PROG ": two tasks have rank %d%s: %s:%d and %s:%d\n",
                        r->t[i].rank, job_mode ? " in one step" : "", r->t[i - 1].host,
                        r->t[i - 1].pid, r->t[i].host, r->t[i].pid);
        }
    }
    bool by_rank = nsteps == 1 && dups == 0 && norank == 0;
    if (dups > 10)
        fprintf(stderr, PROG ": ... %zu tasks in all share a rank with another\n", dups);
    if (norank && job_mode)
        fprintf(stderr, PROG ": %zu tasks have no rank in their environment\n", norank);
    if (by_rank) {
        r->ranks_from = "their environment";
        for (size_t i = 0; i < r->n; i++)
            r->t[i].id = (uint32_t)r->t[i].rank;
    } else {
        r->ranks_from = nsteps > 1 ? "(step, rank) order: see the tasks file"
                                   : "position (not every task has a rank of its own)";
        if (nsteps > 1)
            fprintf(stderr, PROG ": tasks of %zu steps: numbered in (step, rank) order; "
                    "%s.tasks.txt maps the numbers to steps and ranks\n", nsteps, r->exe);
        for (size_t i = 0; i < r->n; i++)
            r->t[i].id = (uint32_t)i;
    }
    if (!job_mode)
        return;
    /* Ranks the job has and no node had: per step, 0 .. size-1. */
    for (size_t i = 0; i < r->n;) {
        size_t j = i;
        int32_t size = -1;
        while (j < r->n && r->t[j].step == r->t[i].step) {
            if (r->t[j].size > size)
                size = r->t[j].size;
            j++;
        }
        size_t k = i, missing = 0;
        char list[200] = "";
        for (int32_t want = 0; size > 0 && want < size; want++) {
            while (k < j && r->t[k].rank < want)
                k++;
            if (k < j && r->t[k].rank == want)
                continue;
            missing++;
            size_t l = strlen(list);
            if (l < sizeof list - 16)
                snprintf(list + l, sizeof list - l, "%s%d", l ? "," : "", want);
            else if (!strstr(list, "..."))
                strcat(list, ",...");
            if (by_rank) {
                uint32_t *na = realloc(r->absent, (r->nabsent + 1) * sizeof *na);
                if (!na)
                    die("out of memory");
                r->absent = na;
                r->absent[r->nabsent++] = (uint32_t)want;
            }
        }
        if (missing) {
            fprintf(stderr, PROG ": job %u step %u has %d tasks; %zu not found on any of its "
                    "nodes: rank%s %s\n", r->job, r->t[i].step, size, missing,
                    missing == 1 ? "" : "s", list);
            r->incomplete = 1;
        }
        i = j;
    }
    if (dups || norank)
        r->incomplete = 1;          /* a job's tasks all have a rank of their own */
}

/* Tasks on other hosts (-p/--pids-file with HOST:PID) or a Slurm job's
 * (--jobid, or -P of an srun): a back-end on each host (over ssh for pids,
 * as one srun step of the job with --jobid) finds its tasks and their ranks
 * there, then the front-end numbers them. */
/* A task (pid 0: every task of the job on host) whose back-end did not
 * start. */
static void note_unreached(struct run *r, const char *host, int32_t pid)
{
    char **v = realloc(r->unreached, (r->nunreached + 1) * sizeof *v);
    char buf[300];
    if (!v)
        die("out of memory");
    r->unreached = v;
    if (pid)
        snprintf(buf, sizeof buf, "%s:%d", host, (int)pid);
    else
        snprintf(buf, sizeof buf, "%s", host);
    v[r->nunreached++] = xstrdup(buf);
}

/* Name the tasks not reached, on f (prefix: PROG ": " on stderr). */
static void print_unreached(FILE *f, const char *prefix, const struct run *r)
{
    if (!r->nunreached)
        return;
    fprintf(f, "%snot reached: %zu %s%s whose back-end did not start, not sampled:", prefix,
            r->nunreached, r->job ? "node" : "task", r->nunreached == 1 ? "" : "s");
    for (size_t i = 0; i < r->nunreached; i++)
        fprintf(f, "%s %s", i ? "," : "", r->unreached[i]);
    fprintf(f, "%s (exit %d)\n", r->job ? " (every task of the job there)" : "",
            EXIT_UNREACHED);
}

/* The hosts to reach: the job's nodes, or those the tasks name. */
static char **remote_hosts(st_tasks_t *tasks, uint32_t job, size_t *nhp)
{
    char err[512];
    char **hosts = NULL;
    size_t nh = 0;
    if (job) {
        if (st_job_nodes(job, &hosts, &nh, err, sizeof err) != 0)
            die("%s", err);
    } else {
        hosts = xcalloc(tasks->n, sizeof *hosts);
        for (size_t i = 0; i < tasks->n; i++) {
            const char *h = tasks->v[i].host ? tasks->v[i].host : this_host();
            size_t k = 0;
            while (k < nh && strcmp(hosts[k], h) != 0)
                k++;
            if (k == nh)
                hosts[nh++] = xstrdup(h);
        }
    }
    *nhp = nh;
    return hosts;
}

/* Under --jobid: wait while the tree starts (the starter thread, st) for
 * the back-ends' srun step ending first, an interrupt, or Slurm holding
 * the step back (said once). Blocks on the step's pidfd and the starter's
 * eventfd. */
static void wait_srun_start(struct run *r, struct start *st, uint32_t job)
{
    /* The step's end before every back-end attached is a failure (its
     * messages are above); tbon_fe_create cannot see it. Slurm may also
     * hold the step back (srun retries quietly while the nodes are busy):
     * the user hears of it. */
    double note_at = now_s() + SRUN_NOTE_S;
    int noted = 0;
    while (!atomic_load(&st->done)) {
        int status, ms = noted ? -1 : ms_until(note_at);
        if (st->done_fd < 0 && (ms < 0 || ms > 100))
            ms = 100;       /* no eventfd: look at done every 100 ms */
        if (wait_child(r->srun, st->done_fd, ms, &status)) {
            g_srun = 0;
            die("--jobid %u: the back-ends' srun step ended (%s %d) before every back-end "
                "attached; srun's and the back-ends' messages are above", job,
                WIFEXITED(status) ? "status" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        }
        if (g_stop)
            die("interrupted while the tree started");
        if (!noted && now_s() >= note_at) {
            fprintf(stderr, PROG ": note: job %u: not every back-end has attached after "
                    "%.0f s; Slurm may be holding their srun step back (`squeue -s -j %u` "
                    "shows it)\n", job, SRUN_NOTE_S, job);
            noted = 1;
        }
    }
}

/* Start the tree of one back-end per host (leaf[k]: host k's rank): over
 * ssh for pids, as one srun step of the job with --jobid (its attach file
 * in -o's directory, which the nodes must share). r->net, or die. */
static void start_remote(const struct cli *c, const char *self, struct run *r, uint32_t job,
                         char **hosts, size_t nh, const tbon_rank_t *leaf)
{
    struct start st = { .topo = r->topo, .be_exe = job ? NULL : self, .done_fd = -1 };
    pthread_t starter;
    if (job) {
        char *dir = realpath(c->outdir, NULL);
        if (!dir)
            die("-o %s: %s", c->outdir, strerror(errno));
        r->attach = malloc(strlen(dir) + 64);
        if (!r->attach)
            die("out of memory");
        sprintf(r->attach, "%s/.tbon_stat.%s.%d.attach", dir, this_host(), (int)getpid());
        free(dir);
        st.attach = r->attach;
        g_attach = r->attach;
    }
    st.done_fd = job ? eventfd(0, EFD_CLOEXEC) : -1;
    int prc = pthread_create(&starter, NULL, start_tree, &st);
    if (prc != 0)
        die("pthread_create: %s", strerror(prc));
    if (job) {
        r->srun = g_srun = start_srun(job, hosts, nh, leaf, self, r->attach);
        wait_srun_start(r, &st, job);
    }
    pthread_join(starter, NULL);
    if (st.done_fd >= 0)
        close(st.done_fd);
    if (!st.net)
        die("starting the tree of %s: %s", r->topo, st.err.msg);
    r->net = st.net;
}

/* Hosts whose back-end did not start (left out of the start-up, the
 * library's warnings above say why): their tasks cannot be reached (the
 * others' are sampled, exit 3). down[k] marks them; their number. */
static size_t note_down(struct run *r, st_tasks_t *tasks, uint32_t job, char **hosts,
                        size_t nh, const tbon_rank_t *leaf, uint8_t *down)
{
    size_t ndown = 0;
    int nm = tbon_fe_missing(r->net, NULL, 0);
    if (nm > 0) {
        tbon_rank_t *m = xcalloc((size_t)nm, sizeof *m);
        nm = tbon_fe_missing(r->net, m, (size_t)nm);
        for (size_t k = 0; k < nh; k++)
            for (int j = 0; j < nm && !down[k]; j++)
                if (m[j] == leaf[k]) {
                    down[k] = 1;
                    ndown++;
                }
        free(m);
    }
    for (size_t k = 0; k < nh && job; k++)
        if (down[k])
            note_unreached(r, hosts[k], 0);
    for (size_t i = 0; i < tasks->n && !job && ndown; i++) {
        const char *h = tasks->v[i].host ? tasks->v[i].host : this_host();
        for (size_t k = 0; k < nh; k++)
            if (down[k] && strcmp(hosts[k], h) == 0)
                note_unreached(r, h, tasks->v[i].pid);
    }
    return ndown;
}

/* Ask every back-end which tasks it has: the job's (steps), or the pids
 * of tasks, each to the back-end of its host. The stream of the answers. */
static tbon_stream_t *ask_discover(struct run *r, st_tasks_t *tasks, uint32_t job,
                                   const uint32_t *steps, size_t nsteps, char **hosts,
                                   const tbon_rank_t *leaf)
{
    size_t nw = job ? 0 : tasks->n;
    int32_t *want = xcalloc(nw, sizeof *want);
    uint32_t *owner = xcalloc(nw, sizeof *owner);
    for (size_t i = 0; i < nw; i++) {
        const char *h = tasks->v[i].host ? tasks->v[i].host : this_host();
        size_t k = 0;
        while (strcmp(hosts[k], h) != 0)
            k++;
        want[i] = tasks->v[i].pid;
        owner[i] = leaf[k];
    }
    tbon_stream_t *s = tbon_fe_stream_new(r->net, tbon_fe_broadcast_comm(r->net),
                                          TBON_FILTER_NULL, TBON_SYNC_DONTWAIT,
                                          TBON_FILTER_NULL);
    if (!s || tbon_stream_send(s, TAG_DISCOVER, FMT_DISCOVER, job, steps, nsteps, want, nw,
                               owner, nw) != 0)
        die("asking the back-ends for their tasks: %s", tbon_net_error(r->net));
    free(want);
    free(owner);
    return s;
}

/* One back-end's answer p (FMT_FOUND, taken): its tasks into r->t, those
 * gone counted in *gone and the first named in goners. */
static void take_found(struct run *r, tbon_packet_t *p, char **hosts, size_t nh,
                       const tbon_rank_t *leaf, size_t *gone, char *goners, size_t glen)
{
    uint32_t be = 0, *tsteps = NULL, *states = NULL;
    int32_t *pids = NULL, *ranks = NULL, *sizes = NULL;
    size_t a = 0, b = 0, cc = 0, d = 0, e = 0;
    char *exe = NULL, *note = NULL;
    if (tbon_packet_unpack(p, FMT_FOUND, &be, &pids, &a, &ranks, &b, &sizes, &cc, &tsteps,
                           &d, &states, &e, &exe, &note) != 0 || a != b || a != cc ||
        a != d || a != e)
        die("a back-end's list of tasks of format \"%s\"", tbon_packet_format(p));
    tbon_packet_unref(p);
    size_t k = 0;
    while (k < nh && leaf[k] != be)
        k++;
    if (k == nh)
        die("a list of tasks from rank %u, which is no back-end", be);
    if (note[0])
        fprintf(stderr, PROG ": note: %s: %s\n", hosts[k], note);
    if (strcmp(r->exe, "?") == 0)
        snprintf(r->exe, sizeof r->exe, "%s", exe);
    struct task *nt = a ? realloc(r->t, (r->n + a) * sizeof *nt) : r->t;
    if (a && !nt)
        die("out of memory");
    r->t = nt;
    for (size_t i = 0; i < a; i++) {
        if (states[i] == FOUND_GONE) {
            size_t l = strlen(goners);
            if ((*gone)++ < 8)
                snprintf(goners + l, glen - l, "%s%s:%d", l ? ", " : "", hosts[k], pids[i]);
            continue;
        }
        r->t[r->n++] = (struct task){ .host = xstrdup(hosts[k]), .pid = pids[i],
                                      .rank = ranks[i], .size = sizes[i],
                                      .step = tsteps[i], .be = be };
    }
    free(pids);
    free(ranks);
    free(sizes);
    free(tsteps);
    free(states);
    free(exe);
    free(note);
}

/* Nothing to sample (a task gone, or no task of the job found): the tree
 * and the step end, and so does the run (EXIT_RUN). */
static void end_empty(struct run *r)
{
    tbon_net_destroy(r->net);
    r->net = NULL;
    if (r->srun)
        stop_srun(r->srun, 10);
    g_srun = 0;
    if (r->tmpdir[0]) {
        unlink(r->topo);
        rmdir(r->tmpdir);
    }
    exit(EXIT_RUN);
}

static void plan_remote(const struct cli *c, const char *self, st_tasks_t *tasks,
                        uint32_t job, const uint32_t *steps, size_t nsteps, struct run *r)
{
    double t0 = now_s();
    size_t nh;
    char **hosts = remote_hosts(tasks, job, &nh);
    r->job = job;
    r->nhosts = nh;
    tbon_rank_t *leaf = xcalloc(nh, sizeof *leaf);
    if (c->topology)
        fprintf(stderr, PROG ": note: -t is not used for tasks on other hosts: the tree has "
                "one back-end per host\n");
    remote_topology(r, hosts, nh, leaf);
    start_remote(c, self, r, job, hosts, nh, leaf);
    r->t_launch = now_s() - t0;
    uint8_t *down = xcalloc(nh, 1);
    size_t ndown = note_down(r, tasks, job, hosts, nh, leaf, down);

    /* Discovery: every back-end says what it has. */
    tbon_stream_t *s = ask_discover(r, tasks, job, steps, nsteps, hosts, leaf);
    size_t got = 0, gone = 0;
    double dl = now_s() + 60;
    char goners[400] = "";
    snprintf(r->exe, sizeof r->exe, "?");
    while (got < nh - ndown && !g_stop) {
        tbon_packet_t *p = NULL;
        int rc = tbon_stream_recv(s, &p, 200);
        if ((rc == TBON_ETIMEOUT || rc == TBON_ELOST) && now_s() < dl)
            continue;       /* lost: the back-ends that answered failed since */
        if (rc != 0)
            die("%zu of %zu back-ends said which tasks they have: %s", got, nh - ndown,
                rc == TBON_ETIMEOUT ? "timed out" : tbon_net_error(r->net));
        take_found(r, p, hosts, nh, leaf, &gone, goners, sizeof goners);
        got++;
    }
    if (g_stop)
        die("interrupted");
    r->t_find = now_s() - t0 - r->t_launch;
    if (gone)
        fprintf(stderr, PROG ": no such process: %s%s (nothing was sampled)\n", goners,
                gone > 8 ? ", ..." : "");
    if (job && r->n == 0) {
        fprintf(stderr, PROG ": job %u: no task found on its %zu node%s%s\n", job, nh,
                nh == 1 ? "" : "s", nsteps ? " in the steps asked for (--step)" :
                " (steps other than the batch and extern steps, and other than " PROG "'s)");
    }
    if (gone || r->n == 0)
        end_empty(r);
    number_tasks(r, job != 0);
    st_job_free_nodes(hosts, nh);
    free(leaf);
    free(down);
}

/* ------------------------------------------------------------ output */

/* Make dir and its parents (mkdir -p). */
static void make_dirs(const char *dir)
{
    char *p = xstrdup(dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            die("-o %s: %s: %s", dir, p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        die("-o %s: %s", dir, strerror(errno));
    free(p);
}

/* DIR/<exe>.tasks.txt: every task's number, rank, host, pid and step, and
 * its path in the merged 2D tree t (outermost first, " > " between). */
static void write_tasks(const char *dir, const char *exe, const struct run *r,
                        const st_tree_t *tree)
{
    char path[PATH_MAX];
    FILE *f = out_file(dir, exe, "tasks.txt", path, sizeof path);
    fprintf(f, "# task rank host pid step: path (the trees' sets are task numbers)\n");
    for (size_t i = 0; i < r->n; i++) {
        const struct task *t = &r->t[i];
        char rank[16] = "-", step[16] = "-";
        if (t->rank >= 0)
            snprintf(rank, sizeof rank, "%d", t->rank);
        if (t->step != ST_STEP_NONE)
            snprintf(step, sizeof step, "%u", t->step);
        fprintf(f, "%u %s %s %d %s:", t->id, rank, t->host, t->pid, step);
        const char **fr = NULL;
        size_t nf = st_tree_path(tree, t->id, &fr);
        for (size_t k = 0; k < nf; k++)
            fprintf(f, "%s%s", k ? " > " : " ", fr[k]);
        free(fr);
        fputc('\n', f);
    }
    for (size_t i = 0; i < r->nabsent; i++)
        fprintf(f, "%u %u - - -: [task not found]\n", r->absent[i], r->absent[i]);
    close_file(f, path);
}

/* DIR/<exe>.tasks.json: the same as tasks.txt without the paths, one
 * object per task: {"task", "rank", "host", "pid", "step"}, null for what
 * is not known (a host name that is not UTF-8 included). */
static void write_tasks_json(const char *dir, const char *exe, const struct run *r)
{
    char path[PATH_MAX];
    FILE *f = out_file(dir, exe, "tasks.json", path, sizeof path);
    json_t *all = json_array();
    int bad = !all;
    for (size_t i = 0; !bad && i < r->n + r->nabsent; i++) {
        const struct task *t = i < r->n ? &r->t[i] : NULL;
        uint32_t absent = t ? 0 : r->absent[i - r->n];
        json_t *host = t ? json_string(t->host) : NULL;
        /* An absent task: its number is its rank, nothing else is known. */
        bad = json_array_append_new(all, json_pack(
            "{s:I, s:o, s:o, s:o, s:o}",
            "task", (json_int_t)(t ? t->id : absent),
            "rank", !t ? json_integer(absent) : t->rank >= 0 ? json_integer(t->rank)
                                                           : json_null(),
            "host", host ? host : json_null(),
            "pid", t ? json_integer(t->pid) : json_null(),
            "step", t && t->step != ST_STEP_NONE ? json_integer(t->step) : json_null())) != 0;
    }
    if (bad || json_dumpf(all, f, JSON_COMPACT) != 0)
        die("%s: cannot write the JSON (out of memory or a write error)", path);
    json_decref(all);
    fputc('\n', f);
    close_file(f, path);
}

static void write_classes(const char *dir, const char *exe, const char *which,
                          const st_tree_t *t, struct run *r)
{
    char path[PATH_MAX], suffix[32];
    snprintf(suffix, sizeof suffix, "%s.classes.txt", which);
    FILE *f = out_file(dir, exe, suffix, path, sizeof path);
    if (st_tree_write_classes_named(t, f, task_name, r) < 0)
        die("%s: write error", path);
    close_file(f, path);
}

/* --------------------------------------------------------- the run */

/* -P of an srun whose tasks are on the job's nodes: the job (and its step
 * into steps[0], *nsteps 1, when Slurm names it), or die saying what to
 * give instead. */
static uint32_t follow_srun(const struct cli *c, pid_t srun, uint32_t *steps, size_t *nsteps)
{
    /* Its step, by the srun's host and pid; else its job, from the
     * environment it was started with (inside an allocation). */
    char err[512] = "";
    uint32_t j = 0, sid;
    size_t len = 0;
    char *env = NULL;
    long long ej = -1;
    if (st_job_of_srun(this_host(), srun, &j, &sid, err, sizeof err) == 0) {
        fprintf(stderr, PROG ": -P %d: srun %d runs job %u step %u, whose tasks are on "
                "the job's nodes: sampling them there (as --jobid %u --step %u)\n",
                (int)c->launcher, (int)srun, j, sid, j, sid);
        steps[0] = sid;
        *nsteps = 1;
    } else if ((env = st_proc_environ(srun, &len)) &&
               st_env_get(env, len, "SLURM_JOB_ID") &&
               (ej = strtoll(st_env_get(env, len, "SLURM_JOB_ID"), NULL, 10)) > 0 &&
               ej < 0xfffffff0ll) {
        j = (uint32_t)ej;
        fprintf(stderr, PROG ": -P %d: srun %d runs its tasks in job %u (its "
                "SLURM_JOB_ID), whose step Slurm did not name (%s): sampling every "
                "step of the job (as --jobid %u)\n", (int)c->launcher, (int)srun, j,
                err, j);
    } else {
        die("-P %d: %s%s%d runs its tasks on other hosts, and %s; give the job with "
            "--jobid (squeue shows it)", (int)c->launcher,
            srun == c->launcher ? "" : "its srun ",
            srun == c->launcher ? "srun " : "", (int)srun, err);
    }
    free(env);
    return j;
}

/* The tasks the command line names (-p, --pids-file, -P, or the command
 * launched here): into tasks, or for a job into *job (and steps). 0, or
 * an error whose message is in err. */
static int find_tasks(const struct cli *c, struct run *r, st_tasks_t *tasks, uint32_t *job,
                      uint32_t *steps, size_t *nsteps, char *err, size_t errlen)
{
    if (c->pids)
        return st_tasks_parse_list(tasks, c->pids, err, errlen);
    if (c->pids_file)
        return st_tasks_read_file(tasks, c->pids_file, err, errlen);
    if (c->launcher) {
        /* An srun's tasks are on the job's nodes: follow them there. */
        pid_t srun = 0;
        char hosts[512] = "";
        int kind = st_tasks_launcher_remote(c->launcher, &srun, hosts, sizeof hosts);
        if (kind == ST_REMOTE_SRUN) {
            *job = follow_srun(c, srun, steps, nsteps);
            return 0;
        }
        if (kind == ST_REMOTE_SSH)
            die("-P %d: its tasks run on other hosts too (%s, started over ssh/rsh): -P "
                "samples this host's only; give them as -p HOST:PID,... or run the job "
                "under Slurm and use --jobid", (int)c->launcher, hosts);
        return st_tasks_from_launcher(tasks, c->launcher, err, errlen);
    }
    if (c->command) {
        r->launched = launch(c->command, c->wait_s);
        return st_tasks_from_launcher(tasks, r->launched, err, errlen);
    }
    return 0;
}

/* The sample request's columns: each task's pid, id and back-end. */
struct req {
    int32_t *pids;
    uint32_t *ids, *owner;
};

/* What the sampling got: whether any result came, how many asks again,
 * how long it took. */
struct sampled {
    int got, asks;
    double t_sample;
};

/* Send the request on s and merge whatever comes into t2 and t3 until
 * every task is in. Results that died with a commnode leave a gap: once
 * nothing has come for a while, ask every back-end to send its trees
 * again; the merge is idempotent, so late or repeated results change
 * nothing. While back-ends are cut off (their commnode died and nobody has
 * adopted them yet: tbon_fe_cut_off) an ask would not reach them: wait
 * until each is adopted or taken for failed. A back-end that is alive is
 * waited for, however slow the machine (the asks back off up to
 * RESEND_MAX_S), until the budget is spent; tasks of back-ends that failed
 * are given up at once. */
static struct sampled sample_merge(const struct cli *c, struct run *r, tbon_stream_t *s,
                                   const struct req *q, st_tree_t *t2, st_tree_t *t3)
{
    tbon_net_t *net = r->net;
    char err[512] = "";
    struct sampled o = { 0 };
    double t1 = now_s();
    if (tbon_stream_send(s, TAG_SAMPLE, FMT_REQ, q->pids, r->n, q->ids, r->n, q->owner, r->n,
                         c->samples, c->interval_ms, c->flags) != 0)
        die("sending the request: %s", tbon_net_error(net));
    /* Time enough for every sample of every task. */
    int budget_ms = (int)(c->samples * (c->interval_ms + 50) + 30000 + r->n * 20);
    int waited_cut = 0;
    double quiet = RESEND_QUIET_S;
    double dl = now_s() + budget_ms / 1000.0, last = now_s();
    uint64_t have = 0;
    while (!g_stop && now_s() < dl) {
        tbon_packet_t *p = NULL;
        int rr = tbon_stream_recv(s, &p, 200);
        if (rr == 0) {
            if (take(p, t2, t3, err, sizeof err) != 0)
                die("a result from the tree: %s", err);
            tbon_packet_unref(p);
            o.got = 1;
            last = now_s();
            st_range_t *rg = NULL;
            st_tree_tasks(t2, &rg, &have);
            free(rg);
            if (have >= r->n)
                break;
            continue;
        }
        if (rr == TBON_ELOST) {
            o.got = 1;      /* what was lost with failed nodes is asked for again */
            continue;
        }
        if (rr != TBON_ETIMEOUT) {
            fprintf(stderr, PROG ": no more results: %s\n", tbon_net_error(net));
            break;
        }
        if (!o.got || now_s() - last < quiet)
            continue;
        int cut = tbon_fe_cut_off(net, NULL, 0);
        if (cut > 0) {
            if (!waited_cut)
                fprintf(stderr, PROG ": %" PRIu64 " of %zu tasks in the merge; waiting for "
                        "%d back-end%s to be adopted\n", have, r->n, cut, cut == 1 ? "" : "s");
            waited_cut = 1;
            last = now_s();
            continue;
        }
        if (waited_cut)
            quiet = RESEND_QUIET_S;     /* the tree changed: ask soon again */
        waited_cut = 0;
        if (missing_alive(t2, r, net) == 0)
            break;                      /* the rest failed with their back-ends */
        fprintf(stderr, PROG ": %" PRIu64 " of %zu tasks in the merge; asking again\n", have, r->n);
        /* The request again: a back-end it never reached samples now. */
        ++o.asks;
        if (tbon_stream_send(s, TAG_RESEND, FMT_REQ, q->pids, r->n, q->ids, r->n, q->owner,
                             r->n, c->samples, c->interval_ms, c->flags) != 0)
            break;
        last = now_s();
        quiet = quiet * 2 < RESEND_MAX_S ? quiet * 2 : RESEND_MAX_S;
    }
    if (!o.got && !g_stop)
        fprintf(stderr, PROG ": no result from the tree (%s)\n",
                now_s() >= dl ? "timed out" : tbon_net_error(net));
    o.t_sample = now_s() - t1;
    return o;
}

/* The session ends: the nodes that failed counted, the tree, the srun
 * step, the command launched (unless --keep) and the topology file gone. */
static size_t end_session(const struct cli *c, struct run *r)
{
    tbon_event_t ev;
    size_t failed = 0;
    while (tbon_net_next_event(r->net, &ev, 0) == 0)
        failed += ev.type == TBON_EV_NODE_FAILED;
    tbon_net_destroy(r->net);
    r->net = NULL;
    if (r->srun)
        stop_srun(r->srun, 10);
    g_srun = 0;
    g_attach = NULL;
    if (r->launched && !c->keep)
        stop_command(r->launched);
    if (r->tmpdir[0]) {
        unlink(r->topo);
        rmdir(r->tmpdir);
    }
    g_topo = NULL;
    return failed;
}

/* The files of the run in dir (the trees, their classes, the tasks, the
 * figures); *svg: whether dot drew the trees. */
static void write_results(const struct cli *c, struct run *r, const char *dir, st_tree_t *t2,
                          st_tree_t *t3, int *svg, size_t nbe, const struct sampled *o,
                          size_t missing, size_t failed)
{
    double t2s = now_s();
    const char *exe = r->exe;
    write_tree(dir, exe, "2D", t2, svg);
    write_tree(dir, exe, "3D", t3, svg);
    write_classes(dir, exe, "2D", t2, r);
    write_classes(dir, exe, "3D", t3, r);
    write_tasks(dir, exe, r, t2);
    write_tasks_json(dir, exe, r);
    char path[PATH_MAX];
    FILE *f = out_file(dir, exe, "perf", path, sizeof path);
    double t_write = now_s() - t2s;
    fprintf(f, "tasks %zu\nhosts %zu\nbackends %zu\nsamples %u\ninterval_ms %u\n", r->n,
            r->nhosts, nbe, c->samples, c->interval_ms);
    fprintf(f, "find_tasks_s %.6f\nlaunch_tree_s %.6f\nsample_merge_s %.6f\nwrite_s %.6f\n",
            r->t_find, r->t_launch, o->t_sample, t_write);
    fprintf(f, "nodes_2d %zu\nnodes_3d %zu\nmissing %zu\nnot_found %zu\nfailed_nodes %zu\n"
            "resends %d\nunreached %zu\n", st_tree_size(t2), st_tree_size(t3), missing,
            r->nabsent, failed, o->asks, r->nunreached);
    close_file(f, path);
}

/* What the user reads: the merged tree and its classes (unless -q), the
 * summary line, where the files are, what was not reached. */
static void print_results(const struct cli *c, const struct run *r, const char *dir,
                          st_tree_t *t2, int svg, size_t nbe, double t_sample, size_t missing)
{
    const char *exe = r->exe;
    if (!c->quiet) {
        printf("Merged stack traces of %zu tasks on %zu host%s (last sample of %u, ranks "
               "from %s):\n\n", r->n, r->nhosts, r->nhosts == 1 ? "" : "s", c->samples,
               r->ranks_from);
        st_tree_write_text(t2, stdout);
        printf("\nEquivalence classes (tasks with the same call paths):\n");
        st_tree_write_classes_named(t2, stdout, task_name, (void *)r);
        printf("\n");
    }
    printf("%zu tasks, %zu back-ends: tree up in %.3f s, %u sample%s and merge in %.3f s%s\n",
           r->n, nbe, r->t_launch, c->samples, c->samples == 1 ? "" : "s", t_sample,
           missing ? " (some tasks not sampled: see the tree)" : "");
    printf("results: %s/%s.{2D,3D}.{dot,json,txt,classes.txt%s}, %s/%s.{tasks.txt,tasks.json,"
           "perf}\n",
           dir, exe, svg ? ",svg" : "", dir, exe);
    print_unreached(stdout, "", r);
    print_unreached(stderr, PROG ": ", r);
    if (r->incomplete)
        fprintf(stderr, PROG ": the job's tasks were not all found (see above): exit 1\n");
}

static void free_run(struct run *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->t[i].host);
    free(r->t);
    free(r->absent);
    for (size_t i = 0; i < r->nunreached; i++)
        free(r->unreached[i]);
    free(r->unreached);
    free(r->attach);
    free(r->topo);
}

static int fe_main(const struct cli *c, char *self)
{
    double t_start = now_s();
    st_tasks_t tasks = { 0 };
    char err[512] = "";
    struct run run = { 0 }, *r = &run;
    uint32_t job = c->jobid;
    uint32_t steps[ST_MAX_STEPS];
    size_t nsteps = c->nsteps;
    memcpy(steps, c->steps, sizeof steps);
    if (find_tasks(c, r, &tasks, &job, steps, &nsteps, err, sizeof err) != 0) {
        if (r->launched)
            stop_command(r->launched);
        fprintf(stderr, PROG ": %s\n", err);
        st_tasks_free(&tasks);
        return c->pids || c->pids_file ? EXIT_USAGE : EXIT_RUN;
    }
    make_dirs(c->outdir);
    char *filter = filter_path();
    if (!filter)
        die("cannot find stat_merge.so (set TBON_STAT_FILTER to its path)");
    r->t_find = now_s() - t_start;
    st_tasks_unique(&tasks);            /* the number of tasks the tree is for */
    if (job || st_tasks_remote(&tasks))
        plan_remote(c, self, &tasks, job, steps, nsteps, r);
    else
        plan_local(c, self, &tasks, r);
    st_tasks_free(&tasks);
    if (strcmp(r->exe, "?") == 0)
        snprintf(r->exe, sizeof r->exe, "stat");
    qsort(r->t, r->n, sizeof *r->t, by_id);
    tbon_net_t *net = r->net;
    size_t nbe = tbon_net_num_backends(net);
    struct req q = { xcalloc(r->n, sizeof *q.pids), xcalloc(r->n, sizeof *q.ids),
                     xcalloc(r->n, sizeof *q.owner) };
    for (size_t i = 0; i < r->n; i++) {
        q.pids[i] = r->t[i].pid;
        q.ids[i] = r->t[i].id;
        q.owner[i] = r->t[i].be;
    }
    int fid = tbon_fe_load_filter(net, filter, "stat_merge");
    if (fid < 0)
        die("loading %s: %s", filter, tbon_net_error(net));
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), fid,
                                          TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    if (!s)
        die("a stream: %s", tbon_net_error(net));
    st_tree_t *t2 = st_tree_new(), *t3 = st_tree_new();
    if (!t2 || !t3)
        die("out of memory");
    struct sampled o = sample_merge(c, r, s, &q, t2, t3);
    const char *why = g_stop ? "[not sampled: interrupted]" : o.got ? "[not sampled: back-end lost]"
                                                              : "[not sampled: no result]";
    size_t missing = fill_missing(t2, r, why);
    fill_missing(t3, r, why);
    for (size_t i = 0; i < r->nabsent; i++) {
        const char *frame[] = { "[task not found]" };
        st_tree_add(t2, frame, 1, r->absent[i]);
        st_tree_add(t3, frame, 1, r->absent[i]);
    }
    size_t failed = end_session(c, r);
    char *dir = run_dir(c->outdir, r->exe);
    int svg = 1;                        /* until dot is missing or fails */
    write_results(c, r, dir, t2, t3, &svg, nbe, &o, missing, failed);
    print_results(c, r, dir, t2, svg, nbe, o.t_sample, missing);
    st_tree_free(t2);
    st_tree_free(t3);
    int rc = g_stop || r->incomplete ? EXIT_RUN : r->nunreached ? EXIT_UNREACHED : 0;
    free_run(r);
    free(dir);
    free(filter);
    free(q.pids);
    free(q.ids);
    free(q.owner);
    return rc;
}

int main(int argc, char **argv)
{
    /* A back-end is started as "tbon_stat --be <the tree's own arguments>",
     * or for --jobid as "tbon_stat --be-attach FILE MAP". */
    if (argc > 1 && strcmp(argv[1], "--be") == 0)
        return be_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--be-attach") == 0)
        return be_attach_main(argc, argv);
    struct cli c;
    parse_cli(argc, argv, &c);
    if (pipe2(g_sigpipe, O_CLOEXEC | O_NONBLOCK) != 0)
        g_sigpipe[0] = g_sigpipe[1] = -1;   /* the waits then wake every 200 ms at most */
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    char self[PATH_MAX];
    self_exe(self, sizeof self);
    if (!self[0])
        die("/proc/self/exe: %s", strerror(errno));
    return fe_main(&c, self);
}
