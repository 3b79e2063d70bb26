/* auth.c - the connection handshake over sockets (docs/protocol.md, section 4) */
#include "net/auth.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "util/error.h"
#include "net/sock.h"


int tb_auth_client(int fd, const tb_session_t *s, uint8_t role, uint8_t purpose,
                   uint32_t rank, uint32_t incarnation, int64_t deadline_ms,
                   tb_welcome_t *w, tbon_error_t *err)
{
    tb_frame_t f;
    tb_hello_t hello;
    tb_handshake_t hs;
    int rc = tb_sock_recv_frame(fd, TB_FRAME_MAX_HANDSHAKE, &f, deadline_ms, err);
    if (rc)
        return rc;
    if (f.hdr.type != TB_FRAME_HELLO) {
        tb_frame_release(&f);
        return tb_error_set(err, TBON_EAUTH, "expected HELLO, got %s", tb_frame_type_name(f.hdr.type));
    }
    rc = tb_hello_decode(&hello, f.payload, f.hdr.len, err);
    tb_frame_release(&f);
    if (rc)
        return rc;
    rc = tb_hello_check(&hello, s->id, err);
    if (rc)
        return rc;
    rc = tb_handshake_make(&hs, &hello, s->secret, s->id, role, purpose, rank, incarnation, err);
    if (rc)
        return rc;
    uint8_t out[TB_HANDSHAKE_SIZE];
    tb_handshake_encode(&hs, out);
    tb_frame_hdr_t h = { .type = TB_FRAME_HANDSHAKE, .source = rank };
    rc = tb_sock_send_frame(fd, &h, out, sizeof out, deadline_ms, err);
    if (rc)
        return rc;
    rc = tb_sock_recv_frame(fd, TB_FRAME_MAX_HANDSHAKE, &f, deadline_ms, err);
    if (rc)
        return rc;
    if (f.hdr.type != TB_FRAME_WELCOME) {
        tb_frame_release(&f);
        return tb_error_set(err, TBON_EAUTH, "expected WELCOME, got %s", tb_frame_type_name(f.hdr.type));
    }
    rc = tb_welcome_decode(w, f.payload, f.hdr.len, err);
    tb_frame_release(&f);
    if (rc)
        return rc;
    if (w->status != TB_WELCOME_OK)
        return tb_error_set(err, TBON_EAUTH, "refused by rank %u: %s", w->rank,
                            tb_welcome_status_name(w->status));
    return tb_welcome_verify(w, &hs, s->secret, err);
}

static int send_all_nb(int fd, const uint8_t *b, size_t n, int flags)
{
    while (n > 0) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT | flags);
        if (k > 0) {
            b += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        /* A fresh socket's buffer holds a handshake many times over; a full one
         * means a peer that does not read, which we need not wait for. */
        return TBON_EIO;
    }
    return 0;
}

static int srv_send(tb_auth_srv_t *a, uint8_t type, const void *payload, size_t len,
                    uint32_t rank, int flags)
{
    tb_frame_hdr_t h = { .type = type, .source = rank };
    uint8_t hdr[TB_FRAME_HDR_SIZE];
    h.len = (uint32_t)len;
    tb_frame_hdr_encode(&h, payload, hdr);
    uint8_t buf[TB_FRAME_HDR_SIZE + 128];
    memcpy(buf, hdr, sizeof hdr);
    memcpy(buf + sizeof hdr, payload, len);
    return send_all_nb(a->fd, buf, sizeof hdr + len, flags);
}

int tb_auth_srv_start(tb_auth_srv_t *a, int fd, const tb_session_t *s, int64_t deadline_ms,
                      tbon_error_t *err)
{
    memset(a, 0, sizeof *a);
    a->fd = fd;
    a->deadline_ms = deadline_ms;
    a->need = TB_FRAME_HDR_SIZE;
    int rc = tb_hello_make(&a->hello, s->id, err);
    if (rc)
        return rc;
    uint8_t out[TB_HELLO_SIZE];
    tb_hello_encode(&a->hello, out);
    if (srv_send(a, TB_FRAME_HELLO, out, sizeof out, 0, 0))
        return tb_error_set(err, TBON_EIO, "cannot send HELLO: %s", strerror(errno));
    return 0;
}

int tb_auth_srv_read(tb_auth_srv_t *a, const tb_session_t *s, tbon_error_t *err)
{
    while (a->have < a->need) {
        ssize_t n = recv(a->fd, a->buf + a->have, a->need - a->have, MSG_DONTWAIT);
        if (n == 0)
            return tb_error_set(err, TBON_ECLOSED, "peer closed during the handshake");
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            return tb_error_set(err, TBON_EIO, "handshake: %s", strerror(errno));
        }
        a->have += (size_t)n;
        if (a->have == TB_FRAME_HDR_SIZE && a->need == TB_FRAME_HDR_SIZE) {
            uint32_t len = (uint32_t)a->buf[8] | (uint32_t)a->buf[9] << 8 |
                           (uint32_t)a->buf[10] << 16 | (uint32_t)a->buf[11] << 24;
            if (len > TB_FRAME_MAX_HANDSHAKE)
                return tb_error_set(err, TBON_EFORMAT,
                                    "handshake frame of %u bytes (at most %u)", len,
                                    TB_FRAME_MAX_HANDSHAKE);
            a->need = TB_FRAME_HDR_SIZE + len;
        }
    }
    tb_fdec_t *d = tb_fdec_new(TB_FRAME_MAX_HANDSHAKE);
    if (!d)
        return tb_error_set(err, TBON_ENOMEM, "out of memory");
    tb_frame_t f;
    tb_fdec_feed(d, a->buf, a->have);
    int rc = tb_fdec_next(d, &f);
    if (rc != 1) {
        rc = tb_error_set(err, TBON_EFORMAT, "bad handshake frame: %s", tb_fdec_error(d));
        tb_fdec_destroy(d);
        return rc;
    }
    tb_fdec_destroy(d);
    if (f.hdr.type != TB_FRAME_HANDSHAKE) {
        tb_frame_release(&f);
        return tb_error_set(err, TBON_EAUTH, "expected HANDSHAKE, got %s",
                            tb_frame_type_name(f.hdr.type));
    }
    rc = tb_handshake_decode(&a->hs, f.payload, f.hdr.len, err);
    tb_frame_release(&f);
    if (rc)
        return rc;
    rc = tb_handshake_verify(&a->hs, &a->hello, s->secret, err);
    if (rc) {
        /* Tell an honest peer with a stale session why; the WELCOME carries
         * no MAC it could use. */
        tb_welcome_t w = { .status = tb_handshake_reject_status(&a->hs, &a->hello) };
        uint8_t out[TB_WELCOME_SIZE];
        tb_welcome_encode(&w, out);
        srv_send(a, TB_FRAME_WELCOME, out, sizeof out, 0, 0);
        return rc;
    }
    return 1;
}

int tb_auth_srv_welcome(tb_auth_srv_t *a, const tb_session_t *s, uint8_t status,
                        uint32_t rank, uint32_t incarnation, int more, tbon_error_t *err)
{
    tb_welcome_t w;
    int rc = tb_welcome_make(&w, &a->hs, s->secret, status, rank, incarnation, err);
    if (rc)
        return rc;
    uint8_t out[TB_WELCOME_SIZE];
    tb_welcome_encode(&w, out);
    if (srv_send(a, TB_FRAME_WELCOME, out, sizeof out, rank, more ? MSG_MORE : 0))
        return tb_error_set(err, TBON_EIO, "cannot send WELCOME: %s", strerror(errno));
    return 0;
}
