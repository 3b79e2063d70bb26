/* node_dlog.c - messages between processes delivered once and in order for
 * each sender and receiver, through failures (docs/protocol.md 10.2).
 *
 * Links already repair their own faults (net/link.c); what a dead commnode
 * held dies with it. So the ends take care of it, as in Angskun et al.'s
 * self-healing network (section 3.2: a message goes on around the failed
 * node once the tree has healed):
 *
 *   - the sender numbers its unicasts per destination (1, 2, ...), its
 *     broadcasts on their own (1, 2, ...), and keeps every message until
 *     each destination has acknowledged it; a unicast says how many
 *     broadcasts came before it, a broadcast which unicast must come before
 *     it (only for destinations that have not acknowledged all of theirs);
 *   - a receiver takes a message only when everything before it from that
 *     sender is taken, keeps what comes early, drops what it had, and
 *     acknowledges what it took (32 messages, or 10 ms after the first, or
 *     sooner with a stream's packet that goes up: tb_dlog_ride);
 *   - when the topology changes (an adoption, a failure) the sender sends
 *     again, by the new routes, what is not yet acknowledged; a hop that
 *     dropped a message on a stale topology is repaired by the receiver's
 *     word (an acknowledgement with GAP: the missing one goes again at
 *     once) and, for a last message with nothing after it, by a time-out
 *     that sends the oldest 32 per destination again (twice the longest
 *     recent wait, 2 to 16 s, doubling while nothing is acknowledged; a
 *     message sent again counts its whole wait, so a lossy time pushes
 *     the time-out up, never down);
 *   - a destination that fails or leaves before acknowledging a message
 *     gives the sender TBON_EV_UNREACHABLE for it;
 *   - back-pressure, end to end: a receiver whose application has more than
 *     its high-water mark of messages not yet taken keeps what comes next
 *     unacknowledged (and takes it when the application catches up), and a
 *     sender with more than TB_DLOG_WINDOW bytes unacknowledged waits in
 *     its next send. No link stops for it: a process that does not read
 *     its messages holds back their senders, not the tree's other traffic.
 *
 * The state is made at the first message sent or taken: a process that
 * never uses messages pays nothing. */
#include "node/node_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "codec/ctl.h"
#include "codec/packet_int.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/ring.h"

#define DLOG_ACK_COUNT 32       /* messages taken before an acknowledgement goes */
#define DLOG_ACK_MS 10          /* ... or this long after the first of them */
#define DLOG_RTO_MS 2000        /* unacknowledged this long: sent again, at the least */
#define DLOG_RTO_MAX_MS 16000
#define DLOG_PROBE 32           /* sent again per destination at a time-out, the oldest */
#define DLOG_REROUTE_MS 2       /* a topology change: sent again this soon */

/* What we sent to a rank. */
struct dpeer {
    uint32_t inc;               /* its incarnation when we came to know it */
    uint32_t nonce;             /* its process tag, from its first acknowledgement */
    uint32_t sent, acked;       /* unicasts numbered so far; acknowledged */
    uint32_t backed;            /* broadcasts it acknowledged */
    uint32_t bbase;             /* broadcasts sent before we knew it (a join) */
    uint32_t pass, probes;      /* the time-out's pass, and how many it sent again */
    uint32_t fast, bfast;       /* the unicast and broadcast last sent again for a gap */
    uint8_t  known, dead;
};

/* A message come early, kept until those before it are taken. */
struct dheld {
    uint64_t seq;
    int32_t  tag;
    uint32_t flags, bseq;
    uint32_t num;               /* a unicast's number; the unicast a broadcast waits for */
    uint8_t *body;
    size_t   len;
};

/* What we took from a rank. */
struct dfrom {
    uint32_t nonce;             /* the sender's process tag */
    uint32_t got, bgot;         /* unicasts and broadcasts taken, in order */
    uint32_t owed;              /* messages come since our last acknowledgement */
    uint8_t  fresh;             /* no broadcast taken from it yet */
    uint8_t  queued;            /* in owe[] */
    struct dheld *held;
    size_t   nheld, capheld;
};

/* A message sent and not yet acknowledged by every destination. */
struct dout {
    uint64_t seq;
    int32_t  tag;
    uint32_t flags, bseq;
    uint32_t *dst, *dseq;       /* a unicast's: dseq[i] is 0 once dst[i] took it
                                   or is gone; a broadcast's: whom it waits for */
    size_t   ndst;
    tbon_packet_t *app;         /* the application's packet */
    size_t   bytes;             /* counted in the window (dlog_bytes) */
    int64_t  sent;              /* ms: when first sent */
    uint8_t  again;             /* sent again since (its wait then tells nothing
                                   of the way's: Karn's rule, as in TCP) */
};

/* Both sides for one rank, made when it is first needed (at the first
 * broadcast for every back-end and the FE): a process that talks to a few
 * keeps a few. Never moved, never freed before the end. */
struct dp {
    tbon_rank_t rank;
    struct dpeer to;
    struct dfrom from;
};

struct tb_dlog {
    tb_node_t *n;
    struct dp **tab;            /* by rank: open addressing, a power of 2 */
    size_t tabcap;
    struct dp **all;            /* every entry, in the order made */
    size_t nall, capall;
    tb_ring_t out;              /* struct dout, oldest first */
    uint32_t bsent;             /* broadcasts sent */
    uint32_t nonce;             /* our process tag */
    struct dp **owe;            /* the senders owed an acknowledgement */
    size_t nowe, capowe;
    tb_timer_t ack_timer, resend_timer;
    int rto;                    /* ms: the wait before sending again */
    int64_t slow;               /* ms: the longest wait for an acknowledgement
                                   lately (each acknowledgement takes 1/8 off) */
    uint32_t pass;              /* time-outs so far */
    int topo_pending;           /* the resend timer is for a topology change */
    uint32_t *snap;             /* every rank's parent at the last such resend */
    size_t nsnap;
    int withheld;               /* a message was kept back: the application's
                                   queue was full (tb_dlog_resume) */
};

static int endpoint_rank(const tb_topology_t *t, tbon_rank_t r)
{
    return tb_topology_role(t, r) != TB_ROLE_COMMNODE;
}

/* A process tag: tells a restarted process from the one before (an
 * incarnation does not: it grows with every adoption too). Never 0. */
static uint32_t draw_nonce(void)
{
    uint32_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
        v = (uint32_t)getpid() * 2654435761u ^ (uint32_t)tb_now_ms();
    return v ? v : 1;
}

static size_t slot_of(const tb_dlog_t *d, tbon_rank_t r)
{
    return (size_t)(((uint64_t)r * 0x9e3779b97f4a7c15ull) >> 32) & (d->tabcap - 1);
}

static int rehash(tb_dlog_t *d)
{
    size_t cap = d->tabcap ? 2 * d->tabcap : 64;
    struct dp **tab = calloc(cap, sizeof *tab);
    if (!tab)
        return -1;
    free(d->tab);
    d->tab = tab;
    d->tabcap = cap;
    for (size_t k = 0; k < d->nall; k++) {
        size_t i = slot_of(d, d->all[k]->rank);
        while (tab[i])
            i = (i + 1) & (cap - 1);
        tab[i] = d->all[k];
    }
    return 0;
}

/* Rank r's entry; made if make (a live back-end or FE is known from now
 * on: its broadcasts start at the next); NULL if there is none (or no
 * memory). */
static struct dp *peer(tb_dlog_t *d, tbon_rank_t r, int make)
{
    if (d->tabcap)
        for (size_t i = slot_of(d, r); d->tab[i]; i = (i + 1) & (d->tabcap - 1))
            if (d->tab[i]->rank == r)
                return d->tab[i];
    if (!make || r >= tb_topology_size(d->n->topo))
        return NULL;
    if ((2 * (d->nall + 1) > d->tabcap && rehash(d) < 0) ||
        TB_ARRAY_ROOM(d->all, d->nall, d->capall, 64))
        return NULL;
    struct dp *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    const tb_topology_t *t = d->n->topo;
    p->rank = r;
    if (endpoint_rank(t, r) && tb_topology_alive(t, r))
        p->to = (struct dpeer){ .inc = tb_topology_incarnation(t, r), .bbase = d->bsent,
                                .known = 1 };
    d->all[d->nall++] = p;
    size_t i = slot_of(d, r);
    while (d->tab[i])
        i = (i + 1) & (d->tabcap - 1);
    d->tab[i] = p;
    return p;
}

/* An entry for every live back-end and the FE (before a broadcast). */
static void peer_all(tb_dlog_t *d)
{
    const tb_topology_t *t = d->n->topo;
    size_t size = tb_topology_size(t);
    for (tbon_rank_t r = 0; r < size; r++)
        if (r != d->n->rank && endpoint_rank(t, r) && tb_topology_alive(t, r))
            peer(d, r, 1);
}

static void on_ack_timer(tb_timer_t *t, int64_t now);
static void on_resend_timer(tb_timer_t *t, int64_t now);
static void arrived(tb_node_t *n, const tb_ctl_direct_t *m, uint32_t mine);
static void snap_take(tb_dlog_t *d);

/* m on its way from `from` (or made here): taken here if we are one of its
 * destinations. */
void tb_dlog_route(tb_node_t *n, int from, const tb_ctl_direct_t *m, tbon_packet_t *p)
{
    uint32_t mine = 0;
    if (tb_direct_route(n, from, m, p, &mine))
        arrived(n, m, mine);
}

static tb_dlog_t *dlog(tb_node_t *n)
{
    if (!n->dlog) {
        tb_dlog_t *d = calloc(1, sizeof *d);
        if (!d)
            return NULL;
        d->n = n;
        d->rto = DLOG_RTO_MS;
        d->nonce = draw_nonce();
        tb_ring_init(&d->out, sizeof(struct dout));
        d->ack_timer = (tb_timer_t){ .fn = on_ack_timer, .arg = d };
        d->resend_timer = (tb_timer_t){ .fn = on_resend_timer, .arg = d };
        n->dlog = d;
        snap_take(d);
    }
    return n->dlog;
}

static void held_free(struct dfrom *f)
{
    for (size_t i = 0; i < f->nheld; i++)
        free(f->held[i].body);
    free(f->held);
    f->held = NULL;
    f->nheld = f->capheld = 0;
}

static void out_free(struct dout *o)
{
    free(o->dst);
    tbon_packet_unref(o->app);
}

/* What a message counts in the window: its payload and 64. */
size_t tb_dlog_bytes(const tbon_packet_t *p)
{
    size_t len;
    tb_packet_payload(p, &len);
    return len + 64;
}

void tb_dlog_window_add(tb_node_t *n, size_t bytes)
{
    atomic_fetch_add(&n->dlog_bytes, bytes);
}

void tb_dlog_free(tb_node_t *n)
{
    tb_dlog_t *d = n->dlog;
    if (!d)
        return;
    tb_timer_cancel(n->loop, &d->ack_timer);
    tb_timer_cancel(n->loop, &d->resend_timer);
    for (size_t i = 0; i < d->out.len; i++)
        out_free(tb_ring_at(&d->out, i));
    tb_ring_free(&d->out);
    for (size_t k = 0; k < d->nall; k++) {
        held_free(&d->all[k]->from);
        free(d->all[k]);
    }
    free(d->all);
    free(d->tab);
    free(d->snap);
    free(d->owe);
    free(d);
    n->dlog = NULL;
}

/* ---- the sender ---- */

static void emit_unreachable(tb_dlog_t *d, const struct dout *o, tbon_rank_t r, uint32_t inc)
{
    tb_node_t *n = d->n;
    TB_INFO("direct", "message %llu (tag %d) to rank %u: the rank failed or left before "
            "taking it", (unsigned long long)o->seq, o->tag, r);
    if (!n->cbs.event)
        return;
    tbon_event_t ev = { .type = TBON_EV_UNREACHABLE, .rank = r, .parent = TBON_RANK_NONE,
                        .incarnation = inc, .message = o->seq, .tag = o->tag };
    n->cbs.event(n->cbs.arg, &ev);
}

/* Rank r (incarnation inc) is gone: what we kept for it will never be
 * taken. */
static void peer_gone(tb_dlog_t *d, tbon_rank_t r, uint32_t inc)
{
    for (size_t k = 0; k < d->out.len; k++) {
        struct dout *o = tb_ring_at(&d->out, k);
        if (o->flags & TB_DIRECT_BCAST)
            continue;
        for (size_t i = 0; i < o->ndst; i++)
            if (o->dst[i] == r && o->dseq[i]) {
                o->dseq[i] = 0;
                emit_unreachable(d, o, r, inc);
            }
    }
}

/* The topology's word on every rank: the dead are gone (their messages
 * unreachable, what they sent forgotten), the new or restarted start
 * afresh. */
static void sync_peers(tb_dlog_t *d)
{
    const tb_topology_t *t = d->n->topo;
    if (d->bsent)
        peer_all(d);            /* the joined take our broadcasts from now on */
    for (size_t k = 0; k < d->nall; k++) {
        struct dp *e = d->all[k];
        tbon_rank_t r = e->rank;
        if (r == d->n->rank || !endpoint_rank(t, r))
            continue;
        struct dpeer *p = &e->to;
        int alive = tb_topology_alive(t, r);
        if (p->known && !p->dead && !alive) {
            p->dead = 1;
            peer_gone(d, r, p->inc);
        }
        if (alive && (!p->known || p->dead))
            *p = (struct dpeer){ .inc = tb_topology_incarnation(t, r), .bbase = d->bsent,
                                 .known = 1 };
        struct dfrom *f = &e->from;
        if (f->nonce && !alive) {
            held_free(f);
            *f = (struct dfrom){ .queued = f->queued };
        }
    }
}

/* The fewest broadcasts a live destination has taken. */
static uint32_t bcast_min(const tb_dlog_t *d)
{
    uint32_t m = UINT32_MAX;
    for (size_t k = 0; k < d->nall; k++) {
        const struct dpeer *p = &d->all[k]->to;
        if (d->all[k]->rank != d->n->rank && p->known && !p->dead) {
            uint32_t b = p->backed > p->bbase ? p->backed : p->bbase;
            if (b < m)
                m = b;
        }
    }
    return m;
}

/* Whether every live destination has taken o; *bmin: bcast_min, or -1
 * until needed. */
static int taken(const tb_dlog_t *d, struct dout *o, int64_t *bmin)
{
    if (o->flags & TB_DIRECT_BCAST) {
        if (*bmin < 0)
            *bmin = bcast_min(d);
        return *bmin >= o->bseq;
    }
    int all = 1;
    for (size_t i = 0; i < o->ndst; i++) {
        const struct dp *e = o->dseq[i] ? peer((tb_dlog_t *)d, o->dst[i], 0) : NULL;
        if (e && e->to.acked >= o->dseq[i])
            o->dseq[i] = 0;
        all &= o->dseq[i] == 0;
    }
    return all;
}

/* Drop the oldest messages every destination has taken; 1 if any went. */
static int trim(tb_dlog_t *d)
{
    int64_t bmin = -1, now = 0;
    int any = 0;
    while (d->out.len) {
        struct dout *o = tb_ring_at(&d->out, 0);
        if (!taken(d, o, &bmin))
            break;
        if (!any && !o->again) {    /* the oldest tells how long the way is now */
            now = tb_now_ms();
            d->slow -= d->slow / 8;
            if (now - o->sent > d->slow)
                d->slow = now - o->sent;
        }
        atomic_fetch_sub(&d->n->dlog_bytes, o->bytes);
        out_free(o);
        tb_ring_drop(&d->out);
        any = 1;
    }
    if (!d->out.len)
        tb_timer_cancel(d->n->loop, &d->resend_timer);
    return any;
}

static void arm_resend(tb_dlog_t *d, int64_t due)
{
    if (!tb_timer_armed(&d->resend_timer) || d->resend_timer.due > due)
        tb_timer_at(d->n->loop, &d->resend_timer, due);
}

/* Send o again, by today's routes, where it is not yet taken. */
static int moved(const tb_dlog_t *d, tbon_rank_t r);

/* Send o again, by today's routes, where it is not yet taken (and, with
 * sel, only to destinations that moved). */
static void resend(tb_dlog_t *d, const struct dout *o, const tb_dlog_t *sel)
{
    tb_node_t *n = d->n;
    tb_ctl_direct_t m = { .src = n->rank, .nonce = d->nonce, .seq = o->seq, .tag = o->tag,
                          .flags = o->flags, .bseq = o->bseq };
    size_t len = 0;
    m.body = tb_packet_payload(o->app, &len);
    m.len = len;
    if (o->flags & TB_DIRECT_BCAST) {
        m.dst = o->dst;
        m.dseq = o->dseq;
        m.ndst = o->ndst;
        tb_dlog_route(n, TB_DIRECT_HERE, &m, NULL);
        return;
    }
    size_t k = 0;
    while (k < o->ndst && o->dseq[k] && !sel)
        k++;
    if (k == o->ndst) {         /* none has it yet (its first sending) */
        m.dst = o->dst;
        m.dseq = o->dseq;
        m.ndst = k;
        tb_dlog_route(n, TB_DIRECT_HERE, &m, NULL);
        return;
    }
    uint32_t *v = malloc(2 * o->ndst * sizeof *v);
    if (!v)
        return;                 /* the next try */
    k = 0;
    for (size_t i = 0; i < o->ndst; i++)
        if (o->dseq[i] && (!sel || moved(sel, o->dst[i]))) {
            v[k] = o->dst[i];
            v[o->ndst + k++] = o->dseq[i];
        }
    if (k) {
        m.dst = v;
        m.dseq = v + o->ndst;
        m.ndst = k;
        tb_dlog_route(n, TB_DIRECT_HERE, &m, NULL);
    }
    free(v);
}

/* Every rank's parent now, to tell later which moved. */
static void snap_take(tb_dlog_t *d)
{
    const tb_topology_t *t = d->n->topo;
    size_t size = tb_topology_size(t);
    if (size > d->nsnap) {
        uint32_t *v = realloc(d->snap, size * sizeof *v);
        if (!v)
            return;             /* the old one: more is sent again, not less */
        d->snap = v;
        d->nsnap = size;
    }
    for (size_t r = 0; r < size; r++)
        d->snap[r] = tb_topology_parent(t, (tbon_rank_t)r);
}

/* Whether rank r or a node above it has a new parent since snap_take: a
 * message between it and anyone may have died with the old one. */
static int moved(const tb_dlog_t *d, tbon_rank_t r)
{
    const tb_topology_t *t = d->n->topo;
    for (int k = 0; k < 64 && r != TBON_RANK_NONE; k++) {
        tbon_rank_t p = tb_topology_parent(t, r);
        if (r >= d->nsnap || d->snap[r] != p)
            return 1;
        r = p;
    }
    return 0;
}

/* After a topology change, what may have died with a failed node goes
 * again: the messages to or from a process that moved (adopted, or below
 * one adopted), broadcasts if anything moved. Everything else is on its
 * way and will be acknowledged; sending it all again at every change (a
 * recovery brings dozens) flooded a loaded tree's recovery until its
 * nodes were taken for dead. */
static void resend_moved(tb_dlog_t *d)
{
    int me = moved(d, d->n->rank), any = me;
    for (size_t k = 0; k < d->out.len; k++) {
        struct dout *o = tb_ring_at(&d->out, k);
        o->again = 1;
        if (me) {
            resend(d, o, NULL);
            continue;
        }
        if (o->flags & TB_DIRECT_BCAST) {
            for (size_t r = 0; r < d->nsnap && !any; r++)
                any = d->snap[r] != tb_topology_parent(d->n->topo, (tbon_rank_t)r);
            if (any)
                resend(d, o, NULL);
            continue;
        }
        resend(d, o, d);
    }
    snap_take(d);
}

/* The wait before sending again after an acknowledgement: twice the
 * longest wait for one lately, from DLOG_RTO_MS to DLOG_RTO_MAX_MS. A
 * receiver behind a long queue (a loaded machine, a tree busy with other
 * messages) acknowledges late, not never: sending again then only lengthens
 * the queue. */
static int rto_base(const tb_dlog_t *d)
{
    int64_t v = 2 * d->slow;
    return v < DLOG_RTO_MS ? DLOG_RTO_MS : v > DLOG_RTO_MAX_MS ? DLOG_RTO_MAX_MS : (int)v;
}

/* Whether o waits for a destination that this pass may still probe (and
 * count it). */
static int probe_due(tb_dlog_t *d, const struct dout *o)
{
    int any = 0;
    for (size_t i = 0; i < o->ndst; i++) {
        struct dp *e = o->dseq[i] ? peer(d, o->dst[i], 0) : NULL;
        if (!e || e->to.acked >= o->dseq[i])
            continue;
        if (e->to.pass != d->pass) {
            e->to.pass = d->pass;
            e->to.probes = 0;
        }
        if (e->to.probes < DLOG_PROBE) {
            e->to.probes++;
            any = 1;
        }
    }
    return any;
}

/* Nothing acknowledged for the wait: a hop may have dropped messages (it
 * had no way on, on a topology older or newer than ours). The oldest
 * DLOG_PROBE messages to each destination go again, and the oldest as many
 * broadcasts: what a destination took comes back as an acknowledgement
 * (it acknowledges what it had already), what it lacked fills its gap and
 * frees what it kept. Sending everything again, every time, flooded a
 * loaded tree: at 1,024 back-ends four bytes in five on the wire were
 * copies (bench/RESULTS.md). */
static void resend_oldest(tb_dlog_t *d)
{
    size_t bc = 0;
    d->pass++;
    for (size_t k = 0; k < d->out.len; k++) {
        struct dout *o = tb_ring_at(&d->out, k);
        if ((o->flags & TB_DIRECT_BCAST) ? bc++ < DLOG_PROBE : probe_due(d, o)) {
            o->again = 1;
            resend(d, o, NULL);
        }
    }
}

static void on_resend_timer(tb_timer_t *t, int64_t now)
{
    tb_dlog_t *d = t->arg;
    sync_peers(d);
    trim(d);
    int topo = d->topo_pending;
    d->topo_pending = 0;
    if (!d->out.len || tb_node_ending(d->n)) {
        snap_take(d);
        return;
    }
    if (topo) {
        resend_moved(d);
        arm_resend(d, now + d->rto);
        return;
    }
    TB_DEBUG("direct", "%zu messages not acknowledged for %d ms: the oldest sent again",
             d->out.len, d->rto);
    resend_oldest(d);
    arm_resend(d, now + d->rto);
    if (d->rto < DLOG_RTO_MAX_MS)
        d->rto *= 2;
}

/* The ranks that must take a unicast of ours before a broadcast: those with
 * some not yet acknowledged; in v[0..k) and their last unicasts' numbers in
 * v[k..2k). k. */
static size_t bcast_waits(const tb_dlog_t *d, uint32_t *v)
{
    size_t k = 0;
    for (size_t j = 0; j < d->nall; j++) {
        const struct dpeer *p = &d->all[j]->to;
        if (d->all[j]->rank != d->n->rank && p->known && !p->dead && p->sent != p->acked)
            v[k++] = d->all[j]->rank;
    }
    for (size_t i = 0, j = 0; j < d->nall; j++) {
        const struct dpeer *p = &d->all[j]->to;
        if (d->all[j]->rank != d->n->rank && p->known && !p->dead && p->sent != p->acked)
            v[k + i++] = p->sent;
    }
    return k;
}

/* Unicast numbers for o's destinations dst[0..nd), in o->dst and o->dseq
 * (a rank named twice gets one number: it takes the message once); a
 * destination gone already is unreachable at once. */
static void number(tb_dlog_t *d, struct dout *o, const tbon_rank_t *dst, size_t nd)
{
    o->ndst = nd;
    o->dseq = o->dst + nd;
    for (size_t i = 0; i < nd; i++) {
        tbon_rank_t r = dst[i];
        struct dp *e = peer(d, r, 1);
        struct dpeer *p = e ? &e->to : NULL;
        o->dst[i] = r;
        o->dseq[i] = 0;
        if (!p || p->dead || !p->known) {
            emit_unreachable(d, o, r, p ? p->inc : 0);
            continue;
        }
        for (size_t j = 0; j < i && !o->dseq[i]; j++)
            if (o->dst[j] == r)
                o->dseq[i] = o->dseq[j];
        if (!o->dseq[i])
            o->dseq[i] = ++p->sent;
    }
}

void tb_dlog_send(tb_node_t *n, tb_cmd_t *c)
{
    tb_dlog_t *d = dlog(n);
    tbon_packet_t *app = c->u.direct.pkt;
    int bc = !!(c->u.direct.flags & TB_DIRECT_BCAST);
    if (bc && d)
        peer_all(d);
    size_t nv = bc ? (d ? d->nall : 0) : c->u.direct.ndst;
    struct dout *o = d ? tb_ring_push(&d->out) : NULL;
    uint32_t *v = o ? malloc((2 * nv + 1) * sizeof *v) : NULL;
    size_t bytes = tb_dlog_bytes(app);
    if (!v) {
        if (o)
            tb_ring_drop(&d->out);
        atomic_fetch_sub(&n->dlog_bytes, bytes);
        TB_WARN("direct", "out of memory: a message from here dropped");
        return;
    }
    *o = (struct dout){ .seq = ++n->direct_seq, .tag = tbon_packet_tag(app),
                        .flags = c->u.direct.flags, .dst = v, .app = tbon_packet_ref(app),
                        .bytes = bytes, .sent = tb_now_ms() };
    if (bc) {
        o->bseq = ++d->bsent;
        o->ndst = bcast_waits(d, v);
        o->dseq = v + o->ndst;
    } else {
        o->bseq = d->bsent;
        number(d, o, c->u.direct.dst, c->u.direct.ndst);
    }
    if (!tb_timer_armed(&d->resend_timer))
        arm_resend(d, tb_now_ms() + d->rto);
    resend(d, o, NULL);
}

/* Send message o again to rank r alone (its i-th destination). */
static void resend_to(tb_dlog_t *d, const struct dout *o, size_t i)
{
    tb_node_t *n = d->n;
    tb_ctl_direct_t m = { .src = n->rank, .nonce = d->nonce, .seq = o->seq, .tag = o->tag,
                          .flags = o->flags, .bseq = o->bseq, .dst = &o->dst[i],
                          .dseq = &o->dseq[i], .ndst = 1 };
    size_t len = 0;
    m.body = tb_packet_payload(o->app, &len);
    m.len = len;
    tb_dlog_route(n, TB_DIRECT_HERE, &m, NULL);
}

/* Rank r keeps messages that came after one it lacks (an acknowledgement
 * with GAP): a hop dropped it. The next unicast it lacks goes again at
 * once, to it alone, and the next broadcast (to all), each once for each
 * point the receiver is at: no waiting for the time-out, which repairs
 * one gap per wait. A link keeps order, so what came later was sent later
 * by the same way: the missing one is not still on its way (after a
 * topology change both ways may carry it; the receiver drops the copy). */
static void fill_gap(tb_dlog_t *d, struct dp *e)
{
    struct dpeer *p = &e->to;
    int uni = p->acked < p->sent && p->fast != p->acked + 1;
    int bc = p->backed < d->bsent && p->bfast != p->backed + 1;
    if (uni)
        p->fast = p->acked + 1;
    if (bc)
        p->bfast = p->backed + 1;
    for (size_t k = 0; k < d->out.len && (uni || bc); k++) {
        struct dout *o = tb_ring_at(&d->out, k);
        if (o->flags & TB_DIRECT_BCAST) {
            if (bc && o->bseq == p->backed + 1) {
                o->again = 1;
                resend(d, o, NULL);
                bc = 0;
            }
            continue;
        }
        for (size_t i = 0; uni && i < o->ndst; i++)
            if (o->dst[i] == e->rank && o->dseq[i] == p->acked + 1) {
                o->again = 1;
                resend_to(d, o, i);
                uni = 0;
            }
    }
}

static void on_ack(tb_dlog_t *d, const tb_ctl_direct_t *m)
{
    struct dp *e = peer(d, m->src, 0);
    struct dpeer *p = e ? &e->to : NULL;
    if (!p || !p->known || p->dead)
        return;
    if (!p->nonce)
        p->nonce = m->nonce;
    else if (p->nonce != m->nonce)
        return;                 /* from a process we did not number for */
    if (m->dseq[0] > p->acked && m->dseq[0] <= p->sent)
        p->acked = m->dseq[0];
    if (m->bseq > p->backed && m->bseq <= d->bsent)
        p->backed = m->bseq;
    if (m->flags & TB_DIRECT_GAP)
        fill_gap(d, e);
    if (trim(d)) {
        d->rto = rto_base(d);
        if (d->out.len)
            tb_timer_at(d->n->loop, &d->resend_timer, tb_now_ms() + d->rto);
    }
}

void tb_dlog_topo(tb_node_t *n)
{
    /* (also when nothing waits: the dead are forgotten then) */
    if (n->dlog) {
        n->dlog->topo_pending = 1;
        arm_resend(n->dlog, tb_now_ms() + DLOG_REROUTE_MS);
    }
}

/* ---- the receiver ---- */

static void send_ack(tb_dlog_t *d, struct dp *e)
{
    struct dfrom *f = &e->from;
    tb_node_t *n = d->n;
    uint32_t dst = e->rank, got = f->got;
    tb_ctl_direct_t m = { .src = n->rank, .nonce = d->nonce,
                          .flags = TB_DIRECT_ACK | (f->nheld && !d->withheld ? TB_DIRECT_GAP : 0),
                          .bseq = f->bgot, .dst = &dst, .dseq = &got, .ndst = 1 };
    f->owed = 0;
    tb_dlog_route(n, TB_DIRECT_HERE, &m, NULL);
}

static void send_owed(tb_dlog_t *d)
{
    /* (an acknowledgement to ourselves comes back at once, and may queue
     * again: the list is taken first) */
    size_t n = d->nowe;
    for (size_t i = 0; i < n; i++) {
        struct dp *e = d->owe[i];
        e->from.queued = 0;
        if (e->from.owed && e->from.nonce)
            send_ack(d, e);
    }
    memmove(d->owe, d->owe + n, (d->nowe - n) * sizeof *d->owe);
    d->nowe -= n;
    if (d->nowe && !tb_timer_armed(&d->ack_timer))
        tb_timer_at(d->n->loop, &d->ack_timer, tb_now_ms() + DLOG_ACK_MS);
}

static void on_ack_timer(tb_timer_t *t, int64_t now)
{
    (void)now;
    send_owed(t->arg);
}

/* A stream's packet has just gone to the parent: what we owe goes in the
 * same write, not on its own when the ack timer goes off. Alone, an
 * acknowledgement wakes three processes (this one, the commnode, the
 * sender); in a ring of one message each at 1,024 back-ends, whose
 * answers go up a stream, those wake-ups took half the ring's time
 * (bench/RESULTS.md, "Stop 72: acknowledgements that ride"). Not with our own
 * messages: a back-end that sends and takes a stream of them would then
 * acknowledge at each write, not each 32 messages (the long ring 10%
 * slower). One that takes messages and writes nothing acknowledges on the
 * timer. */
void tb_dlog_ride(tb_node_t *n)
{
    tb_dlog_t *d = n->dlog;
    if (!d || !d->nowe)
        return;
    send_owed(d);
    if (!d->nowe && tb_timer_armed(&d->ack_timer))
        tb_timer_cancel(n->loop, &d->ack_timer);
}

static void owe(tb_dlog_t *d, struct dp *e)
{
    struct dfrom *f = &e->from;
    if (++f->owed >= DLOG_ACK_COUNT) {
        send_ack(d, e);
        return;
    }
    if (f->queued)
        return;
    if (TB_ARRAY_ROOM(d->owe, d->nowe, d->capowe, 16)) {
        send_ack(d, e);
        return;
    }
    d->owe[d->nowe++] = e;
    f->queued = 1;
    if (!tb_timer_armed(&d->ack_timer))
        tb_timer_at(d->n->loop, &d->ack_timer, tb_now_ms() + DLOG_ACK_MS);
}

/* 1: take it now; 0: keep it for later; -1: had it. */
static int order(const tb_node_t *n, tbon_rank_t src, const struct dfrom *f, uint32_t flags,
                 uint32_t bseq, uint32_t num)
{
    if (flags & TB_DIRECT_BCAST) {
        if (bseq <= f->bgot)
            return -1;
        return bseq == f->bgot + 1 && f->got >= num;
    }
    if (num <= f->got)
        return -1;
    /* A process waits for none of its own broadcasts (it does not take
     * them); one that joined the running tree for no broadcast sent before
     * it had taken one from that sender. */
    int bwait = src == n->rank || (f->fresh && n->cfg.joined) ? 0 : bseq > f->bgot;
    return num == f->got + 1 && !bwait;
}

static void take(tb_dlog_t *d, struct dp *e, uint64_t seq, int32_t tag, uint32_t flags,
                 const uint8_t *body, size_t len)
{
    tb_node_t *n = d->n;
    struct dfrom *f = &e->from;
    if (flags & TB_DIRECT_BCAST) {
        f->bgot++;
        f->fresh = 0;
    } else {
        f->got++;
    }
    if (!n->cbs.direct)
        return;
    tbon_error_t err;
    tbon_packet_t *p = tb_packet_decode(body, len, tag, 0, e->rank, &err);
    if (!p) {
        TB_WARN("direct", "a message from rank %u (number %llu) cannot be read: %s; dropped",
                e->rank, (unsigned long long)seq, err.msg);
        return;
    }
    n->cbs.direct(n->cbs.arg, e->rank, p);
}

/* Whether the application's queue is full: then nothing more is taken
 * (and so acknowledged) until it drains (tb_dlog_resume). */
static int app_full(tb_dlog_t *d)
{
    tb_node_t *n = d->n;
    if (!n->cbs.direct_full || !n->cbs.direct_full(n->cbs.arg))
        return 0;
    d->withheld = 1;
    return 1;
}

/* Take what was kept from e and is next now, until nothing is. */
static void take_held(tb_dlog_t *d, struct dp *e)
{
    struct dfrom *f = &e->from;
    for (size_t i = 0; i < f->nheld;) {
        struct dheld h = f->held[i];
        int o = order(d->n, e->rank, f, h.flags, h.bseq, h.num);
        if (o == 0) {
            i++;
            continue;
        }
        if (o > 0 && app_full(d))
            return;
        f->held[i] = f->held[--f->nheld];
        if (o > 0)
            take(d, e, h.seq, h.tag, h.flags, h.body, h.len);
        free(h.body);
        i = 0;                  /* what it unblocked may be anywhere */
    }
}

static void hold(struct dfrom *f, const tb_ctl_direct_t *m, uint32_t num)
{
    for (size_t i = 0; i < f->nheld; i++)
        if (f->held[i].flags == m->flags && f->held[i].bseq == m->bseq && f->held[i].num == num)
            return;             /* kept already (sent again) */
    uint8_t *body = malloc(m->len ? m->len : 1);
    if (!body || TB_ARRAY_ROOM(f->held, f->nheld, f->capheld, 8)) {
        free(body);
        return;                 /* its sender sends it again */
    }
    memcpy(body, m->body, m->len);
    f->held[f->nheld++] = (struct dheld){ m->seq, m->tag, m->flags, m->bseq, num, body, m->len };
}

static void arrived(tb_node_t *n, const tb_ctl_direct_t *m, uint32_t mine)
{
    tb_dlog_t *d = dlog(n);
    if (!d)
        return;
    if (m->flags & TB_DIRECT_ACK) {
        on_ack(d, m);
        return;
    }
    struct dp *e = peer(d, m->src, 1);
    if (!e)
        return;                 /* no memory: its sender sends it again */
    struct dfrom *f = &e->from;
    if (f->nonce != m->nonce) {     /* the first from it, or it restarted */
        held_free(f);
        *f = (struct dfrom){ .nonce = m->nonce, .fresh = 1, .queued = f->queued };
    }
    uint32_t num = mine;
    if (m->flags & TB_DIRECT_BCAST) {
        num = 0;
        for (size_t i = 0; i < m->ndst; i++)
            if (m->dst[i] == n->rank)
                num = m->dseq[i];
        /* a process that joined the running tree takes a sender's
         * broadcasts from the first that reaches it */
        if (f->fresh && n->cfg.joined && f->bgot == 0)
            f->bgot = m->bseq - 1;
    }
    owe(d, e);
    int o = order(n, m->src, f, m->flags, m->bseq, num);
    if (o > 0 && !app_full(d)) {
        take(d, e, m->seq, m->tag, m->flags, m->body, m->len);
        if (f->nheld)
            take_held(d, e);
    } else if (o >= 0) {
        hold(f, m, num);
    }
}

void tb_dlog_resume(tb_node_t *n)
{
    tb_dlog_t *d = n->dlog;
    if (!d || !d->withheld)
        return;
    d->withheld = 0;
    for (size_t k = 0; k < d->nall && !d->withheld; k++) {
        struct dp *e = d->all[k];
        uint32_t got = e->from.got, bgot = e->from.bgot;
        if (e->from.nheld)
            take_held(d, e);
        if (e->from.got != got || e->from.bgot != bgot)
            owe(d, e);          /* their sender waits for this acknowledgement */
    }
}
