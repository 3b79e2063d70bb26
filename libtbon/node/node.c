/* node.c - the data-plane reactor of a tree process: one epoll loop over the
 * connections to the parent and the children, the command queue and timers.
 * It never blocks on anything but epoll_wait (DESIGN.md, "Threads"). */
#include "node/node_int.h"

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

/* Read at most this much from one connection per wake-up, so one busy child
 * cannot starve the others. */
#define READ_BUDGET (256u * 1024)

/* ---- commands (node.h) ---- */

static tb_cmd_t *cmd_new(int op)
{
    tb_cmd_t *c = calloc(1, sizeof *c);
    if (c)
        c->op = op;
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

tb_cmd_t *tb_cmd_check(uint64_t id)
{
    tb_cmd_t *c = cmd_new(TB_CMD_CHECK);
    if (c)
        c->u.check.id = id;
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

void tb_cmd_free(tb_cmd_t *c)
{
    if (!c)
        return;
    switch (c->op) {
    case TB_CMD_CONN:       close_fd(c->u.conn.fd); break;
    case TB_CMD_ADOPT_CONN: close_fd(c->u.adopt_conn.fd); break;
    case TB_CMD_ADOPTED:    close_fd(c->u.adopted.fd); break;
    case TB_CMD_JOIN_CONN:  close_fd(c->u.join_conn.fd); break;
    case TB_CMD_SEND:       tbon_packet_unref(c->u.send.pkt); break;
    case TB_CMD_PARAMS:     tbon_packet_unref(c->u.params.pkt); break;
    case TB_CMD_STREAM:     free(c->u.stream.members); break;
    case TB_CMD_FILTER:
        free(c->u.filter.path);
        free(c->u.filter.func);
        break;
    case TB_CMD_ATTR:
        free(c->u.attr.key);
        free(c->u.attr.value);
        break;
    default:
        break;
    }
    free(c);
}

void tb_node_post(tb_node_t *n, tb_cmd_t *cmd)
{
    if (cmd->bytes)
        atomic_fetch_add(&n->pending, cmd->bytes);
    pthread_mutex_lock(&n->qmu);
    cmd->next = NULL;
    if (n->qtail)
        n->qtail->next = cmd;
    else
        n->qhead = cmd;
    n->qtail = cmd;
    atomic_store(&n->posted, 1);
    pthread_mutex_unlock(&n->qmu);
    uint64_t one = 1;
    ssize_t w = write(n->evfd, &one, sizeof one);
    (void)w;
}

int tb_node_wait_backlog(tb_node_t *n, int flush)
{
    size_t limit = flush ? 0 : TB_HWM;
    pthread_mutex_lock(&n->qmu);
    atomic_fetch_add(&n->waiters, 1);
    while (!atomic_load(&n->closed) &&
           atomic_load(&n->pending) + atomic_load(&n->queued) > limit)
        pthread_cond_wait(&n->bcond, &n->qmu);
    atomic_fetch_sub(&n->waiters, 1);
    int closed = atomic_load(&n->closed);
    pthread_mutex_unlock(&n->qmu);
    return closed && !flush ? TBON_ECLOSED : 0;
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

/* ---- sending ---- */

void tb_node_send_ctl(tb_node_t *n, tb_conn_t *c, int op, tbon_packet_t *p)
{
    if (c && p && !c->closed)
        tb_conn_send_packet(c, TB_FRAME_CONTROL, 0, op, n->rank, p);
    tbon_packet_unref(p);
}

void tb_node_to_parent(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more, uint64_t key)
{
    if (!p)
        return;
    tbon_rank_t src = tbon_packet_source(p);
    if (src == TBON_RANK_NONE)
        src = n->rank;
    if (n->role == TB_ROLE_FE) {
        /* The FE's upstream output is the application's input. */
        if (tbon_packet_source(p) == TBON_RANK_NONE || tbon_packet_stream(p) != stream) {
            size_t len;
            const uint8_t *pl = tb_packet_payload(p, &len);
            tbon_packet_t *q = tb_packet_decode(pl, len, tbon_packet_tag(p), stream, src, NULL);
            tbon_packet_unref(p);
            p = q;
        }
        if (p && n->cbs.deliver)
            n->cbs.deliver(n->cbs.arg, stream, p, 0);
        else
            tbon_packet_unref(p);
        return;
    }
    if (!more)
        tb_stream_sent(n, stream, key);
    if (n->parent && !n->parent->closed) {
        tb_conn_send_packet_key(n->parent, TB_FRAME_DATA, more ? TB_FRAME_F_MORE : 0, stream,
                                tbon_packet_tag(p), src, key, p);
    } else if (n->orphan) {
        tb_ft_buffer(n, stream, p, more, key);
        return;
    }
    tbon_packet_unref(p);
}

void tb_node_to_child(tb_node_t *n, size_t i, uint32_t stream, tbon_packet_t *p, uint64_t q)
{
    tb_conn_t *c = n->child[i].conn;
    if (!c || c->closed)
        return;
    tbon_rank_t src = tbon_packet_source(p);
    tb_conn_send_packet_key(c, TB_FRAME_DATA, 0, stream, tbon_packet_tag(p),
                            src == TBON_RANK_NONE ? n->rank : src, q, p);
}

void tb_node_fail(tb_node_t *n, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n->failed)
        return;
    n->failed = 1;
    TB_ERROR("startup", "%s", msg);
    if (n->role == TB_ROLE_FE) {
        if (n->cbs.status)
            n->cbs.status(n->cbs.arg, TB_NODE_FAILED, code, msg);
    } else {
        tb_node_send_ctl(n, n->parent, TB_CTL_FAIL,
                         tb_ctl_fail_encode(&(tb_ctl_fail_t){ code, msg }));
    }
}

/* ---- connections ---- */

static void watch(tb_node_t *n, tb_conn_t *c, uint32_t events)
{
    if (c->registered && c->events == events)
        return;
    struct epoll_event ev = { .events = events, .data.ptr = c };
    if (epoll_ctl(n->epfd, c->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) == 0) {
        c->events = events;
        c->registered = 1;
    }
}

/* Take c out of the loop; it is freed after the current batch of events,
 * which may still name it (STYLE.md: never free a connection inside its own
 * dispatch). */
void tb_node_watch_conn(tb_node_t *n, tb_conn_t *c)
{
    watch(n, c, EPOLLIN);
}

int tb_node_add_child(tb_node_t *n, tbon_rank_t rank, int is_be)
{
    if (n->nchild == n->capchild) {
        size_t nc = n->capchild ? 2 * n->capchild : 4;
        tb_child_t *v = realloc(n->child, nc * sizeof *v);
        if (!v)
            return -1;
        n->child = v;
        n->capchild = nc;
    }
    memset(&n->child[n->nchild], 0, sizeof *n->child);
    n->child[n->nchild].rank = rank;
    n->child[n->nchild].is_be = is_be;
    n->child[n->nchild].state = CH_CONNECTED;
    n->nchild++;
    if (tb_stream_add_child(n)) {
        n->nchild--;
        return -1;
    }
    return (int)n->nchild - 1;
}

void tb_node_emit(tb_node_t *n, tbon_event_type_t type, tbon_rank_t r, tbon_rank_t p,
                  uint32_t inc, uint64_t version)
{
    if (n->role != TB_ROLE_FE || !n->cbs.event)
        return;
    tbon_event_t ev = { .type = type, .rank = r, .parent = p, .incarnation = inc,
                        .view_version = version };
    n->cbs.event(n->cbs.arg, &ev);
}

void tb_node_fault_end(tb_node_t *n, tbon_rank_t r)
{
    char msg[300];
    snprintf(msg, sizeof msg, "rank %u on host %s failed and fault tolerance is off: the "
             "session ends", r, tb_topology_host(n->topo, r));
    TB_ERROR("ft", "%s", msg);
    if (n->cbs.status)
        n->cbs.status(n->cbs.arg, TB_NODE_CLOSED, TBON_ECLOSED, msg);
    tb_node_begin_shutdown(n);
}

static void retire(tb_node_t *n, tb_conn_t *c)
{
    epoll_ctl(n->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    c->closed = 1;
    c->next_dead = n->dead;
    n->dead = c;
}

static void bury_list(tb_conn_t **list)
{
    while (*list) {
        tb_conn_t *c = *list;
        *list = c->next_dead;
        tb_conn_destroy(c);
    }
}

static void bury(tb_node_t *n)
{
    bury_list(&n->dead);
}

/* A lost parent's connection is closed a little later: when a parent dies
 * all its children recover at once, on every core, and its close (the
 * socket's teardown, the buffers) is work that can wait for the burst to
 * pass (docs/protocol.md 8.3). */
#define TB_LATE_CLOSE_MS 50

static void retire_late(tb_node_t *n, tb_conn_t *c)
{
    epoll_ctl(n->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    c->closed = 1;
    c->next_dead = n->dead_late;
    n->dead_late = c;
    if (!n->late_due)
        n->late_due = tb_now_ms() + TB_LATE_CLOSE_MS;
}

/* Child i's connection is over: its streams and views stop waiting for it. */
static void detach_child(tb_node_t *n, size_t i)
{
    tb_child_t *ch = &n->child[i];
    retire(n, ch->conn);
    ch->conn = NULL;
    ch->state = CH_GONE;
    tb_stream_child_gone(n, i);
    tb_view_child_gone(n, i);
}

void tb_node_close_child(tb_node_t *n, size_t i, const char *why)
{
    tb_child_t *ch = &n->child[i];
    if (!ch->conn)
        return;
    if (!tb_node_ending(n))
        TB_WARN("conn", "lost child rank %u (%s): %s", ch->rank,
                tb_topology_host(n->topo, ch->rank), why);
    detach_child(n, i);
    if (tb_node_life(n) == TB_LIFE_RUNNING && ch->leaving) {
        ch->released = 1;
        tb_view_left(n, i);
    } else if (tb_node_life(n) == TB_LIFE_RUNNING) {
        /* With fault tolerance it may live on under another parent (after
         * we were fenced, say): it is no longer ours to kill. */
        ch->released = n->ft_ready;
        tb_ft_child_lost(n, i);
    }
    /* Until the whole tree is up, losing any child fails the start-up (by
     * name), or the tree would wait for it until the timeout. A child we
     * launched is reported when it exits, with its own words (a remote
     * one's stderr may come after its connection's end); the start-up
     * timer covers one that lives on. */
    if (tb_node_life(n) == TB_LIFE_STARTING && (ch->pid <= 0 || ch->exited))
        tb_node_fail(n, TBON_ELAUNCH, "rank %u on host %s closed its connection before the tree was ready: %s",
                     ch->rank, tb_topology_host(n->topo, ch->rank), why);
}

void tb_node_drop_child(tb_node_t *n, size_t i)
{
    tb_child_t *ch = &n->child[i];
    if (!ch->conn)
        return;
    TB_WARN("conn", "rank %u was restarted: the connection of its old process closed",
            ch->rank);
    ch->released = 1;
    detach_child(n, i);
}

static void parent_lost(tb_node_t *n, const char *why_in)
{
    char why[600];   /* why_in may live in the connection freed below */
    snprintf(why, sizeof why, "%s", why_in);
    tbon_rank_t lost = n->parent ? n->parent->rank : TBON_RANK_NONE;
    if (n->parent) {
        retire_late(n, n->parent);
        n->parent = NULL;
    }
    if (tb_node_ending(n) || n->orphan)
        return;
    if (lost != TBON_RANK_NONE && tb_ft_parent_lost(n, lost))
        return;
    TB_WARN("conn", "lost the parent: %s; leaving", why);
    atomic_store(&n->closed, 1);
    if (n->cbs.status)
        n->cbs.status(n->cbs.arg, TB_NODE_CLOSED, TBON_ECLOSED, why);
    tb_node_begin_shutdown(n);
    /* The session is gone: give the children half a second to leave, then
     * they are killed, so that everything is gone within a second. */
    n->shutdown_deadline = tb_now_ms() + 500;
}

void tb_node_leave(tb_node_t *n)
{
    /* A back-end that leaves a running tree says so first: its parent then
     * reports it left, not failed (TBON_EV_NODE_LEFT). */
    if (n->role == TB_ROLE_BE && n->ft_ready && !tb_node_ending(n) && n->parent &&
        !n->parent->closed)
        tb_node_send_ctl(n, n->parent, TB_CTL_LEAVE, tb_ctl_leave_encode(&(tb_ctl_leave_t){ 0 }));
    tb_node_enter(n, TB_LIFE_STOPPED);
}

void tb_node_begin_shutdown(tb_node_t *n)
{
    if (!tb_node_enter(n, TB_LIFE_SHUTTING_DOWN))
        return;
    n->shutdown_deadline = tb_now_ms() + 3000;
    tb_eds_leave(n->eds);
    for (size_t i = 0; i < n->nchild; i++)
        if (n->child[i].conn)
            tb_node_send_ctl(n, n->child[i].conn, TB_CTL_SHUTDOWN,
                             tb_ctl_shutdown_encode(&(tb_ctl_shutdown_t){ 0 }));
}

/* A new authenticated data connection from the EDS. */
static void on_conn(tb_node_t *n, tb_cmd_t *cmd)
{
    int i = tb_node_child_index(n, cmd->u.conn.rank);
    if (i < 0 || n->child[i].conn || n->child[i].state == CH_GONE) {
        TB_WARN("conn", "unexpected data connection from rank %u; closed", cmd->u.conn.rank);
        return;
    }
    tb_child_t *ch = &n->child[i];
    ch->conn = tb_conn_new(cmd->u.conn.fd, ch->rank, i, TB_FRAME_MAX_DEFAULT);
    if (!ch->conn)
        return;
    cmd->u.conn.fd = -1;
    watch(n, ch->conn, EPOLLIN);
    ch->state = CH_CONNECTED;
    /* Every child gets the whole topology first (DESIGN.md, "Topology"),
     * serialised and compressed once for all of them. */
    if (!n->topo_frame) {
        uint8_t *buf;
        size_t len;
        if (tb_topology_serialize(n->topo, &buf, &len) == 0) {
            tb_frame_hdr_t h = { .type = TB_FRAME_TOPOLOGY, .source = n->rank };
            if (tb_frame_build(&h, buf, len, 1, &n->topo_frame, &n->topo_frame_len) != 0)
                n->topo_frame = NULL;
            free(buf);
        }
    }
    uint8_t *copy = n->topo_frame ? malloc(n->topo_frame_len) : NULL;
    if (copy) {
        memcpy(copy, n->topo_frame, n->topo_frame_len);
        tb_conn_send_raw(ch->conn, copy, n->topo_frame_len);
    }
    /* A commnode learns next how to launch its own children. */
    if (!ch->is_be) {
        size_t na = 0;
        while (n->cfg.backend_argv && n->cfg.backend_argv[na])
            na++;
        /* Under Slurm every process is started by a step: the commnode
         * launches nothing ("" and "-", docs/protocol.md). */
        int steps = n->cfg.slurm;
        tb_ctl_launch_t l = {
            .backend_exe = n->cfg.backend_exe && !steps ? n->cfg.backend_exe : "",
            .argv = n->cfg.backend_argv, .nargv = na,
            .rsh = n->cfg.rsh ? n->cfg.rsh : "",
            .commnode = steps ? "-" : n->cfg.commnode_path ? n->cfg.commnode_path : "",
        };
        tb_node_send_ctl(n, ch->conn, TB_CTL_LAUNCH, tb_ctl_launch_encode(&l));
    }
    /* Filters loaded so far reach late joiners too (attach mode). */
    if (!ch->is_be) {
        for (int id = TBON_FILTER_BUILTIN_COUNT;; id++) {
            const tb_filter_t *f = tb_filter_reg_get(n->filters, id);
            if (!f)
                break;
            tb_node_send_ctl(n, ch->conn, TB_CTL_FILTER,
                             tb_ctl_filter_encode(&(tb_ctl_filter_t){ f->id, f->path, f->name }));
        }
    }
    if (tb_node_ending(n))
        tb_node_send_ctl(n, ch->conn, TB_CTL_SHUTDOWN,
                         tb_ctl_shutdown_encode(&(tb_ctl_shutdown_t){ 0 }));
    if (ch->is_be) {
        ch->state = CH_READY;
        ch->count = 1;
        tb_node_check_ready(n);
    }
    if (ch->joined)
        tb_view_joined(n, (size_t)i);
}

/* A node message (TB_CTL_OWN_NODE) from the parent: m decoded from p. */
static void ctl_down(tb_node_t *n, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    switch (m->op) {
    case TB_CTL_STREAM: {
        const tb_ctl_stream_t *s = &m->u.stream;
        tb_stream_create(n, s->id, s->up, s->sync, s->timeout_ms, s->down, s->members,
                         s->nmembers);
        break;
    }
    case TB_CTL_FILTER: {
        const tb_ctl_filter_t *f = &m->u.filter;
        tbon_error_t err;
        if (tb_filter_reg_load(n->filters, f->path, f->func, f->id, &err) < 0) {
            TB_ERROR("filter", "%s", err.msg);
            tb_node_send_ctl(n, n->parent, TB_CTL_STREAM_ERR,
                             tb_ctl_stream_err_encode(&(tb_ctl_stream_err_t){ 0, err.msg }));
        }
        for (size_t i = 0; i < n->nchild; i++)
            if (!n->child[i].is_be && n->child[i].conn)
                tb_node_send_ctl(n, n->child[i].conn, TB_CTL_FILTER, tbon_packet_ref(p));
        break;
    }
    case TB_CTL_PARAMS: {
        const tb_ctl_params_t *pa = &m->u.params;
        tbon_packet_t *q = tb_packet_decode(pa->payload, pa->len, pa->tag, pa->stream, 0, NULL);
        if (q)
            tb_stream_set_params(n, pa->stream, pa->which, q);
        break;
    }
    case TB_CTL_SHUTDOWN:
        if (n->role == TB_ROLE_BE) {
            atomic_store(&n->closed, 1);
            if (n->cbs.status)
                n->cbs.status(n->cbs.arg, TB_NODE_CLOSED, 0, "the front-end shut the session down");
            tb_node_enter(n, TB_LIFE_STOPPED);
        } else {
            tb_node_begin_shutdown(n);
        }
        break;
    default:
        TB_WARN("conn", "control message %s from the parent is not the node's", tb_ctl_name(m->op));
    }
}

/* A node message (TB_CTL_OWN_NODE) from child i: m decoded from p. */
static void ctl_up(tb_node_t *n, size_t i, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    tb_child_t *ch = &n->child[i];
    switch (m->op) {
    case TB_CTL_READY:
        if (ch->state == CH_CONNECTED) {
            ch->state = CH_READY;
            ch->count = m->u.ready.count;
            tb_node_check_ready(n);
        }
        break;
    case TB_CTL_FAIL:
        /* Pass the first failure up unchanged: it names the node. */
        if (n->role == TB_ROLE_FE)
            tb_node_fail(n, m->u.fail.code, "%s", m->u.fail.msg);
        else if (!n->failed) {
            n->failed = 1;
            tb_node_send_ctl(n, n->parent, TB_CTL_FAIL, tbon_packet_ref(p));
        }
        break;
    case TB_CTL_STREAM_ERR:
        if (n->role == TB_ROLE_FE) {
            if (n->cbs.status)
                n->cbs.status(n->cbs.arg, TB_NODE_STREAM_ERROR, (int)m->u.stream_err.stream,
                              m->u.stream_err.msg);
        } else {
            tb_node_send_ctl(n, n->parent, TB_CTL_STREAM_ERR, tbon_packet_ref(p));
        }
        break;
    case TB_CTL_LEAVE:
        ch->leaving = 1;        /* its end that follows is no failure */
        break;
    case TB_CTL_PORT: {
        uint32_t r = m->u.port.rank;
        if (r < tb_topology_size(n->topo)) {
            tb_topology_set_port(n->topo, r, (uint16_t)m->u.port.port);
            if (n->role == TB_ROLE_FE) {
                tb_node_write_attach(n);
                if (n->cfg.slurm)
                    tb_node_slurm_next(n);
            }
            else
                tb_node_send_ctl(n, n->parent, TB_CTL_PORT, tbon_packet_ref(p));
        }
        break;
    }
    default:
        TB_WARN("conn", "control message %s from rank %u is not the node's", tb_ctl_name(m->op),
                ch->rank);
    }
}

/* "the parent" or "rank R", for warnings about a control message. */
static const char *ctl_from(const tb_node_t *n, int child, char *buf, size_t cap)
{
    if (child < 0)
        return "the parent";
    snprintf(buf, cap, "rank %u", n->child[child].rank);
    return buf;
}

/* A CONTROL frame from the parent (child < 0) or child i: decoded once, then
 * taken by the module that owns its op (codec/ctl.h's table). */
static void on_ctl(tb_node_t *n, int child, int op, tbon_packet_t *p)
{
    const tb_ctl_info_t *info = tb_ctl_info(op);
    char b[32];
    if (!info) {
        TB_WARN("conn", "unknown control message %d from %s", op, ctl_from(n, child, b, sizeof b));
        return;
    }
    if (!(info->dir & (child < 0 ? TB_CTL_DOWN : TB_CTL_UP))) {
        TB_WARN("conn", "control message %s from %s goes %s only; ignored", info->name,
                ctl_from(n, child, b, sizeof b), tb_ctl_dir_name(info->dir));
        return;
    }
    tb_ctl_msg_t m;
    tbon_error_t err;
    if (tb_ctl_decode(op, p, &m, &err) != 0) {
        TB_WARN("conn", "from %s: %s; ignored", ctl_from(n, child, b, sizeof b), err.msg);
        return;
    }
    switch (info->owner) {
    case TB_CTL_OWN_NODE:
        if (child < 0)
            ctl_down(n, &m, p);
        else
            ctl_up(n, (size_t)child, &m, p);
        break;
    case TB_CTL_OWN_FT:
        tb_ft_ctl(n, child, &m, p);
        break;
    case TB_CTL_OWN_VIEW:
        tb_view_ctl(n, child, &m, p);
        break;
    case TB_CTL_OWN_ATTR:
        tb_attr_ctl(n, child, &m, p);
        break;
    default:
        /* Read before a connection reaches the reactor (join, adoption). */
        TB_WARN("conn", "control message %s from %s is read at start-up only; ignored",
                info->name, ctl_from(n, child, b, sizeof b));
    }
    tb_ctl_msg_free(&m);
}

/* Take the frames a connection has received. */
static void on_frames(tb_node_t *n, tb_conn_t *c)
{
    tb_frame_t f;
    int rc;
    while (!c->closed && (rc = tb_fdec_next(c->dec, &f)) == 1) {
        if (f.hdr.type == TB_FRAME_DATA && f.hdr.len == 0 && c->index >= 0) {
            /* A child's wave with no packet (node_stream.c, empty_up). */
            tb_stream_up(n, (size_t)c->index, f.hdr.stream, NULL, 0, f.hdr.seq);
        } else if (f.hdr.type == TB_FRAME_DATA || f.hdr.type == TB_FRAME_CONTROL) {
            tbon_error_t err;
            tbon_packet_t *p = tb_packet_decode(f.payload, f.hdr.len, f.hdr.tag, f.hdr.stream,
                                                f.hdr.source, &err);
            if (!p) {
                snprintf(c->why, sizeof c->why, "bad packet: %s", err.msg);
                c->closed = 1;
            } else if (f.hdr.type == TB_FRAME_DATA) {
                if (c->index < 0)
                    tb_stream_down(n, f.hdr.stream, p, f.hdr.seq);
                else
                    tb_stream_up(n, (size_t)c->index, f.hdr.stream, p,
                                 (f.hdr.flags & TB_FRAME_F_MORE) != 0, f.hdr.seq);
                p = NULL;
            } else {
                on_ctl(n, c->index < 0 ? -1 : c->index, f.hdr.tag, p);
            }
            tbon_packet_unref(p);
        } else if (f.hdr.type != TB_FRAME_TOPOLOGY && f.hdr.type != TB_FRAME_HEARTBEAT) {
            snprintf(c->why, sizeof c->why, "unexpected %s frame", tb_frame_type_name(f.hdr.type));
            c->closed = 1;
        }
        tb_frame_release(&f);
    }
    if (!c->closed && tb_fdec_error_kind(c->dec) != TB_FDEC_OK) {
        snprintf(c->why, sizeof c->why, "bad frame: %s", tb_fdec_error(c->dec));
        c->closed = 1;
    }
}

static void on_cmd(tb_node_t *n, tb_cmd_t *c)
{
    if (c->bytes)
        atomic_fetch_sub(&n->pending, c->bytes);
    switch (c->op) {
    case TB_CMD_CONN:
        on_conn(n, c);
        break;
    case TB_CMD_PEER_LOST:
        if (n->parent && c->u.peer_lost.rank == n->parent->rank)
            parent_lost(n, "the event connection to the parent ended");
        break;
    case TB_CMD_ADOPT_CONN:
        tb_ft_adopt_conn(n, c);
        break;
    case TB_CMD_FENCE: {
        int i = tb_node_child_index(n, c->u.fence.rank);
        if (i >= 0 && n->child[i].conn) {
            char why[96];
            snprintf(why, sizeof why, "no heartbeat for %d ms: fenced", c->u.fence.silent_ms);
            tb_node_close_child(n, (size_t)i, why);
            /* Fenced, it is stale: still ours to kill at the end if it is
             * still there (stopped for good, say). */
            n->child[i].released = 0;
        }
        break;
    }
    case TB_CMD_ADOPTED:
        /* The lost parent's data connection may not have ended here yet. */
        if (n->parent && n->parent->rank == c->u.adopted.lost)
            parent_lost(n, "the event connection to the parent ended");
        if (n->orphan && !n->parent && !tb_node_ending(n))
            tb_ft_adopted(n, c);
        break;
    case TB_CMD_ADOPT_FAILED:
        if (n->orphan) {
            tb_ft_adopt_failed(n, c->u.adopt_failed.lost);
            parent_lost(n, "no node would adopt us");
        }
        break;
    case TB_CMD_CHILD_EXIT:
        tb_node_child_exited(n, c->u.child_exit.rank, c->u.child_exit.status);
        break;
    case TB_CMD_SEND:
        if (n->role == TB_ROLE_FE)
            tb_stream_down(n, c->u.send.stream, c->u.send.pkt, 0);
        else {
            tb_stream_keep(n, c->u.send.stream, c->u.send.pkt);
            tb_node_to_parent(n, c->u.send.stream, c->u.send.pkt, 0, c->u.send.key);
        }
        c->u.send.pkt = NULL;
        break;
    case TB_CMD_STREAM:
        tb_stream_create(n, c->u.stream.id, c->u.stream.up, c->u.stream.sync,
                         c->u.stream.timeout_ms, c->u.stream.down, c->u.stream.members,
                         c->u.stream.nmembers);
        break;
    case TB_CMD_PARAMS:
        tb_stream_set_params(n, c->u.params.stream, c->u.params.which, c->u.params.pkt);
        c->u.params.pkt = NULL;
        break;
    case TB_CMD_FILTER: {
        tbon_error_t err;
        tb_ctl_filter_t f = { c->u.filter.id, c->u.filter.path, c->u.filter.func };
        if (tb_filter_reg_load(n->filters, f.path, f.func, f.id, &err) < 0)
            TB_ERROR("filter", "%s", err.msg);
        for (size_t i = 0; i < n->nchild; i++)
            if (!n->child[i].is_be && n->child[i].conn)
                tb_node_send_ctl(n, n->child[i].conn, TB_CTL_FILTER, tb_ctl_filter_encode(&f));
        break;
    }
    case TB_CMD_CHECK:
        tb_view_check(n, c->u.check.id);
        break;
    case TB_CMD_ATTR:
        tb_attr_set(n, c->u.attr.key, c->u.attr.value);
        break;
    case TB_CMD_JOIN_CONN:
        tb_view_join(n, c);
        break;
    case TB_CMD_RESUME:
        break;  /* the back-pressure check after the dispatch does the work */
    case TB_CMD_SHUTDOWN:
        tb_node_begin_shutdown(n);
        break;
    case TB_CMD_LEAVE:
        tb_node_leave(n);
        break;
    }
    tb_cmd_free(c);
}

static void drain_cmds(tb_node_t *n)
{
    uint64_t v;
    ssize_t r = read(n->evfd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&n->qmu);
    tb_cmd_t *c = n->qhead;
    n->qhead = n->qtail = NULL;
    atomic_store(&n->posted, 0);
    pthread_mutex_unlock(&n->qmu);
    while (c) {
        tb_cmd_t *next = c->next;
        on_cmd(n, c);
        c = next;
    }
}

/* Back-pressure (DESIGN.md, "Streams and filters"): stop reading children
 * while the way up is full, stop reading the parent while a way down is. */
static void pressure(tb_node_t *n)
{
    size_t up = n->parent ? n->parent->out_bytes : 0;
    int app_full = n->cbs.app_full ? n->cbs.app_full(n->cbs.arg) : 0;
    if (!n->up_paused && (up > TB_HWM || app_full))
        n->up_paused = 1;
    else if (n->up_paused && up < TB_LWM && !app_full)
        n->up_paused = 0;
    size_t down = 0;
    for (size_t i = 0; i < n->nchild; i++) {
        tb_child_t *ch = &n->child[i];
        if (!ch->conn)
            continue;
        if (ch->conn->out_bytes > down)
            down = ch->conn->out_bytes;
        size_t qb = tb_stream_child_bytes(n, i);
        if (!ch->blocked && qb > TB_HWM)
            ch->blocked = 1;
        else if (ch->blocked && qb < TB_LWM)
            ch->blocked = 0;
        int want = !n->up_paused && !ch->blocked;
        if (want != ch->conn->reading) {
            ch->conn->reading = want;
            watch(n, ch->conn, (want ? EPOLLIN : 0) | (ch->conn->q.len ? EPOLLOUT : 0));
        }
    }
    /* A back-end whose application does not take what arrives stops
     * reading too (its EDS would otherwise read everything into memory). */
    int be_full = n->role == TB_ROLE_BE && app_full;
    if (!n->down_paused && (down > TB_HWM || be_full))
        n->down_paused = 1;
    else if (n->down_paused && down < TB_LWM && !be_full)
        n->down_paused = 0;
    if (n->parent && n->parent->reading == n->down_paused) {
        n->parent->reading = !n->down_paused;
        watch(n, n->parent, (n->parent->reading ? EPOLLIN : 0) | (n->parent->q.len ? EPOLLOUT : 0));
    }
}

static void flush_conn(tb_node_t *n, tb_conn_t *c)
{
    if (c->closed)
        return;
    int rc = tb_conn_flush(c);
    if (rc >= 0)
        watch(n, c, (c->reading ? EPOLLIN : 0) | (rc == 0 ? EPOLLOUT : 0));
}

/* After a dispatch: write what was queued, retire closed connections,
 * publish the backlog for blocked senders. */
static void after_dispatch(tb_node_t *n)
{
    size_t queued = 0;
    tb_view_flush(n);
    if (n->parent) {
        if (n->parent->dirty)
            flush_conn(n, n->parent);
        if (n->parent->closed)
            parent_lost(n, n->parent->why);
        else
            queued += n->parent->out_bytes;
    }
    for (size_t i = 0; i < n->nchild; i++) {
        tb_conn_t *c = n->child[i].conn;
        if (!c)
            continue;
        if (c->dirty)
            flush_conn(n, c);
        if (c->closed) {
            char why[600];
            snprintf(why, sizeof why, "%s", c->why);
            tb_node_close_child(n, i, why);
        } else {
            queued += c->out_bytes;
        }
    }
    pressure(n);
    atomic_store(&n->queued, queued);
    if (atomic_load(&n->waiters) > 0) {
        pthread_mutex_lock(&n->qmu);
        pthread_cond_broadcast(&n->bcond);
        pthread_mutex_unlock(&n->qmu);
    }
    if (tb_node_life(n) == TB_LIFE_SHUTTING_DOWN) {
        int open = 0;
        for (size_t i = 0; i < n->nchild; i++)
            open += n->child[i].conn != NULL;
        if (!open)
            tb_node_enter(n, TB_LIFE_STOPPED);
    }
}

/* One turn of the loop: timers, writes, then wait (at most timeout_ms, -1 =
 * until a timer) and dispatch what came. */
static void turn(tb_node_t *n, int timeout_ms)
{
    struct epoll_event evs[64];
    int64_t now = tb_now_ms(), next = now + 3600 * 1000;
    if (tb_node_life(n) == TB_LIFE_STARTING && !n->failed && n->start_deadline) {
        if (now >= n->start_deadline)
            tb_node_startup_timer(n);
        else if (n->start_deadline < next)
            next = n->start_deadline;
    }
    if (tb_node_ending(n)) {
        if (now >= n->shutdown_deadline) {
            TB_WARN("shutdown", "children did not leave in time; going on");
            tb_node_enter(n, TB_LIFE_STOPPED);
            return;
        }
        if (n->shutdown_deadline < next)
            next = n->shutdown_deadline;
    }
    tb_stream_timers(n, now, &next);
    tb_view_timers(n, now);
    if (n->late_due && now >= n->late_due) {
        n->late_due = 0;
        bury_list(&n->dead_late);
    } else if (n->late_due && n->late_due < next) {
        next = n->late_due;
    }
    after_dispatch(n);
    if (tb_node_stopped(n))
        return;
    tb_view_next(n, &next);
    if (timeout_ms >= 0 && now + timeout_ms < next)
        next = now + timeout_ms;
    int wait = (int)(next - tb_now_ms());
    int k = epoll_wait(n->epfd, evs, 64, wait < 0 ? 0 : wait);
    if (k < 0 && errno != EINTR) {
        TB_ERROR("reactor", "epoll_wait: %s", strerror(errno));
        tb_node_enter(n, TB_LIFE_STOPPED);
        return;
    }
    for (int e = 0; e < k; e++) {
        if (evs[e].data.ptr == &n->evfd) {
            drain_cmds(n);
            continue;
        }
        if (evs[e].data.ptr == &n->nfd) {
            tb_view_on_notices(n);
            continue;
        }
        tb_conn_t *c = evs[e].data.ptr;
        /* A connection closed earlier in this batch is gone from epoll but
         * may still be in evs: only live ones are looked at. */
        if (c->index >= 0 ? n->child[c->index].conn != c : n->parent != c)
            continue;
        if (evs[e].events & EPOLLOUT)
            flush_conn(n, c);
        if (evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
            if (c->reading || (evs[e].events & (EPOLLHUP | EPOLLERR))) {
                tb_conn_read(c, READ_BUDGET);
                on_frames(n, c);
            }
        }
        if (c->closed) {
            if (c->index < 0)
                parent_lost(n, c->why);
            else {
                char why[600];
                snprintf(why, sizeof why, "%s", c->why);
                tb_node_close_child(n, (size_t)c->index, why);
            }
        }
    }
    after_dispatch(n);
    bury(n);
}

/* After the last turn: tell everyone waiting that the node is done. */
static void finish(tb_node_t *n)
{
    if (!tb_node_enter(n, TB_LIFE_FINISHED))
        return;
    after_dispatch(n);
    atomic_store(&n->closed, 1);
    pthread_mutex_lock(&n->qmu);
    pthread_cond_broadcast(&n->bcond);
    pthread_mutex_unlock(&n->qmu);
    if (n->cbs.status && n->role != TB_ROLE_FE)
        n->cbs.status(n->cbs.arg, TB_NODE_CLOSED, 0, "left the session");
}

int tb_node_run(tb_node_t *n)
{
    while (!tb_node_stopped(n))
        turn(n, -1);
    finish(n);
    return 0;
}

int tb_node_step(tb_node_t *n, int timeout_ms)
{
    if (!tb_node_stopped(n))
        turn(n, timeout_ms);
    if (tb_node_stopped(n))
        finish(n);
    return tb_node_stopped(n);
}

void tb_node_exec(tb_node_t *n, tb_cmd_t *cmd)
{
    if (tb_node_stopped(n)) {
        if (cmd->bytes)
            atomic_fetch_sub(&n->pending, cmd->bytes);
        tb_cmd_free(cmd);
        return;
    }
    on_cmd(n, cmd);
    after_dispatch(n);
    if (tb_node_stopped(n))
        finish(n);
}

void tb_node_kick(tb_node_t *n)
{
    if (n->cbs.kick)
        n->cbs.kick(n->cbs.arg);
}

void tb_node_post_kick(tb_node_t *n, tb_cmd_t *cmd)
{
    tb_node_post(n, cmd);
    tb_node_kick(n);
}

void tb_node_arm(tb_node_t *n, int on)
{
    if (n->cbs.kick && !tb_node_stopped(n))
        tb_eds_arm_node(n->eds, on);
}

int tb_node_has_posted(tb_node_t *n)
{
    return atomic_load(&n->posted);
}

size_t tb_node_backlog(const tb_node_t *n)
{
    return atomic_load(&n->pending) + atomic_load(&n->queued);
}

/* The moves of enum tb_life (node_int.h): allowed[from] has bit `to`. */
static const unsigned life_moves[] = {
    [TB_LIFE_STARTING] = 1u << TB_LIFE_RUNNING | 1u << TB_LIFE_SHUTTING_DOWN |
                         1u << TB_LIFE_STOPPED,
    [TB_LIFE_RUNNING] = 1u << TB_LIFE_SHUTTING_DOWN | 1u << TB_LIFE_STOPPED,
    [TB_LIFE_SHUTTING_DOWN] = 1u << TB_LIFE_STOPPED,
    [TB_LIFE_STOPPED] = 1u << TB_LIFE_FINISHED,
    [TB_LIFE_FINISHED] = 0,
};

int tb_node_enter(tb_node_t *n, enum tb_life to)
{
    enum tb_life from = tb_node_life(n);
    if (!(life_moves[from] & 1u << to))
        return 0;
    /* only the driver writes it (node_int.h): no other writer to race */
    atomic_store_explicit(&n->life, to, memory_order_release);
    return 1;
}

int tb_node_stopped(const tb_node_t *n)
{
    /* Any thread: pairs with the driver's store. */
    return tb_node_life(n) >= TB_LIFE_STOPPED;
}

int tb_node_link_child(tb_node_t *n, tbon_rank_t rank, int fd)
{
    tb_cmd_t *c = tb_cmd_conn(fd, rank);    /* closes fd if it fails */
    if (!c)
        return TBON_ENOMEM;
    tb_node_post(n, c);
    return 0;
}

int tb_node_watch_parent(tb_node_t *n, int fd)
{
    return tb_eds_watch_parent(n->eds, fd, n->parent_rank);
}

void tb_node_parent_gone(tb_node_t *n, tbon_rank_t rank)
{
    /* From the EDS thread, for a node nobody may be driving (a back-end whose
     * application is busy): its application hears of it now. */
    if (n->role == TB_ROLE_BE && rank == n->parent_rank && n->cbs.status)
        n->cbs.status(n->cbs.arg, TB_NODE_CLOSED, TBON_ECLOSED, "the parent is gone");
}

static void *node_thread(void *arg)
{
    tb_node_run(arg);
    return NULL;
}

int tb_node_start(tb_node_t *n)
{
    if (pthread_create(&n->thread, NULL, node_thread, n))
        return TBON_ENOMEM;
    n->threaded = 1;
    return 0;
}

tb_node_t *tb_node_new(const tb_node_config_t *cfg, const tb_node_cbs_t *cbs, tbon_error_t *err)
{
    tb_node_t *n = calloc(1, sizeof *n);
    if (!n) {
        tb_error_set(err, TBON_ENOMEM, "out of memory");
        tb_topology_destroy(cfg->topo);
        return NULL;
    }
    n->cfg = *cfg;
    if (cbs)
        n->cbs = *cbs;
    n->topo = cfg->topo;
    n->rank = cfg->rank;
    n->role = cfg->role;
    if (n->role == TB_ROLE_FE && !(n->fe = calloc(1, sizeof *n->fe))) {
        free(n);
        tb_topology_destroy(cfg->topo);
        tb_error_set(err, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    n->depth = tb_topology_depth(n->topo, n->rank);
    n->parent_rank = tb_topology_parent(n->topo, n->rank);
    n->epfd = n->evfd = n->lfd = n->nfd = -1;
    if (cfg->listening) {
        /* A commnode that joined the running tree: the FE has told every
         * node where it listens already (the socket is ours from here). */
        n->lfd = cfg->listen_fd;
        n->port = cfg->port;
    }
    pthread_mutex_init(&n->qmu, NULL);
    pthread_cond_init(&n->bcond, NULL);
    n->filters = tb_filter_reg_new();
    size_t nc;
    const tbon_rank_t *kids = tb_topology_children(n->topo, n->rank, &nc);
    n->child = calloc(nc ? nc : 1, sizeof *n->child);
    n->epfd = epoll_create1(EPOLL_CLOEXEC);
    n->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!n->filters || !n->child || n->epfd < 0 || n->evfd < 0) {
        tb_error_set(err, TBON_ENOMEM, "cannot set up the reactor: %s", strerror(errno));
        goto error;
    }
    n->nchild = n->nsorted = nc;
    n->capchild = nc ? nc : 1;
    for (size_t i = 0; i < nc; i++) {
        n->child[i].rank = kids[i];
        n->child[i].is_be = tb_topology_role(n->topo, kids[i]) == TB_ROLE_BE;
    }
    tb_view_init(n);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &n->evfd };
    epoll_ctl(n->epfd, EPOLL_CTL_ADD, n->evfd, &ev);
    if (cfg->parent_fd >= 0) {
        n->parent = tb_conn_new(cfg->parent_fd, tb_topology_parent(n->topo, n->rank), -1,
                                TB_FRAME_MAX_DEFAULT);
        if (!n->parent) {
            tb_error_set(err, TBON_ENOMEM, "out of memory");
            goto error;
        }
        watch(n, n->parent, EPOLLIN);
    }
    if (cfg->given_links) {
        /* node.h, "Given links": the caller makes the links and plays the
         * EDS's part; no port, no notices, no EDS thread. */
        if (cfg->parent_event_fd >= 0)
            close(cfg->parent_event_fd);
    } else {
        if (nc > 0 && !cfg->listening) {
            n->lfd = tb_sock_listen(&n->port, err);
            if (n->lfd < 0)
                goto error;
        }
        if (n->role == TB_ROLE_FE)
            tb_view_open_notices(n);
        n->eds = tb_eds_start(n, n->lfd, cfg->parent_event_fd, n->topo, n->rank, &cfg->session,
                              err);
        if (!n->eds)
            goto error;
        n->lfd = -1;   /* the EDS owns it now */
        if (n->cbs.kick && tb_eds_watch_node(n->eds, n->epfd)) {
            tb_error_set(err, TBON_ENOMEM, "cannot watch the back-end's node");
            goto error;
        }
    }
    n->total = tb_topology_size(n->topo);
    if (n->parent)
        tb_node_send_ctl(n, n->parent, TB_CTL_PORT,
                         tb_ctl_port_encode(&(tb_ctl_port_t){ n->rank, n->port }));
    else
        tb_topology_set_port(n->topo, n->rank, n->port);
    n->start_deadline = tb_now_ms() + (cfg->startup_timeout_ms > 0 ? cfg->startup_timeout_ms : 30000);
    if (n->role == TB_ROLE_BE)
        tb_node_enter(n, TB_LIFE_RUNNING);   /* a back-end is ready once connected */
    if (!cfg->given_links && tb_node_launch_children(n, err)) {
        if (!n->parent)
            goto error;
        /* Below the FE, a failure travels up to it by name; the children
         * already started are reaped when the FE ends the session. */
        tb_node_fail(n, err ? err->code : TBON_ELAUNCH, "%s", err ? err->msg : "launch failed");
    }
    if (n->role == TB_ROLE_FE)
        tb_node_write_attach(n);
    if (cfg->joined)
        tb_view_adopted(n);     /* no view yet: the parent sends what it has */
    tb_node_check_ready(n);
    return n;
error:
    tb_node_destroy(n);
    return NULL;
}

void tb_node_destroy(tb_node_t *n)
{
    if (!n)
        return;
    if (n->threaded)
        pthread_join(n->thread, NULL);
    else if (tb_node_life(n) != TB_LIFE_FINISHED && n->role == TB_ROLE_BE) {
        /* A back-end driven by its application leaves here. */
        tb_node_leave(n);
        finish(n);
    }
    if (n->parent)
        tb_conn_destroy(n->parent);
    n->parent = NULL;
    bury(n);
    bury_list(&n->dead_late);
    for (size_t i = 0; i < n->nchild; i++) {
        tb_conn_destroy(n->child[i].conn);
        n->child[i].conn = NULL;
    }
    tb_eds_stop(n->eds);
    tb_node_reap_all(n);
    /* the children are gone: so are the masters' sessions */
    tb_sshmux_free(n->sshmux, tb_now_ms() + 2000);
    tb_relay_free(n->relay);
    tb_eds_free(n->eds);
    tb_stream_free_all(n);
    tb_ft_free(n);
    tb_view_free(n);
    tb_attr_free(n);
    tb_filter_reg_destroy(n->filters);
    if (n->fe) {
        if (n->fe->attach_path && unlink(n->fe->attach_path) != 0 && errno != ENOENT)
            TB_WARN("attach", "cannot remove the attach file %s: %s", n->fe->attach_path,
                    strerror(errno));
        free(n->fe->attach_path);
        free(n->fe->slurm_pid);
        free(n->fe);
    }
    tb_topology_destroy(n->topo);
    free(n->topo_frame);
    if (n->lfd >= 0)
        close(n->lfd);
    if (n->epfd >= 0)
        close(n->epfd);
    if (n->evfd >= 0)
        close(n->evfd);
    tb_cmd_t *c = n->qhead;
    while (c) {
        tb_cmd_t *next = c->next;
        tb_cmd_free(c);
        c = next;
    }
    pthread_mutex_destroy(&n->qmu);
    pthread_cond_destroy(&n->bcond);
    free(n->child);
    free(n);
}
