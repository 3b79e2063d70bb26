/* itest.h - shared helpers of the integration tests: the request protocol of
 * tbon_test_be, topology files, starting trees, finding our processes
 *
 * Header-only (the Makefile links each test_*.c with the harness alone).
 * tbon_test_be.c includes it with ITEST_PROTO_ONLY defined and sees only the
 * protocol part; the tests see everything. Only the public API and the
 * harness are used here (topology files are written as text from a shape),
 * so the tests drive the library exactly as a tool would.
 *
 * Every test should be an ITEST(name): it runs it_init() first (child
 * subreaper, log directory in the case's tmpdir) and it_finish() last (no
 * tbon_* process of ours may be left; logs are shown when the case failed).
 */
#ifndef TB_ITEST_H
#define TB_ITEST_H

#include <tbon/tbon.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- the request protocol (see tbon_test_be.c for the answers) ---- */

enum {
    IT_TAG_WAVE   = 100,  /* "%ud" wave -> "%ld" rank*1000 + wave */
    IT_TAG_UNION  = 101,  /* "%ud" wave -> "%auld" {rank, rank%3, 1000000+wave} */
    IT_TAG_CONCAT = 102,  /* "%ud" wave -> "%ad" {rank, wave} */
    IT_TAG_BURST  = 103,  /* "%ud %ud" count size -> count x "%ud %auc" seq, bytes */
    IT_TAG_ECHO   = 104,  /* "%s" -> "%s" the same string */
    IT_TAG_SLOW   = 105,  /* "%ud %aud" ms ranks -> "%uld" 1 << (rank % 64), late if listed */
    IT_TAG_BYTES_IN = 106, /* "%auc" -> the same packet, read in place
                              (tbon_packet_bytes) and sent back as it is */
    IT_TAG_BYTES  = 107,  /* "%auc" -> "%auc" the same bytes */
    IT_TAG_MULTI  = 108,  /* "%ud" wave -> "%ld %alf" rank+wave, {rank*0.5, -rank, wave} */
    IT_TAG_ARGV   = 109,  /* "%ud" -> "%as" the BE's argv[1..] after tbon_be_create */
    IT_TAG_TYPE0  = 110,  /* 110+i "%ud" wave -> one value of type it_type_fmt[i] */
    IT_TAG_VIEW   = 120,  /* "%ud" -> "%ud %uld %aud" rank, view version, live ranks */
    IT_TAG_ATTR   = 121,  /* "%aud %s %s %d %ud" ranks key value delete ms -> "%ld" 0
                             or rc: the listed BEs sleep ms (having set
                             "key.asleep" if ms), then set key to "value.RANK"
                             (or delete it) */
    IT_TAG_LEAVE  = 122,  /* "%aud" ranks -> "%ld" 0: the listed BEs then leave in order
                             (tbon_net_destroy) and exit 0 */
    IT_TAG_ENV    = 123,  /* "%s" name -> "%s" its value, or "(unset)" */
    IT_TAG_DSEND  = 130,  /* "%aud %ud" dsts count -> "%ld" 0 or the first error: sends
                             count messages IT_TAG_DMSG "%ud %ud" {rank, k = 1..count}
                             to dsts (tbon_net_send_to for one, else multicast), then
                             a marker IT_TAG_DMARK {rank, 0} to every back-end, the FE
                             and itself */
    IT_TAG_DRECV  = 131,  /* "%ud %ud" nmark ms -> "%aud %aud %ud" senders, numbers k,
                             mismatches (a wait past ms counts one): the messages that
                             came before nmark markers did */
    IT_TAG_DBCAST = 132,  /* "%ud" count -> as DSEND, count broadcasts */
    IT_TAG_DRING  = 133,  /* "%aud %ud" ring count -> as DSEND, to the rank after this
                             one in ring (cyclic) */
    IT_TAG_EVENTS = 134,  /* "%ud" any -> "%ad %aud %aud %auld" the membership events
                             queued here (types, ranks, parents, view versions),
                             at most 64, oldest first (a BE started with --events) */
    IT_TAG_DPING  = 135,  /* "%ud" rank -> "%ld %aud" tbon_net_ping's result and the
                             route (this back-end first) */
    IT_TAG_DBULK  = 136,  /* "%ud %ud %ud" dst count size -> "%ld" as DSEND: count
                             messages IT_TAG_DMSG "%ud %ud %auc" {rank, k, size bytes
                             of k & 0xff} to dst, an IT_TAG_DPROG "%ud" k on the
                             stream after every 100, then the markers */
    IT_TAG_DPROG  = 137,
    IT_TAG_DMSG   = 150,  /* the messages of the three above */
    IT_TAG_DMARK  = 151,  /* their markers */
    IT_TAG_AWAY   = 124,  /* "%ud %ud" pre post -> "%ld" 1 after pre ms; then away post ms */
    IT_TAG_SINK   = 125,  /* anything -> nothing: taken and dropped */
};

#define IT_NTYPES 10
/* Index of each scalar format in the 110+i requests. */
enum { IT_T_C, IT_T_UC, IT_T_HD, IT_T_UHD, IT_T_D, IT_T_UD, IT_T_LD, IT_T_ULD,
       IT_T_F, IT_T_LF };

static const char *const it_type_fmt[IT_NTYPES] __attribute__((unused)) = {
    "%c", "%uc", "%hd", "%uhd", "%d", "%ud", "%ld", "%uld", "%f", "%lf",
};

/* The integer value a BE of `rank` answers to request 110+t of `wave`,
 * already truncated to the type and sign- or zero-extended to 64 bits
 * (t an integer type). Chosen so that sums wrap in the narrow types and
 * signed types see negative values. */
static inline int64_t it_type_ival(int t, uint32_t rank, uint32_t wave)
{
    int64_t r = rank, w = wave;
    switch (t) {
    case IT_T_C:   return (int8_t)(uint8_t)(r * 7 + w - 60);
    case IT_T_UC:  return (uint8_t)(r * 3 + w);
    case IT_T_HD:  return (int16_t)(uint16_t)(r * 900 - 20000 + w);
    case IT_T_UHD: return (uint16_t)(r * 1000 + w);
    case IT_T_D:   return (int32_t)(uint32_t)(r * 100000 - 3000000 + w);
    case IT_T_UD:  return (uint32_t)(r * 50000000 + w);
    case IT_T_LD:  return r * 1000000000 - 50000000000LL + w;
    case IT_T_ULD: return (int64_t)((uint64_t)r * 3000000000ULL + (uint64_t)w);
    }
    return 0;
}

/* The floating value for the float types (exact in float: halves). */
static inline double it_type_fval(int t, uint32_t rank, uint32_t wave)
{
    if (t == IT_T_F)
        return (double)(float)(rank * 0.5 - 20.0 + wave);
    return rank * 0.25 - 7.0 + wave;
}

/* The byte pattern of packet seq of a burst from rank (requests 103, 107). */
static inline void it_pattern(uint8_t *b, size_t n, uint32_t rank, uint32_t seq)
{
    uint8_t x = (uint8_t)(seq * 31u + rank * 13u);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(x + i * 7u + (i >> 8));
}

/* Whether thread tid of this process sleeps (state S: in a wait, or a
 * moment in a lock on its way there). */
static inline int it_thread_asleep(int tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] == 'S';
}

#ifndef ITEST_PROTO_ONLY

#include "../harness.h"
#include "lib/procscan.h"
#include "util/sanitizer.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IT_ASAN TB_UNDER_ASAN
#define IT_TSAN TB_UNDER_TSAN
/* A sanitizer build (ASan or TSan) runs several times slower: the waits
 * that bound how long a result may take are longer there. */
#define IT_SLOW (IT_ASAN || IT_TSAN)

#define IT_UNUSED __attribute__((unused))

/* How long a test waits for a result that should come (ms): generous, the
 * harness's alarm is the real bound. */
#define IT_RECV_MS (IT_SLOW ? 30000 : 15000)
#define IT_MAX_BE  1024

static void it_init(void);
/* The rank a tbon_commnode process was launched as (from its command line),
 * or TBON_RANK_NONE. */
static IT_UNUSED tbon_rank_t it_commnode_rank(pid_t pid)
{
    return tb_proc_rank((long)pid);
}

static void it_finish(void);

/* A test case with the integration set-up and the leftover check. */
#define IT_CASE(name, is_long)                                            \
    static void name##_body(void);                                        \
    TH_CASE(name, is_long) { it_init(); name##_body(); it_finish(); }     \
    static void name##_body(void)
#define ITEST(name) IT_CASE(name, 0)
/* Left out of the short tier (harness.h, TEST_LONG). */
#define ITEST_LONG(name) IT_CASE(name, 1)

/* ---- time, paths ---- */

static IT_UNUSED int64_t it_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static IT_UNUSED void it_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* The build directory: $TBON_BUILD_DIR (tests/run.sh sets it), else "build",
 * made absolute so that processes started elsewhere find it. */
static IT_UNUSED const char *it_build_dir(void)
{
    static char dir[PATH_MAX];
    if (!dir[0]) {
        const char *b = getenv("TBON_BUILD_DIR");
        if (!b || !*b)
            b = "build";
        if (!realpath(b, dir))
            snprintf(dir, sizeof dir, "%s", b);
    }
    return dir;
}

/* Absolute path of the test back-end. */
static IT_UNUSED const char *it_be_path(void)
{
    static char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/tests/bin/tbon_test_be", it_build_dir());
    return p;
}

/* Absolute path of a file of the source tree (the tests run from the
 * repository root; $TBON_SRC_DIR overrides). */
static IT_UNUSED const char *it_src_path(const char *rel)
{
    static char p[PATH_MAX + 256];
    const char *src = getenv("TBON_SRC_DIR");
    char cwd[PATH_MAX];
    if (!src || !*src)
        src = getcwd(cwd, sizeof cwd) ? cwd : ".";
    snprintf(p, sizeof p, "%s/%s", src, rel);
    return p;
}

/* ---- topologies ---- */

/* The number of nodes (FE included) of the last it_topo_shape topology. */
static size_t it_last_total;

/* Write the balanced topology of shape "AxBx..." (as tbon_topgen --shape:
 * the FE has A children, each of them B, ...) on host localhost with
 * localhost:RANK names, to th_tmpdir()/topo-SHAPE.top. The leaves' ranks go
 * to be[] (up to cap; *nbe gets their number). Returns the path (a static
 * buffer per call slot) or NULL for a bad shape. */
static IT_UNUSED const char *it_topo_shape(const char *shape, tbon_rank_t *be,
                                           size_t cap, size_t *nbe)
{
    static char paths[8][600];
    static int slot;
    uint32_t fan[8];
    size_t levels = 0;
    const char *s = shape;
    while (*s && levels < 8) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || v == 0 || v > 4096)
            return NULL;
        fan[levels++] = (uint32_t)v;
        s = *end == 'x' ? end + 1 : end;
        if (*end && *end != 'x')
            return NULL;
    }
    size_t total = 1, width = 1;
    for (size_t l = 0; l < levels; l++) {
        width *= fan[l];
        total += width;
    }
    if (total > 100000)
        return NULL;
    size_t sz = total * 40 + 64;
    char *text = malloc(sz), *p = text;
    p += sprintf(p, "# shape %s\n", shape);
    /* BFS: the nodes of level l are ranks [first, first + width). */
    size_t first = 0, w = 1, next = 1;
    for (size_t l = 0; l < levels; l++) {
        for (size_t i = 0; i < w; i++) {
            p += sprintf(p, "localhost:%zu =>", first + i);
            for (uint32_t c = 0; c < fan[l]; c++)
                p += sprintf(p, " localhost:%zu", next++);
            p += sprintf(p, " ;\n");
        }
        first += w;
        w *= fan[l];
    }
    it_last_total = total;
    *nbe = 0;
    for (size_t i = 0; i < w; i++) {
        if (*nbe < cap)
            be[*nbe] = (tbon_rank_t)(first + i);
        (*nbe)++;
    }
    char name[64];
    snprintf(name, sizeof name, "topo-%s.top", shape);
    char *path = paths[slot++ % 8];
    snprintf(path, sizeof paths[0], "%s", th_write_file(name, text));
    free(text);
    return path;
}

/* ---- trees ---- */

typedef struct it_tree {
    tbon_net_t   *net;
    const char   *topo;
    tbon_rank_t   be[IT_MAX_BE];   /* the leaves of the topology */
    size_t        nbe;
    size_t        total;           /* nodes of the topology, FE included */
    tbon_error_t  err;             /* of tbon_fe_create */
} it_tree_t;

/* Start the tree of shape (see it_topo_shape) with tbon_test_be at the
 * leaves (argv may be NULL; opts may be NULL). Returns 0, or -1 with a
 * failure recorded and the error in t->err. */
static IT_UNUSED int it_start(it_tree_t *t, const char *shape,
                              const char *const *argv, const tbon_fe_options_t *opts)
{
    memset(t, 0, sizeof *t);
    t->topo = it_topo_shape(shape, t->be, IT_MAX_BE, &t->nbe);
    t->total = it_last_total;
    if (!t->topo) {
        th_fail(__FILE__, __LINE__, "bad shape %s", shape);
        return -1;
    }
    /* Without options of its own a test's tree has 90 s to start, not the
     * library's 30: a 16x16 tree once took past 20 s under CI's load (make
     * check's sanitizer runs and the cluster cases beside), and the nodes
     * past their deadlines were left out. */
    static const tbon_fe_options_t slow_start = { .startup_timeout_ms = 90000 };
    int64_t t0 = it_now_ms();
    t->net = tbon_fe_create(t->topo, it_be_path(), argv, opts ? opts : &slow_start, &t->err);
    if (!t->net) {
        th_fail(__FILE__, __LINE__, "tbon_fe_create(%s) failed: %s (%s)", shape,
                t->err.msg, tbon_strerror(t->err.code));
        return -1;
    }
    if (getenv("ITEST_VERBOSE"))
        fprintf(stderr, "    tree %s up in %lld ms\n", shape,
                (long long)(it_now_ms() - t0));
    return 0;
}

/* Check that the network reports exactly the topology's leaves as its
 * back-ends. Returns 0 or -1 (failure recorded). */
static IT_UNUSED int it_check_backends(it_tree_t *t)
{
    tbon_rank_t got[IT_MAX_BE];
    CHECK_UINT(tbon_net_num_backends(t->net), t->nbe);
    int n = tbon_net_backends(t->net, got, IT_MAX_BE);
    CHECK_INT(n, (long long)t->nbe);
    if (n != (int)t->nbe)
        return -1;
    for (size_t i = 0; i < t->nbe; i++) {
        int found = 0;
        for (size_t k = 0; k < t->nbe; k++)
            found |= got[k] == t->be[i];
        if (!found) {
            th_fail(__FILE__, __LINE__, "back-end rank %u missing from tbon_net_backends",
                    (unsigned)t->be[i]);
            return -1;
        }
    }
    return 0;
}

static IT_UNUSED void it_stop(it_tree_t *t)
{
    tbon_net_destroy(t->net);
    t->net = NULL;
}

/* A new stream over every back-end, or NULL (failure recorded). */
static IT_UNUSED tbon_stream_t *it_stream(tbon_net_t *net, int up, int sync, int down)
{
    tbon_comm_t *c = tbon_fe_broadcast_comm(net);
    if (!c) {
        th_fail(__FILE__, __LINE__, "tbon_fe_broadcast_comm: %s", tbon_net_error(net));
        return NULL;
    }
    tbon_stream_t *s = tbon_fe_stream_new(net, c, up, sync, down);
    if (!s)
        th_fail(__FILE__, __LINE__, "tbon_fe_stream_new(up %d, sync %d): %s", up, sync,
                tbon_net_error(net));
    return s;
}

/* Lines of commnode rank's log that contain text; *total (may be NULL) gets
 * all its lines. */
static IT_UNUSED int it_log_lines(tbon_rank_t rank, const char *text, int *total)
{
    char path[700], line[1024];
    snprintf(path, sizeof path, "%s/logs/commnode-%u.log", th_tmpdir(), (unsigned)rank);
    FILE *f = fopen(path, "r");
    int n = 0, all = 0;
    while (f && fgets(line, sizeof line, f)) {
        all++;
        n += strstr(line, text) != NULL;
    }
    if (f)
        fclose(f);
    if (total)
        *total = all;
    return n;
}

/* Wait (up to ms) until commnode rank's log has a line with text: 0, or -1
 * (failure recorded). */
static IT_UNUSED int it_wait_log(tbon_rank_t rank, const char *text, int ms)
{
    int64_t end = it_now_ms() + ms;
    while (it_log_lines(rank, text, NULL) == 0) {
        if (it_now_ms() > end) {
            th_fail(__FILE__, __LINE__, "commnode %u never logged \"%s\"", (unsigned)rank,
                    text);
            return -1;
        }
        it_sleep_ms(20);
    }
    return 0;
}

/* Load func of the test plug-in tests/plugins/NAME.so of this build
 * everywhere (tbon_fe_load_filter): its id, or -1 (failure recorded). */
static IT_UNUSED int it_load_plugin(tbon_net_t *net, const char *name, const char *func)
{
    char so[PATH_MAX + 128];
    snprintf(so, sizeof so, "%.*s/tests/plugins/%s.so", PATH_MAX, it_build_dir(), name);
    int id = tbon_fe_load_filter(net, so, func);
    if (id >= TBON_FILTER_BUILTIN_COUNT)
        return id;
    th_fail(__FILE__, __LINE__, "loading %s from %s: %s", func, so, tbon_net_error(net));
    return -1;
}

/* Every tree process started from now on runs under the fault shim
 * (tests/faultshim/faultshim.c, driven by TBON_FAULT_* variables). */
static IT_UNUSED void it_preload_faultshim(void)
{
    char shim[PATH_MAX + 64];
    snprintf(shim, sizeof shim, "%s/tests/lib/libtbon_faultshim.so", it_build_dir());
    setenv("LD_PRELOAD", shim, 1);
    /* the shim is loaded before the sanitizers' runtimes */
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
}

/* Faults in every process started from now on; they begin when `arm`
 * exists (once the tree is up: the port table, which a relink needs, is
 * everywhere after the first wave). */
static IT_UNUSED void it_fault_env(const char *flip, const char *rflip, const char *reset,
                      const char *delay, const char *log, const char *arm, unsigned seed)
{
    char buf[64];
    it_preload_faultshim();
    setenv("TBON_FAULT_FLIP", flip, 1);
    setenv("TBON_FAULT_RFLIP", rflip, 1);
    setenv("TBON_FAULT_RESET", reset, 1);
    setenv("TBON_FAULT_DELAY", delay, 1);
    setenv("TBON_FAULT_DELAY_US", "300", 1);
    setenv("TBON_FAULT_LOG", log, 1);
    setenv("TBON_FAULT_ARM", arm, 1);
    snprintf(buf, sizeof buf, "%u", seed);
    setenv("TBON_FAULT_SEED", buf, 1);
}

static IT_UNUSED void it_arm(const char *path, int on)
{
    if (on) {
        FILE *f = fopen(path, "w");
        if (f)
            fclose(f);
        else
            th_fail(__FILE__, __LINE__, "cannot create %s", path);
    } else {
        unlink(path);
    }
}

/* Start the tree of shape (it_start) with a sum stream over every back-end
 * that has carried one complete wave (so the port table fault tolerance
 * needs is everywhere). The stream, or NULL (failure recorded, nothing left
 * running). */
static IT_UNUSED tbon_stream_t *it_start_summing(it_tree_t *t, const char *shape,
                                                 const tbon_fe_options_t *opts);

/* The pid of our process whose name starts with prefix, launched as rank
 * (its --tbon-rank), or 0. */
static IT_UNUSED pid_t it_pid_of(const char *prefix, tbon_rank_t rank);

/* Receive one packet of s within ms; NULL (failure recorded, naming what)
 * if none. */
static IT_UNUSED tbon_packet_t *it_recv(tbon_stream_t *s, int ms, const char *what)
{
    tbon_packet_t *p = NULL;
    int rc = tbon_stream_recv(s, &p, ms);
    if (rc != 0 || !p) {
        th_fail(__FILE__, __LINE__, "%s: tbon_stream_recv returned %d (%s)", what, rc,
                tbon_strerror(rc));
        return NULL;
    }
    return p;
}

/* Nothing more may arrive on s within ms. Returns 0, or -1 (recorded). */
static IT_UNUSED int it_expect_nothing(tbon_stream_t *s, int ms, const char *what)
{
    tbon_packet_t *p = NULL;
    int rc = tbon_stream_recv(s, &p, ms);
    if (rc == TBON_ETIMEOUT)
        return 0;
    th_fail(__FILE__, __LINE__, "%s: expected nothing more, got rc %d%s%s (tag %d, "
            "format \"%s\", source %u)", what, rc, rc ? " " : "",
            rc ? tbon_strerror(rc) : "", tbon_packet_tag(p),
            p ? tbon_packet_format(p) : "", (unsigned)tbon_packet_source(p));
    tbon_packet_unref(p);
    return -1;
}

/* Sum of the wave answers of the given back-ends. */
static IT_UNUSED int64_t it_wave_sum(const tbon_rank_t *be, size_t n, uint32_t wave)
{
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (int64_t)be[i] * 1000 + wave;
    return sum;
}

/* One sum wave on s (a SUM/WAITFORALL stream): send request 100, expect one
 * "%ld" equal to the sum over be[0..n). Returns 0 or -1 (recorded). */
static IT_UNUSED int it_sum_wave(tbon_stream_t *s, uint32_t wave, const tbon_rank_t *be,
                                 size_t n)
{
    int rc = tbon_stream_send(s, IT_TAG_WAVE, "%ud", wave);
    if (rc) {
        th_fail(__FILE__, __LINE__, "send wave %u: %d (%s)", wave, rc, tbon_strerror(rc));
        return -1;
    }
    char what[64];
    snprintf(what, sizeof what, "sum wave %u", wave);
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, what);
    if (!p)
        return -1;
    int64_t v = 0;
    int ok = 0;
    if (tbon_packet_tag(p) != IT_TAG_WAVE)
        th_fail(__FILE__, __LINE__, "%s: tag %d", what, tbon_packet_tag(p));
    else if (tbon_packet_unpack(p, "%ld", &v) != 0)
        th_fail(__FILE__, __LINE__, "%s: format \"%s\", expected \"%%ld\"", what,
                tbon_packet_format(p));
    else if (v != it_wave_sum(be, n, wave))
        th_fail(__FILE__, __LINE__, "%s: sum %lld, expected %lld", what, (long long)v,
                (long long)it_wave_sum(be, n, wave));
    else
        ok = 1;
    tbon_packet_unref(p);
    return ok ? 0 : -1;
}

/* A result's coverage (tbon_packet_covered, _expected or _missing: which)
 * as a mask of bits 1 << (rank % 64), as the slow request's answers are. */
static IT_UNUSED uint64_t it_cover_mask(const tbon_packet_t *p,
                                        size_t (*which)(const tbon_packet_t *, tbon_rank_t *,
                                                        size_t))
{
    tbon_rank_t r[IT_MAX_BE];
    size_t n = which(p, r, IT_MAX_BE);
    uint64_t m = 0;
    for (size_t i = 0; i < n && i < IT_MAX_BE; i++)
        m |= (uint64_t)1 << (r[i] % 64);
    return m;
}

/* ---- processes ---- */

struct it_proc { pid_t pid, ppid; char state; char comm[32]; };

/* Every process of the machine (pid, ppid, state, comm) into a malloc'd
 * array; *n gets the count. */
static IT_UNUSED struct it_proc *it_proc_table(size_t *n)
{
    size_t cap = 256;
    struct it_proc *v = malloc(cap * sizeof *v);
    *n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && v && (e = readdir(d))) {
        char path[300], buf[512];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0)
            continue;
        buf[len] = 0;
        char *lp = strchr(buf, '('), *rp = strrchr(buf, ')');
        if (!lp || !rp || rp < lp)
            continue;
        struct it_proc pr = { .pid = (pid_t)atoi(buf) };
        size_t cl = (size_t)(rp - lp - 1);
        if (cl >= sizeof pr.comm)
            cl = sizeof pr.comm - 1;
        memcpy(pr.comm, lp + 1, cl);
        pr.comm[cl] = 0;
        int ppid = 0;
        if (sscanf(rp + 1, " %c %d", &pr.state, &ppid) != 2)
            continue;
        pr.ppid = (pid_t)ppid;
        if (*n == cap) {
            struct it_proc *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        v[(*n)++] = pr;
    }
    if (d)
        closedir(d);
    return v;
}

/* 1 if pid descends from anc according to the table. */
static IT_UNUSED int it_descends(const struct it_proc *v, size_t n, pid_t pid, pid_t anc)
{
    for (int depth = 0; depth < 64 && pid > 1; depth++) {
        pid_t pp = 0;
        for (size_t i = 0; i < n; i++)
            if (v[i].pid == pid) {
                pp = v[i].ppid;
                break;
            }
        if (pp == anc)
            return 1;
        pid = pp;
    }
    return 0;
}

/* Reap pid, a zombie child of ours (an orphan of the tree, thanks to the
 * subreaper): a tree process that crashed (SIGSEGV, SIGABRT from a
 * sanitizer, ...) is a failure even when the test's results were right. */
static IT_UNUSED void it_reap(pid_t pid, const char *comm)
{
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) != pid || !WIFSIGNALED(st))
        return;
    int sig = WTERMSIG(st);
    if (sig == SIGSEGV || sig == SIGABRT || sig == SIGBUS || sig == SIGILL ||
        sig == SIGFPE || sig == SIGTRAP || sig == SIGSYS)
        th_fail(__FILE__, __LINE__, "process %d (%s) crashed: signal %d (%s)", (int)pid,
                comm, sig, strsignal(sig));
}

/* The live (not zombie) processes named prefix* that descend from this
 * process (with it_init's subreaper, orphans stay our descendants). Zombies
 * of ours with such names are reaped on the way. Writes up to cap pids. */
static IT_UNUSED size_t it_our_procs(const char *prefix, pid_t *out, size_t cap)
{
    size_t n, k = 0;
    struct it_proc *v = it_proc_table(&n);
    if (!v)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(v[i].comm, prefix, strlen(prefix)) != 0)
            continue;
        if (v[i].state == 'Z') {
            if (v[i].ppid == getpid())
                it_reap(v[i].pid, v[i].comm);
            continue;
        }
        if (!it_descends(v, n, v[i].pid, getpid()))
            continue;
        if (k < cap)
            out[k] = v[i].pid;
        k++;
    }
    free(v);
    return k;
}

/* The comm name of pid ("?" if gone), in a static buffer. */
static IT_UNUSED const char *it_comm(pid_t pid)
{
    static char name[64];
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(name, sizeof name, f))
        snprintf(name, sizeof name, "?");
    else
        name[strcspn(name, "\n")] = 0;
    if (f)
        fclose(f);
    return name;
}

/* Wait up to ms for every tbon_* process of ours to be gone. Returns how
 * many are left (0 = fine); *elapsed (may be NULL) gets the time waited. */
static IT_UNUSED size_t it_wait_no_procs(int ms, int64_t *elapsed)
{
    int64_t t0 = it_now_ms();
    pid_t pids[64];
    size_t n;
    while ((n = it_our_procs("tbon_", pids, 64)) && it_now_ms() - t0 < ms)
        it_sleep_ms(20);
    if (elapsed)
        *elapsed = it_now_ms() - t0;
    return n;
}

/* How many tbon_* processes of ours are live right after the library said it
 * reaped them all (tbon_fe_create's failure, tbon_net_destroy): none may be.
 * Under ASan, one exception, waited for: a commnode killed while LeakSanitizer
 * checked it at its exit leaves LSan's tracer task (a process of the same name,
 * which our subreaper adopts), killed by its parent-death signal a moment
 * later (seen once in 15 runs with the machine loaded). */
static IT_UNUSED size_t it_left_after_reap(void)
{
    pid_t pids[64];
    size_t n = it_our_procs("tbon_", pids, 64);
    return n && IT_ASAN ? it_wait_no_procs(2000, NULL) : n;
}

/* Fail if tbon_* processes of ours are still there after a bounded wait
 * (5 s; 15 s under the sanitizers, where each exit runs their checks: the
 * 21 commnodes of a 4x4x4 under ASan took longer than 5 s once, in a make
 * check with the load at 90); name them, then kill them so that later
 * cases start clean. */
static IT_UNUSED void it_check_no_procs(const char *when)
{
    pid_t pids[64];
    if (it_wait_no_procs(IT_ASAN || IT_TSAN ? 15000 : 5000, NULL) == 0)
        return;
    size_t n = it_our_procs("tbon_", pids, 64);
    for (size_t i = 0; i < n && i < 64; i++) {
        th_fail(__FILE__, __LINE__, "%s: process %d (%s) still running", when,
                (int)pids[i], it_comm(pids[i]));
        kill(pids[i], SIGKILL);
    }
    it_sleep_ms(100);
    it_our_procs("tbon_", pids, 64);   /* reap */
}

/* Under ASan: processes started from now on keep at most mb MB of freed
 * memory in quarantine (256 MB by default), which would otherwise count as
 * their resident memory in a test that watches it; and each thread's own
 * quarantine, 1 MB by default, no more than that (with mb 0, a process's
 * RSS grew by 1 MB in a test's second round, and a 1 MB bound failed once
 * in a check under load). */
static IT_UNUSED void it_asan_quarantine_mb(int mb)
{
    if (!IT_ASAN)
        return;
    char opts[1024];
    const char *o = getenv("ASAN_OPTIONS");
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=%d:thread_local_quarantine_size_kb=%d",
             o ? o : "", o && *o ? ":" : "", mb, mb < 1 ? 0 : 1024);
    setenv("ASAN_OPTIONS", opts, 1);
}

/* CPU time (utime + stime, ms) of pid so far, all its threads, or -1. */
static IT_UNUSED long it_cpu_ms(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (long)((ut + st) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
}

/* Entries of directory path but "." and "..", or -1. */
static IT_UNUSED int it_dir_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* Value of "Key:" in /proc/PID/status (kB for VmRSS), or -1. */
static IT_UNUSED long it_proc_status(pid_t pid, const char *key)
{
    char path[64], line[256];
    long v = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = atol(line + kl + 1);
            break;
        }
    fclose(f);
    return v;
}

/* Context switches of tbon's threads in pid, voluntary and not: 0 for a
 * process asleep the whole time. (A busy one under load may be preempted
 * instead of blocking: voluntary ones alone read 3 for such a commnode.)
 * tbon's threads are the main one (tid == pid, a commnode's reactor) and
 * those named "tbon-..."; others are not ours: a sanitizer's background
 * thread wakes every 100 ms on its own. */
static IT_UNUSED long it_wakeups(pid_t pid)
{
    char path[64];
    long sum = 0;
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    struct dirent *e;
    if (!d)
        return -1;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char st[320], line[256];
        if (atol(e->d_name) != (long)pid) {
            snprintf(st, sizeof st, "/proc/%d/task/%s/comm", (int)pid, e->d_name);
            FILE *c = fopen(st, "r");
            int ours = c && fgets(line, sizeof line, c) && strncmp(line, "tbon-", 5) == 0;
            if (c)
                fclose(c);
            if (!ours)
                continue;
        }
        snprintf(st, sizeof st, "/proc/%d/task/%s/status", (int)pid, e->d_name);
        FILE *f = fopen(st, "r");
        if (!f)
            continue;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0)
                sum += atol(line + 24);
            else if (strncmp(line, "nonvoluntary_ctxt_switches:", 27) == 0)
                sum += atol(line + 27);
        fclose(f);
    }
    closedir(d);
    return sum;
}

/* ---- sockets ---- */

struct it_addr { int family; uint8_t addr[16]; uint16_t port; };

/* The TCP sockets pid listens on (from /proc/PID/fd and /proc/net/tcp{,6}):
 * writes up to cap and returns their number. */
static IT_UNUSED size_t it_listen_addrs(pid_t pid, struct it_addr *out, size_t cap)
{
    unsigned long inodes[256];
    size_t ni = 0, k = 0;
    char path[128], link[128];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)) && ni < 256) {
        char fp[400];
        snprintf(fp, sizeof fp, "%s/%s", path, e->d_name);
        ssize_t l = readlink(fp, link, sizeof link - 1);
        if (l <= 0)
            continue;
        link[l] = 0;
        unsigned long ino;
        if (sscanf(link, "socket:[%lu]", &ino) == 1)
            inodes[ni++] = ino;
    }
    if (d)
        closedir(d);
    for (int v6 = 0; v6 < 2; v6++) {
        snprintf(path, sizeof path, "/proc/%d/net/tcp%s", (int)pid, v6 ? "6" : "");
        FILE *f = fopen(path, "r");
        char line[512];
        if (!f)
            continue;
        while (fgets(line, sizeof line, f)) {
            char local[64];
            unsigned st;
            unsigned long ino;
            if (sscanf(line, " %*d: %63s %*s %x %*s %*s %*s %*s %*s %lu", local, &st,
                       &ino) != 3 || st != 0x0A)
                continue;
            int mine = 0;
            for (size_t i = 0; i < ni; i++)
                mine |= inodes[i] == ino;
            char *colon = strchr(local, ':');
            if (!mine || !colon)
                continue;
            struct it_addr a = { .family = v6 ? AF_INET6 : AF_INET };
            a.port = (uint16_t)strtoul(colon + 1, NULL, 16);
            /* /proc prints the address as 32-bit words in host order. */
            for (int w = 0; w < (v6 ? 4 : 1); w++) {
                char word[9];
                memcpy(word, local + 8 * w, 8);
                word[8] = 0;
                uint32_t x = (uint32_t)strtoul(word, NULL, 16);
                memcpy(a.addr + 4 * w, &x, 4);
            }
            if (k < cap)
                out[k] = a;
            k++;
        }
        fclose(f);
    }
    return k < cap ? k : cap;
}

/* A connected TCP socket to a (a wildcard address means loopback), with
 * receive and send timeouts of 5 s; -1 on failure. */
static IT_UNUSED int it_connect(const struct it_addr *a)
{
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof ss);
    if (a->family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(a->port);
        memcpy(&s4->sin_addr, a->addr, 4);
        if (s4->sin_addr.s_addr == htonl(INADDR_ANY))
            s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *s4;
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(a->port);
        memcpy(&s6->sin6_addr, a->addr, 16);
        if (IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr))
            s6->sin6_addr = in6addr_loopback;
        len = sizeof *s6;
    }
    int fd = socket(a->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = { 5, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- per-case set-up and check ---- */

/* Show the last lines of every log file of the case (its processes', and
 * the FE's own: front-end.log). */
static IT_UNUSED void it_dump_logs(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/logs", th_tmpdir());
    th_dump_logs(dir);
}

/* The library's log lines of this case (FE side), kept in a ring (cases
 * look into it) and in the log directory's front-end.log, shown only when
 * the case fails (it_dump_logs, or the harness when the case dies), so that
 * passing runs stay quiet. */
#define IT_LOG_LINES 40
static char it_log_ring[IT_LOG_LINES][512];
static unsigned it_log_next;
static FILE *it_log_file;
static pthread_mutex_t it_log_lock = PTHREAD_MUTEX_INITIALIZER;

static IT_UNUSED void it_log_keep(void *arg, int level, const char *line)
{
    (void)arg;
    (void)level;
    pthread_mutex_lock(&it_log_lock);
    snprintf(it_log_ring[it_log_next++ % IT_LOG_LINES], sizeof it_log_ring[0], "%s", line);
    if (it_log_file)
        fprintf(it_log_file, "%s\n", line);
    pthread_mutex_unlock(&it_log_lock);
}

static IT_UNUSED tbon_stream_t *it_start_summing(it_tree_t *t, const char *shape,
                                                 const tbon_fe_options_t *opts)
{
    if (it_start(t, shape, NULL, opts))
        return NULL;
    tbon_stream_t *s = it_stream(t->net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    if (!s || it_sum_wave(s, 0, t->be, t->nbe) != 0) {
        it_stop(t);
        return NULL;
    }
    return s;
}

static IT_UNUSED pid_t it_pid_of(const char *prefix, tbon_rank_t rank)
{
    pid_t v[IT_MAX_BE];
    size_t n = it_our_procs(prefix, v, IT_MAX_BE);
    for (size_t i = 0; i < n && i < IT_MAX_BE; i++)
        if (it_commnode_rank(v[i]) == rank)
            return v[i];
    return 0;
}

static void it_init(void)
{
    char dir[600];
    /* Orphans of the tree (a BE whose commnode exited first) come back to
     * us instead of init, so the leftover check still sees them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    snprintf(dir, sizeof dir, "%s/logs", th_tmpdir());
    mkdir(dir, 0700);
    setenv("TBON_LOG_DIR", dir, 1);
    signal(SIGPIPE, SIG_IGN);
    char fe[700];
    snprintf(fe, sizeof fe, "%s/front-end.log", dir);
    it_log_file = fopen(fe, "a");
    if (it_log_file)
        setvbuf(it_log_file, NULL, _IOLBF, 0);      /* on disk before a crash */
    if (!getenv("ITEST_VERBOSE"))
        tbon_log_set_handler(it_log_keep, NULL);
    if (getenv("IT_FE_DEBUG"))       /* this process's lines only (to hunt a rare failure) */
        tbon_log_set_level(TBON_LOG_DEBUG);
}

static void it_finish(void)
{
    it_check_no_procs("after the test");
    if (th_failures)
        it_dump_logs();
}

#endif /* ITEST_PROTO_ONLY */
#endif
