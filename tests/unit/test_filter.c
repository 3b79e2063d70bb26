/* test_filter.c - the filter registry (built-ins, dlopen'd plug-ins and their
 * load errors), tb_filter_run (format checks, errors, dropped partial
 * output), the output list, state freeing, and the example plug-in
 * filters/example_range.so. Plug-ins are found under $TBON_BUILD_DIR
 * (default "build"): filters/NAME.so and tests/plugins/NAME.so. */
#include "../harness.h"
#include "filter/filter.h"
#include "codec/packet_int.h"
#include "codec/packet_priv.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- helpers ---- */

/* $TBON_BUILD_DIR/rel (static buffer per call slot). */
static const char *so(const char *rel)
{
    static char bufs[8][512];
    static int slot;
    const char *b = getenv("TBON_BUILD_DIR");
    char *out = bufs[slot++ % 8];
    snprintf(out, sizeof bufs[0], "%s/%s", b && *b ? b : "build", rel);
    return out;
}

#define RANGE_SO    so("filters/example_range.so")
#define INT_SO      so("tests/plugins/filter_int_only.so")
#define FAIL_SO     so("tests/plugins/filter_fail.so")
#define STATE_SO    so("tests/plugins/filter_stateful.so")
#define NOFMT_SO    so("tests/plugins/bad_noformat.so")
#define BADFMT_SO   so("tests/plugins/filter_bad_format.so")

static tbon_packet_t *pk(tbon_rank_t src, int tag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tbon_packet_t *p = tb_packet_vcreate(tag, fmt, ap, NULL);
    va_end(ap);
    if (p)
        tb_packet_set_route(p, 3, src);
    return p;
}

static unsigned refs(const tbon_packet_t *p)
{
    return atomic_load(&p->refs);
}

static int load(tb_filter_reg_t *r, const char *path, const char *func, int id,
                tbon_error_t *err)
{
    int rc = tb_filter_reg_load(r, path, func, id, err);
    if (rc < 0 && rc != err->code)
        fprintf(stderr, "    err.code %d differs from rc %d\n", err->code, rc);
    return rc;
}

/* err->msg must contain every one of the NULL-terminated strings. */
static int msg_has(const tbon_error_t *err, ...)
{
    va_list ap;
    const char *s;
    int ok = 1;
    va_start(ap, err);
    while ((s = va_arg(ap, const char *)))
        if (!strstr(err->msg, s)) {
            fprintf(stderr, "    message \"%s\" lacks \"%s\"\n", err->msg, s);
            ok = 0;
        }
    va_end(ap);
    return ok;
}

/* ---- the output list ---- */

TEST(plist_push_grow_clear_free)
{
    tbon_packet_list_t l;
    tbon_packet_t *p = pk(1, 100, "%d", 5);
    tb_plist_init(&l);
    CHECK(l.n == 0 && l.cap == 0 && l.v == NULL);
    for (int i = 0; i < 1000; i++)
        REQUIRE(tbon_packet_list_push(&l, tbon_packet_ref(p)) == 0);
    CHECK_UINT(l.n, 1000);
    CHECK(l.cap >= 1000);
    CHECK_UINT(refs(p), 1001);
    for (size_t i = 0; i < l.n; i++)
        CHECK(l.v[i] == p);
    tb_plist_clear(&l);
    CHECK_UINT(l.n, 0);
    CHECK_UINT(refs(p), 1);
    CHECK(l.cap >= 1000);                        /* still usable, no realloc */
    REQUIRE(tbon_packet_list_push(&l, tbon_packet_ref(p)) == 0);
    CHECK_UINT(refs(p), 2);
    tb_plist_free(&l);
    CHECK(l.n == 0 && l.cap == 0 && l.v == NULL);
    CHECK_UINT(refs(p), 1);
    tb_plist_free(&l);                           /* twice is fine */

    /* A NULL list or packet is EINVAL, and a given packet is released. */
    CHECK_INT(tbon_packet_list_push(NULL, tbon_packet_ref(p)), TBON_EINVAL);
    CHECK_UINT(refs(p), 1);
    CHECK_INT(tbon_packet_list_push(&l, NULL), TBON_EINVAL);
    CHECK_UINT(l.n, 0);
    tbon_packet_unref(p);
}

/* ---- the registry ---- */

TEST(registry_has_the_builtins)
{
    tb_filter_reg_t *r = tb_filter_reg_new();
    REQUIRE(r);
    for (int i = 0; i < TBON_FILTER_BUILTIN_COUNT; i++) {
        const tb_filter_t *f = tb_filter_reg_get(r, i);
        REQUIRE(f);
        CHECK(f == tb_filter_builtin(i));
        CHECK_INT(f->id, i);
    }
    CHECK_INT(TBON_FILTER_NULL, 0);
    CHECK_INT(TBON_FILTER_UNION, 6);
    CHECK_INT(TBON_FILTER_BUILTIN_COUNT, 7);
    CHECK_STR(tb_filter_reg_get(r, TBON_FILTER_AVG)->name, "avg");
    CHECK(tb_filter_reg_get(r, -1) == NULL);
    CHECK(tb_filter_reg_get(r, TBON_FILTER_BUILTIN_COUNT) == NULL);
    CHECK(tb_filter_reg_get(r, 100000) == NULL);
    CHECK(tb_filter_reg_get(NULL, TBON_FILTER_SUM) == tb_filter_builtin(TBON_FILTER_SUM));
    tb_filter_reg_destroy(r);
    tb_filter_reg_destroy(NULL);
}

TEST(load_plugins_ids_and_symbols)
{
    tb_filter_reg_t *r = tb_filter_reg_new();
    tbon_error_t err = {0};
    REQUIRE(r);
    int id = load(r, RANGE_SO, "range", -1, &err);
    REQUIRE(id == TBON_FILTER_BUILTIN_COUNT);
    const tb_filter_t *f = tb_filter_reg_get(r, id);
    REQUIRE(f);
    CHECK_INT(f->id, id);
    CHECK_STR(f->name, "range");
    CHECK_STR(f->path, RANGE_SO);
    CHECK(f->dl != NULL && f->fn != NULL);
    CHECK_STR(f->format, "");
    CHECK(f->get_state != NULL && f->free_state != NULL);

    /* The same path and function again: the same id, nothing new. */
    CHECK_INT(load(r, RANGE_SO, "range", -1, &err), id);
    CHECK_INT(load(r, RANGE_SO, "range", id, &err), id);
    /* The same object under another spelling of its path. */
    char other[600];
    snprintf(other, sizeof other, "%s/../filters/example_range.so", so("filters"));
    CHECK_INT(load(r, other, "range", -1, &err), id);

    /* Two filters of one object; the next ids in order. */
    int a = load(r, INT_SO, "int_only", -1, &err);
    int b = load(r, INT_SO, "spaced", -1, &err);
    CHECK_INT(a, id + 1);
    CHECK_INT(b, id + 2);
    CHECK_STR(tb_filter_reg_get(r, a)->format, "%d");
    CHECK_STR(tb_filter_reg_get(r, b)->format, " %d   %ld ");
    CHECK(tb_filter_reg_get(r, a)->get_state == NULL);
    CHECK(tb_filter_reg_get(r, a)->free_state == NULL);

    /* An explicit id (as a commnode loads what the FE numbered), then the
     * next free one fills the gap below it. */
    CHECK_INT(load(r, STATE_SO, "count_waves", 40, &err), 40);
    CHECK_STR(tb_filter_reg_get(r, 40)->name, "count_waves");
    CHECK(tb_filter_reg_get(r, 39) == NULL);
    CHECK_INT(load(r, FAIL_SO, "fail_plain", -1, &err), id + 3);
    /* The same filter under a second explicit id is an alias. */
    CHECK_INT(load(r, RANGE_SO, "range", 41, &err), 41);
    CHECK(tb_filter_reg_get(r, 41)->fn == f->fn);
    tb_filter_reg_destroy(r);
}

TEST(load_errors)
{
    tb_filter_reg_t *r = tb_filter_reg_new();
    tbon_error_t err = {0};
    char want[512];
    REQUIRE(r);

    CHECK_INT(load(r, so("filters/no_such.so"), "f", -1, &err), TBON_EFILTER);
    CHECK(msg_has(&err, so("filters/no_such.so"), "\"f\"",
                  "cannot open shared object file", (char *)NULL));

    CHECK_INT(load(r, RANGE_SO, "nope", -1, &err), TBON_EFILTER);
    snprintf(want, sizeof want, "%s: no filter function \"nope\": %s: undefined symbol: nope",
             RANGE_SO, RANGE_SO);
    CHECK_STR(err.msg, want);

    CHECK_INT(load(r, NOFMT_SO, "bad_noformat", -1, &err), TBON_EFILTER);
    snprintf(want, sizeof want, "%s: filter \"bad_noformat\" lacks "
             "\"bad_noformat_format_string\" (export: const char "
             "bad_noformat_format_string[] = \"...\"; \"\" accepts any format): "
             "%s: undefined symbol: bad_noformat_format_string", NOFMT_SO, NOFMT_SO);
    CHECK_STR(err.msg, want);

    CHECK_INT(load(r, BADFMT_SO, "badfmt", -1, &err), TBON_EFILTER);
    CHECK(msg_has(&err, BADFMT_SO, "\"badfmt\"", "badfmt_format_string is not a valid "
                  "format", "%d %q", (char *)NULL));

    /* A data symbol is no reason to fail on F_get_FilterState being absent. */
    CHECK_INT(load(r, FAIL_SO, "fail_msg", -1, &err), TBON_FILTER_BUILTIN_COUNT);

    /* Ids. */
    CHECK_INT(load(r, FAIL_SO, "fail_plain", TBON_FILTER_SUM, &err), TBON_EINVAL);
    CHECK(msg_has(&err, "as id 1", "ids 7..65535", (char *)NULL));
    CHECK_INT(load(r, FAIL_SO, "fail_plain", 65536, &err), TBON_EINVAL);
    CHECK_INT(load(r, FAIL_SO, "fail_plain", TBON_FILTER_BUILTIN_COUNT, &err), TBON_EINVAL);
    snprintf(want, sizeof want, "%s: cannot load filter \"fail_plain\" as id 7: that id is "
             "filter \"fail_msg\" of %s", FAIL_SO, FAIL_SO);
    CHECK_STR(err.msg, want);

    /* Arguments. */
    CHECK_INT(load(r, NULL, "f", -1, &err), TBON_EINVAL);
    CHECK_INT(load(r, RANGE_SO, NULL, -1, &err), TBON_EINVAL);
    CHECK_INT(load(r, "", "f", -1, &err), TBON_EINVAL);
    CHECK_INT(tb_filter_reg_load(NULL, RANGE_SO, "range", -1, NULL), TBON_EINVAL);
    char lng[400];
    memset(lng, 'x', sizeof lng - 1);
    lng[sizeof lng - 1] = '\0';
    CHECK_INT(load(r, RANGE_SO, lng, -1, &err), TBON_EINVAL);

    /* Failed loads took no id. */
    CHECK_INT(load(r, FAIL_SO, "fail_plain", -1, &err), TBON_FILTER_BUILTIN_COUNT + 1);
    tb_filter_reg_destroy(r);
}

/* ---- running ---- */

TEST(run_checks_the_format_first)
{
    tb_filter_reg_t *r = tb_filter_reg_new();
    tbon_error_t err = {0};
    REQUIRE(r);
    int a = load(r, INT_SO, "int_only", -1, &err);
    int b = load(r, INT_SO, "spaced", -1, &err);
    REQUIRE(a > 0 && b > 0);
    tbon_filter_ctx_t ctx = { 1, 2, 1, 3, NULL };
    tbon_packet_list_t out;
    void *state = NULL;
    int32_t v;
    int64_t lv;
    tb_plist_init(&out);

    tbon_packet_t *ok[3] = { pk(4, 100, "%d", 1), pk(5, 100, "%d", 2), pk(6, 100, "%d", 39) };
    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, a), ok, 3, &out, &state, &ctx, &err), 0);
    REQUIRE(out.n == 1);
    REQUIRE(tbon_packet_unpack(out.v[0], "%d", &v) == 0);
    CHECK_INT(v, 42);

    tbon_packet_t *bad[3] = { ok[0], pk(12, 100, "%ld", (int64_t)1), ok[2] };
    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, a), bad, 3, &out, &state, &ctx, &err),
              TBON_EFILTER);
    CHECK_INT(err.code, TBON_EFILTER);
    CHECK_STR(err.msg, "filter \"int_only\" expects format \"%d\" but input 1 (from rank "
              "12) has \"%ld\"");
    CHECK_UINT(out.n, 1);                        /* nothing ran */

    /* A format with white space matches the canonical one. */
    tbon_packet_t *sp[2] = { pk(4, 100, "%d %ld", 1, (int64_t)2), pk(5, 100, "%d%ld", 3, (int64_t)4) };
    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, b), sp, 2, &out, &state, &ctx, &err), 0);
    REQUIRE(out.n == 2);
    REQUIRE(tbon_packet_unpack(out.v[1], "%ld", &lv) == 0);
    CHECK_INT(lv, 10);
    tbon_packet_t *sp2[1] = { pk(TBON_RANK_NONE, 100, "%d %d", 1, 2) };
    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, b), sp2, 1, &out, &state, &ctx, &err),
              TBON_EFILTER);
    CHECK_STR(err.msg, "filter \"spaced\" expects format \" %d   %ld \" but input 0 (from "
              "rank none) has \"%d %d\"");

    /* Bad arguments. */
    tbon_packet_t *withnull[2] = { ok[0], NULL };
    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, a), withnull, 2, &out, &state, &ctx, &err),
              TBON_EINVAL);
    CHECK_STR(err.msg, "filter \"int_only\": input 1 is NULL");
    CHECK_INT(tb_filter_run(NULL, ok, 1, &out, &state, &ctx, &err), TBON_EINVAL);
    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, a), ok, 1, NULL, &state, &ctx, &err),
              TBON_EINVAL);
    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, a), ok, 1, &out, NULL, &ctx, &err),
              TBON_EINVAL);
    CHECK_UINT(out.n, 2);

    tb_plist_free(&out);
    for (int i = 0; i < 3; i++)
        tbon_packet_unref(ok[i]);
    tbon_packet_unref(bad[1]);
    tbon_packet_unref(sp[0]);
    tbon_packet_unref(sp[1]);
    tbon_packet_unref(sp2[0]);
    tb_filter_reg_destroy(r);
}

TEST(run_filter_errors_drop_partial_output)
{
    tb_filter_reg_t *r = tb_filter_reg_new();
    tbon_error_t err = {0};
    char want[512];
    REQUIRE(r);
    int plain = load(r, FAIL_SO, "fail_plain", -1, &err);
    int msg = load(r, FAIL_SO, "fail_msg", -1, &err);
    int pos = load(r, FAIL_SO, "fail_positive", -1, &err);
    REQUIRE(plain > 0 && msg > 0 && pos > 0);
    tbon_filter_ctx_t ctx = { 1, 2, 3, 3, NULL };
    tbon_packet_list_t out;
    void *state = NULL;
    tbon_packet_t *in[2] = { pk(4, 100, "%d", 1), pk(5, 100, "%s", "x") };
    tb_plist_init(&out);
    /* Something already in the list stays. */
    REQUIRE(tbon_packet_list_push(&out, tbon_packet_ref(in[1])) == 0);

    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, plain), in, 2, &out, &state, &ctx, &err),
              TBON_EFILTER);
    snprintf(want, sizeof want, "filter \"fail_plain\" of %s failed: filter error", FAIL_SO);
    CHECK_STR(err.msg, want);
    CHECK_UINT(out.n, 1);
    CHECK(out.v[0] == in[1]);
    CHECK_UINT(refs(in[0]), 1);                  /* the pushed ref was released */

    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, msg), in, 2, &out, &state, &ctx, &err),
              TBON_EFORMAT);
    snprintf(want, sizeof want, "filter \"fail_msg\" of %s: wave of 2 packets at depth 3 "
             "rejected", FAIL_SO);
    CHECK_STR(err.msg, want);

    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, pos), in, 2, &out, &state, &ctx, &err),
              TBON_EFILTER);
    snprintf(want, sizeof want, "filter \"fail_positive\" of %s failed: filter error", FAIL_SO);
    CHECK_STR(err.msg, want);

    /* A message from an earlier failure does not leak into the next one. */
    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, plain), in, 1, &out, &state, &ctx, &err),
              TBON_EFILTER);
    CHECK(strstr(err.msg, "rejected") == NULL);

    /* Built-ins report through the same path, without a file. */
    tbon_packet_t *two[2] = { in[0], pk(9, 100, "%ld", (int64_t)2) };
    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, TBON_FILTER_SUM), two, 2, &out, &state,
                            &ctx, &err), TBON_EFORMAT);
    CHECK_STR(err.msg, "filter \"sum\": input 1 (from rank 9) has format \"%ld\" but input 0 "
              "(from rank 4) has \"%d\"; sum needs the same fields in every input");
    CHECK_UINT(out.n, 1);

    /* Success leaves err alone (callers look at the return value). */
    CHECK_INT(tb_filter_run(tb_filter_reg_get(r, TBON_FILTER_NULL), in, 2, &out, &state,
                            &ctx, NULL), 0);
    CHECK_UINT(out.n, 3);
    tb_plist_free(&out);
    tbon_packet_unref(two[1]);
    tbon_packet_unref(in[0]);
    tbon_packet_unref(in[1]);
    tb_filter_reg_destroy(r);
}

/* ---- state ---- */

TEST(state_lives_across_waves_and_is_freed_by_the_plugin)
{
    tb_filter_reg_t *r = tb_filter_reg_new();
    tbon_error_t err = {0};
    REQUIRE(r);
    int id = load(r, STATE_SO, "count_waves", -1, &err);
    REQUIRE(id > 0);
    const tb_filter_t *f = tb_filter_reg_get(r, id);
    REQUIRE(f->get_state && f->free_state);
    int *freed = dlsym(f->dl, "count_waves_freed");
    REQUIRE(freed);
    CHECK_INT(*freed, 0);

    tbon_packet_t *in[1] = { pk(2, 100, "%d", 1) };
    tbon_filter_ctx_t ctx = { 1, 1, 1, 77, NULL };
    tbon_packet_list_t out;
    void *a = NULL, *b = NULL;      /* two streams, two states */
    uint64_t w;
    uint32_t stream;
    tb_plist_init(&out);
    for (int i = 0; i < 3; i++)
        CHECK_INT(tb_filter_run(f, in, 1, &out, &a, &ctx, &err), 0);
    CHECK_INT(tb_filter_run(f, in, 1, &out, &b, &ctx, &err), 0);
    REQUIRE(out.n == 4);
    REQUIRE(tbon_packet_unpack(out.v[2], "%uld", &w) == 0);
    CHECK_UINT(w, 3);
    REQUIRE(tbon_packet_unpack(out.v[3], "%uld", &w) == 0);
    CHECK_UINT(w, 1);
    tbon_packet_t *s = f->get_state(&a, 77);
    REQUIRE(s);
    REQUIRE(tbon_packet_unpack(s, "%uld %ud", &w, &stream) == 0);
    CHECK_UINT(w, 3);
    CHECK_UINT(stream, 77);
    tbon_packet_unref(s);

    tb_filter_state_free(f, &a);
    CHECK(a == NULL);
    CHECK_INT(*freed, 1);
    tb_filter_state_free(f, &a);                  /* NULL state: nothing */
    CHECK_INT(*freed, 1);
    tb_filter_state_free(f, &b);
    CHECK_INT(*freed, 2);
    tb_filter_state_free(f, NULL);

    /* Without F_free_state (or without a filter) the state is free()d. */
    void *m = malloc(32);
    tb_filter_state_free(NULL, &m);
    CHECK(m == NULL);
    m = malloc(32);
    tb_filter_state_free(tb_filter_builtin(TBON_FILTER_SUM), &m);
    CHECK(m == NULL);

    tb_plist_free(&out);
    tbon_packet_unref(in[0]);
    tb_filter_reg_destroy(r);
}

/* ---- the example plug-in: range ---- */

/* One wave through range; its output's values. */
static int range_wave(const tb_filter_t *f, void **state, tbon_packet_t **in, size_t n,
                      uint32_t depth, int64_t *lo, int64_t *hi, uint64_t *cnt)
{
    tbon_filter_ctx_t ctx = { 1, (uint32_t)n, depth, 5, NULL };
    tbon_packet_list_t out;
    tbon_error_t err = {0};
    int rc;
    tb_plist_init(&out);
    rc = tb_filter_run(f, in, n, &out, state, &ctx, &err);
    if (rc == 0 && (out.n != 1 || strcmp(tbon_packet_format(out.v[0]), "%ld %ld %uld") ||
                    tbon_packet_unpack(out.v[0], "%ld %ld %uld", lo, hi, cnt)))
        rc = -100;
    tb_plist_free(&out);
    return rc;
}

TEST(example_range_two_levels_and_state_composition)
{
    tb_filter_reg_t *r = tb_filter_reg_new();
    tbon_error_t err = {0};
    REQUIRE(r);
    int id = load(r, RANGE_SO, "range", -1, &err);
    REQUIRE(id > 0);
    const tb_filter_t *f = tb_filter_reg_get(r, id);
    void *c1 = NULL, *c2 = NULL, *fe = NULL;
    int64_t lo, hi;
    uint64_t n;

    /* Wave 1: C1 <- {5, -7}, C2 <- {100}; FE <- {C1, C2}. */
    tbon_packet_t *b1[2] = { pk(3, 110, "%ld", (int64_t)5), pk(4, 110, "%ld", (int64_t)-7) };
    tbon_packet_t *b2[1] = { pk(5, 110, "%ld", (int64_t)100) };
    CHECK_INT(range_wave(f, &c1, b1, 2, 1, &lo, &hi, &n), 0);
    CHECK(lo == -7 && hi == 5 && n == 2);
    tbon_packet_t *m1 = pk(1, 110, "%ld %ld %uld", lo, hi, n);
    CHECK_INT(range_wave(f, &c2, b2, 1, 1, &lo, &hi, &n), 0);
    CHECK(lo == 100 && hi == 100 && n == 1);
    tbon_packet_t *m2 = pk(2, 110, "%ld %ld %uld", lo, hi, n);
    tbon_packet_t *top[2] = { m1, m2 };
    CHECK_INT(range_wave(f, &fe, top, 2, 0, &lo, &hi, &n), 0);
    CHECK(lo == -7 && hi == 100 && n == 3);
    tbon_packet_unref(m1);
    tbon_packet_unref(m2);

    /* Wave 2 is narrower; the range is running, the count per wave. */
    tbon_packet_t *b3[2] = { pk(3, 111, "%ld", (int64_t)0), pk(4, 111, "%ld", (int64_t)1) };
    CHECK_INT(range_wave(f, &c1, b3, 2, 1, &lo, &hi, &n), 0);
    CHECK(lo == -7 && hi == 5 && n == 2);

    /* C1's state packet carries its range with a count of 0, so folding it
     * in at the FE (after an adoption) changes nothing and adds no count. */
    tbon_packet_t *s = f->get_state(&c1, 5);
    REQUIRE(s);
    CHECK_STR(tbon_packet_format(s), "%ld %ld %uld");
    CHECK_INT(tbon_packet_tag(s), 111);
    tbon_packet_t *comp[1] = { s };
    CHECK_INT(range_wave(f, &fe, comp, 1, 0, &lo, &hi, &n), 0);
    CHECK(lo == -7 && hi == 100 && n == 0);
    CHECK(f->get_state(&(void *){NULL}, 5) == NULL);   /* nothing seen, nothing sent */

    /* A wrong format is refused and leaves the state alone. */
    tbon_packet_t *bad[2] = { pk(3, 112, "%ld", (int64_t)-1000), pk(4, 112, "%d", 1) };
    CHECK_INT(range_wave(f, &c1, bad, 2, 1, &lo, &hi, &n), TBON_EFORMAT);
    tbon_packet_t *s2 = f->get_state(&c1, 5);
    REQUIRE(tbon_packet_unpack(s2, "%ld %ld %uld", &lo, &hi, &n) == 0);
    CHECK(lo == -7 && hi == 5 && n == 0);

    tbon_packet_unref(s);
    tbon_packet_unref(s2);
    for (int i = 0; i < 2; i++) {
        tbon_packet_unref(b1[i]);
        tbon_packet_unref(b3[i]);
        tbon_packet_unref(bad[i]);
    }
    tbon_packet_unref(b2[0]);
    tb_filter_state_free(f, &c1);
    tb_filter_state_free(f, &c2);
    tb_filter_state_free(f, &fe);
    tb_filter_reg_destroy(r);
}
