/* fe_ping.c - tbon_frontend --ping RANK: the route a message to RANK takes
 * from the front-end (tbon_net_ping), then the round trip to each process
 * on it, so that a slow hop shows as a step in the list (as flux ping
 * does for a broker's rank). */
#include "fe_ping.h"
#include "fe_values.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#define PING_MS 10000       /* a hop that does not answer within this is reported */
#define ROUTE_MAX 64

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of count pings of rank (ms) in *ms; 0 or EXIT_RUN. */
static int median_rtt(const struct cli *c, tbon_net_t *net, tbon_rank_t rank, double *ms)
{
    double v[64];
    unsigned long n = c->ping_count < 64 ? c->ping_count : 64;
    for (unsigned long i = 0; i < n; i++)
        if (tbon_net_ping(net, rank, PING_MS, &v[i], NULL, 0, NULL) != 0) {
            fprintf(stderr, PROG ": --ping: rank %u: %s\n", rank, tbon_net_error(net));
            return EXIT_RUN;
        }
    qsort(v, n, sizeof v[0], by_double);
    *ms = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return 0;
}

int fe_ping(const struct cli *c, tbon_net_t *net)
{
    tbon_rank_t route[ROUTE_MAX];
    size_t n = 0;
    double first;
    if (tbon_net_ping(net, c->ping_rank, PING_MS, &first, route, ROUTE_MAX, &n) != 0) {
        fprintf(stderr, PROG ": --ping %u: %s\n", c->ping_rank, tbon_net_error(net));
        return EXIT_RUN;
    }
    if (n > ROUTE_MAX)
        n = ROUTE_MAX;
    double ms[ROUTE_MAX] = { 0 };
    for (size_t i = 1; i < n; i++)
        if (median_rtt(c, net, route[i], &ms[i]) != 0)
            return EXIT_RUN;
    if (c->json) {
        json_t *hops = json_array();
        for (size_t i = 1; i < n && hops; i++)
            json_array_append_new(hops, json_pack("{s:I, s:f}", "rank", (json_int_t)route[i],
                                                  "rtt_ms", ms[i]));
        fe_print_json_line(hops ? json_pack("{s:I, s:o}", "ping", (json_int_t)c->ping_rank,
                                            "hops", hops) : NULL, "the ping");
        return 0;
    }
    printf("ping rank %u: route", c->ping_rank);
    for (size_t i = 0; i < n; i++)
        printf("%s%u", i ? " -> " : " ", route[i]);
    printf(" (%zu hop%s)\n", n - 1, n == 2 ? "" : "s");
    for (size_t i = 1; i < n; i++)
        printf("  hop %zu: rank %u  %.3f ms (median of %lu)\n", i, route[i], ms[i],
               c->ping_count);
    fflush(stdout);
    return 0;
}
