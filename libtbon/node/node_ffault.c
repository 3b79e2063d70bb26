/* node_ffault.c - a stream's filter calls and their faults: the plug-in
 * call watched by the EDS (or run on the FE's worker), a filter that
 * crashed, hung or returned an error reported toward the FE
 * (TB_CTL_FILTER_FAULT, TB_CTL_STREAM_ERR), and what a back-end keeps of
 * what it sent for state composition (docs/filter-guide.md). */
#include "node/node_int.h"
#include "util/hot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "codec/packet_int.h"

/* Report a filter failure towards the FE, where tbon_*_recv returns it. */
void tb_stream_error(tb_node_t *n, uint32_t id, const char *msg)
{
    TB_ERROR("filter", "stream %u: %s", id, msg);
    if (n->role == TB_ROLE_FE) {
        if (n->cbs.status)
            n->cbs.status(n->cbs.arg, TB_NODE_STREAM_ERROR, (int)id, msg);
    } else {
        tb_node_send_ctl(n, n->parent, TB_CTL_STREAM_ERR,
                         tb_ctl_stream_err_encode(&(tb_ctl_stream_err_t){ id, msg }));
    }
}

void tb_stream_on_filter_fault(tb_node_t *n, const tb_ctl_filter_fault_t *m)
{
    TB_ERROR("filter", "%s", m->msg);
    /* The wave goes on without the input dropped below; what it would
     * bring here is not the wave's result: its outcome is this error, in its
     * place among the waves (run_up). The FE's own fault is run_up's at
     * once. Without a wave (no key, or don't-wait) it is the stream's. */
    tb_stream_st_t *s = m->key ? tb_stream_get(n, m->stream) : NULL;
    int per_wave = s && s->sync != TBON_SYNC_DONTWAIT;
    if (per_wave && m->rank != n->rank) {
        size_t i = 0;
        while (i < 7 && s->ff.poisoned[i] && s->ff.poisoned[i] != m->key)
            i++;
        s->ff.poisoned[i] = m->key;        /* full: the last slot is reused */
        free(s->ff.poison_msg[i]);
        s->ff.poison_msg[i] = strdup(m->msg);
    }
    if (!per_wave && n->cbs.status)
        n->cbs.status(n->cbs.arg, TB_NODE_STREAM_ERROR, (int)m->stream, m->msg);
    if (!n->cbs.event)
        return;
    tbon_event_t ev = { .type = TBON_EV_FILTER_ERROR, .rank = m->rank,
                        .parent = TBON_RANK_NONE, .stream = m->stream, .filter = m->filter,
                        .signal = m->sig };
    snprintf(ev.detail, sizeof ev.detail, "%s", m->msg);
    n->cbs.event(n->cbs.arg, &ev);
}

size_t tb_stream_sources(tbon_packet_t *const in[], size_t k, uint32_t *out, size_t cap)
{
    size_t ns = 0;
    for (size_t i = 0; i < k && ns < cap; i++) {
        uint32_t r = tbon_packet_source(in[i]);
        size_t j = 0;
        while (j < ns && out[j] != r)
            j++;
        if (j == ns)
            out[ns++] = r;
    }
    return ns;
}

void tb_node_filter_loaded(tb_node_t *n)
{
    if (!atomic_exchange(&n->fw_armed, 1))
        tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_FILTER_LOADED });
}

/* A plug-in call of stream s over in[0..k) of the wave key begins: the EDS
 * may look (built-ins are ours: not watched). */
static void fw_begin(tb_node_t *n, const tb_stream_st_t *s, const tb_filter_t *f, uint64_t key,
                     tbon_packet_t *const in[], size_t k)
{
    if (!f->dl || n->role == TB_ROLE_FE)
        return;
    struct tb_fwatch *w = &n->fw;
    pthread_mutex_lock(&w->mu);
    w->since = tb_now_ms();
    w->limit = s->ff.limit_ms >= 0 ? s->ff.limit_ms : n->fw_default;
    w->filter = f->id;
    w->stream = s->id;
    w->key = key;
    w->nin = k;
    w->nsrc = tb_stream_sources(in, k, w->src, sizeof w->src / sizeof w->src[0]);
    w->name = f->name;
    w->path = f->path;
    pthread_mutex_unlock(&w->mu);
}

static void fw_end(tb_node_t *n, const tb_filter_t *f)
{
    if (!f->dl || n->role == TB_ROLE_FE)
        return;
    pthread_mutex_lock(&n->fw.mu);
    n->fw.since = 0;
    pthread_mutex_unlock(&n->fw.mu);
}

/* Once the node has been asked for its performance data (n->perf), one
 * call in this many measures its thread's CPU time as well; the others'
 * is estimated from them (docs/user-guide.md, "Performance data"). Not
 * before: the thread's CPU clock is a system call of microseconds here
 * (the monotonic clock's read is tens of nanoseconds), and read on every
 * 16th call it made fault-free waves up to a fifth slower
 * (bench/perf_cost.sh). */
#ifndef CPU_SAMPLE_EVERY
#define CPU_SAMPLE_EVERY 16
#endif

#ifndef TB_PERF_OFF
/* What reading the thread's CPU clock twice costs in CPU time itself (a
 * sample holds about one read's worth): taken off each sample, measured
 * once per process, the least of a few tries. */
static int64_t cpu_clock_cost;
static pthread_once_t cpu_clock_once = PTHREAD_ONCE_INIT;

static void cpu_clock_calibrate(void)
{
    int64_t best = INT64_MAX;
    for (int i = 0; i < 5; i++) {
        int64_t a = tb_thread_cpu_ns(), b = tb_thread_cpu_ns();
        if (b - a < best)
            best = b - a;
    }
    cpu_clock_cost = best > 0 && best < INT64_MAX ? best : 0;
}

static uint64_t cpu_sample(int64_t c0)
{
    int64_t d = tb_thread_cpu_ns() - c0 - cpu_clock_cost;
    return d > 0 ? (uint64_t)d : 0;
}
#endif

/* Run f for stream s: at the FE a plug-in runs on its worker thread, within
 * its limit (node_fecall.c); elsewhere here, watched by the EDS (fw_begin).
 * Its calls, wall time and sampled CPU time go to s's counters. */
TB_HOT int tb_stream_run_filter(tb_node_t *n, tb_stream_st_t *s, const tb_filter_t *f,
                                uint64_t key, tbon_packet_t *const in[], size_t k,
                                tbon_packet_list_t *out, void **state,
                                const tbon_filter_ctx_t *ctx, tbon_error_t *err)
{
    int limit = s->ff.limit_ms >= 0 ? s->ff.limit_ms : n->fw_default;
    int worker = n->role == TB_ROLE_FE && f->dl && limit > 0;
#ifndef TB_PERF_OFF
    /* (on the FE's worker the call's CPU time is another thread's: not
     * sampled) */
    int cpu = !worker && n->perf && s->perf[TB_PERF_S_FCALLS] % CPU_SAMPLE_EVERY == 0;
    if (cpu)
        pthread_once(&cpu_clock_once, cpu_clock_calibrate);
    int64_t c0 = cpu ? tb_thread_cpu_ns() : 0, t0 = tb_now_ns();
#endif
    int rc;
    if (worker) {
        rc = tb_fecall_run(n, f, in, k, out, state, ctx, limit, err);
    } else {
        fw_begin(n, s, f, key, in, k);
        rc = tb_filter_run(f, in, k, out, state, ctx, err);
        fw_end(n, f);
    }
#ifndef TB_PERF_OFF
    s->perf[TB_PERF_S_FWALL_NS] += (uint64_t)(tb_now_ns() - t0);
    s->perf[TB_PERF_S_FCALLS]++;
    if (cpu) {
        s->perf[TB_PERF_S_FCPU_NS] += cpu_sample(c0);
        s->perf[TB_PERF_S_FCPU_SAMPLES]++;
    }
#endif
    return rc;
}

void tb_stream_rank_list(const uint32_t *v, size_t k, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < k && i < 16 && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%u",
                               i == 0 ? "" : i + 1 == k ? " and " : ", ", v[i]);
    if (k > 16 && at < len)
        snprintf(buf + at, len - at, " and %zu more", k - 16);
}

void tb_stream_filter_fault(tb_node_t *n, uint32_t stream, const tb_filter_t *f, int sig,
                            uint64_t key, tbon_packet_t *const in[], size_t k, const char *why)
{
    uint32_t *src = malloc((k ? k : 1) * sizeof *src);
    size_t ns = src ? tb_stream_sources(in, k, src, k) : 0;
    char ranks[200], msg[900];
    tb_stream_rank_list(src, ns, ranks, sizeof ranks);
    if (k)
        snprintf(msg, sizeof msg, "rank %u, stream %u: %s, over %zu packet%s from rank%s %s; "
                 "that input is dropped", n->rank, stream, why, k, k == 1 ? "" : "s",
                 ns == 1 ? "" : "s", ranks);
    else
        snprintf(msg, sizeof msg, "rank %u, stream %u: %s", n->rank, stream, why);
    tb_ctl_filter_fault_t m = { stream, f ? f->id : -1, n->rank, sig, key, src, ns, msg };
    if (n->role == TB_ROLE_FE) {
        tb_stream_on_filter_fault(n, &m);
    } else {
        TB_ERROR("filter", "%s", msg);
        if (n->parent)
            tb_node_send_ctl(n, n->parent, TB_CTL_FILTER_FAULT, tb_ctl_filter_fault_encode(&m));
    }
    free(src);
}

/* Fold in[0..k) into s's filter state, the output dropped. */
static void keep_run(tb_node_t *n, tb_stream_st_t *s, const tb_filter_t *f,
                     tbon_packet_t *const in[], size_t k)
{
    tbon_filter_ctx_t ctx = { .rank = n->rank, .stream = s->id, .params = s->up_params };
    tbon_error_t err;
    fw_begin(n, s, f, 0, in, k);
    int rc = tb_filter_keep(f, in, k, &s->up_state, &ctx, &err);
    fw_end(n, f);
    if (rc == TB_FILTER_CRASHED)
        tb_stream_filter_fault(n, s->id, f, tb_filter_crash_signal(), 0, in, k, err.msg);
    else if (rc)
        TB_WARN("ft", "stream %u: keeping what was sent: %s", s->id, err.msg);
}

/* Fold the packets a back-end kept into its filter state, all at once. */
void tb_stream_fold_kept(tb_node_t *n, tb_stream_st_t *s)
{
    const tb_filter_t *f = tb_filter_reg_get(n->filters, s->up);
    if (!s->kept.n || !f)
        return;
    keep_run(n, s, f, s->kept.v, s->kept.n);
    tb_plist_clear(&s->kept);
}

TB_HOT void tb_stream_keep(tb_node_t *n, uint32_t id, tbon_packet_t *p)
{
    tb_stream_st_t *s = n->ft->ready(n) ? tb_stream_get(n, id) : NULL; /* no fault tolerance: no cost */
    const tb_filter_t *f = s ? tb_filter_reg_get(n->filters, s->up) : NULL;
    if (!f || !f->get_state || !p)
        return;
    /* A filter with a keep function takes each packet at once, while it is
     * in the cache; the others run over 64 packets at a time, since one
     * pass of a filter over a batch costs about what one packet's does. */
    if (f->keep) {
        keep_run(n, s, f, &p, 1);
        return;
    }
    tbon_packet_list_push(&s->kept, tbon_packet_ref(p));
    if (s->kept.n >= 64)
        tb_stream_fold_kept(n, s);
}
/* ---- the stream's part (tb_ffault_st_t) ---- */

void tb_ffault_st_init(tb_ffault_st_t *ff)
{
    memset(ff, 0, sizeof *ff);
    ff->limit_ms = -1;
}

void tb_ffault_st_free(tb_ffault_st_t *ff)
{
    for (size_t i = 0; i < 8; i++)
        free(ff->poison_msg[i]);
    memset(ff->poison_msg, 0, sizeof ff->poison_msg);
}

void tb_ffault_set_limit(tb_ffault_st_t *ff, uint32_t ms)
{
    ff->limit_ms = ms > INT32_MAX ? INT32_MAX : (int32_t)ms;
}

void tb_ffault_set_hung_above(tb_ffault_st_t *ff, int hung)
{
    ff->hung_above = hung != 0;
}

int tb_ffault_hung_above(const tb_ffault_st_t *ff)
{
    return ff->hung_above;
}

TB_HOT int tb_ffault_take_poison(tb_ffault_st_t *ff, uint64_t key, char *msg, size_t len)
{
    for (size_t i = 0; key && i < 8 && ff->poisoned[i]; i++) {
        if (ff->poisoned[i] != key)
            continue;
        snprintf(msg, len, "%s", ff->poison_msg[i] ? ff->poison_msg[i] : "a filter failed below");
        free(ff->poison_msg[i]);
        memmove(&ff->poisoned[i], &ff->poisoned[i + 1], (7 - i) * sizeof ff->poisoned[0]);
        memmove(&ff->poison_msg[i], &ff->poison_msg[i + 1], (7 - i) * sizeof ff->poison_msg[0]);
        ff->poisoned[7] = 0;
        ff->poison_msg[7] = NULL;
        return 1;
    }
    return 0;
}
