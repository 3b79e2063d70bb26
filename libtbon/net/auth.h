/* auth.h - running the HELLO/HANDSHAKE/WELCOME exchange over a socket:
 * blocking on the connecting side, a non-blocking state machine on the
 * accepting side (the EDS thread must never wait for one slow peer) */
#ifndef TB_AUTH_H
#define TB_AUTH_H

#include <stdint.h>

#include <tbon/tbon.h>

#include "codec/handshake.h"
#include "codec/wire.h"

/* What both sides of a session know. */
typedef struct tb_session {
    uint64_t id;
    uint8_t  secret[TB_SECRET_SIZE];
} tb_session_t;

/* Connecting side: read HELLO, send HANDSHAKE (as role/purpose/rank/inc),
 * read WELCOME and verify it, all before deadline_ms. Returns 0 with *w
 * filled, TBON_EAUTH if the server refused or failed its proof (the status
 * is named in err), or the I/O error. */
int tb_auth_client(int fd, const tb_session_t *s, uint8_t role, uint8_t purpose,
                   uint32_t rank, uint32_t incarnation, int64_t deadline_ms,
                   tb_welcome_t *w, tbon_error_t *err);

/* Accepting side, one per pending connection. */
typedef struct tb_auth_srv {
    int      fd;
    int64_t  deadline_ms;
    tb_hello_t hello;
    uint8_t  buf[TB_FRAME_HDR_SIZE + TB_FRAME_MAX_HANDSHAKE];
    size_t   have, need;
    tb_handshake_t hs;       /* valid once tb_auth_srv_read returned 1 */
} tb_auth_srv_t;

/* Start: send HELLO on the (non-blocking) fd. 0, or an error (close fd). */
int tb_auth_srv_start(tb_auth_srv_t *a, int fd, const tb_session_t *s, int64_t deadline_ms,
                      tbon_error_t *err);

/* Call when fd is readable: 0 = need more, 1 = the HANDSHAKE has arrived and
 * its MAC is valid (a->hs says who), < 0 = refused or broken (a WELCOME with
 * the reason has been sent when there was one to send; close fd). Reads no
 * byte beyond the HANDSHAKE frame. */
int tb_auth_srv_read(tb_auth_srv_t *a, const tb_session_t *s, tbon_error_t *err);

/* Answer an authentic peer: WELCOME with status (TB_WELCOME_OK or
 * TB_WELCOME_REFUSED) and our rank. With more, the WELCOME is held back
 * (MSG_MORE) until the next write on fd or its close, so that it reaches the
 * peer together with what must follow it: the first frames of a data
 * connection, an adoption's answer. 0 or an I/O error. */
int tb_auth_srv_welcome(tb_auth_srv_t *a, const tb_session_t *s, uint8_t status,
                        uint32_t rank, uint32_t incarnation, int more, tbon_error_t *err);

#endif
