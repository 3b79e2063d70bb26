/* kick.c - a back-end's node while its application is away (busy computing,
 * or between calls): a small thread of its own watches the node's loop and
 * runs a turn (tb_net_kick) when something arrives and no application
 * thread drives the node, so that the parent is answered (views, checks,
 * adoptions) whatever the application does.
 *
 * This was the EDS thread's job. It is not any more: a thread that sends
 * heartbeats never runs the data path (docs/fault-tolerance.md), or a
 * streaming back-end's beats stop while its EDS is busy forwarding, and a
 * healthy back-end is suspected. */
#include "api/net_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "net/loop.h"
#include "node/node.h"
#include "util/clock.h"
#include "util/log.h"

/* wake_at while the kicker computes it */
#define WAKE_LOOKING INT64_MIN

struct tb_kicker {
    tbon_net_t *net;
    tb_loop_t *loop;          /* the kicker thread's: the node's loop fd in it */
    tb_io_t node_io;          /* one shot: armed while nobody drives the node */
    atomic_int armed;
    atomic_int stop;
    _Atomic int64_t wake_at;  /* when the kicker wakes by itself (INT64_MAX:
                                 not before something arrives) */
    pthread_t thread;
};

static void on_node(tb_io_t *io, uint32_t events)
{
    (void)events;
    tb_kicker_t *k = io->arg;
    atomic_store(&k->armed, 0);         /* the one shot fired */
    tb_net_kick(k->net);
}

/* The node's timers (its link layer's acknowledgements and resends, its
 * deadlines) do not make its loop descriptor readable: while nobody drives
 * the node, the kicker also wakes when the first is due and runs a turn. */
static int timer_wait(tb_kicker_t *k, int64_t now)
{
    /* "Looking" first: an arm between our look at `armed` and the store of
     * wake_at below sees it and wakes us (tb_kicker_arm), or its timer would
     * wait for the next arrival. */
    atomic_store(&k->wake_at, WAKE_LOOKING);
    int64_t due = atomic_load(&k->armed) && k->net->node ? tb_node_next_due(k->net->node)
                                                          : INT64_MAX;
    atomic_store(&k->wake_at, due);
    if (due == INT64_MAX)
        return -1;
    return due <= now ? 0 : due - now > INT32_MAX ? INT32_MAX : (int)(due - now);
}

static void *kicker_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "tbon-kick");
    tb_kicker_t *k = arg;
    int floor_ms = 0;
    while (!atomic_load(&k->stop)) {
        int wait = timer_wait(k, tb_now_ms());
        if (wait >= 0 && wait < floor_ms)
            wait = floor_ms;
        int n = tb_loop_wait(k->loop, wait);
        if (n < 0)
            break;
        floor_ms = 0;
        if (n > 0 || wait < 0 || !atomic_load(&k->armed) || tb_now_ms() < atomic_load(&k->wake_at))
            continue;
        /* A timer is due and nobody drives the node: run it. If another
         * thread holds the node (it will fire the timer), or the node has
         * stopped (it never will), do not ask again at once. */
        int ran = tb_net_kick_ran(k->net);
        if (ran < 0)
            atomic_store(&k->armed, 0);
        else if (ran == 0)
            floor_ms = 5;
    }
    return NULL;
}

tb_kicker_t *tb_kicker_start(tbon_net_t *net, int node_loop_fd)
{
    tb_kicker_t *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->net = net;
    atomic_init(&k->wake_at, INT64_MAX);
    k->loop = tb_loop_new(NULL, NULL);
    k->node_io = (tb_io_t){ .fd = node_loop_fd, .fn = on_node, .arg = k };
    /* Disarmed until the application's network is complete (tb_kicker_arm). */
    if (!k->loop || tb_loop_watch(k->loop, &k->node_io, EPOLLONESHOT) < 0 ||
        pthread_create(&k->thread, NULL, kicker_thread, k) != 0) {
        tb_loop_free(k->loop);
        free(k);
        return NULL;
    }
    return k;
}

void tb_kicker_arm(tb_kicker_t *k, int on)
{
    /* A back-end arms it after every call into the library: only changes
     * cost a system call (and a timer due before the kicker would wake). */
    if (!k)
        return;
    if (atomic_exchange(&k->armed, on) != on)
        tb_loop_rearm(k->loop, &k->node_io, on ? EPOLLIN | EPOLLONESHOT : EPOLLONESHOT);
    if (!on || !k->net->node)
        return;
    int64_t w = atomic_load(&k->wake_at);
    if (w == WAKE_LOOKING || tb_node_next_due(k->net->node) < w)
        tb_loop_wake(k->loop);
}

void tb_kicker_stop(tb_kicker_t *k)
{
    if (!k)
        return;
    atomic_store(&k->stop, 1);
    tb_loop_wake(k->loop);
    pthread_join(k->thread, NULL);
    tb_loop_free(k->loop);
    free(k);
}
