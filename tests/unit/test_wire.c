/* test_wire.c - frame header, builder and the streaming decoder */
#include "../harness.h"

#include <stdlib.h>
#include <zlib.h>

#include "util/crc32c.h"
#include "codec/wire.h"

#define MIB (1024u * 1024u)

/* Compressible text shaped like a serialised topology. */
static void fill_text(uint8_t *p, size_t n)
{
    size_t i = 0;
    for (unsigned k = 0; i < n; k++) {
        char line[80];
        int m = snprintf(line, sizeof line, "node%05u.cluster:%u => node%05u.cluster:%u ;\n",
                         k / 16, k % 7, k, (k * 13) % 5);
        for (int j = 0; j < m && i < n; j++)
            p[i++] = (uint8_t)line[j];
    }
}

/* ---- a stream of frames and the frames expected from it ---- */

typedef struct spec {
    tb_frame_hdr_t h;
    uint8_t *p;
    size_t n;
    size_t thr;          /* compress threshold given to tb_frame_build */
} spec_t;

#define MAX_SPECS 8

typedef struct stream {
    spec_t s[MAX_SPECS];
    int n;
    uint8_t *bytes;
    size_t len;
    size_t end[MAX_SPECS];   /* offset just past frame i */
} stream_t;

static void stream_add(stream_t *st, uint8_t type, size_t n, int kind, size_t thr, uint32_t seq)
{
    spec_t *s = &st->s[st->n++];
    memset(s, 0, sizeof *s);
    s->h.type = type;
    s->h.stream = 1000u + (uint32_t)st->n;
    s->h.tag = -7 * st->n;
    s->h.source = 0xFFFFFFF0u + (uint32_t)st->n;
    s->h.seq = seq;
    s->h.ack = seq ? seq - 1 : UINT32_MAX;
    s->h.key = (uint64_t)seq << 24 | 7;
    s->n = n;
    s->thr = thr;
    s->p = n ? malloc(n) : NULL;
    if (kind == 0)
        th_fill_random(s->p, n, seq + 11);
    else
        fill_text(s->p, n);
    uint8_t *f;
    size_t flen;
    if (tb_frame_build(&s->h, s->p, n, thr, &f, &flen) != 0)
        abort();
    st->bytes = realloc(st->bytes, st->len + flen);
    memcpy(st->bytes + st->len, f, flen);
    st->len += flen;
    st->end[st->n - 1] = st->len;
    free(f);
}

static void stream_free(stream_t *st)
{
    for (int i = 0; i < st->n; i++)
        free(st->s[i].p);
    free(st->bytes);
}

/* The small mixed stream: empty, small, compressed, ack-only, another data. */
static void stream_small(stream_t *st)
{
    memset(st, 0, sizeof *st);
    stream_add(st, TB_FRAME_HEARTBEAT, 0, 0, 0, 1);
    stream_add(st, TB_FRAME_DATA, 37, 0, 0, 2);
    stream_add(st, TB_FRAME_TOPOLOGY, 2500, 1, 1, 3);
    stream_add(st, TB_FRAME_ACK, 0, 0, 1, 4);
    stream_add(st, TB_FRAME_DATA, 300, 0, 64, 5);   /* random: stays uncompressed */
}

static int frame_matches(const tb_frame_t *f, const spec_t *s)
{
    return f->hdr.type == s->h.type && f->hdr.flags == s->h.flags && f->hdr.len == s->n &&
           f->hdr.stream == s->h.stream && f->hdr.tag == s->h.tag &&
           f->hdr.source == s->h.source && f->hdr.seq == s->h.seq && f->hdr.ack == s->h.ack &&
           f->hdr.key == s->h.key &&
           (s->n == 0 ? f->payload == NULL : memcmp(f->payload, s->p, s->n) == 0);
}

/* Pull every available frame; check each against the next expected one.
 * Returns the decoder's last result (0, or an error). */
static int drain(tb_fdec_t *d, const stream_t *st, int *got)
{
    tb_frame_t f;
    int rc;
    while ((rc = tb_fdec_next(d, &f)) == 1) {
        if (*got >= st->n || !frame_matches(&f, &st->s[*got]))
            th_fail(__FILE__, __LINE__, "frame %d differs from what was sent", *got);
        (*got)++;
        tb_frame_release(&f);
    }
    return rc;
}

/* ---- header ---- */

TEST(header_layout_is_byte_exact)
{
    tb_frame_hdr_t h = { .type = TB_FRAME_EVENT, .flags = 0, .len = 3, .stream = 0x01020304,
                         .tag = -2, .source = 0xA1B2C3D4, .seq = 0x55667788u,
                         .ack = 0x11223344u, .key = 0x99AABBCCDDEEFF00ull };
    uint8_t out[TB_FRAME_HDR_SIZE];
    tb_frame_hdr_encode(&h, "abc", out);
    static const uint8_t want[40] = {
        'T', 'B', 'O', 'N', 3, 9, 0, 0, 3, 0, 0, 0, 0x04, 0x03, 0x02, 0x01,
        0xFE, 0xFF, 0xFF, 0xFF, 0xD4, 0xC3, 0xB2, 0xA1,
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
        0x00, 0xFF, 0xEE, 0xDD, 0xCC, 0xBB, 0xAA, 0x99 };
    CHECK_MEM(out, want, 40);
    CHECK_UINT(out[40] | out[41] << 8 | out[42] << 16 | (uint32_t)out[43] << 24,
               tb_crc32c(0, want, 40));
    CHECK_UINT(out[44] | out[45] << 8 | out[46] << 16 | (uint32_t)out[47] << 24,
               tb_crc32c(0, "abc", 3));

    /* The cached-payload-CRC variant writes the same bytes. */
    uint8_t out2[TB_FRAME_HDR_SIZE];
    tb_frame_hdr_encode_crc(&h, tb_crc32c(0, "abc", 3), out2);
    CHECK_MEM(out2, out, TB_FRAME_HDR_SIZE);
}

/* The example frame of docs/protocol.md, section 6. */
TEST(protocol_document_example)
{
    static const uint8_t want[TB_FRAME_HDR_SIZE] = {
        0x54, 0x42, 0x4f, 0x4e, 0x03, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x00, 0x7f, 0xd4, 0x2c, 0xbf, 0x00, 0x00, 0x00, 0x00 };
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .stream = 1, .source = 3, .seq = 1, .ack = 2,
                         .key = 1ull << 24 };
    uint8_t out[TB_FRAME_HDR_SIZE];
    tb_frame_hdr_encode(&h, NULL, out);
    CHECK_MEM(out, want, sizeof want);
}

TEST(header_round_trip)
{
    tb_frame_hdr_t h = { .type = TB_FRAME_REPORT, .flags = 0, .stream = UINT32_MAX,
                         .tag = INT32_MIN, .source = 77, .seq = UINT32_MAX, .ack = 0,
                         .key = UINT64_MAX };
    uint8_t *f;
    size_t n;
    REQUIRE(tb_frame_build(&h, "xy", 2, 0, &f, &n) == 0);
    CHECK_UINT(n, TB_FRAME_HDR_SIZE + 2);
    tb_fdec_t *d = tb_fdec_new(100);
    REQUIRE(d);
    CHECK_INT(tb_fdec_feed(d, f, n), 0);
    tb_frame_t fr;
    CHECK_INT(tb_fdec_next(d, &fr), 1);
    CHECK_UINT(fr.hdr.type, TB_FRAME_REPORT);
    CHECK_UINT(fr.hdr.flags, 0);
    CHECK_UINT(fr.hdr.len, 2);
    CHECK_UINT(fr.hdr.stream, UINT32_MAX);
    CHECK_INT(fr.hdr.tag, INT32_MIN);
    CHECK_UINT(fr.hdr.source, 77);
    CHECK_UINT(fr.hdr.seq, UINT32_MAX);
    CHECK_UINT(fr.hdr.ack, 0);
    CHECK_UINT(fr.hdr.key, UINT64_MAX);
    CHECK_UINT(fr.wire_len, n);
    CHECK_MEM(fr.payload, "xy", 2);
    tb_frame_release(&fr);
    CHECK(fr.payload == NULL);
    tb_frame_release(NULL);
    CHECK_INT(tb_fdec_next(d, &fr), 0);
    CHECK_INT(tb_fdec_error_kind(d), TB_FDEC_OK);
    CHECK_STR(tb_fdec_error(d), "");
    tb_fdec_destroy(d);
    tb_fdec_destroy(NULL);
    free(f);
}

TEST(build_rejects_bad_arguments)
{
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA };
    uint8_t *f = NULL;
    size_t n;
    h.type = 0;
    CHECK_INT(tb_frame_build(&h, "a", 1, 0, &f, &n), TBON_EINVAL);
    h.type = TB_FRAME_TYPE_MAX + 1;
    CHECK_INT(tb_frame_build(&h, "a", 1, 0, &f, &n), TBON_EINVAL);
    h.type = TB_FRAME_DATA;
    h.flags = TB_FRAME_F_ZLIB;
    CHECK_INT(tb_frame_build(&h, "a", 1, 0, &f, &n), TBON_EINVAL);
    h.flags = 0x8000;
    CHECK_INT(tb_frame_build(&h, "a", 1, 0, &f, &n), TBON_EINVAL);
    h.flags = 0;
    CHECK_INT(tb_frame_build(&h, NULL, 1, 0, &f, &n), TBON_EINVAL);
    CHECK_INT(tb_frame_build(NULL, "a", 1, 0, &f, &n), TBON_EINVAL);
    CHECK(f == NULL);
    CHECK_INT(tb_frame_build(&h, NULL, 0, 1, &f, &n), 0);   /* empty, "always compress" */
    CHECK_UINT(n, TB_FRAME_HDR_SIZE);
    CHECK_UINT(f[6], 0);                                    /* not compressed */
    free(f);
}

TEST(names)
{
    CHECK_STR(tb_frame_type_name(TB_FRAME_DATA), "DATA");
    CHECK_STR(tb_frame_type_name(TB_FRAME_REPORT), "REPORT");
    CHECK_STR(tb_frame_type_name(0), "unknown");
    CHECK_STR(tb_fdec_kind_name(TB_FDEC_ECRC), "ECRC");
    CHECK_STR(tb_fdec_kind_name(TB_FDEC_ENOMEM), "ENOMEM");
    CHECK_STR(tb_fdec_kind_name(99), "unknown");
    for (int t = TB_FRAME_TYPE_MIN; t <= TB_FRAME_TYPE_MAX; t++)
        CHECK(strcmp(tb_frame_type_name(t), "unknown") != 0);
}

/* ---- splitting ---- */

/* Feed the stream to a fresh decoder (maximum frame max) in two parts, cut at
 * byte `cut`: every frame must come out, in order. Returns how many came out
 * of the first part alone, or -1 if no decoder could be made. */
static int lend_all;     /* feed_in_two's decoders lend small payloads */

static int feed_in_two(const stream_t *st, size_t cut, uint32_t max)
{
    tb_fdec_t *d = tb_fdec_new(max);
    if (!d) {
        th_fail(__FILE__, __LINE__, "tb_fdec_new(%u) failed", max);
        return -1;
    }
    tb_fdec_set_lend(d, lend_all);
    int got = 0;
    CHECK_INT(tb_fdec_feed(d, st->bytes, cut), 0);
    CHECK_INT(drain(d, st, &got), 0);
    int first = got;
    CHECK_INT(tb_fdec_feed(d, st->bytes + cut, st->len - cut), 0);
    CHECK_INT(drain(d, st, &got), 0);
    CHECK_INT(got, st->n);
    tb_fdec_destroy(d);
    return first;
}

TEST(stream_split_at_every_point)
{
    stream_t st;
    stream_small(&st);
    /* The compressed one is flagged and smaller; the random one is not. */
    CHECK_UINT(st.bytes[st.end[1] + 6], TB_FRAME_F_ZLIB);
    CHECK(st.end[2] - st.end[1] < TB_FRAME_HDR_SIZE + 2500);
    CHECK_UINT(st.bytes[st.end[3] + 6], 0);
    CHECK_UINT(st.end[4] - st.end[3], TB_FRAME_HDR_SIZE + 300);

    for (size_t cut = 0; cut <= st.len; cut++) {
        /* Exactly the frames wholly inside the first part come out of it. */
        int whole = 0;
        while (whole < st.n && st.end[whole] <= cut)
            whole++;
        CHECK_INT(feed_in_two(&st, cut, 4096), whole);
        if (th_failures)
            break;
    }
    stream_free(&st);
}

/* A lending decoder: small plain payloads come out borrowed (no copy), the
 * same bytes; compressed, empty and large ones as before; a frame made its
 * own keeps its bytes while the decoder reads on; cut anywhere, the stream
 * decodes the same. */
TEST(small_payloads_lent)
{
    stream_t st;
    memset(&st, 0, sizeof st);
    stream_add(&st, TB_FRAME_DATA, 37, 0, 0, 1);
    stream_add(&st, TB_FRAME_TOPOLOGY, 2500, 1, 1, 2);           /* compressed */
    stream_add(&st, TB_FRAME_DATA, TB_FDEC_LEND_MAX - 1, 0, 0, 3);
    stream_add(&st, TB_FRAME_DATA, TB_FDEC_LEND_MAX, 0, 0, 4);
    stream_add(&st, TB_FRAME_ACK, 0, 0, 0, 5);
    static const int lent[] = { 1, 0, 1, 0, 0 };
    for (int on = 0; on <= 1; on++) {
        tb_fdec_t *d = tb_fdec_new(TB_FDEC_LEND_MAX * 2);
        REQUIRE(d);
        tb_fdec_set_lend(d, on);
        CHECK_INT(tb_fdec_feed(d, st.bytes, st.len), 0);
        tb_frame_t f, kept = { 0 };
        for (int i = 0; i < st.n; i++) {
            CHECK_INT(tb_fdec_next(d, &f), 1);
            CHECK(frame_matches(&f, &st.s[i]));
            CHECK_INT(f.borrowed, on && lent[i]);
            if (i == 0) {
                const uint8_t *was = f.payload;
                CHECK_INT(tb_frame_own(&f), 0);
                CHECK_INT(f.borrowed, 0);
                CHECK(!on || f.payload != was);
                kept = f;           /* ours now: outlives what follows */
                continue;
            }
            tb_frame_release(&f);
            CHECK(f.payload == NULL && !f.borrowed);
        }
        CHECK_INT(tb_fdec_next(d, &f), 0);
        /* the decoder's buffer is used again: the copy keeps its bytes */
        CHECK_INT(tb_fdec_feed(d, st.bytes, st.len), 0);
        for (int i = 0; i < st.n; i++) {
            CHECK_INT(tb_fdec_next(d, &f), 1);
            tb_frame_release(&f);
        }
        CHECK(frame_matches(&kept, &st.s[0]));
        tb_frame_release(&kept);
        tb_fdec_destroy(d);
    }
    stream_free(&st);

    stream_small(&st);
    lend_all = 1;
    for (size_t cut = 0; cut <= st.len && !th_failures; cut++) {
        int whole = 0;
        while (whole < st.n && st.end[whole] <= cut)
            whole++;
        CHECK_INT(feed_in_two(&st, cut, 4096), whole);
    }
    lend_all = 0;
    stream_free(&st);
}

TEST(stream_one_byte_at_a_time)
{
    stream_t st;
    stream_small(&st);
    /* Add a payload above the direct-read size, to cover that path byte-wise. */
    stream_add(&st, TB_FRAME_DATA, 40000, 0, 0, 6);
    stream_add(&st, TB_FRAME_CONTROL, 5, 0, 0, 7);
    tb_fdec_t *d = tb_fdec_new(MIB);
    REQUIRE(d);
    int got = 0;
    for (size_t i = 0; i < st.len; i++) {
        CHECK_INT(tb_fdec_feed(d, st.bytes + i, 1), 0);
        CHECK_INT(drain(d, &st, &got), 0);
        int whole = 0;
        while (whole < st.n && st.end[whole] <= i + 1)
            whole++;
        if (got != whole) {
            th_fail(__FILE__, __LINE__, "after byte %zu: %d frames, expected %d", i, got, whole);
            break;
        }
    }
    CHECK_INT(got, st.n);
    tb_fdec_destroy(d);
    stream_free(&st);
}

/* A large frame split at a sample of points (every one near the header and
 * the direct-read threshold, then every 211th). */
TEST(large_frame_split_points)
{
    stream_t st;
    memset(&st, 0, sizeof st);
    stream_add(&st, TB_FRAME_DATA, 16 * 1024 - 1, 0, 0, 1);
    stream_add(&st, TB_FRAME_DATA, 16 * 1024, 0, 0, 2);
    stream_add(&st, TB_FRAME_DATA, 50000, 0, 0, 3);
    stream_add(&st, TB_FRAME_TOPOLOGY, 100000, 1, 1, 4);   /* compressed */
    stream_add(&st, TB_FRAME_DATA, 10, 0, 0, 5);
    for (size_t cut = 0; cut <= st.len; cut += (cut % 16384 < 100 ? 1 : 211)) {
        feed_in_two(&st, cut, MIB);
        if (th_failures)
            break;
    }
    stream_free(&st);
}

/* reserve/commit with varied read sizes, as a reactor would use it; memory
 * stays within one maximum frame plus the read buffer. */
TEST(reserve_commit_path)
{
    const uint32_t max = 256 * 1024;
    stream_t st;
    memset(&st, 0, sizeof st);
    stream_add(&st, TB_FRAME_DATA, 200000, 0, 0, 1);
    stream_add(&st, TB_FRAME_HEARTBEAT, 0, 0, 0, 2);
    stream_add(&st, TB_FRAME_DATA, 20000, 0, 0, 3);
    stream_add(&st, TB_FRAME_TOPOLOGY, 250000, 1, 1, 4);
    stream_add(&st, TB_FRAME_DATA, 3, 0, 0, 5);
    stream_add(&st, TB_FRAME_DATA, max, 0, 0, 6);
    stream_add(&st, TB_FRAME_EVENT, 1000, 0, 0, 7);
    static const size_t wants[] = { 0, 1, 7, 44, 45, 4096, 65536, 100000, 1 << 20 };
    for (size_t w = 0; w < sizeof wants / sizeof wants[0]; w++) {
        tb_fdec_t *d = tb_fdec_new(max);
        REQUIRE(d);
        size_t off = 0, peak = 0;
        int got = 0;
        while (off < st.len) {
            void *p;
            size_t avail;
            REQUIRE(tb_fdec_reserve(d, wants[w], &p, &avail) == 0);
            CHECK(avail >= 1);
            CHECK(avail <= (wants[w] ? wants[w] : TB_FDEC_CHUNK));
            size_t k = st.len - off < avail ? st.len - off : avail;
            if (k > 3 && (off & 1))
                k -= 3;                       /* short reads too */
            memcpy(p, st.bytes + off, k);
            tb_fdec_commit(d, k);
            off += k;
            CHECK_INT(drain(d, &st, &got), 0);
            if (tb_fdec_memory(d) > peak)
                peak = tb_fdec_memory(d);
        }
        CHECK_INT(got, st.n);
        if (peak > max + 96 * 1024)
            th_fail(__FILE__, __LINE__, "want %zu: decoder held %zu bytes", wants[w], peak);
        tb_fdec_destroy(d);
    }
    stream_free(&st);
}

/* The read size a decoder offers: TB_FDEC_FIRST on a fresh connection (a
 * handshake or a control message does not take 64 KiB of fresh memory), twice
 * as much after each read that filled it, TB_FDEC_CHUNK at most; a short
 * read does not grow it. Frames still come out whole. */
TEST(reserve_grows_with_full_reads)
{
    stream_t st;
    memset(&st, 0, sizeof st);
    for (uint32_t i = 0; i < MAX_SPECS; i++)   /* below the direct size */
        stream_add(&st, TB_FRAME_DATA, 16 * 1024 - 100, 0, 0, i + 1);
    tb_fdec_t *d = tb_fdec_new(MIB);
    REQUIRE(d);
    void *p;
    size_t avail, off = 0;
    int got = 0;
    REQUIRE(tb_fdec_reserve(d, 0, &p, &avail) == 0);
    CHECK_INT((int)avail, (int)TB_FDEC_FIRST);
    CHECK(tb_fdec_memory(d) <= 2 * TB_FDEC_FIRST);
    memcpy(p, st.bytes, 100);                   /* a short read: no growth */
    tb_fdec_commit(d, 100);
    off = 100;
    REQUIRE(tb_fdec_reserve(d, 0, &p, &avail) == 0);
    CHECK(avail <= TB_FDEC_FIRST);
    size_t expect = TB_FDEC_FIRST, seen_max = 0;
    while (off < st.len) {
        REQUIRE(tb_fdec_reserve(d, 0, &p, &avail) == 0);
        CHECK(avail <= expect);
        if (avail > seen_max)
            seen_max = avail;
        size_t k = st.len - off < avail ? st.len - off : avail;
        memcpy(p, st.bytes + off, k);
        tb_fdec_commit(d, k);
        off += k;
        if (k == avail && expect < TB_FDEC_CHUNK)
            expect *= 2;
        CHECK_INT(drain(d, &st, &got), 0);
    }
    CHECK_INT(got, st.n);
    CHECK_INT((int)seen_max, (int)TB_FDEC_CHUNK);
    tb_fdec_destroy(d);
    stream_free(&st);
}

/* Mixing feed and reserve inside a direct-read payload. */
TEST(feed_and_reserve_mixed)
{
    stream_t st;
    memset(&st, 0, sizeof st);
    stream_add(&st, TB_FRAME_DATA, 70000, 0, 0, 1);
    stream_add(&st, TB_FRAME_DATA, 70000, 0, 0, 2);
    tb_fdec_t *d = tb_fdec_new(MIB);
    REQUIRE(d);
    size_t off = 0;
    int got = 0, turn = 0;
    while (off < st.len) {
        size_t k = 1000 + (size_t)turn * 777;
        if (k > st.len - off)
            k = st.len - off;
        if (turn++ & 1) {
            CHECK_INT(tb_fdec_feed(d, st.bytes + off, k), 0);
        } else {
            void *p;
            size_t avail;
            REQUIRE(tb_fdec_reserve(d, k, &p, &avail) == 0);
            k = avail < k ? avail : k;
            memcpy(p, st.bytes + off, k);
            tb_fdec_commit(d, k);
        }
        off += k;
        CHECK_INT(drain(d, &st, &got), 0);
    }
    CHECK_INT(got, 2);
    tb_fdec_destroy(d);
    stream_free(&st);
}

/* ---- corruption ---- */

/* Feed frame bytes, then zero padding while the decoder wants more (a
 * corrupted length may claim more); returns the first non-zero result. */
static int feed_until_verdict(tb_fdec_t *d, const uint8_t *b, size_t n, int *frames)
{
    static const uint8_t zeros[65536];
    tb_frame_t f;
    int rc;
    *frames = 0;
    if ((rc = tb_fdec_feed(d, b, n)) != 0)
        return rc;
    for (int i = 0; i < 40; i++) {
        while ((rc = tb_fdec_next(d, &f)) == 1) {
            (*frames)++;
            tb_frame_release(&f);
        }
        if (rc != 0)
            return rc;
        if ((rc = tb_fdec_feed(d, zeros, sizeof zeros)) != 0)
            return rc;
    }
    return 0;
}

/* The kind a flip of bit `bit` of byte `i` of a frame must produce: the
 * magic and the version are looked at first, then the header's CRC, which
 * every other header bit breaks; a payload bit breaks the payload's CRC. */
static int expected_kind(const uint8_t *orig, size_t i, int bit, uint32_t max)
{
    (void)orig;
    (void)bit;
    (void)max;
    if (i < 4)
        return TB_FDEC_EMAGIC;
    if (i == 4)
        return TB_FDEC_EVERSION;
    return TB_FDEC_ECRC;
}

static void flip_every_bit(const uint8_t *frame, size_t n, uint32_t max)
{
    uint8_t *b = malloc(n);
    int bad = 0;
    for (size_t i = 0; i < n && bad < 5; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(b, frame, n);
            b[i] ^= (uint8_t)(1 << bit);
            tb_fdec_t *d = tb_fdec_new(max);
            int frames;
            int rc = feed_until_verdict(d, b, n, &frames);
            int want = expected_kind(frame, i, bit, max);
            if (rc != TBON_EFORMAT || frames != 0 || tb_fdec_error_kind(d) != want) {
                th_fail(__FILE__, __LINE__, "flip byte %zu bit %d: rc %d, %d frames, kind %s "
                        "(expected %s): %s", i, bit, rc, frames,
                        tb_fdec_kind_name(tb_fdec_error_kind(d)), tb_fdec_kind_name(want),
                        tb_fdec_error(d));
                bad++;
            }
            tb_fdec_destroy(d);
        }
    }
    free(b);
}

TEST(every_bit_flip_is_an_error)
{
    uint8_t pay[61];
    th_fill_random(pay, sizeof pay, 5);
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .stream = 3, .tag = 101, .source = 9,
                         .seq = 42, .ack = 41 };
    uint8_t *f;
    size_t n;
    REQUIRE(tb_frame_build(&h, pay, sizeof pay, 0, &f, &n) == 0);
    flip_every_bit(f, n, MIB);
    free(f);

    /* A compressed frame: flips of its payload (and its length prefix) are
     * caught by the CRC before anything is inflated. */
    uint8_t text[3000];
    fill_text(text, sizeof text);
    h.type = TB_FRAME_TOPOLOGY;
    REQUIRE(tb_frame_build(&h, text, sizeof text, 1, &f, &n) == 0);
    REQUIRE(f[6] == TB_FRAME_F_ZLIB);
    flip_every_bit(f, n, MIB);
    free(f);

    /* Empty payload: only the header to corrupt. */
    h.type = TB_FRAME_ACK;
    REQUIRE(tb_frame_build(&h, NULL, 0, 0, &f, &n) == 0);
    flip_every_bit(f, n, MIB);
    free(f);
}

TEST(crc_error_message_and_sticky)
{
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .seq = 5 };
    uint8_t *f, *g;
    size_t n, gn;
    REQUIRE(tb_frame_build(&h, "hello", 5, 0, &f, &n) == 0);
    REQUIRE(tb_frame_build(&h, "world", 5, 0, &g, &gn) == 0);
    uint32_t good = (uint32_t)(f[44] | f[45] << 8 | f[46] << 16 | (uint32_t)f[47] << 24);
    f[TB_FRAME_HDR_SIZE] ^= 0x20;   /* "Hello" */
    uint32_t now = tb_crc32c(0, f + TB_FRAME_HDR_SIZE, 5);
    tb_fdec_t *d = tb_fdec_new(100);
    REQUIRE(d);
    CHECK_INT(tb_fdec_feed(d, f, n), 0);
    tb_frame_t fr;
    CHECK_INT(tb_fdec_next(d, &fr), TBON_EFORMAT);
    CHECK_INT(tb_fdec_error_kind(d), TB_FDEC_ECRC);
    char want[200];
    snprintf(want, sizeof want, "payload CRC mismatch: frame says 0x%08x, computed 0x%08x "
             "(DATA frame, 5 payload bytes, seq 5)", good, now);
    CHECK_STR(tb_fdec_error(d), want);
    /* Sticky: a good frame afterwards changes nothing. */
    CHECK_INT(tb_fdec_feed(d, g, gn), TBON_EFORMAT);
    CHECK_INT(tb_fdec_next(d, &fr), TBON_EFORMAT);
    void *p;
    size_t avail;
    CHECK_INT(tb_fdec_reserve(d, 10, &p, &avail), TBON_EFORMAT);
    CHECK_INT(tb_fdec_error_kind(d), TB_FDEC_ECRC);
    CHECK_STR(tb_fdec_error(d), want);
    tb_fdec_destroy(d);
    free(f);
    free(g);
}

/* The link layer's resync (net/link.c): after a CRC mismatch the bad frame
 * is skipped and the next one decodes; small (buffered) and large (read in
 * place) payloads, and only ECRC can be resumed. */
TEST(crc_error_can_be_resumed)
{
    static uint8_t big[100000];
    th_fill_random(big, sizeof big, 3);
    size_t sizes[] = { 5, sizeof big };
    for (int k = 0; k < 2; k++) {
        tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .seq = 5 };
        uint8_t *f, *g;
        size_t n, gn;
        REQUIRE(tb_frame_build(&h, big, sizes[k], 0, &f, &n) == 0);
        h.seq = 6;
        REQUIRE(tb_frame_build(&h, big, sizes[k], 0, &g, &gn) == 0);
        f[n - 1] ^= 0x01;
        tb_fdec_t *d = tb_fdec_new(TB_FRAME_MAX_DEFAULT);
        REQUIRE(d);
        tb_frame_t fr;
        /* the large one in two pieces, so that it goes the direct way */
        size_t cut = k ? 100 : n;
        CHECK_INT(tb_fdec_feed(d, f, cut), 0);
        if (k) {
            CHECK_INT(tb_fdec_next(d, &fr), 0);
            CHECK(tb_fdec_partial(d));
            CHECK_INT(tb_fdec_feed(d, f + cut, n - cut), 0);
        }
        CHECK_INT(tb_fdec_next(d, &fr), TBON_EFORMAT);
        CHECK_INT(tb_fdec_error_kind(d), TB_FDEC_ECRC);
        CHECK_INT(tb_fdec_resume(d), 0);
        CHECK(k == 0 || !tb_fdec_partial(d));   /* a buffered one is searched through */
        CHECK_INT(tb_fdec_feed(d, g, gn), 0);
        CHECK_INT(tb_fdec_next(d, &fr), 1);
        CHECK_UINT(fr.hdr.seq, 6);
        CHECK_UINT(fr.hdr.len, sizes[k]);
        CHECK_MEM(fr.payload, big, sizes[k]);
        tb_frame_release(&fr);
        /* bytes that are no frame: searched past to the next header */
        CHECK_INT(tb_fdec_feed(d, "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX", 48), 0);
        CHECK_INT(tb_fdec_next(d, &fr), TBON_EFORMAT);
        CHECK_INT(tb_fdec_error_kind(d), TB_FDEC_EMAGIC);
        CHECK_INT(tb_fdec_resume(d), 0);
        CHECK_INT(tb_fdec_next(d, &fr), 0);
        CHECK_INT(tb_fdec_feed(d, g, gn), 0);
        CHECK_INT(tb_fdec_next(d, &fr), 1);
        CHECK_UINT(fr.hdr.seq, 6);
        CHECK_MEM(fr.payload, big, sizes[k]);
        tb_frame_release(&fr);
        tb_fdec_destroy(d);
        free(f);
        free(g);
    }
}

/* A bit flipped anywhere in one frame of a stream (its header included:
 * magic, version, type, flags, length) loses that frame only: resumed, the
 * decoder finds the next header, and every other frame comes out intact, in
 * order. The frames are fed in pieces of varying size, so that a search
 * for the magic spans reads; those after the bad one are more than the
 * largest length a flip can make (the decoder waits for that many bytes
 * before the CRC tells). */
TEST(any_flip_loses_one_frame_only)
{
    enum { NF = 8 };
    uint8_t pay[NF][320];
    uint8_t *fr[NF];
    size_t fl[NF], total = 0;
    for (int k = 0; k < NF; k++) {
        th_fill_random(pay[k], sizeof pay[k], (uint64_t)k + 11);
        tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .stream = 2, .seq = (uint32_t)k + 1 };
        size_t len = 20 + 40 * (size_t)k;
        REQUIRE(tb_frame_build(&h, pay[k], len, 0, &fr[k], &fl[k]) == 0);
        total += fl[k];
    }
    uint8_t *all = malloc(total), *b = malloc(total);
    REQUIRE(all && b);
    size_t off[NF + 1] = { 0 };
    for (int k = 0; k < NF; k++) {
        memcpy(all + off[k], fr[k], fl[k]);
        off[k + 1] = off[k] + fl[k];
    }
    int bad = 0;
    uint64_t st = 99;
    for (size_t i = off[2]; i < off[3] && bad < 5; i++) {     /* every bit of frame 3 */
        for (int bit = 0; bit < 8; bit++) {
            memcpy(b, all, total);
            b[i] ^= (uint8_t)(1 << bit);
            tb_fdec_t *d = tb_fdec_new(1024);
            REQUIRE(d);
            uint32_t seen[NF];
            int ns = 0, resumes = 0, rc = 0;
            for (size_t at = 0; at < total && rc == 0;) {
                size_t piece = 1 + (size_t)(th_rand(&st) % 97);
                if (piece > total - at)
                    piece = total - at;
                rc = tb_fdec_feed(d, b + at, piece);
                at += piece;
                tb_frame_t f;
                int r;
                while (rc == 0 && (r = tb_fdec_next(d, &f)) != 0) {
                    if (r == 1) {
                        if (ns < NF)
                            seen[ns] = f.hdr.seq;
                        ns++;
                        CHECK_MEM(f.payload, pay[f.hdr.seq - 1], f.hdr.len);
                        tb_frame_release(&f);
                    } else {
                        resumes++;
                        rc = tb_fdec_resume(d);
                    }
                }
            }
            int ok = rc == 0 && ns == NF - 1 && resumes >= 1;
            for (int k = 0; ok && k < NF - 1; k++)
                ok = seen[k] == (uint32_t)(k < 2 ? k + 1 : k + 2);
            if (!ok) {
                th_fail(__FILE__, __LINE__, "flip of byte %zu bit %d of frame 3: rc %d, %d "
                        "frames, %d resumes", i - off[2], bit, rc, ns, resumes);
                bad++;
            }
            tb_fdec_destroy(d);
        }
    }
    free(all);
    free(b);
    for (int k = 0; k < NF; k++)
        free(fr[k]);
}

/* A peer that no longer speaks frames: after a megabyte without a header
 * the framing is lost for good. */
TEST(garbage_after_a_bad_header_is_final)
{
    tb_fdec_t *d = tb_fdec_new(1024);
    REQUIRE(d);
    static uint8_t junk[64 * 1024];
    memset(junk, 'x', sizeof junk);
    tb_frame_t f;
    int rc = 0, rounds = 0;
    while (rc == 0 && rounds++ < 40) {
        rc = tb_fdec_feed(d, junk, sizeof junk);
        while (rc == 0 && (rc = tb_fdec_next(d, &f)) < 0 && tb_fdec_resume(d) == 0)
            rc = 0;
    }
    CHECK_INT(rc, TBON_EFORMAT);
    CHECK(rounds <= 18);                          /* 1 MiB and a little */
    CHECK_INT(tb_fdec_error_kind(d), TB_FDEC_EMAGIC);
    CHECK(strstr(tb_fdec_error(d), "framing lost") != NULL);
    CHECK_INT(tb_fdec_resume(d), TBON_EFORMAT);
    tb_fdec_destroy(d);
}

/* Raw frame with arbitrary header fields (the builder refuses bad ones). */
static uint8_t *raw_frame(uint8_t type, uint16_t flags, const void *pay, uint32_t len, size_t *n)
{
    tb_frame_hdr_t h = { .type = type, .flags = flags, .len = len };
    uint8_t *f = malloc(TB_FRAME_HDR_SIZE + len);
    tb_frame_hdr_encode(&h, pay, f);
    if (len)
        memcpy(f + TB_FRAME_HDR_SIZE, pay, len);
    *n = TB_FRAME_HDR_SIZE + len;
    return f;
}

/* The error kind and message after feeding bytes[0..n). */
static int verdict(const uint8_t *b, size_t n, uint32_t max, char *msg, size_t msgsz)
{
    tb_fdec_t *d = tb_fdec_new(max);
    tb_frame_t fr;
    tb_fdec_feed(d, b, n);
    int rc;
    while ((rc = tb_fdec_next(d, &fr)) == 1)
        tb_frame_release(&fr);
    int kind = tb_fdec_error_kind(d);
    if (msg)
        snprintf(msg, msgsz, "%s", tb_fdec_error(d));
    if (kind && rc != (kind == TB_FDEC_ENOMEM ? TBON_ENOMEM : TBON_EFORMAT))
        kind = -1;
    tb_fdec_destroy(d);
    return kind;
}

TEST(header_errors_name_the_values)
{
    char msg[300];
    size_t n;
    uint8_t *f = raw_frame(11, 0, "x", 1, &n);
    CHECK_INT(verdict(f, n, 100, msg, sizeof msg), TB_FDEC_ETYPE);
    CHECK_STR(msg, "unknown frame type 11 (known: 1..10)");
    free(f);
    f = raw_frame(0, 0, "x", 1, &n);
    CHECK_INT(verdict(f, n, 100, NULL, 0), TB_FDEC_ETYPE);
    free(f);
    f = raw_frame(TB_FRAME_DATA, 0x0301, "x", 1, &n);
    CHECK_INT(verdict(f, n, 100, msg, sizeof msg), TB_FDEC_EFLAGS);
    CHECK_STR(msg, "unknown flag bits 0x0200 in flags 0x0301");
    free(f);
    f = raw_frame(TB_FRAME_DATA, 0, "x", 1, &n);
    f[4] = 1;
    CHECK_INT(verdict(f, n, 100, msg, sizeof msg), TB_FDEC_EVERSION);
    CHECK_STR(msg, "frame version 1, this side speaks version 3");
    f[4] = 2;
    f[0] = 'G';   /* an HTTP client, say */
    CHECK_INT(verdict(f, n, 100, msg, sizeof msg), TB_FDEC_EMAGIC);
    CHECK(strstr(msg, "bad magic 0x4e4f4247 (bytes 47 42 4f 4e)") == msg);
    free(f);
    /* Detected with the header alone, before any payload byte. */
    f = raw_frame(11, 0, "x", 1, &n);
    CHECK_INT(verdict(f, TB_FRAME_HDR_SIZE, 100, NULL, 0), TB_FDEC_ETYPE);
    CHECK_INT(verdict(f, TB_FRAME_HDR_SIZE - 1, 100, NULL, 0), TB_FDEC_OK);
    free(f);
}

/* A header claiming 4 GiB with a 1 MiB maximum fails at once, with nothing
 * allocated for it, though the payload never comes. */
TEST(too_big_before_allocation)
{
    char msg[300];
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .len = UINT32_MAX };
    uint8_t hdr[TB_FRAME_HDR_SIZE];
    tb_frame_hdr_encode_crc(&h, 0, hdr);
    tb_fdec_t *d = tb_fdec_new(MIB);
    REQUIRE(d);
    CHECK_INT(tb_fdec_feed(d, hdr, sizeof hdr), 0);
    tb_frame_t fr;
    CHECK_INT(tb_fdec_next(d, &fr), TBON_EFORMAT);
    CHECK_INT(tb_fdec_error_kind(d), TB_FDEC_ETOOBIG);
    CHECK_STR(tb_fdec_error(d), "payload length 4294967295 above the maximum 1048576 (DATA frame)");
    CHECK(tb_fdec_memory(d) < 64 * 1024);
    tb_fdec_destroy(d);

    /* max + 1 fails; exactly max passes. */
    h.len = MIB + 1;
    tb_frame_hdr_encode_crc(&h, 0, hdr);
    CHECK_INT(verdict(hdr, sizeof hdr, MIB, msg, sizeof msg), TB_FDEC_ETOOBIG);
    uint8_t *big = calloc(1, MIB);
    uint8_t *f;
    size_t n;
    h.len = 0;
    REQUIRE(tb_frame_build(&h, big, MIB, 0, &f, &n) == 0);
    CHECK_INT(verdict(f, n, MIB, NULL, 0), TB_FDEC_OK);
    CHECK_INT(verdict(f, n, MIB - 1, NULL, 0), TB_FDEC_ETOOBIG);
    free(f);
    free(big);
}

TEST(set_max_for_handshake_phase)
{
    uint8_t pay[1000] = { 1 };
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA };
    uint8_t *f;
    size_t n;
    REQUIRE(tb_frame_build(&h, pay, sizeof pay, 0, &f, &n) == 0);
    tb_fdec_t *d = tb_fdec_new(TB_FRAME_MAX_HANDSHAKE);
    CHECK_INT(verdict(f, n, TB_FRAME_MAX_HANDSHAKE, NULL, 0), TB_FDEC_ETOOBIG);
    tb_fdec_set_max(d, TB_FRAME_MAX_DEFAULT);
    CHECK_INT(tb_fdec_feed(d, f, n), 0);
    tb_frame_t fr;
    CHECK_INT(tb_fdec_next(d, &fr), 1);
    CHECK_UINT(fr.hdr.len, sizeof pay);
    tb_frame_release(&fr);
    tb_fdec_destroy(d);
    free(f);
}

/* ---- compression ---- */

TEST(compression_round_trip_1mib)
{
    uint8_t *text = malloc(MIB);
    REQUIRE(text);
    fill_text(text, MIB);
    tb_frame_hdr_t h = { .type = TB_FRAME_TOPOLOGY, .seq = 9 };
    uint8_t *f;
    size_t n;
    REQUIRE(tb_frame_build(&h, text, MIB, 1, &f, &n) == 0);
    CHECK_UINT(f[6], TB_FRAME_F_ZLIB);
    CHECK(n < MIB / 4);
    tb_fdec_t *d = tb_fdec_new(MIB);
    CHECK_INT(tb_fdec_feed(d, f, n), 0);
    tb_frame_t fr;
    CHECK_INT(tb_fdec_next(d, &fr), 1);
    CHECK_UINT(fr.hdr.flags, 0);
    CHECK_UINT(fr.hdr.len, MIB);
    CHECK_UINT(fr.wire_len, n);
    CHECK_UINT(fr.hdr.seq, 9);
    CHECK_MEM(fr.payload, text, MIB);
    tb_frame_release(&fr);
    tb_fdec_destroy(d);
    free(f);

    /* Below the threshold, or threshold 0: sent as is. */
    REQUIRE(tb_frame_build(&h, text, 1000, 1001, &f, &n) == 0);
    CHECK_UINT(n, TB_FRAME_HDR_SIZE + 1000);
    CHECK_UINT(f[6], 0);
    free(f);
    REQUIRE(tb_frame_build(&h, text, MIB, 0, &f, &n) == 0);
    CHECK_UINT(n, TB_FRAME_HDR_SIZE + MIB);
    free(f);
    REQUIRE(tb_frame_build(&h, text, 1000, 1000, &f, &n) == 0);
    CHECK_UINT(f[6], TB_FRAME_F_ZLIB);
    free(f);
    free(text);
}

TEST(incompressible_stays_raw)
{
    uint8_t *r = malloc(65536);
    th_fill_random(r, 65536, 8);
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA };
    uint8_t *f;
    size_t n;
    REQUIRE(tb_frame_build(&h, r, 65536, 1, &f, &n) == 0);
    CHECK_UINT(n, TB_FRAME_HDR_SIZE + 65536);
    CHECK_UINT(f[6], 0);
    CHECK_MEM(f + TB_FRAME_HDR_SIZE, r, 65536);
    /* Tiny payloads never shrink either. */
    free(f);
    REQUIRE(tb_frame_build(&h, "abc", 3, 1, &f, &n) == 0);
    CHECK_UINT(n, TB_FRAME_HDR_SIZE + 3);
    free(f);
    free(r);
}

/* A ZLIB-flagged frame whose payload is claim || zlib(data[0..dn)) + extra. */
static uint8_t *zframe(uint32_t claim, const uint8_t *data, size_t dn, size_t cut,
                       const char *extra, size_t *n)
{
    uLongf clen = compressBound((uLong)dn);
    uint8_t *pay = malloc(4 + clen + 16);
    if (compress2(pay + 4, &clen, data, (uLong)dn, 9) != Z_OK)
        abort();
    clen -= cut;
    size_t en = extra ? strlen(extra) : 0;
    if (en)
        memcpy(pay + 4 + clen, extra, en);
    pay[0] = (uint8_t)claim;
    pay[1] = (uint8_t)(claim >> 8);
    pay[2] = (uint8_t)(claim >> 16);
    pay[3] = (uint8_t)(claim >> 24);
    uint8_t *f = raw_frame(TB_FRAME_TOPOLOGY, TB_FRAME_F_ZLIB, pay, (uint32_t)(4 + clen + en), n);
    free(pay);
    return f;
}

TEST(zlib_bombs_and_lies)
{
    char msg[300];
    size_t n;
    uint8_t *zeros = calloc(1, MIB);
    REQUIRE(zeros);
    uint8_t *f;

    /* Claims 1000 bytes, inflates to 1 MiB: stopped at 1000. */
    f = zframe(1000, zeros, MIB, 0, NULL, &n);
    CHECK(n < 2000);
    CHECK_INT(verdict(f, n, 4 * MIB, msg, sizeof msg), TB_FDEC_EZLIB);
    CHECK_STR(msg, "compressed payload inflates to more than the 1000 bytes it claims");
    free(f);

    /* Claims more than the maximum: refused before inflating. */
    f = zframe(MIB + 1, zeros, MIB, 0, NULL, &n);
    CHECK_INT(verdict(f, n, MIB, msg, sizeof msg), TB_FDEC_ETOOBIG);
    CHECK_STR(msg, "uncompressed length 1048577 above the maximum 1048576 (TOPOLOGY frame)");
    free(f);

    /* Claims more than it holds. */
    f = zframe(200, zeros, 100, 0, NULL, &n);
    CHECK_INT(verdict(f, n, MIB, msg, sizeof msg), TB_FDEC_EZLIB);
    CHECK_STR(msg, "compressed payload inflates to 100 bytes, it claims 200");
    free(f);

    /* Exactly right, and exactly right at 0 bytes. */
    f = zframe(100, zeros, 100, 0, NULL, &n);
    CHECK_INT(verdict(f, n, MIB, NULL, 0), TB_FDEC_OK);
    free(f);
    f = zframe(0, zeros, 0, 0, NULL, &n);
    tb_fdec_t *d = tb_fdec_new(100);
    tb_fdec_feed(d, f, n);
    tb_frame_t fr;
    CHECK_INT(tb_fdec_next(d, &fr), 1);
    CHECK_UINT(fr.hdr.len, 0);
    CHECK(fr.payload == NULL);
    tb_fdec_destroy(d);
    free(f);

    /* Trailing bytes after the stream, a truncated stream, garbage. */
    f = zframe(100, zeros, 100, 0, "junk", &n);
    CHECK_INT(verdict(f, n, MIB, msg, sizeof msg), TB_FDEC_EZLIB);
    CHECK_STR(msg, "4 bytes after the end of the zlib stream");
    free(f);
    f = zframe(100, zeros, 100, 3, NULL, &n);
    CHECK_INT(verdict(f, n, MIB, msg, sizeof msg), TB_FDEC_EZLIB);
    CHECK(strstr(msg, "zlib stream truncated") == msg);
    free(f);
    f = raw_frame(TB_FRAME_TOPOLOGY, TB_FRAME_F_ZLIB, "\x10\0\0\0garbage!", 12, &n);
    CHECK_INT(verdict(f, n, MIB, msg, sizeof msg), TB_FDEC_EZLIB);
    CHECK(strstr(msg, "corrupt zlib stream") == msg);
    free(f);
    f = raw_frame(TB_FRAME_TOPOLOGY, TB_FRAME_F_ZLIB, "\x10\0\0", 3, &n);
    CHECK_INT(verdict(f, n, MIB, msg, sizeof msg), TB_FDEC_EZLIB);
    CHECK_STR(msg, "compressed payload of 3 bytes is shorter than its 4-byte length prefix");
    free(f);

    /* The same bomb through the direct-read path (payload > 16 KiB, arriving
     * in pieces). */
    uint8_t *noise = malloc(64 * 1024);
    th_fill_random(noise, 64 * 1024, 9);
    for (int i = 0; i < 64 * 1024; i += 4)
        noise[i] = 0;
    f = zframe(1000, noise, 64 * 1024, 0, NULL, &n);
    CHECK(n > 16 * 1024 + TB_FRAME_HDR_SIZE);
    d = tb_fdec_new(MIB);
    int rc = 0;
    for (size_t off = 0; off < n && rc == 0; off += 1000) {
        CHECK_INT(tb_fdec_feed(d, f + off, n - off < 1000 ? n - off : 1000), 0);
        rc = tb_fdec_next(d, &fr);
    }
    CHECK_INT(rc, TBON_EFORMAT);
    CHECK_INT(tb_fdec_error_kind(d), TB_FDEC_EZLIB);
    tb_fdec_destroy(d);
    free(f);
    free(noise);
    free(zeros);
}

/* A CRC error in a payload that arrived through reserve into its final buffer. */
TEST(direct_path_crc_error)
{
    stream_t st;
    memset(&st, 0, sizeof st);
    stream_add(&st, TB_FRAME_DATA, 100000, 0, 0, 1);
    st.bytes[TB_FRAME_HDR_SIZE + 77777] ^= 0x01;
    tb_fdec_t *d = tb_fdec_new(MIB);
    size_t off = 0;
    int rc = 0;
    tb_frame_t fr;
    while (off < st.len && rc == 0) {
        void *p;
        size_t avail;
        REQUIRE(tb_fdec_reserve(d, 8192, &p, &avail) == 0);
        size_t k = st.len - off < avail ? st.len - off : avail;
        memcpy(p, st.bytes + off, k);
        tb_fdec_commit(d, k);
        off += k;
        rc = tb_fdec_next(d, &fr);
    }
    CHECK_INT(rc, TBON_EFORMAT);
    CHECK_UINT(off, st.len);
    CHECK_INT(tb_fdec_error_kind(d), TB_FDEC_ECRC);
    tb_fdec_destroy(d);
    stream_free(&st);
}
