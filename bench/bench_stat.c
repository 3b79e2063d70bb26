/* bench_stat.c - tbon_stat against a loop of eu-stack: the time to attach to,
 * sample once and merge the stack traces of 256 and 1,024 processes
 * (stat/examples/stat_hang workers), beside `eu-stack -p PID` run for each of
 * the same processes, one after the other, in the same run.
 *
 * Usage: bench_stat [--tasks N[,N...]] [--reps R]   (default 256,1024 and 7;
 *                                                    eu-stack: the median of 3 loops)
 * Markdown rows on stdout (bench/run.sh collects them); progress on stderr.
 * Every tbon_stat run must exit 0 with every task in its merged tree.
 * At 256 tasks also: ten samples through one tbon_stat --session (start,
 * 10 x sample, stop) beside ten separate runs, in the same run.
 */
#include "lib/bench.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG "bench_stat"
#define MAXT 4096
#define EU_REPS 3           /* loops of eu-stack, for their median */
#define SESSION_SAMPLES 10  /* samples through one --session (256 tasks) */

static char build[PATH_MAX], tmp[64];
static pid_t hang_parent;
static pid_t workers[MAXT];
static size_t nworkers;

static void die(const char *what)
{
    if (hang_parent > 0)
        kill(hang_parent, SIGKILL);
    bench_die(PROG, what);
}

/* The build directory: the parent of this program's bench/. */
static void find_build(void)
{
    ssize_t k = readlink("/proc/self/exe", build, sizeof build - 1);
    if (k <= 0)
        die("readlink /proc/self/exe");
    build[k] = '\0';
    for (int i = 0; i < 2; i++) {
        char *s = strrchr(build, '/');
        if (!s)
            die("finding the build directory");
        *s = '\0';
    }
}

static double wait_status(pid_t pid, int *status)
{
    double t0 = bench_now();
    if (waitpid(pid, status, 0) != pid)
        die("waitpid");
    return bench_now() - t0;
}

/* stat_hang n, and its workers' pids (children of it, after they started). */
static void hang_start(size_t n)
{
    char path[PATH_MAX + 64], nb[16];
    snprintf(path, sizeof path, "%s/stat/examples/stat_hang", build);
    snprintf(nb, sizeof nb, "%zu", n);
    hang_parent = fork();
    if (hang_parent == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 1);
        execl(path, "stat_hang", nb, (char *)NULL);
        _exit(127);
    }
    double dl = bench_now() + 60;
    for (;;) {
        /* The workers are the children of hang_parent. */
        char cpath[96];
        snprintf(cpath, sizeof cpath, "/proc/%d/task/%d/children", (int)hang_parent,
                 (int)hang_parent);
        FILE *f = fopen(cpath, "r");
        nworkers = 0;
        long p;
        while (f && nworkers < MAXT && fscanf(f, "%ld", &p) == 1)
            workers[nworkers++] = (pid_t)p;
        if (f)
            fclose(f);
        if (nworkers == n)
            break;
        if (bench_now() > dl)
            die("starting stat_hang");
        usleep(50000);
    }
    usleep(500000);      /* into their stuck paths */
}

static void hang_stop(void)
{
    kill(hang_parent, SIGTERM);
    int st;
    waitpid(hang_parent, &st, 0);
    hang_parent = 0;
}

/* The last run's result_bytes (its .perf file): what came to the front-end. */
static unsigned long long last_bytes;

/* One tbon_stat run over the workers (counts: --counts-only); its wall
 * time; *launch and *merge from its .perf file. */
static double stat_once_mode(size_t n, int rep, double *launch, double *merge, int counts)
{
    char pids[PATH_MAX], out[PATH_MAX], bin[PATH_MAX + 32];
    snprintf(pids, sizeof pids, "%s/pids", tmp);
    snprintf(out, sizeof out, "%s/out%zu.%d", tmp, n, rep);
    snprintf(bin, sizeof bin, "%s/bin/tbon_stat", build);
    FILE *f = fopen(pids, "w");
    if (!f)
        die("writing the pids file");
    for (size_t i = 0; i < nworkers; i++)
        fprintf(f, "%d\n", (int)workers[i]);
    fclose(f);
    double t0 = bench_now();
    pid_t pid = fork();
    if (pid == 0) {
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 1);
        execl(bin, "tbon_stat", "-n", "1", "-q", "-o", out, "--pids-file", pids,
              counts ? "--counts-only" : (char *)NULL, (char *)NULL);
        _exit(127);
    }
    int st;
    wait_status(pid, &st);
    double wall = bench_now() - t0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        die("tbon_stat");
    char perf[PATH_MAX + 64], line[256];
    snprintf(perf, sizeof perf, "%s/stat_hang.0000/stat_hang.perf", out);
    f = fopen(perf, "r");
    if (!f)
        die("reading tbon_stat's .perf file");
    size_t missing = 1;
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "launch_tree_s %lf", launch);
        sscanf(line, "sample_merge_s %lf", merge);
        sscanf(line, "missing %zu", &missing);
        sscanf(line, "result_bytes %llu", &last_bytes);
    }
    fclose(f);
    if (missing)
        die("tbon_stat left tasks out");
    return wall;
}

static double stat_once(size_t n, int rep, double *launch, double *merge)
{
    return stat_once_mode(n, rep, launch, merge, 0);
}

/* --counts-only beside the full merge of the same workers, runs
 * alternating: rows of the wall time, the sample-and-merge time and the
 * bytes of the results at the front-end. what: the workers' kind. */
static void counts_beside_full(size_t n, int reps, const char *what)
{
    static int base = 200;      /* each run its own directory */
    base += 100;
    double wall[2][20], launch[20], merge[2][20];
    unsigned long long bytes[2] = { 0, 0 };
    for (int r = 0; r < reps; r++)
        for (int c = 0; c < 2; c++) {
            wall[c][r] = stat_once_mode(n, base + 2 * r + c, &launch[r], &merge[c][r], c);
            bytes[c] = last_bytes;
            fprintf(stderr, PROG ": %zu tasks (%s)%s, run %d: %.3f s, sample and merge %.3f s, "
                    "%llu bytes\n", n, what, c ? " --counts-only" : "", r + 1, wall[c][r],
                    merge[c][r], last_bytes);
        }
    double w[2] = { bench_median(wall[0], reps), bench_median(wall[1], reps) };
    double m[2] = { bench_median(merge[0], reps), bench_median(merge[1], reps) };
    char metric[96];
    snprintf(metric, sizeof metric, "--counts-only, %zu tasks (%s)", n, what);
    bench_row("stat", metric, "%.3f", w[1], "s",
              "tbon_stat -n 1 --counts-only --pids-file, from the command to its exit; the "
              "merged trees at the front-end %llu bytes against %llu for the full merge (%.2fx); "
              "sample and merge %.3f s against %.3f s; the full merge's whole run %.3f s "
              "(%.2fx); median of %d, runs alternating", bytes[1], bytes[0],
              bytes[1] ? (double)bytes[0] / (double)bytes[1] : 0.0, m[1], m[0], w[0], w[0] / w[1],
              reps);
}

/* tbon_stat with args (NULL-terminated, after the program) into /dev/null;
 * 0 if it exited 0. */
static int stat_run(char *const *args)
{
    char bin[PATH_MAX + 32];
    snprintf(bin, sizeof bin, "%s/bin/tbon_stat", build);
    char *argv[16] = { bin };
    for (int i = 0; args[i] && i < 14; i++)
        argv[i + 1] = args[i];
    pid_t pid = fork();
    if (pid == 0) {
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 1);
        execv(bin, argv);
        _exit(127);
    }
    int st;
    wait_status(pid, &st);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* One --session over the workers: start, k samples (-n 1, each checked to
 * miss no task in its .perf), stop. The whole wall time; each sample's in
 * per[]. */
static double session_samples(size_t n, int k, double *per)
{
    char pids[PATH_MAX], out[PATH_MAX], dir[PATH_MAX];
    snprintf(pids, sizeof pids, "%s/pids", tmp);
    snprintf(out, sizeof out, "%s/session-out%zu", tmp, n);
    snprintf(dir, sizeof dir, "%s/session%zu", tmp, n);
    double t0 = bench_now();
    char *start[] = { "--session", dir, "start", "-q", "-o", out, "--pids-file", pids, NULL };
    if (stat_run(start) != 0)
        die("tbon_stat --session start");
    for (int i = 0; i < k; i++) {
        double t1 = bench_now();
        char *sample[] = { "--session", dir, "sample", "-n", "1", "-q", "-o", out, NULL };
        if (stat_run(sample) != 0)
            die("tbon_stat --session sample");
        per[i] = bench_now() - t1;
        char perf[PATH_MAX + 64], line[256];
        snprintf(perf, sizeof perf, "%s/stat_hang.%04d/stat_hang.perf", out, i);
        FILE *f = fopen(perf, "r");
        size_t missing = 1;
        while (f && fgets(line, sizeof line, f))
            sscanf(line, "missing %zu", &missing);
        if (f)
            fclose(f);
        if (missing)
            die("a session's sample left tasks out");
    }
    char *stop[] = { "--session", dir, "stop", "-q", NULL };
    if (stat_run(stop) != 0)
        die("tbon_stat --session stop");
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;       /* the session's commnodes, ours once their tbon_stat left */
    return bench_now() - t0;
}

/* eu-stack -p PID for every worker, one after the other. */
static double eu_loop(void)
{
    double t0 = bench_now();
    for (size_t i = 0; i < nworkers; i++) {
        char p[16];
        snprintf(p, sizeof p, "%d", (int)workers[i]);
        pid_t pid = fork();
        if (pid == 0) {
            int dn = open("/dev/null", O_WRONLY);
            dup2(dn, 1);
            dup2(dn, 2);
            execlp("eu-stack", "eu-stack", "-p", p, (char *)NULL);
            _exit(127);
        }
        int st;
        wait_status(pid, &st);
        if (!WIFEXITED(st) || WEXITSTATUS(st) == 127)
            die("eu-stack");
    }
    return bench_now() - t0;
}

static void cleanup(void)
{
    if (hang_parent > 0)
        kill(hang_parent, SIGKILL);
    if (tmp[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0)
            fprintf(stderr, PROG ": could not remove %s\n", tmp);
    }
}

int main(int argc, char **argv)
{
    size_t sizes[8] = { 256, 1024 }, nsizes = 2;
    int reps = 7;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tasks") == 0 && i + 1 < argc) {
            nsizes = 0;
            for (char *s = strtok(argv[++i], ","); s && nsizes < 8; s = strtok(NULL, ","))
                sizes[nsizes++] = strtoul(s, NULL, 10);
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: " PROG " [--tasks N[,N...]] [--reps R]\n"
                    "tbon_stat -n 1 on N stat_hang workers (default 256 and 1024), median of R\n"
                    "runs (default 7), beside the median of 3 loops of eu-stack -p PID over the\n"
                    "same workers.\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 20 || nsizes == 0)
        die("the arguments");
    for (size_t s = 0; s < nsizes; s++)
        if (sizes[s] < 1 || sizes[s] > MAXT)
            die("the arguments");
    find_build();
    snprintf(tmp, sizeof tmp, "/tmp/bench_stat.XXXXXX");
    if (!mkdtemp(tmp))
        die("mkdtemp");
    atexit(cleanup);
    for (size_t s = 0; s < nsizes; s++) {
        size_t n = sizes[s];
        hang_start(n);
        double wall[20], launch[20], merge[20];
        for (int r = 0; r < reps; r++) {
            wall[r] = stat_once(n, r, &launch[r], &merge[r]);
            fprintf(stderr, PROG ": %zu tasks, run %d: %.3f s (tree up %.3f s, sample and merge "
                    "%.3f s)\n", n, r + 1, wall[r], launch[r], merge[r]);
        }
        double sess = 0, per[SESSION_SAMPLES], sep[SESSION_SAMPLES];
        if (n == 256) {
            /* Issue 33: ten samples through one session beside ten runs. */
            sess = session_samples(n, SESSION_SAMPLES, per);
            for (int r = 0; r < SESSION_SAMPLES; r++)
                sep[r] = stat_once(n, 100 + r, &launch[19], &merge[19]);
            fprintf(stderr, PROG ": %zu tasks: a session of %d samples %.3f s\n", n,
                    SESSION_SAMPLES, sess);
        }
        if (n == 1024) {
            /* Issue 36: --counts-only beside the full merge, on the usual
             * hang (each path's ranks contiguous: sets of a range or two)
             * and on one whose ranks are scattered over two paths. */
            counts_beside_full(n, reps, "stat_hang: ranks contiguous");
            hang_stop();
            setenv("STAT_HANG_SCATTER", "1", 1);
            hang_start(n);
            unsetenv("STAT_HANG_SCATTER");
            counts_beside_full(n, reps, "STAT_HANG_SCATTER=1: ranks scattered");
        }
        double loops[EU_REPS];
        for (int r = 0; r < EU_REPS; r++) {
            loops[r] = eu_loop();
            fprintf(stderr, PROG ": %zu tasks: eu-stack loop %d: %.2f s\n", n, r + 1, loops[r]);
        }
        double eu = bench_median(loops, EU_REPS);
        hang_stop();
        double w = bench_median(wall, reps), l = bench_median(launch, reps),
               m = bench_median(merge, reps);
        char metric[64], goal[96] = "";
        snprintf(metric, sizeof metric, "attach, sample once and merge, %zu tasks", n);
        if (n == 256)
            snprintf(goal, sizeof goal, "; target <= 2 s and >= 20x faster than the loop: %s",
                     w <= 2 && eu / w >= 20 ? "met" : "MISSED");
        bench_row("stat", metric, "%.3f", w, "s",
                  "tbon_stat -n 1 --pids-file (stat_hang workers), from the command to its exit: "
                  "the default topology's tree up in %.3f s, sample and merge %.3f s, outputs "
                  "written; median of %d; beside it, eu-stack -p PID for each of the %zu "
                  "processes in turn: %.2f s (median of %d loops; %.1fx as long)%s", l, m, reps,
                  n, eu, EU_REPS, eu / w, goal);
        if (n == 256) {
            double tsep = 0;
            for (int r = 0; r < SESSION_SAMPLES; r++)
                tsep += sep[r];
            double pm = bench_median(per, SESSION_SAMPLES);
            snprintf(metric, sizeof metric, "%d samples through one session, %zu tasks",
                     SESSION_SAMPLES, n);
            bench_row("stat", metric, "%.3f", sess, "s",
                      "tbon_stat --session DIR start, %d x sample -n 1, stop (each sample "
                      "checked complete; a sample's median %.3f s), beside %d separate runs of "
                      "tbon_stat -n 1 in the same run: %.3f s, %.2fx as long; target >= 5x: %s",
                      SESSION_SAMPLES, pm, SESSION_SAMPLES, tsep, tsep / sess,
                      tsep / sess >= 5 ? "met" : "MISSED");
        }
        fflush(stdout);
    }
    return 0;
}
