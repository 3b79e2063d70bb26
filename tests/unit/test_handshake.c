/* test_handshake.c - session secret, HELLO/HANDSHAKE/WELCOME encoding and verification */
#include "../harness.h"

#include <sodium.h>

#include "codec/handshake.h"

static const uint64_t SESSION = 0x0123456789ABCDEFull;

static void secret_of(uint8_t s[TB_SECRET_SIZE], uint8_t seed)
{
    for (int i = 0; i < TB_SECRET_SIZE; i++)
        s[i] = (uint8_t)(seed + 7 * i);
}

/* ---- secret ---- */

TEST(secret_hex_round_trip)
{
    uint8_t s[TB_SECRET_SIZE], t[TB_SECRET_SIZE];
    char hex[TB_SECRET_HEX_SIZE];
    tbon_error_t err;
    REQUIRE(tb_secret_generate(s, &err) == 0);
    tb_secret_to_hex(s, hex);
    CHECK_UINT(strlen(hex), 64);
    CHECK_INT(tb_secret_from_hex(hex, t, &err), 0);
    CHECK_MEM(s, t, TB_SECRET_SIZE);

    secret_of(s, 0xF0);
    tb_secret_to_hex(s, hex);
    CHECK(strncmp(hex, "f0f7fe050c131a21", 16) == 0);
    /* Upper case and the trailing newline of a file are fine. */
    char up[80];
    snprintf(up, sizeof up, "F0F7FE050C131A21%s\r\n", hex + 16);
    memset(t, 0, sizeof t);
    CHECK_INT(tb_secret_from_hex(up, t, &err), 0);
    CHECK_MEM(s, t, TB_SECRET_SIZE);

    uint8_t a[TB_SECRET_SIZE], b[TB_SECRET_SIZE];
    REQUIRE(tb_secret_generate(a, NULL) == 0);
    REQUIRE(tb_secret_generate(b, NULL) == 0);
    CHECK(memcmp(a, b, TB_SECRET_SIZE) != 0);
}

TEST(secret_hex_errors)
{
    uint8_t s[TB_SECRET_SIZE], keep[TB_SECRET_SIZE];
    secret_of(s, 1);
    memcpy(keep, s, sizeof s);
    tbon_error_t err;
    char hex[TB_SECRET_HEX_SIZE + 4];
    memset(hex, 'a', 64);
    hex[64] = '\0';

    hex[63] = '\0';
    CHECK_INT(tb_secret_from_hex(hex, s, &err), TBON_EFORMAT);
    CHECK_INT(err.code, TBON_EFORMAT);
    CHECK_STR(err.msg, "session secret must be 64 hexadecimal digits, got 63 characters");
    hex[63] = 'a';
    hex[64] = 'b';
    hex[65] = '\0';
    CHECK_INT(tb_secret_from_hex(hex, s, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "session secret must be 64 hexadecimal digits, got 65 characters");
    hex[64] = '\0';
    hex[9] = 'g';
    CHECK_INT(tb_secret_from_hex(hex, s, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "session secret: character 10 is not a hexadecimal digit");
    hex[9] = ' ';
    CHECK_INT(tb_secret_from_hex(hex, s, &err), TBON_EFORMAT);
    CHECK_INT(tb_secret_from_hex("", s, &err), TBON_EFORMAT);
    CHECK_INT(tb_secret_from_hex(NULL, s, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "no session secret given");
    CHECK_INT(tb_secret_from_hex(hex, s, NULL), TBON_EFORMAT);
    CHECK_MEM(s, keep, sizeof s);   /* untouched on failure */
}

/* ---- a whole exchange ---- */

typedef struct exchange {
    uint8_t secret[TB_SECRET_SIZE];
    tb_hello_t hello;          /* what the server sent */
    tb_handshake_t hs;         /* what the server received */
    uint8_t hsb[TB_HANDSHAKE_SIZE];
} exchange_t;

/* Server says HELLO; a client holding client_secret answers it as BE rank 7. */
static void start(exchange_t *x, uint64_t client_session, uint8_t client_secret_seed)
{
    uint8_t hb[TB_HELLO_SIZE], csecret[TB_SECRET_SIZE];
    tb_hello_t seen;
    tbon_error_t err;
    secret_of(x->secret, 42);
    secret_of(csecret, client_secret_seed);
    if (tb_hello_make(&x->hello, SESSION, &err) != 0)
        th_fail(__FILE__, __LINE__, "%s", err.msg);
    tb_hello_encode(&x->hello, hb);
    if (tb_hello_decode(&seen, hb, sizeof hb, &err) != 0)
        th_fail(__FILE__, __LINE__, "%s", err.msg);
    tb_handshake_t mine;
    if (tb_handshake_make(&mine, &seen, csecret, client_session, TB_ROLE_BE,
                          TB_PURPOSE_DATA, 7, 3, &err) != 0)
        th_fail(__FILE__, __LINE__, "%s", err.msg);
    tb_handshake_encode(&mine, x->hsb);
    if (tb_handshake_decode(&x->hs, x->hsb, sizeof x->hsb, &err) != 0)
        th_fail(__FILE__, __LINE__, "%s", err.msg);
}

TEST(accepted_handshake)
{
    exchange_t x;
    start(&x, SESSION, 42);
    tbon_error_t err;
    CHECK_INT(tb_hello_check(&x.hello, SESSION, &err), 0);
    CHECK_INT(tb_handshake_verify(&x.hs, &x.hello, x.secret, &err), 0);
    CHECK_UINT(x.hs.version, TB_PROTO_VERSION);
    CHECK_UINT(x.hs.session, SESSION);
    CHECK_UINT(x.hs.role, TB_ROLE_BE);
    CHECK_UINT(x.hs.purpose, TB_PURPOSE_DATA);
    CHECK_UINT(x.hs.rank, 7);
    CHECK_UINT(x.hs.incarnation, 3);

    tb_welcome_t w, got;
    uint8_t wb[TB_WELCOME_SIZE];
    REQUIRE(tb_welcome_make(&w, &x.hs, x.secret, TB_WELCOME_OK, 1, 5, &err) == 0);
    tb_welcome_encode(&w, wb);
    REQUIRE(tb_welcome_decode(&got, wb, sizeof wb, &err) == 0);
    CHECK_UINT(got.status, TB_WELCOME_OK);
    CHECK_UINT(got.rank, 1);
    CHECK_UINT(got.incarnation, 5);
    CHECK_INT(tb_welcome_verify(&got, &x.hs, x.secret, &err), 0);
}

/* The MACs are exactly what docs/protocol.md says: recomputed here from the
 * documented layout with libsodium's one-shot HMAC-SHA256 (RFC 4231 and known
 * answers in test_crypto). */
TEST(mac_inputs_match_the_protocol_document)
{
    exchange_t x;
    start(&x, SESSION, 42);
    uint8_t msg[200], mac[32];
    size_t n = 0;
    memcpy(msg, "tbon handshake v1", 17);
    n = 17;
    memcpy(msg + n, x.hello.nonce, 32);
    n += 32;
    memcpy(msg + n, x.hsb, 52);
    n += 52;
    crypto_auth_hmacsha256(mac, msg, n, x.secret);
    CHECK_MEM(mac, x.hsb + 52, 32);

    tb_welcome_t w;
    uint8_t wb[TB_WELCOME_SIZE];
    REQUIRE(tb_welcome_make(&w, &x.hs, x.secret, TB_WELCOME_REFUSED, 0xAABBCCDD, 2, NULL) == 0);
    tb_welcome_encode(&w, wb);
    static const uint8_t fields[9] = { 4, 0xDD, 0xCC, 0xBB, 0xAA, 2, 0, 0, 0 };
    CHECK_MEM(wb, fields, 9);
    memcpy(msg, "tbon welcome v1", 15);
    n = 15;
    memcpy(msg + n, x.hsb, 84);
    n += 84;
    memcpy(msg + n, wb, 9);
    n += 9;
    crypto_auth_hmacsha256(mac, msg, n, x.secret);
    CHECK_MEM(mac, wb + 9, 32);

    /* Layout of the HANDSHAKE fields. */
    CHECK_UINT(x.hsb[0], 1);
    CHECK_UINT(x.hsb[1], 0);
    CHECK_UINT(x.hsb[2], 0xEF);
    CHECK_UINT(x.hsb[9], 0x01);
    CHECK_UINT(x.hsb[10], TB_ROLE_BE);
    CHECK_UINT(x.hsb[11], TB_PURPOSE_DATA);
    CHECK_UINT(x.hsb[12], 7);
    CHECK_UINT(x.hsb[16], 3);
    CHECK_MEM(x.hsb + 20, x.hs.nonce, 32);
}

TEST(wrong_secret)
{
    exchange_t x;
    start(&x, SESSION, 43);
    tbon_error_t err;
    CHECK_INT(tb_handshake_verify(&x.hs, &x.hello, x.secret, &err), TBON_EAUTH);
    CHECK_STR(err.msg, "HANDSHAKE from BE rank 7 incarnation 3 (data): MAC does not verify "
              "(wrong session secret, altered message, or replayed from another connection)");
    CHECK_UINT(tb_handshake_reject_status(&x.hs, &x.hello), TB_WELCOME_BAD_MAC);
}

TEST(wrong_session)
{
    exchange_t x;
    start(&x, SESSION + 1, 42);
    tbon_error_t err;
    CHECK_INT(tb_handshake_verify(&x.hs, &x.hello, x.secret, &err), TBON_EAUTH);
    CHECK_STR(err.msg, "HANDSHAKE from BE rank 7 (data): session 0123456789abcdf0, "
              "this is session 0123456789abcdef");
    CHECK_UINT(tb_handshake_reject_status(&x.hs, &x.hello), TB_WELCOME_WRONG_SESSION);
    /* The client could have seen it coming from the HELLO. */
    CHECK_INT(tb_hello_check(&x.hello, SESSION + 1, &err), TBON_EAUTH);
    CHECK_STR(err.msg, "server belongs to session 0123456789abcdef, we to session 0123456789abcdf0");
}

TEST(wrong_version)
{
    exchange_t x;
    start(&x, SESSION, 42);
    tbon_error_t err;
    x.hs.version = 2;
    CHECK_INT(tb_handshake_verify(&x.hs, &x.hello, x.secret, &err), TBON_EAUTH);
    CHECK_STR(err.msg, "HANDSHAKE from BE rank 7 (data): protocol version 2, we speak 1");
    CHECK_UINT(tb_handshake_reject_status(&x.hs, &x.hello), TB_WELCOME_BAD_VERSION);
    x.hs.version = 1;
    x.hello.version = 3;
    CHECK_INT(tb_hello_check(&x.hello, SESSION, &err), TBON_EAUTH);
    CHECK_STR(err.msg, "server speaks protocol version 3, we speak 1");
    CHECK_INT(tb_handshake_verify(&x.hs, &x.hello, x.secret, &err), TBON_EAUTH);
}

TEST(replay_against_another_nonce)
{
    exchange_t x;
    start(&x, SESSION, 42);
    tb_hello_t other;
    tbon_error_t err;
    REQUIRE(tb_hello_make(&other, SESSION, &err) == 0);
    CHECK(memcmp(other.nonce, x.hello.nonce, TB_NONCE_SIZE) != 0);
    CHECK_INT(tb_handshake_verify(&x.hs, &x.hello, x.secret, &err), 0);
    CHECK_INT(tb_handshake_verify(&x.hs, &other, x.secret, &err), TBON_EAUTH);
    CHECK(strstr(err.msg, "MAC does not verify") != NULL);
}

/* Every bit of the encoded HANDSHAKE flipped: refused, never accepted. */
TEST(handshake_tampered_every_bit)
{
    exchange_t x;
    start(&x, SESSION, 42);
    int bad = 0;
    for (int i = 0; i < TB_HANDSHAKE_SIZE && bad < 5; i++) {
        for (int bit = 0; bit < 8; bit++) {
            uint8_t b[TB_HANDSHAKE_SIZE];
            memcpy(b, x.hsb, sizeof b);
            b[i] ^= (uint8_t)(1 << bit);
            tb_handshake_t hs;
            tbon_error_t err;
            int rc = tb_handshake_decode(&hs, b, sizeof b, &err);
            int want_format = (i == 10 && b[10] > TB_ROLE_MAX) || (i == 11 && b[11] > TB_PURPOSE_MAX);
            if (rc == 0)
                rc = tb_handshake_verify(&hs, &x.hello, x.secret, &err);
            if (rc != (want_format ? TBON_EFORMAT : TBON_EAUTH)) {
                th_fail(__FILE__, __LINE__, "byte %d bit %d: %d (%s)", i, bit, rc, err.msg);
                bad++;
            }
        }
    }
}

TEST(truncated_and_oversized_messages)
{
    uint8_t buf[TB_HANDSHAKE_SIZE + 2] = { 0 };
    tb_hello_t h;
    tb_handshake_t hs;
    tb_welcome_t w;
    tbon_error_t err;
    for (size_t n = 0; n < sizeof buf; n++) {
        CHECK_INT(tb_hello_decode(&h, buf, n, &err), n == TB_HELLO_SIZE ? 0 : TBON_EFORMAT);
        CHECK_INT(tb_handshake_decode(&hs, buf, n, &err), n == TB_HANDSHAKE_SIZE ? 0 : TBON_EFORMAT);
        CHECK_INT(tb_welcome_decode(&w, buf, n, &err), n == TB_WELCOME_SIZE ? 0 : TBON_EFORMAT);
    }
    CHECK_INT(tb_handshake_decode(&hs, buf, 83, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "HANDSHAKE message is 83 bytes, expected 84");
    CHECK_INT(tb_hello_decode(&h, buf, 43, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "HELLO message is 43 bytes, expected 42");
    CHECK_INT(tb_welcome_decode(&w, buf, 0, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "WELCOME message is 0 bytes, expected 41");
}

TEST(out_of_range_fields)
{
    uint8_t b[TB_HANDSHAKE_SIZE] = { 0 };
    tb_handshake_t hs;
    tbon_error_t err;
    b[10] = 3;
    CHECK_INT(tb_handshake_decode(&hs, b, sizeof b, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "HANDSHAKE: role 3 out of range (0..2)");
    b[10] = 2;
    b[11] = 7;
    CHECK_INT(tb_handshake_decode(&hs, b, sizeof b, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "HANDSHAKE: purpose 7 out of range (0..6)");
    b[11] = 3;
    CHECK_INT(tb_handshake_decode(&hs, b, sizeof b, &err), 0);
    CHECK_UINT(hs.purpose, TB_PURPOSE_ADOPTION);

    uint8_t wb[TB_WELCOME_SIZE] = { 6 };
    tb_welcome_t w;
    CHECK_INT(tb_welcome_decode(&w, wb, sizeof wb, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "WELCOME: status 6 out of range (0..5)");

    /* Making one with bad values is refused too; so is verifying one. */
    tb_hello_t hello;
    uint8_t secret[TB_SECRET_SIZE];
    secret_of(secret, 1);
    REQUIRE(tb_hello_make(&hello, 1, NULL) == 0);
    CHECK_INT(tb_handshake_make(&hs, &hello, secret, 1, 3, 0, 0, 0, &err), TBON_EINVAL);
    CHECK_INT(tb_handshake_make(&hs, &hello, secret, 1, 0, TB_PURPOSE_MAX + 1, 0, 0, &err),
              TBON_EINVAL);
    CHECK_INT(tb_welcome_make(&w, &hs, secret, TB_WELCOME_STATUS_MAX + 1, 0, 0, &err),
              TBON_EINVAL);
    REQUIRE(tb_handshake_make(&hs, &hello, secret, 1, TB_ROLE_COMMNODE, TB_PURPOSE_ADOPTION,
                              4, 0, &err) == 0);
    CHECK_INT(tb_handshake_verify(&hs, &hello, secret, &err), 0);
    hs.role = 9;
    CHECK_INT(tb_handshake_verify(&hs, &hello, secret, &err), TBON_EFORMAT);
}

/* ---- WELCOME: the client checks the server ---- */

TEST(welcome_verify_both_ways)
{
    exchange_t x;
    start(&x, SESSION, 42);
    tbon_error_t err;
    tb_welcome_t w;
    uint8_t other[TB_SECRET_SIZE];
    secret_of(other, 99);

    /* A server without the secret cannot produce a WELCOME we accept. */
    REQUIRE(tb_welcome_make(&w, &x.hs, other, TB_WELCOME_OK, 0, 1, &err) == 0);
    CHECK_INT(tb_welcome_verify(&w, &x.hs, x.secret, &err), TBON_EAUTH);
    CHECK_STR(err.msg, "WELCOME from rank 0: MAC does not verify, the server does not hold "
              "our session secret (its unauthenticated status says \"accepted\")");

    /* An authentic no. */
    REQUIRE(tb_welcome_make(&w, &x.hs, x.secret, TB_WELCOME_REFUSED, 12, 4, &err) == 0);
    CHECK_INT(tb_welcome_verify(&w, &x.hs, x.secret, &err), TBON_ECLOSED);
    CHECK_STR(err.msg, "rank 12 (incarnation 4) did not accept us as BE rank 7 (data): refused");

    /* A WELCOME answers one HANDSHAKE: not another one (other client nonce). */
    exchange_t y;
    start(&y, SESSION, 42);
    REQUIRE(tb_welcome_make(&w, &x.hs, x.secret, TB_WELCOME_OK, 12, 4, &err) == 0);
    CHECK_INT(tb_welcome_verify(&w, &x.hs, x.secret, &err), 0);
    CHECK_INT(tb_welcome_verify(&w, &y.hs, x.secret, &err), TBON_EAUTH);

    /* Every bit of the encoded WELCOME flipped. */
    uint8_t wb[TB_WELCOME_SIZE];
    tb_welcome_encode(&w, wb);
    for (int i = 0; i < TB_WELCOME_SIZE; i++) {
        for (int bit = 0; bit < 8; bit++) {
            uint8_t b[TB_WELCOME_SIZE];
            memcpy(b, wb, sizeof b);
            b[i] ^= (uint8_t)(1 << bit);
            tb_welcome_t t;
            int rc = tb_welcome_decode(&t, b, sizeof b, &err);
            if (rc == 0)
                rc = tb_welcome_verify(&t, &x.hs, x.secret, &err);
            int want = (i == 0 && b[0] > TB_WELCOME_STATUS_MAX) ? TBON_EFORMAT : TBON_EAUTH;
            if (rc != want)
                th_fail(__FILE__, __LINE__, "byte %d bit %d: %d (%s)", i, bit, rc, err.msg);
        }
    }
}

TEST(names)
{
    CHECK_STR(tb_role_name(TB_ROLE_FE), "FE");
    CHECK_STR(tb_role_name(TB_ROLE_COMMNODE), "commnode");
    CHECK_STR(tb_role_name(3), "unknown");
    CHECK_STR(tb_purpose_name(TB_PURPOSE_ATTACH), "attach");
    CHECK_STR(tb_purpose_name(TB_PURPOSE_EVENT), "event");
    CHECK_STR(tb_purpose_name(TB_PURPOSE_RELINK), "relink");
    CHECK_STR(tb_purpose_name(TB_PURPOSE_REATTACH), "reattach");
    CHECK_STR(tb_welcome_status_name(TB_WELCOME_TAKEN), "taken by another front-end");
    CHECK_STR(tb_purpose_name(-1), "unknown");
    CHECK_STR(tb_welcome_status_name(TB_WELCOME_BAD_VERSION), "bad version");
    CHECK_STR(tb_welcome_status_name(TB_WELCOME_WRONG_SESSION), "wrong session");
    CHECK_STR(tb_welcome_status_name(TB_WELCOME_BAD_MAC), "bad MAC");
    CHECK_STR(tb_welcome_status_name(6), "unknown");
}
