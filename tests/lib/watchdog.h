/* watchdog.h - a thread that ends a tool whose current phase outlives its
 * deadline, so that a hang cannot stall `make bench` or `make check`
 * (bench_tree, bench_ft, tbon_fims). It sleeps on a condition variable of
 * CLOCK_MONOTONIC; arming it wakes it to take the new deadline.
 * One per program: its state is in watchdog.c, linked into each tool that
 * uses it, so that every file of a tool arms the same watchdog. */
#ifndef TB_WATCHDOG_H
#define TB_WATCHDOG_H

/* Called on the watchdog's thread with the phase that took too long; it
 * reports, kills what the tool started, and must not return (_exit). */
typedef void tb_wd_fire_fn(const char *phase);

/* Start the watchdog, disarmed. 0, or -1 if its thread could not start. */
int tb_wd_start(tb_wd_fire_fn *fire);

/* The phase now running (a string that stays valid) and its time limit in
 * seconds from now; 0 disarms. */
void tb_wd_arm(const char *phase, double seconds);

#endif
