/* loop.h - one event loop for every thread that waits: epoll over file
 * descriptors, a timer heap, and a mailbox (a locked queue and an eventfd)
 * that any thread may post to. The reactor (node/node.c) and the EDS
 * (ft/eds.c) each run one (docs/architecture.md, "Two threads per process").
 *
 * Threads: a loop belongs to the thread that runs it (tb_loop_fire,
 * tb_loop_wait); every call here is for that thread only, except
 * tb_loop_post, tb_loop_wake and tb_loop_has_mail, which any thread may
 * make, and tb_loop_fd's value, which does not change. */
#ifndef TB_LOOP_H
#define TB_LOOP_H

#include <stddef.h>
#include <stdint.h>

typedef struct tb_loop tb_loop_t;

/* A file descriptor the loop watches: embed it in its owner, set fd, fn and arg,
 * then tb_loop_watch it. fn runs on the loop's thread with what epoll said
 * (EPOLLIN, EPOLLOUT, EPOLLHUP, EPOLLERR). An io dropped (tb_loop_forget)
 * while a batch of events is being handled may still be named by a later
 * event of that batch: its owner must outlive the batch (free it after
 * tb_loop_wait returns) and fn must check that it still wants it. */
typedef struct tb_io {
    int fd;
    void (*fn)(struct tb_io *io, uint32_t events);
    void *arg;                /* the owner's, for fn */
    uint32_t events;          /* what it is watched for now */
    int registered;           /* in the epoll set */
} tb_io_t;

/* A timer: embed it, set fn, arm it with tb_timer_at. fn runs on the loop's
 * thread once the time has come; the timer is disarmed before fn runs, so
 * fn may arm it again. A lazy timer runs when due if the loop's thread is
 * waiting anyway, but tb_loop_due leaves it out: a thread that runs this
 * loop only for its timers (a back-end's kicker) does not wake for it. */
typedef struct tb_timer {
    void (*fn)(struct tb_timer *t, int64_t now_ms);
    void *arg;                /* the owner's, for fn */
    int64_t due;              /* ms, tb_now_ms's clock */
    size_t slot;              /* 1 + its index in the heap; 0: not armed */
    int lazy;
} tb_timer_t;

/* A message for the loop's thread: embed it first in a message of the
 * owner's own type, posted with tb_loop_post; the loop hands every message
 * posted, oldest first, to the drain function given to tb_loop_new. */
typedef struct tb_mail {
    struct tb_mail *next;
} tb_mail_t;

/* drain(arg, list): the messages posted since the last drain, oldest first,
 * linked by next; they are the drain function's to free. It may be NULL (a
 * loop woken only: tb_loop_wake). */
typedef void (*tb_drain_fn)(void *arg, tb_mail_t *list);

/* A new loop, or NULL (out of memory or descriptors: errno says). */
tb_loop_t *tb_loop_new(tb_drain_fn drain, void *arg);
/* Free the loop; the ios and timers are their owners' (not closed here),
 * and messages never drained are handed to drain one last time. NULL: no-op. */
void tb_loop_destroy(tb_loop_t *l);

/* The epoll descriptor: it is readable when the loop has something to do
 * (an event, or a message posted), so that another loop may watch it. */
int tb_loop_fd(const tb_loop_t *l);

/* Watch io for events (EPOLLIN, EPOLLOUT; 0 keeps it registered but quiet),
 * adding it to the epoll set the first time. 0, or a negative TBON_E*. */
int tb_loop_watch(tb_loop_t *l, tb_io_t *io, uint32_t events);
/* Stop watching io (its fd stays open: the caller closes it). */
void tb_loop_forget(tb_loop_t *l, tb_io_t *io);
/* Share the loop's events with another epoll set, pfd (a back-end's kicker,
 * api/kick.c), so that it hears of them only when no thread waits in this
 * loop: from now on every descriptor watched for input here is registered
 * here with EPOLLEXCLUSIVE, and in pfd after it with EPOLLEXCLUSIVE and
 * EPOLLET, its events there naming pio. The kernel then wakes the first
 * set in a descriptor's wait queue that has a thread waiting in it: this
 * loop's while one waits here, else pfd's, once per new event. A change of
 * a descriptor's events is a delete and an add in both sets (exclusive
 * entries cannot be modified), in that order; EPOLLRDHUP, which exclusive
 * entries cannot have, is kept only where EPOLLIN is not asked for (a peer
 * that closes is seen by EPOLLIN there). pfd is duplicated: the loop keeps
 * its registrations until it is destroyed. Once, right after tb_loop_new
 * (TBON_EINVAL once anything is watched), before any thread waits in pfd.
 * 0, or a negative TBON_E*. */
int tb_loop_share(tb_loop_t *l, int pfd, tb_io_t *pio);

/* Any thread: watch io, registered already with EPOLLONESHOT among its
 * events, for events once more (a one-shot that fired is disarmed). Unlike
 * tb_loop_watch it writes nothing in io. */
void tb_loop_rearm(tb_loop_t *l, tb_io_t *io, uint32_t events);

/* Arm t for due_ms (tb_now_ms's clock; re-arming moves it), or disarm it.
 * 0, or TBON_ENOMEM when there is no memory for one more armed timer: t is
 * not armed, and the loop has failed (an error is logged; tb_loop_wait
 * returns TBON_ENOMEM from then on, so that its thread takes its failure
 * path rather than wait for a timer that will never fire). Re-arming an
 * armed timer cannot fail. */
int tb_timer_at(tb_loop_t *l, tb_timer_t *t, int64_t due_ms);
void tb_timer_cancel(tb_loop_t *l, tb_timer_t *t);
static inline int tb_timer_armed(const tb_timer_t *t) { return t->slot != 0; }
/* When the first armed timer is due, or INT64_MAX if none is. */
int64_t tb_loop_next_due(const tb_loop_t *l);
/* The same without the lazy timers, from any thread (a copy published at
 * every change of the timers: a thread that watches this loop's fd from
 * its own loop learns when to run it for its timers, which do not make the
 * fd readable). */
int64_t tb_loop_due(const tb_loop_t *l);
/* Armed timers (for tests and the leak checks). */
size_t tb_loop_ntimers(const tb_loop_t *l);

/* Any thread: queue m (owned by the loop's drain from here on) and wake the
 * loop. tb_loop_wake wakes it with no message (a flag the owner reads). */
void tb_loop_post(tb_loop_t *l, tb_mail_t *m);
void tb_loop_wake(tb_loop_t *l);
/* Any thread: queue m without waking the loop: it is drained at the next
 * wake-up or tb_loop_drain (news that can wait, so that a burst of it costs
 * the loop's thread no switch per message). */
void tb_loop_queue(tb_loop_t *l, tb_mail_t *m);
/* Any thread: messages are waiting to be drained. */
int tb_loop_has_mail(tb_loop_t *l);
/* The loop's thread: hand what was posted to drain now. A wake-up calls
 * drain too, with NULL if nothing was posted. */
void tb_loop_drain(tb_loop_t *l);
/* The loop's thread: take what was posted, without draining it (the list,
 * oldest first; the caller's to free). */
tb_mail_t *tb_loop_take(tb_loop_t *l);

/* Run every timer due by now (those that a timer arms for now or earlier
 * run in the same call); how many ran. */
int tb_loop_fire(tb_loop_t *l);
/* Wait for events, at most until the first timer is due and at most max_ms
 * (-1: no limit beyond the timers), then handle them: the mailbox first if
 * it was woken, then each io's fn. The number of events handled, or a
 * negative TBON_E* if epoll failed (EINTR counts as 0 events) or the loop
 * has failed (TBON_ENOMEM, errno ENOMEM: tb_timer_at). Timers are not run
 * here: tb_loop_fire does that. */
int tb_loop_wait(tb_loop_t *l, int max_ms);

#endif
