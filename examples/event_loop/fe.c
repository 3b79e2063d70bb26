/* fe.c - the event_loop front-end: a tree driven from the tool's own epoll
 * loop, with no thread of the tool's own. One epoll set watches the
 * network's descriptor (tbon_net_fd) beside a signalfd for SIGINT and
 * SIGTERM: waves are kept WINDOW deep on a SUM stream, each result checked
 * exactly as it comes, events printed; ^C ends the run early and cleanly.
 *
 * usage: fe TOPOLOGY [WAVES]
 * The back-end (be) is found next to this program.
 */
#include <tbon/tbon.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define TAG_WAVE TBON_FIRST_APP_TAG     /* "%ud" w -> "%ld" rank + w, summed */
#define WINDOW 16

static const char *const event_name[] = {
    "failed", "adopted", "joined", "left", "view stable", "data lost", "suspect", "alive",
};

/* The network's descriptor is readable: take everything it has, events
 * and results, with timeout 0 (it is level-triggered: what is left keeps
 * it readable). Each result is checked against wave *got: every back-end
 * answers rank + wave, so the sum is the ranks' plus the wave times their
 * number (of those it holds, if a back-end died). 0, or -1 when the network
 * failed (or shut down). */
static int take_all(tbon_net_t *net, int64_t rank_sum, int nbe, long *got, long *wrong)
{
    tbon_event_t e;
    while (tbon_net_next_event(net, &e, 0) == 0)
        printf("event: rank %u %s\n", e.rank,
               e.type < sizeof event_name / sizeof *event_name ? event_name[e.type]
                                                                 : "(other)");
    tbon_packet_t *p;
    tbon_stream_t *from;
    int rc;
    while ((rc = tbon_net_recv(net, &p, &from, 0)) == 0) {
        int64_t v = 0;
        tbon_rank_t cov[4096];
        size_t nc = tbon_packet_covered(p, cov, 4096);
        int64_t want = rank_sum + (int64_t)nbe * *got;
        if (nc != (size_t)nbe)              /* a back-end died: what is there */
            for (size_t j = want = 0; j < nc; j++)
                want += cov[j] + *got;
        if (tbon_packet_unpack(p, "%ld", &v) != 0 || v != want) {
            fprintf(stderr, "fe: wave %ld: %lld, expected %lld\n", *got, (long long)v,
                    (long long)want);
            ++*wrong;
        }
        tbon_packet_unref(p);
        ++*got;
    }
    if (rc == TBON_ETIMEOUT)
        return 0;
    fprintf(stderr, "fe: %s\n", tbon_net_error(net));
    return -1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: %s TOPOLOGY [WAVES]\n"
               "Launch the tree of TOPOLOGY with ./be at its leaves and run WAVES (default\n"
               "1000) SUM waves from an epoll loop on tbon_net_fd, each checked; ^C stops.\n",
               argv[0]);
        return 0;
    }
    long waves = 1000;
    if (argc < 2 || argc > 3 || (argc == 3 && (waves = atol(argv[2])) <= 0)) {
        fprintf(stderr, "usage: %s TOPOLOGY [WAVES]   (WAVES >= 1, default 1000)\n", argv[0]);
        return 2;
    }
    char be[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", be, sizeof be - 4);
    char *slash = n > 0 ? memrchr(be, '/', (size_t)n) : NULL;
    if (!slash) {
        fprintf(stderr, "fe: cannot find this program's directory\n");
        return 1;
    }
    strcpy(slash + 1, "be");

    /* SIGINT and SIGTERM come through a descriptor too */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC);

    tbon_error_t err;
    tbon_net_t *net = tbon_fe_create(argv[1], be, NULL, NULL, &err);
    if (!net) {
        fprintf(stderr, "fe: %s\n", err.msg);
        return 1;
    }
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_SUM,
                                          TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    int nfd = tbon_net_fd(net), ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event a = { .events = EPOLLIN, .data.fd = nfd };
    struct epoll_event b = { .events = EPOLLIN, .data.fd = sfd };
    if (!s || nfd < 0 || sfd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, nfd, &a) ||
        epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &b)) {
        fprintf(stderr, "fe: setting up: %s\n", s ? strerror(errno) : tbon_net_error(net));
        tbon_net_destroy(net);
        return 1;
    }
    /* every back-end answers rank + w: the sum is ranks + w * count */
    tbon_rank_t ranks[4096];
    int nbe = tbon_net_backends(net, ranks, 4096);
    int64_t rank_sum = 0;
    for (int i = 0; i < nbe && i < 4096; i++)
        rank_sum += ranks[i];

    long sent = 0, got = 0, wrong = 0;
    int status = 0, stop = 0;
    while (got < waves && !stop) {
        while (sent < waves && sent - got < WINDOW && tbon_stream_send(s, TAG_WAVE, "%ud",
                                                                        (uint32_t)sent) == 0)
            sent++;
        struct epoll_event ev[2];
        int k = epoll_wait(ep, ev, 2, -1);
        for (int i = 0; i < k; i++) {
            if (ev[i].data.fd == sfd) {
                fprintf(stderr, "fe: interrupted after %ld waves\n", got);
                stop = 1;
                continue;
            }
            if (take_all(net, rank_sum, nbe, &got, &wrong) != 0)
                stop = status = 1;
        }
    }
    printf("%ld waves, %s\n", got, wrong ? "some wrong" : "every sum exact");
    close(ep);
    tbon_net_destroy(net);
    return status || wrong;
}
