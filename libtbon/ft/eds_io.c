/* eds_io.c - the EDS's watches and its one way to the reactor: a watch
 * added (its events go to the dispatch eds.c set in e->watch_io), a watch
 * dropped, a command posted to the node. The lowest file of the EDS: the
 * core (eds.c) and its parts (eds_adopt.c, eds_watch.c) call it, and it
 * calls none of them. */
#include "ft/eds.h"
#include "ft/eds_int.h"

#include <pthread.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/clock.h"

/* A new watch, complete before it is published: the reactor adds some
 * (tb_eds_watch_parent, tb_eds_watch_child), and from epoll_ctl on the EDS
 * thread may see it (an event) or walk it (e->all). */
watch_t *tb_eds_add_watch(tb_eds_t *e, int kind, int fd, uint32_t events, tbon_rank_t rank,
                          pid_t pid)
{
    watch_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->kind = kind;
    w->fd = fd;
    w->rank = rank;
    w->pid = pid;
    w->heard = tb_now_ms();
    w->io = (tb_io_t){ .fd = fd, .fn = e->watch_io, .arg = e };
    w->timer = (tb_timer_t){ .fn = e->handshake_timer, .arg = e };
    if (tb_loop_watch(e->loop, &w->io, events) < 0) {
        free(w);
        return NULL;
    }
    pthread_mutex_lock(&e->mu);
    w->next = e->all;
    e->all = w;
    pthread_mutex_unlock(&e->mu);
    if (kind == K_EVENT)        /* only a parent's is added as one */
        atomic_store(&e->parent_watch, (unsigned long long)(rank + 1ull) << 32 | (uint32_t)fd);
    return w;
}

/* Close a watch's fd; the struct is freed after this batch of events, which
 * may still name it (sweep). */
void tb_eds_drop_watch(tb_eds_t *e, watch_t *w)
{
    if (w->dead)
        return;
    tb_loop_forget(e->loop, &w->io);
    tb_timer_cancel(e->loop, &w->timer);
    /* The FE closing a child's event connection is alive: a child still
     * alive (stopped, say, and fenced) hears so, and will not take the end
     * for the session's (docs/protocol.md 8.2). Not at the FE's end. */
    if (w->kind == K_EVENT && e->role == TB_ROLE_FE && !atomic_load(&e->leaving) &&
        !atomic_load(&e->stop) && !atomic_load(&e->detaching)) {
        const char x = TB_EVENT_FENCED;
        (void)!send(w->fd, &x, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    if (w->kind == K_EVENT) {
        unsigned long long v = atomic_load(&e->parent_watch);
        if (v && (int)(uint32_t)v == w->fd)
            atomic_compare_exchange_strong(&e->parent_watch, &v, 0);
    }
    /* Closing a dead parent's connection sends a FIN the peer's kernel has
     * to answer: work that can wait until the adoption is done. */
    if (w->kind == K_EVENT && w->rank == e->parent && e->ngrave < 8)
        e->grave[e->ngrave++] = w->fd;
    else
        close(w->fd);
    w->dead = 1;
    free(w->auth);
    w->auth = NULL;
    free(w->ev_msg);
    w->ev_msg = NULL;
}

void tb_eds_post(tb_eds_t *e, tb_cmd_t *c)
{
    if (c)
        tb_node_post(e->node, c);
}

void tb_eds_post_child_end(tb_eds_t *e, tb_cmd_t *c)
{
    if (c && atomic_load(&e->leaving))
        tb_node_queue(e->node, c);
    else
        tb_eds_post(e, c);
}
