/* notice.c - the fast failure notice (seed 002 section 3, "high
 * priority monitoring"): a datagram from a detector straight to the FE,
 * authenticated with the session secret, so the FE hears of a failure before
 * the report has climbed the tree; and the same way for suspicions, which
 * the FE answers with its verdict (docs/protocol.md 9.3). */
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

#include "util/clock.h"
#include "util/log.h"
#include "codec/packet_int.h"
#include "util/endian.h"
#include "net/sock.h"
#include "topo/reconfig.h"

/* ---- failure notices (docs/protocol.md 9.3) ---- */

#define NOTICE_MAGIC 0x464E4254u     /* "TBNF" */
#define NOTICE_SIZE  (40 + crypto_auth_hmacsha256_BYTES)
_Static_assert(NOTICE_SIZE == TB_NOTICE_SIZE, "TB_NOTICE_SIZE");

/* The notice socket and what was sent and taken on it. */
struct tb_notice {
    tb_ft_ctx_t *cx;
    tb_suspect_t *sp;
    int        nfd;           /* UDP: the FE receives failure notices on it (in
                                 the node's loop: io), the others send them
                                 from it; -1: none */
    tb_io_t    io;
    uint64_t   notice_out;    /* the sequence of the last notice sent */
    uint64_t   verdict_in;    /* the sequence of the last verdict taken */
    int64_t    nt_win;        /* within_budget(): the current window (ms) */
    uint32_t   nt_macs;       /* HMACs checked in it */
    uint16_t  *nt_from;       /* per sender rank: notices taken in it */
    size_t     nnt_from;
    uint64_t   nt_over;       /* notices dropped unchecked, over a budget */
    struct sockaddr_storage fe_addr; /* the FE's notice address */
    socklen_t  fe_addr_len;
    int        fe_addr_ok;
    uint64_t  *notice_seq;    /* FE, per rank: the last notice sequence taken
                                 from it (replays are dropped) */
    size_t     nnotice_seq;
};

tb_notice_t *tb_notice_new(tb_ft_ctx_t *cx, tb_suspect_t *sp)
{
    tb_notice_t *nt = calloc(1, sizeof *nt);
    if (!nt)
        return NULL;
    nt->cx = cx;
    nt->sp = sp;
    nt->nfd = -1;
    return nt;
}

void tb_notice_destroy(tb_notice_t *nt)
{
    if (!nt)
        return;
    if (nt->nfd >= 0)
        close(nt->nfd);
    free(nt->nt_from);
    free(nt->notice_seq);
    free(nt);
}

/* The notice socket is readable (the node's loop). */
static void on_notice_io(tb_io_t *io, uint32_t events);

static int open_notices_at(tb_notice_t *nt, uint16_t port, int quiet);

int tb_notice_open(tb_notice_t *nt, int *lfd, uint16_t *port)
{
    /* The UDP port is the FE's TCP port, which the kernel chose free for TCP
     * only: another process's UDP socket may hold that number (seen in the
     * suite, where hundreds of nodes each send notices from an ephemeral UDP
     * port). Before anyone knows the port, take another pair. */
    for (int i = 0; i < 16 && *lfd >= 0; i++) {
        if (open_notices_at(nt, *port, 1) == 0)
            return 0;
        if (errno != EADDRINUSE)
            break;
        uint16_t p = 0;
        int fd = tb_sock_listen(&p, NULL);
        if (fd < 0)
            break;
        TB_DEBUG("view", "UDP port %u taken: listening on %u instead", (unsigned)*port,
                 (unsigned)p);
        close(*lfd);
        *lfd = fd;
        *port = p;
    }
    return open_notices_at(nt, *port, 0);
}

static int open_notices_at(tb_notice_t *nt, uint16_t port, int quiet)
{
    /* Where the FE's TCP port is: IPv6 and IPv4 on one socket where the host
     * has IPv6 (as tb_sock_listen), else IPv4. */
    int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = -1;
    if (fd >= 0) {
        int zero = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(port),
                                   .sin6_addr = IN6ADDR_ANY_INIT };
        rc = bind(fd, (struct sockaddr *)&a6, sizeof a6);
        if (rc < 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_ANY) };
        rc = fd >= 0 ? bind(fd, (struct sockaddr *)&a, sizeof a) : -1;
    }
    if (rc < 0) {
        int e = errno;
        if (!quiet)
            TB_WARN("view", "no socket for failure notices on UDP port %u (%s): the FE hears of "
                    "failures through the tree only", (unsigned)port, strerror(e));
        if (fd >= 0)
            close(fd);
        errno = e;
        return TBON_EIO;
    }
    nt->io = (tb_io_t){ .fd = fd, .fn = on_notice_io, .arg = nt };
    if (nt->cx->nd.ops->watch(nt->cx->nd.n, &nt->io) < 0) {
        close(fd);
        return TBON_EIO;
    }
    nt->nfd = fd;
    return 0;
}

/* The FE's notice address, from the topology: 0, or -1 if it cannot be. */
static int fe_address(tb_notice_t *nt, uint16_t port)
{
    const tb_nft_t *nd = &nt->cx->nd;
    /* The FE on our own topology host is reached over the loopback, as
     * children reach parents (docs/protocol.md 7.1); elsewhere at what its
     * topology host name resolves to here, IPv4 or IPv6. */
    if (tb_topology_host_index(nd->topo, 0) == tb_topology_host_index(nd->topo, nd->rank)) {
        struct sockaddr_in *a = (struct sockaddr_in *)&nt->fe_addr;
        memset(a, 0, sizeof *a);
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        nt->fe_addr_len = sizeof *a;
        return 0;
    }
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM }, *res = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", (unsigned)port);
    if (getaddrinfo(tb_topology_host(nd->topo, 0), ps, &hints, &res) != 0 || !res ||
        res->ai_addrlen > sizeof nt->fe_addr) {
        TB_WARN("view", "cannot resolve the FE's host %s: no failure notices from here",
                tb_topology_host(nd->topo, 0));
        if (res)
            freeaddrinfo(res);
        return TBON_ENOTFOUND;
    }
    memcpy(&nt->fe_addr, res->ai_addr, res->ai_addrlen);
    nt->fe_addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

void tb_notice_setup(tb_notice_t *nt)
{
    tb_ft_ctx_t *cx = nt->cx;
    uint16_t port = tb_topology_port(cx->nd.topo, 0);
    if (tb_ft_is_fe(cx) || nt->fe_addr_ok || !port || fe_address(nt, port) != 0)
        return;
    nt->nfd = socket(nt->fe_addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (nt->nfd < 0)
        return;
    /* The FE's verdicts on our suspicions come back to it. */
    nt->io = (tb_io_t){ .fd = nt->nfd, .fn = on_notice_io, .arg = nt };
    if (cx->nd.ops->watch(cx->nd.n, &nt->io) < 0)
        TB_WARN("view", "the FE's verdicts cannot be read: suspicions of the parent wait longer");
    nt->fe_addr_ok = 1;
    tb_eds_set_verdicts(cx->eds, 1);
}

/* A notice (version 2): magic, version, kind, verdict, the session, the
 * sender, the rank it is about and its incarnation, the sender's own
 * incarnation, the sender's sequence number (replays are dropped), and the
 * HMAC of all that. */
void tb_notice_encode(uint8_t *b, const tb_session_t *s, int kind, int verdict,
                      tbon_rank_t from, uint32_t from_inc, tbon_rank_t r, uint32_t inc,
                      uint64_t seq)
{
    memset(b, 0, NOTICE_SIZE);
    tb_put32(b, NOTICE_MAGIC);
    b[4] = 2;                           /* version */
    b[5] = (uint8_t)kind;
    b[6] = (uint8_t)verdict;
    tb_put64(b + 8, s->id);
    tb_put32(b + 16, from);
    tb_put32(b + 20, r);
    tb_put32(b + 24, inc);
    tb_put32(b + 28, from_inc);
    tb_put64(b + 32, seq);
    crypto_auth_hmacsha256(b + 40, b, 40, s->secret);
}

static void notice_fill(tb_notice_t *nt, uint8_t b[NOTICE_SIZE], int kind, int verdict,
                        tbon_rank_t r, uint32_t inc)
{
    const tb_nft_t *nd = &nt->cx->nd;
    /* Increasing within the process (the incarnation tells processes apart):
     * the clock, or one more than the last if the clock has not moved. */
    uint64_t seq = (uint64_t)tb_now_us();
    if (seq <= nt->notice_out)
        seq = nt->notice_out + 1;
    nt->notice_out = seq;
    tb_notice_encode(b, nd->session, kind, verdict, nd->rank,
                     tb_topology_incarnation(nd->topo, nd->rank), r, inc, seq);
}

void tb_notice_send(tb_notice_t *nt, int kind, tbon_rank_t r, uint32_t inc)
{
    if (tb_ft_is_fe(nt->cx) || !nt->fe_addr_ok || tb_ft_ending(nt->cx))
        return;
    uint8_t b[NOTICE_SIZE];
    notice_fill(nt, b, kind, 0, r, inc);
    if (sendto(nt->nfd, b, sizeof b, MSG_DONTWAIT, (struct sockaddr *)&nt->fe_addr,
               nt->fe_addr_len) < 0)
        TB_DEBUG("view", "notice not sent: %s", strerror(errno));
}

void tb_notice_failed(tb_notice_t *nt, tbon_rank_t r, uint32_t inc)
{
    tb_notice_send(nt, TB_NOTICE_FAILED, r, inc);
}

void tb_notice_verdict(tb_notice_t *nt, const void *addr, socklen_t alen, tbon_rank_t r,
                       uint32_t inc, int verdict)
{
    if (!tb_ft_is_fe(nt->cx) || nt->nfd < 0 || !addr)
        return;
    uint8_t b[NOTICE_SIZE];
    notice_fill(nt, b, TB_NOTICE_VERDICT, verdict, r, inc);
    if (sendto(nt->nfd, b, sizeof b, MSG_DONTWAIT, addr, alen) < 0)
        TB_DEBUG("view", "verdict not sent: %s", strerror(errno));
}

/* Make the per-rank array *v (*len elements of size elem, zeroed as they
 * come) reach rank `from`, within the topology. 1, or 0 if it cannot. */
static int per_rank(const tb_notice_t *nt, void **v, size_t *len, size_t elem,
                    tbon_rank_t from)
{
    if (from < *len)
        return 1;
    size_t nn = tb_topology_size(nt->cx->nd.topo);
    uint8_t *nv = nn > from ? realloc(*v, nn * elem) : NULL;
    if (!nv)
        return 0;
    memset(nv + *len * elem, 0, (nn - *len) * elem);
    *v = nv;
    *len = nn;
    return 1;
}

/* A sequence number from rank from: 1 if newer than any taken from it. */
static int fresh(tb_notice_t *nt, tbon_rank_t from, uint64_t seq)
{
    if (!tb_ft_is_fe(nt->cx)) {         /* only the FE sends here */
        if (seq <= nt->verdict_in)
            return 0;
        nt->verdict_in = seq;
        return 1;
    }
    if (!per_rank(nt, (void **)&nt->notice_seq, &nt->nnotice_seq, sizeof *nt->notice_seq, from))
        return 0;
    if (seq <= nt->notice_seq[from])
        return 0;
    nt->notice_seq[from] = seq;
    return 1;
}

/* Checking a notice's HMAC costs a microsecond or two, and anyone on the
 * machine can send notices (the session id shows in ps): 600,000 forged ones
 * kept the FE's reactor at 52% CPU (issue 19). So each 100 ms window admits
 * at most NOTICE_MACS HMAC checks in all and NOTICE_PER_SENDER notices per
 * sender rank; the rest are dropped unchecked. A genuine notice dropped so is
 * only late: the report climbing the tree tells the FE all the same, and a
 * suspicion is noticed again on the next beat. An observer sends one notice
 * per suspect per beat, so a sender's share covers a commnode whose 256
 * children all fall silent at once. */
#define NOTICE_WINDOW_MS  100
#define NOTICE_MACS       2000       /* 20,000 a second */
#define NOTICE_PER_SENDER 256

static int within_budget(tb_notice_t *nt, tbon_rank_t from)
{
    int64_t now = tb_now_ms();
    if (now - nt->nt_win >= NOTICE_WINDOW_MS) {
        if (nt->nt_over)
            TB_WARN_LIMITED("view", "%llu failure notices over the limit (%d a second, %d per "
                            "sender in %d ms) dropped unchecked: forged ones?",
                            (unsigned long long)nt->nt_over, NOTICE_MACS * 1000 / NOTICE_WINDOW_MS,
                            NOTICE_PER_SENDER, NOTICE_WINDOW_MS);
        nt->nt_win = now;
        nt->nt_macs = 0;
        nt->nt_over = 0;
        if (nt->nt_from)
            memset(nt->nt_from, 0, nt->nnt_from * sizeof *nt->nt_from);
    }
    if (!per_rank(nt, (void **)&nt->nt_from, &nt->nnt_from, sizeof *nt->nt_from, from))
        return 0;
    if (nt->nt_macs >= NOTICE_MACS || nt->nt_from[from] >= NOTICE_PER_SENDER) {
        nt->nt_over++;
        return 0;
    }
    nt->nt_macs++;
    nt->nt_from[from]++;
    return 1;
}

/* The last sequence taken from rank from (0: none). */
static uint64_t last_seq(const tb_notice_t *nt, tbon_rank_t from)
{
    if (!tb_ft_is_fe(nt->cx))
        return nt->verdict_in;
    return from < nt->nnotice_seq ? nt->notice_seq[from] : 0;
}

/* Whether a notice b (its shape checked) is to be believed before its
 * HMAC is checked. */
static int plausible(tb_notice_t *nt, const uint8_t *b)
{
    tb_ft_ctx_t *cx = nt->cx;
    const tb_topology_t *t = cx->nd.topo;
    tbon_rank_t from = tb_get32(b + 16), r = tb_get32(b + 20);
    int kind = b[5];
    if (r == 0 || r >= tb_topology_size(t) || from >= tb_topology_size(t) || !cx->ready ||
        tb_ft_ending(cx) || tb_ft_is_fe(cx) != (kind != TB_NOTICE_VERDICT) ||
        (kind == TB_NOTICE_VERDICT && from != 0))
        return 0;
    /* A detector we have fenced is not believed: woken up, it sees its
     * children gone (adopted elsewhere) and would call them dead. Nor is the
     * old process of a rank restarted since (it wakes up to the same). Nor a
     * sequence already taken (a replay). All before the HMAC, and then only
     * within the budget. */
    if (kind != TB_NOTICE_VERDICT &&
        (!tb_topology_alive(t, from) ||
         tb_inc_gen(tb_get32(b + 28)) < tb_inc_gen(tb_topology_incarnation(t, from))))
        return 0;
    return tb_get64(b + 32) > last_seq(nt, from) && within_budget(nt, from);
}

void tb_notice_take(tb_notice_t *nt, const uint8_t *b, size_t len,
                    const struct sockaddr_storage *src, socklen_t slen)
{
    const tb_session_t *ses = nt->cx->nd.session;
    uint8_t mac[crypto_auth_hmacsha256_BYTES];
    /* Anything not a notice of this session, signed with its secret, is
     * dropped without a word: the port is open to anyone. The cheap
     * checks come before the HMAC. */
    if (len != NOTICE_SIZE || tb_get32(b) != NOTICE_MAGIC || b[4] != 2 ||
        b[5] > TB_NOTICE_VERDICT || tb_get64(b + 8) != ses->id || !plausible(nt, b))
        return;
    tbon_rank_t from = tb_get32(b + 16), r = tb_get32(b + 20);
    uint32_t inc = tb_get32(b + 24);
    int kind = b[5];
    crypto_auth_hmacsha256(mac, b, 40, ses->secret);
    if (sodium_memcmp(mac, b + 40, sizeof mac) != 0 || !fresh(nt, from, tb_get64(b + 32)))
        return;
    if (kind == TB_NOTICE_VERDICT) {
        tb_suspect_verdict(nt->sp, r, inc, b[6]);
    } else if (kind == TB_NOTICE_FAILED) {
        /* From one of r's orphans (every one of them sends it): it is
         * alive, and looking for an adopter. */
        tbon_rank_t fp = tb_topology_parent(nt->cx->nd.topo, from);
        int orphan = fp == r || fp == TBON_RANK_NONE;
        char how[64];
        snprintf(how, sizeof how, "notice from rank %u", from);
        nt->cx->up->failed(nt->cx->up_arg, r, inc, how);
        if (orphan)
            nt->cx->up->view_orphan_heard(nt->cx->up_arg, from);
    } else {
        tb_suspect_fe(nt->sp, r, inc, from, kind == TB_NOTICE_SUSPECT, src, slen);
    }
}

/* The notice socket is readable: up to 256 datagrams a turn, read 32 at a
 * time (recvmmsg: a flood costs one system call per 32, not per datagram). */
static void on_notice_io(tb_io_t *io, uint32_t events)
{
    (void)events;
    tb_notice_t *nt = io->arg;
    enum { BATCH = 32 };
    uint8_t b[BATCH][NOTICE_SIZE + 1];
    struct sockaddr_storage src[BATCH];
    struct iovec iov[BATCH];
    struct mmsghdr m[BATCH];
    for (int turn = 0; turn < 256 / BATCH; turn++) {
        for (int i = 0; i < BATCH; i++) {
            iov[i] = (struct iovec){ b[i], sizeof b[i] };
            m[i] = (struct mmsghdr){ .msg_hdr = { .msg_name = &src[i],
                                                  .msg_namelen = sizeof src[i],
                                                  .msg_iov = &iov[i], .msg_iovlen = 1 } };
        }
        int k = recvmmsg(nt->nfd, m, BATCH, MSG_DONTWAIT, NULL);
        if (k <= 0)
            return;
        for (int i = 0; i < k; i++)
            tb_notice_take(nt, b[i], m[i].msg_len, &src[i], m[i].msg_hdr.msg_namelen);
        if (k < BATCH)
            return;
    }
}
