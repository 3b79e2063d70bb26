/* fe_cli.h - tbon_frontend's command line (fe_cli.c), and what every part
 * of the program shares: its name, its exit codes, the request's tag. */
#ifndef TBON_FE_CLI_H
#define TBON_FE_CLI_H

#include <tbon/tbon.h>

#include <stdio.h>

#define PROG        "tbon_frontend"
#define EXIT_RUN    1
#define EXIT_USAGE  2
#define TAG_REQUEST TBON_FIRST_APP_TAG

/* The command line, parsed. */
struct cli {
    const char        *topology;
    const char        *backend;       /* NULL in attach mode */
    const char        *attach;        /* --attach FILE */
    const char        *fe_host;       /* --fe-host HOST */
    int                slurm;         /* --slurm */
    int                require_all;   /* --require-all */
    unsigned long      fanout, per_node; /* --fanout, --be-per-node (0: default) */
    char              *env;           /* --env NAME..., blank-separated (malloc'd) */
    const char        *filter;        /* as given */
    char              *so_path;       /* PATH.so of a plug-in (absolute), else NULL */
    const char        *so_func;       /* its function */
    const char        *filter_name;   /* "sum", or the plug-in's function */
    int                filter_id;     /* built-in id, or -1 for a plug-in */
    const char        *kind;          /* what the back-ends send: int|double|set|array */
    int                sync;          /* TBON_SYNC_* */
    unsigned long      sync_ms;       /* for TBON_SYNC_TIMEOUT */
    unsigned long      waves;
    long               idle_ms;       /* dontwait/timeout: end of a wave */
    int                json, events;
    const char        *detach;        /* --detach FILE: leave the tree running */
    const char        *reattach;      /* --reattach FILE: take a running tree over */
    unsigned long      grace_ms;      /* --grace MS (with --detach FILE) */
    int                status;        /* --status: the tree's status at the end */
    int                perf;          /* --perf: its performance data at the end */
    int                ping;          /* --ping RANK given: ping instead of waves */
    tbon_rank_t        ping_rank;
    unsigned long      ping_count;    /* --ping-count N (default 3) */
    char *const       *be_argv;       /* NULL-terminated (argv's tail) */
};

/* Parse argv into c (c->be_argv points into argv), with the defaults that
 * depend on the options taken together; --help prints the help and exits
 * 0, a bad command line exits EXIT_USAGE (EXIT_RUN when a filter plug-in
 * given is not there or memory runs out). */
void fe_parse_args(struct cli *c, int argc, char **argv);

#endif
