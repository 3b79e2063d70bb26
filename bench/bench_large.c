/* bench_large.c - large packets up and down a tree (issue 19): MB/s for
 * packets of 1 MiB, 64 MiB and 1 GiB through one commnode (front-end ->
 * commnode -> back-end, and back), beside a plain TCP copy of the same bytes
 * over the same two hops in the same run (a relay process that forwards the
 * bytes as they come), public API. Packets over 16 MiB go in pieces of 8 MiB,
 * which the commnode passes on as they come; the plain copy is pipelined,
 * the floor of any two-hop transfer on this machine.
 *
 * Each size and direction runs two ways: "copied", the application packing
 * its bytes into a fresh packet for each send and unpacking a copy at the
 * other end (tbon_stream_send "%auc", tbon_packet_unpack), and "in place", a
 * packet built once and sent again as it is (tbon_stream_send_packet) and
 * read where it lies (tbon_packet_bytes): the library's own cost.
 *
 * The copied rows are set beside the plain copy twice: as it is (the far end
 * reads into a buffer it reuses) and with its far end taking each message
 * into fresh memory of its own, as an unpacked copy is (malloc, huge pages
 * asked for as the library asks for them, free): on a virtual machine a
 * fresh page costs more than the copy into it (bench/RESULTS.md, issue 32).
 *
 *   bench_large              every row (median of REPS runs each)
 *   bench_large --be ...     the tree's back-end
 *   bench_large --relay P    the plain copy's middle process (forwards to P)
 *   bench_large --sink       the plain copy's far end (its port on stdout)
 *
 * Rows: | large | <down|up> <size> | <MB/s> | MB/s | <notes> |
 */
#include <tbon/tbon.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/bench.h"

#define PROG "bench_large"
#define TAG_DATA 100       /* FE -> BE: "%auc" bytes; the BE answers TAG_ACK */
#define TAG_ACK  101       /* "%uld" bytes received */
#define TAG_ASK  102       /* FE -> BE: "%uld" n: the BE sends n bytes up (TAG_DATA) */
#define TAG_DATA_IN 103    /* TAG_DATA, read in place */
#define TAG_ASK_IN  104    /* TAG_ASK, sent from a packet the BE built once */

static const size_t sizes[] = { (size_t)1 << 20, (size_t)64 << 20, (size_t)1 << 30 };
static const int reps[] = { 15, 5, 3 };

/* ---- the tree's back-end ---- */

static int be_main(int argc, char **argv)
{
    tbon_net_t *net = bench_be_create(PROG, &argc, &argv);
    uint8_t *buf = NULL;
    size_t cap = 0;
    tbon_packet_t *kept = NULL;     /* TAG_ASK_IN's packet, of kept_n bytes */
    uint64_t kept_n = 0;
    for (;;) {
        tbon_packet_t *p;
        tbon_stream_t *s;
        if (tbon_net_recv(net, &p, &s, -1) != 0)
            break;
        int rc = 0;
        if (tbon_packet_tag(p) == TAG_DATA) {
            uint8_t *b = NULL;
            size_t n = 0;
            rc = tbon_packet_unpack(p, "%auc", &b, &n);
            free(b);
            if (!rc)
                rc = tbon_stream_send(s, TAG_ACK, "%uld", (uint64_t)n);
        } else if (tbon_packet_tag(p) == TAG_DATA_IN) {
            const void *b;
            size_t n = 0;
            rc = tbon_packet_bytes(p, 0, &b, &n);
            if (!rc)
                rc = tbon_stream_send(s, TAG_ACK, "%uld", (uint64_t)n);
        } else if (tbon_packet_tag(p) == TAG_ASK_IN) {
            uint64_t n = 0;
            rc = tbon_packet_unpack(p, "%uld", &n);
            if (!rc && (!kept || kept_n != n)) {
                tbon_packet_unref(kept);
                uint8_t *b = malloc(n ? n : 1);
                if (b)
                    memset(b, 0x5a, n);
                kept = b ? tbon_packet_new(TAG_DATA, "%auc", b, (size_t)n) : NULL;
                kept_n = n;
                free(b);
                if (!kept)
                    rc = TBON_ENOMEM;
            }
            if (!rc)
                rc = tbon_stream_send_packet(s, kept);
        } else if (tbon_packet_tag(p) == TAG_ASK) {
            uint64_t n = 0;
            rc = tbon_packet_unpack(p, "%uld", &n);
            if (!rc && n > cap) {
                free(buf);
                cap = 0;
                if (!(buf = malloc(n)))
                    rc = TBON_ENOMEM;
                else
                    memset(buf, 0x5a, cap = n);
            }
            if (!rc)
                rc = tbon_stream_send(s, TAG_DATA, "%auc", buf, (size_t)n);
        }
        if (!rc)
            rc = tbon_stream_flush(s);
        tbon_packet_unref(p);
        if (rc) {
            fprintf(stderr, PROG " --be: %s\n", tbon_strerror(rc));
            break;
        }
    }
    free(buf);
    tbon_packet_unref(kept);
    tbon_net_destroy(net);
    return 0;
}

/* ---- the plain copy ---- */

/* Fresh memory for one message, as the library's unpacked copy is made: a
 * C-library block, huge pages asked for over its whole 2 MiB pages when it
 * is 4 MiB or more. NULL if out of memory. */
static void *fresh_block(size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (b && n >= 2 * huge) {
        uintptr_t lo = ((uintptr_t)b + huge - 1) & ~(huge - 1);
        uintptr_t hi = ((uintptr_t)b + n) & ~(huge - 1);
        if (hi > lo)
            madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
    return b;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static int listen_any(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 4) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0)
        bench_die(PROG, "listen");
    *port = ntohs(a.sin_port);
    return fd;
}

static int connect_to(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        bench_die(PROG, "connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

#define PLAIN_UP    ((uint64_t)1 << 63)   /* header: "send me that many" */
#define PLAIN_FRESH ((uint64_t)1 << 62)   /* header: read into fresh memory */

/* A process that accepts one connection on a port of its own (said on fd
 * out) and then either echoes an 8-byte "got it" per byte count it is sent
 * (sink: a u64 count, then that many bytes, read into a buffer it reuses or,
 * with PLAIN_FRESH, into fresh memory of the whole size; answers the count),
 * or sends that many bytes (with PLAIN_UP), or forwards
 * everything both ways between that connection and port `to` (relay). */
static void copy_proc(int out, uint16_t to)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    uint16_t port;
    int lfd = listen_any(&port);
    if (write_all(out, &port, sizeof port) != 0)
        _exit(1);
    close(out);
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        _exit(1);
    static char buf[1 << 20];
    if (to) {
        int d = connect_to(to);
        /* Both ways at once: a child for the way back (gone with us). */
        if (fork() == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (ssize_t n; (n = read(d, buf, sizeof buf)) > 0;)
                if (write_all(c, buf, (size_t)n) != 0)
                    break;
            _exit(0);
        }
        for (ssize_t n; (n = read(c, buf, sizeof buf)) > 0;)
            if (write_all(d, buf, (size_t)n) != 0)
                break;
        _exit(0);
    }
    for (;;) {
        uint64_t want, got = 0;
        size_t h = 0;
        while (h < sizeof want) {
            ssize_t n = read(c, (char *)&want + h, sizeof want - h);
            if (n <= 0)
                _exit(0);
            h += (size_t)n;
        }
        if (want & PLAIN_UP) {
            want &= ~PLAIN_UP;
            memset(buf, 0x5a, sizeof buf);
            for (uint64_t left = want; left;) {
                size_t k = left < sizeof buf ? (size_t)left : sizeof buf;
                if (write_all(c, buf, k) != 0)
                    _exit(1);
                left -= k;
            }
            continue;
        }
        uint8_t *into = NULL;
        if (want & PLAIN_FRESH) {
            want &= ~PLAIN_FRESH;
            if (!(into = fresh_block((size_t)want)))
                _exit(1);
        }
        while (got < want) {
            size_t room = into ? (size_t)(want - got)
                          : want - got < sizeof buf ? (size_t)(want - got) : sizeof buf;
            ssize_t n = read(c, into ? (char *)into + got : buf, room);
            if (n <= 0)
                _exit(1);
            got += (uint64_t)n;
        }
        free(into);
        if (write_all(c, &got, sizeof got) != 0)
            _exit(1);
    }
}

static pid_t copies[2];
static int ncopies;

static uint16_t spawn_copy(uint16_t to)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        bench_die(PROG, "pipe");
    pid_t pid = fork();
    if (pid < 0)
        bench_die(PROG, "fork");
    if (pid == 0) {
        close(pfd[0]);
        copy_proc(pfd[1], to);
        _exit(0);
    }
    close(pfd[1]);
    copies[ncopies++] = pid;
    uint16_t port = 0;
    if (read(pfd[0], &port, sizeof port) != sizeof port)
        bench_die(PROG, "the plain copy's start");
    close(pfd[0]);
    return port;
}

static void read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len) {
        ssize_t n = read(fd, p, len);
        if (n <= 0)
            bench_die(PROG, "the plain copy's read");
        p += n;
        len -= (size_t)n;
    }
}

/* MB/s of one plain transfer of size bytes, down (to the sink) or up; its
 * receiver reads into sinkbuf (up) or a buffer of the sink's, or, fresh,
 * into fresh memory of the whole size taken for this message. */
static double plain_once(int fd, const uint8_t *data, size_t size, int down, uint8_t *sinkbuf,
                         int fresh)
{
    double t0 = bench_now();
    uint64_t hdr = (uint64_t)size | (down ? 0 : PLAIN_UP) | (down && fresh ? PLAIN_FRESH : 0);
    if (write_all(fd, &hdr, sizeof hdr) != 0)
        bench_die(PROG, "the plain copy's write");
    if (down) {
        if (write_all(fd, data, size) != 0)
            bench_die(PROG, "the plain copy's write");
        uint64_t got;
        read_all(fd, &got, sizeof got);
    } else if (fresh) {
        uint8_t *into = fresh_block(size);
        if (!into)
            bench_die(PROG, "malloc");
        read_all(fd, into, size);
        free(into);
    } else {
        read_all(fd, sinkbuf, size);
    }
    return (double)size / 1e6 / (bench_now() - t0);
}

/* ---- the tree ---- */

/* One packet of size bytes down (data) or up, copied or in place (built:
 * the packet of data made once). MB/s. */
static double tree_once(tbon_stream_t *s, const uint8_t *data, tbon_packet_t *built,
                        size_t size, int down)
{
    double t0 = bench_now();
    int rc = down && built ? tbon_stream_send_packet(s, built)
             : down        ? tbon_stream_send(s, TAG_DATA, "%auc", data, size)
                           : tbon_stream_send(s, built ? TAG_ASK_IN : TAG_ASK, "%uld",
                                              (uint64_t)size);
    if (rc || tbon_stream_flush(s))
        bench_die(PROG, "tbon_stream_send");
    tbon_packet_t *p;
    if (tbon_stream_recv(s, &p, 600000) != 0)
        bench_die(PROG, "tbon_stream_recv");
    uint64_t n = 0;
    if (down) {
        if (tbon_packet_unpack(p, "%uld", &n) != 0 || n != size)
            bench_die(PROG, "the back-end's count");
    } else if (built) {
        const uint8_t *b = NULL;
        size_t k = 0;
        if (tbon_packet_bytes(p, 0, (const void **)&b, &k) != 0 || k != size ||
            (k && (b[0] != 0x5a || b[k - 1] != 0x5a)))
            bench_die(PROG, "the back-end's packet");
    } else {
        uint8_t *b = NULL;
        size_t k = 0;
        if (tbon_packet_unpack(p, "%auc", &b, &k) != 0 || k != size)
            bench_die(PROG, "the back-end's packet");
        free(b);
    }
    tbon_packet_unref(p);
    return (double)size / 1e6 / (bench_now() - t0);
}

static const char *size_name(size_t size)
{
    return size >= (size_t)1 << 30 ? "1 GiB" : size >= (size_t)64 << 20 ? "64 MiB" : "1 MiB";
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        printf("usage: " PROG " [--only MIB] [--in-place]\n"
               "Large packets (1 MiB, 64 MiB, 1 GiB) down and up a chain FE -> commnode ->\n"
               "back-end, in MB/s, copied and in place, beside a plain TCP copy over two hops\n"
               "in the same run (the copied rows also beside that copy taken into fresh\n"
               "memory at its far end); Markdown rows on stdout (bench/run.sh collects them). Needs\n"
               "about 8 GB of memory for the 1 GiB packets. --only MIB: that size only (1,\n"
               "64 or 1024). --in-place: the in-place rows only.\n");
        return 0;
    }
    size_t only = 0;
    int in_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--in-place") == 0)
            in_only = 1;
        if (strcmp(argv[i], "--be") == 0)
            return be_main(argc, argv);
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = (size_t)strtoull(argv[++i], NULL, 10) << 20;
    }
    signal(SIGPIPE, SIG_IGN);
    tbon_net_t *net = bench_start_tree(PROG, "localhost:0 => localhost:1 ;\n"
                                             "localhost:1 => localhost:2 ;\n", "--be");
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_NULL,
                                          TBON_SYNC_DONTWAIT, TBON_FILTER_NULL);
    if (!s)
        bench_die(PROG, "tbon_fe_stream_new");
    int pfd = connect_to(spawn_copy(spawn_copy(0)));
    size_t max = only ? only : sizes[sizeof sizes / sizeof *sizes - 1];
    uint8_t *data = malloc(max), *sinkbuf = malloc(max);
    if (!data || !sinkbuf)
        bench_die(PROG, "malloc");
    memset(data, 0xa5, max);
    memset(sinkbuf, 0, max);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        if (only && sizes[i] != only)
            continue;
        for (int down = 1; down >= 0; down--) {
            double t[2][16], p[16], pf[16];
            tbon_packet_t *built = tbon_packet_new(TAG_DATA_IN, "%auc", data, sizes[i]);
            if (!built)
                bench_die(PROG, "tbon_packet_new");
            if (!in_only)
                tree_once(s, data, NULL, sizes[i], down);    /* warm-up */
            tree_once(s, data, built, sizes[i], down);
            plain_once(pfd, data, sizes[i], down, sinkbuf, 0);
            for (int r = 0; r < reps[i]; r++) {          /* alternating */
                if (!in_only)
                    t[0][r] = tree_once(s, data, NULL, sizes[i], down);
                t[1][r] = tree_once(s, data, built, sizes[i], down);
                p[r] = plain_once(pfd, data, sizes[i], down, sinkbuf, 0);
                if (!in_only)
                    pf[r] = plain_once(pfd, data, sizes[i], down, sinkbuf, 1);
            }
            tbon_packet_unref(built);
            double pm = bench_median(p, reps[i]);
            double pfm = in_only ? 0 : bench_median(pf, reps[i]);
            for (int in = in_only; in <= 1; in++) {
                double tm = bench_median(t[in], reps[i]);
                char metric[64], fresh[160] = "";
                if (!in)
                    snprintf(fresh, sizeof fresh,
                             "; the same plain copy into fresh memory at its far end "
                             "(as the unpacked copy is): %.0f MB/s (ratio %.2f)",
                             pfm, tm / pfm);
                snprintf(metric, sizeof metric, "%s %s packet%s", down ? "down" : "up",
                         size_name(sizes[i]), in ? ", in place" : "");
                bench_row("large", metric, "%.0f", tm, "MB/s",
                          "FE -> commnode -> back-end%s, one packet at a time, until the %s; "
                          "%s; median of %d; plain TCP copy of the same bytes over two hops "
                          "(a relay forwarding as they come): %.0f MB/s (ratio %.2f)%s; %s",
                          down ? "" : " (asked for, then sent up)",
                          down ? "back-end's answer" : "packet is read at the FE",
                          in ? "a packet built once, sent as it is, read in place "
                               "(tbon_stream_send_packet, tbon_packet_bytes)"
                             : "packed for each send, unpacked into fresh memory",
                          reps[i], pm, tm / pm, fresh,
                          sizes[i] <= (16u << 20) ? "one frame"
                                                  : "in 8 MiB pieces, passed on by the "
                                                    "commnode as they come");
            }
            fflush(stdout);
        }
    }
    close(pfd);
    free(data);
    free(sinkbuf);
    tbon_net_destroy(net);
    for (int i = 0; i < ncopies; i++) {       /* the plain copy's processes */
        kill(copies[i], SIGKILL);
        waitpid(copies[i], NULL, 0);
    }
    return 0;
}
