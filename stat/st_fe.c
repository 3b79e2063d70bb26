/* st_fe.c - tbon_stat's front-end: it drives one session. With the plan
 * made (st_plan.c) and the merge filter loaded, it broadcasts the request
 * and merges the trees that come up until every task is in, asking again
 * for what a commnode's failure lost; a task nobody could sample gets a
 * named frame, never a gap. Then the session ends and the results are
 * written (st_out.c). */
#include "st_fe.h"

#include "st_job.h"
#include "st_out.h"
#include "st_plan.h"
#include "st_procs.h"
#include "st_proto.h"
#include "st_ptree.h"
#include "st_tasks.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RESEND_QUIET_S 0.5  /* asks again for missing tasks after this long without a result, */
#define RESEND_MAX_S 4.0    /* ... doubling up to this */

/* The merge filter: $TBON_STAT_FILTER, next to the build's bin/, or the
 * installed one. */
static char *filter_path(void)
{
    const char *env = getenv("TBON_STAT_FILTER");
    if (env && *env)
        return strdup(env);
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
        return NULL;
    exe[k] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    static const char *const rel[] = { "/../stat/stat_merge.so", "/../lib/tbon/filters/stat_merge.so" };
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s%s", exe, rel[i]);
        char *real = realpath(path, NULL);
        if (real)
            return real;
    }
    return NULL;
}

/* The indexes in r->t of the tasks missing from tr (the root's set), into a
 * malloc'd array (NULL when none); *n gets their count. */
static size_t *missing_tasks(const st_tree_t *tr, const struct run *r, size_t *n)
{
    st_range_t *rg = NULL;
    uint64_t cnt = 0;
    size_t nr = st_tree_tasks(tr, &rg, &cnt), j = 0;
    size_t *v = NULL;
    *n = 0;
    for (size_t i = 0; i < r->n; i++) {         /* r->t is sorted by id */
        uint32_t x = r->t[i].id;
        while (j < nr && rg[j].hi < x)
            j++;
        if (j < nr && rg[j].lo <= x)
            continue;
        if (!v)
            v = st_xcalloc(r->n, sizeof *v);
        v[(*n)++] = i;
    }
    free(rg);
    return v;
}

/* Add the tasks missing from tr under one frame naming why. */
static size_t fill_missing(st_tree_t *tr, const struct run *r, const char *why)
{
    size_t n, added = 0;
    size_t *miss = missing_tasks(tr, r, &n);
    const char *frame[] = { why };
    /* (a counts-only tree takes them as a tree of their own, counted) */
    st_tree_t *add = st_tree_is_counts(tr) ? st_tree_new() : tr;
    for (size_t k = 0; add && k < n; k++)
        added += st_tree_add(add, frame, 1, r->t[miss[k]].id) == 0;
    if (add && add != tr && (st_tree_to_counts(add, st_tree_round(tr)) != 0 ||
                             st_tree_merge(tr, add) != 0))
        added = 0;
    if (add != tr)
        st_tree_free(add);
    free(miss);
    return added;
}

/* How many tasks missing from tr belong to a back-end that is alive in the
 * front-end's view (they may still come). */
static size_t missing_alive(const st_tree_t *tr, const struct run *r, tbon_net_t *net)
{
    int cap = tbon_net_view(net, NULL, 0);
    tbon_rank_t *live = cap > 0 ? st_xcalloc((size_t)cap, sizeof *live) : NULL;
    int nv = live ? tbon_net_view(net, live, (size_t)cap) : 0;
    size_t nlive = nv < 0 ? 0 : nv < cap ? (size_t)nv : (size_t)cap;  /* joins in between */
    size_t n, k = 0;
    size_t *miss = missing_tasks(tr, r, &n);
    for (size_t m = 0; m < n; m++) {
        tbon_rank_t be = r->t[miss[m]].be;      /* the view is in rank order */
        size_t lo = 0, hi = nlive;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (live[mid] < be)
                lo = mid + 1;
            else
                hi = mid;
        }
        k += lo < nlive && live[lo] == be;
    }
    free(miss);
    free(live);
    return k;
}

/* Merge the packet's trees into t2 and t3. Counts-only trees do not merge
 * (the filter adds them up: each result is the whole sum so far): one that
 * has more tasks than t2, or as many of a later round, takes t2's and t3's
 * place. *bytes grows by the trees' size. */
static int take(tbon_packet_t *p, st_tree_t *t2, st_tree_t *t3, uint64_t *bytes, char *err,
                size_t errlen)
{
    uint8_t *b2 = NULL, *b3 = NULL;
    size_t l2 = 0, l3 = 0;
    if (tbon_packet_unpack(p, FMT_TREES, &b2, &l2, &b3, &l3) != 0) {
        snprintf(err, errlen, "a result of format \"%s\"", tbon_packet_format(p));
        return TBON_EFORMAT;
    }
    *bytes += l2 + l3;
    st_tree_t *a = st_tree_decode(b2, l2, err, errlen);
    st_tree_t *b = a ? st_tree_decode(b3, l3, err, errlen) : NULL;
    int rc = a && b ? 0 : TBON_EFORMAT;
    if (rc == 0 && st_tree_is_counts(a)) {
        uint64_t na = 0, nt = 0;
        st_tree_tasks(a, NULL, &na);
        st_tree_tasks(t2, NULL, &nt);
        if (na > nt || (na == nt && st_tree_round(a) >= st_tree_round(t2))) {
            st_tree_swap(t2, a);
            st_tree_swap(t3, b);
        }
    } else if (rc == 0) {
        rc = st_tree_merge(t2, a);
        if (rc == 0)
            rc = st_tree_merge(t3, b);
    }
    st_tree_free(a);
    st_tree_free(b);
    free(b2);
    free(b3);
    return rc;
}

/* The sample request's columns: each task's pid, id and back-end. */
struct req {
    int32_t *pids;
    uint32_t *ids, *owner;
};

/* Send the request on s and merge whatever comes into t2 and t3 until
 * every task is in. Results that died with a commnode leave a gap: once
 * nothing has come for a while, ask every back-end to send its trees
 * again; the merge is idempotent, so late or repeated results change
 * nothing. While back-ends are cut off (their commnode died and nobody has
 * adopted them yet: tbon_fe_cut_off) an ask would not reach them: wait
 * until each is adopted or taken for failed. A back-end that is alive is
 * waited for, however slow the machine (the asks back off up to
 * RESEND_MAX_S), until the budget is spent; tasks of back-ends that failed
 * are given up at once. */
static struct sampled sample_merge(const struct cli *c, struct run *r, tbon_stream_t *s,
                                   const struct req *q, st_tree_t *t2, st_tree_t *t3)
{
    tbon_net_t *net = r->net;
    char err[512] = "";
    struct sampled o = { 0 };
    double t1 = st_now();
    if (tbon_stream_send(s, TAG_SAMPLE, FMT_REQ, q->pids, r->n, q->ids, r->n, q->owner, r->n,
                         c->samples, c->interval_ms, c->flags, 0u) != 0)
        st_die("sending the request: %s", tbon_net_error(net));
    /* Time enough for every sample of every task. */
    int budget_ms = (int)(c->samples * (c->interval_ms + 50) + 30000 + r->n * 20);
    int waited_cut = 0;
    double quiet = RESEND_QUIET_S;
    double dl = st_now() + budget_ms / 1000.0, last = st_now();
    uint64_t have = 0;
    while (!st_interrupted && st_now() < dl) {
        tbon_packet_t *p = NULL;
        int rr = tbon_stream_recv(s, &p, 200);
        if (rr == 0) {
            if (take(p, t2, t3, &o.bytes, err, sizeof err) != 0)
                st_die("a result from the tree: %s", err);
            tbon_packet_unref(p);
            o.got = 1;
            o.composed += tbon_stream_request(s) == 0;
            last = st_now();
            st_range_t *rg = NULL;
            st_tree_tasks(t2, &rg, &have);
            free(rg);
            if (have >= r->n)
                break;
            continue;
        }
        if (rr == TBON_ELOST) {
            o.got = 1;      /* what was lost with failed nodes is asked for again */
            continue;
        }
        if (rr != TBON_ETIMEOUT) {
            fprintf(stderr, PROG ": no more results: %s\n", tbon_net_error(net));
            break;
        }
        if (!o.got || st_now() - last < quiet)
            continue;
        int cut = tbon_fe_cut_off(net, NULL, 0);
        if (cut > 0) {
            if (!waited_cut)
                fprintf(stderr, PROG ": %" PRIu64 " of %zu tasks in the merge; waiting for "
                        "%d back-end%s to be adopted\n", have, r->n, cut, cut == 1 ? "" : "s");
            waited_cut = 1;
            last = st_now();
            continue;
        }
        if (waited_cut)
            quiet = RESEND_QUIET_S;     /* the tree changed: ask soon again */
        waited_cut = 0;
        if (missing_alive(t2, r, net) == 0)
            break;                      /* the rest failed with their back-ends */
        fprintf(stderr, PROG ": %" PRIu64 " of %zu tasks in the merge; asking again\n", have, r->n);
        /* The request again: a back-end it never reached samples now. */
        ++o.asks;
        if (tbon_stream_send(s, TAG_RESEND, FMT_REQ, q->pids, r->n, q->ids, r->n, q->owner,
                             r->n, c->samples, c->interval_ms, c->flags, (uint32_t)o.asks) != 0)
            break;
        last = st_now();
        quiet = quiet * 2 < RESEND_MAX_S ? quiet * 2 : RESEND_MAX_S;
    }
    if (!o.got && !st_interrupted)
        fprintf(stderr, PROG ": no result from the tree (%s)\n",
                st_now() >= dl ? "timed out" : tbon_net_error(net));
    o.t_sample = st_now() - t1;
    return o;
}

/* The nodes that failed, from the events not yet taken. */
static size_t failed_nodes(struct run *r)
{
    tbon_event_t ev;
    size_t failed = 0;
    while (tbon_net_next_event(r->net, &ev, 0) == 0)
        failed += ev.type == TBON_EV_NODE_FAILED;
    return failed;
}

/* The session ends: the nodes that failed counted, the tree, the srun
 * step, the command launched (unless --keep) and the topology file gone.
 * detach_to (--session): the tree is left running instead, its file
 * there. */
static size_t end_session(const struct cli *c, struct run *r, const char *detach_to)
{
    size_t failed = failed_nodes(r);
    if (detach_to && tbon_fe_detach(r->net, detach_to) != 0) {
        fprintf(stderr, PROG ": cannot leave the tree running (%s): it ends\n",
                tbon_net_error(r->net));
        detach_to = NULL;
    }
    if (!detach_to)
        tbon_net_destroy(r->net);
    r->net = NULL;
    if (r->srun)
        st_stop_srun(r->srun, 10);
    st_cleanup.srun = 0;
    st_cleanup.attach = NULL;
    if (r->launched && !c->keep)
        st_stop_command(r->launched);
    if (r->tmpdir[0]) {
        unlink(r->topo);
        rmdir(r->tmpdir);
    }
    st_cleanup.topo = NULL;
    return failed;
}

void st_fe_free_run(struct run *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->t[i].host);
    free(r->t);
    free(r->absent);
    for (size_t i = 0; i < r->nunreached; i++)
        free(r->unreached[i]);
    free(r->unreached);
    free(r->attach);
    free(r->topo);
}

int st_fe_plan(const struct cli *c, char *self, struct run *r)
{
    double t_start = st_now();
    st_tasks_t tasks = { 0 };
    char err[512] = "";
    uint32_t job = c->jobid;
    uint32_t steps[ST_MAX_STEPS];
    size_t nsteps = c->nsteps;
    memcpy(steps, c->steps, sizeof steps);
    int rc = st_find_tasks(c, r, &tasks, &job, steps, &nsteps, err, sizeof err);
    if (rc != 0) {
        if (r->launched)
            st_stop_command(r->launched);
        fprintf(stderr, PROG ": %s\n", err);
        st_tasks_free(&tasks);
        exit(rc != TBON_ENOTFOUND && (c->pids || c->pids_file) ? EXIT_USAGE : EXIT_RUN);
    }
    st_make_dirs(c->outdir);
    char *filter = filter_path();
    if (!filter)
        st_die("cannot find stat_merge.so (set TBON_STAT_FILTER to its path)");
    r->t_find = st_now() - t_start;
    st_tasks_unique(&tasks);            /* the number of tasks the tree is for */
    if (job || st_tasks_remote(&tasks))
        st_plan_remote(c, self, &tasks, job, steps, nsteps, r);
    else
        st_plan_local(c, self, &tasks, r);
    st_tasks_free(&tasks);
    if (strcmp(r->exe, "?") == 0)
        snprintf(r->exe, sizeof r->exe, "stat");
    qsort(r->t, r->n, sizeof *r->t, st_by_id);
    int fid = tbon_fe_load_filter(r->net, filter, "stat_merge");
    if (fid < 0)
        st_die("loading %s: %s", filter, tbon_net_error(r->net));
    free(filter);
    return fid;
}

int st_fe_sample(const struct cli *c, struct run *r, int fid, const char *detach_to)
{
    tbon_net_t *net = r->net;
    size_t nbe = tbon_net_num_backends(net);
    struct req q = { st_xcalloc(r->n, sizeof *q.pids), st_xcalloc(r->n, sizeof *q.ids),
                     st_xcalloc(r->n, sizeof *q.owner) };
    for (size_t i = 0; i < r->n; i++) {
        q.pids[i] = r->t[i].pid;
        q.ids[i] = r->t[i].id;
        q.owner[i] = r->t[i].be;
    }
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), fid,
                                          TBON_SYNC_WAITFORALL, TBON_FILTER_NULL);
    if (!s)
        st_die("a stream: %s", tbon_net_error(net));
    st_tree_t *t2 = st_tree_new(), *t3 = st_tree_new();
    if (!t2 || !t3)
        st_die("out of memory");
    struct sampled o = sample_merge(c, r, s, &q, t2, t3);
    const char *why = st_interrupted ? "[not sampled: interrupted]"
                      : o.got ? "[not sampled: back-end lost]" : "[not sampled: no result]";
    size_t missing = fill_missing(t2, r, why);
    fill_missing(t3, r, why);
    for (size_t i = 0; i < r->nabsent; i++) {
        const char *frame[] = { "[task not found]" };
        st_tree_add(t2, frame, 1, r->absent[i]);
        st_tree_add(t3, frame, 1, r->absent[i]);
    }
    /* A run ends its tree before it writes; a session's sample leaves it
     * after (meanwhile the children a reattach adopted open their event
     * connections, which the detach would otherwise wait for). */
    size_t failed = detach_to ? failed_nodes(r) : end_session(c, r, NULL);
    char *dir = st_run_dir(c->outdir, r->exe);
    int svg = 1;                        /* until dot is missing or fails */
    st_write_results(c, r, dir, t2, t3, &svg, nbe, &o, missing, failed);
    st_print_results(c, r, dir, t2, svg, nbe, o.t_sample, missing);
    if (detach_to)
        end_session(c, r, detach_to);
    st_tree_free(t2);
    st_tree_free(t3);
    int rc = st_interrupted || r->incomplete ? EXIT_RUN : r->nunreached ? EXIT_UNREACHED : 0;
    st_fe_free_run(r);
    free(dir);
    free(q.pids);
    free(q.ids);
    free(q.owner);
    return rc;
}

int st_fe_main(const struct cli *c, char *self)
{
    struct run run = { 0 };
    int fid = st_fe_plan(c, self, &run);
    return st_fe_sample(c, &run, fid, NULL);
}
