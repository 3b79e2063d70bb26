/* be.c - the event_loop back-end: a tool's back-end whose own loop (poll)
 * watches its timer - here it counts ticks, as a sampler would take a
 * sample - beside the network's descriptor (tbon_net_fd), and answers each
 * request "%ud" w with rank + w. When the front-end shuts the tree down,
 * the descriptor turns readable and the receive says TBON_ECLOSED.
 *
 * Started by fe (through the tree), never by hand.
 */
#include <tbon/tbon.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define TAG_WAVE TBON_FIRST_APP_TAG

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: be (started by the example's fe through tbon_fe_create)\n"
               "Answers each wave with its rank + the wave, from a poll loop.\n");
        return 0;
    }
    tbon_error_t err;
    tbon_net_t *net = tbon_be_create(&argc, &argv, &err);
    if (!net) {
        fprintf(stderr, "be: %s\n", err.msg);
        return 1;
    }
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    struct itimerspec every_10ms = { { 0, 10000000 }, { 0, 10000000 } };
    timerfd_settime(tfd, 0, &every_10ms, NULL);
    struct pollfd pf[2] = { { .fd = tbon_net_fd(net), .events = POLLIN },
                            { .fd = tfd, .events = POLLIN } };
    uint64_t ticks = 0;
    int status = 0, done = 0;
    while (!done) {
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents & POLLIN) {
            uint64_t k;
            if (read(tfd, &k, sizeof k) == sizeof k)
                ticks += k;             /* a sampler would sample here */
        }
        if (!(pf[0].revents & POLLIN))
            continue;
        tbon_packet_t *p;
        tbon_stream_t *s;
        int rc;
        while ((rc = tbon_net_recv(net, &p, &s, 0)) == 0) {
            uint32_t w;
            if (tbon_packet_tag(p) == TAG_WAVE && tbon_packet_unpack(p, "%ud", &w) == 0)
                tbon_stream_send(s, TAG_WAVE, "%ld", (int64_t)tbon_net_rank(net) + w);
            tbon_packet_unref(p);
        }
        if (rc == TBON_ECLOSED) {
            done = 1;                   /* the front-end is done */
        } else if (rc != TBON_ETIMEOUT) {
            fprintf(stderr, "be %u: %s\n", tbon_net_rank(net), tbon_net_error(net));
            status = done = 1;
        }
    }
    close(tfd);
    tbon_net_destroy(net);
    return status;
}
