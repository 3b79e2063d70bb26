/* kick.c - a back-end's node while its application is away (busy computing,
 * or between calls): a small thread of its own watches the node's loop and
 * runs a turn (its kick function, tb_net_kick) when something arrives and no application
 * thread drives the node, so that the parent is answered (views, checks,
 * adoptions) whatever the application does.
 *
 * This was the EDS thread's job. It is not any more: a thread that sends
 * heartbeats never runs the data path (docs/fault-tolerance.md), or a
 * streaming back-end's beats stop while its EDS is busy forwarding, and a
 * healthy back-end is suspected.
 *
 * The thread starts the first time it has work. Until then the kicker's
 * loop descriptor waits in the EDS thread's loop (tb_node_side_watch), and
 * the EDS thread starts the kicker thread when it turns readable while the
 * kicker is armed (on_side). A
 * back-end whose application is in the library whenever something arrives
 * never starts one: a thread made and ended per back-end, and the node's
 * loop nested in one more, cost 8-19% of a wave's round trip and of a
 * teardown (bench/RESULTS.md, "what a back-end's kicker thread costs").
 *
 * The kicker hears of the node's events without being armed and disarmed
 * in the kernel: the node's loop shares them with the kicker's
 * (tb_loop_share), every descriptor registered exclusive in both, the
 * node's first, so that the kernel wakes the kicker only when no thread
 * waits in the node's loop. Arming is a flag. Before, the node's loop
 * descriptor sat in the kicker's set as a one shot, modified at every
 * call that waited and at every return: two epoll_ctl per wave in every
 * back-end, about 5% of a 16x16 wave (bench/RESULTS.md). An event that
 * comes while an application thread is in the library but not waiting
 * wakes the kicker, whose kick finds the node driven and leaves a note
 * that the driver reads before it lets go (net.c, release). */
#include "api/net_int.h"
#include "util/hot.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "net/loop.h"
#include "util/clock.h"
#include "util/log.h"

struct tb_kicker {
    void (*kick)(void *arg);  /* runs a turn of the node (tb_net_kick) */
    void *arg;
    tb_loop_t *loop;          /* the kicker thread's: the node's loop fd in it */
    tb_io_t node_io;          /* what the node's shared events name (fd -1) */
    tb_io_t timer_io;         /* tfd: the node's first timer, while nobody drives */
    atomic_int armed;
    atomic_int stop;
    pthread_mutex_t tmu;      /* the timer's setting and changes of tfd_due */
    _Atomic int64_t tfd_due;  /* ms the timer is set for; INT64_MAX: not set
                                 (read without tmu: tb_kicker_arm) */
    tb_node_t *node;          /* whose EDS loop holds side_io (NULL: none) */
    tb_io_t side_io;          /* loop's descriptor there, one shot */
    pthread_mutex_t smu;      /* started, against the EDS thread's on_side */
    int started;
    atomic_int parked;        /* on_side left side_io unwatched: the node's
                                 events came while it was driven; the next
                                 arm watches it again */
    pthread_t thread;
};

/* The node has new events and nobody waits in its loop: run a turn, or
 * leave the note for the thread that drives it (tb_net_kick). */
static void on_node(tb_io_t *io, uint32_t events)
{
    (void)events;
    tb_kicker_t *k = io->arg;
    k->kick(k->arg);
}

/* Make the timer go off at due or before (tb_now_ms's clock), under tmu.
 * A timer set earlier than due is left as it is: going off early costs one
 * wake-up of this thread, which finds nothing due (or runs a turn that
 * finds nothing to do) and leaves the timer unset, for the next arm to set.
 * A back-end arms the kicker after every call and disarms it at the next:
 * setting and cancelling the timer each time were two system calls per
 * call, per back-end (at 1,024 back-ends, 675,000 of them in one run of
 * bench_tree 32x32); now a timer is set about once per due time that comes
 * earlier than the one set, and never cancelled. */
static void set_timer(tb_kicker_t *k, int64_t due)
{
    if (due >= k->tfd_due)
        return;
    struct itimerspec its = { { 0, 0 }, { 0, 0 } };
    /* A due time of 0 ms would disarm the timer: at least 1 ns. */
    its.it_value.tv_sec = (time_t)(due / 1000);
    its.it_value.tv_nsec = (long)(due % 1000) * 1000000L + 1;
    if (timerfd_settime(k->timer_io.fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
        k->tfd_due = due;
    else
        TB_WARN("kick", "cannot set the node's timer: %s", strerror(errno));
}

/* The node's timers (its link layer's acknowledgements and resends, its
 * deadlines) do not make its loop descriptor readable: while nobody drives
 * the node, the kicker also wakes when the first is due and runs a turn. */
static void on_timer(tb_io_t *io, uint32_t events)
{
    (void)events;
    tb_kicker_t *k = io->arg;
    uint64_t n = 0;
    pthread_mutex_lock(&k->tmu);
    /* Nothing to read: set again (or unset) since it went off. */
    int fired = read(io->fd, &n, sizeof n) == (ssize_t)sizeof n && n > 0;
    if (fired)
        k->tfd_due = INT64_MAX;
    pthread_mutex_unlock(&k->tmu);
    /* Someone drives the node (it fires the timer itself), or nobody does:
     * then we run the turn, and its release sets the timer anew. */
    if (fired && atomic_load(&k->armed))
        k->kick(k->arg);
}

static void *kicker_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "tbon-kick");
    tb_kicker_t *k = arg;
    while (!atomic_load(&k->stop))
        if (tb_loop_wait(k->loop, -1) < 0)
            break;
    return NULL;
}

/* Start the thread once (under smu): 0 or pthread_create's error. */
static int start_thread(tb_kicker_t *k)
{
    if (k->started || atomic_load(&k->stop))
        return 0;
    int rc = pthread_create(&k->thread, NULL, kicker_thread, k);
    if (rc == 0)
        k->started = 1;
    return rc;
}

/* The kicker's loop has something, and no thread waits on it yet; on the
 * EDS thread, which runs no turn of the node itself.
 * - Armed (nobody drives the node): start the thread, which finds it there.
 * - Else the application drives the node: it fires its timers itself, and
 *   runs its events. The timer, set at an earlier arm (set_timer leaves it
 *   set): take the expiry and watch again. Events of the node that came
 *   while the application was in the library but not waiting: they stay
 *   readable until it runs them, so watching again would wake this thread
 *   over and over; the next arm watches again (parked). Starting a thread
 *   here put a thread's start in every back-end on the path of the first
 *   failure after a quiet start (the orphans' deadlines), which made
 *   recoveries slower.
 * A stop (a quit wakes the loop) ends the watch. */
static void on_side(tb_io_t *io, uint32_t events)
{
    (void)events;
    tb_kicker_t *k = io->arg;
    int rc = 0;
    pthread_mutex_lock(&k->smu);
    if (atomic_load(&k->stop)) {
        /* tb_kicker_stop takes it out */
    } else if (atomic_load(&k->armed)) {
        rc = start_thread(k);
    } else {
        uint64_t n = 0;
        pthread_mutex_lock(&k->tmu);
        if (read(k->timer_io.fd, &n, sizeof n) == (ssize_t)sizeof n && n > 0) {
            k->tfd_due = INT64_MAX;
            /* armed since we looked: its due time may be the one just
             * taken (set_timer kept the earlier setting), so go off now */
            if (atomic_load(&k->armed))
                set_timer(k, 0);
        }
        int timer = n > 0;
        pthread_mutex_unlock(&k->tmu);
        if (!timer) {
            atomic_store(&k->parked, 1);
            /* armed since we looked: the arm may have missed the flag */
            if (atomic_load(&k->armed) && atomic_exchange(&k->parked, 0))
                rc = start_thread(k);
        } else if (tb_node_side_watch(k->node, &k->side_io, EPOLLIN | EPOLLONESHOT) != 0) {
            rc = start_thread(k);       /* cannot wait here any more */
        }
    }
    pthread_mutex_unlock(&k->smu);
    if (rc != 0)
        TB_WARN("kick", "cannot start the back-end's kicker thread: %s; its node runs "
                "only while the application is in the library", strerror(rc));
}

/* The kicker's loop was woken: a poke (tb_kicker_poke), or a stop. */
static void on_poke(void *arg, tb_mail_t *list)
{
    (void)list;                         /* nothing is ever posted */
    tb_kicker_t *k = arg;
    if (!atomic_load(&k->stop))
        k->kick(k->arg);
}

void tb_kicker_poke(tb_kicker_t *k)
{
    if (k)
        tb_loop_wake(k->loop);
}

static void kicker_free(tb_kicker_t *k)
{
    tb_loop_destroy(k->loop);
    if (k->timer_io.fd >= 0)
        close(k->timer_io.fd);
    pthread_mutex_destroy(&k->tmu);
    pthread_mutex_destroy(&k->smu);
    free(k);
}

tb_kicker_t *tb_kicker_new(void (*kick)(void *arg), void *arg)
{
    tb_kicker_t *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->kick = kick;
    k->arg = arg;
    k->tfd_due = INT64_MAX;
    pthread_mutex_init(&k->tmu, NULL);
    pthread_mutex_init(&k->smu, NULL);
    k->loop = tb_loop_new(on_poke, k);
    k->node_io = (tb_io_t){ .fd = -1, .fn = on_node, .arg = k };
    k->timer_io = (tb_io_t){ .fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC),
                             .fn = on_timer, .arg = k };
    if (!k->loop || k->timer_io.fd < 0 || tb_loop_watch(k->loop, &k->timer_io, EPOLLIN) < 0) {
        kicker_free(k);
        return NULL;
    }
    return k;
}

int tb_kicker_share_fd(const tb_kicker_t *k)
{
    return tb_loop_fd(k->loop);
}

tb_io_t *tb_kicker_share_io(tb_kicker_t *k)
{
    return &k->node_io;
}

int tb_kicker_start(tb_kicker_t *k, tb_node_t *node)
{
    k->side_io = (tb_io_t){ .fd = tb_loop_fd(k->loop), .fn = on_side, .arg = k };
    k->node = node;                     /* on_side may run at once */
    if (tb_node_side_watch(node, &k->side_io, EPOLLIN | EPOLLONESHOT) == 0)
        return 0;
    k->node = NULL;
    /* No EDS thread to wait in (a node with given links): a thread now. */
    pthread_mutex_lock(&k->smu);
    int rc = start_thread(k);
    pthread_mutex_unlock(&k->smu);
    return rc ? TBON_ENOMEM : 0;
}

TB_HOT void tb_kicker_arm(tb_kicker_t *k, int on, int64_t due)
{
    /* A back-end arms it after every call into the library: a flag (and a
     * system call for a timer due before the kicker would wake). */
    if (!k)
        return;
    atomic_store(&k->armed, on);
    /* The EDS thread stopped watching while the node was driven: watch
     * again, or start the thread if it cannot (on_side). */
    if (on && atomic_load(&k->parked) && atomic_exchange(&k->parked, 0)) {
        pthread_mutex_lock(&k->smu);
        int rc = 0;
        if (!k->started && !atomic_load(&k->stop) && k->node &&
            tb_node_side_watch(k->node, &k->side_io, EPOLLIN | EPOLLONESHOT) != 0)
            rc = start_thread(k);
        pthread_mutex_unlock(&k->smu);
        if (rc != 0)
            TB_WARN("kick", "cannot start the back-end's kicker thread: %s", strerror(rc));
    }
    if (!on || due == INT64_MAX)
        return;         /* a timer set stays: see set_timer */
    /* Set for no later already (the common case: a back-end arms after
     * every call). Seen without tmu: if the timer went off and nobody has
     * taken it yet, its taker finds the kicker armed (the exchange above
     * comes first) and runs the turn whose release sets it anew. */
    if (due >= atomic_load(&k->tfd_due))
        return;
    pthread_mutex_lock(&k->tmu);
    set_timer(k, due);
    pthread_mutex_unlock(&k->tmu);
}

void tb_kicker_quit(tb_kicker_t *k)
{
    if (k && !atomic_exchange(&k->stop, 1))
        tb_loop_wake(k->loop);
}

void tb_kicker_stop(tb_kicker_t *k)
{
    if (!k)
        return;
    tb_kicker_quit(k);
    /* No thread starts, and the EDS thread watches no more, after stop is
     * set (on_side looks under smu). */
    pthread_mutex_lock(&k->smu);
    int started = k->started;
    if (k->node)
        tb_node_side_forget(k->node, &k->side_io);
    pthread_mutex_unlock(&k->smu);
    if (started)
        pthread_join(k->thread, NULL);
}

void tb_kicker_destroy(tb_kicker_t *k)
{
    if (k)
        kicker_free(k);
}
