/* test_tree.c - whole trees of real processes: every shape answers a sum
 * wave exactly, and every built-in filter gives exact results
 *
 * Back-ends are tbon_test_be (protocol in tbon_test_be.c); shapes as
 * tbon_topgen --shape, e.g. 1x2x4 = the FE, 1 commnode, 2 commnodes under it,
 * 4 back-ends under each of those.
 */
#include "itest.h"

#include <math.h>

/* ---- every shape: backends and three sum waves ---- */

static void shape_sum(const char *shape)
{
    it_tree_t t;
    if (it_start(&t, shape, NULL, NULL))
        return;
    /* Every commnode and back-end is a process of ours. */
    pid_t pids[IT_MAX_BE];
    CHECK_UINT(it_our_procs("tbon_", pids, IT_MAX_BE), t.total - 1);
    CHECK_UINT(it_our_procs("tbon_test_be", pids, IT_MAX_BE), t.nbe);
    if (it_check_backends(&t) == 0) {
        tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL,
                                     TBON_FILTER_NULL);
        for (uint32_t w = 1; s && w <= 3; w++)
            if (it_sum_wave(s, w, t.be, t.nbe))
                break;
        if (s)
            it_expect_nothing(s, 100, "after the waves");
    }
    it_stop(&t);
}

ITEST(shape_flat4) { shape_sum("4"); }
ITEST(shape_1x1) { shape_sum("1x1"); }
ITEST(shape_1x4) { shape_sum("1x4"); }
ITEST(shape_4x4) { shape_sum("4x4"); }
ITEST(shape_1x2x4) { shape_sum("1x2x4"); }
ITEST(shape_4x4x4) { shape_sum("4x4x4"); }
ITEST(shape_8x8) { shape_sum("8x8"); }

/* Two trees at once in one front-end process: independent and both exact. */
ITEST(two_trees_at_once)
{
    it_tree_t a, b;
    if (it_start(&a, "2x2", NULL, NULL))
        return;
    if (it_start(&b, "1x3", NULL, NULL) == 0) {
        tbon_stream_t *sa = it_stream(a.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
        tbon_stream_t *sb = it_stream(b.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
        if (sa && sb) {
            it_sum_wave(sa, 7, a.be, a.nbe);
            it_sum_wave(sb, 8, b.be, b.nbe);
            it_sum_wave(sa, 9, a.be, a.nbe);
        }
        it_stop(&b);
    }
    it_stop(&a);
}

/* ---- null: every back-end's own packet, with its rank as source ---- */

ITEST(filter_null_sources)
{
    it_tree_t t;
    if (it_start(&t, "4x4", NULL, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_NULL, TBON_SYNC_WAITFORALL, 0);
    for (uint32_t w = 1; s && w <= 2; w++) {
        REQUIRE(tbon_stream_send(s, IT_TAG_WAVE, "%ud", w) == 0);
        int seen[IT_MAX_BE] = { 0 };
        for (size_t i = 0; i < t.nbe; i++) {
            tbon_packet_t *p = it_recv(s, IT_RECV_MS, "null wave");
            if (!p)
                break;
            int64_t v = -1;
            tbon_rank_t src = tbon_packet_source(p);
            CHECK_INT(tbon_packet_unpack(p, "%ld", &v), 0);
            CHECK_INT(v, (int64_t)src * 1000 + w);
            size_t k = 0;
            while (k < t.nbe && t.be[k] != src)
                k++;
            if (k == t.nbe)
                th_fail(__FILE__, __LINE__, "source %u is not a back-end", (unsigned)src);
            else
                CHECK_INT(seen[k]++, 0);
            tbon_packet_unref(p);
        }
        it_expect_nothing(s, 100, "null wave");
    }
    it_stop(&t);
}

/* ---- sum, min, max, avg over every scalar type ---- */

/* Receive one answer to request 110+ty and compare it with exp (integers,
 * normalised as it_type_ival) or fexp (float types). */
static void check_type_answer(tbon_stream_t *s, int ty, int64_t exp, double fexp,
                              const char *fname)
{
    char what[80];
    snprintf(what, sizeof what, "%s of %s", fname, it_type_fmt[ty]);
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, what);
    if (!p)
        return;
    int64_t got = 0;
    double fgot = 0;
    int rc = TBON_EFORMAT;
    union { char c; unsigned char uc; int16_t hd; uint16_t uhd; int32_t d; uint32_t ud;
            int64_t ld; uint64_t uld; float f; double lf; } u;
    switch (ty) {
    case IT_T_C:   rc = tbon_packet_unpack(p, "%c", &u.c);     got = (int8_t)u.c; break;
    case IT_T_UC:  rc = tbon_packet_unpack(p, "%uc", &u.uc);   got = u.uc; break;
    case IT_T_HD:  rc = tbon_packet_unpack(p, "%hd", &u.hd);   got = u.hd; break;
    case IT_T_UHD: rc = tbon_packet_unpack(p, "%uhd", &u.uhd); got = u.uhd; break;
    case IT_T_D:   rc = tbon_packet_unpack(p, "%d", &u.d);     got = u.d; break;
    case IT_T_UD:  rc = tbon_packet_unpack(p, "%ud", &u.ud);   got = u.ud; break;
    case IT_T_LD:  rc = tbon_packet_unpack(p, "%ld", &u.ld);   got = u.ld; break;
    case IT_T_ULD: rc = tbon_packet_unpack(p, "%uld", &u.uld); got = (int64_t)u.uld; break;
    case IT_T_F:   rc = tbon_packet_unpack(p, "%f", &u.f);     fgot = u.f; break;
    case IT_T_LF:  rc = tbon_packet_unpack(p, "%lf", &u.lf);   fgot = u.lf; break;
    }
    if (rc != 0)
        th_fail(__FILE__, __LINE__, "%s: format \"%s\"", what, tbon_packet_format(p));
    else if (ty >= IT_T_F && fgot != fexp)
        th_fail(__FILE__, __LINE__, "%s: %.17g, expected %.17g", what, fgot, fexp);
    else if (ty < IT_T_F && got != exp)
        th_fail(__FILE__, __LINE__, "%s: %lld, expected %lld", what, (long long)got,
                (long long)exp);
    CHECK_INT(tbon_packet_tag(p), IT_TAG_TYPE0 + ty);
    tbon_packet_unref(p);
}

/* Truncate a 64-bit sum to integer type ty, as the wire type wraps. */
static int64_t norm(int ty, uint64_t v)
{
    switch (ty) {
    case IT_T_C:   return (int8_t)(uint8_t)v;
    case IT_T_UC:  return (uint8_t)v;
    case IT_T_HD:  return (int16_t)(uint16_t)v;
    case IT_T_UHD: return (uint16_t)v;
    case IT_T_D:   return (int32_t)(uint32_t)v;
    case IT_T_UD:  return (uint32_t)v;
    default:       return (int64_t)v;
    }
}

static int is_unsigned(int ty)
{
    return ty == IT_T_UC || ty == IT_T_UHD || ty == IT_T_UD || ty == IT_T_ULD;
}

/* One wave per type on a stream with filter f; compare with the fold. */
static void fold_all_types(const char *shape, int f, const char *fname)
{
    it_tree_t t;
    if (it_start(&t, shape, NULL, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, f, TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    for (int ty = 0; s && ty < IT_NTYPES; ty++) {
        uint32_t wave = (uint32_t)(ty + 1);
        uint64_t isum = 0;
        int64_t imin = 0, imax = 0;
        double fsum = 0, fmn = 0, fmx = 0;
        for (size_t i = 0; i < t.nbe; i++) {
            int64_t v = it_type_ival(ty, t.be[i], wave);
            double fv = it_type_fval(ty, t.be[i], wave);
            isum += (uint64_t)v;
            fsum += fv;
            if (i == 0 || (is_unsigned(ty) ? (uint64_t)v < (uint64_t)imin : v < imin))
                imin = v;
            if (i == 0 || (is_unsigned(ty) ? (uint64_t)v > (uint64_t)imax : v > imax))
                imax = v;
            if (i == 0 || fv < fmn)
                fmn = fv;
            if (i == 0 || fv > fmx)
                fmx = fv;
        }
        int64_t exp = 0;
        double fexp = 0;
        switch (f) {
        case TBON_FILTER_SUM: exp = norm(ty, isum); fexp = fsum; break;
        case TBON_FILTER_MIN: exp = imin; fexp = fmn; break;
        case TBON_FILTER_MAX: exp = imax; fexp = fmx; break;
        }
        if (ty == IT_T_F)
            fexp = (float)fexp;   /* exact anyway: halves of small numbers */
        if (tbon_stream_send(s, IT_TAG_TYPE0 + ty, "%ud", wave) != 0) {
            th_fail(__FILE__, __LINE__, "send type %d", ty);
            break;
        }
        check_type_answer(s, ty, exp, fexp, fname);
    }
    if (s)
        it_expect_nothing(s, 100, fname);
    it_stop(&t);
}

ITEST(filter_sum_all_types) { fold_all_types("1x2x4", TBON_FILTER_SUM, "sum"); }
ITEST(filter_min_all_types) { fold_all_types("2x3", TBON_FILTER_MIN, "min"); }
ITEST(filter_max_all_types) { fold_all_types("2x3", TBON_FILTER_MAX, "max"); }

/* The sum of a multi-field packet is field-wise, arrays element-wise. */
ITEST(filter_sum_multi_field)
{
    it_tree_t t;
    if (it_start(&t, "2x3", NULL, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_SUM, TBON_SYNC_WAITFORALL, 0);
    if (s && tbon_stream_send(s, IT_TAG_MULTI, "%ud", 5u) == 0) {
        tbon_packet_t *p = it_recv(s, IT_RECV_MS, "multi-field sum");
        if (p) {
            int64_t a = 0;
            double *v = NULL;
            size_t n = 0;
            int64_t ea = 0;
            double e0 = 0, e1 = 0;
            for (size_t i = 0; i < t.nbe; i++) {
                ea += (int64_t)t.be[i] + 5;
                e0 += t.be[i] * 0.5;
                e1 -= t.be[i];
            }
            CHECK_INT(tbon_packet_unpack(p, "%ld %alf", &a, &v, &n), 0);
            CHECK_INT(a, ea);
            CHECK_UINT(n, 3);
            if (v && n == 3) {
                CHECK(v[0] == e0);
                CHECK(v[1] == e1);
                CHECK(v[2] == 5.0 * (double)t.nbe);
            }
            free(v);
            tbon_packet_unref(p);
        }
    }
    it_stop(&t);
}

/* avg: the mean over all back-ends ("%lf" at the FE), for every type. */
ITEST(filter_avg_all_types)
{
    it_tree_t t;
    if (it_start(&t, "4x4", NULL, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_AVG, TBON_SYNC_WAITFORALL, 0);
    for (int ty = -1; s && ty < IT_NTYPES; ty++) {
        uint32_t wave = (uint32_t)(ty + 2);
        double sum = 0;
        for (size_t i = 0; i < t.nbe; i++) {
            if (ty < 0)
                sum += (double)t.be[i] * 1000 + wave;
            else if (ty >= IT_T_F)
                sum += it_type_fval(ty, t.be[i], wave);
            else if (ty == IT_T_ULD)
                sum += (double)(uint64_t)it_type_ival(ty, t.be[i], wave);
            else
                sum += (double)it_type_ival(ty, t.be[i], wave);
        }
        double exp = sum / (double)t.nbe, got = NAN;
        int tag = ty < 0 ? IT_TAG_WAVE : IT_TAG_TYPE0 + ty;
        if (tbon_stream_send(s, tag, "%ud", wave) != 0)
            break;
        tbon_packet_t *p = it_recv(s, IT_RECV_MS, "avg");
        if (!p)
            break;
        if (tbon_packet_unpack(p, "%lf", &got) != 0)
            th_fail(__FILE__, __LINE__, "avg of %s: format \"%s\", expected \"%%lf\"",
                    ty < 0 ? "%ld" : it_type_fmt[ty], tbon_packet_format(p));
        else if (got != exp)
            th_fail(__FILE__, __LINE__, "avg of %s: %.17g, expected %.17g",
                    ty < 0 ? "%ld" : it_type_fmt[ty], got, exp);
        tbon_packet_unref(p);
    }
    it_stop(&t);
}

/* ---- concat: exactly every back-end's elements ---- */

ITEST(filter_concat)
{
    it_tree_t t;
    if (it_start(&t, "4x4", NULL, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_CONCAT, TBON_SYNC_WAITFORALL, 0);
    for (uint32_t w = 3; s && w <= 4; w++) {
        REQUIRE(tbon_stream_send(s, IT_TAG_CONCAT, "%ud", w) == 0);
        tbon_packet_t *p = it_recv(s, IT_RECV_MS, "concat");
        if (!p)
            break;
        int32_t *v = NULL;
        size_t n = 0;
        CHECK_INT(tbon_packet_unpack(p, "%ad", &v, &n), 0);
        CHECK_UINT(n, 2 * t.nbe);
        int seen[IT_MAX_BE] = { 0 };
        for (size_t i = 0; v && i + 1 < n; i += 2) {
            size_t k = 0;
            while (k < t.nbe && (int32_t)t.be[k] != v[i])
                k++;
            if (k == t.nbe)
                th_fail(__FILE__, __LINE__, "element %zu = %d is not a back-end", i, v[i]);
            else
                CHECK_INT(seen[k]++, 0);
            CHECK_INT(v[i + 1], (int32_t)w);
        }
        free(v);
        tbon_packet_unref(p);
    }
    /* Strings: "%s" from each back-end make one "%as". */
    if (s && tbon_stream_send(s, IT_TAG_ECHO, "%s", "hello, tree") == 0) {
        tbon_packet_t *p = it_recv(s, IT_RECV_MS, "concat of strings");
        char **v = NULL;
        size_t n = 0;
        if (p) {
            CHECK_INT(tbon_packet_unpack(p, "%as", &v, &n), 0);
            CHECK_UINT(n, t.nbe);
            for (size_t i = 0; v && i < n; i++) {
                CHECK_STR(v[i], "hello, tree");
                free(v[i]);
            }
            free(v);
            tbon_packet_unref(p);
        }
    }
    it_stop(&t);
}

/* ---- union: each wave gives exactly its values not seen before ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The built-in union keeps the set of values seen on the stream and outputs
 * per wave one sorted "%auld" of the new ones (filter_union.c): the first
 * wave gives everything, a new wave number only its 1000000 + wave, and a
 * repeated wave nothing (an empty array): idempotence. */
ITEST(filter_union)
{
    it_tree_t t;
    if (it_start(&t, "4x4", NULL, NULL))
        return;
    tbon_stream_t *s = it_stream(t.net, TBON_FILTER_UNION, TBON_SYNC_WAITFORALL, 0);
    const uint32_t waves[] = { 1, 2, 2, 1, 3 };
    for (size_t wi = 0; s && wi < sizeof waves / sizeof waves[0]; wi++) {
        uint64_t exp[IT_MAX_BE + 8];
        size_t ne = 0;
        if (wi == 0) {
            for (size_t i = 0; i < t.nbe; i++)
                exp[ne++] = t.be[i];
            exp[ne++] = 0;
            exp[ne++] = 1;
            exp[ne++] = 2;
        }
        int before = 0;
        for (size_t k = 0; k < wi; k++)
            before |= waves[k] == waves[wi];
        if (!before)
            exp[ne++] = 1000000u + waves[wi];
        qsort(exp, ne, sizeof exp[0], cmp_u64);
        REQUIRE(tbon_stream_send(s, IT_TAG_UNION, "%ud", waves[wi]) == 0);
        tbon_packet_t *p = it_recv(s, IT_RECV_MS, "union");
        if (!p)
            break;
        uint64_t *v = NULL;
        size_t n = 0;
        CHECK_INT(tbon_packet_unpack(p, "%auld", &v, &n), 0);
        if (n != ne || (n && memcmp(v, exp, n * sizeof *v) != 0)) {
            th_fail(__FILE__, __LINE__, "union wave %zu (number %u): %zu values, "
                    "expected %zu", wi, waves[wi], n, ne);
            for (size_t i = 0; i < n && i < 40; i++)
                fprintf(stderr, "      got[%zu] = %llu\n", i, (unsigned long long)v[i]);
        }
        free(v);
        tbon_packet_unref(p);
    }
    if (s)
        it_expect_nothing(s, 100, "union");
    it_stop(&t);
}
