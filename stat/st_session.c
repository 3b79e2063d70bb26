/* st_session.c - tbon_stat --session DIR (docs/stat.md, "Sessions"): the
 * tree outlives the program. start: the tasks found, the tree started and
 * the merge filter loaded, then the front-end detached (DIR/session), the
 * tasks and what the samples need written to DIR/tasks; sample: the tree
 * taken over again (tbon_fe_reattach), one sampling as a run of its own
 * (a new stream, the results written), and detached again; stop: taken
 * over and shut down, DIR emptied. */
#include "st_session.h"

#include "st_fe.h"
#include "st_plan.h"
#include "st_procs.h"

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

/* DIR/tasks: the run's executable, the merge filter's id, where the ranks
 * came from, then one line per task. */
static void write_tasks(const struct cli *c, const struct run *r, int fid)
{
    char path[PATH_MAX + 16], tmp[PATH_MAX + 32];
    in_dir(c, "tasks", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.new", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        st_die("%s: %s", tmp, strerror(errno));
    fprintf(f, "# tbon_stat session: exe filter ranks-from tasks, then id pid rank be host\n");
    fprintf(f, "%s %d %s %zu\n", r->exe, fid, r->ranks_from ? r->ranks_from : "list order",
            r->n);
    for (size_t i = 0; i < r->n; i++)
        fprintf(f, "%" PRIu32 " %" PRId32 " %" PRId32 " %" PRIu32 " %s\n", r->t[i].id,
                r->t[i].pid, r->t[i].rank, r->t[i].be, r->t[i].host);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        st_die("%s: %s", path, strerror(errno));
}

/* The same, read back into r; the filter's id. */
static int read_tasks(const struct cli *c, struct run *r)
{
    char path[PATH_MAX + 16], line[1024], from[64] = "";
    in_dir(c, "tasks", path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f)
        st_die("--session %s: no session there (%s: %s); start one with --session %s start",
               c->session, path, strerror(errno), c->session);
    int fid = -1, ok = fgets(line, sizeof line, f) && fgets(line, sizeof line, f) &&
              sscanf(line, "%255s %d %63[^0-9] %zu", r->exe, &fid, from, &r->n) == 4 &&
              r->n > 0 && r->n < (1u << 24);
    if (ok)
        r->t = st_xcalloc(r->n, sizeof *r->t);
    for (size_t i = 0; ok && i < r->n; i++) {
        char host[256];
        struct task *t = &r->t[i];
        ok = fgets(line, sizeof line, f) &&
             sscanf(line, "%" SCNu32 " %" SCNd32 " %" SCNd32 " %" SCNu32 " %255s", &t->id,
                    &t->pid, &t->rank, &t->be, host) == 5;
        if (ok) {
            t->host = st_xstrdup(host);
            t->size = -1;
            t->step = UINT32_MAX;   /* ST_STEP_NONE: no Slurm step */
        }
    }
    fclose(f);
    if (!ok)
        st_die("%s: not a tbon_stat session's tasks file", path);
    r->ranks_from = strstr(from, "environment") ? "their environment" : "list order";
    r->nhosts = 1;
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
