/* recovery.c - fault tolerance in the reactor (docs/fault-tolerance.md;
 * seed 003 IV-C and V): the port table every orphan needs, failure and
 * adoption reports sent up to the FE, the adopter's side of an
 * adoption, and the orphan's: buffering while it has no parent, then state
 * composition towards the new one. The search for an adopter runs on the EDS
 * thread (eds.c); the reactor only ever sees its outcome as a command. */
#include "ft/ft_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/log.h"
#include "codec/packet_int.h"
#include "topo/reconfig.h"
#include "net/sock.h"

struct obuf_ent {
    uint32_t stream;
    int more;
    uint64_t key;
    tbon_packet_t *pkt;
};

/* A report from this node itself (report_up's from), not from a peer. */
#define FROM_US (-2)

struct tb_recovery {
    tb_ft_ctx_t *cx;
    tb_view_t *view;
    tb_notice_t *notice;
    tb_suspect_t *suspect;
    tb_joins_t *joins;
    tb_attr_t *attr;
    int        orphan;        /* the parent is gone, an adopter is being sought */
    int        gave_up;       /* no node would adopt us: we leave */
    tbon_rank_t lost_parent;
    int64_t    orphan_since;  /* us */
    int64_t    say_at;        /* ms: when the orphan tells the FE it is still
                                 looking (0: said, or nothing to say) */
    tb_ring_t  obuf;          /* what went up while orphaned (struct obuf_ent) */
    size_t     obytes;
    size_t     odropped;      /* packets not buffered: past TB_OBUF_MAX */
    tb_ring_t  held;          /* reports sent up, not yet back in a view */
};

tb_recovery_t *tb_recovery_new(tb_ft_ctx_t *cx, tb_view_t *v, tb_notice_t *nt,
                               tb_suspect_t *sp, tb_joins_t *jn, tb_attr_t *at)
{
    tb_recovery_t *rc = calloc(1, sizeof *rc);
    if (!rc)
        return NULL;
    *rc = (tb_recovery_t){ .cx = cx, .view = v, .notice = nt, .suspect = sp, .joins = jn,
                           .attr = at };
    return rc;
}

/* ---- the port table (docs/protocol.md 8.1) ---- */

/* The port table of our copy: where the FE and every commnode listen,
 * and the heartbeat timeout. */
static tbon_packet_t *ports_packet(const tb_recovery_t *rc)
{
    const tb_topology_t *t = rc->cx->nd.topo;
    size_t size = tb_topology_size(t), k = 0;
    uint32_t *ranks = malloc((size ? size : 1) * sizeof *ranks);
    uint32_t *ports = malloc((size ? size : 1) * sizeof *ports);
    tbon_packet_t *p = NULL;
    if (ranks && ports) {
        for (tbon_rank_t r = 0; r < size; r++) {
            if (tb_topology_role(t, r) == TB_ROLE_BE || !tb_topology_port(t, r))
                continue;
            ranks[k] = r;
            ports[k++] = tb_topology_port(t, r);
        }
        p = tb_ctl_ports_encode(&(tb_ctl_ports_t){ ranks, ports, k, rc->cx->nd.heartbeat_ms });
    }
    free(ranks);
    free(ports);
    return p;
}

/* p (borrowed) to every child with a connection. */
static void to_children(const tb_recovery_t *rc, int op, tbon_packet_t *p)
{
    for (size_t i = 0, k = tb_ft_nchild(rc->cx); p && i < k; i++)
        if (tb_ft_has_conn(rc->cx, i))
            tb_ft_send(rc->cx, (int)i, op, tbon_packet_ref(p));
}

void tb_recovery_send_ports(tb_recovery_t *rc)
{
    tbon_packet_t *p = ports_packet(rc);
    to_children(rc, TB_CTL_PORTS, p);
    tbon_packet_unref(p);
    rc->cx->ready = 1;
    tb_eds_set_ft_ready(rc->cx->eds);
    tb_eds_set_heartbeat(rc->cx->eds, rc->cx->nd.heartbeat_ms);
}

void tb_recovery_send_ports_to(tb_recovery_t *rc, size_t i)
{
    if (rc->cx->ready)
        tb_ft_send(rc->cx, (int)i, TB_CTL_PORTS, ports_packet(rc));
}

static void on_ports(tb_recovery_t *rc, const tb_ctl_ports_t *m, tbon_packet_t *p)
{
    tb_ft_ctx_t *cx = rc->cx;
    int hb = m->heartbeat_ms, news = !cx->ready || hb != cx->nd.heartbeat_ms;
    for (size_t i = 0; i < m->n; i++) {
        if (m->ranks[i] >= tb_topology_size(cx->nd.topo))
            continue;
        news |= tb_topology_port(cx->nd.topo, m->ranks[i]) != m->ports[i];
        tb_topology_set_port(cx->nd.topo, m->ranks[i], (uint16_t)m->ports[i]);
    }
    if (!news)
        return;     /* again, from an adopter: the EDS has it too */
    for (size_t i = 0; i < m->n; i++)
        if (m->ranks[i] < tb_topology_size(cx->nd.topo))
            tb_eds_report(cx->eds, TB_EDS_PORT, m->ranks[i], m->ports[i], 0, 0);
    to_children(rc, TB_CTL_PORTS, p);
    TB_DEBUG("ft", "the port table of %zu ranks arrived: orphans get adopted from now", m->n);
    cx->ready = 1;
    cx->nd.heartbeat_ms = hb;       /* for the port tables of joined children */
    tb_eds_set_ft_ready(cx->eds);
    tb_eds_set_heartbeat(cx->eds, hb);
    tb_notice_setup(rc->notice);
}

/* ---- reports (seed 003 V-A, "Topology Updates") ---- */

/* A report sent up is kept until a view brings its fact back down: if the
 * parent dies before passing it on, it is sent again to the adopter (what
 * died with a forwarder is otherwise lost, and the FE would wait for an
 * orphan that in truth has a parent). */
struct held {
    int kind;
    tbon_rank_t r;
    uint32_t inc;
    tbon_packet_t *p;
};

#define TB_HELD_MAX 4096

/* Send a report up, unless it came from there (from: a child's slot,
 * TB_NFT_PARENT, or FROM_US). Reports travel up only: the FE puts every
 * one that is news to it into the next view, which reaches every process,
 * back-ends included (ft/view.c). Before views, reports were flooded down
 * too, batched, to the commnodes only, and back-end copies stayed stale. */
static void report_up(tb_recovery_t *rc, int from, tbon_packet_t *p, int kind, tbon_rank_t r,
                      uint32_t inc)
{
    /* An orphan holds it for its adopter. */
    if (p && !tb_ft_is_fe(rc->cx) && from != TB_NFT_PARENT) {
        tb_ft_send(rc->cx, TB_NFT_PARENT, TB_CTL_REPORT, tbon_packet_ref(p));
        if (!rc->held.size)
            tb_ring_init(&rc->held, sizeof(struct held));
        if (rc->held.len == TB_HELD_MAX) {
            tbon_packet_unref(((struct held *)tb_ring_at(&rc->held, 0))->p);
            tb_ring_drop(&rc->held);
        }
        struct held *h = tb_ring_push(&rc->held);
        if (h)
            *h = (struct held){ kind, r, inc, tbon_packet_ref(p) };
    }
    tbon_packet_unref(p);
}

size_t tb_recovery_held(const tb_recovery_t *rc)
{
    return rc->held.len;
}

void tb_recovery_confirm(tb_recovery_t *rc, const tb_vchange_t *ch, size_t k)
{
    if (!rc->held.len)
        return;
    tb_ring_t keep;
    tb_ring_init(&keep, sizeof(struct held));
    while (rc->held.len) {
        struct held h = *(struct held *)tb_ring_at(&rc->held, 0);
        tb_ring_drop(&rc->held);
        int covered = 0;
        for (size_t i = 0; i < k && !covered; i++)
            covered = ch[i].rank == h.r &&
                      (ch[i].kind == TB_V_FAILED || ch[i].kind == TB_V_LEFT ||
                       (h.kind == TB_V_JOINED && ch[i].kind == TB_V_JOINED) ||
                       (h.kind == TB_V_ADOPTED && ch[i].kind == TB_V_ADOPTED && h.inc <= ch[i].inc));
        struct held *x = covered ? NULL : tb_ring_push(&keep);
        if (x)
            *x = h;
        else
            tbon_packet_unref(h.p);
    }
    tb_ring_free(&rc->held);
    rc->held = keep;
}

/* A new parent: what the old one may not have passed on goes again. */
static void resend_held(tb_recovery_t *rc)
{
    for (size_t i = 0; i < rc->held.len; i++)
        tb_ft_send(rc->cx, TB_NFT_PARENT, TB_CTL_REPORT,
                   tbon_packet_ref(((struct held *)tb_ring_at(&rc->held, i))->p));
}

/* us: the four recovery times, then 1 if a stream may have lost data. */
static tbon_packet_t *report(int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc,
                             const uint64_t us[5])
{
    tb_ctl_report_t m = { kind, r, p, inc, { 0, 0, 0, 0, 0 } };
    if (us)
        memcpy(m.us, us, sizeof m.us);
    return tb_ctl_report_encode(&m);
}

int tb_recovery_apply(tb_recovery_t *rc, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    const tb_nft_t *nd = &rc->cx->nd;
    int dead = kind != TB_V_ADOPTED;        /* failed, or left: dead from now on */
    /* The EDS is woken for the failure of a rank it may hold an event
     * connection with (our parent, a child), which it fences now; for any
     * other the report waits for its next need of its copy. Woken for
     * every failure, every node's EDS thread ran once per failure in the
     * tree: at fan-out 32, 16 adopters' switches more per recovery than
     * 93e5160 (bench/RESULTS.md). */
    int near = dead && (tb_topology_parent(nd->topo, r) == nd->rank ||
                        tb_topology_parent(nd->topo, nd->rank) == r);
    int news = dead ? tb_report_failure(nd->topo, r, inc)
                    : tb_report_adoption(nd->topo, r, p, inc);
    if (!news)
        return 0;
    nd->ops->topo_changed(nd->n);
    tb_eds_report(rc->cx->eds, dead ? TB_EDS_FAILED : TB_EDS_ADOPTED, r, p, inc, near);
    tb_view_note(rc->view, kind, r, p, inc);
    /* One truth: a child that the view has failed is fenced here too, or we
     * would go on counting its input and waiting for its acknowledgements
     * (an orphan that reached us, then stopped before its adoption was
     * reported, is declared failed by the FE while still our child). */
    int i = kind == TB_V_FAILED ? nd->ops->child_index(nd->n, r) : -1;
    if (i >= 0 && tb_ft_has_conn(rc->cx, (size_t)i))
        nd->ops->child_close(nd->n, (size_t)i, "failed in the view");
    if (dead)
        tb_suspect_forget(rc->suspect, r);
    nd->ops->settle(nd->n);     /* FE: a wave may be lost now, or no longer */
    return 1;
}

/* r failed (news): the application hears of it. */
static void announce_failed(tb_recovery_t *rc, tbon_rank_t r, uint32_t inc)
{
    tb_ft_emit(rc->cx, TBON_EV_NODE_FAILED, r, TBON_RANK_NONE, inc, 0);
}

void tb_recovery_failed(tb_recovery_t *rc, tbon_rank_t r, uint32_t inc, const char *how)
{
    if (!tb_recovery_apply(rc, TB_V_FAILED, r, TBON_RANK_NONE, inc))
        return;
    TB_INFO("ft", "rank %u failed (%s)", r, how);
    announce_failed(rc, r, inc);
}

/* FE before the port table: a commnode's failure ends the session. */
static void maybe_fault_end(tb_recovery_t *rc, tbon_rank_t r, int is_be)
{
    tb_ft_ctx_t *cx = rc->cx;
    if (tb_ft_is_fe(cx) && !cx->ready && !tb_ft_ending(cx) && !is_be)
        cx->nd.ops->fault_end(cx->nd.n, r);
}

/* A report of kind TB_V_JOINED or TB_V_LEFT. */
static void on_member_report(tb_recovery_t *rc, int from, const tb_ctl_report_t *m,
                             tbon_packet_t *p)
{
    if (tb_ft_is_fe(rc->cx) && m->kind == TB_V_JOINED)
        tb_joins_fe_joined(rc->joins, m->rank, m->parent);
    else if (tb_ft_is_fe(rc->cx))
        tb_joins_fe_left(rc->joins, m->rank, m->inc);
    else {
        if (m->kind == TB_V_LEFT)
            tb_recovery_apply(rc, TB_V_LEFT, m->rank, TBON_RANK_NONE, m->inc);
        report_up(rc, from, tbon_packet_ref(p), m->kind, m->rank, m->inc);
    }
}

static void on_report(tb_recovery_t *rc, int from, const tb_ctl_report_t *m, tbon_packet_t *p)
{
    const tb_nft_t *nd = &rc->cx->nd;
    int kind = m->kind;
    uint32_t r = m->rank, par = m->parent, inc = m->inc;
    const uint64_t *us = m->us;
    size_t size = tb_topology_size(nd->topo);
    /* The kind was checked by the decoder; the ranks need the topology. */
    if (r >= size || r == 0 || ((kind == TB_V_ADOPTED || kind == TB_V_JOINED) && par >= size)) {
        TB_WARN("ft", "malformed report from rank %u ignored",
                from == TB_NFT_PARENT ? nd->ops->parent_rank(nd->n)
                                      : nd->ops->child_rank(nd->n, (size_t)from));
        return;
    }
    if (kind == TB_V_JOINED || kind == TB_V_LEFT) {     /* ft/join.c */
        on_member_report(rc, from, m, p);
        return;
    }
    if (!tb_recovery_apply(rc, kind, r, par, inc))
        return;
    if (kind == TB_V_FAILED) {
        TB_INFO("ft", "rank %u failed", r);
        announce_failed(rc, r, inc);
        maybe_fault_end(rc, r, tb_topology_role(nd->topo, r) == TB_ROLE_BE);
    } else {
        if (tb_ft_is_fe(rc->cx))
            TB_INFO("recovery", "rank %u adopted by %u (incarnation %u): new_parent %llu us, "
                    "connect %llu us, compensate %llu us, cleanup %llu us", r, par, inc,
                    (unsigned long long)us[0], (unsigned long long)us[1],
                    (unsigned long long)us[2], (unsigned long long)us[3]);
        tb_ft_emit(rc->cx, TBON_EV_NODE_ADOPTED, r, par, inc, 0);
        if (us[4])
            tb_ft_emit(rc->cx, TBON_EV_DATA_LOST, r, par, inc, 0);
    }
    report_up(rc, from, tbon_packet_ref(p), kind, r, inc);
}

void tb_recovery_report(tb_recovery_t *rc, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    report_up(rc, FROM_US, report(kind, r, p, inc, NULL), kind, r, inc);
}

void tb_recovery_child_lost(tb_recovery_t *rc, size_t i)
{
    const tb_nft_t *nd = &rc->cx->nd;
    tbon_rank_t r = nd->ops->child_rank(nd->n, i);
    uint32_t inc = tb_topology_incarnation(nd->topo, r);
    /* Alive, but not our child in the topology: an orphan we took that
     * never said so (stopped before it read our ACK, it gave up on us and
     * asked the next candidate), or one that has another parent since. Its
     * process may well live on there; what broke is only our stale link to
     * it, and a failure reported now would fence a healthy process. */
    tbon_rank_t p = tb_topology_parent(nd->topo, r);
    if (tb_topology_alive(nd->topo, r) && p != nd->rank) {
        char where[32] = "none";
        if (p != TBON_RANK_NONE)
            snprintf(where, sizeof where, "rank %u", p);
        TB_WARN("ft", "the connection of rank %u closed, but the topology does not have it as "
                "our child (its parent: %s): no failure reported", r, where);
        return;
    }
    if (!tb_recovery_apply(rc, TB_V_FAILED, r, TBON_RANK_NONE, inc))
        return;
    announce_failed(rc, r, inc);
    tb_notice_failed(rc->notice, r, inc);
    tb_recovery_report(rc, TB_V_FAILED, r, TBON_RANK_NONE, inc);
    maybe_fault_end(rc, r, (nd->ops->child_flags(nd->n, i) & TB_NFT_BE) != 0);
}

/* ---- the orphan ---- */

int tb_recovery_orphan(const tb_recovery_t *rc)
{
    return rc->orphan;
}

int tb_recovery_parent_lost(tb_recovery_t *rc, tbon_rank_t lost)
{
    tb_ft_ctx_t *cx = rc->cx;
    const tb_topology_t *t = cx->nd.topo;
    /* Before the port table has come (the parent died right after the tree
     * came up, before passing it on), the nodes whose ports we know are
     * asked all the same: the FE's is known to all, and its adopter sends us
     * the table. Without fault tolerance (no table ever comes) they refuse,
     * and we leave as we would have. The front-end cannot be replaced:
     * its end (not its fencing of us, which it says first) is the
     * session's, and we leave at once, our children told to
     * (TB_CTL_SHUTDOWN), where asking for an adopter only heard its port
     * refuse, round after round, on every level. Not known yet (the EDS
     * has not read the end): the EDS answers the request at once. */
    if (rc->gave_up || (!cx->ready && !cx->eds) || tb_ft_ending(cx) || tb_ft_is_fe(cx) ||
        (lost == 0 && tb_eds_fe_gone(cx->eds)))
        return 0;
    if (rc->orphan)
        return 1;
    rc->orphan = 1;
    rc->orphan_since = tb_now_us();
    rc->lost_parent = lost;
    /* The FE: most likely gone, the EDS tells at once (said then): the
     * session ends, or the tree waits for a new FE (ft/eds_fe.c), or only
     * the data link broke and the FE takes us back. It is never failed in
     * our copy: nobody but it could say so. */
    if (lost == 0) {
        TB_INFO("ft", "lost the front-end's connections: asking it again");
        tb_eds_request_adoption(cx->eds, lost, tb_topology_incarnation(t, cx->nd.rank));
        return 1;
    }
    TB_WARN("ft", "lost the parent (rank %u); looking for an adopter", lost);
    uint32_t inc = tb_topology_incarnation(t, lost);
    /* The FE hears of it directly from one of the orphans (the first alive
     * child in our copy): the lost parent's own parent may have died with
     * it. Every other orphan not adopted within a quarter of the FE's
     * deadline unit sends the same (tb_recovery_timers): it tells the FE
     * that it is alive and still looking for an adopter, and the FE gives
     * it longer (view.c, TB_VIEW_ORPHAN_HEARD). Sent by every orphan at
     * once, the datagrams made recoveries at fan-out 64 about 5% slower. */
    size_t nk = 0;
    const tbon_rank_t *kids = tb_topology_children(t, lost, &nk);
    size_t k = 0;
    while (k < nk && !tb_topology_alive(t, kids[k]))
        k++;
    rc->say_at = 0;
    if (k < nk && kids[k] == cx->nd.rank)
        tb_notice_failed(rc->notice, lost, inc);
    else
        rc->say_at = tb_now_ms() + tb_orphan_unit_ms(cx->nd.heartbeat_ms) / 4;
    tb_recovery_apply(rc, TB_V_FAILED, lost, TBON_RANK_NONE, inc);
    tb_eds_request_adoption(cx->eds, lost, tb_topology_incarnation(t, cx->nd.rank));
    return 1;
}

int tb_recovery_timers(tb_recovery_t *rc, int64_t now)
{
    if (!rc->orphan || !rc->say_at || now < rc->say_at || tb_ft_ending(rc->cx))
        return 0;
    rc->say_at = 0;
    const tb_topology_t *t = rc->cx->nd.topo;
    TB_INFO("ft", "not adopted yet: telling the front-end that we are still looking");
    tb_notice_failed(rc->notice, rc->lost_parent, tb_topology_incarnation(t, rc->lost_parent));
    return 1;
}

void tb_recovery_next(const tb_recovery_t *rc, int64_t *next)
{
    if (rc->orphan && rc->say_at && rc->say_at < *next)
        *next = rc->say_at;
}

/* While orphaned, what would go up waits here (seed 003 V-B: the orphan keeps
 * reading and filtering its input and buffers its output). */
/* The most an orphan's output may hold while it waits (docs/user-guide.md,
 * "Memory"); past it, its output is dropped and the loss reported. */
#define TB_OBUF_MAX (64u << 20)

void tb_recovery_buffer(tb_recovery_t *rc, uint32_t stream, tbon_packet_t *p, int more,
                        uint64_t key)
{
    size_t len;
    tb_packet_payload(p, &len);
    if (rc->obytes + len + 64 > TB_OBUF_MAX) {
        if (!rc->odropped++)
            TB_WARN("ft", "orphaned: our output while we wait for an adopter is past %u MiB; "
                    "what follows is dropped (TBON_EV_DATA_LOST)", TB_OBUF_MAX >> 20);
        tbon_packet_unref(p);
        return;
    }
    if (!rc->obuf.size)
        tb_ring_init(&rc->obuf, sizeof(struct obuf_ent));
    struct obuf_ent *e = tb_ring_push(&rc->obuf);
    if (!e) {
        tbon_packet_unref(p);
        return;
    }
    rc->obytes += len + 64;
    *e = (struct obuf_ent){ stream, more, key, p };
}

void tb_recovery_buffered(const tb_recovery_t *rc, size_t *npkt, size_t *bytes,
                          size_t *dropped)
{
    *npkt = rc->obuf.len;
    *bytes = rc->obytes;
    *dropped = rc->odropped;
}

/* What went up while we were orphaned goes to the new parent where it
 * still can (tb_nft_ops_t.adopt_resend); 1 if some of it is lost. */
static int send_orphan_output(tb_recovery_t *rc)
{
    const tb_nft_t *nd = &rc->cx->nd;
    int lossy = 0;
    while (rc->obuf.len) {
        struct obuf_ent x = *(struct obuf_ent *)tb_ring_at(&rc->obuf, 0);
        tb_ring_drop(&rc->obuf);
        lossy |= nd->ops->adopt_resend(nd->n, x.stream, x.pkt, x.more, x.key);
    }
    rc->obytes = 0;
    if (rc->odropped) {
        lossy = 1;      /* what we could not keep is gone */
        rc->odropped = 0;
    }
    return lossy;
}

void tb_recovery_adopted(tb_recovery_t *rc, tb_cmd_t *c)
{
    tb_ft_ctx_t *cx = rc->cx;
    const tb_nft_t *nd = &cx->nd;
    int64_t t0 = tb_now_us();
    tbon_rank_t parent = c->u.adopted.parent;
    if (nd->ops->parent_set(nd->n, parent, c->u.adopted.fd) < 0)
        return;
    c->u.adopted.fd = -1;
    rc->orphan = 0;
    uint32_t inc = tb_topology_incarnation(nd->topo, nd->rank) + 1;
    /* A stream whose filter hung in the lost parent over what we sent
     * (eds_watch.c): nothing we hold of it goes to the adopter, whose
     * filter it would hang too. First the streams and their states, then
     * what was buffered meanwhile. */
    uint32_t hung[8];
    size_t nhung = tb_eds_take_hung_streams(cx->eds, hung, 8);
    int lossy = nd->ops->adopt_streams(nd->n, hung, nhung);
    /* What the lost parent may have died before passing on, the adopter
     * sends on this (protocol.md 8.3): after the grafts, it knows which
     * streams we have. */
    tb_ctl_catch_up_t cu = { nd->ops->filters_loaded(nd->n), cx->ready ? 1 : 0 };
    tb_ft_send(cx, TB_NFT_PARENT, TB_CTL_CATCH_UP, tb_ctl_catch_up_encode(&cu));
    lossy |= send_orphan_output(rc);
    nd->ops->adopt_done(nd->n);
    int64_t t1 = tb_now_us();
    if (lossy)
        TB_INFO("ft", "adopted by rank %u: a stream's filter keeps no recoverable state; what "
                "the lost parent held of its waves is lost (TBON_EV_DATA_LOST)", parent);
    tb_recovery_apply(rc, TB_V_ADOPTED, nd->rank, parent, inc);
    /* The lost parent's failure, up to where it may not be known yet (its own
     * parent may have died with it), and what it may not have passed on. */
    resend_held(rc);
    uint32_t linc = tb_topology_incarnation(nd->topo, rc->lost_parent);
    if (rc->lost_parent != 0)       /* the FE again, or a new one: no failure */
        tb_recovery_report(rc, TB_V_FAILED, rc->lost_parent, TBON_RANK_NONE, linc);
    int64_t t2 = tb_now_us();
    uint64_t us[5] = { c->u.adopted.us[0], c->u.adopted.us[1], (uint64_t)(t1 - t0),
                       (uint64_t)(t2 - t1), (uint64_t)lossy };
    /* The adoption report starts here (seed 003 V-A: "initiated by the
     * adopting and adopted processes"): up through the new parent to the FE,
     * whose next view carries it everywhere. */
    report_up(rc, FROM_US, report(TB_V_ADOPTED, nd->rank, parent, inc, us), TB_V_ADOPTED,
              nd->rank, inc);
    tb_view_adopted(rc->view);
    tb_attr_resync(rc->attr);
    TB_INFO("ft", "adopted by rank %u after %lld us", parent,
            (long long)(t2 - rc->orphan_since));
}

void tb_recovery_adopt_failed(tb_recovery_t *rc)
{
    rc->orphan = 0;
    rc->gave_up = 1;
    rc->cx->ready = 0;      /* leave as without fault tolerance */
}

/* ---- the adopter ---- */

/* Why we do not adopt orphan o (incarnation inc), or NULL. */
static const char *no_adoption(const tb_recovery_t *rc, tbon_rank_t o, uint32_t inc)
{
    const tb_nft_t *nd = &rc->cx->nd;
    int i;
    if (!rc->cx->ready || rc->orphan || tb_ft_ending(rc->cx))
        return "not in a state to adopt";
    if (o == nd->rank || o == 0 || tb_adopt_would_cycle(nd->topo, o, nd->rank))
        return "it would make a cycle";
    if (!tb_topology_alive(nd->topo, o))
        return "it was reported failed (fenced): it may not come back";
    if (tb_inc_gen(inc) < tb_inc_gen(tb_topology_incarnation(nd->topo, o)))
        return "a stale incarnation: the rank was restarted since";
    if ((i = nd->ops->child_index(nd->n, o)) >= 0 && tb_ft_has_conn(rc->cx, (size_t)i))
        return "it is already our child";
    return NULL;
}

/* Refuse (close) or take orphan o: a new child slot, the ACK, and the EDS
 * told to expect its event connection. */
void tb_recovery_adopt_conn(tb_recovery_t *rc, tb_cmd_t *c)
{
    const tb_nft_t *nd = &rc->cx->nd;
    tbon_rank_t o = c->u.adopt_conn.rank;
    const char *why = no_adoption(rc, o, c->u.adopt_conn.inc);
    if (why) {
        TB_INFO("ft", "refused to adopt rank %u: %s", o, why);
        return;                         /* the fd is closed with the command */
    }
    int i = nd->ops->child_adopt(nd->n, o, tb_topology_role(nd->topo, o) == TB_ROLE_BE,
                                 c->u.adopt_conn.fd);
    if (i < 0)
        return;
    c->u.adopt_conn.fd = -1;
    tb_eds_expect(rc->cx->eds, o);
    tb_ft_send(rc->cx, i, TB_CTL_ADOPT_ACK, tb_ctl_adopt_ack_encode(&(tb_ctl_adopt_ack_t){ 1 }));
    /* A new FE (reattached) listens elsewhere than the one the tree knew:
     * its children pass the table on where it is news. */
    if (tb_ft_is_fe(rc->cx))
        tb_recovery_send_ports_to(rc, (size_t)i);
    TB_INFO("ft", "adopted rank %u", o);
}

/* Adopted child i says what it has (after its grafts): the port table, the
 * filters and the streams its lost parent may have died before passing on
 * (protocol.md 8.3) go to it now; a request on such a stream would never
 * reach it. Most orphans lack nothing, and get nothing. */
static void on_catch_up(tb_recovery_t *rc, int child, const tb_ctl_catch_up_t *m)
{
    const tb_nft_t *nd = &rc->cx->nd;
    if (child == TB_NFT_PARENT)
        return;
    if (!m->ports)
        tb_recovery_send_ports_to(rc, (size_t)child);
    nd->ops->catch_up(nd->n, (size_t)child, m->filters);
}

/* Control messages of fault tolerance (TB_CTL_OWN_FT), from the parent
 * (child TB_NFT_PARENT) or a child, in the direction codec/ctl.h gives
 * them: m is decoded from p. */
void tb_recovery_ctl(tb_recovery_t *rc, int child, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    const tb_nft_t *nd = &rc->cx->nd;
    switch (m->op) {
    case TB_CTL_PORTS:
        on_ports(rc, &m->u.ports, p);
        break;
    case TB_CTL_REPORT:
        on_report(rc, child, &m->u.report, p);
        break;
    case TB_CTL_GRAFT:
        /* an adopted child's stream, taken in from its next wave on */
        nd->ops->graft(nd->n, (size_t)child, &m->u.graft, p);
        break;
    case TB_CTL_CATCH_UP:
        on_catch_up(rc, child, &m->u.catch_up);
        break;
    default:
        break;
    }
}

void tb_recovery_destroy(tb_recovery_t *rc)
{
    if (!rc)
        return;
    while (rc->held.len) {
        tbon_packet_unref(((struct held *)tb_ring_at(&rc->held, 0))->p);
        tb_ring_drop(&rc->held);
    }
    tb_ring_free(&rc->held);
    while (rc->obuf.len) {
        struct obuf_ent *e = tb_ring_at(&rc->obuf, 0);
        tbon_packet_unref(e->pkt);
        tb_ring_drop(&rc->obuf);
    }
    tb_ring_free(&rc->obuf);
    free(rc);
}
