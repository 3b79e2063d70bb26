/* node_link.c - the node's connections to its parent and children: sending
 * on them, watching them, retiring them, and the link layer that rides out
 * a broken connection (acknowledgements, relinks). A peer lost for good is
 * handed up through n->lost (node_peers.c): nothing here calls a stream, a
 * wave or the start-up. */
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
#include "net/link.h"
#include "net/sock.h"
#include "net/auth.h"
#include "util/array.h"

/* ---- sending ---- */

void tb_node_send_ctl(tb_node_t *n, tb_conn_t *c, int op, tbon_packet_t *p)
{
    if (c && p && !c->closed) {
        /* join and adopt messages are read before the peer's reactor has
         * the connection (codec/ctl.h): outside the link's sequence. */
        const tb_ctl_info_t *ci = tb_ctl_info(op);
        if (ci && (ci->owner == TB_CTL_OWN_JOIN || ci->owner == TB_CTL_OWN_ADOPT))
            tb_conn_send_packet_oob(c, TB_FRAME_CONTROL, op, n->rank, p);
        else
            tb_conn_send_packet(c, TB_FRAME_CONTROL, 0, op, n->rank, p);
    }
    tbon_packet_unref(p);
}

/* A packet over the session's maximum (a filter's output that grew past it;
 * the API refuses the application's own with TBON_ETOOBIG): dropped here
 * rather than sent to a peer that would take it for a broken link. */
void tb_node_too_big(uint32_t stream, tbon_packet_t *p, tbon_rank_t to)
{
    size_t len;
    tb_packet_payload(p, &len);
    TB_WARN_LIMITED("conn", "a packet of %zu bytes on stream %u is over the session's maximum "
                    "of %zu bytes (TBON_MAX_PACKET): not sent to rank %u", len, stream,
                    tb_conn_max_packet(), to);
}

TB_HOT void tb_node_to_child(tb_node_t *n, size_t i, uint32_t stream, tbon_packet_t *p, uint64_t q,
                      uint64_t done)
{
    tb_conn_t *c = n->child[i].conn;
    if (!c || c->closed)
        return;
    tbon_rank_t src = tbon_packet_source(p);
    if (tb_conn_send_request(c, stream, tbon_packet_tag(p), src == TBON_RANK_NONE ? n->rank : src,
                             q, done, p) == TBON_ETOOBIG)
        tb_node_too_big(stream, p, c->rank);
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

void tb_node_watch(tb_node_t *n, tb_conn_t *c, uint32_t events)
{
    if (c->fd < 0)
        return;     /* a link that is down: watched again once relinked */
    if (!c->io.fn) {
        c->io.fn = n->conn_io;
        c->io.arg = n;
    }
    /* The peer's end is seen even while back-pressure keeps us from reading
     * (EPOLLIN left out): a commnode that stopped reading its parent, whose
     * parent then went away, would otherwise wait for it forever (seen after
     * a tree starved under ThreadSanitizer: the socket in CLOSE_WAIT, the
     * commnode idle, for minutes). */
    tb_loop_watch(n->loop, &c->io, events | EPOLLRDHUP);
}

/* Take c out of the loop; it is freed after the current batch of events,
 * which may still name it (STYLE.md: never free a connection inside its own
 * dispatch). */
void tb_node_watch_conn(tb_node_t *n, tb_conn_t *c)
{
    tb_node_watch(n, c, EPOLLIN);
}

void tb_node_retire(tb_node_t *n, tb_conn_t *c)
{
    tb_cut_forget(c);
    tb_loop_forget(n->loop, &c->io);
    c->closed = 1;
    c->next_dead = n->dead;
    n->dead = c;
}

void tb_node_bury_list(tb_conn_t **list)
{
    while (*list) {
        tb_conn_t *c = *list;
        *list = c->next_dead;
        tb_conn_destroy(c);
    }
}

void tb_node_bury(tb_node_t *n)
{
    tb_node_bury_list(&n->dead);
}

/* A lost parent's connection is closed a little later: when a parent dies
 * all its children recover at once, on every core, and its close (the
 * socket's teardown, the buffers) is work that can wait for the burst to
 * pass (docs/protocol.md 8.3). */
#define TB_LATE_CLOSE_MS 50

void tb_node_retire_late(tb_node_t *n, tb_conn_t *c)
{
    tb_cut_forget(c);
    tb_loop_forget(n->loop, &c->io);
    c->closed = 1;
    c->next_dead = n->dead_late;
    n->dead_late = c;
    if (!n->late_due) {
        n->late_due = tb_now_ms() + TB_LATE_CLOSE_MS;
        tb_timer_at(n->loop, &n->late_timer, n->late_due);
    }
}

/* ---- the link layer (net/link.h; docs/protocol.md 2.4) ---- */

void tb_node_links_init(tb_node_t *n)
{
    const char *e = n->cfg.conf->relink_ms;
    n->relink_ms = e && *e ? atoi(e) : TB_LINK_RELINK_MS;
}

void tb_node_links_free(tb_node_t *n)
{
    if (n->relink_busy)
        pthread_join(n->relink_th, NULL);   /* within its deadline */
    n->relink_busy = 0;
}

/* Whether the peer of a broken socket may still be there, reachable again:
 * only in a running tree whose port table we have (a parent's port), and
 * not for a child that said it leaves or whose process is known gone. */
static int can_relink(tb_node_t *n, tb_conn_t *c)
{
    if (n->relink_ms <= 0 || n->cfg.given_links || tb_node_life(n) != TB_LIFE_RUNNING ||
        !n->ft->ready(n))
        return 0;
    if (c->index >= 0) {
        tb_child_t *ch = &n->child[c->index];
        return !ch->leaving && !ch->ev_lost && !ch->exited;
    }
    /* A parent the EDS has given up, or whose event connection has ended
     * too (its process is being torn down, and its listening socket may
     * still complete a connection), is not relinked to: the EDS adopts us. */
    return n->role != TB_ROLE_FE && tb_topology_port(n->topo, c->rank) != 0 &&
           !n->ft->parent_gone(n, c->rank);
}

/* The peer of c is lost, as without a link layer: the node hears of it
 * (n->lost, node_peers.c), which is what the link layer calls upward. */
static void lose(tb_node_t *n, tb_conn_t *c, const char *why_in)
{
    char why[600];
    snprintf(why, sizeof why, "%s", why_in);
    n->churn++;
    n->lost(n, c, why);
}

static void relink_failed(tb_node_t *n, tb_conn_t *c, const char *how)
{
    char why[600];
    snprintf(why, sizeof why, "the data connection broke and reconnecting failed: %s", how);
    lose(n, c, why);
}

struct relink_arg {
    tb_node_t   *n;
    char         host[256];
    uint16_t     port;
    tb_session_t session;
    uint8_t      role;
    tbon_rank_t  rank, parent;
    uint32_t     inc, gen;
    int64_t      deadline;
    int          fd;            /* a connect begun on this host, or -1 */
};

/* The relink thread: connect to the same parent again, handshake with
 * purpose RELINK, hand the socket (or why not) to the reactor. */
static void *relink_main(void *arg)
{
    pthread_setname_np(pthread_self(), "tbon-relink");
    struct relink_arg *a = arg;
    tbon_error_t err = { 0 };
    int fd = a->fd >= 0 ? tb_sock_connect_end(a->fd, a->host, a->port, a->deadline, &err)
             : tb_sock_connect(a->host, a->port, a->deadline, &err);
    if (fd >= 0) {
        tb_welcome_t w;
        if (tb_auth_client(fd, &a->session, a->role, TB_PURPOSE_RELINK, a->rank, a->inc,
                           a->deadline, &w, &err) != 0) {
            close(fd);
            fd = -1;
        }
    }
    /* Posted, not kicked: a kick could make this thread drive a back-end's
     * node (tb_net_kick), which joins this thread. The post wakes the
     * node's loop, which the kicker thread (api/kick.c) watches when nobody
     * drives it. */
    tb_node_post(a->n, tb_cmd_relink(fd, a->parent, 1, a->gen, fd < 0 ? err.msg : NULL));
    free(a);
    return NULL;
}

static void start_relink(tb_node_t *n, tb_conn_t *c)
{
    if (n->relink_busy)
        return;     /* its answer comes; a second socket would only race it */
    struct relink_arg *a = calloc(1, sizeof *a);
    if (!a) {
        lose(n, c, "cannot reconnect: out of memory");
        return;
    }
    a->n = n;
    /* The parent's address as an adoption finds it (docs/protocol.md 8.3). */
    int local = tb_topology_host_index(n->topo, c->rank) ==
                tb_topology_host_index(n->topo, n->rank);
    snprintf(a->host, sizeof a->host, "%s", local ? "127.0.0.1" : tb_topology_host(n->topo, c->rank));
    a->port = tb_topology_port(n->topo, c->rank);
    a->fd = -1;
    if (local) {
        /* A parent on this host that died refuses at once: then the
         * adoption starts now, without a thread (with 128 orphans on two
         * cores the threads are what a recovery waits for). */
        tbon_error_t err = { 0 };
        a->fd = tb_sock_connect_begin(a->host, a->port, NULL, &err);
        if (a->fd < 0 && errno == ECONNREFUSED) {
            free(a);
            relink_failed(n, c, err.msg);
            return;
        }
    }
    a->session = n->cfg.session;
    a->role = (uint8_t)n->role;
    a->rank = n->rank;
    a->parent = c->rank;
    a->inc = tb_topology_incarnation(n->topo, n->rank);
    a->gen = ++n->relink_gen;
    a->deadline = c->down_since + n->relink_ms;
    if (pthread_create(&n->relink_th, NULL, relink_main, a)) {
        if (a->fd >= 0)
            close(a->fd);
        free(a);
        lose(n, c, "cannot reconnect: no thread");
        return;
    }
    n->relink_busy = 1;
}

/* While our own link to the parent is being replaced, a child's loss waits
 * for the outcome: if the parent refuses us (we were fenced, say), what we
 * would report is stale, and the orphan's or leaver's path decides. */
int tb_node_parent_relinking(const tb_node_t *n)
{
    return n->parent && n->parent->down_since;
}

void tb_node_link_broke(tb_node_t *n, tb_conn_t *c)
{
    int64_t now = tb_now_ms();
    if (!can_relink(n, c)) {
        if (c->index < 0 || !tb_node_parent_relinking(n)) {
            lose(n, c, c->why);
            return;
        }
        n->child[c->index].ev_lost = 1;     /* closed once the parent's link is settled */
        n->child[c->index].released = n->ft->ready(n);
        tb_loop_forget(n->loop, &c->io);
        tb_link_down(c, now);
        return;
    }
    TB_INFO("link", "the data connection %s rank %u broke (%s): %s", c->index < 0 ? "to the parent"
            : "of child", c->rank, c->why, c->index < 0 ? "reconnecting" : "waiting for it");
    tb_loop_forget(n->loop, &c->io);
    tb_link_down(c, now);
    /* Until it is back, it is as a child lost while the tree ran: if we end
     * first, it may live on under another parent, not ours to kill. */
    if (c->index >= 0)
        n->child[c->index].released = 1;
    if (now - c->down_since >= n->relink_ms) {
        lose(n, c, "the data connection broke again and again");
        return;
    }
    if (c->index < 0)
        start_relink(n, c);
}

static void relink_attach(tb_node_t *n, tb_conn_t *c, int fd)
{
    if (!c->down) {
        tb_loop_forget(n->loop, &c->io);
        tb_link_down(c, tb_now_ms());
    }
    tb_link_up(c, fd, tb_now_ms());
    /* the RESEND goes with the next flush (after this dispatch) */
    tb_node_watch(n, c, c->reading ? EPOLLIN : 0);
}

void tb_node_on_relink(tb_node_t *n, tb_cmd_t *cmd)
{
    int fd = cmd->u.relink.fd;
    if (cmd->u.relink.up) {
        if (n->relink_busy) {
            pthread_join(n->relink_th, NULL);   /* it posted this as its last act */
            n->relink_busy = 0;
        }
        tb_conn_t *c = n->parent;
        if (cmd->u.relink.gen != n->relink_gen || !c || !c->down ||
            c->rank != cmd->u.relink.rank)
            return;     /* an answer nobody waits for: the command closes fd */
        if (fd < 0) {
            relink_failed(n, c, cmd->u.relink.why);
            return;
        }
        relink_attach(n, c, fd);
        cmd->u.relink.fd = -1;
        TB_INFO("link", "reconnected to the parent, rank %u", c->rank);
        return;
    }
    int i = tb_node_child_index(n, cmd->u.relink.rank);
    if (i < 0 || !n->child[i].conn || tb_node_ending(n) || n->child[i].ev_lost) {
        TB_WARN("link", "rank %u reconnected, but it is no longer a child here; closed",
                cmd->u.relink.rank);
        return;
    }
    relink_attach(n, n->child[i].conn, fd);
    n->child[i].released = 0;
    cmd->u.relink.fd = -1;
}

/* One connection's timed part; 0, or 1 if it lost its peer. */
TB_HOT static int link_tick(tb_node_t *n, tb_conn_t *c, int64_t now, int64_t *next, int64_t *lazy)
{
    if (c->down_since) {
        /* Down, or relinked and waiting for the peer's RESEND. That wait
         * counts only while we read: back-pressure (pressure() in node.c)
         * may keep the RESEND unread in the socket for longer than the
         * deadline, and the peer is not lost for that. */
        if (!c->down && !c->reading)
            c->down_since = now;
        int64_t dl = c->down_since + n->relink_ms;
        if (now >= dl || tb_node_ending(n)) {
            char why[200];
            snprintf(why, sizeof why, "the data connection broke and did not come back "
                     "within %d ms", n->relink_ms);
            lose(n, c, why);
            return 1;
        }
        if (dl < *next)
            *next = dl;
        if (c->down)
            return 0;
    }
    tb_link_tick(c, now, next, lazy);
    return 0;
}

static void set_link_timer(tb_node_t *n, tb_timer_t *t, int64_t due)
{
    if (due == INT64_MAX) {
        if (tb_timer_armed(t))
            tb_timer_cancel(n->loop, t);
    } else if (!tb_timer_armed(t) || t->due != due)
        tb_timer_at(n->loop, t, due);
}

/* Lower timer t to due (never later: what a partial pass does not see may
 * want the earlier time; if nothing does, the timer goes off early once and
 * the whole pass that follows sets it right). */
static void lower_link_timer(tb_node_t *n, tb_timer_t *t, int64_t due)
{
    if (due != INT64_MAX && (!tb_timer_armed(t) || due < t->due))
        tb_timer_at(n->loop, t, due);
}

/* A pass over the links after a dispatch. Whole (every link, its timers
 * set exactly) when a link timer went off, a link broke or was lost, the
 * parent's link began or ended a relink, or the node ends; otherwise only
 * the links whose timed state changed (c->timed, set by net/link.c and
 * net/conn.c). Every link on every pass was the largest part of a wave's
 * cost in a commnode: each of its dispatches (one per child's answer)
 * walked all its links (bench/RESULTS.md). */
TB_HOT void tb_node_links(tb_node_t *n)
{
    int steady = !tb_node_parent_relinking(n);
    int whole = n->links_whole || n->links_churn != n->churn || steady != n->links_steady ||
                tb_node_ending(n);
    int64_t now = 0, next = INT64_MAX, lazy = INT64_MAX;
    if (n->parent && (whole || n->parent->timed)) {
        now = tb_now_ms();
        n->parent->timed = 0;
        link_tick(n, n->parent, now, &next, &lazy);
        /* its relink may have begun or ended just now */
        if (!whole && steady != !tb_node_parent_relinking(n))
            whole = 1;
    }
    steady = !tb_node_parent_relinking(n);
    for (size_t i = 0; i < n->nchild; i++) {
        tb_conn_t *c = n->child[i].conn;
        if (!c || (!whole && !c->timed))
            continue;
        if (!now)
            now = tb_now_ms();
        c->timed = 0;
        if (steady && n->child[i].ev_lost && (c->down || c->hold))
            lose(n, c, "its process is gone");
        else
            link_tick(n, c, now, &next, &lazy);
    }
    if (whole) {
        n->links_whole = 0;
        n->links_churn = n->churn;
        n->links_steady = steady;
        set_link_timer(n, &n->link_timer, next);
        set_link_timer(n, &n->ack_timer, lazy);
    } else {
        lower_link_timer(n, &n->link_timer, next);
        lower_link_timer(n, &n->ack_timer, lazy);
    }
}
