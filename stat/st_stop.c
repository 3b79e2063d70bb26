/* st_stop.c - ptrace stops of a process's threads for a stack sample */
#include "st_stop.h"

#include <tbon/common.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

/* New threads can appear until their creators are stopped; after this many
 * rounds the latecomers are simply not sampled. */
#define ST_STOP_ROUNDS 16

static bool known(const st_stopset_t *s, pid_t tid)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->t[i].tid == tid)
            return true;
    return false;
}

static int add(st_stopset_t *s, pid_t tid)
{
    if (s->n == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 8;
        st_thread_t *nt = realloc(s->t, ncap * sizeof *nt);
        if (!nt)
            return TBON_ENOMEM;
        s->t = nt;
        s->cap = ncap;
    }
    s->t[s->n++] = (st_thread_t){.tid = tid, .state = ST_THR_GONE};
    return 0;
}

/* Add the threads of /proc/PID/task not seen yet. 0 or TBON_ENOMEM; a
 * process whose task directory is gone simply adds nothing. */
static int scan(st_stopset_t *s)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task", (long)s->pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (*end == '\0' && tid > 0 && !known(s, (pid_t)tid))
            rc = add(s, (pid_t)tid);
    }
    closedir(d);
    return rc;
}

/* The state letter of /proc/PID/task/TID/stat, or 0 if it is gone. */
static char task_state(pid_t pid, pid_t tid)
{
    char path[80], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/stat", (long)pid, (long)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');    /* the name may hold anything */
    return p && p[1] == ' ' ? p[2] : 0;
}

/* Seize and interrupt t. Fails only for the permission or the thread's end;
 * a zombie (a leader that left before its threads) counts as gone. */
static void seize(pid_t pid, st_thread_t *t)
{
    if (ptrace(PTRACE_SEIZE, t->tid, NULL, NULL) != 0) {
        t->err = errno;
        char st = t->err == ESRCH ? 0 : task_state(pid, t->tid);
        t->state = st == 0 || st == 'Z' || st == 'X' ? ST_THR_GONE : ST_THR_FAILED;
        return;
    }
    t->state = ST_THR_STOPPED;
    /* ESRCH here means it is exiting; wait_stop collects the exit. */
    (void)ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL);
}

/* Wait for the stop of a seized thread (or its end). */
static void wait_stop(st_thread_t *t)
{
    int st;
    pid_t r;
    while ((r = waitpid(t->tid, &st, __WALL)) < 0 && errno == EINTR)
        ;
    if (r < 0 || !WIFSTOPPED(st)) {     /* exited, killed, or not ours any more */
        t->state = ST_THR_GONE;
        return;
    }
    /* A signal-delivery stop (no event in the high bits) swallowed a signal
     * the thread must still get; our interrupt's stop carries none. */
    t->sig = (st >> 16) == 0 ? WSTOPSIG(st) : 0;
}

/* Wait for the stops of threads [from, s->n): the leader last, because an
 * exiting leader is reported only after the rest of its group. */
static void wait_all(st_stopset_t *s, size_t from)
{
    for (int leader = 0; leader < 2; leader++)
        for (size_t i = from; i < s->n; i++)
            if (s->t[i].state == ST_THR_STOPPED && (s->t[i].tid == s->pid) == leader)
                wait_stop(&s->t[i]);
}

static int stop(st_stopset_t *s, pid_t pid, bool all_threads, bool seized)
{
    s->pid = pid;
    if (add(s, pid) != 0) {
        if (seized)
            st_stop_drop(pid);
        return TBON_ENOMEM;
    }
    if (seized)
        s->t[0].state = ST_THR_STOPPED;
    else
        seize(pid, &s->t[0]);
    if (s->t[0].state == ST_THR_FAILED)       /* EPERM and the like: the whole process */
        return 0;
    /* Interrupt every thread before waiting for any: they stop in parallel.
     * Then look again, since a thread that was still running may have
     * started others; the rounds end when no new thread shows up. */
    size_t waited = 0;                        /* [0, waited) are stopped or gone */
    for (int round = 0; round < ST_STOP_ROUNDS; round++) {
        size_t before = s->n;
        if (all_threads && scan(s) != 0) {
            wait_all(s, waited);
            st_resume(s);
            return TBON_ENOMEM;
        }
        for (size_t i = before; i < s->n; i++)
            seize(pid, &s->t[i]);
        wait_all(s, waited);
        waited = s->n;
        if (!all_threads || (round > 0 && s->n == before))
            break;
    }
    return 0;
}

int st_stop(st_stopset_t *s, pid_t pid, bool all_threads)
{
    return stop(s, pid, all_threads, false);
}

int st_stop_seized(st_stopset_t *s, pid_t pid, bool all_threads)
{
    return stop(s, pid, all_threads, true);
}

int st_stop_begin(pid_t pid)
{
    if (ptrace(PTRACE_SEIZE, pid, NULL, NULL) != 0)
        return errno;
    (void)ptrace(PTRACE_INTERRUPT, pid, NULL, NULL);  /* ESRCH: exiting, seen at the wait */
    return 0;
}

void st_stop_drop(pid_t pid)
{
    st_thread_t t = { .tid = pid, .state = ST_THR_STOPPED };
    st_stopset_t one = { .pid = pid, .t = &t, .n = 1, .cap = 1 };
    wait_stop(&t);
    st_resume(&one);
}

void st_resume(st_stopset_t *s)
{
    for (int leader = 0; leader < 2; leader++)
        for (size_t i = 0; i < s->n; i++) {
            st_thread_t *t = &s->t[i];
            if (t->state != ST_THR_STOPPED || (t->tid == s->pid) != leader)
                continue;
            t->state = ST_THR_RESUMED;
            if (ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(intptr_t)t->sig) == 0)
                continue;
            /* Only SIGKILL takes a tracee out of our stop. Collect its exit,
             * or its real parent would never learn of it (the leader last:
             * its exit is reported after its threads'). */
            int st;
            while (waitpid(t->tid, &st, __WALL) < 0 && errno == EINTR)
                ;
            t->state = ST_THR_GONE;
        }
}

void st_stopset_free(st_stopset_t *s)
{
    free(s->t);
    memset(s, 0, sizeof *s);
}
