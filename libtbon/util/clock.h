/* clock.h - the library's monotonic clock: every deadline, timer and
 * heartbeat is on CLOCK_MONOTONIC, in milliseconds or microseconds. */
#ifndef TB_UTIL_CLOCK_H
#define TB_UTIL_CLOCK_H

#include <stdint.h>

int64_t tb_now_ms(void);
int64_t tb_now_us(void);

#endif
