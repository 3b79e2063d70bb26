/* eds.c - the event detection service thread (DESIGN.md, "Threads"; seed 003,
 * the EDS): owns the listening socket, authenticates every new connection,
 * keeps the event connections to parent and children, and watches the child
 * processes; it tells the reactor through commands, never touching its state. */
#include "node.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "sock.h"

/* How long a connecting peer has to finish the handshake. */
#define HANDSHAKE_MS 5000

enum { K_LISTEN, K_WAKE, K_PENDING, K_EVENT, K_PIDFD };

typedef struct watch {
    int kind;
    int fd;
    tbon_rank_t rank;
    pid_t pid;
    tb_auth_srv_t *auth;
    struct watch *next;        /* in the list of all watches */
    int dead;
} watch_t;

struct tb_eds {
    tb_node_t *node;
    tb_topology_t *topo;       /* a private copy: the EDS never shares it */
    tbon_rank_t rank;
    tb_role_t role;
    tb_session_t session;
    int epfd, wakefd;
    pthread_t thread;
    int running;
    pthread_mutex_t mu;
    watch_t *all;
    uint8_t *data_seen, *event_seen;   /* per rank of the topology */
    pid_t *reaped;
    size_t nreaped, capreaped;
    atomic_int stop;
};

static watch_t *add_watch(tb_eds_t *e, int kind, int fd, uint32_t events)
{
    watch_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->kind = kind;
    w->fd = fd;
    w->rank = TBON_RANK_NONE;
    struct epoll_event ev = { .events = events, .data.ptr = w };
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        free(w);
        return NULL;
    }
    pthread_mutex_lock(&e->mu);
    w->next = e->all;
    e->all = w;
    pthread_mutex_unlock(&e->mu);
    return w;
}

/* Close a watch's fd; the struct is freed with the EDS (it may still be in
 * this batch of events). */
static void drop_watch(tb_eds_t *e, watch_t *w)
{
    if (w->dead)
        return;
    epoll_ctl(e->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    close(w->fd);
    w->dead = 1;
    free(w->auth);
    w->auth = NULL;
}

static void post(tb_eds_t *e, int op, tbon_rank_t rank, int fd, int status)
{
    tb_cmd_t *c = tb_cmd_new(op);
    if (!c) {
        if (fd >= 0)
            close(fd);
        return;
    }
    c->rank = rank;
    c->fd = fd;
    c->status = status;
    tb_node_post(e->node, c);
}

/* An authentic peer: is it one we expect? */
static void admit(tb_eds_t *e, watch_t *w)
{
    const tb_handshake_t *hs = &w->auth->hs;
    tbon_error_t err;
    tbon_rank_t r = hs->rank;
    uint8_t purpose = hs->purpose;   /* hs dies with w->auth below */
    int ok = r < tb_topology_size(e->topo) && r != e->rank &&
             tb_topology_parent(e->topo, r) == e->rank &&
             hs->role == (uint8_t)tb_topology_role(e->topo, r);
    uint8_t *seen = hs->purpose == TB_PURPOSE_EVENT ? e->event_seen : e->data_seen;
    if (ok && hs->purpose != TB_PURPOSE_DATA && hs->purpose != TB_PURPOSE_EVENT &&
        hs->purpose != TB_PURPOSE_ATTACH)
        ok = 0;
    if (ok && seen[r])
        ok = 0;
    if (!ok) {
        TB_WARN("eds", "refused %s connection from rank %u (%s): not an expected peer",
                tb_purpose_name(hs->purpose), r, tb_role_name(hs->role));
        tb_auth_srv_welcome(w->auth, &e->session, TB_WELCOME_REFUSED, e->rank, 0, &err);
        drop_watch(e, w);
        return;
    }
    if (tb_auth_srv_welcome(w->auth, &e->session, TB_WELCOME_OK, e->rank, 0, &err)) {
        drop_watch(e, w);
        return;
    }
    seen[r] = 1;
    free(w->auth);
    w->auth = NULL;
    if (purpose == TB_PURPOSE_EVENT) {
        w->kind = K_EVENT;
        w->rank = r;
        return;
    }
    /* A data connection belongs to the reactor from here on. */
    epoll_ctl(e->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    w->dead = 1;
    post(e, TB_CMD_CONN, r, w->fd, 0);
}

static void on_listen(tb_eds_t *e, int lfd)
{
    for (;;) {
        int fd = tb_sock_accept(lfd);
        if (fd < 0)
            return;
        tb_auth_srv_t *a = malloc(sizeof *a);
        tbon_error_t err;
        if (!a || tb_auth_srv_start(a, fd, &e->session, tb_now_ms() + HANDSHAKE_MS, &err)) {
            free(a);
            close(fd);
            continue;
        }
        watch_t *w = add_watch(e, K_PENDING, fd, EPOLLIN);
        if (!w) {
            free(a);
            close(fd);
            continue;
        }
        w->auth = a;
    }
}

static void on_pending(tb_eds_t *e, watch_t *w)
{
    tbon_error_t err;
    int rc = tb_auth_srv_read(w->auth, &e->session, &err);
    if (rc == 0)
        return;
    if (rc < 0) {
        /* DESIGN.md, "Wire": a peer that fails the handshake is closed and
         * logged; nothing else happens. */
        TB_WARN("eds", "refused a connection: %s", err.msg);
        drop_watch(e, w);
        return;
    }
    admit(e, w);
}

static void on_event_conn(tb_eds_t *e, watch_t *w)
{
    char buf[4096];
    for (;;) {
        ssize_t n = recv(w->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0)
            continue;   /* heartbeats and reports: the fault-tolerance layer */
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        break;
    }
    TB_DEBUG("eds", "event connection of rank %u ended", w->rank);
    post(e, TB_CMD_PEER_LOST, w->rank, -1, 0);
    tb_node_parent_gone(e->node, w->rank);
    drop_watch(e, w);
}

static void on_pidfd(tb_eds_t *e, watch_t *w)
{
    int status = 0;
    pid_t r = waitpid(w->pid, &status, WNOHANG);
    if (r == 0)
        return;
    pthread_mutex_lock(&e->mu);
    if (e->nreaped == e->capreaped) {
        size_t nc = e->capreaped ? 2 * e->capreaped : 16;
        pid_t *np = realloc(e->reaped, nc * sizeof *np);
        if (np) {
            e->reaped = np;
            e->capreaped = nc;
        }
    }
    if (e->nreaped < e->capreaped && r == w->pid)
        e->reaped[e->nreaped++] = w->pid;
    pthread_mutex_unlock(&e->mu);
    post(e, TB_CMD_CHILD_EXIT, w->rank, -1, r == w->pid ? status : -1);
    drop_watch(e, w);
}

/* Pending handshakes past their deadline are dropped. Returns when the next
 * one is due, or -1 if none is pending (an idle EDS sleeps until woken). */
static int64_t expire(tb_eds_t *e)
{
    int64_t now = tb_now_ms(), next = -1;
    pthread_mutex_lock(&e->mu);
    for (watch_t *w = e->all; w; w = w->next) {
        if (w->dead || w->kind != K_PENDING)
            continue;
        if (w->auth->deadline_ms <= now) {
            pthread_mutex_unlock(&e->mu);
            TB_WARN("eds", "a connection did not finish its handshake in time; closed");
            drop_watch(e, w);
            pthread_mutex_lock(&e->mu);
        } else if (next < 0 || w->auth->deadline_ms < next) {
            next = w->auth->deadline_ms;
        }
    }
    pthread_mutex_unlock(&e->mu);
    return next;
}

static void *eds_thread(void *arg)
{
    tb_eds_t *e = arg;
    struct epoll_event evs[64];
    while (!atomic_load(&e->stop)) {
        int64_t next = expire(e), now = tb_now_ms();
        int wait = next < 0 ? -1 : next <= now ? 0 : (int)(next - now);
        int k = epoll_wait(e->epfd, evs, 64, wait);
        for (int i = 0; i < k; i++) {
            watch_t *w = evs[i].data.ptr;
            if (w->dead)
                continue;
            switch (w->kind) {
            case K_LISTEN: on_listen(e, w->fd); break;
            case K_WAKE: break;
            case K_PENDING: on_pending(e, w); break;
            case K_EVENT: on_event_conn(e, w); break;
            case K_PIDFD: on_pidfd(e, w); break;
            }
        }
    }
    return NULL;
}

tb_eds_t *tb_eds_start(tb_node_t *node, int listen_fd, int parent_event_fd,
                       const tb_topology_t *topo, tbon_rank_t rank,
                       const tb_session_t *s, tbon_error_t *err)
{
    tb_eds_t *e = calloc(1, sizeof *e);
    if (!e) {
        tb_error_set(err, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    e->node = node;
    e->rank = rank;
    e->session = *s;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&e->mu, NULL);
    e->topo = tb_topology_clone(topo);
    size_t n = tb_topology_size(topo);
    e->data_seen = calloc(n, 1);
    e->event_seen = calloc(n, 1);
    if (e->epfd < 0 || e->wakefd < 0 || !e->topo || !e->data_seen || !e->event_seen ||
        !add_watch(e, K_WAKE, e->wakefd, EPOLLIN) ||
        (listen_fd >= 0 && !add_watch(e, K_LISTEN, listen_fd, EPOLLIN))) {
        tb_error_set(err, TBON_ENOMEM, "cannot start the event detection service");
        if (listen_fd >= 0)
            close(listen_fd);
        if (parent_event_fd >= 0)
            close(parent_event_fd);
        goto error;
    }
    if (parent_event_fd >= 0) {
        tb_sock_nonblock(parent_event_fd, 1);
        watch_t *w = add_watch(e, K_EVENT, parent_event_fd, EPOLLIN);
        if (!w) {
            close(parent_event_fd);
            tb_error_set(err, TBON_ENOMEM, "cannot watch the parent");
            goto error;
        }
        w->rank = tb_topology_parent(topo, rank);
    }
    if (pthread_create(&e->thread, NULL, eds_thread, e)) {
        tb_error_set(err, TBON_ENOMEM, "cannot start the event detection thread");
        goto error;
    }
    e->running = 1;
    return e;
error:
    tb_eds_stop(e);
    tb_eds_free(e);
    return NULL;
}

int tb_eds_watch_parent(tb_eds_t *e, int fd, tbon_rank_t parent)
{
    tb_sock_nonblock(fd, 1);
    watch_t *w = add_watch(e, K_EVENT, fd, EPOLLIN);
    if (!w) {
        close(fd);
        return TBON_ENOMEM;
    }
    w->rank = parent;
    return 0;
}

int tb_eds_watch_child(tb_eds_t *e, tbon_rank_t rank, pid_t pid)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return TBON_EIO;
    watch_t *w = add_watch(e, K_PIDFD, fd, EPOLLIN);
    if (!w) {
        close(fd);
        return TBON_ENOMEM;
    }
    w->rank = rank;
    w->pid = pid;
    return 0;
}

int tb_eds_reaped(tb_eds_t *e, pid_t pid)
{
    int found = 0;
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < e->nreaped && !found; i++)
        found = e->reaped[i] == pid;
    pthread_mutex_unlock(&e->mu);
    return found;
}

void tb_eds_stop(tb_eds_t *e)
{
    if (!e)
        return;
    if (e->running) {
        atomic_store(&e->stop, 1);
        uint64_t one = 1;
        ssize_t r = write(e->wakefd, &one, sizeof one);
        (void)r;
        pthread_join(e->thread, NULL);
        e->running = 0;
    }
    for (watch_t *w = e->all; w; w = w->next)
        drop_watch(e, w);
}

void tb_eds_free(tb_eds_t *e)
{
    if (!e)
        return;
    watch_t *w = e->all;
    while (w) {
        watch_t *next = w->next;
        if (!w->dead && w->fd >= 0)
            close(w->fd);
        free(w->auth);
        free(w);
        w = next;
    }
    if (e->epfd >= 0)
        close(e->epfd);
    tb_topology_destroy(e->topo);
    free(e->data_seen);
    free(e->event_seen);
    free(e->reaped);
    pthread_mutex_destroy(&e->mu);
    free(e);
}
