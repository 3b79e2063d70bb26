/* node_fecall.c - the front-end's plug-in filter calls, on a thread of their
 * own (docs/filter-guide.md, "When a filter crashes or hangs")
 *
 * A commnode whose filter call runs past its limit is taken for failed: its
 * event detection thread ends it (ft/eds_watch.c). The front-end cannot end:
 * it is the application. So its reactor does not make plug-in calls itself:
 * it hands each to a worker thread and waits, up to the call's limit. Past
 * it, the worker and its call are left where they are - with their own
 * references to the input and the stream's filter state, which the stream
 * then starts again without - and the reactor goes on without that input,
 * reporting the hang as a crash is reported (TBON_EV_FILTER_ERROR, signal
 * 0). The next call gets a new worker. A crash in the worker is caught there
 * (filter_guard.c), as on any thread.
 *
 * Time the process was stopped or starved (its wait woke late and it used
 * little CPU meanwhile) is not held against the call (tb_held_ms).
 */
#include "node/node_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

/* One call, and its worker's state. Freed by the reactor once the call is
 * done; left to the worker (never freed) once it is abandoned. */
struct tb_fecall {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int have, done, quit;
    /* the call */
    const tb_filter_t *f;
    tbon_packet_t **in;
    size_t k;
    tbon_packet_list_t out;
    void *state;
    tbon_filter_ctx_t ctx;
    tbon_packet_t *params;
    tbon_error_t err;
    int rc, sig;
};

static void *worker(void *arg)
{
    struct tb_fecall *w = arg;
    pthread_setname_np(pthread_self(), "tbon-filter");
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->have && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->quit)
            break;
        pthread_mutex_unlock(&w->mu);
        int rc = tb_filter_run(w->f, w->in, w->k, &w->out, &w->state, &w->ctx, &w->err);
        int sig = rc == TB_FILTER_CRASHED ? tb_filter_crash_signal() : 0;
        pthread_mutex_lock(&w->mu);
        w->rc = rc;
        w->sig = sig;
        w->have = 0;
        w->done = 1;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static struct tb_fecall *worker_new(void)
{
    struct tb_fecall *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    tb_plist_init(&w->out);
    if (pthread_create(&w->th, NULL, worker, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return NULL;
    }
    return w;
}

void tb_fecall_free(tb_node_t *n)
{
    struct tb_fecall *w = n->fecall;
    n->fecall = NULL;
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    tb_plist_free(&w->out);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

/* The call's own references, released once it is done. */
static void call_clear(struct tb_fecall *w)
{
    for (size_t i = 0; i < w->k; i++)
        tbon_packet_unref(w->in[i]);
    free(w->in);
    w->in = NULL;
    w->k = 0;
    tbon_packet_unref(w->params);
    w->params = NULL;
}

/* Wait for the call up to limit ms of the time the process could run;
 * 1 if it is done. Under w->mu. */
static int wait_done(struct tb_fecall *w, int limit, int64_t *ran)
{
    int64_t start = tb_now_ms(), grace = 0;
    for (;;) {
        int64_t now = tb_now_ms();
        *ran = now - start - grace;
        if (w->done)
            return 1;
        if (limit > 0 && *ran >= limit)
            return 0;
        int64_t slice = limit > 0 && limit - *ran < 250 ? limit - *ran : 250;
        int64_t due = now + slice, cpu0 = tb_cpu_ms();
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(slice / 1000);
        ts.tv_nsec += (long)(slice % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        while (!w->done && pthread_cond_timedwait(&w->cv, &w->mu, &ts) != ETIMEDOUT)
            ;
        grace += tb_held_ms(now, due, tb_now_ms(), tb_cpu_ms() - cpu0);
    }
}

int tb_fecall_run(tb_node_t *n, const tb_filter_t *f, tbon_packet_t *const in[], size_t k,
                  tbon_packet_list_t *out, void **state, const tbon_filter_ctx_t *ctx,
                  int limit, tbon_error_t *err)
{
    if (!n->fecall && !(n->fecall = worker_new()))
        return tb_filter_run(f, in, k, out, state, ctx, err);   /* no thread: as before */
    struct tb_fecall *w = n->fecall;
    w->in = malloc((k ? k : 1) * sizeof *w->in);
    if (!w->in)
        return tb_error_set(err, TBON_ENOMEM, "out of memory");
    for (size_t i = 0; i < k; i++)
        w->in[i] = tbon_packet_ref(in[i]);
    w->k = k;
    w->f = f;
    w->ctx = *ctx;
    /* the stream may change its parameters meanwhile: our own reference */
    w->params = ctx->params ? tbon_packet_ref((tbon_packet_t *)(uintptr_t)ctx->params) : NULL;
    w->ctx.params = w->params;
    pthread_mutex_lock(&w->mu);
    w->state = *state;
    w->done = 0;
    w->have = 1;
    pthread_cond_broadcast(&w->cv);
    int64_t ran = 0;
    int done = wait_done(w, limit, &ran);
    if (!done) {
        /* The call keeps the worker, its input and the stream's state: the
         * stream starts again without a state, the next call gets a new
         * worker. Neither is freed: the call may still use them. */
        pthread_mutex_unlock(&w->mu);
        pthread_detach(w->th);
        n->fecall = NULL;
        n->fecall_left = 1;
        *state = NULL;
        return tb_error_set(err, TB_FILTER_HUNG, "filter \"%s\" of %s has run for %lld ms, "
                            "past its limit of %d ms (TBON_FILTER_PARAM_LIMIT); the "
                            "front-end leaves the call to its thread", f->name,
                            f->path ? f->path : "?", (long long)ran, limit);
    }
    pthread_mutex_unlock(&w->mu);
    *state = w->state;
    w->state = NULL;
    for (size_t i = 0; i < w->out.n; i++) {
        tbon_packet_list_push(out, w->out.v[i]);
        w->out.v[i] = NULL;
    }
    w->out.n = 0;
    if (w->rc)
        *err = w->err;
    if (w->rc == TB_FILTER_CRASHED)
        tb_filter_set_crash_signal(w->sig);
    call_clear(w);
    return w->rc;
}
