/* eds.c - the event detection service thread (docs/architecture.md, "Two threads per
 * process"; seed 003,
 * the EDS): owns the listening socket, authenticates every new connection,
 * keeps the event connections to parent and children, and watches the child
 * processes; it tells the reactor through commands, never touching its state. */
#include "ft/eds.h"
#include "util/hot.h"
#include "ft/eds_int.h"
#include "node/node_ft.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
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
#include "util/array.h"

static void on_watch_io(tb_io_t *io, uint32_t events);
static void on_handshake_timer(tb_timer_t *t, int64_t now);

/* Free the watches dropped during the batch of events just handled (none of
 * them can be in the next batch: their fds left the epoll set), so that a
 * connection's record goes with it. EDS thread. */
TB_HOT static void sweep(tb_eds_t *e)
{
    pthread_mutex_lock(&e->mu);
    for (watch_t **pw = &e->all; *pw;) {
        watch_t *w = *pw;
        if (w->dead) {
            *pw = w->next;
            free(w->auth);
            free(w->ev_msg);
            free(w);
        } else {
            pw = &w->next;
        }
    }
    pthread_mutex_unlock(&e->mu);
}

/* A new node, or a restarted one (hs->rank: its old rank), whose
 * incarnation field is where a commnode listens (docs/protocol.md 9.6):
 * the FE's reactor gives it a rank and a parent (TB_CTL_JOIN_ACK) or
 * closes. */
static void admit_join(tb_eds_t *e, watch_t *w)
{
    const tb_handshake_t *hs = &w->auth->hs;
    tbon_error_t err;
    tbon_rank_t r = hs->rank;
    int cn = hs->role == TB_ROLE_COMMNODE;
    uint32_t port = hs->incarnation;
    if (e->role != TB_ROLE_FE || (hs->role != TB_ROLE_BE && !cn) ||
        (cn && (port == 0 || port > 65535)) || (!cn && port) ||
        !atomic_load(&e->ft_ready)) {
        TB_WARN("eds", "refused a join: %s", e->role != TB_ROLE_FE ? "not the front-end" :
                hs->role != TB_ROLE_BE && !cn ? "only back-ends and commnodes join" :
                !atomic_load(&e->ft_ready) ? "the tree is not up yet"
                : "a commnode must say where it listens (and only a commnode)");
        tb_auth_srv_welcome(w->auth, &e->session, TB_WELCOME_REFUSED, e->rank, 0, 0, &err);
        tb_eds_drop_watch(e, w);
        return;
    }
    if (tb_auth_srv_welcome(w->auth, &e->session, TB_WELCOME_OK, e->rank, 0, 1, &err)) {
        tb_eds_drop_watch(e, w);
        return;
    }
    free(w->auth);
    w->auth = NULL;
    tb_loop_forget(e->loop, &w->io);
    w->dead = 1;
    tb_eds_post(e, tb_cmd_join_conn(w->fd, cn ? TB_ROLE_COMMNODE : TB_ROLE_BE, r, port));
}

/* An authentic peer: is it one we expect? */
static void admit(tb_eds_t *e, watch_t *w)
{
    const tb_handshake_t *hs = &w->auth->hs;
    tbon_error_t err;
    tbon_rank_t r = hs->rank;
    uint8_t purpose = hs->purpose;   /* hs dies with w->auth below */
    if (purpose == TB_PURPOSE_JOIN) {
        admit_join(e, w);
        return;
    }
    if (purpose == TB_PURPOSE_REATTACH) {
        tb_eds_claim(e, w);            /* a new front-end (eds_fe.c) */
        return;
    }
    tb_eds_apply_reports(e);           /* a back-end that joined may be connecting */
    int expected = r < tb_topology_size(e->topo) && e->expect[r];
    int ok = r < tb_topology_size(e->topo) && r != e->rank &&
             hs->role == (uint8_t)tb_topology_role(e->topo, r);
    if (purpose == TB_PURPOSE_RELINK) {
        /* A child of ours whose data connection broke (docs/protocol.md
         * 2.4): the reactor takes the socket if it still has the child. */
        ok = ok && atomic_load(&e->ft_ready) && tb_topology_parent(e->topo, r) == e->rank &&
             tb_topology_alive(e->topo, r);
    } else if (purpose == TB_PURPOSE_ADOPTION) {
        /* Any orphan may ask; the reactor decides (it has the up-to-date
         * topology) and answers with TB_CTL_ADOPT_ACK or a close. */
        ok = ok && atomic_load(&e->ft_ready) && e->role != TB_ROLE_BE;
    } else {
        ok = ok && (tb_topology_parent(e->topo, r) == e->rank ||
                    (purpose == TB_PURPOSE_EVENT && expected));
        if (ok && purpose != TB_PURPOSE_DATA && purpose != TB_PURPOSE_EVENT &&
            purpose != TB_PURPOSE_ATTACH)
            ok = 0;
    }
    uint8_t *seen = purpose == TB_PURPOSE_EVENT ? e->event_seen : e->data_seen;
    if (ok && purpose != TB_PURPOSE_ADOPTION && purpose != TB_PURPOSE_RELINK && seen[r] &&
        !expected)
        ok = 0;
    /* A process of an older generation than the rank's (it was restarted
     * since): whatever it says is stale. */
    int stale = ok && tb_inc_gen(hs->incarnation) < tb_inc_gen(tb_topology_incarnation(e->topo, r));
    if (!ok || stale) {
        TB_WARN("eds", "refused %s connection from rank %u (%s): %s",
                tb_purpose_name(hs->purpose), r, tb_role_name(hs->role),
                stale ? "a stale incarnation (the rank was restarted)" : "not an expected peer");
        tb_auth_srv_welcome(w->auth, &e->session, TB_WELCOME_REFUSED, e->rank, 0, 0, &err);
        tb_eds_drop_watch(e, w);
        return;
    }
    /* The reactor answers a data or adoption connection at once (the
     * topology, TB_CTL_ADOPT_ACK, or a close): the WELCOME waits for that, and
     * the peer wakes up once for both. */
    if (tb_auth_srv_welcome(w->auth, &e->session, TB_WELCOME_OK, e->rank, 0,
                            purpose != TB_PURPOSE_EVENT, &err)) {
        tb_eds_drop_watch(e, w);
        return;
    }
    seen[r] = 1;
    uint32_t inc = w->auth->hs.incarnation;
    free(w->auth);
    w->auth = NULL;
    if (purpose == TB_PURPOSE_EVENT) {
        if (expected)
            e->expect[r] = 0;
        w->kind = K_EVENT;
        w->rank = r;
        tb_eds_tell_grace(e, w);
        return;
    }
    /* A data connection belongs to the reactor from here on. */
    tb_loop_forget(e->loop, &w->io);
    w->dead = 1;
    tb_eds_post(e, purpose == TB_PURPOSE_ADOPTION ? tb_cmd_adopt_conn(w->fd, r, inc)
                   : purpose == TB_PURPOSE_RELINK ? tb_cmd_relink(w->fd, r, 0, 0, NULL)
                   : tb_cmd_conn(w->fd, r));
}

/* How long accepting pauses when the process (or the system) is out of file
 * descriptors or memory for a new connection. */
#define TB_ACCEPT_PAUSE_MS 100

static void on_listen_timer(tb_timer_t *t, int64_t now);

/* accept() failed for want of resources (EMFILE, ENFILE, ENOBUFS, ENOMEM):
 * the pending connection stays in the backlog and the socket stays readable,
 * so accepting again at once would spin (issue 19: 10,823 failing accept4
 * calls in 2 s at 100% CPU). Stop watching the socket for a while, say so
 * once per episode, and count what a later line reports. */
static void pause_accepting(tb_eds_t *e, watch_t *w, int err)
{
    tb_loop_rearm(e->loop, &w->io, 0);
    w->timer.fn = on_listen_timer;
    tb_timer_at(e->loop, &w->timer, tb_now_ms() + TB_ACCEPT_PAUSE_MS);
    if (e->accept_paused++ == 0) {
        struct rlimit rl;
        char lim[64] = "";
        if (err == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0)
            snprintf(lim, sizeof lim, " (the limit is %llu)", (unsigned long long)rl.rlim_cur);
        TB_WARN("eds", "cannot accept connections: %s%s; accepting pauses for %d ms at a time "
                "until it can again", strerror(err), lim, TB_ACCEPT_PAUSE_MS);
    }
}

static void on_listen_timer(tb_timer_t *t, int64_t now)
{
    (void)now;
    watch_t *w = (watch_t *)((char *)t - offsetof(watch_t, timer));
    if (!w->dead)
        tb_loop_rearm(((tb_eds_t *)t->arg)->loop, &w->io, EPOLLIN);
}

static void on_listen(tb_eds_t *e, watch_t *w)
{
    for (;;) {
        int fd = tb_sock_accept(w->fd);
        if (fd < 0) {
            int err = errno;
            if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM)
                pause_accepting(e, w, err);
            return;
        }
        if (e->accept_paused) {
            TB_WARN("eds", "accepting connections again (paused %u times for want of "
                    "resources)", e->accept_paused);
            e->accept_paused = 0;
        }
        tb_auth_srv_t *a = malloc(sizeof *a);
        tbon_error_t err;
        if (!a || tb_auth_srv_start(a, fd, &e->session, tb_now_ms() + HANDSHAKE_MS, &err)) {
            free(a);
            close(fd);
            continue;
        }
        watch_t *pw = tb_eds_add_watch(e, K_PENDING, fd, EPOLLIN, TBON_RANK_NONE, 0);
        if (!pw) {
            free(a);
            close(fd);
            continue;
        }
        pw->auth = a;
        tb_timer_at(e->loop, &pw->timer, a->deadline_ms);
    }
}

static void on_pending(tb_eds_t *e, watch_t *w)
{
    tbon_error_t err;
    int rc = tb_auth_srv_read(w->auth, &e->session, &err);
    if (rc == 0)
        return;
    tb_timer_cancel(e->loop, &w->timer);
    if (rc < 0) {
        /* docs/protocol.md: a peer that fails the handshake is closed and
         * logged; nothing else happens. */
        TB_WARN_LIMITED("eds", "refused a connection: %s", err.msg);
        tb_eds_drop_watch(e, w);
        return;
    }
    admit(e, w);
}


static void beat_and_look(tb_eds_t *e, int parent_beat);

TB_HOT static void on_event_conn(tb_eds_t *e, watch_t *w)
{
    char buf[4096];
    int from_parent = 0;
    for (;;) {
        ssize_t n = recv(w->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            w->heard = tb_now_ms();
            from_parent |= w->rank == e->parent && memchr(buf, TB_EVENT_BEAT, (size_t)n);
            if (w->suspected) {         /* heard again: the suspicion ends */
                w->suspected = 0;
                if (w->rank == 0 && e->role != TB_ROLE_FE)
                    TB_INFO("eds", "the front-end is heard again");
                else
                    tb_eds_post(e, tb_cmd_suspect(w->rank, 0, 0));
            }
            /* TB_EVENT_BYE from the parent: an orderly end follows. */
            int said = tb_eds_scan_events(e, w, (const uint8_t *)buf, (size_t)n);
            if (said < 0)
                break;
            if (w->rank == e->parent && (said & 1))
                e->parent_bye = 1;
            if (w->rank == e->parent && (said & 2))
                e->fenced = 1;
            if ((size_t)n == sizeof buf)
                continue;
            /* Less than asked for: the socket is empty, or what came since
             * wakes us again (the watch is level-triggered); no read only
             * to hear EAGAIN. */
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n == 0 || errno != EAGAIN) {
            break;                      /* its end */
        }
        /* A beat that came with (or after) the parent's goodbye is not
         * passed on: the session is ending, and passing it on woke every
         * node below once more (each back-end answering it) just as they
         * all had to end. */
        if (from_parent && e->hb_on && !e->parent_bye)
            beat_and_look(e, 1);
        return;
    }
    TB_DEBUG("eds", "event connection of rank %u ended", w->rank);
    tbon_rank_t r = w->rank;
    /* The FE's end, not our fencing by it: the session's end. */
    int fe_gone = r == 0 && r == e->parent && !e->fenced;
    if (fe_gone && tb_eds_fe_end(e)) {
        /* It detached, or has a grace: the tree waits for a new one
         * (eds_fe.c); the reactor, an orphan, buffers meanwhile. */
        tb_eds_drop_watch(e, w);
        tb_eds_post(e, tb_cmd_peer_lost(r));
        return;
    }
    if (fe_gone) {
        atomic_store(&e->fe_gone, 1);
        atomic_store(&e->gone_parent, r + 1);   /* for tb_eds_parent_gone: no relink */
    }
    tb_eds_drop_watch(e, w);
    /* A dead parent: the reactor sees its data connection end too, and the
     * adoption's TB_CMD_ADOPTED tells it in any case (it carries the lost
     * rank), so the reactor is not woken for it now: in a recovery burst that
     * wake-up (and the thread switch it forces on us) is per orphan. */
    if (r == e->parent && !fe_gone && atomic_load(&e->ft_ready) && !e->parent_bye &&
        !atomic_load(&e->leaving)) {
        tb_eds_parent_down(e, r);
        return;
    }
    /* Else the reactor decides (TB_CMD_PEER_LOST): before the tree is up
     * here, the port table may still be on its way in the parent's data
     * connection, and with it an adoption. The front-end's end is the
     * session's (nobody takes its place): the reactor, told at once, leaves
     * and tells the children, who leave too, with no adoption asked of
     * anyone (tb_recovery_parent_lost). After the parent's goodbye, or
     * as we leave, the application hears of it now (nobody may be driving
     * a back-end's node). */
    if (r == e->parent)
        tb_eds_post(e, tb_cmd_peer_lost(r));
    else
        tb_eds_post_child_end(e, tb_cmd_peer_lost(r));
    if (r == e->parent && (e->parent_bye || atomic_load(&e->leaving) || fe_gone))
        tb_node_parent_gone(e->node, r);
}

static void on_pidfd(tb_eds_t *e, watch_t *w)
{
    int status = 0;
    pid_t r = waitpid(w->pid, &status, WNOHANG);
    if (r == 0)
        return;
    pthread_mutex_lock(&e->mu);
    if (!TB_ARRAY_ROOM(e->reaped, e->nreaped, e->capreaped, 16) && r == w->pid)
        e->reaped[e->nreaped++] = w->pid;
    pthread_mutex_unlock(&e->mu);
    tb_eds_post_child_end(e, tb_cmd_child_exit(w->rank, r == w->pid ? status : -1));
    tb_eds_drop_watch(e, w);
}

/* A pending handshake past its deadline is dropped. */
static void on_handshake_timer(tb_timer_t *t, int64_t now)
{
    (void)now;
    watch_t *w = (watch_t *)((char *)t - offsetof(watch_t, timer));
    if (!w->dead && w->kind == K_CLAIM)
        tb_eds_claim_read(t->arg, w, NULL, 0, NULL);
    if (w->dead || w->kind != K_PENDING)
        return;
    TB_WARN_LIMITED("eds", "a connection did not finish its handshake in time; closed");
    tb_eds_drop_watch(t->arg, w);
}

/* A silent peer with no one to confirm it (no notice channel to the FE):
 * after the suspicion has stood this many heartbeat timeouts (two more
 * with a channel that never brought a verdict), it is taken for failed
 * here, as before suspicion existed. */
#define TB_UNCONFIRMED_TIMEOUTS 2

/* Silence past the timeout: a suspicion (suspect.c), told to the reactor on
 * every beat while it lasts (its notices to the FE are datagrams). The FE is
 * never suspected: only its end (its connections closing) ends a session. */
static void silent(tb_eds_t *e, watch_t *w, int64_t now, int hb, int beat)
{
    int for_ms = w->link_quiet ? w->link_quiet : (int)(now - w->heard);
    int how = w->link_quiet ? TB_SUSPECT_LINK : 1;
    if (w->rank == 0 && e->role != TB_ROLE_FE) {
        if (!w->suspected)
            TB_WARN("eds", "the front-end has %s for %d ms (%s): waiting for it",
                    w->link_quiet ? "acknowledged nothing on its connection" : "sent nothing",
                    for_ms, w->link_quiet ? "a cut link? its host gone?"
                                          : "stopped? a debugger?");
        w->suspected = 1;
        return;
    }
    if (!w->suspected) {
        w->suspected = 1;
        w->suspected_at = now;
        tb_eds_post(e, tb_cmd_suspect(w->rank, how, for_ms));
        return;
    }
    if (beat)
        tb_eds_post(e, tb_cmd_suspect(w->rank, how, for_ms));
    /* The FE confirms within three windows of the first report it gets; a
     * suspicion that stands much longer has not reached it (no datagram
     * route, its notice socket could not be opened, every verdict lost). */
    int64_t wait = (int64_t)(atomic_load(&e->verdicts) ? TB_UNCONFIRMED_TIMEOUTS + 2
                                                       : TB_UNCONFIRMED_TIMEOUTS) * hb;
    if (e->role == TB_ROLE_FE || now - w->suspected_at < wait)
        return;
    /* Nobody to confirm it: taken for failed here. */
    tbon_rank_t r = w->rank;
    TB_WARN("eds", "rank %u sent nothing for %d ms and no one can confirm it: taken for failed",
            r, for_ms);
    tb_eds_drop_watch(e, w);
    if (r == e->parent) {
        tb_eds_post(e, tb_cmd_peer_lost(r));
        if (atomic_load(&e->ft_ready) && !e->parent_bye && !atomic_load(&e->leaving))
            tb_eds_parent_down(e, r);
        else
            tb_node_parent_gone(e->node, r);
    } else {
        tb_eds_post(e, tb_cmd_fence(r, for_ms));
    }
}

/* Heartbeats (docs/fault-tolerance.md): a beat on every event
 * connection each quarter of the timeout; a peer silent for the whole
 * timeout is suspected (silent()), and heard again it is cleared.
 *
 * The beats go down the tree as one wave: the front-end beats on its timer,
 * and every other node beats (its parent and children alike) when its
 * parent's beat comes, so a node wakes once per beat where a timer of its
 * own and its parent's beat woke it twice (at 1,024 back-ends on two cores,
 * the wake-ups of an idle tree were most of a core). A node whose parent is
 * silent, slow or gone still beats on its own timer, a little later than
 * the parent's would have come (TB_BEAT_FALLBACK).
 *
 * Local health (after HashiCorp's Lifeguard): an observer whose own timer
 * fired late (it was starved: a loaded host, a stopped process) or that
 * finds every one of its peers silent at once suspects itself first: it
 * suspects nobody this time, gives every peer a fresh period, and waits
 * longer from then on (up to 4 timeouts), coming back one step per quiet
 * timeout. Returns when the EDS must look again (-1: heartbeats are off). */
#define TB_BEAT_FALLBACK(hb) ((hb) / 4 + (hb) / 16)

/* The acknowledgement timeout (seed 004 section 4; docs/protocol.md 8.5):
 * a peer whose kernel has acknowledged none of our beats for this long is
 * silent without waiting for the heartbeat timeout. TCP's own
 * acknowledgements are the measure, not the peer's answers: a stopped or
 * starved process's kernel still acknowledges, so only a cut link or a
 * dead host trips it, and what follows is the same suspicion as silence
 * (confirmed by the FE, refuted when the peer is heard). Default: a third
 * of the heartbeat timeout, at least TB_ACK_MIN_MS (TCP sends again after
 * 200 ms at the soonest). */
#define TB_ACK_MIN_MS 250

static int ack_timeout(const tb_eds_t *e, int hb)
{
    if (e->ack_conf >= 0)
        return e->ack_conf;
    return hb / 3 > TB_ACK_MIN_MS ? hb / 3 : TB_ACK_MIN_MS;
}

/* Whether w's link is silent (w->link_quiet); *next lowered to when it
 * would be, for data outstanding that is not yet overdue. A peer heard
 * within the timeout is not looked at: on a sound tree the beats of every
 * peer come more often than that, and no system call is made (looking at
 * every peer on every beat cost an idle 8x8 tree a third more CPU). */
static void link_look(watch_t *w, int64_t now, int ack, int64_t *next)
{
    w->link_quiet = 0;
    /* (no timer for a peer heard lately: the next beat's pass looks;
     * woken at heard + ack, a commnode woke once more per beat, for the
     * children that answer its beat after the pass: an idle 8x8 tree
     * took 1.5x the CPU) */
    if (ack <= 0 || now - w->heard < ack)
        return;
    int q = tb_sock_unacked_ms(w->fd);
    if (q >= ack)
        w->link_quiet = q;
    else if (q > 0 && now + (ack - q) < *next)
        *next = now + (ack - q);
}

/* One peer's look: whether nothing was heard from it for limit ms (its
 * link's silence is in w->link_quiet). */
static int look_at(watch_t *w, int64_t now, int64_t limit, int ack, int64_t *link_next)
{
    if (now - w->heard >= limit) {
        /* We may be the slow one (starved, or just woken up): what the
         * peer sent may be waiting unread. Only true silence counts. */
        char c;
        if (recv(w->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0)
            w->heard = now;
    }
    link_look(w, now, ack, link_next);
    return now - w->heard >= limit;
}

TB_HOT static int64_t heartbeats(tb_eds_t *e, int parent_beat)
{
    int hb = atomic_load(&e->hb_ms);
    if (hb <= 0) {
        e->hb_on = 0;
        return -1;
    }
    int64_t now = tb_now_ms();
    /* Silence counts from the start of beating, not from the connection: a
     * tree whose start-up took longer than the timeout (slow logins, a
     * loaded host) has peers that were connected, and rightly quiet, since
     * long before anyone beat. */
    int starting = !e->hb_on;
    e->hb_on = 1;
    if (starting) {
        e->next_beat = now;
        e->lh = 0;
        e->lh_since = now;
    }
    int64_t late = starting || !e->hb_due ? 0 : now - e->hb_due;
    /* The parent's beat is passed on once per half period at most. */
    int beat = now >= e->next_beat || (parent_beat && now - e->last_beat >= hb / 8);
    if (beat) {
        int64_t period = e->role == TB_ROLE_FE ? hb / 4 : TB_BEAT_FALLBACK(hb);
        e->last_beat = now;
        e->next_beat = now + (period > 0 ? period : 1);
    }
    int64_t limit = (int64_t)hb * (1 + e->lh), link_next = INT64_MAX;
    int ack = ack_timeout(e, hb);
    const char b = TB_EVENT_BEAT;
    size_t npeers = 0, nsilent = 0;
    pthread_mutex_lock(&e->mu);
    for (watch_t *w = e->all; w; w = w->next) {
        if (w->dead || w->kind != K_EVENT)
            continue;
        /* A peer that has said goodbye, or been told it (the session
         * ends in order), is neither beaten nor suspected: with 1,024
         * back-ends, a beat at that point woke every one of them as they
         * all had to end. */
        if (w->rank == e->parent ? e->parent_bye : e->bye_sent) {
            w->heard = now;
            continue;
        }
        npeers++;
        if (starting)
            w->heard = now;
        nsilent += look_at(w, now, limit, ack, &link_next);
        if (beat && send(w->fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN)
            TB_DEBUG("eds", "no heartbeat to rank %u: %s", w->rank, strerror(errno));
    }
    int self = nsilent > 0 && (late > hb / 4 || (npeers >= 2 && nsilent == npeers));
    if (self) {
        if (e->lh < 3)
            e->lh++;
        e->lh_since = now;
        limit = (int64_t)hb * (1 + e->lh);
        TB_WARN("eds", "%s: suspecting ourselves first; silence counts after %lld ms now",
                late > hb / 4 ? "this process was starved (its timer fired late)"
                              : "every peer is silent at once", (long long)limit);
    } else if (e->lh && now - e->lh_since >= limit) {
        e->lh--;
        e->lh_since = now;
        limit = (int64_t)hb * (1 + e->lh);
    }
    int64_t next = e->next_beat < link_next ? e->next_beat : link_next;
    for (watch_t *w = e->all; w; w = w->next) {
        if (w->dead || w->kind != K_EVENT)
            continue;
        /* A fresh period for everyone, but a silent link: its kernel's
         * silence was measured by the kernel, however late we looked. */
        if (self && now - w->heard >= (int64_t)hb && !w->link_quiet)
            w->heard = now;
        if (now - w->heard < limit && w->heard + limit < next)
            next = w->heard + limit;
    }
    pthread_mutex_unlock(&e->mu);
    /* silent() may drop watches (and so take mu): a pass of its own, one
     * watch at a time looked up again. */
    for (int again = 1; again;) {
        again = 0;
        pthread_mutex_lock(&e->mu);
        watch_t *w = e->all;
        while (w && (w->dead || w->kind != K_EVENT || w->looked == now ||
                     !(w->link_quiet || (!self && now - w->heard >= limit))))
            w = w->next;
        if (w)
            w->looked = now;
        pthread_mutex_unlock(&e->mu);
        if (w) {
            silent(e, w, now, hb, beat);
            again = 1;
        }
    }
    e->hb_due = next;
    return next;
}

void tb_eds_set_heartbeat(tb_eds_t *e, int timeout_ms)
{
    if (!e)
        return;
    atomic_store(&e->hb_ms, timeout_ms > 0 ? timeout_ms : 0);
    tb_loop_wake(e->loop);
}

/* Beat, look for silence, and arm the timer for the next time to
 * (parent_beat: the parent's beat has just come). */
static void beat_and_look(tb_eds_t *e, int parent_beat)
{
    int64_t next = heartbeats(e, parent_beat);
    if (next < 0)
        tb_timer_cancel(e->loop, &e->hb_timer);
    else
        tb_timer_at(e->loop, &e->hb_timer, next);
}

static void on_hb_timer(tb_timer_t *t, int64_t now)
{
    (void)now;
    beat_and_look(t->arg, 0);
}

TB_HOT static void on_watch_io(tb_io_t *io, uint32_t events)
{
    (void)events;
    tb_eds_t *e = io->arg;
    watch_t *w = (watch_t *)((char *)io - offsetof(watch_t, io));
    if (w->dead)          /* dropped earlier in this batch (freed by sweep) */
        return;
    switch (w->kind) {
    case K_LISTEN: on_listen(e, w); break;
    case K_PENDING: on_pending(e, w); break;
    case K_EVENT: on_event_conn(e, w); break;
    case K_PIDFD: on_pidfd(e, w); break;
    case K_CLAIM: {
        char host[64];
        uint16_t port;
        if (tb_eds_claim_read(e, w, host, sizeof host, &port))
            tb_eds_adopt_to(e, host, port);
        break;
    }
    }
}

/* After each batch: what the reactor's messages and flags asked for. */
static void after_batch(tb_eds_t *e)
{
    int hb = atomic_load(&e->hb_ms);
    if (hb != e->hb_seen) {
        e->hb_seen = hb;
        beat_and_look(e, 0);
    }
    int want = e->adopt_want;
    e->adopt_want = 0;
    /* Asked by the reactor (tb_ft_parent_lost): also before the port table
     * came, with the ports we know. A loss it saw before an adoption that
     * started since (a new FE's claim, say, while the reactor still tried
     * the old FE's link) was of the link that adoption replaces: taken for
     * the new parent's, it had us leave the new FE for a second adoption,
     * and the FE's detach then went unheard (the session left for good). */
    if (want && tb_inc_gen(e->adopt_want_inc) == tb_inc_gen(e->adopt_inc) &&
        e->adopt_want_inc < e->adopt_inc) {
        TB_INFO("ft", "the reactor's loss of rank %d came from before the adoption under way: "
                "the adoption replaces that link", want - 1);
        want = 0;
    }
    if (want && !atomic_load(&e->leaving))
        tb_eds_parent_down(e, (tbon_rank_t)(want - 1));
    tb_eds_filters_after_batch(e);
}

TB_HOT static void *eds_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "tbon-eds");
    tb_eds_t *e = arg;
    /* The C library gives a thread its own heap at its first allocation. A
     * back-end's EDS may allocate nothing before its parent dies, and then
     * paid for that heap in the middle of the recovery burst: pay now. */
    void *volatile warm = malloc(64);
    free(warm);
    /* A back-end adopts on this thread (eds_adopt.c, adopt_here). */
    if (e->role != TB_ROLE_BE && tb_eds_start_adopter(e) != 0) /* again at the first loss */
        TB_WARN("eds", "cannot start the adopter thread yet: %s", strerror(errno));
    tb_eds_watch_start(e);
    while (!atomic_load(&e->stop)) {
        tb_loop_fire(e->loop);
        sweep(e);
        if (atomic_load(&e->stop))
            break;
        if (tb_loop_wait(e->loop, -1) < 0) {
            TB_ERROR("eds", "epoll_wait: %s", strerror(errno));
            break;
        }
        after_batch(e);
        sweep(e);
    }
    /* An orderly end: the children still connected are told before their
     * event connections end (tb_eds_leave). */
    if (atomic_load(&e->leaving) && !e->bye_sent)
        tb_eds_say_bye(e);
    return NULL;
}

/* TBON_ACK_TIMEOUT_MS: -1 (unset: the default), 0 (off) or ms. */
static int ack_conf(const char *v)
{
    if (!v || !*v)
        return -1;
    char *end;
    long ms = strtol(v, &end, 10);
    if (*end || ms < 0 || ms > INT_MAX) {
        TB_WARN("eds", "TBON_ACK_TIMEOUT_MS=%s is not a number of ms (0: off): "
                "the default it is", v);
        return -1;
    }
    return (int)ms;
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
    e->role = tb_topology_role(topo, rank);
    e->parent = tb_topology_parent(topo, rank);
    e->incarnation = tb_topology_incarnation(topo, rank);   /* a restarted process: > 0 */
    e->session = *s;
    e->loop = tb_loop_new(tb_eds_on_mail, e);
    e->watch_io = on_watch_io;
    e->handshake_timer = on_handshake_timer;
    e->hb_timer = (tb_timer_t){ .fn = on_hb_timer, .arg = e };
    e->ack_conf = ack_conf(node ? tb_node_conf(node)->ack_timeout_ms : NULL);
    const char *delay = node ? tb_node_conf(node)->test_adopt_delay_ms : NULL;
    e->adopt_delay_ms = delay ? atoi(delay) : 0;
    const char *stall = node ? tb_node_conf(node)->test_adopt_stall_ms : NULL;
    e->adopt_stall_ms = stall ? atoi(stall) : 0;
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->amu, NULL);
    pthread_cond_init(&e->acv, NULL);
    pthread_cond_init(&e->dcv, NULL);
    e->topo = tb_topology_clone(topo);
    size_t n = tb_topology_size(topo);
    e->data_seen = calloc(n, 1);
    e->event_seen = calloc(n, 1);
    e->expect = calloc(n, 1);
    if (!e->loop || !e->topo || !e->data_seen || !e->event_seen || !e->expect ||
        (listen_fd >= 0 && !tb_eds_add_watch(e, K_LISTEN, listen_fd, EPOLLIN, TBON_RANK_NONE, 0))) {
        tb_error_set(err, TBON_ENOMEM, "cannot start the event detection service");
        if (listen_fd >= 0)
            close(listen_fd);
        if (parent_event_fd >= 0)
            close(parent_event_fd);
        goto error;
    }
    if (parent_event_fd >= 0) {
        tb_sock_nonblock(parent_event_fd, 1);
        if (!tb_eds_add_watch(e, K_EVENT, parent_event_fd, EPOLLIN, tb_topology_parent(topo, rank),
                       0)) {
            close(parent_event_fd);
            tb_error_set(err, TBON_ENOMEM, "cannot watch the parent");
            goto error;
        }
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
    if (!e) {
        close(fd);
        return TBON_EINVAL;
    }
    tb_sock_nonblock(fd, 1);
    if (!tb_eds_add_watch(e, K_EVENT, fd, EPOLLIN, parent, 0)) {
        close(fd);
        return TBON_ENOMEM;
    }
    return 0;
}

int tb_eds_watch_child(tb_eds_t *e, tbon_rank_t rank, pid_t pid)
{
    if (!e)
        return TBON_EINVAL;
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return TBON_EIO;
    if (!tb_eds_add_watch(e, K_PIDFD, fd, EPOLLIN, rank, pid)) {
        close(fd);
        return TBON_ENOMEM;
    }
    return 0;
}

int tb_eds_fe_gone(tb_eds_t *e)
{
    return e && atomic_load(&e->fe_gone);
}

int tb_eds_parent_gone(tb_eds_t *e, tbon_rank_t parent)
{
    if (!e)
        return 0;
    if (atomic_load(&e->gone_parent) == parent + 1)
        return 1;
    /* Its end not read yet: a parent killed closes its event and data
     * connections at once, and the reactor may see the data connection's
     * end first. A look at the event connection tells a dead parent from a
     * broken link (which leaves it open). */
    unsigned long long v = atomic_load(&e->parent_watch);
    if (v >> 32 != parent + 1ull)
        return 0;
    struct pollfd pf = { .fd = (int)(uint32_t)v, .events = POLLIN | POLLRDHUP };
    return poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

int tb_eds_reaped(tb_eds_t *e, pid_t pid)
{
    int found = 0;
    if (!e)
        return 0;
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < e->nreaped && !found; i++)
        found = e->reaped[i] == pid;
    pthread_mutex_unlock(&e->mu);
    return found;
}

int tb_eds_side_watch(tb_eds_t *e, tb_io_t *io, uint32_t events)
{
    if (!e || !e->running)
        return TBON_EINVAL;
    if (io->registered) {           /* a one shot that went off: again */
        tb_loop_rearm(e->loop, io, events);
        return 0;
    }
    return tb_loop_watch(e->loop, io, events) == 0 ? 0 : TBON_ENOMEM;
}

void tb_eds_side_forget(tb_eds_t *e, tb_io_t *io)
{
    if (e)
        tb_loop_forget(e->loop, io);
}

void tb_eds_quit(tb_eds_t *e)
{
    if (!e || !e->running || atomic_exchange(&e->stop, 1))
        return;
    tb_loop_wake(e->loop);
    tb_eds_wake_adopter(e);
}

void tb_eds_stop(tb_eds_t *e)
{
    if (!e)
        return;
    if (e->running) {
        /* Both threads asked at once, then joined: one wake-up's wait, not
         * two in a row (a teardown of 64 back-ends on two cores queues
         * every one of them). */
        tb_eds_quit(e);
        pthread_join(e->thread, NULL);
        e->running = 0;
        tb_eds_join_adopter(e);
        /* Leaving faster than the thread could say goodbye: say it now. */
        if (atomic_load(&e->leaving) && !e->bye_sent)
            tb_eds_say_bye(e);
    }
    for (watch_t *w = e->all; w; w = w->next)
        tb_eds_drop_watch(e, w);
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
        free(w->ev_msg);
        free(w);
        w = next;
    }
    /* The loop's last drain below applies reports, and a failure's looks
     * for the rank's watch (fence_events): there is none any more. */
    e->all = NULL;
    while (e->ngrave > 0)
        close(e->grave[--e->ngrave]);
    tb_loop_destroy(e->loop);     /* what was never applied is applied now, and freed */
    tb_topology_destroy(e->topo);
    tb_adopt_index_destroy(e->aidx);
    free(e->data_seen);
    free(e->event_seen);
    free(e->expect);
    free(e->reaped);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->amu);
    pthread_cond_destroy(&e->acv);
    pthread_cond_destroy(&e->dcv);
    free(e);
}
