/* st_tasks.h - which processes tbon_stat samples, and their ranks: from a
 * list of pids, a pids file, or the descendants of a launcher (docs/stat.md) */
#ifndef TBON_ST_TASKS_H
#define TBON_ST_TASKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct st_task {
    pid_t pid;
    uint32_t rank;
    char *host;         /* NULL: this host (malloc'ed, freed by st_tasks_free) */
} st_task_t;

/* A parsed task list. */
typedef struct st_tasks {
    st_task_t *v;
    size_t n;
    const char *ranks_from;   /* the list's order is the ranks' (a launcher's
                                 MPIR table, static text), or NULL */
} st_tasks_t;

/* Append the tasks of "ITEM,ITEM,..." (what -p takes), each ITEM a PID (on
 * this host) or HOST:PID; a HOST that names this host (its name, short or
 * full, or localhost) is this host. 0, or TBON_EINVAL with the offending item
 * in err. */
int st_tasks_parse_list(st_tasks_t *t, const char *list, char *err, size_t errlen);

/* Every task listed on this host is there now: 0, or TBON_ENOTFOUND naming
 * the first that is not (and how a task of another host is named). A task
 * that ends while it is sampled is "[task exited]"; one that was never
 * there is an error, not a tree. */
int st_tasks_check_here(const st_tasks_t *t, char *err, size_t errlen);

/* Append the tasks of a file (PID or HOST:PID): one or more per line, separated by commas or
 * white space; '#' starts a comment. Errors name the file and line. */
int st_tasks_read_file(st_tasks_t *t, const char *path, char *err, size_t errlen);

/* Append the descendants of launcher (children, grandchildren, ...) that run
 * the executable most of them run, other than the launcher's own (an mpirun
 * or a shell starts helpers too); when none runs another executable, those
 * that run the launcher's (a program that forks its workers), and when there
 * are none, the launcher itself. Errors name the launcher. */
int st_tasks_from_launcher(st_tasks_t *t, pid_t launcher, char *err, size_t errlen);

/* 1 if some task is on another host. */
int st_tasks_remote(const st_tasks_t *t);

/* Is host[0..len) this host: its name, its short name, or localhost? */
int st_is_this_host(const char *host, size_t len);

/* Does a launcher run its tasks on other hosts? ST_REMOTE_SRUN when it is
 * an srun or has one among its descendants (*srun: the outermost), then its
 * tasks are a Slurm step's; ST_REMOTE_SSH when a descendant is an ssh or
 * rsh (an mpirun's remote daemons): hosts gets their hosts, comma-separated;
 * else ST_REMOTE_NONE. */
enum { ST_REMOTE_NONE, ST_REMOTE_SRUN, ST_REMOTE_SSH };
int st_tasks_launcher_remote(pid_t launcher, pid_t *srun, char *hosts, size_t cap);

/* Drop duplicate tasks (host and pid), keeping the first position of each: the number of
 * tasks st_tasks_rank leaves, known before it reads any environment. */
void st_tasks_unique(st_tasks_t *t);

/* Give every task its rank: from its environment (OMPI_COMM_WORLD_RANK,
 * PMI_RANK, PMIX_RANK, SLURM_PROCID, the first one set) when every task has
 * one and they are distinct, else its position in the list. Drops duplicate
 * pids. Then sorts the tasks by rank. With t->ranks_from, the positions
 * are the ranks (the environment is not read). Returns 1 if the ranks came
 * from the environment or t->ranks_from, 0 if from positions. */
int st_tasks_rank(st_tasks_t *t);

/* The executable's base name of pid ("?" if unknown); static buffer. */
const char *st_task_exe_name(pid_t pid);

void st_tasks_free(st_tasks_t *t);

/* Format a message into err[0..errlen) (if err) and return code. */
int st_errf(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* /proc/PID/NAME (stat, cmdline, ...): at most cap - 1 bytes into buf,
 * NUL-terminated; the length, or -1 (gone, unreadable, empty). */
ssize_t st_proc_read(pid_t pid, const char *name, char *buf, size_t cap);
/* The parent of pid from /proc/PID/stat, or -1. */
pid_t st_proc_parent(pid_t pid);

#endif
