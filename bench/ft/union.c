/* union.c - the union stream over every back-end that the recovery,
 * throughput, link and Figure 7 runs watch: its receiver thread classifies
 * each element (ft.h, V_*) and checks it (each wave complete, each element
 * once, each mark of its round). */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tbon/tbon.h>

#include "ft.h"
#include "lib/bench.h"

/* The receiver of a union stream: classify each element, check the waves. */
static void *urecv_main(void *arg)
{
    struct uwatch *u = arg;
    for (;;) {
        pthread_mutex_lock(&fe.mu);
        int stop = u->stop;
        pthread_mutex_unlock(&fe.mu);
        if (stop)
            break;
        tbon_packet_t *p = NULL;
        int rc = tbon_stream_recv(u->s, &p, 200);
        if (rc == TBON_ETIMEOUT)
            continue;
        uint64_t *v = NULL;
        size_t nv = 0;
        if (rc == 0 && tbon_packet_unpack(p, "%auld", &v, &nv) != 0)
            rc = TBON_EFORMAT;
        double t = bench_now();
        pthread_mutex_lock(&fe.mu);
        if (rc != 0 && !u->error[0])
            snprintf(u->error, sizeof u->error, "union stream: %s", tbon_strerror(rc));
        if (rc == 0 && u->tick_max) {
            if (u->npkt == u->cappkt) {
                size_t nc = u->cappkt ? u->cappkt * 2 : 4096;
                double *nt = realloc(u->pkt_t, nc * sizeof *nt);
                if (nt) {
                    u->pkt_t = nt;
                    u->cappkt = nc;
                }
            }
            if (u->npkt < u->cappkt)
                u->pkt_t[u->npkt++] = t;
        }
        for (size_t i = 0; i < nv && !u->error[0]; i++) {
            uint64_t x = v[i];
            if (x & V_MARK) {
                uint64_t r = (x >> 40) & 0xfff, c = x & ((UINT64_C(1) << 40) - 1);
                if (r >= u->size || ((x >> 52) & 0x3ff) != (u->round & 0x3ff) ||
                    u->marked[r]++) {
                    snprintf(u->error, sizeof u->error, "stream mark of rank %" PRIu64
                             " bad, of another round or twice", r);
                    break;
                }
                u->nmarks++;
                u->sent[r] += c;
                u->mark_total += c;
                u->last_mark = t;
            } else if (x & V_DATA) {
                uint64_t r = (x & ~V_DATA) >> 12, k = x & (STREAM_POOL - 1);
                if (r >= u->size || u->got[r * STREAM_POOL + k]++) {
                    snprintf(u->error, sizeof u->error, "stream value %" PRIu64 " of rank %"
                             PRIu64 " bad or received twice", k, r);
                    break;
                }
                u->distinct[r]++;
                u->data++;
            } else if (x & V_TICK) {
                u->ticks++;
                uint64_t r = x & V_RANK, q = (x & ~V_TICK) >> 11;
                if (u->tick_max && (r >= u->size || q >= u->tick_max))
                    u->tick_bad++;
                else if (u->tick_max && u->tick_seen[r * u->tick_max + q]++)
                    u->tick_dups++;
            } else {
                uint64_t w = x >> 32, r = x & 0xffffffffu;
                if (w >= MAX_WAVES || r >= u->size || u->seen[w][r]++) {
                    snprintf(u->error, sizeof u->error, "union wave value %" PRIu64 " (wave %"
                             PRIu64 ", rank %" PRIu64 ") bad or received twice", x, w, r);
                    break;
                }
                u->wave_count[w]++;
            }
        }
        pthread_cond_broadcast(&fe.cv);
        pthread_mutex_unlock(&fe.mu);
        free(v);
        tbon_packet_unref(p);
        if (rc == TBON_ECLOSED)
            break;
    }
    return NULL;
}

/* A union stream over every back-end with its receiver thread. */
tbon_stream_t *union_stream_sync(tbon_net_t *net, struct uwatch *u, size_t n, size_t size,
                                 int sync, size_t tick_max, pthread_t *th)
{
    memset(u, 0, sizeof *u);
    u->n = n;
    u->size = size;
    for (int w = 0; w < MAX_WAVES; w++)
        u->seen[w] = calloc(size, 1);
    u->marked = calloc(size, 1);
    u->sent = calloc(size, sizeof *u->sent);
    u->distinct = calloc(size, sizeof *u->distinct);
    u->got = calloc(size, STREAM_POOL);
    u->tick_max = tick_max;
    u->tick_seen = tick_max ? calloc(size, tick_max) : NULL;
    if (tick_max && !u->tick_seen)
        ft_die("calloc");
    u->s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_UNION, sync,
                              TBON_FILTER_NULL);
    if (!u->s || !u->marked || !u->sent || !u->distinct || !u->got || !u->seen[MAX_WAVES - 1])
        ft_die("union stream: %s", tbon_net_error(net));
    if (pthread_create(th, NULL, urecv_main, u) != 0)
        ft_die("pthread_create");
    return u->s;
}

/* The streaming union of seed 003 (don't-wait). */
tbon_stream_t *union_stream(tbon_net_t *net, struct uwatch *u, size_t n, size_t size,
                            pthread_t *th)
{
    return union_stream_sync(net, u, n, size, TBON_SYNC_DONTWAIT, 0, th);
}

/* Stop the receiver thread. */
void union_stream_end(struct uwatch *u, pthread_t th)
{
    pthread_mutex_lock(&fe.mu);
    u->stop = 1;
    pthread_mutex_unlock(&fe.mu);
    pthread_join(th, NULL);
}

void union_stream_free(struct uwatch *u)
{
    for (int w = 0; w < MAX_WAVES; w++)
        free(u->seen[w]);
    free(u->marked);
    free(u->sent);
    free(u->distinct);
    free(u->got);
    free(u->tick_seen);
    free(u->pkt_t);
}

/* Ask for union wave w and wait until every back-end's value is in. */
void union_wave(struct uwatch *u, uint32_t w, double secs)
{
    request(u->s, OP_WAVE, w, 0);
    double dl = bench_now() + secs;
    pthread_mutex_lock(&fe.mu);
    while (u->wave_count[w] < u->n && !u->error[0] && bench_now() < dl)
        fe_wait(dl);
    size_t got = u->wave_count[w];
    pthread_mutex_unlock(&fe.mu);
    if (u->error[0])
        ft_die("%s", u->error);
    if (got < u->n)
        ft_die("union wave %u: %zu of %zu back-ends answered within %.0f s", w, got, u->n, secs);
}

