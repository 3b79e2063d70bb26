/* fe_waves.c - tbon_frontend's waves: the stream opened, each wave's
 * request sent and its results received and printed (one per back-end with
 * the null filter, one per wave with waitforall, partial ones otherwise),
 * with the membership events between waves. */
#include "fe_waves.h"

#include "fe_start.h"
#include "fe_values.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

/* While waiting for results, wake up this often to notice Ctrl-C and back-ends
 * that died (a null-filter wave then needs fewer packets). */
#define RECV_SLICE_MS 200

/* A wave's outcome was TBON_EFILTER: the run goes on, and exits EXIT_RUN. */
static int g_wave_failed;
volatile sig_atomic_t fe_stop;

/* How a result was made, for the readable line. */
enum origin { ORIGIN_ALL, ORIGIN_BACKEND, ORIGIN_PARTIAL, ORIGIN_LATE };

/* The events taken from the library since the last drain_events: those of
 * the wave under way (a result may need them), printed after it. */
static tbon_event_t g_ev[256];
static size_t g_nev;

static void take_events(tbon_net_t *net)
{
    while (g_nev < sizeof g_ev / sizeof g_ev[0] &&
           tbon_net_next_event(net, &g_ev[g_nev], 0) == 0)
        g_nev++;
}

/* The nodes whose subtree the waves in flight may miss (TBON_EV_DATA_LOST
 * since the last drain), up to cap of them; returns how many. */
static size_t lossy_subtrees(tbon_rank_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < g_nev; i++)
        if (g_ev[i].type == TBON_EV_DATA_LOST) {
            if (n < cap)
                out[n] = g_ev[i].rank;
            n++;
        }
    return n;
}

static void print_ranks(const char *what, const tbon_rank_t *r, size_t n)
{
    if (!n)
        return;
    printf("; %s", what);
    for (size_t i = 0; i < n && i < 8; i++)
        printf(" %" PRIu32, r[i]);
    if (n > 8)
        printf(" and %zu more", n - 8);
}

/* What the result p holds, from its coverage (tbon_packet_covered): " (from
 * 16 back-ends)", or " (from 15 of 16 back-ends: missing 13)"; then the
 * back-ends cut off from the tree, if any ("; cut off: 13"), and the
 * subtrees a wave in flight during a failure may lack ("; may miss the
 * subtree of: 2"). */
static void print_from(const tbon_packet_t *p, const tbon_rank_t *cut, size_t ncut)
{
    tbon_rank_t lossy[8], miss[8];
    size_t nl = lossy_subtrees(lossy, 8);
    size_t n = tbon_packet_covered(p, NULL, 0), m = tbon_packet_expected(p, NULL, 0);
    size_t nm = tbon_packet_missing(p, miss, 8);
    if (nm == 0) {
        printf(" (from %zu back-end%s", n, n == 1 ? "" : "s");
    } else {
        printf(" (from %zu of %zu back-end%s: missing", n, m, m == 1 ? "" : "s");
        for (size_t i = 0; i < nm && i < 8; i++)
            printf(" %" PRIu32, miss[i]);
        if (nm > 8)
            printf(" and %zu more", nm - 8);
    }
    print_ranks("cut off:", cut, ncut);
    print_ranks("may miss the subtree of:", lossy, nl);
    printf(")\n");
}

/* One result line on stdout: JSON, or readable according to origin (n: the
 * back-ends of a complete wave, the result's number within its wave, or for
 * a late one the wave under way when it came). */
static void print_result(const struct cli *c, unsigned long wave, const tbon_packet_t *p,
                         enum origin how, size_t n, const tbon_rank_t *cut, size_t ncut)
{
    if (c->json) {
        /* The keys in this order (jansson keeps insertion order). */
        const char *fmt = tbon_packet_format(p);
        tbon_rank_t src = tbon_packet_source(p);
        fe_print_json_line(json_pack("{s:I, s:I, s:o, s:o, s:o}",
                                  "wave", (json_int_t)wave,
                                  "stream", (json_int_t)tbon_packet_stream(p),
                                  "source", src == TBON_RANK_NONE ? json_null()
                                                                  : json_integer(src),
                                  "format", fe_json_bytes((const uint8_t *)fmt, strlen(fmt)),
                                  "values", fe_json_values(p)),
                        "a result");
    } else if (how == ORIGIN_BACKEND) {
        printf("wave %lu: back-end %" PRIu32 " sent ", wave, tbon_packet_source(p));
        fe_print_values(stdout, p);
        putchar('\n');
    } else {
        printf("wave %lu: %s = ", wave, c->filter_name);
        fe_print_values(stdout, p);
        if (how == ORIGIN_ALL)
            print_from(p, cut, ncut);
        else if (how == ORIGIN_LATE)
            printf(" (late: came during wave %zu)\n", n);
        else
            printf(" (result %zu of the wave)\n", n);
    }
    fflush(stdout);
}

/* Print the membership events that are waiting (none if --events is off). */
static void drain_events(const struct cli *c, tbon_net_t *net)
{
    static const char *const names[] = {
        [TBON_EV_NODE_FAILED] = "node_failed", [TBON_EV_NODE_ADOPTED] = "node_adopted",
        [TBON_EV_NODE_JOINED] = "node_joined", [TBON_EV_NODE_LEFT] = "node_left",
        [TBON_EV_VIEW_STABLE] = "view_stable", [TBON_EV_DATA_LOST] = "data_lost",
        [TBON_EV_NODE_SUSPECT] = "node_suspect", [TBON_EV_NODE_ALIVE] = "node_alive",
        [TBON_EV_FILTER_ERROR] = "filter_error", [TBON_EV_UNREACHABLE] = "unreachable",
    };
    take_events(net);
    size_t nev = g_nev;
    g_nev = 0;
    for (size_t k = 0; c->events && k < nev; k++) {
        const tbon_event_t ev = g_ev[k];
        const char *name = (unsigned)ev.type < sizeof names / sizeof names[0] &&
                           names[ev.type] ? names[ev.type] : "unknown";
        if (c->json && ev.type == TBON_EV_FILTER_ERROR) {
            fe_print_json_line(json_pack("{s:s, s:I, s:I, s:I, s:i, s:s}", "event", name,
                                      "rank", (json_int_t)ev.rank,
                                      "stream", (json_int_t)ev.stream,
                                      "filter", (json_int_t)ev.filter,
                                      "signal", ev.signal, "detail", ev.detail),
                            "an event");
            continue;
        }
        if (c->json) {
            fe_print_json_line(json_pack("{s:s, s:I, s:I, s:I, s:I}", "event", name,
                                      "rank", (json_int_t)ev.rank,
                                      "parent", (json_int_t)ev.parent,
                                      "incarnation", (json_int_t)ev.incarnation,
                                      "view_version", (json_int_t)ev.view_version),
                            "an event");
            continue;
        }
        switch (ev.type) {
        case TBON_EV_NODE_FAILED:
            printf("event: node %" PRIu32 " failed (incarnation %" PRIu32 ")\n",
                   ev.rank, ev.incarnation);
            break;
        case TBON_EV_NODE_ADOPTED:
            printf("event: node %" PRIu32 " adopted by %" PRIu32 "\n", ev.rank, ev.parent);
            break;
        case TBON_EV_NODE_JOINED:
            printf("event: node %" PRIu32 " joined under %" PRIu32 "\n", ev.rank, ev.parent);
            break;
        case TBON_EV_NODE_LEFT:
            printf("event: node %" PRIu32 " left\n", ev.rank);
            break;
        case TBON_EV_VIEW_STABLE:
            printf("event: view %" PRIu64 " is stable\n", ev.view_version);
            break;
        case TBON_EV_DATA_LOST:
            printf("event: waves in flight may miss the subtree of node %" PRIu32
                   " (its stream keeps no recoverable state)\n", ev.rank);
            break;
        case TBON_EV_NODE_SUSPECT:
            printf("event: node %" PRIu32 " suspected (silent; seen by %" PRIu32 ")\n",
                   ev.rank, ev.parent);
            break;
        case TBON_EV_NODE_ALIVE:
            printf("event: node %" PRIu32 " is alive again (no longer suspected)\n", ev.rank);
            break;
        case TBON_EV_FILTER_ERROR:
            printf("event: a filter %s on node %" PRIu32 ": %s\n",
                   ev.signal ? "crashed" : "hung", ev.rank, ev.detail);
            break;
        default:
            printf("event: type %d, node %" PRIu32 "\n", (int)ev.type, ev.rank);
            break;
        }
    }
    fflush(stdout);
}

/* ---- waves ---- */

/* Say why receiving failed; returns EXIT_RUN. */
static int recv_failed(const struct cli *c, tbon_net_t *net, unsigned long wave, int rc)
{
    const char *why = tbon_net_error(net);
    if (rc == TBON_ECLOSED)
        fprintf(stderr, PROG ": wave %lu: the network shut down\n", wave);
    else
        fprintf(stderr, PROG ": wave %lu: %s%s%s\n", wave, tbon_strerror(rc),
                why && *why ? ": " : "", why && *why ? why : "");
    /* The usual cause: answers in a format the filter does not take. */
    if (rc == TBON_EFILTER && why && !strstr(why, "crashed") && !strstr(why, "past its limit"))
        fprintf(stderr, PROG ": note: the back-ends were asked for kind '%s'; -k chooses "
                "another (int, int32, double, set, array; see --help)\n", c->kind);
    return EXIT_RUN;
}

/* Receive the next result of s: waits at most timeout_ms (-1: for ever) in
 * slices, so Ctrl-C is noticed. Returns as tbon_stream_recv, or TBON_ECLOSED
 * with fe_stop set. */
static int recv_result(tbon_stream_t *s, tbon_packet_t **pkt, long timeout_ms)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int slice = RECV_SLICE_MS;
        if (timeout_ms >= 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            long left = timeout_ms - fe_ms_since(&t0, &now);
            if (left <= 0)
                return TBON_ETIMEOUT;
            if (left < slice)
                slice = (int)left;
        }
        int rc = tbon_stream_recv(s, pkt, slice);
        if (rc != TBON_ETIMEOUT)
            return rc;
        if (fe_stop)
            return TBON_ECLOSED;
    }
}

static int no_backends(unsigned long wave)
{
    fprintf(stderr, PROG ": wave %lu: no back-end is left to answer (every one failed; "
            "--events shows which)\n", wave);
    return EXIT_RUN;
}

/* A wave lost whole (TBON_ELOST): every part of it died with failed nodes. */
static int lost_wave(tbon_net_t *net, unsigned long wave)
{
    if (tbon_net_num_backends(net) == 0)
        return no_backends(wave);
    fprintf(stderr, PROG ": wave %lu: lost whole: every part of it died with failed nodes (%s; "
            "--events shows which)\n", wave, tbon_net_error(net));
    return EXIT_RUN;
}

/* One wave: send the request, then print its results. Returns 0 or EXIT_RUN. */
static int run_wave(const struct cli *c, tbon_net_t *net, tbon_stream_t *s, unsigned long w)
{
    tbon_packet_t *p = NULL;
    if (tbon_net_num_backends(net) == 0)
        return no_backends(w);
    int rc = tbon_stream_send(s, TAG_REQUEST, "%ud %s", (uint32_t)w, c->kind);
    if (rc != 0) {
        fprintf(stderr, PROG ": wave %lu: sending the request: %s %s\n", w,
                tbon_strerror(rc), tbon_net_error(net));
        return EXIT_RUN;
    }

    if (c->filter_id == TBON_FILTER_NULL) {
        /* Every answer comes up unchanged: one per live back-end. */
        size_t got = 0;
        while (got < tbon_net_num_backends(net)) {
            rc = recv_result(s, &p, RECV_SLICE_MS);
            if (rc == TBON_ETIMEOUT)
                continue;    /* re-read the number of live back-ends */
            if (rc == TBON_ELOST)
                return lost_wave(net, w);
            if (rc != 0)
                return fe_stop ? EXIT_RUN : recv_failed(c, net, w, rc);
            print_result(c, w, p, ORIGIN_BACKEND, 0, NULL, 0);
            tbon_packet_unref(p);
            got++;
        }
        return 0;
    }

    if (c->sync == TBON_SYNC_WAITFORALL) {
        /* In slices: a wave that no back-end is left to answer (they all
         * failed, or their host fell off the network) ends with an error
         * instead of a wait for ever. */
        for (;;) {
            while ((rc = recv_result(s, &p, RECV_SLICE_MS)) == TBON_ETIMEOUT)
                if (tbon_net_num_backends(net) == 0)
                    return no_backends(w);
            /* Wave w answers request w + 1 (the FE numbers a stream's
             * requests from 1). A result of an earlier request is a second
             * wave for it (a back-end sent two packets for one request):
             * said, and not taken for this wave's. */
            uint64_t q = rc == 0 ? tbon_stream_request(s) : 0;
            if (q == 0 || q > w)
                break;
            fprintf(stderr, PROG ": wave %lu: a second result of wave %llu (a back-end "
                    "answered it twice) left out\n", w, (unsigned long long)(q - 1));
            tbon_packet_unref(p);
            p = NULL;
        }
        if (rc == TBON_ELOST)
            return lost_wave(net, w);
        if (rc == TBON_EFILTER && !fe_stop) {
            /* This wave's outcome: a filter failed over its input. The
             * next waves go on (the run's status says one failed). */
            recv_failed(c, net, w, rc);
            g_wave_failed = 1;
            return 0;
        }
        if (rc != 0)
            return fe_stop ? EXIT_RUN : recv_failed(c, net, w, rc);
        /* The back-ends cut off from the tree (their parent failed, no
         * adoption yet) are not in the result: say so, by rank. */
        tbon_rank_t cut[8];
        int ncut = tbon_fe_cut_off(net, cut, 8);
        take_events(net);
        ncut = ncut < 0 ? 0 : ncut;
        print_result(c, w, p, ORIGIN_ALL, 0, cut, (size_t)ncut);
        tbon_packet_unref(p);
        return 0;
    }

    /* dontwait / timeout: partial results; the wave ends after an idle gap.
     * A result of an earlier request (wave w answers request w + 1) came
     * after its wave's gap: it goes under its own wave, marked late, and does
     * not count for this one. */
    size_t n = 0;
    for (;;) {
        rc = recv_result(s, &p, c->idle_ms);
        if (rc == TBON_ETIMEOUT)
            break;
        if (rc != 0)
            return fe_stop ? EXIT_RUN : recv_failed(c, net, w, rc);
        uint64_t q = tbon_stream_request(s);
        if (q != 0 && q <= w)
            print_result(c, (unsigned long)(q - 1), p, ORIGIN_LATE, w, NULL, 0);
        else
            print_result(c, w, p, ORIGIN_PARTIAL, ++n, NULL, 0);
        tbon_packet_unref(p);
    }
    if (n == 0) {
        fprintf(stderr, PROG ": wave %lu: no result within %ld ms\n", w, c->idle_ms);
        return EXIT_RUN;
    }
    return 0;
}

/* Load the plug-in if any, open the broadcast stream with the filter and
 * sync mode, and say what was opened (stderr). The stream, or NULL after
 * printing why. */
tbon_stream_t *fe_open_stream(const struct cli *c, tbon_net_t *net)
{
    int fid = c->filter_id;
    if (c->so_path) {
        fid = tbon_fe_load_filter(net, c->so_path, c->so_func);
        if (fid < 0) {
            fprintf(stderr, PROG ": loading filter %s from %s: %s\n", c->so_func,
                    c->so_path, tbon_net_error(net));
            return NULL;
        }
    }
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), fid,
                                          c->sync, TBON_FILTER_NULL);
    if (!s) {
        fprintf(stderr, PROG ": creating the stream: %s\n", tbon_net_error(net));
        return NULL;
    }
    char sync[32];
    if (c->sync == TBON_SYNC_TIMEOUT) {
        int rc = tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_SYNC, "%ud",
                                               (uint32_t)c->sync_ms);
        if (rc != 0) {
            fprintf(stderr, PROG ": setting the sync timeout: %s %s\n",
                    tbon_strerror(rc), tbon_net_error(net));
            return NULL;
        }
        snprintf(sync, sizeof sync, "timeout:%lu", c->sync_ms);
    } else {
        snprintf(sync, sizeof sync, "%s",
                 c->sync == TBON_SYNC_WAITFORALL ? "waitforall" : "dontwait");
    }
    fprintf(stderr, PROG ": %zu back-ends; stream %" PRIu32 ": filter %s, %s, "
            "back-ends answer '%s'\n", tbon_net_num_backends(net), tbon_stream_id(s),
            c->filter_name, sync, c->kind);
    return s;
}

int fe_run_waves(const struct cli *c, tbon_net_t *net, tbon_stream_t *s)
{
    drain_events(c, net);
    int status = 0;
    for (unsigned long w = 0; w < c->waves && !status && !fe_stop; w++) {
        status = run_wave(c, net, s, w);
        drain_events(c, net);
    }
    if (fe_stop || (!status && g_wave_failed))
        status = EXIT_RUN;
    return status;
}
