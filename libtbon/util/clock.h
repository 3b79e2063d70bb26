/* clock.h - the library's monotonic clock: every deadline, timer and
 * heartbeat is on CLOCK_MONOTONIC, in milliseconds or microseconds
 * (nanoseconds for what a filter call takes). */
#ifndef TB_UTIL_CLOCK_H
#define TB_UTIL_CLOCK_H

#include <stdint.h>

int64_t tb_now_ms(void);
int64_t tb_now_us(void);
int64_t tb_now_ns(void);
/* The CPU time of the calling thread so far, ns (0 if it cannot be read). */
int64_t tb_thread_cpu_ns(void);
/* The CPU time of the whole process (all its threads) so far, ms. */
int64_t tb_cpu_ms(void);

/* Telling a stopped or starved process from a busy one: a wait meant to end
 * at `due` that ended at `now` (ms), having begun at `begun`, while the
 * process used `cpu` ms of CPU: how much of it the process was kept from
 * running (0 unless it ended over 50 ms late and used under half the time
 * as CPU - a spinning thread uses it all). */
int64_t tb_held_ms(int64_t begun, int64_t due, int64_t now, int64_t cpu);

#endif
