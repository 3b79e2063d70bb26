/* stat_hang.c - a "hung MPI job" to sample with tbon_stat: N worker processes
 * stuck in a few distinct, deterministic call paths chosen by their rank.
 *
 *   stat_hang N            start N workers, print "rank pid path" for each,
 *                          block until SIGTERM/SIGINT, then kill the workers
 *   stat_hang --worker R   (internal) one worker; PMI_RANK=R is in its env
 *
 * Rank 1 spins in user space, rank 2 sleeps in "I/O", every other rank waits
 * in a barrier that never completes; rank 3 has a second thread, waiting in
 * progress_thread. The function names are part of the tests' expectations
 * (tests/unit/test_walker.c): keep them stable. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 4096

/* The path (outermost first) a worker of rank r ends in; what the parent prints. */
/* $STAT_HANG_SCATTER=1 (inherited by the workers): ranks other than 1 go
 * to the barrier or the checkpoint by a hash of the rank, so that each
 * path's ranks are scattered (a merge's task sets of many ranges). */
static int scattered(int r)
{
    const char *v = getenv("STAT_HANG_SCATTER");
    return v && strcmp(v, "1") == 0 && r != 1 && ((unsigned)r * 2654435761u >> 13) % 2;
}

static const char *path_of(int r)
{
    if (r == 1)
        return "main>do_work>compute_loop>spin";
    if (r == 2 || scattered(r))
        return "main>do_work>write_checkpoint";
    return "main>do_work>exchange_data>barrier_wait";
}

/* Block forever in read(2): this process holds the pipe's write end too, so
 * no end-of-file ever comes, like a barrier whose peers never arrive. */
void barrier_wait(int fd)
{
    char c;
    for (;;) {
        ssize_t n = read(fd, &c, 1);
        if (n < 0 && errno != EINTR)
            _exit(3);
    }
}

/* Rank 3's helper thread, waiting for progress messages that never come. */
void *progress_thread(void *arg)
{
    barrier_wait(*(int *)arg);
    return NULL;
}

void exchange_data(int rank)
{
    static int fds[2];
    if (pipe(fds) != 0)
        _exit(3);
    pthread_t helper;
    if (rank == 3 && pthread_create(&helper, NULL, progress_thread, &fds[0]) != 0)
        _exit(3);
    barrier_wait(fds[0]);
}

/* Pure user-space work: the stack moves only below spin(). */
void spin(void)
{
    volatile unsigned long counter = 0;
    for (;;)
        counter++;
}

void compute_loop(void)
{
    /* Be gentle with the machine's other users: this burns a CPU. Nice 19
     * is not enough: the kernel still counts the CPU it runs on as busy when
     * it places a waking task, so on a small machine the work of everything
     * else (a sampler's back-ends, say) is packed onto the other CPUs.
     * SCHED_IDLE runs it only on a CPU nothing else wants. */
    struct sched_param sp = {0};
    if (sched_setscheduler(0, SCHED_IDLE, &sp) != 0 && setpriority(PRIO_PROCESS, 0, 19) != 0)
        _exit(3);
    spin();
}

void write_checkpoint(void)
{
    struct timespec ts = {3600, 0};
    for (;;)
        nanosleep(&ts, NULL);
}

void do_work(int rank)
{
    if (rank == 1)
        compute_loop();
    else if (rank == 2 || scattered(rank))
        write_checkpoint();
    else
        exchange_data(rank);
}

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    if (sig != SIGCHLD)
        stop_requested = 1;
}

/* Start worker r: a fresh exec of this program, so that PMI_RANK is in its
 * /proc/PID/environ where tbon_stat reads ranks from. */
static pid_t start_worker(int r, pid_t parent)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* Die with the parent, whichever way it goes (also SIGKILL). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    char rank[16];
    snprintf(rank, sizeof rank, "%d", r);
    if (setenv("PMI_RANK", rank, 1) != 0)
        _exit(2);
    execl("/proc/self/exe", "stat_hang", "--worker", rank, (char *)NULL);
    perror("stat_hang: exec /proc/self/exe");
    _exit(2);
}

/* The parent: start the workers, then reap any that die until told to stop. */
static int supervise(int n)
{
    static pid_t pids[MAX_WORKERS];
    pid_t self = getpid();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGCHLD, &sa, NULL);
    /* Signals arrive only inside sigsuspend: no lost wake-up. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old);

    for (int r = 0; r < n; r++) {
        pids[r] = start_worker(r, self);
        if (pids[r] < 0) {
            perror("stat_hang: fork");
            n = r;
            stop_requested = 1;
            break;
        }
        printf("%d %ld %s\n", r, (long)pids[r], path_of(r));
    }
    fflush(stdout);
    while (!stop_requested) {
        while (waitpid(-1, NULL, WNOHANG) > 0)   /* a worker was killed: reap it */
            ;
        sigsuspend(&old);
    }
    for (int r = 0; r < n; r++)
        kill(pids[r], SIGKILL);
    while (wait(NULL) > 0 || errno == EINTR)
        ;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--worker") == 0) {
        do_work(atoi(argv[2]));
        return 0;
    }
    int n = argc == 2 ? atoi(argv[1]) : 0;
    if (n < 1 || n > MAX_WORKERS) {
        fprintf(stderr, "usage: stat_hang N   (1 <= N <= %d)\n"
                "  starts N workers stuck in distinct call paths by rank and prints\n"
                "  \"rank pid path\" for each; SIGTERM or SIGINT ends them all\n",
                MAX_WORKERS);
        return 2;
    }
    return supervise(n);
}
