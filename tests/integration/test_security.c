/* test_security.c - strangers on the listening ports of a running tree: a
 * wrong secret or session is refused, garbage, a bad CRC, an oversized
 * length or a frame out of turn close that connection only, a replayed
 * handshake is refused, idle connections, a slowloris and 2,000 connections
 * held at once block nothing and leave nothing behind, forged failure
 * notices change nothing; the tree answers exactly afterwards. And an
 * authenticated back-end that sends a bad CRC or length loses its own
 * connection, nothing else. (Issue 19's "tests/attack/": these are they.)
 *
 * The ports are found from outside, as an attacker on the machine would:
 * the listening TCP sockets of the FE (this process) and of a commnode,
 * from /proc. Frames are built with libtbon/wire.h and handshake.h.
 */
#include "itest.h"

#include "codec/handshake.h"
#include "node/join.h"
#include "node/node.h"
#include "net/sock.h"
#include "codec/packet_int.h"
#include "codec/wire.h"

#include <sys/resource.h>

/* Read one frame from fd within ms: 1 and *f (release it), 0 on EOF or
 * reset, -1 on timeout, -2 on a frame error. */
static int read_frame(int fd, tb_fdec_t *d, tb_frame_t *f, int ms)
{
    int64_t end = it_now_ms() + ms;
    for (;;) {
        int rc = tb_fdec_next(d, f);
        if (rc == 1)
            return 1;
        if (rc < 0)
            return -2;
        int left = (int)(end - it_now_ms());
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (left <= 0 || poll(&pf, 1, left) != 1)
            return -1;
        uint8_t buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return 0;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return 0;
        }
        if (tb_fdec_feed(d, buf, (size_t)n) < 0)
            return -2;
    }
}

/* Connect to a and read the server's HELLO. Returns the socket (and the
 * decoder in *d) or -1 (failure recorded). */
static int connect_hello(const struct it_addr *a, tb_hello_t *hello, tb_fdec_t **d)
{
    int fd = it_connect(a);
    if (fd < 0) {
        th_fail(__FILE__, __LINE__, "cannot connect to port %u: %s", a->port, strerror(errno));
        return -1;
    }
    *d = tb_fdec_new(TB_FRAME_MAX_DEFAULT);
    tb_frame_t f;
    int rc = read_frame(fd, *d, &f, 5000);
    if (rc != 1) {
        th_fail(__FILE__, __LINE__, "port %u: no HELLO (%d)", a->port, rc);
        close(fd);
        tb_fdec_destroy(*d);
        return -1;
    }
    int ok = f.hdr.type == TB_FRAME_HELLO &&
             tb_hello_decode(hello, f.payload, f.hdr.len, NULL) == 0;
    tb_frame_release(&f);
    if (!ok) {
        th_fail(__FILE__, __LINE__, "port %u: first frame is not a HELLO", a->port);
        close(fd);
        tb_fdec_destroy(*d);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const void *b, size_t n)
{
    const uint8_t *p = b;
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Send a frame of type with payload. */
static int send_frame(int fd, int type, const void *payload, size_t len)
{
    tb_frame_hdr_t h = { .type = (uint8_t)type };
    uint8_t *buf = NULL;
    size_t n = 0;
    if (tb_frame_build(&h, payload, len, 0, &buf, &n) != 0)
        return -1;
    int rc = send_all(fd, buf, n);
    free(buf);
    return rc;
}

/* The server must close the connection within 5 s. A WELCOME on the way
 * is allowed only with status want_status (-1: none allowed); any other
 * frame is a failure. */
static void expect_closed(int fd, tb_fdec_t *d, int want_status, const char *what)
{
    for (;;) {
        tb_frame_t f;
        int rc = read_frame(fd, d, &f, 5000);
        if (rc == 0)
            break;
        if (rc == -1) {
            th_fail(__FILE__, __LINE__, "%s: connection still open after 5 s", what);
            break;
        }
        if (rc == -2) {
            th_fail(__FILE__, __LINE__, "%s: the server sent a bad frame", what);
            break;
        }
        tb_welcome_t w;
        if (f.hdr.type != TB_FRAME_WELCOME) {
            th_fail(__FILE__, __LINE__, "%s: got a %s frame", what,
                    tb_frame_type_name(f.hdr.type));
        } else if (tb_welcome_decode(&w, f.payload, f.hdr.len, NULL) != 0) {
            th_fail(__FILE__, __LINE__, "%s: bad WELCOME", what);
        } else if (want_status < 0 || w.status != want_status) {
            th_fail(__FILE__, __LINE__, "%s: WELCOME status %s", what,
                    tb_welcome_status_name(w.status));
        }
        tb_frame_release(&f);
    }
    close(fd);
    tb_fdec_destroy(d);
}

/* A HANDSHAKE answering hello, with secret and session as given. */
static void send_handshake(int fd, const tb_hello_t *hello, const uint8_t *secret,
                           uint64_t session, int corrupt_crc)
{
    tb_handshake_t hs;
    uint8_t b[TB_HANDSHAKE_SIZE];
    CHECK_INT(tb_handshake_make(&hs, hello, secret, session, TB_ROLE_COMMNODE,
                                TB_PURPOSE_DATA, 1, 0, NULL), 0);
    tb_handshake_encode(&hs, b);
    if (!corrupt_crc) {
        CHECK_INT(send_frame(fd, TB_FRAME_HANDSHAKE, b, sizeof b), 0);
        return;
    }
    tb_frame_hdr_t h = { .type = TB_FRAME_HANDSHAKE, .len = sizeof b };
    uint8_t hdr[TB_FRAME_HDR_SIZE];
    tb_frame_hdr_encode(&h, b, hdr);
    hdr[TB_FRAME_CRC_OFFSET] ^= 0x5A;
    CHECK_INT(send_all(fd, hdr, sizeof hdr), 0);
    CHECK_INT(send_all(fd, b, sizeof b), 0);
}

/* The commnode that targets() attacks. */
static pid_t target_commnode(void)
{
    pid_t cn[4];
    return it_our_procs("tbon_commnode", cn, 4) >= 1 ? cn[0] : 0;
}

/* The listening addresses to attack: the FE's and one commnode's. */
static size_t targets(struct it_addr *a, size_t cap)
{
    size_t n = it_listen_addrs(getpid(), a, cap);
    if (n == 0)
        th_fail(__FILE__, __LINE__, "the FE has no listening TCP socket");
    pid_t cn[4];
    if (it_our_procs("tbon_commnode", cn, 4) >= 1 && n < cap) {
        size_t k = it_listen_addrs(cn[0], a + n, cap - n);
        if (k == 0)
            th_fail(__FILE__, __LINE__, "commnode %d has no listening TCP socket", (int)cn[0]);
        n += k;
    }
    return n;
}

/* Start a 2x2 tree and a sum stream; each attack runs against every
 * target and must leave the tree exact. */
typedef void attack_fn(const struct it_addr *a);

static void run_attack(attack_fn *fn)
{
    it_tree_t t;
    if (it_start(&t, "2x2", NULL, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    struct it_addr a[8];
    size_t n = s ? targets(a, 8) : 0;
    uint32_t wave = 1;
    if (getenv("ITEST_VERBOSE"))
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, "    target %zu: port %u\n", i, a[i].port);
    if (s)
        it_sum_wave(s, wave++, t.be, t.nbe);
    for (size_t i = 0; i < n; i++) {
        fn(&a[i]);
        it_sum_wave(s, wave++, t.be, t.nbe);
        CHECK_UINT(tbon_net_num_backends(t.net), t.nbe);
    }
    pid_t p[16];
    CHECK_UINT(it_our_procs("tbon_", p, 16), 6);   /* nobody died */
    it_stop(&t);
}

static void attack_wrong_secret(const struct it_addr *a)
{
    tb_hello_t hello;
    tb_fdec_t *d;
    int fd = connect_hello(a, &hello, &d);
    if (fd < 0)
        return;
    uint8_t bad[TB_SECRET_SIZE];
    th_fill_random(bad, sizeof bad, 42);
    send_handshake(fd, &hello, bad, hello.session, 0);
    expect_closed(fd, d, TB_WELCOME_BAD_MAC, "wrong secret");
}

static void attack_wrong_session(const struct it_addr *a)
{
    tb_hello_t hello;
    tb_fdec_t *d;
    int fd = connect_hello(a, &hello, &d);
    if (fd < 0)
        return;
    uint8_t bad[TB_SECRET_SIZE];
    th_fill_random(bad, sizeof bad, 43);
    send_handshake(fd, &hello, bad, hello.session ^ 0x8000000000000001ull, 0);
    expect_closed(fd, d, TB_WELCOME_WRONG_SESSION, "wrong session");
}

static void attack_garbage(const struct it_addr *a)
{
    tb_hello_t hello;
    tb_fdec_t *d;
    int fd = connect_hello(a, &hello, &d);
    if (fd < 0)
        return;
    uint8_t junk[300];
    th_fill_random(junk, sizeof junk, 44);
    send_all(fd, junk, sizeof junk);
    expect_closed(fd, d, -1, "garbage");
}

static void attack_bad_crc(const struct it_addr *a)
{
    tb_hello_t hello;
    tb_fdec_t *d;
    int fd = connect_hello(a, &hello, &d);
    if (fd < 0)
        return;
    uint8_t bad[TB_SECRET_SIZE];
    th_fill_random(bad, sizeof bad, 45);
    send_handshake(fd, &hello, bad, hello.session, 1);
    expect_closed(fd, d, -1, "bad CRC");
}

/* A header announcing a 1 GiB payload (valid CRC over the header, no
 * payload follows): refused from the header alone, nothing allocated. */
static void attack_oversized(const struct it_addr *a)
{
    tb_hello_t hello;
    tb_fdec_t *d;
    int fd = connect_hello(a, &hello, &d);
    if (fd < 0)
        return;
    tb_frame_hdr_t h = { .type = TB_FRAME_HANDSHAKE, .len = 1u << 30 };
    uint8_t hdr[TB_FRAME_HDR_SIZE];
    tb_frame_hdr_encode_crc(&h, 0, hdr);
    send_all(fd, hdr, sizeof hdr);
    expect_closed(fd, d, -1, "oversized length");
}

/* A DATA frame (a well-formed packet) where the HANDSHAKE should be. */
static void attack_data_first(const struct it_addr *a)
{
    tb_hello_t hello;
    tb_fdec_t *d;
    int fd = connect_hello(a, &hello, &d);
    if (fd < 0)
        return;
    /* tbon_packet_new(100, "%ld", 1) encoded: u16 format length, "%ld", 8 bytes. */
    const uint8_t payload[] = { 3, 0, '%', 'l', 'd', 1, 0, 0, 0, 0, 0, 0, 0 };
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .tag = IT_TAG_WAVE, .stream = 1,
                         .source = 3 };
    uint8_t *buf = NULL;
    size_t n = 0;
    CHECK_INT(tb_frame_build(&h, payload, sizeof payload, 0, &buf, &n), 0);
    send_all(fd, buf, n);
    free(buf);
    expect_closed(fd, d, -1, "DATA before the handshake");
}

ITEST(sec_wrong_secret_refused) { run_attack(attack_wrong_secret); }
ITEST(sec_wrong_session_refused) { run_attack(attack_wrong_session); }
ITEST(sec_garbage_closed) { run_attack(attack_garbage); }
ITEST(sec_bad_crc_closed) { run_attack(attack_bad_crc); }
ITEST(sec_oversized_length_closed) { run_attack(attack_oversized); }
ITEST(sec_data_before_handshake_closed) { run_attack(attack_data_first); }

/* Idle connections (32 per target, never speaking) stop nothing: waves go
 * on exactly while they are open, and after they are closed. */
ITEST(sec_idle_connections_block_nothing)
{
    it_tree_t t;
    if (it_start(&t, "2x2", NULL, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    REQUIRE(s);
    struct it_addr a[8];
    size_t n = targets(a, 8);
    int fds[8][32];
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 32; k++)
            fds[i][k] = it_connect(&a[i]);
    for (uint32_t w = 1; w <= 5; w++)
        it_sum_wave(s, w, t.be, t.nbe);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 32; k++) {
            CHECK(fds[i][k] >= 0);
            if (fds[i][k] >= 0)
                close(fds[i][k]);
        }
    it_sum_wave(s, 6, t.be, t.nbe);
    it_stop(&t);
}

/* ---- a bad frame from an authenticated peer ---- */

/* The fake back-end: joins as `rank` through the attach file like a real one
 * (it has the secret), then sends a DATA frame whose CRC (or, with bad_len,
 * length) is wrong. Its parent must close this connection: exit 0 when EOF
 * comes, 1 if the connection stays open, 2 if it could not join. */
static void fake_backend(const char *file, tbon_rank_t rank, int bad_len)
{
    tb_join_t j;
    tbon_error_t err;
    int ok = -1;
    for (int i = 0; i < 400 && ok != 0; i++) {
        ok = tb_join_parse_attach(file, rank, &j, &err);
        if (ok != 0)
            it_sleep_ms(50);
    }
    if (ok != 0 || tb_join_connect(&j, TB_ROLE_BE, TB_PURPOSE_ATTACH, &err) != 0)
        _exit(2);
    /* Misbehave only once the tree is up: when the FE's stream arrives. */
    for (;;) {
        tb_frame_t f;
        if (tb_sock_recv_frame(j.data_fd, TB_FRAME_MAX_DEFAULT, &f, it_now_ms() + 20000, &err))
            _exit(2);
        int stream = f.hdr.type == TB_FRAME_CONTROL && f.hdr.tag == TB_CTL_STREAM;
        tb_frame_release(&f);
        if (stream)
            break;
    }
    if (bad_len == 2 || bad_len == 3) {
        /* Pieces of a packet (TB_FRAME_F_FRAG) that do not fit together: the
         * second belongs to another stream (2), or they add up to more than
         * the session's maximum, 1 MiB here (3). */
        const size_t piece = 600 * 1024;
        uint8_t *b = calloc(1, TB_FRAME_HDR_SIZE + piece);
        if (!b)
            _exit(2);
        for (int k = 0; k < 2; k++) {
            tb_frame_hdr_t h = { .type = TB_FRAME_DATA,
                                 .flags = bad_len == 3 || k == 0 ? TB_FRAME_F_FRAG : 0,
                                 .stream = bad_len == 2 && k == 1 ? 2 : 1,
                                 .tag = IT_TAG_WAVE, .source = rank, .len = (uint32_t)piece };
            tb_frame_hdr_encode(&h, b + TB_FRAME_HDR_SIZE, b);
            if (send_all(j.data_fd, b, TB_FRAME_HDR_SIZE + piece) != 0)
                _exit(0);   /* already closed */
        }
        free(b);
    }
    if (bad_len == 4 || bad_len == 5) {
        /* A wave answer with a coverage (TB_FRAME_F_COVER) whose ranges
         * overlap (4), or with the FE's delivered mark, which only goes
         * down (5, TB_FRAME_F_DONE): CRCs right, the tail is the
         * violation. */
        tbon_packet_t *p = tbon_packet_new(IT_TAG_WAVE, "%ld", (int64_t)424242);
        size_t len;
        const uint8_t *pl = tb_packet_payload(p, &len);
        const uint32_t cover[5] = { 5, 9, 8, 12, 2 };   /* 5-9, 8-12, n = 2 (LE host) */
        const uint32_t mark[2] = { 1u << 24, 0 };       /* wave 1, LE host */
        const void *tail = bad_len == 4 ? (const void *)cover : (const void *)mark;
        size_t tlen = bad_len == 4 ? sizeof cover : sizeof mark;
        uint8_t frame[TB_FRAME_HDR_SIZE + 256];
        memcpy(frame + TB_FRAME_HDR_SIZE, pl, len);
        memcpy(frame + TB_FRAME_HDR_SIZE + len, tail, tlen);
        tb_frame_hdr_t h = { .type = TB_FRAME_DATA,
                             .flags = bad_len == 4 ? TB_FRAME_F_COVER : TB_FRAME_F_DONE,
                             .stream = 1, .tag = IT_TAG_WAVE, .source = rank,
                             .len = (uint32_t)(len + tlen) };
        tb_frame_hdr_encode(&h, frame + TB_FRAME_HDR_SIZE, frame);
        tbon_packet_unref(p);
        if (send_all(j.data_fd, frame, TB_FRAME_HDR_SIZE + len + tlen) != 0)
            _exit(0);
    }
    /* A well-formed wave answer first would be accepted: corrupt it. */
    tbon_packet_t *p = tbon_packet_new(IT_TAG_WAVE, "%ld", (int64_t)424242);
    size_t len;
    const uint8_t *pl = tb_packet_payload(p, &len);
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .stream = 1, .tag = IT_TAG_WAVE,
                         .source = rank, .len = (uint32_t)len };
    uint8_t frame[TB_FRAME_HDR_SIZE + 256];
    tb_frame_hdr_encode(&h, pl, frame);
    memcpy(frame + TB_FRAME_HDR_SIZE, pl, len);
    if (bad_len) {
        /* A length far over the limit: refused as soon as the header is in. */
        frame[8] = 0xff, frame[9] = 0xff, frame[10] = 0xff, frame[11] = 0x7f;
    } else {
        frame[TB_FRAME_HDR_SIZE + len - 1] ^= 0x01;   /* the payload, after the CRC */
    }
    tbon_packet_unref(p);
    if (bad_len < 2 && send_all(j.data_fd, frame, TB_FRAME_HDR_SIZE + len) != 0)
        _exit(0);   /* already closed */
    char buf[4096];
    int64_t end = it_now_ms() + 5000;
    while (it_now_ms() < end) {
        struct pollfd pf = { .fd = j.data_fd, .events = POLLIN };
        if (poll(&pf, 1, 100) <= 0)
            continue;
        ssize_t n = read(j.data_fd, buf, sizeof buf);
        if (n <= 0)
            _exit(0);   /* closed by the parent, as it must be */
    }
    _exit(1);
}

static void bad_frame_from_peer(int bad_len)
{
    char file[700];
    snprintf(file, sizeof file, "%s/attach", th_tmpdir());
    /* Two commnodes with two back-ends each; rank 6 will be the fake one. */
    const char *topo = th_write_file("peer.top",
                                     "localhost:0 => localhost:1 localhost:2 ;\n"
                                     "localhost:1 => localhost:3 localhost:4 ;\n"
                                     "localhost:2 => localhost:5 localhost:6 ;\n");
    const tbon_rank_t real[] = { 3, 4, 5 };
    pid_t kids[4];
    for (int i = 0; i < 4; i++) {
        kids[i] = fork();
        REQUIRE(kids[i] >= 0);
        if (kids[i] == 0) {
            if (i == 3)
                fake_backend(file, 6, bad_len);
            char r[16];
            snprintf(r, sizeof r, "%u", (unsigned)real[i]);
            for (int k = 0; k < 400 && access(file, F_OK) != 0; k++)
                it_sleep_ms(50);
            execl(it_be_path(), "tbon_test_be", "--attach", file, "--rank", r, (char *)NULL);
            _exit(127);
        }
    }
    tbon_fe_options_t o = { .attach_file = file, .startup_timeout_ms = 20000 };
    tbon_error_t err = { 0, "" };
    if (bad_len == 3)
        setenv("TBON_MAX_PACKET", "1M", 1);     /* for the commnodes */
    tbon_net_t *net = tbon_fe_create(topo, NULL, NULL, &o, &err);
    unsetenv("TBON_MAX_PACKET");
    if (!net) {
        th_fail(__FILE__, __LINE__, "tbon_fe_create (attach): %s", err.msg);
        for (int i = 0; i < 4; i++) {
            kill(kids[i], SIGKILL);
            waitpid(kids[i], NULL, 0);
        }
        return;
    }
    /* The stream's arrival sets the fake one off; it is cut off, and its
     * parent and everyone else carry on. */
    tbon_stream_t *s = it_stream(net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    int st = 0;
    CHECK_INT(waitpid(kids[3], &st, 0), kids[3]);
    CHECK(WIFEXITED(st));
    CHECK_INT(WEXITSTATUS(st), 0);
    if (s) {
        it_sum_wave(s, 1, real, 3);
        it_sum_wave(s, 2, real, 3);
    }
    tbon_net_destroy(net);
    for (int i = 0; i < 3; i++) {
        CHECK_INT(waitpid(kids[i], &st, 0), kids[i]);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    if (bad_len >= 2) {
        /* its parent's log names it and why */
        const char *why = bad_len == 2 ? "a piece of another packet"
                        : bad_len == 3 ? "a packet over the maximum"
                        : bad_len == 4 ? "bad coverage on a DATA frame: ranges 5-9 and 8-12"
                                       : "a delivered mark on a frame from a child";
        char path[700], line[1024];
        snprintf(path, sizeof path, "%s/logs/commnode-2.log", th_tmpdir());
        FILE *f = fopen(path, "r");
        int named = 0;
        while (f && fgets(line, sizeof line, f))
            named |= strstr(line, "rank 6") && strstr(line, why);
        if (f)
            fclose(f);
        if (!named)
            th_fail(__FILE__, __LINE__, "commnode 2's log does not name rank 6 and \"%s\"", why);
    }
}

/* An authenticated back-end sends a frame with a bad CRC: only its own
 * connection is closed, and the next waves are exact over the others. */
ITEST(sec_bad_crc_from_peer_closes_only_it) { bad_frame_from_peer(0); }

/* The same with a length over the limit. */
ITEST(sec_bad_length_from_peer_closes_only_it) { bad_frame_from_peer(1); }

/* Pieces of a packet (TB_FRAME_F_FRAG) of two streams mixed. */
ITEST(sec_mixed_pieces_from_peer_close_only_it) { bad_frame_from_peer(2); }

/* Pieces adding up to more than the session's maximum. */
ITEST(sec_pieces_over_the_maximum_close_only_it) { bad_frame_from_peer(3); }

/* A coverage (docs/protocol.md 2.6) that is not in canonical form: its
 * connection closed, the parent's log naming the peer and the ranges. */
ITEST(sec_bad_coverage_from_peer_closes_only_it) { bad_frame_from_peer(4); }

/* The FE's delivered mark (TB_FRAME_F_DONE, docs/protocol.md 2.2) on a
 * frame going up: the same. */
ITEST(sec_delivered_mark_from_child_closes_only_it) { bad_frame_from_peer(5); }

/* ---- the attach file among other local users (issue 19, item 5) ---- */

static void write_mode(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    REQUIRE(fchmod(fd, mode) == 0);     /* past the umask, as a hostile user would */
    close(fd);
}

static int file_is(const char *path, const char *text)
{
    char buf[256] = "";
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n >= 0 && strcmp(buf, text) == 0;
}

/* In a shared, sticky, world-writable directory (a /tmp) where another user
 * made the temporary name the FE used to write (FILE.tmp.PID, mode 0666)
 * and put a symlink at FILE itself: the attach file comes out a regular
 * file of ours, mode 0600, neither of theirs is written or followed, and
 * back-ends attach through it and answer exactly. */
ITEST(sec_attach_file_among_hostile_files)
{
    char dir[600], file[700], old_tmp[720], decoy[700];
    snprintf(dir, sizeof dir, "%s/shared", th_tmpdir());
    REQUIRE(mkdir(dir, 0700) == 0);
    REQUIRE(chmod(dir, 01777) == 0);
    snprintf(file, sizeof file, "%s/attach", dir);
    snprintf(old_tmp, sizeof old_tmp, "%s.tmp.%d", file, (int)getpid());
    snprintf(decoy, sizeof decoy, "%s/decoy", dir);
    write_mode(old_tmp, "theirs\n", 0666);
    write_mode(decoy, "decoy\n", 0666);
    REQUIRE(symlink(decoy, file) == 0);

    const char *topo = th_write_file("attach.top", "localhost:0 => localhost:1 ;\n"
                                                   "localhost:1 => localhost:2 localhost:3 ;\n");
    const tbon_rank_t bes[] = { 2, 3 };
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = fork();
        REQUIRE(kids[i] >= 0);
        if (kids[i] == 0) {
            char r[16];
            snprintf(r, sizeof r, "%u", (unsigned)bes[i]);
            struct stat st;
            /* the symlink is there from the start: wait for a regular file */
            for (int k = 0; k < 400 && (lstat(file, &st) != 0 || !S_ISREG(st.st_mode)); k++)
                it_sleep_ms(50);
            execl(it_be_path(), "tbon_test_be", "--attach", file, "--rank", r, (char *)NULL);
            _exit(127);
        }
    }
    tbon_fe_options_t o = { .attach_file = file, .startup_timeout_ms = 20000 };
    tbon_error_t err = { 0, "" };
    tbon_net_t *net = tbon_fe_create(topo, NULL, NULL, &o, &err);
    if (!net) {
        th_fail(__FILE__, __LINE__, "tbon_fe_create (attach): %s", err.msg);
        for (int i = 0; i < 2; i++) {
            kill(kids[i], SIGKILL);
            waitpid(kids[i], NULL, 0);
        }
        return;
    }
    struct stat st;
    CHECK_INT(lstat(file, &st), 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK_INT((int)(st.st_mode & 07777), 0600);
    CHECK_INT((int)st.st_uid, (int)geteuid());
    CHECK(file_is(old_tmp, "theirs\n"));
    CHECK_INT(lstat(old_tmp, &st), 0);
    CHECK_INT((int)(st.st_mode & 07777), 0666);
    CHECK(file_is(decoy, "decoy\n"));
    /* nothing of ours left behind but the attach file */
    CHECK_INT(it_dir_entries(dir), 3);
    tbon_stream_t *s = it_stream(net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    if (s) {
        it_sum_wave(s, 1, bes, 2);
        it_sum_wave(s, 2, bes, 2);
    }
    tbon_net_destroy(net);
    int wst = 0;
    for (int i = 0; i < 2; i++) {
        CHECK_INT(waitpid(kids[i], &wst, 0), kids[i]);
        CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    }
    CHECK(lstat(file, &st) != 0);       /* removed with the session */
}

/* A directory others may write to without the sticky bit (they could
 * rename the attach file away and put theirs in its place): the FE refuses
 * to start, naming the directory, and leaves no process and no file. */
ITEST(sec_attach_file_refused_in_unsafe_directory)
{
    char dir[600], file[700];
    snprintf(dir, sizeof dir, "%s/open", th_tmpdir());
    REQUIRE(mkdir(dir, 0700) == 0);
    REQUIRE(chmod(dir, 0777) == 0);
    snprintf(file, sizeof file, "%s/attach", dir);
    const char *topo = th_write_file("attach2.top", "localhost:0 => localhost:1 ;\n"
                                                    "localhost:1 => localhost:2 ;\n");
    tbon_fe_options_t o = { .attach_file = file, .startup_timeout_ms = 20000 };
    tbon_error_t err = { 0, "" };
    tbon_net_t *net = tbon_fe_create(topo, NULL, NULL, &o, &err);
    CHECK(net == NULL);
    if (net) {
        tbon_net_destroy(net);
        return;
    }
    CHECK_INT(err.code, TBON_EIO);
    if (!strstr(err.msg, file) || !strstr(err.msg, "not sticky"))
        th_fail(__FILE__, __LINE__, "the error does not name the file and why: %s", err.msg);
    CHECK_INT(it_dir_entries(dir), 0);
    it_check_no_procs("after the refused start");
}

/* ---- forged failure notices (issue 19, item 4) ---- */

#include "util/endian.h"

/* The session id of the tree, as anyone on the machine can read it: from a
 * commnode's command line. 0 if not found. */
static uint64_t session_from_ps(pid_t cn)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)cn);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (strcmp(buf + i, "--tbon-session") == 0 && i + 15 < n)
            return strtoull(buf + i + 15, NULL, 16);
    return 0;
}

struct flood {
    struct sockaddr_in to;
    uint64_t session;
    unsigned count;
    uint64_t seq0;
};

/* A notice of the right size, magic, version and session, from a rank in
 * the view, with a new sequence number - and a made-up HMAC. */
static void forged(uint8_t b[72], uint64_t session, unsigned i, uint64_t seq)
{
    memset(b, 0, 72);
    tb_put32(b, 0x464E4254u);
    b[4] = 2;
    b[5] = (uint8_t)(i % 2);                  /* failed, suspect */
    tb_put64(b + 8, session);
    tb_put32(b + 16, 3 + i % 4);              /* from a back-end */
    tb_put32(b + 20, 1 + i % 2);              /* about a commnode */
    tb_put64(b + 32, seq);
    for (int k = 40; k < 72; k++)
        b[k] = (uint8_t)(i * 31 + (unsigned)k);
}

static void *flood_main(void *arg)
{
    struct flood *fl = arg;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    uint8_t b[72];
    for (unsigned i = 0; fd >= 0 && i < fl->count; i++) {
        forged(b, fl->session, i, fl->seq0 + i);
        sendto(fd, b, sizeof b, 0, (struct sockaddr *)&fl->to, sizeof fl->to);
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* Anyone can read the session id (ps) and send the FE notices. 200,000 of
 * them with made-up HMACs, in two floods, while sum waves run: every wave exact, no failure
 * or suspicion believed, the FE's memory flat, and the budget of HMAC checks
 * spent (the FE says how many it dropped unchecked); a real failure
 * afterwards is still noticed and recovered from. */
ITEST(sec_forged_notices_change_nothing)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "2x2", NULL);
    if (!s)
        return;
    pid_t cn1 = it_pid_of("tbon_commnode", 1);
    struct it_addr fe[4];
    REQUIRE(cn1 > 0 && it_listen_addrs(getpid(), fe, 4) == 1);
    struct flood fl = { .to = { .sin_family = AF_INET, .sin_port = htons(fe[0].port) },
                        .session = session_from_ps(cn1), .count = 100000, .seq0 = 1000 };
    fl.to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(fl.session != 0);
    /* Two floods of 100,000: the second may not grow the FE's memory (the
     * first pays for what a first use costs, the sanitizers' shadow and the
     * like). */
    long rss0 = 0;
    uint32_t w = 1;
    for (int round = 0; round < 2; round++) {
        if (round == 1)
            rss0 = it_proc_status(getpid(), "VmRSS");
        fl.seq0 = 1000 + (uint64_t)round * fl.count;
        /* from another process: the sender's memory is not the FE's */
        pid_t flooder = fork();
        REQUIRE(flooder >= 0);
        if (flooder == 0) {
            flood_main(&fl);
            _exit(0);
        }
        for (uint32_t k = 0; k < 10; k++, w++)
            it_sum_wave(s, w, t.be, t.nbe);
        int fst = 0;
        CHECK_INT(waitpid(flooder, &fst, 0), flooder);
        CHECK(WIFEXITED(fst) && WEXITSTATUS(fst) == 0);
    }
    /* The FE says what it dropped once a window has passed: a few more. */
    int said = 0;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    for (int64_t end = it_now_ms() + IT_RECV_MS; !said && it_now_ms() < end; w++) {
        uint8_t b[72];
        for (unsigned i = 0; i < 3000; i++) {
            forged(b, fl.session, i, 1000 + 2 * (uint64_t)fl.count + w * 3000 + i);
            sendto(fd, b, sizeof b, 0, (struct sockaddr *)&fl.to, sizeof fl.to);
        }
        it_sum_wave(s, w, t.be, t.nbe);
        pthread_mutex_lock(&it_log_lock);
        for (unsigned i = 0; i < IT_LOG_LINES; i++)
            said |= strstr(it_log_ring[i], "dropped unchecked") != NULL;
        pthread_mutex_unlock(&it_log_lock);
    }
    close(fd);
    CHECK(said);
    /* 1 MiB is 10 bytes a notice: a notice's leak is more than that. Under
     * ThreadSanitizer the RSS also holds the shadow and the metadata of the
     * memory the checks touch for the first time (seen: 1,044 kB); there
     * LeakSanitizer is not at work either, and the plain build's figure is
     * the one that counts. */
    long rss1 = it_proc_status(getpid(), "VmRSS");
    if (rss1 - rss0 > (IT_TSAN ? 4096 : 1024))
        th_fail(__FILE__, __LINE__, "the FE's RSS went from %ld to %ld kB over the second "
                "100,000 notices", rss0, rss1);
    tbon_event_t ev;
    while (tbon_net_next_event(t.net, &ev, 0) == 0)
        if (ev.type == TBON_EV_NODE_FAILED || ev.type == TBON_EV_NODE_SUSPECT)
            th_fail(__FILE__, __LINE__, "a forged notice was believed: event %d about rank %u",
                    ev.type, ev.rank);
    /* A real failure still gets through. */
    kill(cn1, SIGKILL);
    int failed = 0, adopted = 0;
    for (int64_t end = it_now_ms() + IT_RECV_MS; (!failed || adopted < 2) && it_now_ms() < end;) {
        if (tbon_net_next_event(t.net, &ev, (int)(end - it_now_ms())) != 0)
            break;
        failed |= ev.type == TBON_EV_NODE_FAILED && ev.rank == 1;
        adopted += ev.type == TBON_EV_NODE_ADOPTED;
    }
    CHECK(failed);
    CHECK_INT(adopted, 2);
    it_sum_wave(s, w, t.be, t.nbe);
    it_stop(&t);
}

/* ---- replay, slowloris, many held connections ---- */

/* Someone who saw a real HANDSHAKE on the wire sends it again on a
 * connection of their own: it answered another HELLO's nonce, so its HMAC
 * is wrong there (docs/protocol.md 4), at the FE and at a commnode alike. */
ITEST(sec_replayed_handshake_refused)
{
    char file[700];
    snprintf(file, sizeof file, "%s/attach", th_tmpdir());
    tbon_fe_options_t o = { .attach_file = file };
    it_tree_t t;
    if (it_start(&t, "2x2", NULL, &o))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    tb_join_t j;
    tbon_error_t err;
    REQUIRE(s && tb_join_parse_attach(file, TBON_RANK_NONE, &j, &err) == 0);
    struct it_addr a[8];
    size_t n = targets(a, 8);
    uint32_t w = 1;
    for (size_t i = 0; i < n; i++) {
        tb_hello_t h1, h2;
        tb_fdec_t *d1, *d2;
        int fd1 = connect_hello(&a[i], &h1, &d1);
        int fd2 = fd1 >= 0 ? connect_hello(&a[i], &h2, &d2) : -1;
        if (fd2 < 0) {
            if (fd1 >= 0) {
                close(fd1);
                tb_fdec_destroy(d1);
            }
            continue;
        }
        /* the real thing, made for the first connection's HELLO ... */
        tb_handshake_t hs;
        uint8_t b[TB_HANDSHAKE_SIZE];
        CHECK_INT(tb_handshake_make(&hs, &h1, j.session.secret, j.session.id, TB_ROLE_BE,
                                    TB_PURPOSE_DATA, 4, 0, NULL), 0);
        tb_handshake_encode(&hs, b);
        /* ... replayed on the second */
        CHECK_INT(send_frame(fd2, TB_FRAME_HANDSHAKE, b, sizeof b), 0);
        expect_closed(fd2, d2, TB_WELCOME_BAD_MAC, "replayed handshake");
        close(fd1);
        tb_fdec_destroy(d1);
        it_sum_wave(s, w++, t.be, t.nbe);
    }
    tb_join_release(&j);
    pid_t p[16];
    CHECK_UINT(it_our_procs("tbon_", p, 16), 6);
    it_stop(&t);
}

/* One slowloris round (see below); returns the waves done so far. */
static uint32_t slowloris(tbon_stream_t *s, const it_tree_t *t, uint32_t w);

/* Slowloris: 40 connections per target that send their HANDSHAKE one byte
 * every 200 ms. Each is closed when its handshake time (10 s) is up, and
 * waves stay exact meanwhile. Twice: the second round leaves the commnode's
 * memory where the first did (the first pays for first uses: the
 * sanitizers' shadow, the allocator's arenas). */
ITEST_LONG(sec_slowloris_blocks_nothing)
{
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "2x2", NULL);
    if (!s)
        return;
    pid_t cn1 = target_commnode();
    uint32_t w = slowloris(s, &t, 1);
    long rss0 = it_proc_status(cn1, "VmRSS");
    w = slowloris(s, &t, w);
    long rss1 = it_proc_status(cn1, "VmRSS");
    if (rss1 - rss0 > 1024)
        th_fail(__FILE__, __LINE__, "the commnode's RSS went from %ld to %ld kB over the "
                "second round", rss0, rss1);
    it_sum_wave(s, w, t.be, t.nbe);
    it_stop(&t);
}

static uint32_t slowloris(tbon_stream_t *s, const it_tree_t *t, uint32_t w)
{
    struct it_addr a[8];
    size_t n = targets(a, 8);
    enum { PER = 40 };
    int fds[8][PER];
    int64_t t0 = it_now_ms();
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < PER; k++)
            fds[i][k] = it_connect(&a[i]);
    size_t open_left = 0, sent = 0;
    const uint8_t byte = 0x54;      /* 'T', the magic's first byte, and so on */
    for (;;) {
        open_left = 0;
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < PER; k++) {
                if (fds[i][k] < 0)
                    continue;
                char buf[512];
                ssize_t r = recv(fds[i][k], buf, sizeof buf, MSG_DONTWAIT);
                if (r == 0 || (r < 0 && errno != EAGAIN) ||
                    send(fds[i][k], &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
                    close(fds[i][k]);
                    fds[i][k] = -1;
                    continue;
                }
                sent++;
                open_left++;
            }
        if (!open_left || it_now_ms() - t0 > 30000)
            break;
        it_sum_wave(s, w++, t->be, t->nbe);
        it_sleep_ms(200);
    }
    int64_t took = it_now_ms() - t0;
    if (getenv("ITEST_VERBOSE"))
        fprintf(stderr, "    %zu bytes sent; all closed after %lld ms; %u exact waves so "
                "far\n", sent, (long long)took, w - 1);
    CHECK_UINT(open_left, 0);
    CHECK(took >= 9500);            /* not before their handshake time */
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < PER; k++)
            if (fds[i][k] >= 0)
                close(fds[i][k]);
    return w;
}

/* 2,000 connections held open at once (half at the FE, half at a commnode),
 * twice: waves stay exact while they are held, and the second round leaves
 * both processes' memory where the first did (nothing is kept per
 * connection once it is gone). */
ITEST(sec_2000_held_connections)
{
    struct rlimit rl;
    REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    rlim_t old = rl.rlim_cur;
    if (rl.rlim_cur < 4096 && rl.rlim_max >= 4096) {
        rl.rlim_cur = 4096;
        REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    }
    REQUIRE(rl.rlim_cur >= 2100);
    it_asan_quarantine_mb(0);
    it_tree_t t;
    tbon_stream_t *s = it_start_summing(&t, "2x2", NULL);
    if (s) {
        pid_t cn1 = target_commnode();
        struct it_addr a[8];
        size_t n = targets(a, 8);
        REQUIRE(n >= 2);
        static int fds[2000];
        long fe[2] = { 0 }, cn[2] = { 0 };
        uint32_t w = 1;
        for (int round = 0; round < 2; round++) {
            int held = 0;
            for (int k = 0; k < 2000; k++) {
                fds[k] = it_connect(&a[k % 2 ? n - 1 : 0]);
                held += fds[k] >= 0;
            }
            CHECK_INT(held, 2000);
            for (int k = 0; k < 3; k++)
                it_sum_wave(s, w++, t.be, t.nbe);
            for (int k = 0; k < 2000; k++)
                if (fds[k] >= 0)
                    close(fds[k]);
            it_sum_wave(s, w++, t.be, t.nbe);
            fe[round] = it_proc_status(getpid(), "VmRSS");
            cn[round] = it_proc_status(cn1, "VmRSS");
        }
        if (getenv("ITEST_VERBOSE"))
            fprintf(stderr, "    RSS after each round: FE %ld, %ld kB; commnode %ld, %ld kB\n",
                    fe[0], fe[1], cn[0], cn[1]);
        /* Under ThreadSanitizer both processes' RSS also holds the
         * sanitizer's own records of descriptors, synchronisation and
         * shadow, made as they are first seen: each grew 3.2 MB once, beside
         * another test program. There the bound is 8 MB for each: it sees
         * only more than 4 kB kept per connection; the plain and ASan builds
         * hold the tight bounds. */
        long cn_max = IT_TSAN ? 8192 : 1024, fe_max = IT_TSAN ? 8192 : 2048;
        if (cn[1] - cn[0] > cn_max || fe[1] - fe[0] > fe_max)
            th_fail(__FILE__, __LINE__, "memory grew over the second 2,000: FE %ld -> %ld kB, "
                    "commnode %ld -> %ld kB", fe[0], fe[1], cn[0], cn[1]);
        it_stop(&t);
    }
    rl.rlim_cur = old;
    setrlimit(RLIMIT_NOFILE, &rl);
}
