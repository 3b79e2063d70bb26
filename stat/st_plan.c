/* st_plan.c - tbon_stat's plan: which tasks (the command line's pids, a
 * launcher's descendants, a Slurm job's tasks), on which hosts, through
 * which tree (the default fan-out tree on this host, or one back-end per
 * host with commnodes above them), started; on other hosts every back-end
 * says which tasks it has, and the front-end numbers them. */
#include "st_plan.h"

#include "st_job.h"
#include "st_mpir.h"
#include "st_procs.h"
#include "st_proto.h"
#include "st_topo.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* --jobid: the back-ends not all attached after this long: say so. */
#define SRUN_NOTE_S 30.0

/* -P of an srun whose tasks are on the job's nodes: the job (and its step
 * into steps[0], *nsteps 1, when Slurm names it), or die saying what to
 * give instead. */
static uint32_t follow_srun(const struct cli *c, pid_t srun, uint32_t *steps, size_t *nsteps)
{
    /* Its step, by the srun's host and pid; else its job, from the
     * environment it was started with (inside an allocation). */
    char err[512] = "";
    uint32_t j = 0, sid;
    size_t len = 0;
    char *env = NULL;
    long long ej = -1;
    if (st_job_of_srun(st_this_host(), srun, &j, &sid, err, sizeof err) == 0) {
        fprintf(stderr, PROG ": -P %d: srun %d runs job %u step %u, whose tasks are on "
                "the job's nodes: sampling them there (as --jobid %u --step %u)\n",
                (int)c->launcher, (int)srun, j, sid, j, sid);
        steps[0] = sid;
        *nsteps = 1;
    } else if ((env = st_proc_environ(srun, &len)) &&
               st_env_get(env, len, "SLURM_JOB_ID") &&
               (ej = strtoll(st_env_get(env, len, "SLURM_JOB_ID"), NULL, 10)) > 0 &&
               ej < 0xfffffff0ll) {
        j = (uint32_t)ej;
        fprintf(stderr, PROG ": -P %d: srun %d runs its tasks in job %u (its "
                "SLURM_JOB_ID), whose step Slurm did not name (%s): sampling every "
                "step of the job (as --jobid %u)\n", (int)c->launcher, (int)srun, j,
                err, j);
    } else {
        st_die("-P %d: %s%s%d runs its tasks on other hosts, and %s; give the job with "
               "--jobid (squeue shows it)", (int)c->launcher,
               srun == c->launcher ? "" : "its srun ",
               srun == c->launcher ? "srun " : "", (int)srun, err);
    }
    free(env);
    return j;
}

/* The tasks the command line names (-p, --pids-file, -P, or the command
 * launched here): into tasks, or for a job into *job (and steps). 0, or
 * an error whose message is in err. */
int st_find_tasks(const struct cli *c, struct run *r, st_tasks_t *tasks, uint32_t *job,
                  uint32_t *steps, size_t *nsteps, char *err, size_t errlen)
{
    if (c->pids || c->pids_file) {
        int rc = c->pids ? st_tasks_parse_list(tasks, c->pids, err, errlen)
                         : st_tasks_read_file(tasks, c->pids_file, err, errlen);
        return rc ? rc : st_tasks_check_here(tasks, err, errlen);
    }
    if (c->launcher) {
        /* An srun's tasks are on the job's nodes: follow them there. */
        pid_t srun = 0;
        char hosts[512] = "";
        int kind = st_tasks_launcher_remote(c->launcher, &srun, hosts, sizeof hosts);
        if (kind == ST_REMOTE_SRUN) {
            *job = follow_srun(c, srun, steps, nsteps);
            return 0;
        }
        /* An MPI launcher's own table of its ranks, wherever they run. */
        char exe[256], merr[512] = "";
        int m = st_mpir_tasks(c->launcher, tasks, exe, sizeof exe, merr, sizeof merr);
        if (m == 0) {
            fprintf(stderr, PROG ": -P %d: %zu ranks from its MPIR process table%s%s%s\n",
                    (int)c->launcher, tasks->n, exe[0] ? " (" : "", exe, exe[0] ? ")" : "");
            return st_tasks_check_here(tasks, err, errlen);
        }
        if (m < 0 && kind == ST_REMOTE_SSH)
            st_die("-P %d: its tasks run on other hosts too (%s, started over ssh/rsh), and "
                   "%s", (int)c->launcher, hosts, merr);
        if (m < 0)
            fprintf(stderr, PROG ": note: -P %d: %s; sampling its descendants on this host\n",
                    (int)c->launcher, merr);
        if (kind == ST_REMOTE_SSH)
            st_die("-P %d: its tasks run on other hosts too (%s, started over ssh/rsh): -P "
                   "samples this host's only; give them as -p HOST:PID,... or run the job "
                   "under Slurm and use --jobid", (int)c->launcher, hosts);
        return st_tasks_from_launcher(tasks, c->launcher, err, errlen);
    }
    if (c->command) {
        r->launched = st_launch(c->command, c->wait_s);
        return st_tasks_from_launcher(tasks, r->launched, err, errlen);
    }
    return 0;
}

/* The tree of tbon_stat back-ends (tbon_fe_create, from a thread). */
struct start {
    const char *topo;
    const char *be_exe;         /* NULL: attach mode, through attach */
    const char *attach;
    tbon_net_t *net;
    tbon_error_t err;
    atomic_int done;
    int done_fd;                /* an eventfd written when done, or -1 */
};

static void *start_tree(void *arg)
{
    struct start *st = arg;
    const char *const be_argv[] = { "--be", NULL };
    tbon_fe_options_t o = { 0 };
    o.startup_timeout_ms = 120000;
    o.attach_file = st->attach;
    st->net = tbon_fe_create(st->topo, st->be_exe, st->be_exe ? be_argv : NULL, &o, &st->err);
    atomic_store(&st->done, 1);
    if (st->done_fd >= 0)
        eventfd_write(st->done_fd, 1);
    return NULL;
}

/* The default topology, written to a temporary file: one back-end per
 * TASKS_PER_BE tasks but at most BES_PER_CPU per CPU, fan-out
 * DEFAULT_FANOUT, every process on this host. A sample spends part of its
 * time waiting for the target to stop, so a few back-ends per CPU overlap
 * those waits; more only cost their start (on 2 CPUs, 256 tasks: 16
 * back-ends took 60-70 ms, 4 or 8 about 40-60 ms, 2 50-70 ms). */
static char *default_topology(size_t ntasks, int commnodes, char *dir_out, size_t cap)
{
    uint32_t nbe = (uint32_t)((ntasks + TASKS_PER_BE - 1) / TASKS_PER_BE);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t most = (uint32_t)(ncpu > 0 ? ncpu : 1) * BES_PER_CPU;
    if (nbe > most)
        nbe = most;
    if (nbe < 1)
        nbe = 1;
    struct st_topo t;
    st_topo_fanout_cn(&t, DEFAULT_FANOUT, nbe, commnodes);
    snprintf(dir_out, cap, "/tmp/tbon_stat.XXXXXX");
    if (!mkdtemp(dir_out))
        st_die("mkdtemp: %s", strerror(errno));
    char *path = malloc(strlen(dir_out) + 16);
    if (!path)
        st_die("out of memory");
    sprintf(path, "%s/tree.top", dir_out);
    char err[PATH_MAX + 128];
    if (st_topo_write(&t, path, PROG " default topology", err, sizeof err) != 0)
        st_die("writing %s: %s", path, err);
    st_topo_free(&t);
    return path;
}

/* -p, --pids-file, -P and -C on this host: the tasks' ranks are read here
 * while the tree (every process on this host) starts. */
void st_plan_local(const struct cli *c, const char *self, st_tasks_t *tasks, struct run *r)
{
    double t0 = st_now();
    r->topo = c->topology ? st_xstrdup(c->topology)
                          : default_topology(tasks->n, c->session != NULL, r->tmpdir,
                                             sizeof r->tmpdir);
    struct start st = { .topo = r->topo, .be_exe = self, .done_fd = -1 };
    pthread_t starter;
    bool threaded = pthread_create(&starter, NULL, start_tree, &st) == 0;
    if (!threaded)
        start_tree(&st);
    int env_ranks = st_tasks_rank(tasks);
    if (threaded)
        pthread_join(starter, NULL);
    snprintf(r->exe, sizeof r->exe, "%s", st_task_exe_name(tasks->v[0].pid));
    if (!st.net) {
        if (r->launched && !c->keep)
            st_stop_command(r->launched);
        st_die("starting the tree of %s: %s", r->topo, st.err.msg);
    }
    r->net = st.net;
    r->t_launch = st_now() - t0;
    r->ranks_from = tasks->ranks_from ? tasks->ranks_from
                    : env_ranks ? "their environment" : "list order";
    /* Back-ends that did not start: every task is on this host, the others
     * sample them all. */
    int nm = tbon_fe_missing(r->net, NULL, 0);
    if (nm > 0)
        fprintf(stderr, PROG ": note: %d process%s of the tree did not start (the library's "
                "warnings above say why); the tasks are shared among the %zu back-ends "
                "that did\n", nm, nm == 1 ? "" : "es", tbon_net_num_backends(r->net));
    size_t nbe = tbon_net_num_backends(r->net);
    tbon_rank_t *bes = st_xcalloc(nbe, sizeof *bes);
    if (tbon_net_backends(r->net, bes, nbe) != (int)nbe)
        st_die("out of memory");
    r->n = tasks->n;
    r->t = st_xcalloc(r->n, sizeof *r->t);
    for (size_t i = 0; i < r->n; i++)
        r->t[i] = (struct task){ .host = st_xstrdup(st_this_host()), .pid = tasks->v[i].pid,
                                 .rank = env_ranks ? (int32_t)tasks->v[i].rank : -1,
                                 .size = -1,
                                 .step = ST_STEP_NONE, .id = tasks->v[i].rank,
                                 .be = bes[i * nbe / r->n] };   /* blocks of ranks */
    r->nhosts = 1;
    free(bes);
}

/* A host and where it is in a list, to find the first repeat. */
struct host_at {
    const char *host;
    size_t i;
};

static int by_host_at(const void *a, const void *b)
{
    const struct host_at *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* The first i whose hosts[i] an earlier one names too, or n. */
static size_t first_repeat(char **hosts, size_t n)
{
    struct host_at *v = st_xcalloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = (struct host_at){ hosts[i], i };
    qsort(v, n, sizeof *v, by_host_at);
    size_t first = n;
    for (size_t k = 1; k < n; k++)
        if (strcmp(v[k].host, v[k - 1].host) == 0 && v[k].i < first)
            first = v[k].i;
    free(v);
    return first;
}

/* The tree for back-ends on hosts[0..n): the front-end on this host (its
 * real name, so that the other hosts reach it), each host's back-end its
 * child, or with more than DEFAULT_FANOUT hosts (or with commnodes set)
 * commnodes on this host between them. leaf[i] is hosts[i]'s rank. Written
 * to r->tmpdir. */
static void remote_topology(struct run *r, char **hosts, size_t n, tbon_rank_t *leaf,
                            int commnodes)
{
    const char *me = st_this_host();
    /* $TBON_STAT_FANOUT: a smaller fan-out, so that the tests see commnodes
     * with a few hosts. */
    size_t fanout = DEFAULT_FANOUT;
    const char *fo = getenv("TBON_STAT_FANOUT");
    if (fo && atoi(fo) >= 2 && atoi(fo) <= 1024)
        fanout = (size_t)atoi(fo);
    /* A session's tree (--session) has commnodes in any case: a back-end
     * cannot wait for a new front-end. */
    size_t ncn = n > fanout || commnodes ? (n + fanout - 1) / fanout : 0;
    if (!st_host_ok(me))
        st_die("a topology for %zu hosts: out of memory", n);
    struct st_topo t;
    st_topo_alloc(&t, 1 + ncn + n);
    for (size_t k = 0; k <= ncn; k++)       /* the front-end, the commnodes */
        t.host[k] = me, t.id[k] = (uint32_t)k, t.parent[k] = 0;
    size_t rep = first_repeat(hosts, n);
    for (size_t i = 0; i < n; i++) {
        if (!st_host_ok(hosts[i]) || i == rep)
            st_die("a topology for host \"%s\": %s", hosts[i],
                   st_host_ok(hosts[i]) ? "given twice" : "not a usable host name");
        /* A back-end on this host needs an id the front-end and commnodes
         * do not have. */
        leaf[i] = (tbon_rank_t)(1 + ncn + i);
        t.host[leaf[i]] = hosts[i];
        t.id[leaf[i]] = strcmp(hosts[i], me) == 0 ? (uint32_t)(ncn + 1) : 0;
        t.parent[leaf[i]] = ncn ? (uint32_t)(1 + i * ncn / n) : 0;
    }
    snprintf(r->tmpdir, sizeof r->tmpdir, "/tmp/tbon_stat.XXXXXX");
    if (!mkdtemp(r->tmpdir))
        st_die("mkdtemp: %s", strerror(errno));
    r->topo = malloc(strlen(r->tmpdir) + 16);
    if (!r->topo)
        st_die("out of memory");
    sprintf(r->topo, "%s/tree.top", r->tmpdir);
    st_cleanup.topo = r->topo;
    st_cleanup.topodir = r->tmpdir;
    char err[PATH_MAX + 128];
    if (st_topo_write(&t, r->topo, PROG " tree over hosts", err, sizeof err) != 0)
        st_die("writing %s: %s", r->topo, err);
    st_topo_free(&t);
}

static int by_step_rank_host(const void *a, const void *b)
{
    const struct task *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    int h = strcmp(x->host, y->host);
    return h ? h : (x->pid > y->pid) - (x->pid < y->pid);
}

/* Give every task its number in the trees. With one Slurm step, or pids
 * given one by one: the ranks from the environments when every task has one
 * and no two share it; with several steps, (step, rank) order. Ranks of a
 * step that no node had (the environments say how many there are) become
 * r->absent. Reports on stderr what is odd. */
static void number_tasks(struct run *r, bool job_mode)
{
    /* Listed pids are one set of tasks, whatever steps they are of. */
    if (!job_mode)
        for (size_t i = 0; i < r->n; i++)
            r->t[i].step = ST_STEP_NONE;
    qsort(r->t, r->n, sizeof *r->t, by_step_rank_host);
    size_t nsteps = 0, dups = 0, norank = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (i == 0 || r->t[i].step != r->t[i - 1].step)
            nsteps++;
        if (r->t[i].rank < 0) {
            norank++;
        } else if (i > 0 && r->t[i].step == r->t[i - 1].step &&
                   r->t[i].rank == r->t[i - 1].rank) {
            if (dups++ < 10)
                fprintf(stderr, PROG ": two tasks have rank %d%s: %s:%d and %s:%d\n",
                        r->t[i].rank, job_mode ? " in one step" : "", r->t[i - 1].host,
                        r->t[i - 1].pid, r->t[i].host, r->t[i].pid);
        }
    }
    bool by_rank = nsteps == 1 && dups == 0 && norank == 0;
    if (dups > 10)
        fprintf(stderr, PROG ": ... %zu tasks in all share a rank with another\n", dups);
    if (norank && job_mode)
        fprintf(stderr, PROG ": %zu tasks have no rank in their environment\n", norank);
    if (by_rank) {
        r->ranks_from = "their environment";
        for (size_t i = 0; i < r->n; i++)
            r->t[i].id = (uint32_t)r->t[i].rank;
    } else {
        r->ranks_from = nsteps > 1 ? "(step, rank) order: see the tasks file"
                                   : "position (not every task has a rank of its own)";
        if (nsteps > 1)
            fprintf(stderr, PROG ": tasks of %zu steps: numbered in (step, rank) order; "
                    "%s.tasks.txt maps the numbers to steps and ranks\n", nsteps, r->exe);
        for (size_t i = 0; i < r->n; i++)
            r->t[i].id = (uint32_t)i;
    }
    if (!job_mode)
        return;
    /* Ranks the job has and no node had: per step, 0 .. size-1. */
    for (size_t i = 0; i < r->n;) {
        size_t j = i;
        int32_t size = -1;
        while (j < r->n && r->t[j].step == r->t[i].step) {
            if (r->t[j].size > size)
                size = r->t[j].size;
            j++;
        }
        size_t k = i, missing = 0;
        char list[200] = "";
        for (int32_t want = 0; size > 0 && want < size; want++) {
            while (k < j && r->t[k].rank < want)
                k++;
            if (k < j && r->t[k].rank == want)
                continue;
            missing++;
            size_t l = strlen(list);
            if (l < sizeof list - 16)
                snprintf(list + l, sizeof list - l, "%s%d", l ? "," : "", want);
            else if (!strstr(list, "..."))
                strcat(list, ",...");
            if (by_rank) {
                uint32_t *na = realloc(r->absent, (r->nabsent + 1) * sizeof *na);
                if (!na)
                    st_die("out of memory");
                r->absent = na;
                r->absent[r->nabsent++] = (uint32_t)want;
            }
        }
        if (missing) {
            fprintf(stderr, PROG ": job %u step %u has %d tasks; %zu not found on any of its "
                    "nodes: rank%s %s\n", r->job, r->t[i].step, size, missing,
                    missing == 1 ? "" : "s", list);
            r->incomplete = 1;
        }
        i = j;
    }
    if (dups || norank)
        r->incomplete = 1;          /* a job's tasks all have a rank of their own */
}

/* A task (pid 0: every task of the job on host) whose back-end did not
 * start. */
static void note_unreached(struct run *r, const char *host, int32_t pid)
{
    char **v = realloc(r->unreached, (r->nunreached + 1) * sizeof *v);
    char buf[300];
    if (!v)
        st_die("out of memory");
    r->unreached = v;
    if (pid)
        snprintf(buf, sizeof buf, "%s:%d", host, (int)pid);
    else
        snprintf(buf, sizeof buf, "%s", host);
    v[r->nunreached++] = st_xstrdup(buf);
}

/* The hosts to reach: the job's nodes, or those the tasks name. */
static char **remote_hosts(st_tasks_t *tasks, uint32_t job, size_t *nhp)
{
    char err[512];
    char **hosts = NULL;
    size_t nh = 0;
    if (job) {
        if (st_job_nodes(job, &hosts, &nh, err, sizeof err) != 0)
            st_die("%s", err);
    } else {
        hosts = st_xcalloc(tasks->n, sizeof *hosts);
        for (size_t i = 0; i < tasks->n; i++) {
            const char *h = tasks->v[i].host ? tasks->v[i].host : st_this_host();
            size_t k = 0;
            while (k < nh && strcmp(hosts[k], h) != 0)
                k++;
            if (k == nh)
                hosts[nh++] = st_xstrdup(h);
        }
    }
    *nhp = nh;
    return hosts;
}

/* Under --jobid: wait while the tree starts (the starter thread, st) for
 * the back-ends' srun step ending first, an interrupt, or Slurm holding
 * the step back (said once). Blocks on the step's pidfd and the starter's
 * eventfd. */
static void wait_srun_start(struct run *r, struct start *st, uint32_t job)
{
    /* The step's end before every back-end attached is a failure (its
     * messages are above); tbon_fe_create cannot see it. Slurm may also
     * hold the step back (srun retries quietly while the nodes are busy):
     * the user hears of it. */
    double note_at = st_now() + SRUN_NOTE_S;
    int noted = 0;
    while (!atomic_load(&st->done)) {
        int status, ms = noted ? -1 : st_ms_until(note_at);
        if (st->done_fd < 0 && (ms < 0 || ms > 100))
            ms = 100;       /* no eventfd: look at done every 100 ms */
        if (st_wait_child(r->srun, st->done_fd, ms, &status)) {
            st_cleanup.srun = 0;
            st_die("--jobid %u: the back-ends' srun step ended (%s %d) before every back-end "
                   "attached; srun's and the back-ends' messages are above", job,
                   WIFEXITED(status) ? "status" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        }
        if (st_interrupted)
            st_die("interrupted while the tree started");
        if (!noted && st_now() >= note_at) {
            fprintf(stderr, PROG ": note: job %u: not every back-end has attached after "
                    "%.0f s; Slurm may be holding their srun step back (`squeue -s -j %u` "
                    "shows it)\n", job, SRUN_NOTE_S, job);
            noted = 1;
        }
    }
}

/* Start the tree of one back-end per host (leaf[k]: host k's rank): over
 * ssh for pids, as one srun step of the job with --jobid (its attach file
 * in -o's directory, which the nodes must share). r->net, or die. */
static void start_remote(const struct cli *c, const char *self, struct run *r, uint32_t job,
                         char **hosts, size_t nh, const tbon_rank_t *leaf)
{
    struct start st = { .topo = r->topo, .be_exe = job ? NULL : self, .done_fd = -1 };
    pthread_t starter;
    if (job) {
        char *dir = realpath(c->outdir, NULL);
        if (!dir)
            st_die("-o %s: %s", c->outdir, strerror(errno));
        r->attach = malloc(strlen(dir) + 64);
        if (!r->attach)
            st_die("out of memory");
        sprintf(r->attach, "%s/.tbon_stat.%s.%d.attach", dir, st_this_host(), (int)getpid());
        free(dir);
        st.attach = r->attach;
        st_cleanup.attach = r->attach;
    }
    st.done_fd = job ? eventfd(0, EFD_CLOEXEC) : -1;
    int prc = pthread_create(&starter, NULL, start_tree, &st);
    if (prc != 0)
        st_die("pthread_create: %s", strerror(prc));
    if (job) {
        r->srun = st_cleanup.srun = st_start_srun(job, hosts, nh, leaf, self, r->attach);
        wait_srun_start(r, &st, job);
    }
    pthread_join(starter, NULL);
    if (st.done_fd >= 0)
        close(st.done_fd);
    if (!st.net)
        st_die("starting the tree of %s: %s", r->topo, st.err.msg);
    r->net = st.net;
}

/* Hosts whose back-end did not start (left out of the start-up, the
 * library's warnings above say why): their tasks cannot be reached (the
 * others' are sampled, exit 3). down[k] marks them; their number. */
static size_t note_down(struct run *r, st_tasks_t *tasks, uint32_t job, char **hosts,
                        size_t nh, const tbon_rank_t *leaf, uint8_t *down)
{
    size_t ndown = 0;
    int nm = tbon_fe_missing(r->net, NULL, 0);
    if (nm > 0) {
        tbon_rank_t *m = st_xcalloc((size_t)nm, sizeof *m);
        nm = tbon_fe_missing(r->net, m, (size_t)nm);
        for (size_t k = 0; k < nh; k++)
            for (int j = 0; j < nm && !down[k]; j++)
                if (m[j] == leaf[k]) {
                    down[k] = 1;
                    ndown++;
                }
        free(m);
    }
    for (size_t k = 0; k < nh && job; k++)
        if (down[k])
            note_unreached(r, hosts[k], 0);
    for (size_t i = 0; i < tasks->n && !job && ndown; i++) {
        const char *h = tasks->v[i].host ? tasks->v[i].host : st_this_host();
        for (size_t k = 0; k < nh; k++)
            if (down[k] && strcmp(hosts[k], h) == 0)
                note_unreached(r, h, tasks->v[i].pid);
    }
    return ndown;
}

/* Ask every back-end which tasks it has: the job's (steps), or the pids
 * of tasks, each to the back-end of its host. The stream of the answers. */
static tbon_stream_t *ask_discover(struct run *r, st_tasks_t *tasks, uint32_t job,
                                   const uint32_t *steps, size_t nsteps, char **hosts,
                                   const tbon_rank_t *leaf)
{
    size_t nw = job ? 0 : tasks->n;
    int32_t *want = st_xcalloc(nw, sizeof *want);
    uint32_t *owner = st_xcalloc(nw, sizeof *owner);
    for (size_t i = 0; i < nw; i++) {
        const char *h = tasks->v[i].host ? tasks->v[i].host : st_this_host();
        size_t k = 0;
        while (strcmp(hosts[k], h) != 0)
            k++;
        want[i] = tasks->v[i].pid;
        owner[i] = leaf[k];
    }
    tbon_stream_t *s = tbon_fe_stream_new(r->net, tbon_fe_broadcast_comm(r->net),
                                          TBON_FILTER_NULL, TBON_SYNC_DONTWAIT,
                                          TBON_FILTER_NULL);
    if (!s || tbon_stream_send(s, TAG_DISCOVER, FMT_DISCOVER, job, steps, nsteps, want, nw,
                               owner, nw) != 0)
        st_die("asking the back-ends for their tasks: %s", tbon_net_error(r->net));
    free(want);
    free(owner);
    return s;
}

/* One back-end's answer p (FMT_FOUND, taken): its tasks into r->t, those
 * gone counted in *gone and the first named in goners. */
static void take_found(struct run *r, tbon_packet_t *p, char **hosts, size_t nh,
                       const tbon_rank_t *leaf, size_t *gone, char *goners, size_t glen)
{
    uint32_t be = 0, *tsteps = NULL, *states = NULL;
    int32_t *pids = NULL, *ranks = NULL, *sizes = NULL;
    size_t a = 0, b = 0, cc = 0, d = 0, e = 0;
    char *exe = NULL, *note = NULL;
    if (tbon_packet_unpack(p, FMT_FOUND, &be, &pids, &a, &ranks, &b, &sizes, &cc, &tsteps,
                           &d, &states, &e, &exe, &note) != 0 || a != b || a != cc ||
        a != d || a != e)
        st_die("a back-end's list of tasks of format \"%s\"", tbon_packet_format(p));
    tbon_packet_unref(p);
    size_t k = 0;
    while (k < nh && leaf[k] != be)
        k++;
    if (k == nh)
        st_die("a list of tasks from rank %u, which is no back-end", be);
    if (note[0])
        fprintf(stderr, PROG ": note: %s: %s\n", hosts[k], note);
    if (strcmp(r->exe, "?") == 0)
        snprintf(r->exe, sizeof r->exe, "%s", exe);
    struct task *nt = a ? realloc(r->t, (r->n + a) * sizeof *nt) : r->t;
    if (a && !nt)
        st_die("out of memory");
    r->t = nt;
    for (size_t i = 0; i < a; i++) {
        if (states[i] == FOUND_GONE) {
            size_t l = strlen(goners);
            if ((*gone)++ < 8)
                snprintf(goners + l, glen - l, "%s%s:%d", l ? ", " : "", hosts[k], pids[i]);
            continue;
        }
        r->t[r->n++] = (struct task){ .host = st_xstrdup(hosts[k]), .pid = pids[i],
                                      .rank = ranks[i], .size = sizes[i],
                                      .step = tsteps[i], .be = be };
    }
    free(pids);
    free(ranks);
    free(sizes);
    free(tsteps);
    free(states);
    free(exe);
    free(note);
}

/* Nothing to sample (a task gone, or no task of the job found): the tree
 * and the step end, and so does the run (EXIT_RUN). */
static void end_empty(struct run *r)
{
    tbon_net_destroy(r->net);
    r->net = NULL;
    if (r->srun)
        st_stop_srun(r->srun, 10);
    st_cleanup.srun = 0;
    if (r->tmpdir[0]) {
        unlink(r->topo);
        rmdir(r->tmpdir);
    }
    exit(EXIT_RUN);
}

/* Tasks on other hosts (-p/--pids-file with HOST:PID) or a Slurm job's
 * (--jobid, or -P of an srun): a back-end on each host (over ssh for pids,
 * as one srun step of the job with --jobid) finds its tasks and their ranks
 * there, then the front-end numbers them. */
void st_plan_remote(const struct cli *c, const char *self, st_tasks_t *tasks,
                    uint32_t job, const uint32_t *steps, size_t nsteps, struct run *r)
{
    double t0 = st_now();
    size_t nh;
    char **hosts = remote_hosts(tasks, job, &nh);
    r->job = job;
    r->nhosts = nh;
    tbon_rank_t *leaf = st_xcalloc(nh, sizeof *leaf);
    if (c->topology)
        fprintf(stderr, PROG ": note: -t is not used for tasks on other hosts: the tree has "
                "one back-end per host\n");
    remote_topology(r, hosts, nh, leaf, c->session != NULL);
    start_remote(c, self, r, job, hosts, nh, leaf);
    r->t_launch = st_now() - t0;
    uint8_t *down = st_xcalloc(nh, 1);
    size_t ndown = note_down(r, tasks, job, hosts, nh, leaf, down);

    /* Discovery: every back-end says what it has. */
    tbon_stream_t *s = ask_discover(r, tasks, job, steps, nsteps, hosts, leaf);
    size_t got = 0, gone = 0;
    double dl = st_now() + 60;
    char goners[400] = "";
    snprintf(r->exe, sizeof r->exe, "?");
    while (got < nh - ndown && !st_interrupted) {
        tbon_packet_t *p = NULL;
        int rc = tbon_stream_recv(s, &p, 200);
        if ((rc == TBON_ETIMEOUT || rc == TBON_ELOST) && st_now() < dl)
            continue;       /* lost: the back-ends that answered failed since */
        if (rc != 0)
            st_die("%zu of %zu back-ends said which tasks they have: %s", got, nh - ndown,
                   rc == TBON_ETIMEOUT ? "timed out" : tbon_net_error(r->net));
        take_found(r, p, hosts, nh, leaf, &gone, goners, sizeof goners);
        got++;
    }
    if (st_interrupted)
        st_die("interrupted");
    r->t_find = st_now() - t0 - r->t_launch;
    if (gone)
        fprintf(stderr, PROG ": no such process: %s%s (nothing was sampled)\n", goners,
                gone > 8 ? ", ..." : "");
    if (job && r->n == 0) {
        fprintf(stderr, PROG ": job %u: no task found on its %zu node%s%s\n", job, nh,
                nh == 1 ? "" : "s", nsteps ? " in the steps asked for (--step)" :
                " (steps other than the batch and extern steps, and other than " PROG "'s)");
    }
    if (gone || r->n == 0)
        end_empty(r);
    number_tasks(r, job != 0);
    st_job_free_nodes(hosts, nh);
    free(leaf);
    free(down);
}
