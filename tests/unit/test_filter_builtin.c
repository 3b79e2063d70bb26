/* test_filter_builtin.c - the built-in filters null, sum, min, max, avg and
 * concat (union: test_filter_union.c), over every format they accept, with
 * exact results and exact error messages, run through tb_filter_run as a
 * node runs them */
#include "../harness.h"
#include "filter/filter.h"
#include "codec/packet_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

/* ---- helpers ---- */

static const enum tb_ftype num_types[] = {
    TB_F_C, TB_F_UC, TB_F_HD, TB_F_UHD, TB_F_D, TB_F_UD, TB_F_LD, TB_F_ULD,
    TB_F_F, TB_F_LF,
};
#define N_NUM (sizeof num_types / sizeof num_types[0])

/* A packet from a format and values, with stream 9 and the given source. */
static tbon_packet_t *pk(tbon_rank_t src, int tag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tbon_packet_t *p = tb_packet_vcreate(tag, fmt, ap, NULL);
    va_end(ap);
    if (p)
        tb_packet_set_route(p, 9, src);
    return p;
}

/* A one-field packet of numeric type t (scalar: n == 1): integer types take
 * iv (stored truncated to the width), float types fv. */
static tbon_packet_t *num(enum tb_ftype t, const int64_t *iv, const double *fv,
                          size_t n, tbon_rank_t src)
{
    size_t esz = tb_ftype_elem_size(t);
    uint8_t buf[64 * 8];
    for (size_t i = 0; i < n; i++) {
        if (tb_ftype_is_float(t))
            tb_elem_put_f64(t, buf + i * esz, fv[i]);
        else
            tb_elem_put_u64(t, buf + i * esz, (uint64_t)iv[i]);
    }
    struct tb_field f = { t, n, buf, n * esz };
    tbon_packet_t *p = tb_packet_build(TBON_FIRST_APP_TAG + 1, &f, 1, NULL);
    if (p)
        tb_packet_set_route(p, 9, src);
    return p;
}

/* v as it reads back from an integer field of type t: truncated to the width,
 * then sign- or zero-extended (computed here without the packet helpers). */
static int64_t norm(enum tb_ftype t, int64_t v)
{
    unsigned w = (unsigned)tb_ftype_elem_size(t) * 8;
    if (w == 64)
        return v;
    uint64_t u = (uint64_t)v & ((1ull << w) - 1);
    if (tb_ftype_is_signed(t) && (u >> (w - 1)))
        return (int64_t)(u - (1ull << w));
    return (int64_t)u;
}

/* Run a built-in at the given depth. */
static int run(int id, tbon_packet_t **in, size_t n, tbon_packet_list_t *out,
               void **state, uint32_t depth, tbon_error_t *err)
{
    tbon_filter_ctx_t ctx = { 1, (uint32_t)n, depth, 9, NULL };
    return tb_filter_run(tb_filter_builtin(id), in, n, out, state, &ctx, err);
}

static void unref_all(tbon_packet_t **in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tbon_packet_unref(in[i]);
}

/* Element k of field 0 of p, as an integer / a double. */
static int64_t ei(const tbon_packet_t *p, size_t k)
{
    enum tb_ftype t = tb_packet_field_type(p, 0);
    return tb_elem_get_i64(t, tb_packet_field(p, 0, NULL) + k * tb_ftype_elem_size(t));
}

static double ef(const tbon_packet_t *p, size_t k)
{
    enum tb_ftype t = tb_packet_field_type(p, 0);
    return tb_elem_get_f64(t, tb_packet_field(p, 0, NULL) + k * tb_ftype_elem_size(t));
}

/* Run a built-in that must fail with code and message (exactly). */
static void expect_error(int id, tbon_packet_t **in, size_t n, int code,
                         const char *msg, const char *file, int line)
{
    tbon_packet_list_t out;
    tbon_error_t err = {0};
    void *state = NULL;
    tb_plist_init(&out);
    int rc = run(id, in, n, &out, &state, 0, &err);
    if (rc != code)
        th_fail(file, line, "rc %d, expected %d (%s)", rc, code, err.msg);
    if (err.code != code || strcmp(err.msg, msg) != 0)
        th_fail(file, line, "message \"%s\", expected \"%s\"", err.msg, msg);
    if (out.n != 0)
        th_fail(file, line, "%zu outputs after an error", out.n);
    tb_plist_free(&out);
    tb_filter_state_free(tb_filter_builtin(id), &state);
}
#define EXPECT_ERROR(id, in, n, code, msg) \
    expect_error(id, in, n, code, msg, __FILE__, __LINE__)

/* ---- the table ---- */

TEST(builtin_table)
{
    static const char *names[] = { "null", "sum", "min", "max", "avg", "concat", "union" };
    for (int i = 0; i < TBON_FILTER_BUILTIN_COUNT; i++) {
        const tb_filter_t *f = tb_filter_builtin(i);
        REQUIRE(f);
        CHECK_INT(f->id, i);
        CHECK_STR(f->name, names[i]);
        CHECK_STR(f->format, "");
        CHECK(f->path == NULL && f->dl == NULL && f->fn != NULL);
        CHECK_INT(tb_filter_builtin_id(names[i]), i);
        /* Only union is state recoverable (the others are not idempotent or
         * keep no state). */
        CHECK((f->get_state != NULL) == (i == TBON_FILTER_UNION));
        CHECK((f->free_state != NULL) == (i == TBON_FILTER_UNION));
    }
    CHECK(tb_filter_builtin(-1) == NULL);
    CHECK(tb_filter_builtin(TBON_FILTER_BUILTIN_COUNT) == NULL);
    CHECK_INT(tb_filter_builtin_id("Sum"), TBON_ENOTFOUND);
    CHECK_INT(tb_filter_builtin_id(""), TBON_ENOTFOUND);
    CHECK_INT(tb_filter_builtin_id(NULL), TBON_ENOTFOUND);
}

/* ---- null ---- */

TEST(null_forwards_every_input_by_reference)
{
    tbon_packet_t *in[3] = { pk(4, 100, "%d", 1), pk(5, 101, "%s", "x"),
                             pk(6, 102, "%ald %uc", (int64_t[]){1, 2}, (size_t)2, 7) };
    tbon_packet_list_t out;
    void *state = NULL;
    tb_plist_init(&out);
    CHECK_INT(run(TBON_FILTER_NULL, in, 3, &out, &state, 1, NULL), 0);
    REQUIRE(out.n == 3);
    for (int i = 0; i < 3; i++) {
        CHECK(out.v[i] == in[i]);
        CHECK_UINT(tbon_packet_source(out.v[i]), (unsigned)(4 + i));
    }
    CHECK(state == NULL);
    CHECK_INT(run(TBON_FILTER_NULL, in, 0, &out, &state, 1, NULL), 0);
    CHECK_INT(out.n, 3);
    tb_plist_free(&out);
    /* The list held its own references: the inputs are still ours. */
    CHECK_INT(tbon_packet_source(in[2]), 6);
    unref_all(in, 3);
}

/* ---- sum, min, max over scalars of every numeric type ---- */

TEST(sum_min_max_scalars_every_type)
{
    static const int64_t iv[4] = { 5, -3, 100, 7 };
    static const double fv[4] = { 5, -3, 100, 7 };
    for (size_t ti = 0; ti < N_NUM; ti++) {
        enum tb_ftype t = num_types[ti];
        tbon_packet_t *in[4];
        for (int k = 0; k < 4; k++)
            in[k] = num(t, &iv[k], &fv[k], 1, (tbon_rank_t)(10 + k));
        int64_t want_sum = norm(t, 109), want_min, want_max;
        if (tb_ftype_is_float(t) || tb_ftype_is_signed(t)) {
            want_min = -3;
            want_max = 100;
        } else {
            want_min = 5;                   /* -3 is the type's max - 2 */
            want_max = norm(t, -3);
        }
        static const int ids[3] = { TBON_FILTER_SUM, TBON_FILTER_MIN, TBON_FILTER_MAX };
        int64_t want[3] = { want_sum, want_min, want_max };
        for (int o = 0; o < 3; o++) {
            tbon_packet_list_t out;
            void *state = NULL;
            tb_plist_init(&out);
            CHECK_INT(run(ids[o], in, 4, &out, &state, 1, NULL), 0);
            REQUIRE(out.n == 1);
            tbon_packet_t *p = out.v[0];
            CHECK_STR(tbon_packet_format(p), tb_ftype_name(t));
            CHECK_INT(tbon_packet_tag(p), TBON_FIRST_APP_TAG + 1);
            CHECK_UINT(tbon_packet_source(p), TBON_RANK_NONE);
            CHECK_UINT(tbon_packet_stream(p), 0);
            if (tb_ftype_is_float(t)) {
                if (ef(p, 0) != (double)want[o])
                    th_fail(__FILE__, __LINE__, "%s %s: %g, expected %lld",
                            tb_filter_builtin(ids[o])->name, tb_ftype_name(t),
                            ef(p, 0), (long long)want[o]);
            } else if (ei(p, 0) != want[o]) {
                th_fail(__FILE__, __LINE__, "%s %s: %lld, expected %lld",
                        tb_filter_builtin(ids[o])->name, tb_ftype_name(t),
                        (long long)ei(p, 0), (long long)want[o]);
            }
            CHECK(state == NULL);
            tb_plist_free(&out);
        }
        unref_all(in, 4);
    }
}

/* Arrays element-wise, every type; the expectation is computed per element
 * from the values as they read back. */
TEST(sum_min_max_arrays_every_type)
{
    static const int64_t iv[3][5] = {
        { 1, -2, 3, 40, 0 }, { 10, 20, -30, 4, 0 }, { 0, 5, 5, -50, 0 } };
    for (size_t ti = 0; ti < N_NUM; ti++) {
        enum tb_ftype t = num_types[ti] + TB_F_AC;
        int flt = tb_ftype_is_float(t), sgn = tb_ftype_is_signed(t);
        tbon_packet_t *in[3];
        for (int k = 0; k < 3; k++) {
            double fv[5];
            for (int e = 0; e < 5; e++)
                fv[e] = (double)iv[k][e];
            in[k] = num(t, iv[k], fv, 5, (tbon_rank_t)k);
        }
        for (int o = 0; o < 3; o++) {
            int id = TBON_FILTER_SUM + o;
            tbon_packet_list_t out;
            void *state = NULL;
            tb_plist_init(&out);
            CHECK_INT(run(id, in, 3, &out, &state, 2, NULL), 0);
            REQUIRE(out.n == 1);
            CHECK_STR(tbon_packet_format(out.v[0]), tb_ftype_name(t));
            size_t cnt;
            tb_packet_field(out.v[0], 0, &cnt);
            CHECK_UINT(cnt, 5);
            for (int e = 0; e < 5; e++) {
                int64_t w = norm(t, iv[0][e]), s = iv[0][e];
                for (int k = 1; k < 3; k++) {
                    int64_t x = norm(t, iv[k][e]);
                    s += iv[k][e];
                    if (o == 1 && (flt || sgn ? x < w : (uint64_t)x < (uint64_t)w))
                        w = x;
                    if (o == 2 && (flt || sgn ? x > w : (uint64_t)x > (uint64_t)w))
                        w = x;
                }
                if (o == 0)
                    w = flt ? s : norm(t, s);
                if (flt ? ef(out.v[0], e) != (double)w : ei(out.v[0], e) != w)
                    th_fail(__FILE__, __LINE__, "%s %s element %d: %lld, expected %lld",
                            tb_filter_builtin(id)->name, tb_ftype_name(t), e,
                            (long long)ei(out.v[0], e), (long long)w);
            }
            tb_plist_free(&out);
        }
        unref_all(in, 3);
    }
}

/* Several fields of mixed types in one packet, sources all different. */
TEST(sum_multi_field_packets)
{
    tbon_packet_t *in[3];
    double a0[2] = { 0.5, 1 }, a1[2] = { 0.25, -4 }, a2[2] = { 2, 8 };
    in[0] = pk(3, 150, "%d %alf %uc %ld", 1, a0, (size_t)2, 10, (int64_t)-5);
    in[1] = pk(4, 151, "%d %alf %uc %ld", 2, a1, (size_t)2, 20, (int64_t)-6);
    in[2] = pk(17, 152, " %d%alf  %uc %ld", 3, a2, (size_t)2, 30, (int64_t)-7);
    tbon_packet_list_t out;
    void *state = NULL;
    tb_plist_init(&out);
    CHECK_INT(run(TBON_FILTER_SUM, in, 3, &out, &state, 0, NULL), 0);
    REQUIRE(out.n == 1);
    int32_t d;
    double *arr;
    size_t n;
    unsigned char uc;
    int64_t ld;
    REQUIRE(tbon_packet_unpack(out.v[0], "%d %alf %uc %ld", &d, &arr, &n, &uc, &ld) == 0);
    CHECK_INT(tbon_packet_tag(out.v[0]), 150);
    CHECK_INT(d, 6);
    REQUIRE(n == 2);
    CHECK(arr[0] == 2.75 && arr[1] == 5);
    CHECK_INT(uc, 60);
    CHECK_INT(ld, -18);
    free(arr);
    tb_plist_free(&out);

    /* The inputs were not touched by the in-place fold. */
    double *back;
    REQUIRE(tbon_packet_unpack(in[0], "%d %alf %uc %ld", &d, &back, &n, &uc, &ld) == 0);
    CHECK(d == 1 && back[0] == 0.5 && back[1] == 1 && uc == 10 && ld == -5);
    free(back);
    unref_all(in, 3);
}

/* Integer sums are exact and wrap like the C type; never through double. */
TEST(sum_integer_wraps_and_is_exact)
{
    struct { const char *fmt; int64_t a, b, want; } cases[] = {
        { "%uc", 200, 100, 44 },
        { "%c", 100, 100, -56 },
        { "%uhd", 65535, 2, 1 },
        { "%hd", 32767, 1, -32768 },
        { "%ud", (int64_t)UINT32_MAX, 2, 1 },
        { "%d", INT32_MAX, 1, INT32_MIN },
        { "%ld", INT64_MAX, 1, INT64_MIN },
        { "%uld", -1 /* UINT64_MAX */, 3, 2 },
        /* 2^60 + 1 + 2^60 + 1: not representable in a double's 53 bits */
        { "%ld", (1ll << 60) + 1, (1ll << 60) + 1, (1ll << 61) + 2 },
        { "%uld", (int64_t)((1ull << 62) + 3), (int64_t)((1ull << 62) + 3),
          (int64_t)((1ull << 63) + 6) },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        enum tb_ftype t;
        size_t n;
        REQUIRE(tb_format_parse(cases[i].fmt, &t, 1, &n, NULL) == 0);
        tbon_packet_t *in[2] = { num(t, &cases[i].a, NULL, 1, 1),
                                 num(t, &cases[i].b, NULL, 1, 2) };
        tbon_packet_list_t out;
        void *state = NULL;
        tb_plist_init(&out);
        CHECK_INT(run(TBON_FILTER_SUM, in, 2, &out, &state, 0, NULL), 0);
        REQUIRE(out.n == 1);
        if (ei(out.v[0], 0) != cases[i].want)
            th_fail(__FILE__, __LINE__, "%s: %lld + %lld = %lld, expected %lld",
                    cases[i].fmt, (long long)cases[i].a, (long long)cases[i].b,
                    (long long)ei(out.v[0], 0), (long long)cases[i].want);
        tb_plist_free(&out);
        unref_all(in, 2);
    }
}

TEST(min_max_signedness_and_extremes)
{
    tbon_packet_t *in[3] = { pk(1, 100, "%uld %ld %c %uc", UINT64_MAX, INT64_MIN, -5, 250),
                             pk(2, 100, "%uld %ld %c %uc", (uint64_t)1 << 63, INT64_MAX, 3, 3),
                             pk(3, 100, "%uld %ld %c %uc", (uint64_t)7, (int64_t)0, -128, 0) };
    tbon_packet_list_t out;
    void *state = NULL;
    uint64_t u;
    int64_t l;
    char c;
    unsigned char uc;
    tb_plist_init(&out);
    CHECK_INT(run(TBON_FILTER_MIN, in, 3, &out, &state, 0, NULL), 0);
    CHECK_INT(run(TBON_FILTER_MAX, in, 3, &out, &state, 0, NULL), 0);
    REQUIRE(out.n == 2);
    REQUIRE(tbon_packet_unpack(out.v[0], "%uld %ld %c %uc", &u, &l, &c, &uc) == 0);
    CHECK_UINT(u, 7);
    CHECK_INT(l, INT64_MIN);
    CHECK_INT((signed char)c, -128);
    CHECK_INT(uc, 0);
    REQUIRE(tbon_packet_unpack(out.v[1], "%uld %ld %c %uc", &u, &l, &c, &uc) == 0);
    CHECK_UINT(u, UINT64_MAX);
    CHECK_INT(l, INT64_MAX);
    CHECK_INT((signed char)c, 3);
    CHECK_INT(uc, 250);
    tb_plist_free(&out);
    unref_all(in, 3);
}

/* min and max skip NaN unless all are NaN, whatever the order (commutative). */
TEST(min_max_nan_and_order)
{
    static const double vals[3] = { NAN, 2.5, -1.25 };
    static const int perm[6][3] = { {0,1,2}, {0,2,1}, {1,0,2}, {1,2,0}, {2,0,1}, {2,1,0} };
    for (int p = 0; p < 6; p++) {
        for (int fl = 0; fl < 2; fl++) {
            enum tb_ftype t = fl ? TB_F_F : TB_F_LF;
            tbon_packet_t *in[3];
            for (int k = 0; k < 3; k++)
                in[k] = num(t, NULL, &vals[perm[p][k]], 1, (tbon_rank_t)k);
            tbon_packet_list_t out;
            void *state = NULL;
            tb_plist_init(&out);
            CHECK_INT(run(TBON_FILTER_MIN, in, 3, &out, &state, 0, NULL), 0);
            CHECK_INT(run(TBON_FILTER_MAX, in, 3, &out, &state, 0, NULL), 0);
            REQUIRE(out.n == 2);
            CHECK(ef(out.v[0], 0) == -1.25);
            CHECK(ef(out.v[1], 0) == 2.5);
            tb_plist_free(&out);
            unref_all(in, 3);
        }
    }
    double nan = NAN;
    tbon_packet_t *in[2] = { num(TB_F_LF, NULL, &nan, 1, 1), num(TB_F_LF, NULL, &nan, 1, 2) };
    tbon_packet_list_t out;
    void *state = NULL;
    tb_plist_init(&out);
    CHECK_INT(run(TBON_FILTER_MAX, in, 2, &out, &state, 0, NULL), 0);
    REQUIRE(out.n == 1);
    CHECK(isnan(ef(out.v[0], 0)));
    tb_plist_free(&out);
    unref_all(in, 2);
}

TEST(sum_float_types)
{
    tbon_packet_t *in[3] = { pk(1, 100, "%f %lf %af", 0.5, 0.1, (float[]){1.5f, -2}, (size_t)2),
                             pk(2, 100, "%f %lf %af", 0.25, 0.2, (float[]){0.25f, 2}, (size_t)2),
                             pk(3, 100, "%f %lf %af", 1.5, 0.3, (float[]){-1.75f, 1e30f}, (size_t)2) };
    tbon_packet_list_t out;
    void *state = NULL;
    float f, *af;
    double lf;
    size_t n;
    tb_plist_init(&out);
    CHECK_INT(run(TBON_FILTER_SUM, in, 3, &out, &state, 0, NULL), 0);
    REQUIRE(out.n == 1);
    REQUIRE(tbon_packet_unpack(out.v[0], "%f %lf %af", &f, &lf, &af, &n) == 0);
    CHECK(f == 2.25f);
    CHECK(lf == (0.1 + 0.2) + 0.3);    /* in input order, in double */
    REQUIRE(n == 2);
    CHECK(af[0] == 0.0f);
    CHECK(af[1] == 1e30f);
    free(af);
    tb_plist_free(&out);
    unref_all(in, 3);
}

TEST(sum_one_input_is_forwarded_zero_inputs_give_nothing)
{
    tbon_packet_t *in[1] = { pk(5, 100, "%d %ahd", 7, (int16_t[]){1, 2}, (size_t)2) };
    for (int id = TBON_FILTER_SUM; id <= TBON_FILTER_MAX; id++) {
        tbon_packet_list_t out;
        void *state = NULL;
        tb_plist_init(&out);
        CHECK_INT(run(id, in, 1, &out, &state, 1, NULL), 0);
        REQUIRE(out.n == 1);
        CHECK(out.v[0] == in[0]);
        CHECK_INT(run(id, in, 0, &out, &state, 1, NULL), 0);
        CHECK_INT(out.n, 1);
        tb_plist_free(&out);
    }
    unref_all(in, 1);
}

/* Empty arrays and packets without fields fold to the same. */
TEST(sum_empty_arrays_and_no_fields)
{
    tbon_packet_t *in[2] = { pk(1, 100, "%ad %lf", (int32_t *)NULL, (size_t)0, 1.0),
                             pk(2, 100, "%ad %lf", (int32_t *)NULL, (size_t)0, 2.0) };
    tbon_packet_t *none[2] = { pk(1, 100, ""), pk(2, 100, "") };
    tbon_packet_list_t out;
    void *state = NULL;
    int32_t *a;
    size_t n;
    double lf;
    tb_plist_init(&out);
    CHECK_INT(run(TBON_FILTER_SUM, in, 2, &out, &state, 0, NULL), 0);
    CHECK_INT(run(TBON_FILTER_MAX, none, 2, &out, &state, 0, NULL), 0);
    REQUIRE(out.n == 2);
    REQUIRE(tbon_packet_unpack(out.v[0], "%ad %lf", &a, &n, &lf) == 0);
    CHECK(a == NULL && n == 0 && lf == 3.0);
    CHECK_STR(tbon_packet_format(out.v[1]), "");
    tb_plist_free(&out);
    unref_all(in, 2);
    unref_all(none, 2);
}

TEST(sum_min_max_errors)
{
    tbon_packet_t *s[2] = { pk(3, 100, "%d %s", 1, "a"), pk(4, 100, "%d %s", 2, "b") };
    EXPECT_ERROR(TBON_FILTER_SUM, s, 2, TBON_EFORMAT,
                 "filter \"sum\": input 0 (from rank 3): field 2 is %s, not a number "
                 "(sum takes %c %uc %hd %uhd %d %ud %ld %uld %f %lf and their arrays)");
    /* Also with one input: it would otherwise be forwarded. */
    EXPECT_ERROR(TBON_FILTER_MAX, s, 1, TBON_EFORMAT,
                 "filter \"max\": input 0 (from rank 3): field 2 is %s, not a number "
                 "(max takes %c %uc %hd %uhd %d %ud %ld %uld %f %lf and their arrays)");
    unref_all(s, 2);

    tbon_packet_t *as[1] = { pk(TBON_RANK_NONE, 100, "%as", (const char *[]){"x"}, (size_t)1) };
    EXPECT_ERROR(TBON_FILTER_MIN, as, 1, TBON_EFORMAT,
                 "filter \"min\": input 0 (from rank none): field 1 is %as, not a number "
                 "(min takes %c %uc %hd %uhd %d %ud %ld %uld %f %lf and their arrays)");
    unref_all(as, 1);

    tbon_packet_t *lay[3] = { pk(3, 100, "%d %d", 1, 2), pk(4, 100, "%d %d", 1, 2),
                              pk(5, 100, "%d %ld", 1, (int64_t)2) };
    EXPECT_ERROR(TBON_FILTER_SUM, lay, 3, TBON_EFORMAT,
                 "filter \"sum\": input 2 (from rank 5) has format \"%d %ld\" but input 0 "
                 "(from rank 3) has \"%d %d\"; sum needs the same fields in every input");
    unref_all(lay, 3);

    tbon_packet_t *fewer[2] = { pk(3, 100, "%d %d", 1, 2), pk(8, 100, "%d", 1) };
    EXPECT_ERROR(TBON_FILTER_MIN, fewer, 2, TBON_EFORMAT,
                 "filter \"min\": input 1 (from rank 8) has format \"%d\" but input 0 "
                 "(from rank 3) has \"%d %d\"; min needs the same fields in every input");
    unref_all(fewer, 2);

    tbon_packet_t *len[3] = { pk(3, 100, "%d %ald", 1, (int64_t[]){1, 2, 3, 4, 5}, (size_t)5),
                              pk(6, 100, "%d %ald", 1, (int64_t[]){1, 2, 3, 4, 5}, (size_t)5),
                              pk(7, 100, "%d %ald", 1, (int64_t[]){1, 2, 3}, (size_t)3) };
    EXPECT_ERROR(TBON_FILTER_MAX, len, 3, TBON_EFORMAT,
                 "filter \"max\": field 2 (%ald): input 2 (from rank 7) has 3 elements but "
                 "input 0 (from rank 3) has 5; max needs arrays of equal length");
    unref_all(len, 3);
}

/* ---- avg ---- */

TEST(avg_every_scalar_type_at_the_fe)
{
    static const int64_t iv[4] = { 1, 2, 3, 6 };
    static const double fv[4] = { 1, 2, 3, 6 };
    for (size_t ti = 0; ti < N_NUM; ti++) {
        tbon_packet_t *in[4];
        for (int k = 0; k < 4; k++)
            in[k] = num(num_types[ti], &iv[k], &fv[k], 1, (tbon_rank_t)k);
        tbon_packet_list_t out;
        void *state = NULL;
        double m;
        tb_plist_init(&out);
        CHECK_INT(run(TBON_FILTER_AVG, in, 4, &out, &state, 0, NULL), 0);
        REQUIRE(out.n == 1);
        CHECK_STR(tbon_packet_format(out.v[0]), "%lf");
        CHECK_INT(tbon_packet_tag(out.v[0]), TBON_FIRST_APP_TAG + 1);
        REQUIRE(tbon_packet_unpack(out.v[0], "%lf", &m) == 0);
        CHECK(m == 3.0);
        tb_plist_free(&out);
        unref_all(in, 4);
    }
}

TEST(avg_below_the_fe_outputs_sum_and_count)
{
    tbon_packet_t *in[4] = { pk(1, 120, "%c", -4), pk(2, 120, "%uld", (uint64_t)10),
                             pk(3, 120, "%f", 0.5), pk(4, 120, "%lf %uld", 7.25, (uint64_t)3) };
    tbon_packet_list_t out;
    void *state = NULL;
    double s;
    uint64_t c;
    tb_plist_init(&out);
    CHECK_INT(run(TBON_FILTER_AVG, in, 4, &out, &state, 2, NULL), 0);
    REQUIRE(out.n == 1);
    CHECK_STR(tbon_packet_format(out.v[0]), "%lf %uld");
    REQUIRE(tbon_packet_unpack(out.v[0], "%lf %uld", &s, &c) == 0);
    CHECK(s == 13.75);
    CHECK_UINT(c, 6);
    /* A NULL ctx is taken as the FE. */
    tbon_packet_list_t o2;
    tb_plist_init(&o2);
    CHECK_INT(tb_filter_run(tb_filter_builtin(TBON_FILTER_AVG), in, 4, &o2, &state,
                            NULL, NULL), 0);
    REQUIRE(o2.n == 1);
    REQUIRE(tbon_packet_unpack(o2.v[0], "%lf", &s) == 0);
    CHECK(s == 13.75 / 6);
    tb_plist_free(&o2);
    tb_plist_free(&out);
    unref_all(in, 4);
}

/* The mean of an uneven tree, computed level by level with the filter, is
 * the flat mean exactly; the mean of the commnodes' means is not. */
TEST(avg_uneven_tree_equals_flat_mean)
{
    /* 14 back-ends: integers and dyadic fractions (exact in a double). */
    static const double be[14] = { 3, 17.5, -2, 40, 9.25, 1, 0, 12, 7, 7, 100,
                                   -30.5, 2, 5 };
    /* FE <- { A(be 0), B(be 1..5), C <- { D(be 6..8), be 9 }, be 10..13 } */
    tbon_packet_t *bp[14];
    double flat_sum = 0;
    for (int i = 0; i < 14; i++) {
        bp[i] = pk((tbon_rank_t)(100 + i), 200, "%lf", be[i]);
        flat_sum += be[i];
    }
    tbon_packet_list_t a, b, d, c, fe, flat;
    void *st = NULL;
    tb_plist_init(&a);
    tb_plist_init(&b);
    tb_plist_init(&d);
    tb_plist_init(&c);
    tb_plist_init(&fe);
    tb_plist_init(&flat);
    CHECK_INT(run(TBON_FILTER_AVG, bp + 0, 1, &a, &st, 1, NULL), 0);
    CHECK_INT(run(TBON_FILTER_AVG, bp + 1, 5, &b, &st, 1, NULL), 0);
    CHECK_INT(run(TBON_FILTER_AVG, bp + 6, 3, &d, &st, 2, NULL), 0);
    REQUIRE(a.n == 1 && b.n == 1 && d.n == 1);
    tbon_packet_t *cin[2] = { d.v[0], bp[9] };
    CHECK_INT(run(TBON_FILTER_AVG, cin, 2, &c, &st, 1, NULL), 0);
    REQUIRE(c.n == 1);
    tbon_packet_t *fin[7] = { a.v[0], b.v[0], c.v[0], bp[10], bp[11], bp[12], bp[13] };
    CHECK_INT(run(TBON_FILTER_AVG, fin, 7, &fe, &st, 0, NULL), 0);
    CHECK_INT(run(TBON_FILTER_AVG, bp, 14, &flat, &st, 0, NULL), 0);
    REQUIRE(fe.n == 1 && flat.n == 1);
    double mt, mf, sum;
    uint64_t cnt;
    REQUIRE(tbon_packet_unpack(fe.v[0], "%lf", &mt) == 0);
    REQUIRE(tbon_packet_unpack(flat.v[0], "%lf", &mf) == 0);
    CHECK(mt == mf);
    CHECK(mt == flat_sum / 14);
    REQUIRE(tbon_packet_unpack(c.v[0], "%lf %uld", &sum, &cnt) == 0);
    CHECK(sum == 7 + 7 + 12 + 0 && cnt == 4);
    /* The average of averages would be wrong: (3 + mean(B) + ...) / 7. */
    double mb = (17.5 - 2 + 40 + 9.25 + 1) / 5, mc = 26.0 / 4;
    double aoa = (3 + mb + mc + 100 - 30.5 + 2 + 5) / 7;
    CHECK(aoa != mt);
    CHECK(st == NULL);
    tb_plist_free(&a);
    tb_plist_free(&b);
    tb_plist_free(&d);
    tb_plist_free(&c);
    tb_plist_free(&fe);
    tb_plist_free(&flat);
    unref_all(bp, 14);
}

TEST(avg_count_zero_is_nan_and_errors)
{
    tbon_packet_t *z[1] = { pk(1, 100, "%lf %uld", 0.0, (uint64_t)0) };
    tbon_packet_list_t out;
    void *state = NULL;
    double m;
    tb_plist_init(&out);
    CHECK_INT(run(TBON_FILTER_AVG, z, 1, &out, &state, 0, NULL), 0);
    REQUIRE(out.n == 1);
    REQUIRE(tbon_packet_unpack(out.v[0], "%lf", &m) == 0);
    CHECK(isnan(m));
    CHECK_INT(run(TBON_FILTER_AVG, z, 0, &out, &state, 0, NULL), 0);
    CHECK_INT(out.n, 1);
    tb_plist_free(&out);
    unref_all(z, 1);

    static const char *tail = "; avg takes one numeric scalar (%c %uc %hd %uhd %d %ud "
                              "%ld %uld %f %lf) from a back-end, or its own partial "
                              "\"%lf %uld\" (sum, count)";
    char want[512];
    tbon_packet_t *bad[5] = { pk(1, 100, "%d", 1), pk(2, 100, "%d %d", 1, 2),
                              pk(3, 100, "%ad", (int32_t[]){1}, (size_t)1),
                              pk(4, 100, "%s", "x"), pk(5, 100, "%uld %lf", (uint64_t)1, 1.0) };
    static const char *fmts[5] = { "", "%d %d", "%ad", "%s", "%uld %lf" };
    for (int i = 1; i < 5; i++) {
        tbon_packet_t *in[2] = { bad[0], bad[i] };
        snprintf(want, sizeof want, "filter \"avg\": input 1 (from rank %d) has format "
                 "\"%s\"%s", i + 1, fmts[i], tail);
        EXPECT_ERROR(TBON_FILTER_AVG, in, 2, TBON_EFORMAT, want);
    }
    tbon_packet_t *empty[1] = { pk(6, 100, "") };
    snprintf(want, sizeof want, "filter \"avg\": input 0 (from rank 6) has format \"\"%s",
             tail);
    EXPECT_ERROR(TBON_FILTER_AVG, empty, 1, TBON_EFORMAT, want);
    unref_all(bad, 5);
    unref_all(empty, 1);
}

/* ---- concat ---- */

TEST(concat_every_numeric_type_scalars_and_arrays_mix)
{
    static const int64_t iv[6] = { 1, -2, 3, 4, -5, 6 };
    static const double fv[6] = { 1, -2, 3, 4, -5, 6 };
    for (size_t ti = 0; ti < N_NUM; ti++) {
        enum tb_ftype t = num_types[ti], at = t + TB_F_AC;
        /* scalar, array of 3, empty array, scalar, array of 1 */
        tbon_packet_t *in[5] = { num(t, iv, fv, 1, 1), num(at, iv + 1, fv + 1, 3, 2),
                                 num(at, NULL, NULL, 0, 3), num(t, iv + 4, fv + 4, 1, 4),
                                 num(at, iv + 5, fv + 5, 1, 5) };
        tbon_packet_list_t out;
        void *state = NULL;
        tb_plist_init(&out);
        CHECK_INT(run(TBON_FILTER_CONCAT, in, 5, &out, &state, 1, NULL), 0);
        REQUIRE(out.n == 1);
        CHECK_STR(tbon_packet_format(out.v[0]), tb_ftype_name(at));
        size_t cnt;
        tb_packet_field(out.v[0], 0, &cnt);
        CHECK_UINT(cnt, 6);
        for (size_t e = 0; e < 6 && e < cnt; e++) {
            if (tb_ftype_is_float(t) ? ef(out.v[0], e) != fv[e]
                                     : ei(out.v[0], e) != norm(t, iv[e]))
                th_fail(__FILE__, __LINE__, "concat %s element %zu wrong",
                        tb_ftype_name(at), e);
        }
        /* One scalar becomes an array of one. */
        tbon_packet_list_t one;
        tb_plist_init(&one);
        CHECK_INT(run(TBON_FILTER_CONCAT, in + 3, 1, &one, &state, 1, NULL), 0);
        REQUIRE(one.n == 1);
        CHECK_STR(tbon_packet_format(one.v[0]), tb_ftype_name(at));
        CHECK(tb_ftype_is_float(t) ? ef(one.v[0], 0) == -5 : ei(one.v[0], 0) == norm(t, -5));
        tb_plist_free(&one);
        tb_plist_free(&out);
        unref_all(in, 5);
    }
}

TEST(concat_strings)
{
    tbon_packet_t *in[5] = { pk(1, 130, "%s", "alpha"),
                             pk(2, 131, "%as", (const char *[]){"b", "", "gamma"}, (size_t)3),
                             pk(3, 132, "%as", (const char **)NULL, (size_t)0),
                             pk(4, 133, "%s", ""),
                             pk(5, 134, "%s", "last one") };
    tbon_packet_list_t out;
    void *state = NULL;
    char **s;
    size_t n;
    tb_plist_init(&out);
    CHECK_INT(run(TBON_FILTER_CONCAT, in, 5, &out, &state, 0, NULL), 0);
    REQUIRE(out.n == 1);
    CHECK_INT(tbon_packet_tag(out.v[0]), 130);
    REQUIRE(tbon_packet_unpack(out.v[0], "%as", &s, &n) == 0);
    REQUIRE(n == 6);
    static const char *want[6] = { "alpha", "b", "", "gamma", "", "last one" };
    for (int i = 0; i < 6; i++) {
        CHECK_STR(s[i], want[i]);
        free(s[i]);
    }
    free(s);
    tb_plist_free(&out);
    unref_all(in, 5);
}

TEST(concat_one_array_is_forwarded)
{
    tbon_packet_t *in[1] = { pk(4, 100, "%aud", (uint32_t[]){1, 2}, (size_t)2) };
    tbon_packet_list_t out;
    void *state = NULL;
    tb_plist_init(&out);
    CHECK_INT(run(TBON_FILTER_CONCAT, in, 1, &out, &state, 0, NULL), 0);
    REQUIRE(out.n == 1);
    CHECK(out.v[0] == in[0]);
    CHECK_INT(run(TBON_FILTER_CONCAT, in, 0, &out, &state, 0, NULL), 0);
    CHECK_INT(out.n, 1);
    tb_plist_free(&out);
    unref_all(in, 1);
}

TEST(concat_errors)
{
    tbon_packet_t *in[4] = { pk(3, 100, "%ad", (int32_t[]){1}, (size_t)1), pk(4, 100, "%ld", (int64_t)2),
                             pk(5, 100, "%d %d", 1, 2), pk(6, 100, "%s", "x") };
    tbon_packet_t *w1[2] = { in[0], in[1] };
    EXPECT_ERROR(TBON_FILTER_CONCAT, w1, 2, TBON_EFORMAT,
                 "filter \"concat\": input 1 (from rank 4) is \"%ld\" but input 0 (from rank 3) "
                 "is \"%ad\"; concat needs one element type in every input (X and %aX mix)");
    tbon_packet_t *w2[2] = { in[0], in[2] };
    EXPECT_ERROR(TBON_FILTER_CONCAT, w2, 2, TBON_EFORMAT,
                 "filter \"concat\": input 1 (from rank 5) has format \"%d %d\"; concat takes "
                 "one field per input (X or %aX)");
    tbon_packet_t *w3[2] = { in[3], in[0] };
    EXPECT_ERROR(TBON_FILTER_CONCAT, w3, 2, TBON_EFORMAT,
                 "filter \"concat\": input 1 (from rank 3) is \"%ad\" but input 0 (from rank 6) "
                 "is \"%s\"; concat needs one element type in every input (X and %aX mix)");
    /* %c is not a string element. */
    tbon_packet_t *c[2] = { pk(7, 100, "%c", 'a'), in[3] };
    EXPECT_ERROR(TBON_FILTER_CONCAT, c, 2, TBON_EFORMAT,
                 "filter \"concat\": input 1 (from rank 6) is \"%s\" but input 0 (from rank 7) "
                 "is \"%c\"; concat needs one element type in every input (X and %aX mix)");
    tbon_packet_unref(c[0]);
    unref_all(in, 4);
}
