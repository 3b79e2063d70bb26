/* test_topology_text.c - the MRNet text format: every syntax and structure
 * error with its exact message, the writer, round trips, files. */
#include "../harness.h"

#include <stdlib.h>
#include <unistd.h>

#include "topo/topology.h"
#include "topology_helpers.h"

/* One TEST per malformed input. */
#define BAD(name, text, msg) TEST(name) { tt_expect_error(TT_TEXT, text, msg); }

BAD(empty_file, "", "t.top:1:1: empty topology: no nodes")
BAD(only_comments_and_blanks, "# nothing here\n\n   \t# still nothing\n",
    "t.top:1:1: empty topology: no nodes")
BAD(missing_semicolon_at_end_of_file, "fe:0 => a:0\n",
    "t.top:2:1: missing ';' at the end of the statement of \"fe:0\" (line 1)")
BAD(missing_semicolon_before_next_statement, "fe:0 => a:0 ;\na:0 => b:0\nc:0 => d:0;",
    "t.top:3:1: missing ';' at the end of the statement of \"a:0\" (line 2), before the "
    "statement of \"c:0\"")
BAD(statement_without_children, "fe:0 => ;",
    "t.top:1:9: the statement of \"fe:0\" has no children (a statement lists at least one "
    "child)")
BAD(statement_without_arrow_or_children, "fe:0 ;",
    "t.top:1:6: the statement of \"fe:0\" has no children (a statement lists at least one "
    "child)")
BAD(missing_arrow, "fe:0 a:0;", "t.top:1:6: expected '=>' after \"fe:0\" but found \"a\"")
BAD(lone_equals_sign, "fe:0 = a:0;",
    "t.top:1:6: unexpected character '=' where '=>' after \"fe:0\" was expected")
BAD(missing_colon, "fe => a:0;", "t.top:1:4: expected ':' after the host \"fe\" but found '=>'")
BAD(missing_colon_in_child, "fe:0 => a:0\n  b ;",
    "t.top:2:5: expected ':' after the host \"b\" but found ';'")
BAD(missing_id, "fe: => a:0;", "t.top:1:5: expected a decimal id after \"fe:\" but found '=>'")
BAD(id_not_decimal, "fe:0 => a:1x;",
    "t.top:1:11: expected a decimal id after \"a:\" but found \"1x\"")
BAD(id_negative, "fe:0 => a:-1;",
    "t.top:1:11: unexpected character '-' where a decimal id after \"a:\" was expected")
BAD(id_missing_at_end_of_file, "fe:0 => a:",
    "t.top:1:11: expected a decimal id after \"a:\" but reached the end of the file")
BAD(id_too_large, "fe:0 => a:2147483648;",
    "t.top:1:11: id 2147483648 of host \"a\" is too large (at most 2147483647)")
BAD(id_absurdly_large, "fe:0 => a:99999999999999999999999999999;",
    "t.top:1:11: id 999999999999999999999... of host \"a\" is too large (at most 2147483647)")
BAD(unexpected_character, "fe:0 => a:0 @ ;",
    "t.top:1:13: unexpected character '@' where a child or ';' in the statement of \"fe:0\" "
    "was expected")
BAD(unexpected_control_byte, "fe:0 => a:0 \x01 ;",
    "t.top:1:13: unexpected byte 0x01 where a child or ';' in the statement of \"fe:0\" was "
    "expected")
BAD(host_starting_with_dash, "fe:0 => -a:0;",
    "t.top:1:9: unexpected character '-' where a child or ';' in the statement of \"fe:0\" "
    "was expected")
BAD(statement_starting_with_semicolon, "fe:0 => a:0;;",
    "t.top:1:13: expected a host name to start a statement but found ';'")
BAD(statement_starting_with_colon, ":0 => a:0;",
    "t.top:1:1: expected a host name to start a statement but found ':'")
BAD(child_then_arrow_in_the_middle, "fe:0 => a:0 => b:0;",
    "t.top:1:9: missing ';' at the end of the statement of \"fe:0\" (line 1), before the "
    "statement of \"a:0\"")
BAD(two_parents,
    "fe:0 => x:0 nBc:0 ;\nx:0 => nodeA:2 ;\nnBc:0 => c:0 nodeA:2 ;\n",
    "t.top:3:14: \"nodeA:2\" has two parents: \"x:0\" (line 2) and \"nBc:0\" (line 3)")
BAD(two_parents_first_from_the_front_end,
    "fe:0 =>\n  x:1 nodeA:2;\nx:1 => nodeA:2;",
    "t.top:3:8: \"nodeA:2\" has two parents: \"fe:0\" (line 2) and \"x:1\" (line 3)")
BAD(child_listed_twice, "fe:0 => a:0\n  a:0;",
    "t.top:2:3: \"a:0\" is listed twice as a child of \"fe:0\" (line 1 and line 2)")
BAD(parent_with_two_statements, "fe:0 => a:0;\n# more\nfe:0 => b:0;",
    "t.top:3:1: \"fe:0\" already has a statement (line 1); list all of its children there")
BAD(cycle_through_the_front_end, "a:0 => b:0;\nb:0 => a:0;",
    "t.top:2:8: cycle through the front-end: \"a:0\" => \"b:0\" => \"a:0\"")
BAD(node_is_its_own_child, "fe:0 => b:0; a:0 => a:0;",
    "t.top:1:21: cycle: \"a:0\" => \"a:0\" (not reachable from the front-end \"fe:0\")")
BAD(front_end_is_its_own_child, "a:0 => a:0;",
    "t.top:1:8: cycle through the front-end: \"a:0\" => \"a:0\"")
BAD(cycle_unreachable_from_the_front_end,
    "fe:0 => a:0;\nb:0 => c:0;\nc:0 => d:0 b:0;\n",
    "t.top:3:12: cycle: \"b:0\" => \"c:0\" => \"b:0\" (not reachable from the front-end "
    "\"fe:0\")")
BAD(two_roots, "fe:0 => a:0;\n\n  x:0 => c:0;",
    "t.top:3:3: two roots: \"fe:0\" (line 1) and \"x:0\" (line 3); \"x:0\" and its subtree "
    "are not reachable from the front-end")
BAD(front_end_listed_as_a_child, "a:0 => b:0;\nc:0 => a:0;",
    "t.top:2:8: the front-end \"a:0\" (the parent of the first statement) cannot be a child "
    "of \"c:0\"")

TEST(long_cycle_is_shortened_in_the_message)
{
    char text[512];
    size_t off = (size_t)snprintf(text, sizeof text, "fe:0 => a:0;\n");
    for (int i = 1; i <= 10; i++)
        off += (size_t)snprintf(text + off, sizeof text - off, "b:%d => b:%d;\n", i,
                                i % 10 + 1);
    /* b:10 => b:1 on line 11 closes the cycle. */
    tt_expect_error(TT_TEXT, text, "t.top:11:9: cycle: \"b:1\" => \"b:2\" => \"b:3\" => ... "
                    "(10 nodes) => \"b:10\" => \"b:1\" (not reachable from the front-end "
                    "\"fe:0\")");
}

TEST(host_too_long)
{
    char text[400], host[300];
    memset(host, 'h', sizeof host);
    snprintf(text, sizeof text, "fe:0 => a:0;\na:0 =>\n  %.256s:0;", host);
    tt_expect_error(TT_TEXT, text, "t.top:3:3: host name \"hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh...\" "
                    "is too long (256 characters, at most 255)");
    snprintf(text, sizeof text, "fe:0 => %.255s:0;", host);
    tb_topology_t *t = tt_parse_text(text);
    REQUIRE(t);
    CHECK_UINT(strlen(tb_topology_host(t, 1)), 255);
    tb_topology_destroy(t);
}

TEST(too_many_nodes_against_a_limit)
{
    tb_topology_limits_t lim = { 1000, 3 };
    tbon_error_t err = { 0 };
    const char *text = "fe:0 => a:0 b:0\n   c:0;";
    tt_expect_limit_error(TT_TEXT, text, &lim,
                          "t.top:2:4: too many nodes: \"c:0\" would be node 4 (at most 3)");
    lim.max_nodes = 4;
    tb_topology_t *t = tt_parse_limits(TT_TEXT, text, &lim, &err);
    CHECK(t != NULL);
    tb_topology_destroy(t);
}

TEST(too_large_against_a_limit)
{
    tb_topology_limits_t lim = { 10, 100 };
    tt_expect_limit_error(TT_TEXT, "fe:0 => a:0;", &lim,
                          "t.top:1:1: the topology is too large: 12 bytes (at most 10)");
}

TEST(file_over_one_gib_refused_before_reading)
{
    /* A sparse file: no disk space, but stat says 1 GiB + 1. */
    char path[512], want[700];
    snprintf(path, sizeof path, "%s/huge.top", th_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    REQUIRE(ftruncate(fileno(f), (off_t)TB_TOPOLOGY_MAX_BYTES + 1) == 0);
    fclose(f);
    tbon_error_t err = { 0 };
    CHECK(tb_topology_parse_file(path, &err) == NULL);
    CHECK_INT(err.code, TBON_ETOPOLOGY);
    snprintf(want, sizeof want, "%s:1:1: the topology is too large: 1073741825 bytes (at most "
             "1073741824)", path);
    CHECK_STR(err.msg, want);
}

TEST(whitespace_and_comments_anywhere_between_tokens)
{
    const char *text = "# header\r\n fe # the front-end\n :\t0\r\n=> # arrow\n a\n:\n1"
                       " a:2# no space before the comment\n;b:0=>c:0;\n"
                       "a:1 => b:0 ; # last\n";
    tb_topology_t *t = tt_parse_text(text);
    REQUIRE(t);
    CHECK_UINT(tb_topology_size(t), 5);
    CHECK_UINT(tb_topology_find(t, "c", 0), 4);
    CHECK_UINT(tb_topology_parent(t, 4), 3);
    tb_topology_destroy(t);
    /* Positions count lines after comments and columns in bytes. */
    tt_expect_error(TT_TEXT, "# c1\n# c2 with ; and => inside\n\tfe:0 => $;",
                    "t.top:3:10: unexpected character '$' where a child or ';' in the "
                    "statement of \"fe:0\" was expected");
}

TEST(host_names_and_ids_accepted)
{
    tb_topology_t *t = tt_parse_text("10.0.0.1:0 => node-1.example.org:0 Node_2:7 "
                                     "9host:2147483647;");
    REQUIRE(t);
    CHECK_STR(tb_topology_host(t, 0), "10.0.0.1");
    CHECK_STR(tb_topology_host(t, 1), "node-1.example.org");
    CHECK_STR(tb_topology_host(t, 2), "Node_2");
    CHECK_UINT(tb_topology_local_id(t, 2), 7);
    CHECK_UINT(tb_topology_local_id(t, 3), 2147483647u);
    tb_topology_destroy(t);
}

TEST(file_errors_name_the_path)
{
    tbon_error_t err = { 0 };
    const char *path = th_write_file("bad.top", "fe:0 => a:0\n");
    CHECK(tb_topology_parse_file(path, &err) == NULL);
    char want[600];
    snprintf(want, sizeof want, "%s:2:1: missing ';' at the end of the statement of \"fe:0\" "
             "(line 1)", path);
    CHECK_STR(err.msg, want);
    snprintf(want, sizeof want, "%s/nosuch.top", th_tmpdir());
    CHECK(tb_topology_parse_file(want, &err) == NULL);
    CHECK_INT(err.code, TBON_EIO);
    strcat(want, ": cannot open the topology file: No such file or directory");
    CHECK_STR(err.msg, want);
    CHECK(tb_topology_parse_file(th_tmpdir(), &err) == NULL);
    snprintf(want, sizeof want, "%s: not a regular file", th_tmpdir());
    CHECK_STR(err.msg, want);
}

TEST(parse_picks_the_format_by_the_first_character)
{
    tbon_error_t err = { 0 };
    const char *xml = " \n\t<topology><node host=\"a\" id=\"0\"><node host=\"b\" id=\"1\"/>"
                      "</node></topology>";
    tb_topology_t *t = tb_topology_parse(xml, strlen(xml), "x", &err);
    REQUIRE(t);
    CHECK_UINT(tb_topology_size(t), 2);
    tb_topology_destroy(t);
    t = tb_topology_parse("# <x>\na:0 => b:1;", 17, "x", &err);
    REQUIRE(t);
    CHECK_UINT(tb_topology_size(t), 2);
    tb_topology_destroy(t);
    const char *bom = "\xef\xbb\xbf<topology><node host=\"a\" id=\"0\"/></topology>";
    t = tb_topology_parse(bom, strlen(bom), "x", &err);
    REQUIRE(t);
    CHECK_UINT(tb_topology_size(t), 1);
    tb_topology_destroy(t);
    const char *path = th_write_file("t.xml", xml);
    t = tb_topology_parse_file(path, &err);
    REQUIRE(t);
    tb_topology_destroy(t);
}

/* ---- writer ---------------------------------------------------------------- */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

TEST(writer_reproduces_the_sample_files)
{
    const char *names[] = { "local-1x4.top", "local-4x4.top", "local-8x8.top",
                            "local-4x4x4.top", "local-32x32.top" };
    for (size_t i = 0; i < 5; i++) {
        char path[128];
        snprintf(path, sizeof path, "topologies/%s", names[i]);
        tb_topology_t *t = tb_topology_parse_file(path, NULL);
        REQUIRE(t);
        char *buf;
        size_t len;
        REQUIRE(tb_topology_format_text(t, &buf, &len) == 0);
        CHECK_UINT(len, strlen(buf));
        const char *file = slurp(path);
        REQUIRE(file);
        const char *body = strchr(file, '\n') + 1;   /* after the "# generated" line */
        CHECK_STR(buf, body);
        free(buf);
        tb_topology_destroy(t);
    }
}

TEST(writer_output_is_canonical)
{
    tb_topology_t *t = tt_parse_text("fe:0 => z:0 y:0 ;\n y:0 => q:1 q:0 ;\n z:0 => p:0 ;\n"
                                     "q:0 => r:0;");
    REQUIRE(t);
    char *buf;
    size_t len;
    REQUIRE(tb_topology_format_text(t, &buf, &len) == 0);
    CHECK_STR(buf, "fe:0 => z:0 y:0 ;\nz:0 => p:0 ;\ny:0 => q:1 q:0 ;\nq:0 => r:0 ;\n");
    free(buf);
    tt_writer_round_trip(t, TT_TEXT);
    tb_topology_destroy(t);
}

TEST(writer_wraps_long_statements)
{
    tb_topology_t *t = tb_topology_gen_flat(40, NULL, 0, NULL);
    REQUIRE(t);
    char *buf;
    size_t len;
    REQUIRE(tb_topology_format_text(t, &buf, &len) == 0);
    const char *start = "localhost:0 => localhost:1 localhost:2 localhost:3 localhost:4\n"
                        "    localhost:5 localhost:6 ";
    CHECK(strncmp(buf, start, strlen(start)) == 0);
    for (char *line = buf; *line; line = strchr(line, '\n') + 1)
        CHECK(strchr(line, '\n') - line <= 79);
    free(buf);
    tt_writer_round_trip(t, TT_TEXT);
    tb_topology_destroy(t);
}

TEST(writer_leaves_out_dead_nodes_and_orphans)
{
    tb_topology_t *t = tt_parse_text("fe:0 => a:0 b:0 ;\na:0 => c:0 c:1 ;\nb:0 => e:0 ;\n");
    REQUIRE(t);
    CHECK_INT(tb_topology_remove(t, 1), 0);
    char *buf;
    size_t len;
    REQUIRE(tb_topology_format_text(t, &buf, &len) == 0);
    CHECK_STR(buf, "fe:0 => b:0 ;\nb:0 => e:0 ;\n");
    free(buf);
    CHECK_INT(tb_topology_reparent(t, 3, 2), 0);
    REQUIRE(tb_topology_format_text(t, &buf, &len) == 0);
    CHECK_STR(buf, "fe:0 => b:0 ;\nb:0 => c:0 e:0 ;\n");
    free(buf);
    tb_topology_destroy(t);
}

TEST(writer_refuses_a_lone_front_end)
{
    tb_topology_t *t = tb_topology_new();
    REQUIRE(t);
    REQUIRE(tb_topology_add(t, "fe", 0, TBON_RANK_NONE) == 0);
    REQUIRE(tb_topology_finish(t, NULL) == 0);
    char *buf;
    size_t len;
    CHECK_INT(tb_topology_format_text(t, &buf, &len), TBON_ETOPOLOGY);
    tbon_error_t err = { 0 };
    char path[512];
    snprintf(path, sizeof path, "%s/lone.top", th_tmpdir());
    CHECK_INT(tb_topology_write_file(t, path, false, NULL, &err), TBON_ETOPOLOGY);
    char want[600];
    snprintf(want, sizeof want, "%s: a topology of the front-end alone cannot be written in "
             "the text format", path);
    CHECK_STR(err.msg, want);
    CHECK_INT(tb_topology_write_file(t, path, true, NULL, &err), 0);   /* XML can */
    tb_topology_t *u = tb_topology_parse_file(path, &err);
    REQUIRE(u);
    CHECK(tb_topology_equal(t, u));
    tb_topology_destroy(u);
    tb_topology_destroy(t);
}

TEST(write_file_with_comment_and_errors)
{
    tb_topology_t *t = tt_parse_text("fe:0 => a:0;");
    REQUIRE(t);
    tbon_error_t err = { 0 };
    char path[512];
    snprintf(path, sizeof path, "%s/out.top", th_tmpdir());
    CHECK_INT(tb_topology_write_file(t, path, false, "made\nby hand", &err), 0);
    CHECK_STR(slurp(path), "# made by hand\nfe:0 => a:0 ;\n");
    CHECK_INT(tb_topology_write_file(t, path, true, "a --b", &err), 0);
    CHECK_STR(slurp(path), "<?xml version=\"1.0\"?>\n<!-- a - b -->\n<topology>\n"
              "  <node host=\"fe\" id=\"0\">\n    <node host=\"a\" id=\"0\"/>\n"
              "  </node>\n</topology>\n");
    snprintf(path, sizeof path, "%s/no/such/dir.top", th_tmpdir());
    CHECK_INT(tb_topology_write_file(t, path, false, NULL, &err), TBON_EIO);
    char want[600];
    snprintf(want, sizeof want, "%s: cannot create: No such file or directory", path);
    CHECK_STR(err.msg, want);
    tb_topology_destroy(t);
}
