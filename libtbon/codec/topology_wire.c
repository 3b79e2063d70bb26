/* topology_wire.c - the topology as bytes: what a parent sends each child at
 * start-up (the wire layer may zlib-compress it) and what joins carry.
 *
 * Layout (all integers unsigned LEB128 varints unless said otherwise):
 *
 *   u8      version (1)
 *   nhosts, then per host: length (1..255), the name's bytes
 *   n       number of nodes (ranks 0 .. n-1)
 *   six columns of n values each, rank order:
 *     parent       zigzag(p - previous p), p = parent + 1 (0 = none)
 *     host         zigzag(h - previous h)
 *     local id     zigzag(id - (previous id on the same host + 1))
 *     incarnation
 *     port
 *     flags        one byte: bit 0 alive, bits 1-2 role (0 FE, 1 commnode, 2 BE)
 *
 * Deltas make the usual values 0 or 1, so a node costs about six bytes (the
 * 1,082,401-node 32^4 tree is 6.5 MB raw) and columns of equal bytes compress
 * to almost nothing. The decoder validates every count against the bytes that
 * remain before allocating, every value against its range, and finally the
 * structure (tb_topology_load_finish): any input is safe.
 */
#include "topo/topology.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "topo/topology_util.h"

#define WIRE_VERSION 1
#define NCOLS        6

typedef struct wbuf {
    uint8_t *p;
    size_t   len, cap;
    bool     failed;
} wbuf_t;

static void put_bytes(wbuf_t *b, const void *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void put_varint(wbuf_t *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    put_bytes(b, tmp, n);
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

int tb_topology_serialize(const tb_topology_t *t, uint8_t **buf, size_t *len)
{
    size_t n = tb_topology_size(t);
    uint32_t nh = t ? tb_topology_num_hosts(t) : 0;
    if (!n || !buf || !len)
        return TBON_EINVAL;
    int64_t *last = malloc(nh * sizeof *last);
    if (!last)
        return TBON_ENOMEM;
    wbuf_t b = { 0 };
    uint8_t v = WIRE_VERSION;
    put_bytes(&b, &v, 1);
    put_varint(&b, nh);
    for (uint32_t i = 0; i < nh; i++) {
        const char *h = tb_topology_host_name(t, i);
        size_t hl = strlen(h);
        put_varint(&b, hl);
        put_bytes(&b, h, hl);
    }
    put_varint(&b, n);
    int64_t prev = 0;
    for (uint32_t r = 0; r < n; r++) {
        tbon_rank_t p = tb_topology_parent(t, r);
        int64_t cur = p == TBON_RANK_NONE ? 0 : (int64_t)p + 1;
        put_varint(&b, zigzag(cur - prev));
        prev = cur;
    }
    prev = 0;
    for (uint32_t r = 0; r < n; r++) {
        int64_t h = tb_topology_host_index(t, r);
        put_varint(&b, zigzag(h - prev));
        prev = h;
    }
    for (uint32_t i = 0; i < nh; i++)
        last[i] = -1;
    for (uint32_t r = 0; r < n; r++) {
        uint32_t h = tb_topology_host_index(t, r);
        int64_t id = tb_topology_local_id(t, r);
        put_varint(&b, zigzag(id - (last[h] + 1)));
        last[h] = id;
    }
    for (uint32_t r = 0; r < n; r++)
        put_varint(&b, tb_topology_incarnation(t, r));
    for (uint32_t r = 0; r < n; r++)
        put_varint(&b, tb_topology_port(t, r));
    for (uint32_t r = 0; r < n; r++) {
        uint8_t f = (uint8_t)(tb_topology_alive(t, r) | tb_topology_role(t, r) << 1);
        put_bytes(&b, &f, 1);
    }
    free(last);
    if (b.failed) {
        free(b.p);
        return TBON_ENOMEM;
    }
    *buf = b.p;
    *len = b.len;
    return 0;
}

/* ---- decoding ------------------------------------------------------------ */

typedef struct rd {
    const uint8_t *p, *end;
} rd_t;

/* A varint of at most 10 bytes that fits 64 bits; false if truncated or bad. */
static bool get_varint(rd_t *r, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (r->p == r->end)
            return false;
        uint8_t c = *r->p++;
        if (shift == 63 && c > 1)
            return false;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

__attribute__((format(printf, 2, 3)))
static tb_topology_t *fail(tbon_error_t *err, const char *fmt, ...)
{
    char msg[440];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tb_error_set(err, TBON_EFORMAT, "serialised topology: %s", msg);
    return NULL;
}

static const char *const col_name[NCOLS] = {
    "parent", "host", "local id", "incarnation", "port", "flags",
};

/* The host table: nh names, each interned in t at its own index. 0,
 * TBON_EFORMAT (err says what) or TBON_ENOMEM. */
static int read_hosts(rd_t *r, tb_topology_t *t, uint64_t nh, tbon_error_t *err)
{
    uint64_t v;
    for (uint32_t i = 0; i < nh; i++) {
        if (!get_varint(r, &v)) {
            fail(err, "truncated");
            return TBON_EFORMAT;
        }
        if (v == 0 || v > TB_TOPOLOGY_MAX_HOST || v > (size_t)(r->end - r->p)) {
            fail(err, "host %u has a bad length %llu", i, (unsigned long long)v);
            return TBON_EFORMAT;
        }
        const char *h = (const char *)r->p;
        r->p += v;
        if (tb_topology_check_host(h, (size_t)v) != 0) {
            fail(err, "host %u is not a valid host name", i);
            return TBON_EFORMAT;
        }
        uint32_t idx;
        if (tb_topology_intern_host(t, h, (size_t)v, &idx) != 0)
            return TBON_ENOMEM;
        if (idx != i) {
            fail(err, "host %u repeats host %u", i, idx);
            return TBON_EFORMAT;
        }
    }
    return 0;
}

/* Where each of the NCOLS columns of n entries starts and ends (col), the
 * last ending with the bytes. 0 or TBON_EFORMAT (err). */
static int find_columns(const rd_t *r, uint64_t n, rd_t col[NCOLS], tbon_error_t *err)
{
    uint64_t v;
    col[0].p = r->p;
    for (int c = 0; c < NCOLS; c++) {
        col[c].end = r->end;
        if (c > 0)
            col[c].p = col[c - 1].end;
        rd_t s = { col[c].p, r->end };
        for (uint64_t i = 0; i < n; i++) {
            if (c == NCOLS - 1) {
                if (s.p == s.end) {
                    fail(err, "truncated");
                    return TBON_EFORMAT;
                }
                s.p++;
            } else if (!get_varint(&s, &v)) {
                fail(err, "truncated or bad varint in the %s column at rank %llu",
                     col_name[c], (unsigned long long)i);
                return TBON_EFORMAT;
            }
        }
        col[c].end = s.p;
    }
    if (col[NCOLS - 1].end != r->end) {
        fail(err, "trailing bytes after the last column: %zu",
             (size_t)(r->end - col[NCOLS - 1].end));
        return TBON_EFORMAT;
    }
    return 0;
}

/* The n nodes, read from the columns side by side (each checked) into t.
 * last: nh entries, the last local id seen per host. 0, TBON_EFORMAT (err)
 * or TBON_ENOMEM. */
static int read_nodes(rd_t col[NCOLS], tb_topology_t *t, uint64_t n, uint64_t nh,
                      int64_t *last, tbon_error_t *err)
{
    int64_t pprev = 0, hprev = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t dp, dh, did, inc, port;
        get_varint(&col[0], &dp);   /* the columns were scanned already */
        get_varint(&col[1], &dh);
        get_varint(&col[2], &did);
        get_varint(&col[3], &inc);
        get_varint(&col[4], &port);
        uint8_t flags = *col[5].p++;
        int64_t d = unzigzag(dp);
        if (d < -pprev || d > (int64_t)n - pprev) {
            fail(err, "rank %u has a parent out of range", i);
            return TBON_EFORMAT;
        }
        pprev += d;
        d = unzigzag(dh);
        if (d < -hprev || d > (int64_t)nh - 1 - hprev) {
            fail(err, "rank %u has a host index out of range", i);
            return TBON_EFORMAT;
        }
        hprev += d;
        d = unzigzag(did);
        int64_t base = last[hprev] + 1;
        if (d < -base || d > (int64_t)TB_TOPOLOGY_MAX_ID - base) {
            fail(err, "rank %u has a local id out of range", i);
            return TBON_EFORMAT;
        }
        last[hprev] = base + d;
        if (inc > UINT32_MAX || port > UINT16_MAX || (flags >> 1) > TB_ROLE_BE) {
            fail(err, "rank %u has a bad incarnation, port or flags", i);
            return TBON_EFORMAT;
        }
        int rc = tb_topology_load_node(t, (uint32_t)hprev, (uint32_t)(base + d),
                                       pprev ? (tbon_rank_t)(pprev - 1) : TBON_RANK_NONE,
                                       (tb_role_t)(flags >> 1), flags & 1, (uint32_t)inc,
                                       (uint16_t)port);
        if (rc == TBON_ENOMEM)
            return TBON_ENOMEM;
        if (rc) {
            fail(err, "rank %u repeats the name \"%s:%u\"", i,
                 tb_topology_host_name(t, (uint32_t)hprev), (uint32_t)(base + d));
            return TBON_EFORMAT;
        }
    }
    return 0;
}

tb_topology_t *tb_topology_deserialize(const void *buf, size_t len, tbon_error_t *err)
{
    rd_t r = { buf, (const uint8_t *)buf + len };
    tb_topology_t *t = NULL;
    int64_t *last = NULL;
    uint64_t nh, n;
    int rc;
    if (!buf || len == 0)
        return fail(err, "no bytes");
    if (*r.p++ != WIRE_VERSION)
        return fail(err, "unknown version %u (this is version %u)", ((const uint8_t *)buf)[0],
                    WIRE_VERSION);
    if (!get_varint(&r, &nh))
        return fail(err, "truncated before the host count");
    /* Each host takes at least two bytes and each node six, so counts beyond
     * what the remaining bytes can hold are rejected before any allocation. */
    if (nh == 0 || nh > TB_TOPOLOGY_MAX_NODES || nh > (size_t)(r.end - r.p) / 2)
        return fail(err, "bad host count %llu for %zu remaining bytes",
                     (unsigned long long)nh, (size_t)(r.end - r.p));
    if (!(t = tb_topology_new()))
        goto oom;
    if ((rc = read_hosts(&r, t, nh, err)) != 0)
        goto failed;
    if (!get_varint(&r, &n)) {
        fail(err, "truncated");
        goto error;
    }
    if (n == 0 || n > TB_TOPOLOGY_MAX_NODES || n > (size_t)(r.end - r.p) / NCOLS || nh > n) {
        fail(err, "bad node count %llu for %u hosts and %zu remaining bytes",
             (unsigned long long)n, (uint32_t)nh, (size_t)(r.end - r.p));
        goto error;
    }
    /* Find where each column starts, then read the six side by side. */
    rd_t col[NCOLS];
    if (find_columns(&r, n, col, err) != 0)
        goto error;
    last = malloc(nh * sizeof *last);
    if (!last || tb_topology_reserve(t, (size_t)n) != 0)
        goto oom;
    for (uint32_t i = 0; i < nh; i++)
        last[i] = -1;
    if ((rc = read_nodes(col, t, n, nh, last, err)) != 0)
        goto failed;
    free(last);
    last = NULL;
    if (tb_topology_load_finish(t, err) != 0)
        goto error;
    tb_error_clear(err);
    return t;
failed:
    if (rc != TBON_ENOMEM)
        goto error;
oom:
    tb_error_set(err, TBON_ENOMEM, "serialised topology: out of memory");
error:
    free(last);
    tb_topology_destroy(t);
    return NULL;
}
