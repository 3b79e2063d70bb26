/* report.c - the recovery of each injection: one row per recovered orphan
 * in the --csv file, and a table per injection on stdout (from the FE's
 * ADOPTED events and the runtime's recovery lines, watch.c). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tbon/tbon.h>

#include "fims.h"

/* The per-orphan CSV rows into csv. Returns 0, or -1 (said) when the file
 * cannot be written. */
static int write_csv(const char *csv)
{
    FILE *c = fopen(csv, "w");
    if (!c) {
        printf(PROG ": --csv %s: %s\n", csv, strerror(errno));
        return -1;
    }
    fprintf(c, "injection,victim,orphan,adopter,new_parent_us,connect_us,compensate_us,"
            "cleanup_us,total_us\n");
    for (size_t i = 0; i < fe.nrec; i++) {
        const struct recovery *r = &fe.rec[i];
        long long tot = r->part[0] + r->part[1] + r->part[2] + r->part[3];
        if (r->inj == SIZE_MAX)
            fprintf(c, ",");
        else
            fprintf(c, "%zu,", r->inj + 1);
        if (r->victim == TBON_RANK_NONE)
            fprintf(c, ",");
        else
            fprintf(c, "%u,", (unsigned)r->victim);
        fprintf(c, "%u,%u,%lld,%lld,%lld,%lld,%lld\n", (unsigned)r->orphan,
                (unsigned)r->adopter, r->part[0], r->part[1], r->part[2], r->part[3], tot);
    }
    if (fclose(c) != 0) {
        printf(PROG ": --csv %s: %s\n", csv, strerror(errno));
        return -1;
    }
    return 0;
}

/* The table's row of injection i (t0: the run's start). */
static void print_injection(size_t i, int64_t t0)
{
    const struct injection *in = &fe.inj[i];
    size_t adopted = 0, n = 0;
    int64_t last = 0;
    for (size_t k = 0; k < in->norph; k++)
        if (in->adopted_us[k]) {
            adopted++;
            if (in->adopted_us[k] > last)
                last = in->adopted_us[k];
        }
    long long mx = 0, sum = 0, ps[4] = { 0 };
    for (size_t k = 0; k < fe.nrec; k++) {
        if (fe.rec[k].inj != i)
            continue;
        long long tot = 0;
        for (int p = 0; p < 4; p++) {
            ps[p] += fe.rec[k].part[p];
            tot += fe.rec[k].part[p];
        }
        mx = tot > mx ? tot : mx;
        sum += tot;
        n++;
    }
    char vict[48] = "-", overall[24] = "-", mxs[24] = "-", mean[24] = "-", pm[4][24];
    if (in->nv) {
        size_t o = 0;
        for (size_t k = 0; k < in->nv && o < sizeof vict - 12; k++)
            o += (size_t)snprintf(vict + o, sizeof vict - o, "%s%u", k ? "," : "",
                                  (unsigned)in->victim[k]);
    }
    if (last && in->kill_us[0])
        snprintf(overall, sizeof overall, "%.2f", (double)(last - in->kill_us[0]) / 1e3);
    for (int p = 0; p < 4; p++)
        snprintf(pm[p], sizeof pm[p], "-");
    if (n) {
        snprintf(mxs, sizeof mxs, "%.2f", (double)mx / 1e3);
        snprintf(mean, sizeof mean, "%.2f", (double)sum / (double)n / 1e3);
        for (int p = 0; p < 4; p++)
            snprintf(pm[p], sizeof pm[p], "%.0f", (double)ps[p] / (double)n);
    }
    const char *colon = strchr(in->item->text, ':');
    const char *kind = colon ? colon + 1 : in->item->text;     /* "T:KIND" */
    printf("%-4zu %7.2f %-12s %-11s %7zu %8zu %11s %9s %9s %11s %10s %11s %10s\n", i + 1,
           in->kill_us[0] ? (double)(in->kill_us[0] - t0) / 1e6 : in->item->at,
           kind, vict, in->norph, adopted, overall, mxs, mean, pm[0], pm[1], pm[2], pm[3]);
}

/* Per-injection table; per-orphan CSV rows. Returns 0, or -1 when the CSV
 * file cannot be written. */
int report_recovery(const char *csv, int64_t t0)
{
    if (csv && write_csv(csv) != 0)
        return -1;
    if (!fe.ninj)
        return 0;
    printf("\n%-4s %7s %-12s %-11s %7s %8s %11s %9s %9s %11s %10s %11s %10s\n", "inj", "at_s",
           "kind", "victims", "orphans", "adopted", "overall_ms", "max_ms", "mean_ms",
           "new_par_us", "connect_us", "compens_us", "cleanup_us");
    for (size_t i = 0; i < fe.ninj; i++)
        print_injection(i, t0);
    printf("(overall: from the kill to the last adoption event of an orphan; max and mean:\n"
           " the orphans' own latencies, the sum of the four parts, from the runtime's\n"
           " recovery reports: %zu received%s)\n\n", fe.nrec,
           fe.bad_recovery_lines ? ", some unreadable" : "");
    return 0;
}

