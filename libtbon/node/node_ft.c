/* node_ft.c - the node as the fault-tolerance layer reaches it (node_ft.h,
 * tb_nft_ops_t): its children by slot, its parent, control messages and
 * events, and its streams' part in an adoption (grafting each stream to the
 * new parent and composing its state up, seed 003 IV-C and V-B). ft holds
 * these as function pointers; the node calls ft only through tb_ft_ops_t. */
#include "node/node_int.h"

#include <stdlib.h>
#include <sys/epoll.h>

#include "codec/packet_int.h"
#include "util/log.h"

TB_HOT static int nft_life(const tb_node_t *n)
{
    enum tb_life l = tb_node_life(n);
    return l == TB_LIFE_STARTING ? TB_NFT_STARTING
           : l == TB_LIFE_RUNNING ? TB_NFT_RUNNING : TB_NFT_ENDING;
}

static size_t nft_nchild(const tb_node_t *n)
{
    return n->nchild;
}

static tbon_rank_t nft_child_rank(const tb_node_t *n, size_t i)
{
    return n->child[i].rank;
}

static int conn_flags(const tb_conn_t *c)
{
    return c ? TB_NFT_CONN | (c->closed ? 0 : TB_NFT_OPEN) : 0;
}

static int nft_child_flags(const tb_node_t *n, size_t i)
{
    return conn_flags(n->child[i].conn) | (n->child[i].is_be ? TB_NFT_BE : 0);
}

static int nft_child_index(const tb_node_t *n, tbon_rank_t r)
{
    return tb_node_child_index(n, r);
}

static int nft_child_rejoin(tb_node_t *n, tbon_rank_t r, int is_be)
{
    int i = tb_node_child_index(n, r);
    if (i < 0)
        i = tb_node_add_child(n, r, is_be);
    if (i < 0)
        return i;
    tb_child_t *ch = &n->child[i];
    ch->state = CH_LAUNCHED;
    ch->leaving = 0;
    ch->suspect = 0;
    ch->ev_lost = 0;    /* the old process's end: its link may relink */
    return i;
}

static int nft_child_adopt(tb_node_t *n, tbon_rank_t r, int is_be, int fd)
{
    int i = tb_node_add_child(n, r, is_be);
    if (i < 0)
        return i;
    tb_conn_t *conn = tb_node_conn_new(n, fd, r, i);
    if (!conn)
        return TBON_ENOMEM;
    n->child[i].conn = conn;
    n->child[i].state = CH_READY;
    tb_node_watch_conn(n, conn);
    if (n->role == TB_ROLE_FE)
        tb_node_session_changed(n);     /* a child more */
    return i;
}

static void nft_child_close(tb_node_t *n, size_t i, const char *why)
{
    tb_node_close_child(n, i, why);
}

static void nft_child_absent(tb_node_t *n, size_t i)
{
    n->child[i].state = CH_GONE;
    tb_stream_child_gone(n, i);
    tb_perf_child_gone(n, i);
}

static int nft_child_suspect(tb_node_t *n, size_t i, int on)
{
    tb_child_t *ch = &n->child[i];
    if (!ch->conn || ch->suspect == on)
        return 0;
    ch->suspect = on;
    if (on)
        tb_stream_child_suspect(n, i);
    return 1;
}

static int nft_parent_flags(const tb_node_t *n)
{
    return conn_flags(n->parent);
}

static tbon_rank_t nft_parent_rank(const tb_node_t *n)
{
    return n->parent ? n->parent->rank : TBON_RANK_NONE;
}

static int nft_parent_set(tb_node_t *n, tbon_rank_t r, int fd)
{
    tb_conn_t *conn = tb_node_conn_new(n, fd, r, -1);
    if (!conn)
        return TBON_ENOMEM;
    n->parent = conn;
    tb_node_watch_conn(n, conn);
    atomic_store(&n->parent_rank, r);
    tb_dlog_topo(n);            /* what went to the lost parent goes again */
    return 0;
}

static void nft_send_ctl(tb_node_t *n, int to, int op, tbon_packet_t *p)
{
    tb_node_send_ctl(n, to == TB_NFT_PARENT ? n->parent : n->child[to].conn, op, p);
}

static void nft_topo_changed(tb_node_t *n)
{
    free(n->topo_frame);        /* new children must get the new topology */
    n->topo_frame = NULL;
    tb_dlog_topo(n);            /* messages not yet taken go by the new routes */
}

static void nft_graft(tb_node_t *n, size_t child, const tb_ctl_graft_t *m, tbon_packet_t *p)
{
    const tb_ctl_stream_t *d = &m->def;
    /* A stream new here, or one none of our children took part in (a
     * commnode that joined the running tree knows the broadcast streams
     * without taking part), is grafted further up: we owe what the child
     * owes. */
    if (!tb_stream_known(n, d->id)) {
        tb_stream_create(n, d->id, d->up, d->sync, d->timeout_ms, d->down, d->members,
                         d->nmembers);
        /* At a new FE (reattached), the application gets the stream too. */
        if (n->role == TB_ROLE_FE && n->cbs.stream_found && tb_stream_known(n, d->id))
            n->cbs.stream_found(n->cbs.arg, d->id);
    }
    tb_stream_st_t *fs = n->role == TB_ROLE_FE ? tb_stream_get(n, d->id) : NULL;
    if (fs && m->last_q > fs->down_q) {
        /* Its requests go on from the last one the tree has seen, and the
         * waves up to it are the old FE's, closed: what comes for them (a
         * filter's composed state, seed 003 IV-C) joins the next wave. */
        fs->down_q = m->last_q;
        if (m->last_q > fs->last_q)
            fs->last_q = m->last_q;
        if (!fs->has_closed || fs->closed < m->last_q) {
            fs->has_closed = 1;
            fs->closed = m->last_q;
        }
    }
    if (tb_stream_join(n, d->id, child, m->sent_key, m->last_q) && n->role != TB_ROLE_FE &&
        n->parent)
        tb_node_send_ctl(n, n->parent, TB_CTL_GRAFT, tbon_packet_ref(p));
    tb_stream_settle(n);
}

/* One stream's state after an adoption: 1 if something held for the lost
 * parent is lost. */
static int compose_stream(tb_node_t *n, tb_stream_st_t *s)
{
    tb_stream_graft(n, s);
    const tb_filter_t *f = tb_filter_reg_get(n->filters, s->up);
    if (tb_ffault_hung_above(&s->ff)) {
        tb_plist_clear(&s->kept);
        return 1;
    }
    if (s->exact) {
        /* What we sent up and the FE does not have yet goes again, as it
         * was (node_exact.c); what waited while orphaned is among it. */
        tb_exact_replay(n, s);
        return 0;
    }
    if (!f || !f->get_state)
        return 1;       /* what the lost parent held of our waves is gone */
    tb_stream_fold_kept(n, s);      /* a back-end's last sends */
    if (!s->up_state)
        return 0;
    int crash = 0;
    tbon_error_t err;
    tbon_packet_t *st = tb_filter_get_state(f, &s->up_state, s->id, &crash, &err);
    if (st) {
        /* it holds what the state was made of (a back-end's: the parent
         * takes it as the back-end's own); key 0: late everywhere, so it
         * joins the next wave */
        tb_ranks_copy(tb_packet_cover_mut(st), tb_cover_state(s));
        tb_node_to_parent(n, s->id, st, 0, 0);
    } else if (crash) {
        tb_stream_filter_fault(n, s->id, f, tb_filter_crash_signal(), 0, NULL, 0, err.msg);
        return 1;
    }
    return 0;
}

/* State composition after an adoption (seed 003 IV-C, V-B): each stream
 * is grafted to the new parent, then for each state-recoverable filter its
 * state goes up as ordinary input (an exact stream sends again what it
 * keeps, node_exact.c). */
static int nft_adopt_streams(tb_node_t *n, const uint32_t *hung, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        tb_stream_st_t *s = tb_stream_get(n, hung[i]);
        if (s)
            tb_ffault_set_hung_above(&s->ff, 1);
    }
    int lossy = 0;
    for (size_t id = 0; id < n->nstreams; id++)
        if (n->streams[id])
            lossy |= compose_stream(n, n->streams[id]);
    return lossy;
}

/* What went up while orphaned: on a stream whose filter can compose state
 * (idempotent, seed 003 IV-C) it goes up as it is; on any other it belongs
 * to waves the tree has closed without us, and would land in later ones,
 * so it is dropped and the loss reported (1). */
static int nft_adopt_resend(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more,
                            uint64_t key)
{
    tb_stream_st_t *s = tb_stream_get(n, stream);
    const tb_filter_t *f = s ? tb_filter_reg_get(n->filters, s->up) : NULL;
    int hung = s && tb_ffault_hung_above(&s->ff);
    if (s && s->exact && !hung) {
        tbon_packet_unref(p);       /* sent again already, from what we keep */
    } else if (f && f->get_state && !hung) {
        tb_node_to_parent(n, stream, p, more, key);
    } else {
        tbon_packet_unref(p);
        return 1;
    }
    return 0;
}

static void nft_adopt_done(tb_node_t *n)
{
    for (size_t id = 0; id < n->nstreams; id++)
        if (n->streams[id])
            tb_ffault_set_hung_above(&n->streams[id]->ff, 0);
}

static int nft_watch(tb_node_t *n, tb_io_t *io)
{
    return tb_loop_watch(n->loop, io, EPOLLIN);
}

static const tb_nft_ops_t node_ops = {
    .life = nft_life,
    .nchild = nft_nchild,
    .child_rank = nft_child_rank,
    .child_flags = nft_child_flags,
    .child_index = nft_child_index,
    .child_rejoin = nft_child_rejoin,
    .child_adopt = nft_child_adopt,
    .child_close = nft_child_close,
    .child_drop = tb_node_drop_child,
    .child_absent = nft_child_absent,
    .child_suspect = nft_child_suspect,
    .parent_flags = nft_parent_flags,
    .parent_rank = nft_parent_rank,
    .parent_set = nft_parent_set,
    .parent_lost = tb_node_parent_lost,
    .send_ctl = nft_send_ctl,
    .emit = tb_node_emit,
    .fault_end = tb_node_fault_end,
    .topo_changed = nft_topo_changed,
    .settle = tb_stream_settle,
    .catch_up = tb_stream_catch_up,
    .filters_loaded = tb_stream_filters_loaded,
    .bcast_join = tb_stream_bcast_join,
    .graft = nft_graft,
    .adopt_streams = nft_adopt_streams,
    .adopt_resend = nft_adopt_resend,
    .adopt_done = nft_adopt_done,
    .cover_joining = tb_cover_joining,
    .watch = nft_watch,
};

void tb_nft_make(tb_node_t *n, tb_nft_t *h)
{
    *h = (tb_nft_t){
        .n = n, .ops = &node_ops, .topo = n->topo, .rank = n->rank, .role = n->role,
        .session = &n->cfg.session, .cbs = &n->cbs, .heartbeat_ms = n->cfg.heartbeat_ms,
        .suspect_ms = n->cfg.suspect_ms, .joined = n->cfg.joined,
        .given_links = n->cfg.given_links, .parent_event_fd = n->cfg.parent_event_fd,
        .grace_ms = n->cfg.grace_ms, .view_base = n->cfg.view_base,
    };
}

struct tb_ft *tb_nft_state(const tb_node_t *n)
{
    return n->ftst;
}

void tb_nft_set_state(tb_node_t *n, struct tb_ft *ft)
{
    n->ftst = ft;
}

void tb_nft_listener(const tb_node_t *n, int *fd, uint16_t *port)
{
    *fd = n->lfd;
    *port = n->port;
}

void tb_nft_set_listener(tb_node_t *n, int fd, uint16_t port)
{
    n->lfd = fd;
    n->port = port;
}

struct tb_fwatch *tb_node_fwatch(tb_node_t *n)
{
    return &n->fw;
}

const tb_config_t *tb_node_conf(const tb_node_t *n)
{
    return n->cfg.conf;
}

void tb_node_fatal(tb_node_t *n, int code, const char *msg)
{
    if (n->cfg.fatal)
        n->cfg.fatal(code, msg);
}
