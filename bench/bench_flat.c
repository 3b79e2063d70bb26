/* bench_flat.c - the flat TCP baseline of issue 3: one front-end process and N
 * back-end processes connected straight to it over TCP on 127.0.0.1, no tree.
 *
 * For each N it prints rows "| flat, N BEs | metric | median | unit | notes |":
 * start-up (first posix_spawn until all N have said hello; median of several
 * runs), the round-trip time of one wave (the FE writes an 8-byte wave number
 * to every BE, each answers the int64 rank + wave, the FE sums; median of
 * RTT_WAVES waves), pipelined waves/s (K requests back-to-back, then the K
 * sums) and teardown (close every socket, reap every BE). Every answer and every
 * sum is checked exactly. bench_tree.c prints the same figures through tbon.
 *
 * Usage: bench_flat [N | AxM ...]   (default 16 64 256 1024 32x32; AxM: the bare
 *        tree, A relays with M back-ends each: the floor of any tree here)
 *        bench_flat --be PORT RANK PARENT_PID   (a back-end; started by its parent)
 *        bench_flat --relay PORT R FE_PID M   (a relay of the bare tree)
 *
 * Everything blocks (epoll, blocking reads in the BEs): on 2 cores with 1024
 * processes a spinning process would measure the scheduler, not TCP. The BEs
 * are in one process group, killed on any error, and each dies with the FE
 * (PR_SET_PDEATHSIG), so a failed run leaves nothing behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "lib/bench.h"

#define PROG "bench_flat"
#define RTT_WAVES 300         /* waves timed one by one (median) */
#define WARMUP_WAVES 20
#define PIPE_RUNS 3           /* pipelined bursts (median rate) */
#define TIMEOUT_MS 60000      /* no progress for this long: give up */

extern char **environ;

/* ---------------------------------------------------------------- back-end */

/* Write all of buf, retrying short writes; 0 or -1. */
static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The back-end: connect, say hello (its rank), then answer every 8-byte wave
 * number w with the int64 rank + w, until the FE closes. The answers to the
 * requests of one read go out in one write, as a TCP server would. */
static int be_main(int port, int64_t rank, pid_t fe)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != fe)          /* the FE died before prctl */
        return 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
        connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        write_all(fd, &rank, sizeof rank) != 0) {
        perror(PROG " --be: connect");
        return 1;
    }
    static uint64_t in[512];
    static int64_t out[512];
    size_t have = 0;                        /* bytes in `in` */
    for (;;) {
        ssize_t n = read(fd, (char *)in + have, sizeof in - have);
        if (n == 0)
            return 0;                       /* the FE closed: done */
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror(PROG " --be: read");
            return 1;
        }
        have += (size_t)n;
        size_t k = have / 8;
        for (size_t i = 0; i < k; i++)
            out[i] = rank + (int64_t)in[i];
        if (write_all(fd, out, k * 8) != 0) {
            perror(PROG " --be: write");
            return 1;
        }
        memmove(in, (char *)in + k * 8, have - k * 8);
        have -= k * 8;
    }
}

/* A relay of the bare tree (issue 3's floor): the FE's child, with M back-ends
 * of its own (ranks (r-1)M+1 .. rM). It says hello r to the FE once its BEs
 * have said theirs, then for each read of k requests from the FE writes the k
 * requests to every BE, gathers the k answers of each (epoll), and writes the
 * k subtree sums up in one write. Nothing but blocking reads, epoll and 8-byte
 * records: the least a two-level tree over TCP can do per wave. */
static int relay_main(int port, int r, pid_t fe, int m, const char *exe)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != fe)
        return 1;
    int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ep = epoll_create1(EPOLL_CLOEXEC);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct sockaddr_in la = { .sin_family = AF_INET };
    la.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t ll = sizeof la;
    if (up < 0 || lfd < 0 || ep < 0 ||
        setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
        connect(up, (struct sockaddr *)&a, sizeof a) != 0 ||
        bind(lfd, (struct sockaddr *)&la, sizeof la) != 0 || listen(lfd, 4096) != 0 ||
        getsockname(lfd, (struct sockaddr *)&la, &ll) != 0) {
        perror(PROG " --relay: set-up");
        return 1;
    }
    char lport[16], rank[24], me[16];
    snprintf(lport, sizeof lport, "%u", ntohs(la.sin_port));
    snprintf(me, sizeof me, "%ld", (long)getpid());
    pid_t *pids = calloc((size_t)m, sizeof *pids);
    int *fd = calloc((size_t)m, sizeof *fd);
    int64_t *got = calloc((size_t)m, sizeof *got);
    static int64_t req[512], sum[512];
    if (!pids || !fd || !got)
        return 1;
    for (int i = 0; i < m; i++) {
        snprintf(rank, sizeof rank, "%lld", (long long)(r - 1) * m + i + 1);
        char *argv[] = { "bench_flat_be", "--be", lport, rank, me, NULL };
        if (posix_spawn(&pids[i], exe, NULL, NULL, argv, environ) != 0)
            return 1;
    }
    for (int i = 0; i < m; i++) {
        int64_t hello;
        fd[i] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        if (fd[i] < 0 || setsockopt(fd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
            read(fd[i], &hello, 8) != 8 || epoll_ctl(ep, EPOLL_CTL_ADD, fd[i], &ev) != 0)
            return 1;
    }
    int64_t hello = r;
    if (write_all(up, &hello, 8) != 0)
        return 1;
    for (;;) {
        ssize_t n = read(up, req, sizeof req);
        if (n == 0)
            break;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || n % 8 != 0)       /* the FE writes whole records */
            return 1;
        size_t k = (size_t)n / 8, left = (size_t)m * k;
        for (int i = 0; i < m; i++)
            if (write_all(fd[i], req, (size_t)n) != 0)
                return 1;
        memset(sum, 0, k * 8);
        memset(got, 0, (size_t)m * sizeof *got);
        while (left > 0) {
            struct epoll_event ev[64];
            int e = epoll_wait(ep, ev, 64, -1);
            for (int j = 0; j < e; j++) {
                int i = (int)ev[j].data.u32;
                int64_t in[512];
                ssize_t q = read(fd[i], in, (k - (size_t)got[i]) * 8);
                if (q <= 0 || q % 8 != 0)    /* 8-byte writes: no torn records here */
                    return 1;
                for (ssize_t x = 0; x < q / 8; x++)
                    sum[got[i]++] += in[x];
                left -= (size_t)q / 8;
            }
        }
        if (write_all(up, sum, k * 8) != 0)
            return 1;
    }
    for (int i = 0; i < m; i++)
        close(fd[i]);
    for (int i = 0; i < m; i++)
        waitpid(pids[i], NULL, 0);
    return 0;
}

/* ---------------------------------------------------------------- front-end */

struct conn {
    int fd;
    int64_t rank;           /* -1 until the hello arrived */
    uint64_t answered;      /* answers received: the next answer is for this wave */
    uint8_t in[4096];       /* partial records */
    size_t in_len;
    uint8_t *out;           /* requests not yet written (EAGAIN) */
    size_t out_len, out_cap;
};

struct flat {
    int n, ep, lfd, sfd;
    int m;                  /* bare tree: BEs per relay; 0: flat */
    uint16_t port;
    pid_t *pids;
    int started;            /* BEs spawned and not yet reaped */
    struct conn *c;
    int ready;              /* hellos received */
    uint64_t sent;          /* waves sent so far; wave w is number w */
    int64_t *sum;           /* per wave, the sum so far */
    int *cnt;               /* per wave, answers so far */
    uint8_t *seen;          /* per rank 1..n: hello received */
    uint64_t done;          /* waves 0..done-1 are complete */
    size_t waves_cap;
};

static struct flat F;       /* the current run: global for the exit clean-up */
static pid_t be_pgid;       /* the BEs' process group, 0 when none */
static char self_exe[4096];

/* On any exit (bench_die included): kill the BEs' group and reap them. */
static void kill_bes(void)
{
    if (be_pgid > 0) {
        kill(-be_pgid, SIGKILL);
        while (F.started > 0 && waitpid(-be_pgid, NULL, 0) > 0)
            F.started--;
        be_pgid = 0;
    }
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = PROG ": watchdog expired, killing the back-ends\n";
    if (write(2, m, sizeof m - 1) < 0) { /* nothing to do */ }
    if (be_pgid > 0)
        kill(-be_pgid, SIGKILL);
    _exit(1);
}

static void set_nofile_max(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Queue or write wave number w to connection c: written at once when nothing
 * is queued, otherwise (or on EAGAIN) queued with EPOLLOUT armed. */
static void send_req(struct conn *c, uint64_t w)
{
    size_t off = 0;
    if (c->out_len == 0) {
        ssize_t n = write(c->fd, &w, 8);
        if (n == 8)
            return;
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            bench_die(PROG, "write to a back-end");
        off = n > 0 ? (size_t)n : 0;
        struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = c };
        if (epoll_ctl(F.ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
            bench_die(PROG, "epoll_ctl MOD");
    }
    if (c->out_len + 8 > c->out_cap) {
        c->out_cap = c->out_cap ? 2 * c->out_cap : 1024;
        if (!(c->out = realloc(c->out, c->out_cap)))
            bench_die(PROG, "realloc");
    }
    memcpy(c->out + c->out_len, (uint8_t *)&w + off, 8 - off);
    c->out_len += 8 - off;
}

/* EPOLLOUT on c: write what is queued; disarm EPOLLOUT once empty. */
static void flush_out(struct conn *c)
{
    ssize_t n = write(c->fd, c->out, c->out_len);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return;
        bench_die(PROG, "write to a back-end");
    }
    memmove(c->out, c->out + n, c->out_len - (size_t)n);
    c->out_len -= (size_t)n;
    if (c->out_len == 0) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
        if (epoll_ctl(F.ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
            bench_die(PROG, "epoll_ctl MOD");
    }
}

/* One 8-byte record from c: the hello (its rank) or the answer to the next
 * wave, checked exactly; a complete wave's sum is checked too. */
static void on_record(struct conn *c, int64_t v)
{
    if (c->rank < 0) {
        if (v < 1 || v > F.n || F.seen[v])
            bench_die(PROG, "hello (rank out of range or repeated)");
        F.seen[v] = 1;
        c->rank = v;
        F.ready++;
        return;
    }
    /* A relay r answers the sum over its BEs (r-1)m+1 .. rm of rank + w. */
    uint64_t w = c->answered++;
    int64_t m = F.m ? F.m : 1, lo = (c->rank - 1) * m + 1;
    if (w >= F.sent || v != m * (2 * lo + m - 1) / 2 + m * (int64_t)w)
        bench_die(PROG, "answer check");
    size_t i = w % F.waves_cap;
    F.sum[i] += v;
    if (++F.cnt[i] == F.n) {
        int64_t leaves = (int64_t)F.n * m;
        if (w != F.done || F.sum[i] != leaves * (leaves + 1) / 2 + (int64_t)w * leaves)
            bench_die(PROG, "wave sum check");
        F.done++;
        F.sum[i] = 0;
        F.cnt[i] = 0;
    }
}

static void read_conn(struct conn *c)
{
    ssize_t n = read(c->fd, c->in + c->in_len, sizeof c->in - c->in_len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0)
        bench_die(PROG, "read from a back-end (it closed or failed)");
    c->in_len += (size_t)n;
    size_t k = c->in_len / 8;
    for (size_t i = 0; i < k; i++) {
        int64_t v;
        memcpy(&v, c->in + 8 * i, 8);
        on_record(c, v);
    }
    memmove(c->in, c->in + 8 * k, c->in_len - 8 * k);
    c->in_len -= 8 * k;
}

/* Accept every pending connection; its hello is read as an ordinary record. */
static void accept_all(void)
{
    for (;;) {
        int fd = accept4(F.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
        if (fd < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            bench_die(PROG, "accept");
        }
        int i = 0;
        while (i < F.n && F.c[i].fd >= 0)
            i++;
        if (i == F.n)
            bench_die(PROG, "accept (too many connections)");
        struct conn *c = &F.c[i];
        c->fd = fd;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
        if (epoll_ctl(F.ep, EPOLL_CTL_ADD, fd, &ev) != 0)
            bench_die(PROG, "epoll_ctl ADD");
    }
}

/* Block in epoll until cond() holds, handling accepts, answers, queued writes
 * and back-end deaths (SIGCHLD before teardown is an error). */
static void loop_until(int (*cond)(void))
{
    struct epoll_event ev[256];
    while (!cond()) {
        int k = epoll_wait(F.ep, ev, 256, TIMEOUT_MS);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            bench_die(PROG, "epoll_wait (timeout)");
        for (int i = 0; i < k; i++) {
            void *p = ev[i].data.ptr;
            if (p == &F.lfd) {
                accept_all();
            } else if (p == &F.sfd) {
                bench_die(PROG, "a back-end exited early; its run");
            } else {
                struct conn *c = p;
                if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                    read_conn(c);
                if (ev[i].events & EPOLLOUT)
                    flush_out(c);
            }
        }
    }
}

static int all_ready(void) { return F.ready == F.n; }
static int all_done(void) { return F.done == F.sent; }

/* Start N BEs and wait for their hellos; returns the start-up time in s. */
static double flat_start(int n, int m, size_t waves_cap)
{
    memset(&F, 0, sizeof F);
    F.n = n;
    F.m = m;
    F.waves_cap = waves_cap;
    F.c = calloc((size_t)n, sizeof *F.c);
    F.pids = calloc((size_t)n, sizeof *F.pids);
    F.sum = calloc(waves_cap, sizeof *F.sum);
    F.cnt = calloc(waves_cap, sizeof *F.cnt);
    F.seen = calloc((size_t)n + 1, 1);
    if (!F.c || !F.pids || !F.sum || !F.cnt || !F.seen)
        bench_die(PROG, "calloc");
    for (int i = 0; i < n; i++) {
        F.c[i].fd = -1;
        F.c[i].rank = -1;
    }
    int one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    F.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (F.lfd < 0 || setsockopt(F.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(F.lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(F.lfd, 4096) != 0 ||
        getsockname(F.lfd, (struct sockaddr *)&a, &al) != 0)
        bench_die(PROG, "listen on 127.0.0.1:0");
    F.port = ntohs(a.sin_port);

    /* SIGCHLD through a signalfd: a BE that dies before teardown fails the run
     * at once instead of after the timeout. */
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGCHLD);
    sigprocmask(SIG_BLOCK, &ss, NULL);
    F.sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
    F.ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event el = { .events = EPOLLIN, .data.ptr = &F.lfd };
    struct epoll_event es = { .events = EPOLLIN, .data.ptr = &F.sfd };
    if (F.sfd < 0 || F.ep < 0 || epoll_ctl(F.ep, EPOLL_CTL_ADD, F.lfd, &el) != 0 ||
        epoll_ctl(F.ep, EPOLL_CTL_ADD, F.sfd, &es) != 0)
        bench_die(PROG, "epoll/signalfd set-up");

    char port[16], rank[16], fe[16], per[16];
    snprintf(per, sizeof per, "%d", m);
    snprintf(port, sizeof port, "%u", F.port);
    snprintf(fe, sizeof fe, "%ld", (long)getpid());
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&at, &none);   /* the BEs must not inherit the block */
    double t0 = bench_now();
    for (int i = 0; i < n; i++) {
        snprintf(rank, sizeof rank, "%d", i + 1);   /* ranks 1..N, the FE is 0 */
        char *argv[] = { "bench_flat_be", "--be", port, rank, fe, NULL };
        char *rargv[] = { "bench_flat_relay", "--relay", port, rank, fe, per, NULL };
        posix_spawnattr_setpgroup(&at, be_pgid);    /* 0: a new group, the first BE's */
        if (posix_spawn(&F.pids[i], self_exe, NULL, &at, m ? rargv : argv, environ) != 0)
            bench_die(PROG, "posix_spawn of a back-end");
        if (i == 0)
            be_pgid = F.pids[0];
        F.started++;
        /* Accept the early ones while spawning, so the backlog never fills. */
        if ((i & 63) == 63)
            accept_all();
    }
    posix_spawnattr_destroy(&at);
    loop_until(all_ready);
    return bench_now() - t0;
}

/* Close every connection and reap every BE (they exit on EOF); returns the
 * teardown time in s. */
static double flat_stop(void)
{
    double t0 = bench_now();
    for (int i = 0; i < F.n; i++) {
        close(F.c[i].fd);
        free(F.c[i].out);
    }
    for (int i = 0; i < F.n; i++) {
        int st;
        if (waitpid(F.pids[i], &st, 0) != F.pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bench_die(PROG, "reaping a back-end (bad exit)");
        F.started--;
    }
    double t = bench_now() - t0;
    be_pgid = 0;
    close(F.lfd);
    close(F.ep);
    close(F.sfd);
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGCHLD);
    sigprocmask(SIG_UNBLOCK, &ss, NULL);
    free(F.c);
    free(F.pids);
    free(F.sum);
    free(F.cnt);
    free(F.seen);
    return t;
}

/* Send the next wave to every BE. */
static void send_wave(void)
{
    uint64_t w = F.sent++;
    if (F.sent - F.done > F.waves_cap)
        bench_die(PROG, "too many waves in flight");
    for (int i = 0; i < F.n; i++)
        send_req(&F.c[i], w);
}

static void run_n(int n, int m)
{
    int big = m ? n * m : n;
    int starts = big >= 1024 ? 3 : big >= 256 ? 5 : 7;
    int pipe_k = big >= 1024 ? 200 : big >= 256 ? 500 : 2000;
    double st[7], rtt[RTT_WAVES], rate[PIPE_RUNS], td[7];
    char area[48];
    int leaves = m ? n * m : n;
    if (m)
        snprintf(area, sizeof area, "bare tree %dx%d, %d BEs", n, m, leaves);
    else
        snprintf(area, sizeof area, "flat, %d BEs", n);
    const char *what = m ? "relays over TCP, no tbon" : "one FE, direct TCP";

    alarm(240);
    for (int r = 0; r < starts; r++) {
        st[r] = flat_start(n, m, (size_t)pipe_k);
        if (r < starts - 1)
            td[r] = flat_stop();
    }
    /* On the last start: single waves, then pipelined bursts. */
    for (int i = 0; i < WARMUP_WAVES; i++) {
        send_wave();
        loop_until(all_done);
    }
    for (int i = 0; i < RTT_WAVES; i++) {
        double t0 = bench_now();
        send_wave();
        loop_until(all_done);
        rtt[i] = bench_now() - t0;
    }
    for (int r = 0; r < PIPE_RUNS; r++) {
        double t0 = bench_now();
        for (int i = 0; i < pipe_k; i++)
            send_wave();
        loop_until(all_done);
        rate[r] = pipe_k / (bench_now() - t0);
    }
    td[starts - 1] = flat_stop();
    alarm(0);

    bench_row(area, "start-up to ready", "%.2f", bench_median(st, starts) * 1e3, "ms",
              "%d BEs, %s; first spawn to all hellos; median of %d", leaves, what, starts);
    bench_row(area, "wave round trip", "%.3f", bench_median(rtt, RTT_WAVES) * 1e3, "ms",
              "8 B request to each BE, int64 answers summed%s and checked; median of %d waves",
              m ? " at the relays" : "", RTT_WAVES);
    bench_row(area, "pipelined waves", "%.0f", bench_median(rate, PIPE_RUNS), "waves/s",
              "%d waves back-to-back, then %d sums; median of %d bursts", pipe_k, pipe_k,
              PIPE_RUNS);
    bench_row(area, "teardown", "%.2f", bench_median(td, starts) * 1e3, "ms",
              "close all sockets, reap all BEs; median of %d", starts);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: " PROG " [N | AxM ...]\n"
               "The flat baseline: one front-end and N back-end processes connected\n"
               "straight to it over TCP; prints start-up, round-trip, pipelined-wave\n"
               "and teardown rows for bench/RESULTS.md (default: 16 64 256 1024 32x32).\n"
               "AxM: the bare tree, the floor of any tree here: A relay processes\n"
               "under the FE, each with M back-ends, 8-byte records over TCP, no tbon.\n");
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "--be") == 0)
        return be_main(atoi(argv[2]), atoll(argv[3]), (pid_t)atol(argv[4]));
    ssize_t l = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (l <= 0)
        bench_die(PROG, "readlink /proc/self/exe");
    self_exe[l] = '\0';
    if (argc == 6 && strcmp(argv[1], "--relay") == 0)
        return relay_main(atoi(argv[2]), atoi(argv[3]), (pid_t)atol(argv[4]), atoi(argv[5]),
                          self_exe);

    set_nofile_max();
    signal(SIGALRM, on_alarm);
    signal(SIGPIPE, SIG_IGN);
    atexit(kill_bes);

    const char *def[] = { "16", "64", "256", "1024", "32x32" };
    int cnt = argc > 1 ? argc - 1 : 5;
    for (int i = 0; i < cnt; i++) {
        const char *arg = argc > 1 ? argv[i + 1] : def[i];
        int n = 0, m = 0;
        char end;
        if (sscanf(arg, "%dx%d%c", &n, &m, &end) == 2) {
            if (n < 1 || m < 1 || (long)n * m > 16384)
                bench_die(PROG, "argument AxM (A*M in 1..16384)");
        } else if (sscanf(arg, "%d%c", &n, &end) != 1 || n < 1 || n > 16384) {
            bench_die(PROG, "argument N (1..16384) or AxM");
        }
        run_n(n, m);
    }
    return 0;
}
