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

static const char *const role_names[] = { "fe", "commnode", "be" };

int fe_status(const struct cli *c, tbon_net_t *net)
{
    int n = tbon_fe_status(net, NULL, 0, 0);
    tbon_node_status_t *v = n > 0 ? calloc((size_t)n, sizeof *v) : NULL;
    if (!v || (n = tbon_fe_status(net, v, (size_t)n, PING_MS / 10)) < 0) {
        fprintf(stderr, PROG ": --status: %s\n", n < 0 ? tbon_net_error(net) : "out of memory");
        free(v);
        return EXIT_RUN;
    }
    json_t *all = c->json ? json_array() : NULL;
    if (!c->json)
        printf("%6s  %-8s  %-7s  %9s  %-20s  %6s  %s\n", "rank", "role", "state", "since",
               "host", "parent", "rtt");
    for (int i = 0; i < n; i++) {
        const tbon_node_status_t *s = &v[i];
        const char *role = s->role >= 0 && s->role < 3 ? role_names[s->role] : "?";
        const char *state = tbon_node_state_name(s->state);
        if (all) {
            json_array_append_new(all, json_pack(
                "{s:I, s:s, s:s, s:f, s:s, s:o, s:o}", "rank", (json_int_t)s->rank, "role", role,
                "state", state, "since_s", s->since_s, "host", s->host, "parent",
                s->parent == TBON_RANK_NONE ? json_null() : json_integer(s->parent), "rtt_ms",
                s->rtt_ms < 0 ? json_null() : json_real(s->rtt_ms)));
            continue;
        }
        char parent[16] = "-", rtt[32] = "-";
        if (s->parent != TBON_RANK_NONE)
            snprintf(parent, sizeof parent, "%u", s->parent);
        if (s->rtt_ms >= 0)
            snprintf(rtt, sizeof rtt, "%.3f ms", s->rtt_ms);
        printf("%6u  %-8s  %-7s  %8.1fs  %-20s  %6s  %s\n", s->rank, role, state, s->since_s,
               s->host, parent, rtt);
    }
    if (all)
        fe_print_json_line(json_pack("{s:o}", "status", all), "--status");
    fflush(stdout);
    free(v);
    return 0;
}
