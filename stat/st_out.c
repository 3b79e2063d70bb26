/* st_out.c - tbon_stat's results: under -o's directory, a run directory
 * <exe>.NNNN with the 2D and 3D trees (dot, SVG when Graphviz's dot is
 * there, JSON, text, folded stacks, equivalence classes), the tasks (text
 * and JSON) and the figures (perf); on the terminal the merged tree, the
 * summary, and the tasks not reached. */
#include "st_out.h"

#include "st_draw.h"
#include "st_job.h"
#include "st_proto.h"
#include "st_tasks.h"
#include "st_view.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

/* DIR/<exe>.NNNN, the first that does not exist yet (created). */
char *st_run_dir(const char *outdir, const char *exe)
{
    if (mkdir(outdir, 0755) != 0 && errno != EEXIST)
        st_die("-o %s: %s", outdir, strerror(errno));
    for (unsigned i = 0; i < 10000; i++) {
        char *d = malloc(strlen(outdir) + strlen(exe) + 16);
        if (!d)
            st_die("out of memory");
        sprintf(d, "%s/%s.%04u", outdir, exe, i);
        if (mkdir(d, 0755) == 0)
            return d;
        int e = errno;
        free(d);
        if (e != EEXIST)
            st_die("-o %s: %s", outdir, strerror(e));
    }
    st_die("-o %s: no free run number", outdir);
}

/* Open DIR/NAME for writing, or die. */
static FILE *out_file(const char *dir, const char *exe, const char *suffix, char *path,
                      size_t cap)
{
    snprintf(path, cap, "%s/%s.%s", dir, exe, suffix);
    FILE *f = fopen(path, "w");
    if (!f)
        st_die("%s: %s", path, strerror(errno));
    return f;
}

static void close_file(FILE *f, const char *path)
{
    if (ferror(f) | fclose(f))
        st_die("%s: write error", path);
}

/* Write one tree's dot text (drawn by st_draw). */
static void write_dot(const char *dir, const char *exe, const char *which, const st_tree_t *t)
{
    char path[PATH_MAX], suffix[32];
    snprintf(suffix, sizeof suffix, "%s.dot", which);
    FILE *f = out_file(dir, exe, suffix, path, sizeof path);
    char title[128];
    snprintf(title, sizeof title, "%s %s", exe, which);
    if (st_tree_write_dot(t, f, title) != 0)
        st_die("%s: write error", path);
    close_file(f, path);
}

/* Write one tree's JSON, text and folded stacks (flame graphs), these when
 * folded says so (a counts-only tree's are exact only when every task has
 * one path: the 2D tree without threads). */
static void write_tree(const char *dir, const char *exe, const char *which, const st_tree_t *t,
                       int folded)
{
    char path[PATH_MAX], suffix[32];
    snprintf(suffix, sizeof suffix, "%s.json", which);
    FILE *f = out_file(dir, exe, suffix, path, sizeof path);
    if (st_tree_write_json(t, f) != 0)
        st_die("%s: write error", path);
    close_file(f, path);
    snprintf(suffix, sizeof suffix, "%s.txt", which);
    f = out_file(dir, exe, suffix, path, sizeof path);
    if (st_tree_write_text(t, f) != 0)
        st_die("%s: write error", path);
    close_file(f, path);
    if (!folded)
        return;
    snprintf(suffix, sizeof suffix, "%s.folded", which);
    f = out_file(dir, exe, suffix, path, sizeof path);
    if (st_tree_write_folded(t, f) != 0)
        st_die("%s: write error", path);
    close_file(f, path);
}

/* "host:pid" of the task numbered id (NULL if none): for the classes. */
static const char *task_name(void *arg, uint32_t id)
{
    const struct run *r = arg;
    static char buf[300];
    struct task key = { .id = id };
    const struct task *t = bsearch(&key, r->t, r->n, sizeof *r->t, st_by_id);
    if (!t)
        return NULL;
    snprintf(buf, sizeof buf, "%s:%d", t->host, (int)t->pid);
    return buf;
}

/* Name the tasks not reached, on f (prefix: PROG ": " on stderr). */
static void print_unreached(FILE *f, const char *prefix, const struct run *r)
{
    if (!r->nunreached)
        return;
    fprintf(f, "%snot reached: %zu %s%s whose back-end did not start, not sampled:", prefix,
            r->nunreached, r->job ? "node" : "task", r->nunreached == 1 ? "" : "s");
    for (size_t i = 0; i < r->nunreached; i++)
        fprintf(f, "%s %s", i ? "," : "", r->unreached[i]);
    fprintf(f, "%s (exit %d)\n", r->job ? " (every task of the job there)" : "",
            EXIT_UNREACHED);
}

/* Make dir and its parents (mkdir -p). */
void st_make_dirs(const char *dir)
{
    char *p = st_xstrdup(dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            st_die("-o %s: %s: %s", dir, p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        st_die("-o %s: %s", dir, strerror(errno));
    free(p);
}

/* DIR/<exe>.tasks.txt: every task's number, rank, host, pid and step, and
 * its path in the merged 2D tree t (outermost first, " > " between). */
static void write_tasks(const char *dir, const char *exe, const struct run *r,
                        const st_tree_t *tree)
{
    char path[PATH_MAX];
    FILE *f = out_file(dir, exe, "tasks.txt", path, sizeof path);
    fprintf(f, "# task rank host pid step: path (the trees' sets are task numbers)\n");
    for (size_t i = 0; i < r->n; i++) {
        const struct task *t = &r->t[i];
        char rank[16] = "-", step[16] = "-";
        if (t->rank >= 0)
            snprintf(rank, sizeof rank, "%d", t->rank);
        if (t->step != ST_STEP_NONE)
            snprintf(step, sizeof step, "%u", t->step);
        fprintf(f, "%u %s %s %d %s:", t->id, rank, t->host, t->pid, step);
        if (st_tree_is_counts(tree)) {
            fputs(" [--counts-only: no paths]\n", f);
            continue;
        }
        const char **fr = NULL;
        size_t nf = st_tree_path(tree, t->id, &fr);
        for (size_t k = 0; k < nf; k++)
            fprintf(f, "%s%s", k ? " > " : " ", fr[k]);
        free(fr);
        fputc('\n', f);
    }
    for (size_t i = 0; i < r->nabsent; i++)
        fprintf(f, "%u %u - - -: [task not found]\n", r->absent[i], r->absent[i]);
    close_file(f, path);
}

/* The tasks as tasks.json has them, one object per task: {"task", "rank",
 * "host", "pid", "step"}, null for what is not known (a host name that is
 * not UTF-8 included). NULL when out of memory. */
static json_t *tasks_json(const struct run *r)
{
    json_t *all = json_array();
    int bad = !all;
    for (size_t i = 0; !bad && i < r->n + r->nabsent; i++) {
        const struct task *t = i < r->n ? &r->t[i] : NULL;
        uint32_t absent = t ? 0 : r->absent[i - r->n];
        json_t *host = t ? json_string(t->host) : NULL;
        /* An absent task: its number is its rank, nothing else is known. */
        bad = json_array_append_new(all, json_pack(
            "{s:I, s:o, s:o, s:o, s:o}",
            "task", (json_int_t)(t ? t->id : absent),
            "rank", !t ? json_integer(absent) : t->rank >= 0 ? json_integer(t->rank)
                                                           : json_null(),
            "host", host ? host : json_null(),
            "pid", t ? json_integer(t->pid) : json_null(),
            "step", t && t->step != ST_STEP_NONE ? json_integer(t->step) : json_null())) != 0;
    }
    if (bad) {
        json_decref(all);
        return NULL;
    }
    return all;
}

/* DIR/<exe>.tasks.json: the same as tasks.txt without the paths. */
static void write_tasks_json(const char *dir, const char *exe, const struct run *r)
{
    char path[PATH_MAX];
    FILE *f = out_file(dir, exe, "tasks.json", path, sizeof path);
    json_t *all = tasks_json(r);
    if (!all || json_dumpf(all, f, JSON_COMPACT) != 0)
        st_die("%s: cannot write the JSON (out of memory or a write error)", path);
    json_decref(all);
    fputc('\n', f);
    close_file(f, path);
}

/* DIR/<exe>.html: the viewer (st_view.c) with the run's data: the tasks,
 * both trees and their classes (docs/stat.md, "The viewer"). */
static void write_html(const struct cli *c, const char *dir, const struct run *r,
                       const st_tree_t *t2, const st_tree_t *t3)
{
    char path[PATH_MAX];
    FILE *f = out_file(dir, r->exe, "html", path, sizeof path);
    int counts = st_tree_is_counts(t2);
    json_t *cls = counts ? json_null() : json_pack("{s:o, s:o}", "2D", st_tree_classes_json(t2),
                                                   "3D", st_tree_classes_json(t3));
    json_t *d = json_pack("{s:s, s:s, s:s, s:I, s:s, s:b, s:o, s:{s:o, s:o}, s:o}",
                          "format", "tbon_stat-view 1", "exe", r->exe, "host", st_this_host(),
                          "samples", (json_int_t)c->samples, "ranks_from",
                          r->ranks_from ? r->ranks_from : "position", "counts_only", counts,
                          "tasks", tasks_json(r), "trees", "2D", st_tree_json(t2), "3D",
                          st_tree_json(t3), "classes", cls);
    if (!d || st_view_write(f, d) != 0)
        st_die("%s: cannot write the page (out of memory or a write error)", path);
    json_decref(d);
    close_file(f, path);
}

/* "gdb -p PID", or "ssh -t HOST gdb -p PID" for a task of another host:
 * how to attach a debugger to the task numbered id (NULL if none). */
static const char *attach_line(void *arg, uint32_t id)
{
    const struct run *r = arg;
    static char buf[400];
    struct task key = { .id = id };
    const struct task *t = bsearch(&key, r->t, r->n, sizeof *r->t, st_by_id);
    if (!t)
        return NULL;
    if (!t->host || st_is_this_host(t->host, strlen(t->host)))
        snprintf(buf, sizeof buf, "gdb -p %d", (int)t->pid);
    else
        snprintf(buf, sizeof buf, "ssh -t %s gdb -p %d", t->host, (int)t->pid);
    return buf;
}

static void write_classes(const char *dir, const char *exe, const char *which,
                          const st_tree_t *t, struct run *r)
{
    char path[PATH_MAX], suffix[32];
    snprintf(suffix, sizeof suffix, "%s.classes.txt", which);
    FILE *f = out_file(dir, exe, suffix, path, sizeof path);
    if (st_tree_write_classes_named(t, f, task_name, r) < 0)
        st_die("%s: write error", path);
    close_file(f, path);
}

/* The files of the run in dir (the trees, their classes, the tasks, the
 * figures); *svg: whether dot drew the trees. */
void st_write_results(const struct cli *c, struct run *r, const char *dir, st_tree_t *t2,
                      st_tree_t *t3, int *svg, size_t nbe, const struct sampled *o,
                      size_t missing, size_t failed)
{
    double t2s = st_now();
    const char *exe = r->exe;
    write_dot(dir, exe, "2D", t2);
    write_dot(dir, exe, "3D", t3);
    struct st_draw d;
    st_draw_start(&d, dir, exe, c->session);   /* while the rest is written */
    int counts = st_tree_is_counts(t2);
    write_tree(dir, exe, "2D", t2, !counts || !(c->flags & FLAG_THREADS));
    write_tree(dir, exe, "3D", t3, !counts);
    if (!counts) {
        write_classes(dir, exe, "2D", t2, r);
        write_classes(dir, exe, "3D", t3, r);
    }
    write_tasks(dir, exe, r, t2);
    write_tasks_json(dir, exe, r);
    write_html(c, dir, r, t2, t3);
    int drawn = st_draw_finish(&d);
    if (drawn < 0)
        fprintf(stderr, PROG ": note: dot could not draw %s/%s.{2D,3D}.dot\n", dir, exe);
    *svg = drawn == 0;
    char path[PATH_MAX];
    FILE *f = out_file(dir, exe, "perf", path, sizeof path);
    double t_write = st_now() - t2s;
    fprintf(f, "tasks %zu\nhosts %zu\nbackends %zu\nsamples %u\ninterval_ms %u\n", r->n,
            r->nhosts, nbe, c->samples, c->interval_ms);
    fprintf(f, "find_tasks_s %.6f\nlaunch_tree_s %.6f\nsample_merge_s %.6f\nwrite_s %.6f\n",
            r->t_find, r->t_launch, o->t_sample, t_write);
    fprintf(f, "nodes_2d %zu\nnodes_3d %zu\nmissing %zu\nnot_found %zu\nfailed_nodes %zu\n"
            "resends %d\ncomposed %d\nunreached %zu\n", st_tree_size(t2), st_tree_size(t3),
            missing, r->nabsent, failed, o->asks, o->composed, r->nunreached);
    fprintf(f, "counts_only %d\nresult_bytes %llu\n", counts, (unsigned long long)o->bytes);
    close_file(f, path);
}

/* What the user reads: the merged tree and its classes (unless -q), the
 * summary line, where the files are, what was not reached. */
void st_print_results(const struct cli *c, const struct run *r, const char *dir,
                      st_tree_t *t2, int svg, size_t nbe, double t_sample, size_t missing)
{
    const char *exe = r->exe;
    if (!c->quiet && c->classes) {
        printf("Equivalence classes of %zu tasks on %zu host%s (last sample of %u): the\n"
               "tasks, the representative, where they end, and how to attach a debugger:\n\n",
               r->n, r->nhosts, r->nhosts == 1 ? "" : "s", c->samples);
        st_tree_write_classes_ex(t2, stdout, task_name, attach_line, (void *)r);
        printf("\n");
    } else if (!c->quiet) {
        printf("Merged stack traces of %zu tasks on %zu host%s (last sample of %u, ranks "
               "from %s):\n\n", r->n, r->nhosts, r->nhosts == 1 ? "" : "s", c->samples,
               r->ranks_from);
        st_tree_write_text(t2, stdout);
        if (st_tree_is_counts(t2)) {
            printf("\n(--counts-only: each node's count and lowest task; no equivalence "
                   "classes)\n\n");
        } else {
            printf("\nEquivalence classes (tasks with the same call paths):\n");
            st_tree_write_classes_named(t2, stdout, task_name, (void *)r);
            printf("\n");
        }
    }
    printf("%zu tasks, %zu back-ends: tree up in %.3f s, %u sample%s and merge in %.3f s%s\n",
           r->n, nbe, r->t_launch, c->samples, c->samples == 1 ? "" : "s", t_sample,
           missing ? " (some tasks not sampled: see the tree)" : "");
    if (st_tree_is_counts(t2))
        printf("results: %s/%s.{2D,3D}.{dot,json,txt%s}, %s/%s.{%shtml,tasks.txt,tasks.json,"
               "perf}\n", dir, exe, svg ? ",svg" : "", dir, exe,
               c->flags & FLAG_THREADS ? "" : "2D.folded,");
    else
        printf("results: %s/%s.{2D,3D}.{dot,json,txt,folded,classes.txt%s}, %s/%s.{html,"
               "tasks.txt,tasks.json,perf}\n", dir, exe, svg ? ",svg" : "", dir, exe);
    print_unreached(stdout, "", r);
    print_unreached(stderr, PROG ": ", r);
    if (r->incomplete)
        fprintf(stderr, PROG ": the job's tasks were not all found (see above): exit 1\n");
}
