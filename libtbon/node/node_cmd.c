/* node_cmd.c - the node's mailbox: the commands other threads post to the
 * reactor (one constructor per command, node.h), the queue they wait in
 * (tb_node_post: a locked list and an eventfd), and the senders' wait on the
 * backlog (back-pressure). */
#include "node/node_int.h"
#include "util/hot.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/error.h"
#include "util/log.h"
#include "proc/relay.h"
#include "proc/sshmux.h"
#include "codec/packet_int.h"
#include "net/sock.h"

/* ---- commands (node.h) ---- */

/* Not calloc: glibc's calloc (2.36) never takes a chunk from the thread's
 * cache (tcache), so with a command made and freed per packet sent, the
 * cache's bin of this size stayed full and every free took the slow path
 * (bench/RESULTS.md). The fields are cleared one by one: a memset of the
 * whole block after malloc is what GCC turns back into calloc. */
TB_HOT static tb_cmd_t *cmd_new(int op)
{
    tb_cmd_t *c = malloc(sizeof *c);
    if (c) {
        c->mail.next = NULL;
        c->op = op;
        c->bytes = 0;
        memset(&c->u, 0, sizeof c->u);
    }
    return c;
}

/* A command that carries an fd: closed if there is no command. */
static tb_cmd_t *cmd_fd(int op, int fd)
{
    tb_cmd_t *c = cmd_new(op);
    if (!c && fd >= 0)
        close(fd);
    return c;
}

tb_cmd_t *tb_cmd_conn(int fd, tbon_rank_t rank)
{
    tb_cmd_t *c = cmd_fd(TB_CMD_CONN, fd);
    if (c) {
        c->u.conn.fd = fd;
        c->u.conn.rank = rank;
    }
    return c;
}

tb_cmd_t *tb_cmd_peer_lost(tbon_rank_t rank)
{
    tb_cmd_t *c = cmd_new(TB_CMD_PEER_LOST);
    if (c)
        c->u.peer_lost.rank = rank;
    return c;
}

tb_cmd_t *tb_cmd_child_exit(tbon_rank_t rank, int status)
{
    tb_cmd_t *c = cmd_new(TB_CMD_CHILD_EXIT);
    if (c) {
        c->u.child_exit.rank = rank;
        c->u.child_exit.status = status;
    }
    return c;
}

tb_cmd_t *tb_cmd_send(uint32_t stream, tbon_packet_t *pkt, uint64_t key, size_t bytes)
{
    tb_cmd_t *c = cmd_new(TB_CMD_SEND);
    if (!c) {
        tbon_packet_unref(pkt);
        return NULL;
    }
    c->bytes = bytes;
    c->u.send.stream = stream;
    c->u.send.pkt = pkt;
    c->u.send.key = key;
    return c;
}

tb_cmd_t *tb_cmd_stream(uint32_t id, int up, int sync, uint32_t timeout_ms, int down,
                        tbon_rank_t *members, size_t nmembers)
{
    tb_cmd_t *c = cmd_new(TB_CMD_STREAM);
    if (!c) {
        free(members);
        return NULL;
    }
    c->u.stream.id = id;
    c->u.stream.up = up;
    c->u.stream.sync = sync;
    c->u.stream.down = down;
    c->u.stream.timeout_ms = timeout_ms;
    c->u.stream.members = members;
    c->u.stream.nmembers = nmembers;
    return c;
}

tb_cmd_t *tb_cmd_params(uint32_t stream, int which, tbon_packet_t *pkt)
{
    tb_cmd_t *c = cmd_new(TB_CMD_PARAMS);
    if (!c) {
        tbon_packet_unref(pkt);
        return NULL;
    }
    c->u.params.stream = stream;
    c->u.params.which = which;
    c->u.params.pkt = pkt;
    return c;
}

tb_cmd_t *tb_cmd_filter_fault(tbon_packet_t *pkt, tbon_rank_t from)
{
    tb_cmd_t *c = pkt ? cmd_new(TB_CMD_FILTER_FAULT) : NULL;
    if (!c) {
        tbon_packet_unref(pkt);
        return NULL;
    }
    c->u.fault.pkt = pkt;
    c->u.fault.from = from;
    return c;
}

tb_cmd_t *tb_cmd_filter(int id, const char *path, const char *func)
{
    tb_cmd_t *c = cmd_new(TB_CMD_FILTER);
    if (c) {
        c->u.filter.id = id;
        c->u.filter.path = strdup(path);
        c->u.filter.func = strdup(func);
        if (!c->u.filter.path || !c->u.filter.func) {
            tb_cmd_free(c);
            return NULL;
        }
    }
    return c;
}

tb_cmd_t *tb_cmd_resume(void)
{
    return cmd_new(TB_CMD_RESUME);
}

tb_cmd_t *tb_cmd_shutdown(void)
{
    return cmd_new(TB_CMD_SHUTDOWN);
}

void tb_node_answer(tb_node_reply_t *r, int rc, const char *msg)
{
    pthread_mutex_lock(&r->mu);
    r->rc = rc;
    snprintf(r->msg, sizeof r->msg, "%s", msg ? msg : "");
    r->done = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

tb_cmd_t *tb_cmd_detach(const char *file, uint32_t hold_ms, tb_node_reply_t *reply)
{
    tb_cmd_t *c = cmd_new(TB_CMD_DETACH);
    char *f = strdup(file);
    if (!c || !f) {
        free(c);
        free(f);
        tb_node_answer(reply, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    c->u.detach.file = f;
    c->u.detach.hold_ms = hold_ms;
    c->u.detach.reply = reply;
    return c;
}

tb_cmd_t *tb_cmd_leave(void)
{
    return cmd_new(TB_CMD_LEAVE);
}

tb_cmd_t *tb_cmd_adopt_conn(int fd, tbon_rank_t rank, uint32_t inc)
{
    tb_cmd_t *c = cmd_fd(TB_CMD_ADOPT_CONN, fd);
    if (c) {
        c->u.adopt_conn.fd = fd;
        c->u.adopt_conn.rank = rank;
        c->u.adopt_conn.inc = inc;
    }
    return c;
}

tb_cmd_t *tb_cmd_adopted(int fd, tbon_rank_t parent, tbon_rank_t lost, uint64_t new_parent_us,
                         uint64_t connect_us)
{
    tb_cmd_t *c = cmd_fd(TB_CMD_ADOPTED, fd);
    if (c) {
        c->u.adopted.fd = fd;
        c->u.adopted.parent = parent;
        c->u.adopted.lost = lost;
        c->u.adopted.us[0] = new_parent_us;
        c->u.adopted.us[1] = connect_us;
    }
    return c;
}

tb_cmd_t *tb_cmd_adopt_failed(tbon_rank_t lost)
{
    tb_cmd_t *c = cmd_new(TB_CMD_ADOPT_FAILED);
    if (c)
        c->u.adopt_failed.lost = lost;
    return c;
}

tb_cmd_t *tb_cmd_fence(tbon_rank_t rank, int silent_ms)
{
    tb_cmd_t *c = cmd_new(TB_CMD_FENCE);
    if (c) {
        c->u.fence.rank = rank;
        c->u.fence.silent_ms = silent_ms;
    }
    return c;
}

tb_cmd_t *tb_cmd_suspect(tbon_rank_t rank, int on, int silent_ms)
{
    tb_cmd_t *c = cmd_new(TB_CMD_SUSPECT);
    if (c) {
        c->u.suspect.rank = rank;
        c->u.suspect.on = on;
        c->u.suspect.silent_ms = silent_ms;
    }
    return c;
}

tb_cmd_t *tb_cmd_check(uint64_t id)
{
    tb_cmd_t *c = cmd_new(TB_CMD_CHECK);
    if (c)
        c->u.check.id = id;
    return c;
}

tb_cmd_t *tb_cmd_perf(uint64_t id, uint32_t wait_ms)
{
    tb_cmd_t *c = cmd_new(TB_CMD_PERF);
    if (c) {
        c->u.perf.id = id;
        c->u.perf.wait_ms = wait_ms;
    }
    return c;
}

tb_cmd_t *tb_cmd_stream_end(uint32_t id)
{
    tb_cmd_t *c = cmd_new(TB_CMD_STREAM_END);
    if (c)
        c->u.stream_end.id = id;
    return c;
}

tb_cmd_t *tb_cmd_direct(tbon_rank_t *dst, size_t n, uint32_t flags, tbon_packet_t *pkt,
                        size_t bytes)
{
    tb_cmd_t *c = cmd_new(TB_CMD_DIRECT);
    if (!c) {
        free(dst);
        tbon_packet_unref(pkt);
        return NULL;
    }
    c->bytes = bytes;
    c->u.direct.dst = dst;
    c->u.direct.ndst = n;
    c->u.direct.flags = flags;
    c->u.direct.pkt = pkt;
    return c;
}

tb_cmd_t *tb_cmd_ping(tbon_rank_t target, uint64_t id)
{
    tb_cmd_t *c = cmd_new(TB_CMD_PING);
    if (c) {
        c->u.ping.target = target;
        c->u.ping.id = id;
    }
    return c;
}

tb_cmd_t *tb_cmd_attr(const char *key, const char *value)
{
    tb_cmd_t *c = cmd_new(TB_CMD_ATTR);
    if (c && (!(c->u.attr.key = strdup(key)) || (value && !(c->u.attr.value = strdup(value))))) {
        tb_cmd_free(c);
        return NULL;
    }
    return c;
}

tb_cmd_t *tb_cmd_relink(int fd, tbon_rank_t rank, int up, uint32_t gen, const char *why)
{
    tb_cmd_t *c = cmd_fd(TB_CMD_RELINK, fd);
    if (c) {
        c->u.relink.fd = fd;
        c->u.relink.rank = rank;
        c->u.relink.up = up;
        c->u.relink.gen = gen;
        snprintf(c->u.relink.why, sizeof c->u.relink.why, "%s", why ? why : "");
    }
    return c;
}

tb_cmd_t *tb_cmd_join_conn(int fd, int role, tbon_rank_t rank, uint32_t port)
{
    tb_cmd_t *c = cmd_fd(TB_CMD_JOIN_CONN, fd);
    if (c) {
        c->u.join_conn.fd = fd;
        c->u.join_conn.role = role;
        c->u.join_conn.rank = rank;
        c->u.join_conn.port = port;
    }
    return c;
}

static void close_fd(int fd)
{
    if (fd >= 0)
        close(fd);
}

TB_HOT void tb_cmd_free(tb_cmd_t *c)
{
    if (!c)
        return;
    switch (c->op) {
    case TB_CMD_CONN:       close_fd(c->u.conn.fd); break;
    case TB_CMD_ADOPT_CONN: close_fd(c->u.adopt_conn.fd); break;
    case TB_CMD_ADOPTED:    close_fd(c->u.adopted.fd); break;
    case TB_CMD_JOIN_CONN:  close_fd(c->u.join_conn.fd); break;
    case TB_CMD_RELINK:     close_fd(c->u.relink.fd); break;
    case TB_CMD_SEND:       tbon_packet_unref(c->u.send.pkt); break;
    case TB_CMD_PARAMS:     tbon_packet_unref(c->u.params.pkt); break;
    case TB_CMD_FILTER_FAULT: tbon_packet_unref(c->u.fault.pkt); break;
    case TB_CMD_STREAM:     free(c->u.stream.members); break;
    case TB_CMD_DIRECT:
        free(c->u.direct.dst);
        tbon_packet_unref(c->u.direct.pkt);
        break;
    case TB_CMD_FILTER:
        free(c->u.filter.path);
        free(c->u.filter.func);
        break;
    case TB_CMD_ATTR:
        free(c->u.attr.key);
        free(c->u.attr.value);
        break;
    case TB_CMD_DETACH:
        free(c->u.detach.file);
        if (c->u.detach.reply)
            tb_node_answer(c->u.detach.reply, TBON_ECLOSED, "the session has ended");
        break;
    default:
        break;
    }
    free(c);
}

/* A command's bytes count in the backlog from the moment it is queued. */
static inline void count_pending(tb_node_t *n, const tb_cmd_t *cmd)
{
    if (cmd->bytes)
        atomic_fetch_add(&n->pending, cmd->bytes);
}

void tb_node_queue(tb_node_t *n, tb_cmd_t *cmd)
{
    count_pending(n, cmd);
    tb_loop_queue(n->loop, &cmd->mail);
}

void tb_node_wake(tb_node_t *n)
{
    tb_loop_wake(n->loop);
}

/* tb_loop_post: a command behind one not yet taken rides on its wake-up. */
TB_HOT void tb_node_post(tb_node_t *n, tb_cmd_t *cmd)
{
    count_pending(n, cmd);
    tb_loop_post(n->loop, &cmd->mail);
}

TB_HOT int tb_node_wait_backlog(tb_node_t *n, int flush)
{
    size_t limit = flush ? 0 : TB_HWM;
    pthread_mutex_lock(&n->qmu);
    atomic_fetch_add(&n->waiters, 1);
    while (!atomic_load(&n->closed) && !atomic_load(&n->released) &&
           atomic_load(&n->pending) + atomic_load(&n->queued) > limit)
        pthread_cond_wait(&n->bcond, &n->qmu);
    atomic_fetch_sub(&n->waiters, 1);
    int closed = atomic_load(&n->closed), released = atomic_load(&n->released);
    pthread_mutex_unlock(&n->qmu);
    return (closed && !flush) || released ? TBON_ECLOSED : 0;
}

int tb_node_dlog_full(const tb_node_t *n)
{
    return atomic_load(&n->dlog_bytes) > TB_DLOG_WINDOW;
}

int tb_node_wait_dlog(tb_node_t *n)
{
    pthread_mutex_lock(&n->qmu);
    atomic_fetch_add(&n->waiters, 1);
    while (!atomic_load(&n->closed) && !atomic_load(&n->released) && tb_node_dlog_full(n))
        pthread_cond_wait(&n->bcond, &n->qmu);
    atomic_fetch_sub(&n->waiters, 1);
    int closed = atomic_load(&n->closed) || atomic_load(&n->released);
    pthread_mutex_unlock(&n->qmu);
    return closed ? TBON_ECLOSED : 0;
}

void tb_node_release_waiters(tb_node_t *n)
{
    pthread_mutex_lock(&n->qmu);
    atomic_store(&n->released, 1);
    pthread_cond_broadcast(&n->bcond);
    pthread_mutex_unlock(&n->qmu);
    tb_loop_wake(n->loop);
}

int tb_node_child_index(const tb_node_t *n, tbon_rank_t r)
{
    /* Children are in increasing rank order: binary search; adopted ones
     * (after nsorted) are few: a scan. */
    for (size_t i = n->nsorted; i < n->nchild; i++)
        if (n->child[i].rank == r)
            return (int)i;
    size_t lo = 0, hi = n->nsorted;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (n->child[mid].rank == r)
            return (int)mid;
        if (n->child[mid].rank < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}


uint64_t tb_node_session_id(const tb_node_t *n)
{
    return n->cfg.session.id;
}
