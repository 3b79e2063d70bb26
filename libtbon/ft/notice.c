/* notice.c - the fast failure notice (seed 002 section 3, "high
 * priority monitoring"): a datagram from a detector straight to the FE,
 * authenticated with the session secret, so the FE hears of a failure before
 * the report has climbed the tree (docs/protocol.md 9.3). */
#include "ft/ft_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "util/log.h"
#include "codec/packet_int.h"
#include "util/endian.h"
#include "net/sock.h"
#include "topo/reconfig.h"

/* ---- failure notices (docs/protocol.md 9.3) ---- */

#define NOTICE_MAGIC 0x464E4254u     /* "TBNF" */
#define NOTICE_SIZE  (40 + crypto_auth_hmacsha256_BYTES)

/* The notice socket is readable (the FE's loop). */
static void on_notice_io(tb_io_t *io, uint32_t events)
{
    (void)events;
    tb_view_on_notices(io->arg);
}

int tb_view_open_notices(tb_node_t *n)
{
    /* Where the FE's TCP port is: IPv6 and IPv4 on one socket where the host
     * has IPv6 (as tb_sock_listen), else IPv4. */
    int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = -1;
    if (fd >= 0) {
        int zero = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(n->port),
                                   .sin6_addr = IN6ADDR_ANY_INIT };
        rc = bind(fd, (struct sockaddr *)&a6, sizeof a6);
        if (rc < 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(n->port),
                                 .sin_addr.s_addr = htonl(INADDR_ANY) };
        rc = fd >= 0 ? bind(fd, (struct sockaddr *)&a, sizeof a) : -1;
    }
    if (rc < 0) {
        TB_WARN("view", "no socket for failure notices on UDP port %u (%s): the FE hears of "
                "failures through the tree only", (unsigned)n->port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct tb_ft *ft = n->ftst;
    ft->nfd_io = (tb_io_t){ .fd = fd, .fn = on_notice_io, .arg = n };
    if (tb_loop_watch(n->loop, &ft->nfd_io, EPOLLIN) < 0) {
        close(fd);
        return -1;
    }
    ft->nfd = fd;
    return 0;
}

void tb_view_notice_setup(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    uint16_t port = tb_topology_port(n->topo, 0);
    if (n->role == TB_ROLE_FE || ft->fe_addr_ok || !port)
        return;
    /* The FE on our own topology host is reached over the loopback, as
     * children reach parents (docs/protocol.md 7.1); elsewhere at what its
     * topology host name resolves to here, IPv4 or IPv6. */
    if (tb_topology_host_index(n->topo, 0) == tb_topology_host_index(n->topo, n->rank)) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ft->fe_addr;
        memset(a, 0, sizeof *a);
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ft->fe_addr_len = sizeof *a;
    } else {
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM }, *res = NULL;
        char ps[8];
        snprintf(ps, sizeof ps, "%u", (unsigned)port);
        if (getaddrinfo(tb_topology_host(n->topo, 0), ps, &hints, &res) != 0 || !res ||
            res->ai_addrlen > sizeof ft->fe_addr) {
            TB_WARN("view", "cannot resolve the FE's host %s: no failure notices from here",
                    tb_topology_host(n->topo, 0));
            if (res)
                freeaddrinfo(res);
            return;
        }
        memcpy(&ft->fe_addr, res->ai_addr, res->ai_addrlen);
        ft->fe_addr_len = res->ai_addrlen;
        freeaddrinfo(res);
    }
    ft->nfd = socket(ft->fe_addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ft->nfd < 0)
        return;
    ft->fe_addr_ok = 1;
}

void tb_view_notice(tb_node_t *n, tbon_rank_t r, uint32_t inc)
{
    struct tb_ft *ft = n->ftst;
    if (n->role == TB_ROLE_FE || !ft->fe_addr_ok || tb_node_ending(n))
        return;
    uint8_t b[NOTICE_SIZE] = { 0 };
    tb_put32(b, NOTICE_MAGIC);
    b[4] = 1;                           /* version */
    tb_put64(b + 8, n->cfg.session.id);
    tb_put32(b + 16, n->rank);
    tb_put32(b + 20, r);
    tb_put32(b + 24, inc);
    tb_put32(b + 28, tb_topology_incarnation(n->topo, n->rank));   /* the detector's */
    uint64_t nonce = 0;
    if (tb_crypto_init(NULL) == 0)      /* done by the handshakes already */
        randombytes_buf(&nonce, sizeof nonce);
    tb_put64(b + 32, nonce);
    crypto_auth_hmacsha256(b + 40, b, 40, n->cfg.session.secret);
    if (sendto(ft->nfd, b, sizeof b, MSG_DONTWAIT, (struct sockaddr *)&ft->fe_addr,
               ft->fe_addr_len) < 0)
        TB_DEBUG("view", "failure notice not sent: %s", strerror(errno));
}

void tb_view_on_notices(tb_node_t *n)
{
    uint8_t b[NOTICE_SIZE + 1], mac[crypto_auth_hmacsha256_BYTES];
    for (int budget = 0; budget < 256; budget++) {
        ssize_t len = recv(n->ftst->nfd, b, sizeof b, MSG_DONTWAIT);
        if (len < 0)
            return;
        /* Anything not a notice of this session, signed with its secret, is
         * dropped without a word: the port is open to anyone. */
        if (len != NOTICE_SIZE || tb_get32(b) != NOTICE_MAGIC || b[4] != 1 ||
            tb_get64(b + 8) != n->cfg.session.id)
            continue;
        crypto_auth_hmacsha256(mac, b, 40, n->cfg.session.secret);
        if (sodium_memcmp(mac, b + 40, sizeof mac) != 0)
            continue;
        tbon_rank_t from = tb_get32(b + 16), r = tb_get32(b + 20);
        uint32_t inc = tb_get32(b + 24);
        if (r == 0 || r >= tb_topology_size(n->topo) || !n->ftst->ft_ready || tb_node_ending(n))
            continue;
        /* A detector we have fenced is not believed: woken up, it sees its
         * children gone (adopted elsewhere) and would call them dead. */
        if (from >= tb_topology_size(n->topo) || !tb_topology_alive(n->topo, from))
            continue;
        /* Nor is the old process of a rank restarted since (it wakes up to
         * the same). */
        if (tb_inc_gen(tb_get32(b + 28)) < tb_inc_gen(tb_topology_incarnation(n->topo, from)))
            continue;
        /* A replay is harmless: a failure is final, and an old incarnation's
         * says nothing new. */
        char how[64];
        snprintf(how, sizeof how, "notice from rank %u", from);
        tb_ft_failed(n, r, inc, how);
    }
}

