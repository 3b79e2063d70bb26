/* test_stat.c - tbon_stat end to end: real target processes (stat_hang),
 * real trees, real ptrace; each task's merged path checked against what
 * eu-stack prints for the same process, commnode kills during the merge,
 * targets that exit while sampled, and targets never left stopped. */
#include "itest.h"

#include <dirent.h>
#include <jansson.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define NTASK 64

/* ---- the targets: stat_hang N ---- */

struct hang {
    pid_t parent;
    pid_t pid[NTASK];      /* by rank (PMI_RANK) */
    size_t n;
};

static const char *hang_path(void)
{
    static char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/stat/examples/stat_hang", it_build_dir());
    return p;
}

/* PMI_RANK of pid, or -1. */
static long env_rank(pid_t pid)
{
    char buf[8192];
    ssize_t k = tb_proc_read(pid, "environ", buf, sizeof buf);
    for (ssize_t off = 0; off < k; off += (ssize_t)strlen(buf + off) + 1)
        if (strncmp(buf + off, "PMI_RANK=", 9) == 0)
            return atol(buf + off + 9);
    return -1;
}

/* 1 if pid's only thread (or main thread) sits in a blocking call of
 * stat_hang's stuck paths. */
static int in_blocking_call(pid_t pid)
{
    long nr = tb_proc_syscall(pid, pid);
    return nr == SYS_read || nr == SYS_nanosleep || nr == SYS_clock_nanosleep;
}

/* Start stat_hang n and wait until its n workers run with their ranks and
 * are where their ranks lead. */
static int hang_start(struct hang *h, size_t n)
{
    memset(h, 0, sizeof *h);
    h->n = n;
    pid_t self = getpid(), pid = fork();
    if (pid == 0) {
        /* A case ended by its time-out never runs hang_stop: its targets
         * end with it (stat_hang's SIGTERM ends its workers). */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != self)
            _exit(127);
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 1);
        char nb[16];
        snprintf(nb, sizeof nb, "%zu", n);
        execl(hang_path(), "stat_hang", nb, (char *)NULL);
        _exit(127);
    }
    h->parent = pid;
    int64_t t0 = it_now_ms();
    for (;;) {
        size_t np, found = 0;
        struct it_proc *v = it_proc_table(&np);
        memset(h->pid, 0, sizeof h->pid);
        for (size_t i = 0; v && i < np; i++) {
            if (v[i].ppid != pid)
                continue;
            long r = env_rank(v[i].pid);
            if (r >= 0 && (size_t)r < n && !h->pid[r]) {
                h->pid[r] = v[i].pid;
                found++;
            }
        }
        free(v);
        if (found == n)
            break;
        if (it_now_ms() - t0 > 10000) {
            th_fail(__FILE__, __LINE__, "stat_hang %zu: %zu workers after 10 s", n, found);
            return -1;
        }
        it_sleep_ms(20);
    }
    /* Into their stuck call paths: every worker but the spinning rank 1
     * blocked in read (0), nanosleep (35) or clock_nanosleep (230). */
    for (size_t r = 0; r < n; r++) {
        while (r != 1 && !in_blocking_call(h->pid[r])) {
            if (it_now_ms() - t0 > 10000) {
                th_fail(__FILE__, __LINE__, "stat_hang worker %zu never blocked", r);
                return -1;
            }
            it_sleep_ms(5);
        }
    }
    return 0;
}

static void hang_stop(struct hang *h)
{
    if (h->parent > 0) {
        kill(h->parent, SIGTERM);
        int64_t t0 = it_now_ms();
        while (waitpid(h->parent, NULL, WNOHANG) != h->parent && it_now_ms() - t0 < 3000)
            it_sleep_ms(10);
        kill(h->parent, SIGKILL);
        waitpid(h->parent, NULL, WNOHANG);
        for (size_t i = 0; i < h->n; i++)
            if (h->pid[i])
                kill(h->pid[i], SIGKILL);
    }
    h->parent = 0;
}

/* ---- running tbon_stat ---- */

static pid_t stat_spawn(char *const argv[])
{
    pid_t self = getpid(), pid = fork();
    if (pid == 0) {
        /* Ends with a case ended by its time-out (tbon_stat on SIGTERM lets
         * its targets go and takes its tree down). */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != self)
            _exit(127);
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* Wait for pid up to ms; its exit status, or -1 (then it is killed). */
static int stat_wait(pid_t pid, int ms)
{
    int64_t t0 = it_now_ms();
    int st;
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (it_now_ms() - t0 > ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        it_sleep_ms(20);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *stat_bin(void)
{
    static char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/bin/tbon_stat", it_build_dir());
    return p;
}

/* "-p" list of h's pids, in a shuffled order (ranks must come from PMI_RANK). */
static const char *pid_list(const struct hang *h)
{
    static char buf[NTASK * 12];
    size_t off = 0;
    for (size_t k = 0; k < h->n; k++) {
        size_t i = (k * 37 + 11) % h->n;
        off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%d", k ? "," : "", (int)h->pid[i]);
    }
    return buf;
}

/* ---- the merged tree, from <exe>.2D.txt ---- */

#define MAXNODE 4096
#define MAXDEPTH 128

struct tnode { int depth; char frame[256]; char label[1024]; };

struct ttree { struct tnode *v; size_t n; };

static int parse_tree(const char *path, struct ttree *t)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    t->v = calloc(MAXNODE, sizeof *t->v);
    t->n = 0;
    char line[2048];
    while (t->v && t->n < MAXNODE && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0])
            continue;
        int sp = 0;
        while (line[sp] == ' ')
            sp++;
        char *sep = strstr(line + sp, "  ");
        char *last = sep;
        while (sep && (sep = strstr(sep + 2, "  ")))
            last = sep;
        if (!last)
            continue;
        struct tnode *nd = &t->v[t->n++];
        nd->depth = sp / 2;
        snprintf(nd->frame, sizeof nd->frame, "%.*s", (int)(last - (line + sp)), line + sp);
        const char *lab = last;
        while (*lab == ' ')
            lab++;
        snprintf(nd->label, sizeof nd->label, "%s", lab);
    }
    fclose(f);
    return t->v ? 0 : -1;
}

/* 1 if the label "count:[a-b,c]" holds rank r. */
static int label_has(const char *label, unsigned r)
{
    const char *p = strchr(label, '[');
    while (p && *p && *p != ']') {
        p++;
        char *end;
        unsigned long lo = strtoul(p, &end, 10), hi = lo;
        if (end == p)
            return 0;
        if (*end == '-')
            hi = strtoul(end + 1, &end, 10);
        if (r >= lo && r <= hi)
            return 1;
        p = end;
    }
    return 0;
}

/* The deepest path of rank r: frames into out (outermost first), count. */
static size_t tree_path(const struct ttree *t, unsigned r, char out[][256], size_t cap)
{
    const char *stack[MAXDEPTH];
    size_t best = 0;
    for (size_t i = 0; i < t->n; i++) {
        int d = t->v[i].depth;
        if (d >= MAXDEPTH)
            continue;
        stack[d] = t->v[i].frame;
        if (!label_has(t->v[i].label, r))
            continue;
        /* depth 0 is the root line; frames are at depth 1.. */
        if ((size_t)d > best) {
            best = (size_t)d;
            for (int k = 1; k <= d && (size_t)(k - 1) < cap; k++)
                snprintf(out[k - 1], 256, "%s", stack[k]);
        }
    }
    return best < cap ? best : cap;
}

/* ---- eu-stack ---- */

/* The main thread's function names of `eu-stack -p pid`, outermost first. */
static size_t eu_stack(pid_t pid, char out[][256], size_t cap)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "eu-stack -p %d 2>/dev/null", (int)pid);
    FILE *f = popen(cmd, "r");
    if (!f)
        return 0;
    char line[1024], frames[MAXDEPTH][256];
    size_t n = 0;
    int threads = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "TID ", 4) == 0) {
            threads++;
            continue;
        }
        if (threads != 1 || line[0] != '#' || n >= MAXDEPTH)
            continue;
        /* "#3  0x000055d0c1a2b3c4 barrier_wait" or "... - 1 func" */
        char *p = strstr(line, "0x");
        if (!p)
            continue;
        p += strcspn(p, " \t");
        while (*p == ' ' || *p == '\t')
            p++;
        if (p[0] == '-' && p[1] == ' ') {
            p += 2;
            p += strcspn(p, " \t");
            while (*p == ' ')
                p++;
        }
        p[strcspn(p, " \t\n")] = 0;
        snprintf(frames[n++], 256, "%s", *p ? p : "??");
    }
    pclose(f);
    size_t k = 0;
    for (size_t i = n; i-- > 0 && k < cap;)
        snprintf(out[k++], 256, "%s", frames[i]);
    return k;
}

/* The run directory DIR/stat_hang.0000 of a run into dir. */
static const char *result_file(const char *outdir, const char *name)
{
    static char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%.*s/stat_hang.0000/stat_hang.%s", PATH_MAX - 64, outdir, name);
    return p;
}

/* Every rank's path equals eu-stack's (the busy worker's innermost frames
 * move, so only its outer frames are compared). */
static void check_against_eu_stack(const struct hang *h, const struct ttree *t)
{
    static char a[MAXDEPTH][256], b[MAXDEPTH][256];
    size_t bad = 0;
    for (unsigned r = 0; r < h->n && bad < 3; r++) {
        size_t na = tree_path(t, r, a, MAXDEPTH), nb = eu_stack(h->pid[r], b, MAXDEPTH);
        int busy = 0;
        for (size_t i = 0; i < na; i++)
            busy |= strstr(a[i], "compute") != NULL || strstr(a[i], "spin") != NULL;
        size_t cmp = busy ? 3 : (na > nb ? na : nb);
        int same = na > 0 && nb > 0 && (busy || na == nb);
        for (size_t i = 0; same && i < cmp && i < na && i < nb; i++)
            same = strcmp(a[i], b[i]) == 0;
        if (!same) {
            bad++;
            char sa[2048] = "", sb[2048] = "";
            for (size_t i = 0; i < na; i++)
                snprintf(sa + strlen(sa), sizeof sa - strlen(sa), "%s%s", i ? " > " : "", a[i]);
            for (size_t i = 0; i < nb; i++)
                snprintf(sb + strlen(sb), sizeof sb - strlen(sb), "%s%s", i ? " > " : "", b[i]);
            th_fail(__FILE__, __LINE__, "rank %u (pid %d): tbon_stat has %s; eu-stack has %s", r,
                    (int)h->pid[r], sa, sb);
        }
    }
}

/* The tasks of a JSON node's "tasks" ("[0-2,7]"), as a mask (NTASK <= 64). */
static uint64_t task_mask(json_t *n)
{
    const char *s = json_string_value(json_object_get(n, "tasks"));
    uint64_t m = 0;
    while (s && *s) {
        char *end;
        unsigned long lo = strtoul(s + 1, &end, 10), hi = lo;
        if (end == s + 1)
            break;
        if (*end == '-')
            hi = strtoul(end + 1, &end, 10);
        for (unsigned long i = lo; i <= hi && i < 64; i++)
            m |= (uint64_t)1 << i;
        s = end;            /* at ',' or ']' */
        if (*s != ',')
            break;
    }
    return m;
}

/* What <exe>.2D.folded must hold, from the JSON: a line per node where
 * tasks end (held there and by no child), in pre-order. */
static void folded_of_json(json_t *n, char *path, size_t len, FILE *f)
{
    json_t *kids = json_object_get(n, "children");
    uint64_t below = 0;
    for (size_t i = 0; i < json_array_size(kids); i++)
        below |= task_mask(json_array_get(kids, i));
    int ends = __builtin_popcountll(task_mask(n) & ~below);
    if (len && ends)
        fprintf(f, "%.*s %d\n", (int)len, path, ends);
    for (size_t i = 0; i < json_array_size(kids); i++) {
        json_t *k = json_array_get(kids, i);
        const char *fr = json_string_value(json_object_get(k, "frame"));
        size_t fl = fr ? strlen(fr) : 0, l = len + (len ? 1 : 0) + fl;
        if (!fr || l >= 8192)
            continue;
        char *p = path + len;
        if (len)
            *p++ = ';';
        memcpy(p, fr, fl);
        folded_of_json(k, path, l, f);
    }
}

/* The run's folded stacks (both trees) say what its JSON does. */
static void check_folded(const char *outdir)
{
    static const char *const which[] = { "2D", "3D" };
    for (int w = 0; w < 2; w++) {
        char name[32];
        snprintf(name, sizeof name, "%s.json", which[w]);
        json_error_t je;
        json_t *j = json_load_file(result_file(outdir, name), 0, &je);
        snprintf(name, sizeof name, "%s.folded", which[w]);
        char *got = th_read_file(result_file(outdir, name)), *want = NULL;
        size_t wn = 0;
        FILE *f = open_memstream(&want, &wn);
        static char path[8192];
        if (j && f)
            folded_of_json(j, path, 0, f);
        if (f)
            fclose(f);
        if (!j || !got || !want || !got[0])
            th_fail(__FILE__, __LINE__, "%s: no JSON or no folded stacks", which[w]);
        else
            CHECK_STR(got, want);
        json_decref(j);
        free(got);
        free(want);
    }
}

static void run_and_compare(const char *shape, int use_file)
{
    struct hang h;
    REQUIRE(hang_start(&h, NTASK) == 0);
    tbon_rank_t be[IT_MAX_BE];
    size_t nbe;
    const char *topo = it_topo_shape(shape, be, IT_MAX_BE, &nbe);
    REQUIRE(topo != NULL);
    char outdir[PATH_MAX];
    snprintf(outdir, sizeof outdir, "%s/out", th_tmpdir());
    const char *src_opt = "-p", *src = pid_list(&h);
    if (use_file) {
        src_opt = "--pids-file";
        src = th_write_file("pids", pid_list(&h));
    }
    char *argv[] = { (char *)stat_bin(), "-n", "1", "-q", "-t", (char *)topo, "-o", outdir,
                     (char *)src_opt, (char *)src, NULL };
    int st = stat_wait(stat_spawn(argv), 60000);
    CHECK_INT(st, 0);
    struct ttree t = { 0 };
    CHECK(parse_tree(result_file(outdir, "2D.txt"), &t) == 0);
    if (t.n) {
        CHECK(label_has(t.v[0].label, 0) && label_has(t.v[0].label, NTASK - 1));
        char want[32];
        snprintf(want, sizeof want, "%d:[0-%d]", NTASK, NTASK - 1);
        CHECK_STR(t.v[0].label, want);
        check_against_eu_stack(&h, &t);
    }
    check_folded(outdir);
    free(t.v);
    hang_stop(&h);
}

ITEST(paths_equal_eu_stack_4x4)
{
    run_and_compare("4x4", 0);
}

ITEST(paths_equal_eu_stack_8x8_pids_file)
{
    run_and_compare("8x8", 1);
}

/* The merged tree at path holds every one of the NTASK tasks, each with a
 * real path (no "[...]" frame naming a problem). */
static void check_complete(const char *path, const char *what)
{
    struct ttree t = { 0 };
    if (parse_tree(path, &t) != 0 || t.n == 0) {
        th_fail(__FILE__, __LINE__, "%s: no tree in %s", what, path);
        free(t.v);
        return;
    }
    char want[32];
    snprintf(want, sizeof want, "%d:[0-%d]", NTASK, NTASK - 1);
    if (strcmp(t.v[0].label, want) != 0)
        th_fail(__FILE__, __LINE__, "%s: the root holds %s, not %s", what, t.v[0].label, want);
    for (size_t i = 0; i < t.n; i++)
        if (t.v[i].frame[0] == '[')
            th_fail(__FILE__, __LINE__, "%s: a frame \"%s\" (%s)", what, t.v[i].frame,
                    t.v[i].label);
    free(t.v);
}

/* Signal pid's first tbon_commnode descendant; its pid or 0. */
static pid_t signal_a_commnode(pid_t root, int sig)
{
    size_t np;
    struct it_proc *v = it_proc_table(&np);
    pid_t victim = 0;
    for (size_t i = 0; v && i < np && !victim; i++)
        if (strncmp(v[i].comm, "tbon_commnode", 13) == 0 && it_descends(v, np, v[i].pid, root))
            victim = v[i].pid;
    free(v);
    if (victim)
        kill(victim, sig);
    return victim;
}

static pid_t kill_a_commnode(pid_t root)
{
    return signal_a_commnode(root, SIGKILL);
}

/* Context switches of a target task so far. A task blocked in a system
 * call switches only when something stops it: each sample stops it once
 * (+1) and lets it go back to its blocking call (+1). A counter, so unlike
 * a look at the task's state it misses no sample, however short. */
static long task_switches(pid_t pid)
{
    long v = it_proc_status(pid, "voluntary_ctxt_switches");
    long nv = it_proc_status(pid, "nonvoluntary_ctxt_switches");
    return v < 0 || nv < 0 ? -1 : v + nv;
}

/* Wait (at most ms) until the blocked task pid has been sampled and let go
 * k times since its count was base. 1 once so, 0 on time-out or if it is
 * gone. */
static int wait_let_go(pid_t pid, long base, int k, int ms)
{
    int64_t end = it_now_ms() + ms;
    long now;
    while ((now = task_switches(pid)) >= 0 && now - base < 2L * k && it_now_ms() < end)
        it_sleep_ms(2);
    if (now - base < 2L * k)
        fprintf(stderr, "    task %d: %ld switches, %d samples' worth wanted\n", (int)pid,
                now - base, k);
    return now - base >= 2L * k;
}

/* Wait (at most ms) until every blocked task of h (all but the spinning
 * rank 1) has been sampled and let go once since its count in base: then
 * every back-end is up and sampling (each has tasks other than rank 1). */
static int wait_all_let_go(const struct hang *h, const long *base, int ms)
{
    int64_t end = it_now_ms() + ms;
    for (size_t i = 0; i < h->n; i++)
        if (i != 1 && !wait_let_go(h->pid[i], base[i], 1, (int)(end - it_now_ms())))
            return 0;
    return 1;
}

/* A 4x4 topology file of this host (16 back-ends under 4 commnodes). */
static const char *topo_4x4(void)
{
    tbon_rank_t be[IT_MAX_BE];
    size_t nbe;
    return it_topo_shape("4x4", be, IT_MAX_BE, &nbe);
}

/* Kill -9 a commnode of the tree of tbon_stat sp, once there is one (2 s
 * at most); 1 if one was killed. */
static int kill_one_commnode(pid_t sp)
{
    pid_t victim = 0;
    int64_t t0 = it_now_ms();
    while (!(victim = kill_a_commnode(sp)) && it_now_ms() - t0 < 2000)
        it_sleep_ms(5);
    return victim != 0;
}

/* A commnode killed while the back-ends sample and merge: every task is
 * still in the tree with a real path (state composition, then asking the
 * back-ends again for what died in flight). */
ITEST(commnode_killed_during_merge)
{
    /* Two runs of tbon_stat; a loaded machine with the sanitizers takes 35 s. */
    alarm(150);
    struct hang h;
    REQUIRE(hang_start(&h, NTASK) == 0);
    const char *topo = topo_4x4();
    REQUIRE(topo != NULL);
    char outdir[PATH_MAX];
    snprintf(outdir, sizeof outdir, "%s/out", th_tmpdir());
    for (int trial = 0; trial < 2; trial++) {
        char od[PATH_MAX + 16];
        snprintf(od, sizeof od, "%s%d", outdir, trial);
        char *argv[] = { (char *)stat_bin(), "-n", "8", "-i", "100", "-q", "-t", (char *)topo,
                         "-o", od, "-p", (char *)pid_list(&h), NULL };
        long base[NTASK];
        for (size_t i = 0; i < h.n; i++)
            base[i] = task_switches(h.pid[i]);
        pid_t sp = stat_spawn(argv);
        /* Trial 0: once the sampling (8 x 100 ms) has reached every task;
         * trial 1: late in it, once 5 samples are done (after the 8th the
         * merge is done in milliseconds and the tree gone). Conditions, not
         * delays: under load the tree takes long to come up, and a kill
         * during the start-up is another case. So is a kill while a back-end
         * is still joining: the first sampling may begin before the last
         * back-end has read the topology its parent sent it (the tree counts
         * it then), and its tasks are then named "not sampled". */
        int seen = wait_all_let_go(&h, base, 60000) &&
                   (trial == 0 || wait_let_go(h.pid[0], base[0], 5, 60000));
        CHECK(seen);
        CHECK(kill_one_commnode(sp));
        int st = stat_wait(sp, 60000);
        CHECK_INT(st, 0);
        char path[PATH_MAX + 64], what[32];
        snprintf(path, sizeof path, "%s/stat_hang.0000/stat_hang.2D.txt", od);
        snprintf(what, sizeof what, "trial %d", trial);
        check_complete(path, what);
    }
    hang_stop(&h);
}

/* Deterministic loss in flight: back-end 8 (under commnode 1 of 4x4) holds
 * its result back until told; commnode 1 is killed once its other back-ends
 * wrote their results to it, so they die with it. The front-end must end
 * with every task: it notices the gap, waits for the adoptions and asks
 * again; or the orphans' composed filter state (their last trees, sent up
 * as state to their adopters) brought the results back first, which is
 * seed 003's own recovery and asks nothing: it happens when the adopters
 * still have the wave open (a loaded machine, a fast adoption). */
static int wait_files(const char *dir, const char *const *names, int ms)
{
    int64_t end = it_now_ms() + ms;
    char path[PATH_MAX + 32];
    for (;;) {
        int all = 1;
        for (size_t i = 0; names[i] && all; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            all = access(path, F_OK) == 0;
        }
        if (all)
            return 1;
        if (it_now_ms() >= end)
            return 0;
        it_sleep_ms(5);
    }
}

static int counts_differ(json_t *f, json_t *c, char *why, size_t cap);

/* One run of the loss above into outdir (gate: the hold's directory, made
 * here); counts: with --counts-only. The run's perf file says how the
 * front-end got the lost results back (asked again, or composed state). */
static void lose_in_flight(const struct hang *h, const char *topo, const char *outdir,
                           const char *gate, int counts)
{
    char hold[PATH_MAX + 8], go[PATH_MAX + 8];
    REQUIRE(mkdir(gate, 0700) == 0);
    snprintf(hold, sizeof hold, "8:%s", gate);
    setenv("TBON_STAT_TEST_HOLD", hold, 1);
    char *argv[] = { (char *)stat_bin(), "-n", "2", "-i", "50", "-q", "-t", (char *)topo,
                     "-o", (char *)outdir, "-p", (char *)pid_list(h),
                     counts ? "--counts-only" : NULL, NULL };
    pid_t sp = stat_spawn(argv);
    unsetenv("TBON_STAT_TEST_HOLD");
    /* Once 5, 6 and 7 sent their results to commnode 1 and 8 holds its. */
    const char *const ready[] = { "sent.5", "sent.6", "sent.7", "held", NULL };
    CHECK(wait_files(gate, ready, 60000));
    size_t np;
    struct it_proc *v = it_proc_table(&np);
    pid_t victim = 0;
    for (size_t i = 0; v && i < np; i++)
        if (strncmp(v[i].comm, "tbon_commnode", 13) == 0 && it_descends(v, np, v[i].pid, sp) &&
            it_commnode_rank(v[i].pid) == 1)
            victim = v[i].pid;
    if (!victim)        /* say what there was instead */
        for (size_t i = 0; v && i < np; i++)
            if (it_descends(v, np, v[i].pid, sp))
                fprintf(stderr, "    no commnode 1 under tbon_stat %d: %d %s %c rank %d\n", (int)sp,
                        (int)v[i].pid, v[i].comm, v[i].state, (int)it_commnode_rank(v[i].pid));
    free(v);
    CHECK(victim != 0);
    if (victim)
        kill(victim, SIGKILL);
    snprintf(go, sizeof go, "%s/go", gate);
    int gofd = creat(go, 0600);
    CHECK(gofd >= 0);
    if (gofd >= 0)
        close(gofd);
    CHECK_INT(stat_wait(sp, 60000), 0);
    FILE *f = fopen(result_file(outdir, "perf"), "r");
    int resends = -1, composed = -1;
    char line[128];
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "resends %d", &resends);
        sscanf(line, "composed %d", &composed);
    }
    if (f)
        fclose(f);
    CHECK(resends >= 0 && composed >= 0);
    if (resends < 1 && composed < 1)
        th_fail(__FILE__, __LINE__, "%s: complete, but neither asked again (resends %d) nor "
                "recovered by composed state (composed %d)", counts ? "--counts-only" : "full",
                resends, composed);
}

/* Deterministic loss in flight, as above, in both kinds of merge: the full
 * one ends with every task on its real path; the counts-only one (whose
 * sums must not count twice what comes again) with every node's count and
 * representative those of the full run. */
ITEST(results_lost_with_a_commnode_are_asked_again)
{
    struct hang h;
    REQUIRE(hang_start(&h, NTASK) == 0);
    const char *topo = topo_4x4();
    REQUIRE(topo != NULL);
    char outdir[2][PATH_MAX], gate[PATH_MAX];
    for (int counts = 0; counts < 2; counts++) {
        snprintf(outdir[counts], sizeof outdir[counts], "%s/out%d", th_tmpdir(), counts);
        snprintf(gate, sizeof gate, "%s/gate%d", th_tmpdir(), counts);
        lose_in_flight(&h, topo, outdir[counts], gate, counts);
    }
    check_complete(result_file(outdir[0], "2D.txt"), "after the loss");
    static const char *const which[] = { "2D.json", "3D.json" };
    for (int w = 0; w < 2; w++) {
        json_error_t je;
        json_t *f = json_load_file(result_file(outdir[0], which[w]), 0, &je);
        json_t *c = json_load_file(result_file(outdir[1], which[w]), 0, &je);
        char why[1024] = "";
        if (!f || !c)
            th_fail(__FILE__, __LINE__, "no %s", which[w]);
        else if (counts_differ(f, c, why, sizeof why))
            th_fail(__FILE__, __LINE__, "--counts-only after the loss, %s: %s", which[w], why);
        json_decref(f);
        json_decref(c);
    }
    hang_stop(&h);
}

/* A target that exits while it is sampled is a "[task exited]" frame, and
 * the other tasks are complete. */
ITEST(target_exits_during_sampling)
{
    struct hang h;
    REQUIRE(hang_start(&h, 16) == 0);
    char outdir[PATH_MAX];
    snprintf(outdir, sizeof outdir, "%s/out", th_tmpdir());
    char *argv[] = { (char *)stat_bin(), "-n", "10", "-i", "100", "-q", "-o", outdir, "-p",
                     (char *)pid_list(&h), NULL };
    long base = task_switches(h.pid[5]);
    pid_t sp = stat_spawn(argv);
    /* Once task 5 itself has been sampled twice (of 10), not after a fixed
     * delay: under load the tree took longer than that to come up and task 5
     * died before anything sampled it. Counting samples of any task was not
     * enough either: task 5 may not have been among them. */
    CHECK(wait_let_go(h.pid[5], base, 2, 60000));
    kill(h.pid[5], SIGKILL);
    CHECK_INT(stat_wait(sp, 60000), 0);
    struct ttree t2 = { 0 }, t3 = { 0 };
    CHECK(parse_tree(result_file(outdir, "2D.txt"), &t2) == 0);
    CHECK(parse_tree(result_file(outdir, "3D.txt"), &t3) == 0);
    static char p[MAXDEPTH][256];
    size_t n = tree_path(&t2, 5, p, MAXDEPTH);
    CHECK(n >= 1);
    if (n >= 1)
        CHECK_STR(p[n - 1], "[task exited]");
    if (t2.n)
        CHECK_STR(t2.v[0].label, "16:[0-15]");
    /* In 3D, rank 5 has its real path as well (sampled before it died). */
    int real = 0, exited = 0;
    for (size_t i = 0; i < t3.n; i++) {
        if (!label_has(t3.v[i].label, 5) || t3.v[i].depth == 0)
            continue;
        exited |= strcmp(t3.v[i].frame, "[task exited]") == 0;
        real |= strcmp(t3.v[i].frame, "main") == 0;
    }
    CHECK(real && exited);
    free(t2.v);
    free(t3.v);
    hang_stop(&h);
}

/* 1 if every worker is running or sleeping (not stopped, not traced). */
static int all_running(const struct hang *h, int skip)
{
    for (size_t i = 0; i < h->n; i++) {
        if ((int)i == skip)
            continue;
        char s = tb_proc_state(h->pid[i]);
        if (s == 't' || s == 'T' || s == 0) {
            th_fail(__FILE__, __LINE__, "worker %zu (pid %d) is in state '%c'", i,
                    (int)h->pid[i], s ? s : '?');
            return 0;
        }
    }
    return 1;
}

/* After tbon_stat, and after tbon_stat is killed with SIGKILL in the middle
 * of sampling, every target runs on. */
ITEST_LONG(targets_never_left_stopped)
{
    struct hang h;
    REQUIRE(hang_start(&h, 16) == 0);
    char outdir[PATH_MAX];
    snprintf(outdir, sizeof outdir, "%s/out", th_tmpdir());
    char *argv[] = { (char *)stat_bin(), "-n", "3", "-i", "50", "-q", "-o", outdir, "-p",
                     (char *)pid_list(&h), NULL };
    CHECK_INT(stat_wait(stat_spawn(argv), 60000), 0);
    CHECK(all_running(&h, -1));
    char *argv2[] = { (char *)stat_bin(), "-n", "200", "-i", "10", "-q", "-o", outdir, "-p",
                      (char *)pid_list(&h), NULL };
    for (int delay = 300; delay <= 900; delay += 300) {
        pid_t sp = stat_spawn(argv2);
        it_sleep_ms(delay);
        kill(sp, SIGKILL);
        stat_wait(sp, 5000);
        /* The back-ends (the tracers) go when the front-end is gone. */
        CHECK(it_wait_no_procs(20000, NULL) == 0);
        for (int k = 0; k < 5; k++) {
            if (!all_running(&h, -1))
                break;
            it_sleep_ms(40);
        }
    }
    hang_stop(&h);
}

/* tbon_stat with argv (NULL-terminated, after the program), stderr to errpath. */
static pid_t stat_spawn_err(const char *const *args, const char *errpath)
{
    char *argv[16] = { (char *)stat_bin() };
    size_t k = 1;
    for (size_t i = 0; args[i] && k < 15; i++)
        argv[k++] = (char *)args[i];
    argv[k] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int null = open("/dev/null", O_WRONLY);
        dup2(fd, 2);
        dup2(null, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* The file at errpath (tbon_stat's stderr) has says in it. */
#define err_has(errpath, says) err_has_at(errpath, says, __LINE__)
static void err_has_at(const char *errpath, const char *says, int line)
{
    char buf[2048] = "";
    FILE *f = fopen(errpath, "r");
    if (f) {
        size_t r = fread(buf, 1, sizeof buf - 1, f);
        buf[r] = 0;
        fclose(f);
    }
    if (!strstr(buf, says))
        th_fail(__FILE__, line, "stderr \"%s\" lacks \"%s\"", buf, says);
}

/* Bad arguments: a clear message and exit status 2, nothing started; a
 * listed task that is not there: status 1. */
ITEST(bad_arguments)
{
    const char *bad_file = th_write_file("pids", "123\n45x\n");
    const char *gone_file = th_write_file("gone", "1\n999999998  # never there\n");
    struct { const char *a[7]; const char *says; int code; } cases[] = {
        { { "-p", "12x" }, "\"12x\" is not a process id", 2 },
        { { "--pids-file", bad_file }, "pids:2: \"45x\" is not a process id", 2 },
        { { "-n", "0", "-p", "1" }, "-n \"0\"", 2 },
        { { "-q" }, "give exactly one of", 2 },
        { { "-p", "1", "-P", "1" }, "give exactly one of", 2 },
        { { "-P", "999999999" }, "no such process", 1 },
        { { "-p", "n2:" }, "\"n2:\" is not a process id on a host (HOST:PID)", 2 },
        { { "-p", "n/2:5" }, "\"n/2\" is not a host name", 2 },
        { { "--jobid", "x" }, "--jobid \"x\"", 2 },
        { { "--step", "1", "-p", "1" }, "--step goes with --jobid", 2 },
        { { "--jobid", "1", "-p", "1" }, "give exactly one of", 2 },
        /* a task never there is no "[task exited]" tree: status 1 */
        { { "-p", "999999999" }, "no process 999999999 on this host", 1 },
        { { "--pids-file", gone_file }, "no process 999999998 on this host", 1 },
        { { "-p", "1,999999997,999999996" }, "no process 999999997 on this host (", 1 },
        { { "--classes", "--counts-only", "-p", "1" },
          "--classes needs the task lists that --counts-only leaves out", 2 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char errpath[PATH_MAX];
        snprintf(errpath, sizeof errpath, "%s/err%zu", th_tmpdir(), c);
        CHECK_INT(stat_wait(stat_spawn_err(cases[c].a, errpath), 20000), cases[c].code);
        err_has(errpath, cases[c].says);
    }
}

/* A child of pid whose name is comm, or 0. */
static pid_t child_named(pid_t pid, const char *comm)
{
    char kids[512];
    char path[32];
    snprintf(path, sizeof path, "task/%d/children", (int)pid);
    if (tb_proc_read(pid, path, kids, sizeof kids) <= 0)
        return 0;
    for (char *tok = strtok(kids, " \n"); tok; tok = strtok(NULL, " \n")) {
        pid_t c = (pid_t)atoi(tok);
        if (c > 0 && strcmp(it_comm(c), comm) == 0)
            return c;
    }
    return 0;
}

/* -C: a command that ends before its -s wait is over is reported at once
 * (tbon_stat blocks on the command's pidfd, not for the whole -s), and an
 * interrupt during the wait stops the command and tbon_stat. */
ITEST(command_ends_or_is_interrupted)
{
    char errpath[PATH_MAX];
    snprintf(errpath, sizeof errpath, "%s/err_early", th_tmpdir());
    const char *early[] = { "-o", th_tmpdir(), "-s", "120", "-C", "sh", "-c", "exit 3", NULL };
    pid_t sp = stat_spawn_err(early, errpath);
    CHECK_INT(stat_wait(sp, 60000), 1);     /* -1 after 60 s: it waited for -s */
    err_has(errpath, "-C sh: it ended (status 3) before it could be sampled");

    snprintf(errpath, sizeof errpath, "%s/err_int", th_tmpdir());
    const char *longer[] = { "-o", th_tmpdir(), "-s", "120", "-C", "sleep", "1000", NULL };
    int64_t t0 = it_now_ms();
    sp = stat_spawn_err(longer, errpath);
    pid_t cmd = 0;
    while (!(cmd = child_named(sp, "sleep")) && it_now_ms() - t0 < 30000)
        it_sleep_ms(10);
    CHECK(cmd > 0);
    /* It blocks for the -s wait (on the command's pidfd), it does not look
     * again and again. */
    long nr;
    while ((nr = tb_proc_syscall(sp, sp)) != SYS_poll && nr != SYS_ppoll &&
           it_now_ms() - t0 < 30000)
        it_sleep_ms(10);
    CHECK(nr == SYS_poll || nr == SYS_ppoll);
    kill(sp, SIGINT);
    CHECK_INT(stat_wait(sp, 60000), 1);
    /* The command was stopped: gone, or a zombie left to us. */
    int64_t t1 = it_now_ms();
    while (!tb_proc_dead(cmd) && it_now_ms() - t1 < 10000)
        it_sleep_ms(10);
    CHECK(tb_proc_dead(cmd));
    waitpid(cmd, NULL, WNOHANG);
}

/* ---- a real MPI job (issue 5: most ranks in MPI_Barrier, one not) ---- */

#define MPI_NP 4
#define MPI_STUCK 2

/* utime + stime of pid in clock ticks (/proc/PID/stat), or -1. */
static long long cpu_ticks(pid_t pid)
{
    char buf[1024];
    unsigned long long ut, st;
    if (tb_proc_read(pid, "stat", buf, sizeof buf) <= 0)
        return -1;
    const char *rp = strrchr(buf, ')');
    if (!rp || sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                      &st) != 2)
        return -1;
    return (long long)(ut + st);
}

/* Whether frames[0..n) has one containing s. */
static int path_has(char frames[][256], size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strstr(frames[i], s))
            return 1;
    return 0;
}

/* mpirun -np MPI_NP mpi_hang MPI_STUCK, sampled through its launcher pid
 * (-P): every rank is in the tree by its OMPI_COMM_WORLD_RANK, the ranks
 * but one on a path through synchronise and MPI_Barrier, the stuck one on
 * its own (exchange_halo > wait_for_lost_message) and not in the barrier;
 * the classes file has two classes or more, the stuck rank alone in one.
 * Skipped, with a line saying so, where Open MPI is not installed
 * (scripts/deps.sh installs it). */
ITEST(mpi_job_barrier_and_one_stuck_rank)
{
    char exe[PATH_MAX + 64], outdir[PATH_MAX], np[8], stuck[8];
    snprintf(exe, sizeof exe, "%s/stat/examples/mpi_hang", it_build_dir());
    if (access(exe, X_OK) != 0 || system("command -v mpirun >/dev/null 2>&1") != 0) {
        fprintf(stderr, "    skipped: no mpirun or no %s (Open MPI not installed)\n", exe);
        return;
    }
    snprintf(np, sizeof np, "%d", MPI_NP);
    snprintf(stuck, sizeof stuck, "%d", MPI_STUCK);
    int out[2];
    REQUIRE(pipe(out) == 0);
    pid_t mpirun = fork();
    if (mpirun == 0) {
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        setpgid(0, 0);
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execlp("mpirun", "mpirun", "--oversubscribe", "--bind-to", "none", "-np", np, exe,
               stuck, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    /* Each rank prints one line when it is about to be where it hangs. */
    FILE *f = fdopen(out[0], "r");
    char line[256];
    int ready = 0, rank, pid;
    pid_t rpid[MPI_NP] = { 0 };
    while (f && ready < MPI_NP && fgets(line, sizeof line, f))
        if (sscanf(line, "rank %d pid %d", &rank, &pid) == 2 && rank >= 0 && rank < MPI_NP &&
            !rpid[rank]) {
            rpid[rank] = pid;
            ready++;
        }
    CHECK_INT(ready, MPI_NP);
    /* Then until each is there: the stuck one asleep in its loop
     * (clock_nanosleep, 230), the others polling in the barrier, which is
     * all they do after their line: their CPU time has grown since. */
    long long cpu0[MPI_NP];
    for (int r = 0; r < MPI_NP; r++)
        cpu0[r] = rpid[r] ? cpu_ticks(rpid[r]) : -1;
    for (int r = 0; ready == MPI_NP && r < MPI_NP; r++) {
        int64_t t0 = it_now_ms();
        for (;;) {
            char sc[64];
            if (r == MPI_STUCK ? tb_proc_read(rpid[r], "syscall", sc, sizeof sc) > 0 &&
                                     sc[0] >= '0' && sc[0] <= '9' && atol(sc) == 230
                               : cpu_ticks(rpid[r]) > cpu0[r])
                break;
            if (it_now_ms() - t0 > 10000) {
                th_fail(__FILE__, __LINE__, "rank %d (pid %d) never got where it hangs", r,
                        (int)rpid[r]);
                ready = 0;
                break;
            }
            it_sleep_ms(2);
        }
    }

    snprintf(outdir, sizeof outdir, "%s/mpi", th_tmpdir());
    char pidarg[16];
    snprintf(pidarg, sizeof pidarg, "%d", (int)mpirun);
    char *argv[] = { (char *)stat_bin(), "-P", pidarg, "-n", "2", "-i", "50", "-q", "-o",
                     outdir, NULL };
    int st = ready == MPI_NP ? stat_wait(stat_spawn(argv), 60000) : -1;
    CHECK_INT(st, 0);

    char txt[PATH_MAX + 64], cls[PATH_MAX + 64];
    snprintf(txt, sizeof txt, "%s/mpi_hang.0000/mpi_hang.2D.txt", outdir);
    snprintf(cls, sizeof cls, "%s/mpi_hang.0000/mpi_hang.2D.classes.txt", outdir);
    struct ttree t = { 0 };
    if (st == 0 && parse_tree(txt, &t) == 0 && t.n > 0) {
        char want[32];
        snprintf(want, sizeof want, "%d:[0-%d]", MPI_NP, MPI_NP - 1);
        CHECK_STR(t.v[0].label, want);
        static char p[MAXDEPTH][256];
        for (unsigned r = 0; r < MPI_NP; r++) {
            size_t n = tree_path(&t, r, p, MAXDEPTH);
            CHECK(n > 3 && path_has(p, n, "main"));
            if (r == MPI_STUCK) {
                CHECK(path_has(p, n, "exchange_halo") && path_has(p, n, "wait_for_lost_message"));
                CHECK(!path_has(p, n, "MPI_Barrier") && !path_has(p, n, "synchronise"));
            } else {
                CHECK(path_has(p, n, "synchronise") && path_has(p, n, "MPI_Barrier"));
                CHECK(!path_has(p, n, "exchange_halo"));
            }
        }
        /* The stuck rank is a class of its own. */
        FILE *c = fopen(cls, "r");
        int alone = 0, classes = 0;
        char l[512], self[32];
        snprintf(self, sizeof self, "1:[%d]", MPI_STUCK);
        while (c && fgets(l, sizeof l, c)) {
            classes += strchr(l, '[') != NULL && strstr(l, " rep ") != NULL;
            alone |= strncmp(l, self, strlen(self)) == 0;
        }
        if (c)
            fclose(c);
        CHECK(classes >= 2);
        CHECK(alone);
    } else {
        th_fail(__FILE__, __LINE__, "no merged tree in %s", txt);
    }
    free(t.v);
    kill(-mpirun, SIGTERM);
    int64_t t0 = it_now_ms();
    while (waitpid(mpirun, NULL, WNOHANG) != mpirun && it_now_ms() - t0 < 5000)
        it_sleep_ms(20);
    kill(-mpirun, SIGKILL);
    waitpid(mpirun, NULL, WNOHANG);
    if (f)
        fclose(f);
}

/* With a `dot` on the PATH the trees are drawn as SVG too (here a stand-in
 * that copies its input, as Graphviz is not installed here); a dot that
 * fails is a note, and the run still succeeds without the SVGs. */
/* Tasks named HOST:PID with this host's names are this host's; -o's
 * directory is made with its parents; the tasks file and the classes name
 * every task by host, pid and rank. */
ITEST(this_host_by_name_and_output_dir_made)
{
    struct hang h;
    REQUIRE(hang_start(&h, 4) == 0);
    char me[256] = "", out[512], list[1024], cmd[8192];
    gethostname(me, sizeof me - 1);
    snprintf(out, sizeof out, "%s/not/yet/there", th_tmpdir());
    snprintf(list, sizeof list, "localhost:%d,%s:%d,%d,%d", (int)h.pid[2], me, (int)h.pid[0],
             (int)h.pid[1], (int)h.pid[3]);
    snprintf(cmd, sizeof cmd, "'%s' -n 1 -o '%s' -p %s >'%s/stat.out' 2>'%s/stat.err'",
             stat_bin(), out, list, th_tmpdir(), th_tmpdir());
    CHECK_INT(system(cmd), 0);
    char *tasks = th_read_file(result_file(out, "tasks.txt"));
    REQUIRE(tasks != NULL);
    for (int r = 0; r < 4; r++) {
        char want[512];
        snprintf(want, sizeof want, "\n%d %d %s %d -: _start > ", r, r, me, (int)h.pid[r]);
        if (!strstr(tasks, want))
            th_fail(__FILE__, __LINE__, "tasks file lacks \"%s\": %s", want + 1, tasks);
    }
    char *cls = th_read_file(result_file(out, "2D.classes.txt"));
    char rep[300];
    snprintf(rep, sizeof rep, "rep 0 (%s:%d)", me, (int)h.pid[0]);
    CHECK(cls && strstr(cls, rep) != NULL);
    free(tasks);
    free(cls);
    hang_stop(&h);
}

ITEST(svg_drawn_by_dot_on_the_path)
{
    struct hang h;
    REQUIRE(hang_start(&h, 4) == 0);
    const char *kinds[] = { "good", "bad" };
    for (int k = 0; k < 2; k++) {
        char bindir[512], dot[528], out[512], cmd[16384];
        snprintf(bindir, sizeof bindir, "%s/%sbin", th_tmpdir(), kinds[k]);
        snprintf(dot, sizeof dot, "%s/dot", bindir);
        snprintf(out, sizeof out, "%s/%sout", th_tmpdir(), kinds[k]);
        REQUIRE(mkdir(bindir, 0755) == 0);
        FILE *f = fopen(dot, "w");
        REQUIRE(f);
        /* dot -Tsvg -O IN... (IN.svg for each IN) */
        fputs(k == 0 ? "#!/bin/sh\nshift 2\nfor f; do cp \"$f\" \"$f.svg\"; done\n"
                     : "#!/bin/sh\nexit 1\n", f);
        fclose(f);
        REQUIRE(chmod(dot, 0755) == 0);
        snprintf(cmd, sizeof cmd, "PATH='%s':\"$PATH\" '%s' -n 1 -q -o '%s' -p %s >'%s.out' "
                 "2>'%s.err'", bindir, stat_bin(), out, pid_list(&h), out, out);
        CHECK_INT(system(cmd), 0);
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, "%s.out", out);
        char *said = th_read_file(p);
        CHECK(said && (strstr(said, ",svg}") != NULL) == (k == 0));
        CHECK((access(result_file(out, "2D.svg"), F_OK) == 0) == (k == 0));
        CHECK((access(result_file(out, "3D.svg"), F_OK) == 0) == (k == 0));
        CHECK(access(result_file(out, "2D.dot"), F_OK) == 0);
        snprintf(p, sizeof p, "%s.err", out);
        char *err = th_read_file(p);
        CHECK(err && (strstr(err, "note: dot could not draw") != NULL) == (k == 1));
        free(said);
        free(err);
    }
    hang_stop(&h);
}

/* A host whose back-end does not start (its remote shell fails, as ssh to
 * a host that is down): the tasks of the other hosts are sampled and
 * merged, the unreachable ones are named on stdout and stderr, and the exit
 * status says so (3). The hosts are TEST-NET-2 names run here through
 * rsh-local; the remote shell refuses 198.51.100.22. */
ITEST(tasks_behind_a_backend_that_did_not_start_are_named)
{
    struct hang h;
    REQUIRE(hang_start(&h, 8) == 0);
    char rsh[PATH_MAX + 2048];
    snprintf(rsh, sizeof rsh,
             "#!/bin/sh\n"
             "if [ \"$1\" = 198.51.100.22 ]; then\n"
             "    echo \"ssh: connect to host 198.51.100.22 port 22: No route to host\" >&2\n"
             "    exit 255\n"
             "fi\n"
             "exec '%s' \"$@\"\n", it_src_path("tests/integration/rsh-local"));
    const char *rsh_path = th_write_file("rsh-down", rsh);
    REQUIRE(chmod(rsh_path, 0755) == 0);
    /* Ranks 0-3 on .21, 4-5 on .22 (not reached), 6-7 on .23. */
    char list[1024] = "";
    for (size_t r = 0; r < 8; r++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s198.51.100.%d:%d",
                 r ? "," : "", r < 4 ? 21 : r < 6 ? 22 : 23, (int)h.pid[r]);
    char outdir[PATH_MAX], so[PATH_MAX + 8], se[PATH_MAX + 8];
    snprintf(outdir, sizeof outdir, "%s/out", th_tmpdir());
    snprintf(so, sizeof so, "%s/stdout", th_tmpdir());
    snprintf(se, sizeof se, "%s/stderr", th_tmpdir());
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(so, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(se, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(o, 1);
        dup2(e, 2);
        setenv("TBON_RSH", rsh_path, 1);
        execl(stat_bin(), "tbon_stat", "-n", "1", "-q", "-o", outdir, "-p", list, (char *)NULL);
        _exit(127);
    }
    int st = stat_wait(pid, IT_SLOW ? 120000 : 60000);
    CHECK_INT(st, 3);
    char *out = th_read_file(so), *err = th_read_file(se);
    REQUIRE(out && err);
    for (size_t r = 4; r < 6; r++) {
        char want[64];
        snprintf(want, sizeof want, "198.51.100.22:%d", (int)h.pid[r]);
        if (!strstr(out, want) || !strstr(err, want))
            th_fail(__FILE__, __LINE__, "%s not named: stdout %s stderr %s", want, out, err);
    }
    CHECK(strstr(out, "not reached: 2 tasks whose back-end did not start") != NULL);
    CHECK(strstr(err, "tbon_stat: not reached: 2 tasks") != NULL);
    /* The library says why the back-end is missing (its remote shell's words). */
    CHECK(strstr(err, "No route to host") != NULL);
    /* The merged tree holds the six others, each with a real path. */
    struct ttree t = { 0 };
    CHECK(parse_tree(result_file(outdir, "2D.txt"), &t) == 0);
    if (t.n) {
        CHECK_STR(t.v[0].label, "6:[0-3,6-7]");
        for (size_t i = 0; i < t.n; i++)
            if (t.v[i].frame[0] == '[')
                th_fail(__FILE__, __LINE__, "a frame \"%s\" (%s)", t.v[i].frame, t.v[i].label);
    }
    free(t.v);
    char *perf = th_read_file(result_file(outdir, "perf"));
    CHECK(perf && strstr(perf, "\nunreached 2\n") != NULL);
    free(perf);
    free(out);
    free(err);
    hang_stop(&h);
}

/* tbon_stat --session: start leaves the tree running on a 64-task hang,
 * three samples each take it over, sample, merge and leave it again - each
 * tree exact (every task, each path eu-stack's) - and stop ends it: no
 * process left, the directory gone, and a sample after the stop says
 * there is no session. */
/* A session's sample draws again only a tree that changed: a dot that
 * copies its input (and logs each call) draws the first sample, not the
 * second (the same trees), the third (--modules: other labels) and the
 * fourth (back to the first's trees, no longer the kept ones); each
 * sample's SVG is its own tree's; stop leaves nothing in DIR. */
ITEST(session_redraws_only_a_changed_tree)
{
    struct hang h;
    REQUIRE(hang_start(&h, 4) == 0);
    char bindir[1024], dot[1040], log[1040], out[1040], sdir[1040], cmd[32768];
    snprintf(bindir, sizeof bindir, "%s/dotbin", th_tmpdir());
    snprintf(dot, sizeof dot, "%s/dot", bindir);
    snprintf(log, sizeof log, "%s/dot.log", th_tmpdir());
    snprintf(out, sizeof out, "%s/out", th_tmpdir());
    snprintf(sdir, sizeof sdir, "%s/sess", th_tmpdir());
    REQUIRE(mkdir(bindir, 0755) == 0);
    FILE *f = fopen(dot, "w");
    REQUIRE(f);
    fprintf(f, "#!/bin/sh\necho \"$*\" >>'%s'\nshift 2\nfor f; do cp \"$f\" \"$f.svg\"; done\n",
            log);
    fclose(f);
    REQUIRE(chmod(dot, 0755) == 0);
    snprintf(cmd, sizeof cmd, "'%s' --session '%s' start -q -o '%s' -p %s >/dev/null",
             stat_bin(), sdir, out, pid_list(&h));
    CHECK_INT(system(cmd), 0);
    const char *flags[] = { "", "", "--modules", "" };
    const int calls[] = { 1, 1, 2, 3 };          /* dot's calls after each sample */
    for (int k = 0; k < 4; k++) {
        snprintf(cmd, sizeof cmd, "PATH='%s':\"$PATH\" '%s' --session '%s' sample -n 1 -q %s "
                 "-o '%s' >/dev/null", bindir, stat_bin(), sdir, flags[k], out);
        CHECK_INT(system(cmd), 0);
        char *said = th_read_file(log);
        int n = 0;
        for (const char *p = said; p && (p = strchr(p, '\n')); p++)
            n++;
        if (n != calls[k])
            th_fail(__FILE__, __LINE__, "sample %d: dot called %d times, not %d: %s", k, n,
                    calls[k], said ? said : "(no log)");
        free(said);
        for (int w = 0; w < 2; w++) {
            char a[1200], b[1200];
            snprintf(a, sizeof a, "%s/stat_hang.%04d/stat_hang.%s.dot", out, k, w ? "3D" : "2D");
            snprintf(b, sizeof b, "%s/stat_hang.%04d/stat_hang.%s.svg", out, k, w ? "3D" : "2D");
            char *ta = th_read_file(a), *tb = th_read_file(b);
            CHECK(ta && tb && strcmp(ta, tb) == 0);
            CHECK(ta && (strstr(ta, "stat_hang`") != NULL) == (k == 2));   /* --modules */
            free(ta);
            free(tb);
        }
    }
    snprintf(cmd, sizeof cmd, "'%s' --session '%s' stop -q", stat_bin(), sdir);
    CHECK_INT(system(cmd), 0);
    CHECK(access(sdir, F_OK) != 0);
    it_check_no_procs("after the session's stop");
    hang_stop(&h);
}

ITEST(session_start_sample_stop)
{
    struct hang h;
    REQUIRE(hang_start(&h, NTASK) == 0);
    char outdir[PATH_MAX], sdir[PATH_MAX];
    snprintf(outdir, sizeof outdir, "%s/out", th_tmpdir());
    snprintf(sdir, sizeof sdir, "%s/sess", th_tmpdir());
    char *start[] = { (char *)stat_bin(), "--session", sdir, "start", "-q", "-o", outdir,
                      "-p", (char *)pid_list(&h), NULL };
    CHECK_INT(stat_wait(stat_spawn(start), 60000), 0);
    /* the tree runs on without tbon_stat: commnodes and back-ends */
    CHECK(it_our_procs("tbon_commnode", NULL, 0) >= 1);
    for (int k = 0; k < 3; k++) {
        char *sample[] = { (char *)stat_bin(), "--session", sdir, "sample", "-n", "1", "-q",
                           "-o", outdir, NULL };
        CHECK_INT(stat_wait(stat_spawn(sample), 60000), 0);
        /* between samples the back-ends keep what they learned of each
         * target, and hold none of them stopped */
        all_running(&h, -1);
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/stat_hang.%04d/stat_hang.2D.txt", outdir, k);
        struct ttree t = { 0 };
        CHECK(parse_tree(path, &t) == 0);
        if (t.n) {
            char want[32];
            snprintf(want, sizeof want, "%d:[0-%d]", NTASK, NTASK - 1);
            CHECK_STR(t.v[0].label, want);
            if (k == 0)
                check_against_eu_stack(&h, &t);
        }
        free(t.v);
    }
    char *stop[] = { (char *)stat_bin(), "--session", sdir, "stop", "-q", NULL };
    CHECK_INT(stat_wait(stat_spawn(stop), 60000), 0);
    CHECK(access(sdir, F_OK) != 0);
    it_check_no_procs("after the session's stop");
    char *again[] = { (char *)stat_bin(), "--session", sdir, "sample", "-q", NULL };
    CHECK_INT(stat_wait(stat_spawn(again), 60000), 1);
    hang_stop(&h);
}

/* The lines of text between "\n" + after and the next blank line. */
static const char *section_after(const char *text, const char *after)
{
    const char *p = text ? strstr(text, after) : NULL;
    return p ? p + strlen(after) : NULL;
}

/* --classes: each class of the 2D tree, as its classes file has it, with the
 * command that attaches gdb to its representative under it: "gdb -p PID"
 * for a task of this host, "ssh -t HOST gdb -p PID" for another host's (a
 * stand-in ssh runs that host's back-end here). Ranks 1 and 3-7 are "on"
 * 198.51.100.21, ranks 0 and 2 here: the classes {0,3-7} (barrier), {1}
 * (compute) and {2} (checkpoint) have representatives of both kinds. */
ITEST(classes_name_a_debugger_line_for_each_representative)
{
    struct hang h;
    REQUIRE(hang_start(&h, 8) == 0);
    char list[1024] = "";
    for (size_t r = 0; r < 8; r++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s%d", r ? "," : "",
                 r == 0 || r == 2 ? "" : "198.51.100.21:", (int)h.pid[r]);
    char outdir[PATH_MAX], so[PATH_MAX + 8];
    snprintf(outdir, sizeof outdir, "%s/out", th_tmpdir());
    snprintf(so, sizeof so, "%s/stdout", th_tmpdir());
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(so, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(o, 1);
        setenv("TBON_RSH", it_src_path("tests/integration/rsh-local"), 1);
        execl(stat_bin(), "tbon_stat", "-n", "1", "--classes", "-o", outdir, "-p", list,
              (char *)NULL);
        _exit(127);
    }
    CHECK_INT(stat_wait(pid, IT_SLOW ? 120000 : 60000), 0);
    char *out = th_read_file(so), *cls = th_read_file(result_file(outdir, "2D.classes.txt"));
    REQUIRE(out && cls);
    /* no tree on the terminal, the classes instead */
    CHECK(strstr(out, "Merged stack traces") == NULL);
    const char *got = section_after(out, "how to attach a debugger:\n\n");
    CHECK(got != NULL);
    char want[4096] = "", me[256] = "";
    gethostname(me, sizeof me - 1);
    int ncls = 0;
    for (const char *l = cls; *l; l = strchr(l, '\n') + 1, ncls++) {
        const char *nl = strchr(l, '\n');
        REQUIRE(nl != NULL);
        unsigned rep;
        REQUIRE(sscanf(strstr(l, "rep "), "rep %u", &rep) == 1 && rep < 8);
        char line[512];
        if (rep == 0 || rep == 2)
            snprintf(line, sizeof line, "    gdb -p %d\n", (int)h.pid[rep]);
        else
            snprintf(line, sizeof line, "    ssh -t 198.51.100.21 gdb -p %d\n",
                     (int)h.pid[rep]);
        snprintf(want + strlen(want), sizeof want - strlen(want), "%.*s%s",
                 (int)(nl - l + 1), l, line);
    }
    CHECK_INT(ncls, 3);
    if (got && strncmp(got, want, strlen(want)) != 0)
        th_fail(__FILE__, __LINE__, "--classes printed:\n%s\nwanted:\n%s", got, want);
    CHECK(strstr(want, "rep 1 (198.51.100.21:") && strstr(want, "ssh -t 198.51.100.21 gdb"));
    CHECK(strstr(want, "rep 0 (") && strstr(want, "    gdb -p "));
    free(out);
    free(cls);
    hang_stop(&h);
}

/* -P of a launcher with an MPIR process table (stat/examples/mpir_launcher,
 * which keeps one as mpirun does): the ranks are the table's order (the
 * reverse of the workers' pids here), and a table that is not complete,
 * empty, or has an entry that is no host and pid is named in a note, the
 * launcher's descendants sampled instead. */
ITEST(mpir_table_gives_the_ranks_and_bad_tables_are_named)
{
    static const char *const modes[] = { "ok", "spawning", "empty", "badpid", "badhost" };
    static const char *const says[] = {
        "4 ranks from its MPIR process table (",
        "its MPIR process table is not complete (MPIR_proctable_size 4, MPIR_debug_state 0)",
        "its MPIR process table is empty",
        "its MPIR_proctable entry 1 (rank 1) is not a host and a pid (pid -5)",
        "its MPIR_proctable entry 2 (rank 2) is not a host and a pid",
    };
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        char cmd[PATH_MAX + 64];
        snprintf(cmd, sizeof cmd, "exec '%s/stat/examples/mpir_launcher' 4 %s", it_build_dir(),
                 modes[m]);
        FILE *l = popen(cmd, "r");
        REQUIRE(l != NULL);
        char line[128];
        int pid[4] = { 0 }, ready = fgets(line, sizeof line, l) && strcmp(line, "ready\n") == 0;
        for (int r = 0; ready && r < 4; r++) {
            int rr;
            ready = fgets(line, sizeof line, l) && sscanf(line, "%d %d", &rr, &pid[r]) == 2 &&
                    rr == r;
        }
        REQUIRE(ready);
        /* the launcher: popen's sh exec'ed it, so the workers' parent */
        char lp[16], out[PATH_MAX], run[4 * PATH_MAX + 256];
        char st[512] = "";
        int ppid = 0;
        const char *rp = tb_proc_read(pid[0], "stat", st, sizeof st) > 0 ? strrchr(st, ')') : NULL;
        REQUIRE(rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid > 1);
        snprintf(lp, sizeof lp, "%d", ppid);
        snprintf(out, sizeof out, "%s/out%zu", th_tmpdir(), m);
        snprintf(run, sizeof run, "'%s' -P %s -n 1 -q -o '%s' 2>'%s.err' >/dev/null", stat_bin(),
                 lp, out, out);
        CHECK_INT(system(run), 0);
        char errf[PATH_MAX + 8];
        snprintf(errf, sizeof errf, "%s.err", out);
        char *err = th_read_file(errf);
        if (!err || !strstr(err, says[m]))
            th_fail(__FILE__, __LINE__, "%s: stderr [%s] lacks \"%s\"", modes[m], err, says[m]);
        if (m > 0 && err && !strstr(err, "sampling its descendants on this host"))
            th_fail(__FILE__, __LINE__, "%s: no fallback said: %s", modes[m], err);
        free(err);
        char tasks_path[PATH_MAX + 64];
        snprintf(tasks_path, sizeof tasks_path, "%s/mpir_launcher.0000/mpir_launcher.tasks.txt",
                 out);
        char *tasks = th_read_file(tasks_path);
        REQUIRE(tasks != NULL);
        for (int r = 0; r < 4; r++) {
            /* "TASK RANK HOST PID -: path": the table's rank, or with the
             * fallback, the pid somewhere */
            char want[64];
            if (m == 0)
                snprintf(want, sizeof want, "\n%d %d ", r, r);
            const char *p = m == 0 ? strstr(tasks, want) : tasks;
            snprintf(want, sizeof want, " %d -: _start > ", pid[r]);
            const char *q = p ? strstr(p, want) : NULL;
            if (!q || (m == 0 && strchr(p + 1, '\n') < q))
                th_fail(__FILE__, __LINE__, "%s: rank %d (pid %d) is not so in %s", modes[m], r,
                        pid[r], tasks);
        }
        free(tasks);
        kill((pid_t)atoi(lp), SIGTERM);
        pclose(l);
    }
}

/* The counts-only JSON node c says what the full one f does: the same
 * frame, count and children, and its representative the lowest of f's
 * tasks. The number of nodes that differ. */
static int counts_differ(json_t *f, json_t *c, char *why, size_t cap)
{
    const char *tasks = json_string_value(json_object_get(f, "tasks"));
    const char *ff = json_string_value(json_object_get(f, "frame")),
               *cf = json_string_value(json_object_get(c, "frame"));
    json_t *fk = json_object_get(f, "children"), *ck = json_object_get(c, "children");
    if (!tasks || !ff || !cf || strcmp(ff, cf) != 0 ||
        json_integer_value(json_object_get(f, "count")) !=
            json_integer_value(json_object_get(c, "count")) ||
        json_integer_value(json_object_get(c, "rep")) != atoll(tasks + 1) ||
        json_array_size(fk) != json_array_size(ck)) {
        snprintf(why, cap, "full %s %s, counts-only %s %lld (rep %lld)", ff ? ff : "?",
                 tasks ? tasks : "?", cf ? cf : "?",
                 (long long)json_integer_value(json_object_get(c, "count")),
                 (long long)json_integer_value(json_object_get(c, "rep")));
        return 1;
    }
    int bad = 0;
    for (size_t i = 0; i < json_array_size(fk) && !bad; i++)
        bad += counts_differ(json_array_get(fk, i), json_array_get(ck, i), why, cap);
    return bad;
}

/* --counts-only on a 64-task hang through a 4x4 tree, beside a full run of
 * the same tasks: every node's count and representative are the full
 * tree's, in the 2D and 3D trees, also when a commnode is killed with -9
 * while the back-ends sample (trial 1): the sum is exact, not a double
 * count of what the adopters send again; and when a commnode is stopped
 * (SIGSTOP) until the front-end, missing its tasks, has asked again, then
 * let go (trial 2): its late answers of the older round count once. */
ITEST(counts_only_equals_the_full_merge_through_kill_and_pause)
{
    alarm(150);
    struct hang h;
    REQUIRE(hang_start(&h, NTASK) == 0);
    const char *topo = topo_4x4();
    REQUIRE(topo != NULL);
    char full[PATH_MAX];
    snprintf(full, sizeof full, "%s/full", th_tmpdir());
    char *fargv[] = { (char *)stat_bin(), "-n", "8", "-i", "50", "-q", "-t", (char *)topo,
                      "-o", full, "-p", (char *)pid_list(&h), NULL };
    CHECK_INT(stat_wait(stat_spawn(fargv), 60000), 0);
    for (int trial = 0; trial < 3; trial++) {
        char od[PATH_MAX + 16], errpath[PATH_MAX + 32];
        snprintf(od, sizeof od, "%s/counts%d", th_tmpdir(), trial);
        snprintf(errpath, sizeof errpath, "%s.err", od);
        const char *args[] = { "-n", "8", "-i", "50", "-q", "--counts-only", "-t", topo,
                               "-o", od, "-p", pid_list(&h), NULL };
        long base[NTASK];
        for (size_t i = 0; i < h.n; i++)
            base[i] = task_switches(h.pid[i]);
        pid_t sp = stat_spawn_err(args, errpath);
        if (trial == 1) {
            /* once the sampling has reached every task (conditions, not delays) */
            CHECK(wait_all_let_go(&h, base, 60000));
            CHECK(kill_one_commnode(sp));
        } else if (trial == 2) {
            CHECK(wait_all_let_go(&h, base, 60000));
            pid_t stopped = signal_a_commnode(sp, SIGSTOP);
            CHECK(stopped != 0);
            int64_t t0 = it_now_ms();
            char *err = NULL;
            while (it_now_ms() - t0 < 60000) {
                free(err);
                err = th_read_file(errpath);
                if (err && strstr(err, "asking again"))
                    break;
                it_sleep_ms(20);
            }
            if (!err || !strstr(err, "asking again"))
                th_fail(__FILE__, __LINE__, "the front-end did not ask again: %s", err);
            free(err);
            if (stopped)
                kill(stopped, SIGCONT);
        }
        CHECK_INT(stat_wait(sp, 60000), 0);
        static const char *const which[] = { "2D.json", "3D.json" };
        for (int w = 0; w < 2; w++) {
            json_error_t je;
            json_t *f = json_load_file(result_file(full, which[w]), 0, &je);
            json_t *c = json_load_file(result_file(od, which[w]), 0, &je);
            char why[1024] = "";
            if (!f || !c)
                th_fail(__FILE__, __LINE__, "trial %d: no %s", trial, which[w]);
            else if (counts_differ(f, c, why, sizeof why))
                th_fail(__FILE__, __LINE__, "trial %d, %s: %s", trial, which[w], why);
            json_decref(f);
            json_decref(c);
        }
        char *perf = th_read_file(result_file(od, "perf"));
        CHECK(perf && strstr(perf, "\ncounts_only 1\n") && strstr(perf, "\nmissing 0\n"));
        free(perf);
    }
    hang_stop(&h);
}

/* The page of a run (<exe>.html) in headless Chromium, checked by
 * tests/scripts/stat_view_check.py against the run's JSON: it loads with no
 * error; both trees as shown equal the JSON trees; the classes shown are
 * those computed from the trees, with their attach lines; a search finds
 * each leaf path's function, each class's rank and the host; focus and
 * select show the subtree and the attach line. For a 64-task hang sampled
 * 3 times with --threads (four paths: the barrier's, rank 3's second
 * thread's, the busy rank's and the sleeping one's; four classes), and
 * with --counts-only (no task lists, no classes). */
ITEST(viewer_page_in_chromium_equals_the_json)
{
    alarm(400);
    struct hang h;
    REQUIRE(hang_start(&h, NTASK) == 0);
    for (int counts = 0; counts < 2; counts++) {
        char od[PATH_MAX], cmd[4 * PATH_MAX + 512];
        snprintf(od, sizeof od, "%s/out%d", th_tmpdir(), counts);
        char *argv[] = { (char *)stat_bin(), "-n", "3", "-i", "50", "-q", "-o", od, "-p",
                         (char *)pid_list(&h), counts ? "--counts-only" : "--threads", NULL };
        CHECK_INT(stat_wait(stat_spawn(argv), 60000), 0);
        char rundir[PATH_MAX + 32];
        snprintf(rundir, sizeof rundir, "%s/stat_hang.0000", od);
        snprintf(cmd, sizeof cmd,
                 "timeout -k 5 300 /usr/bin/python3 '%s' --timeout 60 '%s/stat_hang.html' '%s' "
                 ">'%s/check.out' 2>&1", it_src_path("tests/scripts/stat_view_check.py"),
                 rundir, rundir, od);
        int rc = system(cmd);
        snprintf(cmd, sizeof cmd, "%s/check.out", od);
        char *out = th_read_file(cmd);
        if (rc != 0 || !out || !strstr(out, " 0 failed"))
            th_fail(__FILE__, __LINE__, "%s: the page's check (exit %d):\n%s",
                    counts ? "--counts-only" : "full", rc, out ? out : "(no output)");
        free(out);
    }
    hang_stop(&h);
}
