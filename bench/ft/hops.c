/* hops.c - (e) seed 001's Figure 3 on a tree of 1,024 back-ends,
 * bench_ft --hops: how many hops a message from a back-end takes, unicast,
 * multicast and broadcast, with 0, 1 and 2 commnodes dead, beside the same
 * message relayed by the FE (up to it, then down to each destination).
 *
 * The tree is 8x8x16 (FE, 8 commnodes, 64 commnodes, 1,024 back-ends). The
 * routes are the real ones: HOPS_SOURCES back-ends, spread so that each
 * victim's subtree holds one, ping every rank (tbon_net_ping: the route
 * each hop adds itself to), and the FE pings every rank for the relay's
 * figures. From them:
 *   - unicast: the hops to each live back-end, averaged;
 *   - multicast to 2 destinations (the paper's experiment), HOPS_PAIRS
 *     random pairs per source: steps (hops to the farther one: the copies
 *     go on in parallel past the split) and links (the distinct links the
 *     copies cross: the two routes share their first links);
 *   - broadcast (every back-end and the FE): steps (hops to the farthest)
 *     and links (every link of the union of the routes: a tree reaches each
 *     process over one link).
 * The relay goes up the source's route to the FE, then down the FE's own
 * routes. A message waits for its destination's adoption and then takes
 * the repaired tree (docs/protocol.md 10.2), so the figures with dead
 * commnodes are those of the tree after the adoptions (each kill waits for
 * the FE's stable view). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tbon/tbon.h>

#include "ft.h"
#include "lib/bench.h"
#include "lib/watchdog.h"

#define HOPS_SOURCES 4
#define HOPS_PAIRS 256
#define HOPS_DEAD 3             /* 0, 1, 2 commnodes dead */
static const uint32_t hops_fan[3] = { 8, 8, 16 };

/* Per figure: direct and relayed. */
enum { H_UNI, H_MC_STEPS, H_MC_LINKS, H_BC_STEPS, H_BC_LINKS, H_UNI_MAX, H_N };
static double hres[HOPS_DEAD][H_N][2];
static size_t hops_nodes, hops_pings[HOPS_DEAD];

/* The routes from one process to every rank: route[r] (len[r] ranks, 0:
 * none), into one buffer. */
struct routes {
    uint32_t *buf;
    const uint32_t **route;
    size_t *len;
};

static void routes_free(struct routes *rt)
{
    free(rt->buf);
    free(rt->route);
    free(rt->len);
}

/* Parse v (n values, OP_ROUTES's answer of from) into rt over size ranks. */
static void routes_parse(struct routes *rt, uint32_t *v, size_t n, tbon_rank_t from,
                         size_t size)
{
    rt->buf = v;
    rt->route = calloc(size, sizeof *rt->route);
    rt->len = calloc(size, sizeof *rt->len);
    if (!rt->route || !rt->len)
        ft_die("calloc");
    size_t k = 0;
    for (tbon_rank_t r = 0; r < size; r++) {
        if (r == from)
            continue;
        if (k >= n || v[k] > ROUTE_MAX || k + 1 + v[k] > n)
            ft_die("the routes of rank %u are cut short at rank %u", from, r);
        rt->len[r] = v[k];
        rt->route[r] = v + k + 1;
        if (v[k] && (v[k + 1] != from || v[k + v[k]] != r))
            ft_die("a route of rank %u to %u does not go from one to the other", from, r);
        k += 1 + v[k];
    }
    if (k != n)
        ft_die("the routes of rank %u: %zu values too many", from, n - k);
}

/* The FE's own routes: a ping to every rank. */
static void fe_routes(tbon_net_t *net, struct routes *rt, size_t size)
{
    size_t n = 0;
    uint32_t *v = ping_routes(net, 0, size, &n);
    if (!v)
        ft_die("malloc");
    routes_parse(rt, v, n, 0, size);
}

/* Back-end src's routes (OP_ROUTES on the stream s of every back-end). */
static void be_routes_of(tbon_stream_t *s, tbon_rank_t src, struct routes *rt, size_t size)
{
    request(s, OP_ROUTES, src, (uint32_t)size);
    tbon_packet_t *p = NULL;
    uint32_t *v = NULL;
    size_t n = 0;
    int rc = tbon_stream_recv(s, &p, 120000);
    if (rc == 0)
        rc = tbon_packet_unpack(p, "%aud", &v, &n);
    tbon_packet_unref(p);
    if (rc != 0)
        ft_die("the routes of rank %u: %s", src, tbon_strerror(rc));
    routes_parse(rt, v, n, src, size);
}

/* Links shared by two routes from one process: their common start, less 1. */
static size_t shared(const uint32_t *a, size_t la, const uint32_t *b, size_t lb)
{
    size_t i = 0;
    while (i < la && i < lb && a[i] == b[i])
        i++;
    return i ? i - 1 : 0;
}

/* Figures of one source: sums into acc[figure][kind], max of unicast. */
struct hacc {
    double sum[H_N][2];
    size_t n[H_N];
};

static uint32_t rng_next(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static void source_figures(const struct routes *be, const struct routes *rel, tbon_rank_t src,
                           const tbon_rank_t *live, size_t nlive, uint8_t *mark, size_t size,
                           struct hacc *a)
{
    size_t up = rel->len[src] - 1;      /* the relay's way up: src to the FE */
    /* unicast */
    for (size_t i = 0; i < nlive; i++) {
        tbon_rank_t r = live[i];
        if (r == src)
            continue;
        double d = (double)be->len[r] - 1, f = (double)(up + rel->len[r] - 1);
        a->sum[H_UNI][0] += d;
        a->sum[H_UNI][1] += f;
        a->n[H_UNI]++;
        if (d > a->sum[H_UNI_MAX][0])
            a->sum[H_UNI_MAX][0] = d;
        if (f > a->sum[H_UNI_MAX][1])
            a->sum[H_UNI_MAX][1] = f;
    }
    /* multicast to 2 destinations */
    uint32_t x = 2463534242u ^ src;
    for (int k = 0; k < HOPS_PAIRS; k++) {
        tbon_rank_t p = live[rng_next(&x) % nlive], q = live[rng_next(&x) % nlive];
        if (p == src || q == src || p == q) {
            k--;
            continue;
        }
        size_t lp = be->len[p] - 1, lq = be->len[q] - 1;
        size_t fp = rel->len[p] - 1, fq = rel->len[q] - 1;
        a->sum[H_MC_STEPS][0] += (double)(lp > lq ? lp : lq);
        a->sum[H_MC_STEPS][1] += (double)(up + (fp > fq ? fp : fq));
        a->sum[H_MC_LINKS][0] += (double)(lp + lq - shared(be->route[p], be->len[p],
                                                           be->route[q], be->len[q]));
        a->sum[H_MC_LINKS][1] += (double)(up + fp + fq - shared(rel->route[p], rel->len[p],
                                                                rel->route[q], rel->len[q]));
        a->n[H_MC_STEPS]++;
    }
    /* broadcast: every live back-end and the FE */
    for (int kind = 0; kind < 2; kind++) {
        const struct routes *rt = kind ? rel : be;
        memset(mark, 0, size);
        size_t steps = 0, nodes = 0;
        for (size_t i = 0; i <= nlive; i++) {
            tbon_rank_t r = i < nlive ? live[i] : 0;
            if (r == src || (kind && r == 0))
                continue;
            size_t l = rt->len[r];
            steps = l - 1 > steps ? l - 1 : steps;
            for (size_t j = 0; j < l; j++) {
                nodes += !mark[rt->route[r][j]];
                mark[rt->route[r][j]] = 1;
            }
        }
        if (kind) {             /* up to the FE first, then down every route */
            steps += up;
            nodes += up;
        }
        a->sum[H_BC_STEPS][kind] += (double)steps;
        a->sum[H_BC_LINKS][kind] += (double)(nodes - 1);
    }
    a->n[H_BC_STEPS]++;
}

/* Measure with dead commnodes so far: the figures into hres[dead]. */
static void hops_measure(tbon_net_t *net, tbon_stream_t *s, const tb_topology_t *t,
                         const tbon_rank_t *src, int dead)
{
    size_t size = tb_topology_size(t);
    struct routes rel = { 0 };
    fe_routes(net, &rel, size);
    tbon_rank_t *live = calloc(size, sizeof *live);
    uint8_t *mark = calloc(size, 1);
    if (!live || !mark)
        ft_die("calloc");
    size_t nlive = 0;
    for (tbon_rank_t r = 1; r < size; r++)
        if (tb_topology_role(t, r) == TB_ROLE_BE && rel.len[r])
            live[nlive++] = r;
    struct hacc a = { 0 };
    size_t pings = size - 1;
    for (int i = 0; i < HOPS_SOURCES; i++) {
        struct routes be = { 0 };
        be_routes_of(s, src[i], &be, size);
        for (size_t k = 0; k <= nlive; k++) {
            tbon_rank_t r = k < nlive ? live[k] : 0;
            if (r != src[i] && !be.len[r])
                ft_die("%d dead: rank %u has no route to live rank %u", dead, src[i], r);
        }
        if (!rel.len[src[i]])
            ft_die("%d dead: the FE has no route to rank %u", dead, src[i]);
        source_figures(&be, &rel, src[i], live, nlive, mark, size, &a);
        routes_free(&be);
        pings += size - 1;
    }
    for (int k = 0; k < 2; k++) {
        hres[dead][H_UNI][k] = a.sum[H_UNI][k] / (double)a.n[H_UNI];
        hres[dead][H_UNI_MAX][k] = a.sum[H_UNI_MAX][k];
        hres[dead][H_MC_STEPS][k] = a.sum[H_MC_STEPS][k] / (double)a.n[H_MC_STEPS];
        hres[dead][H_MC_LINKS][k] = a.sum[H_MC_LINKS][k] / (double)a.n[H_MC_STEPS];
        hres[dead][H_BC_STEPS][k] = a.sum[H_BC_STEPS][k] / (double)a.n[H_BC_STEPS];
        hres[dead][H_BC_LINKS][k] = a.sum[H_BC_LINKS][k] / (double)a.n[H_BC_STEPS];
    }
    hops_pings[dead] = pings;
    fprintf(stderr, PROG " --hops: %d dead: unicast %.2f hops (relayed %.2f), multicast %.2f "
            "steps, broadcast %.2f steps, %.0f links\n", dead, hres[dead][H_UNI][0],
            hres[dead][H_UNI][1], hres[dead][H_MC_STEPS][0], hres[dead][H_BC_STEPS][0],
            hres[dead][H_BC_LINKS][0]);
    free(live);
    free(mark);
    routes_free(&rel);
}

void hops_run(void)
{
    const char *host = "localhost";
    tbon_error_t err = { 0 };
    tb_topology_t *t = tb_topology_gen_shape(hops_fan, 3, &host, 1, &err);
    if (!t)
        ft_die("hops topology: %s", err.msg);
    size_t size = tb_topology_size(t), n = tb_topology_num_leaves(t);
    hops_nodes = size;
    tbon_rank_t first_cn2 = 1 + hops_fan[0];
    tbon_rank_t first_be = (tbon_rank_t)(first_cn2 + hops_fan[0] * hops_fan[1]);
    /* The victims: the FE's second child, then a commnode of the second
     * level in the sixth branch; a source under each, two elsewhere. */
    tbon_rank_t victim[2] = { 2, first_cn2 + 5 * hops_fan[1] + 3 };
    tbon_rank_t src[HOPS_SOURCES] = {
        first_be + 5, first_be + hops_fan[1] * hops_fan[2] + 22,
        first_be + (victim[1] - first_cn2) * hops_fan[2] + 4, first_be + (tbon_rank_t)n - 7,
    };
    tb_topology_t *copy = tb_topology_clone(t);
    if (!copy)
        ft_die("tb_topology_clone");
    const char *topo = write_topology(t, "hops");
    tbon_stream_t *s;
    tbon_net_t *net = start_streamed(topo, n, 0, TBON_FILTER_NULL, TBON_SYNC_DONTWAIT, &s);
    tb_wd_arm("hops run", 600);
    hops_measure(net, s, copy, src, 0);
    pid_t *pids = calloc(size, sizeof *pids);
    if (!pids)
        ft_die("calloc");
    for (int d = 0; d < 2; d++) {
        memset(pids, 0, size * sizeof *pids);
        scan_session(tree_kv(net), 0, pids, size);
        if (!pids[victim[d]])
            ft_die("no process for commnode %u", victim[d]);
        double failed, stable;
        kill_settle(net, victim[d], pids[victim[d]], hops_fan[d + 1], &failed, &stable);
        hops_measure(net, s, copy, src, d + 1);
    }
    free(pids);
    tb_topology_destroy(copy);
    stop(net);
}

void hops_rows(void)
{
    static const char *what[H_N] = {
        [H_UNI] = "unicast, hops", [H_MC_STEPS] = "multicast to 2, steps",
        [H_MC_LINKS] = "multicast to 2, links crossed", [H_BC_STEPS] = "broadcast, steps",
        [H_BC_LINKS] = "broadcast, links crossed", [H_UNI_MAX] = "unicast, most hops",
    };
    for (int f = 0; f < H_N; f++)
        for (int d = 0; d < HOPS_DEAD; d++) {
            char metric[160];
            snprintf(metric, sizeof metric, "seed 001 Fig. 3: %s, %d dead commnode%s, %zu "
                     "nodes", what[f], d, d == 1 ? "" : "s", hops_nodes);
            bench_row("messages", metric, "%.2f", hres[d][f][0],
                      f == H_MC_LINKS || f == H_BC_LINKS ? "links"
                      : f == H_MC_STEPS || f == H_BC_STEPS ? "steps" : "hops",
                      "routes of real pings (tbon_net_ping) from %d back-ends to every "
                      "rank (%zu pings), after each kill's stable view; relayed by the "
                      "FE (up to it, down its own routes) in the same run: %.2f (%.2fx)",
                      HOPS_SOURCES, hops_pings[d], hres[d][f][1],
                      hres[d][f][0] / hres[d][f][1]);
        }
}
