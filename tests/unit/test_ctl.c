/* test_ctl.c - the control messages (codec/ctl.h): the table, and per
 * message a round trip that compares every field, the bytes against the
 * packet the literal format of before built (the wire format did not move),
 * and truncated, oversized, garbage and out-of-range input refused. */
#include "../harness.h"

#include <stdlib.h>

#include "codec/ctl.h"
#include "codec/packet_int.h"

/* ---- what every message goes through ---- */

/* p (encoded by the codec for op) has the bytes of old (the same message
 * built by tbon_packet_new with the literal format the call sites used),
 * and no prefix, extension or garbage of its payload decodes. */
static void check_wire(int op, tbon_packet_t *p, tbon_packet_t *old)
{
    if (!p || !old) {
        th_fail(__FILE__, __LINE__, "%s: no packet", tb_ctl_name(op));
        tbon_packet_unref(p);
        tbon_packet_unref(old);
        return;
    }
    size_t len, olen;
    const uint8_t *b = tb_packet_payload(p, &len), *ob = tb_packet_payload(old, &olen);
    CHECK_INT(tbon_packet_tag(p), op);
    CHECK_UINT(len, olen);
    if (len == olen)
        CHECK_MEM(b, ob, len);
    CHECK(tb_packet_format_matches(p, tb_ctl_info(op)->format));

    tb_ctl_msg_t m;
    tbon_error_t err;
    /* The whole payload decodes, and encodes back to the same bytes. */
    err.msg[0] = 0;
    if (tb_ctl_decode_bytes(op, b, len, &m, &err) != 0) {
        th_fail(__FILE__, __LINE__, "%s: %s", tb_ctl_name(op), err.msg);
    } else {
        tbon_packet_t *again = tb_ctl_encode(&m);
        size_t alen = 0;
        const uint8_t *ab = again ? tb_packet_payload(again, &alen) : NULL;
        CHECK_UINT(alen, len);
        if (ab && alen == len)
            CHECK_MEM(ab, b, len);
        tbon_packet_unref(again);
        tb_ctl_msg_free(&m);
    }
    /* Truncated anywhere. */
    for (size_t k = 0; k < len; k++) {
        err.msg[0] = 0;
        int rc = tb_ctl_decode_bytes(op, b, k, &m, &err);
        if (rc != TBON_EFORMAT) {
            th_fail(__FILE__, __LINE__, "%s cut to %zu of %zu bytes: rc %d", tb_ctl_name(op), k,
                    len, rc);
            if (rc == 0)
                tb_ctl_msg_free(&m);
            break;
        }
        CHECK(strstr(err.msg, tb_ctl_name(op)) != NULL);
    }
    /* Oversized: bytes after the last field. */
    uint8_t *big = malloc(len + 16);
    REQUIRE(big);
    memcpy(big, b, len);
    th_fill_random(big + len, 16, (uint64_t)op);
    for (size_t extra = 1; extra <= 16; extra++) {
        int rc = tb_ctl_decode_bytes(op, big, len + extra, &m, &err);
        CHECK_INT(rc, TBON_EFORMAT);
        if (rc == 0)
            tb_ctl_msg_free(&m);
    }
    /* Garbage of the same length, and of a few others. */
    for (uint64_t seed = 1; seed <= 32; seed++) {
        size_t n = seed <= 16 ? len : (size_t)(seed * 7);
        uint8_t *g = realloc(big, n ? n : 1);
        REQUIRE(g);
        big = g;
        th_fill_random(big, n, seed * 1000 + (uint64_t)op);
        int rc = tb_ctl_decode_bytes(op, big, n, &m, &err);
        CHECK_INT(rc, TBON_EFORMAT);
        if (rc == 0)
            tb_ctl_msg_free(&m);
    }
    free(big);
    /* Another message's bytes: the format differs (READY and SHUTDOWN
     * share theirs, so a SHUTDOWN of READY bytes would pass). */
    int other = op == TB_CTL_FAIL ? TB_CTL_STREAM_ERR : TB_CTL_FAIL;
    CHECK_INT(tb_ctl_decode_bytes(other, b, len, &m, &err), TBON_EFORMAT);
    CHECK(strstr(err.msg, tb_ctl_name(other)) != NULL);
    tbon_packet_unref(p);
    tbon_packet_unref(old);
}

/* m decoded from the packet of op fails with a message naming op and
 * containing what. Takes p. */
static void check_refused(int op, tbon_packet_t *p, const char *what)
{
    tb_ctl_msg_t m;
    tbon_error_t err;
    err.msg[0] = 0;
    REQUIRE(p);
    int rc = tb_ctl_decode(op, p, &m, &err);
    CHECK_INT(rc, TBON_EFORMAT);
    if (rc == 0)
        tb_ctl_msg_free(&m);
    CHECK(strstr(err.msg, tb_ctl_name(op)) != NULL);
    if (!strstr(err.msg, what))
        th_fail(__FILE__, __LINE__, "\"%s\" does not say \"%s\"", err.msg, what);
    tbon_packet_unref(p);
}

/* ---- the table ---- */

TEST(table_names_every_op_once)
{
    CHECK(tb_ctl_info(0) == NULL);
    CHECK(tb_ctl_info(TB_CTL_OP_MAX + 1) == NULL);
    CHECK(tb_ctl_info(-1) == NULL);
    CHECK_STR(tb_ctl_name(99), "?");
    CHECK_INT(TB_CTL_OP_MAX, 31);
    for (int op = 1; op <= TB_CTL_OP_MAX; op++) {
        const tb_ctl_info_t *i = tb_ctl_info(op);
        REQUIRE(i);
        CHECK_INT(i->op, op);
        CHECK(i->name && i->name[0] && i->fields && i->fields[0]);
        CHECK(i->dir == TB_CTL_UP || i->dir == TB_CTL_DOWN || i->dir == TB_CTL_BOTH);
        CHECK(i->owner >= TB_CTL_OWN_NODE && i->owner <= TB_CTL_OWN_ADOPT);
        CHECK(strcmp(tb_ctl_owner_name(i->owner), "?") != 0);
        size_t n;
        tbon_error_t err;
        CHECK_INT(tb_format_parse(i->format, NULL, 0, &n, &err), 0);
        for (int o = 1; o < op; o++)
            CHECK(strcmp(tb_ctl_info(o)->name, i->name) != 0);
    }
    /* The numbers are the wire format. */
    CHECK_INT(TB_CTL_READY, 1);
    CHECK_INT(TB_CTL_LAUNCH, 9);
    CHECK_INT(TB_CTL_VIEW, 14);
    CHECK_INT(TB_CTL_LEAVE, 21);
    CHECK_INT(TB_CTL_MISSING, 22);
    CHECK_INT(TB_CTL_FILTER_FAULT, 23);
    CHECK_INT(TB_CTL_STREAM_END, 24);
    CHECK_INT(TB_CTL_DONE, 25);
    CHECK_INT(TB_CTL_CATCH_UP, 26);
    CHECK_INT(TB_CTL_DIRECT, 27);
    CHECK_INT(TB_CTL_STABLE, 28);
    CHECK_INT(TB_CTL_PING, 29);
    CHECK_INT(TB_CTL_PERF, 30);
    CHECK_INT(TB_CTL_PERF_DATA, 31);
    CHECK_INT(tb_ctl_info(TB_CTL_DIRECT)->dir, TB_CTL_BOTH);
    CHECK_STR(tb_ctl_name(TB_CTL_VIEW_ACK), "VIEW_ACK");
    CHECK_INT(tb_ctl_info(TB_CTL_VIEW)->owner, TB_CTL_OWN_VIEW);
    CHECK_INT(tb_ctl_info(TB_CTL_REPORT)->owner, TB_CTL_OWN_FT);
    CHECK_INT(tb_ctl_info(TB_CTL_ATTR)->owner, TB_CTL_OWN_ATTR);
    CHECK_INT(tb_ctl_info(TB_CTL_READY)->dir, TB_CTL_UP);
    CHECK_INT(tb_ctl_info(TB_CTL_STREAM)->dir, TB_CTL_DOWN);
}

TEST(unknown_op_is_refused)
{
    tb_ctl_msg_t m;
    tbon_error_t err;
    tbon_packet_t *p = tbon_packet_new(TB_CTL_OP_MAX + 1, "%ud", 0u);
    REQUIRE(p);
    CHECK_INT(tb_ctl_decode(TB_CTL_OP_MAX + 1, p, &m, &err), TBON_EFORMAT);
    CHECK(strstr(err.msg, "control message 32: no such op") != NULL);
    size_t len;
    const uint8_t *b = tb_packet_payload(p, &len);
    CHECK_INT(tb_ctl_decode_bytes(0, b, len, &m, &err), TBON_EFORMAT);
    CHECK(tb_ctl_encode(&(tb_ctl_msg_t){ .op = 0 }) == NULL);
    tbon_packet_unref(p);
    /* No packet at all. */
    CHECK_INT(tb_ctl_decode(TB_CTL_READY, NULL, &m, &err), TBON_EFORMAT);
}

/* ---- one round trip per message ---- */

TEST(ready_round_trip)
{
    tb_ctl_ready_t in = { 1025 }, out;
    tbon_packet_t *p = tb_ctl_ready_encode(&in);
    REQUIRE(p && tb_ctl_ready_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.count, 1025);
    check_wire(TB_CTL_READY, p, tbon_packet_new(TB_CTL_READY, "%ud", 1025u));
}

TEST(fail_round_trip)
{
    tb_ctl_fail_t in = { TBON_ELAUNCH, "rank 7 on host n3: no such program" }, out;
    tbon_packet_t *p = tb_ctl_fail_encode(&in);
    tbon_error_t err;
    REQUIRE(p && tb_ctl_fail_decode(p, &out, &err) == 0);
    CHECK_INT(out.code, TBON_ELAUNCH);
    CHECK_STR(out.msg, in.msg);
    tb_ctl_free(TB_CTL_FAIL, &out);
    check_wire(TB_CTL_FAIL, p, tbon_packet_new(TB_CTL_FAIL, "%d %s", TBON_ELAUNCH, in.msg));
}

static const uint32_t members[] = { 5, 6, 9, 4000000000u };

TEST(stream_round_trip)
{
    tb_ctl_stream_t in = { 12, 3, 2 | 0x100, 2500, -1, members, 4 }, out;
    tbon_packet_t *p = tb_ctl_stream_encode(&in);
    REQUIRE(p && tb_ctl_stream_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.id, 12);
    CHECK_INT(out.up, 3);
    CHECK_INT(out.sync, 0x102);
    CHECK_UINT(out.timeout_ms, 2500);
    CHECK_INT(out.down, -1);
    REQUIRE(out.nmembers == 4);
    CHECK_MEM(out.members, members, sizeof members);
    tb_ctl_free(TB_CTL_STREAM, &out);
    check_wire(TB_CTL_STREAM, p, tbon_packet_new(TB_CTL_STREAM, "%ud %d %d %ud %d %aud", 12u, 3,
                                                 0x102, 2500u, -1, members, (size_t)4));
    /* No members is a stream too. */
    in.members = NULL;
    in.nmembers = 0;
    p = tb_ctl_stream_encode(&in);
    REQUIRE(p && tb_ctl_stream_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.nmembers, 0);
    tb_ctl_free(TB_CTL_STREAM, &out);
    tbon_packet_unref(p);
}

TEST(filter_round_trip)
{
    tb_ctl_filter_t in = { 9, "/opt/f/libsum.so", "sum_filter" }, out;
    tbon_packet_t *p = tb_ctl_filter_encode(&in);
    REQUIRE(p && tb_ctl_filter_decode(p, &out, NULL) == 0);
    CHECK_INT(out.id, 9);
    CHECK_STR(out.path, in.path);
    CHECK_STR(out.func, in.func);
    tb_ctl_free(TB_CTL_FILTER, &out);
    check_wire(TB_CTL_FILTER, p, tbon_packet_new(TB_CTL_FILTER, "%d %s %s", 9, in.path, in.func));
}

TEST(params_round_trip)
{
    tbon_packet_t *param = tbon_packet_new(200, "%ud %s", 42u, "threshold");
    REQUIRE(param);
    size_t plen;
    const uint8_t *pl = tb_packet_payload(param, &plen);
    tb_ctl_params_t in = { 4, 2, 200, pl, plen }, out;
    tbon_packet_t *p = tb_ctl_params_encode(&in);
    REQUIRE(p && tb_ctl_params_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.stream, 4);
    CHECK_INT(out.which, 2);
    CHECK_INT(out.tag, 200);
    REQUIRE(out.len == plen);
    CHECK_MEM(out.payload, pl, plen);
    tb_ctl_free(TB_CTL_PARAMS, &out);
    check_wire(TB_CTL_PARAMS, p, tbon_packet_new(TB_CTL_PARAMS, "%ud %d %d %auc", 4u, 2, 200, pl,
                                                 plen));
    tbon_packet_unref(param);
}

TEST(shutdown_round_trip)
{
    tb_ctl_shutdown_t in = { 0 }, out = { 7 };
    tbon_packet_t *p = tb_ctl_shutdown_encode(&in);
    REQUIRE(p && tb_ctl_shutdown_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.unused, 0);
    check_wire(TB_CTL_SHUTDOWN, p, tbon_packet_new(TB_CTL_SHUTDOWN, "%ud", 0u));
}

TEST(stream_err_round_trip)
{
    tb_ctl_stream_err_t in = { 3, "filter sum: bad input format \"%d\"" }, out;
    tbon_packet_t *p = tb_ctl_stream_err_encode(&in);
    REQUIRE(p && tb_ctl_stream_err_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.stream, 3);
    CHECK_STR(out.msg, in.msg);
    tb_ctl_free(TB_CTL_STREAM_ERR, &out);
    check_wire(TB_CTL_STREAM_ERR, p, tbon_packet_new(TB_CTL_STREAM_ERR, "%ud %s", 3u, in.msg));
}

TEST(port_round_trip)
{
    tb_ctl_port_t in = { 17, 65535 }, out;
    tbon_packet_t *p = tb_ctl_port_encode(&in);
    REQUIRE(p && tb_ctl_port_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.rank, 17);
    CHECK_UINT(out.port, 65535);
    check_wire(TB_CTL_PORT, p, tbon_packet_new(TB_CTL_PORT, "%ud %ud", 17u, 65535u));
    check_refused(TB_CTL_PORT, tbon_packet_new(TB_CTL_PORT, "%ud %ud", 17u, 65536u),
                  "rank 17: port 65536 is over 65535");
    /* Port 0: a process that does not listen (every one sends PORT). */
    in.port = 0;
    p = tb_ctl_port_encode(&in);
    REQUIRE(p && tb_ctl_port_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.port, 0);
    tbon_packet_unref(p);
}

TEST(launch_round_trip)
{
    static const char *const argv[] = { "/bin/be", "--x", "", "a b" };
    tb_ctl_launch_t in = { "/bin/be", argv, 4, "ssh", "-" }, out;
    tbon_packet_t *p = tb_ctl_launch_encode(&in);
    REQUIRE(p && tb_ctl_launch_decode(p, &out, NULL) == 0);
    CHECK_STR(out.backend_exe, "/bin/be");
    REQUIRE(out.nargv == 4);
    for (size_t i = 0; i < 4; i++)
        CHECK_STR(out.argv[i], argv[i]);
    CHECK_STR(out.rsh, "ssh");
    CHECK_STR(out.commnode, "-");
    tb_ctl_free(TB_CTL_LAUNCH, &out);
    check_wire(TB_CTL_LAUNCH, p, tbon_packet_new(TB_CTL_LAUNCH, "%s %as %s %s", "/bin/be", argv,
                                                 (size_t)4, "ssh", "-"));
    /* Attach mode: no program and no argv. */
    in = (tb_ctl_launch_t){ "", NULL, 0, "", "" };
    p = tb_ctl_launch_encode(&in);
    REQUIRE(p && tb_ctl_launch_decode(p, &out, NULL) == 0);
    CHECK_STR(out.backend_exe, "");
    CHECK_UINT(out.nargv, 0);
    tb_ctl_free(TB_CTL_LAUNCH, &out);
    tbon_packet_unref(p);
}

TEST(ports_round_trip)
{
    static const uint32_t ranks[] = { 0, 1, 2, 9 }, ports[] = { 40000, 40001, 1, 65535 };
    tb_ctl_ports_t in = { ranks, ports, 4, 3000 }, out;
    tbon_packet_t *p = tb_ctl_ports_encode(&in);
    REQUIRE(p && tb_ctl_ports_decode(p, &out, NULL) == 0);
    REQUIRE(out.n == 4);
    CHECK_MEM(out.ranks, ranks, sizeof ranks);
    CHECK_MEM(out.ports, ports, sizeof ports);
    CHECK_INT(out.heartbeat_ms, 3000);
    tb_ctl_free(TB_CTL_PORTS, &out);
    check_wire(TB_CTL_PORTS, p, tbon_packet_new(TB_CTL_PORTS, "%aud %aud %d", ranks, (size_t)4,
                                                ports, (size_t)4, 3000));
    check_refused(TB_CTL_PORTS, tbon_packet_new(TB_CTL_PORTS, "%aud %aud %d", ranks, (size_t)4,
                                                ports, (size_t)3, 0), "4 ranks but 3 ports");
    static const uint32_t badp[] = { 40000, 70000 };
    check_refused(TB_CTL_PORTS, tbon_packet_new(TB_CTL_PORTS, "%aud %aud %d", ranks, (size_t)2,
                                                badp, (size_t)2, 0),
                  "entry 1 (rank 1): port 70000 is over 65535");
}

TEST(report_round_trip)
{
    tb_ctl_report_t in = { TB_V_ADOPTED, 33, 4, 0x10002, { 10, 20, 30, 40, 1 } }, out;
    tbon_packet_t *p = tb_ctl_report_encode(&in);
    REQUIRE(p && tb_ctl_report_decode(p, &out, NULL) == 0);
    CHECK_INT(out.kind, TB_V_ADOPTED);
    CHECK_UINT(out.rank, 33);
    CHECK_UINT(out.parent, 4);
    CHECK_UINT(out.inc, 0x10002);
    CHECK_MEM(out.us, in.us, sizeof in.us);
    check_wire(TB_CTL_REPORT, p, tbon_packet_new(TB_CTL_REPORT, "%d %ud %ud %ud %auld",
                                                 TB_V_ADOPTED, 33u, 4u, 0x10002u, in.us,
                                                 (size_t)5));
    check_refused(TB_CTL_REPORT, tbon_packet_new(TB_CTL_REPORT, "%d %ud %ud %ud %auld", TB_V_JOIN,
                                                 33u, 4u, 0u, in.us, (size_t)5), "kind 3");
    check_refused(TB_CTL_REPORT, tbon_packet_new(TB_CTL_REPORT, "%d %ud %ud %ud %auld",
                                                 TB_V_FAILED, 33u, 4u, 0u, in.us, (size_t)4),
                  "4 recovery times, expected 5");
}

TEST(adopt_ack_round_trip)
{
    tb_ctl_adopt_ack_t in = { 1 }, out;
    tbon_packet_t *p = tb_ctl_adopt_ack_encode(&in);
    REQUIRE(p && tb_ctl_adopt_ack_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.ok, 1);
    check_wire(TB_CTL_ADOPT_ACK, p, tbon_packet_new(TB_CTL_ADOPT_ACK, "%ud", 1u));
}

TEST(graft_round_trip)
{
    tb_ctl_graft_t in = { { 7, 1, 0, 1000, 0, members, 4 }, 0x1234567890ull, 77 }, out;
    tbon_packet_t *p = tb_ctl_graft_encode(&in);
    REQUIRE(p && tb_ctl_graft_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.def.id, 7);
    CHECK_INT(out.def.up, 1);
    CHECK_INT(out.def.sync, 0);
    CHECK_UINT(out.def.timeout_ms, 1000);
    CHECK_INT(out.def.down, 0);
    REQUIRE(out.def.nmembers == 4);
    CHECK_MEM(out.def.members, members, sizeof members);
    CHECK_UINT(out.sent_key, 0x1234567890ull);
    CHECK_UINT(out.last_q, 77);
    tb_ctl_free(TB_CTL_GRAFT, &out);
    check_wire(TB_CTL_GRAFT, p, tbon_packet_new(TB_CTL_GRAFT, "%ud %d %d %ud %d %aud %uld %uld",
                                                7u, 1, 0, 1000u, 0, members, (size_t)4,
                                                (uint64_t)0x1234567890ull, (uint64_t)77));
}

static const tb_vchange_t changes[] = {
    { TB_V_FAILED, 3, TBON_RANK_NONE, 1, 0, "", 0 },
    { TB_V_ADOPTED, 8, 2, 2, 0, "", 0 },
    { TB_V_JOIN, 21, 4, 0x10000, 21, "node17.cluster", 0 },
    { TB_V_JOINED, 21, 4, 0, 0, "", 0 },
    { TB_V_LEFT, 9, TBON_RANK_NONE, 0, 0, "", 0 },
    { TB_V_JOIN_CN, 22, 0, 0, 3, "10.0.0.5", 45678 },
};

TEST(view_round_trip)
{
    tb_ctl_view_t in = { 12, 11, changes, 6 }, out;
    tbon_packet_t *p = tb_ctl_view_encode(&in);
    REQUIRE(p && tb_ctl_view_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.version, 12);
    CHECK_UINT(out.prev, 11);
    REQUIRE(out.n == 6);
    for (size_t i = 0; i < 6; i++) {
        CHECK_INT(out.ch[i].kind, changes[i].kind);
        CHECK_UINT(out.ch[i].rank, changes[i].rank);
        CHECK_UINT(out.ch[i].parent, changes[i].parent);
        CHECK_UINT(out.ch[i].inc, changes[i].inc);
        CHECK_UINT(out.ch[i].lid, changes[i].lid);
        CHECK_STR(out.ch[i].host, changes[i].host);
        CHECK_UINT(out.ch[i].port, changes[i].port);
    }
    tb_ctl_free(TB_CTL_VIEW, &out);
    /* The old call site's layout: kinds, ranks, parents, incarnations,
     * hosts, local ids, ports. */
    int32_t kinds[6];
    uint32_t r[6], par[6], inc[6], lid[6], port[6];
    const char *hosts[6];
    for (size_t i = 0; i < 6; i++) {
        kinds[i] = changes[i].kind;
        r[i] = changes[i].rank;
        par[i] = changes[i].parent;
        inc[i] = changes[i].inc;
        lid[i] = changes[i].lid;
        port[i] = changes[i].port;
        hosts[i] = changes[i].host;
    }
    size_t k = 6;
    check_wire(TB_CTL_VIEW, p, tbon_packet_new(TB_CTL_VIEW, "%uld %uld %ad %aud %aud %aud %as %aud %aud",
                                               (uint64_t)12, (uint64_t)11, kinds, k, r, k, par, k,
                                               inc, k, hosts, k, lid, k, port, k));
    /* A whole view (prev 0) without changes. */
    in = (tb_ctl_view_t){ 1, 0, NULL, 0 };
    p = tb_ctl_view_encode(&in);
    REQUIRE(p && tb_ctl_view_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.n, 0);
    tb_ctl_free(TB_CTL_VIEW, &out);
    tbon_packet_unref(p);
}

TEST(view_out_of_range_is_refused)
{
    tb_vchange_t ch[2] = { changes[0], changes[5] };
    tbon_packet_t *p = tb_ctl_view_encode(&(tb_ctl_view_t){ 5, 5, ch, 2 });
    check_refused(TB_CTL_VIEW, p, "version 5 follows version 5");
    ch[1].kind = 7;
    check_refused(TB_CTL_VIEW, tb_ctl_view_encode(&(tb_ctl_view_t){ 5, 4, ch, 2 }),
                  "change 1: kind 7 is not 1-6");
    ch[1].kind = TB_V_JOIN_CN;
    ch[1].port = 65536;
    check_refused(TB_CTL_VIEW, tb_ctl_view_encode(&(tb_ctl_view_t){ 5, 4, ch, 2 }),
                  "change 1: port 65536 is over 65535");
    /* Arrays of different lengths. */
    int32_t kinds[2] = { 1, 1 };
    uint32_t r[2] = { 3, 4 };
    const char *hosts[2] = { "", "" };
    check_refused(TB_CTL_VIEW, tbon_packet_new(TB_CTL_VIEW, "%uld %uld %ad %aud %aud %aud %as %aud %aud",
                                               (uint64_t)2, (uint64_t)1, kinds, (size_t)2, r,
                                               (size_t)2, r, (size_t)2, r, (size_t)1, hosts,
                                               (size_t)2, r, (size_t)2, r, (size_t)2),
                  "2 kinds but 2 ranks, 2 parents, 1 incarnations");
    /* A host longer than a topology's. */
    char *longhost = malloc(TB_TOPOLOGY_MAX_HOST + 2);
    REQUIRE(longhost);
    memset(longhost, 'h', TB_TOPOLOGY_MAX_HOST + 1);
    longhost[TB_TOPOLOGY_MAX_HOST + 1] = 0;
    hosts[0] = longhost;
    check_refused(TB_CTL_VIEW, tbon_packet_new(TB_CTL_VIEW, "%uld %uld %ad %aud %aud %aud %as %aud %aud",
                                               (uint64_t)2, (uint64_t)1, kinds, (size_t)1, r,
                                               (size_t)1, r, (size_t)1, r, (size_t)1, hosts,
                                               (size_t)1, r, (size_t)1, r, (size_t)1),
                  "change 0: a host name of 256 bytes (at most 255)");
    free(longhost);
}

TEST(view_ack_round_trip)
{
    tb_ctl_view_ack_t in = { 40, 38, 1 }, out;
    tbon_packet_t *p = tb_ctl_view_ack_encode(&in);
    REQUIRE(p && tb_ctl_view_ack_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.applied, 40);
    CHECK_UINT(out.sub, 38);
    CHECK_INT(out.want, 1);
    check_wire(TB_CTL_VIEW_ACK, p, tbon_packet_new(TB_CTL_VIEW_ACK, "%uld %uld %d", (uint64_t)40,
                                                   (uint64_t)38, 1));
    check_refused(TB_CTL_VIEW_ACK, tb_ctl_view_ack_encode(&(tb_ctl_view_ack_t){ 3, 4, 0 }),
                  "the subtree has version 4, beyond the 3 applied here");
    check_refused(TB_CTL_VIEW_ACK, tb_ctl_view_ack_encode(&(tb_ctl_view_ack_t){ 3, 3, 2 }),
                  "want is 2, not 0 or 1");
}

TEST(check_round_trip)
{
    tb_ctl_check_t in = { 5, 17, 0xfedcba9876543210ull }, out;
    tbon_packet_t *p = tb_ctl_check_encode(&in);
    REQUIRE(p && tb_ctl_check_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.id, 5);
    CHECK_UINT(out.version, 17);
    CHECK_UINT(out.digest, 0xfedcba9876543210ull);
    check_wire(TB_CTL_CHECK, p, tbon_packet_new(TB_CTL_CHECK, "%uld %uld %uld", (uint64_t)5,
                                                (uint64_t)17, (uint64_t)0xfedcba9876543210ull));
    check_refused(TB_CTL_CHECK, tb_ctl_check_encode(&(tb_ctl_check_t){ 0, 1, 2 }), "check id 0");
}

TEST(checked_round_trip)
{
    static const uint32_t agree[] = { 0, 1, 2, 5 }, bad[] = { 3 };
    tb_ctl_checked_t in = { 5, agree, bad, 4, 1 }, out;
    tbon_packet_t *p = tb_ctl_checked_encode(&in);
    REQUIRE(p && tb_ctl_checked_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.id, 5);
    REQUIRE(out.nagree == 4 && out.nbad == 1);
    CHECK_MEM(out.agree, agree, sizeof agree);
    CHECK_MEM(out.bad, bad, sizeof bad);
    tb_ctl_free(TB_CTL_CHECKED, &out);
    check_wire(TB_CTL_CHECKED, p, tbon_packet_new(TB_CTL_CHECKED, "%uld %aud %aud", (uint64_t)5,
                                                  agree, (size_t)4, bad, (size_t)1));
}

TEST(attr_round_trip)
{
    static const char *const keys[] = { "state", "gone", "x" };
    static const char *const vals[] = { "running", "", "1" };
    static const uint8_t dead[] = { 0, 1, 0 };
    static const uint64_t ver[] = { 3, 4, 1ull << 40 };
    tb_ctl_attr_t in = { 12, keys, vals, dead, ver, 3 }, out;
    tbon_packet_t *p = tb_ctl_attr_encode(&in);
    REQUIRE(p && tb_ctl_attr_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.src, 12);
    REQUIRE(out.n == 3);
    for (size_t i = 0; i < 3; i++) {
        CHECK_STR(out.keys[i], keys[i]);
        CHECK_STR(out.values[i], vals[i]);
        CHECK_UINT(out.dead[i], dead[i]);
        CHECK_UINT(out.versions[i], ver[i]);
    }
    tb_ctl_free(TB_CTL_ATTR, &out);
    check_wire(TB_CTL_ATTR, p, tbon_packet_new(TB_CTL_ATTR, "%ud %as %as %auc %auld", 12u, keys,
                                               (size_t)3, vals, (size_t)3, dead, (size_t)3, ver,
                                               (size_t)3));
    check_refused(TB_CTL_ATTR, tbon_packet_new(TB_CTL_ATTR, "%ud %as %as %auc %auld", 12u, keys,
                                               (size_t)3, vals, (size_t)2, dead, (size_t)3, ver,
                                               (size_t)3),
                  "3 keys but 2 values, 3 tombstone flags, 3 versions");
    static const uint8_t dead2[] = { 0, 2, 0 };
    check_refused(TB_CTL_ATTR, tb_ctl_attr_encode(&(tb_ctl_attr_t){ 1, keys, vals, dead2, ver, 3 }),
                  "entry 1: tombstone flag 2 is not 0 or 1");
}

TEST(attr_sync_round_trip)
{
    tb_ctl_attr_sync_t in = { 0 }, out = { 9 };
    tbon_packet_t *p = tb_ctl_attr_sync_encode(&in);
    REQUIRE(p && tb_ctl_attr_sync_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.unused, 0);
    check_wire(TB_CTL_ATTR_SYNC, p, tbon_packet_new(TB_CTL_ATTR_SYNC, "%ud", 0u));
}

TEST(join_ack_round_trip)
{
    tb_ctl_join_ack_t in = { 101, 4, "node4.cluster", 40123, 0x20000 }, out;
    tbon_packet_t *p = tb_ctl_join_ack_encode(&in);
    REQUIRE(p && tb_ctl_join_ack_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.rank, 101);
    CHECK_UINT(out.parent, 4);
    CHECK_STR(out.host, "node4.cluster");
    CHECK_UINT(out.port, 40123);
    CHECK_UINT(out.inc, 0x20000);
    tb_ctl_free(TB_CTL_JOIN_ACK, &out);
    check_wire(TB_CTL_JOIN_ACK, p, tbon_packet_new(TB_CTL_JOIN_ACK, "%ud %ud %s %ud %ud", 101u, 4u,
                                                   "node4.cluster", 40123u, 0x20000u));
    check_refused(TB_CTL_JOIN_ACK,
                  tb_ctl_join_ack_encode(&(tb_ctl_join_ack_t){ 1, 0, "h", 0, 0 }),
                  "the parent's port 0 is not 1-65535");
}

TEST(leave_round_trip)
{
    tb_ctl_leave_t in = { 0 }, out = { 5 };
    tbon_packet_t *p = tb_ctl_leave_encode(&in);
    REQUIRE(p && tb_ctl_leave_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.unused, 0);
    check_wire(TB_CTL_LEAVE, p, tbon_packet_new(TB_CTL_LEAVE, "%ud", 0u));
}

TEST(missing_round_trip)
{
    static const uint32_t moved[] = { 17, 18, 19 };
    tb_ctl_missing_t in = { TBON_ETIMEOUT, 3, 0, "rank 3 on host n1 did not connect within 900 ms",
                            moved, 3 }, out;
    tbon_packet_t *p = tb_ctl_missing_encode(&in);
    REQUIRE(p && tb_ctl_missing_decode(p, &out, NULL) == 0);
    CHECK_INT(out.code, TBON_ETIMEOUT);
    CHECK_UINT(out.rank, 3);
    CHECK_UINT(out.parent, 0);
    CHECK_STR(out.msg, in.msg);
    REQUIRE(out.nmoved == 3);
    CHECK_MEM(out.moved, moved, sizeof moved);
    tb_ctl_free(TB_CTL_MISSING, &out);
    check_wire(TB_CTL_MISSING, p, tbon_packet_new(TB_CTL_MISSING, "%d %ud %ud %s %aud",
                                                  TBON_ETIMEOUT, 3u, 0u, in.msg, moved,
                                                  (size_t)3));
    /* A whole subtree left out: no children move. */
    p = tb_ctl_missing_encode(&(tb_ctl_missing_t){ TBON_ELAUNCH, 9, 2, "m", NULL, 0 });
    REQUIRE(p && tb_ctl_missing_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.nmoved, 0);
    tb_ctl_free(TB_CTL_MISSING, &out);
    tbon_packet_unref(p);
}

TEST(stream_end_round_trip)
{
    tb_ctl_stream_end_t out;
    tbon_packet_t *p = tb_ctl_stream_end_encode(&(tb_ctl_stream_end_t){ 4321 });
    REQUIRE(p && tb_ctl_stream_end_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.stream, 4321);
    check_wire(TB_CTL_STREAM_END, p, tbon_packet_new(TB_CTL_STREAM_END, "%ud", 4321u));
}

TEST(catch_up_round_trip)
{
    tb_ctl_catch_up_t out;
    tbon_packet_t *p = tb_ctl_catch_up_encode(&(tb_ctl_catch_up_t){ 3, 1 });
    REQUIRE(p && tb_ctl_catch_up_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.filters, 3);
    CHECK_INT(out.ports, 1);
    check_wire(TB_CTL_CATCH_UP, p, tbon_packet_new(TB_CTL_CATCH_UP, "%ud %d", 3u, 1));
    check_refused(TB_CTL_CATCH_UP, tb_ctl_catch_up_encode(&(tb_ctl_catch_up_t){ 0, 2 }),
                  "the port table flag 2 is not 0 or 1");
    check_refused(TB_CTL_CATCH_UP, tb_ctl_catch_up_encode(&(tb_ctl_catch_up_t){ 0, -1 }),
                  "the port table flag -1 is not 0 or 1");
}

TEST(direct_round_trip_and_checks)
{
    const uint32_t dst[] = { 5, 9, 12 }, dseq[] = { 1, 4, 2 };
    const uint8_t body[] = { 1, 2, 3, 4 };
    tb_ctl_direct_t in = { 7, 2, 42, 130, 0, 3, dst, dseq, 3, body, 4 }, out;
    tbon_packet_t *p = tb_ctl_direct_encode(&in);
    REQUIRE(p && tb_ctl_direct_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.src, 7);
    CHECK_UINT(out.nonce, 2);
    CHECK_UINT(out.seq, 42);
    CHECK_INT(out.tag, 130);
    CHECK_UINT(out.bseq, 3);
    CHECK_UINT(out.ndst, 3);
    CHECK(out.dst && out.dst[2] == 12 && out.dseq && out.dseq[1] == 4);
    CHECK(out.len == 4 && memcmp(out.body, body, 4) == 0);
    tb_ctl_free(TB_CTL_DIRECT, &out);
    check_wire(TB_CTL_DIRECT, p, tbon_packet_new(TB_CTL_DIRECT,
                                                 "%ud %ud %uld %d %ud %ud %aud %aud %auc", 7u, 2u,
                                                 (uint64_t)42, 130, 0u, 3u, dst, (size_t)3, dseq,
                                                 (size_t)3, body, (size_t)4));
    /* A broadcast may name no destination; anything else names one at least. */
    p = tb_ctl_direct_encode(&(tb_ctl_direct_t){ 7, 0, 1, 130, TB_DIRECT_BCAST, 1, NULL, NULL, 0,
                                                 body, 4 });
    REQUIRE(p && tb_ctl_direct_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.ndst, 0);
    tb_ctl_free(TB_CTL_DIRECT, &out);
    tbon_packet_unref(p);
    /* An acknowledgement: one sender, no body, no number. */
    p = tb_ctl_direct_encode(&(tb_ctl_direct_t){ 9, 0, 0, 0, TB_DIRECT_ACK, 3, dst, dseq, 1,
                                                 NULL, 0 });
    REQUIRE(p && tb_ctl_direct_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.flags, TB_DIRECT_ACK);
    tb_ctl_free(TB_CTL_DIRECT, &out);
    tbon_packet_unref(p);
    /* ... and one that tells of a gap. */
    p = tb_ctl_direct_encode(&(tb_ctl_direct_t){ 9, 0, 0, 0, TB_DIRECT_ACK | TB_DIRECT_GAP, 3,
                                                 dst, dseq, 1, NULL, 0 });
    REQUIRE(p && tb_ctl_direct_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.flags, TB_DIRECT_ACK | TB_DIRECT_GAP);
    tb_ctl_free(TB_CTL_DIRECT, &out);
    tbon_packet_unref(p);
    const uint32_t zero[] = { 0 };
    struct { tb_ctl_direct_t m; const char *why; } bad[] = {
        { { 7, 0, 1, 130, 0, 0, NULL, NULL, 0, body, 4 }, "no destination" },
        { { 7, 0, 1, 130, 8, 0, dst, dseq, 1, body, 4 }, "unknown flags 0x8" },
        { { 7, 0, 1, 130, 4, 0, dst, dseq, 1, body, 4 }, "a gap is told by an acknowledgement" },
        { { 7, 0, 1, 130, 3, 1, dst, dseq, 1, body, 4 }, "an acknowledgement is no broadcast" },
        { { 7, 0, 0, 130, 0, 0, dst, dseq, 1, body, 4 }, "the message number is 0" },
        { { 7, 0, 1, 130, 0, 0, dst, zero, 1, body, 4 }, "a destination's number is 0" },
        { { 7, 0, 1, 130, 1, 0, NULL, NULL, 0, body, 4 }, "the broadcast number is 0" },
        { { 7, 0, 0, 0, 2, 0, dst, dseq, 2, NULL, 0 }, "goes to one sender" },
        { { 7, 0, 0, 0, 2, 0, dst, dseq, 1, body, 4 }, "goes to one sender" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        check_refused(TB_CTL_DIRECT, tb_ctl_direct_encode(&bad[i].m), bad[i].why);
    /* Fewer numbers than destinations. */
    check_refused(TB_CTL_DIRECT, tbon_packet_new(TB_CTL_DIRECT,
                                                 "%ud %ud %uld %d %ud %ud %aud %aud %auc", 7u, 0u,
                                                 (uint64_t)1, 130, 0u, 0u, dst, (size_t)3, dseq,
                                                 (size_t)2, body, (size_t)4),
                  "2 numbers for 3 destinations");
}

TEST(stable_round_trip_and_version_zero)
{
    tb_ctl_stable_t out;
    tbon_packet_t *p = tb_ctl_stable_encode(&(tb_ctl_stable_t){ 12 });
    REQUIRE(p && tb_ctl_stable_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.version, 12);
    check_wire(TB_CTL_STABLE, p, tbon_packet_new(TB_CTL_STABLE, "%uld", (uint64_t)12));
    check_refused(TB_CTL_STABLE, tb_ctl_stable_encode(&(tb_ctl_stable_t){ 0 }), "view version 0");
}

TEST(ping_round_trip_and_checks)
{
    const uint32_t route[] = { 0, 3, 40 };
    tb_ctl_ping_t out;
    tbon_packet_t *p = tb_ctl_ping_encode(&(tb_ctl_ping_t){ 0, 40, 9, TB_PING_PONG, route, 3 });
    REQUIRE(p && tb_ctl_ping_decode(p, &out, NULL) == 0);
    CHECK(out.origin == 0 && out.target == 40 && out.id == 9 && out.flags == TB_PING_PONG);
    CHECK(out.nroute == 3 && out.route[1] == 3);
    tb_ctl_free(TB_CTL_PING, &out);
    check_wire(TB_CTL_PING, p, tbon_packet_new(TB_CTL_PING, "%ud %ud %uld %ud %aud", 0u, 40u,
                                               (uint64_t)9, 1u, route, (size_t)3));
    check_refused(TB_CTL_PING, tb_ctl_ping_encode(&(tb_ctl_ping_t){ 0, 40, 9, 2, route, 3 }),
                  "unknown flags 0x2");
    check_refused(TB_CTL_PING, tb_ctl_ping_encode(&(tb_ctl_ping_t){ 5, 40, 9, 0, route, 3 }),
                  "does not start at the origin");
    check_refused(TB_CTL_PING, tb_ctl_ping_encode(&(tb_ctl_ping_t){ 0, 40, 9, 0, NULL, 0 }),
                  "does not start at the origin");
}

TEST(perf_round_trip_and_id_zero)
{
    tb_ctl_perf_t out;
    tbon_packet_t *p = tb_ctl_perf_encode(&(tb_ctl_perf_t){ 7, 1500 });
    REQUIRE(p && tb_ctl_perf_decode(p, &out, NULL) == 0);
    CHECK(out.id == 7 && out.wait_ms == 1500);
    check_wire(TB_CTL_PERF, p, tbon_packet_new(TB_CTL_PERF, "%uld %ud", (uint64_t)7, 1500u));
    check_refused(TB_CTL_PERF, tb_ctl_perf_encode(&(tb_ctl_perf_t){ 0, 10 }), "gathering id 0");
}

/* Records of a newer sender (wider) are read; too narrow or ragged ones
 * are refused, naming the field. */
TEST(perf_data_round_trip_and_widths)
{
    uint64_t node[2 * (TB_PERF_NW + 1)] = { 0 }, strm[TB_PERF_SW + 1] = { 0 };
    node[TB_PERF_N_RANK] = 3;
    node[TB_PERF_NW + 1 + TB_PERF_N_RANK] = 4;
    node[TB_PERF_NW + 1 + TB_PERF_N_RSS] = 1 << 20;
    strm[TB_PERF_S_STREAM] = 9;
    strm[TB_PERF_S_UP_IN_BYTES] = 123456789012ull;
    tb_ctl_perf_data_t in = { 5, TB_PERF_NW + 1, TB_PERF_SW + 1, node, strm,
                              2 * (TB_PERF_NW + 1), TB_PERF_SW + 1 }, out;
    tbon_packet_t *p = tb_ctl_perf_data_encode(&in);
    REQUIRE(p && tb_ctl_perf_data_decode(p, &out, NULL) == 0);
    CHECK(out.id == 5 && out.nw == TB_PERF_NW + 1 && out.sw == TB_PERF_SW + 1);
    CHECK(out.nnode == 2 * (TB_PERF_NW + 1) && out.nstrm == TB_PERF_SW + 1);
    CHECK(out.node[TB_PERF_NW + 1 + TB_PERF_N_RSS] == 1 << 20);
    CHECK(out.strm[TB_PERF_S_UP_IN_BYTES] == 123456789012ull);
    tb_ctl_free(TB_CTL_PERF_DATA, &out);
    check_wire(TB_CTL_PERF_DATA, p,
               tbon_packet_new(TB_CTL_PERF_DATA, "%uld %ud %ud %auld %auld", (uint64_t)5,
                               (uint32_t)(TB_PERF_NW + 1), (uint32_t)(TB_PERF_SW + 1), node,
                               (size_t)(2 * (TB_PERF_NW + 1)), strm, (size_t)(TB_PERF_SW + 1)));
    /* no records at all is an answer too */
    p = tb_ctl_perf_data_encode(&(tb_ctl_perf_data_t){ 5, TB_PERF_NW, TB_PERF_SW, NULL, NULL,
                                                        0, 0 });
    REQUIRE(p && tb_ctl_perf_data_decode(p, &out, NULL) == 0);
    CHECK(out.nnode == 0 && out.nstrm == 0);
    tb_ctl_free(TB_CTL_PERF_DATA, &out);
    tbon_packet_unref(p);
    check_refused(TB_CTL_PERF_DATA, tb_ctl_perf_data_encode(&(tb_ctl_perf_data_t){
                      5, TB_PERF_NW - 1, TB_PERF_SW, node, NULL, TB_PERF_NW - 1, 0 }),
                  "field 2");
    check_refused(TB_CTL_PERF_DATA, tb_ctl_perf_data_encode(&(tb_ctl_perf_data_t){
                      5, TB_PERF_NW, TB_PERF_SW - 1, NULL, strm, 0, TB_PERF_SW - 1 }),
                  "field 3");
    check_refused(TB_CTL_PERF_DATA, tb_ctl_perf_data_encode(&(tb_ctl_perf_data_t){
                      5, TB_PERF_NW, TB_PERF_SW, node, NULL, TB_PERF_NW + 1, 0 }),
                  "not whole records");
    check_refused(TB_CTL_PERF_DATA, tb_ctl_perf_data_encode(&(tb_ctl_perf_data_t){
                      5, TB_PERF_NW, TB_PERF_SW, NULL, strm, 0, TB_PERF_SW + 1 }),
                  "field 5");
}

TEST(filter_fault_round_trip_and_signal_range)
{
    const uint32_t src[] = { 97, 98, 100 };
    tb_ctl_filter_fault_t in = { 7, 9, 6, 11, (uint64_t)5 << 24, src, 3,
                                 "rank 6, stream 7: filter \"poison\" crashed" }, out;
    tbon_packet_t *p = tb_ctl_filter_fault_encode(&in);
    REQUIRE(p && tb_ctl_filter_fault_decode(p, &out, NULL) == 0);
    CHECK_UINT(out.stream, 7);
    CHECK_INT(out.filter, 9);
    CHECK_UINT(out.rank, 6);
    CHECK_INT(out.sig, 11);
    CHECK(out.key == (uint64_t)5 << 24);
    REQUIRE(out.nsources == 3);
    CHECK_MEM(out.sources, src, sizeof src);
    CHECK_STR(out.msg, in.msg);
    tb_ctl_free(TB_CTL_FILTER_FAULT, &out);
    check_wire(TB_CTL_FILTER_FAULT, p, tbon_packet_new(TB_CTL_FILTER_FAULT,
                                                       "%ud %d %ud %d %uld %aud %s", 7u, 9, 6u,
                                                       11, (uint64_t)5 << 24, src, (size_t)3,
                                                       in.msg));
    /* a signal out of range is refused */
    check_refused(TB_CTL_FILTER_FAULT,
                  tbon_packet_new(TB_CTL_FILTER_FAULT, "%ud %d %ud %d %uld %aud %s", 7u, 9,
                                  6u, 99, (uint64_t)0, src, (size_t)0, "m"),
                  "signal 99 is out of range");
}

/* ---- across messages ---- */

TEST(a_nul_byte_in_a_string_is_refused)
{
    /* Built from raw fields: tbon_packet_new stops at the NUL. */
    uint8_t code[4] = { 1, 0, 0, 0 };
    struct tb_field f[2] = {
        { TB_F_D, 1, code, 4 },
        { TB_F_S, 5, (const uint8_t *)"ab\0cd", 5 },
    };
    tbon_error_t err;
    check_refused(TB_CTL_FAIL, tb_packet_build(TB_CTL_FAIL, f, 2, &err),
                  "field 2: a NUL byte in the string");
    /* And inside a string array (LAUNCH's argv). */
    uint8_t seq[4 + 3 + 4 + 2];
    memcpy(seq, "\3\0\0\0abc\2\0\0\0x", 12);
    seq[12] = 0;
    struct tb_field g[4] = {
        { TB_F_S, 1, (const uint8_t *)"b", 1 },
        { TB_F_AS, 2, seq, sizeof seq },
        { TB_F_S, 0, (const uint8_t *)"", 0 },
        { TB_F_S, 0, (const uint8_t *)"", 0 },
    };
    check_refused(TB_CTL_LAUNCH, tb_packet_build(TB_CTL_LAUNCH, g, 4, &err),
                  "field 2: a NUL byte in string 1");
}

TEST(every_message_refuses_every_other_format)
{
    /* One valid packet per op; decoding it as any op with another format
     * fails and names that op. */
    tbon_packet_t *pk[TB_CTL_OP_MAX + 1] = { 0 };
    static const char *const argv[] = { "a" };
    static const uint32_t one[] = { 1 };
    static const char *const k1[] = { "k" };
    static const uint8_t d1[] = { 0 };
    static const uint64_t v1[] = { 1 };
    pk[TB_CTL_READY] = tb_ctl_ready_encode(&(tb_ctl_ready_t){ 1 });
    pk[TB_CTL_FAIL] = tb_ctl_fail_encode(&(tb_ctl_fail_t){ 1, "m" });
    pk[TB_CTL_STREAM] = tb_ctl_stream_encode(&(tb_ctl_stream_t){ 1, 0, 0, 0, 0, one, 1 });
    pk[TB_CTL_FILTER] = tb_ctl_filter_encode(&(tb_ctl_filter_t){ 1, "p", "f" });
    pk[TB_CTL_PARAMS] = tb_ctl_params_encode(&(tb_ctl_params_t){ 1, 0, 0, d1, 1 });
    pk[TB_CTL_SHUTDOWN] = tb_ctl_shutdown_encode(&(tb_ctl_shutdown_t){ 0 });
    pk[TB_CTL_STREAM_ERR] = tb_ctl_stream_err_encode(&(tb_ctl_stream_err_t){ 1, "m" });
    pk[TB_CTL_PORT] = tb_ctl_port_encode(&(tb_ctl_port_t){ 1, 2 });
    pk[TB_CTL_LAUNCH] = tb_ctl_launch_encode(&(tb_ctl_launch_t){ "", argv, 1, "", "" });
    pk[TB_CTL_PORTS] = tb_ctl_ports_encode(&(tb_ctl_ports_t){ one, one, 1, 0 });
    pk[TB_CTL_REPORT] = tb_ctl_report_encode(&(tb_ctl_report_t){ 1, 1, 0, 0, { 0 } });
    pk[TB_CTL_ADOPT_ACK] = tb_ctl_adopt_ack_encode(&(tb_ctl_adopt_ack_t){ 1 });
    pk[TB_CTL_GRAFT] = tb_ctl_graft_encode(&(tb_ctl_graft_t){ { 1, 0, 0, 0, 0, one, 1 }, 1, 1 });
    pk[TB_CTL_VIEW] = tb_ctl_view_encode(&(tb_ctl_view_t){ 2, 1, changes, 1 });
    pk[TB_CTL_VIEW_ACK] = tb_ctl_view_ack_encode(&(tb_ctl_view_ack_t){ 2, 1, 0 });
    pk[TB_CTL_CHECK] = tb_ctl_check_encode(&(tb_ctl_check_t){ 1, 1, 1 });
    pk[TB_CTL_CHECKED] = tb_ctl_checked_encode(&(tb_ctl_checked_t){ 1, one, one, 1, 1 });
    pk[TB_CTL_ATTR] = tb_ctl_attr_encode(&(tb_ctl_attr_t){ 1, k1, k1, d1, v1, 1 });
    pk[TB_CTL_ATTR_SYNC] = tb_ctl_attr_sync_encode(&(tb_ctl_attr_sync_t){ 0 });
    pk[TB_CTL_JOIN_ACK] = tb_ctl_join_ack_encode(&(tb_ctl_join_ack_t){ 1, 0, "h", 1, 0 });
    pk[TB_CTL_LEAVE] = tb_ctl_leave_encode(&(tb_ctl_leave_t){ 0 });
    pk[TB_CTL_MISSING] = tb_ctl_missing_encode(&(tb_ctl_missing_t){ 1, 1, 0, "m", one, 1 });
    pk[TB_CTL_FILTER_FAULT] = tb_ctl_filter_fault_encode(
        &(tb_ctl_filter_fault_t){ 1, 7, 1, 11, 0, one, 1, "m" });
    pk[TB_CTL_STREAM_END] = tb_ctl_stream_end_encode(&(tb_ctl_stream_end_t){ 9 });
    pk[TB_CTL_DONE] = tb_ctl_done_encode(&(tb_ctl_done_t){ 9, (uint64_t)3 << 24 });
    pk[TB_CTL_CATCH_UP] = tb_ctl_catch_up_encode(&(tb_ctl_catch_up_t){ 2, 1 });
    pk[TB_CTL_DIRECT] = tb_ctl_direct_encode(&(tb_ctl_direct_t){ 1, 0, 1, 100, 0, 0, one, one, 1,
                                                                 d1, 1 });
    pk[TB_CTL_STABLE] = tb_ctl_stable_encode(&(tb_ctl_stable_t){ 4 });
    pk[TB_CTL_PING] = tb_ctl_ping_encode(&(tb_ctl_ping_t){ 1, 3, 7, 0, one, 1 });
    pk[TB_CTL_PERF] = tb_ctl_perf_encode(&(tb_ctl_perf_t){ 1, 10 });
    pk[TB_CTL_PERF_DATA] = tb_ctl_perf_data_encode(&(tb_ctl_perf_data_t){
        1, TB_PERF_NW, TB_PERF_SW, NULL, NULL, 0, 0 });
    for (int a = 1; a <= TB_CTL_OP_MAX; a++) {
        REQUIRE(pk[a]);
        for (int b = 1; b <= TB_CTL_OP_MAX; b++) {
            tb_ctl_msg_t m;
            tbon_error_t err;
            int same = strcmp(tb_ctl_info(a)->format, tb_ctl_info(b)->format) == 0;
            int rc = tb_ctl_decode(b, pk[a], &m, &err);
            if (same) {
                CHECK_INT(rc, 0);
            } else {
                CHECK_INT(rc, TBON_EFORMAT);
                CHECK(strstr(err.msg, "format") && strstr(err.msg, tb_ctl_info(b)->format));
            }
            if (rc == 0)
                tb_ctl_msg_free(&m);
        }
    }
    for (int a = 1; a <= TB_CTL_OP_MAX; a++)
        tbon_packet_unref(pk[a]);
}

/* docs/protocol.md (section 7.2) lists the table as it is: one row per op,
 * as ctl.c would print it. Run from the top of the tree, as tests/run.sh
 * does. */
TEST(protocol_md_lists_the_table)
{
    char *doc = th_read_file("docs/protocol.md");
    REQUIRE(doc);
    if (!doc[0])
        th_fail(__FILE__, __LINE__, "docs/protocol.md not found (run from the top of the tree)");
    for (int op = 1; op <= TB_CTL_OP_MAX; op++) {
        const tb_ctl_info_t *i = tb_ctl_info(op);
        char row[1024];
        snprintf(row, sizeof row, "| %d | %s | %s | %s | `%s` | %s |\n", i->op, i->name,
                 tb_ctl_dir_name(i->dir), tb_ctl_owner_name(i->owner), i->format, i->fields);
        if (!strstr(doc, row))
            th_fail(__FILE__, __LINE__, "docs/protocol.md lacks the row %s", row);
    }
    free(doc);
}
