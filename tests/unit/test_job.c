/* test_job.c - tbon_stat's tasks across hosts: HOST:PID lists, ranks from an
 * environment, and a Slurm job's tasks found from /proc (stat/st_job.c) in a
 * job made of real child processes whose environments say SLURM_JOB_ID,
 * SLURM_STEP_ID and SLURM_PROCID */
#include "../harness.h"

#include "../../stat/st_job.h"
#include "../../stat/st_tasks.h"

#include <tbon/tbon.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TEST(host_pid_lists)
{
    char me[256] = "", list[600], err[256];
    gethostname(me, sizeof me - 1);
    st_tasks_t t = { 0 };
    snprintf(list, sizeof list, "n2:42,7,localhost:8,%s:9,n3.example.org:42", me);
    CHECK_INT(st_tasks_parse_list(&t, list, err, sizeof err), 0);
    CHECK_UINT(t.n, 5);
    if (t.n == 5) {
        CHECK_STR(t.v[0].host, "n2");
        CHECK_INT(t.v[0].pid, 42);
        CHECK(t.v[1].host == NULL);          /* a plain pid: this host */
        CHECK(t.v[2].host == NULL);          /* localhost and my own name: this host */
        CHECK(t.v[3].host == NULL);
        CHECK_INT(t.v[3].pid, 9);
        CHECK_STR(t.v[4].host, "n3.example.org");
    }
    CHECK_INT(st_tasks_remote(&t), 1);
    /* The same pid on two hosts is two tasks; on one host, one. */
    CHECK_INT(st_tasks_parse_list(&t, "n2:42,n3.example.org:42", err, sizeof err), 0);
    st_tasks_unique(&t);
    CHECK_UINT(t.n, 5);
    st_tasks_free(&t);
    CHECK_INT(st_tasks_parse_list(&t, "11,12", err, sizeof err), 0);
    CHECK_INT(st_tasks_remote(&t), 0);
    st_tasks_free(&t);

    CHECK_INT(st_tasks_parse_list(&t, "n2:", err, sizeof err), TBON_EINVAL);
    CHECK(strstr(err, "\"n2:\" is not a process id on a host (HOST:PID)") != NULL);
    CHECK_INT(st_tasks_parse_list(&t, ":5", err, sizeof err), TBON_EINVAL);
    CHECK(strstr(err, "is not a host name") != NULL);
    CHECK_INT(st_tasks_parse_list(&t, "n/2:5", err, sizeof err), TBON_EINVAL);
    CHECK(strstr(err, "\"n/2\" is not a host name") != NULL);
    CHECK_INT(st_tasks_parse_list(&t, "n2:5:6", err, sizeof err), TBON_EINVAL);
    CHECK_INT(st_tasks_parse_list(&t, "n2:0", err, sizeof err), TBON_EINVAL);
    st_tasks_free(&t);

    const char *f = th_write_file("pids", "# two hosts\nn1:100 n1:101\nn2:100, 5\n");
    CHECK_INT(st_tasks_read_file(&t, f, err, sizeof err), 0);
    CHECK_UINT(t.n, 4);
    if (t.n == 4) {
        CHECK_STR(t.v[2].host, "n2");
        CHECK(t.v[3].host == NULL);
    }
    st_tasks_free(&t);
    const char *bad = th_write_file("bad", "n1:100\nn1:x\n");
    CHECK_INT(st_tasks_read_file(&t, bad, err, sizeof err), TBON_EINVAL);
    CHECK(strstr(err, "bad:2: \"n1:x\" is not a process id") != NULL);
    st_tasks_free(&t);
}

TEST(rank_from_an_environment)
{
    static const char env1[] = "A=1\0SLURM_PROCID=5\0SLURM_STEP_NUM_TASKS=64\0PMI_RANK=7\0PMI_SIZE=8\0";
    int32_t rank, size;
    st_env_rank(env1, sizeof env1 - 1, &rank, &size);
    CHECK_INT(rank, 7);                      /* PMI_RANK before SLURM_PROCID */
    CHECK_INT(size, 8);
    static const char env2[] = "SLURM_PROCID=5\0SLURM_NTASKS=16\0";
    st_env_rank(env2, sizeof env2 - 1, &rank, &size);
    CHECK_INT(rank, 5);
    CHECK_INT(size, 16);
    static const char env3[] = "SLURM_PROCID=x5\0PMIX_RANK=\0";
    st_env_rank(env3, sizeof env3 - 1, &rank, &size);
    CHECK_INT(rank, -1);
    CHECK_INT(size, -1);
    CHECK_STR(st_env_get(env1, sizeof env1 - 1, "A"), "1");
    CHECK(st_env_get(env1, sizeof env1 - 1, "SLURM_PROC") == NULL);
}

/* A child that runs argv with exactly the environment env. */
static pid_t spawn_env(char *const argv[], char *const env[])
{
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execve(argv[0], argv, env);
        _exit(127);
    }
    return pid;
}

/* A fake task of job `job`: sleep (or sh -c "sleep; true", a wrapper whose
 * child is the task) with SLURM_JOB_ID, SLURM_STEP_ID (step < 0: none, as
 * in the batch step) and SLURM_PROCID set. */
static pid_t fake_task(uint32_t job, long step, int procid, int ntasks, int wrapped)
{
    static char envs[16][6][64];
    static int used;
    char (*e)[64] = envs[used++ % 16];
    snprintf(e[0], 64, "SLURM_JOB_ID=%u", job);
    snprintf(e[1], 64, "SLURM_PROCID=%d", procid);
    snprintf(e[2], 64, "SLURM_STEP_NUM_TASKS=%d", ntasks);
    snprintf(e[3], 64, "PATH=/usr/bin:/bin");
    snprintf(e[4], 64, "SLURM_STEP_ID=%ld", step);
    char *env[6] = { e[0], e[1], e[2], e[3], step >= 0 ? e[4] : NULL, NULL };
    char *sleep_argv[] = { "/bin/sleep", "30", NULL };
    char *sh_argv[] = { "/bin/sh", "-c", "/bin/sleep 30; true", NULL };
    return spawn_env(wrapped ? sh_argv : sleep_argv, env);
}

/* Scan until n tasks are found (the children exec meanwhile), 10 s at most. */
static size_t scan_until(uint32_t job, const uint32_t *steps, size_t nsteps, uint32_t skip,
                         const pid_t *allowed, size_t nallowed, size_t n, st_jtask_t **out)
{
    char err[256];
    size_t got = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        *out = NULL;
        CHECK_INT(st_job_scan(job, steps, nsteps, skip, allowed, nallowed, NULL, out, &got,
                              err, sizeof err), 0);
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (got == n || t.tv_sec - t0.tv_sec > 10)
            return got;
        free(*out);
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

/* Wait (at most ms) until pid has a child that runs comm, its environment
 * readable: its pid, or 0. */
static pid_t wait_child(pid_t pid, const char *comm, int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
        FILE *f = fopen(path, "r");
        int kid = 0;
        if (f) {
            if (fscanf(f, "%d", &kid) != 1)
                kid = 0;
            fclose(f);
        }
        /* Its name changes before exec has set up its environment (begin_new_exec
         * runs before create_elf_tables): a scan between the two would find the
         * child without the job's variables and take the shell for the task. */
        if (kid > 0 && th_wait_comm(kid, comm, 0)) {
            size_t len = 0;
            char *env = st_proc_environ(kid, &len);
            int ready = env && st_env_get(env, len, "SLURM_JOB_ID") != NULL;
            free(env);
            if (ready)
                return kid;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
            return 0;
        struct timespec ts = { 0, 5 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

TEST(job_tasks_from_proc)
{
    /* A job id no real job here has. */
    uint32_t job = 3000000000u + (uint32_t)getpid();
    pid_t kids[8];
    int nk = 0;
    pid_t r0 = kids[nk++] = fake_task(job, 0, 0, 3, 0);
    pid_t wr = kids[nk++] = fake_task(job, 0, 1, 3, 1);      /* rank 1 under a shell */
    pid_t s1 = kids[nk++] = fake_task(job, 1, 0, 1, 0);      /* another step */
    kids[nk++] = fake_task(job, -1, 0, 1, 0);                /* the batch step: no step id */
    kids[nk++] = fake_task(job + 1, 0, 2, 3, 0);             /* another job */
    pid_t own = kids[nk++] = fake_task(job, 7, 0, 1, 0);     /* tbon_stat's own step */
    for (int i = 0; i < nk; i++)
        if (kids[i] != wr)
            th_wait_comm(kids[i], "sleep", 5000);
    /* The wrapper's task is its child: scanned before the shell forked it,
     * the shell alone would be rank 1 (seen once in five runs). */
    pid_t wr_task = wait_child(wr, "sleep", 5000);
    CHECK(wr_task > 0);

    /* Every step but 7: ranks 0 and 1 of step 0 (1 is the sleep, not its
     * shell), rank 0 of step 1. Rank 2 of step 0 is not there: size says 3. */
    st_jtask_t *t = NULL;
    size_t n = scan_until(job, NULL, 0, 7, NULL, 0, 3, &t);
    CHECK_UINT(n, 3);
    if (n == 3) {
        CHECK_UINT(t[0].step, 0);
        CHECK_INT(t[0].pid, r0);
        CHECK_INT(t[0].rank, 0);
        CHECK_INT(t[0].size, 3);
        CHECK_UINT(t[1].step, 0);
        CHECK_INT(t[1].rank, 1);
        CHECK_INT(t[1].pid, wr_task);         /* the shell's child, not the shell */
        CHECK_UINT(t[2].step, 1);
        CHECK_INT(t[2].pid, s1);
    }
    free(t);

    /* One step asked for. */
    uint32_t want = 1;
    n = scan_until(job, &want, 1, ST_STEP_NONE, NULL, 0, 1, &t);
    CHECK_UINT(n, 1);
    if (n == 1)
        CHECK_INT(t[0].pid, s1);
    free(t);

    /* With no step skipped, step 7 is a step like the others. */
    n = scan_until(job, NULL, 0, ST_STEP_NONE, NULL, 0, 4, &t);
    CHECK_UINT(n, 4);
    int saw_own = 0;
    for (size_t i = 0; i < n; i++)
        saw_own |= t[i].pid == own;
    CHECK(saw_own);
    free(t);

    /* Only what scontrol listpids would list: a process that merely has the
     * job's environment is not the job's. */
    pid_t allowed[] = { r0, s1 };
    n = scan_until(job, NULL, 0, 7, allowed, 2, 2, &t);
    CHECK_UINT(n, 2);
    if (n == 2) {
        CHECK_INT(t[0].pid, r0);
        CHECK_INT(t[1].pid, s1);
    }
    free(t);

    /* Gone tasks are gone. */
    for (int i = 0; i < nk; i++)
        kill(-kids[i], SIGKILL);
    while (wait(NULL) > 0)
        ;
    n = scan_until(job, NULL, 0, ST_STEP_NONE, NULL, 0, 0, &t);
    CHECK_UINT(n, 0);
    free(t);
}

TEST(run_a_command)
{
    char *out = NULL, err[256];
    char *const ok[] = { "/bin/sh", "-c", "echo one; echo two >&2; exit 3", NULL };
    CHECK_INT(st_run(ok, &out, err, sizeof err), 3);
    CHECK_STR(out, "one\n");
    CHECK_STR(err, "two");
    free(out);
    char *const none[] = { "/nonexistent/program", NULL };
    CHECK_INT(st_run(none, &out, err, sizeof err), -1);
    CHECK(strstr(err, "/nonexistent/program") != NULL);
    free(out);
}

/* A copy of /bin/sh named name in the test's directory: a process that runs
 * it has that executable's name, as an ssh or an srun would. */
static const char *fake_program(const char *name)
{
    static char path[2][512];
    static int k;
    char *p = path[k++ % 2];
    snprintf(p, 512, "%s/%s", th_tmpdir(), name);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp /bin/sh '%s'", p);
    CHECK_INT(system(cmd), 0);
    return p;
}

/* Wait until n of pid's children run exe (by /proc/PID/exe). */
static int wait_children(pid_t parent, const char *exe, int n)
{
    for (int i = 0; i < 500; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "test \"$(for c in $(pgrep -P %d); do readlink /proc/$c/exe; "
                 "done | grep -cx '%s')\" -eq %d", (int)parent, exe, n);
        if (system(cmd) == 0)
            return 1;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* A launcher (a shell) whose children are two "ssh" to n7 and me@n8.x: its
 * tasks are on other hosts, named from the ssh command lines; one with an
 * "srun" child: a Slurm step's, the srun named. */
TEST(launchers_with_remote_tasks)
{
    const char *ssh = fake_program("ssh");
    char script[2048];
    /* "-c" takes a value for ssh (a cipher), so the host is the next word;
     * "sleep; true" keeps the shell (the "ssh") from exec'ing sleep. */
    snprintf(script, sizeof script,
             "'%s' -c 'sleep 30; true' n7 & '%s' -x -c 'sleep 30; true' me@n8.x 2>/dev/null & wait",
             ssh, ssh);
    char *argv[] = { "/bin/sh", "-c", script, NULL };
    char *env[] = { "PATH=/usr/bin:/bin", NULL };
    pid_t l = spawn_env(argv, env);
    CHECK(wait_children(l, ssh, 2));
    pid_t srun = 1;
    char hosts[256];
    CHECK_INT(st_tasks_launcher_remote(l, &srun, hosts, sizeof hosts), ST_REMOTE_SSH);
    CHECK(strstr(hosts, "n7") != NULL);
    CHECK(strstr(hosts, "n8.x") != NULL && strstr(hosts, "me@") == NULL);
    CHECK_INT(srun, 0);
    kill(-l, SIGKILL);
    waitpid(l, NULL, 0);

    const char *fsrun = fake_program("srun");
    snprintf(script, sizeof script, "'%s' -c 'sleep 30; true' & wait", fsrun);
    l = spawn_env(argv, env);
    CHECK(wait_children(l, fsrun, 1));
    CHECK_INT(st_tasks_launcher_remote(l, &srun, hosts, sizeof hosts), ST_REMOTE_SRUN);
    CHECK(srun > 0 && srun != l);
    /* The srun itself. */
    pid_t s2 = 0;
    CHECK_INT(st_tasks_launcher_remote(srun, &s2, hosts, sizeof hosts), ST_REMOTE_SRUN);
    CHECK_INT(s2, srun);
    kill(-l, SIGKILL);
    waitpid(l, NULL, 0);

    /* A launcher of local processes only. */
    snprintf(script, sizeof script, "sleep 30 & wait");
    l = spawn_env(argv, env);
    CHECK(wait_children(l, "/usr/bin/sleep", 1));
    CHECK_INT(st_tasks_launcher_remote(l, &srun, hosts, sizeof hosts), ST_REMOTE_NONE);
    kill(-l, SIGKILL);
    waitpid(l, NULL, 0);
}
