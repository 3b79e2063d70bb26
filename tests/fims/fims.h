/* fims.h - what the files of tbon_fims share (tests/fims/; main.c says what
 * the tool does):
 *
 *   main.c       the three roles: front-end, back-end (--be), agent (--agent)
 *   options.c    the command line and the schedule (--schedule)
 *   set.c        a set of uint64 values
 *   backend.c    the back-end: random values at --rate, each written down
 *   agent.c      the run's processes on one host: found, listed, killed
 *   hosts.c      the front-end's hosts and their agents, the leftovers
 *   watch.c      the front-end's state: results, events, recovery lines
 *   scenarios.c  the schedule's kinds: which commnodes each one kills
 *   inject.c     a schedule item's victims killed, back to back everywhere
 *   checks.c     at the end: the output against the back-ends' files
 *   report.c     the recovery table and the --csv rows
 *   fe.c         the front-end's run, from the tree's start to the verdict
 */
#ifndef TB_FIMS_H
#define TB_FIMS_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include <tbon/tbon.h>

#include "topo/topology.h"

#define PROG          "tbon_fims"
#define TAG_START     TBON_FIRST_APP_TAG       /* FE -> BEs: the run's parameters */
#define TAG_DATA      (TBON_FIRST_APP_TAG + 1) /* BEs -> FE: "%auld" values */
#define RUN_ENV       "TBON_FIMS_RUN"
#define VALS_PER_PKT  4
#define SHARED_POOL   4096u      /* half of the values come from [0, this) */
#define MAX_VICTIMS   64
#define QUIET_MS      2000       /* results are over after this long without one */
#define RECOVER_MS    15000      /* how long to wait for failure/adoption events */
#define ADOPTER_DELAY_MS 5       /* "adopter": second kill this long after the first */
#define SHOW_MAX      5          /* elements listed on a mismatch */
#define SCAN_MAX      65536      /* processes of the run listed per host */

/* ------------------------------------------------------------------ utils */

static inline int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline void sleep_until_us(int64_t t)
{
    struct timespec ts = { .tv_sec = (time_t)(t / 1000000), .tv_nsec = (long)(t % 1000000) * 1000 };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* splitmix64: small, seedable with any value, good enough for choices. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ------------------------------------------------------------------ set.c */

typedef struct u64set {
    uint64_t *slot;      /* open addressing; empty slots hold 0 */
    size_t    cap, n;    /* cap a power of two */
    int       has_zero;  /* 0 itself is kept aside */
} u64set_t;

int set_has(const u64set_t *s, uint64_t v);
int set_add(u64set_t *s, uint64_t v);
size_t set_size(const u64set_t *s);
size_t set_diff(const u64set_t *a, const u64set_t *b, const char *what);

/* -------------------------------------------------------------- options.c */

enum kind { K_ONE, K_SEVERAL, K_DEPTH1, K_ADOPTER, K_PARENT, K_EVERY };

struct item {                    /* one parsed schedule item */
    double    at;                /* seconds since the start */
    enum kind kind;
    unsigned  k;                 /* several=K */
    double    period;            /* every=P */
    char      text[48];          /* as written, for messages */
};

struct opts {
    const char *topo, *dir, *csv, *sched;
    double      duration, rate, timeout;
    uint64_t    seed;
    int         heartbeat_ms;
    struct item *items;
    size_t      nitems;
};

void parse_args(int argc, char **argv, struct opts *o);

/* ------------------------------------------------------ backend.c, agent.c */

int be_main(int argc, char **argv);

extern char run_kv[64];          /* RUN_ENV "=<pid>.<nonce>" */

struct proc {                    /* a process of the run on one host */
    long        pid;
    tbon_rank_t rank;            /* its --tbon-rank, or TBON_RANK_NONE */
};

long scan_procs(const char *session, const char *kv, struct proc *out, size_t cap);
void agent_do(char *line, char *session, size_t slen, const char *kv, FILE *out);
int agent_main(void);

/* ---------------------------------------------------------------- hosts.c */

/* The hosts of the topology, as the front-end sees them. */
struct host {
    char   *name;
    int     local;               /* this host: no agent */
    pid_t   pid;                 /* the agent's remote shell client; 0: none */
    int     to, from;            /* its stdin and stdout */
    char    in[1 << 16];         /* what it wrote that is not consumed yet */
    size_t  nin;
    size_t  skip;                /* answers to drop: to "session" lines we sent */
    char   *local_reply;         /* a local command's answer (local hosts) */
    char    why[200];            /* why the last request failed */
};

extern struct host *hosts;
extern size_t       nhosts;
extern size_t      *host_of;     /* per rank: index into hosts */
extern char         session_id[64];

void agent_stop(struct host *h, int ms);
int host_send(struct host *h, const char *cmd);
char *host_reply(struct host *h, int64_t deadline);
void kill_run(void);
void reap_all(void);
void wd_fire(const char *phase);
int hosts_init(const char *self);
int hosts_session(const char *attach);
long hosts_left(int ms);

/* ---------------------------------------------------------------- watch.c */

struct injection {
    const struct item *item;
    int          skipped;             /* nothing to kill (see note) */
    char         note[160];
    size_t       nv;
    tbon_rank_t  victim[MAX_VICTIMS];
    pid_t        pid[MAX_VICTIMS];      /* on the victim's host; 0: not found */
    int          where[MAX_VICTIMS];    /* 0 here, 1 through the host's agent */
    char         miss[MAX_VICTIMS][96]; /* why a victim was not found */
    int64_t      kill_us[MAX_VICTIMS];
    int64_t      failed_us[MAX_VICTIMS]; /* FAILED event seen; 0 = not yet */
    tbon_rank_t *orphan;               /* children of the victims at the kill */
    tbon_rank_t *old_parent;           /* ... and which victim each was under */
    int64_t     *adopted_us;           /* last ADOPTED event; 0 = none yet */
    size_t       norph;
};

struct recovery {                     /* one "recovery" log line */
    size_t      inj;                  /* index into injections; SIZE_MAX: none */
    tbon_rank_t orphan, adopter, victim;
    uint32_t    incarnation;
    long long   part[4];              /* new_parent, connect, compensate, cleanup (us) */
};

struct fe {
    pthread_mutex_t   mu;
    pthread_cond_t    cv;             /* a result or event arrived */
    tb_topology_t    *topo;           /* the private copy, under mu */
    uint8_t          *killed;         /* per rank: we killed it */
    struct injection *inj;
    size_t            ninj;
    struct recovery  *rec;
    size_t            nrec, caprec;
    u64set_t          out;            /* every element the FE received */
    /* Coverage (docs/api.md): each result's back-ends, and for each private
     * element (one back-end's own) the result that first brought it. */
    struct cov { tbon_rank_t *r; size_t n; } *cov;
    size_t            ncov, capcov;
    struct vres { uint64_t v; uint32_t res; } *vres;
    size_t            nvres, capvres;
    size_t            twice;          /* elements received as new again */
    uint64_t          twice_first[SHOW_MAX];
    size_t            packets, stream_errors;
    char              stream_error[256];
    int64_t           last_result_us;
    size_t            other_failed;   /* FAILED events for nodes we did not kill */
    int64_t          *failed_us;      /* per rank: its first FAILED event; 0 = none */
    uint8_t          *is_be;          /* per rank: a back-end (leaf) of the topology */
    int64_t           t0;             /* when the back-ends were told to start */
    size_t            bad_recovery_lines;
    int               stop;
    int               user_level;     /* log level for lines other than ours */
};
extern struct fe fe;

size_t injection_of_orphan(tbon_rank_t r, size_t *idx);
void log_handler(void *arg, int level, const char *line);
void *results_main(void *arg);
void *events_main(void *arg);
void wait_quiet(int64_t end_us);

/* ------------------------------------------------------ scenarios.c, inject.c */

extern uint64_t pick_rng;

int choose_victims(struct injection *in);
void add_orphans(struct injection *in, tbon_rank_t v);
void inject(const struct item *it, int64_t t0);

/* ------------------------------------------------------ checks.c, report.c */

void clean_dir(const char *dir, int rmdir_too);
int fims_verdict(const struct opts *o, const char *dir, int own_dir, size_t size, long left,
                 int64_t t0);
int report_recovery(const char *csv, int64_t t0);

/* ------------------------------------------------------------------- fe.c */

int fe_main(struct opts *o, const char *self);

#endif
