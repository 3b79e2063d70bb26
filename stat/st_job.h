/* st_job.h - the tasks of a Slurm job: which processes of this node belong to
 * it (from /proc and scontrol listpids), and the questions tbon_stat's
 * front-end asks Slurm (the job's nodes, the step of an srun) (docs/stat.md) */
#ifndef TBON_ST_JOB_H
#define TBON_ST_JOB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A step id no step has (steps: any; skip_step: none). The batch, extern and
 * interactive steps have no SLURM_STEP_ID in their environment and are never
 * taken. */
#define ST_STEP_NONE UINT32_MAX

typedef struct st_jtask {
    pid_t pid;
    int32_t rank;       /* from the environment (see st_env_rank), -1 if none */
    int32_t size;       /* the number of tasks that rank is one of, -1 if unknown */
    uint32_t step;      /* SLURM_STEP_ID */
} st_jtask_t;

/* The rank of a task from its environment block (NAME=VALUE\0...):
 * OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, SLURM_PROCID, the first one set,
 * and the size that goes with it (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * SLURM_STEP_NUM_TASKS, SLURM_NTASKS); -1 for what is not there. */
void st_env_rank(const char *env, size_t len, int32_t *rank, int32_t *size);

/* The value of NAME in an environment block, or NULL. */
const char *st_env_get(const char *env, size_t len, const char *name);

/* The environment block of pid (malloc'ed, NUL-terminated after len), or
 * NULL when it cannot be read (gone, another user's). */
char *st_proc_environ(pid_t pid, size_t *len);

/* The tasks of job on this node, from every /proc/PID/environ: SLURM_JOB_ID
 * is job and SLURM_STEP_ID a number, one of steps[0..nsteps) (nsteps 0: any
 * step) and not skip_step (tbon_stat's own step). Left out: processes that
 * run self_exe (may be NULL) or slurmstepd; with allowed non-NULL, every pid
 * not in allowed[0..nallowed) (what scontrol listpids gave: a process that
 * only copied the environment is not the job's); and a process with a
 * descendant among the others of its step (a wrapper: sh -c, orted), so the
 * program it runs is the task. Sorted by step, rank, pid. 0, or TBON_EIO /
 * TBON_ENOMEM with err filled. */
int st_job_scan(uint32_t job, const uint32_t *steps, size_t nsteps, uint32_t skip_step,
                const pid_t *allowed, size_t nallowed, const char *self_exe,
                st_jtask_t **out, size_t *n, char *err, size_t errlen);

/* `scontrol listpids JOB` on this node: the pids of the job's processes here
 * (*pids malloc'ed). 0, or TBON_EIO with scontrol's message in err. */
int st_job_listpids(uint32_t job, pid_t **pids, size_t *n, char *err, size_t errlen);

/* The front-end's questions. The job's nodes, if it is running: *nodes is a
 * malloc'ed array of malloc'ed Slurm node names (st_job_free_nodes). Errors
 * say what Slurm said: no such job, not running (and its state), no
 * scontrol. */
int st_job_nodes(uint32_t job, char ***nodes, size_t *n, char *err, size_t errlen);
void st_job_free_nodes(char **nodes, size_t n);

/* The job and step that the srun with process id pid on host started
 * (scontrol show steps: "SrunHost:Pid=host:pid"). 0, TBON_ENOTFOUND (no step
 * names it) or TBON_EIO, with err filled. */
int st_job_of_srun(const char *host, pid_t pid, uint32_t *job, uint32_t *step, char *err,
                   size_t errlen);

/* Run argv (no shell) and collect its standard output (malloc'ed, NUL-
 * terminated) and error (the first line, into err). Returns the exit status
 * (0-255, 128+signal) or -1 when it could not be started (err says why). */
int st_run(char *const argv[], char **out, char *err, size_t errlen);

#endif
