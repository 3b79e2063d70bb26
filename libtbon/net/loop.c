/* loop.c - one event loop: epoll, a binary min-heap of timers, and a
 * mailbox (a locked list and an eventfd), as libuv's loop with its timer
 * heap and uv_async, or flux-core's reactor with its message deque. */
#include "net/loop.h"
#include "util/hot.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/error.h"
#include "util/clock.h"
#include "util/array.h"
#include "util/log.h"

struct tb_loop {
    int epfd;
    tb_io_t wake;             /* the eventfd: its fn drains the mailbox */
    tb_timer_t **heap;        /* heap[0] is due first */
    size_t nheap, capheap;
    pthread_mutex_t mu;       /* the mailbox: head and tail */
    tb_mail_t *head, *tail;
    atomic_int posted;        /* the mailbox is not empty (read without mu) */
    int woken;                /* under mu: a post since the last take has
                                 written the eventfd (tb_loop_post) */
    tb_drain_fn drain;
    void *arg;
    _Atomic int64_t due_pub;  /* heap[0]'s due time (INT64_MAX: none), for
                                 other threads: tb_loop_due */
    int failed;               /* TBON_ENOMEM: a timer could not be armed (the
                                 loop's thread's; tb_loop_wait returns it) */
    atomic_size_t nio;        /* ios registered (an io may be added from
                                 another thread) */
    int pfd;                  /* tb_loop_share's set (a dup), or -1 */
    tb_io_t *pio;             /* named by its events */
};

/* The first due time of the timers under heap[i] that are not lazy: a
 * timer that is not lazy is due no later than those under it, so only
 * the lazy ones (a few) are looked under. */
TB_HOT static int64_t first_due(const tb_loop_t *l, size_t i)
{
    if (i >= l->nheap)
        return INT64_MAX;
    if (!l->heap[i]->lazy)
        return l->heap[i]->due;
    int64_t a = first_due(l, 2 * i + 1), b = first_due(l, 2 * i + 2);
    return a < b ? a : b;
}

/* After any change of the heap: its first due time, for other threads. */
static void publish_due(tb_loop_t *l)
{
    atomic_store_explicit(&l->due_pub, first_due(l, 0), memory_order_release);
}

/* ---- the timer heap ---- */

static void heap_set(tb_loop_t *l, size_t i, tb_timer_t *t)
{
    l->heap[i] = t;
    t->slot = i + 1;
}

TB_HOT static void heap_up(tb_loop_t *l, size_t i)
{
    tb_timer_t *t = l->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (l->heap[p]->due <= t->due)
            break;
        heap_set(l, i, l->heap[p]);
        i = p;
    }
    heap_set(l, i, t);
}

TB_HOT static void heap_down(tb_loop_t *l, size_t i)
{
    tb_timer_t *t = l->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= l->nheap)
            break;
        if (c + 1 < l->nheap && l->heap[c + 1]->due < l->heap[c]->due)
            c++;
        if (t->due <= l->heap[c]->due)
            break;
        heap_set(l, i, l->heap[c]);
        i = c;
    }
    heap_set(l, i, t);
}

TB_HOT void tb_timer_cancel(tb_loop_t *l, tb_timer_t *t)
{
    if (!t->slot)
        return;
    size_t i = t->slot - 1;
    t->slot = 0;
    tb_timer_t *last = l->heap[--l->nheap];
    if (i != l->nheap) {
        heap_set(l, i, last);
        if (i > 0 && l->heap[(i - 1) / 2]->due > last->due)
            heap_up(l, i);
        else
            heap_down(l, i);
    }
    publish_due(l);
}

TB_HOT int tb_timer_at(tb_loop_t *l, tb_timer_t *t, int64_t due_ms)
{
    if (t->slot) {
        int64_t old = t->due;
        t->due = due_ms;
        if (due_ms < old)
            heap_up(l, t->slot - 1);
        else if (due_ms > old)
            heap_down(l, t->slot - 1);
        publish_due(l);
        return 0;
    }
    if (TB_ARRAY_ROOM(l->heap, l->nheap, l->capheap, 16)) {
        /* A timer lost would be a hang: the loop fails instead, and its
         * thread takes its failure path at its next wait. */
        if (!l->failed)
            TB_ERROR("loop", "no memory to arm one more timer (%zu armed): the loop stops",
                     l->nheap);
        l->failed = TBON_ENOMEM;
        return TBON_ENOMEM;
    }
    t->due = due_ms;
    l->heap[l->nheap++] = t;
    heap_up(l, l->nheap - 1);
    publish_due(l);
    return 0;
}

int64_t tb_loop_due(const tb_loop_t *l)
{
    return atomic_load_explicit(&((tb_loop_t *)l)->due_pub, memory_order_acquire);
}

int64_t tb_loop_next_due(const tb_loop_t *l)
{
    return l->nheap ? l->heap[0]->due : INT64_MAX;
}

size_t tb_loop_ntimers(const tb_loop_t *l)
{
    return l->nheap;
}

TB_HOT int tb_loop_fire(tb_loop_t *l)
{
    if (!l->nheap)
        return 0;
    int64_t now = tb_now_ms();
    int fired = 0;
    while (l->nheap && l->heap[0]->due <= now) {
        tb_timer_t *t = l->heap[0];
        tb_timer_cancel(l, t);
        t->fn(t, now);
        fired++;
    }
    return fired;
}

/* ---- the mailbox ---- */

/* Append m under mu; 1 if the caller is to wake the loop for it (wake
 * asked, and no post since the last take has woken it yet). */
static int enqueue(tb_loop_t *l, tb_mail_t *m, int wake)
{
    m->next = NULL;
    pthread_mutex_lock(&l->mu);
    if (l->tail)
        l->tail->next = m;
    else
        l->head = m;
    l->tail = m;
    atomic_store(&l->posted, 1);
    wake = wake && !l->woken;
    if (wake)
        l->woken = 1;
    pthread_mutex_unlock(&l->mu);
    return wake;
}

/* A post behind another that has not been taken yet rides on its wake:
 * the take that the first one's write brings about takes both. A parent's
 * loss posted two messages to the EDS back to back (the failure, then the
 * adoption), two eventfd writes and often two wake-ups of its thread. */
void tb_loop_post(tb_loop_t *l, tb_mail_t *m)
{
    if (enqueue(l, m, 1))
        tb_loop_wake(l);
}

void tb_loop_queue(tb_loop_t *l, tb_mail_t *m)
{
    enqueue(l, m, 0);
}

void tb_loop_wake(tb_loop_t *l)
{
    uint64_t one = 1;
    ssize_t r = write(l->wake.fd, &one, sizeof one);
    (void)r;      /* a full counter (never: 2^64 - 2 wakes) still wakes */
}

int tb_loop_has_mail(tb_loop_t *l)
{
    return atomic_load(&l->posted);
}

tb_mail_t *tb_loop_take(tb_loop_t *l)
{
    pthread_mutex_lock(&l->mu);
    tb_mail_t *m = l->head;
    l->head = l->tail = NULL;
    atomic_store(&l->posted, 0);
    l->woken = 0;           /* the next post wakes it again */
    pthread_mutex_unlock(&l->mu);
    return m;
}

void tb_loop_drain(tb_loop_t *l)
{
    tb_mail_t *m = tb_loop_take(l);
    if (m && l->drain)
        l->drain(l->arg, m);
}

TB_HOT static void on_wake(tb_io_t *io, uint32_t events)
{
    (void)events;
    tb_loop_t *l = (tb_loop_t *)((char *)io - offsetof(tb_loop_t, wake));
    uint64_t v;
    ssize_t r = read(io->fd, &v, sizeof v);
    (void)r;
    tb_mail_t *m = tb_loop_take(l);
    if (l->drain)
        l->drain(l->arg, m);
}

/* ---- descriptors ---- */

/* Register io's fd for events in a shared loop (tb_loop_share): here, then
 * in the partner set; was: it is in both already (taken out first). */
static int share_reg(tb_loop_t *l, tb_io_t *io, uint32_t events, int was)
{
    if (was) {
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
        epoll_ctl(l->pfd, EPOLL_CTL_DEL, io->fd, NULL);
    }
    uint32_t io_bits = events & (EPOLLIN | EPOLLOUT);
    struct epoll_event ev = { .events = events, .data.ptr = io };
    if (events & EPOLLIN)
        ev.events = io_bits | EPOLLEXCLUSIVE;
    struct epoll_event pev = { .events = io_bits | EPOLLEXCLUSIVE | EPOLLET,
                               .data.ptr = l->pio };
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, io->fd, &ev) < 0)
        return -1;
    if (epoll_ctl(l->pfd, EPOLL_CTL_ADD, io->fd, &pev) < 0) {
        int e = errno;
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
        errno = e;
        return -1;
    }
    return 0;
}

TB_HOT int tb_loop_watch(tb_loop_t *l, tb_io_t *io, uint32_t events)
{
    if (io->registered && io->events == events)
        return 0;
    /* io is written before epoll_ctl: an ADD from another thread (the EDS's
     * watches, added by the reactor) publishes it to the loop's thread. */
    int was = io->registered;
    uint32_t old = io->events;
    io->registered = 1;
    io->events = events;
    struct epoll_event ev = { .events = events, .data.ptr = io };
    int rc = l->pfd >= 0 ? share_reg(l, io, events, was)
                         : epoll_ctl(l->epfd, was ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, io->fd, &ev);
    if (rc < 0) {
        int e = errno;
        if (was && l->pfd >= 0)
            atomic_fetch_sub(&l->nio, 1);   /* taken out of both by share_reg */
        io->registered = was && l->pfd < 0;
        io->events = io->registered ? old : 0;
        return e == ENOMEM || e == ENOSPC ? TBON_ENOMEM : TBON_EIO;
    }
    if (!was)
        atomic_fetch_add(&l->nio, 1);
    return 0;
}

void tb_loop_forget(tb_loop_t *l, tb_io_t *io)
{
    if (!io->registered)
        return;
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
    if (l->pfd >= 0)
        epoll_ctl(l->pfd, EPOLL_CTL_DEL, io->fd, NULL);
    atomic_fetch_sub(&l->nio, 1);
    io->registered = 0;
    io->events = 0;
}

int tb_loop_share(tb_loop_t *l, int pfd, tb_io_t *pio)
{
    /* Only the loop's own wake-up may be watched yet (the others would have
     * to be found and registered again). */
    if (l->pfd >= 0 || pfd < 0 || !pio || atomic_load(&l->nio) != 1)
        return TBON_EINVAL;
    l->pfd = fcntl(pfd, F_DUPFD_CLOEXEC, 0);
    if (l->pfd < 0)
        return errno == EMFILE || errno == ENFILE ? TBON_ENOMEM : TBON_EIO;
    l->pio = pio;
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->wake.fd, NULL);
    if (share_reg(l, &l->wake, l->wake.events, 0) < 0) {
        int e = errno;
        close(l->pfd);
        l->pfd = -1;
        struct epoll_event ev = { .events = l->wake.events, .data.ptr = &l->wake };
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wake.fd, &ev) < 0)
            l->failed = TBON_EIO;       /* the loop would never wake: failed */
        return e == ENOMEM || e == ENOSPC ? TBON_ENOMEM : TBON_EIO;
    }
    return 0;
}

void tb_loop_rearm(tb_loop_t *l, tb_io_t *io, uint32_t events)
{
    struct epoll_event ev = { .events = events, .data.ptr = io };
    epoll_ctl(l->epfd, EPOLL_CTL_MOD, io->fd, &ev);
}

TB_HOT int tb_loop_wait(tb_loop_t *l, int max_ms)
{
    if (l->failed) {
        errno = ENOMEM;
        return l->failed;
    }
    struct epoll_event evs[64];
    int wait = max_ms;
    if (l->nheap) {
        int64_t left = l->heap[0]->due - tb_now_ms();
        if (left < 0)
            left = 0;
        if (wait < 0 || left < wait)
            wait = left > INT32_MAX ? INT32_MAX : (int)left;
    }
    int k = epoll_wait(l->epfd, evs, 64, wait);
    if (k < 0)
        return errno == EINTR ? 0 : TBON_EIO;
    for (int i = 0; i < k; i++) {
        tb_io_t *io = evs[i].data.ptr;
        io->fn(io, evs[i].events);
    }
    return k;
}

/* ---- life ---- */

tb_loop_t *tb_loop_new(tb_drain_fn drain, void *arg)
{
    tb_loop_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->drain = drain;
    l->arg = arg;
    atomic_init(&l->due_pub, INT64_MAX);
    pthread_mutex_init(&l->mu, NULL);
    l->pfd = -1;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    l->wake.fn = on_wake;
    if (l->epfd < 0 || l->wake.fd < 0 || tb_loop_watch(l, &l->wake, EPOLLIN) != 0) {
        int e = errno;
        tb_loop_destroy(l);
        errno = e;
        return NULL;
    }
    return l;
}

void tb_loop_destroy(tb_loop_t *l)
{
    if (!l)
        return;
    if (l->head && l->drain)
        l->drain(l->arg, l->head);
    free(l->heap);            /* armed timers are their owners' to forget */
    if (l->wake.fd >= 0)
        close(l->wake.fd);
    if (l->epfd >= 0)
        close(l->epfd);
    if (l->pfd >= 0)
        close(l->pfd);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int tb_loop_fd(const tb_loop_t *l)
{
    return l->epfd;
}
