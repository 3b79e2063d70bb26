/* test_exact.c - exact results when commnodes die (docs/fault-tolerance.md,
 * "Exact results when commnodes die"): sum, avg, concat and a user
 * histogram filter (tests/plugins/filter_histo.c, which declares itself
 * associative) on 4x4x4, 8x8 and 16x16 trees, waves sent back to back,
 * commnodes killed with SIGKILL in the middle - one, two at once, a child of
 * the FE whose children are commnodes, an adopter just after it adopted -
 * and with link faults besides. Every wave must come back exactly once,
 * holding every back-end exactly once (its value computed from the
 * back-ends it says it holds, and those must be all of them); a back-end
 * that dies is named missing, and the rest is exact. */
#include "itest.h"
#include "lib/faultlog.h"

#include <math.h>
#include <signal.h>

enum kind { K_SUM, K_AVG, K_CONCAT, K_HISTO };

struct plan {
    const char *shape;
    enum kind kind;
    tbon_rank_t kill[4];      /* commnodes killed at once, a third of the way */
    size_t nkill;
    int chase;                /* then the first adopter (a commnode) too */
    tbon_rank_t be_dies;      /* a back-end that exits after be_after requests
                                 (0: none; rank 0 is the FE) */
    int be_after;
    int faults;               /* bit flips and resets on the links meanwhile */
};

static const char *kind_name(enum kind k)
{
    static const char *const names[] = { "sum", "avg", "concat", "histo" };
    return names[k];
}

static int cmp_rank(const void *a, const void *b)
{
    tbon_rank_t x = *(const tbon_rank_t *)a, y = *(const tbon_rank_t *)b;
    return x < y ? -1 : x > y;
}

/* The value of result p of wave w must be what the back-ends cov[0..n)
 * make: 0, or -1 with a failure recorded. */
static int value_right(enum kind k, const tbon_packet_t *p, uint32_t w, const tbon_rank_t *cov,
                       size_t n)
{
    char why[200] = "";
    if (k == K_SUM || k == K_AVG) {
        int64_t sum = it_wave_sum(cov, n, w);
        if (k == K_SUM) {
            int64_t v = 0;
            if (tbon_packet_unpack(p, "%ld", &v) || v != sum)
                snprintf(why, sizeof why, "sum %lld, expected %lld", (long long)v,
                         (long long)sum);
        } else {
            double v = 0, want = n ? (double)sum / (double)n : NAN;
            if (tbon_packet_unpack(p, "%lf", &v) || fabs(v - want) > 1e-6 * fabs(want))
                snprintf(why, sizeof why, "avg %.9g, expected %.9g", v, want);
        }
    } else if (k == K_CONCAT) {
        int32_t *v = NULL;
        size_t m = 0;
        if (tbon_packet_unpack(p, "%ad", &v, &m) || m != 2 * n) {
            snprintf(why, sizeof why, "%zu values, expected %zu", m, 2 * n);
        } else {
            tbon_rank_t *got = malloc((n ? n : 1) * sizeof *got);
            for (size_t i = 0; got && i < n; i++) {
                got[i] = (tbon_rank_t)v[2 * i];
                if ((uint32_t)v[2 * i + 1] != w)
                    snprintf(why, sizeof why, "rank %d answered for wave %d", v[2 * i],
                             v[2 * i + 1]);
            }
            if (got) {
                qsort(got, n, sizeof *got, cmp_rank);
                for (size_t i = 0; i < n && !why[0]; i++)
                    if (got[i] != cov[i])
                        snprintf(why, sizeof why, "back-end %u %s", cov[i],
                                 i && got[i] == got[i - 1] ? "twice" : "not there");
            }
            free(got);
        }
        free(v);
    } else {
        uint64_t *v = NULL, want[3] = { 0, 0, 0 };
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            want[0] += cov[i];
            want[1] += cov[i] % 3;
            want[2] += 1000000u + w;
        }
        if (tbon_packet_unpack(p, "%auld", &v, &m) || m != 3 || memcmp(v, want, sizeof want))
            snprintf(why, sizeof why, "histogram {%llu, %llu, %llu}, expected {%llu, %llu, "
                     "%llu}", m > 0 ? (unsigned long long)v[0] : 0,
                     m > 1 ? (unsigned long long)v[1] : 0, m > 2 ? (unsigned long long)v[2] : 0,
                     (unsigned long long)want[0], (unsigned long long)want[1],
                     (unsigned long long)want[2]);
        free(v);
    }
    if (!why[0])
        return 0;
    th_fail(__FILE__, __LINE__, "%s wave %u: %s", kind_name(k), w, why);
    return -1;
}

static int send_wave(tbon_stream_t *s, enum kind k, uint32_t w)
{
    int tag = k == K_CONCAT ? IT_TAG_CONCAT : k == K_HISTO ? IT_TAG_UNION : IT_TAG_WAVE;
    return tbon_stream_send(s, tag, "%ud", w);
}

/* Back-ends a result lacked (short[r]), and those the FE said failed
 * (failed[r]): a wave may lack only a back-end that failed. */
static uint8_t short_of[IT_MAX_BE * 2], failed_be[IT_MAX_BE * 2];

/* Result w: its value exactly what the back-ends it says it holds make,
 * and those every back-end (but `dead` once it has died: then the rest,
 * and it is named missing if the wave expected it); one that lacks others
 * is noted in short_of, to be checked against the failures at the end.
 * 0 or -1 (recorded). */
static int check_result(const it_tree_t *t, tbon_stream_t *s, enum kind k, uint32_t w,
                        tbon_rank_t dead, size_t *held_dead, size_t *named_dead)
{
    char what[64];
    snprintf(what, sizeof what, "%s wave %u", kind_name(k), w);
    tbon_packet_t *p = it_recv(s, IT_RECV_MS, what);
    if (!p)
        return -1;
    static tbon_rank_t cov[IT_MAX_BE], mis[IT_MAX_BE];
    size_t n = tbon_packet_covered(p, cov, IT_MAX_BE);
    size_t nm = tbon_packet_missing(p, mis, IT_MAX_BE);
    size_t ne = tbon_packet_expected(p, NULL, 0);
    int rc = value_right(k, p, w, cov, n);
    int has_dead = dead != TBON_RANK_NONE && n && bsearch(&dead, cov, n, sizeof *cov, cmp_rank);
    /* (What the dying back-end had not yet written when it _exit()ed is
     * gone with it: which waves hold it is counted, not required.) */
    *held_dead += has_dead;
    *named_dead += nm == 1 && mis[0] == dead;
    /* what it lacks it names, and it holds or names every back-end */
    if (!rc && (ne != n + nm || n + nm + (dead != TBON_RANK_NONE && !has_dead && !nm) < t->nbe)) {
        th_fail(__FILE__, __LINE__, "%s: %zu held, %zu missing (first %u), %zu expected, of %zu",
                what, n, nm, nm ? mis[0] : 0, ne, t->nbe);
        rc = -1;
    }
    for (size_t i = 0; i < nm; i++)
        if (mis[i] != dead && mis[i] < sizeof short_of)
            short_of[mis[i]] = 1;
    tbon_packet_unref(p);
    return rc;
}

/* The events so far: the back-ends said failed into failed_be (and, with
 * ITEST_VERBOSE, every failure, adoption and suspicion shown). */
static void take_failures(tbon_net_t *net)
{
    tbon_event_t ev;
    while (tbon_net_next_event(net, &ev, 0) == 0) {
        if (ev.type == TBON_EV_NODE_FAILED && ev.rank < sizeof failed_be)
            failed_be[ev.rank] = 1;
        if (getenv("ITEST_VERBOSE") && (ev.type == TBON_EV_NODE_FAILED ||
                                        ev.type == TBON_EV_NODE_SUSPECT ||
                                        ev.type == TBON_EV_DATA_LOST))
            fprintf(stderr, "    event %d: rank %u\n", (int)ev.type, ev.rank);
        if (ev.type == TBON_EV_DATA_LOST)
            th_fail(__FILE__, __LINE__, "TBON_EV_DATA_LOST for rank %u", ev.rank);
    }
}

/* A wave lacked only back-ends that failed; a note when any did (on a
 * starved machine an orphan not adopted in time is taken for failed). */
static void check_short_waves(void)
{
    size_t nshort = 0;
    for (size_t r = 0; r < sizeof short_of; r++) {
        nshort += short_of[r];
        if (short_of[r] && !failed_be[r])
            th_fail(__FILE__, __LINE__, "a wave lacked back-end %zu, which did not fail", r);
    }
    if (nshort)
        fprintf(stderr, "    note: %zu back-ends failed and waves went without them\n", nshort);
    memset(short_of, 0, sizeof short_of);
    memset(failed_be, 0, sizeof failed_be);
}

/* Kill the commnode that adopts first after the kill (not the FE). */
static void chase_adopter(tbon_net_t *net, const struct plan *pl)
{
    int64_t end = it_now_ms() + IT_RECV_MS;
    tbon_event_t ev;
    while (it_now_ms() < end && tbon_net_next_event(net, &ev, (int)(end - it_now_ms())) == 0) {
        if (ev.type == TBON_EV_NODE_FAILED && ev.rank < sizeof failed_be)
            failed_be[ev.rank] = 1;
        if (ev.type != TBON_EV_NODE_ADOPTED || ev.parent == 0)
            continue;
        int victim = 0;
        for (size_t i = 0; i < pl->nkill; i++)
            victim |= ev.parent == pl->kill[i];
        if (victim)
            continue;
        pid_t pid = it_pid_of("tbon_commnode", ev.parent);
        if (pid > 0) {
            kill(pid, SIGKILL);
            if (getenv("ITEST_VERBOSE"))
                fprintf(stderr, "    adopter %u of %u killed too\n", ev.parent, ev.rank);
        }
        return;
    }
    th_fail(__FILE__, __LINE__, "no commnode adopted an orphan");
}

static void exact_run(const struct plan *pl)
{
    char after[16], who[16], log[PATH_MAX], armf[PATH_MAX];
    const char *argv[5] = { NULL };
    tbon_rank_t dead = pl->be_dies ? pl->be_dies : TBON_RANK_NONE;
    if (pl->be_dies) {
        snprintf(after, sizeof after, "%d", pl->be_after);
        snprintf(who, sizeof who, "%u", pl->be_dies);
        argv[0] = "--exit-after";
        argv[1] = after;
        argv[2] = "--exit-after-ranks";
        argv[3] = who;
    }
    if (pl->faults) {
        snprintf(log, sizeof log, "%s/faults.log", th_tmpdir());
        snprintf(armf, sizeof armf, "%s/faults.arm", th_tmpdir());
        it_fault_env("0.005", "0.001", "0.002", "0.01", log, armf, 17);
    }
    it_tree_t t;
    if (it_start(&t, pl->shape, argv, NULL))
        return;
    int up = pl->kind == K_SUM ? TBON_FILTER_SUM : pl->kind == K_AVG ? TBON_FILTER_AVG
           : pl->kind == K_CONCAT ? TBON_FILTER_CONCAT : it_load_plugin(t.net, "filter_histo",
                                                                         "histo");
    tbon_stream_t *s = up < 0 ? NULL : it_stream(t.net, up, TBON_SYNC_WAITFORALL, 0);
    if (!s) {
        it_stop(&t);
        return;
    }
    /* one wave first: the port table is everywhere after it */
    REQUIRE(send_wave(s, pl->kind, 0) == 0);
    size_t held_dead = 0, named_dead = 0;
    if (check_result(&t, s, pl->kind, 0, TBON_RANK_NONE, &held_dead, &named_dead)) {
        it_stop(&t);
        return;
    }
    if (pl->faults)
        it_arm(armf, 1);
    pid_t pid[4] = { 0 };
    for (size_t i = 0; i < pl->nkill; i++)
        REQUIRE((pid[i] = it_pid_of("tbon_commnode", pl->kill[i])) > 0);
    const uint32_t waves = IT_SLOW ? 90 : 300;
    for (uint32_t w = 1; w <= waves; w++) {
        REQUIRE(send_wave(s, pl->kind, w) == 0);
        if (w == waves / 3)
            for (size_t i = 0; i < pl->nkill; i++)
                kill(pid[i], SIGKILL);
        if (w == waves / 3 && pl->chase)
            chase_adopter(t.net, pl);
    }
    int bad = 0;
    for (uint32_t w = 1; w <= waves && bad < 5; w++)
        bad += check_result(&t, s, pl->kind, w, dead, &held_dead, &named_dead) != 0;
    /* the dying back-end is in the waves before its death, and named
     * missing in some of those in flight at it */
    if (pl->be_dies && (!held_dead || !named_dead))
        th_fail(__FILE__, __LINE__, "back-end %u: in %zu waves, named missing in %zu", dead,
                held_dead, named_dead);
    it_expect_nothing(s, 100, "a wave twice");
    take_failures(t.net);
    check_short_waves();
    if (pl->faults) {
        it_arm(armf, 0);
        if (getenv("ITEST_VERBOSE"))
            fprintf(stderr, "    %zu bits flipped, %zu resets\n",
                    tb_fault_count(log, "flip") + tb_fault_count(log, "rflip"),
                    tb_fault_count(log, "reset"));
        unsetenv("LD_PRELOAD");
    }
    it_stop(&t);
}

#define PLAN(...) (&(struct plan){ __VA_ARGS__ })

/* 4x4x4: a child of the FE (rank 1), whose children are commnodes 5-8. */
ITEST(sum_4x4x4_fe_child_killed)
{
    exact_run(PLAN(.shape = "4x4x4", .kind = K_SUM, .kill = { 1 }, .nkill = 1));
}

/* 4x4x4: a commnode above back-ends (rank 6, back-ends 25-28). */
ITEST(concat_4x4x4_leaf_commnode_killed)
{
    exact_run(PLAN(.shape = "4x4x4", .kind = K_CONCAT, .kill = { 6 }, .nkill = 1));
}

ITEST(histo_4x4x4_fe_child_killed)
{
    exact_run(PLAN(.shape = "4x4x4", .kind = K_HISTO, .kill = { 2 }, .nkill = 1));
}

/* 8x8: two at once. */
ITEST(sum_8x8_two_killed_at_once)
{
    exact_run(PLAN(.shape = "8x8", .kind = K_SUM, .kill = { 2, 5 }, .nkill = 2));
}

ITEST(avg_8x8_one_killed)
{
    exact_run(PLAN(.shape = "8x8", .kind = K_AVG, .kill = { 3 }, .nkill = 1));
}

/* 8x8: a commnode, then the commnode that adopted its first orphan. */
ITEST(histo_8x8_adopter_killed_after_adopting)
{
    exact_run(PLAN(.shape = "8x8", .kind = K_HISTO, .kill = { 4 }, .nkill = 1, .chase = 1));
}

/* 8x8 with bits flipped and links reset all along, and a commnode killed. */
ITEST(sum_8x8_killed_under_link_faults)
{
    exact_run(PLAN(.shape = "8x8", .kind = K_SUM, .kill = { 7 }, .nkill = 1, .faults = 1));
}

/* 8x8: back-end 30 exits after 40 requests; then commnode 2 dies too. */
ITEST(sum_8x8_backend_dies_named_missing)
{
    exact_run(PLAN(.shape = "8x8", .kind = K_SUM, .kill = { 2 }, .nkill = 1, .be_dies = 30,
                   .be_after = 40));
}

/* 16x16 (272 processes): one, and its first adopter. */
ITEST(sum_16x16_killed_and_adopter_killed)
{
    exact_run(PLAN(.shape = "16x16", .kind = K_SUM, .kill = { 9 }, .nkill = 1, .chase = 1));
}

ITEST(concat_16x16_two_killed_at_once)
{
    exact_run(PLAN(.shape = "16x16", .kind = K_CONCAT, .kill = { 3, 12 }, .nkill = 2));
}
