/* test_filter_union.c - the built-in union filter: new values per wave, the
 * state and its packet, idempotence, errors, large waves against a plain
 * reference, and state composition after a lost commnode (seed 003) */
#include "../harness.h"
#include "filter/filter.h"
#include "codec/packet_int.h"
#include "lib/sanitizer.h"

#include <stdarg.h>
#include <stdlib.h>

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

/* Run union at the given depth. */
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

/* The values of a "%auld" packet as a string "1 3 5". */
static const char *vals(const tbon_packet_t *p)
{
    static char buf[4096];
    size_t n, off = 0;
    buf[0] = '\0';
    if (!p || strcmp(tbon_packet_format(p), "%auld") != 0)
        return "(not %auld)";
    const uint8_t *d = tb_packet_field(p, 0, &n);
    for (size_t i = 0; i < n && off < sizeof buf - 24; i++)
        off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%llu", i ? " " : "",
                                (unsigned long long)tb_elem_get_u64(TB_F_ULD, d + 8 * i));
    return buf;
}

static tbon_packet_t *set(tbon_rank_t src, int tag, const uint64_t *v, size_t n)
{
    return pk(src, tag, "%auld", v, n);
}

/* One wave through union with the given state; returns its one output. */
static tbon_packet_t *uwave(void **state, tbon_packet_t **in, size_t n, uint32_t depth)
{
    tbon_packet_list_t out;
    tbon_error_t err = {0};
    tb_plist_init(&out);
    int rc = run(TBON_FILTER_UNION, in, n, &out, state, depth, &err);
    if (rc || out.n != 1) {
        fprintf(stderr, "    union wave: rc %d, %zu outputs: %s\n", rc, out.n, err.msg);
        tb_plist_free(&out);
        return NULL;
    }
    tbon_packet_t *p = tbon_packet_ref(out.v[0]);
    tb_plist_free(&out);
    return p;
}

TEST(union_outputs_new_values_and_keeps_state)
{
    const tb_filter_t *u = tb_filter_builtin(TBON_FILTER_UNION);
    void *state = NULL;
    CHECK(u->get_state(&state, 9) == NULL);     /* nothing seen yet */

    tbon_packet_t *w1[3] = { set(1, 140, (uint64_t[]){5, 3, 3, 9}, 4),
                             set(2, 141, (uint64_t[]){1, 5}, 2), pk(3, 142, "%uld", (uint64_t)4) };
    tbon_packet_t *p = uwave(&state, w1, 3, 1);
    REQUIRE(p);
    CHECK_STR(vals(p), "1 3 4 5 9");
    CHECK_INT(tbon_packet_tag(p), 140);
    CHECK_UINT(tbon_packet_source(p), TBON_RANK_NONE);
    tbon_packet_unref(p);
    unref_all(w1, 3);

    tbon_packet_t *w2[2] = { set(1, 150, (uint64_t[]){9, 10, 1, UINT64_MAX}, 4),
                             set(2, 150, NULL, 0) };
    REQUIRE((p = uwave(&state, w2, 2, 1)));
    CHECK_STR(vals(p), "10 18446744073709551615");
    tbon_packet_unref(p);
    /* The same wave again: nothing new, an empty set (one packet per wave). */
    REQUIRE((p = uwave(&state, w2, 2, 1)));
    CHECK_STR(vals(p), "");
    tbon_packet_unref(p);
    unref_all(w2, 2);

    tbon_packet_t *s = u->get_state(&state, 9);
    REQUIRE(s);
    CHECK_STR(vals(s), "1 3 4 5 9 10 18446744073709551615");
    CHECK_INT(tbon_packet_tag(s), 150);
    /* Idempotent: folding the state into itself adds nothing. */
    REQUIRE((p = uwave(&state, &s, 1, 1)));
    CHECK_STR(vals(p), "");
    tbon_packet_unref(p);
    tbon_packet_unref(s);
    tb_filter_state_free(u, &state);
    CHECK(state == NULL);
}

TEST(union_errors_leave_the_state_alone)
{
    const tb_filter_t *u = tb_filter_builtin(TBON_FILTER_UNION);
    void *state = NULL;
    tbon_packet_t *ok[1] = { set(1, 100, (uint64_t[]){2, 1}, 2) };
    tbon_packet_t *p = uwave(&state, ok, 1, 0);
    REQUIRE(p);
    tbon_packet_unref(p);
    static const struct { const char *fmt; } bad[] = { {"%ald"}, {"%auld %uld"}, {"%ud"}, {""} };
    tbon_packet_t *b[4] = { pk(7, 100, "%ald", (int64_t[]){3}, (size_t)1),
                            pk(7, 100, "%auld %uld", (uint64_t[]){3}, (size_t)1, (uint64_t)4),
                            pk(7, 100, "%ud", 3u), pk(7, 100, "") };
    for (int i = 0; i < 4; i++) {
        tbon_packet_t *in[2] = { set(1, 100, (uint64_t[]){3}, 1), b[i] };
        tbon_packet_list_t out;
        tbon_error_t err = {0};
        char want[256];
        tb_plist_init(&out);
        CHECK_INT(run(TBON_FILTER_UNION, in, 2, &out, &state, 0, &err), TBON_EFORMAT);
        snprintf(want, sizeof want, "filter \"union\": input 1 (from rank 7) has format "
                 "\"%s\"; union takes \"%%auld\" or \"%%uld\"", bad[i].fmt);
        CHECK_STR(err.msg, want);
        CHECK_INT(out.n, 0);
        tb_plist_free(&out);
        tbon_packet_unref(in[0]);
    }
    tbon_packet_t *s = u->get_state(&state, 0);
    CHECK_STR(vals(s), "1 2");     /* 3 of the failed waves is not in */
    tbon_packet_unref(s);
    unref_all(b, 4);
    unref_all(ok, 1);
    tb_filter_state_free(u, &state);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Check that the "%auld" packet p holds exactly want[0..n), in order. */
static void check_values(const tbon_packet_t *p, const uint64_t *want, size_t n)
{
    size_t cnt;
    const uint8_t *d = tb_packet_field(p, 0, &cnt);
    CHECK_UINT(cnt, n);
    int same = cnt == n;
    for (size_t i = 0; same && i < n; i++)
        same = tb_elem_get_u64(TB_F_ULD, d + 8 * i) == want[i];
    CHECK(same);
}

/* Drop repeats from sorted v[0..n); the new count. */
static size_t unique_u64(uint64_t *v, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (!w || v[w - 1] != v[i])
            v[w++] = v[i];
    return w;
}

/* Large random waves (the radix sort path, the hash growing, duplicates
 * inside and across waves, values above 2^63, 0) and small waves against a
 * large state (mostly values the hash knows), checked against a plain
 * reference. */
TEST(union_large_waves_match_a_reference)
{
    if (UNDER_TSAN) {
        /* one thread: nothing for ThreadSanitizer to see, 7 s of its time */
        printf("    (skipped under TSan: single-threaded; plain and ASan run it)\n");
        return;
    }
    enum { WAVES = 6, KIDS = 4, PER = 25000 };
    uint64_t rng = 0x1234567;
    uint64_t *ref = malloc(sizeof(uint64_t) * (WAVES * KIDS * PER + 1000));
    uint64_t *v = malloc(sizeof(uint64_t) * PER);
    size_t nref = 0;
    void *state = NULL;
    REQUIRE(ref && v);
    for (int w = 0; w < WAVES + 40; w++) {
        int big = w < WAVES;
        tbon_packet_t *in[KIDS];
        size_t per = big ? PER : 7;
        uint64_t *wave = malloc(sizeof(uint64_t) * KIDS * per);
        size_t nw = 0;
        for (int k = 0; k < KIDS; k++) {
            for (size_t i = 0; i < per; i++) {
                uint64_t r = th_rand(&rng);
                /* Mostly a small range (duplicates), some of the full range. */
                v[i] = (r & 3) ? r % 200000 : r;
                if (!big && (r & 4))
                    v[i] = ref[r % nref];          /* already known */
                wave[nw++] = v[i];
            }
            if (k == 1)   /* a child union's output is sorted */
                qsort(v, per, sizeof *v, cmp_u64);
            in[k] = set((tbon_rank_t)k, 100, v, per);
        }
        /* The reference: the wave's values not already in ref, sorted. */
        qsort(wave, nw, sizeof *wave, cmp_u64);
        size_t nn = 0;
        for (size_t i = 0; i < nw; i++) {
            if (i && wave[i] == wave[i - 1])
                continue;
            if (!bsearch(&wave[i], ref, nref, sizeof *ref, cmp_u64))
                wave[nn++] = wave[i];
        }
        tbon_packet_t *p = uwave(&state, in, KIDS, 1);
        REQUIRE(p);
        check_values(p, wave, nn);
        tbon_packet_unref(p);
        unref_all(in, KIDS);
        ref = realloc(ref, sizeof(uint64_t) * (nref + nn + WAVES * KIDS * PER));
        memcpy(ref + nref, wave, nn * sizeof *wave);
        nref += nn;
        qsort(ref, nref, sizeof *ref, cmp_u64);
        free(wave);
    }
    /* The state is the reference set. */
    tbon_packet_t *s = tb_filter_builtin(TBON_FILTER_UNION)->get_state(&state, 1);
    REQUIRE(s);
    check_values(s, ref, nref);
    tbon_packet_unref(s);
    tb_filter_state_free(tb_filter_builtin(TBON_FILTER_UNION), &state);
    free(ref);
    free(v);
}

/* State composition as in seed 003 section IV-C: FE <- C1 <- {C2, C3} <- BEs.
 * C1 dies with a wave in flight (its output never reaches the FE); C2 and C3
 * are adopted by the FE and send their get_FilterState packets to it as
 * ordinary input. The FE's state is then the union of all BE input. */
TEST(union_state_composition_recovers_a_lost_commnode)
{
    const tb_filter_t *u = tb_filter_builtin(TBON_FILTER_UNION);
    void *fe = NULL, *c1 = NULL, *c2 = NULL, *c3 = NULL;
    tbon_packet_t *p, *q, *r;

    /* Wave 1 goes all the way up. */
    tbon_packet_t *b1[2] = { set(10, 100, (uint64_t[]){1, 2}, 2), set(11, 100, (uint64_t[]){2, 3}, 2) };
    tbon_packet_t *b2[2] = { set(12, 100, (uint64_t[]){7}, 1), set(13, 100, (uint64_t[]){1, 8}, 2) };
    REQUIRE((p = uwave(&c2, b1, 2, 2)) && (q = uwave(&c3, b2, 2, 2)));
    tbon_packet_t *mid[2] = { p, q };
    REQUIRE((r = uwave(&c1, mid, 2, 1)));
    tbon_packet_unref(p);
    tbon_packet_unref(q);
    tbon_packet_t *top = r;
    REQUIRE((r = uwave(&fe, &top, 1, 0)));
    CHECK_STR(vals(r), "1 2 3 7 8");
    tbon_packet_unref(r);
    tbon_packet_unref(top);
    unref_all(b1, 2);
    unref_all(b2, 2);

    /* Wave 2 reaches C2, C3 and C1, which dies before sending. */
    tbon_packet_t *b3[2] = { set(10, 100, (uint64_t[]){4}, 1), set(11, 100, (uint64_t[]){5, 1}, 2) };
    tbon_packet_t *b4[2] = { set(12, 100, (uint64_t[]){6}, 1), set(13, 100, (uint64_t[]){8}, 1) };
    REQUIRE((p = uwave(&c2, b3, 2, 2)) && (q = uwave(&c3, b4, 2, 2)));
    CHECK_STR(vals(p), "4 5");
    CHECK_STR(vals(q), "6");
    tbon_packet_t *mid2[2] = { p, q };
    REQUIRE((r = uwave(&c1, mid2, 2, 1)));
    tbon_packet_unref(r);                       /* lost with C1 */
    tbon_packet_unref(p);
    tbon_packet_unref(q);
    tb_filter_state_free(u, &c1);
    unref_all(b3, 2);
    unref_all(b4, 2);

    /* Adoption: the orphans send their state to the FE. */
    tbon_packet_t *comp[2] = { u->get_state(&c2, 9), u->get_state(&c3, 9) };
    REQUIRE(comp[0] && comp[1]);
    REQUIRE((r = uwave(&fe, comp, 2, 0)));
    CHECK_STR(vals(r), "4 5 6");                /* exactly what was lost */
    tbon_packet_unref(r);
    unref_all(comp, 2);
    tbon_packet_t *s = u->get_state(&fe, 9);
    CHECK_STR(vals(s), "1 2 3 4 5 6 7 8");
    tbon_packet_unref(s);
    tb_filter_state_free(u, &fe);
    tb_filter_state_free(u, &c2);
    tb_filter_state_free(u, &c3);
}

/* A back-end's keep path (tb_filter_keep with the union's keep function):
 * many small packets appended and absorbed in bulk, with repeats, 0 and values
 * above 2^63; the state packet is exactly the set sent; the same state then
 * runs ordinary waves (the hash is built on the way) and outputs only what it
 * had not kept; a packet of the wrong format is an error that keeps nothing. */
TEST(union_keep_folds_what_a_back_end_sends)
{
    enum { PKTS = 9000, PER = 8 };
    const tb_filter_t *u = tb_filter_builtin(TBON_FILTER_UNION);
    tbon_filter_ctx_t ctx = { 5, 0, 2, 9, NULL };
    tbon_error_t err;
    uint64_t rng = 0xfeedbeef;
    uint64_t *ref = malloc(sizeof(uint64_t) * PKTS * PER);
    size_t nref = 0;
    void *state = NULL;
    REQUIRE(ref && u->keep);
    for (int k = 0; k < PKTS; k++) {
        uint64_t v[PER];
        for (int i = 0; i < PER; i++) {
            uint64_t r = th_rand(&rng);
            v[i] = (r & 7) ? r % 30000 : r;        /* mostly repeats, some huge */
            if (k == 17 && i == 3)
                v[i] = 0;
            ref[nref++] = v[i];
        }
        tbon_packet_t *p = set(5, 100, v, PER);
        CHECK_INT(tb_filter_keep(u, &p, 1, &state, &ctx, &err), 0);
        tbon_packet_unref(p);
    }
    qsort(ref, nref, sizeof *ref, cmp_u64);
    nref = unique_u64(ref, nref);

    /* A wrong format: an error naming the filter, nothing kept. */
    tbon_packet_t *bad = pk(5, 100, "%d", 7);
    CHECK(tb_filter_keep(u, &bad, 1, &state, &ctx, &err) != 0);
    CHECK(strstr(err.msg, "union") != NULL);
    tbon_packet_unref(bad);

    tbon_packet_t *s = u->get_state(&state, 9);
    REQUIRE(s);
    check_values(s, ref, nref);
    tbon_packet_unref(s);

    /* Keep a little more (not yet absorbed), then an ordinary wave with
     * known, kept-but-pending and new values: only the new ones come out. */
    tbon_packet_t *more = set(5, 100, (uint64_t[]){ 123456789, 0 }, 2);
    CHECK_INT(tb_filter_keep(u, &more, 1, &state, &ctx, &err), 0);
    tbon_packet_unref(more);
    tbon_packet_t *w = set(6, 100, (uint64_t[]){ ref[0], ref[nref - 1], 123456789, 0,
                                                 987654321, 987654321 }, 6);
    tbon_packet_t *r = uwave(&state, &w, 1, 2);
    CHECK_STR(vals(r), "987654321");
    tbon_packet_unref(r);
    tbon_packet_unref(w);
    w = set(6, 100, (uint64_t[]){ 987654321, 5 }, 2);
    r = uwave(&state, &w, 1, 2);
    CHECK_STR(vals(r), bsearch(&(uint64_t){ 5 }, ref, nref, sizeof *ref, cmp_u64) ? "" : "5");
    tbon_packet_unref(r);
    tbon_packet_unref(w);
    tb_filter_state_free(u, &state);
    free(ref);
}
