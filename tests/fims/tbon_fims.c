/* tbon_fims.c - the failure injection and management service of seed 003
 * (section VI-A): run the integer-union computation (VI-B) on a tree, kill
 * commnodes on a schedule, time each recovery (VI-C) and check the output.
 *
 * Usage: tbon_fims -t TOPOLOGY [options]      (see usage() or --help)
 *        tbon_fims --be ...                   (a back-end; started by the tree)
 *        tbon_fims --agent                    (a host's agent; started by the FE)
 *
 * The front-end starts the tree with this program at every leaf, opens one
 * union/don't-wait stream over every back-end and sends it the run's
 * parameters. Each back-end then sends random uint64 values at --rate Hz for
 * --duration seconds and writes every value it sent to DIR/be-RANK.txt. The
 * front-end keeps the union of what it receives, injects the scheduled
 * failures, follows the membership events on a private copy of the topology
 * (so it only ever picks live commnodes and knows each victim's orphans) and
 * takes the per-orphan timings from the runtime's "recovery" log lines. At
 * the end it checks: output set == union of the back-ends' files, no element
 * reported as new twice, a failure event for every kill, no process of the
 * run left. Exit 0 only if all of that holds.
 *
 * The processes of a run are found on every host of the topology: by the
 * words "--tbon-rank R" and "--tbon-session S" the tree puts on their command
 * lines (S read from the attach file the front-end writes), and on this host
 * also by TBON_FIMS_RUN=<id> in their environment. On other hosts an agent
 * (this program with --agent, started through $TBON_RSH) finds, kills and
 * counts them; that is how victims are killed, leftovers counted and what
 * the watchdog kills.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "proc/launch.h"
#include "util/log.h"
#include "topo/reconfig.h"
#include "lib/procscan.h"
#include "lib/watchdog.h"
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

/* ------------------------------------------------------------------ utils */

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_until_us(int64_t t)
{
    struct timespec ts = { .tv_sec = (time_t)(t / 1000000), .tv_nsec = (long)(t % 1000000) * 1000 };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* splitmix64: small, seedable with any value, good enough for choices. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---------------------------------------------------- a set of uint64 values */

typedef struct u64set {
    uint64_t *slot;      /* open addressing; empty slots hold 0 */
    size_t    cap, n;    /* cap a power of two */
    int       has_zero;  /* 0 itself is kept aside */
} u64set_t;

static size_t set_hash(uint64_t v, size_t cap)
{
    v ^= v >> 33;
    v *= 0xFF51AFD7ED558CCDull;
    v ^= v >> 33;
    return (size_t)v & (cap - 1);
}

static int set_has(const u64set_t *s, uint64_t v)
{
    if (v == 0)
        return s->has_zero;
    if (!s->cap)
        return 0;
    for (size_t i = set_hash(v, s->cap);; i = (i + 1) & (s->cap - 1)) {
        if (s->slot[i] == v)
            return 1;
        if (s->slot[i] == 0)
            return 0;
    }
}

/* Add v: 1 if it was new, 0 if already there; exits when out of memory. */
static int set_add(u64set_t *s, uint64_t v)
{
    if (v == 0) {
        int was = s->has_zero;
        s->has_zero = 1;
        return !was;
    }
    if ((s->n + 1) * 2 > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 1024;
        uint64_t *ns = calloc(ncap, sizeof *ns);
        if (!ns) {
            fprintf(stderr, PROG ": out of memory\n");
            exit(1);
        }
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slot[i])
                continue;
            size_t j = set_hash(s->slot[i], ncap);
            while (ns[j])
                j = (j + 1) & (ncap - 1);
            ns[j] = s->slot[i];
        }
        free(s->slot);
        s->slot = ns;
        s->cap = ncap;
    }
    size_t i = set_hash(v, s->cap);
    while (s->slot[i] && s->slot[i] != v)
        i = (i + 1) & (s->cap - 1);
    if (s->slot[i] == v)
        return 0;
    s->slot[i] = v;
    s->n++;
    return 1;
}

static size_t set_size(const u64set_t *s)
{
    return s->n + (size_t)s->has_zero;
}

/* Print the first up-to-SHOW_MAX elements of a not in b; returns how many
 * there are in all. */
static size_t set_diff(const u64set_t *a, const u64set_t *b, const char *what)
{
    size_t count = 0;
    if (a->has_zero && !set_has(b, 0)) {
        printf("  %s: 0\n", what);
        count++;
    }
    for (size_t i = 0; i < a->cap; i++) {
        if (!a->slot[i] || set_has(b, a->slot[i]))
            continue;
        if (count < SHOW_MAX)
            printf("  %s: %" PRIu64 "\n", what, a->slot[i]);
        count++;
    }
    return count;
}

/* ---------------------------------------------------------------- back-end */

/* Join the tree, wait for the start packet ("%lf %lf %uld %s": rate, duration,
 * seed, directory), send VALS_PER_PKT values per period for the duration and
 * append each successfully sent packet's values to DIR/be-RANK.txt; then stay
 * until the front-end closes the network. */
static int be_main(int argc, char **argv)
{
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_be_create(&argc, &argv, &err);
    if (!net) {
        fprintf(stderr, PROG " --be: tbon_be_create: %s\n", err.msg);
        return 1;
    }
    tbon_rank_t rank = tbon_net_rank(net);
    tbon_packet_t *p = NULL;
    tbon_stream_t *s = NULL;
    int rc = tbon_net_recv(net, &p, &s, -1);
    double rate = 0, dur = 0;
    uint64_t seed = 0;
    char *dir = NULL;
    if (rc == 0 && (tbon_packet_tag(p) != TAG_START ||
                    tbon_packet_unpack(p, "%lf %lf %uld %s", &rate, &dur, &seed, &dir) != 0)) {
        fprintf(stderr, PROG " --be: rank %u: unexpected first packet (tag %d, \"%s\")\n",
                (unsigned)rank, tbon_packet_tag(p), tbon_packet_format(p));
        rc = TBON_EFORMAT;
    }
    tbon_packet_unref(p);
    p = NULL;
    FILE *out = NULL;
    if (rc == 0) {
        char path[4200];
        snprintf(path, sizeof path, "%s/be-%u.txt", dir, (unsigned)rank);
        out = fopen(path, "w");
        if (!out) {
            fprintf(stderr, PROG " --be: rank %u: %s: %s\n", (unsigned)rank, path,
                    strerror(errno));
            rc = TBON_EIO;
        }
    }
    free(dir);
    if (rc == 0) {
        /* Every back-end draws from its own sequence; half of the values
         * fall in a small range all of them share, so the same value comes
         * from several back-ends (and the union has duplicates to remove). */
        uint64_t st = seed ^ ((uint64_t)rank * 0xD1B54A32D192ED03ull);
        int64_t period = (int64_t)(1e6 / rate), t = now_us(), end = t + (int64_t)(dur * 1e6);
        while (t < end) {
            uint64_t v[VALS_PER_PKT];
            for (int i = 0; i < VALS_PER_PKT; i++)
                v[i] = i < VALS_PER_PKT / 2 ? rng_next(&st) % SHARED_POOL : rng_next(&st);
            /* Written down before they go: a back-end killed between the
             * two must not have values at the front-end that its file
             * lacks ("received but never sent"); the other way round they
             * are counted as lost with it, which a failed back-end may be. */
            for (int i = 0; i < VALS_PER_PKT; i++)
                fprintf(out, "%" PRIu64 "\n", v[i]);
            fflush(out);
            rc = tbon_stream_send(s, TAG_DATA, "%auld", v, (size_t)VALS_PER_PKT);
            if (rc != 0)
                break;
            t += period;
            sleep_until_us(t);
        }
        fclose(out);
    }
    /* Stay (answering nothing) until the front-end shuts the tree down. */
    while (rc == 0) {
        rc = tbon_net_recv(net, &p, &s, -1);
        tbon_packet_unref(p);
        p = NULL;
    }
    if (rc != TBON_ECLOSED)
        fprintf(stderr, PROG " --be: rank %u: %s (%s)\n", (unsigned)rank, tbon_strerror(rc),
                tbon_net_error(net));
    tbon_net_destroy(net);
    return rc == TBON_ECLOSED ? 0 : 1;
}

/* -------------------------------------------------- this run's processes */

/* A run's processes are found on every host of its topology, by what the
 * tree puts on their command line: every process it launches has the words
 * "--tbon-rank R" and "--tbon-session S" in its argv (a remote shell's
 * client holds them quoted, as one shell command, so it does not match).
 * On this host, processes that carry RUN_ENV (our own children: commnodes,
 * remote shell clients) count too, which also covers the time before the
 * session id is known. On other hosts an agent does the same: this program
 * started with --agent through the remote shell ($TBON_RSH, default ssh),
 * one per host for the whole run, taking one command per line on its stdin
 * and answering on its stdout (agent_do). */

static char run_kv[64];          /* RUN_ENV "=<pid>.<nonce>" */

struct proc {                    /* a process of the run on one host */
    long        pid;
    tbon_rank_t rank;            /* its --tbon-rank, or TBON_RANK_NONE */
};

/* 1 if the NUL-separated words of cmdline (n bytes) hold word followed by
 * value; the value's start goes to *val when val is not NULL. */
static int cmdline_has(const char *cmd, ssize_t n, const char *word, const char *value,
                       const char **val)
{
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(cmd + i) + 1) {
        ssize_t next = i + (ssize_t)strlen(cmd + i) + 1;
        if (strcmp(cmd + i, word) != 0 || next >= n)
            continue;
        if (value && strcmp(cmd + next, value) != 0)
            continue;
        if (val)
            *val = cmd + next;
        return 1;
    }
    return 0;
}

/* The live (not zombie) processes of the run on this host other than this
 * one: --tbon-session session on the command line (if session is not
 * empty), or kv in the environment (if kv is not NULL). Returns how many,
 * with the first cap in out; -1 without memory. */
static long scan_procs(const char *session, const char *kv, struct proc *out, size_t cap)
{
    enum { ENV_MAX = 1 << 18, CMD_MAX = 1 << 16 };
    DIR *d = opendir("/proc");
    char *buf = malloc(ENV_MAX), *cmd = malloc(CMD_MAX);
    long found = 0;
    struct dirent *e;
    if (!d || !buf || !cmd)
        found = -1;
    while (found >= 0 && (e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid())
            continue;
        char st = tb_proc_state(pid);
        if (!st || st == 'Z' || st == 'X')
            continue;
        ssize_t n = tb_proc_read(pid, "cmdline", cmd, CMD_MAX);
        int ours = n > 0 && session && *session &&
                   cmdline_has(cmd, n, "--tbon-session", session, NULL);
        if (!ours && kv)
            ours = tb_proc_env_has(pid, kv, 0, buf, ENV_MAX);
        if (!ours)
            continue;
        const char *r = NULL;
        if ((size_t)found < cap) {
            out[found].pid = pid;
            out[found].rank = n > 0 && cmdline_has(cmd, n, "--tbon-rank", NULL, &r)
                                  ? (tbon_rank_t)strtoul(r, NULL, 10) : TBON_RANK_NONE;
        }
        found++;
    }
    if (d)
        closedir(d);
    free(buf);
    free(cmd);
    return found;
}

#define SCAN_MAX 65536           /* processes of the run listed per host */

/* One command of the agent protocol, run on this host; the answer goes to
 * out, without the final "." line:
 *   session S      remember the session id     -> "ok"
 *   kill R...      SIGKILL rank R's processes  -> "R PID" or "R -" per rank
 *   list           the run's processes         -> "PID RANK" per process
 *   killall        SIGKILL all of them         -> "N" (how many)
 * kv (this host only) adds the processes that carry it in their environment.
 * Unknown commands get "error: ...". */
static void agent_do(char *line, char *session, size_t slen, const char *kv, FILE *out)
{
    char *save = NULL, *verb = strtok_r(line, " \t", &save);
    if (!verb) {
        fprintf(out, "error: empty command\n");
        return;
    }
    if (strcmp(verb, "session") == 0) {
        const char *s = strtok_r(NULL, " \t", &save);
        snprintf(session, slen, "%s", s ? s : "");
        fprintf(out, "ok\n");
        return;
    }
    int kill_ranks = strcmp(verb, "kill") == 0, list = strcmp(verb, "list") == 0;
    int killall = strcmp(verb, "killall") == 0;
    if (!kill_ranks && !list && !killall) {
        fprintf(out, "error: unknown command \"%s\"\n", verb);
        return;
    }
    struct proc *p = malloc(SCAN_MAX * sizeof *p);
    long n = p ? scan_procs(session, kv, p, SCAN_MAX) : -1;
    if (n < 0) {
        fprintf(out, "error: cannot read /proc (out of memory)\n");
        free(p);
        return;
    }
    if (n > SCAN_MAX)
        n = SCAN_MAX;
    if (kill_ranks) {
        /* Every victim's pid first, then the signals back to back. */
        long victim[MAX_VICTIMS];
        char *rs[MAX_VICTIMS];
        size_t nr = 0;
        for (char *t; nr < MAX_VICTIMS && (t = strtok_r(NULL, " \t", &save));) {
            tbon_rank_t r = (tbon_rank_t)strtoul(t, NULL, 10);
            rs[nr] = t;
            victim[nr] = 0;
            for (long i = 0; i < n && !victim[nr]; i++)
                if (p[i].rank == r)
                    victim[nr] = p[i].pid;
            nr++;
        }
        for (size_t i = 0; i < nr; i++)
            if (victim[i])
                kill((pid_t)victim[i], SIGKILL);
        for (size_t i = 0; i < nr; i++) {
            if (victim[i])
                fprintf(out, "%s %ld\n", rs[i], victim[i]);
            else
                fprintf(out, "%s -\n", rs[i]);
        }
    } else if (list) {
        for (long i = 0; i < n; i++) {
            if (p[i].rank == TBON_RANK_NONE)
                fprintf(out, "%ld -\n", p[i].pid);
            else
                fprintf(out, "%ld %u\n", p[i].pid, (unsigned)p[i].rank);
        }
    } else {
        for (long i = 0; i < n; i++)
            kill((pid_t)p[i].pid, SIGKILL);
        fprintf(out, "%ld\n", n);
    }
    free(p);
}

/* tbon_fims --agent: the agent of one host (see above). Ends at the end of
 * its input, i.e. when the front-end closes it or dies. */
static int agent_main(void)
{
    char line[4096], session[64] = "";
    signal(SIGPIPE, SIG_IGN);
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        agent_do(line, session, sizeof session, NULL, stdout);
        if (printf(".\n") < 0 || fflush(stdout) != 0)
            break;
    }
    return 0;
}

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

static struct host *hosts;
static size_t       nhosts;
static size_t      *host_of;     /* per rank: index into hosts */
static const char  *agent_rsh;   /* $TBON_RSH, else the library's default ssh */
static char         agent_self[4096];
static char         session_id[64];

extern char **environ;

/* Start the agent of h: [rsh words..., host, 'SELF' --agent], with our
 * environment minus RUN_ENV (so that nothing of the agent counts as a
 * process of the run). Returns 0, or -1 with h->why set. */
static int agent_start(struct host *h)
{
    char *rsh = strdup(agent_rsh), *save = NULL, qself[4200];
    char *words[64];
    size_t w = 0;
    snprintf(qself, sizeof qself, "'%s'", agent_self);   /* a shell word (no ' in it) */
    for (char *t = rsh ? strtok_r(rsh, " \t", &save) : NULL; t && w < 60;
         t = strtok_r(NULL, " \t", &save))
        words[w++] = t;
    if (w == 0) {
        snprintf(h->why, sizeof h->why, "the remote shell \"%s\" is empty", agent_rsh);
        free(rsh);
        return -1;
    }
    words[w++] = h->name;
    words[w++] = qself;
    words[w++] = (char *)"--agent";
    words[w] = NULL;
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **envp = calloc(ne + 1, sizeof *envp);
    int in[2] = { -1, -1 }, out[2] = { -1, -1 }, e = ENOMEM;
    if (envp && pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0) {
        size_t k = 0;
        for (size_t i = 0; i < ne; i++)
            if (strncmp(environ[i], RUN_ENV "=", sizeof RUN_ENV) != 0)
                envp[k++] = environ[i];
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        e = posix_spawnp(&h->pid, words[0], &fa, NULL, words, envp);
        posix_spawn_file_actions_destroy(&fa);
    } else if (envp) {
        e = errno;
    }
    free(envp);
    free(rsh);
    if (in[0] >= 0)
        close(in[0]);
    if (out[1] >= 0)
        close(out[1]);
    if (e) {
        snprintf(h->why, sizeof h->why, "cannot start the remote shell %s: %s", agent_rsh,
                 strerror(e));
        h->pid = 0;
        if (in[1] >= 0)
            close(in[1]);
        if (out[0] >= 0)
            close(out[0]);
        return -1;
    }
    h->to = in[1];
    h->from = out[0];
    h->nin = 0;
    h->skip = 0;
    return 0;
}

/* End h's agent: close its input, give it up to ms to go, then kill the
 * remote shell client. */
static void agent_stop(struct host *h, int ms)
{
    if (!h->pid)
        return;
    if (h->to >= 0)
        close(h->to);
    close(h->from);
    h->to = -1;
    int64_t end = now_us() + (int64_t)ms * 1000;
    for (;;) {
        pid_t w = waitpid(h->pid, NULL, WNOHANG);
        if (w == h->pid || (w < 0 && errno == ECHILD))
            break;
        if (now_us() >= end) {
            kill(h->pid, SIGKILL);
            waitpid(h->pid, NULL, 0);
            break;
        }
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    h->pid = 0;
}

/* Send one command to host h (its agent, started if need be; on this host
 * it runs at once). Returns 0, or -1 with h->why set. */
static int host_send(struct host *h, const char *cmd)
{
    if (h->local) {
        char line[4096];
        size_t len = 0;
        snprintf(line, sizeof line, "%s", cmd);
        FILE *f = open_memstream(&h->local_reply, &len);
        if (!f) {
            snprintf(h->why, sizeof h->why, "out of memory");
            return -1;
        }
        agent_do(line, session_id, sizeof session_id, run_kv, f);
        fclose(f);
        return 0;
    }
    if (!h->pid) {
        if (agent_start(h) != 0)
            return -1;
        if (session_id[0]) {
            char s[96];
            snprintf(s, sizeof s, "session %s\n", session_id);
            if (write(h->to, s, strlen(s)) != (ssize_t)strlen(s)) {
                snprintf(h->why, sizeof h->why, "its remote shell ended at once");
                agent_stop(h, 0);
                return -1;
            }
            h->skip++;
        }
    }
    size_t l = strlen(cmd);
    char *line = malloc(l + 2);
    if (!line) {
        snprintf(h->why, sizeof h->why, "out of memory");
        return -1;
    }
    memcpy(line, cmd, l);
    line[l] = '\n';
    ssize_t n = write(h->to, line, l + 1);
    free(line);
    if (n != (ssize_t)(l + 1)) {
        snprintf(h->why, sizeof h->why, "its remote shell has ended (%s)",
                 n < 0 ? strerror(errno) : "short write");
        agent_stop(h, 0);
        return -1;
    }
    return 0;
}

/* Where the answer at the start of b (n bytes) ends: the index of its
 * final line ".", or -1 while it is not complete. */
static long answer_end(const char *b, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        if (b[i] == '.' && b[i + 1] == '\n' && (i == 0 || b[i - 1] == '\n'))
            return (long)i;
    return -1;
}

/* The answer of the oldest command sent to h (malloc'd, without the "."
 * line; the caller frees), waiting until deadline (now_us() time). NULL with
 * h->why set when the agent ended or did not answer in time; the agent is
 * then stopped (the next command starts a new one). */
static char *host_reply(struct host *h, int64_t deadline)
{
    if (h->local) {
        char *r = h->local_reply;
        h->local_reply = NULL;
        if (!r)
            snprintf(h->why, sizeof h->why, "no command was run");
        return r;
    }
    if (!h->pid) {
        snprintf(h->why, sizeof h->why, "no remote shell");
        return NULL;
    }
    for (;;) {
        long e = answer_end(h->in, h->nin);
        if (e >= 0) {
            char *r = malloc((size_t)e + 1);
            if (r) {
                memcpy(r, h->in, (size_t)e);
                r[e] = '\0';
            }
            memmove(h->in, h->in + e + 2, h->nin - (size_t)e - 2);
            h->nin -= (size_t)e + 2;
            if (h->skip > 0) {          /* the answer to a "session" we sent */
                h->skip--;
                free(r);
                continue;
            }
            if (!r)
                snprintf(h->why, sizeof h->why, "out of memory");
            return r;
        }
        int64_t left = deadline - now_us();
        if (left <= 0 || h->nin == sizeof h->in) {
            snprintf(h->why, sizeof h->why, "its agent (through %s %s) did not answer in time",
                     agent_rsh, h->name);
            agent_stop(h, 0);
            return NULL;
        }
        struct pollfd pf = { .fd = h->from, .events = POLLIN };
        int pr = poll(&pf, 1, (int)(left / 1000 + 1));
        if (pr <= 0)
            continue;
        ssize_t n = read(h->from, h->in + h->nin, sizeof h->in - h->nin);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(h->why, sizeof h->why, "its agent (through %s %s) ended", agent_rsh,
                     h->name);
            agent_stop(h, 0);
            return NULL;
        }
        h->nin += (size_t)n;
    }
}

/* SIGKILL every process of the run on every host, rescanning until none is
 * left here (one may have been starting while we looked). Also called by
 * the watchdog's thread: it only writes to the agents, closes their input
 * (they end after the command) and waits for them. */
static void kill_run(void)
{
    for (size_t i = 0; i < nhosts; i++)
        if (!hosts[i].local && hosts[i].pid && hosts[i].to >= 0 && session_id[0] &&
            write(hosts[i].to, "killall\n", 8) != 8)
            continue;
    struct proc *p = malloc(SCAN_MAX * sizeof *p);
    long n;
    for (int i = 0; p && i < 10 && (n = scan_procs(session_id, run_kv, p, SCAN_MAX)) > 0; i++)
        for (long k = 0; k < n && k < SCAN_MAX; k++)
            kill((pid_t)p[k].pid, SIGKILL);
    free(p);
    for (size_t i = 0; i < nhosts; i++)
        if (!hosts[i].local && hosts[i].pid) {
            close(hosts[i].to);
            hosts[i].to = -1;
            agent_stop(&hosts[i], 3000);
        }
}

/* Reap every zombie child (this process is a subreaper: orphans of the
 * tree come back here). Only once the library has reaped its own. */
static void reap_all(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* --------------------------------------------------------------- watchdog */

/* The watchdog (tests/lib/watchdog.h) fired: FAIL, and no process left. */
static void wd_fire(const char *phase)
{
    fprintf(stderr, PROG ": watchdog: the run is still going (%s) after its time limit; "
            "killing every process of the run\n", phase);
    printf(PROG ": FAIL: watchdog fired during %s\n", phase);
    fflush(stdout);
    kill_run();
    _exit(1);
}

/* ---------------------------------------------------------------- options */

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

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " -t TOPOLOGY [--duration S] [--rate HZ] [--schedule SPEC]\n"
"                 [--dir DIR] [--seed N] [--heartbeat MS] [--csv FILE] [--timeout S]\n"
"\n"
"The failure injection and management service: runs the integer-union\n"
"computation on the tree of TOPOLOGY (this program at every leaf), kills\n"
"commnodes with SIGKILL on a schedule, reports how long the tree took to\n"
"recover, and checks that the front-end's output set is exactly the union of\n"
"what the back-ends sent, with no element reported as new twice, every\n"
"element in a result whose coverage (tbon_packet_covered) holds the back-end\n"
"that sent it (its own file says which), a failure event for every kill and\n"
"no process of the run left at the end.\n"
"\n"
"Options:\n"
"  -t, --topology FILE  the tree (text or XML topology)\n"
"  --duration S         how long the back-ends send (default 10)\n"
"  --rate HZ            packets per second per back-end (default 10)\n"
"  --schedule SPEC      failures to inject: comma-separated T:KIND, T in seconds\n"
"                       since the start; KIND is one of\n"
"                         one          one random live commnode\n"
"                         several=K    K random live commnodes at once\n"
"                         depth1       a child of the front-end\n"
"                         adopter      a commnode, then %d ms later the node most\n"
"                                      likely to adopt its first orphan\n"
"                         parent       a commnode and its parent at once\n"
"                         every=P      a random commnode every P seconds from T\n"
"                                      to the end of --duration\n"
"                       e.g. 2:one,5:several=2,8:every=2\n"
"  --dir DIR            where the back-ends write be-RANK.txt (default: a new\n"
"                       directory in $TMPDIR, removed when the run passes)\n"
"  --seed N             seed of every random choice (default 1)\n"
"  --heartbeat MS       the tree's heartbeat period (default: the library's)\n"
"  --csv FILE           one row per recovered orphan: injection, victim,\n"
"                       orphan, adopter, the four parts in us, total\n"
"  --timeout S          kill everything and exit 1 after S seconds\n"
"                       (default: duration + 120)\n"
"  -h, --help           show this help\n"
"\n"
"Hosts: a topology may span hosts. The tool starts an agent (this program,\n"
"--agent) on every other host of the topology through the remote shell the\n"
"tree uses ($TBON_RSH, default ssh); a victim is killed, and leftovers are\n"
"looked for, on its own host, by the --tbon-rank and --tbon-session words\n"
"of its command line. DIR must be on a file system every host shares.\n"
"A back-end that fails (its host cut off, say) is reported with the values\n"
"it sent that no one delivered: LOST, by rank; a value of a live back-end\n"
"that did not arrive is missing, and fails the run. A schedule under which\n"
"nothing was killed fails the run.\n"
"\n"
"Exit status: 0 when every check holds, 1 when one does not, 2 for bad usage.\n",
            ADOPTER_DELAY_MS);
}

__attribute__((noreturn, format(printf, 1, 2)))
static void bad_usage(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, PROG ": ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(" PROG " --help shows the options)\n");
    exit(2);
}

/* A finite number > 0 (>= 0 if zero_ok), or a usage error naming opt. */
static double parse_pos(const char *opt, const char *s, int zero_ok)
{
    char *end;
    errno = 0;
    double v = s && *s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !(v == v) || v > 1e9 || v < 0 || (!zero_ok && v == 0))
        bad_usage("%s: expected a %s number, got \"%s\"", opt,
                  zero_ok ? "non-negative" : "positive", s ? s : "");
    return v;
}

static void add_item(struct opts *o, const struct item *it)
{
    struct item *n = realloc(o->items, (o->nitems + 1) * sizeof *n);
    if (!n)
        bad_usage("out of memory");
    o->items = n;
    o->items[o->nitems++] = *it;
}

/* Parse SPEC into o->items (every=P expanded), sorted by time. */
static void parse_schedule(struct opts *o)
{
    char *copy = strdup(o->sched), *save = NULL;
    if (!copy)
        bad_usage("out of memory");
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        struct item it = { 0 };
        snprintf(it.text, sizeof it.text, "%s", tok);
        char *colon = strchr(tok, ':');
        if (!colon)
            bad_usage("--schedule: \"%s\": expected T:KIND (e.g. 2:one)", it.text);
        *colon = '\0';
        char *end, *kind = colon + 1;
        errno = 0;
        it.at = strtod(tok, &end);
        if (!*tok || *end || errno || !(it.at >= 0))
            bad_usage("--schedule: \"%s\": the time \"%s\" is not a number of seconds >= 0",
                      it.text, tok);
        if (it.at >= o->duration)
            bad_usage("--schedule: \"%s\": %g s is not before the end of the run (--duration %g)",
                      it.text, it.at, o->duration);
        char *eq = strchr(kind, '=');
        const char *arg = eq ? eq + 1 : NULL;
        if (eq)
            *eq = '\0';
        if (strcmp(kind, "one") == 0 && !arg) {
            it.kind = K_ONE;
        } else if (strcmp(kind, "depth1") == 0 && !arg) {
            it.kind = K_DEPTH1;
        } else if (strcmp(kind, "adopter") == 0 && !arg) {
            it.kind = K_ADOPTER;
        } else if (strcmp(kind, "parent") == 0 && !arg) {
            it.kind = K_PARENT;
        } else if (strcmp(kind, "several") == 0 && arg) {
            unsigned long k = strtoul(arg, &end, 10);
            if (!*arg || *end || k < 1 || k > MAX_VICTIMS)
                bad_usage("--schedule: \"%s\": several=K needs K from 1 to %d", it.text,
                          MAX_VICTIMS);
            it.kind = K_SEVERAL;
            it.k = (unsigned)k;
        } else if (strcmp(kind, "every") == 0 && arg) {
            errno = 0;
            it.period = strtod(arg, &end);
            if (!*arg || *end || errno || !(it.period >= 0.05))
                bad_usage("--schedule: \"%s\": every=P needs a period P of at least 0.05 s",
                          it.text);
            it.kind = K_EVERY;
        } else {
            bad_usage("--schedule: \"%s\": unknown kind \"%s%s%s\" (one, several=K, depth1, "
                      "adopter, parent, every=P)", it.text, kind, arg ? "=" : "", arg ? arg : "");
        }
        if (it.kind != K_EVERY) {
            add_item(o, &it);
            continue;
        }
        for (double t = it.at; t < o->duration; t += it.period) {
            struct item one = it;
            one.at = t;
            add_item(o, &one);
        }
    }
    free(copy);
    /* Stable insertion sort by time: the schedule's own order breaks ties. */
    for (size_t i = 1; i < o->nitems; i++)
        for (size_t j = i; j > 0 && o->items[j - 1].at > o->items[j].at; j--) {
            struct item t = o->items[j];
            o->items[j] = o->items[j - 1];
            o->items[j - 1] = t;
        }
}

/* The value of option a (argv[i + 1]), or a usage error. */
static const char *value_of(int argc, char **argv, int i)
{
    if (i + 1 >= argc)
        bad_usage("%s needs a value", argv[i]);
    return argv[i + 1];
}

static void parse_args(int argc, char **argv, struct opts *o)
{
    static const char *const valued[] = { "-t", "--topology", "--duration", "--rate",
                                          "--schedule", "--dir", "--csv", "--timeout",
                                          "--seed", "--heartbeat", NULL };
    o->duration = 10;
    o->rate = 10;
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        size_t k = 0;
        while (valued[k] && strcmp(valued[k], a) != 0)
            k++;
        if (!valued[k])
            bad_usage("unknown option \"%s\"", a);
        const char *v = value_of(argc, argv, i++);
        if (strcmp(a, "-t") == 0 || strcmp(a, "--topology") == 0)
            o->topo = v;
        else if (strcmp(a, "--duration") == 0)
            o->duration = parse_pos(a, v, 0);
        else if (strcmp(a, "--rate") == 0)
            o->rate = parse_pos(a, v, 0);
        else if (strcmp(a, "--schedule") == 0)
            o->sched = v;
        else if (strcmp(a, "--dir") == 0)
            o->dir = v;
        else if (strcmp(a, "--csv") == 0)
            o->csv = v;
        else if (strcmp(a, "--timeout") == 0)
            o->timeout = parse_pos(a, v, 0);
        else if (strcmp(a, "--seed") == 0) {
            char *end;
            errno = 0;
            o->seed = *v >= '0' && *v <= '9' ? strtoull(v, &end, 0) : 0;
            if (*v < '0' || *v > '9' || *end || errno)
                bad_usage("--seed: expected an unsigned integer, got \"%s\"", v);
        } else {   /* --heartbeat */
            double ms = parse_pos(a, v, 0);
            if (ms != (int)ms || ms > 3600000)
                bad_usage("--heartbeat: expected whole milliseconds up to 3600000, got \"%s\"", v);
            o->heartbeat_ms = (int)ms;
        }
    }
    if (!o->topo)
        bad_usage("no topology: -t TOPOLOGY is required");
    if (o->rate > 10000)
        bad_usage("--rate: %g Hz is more than the 10000 this tool sends", o->rate);
    if (o->sched && *o->sched)
        parse_schedule(o);
    if (o->timeout == 0)
        o->timeout = o->duration + 120;
}

/* ------------------------------------------------------ the front-end state */

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

static struct fe {
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
} fe = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* The injection whose orphans include r (the latest one), or SIZE_MAX. */
static size_t injection_of_orphan(tbon_rank_t r, size_t *idx)
{
    for (size_t i = fe.ninj; i-- > 0;)
        for (size_t k = 0; k < fe.inj[i].norph; k++)
            if (fe.inj[i].orphan[k] == r) {
                *idx = k;
                return i;
            }
    return SIZE_MAX;
}

/* The recovery line the runtime logs at the FE for each adopted orphan:
 * "rank R adopted by A (incarnation I): new_parent N us, connect C us,
 * compensate P us, cleanup Q us". Other lines go on to stderr as the default
 * logger would write them, if their level is enabled for the user. Runs on
 * library threads, under the library's logger lock: it must not log. */
static void log_handler(void *arg, int level, const char *line)
{
    (void)arg;
    const char *m = strstr(line, " [recovery] ");
    if (m) {
        struct recovery r = { .inj = SIZE_MAX };
        int end = 0;
        if (sscanf(m + 12, "rank %" SCNu32 " adopted by %" SCNu32 " (incarnation %" SCNu32
                   "): new_parent %lld us, connect %lld us, compensate %lld us, "
                   "cleanup %lld us%n", &r.orphan, &r.adopter, &r.incarnation, &r.part[0],
                   &r.part[1], &r.part[2], &r.part[3], &end) == 7 && m[12 + end] == '\0') {
            pthread_mutex_lock(&fe.mu);
            size_t k;
            r.inj = injection_of_orphan(r.orphan, &k);
            r.victim = r.inj == SIZE_MAX ? TBON_RANK_NONE : fe.inj[r.inj].old_parent[k];
            if (fe.nrec == fe.caprec) {
                size_t nc = fe.caprec ? fe.caprec * 2 : 64;
                struct recovery *nr = realloc(fe.rec, nc * sizeof *nr);
                if (nr) {
                    fe.rec = nr;
                    fe.caprec = nc;
                }
            }
            if (fe.nrec < fe.caprec)
                fe.rec[fe.nrec++] = r;
            pthread_mutex_unlock(&fe.mu);
            if (fe.user_level < TBON_LOG_INFO)
                return;
        } else {
            pthread_mutex_lock(&fe.mu);
            fe.bad_recovery_lines++;
            pthread_mutex_unlock(&fe.mu);
        }
    }
    if (level <= fe.user_level)
        fprintf(stderr, "%s\n", line);
}

/* Results: keep the union; an element that comes twice was reported as new
 * twice. */
/* Under fe.mu: result p's coverage kept (its index: UINT32_MAX if none). */
static uint32_t note_coverage(const tbon_packet_t *p)
{
    size_t n = tbon_packet_covered(p, NULL, 0);
    if (fe.ncov == fe.capcov) {
        size_t nc = fe.capcov ? fe.capcov * 2 : 1024;
        struct cov *c = realloc(fe.cov, nc * sizeof *c);
        if (!c)
            return UINT32_MAX;
        fe.cov = c;
        fe.capcov = nc;
    }
    tbon_rank_t *r = malloc((n ? n : 1) * sizeof *r);
    if (!r)
        return UINT32_MAX;
    tbon_packet_covered(p, r, n);
    fe.cov[fe.ncov] = (struct cov){ r, n };
    return (uint32_t)fe.ncov++;
}

/* Under fe.mu: private element v came first in result res. */
static void note_element(uint64_t v, uint32_t res)
{
    if (fe.nvres == fe.capvres) {
        size_t nc = fe.capvres ? fe.capvres * 2 : 4096;
        struct vres *x = realloc(fe.vres, nc * sizeof *x);
        if (!x)
            return;
        fe.vres = x;
        fe.capvres = nc;
    }
    fe.vres[fe.nvres++] = (struct vres){ v, res };
}

static int vres_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct vres *)a)->v, y = ((const struct vres *)b)->v;
    return x < y ? -1 : x > y;
}

static int rank_cmp(const void *a, const void *b)
{
    tbon_rank_t x = *(const tbon_rank_t *)a, y = *(const tbon_rank_t *)b;
    return x < y ? -1 : x > y;
}

static void *results_main(void *arg)
{
    tbon_stream_t *s = arg;
    for (;;) {
        pthread_mutex_lock(&fe.mu);
        int stop = fe.stop;
        pthread_mutex_unlock(&fe.mu);
        if (stop)
            break;
        tbon_packet_t *p = NULL;
        int rc = tbon_stream_recv(s, &p, 200);
        if (rc == TBON_ETIMEOUT)
            continue;
        if (rc == TBON_ECLOSED)
            break;
        uint64_t *v = NULL;
        size_t n = 0;
        if (rc == 0 && tbon_packet_unpack(p, "%auld", &v, &n) != 0)
            rc = TBON_EFORMAT;
        pthread_mutex_lock(&fe.mu);
        if (rc != 0) {
            if (fe.stream_errors++ == 0)
                snprintf(fe.stream_error, sizeof fe.stream_error, "%s%s%s", tbon_strerror(rc),
                         rc == TBON_EFORMAT ? ": a result of format " : "",
                         rc == TBON_EFORMAT ? tbon_packet_format(p) : "");
        } else {
            fe.packets++;
            uint32_t res = note_coverage(p);
            for (size_t i = 0; i < n; i++) {
                if (!set_add(&fe.out, v[i])) {
                    if (fe.twice++ < SHOW_MAX)
                        fe.twice_first[fe.twice - 1] = v[i];
                } else if (v[i] >= SHARED_POOL) {
                    note_element(v[i], res);
                }
            }
        }
        fe.last_result_us = now_us();
        pthread_cond_broadcast(&fe.cv);
        pthread_mutex_unlock(&fe.mu);
        free(v);
        tbon_packet_unref(p);
    }
    return NULL;
}

/* Membership events: apply them to the private topology copy and match them
 * with the injections. */
static void *events_main(void *arg)
{
    tbon_net_t *net = arg;
    for (;;) {
        pthread_mutex_lock(&fe.mu);
        int stop = fe.stop;
        pthread_mutex_unlock(&fe.mu);
        if (stop)
            break;
        tbon_event_t ev;
        int rc = tbon_net_next_event(net, &ev, 200);
        if (rc == TBON_ETIMEOUT)
            continue;
        if (rc != 0)
            break;
        int64_t t = now_us();
        pthread_mutex_lock(&fe.mu);
        if (ev.type == TBON_EV_NODE_FAILED && ev.rank != 0) {
            tb_topology_remove(fe.topo, ev.rank);
            int ours = 0;
            for (size_t i = 0; i < fe.ninj; i++)
                for (size_t k = 0; k < fe.inj[i].nv; k++)
                    if (fe.inj[i].victim[k] == ev.rank && !fe.inj[i].failed_us[k]) {
                        fe.inj[i].failed_us[k] = t;
                        ours = 1;
                    }
            int known = ev.rank < tb_topology_size(fe.topo);
            if (known && !fe.failed_us[ev.rank])
                fe.failed_us[ev.rank] = t;
            if (!ours && !(known && fe.killed[ev.rank])) {
                fe.other_failed++;
                /* Said at once: a test may wait for it (a host cut off). */
                printf("t=%.3f s: %s %u%s%s failed (not killed by this run)\n",
                       (double)(t - fe.t0) / 1e6, known && fe.is_be[ev.rank] ? "back-end" : "node",
                       (unsigned)ev.rank, known ? " on " : "",
                       known ? hosts[host_of[ev.rank]].name : "");
                fflush(stdout);
            }
        } else if (ev.type == TBON_EV_NODE_ADOPTED) {
            if (tb_topology_reparent(fe.topo, ev.rank, ev.parent) == 0)
                tb_topology_set_incarnation(fe.topo, ev.rank, ev.incarnation);
            size_t k, i = injection_of_orphan(ev.rank, &k);
            if (i != SIZE_MAX && !fe.inj[i].adopted_us[k])
                fe.inj[i].adopted_us[k] = t;    /* its first adoption after the kill */
            if (i == SIZE_MAX && ev.rank < tb_topology_size(fe.topo)) {
                printf("t=%.3f s: %s %u on %s adopted by %u (after a failure this run did "
                       "not cause)\n", (double)(t - fe.t0) / 1e6,
                       fe.is_be[ev.rank] ? "back-end" : "node", (unsigned)ev.rank,
                       hosts[host_of[ev.rank]].name, (unsigned)ev.parent);
                fflush(stdout);
            }
        }
        pthread_cond_broadcast(&fe.cv);
        pthread_mutex_unlock(&fe.mu);
    }
    return NULL;
}

/* --------------------------------------------------------------- injection */

static uint64_t pick_rng;

static int is_live_commnode(tbon_rank_t r)
{
    return tb_topology_role(fe.topo, r) == TB_ROLE_COMMNODE && tb_topology_alive(fe.topo, r) &&
           !fe.killed[r];
}

/* A random live commnode satisfying ok (NULL: any) and not in excl[0..nex),
 * or TBON_RANK_NONE. */
static tbon_rank_t pick(int (*ok)(tbon_rank_t), const tbon_rank_t *excl, size_t nex)
{
    size_t size = tb_topology_size(fe.topo), n = 0;
    tbon_rank_t *c = malloc(size * sizeof *c);
    if (!c)
        return TBON_RANK_NONE;
    for (tbon_rank_t r = 1; r < size; r++) {
        int skip = !is_live_commnode(r) || (ok && !ok(r));
        for (size_t i = 0; i < nex && !skip; i++)
            skip = excl[i] == r;
        if (!skip)
            c[n++] = r;
    }
    tbon_rank_t r = n ? c[rng_next(&pick_rng) % n] : TBON_RANK_NONE;
    free(c);
    return r;
}

static int at_depth1(tbon_rank_t r)
{
    return tb_topology_parent(fe.topo, r) == 0;
}

static int has_children(tbon_rank_t r)
{
    return tb_topology_num_children(fe.topo, r) > 0;
}

static int parent_is_commnode(tbon_rank_t r)
{
    tbon_rank_t p = tb_topology_parent(fe.topo, r);
    return p != TBON_RANK_NONE && p != 0 && is_live_commnode(p);
}

/* The node that will adopt the first orphan of victim: the first of the
 * library's own candidates (libtbon/reconfig.h), computed on a copy of our
 * topology as the orphan will, or NONE if that is the FE (the last resort). */
static tbon_rank_t likely_adopter(tbon_rank_t victim)
{
    size_t n;
    const tbon_rank_t *kids = tb_topology_children(fe.topo, victim, &n);
    if (n == 0)
        return TBON_RANK_NONE;
    tbon_rank_t o = kids[0], out[4], a = TBON_RANK_NONE;
    uint32_t old_height = tb_topology_height(fe.topo, o) + 1;
    tb_topology_t *t = tb_topology_clone(fe.topo);
    if (!t)
        return TBON_RANK_NONE;
    tb_report_failure(t, victim, tb_topology_incarnation(t, victim));
    tb_adopt_index_t *x = tb_adopt_index_new(t);
    size_t k = x ? tb_adopt_candidates(x, t, o, victim, old_height, out, 4) : 0;
    if (k > 0 && out[0] != 0)
        a = out[0];
    tb_adopt_index_destroy(x);
    tb_topology_destroy(t);
    return a;
}

/* Add the children of v (not themselves victims of in) to in's orphans. */
static void add_orphans(struct injection *in, tbon_rank_t v)
{
    size_t n;
    const tbon_rank_t *kids = tb_topology_children(fe.topo, v, &n);
    for (size_t i = 0; i < n; i++) {
        int dup = 0;
        for (size_t k = 0; k < in->nv && !dup; k++)
            dup = in->victim[k] == kids[i];
        for (size_t k = 0; k < in->norph && !dup; k++)
            dup = in->orphan[k] == kids[i];
        if (dup)
            continue;
        size_t m = in->norph + 1;
        tbon_rank_t *o = realloc(in->orphan, m * sizeof *o);
        tbon_rank_t *op = realloc(in->old_parent, m * sizeof *op);
        int64_t *a = realloc(in->adopted_us, m * sizeof *a);
        if (o)
            in->orphan = o;
        if (op)
            in->old_parent = op;
        if (a)
            in->adopted_us = a;
        if (!o || !op || !a)
            return;
        in->orphan[in->norph] = kids[i];
        in->old_parent[in->norph] = v;
        in->adopted_us[in->norph] = 0;
        in->norph = m;
    }
}

/* Choose the victims of in (under fe.mu). Returns 0, or -1 with in->note
 * saying why there is nothing to kill. */
static int choose_victims(struct injection *in)
{
    const struct item *it = in->item;
    tbon_rank_t r;
    switch (it->kind) {
    case K_ONE:
    case K_EVERY:
        r = pick(NULL, NULL, 0);
        if (r == TBON_RANK_NONE)
            break;
        in->victim[in->nv++] = r;
        return 0;
    case K_SEVERAL:
        while (in->nv < it->k && (r = pick(NULL, in->victim, in->nv)) != TBON_RANK_NONE)
            in->victim[in->nv++] = r;
        if (in->nv == it->k)
            return 0;
        snprintf(in->note, sizeof in->note, "only %zu live commnode%s, %u wanted", in->nv,
                 in->nv == 1 ? "" : "s", it->k);
        in->nv = 0;
        return -1;
    case K_DEPTH1:
        r = pick(at_depth1, NULL, 0);
        if (r == TBON_RANK_NONE)
            break;
        in->victim[in->nv++] = r;
        return 0;
    case K_ADOPTER:
        r = pick(has_children, NULL, 0);
        if (r == TBON_RANK_NONE)
            break;
        in->victim[in->nv++] = r;
        tbon_rank_t a = likely_adopter(r);
        if (a == TBON_RANK_NONE)
            snprintf(in->note, sizeof in->note, "no commnode can adopt (the front-end "
                     "will): the victim only");
        else
            in->victim[in->nv++] = a;
        return 0;
    case K_PARENT:
        r = pick(parent_is_commnode, NULL, 0);
        if (r == TBON_RANK_NONE) {
            snprintf(in->note, sizeof in->note, "no live commnode has a live commnode parent");
            return -1;
        }
        in->victim[in->nv++] = r;
        in->victim[in->nv++] = tb_topology_parent(fe.topo, r);
        return 0;
    }
    snprintf(in->note, sizeof in->note, "no live commnode%s to kill",
             it->kind == K_DEPTH1 ? " at depth 1" : it->kind == K_ADOPTER ? " with children" : "");
    return -1;
}

static void print_ranks(FILE *f, const tbon_rank_t *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%u", i ? "," : "", (unsigned)r[i]);
    if (!n)
        fprintf(f, "-");
}

/* Kill victims [from, to) of in: one command per host, "kill R...", to its
 * agent (on this host it runs at once), every host's before any answer is
 * read, so that "at once" means back to back everywhere; then the answers:
 * the pid each victim had, or why none was killed. kill_us is when the
 * command left. */
static void kill_victims(struct injection *in, size_t from, size_t to)
{
    size_t hs[MAX_VICTIMS], nh = 0;
    int sent[MAX_VICTIMS] = { 0 };
    for (size_t k = from; k < to; k++) {
        size_t h = host_of[in->victim[k]], j = 0;
        while (j < nh && hs[j] != h)
            j++;
        if (j == nh)
            hs[nh++] = h;
    }
    for (size_t j = 0; j < nh; j++) {
        struct host *h = &hosts[hs[j]];
        char cmd[MAX_VICTIMS * 12 + 8];
        size_t o = (size_t)snprintf(cmd, sizeof cmd, "kill");
        for (size_t k = from; k < to; k++)
            if (host_of[in->victim[k]] == hs[j])
                o += (size_t)snprintf(cmd + o, sizeof cmd - o, " %u", (unsigned)in->victim[k]);
        int64_t t = now_us();
        sent[j] = host_send(h, cmd) == 0;
        for (size_t k = from; k < to; k++)
            if (host_of[in->victim[k]] == hs[j]) {
                in->where[k] = !h->local;
                in->kill_us[k] = t;
                if (!sent[j])
                    snprintf(in->miss[k], sizeof in->miss[k], "%.90s", h->why);
            }
    }
    for (size_t j = 0; j < nh; j++) {
        if (!sent[j])
            continue;
        struct host *h = &hosts[hs[j]];
        char *r = host_reply(h, now_us() + 10 * 1000000LL);
        for (size_t k = from; k < to; k++) {
            if (host_of[in->victim[k]] != hs[j])
                continue;
            if (!r) {
                snprintf(in->miss[k], sizeof in->miss[k], "%.90s", h->why);
                continue;
            }
            snprintf(in->miss[k], sizeof in->miss[k], "no process of rank %u there",
                     (unsigned)in->victim[k]);
            for (const char *c = r; *c; c += strcspn(c, "\n") + (c[strcspn(c, "\n")] != 0)) {
                unsigned rr;
                long pid;
                if (sscanf(c, "%u %ld", &rr, &pid) == 2 && rr == in->victim[k] && pid > 0) {
                    in->pid[k] = (pid_t)pid;
                    in->miss[k][0] = '\0';
                    break;
                }
            }
        }
        free(r);
    }
}

/* Kill the victims of one schedule item; t0 is the run's start. The lock is
 * not held while the agents are asked (the events go on meanwhile). */
static void inject(const struct item *it, int64_t t0)
{
    pthread_mutex_lock(&fe.mu);
    struct injection *ni = realloc(fe.inj, (fe.ninj + 1) * sizeof *ni);
    if (!ni) {
        pthread_mutex_unlock(&fe.mu);
        return;
    }
    fe.inj = ni;
    struct injection *in = &fe.inj[fe.ninj];
    memset(in, 0, sizeof *in);
    in->item = it;
    size_t idx = fe.ninj++;
    if (choose_victims(in) != 0)
        in->skipped = 1;
    for (size_t k = 0; k < in->nv; k++)
        fe.killed[in->victim[k]] = 1;
    /* The adopter's children are orphans of this injection too, including
     * the first orphan if it is already adopted when the adopter dies. */
    size_t nfirst = it->kind == K_ADOPTER ? 1 : in->nv;
    for (size_t k = 0; k < in->nv; k++)
        add_orphans(in, in->victim[k]);
    struct injection mine = *in;    /* fe.inj may move while unlocked */
    pthread_mutex_unlock(&fe.mu);
    kill_victims(&mine, 0, nfirst);
    if (nfirst < mine.nv) {
        sleep_until_us(mine.kill_us[0] + ADOPTER_DELAY_MS * 1000);
        kill_victims(&mine, nfirst, mine.nv);
    }
    pthread_mutex_lock(&fe.mu);
    in = &fe.inj[idx];
    memcpy(in->pid, mine.pid, sizeof in->pid);
    memcpy(in->where, mine.where, sizeof in->where);
    memcpy(in->miss, mine.miss, sizeof in->miss);
    memcpy(in->kill_us, mine.kill_us, sizeof in->kill_us);
    if (nfirst < in->nv)
        add_orphans(in, in->victim[1]);   /* what it adopted meanwhile */
    printf("t=%.3f s: injection %zu (%s): ", (double)(now_us() - t0) / 1e6, idx + 1, it->text);
    if (in->skipped) {
        printf("nothing killed: %s\n", in->note);
    } else {
        for (size_t k = 0; k < in->nv; k++) {
            const char *hn = hosts[host_of[in->victim[k]]].name;
            if (in->pid[k])
                printf("%skilled commnode %u on %s (pid %d%s)", k ? ", " : "",
                       (unsigned)in->victim[k], hn, (int)in->pid[k],
                       in->where[k] ? ", through its agent" : "");
            else
                printf("%scommnode %u on %s not killed: %s", k ? ", " : "",
                       (unsigned)in->victim[k], hn, in->miss[k]);
        }
        printf("; orphans ");
        print_ranks(stdout, in->orphan, in->norph);
        printf("%s%s\n", in->note[0] ? "; " : "", in->note);
    }
    fflush(stdout);
    pthread_mutex_unlock(&fe.mu);
}

/* ----------------------------------------------------------------- the end */

/* 1 when every kill has its FAILED event and every orphan an ADOPTED one
 * (under fe.mu). */
static int all_recovered(void)
{
    for (size_t i = 0; i < fe.ninj; i++) {
        for (size_t k = 0; k < fe.inj[i].nv; k++)
            if (fe.inj[i].pid[k] && !fe.inj[i].failed_us[k])
                return 0;
        for (size_t k = 0; k < fe.inj[i].norph; k++)
            if (!fe.inj[i].adopted_us[k] && tb_topology_alive(fe.topo, fe.inj[i].orphan[k]))
                return 0;
    }
    return 1;
}

/* Wait (blocking on fe.cv) until the results have been quiet for QUIET_MS
 * after end_us and the injections have recovered, or the bounds pass. */
static void wait_quiet(int64_t end_us)
{
    int64_t hard = end_us + (int64_t)RECOVER_MS * 1000 + QUIET_MS * 1000;
    pthread_mutex_lock(&fe.mu);
    for (;;) {
        int64_t t = now_us(), last = fe.last_result_us > end_us ? fe.last_result_us : end_us;
        int quiet = t - last >= QUIET_MS * 1000;
        if (t >= hard || (quiet && (all_recovered() || t >= end_us + RECOVER_MS * 1000LL)))
            break;
        int64_t wake = quiet ? t + 100000 : last + QUIET_MS * 1000;
        if (wake > hard)
            wake = hard;
        struct timespec ts = { .tv_sec = (time_t)(wake / 1000000),
                               .tv_nsec = (long)(wake % 1000000) * 1000 };
        pthread_cond_timedwait(&fe.cv, &fe.mu, &ts);
    }
    pthread_mutex_unlock(&fe.mu);
}

struct befile {                  /* what one back-end wrote it sent */
    tbon_rank_t rank;
    uint64_t   *v;               /* in the order it sent them */
    size_t      n, cap;
};

static int befile_cmp(const void *a, const void *b)
{
    tbon_rank_t x = ((const struct befile *)a)->rank, y = ((const struct befile *)b)->rank;
    return x < y ? -1 : x > y;
}

/* Every DIR/be-RANK.txt into *out (in rank order) (malloc'd; the caller frees each v and
 * the array). Returns how many files, or -1 (message printed). */
static long read_inputs(const char *dir, struct befile **out)
{
    DIR *d = opendir(dir);
    if (!d) {
        printf(PROG ": %s: %s\n", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    char path[4400], line[64];
    long nf = 0, cap = 0;
    *out = NULL;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        char *end;
        if (strncmp(e->d_name, "be-", 3) != 0 || l < 8 || strcmp(e->d_name + l - 4, ".txt"))
            continue;
        unsigned long r = strtoul(e->d_name + 3, &end, 10);
        if (end != e->d_name + l - 4)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (nf == cap) {
            cap = cap ? cap * 2 : 64;
            struct befile *nb = realloc(*out, (size_t)cap * sizeof *nb);
            if (!nb) {
                fprintf(stderr, PROG ": out of memory\n");
                exit(1);
            }
            *out = nb;
        }
        struct befile *b = &(*out)[nf++];
        memset(b, 0, sizeof *b);
        b->rank = (tbon_rank_t)r;
        while (fgets(line, sizeof line, f)) {
            errno = 0;
            uint64_t v = strtoull(line, &end, 10);
            if (end == line || (*end != '\n' && *end) || errno)
                continue;
            if (b->n == b->cap) {
                b->cap = b->cap ? b->cap * 2 : 256;
                uint64_t *nv = realloc(b->v, b->cap * sizeof *nv);
                if (!nv) {
                    fprintf(stderr, PROG ": out of memory\n");
                    exit(1);
                }
                b->v = nv;
            }
            b->v[b->n++] = v;
        }
        fclose(f);
    }
    closedir(d);
    if (nf > 1)
        qsort(*out, (size_t)nf, sizeof **out, befile_cmp);
    return nf;
}

/* 1 if back-end rank r had a failure event (it failed, or its host was
 * cut off). */
static int be_failed(tbon_rank_t r)
{
    return r < tb_topology_size(fe.topo) && fe.failed_us[r] != 0;
}

/* The values of failed back-ends that did not reach the front-end and that
 * no live back-end sent: lost with them (the library promises nothing for
 * what a failed node held or had in flight). Each failed back-end's share is
 * printed; *nbe gets how many had a loss, and their ranks go to list. The
 * number of distinct lost values is returned. */
static size_t report_lost(const struct befile *f, long nf, const u64set_t *live, char *list,
                          size_t cap, size_t *nbe)
{
    u64set_t lost = { 0 };
    size_t o = 0;
    *nbe = 0;
    list[0] = '\0';
    for (long i = 0; i < nf; i++) {
        if (!be_failed(f[i].rank))
            continue;
        u64set_t mine = { 0 };
        size_t nlost = 0, holes = 0, last = 0;   /* last: 1 + index of the last arrived */
        for (size_t k = 0; k < f[i].n; k++)      /* a private value: only it sent it */
            if (f[i].v[k] >= SHARED_POOL && set_has(&fe.out, f[i].v[k]))
                last = k + 1;
        for (size_t k = 0; k < f[i].n; k++) {
            uint64_t v = f[i].v[k];
            if (set_has(&fe.out, v) || set_has(live, v) || !set_add(&mine, v))
                continue;
            nlost++;
            holes += k < last;
            set_add(&lost, v);
        }
        printf("  back-end %u on %s failed: sent %zu values, %zu lost", (unsigned)f[i].rank,
               hosts[host_of[f[i].rank]].name, f[i].n, nlost);
        if (nlost && !holes)
            printf(" (every one after its value #%zu, the last that arrived)", last);
        else if (holes)
            printf(" (%zu of them before its value #%zu, the last that arrived)", holes, last);
        printf("\n");
        if (nlost) {
            (*nbe)++;
            if (o + 16 < cap)
                o += (size_t)snprintf(list + o, cap - o, "%s%u", o ? "," : "",
                                      (unsigned)f[i].rank);
        }
        free(mine.slot);
    }
    size_t n = set_size(&lost);
    free(lost.slot);
    return n;
}

/* Every private element that reached the FE came in a result whose coverage
 * holds the back-end that sent it (its own file says so). Returns how many
 * did not; prints the first ones and a summary. */
static size_t check_coverage(const struct befile *f, long nf)
{
    if (fe.nvres > 1)
        qsort(fe.vres, fe.nvres, sizeof *fe.vres, vres_cmp);
    size_t checked = 0, bad = 0;
    for (long i = 0; i < nf; i++)
        for (size_t k = 0; k < f[i].n; k++) {
            if (f[i].v[k] < SHARED_POOL)
                continue;
            struct vres key = { f[i].v[k], 0 };
            const struct vres *e = bsearch(&key, fe.vres, fe.nvres, sizeof *fe.vres, vres_cmp);
            if (!e || e->res == UINT32_MAX)
                continue;       /* never arrived (lost, and said so above) */
            checked++;
            const struct cov *c = &fe.cov[e->res];
            if (!c->n || !bsearch(&f[i].rank, c->r, c->n, sizeof *c->r, rank_cmp)) {
                if (bad++ < SHOW_MAX)
                    printf("  element %" PRIu64 " of back-end %u came in a result whose "
                           "coverage (%zu back-ends) does not hold it\n", f[i].v[k],
                           (unsigned)f[i].rank, c->n);
            }
        }
    printf(PROG ": coverage: %zu results, %zu elements each checked against its sender's file: "
           "%zu not covered\n", fe.ncov, checked, bad);
    for (size_t i = 0; i < fe.ncov; i++)
        free(fe.cov[i].r);
    free(fe.cov);
    free(fe.vres);
    return bad;
}

/* Remove DIR/be-*.txt (and DIR itself when rmdir_too). */
static void clean_dir(const char *dir, int rmdir_too)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4400];
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "be-", 3) != 0 || l < 8 || strcmp(e->d_name + l - 4, ".txt"))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    if (rmdir_too)
        rmdir(dir);
}

/* Per-injection table; per-orphan CSV rows. Returns 0, or -1 when the CSV
 * file cannot be written. */
static int report_recovery(const char *csv, int64_t t0)
{
    FILE *c = NULL;
    if (csv) {
        c = fopen(csv, "w");
        if (!c) {
            printf(PROG ": --csv %s: %s\n", csv, strerror(errno));
            return -1;
        }
        fprintf(c, "injection,victim,orphan,adopter,new_parent_us,connect_us,compensate_us,"
                "cleanup_us,total_us\n");
        for (size_t i = 0; i < fe.nrec; i++) {
            const struct recovery *r = &fe.rec[i];
            long long tot = r->part[0] + r->part[1] + r->part[2] + r->part[3];
            if (r->inj == SIZE_MAX)
                fprintf(c, ",");
            else
                fprintf(c, "%zu,", r->inj + 1);
            if (r->victim == TBON_RANK_NONE)
                fprintf(c, ",");
            else
                fprintf(c, "%u,", (unsigned)r->victim);
            fprintf(c, "%u,%u,%lld,%lld,%lld,%lld,%lld\n", (unsigned)r->orphan,
                    (unsigned)r->adopter, r->part[0], r->part[1], r->part[2], r->part[3], tot);
        }
        if (fclose(c) != 0) {
            printf(PROG ": --csv %s: %s\n", csv, strerror(errno));
            return -1;
        }
    }
    if (!fe.ninj)
        return 0;
    printf("\n%-4s %7s %-12s %-11s %7s %8s %11s %9s %9s %11s %10s %11s %10s\n", "inj", "at_s",
           "kind", "victims", "orphans", "adopted", "overall_ms", "max_ms", "mean_ms",
           "new_par_us", "connect_us", "compens_us", "cleanup_us");
    for (size_t i = 0; i < fe.ninj; i++) {
        const struct injection *in = &fe.inj[i];
        size_t adopted = 0, n = 0;
        int64_t last = 0;
        for (size_t k = 0; k < in->norph; k++)
            if (in->adopted_us[k]) {
                adopted++;
                if (in->adopted_us[k] > last)
                    last = in->adopted_us[k];
            }
        long long mx = 0, sum = 0, ps[4] = { 0 };
        for (size_t k = 0; k < fe.nrec; k++) {
            if (fe.rec[k].inj != i)
                continue;
            long long tot = 0;
            for (int p = 0; p < 4; p++) {
                ps[p] += fe.rec[k].part[p];
                tot += fe.rec[k].part[p];
            }
            mx = tot > mx ? tot : mx;
            sum += tot;
            n++;
        }
        char vict[48] = "-", overall[24] = "-", mxs[24] = "-", mean[24] = "-", pm[4][24];
        if (in->nv) {
            size_t o = 0;
            for (size_t k = 0; k < in->nv && o < sizeof vict - 12; k++)
                o += (size_t)snprintf(vict + o, sizeof vict - o, "%s%u", k ? "," : "",
                                      (unsigned)in->victim[k]);
        }
        if (last && in->kill_us[0])
            snprintf(overall, sizeof overall, "%.2f", (double)(last - in->kill_us[0]) / 1e3);
        for (int p = 0; p < 4; p++)
            snprintf(pm[p], sizeof pm[p], "-");
        if (n) {
            snprintf(mxs, sizeof mxs, "%.2f", (double)mx / 1e3);
            snprintf(mean, sizeof mean, "%.2f", (double)sum / (double)n / 1e3);
            for (int p = 0; p < 4; p++)
                snprintf(pm[p], sizeof pm[p], "%.0f", (double)ps[p] / (double)n);
        }
        printf("%-4zu %7.2f %-12s %-11s %7zu %8zu %11s %9s %9s %11s %10s %11s %10s\n", i + 1,
               in->kill_us[0] ? (double)(in->kill_us[0] - t0) / 1e6 : in->item->at,
               in->item->text + (strchr(in->item->text, ':') ? strchr(in->item->text, ':') - in->item->text + 1 : 0),
               vict, in->norph, adopted, overall, mxs, mean, pm[0], pm[1], pm[2], pm[3]);
    }
    printf("(overall: from the kill to the last adoption event of an orphan; max and mean:\n"
           " the orphans' own latencies, the sum of the four parts, from the runtime's\n"
           " recovery reports: %zu received%s)\n\n", fe.nrec,
           fe.bad_recovery_lines ? ", some unreadable" : "");
    return 0;
}

/* The hosts of fe.topo: this one (the front-end's topology host, or a name
 * of this machine) and the others, each with its agent started (its login
 * overlaps the tree's start-up). Returns 0, or -1 (message printed). */
static int hosts_init(const char *self)
{
    size_t size = tb_topology_size(fe.topo);
    const char *rsh = getenv("TBON_RSH");
    agent_rsh = rsh && *rsh ? rsh : TB_DEFAULT_RSH;   /* as the tree's launches */
    snprintf(agent_self, sizeof agent_self, "%s", self);
    hosts = calloc(size, sizeof *hosts);
    host_of = calloc(size, sizeof *host_of);
    if (!hosts || !host_of) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    const char *fe_host = tb_topology_host(fe.topo, 0);
    for (tbon_rank_t r = 0; r < size; r++) {
        fe.is_be[r] = tb_topology_role(fe.topo, r) == TB_ROLE_BE;
        const char *hn = tb_topology_host(fe.topo, r);
        size_t i = 0;
        while (i < nhosts && strcmp(hosts[i].name, hn) != 0)
            i++;
        if (i == nhosts) {
            hosts[i].name = strdup(hn);
            if (!hosts[i].name) {
                fprintf(stderr, PROG ": out of memory\n");
                return -1;
            }
            hosts[i].local = strcmp(hn, fe_host) == 0 || tb_host_is_local(hn);
            hosts[i].to = hosts[i].from = -1;
            nhosts++;
            if (!hosts[i].local && agent_start(&hosts[i]) != 0) {
                fprintf(stderr, PROG ": host %s: %s\n", hn, hosts[i].why);
                return -1;
            }
        }
        host_of[r] = i;
    }
    return 0;
}

/* The session id of the running tree, from the attach file the front-end
 * wrote (docs/user-guide.md, "Attach mode"), into session_id; then every
 * agent is told. Returns 0, or -1 with a FAIL line printed. */
static int hosts_session(const char *attach)
{
    FILE *f = fopen(attach, "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "session=", 8) == 0 && strlen(line + 8) > 1 &&
            strlen(line + 8) < sizeof session_id) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(session_id, sizeof session_id, "%s", line + 8);
        }
    if (f)
        fclose(f);
    if (!session_id[0]) {
        printf(PROG ": FAIL: no session id in the attach file %s\n", attach);
        return -1;
    }
    char cmd[96];
    snprintf(cmd, sizeof cmd, "session %s", session_id);
    int fail = 0;
    for (size_t i = 0; i < nhosts; i++)
        if (!hosts[i].local && host_send(&hosts[i], cmd) != 0) {
            printf(PROG ": FAIL: host %s: %s\n", hosts[i].name, hosts[i].why);
            fail = 1;
        }
    /* A login may be slow (a loaded node): as long as a tree's start-up. */
    int64_t deadline = now_us() + 30 * 1000000LL;
    for (size_t i = 0; i < nhosts; i++) {
        if (hosts[i].local || !hosts[i].pid)
            continue;
        char *r = host_reply(&hosts[i], deadline);
        if (!r || strcmp(r, "ok\n") != 0) {
            printf(PROG ": FAIL: host %s: %s\n", hosts[i].name,
                   r ? "its agent answered something else than ok" : hosts[i].why);
            fail = 1;
        }
        free(r);
    }
    return fail ? -1 : 0;
}

/* Poll every host until no process of the run is left there, or ms pass.
 * Returns how many are left in all (each host's printed), or -1 if a host
 * could not be asked (said). */
static long hosts_left(int ms)
{
    int64_t end = now_us() + (int64_t)ms * 1000;
    long left;
    int unasked;
    char *ans[4096] = { NULL };
    int sent[4096];
    size_t nh = nhosts < 4096 ? nhosts : 4096;
    for (;;) {
        reap_all();
        left = 0;
        unasked = 0;
        for (size_t i = 0; i < nh; i++) {
            free(ans[i]);
            ans[i] = NULL;
            sent[i] = host_send(&hosts[i], "list") == 0;
        }
        for (size_t i = 0; i < nh; i++) {
            ans[i] = sent[i] ? host_reply(&hosts[i], now_us() + 10 * 1000000LL) : NULL;
            if (!ans[i]) {
                unasked++;
                continue;
            }
            for (const char *c = ans[i]; *c; c++)
                left += *c == '\n';
        }
        if ((left == 0 && unasked == 0) || now_us() >= end)
            break;
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    for (size_t i = 0; i < nh; i++) {
        if (!ans[i] && !hosts[i].local)
            printf(PROG ": host %s: cannot look for leftovers: %s\n", hosts[i].name,
                   hosts[i].why);
        else if (ans[i] && ans[i][0]) {
            long n = 0;
            for (const char *c = ans[i]; *c; c++)
                n += *c == '\n';
            printf(PROG ": host %s: %ld process%s of the run left (pid rank):", hosts[i].name,
                   n, n == 1 ? "" : "es");
            for (char *c = ans[i]; *c;) {
                size_t l = strcspn(c, "\n");
                printf(" [%.*s]", (int)l, c);
                c += l + (c[l] != '\0');
            }
            printf("\n");
        }
        free(ans[i]);
    }
    return unasked ? -1 : left;
}

/* ------------------------------------------------------------- front-end */

static int fe_main(struct opts *o, const char *self)
{
    int64_t run_t0 = now_us();
    snprintf(run_kv, sizeof run_kv, RUN_ENV "=%ld.%llx", (long)getpid(),
             (unsigned long long)(run_t0 ^ (int64_t)o->seed));
    if (setenv(RUN_ENV, strchr(run_kv, '=') + 1, 1) != 0) {
        perror(PROG ": setenv");
        return 1;
    }
    /* Orphans of the tree (processes whose parent was killed) come back to
     * us, so the leftover check still sees them and we reap them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    tbon_error_t err = { 0 };
    fe.topo = tb_topology_parse_file(o->topo, &err);
    if (!fe.topo) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        return 2;
    }
    size_t size = tb_topology_size(fe.topo), nbe = tb_topology_num_leaves(fe.topo);
    fe.killed = calloc(size, 1);
    fe.failed_us = calloc(size, sizeof *fe.failed_us);
    fe.is_be = calloc(size, 1);
    if (!fe.killed || !fe.failed_us || !fe.is_be || hosts_init(self) != 0)
        return 1;

    char dir[4096];
    int own_dir = !o->dir;
    if (own_dir) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/tbon-fims-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            fprintf(stderr, PROG ": mkdtemp %s: %s\n", dir, strerror(errno));
            return 1;
        }
    } else {
        if (!realpath(o->dir, dir) && (mkdir(o->dir, 0700) != 0 || !realpath(o->dir, dir))) {
            fprintf(stderr, PROG ": --dir %s: %s\n", o->dir, strerror(errno));
            return 2;
        }
        clean_dir(dir, 0);
    }

    /* Our recovery lines are info lines; the others keep the user's level. */
    fe.user_level = TBON_LOG_WARN;
    for (int l = TBON_LOG_DEBUG; l >= TBON_LOG_ERROR; l--)
        if (tb_log_enabled(l)) {
            fe.user_level = l;
            break;
        }
    tbon_log_set_handler(log_handler, NULL);
    if (fe.user_level < TBON_LOG_INFO)
        tbon_log_set_level(TBON_LOG_INFO);

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&fe.cv, &ca);
    pthread_condattr_destroy(&ca);
    pick_rng = o->seed ^ 0x5DEECE66Dull;

    tb_wd_start(wd_fire);
    tb_wd_arm("start-up", o->timeout);
    printf(PROG ": %s: %zu processes (%zu back-ends), duration %g s at %g Hz, seed %" PRIu64
           ", %zu injection%s, files in %s\n", o->topo, size, nbe, o->duration, o->rate,
           o->seed, o->nitems, o->nitems == 1 ? "" : "s", dir);
    fflush(stdout);
    tbon_fe_options_t fo = { 0 };
    fo.heartbeat_ms = o->heartbeat_ms;
    /* The attach file tells us the session id (and lets nothing else in:
     * it is mode 0600 and removed with the session). */
    char attach[4200];
    snprintf(attach, sizeof attach, "%s/attach", dir);
    fo.attach_file = attach;
    const char *const be_argv[] = { "--be", NULL };
    int64_t t_create = now_us();
    tbon_net_t *net = tbon_fe_create(o->topo, self, be_argv, &fo, &err);
    if (!net) {
        printf(PROG ": FAIL: tbon_fe_create: %s\n", err.msg);
        kill_run();
        return 1;
    }
    printf(PROG ": tree up in %.0f ms\n", (double)(now_us() - t_create) / 1e3);
    if (hosts_session(attach) != 0) {
        tbon_net_destroy(net);
        kill_run();
        return 1;
    }
    size_t nremote = 0;
    for (size_t i = 0; i < nhosts; i++)
        nremote += !hosts[i].local;
    if (nremote)
        printf(PROG ": session %s; an agent on each of the %zu other host%s\n", session_id,
               nremote, nremote == 1 ? "" : "s");
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_UNION,
                                          TBON_SYNC_DONTWAIT, TBON_FILTER_NULL);
    int rc = s ? tbon_stream_send(s, TAG_START, "%lf %lf %uld %s", o->rate, o->duration,
                                  o->seed, dir) : TBON_EINVAL;
    if (rc == 0)
        rc = tbon_stream_flush(s);
    if (rc != 0) {
        printf(PROG ": FAIL: starting the stream: %s (%s)\n", tbon_strerror(rc),
               tbon_net_error(net));
        tbon_net_destroy(net);
        kill_run();
        return 1;
    }
    int64_t t0 = now_us();
    fe.t0 = t0;
    pthread_t rt, et;
    pthread_create(&rt, NULL, results_main, s);
    pthread_create(&et, NULL, events_main, net);

    double left_s = o->timeout - (double)(t0 - run_t0) / 1e6;
    tb_wd_arm("the run", left_s > 0.001 ? left_s : 0.001);
    for (size_t i = 0; i < o->nitems; i++) {
        sleep_until_us(t0 + (int64_t)(o->items[i].at * 1e6));
        inject(&o->items[i], t0);
    }
    int64_t end = t0 + (int64_t)(o->duration * 1e6);
    sleep_until_us(end);
    wait_quiet(end);

    pthread_mutex_lock(&fe.mu);
    fe.stop = 1;
    pthread_mutex_unlock(&fe.mu);
    pthread_join(rt, NULL);
    pthread_join(et, NULL);
    tb_wd_arm("tbon_net_destroy", 60);
    tbon_net_destroy(net);
    /* Every host of the topology, for up to 5 s (the tree's processes
     * exit within a second of the end of the session). */
    long left = hosts_left(5000);
    if (left != 0) {
        if (left > 0)
            printf(PROG ": %ld process%s of the run left after tbon_net_destroy; killing "
                   "them\n", left, left == 1 ? "" : "es");
        kill_run();
    }
    for (size_t i = 0; i < nhosts; i++)
        agent_stop(&hosts[i], 3000);
    tb_wd_arm("the checks", 60);

    /* The checks. What the live back-ends sent must all be there; what
     * failed back-ends sent and nobody else did may be lost with them. */
    u64set_t in = { 0 }, live = { 0 };
    struct befile *bf = NULL;
    long nf = read_inputs(dir, &bf);
    int fail = nf < 0;
    size_t lines = 0, failed_be = 0, live_nofile = 0;
    uint8_t *has_file = calloc(size, 1);
    for (long i = 0; i < nf; i++) {
        for (size_t k = 0; k < bf[i].n; k++) {
            set_add(&in, bf[i].v[k]);
            if (!be_failed(bf[i].rank))
                set_add(&live, bf[i].v[k]);
        }
        lines += bf[i].n;
        if (has_file && bf[i].rank < size)
            has_file[bf[i].rank] = 1;
    }
    for (tbon_rank_t r = 0; r < size; r++) {
        if (!fe.is_be[r])
            continue;
        failed_be += be_failed(r);
        if (has_file && !has_file[r] && !be_failed(r))
            live_nofile++;
    }
    free(has_file);
    printf(PROG ": back-ends: %ld files, %zu values sent, %zu distinct; front-end: %zu "
           "packets, %zu distinct elements\n", nf < 0 ? 0 : nf, lines, set_size(&in),
           fe.packets, set_size(&fe.out));
    size_t missing = set_diff(&live, &fe.out, "missing at the front-end (sent by a live back-end)");
    size_t extra = set_diff(&fe.out, &in, "received but never sent");
    char lost_ranks[256];
    size_t lost_be = 0, lost = nf > 0 ? report_lost(bf, nf, &live, lost_ranks,
                                                     sizeof lost_ranks, &lost_be) : 0;
    if (lost)
        printf(PROG ": LOST with failed back-ends: %zu distinct value%s of %zu back-end%s (%s)\n",
               lost, lost == 1 ? "" : "s", lost_be, lost_be == 1 ? "" : "s", lost_ranks);
    size_t uncovered = nf > 0 ? check_coverage(bf, nf) : 0;
    for (long i = 0; i < nf; i++)
        free(bf[i].v);
    free(bf);
    char why[1024] = "";
    size_t wl = 0;
#define WHY(...) (wl += (size_t)snprintf(why + wl, wl < sizeof why ? sizeof why - wl : 0, \
                                         __VA_ARGS__), fail = 1)
    if (live_nofile)
        WHY("%s%zu live back-end%s wrote no file%s", wl ? "; " : "", live_nofile,
            live_nofile == 1 ? "" : "s",
            nhosts > 1 ? " (is the directory on a file system every host shares? --dir)" : "");
    if (set_size(&in) == 0)
        WHY("%snothing was sent", wl ? "; " : "");
    if (missing || extra)
        WHY("%soutput != union of %sinputs (%zu missing, %zu extra)", wl ? "; " : "",
            failed_be ? "the live back-ends' " : "", missing, extra);
    if (fe.twice) {
        printf("  reported as new twice (first ones):");
        for (size_t i = 0; i < fe.twice && i < SHOW_MAX; i++)
            printf(" %" PRIu64, fe.twice_first[i]);
        printf("\n");
        WHY("%s%zu element%s reported as new twice", wl ? "; " : "", fe.twice,
            fe.twice == 1 ? "" : "s");
    }
    if (uncovered)
        WHY("%s%zu element%s came in results whose coverage lacks their sender", wl ? "; " : "",
            uncovered, uncovered == 1 ? "" : "s");
    if (fe.stream_errors)
        WHY("%s%zu stream error%s (%s)", wl ? "; " : "", fe.stream_errors,
            fe.stream_errors == 1 ? "" : "s", fe.stream_error);
    size_t kills = 0, unreported = 0, skipped = 0, unadopted = 0, notfound = 0, remote = 0;
    for (size_t i = 0; i < fe.ninj; i++) {
        /* A repeated injection may outlive the commnodes: not a failure. */
        skipped += fe.inj[i].skipped && fe.inj[i].item->kind != K_EVERY;
        for (size_t k = 0; k < fe.inj[i].nv; k++) {
            if (!fe.inj[i].pid[k]) {
                notfound++;
                continue;
            }
            remote += (size_t)fe.inj[i].where[k];
            kills++;
            if (!fe.inj[i].failed_us[k]) {
                unreported++;
                printf("  injection %zu: no failure event for commnode %u\n", i + 1,
                       (unsigned)fe.inj[i].victim[k]);
            }
        }
        for (size_t k = 0; k < fe.inj[i].norph; k++)
            unadopted += !fe.inj[i].adopted_us[k] &&
                         tb_topology_alive(fe.topo, fe.inj[i].orphan[k]);
    }
    if (unreported)
        WHY("%s%zu of %zu kills without a failure event", wl ? "; " : "", unreported, kills);
    if (skipped)
        WHY("%s%zu injection%s had nothing to kill", wl ? "; " : "", skipped,
            skipped == 1 ? "" : "s");
    if (notfound)
        WHY("%s%zu victim%s not found on %s host", wl ? "; " : "", notfound,
            notfound == 1 ? "" : "s", notfound == 1 ? "its" : "their");
    if (o->nitems && kills == 0)
        WHY("%sthe schedule asked for %zu injection%s and no process was killed",
            wl ? "; " : "", o->nitems, o->nitems == 1 ? "" : "s");
    if (left > 0)
        WHY("%s%ld process%s left", wl ? "; " : "", left, left == 1 ? "" : "es");
    if (left < 0)
        WHY("%sa host could not be checked for leftovers", wl ? "; " : "");
    if (unadopted)
        printf("  note: %zu orphan%s never reported adopted\n", unadopted,
               unadopted == 1 ? "" : "s");
    if (fe.other_failed)
        printf("  note: %zu failure event%s for nodes this run did not kill\n", fe.other_failed,
               fe.other_failed == 1 ? "" : "s");
    if (report_recovery(o->csv, t0) != 0)
        WHY("%scould not write the CSV file", wl ? "; " : "");
#undef WHY
    if (fail) {
        printf(PROG ": FAIL: %s (back-end files kept in %s)\n", why, dir);
    } else {
        char k[96] = "no kills", l[320] = "";
        if (kills)
            snprintf(k, sizeof k, "%zu kill%s (%zu on other hosts), each reported failed",
                     kills, kills == 1 ? "" : "s", remote);
        if (lost)
            snprintf(l, sizeof l, ", %zu lost with failed back-end%s %s", lost,
                     lost_be == 1 ? "" : "s", lost_ranks);
        else if (failed_be)
            snprintf(l, sizeof l, ", nothing lost with the %zu failed back-end%s", failed_be,
                     failed_be == 1 ? "" : "s");
        printf(PROG ": PASS: %zu distinct elements, output == union of %sinputs%s, none "
               "reported twice, %s, no process left on %zu host%s\n", set_size(&in),
               failed_be ? "the live back-ends' " : "", l, k, nhosts, nhosts == 1 ? "" : "s");
        if (own_dir)
            clean_dir(dir, 1);
    }
    fflush(stdout);
    tb_wd_arm("exit", 0);
    free(in.slot);
    free(live.slot);
    return fail;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--be") == 0)
            return be_main(argc, argv);
    if (argc == 2 && strcmp(argv[1], "--agent") == 0)
        return agent_main();
    struct opts o = { 0 };
    parse_args(argc, argv, &o);
    char self[4096];
    ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
    if (l <= 0) {
        perror(PROG ": readlink /proc/self/exe");
        return 1;
    }
    self[l] = '\0';
    int rc = fe_main(&o, self);
    free(o.items);
    return rc;
}
