/* test_link.c - the link layer of a data connection (net/link.h): sequence
 * numbers, acknowledgements, retention, resend requests, duplicates, a
 * socket replaced; two tb_conn_t over a socketpair, driven by hand */
#include "../harness.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/bigmem.h"
#include "util/clock.h"
#include "util/crc32c.h"
#include "codec/packet_int.h"
#include "net/conn.h"
#include "net/link.h"
#include "lib/memlimit.h"
#include "lib/sanitizer.h"

typedef struct {
    size_t n;
    int32_t tag[8192];
} got_t;

static void pair(tb_conn_t **a, tb_conn_t **b)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        th_fail(__FILE__, __LINE__, "socketpair");
    *a = tb_conn_new(sv[0], 1, -1, TB_FRAME_MAX_DEFAULT);
    *b = tb_conn_new(sv[1], 0, 0, TB_FRAME_MAX_DEFAULT);
}

static void send_n(tb_conn_t *c, int32_t from, int32_t n)
{
    for (int32_t t = from; t < from + n; t++) {
        tbon_packet_t *p = tbon_packet_new(t, "%d", t);
        tb_conn_send_packet(c, TB_FRAME_DATA, 1, t, 0, p);
        tbon_packet_unref(p);
    }
}

/* What the reactor's on_frames does with the decoder's frames: each one
 * the link delivers goes to each(c, f, arg), which takes it over. */
static void take_frames(tb_conn_t *c, int64_t now,
                        void (*each)(tb_conn_t *c, tb_frame_t *f, void *arg), void *arg)
{
    tb_frame_t f;
    for (;;) {
        for (;;) {
            if (tb_link_next(c, &f, now) != 1) {
                if (tb_fdec_next(c->dec, &f) != 1)
                    break;
                int r = tb_link_rx(c, &f, now);
                if (r == 2)
                    continue;
                if (r == 0) {
                    tb_frame_release(&f);
                    continue;
                }
            }
            each(c, &f, arg);
        }
        if (tb_fdec_error_kind(c->dec) == TB_FDEC_OK || tb_fdec_resume(c->dec) != 0)
            break;
        tb_link_bad_frame(c, now);
    }
}

static void note_tag(tb_conn_t *c, tb_frame_t *f, void *arg)
{
    got_t *g = arg;
    (void)c;
    if (g && g->n < 8192)
        g->tag[g->n++] = f->hdr.tag;
    tb_frame_release(f);
}

static void take(tb_conn_t *c, got_t *g, int64_t now)
{
    take_frames(c, now, note_tag, g);
}

static void recv_all(tb_conn_t *c, got_t *g)
{
    tb_conn_read(c, 1u << 24);
    take(c, g, tb_now_ms());
}

static void pump(tb_conn_t *a, tb_conn_t *b, got_t *g);

static void check_in_order(const got_t *g, int32_t from, size_t n)
{
    CHECK_UINT(g->n, n);
    for (size_t i = 0; i < g->n && i < n; i++)
        if (g->tag[i] != from + (int32_t)i) {
            th_fail(__FILE__, __LINE__, "frame %zu has tag %d, expected %d", i, g->tag[i],
                    from + (int32_t)i);
            return;
        }
}

/* A lone ACK for a few small frames may wait TB_LINK_ACK_LAZY_MS: its due
 * time comes out apart (a kicker does not wake for it); once the peer
 * holds TB_LINK_ACK_BYTES it is owed within TB_LINK_ACK_DELAY_MS, with
 * the others. */
TEST(lazy_ack_due_apart)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    send_n(a, 1, 3);
    CHECK_INT(tb_conn_flush(a), 1);
    int64_t now = tb_now_ms();
    recv_all(b, NULL);
    CHECK(b->ack_due >= now + TB_LINK_ACK_LAZY_MS);
    int64_t next = INT64_MAX, lazy = INT64_MAX;
    tb_link_tick(b, now, &next, &lazy);
    CHECK(next == INT64_MAX);
    CHECK(lazy == b->ack_due);
    /* the bytes' threshold passed: owed soon */
    b->rx_unacked_bytes = TB_LINK_ACK_BYTES;
    send_n(a, 4, 1);
    CHECK_INT(tb_conn_flush(a), 1);
    now = tb_now_ms();
    recv_all(b, NULL);
    CHECK(b->ack_due <= tb_now_ms() + TB_LINK_ACK_DELAY_MS);
    next = lazy = INT64_MAX;
    tb_link_tick(b, now, &next, &lazy);
    CHECK(next == b->ack_due);
    CHECK(lazy == INT64_MAX);
    /* a lazy one due later than another connection's stays lazy */
    b->ack_lazy = 1;
    next = INT64_MAX;
    lazy = b->ack_due - 1;
    tb_link_tick(b, now, &next, &lazy);
    CHECK(next == INT64_MAX);
    CHECK(lazy == b->ack_due - 1);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

TEST(sequenced_retained_until_acknowledged)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g;
    send_n(a, 100, 10);
    CHECK_UINT(a->tx_next, 11);
    size_t held = tb_conn_held(a);
    CHECK(held > 0);
    CHECK_INT(tb_conn_flush(a), 1);
    CHECK_UINT(a->out_bytes, 0);
    CHECK_UINT(a->ret_bytes, held);      /* written, kept */
    CHECK_UINT(tb_conn_held(a), held);   /* still held, */
    CHECK_UINT(tb_conn_unwritten(a), 0); /* but no longer toward the marks */
    CHECK_UINT(a->q.len, 10);
    recv_all(b, &g);
    check_in_order(&g, 100, 10);
    CHECK_UINT(b->rx, 10);
    CHECK_UINT(b->rx_unacked, 10);
    CHECK(b->ack_due > 0);
    CHECK_UINT(b->ctl_left, 0);          /* not yet: fewer than TB_LINK_ACK_EVERY */
    int64_t next = INT64_MAX;
    tb_link_tick(b, b->ack_due, &next, &next);
    CHECK_UINT(b->ctl_left, TB_FRAME_HDR_SIZE);   /* the delay is over: a lone ACK */
    CHECK_INT(tb_conn_flush(b), 1);
    recv_all(a, NULL);
    CHECK_UINT(a->acked, 10);
    CHECK_UINT(a->ret_bytes, 0);
    CHECK_UINT(a->q.len, 0);
    CHECK_UINT(tb_conn_held(a), 0);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

TEST(acknowledgement_rides_on_the_other_way)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g, h;
    send_n(a, 1, 3);
    tb_conn_flush(a);
    recv_all(b, &g);
    send_n(b, 50, 1);                    /* carries ack 3: no lone ACK owed */
    CHECK(b->ack_due != 0);              /* ... once it is written, not before */
    tb_conn_flush(b);
    CHECK_UINT(b->rx_unacked, 0);
    CHECK_INT(b->ack_due, 0);
    recv_all(a, &h);
    check_in_order(&h, 50, 1);
    CHECK_UINT(a->acked, 3);
    CHECK_UINT(a->q.len, 0);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

TEST(a_lone_ack_every_so_many_frames)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g;
    send_n(a, 0, TB_LINK_ACK_EVERY);
    tb_conn_flush(a);
    recv_all(b, &g);
    CHECK_UINT(g.n, TB_LINK_ACK_EVERY);
    CHECK_UINT(b->ctl_left, TB_FRAME_HDR_SIZE);
    tb_conn_flush(b);
    recv_all(a, NULL);
    CHECK_UINT(a->acked, TB_LINK_ACK_EVERY);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

/* a sends frames 1..k (one size each) to b with bit `bit` of byte `byte` of
 * frame `which` (1-based) flipped on the way, b takes them (into g) at the
 * time it returns. */
static int64_t send_flipped(tb_conn_t *a, tb_conn_t *b, got_t *g, int k, int which,
                            size_t byte, int bit)
{
    send_n(a, 1, k);
    tb_conn_flush(a);
    uint8_t buf[4096];
    ssize_t n = recv(b->fd, buf, sizeof buf, 0);
    if (n <= 0) {
        th_fail(__FILE__, __LINE__, "recv: %zd", n);
        return tb_now_ms();
    }
    size_t frame = (size_t)n / (size_t)k;
    buf[(size_t)(which - 1) * frame + byte] ^= (uint8_t)(1u << bit);
    tb_fdec_feed(b->dec, buf, (size_t)n);
    int64_t now = tb_now_ms();
    take(b, g, now);
    return now;
}

/* A bit flipped in frame 3 of 6: the receiver skips it, keeps the frames
 * after it, asks for frame 3 alone (SELECT after 2, up to 3), and delivers
 * 1..6 exactly once in order; the sender writes frame 3 only. */
TEST(crc_error_answered_with_a_selective_resend)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g;
    send_flipped(a, b, &g, 6, 3, TB_FRAME_HDR_SIZE + 1, 4);
    check_in_order(&g, 1, 2);
    CHECK_UINT(b->n_crc, 1);
    CHECK_UINT(b->n_kept, 3);
    CHECK_UINT(b->ctl_left, TB_FRAME_HDR_SIZE);       /* SELECT after 2, up to 3 */
    tb_conn_flush(b);
    recv_all(a, NULL);
    CHECK_UINT(a->acked, 2);
    CHECK(!a->rewind);
    CHECK(a->sel_active);
    CHECK_INT(tb_conn_flush(a), 1);
    recv_all(b, &g);
    check_in_order(&g, 1, 6);
    CHECK_UINT(a->n_resent, 0);
    CHECK_UINT(a->n_selected, 1);
    CHECK_UINT(b->ooo_n, 0);
    CHECK_UINT(b->ooo_bytes, 0);
    CHECK(b->ooo == NULL);              /* freed once the gap was filled */
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

/* Two frames lost apart (2 and 5 of 7): two gaps, each asked for alone in
 * turn; everything arrives once, in order. */
TEST(two_gaps_filled_in_turn)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g;
    send_n(a, 1, 7);
    tb_conn_flush(a);
    uint8_t buf[4096];
    ssize_t n = recv(b->fd, buf, sizeof buf, 0);
    REQUIRE(n > 0);
    size_t frame = (size_t)n / 7;
    buf[1 * frame + 3] ^= 0x01;          /* frame 2's magic */
    buf[4 * frame + TB_FRAME_HDR_SIZE] ^= 0x80;   /* frame 5's payload */
    tb_fdec_feed(b->dec, buf, (size_t)n);
    take(b, &g, tb_now_ms());
    check_in_order(&g, 1, 1);
    for (int i = 0; i < 10 && g.n < 7; i++) {
        int64_t next = INT64_MAX;
        tb_link_tick(b, tb_now_ms() + 100, &next, &next);  /* a retry, if one is due */
        tb_conn_flush(b);
        recv_all(a, NULL);
        tb_conn_flush(a);
        recv_all(b, &g);
    }
    check_in_order(&g, 1, 7);
    CHECK_UINT(a->n_resent, 0);
    CHECK_UINT(a->n_selected, 2);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

/* The last frame corrupt on a quiet link: no good frame follows to show
 * what was lost, so after TB_LINK_ACK_DELAY_MS the receiver asks for
 * everything after what it has (RESEND), and gets it. */
TEST(corrupt_last_frame_on_a_quiet_link)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g;
    /* The link's clock is the one it is given: the receive's time, not a
     * later reading (under load the test may be descheduled past the delay
     * in between, and the first tick would already have asked). */
    int64_t now = send_flipped(a, b, &g, 3, 3, TB_FRAME_HDR_SIZE, 2);  /* frame 3's payload */
    check_in_order(&g, 1, 2);
    CHECK(!tb_fdec_partial(b->dec));     /* nothing of the corrupt frame is left */
    int64_t next = INT64_MAX;
    tb_link_tick(b, now, &next, &next);
    CHECK(next <= now + TB_LINK_ACK_DELAY_MS);
    tb_link_tick(b, now + TB_LINK_ACK_DELAY_MS, &next, &next);
    tb_conn_flush(b);
    recv_all(a, NULL);
    CHECK(a->rewind);
    tb_conn_flush(a);
    recv_all(b, &g);
    check_in_order(&g, 1, 3);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

/* A frame asked for alone is half written (the socket is full) when the
 * acknowledgement of it arrives: it is still written whole (the framing),
 * then dropped; nothing stays retained. */
TEST(ack_for_a_frame_half_selected)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g;
    size_t big = 1u << 20;               /* larger than the socket's buffer */
    uint8_t *buf = calloc(1, big);
    REQUIRE(buf);
    tb_conn_send_buf(a, &(tb_frame_hdr_t){ .type = TB_FRAME_DATA, .tag = 1 }, buf, big);
    send_n(a, 2, 2);
    pump(a, b, &g);
    check_in_order(&g, 1, 3);
    /* b asks for frame 1 again, as if it had lost it */
    tb_frame_hdr_t h = { .type = TB_FRAME_ACK, .flags = TB_FRAME_F_SELECT, .ack = 0, .key = 1 };
    uint8_t sel[TB_FRAME_HDR_SIZE];
    tb_frame_hdr_encode(&h, NULL, sel);
    REQUIRE(send(b->fd, sel, sizeof sel, 0) == (ssize_t)sizeof sel);
    recv_all(a, NULL);
    CHECK(a->sel_active);
    CHECK_INT(tb_conn_flush(a), 0);      /* frame 1 again, half way */
    CHECK(a->sel_busy && a->sel_off > 0);
    int64_t now = tb_now_ms();
    tb_link_ack(b, 0, now);              /* b has 1..3 */
    CHECK_INT(tb_conn_flush(b), 1);
    recv_all(a, NULL);
    CHECK_UINT(a->acked, 3);
    CHECK(a->q.len >= 1);                /* frame 1, still being written */
    for (int i = 0; i < 1000 && tb_conn_wants_write(a); i++) {
        tb_conn_flush(a);
        recv_all(b, &g);
    }
    recv_all(b, &g);
    CHECK_UINT(g.n, 3);                  /* frame 1 again was a duplicate */
    CHECK_UINT(b->n_dups, 1);
    CHECK_UINT(a->q.len, 0);
    CHECK_UINT(tb_conn_held(a), 0);
    CHECK_UINT(a->n_selected, 1);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

TEST(duplicates_dropped_by_sequence_number)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g;
    send_n(a, 1, 5);
    tb_conn_flush(a);
    recv_all(b, &g);
    a->rewind = 1;                       /* as if a RESEND had come twice */
    send_n(a, 6, 1);
    tb_conn_flush(a);
    recv_all(b, &g);
    check_in_order(&g, 1, 6);
    CHECK_UINT(b->n_dups, 5);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

/* The socket breaks with frames 6..10 written but never read, and 11 sent
 * while the link is down: on the new socket each side says what it has
 * (RESEND) and holds the rest until the other's word; then 6..11 arrive
 * once, in order, and nothing before. */
TEST(relink_resends_what_the_peer_lacks)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g, h;
    send_n(a, 1, 5);
    tb_conn_flush(a);
    recv_all(b, &g);
    send_n(b, 900, 2);
    tb_conn_flush(b);
    recv_all(a, &h);
    CHECK_UINT(a->acked, 5);
    send_n(a, 6, 5);
    tb_conn_flush(a);                    /* never read: the socket breaks */
    int64_t now = tb_now_ms();
    tb_link_down(a, now);
    tb_link_down(b, now);
    CHECK(a->down && b->down);
    CHECK_INT(a->fd, -1);
    send_n(a, 11, 1);                    /* sending goes on while down */
    CHECK_INT(tb_conn_flush(a), 1);
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    tb_link_up(a, sv[0], now);
    tb_link_up(b, sv[1], now);
    CHECK(a->hold && b->hold);
    CHECK_INT(tb_conn_flush(a), 1);      /* only its RESEND */
    recv_all(b, &g);
    check_in_order(&g, 1, 5);            /* nothing yet */
    CHECK(!b->hold);
    CHECK_INT(tb_conn_flush(b), 1);
    recv_all(a, &h);
    CHECK(!a->hold);
    CHECK_INT(a->down_since, 0);
    CHECK_INT(tb_conn_flush(a), 1);
    recv_all(b, &g);
    check_in_order(&g, 1, 11);
    CHECK_UINT(b->n_dups, 0);
    check_in_order(&h, 900, 2);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

TEST(frames_outside_the_sequence)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g;
    tbon_packet_t *p = tbon_packet_new(7, "%d", 7);
    tb_conn_send_packet_oob(a, TB_FRAME_CONTROL, 7, 0, p);
    tbon_packet_unref(p);
    send_n(a, 1, 1);
    CHECK_UINT(a->tx_next, 2);
    tb_conn_flush(a);
    CHECK_UINT(a->q.len, 1);             /* the unsequenced one is not kept */
    recv_all(b, &g);
    CHECK_UINT(g.n, 2);
    CHECK_UINT(b->rx, 1);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

TEST(sequence_numbers_wrap_past_zero)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g;
    a->tx_next = UINT32_MAX - 2;
    a->acked = b->rx = UINT32_MAX - 3;
    send_n(a, 1, 6);
    tb_conn_flush(a);
    recv_all(b, &g);
    check_in_order(&g, 1, 6);
    CHECK_UINT(b->rx, 3);                /* ..., UINT32_MAX, 1, 2, 3: 0 is skipped */
    tb_link_ack(b, 0, tb_now_ms());
    tb_conn_flush(b);
    recv_all(a, NULL);
    CHECK_UINT(a->acked, 3);
    CHECK_UINT(a->q.len, 0);
    CHECK(tb_seq_lt(UINT32_MAX, 1));
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

/* At most TB_LINK_WINDOW frames beyond the last acknowledged one go out;
 * an acknowledgement lets the rest go. */
TEST(window_bounds_what_is_unacknowledged)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g;
    send_n(a, 0, TB_LINK_WINDOW + 100);
    CHECK_INT(tb_conn_flush(a), 1);
    CHECK(a->win_blocked);
    CHECK(!tb_conn_wants_write(a));      /* no EPOLLOUT while blocked */
    recv_all(b, &g);
    CHECK_UINT(g.n, TB_LINK_WINDOW);
    tb_link_ack(b, 0, tb_now_ms());
    tb_conn_flush(b);
    recv_all(a, NULL);
    CHECK(!a->win_blocked);
    CHECK(a->dirty);
    CHECK_INT(tb_conn_flush(a), 1);
    recv_all(b, &g);
    check_in_order(&g, 0, TB_LINK_WINDOW + 100);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

/* Read at most max bytes (tb_conn_read takes all the decoder has room for). */
static void recv_some(tb_conn_t *c, got_t *g, size_t max)
{
    void *p;
    size_t avail;
    if (tb_fdec_reserve(c->dec, 0, &p, &avail) != 0)
        return;
    ssize_t n = recv(c->fd, p, avail < max ? avail : max, MSG_DONTWAIT);
    if (n > 0)
        tb_fdec_commit(c->dec, (size_t)n);
    take(c, g, tb_now_ms());
}

/* Streaming both ways, reading a little at a time and queueing frames in
 * between, each of which carries the acknowledgement: once both windows are
 * full those frames are held back, so the acknowledgement must still go
 * alone when due (it is paid by a frame written, not by one queued), or
 * neither side ever moves again. */
TEST(streaming_both_ways_through_full_windows)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t ga, gb;
    int32_t sent = TB_LINK_WINDOW + 100;
    send_n(a, 0, sent);
    send_n(b, 0, sent);
    tb_conn_flush(a);
    tb_conn_flush(b);
    CHECK(a->win_blocked && b->win_blocked);
    for (int round = 0; round < 400; round++) {
        /* about 20 frames at a time: fewer than TB_LINK_ACK_EVERY */
        recv_some(a, &ga, 1000);
        recv_some(b, &gb, 1000);
        if (round < 60) {
            send_n(a, sent, 20);
            send_n(b, sent, 20);
            sent += 20;
        }
        int64_t next = INT64_MAX, now = tb_now_ms() + 1000;    /* every owed ACK is due */
        tb_link_tick(a, now, &next, &next);
        tb_link_tick(b, now, &next, &next);
        tb_conn_flush(a);
        tb_conn_flush(b);
    }
    check_in_order(&ga, 0, (size_t)sent);
    check_in_order(&gb, 0, (size_t)sent);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

/* Write a's frames into b until a has nothing left to write (or it stops
 * making progress: the window, a hold); b's frames go to g. */
static void pump(tb_conn_t *a, tb_conn_t *b, got_t *g)
{
    for (int i = 0; i < 1000 && a->out_bytes; i++) {
        size_t before = a->out_bytes;
        tb_conn_flush(a);
        recv_all(b, g);
        if (a->out_bytes == before && !tb_conn_wants_write(a))
            break;
    }
}

/* A resend request that crossed the frames it asks for (it was sent again
 * after 50 ms, say): the sender rewinds and is half way through writing
 * the first frame again when the acknowledgement of all of them arrives.
 * That frame must still be written whole (the framing), and it and the
 * rest are then done: none of them stays in the queue below the
 * acknowledged number, where the window took it for far ahead and held
 * every later frame back for good (bench_ft --link stalled so). */
TEST(ack_for_a_frame_half_written_again)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g;
    size_t big = 1u << 20;               /* larger than the socket's buffer */
    uint8_t *buf = calloc(1, big);
    REQUIRE(buf);
    tb_conn_send_buf(a, &(tb_frame_hdr_t){ .type = TB_FRAME_DATA, .tag = 1 }, buf, big);
    send_n(a, 2, 2);
    int64_t now = tb_now_ms();
    tb_link_ack(b, 1, now);              /* a RESEND after 0, not yet gone */
    pump(a, b, &g);
    check_in_order(&g, 1, 3);
    CHECK_UINT(b->rx, 3);
    CHECK_INT(tb_conn_flush(b), 1);      /* the stale RESEND */
    recv_all(a, NULL);
    CHECK(a->rewind);
    CHECK_INT(tb_conn_flush(a), 0);      /* frame 1 again, half way */
    CHECK(a->qoff > 0);
    tb_link_ack(b, 0, now);              /* b has 1..3 */
    CHECK_INT(tb_conn_flush(b), 1);
    recv_all(a, NULL);
    CHECK_UINT(a->acked, 3);
    send_n(a, 4, 1);
    pump(a, b, &g);
    CHECK_UINT(a->out_bytes, 0);
    CHECK(!a->win_blocked);
    CHECK_UINT(g.n, 4);                  /* frame 1 again was a duplicate */
    if (g.n == 4)
        CHECK_INT(g.tag[3], 4);
    CHECK_UINT(b->n_dups, 1);
    tb_link_ack(b, 0, now);
    tb_conn_flush(b);
    recv_all(a, NULL);
    CHECK_UINT(a->q.len, 0);
    CHECK_UINT(tb_conn_held(a), 0);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

/* A resend request while a lone ACK is half written (the socket was full
 * in the middle of it) cannot go at once; it must not be forgotten (the
 * frame it asks for may have been the last to come): it goes once the
 * half ACK is out, and no timer spins meanwhile. */
TEST(resend_request_behind_a_half_written_ack)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    send_n(b, 1, 2);
    tb_conn_flush(b);
    recv_all(a, NULL);                   /* a has 1..2 */
    int64_t now = tb_now_ms();
    tb_link_ack(a, 0, now);
    REQUIRE(send(a->fd, a->ctl, 24, 0) == 24);   /* as a short write would */
    a->ctl_left = TB_FRAME_HDR_SIZE - 24;
    tb_link_bad_frame(a, now);           /* frame 3 failed its CRC */
    CHECK_UINT(a->ctl_left, TB_FRAME_HDR_SIZE - 24);
    int64_t next = INT64_MAX;
    tb_link_tick(a, now + TB_LINK_NACK_RETRY_MS, &next, &next);
    CHECK(next == INT64_MAX);            /* EPOLLOUT, not a timer, comes next */
    CHECK_INT(tb_conn_flush(a), 1);      /* the rest of the ACK */
    CHECK_UINT(a->ctl_left, 0);
    next = INT64_MAX;
    tb_link_tick(a, now + TB_LINK_NACK_RETRY_MS, &next, &next);
    CHECK_UINT(a->ctl_left, TB_FRAME_HDR_SIZE);  /* the resend request */
    CHECK_INT(tb_conn_flush(a), 1);
    recv_all(b, NULL);
    CHECK(b->rewind);
    CHECK_UINT(b->acked, 2);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

/* Frames put together from their pieces (tb_conn_reassemble): the first
 * whole DATA frame is kept, the whole ones counted. */
struct whole {
    tb_frame_t f;
    int n;
};

static void note_whole(tb_conn_t *c, tb_frame_t *f, void *arg)
{
    struct whole *w = arg;
    if (((f->hdr.flags & TB_FRAME_F_FRAG) || c->frag_len) && tb_conn_reassemble(c, f) != 1)
        return;
    if (f->hdr.type == TB_FRAME_DATA && w->n++ == 0)
        w->f = *f;
    else
        tb_frame_release(f);
}

/* A 20 MiB packet goes in three pieces; its pieces are read straight into
 * the reassembly (the decoder holds none of their bytes half-way); a bit
 * flipped in the second makes the receiver ask for it again, its bytes
 * are read into the same place once more, and the packet arrives whole,
 * exact and once. */
TEST(packet_in_pieces_read_into_place_and_resent)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    size_t n = (size_t)20 << 20;
    uint8_t *data = malloc(n), *buf = malloc((size_t)1 << 20);
    REQUIRE(data && buf);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i * 131 + (i >> 16));
    tbon_packet_t *p = tbon_packet_new(7, "%auc", data, n);
    REQUIRE(p);
    CHECK_INT(tb_conn_send_packet(a, TB_FRAME_DATA, 1, 7, 0, p), 0);
    CHECK_UINT(a->q.len, 3);
    size_t off = 0, flip_at = 2 * TB_FRAME_HDR_SIZE + TB_FRAME_PIECE + 1000;
    size_t mid_mem = SIZE_MAX;
    int flipped = 0;
    static struct whole w;
    memset(&w, 0, sizeof w);
    int64_t now = tb_now_ms();
    for (int it = 0; it < 100000 && !w.n; it++) {
        tb_conn_flush(a);
        ssize_t k = recv(b->fd, buf, (size_t)1 << 20, MSG_DONTWAIT);
        if (k > 0) {
            if (!flipped && off <= flip_at && flip_at < off + (size_t)k) {
                buf[flip_at - off] ^= 0x10;
                flipped = 1;
            }
            off += (size_t)k;
            CHECK_INT(tb_fdec_feed(b->dec, buf, (size_t)k), 0);
            take_frames(b, now, note_whole, &w);
            if (b->frag_len && tb_fdec_partial(b->dec) && tb_fdec_memory(b->dec) < mid_mem)
                mid_mem = tb_fdec_memory(b->dec);
        }
        tb_conn_flush(b);               /* acknowledgements, the ask for piece 2 */
        recv_all(a, NULL);
    }
    CHECK_INT(w.n, 1);
    CHECK(flipped);
    CHECK_UINT(b->n_crc, 1);
    /* piece 2 written again (from it on, or alone while piece 3 was kept) */
    CHECK(a->n_resent + a->n_selected >= 1);
    CHECK(mid_mem < ((size_t)1 << 20)); /* a piece's bytes went into place */
    size_t len;
    const uint8_t *want = tb_packet_payload(p, &len);
    CHECK_UINT(w.f.hdr.len, len);
    CHECK(w.f.payload && memcmp(w.f.payload, want, len) == 0);
    CHECK(!w.f.placed);                 /* the whole packet's buffer is the taker's */
    CHECK_UINT(b->frag_len, 0);
    tb_frame_release(&w.f);
    tbon_packet_unref(p);
    free(buf);
    free(data);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

/* A packet of n bytes in pieces from a to b, read as they come: 0 if it
 * arrived once, whole and exact; 2 if it did, but its buffer moved while it
 * grew; 1 if not. */
static int move_in_pieces(size_t n)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    uint8_t *data = malloc(n);
    if (!data)
        return 1;
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i * 131 + (i >> 16));
    tbon_packet_t *p = tbon_packet_new(7, "%auc", data, n);
    free(data);
    if (!p || tb_conn_send_packet(a, TB_FRAME_DATA, 1, 7, 0, p) != 0)
        return 1;
    static struct whole w;
    memset(&w, 0, sizeof w);
    const uint8_t *first = NULL;
    int64_t now = tb_now_ms();
    for (int it = 0; it < 100000 && !w.n; it++) {
        tb_conn_flush(a);
        tb_conn_read(b, (size_t)1 << 30);
        take_frames(b, now, note_whole, &w);
        if (!first && b->frag_len)
            first = b->frag;
        tb_conn_flush(b);
        recv_all(a, NULL);
    }
    size_t len;
    const uint8_t *want = tb_packet_payload(p, &len);
    int rc = w.n == 1 && w.f.hdr.len == len && w.f.payload &&
                     memcmp(w.f.payload, want, len) == 0 ? 0 : 1;
    if (rc == 0 && w.f.payload != first)
        rc = 2;
    if (w.n)
        tb_frame_release(&w.f);
    tbon_packet_unref(p);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
    return rc;
}

/* A 72 MiB packet (nine pieces) is put together where its first piece
 * went: the room for the largest packet is taken at once, so it never moves
 * (growing it by realloc copied it, as the huge-page advice keeps mremap
 * from moving it). With the address space refused (RLIMIT_AS, in a child),
 * the room starts smaller and grows, and the packet still arrives whole.
 * Under ThreadSanitizer the room always grows (net/conn.c): there it moved. */
TEST(packet_in_pieces_never_moves_and_grows_without_room)
{
    CHECK_INT(move_in_pieces((size_t)72 << 20), UNDER_TSAN ? 2 : 0);
    if (UNDER_ASAN || UNDER_TSAN) {
        printf("    (the limited case skipped under the sanitizers: needs RLIMIT_AS)\n");
        return;
    }
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        tb_big_trim();      /* the room the parent kept (util/bigmem.h) */
        if (limit_memory((size_t)1 << 30) != 0)
            _exit(3);
        _exit(move_in_pieces((size_t)72 << 20));
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st));
    CHECK_INT(WEXITSTATUS(st), 2);      /* whole, after growing (moved) */
}

/* ---- a link held for a packet passed on piece by piece (node_cut.c) ---- */

static size_t whole_len;

/* Frames as on_frames takes them at an end: an ABORT drops the packet
 * under way (its tag noted as -1), pieces are put together. */
static void note_pieces(tb_conn_t *c, tb_frame_t *f, void *arg)
{
    got_t *g = arg;
    if (f->hdr.flags & TB_FRAME_F_ABORT) {
        tb_conn_drop_packet(c);
        g->tag[g->n++] = -1;
        tb_frame_release(f);
        return;
    }
    if (((f->hdr.flags & TB_FRAME_F_FRAG) || c->frag_len) && tb_conn_reassemble(c, f) != 1)
        return;
    if (f->hdr.tag == 50)
        whole_len = f->hdr.len;
    g->tag[g->n++] = f->hdr.tag;
    tb_frame_release(f);
}

/* A piece of raw bytes, and its CRC. */
static tbon_packet_t *raw_piece(size_t len, uint8_t fill, uint32_t *crc)
{
    uint8_t *b = malloc(len);
    memset(b, fill, len);
    *crc = tb_crc32c(0, b, len);
    return tb_packet_raw(b, len);
}

/* Frames queued while a link is held for a packet's pieces wait, and go
 * after its last piece (or its ABORT), numbered then: the peer takes
 * everything in order, with no gap, no bad header and no resend. */
static void held_behind_pieces(int abort)
{
    tb_conn_t *a, *b;
    pair(&a, &b);
    static got_t g;
    memset(&g, 0, sizeof g);
    whole_len = 0;
    uint32_t crc1, crc2;
    tbon_packet_t *p1 = raw_piece(3000, 0x11, &crc1), *p2 = raw_piece(1000, 0x22, &crc2);
    REQUIRE(p1 && p2);
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .flags = TB_FRAME_F_FRAG, .stream = 1,
                         .tag = 50, .key = 9 };
    send_n(a, 10, 1);                       /* before the hold: goes first */
    tb_conn_hold(a, b);
    CHECK_INT(tb_conn_send_piece(a, &h, p1, crc1, NULL, 0), 0);
    send_n(a, 100, 3);                      /* held */
    CHECK_UINT(a->q.len, 2);
    CHECK_UINT(a->held.len, 3);
    h.flags = abort ? TB_FRAME_F_ABORT : 0;
    CHECK_INT(tb_conn_send_piece(a, &h, abort ? NULL : p2, abort ? 0 : crc2, NULL, 0), 0);
    send_n(a, 103, 1);                      /* held too */
    tb_conn_unhold(a);
    CHECK(!a->cut_from);
    CHECK_UINT(a->q.len, 7);
    CHECK_UINT(a->held.len, 0);
    CHECK_UINT(a->tx_next, 8);
    send_n(a, 104, 1);                      /* after the hold: in turn */
    for (int it = 0; it < 100 && g.n < 7; it++) {
        tb_conn_flush(a);
        tb_conn_read(b, 1u << 24);
        take_frames(b, tb_now_ms(), note_pieces, &g);
    }
    CHECK_UINT(g.n, 7);
    int32_t want[7] = { 10, abort ? -1 : 50, 100, 101, 102, 103, 104 };
    for (size_t i = 0; i < 7 && i < g.n; i++)
        CHECK_INT(g.tag[i], want[i]);
    CHECK_UINT(whole_len, abort ? 0 : 4000);
    CHECK_UINT(b->rx, 8);
    CHECK_UINT(b->n_crc, 0);
    CHECK_UINT(b->frag_len, 0);
    tbon_packet_unref(p1);
    tbon_packet_unref(p2);
    tb_conn_destroy(a);
    tb_conn_destroy(b);
}

TEST(frames_held_behind_a_packets_pieces) { held_behind_pieces(0); }

TEST(frames_held_behind_a_packets_abort) { held_behind_pieces(1); }
