/* st_cli.h - tbon_stat's command line (st_cli.c) and its defaults. */
#ifndef TBON_ST_CLI_H
#define TBON_ST_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The default tree of -t (the help says it; st_plan.c builds it). */
#define TASKS_PER_BE 16     /* default topology: one back-end per this many tasks, */
#define BES_PER_CPU 2       /* and at most this many per CPU of this host */
#define DEFAULT_FANOUT 8

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
    const char *session;     /* --session DIR (docs/stat.md, "Sessions") */
    int verb;                /* with it: ST_SESSION_* */
    int classes;             /* --classes: the classes with attach lines */
};

enum { ST_SESSION_START = 1, ST_SESSION_SAMPLE, ST_SESSION_STOP };

/* Parse the front-end's command line into c (c->command points into argv):
 * the help on -h (exit 0); a bad option or combination said on stderr,
 * exit EXIT_USAGE. */
void st_parse_cli(int argc, char **argv, struct cli *c);

#endif
