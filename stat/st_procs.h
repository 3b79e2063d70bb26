/* st_procs.h - the processes tbon_stat's front-end starts besides the tree
 * (-C's command, --jobid's srun step of back-ends) and its waits for them,
 * which SIGINT and SIGTERM cut short (st_procs.c). */
#ifndef TBON_ST_PROCS_H
#define TBON_ST_PROCS_H

#include <tbon/tbon.h>

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Set by the first SIGINT or SIGTERM. */
extern volatile sig_atomic_t st_interrupted;

/* Catch SIGINT and SIGTERM (st_interrupted, and a wake-up for the waits
 * below), ignore SIGPIPE. */
void st_catch_signals(void);

/* Wait until the child pid ends, fd (if >= 0) becomes readable, the first
 * SIGINT or SIGTERM comes, or ms pass (ms < 0: no limit). Returns 1 with
 * the wait status in *status (if not NULL) once the child has ended and is
 * reaped (or is no child of ours), else 0. */
int st_wait_child(pid_t pid, int fd, int ms, int *status);

/* -C: start cmd in its own process group and let it run wait_s seconds
 * (dies if it ends meanwhile); its pid. */
pid_t st_launch(char **cmd, double wait_s);
/* SIGTERM to the command's group, SIGKILL after 2 s; reaped if it ended. */
void st_stop_command(pid_t pid);

/* --jobid: one srun step of the job, one task per node (nodes[0..n)):
 * "self --be-attach attach NODE=RANK,..." with leaf[k] node k's rank. Its
 * pid, or death. */
pid_t st_start_srun(uint32_t job, char **nodes, size_t n, const tbon_rank_t *leaf,
                    const char *self, const char *attach);
/* Wait up to wait_s for the srun to end (it does once the tree is closed),
 * then interrupt it as srun wants, then kill it. */
void st_stop_srun(pid_t pid, double wait_s);

#endif
