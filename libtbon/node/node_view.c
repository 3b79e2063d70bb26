/* node_view.c - the membership layer in the reactor (DESIGN.md, "Fault
 * tolerance" 5; docs/protocol.md 9).
 *
 * The FE is the membership root (seed 000 section 3.4). Every failure or
 * adoption that is news to it becomes part of the next *view version*,
 * which travels down the tree to every process, back-ends included; each
 * node acknowledges up the highest version its whole subtree has applied,
 * once its children have (seed 000: "higher nodes acknowledge ... once they
 * have received the acknowledgments from their children"). When the FE's
 * own version has come back from every child and no alive node is without a
 * parent, the view is stable: TBON_EV_VIEW_STABLE.
 *
 * Failures during a view change (seed 000 section 3.5) need no special
 * case: a dead child is simply no longer waited for, its failure is the
 * next version, and an adopted node is brought up to date by its adopter
 * from the recent versions it keeps (or, if it lags further, with a whole
 * view). A node alive in the FE's copy but left without a parent for too
 * long (its adoption never came) is declared failed, so no view waits for
 * ever.
 *
 * Three more things live here: the fast failure notice (seed 002 section 3,
 * "high priority monitoring"), a datagram from the detector straight to the
 * FE; the consistency check, which compares every node's copy with the
 * FE's; and joins and leaves (seed 000 section 3.7): a new back-end gets its
 * rank and parent from the FE, and the join is a view change like any other.
 */
#include "node/node_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "util/log.h"
#include "codec/packet_int.h"
#include "topo/reconfig.h"
#include "util/endian.h"
#include "util/hash.h"
#include "net/sock.h"

/* Versions kept for children that lag (an adopted one). */
#define TB_VIEW_HISTORY 256
/* While a version is in flight (not yet back from every child), new changes
 * wait at most this long to go together. */
#define TB_VIEW_BATCH_MS 5
/* While some alive node has no parent (a recovery is under way), changes
 * wait until the last orphan is adopted, at most this long: the view cannot
 * be stable before, and in a recovery burst every version sent wakes every
 * process of the tree, which slowed the adoptions themselves (seed 003's
 * recovery at fan-out 128: 17 ms without views, 28 ms with a version every
 * 5 ms, on this machine). */
#define TB_VIEW_HOLD_MS 50
/* An alive node without a parent for this long is taken for failed (ms):
 * one heartbeat timeout, at least a second; 10 s without heartbeats. A live
 * orphan learns of its parent's failure when the FE does (the connection's
 * end, or the same silence: beats go to parent and children together) and
 * is adopted within milliseconds; one that never asks is cut off with its
 * parent (a host that lost its network, the orphan on the same host), and
 * only this deadline finds it. It was twice the timeout, which found such an
 * orphan only three timeouts after the loss; half of it left a live orphan
 * whose own look came late on a starved machine too little slack (its
 * detection may trail the FE's by up to a quarter of the timeout, a beat's
 * period, plus the time its EDS thread waits for a CPU). */
#define TB_VIEW_ORPHAN_MIN_MS 1000
#define TB_VIEW_ORPHAN_NOHB_MS 10000

struct tb_vhist {
    uint64_t v;
    tbon_packet_t *p;
};

struct tb_orphan {
    tbon_rank_t r;
    int64_t since;      /* ms */
};

/* A back-end that asked the FE to join: it is told its rank and parent once
 * the parent has the view that adds it (it would be refused before). */
struct tb_pjoin {
    tbon_rank_t r, parent;
    int fd;
    uint64_t version;   /* the version that adds it (0: not yet made) */
    int64_t due;        /* given up then (ms) */
};

/* A joined back-end must connect to its parent within this (ms), or it is
 * taken for failed. */
#define TB_JOIN_CONNECT_MS 10000

void tb_view_init(tb_node_t *n)
{
    n->view = 1;        /* the tree as it started: the same copy everywhere */
    n->view_sub = 1;
    n->view_up[0] = n->view_up[1] = 1;
    for (size_t i = 0; i < n->nchild; i++) {
        n->child[i].v_known = 1;
        n->child[i].v_sent = n->child[i].v_acked = 1;
    }
    tb_ring_init(&n->vhist, sizeof(struct tb_vhist));
}

/* ---- acknowledgements ---- */

static int counted(const tb_child_t *ch)
{
    return ch->conn && !ch->conn->closed;
}

/* The highest version every process of our subtree has applied: ours, or
 * less while a child's subtree lags (0 while an adopted child has not said). */
static uint64_t subtree(const tb_node_t *n)
{
    uint64_t v = n->view;
    for (size_t i = 0; i < n->nchild; i++) {
        const tb_child_t *ch = &n->child[i];
        if (!counted(ch))
            continue;
        if (!ch->v_known)
            return 0;
        if (ch->v_acked < v)
            v = ch->v_acked;
    }
    return v;
}

static void emit_stable(tb_node_t *n)
{
    if (n->view_sub != n->view || n->view <= n->view_up[1] || n->norph || n->nvpend ||
        n->orph_dirty || n->shutting_down)
        return;
    n->view_up[1] = n->view;
    TB_DEBUG("view", "view %llu is stable", (unsigned long long)n->view);
    tb_node_emit(n, TBON_EV_VIEW_STABLE, 0, TBON_RANK_NONE, 0, n->view);
}

static void send_ack(tb_node_t *n, int want)
{
    n->view_up[0] = n->view;
    n->view_up[1] = n->view_sub;
    tb_node_send_ctl(n, n->parent, TB_CTL_VIEW_ACK,
                     tb_ctl_view_ack_encode(&(tb_ctl_view_ack_t){ n->view, n->view_sub, want }));
}

static void join_replies(tb_node_t *n);

/* Recompute our subtree's version; tell the parent if it moved (FE: is the
 * view stable now? may joiners be answered?). */
static void ack_up(tb_node_t *n)
{
    n->view_sub = subtree(n);
    if (n->role == TB_ROLE_FE) {
        emit_stable(n);
        join_replies(n);
        return;
    }
    if (n->parent && !n->parent->closed &&
        (n->view != n->view_up[0] || n->view_sub > n->view_up[1]))
        send_ack(n, 0);
}

/* ---- sending versions down ---- */

static tbon_packet_t *hist_find(const tb_node_t *n, uint64_t v)
{
    for (size_t i = n->vhist.len; i-- > 0;) {
        const struct tb_vhist *h = tb_ring_at(&n->vhist, i);
        if (h->v == v)
            return h->p;
        if (h->v < v)
            break;
    }
    return NULL;
}

static void hist_push(tb_node_t *n, uint64_t v, tbon_packet_t *p)
{
    if (n->vhist.len == TB_VIEW_HISTORY) {
        tbon_packet_unref(((struct tb_vhist *)tb_ring_at(&n->vhist, 0))->p);
        tb_ring_drop(&n->vhist);
    }
    struct tb_vhist *h = tb_ring_push(&n->vhist);
    if (h) {
        h->v = v;
        h->p = tbon_packet_ref(p);
    }
}

static tbon_packet_t *view_packet(uint64_t v, uint64_t prev, const tb_vchange_t *ch, size_t k)
{
    return tb_ctl_view_encode(&(tb_ctl_view_t){ v, prev, ch, k });
}

/* A whole view (prev 0) for a child that lags beyond our history: every
 * fact of our copy as a report. Applying reports is idempotent and order
 * does not matter (reconfig.h), so the child ends up with what we have. */
static tbon_packet_t *whole_view(const tb_node_t *n)
{
    size_t size = tb_topology_size(n->topo), k = 0;
    tb_vchange_t *ch = malloc(2 * (size ? size : 1) * sizeof *ch);    /* at most 2 per rank */
    if (!ch)
        return NULL;
    /* Every rank as a join first (the receiver adds those it does not have,
     * in rank order, under their parent now, or the FE's), then the facts. */
    for (tbon_rank_t r = 1; r < size; r++) {
        tbon_rank_t p = tb_topology_parent(n->topo, r);
        tb_vchange_t *c = &ch[k++];
        int cn = tb_topology_role(n->topo, r) == TB_ROLE_COMMNODE;
        /* The incarnation's generation brings back a rank restarted since. */
        uint32_t inc = tb_topology_incarnation(n->topo, r);
        *c = (tb_vchange_t){ cn ? TB_V_JOIN_CN : TB_V_JOIN, r, p == TBON_RANK_NONE ? 0 : p,
                             inc & ~((1u << TB_INC_GEN_SHIFT) - 1),
                             tb_topology_local_id(n->topo, r), "",
                             cn ? tb_topology_port(n->topo, r) : 0 };
        snprintf(c->host, sizeof c->host, "%s", tb_topology_host(n->topo, r));
    }
    for (tbon_rank_t r = 1; r < size; r++) {
        uint32_t inc = tb_topology_incarnation(n->topo, r);
        if (!tb_topology_alive(n->topo, r))
            ch[k++] = (tb_vchange_t){ TB_V_FAILED, r, TBON_RANK_NONE, inc, 0, "", 0 };
        else if (inc > 0 && tb_topology_parent(n->topo, r) != TBON_RANK_NONE)
            ch[k++] = (tb_vchange_t){ TB_V_ADOPTED, r, tb_topology_parent(n->topo, r), inc, 0, "",
                                      0 };
    }
    tbon_packet_t *p = view_packet(n->view, 0, ch, k);
    free(ch);
    return p;
}

/* Bring child i up to our version, from where it is. */
static void catch_up(tb_node_t *n, size_t i)
{
    tb_child_t *ch = &n->child[i];
    while (counted(ch) && ch->v_known && ch->v_sent < n->view) {
        tbon_packet_t *p = hist_find(n, ch->v_sent + 1);
        if (!p) {
            TB_INFO("view", "rank %u is at view %llu, beyond what we keep: it gets view %llu "
                    "whole", ch->rank, (unsigned long long)ch->v_sent,
                    (unsigned long long)n->view);
            tb_node_send_ctl(n, ch->conn, TB_CTL_VIEW, whole_view(n));
            ch->v_sent = n->view;
            break;
        }
        tb_node_send_ctl(n, ch->conn, TB_CTL_VIEW, tbon_packet_ref(p));
        ch->v_sent++;
    }
}

/* Version v (packet p) is ours now: keep it, pass it on. */
static void pass_down(tb_node_t *n, uint64_t v, tbon_packet_t *p)
{
    hist_push(n, v, p);
    for (size_t i = 0; i < n->nchild; i++)
        catch_up(n, i);
}

/* ---- the FE: making versions ---- */

static void note(tb_node_t *n, const tb_vchange_t *c);

void tb_view_note(tb_node_t *n, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    tb_vchange_t c = { kind, r, p, inc, 0, "", 0 };
    note(n, &c);
}

static void note(tb_node_t *n, const tb_vchange_t *c)
{
    if (n->role != TB_ROLE_FE)
        return;
    n->orph_dirty = 1;
    if (n->nvpend == n->capvpend) {
        size_t nc = n->capvpend ? 2 * n->capvpend : 16;
        tb_vchange_t *v = realloc(n->vpend, nc * sizeof *v);
        if (!v)
            return;
        n->vpend = v;
        n->capvpend = nc;
    }
    n->vpend[n->nvpend++] = *c;
    if (!n->vpend_since)
        n->vpend_since = tb_now_ms();
}

static void publish(tb_node_t *n)
{
    tbon_packet_t *p = view_packet(n->view + 1, n->view, n->vpend, n->nvpend);
    if (!p)
        return;         /* out of memory: tried again after the next turn */
    n->view++;
    TB_DEBUG("view", "view %llu: %zu changes", (unsigned long long)n->view, n->nvpend);
    if (n->cbs.view)
        n->cbs.view(n->cbs.arg, n->view, n->vpend, n->nvpend);
    n->nvpend = 0;
    n->vpend_since = 0;
    n->vheld = 0;
    pass_down(n, n->view, p);
    tbon_packet_unref(p);
    for (size_t i = 0; i < n->npjoin; i++)
        if (!n->pjoin[i].version)
            n->pjoin[i].version = n->view;
    join_replies(n);
}

/* The FE's alive nodes without a parent (orphans, and nodes whose claimed
 * adopter closes a cycle), in rank order, each with when it was first seen
 * so. */
static void count_orphans(tb_node_t *n, int64_t now)
{
    size_t size = tb_topology_size(n->topo), k = 0, j = 0, cap = 0;
    struct tb_orphan *v = NULL;
    for (tbon_rank_t r = 1; r < size; r++) {
        if (!tb_topology_alive(n->topo, r) || tb_topology_parent(n->topo, r) != TBON_RANK_NONE)
            continue;
        while (j < n->norph && n->orph[j].r < r)
            j++;
        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            struct tb_orphan *nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                free(v);
                return;             /* still dirty: counted again next turn */
            }
            v = nv;
        }
        v[k++] = (struct tb_orphan){ r, j < n->norph && n->orph[j].r == r ? n->orph[j].since : now };
    }
    free(n->orph);
    n->orph = v;
    n->norph = k;
    n->orph_dirty = 0;
}

void tb_view_flush(tb_node_t *n)
{
    if (n->role != TB_ROLE_FE)
        return;
    /* Stability depends on the orphans and on what is pending: look again
     * only when those changed (acknowledgements call ack_up themselves). */
    int changed = n->orph_dirty;
    if (n->orph_dirty)
        count_orphans(n, tb_now_ms());
    /* At once when nothing is in flight and every node has a parent, or
     * when the last orphan has just been adopted; else batched. */
    if (n->nvpend) {
        int now = !n->norph && (n->view_sub == n->view || n->vheld);
        if (now || tb_now_ms() - n->vpend_since >= (n->norph ? TB_VIEW_HOLD_MS : TB_VIEW_BATCH_MS)) {
            publish(n);
            changed = 1;
        } else if (n->norph) {
            n->vheld = 1;
        }
    }
    if (changed)
        ack_up(n);
}

static int64_t orphan_ms(const tb_node_t *n)
{
    int hb = n->cfg.heartbeat_ms;
    if (hb <= 0)
        return TB_VIEW_ORPHAN_NOHB_MS;
    return hb > TB_VIEW_ORPHAN_MIN_MS ? hb : TB_VIEW_ORPHAN_MIN_MS;
}

static void join_timeouts(tb_node_t *n, int64_t now);

void tb_view_timers(tb_node_t *n, int64_t now)
{
    join_timeouts(n, now);
    if (n->role != TB_ROLE_FE || !n->ft_ready || n->shutting_down)
        return;
    if (n->npjoin)
        join_replies(n);
    int64_t limit = orphan_ms(n);
    for (size_t j = 0; j < n->norph; j++) {
        struct tb_orphan o = n->orph[j];
        if (now - o.since < limit)
            continue;
        /* Seed 000 section 3.5: a node that does not acknowledge is taken
         * for failed. Its adoption never came: fenced like a silent node. */
        TB_WARN("view", "rank %u has had no parent for %lld ms: taken for failed", o.r,
                (long long)(now - o.since));
        tb_ft_failed(n, o.r, tb_topology_incarnation(n->topo, o.r), "never adopted");
    }
}

void tb_view_next(const tb_node_t *n, int64_t *next)
{
    /* A joined child's slot: a new one, or a restarted child's old one. */
    for (size_t i = 0; n->njoining && i < n->nchild; i++)
        if (n->child[i].join_due && n->child[i].join_due < *next)
            *next = n->child[i].join_due;
    for (size_t i = 0; i < n->npjoin; i++)
        if (n->pjoin[i].due < *next)
            *next = n->pjoin[i].due;
    if (n->role != TB_ROLE_FE || !n->ft_ready || n->shutting_down)
        return;
    if (n->vpend_since) {
        int64_t due = n->vpend_since + (n->norph ? TB_VIEW_HOLD_MS : TB_VIEW_BATCH_MS);
        if (due < *next)
            *next = due;
    }
    int64_t limit = orphan_ms(n);
    for (size_t j = 0; j < n->norph; j++)
        if (n->orph[j].since + limit < *next)
            *next = n->orph[j].since + limit;
}

/* ---- versions arriving (every node but the FE) ---- */

static int add_joined(tb_node_t *n, const tb_vchange_t *c);

static void on_view(tb_node_t *n, const tb_ctl_view_t *m, tbon_packet_t *p)
{
    /* The decoder checked the shape (kinds, ports, hosts, prev < v); the
     * ranks need the topology. */
    uint64_t v = m->version, prev = m->prev;
    if (v <= n->view)
        return;                         /* had it (sent again after an adoption) */
    if (prev > n->view) {
        /* A gap: ask for everything after what we have. */
        TB_INFO("view", "view %llu follows %llu but we have %llu: asking again",
                (unsigned long long)v, (unsigned long long)prev, (unsigned long long)n->view);
        send_ack(n, 1);
        return;
    }
    tb_vchange_t *ch = malloc((m->n ? m->n : 1) * sizeof *ch);
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        const tb_vchange_t *c = &m->ch[i];
        if (c->kind == TB_V_JOIN || c->kind == TB_V_JOIN_CN) {
            /* Joins come in rank order; the ones we have are skipped. */
            if (add_joined(n, c) < 0)
                TB_WARN("view", "view %llu: the join of rank %u cannot be applied",
                        (unsigned long long)v, c->rank);
        } else if (c->rank >= tb_topology_size(n->topo) || c->rank == 0 ||
                   (c->kind == TB_V_ADOPTED && c->parent >= tb_topology_size(n->topo))) {
            TB_WARN("view", "view %llu: a malformed change ignored", (unsigned long long)v);
            continue;
        } else if (c->kind != TB_V_JOINED) {
            tb_ft_apply(n, c->kind, c->rank, c->parent, c->inc);
        }
        if (ch)
            ch[k++] = *c;
    }
    n->view = v;
    if (ch)
        tb_ft_confirm(n, ch, k);
    if (n->cbs.view && ch)
        n->cbs.view(n->cbs.arg, v, ch, k);
    free(ch);
    pass_down(n, v, p);
    ack_up(n);
}

static void on_ack(tb_node_t *n, size_t i, const tb_ctl_view_ack_t *m)
{
    tb_child_t *ch = &n->child[i];
    ch->v_acked = m->sub;
    if (!ch->v_known || m->want) {
        ch->v_known = 1;
        ch->v_sent = m->applied;
        catch_up(n, i);
    }
    ack_up(n);
}

void tb_view_child_gone(tb_node_t *n, size_t i)
{
    tb_child_t *ch = &n->child[i];
    if (ch->chk && ch->chk == n->chk_id) {
        ch->chk = 0;
        tb_view_check_progress(n);
    }
    ack_up(n);
}

void tb_view_adopted(tb_node_t *n)
{
    if (n->cfg.joined && n->view == 1 && !n->ft_ready) {
        /* A back-end that joined the running tree has the topology of its
         * parent but no view version yet: version 0 asks for a whole one. */
        n->view = 0;
    }
    /* The new parent does not know where we are: say it, and ask. */
    n->view_sub = subtree(n);
    send_ack(n, 1);
}

/* ---- failure notices (docs/protocol.md 9.3) ---- */

#define NOTICE_MAGIC 0x464E4254u     /* "TBNF" */
#define NOTICE_SIZE  (40 + crypto_auth_hmacsha256_BYTES)

int tb_view_open_notices(tb_node_t *n)
{
    /* Where the FE's TCP port is: IPv6 and IPv4 on one socket where the host
     * has IPv6 (as tb_sock_listen), else IPv4. */
    int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = -1;
    if (fd >= 0) {
        int zero = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(n->port),
                                   .sin6_addr = IN6ADDR_ANY_INIT };
        rc = bind(fd, (struct sockaddr *)&a6, sizeof a6);
        if (rc < 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(n->port),
                                 .sin_addr.s_addr = htonl(INADDR_ANY) };
        rc = fd >= 0 ? bind(fd, (struct sockaddr *)&a, sizeof a) : -1;
    }
    if (rc < 0) {
        TB_WARN("view", "no socket for failure notices on UDP port %u (%s): the FE hears of "
                "failures through the tree only", (unsigned)n->port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &n->nfd };
    if (epoll_ctl(n->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        return -1;
    }
    n->nfd = fd;
    return 0;
}

void tb_view_notice_setup(tb_node_t *n)
{
    uint16_t port = tb_topology_port(n->topo, 0);
    if (n->role == TB_ROLE_FE || n->fe_addr_ok || !port)
        return;
    /* The FE on our own topology host is reached over the loopback, as
     * children reach parents (docs/protocol.md 7.1); elsewhere at what its
     * topology host name resolves to here, IPv4 or IPv6. */
    if (tb_topology_host_index(n->topo, 0) == tb_topology_host_index(n->topo, n->rank)) {
        struct sockaddr_in *a = (struct sockaddr_in *)&n->fe_addr;
        memset(a, 0, sizeof *a);
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        n->fe_addr_len = sizeof *a;
    } else {
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM }, *res = NULL;
        char ps[8];
        snprintf(ps, sizeof ps, "%u", (unsigned)port);
        if (getaddrinfo(tb_topology_host(n->topo, 0), ps, &hints, &res) != 0 || !res ||
            res->ai_addrlen > sizeof n->fe_addr) {
            TB_WARN("view", "cannot resolve the FE's host %s: no failure notices from here",
                    tb_topology_host(n->topo, 0));
            if (res)
                freeaddrinfo(res);
            return;
        }
        memcpy(&n->fe_addr, res->ai_addr, res->ai_addrlen);
        n->fe_addr_len = res->ai_addrlen;
        freeaddrinfo(res);
    }
    n->nfd = socket(n->fe_addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (n->nfd < 0)
        return;
    n->fe_addr_ok = 1;
}

void tb_view_notice(tb_node_t *n, tbon_rank_t r, uint32_t inc)
{
    if (n->role == TB_ROLE_FE || !n->fe_addr_ok || n->shutting_down)
        return;
    uint8_t b[NOTICE_SIZE] = { 0 };
    tb_put32(b, NOTICE_MAGIC);
    b[4] = 1;                           /* version */
    tb_put64(b + 8, n->cfg.session.id);
    tb_put32(b + 16, n->rank);
    tb_put32(b + 20, r);
    tb_put32(b + 24, inc);
    tb_put32(b + 28, tb_topology_incarnation(n->topo, n->rank));   /* the detector's */
    uint64_t nonce = 0;
    if (tb_crypto_init(NULL) == 0)      /* done by the handshakes already */
        randombytes_buf(&nonce, sizeof nonce);
    tb_put64(b + 32, nonce);
    crypto_auth_hmacsha256(b + 40, b, 40, n->cfg.session.secret);
    if (sendto(n->nfd, b, sizeof b, MSG_DONTWAIT, (struct sockaddr *)&n->fe_addr,
               n->fe_addr_len) < 0)
        TB_DEBUG("view", "failure notice not sent: %s", strerror(errno));
}

void tb_view_on_notices(tb_node_t *n)
{
    uint8_t b[NOTICE_SIZE + 1], mac[crypto_auth_hmacsha256_BYTES];
    for (int budget = 0; budget < 256; budget++) {
        ssize_t len = recv(n->nfd, b, sizeof b, MSG_DONTWAIT);
        if (len < 0)
            return;
        /* Anything not a notice of this session, signed with its secret, is
         * dropped without a word: the port is open to anyone. */
        if (len != NOTICE_SIZE || tb_get32(b) != NOTICE_MAGIC || b[4] != 1 ||
            tb_get64(b + 8) != n->cfg.session.id)
            continue;
        crypto_auth_hmacsha256(mac, b, 40, n->cfg.session.secret);
        if (sodium_memcmp(mac, b + 40, sizeof mac) != 0)
            continue;
        tbon_rank_t from = tb_get32(b + 16), r = tb_get32(b + 20);
        uint32_t inc = tb_get32(b + 24);
        if (r == 0 || r >= tb_topology_size(n->topo) || !n->ft_ready || n->shutting_down)
            continue;
        /* A detector we have fenced is not believed: woken up, it sees its
         * children gone (adopted elsewhere) and would call them dead. */
        if (from >= tb_topology_size(n->topo) || !tb_topology_alive(n->topo, from))
            continue;
        /* Nor is the old process of a rank restarted since (it wakes up to
         * the same). */
        if (tb_inc_gen(tb_get32(b + 28)) < tb_inc_gen(tb_topology_incarnation(n->topo, from)))
            continue;
        /* A replay is harmless: a failure is final, and an old incarnation's
         * says nothing new. */
        char how[64];
        snprintf(how, sizeof how, "notice from rank %u", from);
        tb_ft_failed(n, r, inc, how);
    }
}

/* ---- the consistency check ---- */

uint64_t tb_view_digest(const tb_topology_t *t)
{
    uint64_t h = TB_FNV1A_INIT;
    size_t size = tb_topology_size(t);
    h = tb_fnv1a(h, &size, sizeof size);
    for (tbon_rank_t r = 0; r < size; r++) {
        uint32_t f[5] = { r, 0, 0, 0, 0 };
        if (tb_topology_alive(t, r)) {
            f[1] = 1;
            f[2] = tb_topology_parent(t, r);
            f[3] = tb_topology_incarnation(t, r);
            f[4] = (uint32_t)tb_topology_role(t, r) | tb_topology_local_id(t, r) << 2;
            const char *host = tb_topology_host(t, r);
            h = tb_fnv1a(h, host, strlen(host) + 1);
        }
        h = tb_fnv1a(h, f, sizeof f);
    }
    return h;
}

static void chk_add(tb_node_t *n, tbon_rank_t r, int ok)
{
    if (n->nchk == n->capchk) {
        size_t nc = n->capchk ? 2 * n->capchk : 64;
        tbon_rank_t *v = realloc(n->chk_rank, nc * sizeof *v);
        if (v)
            n->chk_rank = v;
        uint8_t *o = realloc(n->chk_ok, nc);
        if (o)
            n->chk_ok = o;
        if (!v || !o)
            return;
        n->capchk = nc;
    }
    n->chk_rank[n->nchk] = r;
    n->chk_ok[n->nchk++] = (uint8_t)ok;
}

/* Our answer is complete when no child owes one. */
void tb_view_check_progress(tb_node_t *n)
{
    if (!n->chk_id)
        return;
    for (size_t i = 0; i < n->nchild; i++)
        if (n->child[i].chk == n->chk_id && counted(&n->child[i]))
            return;
    size_t na = 0, nb = 0;
    for (size_t i = 0; i < n->nchk; i++)
        na += n->chk_ok[i];
    nb = n->nchk - na;
    tbon_rank_t *a = malloc((na ? na : 1) * sizeof *a), *b = malloc((nb ? nb : 1) * sizeof *b);
    if (a && b) {
        na = nb = 0;
        for (size_t i = 0; i < n->nchk; i++) {
            if (n->chk_ok[i])
                a[na++] = n->chk_rank[i];
            else
                b[nb++] = n->chk_rank[i];
        }
        if (n->role == TB_ROLE_FE) {
            if (n->cbs.checked)
                n->cbs.checked(n->cbs.arg, n->chk_id, a, na, b, nb);
        } else {
            tb_node_send_ctl(n, n->parent, TB_CTL_CHECKED,
                             tb_ctl_checked_encode(&(tb_ctl_checked_t){ n->chk_id, a, b, na,
                                                                        nb }));
        }
    }
    free(a);
    free(b);
    n->chk_id = 0;
    n->nchk = 0;
}

static void check_start(tb_node_t *n, uint64_t id, uint64_t version, uint64_t digest)
{
    n->chk_id = id;
    n->nchk = 0;
    chk_add(n, n->rank, n->view == version && tb_view_digest(n->topo) == digest);
    tbon_packet_t *p = tb_ctl_check_encode(&(tb_ctl_check_t){ id, version, digest });
    for (size_t i = 0; p && i < n->nchild; i++) {
        tb_child_t *ch = &n->child[i];
        ch->chk = 0;
        if (!counted(ch))
            continue;
        ch->chk = id;
        tb_node_send_ctl(n, ch->conn, TB_CTL_CHECK, tbon_packet_ref(p));
    }
    tbon_packet_unref(p);
    tb_view_check_progress(n);
}

void tb_view_check(tb_node_t *n, uint64_t id)
{
    check_start(n, id, n->view, tb_view_digest(n->topo));
}

static void on_checked(tb_node_t *n, size_t i, const tb_ctl_checked_t *m)
{
    if (m->id == n->chk_id && n->child[i].chk == m->id) {
        for (size_t j = 0; j < m->nagree; j++)
            chk_add(n, m->agree[j], 1);
        for (size_t j = 0; j < m->nbad; j++)
            chk_add(n, m->bad[j], 0);
        n->child[i].chk = 0;
        tb_view_check_progress(n);
    }
}

/* ---- dispatch ---- */

void tb_view_ctl(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    switch (m->op) {
    case TB_CTL_VIEW:
        on_view(n, &m->u.view, p);
        break;
    case TB_CTL_VIEW_ACK:
        on_ack(n, (size_t)child, &m->u.view_ack);
        break;
    case TB_CTL_CHECK:
        /* A newer check replaces an older one. */
        check_start(n, m->u.check.id, m->u.check.version, m->u.check.digest);
        break;
    case TB_CTL_CHECKED:
        on_checked(n, (size_t)child, &m->u.checked);
        break;
    default:
        break;
    }
}

/* ---- joins and leaves (seed 000 section 3.7; docs/protocol.md 9.6) ---- */

/* Apply join c (a new node, or a restarted one) to our copies, and take it
 * as a child slot if its parent is us. 1 if applied, 0 if we have it, -1 if
 * it cannot be (not the next rank, out of memory). */
static int add_joined(tb_node_t *n, const tb_vchange_t *c)
{
    tb_role_t role = c->kind == TB_V_JOIN_CN ? TB_ROLE_COMMNODE : TB_ROLE_BE;
    int old = c->rank < tb_topology_size(n->topo) ? tb_node_child_index(n, c->rank) : -1;
    if (old >= 0 && n->child[old].conn &&
        tb_inc_gen(c->inc) > tb_inc_gen(tb_topology_incarnation(n->topo, c->rank)))
        tb_node_drop_child(n, (size_t)old);     /* still connected to its old process */
    int rc = tb_report_join(n->topo, role, c->rank, c->parent, c->host, c->lid, c->inc);
    if (rc <= 0)
        return rc < 0 ? -1 : 0;
    tbon_rank_t r = c->rank, p = tb_topology_parent(n->topo, r);
    if (c->port)
        tb_topology_set_port(n->topo, r, (uint16_t)c->port);
    free(n->topo_frame);
    n->topo_frame = NULL;
    tb_eds_join(n->eds, c);
    if (p == n->rank) {
        /* A restarted child takes its old slot again. */
        int i = tb_node_child_index(n, r);
        if (i < 0)
            i = tb_node_add_child(n, r, role == TB_ROLE_BE);
        if (i >= 0) {
            tb_child_t *ch = &n->child[i];
            ch->state = CH_LAUNCHED;
            ch->joined = 1;
            ch->leaving = 0;
            ch->v_known = 0;
            ch->v_sent = ch->v_acked = 0;
            n->njoining += !ch->join_due;
            ch->join_due = tb_now_ms() + TB_JOIN_CONNECT_MS;
        }
    }
    return 1;
}

/* The host a joining back-end is known by: its address as we see it, or,
 * on the loopback, the FE's own topology host. */
static void peer_host(tb_node_t *n, int fd, char *out, size_t cap)
{
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    if (getpeername(fd, (struct sockaddr *)&a, &len) == 0 &&
        tb_sock_addr_string((struct sockaddr *)&a, out, cap) == 0 && strncmp(out, "127.", 4) != 0 &&
        strcmp(out, "::1") != 0)
        return;
    snprintf(out, cap, "%s", tb_topology_host(n->topo, 0));
}

/* Why the FE does not take rank r back as a restarted process of role, or
 * NULL if it does. */
static const char *no_restart(const tb_node_t *n, tbon_rank_t r, tb_role_t role)
{
    if (r == 0 || r >= tb_topology_size(n->topo))
        return "no such rank";
    if (tb_topology_role(n->topo, r) != role)
        return "it had another role";
    if (tb_topology_alive(n->topo, r))
        return "it is alive (not known to have failed yet)";
    if (tb_inc_gen(tb_topology_incarnation(n->topo, r)) + 1 >=
        1u << (32 - TB_INC_GEN_SHIFT))
        return "restarted too often";
    for (size_t i = 0; i < n->npjoin; i++)
        if (n->pjoin[i].r == r)
            return "it is coming back already";
    return NULL;
}

void tb_view_join(tb_node_t *n, tb_cmd_t *c)
{
    tbon_rank_t back = c->u.join_conn.rank;     /* a restarted one, or TBON_RANK_NONE */
    tb_role_t role = c->u.join_conn.role == TB_ROLE_COMMNODE ? TB_ROLE_COMMNODE : TB_ROLE_BE;
    const char *why = !n->ft_ready ? "the tree is not up yet"
                      : n->shutting_down ? "shutting down"
                      : back != TBON_RANK_NONE ? no_restart(n, back, role) : NULL;
    if (why) {
        if (back != TBON_RANK_NONE)
            TB_INFO("join", "refused to take rank %u back: %s", back, why);
        else
            TB_INFO("join", "refused a %s: %s", tb_role_name(role), why);
        return;                                 /* the fd closes with the command */
    }
    struct tb_pjoin *pj = realloc(n->pjoin, (n->npjoin + 1) * sizeof *pj);
    if (!pj)
        return;
    n->pjoin = pj;
    tb_vchange_t ch = { role == TB_ROLE_BE ? TB_V_JOIN : TB_V_JOIN_CN,
                        (tbon_rank_t)tb_topology_size(n->topo), tb_join_parent(n->topo, role),
                        0, 0, "", role == TB_ROLE_BE ? 0 : c->u.join_conn.port };
    if (back != TBON_RANK_NONE) {
        /* A restarted process keeps its rank and name; its next generation
         * makes whatever its old one still says stale (reconfig.h). */
        ch.rank = back;
        ch.inc = tb_inc_next_gen(tb_topology_incarnation(n->topo, back));
        ch.lid = tb_topology_local_id(n->topo, back);
        snprintf(ch.host, sizeof ch.host, "%s", tb_topology_host(n->topo, back));
    } else {
        peer_host(n, c->u.join_conn.fd, ch.host, sizeof ch.host);
        ch.lid = ch.rank;
        while (tb_topology_find(n->topo, ch.host, ch.lid) != TBON_RANK_NONE)
            ch.lid++;
    }
    if (add_joined(n, &ch) != 1) {
        TB_WARN("join", "cannot add rank %u to the topology", ch.rank);
        return;
    }
    note(n, &ch);
    n->pjoin[n->npjoin++] = (struct tb_pjoin){ ch.rank, ch.parent, c->u.join_conn.fd, 0,
                                               tb_now_ms() + TB_JOIN_CONNECT_MS };
    c->u.join_conn.fd = -1;
    for (size_t i = 0; i < n->nannounced; i++)     /* its next JOINED is news */
        if (n->announced[i] == ch.rank)
            n->announced[i] = n->announced[--n->nannounced];
    TB_INFO("join", "rank %u (%s) %s under %u (%s)", ch.rank, tb_role_name(role),
            ch.inc ? "comes back" : "joins", ch.parent, ch.host);
}

/* Has parent p applied version v? Its subtree's ancestor among our children
 * says so (every process below it has). */
static int applied_at(const tb_node_t *n, tbon_rank_t p, uint64_t v)
{
    if (p == 0)
        return n->view >= v;
    tbon_rank_t c = p;
    while (c != TBON_RANK_NONE && tb_topology_parent(n->topo, c) != 0)
        c = tb_topology_parent(n->topo, c);
    int i = c == TBON_RANK_NONE ? -1 : tb_node_child_index(n, c);
    return i >= 0 && counted(&n->child[i]) && n->child[i].v_known && n->child[i].v_acked >= v;
}

static void join_replies(tb_node_t *n)
{
    int64_t now = tb_now_ms();
    for (size_t i = 0; i < n->npjoin;) {
        struct tb_pjoin *j = &n->pjoin[i];
        int ready = j->version && applied_at(n, j->parent, j->version);
        if (!ready && now < j->due) {
            i++;
            continue;
        }
        if (ready) {
            tb_ctl_join_ack_t a = { j->r, j->parent, tb_topology_host(n->topo, j->parent),
                                    tb_topology_port(n->topo, j->parent),
                                    tb_topology_incarnation(n->topo, j->r) };
            tbon_packet_t *p = tb_ctl_join_ack_encode(&a);
            size_t len = 0;
            const uint8_t *pl = p ? tb_packet_payload(p, &len) : NULL;
            tb_frame_hdr_t h = { .type = TB_FRAME_CONTROL, .tag = TB_CTL_JOIN_ACK, .source = 0 };
            tbon_error_t err;
            if (!pl || tb_sock_send_frame(j->fd, &h, pl, len, now + 1000, &err) != 0)
                TB_WARN("join", "rank %u: its rank could not be sent", j->r);
            tbon_packet_unref(p);
        } else {
            TB_WARN("join", "rank %u: its parent %u did not take the view in time", j->r,
                    j->parent);
        }
        close(j->fd);
        *j = n->pjoin[--n->npjoin];
    }
}

void tb_view_joined(tb_node_t *n, size_t i)
{
    tb_child_t *ch = &n->child[i];
    n->njoining -= !!ch->join_due;
    ch->join_due = 0;
    tb_ft_send_ports_to(n, ch->conn);
    tb_stream_bcast_join(n, i);
    TB_INFO("join", "rank %u joined", ch->rank);
    if (n->role == TB_ROLE_FE)
        tb_view_fe_joined(n, ch->rank, n->rank);
    else
        tb_ft_report(n, TB_V_JOINED, ch->rank, n->rank, 0);
}

void tb_view_fe_joined(tb_node_t *n, tbon_rank_t r, tbon_rank_t parent)
{
    for (size_t i = 0; i < n->nannounced; i++)
        if (n->announced[i] == r)
            return;
    tbon_rank_t *v = realloc(n->announced, (n->nannounced + 1) * sizeof *v);
    if (!v)
        return;
    n->announced = v;
    v[n->nannounced++] = r;
    tb_view_note(n, TB_V_JOINED, r, parent, 0);
    tb_node_emit(n, TBON_EV_NODE_JOINED, r, parent, tb_topology_incarnation(n->topo, r), 0);
}

void tb_view_fe_left(tb_node_t *n, tbon_rank_t r, uint32_t inc)
{
    if (!tb_ft_apply(n, TB_V_LEFT, r, TBON_RANK_NONE, inc))
        return;
    TB_INFO("view", "rank %u left", r);
    tb_node_emit(n, TBON_EV_NODE_LEFT, r, TBON_RANK_NONE, inc, 0);
}

void tb_view_left(tb_node_t *n, size_t i)
{
    tbon_rank_t r = n->child[i].rank;
    uint32_t inc = tb_topology_incarnation(n->topo, r);
    if (n->role == TB_ROLE_FE) {
        tb_view_fe_left(n, r, inc);
    } else if (tb_ft_apply(n, TB_V_LEFT, r, TBON_RANK_NONE, inc)) {
        TB_INFO("view", "rank %u left", r);
        tb_ft_report(n, TB_V_LEFT, r, TBON_RANK_NONE, inc);
    }
}

/* Joined children that never connected are taken for failed. */
static void join_timeouts(tb_node_t *n, int64_t now)
{
    for (size_t i = 0; n->njoining && i < n->nchild; i++) {
        tb_child_t *ch = &n->child[i];
        if (!ch->joined || !ch->join_due || now < ch->join_due || ch->conn)
            continue;
        ch->join_due = 0;
        n->njoining--;
        ch->state = CH_GONE;
        TB_WARN("join", "rank %u did not connect after joining: taken for failed", ch->rank);
        tb_stream_child_gone(n, i);
        tb_ft_child_lost(n, i);
    }
}

void tb_view_free(tb_node_t *n)
{
    for (size_t i = 0; i < n->npjoin; i++)
        close(n->pjoin[i].fd);
    free(n->pjoin);
    free(n->announced);
    while (n->vhist.len) {
        tbon_packet_unref(((struct tb_vhist *)tb_ring_at(&n->vhist, 0))->p);
        tb_ring_drop(&n->vhist);
    }
    tb_ring_free(&n->vhist);
    free(n->vpend);
    free(n->orph);
    free(n->chk_rank);
    free(n->chk_ok);
    if (n->nfd >= 0)
        close(n->nfd);
    n->nfd = -1;
}
