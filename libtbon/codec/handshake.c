/* handshake.c - HELLO/HANDSHAKE/WELCOME messages, their MACs, the session secret
 *
 * MACs are HMAC-SHA256 keyed with the session secret over a label (so a MAC
 * made for one message can never pass for another) and the exact encoded
 * bytes, so what is verified is what travelled. Comparisons are constant time.
 * The primitives (HMAC-SHA256, the compare, wiping) are libsodium's; random
 * bytes come from the kernel's generator (getrandom(2), what libsodium's own
 * generator reads on Linux), so that a process that never needs more of
 * libsodium never runs sodium_init(): its CPU probe is a dozen CPUID
 * instructions, each a trap to the hypervisor on a virtual machine (6 us
 * apiece on the one bench/RESULTS.md was measured on), in every process of a
 * tree at every start.
 */
#include "codec/handshake.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>

#include <sodium.h>

#include "util/error.h"
#include "util/endian.h"

/* The secret is an HMAC-SHA256 key as libsodium's one-shot API takes it
 * (ft/notice.c signs its failure notices with that), and a MAC is its output. */
_Static_assert(TB_SECRET_SIZE == crypto_auth_hmacsha256_KEYBYTES, "secret is an HMAC key");
_Static_assert(TB_MAC_SIZE == crypto_auth_hmacsha256_BYTES, "MAC is HMAC-SHA256");

/* MAC labels; part of the protocol (docs/protocol.md). No NUL is hashed. */
static const char HS_LABEL[] = "tbon handshake v1";
static const char WL_LABEL[] = "tbon welcome v1";

#define HS_FIELDS 52   /* HANDSHAKE bytes before the MAC */
#define WL_FIELDS 9    /* WELCOME bytes before the MAC */

const char *tb_role_name(int role)
{
    switch (role) {
    case TB_ROLE_FE:       return "FE";
    case TB_ROLE_COMMNODE: return "commnode";
    case TB_ROLE_BE:       return "BE";
    default:               return "unknown";
    }
}

const char *tb_purpose_name(int purpose)
{
    switch (purpose) {
    case TB_PURPOSE_DATA:     return "data";
    case TB_PURPOSE_EVENT:    return "event";
    case TB_PURPOSE_ATTACH:   return "attach";
    case TB_PURPOSE_ADOPTION: return "adoption";
    case TB_PURPOSE_JOIN:     return "join";
    case TB_PURPOSE_RELINK:   return "relink";
    case TB_PURPOSE_REATTACH: return "reattach";
    default:                  return "unknown";
    }
}

const char *tb_welcome_status_name(int status)
{
    switch (status) {
    case TB_WELCOME_OK:            return "accepted";
    case TB_WELCOME_BAD_VERSION:   return "bad version";
    case TB_WELCOME_WRONG_SESSION: return "wrong session";
    case TB_WELCOME_BAD_MAC:       return "bad MAC";
    case TB_WELCOME_REFUSED:       return "refused";
    case TB_WELCOME_TAKEN:         return "taken by another front-end";
    default:                       return "unknown";
    }
}

/* ---- libsodium ---- */

/* sodium_init() must run before the first randombytes_buf() (it sets up the
 * generator). It is idempotent and thread-safe on its own; pthread_once only
 * spares the later calls its lock, and orders the set-up before every use in
 * a way ThreadSanitizer sees. */
static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;
static int sodium_status;     /* sodium_init()'s result, set once */

static void sodium_setup(void)
{
    sodium_status = sodium_init();
}

int tb_crypto_init(tbon_error_t *err)
{
    pthread_once(&sodium_once, sodium_setup);
    if (sodium_status < 0)
        return tb_error_set(err, TBON_EIO, "libsodium failed to initialise (sodium_init)");
    return 0;
}

/* n random bytes for a what (a secret, a nonce); 0 or TBON_EIO. From
 * getrandom(2), which blocks only until the kernel's generator is seeded
 * once after boot and gives up to 256 bytes whole; a kernel without it
 * (ENOSYS) falls back to libsodium's generator, which aborts the process
 * itself if it cannot give randomness. */
static int random_fill(void *buf, size_t n, const char *what, tbon_error_t *err)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got > 0) {
            p += got;
            n -= (size_t)got;
        } else if (got < 0 && errno != EINTR) {
            break;
        }
    }
    if (n == 0)
        return 0;
    if (tb_crypto_init(NULL) != 0)
        return tb_error_set(err, TBON_EIO, "cannot make %s: no getrandom(2) and libsodium "
                            "failed to initialise (sodium_init)", what);
    randombytes_buf(p, n);
    return 0;
}

/* ---- session secret ---- */

int tb_secret_generate(uint8_t secret[TB_SECRET_SIZE], tbon_error_t *err)
{
    return random_fill(secret, TB_SECRET_SIZE, "the session secret", err);
}

void tb_secret_to_hex(const uint8_t secret[TB_SECRET_SIZE], char out[TB_SECRET_HEX_SIZE])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < TB_SECRET_SIZE; i++) {
        out[2 * i] = digits[secret[i] >> 4];
        out[2 * i + 1] = digits[secret[i] & 15];
    }
    out[2 * TB_SECRET_SIZE] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int tb_secret_from_hex(const char *hex, uint8_t secret[TB_SECRET_SIZE], tbon_error_t *err)
{
    if (!hex)
        return tb_error_set(err, TBON_EFORMAT, "no session secret given");
    size_t n = strlen(hex);
    while (n && (hex[n - 1] == '\n' || hex[n - 1] == '\r' || hex[n - 1] == ' ' ||
                 hex[n - 1] == '\t'))
        n--;
    if (n != 2 * TB_SECRET_SIZE)
        return tb_error_set(err, TBON_EFORMAT, "session secret must be %d hexadecimal "
                            "digits, got %zu characters", 2 * TB_SECRET_SIZE, n);
    uint8_t tmp[TB_SECRET_SIZE];
    for (size_t i = 0; i < n; i++) {
        if (hexval(hex[i]) < 0) {
            sodium_memzero(tmp, sizeof tmp);
            /* The position only: the rest of the string may be a real secret. */
            return tb_error_set(err, TBON_EFORMAT, "session secret: character %zu is not "
                                "a hexadecimal digit", i + 1);
        }
        if (i & 1)
            tmp[i / 2] = (uint8_t)(hexval(hex[i - 1]) << 4 | hexval(hex[i]));
    }
    memcpy(secret, tmp, sizeof tmp);
    sodium_memzero(tmp, sizeof tmp);
    return 0;
}

/* HMAC-SHA256(secret, label || a || b), fed in three pieces: the MAC of the
 * concatenation, without copying it anywhere. Cannot fail. */
static void mac3(const uint8_t secret[TB_SECRET_SIZE], const char *label,
                 const uint8_t *a, size_t na, const uint8_t *b, size_t nb,
                 uint8_t out[TB_MAC_SIZE])
{
    /* The HMAC needs no sodium_init(); final wipes the key-derived state. */
    crypto_auth_hmacsha256_state c;
    crypto_auth_hmacsha256_init(&c, secret, TB_SECRET_SIZE);
    crypto_auth_hmacsha256_update(&c, (const unsigned char *)label, strlen(label));
    crypto_auth_hmacsha256_update(&c, a, na);
    crypto_auth_hmacsha256_update(&c, b, nb);
    crypto_auth_hmacsha256_final(&c, out);
}

/* ---- HELLO ---- */

int tb_hello_make(tb_hello_t *h, uint64_t session, tbon_error_t *err)
{
    h->version = TB_PROTO_VERSION;
    h->session = session;
    return random_fill(h->nonce, TB_NONCE_SIZE, "a HELLO nonce", err);
}

void tb_hello_encode(const tb_hello_t *h, uint8_t out[TB_HELLO_SIZE])
{
    tb_put16(out, h->version);
    tb_put64(out + 2, h->session);
    memcpy(out + 10, h->nonce, TB_NONCE_SIZE);
}

int tb_hello_decode(tb_hello_t *h, const void *buf, size_t len, tbon_error_t *err)
{
    const uint8_t *p = buf;
    if (len != TB_HELLO_SIZE)
        return tb_error_set(err, TBON_EFORMAT, "HELLO message is %zu bytes, expected %d",
                            len, TB_HELLO_SIZE);
    h->version = tb_get16(p);
    h->session = tb_get64(p + 2);
    memcpy(h->nonce, p + 10, TB_NONCE_SIZE);
    return 0;
}

int tb_hello_check(const tb_hello_t *h, uint64_t session, tbon_error_t *err)
{
    if (h->version != TB_PROTO_VERSION)
        return tb_error_set(err, TBON_EAUTH, "server speaks protocol version %u, we speak %d",
                            h->version, TB_PROTO_VERSION);
    if (h->session != session)
        return tb_error_set(err, TBON_EAUTH, "server belongs to session %016" PRIx64
                            ", we to session %016" PRIx64, h->session, session);
    return 0;
}

/* ---- HANDSHAKE ---- */

static void hs_encode_fields(const tb_handshake_t *hs, uint8_t *out)
{
    tb_put16(out, hs->version);
    tb_put64(out + 2, hs->session);
    out[10] = hs->role;
    out[11] = hs->purpose;
    tb_put32(out + 12, hs->rank);
    tb_put32(out + 16, hs->incarnation);
    memcpy(out + 20, hs->nonce, TB_NONCE_SIZE);
}

static void hs_mac(const tb_handshake_t *hs, const tb_hello_t *hello,
                   const uint8_t secret[TB_SECRET_SIZE], uint8_t out[TB_MAC_SIZE])
{
    uint8_t fields[HS_FIELDS];
    hs_encode_fields(hs, fields);
    mac3(secret, HS_LABEL, hello->nonce, TB_NONCE_SIZE, fields, HS_FIELDS, out);
}

int tb_handshake_make(tb_handshake_t *hs, const tb_hello_t *hello,
                      const uint8_t secret[TB_SECRET_SIZE], uint64_t session,
                      uint8_t role, uint8_t purpose, uint32_t rank, uint32_t incarnation,
                      tbon_error_t *err)
{
    if (role > TB_ROLE_MAX || purpose > TB_PURPOSE_MAX)
        return tb_error_set(err, TBON_EINVAL, "handshake: role %u or purpose %u out of range",
                            role, purpose);
    memset(hs, 0, sizeof *hs);
    hs->version = TB_PROTO_VERSION;
    hs->session = session;
    hs->role = role;
    hs->purpose = purpose;
    hs->rank = rank;
    hs->incarnation = incarnation;
    if (random_fill(hs->nonce, TB_NONCE_SIZE, "a HANDSHAKE nonce", err) != 0)
        return TBON_EIO;
    hs_mac(hs, hello, secret, hs->mac);
    return 0;
}

void tb_handshake_encode(const tb_handshake_t *hs, uint8_t out[TB_HANDSHAKE_SIZE])
{
    hs_encode_fields(hs, out);
    memcpy(out + HS_FIELDS, hs->mac, TB_MAC_SIZE);
}

int tb_handshake_decode(tb_handshake_t *hs, const void *buf, size_t len, tbon_error_t *err)
{
    const uint8_t *p = buf;
    if (len != TB_HANDSHAKE_SIZE)
        return tb_error_set(err, TBON_EFORMAT, "HANDSHAKE message is %zu bytes, expected %d",
                            len, TB_HANDSHAKE_SIZE);
    if (p[10] > TB_ROLE_MAX)
        return tb_error_set(err, TBON_EFORMAT, "HANDSHAKE: role %u out of range (0..%d)",
                            p[10], TB_ROLE_MAX);
    if (p[11] > TB_PURPOSE_MAX)
        return tb_error_set(err, TBON_EFORMAT, "HANDSHAKE: purpose %u out of range (0..%d)",
                            p[11], TB_PURPOSE_MAX);
    hs->version = tb_get16(p);
    hs->session = tb_get64(p + 2);
    hs->role = p[10];
    hs->purpose = p[11];
    hs->rank = tb_get32(p + 12);
    hs->incarnation = tb_get32(p + 16);
    memcpy(hs->nonce, p + 20, TB_NONCE_SIZE);
    memcpy(hs->mac, p + HS_FIELDS, TB_MAC_SIZE);
    return 0;
}

uint8_t tb_handshake_reject_status(const tb_handshake_t *hs, const tb_hello_t *hello)
{
    if (hs->version != TB_PROTO_VERSION || hs->version != hello->version)
        return TB_WELCOME_BAD_VERSION;
    if (hs->session != hello->session)
        return TB_WELCOME_WRONG_SESSION;
    return TB_WELCOME_BAD_MAC;
}

int tb_handshake_verify(const tb_handshake_t *hs, const tb_hello_t *hello,
                        const uint8_t secret[TB_SECRET_SIZE], tbon_error_t *err)
{
    if (hs->role > TB_ROLE_MAX || hs->purpose > TB_PURPOSE_MAX)
        return tb_error_set(err, TBON_EFORMAT, "HANDSHAKE: role %u or purpose %u out of range",
                            hs->role, hs->purpose);
    const char *role = tb_role_name(hs->role), *purpose = tb_purpose_name(hs->purpose);
    if (hs->version != TB_PROTO_VERSION || hs->version != hello->version)
        return tb_error_set(err, TBON_EAUTH, "HANDSHAKE from %s rank %" PRIu32 " (%s): "
                            "protocol version %u, we speak %u", role, hs->rank, purpose,
                            hs->version, hello->version);
    if (hs->session != hello->session)
        return tb_error_set(err, TBON_EAUTH, "HANDSHAKE from %s rank %" PRIu32 " (%s): "
                            "session %016" PRIx64 ", this is session %016" PRIx64,
                            role, hs->rank, purpose, hs->session, hello->session);
    uint8_t mac[TB_MAC_SIZE];
    hs_mac(hs, hello, secret, mac);
    if (sodium_memcmp(mac, hs->mac, TB_MAC_SIZE) != 0)
        return tb_error_set(err, TBON_EAUTH, "HANDSHAKE from %s rank %" PRIu32
                            " incarnation %" PRIu32 " (%s): MAC does not verify "
                            "(wrong session secret, altered message, or replayed "
                            "from another connection)", role, hs->rank, hs->incarnation, purpose);
    return 0;
}

/* ---- WELCOME ---- */

static void wl_encode_fields(const tb_welcome_t *w, uint8_t *out)
{
    out[0] = w->status;
    tb_put32(out + 1, w->rank);
    tb_put32(out + 5, w->incarnation);
}

/* The MAC covers the client's whole HANDSHAKE (its nonce, its fields, and its
 * MAC, which covers the server nonce): the WELCOME answers that one message. */
static void wl_mac(const tb_welcome_t *w, const tb_handshake_t *hs,
                   const uint8_t secret[TB_SECRET_SIZE], uint8_t out[TB_MAC_SIZE])
{
    uint8_t hsb[TB_HANDSHAKE_SIZE], fields[WL_FIELDS];
    tb_handshake_encode(hs, hsb);
    wl_encode_fields(w, fields);
    mac3(secret, WL_LABEL, hsb, TB_HANDSHAKE_SIZE, fields, WL_FIELDS, out);
}

int tb_welcome_make(tb_welcome_t *w, const tb_handshake_t *hs,
                    const uint8_t secret[TB_SECRET_SIZE], uint8_t status,
                    uint32_t rank, uint32_t incarnation, tbon_error_t *err)
{
    if (status > TB_WELCOME_STATUS_MAX)
        return tb_error_set(err, TBON_EINVAL, "WELCOME status %u out of range", status);
    memset(w, 0, sizeof *w);
    w->status = status;
    w->rank = rank;
    w->incarnation = incarnation;
    wl_mac(w, hs, secret, w->mac);
    return 0;
}

void tb_welcome_encode(const tb_welcome_t *w, uint8_t out[TB_WELCOME_SIZE])
{
    wl_encode_fields(w, out);
    memcpy(out + WL_FIELDS, w->mac, TB_MAC_SIZE);
}

int tb_welcome_decode(tb_welcome_t *w, const void *buf, size_t len, tbon_error_t *err)
{
    const uint8_t *p = buf;
    if (len != TB_WELCOME_SIZE)
        return tb_error_set(err, TBON_EFORMAT, "WELCOME message is %zu bytes, expected %d",
                            len, TB_WELCOME_SIZE);
    if (p[0] > TB_WELCOME_STATUS_MAX)
        return tb_error_set(err, TBON_EFORMAT, "WELCOME: status %u out of range (0..%d)",
                            p[0], TB_WELCOME_STATUS_MAX);
    w->status = p[0];
    w->rank = tb_get32(p + 1);
    w->incarnation = tb_get32(p + 5);
    memcpy(w->mac, p + WL_FIELDS, TB_MAC_SIZE);
    return 0;
}

int tb_welcome_verify(const tb_welcome_t *w, const tb_handshake_t *hs,
                      const uint8_t secret[TB_SECRET_SIZE], tbon_error_t *err)
{
    uint8_t mac[TB_MAC_SIZE];
    wl_mac(w, hs, secret, mac);
    if (sodium_memcmp(mac, w->mac, TB_MAC_SIZE) != 0)
        return tb_error_set(err, TBON_EAUTH, "WELCOME from rank %" PRIu32 ": MAC does not "
                            "verify, the server does not hold our session secret (its "
                            "unauthenticated status says \"%s\")", w->rank,
                            tb_welcome_status_name(w->status));
    if (w->status != TB_WELCOME_OK)
        return tb_error_set(err, TBON_ECLOSED, "rank %" PRIu32 " (incarnation %" PRIu32
                            ") did not accept us as %s rank %" PRIu32 " (%s): %s",
                            w->rank, w->incarnation, tb_role_name(hs->role), hs->rank,
                            tb_purpose_name(hs->purpose), tb_welcome_status_name(w->status));
    return 0;
}
