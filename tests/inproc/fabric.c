/* fabric.c - the in-process test tier (fabric.h) */
#include "fabric.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"
#include "codec/packet_int.h"
#include "net/sock.h"
#include "ft/ft.h"
#include "util/config.h"
#include "util/ranks.h"
#include "util/endian.h"

#define FAB_MAX 32      /* nodes and peers per fabric */

enum { R_PACKET, R_STATUS, R_EVENT, R_VIEW, R_CHECKED };

/* One callback of a node, kept until the test takes it. */
typedef struct rec {
    int kind;
    struct rec *next;
    uint32_t stream;            /* R_PACKET */
    tbon_packet_t *pkt;
    uint64_t q;
    int what;                   /* R_STATUS */
    tbon_event_t ev;            /* R_EVENT */
    uint64_t version;           /* R_VIEW; R_CHECKED: the check id */
    size_t nchanges;
    tbon_rank_t *agree, *bad;   /* R_CHECKED */
    size_t na, nb;
} rec_t;

struct fab_node {
    fab_t *f;
    tbon_rank_t rank;
    tb_node_t *node;
    rec_t *head, *tail;         /* under f->mu */
    tb_node_cbs_t also;         /* callbacks that get everything too */
};

struct fab_peer {
    fab_t *f;
    tbon_rank_t rank;
    int fd;
};

struct fab {
    tb_topology_t *topo;
    tb_session_t session;
    tb_config_t conf;          /* the environment at fab_new: every node's */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    fab_node_t *nodes[FAB_MAX];
    size_t nnodes;
    fab_peer_t *peers[FAB_MAX];
    size_t npeers;
};

/* ---- records (callbacks run on the nodes' reactor threads) ---- */

static void push(fab_node_t *n, rec_t *r)
{
    pthread_mutex_lock(&n->f->mu);
    if (n->tail)
        n->tail->next = r;
    else
        n->head = r;
    n->tail = r;
    pthread_cond_broadcast(&n->f->cond);
    pthread_mutex_unlock(&n->f->mu);
}

static rec_t *rec_new(int kind)
{
    rec_t *r = calloc(1, sizeof *r);
    if (!r)
        abort();        /* a test process out of memory: nothing to test */
    r->kind = kind;
    return r;
}

static void rec_free(rec_t *r)
{
    tbon_packet_unref(r->pkt);
    free(r->agree);
    free(r->bad);
    free(r);
}

static void cb_deliver(void *arg, uint32_t stream, tbon_packet_t *p, uint64_t q)
{
    rec_t *r = rec_new(R_PACKET);
    r->stream = stream;
    r->pkt = p;
    r->q = q;
    fab_node_t *n = arg;
    if (n->also.deliver)
        n->also.deliver(n->also.arg, stream, tbon_packet_ref(p), q);
    push(n, r);
}

static void cb_status(void *arg, int what, int code, const char *msg)
{
    fab_node_t *n = arg;
    if (n->also.status)
        n->also.status(n->also.arg, what, code, msg);
    rec_t *r = rec_new(R_STATUS);
    r->what = what;
    push(arg, r);
}

static void cb_event(void *arg, const tbon_event_t *ev)
{
    fab_node_t *n = arg;
    if (n->also.event)
        n->also.event(n->also.arg, ev);
    rec_t *r = rec_new(R_EVENT);
    r->ev = *ev;
    push(arg, r);
}

static void cb_view(void *arg, uint64_t version, const tb_vchange_t *ch, size_t k)
{
    fab_node_t *n = arg;
    if (n->also.view)
        n->also.view(n->also.arg, version, ch, k);
    rec_t *r = rec_new(R_VIEW);
    r->version = version;
    r->nchanges = k;
    push(n, r);
}

static int cmp_rank(const void *a, const void *b)
{
    tbon_rank_t x = *(const tbon_rank_t *)a, y = *(const tbon_rank_t *)b;
    return x < y ? -1 : x > y;
}

static tbon_rank_t *sorted_copy(const tbon_rank_t *v, size_t n)
{
    tbon_rank_t *c = malloc((n ? n : 1) * sizeof *c);
    if (!c)
        abort();
    if (n)
        memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_rank);
    return c;
}

static void cb_checked(void *arg, uint64_t id, const tbon_rank_t *agree, size_t na,
                       const tbon_rank_t *bad, size_t nb)
{
    fab_node_t *n = arg;
    if (n->also.checked)
        n->also.checked(n->also.arg, id, agree, na, bad, nb);
    rec_t *r = rec_new(R_CHECKED);
    r->version = id;
    r->agree = sorted_copy(agree, na);
    r->bad = sorted_copy(bad, nb);
    r->na = na;
    r->nb = nb;
    push(arg, r);
}

static struct timespec abs_after(int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Take (unlink) the oldest record of n that match() accepts, waiting at
 * most ms; NULL if none came. keep: leave it in place (a peek). */
static rec_t *take(fab_node_t *n, int (*match)(const rec_t *, const void *), const void *arg,
                   int ms, int keep)
{
    struct timespec dl = abs_after(ms);
    rec_t *found = NULL;
    int late = 0;
    pthread_mutex_lock(&n->f->mu);
    for (;;) {
        rec_t *prev = NULL;
        for (rec_t *r = n->head; r; prev = r, r = r->next) {
            if (!match(r, arg))
                continue;
            found = r;
            if (!keep) {
                if (prev)
                    prev->next = r->next;
                else
                    n->head = r->next;
                if (n->tail == r)
                    n->tail = prev;
                r->next = NULL;
            }
            break;
        }
        if (found || late)
            break;
        late = pthread_cond_timedwait(&n->f->cond, &n->f->mu, &dl) == ETIMEDOUT;
    }
    pthread_mutex_unlock(&n->f->mu);
    return found;
}

static int m_packet(const rec_t *r, const void *a)
{
    return r->kind == R_PACKET && r->stream == *(const uint32_t *)a;
}

tbon_packet_t *fab_take_packet(fab_node_t *n, uint32_t stream, int ms, uint64_t *q)
{
    rec_t *r = take(n, m_packet, &stream, ms, 0);
    if (!r)
        return NULL;
    tbon_packet_t *p = r->pkt;
    r->pkt = NULL;
    if (q)
        *q = r->q;
    rec_free(r);
    return p;
}

size_t fab_pending_packets(fab_node_t *n, uint32_t stream)
{
    size_t k = 0;
    pthread_mutex_lock(&n->f->mu);
    for (rec_t *r = n->head; r; r = r->next)
        k += m_packet(r, &stream);
    pthread_mutex_unlock(&n->f->mu);
    return k;
}

static int m_event(const rec_t *r, const void *a)
{
    (void)a;
    return r->kind == R_EVENT;
}

int fab_take_event(fab_node_t *n, tbon_event_t *ev, int ms)
{
    rec_t *r = take(n, m_event, NULL, ms, 0);
    if (!r)
        return 0;
    *ev = r->ev;
    rec_free(r);
    return 1;
}

static int m_status(const rec_t *r, const void *a)
{
    return r->kind == R_STATUS && r->what == *(const int *)a;
}

int fab_wait_status(fab_node_t *n, int what, int ms)
{
    return take(n, m_status, &what, ms, 1) != NULL;
}

static int m_view(const rec_t *r, const void *a)
{
    return r->kind == R_VIEW && r->version == *(const uint64_t *)a;
}

int fab_wait_view(fab_node_t *n, uint64_t v, int ms, size_t *changes)
{
    rec_t *r = take(n, m_view, &v, ms, 1);
    if (r && changes) {
        pthread_mutex_lock(&n->f->mu);
        *changes = r->nchanges;
        pthread_mutex_unlock(&n->f->mu);
    }
    return r != NULL;
}

static int m_checked(const rec_t *r, const void *a)
{
    return r->kind == R_CHECKED && r->version == *(const uint64_t *)a;
}

int fab_take_checked(fab_node_t *n, uint64_t id, int ms, tbon_rank_t **agree, size_t *na,
                     tbon_rank_t **bad, size_t *nb)
{
    rec_t *r = take(n, m_checked, &id, ms, 0);
    if (!r)
        return 0;
    *agree = r->agree;
    *bad = r->bad;
    *na = r->na;
    *nb = r->nb;
    r->agree = r->bad = NULL;
    rec_free(r);
    return 1;
}

/* ---- the fabric ---- */

fab_t *fab_new(const char *text)
{
    fab_t *f = calloc(1, sizeof *f);
    if (!f)
        abort();
    tbon_error_t err;
    f->topo = tb_topology_parse_text(text, strlen(text), "fabric", &err);
    if (!f->topo || tb_config_load(&f->conf, &err) != 0) {
        th_fail(__FILE__, __LINE__, "topology \"%s\": %s", text, err.msg);
        tb_topology_destroy(f->topo);
        free(f);
        return NULL;
    }
    f->session.id = 0x1417;
    for (size_t i = 0; i < sizeof f->session.secret; i++)
        f->session.secret[i] = (uint8_t)(i * 7 + 1);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cond, NULL);
    return f;
}

const tb_topology_t *fab_topo(const fab_t *f)
{
    return f->topo;
}

void fab_free(fab_t *f)
{
    if (!f)
        return;
    /* A node stops at its next turn once it leaves, whatever it waits for
     * (an orphan would wait for an adopter for ever). All are told before
     * any is destroyed: destroying one joins its thread. */
    for (size_t i = 0; i < f->nnodes; i++)
        fab_post(f->nodes[i], tb_cmd_leave());
    for (size_t i = f->nnodes; i-- > 0;) {
        fab_node_t *n = f->nodes[i];
        tb_node_destroy(n->node);
        while (n->head) {
            rec_t *r = n->head;
            n->head = r->next;
            rec_free(r);
        }
        free(n);
    }
    for (size_t i = 0; i < f->npeers; i++) {
        if (f->peers[i]->fd >= 0)
            close(f->peers[i]->fd);
        free(f->peers[i]);
    }
    tb_topology_destroy(f->topo);
    tb_config_free(&f->conf);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cond);
    free(f);
}

/* A node of rank r on topology topo (taken) with parent link parent_fd (or
 * -1), its reactor running. */
static fab_node_t *start_node(fab_t *f, tbon_rank_t r, tb_topology_t *topo, int parent_fd,
                              const tb_node_cbs_t *also)
{
    if (f->nnodes == FAB_MAX) {
        th_fail(__FILE__, __LINE__, "more than %d nodes", FAB_MAX);
        tb_topology_destroy(topo);
        if (parent_fd >= 0)
            close(parent_fd);
        return NULL;
    }
    fab_node_t *n = calloc(1, sizeof *n);
    if (!n)
        abort();
    n->f = f;
    n->rank = r;
    if (also)
        n->also = *also;
    tb_node_config_t cfg = {
        .ft = &tb_ft_ops, .conf = &f->conf,
        .role = tb_topology_role(topo, r), .rank = r, .topo = topo, .session = f->session,
        .startup_timeout_ms = 60000, .parent_fd = parent_fd, .parent_event_fd = -1,
        .listen_fd = -1, .given_links = 1,
    };
    tb_node_cbs_t cbs = { .arg = n, .deliver = cb_deliver, .status = cb_status,
                          .event = cb_event, .view = cb_view, .checked = cb_checked };
    tbon_error_t err;
    n->node = tb_node_new(&cfg, &cbs, &err);
    if (!n->node) {
        th_fail(__FILE__, __LINE__, "rank %u: tb_node_new: %s", r, err.msg);
        free(n);
        return NULL;
    }
    if (tb_node_start(n->node) != 0) {
        th_fail(__FILE__, __LINE__, "rank %u: no reactor thread", r);
        tb_node_destroy(n->node);
        free(n);
        return NULL;
    }
    f->nodes[f->nnodes++] = n;
    return n;
}

fab_node_t *fab_fe(fab_t *f)
{
    return start_node(f, 0, tb_topology_clone(f->topo), -1, NULL);
}

fab_node_t *fab_fe_also(fab_t *f, const tb_node_cbs_t *also)
{
    return start_node(f, 0, tb_topology_clone(f->topo), -1, also);
}

tb_node_t *fab_tb(fab_node_t *n)
{
    return n->node;
}

static int pair(int sv[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        th_fail(__FILE__, __LINE__, "socketpair: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* What a launched child reads before its node exists (join.c,
 * tb_join_connect): the topology, and a commnode its launch instructions.
 * The topology (the caller's), or NULL (case failed). */
static tb_topology_t *read_setup(int fd, tbon_rank_t r)
{
    tb_frame_t fr;
    tbon_error_t err;
    int64_t dl = tb_now_ms() + FAB_MS;
    if (tb_sock_recv_frame(fd, TB_FRAME_MAX_DEFAULT, &fr, dl, &err) != 0) {
        th_fail(__FILE__, __LINE__, "rank %u: no topology from the parent: %s", r, err.msg);
        return NULL;
    }
    tb_topology_t *t = NULL;
    if (fr.hdr.type != TB_FRAME_TOPOLOGY)
        th_fail(__FILE__, __LINE__, "rank %u: a %s frame came first, not TOPOLOGY", r,
                tb_frame_type_name(fr.hdr.type));
    else if (!(t = tb_topology_deserialize(fr.payload, fr.hdr.len, &err)))
        th_fail(__FILE__, __LINE__, "rank %u: bad topology: %s", r, err.msg);
    tb_frame_release(&fr);
    if (!t || tb_topology_role(t, r) != TB_ROLE_COMMNODE)
        return t;
    if (tb_sock_recv_frame(fd, TB_FRAME_MAX_DEFAULT, &fr, dl, &err) != 0 ||
        fr.hdr.type != TB_FRAME_CONTROL || fr.hdr.tag != TB_CTL_LAUNCH) {
        th_fail(__FILE__, __LINE__, "rank %u: no launch instructions from the parent", r);
        tb_frame_release(&fr);
        tb_topology_destroy(t);
        return NULL;
    }
    tb_frame_release(&fr);
    return t;
}

fab_node_t *fab_node_under(fab_t *f, fab_node_t *parent, tbon_rank_t r,
                           void (*edit)(tb_topology_t *t, tbon_rank_t r))
{
    int sv[2];
    if (!parent || pair(sv))
        return NULL;
    tb_node_link_child(parent->node, r, sv[0]);
    tb_topology_t *t = read_setup(sv[1], r);
    if (!t) {
        close(sv[1]);
        return NULL;
    }
    if (edit)
        edit(t, r);
    return start_node(f, r, t, sv[1], NULL);
}

static fab_peer_t *new_peer(fab_t *f, tbon_rank_t r, int fd)
{
    if (f->npeers == FAB_MAX) {
        th_fail(__FILE__, __LINE__, "more than %d peers", FAB_MAX);
        close(fd);
        return NULL;
    }
    fab_peer_t *p = calloc(1, sizeof *p);
    if (!p)
        abort();
    p->f = f;
    p->rank = r;
    p->fd = fd;
    f->peers[f->npeers++] = p;
    return p;
}

fab_node_t *fab_node_under_peer(fab_t *f, tbon_rank_t r, fab_peer_t **parent)
{
    int sv[2];
    if (pair(sv))
        return NULL;
    *parent = new_peer(f, tb_topology_parent(f->topo, r), sv[0]);
    if (!*parent) {
        close(sv[1]);
        return NULL;
    }
    return start_node(f, r, tb_topology_clone(f->topo), sv[1], NULL);
}

void fab_post(fab_node_t *n, tb_cmd_t *c)
{
    if (c)
        tb_node_post(n->node, c);
}

void fab_stream(fab_node_t *fe, uint32_t id, int up, int sync, uint32_t timeout_ms,
                const tbon_rank_t *members, size_t nmembers)
{
    tbon_rank_t *m = malloc((nmembers ? nmembers : 1) * sizeof *m);
    if (!m)
        abort();
    memcpy(m, members, nmembers * sizeof *members);
    tb_cmd_t *c = tb_cmd_stream(id, up, sync, timeout_ms, TBON_FILTER_NULL, m, nmembers);
    if (!c)
        abort();
    fab_post(fe, c);
}

void fab_send(fab_node_t *n, uint32_t stream, tbon_packet_t *p, uint64_t key)
{
    tb_cmd_t *c = tb_cmd_send(stream, p, key, 0);
    if (!c)
        abort();
    fab_post(n, c);
}

/* ---- peers ---- */

fab_peer_t *fab_peer_under(fab_t *f, fab_node_t *parent, tbon_rank_t r)
{
    int sv[2];
    if (!parent || pair(sv))
        return NULL;
    tb_node_link_child(parent->node, r, sv[0]);
    tb_topology_t *t = read_setup(sv[1], r);
    if (!t) {
        close(sv[1]);
        return NULL;
    }
    tb_topology_destroy(t);
    return new_peer(f, r, sv[1]);
}

void fab_msg_clear(fab_msg_t *m)
{
    tbon_packet_unref(m->pkt);
    memset(m, 0, sizeof *m);
}

int fab_peer_next(fab_peer_t *p, fab_msg_t *m, int ms)
{
    memset(m, 0, sizeof *m);
    if (p->fd < 0)
        return -1;
    /* Nothing at all within ms is a time-out; a frame that has begun is read
     * whole (a node writes frames whole). */
    struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
    int k = poll(&pfd, 1, ms);
    if (k == 0)
        return 0;
    tb_frame_t fr;
    tbon_error_t err;
    int rc;
    /* A peer sends nothing sequenced (seq 0), so a node owes it no ACK; the
     * link layer's lone ACKs, should one come, are not messages. */
    while ((rc = tb_sock_recv_frame(p->fd, TB_FRAME_MAX_DEFAULT, &fr, tb_now_ms() + FAB_MS,
                                    &err)) == 0 && fr.hdr.type == TB_FRAME_ACK)
        tb_frame_release(&fr);
    if (rc == TBON_ECLOSED)
        return -1;
    if (rc != 0) {
        th_fail(__FILE__, __LINE__, "peer %u: %s", p->rank, err.msg);
        return -1;
    }
    m->hdr = fr.hdr;
    if ((fr.hdr.type == TB_FRAME_DATA || fr.hdr.type == TB_FRAME_CONTROL) && fr.hdr.len > 0) {
        /* A commnode's packet going up ends with its coverage (docs/protocol.md
         * 2.6): kept with the packet, as a node keeps it. */
        tb_ranks_t cv = TB_RANKS_INIT;
        size_t len = fr.hdr.len;
        char why[120];
        int t = 0;
        if (fr.hdr.flags & TB_FRAME_F_COVER) {
            t = tb_ranks_decode_tail(&cv, fr.payload, len, why, sizeof why);
            if (t < 0)
                th_fail(__FILE__, __LINE__, "peer %u: a bad coverage: %s", p->rank, why);
            else
                len -= (size_t)t;
        } else if (fr.hdr.flags & TB_FRAME_F_DONE) {
            if (len <= 8) {
                th_fail(__FILE__, __LINE__, "peer %u: a delivered mark and no packet", p->rank);
                t = -1;
            } else {
                len -= 8;
                m->done = tb_get64(fr.payload + len);
            }
        }
        m->pkt = t < 0 ? NULL : tb_packet_decode(fr.payload, len, fr.hdr.tag, fr.hdr.stream,
                                                 fr.hdr.source, &err);
        if (!m->pkt && t >= 0)
            th_fail(__FILE__, __LINE__, "peer %u: a bad packet: %s", p->rank, err.msg);
        if (m->pkt)
            tb_ranks_copy(tb_packet_cover_mut(m->pkt), &cv);
        tb_ranks_free(&cv);
    }
    tb_frame_release(&fr);
    return 1;
}

static void describe(const fab_msg_t *m, int rc, char *out, size_t len)
{
    if (rc == 0)
        snprintf(out, len, "nothing");
    else if (rc < 0)
        snprintf(out, len, "the end of the link");
    else
        snprintf(out, len, "%s frame (tag %d, stream %u)", tb_frame_type_name(m->hdr.type),
                 m->hdr.tag, m->hdr.stream);
}

tbon_packet_t *fab_peer_expect_ctl(fab_peer_t *p, int op, int ms)
{
    fab_msg_t m;
    int rc = fab_peer_next(p, &m, ms);
    if (rc == 1 && m.hdr.type == TB_FRAME_CONTROL && m.hdr.tag == op && m.pkt) {
        tbon_packet_t *pkt = m.pkt;
        m.pkt = NULL;
        return pkt;
    }
    char what[96];
    describe(&m, rc, what, sizeof what);
    th_fail(__FILE__, __LINE__, "peer %u: expected control message %d, got %s", p->rank, op,
            what);
    fab_msg_clear(&m);
    return NULL;
}

tbon_packet_t *fab_peer_until_ctl(fab_peer_t *p, int op, int ms)
{
    int64_t dl = tb_now_ms() + ms;
    for (;;) {
        fab_msg_t m;
        int64_t left = dl - tb_now_ms();
        int rc = fab_peer_next(p, &m, left > 0 ? (int)left : 0);
        if (rc == 1 && m.hdr.type == TB_FRAME_CONTROL && m.hdr.tag == op && m.pkt) {
            tbon_packet_t *pkt = m.pkt;
            m.pkt = NULL;
            return pkt;
        }
        fab_msg_clear(&m);
        if (rc != 1) {
            th_fail(__FILE__, __LINE__, "peer %u: no control message %d within %d ms%s",
                    p->rank, op, ms, rc < 0 ? " (the link ended)" : "");
            return NULL;
        }
    }
}

void fab_peer_quiet(fab_peer_t *p, int ms)
{
    fab_msg_t m;
    int rc = fab_peer_next(p, &m, ms);
    if (rc != 0) {
        char what[96];
        describe(&m, rc, what, sizeof what);
        th_fail(__FILE__, __LINE__, "peer %u: expected nothing, got %s", p->rank, what);
    }
    fab_msg_clear(&m);
}

static void peer_send(fab_peer_t *pe, const tb_frame_hdr_t *h, tbon_packet_t *p)
{
    size_t len = 0;
    const uint8_t *pl = p ? tb_packet_payload(p, &len) : NULL;
    tbon_error_t err;
    if (pe->fd < 0 ||
        tb_sock_send_frame(pe->fd, h, pl, len, tb_now_ms() + FAB_MS, &err) != 0)
        th_fail(__FILE__, __LINE__, "peer %u: cannot send a %s frame", pe->rank,
                tb_frame_type_name(h->type));
    tbon_packet_unref(p);
}

void fab_peer_ctl(fab_peer_t *pe, int op, tbon_packet_t *p)
{
    tb_frame_hdr_t h = { .type = TB_FRAME_CONTROL, .tag = op, .source = pe->rank };
    peer_send(pe, &h, p);
}

void fab_peer_data(fab_peer_t *pe, uint32_t stream, uint64_t key, int more, tbon_packet_t *p)
{
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .flags = more ? TB_FRAME_F_MORE : 0,
                         .stream = stream, .tag = tbon_packet_tag(p), .source = pe->rank,
                         .key = key };
    peer_send(pe, &h, p);
}

void fab_peer_unit(fab_peer_t *pe, uint32_t stream, uint64_t key, uint16_t flags,
                   tbon_packet_t *p, const tbon_rank_t *cov, size_t ncov)
{
    tb_ranks_t cv = TB_RANKS_INIT;
    for (size_t i = 0; i < ncov; i++)
        tb_ranks_add(&cv, cov[i]);
    size_t len = 0;
    const uint8_t *pl = tb_packet_payload(p, &len);
    size_t tl = cv.n ? tb_ranks_wire_size(&cv) : 0;
    uint8_t *buf = malloc(len + tl + 1);
    tbon_error_t err;
    if (buf) {
        memcpy(buf, pl, len);
        if (tl)
            tb_ranks_encode(&cv, buf + len);
        tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .flags = (uint16_t)(flags |
                             (tl ? TB_FRAME_F_COVER : 0)), .stream = stream,
                             .tag = tbon_packet_tag(p), .source = pe->rank, .key = key };
        if (pe->fd < 0 ||
            tb_sock_send_frame(pe->fd, &h, buf, len + tl, tb_now_ms() + FAB_MS, &err) != 0)
            th_fail(__FILE__, __LINE__, "peer %u: cannot send a unit", pe->rank);
    }
    free(buf);
    tb_ranks_free(&cv);
    tbon_packet_unref(p);
}

void fab_peer_request(fab_peer_t *pe, uint32_t stream, uint64_t q, uint64_t done,
                      tbon_packet_t *p)
{
    size_t len = 0;
    const uint8_t *pl = tb_packet_payload(p, &len);
    uint8_t *buf = malloc(len + 8);
    tbon_error_t err;
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .flags = TB_FRAME_F_DONE, .stream = stream,
                         .tag = tbon_packet_tag(p), .source = pe->rank, .key = q };
    if (!buf || pe->fd < 0) {
        th_fail(__FILE__, __LINE__, "peer %u: cannot send a request", pe->rank);
    } else {
        memcpy(buf, pl, len);
        tb_put64(buf + len, done);
        if (tb_sock_send_frame(pe->fd, &h, buf, len + 8, tb_now_ms() + FAB_MS, &err) != 0)
            th_fail(__FILE__, __LINE__, "peer %u: cannot send a request: %s", pe->rank, err.msg);
    }
    free(buf);
    tbon_packet_unref(p);
}

void fab_peer_empty(fab_peer_t *pe, uint32_t stream, uint64_t key)
{
    tb_frame_hdr_t h = { .type = TB_FRAME_DATA, .stream = stream, .source = pe->rank,
                         .key = key };
    peer_send(pe, &h, NULL);
}

void fab_peer_send(fab_peer_t *pe, const fab_msg_t *m)
{
    tb_frame_hdr_t h = m->hdr;
    h.flags &= TB_FRAME_F_MORE;
    h.seq = h.ack = 0;      /* a peer's frames are outside the link's sequence */
    peer_send(pe, &h, tbon_packet_ref(m->pkt));
}

void fab_peer_close(fab_peer_t *pe)
{
    if (pe->fd >= 0)
        close(pe->fd);
    pe->fd = -1;
}

/* ---- adoptions ---- */

/* Post TB_CMD_ADOPT_CONN for orphan o (incarnation inc) to the adopter with
 * end sv0, and read its TB_CTL_ADOPT_ACK off sv1 (the orphan's end), as the
 * orphan's EDS does (eds.c, ask). 1 if it came. */
static int adopt_conn(fab_node_t *adopter, tbon_rank_t o, uint32_t inc, int sv0, int sv1)
{
    tb_cmd_t *c = tb_cmd_adopt_conn(sv0, o, inc);
    if (!c)
        abort();
    fab_post(adopter, c);
    tb_frame_t fr;
    tbon_error_t err;
    if (tb_sock_recv_frame(sv1, 4096, &fr, tb_now_ms() + FAB_MS, &err) != 0)
        return 0;
    int ok = fr.hdr.type == TB_FRAME_CONTROL && fr.hdr.tag == TB_CTL_ADOPT_ACK;
    tb_frame_release(&fr);
    if (!ok)
        th_fail(__FILE__, __LINE__, "rank %u: the adopter's first frame is no ADOPT_ACK", o);
    return ok;
}

static void post_adopted(fab_node_t *orphan, tbon_rank_t adopter, tbon_rank_t lost, int fd)
{
    tb_cmd_t *c = tb_cmd_adopted(fd, adopter, lost, 0, 0);
    if (!c)
        abort();
    fab_post(orphan, c);
}

int fab_adopt(fab_node_t *orphan, fab_node_t *adopter, tbon_rank_t lost)
{
    int sv[2];
    if (pair(sv))
        return 0;
    uint32_t inc = tb_topology_incarnation(orphan->f->topo, orphan->rank) + 1;
    if (!adopt_conn(adopter, orphan->rank, inc, sv[0], sv[1])) {
        close(sv[1]);
        return 0;
    }
    post_adopted(orphan, adopter->rank, lost, sv[1]);
    return 1;
}

fab_peer_t *fab_adopt_by_peer(fab_t *f, fab_node_t *orphan, tbon_rank_t adopter,
                              tbon_rank_t lost)
{
    int sv[2];
    if (pair(sv))
        return NULL;
    fab_peer_t *pe = new_peer(f, adopter, sv[0]);
    if (!pe) {
        close(sv[1]);
        return NULL;
    }
    post_adopted(orphan, adopter, lost, sv[1]);
    return pe;
}

fab_peer_t *fab_adopt_peer(fab_t *f, tbon_rank_t orphan, uint32_t inc, fab_node_t *adopter)
{
    int sv[2];
    if (pair(sv))
        return NULL;
    if (!adopt_conn(adopter, orphan, inc, sv[0], sv[1])) {
        close(sv[1]);
        return NULL;
    }
    return new_peer(f, orphan, sv[1]);
}

/* ---- packets ---- */

long fab_long(const tbon_packet_t *p)
{
    long v;
    if (!p || tbon_packet_unpack(p, "%ld", &v) != 0) {
        th_fail(__FILE__, __LINE__, "not a \"%%ld\" packet");
        return -1;
    }
    return v;
}
