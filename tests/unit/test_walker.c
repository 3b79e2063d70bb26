/* test_walker.c - the stack walker (stat/st_walker.h) on live processes: the
 * stacks of stat_hang's workers against eu-stack's, threads, module and line
 * names, processes that are gone or cannot be traced, targets stopped by
 * someone else, thread churn, and a sampler killed with SIGKILL mid-sample.
 * Every case leaves its targets running, and none behind. */
#include "../harness.h"
#include "walker_helpers.h"

#include "../../stat/st_walker.h"
#include <tbon/common.h>

#include <dlfcn.h>
#include <grp.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* ---- helpers ---- */

/* Sample pid; the stacks, with *n set (NULL on a failed call). */
static st_stack_t *sample(st_walker_t *w, pid_t pid, size_t *n)
{
    st_stack_t *s = NULL;
    *n = 0;
    int rc = st_sample(w, pid, &s, n);
    if (rc < 1 || (size_t)rc != *n || !s) {
        th_fail(__FILE__, __LINE__, "st_sample(%ld) returned %d", (long)pid, rc);
        st_stacks_free(s, *n);
        return NULL;
    }
    return s;
}

static void print_stack(const char *what, const st_stack_t *s)
{
    fprintf(stderr, "    %s (tid %ld):", what, (long)s->tid);
    for (size_t i = 0; i < s->n; i++)
        fprintf(stderr, " %s", s->frames[i]);
    fputc('\n', stderr);
}

/* Whether the '>'-separated names of path appear in s, one after the other. */
static bool has_path(const st_stack_t *s, const char *path)
{
    char buf[256], *names[16];
    int k = 0;
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save, *t = strtok_r(buf, ">", &save); t && k < 16; t = strtok_r(NULL, ">", &save))
        names[k++] = t;
    for (size_t i = 0; i + (size_t)k <= s->n; i++) {
        int j = 0;
        while (j < k && strcmp(s->frames[i + (size_t)j], names[j]) == 0)
            j++;
        if (j == k)
            return true;
    }
    return false;
}

/* Whether s's first frames (all but the last skip_inner) are eu's thread t's. */
static bool same_as_eu(const st_stack_t *s, const tw_eu_t *eu, int t, size_t skip_inner)
{
    bool same = s->n == (size_t)eu->n[t];
    for (size_t i = 0; same && i + skip_inner < s->n; i++)
        same = strcmp(s->frames[i], eu->name[t][i]) == 0;
    if (!same) {
        print_stack("walker", s);
        fprintf(stderr, "    eu-stack (tid %ld):", (long)eu->tid[t]);
        for (int i = 0; i < eu->n[t]; i++)
            fprintf(stderr, " %s", eu->name[t][i]);
        fputc('\n', stderr);
    }
    return same;
}

/* eu's thread of tid, or -1. */
static int eu_thread(const tw_eu_t *eu, pid_t tid)
{
    for (int t = 0; t < eu->nthreads; t++)
        if (eu->tid[t] == tid)
            return t;
    return -1;
}

/* Whether s is the single frame f. */
static bool only_frame(const st_stack_t *s, size_t n, pid_t pid, const char *f)
{
    bool ok = n == 1 && s[0].tid == pid && s[0].n == 1 && strcmp(s[0].frames[0], f) == 0;
    if (!ok && n >= 1)
        print_stack("got", &s[0]);
    return ok;
}

/* Run body with a fresh stat_hang of n workers, stopped afterwards whatever
 * body did (a REQUIRE in it returns here). */
static void with_hang(int n, void (*body)(tw_hang_t *h))
{
    tw_hang_t h;
    REQUIRE(tw_hang_start(&h, n));
    body(&h);
    tw_hang_stop(&h);
}

/* ---- stacks as eu-stack sees them ---- */

/* The worker of rank r: its stack holds its path and equals eu-stack's,
 * also on a second sample; it runs on. */
static void check_worker(tw_hang_t *h, int r)
{
    st_walker_t *w = st_walker_new(0);
    REQUIRE(w);
    for (int round = 0; round < 2; round++) {
        size_t n;
        st_stack_t *s = sample(w, h->pid[r], &n);
        REQUIRE(s);
        CHECK(tw_running(h->pid[r]));
        CHECK_INT(n, 1);
        CHECK_INT(s[0].tid, h->pid[r]);
        CHECK(has_path(&s[0], h->path[r]));
        CHECK_STR(s[0].frames[0], "_start");
        tw_eu_t eu;
        CHECK(tw_eu_stack(h->pid[r], false, &eu));
        int t = eu_thread(&eu, h->pid[r]);
        CHECK(t >= 0 && same_as_eu(&s[0], &eu, t, 0));
        st_stacks_free(s, n);
    }
    st_walker_free(w);
}

static void barrier_body(tw_hang_t *h)
{
    check_worker(h, 0);
    CHECK_STR(h->path[0], "main>do_work>exchange_data>barrier_wait");
}

TEST(barrier_worker_matches_eu_stack)
{
    with_hang(1, barrier_body);
}

static void checkpoint_body(tw_hang_t *h)
{
    check_worker(h, 2);
    CHECK_STR(h->path[2], "main>do_work>write_checkpoint");
}

TEST(checkpoint_worker_matches_eu_stack)
{
    with_hang(3, checkpoint_body);
}

/* The spinner moves: sample until it is in spin, then compare all frames
 * but the innermost with eu-stack's. */
static void spin_body(tw_hang_t *h)
{
    pid_t pid = h->pid[1];
    st_walker_t *w = st_walker_new(0);
    REQUIRE(w);
    st_stack_t *s = NULL;
    size_t n = 0;
    for (double t0 = tw_now_ms(); tw_now_ms() - t0 < 10000; tw_nap()) {
        s = sample(w, pid, &n);
        REQUIRE(s);
        CHECK(tw_running(pid));
        if (s[0].n > 0 && strcmp(s[0].frames[s[0].n - 1], "spin") == 0)
            break;
        st_stacks_free(s, n);
        s = NULL;
    }
    REQUIRE(s);
    CHECK(has_path(&s[0], "main>do_work>compute_loop>spin"));
    tw_eu_t eu;
    CHECK(tw_eu_stack(pid, false, &eu));
    int t = eu_thread(&eu, pid);
    CHECK(t >= 0 && same_as_eu(&s[0], &eu, t, 1));
    st_stacks_free(s, n);
    st_walker_free(w);
}

TEST(spinning_worker_outer_frames)
{
    with_hang(2, spin_body);
}

/* Rank 3 has two threads: both with ST_WALK_THREADS (the main one first),
 * only the main one without. */
static void threads_body(tw_hang_t *h)
{
    pid_t pid = h->pid[3];
    st_walker_t *all = st_walker_new(ST_WALK_THREADS), *main_only = st_walker_new(0);
    REQUIRE(all && main_only);
    size_t n;
    st_stack_t *s = sample(all, pid, &n);
    REQUIRE(s);
    CHECK(tw_running(pid));
    REQUIRE(n == 2);
    CHECK_INT(s[0].tid, pid);
    CHECK(s[1].tid != pid);
    CHECK(has_path(&s[0], h->path[3]));
    CHECK(has_path(&s[1], "progress_thread>barrier_wait"));
    CHECK(has_path(&s[1], "start_thread>progress_thread"));
    tw_eu_t eu;
    CHECK(tw_eu_stack(pid, false, &eu));
    for (size_t i = 0; i < n; i++) {
        int t = eu_thread(&eu, s[i].tid);
        CHECK(t >= 0 && same_as_eu(&s[i], &eu, t, 0));
    }
    st_stacks_free(s, n);

    s = sample(main_only, pid, &n);
    REQUIRE(s);
    CHECK_INT(n, 1);
    CHECK_INT(s[0].tid, pid);
    CHECK(has_path(&s[0], h->path[3]));
    st_stacks_free(s, n);
    CHECK(tw_running(pid));
    st_walker_free(all);
    st_walker_free(main_only);
}

TEST(threads)
{
    with_hang(4, threads_body);
}

/* "module`func@file:line" as eu-stack -s -m prints them; each part alone. */
static void detail_body(tw_hang_t *h)
{
    pid_t pid = h->pid[0];
    st_walker_t *w = st_walker_new(ST_WALK_MODULES | ST_WALK_LINES);
    st_walker_t *wm = st_walker_new(ST_WALK_MODULES), *wl = st_walker_new(ST_WALK_LINES);
    REQUIRE(w && wm && wl);
    size_t n;
    st_stack_t *s = sample(w, pid, &n);
    REQUIRE(s);
    tw_eu_t eu;
    CHECK(tw_eu_stack(pid, true, &eu));
    int t = eu_thread(&eu, pid);
    CHECK(t >= 0 && same_as_eu(&s[0], &eu, t, 0));
    bool found = false;
    for (size_t i = 0; i < s[0].n; i++)
        found |= strncmp(s[0].frames[i], "stat_hang`barrier_wait@stat_hang.c:", 35) == 0;
    CHECK(found);
    st_stacks_free(s, n);

    s = sample(wm, pid, &n);
    REQUIRE(s);
    CHECK(has_path(&s[0], "stat_hang`exchange_data>stat_hang`barrier_wait"));
    st_stacks_free(s, n);
    s = sample(wl, pid, &n);
    REQUIRE(s);
    found = false;
    for (size_t i = 0; i < s[0].n; i++)
        found |= strncmp(s[0].frames[i], "barrier_wait@stat_hang.c:", 25) == 0;
    CHECK(found);
    st_stacks_free(s, n);
    CHECK(tw_running(pid));
    st_walker_free(w);
    st_walker_free(wm);
    st_walker_free(wl);
}

TEST(modules_and_lines)
{
    with_hang(1, detail_body);
}

/* Repeated samples (from the walker's cache, and after st_walker_forget) give
 * the same stack; the cost of a first and a repeated sample, for the record. */
static void repeat_body(tw_hang_t *h)
{
    st_walker_t *w = st_walker_new(0);
    REQUIRE(w);
    size_t n0;
    double t0 = tw_now_ms();
    st_stack_t *first = sample(w, h->pid[0], &n0);
    double t1 = tw_now_ms();
    REQUIRE(first);
    int reps = 50;
    for (int i = 0; i <= reps; i++) {
        if (i == reps / 2)
            st_walker_forget(w, h->pid[0]);
        size_t n;
        st_stack_t *s = sample(w, h->pid[0], &n);
        REQUIRE(s);
        CHECK_INT(n, 1);
        CHECK_INT(s[0].n, first[0].n);
        for (size_t f = 0; f < s[0].n && f < first[0].n; f++)
            CHECK_STR(s[0].frames[f], first[0].frames[f]);
        st_stacks_free(s, n);
    }
    double t2 = tw_now_ms();
    /* Other processes of the same program, first samples with a warm walker. */
    double t3 = tw_now_ms();
    for (int r = 3; r < h->n; r++) {
        size_t n;
        st_stack_t *s = sample(w, h->pid[r], &n);
        REQUIRE(s);
        CHECK(has_path(&s[0], h->path[r]));
        st_stacks_free(s, n);
    }
    double t4 = tw_now_ms();
    fprintf(stderr, "    sample cost: first %.2f ms (fresh walker), first of another "
            "process %.3f ms, repeated %.3f ms\n", t1 - t0, (t4 - t3) / (h->n - 3),
            (t2 - t1) / (reps + 1));
    st_stacks_free(first, n0);
    CHECK(tw_running(h->pid[0]));
    st_walker_free(w);
}

TEST(repeated_samples)
{
    with_hang(8, repeat_body);
}

/* Between two samples the target maps memory and loads a library: the
 * walker reports its modules again (its cached Dwfl stays attached), and the
 * stack is the same. */
TEST_LONG(maps_change_between_samples)
{
    int fds[2], ack[2];
    REQUIRE(pipe(fds) == 0);
    REQUIRE(pipe(ack) == 0);
    pid_t me = getpid();
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != me)
            _exit(1);
        close(fds[1]);
        close(ack[0]);
        char c;
        while (read(fds[0], &c, 1) == 1) {
            if (mmap(NULL, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
                _exit(1);
            (void)dlopen("libresolv.so.2", RTLD_NOW);
            /* Done: dlopen reads files too, so "in read(2)" alone does not
             * say the child is back at the pipe. */
            if (write(ack[1], "a", 1) != 1)
                _exit(1);
        }
        _exit(0);
    }
    close(fds[0]);
    close(ack[1]);
    static const long rd[] = {0};
    for (double t0 = tw_now_ms(); !tw_in_syscall(child, rd, 1, 1) && tw_now_ms() - t0 < 5000;)
        tw_nap();
    st_walker_t *w = st_walker_new(0);
    REQUIRE(w);
    size_t n0;
    st_stack_t *first = sample(w, child, &n0);
    REQUIRE(first);
    char maps0[65536];
    CHECK(tw_read(child, "maps", maps0, sizeof maps0) > 0);
    for (int round = 0; round < 3; round++) {
        CHECK(write(fds[1], "x", 1) == 1);
        char a;
        CHECK(read(ack[0], &a, 1) == 1);
        /* Wait until it has mapped and is back in read(2). */
        char maps[65536] = "";
        for (double t0 = tw_now_ms(); tw_now_ms() - t0 < 5000; tw_nap())
            if (tw_read(child, "maps", maps, sizeof maps) > 0 && strcmp(maps, maps0) != 0 &&
                tw_in_syscall(child, rd, 1, 1))
                break;
        CHECK(strcmp(maps, maps0) != 0);
        memcpy(maps0, maps, sizeof maps);
        size_t n;
        st_stack_t *s = sample(w, child, &n);
        REQUIRE(s);
        CHECK_INT(n, 1);
        CHECK_INT(s[0].n, first[0].n);
        for (size_t f = 0; f < s[0].n && f < first[0].n; f++)
            CHECK_STR(s[0].frames[f], first[0].frames[f]);
        st_stacks_free(s, n);
        CHECK(tw_running(child));
    }
    st_stacks_free(first, n0);
    close(fds[1]);
    close(ack[0]);
    waitpid(child, NULL, 0);
    st_walker_free(w);
}

/* ---- processes that are gone or cannot be traced ---- */

static void exited_body(tw_hang_t *h)
{
    pid_t pid = h->pid[0];
    st_walker_t *w = st_walker_new(ST_WALK_THREADS);
    REQUIRE(w);
    size_t n;
    st_stack_t *s = sample(w, pid, &n);       /* the walker now knows pid */
    REQUIRE(s);
    st_stacks_free(s, n);
    REQUIRE(kill(pid, SIGKILL) == 0);
    /* stat_hang reaps it; until then it is a zombie, also "exited". */
    for (double t0 = tw_now_ms(); tw_state(pid) != 0 && tw_state(pid) != 'Z' &&
         tw_now_ms() - t0 < 5000;)
        tw_nap();
    s = sample(w, pid, &n);
    REQUIRE(s);
    CHECK(only_frame(s, n, pid, "[task exited]"));
    st_stacks_free(s, n);
    st_walker_forget(w, pid);
    st_walker_free(w);
}

TEST(killed_worker_is_task_exited)
{
    with_hang(1, exited_body);
}

TEST(gone_and_zombie_pids)
{
    st_walker_t *w = st_walker_new(0);
    REQUIRE(w);
    st_stack_t *s = NULL;
    size_t n = 7;
    CHECK_INT(st_sample(w, 0, &s, &n), TBON_EINVAL);
    CHECK_INT(st_sample(w, -5, &s, &n), TBON_EINVAL);
    CHECK_INT(st_sample(NULL, 1, &s, &n), TBON_EINVAL);

    /* A zombie: our child, not reaped yet. */
    pid_t z = fork();
    REQUIRE(z >= 0);
    if (z == 0)
        _exit(0);
    for (double t0 = tw_now_ms(); tw_state(z) != 'Z' && tw_now_ms() - t0 < 5000;)
        tw_nap();
    s = sample(w, z, &n);
    REQUIRE(s);
    CHECK(only_frame(s, n, z, "[task exited]"));
    st_stacks_free(s, n);
    /* Reaped: no such process any more. */
    waitpid(z, NULL, 0);
    s = sample(w, z, &n);
    REQUIRE(s);
    CHECK(only_frame(s, n, z, "[task exited]"));
    st_stacks_free(s, n);
    st_walker_free(w);
}

/* A process another tracer holds: EPERM, and the tracer is not disturbed. */
static void traced_body(tw_hang_t *h)
{
    pid_t pid = h->pid[0];
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t tracer = fork();
    REQUIRE(tracer >= 0);
    if (tracer == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char ok = ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0 ? 'y' : 'n';
        if (write(fds[1], &ok, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(fds[1]);
    char ok = 0;
    CHECK(read(fds[0], &ok, 1) == 1 && ok == 'y');
    close(fds[0]);
    st_walker_t *w = st_walker_new(ST_WALK_THREADS);
    REQUIRE(w);
    size_t n;
    st_stack_t *s = sample(w, pid, &n);
    if (s)
        CHECK(only_frame(s, n, pid, "[stackwalk error: ptrace: Operation not permitted]"));
    st_stacks_free(s, n);
    CHECK_INT(tw_tracer(pid), tracer);
    kill(tracer, SIGKILL);
    waitpid(tracer, NULL, 0);
    /* Free again: sampled as usual. */
    CHECK(tw_running(pid));
    s = sample(w, pid, &n);
    REQUIRE(s);
    CHECK(has_path(&s[0], h->path[0]));
    st_stacks_free(s, n);
    st_walker_free(w);
}

TEST(already_traced_is_eperm)
{
    with_hang(1, traced_body);
}

/* A sampler without the right to trace (root's target, sampled as nobody). */
static void unprivileged_body(tw_hang_t *h)
{
    pid_t pid = h->pid[0];
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(2);
        st_walker_t *w = st_walker_new(0);
        st_stack_t *s = NULL;
        size_t n = 0;
        int rc = w ? st_sample(w, pid, &s, &n) : -1;
        bool ok = rc == 1 &&
                  only_frame(s, n, pid, "[stackwalk error: ptrace: Operation not permitted]");
        st_stacks_free(s, n);
        st_walker_free(w);
        _exit(ok ? 0 : 1);
    }
    int st;
    waitpid(child, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(tw_running(pid));
}

TEST(unprivileged_is_eperm)
{
    if (geteuid() != 0) {
        fprintf(stderr, "    skipped: needs root (to sample a process of another user)\n");
        return;
    }
    with_hang(1, unprivileged_body);
}

/* ---- what the target goes through ---- */

/* Stopped by someone else (SIGSTOP): sampled, and still stopped after. */
static void stopped_body(tw_hang_t *h)
{
    pid_t pid = h->pid[0];
    REQUIRE(kill(pid, SIGSTOP) == 0);
    for (double t0 = tw_now_ms(); tw_state(pid) != 'T' && tw_now_ms() - t0 < 5000;)
        tw_nap();
    CHECK(tw_state(pid) == 'T');
    st_walker_t *w = st_walker_new(ST_WALK_THREADS);
    REQUIRE(w);
    size_t n;
    st_stack_t *s = sample(w, pid, &n);
    if (s)
        CHECK(has_path(&s[0], h->path[0]));
    st_stacks_free(s, n);
    /* The detach wakes it; it goes back into the group stop by itself. */
    for (double t0 = tw_now_ms(); tw_state(pid) != 'T' && tw_now_ms() - t0 < 5000;)
        tw_nap();
    CHECK(tw_state(pid) == 'T');
    CHECK_INT(tw_tracer(pid), 0);
    kill(pid, SIGCONT);
    for (double t0 = tw_now_ms(); tw_state(pid) == 'T' && tw_now_ms() - t0 < 5000;)
        tw_nap();
    CHECK(tw_running(pid));
    st_walker_free(w);
}

TEST(stopped_target_stays_stopped)
{
    with_hang(1, stopped_body);
}

static void *short_thread(void *arg)
{
    return arg;
}

/* Threads come and go during the samples: those that end are skipped. A
 * thread caught in clone3 right after the system call (glibc's __clone3 has
 * no CFI there, the new thread's stack is still empty) cannot be unwound:
 * an error frame right after its clone frame, as eu-stack has it too. Any
 * other error fails. */
TEST(thread_churn)
{
    pid_t me = getpid();
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != me)
            _exit(1);
        for (;;) {
            pthread_t t[3];
            for (int i = 0; i < 3; i++)
                if (pthread_create(&t[i], NULL, short_thread, NULL) != 0)
                    _exit(1);
            for (int i = 0; i < 3; i++)
                pthread_join(t[i], NULL);
        }
    }
    st_walker_t *w = st_walker_new(ST_WALK_THREADS);
    REQUIRE(w);
    int errors = 0, multi = 0, born = 0;
    for (int i = 0; i < 100; i++) {
        size_t n;
        st_stack_t *s = sample(w, child, &n);
        if (!s)
            break;
        CHECK_INT(s[0].tid, child);
        multi += n > 1;
        for (size_t k = 0; k < n; k++) {
            size_t f = s[k].n;
            bool bad = f == 0 || strncmp(s[k].frames[f - 1], "[", 1) == 0;
            if (bad && f >= 2 && strstr(s[k].frames[f - 2], "clone"))
                bad = false, born++;
            if (bad && errors++ < 3)
                print_stack("error", &s[k]);
        }
        st_stacks_free(s, n);
        CHECK(tw_running(child));
    }
    CHECK_INT(errors, 0);
    fprintf(stderr, "    %d of 100 samples caught more than one thread, %d a thread in clone3\n",
            multi, born);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    st_walker_free(w);
}

/* SIGKILL the sampler while it holds a target stopped: the kernel detaches
 * the target, which runs on (it was never sent SIGSTOP). */
static void killed_sampler_body(tw_hang_t *h)
{
    int caught = 0;
    for (int round = 0; round < 20 && caught < 5; round++) {
        pid_t victim = h->pid[round % 2 == 0 ? 0 : 1];   /* blocked, and spinning */
        pid_t me = getpid();
        pid_t sampler = fork();
        REQUIRE(sampler >= 0);
        if (sampler == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != me)
                _exit(1);
            st_walker_t *w = st_walker_new(ST_WALK_THREADS);
            for (;;) {
                st_stack_t *s;
                size_t n;
                if (st_sample(w, victim, &s, &n) > 0)
                    st_stacks_free(s, n);
            }
        }
        /* Kill it the moment the target is seen in its stop. */
        bool seen = false;
        for (double t0 = tw_now_ms(); !seen && tw_now_ms() - t0 < 1000;)
            seen = tw_state(victim) == 't';
        kill(sampler, SIGKILL);
        int st;
        waitpid(sampler, &st, 0);
        caught += seen;
        char after = tw_state(victim);
        if (after == 't' || after == 'T' || tw_tracer(victim) != 0)
            th_fail(__FILE__, __LINE__, "round %d: target %ld in state %c (tracer %ld) "
                    "after its sampler was killed", round, (long)victim, after,
                    tw_tracer(victim));
    }
    CHECK(caught > 0);
    /* And they still answer. */
    st_walker_t *w = st_walker_new(0);
    REQUIRE(w);
    size_t n;
    st_stack_t *s = sample(w, h->pid[0], &n);
    REQUIRE(s);
    CHECK(has_path(&s[0], h->path[0]));
    st_stacks_free(s, n);
    st_walker_free(w);
}

TEST(sampler_killed_mid_sample)
{
    with_hang(2, killed_sampler_body);
}

/* ---- one walker, many processes: ELF files shared by file, not by path ---- */

/* Copy file from to to (mode 0755) through a new inode. */
static bool copy_exe(const char *from, const char *to)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.new", to);
    FILE *in = fopen(from, "rb"), *out = fopen(tmp, "wb");
    bool ok = in && out;
    char buf[65536];
    size_t k;
    while (ok && (k = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, k, out) == k;
    if (in)
        fclose(in);
    if (out)
        ok = fclose(out) == 0 && ok;
    return ok && chmod(tmp, 0755) == 0 && rename(tmp, to) == 0;
}

/* A child running path with args, its stdin a pipe nobody writes to (so
 * "cat" blocks in read); *wfd the pipe's write end. */
static pid_t spawn(const char *path, const char *arg, int *wfd)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[0], 0);
        close(p[0]);
        close(p[1]);
        execl(path, path, arg, (char *)NULL);
        _exit(127);
    }
    close(p[0]);
    *wfd = p[1];
    return pid;
}

/* Wait (2 s at most) until pid is in one of the nr[0, n) system calls. */
static void wait_in(pid_t pid, const long *nr, int n)
{
    for (int i = 0; i < 1000 && !tw_in_syscall(pid, nr, n, 0); i++)
        tw_nap();
}

/* Kill and reap a spawn()ed child, and close its pipe. */
static void end_child(pid_t pid, int wfd)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(wfd);
}

static const long nr_sleep[] = { SYS_clock_nanosleep, SYS_nanosleep }, nr_read[] = { SYS_read };

/* Sample pid with w and check the stack against eu-stack's: the same
 * frames, a frame eu-stack has no name for (a stripped program's own
 * functions) being "module+0xOFFSET" here. Returns how many are named. */
static int check_against_eu(st_walker_t *w, pid_t pid)
{
    size_t n;
    int named = 0;
    st_stack_t *s = sample(w, pid, &n);
    if (!s)
        return 0;
    tw_eu_t eu;
    CHECK(tw_eu_stack(pid, false, &eu));
    int t = eu_thread(&eu, pid);
    bool same = t >= 0 && s[0].n == (size_t)eu.n[t];
    for (size_t i = 0; same && i < s[0].n; i++) {
        named += eu.name[t][i][0] != '\0';
        same = eu.name[t][i][0] ? strcmp(s[0].frames[i], eu.name[t][i]) == 0
                                : strstr(s[0].frames[i], "+0x") != NULL;
    }
    if (!same && t >= 0)
        same_as_eu(&s[0], &eu, t, 0);      /* prints both */
    CHECK(same);
    CHECK(tw_running(pid));
    st_stacks_free(s, n);
    return named;
}

/* Two programs run from the same path, one after the other (the file
 * replaced in between, as a rebuild does): one walker samples both, and
 * each stack is named from its own file, as eu-stack names it. */
TEST_LONG(replaced_executable_at_the_same_path)
{
    char exe[PATH_MAX];
    snprintf(exe, sizeof exe, "%s/prog", th_tmpdir());
    st_walker_t *w = st_walker_new(0);
    REQUIRE(w);
    REQUIRE(copy_exe("/bin/sleep", exe));
    int fd1, fd2;
    pid_t a = spawn(exe, "100", &fd1);
    REQUIRE(a > 0);
    wait_in(a, nr_sleep, 2);
    CHECK(check_against_eu(w, a) >= 3);
    REQUIRE(copy_exe("/bin/cat", exe));
    pid_t b = spawn(exe, "-", &fd2);
    REQUIRE(b > 0);
    wait_in(b, nr_read, 1);
    CHECK(check_against_eu(w, b) >= 3);
    CHECK(check_against_eu(w, a) >= 3);     /* still named from the first file */
    end_child(a, fd1);
    end_child(b, fd2);
    st_walker_free(w);
}

/* A loop on clock_gettime, which the vDSO serves without a system call. */
__attribute__((noinline)) static void vdso_caller(void)
{
    struct timespec ts;
    for (;;)
        clock_gettime(CLOCK_MONOTONIC, &ts);
}

/* A process caught inside the vDSO: the walker reports the vDSO module
 * from the maps and unwinds through it with the vDSO's own CFI, so the
 * frames outside it are the ones a sample in the caller gives. */
TEST(stack_inside_the_vdso)
{
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        vdso_caller();
    }
    st_walker_t *w = st_walker_new(0);
    REQUIRE(w);
    int caught = 0, samples = 0;
    double until = tw_now_ms() + 5000;
    while (caught < 3 && tw_now_ms() < until) {
        size_t n;
        st_stack_t *s = sample(w, pid, &n);
        if (!s)
            break;
        samples++;
        const st_stack_t *t = &s[0];
        /* The innermost frame is the vDSO's: named from its symbols
         * (__vdso_clock_gettime) or "[vdso]+0x..." */
        size_t k = t->n ? t->n - 1 : 0;
        if (t->n > 1 && (strncmp(t->frames[k], "__vdso_", 7) == 0 ||
                         strncmp(t->frames[k], "[vdso]", 6) == 0)) {
            caught++;
            bool found = false;         /* vdso_caller outside it, main further out */
            for (size_t i = 0; i < k; i++)
                found |= strcmp(t->frames[i], "vdso_caller") == 0;
            if (!found || strcmp(t->frames[0], "_start") != 0)
                print_stack("inside the vDSO", t);
            CHECK(found);
            CHECK_STR(t->frames[0], "_start");
        }
        st_stacks_free(s, n);
    }
    fprintf(stderr, "    %d of %d samples inside the vDSO\n", caught, samples);
    CHECK(caught > 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    st_walker_free(w);
}

/* fork() with the pid want, if the kernel gives it (root sets the last pid
 * handed out; another process forking in between takes it): the child runs
 * path arg as spawn() does. -1 if not. */
static pid_t spawn_as(pid_t want, const char *path, const char *arg, int *wfd)
{
    for (int tries = 0; tries < 20; tries++) {
        FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");
        if (!f)
            return -1;
        fprintf(f, "%d", (int)want - 1);
        if (fclose(f) != 0)
            return -1;
        pid_t pid = spawn(path, arg, wfd);
        if (pid == want)
            return pid;
        if (pid > 0)
            end_child(pid, *wfd);
    }
    return -1;
}

/* A pid used again by another program: the walker, which knew the first
 * process under that pid, names the second one's stack from its own files,
 * as eu-stack does. */
static void pid_reused(unsigned flags)
{
    if (geteuid() != 0) {
        fprintf(stderr, "    skipped: needs root to choose a pid\n");
        return;
    }
    st_walker_t *w = st_walker_new(flags);
    REQUIRE(w);
    int fd1, fd2;
    pid_t a = spawn("/bin/sleep", "100", &fd1);
    REQUIRE(a > 0);
    wait_in(a, nr_sleep, 2);
    CHECK(check_against_eu(w, a) >= 3);
    end_child(a, fd1);
    pid_t b = spawn_as(a, "/bin/cat", "-", &fd2);
    if (b < 0) {
        fprintf(stderr, "    skipped: pid %d was taken by another process\n", (int)a);
        st_walker_free(w);
        return;
    }
    wait_in(b, nr_read, 1);
    CHECK(check_against_eu(w, b) >= 3);
    end_child(b, fd2);
    st_walker_free(w);
}

TEST_LONG(pid_reused_by_another_program)
{
    pid_reused(0);
}

/* The same with libdwfl's own attach (hosts other than x86-64), whose Dwfl
 * the walker starts again for the new process. */
TEST_LONG(pid_reused_by_another_program_libdwfl_attach)
{
    pid_reused(ST_WALK_LIBDWFL);
}

/* libdwfl's own attach, which the walker uses on hosts other than x86-64,
 * gives the stacks eu-stack gives, as ours does: every stat_hang worker,
 * both threads of rank 3. */
static void libdwfl_body(tw_hang_t *h)
{
    st_walker_t *ours = st_walker_new(ST_WALK_THREADS);
    st_walker_t *lib = st_walker_new(ST_WALK_THREADS | ST_WALK_LIBDWFL);
    REQUIRE(ours && lib);
    for (int r = 0; r < h->n; r++) {
        if (r == 1)
            continue;                   /* the spinner's stack moves */
        size_t n1, n2;
        st_stack_t *a = sample(ours, h->pid[r], &n1), *b = sample(lib, h->pid[r], &n2);
        tw_eu_t eu;
        CHECK(tw_eu_stack(h->pid[r], false, &eu));
        CHECK(a && b && n1 == n2 && n1 == (size_t)eu.nthreads);
        for (size_t i = 0; a && b && i < n1 && i < n2; i++) {
            int t = eu_thread(&eu, b[i].tid);
            CHECK(t >= 0 && same_as_eu(&b[i], &eu, t, 0));
            CHECK(a[i].tid == b[i].tid && t >= 0 && same_as_eu(&a[i], &eu, t, 0));
        }
        st_stacks_free(a, n1);
        st_stacks_free(b, n2);
        CHECK(tw_running(h->pid[r]));
    }
    st_walker_free(ours);
    st_walker_free(lib);
}

TEST(libdwfl_attach_matches_eu_stack)
{
    with_hang(4, libdwfl_body);
}
