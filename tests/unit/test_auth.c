/* test_auth.c - the connection handshake over real sockets (net/auth.c): the
 * blocking client against the non-blocking server state machine, each also
 * against a peer that sends crafted, truncated, garbled or replayed frames,
 * with the error codes and messages each side reports */
#include "../harness.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "codec/handshake.h"
#include "codec/wire.h"
#include "net/auth.h"
#include "net/sock.h"

static const uint64_t SESSION = 0x5EC0DE5EC0DE0001ull;

static void session_of(tb_session_t *s, uint64_t id, uint8_t seed)
{
    s->id = id;
    for (int i = 0; i < TB_SECRET_SIZE; i++)
        s->secret[i] = (uint8_t)(seed + 13 * i);
}

/* A connected loopback TCP pair: *srv as tb_sock_accept gives it (non-blocking),
 * *cli as tb_sock_connect gives it (blocking). */
static void tcp_pair(int *srv, int *cli)
{
    tbon_error_t err = { 0 };
    uint16_t port = 0;
    int lfd = tb_sock_listen(&port, &err);
    *srv = *cli = -1;
    if (lfd < 0) {
        th_fail(__FILE__, __LINE__, "tb_sock_listen: %s", err.msg);
        return;
    }
    *cli = tb_sock_connect("127.0.0.1", port, tb_now_ms() + 5000, &err);
    if (*cli < 0)
        th_fail(__FILE__, __LINE__, "tb_sock_connect: %s", err.msg);
    struct pollfd p = { .fd = lfd, .events = POLLIN };
    if (*cli >= 0 && poll(&p, 1, 5000) == 1)
        *srv = tb_sock_accept(lfd);
    if (*cli >= 0 && *srv < 0)
        th_fail(__FILE__, __LINE__, "no connection to accept");
    close(lfd);
}

/* ---- the client, on its own thread ---- */

/* In the calling test: session s, a connected pair (sfd the server's end,
 * cfd the client's) and a server a started on sfd (a macro: REQUIRE ends
 * the test). */
#define PAIR_OPEN(s, sfd, cfd, a, err)                                          \
    tb_session_t s;                                                             \
    session_of(&s, SESSION, 1);                                                 \
    int sfd, cfd;                                                               \
    tcp_pair(&sfd, &cfd);                                                       \
    REQUIRE(sfd >= 0 && cfd >= 0);                                              \
    tb_auth_srv_t a;                                                            \
    tbon_error_t err = { 0 };                                                   \
    REQUIRE(tb_auth_srv_start(&a, sfd, &s, tb_now_ms() + 5000, &err) == 0)

typedef struct client {
    pthread_t th;
    int fd;
    tb_session_t s;
    uint8_t role, purpose;
    uint32_t rank, inc;
    int deadline_ms;            /* from its start */
    int close_after;            /* close fd once done (as a caller does on failure) */
    int rc;
    tb_welcome_t w;
    tbon_error_t err;
    int64_t took_ms;
} client_t;

static void *client_main(void *arg)
{
    client_t *c = arg;
    int64_t t0 = tb_now_ms();
    c->rc = tb_auth_client(c->fd, &c->s, c->role, c->purpose, c->rank, c->inc,
                           t0 + c->deadline_ms, &c->w, &c->err);
    c->took_ms = tb_now_ms() - t0;
    if (c->close_after)
        close(c->fd);
    return NULL;
}

/* A client as BE rank 7, incarnation 3, for data, on fd, with 5 s; change
 * what the case needs, then client_go. */
static void client_init(client_t *c, int fd, const tb_session_t *s)
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->s = *s;
    c->role = TB_ROLE_BE;
    c->purpose = TB_PURPOSE_DATA;
    c->rank = 7;
    c->inc = 3;
    c->deadline_ms = 5000;
    c->rc = 12345;
}

static void client_go(client_t *c)
{
    if (pthread_create(&c->th, NULL, client_main, c) != 0)
        th_fail(__FILE__, __LINE__, "pthread_create");
}

static void client_start(client_t *c, int fd, const tb_session_t *s)
{
    client_init(c, fd, s);
    client_go(c);
}

static void client_join(client_t *c)
{
    pthread_join(c->th, NULL);
}

/* ---- the server, driven here ---- */

/* tb_auth_srv_read until it returns non-zero, waiting in poll for fd to be
 * readable; at most ms. Returns what it returned, or -1000 on time-out. */
static int srv_drive(tb_auth_srv_t *a, const tb_session_t *s, int ms, tbon_error_t *err)
{
    int64_t end = tb_now_ms() + ms;
    for (;;) {
        int rc = tb_auth_srv_read(a, s, err);
        if (rc != 0)
            return rc;
        int64_t left = end - tb_now_ms();
        if (left <= 0)
            return -1000;
        struct pollfd p = { .fd = a->fd, .events = POLLIN };
        poll(&p, 1, (int)left);
    }
}

/* ---- a raw peer: frames as bytes ---- */

/* The bytes of a frame of type with payload (n bytes), into out; its length. */
static size_t frame_bytes(uint8_t type, uint32_t source, const void *payload, size_t n,
                          uint8_t *out)
{
    tb_frame_hdr_t h = { .type = type, .source = source, .len = (uint32_t)n };
    tb_frame_hdr_encode(&h, payload, out);
    if (n && out + TB_FRAME_HDR_SIZE != payload)
        memcpy(out + TB_FRAME_HDR_SIZE, payload, n);
    return TB_FRAME_HDR_SIZE + n;
}

static int write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Read one frame of type off fd (2 s at most) into *f; 0 or an error. */
static int read_frame(int fd, uint8_t type, tb_frame_t *f)
{
    tbon_error_t err = { 0 };
    int rc = tb_sock_recv_frame(fd, TB_FRAME_MAX_HANDSHAKE, f, tb_now_ms() + 2000, &err);
    if (rc == 0 && f->hdr.type != type) {
        tb_frame_release(f);
        th_fail(__FILE__, __LINE__, "got a %s frame, expected %s",
                tb_frame_type_name(f->hdr.type), tb_frame_type_name(type));
        return TBON_EFORMAT;
    }
    if (rc)
        th_fail(__FILE__, __LINE__, "reading a %s frame: %s", tb_frame_type_name(type),
                err.msg);
    return rc;
}

/* As a client: read the HELLO on fd, answer with a HANDSHAKE made with s
 * (BE rank 7 incarnation 3, data), encoded into hsb (its frame: the
 * return value, its length). *hello: the HELLO read. */
static size_t raw_handshake(int fd, const tb_session_t *s, tb_hello_t *hello, tb_handshake_t *hs,
                            uint8_t hsb[TB_FRAME_HDR_SIZE + TB_HANDSHAKE_SIZE])
{
    tb_frame_t f;
    tbon_error_t err = { 0 };
    if (read_frame(fd, TB_FRAME_HELLO, &f) != 0)
        return 0;
    int rc = tb_hello_decode(hello, f.payload, f.hdr.len, &err);
    tb_frame_release(&f);
    if (rc || tb_handshake_make(hs, hello, s->secret, s->id, TB_ROLE_BE, TB_PURPOSE_DATA, 7,
                                3, &err)) {
        th_fail(__FILE__, __LINE__, "%s", err.msg);
        return 0;
    }
    uint8_t p[TB_HANDSHAKE_SIZE];
    tb_handshake_encode(hs, p);
    return frame_bytes(TB_FRAME_HANDSHAKE, 7, p, sizeof p, hsb);
}

/* The WELCOME a server sent on fd (as a client reads it). */
static int read_welcome(int fd, tb_welcome_t *w)
{
    tb_frame_t f;
    tbon_error_t err = { 0 };
    int rc = read_frame(fd, TB_FRAME_WELCOME, &f);
    if (rc)
        return rc;
    rc = tb_welcome_decode(w, f.payload, f.hdr.len, &err);
    tb_frame_release(&f);
    if (rc)
        th_fail(__FILE__, __LINE__, "%s", err.msg);
    return rc;
}

/* 1 if fd has nothing more to read and the peer has not closed it. */
static int nothing_to_read(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll(&p, 1, 10) == 0;
}

/* ---- the whole exchange ---- */

TEST(right_secret_accepted_both_ways)
{
    PAIR_OPEN(s, sfd, cfd, a, err);
    client_t c;
    client_start(&c, cfd, &s);
    CHECK_INT(srv_drive(&a, &s, 5000, &err), 1);
    CHECK_UINT(a.hs.version, TB_PROTO_VERSION);
    CHECK_UINT(a.hs.session, SESSION);
    CHECK_UINT(a.hs.role, TB_ROLE_BE);
    CHECK_UINT(a.hs.purpose, TB_PURPOSE_DATA);
    CHECK_UINT(a.hs.rank, 7);
    CHECK_UINT(a.hs.incarnation, 3);
    CHECK_INT(tb_auth_srv_welcome(&a, &s, TB_WELCOME_OK, 1, 5, 0, &err), 0);
    client_join(&c);
    CHECK_INT(c.rc, 0);
    CHECK_UINT(c.w.status, TB_WELCOME_OK);
    CHECK_UINT(c.w.rank, 1);
    CHECK_UINT(c.w.incarnation, 5);
    /* nothing else travelled either way */
    CHECK(nothing_to_read(sfd));
    CHECK(nothing_to_read(cfd));
    close(sfd);
    close(cfd);
}

/* Every role and purpose the protocol has gets through as it was sent; the
 * ones past its ranges are refused by the client before anything is sent. */
TEST(every_role_and_purpose)
{
    tb_session_t s;
    session_of(&s, SESSION, 2);
    for (uint8_t role = 0; role <= TB_ROLE_MAX + 1; role++) {
        for (uint8_t purpose = 0; purpose <= TB_PURPOSE_MAX + 1; purpose++) {
            int sfd, cfd;
            tcp_pair(&sfd, &cfd);
            REQUIRE(sfd >= 0 && cfd >= 0);
            tb_auth_srv_t a;
            tbon_error_t err = { 0 };
            REQUIRE(tb_auth_srv_start(&a, sfd, &s, tb_now_ms() + 5000, &err) == 0);
            client_t c;
            client_init(&c, cfd, &s);
            c.role = role;
            c.purpose = purpose;
            c.rank = 1000u + role * 10u + purpose;
            c.inc = purpose;
            c.close_after = 1;
            client_go(&c);
            int bad = role > TB_ROLE_MAX || purpose > TB_PURPOSE_MAX;
            int rc = srv_drive(&a, &s, 5000, &err);
            if (!bad) {
                CHECK_INT(rc, 1);
                CHECK_UINT(a.hs.role, role);
                CHECK_UINT(a.hs.purpose, purpose);
                CHECK_UINT(a.hs.rank, c.rank);
                CHECK_UINT(a.hs.incarnation, purpose);
                CHECK_INT(tb_auth_srv_welcome(&a, &s, TB_WELCOME_OK, 0, 0, 0, &err), 0);
            } else {
                /* the client sent nothing and closed */
                CHECK_INT(rc, TBON_ECLOSED);
                CHECK_STR(err.msg, "peer closed during the handshake");
            }
            client_join(&c);
            CHECK_INT(c.rc, bad ? TBON_EINVAL : 0);
            if (bad) {
                char want[96];
                snprintf(want, sizeof want, "handshake: role %u or purpose %u out of range",
                         role, purpose);
                CHECK_STR(c.err.msg, want);
            }
            close(sfd);
        }
    }
}

TEST(wrong_secret_refused_both_sides)
{
    tb_session_t s, other;
    session_of(&s, SESSION, 1);
    session_of(&other, SESSION, 2);
    int sfd, cfd;
    tcp_pair(&sfd, &cfd);
    REQUIRE(sfd >= 0 && cfd >= 0);
    tb_auth_srv_t a;
    tbon_error_t err = { 0 };
    REQUIRE(tb_auth_srv_start(&a, sfd, &s, tb_now_ms() + 5000, &err) == 0);
    client_t c;
    client_start(&c, cfd, &other);
    CHECK_INT(srv_drive(&a, &s, 5000, &err), TBON_EAUTH);
    CHECK_INT(err.code, TBON_EAUTH);
    CHECK_STR(err.msg, "HANDSHAKE from BE rank 7 incarnation 3 (data): MAC does not verify "
                       "(wrong session secret, altered message, or replayed from another "
                       "connection)");
    client_join(&c);
    /* the server told the client why, in a WELCOME without a MAC */
    CHECK_INT(c.rc, TBON_EAUTH);
    CHECK_STR(c.err.msg, "refused by rank 0: bad MAC");
    CHECK_UINT(c.w.status, TB_WELCOME_BAD_MAC);
    close(sfd);
    close(cfd);
}

/* A client in another session stops at the HELLO and sends nothing. */
TEST(wrong_session_client_stops_at_hello)
{
    tb_session_t s, other;
    session_of(&s, SESSION, 1);
    session_of(&other, SESSION + 1, 1);
    int sfd, cfd;
    tcp_pair(&sfd, &cfd);
    REQUIRE(sfd >= 0 && cfd >= 0);
    tb_auth_srv_t a;
    tbon_error_t err = { 0 };
    REQUIRE(tb_auth_srv_start(&a, sfd, &s, tb_now_ms() + 5000, &err) == 0);
    client_t c;
    client_start(&c, cfd, &other);
    client_join(&c);
    CHECK_INT(c.rc, TBON_EAUTH);
    CHECK_STR(c.err.msg, "server belongs to session 5ec0de5ec0de0001, we to session "
                         "5ec0de5ec0de0002");
    /* no HANDSHAKE came: the server is still waiting */
    CHECK_INT(tb_auth_srv_read(&a, &s, &err), 0);
    close(cfd);
    CHECK_INT(srv_drive(&a, &s, 2000, &err), TBON_ECLOSED);
    CHECK_STR(err.msg, "peer closed during the handshake");
    close(sfd);
}

/* A HANDSHAKE of another session or version, sent anyway: refused with
 * the matching WELCOME status and message. */
TEST(wrong_session_and_version_in_the_handshake)
{
    tb_session_t s;
    session_of(&s, SESSION, 1);
    for (int which = 0; which < 2; which++) {
        int sfd, cfd;
        tcp_pair(&sfd, &cfd);
        REQUIRE(sfd >= 0 && cfd >= 0);
        tb_auth_srv_t a;
        tbon_error_t err = { 0 };
        REQUIRE(tb_auth_srv_start(&a, sfd, &s, tb_now_ms() + 5000, &err) == 0);
        tb_hello_t hello;
        tb_handshake_t hs;
        uint8_t fb[TB_FRAME_HDR_SIZE + TB_HANDSHAKE_SIZE];
        REQUIRE(raw_handshake(cfd, &s, &hello, &hs, fb) == sizeof fb);
        if (which == 0)
            hs.session = SESSION ^ 0xFF;
        else
            hs.version = TB_PROTO_VERSION + 1;
        uint8_t p[TB_HANDSHAKE_SIZE];
        tb_handshake_encode(&hs, p);
        frame_bytes(TB_FRAME_HANDSHAKE, 7, p, sizeof p, fb);
        REQUIRE(write_all(cfd, fb, sizeof fb) == 0);
        CHECK_INT(srv_drive(&a, &s, 5000, &err), TBON_EAUTH);
        tb_welcome_t w;
        REQUIRE(read_welcome(cfd, &w) == 0);
        if (which == 0) {
            CHECK_STR(err.msg, "HANDSHAKE from BE rank 7 (data): session 5ec0de5ec0de00fe, "
                               "this is session 5ec0de5ec0de0001");
            CHECK_UINT(w.status, TB_WELCOME_WRONG_SESSION);
        } else {
            CHECK_STR(err.msg, "HANDSHAKE from BE rank 7 (data): protocol version 2, "
                               "we speak 1");
            CHECK_UINT(w.status, TB_WELCOME_BAD_VERSION);
        }
        /* the refusal carries no proof a client could reuse */
        uint8_t zero[TB_MAC_SIZE] = { 0 };
        CHECK_MEM(w.mac, zero, TB_MAC_SIZE);
        close(sfd);
        close(cfd);
    }
}

/* ---- replays: each side's proof is bound to the other's fresh nonce ---- */

TEST(replayed_handshake_refused)
{
    tb_session_t s;
    session_of(&s, SESSION, 1);
    /* connection 1: an honest HANDSHAKE, recorded */
    int sfd, cfd;
    tcp_pair(&sfd, &cfd);
    REQUIRE(sfd >= 0 && cfd >= 0);
    tb_auth_srv_t a;
    tbon_error_t err = { 0 };
    REQUIRE(tb_auth_srv_start(&a, sfd, &s, tb_now_ms() + 5000, &err) == 0);
    tb_hello_t hello1;
    tb_handshake_t hs;
    uint8_t rec[TB_FRAME_HDR_SIZE + TB_HANDSHAKE_SIZE];
    REQUIRE(raw_handshake(cfd, &s, &hello1, &hs, rec) == sizeof rec);
    REQUIRE(write_all(cfd, rec, sizeof rec) == 0);
    CHECK_INT(srv_drive(&a, &s, 5000, &err), 1);
    close(sfd);
    close(cfd);
    /* connection 2: the same bytes, against a new HELLO */
    tcp_pair(&sfd, &cfd);
    REQUIRE(sfd >= 0 && cfd >= 0);
    REQUIRE(tb_auth_srv_start(&a, sfd, &s, tb_now_ms() + 5000, &err) == 0);
    tb_frame_t f;
    REQUIRE(read_frame(cfd, TB_FRAME_HELLO, &f) == 0);
    tb_hello_t hello2;
    CHECK_INT(tb_hello_decode(&hello2, f.payload, f.hdr.len, &err), 0);
    tb_frame_release(&f);
    CHECK(memcmp(hello1.nonce, hello2.nonce, TB_NONCE_SIZE) != 0);
    REQUIRE(write_all(cfd, rec, sizeof rec) == 0);
    CHECK_INT(srv_drive(&a, &s, 5000, &err), TBON_EAUTH);
    CHECK(strstr(err.msg, "MAC does not verify") != NULL);
    tb_welcome_t w;
    REQUIRE(read_welcome(cfd, &w) == 0);
    CHECK_UINT(w.status, TB_WELCOME_BAD_MAC);
    close(sfd);
    close(cfd);
}

/* A server that replays an honest HELLO and WELCOME of an earlier connection
 * to a new client: the client's fresh nonce makes the WELCOME's MAC fail. */
TEST(replayed_welcome_refused)
{
    PAIR_OPEN(s, sfd, cfd, a, err);
    /* connection 1, recorded from the client's side */
    uint8_t hello_rec[TB_FRAME_HDR_SIZE + TB_HELLO_SIZE];
    REQUIRE(recv(cfd, hello_rec, sizeof hello_rec, MSG_WAITALL) == (ssize_t)sizeof hello_rec);
    tb_hello_t hello;
    tb_handshake_t hs;
    CHECK_INT(tb_hello_decode(&hello, hello_rec + TB_FRAME_HDR_SIZE, TB_HELLO_SIZE, &err), 0);
    REQUIRE(tb_handshake_make(&hs, &hello, s.secret, s.id, TB_ROLE_BE, TB_PURPOSE_DATA, 7, 3,
                              &err) == 0);
    uint8_t p[TB_HANDSHAKE_SIZE], fb[TB_FRAME_HDR_SIZE + TB_HANDSHAKE_SIZE];
    tb_handshake_encode(&hs, p);
    frame_bytes(TB_FRAME_HANDSHAKE, 7, p, sizeof p, fb);
    REQUIRE(write_all(cfd, fb, sizeof fb) == 0);
    CHECK_INT(srv_drive(&a, &s, 5000, &err), 1);
    CHECK_INT(tb_auth_srv_welcome(&a, &s, TB_WELCOME_OK, 1, 0, 0, &err), 0);
    uint8_t welcome_rec[TB_FRAME_HDR_SIZE + TB_WELCOME_SIZE];
    REQUIRE(recv(cfd, welcome_rec, sizeof welcome_rec, MSG_WAITALL) ==
            (ssize_t)sizeof welcome_rec);
    tb_welcome_t w;
    CHECK_INT(tb_welcome_decode(&w, welcome_rec + TB_FRAME_HDR_SIZE, TB_WELCOME_SIZE, &err), 0);
    CHECK_INT(tb_welcome_verify(&w, &hs, s.secret, &err), 0);   /* it was honest */
    close(sfd);
    close(cfd);
    /* connection 2: the replaying server against a real client */
    tcp_pair(&sfd, &cfd);
    REQUIRE(sfd >= 0 && cfd >= 0);
    client_t c;
    client_start(&c, cfd, &s);
    REQUIRE(write_all(sfd, hello_rec, sizeof hello_rec) == 0);
    tb_frame_t f;
    REQUIRE(read_frame(sfd, TB_FRAME_HANDSHAKE, &f) == 0);
    tb_frame_release(&f);
    REQUIRE(write_all(sfd, welcome_rec, sizeof welcome_rec) == 0);
    client_join(&c);
    CHECK_INT(c.rc, TBON_EAUTH);
    CHECK_STR(c.err.msg, "WELCOME from rank 1: MAC does not verify, the server does not hold "
                         "our session secret (its unauthenticated status says \"accepted\")");
    close(sfd);
    close(cfd);
}

/* A server without the secret that says OK anyway is found out. */
TEST(forged_welcome_refused)
{
    tb_session_t s, other;
    session_of(&s, SESSION, 1);
    session_of(&other, SESSION, 9);
    int sfd, cfd;
    tcp_pair(&sfd, &cfd);
    REQUIRE(sfd >= 0 && cfd >= 0);
    client_t c;
    client_start(&c, cfd, &s);
    tb_hello_t hello;
    tbon_error_t err = { 0 };
    REQUIRE(tb_hello_make(&hello, SESSION, &err) == 0);
    uint8_t p[TB_HELLO_SIZE], fb[TB_FRAME_HDR_SIZE + 64];
    tb_hello_encode(&hello, p);
    REQUIRE(write_all(sfd, fb, frame_bytes(TB_FRAME_HELLO, 0, p, sizeof p, fb)) == 0);
    tb_frame_t f;
    REQUIRE(read_frame(sfd, TB_FRAME_HANDSHAKE, &f) == 0);
    tb_handshake_t hs;
    CHECK_INT(tb_handshake_decode(&hs, f.payload, f.hdr.len, &err), 0);
    tb_frame_release(&f);
    /* the HANDSHAKE is the client's honest one: the real secret verifies it */
    CHECK_INT(tb_handshake_verify(&hs, &hello, s.secret, &err), 0);
    tb_welcome_t w;
    REQUIRE(tb_welcome_make(&w, &hs, other.secret, TB_WELCOME_OK, 2, 0, &err) == 0);
    uint8_t wp[TB_WELCOME_SIZE];
    tb_welcome_encode(&w, wp);
    REQUIRE(write_all(sfd, fb, frame_bytes(TB_FRAME_WELCOME, 2, wp, sizeof wp, fb)) == 0);
    client_join(&c);
    CHECK_INT(c.rc, TBON_EAUTH);
    CHECK_STR(c.err.msg, "WELCOME from rank 2: MAC does not verify, the server does not hold "
                         "our session secret (its unauthenticated status says \"accepted\")");
    close(sfd);
    close(cfd);
}

/* An authentic refusal (an adoption declined): the client says who refused. */
TEST(refused_by_an_authentic_server)
{
    PAIR_OPEN(s, sfd, cfd, a, err);
    client_t c;
    client_start(&c, cfd, &s);
    CHECK_INT(srv_drive(&a, &s, 5000, &err), 1);
    CHECK_INT(tb_auth_srv_welcome(&a, &s, TB_WELCOME_REFUSED, 4, 2, 0, &err), 0);
    client_join(&c);
    CHECK_INT(c.rc, TBON_EAUTH);
    CHECK_STR(c.err.msg, "refused by rank 4: refused");
    CHECK_UINT(c.w.rank, 4);
    /* a status past the protocol's is refused before anything is sent */
    CHECK_INT(tb_auth_srv_welcome(&a, &s, TB_WELCOME_STATUS_MAX + 1, 4, 2, 0, &err),
              TBON_EINVAL);
    CHECK_STR(err.msg, "WELCOME status 6 out of range");
    CHECK(nothing_to_read(cfd));
    close(sfd);
    close(cfd);
}

/* ---- the server against broken HANDSHAKEs ---- */

/* A server started on a fresh pair; the raw client has read its HELLO and
 * made an honest HANDSHAKE frame (fb). */
typedef struct raw {
    int sfd, cfd;
    tb_session_t s;
    tb_auth_srv_t a;
    tb_hello_t hello;
    tb_handshake_t hs;
    uint8_t fb[TB_FRAME_HDR_SIZE + TB_HANDSHAKE_SIZE];
} raw_t;

static int raw_open(raw_t *r)
{
    tbon_error_t err = { 0 };
    session_of(&r->s, SESSION, 1);
    tcp_pair(&r->sfd, &r->cfd);
    if (r->sfd < 0 || r->cfd < 0)
        return -1;
    if (tb_auth_srv_start(&r->a, r->sfd, &r->s, tb_now_ms() + 5000, &err) != 0) {
        th_fail(__FILE__, __LINE__, "tb_auth_srv_start: %s", err.msg);
        return -1;
    }
    return raw_handshake(r->cfd, &r->s, &r->hello, &r->hs, r->fb) == sizeof r->fb ? 0 : -1;
}

static void raw_close(raw_t *r)
{
    if (r->sfd >= 0)
        close(r->sfd);
    if (r->cfd >= 0)
        close(r->cfd);
}

/* Truncated: the server waits for the rest, and says so when the peer goes. */
TEST(truncated_handshake_waits_then_closed)
{
    size_t cuts[] = { 1, 20, TB_FRAME_HDR_SIZE - 1, TB_FRAME_HDR_SIZE, TB_FRAME_HDR_SIZE + 40,
                      TB_FRAME_HDR_SIZE + TB_HANDSHAKE_SIZE - 1 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        raw_t r;
        REQUIRE(raw_open(&r) == 0);
        tbon_error_t err = { 0 };
        REQUIRE(write_all(r.cfd, r.fb, cuts[i]) == 0);
        /* once everything sent so far is in: still 0 (more to come) */
        int64_t end = tb_now_ms() + 5000;
        int rc;
        while ((rc = srv_drive(&r.a, &r.s, 20, &err)) == -1000 && r.a.have < cuts[i] &&
               tb_now_ms() < end)
            ;
        CHECK_INT(rc, -1000);
        CHECK_UINT(r.a.have, cuts[i]);
        shutdown(r.cfd, SHUT_WR);
        CHECK_INT(srv_drive(&r.a, &r.s, 2000, &err), TBON_ECLOSED);
        CHECK_INT(err.code, TBON_ECLOSED);
        CHECK_STR(err.msg, "peer closed during the handshake");
        raw_close(&r);
    }
}

/* The HANDSHAKE one byte at a time: the state machine puts it together. */
TEST(handshake_byte_by_byte)
{
    raw_t r;
    REQUIRE(raw_open(&r) == 0);
    tbon_error_t err = { 0 };
    int rc = 0;
    for (size_t i = 0; i < sizeof r.fb; i++) {
        REQUIRE(write_all(r.cfd, r.fb + i, 1) == 0);
        struct pollfd p = { .fd = r.sfd, .events = POLLIN };
        REQUIRE(poll(&p, 1, 2000) == 1);
        rc = tb_auth_srv_read(&r.a, &r.s, &err);
        if (i + 1 < sizeof r.fb)
            CHECK_INT(rc, 0);
    }
    CHECK_INT(rc, 1);
    CHECK_UINT(r.a.hs.rank, 7);
    raw_close(&r);
}

/* A header claiming more than a handshake may have is refused as soon as
 * the header is in, without waiting for the bytes it claims. */
TEST(oversized_handshake_frame)
{
    raw_t r;
    REQUIRE(raw_open(&r) == 0);
    uint8_t big[TB_FRAME_HDR_SIZE + TB_FRAME_MAX_HANDSHAKE + 1];
    memset(big, 'x', sizeof big);
    frame_bytes(TB_FRAME_HANDSHAKE, 7, big + TB_FRAME_HDR_SIZE, TB_FRAME_MAX_HANDSHAKE + 1, big);
    REQUIRE(write_all(r.cfd, big, TB_FRAME_HDR_SIZE) == 0);
    tbon_error_t err = { 0 };
    CHECK_INT(srv_drive(&r.a, &r.s, 2000, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "handshake frame of 257 bytes (at most 256)");
    raw_close(&r);
}

/* A frame of the right type whose payload is not a HANDSHAKE's size. */
TEST(handshake_of_the_wrong_size)
{
    size_t sizes[] = { 0, 1, TB_HANDSHAKE_SIZE - 1, TB_HANDSHAKE_SIZE + 1, TB_FRAME_MAX_HANDSHAKE };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        raw_t r;
        REQUIRE(raw_open(&r) == 0);
        uint8_t p[TB_FRAME_MAX_HANDSHAKE], fb[TB_FRAME_HDR_SIZE + TB_FRAME_MAX_HANDSHAKE];
        memset(p, 0, sizeof p);
        memcpy(p, r.fb + TB_FRAME_HDR_SIZE,
               sizes[i] < TB_HANDSHAKE_SIZE ? sizes[i] : TB_HANDSHAKE_SIZE);
        size_t n = frame_bytes(TB_FRAME_HANDSHAKE, 7, p, sizes[i], fb);
        REQUIRE(write_all(r.cfd, fb, n) == 0);
        tbon_error_t err = { 0 };
        CHECK_INT(srv_drive(&r.a, &r.s, 2000, &err), TBON_EFORMAT);
        char want[80];
        snprintf(want, sizeof want, "HANDSHAKE message is %zu bytes, expected 84", sizes[i]);
        CHECK_STR(err.msg, want);
        raw_close(&r);
    }
}

/* Another frame type where the HANDSHAKE belongs. */
TEST(handshake_of_the_wrong_type)
{
    uint8_t types[] = { TB_FRAME_DATA, TB_FRAME_HELLO, TB_FRAME_WELCOME, TB_FRAME_HEARTBEAT };
    for (size_t i = 0; i < sizeof types; i++) {
        raw_t r;
        REQUIRE(raw_open(&r) == 0);
        uint8_t fb[sizeof r.fb];
        frame_bytes(types[i], 7, r.fb + TB_FRAME_HDR_SIZE, TB_HANDSHAKE_SIZE, fb);
        REQUIRE(write_all(r.cfd, fb, sizeof fb) == 0);
        tbon_error_t err = { 0 };
        CHECK_INT(srv_drive(&r.a, &r.s, 2000, &err), TBON_EAUTH);
        char want[64];
        snprintf(want, sizeof want, "expected HANDSHAKE, got %s", tb_frame_type_name(types[i]));
        CHECK_STR(err.msg, want);
        raw_close(&r);
    }
}

/* Garbled on the way (the frame's CRCs catch it: a format error, no
 * WELCOME) or altered by someone who fixed the CRCs (the MAC catches it: an
 * authentication error and a BAD_MAC WELCOME). Every byte of the frame. */
TEST(garbled_handshake_never_accepted)
{
    for (size_t i = 0; i < TB_FRAME_HDR_SIZE + TB_HANDSHAKE_SIZE; i++) {
        for (int fixed = 0; fixed < 2; fixed++) {
            if (fixed && i < TB_FRAME_HDR_SIZE)
                continue;           /* the header's fields: below */
            raw_t r;
            REQUIRE(raw_open(&r) == 0);
            r.fb[i] ^= (uint8_t)(1u << (i % 8));
            if (fixed)
                frame_bytes(TB_FRAME_HANDSHAKE, 7, r.fb + TB_FRAME_HDR_SIZE,
                            TB_HANDSHAKE_SIZE, r.fb);
            REQUIRE(write_all(r.cfd, r.fb, sizeof r.fb) == 0);
            shutdown(r.cfd, SHUT_WR);   /* a length made longer waits no more */
            tbon_error_t err = { 0 };
            int rc = srv_drive(&r.a, &r.s, 2000, &err);
            CHECK(rc < 0 && rc != -1000);
            if (rc >= 0 || rc == -1000) {
                printf("    byte %zu (fixed %d): %d\n", i, fixed, rc);
                raw_close(&r);
                continue;
            }
            if (!fixed) {
                /* the length field may claim more (the peer then closed) or
                 * more than a handshake may have */
                CHECK(rc == TBON_EFORMAT || rc == TBON_ECLOSED);
                CHECK(nothing_to_read(r.cfd));
            } else if (i == TB_FRAME_HDR_SIZE + 10 || i == TB_FRAME_HDR_SIZE + 11) {
                /* role or purpose out of range, or another valid one: the
                 * MAC then fails */
                CHECK(rc == TBON_EFORMAT || rc == TBON_EAUTH);
            } else {
                CHECK_INT(rc, TBON_EAUTH);
                tb_welcome_t w;
                if (read_welcome(r.cfd, &w) == 0)
                    CHECK(w.status != TB_WELCOME_OK);
            }
            raw_close(&r);
        }
    }
}

/* ---- the client against a broken server ---- */

/* The server side sends frames (type, payload n bytes) on sfd; then
 * closes it (close_after), or keeps it open. The client's result. */
static void client_against(const uint8_t *types, const size_t *lens, size_t nframes,
                           int close_after, client_t *c)
{
    tb_session_t s;
    session_of(&s, SESSION, 1);
    int sfd, cfd;
    tcp_pair(&sfd, &cfd);
    if (sfd < 0 || cfd < 0)
        return;
    client_start(c, cfd, &s);
    for (size_t i = 0; i < nframes; i++) {
        uint8_t p[TB_FRAME_MAX_HANDSHAKE + 8], fb[TB_FRAME_HDR_SIZE + sizeof p];
        memset(p, 0, sizeof p);
        if (types[i] == TB_FRAME_HELLO) {
            tb_hello_t h;
            tb_hello_make(&h, SESSION, NULL);
            tb_hello_encode(&h, p);
        }
        write_all(sfd, fb, frame_bytes(types[i], 0, p, lens[i], fb));
        if (types[i] == TB_FRAME_HELLO && lens[i] == TB_HELLO_SIZE) {
            tb_frame_t f;           /* the client's answer */
            if (read_frame(sfd, TB_FRAME_HANDSHAKE, &f) == 0)
                tb_frame_release(&f);
        }
    }
    if (close_after)
        close(sfd);
    client_join(c);
    if (!close_after)
        close(sfd);
    close(cfd);
}

TEST(client_wants_hello_then_welcome)
{
    client_t c;
    uint8_t t1[] = { TB_FRAME_WELCOME };
    size_t l1[] = { TB_WELCOME_SIZE };
    client_against(t1, l1, 1, 0, &c);
    CHECK_INT(c.rc, TBON_EAUTH);
    CHECK_STR(c.err.msg, "expected HELLO, got WELCOME");

    uint8_t t2[] = { TB_FRAME_HELLO, TB_FRAME_DATA };
    size_t l2[] = { TB_HELLO_SIZE, 10 };
    client_against(t2, l2, 2, 0, &c);
    CHECK_INT(c.rc, TBON_EAUTH);
    CHECK_STR(c.err.msg, "expected WELCOME, got DATA");

    uint8_t t3[] = { TB_FRAME_HELLO };
    size_t l3[] = { TB_HELLO_SIZE - 1 };
    client_against(t3, l3, 1, 0, &c);
    CHECK_INT(c.rc, TBON_EFORMAT);
    CHECK_STR(c.err.msg, "HELLO message is 41 bytes, expected 42");

    uint8_t t4[] = { TB_FRAME_HELLO, TB_FRAME_WELCOME };
    size_t l4[] = { TB_HELLO_SIZE, TB_WELCOME_SIZE + 1 };
    client_against(t4, l4, 2, 0, &c);
    CHECK_INT(c.rc, TBON_EFORMAT);
    CHECK_STR(c.err.msg, "WELCOME message is 42 bytes, expected 41");

    /* a frame larger than a handshake's is refused from its header */
    uint8_t t5[] = { TB_FRAME_HELLO };
    size_t l5[] = { TB_FRAME_MAX_HANDSHAKE + 1 };
    client_against(t5, l5, 1, 0, &c);
    CHECK_INT(c.rc, TBON_EFORMAT);
    CHECK_STR(c.err.msg, "frame of 257 bytes, more than the 256 allowed");
}

TEST(client_server_gone_or_silent)
{
    client_t c;
    /* closed before the HELLO, and after it */
    client_against(NULL, NULL, 0, 1, &c);
    CHECK_INT(c.rc, TBON_ECLOSED);
    CHECK_STR(c.err.msg, "connection closed by the peer");
    uint8_t t[] = { TB_FRAME_HELLO };
    size_t l[] = { TB_HELLO_SIZE };
    client_against(t, l, 1, 1, &c);
    CHECK_INT(c.rc, TBON_ECLOSED);

    /* silent: the client gives up at its deadline */
    tb_session_t s;
    session_of(&s, SESSION, 1);
    int sfd, cfd;
    tcp_pair(&sfd, &cfd);
    REQUIRE(sfd >= 0 && cfd >= 0);
    client_init(&c, cfd, &s);
    c.deadline_ms = 300;
    client_go(&c);
    client_join(&c);
    CHECK_INT(c.rc, TBON_ETIMEOUT);
    CHECK_STR(c.err.msg, "timed out waiting for a frame");
    CHECK(c.took_ms >= 290 && c.took_ms < 3000);
    close(sfd);
    close(cfd);
}

/* ---- no byte beyond the handshake is taken: the socket goes on to a
 * reactor with what followed ---- */

TEST(server_reads_no_byte_beyond_the_handshake)
{
    raw_t r;
    REQUIRE(raw_open(&r) == 0);
    static const char more[] = "the first bytes of the data connection";
    uint8_t buf[sizeof r.fb + sizeof more];
    memcpy(buf, r.fb, sizeof r.fb);
    memcpy(buf + sizeof r.fb, more, sizeof more);
    REQUIRE(write_all(r.cfd, buf, sizeof buf) == 0);   /* one write: one segment */
    tbon_error_t err = { 0 };
    CHECK_INT(srv_drive(&r.a, &r.s, 2000, &err), 1);
    char got[sizeof more];
    CHECK_INT(recv(r.sfd, got, sizeof got, MSG_WAITALL), (ssize_t)sizeof more);
    CHECK_MEM(got, more, sizeof more);
    raw_close(&r);
}

/* The WELCOME held back (more) goes out with what follows it, and the
 * client reads no further than the WELCOME. */
TEST(welcome_with_more_and_client_reads_no_further)
{
    PAIR_OPEN(s, sfd, cfd, a, err);
    client_t c;
    client_start(&c, cfd, &s);
    CHECK_INT(srv_drive(&a, &s, 5000, &err), 1);
    CHECK_INT(tb_auth_srv_welcome(&a, &s, TB_WELCOME_OK, 1, 0, 1, &err), 0);
    uint8_t fb[TB_FRAME_HDR_SIZE + 16];
    REQUIRE(write_all(sfd, fb, frame_bytes(TB_FRAME_TOPOLOGY, 1, "0123456789abcdef", 16, fb))
            == 0);
    client_join(&c);
    CHECK_INT(c.rc, 0);
    tb_frame_t f;
    REQUIRE(read_frame(cfd, TB_FRAME_TOPOLOGY, &f) == 0);
    CHECK_UINT(f.hdr.len, 16);
    if (f.hdr.len == 16)
        CHECK_MEM(f.payload, "0123456789abcdef", 16);
    tb_frame_release(&f);
    close(sfd);
    close(cfd);
}

/* ---- the server's own I/O errors ---- */

TEST(server_send_errors)
{
    tb_session_t s;
    session_of(&s, SESSION, 1);
    tbon_error_t err = { 0 };
    tb_auth_srv_t a;
    /* the peer is gone before the HELLO */
    int sp[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
    close(sp[1]);
    CHECK_INT(tb_auth_srv_start(&a, sp[0], &s, tb_now_ms() + 1000, &err), TBON_EIO);
    CHECK_STR(err.msg, "cannot send HELLO: Broken pipe");
    close(sp[0]);

    /* a peer that reads nothing: the WELCOME finds no room and is not
     * waited for */
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
    REQUIRE(tb_auth_srv_start(&a, sp[0], &s, tb_now_ms() + 1000, &err) == 0);
    tb_hello_t hello;
    tb_frame_t f;
    REQUIRE(read_frame(sp[1], TB_FRAME_HELLO, &f) == 0);
    CHECK_INT(tb_hello_decode(&hello, f.payload, f.hdr.len, &err), 0);
    tb_frame_release(&f);
    tb_handshake_t hs;
    REQUIRE(tb_handshake_make(&hs, &hello, s.secret, s.id, TB_ROLE_COMMNODE,
                              TB_PURPOSE_EVENT, 2, 0, &err) == 0);
    uint8_t p[TB_HANDSHAKE_SIZE], fb[TB_FRAME_HDR_SIZE + TB_HANDSHAKE_SIZE];
    tb_handshake_encode(&hs, p);
    REQUIRE(write_all(sp[1], fb, frame_bytes(TB_FRAME_HANDSHAKE, 2, p, sizeof p, fb)) == 0);
    CHECK_INT(srv_drive(&a, &s, 2000, &err), 1);
    CHECK_UINT(a.hs.role, TB_ROLE_COMMNODE);
    CHECK_UINT(a.hs.purpose, TB_PURPOSE_EVENT);
    static uint8_t junk[1 << 16];
    while (send(sp[0], junk, sizeof junk, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
        ;
    CHECK_INT(tb_auth_srv_welcome(&a, &s, TB_WELCOME_OK, 0, 0, 0, &err), TBON_EIO);
    CHECK_STR(err.msg, "cannot send WELCOME: Resource temporarily unavailable");
    close(sp[0]);
    close(sp[1]);
}
