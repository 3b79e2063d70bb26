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
 * were read).
 *
 * Use a walker from one thread at a time; a sample's ptrace calls all come
 * from the calling thread. While a sample runs, nothing else in the process
 * may wait for any child (waitpid(-1, ...), wait()): that could take the
 * target's stop notifications and leave the sample waiting. A thread in
 * uninterruptible sleep (state D) holds its sample up until it wakes. A
 * thread caught in glibc's clone3 just after the system call has no CFI to
 * unwind with: "__clone3" and an error frame. libdw looks for separate debug
 * files in /usr/lib/debug (and through debuginfod when DEBUGINFOD_URLS is
 * set: unset it for speed).
 *
 * Cost (stat/examples/stat_hang, 2 cores, one walker over 256 of them): a
 * first sample of a process ~65 us of CPU. It reads /proc/PID/maps once
 * (parsed here, not by libdwfl), seizes, interrupts and waits for the
 * thread, reads its registers and its stack a page at a time (our own
 * libdwfl thread callbacks on x86-64; elsewhere dwfl_linux_proc_attach,
 * which reads more of /proc) and detaches. What processes share is loaded
 * once per walker: the ELF files of the same executable and libraries
 * (st_elfs.h) and the names of frames at the same file offset
 * (st_names.h). st_sample_then interrupts the next process while this
 * one's frames are named. The walker keeps the process state of at most
 * RLIMIT_NOFILE/16 processes (a few open files each), dropping the least
 * recently sampled. */
#ifndef TBON_ST_WALKER_H
#define TBON_ST_WALKER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Flags of st_walker_new. */
#define ST_WALK_THREADS 1u   /* every thread (else the main thread only) */
#define ST_WALK_LINES   2u   /* "func@file:line" where debug info says (else "func") */
#define ST_WALK_MODULES 4u   /* "module`func" (the shared object's base name) */
#define ST_WALK_LIBDWFL 8u   /* attach with libdwfl's dwfl_linux_proc_attach, as on
                                hosts other than x86-64 (the tests use both ways) */

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
/* The same, and when next > 0 the next process to sample: its main thread
 * is interrupted as soon as pid runs again, so that it stops while this
 * sample's frames are named and the next sample need not wait for it. A
 * sample of another pid, or st_walker_free, lets it go again. */
int st_sample_then(st_walker_t *w, pid_t pid, pid_t next, st_stack_t **stacks, size_t *n);
void st_stacks_free(st_stack_t *s, size_t n);

/* Drop what the walker knows of pid (it exited, or sampling is over). */
void st_walker_forget(st_walker_t *w, pid_t pid);

#endif
