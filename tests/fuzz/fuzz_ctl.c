/* fuzz_ctl.c - libFuzzer harness for the control message decoder (codec/ctl.h)
 *
 * Input: byte 0 = the op (any value: unknown ops must be refused too), then
 * a CONTROL frame's payload. A message that decodes must encode back to
 * exactly the bytes given (the encoding is unique), its fields must be
 * within the ranges the decoder promises, and decoding the re-encoded
 * packet must give the same bytes again. A refusal must be TBON_EFORMAT (or
 * TBON_ENOMEM) with a message that names the control message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/ctl.h"
#include "codec/packet_int.h"

#define FUZZ_ASSERT(c) do { if (!(c)) { \
    fprintf(stderr, "fuzz_ctl: %s:%d: %s\n", __FILE__, __LINE__, #c); \
    abort(); } } while (0)

/* What the decoder promises beyond the format. */
static void check_ranges(const tb_ctl_msg_t *m)
{
    switch (m->op) {
    case TB_CTL_PORT:
        FUZZ_ASSERT(m->u.port.port <= 65535);
        break;
    case TB_CTL_PORTS:
        for (size_t i = 0; i < m->u.ports.n; i++)
            FUZZ_ASSERT(m->u.ports.ports[i] <= 65535);
        break;
    case TB_CTL_REPORT:
        FUZZ_ASSERT(m->u.report.kind == TB_V_FAILED || m->u.report.kind == TB_V_ADOPTED ||
                    m->u.report.kind == TB_V_JOINED || m->u.report.kind == TB_V_LEFT);
        break;
    case TB_CTL_VIEW:
        FUZZ_ASSERT(m->u.view.prev < m->u.view.version);
        for (size_t i = 0; i < m->u.view.n; i++) {
            const tb_vchange_t *c = &m->u.view.ch[i];
            FUZZ_ASSERT(c->kind >= TB_V_FAILED && c->kind <= TB_V_JOIN_CN);
            FUZZ_ASSERT(c->port <= 65535);
            FUZZ_ASSERT(strlen(c->host) <= TB_TOPOLOGY_MAX_HOST);
        }
        break;
    case TB_CTL_VIEW_ACK:
        FUZZ_ASSERT(m->u.view_ack.sub <= m->u.view_ack.applied);
        FUZZ_ASSERT(m->u.view_ack.want == 0 || m->u.view_ack.want == 1);
        break;
    case TB_CTL_CHECK:
        FUZZ_ASSERT(m->u.check.id != 0);
        break;
    case TB_CTL_ATTR:
        for (size_t i = 0; i < m->u.attr.n; i++) {
            FUZZ_ASSERT(m->u.attr.dead[i] <= 1);
            FUZZ_ASSERT(m->u.attr.keys[i] && m->u.attr.values[i]);
        }
        break;
    case TB_CTL_JOIN_ACK:
        FUZZ_ASSERT(m->u.join_ack.port >= 1 && m->u.join_ack.port <= 65535);
        FUZZ_ASSERT(strlen(m->u.join_ack.host) <= TB_TOPOLOGY_MAX_HOST);
        break;
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int op = (int8_t)data[0];
    const uint8_t *b = data + 1;
    size_t len = size - 1;
    tb_ctl_msg_t m;
    tbon_error_t err;
    err.msg[0] = 0;
    int rc = tb_ctl_decode_bytes(op, b, len, &m, &err);
    if (rc != 0) {
        FUZZ_ASSERT(rc == TBON_EFORMAT || rc == TBON_ENOMEM);
        FUZZ_ASSERT(strstr(err.msg, "control message") == err.msg);
        FUZZ_ASSERT(tb_ctl_info(op) == NULL || strstr(err.msg, tb_ctl_name(op)));
        return 0;
    }
    FUZZ_ASSERT(tb_ctl_info(op) != NULL && m.op == op);
    check_ranges(&m);
    tbon_packet_t *p = tb_ctl_encode(&m);
    FUZZ_ASSERT(p != NULL);
    size_t plen;
    const uint8_t *pb = tb_packet_payload(p, &plen);
    FUZZ_ASSERT(plen == len && memcmp(pb, b, len) == 0);
    FUZZ_ASSERT(tbon_packet_tag(p) == op);
    tb_ctl_msg_t again;
    FUZZ_ASSERT(tb_ctl_decode(op, p, &again, &err) == 0);
    tbon_packet_t *q = tb_ctl_encode(&again);
    size_t qlen;
    FUZZ_ASSERT(q != NULL);
    const uint8_t *qb = tb_packet_payload(q, &qlen);
    FUZZ_ASSERT(qlen == len && memcmp(qb, b, len) == 0);
    tbon_packet_unref(q);
    tbon_packet_unref(p);
    tb_ctl_msg_free(&again);
    tb_ctl_msg_free(&m);
    return 0;
}
