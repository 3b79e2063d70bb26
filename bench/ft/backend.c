/* backend.c - the back-end of bench_ft's trees (bench_ft --be): it answers
 * the FE's requests (ft.h, OP_*) on the stream they came on. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tbon/tbon.h>

#include "ft.h"

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* OP_STREAM: npkt packets of STREAM_VALS values as fast as back-pressure
 * allows, cycling through this back-end's own STREAM_POOL values (so the
 * union sets stay small and most of the input is duplicates the tree
 * removes, as in seed 003 VI-B), then the mark of round w with the count. */
static int be_stream(tbon_stream_t *s, uint64_t rank, uint32_t w, uint32_t npkt)
{
    static uint64_t next;       /* the pool position carries over the rounds */
    uint64_t v[STREAM_VALS];
    int rc;
    for (uint32_t k = 0; k < npkt; k++) {
        for (int i = 0; i < STREAM_VALS; i++, next++)
            v[i] = V_DATA | rank << 12 | (next & (STREAM_POOL - 1));
        if ((rc = tbon_stream_send(s, TAG, "%auld", v, (size_t)STREAM_VALS)) != 0)
            return rc;
    }
    v[0] = V_MARK | (uint64_t)(w & 0x3ff) << 52 | rank << 40 | (uint64_t)npkt * STREAM_VALS;
    return tbon_stream_send(s, TAG, "%auld", v, (size_t)1);
}

uint32_t *ping_routes(tbon_net_t *net, tbon_rank_t me, size_t size, size_t *nv)
{
    uint32_t *v = malloc(size * (ROUTE_MAX + 1) * sizeof *v);
    size_t n = 0;
    for (tbon_rank_t r = 0; v && r < size; r++) {
        if (r == me)
            continue;
        size_t len = 0;
        if (tbon_net_ping(net, r, 10000, NULL, v + n + 1, ROUTE_MAX, &len) != 0 ||
            len > ROUTE_MAX)
            len = 0;
        v[n] = (uint32_t)len;
        n += 1 + len;
    }
    *nv = n;
    return v;
}

/* OP_ROUTES: the route of a ping to every rank below size but this one. */
static int be_routes(tbon_net_t *net, tbon_stream_t *s, tbon_rank_t me, uint32_t size)
{
    size_t n = 0;
    uint32_t *v = ping_routes(net, me, size, &n);
    if (!v)
        return TBON_ENOMEM;
    int rc = tbon_stream_send(s, TAG, "%aud", v, n);
    free(v);
    return rc;
}

/* Join the tree and answer the FE's requests (see the OP_ enum) until it
 * shuts the network down. */
int be_main(int argc, char **argv)
{
    tbon_error_t err = { 0 };
    const char *attach = NULL;      /* --attach FILE: join the running tree */
    tbon_rank_t as = TBON_RANK_NONE;  /* --rank R: as rank R, restarted */
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--attach") == 0)
            attach = argv[i + 1];
        else if (strcmp(argv[i], "--rank") == 0)
            as = (tbon_rank_t)strtoul(argv[i + 1], NULL, 10);
    }
    tbon_net_t *net = attach ? tbon_be_attach(attach, as, &err)
                             : tbon_be_create(&argc, &argv, &err);
    if (!net) {
        fprintf(stderr, PROG " --be: tbon_be_create: %s\n", err.msg);
        return 1;
    }
    uint64_t rank = tbon_net_rank(net), seq = 0;
    tbon_stream_t *tick_s = NULL;
    int64_t tick_us = 0, next_tick = 0;
    int rc;
    for (;;) {
        int timeout = -1;
        if (tick_s) {
            int64_t d = next_tick - now_us();
            timeout = d <= 0 ? 0 : (int)((d + 999) / 1000);
        }
        tbon_packet_t *p = NULL;
        tbon_stream_t *s = NULL;
        rc = tbon_net_recv(net, &p, &s, timeout);
        if (rc == TBON_ETIMEOUT) {
            uint64_t v = V_TICK | seq++ << 11 | rank;
            if ((rc = tbon_stream_send(tick_s, TAG, "%auld", &v, (size_t)1)) != 0)
                break;
            next_tick += tick_us;
            continue;
        }
        if (rc != 0)
            break;
        uint32_t op, w, arg;
        if (tbon_packet_unpack(p, "%ud %ud %ud", &op, &w, &arg) != 0) {
            fprintf(stderr, PROG " --be: rank %" PRIu64 ": request of format \"%s\"\n", rank,
                    tbon_packet_format(p));
            tbon_packet_unref(p);
            rc = TBON_EFORMAT;
            break;
        }
        tbon_packet_unref(p);
        if (rank > V_RANK && (op == OP_STREAM || op == OP_TICK)) {   /* fits the values */
            fprintf(stderr, PROG " --be: rank %" PRIu64 " too large for op %u\n", rank, op);
            rc = TBON_EINVAL;
            break;
        }
        uint64_t v = (uint64_t)w << 32 | rank;
        switch (op) {
        case OP_WAVE:
            rc = tbon_stream_send(s, TAG, "%auld", &v, (size_t)1);
            break;
        case OP_STREAM:
            rc = be_stream(s, rank, w, arg);
            break;
        case OP_SUM:
            rc = tbon_stream_send(s, TAG, "%ld %ld", (int64_t)w, (int64_t)1);
            break;
        case OP_ROUTES:
            rc = w == rank ? be_routes(net, s, (tbon_rank_t)rank, arg) : 0;
            break;
        case OP_TICK:
            if (!arg && w && tick_s) {
                /* stop, and say how many were sent: the mark of round w */
                uint64_t m = V_MARK | (uint64_t)(w & 0x3ff) << 52 | rank << 40 | seq;
                rc = tbon_stream_send(tick_s, TAG, "%auld", &m, (size_t)1);
            }
            tick_s = arg ? s : NULL;
            tick_us = (int64_t)arg * 1000;
            next_tick = now_us() + tick_us;
            break;
        default:
            rc = TBON_EINVAL;
        }
        if (rc != 0)
            break;
    }
    if (rc != TBON_ECLOSED)
        fprintf(stderr, PROG " --be: rank %" PRIu64 ": %s (%s)\n", rank, tbon_strerror(rc),
                tbon_net_error(net));
    tbon_net_destroy(net);
    return rc == TBON_ECLOSED ? 0 : 1;
}

/* ------------------------------------------------ finding the run's processes */
