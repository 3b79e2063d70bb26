/* st_stop.h - stopping a process's threads with ptrace for one stack sample,
 * and resuming them (internal to the stack walker, st_walker.c).
 *
 * Threads are seized (PTRACE_SEIZE) and interrupted (PTRACE_INTERRUPT), never
 * sent SIGSTOP: if the tracer dies, the kernel detaches them and they run on.
 * Every call must come from the same thread of the tracer (ptrace's rule). */
#ifndef TBON_ST_STOP_H
#define TBON_ST_STOP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum {
    ST_THR_GONE,      /* exited before or during the stop: not sampled */
    ST_THR_FAILED,    /* could not be seized: err says why */
    ST_THR_STOPPED,   /* stopped by us, to be resumed by st_resume */
    ST_THR_RESUMED,   /* detached again */
};

typedef struct st_thread {
    pid_t tid;
    int state;        /* ST_THR_* */
    int sig;          /* the signal it stopped for, handed back at detach */
    int err;          /* errno of the failed PTRACE_SEIZE (ST_THR_FAILED) */
} st_thread_t;

typedef struct st_stopset {
    pid_t pid;
    st_thread_t *t;   /* the leader first (when sampled), then by discovery */
    size_t n, cap;
} st_stopset_t;

/* Stop pid's main thread, or with all_threads every thread of /proc/PID/task
 * (again until no new thread shows up). s must be zeroed. Returns 0 (see each
 * thread's state; a leader that cannot be seized ends the stop: its error is
 * the process's), or TBON_ENOMEM with every thread already resumed. */
int st_stop(st_stopset_t *s, pid_t pid, bool all_threads);
/* The same, for a pid whose main thread st_stop_begin seized and interrupted
 * (the stop is then only waited for). */
int st_stop_seized(st_stopset_t *s, pid_t pid, bool all_threads);
/* Seize and interrupt pid's main thread without waiting: its stop goes on
 * while the caller does other work. Then st_stop_seized, or st_stop_drop to
 * let it go. 0, or the errno of PTRACE_SEIZE (nothing was done). */
int st_stop_begin(pid_t pid);
/* Wait for the stop st_stop_begin asked for and detach again. */
void st_stop_drop(pid_t pid);

/* Detach every stopped thread, giving back the signals they stopped for. */
void st_resume(st_stopset_t *s);

/* Free s's memory (after st_resume). */
void st_stopset_free(st_stopset_t *s);

#endif
