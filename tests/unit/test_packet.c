/* test_packet.c - packets: formats, pack/unpack round trips, the payload
 * codec, field access, the builder and reference counting */
#include "../harness.h"
#include "codec/packet_int.h"
#include "codec/packet_priv.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/memlimit.h"
#include "lib/sanitizer.h"

/* The out-of-memory cases limit the address space. */
TH_TSAN_MALLOC_MAY_FAIL()

/* ---- helpers ---- */

/* A malloc'd copy of a payload of exactly len bytes, so that ASan catches a
 * decoder reading one byte too far. */
static uint8_t *dup_bytes(const void *b, size_t len)
{
    uint8_t *c = malloc(len ? len : 1);
    if (len)
        memcpy(c, b, len);
    return c;
}

/* Decode p's own payload; the copy is exact-size. */
static tbon_packet_t *redecode(const tbon_packet_t *p, tbon_error_t *err)
{
    size_t len;
    const uint8_t *b = tb_packet_payload(p, &len);
    uint8_t *c = dup_bytes(b, len);
    tbon_packet_t *q = tb_packet_decode(c, len, tbon_packet_tag(p), 5, 6, err);
    free(c);
    return q;
}

/* Decoding must fail with TBON_EFORMAT and a message containing want (if
 * not NULL). */
static int decode_fails(const void *b, size_t len, const char *want)
{
    tbon_error_t err = {0};
    uint8_t *c = dup_bytes(b, len);
    tbon_packet_t *p = tb_packet_decode(c, len, 1, 0, 0, &err);
    free(c);
    if (p) {
        tbon_packet_unref(p);
        return 0;
    }
    if (err.code != TBON_EFORMAT || !err.msg[0])
        return 0;
    if (want && !strstr(err.msg, want)) {
        fprintf(stderr, "    message \"%s\" lacks \"%s\"\n", err.msg, want);
        return 0;
    }
    return 1;
}

static int same_payload(const tbon_packet_t *a, const tbon_packet_t *b)
{
    size_t la, lb;
    const uint8_t *pa = tb_packet_payload(a, &la), *pb = tb_packet_payload(b, &lb);
    return la == lb && memcmp(pa, pb, la) == 0;
}

/* Build a raw payload: u16 format length, the format, then the values. */
static size_t raw_payload(uint8_t *out, const char *fmt, const void *vals, size_t vlen)
{
    size_t fl = strlen(fmt);
    out[0] = (uint8_t)fl;
    out[1] = (uint8_t)(fl >> 8);
    memcpy(out + 2, fmt, fl);
    if (vlen)
        memcpy(out + 2 + fl, vals, vlen);
    return 2 + fl + vlen;
}

static uint64_t dbits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static double bitsd(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- formats ---- */

TEST(format_canonical_forms)
{
    static const struct { const char *in, *out; } cases[] = {
        {"", ""}, {"   \t\n", ""}, {"%d", "%d"}, {"%d%s", "%d %s"},
        {" %d\t%s\n", "%d %s"}, {"%d   %s  ", "%d %s"}, {"%ld%uld%lf", "%ld %uld %lf"},
        {"\v%c\f%uc\r%hd %uhd", "%c %uc %hd %uhd"},
        {"%ac%auc%ahd%auhd%ad%aud%ald%auld%af%alf%as",
         "%ac %auc %ahd %auhd %ad %aud %ald %auld %af %alf %as"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_INT(tb_format_parse(cases[i].in, NULL, 0, NULL, NULL), 0);
    /* Then as packets, with arguments for each format. */
    tbon_packet_t *p = tbon_packet_new(1, "");
    REQUIRE(p);
    CHECK_STR(tbon_packet_format(p), "");
    tbon_packet_unref(p);
    p = tbon_packet_new(1, "   \t\n");
    REQUIRE(p);
    CHECK_STR(tbon_packet_format(p), "");
    tbon_packet_unref(p);
    p = tbon_packet_new(1, " %d\t%s\n", 3, "x");
    REQUIRE(p);
    CHECK_STR(tbon_packet_format(p), "%d %s");
    tbon_packet_unref(p);
    p = tbon_packet_new(1, "%ld%uld%lf", (int64_t)1, (uint64_t)2, 3.0);
    REQUIRE(p);
    CHECK_STR(tbon_packet_format(p), "%ld %uld %lf");
    tbon_packet_unref(p);
    p = tbon_packet_new(1, "\v%c\f%uc\r%hd %uhd", 'a', 1, 2, 3);
    REQUIRE(p);
    CHECK_STR(tbon_packet_format(p), "%c %uc %hd %uhd");
    tbon_packet_unref(p);
    p = tbon_packet_new(1, "%ac%auc%ahd%auhd%ad%aud%ald%auld%af%alf%as",
                        NULL, (size_t)0, NULL, (size_t)0, NULL, (size_t)0, NULL, (size_t)0,
                        NULL, (size_t)0, NULL, (size_t)0, NULL, (size_t)0, NULL, (size_t)0,
                        NULL, (size_t)0, NULL, (size_t)0, NULL, (size_t)0);
    REQUIRE(p);
    CHECK_STR(tbon_packet_format(p), cases[8].out);
    tbon_packet_unref(p);
}

TEST(format_whitespace_variants_unpack)
{
    tbon_packet_t *p = tbon_packet_new(3, "%d%s", 42, "hi");
    REQUIRE(p);
    const char *fmts[] = {"%d %s", "%d%s", "  %d\t\t%s  ", "\n%d\n%s\n"};
    for (size_t i = 0; i < 4; i++) {
        int32_t d = 0;
        char *s = NULL;
        CHECK_INT(tbon_packet_unpack(p, fmts[i], &d, &s), 0);
        CHECK_INT(d, 42);
        CHECK_STR(s, "hi");
        free(s);
        CHECK_INT(tb_packet_format_matches(p, fmts[i]), 1);
    }
    tbon_packet_unref(p);
}

TEST(format_bad_ones_give_null)
{
    static const char *const bad[] = {
        "%", "%a", "%u", "%au", "%x", "%uf", "%ulf", "%us", "%aus", "%auf", "%aulf",
        "%l", "%h", "%hh", "%hhd", "%lld", "%llf", "%lu", "%hu", "%hf", "%hdx", "d",
        "%d,%d", "%d x", "%%", "%ad%", "% d", "%D", "%S", "%LF", "%ua", "%aa",
        "%uud", "%lhd", "%a d", "%i", "%p", "%n", "%d%", "x%d", "%d\x01", "%c%",
        "%ld 5", "%5d", "%-d", "%.s",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* Format errors are found before any argument is read. */
        tbon_packet_t *p = tbon_packet_new(1, bad[i]);
        if (p)
            fprintf(stderr, "    format \"%s\" was accepted\n", bad[i]);
        CHECK(p == NULL);
        tbon_packet_unref(p);
        size_t n;
        tbon_error_t err = {0};
        CHECK_INT(tb_format_parse(bad[i], NULL, 0, &n, &err), TBON_EFORMAT);
        CHECK_INT(err.code, TBON_EFORMAT);
        CHECK(strstr(err.msg, "bad conversion at character") != NULL);
    }
    CHECK(tbon_packet_new(1, NULL) == NULL);
    CHECK_INT(tb_format_parse(NULL, NULL, 0, NULL, NULL), TBON_EFORMAT);
}

TEST(format_error_says_where)
{
    tbon_error_t err = {0};
    CHECK_INT(tb_format_parse("%d %q", NULL, 0, NULL, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "packet format \"%d %q\": bad conversion at character 5");
    CHECK(tbon_packet_new(1, "%d %uf") == NULL);
    CHECK_INT(tb_format_parse("%d %uf", NULL, 0, NULL, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "packet format \"%d %uf\": bad conversion at character 4");
}

static tbon_packet_t *create_err(tbon_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tbon_packet_t *p = tb_packet_vcreate(1, fmt, ap, err);
    va_end(ap);
    return p;
}

static tbon_packet_t *vnew_wrap(int tag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tbon_packet_t *p = tbon_packet_vnew(tag, fmt, ap);
    va_end(ap);
    return p;
}

static int vunpack_wrap(const tbon_packet_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = tbon_packet_vunpack(p, fmt, ap);
    va_end(ap);
    return rc;
}

TEST(va_list_variants)
{
    tbon_packet_t *p = vnew_wrap(5, "%s %ald", "va", (const int64_t[]){-9, 9}, (size_t)2);
    REQUIRE(p);
    CHECK_STR(tbon_packet_format(p), "%s %ald");
    char *s = NULL;
    int64_t *a = NULL;
    size_t n = 0;
    CHECK_INT(vunpack_wrap(p, "%s%ald", &s, &a, &n), 0);
    CHECK_STR(s, "va");
    REQUIRE(n == 2 && a);
    CHECK(a[0] == -9 && a[1] == 9);
    free(s);
    free(a);
    CHECK_INT(vunpack_wrap(p, "%s", &s), TBON_EFORMAT);
    CHECK(vnew_wrap(5, "%s %q") == NULL);
    tbon_packet_unref(p);
}

TEST(format_too_long)
{
    /* 21845 "%c" are 65534 canonical characters: the limit is 65535. */
    size_t n = 21846;
    char *fmt = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(fmt + 2 * i, "%c", 2);
    fmt[2 * n] = '\0';
    tbon_error_t err = {0};
    CHECK(create_err(&err, fmt) == NULL);   /* rejected before reading args */
    CHECK_INT(err.code, TBON_EFORMAT);
    CHECK(strstr(err.msg, "65537 characters") != NULL);
    free(fmt);
    /* The same through the builder. */
    struct tb_field *f = calloc(n, sizeof *f);
    for (size_t i = 0; i < n; i++)
        f[i] = (struct tb_field){TB_F_C, 1, (const uint8_t *)"x", 1};
    CHECK(tb_packet_build(1, f, n, &err) == NULL);
    CHECK_STR(err.msg, "a packet of 21846 fields has a format longer than 65535 characters");
    tbon_packet_t *p = tb_packet_build(1, f, n - 1, &err);   /* exactly at the limit */
    REQUIRE(p);
    CHECK_UINT(strlen(tbon_packet_format(p)), 65534);
    tbon_error_t e2;
    tbon_packet_t *q = redecode(p, &e2);
    REQUIRE(q);
    CHECK(same_payload(p, q));
    tbon_packet_unref(q);
    tbon_packet_unref(p);
    free(f);
}

TEST(format_parse_counts_and_cap)
{
    enum tb_ftype t[3] = {TB_F_COUNT, TB_F_COUNT, TB_F_COUNT};
    size_t n = 0;
    CHECK_INT(tb_format_parse("%as %uhd %lf %c", t, 2, &n, NULL), 0);
    CHECK_UINT(n, 4);
    CHECK_INT(t[0], TB_F_AS);
    CHECK_INT(t[1], TB_F_UHD);
    CHECK_INT(t[2], TB_F_COUNT);
    CHECK_INT(tb_format_parse("", t, 3, &n, NULL), 0);
    CHECK_UINT(n, 0);
}

TEST(ftype_helpers)
{
    static const char *const names[TB_F_COUNT] = {
        "%c", "%uc", "%hd", "%uhd", "%d", "%ud", "%ld", "%uld", "%f", "%lf", "%s",
        "%ac", "%auc", "%ahd", "%auhd", "%ad", "%aud", "%ald", "%auld", "%af",
        "%alf", "%as"};
    static const size_t sizes[TB_F_COUNT] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 1,
                                             1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 0};
    static const int sgn[11] = {1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 0};
    for (int t = 0; t < TB_F_COUNT; t++) {
        CHECK_STR(tb_ftype_name((enum tb_ftype)t), names[t]);
        CHECK_UINT(tb_ftype_elem_size((enum tb_ftype)t), sizes[t]);
        CHECK_INT(tb_ftype_is_array((enum tb_ftype)t), t >= TB_F_AC);
        CHECK_INT(tb_ftype_elem((enum tb_ftype)t), t >= TB_F_AC ? t - TB_F_AC : t);
        int e = t % TB_F_AC;
        CHECK_INT(tb_ftype_is_float((enum tb_ftype)t), e == TB_F_F || e == TB_F_LF);
        CHECK_INT(tb_ftype_is_signed((enum tb_ftype)t), sgn[e]);
        /* Each name parses back to its type. */
        enum tb_ftype back;
        size_t n;
        CHECK_INT(tb_format_parse(names[t], &back, 1, &n, NULL), 0);
        CHECK_UINT(n, 1);
        CHECK_INT(back, t);
    }
    CHECK_STR(tb_ftype_name(TB_F_COUNT), "?");
    CHECK_UINT(tb_ftype_elem_size(TB_F_COUNT), 0);
    CHECK_INT(tb_ftype_is_array(TB_F_COUNT), 0);
}

/* ---- scalar round trips ---- */

TEST(scalars_extremes_roundtrip)
{
    tbon_packet_t *p = tbon_packet_new(
        TBON_FIRST_APP_TAG, "%c %c %uc %uc %hd %hd %uhd %d %d %ud %ld %ld %uld %uld",
        (char)-128, 127, 0, 255, INT16_MIN, INT16_MAX, UINT16_MAX, INT32_MIN,
        INT32_MAX, UINT32_MAX, INT64_MIN, INT64_MAX, (uint64_t)0, UINT64_MAX);
    REQUIRE(p);
    char c1, c2;
    unsigned char uc1, uc2;
    int16_t h1, h2;
    uint16_t uh;
    int32_t d1, d2;
    uint32_t ud;
    int64_t l1, l2;
    uint64_t ul1 = 7, ul2;
    CHECK_INT(tbon_packet_unpack(p, "%c %c %uc %uc %hd %hd %uhd %d %d %ud %ld %ld %uld %uld",
                                 &c1, &c2, &uc1, &uc2, &h1, &h2, &uh, &d1, &d2, &ud,
                                 &l1, &l2, &ul1, &ul2), 0);
    CHECK_INT((signed char)c1, -128);
    CHECK_INT(c2, 127);
    CHECK_UINT(uc1, 0);
    CHECK_UINT(uc2, 255);
    CHECK_INT(h1, INT16_MIN);
    CHECK_INT(h2, INT16_MAX);
    CHECK_UINT(uh, UINT16_MAX);
    CHECK_INT(d1, INT32_MIN);
    CHECK_INT(d2, INT32_MAX);
    CHECK_UINT(ud, UINT32_MAX);
    CHECK(l1 == INT64_MIN);
    CHECK(l2 == INT64_MAX);
    CHECK_UINT(ul1, 0);
    CHECK(ul2 == UINT64_MAX);
    tbon_packet_unref(p);
}

TEST(scalars_exact_encoding)
{
    /* The wire bytes are fixed: little-endian whatever the host. */
    tbon_packet_t *p = tbon_packet_new(1, "%hd %s %ud %lf %f", -2, "ab", 0x01020304u,
                                       1.0, -2.0);
    REQUIRE(p);
    static const uint8_t want[] = {
        17, 0, '%', 'h', 'd', ' ', '%', 's', ' ', '%', 'u', 'd', ' ', '%', 'l', 'f',
        ' ', '%', 'f',
        0xfe, 0xff, 2, 0, 0, 0, 'a', 'b', 4, 3, 2, 1,
        0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0xc0};
    size_t len;
    const uint8_t *b = tb_packet_payload(p, &len);
    CHECK_UINT(len, sizeof want);
    CHECK_MEM(b, want, sizeof want);
    tbon_packet_unref(p);

    p = tbon_packet_new(1, "%ald %as", (const int64_t[]){-2}, (size_t)1,
                        (const char *const[]){"x", ""}, (size_t)2);
    REQUIRE(p);
    static const uint8_t want2[] = {
        8, 0, '%', 'a', 'l', 'd', ' ', '%', 'a', 's',
        1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        2, 0, 0, 0, 1, 0, 0, 0, 'x', 0, 0, 0, 0};
    b = tb_packet_payload(p, &len);
    CHECK_UINT(len, sizeof want2);
    CHECK_MEM(b, want2, sizeof want2);
    tbon_packet_unref(p);

    p = tbon_packet_new(1, "");
    REQUIRE(p);
    b = tb_packet_payload(p, &len);
    CHECK_UINT(len, 2);
    CHECK(b[0] == 0 && b[1] == 0);
    tbon_packet_unref(p);
}

TEST(floats_special_values)
{
    double qnan = bitsd(0x7ff8000000000123ull), nnan = bitsd(0xfff0000000000001ull);
    tbon_packet_t *p = tbon_packet_new(1, "%lf %lf %lf %lf %lf %lf %lf %f %f %f %f %f %f",
                                       qnan, nnan, INFINITY, -INFINITY, -0.0, DBL_MIN / 4,
                                       DBL_MAX, (double)bitsf(0x7fc00123u), (double)INFINITY,
                                       -(double)INFINITY, -0.0, (double)FLT_MAX,
                                       (double)(FLT_MIN / 8));
    REQUIRE(p);
    double d[7];
    float f[6];
    CHECK_INT(tbon_packet_unpack(p, "%lf %lf %lf %lf %lf %lf %lf %f %f %f %f %f %f",
                                 &d[0], &d[1], &d[2], &d[3], &d[4], &d[5], &d[6],
                                 &f[0], &f[1], &f[2], &f[3], &f[4], &f[5]), 0);
    CHECK_UINT(dbits(d[0]), 0x7ff8000000000123ull);
    CHECK_UINT(dbits(d[1]), 0xfff0000000000001ull);   /* signalling NaN kept */
    CHECK(isinf(d[2]) && d[2] > 0);
    CHECK(isinf(d[3]) && d[3] < 0);
    CHECK_UINT(dbits(d[4]), 0x8000000000000000ull);
    CHECK(d[5] == DBL_MIN / 4);
    CHECK(d[6] == DBL_MAX);
    CHECK(isnan(f[0]));
    CHECK(isinf(f[1]) && f[1] > 0);
    CHECK(isinf(f[2]) && f[2] < 0);
    CHECK_UINT(fbits(f[3]), 0x80000000u);
    CHECK(f[4] == FLT_MAX);
    CHECK(f[5] == FLT_MIN / 8);
    tbon_packet_unref(p);

    /* Arrays copy bit patterns without any conversion, even signalling NaNs. */
    uint32_t fb[4] = {0x7f800001u, 0xffc12345u, 0x80000000u, 0x00000001u};
    uint64_t db[3] = {0x7ff0000000000001ull, 0xfff8000000000000ull, 1};
    float fa[4];
    double da[3];
    for (int i = 0; i < 4; i++)
        fa[i] = bitsf(fb[i]);
    for (int i = 0; i < 3; i++)
        da[i] = bitsd(db[i]);
    p = tbon_packet_new(1, "%af %alf", fa, (size_t)4, da, (size_t)3);
    REQUIRE(p);
    float *fo;
    double *dout;
    size_t nf, nd;
    CHECK_INT(tbon_packet_unpack(p, "%af %alf", &fo, &nf, &dout, &nd), 0);
    CHECK_UINT(nf, 4);
    CHECK_UINT(nd, 3);
    for (int i = 0; i < 4; i++)
        CHECK_UINT(fbits(fo[i]), fb[i]);
    for (int i = 0; i < 3; i++)
        CHECK_UINT(dbits(dout[i]), db[i]);
    free(fo);
    free(dout);
    tbon_packet_unref(p);
}

/* ---- arrays ---- */

TEST(arrays_every_type_roundtrip)
{
    const char ac[] = {(char)-128, 0, 127};
    const unsigned char auc[] = {0, 1, 255};
    const int16_t ahd[] = {INT16_MIN, -1, INT16_MAX};
    const uint16_t auhd[] = {0, 1, UINT16_MAX};
    const int32_t ad[] = {INT32_MIN, -1, INT32_MAX};
    const uint32_t aud[] = {0, 0x80000000u, UINT32_MAX};
    const int64_t ald[] = {INT64_MIN, -1, INT64_MAX};
    const uint64_t auld[] = {0, 0x8000000000000000ull, UINT64_MAX};
    const float af[] = {-1.5f, 0.0f, FLT_MAX};
    const double alf[] = {-DBL_MAX, 0.25, DBL_MIN};
    const char *const as[] = {"first", "", "third string"};
    tbon_packet_t *p = tbon_packet_new(
        9, "%ac %auc %ahd %auhd %ad %aud %ald %auld %af %alf %as",
        ac, (size_t)3, auc, (size_t)3, ahd, (size_t)3, auhd, (size_t)3, ad, (size_t)3,
        aud, (size_t)3, ald, (size_t)3, auld, (size_t)3, af, (size_t)3, alf, (size_t)3,
        as, (size_t)3);
    REQUIRE(p);
    char *oac; unsigned char *oauc; int16_t *oahd; uint16_t *oauhd; int32_t *oad;
    uint32_t *oaud; int64_t *oald; uint64_t *oauld; float *oaf; double *oalf; char **oas;
    size_t n[11];
    CHECK_INT(tbon_packet_unpack(p, "%ac %auc %ahd %auhd %ad %aud %ald %auld %af %alf %as",
                                 &oac, &n[0], &oauc, &n[1], &oahd, &n[2], &oauhd, &n[3],
                                 &oad, &n[4], &oaud, &n[5], &oald, &n[6], &oauld, &n[7],
                                 &oaf, &n[8], &oalf, &n[9], &oas, &n[10]), 0);
    for (int i = 0; i < 11; i++)
        CHECK_UINT(n[i], 3);
    CHECK_MEM(oac, ac, sizeof ac);
    CHECK_MEM(oauc, auc, sizeof auc);
    CHECK_MEM(oahd, ahd, sizeof ahd);
    CHECK_MEM(oauhd, auhd, sizeof auhd);
    CHECK_MEM(oad, ad, sizeof ad);
    CHECK_MEM(oaud, aud, sizeof aud);
    CHECK_MEM(oald, ald, sizeof ald);
    CHECK_MEM(oauld, auld, sizeof auld);
    CHECK_MEM(oaf, af, sizeof af);
    CHECK_MEM(oalf, alf, sizeof alf);
    for (int i = 0; i < 3; i++) {
        CHECK_STR(oas[i], as[i]);
        free(oas[i]);
    }
    free(oac); free(oauc); free(oahd); free(oauhd); free(oad); free(oaud);
    free(oald); free(oauld); free(oaf); free(oalf); free(oas);
    tbon_packet_unref(p);
}

TEST(arrays_empty_are_null)
{
    int32_t one = 5;
    /* A NULL or a real pointer with length 0 both give an empty array. */
    tbon_packet_t *p = tbon_packet_new(1, "%ad %ad %as %as %s", NULL, (size_t)0, &one,
                                       (size_t)0, NULL, (size_t)0,
                                       (const char *const[]){"x"}, (size_t)0, "");
    REQUIRE(p);
    int32_t *a1 = &one, *a2 = &one;
    char **s1 = (char **)&p, **s2 = (char **)&p, *e = NULL;
    size_t n1 = 9, n2 = 9, n3 = 9, n4 = 9;
    CHECK_INT(tbon_packet_unpack(p, "%ad %ad %as %as %s", &a1, &n1, &a2, &n2, &s1, &n3,
                                 &s2, &n4, &e), 0);
    CHECK(a1 == NULL && a2 == NULL && s1 == NULL && s2 == NULL);
    CHECK(n1 == 0 && n2 == 0 && n3 == 0 && n4 == 0);
    REQUIRE(e != NULL);   /* an empty string is still a string */
    CHECK_STR(e, "");
    free(e);
    size_t len;
    tb_packet_payload(p, &len);
    CHECK_UINT(len, 2 + strlen("%ad %ad %as %as %s") + 5 * 4);
    tbon_packet_unref(p);
}

TEST(arrays_bad_arguments_give_null)
{
    tbon_error_t err = {0};
    CHECK(tbon_packet_new(1, "%ad", NULL, (size_t)1) == NULL);
    CHECK(create_err(&err, "%d %alf", 1, NULL, (size_t)2) == NULL);
    CHECK_INT(err.code, TBON_EINVAL);
    CHECK_STR(err.msg, "packet field 2 (%alf) is a NULL array of 2 elements");
    CHECK(create_err(&err, "%s", NULL) == NULL);
    CHECK_STR(err.msg, "packet field 1 (%s) is a NULL string");
    CHECK(create_err(&err, "%as", NULL, (size_t)3) == NULL);
    CHECK_STR(err.msg, "packet field 1 (%as) is a NULL array of 3 strings");
    CHECK(create_err(&err, "%as", (const char *const[]){"a", NULL}, (size_t)2) == NULL);
    CHECK_STR(err.msg, "packet field 1 (%as): string 1 is NULL");
    /* More than UINT32_MAX elements: refused before the pointer is read. */
    char c = 0;
    CHECK(create_err(&err, "%ac", &c, (size_t)UINT32_MAX + 1) == NULL);
    CHECK(strstr(err.msg, "more than 4294967295 elements") != NULL);
    CHECK(create_err(&err, "%as", (const char *const[]){"a"}, (size_t)UINT32_MAX + 1) == NULL);
    CHECK_INT(err.code, TBON_EINVAL);
    /* 600M int64 elements: 4.8 GB, more than a payload may hold. */
    CHECK(create_err(&err, "%ald", &c, (size_t)600000000) == NULL);
    CHECK(strstr(err.msg, "larger than 4294967295 bytes") != NULL);
}

TEST(big_string_1mib)
{
    size_t n = 1 << 20;
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        s[i] = (char)('a' + i % 26);
    s[n] = '\0';
    tbon_packet_t *p = tbon_packet_new(1, "%s %d", s, 7);
    REQUIRE(p);
    tbon_error_t err;
    tbon_packet_t *q = redecode(p, &err);
    REQUIRE(q);
    char *o = NULL;
    int32_t d = 0;
    CHECK_INT(tbon_packet_unpack(q, "%s %d", &o, &d), 0);
    REQUIRE(o);
    CHECK_UINT(strlen(o), n);
    CHECK(strcmp(o, s) == 0);
    CHECK_INT(d, 7);
    free(o);
    free(s);
    tbon_packet_unref(q);
    tbon_packet_unref(p);
}

TEST(big_string_array_10000)
{
    size_t n = 10000;
    char **strs = malloc(n * sizeof *strs);
    for (size_t i = 0; i < n; i++) {
        strs[i] = malloc(16);
        snprintf(strs[i], 16, "s%zu", i * 7919 % 100003);
        if (i % 100 == 0)
            strs[i][0] = '\0';
    }
    tbon_packet_t *p = tbon_packet_new(1, "%as", (const char *const *)strs, n);
    REQUIRE(p);
    tbon_error_t err;
    tbon_packet_t *q = redecode(p, &err);
    REQUIRE(q);
    char **o = NULL;
    size_t on = 0;
    CHECK_INT(tbon_packet_unpack(q, "%as", &o, &on), 0);
    CHECK_UINT(on, n);
    REQUIRE(o);
    for (size_t i = 0; i < n; i++) {
        CHECK(strcmp(o[i], strs[i]) == 0);
        free(o[i]);
        free(strs[i]);
    }
    free(o);
    free(strs);
    size_t cnt;
    CHECK(tb_packet_field(q, 0, &cnt) != NULL);
    CHECK_UINT(cnt, n);
    tbon_packet_unref(q);
    tbon_packet_unref(p);
}

#define S4(a, i) a[i], a[i + 1], a[i + 2], a[i + 3]
#define S40(a) S4(a, 0), S4(a, 4), S4(a, 8), S4(a, 12), S4(a, 16), S4(a, 20), \
               S4(a, 24), S4(a, 28), S4(a, 32), S4(a, 36)
#define F4 "%s %d "
#define F20 F4 F4 F4 F4 F4 F4 F4 F4 F4 F4
#define F80 F20 F20 F20 F20

TEST(many_fields)
{
    /* 80 fields, 40 of them strings: past the stack fast paths of both
     * tbon_packet_new and tbon_packet_unpack. */
    char buf[40][16];
    const char *s[40];
    int32_t d[40];
    for (int i = 0; i < 40; i++) {
        snprintf(buf[i], sizeof buf[i], "v%d", i);
        s[i] = buf[i];
        d[i] = i * -1000003;
    }
#define A2(i) s[i], d[i]
#define A8(i) A2(i), A2(i + 1), A2(i + 2), A2(i + 3)
    tbon_packet_t *p = tbon_packet_new(1, F80, A8(0), A8(4), A8(8), A8(12), A8(16),
                                       A8(20), A8(24), A8(28), A8(32), A8(36));
    REQUIRE(p);
    CHECK_UINT(tb_packet_nfields(p), 80);
    char *os[40];
    int32_t od[40];
#define O2(i) &os[i], &od[i]
#define O8(i) O2(i), O2(i + 1), O2(i + 2), O2(i + 3)
    CHECK_INT(tbon_packet_unpack(p, F80, O8(0), O8(4), O8(8), O8(12), O8(16), O8(20),
                                 O8(24), O8(28), O8(32), O8(36)), 0);
    for (int i = 0; i < 40; i++) {
        CHECK_STR(os[i], s[i]);
        CHECK_INT(od[i], d[i]);
        free(os[i]);
    }
    tbon_error_t err;
    tbon_packet_t *q = redecode(p, &err);
    REQUIRE(q);
    CHECK(same_payload(p, q));
    tbon_packet_unref(q);
    tbon_packet_unref(p);

    /* 12000 fields through the builder, decoded again. */
    size_t n = 12000;
    struct tb_field *f = calloc(n, sizeof *f);
    uint8_t *vals = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        f[i].type = i % 2 ? TB_F_UHD : TB_F_S;
        vals[2 * i] = (uint8_t)i;
        vals[2 * i + 1] = (uint8_t)(i >> 8);
        f[i].data = vals + 2 * i;
        f[i].count = f[i].size = 2;
        if (i % 2)
            f[i].count = 1;
    }
    p = tb_packet_build(1, f, n, &err);
    REQUIRE(p);
    q = redecode(p, &err);
    REQUIRE(q);
    CHECK(same_payload(p, q));
    CHECK_UINT(tb_packet_nfields(q), n);
    size_t cnt;
    const uint8_t *v = tb_packet_field(q, 11999, &cnt);
    CHECK_UINT(cnt, 1);
    CHECK_UINT(tb_elem_get_u64(TB_F_UHD, v), 11999);
    free(f);
    free(vals);
    tbon_packet_unref(q);
    tbon_packet_unref(p);
}

/* ---- unpack errors ---- */

TEST(unpack_mismatch_leaves_outputs)
{
    tbon_packet_t *p = tbon_packet_new(1, "%d %s %ad", 5, "str", (const int32_t[]){1}, (size_t)1);
    REQUIRE(p);
    static const char *const wrong[] = {
        "%ud %s %ad", "%d %s", "%d %s %ad %d", "%d %as %ad", "%d %s %aud", "",
        "%d %s %ad%", "%d %s %q", "%d%s%ald",
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        int32_t d = -77;
        char *s = (char *)"keep";
        int32_t *a = (int32_t *)&d;
        size_t n = 99;
        int32_t extra = -5;
        CHECK_INT(tbon_packet_unpack(p, wrong[i], &d, &s, &a, &n, &extra), TBON_EFORMAT);
        CHECK_INT(d, -77);
        CHECK_STR(s, "keep");
        CHECK(a == &d);
        CHECK_UINT(n, 99);
        CHECK_INT(extra, -5);
        CHECK_INT(tb_packet_format_matches(p, wrong[i]), 0);
    }
    int32_t d;
    CHECK_INT(tbon_packet_unpack(NULL, "%d", &d), TBON_EINVAL);
    CHECK_INT(tbon_packet_unpack(p, NULL), TBON_EINVAL);
    CHECK_INT(tb_packet_format_matches(NULL, "%d"), 0);
    CHECK_INT(tb_packet_format_matches(p, NULL), 0);
    tbon_packet_unref(p);
}

TEST(unpack_out_of_memory_frees_and_leaves_outputs)
{
    if (UNDER_ASAN) {
        printf("    (skipped under ASan: needs RLIMIT_AS)\n");
        return;
    }
    /* 100 strings of 1 MiB and a 96 MiB array: with 48 MiB of address space
     * left, the %as copy fails midway (freeing its first strings), and on
     * a second try the array copy fails after the %as copy succeeded. */
    size_t sl = 1 << 20, ns = 100;
    char *big = malloc(sl + 1);
    memset(big, 'q', sl);
    big[sl] = '\0';
    const char **strs = malloc(ns * sizeof *strs);
    for (size_t i = 0; i < ns; i++)
        strs[i] = big;
    tbon_packet_t *p1 = tbon_packet_new(1, "%s %as", "short", strs, ns);
    size_t na = 96u << 20;
    char *arr = calloc(na, 1);
    tbon_packet_t *p2 = tbon_packet_new(1, "%s %as %ac", "short", strs, (size_t)10, arr, na);
    REQUIRE(p1 && p2);
    free(arr);
    free(big);
    free(strs);
    REQUIRE(limit_memory(48u << 20) == 0);
    char *s = (char *)"keep", **as = NULL, *ac = NULL;
    size_t n = 99, nac = 98;
    CHECK_INT(tbon_packet_unpack(p1, "%s %as", &s, &as, &n), TBON_ENOMEM);
    CHECK_STR(s, "keep");
    CHECK(as == NULL);
    CHECK_UINT(n, 99);
    void *m1 = malloc(40u << 20);
    CHECK(m1 != NULL);
    free(m1);
    CHECK_INT(tbon_packet_unpack(p2, "%s %as %ac", &s, &as, &n, &ac, &nac), TBON_ENOMEM);
    CHECK_STR(s, "keep");
    CHECK(as == NULL && ac == NULL);
    CHECK_UINT(n, 99);
    CHECK_UINT(nac, 98);
    /* The partial copies were freed: 40 of the 48 MiB are still there. */
    void *m = malloc(40u << 20);
    CHECK(m != NULL);
    free(m);

    /* A single string too big to copy. */
    size_t p3len;
    const uint8_t *p3 = tb_packet_payload(p2, &p3len);
    struct tb_field sf = {TB_F_S, 64u << 20, p3, 64u << 20};
    tbon_error_t err = {0};
    CHECK(tb_packet_build(1, &sf, 1, &err) == NULL);   /* 64 MiB: no room */
    CHECK_INT(err.code, TBON_ENOMEM);
    CHECK_STR(err.msg, "out of memory for a packet of 67108872 bytes");
    /* Packets that cannot be allocated: from varargs (the array is never
     * read), from a payload. */
    CHECK(create_err(&err, "%ac", "tiny", (size_t)1 << 30) == NULL);
    CHECK_INT(err.code, TBON_ENOMEM);
    CHECK(tb_packet_decode(p3, p3len, 1, 0, 0, &err) == NULL);
    CHECK_INT(err.code, TBON_ENOMEM);
    tbon_packet_unref(p1);
    tbon_packet_unref(p2);
}

TEST(unpack_out_of_memory_single_string)
{
    if (UNDER_ASAN) {
        printf("    (skipped under ASan: needs RLIMIT_AS)\n");
        return;
    }
    size_t sl = 64u << 20;
    char *big = malloc(sl + 1);
    memset(big, 'z', sl);
    big[sl] = '\0';
    tbon_packet_t *p = tbon_packet_new(1, "%s", big);
    free(big);
    REQUIRE(p);
    REQUIRE(limit_memory(16u << 20) == 0);
    char *s = (char *)"keep";
    CHECK_INT(tbon_packet_unpack(p, "%s", &s), TBON_ENOMEM);
    CHECK_STR(s, "keep");
    tbon_packet_unref(p);
}

/* ---- reference counting ---- */

TEST(ref_unref_counting)
{
    tbon_packet_t *p = tbon_packet_new(1, "%d", 1);
    REQUIRE(p);
    CHECK(tbon_packet_ref(p) == p);
    CHECK(tbon_packet_ref(p) == p);
    tbon_packet_unref(p);
    tbon_packet_unref(p);
    /* Back to one reference: set_route asserts exactly that. */
    tb_packet_set_route(p, 4, 2);
    CHECK_UINT(tbon_packet_stream(p), 4);
    CHECK_UINT(tbon_packet_source(p), 2);
    tbon_packet_unref(p);   /* ASan reports a leak if this did not free */
    tbon_packet_unref(NULL);
    CHECK(tbon_packet_ref(NULL) == NULL);
}

static void *ref_worker(void *arg)
{
    tbon_packet_t *p = arg;
    for (int i = 0; i < 200000; i++) {
        tbon_packet_ref(p);
        tbon_packet_ref(p);
        tbon_packet_unref(p);
        tbon_packet_unref(p);
    }
    return NULL;
}

static void *unref_worker(void *arg)
{
    tbon_packet_unref(arg);
    return NULL;
}

TEST(ref_unref_two_threads)
{
    tbon_packet_t *p = tbon_packet_new(1, "%s", "shared");
    REQUIRE(p);
    pthread_t t1, t2;
    REQUIRE(pthread_create(&t1, NULL, ref_worker, p) == 0);
    REQUIRE(pthread_create(&t2, NULL, ref_worker, p) == 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    tb_packet_set_route(p, 1, 1);   /* asserts the count is exactly 1 again */
    /* Many holders dropping at once from two threads: freed exactly once. */
    for (int round = 0; round < 200; round++) {
        tbon_packet_t *q = tbon_packet_new(1, "%d", round);
        REQUIRE(q);
        tbon_packet_ref(q);
        REQUIRE(pthread_create(&t1, NULL, unref_worker, q) == 0);
        REQUIRE(pthread_create(&t2, NULL, unref_worker, q) == 0);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
    }
    tbon_packet_unref(p);
}

TEST(set_route_with_two_refs_aborts)
{
    tbon_packet_t *p = tbon_packet_new(1, "");
    REQUIRE(p);
    tbon_packet_ref(p);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        /* Silence the assertion message in the test log. */
        if (!freopen("/dev/null", "w", stderr))
            _exit(3);
        tb_packet_set_route(p, 1, 1);
        _exit(0);
    }
    int st;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    tbon_packet_unref(p);
    tbon_packet_unref(p);
}

/* ---- getters ---- */

TEST(getters)
{
    tbon_packet_t *p = tbon_packet_new(-3, "%uc", 1);
    REQUIRE(p);
    CHECK_INT(tbon_packet_tag(p), -3);
    CHECK_UINT(tbon_packet_stream(p), 0);
    CHECK_UINT(tbon_packet_source(p), TBON_RANK_NONE);
    CHECK_STR(tbon_packet_format(p), "%uc");
    tb_packet_set_route(p, UINT32_MAX, 12345);
    CHECK_UINT(tbon_packet_stream(p), UINT32_MAX);
    CHECK_UINT(tbon_packet_source(p), 12345);
    tbon_error_t err;
    tbon_packet_t *q = redecode(p, &err);
    REQUIRE(q);
    CHECK_INT(tbon_packet_tag(q), -3);
    CHECK_UINT(tbon_packet_stream(q), 5);
    CHECK_UINT(tbon_packet_source(q), 6);
    CHECK_STR(tbon_packet_format(q), "%uc");
    tbon_packet_unref(q);
    tbon_packet_unref(p);
    CHECK_INT(tbon_packet_tag(NULL), 0);
    CHECK(tbon_packet_format(NULL) == NULL);
    CHECK_UINT(tbon_packet_stream(NULL), 0);
    CHECK_UINT(tbon_packet_source(NULL), TBON_RANK_NONE);
}

/* ---- decoding ---- */

/* A few valid payloads covering every type. */
static tbon_packet_t *sample(int which)
{
    const int32_t ad[] = {1, -2, 3};
    const double alf[] = {0.5, -0.0};
    const char *const as[] = {"alpha", "", "gamma"};
    const uint16_t auhd[] = {1, 65535};
    switch (which) {
    case 0:
        return tbon_packet_new(1, "");
    case 1:
        return tbon_packet_new(1, "%c %uc %hd %uhd %d %ud %ld %uld %f %lf %s", 'x', 200,
                               -3, 60000, -7, 7u, (int64_t)-1, (uint64_t)1, 1.25, 2.5,
                               "hello");
    case 2:
        return tbon_packet_new(1, "%ac %auc %ahd %auhd %ad %aud %ald %auld %af %alf %as",
                               "ab", (size_t)2, "c", (size_t)1, NULL, (size_t)0, auhd,
                               (size_t)2, ad, (size_t)3, NULL, (size_t)0,
                               (const int64_t[]){5}, (size_t)1, NULL, (size_t)0,
                               (const float[]){1, 2}, (size_t)2, alf, (size_t)2, as,
                               (size_t)3);
    default:
        return tbon_packet_new(1, "%s %as %s", "", as, (size_t)3, "z");
    }
}

TEST(decode_roundtrip_equal)
{
    for (int w = 0; w < 4; w++) {
        tbon_packet_t *p = sample(w);
        REQUIRE(p);
        tbon_error_t err = {0};
        tbon_packet_t *q = redecode(p, &err);
        REQUIRE(q);
        CHECK(same_payload(p, q));
        CHECK_STR(tbon_packet_format(q), tbon_packet_format(p));
        CHECK_UINT(tb_packet_nfields(q), tb_packet_nfields(p));
        for (size_t i = 0; i < tb_packet_nfields(p); i++) {
            struct tb_field a, b;
            CHECK_INT(tb_packet_get_field(p, i, &a), 0);
            CHECK_INT(tb_packet_get_field(q, i, &b), 0);
            CHECK_INT(a.type, b.type);
            CHECK_UINT(a.count, b.count);
            CHECK_UINT(a.size, b.size);
            CHECK_MEM(a.data, b.data, a.size);
        }
        tbon_packet_unref(q);
        tbon_packet_unref(p);
    }
    /* Unpack after decode sees the same values. */
    tbon_packet_t *p = sample(1);
    tbon_error_t err;
    tbon_packet_t *q = redecode(p, &err);
    REQUIRE(q);
    char c; unsigned char uc; int16_t h; uint16_t uh; int32_t d; uint32_t ud;
    int64_t l; uint64_t ul; float f; double lf; char *s;
    CHECK_INT(tbon_packet_unpack(q, "%c %uc %hd %uhd %d %ud %ld %uld %f %lf %s", &c, &uc,
                                 &h, &uh, &d, &ud, &l, &ul, &f, &lf, &s), 0);
    CHECK(c == 'x' && uc == 200 && h == -3 && uh == 60000 && d == -7 && ud == 7);
    CHECK(l == -1 && ul == 1 && f == 1.25f && lf == 2.5);
    CHECK_STR(s, "hello");
    free(s);
    tbon_packet_unref(q);
    tbon_packet_unref(p);
}

/* Decoding in place: the packet takes the buffer (no copy: its payload is
 * the buffer itself), values and a refused buffer's ownership as they must
 * be; a 16 MiB array too. */
TEST(decode_take_owns_the_buffer)
{
    for (int w = 0; w < 4; w++) {
        tbon_packet_t *p = sample(w);
        REQUIRE(p);
        size_t len;
        const uint8_t *pl = tb_packet_payload(p, &len);
        uint8_t *c = dup_bytes(pl, len), *was = c;
        tbon_error_t err = {0};
        tbon_packet_t *q = tb_packet_decode_take(&c, len, 9, 5, 6, &err);
        REQUIRE(q);
        CHECK(c == NULL);
        size_t qlen;
        CHECK(tb_packet_payload(q, &qlen) == was);
        CHECK_UINT(qlen, len);
        CHECK(same_payload(p, q));
        CHECK_STR(tbon_packet_format(q), tbon_packet_format(p));
        CHECK_INT(tbon_packet_tag(q), 9);
        tbon_packet_unref(q);
        tbon_packet_unref(p);
    }
    /* a bad payload: NULL, the buffer still the caller's */
    uint8_t *bad = dup_bytes("\x05\x00%d", 4), *keep = bad;
    tbon_error_t err = {0};
    CHECK(tb_packet_decode_take(&bad, 4, 1, 0, 0, &err) == NULL);
    CHECK(bad == keep);
    CHECK_INT(err.code, TBON_EFORMAT);
    free(bad);
    /* a large one: unpacked values exact */
    size_t n = (size_t)4 << 20;
    uint32_t *v = malloc(n * sizeof *v);
    REQUIRE(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint32_t)(i * 2654435761u);
    tbon_packet_t *p = tbon_packet_new(3, "%aud", v, n);
    REQUIRE(p);
    size_t len;
    const uint8_t *pl = tb_packet_payload(p, &len);
    uint8_t *c = dup_bytes(pl, len);
    tbon_packet_t *q = tb_packet_decode_take(&c, len, 3, 0, 0, &err);
    REQUIRE(q);
    uint32_t *got = NULL;
    size_t k = 0;
    CHECK_INT(tbon_packet_unpack(q, "%aud", &got, &k), 0);
    CHECK_UINT(k, n);
    CHECK(got && memcmp(got, v, n * sizeof *v) == 0);
    free(got);
    free(v);
    tbon_packet_unref(q);
    tbon_packet_unref(p);
}

TEST(decode_every_truncation_fails)
{
    for (int w = 0; w < 4; w++) {
        tbon_packet_t *p = sample(w);
        REQUIRE(p);
        size_t len;
        const uint8_t *b = tb_packet_payload(p, &len);
        for (size_t cut = 0; cut < len; cut++)
            if (!decode_fails(b, cut, NULL)) {
                th_fail(__FILE__, __LINE__, "sample %d cut to %zu bytes decoded", w, cut);
                break;
            }
        tbon_packet_unref(p);
    }
    CHECK(decode_fails("", 0, "shorter than its 2-byte format length"));
    tbon_error_t err = {0};
    CHECK(tb_packet_decode(NULL, 5, 1, 0, 0, &err) == NULL);
    CHECK_STR(err.msg, "packet payload of 0 bytes is shorter than its 2-byte format length");
}

TEST(decode_trailing_junk_fails)
{
    for (int w = 0; w < 4; w++) {
        tbon_packet_t *p = sample(w);
        REQUIRE(p);
        size_t len;
        const uint8_t *b = tb_packet_payload(p, &len);
        uint8_t *c = malloc(len + 8);
        memcpy(c, b, len);
        memset(c + len, 0, 8);
        for (size_t extra = 1; extra <= 8; extra++)
            CHECK(decode_fails(c, len + extra, "junk after the last field"));
        free(c);
        tbon_packet_unref(p);
    }
    uint8_t buf[64];
    size_t n = raw_payload(buf, "%d", "\1\0\0\0\0", 5);
    CHECK(decode_fails(buf, n, "1 bytes of junk after the last field, at byte 8"));
}

TEST(decode_huge_counts_fail_without_allocating)
{
    /* Every counted type claiming 4 billion elements in a short payload. */
    static const char *const fmts[] = {"%s", "%ac", "%auc", "%ahd", "%auhd", "%ad",
                                       "%aud", "%ald", "%auld", "%af", "%alf", "%as"};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        uint8_t buf[64];
        size_t n = raw_payload(buf, fmts[i], "\xff\xff\xff\xff" "abcdefgh", 12);
        CHECK(decode_fails(buf, n, "claims 4294967295"));
    }
    /* A %as whose strings claim 4 billion bytes, first, later. */
    uint8_t buf[64];
    size_t n = raw_payload(buf, "%as", "\2\0\0\0" "\xff\xff\xff\xff" "abcd", 12);
    CHECK(decode_fails(buf, n, "string 0 at byte 9 claims 4294967295 bytes but 4 remain"));
    n = raw_payload(buf, "%as", "\2\0\0\0" "\1\0\0\0" "a" "\xfe\xff\xff\xff", 13);
    CHECK(decode_fails(buf, n, "string 1 at byte 14 claims 4294967294 bytes"));
    /* A count that fits the first bound but whose strings are cut off. */
    n = raw_payload(buf, "%as", "\2\0\0\0" "\2\0\0\0" "ab" "\0\0", 12);
    CHECK(decode_fails(buf, n, "the length of string 1 at byte 15 is cut off"));
    /* Format length beyond the payload. */
    n = raw_payload(buf, "%d", "\0\0\0\0", 4);
    buf[0] = 0xff;
    CHECK(decode_fails(buf, n, "format length 255 at byte 0 runs past the end"));
    /* Scalars and counts cut off. */
    n = raw_payload(buf, "%ld", "\0\0\0", 3);
    CHECK(decode_fails(buf, n, "field 1 (%ld) at byte 5 needs 8 bytes but 3 remain"));
    n = raw_payload(buf, "%d %ad", "\0\0\0\0" "\0\0", 6);
    CHECK(decode_fails(buf, n, "field 2 (%ad) at byte 12: its 4-byte count is cut off"));
}

TEST(decode_non_canonical_formats_fail)
{
    static const char *const fmts[] = {
        " %d", "%d ", "%d  %d", "%d\t%d", "%d%d", "%q", "%", "%d\n", "%ud %", "\0%d",
        "%uf", "%d %ad%",
    };
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        uint8_t buf[64];
        size_t n = raw_payload(buf, fmts[i], "\0\0\0\0\0\0\0\0\0\0\0\0", 12);
        if (fmts[i][0] == '\0') {   /* an embedded NUL */
            n = raw_payload(buf, "x%d", "\0\0\0\0", 4);
            buf[2] = '\0';
        }
        if (!decode_fails(buf, n, "is not a canonical packet format"))
            th_fail(__FILE__, __LINE__, "format \"%s\" was not refused", fmts[i]);
    }
    uint8_t buf[64];
    size_t n = raw_payload(buf, "%d  %d", "", 0);
    CHECK(decode_fails(buf, n, "bad character at byte 5"));
}

TEST(decode_random_bytes)
{
    /* 4000 random buffers, each malloc'd at its exact size; half of them
     * start with a valid format so the values are exercised too. */
    static const char *const fmts[] = {"%as", "%s %ad", "%ald %c", "%auhd %as %s", "%lf"};
    uint64_t rs = 0x9e3779b97f4a7c15ull;
    int decoded = 0;
    for (int r = 0; r < 4000; r++) {
        size_t len = th_rand(&rs) % 64, off = 0;
        uint8_t *b = malloc(len + 16);
        if (r % 2) {
            const char *f = fmts[th_rand(&rs) % 5];
            size_t fl = strlen(f);
            b[0] = (uint8_t)fl;
            b[1] = 0;
            memcpy(b + 2, f, fl);
            off = 2 + fl;
            len += off;
        }
        for (size_t i = off; i < len; i++) {
            uint64_t x = th_rand(&rs);
            b[i] = (uint8_t)(x % 4 == 0 ? (x >> 8) % 3 : x >> 8);   /* many small counts */
        }
        uint8_t *exact = dup_bytes(b, len);
        free(b);
        tbon_error_t err = {0};
        tbon_packet_t *p = tb_packet_decode(exact, len, 1, 0, 0, &err);
        if (p) {
            decoded++;
            size_t pl;
            const uint8_t *pb = tb_packet_payload(p, &pl);
            CHECK(pl == len && memcmp(pb, exact, len) == 0);
            tbon_packet_unref(p);
        } else {
            CHECK_INT(err.code, TBON_EFORMAT);
        }
        free(exact);
    }
    CHECK(decoded > 0);

    /* Mutations of valid payloads: flip one or two bytes. */
    for (int w = 0; w < 4; w++) {
        tbon_packet_t *p = sample(w);
        REQUIRE(p);
        size_t len;
        const uint8_t *b = tb_packet_payload(p, &len);
        for (int r = 0; r < 500; r++) {
            uint8_t *c = dup_bytes(b, len);
            c[th_rand(&rs) % len] = (uint8_t)th_rand(&rs);
            if (r % 2)
                c[th_rand(&rs) % len] ^= (uint8_t)(1u << th_rand(&rs) % 8);
            tbon_packet_t *q = tb_packet_decode(c, len, 1, 0, 0, NULL);
            if (q) {
                size_t ql;
                const uint8_t *qb = tb_packet_payload(q, &ql);
                CHECK(ql == len && memcmp(qb, c, len) == 0);
                tbon_packet_unref(q);
            }
            free(c);
        }
        tbon_packet_unref(p);
    }
}

/* ---- field access and building ---- */

TEST(field_access)
{
    tbon_packet_t *p = tbon_packet_new(1, "%hd %s %aud %as %lf", -2, "abc",
                                       (const uint32_t[]){1, 0xdeadbeef}, (size_t)2,
                                       (const char *const[]){"xy", ""}, (size_t)2, -0.5);
    REQUIRE(p);
    CHECK_UINT(tb_packet_nfields(p), 5);
    CHECK_INT(tb_packet_field_type(p, 0), TB_F_HD);
    CHECK_INT(tb_packet_field_type(p, 1), TB_F_S);
    CHECK_INT(tb_packet_field_type(p, 2), TB_F_AUD);
    CHECK_INT(tb_packet_field_type(p, 3), TB_F_AS);
    CHECK_INT(tb_packet_field_type(p, 4), TB_F_LF);
    size_t cnt = 0;
    const uint8_t *v = tb_packet_field(p, 0, &cnt);
    CHECK_UINT(cnt, 1);
    CHECK_MEM(v, "\xfe\xff", 2);
    CHECK_INT(tb_elem_get_i64(TB_F_HD, v), -2);
    v = tb_packet_field(p, 1, &cnt);
    CHECK_UINT(cnt, 3);
    CHECK_MEM(v, "abc", 3);
    v = tb_packet_field(p, 2, &cnt);
    CHECK_UINT(cnt, 2);
    CHECK_MEM(v, "\1\0\0\0\xef\xbe\xad\xde", 8);
    CHECK_UINT(tb_elem_get_u64(TB_F_AUD, v + 4), 0xdeadbeef);
    v = tb_packet_field(p, 3, &cnt);
    CHECK_UINT(cnt, 2);
    CHECK_MEM(v, "\2\0\0\0xy\0\0\0\0", 10);
    v = tb_packet_field(p, 4, NULL);
    CHECK(tb_elem_get_f64(TB_F_LF, v) == -0.5);
    CHECK(tb_packet_field(p, 5, &cnt) == NULL);
    CHECK_UINT(cnt, 0);
    CHECK(tb_packet_field(NULL, 0, NULL) == NULL);

    struct tb_field f;
    static const size_t sizes[5] = {2, 3, 8, 10, 8};
    for (size_t i = 0; i < 5; i++) {
        CHECK_INT(tb_packet_get_field(p, i, &f), 0);
        CHECK_UINT(f.size, sizes[i]);
    }
    CHECK_INT(tb_packet_get_field(p, 5, &f), TBON_EINVAL);
    CHECK_INT(tb_packet_get_field(NULL, 0, &f), TBON_EINVAL);
    tbon_packet_unref(p);
}

TEST(elem_get_put)
{
    uint8_t e[8];
    static const struct { enum tb_ftype t; uint64_t put; int64_t i; uint64_t u; } c[] = {
        {TB_F_C, 0x80, -128, (uint64_t)-128},
        {TB_F_UC, 0x1ff, 255, 255},
        {TB_F_AHD, 0x18000, INT16_MIN, (uint64_t)(int64_t)INT16_MIN},
        {TB_F_UHD, 0xffff, 65535, 65535},
        {TB_F_D, 0xffffffff, -1, UINT64_MAX},
        {TB_F_AUD, 0x180000000ull, 0x80000000ll, 0x80000000u},
        {TB_F_LD, 0x8000000000000000ull, INT64_MIN, 0x8000000000000000ull},
        {TB_F_ULD, UINT64_MAX, -1, UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        memset(e, 0xaa, sizeof e);
        tb_elem_put_u64(c[i].t, e, c[i].put);
        CHECK(tb_elem_get_i64(c[i].t, e) == c[i].i);
        CHECK_UINT(tb_elem_get_u64(c[i].t, e), c[i].u);
        size_t w = tb_ftype_elem_size(c[i].t);
        if (w < 8)
            CHECK_UINT(e[w], 0xaa);   /* nothing written past the element */
    }
    tb_elem_put_u64(TB_F_UD, e, 0x01020304);
    CHECK_MEM(e, "\4\3\2\1", 4);
    CHECK(tb_elem_get_f64(TB_F_ULD, (const uint8_t *)"\xff\xff\xff\xff\xff\xff\xff\xff")
          == 18446744073709551615.0);
    CHECK(tb_elem_get_f64(TB_F_HD, (const uint8_t *)"\xfe\xff") == -2.0);
    tb_elem_put_f64(TB_F_F, e, 1.5);
    CHECK_MEM(e, "\0\0\xc0\x3f", 4);
    CHECK(tb_elem_get_f64(TB_F_AF, e) == 1.5);
    tb_elem_put_f64(TB_F_ALF, e, -2.0);
    CHECK_MEM(e, "\0\0\0\0\0\0\0\xc0", 8);
    CHECK(tb_elem_get_f64(TB_F_LF, e) == -2.0);
    /* Wrong-kind calls do nothing / give 0. */
    memset(e, 0x11, sizeof e);
    tb_elem_put_f64(TB_F_D, e, 3.0);
    tb_elem_put_u64(TB_F_F, e, 3);
    tb_elem_put_u64(TB_F_S, e, 3);
    CHECK_MEM(e, "\x11\x11\x11\x11\x11\x11\x11\x11", 8);
    CHECK_INT(tb_elem_get_i64(TB_F_LF, e), 0);
    CHECK_INT(tb_elem_get_i64(TB_F_AS, e), 0);
}

TEST(build_from_fields)
{
    /* What a sum filter does: take the input's fields, replace the values. */
    tbon_packet_t *in = tbon_packet_new(1, "%ad %lf", (const int32_t[]){1, 2, 3}, (size_t)3, 0.5);
    REQUIRE(in);
    struct tb_field f[2];
    CHECK_INT(tb_packet_get_field(in, 0, &f[0]), 0);
    CHECK_INT(tb_packet_get_field(in, 1, &f[1]), 0);
    uint8_t sums[12], total[8];
    for (size_t k = 0; k < 3; k++)
        tb_elem_put_u64(f[0].type, sums + 4 * k, tb_elem_get_u64(f[0].type, f[0].data + 4 * k) * 10);
    tb_elem_put_f64(f[1].type, total, 2 * tb_elem_get_f64(f[1].type, f[1].data));
    f[0].data = sums;
    f[1].data = total;
    tbon_error_t err;
    tbon_packet_t *out = tb_packet_build(77, f, 2, &err);
    REQUIRE(out);
    CHECK_INT(tbon_packet_tag(out), 77);
    CHECK_UINT(tbon_packet_source(out), TBON_RANK_NONE);
    CHECK_STR(tbon_packet_format(out), "%ad %lf");
    int32_t *a;
    size_t n;
    double d;
    CHECK_INT(tbon_packet_unpack(out, "%ad %lf", &a, &n, &d), 0);
    CHECK_UINT(n, 3);
    CHECK(a[0] == 10 && a[1] == 20 && a[2] == 30 && d == 1.0);
    free(a);
    tbon_packet_unref(out);
    tbon_packet_unref(in);

    /* Every sample rebuilds to the same bytes. */
    for (int w = 0; w < 4; w++) {
        tbon_packet_t *p = sample(w);
        size_t nf = tb_packet_nfields(p);
        struct tb_field fs[16];
        for (size_t i = 0; i < nf; i++)
            CHECK_INT(tb_packet_get_field(p, i, &fs[i]), 0);
        tbon_packet_t *q = tb_packet_build(1, fs, nf, &err);
        REQUIRE(q);
        CHECK(same_payload(p, q));
        CHECK_STR(tbon_packet_format(q), tbon_packet_format(p));
        tbon_packet_unref(q);
        tbon_packet_unref(p);
    }
    out = tb_packet_build(1, NULL, 0, &err);
    REQUIRE(out);
    CHECK_STR(tbon_packet_format(out), "");
    tbon_packet_unref(out);
}

TEST(build_rejects_bad_fields)
{
    const uint8_t d8[8] = {0};
    static const struct {
        struct tb_field f;
        const char *msg;
    } bad[] = {
        {{TB_F_COUNT, 1, NULL, 0}, "has no type"},
        {{(enum tb_ftype)-1, 1, NULL, 0}, "has no type"},
        {{TB_F_D, 2, NULL, 0}, "must have count 1 and 4 bytes, not count 2 and 0 bytes"},
        {{TB_F_D, 1, NULL, 4}, "4 bytes at NULL"},
        {{TB_F_LD, 1, (const uint8_t *)"12345678", 4}, "must have count 1 and 8 bytes"},
        {{TB_F_AD, 2, (const uint8_t *)"12345678", 7}, "has 7 bytes for 2 elements of 4 bytes"},
        {{TB_F_AHD, 1, (const uint8_t *)"1234", 4}, "has 4 bytes for 1 elements"},
        {{TB_F_S, 3, (const uint8_t *)"ab", 2}, "has 2 bytes for 3 elements"},
        {{TB_F_AS, 1, (const uint8_t *)"\5\0\0\0ab", 6}, "string 0 at byte 0 runs past"},
        {{TB_F_AS, 2, (const uint8_t *)"\0\0\0\0\0\0", 6}, "string 1 at byte 4 runs past"},
        {{TB_F_AS, 1, (const uint8_t *)"\0\0\0\0x", 5}, "1 bytes left after its 1 strings"},
        {{TB_F_AC, (size_t)UINT32_MAX + 1, NULL, 0}, "the limit is 4294967295"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tbon_error_t err = {0};
        struct tb_field fs[2] = {{TB_F_LD, 1, d8, 8}, bad[i].f};
        CHECK(tb_packet_build(1, fs, 2, &err) == NULL);
        CHECK_INT(err.code, TBON_EFORMAT);
        if (!strstr(err.msg, bad[i].msg) || !strstr(err.msg, "packet field 2"))
            th_fail(__FILE__, __LINE__, "case %zu: \"%s\"", i, err.msg);
    }
    tbon_error_t err = {0};
    CHECK(tb_packet_build(1, NULL, 3, &err) == NULL);
    CHECK_INT(err.code, TBON_EINVAL);
    /* Nearly 4 GiB of array: refused on its size before the data is read. */
    struct tb_field huge = {TB_F_AC, UINT32_MAX, d8, UINT32_MAX};
    CHECK(tb_packet_build(1, &huge, 1, &err) == NULL);
    CHECK_STR(err.msg, "packet field 1 (%ac) makes the packet larger than 4294967295 bytes");
}

TEST(decode_oversized_length_refused_before_reading)
{
    uint8_t small[4] = {0};
    tbon_error_t err = {0};
    CHECK(tb_packet_decode(small, (size_t)UINT32_MAX + 1, 1, 0, 0, &err) == NULL);
    CHECK_INT(err.code, TBON_EFORMAT);
    CHECK_STR(err.msg, "packet payload of 4294967296 bytes is larger than the limit of "
              "4294967295");
}

TEST(byte_order_helpers)
{
    /* The loads and stores are byte-wise, hence right on any host; the
     * array swap that a big-endian host uses is checked here directly. */
    uint8_t b[8];
    tb_st64(b, 0x0102030405060708ull);
    CHECK_MEM(b, "\x08\x07\x06\x05\x04\x03\x02\x01", 8);
    CHECK_UINT(tb_ld64(b), 0x0102030405060708ull);
    CHECK_UINT(tb_ld32(b), 0x05060708u);
    CHECK_UINT(tb_ld16(b), 0x0708u);
    const uint8_t src[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    uint8_t dst[12];
    tb_copy_swapped(dst, src, 3, 4);
    CHECK_MEM(dst, "\4\3\2\1\10\7\6\5\14\13\12\11", 12);
    tb_copy_swapped(dst, src, 6, 2);
    CHECK_MEM(dst, "\2\1\4\3\6\5\10\7\12\11\14\13", 12);
    tb_copy_swapped(dst, src, 1, 8);
    CHECK_MEM(dst, "\10\7\6\5\4\3\2\1", 8);
    /* And on this host, tb_copy_le gives the wire's bytes. */
    const uint32_t v = 0x0a0b0c0du;
    tb_copy_le(dst, &v, 1, 4);
    CHECK_MEM(dst, "\x0d\x0c\x0b\x0a", 4);
}
