/* sock.c - TCP helpers and blocking whole-frame I/O with deadlines */
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "error.h"

int64_t tb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int tb_sock_nonblock(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
    return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
}

static void sock_tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int tb_sock_listen(uint16_t *port, tbon_error_t *err)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return tb_error_set(err, TBON_EIO, "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(*port),
                             .sin_addr.s_addr = htonl(INADDR_ANY) };
    socklen_t alen = sizeof a;
    /* A backlog of 4096: a commnode of a flat 1,024-way tree sees every child
     * connect (twice) within milliseconds. */
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4096) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
        int e = errno;
        close(fd);
        return tb_error_set(err, TBON_EIO, "cannot listen on port %u: %s", (unsigned)*port,
                            strerror(e));
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int tb_sock_accept(int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0)
        sock_tune(fd);
    return fd;
}

/* Wait for fd to become ready for ev until deadline. 0, or TBON_ETIMEOUT. */
static int wait_fd(int fd, short ev, int64_t deadline_ms)
{
    for (;;) {
        int64_t left = deadline_ms - tb_now_ms();
        if (left <= 0)
            return TBON_ETIMEOUT;
        struct pollfd p = { .fd = fd, .events = ev };
        int n = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return TBON_EIO;
    }
}

int tb_sock_connect(const char *host, uint16_t port, int64_t deadline_ms, tbon_error_t *err)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *res = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", (unsigned)port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc != 0)
        return tb_error_set(err, TBON_EIO, "cannot resolve %s: %s", host, gai_strerror(rc));
    int last = ECONNREFUSED;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
            int w = wait_fd(fd, POLLOUT, deadline_ms);
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (w == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0) {
                freeaddrinfo(res);
                tb_sock_nonblock(fd, 0);
                sock_tune(fd);
                return fd;
            }
            if (w == TBON_ETIMEOUT) {
                close(fd);
                freeaddrinfo(res);
                return tb_error_set(err, TBON_ETIMEOUT, "connecting to %s:%u timed out",
                                    host, (unsigned)port);
            }
            last = soerr ? soerr : errno;
        } else {
            last = errno;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return tb_error_set(err, TBON_EIO, "cannot connect to %s:%u: %s", host, (unsigned)port,
                        strerror(last));
}

/* Write all of buf, polling until the deadline. */
static int write_all(int fd, const uint8_t *buf, size_t len, int64_t deadline_ms)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            int w = wait_fd(fd, POLLOUT, deadline_ms);
            if (w)
                return w;
        } else {
            return TBON_EIO;
        }
    }
    return 0;
}

/* Read exactly len bytes, polling until the deadline. */
static int read_all(int fd, uint8_t *buf, size_t len, int64_t deadline_ms)
{
    while (len > 0) {
        ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (n == 0) {
            return TBON_ECLOSED;
        } else if (errno == EAGAIN || errno == EINTR) {
            int w = wait_fd(fd, POLLIN, deadline_ms);
            if (w)
                return w;
        } else {
            return TBON_EIO;
        }
    }
    return 0;
}

int tb_sock_send_frame(int fd, const tb_frame_hdr_t *h, const void *payload, size_t len,
                       int64_t deadline_ms, tbon_error_t *err)
{
    uint8_t *buf;
    size_t blen;
    int rc = tb_frame_build(h, payload, len, 0, &buf, &blen);
    if (rc)
        return tb_error_set(err, rc, "cannot build a %s frame", tb_frame_type_name(h->type));
    rc = write_all(fd, buf, blen, deadline_ms);
    free(buf);
    if (rc)
        return tb_error_set(err, rc, "sending a %s frame: %s", tb_frame_type_name(h->type),
                            rc == TBON_ETIMEOUT ? "timed out" : strerror(errno));
    return 0;
}

int tb_sock_recv_frame(int fd, uint32_t max, tb_frame_t *f, int64_t deadline_ms,
                       tbon_error_t *err)
{
    uint8_t hdr[TB_FRAME_HDR_SIZE];
    memset(f, 0, sizeof *f);
    int rc = read_all(fd, hdr, sizeof hdr, deadline_ms);
    if (rc)
        goto io;
    /* The length field sits at offset 8 (docs/protocol.md); the decoder
     * validates everything else. */
    uint32_t len = (uint32_t)hdr[8] | (uint32_t)hdr[9] << 8 | (uint32_t)hdr[10] << 16 |
                   (uint32_t)hdr[11] << 24;
    if (len > max)
        return tb_error_set(err, TBON_EFORMAT, "frame of %u bytes, more than the %u allowed",
                            len, max);
    tb_fdec_t *d = tb_fdec_new(max);
    if (!d)
        return tb_error_set(err, TBON_ENOMEM, "out of memory");
    uint8_t *payload = len ? malloc(len) : NULL;
    if (len && !payload) {
        tb_fdec_destroy(d);
        return tb_error_set(err, TBON_ENOMEM, "out of memory");
    }
    rc = read_all(fd, payload, len, deadline_ms);
    if (rc) {
        free(payload);
        tb_fdec_destroy(d);
        goto io;
    }
    tb_fdec_feed(d, hdr, sizeof hdr);
    tb_fdec_feed(d, payload, len);
    free(payload);
    rc = tb_fdec_next(d, f);
    if (rc != 1) {
        rc = tb_error_set(err, TBON_EFORMAT, "bad frame: %s", tb_fdec_error(d));
        tb_fdec_destroy(d);
        return rc;
    }
    tb_fdec_destroy(d);
    return 0;
io:
    if (rc == TBON_ETIMEOUT)
        return tb_error_set(err, rc, "timed out waiting for a frame");
    if (rc == TBON_ECLOSED)
        return tb_error_set(err, rc, "connection closed by the peer");
    return tb_error_set(err, rc, "receiving a frame: %s", strerror(errno));
}
