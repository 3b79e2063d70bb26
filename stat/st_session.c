/* st_session.c - tbon_stat --session DIR (docs/stat.md, "Sessions"): the
 * tree outlives the program. start: the tasks found, the tree started and
 * the merge filter loaded, then the front-end detached (DIR/session), the
 * tasks and what the samples need written to DIR/tasks; sample: the tree
 * taken over again (tbon_fe_reattach), one sampling as a run of its own
 * (a new stream, the results written), and detached again; stop: taken
 * over and shut down, DIR emptied. */
#include "st_session.h"

#include "st_draw.h"
#include "st_fe.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* DIR/name into buf. */
static const char *in_dir(const struct cli *c, const char *name, char *buf, size_t cap)
{
    if ((size_t)snprintf(buf, cap, "%s/%s", c->session, name) >= cap)
        st_die("--session %s: the name is too long", c->session);
    return buf;
}

/* DIR/tasks: the run's executable, the merge filter's id, the job, where
 * the ranks came from, the job's ranks no node had, then one line per task. */
static void write_tasks(const struct cli *c, const struct run *r, int fid)
{
    char path[PATH_MAX + 16], tmp[PATH_MAX + 32];
    in_dir(c, "tasks", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.new", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        st_die("%s: %s", tmp, strerror(errno));
    fprintf(f, "# tbon_stat session: then id pid rank size step be host, a task a line\n");
    fprintf(f, "exe=%s filter=%d job=%" PRIu32 " tasks=%zu absent=%zu\n", r->exe, fid, r->job,
            r->n, r->nabsent);
    fprintf(f, "ranks=%s\n", r->ranks_from ? r->ranks_from : "list order");
    for (size_t i = 0; i < r->nabsent; i++)
        fprintf(f, "%" PRIu32 "\n", r->absent[i]);
    for (size_t i = 0; i < r->n; i++)
        fprintf(f, "%" PRIu32 " %" PRId32 " %" PRId32 " %" PRId32 " %" PRIu32 " %" PRIu32 " %s\n",
                r->t[i].id, r->t[i].pid, r->t[i].rank, r->t[i].size, r->t[i].step, r->t[i].be,
                r->t[i].host);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        st_die("%s: %s", path, strerror(errno));
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The same, read back into r; the filter's id. */
static int read_tasks(const struct cli *c, struct run *r)
{
    static char ranks_from[128];
    char path[PATH_MAX + 16], line[1024];
    in_dir(c, "tasks", path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f)
        st_die("--session %s: no session there (%s: %s); start one with --session %s start",
               c->session, path, strerror(errno), c->session);
    int fid = -1, ok = fgets(line, sizeof line, f) && fgets(line, sizeof line, f) &&
              sscanf(line, "exe=%255s filter=%d job=%" SCNu32 " tasks=%zu absent=%zu", r->exe,
                     &fid, &r->job, &r->n, &r->nabsent) == 5 &&
              r->n > 0 && r->n < (1u << 24) && r->nabsent < (1u << 24) &&
              fgets(line, sizeof line, f) && strncmp(line, "ranks=", 6) == 0;
    if (ok) {
        line[strcspn(line, "\n")] = 0;
        snprintf(ranks_from, sizeof ranks_from, "%.120s", line + 6);
        r->ranks_from = ranks_from;
        r->t = st_xcalloc(r->n, sizeof *r->t);
        r->absent = r->nabsent ? st_xcalloc(r->nabsent, sizeof *r->absent) : NULL;
    }
    for (size_t i = 0; ok && i < r->nabsent; i++)
        ok = fgets(line, sizeof line, f) && sscanf(line, "%" SCNu32, &r->absent[i]) == 1;
    for (size_t i = 0; ok && i < r->n; i++) {
        char host[256];
        struct task *t = &r->t[i];
        ok = fgets(line, sizeof line, f) &&
             sscanf(line, "%" SCNu32 " %" SCNd32 " %" SCNd32 " %" SCNd32 " %" SCNu32
                    " %" SCNu32 " %255s", &t->id, &t->pid, &t->rank, &t->size, &t->step,
                    &t->be, host) == 7;
        if (ok)
            t->host = st_xstrdup(host);
    }
    fclose(f);
    if (!ok)
        st_die("%s: not a tbon_stat session's tasks file", path);
    /* how many hosts (the summary says) */
    char **h = st_xcalloc(r->n, sizeof *h);
    for (size_t i = 0; i < r->n; i++)
        h[i] = r->t[i].host;
    qsort(h, r->n, sizeof *h, by_str);
    r->nhosts = 1;
    for (size_t i = 1; i < r->n; i++)
        r->nhosts += strcmp(h[i], h[i - 1]) != 0;
    free(h);
    return fid;
}

/* Take the session's tree over, or die saying why not. */
static tbon_net_t *reattach(const struct cli *c)
{
    char path[PATH_MAX + 16];
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_fe_reattach(in_dir(c, "session", path, sizeof path), NULL, &err);
    if (!net)
        st_die("--session %s: %s%s", c->session, err.msg,
               err.code == TBON_EBUSY ? " (another tbon_stat is using it)"
               : err.code == TBON_ECLOSED ? " (its tree has ended)" : "");
    return net;
}

static int start(const struct cli *c, char *self)
{
    if (mkdir(c->session, 0700) != 0 && errno != EEXIST)
        st_die("--session %s: %s", c->session, strerror(errno));
    char path[PATH_MAX + 16];
    if (access(in_dir(c, "session", path, sizeof path), F_OK) == 0)
        st_die("--session %s: a session is there already (stop it first: --session %s stop)",
               c->session, c->session);
    struct run run = { 0 }, *r = &run;
    int fid = st_fe_plan(c, self, r);
    write_tasks(c, r, fid);
    size_t nbe = tbon_net_num_backends(r->net);
    if (tbon_fe_detach(r->net, in_dir(c, "session", path, sizeof path)) != 0)
        st_die("--session %s: cannot leave the tree running: %s", c->session,
               tbon_net_error(r->net));
    r->net = NULL;
    /* --jobid: the back-ends' srun step goes on with the tree (it ends when
     * they do, at the session's stop); its attach file is gone. */
    st_cleanup.srun = 0;
    st_cleanup.attach = NULL;
    if (r->tmpdir[0]) {
        unlink(r->topo);
        rmdir(r->tmpdir);
    }
    if (!c->quiet)
        printf(PROG ": session %s: %zu tasks of %s, %zu back-ends; sample them with\n"
               "  " PROG " --session %s sample\n", c->session, r->n, r->exe, nbe, c->session);
    st_fe_free_run(r);
    return 0;
}

static int sample(const struct cli *c)
{
    struct run run = { 0 }, *r = &run;
    int fid = read_tasks(c, r);
    double t0 = st_now();
    r->net = reattach(c);
    r->t_launch = st_now() - t0;
    char path[PATH_MAX + 16];
    return st_fe_sample(c, r, fid, in_dir(c, "session", path, sizeof path));
}

static int stop(const struct cli *c)
{
    struct run run = { 0 }, *r = &run;
    read_tasks(c, r);
    tbon_net_t *net = reattach(c);
    tbon_net_destroy(net);
    char path[PATH_MAX + 16];
    unlink(in_dir(c, "tasks", path, sizeof path));
    st_draw_forget(c->session);
    rmdir(c->session);              /* unless the user keeps more there */
    if (!c->quiet)
        printf(PROG ": session %s ended\n", c->session);
    st_fe_free_run(r);
    return 0;
}

int st_session_main(const struct cli *c, char *self)
{
    switch (c->verb) {
    case ST_SESSION_START: return start(c, self);
    case ST_SESSION_SAMPLE: return sample(c);
    default: return stop(c);
    }
}
