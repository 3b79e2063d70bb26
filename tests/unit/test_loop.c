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
#include <sys/syscall.h>
#include <time.h>
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

/* The write system calls this process has made (/proc/self/io), or -1. */
static long write_calls(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return -1;
    char line[128];
    long n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "syscw: %ld", &n) == 1)
            break;
    fclose(f);
    return n;
}

static struct msg *msg_new(int seq)
{
    struct msg *m = malloc(sizeof *m);
    if (m) {
        m->from = 0;
        m->seq = seq;
    }
    return m;
}

/* Posts behind one not taken yet ride on its wake: one eventfd write for
 * three posts; a post after the take wakes the loop again, and so does the
 * first post behind a message queued without a wake (tb_loop_queue). */
TEST(posts_share_one_wake)
{
    tb_loop_t *l = tb_loop_new(drain, NULL);
    REQUIRE(l);
    got[0] = 0;
    bad = 0;
    struct msg *m[6];
    for (int i = 0; i < 6; i++)
        REQUIRE((m[i] = msg_new(i)) != NULL);
    long w0 = write_calls();
    REQUIRE(w0 >= 0);
    for (int i = 0; i < 3; i++)
        tb_loop_post(l, &m[i]->m);
    long w1 = write_calls();
    CHECK_INT(w1 - w0, 1);
    CHECK(tb_loop_wait(l, 1000) >= 0);
    CHECK_INT(got[0], 3);
    tb_loop_post(l, &m[3]->m);          /* after the take: a wake of its own */
    long w2 = write_calls();
    CHECK_INT(w2 - w1, 1);
    CHECK(tb_loop_wait(l, 1000) >= 0);
    CHECK_INT(got[0], 4);
    tb_loop_queue(l, &m[4]->m);         /* no wake... */
    tb_loop_post(l, &m[5]->m);          /* ...so this one wakes */
    CHECK_INT(write_calls() - w2, 1);
    CHECK(tb_loop_wait(l, 1000) >= 0);
    CHECK_INT(got[0], 6);
    CHECK_INT(bad, 0);
    CHECK(!tb_loop_has_mail(l));
    tb_loop_destroy(l);
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

/* ---- a loop's events shared with another set (tb_loop_share) ---- */

/* Counts, and leaves the byte: a set that had the event would still see it. */
static void on_peek(tb_io_t *io, uint32_t events)
{
    struct pio *p = (struct pio *)io;
    p->n++;
    p->ev = events;
}

static void on_partner(tb_io_t *io, uint32_t events)
{
    struct pio *p = (struct pio *)io;
    p->n++;
    p->ev = events;
}

struct waiter { tb_loop_t *l; int rc; pid_t tid; };
static void *wait_in(void *arg)
{
    struct waiter *w = arg;
    __atomic_store_n(&w->tid, (pid_t)gettid(), __ATOMIC_RELEASE);
    w->rc = tb_loop_wait(w->l, 10000);
    return NULL;
}

/* Thread tid is blocked in an epoll wait on fd (its /proc syscall line). */
static int blocked_on(pid_t tid, int fd)
{
    char path[64], line[256] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    long nr = -1;
    unsigned long a0 = 0;
    if (sscanf(line, "%ld 0x%lx", &nr, &a0) != 2)
        return 0;
    return (nr == SYS_epoll_wait || nr == SYS_epoll_pwait) && a0 == (unsigned long)fd;
}

/* Write a byte while a thread waits in the loop: it takes the event, and
 * the partner set hears nothing (p's fn leaves the byte to be read here:
 * had the partner set been told, it would still see it). */
static void write_while_waited(tb_loop_t *l, tb_loop_t *k, struct pio *p, int wfd,
                               struct pio *partner)
{
    p->io.fn = on_peek;
    static struct waiter w;
    w = (struct waiter){ .l = l, .tid = 0 };
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, wait_in, &w) == 0);
    int64_t end = tb_now_ms() + 10000;
    pid_t tid = 0;
    while (tb_now_ms() < end && !((tid = __atomic_load_n(&w.tid, __ATOMIC_ACQUIRE)) &&
                                  blocked_on(tid, tb_loop_fd(l)))) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    CHECK(blocked_on(__atomic_load_n(&w.tid, __ATOMIC_ACQUIRE), tb_loop_fd(l)));
    int before = partner->n;
    CHECK(write(wfd, "w", 1) == 1);
    pthread_join(th, NULL);
    CHECK_INT(w.rc, 1);
    CHECK_INT(tb_loop_wait(k, 50), 0);
    CHECK_INT(partner->n, before);
    char c;
    CHECK(read(p->io.fd, &c, 1) == 1);
    p->io.fn = on_pipe;
}

/* The back-end's kicker hears of its node's events this way (api/kick.c):
 * the partner set is woken for an event only when no thread waits in the
 * loop, once per event (edge-triggered), naming the partner's io; a
 * thread that waits in the loop takes the event alone, also after the
 * descriptor's events were changed (a delete and an add in both sets, in
 * order); a forgotten descriptor is in neither; sharing is refused once
 * anything but the loop's own wake-up is watched. */
TEST(shared_events_wake_the_partner_only_when_nobody_waits)
{
    tb_loop_t *l = tb_loop_new(NULL, NULL), *k = tb_loop_new(NULL, NULL);
    REQUIRE(l && k);
    struct pio partner = { .io = { .fd = -1, .fn = on_partner } };
    REQUIRE(tb_loop_share(l, tb_loop_fd(k), &partner.io) == 0);
    CHECK_INT(tb_loop_share(l, tb_loop_fd(k), &partner.io), TBON_EINVAL);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    struct pio p = { .io = { .fd = fds[0], .fn = on_pipe } };
    REQUIRE(tb_loop_watch(l, &p.io, EPOLLIN) == 0);

    /* nobody waits in l: the partner hears, once */
    CHECK(write(fds[1], "a", 1) == 1);
    CHECK_INT(tb_loop_wait(k, 5000), 1);
    CHECK_INT(partner.n, 1);
    CHECK(partner.ev & EPOLLIN);
    CHECK_INT(tb_loop_wait(k, 50), 0);
    CHECK_INT(tb_loop_wait(l, 0), 1);       /* the byte is still l's */
    CHECK_INT(p.n, 1);

    /* a thread waits in l: it alone is woken */
    write_while_waited(l, k, &p, fds[1], &partner);
    CHECK_INT(p.n, 2);

    /* the events changed and back: still l's first */
    REQUIRE(tb_loop_watch(l, &p.io, EPOLLIN | EPOLLOUT) == 0);
    REQUIRE(tb_loop_watch(l, &p.io, EPOLLIN) == 0);
    write_while_waited(l, k, &p, fds[1], &partner);
    CHECK_INT(p.n, 3);

    /* the loop's mailbox too: a wake-up nobody waits for goes to the partner */
    tb_loop_wake(l);
    CHECK_INT(tb_loop_wait(k, 5000), 1);
    CHECK_INT(partner.n, 2);
    CHECK_INT(tb_loop_wait(l, 0), 1);

    /* forgotten: in neither */
    tb_loop_forget(l, &p.io);
    CHECK(write(fds[1], "z", 1) == 1);
    CHECK_INT(tb_loop_wait(k, 50), 0);
    CHECK_INT(tb_loop_wait(l, 0), 0);
    CHECK_INT(partner.n, 2);

    /* a loop that watches something already cannot share */
    tb_loop_t *m = tb_loop_new(NULL, NULL);
    REQUIRE(m);
    struct pio q = { .io = { .fd = fds[0], .fn = on_pipe } };
    REQUIRE(tb_loop_watch(m, &q.io, EPOLLIN) == 0);
    CHECK_INT(tb_loop_share(m, tb_loop_fd(k), &partner.io), TBON_EINVAL);
    tb_loop_forget(m, &q.io);
    tb_loop_destroy(m);

    close(fds[0]);
    close(fds[1]);
    tb_loop_destroy(l);
    tb_loop_destroy(k);
}
