/* test_topology_xml.c - the XML format: every error with its exact message,
 * agreement with the text format, the writer and round trips. */
#include "../harness.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "topo/topology.h"
#include "topology_helpers.h"

#define BAD(name, xml, msg) TEST(name) { tt_expect_error(TT_XML, xml, msg); }
#define N(h, i) "<node host=\"" h "\" id=\"" i "\"/>"

BAD(malformed_tag_mismatch, "<topology>\n <node host=\"fe\" id=\"0\">\n</topology>\n",
    "t.xml:3:12: malformed XML: Opening and ending tag mismatch: node line 2 and topology")
BAD(malformed_not_xml, "<", "t.xml:1:2: malformed XML: StartTag: invalid element name")
BAD(malformed_extra_content, "<topology>" N("a", "0") "</topology><x/>",
    "t.xml:1:45: malformed XML: Extra content at the end of the document")
BAD(malformed_undefined_entity, "<topology>\n&foo;</topology>",
    "t.xml:2:6: malformed XML: Entity 'foo' not defined")
BAD(empty_topology, "<topology/>", "t.xml:1: empty topology: no nodes")
BAD(empty_topology_with_comment, "<?xml version=\"1.0\"?>\n<topology>\n  <!-- none -->\n"
    "</topology>\n", "t.xml:2: empty topology: no nodes")
BAD(wrong_root_element, "<tree>" N("a", "0") "</tree>",
    "t.xml:1: the root element is <tree>; a topology file has <topology>")
BAD(root_in_a_namespace, "<topology xmlns=\"urn:x\">" N("a", "0") "</topology>",
    "t.xml:1: <topology> must not be in an XML namespace")
BAD(unknown_element, "<topology>\n<node host=\"a\" id=\"0\">\n  <nod host=\"b\" id=\"1\"/>"
    "</node></topology>",
    "t.xml:3: unknown element <nod> in <node> (only <node> is allowed)")
BAD(unknown_element_at_top, "<topology><host name=\"a\"/></topology>",
    "t.xml:1: unknown element <host> in <topology> (only <node> is allowed)")
BAD(prefixed_element, "<topology><x:node xmlns:x=\"urn:x\" host=\"a\" id=\"0\"/></topology>",
    "t.xml:1: unknown element <x:node> in <topology> (only <node> is allowed)")
BAD(element_in_default_namespace, "<topology><node xmlns=\"urn:y\" host=\"a\" id=\"0\"/>"
    "</topology>", "t.xml:1: unknown element <node> in an XML namespace in <topology> "
    "(only <node> is allowed)")
BAD(unknown_attribute_on_node, "<topology>\n<node host=\"a\" id=\"0\" port=\"3\"/></topology>",
    "t.xml:2: unknown attribute \"port\" on <node> (only host and id are allowed)")
BAD(prefixed_attribute, "<topology><node host=\"a\" id=\"0\" xmlns:x=\"urn:x\" x:id=\"1\"/>"
    "</topology>", "t.xml:1: unknown attribute \"x:id\" on <node> (only host and id are "
    "allowed)")
BAD(attribute_on_topology, "<topology version=\"2\">" N("a", "0") "</topology>",
    "t.xml:1: unknown attribute \"version\" on <topology> (it takes none)")
BAD(missing_host, "<topology><node id=\"0\"/></topology>",
    "t.xml:1: <node> has no host attribute")
BAD(bad_host, "<topology>" N("a b", "0") "</topology>",
    "t.xml:1: bad host name \"a b\" (letters, digits, '-', '.' and '_', starting with a "
    "letter or digit)")
BAD(empty_host, "<topology>" N("", "0") "</topology>",
    "t.xml:1: bad host name \"\" (letters, digits, '-', '.' and '_', starting with a letter "
    "or digit)")
BAD(missing_id, "<topology><node host=\"a\"/></topology>",
    "t.xml:1: <node host=\"a\"> has no id attribute")
BAD(negative_id, "<topology>" N("a", "-1") "</topology>",
    "t.xml:1: bad id \"-1\" for host \"a\" (a decimal number from 0 to 2147483647)")
BAD(id_too_large, "<topology>" N("a", "2147483648") "</topology>",
    "t.xml:1: bad id \"2147483648\" for host \"a\" (a decimal number from 0 to 2147483647)")
BAD(id_with_space, "<topology>" N("a", " 1") "</topology>",
    "t.xml:1: bad id \" 1\" for host \"a\" (a decimal number from 0 to 2147483647)")
BAD(empty_id, "<topology>" N("a", "") "</topology>",
    "t.xml:1: bad id \"\" for host \"a\" (a decimal number from 0 to 2147483647)")
BAD(node_appears_twice, "<topology>\n<node host=\"a\" id=\"0\">\n  " N("b", "0") "\n  "
    N("b", "0") "\n</node></topology>",
    "t.xml:4: \"b:0\" appears twice (line 3 and line 4)")
BAD(front_end_appears_again_below, "<topology>\n<node host=\"a\" id=\"0\">\n  <node host=\"b\" "
    "id=\"0\">\n    " N("a", "0") "\n</node></node></topology>",
    "t.xml:4: \"a:0\" appears twice (line 2 and line 4)")
BAD(more_than_one_root, "<topology>\n" N("a", "0") "\n" N("b", "0") "\n</topology>",
    "t.xml:3: more than one root: \"a:0\" (line 2) and \"b:0\" (line 3) are both directly in "
    "<topology>")
BAD(unexpected_text, "<topology><node host=\"a\" id=\"0\">\n text\n more</node></topology>",
    "t.xml:2: unexpected text \"text\" in <node>")
BAD(escaped_text, "<topology>&amp;" N("a", "0") "</topology>",
    "t.xml:1: unexpected text \"&\" in <topology>")
BAD(doctype_refused, "<?xml version=\"1.0\"?>\n<!DOCTYPE topology [<!ENTITY h \"x\">]>\n"
    "<topology>" N("&h;", "0") "</topology>",
    "t.xml:2: DOCTYPE declarations are not allowed in a topology")
BAD(cdata_refused, "<topology><node host=\"a\" id=\"0\"><![CDATA[x]]></node></topology>",
    "t.xml:1: a CDATA section is not allowed in <node>")
BAD(not_utf8, "<topology>\xff\xfe</topology>",
    "t.xml:1:11: malformed XML: Input is not proper UTF-8, indicate encoding ! Bytes: 0xFF "
    "0xFE 0x3C 0x2F")
BAD(declared_encoding_is_ignored, "<?xml version=\"1.0\" encoding=\"UTF-16\"?><topology/>",
    "t.xml:1: empty topology: no nodes")
BAD(processing_instruction_refused, "<topology><?pi x?>" N("a", "0") "</topology>",
    "t.xml:1: a processing instruction is not allowed in <topology>")

TEST(host_too_long)
{
    char xml[512], host[300];
    memset(host, 'h', sizeof host);
    snprintf(xml, sizeof xml, "<topology><node host=\"%.256s\" id=\"0\"/></topology>", host);
    tt_expect_error(TT_XML, xml, "t.xml:1: host name \"hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh...\" is "
                    "too long (256 characters, at most 255)");
}

TEST(limits_on_nodes_and_bytes)
{
    const char *xml = "<topology>\n<node host=\"a\" id=\"0\">\n" N("b", "0") "\n" N("b", "1")
                      "\n</node></topology>";
    tb_topology_limits_t lim = { 1000, 2 };
    tt_expect_limit_error(TT_XML, xml, &lim,
                          "t.xml:4: too many nodes: \"b:1\" would be node 3 (at most 2)");
    lim = (tb_topology_limits_t){ 20, 100 };
    tt_expect_limit_error(TT_XML, xml, &lim,
                          "t.xml:1:1: the topology is too large: 100 bytes (at most 20)");
}

TEST(deep_nesting_stops_at_libxml2s_limit)
{
    /* libxml2 refuses more than 256 levels without XML_PARSE_HUGE, which we do
     * not set: deeper trees need the text format. */
    size_t depth = 300, cap = depth * 40 + 64, off = 0;
    char *xml = malloc(cap);
    REQUIRE(xml);
    off += (size_t)snprintf(xml + off, cap - off, "<topology>");
    for (size_t i = 0; i < depth; i++)
        off += (size_t)snprintf(xml + off, cap - off, "<node host=\"n\" id=\"%zu\">", i);
    for (size_t i = 0; i < depth; i++)
        off += (size_t)snprintf(xml + off, cap - off, "</node>");
    snprintf(xml + off, cap - off, "</topology>");
    tbon_error_t err = { 0 };
    CHECK(tb_topology_parse_xml(xml, strlen(xml), "t.xml", &err) == NULL);
    CHECK(strncmp(err.msg, "t.xml:1:", 8) == 0);
    CHECK(strstr(err.msg, "malformed XML: Excessive depth in document: 256") != NULL);
    free(xml);
}

TEST(libxml2_prints_nothing)
{
    fflush(stderr);
    int saved = dup(2);
    const char *path = th_write_file("stderr.txt", "");
    int fd = open(path, O_WRONLY | O_TRUNC);
    REQUIRE(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    tbon_error_t err;
    tb_topology_t *t = tb_topology_parse_xml("<a><b></a>", 10, "t.xml", &err);
    t = tb_topology_parse_xml("<?xml version=\"1.0\" encoding=\"nope\"?><a/>", 40, "t.xml",
                              &err);
    /* Documents that look like UCS-4 or UTF-16 must not reach libxml2's
     * converters, which print on their own. */
    static const char ucs4[] = "\0\0\0<\0\0\0a\0\0\0>\xff\xff\xff\xff";
    static const char utf16[] = "\xff\xfe<\0a\0>\0\0\xd8\0\0";
    t = tb_topology_parse_xml(ucs4, sizeof ucs4 - 1, "t.xml", &err);
    t = tb_topology_parse_xml(utf16, sizeof utf16 - 1, "t.xml", &err);
    fflush(stderr);
    dup2(saved, 2);
    close(fd);
    close(saved);
    CHECK(t == NULL);
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    CHECK(fgetc(f) == EOF);
    fclose(f);
}

TEST(comments_whitespace_and_quotes_accepted)
{
    tb_topology_t *t = tt_parse_xml("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                                    "<!-- a comment -->\n<topology>\n  <!-- c -->\n"
                                    "  <node id='0' host='fe'>\n\t<node host=\"a\" id=\"3\">"
                                    "</node>\r\n  </node>\n</topology>\n<!-- after -->\n");
    REQUIRE(t);
    CHECK_UINT(tb_topology_size(t), 2);
    CHECK_STR(tb_topology_host(t, 0), "fe");
    CHECK_UINT(tb_topology_local_id(t, 1), 3);
    CHECK_INT(tb_topology_role(t, 1), TB_ROLE_BE);
    tb_topology_destroy(t);
}

TEST(a_lone_front_end_is_a_topology)
{
    tb_topology_t *t = tt_parse_xml("<topology>" N("fe", "0") "</topology>");
    REQUIRE(t);
    CHECK_UINT(tb_topology_size(t), 1);
    CHECK_INT(tb_topology_role(t, 0), TB_ROLE_FE);
    CHECK_UINT(tb_topology_num_leaves(t), 0);
    tb_topology_destroy(t);
}

TEST(ranks_are_breadth_first_in_document_order)
{
    tb_topology_t *x = tt_parse_xml("<topology><node host=\"fe\" id=\"0\">"
                                    "<node host=\"z\" id=\"0\">" N("p", "0") "</node>"
                                    "<node host=\"y\" id=\"0\">" N("q", "1")
                                    "<node host=\"q\" id=\"0\">" N("r", "0") "</node>"
                                    "</node></node></topology>");
    tb_topology_t *t = tt_parse_text("fe:0 => z:0 y:0 ;\n y:0 => q:1 q:0 ;\n z:0 => p:0 ;\n"
                                     "q:0 => r:0;");
    REQUIRE(x && t);
    CHECK(tb_topology_equal(x, t));
    CHECK_UINT(tb_topology_find(x, "q", 0), 5);
    tb_topology_destroy(x);
    tb_topology_destroy(t);
}

TEST(sample_xml_equals_sample_text)
{
    tbon_error_t err = { 0 };
    tb_topology_t *x = tb_topology_parse_file("topologies/local-4x4.xml", &err);
    tb_topology_t *t = tb_topology_parse_file("topologies/local-4x4.top", &err);
    REQUIRE(x && t);
    CHECK(tb_topology_equal(x, t));
    CHECK_UINT(tb_topology_digest(x), tb_topology_digest(t));
    tb_topology_destroy(x);
    tb_topology_destroy(t);
}

TEST(writer_output_exact)
{
    tb_topology_t *t = tt_parse_text("fe:0 => a:0 b:0 ;\na:0 => c:0 c:1 ;\n");
    REQUIRE(t);
    char *buf;
    size_t len;
    REQUIRE(tb_topology_format_xml(t, &buf, &len) == 0);
    CHECK_STR(buf, "<?xml version=\"1.0\"?>\n<topology>\n"
                   "  <node host=\"fe\" id=\"0\">\n"
                   "    <node host=\"a\" id=\"0\">\n"
                   "      <node host=\"c\" id=\"0\"/>\n"
                   "      <node host=\"c\" id=\"1\"/>\n"
                   "    </node>\n"
                   "    <node host=\"b\" id=\"0\"/>\n"
                   "  </node>\n</topology>\n");
    CHECK_UINT(len, strlen(buf));
    free(buf);
    tb_topology_destroy(t);
}

TEST(writer_round_trips)
{
    const char *names[] = { "topologies/local-4x4x4.top", "topologies/local-32x32.top",
                            "topologies/local-1x4.top" };
    for (size_t i = 0; i < 3; i++) {
        tb_topology_t *t = tb_topology_parse_file(names[i], NULL);
        REQUIRE(t);
        tt_writer_round_trip(t, TT_XML);
        tb_topology_destroy(t);
    }
    /* Children in rank order, however the file listed the statements. */
    tb_topology_t *t = tt_parse_text("fe:0 => z:0 y:0 ;\n y:0 => q:1 q:0 ;\n z:0 => p:0 ;\n"
                                     "q:0 => r:0;");
    REQUIRE(t);
    tt_writer_round_trip(t, TT_XML);
    tb_topology_destroy(t);
}

TEST(writer_leaves_out_dead_nodes_and_orphans)
{
    tb_topology_t *t = tt_parse_text("fe:0 => a:0 b:0 ;\na:0 => c:0 ;\n");
    REQUIRE(t);
    CHECK_INT(tb_topology_remove(t, 1), 0);
    char *buf;
    size_t len;
    REQUIRE(tb_topology_format_xml(t, &buf, &len) == 0);
    CHECK_STR(buf, "<?xml version=\"1.0\"?>\n<topology>\n  <node host=\"fe\" id=\"0\">\n"
                   "    <node host=\"b\" id=\"0\"/>\n  </node>\n</topology>\n");
    free(buf);
    tb_topology_destroy(t);
}
