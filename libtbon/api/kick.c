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
#include <stdlib.h>
#include <sys/epoll.h>

#include "net/loop.h"
#include "util/log.h"

struct tb_kicker {
    tbon_net_t *net;
    tb_loop_t *loop;          /* the kicker thread's: the node's loop fd in it */
    tb_io_t node_io;          /* one shot: armed while nobody drives the node */
    atomic_int armed;
    atomic_int stop;
    pthread_t thread;
};

static void on_node(tb_io_t *io, uint32_t events)
{
    (void)events;
    tb_kicker_t *k = io->arg;
    atomic_store(&k->armed, 0);         /* the one shot fired */
    tb_net_kick(k->net);
}

static void *kicker_thread(void *arg)
{
    tb_kicker_t *k = arg;
    while (!atomic_load(&k->stop))
        if (tb_loop_wait(k->loop, -1) < 0)
            break;
    return NULL;
}

tb_kicker_t *tb_kicker_start(tbon_net_t *net, int node_loop_fd)
{
    tb_kicker_t *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->net = net;
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
     * cost a system call. */
    if (!k || atomic_exchange(&k->armed, on) == on)
        return;
    tb_loop_rearm(k->loop, &k->node_io, on ? EPOLLIN | EPOLLONESHOT : EPOLLONESHOT);
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
