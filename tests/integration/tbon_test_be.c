/* tbon_test_be.c - the back-end the integration tests start; the front-end
 * (the test) drives it with requests, one tag per behaviour
 *
 * Requests (FE -> BE, on any stream; the answer goes up the same stream, with
 * the request's tag; rank is this BE's tbon_net_rank):
 *   100 "%ud" wave        -> "%ld"   rank*1000 + wave
 *   101 "%ud" wave        -> "%auld" {rank, rank % 3, 1000000 + wave}
 *   102 "%ud" wave        -> "%ad"   {rank, wave}
 *   103 "%ud %ud" n size  -> n packets "%ud %auc" (seq 0..n-1, size bytes of
 *                            it_pattern(rank, seq)), sent as fast as the
 *                            network takes them, then a flush
 *   104 "%s" text         -> "%s"    the same text
 *   105 "%ud %aud" ms, ranks -> "%uld" 1 << (rank % 64), after sleeping ms
 *                            if rank is among ranks (at once otherwise)
 *   107 "%auc" bytes      -> "%auc"  the same bytes
 *   108 "%ud" wave        -> "%ld %alf" rank + wave, {rank * 0.5, -rank, wave}
 *   109 "%ud" any         -> "%as"   argv[1..argc) as left by tbon_be_create
 *   120 "%ud" any         -> "%ud %uld %aud" rank, tbon_net_view_version and
 *                            tbon_net_view (the membership view here)
 *   121 "%aud %s %s %d %ud" ranks, key, value, delete, ms -> "%ld" 0, or the
 *                            error of tbon_net_set_attr: a BE among ranks
 *                            sleeps ms (having set "key.asleep" to "1"
 *                            first), then sets key to "value.RANK" (or
 *                            deletes it if delete)
 *   123 "%s" name         -> "%s"    getenv(name), or "(unset)"
 *   124 "%ud %ud" pre, post -> "%ld" 1 after sleeping pre ms; then sleeps
 *                            post ms before its next call into the library
 *   122 "%aud" ranks      -> "%ld" 0; a BE among ranks then leaves in order
 *                            (tbon_net_destroy) and exits 0
 *   130-133               messages between processes: itest.h (IT_TAG_DSEND,
 *                            DRECV, DBCAST, DRING)
 *   110+i "%ud" wave      -> one value of the scalar type it_type_fmt[i]
 *                            (%c %uc %hd %uhd %d %ud %ld %uld %f %lf):
 *                            it_type_ival / it_type_fval (itest.h)
 * Any other tag is ignored (and reported on stderr).
 *
 * Options (anywhere in argv; the launcher's own arguments are removed by
 * tbon_be_create):
 *   --die-at-start        exit 3 at once, before joining
 *   --hang-at-start       never join: sleep (at most 120 s, then exit 6)
 *   --die-at-start-ranks LIST, --hang-at-start-ranks LIST
 *                         the same, only when launched as one of the ranks of
 *                         LIST (comma-separated; --tbon-rank says which)
 *   --attach FILE --rank R  join with tbon_be_attach(FILE, R), retrying for
 *                         up to 20 s while that fails (file not there yet);
 *                         without --rank, join the running tree as a new
 *                         back-end (TBON_RANK_NONE)
 *   --events              tbon_be_membership_events(net, 1) once joined
 *   --marker DIR          on TBON_ECLOSED, after tbon_net_destroy, create
 *                         DIR/closed.RANK (proof that the BE left cleanly)
 *   --exit-after N        _exit(0) without leaving after N requests, their
 *                         answers flushed (a BE that dies)
 *   --exit-after-ranks LIST  with --exit-after: only when launched as one of
 *                         the ranks of LIST
 *   --destroy-waiting DIR  a second thread waits in tbon_net_recv_direct with
 *                         no time limit from the start; at the end, once it
 *                         sleeps there, tbon_net_destroy, and DIR/waiter.RANK
 *                         gets "RC MS": what its wait returned, and how long
 *                         after the destroy began
 *   --fd                  wait in poll on tbon_net_fd, then take with timeout 0
 *                         (for stream requests only: messages and events
 *                         left untaken would keep the descriptor readable);
 *                         with --marker, DIR/closed.RANK holds how many times
 *                         poll said readable and nothing was there
 * On TBON_ECLOSED from tbon_net_recv: tbon_net_destroy and exit 0.
 * Exit status: 0 closed, 3 die-at-start, 4 receive error, 5 join failed,
 * 6 hang expired.
 */
#define ITEST_PROTO_ONLY
#include "itest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static tbon_rank_t rank;
static tbon_net_t *the_net;     /* for the view request */

static void sleep_ms(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* The value of option name (a following argument), or NULL. */
static const char *opt_value(int argc, char **argv, const char *name)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return NULL;
}

static int opt_flag(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

/* Join through the attach file, retrying while it fails (the FE may not
 * have written it yet). Returns the network or NULL. */
static tbon_net_t *attach(const char *file, tbon_rank_t r)
{
    tbon_error_t err = { 0, "" };
    for (int tries = 0; tries < 400; tries++) {
        tbon_net_t *net = tbon_be_attach(file, r, &err);
        if (net)
            return net;
        sleep_ms(50);
    }
    fprintf(stderr, "tbon_test_be: tbon_be_attach(%s, %u): %s\n", file, (unsigned)r,
            err.msg);
    return NULL;
}

/* Answer request 110 + t with this rank's value of that type. */
static int send_type(tbon_stream_t *s, int tag, int t, uint32_t wave)
{
    int64_t v = it_type_ival(t, rank, wave);
    const char *fmt = it_type_fmt[t];
    switch (t) {
    case IT_T_C: case IT_T_UC: case IT_T_HD: case IT_T_UHD:
        return tbon_stream_send(s, tag, fmt, (int)v);
    case IT_T_D:   return tbon_stream_send(s, tag, fmt, (int32_t)v);
    case IT_T_UD:  return tbon_stream_send(s, tag, fmt, (uint32_t)v);
    case IT_T_LD:  return tbon_stream_send(s, tag, fmt, (int64_t)v);
    case IT_T_ULD: return tbon_stream_send(s, tag, fmt, (uint64_t)v);
    default:       return tbon_stream_send(s, tag, fmt, it_type_fval(t, rank, wave));
    }
}

/* Send n burst packets of size bytes, then flush. */
static int burst(tbon_stream_t *s, uint32_t n, uint32_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    int rc = 0;
    if (!buf)
        return TBON_ENOMEM;
    for (uint32_t seq = 0; seq < n && rc == 0; seq++) {
        it_pattern(buf, size, rank, seq);
        rc = tbon_stream_send(s, IT_TAG_BURST, "%ud %auc", seq, buf, (size_t)size);
    }
    free(buf);
    return rc ? rc : tbon_stream_flush(s);
}

/* After a burst: a marker (IT_TAG_DMARK) to every back-end and the FE,
 * this one included: whoever has it has all the burst meant for it (one
 * sender's messages to one receiver keep their order). */
static int mark(int res)
{
    if (res == 0)
        res = tbon_net_broadcast(the_net, IT_TAG_DMARK, "%ud %ud", rank, 0u);
    if (res == 0)
        res = tbon_net_send_to(the_net, rank, IT_TAG_DMARK, "%ud %ud", rank, 0u);
    return res;
}

/* A message "%ud %ud" {rank, k}, or IT_TAG_DBULK's "%ud %ud %auc" with
 * every byte k & 0xff. 0, or -1. */
static int dmsg_unpack(tbon_packet_t *m, uint32_t *r, uint32_t *k)
{
    if (strcmp(tbon_packet_format(m), "%ud %ud %auc") != 0)
        return tbon_packet_unpack(m, "%ud %ud", r, k) == 0 ? 0 : -1;
    uint8_t *b = NULL;
    size_t n = 0;
    int bad = tbon_packet_unpack(m, "%ud %ud %auc", r, k, &b, &n) != 0;
    for (size_t i = 0; !bad && i < n; i++)
        bad = b[i] != (uint8_t)*k;
    free(b);
    return bad ? -1 : 0;
}

/* IT_TAG_DRECV: the messages until nmark markers came (within ms). */
static int drecv(tbon_stream_t *s, int tag, uint32_t nmark, uint32_t ms)
{
    uint32_t *from = NULL, *num = NULL, got = 0, cap = 0, bad = 0, marks = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (marks < nmark) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = (long)ms - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
        tbon_packet_t *m = NULL;
        tbon_rank_t f = 0;
        if (left <= 0 || tbon_net_recv_direct(the_net, &f, &m, (int)left) != 0)
            break;
        uint32_t r = 0, k = 0;
        int t = tbon_packet_tag(m);
        if ((t != IT_TAG_DMSG && t != IT_TAG_DMARK) || dmsg_unpack(m, &r, &k) != 0 || r != f ||
            tbon_packet_source(m) != f)
            bad++;
        tbon_packet_unref(m);
        if (t == IT_TAG_DMARK) {
            marks++;
            continue;
        }
        if (got == cap) {
            cap = cap ? 2 * cap : 64;
            uint32_t *a = realloc(from, cap * sizeof *a), *b = a ? realloc(num, cap * sizeof *b)
                                                                 : NULL;
            from = a ? a : from;
            num = b ? b : num;
            if (!a || !b)
                break;
        }
        from[got] = f;
        num[got++] = k;
    }
    bad += marks < nmark;       /* timed out */
    int rc = tbon_stream_send(s, tag, "%aud %aud %ud", from, (size_t)got, num, (size_t)got, bad);
    free(from);
    free(num);
    return rc;
}

/* Half way through a burst of DSEND, DRING or DBCAST, with $TBON_TEST_GATE
 * set: say so ($TBON_TEST_GATE.half, and .half.RANK) and, unless a ring's
 * (wait 0: the test only learns that every back-end is under way), wait
 * until the test opens the gate (creates $TBON_TEST_GATE; it stops or kills
 * a node meanwhile), at most a minute. */
static void gate(uint32_t k, uint32_t count, int wait)
{
    const char *g = getenv("TBON_TEST_GATE");
    if (!g || !*g || k != count / 2)
        return;
    char half[PATH_MAX];
    for (int i = 0; i < 2; i++) {
        if (i)
            snprintf(half, sizeof half, "%s.half.%u", g, rank);
        else
            snprintf(half, sizeof half, "%s.half", g);
        int fd = open(half, O_WRONLY | O_CREAT, 0600);
        if (fd >= 0)
            close(fd);
    }
    if (!wait)
        return;
    for (int i = 0; i < 30000 && access(g, F_OK) != 0; i++)
        usleep(2000);
}

/* Messages between processes (IT_TAG_DSEND, DRECV, DBCAST, DRING,
 * EVENTS): -2 if tag is none of them, else the answer's send result. */
static int handle_direct(tbon_packet_t *p, tbon_stream_t *s, int tag)
{
    uint32_t count = 0, ms = 0;
    if (tag == IT_TAG_DSEND || tag == IT_TAG_DRING) {
        uint32_t *dst = NULL;
        size_t n = 0;
        if (tbon_packet_unpack(p, "%aud %ud", &dst, &n, &count) != 0)
            return TBON_EFORMAT;
        for (size_t i = 0; tag == IT_TAG_DRING && i < n; i++)
            if (dst[i] == rank) {
                dst[0] = dst[(i + 1) % n];
                n = 1;
                break;
            }
        int res = 0;
        for (uint32_t k = 1; k <= count && res == 0; k++) {
            res = n == 1 ? tbon_net_send_to(the_net, dst[0], IT_TAG_DMSG, "%ud %ud", rank, k)
                         : tbon_net_multicast(the_net, dst, n, IT_TAG_DMSG, "%ud %ud", rank, k);
            gate(k, count, tag == IT_TAG_DSEND);
            if (res != 0)
                fprintf(stderr, "tbon_test_be: rank %u: message %u to %u: %s\n", rank, k,
                        dst[0], tbon_net_error(the_net));
        }
        free(dst);
        return tbon_stream_send(s, tag, "%ld", (int64_t)mark(res));
    }
    if (tag == IT_TAG_DBULK) {
        uint32_t dst = 0, size = 0;
        if (tbon_packet_unpack(p, "%ud %ud %ud", &dst, &count, &size) != 0)
            return TBON_EFORMAT;
        uint8_t *b = malloc(size ? size : 1);
        int res = b ? 0 : TBON_ENOMEM;
        for (uint32_t k = 1; k <= count && res == 0; k++) {
            memset(b, (int)(k & 0xff), size);
            res = tbon_net_send_to(the_net, dst, IT_TAG_DMSG, "%ud %ud %auc", rank, k, b,
                                   (size_t)size);
            if (res == 0 && k % 100 == 0)
                res = tbon_stream_send(s, IT_TAG_DPROG, "%ud", k);
        }
        free(b);
        return tbon_stream_send(s, tag, "%ld", (int64_t)mark(res));
    }
    if (tag == IT_TAG_DBCAST) {
        if (tbon_packet_unpack(p, "%ud", &count) != 0)
            return TBON_EFORMAT;
        int res = 0;
        for (uint32_t k = 1; k <= count && res == 0; k++) {
            res = tbon_net_broadcast(the_net, IT_TAG_DMSG, "%ud %ud", rank, k);
            gate(k, count, 1);
        }
        return tbon_stream_send(s, tag, "%ld", (int64_t)mark(res));
    }
    if (tag == IT_TAG_DPING) {
        uint32_t to = 0, route[64];
        size_t n = 0;
        if (tbon_packet_unpack(p, "%ud", &to) != 0)
            return TBON_EFORMAT;
        int rc = tbon_net_ping(the_net, to, 60000, NULL, route, 64, &n);
        return tbon_stream_send(s, tag, "%ld %aud", (int64_t)rc, route, rc ? (size_t)0 : n);
    }
    if (tag == IT_TAG_EVENTS) {
        int32_t type[64];
        uint32_t who[64], parent[64];
        uint64_t ver[64];
        size_t n = 0;
        tbon_event_t ev;
        while (n < 64 && tbon_net_next_event(the_net, &ev, 0) == 0) {
            type[n] = (int32_t)ev.type;
            who[n] = ev.rank;
            parent[n] = ev.parent;
            ver[n++] = ev.view_version;
        }
        return tbon_stream_send(s, tag, "%ad %aud %aud %auld", type, n, who, n, parent, n, ver,
                                n);
    }
    if (tag != IT_TAG_DRECV)
        return -2;
    if (tbon_packet_unpack(p, "%ud %ud", &count, &ms) != 0)
        return TBON_EFORMAT;
    return drecv(s, tag, count, ms);
}

/* Handle one request; returns the send's result (0 when nothing is sent). */
static int handle(tbon_packet_t *p, tbon_stream_t *s, int argc, char **argv)
{
    int tag = tbon_packet_tag(p);
    uint32_t a = 0, b = 0;
    int rc = 0;

    if ((rc = handle_direct(p, s, tag)) != -2)
        return rc;
    rc = 0;
    if (tag >= IT_TAG_TYPE0 && tag < IT_TAG_TYPE0 + IT_NTYPES) {
        if (tbon_packet_unpack(p, "%ud", &a) != 0)
            return TBON_EFORMAT;
        return send_type(s, tag, tag - IT_TAG_TYPE0, a);
    }
    switch (tag) {
    case IT_TAG_WAVE:
        if ((rc = tbon_packet_unpack(p, "%ud", &a)))
            return rc;
        return tbon_stream_send(s, tag, "%ld", (int64_t)rank * 1000 + a);
    case IT_TAG_UNION: {
        if ((rc = tbon_packet_unpack(p, "%ud", &a)))
            return rc;
        uint64_t v[3] = { rank, rank % 3, 1000000u + (uint64_t)a };
        return tbon_stream_send(s, tag, "%auld", v, (size_t)3);
    }
    case IT_TAG_CONCAT: {
        if ((rc = tbon_packet_unpack(p, "%ud", &a)))
            return rc;
        int32_t v[2] = { (int32_t)rank, (int32_t)a };
        return tbon_stream_send(s, tag, "%ad", v, (size_t)2);
    }
    case IT_TAG_BURST:
        if ((rc = tbon_packet_unpack(p, "%ud %ud", &a, &b)))
            return rc;
        return burst(s, a, b);
    case IT_TAG_ECHO: {
        char *text = NULL;
        if ((rc = tbon_packet_unpack(p, "%s", &text)))
            return rc;
        rc = tbon_stream_send(s, tag, "%s", text);
        free(text);
        return rc;
    }
    case IT_TAG_SLOW: {
        uint32_t *ranks = NULL;
        size_t n = 0;
        if ((rc = tbon_packet_unpack(p, "%ud %aud", &a, &ranks, &n)))
            return rc;
        for (size_t i = 0; i < n; i++)
            if (ranks[i] == rank)
                sleep_ms(a);
        free(ranks);
        return tbon_stream_send(s, tag, "%uld", (uint64_t)1 << (rank % 64));
    }
    case IT_TAG_AWAY:
        if ((rc = tbon_packet_unpack(p, "%ud %ud", &a, &b)))
            return rc;
        sleep_ms(a);
        rc = tbon_stream_send(s, tag, "%ld", (int64_t)1);
        sleep_ms(b);        /* away from the library, its answer sent */
        return rc;
    case IT_TAG_BYTES: {
        uint8_t *bytes = NULL;
        size_t n = 0;
        if ((rc = tbon_packet_unpack(p, "%auc", &bytes, &n)))
            return rc;
        rc = tbon_stream_send(s, tag, "%auc", bytes, n);
        free(bytes);
        return rc;
    }
    case IT_TAG_BYTES_IN: {
        const void *bytes = NULL;
        size_t n = 0;
        if ((rc = tbon_packet_bytes(p, 0, &bytes, &n)))
            return rc;
        return tbon_stream_send_packet(s, p);
    }
    case IT_TAG_MULTI: {
        if ((rc = tbon_packet_unpack(p, "%ud", &a)))
            return rc;
        double v[3] = { rank * 0.5, -(double)rank, (double)a };
        return tbon_stream_send(s, tag, "%ld %alf", (int64_t)rank + a, v, (size_t)3);
    }
    case IT_TAG_VIEW: {
        tbon_rank_t live[2048];
        int n = tbon_net_view(the_net, live, sizeof live / sizeof live[0]);
        if (n < 0 || n > (int)(sizeof live / sizeof live[0]))
            n = 0;
        return tbon_stream_send(s, tag, "%ud %uld %aud", rank, tbon_net_view_version(the_net), live,
                                (size_t)n);
    }
    case IT_TAG_ATTR: {
        uint32_t *ranks = NULL;
        size_t nr = 0;
        char *key = NULL, *val = NULL;
        int del = 0;
        uint32_t ms = 0;
        long long res = 0;
        if ((rc = tbon_packet_unpack(p, "%aud %s %s %d %ud", &ranks, &nr, &key, &val, &del, &ms)))
            return rc;
        for (size_t i = 0; i < nr; i++)
            if (ranks[i] == rank) {
                if (ms) {
                    /* Say that we sleep now: "KEY.asleep" = "1". */
                    char k[300];
                    snprintf(k, sizeof k, "%s.asleep", key);
                    tbon_net_set_attr(the_net, k, "1");
                }
                sleep_ms(ms);
                char v[600];
                snprintf(v, sizeof v, "%s.%u", val, (unsigned)rank);
                res = tbon_net_set_attr(the_net, key, del ? NULL : v);
            }
        free(ranks);
        free(key);
        free(val);
        return tbon_stream_send(s, tag, "%ld", (int64_t)res);
    }
    case IT_TAG_ENV: {
        char *name = NULL;
        if (tbon_packet_unpack(p, "%s", &name) != 0)
            return -1;
        const char *v = getenv(name);
        free(name);
        return tbon_stream_send(s, tag, "%s", v ? v : "(unset)");
    }
    case IT_TAG_SINK:
        return 0;
    case IT_TAG_ARGV:
        return tbon_stream_send(s, tag, "%as", (const char *const *)(argv + 1),
                                (size_t)(argc - 1));
    default:
        fprintf(stderr, "tbon_test_be[%u]: unknown request tag %d (format \"%s\")\n",
                (unsigned)rank, tag, tbon_packet_format(p));
        return 0;
    }
}

/* 1 if we were launched as one of the ranks of option name's list. */
static int rank_listed(int argc, char **argv, const char *name)
{
    char mine[16];
    const char *list = opt_value(argc, argv, name), *me = opt_value(argc, argv, "--tbon-rank");
    if (!me && the_net) {       /* tbon_be_create took --tbon-rank away */
        snprintf(mine, sizeof mine, "%u", (unsigned)rank);
        me = mine;
    }
    if (!list || !me)
        return 0;
    size_t ml = strlen(me);
    for (const char *p = list; *p;) {
        size_t l = strcspn(p, ",");
        if (l == ml && strncmp(p, me, l) == 0)
            return 1;
        p += l + (p[l] == ',');
    }
    return 0;
}

/* $TBON_TEST_BE_LOG set: the library's lines go to be-PID.log in
 * $TBON_LOG_DIR (shown by a failing test with the commnodes' logs) instead
 * of the test's stderr. */
static void log_to_file(void *arg, int level, const char *line)
{
    (void)level;
    FILE *f = arg;
    flockfile(f);
    fputs(line, f);
    fputc('\n', f);
    fflush(f);
    funlockfile(f);
}

static void maybe_log_to_file(void)
{
    const char *dir = getenv("TBON_LOG_DIR");
    if (!getenv("TBON_TEST_BE_LOG") || !dir || !*dir)
        return;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/be-%ld.log", dir, (long)getpid());
    FILE *f = fopen(path, "a");
    if (f)
        tbon_log_set_handler(log_to_file, f);
}

/* --destroy-waiting: the thread that waits, and what it saw. */
static int64_t dw_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct {
    pthread_t th;
    atomic_int tid;
    int rc;
    int64_t back_ms;
} dw;

static void *dw_wait(void *arg)
{
    atomic_store(&dw.tid, (int)gettid());
    tbon_rank_t from;
    tbon_packet_t *p = NULL;
    dw.rc = tbon_net_recv_direct(arg, &from, &p, -1);
    dw.back_ms = dw_now_ms();
    tbon_packet_unref(p);
    return NULL;
}

static void destroy_waiting(tbon_net_t *net, const char *dir)
{
    int64_t end = dw_now_ms() + 20000;
    for (int seen = 0; seen < 5 && dw_now_ms() < end; sleep_ms(10))
        seen = atomic_load(&dw.tid) && it_thread_asleep(atomic_load(&dw.tid)) ? seen + 1 : 0;
    int64_t t0 = dw_now_ms();
    tbon_net_destroy(net);
    pthread_join(dw.th, NULL);
    char path[4096], tmp[4100], text[64];
    snprintf(path, sizeof path, "%s/waiter.%u", dir, (unsigned)rank);
    snprintf(tmp, sizeof tmp, "%s.new", path);       /* whole when it is there */
    int len = snprintf(text, sizeof text, "%d %lld\n", dw.rc, (long long)(dw.back_ms - t0));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        int ok = write(fd, text, (size_t)len) == len;
        close(fd);
        if (ok)
            rename(tmp, path);
    }
}

/* --fd: the next request as tbon_net_recv(net, p, s, -1) gives it, waited
 * for in poll on the network's descriptor; *empty counts the wake-ups that
 * found nothing. */
static int fd_recv(tbon_net_t *net, tbon_packet_t **p, tbon_stream_t **s, long *empty)
{
    int fd = tbon_net_fd(net);
    if (fd < 0)
        return fd;
    for (;;) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (poll(&pf, 1, -1) < 0 && errno != EINTR)
            return TBON_EIO;
        int rc = tbon_net_recv(net, p, s, 0);
        if (rc != TBON_ETIMEOUT)
            return rc;
        ++*empty;
    }
}

int main(int argc, char **argv)
{
    tbon_error_t err = { 0, "" };
    tbon_net_t *net;

    maybe_log_to_file();

    if (opt_flag(argc, argv, "--die-at-start") ||
        rank_listed(argc, argv, "--die-at-start-ranks")) {
        fprintf(stderr, "tbon_test_be: dying at start as asked (--die-at-start)\n");
        return 3;
    }
    if (opt_flag(argc, argv, "--hang-at-start") ||
        rank_listed(argc, argv, "--hang-at-start-ranks")) {
        for (int i = 0; i < 1200; i++)
            sleep_ms(100);
        return 6;
    }
    const char *file = opt_value(argc, argv, "--attach");
    if (file) {
        const char *r = opt_value(argc, argv, "--rank");
        net = attach(file, r ? (tbon_rank_t)strtoul(r, NULL, 10) : TBON_RANK_NONE);
    } else {
        net = tbon_be_create(&argc, &argv, &err);
        if (!net)
            fprintf(stderr, "tbon_test_be: tbon_be_create: %s\n", err.msg);
    }
    if (!net)
        return 5;
    rank = tbon_net_rank(net);
    the_net = net;
    if (opt_flag(argc, argv, "--events") && tbon_be_membership_events(net, 1) != 0)
        return 5;

    const char *marker = opt_value(argc, argv, "--marker");
    const char *dw_dir = opt_value(argc, argv, "--destroy-waiting");
    if (dw_dir && pthread_create(&dw.th, NULL, dw_wait, net) != 0)
        return 5;
    const char *ea = opt_value(argc, argv, "--exit-after");
    long exit_after = ea ? atol(ea) : -1, handled = 0;
    if (opt_value(argc, argv, "--exit-after-ranks") && !rank_listed(argc, argv, "--exit-after-ranks"))
        exit_after = -1;

    int use_fd = opt_flag(argc, argv, "--fd");
    long empty = 0;
    for (;;) {
        tbon_packet_t *p = NULL;
        tbon_stream_t *s = NULL;
        int rc = use_fd ? fd_recv(net, &p, &s, &empty) : tbon_net_recv(net, &p, &s, -1);
        if (rc == TBON_ECLOSED)
            break;
        if (rc != 0) {
            fprintf(stderr, "tbon_test_be[%u]: tbon_net_recv: %s (%s)\n", (unsigned)rank,
                    tbon_strerror(rc), tbon_net_error(net));
            if (rc == TBON_EFILTER)
                continue;
            tbon_net_destroy(net);
            return 4;
        }
        int leave = 0;
        if (tbon_packet_tag(p) == IT_TAG_LEAVE) {
            uint32_t *who = NULL;
            size_t nw = 0;
            if (tbon_packet_unpack(p, "%aud", &who, &nw) == 0)
                for (size_t i = 0; i < nw; i++)
                    leave |= who[i] == rank;
            free(who);
            rc = tbon_stream_send(s, IT_TAG_LEAVE, "%ld", (int64_t)0);
            if (rc == 0)
                rc = tbon_stream_flush(s);
        } else {
            rc = handle(p, s, argc, argv);
        }
        if (rc != 0)
            fprintf(stderr, "tbon_test_be[%u]: request %d (\"%s\"): %s\n", (unsigned)rank,
                    tbon_packet_tag(p), tbon_packet_format(p), tbon_strerror(rc));
        tbon_packet_unref(p);
        if (exit_after >= 0 && ++handled >= exit_after) {
            /* Dies having answered N requests: those answers are out
             * (tbon_stream_send queues; with requests waiting to be taken
             * it may hold answers back for the ones to come). */
            if (s)
                tbon_stream_flush(s);
            _exit(0);
        }
        if (leave)
            break;
    }
    if (dw_dir)
        destroy_waiting(net, dw_dir);
    else
        tbon_net_destroy(net);
    if (marker) {
        char path[4096];
        snprintf(path, sizeof path, "%s/closed.%u", marker, (unsigned)rank);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            if (use_fd) {
                char text[32];
                int len = snprintf(text, sizeof text, "%ld\n", empty);
                if (write(fd, text, (size_t)len) != len)
                    fprintf(stderr, "tbon_test_be: cannot write %s\n", path);
            }
            close(fd);
        }
    }
    return 0;
}
