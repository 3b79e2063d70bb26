/* perturbation.c - (c) the perturbation of a running computation by
 * failures (seed 003, VI-D, Figure 7), bench_ft --perturbation: sum waves
 * back to back on 32x32 (kills.c) while PT_VICTIMS commnodes are killed
 * every period; waves/s in PT_BIN bins before, during and after. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tbon/tbon.h>

#include "ft.h"
#include "lib/bench.h"
#include "lib/watchdog.h"

#define PT_SMOOTH 5             /* bins of the moving mean (the waves come in bursts) */
#define PT_WINDOW 64            /* waves in flight */
#define PT_STALL_MS 5000

/* Mean rate (waves/s) of the bins [a, b). */
static double pt_rate(size_t a, size_t b)
{
    if (b > pt.nbins)
        b = pt.nbins;
    if (a >= b)
        return 0;
    double s = 0;
    for (size_t i = a; i < b; i++)
        s += pt.waves[i];
    return s / (double)(b - a) / PT_BIN;
}

static void pt_write_csv(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        ft_die("--csv %s: %s", path, strerror(errno));
    fprintf(f, "time_s,waves_per_s,events\n");
    for (size_t b = 0; b < pt.nbins; b++) {
        char ev[160] = "";
        size_t o = 0;
        for (int k = 0; k < pt.kills_done; k++)
            if (pt_bin(pt.kill_t[k]) == b) {
                o += (size_t)snprintf(ev + o, sizeof ev - o, "kill");
                for (int i = 0; i < PT_VICTIMS; i++)
                    o += (size_t)snprintf(ev + o, sizeof ev - o, " %u", pt.victim[k][i]);
            }
        if (pt.failed[b])
            o += (size_t)snprintf(ev + o, sizeof ev - o, "%sfailed %u", o ? "; " : "",
                                  pt.failed[b]);
        if (pt.adopted[b])
            o += (size_t)snprintf(ev + o, sizeof ev - o, "%sadopted %u", o ? "; " : "",
                                  pt.adopted[b]);
        if (pt.shortw[b])
            snprintf(ev + o, sizeof ev - o, "%sshort waves %u", o ? "; " : "", pt.shortw[b]);
        fprintf(f, "%.1f,%.0f,%s\n", (double)b * PT_BIN, pt.waves[b] / PT_BIN, ev);
    }
    if (fclose(f) != 0)
        ft_die("--csv %s: %s", path, strerror(errno));
}

/* A round step for an axis up to max: 1, 2 or 5 times a power of ten. */
static double nice_step(double max, int ticks)
{
    double raw = max / ticks, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* The plot of Figure 7: waves/s per bin, a red marker at each kill. */
static void pt_write_svg(const char *path, double before)
{
    FILE *f = fopen(path, "w");
    if (!f)
        ft_die("--svg %s: %s", path, strerror(errno));
    const double W = 900, H = 380, L = 70, R = 20, T = 40, B = 50;
    double dur = (double)pt.nbins * PT_BIN, ymax = 0;
    for (size_t b = 0; b < pt.nbins; b++)
        ymax = pt.waves[b] / PT_BIN > ymax ? pt.waves[b] / PT_BIN : ymax;
    double ystep = nice_step(ymax > 0 ? ymax : 1, 5);
    ymax = ceil(ymax / ystep + 0.2) * ystep;
    double xstep = nice_step(dur, 10);
#define X(t) (L + (t) / dur * (W - L - R))
#define Y(v) (H - B - (v) / ymax * (H - T - B))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">tbon 32x32 "
            "(1,024 back-ends): SUM waves/s in %.0f ms bins, %d commnodes killed every %g s"
            "</text>\n", W / 2, PT_BIN * 1e3, PT_VICTIMS, pt.period);
    for (double y = 0; y <= ymax + 1e-9; y += ystep) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                L, Y(y), W - R, Y(y));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n", L - 6,
                Y(y) + 4, y);
    }
    for (double x = 0; x <= dur + 1e-9; x += xstep) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
                X(x), H - B, X(x), H - B + 5);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", X(x),
                H - B + 18, x);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
            L, H - B, W - R, H - B);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
            L, T, L, H - B);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time (s)</text>\n",
            (L + W - R) / 2, H - 12);
    fprintf(f, "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
            "%.1f)\">waves/s</text>\n", (T + H - B) / 2, (T + H - B) / 2);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" "
            "stroke-dasharray=\"2,3\"/>\n", L, Y(before), W - R, Y(before));
    for (int k = 0; k < pt.kills_done; k++) {
        double x = X(pt.kill_t[k] - pt.t0);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"red\" "
                "stroke-dasharray=\"5,4\"/>\n", x, T, x, H - B);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"red\" text-anchor=\"middle\">kill %d"
                "</text>\n", x, T - 4, PT_VICTIMS);
    }
    fprintf(f, "<polyline fill=\"none\" stroke=\"#9bb8e6\" stroke-width=\"1\" points=\"");
    for (size_t b = 0; b < pt.nbins; b++)
        fprintf(f, "%s%.1f,%.1f", b ? " " : "", X(((double)b + 0.5) * PT_BIN),
                Y(pt.waves[b] / PT_BIN));
    fprintf(f, "\"/>\n<polyline fill=\"none\" stroke=\"#1f4fa0\" stroke-width=\"2\" "
            "points=\"");
    for (size_t b = 0; b + PT_SMOOTH <= pt.nbins; b++)
        fprintf(f, "%s%.1f,%.1f", b ? " " : "", X(((double)b + PT_SMOOTH / 2.0) * PT_BIN),
                Y(pt_rate(b, b + PT_SMOOTH)));
    fprintf(f, "\"/>\n");
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#1f4fa0\">thin: "
            "%.0f ms bins; thick: mean of %d bins; dotted: before the first kill</text>\n",
            W - R - 4, T + 14, PT_BIN * 1e3, PT_SMOOTH);
    fprintf(f, "</svg>\n");
#undef X
#undef Y
    if (fclose(f) != 0)
        ft_die("--svg %s: %s", path, strerror(errno));
}

/* Warm-up: complete, exact waves (and the port table everywhere), from wave
 * *w on; *w: the next wave. */
static void pt_warmup(tbon_stream_t *s, size_t n, uint32_t *w)
{
    int rc;
    for (int i = 0; i < 20; i++, (*w)++) {
        tbon_packet_t *p = NULL;
        int64_t sw = 0, cnt = 0;
        request(s, OP_SUM, *w, 0);
        if ((rc = tbon_stream_recv(s, &p, 30000)) != 0 ||
            tbon_packet_unpack(p, "%ld %ld", &sw, &cnt) != 0 || cnt != (int64_t)n ||
            sw != (int64_t)n * *w)
            ft_die("warm-up wave %u: %s", *w, rc ? tbon_strerror(rc) : "wrong sum");
        tbon_packet_unref(p);
    }
}

/* The waves of the measurement: PT_WINDOW in flight until end, from wave
 * *wp on (out[]: which are in flight, maxw of them at most); each result
 * checked and counted in the bin it came in. *wp: the next wave;
 * *total_out and *nshort_out: the results and the short ones among them. */
static void pt_waves(tbon_stream_t *s, size_t n, double end, uint32_t *wp, uint8_t *out,
                     size_t maxw, size_t *total_out, size_t *nshort_out)
{
    size_t inflight = 0, nshort = 0, total = 0;
    uint32_t w = *wp, first = w;
    int rc;
    for (;;) {
        while (inflight < PT_WINDOW && bench_now() < end) {
            if (w >= maxw)
                ft_die("more than %zu waves", maxw);
            if ((rc = tbon_stream_send(s, TAG, "%ud %ud %ud", OP_SUM, w, 0)) != 0)
                ft_die("sending wave %u: %s", w, tbon_strerror(rc));
            out[w++] = 1;
            inflight++;
        }
        if (inflight == 0)
            break;
        tbon_packet_t *p = NULL;
        if ((rc = tbon_stream_recv(s, &p, PT_STALL_MS)) != 0)
            ft_die("perturbation: no result for %d ms with %zu waves in flight (%s) at t=%.1f s",
                   PT_STALL_MS, inflight, tbon_strerror(rc), bench_now() - pt.t0);
        int64_t sw = 0, cnt = 0;
        if (tbon_packet_unpack(p, "%ld %ld", &sw, &cnt) != 0)
            ft_die("perturbation: a result of format \"%s\"", tbon_packet_format(p));
        /* the result's own word on who is in it (docs/api.md, "Coverage") */
        if (tbon_packet_covered(p, NULL, 0) != (size_t)cnt)
            ft_die("perturbation: a result of %" PRId64 " back-ends says it holds %zu", cnt,
                   tbon_packet_covered(p, NULL, 0));
        tbon_packet_unref(p);
        /* sum of w over cnt back-ends: cnt * w, with cnt <= n; fewer than
         * n when a wave in flight lost a dead commnode's subtree. */
        int64_t wv = cnt > 0 ? sw / cnt : 0;
        if (cnt < 1 || cnt > (int64_t)n || sw != wv * cnt || wv < first || wv >= w || !out[wv])
            ft_die("perturbation: result (%" PRId64 ", %" PRId64 ") is no wave in flight "
                   "(counted twice, or never sent)", sw, cnt);
        out[wv] = 0;
        inflight--;
        total++;
        size_t b = pt_bin(bench_now());
        pt.waves[b]++;
        if (cnt < (int64_t)n) {
            pt.shortw[b]++;
            nshort++;
        }
    }
    *wp = w;
    *total_out = total;
    *nshort_out = nshort;
}

/* A final wave must be complete and exact: every orphan is back. */
static void pt_final_wave(tbon_stream_t *s, size_t n, uint32_t w)
{
    tbon_packet_t *p = NULL;
    int64_t sw = 0, cnt = 0;
    int rc;
    request(s, OP_SUM, w, 0);
    if ((rc = tbon_stream_recv(s, &p, 30000)) != 0 ||
        tbon_packet_unpack(p, "%ld %ld", &sw, &cnt) != 0 || cnt != (int64_t)n ||
        sw != (int64_t)n * w)
        ft_die("final wave %u: %s (%" PRId64 " of %zu back-ends)", w,
               rc ? tbon_strerror(rc) : "incomplete", cnt, n);
    tbon_packet_unref(p);
}

/* What the bins say about the kills (waves/s, and s for rec). */
struct pt_figures {
    double before, after;
    double during[PT_MAX_ROUNDS], rec[PT_MAX_ROUNDS], lowest[PT_MAX_ROUNDS];
    int never;                  /* kills after which the rate did not come back */
};

/* Before: from 1 s to the first kill. During: the first 0.5 s after each
 * kill. Recovery: from the kill to the first bin from which the mean of
 * three bins is within 10% of the 2 s before that kill. */
static void pt_analyse(int rounds, struct pt_figures *g)
{
    size_t k0 = pt_bin(pt.kill_t[0]);
    g->before = pt_rate((size_t)(1.0 / PT_BIN), k0);
    g->never = 0;
    for (int k = 0; k < rounds; k++) {
        size_t kb = pt_bin(pt.kill_t[k]), nb = k + 1 < rounds ? pt_bin(pt.kill_t[k + 1]) : pt.nbins;
        size_t span = (size_t)(0.5 / PT_BIN);
        g->during[k] = pt_rate(kb, kb + span);
        g->lowest[k] = 1e300;
        for (size_t b = kb; b < kb + span && b < pt.nbins; b++)
            g->lowest[k] = pt.waves[b] / PT_BIN < g->lowest[k] ? pt.waves[b] / PT_BIN
                                                                : g->lowest[k];
        double base = pt_rate(kb >= 20 ? kb - 20 : 0, kb);
        g->rec[k] = -1;
        for (size_t b = kb; b + PT_SMOOTH <= nb; b++)
            if (pt_rate(b, b + PT_SMOOTH) >= 0.9 * base) {
                double dt = pt.t0 + (double)b * PT_BIN - pt.kill_t[k];
                g->rec[k] = dt > 0 ? dt : 0;
                break;
            }
        g->never += g->rec[k] < 0;
    }
    g->after = pt_rate(pt_bin(pt.kill_t[rounds - 1]) + (size_t)(1.0 / PT_BIN), pt.nbins);
}

/* The rows of (c): n back-ends, total results of which nshort were short. */
static void pt_rows(double period, int rounds, size_t n, size_t total, size_t nshort,
                    const struct pt_figures *g)
{
    char dl_s[160] = "", low_s[160] = "", rec_s[400] = "", ad_s[160] = "";
    size_t o1 = 0, o2 = 0, o3 = 0, o4 = 0;
    for (int k = 0; k < rounds; k++) {
        o4 += (size_t)snprintf(ad_s + o4, sizeof ad_s - o4, "%s%.0f", k ? ", " : "",
                               (pt.last_adopted[k] - pt.kill_t[k]) * 1e3);
        o1 += (size_t)snprintf(dl_s + o1, sizeof dl_s - o1, "%s%.0f", k ? ", " : "",
                               g->during[k]);
        o2 += (size_t)snprintf(low_s + o2, sizeof low_s - o2, "%s%.0f", k ? ", " : "",
                               g->lowest[k]);
        if (g->rec[k] < 0)
            o3 += (size_t)snprintf(rec_s + o3, sizeof rec_s - o3, "%snot before the next kill",
                                   k ? ", " : "");
        else
            o3 += (size_t)snprintf(rec_s + o3, sizeof rec_s - o3, "%s%.0f", k ? ", " : "",
                                   g->rec[k] * 1e3);
    }
    double d_sorted[PT_MAX_ROUNDS], r_sorted[PT_MAX_ROUNDS];
    memcpy(d_sorted, g->during, sizeof g->during);
    for (int k = 0; k < rounds; k++)
        r_sorted[k] = g->rec[k] < 0 ? 1e9 : g->rec[k] * 1e3;
    char shape[256];
    snprintf(shape, sizeof shape, "32x32 (%zu BEs), SUM/WAITFORALL waves, %d in flight, "
             "%.0f ms bins; %d commnodes killed at %g s, every %g s, %d times%s", n, PT_WINDOW,
             PT_BIN * 1e3, PT_VICTIMS, period, period, rounds,
             period < 10 || rounds < 4 ? " (shortened: seed 003 kills every 30 s)" : "");
    bench_row("ft", "perturbation, before the first kill", "%.0f", g->before, "waves/s",
              "%s; mean of the bins from 1 s to the first kill; %zu waves in all, every one "
              "checked, its coverage too (%zu short: a subtree lost in flight, never counted "
              "twice; %s); "
              "bench/perturbation.csv, bench/perturbation.svg", shape, total, nshort,
              start_exact_off ? "exactness off: --exact-off" : "the sum stream is exact: target 0");
    bench_row("ft", "perturbation, 0.5 s after each kill", "%.0f", bench_median(d_sorted, rounds),
              "waves/s", "median over the %d kills of the mean of the 5 bins after it; per "
              "kill: %s; lowest bin: %s; %.0f%% of before", rounds, dl_s, low_s,
              bench_median(d_sorted, rounds) / g->before * 100);
    bench_row("ft", "perturbation, back within 10% of before", "%.0f",
              g->never ? NAN : bench_median(r_sorted, rounds), "ms",
              "median over the kills: kill to the first bin from which %d bins average >= 90%% "
              "of the 2 s before that kill (0: no dip the mean shows); per kill: %s; "
              "kill to the last ADOPTED event at the FE (ms): %s", PT_SMOOTH, rec_s, ad_s);
    bench_row("ft", "perturbation, after the last kill", "%.0f", g->after, "waves/s",
              "from 1 s after the last kill to the end; %zu of 32 commnodes left, the %zu BEs "
              "adopted by them; %.0f%% of before", pt.ncomm - (size_t)(PT_VICTIMS * rounds),
              n, g->after / g->before * 100);
}

/* (c): the 32x32 tree, a sum stream, warm-up waves, then PT_WINDOW waves
 * in flight for period * (rounds + 1) s while PT_VICTIMS commnodes are
 * killed every period; a final wave, then the figures, the CSV and SVG
 * files if asked for, and the rows. */
void perturbation_run(double period, int rounds, const char *csv, const char *svg)
{
    size_t n;
    tbon_net_t *net = pt_tree(period, rounds, PT_VICTIMS, &n);
    double dur = period * (rounds + 1);
    size_t maxw = (size_t)(dur * 20000) + 1024;     /* far above any rate here */
    uint8_t *out = calloc(maxw, 1);                 /* per wave: in flight */
    if (!out)
        ft_die("calloc");
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), TBON_FILTER_SUM,
                                          TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    if (!s)
        ft_die("sum stream: %s", tbon_net_error(net));
    tb_wd_arm("perturbation run", dur + 120);
    uint32_t w = 1;
    pt_warmup(s, n, &w);

    pt_kills_start();
    size_t nshort = 0, total = 0;
    pt_waves(s, n, pt.t0 + dur, &w, out, maxw, &total, &nshort);
    pt_kills_wait(rounds, PT_VICTIMS, n, "perturbation");
    pt_final_wave(s, n, w);
    stop(net);
    free(out);

    struct pt_figures g;
    pt_analyse(rounds, &g);
    if (csv)
        pt_write_csv(csv);
    if (svg)
        pt_write_svg(svg, g.before);
    remove_tmpdir();
    pt_rows(period, rounds, n, total, nshort, &g);
    pt_free();
}
