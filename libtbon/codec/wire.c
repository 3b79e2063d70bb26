/* wire.c - tbon frame header encoding and frame building (with zlib)
 *
 * The header is written byte by byte in little-endian order, never by copying
 * a struct, so its layout does not depend on the compiler or the host. The
 * decoder lives in wire_dec.c.
 */
#include "codec/wire.h"
#include "util/hot.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/bigmem.h"
#include "util/crc32c.h"
#include "util/endian.h"

/* zlib level for compressed payloads. Level 1 compresses the serialised
 * topology about as well as the default level 6 at a fraction of the time
 * (bench/bench_wire.c measures both). */
#define TB_FRAME_ZLIB_LEVEL 1

const char *tb_frame_type_name(int type)
{
    switch (type) {
    case TB_FRAME_DATA:      return "DATA";
    case TB_FRAME_HELLO:     return "HELLO";
    case TB_FRAME_HANDSHAKE: return "HANDSHAKE";
    case TB_FRAME_WELCOME:   return "WELCOME";
    case TB_FRAME_TOPOLOGY:  return "TOPOLOGY";
    case TB_FRAME_CONTROL:   return "CONTROL";
    case TB_FRAME_HEARTBEAT: return "HEARTBEAT";
    case TB_FRAME_ACK:       return "ACK";
    case TB_FRAME_EVENT:     return "EVENT";
    case TB_FRAME_REPORT:    return "REPORT";
    default:                 return "unknown";
    }
}

/* Bytes [0, 40) of the header: everything but the CRC. */
/* The fields, and the header's CRC after them. */
TB_HOT static void encode_fields(const tb_frame_hdr_t *h, uint8_t *out)
{
    tb_put32(out + 0, TB_FRAME_MAGIC);
    out[4] = TB_FRAME_VERSION;
    out[5] = h->type;
    tb_put16(out + 6, h->flags);
    tb_put32(out + 8, h->len);
    tb_put32(out + 12, h->stream);
    tb_put32(out + 16, (uint32_t)h->tag);
    tb_put32(out + 20, h->source);
    tb_put32(out + 24, h->seq);
    tb_put32(out + 28, h->ack);
    tb_put64(out + 32, h->key);
    tb_put32(out + TB_FRAME_HCRC_OFFSET, tb_crc32c(0, out, TB_FRAME_HCRC_OFFSET));
}

void tb_frame_hdr_encode(const tb_frame_hdr_t *h, const void *payload,
                         uint8_t out[TB_FRAME_HDR_SIZE])
{
    encode_fields(h, out);
    tb_put32(out + TB_FRAME_CRC_OFFSET, tb_crc32c(0, payload, h->len));
}

void tb_frame_hdr_encode_crc(const tb_frame_hdr_t *h, uint32_t payload_crc,
                             uint8_t out[TB_FRAME_HDR_SIZE])
{
    encode_fields(h, out);
    tb_put32(out + TB_FRAME_CRC_OFFSET, payload_crc);
}

void tb_frame_hdr_renumber(uint8_t hdr[TB_FRAME_HDR_SIZE], uint32_t seq, uint32_t ack)
{
    tb_put32(hdr + TB_FRAME_SEQ_OFFSET, seq);
    tb_put32(hdr + TB_FRAME_ACK_OFFSET, ack);
    tb_put32(hdr + TB_FRAME_HCRC_OFFSET, tb_crc32c(0, hdr, TB_FRAME_HCRC_OFFSET));
}

/* Try to deflate src into dst (room for 4 + compressBound(len) bytes) as
 * u32 length || zlib stream; returns the compressed payload length, or 0 if
 * compression failed or would not make the payload smaller. */
static size_t compress_payload(uint8_t *dst, const uint8_t *src, size_t len)
{
    uLongf clen = compressBound((uLong)len);
    if (compress2(dst + 4, &clen, src, (uLong)len, TB_FRAME_ZLIB_LEVEL) != Z_OK)
        return 0;
    if (4 + (size_t)clen >= len)
        return 0;
    tb_put32(dst, (uint32_t)len);
    return 4 + (size_t)clen;
}

int tb_frame_build(const tb_frame_hdr_t *h, const void *payload, size_t len,
                   size_t compress_threshold, uint8_t **out, size_t *out_len)
{
    if (!h || !out || !out_len || (len && !payload))
        return TBON_EINVAL;
    if (h->type < TB_FRAME_TYPE_MIN || h->type > TB_FRAME_TYPE_MAX ||
        (h->flags & ~TB_FRAME_F_KNOWN) || (h->flags & TB_FRAME_F_ZLIB) ||
        len > UINT32_MAX)
        return TBON_EINVAL;

    int compress = compress_threshold && len >= compress_threshold;
    size_t room = len;
    if (compress) {
        size_t bound = 4 + (size_t)compressBound((uLong)len);
        if (bound > room)
            room = bound;
    }
    uint8_t *buf = malloc(TB_FRAME_HDR_SIZE + room);
    if (!buf)
        return TBON_ENOMEM;
    uint8_t *body = buf + TB_FRAME_HDR_SIZE;

    tb_frame_hdr_t hh = *h;
    size_t clen = compress ? compress_payload(body, payload, len) : 0;
    if (clen) {
        hh.flags |= TB_FRAME_F_ZLIB;
        hh.len = (uint32_t)clen;
        tb_frame_hdr_encode(&hh, body, buf);
        /* compressBound() reserved more than a compressible payload needs. */
        if (TB_FRAME_HDR_SIZE + clen < (TB_FRAME_HDR_SIZE + room) / 2) {
            uint8_t *shrunk = realloc(buf, TB_FRAME_HDR_SIZE + clen);
            if (shrunk)
                buf = shrunk;
        }
        *out_len = TB_FRAME_HDR_SIZE + clen;
    } else {
        hh.len = (uint32_t)len;
        encode_fields(&hh, buf);
        /* The copy is needed anyway; checksum while copying (seed 004, 5.1). */
        tb_put32(buf + TB_FRAME_CRC_OFFSET, tb_crc32c_copy(0, body, payload, len));
        *out_len = TB_FRAME_HDR_SIZE + len;
    }
    *out = buf;
    return 0;
}

void tb_frame_release(tb_frame_t *f)
{
    if (f) {
        if (f->placed || f->borrowed)
            f->borrowed = 0;
        else if (f->hdr.len >= TB_BIG_KEEP_MIN)
            tb_big_free(f->payload);    /* kept for the next (util/bigmem.h) */
        else
            free(f->payload);
        f->payload = NULL;
    }
}

int tb_frame_own(tb_frame_t *f)
{
    if (!f->borrowed)
        return 0;
    uint8_t *p = malloc(f->hdr.len);
    if (!p)
        return TBON_ENOMEM;
    memcpy(p, f->payload, f->hdr.len);
    f->payload = p;
    f->borrowed = 0;
    return 0;
}
