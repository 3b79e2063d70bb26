/* st_plan.h - which tasks tbon_stat samples and through which tree
 * (st_plan.c). */
#ifndef TBON_ST_PLAN_H
#define TBON_ST_PLAN_H

#include "st_cli.h"
#include "st_prog.h"
#include "st_tasks.h"

/* The tasks the command line names (-p, --pids-file, -P, or the command
 * launched here, r->launched): into tasks, or for a job into *job (and
 * steps). 0, or an error whose message is in err. */
int st_find_tasks(const struct cli *c, struct run *r, st_tasks_t *tasks, uint32_t *job,
                  uint32_t *steps, size_t *nsteps, char *err, size_t errlen);

/* Tasks all on this host: the tree (-t, or the default one) started with
 * this program, self, as its back-ends, the tasks' ranks read meanwhile,
 * and each task given to a back-end (contiguous blocks of ranks) in r. */
void st_plan_local(const struct cli *c, const char *self, st_tasks_t *tasks, struct run *r);

/* Tasks on other hosts, or a Slurm job's (job, steps): one back-end per
 * host (over $TBON_RSH, or as an srun step of the job), each asked which
 * tasks it has; the tasks numbered in r. Ends the program (EXIT_RUN) when
 * there is nothing to sample. */
void st_plan_remote(const struct cli *c, const char *self, st_tasks_t *tasks, uint32_t job,
                    const uint32_t *steps, size_t nsteps, struct run *r);

#endif
