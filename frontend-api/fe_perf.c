/* fe_perf.c - tbon_frontend --perf: what tbon_fe_perf gathered, a table of
 * the nodes (memory, CPU, queues, links) and one of the streams at each
 * node (packets and bytes each way, waves, filter calls and their time),
 * or one JSON line with both. */
#include "fe_perf.h"
#include "fe_values.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#define PERF_MS 10000       /* how long the gathering may take */

static const char *const role_names[] = { "fe", "commnode", "be" };

static const char *role_of(int role)
{
    return role >= 0 && role < 3 ? role_names[role] : "?";
}

/* "12.5M"-style sizes for the table. */
static const char *bytes(uint64_t b, char *buf, size_t cap)
{
    static const char units[] = "BKMGT";
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%" PRIu64 "B", b);
    else
        snprintf(buf, cap, "%.1f%c", v, units[u]);
    return buf;
}

static json_t *node_json(const tbon_perf_node_t *n)
{
    if (!n->answered)
        return json_pack("{s:I, s:s, s:s, s:b, s:b}", "rank", (json_int_t)n->rank, "role",
                         role_of(n->role), "host", n->host, "alive", n->alive, "answered", 0);
    json_t *o = json_pack("{s:I, s:s, s:s, s:b, s:b, s:I, s:I, s:I, s:I}", "rank",
                          (json_int_t)n->rank, "role", role_of(n->role), "host", n->host,
                          "alive", n->alive, "answered", 1, "rss_bytes",
                          (json_int_t)n->rss_bytes, "cpu_us", (json_int_t)n->cpu_us,
                          "queued_bytes", (json_int_t)n->queued_bytes, "stream_queued_bytes",
                          (json_int_t)n->stream_queued_bytes);
    json_t *more = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "link_resends",
                             (json_int_t)n->link_resends, "relinks", (json_int_t)n->relinks,
                             "crc_errors", (json_int_t)n->crc_errors, "uptime_ms",
                             (json_int_t)n->uptime_ms, "children", (json_int_t)n->children,
                             "messages_dropped", (json_int_t)n->messages_dropped);
    if (o && more)
        json_object_update(o, more);
    json_decref(more);
    return o;
}

static json_t *stream_json(const tbon_perf_stream_t *s)
{
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "rank",
                          (json_int_t)s->rank, "stream", (json_int_t)s->stream,
                          "up_in_packets", (json_int_t)s->up_in_packets, "up_in_bytes",
                          (json_int_t)s->up_in_bytes, "up_out_packets",
                          (json_int_t)s->up_out_packets, "up_out_bytes",
                          (json_int_t)s->up_out_bytes, "down_in_packets",
                          (json_int_t)s->down_in_packets, "down_in_bytes",
                          (json_int_t)s->down_in_bytes, "down_out_packets",
                          (json_int_t)s->down_out_packets, "down_out_bytes",
                          (json_int_t)s->down_out_bytes);
    json_t *more = json_pack("{s:I, s:I, s:I, s:I, s:I}", "waves", (json_int_t)s->waves,
                             "filter_calls", (json_int_t)s->filter_calls, "filter_ns",
                             (json_int_t)s->filter_ns, "filter_cpu_ns",
                             (json_int_t)s->filter_cpu_ns, "queued_bytes",
                             (json_int_t)s->queued_bytes);
    if (o && more)
        json_object_update(o, more);
    json_decref(more);
    return o;
}

static void print_json(const tbon_perf_t *p)
{
    json_t *nodes = json_array(), *streams = json_array();
    for (size_t i = 0; i < p->nnodes && nodes; i++)
        json_array_append_new(nodes, node_json(&p->nodes[i]));
    for (size_t i = 0; i < p->nstreams && streams; i++)
        json_array_append_new(streams, stream_json(&p->streams[i]));
    json_t *o = nodes && streams
                    ? json_pack("{s:{s:o, s:o, s:I, s:I, s:i, s:f}}", "perf", "nodes", nodes,
                                "streams", streams, "answered", (json_int_t)p->answered,
                                "silent", (json_int_t)p->silent, "rounds", p->rounds,
                                "elapsed_ms", p->elapsed_ms)
                    : NULL;
    if (!o) {
        json_decref(nodes);
        json_decref(streams);
    }
    fe_print_json_line(o, "--perf");
}

static void print_tables(const tbon_perf_t *p)
{
    char a[32], b[32], d[32], e[32];
    printf("perf: %zu nodes, %zu answered, %zu alive and silent (%d round%s, %.0f ms)\n",
           p->nnodes, p->answered, p->silent, p->rounds, p->rounds == 1 ? "" : "s",
           p->elapsed_ms);
    printf("%6s  %-8s  %-16s  %8s  %9s  %8s  %8s  %7s  %7s  %9s\n", "rank", "role", "host",
           "rss", "cpu", "queued", "in waves", "resends", "relinks", "uptime");
    for (size_t i = 0; i < p->nnodes; i++) {
        const tbon_perf_node_t *n = &p->nodes[i];
        if (!n->answered) {
            printf("%6u  %-8s  %-16s  %s\n", n->rank, role_of(n->role), n->host,
                   n->alive ? "no answer" : "down");
            continue;
        }
        printf("%6u  %-8s  %-16s  %8s  %8.2fs  %8s  %8s  %7" PRIu64 "  %7" PRIu64 "  %8.1fs\n",
               n->rank, role_of(n->role), n->host, bytes(n->rss_bytes, a, sizeof a),
               (double)n->cpu_us / 1e6, bytes(n->queued_bytes, b, sizeof b),
               bytes(n->stream_queued_bytes, d, sizeof d), n->link_resends, n->relinks,
               (double)n->uptime_ms / 1000);
    }
    if (!p->nstreams)
        return;
    printf("%6s  %6s  %17s  %17s  %17s  %17s  %7s  %7s  %9s  %9s\n", "stream", "rank",
           "up in", "up out", "down in", "down out", "waves", "filter", "filter ms", "cpu ms");
    for (size_t i = 0; i < p->nstreams; i++) {
        const tbon_perf_stream_t *s = &p->streams[i];
        char ui[40], uo[40], di[40], dout[40];
        snprintf(ui, sizeof ui, "%" PRIu64 "/%s", s->up_in_packets,
                 bytes(s->up_in_bytes, a, sizeof a));
        snprintf(uo, sizeof uo, "%" PRIu64 "/%s", s->up_out_packets,
                 bytes(s->up_out_bytes, b, sizeof b));
        snprintf(di, sizeof di, "%" PRIu64 "/%s", s->down_in_packets,
                 bytes(s->down_in_bytes, d, sizeof d));
        snprintf(dout, sizeof dout, "%" PRIu64 "/%s", s->down_out_packets,
                 bytes(s->down_out_bytes, e, sizeof e));
        printf("%6u  %6u  %17s  %17s  %17s  %17s  %7" PRIu64 "  %7" PRIu64 "  %9.3f  %9.3f\n",
               s->stream, s->rank, ui, uo, di, dout, s->waves, s->filter_calls,
               (double)s->filter_ns / 1e6, (double)s->filter_cpu_ns / 1e6);
    }
}

void fe_perf_begin(tbon_net_t *net)
{
    tbon_perf_t *p = NULL;
    tbon_fe_perf(net, &p, PERF_MS);     /* (what it says is not needed) */
    tbon_perf_free(p);
}

int fe_perf(const struct cli *c, tbon_net_t *net)
{
    tbon_perf_t *p = NULL;
    int rc = tbon_fe_perf(net, &p, PERF_MS);
    if (!p) {
        fprintf(stderr, PROG ": --perf: %s\n", tbon_net_error(net));
        return EXIT_RUN;
    }
    if (c->json)
        print_json(p);
    else
        print_tables(p);
    fflush(stdout);
    tbon_perf_free(p);
    if (rc != 0) {
        fprintf(stderr, PROG ": --perf: %s\n", tbon_net_error(net));
        return EXIT_RUN;
    }
    return 0;
}
