/* eds_fe.c - the EDS's part in a session that outlives its front-end
 * (docs/fault-tolerance.md, "The root"; seed 003 IV-C, seed 000 3.6): a
 * child of the FE holds the tree when the FE detaches ('D') or dies with a
 * grace ('G'), for as long as it said; a new FE claims it (purpose
 * REATTACH), gets its topology and view, and says where it listens; the
 * adoption that follows is the ordinary one (eds_adopt.c). At the FE: the
 * grace told to each child, and the detach. */
#include "ft/eds.h"
#include "ft/eds_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/endian.h"
#include "util/error.h"
#include "util/log.h"
#include "codec/wire.h"
#include "net/sock.h"

/* How long a claim may wait for the new FE's word (it makes its node in
 * between). */
#define TB_CLAIM_MS 30000

static void on_hold_timer(tb_timer_t *t, int64_t now)
{
    tb_eds_t *e = t->arg;
    if (!atomic_load(&e->headless) || atomic_load(&e->stop))
        return;
    if (e->claim || e->adopting) {
        /* a new FE is on its way: its claim has a deadline of its own */
        tb_timer_at(e->loop, &e->hold_timer, now + 1000);
        return;
    }
    TB_WARN("ft", "no front-end came back in time: the session is over");
    atomic_store(&e->headless, 0);
    atomic_store(&e->fe_gone, 1);
    tb_eds_post(e, tb_cmd_adopt_failed(0));
    tb_eds_post(e, tb_cmd_peer_lost(0));
    tb_node_parent_gone(e->node, 0);
}

void tb_eds_fe_said(tb_eds_t *e, watch_t *w, uint8_t what, uint32_t v)
{
    if (w->rank != 0 || e->parent != 0 || e->role == TB_ROLE_FE)
        return;
    if (what == TB_EVENT_GRACE) {
        atomic_store(&e->fe_grace_ms, v > INT32_MAX ? INT32_MAX : (int)v);
    } else {
        e->detached = 1;
        e->detach_ms = v;
    }
}

int tb_eds_fe_end(tb_eds_t *e)
{
    if (atomic_load(&e->headless))
        return 1;
    int grace = atomic_load(&e->fe_grace_ms);
    if (!e->detached && grace <= 0)
        return 0;
    uint32_t hold = e->detached ? e->detach_ms : (uint32_t)grace;
    atomic_store(&e->headless, 1);
    atomic_store(&e->gone_parent, 1);       /* rank 0 + 1: no relink */
    e->parent = TBON_RANK_NONE;
    if (hold > 0) {
        e->hold_timer = (tb_timer_t){ .fn = on_hold_timer, .arg = e };
        tb_timer_at(e->loop, &e->hold_timer, tb_now_ms() + hold);
    }
    if (e->detached)
        TB_INFO("ft", "the front-end detached: the tree waits for a new one%s", hold ? "" :
                " (no limit)");
    else
        TB_WARN("ft", "the front-end is gone: the tree waits %u ms for a new one", hold);
    e->detached = 0;
    return 1;
}

/* The topology (our copy) and the view version, as a TOPOLOGY frame whose
 * key is the version. */
static int send_info(tb_eds_t *e, int fd)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    tb_loop_drain(e->loop);     /* the reactor's reports (the ports) applied */
    pthread_mutex_lock(&e->mu);
    int rc = tb_topology_serialize(e->topo, &buf, &len);
    pthread_mutex_unlock(&e->mu);
    if (rc)
        return rc;
    tb_frame_hdr_t h = { .type = TB_FRAME_TOPOLOGY, .source = e->rank,
                         .key = atomic_load(&e->view) };
    tbon_error_t err;
    rc = tb_sock_send_frame(fd, &h, buf, len, tb_now_ms() + 2000, &err);
    free(buf);
    return rc;
}

void tb_eds_claim(tb_eds_t *e, watch_t *w)
{
    const tb_handshake_t *hs = &w->auth->hs;
    tbon_error_t err;
    int mine = hs->role == TB_ROLE_FE && hs->rank == 0 && e->role == TB_ROLE_COMMNODE &&
               tb_topology_parent(e->topo, e->rank) == 0;
    int free_now = atomic_load(&e->headless) && !e->claim && !e->adopting;
    if (!mine || !free_now) {
        TB_INFO("ft", "refused a front-end's claim: %s", !mine ? "not a child of the front-end"
                : atomic_load(&e->headless) ? "another front-end is reattaching"
                : "the session has a front-end");
        tb_auth_srv_welcome(w->auth, &e->session, mine ? TB_WELCOME_TAKEN : TB_WELCOME_REFUSED,
                            e->rank, 0, 0, &err);
        tb_eds_drop_watch(e, w);
        return;
    }
    if (tb_auth_srv_welcome(w->auth, &e->session, TB_WELCOME_OK, e->rank, e->incarnation, 1,
                            &err) || send_info(e, w->fd)) {
        tb_eds_drop_watch(e, w);
        return;
    }
    free(w->auth);
    w->auth = NULL;
    w->kind = K_CLAIM;
    w->rank = 0;
    w->ev_hdr_have = 0;
    e->claim = w;
    tb_timer_at(e->loop, &w->timer, tb_now_ms() + TB_CLAIM_MS);
    TB_INFO("ft", "claimed by a new front-end");
}

static void release(tb_eds_t *e, watch_t *w, const char *why)
{
    if (e->claim == w)
        e->claim = NULL;
    if (why)
        TB_INFO("ft", "the claim of a new front-end ended: %s", why);
    tb_eds_drop_watch(e, w);
}

int tb_eds_claim_read(tb_eds_t *e, watch_t *w, char *host, size_t hostlen, uint16_t *port)
{
    if (w->kind != K_CLAIM)
        return 0;
    if (!host) {                    /* its deadline */
        release(e, w, "it said nothing in time");
        return 0;
    }
    /* 'R' and the u16 port where the new FE listens. */
    ssize_t n = recv(w->fd, w->ev_hdr + w->ev_hdr_have, 3u - w->ev_hdr_have, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0) {
        release(e, w, "it went away");
        return 0;
    }
    w->ev_hdr_have += (uint8_t)n;
    if (w->ev_hdr_have < 3)
        return 0;
    *port = (uint16_t)(w->ev_hdr[1] | w->ev_hdr[2] << 8);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int ok = w->ev_hdr[0] == 'R' && *port &&
             getpeername(w->fd, (struct sockaddr *)&ss, &sl) == 0;
    if (ok && ss.ss_family == AF_INET)
        ok = inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host,
                       (socklen_t)hostlen) != NULL;
    else if (ok && ss.ss_family == AF_INET6)
        ok = inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host,
                       (socklen_t)hostlen) != NULL;
    else
        ok = 0;
    release(e, w, ok ? NULL : "a malformed word");
    /* The adoption is under way from here (e->adopting): the hold waits. */
    return ok;
}

void tb_eds_tell_grace(tb_eds_t *e, watch_t *w)
{
    int g = atomic_load(&e->fe_grace_sent);
    if (e->role != TB_ROLE_FE || g <= 0)
        return;
    uint8_t b[5] = { TB_EVENT_GRACE };
    tb_put32(b + 1, (uint32_t)g);
    (void)!send(w->fd, b, sizeof b, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void tb_eds_set_grace(tb_eds_t *e, int ms)
{
    if (e)
        atomic_store(&e->fe_grace_sent, ms > 0 ? ms : 0);
}

void tb_eds_set_view(tb_eds_t *e, uint64_t v)
{
    if (e)
        atomic_store(&e->view, v);
}
