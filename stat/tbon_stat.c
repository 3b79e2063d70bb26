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

#include "st_ptree.h"
#include "st_tasks.h"
#include "st_walker.h"
#include "topology.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG       "tbon_stat"
#define EXIT_RUN   1
#define EXIT_USAGE 2
#define TAG_SAMPLE (TBON_FIRST_APP_TAG)
#define TAG_RESEND (TBON_FIRST_APP_TAG + 1)
#define FMT_REQ    "%ad %aud %aud %ud %ud %ud"
#define FMT_TREES  "%auc %auc"
#define FLAG_THREADS 1u
#define FLAG_LINES   2u
#define FLAG_MODULES 4u
#define TASKS_PER_BE 16     /* default topology: one back-end per this many tasks, */
#define BES_PER_CPU 2       /* and at most this many per CPU of this host */
#define DEFAULT_FANOUT 8
#define RESENDS 3           /* asks again for tasks missing from the merge */
#define RESEND_QUIET_S 0.5  /* ... after this long without a result */

struct cli {
    const char *pids, *pids_file, *topology, *outdir;
    pid_t launcher;
    char **command;          /* -C: argv of the command to launch */
    unsigned samples, interval_ms, flags;
    double wait_s;           /* -C: before sampling */
    int quiet, keep;
};

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(EXIT_RUN);
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [options] -p PID,PID,...\n"
"       " PROG " [options] --pids-file FILE\n"
"       " PROG " [options] -P LAUNCHER_PID\n"
"       " PROG " [options] -C COMMAND [ARGS...]\n"
"\n"
"Sample the stack traces of a job's processes with a tree of back-ends and\n"
"merge them into one call-prefix tree: each edge is labelled with the number\n"
"of tasks that took it and their ranks, e.g. 4:[0-2,7].\n"
"\n"
"Which tasks:\n"
"  -p PIDS            a comma-separated list of process ids\n"
"  --pids-file FILE   process ids, one or more per line ('#' comments)\n"
"  -P PID             the descendants of a launcher (mpirun, srun, a shell)\n"
"                     that run the executable most of them run\n"
"  -C COMMAND...      launch COMMAND (the rest of the line), wait -s seconds,\n"
"                     sample its descendants (or itself), then stop it\n"
"  -s SECONDS         with -C: how long to let it run first (default 1)\n"
"  --keep             with -C: leave the command running at the end\n"
"A task's rank comes from OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or\n"
"SLURM_PROCID in its environment when every task has one, else from its\n"
"position in the list.\n"
"\n"
"Sampling:\n"
"  -n N               samples per task (default 10)\n"
"  -i MS              milliseconds between samples (default 100)\n"
"  --threads          every thread of each task (default: the main thread)\n"
"  --lines            source file:line of each frame, where known\n"
"  --modules          the shared object of each frame\n"
"  -t FILE            the tree's topology (default: one back-end per %d tasks,\n"
"                     at most %d per CPU, fan-out %d, on this host)\n"
"\n"
"Output:\n"
"  -o DIR             results under DIR/<exe>.NNNN/ (default stat_results):\n"
"                     <exe>.2D.dot (last sample), <exe>.3D.dot (all samples),\n"
"                     .json, .txt (indented) and .classes.txt of both, .svg\n"
"                     when Graphviz's dot is installed, and <exe>.perf (times)\n"
"  -q                 no tree on the terminal (the summary only)\n"
"  -h, --help         this text\n"
"\n"
"Targets are stopped only while sampled (ptrace interrupt, no SIGSTOP) and\n"
"always resumed, also when " PROG " is killed. Exit: 0 done, 1 failure,\n"
"2 usage.\n", TASKS_PER_BE, BES_PER_CPU, DEFAULT_FANOUT);
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

enum { OPT_PIDS_FILE = 256, OPT_THREADS, OPT_LINES, OPT_MODULES, OPT_KEEP, OPT_BE };

static void parse_cli(int argc, char **argv, struct cli *c)
{
    static const struct option longs[] = {
        { "pids-file", required_argument, NULL, OPT_PIDS_FILE },
        { "threads", no_argument, NULL, OPT_THREADS },
        { "lines", no_argument, NULL, OPT_LINES },
        { "modules", no_argument, NULL, OPT_MODULES },
        { "keep", no_argument, NULL, OPT_KEEP },
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
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(EXIT_USAGE);
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument \"%s\" (see --help)\n", argv[optind]);
        exit(EXIT_USAGE);
    }
    if (sources != 1) {
        fprintf(stderr, PROG ": give exactly one of -p, --pids-file, -P and -C (see --help)\n");
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

/* Sample the tasks given to rank me with w: n samples, interval ms apart;
 * the 2D tree has the last one, the 3D tree all of them. */
static int be_sample(st_walker_t *w, const int32_t *pids, const uint32_t *ranks,
                     const uint32_t *owner, size_t nt, tbon_rank_t me, unsigned n,
                     unsigned interval, st_tree_t *t2, st_tree_t *t3)
{
    int rc = 0;
    for (unsigned s = 0; s < n && rc == 0; s++) {
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

/* For the tests only: $TBON_STAT_TEST_SLOW = "RANK:MS" holds back back-end
 * RANK's result that long, so that a test can kill its commnode after its
 * siblings' results reached it and before this one did (the packets then
 * die with it, and the front-end must ask again). */
static void test_delay(tbon_rank_t me)
{
    const char *v = getenv("TBON_STAT_TEST_SLOW");
    unsigned r, ms;
    if (v && sscanf(v, "%u:%u", &r, &ms) == 2 && r == me && ms <= 60000) {
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
}

static int be_main(int argc, char **argv)
{
    /* The walker keeps each task's state (a few open files) for the next
     * sample, up to RLIMIT_NOFILE / 16 tasks: take the hard limit (a
     * common soft limit of 1,024 would keep 64). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
        if (want > rl.rlim_cur) {
            rl.rlim_cur = want;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_be_create(&argc, &argv, &err);
    if (!net) {
        fprintf(stderr, PROG " --be: %s\n", err.msg);
        return EXIT_RUN;
    }
    tbon_rank_t me = tbon_net_rank(net);
    st_tree_t *t2 = st_tree_new(), *t3 = st_tree_new();
    int rc = t2 && t3 ? 0 : TBON_ENOMEM;
    while (rc == 0) {
        tbon_packet_t *p = NULL;
        tbon_stream_t *s = NULL;
        rc = tbon_net_recv(net, &p, &s, -1);
        if (rc != 0)
            break;
        int tag = tbon_packet_tag(p);
        if (tag == TAG_SAMPLE) {
            int32_t *pids = NULL;
            uint32_t *ranks = NULL, *owner = NULL, n, interval, flags;
            size_t np = 0, nr = 0, no = 0;
            if (tbon_packet_unpack(p, FMT_REQ, &pids, &np, &ranks, &nr, &owner, &no, &n,
                                   &interval, &flags) != 0 || np != nr || np != no) {
                fprintf(stderr, PROG " --be: rank %u: malformed request (\"%s\")\n", me,
                        tbon_packet_format(p));
                rc = TBON_EFORMAT;
            } else {
                st_tree_free(t2);
                st_tree_free(t3);
                t2 = st_tree_new();
                t3 = st_tree_new();
                st_walker_t *w = t2 && t3 ? be_walker(flags) : NULL;
                rc = w ? be_sample(w, pids, ranks, owner, np, me, n, interval, t2, t3)
                       : TBON_ENOMEM;
                test_delay(me);
                if (rc == 0)
                    rc = be_send(s, TAG_SAMPLE, t2, t3);
                /* The walker's files and maps go after the result did. */
                st_walker_free(w);
            }
            free(pids);
            free(ranks);
            free(owner);
        } else if (tag == TAG_RESEND) {
            rc = be_send(s, TAG_RESEND, t2, t3);   /* the merge is idempotent */
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
        if (waitpid(pid, &status, WNOHANG) == pid)
            die("-C %s: it ended (status %d) before it could be sampled", cmd[0],
                WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        struct timespec ts = { 0, 20 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return pid;
}

static void stop_command(pid_t pid)
{
    kill(-pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            break;
        struct timespec ts = { 0, 20 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, WNOHANG);
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
    const char *hosts[] = { "localhost" };
    tbon_error_t err = { 0 };
    tb_topology_t *t = tb_topology_gen_fanout(DEFAULT_FANOUT, nbe, hosts, 1, &err);
    if (!t)
        die("generating a topology for %zu tasks: %s", ntasks, err.msg);
    snprintf(dir_out, cap, "/tmp/tbon_stat.XXXXXX");
    if (!mkdtemp(dir_out))
        die("mkdtemp: %s", strerror(errno));
    char *path = malloc(strlen(dir_out) + 16);
    if (!path)
        die("out of memory");
    sprintf(path, "%s/tree.top", dir_out);
    if (tb_topology_write_file(t, path, false, PROG " default topology", &err) != 0)
        die("writing %s: %s", path, err.msg);
    tb_topology_destroy(t);
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
    snprintf(suffix, sizeof suffix, "%s.classes.txt", which);
    f = out_file(dir, exe, suffix, path, sizeof path);
    if (st_tree_write_classes(t, f) < 0)
        die("%s: write error", path);
    close_file(f, path);
}

/* Add the tasks missing from t (the root's set) under one frame naming why. */
static size_t fill_missing(st_tree_t *t, const st_tasks_t *tasks, const char *why)
{
    st_range_t *r = NULL;
    uint64_t cnt = 0;
    size_t nr = st_tree_tasks(t, &r, &cnt), j = 0, added = 0;
    const char *frame[] = { why };
    for (size_t i = 0; i < tasks->n; i++) {
        uint32_t x = tasks->v[i].rank;
        while (j < nr && r[j].hi < x)
            j++;
        if (j < nr && r[j].lo <= x)
            continue;
        if (st_tree_add(t, frame, 1, x) == 0)
            added++;
    }
    free(r);
    return added;
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
    char *self;
    tbon_net_t *net;
    tbon_error_t err;
};

static void *start_tree(void *arg)
{
    struct start *st = arg;
    const char *const be_argv[] = { "--be", NULL };
    tbon_fe_options_t o = { 0 };
    o.startup_timeout_ms = 120000;
    st->net = tbon_fe_create(st->topo, st->self, be_argv, &o, &st->err);
    return NULL;
}

static int fe_main(const struct cli *c, char *self)
{
    double t_start = now_s();
    st_tasks_t tasks = { 0 };
    char err[512] = "";
    pid_t launched = 0;
    int rc = 0;
    if (c->pids)
        rc = st_tasks_parse_list(&tasks, c->pids, err, sizeof err);
    else if (c->pids_file)
        rc = st_tasks_read_file(&tasks, c->pids_file, err, sizeof err);
    else if (c->launcher)
        rc = st_tasks_from_launcher(&tasks, c->launcher, err, sizeof err);
    else {
        launched = launch(c->command, c->wait_s);
        rc = st_tasks_from_launcher(&tasks, launched, err, sizeof err);
    }
    if (rc) {
        if (launched)
            stop_command(launched);
        fprintf(stderr, PROG ": %s\n", err);
        st_tasks_free(&tasks);
        return c->pids || c->pids_file ? EXIT_USAGE : EXIT_RUN;
    }
    st_tasks_unique(&tasks);            /* the number of tasks the tree is for */
    char *filter = filter_path();
    if (!filter)
        die("cannot find stat_merge.so (set TBON_STAT_FILTER to its path)");
    char tmpdir[64] = "";
    char *topo = c->topology ? strdup(c->topology)
                             : default_topology(tasks.n, tmpdir, sizeof tmpdir);

    /* The tree starts in a thread while this one reads the tasks' ranks
     * from their environments (a few milliseconds for a few hundred). */
    double t0 = now_s();
    struct start st = { .topo = topo, .self = self };
    pthread_t starter;
    bool threaded = pthread_create(&starter, NULL, start_tree, &st) == 0;
    if (!threaded)
        start_tree(&st);
    int env_ranks = st_tasks_rank(&tasks);
    if (threaded)
        pthread_join(starter, NULL);
    tbon_net_t *net = st.net;
    char exe[NAME_MAX + 1];
    snprintf(exe, sizeof exe, "%s", st_task_exe_name(tasks.v[0].pid));
    if (strcmp(exe, "?") == 0)
        snprintf(exe, sizeof exe, "stat");
    if (!net) {
        if (launched && !c->keep)
            stop_command(launched);
        die("starting the tree of %s: %s", topo, st.err.msg);
    }
    double t_launch = now_s() - t0;
    size_t nbe = tbon_net_num_backends(net);
    tbon_rank_t *bes = malloc(nbe * sizeof *bes);
    int32_t *pids = malloc(tasks.n * sizeof *pids);
    uint32_t *ranks = malloc(tasks.n * sizeof *ranks), *owner = malloc(tasks.n * sizeof *owner);
    if (!bes || !pids || !ranks || !owner || tbon_net_backends(net, bes, nbe) != (int)nbe)
        die("out of memory");
    for (size_t i = 0; i < tasks.n; i++) {
        pids[i] = tasks.v[i].pid;
        ranks[i] = tasks.v[i].rank;
        owner[i] = bes[i * nbe / tasks.n];        /* contiguous blocks of ranks */
    }
    int fid = tbon_fe_load_filter(net, filter, "stat_merge");
    if (fid < 0)
        die("loading %s: %s", filter, tbon_net_error(net));
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), fid,
                                          TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    if (!s)
        die("a stream: %s", tbon_net_error(net));

    double t1 = now_s();
    st_tree_t *t2 = st_tree_new(), *t3 = st_tree_new();
    if (!t2 || !t3)
        die("out of memory");
    if (tbon_stream_send(s, TAG_SAMPLE, FMT_REQ, pids, tasks.n, ranks, tasks.n, owner, tasks.n,
                         c->samples, c->interval_ms, c->flags) != 0)
        die("sending the request: %s", tbon_net_error(net));
    /* Time enough for every sample of every task. */
    int budget_ms = (int)(c->samples * (c->interval_ms + 50) + 30000 + tasks.n * 20);
    /* Merge whatever comes until every task is in. Results that died with a
     * commnode leave a gap: once nothing has come for a while, ask every
     * back-end to send its trees again (RESENDS times at most); the merge is
     * idempotent, so late or repeated results change nothing. */
    int got = 0, resends = 0;
    double dl = now_s() + budget_ms / 1000.0, last = now_s();
    uint64_t have = 0;
    while (!g_stop && now_s() < dl) {
        tbon_packet_t *p = NULL;
        int r = tbon_stream_recv(s, &p, 200);
        if (r == 0) {
            if (take(p, t2, t3, err, sizeof err) != 0)
                die("a result from the tree: %s", err);
            tbon_packet_unref(p);
            got = 1;
            last = now_s();
            st_range_t *rr = NULL;
            st_tree_tasks(t2, &rr, &have);
            free(rr);
            if (have >= tasks.n)
                break;
            continue;
        }
        if (r != TBON_ETIMEOUT) {
            fprintf(stderr, PROG ": no more results: %s\n", tbon_net_error(net));
            break;
        }
        if (got && now_s() - last >= RESEND_QUIET_S) {
            if (resends == RESENDS)
                break;
            fprintf(stderr, PROG ": %" PRIu64 " of %zu tasks in the merge; asking again\n",
                    have, tasks.n);
            if (tbon_stream_send(s, TAG_RESEND, "%d", ++resends) != 0)
                break;
            last = now_s();
        }
    }
    if (!got && !g_stop)
        fprintf(stderr, PROG ": no result from the tree (%s)\n",
                now_s() >= dl ? "timed out" : tbon_net_error(net));
    double t_sample = now_s() - t1;
    const char *why = g_stop ? "[not sampled: interrupted]" : got ? "[not sampled: back-end lost]"
                                                            : "[not sampled: no result]";
    size_t missing = fill_missing(t2, &tasks, why);
    fill_missing(t3, &tasks, why);
    tbon_event_t ev;
    size_t failed = 0;
    while (tbon_net_next_event(net, &ev, 0) == 0)
        failed += ev.type == TBON_EV_NODE_FAILED;
    tbon_net_destroy(net);
    if (launched && !c->keep)
        stop_command(launched);
    if (tmpdir[0]) {
        unlink(topo);
        rmdir(tmpdir);
    }

    double t2s = now_s();
    char *dir = run_dir(c->outdir, exe);
    int svg = 1;                        /* until dot is missing or fails */
    write_tree(dir, exe, "2D", t2, &svg);
    write_tree(dir, exe, "3D", t3, &svg);
    char path[PATH_MAX];
    FILE *f = out_file(dir, exe, "perf", path, sizeof path);
    double t_write = now_s() - t2s;
    fprintf(f, "tasks %zu\nbackends %zu\nsamples %u\ninterval_ms %u\n", tasks.n, nbe,
            c->samples, c->interval_ms);
    fprintf(f, "find_tasks_s %.6f\nlaunch_tree_s %.6f\nsample_merge_s %.6f\nwrite_s %.6f\n",
            t0 - t_start, t_launch, t_sample, t_write);
    fprintf(f, "nodes_2d %zu\nnodes_3d %zu\nmissing %zu\nfailed_nodes %zu\nresends %d\n",
            st_tree_size(t2), st_tree_size(t3), missing, failed, resends);
    close_file(f, path);

    if (!c->quiet) {
        printf("Merged stack traces of %zu tasks (last sample of %u, ranks from %s):\n\n",
               tasks.n, c->samples, env_ranks ? "their environment" : "list order");
        st_tree_write_text(t2, stdout);
        printf("\nEquivalence classes (tasks with the same call paths):\n");
        st_tree_write_classes(t2, stdout);
        printf("\n");
    }
    printf("%zu tasks, %zu back-ends: tree up in %.3f s, %u sample%s and merge in %.3f s%s\n",
           tasks.n, nbe, t_launch, c->samples, c->samples == 1 ? "" : "s", t_sample,
           missing ? " (some tasks not sampled: see the tree)" : "");
    printf("results: %s/%s.{2D,3D}.{dot,json,txt,classes.txt%s}, %s/%s.perf\n", dir, exe,
           svg ? ",svg" : "", dir, exe);
    st_tree_free(t2);
    st_tree_free(t3);
    st_tasks_free(&tasks);
    free(dir);
    free(topo);
    free(filter);
    free(bes);
    free(pids);
    free(ranks);
    free(owner);
    return g_stop ? EXIT_RUN : 0;
}

int main(int argc, char **argv)
{
    /* A back-end is started as "tbon_stat --be <the tree's own arguments>". */
    if (argc > 1 && strcmp(argv[1], "--be") == 0)
        return be_main(argc, argv);
    struct cli c;
    parse_cli(argc, argv, &c);
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    char self[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0)
        die("/proc/self/exe: %s", strerror(errno));
    self[k] = '\0';
    return fe_main(&c, self);
}
