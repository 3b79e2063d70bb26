/* mpir_launcher.c - a launcher that keeps an MPIR process table as mpirun
 * does (the MPI debugging interface: MPIR_proctable, MPIR_proctable_size,
 * MPIR_debug_state), for tbon_stat -P's tests: good tables and bad ones.
 *
 *   mpir_launcher N [MODE]
 *
 * starts N workers (children that wait in worker_wait until the launcher
 * ends), fills the table and prints "ready" and then "RANK PID" per rank.
 * The table lists the workers in the reverse of their start order, so a
 * rank is the table's order, not the pids' order. MODE:
 *   ok        a complete table (MPIR_debug_state 1, MPIR_DEBUG_SPAWNED)
 *   spawning  the same, but MPIR_debug_state still 0: not complete yet
 *   empty     MPIR_proctable_size 0
 *   badpid    rank 1's pid is -5
 *   badhost   rank 2's host name points nowhere
 * It runs until SIGTERM or SIGINT; the workers end with it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define MAX_WORKERS 256

/* What a debugger reads (names and layout as the MPIR interface has them). */
struct MPIR_PROCDESC {
    char *host_name;
    char *executable_name;
    int pid;
};
struct MPIR_PROCDESC *MPIR_proctable;
int MPIR_proctable_size;
volatile int MPIR_debug_state;
volatile int MPIR_being_debugged;

static volatile sig_atomic_t done;

static void on_signal(int sig)
{
    (void)sig;
    done = 1;
}

__attribute__((noinline)) static void worker_wait(void)
{
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 0;
    const char *mode = argc > 2 ? argv[2] : "ok";
    if (n < 3 || n > MAX_WORKERS) {
        fprintf(stderr, "usage: mpir_launcher N [ok|spawning|empty|badpid|badhost] (3 <= N <= %d)\n",
                MAX_WORKERS);
        return 2;
    }
    static struct MPIR_PROCDESC table[MAX_WORKERS];
    static char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[k > 0 ? k : 0] = '\0';
    pid_t pids[MAX_WORKERS];
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("mpir_launcher: fork");
            return 1;
        }
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() == 1)
                _exit(0);
            worker_wait();
        }
    }
    for (int r = 0; r < n; r++)
        table[r] = (struct MPIR_PROCDESC){ "localhost", exe, (int)pids[n - 1 - r] };
    if (strcmp(mode, "badpid") == 0)
        table[1].pid = -5;
    else if (strcmp(mode, "badhost") == 0)
        table[2].host_name = (char *)16;
    MPIR_proctable = table;
    MPIR_proctable_size = strcmp(mode, "empty") == 0 ? 0 : n;
    MPIR_debug_state = strcmp(mode, "spawning") == 0 ? 0 : 1;

    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    printf("ready\n");
    for (int r = 0; r < n; r++)
        printf("%d %d\n", r, (int)pids[n - 1 - r]);
    fflush(stdout);
    while (!done)
        pause();
    for (int i = 0; i < n; i++)
        kill(pids[i], SIGKILL);
    return 0;
}
