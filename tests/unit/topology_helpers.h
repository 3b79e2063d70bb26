/* topology_helpers.h - what the topology tests share: parsing a test string
 * in either format (named "t.top" or "t.xml" in messages), expecting a parse
 * error with its exact message, and round trips through the writers and the
 * wire format. Header-only, included after harness.h by test_topology*.c.
 */
#ifndef TT_TOPOLOGY_HELPERS_H
#define TT_TOPOLOGY_HELPERS_H

#include <stdbool.h>
#include <stdlib.h>

#include "topo/topology.h"

typedef enum { TT_TEXT, TT_XML } tt_format_t;

/* Parse the NUL-terminated s as format f under limits lim (NULL: the
 * defaults); NULL on error, with err filled. */
static inline tb_topology_t *tt_parse_limits(tt_format_t f, const char *s,
                                             const tb_topology_limits_t *lim,
                                             tbon_error_t *err)
{
    return f == TT_XML ? tb_topology_parse_xml_limits(s, strlen(s), "t.xml", lim, err)
                       : tb_topology_parse_text_limits(s, strlen(s), "t.top", lim, err);
}

/* Parse s, which the test expects to be valid: on failure, say why on stderr
 * (the caller's REQUIRE then fails the case). The caller destroys the result. */
static inline tb_topology_t *tt_parse(tt_format_t f, const char *s)
{
    tbon_error_t err = { 0 };
    tb_topology_t *t = tt_parse_limits(f, s, NULL, &err);
    if (!t)
        fprintf(stderr, "    parse failed: %s\n", err.msg);
    return t;
}

static inline tb_topology_t *tt_parse_text(const char *text)
{
    return tt_parse(TT_TEXT, text);
}

static inline tb_topology_t *tt_parse_xml(const char *xml)
{
    return tt_parse(TT_XML, xml);
}

/* s must fail to parse under lim (NULL: the defaults) with TBON_ETOPOLOGY and
 * exactly the message msg. */
static inline void tt_expect_limit_error(tt_format_t f, const char *s,
                                         const tb_topology_limits_t *lim, const char *msg)
{
    tbon_error_t err = { 0 };
    tb_topology_t *t = tt_parse_limits(f, s, lim, &err);
    CHECK(t == NULL);
    CHECK_INT(err.code, TBON_ETOPOLOGY);
    CHECK_STR(err.msg, msg);
    tb_topology_destroy(t);
}

static inline void tt_expect_error(tt_format_t f, const char *s, const char *msg)
{
    tt_expect_limit_error(f, s, NULL, msg);
}

/* t, written by the writer of format f, must parse back to an equal topology. */
static inline void tt_writer_round_trip(const tb_topology_t *t, tt_format_t f)
{
    char *buf;
    size_t len;
    REQUIRE((f == TT_XML ? tb_topology_format_xml(t, &buf, &len)
                         : tb_topology_format_text(t, &buf, &len)) == 0);
    tb_topology_t *u = tt_parse(f, buf);
    free(buf);
    REQUIRE(u);
    CHECK(tb_topology_equal(t, u));
    tb_topology_destroy(u);
}

/* Serialise t and deserialise the bytes: the result must be equal to t, and
 * everything derived from it (digest, leaf count) must agree with t's, which
 * checks t's incrementally kept fields against ones computed from scratch. */
static inline void tt_round_trip(const tb_topology_t *t)
{
    uint8_t *buf;
    size_t len;
    tbon_error_t err = { 0 };
    REQUIRE(tb_topology_serialize(t, &buf, &len) == 0);
    tb_topology_t *u = tb_topology_deserialize(buf, len, &err);
    free(buf);
    if (!u)
        fprintf(stderr, "    %s\n", err.msg);
    REQUIRE(u);
    CHECK(tb_topology_equal(t, u));
    CHECK_INT(err.code, 0);
    CHECK_UINT(tb_topology_digest(t), tb_topology_digest(u));
    CHECK_UINT(tb_topology_num_leaves(t), tb_topology_num_leaves(u));
    tb_topology_destroy(u);
}

#endif
