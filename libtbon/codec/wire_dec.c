/* wire_dec.c - the streaming frame decoder (tb_fdec_t, declared in wire.h)
 *
 * Bytes arrive in a buffer (fed, or read() into reserved room) and leave as
 * frames. The header is checked as soon as its 48 bytes are in (its own CRC
 * first), the length against the maximum before anything is allocated for
 * the payload. Then:
 *  - a payload that is already complete in the buffer is copied out to its
 *    own allocation with the CRC computed during the copy (seed 004, 5.1), or
 *    checksummed in place and inflated straight from the buffer;
 *  - a large payload (>= DIRECT_MIN) still arriving gets its final buffer at
 *    once, and tb_fdec_reserve hands out that buffer, so its bytes are read
 *    by the kernel into place and checksummed at commit, while still in cache.
 * Every error is sticky, but the link layer may go on after a corrupt frame
 * (tb_fdec_resume) and ask for a resend: a payload CRC mismatch is skipped
 * by its length (which the header's CRC vouches for); a header that fails
 * its checks (a flipped bit anywhere in it) is searched past, to the next
 * "TBON" magic whose header CRC holds (seed 004 5.1 keeps the framing cheap
 * to find again). A payload that inflates wrongly, or out of memory, stays final.
 */
#include "codec/wire.h"
#include "util/hot.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/bigmem.h"
#include "util/crc32c.h"
#include "util/endian.h"

#define DIRECT_MIN (16u * 1024)   /* payloads this big are read into place */
#define BUF_ROUND  4096u
/* What a small buffer is rounded to (TB_FDEC_FIRST: why small). */
#define SMALL_ROUND 256u
#define SCAN_MAX   (1u << 20)     /* bytes looked through for a header after a bad one */

enum { ST_HDR, ST_BODY, ST_DIRECT };

struct tb_fdec {
    uint8_t *buf;           /* received bytes [rd, wr) of capacity cap */
    size_t cap, rd, wr;
    uint32_t max;           /* payload limit for the next header */
    int state;
    tb_frame_hdr_t hdr;     /* the frame being received (ST_BODY, ST_DIRECT) */
    uint32_t want_crc;      /* its CRC field */
    uint32_t crc;           /* running CRC: header bytes, then payload so far */
    uint8_t *pay;           /* ST_DIRECT: the payload buffer, got bytes filled */
    int placed;             /* ... given by place(), not ours to free */
    size_t got;
    tb_fdec_place_fn place; /* where a large payload goes (tb_fdec_set_place) */
    void *place_arg;
    int resv_direct;        /* last reserve pointed into pay */
    size_t resv_avail;
    size_t chunk;           /* what a reserve asks for: TB_FDEC_FIRST, doubled up to
                               TB_FDEC_CHUNK each time a read fills it */
    int kind, code;         /* sticky error */
    int scan;               /* resumed after a bad header: look for the next magic */
    int bad_header;         /* the error is the header's CRC */
    size_t skipped;         /* bytes dropped looking since the last good frame */
    int lost;               /* the framing was not found again: final */
    int lend;               /* small payloads come out borrowed (tb_fdec_set_lend) */
    char msg[256];
};

static int fail(tb_fdec_t *d, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(tb_fdec_t *d, int kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    d->kind = kind;
    d->code = kind == TB_FDEC_ENOMEM ? TBON_ENOMEM : TBON_EFORMAT;
    return d->code;
}

tb_fdec_t *tb_fdec_new(uint32_t max_payload)
{
    tb_fdec_t *d = calloc(1, sizeof *d);
    if (d) {
        d->max = max_payload;
        d->chunk = TB_FDEC_FIRST;
    }
    return d;
}

void tb_fdec_destroy(tb_fdec_t *d)
{
    if (!d)
        return;
    free(d->buf);
    if (!d->placed)
        tb_big_free(d->pay);
    free(d);
}

void tb_fdec_set_place(tb_fdec_t *d, tb_fdec_place_fn place, void *arg)
{
    d->place = place;
    d->place_arg = arg;
}

void tb_fdec_set_lend(tb_fdec_t *d, int on)
{
    d->lend = on;
}

void tb_fdec_set_max(tb_fdec_t *d, uint32_t max_payload)
{
    d->max = max_payload;
}

/* Make room for need more bytes at wr: compact first, then grow to what is
 * needed (rounded up), or to double the capacity when `doubling`. */
TB_HOT static int make_room(tb_fdec_t *d, size_t need, int doubling)
{
    if (d->cap - d->wr >= need)
        return 0;
    if (d->rd) {
        memmove(d->buf, d->buf + d->rd, d->wr - d->rd);
        d->wr -= d->rd;
        d->rd = 0;
        if (d->cap - d->wr >= need)
            return 0;
    }
    if (need > SIZE_MAX / 2 - d->wr)
        return fail(d, TB_FDEC_ENOMEM, "cannot buffer %zu more bytes", need);
    size_t want = d->wr + need;
    size_t round = want < BUF_ROUND ? SMALL_ROUND : BUF_ROUND;
    size_t ncap = (want + round - 1) / round * round;
    if (doubling && ncap < 2 * d->cap)
        ncap = 2 * d->cap;
    uint8_t *nb = realloc(d->buf, ncap);
    if (!nb)
        return fail(d, TB_FDEC_ENOMEM, "out of memory growing the receive buffer to %zu bytes", ncap);
    d->buf = nb;
    d->cap = ncap;
    return 0;
}

int tb_fdec_feed(tb_fdec_t *d, const void *bytes, size_t n)
{
    const uint8_t *p = bytes;
    if (d->kind)
        return d->code;
    if (d->state == ST_DIRECT && d->got < d->hdr.len) {
        size_t k = d->hdr.len - d->got;
        if (k > n)
            k = n;
        d->crc = tb_crc32c_copy(d->crc, d->pay + d->got, p, k);
        d->got += k;
        p += k;
        n -= k;
    }
    if (n) {
        int rc = make_room(d, n, 1);
        if (rc)
            return rc;
        memcpy(d->buf + d->wr, p, n);
        d->wr += n;
    }
    return 0;
}

TB_HOT int tb_fdec_reserve(tb_fdec_t *d, size_t want, void **ptr, size_t *avail)
{
    if (d->kind)
        return d->code;
    if (want == 0)
        want = d->chunk;
    if (d->state == ST_DIRECT && d->got < d->hdr.len) {
        size_t left = d->hdr.len - d->got;
        *ptr = d->pay + d->got;
        *avail = want < left ? want : left;
        d->resv_direct = 1;
        d->resv_avail = *avail;
        return 0;
    }
    /* At most one chunk beyond what is buffered: the bound on memory. */
    size_t target = want < TB_FDEC_CHUNK ? want : TB_FDEC_CHUNK;
    int rc = make_room(d, target, 0);
    if (rc)
        return rc;
    size_t room = d->cap - d->wr;
    *ptr = d->buf + d->wr;
    *avail = want < room ? want : room;
    d->resv_direct = 0;
    d->resv_avail = *avail;
    return 0;
}

TB_HOT void tb_fdec_commit(tb_fdec_t *d, size_t n)
{
    assert(n <= d->resv_avail && "tb_fdec_commit: more than reserved");
    if (d->kind || n > d->resv_avail)
        return;
    if (d->resv_direct) {
        d->crc = tb_crc32c(d->crc, d->pay + d->got, n);
        d->got += n;
    } else {
        d->wr += n;
        /* A connection's first reads (a handshake, a control message) stay
         * in TB_FDEC_FIRST bytes; a stream that fills its reads gets larger ones. */
        if (n == d->resv_avail && d->chunk < TB_FDEC_CHUNK)
            d->chunk *= 2;
    }
    d->resv_avail = 0;
}

/* Check the 48 header bytes at p and start a frame; returns 0 or the error. */
static int parse_header(tb_fdec_t *d, const uint8_t *p)
{
    uint32_t magic = tb_get32(p);
    if (magic != TB_FRAME_MAGIC)
        return fail(d, TB_FDEC_EMAGIC,
                    "bad magic 0x%08" PRIx32 " (bytes %02x %02x %02x %02x), expected "
                    "0x%08x (\"TBON\"): not a tbon peer, or framing lost",
                    magic, p[0], p[1], p[2], p[3], TB_FRAME_MAGIC);
    if (p[4] != TB_FRAME_VERSION)
        return fail(d, TB_FDEC_EVERSION, "frame version %u, this side speaks version %u",
                    p[4], TB_FRAME_VERSION);
    uint32_t hcrc = tb_crc32c(0, p, TB_FRAME_HCRC_OFFSET);
    if (hcrc != tb_get32(p + TB_FRAME_HCRC_OFFSET)) {
        d->bad_header = 1;      /* nothing in it can be trusted, its length least */
        return fail(d, TB_FDEC_ECRC, "header CRC mismatch: frame says 0x%08" PRIx32
                    ", computed 0x%08" PRIx32 " (type %u, length %" PRIu32 ", seq %" PRIu32 ")",
                    tb_get32(p + TB_FRAME_HCRC_OFFSET), hcrc, p[5], tb_get32(p + 8),
                    tb_get32(p + 24));
    }
    if (p[5] < TB_FRAME_TYPE_MIN || p[5] > TB_FRAME_TYPE_MAX)
        return fail(d, TB_FDEC_ETYPE, "unknown frame type %u (known: %d..%d)",
                    p[5], TB_FRAME_TYPE_MIN, TB_FRAME_TYPE_MAX);
    uint16_t flags = tb_get16(p + 6);
    if (flags & ~TB_FRAME_F_KNOWN)
        return fail(d, TB_FDEC_EFLAGS, "unknown flag bits 0x%04x in flags 0x%04x",
                    (unsigned)(flags & ~TB_FRAME_F_KNOWN), flags);
    uint32_t len = tb_get32(p + 8);
    if (len > d->max)
        return fail(d, TB_FDEC_ETOOBIG, "payload length %" PRIu32 " above the maximum %" PRIu32
                    " (%s frame)", len, d->max, tb_frame_type_name(p[5]));
    d->hdr.type = p[5];
    d->hdr.flags = flags;
    d->hdr.len = len;
    d->hdr.stream = tb_get32(p + 12);
    d->hdr.tag = (int32_t)tb_get32(p + 16);
    d->hdr.source = tb_get32(p + 20);
    d->hdr.seq = tb_get32(p + 24);
    d->hdr.ack = tb_get32(p + 28);
    d->hdr.key = tb_get64(p + 32);
    d->want_crc = tb_get32(p + TB_FRAME_CRC_OFFSET);
    d->crc = 0;
    return 0;
}

static int check_crc(tb_fdec_t *d)
{
    if (d->crc == d->want_crc)
        return 0;
    return fail(d, TB_FDEC_ECRC,
                "payload CRC mismatch: frame says 0x%08" PRIx32 ", computed 0x%08" PRIx32
                " (%s frame, %" PRIu32 " payload bytes, seq %" PRIu32 ")",
                d->want_crc, d->crc, tb_frame_type_name(d->hdr.type), d->hdr.len, d->hdr.seq);
}

/* Inflate a TB_FRAME_F_ZLIB payload src[0..n) into a fresh buffer of exactly
 * the size it claims (checked against the maximum first). */
static int inflate_payload(tb_fdec_t *d, const uint8_t *src, size_t n,
                           uint8_t **out, uint32_t *out_len)
{
    if (n < 4)
        return fail(d, TB_FDEC_EZLIB, "compressed payload of %zu bytes is shorter "
                    "than its 4-byte length prefix", n);
    uint32_t ulen = tb_get32(src);
    if (ulen > d->max)
        return fail(d, TB_FDEC_ETOOBIG, "uncompressed length %" PRIu32 " above the maximum %"
                    PRIu32 " (%s frame)", ulen, d->max, tb_frame_type_name(d->hdr.type));
    uint8_t *o = malloc(ulen ? ulen : 1);
    if (!o)
        return fail(d, TB_FDEC_ENOMEM, "out of memory for a %" PRIu32 "-byte payload", ulen);

    z_stream zs;
    memset(&zs, 0, sizeof zs);
    int zr = inflateInit(&zs);
    if (zr != Z_OK) {
        free(o);
        return fail(d, zr == Z_MEM_ERROR ? TB_FDEC_ENOMEM : TB_FDEC_EZLIB,
                    "inflateInit failed (%d)", zr);
    }
    zs.next_in = (Bytef *)(uintptr_t)(src + 4);   /* zlib does not write it */
    zs.avail_in = (uInt)(n - 4);
    zs.next_out = o;
    zs.avail_out = ulen;
    zr = inflate(&zs, Z_FINISH);
    if (zr != Z_STREAM_END && zs.avail_out == 0 && (zr == Z_OK || zr == Z_BUF_ERROR)) {
        /* Output full but no end yet: one more byte tells "longer than
         * claimed" (a bomb) from "only the trailer was left". */
        uint8_t extra;
        zs.next_out = &extra;
        zs.avail_out = 1;
        zr = inflate(&zs, Z_FINISH);
        if (zs.avail_out == 0) {
            inflateEnd(&zs);
            free(o);
            return fail(d, TB_FDEC_EZLIB, "compressed payload inflates to more than the %"
                        PRIu32 " bytes it claims", ulen);
        }
    }
    int rc = 0;
    if (zr == Z_STREAM_END) {
        if (zs.avail_in)
            rc = fail(d, TB_FDEC_EZLIB, "%u bytes after the end of the zlib stream",
                      zs.avail_in);
        else if (zs.total_out != ulen)
            rc = fail(d, TB_FDEC_EZLIB, "compressed payload inflates to %lu bytes, it claims %"
                      PRIu32, (unsigned long)zs.total_out, ulen);
    } else if (zr == Z_MEM_ERROR) {
        rc = fail(d, TB_FDEC_ENOMEM, "out of memory inflating a payload");
    } else if (zr == Z_BUF_ERROR) {
        rc = fail(d, TB_FDEC_EZLIB, "zlib stream truncated after %lu of %" PRIu32 " bytes",
                  (unsigned long)zs.total_out, ulen);
    } else {
        rc = fail(d, TB_FDEC_EZLIB, "corrupt zlib stream (%s)",
                  zs.msg ? zs.msg : "inflate error");
    }
    inflateEnd(&zs);
    if (rc) {
        free(o);
        return rc;
    }
    if (!ulen) {
        free(o);
        o = NULL;
    }
    *out = o;
    *out_len = ulen;
    return 0;
}

/* The current frame's payload (CRC verified) is wire[0..hdr.len): turn it
 * into *out. own says wire is a malloc'd buffer we may hand over. */
TB_HOT static int deliver(tb_fdec_t *d, uint8_t *wire, int own, tb_frame_t *out)
{
    uint8_t *payload = wire;
    uint32_t plen = d->hdr.len;
    if (d->hdr.flags & TB_FRAME_F_ZLIB) {
        int rc = inflate_payload(d, wire, d->hdr.len, &payload, &plen);
        if (own)
            free(wire);
        if (rc)
            return rc;
    }
    out->hdr = d->hdr;
    out->borrowed = 0;
    out->hdr.flags &= (uint16_t)~TB_FRAME_F_ZLIB;
    out->hdr.len = plen;
    out->payload = payload;
    out->placed = payload == wire && d->placed;
    /* the CRC of the payload as delivered: an inflated one's is computed */
    out->crc = payload == wire ? d->want_crc : tb_crc32c(0, payload, plen);
    d->placed = 0;
    out->wire_len = TB_FRAME_HDR_SIZE + (size_t)d->hdr.len;
    d->state = ST_HDR;
    d->skipped = 0;
    return 1;
}

/* Resumed after a bad header: drop bytes up to the next "TBON" magic
 * (returns 1, the magic at rd), or all but a tail that begins one ("T",
 * "TB", "TBO": returns 0, the magic may straddle what arrives next; any
 * other tail is dropped too, so that a quiet link after a corrupt frame
 * holds no partial frame: tb_fdec_partial), or the error once more than
 * SCAN_MAX bytes went without a good frame (a peer that is no longer
 * speaking frames at all). */
static int find_magic(tb_fdec_t *d)
{
    static const uint8_t magic[4] = { 'T', 'B', 'O', 'N' };
    size_t have = d->wr - d->rd;
    const uint8_t *b = d->buf + d->rd;
    const uint8_t *m = have >= 4 ? memmem(b, have, magic, 4) : NULL;
    size_t drop = have;
    if (m) {
        drop = (size_t)(m - b);
    } else {
        for (size_t k = have < 3 ? have : 3; k > 0; k--)
            if (memcmp(b + have - k, magic, k) == 0) {
                drop = have - k;
                break;
            }
    }
    d->rd += drop;
    d->skipped += drop;
    if (d->skipped > SCAN_MAX) {
        d->lost = 1;
        return fail(d, TB_FDEC_EMAGIC, "no frame header in the %zu bytes after a corrupt one: "
                    "framing lost", d->skipped);
    }
    if (!m)
        return 0;
    d->scan = 0;
    return 1;
}

TB_HOT int tb_fdec_next(tb_fdec_t *d, tb_frame_t *out)
{
    if (d->kind)
        return d->code;
    if (d->state == ST_HDR) {
        if (d->scan) {
            int found = find_magic(d);
            if (found <= 0)
                return found;
        }
        if (d->wr - d->rd < TB_FRAME_HDR_SIZE)
            return 0;
        int rc = parse_header(d, d->buf + d->rd);
        if (rc)
            return rc;
        /* ST_BODY keeps the header at rd until the frame is whole: if its
         * CRC fails, the search for the next header starts right after it. */
        d->state = ST_BODY;
        size_t have = d->wr - d->rd - TB_FRAME_HDR_SIZE;
        if (d->hdr.len >= DIRECT_MIN && have < d->hdr.len) {
            /* a compressed payload is inflated elsewhere: never placed */
            d->pay = d->place && !(d->hdr.flags & TB_FRAME_F_ZLIB)
                         ? d->place(d->place_arg, &d->hdr) : NULL;
            d->placed = d->pay != NULL;
            if (!d->pay)
                d->pay = tb_big_alloc(d->hdr.len);
            if (!d->pay)
                return fail(d, TB_FDEC_ENOMEM, "out of memory for a %" PRIu32 "-byte payload",
                            d->hdr.len);
            d->crc = tb_crc32c_copy(d->crc, d->pay, d->buf + d->rd + TB_FRAME_HDR_SIZE, have);
            d->got = have;
            d->rd = d->wr = 0;
            d->state = ST_DIRECT;
            return 0;
        }
    }
    if (d->state == ST_DIRECT) {
        if (d->got < d->hdr.len)
            return 0;
        uint8_t *p = d->pay;
        d->pay = NULL;
        int rc = check_crc(d);
        if (rc) {
            if (!d->placed)
                free(p);
            d->placed = 0;
            return rc;
        }
        return deliver(d, p, !d->placed, out);
    }
    /* ST_BODY: wait for the whole frame in the buffer (its header at rd). */
    uint32_t n = d->hdr.len;
    if (d->wr - d->rd < TB_FRAME_HDR_SIZE + (size_t)n)
        return 0;
    size_t start = d->rd;
    uint8_t *src = d->buf + start + TB_FRAME_HDR_SIZE;
    uint8_t *p = NULL;
    int lent = d->lend && n && n < TB_FDEC_LEND_MAX && !(d->hdr.flags & TB_FRAME_F_ZLIB);
    if ((d->hdr.flags & TB_FRAME_F_ZLIB) || lent)
        d->crc = tb_crc32c(d->crc, src, n);
    else if (n && !(p = malloc(n)))
        return fail(d, TB_FDEC_ENOMEM, "out of memory for a %" PRIu32 "-byte payload", n);
    else
        d->crc = tb_crc32c_copy(d->crc, p, src, n);
    int rc = check_crc(d);
    /* Its length held (the header's CRC): a corrupt payload is skipped by it. */
    d->rd = start + TB_FRAME_HDR_SIZE + n;
    if (d->rd == d->wr)
        d->rd = d->wr = 0;   /* src stays valid: nothing is written before we return */
    if (rc) {
        free(p);
        return rc;
    }
    if (lent) {
        deliver(d, src, 0, out);
        out->borrowed = 1;
        return 1;
    }
    return d->hdr.flags & TB_FRAME_F_ZLIB ? deliver(d, src, 0, out) : deliver(d, p, 1, out);
}

int tb_fdec_resume(tb_fdec_t *d)
{
    int header = d->state == ST_HDR &&
                 (d->kind == TB_FDEC_EMAGIC || d->kind == TB_FDEC_EVERSION ||
                  d->kind == TB_FDEC_ETYPE || d->kind == TB_FDEC_EFLAGS ||
                  d->kind == TB_FDEC_ETOOBIG || d->bad_header);
    if ((d->kind != TB_FDEC_ECRC && !header) || d->lost)
        return d->kind ? d->code : 0;
    /* A bad header is still at rd: the search for the next header starts
     * one byte after it. A frame whose payload failed its CRC has been
     * skipped by its length (the header's CRC held): the next byte begins
     * the next frame. */
    if (header) {
        d->rd++;
        d->scan = 1;
    }
    d->bad_header = 0;
    d->kind = 0;
    d->code = 0;
    d->msg[0] = 0;
    d->state = ST_HDR;
    return 0;
}

int tb_fdec_error_kind(const tb_fdec_t *d)
{
    return d->kind;
}

const char *tb_fdec_error(const tb_fdec_t *d)
{
    return d->msg;
}

const char *tb_fdec_kind_name(int kind)
{
    switch (kind) {
    case TB_FDEC_OK:       return "OK";
    case TB_FDEC_EMAGIC:   return "EMAGIC";
    case TB_FDEC_EVERSION: return "EVERSION";
    case TB_FDEC_ETYPE:    return "ETYPE";
    case TB_FDEC_EFLAGS:   return "EFLAGS";
    case TB_FDEC_ETOOBIG:  return "ETOOBIG";
    case TB_FDEC_ECRC:     return "ECRC";
    case TB_FDEC_EZLIB:    return "EZLIB";
    case TB_FDEC_ENOMEM:   return "ENOMEM";
    default:               return "unknown";
    }
}

int tb_fdec_partial(const tb_fdec_t *d)
{
    return d->state != ST_HDR || d->wr > d->rd;
}

size_t tb_fdec_memory(const tb_fdec_t *d)
{
    return d->cap + (d->pay && !d->placed ? d->hdr.len : 0);
}
