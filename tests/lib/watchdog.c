/* watchdog.c - the watchdog of tests/lib/watchdog.h: its thread and its one
 * state per program. */
#include "watchdog.h"

#include <pthread.h>
#include <time.h>

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double deadline;            /* CLOCK_MONOTONIC seconds; 0 = disarmed */
    const char *phase;
    tb_wd_fire_fn *fire;
} tb_wd = { .mu = PTHREAD_MUTEX_INITIALIZER, .phase = "" };

static double tb_wd_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *tb_wd_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&tb_wd.mu);
    while (tb_wd.deadline == 0 || tb_wd_now() < tb_wd.deadline) {
        if (tb_wd.deadline == 0) {
            pthread_cond_wait(&tb_wd.cv, &tb_wd.mu);
            continue;
        }
        struct timespec ts = { .tv_sec = (time_t)tb_wd.deadline };
        ts.tv_nsec = (long)((tb_wd.deadline - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&tb_wd.cv, &tb_wd.mu, &ts);
    }
    const char *phase = tb_wd.phase;
    pthread_mutex_unlock(&tb_wd.mu);
    tb_wd.fire(phase);
    return NULL;
}

int tb_wd_start(tb_wd_fire_fn *fire)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&tb_wd.cv, &ca);
    pthread_condattr_destroy(&ca);
    tb_wd.fire = fire;
    pthread_t t;
    if (pthread_create(&t, NULL, tb_wd_main, NULL) != 0)
        return -1;
    pthread_detach(t);
    return 0;
}

void tb_wd_arm(const char *phase, double seconds)
{
    pthread_mutex_lock(&tb_wd.mu);
    tb_wd.phase = phase;
    tb_wd.deadline = seconds > 0 ? tb_wd_now() + seconds : 0;
    pthread_cond_signal(&tb_wd.cv);
    pthread_mutex_unlock(&tb_wd.mu);
}
