/* checks.c - the checks at the end of a run: the front-end's output set
 * against the union of what the back-ends wrote they sent (a failed
 * back-end's values may be lost with it: said, by rank), no element
 * reported as new twice, every element in a result whose coverage holds
 * its sender, a failure event for every kill, no process left; then the
 * verdict line, PASS or FAIL with every reason. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "fims.h"

struct befile {                  /* what one back-end wrote it sent */
    tbon_rank_t rank;
    uint64_t   *v;               /* in the order it sent them */
    size_t      n, cap;
};

static int befile_cmp(const void *a, const void *b)
{
    tbon_rank_t x = ((const struct befile *)a)->rank, y = ((const struct befile *)b)->rank;
    return x < y ? -1 : x > y;
}

/* Every DIR/be-RANK.txt into *out (in rank order) (malloc'd; the caller frees each v and
 * the array). Returns how many files, or -1 (message printed). */
static long read_inputs(const char *dir, struct befile **out)
{
    DIR *d = opendir(dir);
    if (!d) {
        printf(PROG ": %s: %s\n", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    char path[4400], line[64];
    long nf = 0, cap = 0;
    *out = NULL;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        char *end;
        if (strncmp(e->d_name, "be-", 3) != 0 || l < 8 || strcmp(e->d_name + l - 4, ".txt"))
            continue;
        unsigned long r = strtoul(e->d_name + 3, &end, 10);
        if (end != e->d_name + l - 4)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (nf == cap) {
            cap = cap ? cap * 2 : 64;
            struct befile *nb = realloc(*out, (size_t)cap * sizeof *nb);
            if (!nb) {
                fprintf(stderr, PROG ": out of memory\n");
                exit(1);
            }
            *out = nb;
        }
        struct befile *b = &(*out)[nf++];
        memset(b, 0, sizeof *b);
        b->rank = (tbon_rank_t)r;
        while (fgets(line, sizeof line, f)) {
            errno = 0;
            uint64_t v = strtoull(line, &end, 10);
            if (end == line || (*end != '\n' && *end) || errno)
                continue;
            if (b->n == b->cap) {
                b->cap = b->cap ? b->cap * 2 : 256;
                uint64_t *nv = realloc(b->v, b->cap * sizeof *nv);
                if (!nv) {
                    fprintf(stderr, PROG ": out of memory\n");
                    exit(1);
                }
                b->v = nv;
            }
            b->v[b->n++] = v;
        }
        fclose(f);
    }
    closedir(d);
    if (nf > 1)
        qsort(*out, (size_t)nf, sizeof **out, befile_cmp);
    return nf;
}

/* 1 if back-end rank r had a failure event (it failed, or its host was
 * cut off). */
static int be_failed(tbon_rank_t r)
{
    return r < tb_topology_size(fe.topo) && fe.failed_us[r] != 0;
}

/* The values of failed back-ends that did not reach the front-end and that
 * no live back-end sent: lost with them (the library promises nothing for
 * what a failed node held or had in flight). Each failed back-end's share is
 * printed; *nbe gets how many had a loss, and their ranks go to list. The
 * number of distinct lost values is returned. */
static size_t report_lost(const struct befile *f, long nf, const u64set_t *live, char *list,
                          size_t cap, size_t *nbe)
{
    u64set_t lost = { 0 };
    size_t o = 0;
    *nbe = 0;
    list[0] = '\0';
    for (long i = 0; i < nf; i++) {
        if (!be_failed(f[i].rank))
            continue;
        u64set_t mine = { 0 };
        size_t nlost = 0, holes = 0, last = 0;   /* last: 1 + index of the last arrived */
        for (size_t k = 0; k < f[i].n; k++)      /* a private value: only it sent it */
            if (f[i].v[k] >= SHARED_POOL && set_has(&fe.out, f[i].v[k]))
                last = k + 1;
        for (size_t k = 0; k < f[i].n; k++) {
            uint64_t v = f[i].v[k];
            if (set_has(&fe.out, v) || set_has(live, v) || !set_add(&mine, v))
                continue;
            nlost++;
            holes += k < last;
            set_add(&lost, v);
        }
        printf("  back-end %u on %s failed: sent %zu values, %zu lost", (unsigned)f[i].rank,
               hosts[host_of[f[i].rank]].name, f[i].n, nlost);
        if (nlost && !holes)
            printf(" (every one after its value #%zu, the last that arrived)", last);
        else if (holes)
            printf(" (%zu of them before its value #%zu, the last that arrived)", holes, last);
        printf("\n");
        if (nlost) {
            (*nbe)++;
            if (o + 16 < cap)
                o += (size_t)snprintf(list + o, cap - o, "%s%u", o ? "," : "",
                                      (unsigned)f[i].rank);
        }
        free(mine.slot);
    }
    size_t n = set_size(&lost);
    free(lost.slot);
    return n;
}

static int vres_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct vres *)a)->v, y = ((const struct vres *)b)->v;
    return x < y ? -1 : x > y;
}

static int rank_cmp(const void *a, const void *b)
{
    tbon_rank_t x = *(const tbon_rank_t *)a, y = *(const tbon_rank_t *)b;
    return x < y ? -1 : x > y;
}

/* Every private element that reached the FE came in a result whose coverage
 * holds the back-end that sent it (its own file says so). Returns how many
 * did not; prints the first ones and a summary. */
static size_t check_coverage(const struct befile *f, long nf)
{
    if (fe.nvres > 1)
        qsort(fe.vres, fe.nvres, sizeof *fe.vres, vres_cmp);
    size_t checked = 0, bad = 0;
    for (long i = 0; i < nf; i++)
        for (size_t k = 0; k < f[i].n; k++) {
            if (f[i].v[k] < SHARED_POOL)
                continue;
            struct vres key = { f[i].v[k], 0 };
            const struct vres *e = bsearch(&key, fe.vres, fe.nvres, sizeof *fe.vres, vres_cmp);
            if (!e || e->res == UINT32_MAX)
                continue;       /* never arrived (lost, and said so above) */
            checked++;
            const struct cov *c = &fe.cov[e->res];
            if (!c->n || !bsearch(&f[i].rank, c->r, c->n, sizeof *c->r, rank_cmp)) {
                if (bad++ < SHOW_MAX)
                    printf("  element %" PRIu64 " of back-end %u came in a result whose "
                           "coverage (%zu back-ends) does not hold it\n", f[i].v[k],
                           (unsigned)f[i].rank, c->n);
            }
        }
    printf(PROG ": coverage: %zu results, %zu elements each checked against its sender's file: "
           "%zu not covered\n", fe.ncov, checked, bad);
    for (size_t i = 0; i < fe.ncov; i++)
        free(fe.cov[i].r);
    free(fe.cov);
    free(fe.vres);
    return bad;
}

/* Remove DIR/be-*.txt (and DIR itself when rmdir_too). */
void clean_dir(const char *dir, int rmdir_too)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4400];
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "be-", 3) != 0 || l < 8 || strcmp(e->d_name + l - 4, ".txt"))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    if (rmdir_too)
        rmdir(dir);
}

/* ---------------------------------------------------------------- verdict */

/* What the back-ends' files, the front-end's output and the injections say. */
struct tally {
    u64set_t in, live;           /* every value sent; those of live back-ends */
    size_t   lines, failed_be, live_nofile;
    size_t   missing, extra, lost, lost_be, uncovered;
    char     lost_ranks[256];
    size_t   kills, remote;      /* victims killed; on other hosts */
};

/* The reasons of a FAIL, "; "-separated. */
struct verdict {
    char   why[1024];
    size_t wl;
    int    fail;
};

__attribute__((format(printf, 2, 3)))
static void why(struct verdict *v, const char *fmt, ...)
{
    char msg[sizeof v->why];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (v->wl < sizeof v->why)
        v->wl += (size_t)snprintf(v->why + v->wl, sizeof v->why - v->wl, "%s%s",
                                  v->wl ? "; " : "", msg);
    v->fail = 1;
}

/* The back-ends' files (*bf, nf of them, returned; -1 if DIR could not be
 * read): every value, those of live back-ends, which live back-end wrote
 * none; the line comparing them with the output. */
static long tally_inputs(const char *dir, size_t size, struct tally *t, struct befile **bf)
{
    long nf = read_inputs(dir, bf);
    uint8_t *has_file = calloc(size, 1);
    for (long i = 0; i < nf; i++) {
        for (size_t k = 0; k < (*bf)[i].n; k++) {
            set_add(&t->in, (*bf)[i].v[k]);
            if (!be_failed((*bf)[i].rank))
                set_add(&t->live, (*bf)[i].v[k]);
        }
        t->lines += (*bf)[i].n;
        if (has_file && (*bf)[i].rank < size)
            has_file[(*bf)[i].rank] = 1;
    }
    for (tbon_rank_t r = 0; r < size; r++) {
        if (!fe.is_be[r])
            continue;
        t->failed_be += be_failed(r);
        if (has_file && !has_file[r] && !be_failed(r))
            t->live_nofile++;
    }
    free(has_file);
    printf(PROG ": back-ends: %ld files, %zu values sent, %zu distinct; front-end: %zu "
           "packets, %zu distinct elements\n", nf < 0 ? 0 : nf, t->lines, set_size(&t->in),
           fe.packets, set_size(&fe.out));
    return nf;
}

/* The output against the inputs: missing, extra, lost with failed
 * back-ends, not covered (each said); frees bf. */
static void tally_output(struct befile *bf, long nf, struct tally *t)
{
    t->missing = set_diff(&t->live, &fe.out, "missing at the front-end (sent by a live back-end)");
    t->extra = set_diff(&fe.out, &t->in, "received but never sent");
    t->lost = nf > 0 ? report_lost(bf, nf, &t->live, t->lost_ranks, sizeof t->lost_ranks,
                                   &t->lost_be) : 0;
    if (t->lost)
        printf(PROG ": LOST with failed back-ends: %zu distinct value%s of %zu back-end%s (%s)\n",
               t->lost, t->lost == 1 ? "" : "s", t->lost_be, t->lost_be == 1 ? "" : "s",
               t->lost_ranks);
    t->uncovered = nf > 0 ? check_coverage(bf, nf) : 0;
    for (long i = 0; i < nf; i++)
        free(bf[i].v);
    free(bf);
}

/* The reasons about the data. */
static void why_data(const struct tally *t, struct verdict *v)
{
    if (t->live_nofile)
        why(v, "%zu live back-end%s wrote no file%s", t->live_nofile,
            t->live_nofile == 1 ? "" : "s",
            nhosts > 1 ? " (is the directory on a file system every host shares? --dir)" : "");
    if (set_size(&t->in) == 0)
        why(v, "nothing was sent");
    if (t->missing || t->extra)
        why(v, "output != union of %sinputs (%zu missing, %zu extra)",
            t->failed_be ? "the live back-ends' " : "", t->missing, t->extra);
    if (fe.twice) {
        printf("  reported as new twice (first ones):");
        for (size_t i = 0; i < fe.twice && i < SHOW_MAX; i++)
            printf(" %" PRIu64, fe.twice_first[i]);
        printf("\n");
        why(v, "%zu element%s reported as new twice", fe.twice, fe.twice == 1 ? "" : "s");
    }
    if (t->uncovered)
        why(v, "%zu element%s came in results whose coverage lacks their sender",
            t->uncovered, t->uncovered == 1 ? "" : "s");
    if (fe.stream_errors)
        why(v, "%zu stream error%s (%s)", fe.stream_errors, fe.stream_errors == 1 ? "" : "s",
            fe.stream_error);
}

/* The reasons about the kills (each kill without its failure event said)
 * and the leftovers (left: from hosts_left); notes on what is no failure. */
static void why_kills(const struct opts *o, long left, struct tally *t, struct verdict *v)
{
    size_t unreported = 0, skipped = 0, unadopted = 0, notfound = 0;
    for (size_t i = 0; i < fe.ninj; i++) {
        /* A repeated injection may outlive the commnodes: not a failure. */
        skipped += fe.inj[i].skipped && fe.inj[i].item->kind != K_EVERY;
        for (size_t k = 0; k < fe.inj[i].nv; k++) {
            if (!fe.inj[i].pid[k]) {
                notfound++;
                continue;
            }
            t->remote += (size_t)fe.inj[i].where[k];
            t->kills++;
            if (!fe.inj[i].failed_us[k]) {
                unreported++;
                printf("  injection %zu: no failure event for commnode %u\n", i + 1,
                       (unsigned)fe.inj[i].victim[k]);
            }
        }
        for (size_t k = 0; k < fe.inj[i].norph; k++)
            unadopted += !fe.inj[i].adopted_us[k] &&
                         tb_topology_alive(fe.topo, fe.inj[i].orphan[k]);
    }
    if (unreported)
        why(v, "%zu of %zu kills without a failure event", unreported, t->kills);
    if (skipped)
        why(v, "%zu injection%s had nothing to kill", skipped, skipped == 1 ? "" : "s");
    if (notfound)
        why(v, "%zu victim%s not found on %s host", notfound, notfound == 1 ? "" : "s",
            notfound == 1 ? "its" : "their");
    if (o->nitems && t->kills == 0)
        why(v, "the schedule asked for %zu injection%s and no process was killed", o->nitems,
            o->nitems == 1 ? "" : "s");
    if (left > 0)
        why(v, "%ld process%s left", left, left == 1 ? "" : "es");
    if (left < 0)
        why(v, "a host could not be checked for leftovers");
    if (unadopted)
        printf("  note: %zu orphan%s never reported adopted\n", unadopted,
               unadopted == 1 ? "" : "s");
    if (fe.other_failed)
        printf("  note: %zu failure event%s for nodes this run did not kill\n", fe.other_failed,
               fe.other_failed == 1 ? "" : "s");
}

/* The last line: PASS (DIR removed if it is the tool's own) or FAIL. */
static void print_verdict(const struct tally *t, const struct verdict *v, const char *dir,
                          int own_dir)
{
    if (v->fail) {
        printf(PROG ": FAIL: %s (back-end files kept in %s)\n", v->why, dir);
        return;
    }
    char k[96] = "no kills", l[320] = "";
    if (t->kills)
        snprintf(k, sizeof k, "%zu kill%s (%zu on other hosts), each reported failed",
                 t->kills, t->kills == 1 ? "" : "s", t->remote);
    if (t->lost)
        snprintf(l, sizeof l, ", %zu lost with failed back-end%s %s", t->lost,
                 t->lost_be == 1 ? "" : "s", t->lost_ranks);
    else if (t->failed_be)
        snprintf(l, sizeof l, ", nothing lost with the %zu failed back-end%s", t->failed_be,
                 t->failed_be == 1 ? "" : "s");
    printf(PROG ": PASS: %zu distinct elements, output == union of %sinputs%s, none "
           "reported twice, %s, no process left on %zu host%s\n", set_size(&t->in),
           t->failed_be ? "the live back-ends' " : "", l, k, nhosts, nhosts == 1 ? "" : "s");
    if (own_dir)
        clean_dir(dir, 1);
}

/* Every check of the end of the run (size: the topology's ranks; left: the
 * processes hosts_left found), the recovery table, and the verdict.
 * Returns 0 for PASS, 1 for FAIL. */
int fims_verdict(const struct opts *o, const char *dir, int own_dir, size_t size, long left,
                 int64_t t0)
{
    struct tally t = { 0 };
    struct verdict v = { .wl = 0 };
    struct befile *bf = NULL;
    long nf = tally_inputs(dir, size, &t, &bf);
    v.fail = nf < 0;
    tally_output(bf, nf, &t);
    why_data(&t, &v);
    why_kills(o, left, &t, &v);
    if (report_recovery(o->csv, t0) != 0)
        why(&v, "could not write the CSV file");
    print_verdict(&t, &v, dir, own_dir);
    fflush(stdout);
    free(t.in.slot);
    free(t.live.slot);
    return v.fail;
}
