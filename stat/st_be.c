/* st_be.c - tbon_stat's back-end side: a back-end joins the tree (launched
 * by it, or attached as a step of a Slurm job), says which tasks it has
 * (TAG_DISCOVER), samples its share of them (st_walker) into a 2D tree (the
 * last sample) and a 3D tree (all samples) and sends both up (TAG_SAMPLE),
 * again on TAG_RESEND, until the front-end closes the tree. */
#include "st_be.h"

#include "st_job.h"
#include "st_prog.h"
#include "st_proto.h"
#include "st_ptree.h"
#include "st_tasks.h"
#include "st_walker.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ATTACH_WAIT_S 60.0  /* --be-attach: for the front-end's attach file */

/* A walker for the request's flags (NULL when out of memory). */
static st_walker_t *be_walker(unsigned flags)
{
    return st_walker_new((flags & FLAG_THREADS ? ST_WALK_THREADS : 0) |
                         (flags & FLAG_LINES ? ST_WALK_LINES : 0) |
                         (flags & FLAG_MODULES ? ST_WALK_MODULES : 0));
}

/* Whether the session has ended under us (the front-end gone): the
 * library ends no process, so a back-end busy sampling asks between
 * samples (the kicker thread has run the node meanwhile). */
static int session_over(tbon_net_t *net)
{
    tbon_event_t ev;
    int rc;
    while ((rc = tbon_net_next_event(net, &ev, 0)) == 0)
        ;
    return rc == TBON_ECLOSED;
}

/* Sample the tasks given to rank me with w: n samples, interval ms apart;
 * the 2D tree has the last one, the 3D tree all of them. TBON_ECLOSED if
 * the session ends meanwhile. */
static int be_sample(tbon_net_t *net, st_walker_t *w, const int32_t *pids,
                     const uint32_t *ranks, const uint32_t *owner, size_t nt, tbon_rank_t me,
                     unsigned n, unsigned interval, st_tree_t *t2, st_tree_t *t3)
{
    int rc = 0;
    for (unsigned s = 0; s < n && rc == 0; s++) {
        if (session_over(net))
            return TBON_ECLOSED;
        if (s > 0 && interval) {
            struct timespec ts = { interval / 1000, (long)(interval % 1000) * 1000000L };
            nanosleep(&ts, NULL);
        }
        size_t i = 0;
        while (i < nt && owner[i] != me)
            i++;
        for (size_t next; i < nt && rc == 0; i = next) {
            next = i + 1;
            while (next < nt && owner[next] != me)
                next++;
            st_stack_t *st = NULL;
            size_t ns = 0;
            /* The next task starts stopping as soon as this one runs again. */
            if (st_sample_then(w, (pid_t)pids[i], next < nt ? (pid_t)pids[next] : 0, &st,
                               &ns) < 0) {
                rc = TBON_ENOMEM;
                break;
            }
            for (size_t k = 0; k < ns && rc == 0; k++) {
                /* A runaway recursion keeps its outermost ST_MAX_DEPTH frames
                 * (what a tree can hold): where it started is what tells. */
                const char *const *fr = (const char *const *)st[k].frames;
                size_t depth = st[k].n < ST_MAX_DEPTH ? st[k].n : ST_MAX_DEPTH;
                rc = st_tree_add(t3, fr, depth, ranks[i]);
                if (rc == 0 && s + 1 == n)
                    rc = st_tree_add(t2, fr, depth, ranks[i]);
            }
            st_stacks_free(st, ns);
        }
    }
    return rc;
}

/* Send t2 and t3 with tag; with FLAG_COUNTS as counts-only trees of the
 * request's round (copies: the back-end keeps its sets for a later ask). */
static int be_send(tbon_stream_t *s, int tag, const st_tree_t *t2, const st_tree_t *t3,
                   uint32_t flags, uint32_t round)
{
    uint8_t *b2 = NULL, *b3 = NULL;
    size_t l2 = 0, l3 = 0;
    st_tree_t *c2 = NULL, *c3 = NULL;
    int rc = 0;
    if (flags & FLAG_COUNTS) {
        c2 = st_tree_new();
        c3 = st_tree_new();
        rc = c2 && c3 ? 0 : TBON_ENOMEM;
        if (rc == 0)
            rc = st_tree_merge(c2, t2);
        if (rc == 0)
            rc = st_tree_merge(c3, t3);
        if (rc == 0)
            rc = st_tree_to_counts(c2, round);
        if (rc == 0)
            rc = st_tree_to_counts(c3, round);
        t2 = c2;
        t3 = c3;
    }
    if (rc == 0)
        rc = st_tree_encode(t2, &b2, &l2);
    if (rc == 0)
        rc = st_tree_encode(t3, &b3, &l3);
    if (rc == 0)
        rc = tbon_stream_send(s, tag, FMT_TREES, b2, l2, b3, l3);
    free(b2);
    free(b3);
    st_tree_free(c2);
    st_tree_free(c3);
    return rc;
}

/* The flags and round of a request (TAG_SAMPLE or TAG_RESEND): 0, or
 * TBON_EFORMAT after saying so. */
static int req_mode(tbon_packet_t *p, tbon_rank_t me, uint32_t *flags, uint32_t *round)
{
    int32_t *pids = NULL;
    uint32_t *ranks = NULL, *owner = NULL, n, interval;
    size_t np = 0, nr = 0, no = 0;
    int rc = tbon_packet_unpack(p, FMT_REQ, &pids, &np, &ranks, &nr, &owner, &no, &n, &interval,
                                flags, round);
    free(pids);
    free(ranks);
    free(owner);
    if (rc != 0)
        fprintf(stderr, PROG " --be: rank %u: malformed request (\"%s\")\n", me,
                tbon_packet_format(p));
    return rc ? TBON_EFORMAT : 0;
}

/* For the tests only: $TBON_STAT_TEST_HOLD = "RANK:DIR". Every back-end
 * writes DIR/sent.ITS_RANK once its result is written to its parent's
 * connection (flushed: a result still queued in the library when the
 * parent dies goes to the adopter, and is not lost); back-end RANK writes
 * DIR/held and holds its result back until DIR/go exists (60 s at most).
 * A test then kills RANK's commnode after its siblings' results went to it
 * and before this one did (the packets die with it, and the front-end must
 * ask again) - on conditions, however slow the machine. */
static void test_mark(const char *dir, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
}

static void test_hold(tbon_stream_t *s, tbon_rank_t me, int sent)
{
    const char *v = getenv("TBON_STAT_TEST_HOLD");
    unsigned r;
    int off = 0;
    if (!v || sscanf(v, "%u:%n", &r, &off) != 1 || off == 0)
        return;
    const char *dir = v + off;
    if (sent) {
        tbon_stream_flush(s);
        char name[32];
        snprintf(name, sizeof name, "sent.%u", me);
        test_mark(dir, name);
        return;
    }
    if (r != me)
        return;
    test_mark(dir, "held");
    char go[PATH_MAX];
    snprintf(go, sizeof go, "%s/go", dir);
    for (int i = 0; i < 6000 && access(go, F_OK) != 0; i++) {
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
}

/* The open-file limit up to the hard limit (at most 65,536): the walker
 * keeps each task's state (a few open files) for the next sample, up to
 * RLIMIT_NOFILE / 16 tasks, and a common soft limit of 1,024 would keep 64. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
        if (want > rl.rlim_cur) {
            rl.rlim_cur = want;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
}

/* The executable's base name of the first of pids that has one ("?"). */
static void exe_of_first(const int32_t *pids, size_t n, char *out, size_t cap)
{
    snprintf(out, cap, "?");
    for (size_t i = 0; i < n; i++) {
        const char *e = st_task_exe_name((pid_t)pids[i]);
        if (strcmp(e, "?") != 0) {
            snprintf(out, cap, "%s", e);
            return;
        }
    }
}

/* What a back-end found (TAG_DISCOVER's answer), a column per field. */
struct found {
    int32_t *pids, *ranks, *sizes;
    uint32_t *tsteps, *states;
    size_t n;
};

/* Room for cap tasks (states zeroed): 0, or TBON_ENOMEM. */
static int found_alloc(struct found *f, size_t cap)
{
    size_t c = cap ? cap : 1;
    f->pids = malloc(c * sizeof *f->pids);
    f->ranks = malloc(c * sizeof *f->ranks);
    f->sizes = malloc(c * sizeof *f->sizes);
    f->tsteps = malloc(c * sizeof *f->tsteps);
    f->states = calloc(c, sizeof *f->states);
    f->n = 0;
    return f->pids && f->ranks && f->sizes && f->tsteps && f->states ? 0 : TBON_ENOMEM;
}

static void found_free(struct found *f)
{
    free(f->pids);
    free(f->ranks);
    free(f->sizes);
    free(f->tsteps);
    free(f->states);
}

/* The tasks of job on this node (steps[0..nsteps) or all, never this
 * back-end's own step). A trouble that leaves tasks unknown goes in note. */
static int found_job(struct found *f, uint32_t job, const uint32_t *steps, size_t nsteps,
                     const char *self, char *note, size_t notelen)
{
    char err[512] = "";
    pid_t *allowed = NULL;
    size_t nallowed = 0, n = 0;
    if (st_job_listpids(job, &allowed, &nallowed, err, sizeof err) != 0) {
        snprintf(note, notelen, "%s; tasks taken from their environment alone", err);
        allowed = NULL;
    }
    /* This back-end's own step is never a target. */
    const char *mj = getenv("SLURM_JOB_ID"), *ms = getenv("SLURM_STEP_ID");
    uint32_t skip = ST_STEP_NONE;
    if (mj && ms && strtoul(mj, NULL, 10) == job)
        skip = (uint32_t)strtoul(ms, NULL, 10);
    st_jtask_t *jt = NULL;
    int rc = st_job_scan(job, steps, nsteps, skip, note[0] ? NULL : allowed,
                         note[0] ? 0 : nallowed, self, &jt, &n, err, sizeof err);
    free(allowed);
    if (rc != 0) {
        snprintf(note, notelen, "%s", err);
        n = 0;
    }
    rc = found_alloc(f, n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        f->pids[i] = jt[i].pid;
        f->ranks[i] = jt[i].rank;
        f->sizes[i] = jt[i].size;
        f->tsteps[i] = jt[i].step;
    }
    f->n = rc == 0 ? n : 0;
    free(jt);
    return rc;
}

/* The pids of want[] whose owner is me: each one's rank and size from its
 * environment, and whether it is gone. */
static int found_pids(struct found *f, const int32_t *want, const uint32_t *owner,
                      size_t nwant, tbon_rank_t me)
{
    size_t cnt = 0;
    for (size_t i = 0; i < nwant; i++)
        cnt += owner[i] == me;
    if (found_alloc(f, cnt) != 0)
        return TBON_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < nwant; i++) {
        if (owner[i] != me)
            continue;
        size_t len = 0;
        char *env = st_proc_environ((pid_t)want[i], &len);
        f->pids[n] = want[i];
        f->ranks[n] = f->sizes[n] = -1;
        f->tsteps[n] = ST_STEP_NONE;
        if (env) {
            st_env_rank(env, len, &f->ranks[n], &f->sizes[n]);
            const char *sid = st_env_get(env, len, "SLURM_STEP_ID");
            if (sid)
                f->tsteps[n] = (uint32_t)strtoul(sid, NULL, 10);
            free(env);
        }
        /* Gone, or a zombie (no environment, no stack): not there. */
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/exe", (int)want[i]);
        struct stat sb;
        if (kill((pid_t)want[i], 0) != 0 && errno == ESRCH)
            f->states[n] = FOUND_GONE;
        else if (stat(path, &sb) != 0 && errno == ENOENT)
            f->states[n] = FOUND_GONE;
        n++;
    }
    f->n = n;
    return 0;
}

/* TAG_DISCOVER: which tasks are here. With a job id, the job's tasks on this
 * node (steps[] or all, never this back-end's own step); without, the state
 * of the pids owned by me. The answer (FMT_FOUND) names me, so that the
 * front-end knows the host. */
static int be_discover(tbon_stream_t *s, tbon_packet_t *p, tbon_rank_t me, const char *self)
{
    uint32_t job = 0, *steps = NULL, *owner = NULL;
    int32_t *want = NULL;
    size_t nsteps = 0, nwant = 0, nowner = 0;
    if (tbon_packet_unpack(p, FMT_DISCOVER, &job, &steps, &nsteps, &want, &nwant, &owner,
                           &nowner) != 0 || nwant != nowner) {
        fprintf(stderr, PROG " --be: rank %u: malformed discovery (\"%s\")\n", me,
                tbon_packet_format(p));
        return TBON_EFORMAT;
    }
    char note[600] = "";
    struct found f = { 0 };
    int rc = job ? found_job(&f, job, steps, nsteps, self, note, sizeof note)
                 : found_pids(&f, want, owner, nwant, me);
    char exe[NAME_MAX + 1];
    exe_of_first(f.pids, rc == 0 ? f.n : 0, exe, sizeof exe);
    size_t n = f.n;
    if (rc == 0)
        rc = tbon_stream_send(s, TAG_DISCOVER, FMT_FOUND, (uint32_t)me, f.pids, n, f.ranks, n,
                              f.sizes, n, f.tsteps, n, f.states, n, exe, note);
    found_free(&f);
    free(steps);
    free(want);
    free(owner);
    return rc;
}

/* Sample what the request p names (TAG_SAMPLE, or an ask again that
 * carries it) into fresh trees and send them with tag. */
static int be_sample_req(tbon_net_t *net, tbon_stream_t *s, tbon_packet_t *p, tbon_rank_t me,
                         int tag, st_tree_t **t2, st_tree_t **t3, st_walker_t **kw,
                         unsigned *kflags)
{
    int32_t *pids = NULL;
    uint32_t *ranks = NULL, *owner = NULL, n, interval, flags, round;
    size_t np = 0, nr = 0, no = 0;
    int rc;
    if (tbon_packet_unpack(p, FMT_REQ, &pids, &np, &ranks, &nr, &owner, &no, &n, &interval,
                           &flags, &round) != 0 || np != nr || np != no) {
        fprintf(stderr, PROG " --be: rank %u: malformed request (\"%s\")\n", me,
                tbon_packet_format(p));
        rc = TBON_EFORMAT;
    } else {
        st_tree_free(*t2);
        st_tree_free(*t3);
        *t2 = st_tree_new();
        *t3 = st_tree_new();
        /* The walker stays between requests (a session samples many
         * times): what it learned of each process (its modules, their
         * symbols) is not learned again. A request of other flags gets a
         * new one. No target is held stopped between samples. */
        if (*kw && *kflags != (flags & ~FLAG_COUNTS)) {
            st_walker_free(*kw);
            *kw = NULL;
        }
        if (!*kw && *t2 && *t3) {
            *kw = be_walker(flags);
            *kflags = flags & ~FLAG_COUNTS;
        }
        st_walker_t *w = *t2 && *t3 ? *kw : NULL;
        rc = w ? be_sample(net, w, pids, ranks, owner, np, me, n, interval, *t2, *t3)
               : TBON_ENOMEM;
        test_hold(s, me, 0);
        if (rc == 0)
            rc = be_send(s, tag, *t2, *t3, flags, round);
        test_hold(s, me, 1);
    }
    free(pids);
    free(ranks);
    free(owner);
    return rc;
}

/* The back-end's requests until the front-end closes the tree. An ask again
 * (TAG_RESEND) carries the request: a back-end that sampled sends what it
 * has (the merge is idempotent); one the request never reached (its
 * commnode died before passing it on, and the adopter's wave was closed by
 * then) samples now. */
static int be_loop(tbon_net_t *net, const char *self)
{
    tbon_rank_t me = tbon_net_rank(net);
    st_tree_t *t2 = st_tree_new(), *t3 = st_tree_new();
    st_walker_t *w = NULL;
    unsigned wflags = 0;
    int rc = t2 && t3 ? 0 : TBON_ENOMEM, sampled = 0;
    while (rc == 0) {
        tbon_packet_t *p = NULL;
        tbon_stream_t *s = NULL;
        rc = tbon_net_recv(net, &p, &s, -1);
        if (rc != 0)
            break;
        int tag = tbon_packet_tag(p);
        if (tag == TAG_DISCOVER) {
            rc = be_discover(s, p, me, self);
        } else if (tag == TAG_SAMPLE || (tag == TAG_RESEND && !sampled)) {
            rc = be_sample_req(net, s, p, me, tag, &t2, &t3, &w, &wflags);
            sampled = rc == 0;
        } else if (tag == TAG_RESEND) {
            uint32_t flags, round;
            rc = req_mode(p, me, &flags, &round);
            if (rc == 0)
                rc = be_send(s, TAG_RESEND, t2, t3, flags, round);
        }
        tbon_packet_unref(p);
    }
    st_walker_free(w);
    st_tree_free(t2);
    st_tree_free(t3);
    if (rc != TBON_ECLOSED)
        fprintf(stderr, PROG " --be: rank %u: %s (%s)\n", me, tbon_strerror(rc),
                tbon_net_error(net));
    tbon_net_destroy(net);
    return rc == TBON_ECLOSED ? 0 : EXIT_RUN;
}

/* A back-end the tree launched: "tbon_stat --be <the tree's arguments>". */
int st_be_main(int argc, char **argv)
{
    raise_nofile();
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_be_create(&argc, &argv, &err);
    if (!net) {
        fprintf(stderr, PROG " --be: %s\n", err.msg);
        return EXIT_RUN;
    }
    char self[PATH_MAX];
    st_self_exe(self, sizeof self);
    return be_loop(net, self);
}

/* A back-end of --jobid, one per node in an srun step of the job:
 * "tbon_stat --be-attach FILE NODE=RANK,NODE=RANK,...". It takes the rank of
 * its node (SLURMD_NODENAME, else its host name), waits for the front-end's
 * attach file and attaches. */
int st_be_attach_main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, PROG " --be-attach: expected FILE NODE=RANK,... (it is started by "
                PROG " --jobid)\n");
        return EXIT_USAGE;
    }
    raise_nofile();
    const char *file = argv[2], *map = argv[3];
    char node[256] = "";
    const char *env = getenv("SLURMD_NODENAME");
    if (env && *env)
        snprintf(node, sizeof node, "%s", env);
    else if (gethostname(node, sizeof node - 1) != 0)
        node[0] = '\0';
    size_t nl = strlen(node);
    tbon_rank_t rank = TBON_RANK_NONE;
    for (const char *m = map; *m && rank == TBON_RANK_NONE;) {
        size_t len = strcspn(m, ",");
        const char *eq = memchr(m, '=', len);
        if (eq && (size_t)(eq - m) == nl && strncmp(m, node, nl) == 0)
            rank = (tbon_rank_t)strtoul(eq + 1, NULL, 10);
        m += len + (m[len] == ',');
    }
    if (rank == TBON_RANK_NONE) {
        fprintf(stderr, PROG " --be-attach: node \"%s\" has no place in the tree (%s)\n", node,
                map);
        return EXIT_RUN;
    }
    /* The front-end writes the file (atomically) while this step starts,
     * into a directory this node must share. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    struct stat sb;
    if (slash && dir[0] && stat(dir, &sb) != 0) {
        fprintf(stderr, PROG " --be-attach: on %s: %s: %s: -o's directory must be on a file "
                "system this node shares with the front-end's host\n", node, dir,
                strerror(errno));
        return EXIT_RUN;
    }
    /* The file may come over a shared file system, where no inotify
     * sees it: look again after 5 ms, then less often, up to every 100. */
    double dl = st_now() + ATTACH_WAIT_S;
    long step_ms = 5;
    while (stat(file, &sb) != 0) {
        if (errno != ENOENT || st_now() > dl) {
            fprintf(stderr, PROG " --be-attach: on %s: %s: %s\n", node, file,
                    errno == ENOENT ? "the front-end's attach file is not there: is -o's "
                    "directory shared with this node?" : strerror(errno));
            return EXIT_RUN;
        }
        struct timespec ts = { 0, step_ms * 1000 * 1000 };
        nanosleep(&ts, NULL);
        step_ms = step_ms * 2 > 100 ? 100 : step_ms * 2;
    }
    tbon_error_t err = { 0 };
    tbon_net_t *net = tbon_be_attach(file, rank, &err);
    if (!net) {
        fprintf(stderr, PROG " --be-attach: on %s: rank %u: %s\n", node, rank, err.msg);
        return EXIT_RUN;
    }
    char self[PATH_MAX];
    st_self_exe(self, sizeof self);
    return be_loop(net, self);
}
