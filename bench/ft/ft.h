/* ft.h - what the files of bench_ft share (bench/ft/, one benchmark per
 * file; main.c says which runs): the requests the FE sends and the values
 * the back-ends answer with, the FE's state, the trees of a run and the
 * union stream every benchmark but membership watches.
 *
 *   main.c          options, the run's set-up, the parts in order, the rows
 *   backend.c       the back-end every tree runs (bench_ft --be)
 *   tree.c          the run's processes, its trees, fatal errors, the FE's log
 *   union.c         the union stream and its receiver thread
 *   recovery.c      (a) recovery against the victim's fan-out, --recovery
 *   throughput.c    (b) the streaming union with fault tolerance on and off
 *   link.c          (b') the streaming union under link faults, --link
 *   kills.c         the 32x32 tree with commnodes killed every period, for
 *   perturbation.c  (c) waves/s while they die, --perturbation
 *   figure7.c       (c') Figure 7 as seed 003 ran it, --figure7
 *   membership.c    (d) failures, views, joins and idle traffic, --membership
 *   hops.c          (e) seed 001 Figure 3: hops of messages, --hops
 */
#ifndef TB_BENCH_FT_H
#define TB_BENCH_FT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include <tbon/tbon.h>

#include "topo/topology.h"

#define PROG        "bench_ft"
#define TAG         TBON_FIRST_APP_TAG
#define SESSION_ENV "BENCH_FT_SESSION"

/* Requests "%ud %ud %ud" (op, w, arg) from the FE to every back-end. */
enum {
    OP_WAVE = 1,    /* union: send {w << 32 | rank} once */
    OP_STREAM = 2,  /* union: send arg packets as fast as possible, then mark w */
    OP_SUM = 3,     /* sum: send "%ld %ld" (w, 1) */
    OP_TICK = 4,    /* union: send one new value every arg ms from now on; arg 0
                       stops it, and with w the count sent goes as round w's mark */
    OP_ROUTES = 5,  /* back-end w alone: ping every rank below arg but itself and
                       send "%aud" the routes, each its length then its ranks
                       (length 0: no answer), in rank order (hops.c) */
};
#define ROUTE_MAX 16    /* ranks in a route, at most */

/* The union values: what each one is, from its top bits. */
#define V_MARK   (UINT64_C(1) << 63)    /* end of a round: w << 52 | rank << 40 | count */
#define V_DATA   (UINT64_C(1) << 62)    /* stream: rank << 12 | i, i < STREAM_POOL */
#define V_TICK   (UINT64_C(1) << 61)    /* traffic: seq << 11 | rank */
#define V_RANK   0x7ffu                 /* ranks in V_TICK values */
#define STREAM_VALS 8                   /* values per stream packet */
#define STREAM_POOL 4096                /* distinct stream values per back-end */

/* ---------------------------------------------------------------- backend.c */

/* Join the tree and answer the FE's requests until it shuts the network down. */
int be_main(int argc, char **argv);
/* A ping from here (rank me) to every other rank below size: their routes,
 * each its length then its ranks (length 0: no answer), in rank order, in
 * a malloc'd array of *nv values (NULL: no memory). */
uint32_t *ping_routes(tbon_net_t *net, tbon_rank_t me, size_t size, size_t *nv);

/* ------------------------------------------------------------------ tree.c */

extern char session_kv[64];     /* "BENCH_FT_SESSION=<pid>"; a tree adds ".K" */
extern char self_exe[4096];
extern char tmpdir[64];         /* the topologies written; "" when none */

/* The options of the next trees started: heartbeat and attach file (0,
 * NULL: the defaults); --exact-off: tbon_fe_options_t.exact_off for every
 * tree (the sum of the perturbation run then loses waves in flight at a
 * kill, as before exact streams). */
extern int start_heartbeat_ms;
extern const char *start_attach_file;
extern int start_exact_off;

/* One "recovery" line of the runtime at the FE. */
struct rec {
    tbon_rank_t orphan, adopter;
    uint32_t incarnation;
    long long part[4];          /* new_parent, connect, compensate, cleanup (us) */
};

struct ft_fe {
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* a recovery line or union result arrived */
    struct rec *rec;
    size_t nrec, caprec, bad_lines;
    int user_level;             /* level for lines other than recovery */
};
extern struct ft_fe fe;

long scan_session(const char *kv, int sig, pid_t *pids, size_t npids);
void kill_session(void);
void reap_all(void);
void remove_tmpdir(void);
__attribute__((noreturn, format(printf, 1, 2))) void ft_die(const char *fmt, ...);
void wd_fire(const char *phase);
struct timespec abs_ts(double t);
void cond_init_mono(pthread_cond_t *cv);
void log_handler(void *arg, int level, const char *line);
void fe_wait(double deadline);
void set_nofile_max(void);
const char *write_topology(tb_topology_t *t, const char *name);
const char *tree_kv(const tbon_net_t *net);
tbon_net_t *start(const char *topo, size_t n, int no_ft);
void stop(tbon_net_t *net);
void request(tbon_stream_t *s, uint32_t op, uint32_t w, uint32_t arg);
/* start(topo, n, 0) with start_heartbeat_ms = hb_ms (and left so), and in
 * *s a stream over every back-end with filter and sync. */
tbon_net_t *start_streamed(const char *topo, size_t n, int hb_ms, int filter, int sync,
                           tbon_stream_t **s);
/* Kill victim (pid) and time the FE's TBON_EV_NODE_FAILED for it and the
 * TBON_EV_VIEW_STABLE after it and after orphans adoptions (ms). */
void kill_settle(tbon_net_t *net, tbon_rank_t victim, pid_t pid, size_t orphans,
                 double *failed, double *stable);

/* ----------------------------------------------------------------- union.c */

/* What the receiver thread of a union stream saw. */
#define MAX_WAVES 4
struct uwatch {
    tbon_stream_t *s;
    size_t n, size;             /* back-ends; ranks below size */
    uint8_t *seen[MAX_WAVES];   /* per wave, per rank */
    size_t wave_count[MAX_WAVES];
    uint32_t round;             /* of OP_STREAM */
    uint8_t *marked;            /* per rank: mark of this round seen */
    uint64_t *sent;             /* per rank: values sent in all rounds (the marks) */
    uint32_t *distinct;         /* per rank: stream values received */
    uint8_t *got;               /* per rank * STREAM_POOL: that value received */
    size_t nmarks;
    uint64_t mark_total, data, ticks;
    double last_mark;
    size_t tick_max;            /* > 0: each tick value is checked, below */
    uint8_t *tick_seen;         /* per rank * tick_max: times that tick came */
    uint64_t tick_dups, tick_bad;
    double *pkt_t;              /* with tick_max: when each packet came */
    size_t npkt, cappkt;
    int stop;
    char error[256];            /* "" while every check holds */
};

tbon_stream_t *union_stream_sync(tbon_net_t *net, struct uwatch *u, size_t n, size_t size,
                                 int sync, size_t tick_max, pthread_t *th);
tbon_stream_t *union_stream(tbon_net_t *net, struct uwatch *u, size_t n, size_t size,
                            pthread_t *th);
void union_stream_end(struct uwatch *u, pthread_t th);
void union_stream_free(struct uwatch *u);
void union_wave(struct uwatch *u, uint32_t w, double secs);

/* -------------------------------------------------------------- recovery.c */

extern int rec_with_sum;        /* --with-sum */
extern uint32_t rec_only;       /* --fanout F: that fan-out alone (0: all) */
int valid_fanout(int f);
void recovery_run(int reps);
void recovery_rows(int reps);

/* ------------------------------------------------------------ throughput.c */

/* A tree of (b): 8x8, with or without fault tolerance, its union stream. */
struct tp_tree {
    tbon_net_t *net;
    struct uwatch u;
    pthread_t th;
    size_t n, size;
};

const char *tp_topology(const char *name, size_t *n, size_t *size);
void tp_start(struct tp_tree *t, const char *topo, size_t n, size_t size, int no_ft);
double tp_round(struct tp_tree *t, uint32_t round, double *cpu_per_value);
double tp_round_n(struct tp_tree *t, uint32_t round, uint32_t packets, double *cpu_per_value);
void tp_stop(struct tp_tree *t);
void throughput_run(void);
void throughput_rows(void);

/* ------------------------------------------------------------------ link.c */

void link_run(void);
void link_rows(void);

/* ----------------------------------------------------------------- kills.c */

#define PT_BIN 0.1              /* s */
#define PT_VICTIMS 4            /* commnodes killed per round (--perturbation) */
#define PT_MAX_ROUNDS 8

/* A run of (c) or (c'): its bins, the kills, the events. */
struct pt_state {
    double t0, period;
    int rounds, victims;
    size_t nbins, ncomm;
    uint32_t *waves, *shortw, *failed, *adopted;  /* per bin */
    uint8_t *killed;            /* per commnode rank */
    pid_t *pids;
    double kill_t[PT_MAX_ROUNDS], last_adopted[PT_MAX_ROUNDS];
    tbon_rank_t victim[PT_MAX_ROUNDS][PT_VICTIMS];
    int kills_done;
    size_t nfailed, nadopted;
    int stop;
    tbon_net_t *net;
};
extern struct pt_state pt;

/* The bin of time t (bench_now() seconds). */
static inline size_t pt_bin(double t)
{
    double b = (t - pt.t0) / PT_BIN;
    return b < 0 ? 0 : (size_t)b < pt.nbins ? (size_t)b : pt.nbins - 1;
}

tbon_net_t *pt_tree(double period, int rounds, int victims, size_t *n);
void pt_kills_start(void);
void pt_kills_wait(int rounds, int victims, size_t n, const char *what);
void pt_free(void);

/* ---------------------------------------------------- perturbation.c, figure7.c */

void perturbation_run(double period, int rounds, const char *csv, const char *svg);
void figure7_run(int victims, double period, const char *csv);

/* ------------------------------------------------------------ membership.c */

void membership_run(void);
void membership_rows(void);

/* ------------------------------------------------------------------ hops.c */

void hops_run(void);
void hops_rows(void);

#endif
