/* clock.c - see clock.h */
#include <time.h>

#include "util/clock.h"
#include "util/hot.h"

int64_t tb_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

TB_HOT int64_t tb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t tb_thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t tb_now_ms(void)
{
    return tb_now_us() / 1000;
}

int64_t tb_cpu_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t tb_held_ms(int64_t begun, int64_t due, int64_t now, int64_t cpu)
{
    if (now - due <= 50 || cpu >= (now - begun) / 2)
        return 0;
    return now - due;
}
