/* bench_direct.c - messages between back-ends (tbon_net_send_to,
 * tbon_net_recv_direct) beside the same exchange relayed by the front-end
 * (each message sent up a stream, taken by the FE's application and sent
 * down the destination's own stream), in the same run, on the same tree.
 *
 * Usage: bench_direct [--rounds N] [SHAPE ...]   (default 3 rounds; 8x8 32x32)
 *
 * Each round starts a tree of SHAPE (commnodes, this program at the leaves
 * with --be) and measures, direct then relayed:
 *   - messages/s: every back-end sends COUNT messages to the next one (a
 *     ring in rank order; about TOTAL in all) and takes COUNT from the one
 *     before it; from the FE's request to the last back-end's answer; each
 *     kind timed after an untimed ring of each (the tree's first rings,
 *     reported beside: they pay the processes' one-time costs);
 *   - at 1,024 back-ends and more, the same ring with LONG messages each
 *     (also after an untimed one of each kind);
 *   - one-way latency: half the round trip of PINGS ping-pongs between two
 *     back-ends under different commnodes (their way passes the FE in
 *     both kinds) and between two under the same commnode;
 *   - where each kind saturates first: the CPU time of the busiest process
 *     (the FE, a commnode, a back-end) in each timed short ring, and the
 *     bound it sets where every process has a core of its own.
 * Every count is checked: a back-end that does not get exactly COUNT
 * messages ends the run with no row.
 *
 * For profiling: BENCH_DIRECT_ONLY=direct or =relayed runs one kind of ring
 * only (the other's figure is then 1), and says on stderr when it starts
 * and ends (CLOCK_MONOTONIC, as perf record -k CLOCK_MONOTONIC, so that
 * perf report --time can take the ring alone); BENCH_DIRECT_COUNT=N sends
 * N messages per back-end.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "lib/bench.h"

#define PROG "bench_direct"
#define TOTAL 100000    /* messages in a ring, about: COUNT each */
#define COUNT(nbe) count_of(nbe)
#define PINGS 200       /* round trips per latency figure */
#define LONG 600        /* messages each in the long ring, at 1,024 back-ends and more */
#define NFIG 18         /* figures of a round: rings, latencies, long rings, first rings,
                           the timed short rings' busiest processes (CPU s), first
                           long rings */

enum {
    T_RING = TBON_FIRST_APP_TAG, /* "%ud %aud" count ring -> "%ud" taken */
    T_RELAY,                     /* the same, relayed by the FE */
    T_PING,                      /* "%ud %ud %d" peer n relayed -> "%ud" 0: n round trips */
    T_PONG,                      /* "%ud %ud %d" peer n relayed -> "%ud" 0: n answers */
    T_MSG,                       /* "%ud %ud" {dest, k}: a message */
};

/* Messages per back-end in a ring: TOTAL in all, at least 50 each; or
 * $BENCH_DIRECT_COUNT (for profiling a longer ring). */
static uint32_t count_of(size_t nbe)
{
    const char *v = getenv("BENCH_DIRECT_COUNT");
    if (v && atoi(v) > 0)
        return (uint32_t)atoi(v);
    return nbe < TOTAL / 50 ? (uint32_t)(TOTAL / nbe) : 50u;
}

/* ---- the back-end ---- */

static tbon_rank_t me;

/* The next message for us: direct, or relayed (a T_MSG on a stream). */
static int take(tbon_net_t *net, int relayed)
{
    tbon_packet_t *p = NULL;
    int rc = relayed ? tbon_net_recv(net, &p, NULL, 60000)
                     : tbon_net_recv_direct(net, NULL, &p, 60000);
    if (rc != 0)
        return rc;
    uint32_t dest = 0, k = 0;
    if (tbon_packet_tag(p) != T_MSG || tbon_packet_unpack(p, "%ud %ud", &dest, &k) != 0 ||
        dest != me)
        rc = TBON_EFORMAT;
    tbon_packet_unref(p);
    return rc;
}

/* Send a message to dest: direct, or up s for the FE to relay. */
static int give(tbon_net_t *net, tbon_stream_t *s, int relayed, tbon_rank_t dest, uint32_t k)
{
    return relayed ? tbon_stream_send(s, T_MSG, "%ud %ud", dest, k)
                   : tbon_net_send_to(net, dest, T_MSG, "%ud %ud", dest, k);
}

static uint32_t ring(tbon_net_t *net, tbon_stream_t *s, int relayed, uint32_t count,
                     const uint32_t *r, size_t n)
{
    tbon_rank_t next = me;
    for (size_t i = 0; i < n; i++)
        if (r[i] == me)
            next = r[(i + 1) % n];
    for (uint32_t k = 1; k <= count; k++)
        if (give(net, s, relayed, next, k) != 0)
            return 0;
    if (relayed)
        tbon_stream_flush(s);
    uint32_t got = 0;
    while (got < count && take(net, relayed) == 0)
        got++;
    return got;
}

/* n round trips with peer, we first (ping) or it first (pong). */
static uint32_t pingpong(tbon_net_t *net, tbon_stream_t *s, int relayed, int first,
                         tbon_rank_t peer, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (first && give(net, s, relayed, peer, me) != 0)
            return 1;
        if (take(net, relayed) != 0)
            return 1;
        if (!first && give(net, s, relayed, peer, me) != 0)
            return 1;
        if (relayed)
            tbon_stream_flush(s);
    }
    return 0;
}

static int be_main(int argc, char **argv)
{
    tbon_net_t *net = bench_be_create(PROG, &argc, &argv);
    me = tbon_net_rank(net);
    for (;;) {
        tbon_packet_t *p = NULL;
        tbon_stream_t *s = NULL;
        int rc = tbon_net_recv(net, &p, &s, -1);
        if (rc == TBON_ECLOSED)
            break;
        if (rc != 0)
            continue;
        int tag = tbon_packet_tag(p);
        uint32_t a = 0, b = 0, *r = NULL;
        int32_t relayed = 0;
        size_t n = 0;
        uint32_t answer = 0;
        if ((tag == T_RING || tag == T_RELAY) &&
            tbon_packet_unpack(p, "%ud %aud", &a, &r, &n) == 0)
            answer = ring(net, s, tag == T_RELAY, a, r, n);
        else if ((tag == T_PING || tag == T_PONG) &&
                 tbon_packet_unpack(p, "%ud %ud %d", &a, &b, &relayed) == 0)
            answer = pingpong(net, s, relayed, tag == T_PING, a, b);
        free(r);
        tbon_packet_unref(p);
        if (tag != T_MSG)
            tbon_stream_send(s, tag, "%ud", answer);
        tbon_stream_flush(s);
    }
    tbon_net_destroy(net);
    return 0;
}

/* ---- the front-end ---- */

struct tree {
    tbon_net_t *net;
    tbon_stream_t *all;          /* every back-end: requests, answers, relayed messages */
    tbon_stream_t **one;         /* by back-end index: its own, for what is relayed to it */
    tbon_rank_t *be;
    size_t nbe;
};

/* ---- where the CPU goes ---- */

/* The CPU time (every thread's, ns) of each process below us (the
 * commnodes and the back-ends), by pid; kind 1 a commnode, 2 a back-end.
 * From schedstat (ns): utime and stime count 10 ms ticks, more than a
 * back-end's whole share of a short ring. */
struct proc_cpu { pid_t pid, ppid; int kind, cn; unsigned long long ns; };

/* The run time (ns) of pid's threads so far. */
static unsigned long long run_ns(const char *pid)
{
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/task", pid);
    DIR *d = opendir(path);
    unsigned long long sum = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char buf[128];
        snprintf(path, sizeof path, "/proc/%s/task/%s/schedstat", pid, e->d_name);
        int fd = open(path, O_RDONLY);
        ssize_t len = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (len > 0) {
            buf[len] = 0;
            sum += strtoull(buf, NULL, 10);
        }
    }
    if (d)
        closedir(d);
    return sum;
}

/* Every process's, into v (malloc'd); the count, or 0. */
static size_t proc_table(struct proc_cpu **v)
{
    size_t n = 0, cap = 2048;
    *v = malloc(cap * sizeof **v);
    DIR *d = opendir("/proc");
    for (struct dirent *e; *v && d && (e = readdir(d));) {
        char path[300], buf[1024];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY);
        ssize_t len = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        char *rp = len > 0 ? (buf[len] = 0, strrchr(buf, ')')) : NULL;
        struct proc_cpu pc = { .pid = (pid_t)atoi(buf) };
        int ppid = 0;
        if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1)     /* after ")": state ppid */
            continue;
        pc.ppid = ppid;
        pc.cn = strstr(buf, "(tbon_commnode)") != NULL;
        if (n == cap) {
            struct proc_cpu *nv = realloc(*v, 2 * cap * sizeof *nv);
            if (!nv)
                break;
            *v = nv;
            cap *= 2;
        }
        (*v)[n++] = pc;
    }
    if (d)
        closedir(d);
    return n;
}

/* Our descendants' CPU so far: kept in v (n), the others' pid set to 0. */
static size_t tree_cpu(struct proc_cpu **v)
{
    size_t n = proc_table(v);
    for (size_t i = 0; i < n; i++)
        (*v)[i].kind = (*v)[i].ppid == getpid() ? 1 + !(*v)[i].cn : 0;
    char pid[24];
    for (int more = 1; more;) {         /* their children, theirs, ... */
        more = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; !(*v)[i].kind && j < n; j++)
                if ((*v)[j].kind && (*v)[j].pid == (*v)[i].ppid) {
                    (*v)[i].kind = 1 + !(*v)[i].cn;
                    more = 1;
                }
    }
    for (size_t i = 0; i < n; i++)
        if ((*v)[i].kind) {
            snprintf(pid, sizeof pid, "%d", (int)(*v)[i].pid);
            (*v)[i].ns = run_ns(pid);
        }
    return n;
}

static double cpu_self(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* What the busiest process took between two tables (s): the FE's (fe),
 * a commnode's and a back-end's into out[0..3). A pid is matched in the
 * same place or looked for. */
static void busiest(const struct proc_cpu *a, size_t na, const struct proc_cpu *b, size_t nb,
                    double fe, double *out)
{
    out[0] = fe;
    out[1] = out[2] = 0;
    for (size_t j = 0; j < nb; j++) {
        if (!b[j].kind)
            continue;
        size_t i = j < na && a[j].pid == b[j].pid ? j : na;
        for (size_t k = 0; i == na && k < na; k++)
            if (a[k].pid == b[j].pid)
                i = k;
        if (i == na)
            continue;
        double d = (double)(b[j].ns - a[i].ns) * 1e-9;
        if (d > out[b[j].kind])
            out[b[j].kind] = d;
    }
}

static size_t index_of(const struct tree *t, tbon_rank_t r)
{
    for (size_t i = 0; i < t->nbe; i++)
        if (t->be[i] == r)
            return i;
    bench_die(PROG, "a rank that is no back-end");
}

/* Take packets until want answers of tag came (each checked by ok), while
 * relaying the T_MSG that come up to their destination's stream. */
static void serve(struct tree *t, int tag, size_t want, uint32_t ok)
{
    size_t answers = 0;
    while (answers < want) {
        tbon_packet_t *p = NULL;
        if (tbon_net_recv(t->net, &p, NULL, 120000) != 0)
            bench_die(PROG, "waiting for the back-ends");
        uint32_t a = 0, k = 0;
        if (tbon_packet_tag(p) == T_MSG && tbon_packet_unpack(p, "%ud %ud", &a, &k) == 0) {
            if (tbon_stream_send_packet(t->one[index_of(t, a)], p) != 0)
                bench_die(PROG, "relaying a message");
        } else if (tbon_packet_tag(p) == tag && tbon_packet_unpack(p, "%ud", &a) == 0) {
            if (a != ok)
                bench_die(PROG, "a back-end's count (a message lost or extra)");
            answers++;
        } else {
            bench_die(PROG, "an unexpected packet");
        }
        tbon_packet_unref(p);
    }
}

/* A ring of count messages each, direct or relayed (msg/s); cpu, if not
 * NULL: the busiest processes' CPU during it (busiest). */
static double ring_round(struct tree *t, int relayed, uint32_t count, double *cpu)
{
    struct proc_cpu *a = NULL, *b = NULL;
    size_t na = cpu ? tree_cpu(&a) : 0;
    double c0 = cpu_self();
    double t0 = bench_now();
    if (getenv("BENCH_DIRECT_ONLY"))
        fprintf(stderr, PROG ": ring starts at %.6f\n", t0);
    if (tbon_stream_send(t->all, relayed ? T_RELAY : T_RING, "%ud %aud", count, t->be,
                         t->nbe) != 0)
        bench_die(PROG, "the ring's request");
    serve(t, relayed ? T_RELAY : T_RING, t->nbe, count);
    double t1 = bench_now(), c1 = cpu_self();
    if (getenv("BENCH_DIRECT_ONLY"))
        fprintf(stderr, PROG ": ring ends after %.3f s at %.6f\n", t1 - t0, t1);
    if (cpu) {
        size_t nb = tree_cpu(&b);
        busiest(a, na, b, nb, c1 - c0, cpu);
    }
    free(a);
    free(b);
    return (double)(t->nbe * count) / (t1 - t0);
}

/* One-way latency between back-ends i and j (s). */
static double latency(struct tree *t, size_t i, size_t j, int relayed)
{
    double t0 = bench_now();
    if (tbon_stream_send(t->one[j], T_PONG, "%ud %ud %d", t->be[i], (uint32_t)PINGS,
                         relayed) != 0 ||
        tbon_stream_send(t->one[i], T_PING, "%ud %ud %d", t->be[j], (uint32_t)PINGS,
                         relayed) != 0)
        bench_die(PROG, "a ping's request");
    size_t answers = 0;
    while (answers < 2) {
        tbon_packet_t *p = NULL;
        if (tbon_net_recv(t->net, &p, NULL, 120000) != 0)
            bench_die(PROG, "waiting for the ping");
        uint32_t a = 0, k = 0;
        int tag = tbon_packet_tag(p);
        if (tag == T_MSG && tbon_packet_unpack(p, "%ud %ud", &a, &k) == 0) {
            if (tbon_stream_send_packet(t->one[index_of(t, a)], p) != 0)
                bench_die(PROG, "relaying a ping");
        } else if ((tag == T_PING || tag == T_PONG) && tbon_packet_unpack(p, "%ud", &a) == 0 &&
                   a == 0) {
            answers++;
        } else {
            bench_die(PROG, "a ping's answer");
        }
        tbon_packet_unref(p);
    }
    return (bench_now() - t0) / (2.0 * PINGS);
}

static char *shape_text(const char *shape, size_t *nbe)
{
    unsigned a, b;
    if (sscanf(shape, "%ux%u", &a, &b) != 2 || !a || !b || a * b > 4096)
        bench_die(PROG, "a shape (AxB)");
    size_t cap = 64 + (size_t)(a + 1) * (b + 2) * 24;
    char *s = malloc(cap), *p = s;
    p += sprintf(p, "localhost:0 =>");
    for (unsigned i = 1; i <= a; i++)
        p += sprintf(p, " localhost:%u", i);
    p += sprintf(p, " ;\n");
    unsigned next = a + 1;
    for (unsigned i = 1; i <= a; i++) {
        p += sprintf(p, "localhost:%u =>", i);
        for (unsigned k = 0; k < b; k++)
            p += sprintf(p, " localhost:%u", next++);
        p += sprintf(p, " ;\n");
    }
    *nbe = (size_t)a * b;
    return s;
}

static void round_of(const char *shape, double *v)
{
    struct tree t = { 0 };
    char *text = shape_text(shape, &t.nbe);
    t.net = bench_start_tree(PROG, text, "--be");
    free(text);
    t.be = calloc(t.nbe, sizeof *t.be);
    t.one = calloc(t.nbe, sizeof *t.one);
    if (!t.be || !t.one || tbon_net_backends(t.net, t.be, t.nbe) != (int)t.nbe)
        bench_die(PROG, "the back-ends");
    t.all = tbon_fe_stream_new(t.net, tbon_fe_broadcast_comm(t.net), TBON_FILTER_NULL,
                               TBON_SYNC_DONTWAIT, TBON_FILTER_NULL);
    for (size_t i = 0; t.all && i < t.nbe; i++) {
        tbon_comm_t *c = tbon_fe_comm_new(t.net, &t.be[i], 1);
        t.one[i] = c ? tbon_fe_stream_new(t.net, c, TBON_FILTER_NULL, TBON_SYNC_DONTWAIT,
                                          TBON_FILTER_NULL) : NULL;
        if (!t.one[i])
            bench_die(PROG, "a back-end's stream");
    }
    if (!t.all)
        bench_die(PROG, "the stream");
    for (int i = 10; i < NFIG; i++)
        v[i] = 0;
    size_t far = t.nbe - 1, near = 1;   /* be[0] and far: other commnodes; near: the same */
    const char *only = getenv("BENCH_DIRECT_ONLY");     /* "direct", "relayed": profiling */
    /* A ring of each kind first, not timed: the first ring of a new tree
     * pays what every one of its 1,057 processes does once (heaps grown
     * and first touched, the state of each peer made), and the kind that
     * ran first paid it for both (at 32x32 the direct ring, always first,
     * took 2.1 s cold and 1.0 s warm; the relayed one 1.35 and 1.0 s). */
    v[8] = only && strcmp(only, "direct") != 0 ? 1 : ring_round(&t, 0, COUNT(t.nbe), NULL);
    v[9] = only && strcmp(only, "relayed") != 0 ? 1 : ring_round(&t, 1, COUNT(t.nbe), NULL);
    v[0] = only && strcmp(only, "direct") != 0 ? 1 : ring_round(&t, 0, COUNT(t.nbe), v + 10);
    v[1] = only && strcmp(only, "relayed") != 0 ? 1 : ring_round(&t, 1, COUNT(t.nbe), v + 13);
    /* The ring above is short at 1,024 back-ends (97 each): half its time
     * is the request reaching every back-end and their answers, the same
     * for both kinds. The long ring shows the messages' own rate. */
    v[6] = v[7] = 0;
    if (t.nbe >= 1024 && !only) {
        /* Warmed as the short ring is: each kind's first long ring pays
         * for the memory its 600 messages in flight need in every process
         * (first touched then: reported beside). */
        v[16] = ring_round(&t, 0, LONG, NULL);
        v[17] = ring_round(&t, 1, LONG, NULL);
        v[6] = ring_round(&t, 0, LONG, NULL);
        v[7] = ring_round(&t, 1, LONG, NULL);
    }
    v[2] = latency(&t, 0, far, 0);
    v[3] = latency(&t, 0, far, 1);
    v[4] = latency(&t, 0, near, 0);
    v[5] = latency(&t, 0, near, 1);
    tbon_net_destroy(t.net);
    free(t.be);
    free(t.one);
}

/* The rows of shape's figures m (medians of rounds). */
static void rows(const char *shape, const double *m, int rounds)
{
    size_t nbe = 0;
    free(shape_text(shape, &nbe));
    char metric[128];
    snprintf(metric, sizeof metric, "messages back-end to back-end, %s (%zu back-ends)", shape,
             nbe);
    bench_row("direct", metric, "%.0f", m[0], "msg/s",
              "a ring: each back-end sends %u messages to the next (tbon_net_send_to) "
              "and takes %u (tbon_net_recv_direct), every count checked; the same "
              "relayed by the FE (up a stream, down the destination's) in the same "
              "run: %.0f msg/s; %.2fx the relay's; each after an untimed ring of its "
              "kind (the tree's first rings, direct first: %.0f and %.0f msg/s); median "
              "of %d rounds%s", COUNT(nbe), COUNT(nbe), m[1], m[0] / m[1], m[8], m[9], rounds,
              nbe >= 1024 ? (m[0] >= 2 * m[1] ? "; target >= 2x at 1,024: met"
                                               : "; target >= 2x at 1,024: MISSED") : "");
    if (m[6] > 0) {
        snprintf(metric, sizeof metric, "messages back-end to back-end, %s, long ring", shape);
        bench_row("direct", metric, "%.0f", m[6], "msg/s",
                  "the same ring with %d messages each (about half the short ring's time "
                  "is the request reaching every back-end and the answers, alike for both "
                  "kinds); relayed in the same run: %.0f msg/s; %.2fx the relay's; each "
                  "after an untimed long ring of its kind (the first long rings, direct "
                  "first: %.0f and %.0f msg/s); median of %d rounds", LONG, m[7],
                  m[6] / m[7], m[16], m[17], rounds);
    }
    /* Where each kind saturates first: the busiest process of its timed
     * ring. Here all the processes share two cores, and the rates above
     * are what counts; with a core per process, as on a cluster, a ring
     * cannot go faster than its messages over that process's CPU time. */
    double bd = m[10] > m[11] ? m[10] : m[11], br = m[13] > m[14] ? m[13] : m[14];
    bd = bd > m[12] ? bd : m[12];
    br = br > m[15] ? br : m[15];
    if (bd > 0 && br > 0) {
        double msgs = (double)nbe * COUNT(nbe);
        snprintf(metric, sizeof metric, "ring bound with a core per process, %s", shape);
        bench_row("direct", metric, "%.0f", msgs / bd, "msg/s",
                  "the short ring's messages over the CPU time of its busiest process "
                  "(schedstat, every thread): direct, the FE %.3f s, a commnode %.3f s, a "
                  "back-end %.3f s; relayed, the FE %.3f s (every message passes its "
                  "application), a commnode %.3f s, a back-end %.3f s: %.0f msg/s; %.1fx the "
                  "relay's. No ring can pass it where every process has a core of its own "
                  "(a cluster); on this machine all of them share its cores and the measured "
                  "rates above are what counts; median of %d rounds", m[10], m[11], m[12],
                  m[13], m[14], m[15], msgs / br, br / bd, rounds);
    }
    snprintf(metric, sizeof metric, "one-way latency, other commnodes, %s", shape);
    bench_row("direct", metric, "%.1f", m[2] * 1e6, "us",
              "half a round trip of %d ping-pongs between two back-ends under "
              "different commnodes (the way passes the FE's process); relayed by the "
              "FE's application in the same run: %.1f us (%.2fx); median of %d rounds",
              PINGS, m[3] * 1e6, m[2] / m[3], rounds);
    snprintf(metric, sizeof metric, "one-way latency, one commnode, %s", shape);
    bench_row("direct", metric, "%.1f", m[4] * 1e6, "us",
              "the same between two back-ends of one commnode (it alone passes the "
              "message on); relayed by the FE in the same run: %.1f us (%.2fx); median "
              "of %d rounds", m[5] * 1e6, m[4] / m[5], rounds);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (bench_is_be(argc, argv))
        return be_main(argc, argv);
    int rounds = 3, first = 1;
    if (argc > 2 && strcmp(argv[1], "--rounds") == 0) {
        rounds = atoi(argv[2]);
        first = 3;
        if (rounds < 1 || rounds > 50)
            bench_die(PROG, "--rounds N (1 to 50)");
    } else if (argc > 1 && argv[1][0] == '-') {
        fprintf(stderr, "usage: " PROG " [--rounds N] [SHAPE ...]  (default 3; 8x8 32x32)\n");
        return 2;
    }
    static const char *defaults[] = { "8x8", "32x32" };
    const char **shapes = first < argc ? (const char **)argv + first : defaults;
    int nshapes = first < argc ? argc - first : 2;
    signal(SIGPIPE, SIG_IGN);
    for (int k = 0; k < nshapes; k++) {
        double v[NFIG][50];
        for (int r = 0; r < rounds; r++) {
            double x[NFIG];
            round_of(shapes[k], x);
            for (int i = 0; i < NFIG; i++)
                v[i][r] = x[i];
            fprintf(stderr, PROG ": %s round %d: ring %.0f/s direct, %.0f/s relayed "
                    "(first rings %.0f/%.0f/s); latency far %.1f/%.1f us, near %.1f/%.1f us; "
                    "long ring %.0f/%.0f/s; busiest CPU (FE, commnode, back-end) direct "
                    "%.3f %.3f %.3f s, relayed %.3f %.3f %.3f s\n", shapes[k], r + 1, x[0],
                    x[1], x[8], x[9], x[2] * 1e6, x[3] * 1e6, x[4] * 1e6, x[5] * 1e6, x[6],
                    x[7], x[10], x[11], x[12], x[13], x[14], x[15]);
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
        }
        double m[NFIG];
        for (int i = 0; i < NFIG; i++)
            m[i] = bench_median(v[i], rounds);
        rows(shapes[k], m, rounds);
    }
    return 0;
}
