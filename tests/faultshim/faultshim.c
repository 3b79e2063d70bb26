/* faultshim.c - an LD_PRELOAD library that breaks the data links of tree
 * processes on purpose, to test the link layer (net/link.h)
 *
 * It wraps the socket calls the reactor writes and reads frames with
 * (sendmsg, send, write, writev; recv, read, readv) and acts only on the
 * sockets that carry sequenced frames of the link layer (it recognises an
 * outgoing frame header of version 3 with a sequence number), so the
 * handshake, the event connections (heartbeats) and everything else pass
 * untouched. Driven by the environment:
 *
 *   TBON_FAULT_SEED=N      random seed (mixed with the process's rank)
 *   TBON_FAULT_FLIP=P      per frame written: flip one random bit of the
 *                          write (a copy; the sender's buffers stay intact)
 *   TBON_FAULT_RFLIP=P     per read: flip one random bit of what arrived
 *   TBON_FAULT_RESET=P     per frame written: shutdown() the socket instead
 *   TBON_FAULT_RESET_MS=T  at random, one reset per T ms on average while
 *                          armed (a Poisson process seen at the writes on
 *                          links)
 *   TBON_FAULT_DELAY=P     per write: sleep up to TBON_FAULT_DELAY_US first
 *   TBON_FAULT_RESET_STREAM=ID  shutdown() the socket instead of the first
 *                          write of a data frame of stream ID, once per
 *                          process, armed or not: one link broken where a
 *                          test chooses (the link to a stream's only
 *                          member, say)
 *   TBON_FAULT_RANKS=a,b   only in the processes of these ranks (default all;
 *                          the rank is --tbon-rank's, from /proc/self/cmdline)
 *   TBON_FAULT_ARM=FILE    only while FILE exists (looked at every 10 ms), so
 *                          that a test breaks nothing before the tree is up
 *   TBON_FAULT_LOG=FILE    one line per fault injected ("flip", "rflip",
 *                          "reset", "delay", then rank and fd), appended
 *   TBON_FAULT_LOG_WRITES=1  also one line "write RANK FD" per write of
 *                          sequenced frames while armed (no fault needed):
 *                          how many system calls a process's frames took
 *   TBON_FAULT_DIE_AT_CTL=OP  kill the process (SIGKILL) instead of the first
 *                          write of a control frame of that op (its tag,
 *                          docs/protocol.md 7.2): a node dead at an exact
 *                          point, as "after it got the port table, before it
 *                          passed it on" (TB_CTL_PORTS, 10)
 *   TBON_FAULT_DIE_AFTER_ACCEPTS=N  with TBON_FAULT_DIE_AT_CTL: that write
 *                          first waits (at most 20 s) until the process has
 *                          accepted N connections (accept4), so that, say,
 *                          its back-ends' event connections are in: each
 *                          has read the topology and can be adopted
 *
 * Not part of the library: a test tool (tests/integration/test_link.c,
 * bench/bench_link.sh).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAXFD 65536
#define HDR 48

static ssize_t (*real_sendmsg)(int, const struct msghdr *, int);
static ssize_t (*real_send)(int, const void *, size_t, int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_recv)(int, void *, size_t, int);
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_readv)(int, const struct iovec *, int);

static double p_flip, p_rflip, p_reset, p_delay;
static int delay_us = 2000, reset_ms, active, rank = -1, log_fd = -1, die_at_ctl = -1, log_writes;
static int reset_stream = -1, stream_reset_done;
static int die_after_accepts, accepted;          /* accepted: under acc_mu */
static pthread_mutex_t acc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t acc_cv = PTHREAD_COND_INITIALIZER;
static uint64_t seed = 1;
static unsigned char link_fd[MAXFD];     /* carries sequenced frames */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;  /* rng and the reset clock */
static uint64_t rng;
static int64_t last_us;      /* the last write looked at for TBON_FAULT_RESET_MS */
static const char *arm_path;
static int64_t arm_checked;
static int armed = 1;

static double env_d(const char *k)
{
    const char *v = getenv(k);
    return v && *v ? atof(v) : 0.0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t next_rand(void)
{
    /* splitmix64 */
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform(void)
{
    pthread_mutex_lock(&mu);
    double u = (double)(next_rand() >> 11) / (double)(1ull << 53);
    pthread_mutex_unlock(&mu);
    return u;
}

static uint64_t rand_below(uint64_t n)
{
    pthread_mutex_lock(&mu);
    uint64_t r = n ? next_rand() % n : 0;
    pthread_mutex_unlock(&mu);
    return r;
}

static int my_rank(void)
{
    char buf[8192];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = real_read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    for (char *p = buf; p < buf + n; p += strlen(p) + 1)
        if (strcmp(p, "--tbon-rank") == 0 && p + strlen(p) + 1 < buf + n)
            return atoi(p + strlen(p) + 1);
    return -1;
}

static void init(void)
{
    real_sendmsg = dlsym(RTLD_NEXT, "sendmsg");
    real_send = dlsym(RTLD_NEXT, "send");
    real_write = dlsym(RTLD_NEXT, "write");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_recv = dlsym(RTLD_NEXT, "recv");
    real_read = dlsym(RTLD_NEXT, "read");
    real_readv = dlsym(RTLD_NEXT, "readv");
    p_flip = env_d("TBON_FAULT_FLIP");
    p_rflip = env_d("TBON_FAULT_RFLIP");
    p_reset = env_d("TBON_FAULT_RESET");
    p_delay = env_d("TBON_FAULT_DELAY");
    if (env_d("TBON_FAULT_DELAY_US") > 0)
        delay_us = (int)env_d("TBON_FAULT_DELAY_US");
    reset_ms = (int)env_d("TBON_FAULT_RESET_MS");
    const char *dc = getenv("TBON_FAULT_DIE_AT_CTL");
    if (dc && *dc)
        die_at_ctl = atoi(dc);
    die_after_accepts = (int)env_d("TBON_FAULT_DIE_AFTER_ACCEPTS");
    const char *rs = getenv("TBON_FAULT_RESET_STREAM");
    if (rs && *rs)
        reset_stream = atoi(rs);
    if (env_d("TBON_FAULT_SEED") > 0)
        seed = (uint64_t)env_d("TBON_FAULT_SEED");
    rank = my_rank();
    const char *ranks = getenv("TBON_FAULT_RANKS");
    active = rank >= 0;     /* tree processes only (the FE's test program is not) */
    if (active && ranks && *ranks) {
        active = 0;
        for (const char *p = ranks; *p;) {
            if (atoi(p) == rank)
                active = 1;
            const char *c = strchr(p, ',');
            if (!c)
                break;
            p = c + 1;
        }
    }
    rng = seed * 0x100000001B3ull ^ (uint64_t)(rank + 1) * 0x9E3779B97F4A7C15ull;
    arm_path = getenv("TBON_FAULT_ARM");
    if (arm_path && !*arm_path)
        arm_path = NULL;
    armed = !arm_path;
    log_writes = env_d("TBON_FAULT_LOG_WRITES") > 0;
    const char *lp = getenv("TBON_FAULT_LOG");
    if (active && lp && *lp)
        log_fd = open(lp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
}

static void note(const char *what, int fd)
{
    if (log_fd < 0)
        return;
    char line[96];
    int n = snprintf(line, sizeof line, "%s %d %d\n", what, rank, fd);
    if (real_write(log_fd, line, (size_t)n) < 0) {
        /* nothing to do about it */
    }
}

/* The frames whose headers start an iov (the reactor writes header and
 * payload as separate iovs); marks fd as a link when one is sequenced. */
static int count_frames(int fd, const struct iovec *iov, int n, int *of_stream)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        const unsigned char *b = iov[i].iov_base;
        if (iov[i].iov_len != HDR || memcmp(b, "TBON", 4) != 0 || b[4] != 3)
            continue;
        uint32_t seq = (uint32_t)b[24] | (uint32_t)b[25] << 8 | (uint32_t)b[26] << 16 |
                       (uint32_t)b[27] << 24;
        if (seq && fd >= 0 && fd < MAXFD)
            link_fd[fd] = 1;
        k += seq != 0;
        uint32_t stream = (uint32_t)b[12] | (uint32_t)b[13] << 8 | (uint32_t)b[14] << 16 |
                          (uint32_t)b[15] << 24;
        if (reset_stream >= 0 && b[5] == 1 /* DATA */ && stream == (uint32_t)reset_stream)
            *of_stream = 1;
        int32_t tag = (int32_t)((uint32_t)b[16] | (uint32_t)b[17] << 8 |
                                (uint32_t)b[18] << 16 | (uint32_t)b[19] << 24);
        if (active && die_at_ctl >= 0 && b[5] == 6 /* CONTROL */ && tag == die_at_ctl) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 20;
            pthread_mutex_lock(&acc_mu);
            while (accepted < die_after_accepts &&
                   pthread_cond_timedwait(&acc_cv, &acc_mu, &until) == 0)
                ;
            pthread_mutex_unlock(&acc_mu);
            note("die", fd);
            kill(getpid(), SIGKILL);
        }
    }
    return k;
}

/* Decide for a write of n iovs on fd: 0 pass, 1 flip, 2 reset (done). */
static int decide(int fd, const struct iovec *iov, int n)
{
    pthread_once(&once, init);
    if (!active || fd < 0 || fd >= MAXFD)
        return 0;
    int of_stream = 0;
    int k = count_frames(fd, iov, n, &of_stream);
    if (!link_fd[fd] || k == 0)
        return 0;
    if (of_stream) {
        pthread_mutex_lock(&mu);
        int first = !stream_reset_done;
        stream_reset_done = 1;
        pthread_mutex_unlock(&mu);
        if (first) {
            note("reset", fd);
            shutdown(fd, SHUT_RDWR);
            return 2;
        }
    }
    if (arm_path) {
        int64_t t = now_ms();
        pthread_mutex_lock(&mu);
        if (t - arm_checked >= 10) {
            arm_checked = t;
            armed = access(arm_path, F_OK) == 0;
        }
        int on = armed;
        pthread_mutex_unlock(&mu);
        if (!on)
            return 0;
    }
    if (log_writes)
        note("write", fd);
    if (p_delay > 0 && uniform() < p_delay) {
        note("delay", fd);
        usleep((useconds_t)rand_below((uint64_t)delay_us) + 1);
    }
    int reset = p_reset > 0 && uniform() < p_reset * k;
    if (!reset && reset_ms > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
        pthread_mutex_lock(&mu);
        double p = last_us ? (double)(us - last_us) / (reset_ms * 1000.0) : 0;
        last_us = us;
        pthread_mutex_unlock(&mu);
        reset = p > 0 && uniform() < p;
    }
    if (reset) {
        note("reset", fd);
        shutdown(fd, SHUT_RDWR);
        return 2;
    }
    return p_flip > 0 && uniform() < p_flip * k;
}

/* Write iov with one random bit flipped, from a copy. */
static ssize_t flipped(int fd, const struct iovec *iov, int n, int flags)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    unsigned char *copy = malloc(total ? total : 1);
    if (!copy)
        return real_sendmsg(fd, &(struct msghdr){ .msg_iov = (struct iovec *)iov,
                                                  .msg_iovlen = (size_t)n }, flags);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        memcpy(copy + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    uint64_t bit = rand_below(total * 8);
    copy[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    note("flip", fd);
    struct iovec one = { copy, total };
    ssize_t w = real_sendmsg(fd, &(struct msghdr){ .msg_iov = &one, .msg_iovlen = 1 }, flags);
    int e = errno;
    free(copy);
    errno = e;
    return w;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    pthread_once(&once, init);
    int d = decide(fd, m->msg_iov, (int)m->msg_iovlen);
    if (d == 2) {
        errno = ECONNRESET;
        return -1;
    }
    if (d == 1 && !m->msg_name && !m->msg_controllen)
        return flipped(fd, m->msg_iov, (int)m->msg_iovlen, flags);
    return real_sendmsg(fd, m, flags);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
    pthread_once(&once, init);
    int d = decide(fd, iov, n);
    if (d == 2) {
        errno = ECONNRESET;
        return -1;
    }
    if (d == 1)
        return flipped(fd, iov, n, MSG_NOSIGNAL);
    return real_writev(fd, iov, n);
}

int accept4(int lfd, struct sockaddr *a, socklen_t *al, int flags)
{
    static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);
    if (!real_accept4)
        real_accept4 = dlsym(RTLD_NEXT, "accept4");
    pthread_once(&once, init);
    int fd = real_accept4(lfd, a, al, flags);
    if (fd >= 0 && die_after_accepts > 0) {
        pthread_mutex_lock(&acc_mu);
        accepted++;
        pthread_cond_broadcast(&acc_cv);
        pthread_mutex_unlock(&acc_mu);
    }
    return fd;
}

int close(int fd)
{
    static int (*real_close)(int);
    if (!real_close)
        real_close = dlsym(RTLD_NEXT, "close");
    if (fd >= 0 && fd < MAXFD)
        link_fd[fd] = 0;    /* the number may come back as anything */
    return real_close(fd);
}

ssize_t send(int fd, const void *b, size_t len, int flags)
{
    pthread_once(&once, init);
    return real_send(fd, b, len, flags);
}

ssize_t write(int fd, const void *b, size_t len)
{
    pthread_once(&once, init);
    return real_write(fd, b, len);
}

/* A read on a link: perhaps one bit of what arrived flipped. */
static void maybe_rflip(int fd, void *b, ssize_t got)
{
    if (got <= 0 || !active || p_rflip <= 0 || fd < 0 || fd >= MAXFD || !link_fd[fd] ||
        !armed)
        return;
    if (uniform() < p_rflip) {
        uint64_t bit = rand_below((uint64_t)got * 8);
        ((unsigned char *)b)[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        note("rflip", fd);
    }
}

ssize_t recv(int fd, void *b, size_t len, int flags)
{
    pthread_once(&once, init);
    ssize_t got = real_recv(fd, b, len, flags);
    if (!(flags & MSG_PEEK))
        maybe_rflip(fd, b, got);
    return got;
}

ssize_t read(int fd, void *b, size_t len)
{
    pthread_once(&once, init);
    ssize_t got = real_read(fd, b, len);
    maybe_rflip(fd, b, got);
    return got;
}

ssize_t readv(int fd, const struct iovec *iov, int n)
{
    pthread_once(&once, init);
    ssize_t got = real_readv(fd, iov, n);
    if (got > 0 && n > 0 && (size_t)got <= iov[0].iov_len)
        maybe_rflip(fd, iov[0].iov_base, got);
    return got;
}
