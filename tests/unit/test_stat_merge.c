/* test_stat_merge.c - tbon_stat's merge filter (stat/stat_merge.c), called
 * in-process through tb_filter_run as a commnode would: the union of a
 * wave's trees kept in the state and sent whole, idempotence and state
 * composition, malformed inputs. The plug-in's source is compiled into this
 * test (its tree code comes from libtbonstat.a). */
#include "../harness.h"
#include "filter/filter.h"
#include "codec/packet_int.h"

#include "../../stat/stat_merge.c"

#include <stdarg.h>

static const tb_filter_t merge_filter = {
    .id = 100,
    .name = "stat_merge",
    .path = "stat_merge.so",
    .fn = stat_merge,
    .format = stat_merge_format_string,
    .get_state = stat_merge_get_FilterState,
    .free_state = stat_merge_free_state,
};

/* A tree from stacks "task:main;foo" separated by spaces. */
static st_tree_t *tree_of(const char *spec)
{
    st_tree_t *t = st_tree_new();
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); t && tok;
         tok = strtok_r(NULL, " ", &save)) {
        const char *frames[16];
        size_t n = 0;
        uint32_t task = (uint32_t)strtoul(tok, &tok, 10);
        if (*tok == ':')
            tok++;
        for (char *s2 = NULL, *f = strtok_r(tok, ";", &s2); f && n < 16;
             f = strtok_r(NULL, ";", &s2))
            frames[n++] = f;
        if (st_tree_add(t, frames, n, task) != 0) {
            st_tree_free(t);
            return NULL;
        }
    }
    return t;
}

/* A "%auc %auc" packet of two trees given as specs, from rank src;
 * counts-only trees of round when round >= 0. */
static tbon_packet_t *packet_of(int tag, tbon_rank_t src, long round, const char *spec2,
                                const char *spec3)
{
    st_tree_t *a = tree_of(spec2), *b = tree_of(spec3);
    uint8_t *ea = NULL, *eb = NULL;
    size_t la = 0, lb = 0;
    tbon_packet_t *p = NULL;
    int ok = a && b;
    if (ok && round >= 0)
        ok = st_tree_to_counts(a, (uint32_t)round) == 0 &&
             st_tree_to_counts(b, (uint32_t)round) == 0;
    if (ok && st_tree_encode(a, &ea, &la) == 0 && st_tree_encode(b, &eb, &lb) == 0)
        p = tbon_packet_new(tag, "%auc %auc", ea, la, eb, lb);
    if (p)
        tb_packet_set_route(p, 5, src);
    free(ea);
    free(eb);
    st_tree_free(a);
    st_tree_free(b);
    return p;
}

static tbon_packet_t *input(int tag, tbon_rank_t src, const char *spec2, const char *spec3)
{
    return packet_of(tag, src, -1, spec2, spec3);
}

/* 1 if packet p holds exactly the trees of the two specs. */
static int holds(const tbon_packet_t *p, const char *spec2, const char *spec3)
{
    uint8_t *b[2] = { NULL, NULL };
    size_t n[2];
    int ok = 0;
    if (!p || tbon_packet_unpack(p, "%auc %auc", &b[0], &n[0], &b[1], &n[1]) != 0)
        return 0;
    st_tree_t *got2 = st_tree_decode(b[0], n[0], NULL, 0);
    st_tree_t *got3 = st_tree_decode(b[1], n[1], NULL, 0);
    st_tree_t *want2 = tree_of(spec2), *want3 = tree_of(spec3);
    ok = got2 && got3 && want2 && want3 && st_tree_equal(got2, want2) &&
         st_tree_equal(got3, want3);
    st_tree_free(got2);
    st_tree_free(got3);
    st_tree_free(want2);
    st_tree_free(want3);
    free(b[0]);
    free(b[1]);
    return ok;
}

/* One wave; returns the filter's code, the output in *outp (a reference). */
static int wave(void **state, tbon_packet_t **in, size_t n, tbon_packet_t **outp,
                tbon_error_t *err)
{
    tbon_packet_list_t out;
    tbon_filter_ctx_t ctx = { 1, (uint32_t)n, 1, 5, NULL };
    tb_plist_init(&out);
    int rc = tb_filter_run(&merge_filter, in, n, &out, state, &ctx, err);
    *outp = out.n == 1 ? tbon_packet_ref(out.v[0]) : NULL;
    if (rc == 0 && out.n != 1 && n)
        fprintf(stderr, "    %zu outputs\n", out.n);
    tb_plist_free(&out);
    return rc;
}

static void unref_all(tbon_packet_t **in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tbon_packet_unref(in[i]);
}

TEST(merge_wave_into_state_and_send_it_whole)
{
    void *state = NULL;
    tbon_error_t err = { 0 };
    tbon_packet_t *out = NULL;

    CHECK(stat_merge_get_FilterState(&state, 5) == NULL);
    CHECK_INT(wave(&state, NULL, 0, &out, &err), 0);   /* no inputs: no output */
    CHECK(out == NULL && state == NULL);

    tbon_packet_t *w1[2] = {
        input(140, 7, "0:main;a 1:main;a", "0:main;a@f.c:3 1:main;a@f.c:3"),
        input(141, 8, "2:main;b", "2:main;b@f.c:9"),
    };
    REQUIRE(w1[0] && w1[1]);
    CHECK_INT(wave(&state, w1, 2, &out, &err), 0);
    REQUIRE(out && state);
    CHECK_INT(tbon_packet_tag(out), 140);
    CHECK_STR(tbon_packet_format(out), "%auc %auc");
    CHECK(holds(out, "0:main;a 1:main;a 2:main;b", "0:main;a@f.c:3 1:main;a@f.c:3 2:main;b@f.c:9"));
    tbon_packet_unref(out);

    /* The next wave adds to what the state has, and the output is all of it. */
    tbon_packet_t *w2[1] = { input(140, 7, "3:main;a;c", "3:main;a@f.c:4;c@f.c:1") };
    REQUIRE(w2[0]);
    CHECK_INT(wave(&state, w2, 1, &out, &err), 0);
    const char *all2 = "0:main;a 1:main;a 2:main;b 3:main;a;c";
    const char *all3 = "0:main;a@f.c:3 1:main;a@f.c:3 2:main;b@f.c:9 3:main;a@f.c:4;c@f.c:1";
    CHECK(holds(out, all2, all3));

    /* State composition: the state packet is the same, and feeding it (or
     * an old wave) back changes nothing. */
    tbon_packet_t *sp = stat_merge_get_FilterState(&state, 5);
    REQUIRE(sp);
    CHECK_INT(tbon_packet_tag(sp), 140);
    CHECK(holds(sp, all2, all3));
    tbon_packet_t *w3[3] = { sp, w1[1], out };
    tbon_packet_t *again = NULL;
    CHECK_INT(wave(&state, w3, 3, &again, &err), 0);
    CHECK(holds(again, all2, all3));
    tbon_packet_unref(again);

    /* Another node folding the state in, in another order, gets the same. */
    void *state2 = NULL;
    tbon_packet_t *w4[3] = { w2[0], sp, w1[0] };
    CHECK_INT(wave(&state2, w4, 3, &again, &err), 0);
    CHECK(holds(again, all2, all3));
    tbon_packet_unref(again);

    tbon_packet_unref(out);
    unref_all(w1, 2);
    unref_all(w2, 1);
    tbon_packet_unref(sp);
    tb_filter_state_free(&merge_filter, &state);
    tb_filter_state_free(&merge_filter, &state2);
    CHECK(state == NULL);
}

TEST(malformed_input_is_refused_and_state_kept)
{
    void *state = NULL;
    tbon_error_t err = { 0 };
    tbon_packet_t *out = NULL;

    tbon_packet_t *good = input(140, 7, "0:main", "0:main@m.c:1");
    REQUIRE(good);
    CHECK_INT(wave(&state, &good, 1, &out, &err), 0);
    tbon_packet_unref(out);

    /* Input 1's 3D tree is cut short; input 0 is fine and must not be
     * merged either. */
    uint8_t *b2 = NULL, *b3 = NULL;
    size_t l2, l3;
    REQUIRE(tbon_packet_unpack(good, "%auc %auc", &b2, &l2, &b3, &l3) == 0);
    tbon_packet_t *w[2] = { input(140, 8, "5:other", "5:other@o.c:1"),
                            tbon_packet_new(140, "%auc %auc", b2, l2, b3, l3 - 1) };
    REQUIRE(w[0] && w[1]);
    tb_packet_set_route(w[1], 5, 9);
    CHECK_INT(wave(&state, w, 2, &out, &err), TBON_EFORMAT);
    CHECK(out == NULL);
    CHECK(strstr(err.msg, "stat_merge"));
    CHECK(strstr(err.msg, "input 1 (from rank 9): 3D tree: at byte "));
    CHECK(strstr(err.msg, "truncated"));

    /* Garbage in the 2D tree of input 0. */
    tbon_packet_unref(w[1]);
    w[1] = tbon_packet_new(140, "%auc %auc", "nonsense", (size_t)8, b3, l3);
    REQUIRE(w[1]);
    CHECK_INT(wave(&state, &w[1], 1, &out, &err), TBON_EFORMAT);
    CHECK(strstr(err.msg, "input 0 (from rank "));
    CHECK(strstr(err.msg, "2D tree: at byte 0: bad magic"));
    /* Empty arrays are not trees either. */
    tbon_packet_unref(w[1]);
    w[1] = tbon_packet_new(140, "%auc %auc", NULL, (size_t)0, NULL, (size_t)0);
    REQUIRE(w[1]);
    CHECK_INT(wave(&state, &w[1], 1, &out, &err), TBON_EFORMAT);
    CHECK(strstr(err.msg, "2D tree: at byte 0: truncated header (0 bytes)"));

    /* Another format never reaches the filter. */
    tbon_packet_t *bad = tbon_packet_new(140, "%d", 3);
    REQUIRE(bad);
    CHECK_INT(wave(&state, &bad, 1, &out, &err), TBON_EFILTER);
    tbon_packet_unref(bad);

    /* The state is what the good wave left. */
    tbon_packet_t *sp = stat_merge_get_FilterState(&state, 5);
    CHECK(holds(sp, "0:main", "0:main@m.c:1"));
    tbon_packet_unref(sp);

    /* A failure on the very first wave leaves no state. */
    void *fresh = NULL;
    CHECK_INT(wave(&fresh, &w[1], 1, &out, &err), TBON_EFORMAT);
    CHECK(fresh == NULL);

    free(b2);
    free(b3);
    unref_all(w, 2);
    tbon_packet_unref(good);
    tb_filter_state_free(&merge_filter, &state);
}

/* A counts-only input: the trees of the specs, of round, from rank src. */
static tbon_packet_t *cinput(tbon_rank_t src, uint32_t round, const char *spec2,
                             const char *spec3)
{
    return packet_of(150, src, (long)round, spec2, spec3);
}

/* 1 if p holds the counts-only trees of the specs, of round. */
static int holds_counts(const tbon_packet_t *p, uint32_t round, const char *spec2,
                        const char *spec3)
{
    uint8_t *b[2] = { NULL, NULL };
    size_t n[2];
    if (!p || tbon_packet_unpack(p, "%auc %auc", &b[0], &n[0], &b[1], &n[1]) != 0)
        return 0;
    st_tree_t *got[2] = { st_tree_decode(b[0], n[0], NULL, 0), st_tree_decode(b[1], n[1], NULL, 0) };
    st_tree_t *want[2] = { tree_of(spec2), tree_of(spec3) };
    int ok = 1;
    for (int d = 0; d < 2; d++)
        ok &= got[d] && want[d] && st_tree_to_counts(want[d], round) == 0 &&
              st_tree_equal(got[d], want[d]);
    for (int d = 0; d < 2; d++) {
        st_tree_free(got[d]);
        st_tree_free(want[d]);
        free(b[d]);
    }
    return ok;
}

/* One wave of one input, which it takes. */
static tbon_packet_t *cwave(void **state, tbon_packet_t *in, tbon_error_t *err, int *rc)
{
    tbon_packet_t *out = NULL;
    *rc = wave(state, &in, 1, &out, err);
    tbon_packet_unref(in);
    return out;
}

/* Counts-only trees add up once per source: a source sending its whole
 * sum again, and the sources that a dead commnode's sum had already
 * brought (its orphans' composed state), add nothing; a source sharing
 * only some tasks with those in is left out until the next round, which
 * (the failed node sending nothing of it) is exact; a late input of an
 * older round changes nothing; a full tree on the stream is refused. */
TEST(counts_only_sums_each_source_once)
{
    void *state = NULL;
    tbon_error_t err = { 0 };
    int rc;
    tbon_packet_t *out;
    /* commnode 1 brings tasks 0 and 1, commnode 2 tasks 2 and 3 */
    tbon_packet_t *w1[2] = { cinput(1, 0, "0:main;a 1:main;b", "0:main;a 1:main;b"),
                             cinput(2, 0, "2:main;a 3:main;a", "2:main;a 3:main;a") };
    REQUIRE(w1[0] && w1[1]);
    CHECK_INT(wave(&state, w1, 2, &out, &err), 0);
    const char *s4 = "0:main;a 1:main;b 2:main;a 3:main;a";
    CHECK(holds_counts(out, 0, s4, s4));
    tbon_packet_unref(out);
    unref_all(w1, 2);
    /* commnode 1 again (an ask again): the same */
    out = cwave(&state, cinput(1, 0, "0:main;a 1:main;b", "0:main;a 1:main;b"), &err, &rc);
    CHECK_INT(rc, 0);
    CHECK(holds_counts(out, 0, s4, s4));
    tbon_packet_unref(out);
    /* commnode 1 died; its back-ends 10 and 11, adopted here, send their
     * state: all in already, not counted twice */
    out = cwave(&state, cinput(10, 0, "0:main;a", "0:main;a"), &err, &rc);
    tbon_packet_unref(out);
    out = cwave(&state, cinput(11, 0, "1:main;b", "1:main;b"), &err, &rc);
    CHECK_INT(rc, 0);
    CHECK(holds_counts(out, 0, s4, s4));
    tbon_packet_unref(out);
    /* commnode 12 adopted back-end 11 and has task 4 of its own: it shares
     * task 1 with commnode 1's sum, so it waits */
    out = cwave(&state, cinput(12, 0, "1:main;b 4:main;c", "1:main;b 4:main;c"), &err, &rc);
    CHECK_INT(rc, 0);
    CHECK(holds_counts(out, 0, s4, s4));
    tbon_packet_unref(out);
    /* the front-end asks again (round 1): the live sources answer, the dead
     * commnode 1 does not; as they come, the sum is theirs alone */
    out = cwave(&state, cinput(12, 1, "1:main;b 4:main;c", "1:main;b 4:main;c"), &err, &rc);
    CHECK(holds_counts(out, 1, "1:main;b 4:main;c", "1:main;b 4:main;c"));
    tbon_packet_unref(out);
    out = cwave(&state, cinput(10, 1, "0:main;a", "0:main;a"), &err, &rc);
    tbon_packet_unref(out);
    out = cwave(&state, cinput(2, 1, "2:main;a 3:main;a", "2:main;a 3:main;a"), &err, &rc);
    CHECK_INT(rc, 0);
    const char *s5 = "0:main;a 1:main;b 2:main;a 3:main;a 4:main;c";
    CHECK(holds_counts(out, 1, s5, s5));
    tbon_packet_unref(out);
    /* a late round-0 input of a source that sent round 1: nothing changes;
     * the state packet is the sum */
    out = cwave(&state, cinput(2, 0, "2:main;a", "2:main;a"), &err, &rc);
    CHECK(holds_counts(out, 1, s5, s5));
    tbon_packet_unref(out);
    tbon_packet_t *sp = stat_merge_get_FilterState(&state, 5);
    CHECK(holds_counts(sp, 1, s5, s5));
    tbon_packet_unref(sp);
    /* a full tree on a counts-only stream */
    tbon_packet_t *full = input(150, 3, "5:main", "5:main");
    tbon_packet_t *w2[1] = { full };
    CHECK_INT(wave(&state, w2, 1, &out, &err), TBON_EFORMAT);
    CHECK(strstr(err.msg, "a full tree on a stream of counts-only trees") != NULL);
    tbon_packet_unref(full);
    tb_filter_state_free(&merge_filter, &state);
}
