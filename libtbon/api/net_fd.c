/* net_fd.c - tbon_net_fd: one descriptor for an application's own event
 * loop (poll, epoll, select, Python's asyncio).
 *
 * An eventfd, level-triggered by hand: its counter is non-zero exactly
 * while a call that polls (timeout 0) would return at once - a packet or a
 * wave's error outcome on a stream (tbon_net_recv, tbon_stream_recv), a
 * filter failure not yet reported, an event (tbon_net_next_event), a
 * message (tbon_net_recv_direct), or the network's end (every call then
 * says TBON_ECLOSED, and the descriptor stays readable). Whoever changes
 * one of those queues calls tb_net_fd_sync with net->mu held; the counter
 * is written only when readiness changes (one write when the first entry
 * arrives, one read when the last is taken), so a stream of waves costs
 * the loop at most two system calls a wave, and a network whose
 * application never asked for the descriptor costs one compare.
 *
 * The application's loop needs no thread of its own: at the FE the
 * reactor thread fills the queues; at a back-end the kicker thread (kick.c)
 * runs the node whenever no application thread does. */
#include "api/net_int.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int fd_ready(const tbon_net_t *net)
{
    return net->closed || net->nqueued || net->any_error || net->events.len ||
           net->direct.len;
}

void tb_net_fd_update(tbon_net_t *net)
{
    int want = fd_ready(net);
    if (want == net->evfd_on)
        return;
    uint64_t v = 1;
    ssize_t n;
    if (want) {
        do
            n = write(net->evfd, &v, sizeof v);
        while (n < 0 && errno == EINTR);
    } else {
        do
            n = read(net->evfd, &v, sizeof v);     /* non-blocking: drains it */
        while (n < 0 && errno == EINTR);
    }
    net->evfd_on = want;
}

int tbon_net_fd(tbon_net_t *net)
{
    if (!net)
        return tb_net_fail(net, TBON_EINVAL, "tbon_net_fd needs a network");
    pthread_mutex_lock(&net->mu);
    if (net->evfd < 0) {
        int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0) {
            int e = errno;
            pthread_mutex_unlock(&net->mu);
            return tb_net_fail(net, e == EMFILE || e == ENFILE ? TBON_EIO : TBON_ENOMEM,
                               "cannot make the network's descriptor (eventfd): %s",
                               strerror(e));
        }
        net->evfd = fd;
        net->evfd_on = 0;
        tb_net_fd_update(net);      /* what waits already */
    }
    int fd = net->evfd;
    pthread_mutex_unlock(&net->mu);
    return fd;
}

void tb_net_fd_close(tbon_net_t *net)
{
    if (net->evfd >= 0)
        close(net->evfd);
    net->evfd = -1;
}
