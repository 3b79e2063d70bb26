/* test_loop.c - the event loop (net/loop.h): the timer heap's order under
 * arming, re-arming and cancelling, the mailbox across threads, and the
 * wait's bound by the first timer. */
#include "../harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "net/loop.h"
#include "util/clock.h"

#include "lib/memlimit.h"
#include "lib/sanitizer.h"

/* The out-of-memory cases limit the address space. */
TH_TSAN_MALLOC_MAY_FAIL()

struct tmr { tb_timer_t t; int id; int fired; };
static int64_t last_due;
static int order_ok, nfired;

static void on_timer(tb_timer_t *t, int64_t now)
{
    struct tmr *x = (struct tmr *)t;
    if (t->due < last_due || t->due > now)
        order_ok = 0;
    last_due = t->due;
    x->fired++;
    nfired++;
}

/* Random arms, re-arms and cancels over 500 timers: the heap always names the
 * earliest armed one, and firing runs exactly the armed ones, in due order. */
TEST(timer_heap_order)
{
    tb_loop_t *l = tb_loop_new(NULL, NULL);
    REQUIRE(l);
    enum { N = 500 };
    struct tmr *tm = calloc(N, sizeof *tm);
    REQUIRE(tm);
    uint64_t st = 11;
    int64_t base = tb_now_ms() - 1000000;   /* all in the past: fire runs them */
    for (int round = 0; round < 20000; round++) {
        struct tmr *x = &tm[th_rand(&st) % N];
        x->t.fn = on_timer;
        if (!tb_timer_armed(&x->t))
            x->t.lazy = th_rand(&st) % 8 == 0;     /* one in eight lazy */
        if (th_rand(&st) % 4 == 0)
            tb_timer_cancel(l, &x->t);
        else
            tb_timer_at(l, &x->t, base + (int64_t)(th_rand(&st) % 100000));
        int64_t min = INT64_MAX, min_eager = INT64_MAX;
        size_t armed = 0;
        for (int i = 0; i < N; i++)
            if (tb_timer_armed(&tm[i].t)) {
                armed++;
                if (tm[i].t.due < min)
                    min = tm[i].t.due;
                if (!tm[i].t.lazy && tm[i].t.due < min_eager)
                    min_eager = tm[i].t.due;
            }
        if (tb_loop_next_due(l) != min || tb_loop_ntimers(l) != armed) {
            th_fail(__FILE__, __LINE__, "round %d: heap says %lld (%zu armed), expected %lld (%zu)",
                    round, (long long)tb_loop_next_due(l), tb_loop_ntimers(l), (long long)min, armed);
            break;
        }
        /* what another thread sees leaves the lazy timers out */
        if (tb_loop_due(l) != min_eager) {
            th_fail(__FILE__, __LINE__, "round %d: published %lld, expected %lld", round,
                    (long long)tb_loop_due(l), (long long)min_eager);
            break;
        }
    }
    size_t armed = tb_loop_ntimers(l);
    order_ok = 1;
    last_due = INT64_MIN;
    nfired = 0;
    tb_loop_fire(l);
    CHECK(order_ok);
    CHECK_UINT((size_t)nfired, armed);
    CHECK_UINT(tb_loop_ntimers(l), 0);
    CHECK(tb_loop_next_due(l) == INT64_MAX);
    free(tm);
    tb_loop_destroy(l);
}

/* A timer in the future is not run early; the wait ends when it is due, not
 * later, even with no limit of its own. */
TEST(wait_bounded_by_timer)
{
    tb_loop_t *l = tb_loop_new(NULL, NULL);
    REQUIRE(l);
    struct tmr x = { .t.fn = on_timer };
    int64_t t0 = tb_now_ms();
    tb_timer_at(l, &x.t, t0 + 50);
    tb_loop_fire(l);
    CHECK_INT(x.fired, 0);
    while (!x.fired) {
        CHECK(tb_loop_wait(l, -1) >= 0);
        tb_loop_fire(l);
    }
    int64_t took = tb_now_ms() - t0;
    CHECK(took >= 50);
    CHECK(took < 5000);
    tb_loop_destroy(l);
}

/* A timer's fn may arm another timer due now: the same fire runs it. */
static struct tmr chained = { .t.fn = on_timer };
static tb_loop_t *chain_loop;
static void arm_next(tb_timer_t *t, int64_t now)
{
    (void)t;
    tb_timer_at(chain_loop, &chained.t, now);
}
TEST(timer_arms_timer)
{
    chain_loop = tb_loop_new(NULL, NULL);
    REQUIRE(chain_loop);
    tb_timer_t first = { .fn = arm_next };
    nfired = 0;
    tb_timer_at(chain_loop, &first, tb_now_ms());
    order_ok = 1;
    last_due = INT64_MIN;
    tb_loop_fire(chain_loop);
    CHECK_INT(nfired, 1);
    tb_loop_destroy(chain_loop);
}

/* ---- the mailbox ---- */

struct msg { tb_mail_t m; int from, seq; };
enum { THREADS = 4, PER = 20000 };
static int got[THREADS], bad;

static void drain(void *arg, tb_mail_t *list)
{
    (void)arg;
    while (list) {
        struct msg *m = (struct msg *)list;
        list = list->next;
        if (m->seq != got[m->from])
            bad++;
        got[m->from]++;
        free(m);
    }
}

static void *poster(void *arg)
{
    tb_loop_t *l = *(tb_loop_t **)((void **)arg)[0];
    int from = (int)(intptr_t)((void **)arg)[1];
    for (int i = 0; i < PER; i++) {
        struct msg *m = malloc(sizeof *m);
        if (!m)
            abort();
        m->from = from;
        m->seq = i;
        tb_loop_post(l, &m->m);
    }
    return NULL;
}

/* Four threads post 20,000 messages each while the loop waits and drains:
 * every message arrives once, each thread's in the order it posted them. */
TEST(mailbox_across_threads)
{
    static tb_loop_t *l;
    l = tb_loop_new(drain, NULL);
    REQUIRE(l);
    pthread_t th[THREADS];
    void *args[THREADS][2];
    for (int i = 0; i < THREADS; i++) {
        got[i] = 0;
        args[i][0] = &l;
        args[i][1] = (void *)(intptr_t)i;
        REQUIRE(pthread_create(&th[i], NULL, poster, args[i]) == 0);
    }
    int64_t end = tb_now_ms() + 30000;
    int total = 0;
    while (total < THREADS * PER && tb_now_ms() < end) {
        CHECK(tb_loop_wait(l, 1000) >= 0);
        total = 0;
        for (int i = 0; i < THREADS; i++)
            total += got[i];
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    tb_loop_drain(l);
    for (int i = 0; i < THREADS; i++)
        CHECK_INT(got[i], PER);
    CHECK_INT(bad, 0);
    CHECK(!tb_loop_has_mail(l));
    tb_loop_destroy(l);
}

/* Messages never drained go to drain when the loop is freed (none leaks:
 * the ASan build checks). */
TEST(free_drains_the_rest)
{
    tb_loop_t *l = tb_loop_new(drain, NULL);
    REQUIRE(l);
    got[0] = 0;
    for (int i = 0; i < 3; i++) {
        struct msg *m = malloc(sizeof *m);
        REQUIRE(m);
        m->from = 0;
        m->seq = i;
        tb_loop_post(l, &m->m);
    }
    CHECK(tb_loop_has_mail(l));
    tb_loop_destroy(l);
    CHECK_INT(got[0], 3);
}

/* ---- descriptors ---- */

struct pio { tb_io_t io; int n; uint32_t ev; };
static void on_pipe(tb_io_t *io, uint32_t events)
{
    struct pio *p = (struct pio *)io;
    p->n++;
    p->ev = events;
    char c;
    ssize_t r = read(io->fd, &c, 1);
    (void)r;
}

/* A readable pipe runs its fn; a forgotten one does not; the loop's own fd
 * is readable when something waits (so another loop can watch it). */
TEST(io_watch_and_forget)
{
    tb_loop_t *l = tb_loop_new(NULL, NULL);
    REQUIRE(l);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    struct pio p = { .io = { .fd = fds[0], .fn = on_pipe } };
    REQUIRE(tb_loop_watch(l, &p.io, EPOLLIN) == 0);
    CHECK_INT(tb_loop_wait(l, 0), 0);
    CHECK(write(fds[1], "x", 1) == 1);
    int outer = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN };
    REQUIRE(epoll_ctl(outer, EPOLL_CTL_ADD, tb_loop_fd(l), &ev) == 0);
    CHECK_INT(epoll_wait(outer, &ev, 1, 1000), 1);
    CHECK_INT(tb_loop_wait(l, 1000), 1);
    CHECK_INT(p.n, 1);
    CHECK(p.ev & EPOLLIN);
    tb_loop_forget(l, &p.io);
    CHECK(write(fds[1], "y", 1) == 1);
    CHECK_INT(tb_loop_wait(l, 50), 0);
    CHECK_INT(p.n, 1);
    close(outer);
    close(fds[0]);
    close(fds[1]);
    tb_loop_destroy(l);
}

static char logged[512];
static int nlogged;
static void keep_line(void *arg, int level, const char *line)
{
    (void)arg;
    if (level == TBON_LOG_ERROR && !nlogged++)
        snprintf(logged, sizeof logged, "%s", line);
}

static int plain_fired;
static void on_plain(tb_timer_t *t, int64_t now)
{
    (void)t;
    (void)now;
    plain_fired++;
}

/* No memory for the heap to grow: the timer is not armed, the caller hears
 * TBON_ENOMEM, the loop fails (its wait says so, at once, every time), the
 * timers armed before are intact, and the process goes on. */
TEST(timer_heap_out_of_memory_fails_the_loop)
{
    if (UNDER_ASAN) {
        printf("    (skipped under ASan: needs RLIMIT_AS)\n");
        return;
    }
    tb_loop_t *l = tb_loop_new(NULL, NULL);
    REQUIRE(l);
    enum { FIRST = 1 << 16, POOL = 1 << 21 };
    tb_timer_t *tm = calloc(POOL, sizeof *tm);
    REQUIRE(tm);
    tbon_log_set_handler(keep_line, NULL);
    int64_t far = tb_now_ms() + 3600 * 1000;
    for (size_t i = 0; i < FIRST; i++)
        REQUIRE(tb_timer_at(l, &tm[i], far + (int64_t)i) == 0);
    /* 256 KiB left: the heap (512 KiB of pointers now) cannot double for
     * long */
    REQUIRE(limit_memory(256u << 10) == 0);
    size_t k = FIRST;
    int rc = 0;
    while (k < POOL && (rc = tb_timer_at(l, &tm[k], far + (int64_t)k)) == 0)
        k++;
    CHECK_INT(rc, TBON_ENOMEM);
    CHECK(k < POOL);
    CHECK(!tb_timer_armed(&tm[k]));
    CHECK_UINT(tb_loop_ntimers(l), k);
    CHECK_INT(tb_loop_next_due(l), far);
    char want[96];
    snprintf(want, sizeof want, "[loop] no memory to arm one more timer (%zu armed): the "
             "loop stops", k);
    CHECK(strstr(logged, want) != NULL);
    errno = 0;
    int64_t t0 = tb_now_ms();
    CHECK_INT(tb_loop_wait(l, 1000), TBON_ENOMEM);
    CHECK_INT(errno, ENOMEM);
    CHECK_INT(tb_loop_wait(l, -1), TBON_ENOMEM);
    CHECK(tb_now_ms() - t0 < 500);
    /* an armed timer still moves (no room needed), and still fires */
    CHECK_INT(tb_timer_at(l, &tm[7], tb_now_ms() - 1), 0);
    CHECK_INT(tb_timer_at(l, &tm[k], far), TBON_ENOMEM);
    CHECK_INT(nlogged, 1);                      /* said once */
    tm[7].fn = on_plain;
    tb_loop_fire(l);
    CHECK_INT(plain_fired, 1);
    CHECK_UINT(tb_loop_ntimers(l), k - 1);
    tb_loop_destroy(l);
    free(tm);
}
