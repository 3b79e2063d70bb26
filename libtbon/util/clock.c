/* clock.c - see clock.h */
#include <time.h>

#include "util/clock.h"

int64_t tb_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t tb_now_ms(void)
{
    return tb_now_us() / 1000;
}
