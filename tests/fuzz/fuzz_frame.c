/* fuzz_frame.c - libFuzzer harness: the streaming frame decoder and the handshake decoders
 *
 * Input: byte 0 = control (bits 0-2: number of chunk sizes - 1; bit 3: max
 * payload 1 MiB instead of 4 KiB; bit 4: receive through reserve/commit
 * instead of feed; bit 5: recompute the CRC of every frame first, so that
 * mutations reach what lies behind the checksum, such as inflate; bit 6:
 * resume after corrupt frames; bit 7: the decoder lends small payloads, and
 * every other borrowed frame is made its own), then that
 * many chunk-size bytes (b -> 1 + b*b bytes), then the stream, delivered in
 * those chunk sizes in turn. Every frame that
 * comes out must be sane and must survive a re-encode/decode round trip;
 * an error must be sticky. The whole input is also given to the HELLO,
 * HANDSHAKE and WELCOME decoders, whose successes must re-encode to the
 * same bytes and never verify.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/crc32c.h"
#include "codec/handshake.h"
#include "codec/wire.h"

static void check(int cond)
{
    if (!cond)
        abort();
}

static void fuzz_handshake(const uint8_t *data, size_t size)
{
    static const uint8_t secret[TB_SECRET_SIZE] = { 1, 2, 3 };
    tbon_error_t err;
    tb_hello_t h;
    tb_handshake_t hs;
    tb_welcome_t w;
    uint8_t out[TB_HANDSHAKE_SIZE];

    if (tb_hello_decode(&h, data, size, &err) == 0) {
        tb_hello_encode(&h, out);
        check(size == TB_HELLO_SIZE && memcmp(out, data, size) == 0);
    } else {
        check(err.code == TBON_EFORMAT && err.msg[0]);
    }
    if (tb_handshake_decode(&hs, data, size, &err) == 0) {
        tb_handshake_encode(&hs, out);
        check(size == TB_HANDSHAKE_SIZE && memcmp(out, data, size) == 0);
        tb_hello_t mine = { .version = TB_PROTO_VERSION, .session = hs.session };
        check(tb_handshake_verify(&hs, &mine, secret, &err) == TBON_EAUTH);
        tb_welcome_t wl;
        check(tb_welcome_make(&wl, &hs, secret, TB_WELCOME_OK, 0, 0, &err) == 0);
    } else {
        check(err.code == TBON_EFORMAT && err.msg[0]);
    }
    if (tb_welcome_decode(&w, data, size, &err) == 0) {
        tb_welcome_encode(&w, out);
        check(size == TB_WELCOME_SIZE && memcmp(out, data, size) == 0);
        tb_handshake_t any;
        memset(&any, 0, sizeof any);
        check(tb_welcome_verify(&w, &any, secret, &err) == TBON_EAUTH);
    } else {
        check(err.code == TBON_EFORMAT && err.msg[0]);
    }
}

/* A decoded frame is sane and round-trips through the builder. */
static void check_frame(const tb_frame_t *f, uint32_t max)
{
    check(f->hdr.type >= TB_FRAME_TYPE_MIN && f->hdr.type <= TB_FRAME_TYPE_MAX);
    check((f->hdr.flags & ~TB_FRAME_F_KNOWN) == 0 && !(f->hdr.flags & TB_FRAME_F_ZLIB));
    check(f->hdr.len <= max);
    check((f->hdr.len == 0) == (f->payload == NULL));
    check(f->wire_len >= TB_FRAME_HDR_SIZE && f->wire_len - TB_FRAME_HDR_SIZE <= max);

    uint8_t *b;
    size_t n;
    check(tb_frame_build(&f->hdr, f->payload, f->hdr.len, 1, &b, &n) == 0);
    tb_fdec_t *d = tb_fdec_new(max);
    check(d != NULL);
    check(tb_fdec_feed(d, b, n) == 0);
    tb_frame_t g;
    check(tb_fdec_next(d, &g) == 1);
    check(g.hdr.type == f->hdr.type && g.hdr.flags == f->hdr.flags &&
          g.hdr.len == f->hdr.len && g.hdr.stream == f->hdr.stream &&
          g.hdr.tag == f->hdr.tag && g.hdr.source == f->hdr.source &&
          g.hdr.seq == f->hdr.seq && g.hdr.ack == f->hdr.ack && g.hdr.key == f->hdr.key);
    check(f->hdr.len == 0 || memcmp(g.payload, f->payload, f->hdr.len) == 0);
    check(tb_fdec_next(d, &g) == 0);
    tb_frame_release(&g);
    tb_fdec_destroy(d);
    free(b);
}

/* Walk the frames of b[0..n) by their length fields and rewrite each CRC. */
static void fix_crcs(uint8_t *b, size_t n)
{
    size_t off = 0;
    while (n - off >= TB_FRAME_HDR_SIZE) {
        uint8_t *h = b + off;
        size_t len = (size_t)h[8] | (size_t)h[9] << 8 | (size_t)h[10] << 16 | (size_t)h[11] << 24;
        if (len > n - off - TB_FRAME_HDR_SIZE)
            break;
        uint32_t hc = tb_crc32c(0, h, TB_FRAME_HCRC_OFFSET);
        uint32_t c = tb_crc32c(0, h + TB_FRAME_HDR_SIZE, len);
        for (int i = 0; i < 4; i++) {
            h[TB_FRAME_HCRC_OFFSET + i] = (uint8_t)(hc >> (8 * i));
            h[TB_FRAME_CRC_OFFSET + i] = (uint8_t)(c >> (8 * i));
        }
        off += TB_FRAME_HDR_SIZE + len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_handshake(data, size);
    if (size < 2)
        return 0;
    uint8_t ctl = data[0];
    size_t nsizes = (size_t)(ctl & 7) + 1;
    if (size < 1 + nsizes)
        return 0;
    const uint8_t *sizes = data + 1;
    uint32_t max = (ctl & 8) ? 1u << 20 : 4096;
    int reserve = (ctl & 16) != 0;
    int resume = (ctl & 64) != 0;   /* go on after corrupt frames, as the link layer does */
    int lend = (ctl & 128) != 0;    /* as a connection's decoder does (tb_fdec_set_lend) */
    unsigned nborrowed = 0;
    size_t left = size - 1 - nsizes;
    uint8_t *copy = malloc(left ? left : 1);
    check(copy != NULL);
    memcpy(copy, data + 1 + nsizes, left);
    if (ctl & 32)
        fix_crcs(copy, left);
    const uint8_t *p = copy;

    tb_fdec_t *d = tb_fdec_new(max);
    check(d != NULL);
    tb_fdec_set_lend(d, lend);
    int rc = 0;
    for (size_t i = 0; left && rc == 0; i++) {
        size_t chunk = 1 + (size_t)sizes[i % nsizes] * sizes[i % nsizes];
        if (chunk > left)
            chunk = left;
        if (reserve) {
            void *room;
            size_t avail;
            rc = tb_fdec_reserve(d, chunk, &room, &avail);
            if (rc)
                break;
            check(avail >= 1 && avail <= chunk);
            memcpy(room, p, avail);
            tb_fdec_commit(d, avail);
            chunk = avail;
        } else {
            rc = tb_fdec_feed(d, p, chunk);
            if (rc)
                break;
        }
        p += chunk;
        left -= chunk;
        tb_frame_t f;
        for (;;) {
            while ((rc = tb_fdec_next(d, &f)) == 1) {
                check(!f.borrowed || (lend && f.hdr.len && f.hdr.len < TB_FDEC_LEND_MAX));
                if (f.borrowed && nborrowed++ % 2) {
                    const uint8_t *was = f.payload;
                    check(tb_frame_own(&f) == 0 && !f.borrowed && f.payload != was &&
                          memcmp(f.payload, was, f.hdr.len) == 0);
                }
                check_frame(&f, max);
                tb_frame_release(&f);
                check(f.payload == NULL && !f.borrowed);
            }
            if (!rc || !resume)
                break;
            int kind = tb_fdec_error_kind(d);
            if (tb_fdec_resume(d) != 0)
                break;          /* final: rc stands */
            check(kind != TB_FDEC_ENOMEM && kind != TB_FDEC_EZLIB &&
                  tb_fdec_error_kind(d) == TB_FDEC_OK);
        }
        /* What is buffered never exceeds a frame plus a chunk or so. */
        check(tb_fdec_memory(d) <= (size_t)max + 320 * 1024);
    }
    if (rc) {
        int kind = tb_fdec_error_kind(d);
        check(kind != TB_FDEC_OK && tb_fdec_error(d)[0]);
        check(rc == (kind == TB_FDEC_ENOMEM ? TBON_ENOMEM : TBON_EFORMAT));
        tb_frame_t f;
        check(tb_fdec_next(d, &f) == rc && tb_fdec_feed(d, "x", 1) == rc);
        check(tb_fdec_error_kind(d) == kind);
    }
    tb_fdec_destroy(d);
    free(copy);
    return 0;
}
