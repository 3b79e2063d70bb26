/* st_cli.c - tbon_stat's command line: the help, the options, their values
 * and combinations checked (a bad one ends the program with EXIT_USAGE). */
#include "st_cli.h"

#include "st_prog.h"
#include "st_proto.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [options] -p [HOST:]PID,[HOST:]PID,...\n"
"       " PROG " [options] --pids-file FILE\n"
"       " PROG " [options] -P LAUNCHER_PID\n"
"       " PROG " [options] -C COMMAND [ARGS...]\n"
"       " PROG " [options] --jobid JOB [--step S,S,...]\n"
"       " PROG " --session DIR start [options] (-p ...|--pids-file ...|-P ...)\n"
"       " PROG " --session DIR sample [options]\n"
"       " PROG " --session DIR stop\n"
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
"  -P PID             a launcher's tasks: an mpirun's ranks on every host, from\n"
"                     its MPIR process table; for an srun (or a launcher that\n"
"                     started one), its job step's tasks on the job's nodes, as\n"
"                     with --jobid; else its descendants on this host that run\n"
"                     the executable most of them run\n"
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
"  --counts-only      no task lists in the merge: each node says how many tasks\n"
"                     it has and the lowest of them (its representative), for\n"
"                     very large jobs; no classes, no paths in the tasks file\n"
"  -t FILE            the tree's topology for tasks of this host (default: one\n"
"                     back-end per %d tasks, at most %d per CPU, fan-out %d);\n"
"                     tasks on other hosts get one back-end per host\n"
"\n"
"Output:\n"
"  -o DIR             results under DIR/<exe>.NNNN/ (default stat_results;\n"
"                     made with its parents when missing): <exe>.2D.dot (last\n"
"                     sample), <exe>.3D.dot (all samples), .json, .txt\n"
"                     (indented), .folded (flame-graph stacks) and\n"
"                     .classes.txt of both, .svg when\n"
"                     Graphviz's dot is installed, <exe>.tasks.txt and .json\n"
"                     (each task's number, rank, host, pid and step) and\n"
"                     <exe>.perf; <exe>.html, the trees to explore in a\n"
"                     browser (one file, nothing fetched)\n"
"  --classes          on the terminal, the equivalence classes instead of the\n"
"                     tree, each with the command that attaches gdb to its\n"
"                     representative (gdb -p PID; ssh -t HOST gdb -p PID)\n"
"  -q                 no tree on the terminal (the summary only)\n"
"  -h, --help         this text\n"
"\n"
"Sessions (the tree outlives the program):\n"
"  --session DIR start  find the tasks, start the tree, and leave it running\n"
"                     (DIR, made mode 0700, holds its session file and the\n"
"                     tasks); -p, --pids-file, -P, --jobid and -t as for a run\n"
"  --session DIR sample take the tree over, sample and merge as one run\n"
"                     (results under -o as usual), and leave it running again\n"
"  --session DIR stop   end the tree and empty DIR\n"
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
       OPT_STEP, OPT_CLASSES, OPT_COUNTS };

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

/* The long options (getopt_long). */
static const struct option longs[] = {
    { "pids-file", required_argument, NULL, OPT_PIDS_FILE },
    { "threads", no_argument, NULL, OPT_THREADS },
    { "lines", no_argument, NULL, OPT_LINES },
    { "modules", no_argument, NULL, OPT_MODULES },
    { "keep", no_argument, NULL, OPT_KEEP },
    { "jobid", required_argument, NULL, OPT_JOBID },
    { "step", required_argument, NULL, OPT_STEP },
    { "classes", no_argument, NULL, OPT_CLASSES },
    { "counts-only", no_argument, NULL, OPT_COUNTS },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

void st_parse_cli(int argc, char **argv, struct cli *c)
{
    *c = (struct cli){ .outdir = "stat_results", .samples = 10, .interval_ms = 100,
                       .wait_s = 1 };
    int o, sources = 0;
    if (argc > 1 && strcmp(argv[1], "--session") == 0) {
        /* --session DIR VERB [options]: the verb stands in for argv[0] */
        static const char *const verbs[] = { "", "start", "sample", "stop" };
        for (int v = 1; argc > 3 && v <= ST_SESSION_STOP; v++)
            if (strcmp(argv[3], verbs[v]) == 0)
                c->verb = v;
        if (!c->verb || !argv[2][0]) {
            fprintf(stderr, PROG ": --session DIR start|sample|stop (see --help)\n");
            exit(EXIT_USAGE);
        }
        c->session = argv[2];
        argc -= 3;
        argv += 3;
    }
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
        case OPT_CLASSES: c->classes = 1; break;
        case OPT_COUNTS: c->flags |= FLAG_COUNTS; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(EXIT_USAGE);
        }
    }
    if (c->classes && (c->flags & FLAG_COUNTS)) {
        fprintf(stderr, PROG ": --classes needs the task lists that --counts-only leaves "
                "out\n");
        exit(EXIT_USAGE);
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument \"%s\" (see --help)\n", argv[optind]);
        exit(EXIT_USAGE);
    }
    if (c->session && c->command) {
        fprintf(stderr, PROG ": --session: -C is not supported (launch the command, then "
                "--session DIR start -P its pid)\n");
        exit(EXIT_USAGE);
    }
    if (c->session && c->verb != ST_SESSION_START) {
        if (sources) {
            fprintf(stderr, PROG ": --session %s %s: the tasks were given at start\n",
                    c->session, c->verb == ST_SESSION_SAMPLE ? "sample" : "stop");
            exit(EXIT_USAGE);
        }
        return;
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
