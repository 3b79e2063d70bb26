/* sock.h - TCP helpers: listening, connecting with a deadline, and whole-frame
 * blocking I/O for the few places that talk before a reactor owns the socket */
#ifndef TB_SOCK_H
#define TB_SOCK_H

#include <stddef.h>
#include <stdint.h>

#include <tbon/tbon.h>

#include "codec/wire.h"
#include "util/clock.h"   /* tb_now_ms: every deadline here is on it */
#include "util/config.h"

/* Milliseconds on the monotonic clock. */

/* Set O_NONBLOCK (on = 1) or clear it. Returns 0, or TBON_EIO with a warning
 * naming the fd and the reason (the one error convention: docs/architecture.md). */
int tb_sock_nonblock(int fd, int on);

/* A listening TCP socket on all interfaces, IPv6 and IPv4 (IPv4 alone where
 * the host has no IPv6), port 0 = any; *port gets the
 * bound port. Non-blocking, close-on-exec. Returns the fd or TBON_EIO. */
int tb_sock_listen(uint16_t *port, tbon_error_t *err);

/* The address of this host that host reaches it at: where the kernel routes
 * packets for host from (a UDP socket's source once connected; nothing is
 * sent), numeric (IPv4 dotted, IPv6 without brackets). conf's TBON_IFACE,
 * when set, chooses instead: an address of this host, or an interface whose
 * address (of host's family where it has one) is taken (conf NULL: nothing
 * set). 0, or TBON_EIO (host does not resolve, no route) / TBON_EINVAL (a
 * bad TBON_IFACE) with err. */
int tb_sock_route_addr(const tb_config_t *conf, const char *host, char *out, size_t len,
                       tbon_error_t *err);

/* "host:port", or "[host]:port" for an IPv6 address. */
void tb_sock_format_hostport(const char *host, uint16_t port, char *out, size_t len);

/* A socket address as a numeric string (an IPv4-mapped IPv6 address as its
 * IPv4 form). 0, or TBON_EINVAL for another family. */
struct sockaddr;
int tb_sock_addr_string(const struct sockaddr *sa, char *out, size_t len);

/* Connect to host:port (name or address) before deadline_ms (tb_now_ms
 * scale). Returns a blocking, close-on-exec, TCP_NODELAY fd, or TBON_EIO /
 * TBON_ETIMEOUT with err naming host:port and the reason. */
int tb_sock_connect(const char *host, uint16_t port, int64_t deadline_ms, tbon_error_t *err);

/* tb_sock_connect in two steps, for an IPv4 address: _begin starts the
 * connect and returns the fd (non-blocking, connecting or connected), or
 * TBON_EIO with errno ECONNREFUSED when the refusal is already known (a
 * closed port on this host), *connected (if not NULL) set to 1 when the
 * connection is made already (on loopback, usually): fd is then as _end
 * would return it (blocking, tuned), and _end is not needed. _end waits
 * for the connect until deadline_ms and returns fd as tb_sock_connect
 * would, or closes it and says why. */
int tb_sock_connect_begin(const char *ip, uint16_t port, int *connected, tbon_error_t *err);
int tb_sock_connect_end(int fd, const char *ip, uint16_t port, int64_t deadline_ms,
                        tbon_error_t *err);

/* Connecting to the first that answers of up to TB_DIAL_MAX endpoints, in
 * order of preference (an orphan's candidate adopters). The first is tried
 * alone; each next one is started as well when the ones under way have
 * failed, or have had stagger_ms without an answer: a host that is down (or
 * an address that leads nowhere) drops the attempt without a word, and
 * would otherwise cost the whole connect timeout before the next is tried.
 * Each attempt ends after timeout_ms. Set host[], port[] and k (port 0:
 * skipped), the rest zero, then call tb_sock_dial_next for a connected fd
 * (blocking, tuned, as tb_sock_connect returns it) and its index in *which,
 * the lowest index among those connected; again for the next (the first
 * refused at a higher level), or -1 when every one has failed. Attempts
 * still under way, and connections not taken, are closed by
 * tb_sock_dial_end. */
#define TB_DIAL_MAX 16
typedef struct tb_dial {
    size_t      k;
    const char *host[TB_DIAL_MAX];
    uint16_t    port[TB_DIAL_MAX];
    int         stagger_ms, timeout_ms;
    /* the dial's own */
    size_t      next;                   /* the next to start */
    int         fd[TB_DIAL_MAX];        /* valid when st is pending or up */
    uint8_t     st[TB_DIAL_MAX];        /* 0 not started, 1 pending, 2 up, 3 over */
    int64_t     until[TB_DIAL_MAX];
    int64_t     next_at;                /* when the next may start */
} tb_dial_t;

/* Give the dial a connection to endpoint i begun already (fd from
 * tb_sock_connect_begin, connected or not), before the first
 * tb_sock_dial_next; i must be the next to start. */
void tb_sock_dial_adopt(tb_dial_t *d, size_t i, int fd, int connected);
int tb_sock_dial_next(tb_dial_t *d, size_t *which);
void tb_sock_dial_end(tb_dial_t *d);

/* Accept one connection (non-blocking, close-on-exec, TCP_NODELAY); -1 if
 * none is waiting. */
int tb_sock_accept(int lfd);

/* How long the peer's kernel has left what we sent on TCP socket fd without
 * an acknowledgement (ms): the time since anything came from it, when data
 * is outstanding and TCP has already sent some of it again (a
 * retransmission timeout passed without progress); 0 when nothing is
 * outstanding or it is not yet overdue; -1 for a socket that is not TCP.
 * A stopped or starved process's kernel acknowledges for it: this finds a
 * cut link or a dead host, never a paused process (docs/protocol.md 8.5). */
int tb_sock_unacked_ms(int fd);

/* Write a whole frame (header built from h, payload) on a blocking or
 * non-blocking fd, waiting with poll until deadline_ms. 0 or TBON_EIO /
 * TBON_ETIMEOUT. */
int tb_sock_send_frame(int fd, const tb_frame_hdr_t *h, const void *payload, size_t len,
                       int64_t deadline_ms, tbon_error_t *err);

/* Read exactly one frame, reading no byte beyond it (so the socket can be
 * handed to a reactor afterwards), with payload at most max bytes. Fills *f
 * (release with tb_frame_release). 0, TBON_EIO, TBON_ECLOSED, TBON_EFORMAT
 * or TBON_ETIMEOUT. */
int tb_sock_recv_frame(int fd, uint32_t max, tb_frame_t *f, int64_t deadline_ms,
                       tbon_error_t *err);

#endif
