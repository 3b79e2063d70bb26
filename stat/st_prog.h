/* st_prog.h - what the parts of the tbon_stat program share (tbon_stat.c and
 * st_cli.c to st_fe.c; the library parts of libtbonstat.a know nothing of
 * them): its name and exit codes, one run's tasks and state, dying with the
 * clean-up, the clock, memory or death. */
#ifndef TBON_ST_PROG_H
#define TBON_ST_PROG_H

#include <tbon/tbon.h>

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROG       "tbon_stat"
#define EXIT_RUN   1
#define EXIT_USAGE 2
#define EXIT_UNREACHED 3    /* some tasks could not be reached: their back-end
                               did not start (the rest were sampled) */

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

/* What the sampling got: whether any result came, how many asks again,
 * how long it took. */
struct sampled {
    int got, asks;
    int composed;           /* results that came as composed filter state
                               after a failure (no request: seed 003's state
                               composition brought them back) */
    double t_sample;
    uint64_t bytes;         /* of the results that came to the front-end */
};

/* --jobid's step of back-ends and attach file while they exist: a failure
 * ends the step and removes the file (the back-ends would also end once the
 * front-end is gone, but not before they noticed). */
struct st_cleanup_list {
    pid_t srun;
    char *attach;
    char *topo, *topodir;   /* a topology written to a temporary directory */
};
extern struct st_cleanup_list st_cleanup;

/* Say "tbon_stat: " and the message on stderr, remove and end what
 * st_cleanup names, and exit EXIT_RUN. */
void st_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* The monotonic clock in seconds. */
double st_now(void);
/* Milliseconds from now to the time dl (st_now's clock), at least 0. */
int st_ms_until(double dl);

/* This host's name (gethostname), as the tree and the tasks name it. */
const char *st_this_host(void);

/* strdup and calloc (of at least one element) that die when out of
 * memory. */
char *st_xstrdup(const char *s);
void *st_xcalloc(size_t n, size_t size);

/* This program's path (/proc/self/exe), "" when it cannot be read. */
void st_self_exe(char *buf, size_t cap);

/* qsort and bsearch order of struct task: by id. */
int st_by_id(const void *a, const void *b);

#endif
