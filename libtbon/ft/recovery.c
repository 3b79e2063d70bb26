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

/* ---- the port table (docs/protocol.md 8.1) ---- */

/* The port table of our copy: where the FE and every commnode listen,
 * and the heartbeat timeout. */
static tbon_packet_t *ports_packet(const tb_node_t *n)
{
    size_t size = tb_topology_size(n->topo), k = 0;
    uint32_t *ranks = malloc((size ? size : 1) * sizeof *ranks);
    uint32_t *ports = malloc((size ? size : 1) * sizeof *ports);
    tbon_packet_t *p = NULL;
    if (ranks && ports) {
        for (tbon_rank_t r = 0; r < size; r++) {
            if (tb_topology_role(n->topo, r) == TB_ROLE_BE || !tb_topology_port(n->topo, r))
                continue;
            ranks[k] = r;
            ports[k++] = tb_topology_port(n->topo, r);
        }
        p = tb_ctl_ports_encode(&(tb_ctl_ports_t){ ranks, ports, k, n->cfg.heartbeat_ms });
    }
    free(ranks);
    free(ports);
    return p;
}

void tb_ft_send_ports(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    tbon_packet_t *p = ports_packet(n);
    for (size_t i = 0; p && i < n->nchild; i++)
        if (n->child[i].conn)
            tb_node_send_ctl(n, n->child[i].conn, TB_CTL_PORTS, tbon_packet_ref(p));
    tbon_packet_unref(p);
    ft->ft_ready = 1;
    tb_eds_set_ft_ready(ft->eds);
    tb_eds_set_heartbeat(ft->eds, n->cfg.heartbeat_ms);
}

void tb_ft_send_ports_to(tb_node_t *n, tb_conn_t *c)
{
    if (n->ftst->ft_ready)
        tb_node_send_ctl(n, c, TB_CTL_PORTS, ports_packet(n));
}

static void on_ports(tb_node_t *n, const tb_ctl_ports_t *m, tbon_packet_t *p)
{
    struct tb_ft *ft = n->ftst;
    int hb = m->heartbeat_ms, news = !ft->ft_ready || hb != n->cfg.heartbeat_ms;
    for (size_t i = 0; i < m->n; i++) {
        if (m->ranks[i] >= tb_topology_size(n->topo))
            continue;
        news |= tb_topology_port(n->topo, m->ranks[i]) != m->ports[i];
        tb_topology_set_port(n->topo, m->ranks[i], (uint16_t)m->ports[i]);
        tb_eds_report(ft->eds, TB_EDS_PORT, m->ranks[i], m->ports[i], 0);
    }
    if (!news)
        return;     /* again, from an adopter */
    for (size_t i = 0; i < n->nchild; i++)
        if (n->child[i].conn)
            tb_node_send_ctl(n, n->child[i].conn, TB_CTL_PORTS, tbon_packet_ref(p));
    TB_DEBUG("ft", "the port table of %zu ranks arrived: orphans get adopted from now", m->n);
    ft->ft_ready = 1;
    n->cfg.heartbeat_ms = hb;       /* for the port tables of joined children */
    tb_eds_set_ft_ready(ft->eds);
    tb_eds_set_heartbeat(ft->eds, hb);
    tb_view_notice_setup(n);
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

/* Send a report up, unless it came from there. Reports travel up only: the
 * FE puts every one that is news to it into the next view, which reaches
 * every process, back-ends included (ft/view.c). Before views, reports
 * were flooded down too, batched, to the commnodes only, and back-end copies
 * stayed stale. */
static void report_up(tb_node_t *n, tb_conn_t *from, tbon_packet_t *p, int kind, tbon_rank_t r,
                      uint32_t inc)
{
    struct tb_ft *ft = n->ftst;
    /* An orphan holds it for its adopter. */
    if (p && n->role != TB_ROLE_FE && (!n->parent || n->parent != from)) {
        if (n->parent)
            tb_node_send_ctl(n, n->parent, TB_CTL_REPORT, tbon_packet_ref(p));
        if (!ft->held.size)
            tb_ring_init(&ft->held, sizeof(struct held));
        if (ft->held.len == TB_HELD_MAX) {
            tbon_packet_unref(((struct held *)tb_ring_at(&ft->held, 0))->p);
            tb_ring_drop(&ft->held);
        }
        struct held *h = tb_ring_push(&ft->held);
        if (h)
            *h = (struct held){ kind, r, inc, tbon_packet_ref(p) };
    }
    tbon_packet_unref(p);
}

void tb_ft_confirm(tb_node_t *n, const tb_vchange_t *ch, size_t k)
{
    struct tb_ft *ft = n->ftst;
    if (!ft->held.len)
        return;
    tb_ring_t keep;
    tb_ring_init(&keep, sizeof(struct held));
    while (ft->held.len) {
        struct held h = *(struct held *)tb_ring_at(&ft->held, 0);
        tb_ring_drop(&ft->held);
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
    tb_ring_free(&ft->held);
    ft->held = keep;
}

/* A new parent: what the old one may not have passed on goes again. */
static void resend_held(tb_node_t *n)
{
    for (size_t i = 0; i < n->ftst->held.len; i++)
        tb_node_send_ctl(n, n->parent, TB_CTL_REPORT,
                         tbon_packet_ref(((struct held *)tb_ring_at(&n->ftst->held, i))->p));
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

int tb_ft_apply(tb_node_t *n, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    int dead = kind != TB_V_ADOPTED;        /* failed, or left: dead from now on */
    int news = dead ? tb_report_failure(n->topo, r, inc) : tb_report_adoption(n->topo, r, p, inc);
    if (news) {
        free(n->topo_frame);        /* new children must get the new topology */
        n->topo_frame = NULL;
        tb_eds_report(n->ftst->eds, dead ? TB_EDS_FAILED : TB_EDS_ADOPTED, r, p, inc);
        tb_view_note(n, kind, r, p, inc);
    }
    /* One truth: a child that the view has failed is fenced here too, or we
     * would go on counting its input and waiting for its acknowledgements
     * (an orphan that reached us, then stopped before its adoption was
     * reported, is declared failed by the FE while still our child). */
    int i = news && kind == TB_V_FAILED ? tb_node_child_index(n, r) : -1;
    if (i >= 0 && n->child[i].conn)
        tb_node_close_child(n, (size_t)i, "failed in the view");
    if (news && dead)
        tb_suspect_forget(n, r);
    if (news)
        tb_stream_settle(n);    /* FE: a wave may be lost now, or no longer */
    return news;
}

void tb_ft_failed(tb_node_t *n, tbon_rank_t r, uint32_t inc, const char *how)
{
    if (!tb_ft_apply(n, TB_V_FAILED, r, TBON_RANK_NONE, inc))
        return;
    TB_INFO("ft", "rank %u failed (%s)", r, how);
    tb_node_emit(n, TBON_EV_NODE_FAILED, r, TBON_RANK_NONE, inc, 0);
}

static void on_report(tb_node_t *n, tb_conn_t *from, const tb_ctl_report_t *m,
                      tbon_packet_t *p)
{
    int kind = m->kind;
    uint32_t r = m->rank, par = m->parent, inc = m->inc;
    const uint64_t *us = m->us;
    /* The kind was checked by the decoder; the ranks need the topology. */
    if (r >= tb_topology_size(n->topo) || r == 0 ||
        ((kind == TB_V_ADOPTED || kind == TB_V_JOINED) && par >= tb_topology_size(n->topo))) {
        TB_WARN("ft", "malformed report from rank %u ignored", from ? from->rank : 0);
        return;
    }
    if (kind == TB_V_JOINED || kind == TB_V_LEFT) {     /* ft/view.c */
        if (n->role == TB_ROLE_FE && kind == TB_V_JOINED)
            tb_view_fe_joined(n, r, par);
        else if (n->role == TB_ROLE_FE)
            tb_view_fe_left(n, r, inc);
        else {
            if (kind == TB_V_LEFT)
                tb_ft_apply(n, TB_V_LEFT, r, TBON_RANK_NONE, inc);
            report_up(n, from, tbon_packet_ref(p), kind, r, inc);
        }
        return;
    }
    if (tb_ft_apply(n, kind, r, par, inc)) {
        if (kind == TB_V_FAILED) {
            TB_INFO("ft", "rank %u failed", r);
            tb_node_emit(n, TBON_EV_NODE_FAILED, r, TBON_RANK_NONE, inc, 0);
            if (n->role == TB_ROLE_FE && !n->ftst->ft_ready && !tb_node_ending(n) &&
                tb_topology_role(n->topo, r) != TB_ROLE_BE) {
                tb_node_fault_end(n, r);
            }
        } else {
            if (n->role == TB_ROLE_FE)
                TB_INFO("recovery", "rank %u adopted by %u (incarnation %u): new_parent %llu us, "
                        "connect %llu us, compensate %llu us, cleanup %llu us", r, par, inc,
                        (unsigned long long)us[0], (unsigned long long)us[1],
                        (unsigned long long)us[2], (unsigned long long)us[3]);
            tb_node_emit(n, TBON_EV_NODE_ADOPTED, r, par, inc, 0);
            if (us[4])
                tb_node_emit(n, TBON_EV_DATA_LOST, r, par, inc, 0);
        }
        report_up(n, from, tbon_packet_ref(p), kind, r, inc);
    }
}

void tb_ft_report(tb_node_t *n, int kind, tbon_rank_t r, tbon_rank_t p, uint32_t inc)
{
    report_up(n, NULL, report(kind, r, p, inc, NULL), kind, r, inc);
}

/* A child's connection ended after start-up: report it everywhere. */
void tb_ft_child_lost(tb_node_t *n, size_t i)
{
    tbon_rank_t r = n->child[i].rank;
    uint32_t inc = tb_topology_incarnation(n->topo, r);
    if (!tb_ft_apply(n, TB_V_FAILED, r, TBON_RANK_NONE, inc))
        return;
    tb_node_emit(n, TBON_EV_NODE_FAILED, r, TBON_RANK_NONE, inc, 0);
    tb_view_notice(n, r, inc);
    report_up(n, NULL, report(TB_V_FAILED, r, TBON_RANK_NONE, inc, NULL), TB_V_FAILED, r, inc);
    if (n->role == TB_ROLE_FE && !n->ftst->ft_ready && !tb_node_ending(n) && !n->child[i].is_be)
        tb_node_fault_end(n, r);
}

/* ---- the orphan ---- */

int tb_ft_parent_lost(tb_node_t *n, tbon_rank_t lost)
{
    struct tb_ft *ft = n->ftst;
    /* Before the port table has come (the parent died right after the tree
     * came up, before passing it on), the nodes whose ports we know are
     * asked all the same: the FE's is known to all, and its adopter sends us
     * the table. Without fault tolerance (no table ever comes) they refuse,
     * and we leave as we would have. */
    if (ft->gave_up || (!ft->ft_ready && !ft->eds) || tb_node_ending(n) ||
        n->role == TB_ROLE_FE)
        return 0;
    if (!ft->orphan) {
        ft->orphan = 1;
        ft->orphan_since = tb_now_us();
        ft->lost_parent = lost;
        TB_WARN("ft", "lost the parent (rank %u); looking for an adopter", lost);
        uint32_t inc = tb_topology_incarnation(n->topo, lost);
        /* The FE hears of it directly from one of the orphans (the first
         * alive child in our copy): the lost parent's own parent may have
         * died with it. */
        size_t nk = 0;
        const tbon_rank_t *kids = tb_topology_children(n->topo, lost, &nk);
        size_t k = 0;
        while (k < nk && !tb_topology_alive(n->topo, kids[k]))
            k++;
        if (k < nk && kids[k] == n->rank)
            tb_view_notice(n, lost, inc);
        tb_ft_apply(n, TB_V_FAILED, lost, TBON_RANK_NONE, inc);
        tb_eds_request_adoption(ft->eds, lost);
    }
    return 1;
}

/* While orphaned, what would go up waits here (seed 003 V-B: the orphan keeps
 * reading and filtering its input and buffers its output). */
/* The most an orphan's output may hold while it waits (docs/user-guide.md,
 * "Memory"); past it, its output is dropped and the loss reported. */
#define TB_OBUF_MAX (64u << 20)

void tb_ft_buffer(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more, uint64_t key)
{
    struct tb_ft *ft = n->ftst;
    size_t len;
    tb_packet_payload(p, &len);
    if (ft->obytes + len + 64 > TB_OBUF_MAX) {
        if (!ft->odropped++)
            TB_WARN("ft", "orphaned: our output while we wait for an adopter is past %u MiB; "
                    "what follows is dropped (TBON_EV_DATA_LOST)", TB_OBUF_MAX >> 20);
        tbon_packet_unref(p);
        return;
    }
    if (!ft->obuf.size)
        tb_ring_init(&ft->obuf, sizeof(struct obuf_ent));
    struct obuf_ent *e = tb_ring_push(&ft->obuf);
    if (!e) {
        tbon_packet_unref(p);
        return;
    }
    ft->obytes += len + 64;
    *e = (struct obuf_ent){ stream, more, key, p };
}

/* The streams we take part in, for the new parent to graft us into. */

/* State composition after an adoption (seed 003 IV-C, V-B): each stream
 * is grafted to the new parent, then for each state-recoverable filter its
 * state goes up as ordinary input (an exact stream sends again what it
 * keeps, node_exact.c). 1 if something held for the lost parent is lost. */
static int compose_streams(tb_node_t *n)
{
    int lossy = 0;
    for (size_t id = 0; id < n->nstreams; id++) {
        tb_stream_st_t *s = n->streams[id];
        if (!s)
            continue;
        tb_stream_graft(n, s);
        const tb_filter_t *f = tb_filter_reg_get(n->filters, s->up);
        if (tb_ffault_hung_above(&s->ff)) {
            tb_plist_clear(&s->kept);
            lossy = 1;
            continue;
        }
        if (s->exact) {
            /* What we sent up and the FE does not have yet goes again, as
             * it was (node_exact.c); what waited in obuf is among it. */
            tb_exact_replay(n, s);
            continue;
        }
        if (f && f->get_state)
            tb_stream_fold_kept(n, s);      /* a back-end's last sends */
        if (f && f->get_state && s->up_state) {
            int crash = 0;
            tbon_error_t err;
            tbon_packet_t *st = tb_filter_get_state(f, &s->up_state, s->id, &crash, &err);
            /* it holds what the state was made of (a back-end's: the parent
             * takes it as the back-end's own) */
            if (st)
                tb_ranks_copy(tb_packet_cover_mut(st), tb_cover_state(s));
            if (st)      /* key 0: late everywhere, so it joins the next wave */
                tb_node_to_parent(n, s->id, st, 0, 0);
            else if (crash) {
                tb_stream_filter_fault(n, s->id, f, tb_filter_crash_signal(), 0, NULL, 0, err.msg);
                lossy = 1;
            }
        } else if (!f || !f->get_state) {
            lossy = 1;   /* what the lost parent held of our waves is gone */
        }
    }
    return lossy;
}

/* What went up while we were orphaned: on a stream whose filter can
 * compose state (idempotent, seed 003 IV-C) it goes up as it is; on any
 * other it belongs to waves the tree has closed without us, and would land
 * in later ones, so it is dropped and the loss reported (1). */
static int send_orphan_output(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    int lossy = 0;
    while (ft->obuf.len) {
        struct obuf_ent x = *(struct obuf_ent *)tb_ring_at(&ft->obuf, 0);
        tb_ring_drop(&ft->obuf);
        tb_stream_st_t *s = x.stream < n->nstreams ? n->streams[x.stream] : NULL;
        const tb_filter_t *f = s ? tb_filter_reg_get(n->filters, s->up) : NULL;
        int hung_s = s && tb_ffault_hung_above(&s->ff);
        if (s && s->exact && !hung_s) {
            tbon_packet_unref(x.pkt);       /* sent again above, from what we keep */
        } else if (f && f->get_state && !hung_s) {
            tb_node_to_parent(n, x.stream, x.pkt, x.more, x.key);
        } else {
            lossy = 1;
            tbon_packet_unref(x.pkt);
        }
    }
    ft->obytes = 0;
    if (ft->odropped) {
        lossy = 1;      /* what we could not keep is gone */
        ft->odropped = 0;
    }
    return lossy;
}

void tb_ft_adopted(tb_node_t *n, tb_cmd_t *c)
{
    struct tb_ft *ft = n->ftst;
    int64_t t0 = tb_now_us();
    tbon_rank_t parent = c->u.adopted.parent;
    tb_conn_t *conn = tb_conn_new(c->u.adopted.fd, parent, -1, TB_FRAME_MAX_DEFAULT);
    if (!conn)
        return;
    c->u.adopted.fd = -1;
    n->parent = conn;
    tb_node_watch_conn(n, conn);
    atomic_store(&n->parent_rank, parent);
    ft->orphan = 0;
    uint32_t inc = tb_topology_incarnation(n->topo, n->rank) + 1;
    /* A stream whose filter hung in the lost parent over what we sent
     * (eds_watch.c): nothing we hold of it goes to the adopter, whose
     * filter it would hang too. */
    uint32_t hung[8];
    size_t nhung = tb_eds_take_hung_streams(ft->eds, hung, 8);
    for (size_t i = 0; i < nhung; i++) {
        tb_stream_st_t *s = hung[i] < n->nstreams ? n->streams[hung[i]] : NULL;
        if (s)
            tb_ffault_set_hung_above(&s->ff, 1);
    }
    /* First the streams and their states, then what was buffered meanwhile. */
    int lossy = compose_streams(n);
    lossy |= send_orphan_output(n);
    for (size_t id = 0; id < n->nstreams; id++)
        if (n->streams[id])
            tb_ffault_set_hung_above(&n->streams[id]->ff, 0);
    int64_t t1 = tb_now_us();
    if (lossy)
        TB_INFO("ft", "adopted by rank %u: a stream's filter keeps no recoverable state; what "
                "the lost parent held of its waves is lost (TBON_EV_DATA_LOST)", parent);
    tb_ft_apply(n, TB_V_ADOPTED, n->rank, parent, inc);
    /* The lost parent's failure, up to where it may not be known yet (its own
     * parent may have died with it), and what it may not have passed on. */
    resend_held(n);
    uint32_t linc = tb_topology_incarnation(n->topo, ft->lost_parent);
    report_up(n, NULL, report(TB_V_FAILED, ft->lost_parent, TBON_RANK_NONE, linc, NULL),
              TB_V_FAILED, ft->lost_parent, linc);
    int64_t t2 = tb_now_us();
    uint64_t us[5] = { c->u.adopted.us[0], c->u.adopted.us[1], (uint64_t)(t1 - t0),
                       (uint64_t)(t2 - t1),
                       (uint64_t)lossy };
    /* The adoption report starts here (seed 003 V-A: "initiated by the
     * adopting and adopted processes"): up through the new parent to the FE,
     * whose next view carries it everywhere. */
    report_up(n, NULL, report(TB_V_ADOPTED, n->rank, parent, inc, us), TB_V_ADOPTED, n->rank, inc);
    tb_view_adopted(n);
    tb_attr_resync(n);
    TB_INFO("ft", "adopted by rank %u after %lld us", parent,
            (long long)(t2 - ft->orphan_since));
}

void tb_ft_adopt_failed(tb_node_t *n, tbon_rank_t lost)
{
    (void)lost;
    n->ftst->orphan = 0;
    n->ftst->gave_up = 1;
    n->ftst->ft_ready = 0;      /* leave as without fault tolerance */
}

/* ---- the adopter ---- */

/* Refuse (close) or take orphan o: a new child slot, the ACK, and the EDS
 * told to expect its event connection. */
void tb_ft_adopt_conn(tb_node_t *n, tb_cmd_t *c)
{
    struct tb_ft *ft = n->ftst;
    tbon_rank_t o = c->u.adopt_conn.rank;
    const char *why = NULL;
    if (!ft->ft_ready || ft->orphan || tb_node_ending(n) || tb_node_stopped(n))
        why = "not in a state to adopt";
    else if (o == n->rank || o == 0 || tb_adopt_would_cycle(n->topo, o, n->rank))
        why = "it would make a cycle";
    else if (!tb_topology_alive(n->topo, o))
        why = "it was reported failed (fenced): it may not come back";
    else if (tb_inc_gen(c->u.adopt_conn.inc) < tb_inc_gen(tb_topology_incarnation(n->topo, o)))
        why = "a stale incarnation: the rank was restarted since";
    else if (tb_node_child_index(n, o) >= 0 && n->child[tb_node_child_index(n, o)].conn)
        why = "it is already our child";
    if (why) {
        TB_INFO("ft", "refused to adopt rank %u: %s", o, why);
        return;                         /* the fd is closed with the command */
    }
    int i = tb_node_add_child(n, o, tb_topology_role(n->topo, o) == TB_ROLE_BE);
    if (i < 0)
        return;
    tb_conn_t *conn = tb_conn_new(c->u.adopt_conn.fd, o, i, TB_FRAME_MAX_DEFAULT);
    if (!conn)
        return;
    c->u.adopt_conn.fd = -1;
    n->child[i].conn = conn;
    n->child[i].state = CH_READY;
    tb_node_watch_conn(n, conn);
    tb_eds_expect(ft->eds, o);
    tb_node_send_ctl(n, conn, TB_CTL_ADOPT_ACK,
                     tb_ctl_adopt_ack_encode(&(tb_ctl_adopt_ack_t){ 1 }));
    /* The port table, which its lost parent may have died before passing
     * on (an orphan that has it takes it as nothing new). */
    tb_ft_send_ports_to(n, conn);
    /* Streams and filters its lost parent may have died before passing on
     * (protocol.md 8.3): a request on them would never reach it. */
    tb_stream_catch_up(n, (size_t)i);
    TB_INFO("ft", "adopted rank %u", o);
}

/* An adopted child's stream: take it in (creating the stream here if it
 * never reached us, and grafting it further up), from its next wave on. */
static void on_graft(tb_node_t *n, size_t child, const tb_ctl_graft_t *m, tbon_packet_t *p)
{
    const tb_ctl_stream_t *d = &m->def;
    /* A stream new here, or one none of our children took part in (a
     * commnode that joined the running tree knows the broadcast streams
     * without taking part), is grafted further up: we owe what the child
     * owes. */
    if (!tb_stream_known(n, d->id))
        tb_stream_create(n, d->id, d->up, d->sync, d->timeout_ms, d->down, d->members,
                         d->nmembers);
    if (tb_stream_join(n, d->id, child, m->sent_key, m->last_q) && n->role != TB_ROLE_FE &&
        n->parent)
        tb_node_send_ctl(n, n->parent, TB_CTL_GRAFT, tbon_packet_ref(p));
    tb_stream_settle(n);
}

/* Control messages of fault tolerance (TB_CTL_OWN_FT), from the parent
 * (child < 0) or a child, in the direction codec/ctl.h gives them: m is
 * decoded from p. */
void tb_ft_ctl(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    tb_conn_t *from = child < 0 ? n->parent : n->child[child].conn;
    switch (m->op) {
    case TB_CTL_PORTS:
        on_ports(n, &m->u.ports, p);
        break;
    case TB_CTL_REPORT:
        on_report(n, from, &m->u.report, p);
        break;
    case TB_CTL_GRAFT:
        on_graft(n, (size_t)child, &m->u.graft, p);
        break;
    default:
        break;
    }
}

void tb_ft_free(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    while (ft->held.len) {
        tbon_packet_unref(((struct held *)tb_ring_at(&ft->held, 0))->p);
        tb_ring_drop(&ft->held);
    }
    tb_ring_free(&ft->held);
    while (ft->obuf.len) {
        struct obuf_ent *e = tb_ring_at(&ft->obuf, 0);
        tbon_packet_unref(e->pkt);
        tb_ring_drop(&ft->obuf);
    }
    tb_ring_free(&ft->obuf);
}
