/* test_topgen.c - the topology generators and the tbon_topgen program (run
 * from $TBON_BUILD_DIR/bin, default build/bin, through popen). */
#include "../harness.h"

#include <stdlib.h>
#include <sys/wait.h>

#include "topo/topology.h"

/* ---- helpers ---------------------------------------------------------------- */

static size_t count_role(const tb_topology_t *t, tb_role_t role)
{
    size_t k = 0;
    for (tbon_rank_t r = 0; r < tb_topology_size(t); r++)
        k += tb_topology_role(t, r) == role;
    return k;
}

static uint32_t max_depth(const tb_topology_t *t)
{
    uint32_t d = 0;
    for (tbon_rank_t r = 0; r < tb_topology_size(t); r++)
        if (tb_topology_depth(t, r) > d)
            d = tb_topology_depth(t, r);
    return d;
}

/* Hosts round-robin in rank order, ids counted per distinct host. */
static void check_hosts(const tb_topology_t *t, const char *const *hosts, size_t nh)
{
    uint32_t next[8] = { 0 };
    for (tbon_rank_t r = 0; r < tb_topology_size(t); r++) {
        const char *h = hosts[r % nh];
        size_t first = 0;
        while (strcmp(hosts[first], h) != 0)
            first++;
        CHECK_STR(tb_topology_host(t, r), h);
        CHECK_UINT(tb_topology_local_id(t, r), next[first]++);
    }
}

static char out_buf[1 << 20], err_buf[4096];

/* Run tbon_topgen with args (shell words); stdout in out_buf, stderr in
 * err_buf; returns the exit status, or -1. */
static int topgen(const char *args)
{
    const char *b = getenv("TBON_BUILD_DIR");
    char cmd[2048], errpath[512];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", th_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s/bin/tbon_topgen' %s 2>'%s'", b && *b ? b : "build", args,
             errpath);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out_buf, 1, sizeof out_buf - 1, p);
    out_buf[n] = '\0';
    int st = pclose(p);
    FILE *e = fopen(errpath, "r");
    n = e ? fread(err_buf, 1, sizeof err_buf - 1, e) : 0;
    err_buf[n] = '\0';
    if (e)
        fclose(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *file_text(const char *path)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    if (!f)
        return "";
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static tb_topology_t *parse_out(void)
{
    tbon_error_t err = { 0 };
    tb_topology_t *t = tb_topology_parse(out_buf, strlen(out_buf), "stdout", &err);
    if (!t)
        fprintf(stderr, "    %s\n", err.msg);
    return t;
}

/* ---- generators ------------------------------------------------------------- */

TEST(gen_shape_levels)
{
    uint32_t f[] = { 2, 3, 4 };
    tb_topology_t *t = tb_topology_gen_shape(f, 3, NULL, 0, NULL);
    REQUIRE(t);
    CHECK_UINT(tb_topology_size(t), 1 + 2 + 6 + 24);
    CHECK_UINT(tb_topology_num_leaves(t), 24);
    CHECK_UINT(tb_topology_num_children(t, 0), 2);
    for (tbon_rank_t r = 1; r <= 2; r++)
        CHECK_UINT(tb_topology_num_children(t, r), 3);
    for (tbon_rank_t r = 3; r <= 8; r++)
        CHECK_UINT(tb_topology_num_children(t, r), 4);
    CHECK_UINT(tb_topology_height(t, 0), 3);
    CHECK_UINT(tb_topology_parent(t, 32), 8);
    CHECK_STR(tb_topology_host(t, 32), "localhost");
    CHECK_UINT(tb_topology_local_id(t, 32), 32);
    tb_topology_destroy(t);
}

TEST(gen_shape_errors)
{
    tbon_error_t err = { 0 };
    uint32_t zero[] = { 4, 0 }, big[] = { 4096, 4096 };
    CHECK(tb_topology_gen_shape(zero, 0, NULL, 0, &err) == NULL);
    CHECK_STR(err.msg, "a shape needs at least one level");
    CHECK(tb_topology_gen_shape(zero, 2, NULL, 0, &err) == NULL);
    CHECK_STR(err.msg, "level 2 of the shape has 0 children per node");
    CHECK(tb_topology_gen_shape(big, 2, NULL, 0, &err) == NULL);
    CHECK_INT(err.code, TBON_EINVAL);
    CHECK_STR(err.msg, "too many nodes: 16781313 (at most 16777216)");
    const char *bad[] = { "ok", "not ok" };
    CHECK(tb_topology_gen_shape(big, 1, bad, 2, &err) == NULL);
    CHECK_STR(err.msg, "bad host name \"not ok\" (letters, digits, '-', '.' and '_', starting "
              "with a letter or digit, at most 255)");
}

/* Minimal depth, at most k children, leaves all at that depth, and at every
 * level the numbers of children differ by at most one. */
static void check_fanout(uint32_t k, uint32_t n)
{
    tb_topology_t *t = tb_topology_gen_fanout(k, n, NULL, 0, NULL);
    REQUIRE(t);
    uint32_t d = 1;
    for (uint64_t cap = k; cap < n; cap *= k)
        d++;
    CHECK_UINT(tb_topology_num_leaves(t), n);
    CHECK_UINT(tb_topology_height(t, 0), d);
    uint32_t lo[32], hi[32];
    for (int i = 0; i < 32; i++) {
        lo[i] = UINT32_MAX;
        hi[i] = 0;
    }
    for (tbon_rank_t r = 0; r < tb_topology_size(t); r++) {
        uint32_t c = (uint32_t)tb_topology_num_children(t, r), dep = tb_topology_depth(t, r);
        CHECK(c <= k);
        if (c == 0) {
            CHECK_UINT(dep, d);
            continue;
        }
        lo[dep] = c < lo[dep] ? c : lo[dep];
        hi[dep] = c > hi[dep] ? c : hi[dep];
    }
    for (uint32_t i = 0; i < d; i++)
        CHECK(hi[i] - lo[i] <= 1);
    tb_topology_destroy(t);
}

TEST(gen_fanout_properties)
{
    static const uint32_t cases[][2] = {
        { 2, 1 }, { 2, 2 }, { 2, 3 }, { 2, 1000 }, { 3, 10 }, { 4, 16 }, { 4, 17 },
        { 16, 1000 }, { 32, 1024 }, { 32, 1025 }, { 7, 343 }, { 1000, 5 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_fanout(cases[i][0], cases[i][1]);
}

TEST(gen_fanout_exact)
{
    /* 10 leaves, fan-out 3: widths 10, 4, 2, 1. */
    const char *hosts[] = { "a", "b", "c" };
    tb_topology_t *t = tb_topology_gen_fanout(3, 10, hosts, 3, NULL);
    REQUIRE(t);
    char *buf;
    size_t len;
    REQUIRE(tb_topology_format_text(t, &buf, &len) == 0);
    CHECK_STR(buf, "a:0 => b:0 c:0 ;\nb:0 => a:1 b:1 ;\nc:0 => c:1 a:2 ;\n"
                   "a:1 => b:2 c:2 a:3 ;\nb:1 => b:3 c:3 a:4 ;\nc:1 => b:4 c:4 ;\n"
                   "a:2 => a:5 b:5 ;\n");
    check_hosts(t, hosts, 3);
    free(buf);
    tb_topology_destroy(t);
}

TEST(gen_fanout_errors)
{
    tbon_error_t err = { 0 };
    CHECK(tb_topology_gen_fanout(1, 4, NULL, 0, &err) == NULL);
    CHECK_STR(err.msg, "the fan-out must be at least 2 (got 1)");
    CHECK(tb_topology_gen_fanout(4, 0, NULL, 0, &err) == NULL);
    CHECK_STR(err.msg, "at least one leaf is needed");
    CHECK(tb_topology_gen_fanout(2, 16000000, NULL, 0, &err) == NULL);
    CHECK_STR(err.msg, "too many nodes: 32000007 (at most 16777216)");
}

TEST(gen_knomial_binomial_8_exact)
{
    /* Slots 0..7, binomial children: 0 -> 1 2 4, 1 -> 3 5, 2 -> 6, 3 -> 7.
     * FE (slot 0) => BE0 C1 C2 BE4; C1 => BE1 C3 BE5; C2 => BE2 BE6;
     * C3 => BE3 BE7. */
    tb_topology_t *t = tb_topology_gen_knomial(2, 8, NULL, 0, NULL);
    REQUIRE(t);
    char *buf;
    size_t len;
    REQUIRE(tb_topology_format_text(t, &buf, &len) == 0);
    CHECK_STR(buf, "localhost:0 => localhost:1 localhost:2 localhost:3 localhost:4 ;\n"
                   "localhost:2 => localhost:5 localhost:6 localhost:7 ;\n"
                   "localhost:3 => localhost:8 localhost:9 ;\n"
                   "localhost:6 => localhost:10 localhost:11 ;\n");
    CHECK_UINT(tb_topology_num_leaves(t), 8);
    CHECK_UINT(count_role(t, TB_ROLE_COMMNODE), 3);
    free(buf);
    tb_topology_destroy(t);
}

TEST(gen_knomial_properties)
{
    static const uint32_t cases[][2] = {
        { 2, 1 }, { 2, 2 }, { 2, 5 }, { 2, 1024 }, { 3, 9 }, { 3, 10 }, { 4, 100 }, { 8, 4096 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t k = cases[i][0], n = cases[i][1];
        tb_topology_t *t = tb_topology_gen_knomial(k, n, NULL, 0, NULL);
        REQUIRE(t);
        CHECK_UINT(tb_topology_num_leaves(t), n);
        /* A commnode per slot 1..n-1 that has k-nomial children. */
        size_t cn = 0;
        for (uint64_t s = 1; s < n; s++) {
            uint64_t p = 1;
            while (p <= s)
                p *= k;
            cn += s + p < n;
        }
        CHECK_UINT(tb_topology_size(t), 1 + n + cn);
        /* Every interior node starts with its own back-end. */
        for (tbon_rank_t r = 0; r < tb_topology_size(t); r++) {
            size_t nc;
            const tbon_rank_t *c = tb_topology_children(t, r, &nc);
            if (nc)
                CHECK_INT(tb_topology_role(t, c[0]), TB_ROLE_BE);
        }
        /* Depth: digits of n-1 in base k, plus one for the back-end. */
        uint32_t digits = 0;
        for (uint64_t p = 1; p < n; p *= k)
            digits++;
        CHECK(max_depth(t) <= digits + 1);
        tb_topology_destroy(t);
    }
}

TEST(gen_knomial_errors)
{
    tbon_error_t err = { 0 };
    CHECK(tb_topology_gen_knomial(1, 4, NULL, 0, &err) == NULL);
    CHECK_STR(err.msg, "the k-nomial degree must be at least 2 (got 1)");
    CHECK(tb_topology_gen_knomial(2, 0, NULL, 0, &err) == NULL);
    CHECK_STR(err.msg, "at least one leaf is needed");
}

TEST(gen_flat_and_host_round_robin)
{
    const char *hosts[] = { "a", "b", "a" };
    tb_topology_t *t = tb_topology_gen_flat(5, hosts, 3, NULL);
    REQUIRE(t);
    CHECK_UINT(tb_topology_size(t), 6);
    CHECK_UINT(tb_topology_height(t, 0), 1);
    check_hosts(t, hosts, 3);        /* a:0 b:0 a:1 a:2 b:1 a:3 */
    CHECK_UINT(tb_topology_find(t, "a", 3), 5);
    tb_topology_destroy(t);
    tbon_error_t err = { 0 };
    CHECK(tb_topology_gen_flat(0, NULL, 0, &err) == NULL);
    CHECK_STR(err.msg, "at least one leaf is needed");
    CHECK(tb_topology_gen_flat(TB_TOPOLOGY_MAX_NODES, NULL, 0, &err) == NULL);
    CHECK_STR(err.msg, "too many nodes: 16777217 (at most 16777216)");
}

/* ---- the program -------------------------------------------------------------- */

TEST(topgen_shape_4x4)
{
    CHECK_INT(topgen("--shape 4x4"), 0);
    CHECK_STR(err_buf, "");
    tb_topology_t *t = parse_out();
    REQUIRE(t);
    CHECK_UINT(tb_topology_size(t), 21);
    CHECK_UINT(tb_topology_num_leaves(t), 16);
    CHECK_UINT(count_role(t, TB_ROLE_COMMNODE), 4);
    CHECK_UINT(count_role(t, TB_ROLE_FE), 1);
    CHECK_UINT(tb_topology_height(t, 0), 2);
    tb_topology_destroy(t);
    const char *head = "# generated by: tbon_topgen --shape 4x4\n"
                       "localhost:0 => localhost:1 localhost:2 localhost:3 localhost:4 ;\n";
    CHECK(strncmp(out_buf, head, strlen(head)) == 0);
}

TEST(topgen_reproduces_the_sample_files)
{
    static const char *const cases[][2] = {
        { "--shape 1x4", "topologies/local-1x4.top" },
        { "--shape 4x4", "topologies/local-4x4.top" },
        { "--shape 8x8", "topologies/local-8x8.top" },
        { "--shape 4x4x4", "topologies/local-4x4x4.top" },
        { "--shape 32x32", "topologies/local-32x32.top" },
        { "--shape 4x4 --xml", "topologies/local-4x4.xml" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_INT(topgen(cases[i][0]), 0);
        CHECK_STR(out_buf, file_text(cases[i][1]));
    }
}

TEST(topgen_fanout_with_hosts)
{
    CHECK_INT(topgen("--fanout 3 --leaves 10 --hosts a,b,c"), 0);
    tb_topology_t *t = parse_out();
    REQUIRE(t);
    const char *hosts[] = { "a", "b", "c" };
    CHECK_UINT(tb_topology_num_leaves(t), 10);
    CHECK_UINT(tb_topology_height(t, 0), 3);
    for (tbon_rank_t r = 0; r < tb_topology_size(t); r++)
        CHECK(tb_topology_num_children(t, r) <= 3);
    check_hosts(t, hosts, 3);
    tb_topology_destroy(t);
}

TEST(topgen_knomial_and_flat)
{
    CHECK_INT(topgen("--knomial 2 --leaves 8"), 0);
    CHECK_STR(out_buf, "# generated by: tbon_topgen --knomial 2 --leaves 8\n"
                       "localhost:0 => localhost:1 localhost:2 localhost:3 localhost:4 ;\n"
                       "localhost:2 => localhost:5 localhost:6 localhost:7 ;\n"
                       "localhost:3 => localhost:8 localhost:9 ;\n"
                       "localhost:6 => localhost:10 localhost:11 ;\n");
    CHECK_INT(topgen("--flat=3 --host=n1"), 0);
    CHECK_STR(out_buf, "# generated by: tbon_topgen --flat=3 --host=n1\n"
                       "n1:0 => n1:1 n1:2 n1:3 ;\n");
    CHECK_INT(topgen("--knomial 3 --leaves 100 --hosts x,y"), 0);
    tb_topology_t *t = parse_out();
    REQUIRE(t);
    CHECK_UINT(tb_topology_num_leaves(t), 100);
    tb_topology_destroy(t);
}

TEST(topgen_hostfile_and_output_file)
{
    const char *hf = th_write_file("hosts.txt", "# cluster\nn1\n\n  n2  # second\n\tn3\r\n");
    char args[1024], out[512];
    snprintf(out, sizeof out, "%s/t.xml", th_tmpdir());
    snprintf(args, sizeof args, "--flat 5 --hostfile '%s' --xml -o '%s'", hf, out);
    CHECK_INT(topgen(args), 0);
    CHECK_STR(out_buf, "");
    CHECK_STR(err_buf, "");
    tbon_error_t err = { 0 };
    tb_topology_t *t = tb_topology_parse_file(out, &err);
    REQUIRE(t);
    const char *hosts[] = { "n1", "n2", "n3" };
    check_hosts(t, hosts, 3);
    CHECK_UINT(tb_topology_size(t), 6);
    CHECK(strstr(file_text(out), "<!-- generated by: tbon_topgen - flat 5 - hostfile ") != NULL);
    tb_topology_destroy(t);
}

TEST(topgen_help)
{
    CHECK_INT(topgen("--help"), 0);
    CHECK(strncmp(out_buf, "usage: tbon_topgen MODE [HOSTS] [--xml] [-o FILE]\n", 50) == 0);
    CHECK(strstr(out_buf, "Examples:\n") != NULL);
    CHECK_INT(topgen("-h"), 0);
}

/* One TEST per bad argument: exit 2, the exact message and the hint. */
#define HINT "Try 'tbon_topgen --help' for usage.\n"
#define BAD_ARGS(name, args, msg)                                          \
    TEST(name)                                                             \
    {                                                                      \
        CHECK_INT(topgen(args), 2);                                        \
        CHECK_STR(err_buf, "tbon_topgen: " msg "\n" HINT);                 \
        CHECK_STR(out_buf, "");                                            \
    }

BAD_ARGS(topgen_no_mode, "", "no mode: give one of --shape, --fanout, --knomial and --flat")
BAD_ARGS(topgen_bad_shape, "--shape 4y4", "--shape: \"4y4\" is not a shape like 4x4 (numbers "
         "of children per level, from 1, separated by 'x')")
BAD_ARGS(topgen_shape_zero, "--shape 4x0", "--shape: \"4x0\" is not a number from 1 to 16777216")
BAD_ARGS(topgen_shape_empty_level, "--shape 4xx4", "--shape: \"4xx4\" is not a shape like 4x4 "
         "(numbers of children per level, from 1, separated by 'x')")
BAD_ARGS(topgen_shape_too_big, "--shape 4096x4096", "too many nodes: 16781313 (at most "
         "16777216)")
BAD_ARGS(topgen_two_modes, "--shape 4x4 --flat 3", "--flat: only one of --shape, --fanout, "
         "--knomial and --flat may be given (--shape was given already)")
BAD_ARGS(topgen_fanout_without_leaves, "--fanout 4", "--fanout needs --leaves N")
BAD_ARGS(topgen_leaves_without_fanout, "--flat 3 --leaves 2", "--leaves goes with --fanout or "
         "--knomial, not --flat")
BAD_ARGS(topgen_fanout_one, "--fanout 1 --leaves 4", "--fanout: the fan-out must be at least 2 "
         "(got 1)")
BAD_ARGS(topgen_knomial_one, "--knomial 1 --leaves 4", "--knomial: the degree must be at least "
         "2 (got 1)")
BAD_ARGS(topgen_fanout_zero, "--fanout 0 --leaves 4", "--fanout: \"0\" is not a number from 1 "
         "to 16777216")
BAD_ARGS(topgen_leaves_not_a_number, "--fanout 4 --leaves abc", "--leaves: \"abc\" is not a "
         "number from 1 to 16777216")
BAD_ARGS(topgen_flat_too_big, "--flat 99999999999", "--flat: \"99999999999\" is not a number "
         "from 1 to 16777216")
BAD_ARGS(topgen_flat_negative, "--flat -3", "--flat: \"-3\" is not a number from 1 to 16777216")
BAD_ARGS(topgen_unknown_long_option, "--shape 4x4 --bogus", "unknown option \"--bogus\"")
BAD_ARGS(topgen_unknown_short_option, "--shape 4x4 -x", "unknown option -x")
BAD_ARGS(topgen_missing_value, "--shape", "option --shape needs a value")
BAD_ARGS(topgen_extra_argument, "--shape 4x4 extra", "unexpected argument \"extra\"")
BAD_ARGS(topgen_empty_host_in_list, "--flat 2 --hosts a,,b", "--hosts: bad host name \"\" in "
         "\"a,,b\" (letters, digits, '-', '.' and '_', starting with a letter or digit, at "
         "most 255 characters)")
BAD_ARGS(topgen_bad_host, "--flat 2 --host 'a b'", "--host: bad host name \"a b\" in \"a b\" "
         "(letters, digits, '-', '.' and '_', starting with a letter or digit, at most 255 "
         "characters)")
BAD_ARGS(topgen_host_with_comma, "--flat 2 --host a,b", "--host: bad host name \"a,b\" (use "
         "--hosts for a list)")
BAD_ARGS(topgen_two_host_options, "--flat 2 --host a --hosts b,c", "--hosts: only one of "
         "--host, --hosts and --hostfile may be given (--host was given already)")

TEST(topgen_missing_hostfile)
{
    char args[600];
    snprintf(args, sizeof args, "--flat 2 --hostfile '%s/nosuch'", th_tmpdir());
    CHECK_INT(topgen(args), 1);
    char want[700];
    snprintf(want, sizeof want, "tbon_topgen: cannot read the host file \"%s/nosuch\": No such "
             "file or directory\n", th_tmpdir());
    CHECK_STR(err_buf, want);
}

TEST(topgen_bad_hostfile_contents)
{
    const char *hf = th_write_file("bad.txt", "n1\n# ok\nn 2\n");
    char args[600], want[700];
    snprintf(args, sizeof args, "--flat 2 --hostfile '%s'", hf);
    CHECK_INT(topgen(args), 1);
    snprintf(want, sizeof want, "tbon_topgen: %s:3: bad host name \"n 2\" (letters, digits, '-', "
             "'.' and '_', starting with a letter or digit, at most 255 characters)\n", hf);
    CHECK_STR(err_buf, want);
    hf = th_write_file("empty.txt", "# nobody\n\n");
    snprintf(args, sizeof args, "--flat 2 --hostfile '%s'", hf);
    CHECK_INT(topgen(args), 1);
    snprintf(want, sizeof want, "tbon_topgen: %s: the host file names no hosts\n", hf);
    CHECK_STR(err_buf, want);
}

TEST(topgen_unwritable_output)
{
    char args[600], want[700];
    snprintf(args, sizeof args, "--flat 2 -o '%s/no/dir.top'", th_tmpdir());
    CHECK_INT(topgen(args), 1);
    snprintf(want, sizeof want, "tbon_topgen: %s/no/dir.top: cannot create: No such file or "
             "directory\n", th_tmpdir());
    CHECK_STR(err_buf, want);
}

/* ---- --check ------------------------------------------------------------------ */

TEST(check_describes_a_valid_file)
{
    const char *path = th_write_file("k.top",
        "# two levels\nfe:0 => a:0 a:1 ;\na:0 => b:0 b:1 b:2 ;\na:1 => b:3 ;\n");
    char args[600];
    snprintf(args, sizeof args, "--check '%s'", path);
    CHECK_INT(topgen(args), 0);
    CHECK(strstr(out_buf, "nodes:       7 (1 front-end, 2 commnodes, 4 back-ends)\n") != NULL);
    CHECK(strstr(out_buf, "depth:       2; nodes per level: 1 2 4\n") != NULL);
    CHECK(strstr(out_buf, "max fan-out: 3\n") != NULL);
    CHECK(strstr(out_buf, "hosts:       fe a b\n") != NULL);
    CHECK_STR(err_buf, "");
}

TEST(check_reports_the_first_error_and_exits_1)
{
    const char *path = th_write_file("bad.top", "fe:0 => a:0 b:0 ;\na:0 => c:0 ;\nb:0 => c:0 ;\n");
    char args[600], want[700];
    snprintf(args, sizeof args, "--check '%s'", path);
    CHECK_INT(topgen(args), 1);
    CHECK_STR(out_buf, "");
    snprintf(want, sizeof want,
             "%s:3:8: \"c:0\" has two parents: \"a:0\" (line 2) and \"b:0\" (line 3)\n", path);
    CHECK_STR(err_buf, want);
}

TEST(check_takes_no_other_option)
{
    CHECK_INT(topgen("--check x.top --xml"), 2);
    CHECK(strstr(err_buf, "--check FILE takes no other option") != NULL);
}

/* libtbon loads libxml2 only to read XML: where it cannot be loaded (here a
 * private mount namespace puts /dev/null over the library), an XML topology
 * is a clear error naming the file and the library, and the text format
 * still works. Needs root (mount) and unshare(1). */
TEST(xml_without_libxml2_is_a_clear_error)
{
    if (geteuid() != 0 || access("/usr/bin/unshare", X_OK) != 0) {
        fprintf(stderr, "    skipped: needs root and unshare(1)\n");
        return;
    }
    const char *xml = th_write_file("t.xml",
        "<topology><node host=\"fe\" id=\"0\"><node host=\"a\" id=\"0\"/></node></topology>\n");
    char errp[512];
    snprintf(errp, sizeof errp, "%s/nolib.err", th_tmpdir());
    const char *top = th_write_file("t.top", "fe:0 => a:0 ;\n");
    const char *script = th_write_file("nolib.sh",
        "lib=$(readlink -f \"$(ldconfig -p | awk '/libxml2\\.so\\.2 /{print $NF; exit}')\")\n"
        "[ -f \"$lib\" ] && mount --bind /dev/null \"$lib\" || exit 4\n"
        "\"$1\" --check \"$2\" 2>\"$4\"; [ $? = 1 ] || exit 5\n"
        "\"$1\" --check \"$3\" >/dev/null || exit 6\n");
    const char *b = getenv("TBON_BUILD_DIR");
    char cmd[3072];
    snprintf(cmd, sizeof cmd, "unshare -m sh '%s' '%s/bin/tbon_topgen' '%s' '%s' '%s'", script,
             b && *b ? b : "build", xml, top, errp);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char want[700];
    snprintf(want, sizeof want, "%s: reading an XML topology needs libxml2 (libxml2.so.2): ",
             xml);
    const char *got = file_text(errp);
    if (strncmp(got, want, strlen(want)) != 0)
        fprintf(stderr, "    got: %s", got);
    CHECK(strncmp(got, want, strlen(want)) == 0);
    /* Outside that namespace the same file reads. */
    char args[600];
    snprintf(args, sizeof args, "--check '%s'", xml);
    CHECK_INT(topgen(args), 0);
}
