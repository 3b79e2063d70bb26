/* api/fe_session.c - a session that outlives its front-end
 * (docs/user-guide.md, "Sessions"; docs/protocol.md 8.7): tbon_fe_detach,
 * and tbon_fe_reattach - the session file read, the old front-end's
 * children claimed (the secret proven, their topology and view taken), a
 * front-end node made over that tree, and the children told where it
 * listens, whereupon each has itself adopted as an orphan would (seed 003
 * IV-C: its streams grafted, their filters' state composed up). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "api/net_int.h"
#include "codec/handshake.h"
#include "filter/filter.h"
#include "net/auth.h"
#include "net/sock.h"
#include "topo/reconfig.h"
#include "topo/topology.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "ft/ft.h"

int tbon_fe_detach(tbon_net_t *net, const char *file)
{
    if (!net || !net->is_fe || !net->node || !file || !*file)
        return tb_net_fail(net, TBON_EINVAL, "tbon_fe_detach needs a front-end network and "
                           "a file");
    tb_node_reply_t r = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
    tb_cmd_t *c = tb_cmd_detach(file, net->detach_ms, &r);
    if (c)
        tb_node_post(net->node, c);
    pthread_mutex_lock(&r.mu);
    while (!r.done && !tb_node_stopped(net->node)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r.cv, &r.mu, &ts);
    }
    int done = r.done, rc = r.rc;
    pthread_mutex_unlock(&r.mu);
    if (!done || rc) {
        /* A detach that stopped the node answers before it stops. */
        return tb_net_fail(net, done ? rc : TBON_ECLOSED, "cannot detach: %s",
                           done ? r.msg : "the session has ended");
    }
    tb_node_destroy(net->node);
    tb_net_free(net);
    return 0;
}

/* ---- the session file ---- */

struct sf_child {
    tbon_rank_t rank;
    uint16_t port;
    char host[256];
};
struct sf_filter {
    int id;
    char func[256];
    char path[PATH_MAX];
};
typedef struct sfile {
    tb_session_t s;
    int have_id, have_secret;
    struct sf_child *child;
    size_t nchild;
    struct sf_filter *filter;
    size_t nfilter;
} sfile_t;

static void sf_free(sfile_t *f)
{
    free(f->child);
    free(f->filter);
}

/* One line of the file (its key=value words). 0, or TBON_EFORMAT/ENOMEM. */
static int sf_line(sfile_t *f, char *l, const char *file, int ln, tbon_error_t *err)
{
    unsigned long long id;
    unsigned r, port;
    int fid, off = 0;
    if (sscanf(l, "version=%u%n", &r, &off) == 1 && !l[off]) {
        if (r != 1)
            return tb_error_set(err, TBON_EFORMAT, "%s:%d: version %u is not one this "
                                "library reads (1)", file, ln, r);
        return 0;
    }
    if (sscanf(l, "session=%16llx%n", &id, &off) == 1 && !l[off]) {
        f->s.id = id;
        f->have_id = 1;
        return 0;
    }
    if (strncmp(l, "secret=", 7) == 0) {
        f->have_secret = 1;
        int rc = tb_secret_from_hex(l + 7, f->s.secret, err);
        if (rc)
            tb_error_set(err, rc, "%s:%d: the secret: %s", file, ln, err->msg);
        return rc;
    }
    if (sscanf(l, "child=%u port=%u host=%n", &r, &port, &off) == 2 && off && l[off] &&
        port > 0 && port < 65536 && strlen(l + off) < 256) {
        struct sf_child *c = realloc(f->child, (f->nchild + 1) * sizeof *c);
        if (!c)
            return tb_error_set(err, TBON_ENOMEM, "out of memory");
        f->child = c;
        c[f->nchild].rank = r;
        c[f->nchild].port = (uint16_t)port;
        snprintf(c[f->nchild].host, sizeof c->host, "%s", l + off);
        f->nchild++;
        return 0;
    }
    char func[256];
    if (sscanf(l, "filter=%d func=%255s path=%n", &fid, func, &off) == 2 && off && l[off] &&
        fid >= TBON_FILTER_BUILTIN_COUNT && strlen(l + off) < PATH_MAX) {
        struct sf_filter *x = realloc(f->filter, (f->nfilter + 1) * sizeof *x);
        if (!x)
            return tb_error_set(err, TBON_ENOMEM, "out of memory");
        f->filter = x;
        x[f->nfilter].id = fid;
        snprintf(x[f->nfilter].func, sizeof x->func, "%s", func);
        snprintf(x[f->nfilter].path, sizeof x->path, "%s", l + off);
        f->nfilter++;
        return 0;
    }
    return tb_error_set(err, TBON_EFORMAT, "%s:%d: not a line of a session file: \"%.80s\"",
                        file, ln, l);
}

static int sf_read(sfile_t *f, const char *file, tbon_error_t *err)
{
    memset(f, 0, sizeof *f);
    FILE *in = fopen(file, "r");
    if (!in)
        return tb_error_set(err, errno == ENOENT ? TBON_ENOTFOUND : TBON_EIO,
                            "cannot read the session file %s: %s", file, strerror(errno));
    char l[PATH_MAX + 512];
    int ln = 0, rc = 0;
    while (rc == 0 && fgets(l, sizeof l, in)) {
        ln++;
        l[strcspn(l, "\r\n")] = 0;
        if (l[0] && l[0] != '#')
            rc = sf_line(f, l, file, ln, err);
    }
    fclose(in);
    if (rc == 0 && (!f->have_id || !f->have_secret || !f->nchild))
        rc = tb_error_set(err, TBON_EFORMAT, "%s: not a session file (it names no %s)", file,
                          !f->have_id ? "session" : !f->have_secret ? "secret" : "child");
    if (rc)
        sf_free(f);
    return rc;
}

/* ---- claims ---- */

/* Claim child c of the session: the handshake (purpose REATTACH), then its
 * topology and view version (a TOPOLOGY frame, key: the version). The
 * connection's fd, or an error: TBON_EBUSY (it has a front-end, or another
 * claimed it), TBON_EAUTH, TBON_ECLOSED (nobody listens), ... (err). */
static int claim(const sfile_t *sf, const struct sf_child *c, int64_t dl, tb_topology_t **topo,
                 uint64_t *view, tbon_error_t *err)
{
    tbon_error_t e2 = { 0 };
    int fd = tb_sock_connect(c->host, c->port, dl, &e2);
    if (fd < 0)
        return tb_error_set(err, errno == ECONNREFUSED ? TBON_ECLOSED : TBON_EIO,
                            "rank %u at %s port %u: %s", c->rank, c->host, c->port,
                            errno == ECONNREFUSED ? "nobody listens (its process has ended)"
                                                  : e2.msg);
    tb_welcome_t w = { 0 };
    w.status = TB_WELCOME_OK;
    tb_frame_t f;
    int rc = tb_auth_client(fd, &sf->s, TB_ROLE_FE, TB_PURPOSE_REATTACH, 0, 0, dl, &w, &e2);
    if (rc == 0)
        rc = tb_sock_recv_frame(fd, 256u << 20, &f, dl, &e2);
    if (rc == 0) {
        *topo = f.hdr.type == TB_FRAME_TOPOLOGY
                ? tb_topology_deserialize(f.payload, f.hdr.len, &e2) : NULL;
        *view = f.hdr.key;
        tb_frame_release(&f);
        if (!*topo)
            rc = TBON_EFORMAT;
    }
    if (rc == 0)
        return fd;
    close(fd);
    if (w.status == TB_WELCOME_TAKEN)
        return tb_error_set(err, TBON_EBUSY, "rank %u: the session has a front-end, or "
                            "another one is reattaching", c->rank);
    return tb_error_set(err, rc == TBON_EAUTH ? TBON_EAUTH : rc, "rank %u at %s port %u: %s%s",
                        c->rank, c->host, c->port, e2.msg, rc == TBON_EAUTH
                        ? " (a session file of another session, or a wrong secret?)" : "");
}

/* Claim every child in rank order (so of two front-ends that race, the one
 * the first child took wins everywhere). fds[i] -1 for a child that did not
 * answer; the newest topology in *topo, its view in *view. 0 with at least
 * one claimed, else an error (every claim closed). */
static int claim_all(const sfile_t *sf, int *fds, tb_topology_t **topo, uint64_t *view,
                     int64_t dl, tbon_error_t *err)
{
    size_t got = 0;
    tbon_error_t first = { 0 };
    for (size_t i = 0; i < sf->nchild; i++)
        fds[i] = -1;
    for (size_t i = 0; i < sf->nchild; i++) {
        tb_topology_t *t = NULL;
        uint64_t v = 0;
        tbon_error_t e2 = { 0 };
        fds[i] = claim(sf, &sf->child[i], dl, &t, &v, &e2);
        if (fds[i] >= 0) {
            got++;
            if (!*topo || v > *view) {
                tb_topology_destroy(*topo);
                *topo = t;
                *view = v;
            } else {
                tb_topology_destroy(t);
            }
            continue;
        }
        if (!first.code)
            first = e2;
        if (e2.code == TBON_EBUSY || e2.code == TBON_EAUTH) {
            first = e2;
            got = 0;
            break;
        }
        TB_WARN("session", "%s", e2.msg);
    }
    if (got)
        return 0;
    for (size_t i = 0; i < sf->nchild; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    tb_topology_destroy(*topo);
    *topo = NULL;
    if (first.code == TBON_ECLOSED)
        return tb_error_set(err, TBON_ECLOSED, "the session has ended: %s", first.msg);
    return tb_error_set(err, first.code ? first.code : TBON_ECLOSED, "%s", first.msg);
}

/* The plug-ins the session had, in id order (the file lists them so), as
 * tbon_fe_load_filter loads any: each must get its old id. */
static int load_filters(tbon_net_t *net, const sfile_t *sf, tbon_error_t *err)
{
    for (size_t i = 0; i < sf->nfilter; i++) {
        const struct sf_filter *x = &sf->filter[i];
        int id = tbon_fe_load_filter(net, x->path, x->func);
        if (id != x->id)
            return tb_error_set(err, TBON_EFILTER, "the session's filter %d (%s in %s): %s",
                                x->id, x->func, x->path, id < 0 ? tbon_net_error(net)
                                : "loaded under another id");
    }
    return 0;
}

/* The new front-end's network over topo (taken), its node started. */
static tbon_net_t *new_fe(const tbon_fe_options_t *o, const sfile_t *sf, tb_topology_t *topo,
                          uint64_t view, const int *fds, tbon_error_t *err)
{
    tbon_net_t *net = tb_net_alloc(1);
    if (!net || tb_config_load(&net->conf, err) != 0) {
        if (net && !err->code)
            tb_error_set(err, TBON_ENOMEM, "out of memory");
        tb_net_free(net);
        tb_topology_destroy(topo);
        return NULL;
    }
    net->rank = 0;
    net->progress = o->progress;
    net->progress_arg = o->progress_arg;
    net->topo = tb_topology_clone(topo);
    net->rwait = calloc(sf->nchild, sizeof *net->rwait);
    for (size_t i = 0; net->rwait && i < sf->nchild; i++)
        if (fds[i] >= 0)
            net->rwait[net->nrwait++] = sf->child[i].rank;
    tb_node_config_t cfg = tb_fe_config(o, &net->conf, topo, "", NULL, NULL);
    cfg.session = sf->s;
    cfg.reattach = 1;
    cfg.view_base = view;
    if (!net->topo || !net->rwait || tb_fe_session_opts(net, o, &cfg, err)) {
        if (!err->code)
            tb_error_set(err, TBON_ENOMEM, "out of memory");
        tb_net_free(net);
        tb_topology_destroy(topo);
        return NULL;
    }
    tb_node_cbs_t cbs = tb_net_callbacks(net);
    net->node = tb_node_new(&cfg, &cbs, err);
    if (!net->node || tb_node_start(net->node) || load_filters(net, sf, err) ||
        !tb_fe_wait_ready(net)) {
        if (net->node) {
            tb_cmd_t *c = tb_cmd_shutdown();
            if (c)
                tb_node_post(net->node, c);
            tb_node_destroy(net->node);
        }
        if (!err->code)
            tb_error_set(err, TBON_ENOMEM, "cannot start the front-end's node");
        tb_net_free(net);
        return NULL;
    }
    return net;
}

/* Tell each claimed child where we listen ('R', the port), and wait for
 * their adoptions (until dl). */
static int take_children(tbon_net_t *net, const sfile_t *sf, int *fds, int64_t dl,
                         tbon_error_t *err)
{
    uint16_t port = tb_node_port(net->node);
    uint8_t word[3] = { 'R', (uint8_t)(port & 0xff), (uint8_t)(port >> 8) };
    for (size_t i = 0; i < sf->nchild; i++) {
        if (fds[i] < 0)
            continue;
        if (send(fds[i], word, sizeof word, MSG_NOSIGNAL) != (ssize_t)sizeof word)
            TB_WARN("session", "rank %u: its claim ended before our word", sf->child[i].rank);
        close(fds[i]);
        fds[i] = -1;
    }
    pthread_mutex_lock(&net->mu);
    while (net->nrwait && !net->closed) {
        struct timespec ts;
        int64_t left = dl - tb_now_ms();
        if (left <= 0)
            break;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += left / 1000;
        ts.tv_nsec += (left % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        tb_net_wait_until(net, &ts);
    }
    size_t left = net->nrwait;
    tbon_rank_t first = left ? net->rwait[0] : 0;
    pthread_mutex_unlock(&net->mu);
    if (left == 0)
        return 0;
    return tb_error_set(err, TBON_ETIMEOUT, "%zu of the old front-end's children (rank %u "
                        "first) were not adopted in time", left, first);
}

tbon_net_t *tbon_fe_reattach(const char *file, const tbon_fe_options_t *opts,
                             tbon_error_t *err)
{
    tbon_fe_options_t o = { 0 };
    if (opts)
        o = *opts;
    if (!o.session_file || !*o.session_file)
        o.session_file = file;      /* it stays with the session */
    tbon_error_t local;
    if (!err)
        err = &local;
    tb_error_clear(err);
    tb_log_set_identity(0, "fe");
    if (!file || !*file) {
        tb_error_set(err, TBON_EINVAL, "tbon_fe_reattach needs a session file");
        return NULL;
    }
    sfile_t sf;
    if (tb_crypto_init(err) || sf_read(&sf, file, err))
        return NULL;
    int64_t t0 = tb_now_ms();
    int to = o.startup_timeout_ms > 0 ? o.startup_timeout_ms : 30000;
    int *fds = calloc(sf.nchild, sizeof *fds);
    tb_topology_t *topo = NULL;
    uint64_t view = 0;
    if (!fds || claim_all(&sf, fds, &topo, &view, t0 + (to < 5000 ? to : 5000), err)) {
        if (!fds)
            tb_error_set(err, TBON_ENOMEM, "out of memory");
        free(fds);
        sf_free(&sf);
        return NULL;
    }
    /* Children that did not answer have died meanwhile: dead here too. */
    for (size_t i = 0; i < sf.nchild; i++)
        if (fds[i] < 0 && sf.child[i].rank < tb_topology_size(topo))
            tb_report_failure(topo, sf.child[i].rank,
                              tb_topology_incarnation(topo, sf.child[i].rank));
    /* The topology stays as the children have it, rank 0's host too (the
     * views agree): on another host, the new FE is reached at the address
     * its claims came from (docs/fault-tolerance.md, "The root"). */
    tbon_net_t *net = topo ? new_fe(&o, &sf, topo, view, fds, err) : NULL;
    if (!net) {
        for (size_t i = 0; i < sf.nchild; i++)
            if (fds[i] >= 0)
                close(fds[i]);
    } else if (take_children(net, &sf, fds, t0 + to, err)) {
        tbon_net_destroy(net);
        net = NULL;
    } else {
        tb_fe_ready(net);
        TB_INFO("session", "reattached to %s in %lld ms", file, (long long)(tb_now_ms() - t0));
    }
    free(fds);
    sf_free(&sf);
    return net;
}
