/* sock.c - TCP helpers and blocking whole-frame I/O with deadlines */
#include "net/sock.h"

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"
#include "util/log.h"

int tb_sock_nonblock(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK)) == 0)
        return 0;
    TB_WARN("net", "fd %d: cannot make it %sblocking: %s", fd, on ? "non-" : "", strerror(errno));
    return TBON_EIO;
}

/* Every tree connection: no Nagle delay, and TCP keepalive (probes after
 * 10 s idle, every 5 s, 3 unanswered end it), so that a peer whose host or
 * network is gone is found on a quiet connection even without heartbeats.
 * A stopped process's kernel answers the probes: a paused peer is never
 * taken for a dead one here (heartbeats and suspicion judge it: docs/
 * protocol.md 8.5). TCP_USER_TIMEOUT is not set, for the same reason: on
 * Linux it also ends a connection whose peer's window stays shut, which is
 * what a paused reader's is. */
#define TB_KEEPIDLE_S 10
#define TB_KEEPINTVL_S 5
#define TB_KEEPCNT 3
static void sock_tune(int fd)
{
    int one = 1, idle = TB_KEEPIDLE_S, intvl = TB_KEEPINTVL_S, cnt = TB_KEEPCNT;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

int tb_sock_unacked_ms(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
        return -1;
    if (!ti.tcpi_unacked || !ti.tcpi_retransmits)
        return 0;
    return ti.tcpi_last_ack_recv > INT_MAX ? INT_MAX : (int)ti.tcpi_last_ack_recv;
}

/* Bind and listen on fd (family's wildcard address, *port); 0, or TBON_EIO
 * with errno saying why. */
static int bind_listen(int fd, int family, uint16_t *port)
{
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_storage ss = { 0 };
    socklen_t alen;
    if (family == AF_INET6) {
        /* Both families on one socket: IPv4 peers arrive as ::ffff:a.b.c.d. */
        int zero = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(*port);
        a->sin6_addr = in6addr_any;
        alen = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(*port);
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        alen = sizeof *a;
    }
    /* A backlog of 4096: a commnode of a flat 1,024-way tree sees every child
     * connect (twice) within milliseconds. */
    if (bind(fd, (struct sockaddr *)&ss, alen) < 0 || listen(fd, 4096) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &alen) < 0)
        return TBON_EIO;
    *port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                     : ((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

int tb_sock_listen(uint16_t *port, tbon_error_t *err)
{
    /* IPv6 and IPv4 together where the host has IPv6; IPv4 alone where it
     * does not (a kernel without it, or ipv6.disable=1). */
    int e = EAFNOSUPPORT;
    for (int i = 0; i < 2; i++) {
        int family = i == 0 ? AF_INET6 : AF_INET;
        int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            e = errno;
            continue;
        }
        if (bind_listen(fd, family, port) == 0)
            return fd;
        e = errno;
        close(fd);
        if (family == AF_INET6 && e != EAFNOSUPPORT && e != EADDRNOTAVAIL)
            break;
    }
    return tb_error_set(err, TBON_EIO, "cannot listen on port %u: %s", (unsigned)*port,
                        strerror(e));
}

void tb_sock_format_hostport(const char *host, uint16_t port, char *out, size_t len)
{
    snprintf(out, len, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, (unsigned)port);
}

int tb_sock_addr_string(const struct sockaddr *sa, char *out, size_t len)
{
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a))   /* an IPv4 peer on a dual-stack socket */
            return inet_ntop(AF_INET, &a->s6_addr[12], out, (socklen_t)len) ? 0 : TBON_EINVAL;
        return inet_ntop(AF_INET6, a, out, (socklen_t)len) ? 0 : TBON_EINVAL;
    }
    if (sa->sa_family == AF_INET)
        return inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
                         out, (socklen_t)len) ? 0 : TBON_EINVAL;
    return TBON_EINVAL;
}

/* The first address of interface name in family (AF_UNSPEC: IPv4 first). */
static int iface_address(const char *name, int family, char *out, size_t len)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return TBON_EIO;
    int rc = TBON_ENOTFOUND;
    for (int pass = 0; pass < 2 && rc; pass++) {
        int want = family != AF_UNSPEC ? family : pass == 0 ? AF_INET : AF_INET6;
        for (struct ifaddrs *i = ifs; i && rc; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != want || strcmp(i->ifa_name, name))
                continue;
            if (want == AF_INET6 &&
                IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr))
                continue;   /* needs a scope the peer cannot know */
            rc = tb_sock_addr_string(i->ifa_addr, out, len);
        }
    }
    freeifaddrs(ifs);
    return rc;
}

int tb_sock_route_addr(const tb_config_t *conf, const char *host, char *out, size_t len,
                       tbon_error_t *err)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM };
    struct addrinfo *res = NULL;
    const char *iface = conf ? conf->iface : NULL;
    if (len)
        out[0] = 0;
    if (iface && *iface) {
        /* An address of this host, or the name of one of its interfaces. */
        struct addrinfo nh = { .ai_family = AF_UNSPEC, .ai_flags = AI_NUMERICHOST };
        if (getaddrinfo(iface, NULL, &nh, &res) == 0) {
            freeaddrinfo(res);
            snprintf(out, len, "%s", iface);
            return 0;
        }
        if (if_nametoindex(iface) == 0)
            return tb_error_set(err, TBON_EINVAL, "TBON_IFACE=%s is neither an address nor "
                                "an interface of this host", iface);
        /* The family the child's host resolves to, if it resolves. */
        int family = AF_UNSPEC;
        if (host && getaddrinfo(host, NULL, &hints, &res) == 0) {
            family = res->ai_family;
            freeaddrinfo(res);
        }
        if (iface_address(iface, family, out, len) == 0 ||
            (family != AF_UNSPEC && iface_address(iface, AF_UNSPEC, out, len) == 0))
            return 0;
        return tb_error_set(err, TBON_EINVAL, "TBON_IFACE=%s: the interface has no usable "
                            "address", iface);
    }
    int rc = getaddrinfo(host, "9", &hints, &res);
    if (rc != 0)
        return tb_error_set(err, TBON_EIO, "cannot resolve host %s: %s", host,
                            gai_strerror(rc));
    /* Ask the kernel which of our addresses it would send from: connecting a
     * UDP socket chooses the route and the source address, and sends
     * nothing. */
    int e = ENETUNREACH;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            e = errno;
            continue;
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
            tb_sock_addr_string((struct sockaddr *)&ss, out, len) == 0) {
            close(fd);
            freeaddrinfo(res);
            return 0;
        }
        e = errno;
        close(fd);
    }
    freeaddrinfo(res);
    return tb_error_set(err, TBON_EIO, "no route to host %s: %s", host, strerror(e));
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

/* Wait for fd's connect to end by deadline_ms. 0 with fd blocking and
 * tuned; else TBON_ETIMEOUT, or TBON_EIO with *last the reason. fd is kept. */
static int connect_wait(int fd, int64_t deadline_ms, int *last)
{
    int w = wait_fd(fd, POLLOUT, deadline_ms);
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (w == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0) {
        tb_sock_nonblock(fd, 0);
        sock_tune(fd);
        return 0;
    }
    if (w == TBON_ETIMEOUT)
        return w;
    *last = soerr ? soerr : errno;
    return TBON_EIO;
}

static int connect_failed(const char *host, uint16_t port, int last, tbon_error_t *err)
{
    int code = tb_error_set(err, TBON_EIO, "cannot connect to %s:%u: %s", host, (unsigned)port,
                            strerror(last));
    errno = last;       /* for the caller: ECONNREFUSED says nobody listens there */
    return code;
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
            int w = connect_wait(fd, deadline_ms, &last);
            if (w == 0) {
                freeaddrinfo(res);
                return fd;
            }
            if (w == TBON_ETIMEOUT) {
                close(fd);
                freeaddrinfo(res);
                return tb_error_set(err, TBON_ETIMEOUT, "connecting to %s:%u timed out",
                                    host, (unsigned)port);
            }
        } else {
            last = errno;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return connect_failed(host, port, last, err);
}

int tb_sock_connect_begin(const char *ip, uint16_t port, int *connected, tbon_error_t *err)
{
    if (connected)
        *connected = 0;
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
    if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1)
        return tb_error_set(err, TBON_EINVAL, "not an IPv4 address: %s", ip);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return connect_failed(ip, port, errno, err);
    if (connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0 && errno != EINPROGRESS) {
        int last = errno;
        close(fd);
        return connect_failed(ip, port, last, err);
    }
    /* On loopback a refusal is usually known by now: say so without a wait. */
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (poll(&p, 1, 0) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0) {
        if (soerr) {
            close(fd);
            return connect_failed(ip, port, soerr, err);
        }
        if (connected && (p.revents & POLLOUT)) {
            tb_sock_nonblock(fd, 0);        /* as _end leaves it */
            sock_tune(fd);
            *connected = 1;
        }
    }
    return fd;
}

int tb_sock_connect_end(int fd, const char *ip, uint16_t port, int64_t deadline_ms,
                        tbon_error_t *err)
{
    int last = ECONNREFUSED, w = connect_wait(fd, deadline_ms, &last);
    if (w == 0)
        return fd;
    close(fd);
    if (w == TBON_ETIMEOUT)
        return tb_error_set(err, TBON_ETIMEOUT, "connecting to %s:%u timed out", ip,
                            (unsigned)port);
    return connect_failed(ip, port, last, err);
}

/* ---- dialling several endpoints (tb_dial_t) ---- */

enum { DIAL_IDLE, DIAL_PENDING, DIAL_UP, DIAL_OVER };

/* Start endpoint i: its first address that takes the connect (a name's
 * addresses in the resolver's order; a numeric one asks no resolver). */
static void dial_start(tb_dial_t *d, size_t i, int64_t now)
{
    d->st[i] = DIAL_OVER;
    d->next_at = now;                   /* the next at once, unless under way */
    if (!d->port[i] || !d->host[i])
        return;                         /* nobody listens there */
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV };
    struct addrinfo *res = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", (unsigned)d->port[i]);
    if (getaddrinfo(d->host[i], ps, &hints, &res) != 0)
        return;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            tb_sock_nonblock(fd, 0);
            sock_tune(fd);
            d->fd[i] = fd;
            d->st[i] = DIAL_UP;
            break;
        }
        if (errno == EINPROGRESS) {
            d->fd[i] = fd;
            d->st[i] = DIAL_PENDING;
            d->until[i] = now + d->timeout_ms;
            d->next_at = now + d->stagger_ms;
            break;
        }
        close(fd);
    }
    freeaddrinfo(res);
}

void tb_sock_dial_adopt(tb_dial_t *d, size_t i, int fd, int connected)
{
    int64_t now = tb_now_ms();
    d->fd[i] = fd;
    d->st[i] = connected ? DIAL_UP : DIAL_PENDING;
    d->until[i] = now + d->timeout_ms;
    d->next_at = now + d->stagger_ms;
    d->next = i + 1;
}

int tb_sock_dial_next(tb_dial_t *d, size_t *which)
{
    for (;;) {
        size_t npend = 0;
        for (size_t i = 0; i < d->next; i++) {
            if (d->st[i] == DIAL_UP) {
                d->st[i] = DIAL_OVER;
                *which = i;
                return d->fd[i];
            }
            npend += d->st[i] == DIAL_PENDING;
        }
        int64_t now = tb_now_ms();
        if (d->next < d->k && (npend == 0 || now >= d->next_at)) {
            dial_start(d, d->next, now);
            d->next++;
            continue;
        }
        if (npend == 0)
            return -1;
        struct pollfd p[TB_DIAL_MAX];
        size_t idx[TB_DIAL_MAX], n = 0;
        int64_t due = d->next < d->k ? d->next_at : INT64_MAX;
        for (size_t i = 0; i < d->next; i++) {
            if (d->st[i] != DIAL_PENDING)
                continue;
            if (d->until[i] <= now) {           /* no answer in time */
                close(d->fd[i]);
                d->st[i] = DIAL_OVER;
                d->next_at = now;
                continue;
            }
            if (d->until[i] < due)
                due = d->until[i];
            p[n] = (struct pollfd){ .fd = d->fd[i], .events = POLLOUT };
            idx[n++] = i;
        }
        if (n == 0)
            continue;
        int rc = poll(p, n, (int)(due - now) + 1);
        if (rc < 0 && errno != EINTR)
            rc = 0;
        for (size_t j = 0; rc > 0 && j < n; j++) {
            if (!p[j].revents)
                continue;
            size_t i = idx[j];
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (getsockopt(p[j].fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0 &&
                (p[j].revents & POLLOUT)) {
                tb_sock_nonblock(p[j].fd, 0);
                sock_tune(p[j].fd);
                d->st[i] = DIAL_UP;
            } else {                            /* refused: the next now */
                close(p[j].fd);
                d->st[i] = DIAL_OVER;
                d->next_at = 0;
            }
        }
    }
}

void tb_sock_dial_end(tb_dial_t *d)
{
    for (size_t i = 0; i < d->next && i < TB_DIAL_MAX; i++) {
        if (d->st[i] == DIAL_PENDING || d->st[i] == DIAL_UP)
            close(d->fd[i]);
        d->st[i] = DIAL_OVER;
    }
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
