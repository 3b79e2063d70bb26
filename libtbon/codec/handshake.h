/* handshake.h - the connection handshake (HELLO, HANDSHAKE, WELCOME) and the session secret
 *
 * Pure encode/decode/verify; the connection layer moves the bytes, as the
 * payloads of TB_FRAME_HELLO, TB_FRAME_HANDSHAKE and TB_FRAME_WELCOME frames:
 *   server -> client  HELLO      version, session id, server nonce
 *   client -> server  HANDSHAKE  version, session id, role, purpose, rank,
 *                                incarnation, client nonce, HMAC-SHA256
 *   server -> client  WELCOME    status, server rank and incarnation, HMAC
 * Both sides prove they hold the session secret, each over the other's fresh
 * nonce, so neither message can be replayed on another connection.
 * docs/protocol.md has the byte layouts and the exact MAC inputs.
 */
#ifndef TB_HANDSHAKE_H
#define TB_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include <tbon/tbon.h>

#include "topo/topology.h"

#define TB_PROTO_VERSION   1
#define TB_SECRET_SIZE     32
#define TB_SECRET_HEX_SIZE (2 * TB_SECRET_SIZE + 1)   /* with the NUL */
#define TB_NONCE_SIZE      32
#define TB_MAC_SIZE        32
#define TB_HELLO_SIZE      42   /* 2 + 8 + 32 */
#define TB_HANDSHAKE_SIZE  84   /* 2 + 8 + 1 + 1 + 4 + 4 + 32 + 32 */
#define TB_WELCOME_SIZE    41   /* 1 + 4 + 4 + 32 */

/* Who is connecting: tb_role_t of topology.h, whose values are part of the
 * protocol (FE 0, commnode 1, BE 2). */
#define TB_ROLE_MAX TB_ROLE_BE

/* What the connection is for; values are part of the protocol. */
enum tb_purpose {
    TB_PURPOSE_DATA = 0,       /* data plane: packets */
    TB_PURPOSE_EVENT = 1,      /* control plane: heartbeats, reports, membership */
    TB_PURPOSE_ATTACH = 2,     /* a BE started elsewhere joining through the attach file */
    TB_PURPOSE_ADOPTION = 3,   /* an orphan asking to be adopted */
    TB_PURPOSE_JOIN = 4,       /* a new BE asking the FE for a rank and a parent */
    TB_PURPOSE_RELINK = 5,     /* a child whose data connection broke, back to the same
                                  parent: the link layer resends (docs/protocol.md 2.4) */
    TB_PURPOSE_REATTACH = 6,   /* a new front-end claiming a child of the one that left
                                  (docs/protocol.md 8.7); incarnation: 0 */
};
#define TB_PURPOSE_MAX TB_PURPOSE_REATTACH

/* WELCOME status; values are part of the protocol. */
enum tb_welcome_status {
    TB_WELCOME_OK = 0,
    TB_WELCOME_BAD_VERSION = 1,
    TB_WELCOME_WRONG_SESSION = 2,
    TB_WELCOME_BAD_MAC = 3,
    TB_WELCOME_REFUSED = 4,    /* authentic, but not accepted (e.g. adoption declined) */
    TB_WELCOME_TAKEN = 5,      /* a reattach: the session has a front-end, or another
                                  one is reattaching */
};
#define TB_WELCOME_STATUS_MAX TB_WELCOME_TAKEN

typedef struct tb_hello {
    uint16_t version;
    uint64_t session;
    uint8_t  nonce[TB_NONCE_SIZE];
} tb_hello_t;

typedef struct tb_handshake {
    uint16_t version;
    uint64_t session;
    uint8_t  role;         /* enum tb_role */
    uint8_t  purpose;      /* enum tb_purpose */
    uint32_t rank;
    uint32_t incarnation;
    uint8_t  nonce[TB_NONCE_SIZE];
    uint8_t  mac[TB_MAC_SIZE];
} tb_handshake_t;

typedef struct tb_welcome {
    uint8_t  status;       /* enum tb_welcome_status */
    uint32_t rank;         /* the server's */
    uint32_t incarnation;
    uint8_t  mac[TB_MAC_SIZE];
} tb_welcome_t;

/* ---- session secret ---- */

/* Set up libsodium (sodium_init) once per process; any thread may call it,
 * any number of times. The functions below that need randomness call it
 * themselves; other code calls it before its own first randombytes_buf().
 * 0, or TBON_EIO with err filled. */
int tb_crypto_init(tbon_error_t *err);

/* Fill secret with TB_SECRET_SIZE random bytes (libsodium's randombytes_buf,
 * which reads getrandom(2)). Returns 0, or TBON_EIO with err filled. */
int tb_secret_generate(uint8_t secret[TB_SECRET_SIZE], tbon_error_t *err);

/* Write the secret as 64 lower-case hex digits and a NUL. */
void tb_secret_to_hex(const uint8_t secret[TB_SECRET_SIZE], char out[TB_SECRET_HEX_SIZE]);

/* Parse exactly 64 hex digits (either case; trailing whitespace such as the
 * newline of a file is ignored). Returns 0, or TBON_EFORMAT with err naming
 * the problem; secret is only written on success. */
int tb_secret_from_hex(const char *hex, uint8_t secret[TB_SECRET_SIZE], tbon_error_t *err);

/* ---- HELLO (server -> client) ---- */

/* A HELLO for session with TB_PROTO_VERSION and a fresh random nonce, which
 * the server must keep to verify the HANDSHAKE. Returns 0 or TBON_EIO. */
int tb_hello_make(tb_hello_t *h, uint64_t session, tbon_error_t *err);
/* Write the 42 bytes of the message (docs/protocol.md, section 4). */
void tb_hello_encode(const tb_hello_t *h, uint8_t out[TB_HELLO_SIZE]);
/* Decode exactly TB_HELLO_SIZE bytes; returns 0 or TBON_EFORMAT. */
int tb_hello_decode(tb_hello_t *h, const void *buf, size_t len, tbon_error_t *err);
/* Client side: 0 if the server speaks our version and is in our session,
 * else TBON_EAUTH naming both values. */
int tb_hello_check(const tb_hello_t *h, uint64_t session, tbon_error_t *err);

/* ---- HANDSHAKE (client -> server) ---- */

/* Client side: fill hs (TB_PROTO_VERSION, a fresh client nonce) and its MAC
 * over hello's nonce. Returns 0, TBON_EINVAL (role or purpose out of range)
 * or TBON_EIO (no randomness). */
int tb_handshake_make(tb_handshake_t *hs, const tb_hello_t *hello,
                      const uint8_t secret[TB_SECRET_SIZE], uint64_t session,
                      uint8_t role, uint8_t purpose, uint32_t rank, uint32_t incarnation,
                      tbon_error_t *err);
/* Write the 84 bytes of the message (docs/protocol.md, section 4). */
void tb_handshake_encode(const tb_handshake_t *hs, uint8_t out[TB_HANDSHAKE_SIZE]);
/* Decode exactly TB_HANDSHAKE_SIZE bytes, role and purpose in range; returns
 * 0 or TBON_EFORMAT. */
int tb_handshake_decode(tb_handshake_t *hs, const void *buf, size_t len, tbon_error_t *err);
/* Server side: 0 if hs answers the HELLO we sent (same version and session,
 * MAC over our nonce with secret). TBON_EAUTH otherwise, TBON_EFORMAT for
 * out-of-range fields; err names the peer's role and rank and what failed.
 * tb_handshake_reject_status() maps the failure to a WELCOME status. */
int tb_handshake_verify(const tb_handshake_t *hs, const tb_hello_t *hello,
                        const uint8_t secret[TB_SECRET_SIZE], tbon_error_t *err);
/* The WELCOME status telling the peer why tb_handshake_verify failed. */
uint8_t tb_handshake_reject_status(const tb_handshake_t *hs, const tb_hello_t *hello);

/* ---- WELCOME (server -> client) ---- */

/* Server side: fill w with status, our rank and incarnation, and a MAC over
 * the client's nonce binding it to hs. Returns 0 or TBON_EINVAL (status). */
int tb_welcome_make(tb_welcome_t *w, const tb_handshake_t *hs,
                    const uint8_t secret[TB_SECRET_SIZE], uint8_t status,
                    uint32_t rank, uint32_t incarnation, tbon_error_t *err);
/* Write the 41 bytes of the message (docs/protocol.md, section 4). */
void tb_welcome_encode(const tb_welcome_t *w, uint8_t out[TB_WELCOME_SIZE]);
/* Decode exactly TB_WELCOME_SIZE bytes, status in range; 0 or TBON_EFORMAT. */
int tb_welcome_decode(tb_welcome_t *w, const void *buf, size_t len, tbon_error_t *err);
/* Client side, hs being the HANDSHAKE we sent: 0 if the MAC proves the server
 * holds the secret and it accepted us; TBON_EAUTH if the MAC does not verify
 * (the status is then untrustworthy); TBON_ECLOSED if an authentic WELCOME
 * says no (w->status tells why). */
int tb_welcome_verify(const tb_welcome_t *w, const tb_handshake_t *hs,
                      const uint8_t secret[TB_SECRET_SIZE], tbon_error_t *err);

/* Names for messages: "FE", "commnode", "BE"; "data", "event", "attach",
 * "adoption"; "accepted", "bad version", ... ("unknown" when out of range). */
const char *tb_role_name(int role);
const char *tb_purpose_name(int purpose);
const char *tb_welcome_status_name(int status);

#endif
