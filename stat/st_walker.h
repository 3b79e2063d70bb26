/* st_walker.h - sampling the stack traces of running processes with ptrace
 * and elfutils' libdw (tbon_stat's back-end side, docs/stat.md).
 *
 * A sample stops the target's threads (PTRACE_SEIZE, then PTRACE_INTERRUPT:
 * no signal is sent, so the target never sees a SIGSTOP), unwinds each one,
 * symbolises the frames and detaches. The target is stopped only during the
 * sample and always resumed, also when the walk fails; and since nothing
 * stops it but the tracer's interrupt, a tracer killed with SIGKILL leaves
 * it running (the kernel detaches a dead tracer's tracees).
 *
 * A failure is a frame, never a missing task: a process that is gone gives
 * one stack with the single frame "[task exited]", one that cannot be
 * attached or walked "[stackwalk error: <reason>]" (after any frames that
 * were read). */
#ifndef TBON_ST_WALKER_H
#define TBON_ST_WALKER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Flags of st_walker_new. */
#define ST_WALK_THREADS 1u   /* every thread (else the main thread only) */
#define ST_WALK_LINES   2u   /* "func@file:line" where debug info says (else "func") */
#define ST_WALK_MODULES 4u   /* "module`func" (the shared object's base name) */

/* One thread's stack: frames outermost first ("_start", ..., "main", ...). */
typedef struct st_stack {
    pid_t tid;
    size_t n;
    char **frames;
} st_stack_t;

typedef struct st_walker st_walker_t;

/* A walker; it keeps what it learned of each process (modules, symbols)
 * between samples. NULL when out of memory. */
st_walker_t *st_walker_new(unsigned flags);
void st_walker_free(st_walker_t *w);

/* Sample pid once. On return *stacks (malloc'ed) holds one stack per sampled
 * thread, at least one; failures are frames (above). Returns the number of
 * stacks, or TBON_ENOMEM. */
int st_sample(st_walker_t *w, pid_t pid, st_stack_t **stacks, size_t *n);
void st_stacks_free(st_stack_t *s, size_t n);

/* Drop what the walker knows of pid (it exited, or sampling is over). */
void st_walker_forget(st_walker_t *w, pid_t pid);

#endif
