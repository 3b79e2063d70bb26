/* st_procs.c - the processes tbon_stat's front-end starts besides the tree:
 * -C's command (its own process group, stopped at the end unless --keep)
 * and --jobid's srun step of back-ends (one task per node, without the
 * allocation's SLURM_* settings); the waits for them, on a pidfd, which the
 * self-pipe of SIGINT and SIGTERM wakes. */
#include "st_procs.h"

#include "st_prog.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

volatile sig_atomic_t st_interrupted;

/* The self-pipe of SIGINT and SIGTERM: whichever thread the signal lands on,
 * a wait of the main thread (st_wait_child) wakes. */
static int g_sigpipe[2] = { -1, -1 };

static void on_signal(int sig)
{
    (void)sig;
    int e = errno;
    st_interrupted = 1;
    if (g_sigpipe[1] >= 0) {
        ssize_t k = write(g_sigpipe[1], "", 1);     /* full: a wake-up is there already */
        (void)k;
    }
    errno = e;
}

void st_catch_signals(void)
{
    if (pipe2(g_sigpipe, O_CLOEXEC | O_NONBLOCK) != 0)
        g_sigpipe[0] = g_sigpipe[1] = -1;   /* the waits then wake every 200 ms at most */
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Wait until the child pid ends, fd (if >= 0) becomes readable, the first
 * SIGINT or SIGTERM comes, or ms pass (ms < 0: no limit). The child's end
 * comes through a pidfd, so this blocks instead of looking again and again;
 * on a kernel without pidfd_open (before 5.3) it wakes every 20 ms for the
 * caller to look. Returns 1 with the wait status in *status (if not NULL)
 * once the child has ended and is reaped (or is no child of ours), else 0. */
int st_wait_child(pid_t pid, int fd, int ms, int *status)
{
    int st = 0;
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == 0) {
        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        /* Negative fds are skipped: after a signal, its pipe is left out
         * (it stays readable; the waits that follow are the clean-up's). */
        struct pollfd p[3] = { { pfd, POLLIN, 0 }, { fd, POLLIN, 0 },
                               { st_interrupted ? -1 : g_sigpipe[0], POLLIN, 0 } };
        int cap = pfd < 0 ? 20 : g_sigpipe[0] < 0 ? 200 : -1;
        poll(p, 3, cap >= 0 && (ms < 0 || ms > cap) ? cap : ms);
        if (pfd >= 0)
            close(pfd);
        w = waitpid(pid, &st, WNOHANG);
    }
    if (w == 0 || (w < 0 && errno != ECHILD))
        return 0;
    if (status)
        *status = st;
    return 1;
}

/* -C: start the command in its own process group. */
pid_t st_launch(char **cmd, double wait_s)
{
    pid_t pid = fork();
    if (pid < 0)
        st_die("-C: fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        execvp(cmd[0], cmd);
        fprintf(stderr, PROG ": -C %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    double end = st_now() + wait_s;
    while (st_now() < end && !st_interrupted) {
        int status;
        if (st_wait_child(pid, -1, st_ms_until(end), &status))
            st_die("-C %s: it ended (status %d) before it could be sampled", cmd[0],
                   WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    return pid;
}

/* SIGTERM to the command's group, SIGKILL after 2 s; reaped if it ended. */
void st_stop_command(pid_t pid)
{
    kill(-pid, SIGTERM);
    double end = st_now() + 2;
    while (!st_wait_child(pid, -1, st_ms_until(end), NULL) && st_now() < end)
        ;
    kill(-pid, SIGKILL);
    st_wait_child(pid, -1, 1000, NULL);
}

/* The environment of the back-ends' srun: this one without SLURM_* (an
 * allocation tbon_stat may run in would set srun's task count and the
 * rest), but with SLURM_CONF. */
static char **srun_env(void)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **e = st_xcalloc(n + 1, sizeof *e);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "SLURM_", 6) != 0 || strncmp(environ[i], "SLURM_CONF=", 11) == 0)
            e[k++] = environ[i];
    e[k] = NULL;
    return e;
}

/* One srun step of the job, one task per node: tbon_stat --be-attach. */
pid_t st_start_srun(uint32_t job, char **nodes, size_t n, const tbon_rank_t *leaf,
                    const char *self, const char *attach)
{
    size_t cap = 64, len = 0;
    for (size_t i = 0; i < n; i++)
        cap += strlen(nodes[i]) + 16;
    char *map = st_xcalloc(cap, 1), *list = st_xcalloc(cap, 1);
    for (size_t i = 0; i < n; i++) {
        len += (size_t)snprintf(map + len, cap - len, "%s%s=%u", i ? "," : "", nodes[i],
                                leaf[i]);
        strcat(list, i ? "," : "");
        strcat(list, nodes[i]);
    }
    char jobopt[32], nopt[32], topt[32];
    snprintf(jobopt, sizeof jobopt, "--jobid=%u", job);
    snprintf(nopt, sizeof nopt, "--nodes=%zu", n);
    snprintf(topt, sizeof topt, "--ntasks=%zu", n);
    char *wl = malloc(strlen(list) + 16);
    if (!wl)
        st_die("out of memory");
    sprintf(wl, "--nodelist=%s", list);
    char *const argv[] = { "srun", "--overlap", jobopt, nopt, topt, "--ntasks-per-node=1", wl,
                           "--kill-on-bad-exit=1", "--quiet", (char *)self, "--be-attach",
                           (char *)attach, map, NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
    char **env = srun_env();
    pid_t pid;
    int rc = posix_spawnp(&pid, "srun", &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    free(map);
    free(list);
    free(wl);
    if (rc != 0)
        st_die("--jobid %u: cannot run srun: %s", job, strerror(rc));
    return pid;
}

/* Wait for the back-ends' srun to end (it does once the tree is closed):
 * then interrupt it as srun wants (two SIGINTs end a step), then kill it. */
void st_stop_srun(pid_t pid, double wait_s)
{
    double dl = st_now() + wait_s;
    int sent = 0;
    while (!st_wait_child(pid, -1, st_ms_until(dl), NULL)) {
        if (st_now() < dl)
            continue;           /* a signal came */
        if (sent == 4) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return;
        }
        kill(pid, sent < 2 ? SIGINT : SIGTERM);
        sent++;
        dl = st_now() + (sent == 2 ? 1.0 : 0.2);
    }
}
