/* bench_large.c - large packets up and down a tree (issue 19): MB/s for
 * packets of 1 MiB, 64 MiB and 1 GiB through one commnode (front-end ->
 * commnode -> back-end, and back), beside a plain TCP copy of the same bytes
 * over the same two hops in the same run (a relay process that forwards the
 * bytes as they come), public API. Packets over 16 MiB go in pieces of 8 MiB
 * and are whole again at every hop (store and forward); the plain copy is
 * pipelined, the floor of any two-hop transfer on this machine.
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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/bench.h"

#define PROG "bench_large"
#define TAG_DATA 100       /* FE -> BE: "%auc" bytes; the BE answers TAG_ACK */
#define TAG_ACK  101       /* "%uld" bytes received */
#define TAG_ASK  102       /* FE -> BE: "%uld" n: the BE sends n bytes up (TAG_DATA) */

static const size_t sizes[] = { (size_t)1 << 20, (size_t)64 << 20, (size_t)1 << 30 };
static const int reps[] = { 15, 5, 3 };

/* ---- the tree's back-end ---- */

static int be_main(int argc, char **argv)
{
    tbon_net_t *net = bench_be_create(PROG, &argc, &argv);
    uint8_t *buf = NULL;
    size_t cap = 0;
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
    tbon_net_destroy(net);
    return 0;
}

/* ---- the plain copy ---- */

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

/* A process that accepts one connection on a port of its own (said on fd
 * out) and then either echoes an 8-byte "got it" per byte count it is sent
 * (sink: a u64 count, then that many bytes; answers the count), or forwards
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
        if (want >> 63) {               /* "send me that many" */
            want &= ~((uint64_t)1 << 63);
            memset(buf, 0x5a, sizeof buf);
            for (uint64_t left = want; left;) {
                size_t k = left < sizeof buf ? (size_t)left : sizeof buf;
                if (write_all(c, buf, k) != 0)
                    _exit(1);
                left -= k;
            }
            continue;
        }
        while (got < want) {
            ssize_t n = read(c, buf, want - got < sizeof buf ? (size_t)(want - got) : sizeof buf);
            if (n <= 0)
                _exit(1);
            got += (uint64_t)n;
        }
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

/* MB/s of one plain transfer of size bytes, down (to the sink) or up. */
static double plain_once(int fd, const uint8_t *data, size_t size, int down, uint8_t *sinkbuf)
{
    double t0 = bench_now();
    uint64_t hdr = down ? (uint64_t)size : (uint64_t)size | (uint64_t)1 << 63;
    if (write_all(fd, &hdr, sizeof hdr) != 0)
        bench_die(PROG, "the plain copy's write");
    if (down) {
        if (write_all(fd, data, size) != 0)
            bench_die(PROG, "the plain copy's write");
        uint64_t got;
        read_all(fd, &got, sizeof got);
    } else {
        read_all(fd, sinkbuf, size);
    }
    return (double)size / 1e6 / (bench_now() - t0);
}

/* ---- the tree ---- */

static double tree_once(tbon_stream_t *s, const uint8_t *data, size_t size, int down)
{
    double t0 = bench_now();
    int rc = down ? tbon_stream_send(s, TAG_DATA, "%auc", data, size)
                  : tbon_stream_send(s, TAG_ASK, "%uld", (uint64_t)size);
    if (rc || tbon_stream_flush(s))
        bench_die(PROG, "tbon_stream_send");
    tbon_packet_t *p;
    if (tbon_stream_recv(s, &p, 600000) != 0)
        bench_die(PROG, "tbon_stream_recv");
    uint64_t n = 0;
    if (down) {
        if (tbon_packet_unpack(p, "%uld", &n) != 0 || n != size)
            bench_die(PROG, "the back-end's count");
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
        printf("usage: " PROG " [--only MIB]\n"
               "Large packets (1 MiB, 64 MiB, 1 GiB) down and up a chain FE -> commnode ->\n"
               "back-end, in MB/s, beside a plain TCP copy over two hops in the same run;\n"
               "Markdown rows on stdout (bench/run.sh collects them). Needs about 6 GB of\n"
               "memory for the 1 GiB packets. --only MIB: that size only (1, 64 or 1024).\n");
        return 0;
    }
    size_t only = 0;
    for (int i = 1; i < argc; i++) {
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
    size_t max = sizes[sizeof sizes / sizeof *sizes - 1];
    uint8_t *data = malloc(max), *sinkbuf = malloc(max);
    if (!data || !sinkbuf)
        bench_die(PROG, "malloc");
    memset(data, 0xa5, max);
    memset(sinkbuf, 0, max);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        if (only && sizes[i] != only)
            continue;
        for (int down = 1; down >= 0; down--) {
            double t[16], p[16];
            tree_once(s, data, sizes[i], down);          /* warm-up */
            plain_once(pfd, data, sizes[i], down, sinkbuf);
            for (int r = 0; r < reps[i]; r++) {          /* alternating */
                t[r] = tree_once(s, data, sizes[i], down);
                p[r] = plain_once(pfd, data, sizes[i], down, sinkbuf);
            }
            double tm = bench_median(t, reps[i]), pm = bench_median(p, reps[i]);
            char metric[64];
            snprintf(metric, sizeof metric, "%s %s packet", down ? "down" : "up",
                     size_name(sizes[i]));
            bench_row("large", metric, "%.0f", tm, "MB/s",
                      "FE -> commnode -> back-end%s, one packet at a time, until the %s; "
                      "median of %d; plain TCP copy of the same bytes over two hops (a relay "
                      "forwarding as they come): %.0f MB/s (ratio %.2f); %s",
                      down ? "" : " (asked for, then sent up)",
                      down ? "back-end's answer" : "packet is unpacked at the FE",
                      reps[i], pm, tm / pm,
                      sizes[i] <= (16u << 20) ? "one frame"
                      : down ? "in 8 MiB pieces, passed on by the commnode as they come"
                             : "in 8 MiB pieces, whole at the commnode");
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
