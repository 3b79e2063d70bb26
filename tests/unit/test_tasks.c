/* test_tasks.c - tbon_stat's task lists: -p lists, pids files, launchers'
 * descendants, and ranks from the environment (stat/st_tasks.c) */
#include "../harness.h"

#include "../../stat/st_tasks.h"

#include <tbon/tbon.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TEST(parse_list)
{
    st_tasks_t t = { 0 };
    char err[256];
    CHECK_INT(st_tasks_parse_list(&t, "10,20, 30", err, sizeof err), 0);
    CHECK_UINT(t.n, 3);
    if (t.n == 3) {
        CHECK_INT(t.v[0].pid, 10);
        CHECK_INT(t.v[2].pid, 30);
    }
    CHECK_INT(st_tasks_parse_list(&t, "5,x7", err, sizeof err), TBON_EINVAL);
    CHECK(strstr(err, "\"x7\" is not a process id") != NULL);
    CHECK_INT(st_tasks_parse_list(&t, "0", err, sizeof err), TBON_EINVAL);
    CHECK_INT(st_tasks_parse_list(&t, "99999999999", err, sizeof err), TBON_EINVAL);
    CHECK_INT(st_tasks_parse_list(&t, ",,", err, sizeof err), TBON_EINVAL);
    CHECK(strstr(err, "no process id") != NULL);
    st_tasks_free(&t);
}

TEST(read_file)
{
    st_tasks_t t = { 0 };
    char err[512];
    const char *ok = th_write_file("ok", "# the job\n1 2,3\n\n4 # last\n");
    CHECK_INT(st_tasks_read_file(&t, ok, err, sizeof err), 0);
    CHECK_UINT(t.n, 4);
    st_tasks_free(&t);
    const char *bad = th_write_file("bad", "1\n2\n3-4\n");
    CHECK_INT(st_tasks_read_file(&t, bad, err, sizeof err), TBON_EINVAL);
    CHECK(strstr(err, "bad:3: \"3-4\" is not a process id") != NULL);
    st_tasks_free(&t);
    const char *empty = th_write_file("empty", "# nothing\n");
    CHECK_INT(st_tasks_read_file(&t, empty, err, sizeof err), TBON_EINVAL);
    CHECK(strstr(err, "no process id") != NULL);
    CHECK_INT(st_tasks_read_file(&t, "/nonexistent/pids", err, sizeof err), TBON_EIO);
    CHECK(strstr(err, "/nonexistent/pids") != NULL);
    st_tasks_free(&t);
}

/* A child that sleeps with RANK_VAR=rank in its environment (or none). */
static pid_t sleeper(const char *var, long rank, const char *exe)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char kv[64];
        if (var) {
            snprintf(kv, sizeof kv, "%s=%ld", var, rank);
            putenv(kv);
        }
        execl(exe, exe, "30", (char *)NULL);
        _exit(127);
    }
    return pid;
}


TEST(ranks_from_environment)
{
    pid_t p[3];
    p[0] = sleeper("PMI_RANK", 2, "/bin/sleep");
    p[1] = sleeper("PMI_RANK", 0, "/bin/sleep");
    p[2] = sleeper("PMI_RANK", 1, "/bin/sleep");
    for (int i = 0; i < 3; i++)
        CHECK(th_wait_comm(p[i], "sleep", 5000));
    st_tasks_t t = { 0 };
    char list[64], err[256];
    snprintf(list, sizeof list, "%d,%d,%d,%d", (int)p[0], (int)p[1], (int)p[2], (int)p[0]);
    CHECK_INT(st_tasks_parse_list(&t, list, err, sizeof err), 0);
    CHECK_INT(st_tasks_rank(&t), 1);
    CHECK_UINT(t.n, 3);                      /* the duplicate is gone */
    if (t.n == 3) {
        CHECK_INT(t.v[0].pid, p[1]);         /* sorted by rank */
        CHECK_UINT(t.v[0].rank, 0);
        CHECK_INT(t.v[2].pid, p[0]);
        CHECK_UINT(t.v[2].rank, 2);
    }
    st_tasks_free(&t);
    /* One without a rank: positions, in list order. */
    pid_t q = sleeper(NULL, 0, "/bin/sleep");
    CHECK(th_wait_comm(q, "sleep", 5000));
    snprintf(list, sizeof list, "%d,%d,%d", (int)p[0], (int)q, (int)p[1]);
    CHECK_INT(st_tasks_parse_list(&t, list, err, sizeof err), 0);
    CHECK_INT(st_tasks_rank(&t), 0);
    if (t.n == 3) {
        CHECK_INT(t.v[0].pid, p[0]);
        CHECK_UINT(t.v[0].rank, 0);
        CHECK_INT(t.v[1].pid, q);
        CHECK_UINT(t.v[2].rank, 2);
    }
    st_tasks_free(&t);
    for (int i = 0; i < 3; i++)
        kill(p[i], SIGKILL);
    kill(q, SIGKILL);
    while (wait(NULL) > 0)
        ;
}

/* A shell launcher (our child) with three sleeps under it: the sleeps, not
 * the shell. */
TEST(launcher_descendants)
{
    pid_t sh = fork();
    if (sh == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execl("/bin/sh", "sh", "-c", "sleep 30 & sleep 30 & (sleep 30 & wait) & wait",
              (char *)NULL);
        _exit(127);
    }
    st_tasks_t t = { 0 };
    char err[256];
    size_t n = 0;
    for (int i = 0; i < 200 && n < 3; i++) {
        st_tasks_free(&t);
        CHECK_INT(st_tasks_from_launcher(&t, sh, err, sizeof err), 0);
        n = 0;
        for (size_t k = 0; k < t.n; k++)
            n += strcmp(st_task_exe_name(t.v[k].pid), "sleep") == 0;
        if (n < 3 || n != t.n) {
            struct timespec ts = { 0, 10 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
    }
    CHECK_UINT(n, 3);
    CHECK_UINT(t.n, 3);
    st_tasks_free(&t);
    CHECK_INT(st_tasks_from_launcher(&t, 999999999, err, sizeof err), TBON_EINVAL);
    CHECK(strstr(err, "no such process") != NULL);
    kill(-sh, SIGKILL);
    waitpid(sh, NULL, 0);
    st_tasks_free(&t);
}
