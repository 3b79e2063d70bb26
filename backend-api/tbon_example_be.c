/* tbon_example_be.c - the example back-end of tbon_frontend: answers each
 * request wave with a value made from its rank and the wave number
 *
 * The request is "%ud %s" (wave, kind); the kind says which format the
 * front-end's filter wants:
 *   int    "%ld"   rank + wave
 *   int32  "%d"    rank + wave
 *   double "%lf"   (rank + wave) / 4
 *   set    "%auld" {rank, rank % 4, 100 + wave}, sorted, no duplicates (union;
 *          it reports only values new on the stream, so each wave adds one)
 *   array  "%ald"  {rank, wave} (concat)
 * It uses only the public API, so it doubles as a template for back-ends.
 */
#include <tbon/tbon.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "tbon_example_be"

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [--delay MS]                  (started by a front-end)\n"
"       " PROG " --attach FILE [--rank RANK] [--delay MS]\n"
"\n"
"The example back-end of tbon_frontend. It joins the tree, then answers every\n"
"request \"%%ud %%s\" (wave, kind) on the stream it came on, with tag %d:\n"
"  int     \"%%ld\"   rank + wave\n"
"  int32   \"%%d\"    rank + wave\n"
"  double  \"%%lf\"   (rank + wave) / 4\n"
"  set     \"%%auld\" {rank, rank %% 4, 100 + wave}, sorted, no duplicates\n"
"  array   \"%%ald\"  {rank, wave}\n"
"and exits 0 when the front-end shuts the tree down.\n"
"\n"
"Options:\n"
"  --attach FILE   join a tree started with tbon_frontend --attach FILE, as\n"
"                  back-end RANK (tbon_be_attach), instead of being launched\n"
"  --rank RANK     the back-end rank to attach as (with --attach), or to come\n"
"                  back as once that rank has failed (a restart); without it,\n"
"                  join the running tree as a new back-end (the front-end gives\n"
"                  the rank and the parent)\n"
"  --delay MS      wait MS ms times (rank %% 4) before each answer, so answers\n"
"                  arrive spread out (to watch dontwait and timeout modes)\n"
"  -h, --help      show this help\n"
"\n"
"Example: tbon_frontend -t topologies/local-4x4.top -b " PROG " -- --delay 100\n",
            TBON_FIRST_APP_TAG);
}

/* A decimal number in [0, max]. 0 or -1. */
static int parse_num(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        return -1;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || v > max)
        return -1;
    *out = v;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Answer request (wave, kind) on s. Returns 0 or a TBON_E* code. */
static int answer(tbon_stream_t *s, tbon_rank_t rank, uint32_t wave, const char *kind)
{
    int tag = TBON_FIRST_APP_TAG;
    int64_t r = (int64_t)rank, w = (int64_t)wave;

    if (strcmp(kind, "int32") == 0)
        return tbon_stream_send(s, tag, "%d", (int32_t)(r + w));
    if (strcmp(kind, "double") == 0)
        return tbon_stream_send(s, tag, "%lf", (double)(r + w) / 4.0);
    if (strcmp(kind, "set") == 0) {
        uint64_t set[3] = { (uint64_t)rank, (uint64_t)rank % 4, 100 + (uint64_t)wave };
        size_t n = 1;
        qsort(set, 3, sizeof set[0], cmp_u64);
        for (size_t i = 1; i < 3; i++)
            if (set[i] != set[n - 1])
                set[n++] = set[i];
        return tbon_stream_send(s, tag, "%auld", set, n);
    }
    if (strcmp(kind, "array") == 0) {
        int64_t a[2] = { r, w };
        return tbon_stream_send(s, tag, "%ald", a, (size_t)2);
    }
    if (strcmp(kind, "int") != 0)
        fprintf(stderr, PROG " %" PRIu32 ": unknown kind \"%s\", answering int\n", rank, kind);
    return tbon_stream_send(s, tag, "%ld", r + w);
}

/* A request waiting for its --delay to pass (answered in arrival order). */
struct request {
    tbon_stream_t *s;      /* owned by the net */
    uint64_t       request; /* its number on s (tbon_stream_request) */
    uint32_t       wave;
    char          *kind;   /* malloc'd by tbon_packet_unpack */
    int64_t        due;    /* ms, CLOCK_MONOTONIC */
};

/* A FIFO of requests: the delay is the same for every request of this
 * back-end, so they fall due in the order they came. */
struct queue {
    struct request *v;
    size_t head, n, cap;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Append r; returns 0 or TBON_ENOMEM. */
static int queue_push(struct queue *q, struct request r)
{
    if (q->head + q->n == q->cap) {
        if (q->head > 0) {   /* slide the live part to the front first */
            memmove(q->v, q->v + q->head, q->n * sizeof *q->v);
            q->head = 0;
        }
        if (q->n == q->cap) {
            size_t cap = q->cap ? 2 * q->cap : 16;
            struct request *v = realloc(q->v, cap * sizeof *v);
            if (!v)
                return TBON_ENOMEM;
            q->v = v;
            q->cap = cap;
        }
    }
    q->v[q->head + q->n++] = r;
    return 0;
}

/* The options left once the launcher's are gone: --attach FILE (already
 * seen), --rank RANK, --delay MS. Returns 0, or -1 after saying which
 * argument is wrong. */
static int parse_opts(int argc, char **argv, unsigned long *rank, unsigned long *delay)
{
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long *dst = NULL, max = 0;
        if (strcmp(a, "--rank") == 0) {
            dst = rank;
            max = UINT32_MAX - 1;
        } else if (strcmp(a, "--delay") == 0) {
            dst = delay;
            max = 3600000;
        } else if (strcmp(a, "--attach") != 0) {
            fprintf(stderr, PROG ": unknown argument '%s'; see --help\n", a);
            return -1;
        }
        if (!v || (dst && parse_num(v, max, dst) != 0)) {
            fprintf(stderr, PROG ": %s needs %s; see --help\n", a,
                    !dst ? "a file" : dst == rank ? "a rank" : "a number of ms");
            return -1;
        }
    }
    return 0;
}

/* Wait for requests, and answer each when its delay (wait ms) has passed,
 * at once without --delay. Waiting in tbon_net_recv rather than sleeping
 * means a delayed back-end still leaves at once when the front-end shuts
 * down. Returns the code that ended it (TBON_ECLOSED: the session ended). */
static int serve(tbon_net_t *net, tbon_rank_t me, int64_t wait)
{
    struct queue q = { 0 };
    int rc;
    for (;;) {
        int timeout = -1;
        if (q.n) {
            struct request *r = &q.v[q.head];
            int64_t left = r->due - now_ms();
            if (left <= 0) {
                /* Later requests may have been taken meanwhile: the answer
                 * goes in the wave of the one it answers. */
                rc = tbon_stream_answer(r->s, r->request);
                if (rc == 0)
                    rc = answer(r->s, me, r->wave, r->kind);
                free(r->kind);
                q.head++;
                q.n--;
                if (rc != 0)
                    break;
                continue;
            }
            timeout = (int)left;
        }

        tbon_packet_t *p = NULL;
        struct request r = { 0 };
        rc = tbon_net_recv(net, &p, &r.s, timeout);
        if (rc == TBON_ETIMEOUT)
            continue;
        if (rc != 0)
            break;
        if (tbon_packet_unpack(p, "%ud %s", &r.wave, &r.kind) != 0) {
            fprintf(stderr, PROG " %" PRIu32 ": ignoring a packet of format \"%s\" "
                    "(tag %d): not a request \"%%ud %%s\"\n", me,
                    tbon_packet_format(p), tbon_packet_tag(p));
            tbon_packet_unref(p);
            continue;
        }
        tbon_packet_unref(p);
        if (wait == 0 && q.n == 0) {
            /* No delay: the answer goes at once, in the wave just taken. */
            rc = answer(r.s, me, r.wave, r.kind);
            free(r.kind);
            if (rc != 0)
                break;
            continue;
        }
        r.request = tbon_stream_request(r.s);
        r.due = now_ms() + wait;
        if ((rc = queue_push(&q, r)) != 0) {
            free(r.kind);
            break;
        }
    }
    for (size_t i = 0; i < q.n; i++)
        free(q.v[q.head + i].kind);
    free(q.v);
    return rc;
}

int main(int argc, char **argv)
{
    const char *attach = NULL;
    unsigned long rank = TBON_RANK_NONE, delay = 0;
    tbon_error_t err = { 0 };
    tbon_net_t *net = NULL;

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
    /* Attach mode is decided before joining: a launched back-end first lets
     * tbon_be_create take the launcher's arguments out of argv. */
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--attach") == 0)
            attach = argv[i + 1];
    if (!attach) {
        net = tbon_be_create(&argc, &argv, &err);
        if (!net) {
            fprintf(stderr, PROG ": %s\n(" PROG " is started by a front-end such as "
                    "tbon_frontend -b " PROG "; see --help)\n",
                    err.msg[0] ? err.msg : tbon_strerror(err.code));
            return 1;
        }
    }
    if (parse_opts(argc, argv, &rank, &delay) != 0) {
        tbon_net_destroy(net);
        return 2;
    }
    if (attach) {
        /* Without --rank: join the running tree as a new back-end. */
        net = tbon_be_attach(attach, (tbon_rank_t)rank, &err);
        if (!net) {
            fprintf(stderr, PROG ": %s\n", err.msg[0] ? err.msg : tbon_strerror(err.code));
            return 1;
        }
    }

    tbon_rank_t me = tbon_net_rank(net);
    int rc = serve(net, me, (int64_t)delay * (me % 4));
    if (rc != TBON_ECLOSED)
        fprintf(stderr, PROG " %" PRIu32 ": %s: %s\n", me, tbon_strerror(rc),
                tbon_net_error(net));
    tbon_net_destroy(net);
    return rc == TBON_ECLOSED ? 0 : 1;
}
