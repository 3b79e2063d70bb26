/* mpi_hang.c - an MPI job that hangs the common way: every rank but one
 * waits in MPI_Barrier for a rank that never comes, stuck in its own loop.
 *
 * Usage: mpirun -np N mpi_hang [STUCK_RANK]   (default: rank 1 is stuck)
 * Each rank prints "rank R pid P barrier" or "rank R pid P stuck" once it is
 * about to get there. It runs until it is killed (mpirun forwards SIGTERM).
 * tbon_stat's test and docs/stat.md use it: tbon_stat -P <mpirun pid> shows
 * the barrier ranks on one path and the stuck one on its own. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The stuck rank's loop: it polls a flag nobody sets (a lost message). */
static volatile int message_arrived;

__attribute__((noinline)) static void wait_for_lost_message(void)
{
    while (!message_arrived)
        usleep(1000);
}

__attribute__((noinline)) static void exchange_halo(int rank, int stuck)
{
    if (rank == stuck) {
        printf("rank %d pid %d stuck\n", rank, (int)getpid());
        fflush(stdout);
        wait_for_lost_message();
    }
}

__attribute__((noinline)) static void synchronise(int rank)
{
    printf("rank %d pid %d barrier\n", rank, (int)getpid());
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int stuck = argc > 1 ? atoi(argv[1]) : 1;
    if (stuck < 0 || stuck >= size)
        stuck = size - 1;
    exchange_halo(rank, stuck);
    synchronise(rank);
    MPI_Finalize();
    return 0;
}
