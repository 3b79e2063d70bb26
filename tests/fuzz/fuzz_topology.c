/* fuzz_topology.c - libFuzzer harness for the topology parsers and decoder.
 *
 * The first byte picks the text parser, the XML parser or the deserialiser for
 * the rest. Whatever parses must survive: serialise + deserialise gives an
 * equal topology with the same digest; a topology in file form (from a parser,
 * or a pristine decoded one) written as text parses back equal; and a burst of
 * mutations derived from the input keeps every derived field consistent with
 * a rebuild from scratch.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topology.h"

#define MUST(c) do { if (!(c)) { fprintf(stderr, "MUST failed: %s (line %d)\n", #c, \
                                         __LINE__); abort(); } } while (0)

static void check_wire_round_trip(const tb_topology_t *t)
{
    uint8_t *buf;
    size_t len;
    tbon_error_t err;
    MUST(tb_topology_serialize(t, &buf, &len) == 0);
    tb_topology_t *u = tb_topology_deserialize(buf, len, &err);
    if (!u)
        fprintf(stderr, "deserialize: %s\n", err.msg);
    MUST(u != NULL);
    MUST(tb_topology_equal(t, u));
    MUST(tb_topology_digest(t) == tb_topology_digest(u));
    MUST(tb_topology_num_leaves(t) == tb_topology_num_leaves(u));
    free(buf);
    tb_topology_destroy(u);
}

/* As a parser would build it: all alive, BFS ranks, roles from the shape. */
static int pristine(const tb_topology_t *t)
{
    size_t n = tb_topology_size(t);
    tbon_rank_t last = 0;
    for (tbon_rank_t r = 0; r < n; r++) {
        tbon_rank_t p = tb_topology_parent(t, r);
        tb_role_t want = r == 0 ? TB_ROLE_FE
                       : tb_topology_num_children(t, r) ? TB_ROLE_COMMNODE : TB_ROLE_BE;
        if (!tb_topology_alive(t, r) || tb_topology_incarnation(t, r) ||
            tb_topology_port(t, r) || tb_topology_role(t, r) != want)
            return 0;
        if (r > 0 && (p == TBON_RANK_NONE || p >= r || p < last))
            return 0;
        if (r > 0)
            last = p;
    }
    return 1;
}

/* t written in the XML or the text format parses back to an equal topology. */
static void check_format_round_trip(const tb_topology_t *t, int xml)
{
    char *buf;
    size_t len;
    tbon_error_t err;
    MUST((xml ? tb_topology_format_xml(t, &buf, &len)
              : tb_topology_format_text(t, &buf, &len)) == 0);
    tb_topology_t *u = xml ? tb_topology_parse_xml(buf, len, "written", &err)
                           : tb_topology_parse_text(buf, len, "written", &err);
    if (!u)
        fprintf(stderr, "reparse%s: %s\n", xml ? " xml" : "", err.msg);
    MUST(u != NULL);
    MUST(tb_topology_equal(t, u));
    tb_topology_destroy(u);
    free(buf);
}

static void check_text_round_trip(const tb_topology_t *t)
{
    char *buf;
    size_t len;
    if (tb_topology_num_children(t, 0) == 0) {
        MUST(tb_topology_format_text(t, &buf, &len) == TBON_ETOPOLOGY);
        return;
    }
    check_format_round_trip(t, 0);
    /* XML nests one element per level; libxml2 stops at 256. */
    if (tb_topology_height(t, 0) > 200)
        return;
    check_format_round_trip(t, 1);
}

static void mutate(tb_topology_t *t, const uint8_t *data, size_t size)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < size; i++)
        x = (x ^ data[i]) * 0x100000001b3ULL;
    for (int step = 0; step < 24; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        tbon_rank_t n = (tbon_rank_t)tb_topology_size(t);
        tbon_rank_t a = (tbon_rank_t)(x % n), b = (tbon_rank_t)((x >> 24) % n);
        switch ((x >> 48) % 5) {
        case 0:
            MUST(tb_topology_remove(t, a) == (a == 0 ? TBON_ETOPOLOGY : 0));
            MUST(!a || !tb_topology_alive(t, a));
            break;
        case 1: case 2: {
            int legal = a != 0 && tb_topology_alive(t, a) && tb_topology_alive(t, b) &&
                        tb_topology_role(t, b) != TB_ROLE_BE && !tb_topology_in_subtree(t, a, b);
            int rc = tb_topology_reparent(t, a, b);
            MUST(rc == (legal ? 0 : TBON_ETOPOLOGY));
            if (!rc)
                MUST(tb_topology_parent(t, a) == b &&
                     tb_topology_depth(t, a) == tb_topology_depth(t, b) + 1);
            break;
        }
        case 3: {
            tbon_rank_t r;
            int rc = tb_topology_add_child(t, b, "fuzz-join", (uint32_t)step,
                                           (x & 1) ? TB_ROLE_BE : TB_ROLE_COMMNODE, &r);
            MUST(rc == 0 || rc == TBON_ETOPOLOGY);
            break;
        }
        default:
            MUST(tb_topology_set_port(t, a, (uint16_t)(x >> 8)) == 0);
        }
    }
    check_wire_round_trip(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int which = data[0] % 3;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    tb_topology_limits_t lim = { 1u << 20, 1u << 16 };
    tbon_error_t err = { 0 };
    tb_topology_t *t;
    if (which == 0)
        t = tb_topology_parse_text_limits(body, len, "fuzz.top", &lim, &err);
    else if (which == 1)
        t = tb_topology_parse_xml_limits(body, len, "fuzz.xml", &lim, &err);
    else
        t = tb_topology_deserialize(body, len, &err);
    if (!t) {
        MUST(err.code < 0 && err.msg[0] != '\0');
        return 0;
    }
    MUST(err.code == 0);
    check_wire_round_trip(t);
    if (which != 2 || pristine(t))
        check_text_round_trip(t);
    if (tb_topology_size(t) < 5000)
        mutate(t, data, size);
    tb_topology_destroy(t);
    return 0;
}
