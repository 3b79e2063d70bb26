/* st_mpir.h - a launcher's MPIR process table: the MPI debugging interface
 * that mpirun (Open MPI, MPICH's hydra) and srun keep in their memory, the
 * host, executable and pid of every rank, in rank order (docs/stat.md,
 * "A job of mpirun on many hosts"). */
#ifndef TBON_ST_MPIR_H
#define TBON_ST_MPIR_H

#include "st_tasks.h"

#include <sys/types.h>

/* Append the tasks of launcher's MPIR process table to t, rank i being the
 * table's entry i (a host that is this one gives a task of this host), and
 * write the executable of rank 0 into exe (cap bytes). 1 when the launcher
 * has no MPIR table (no MPIR_proctable symbol in its program or libraries:
 * not an MPI launcher; t unchanged); 0; or an error said in err (the table
 * empty or still being filled, unreadable memory, an entry that makes no
 * sense), t unchanged. Reads the launcher's memory as ptrace would, without
 * stopping it. */
int st_mpir_tasks(pid_t launcher, st_tasks_t *t, char *exe, size_t cap, char *err,
                  size_t errlen);

#endif
