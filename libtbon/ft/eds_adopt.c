/* eds_adopt.c - the EDS's part in recovery (seed 003 V-A, the
 * reconfigurator): its private copy of the topology kept in step with the
 * reactor's reports, the choice of an adopter when the parent is lost, the
 * adoption handshake with it, the event connection to the new parent, and
 * an orderly goodbye to the children. */
#include "ft/eds.h"
#include "ft/eds_int.h"

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

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "codec/packet_int.h"
#include "topo/reconfig.h"
#include "net/sock.h"

/* ---- fault tolerance: the reconfigurator (seed 003 V-A) ---- */

/* The per-rank arrays follow the topology when back-ends join. */
int tb_eds_grow_seen(tb_eds_t *e, size_t old, size_t n)
{
    uint8_t **v[3] = { &e->data_seen, &e->event_seen, &e->expect };
    for (int i = 0; i < 3; i++) {
        uint8_t *nv = realloc(*v[i], n);
        if (!nv)
            return TBON_ENOMEM;
        memset(nv + old, 0, n - old);
        *v[i] = nv;
    }
    return 0;
}

static void apply_report(tb_eds_t *e, const struct eds_mail *q)
{
    if (q->kind == TB_EDS_FAILED) {
        tb_report_failure(e->topo, q->r, q->inc);
    } else if (q->kind == TB_EDS_ADOPTED) {
        tb_report_adoption(e->topo, q->r, q->p, q->inc);
    } else if (q->kind == TB_EDS_JOINED) {
        size_t old = tb_topology_size(e->topo);
        int rc = q->r == old ? tb_eds_grow_seen(e, old, old + 1) : 0;
        if (rc == 0)
            rc = tb_report_join(e->topo, q->role, q->r, q->p, q->host, q->lid, q->inc);
        if (rc < 0)
            TB_WARN("eds", "the join of rank %u left out of our copy", q->r);
        if (rc == 1) {
            /* A restarted process connects afresh. */
            e->data_seen[q->r] = e->event_seen[q->r] = e->expect[q->r] = 0;
            if (q->port)
                tb_topology_set_port(e->topo, q->r, (uint16_t)q->port);
        }
    } else if (q->kind == TB_EDS_PORT) {
        tb_topology_set_port(e->topo, q->r, (uint16_t)q->p);
    }
}

/* What the reactor sent, in the order it sent it (the loop's drain). An
 * adoption asked for is only noted here: the thread's loop starts it after
 * the batch (eds_thread), never in the middle of another step that
 * applies the reports first. */
void tb_eds_on_mail(void *arg, tb_mail_t *list)
{
    tb_eds_t *e = arg;
    while (list) {
        struct eds_mail *q = (struct eds_mail *)list;
        list = list->next;
        switch (q->what) {
        case M_REPORT:
            apply_report(e, q);
            break;
        case M_EXPECT:
            if (q->r < tb_topology_size(e->topo)) {
                e->expect[q->r] = 1;
                e->event_seen[q->r] = 0;
            }
            break;
        case M_ADOPT:
            e->adopt_want = (int)q->r + 1;
            break;
        }
        free(q->host);
        free(q);
    }
}

/* Apply the reports the reactor queued to the private copy. EDS thread. */
void tb_eds_apply_reports(tb_eds_t *e)
{
    tb_loop_drain(e->loop);
}

/* Connect to candidate c and ask it to adopt us: the handshake with purpose
 * ADOPTION, then its TB_CTL_ADOPT_ACK. The data connection fd, or -1. */
static int ask(tb_eds_t *e, tbon_rank_t c, int64_t deadline)
{
    uint16_t port = tb_topology_port(e->topo, c);
    if (!port)
        return -1;
    /* A node on our own topology host is reached over the loopback, as
     * children reach parents at start-up (docs/protocol.md 7.1). */
    const char *host = tb_topology_host_index(e->topo, c) == tb_topology_host_index(e->topo, e->rank)
                       ? "127.0.0.1" : tb_topology_host(e->topo, c);
    tbon_error_t err;
    int fd = tb_sock_connect(host, port, deadline, &err);
    if (fd < 0)
        return -1;
    tb_welcome_t w;
    tb_frame_t f;
    uint32_t one = 0;
    if (tb_auth_client(fd, &e->session, (uint8_t)e->role, TB_PURPOSE_ADOPTION, e->rank,
                       e->incarnation + 1, deadline, &w, &err) == 0 &&
        tb_sock_recv_frame(fd, 4096, &f, deadline, &err) == 0) {
        tb_ctl_msg_t m;
        if (f.hdr.type == TB_FRAME_CONTROL && f.hdr.tag == TB_CTL_ADOPT_ACK &&
            tb_ctl_decode_bytes(TB_CTL_ADOPT_ACK, f.payload, f.hdr.len, &m, NULL) == 0)
            one = m.u.adopt_ack.ok;
        tb_frame_release(&f);
    }
    if (one != 1) {
        TB_INFO("adopt", "rank %u did not adopt us: %s", c, one ? "refused" : err.msg);
        close(fd);
        return -1;
    }
    return fd;
}

/* How long after an adoption the event connection to the new parent waits.
 * A parent's death orphans all its children at once, and each of them
 * opening a second connection (connect, handshake, accept) in that burst
 * slows every other orphan's adoption; a dead new parent is still seen
 * meanwhile, by the reactor on the data connection, and a hung one only
 * needs heartbeats well within their timeout. Spread by rank so that the
 * connections do not make a second burst. */
int64_t tb_eds_events_delay(const tb_eds_t *e)
{
    int64_t d = TB_EVENTS_AFTER_ADOPTION_MS;
    int hb = atomic_load(&e->hb_ms);
    if (hb > 0 && d > hb / 4)
        d = hb / 4;
    return d + (int64_t)(e->rank % 16) * (d / 16);
}

/* Open the event connection to the current parent, if one is due. */
void tb_eds_parent_events(tb_eds_t *e)
{
    tbon_rank_t p = e->parent;
    tb_eds_events_at(e, 0);
    while (e->ngrave > 0)
        close(e->grave[--e->ngrave]);
    if (p == TBON_RANK_NONE || atomic_load(&e->stop) || atomic_load(&e->leaving))
        return;
    tbon_error_t err;
    tb_welcome_t w;
    uint16_t port = tb_topology_port(e->topo, p);
    const char *host = tb_topology_host_index(e->topo, p) ==
                       tb_topology_host_index(e->topo, e->rank)
                       ? "127.0.0.1" : tb_topology_host(e->topo, p);
    int64_t dl = tb_now_ms() + 1000;
    int efd = tb_sock_connect(host, port, dl, &err);
    if (efd >= 0 && tb_auth_client(efd, &e->session, (uint8_t)e->role, TB_PURPOSE_EVENT,
                                   e->rank, e->incarnation, dl, &w, &err) == 0) {
        tb_sock_nonblock(efd, 1);
        if (!tb_eds_add_watch(e, K_EVENT, efd, EPOLLIN, p, 0))
            close(efd);
    } else {
        if (efd >= 0)
            close(efd);
        TB_WARN("adopt", "no event connection to the new parent %u: %s", p, err.msg);
    }
}

/* Our parent is gone: find a new one (seed 003 V-A, "Dynamic Topology
 * Configuration"). The candidates come from our copy of the topology; a dead
 * or refusing one means the next, a round that finds nobody is tried again
 * with what the reports have taught us meanwhile, and the FE is the last
 * resort. On success the reactor gets the data connection and we watch the
 * new parent's event connection; else the reactor is told to leave. */
static void adopt(tb_eds_t *e, tbon_rank_t lost)
{
    int64_t t0 = tb_now_us();
    tb_eds_apply_reports(e);
    /* Seed 003 V-A: an adopter must be at least as high as the lost parent
     * was, that is one above us, so the tree grows no higher. */
    uint32_t old_height = tb_topology_height(e->topo, e->rank) + 1;
    tb_report_failure(e->topo, lost, tb_topology_incarnation(e->topo, lost));
    for (int round = 0; round < 4 && !atomic_load(&e->stop); round++) {
        if (round > 0) {
            struct timespec ts = { 0, 40000000L * round };
            nanosleep(&ts, NULL);
            tb_eds_apply_reports(e);
        }
        tbon_rank_t cand[16];
        if (!e->aidx)
            e->aidx = tb_adopt_index_new(e->topo);
        else
            tb_adopt_index_update(e->aidx, e->topo);
        size_t k = e->aidx ? tb_adopt_candidates(e->aidx, e->topo, e->rank, lost, old_height,
                                                 cand, 16) : 0;
        if (k == 0)
            cand[k++] = 0;      /* no index (out of memory): the FE, the last resort */
        int64_t t1 = tb_now_us();
        for (size_t i = 0; i < k && !atomic_load(&e->stop); i++) {
            int fd = ask(e, cand[i], tb_now_ms() + 1000);
            if (fd < 0)
                continue;
            int64_t t2 = tb_now_us();
            /* lost: the parent it replaces */
            tb_cmd_t *c = tb_cmd_adopted(fd, cand[i], lost, (uint64_t)(t1 - t0),
                                         (uint64_t)(t2 - t1));
            if (!c)
                break;
            e->parent = cand[i];
            e->incarnation++;
            tb_node_post_kick(e->node, c);
            /* The event connection to the new parent (seed 003 V-A: "a newly
             * adopted process sends its parent the New Failure Detection
             * Connection protocol message") waits until the burst of a
             * recovery is over: see tb_eds_parent_events(). */
            tb_eds_events_at(e, tb_now_ms() + tb_eds_events_delay(e));
            return;
        }
    }
    TB_WARN("adopt", "no node would adopt us after the loss of rank %u; leaving", lost);
    tb_eds_post(e, tb_cmd_adopt_failed(lost));
    tb_node_parent_gone(e->node, lost);
}

/* The parent's event connection ended, or the reactor saw the parent go. */
void tb_eds_parent_down(tb_eds_t *e, tbon_rank_t lost)
{
    if (lost != e->parent)
        return;            /* an old parent, already replaced */
    pthread_mutex_lock(&e->mu);
    for (watch_t *w = e->all; w; w = w->next)
        if (!w->dead && w->kind == K_EVENT && w->rank == lost) {
            pthread_mutex_unlock(&e->mu);
            tb_eds_drop_watch(e, w);
            pthread_mutex_lock(&e->mu);
        }
    pthread_mutex_unlock(&e->mu);
    e->parent = TBON_RANK_NONE;
    tb_eds_events_at(e, 0);
    adopt(e, lost);
}

/* Queue a message (host taken over) for the EDS thread; wake: wake it for
 * it, else it is applied when the EDS next needs the topology (a report
 * costs the reactor no thread switch). */
static void send_mail(tb_eds_t *e, struct eds_mail q, int wake)
{
    struct eds_mail *m = malloc(sizeof *m);
    if (!m) {
        TB_WARN("eds", "out of memory: a report for rank %u lost", q.r);
        free(q.host);
        return;
    }
    *m = q;
    if (wake)
        tb_loop_post(e->loop, &m->mail);
    else
        tb_loop_queue(e->loop, &m->mail);
}

void tb_eds_report(tb_eds_t *e, tb_eds_rep_kind_t kind, tbon_rank_t r, tbon_rank_t p,
                   uint32_t inc)
{
    if (!e)
        return;
    send_mail(e, (struct eds_mail){ .what = M_REPORT, .kind = kind, .r = r, .p = p, .inc = inc,
                                    .role = TB_ROLE_BE }, 0);
}

void tb_eds_join(tb_eds_t *e, const tb_vchange_t *c)
{
    if (!e)
        return;
    char *h = strdup(c->host);
    if (h)
        send_mail(e, (struct eds_mail){ .what = M_REPORT, .kind = TB_EDS_JOINED, .r = c->rank,
                                        .p = c->parent, .inc = c->inc, .host = h, .lid = c->lid,
                                        .port = c->port,
                                        .role = c->kind == TB_V_JOIN_CN ? TB_ROLE_COMMNODE
                                                                        : TB_ROLE_BE }, 0);
}

/* Tell every child on its event connection that we leave in order. */
void tb_eds_say_bye(tb_eds_t *e)
{
    e->bye_sent = 1;
    const char bye = TB_EVENT_BYE;
    pthread_mutex_lock(&e->mu);
    for (watch_t *w = e->all; w; w = w->next)
        if (!w->dead && w->kind == K_EVENT && w->rank != e->parent &&
            send(w->fd, &bye, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
            TB_DEBUG("eds", "no goodbye to rank %u: %s", w->rank, strerror(errno));
    pthread_mutex_unlock(&e->mu);
}

void tb_eds_leave(tb_eds_t *e)
{
    if (!e || atomic_exchange(&e->leaving, 1))
        return;
    tb_loop_wake(e->loop);
}

void tb_eds_set_ft_ready(tb_eds_t *e)
{
    if (!e)
        return;
    atomic_store(&e->ft_ready, 1);
}

void tb_eds_request_adoption(tb_eds_t *e, tbon_rank_t lost)
{
    if (!e)
        return;         /* given links (node.h): the caller hands the adopter in */
    send_mail(e, (struct eds_mail){ .what = M_ADOPT, .r = lost }, 1);
}

/* Queued, not woken for: admit() applies it before it looks at a peer. */
void tb_eds_expect(tb_eds_t *e, tbon_rank_t rank)
{
    if (!e)
        return;
    send_mail(e, (struct eds_mail){ .what = M_EXPECT, .r = rank }, 0);
}
