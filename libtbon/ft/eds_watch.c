/* eds_watch.c - the EDS watches the reactor's progress, not only its own
 * (docs/filter-guide.md, "When a filter crashes or hangs"), and the
 * process's memory (docs/user-guide.md, "Memory")
 *
 * A plug-in filter that never returns keeps the node's reactor inside it:
 * heartbeats go on (they are this thread's), waves wait, and nothing is ever
 * said. The reactor notes each plug-in call in n->fw (node_ffault.c); this
 * thread looks at it at least every FW_POLL_MS while a plug-in is loaded, and
 * exactly at the call's limit once it has seen the call. Past it, the node
 * is taken for failed, in this order:
 *
 *   1. the parent hears why, on its event connection: 'F', the length (u32
 *      little-endian) and a FILTER_FAULT control message's payload, which
 *      its reactor sends on up to the FE (TBON_EV_FILTER_ERROR);
 *   2. every child hears which stream's input hung it: 'P' and the stream
 *      (u32 LE); adopted, it sends its adopter nothing it held of that
 *      stream (no composed state, no kept or buffered packets: the poisoned
 *      input would hang the adopter too), and reports the loss
 *      (TBON_EV_DATA_LOST);
 *   3. the node's fatal hook (tb_node_config_t.fatal) is called, and
 *      tbon_commnode ends its process there: its connections end, and the
 *      ordinary failure path (seed 003 V-A) adopts the orphans. The
 *      library itself ends nothing.
 *
 * The FE cannot leave its application: its reactor runs no plug-in call
 * itself, and finds a hung one on its own (node/node_fecall.c). A back-end
 * runs none. docs/protocol.md 8.5 has the messages.
 *
 * Memory: every MEM_POLL_MS the resident size of the FE and of each
 * commnode (the nodes that run filters) is read (/proc/self/statm);
 * past the mark ($TBON_MEM_WARN_MB, default a quarter of the host's memory)
 * a warning says so, and again each time it doubles; back under the mark,
 * an info line. Both looks share one timer, armed only while there is
 * something to look at.
 */
#include "ft/eds.h"
#include "util/hot.h"
#include "ft/eds_int.h"
#include "node/node_ft.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "codec/ctl.h"
#include "codec/packet_int.h"
#include "util/clock.h"
#include "util/log.h"

/* How often a loaded plug-in's calls are looked at, at most (ms). */
#define FW_POLL_MS 500
/* The largest 'F' message taken (its payload). */
#define TB_EVENT_MSG_MAX 65536

/* How often the resident memory is read (ms). */
#define MEM_POLL_MS 2000

static void on_watch_timer(tb_timer_t *t, int64_t now);

void tb_eds_watch_filters(tb_eds_t *e)
{
    if (!e)
        return;
    atomic_store(&e->fw_want, 1);
    tb_loop_wake(e->loop);
}

/* The mark in MiB: conf's TBON_MEM_WARN_MB (0: none), else a quarter of the
 * host's memory. */
static int64_t mem_mark_mb(const tb_config_t *conf)
{
    const char *v = conf->mem_warn_mb;
    if (v && *v) {
        char *end;
        long long mb = strtoll(v, &end, 10);
        if (!*end && mb >= 0)
            return mb;
        TB_WARN("eds", "TBON_MEM_WARN_MB=%s is not a number of MiB: the default it is", v);
    }
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (int64_t)pages / 4 * psz / (1 << 20) : 0;
}

void tb_eds_watch_start(tb_eds_t *e)
{
    int64_t now = tb_now_ms();
    e->watch_timer = (tb_timer_t){ .fn = on_watch_timer, .arg = e };
    /* A back-end runs no filter: its memory is its application's. */
    e->mem_mark = e->mem_next = e->role == TB_ROLE_BE ? 0 : mem_mark_mb(tb_node_conf(e->node));
    if (e->mem_mark <= 0)
        return;
    e->mem_due = now + MEM_POLL_MS;
    e->fw_due = e->mem_due;
    tb_timer_at(e->loop, &e->watch_timer, e->fw_due);
}

TB_HOT void tb_eds_filters_after_batch(tb_eds_t *e)
{
    if (e->fw_on || !atomic_load(&e->fw_want))
        return;
    e->fw_on = 1;
    e->fw_last = tb_now_ms();
    e->fw_cpu = tb_cpu_ms();
    e->fw_due = e->fw_last + FW_POLL_MS;
    tb_timer_at(e->loop, &e->watch_timer, e->fw_due);
}

/* The resident size, MiB (-1: unknown). */
static int64_t rss_mb(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0)
        return -1;
    buf[k] = 0;
    unsigned long long size, res;
    if (sscanf(buf, "%llu %llu", &size, &res) != 2)
        return -1;
    return (int64_t)(res * (unsigned long long)sysconf(_SC_PAGESIZE) >> 20);
}

static void look_at_memory(tb_eds_t *e)
{
    int64_t mb = rss_mb();
    if (mb < 0)
        return;
    if (mb >= e->mem_next) {
        TB_WARN("eds", "rank %u: resident memory %lld MiB, past the mark of %lld MiB "
                "(TBON_MEM_WARN_MB): what a filter keeps is not bounded by tbon "
                "(docs/user-guide.md, \"Memory\")", e->rank, (long long)mb,
                (long long)e->mem_mark);
        while (e->mem_next <= mb)
            e->mem_next *= 2;               /* again when it doubles */
    } else if (e->mem_next > e->mem_mark && mb < e->mem_mark) {
        TB_INFO("eds", "rank %u: resident memory %lld MiB, back under the mark of %lld MiB",
                e->rank, (long long)mb, (long long)e->mem_mark);
        e->mem_next = e->mem_mark;
    }
}

/* Write all of len bytes to a non-blocking socket, waiting a little for room
 * (the process ends right after: what is in the socket still goes). */
static void put_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    for (int tries = 0; len && tries < 50;) {
        ssize_t k = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            len -= (size_t)k;
        } else if (k < 0 && errno != EAGAIN && errno != EINTR) {
            return;
        } else {
            tries++;
            usleep(2000);
        }
    }
}

static void put_u32(uint8_t *b, uint32_t v)
{
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
    b[2] = (uint8_t)(v >> 16);
    b[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Read fd until TB_EVENT_FAULT_TAKEN (1), its end or ms (0). */
static int wait_taken(int fd, int ms)
{
    int64_t end = tb_now_ms() + ms;
    for (;;) {
        int64_t left = end - tb_now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
            return 0;
        char buf[256];
        ssize_t k = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (k == 0)
            return 1;                   /* the parent is gone: nobody to wait for */
        if (k > 0 && memchr(buf, TB_EVENT_FAULT_TAKEN, (size_t)k))
            return 1;
        if (k < 0 && errno != EAGAIN && errno != EINTR)
            return 1;
    }
}

void tb_eds_say_fault_taken(tb_eds_t *e, tbon_rank_t rank)
{
    const char k = TB_EVENT_FAULT_TAKEN;
    pthread_mutex_lock(&e->mu);
    for (watch_t *x = e->all; x; x = x->next)
        if (!x->dead && x->kind == K_EVENT && x->rank == rank)
            put_all(x->fd, &k, 1);
    pthread_mutex_unlock(&e->mu);
}

/* The call in n->fw has run for ran ms, past its limit. */
static void filter_hung(tb_eds_t *e, const struct tb_fwatch *w, int64_t ran)
{
    char ranks[200], msg[900];
    tb_stream_rank_list(w->src, w->nsrc, ranks, sizeof ranks);
    snprintf(msg, sizeof msg, "rank %u, stream %u: filter \"%s\" of %s has run for %lld ms%s, "
             "past its limit of %d ms (TBON_FILTER_PARAM_LIMIT), over %zu packet%s from "
             "rank%s %s%s; %s", e->rank, w->stream, w->name, w->path, (long long)ran,
             e->fw_grace ? " (while this process ran)" : "", w->limit,
             w->nin,
             w->nin == 1 ? "" : "s", w->nsrc == 1 ? "" : "s", ranks,
             w->nin > w->nsrc && w->nsrc == 16 ? " and more" : "",
             "this node is taken for failed and ends");
    tb_ctl_filter_fault_t m = { w->stream, w->filter, e->rank, 0, w->key, w->src, w->nsrc, msg };
    TB_ERROR("filter", "%s", msg);
    tbon_packet_t *p = tb_ctl_filter_fault_encode(&m);
    size_t len = 0;
    const uint8_t *pl = p ? tb_packet_payload(p, &len) : NULL;
    uint8_t hdr[5] = { TB_EVENT_FAULT };
    put_u32(hdr + 1, (uint32_t)len);
    uint8_t poison[5] = { TB_EVENT_POISON };
    put_u32(poison + 1, w->stream);
    int pfd = -1;
    pthread_mutex_lock(&e->mu);
    for (watch_t *x = e->all; x; x = x->next) {
        if (x->dead || x->kind != K_EVENT)
            continue;
        if (x->rank == e->parent && pl) {
            put_all(x->fd, hdr, sizeof hdr);
            put_all(x->fd, pl, len);
            pfd = x->fd;
        } else if (x->rank != e->parent) {
            put_all(x->fd, poison, sizeof poison);
        }
    }
    pthread_mutex_unlock(&e->mu);
    tbon_packet_unref(p);
    /* Our end must not reach the parent's reactor before our report does
     * (it would close the wave without us, and the FE would deliver it):
     * wait for the parent's 'K', or its end, or 10 s. */
    if (pfd >= 0 && !wait_taken(pfd, 10000))
        TB_WARN("filter", "the parent did not answer the report in 10 s; ending anyway");
    /* The node's own thread is in the call: the process that drives it
     * decides what follows (tbon_commnode ends). */
    tb_node_fatal(e->node, TBON_EFILTER, msg);
}

/* Slowness is not a hang: a process stopped (SIGSTOP, a debugger) or
 * starved for a while stops its filter call and this thread alike, and this
 * timer then fires late. That time is not held against the call (as
 * heartbeats do not hold a late timer against the peers, eds.c) - unless
 * the process used the CPU meanwhile: then this thread was only crowded
 * out, by the spinning call among others. */
static int64_t look_at_filters(tb_eds_t *e, int64_t now);

static void on_watch_timer(tb_timer_t *t, int64_t now)
{
    tb_eds_t *e = t->arg;
    int64_t next = INT64_MAX;
    if (e->mem_mark > 0) {
        if (now >= e->mem_due) {
            look_at_memory(e);
            e->mem_due = now + MEM_POLL_MS;
        }
        next = e->mem_due;
    }
    if (e->fw_on) {
        int64_t f = look_at_filters(e, now);
        if (f < 0)
            return;                         /* the node ends */
        if (f < next)
            next = f;
    }
    if (next == INT64_MAX)
        return;
    e->fw_due = next;
    tb_timer_at(e->loop, &e->watch_timer, next);
}

/* The filter calls; returns when to look next, or -1 if the node ends. */
static int64_t look_at_filters(tb_eds_t *e, int64_t now)
{
    struct tb_fwatch *w = tb_node_fwatch(e->node), copy;
    int64_t cpu = tb_cpu_ms();
    int64_t held = tb_held_ms(e->fw_last, e->fw_due, now, cpu - e->fw_cpu);
    e->fw_last = now;
    e->fw_cpu = cpu;
    pthread_mutex_lock(&w->mu);
    int64_t since = w->since;
    int limit = w->limit;
    if (since != e->fw_call) {
        e->fw_call = since;
        e->fw_grace = 0;
    }
    /* held: kept from running since it was due (of the call's time, what
     * came after the call began) */
    if (since && held)
        e->fw_grace += now - (since > e->fw_due ? since : e->fw_due);
    int64_t ran = now - since - e->fw_grace;
    int hung = since && limit > 0 && ran >= limit && !e->fw_fired;
    if (hung)
        memcpy(&copy, w, sizeof copy);      /* the mutex copied is not used */
    pthread_mutex_unlock(&w->mu);
    if (hung) {
        e->fw_fired = 1;
        filter_hung(e, &copy, ran);
        return -1;
    }
    int64_t next = now + FW_POLL_MS;
    if (since && limit > 0 && since + e->fw_grace + limit < next)
        next = since + e->fw_grace + limit;
    return next;
}

/* ---- the messages on event connections ---- */

TB_HOT int tb_eds_scan_events(tb_eds_t *e, watch_t *w, const uint8_t *buf, size_t n)
{
    int bye = 0;
    for (size_t i = 0; i < n;) {
        if (w->ev_need) {                       /* inside a message */
            size_t take = n - i < w->ev_need ? n - i : w->ev_need;
            memcpy(w->ev_msg + w->ev_have, buf + i, take);
            w->ev_have += (uint32_t)take;
            w->ev_need -= (uint32_t)take;
            i += take;
            if (w->ev_need == 0 && w->ev_hdr[0] == TB_EVENT_FAULT) {
                tb_eds_post(e, tb_cmd_filter_fault(tb_packet_decode(w->ev_msg, w->ev_have,
                                                                    TB_CTL_FILTER_FAULT, 0,
                                                                    w->rank, NULL),
                                                   w->rank));
                free(w->ev_msg);
                w->ev_msg = NULL;
                w->ev_hdr_have = 0;
            }
            continue;
        }
        if (w->ev_hdr_have) {                   /* inside a header */
            w->ev_hdr[w->ev_hdr_have++] = buf[i++];
            if (w->ev_hdr_have < 5)
                continue;
            uint32_t v = get_u32(w->ev_hdr + 1);
            if (w->ev_hdr[0] == TB_EVENT_GRACE || w->ev_hdr[0] == TB_EVENT_DETACH) {
                w->ev_hdr_have = 0;
                tb_eds_fe_said(e, w, w->ev_hdr[0], v);
                continue;
            }
            if (w->ev_hdr[0] == TB_EVENT_POISON) {
                w->ev_hdr_have = 0;
                if (w->rank != e->parent)
                    continue;
                TB_INFO("filter", "the parent's filter hung over stream %u: what we hold of "
                        "it will not go to an adopter", v);
                pthread_mutex_lock(&e->mu);
                if (e->nhung < sizeof e->hung / sizeof e->hung[0])
                    e->hung[e->nhung++] = v;
                pthread_mutex_unlock(&e->mu);
                continue;
            }
            if (v == 0 || v > TB_EVENT_MSG_MAX || !(w->ev_msg = malloc(v))) {
                TB_WARN_LIMITED("eds", "rank %u: an event message of %u bytes not taken",
                                w->rank, v);
                return TBON_EFORMAT;
            }
            w->ev_need = v;
            w->ev_have = 0;
            continue;
        }
        uint8_t b = buf[i++];
        if (b == TB_EVENT_FAULT || b == TB_EVENT_POISON || b == TB_EVENT_GRACE ||
            b == TB_EVENT_DETACH) {
            w->ev_hdr[0] = b;
            w->ev_hdr_have = 1;
        } else if (b == TB_EVENT_BYE) {
            bye |= 1;
        } else if (b == TB_EVENT_FENCED) {
            bye |= 2;
        }
    }
    return bye;
}

size_t tb_eds_take_hung_streams(tb_eds_t *e, uint32_t *out, size_t cap)
{
    if (!e)
        return 0;
    pthread_mutex_lock(&e->mu);
    size_t k = e->nhung < cap ? e->nhung : cap;
    memcpy(out, e->hung, k * sizeof *out);
    e->nhung = 0;
    pthread_mutex_unlock(&e->mu);
    return k;
}
