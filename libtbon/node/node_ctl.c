/* node_ctl.c - a new child's connection (on_conn) and the control messages
 * the node itself owns (codec/ctl.c's table gives the others to the fault
 * tolerance, membership and attribute parts): readiness, failures, streams,
 * filters, parameters, shutdown. */
#include "node/node_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/error.h"
#include "util/log.h"
#include "proc/relay.h"
#include "proc/sshmux.h"
#include "codec/packet_int.h"
#include "net/sock.h"

void tb_node_on_conn(tb_node_t *n, tb_cmd_t *cmd)
{
    int i = tb_node_child_index(n, cmd->u.conn.rank);
    if (i < 0 || n->child[i].conn || n->child[i].state == CH_GONE) {
        TB_WARN("conn", "unexpected data connection from rank %u; closed", cmd->u.conn.rank);
        return;
    }
    tb_child_t *ch = &n->child[i];
    ch->conn = tb_node_conn_new(n, cmd->u.conn.fd, ch->rank, i);
    if (!ch->conn)
        return;
    cmd->u.conn.fd = -1;
    tb_node_watch(n, ch->conn, EPOLLIN);
    ch->state = CH_CONNECTED;
    n->last_conn = tb_now_ms();     /* the start-up goes on (node_missing.c) */
    /* Every child gets the whole topology first (docs/protocol.md 7.1),
     * serialised and compressed once for all of them. */
    if (!n->topo_frame) {
        uint8_t *buf;
        size_t len;
        if (tb_topology_serialize(n->topo, &buf, &len) == 0) {
            tb_frame_hdr_t h = { .type = TB_FRAME_TOPOLOGY, .source = n->rank };
            if (tb_frame_build(&h, buf, len, 1, &n->topo_frame, &n->topo_frame_len) != 0)
                n->topo_frame = NULL;
            free(buf);
        }
    }
    uint8_t *copy = n->topo_frame ? malloc(n->topo_frame_len) : NULL;
    if (copy) {
        memcpy(copy, n->topo_frame, n->topo_frame_len);
        tb_conn_send_raw(ch->conn, copy, n->topo_frame_len);
    }
    /* A commnode learns next how to launch its own children. */
    if (!ch->is_be) {
        size_t na = 0;
        while (n->cfg.backend_argv && n->cfg.backend_argv[na])
            na++;
        /* Under Slurm every process is started by a step: the commnode
         * launches nothing ("" and "-", docs/protocol.md). */
        int steps = n->cfg.slurm;
        tb_ctl_launch_t l = {
            .backend_exe = n->cfg.backend_exe && !steps ? n->cfg.backend_exe : "",
            .argv = n->cfg.backend_argv, .nargv = na,
            .rsh = n->cfg.rsh ? n->cfg.rsh : "",
            .commnode = steps ? "-" : n->cfg.commnode_path ? n->cfg.commnode_path : "",
        };
        tb_node_send_ctl(n, ch->conn, TB_CTL_LAUNCH, tb_ctl_launch_encode(&l));
    }
    /* Filters loaded so far reach late joiners too (attach mode), back-ends
     * as well: they keep a state-recoverable plug-in's state over what they
     * send, for an adoption. */
    tb_stream_filters_to(n, ch->conn, 0);
    if (tb_node_ending(n))
        tb_node_send_ctl(n, ch->conn, TB_CTL_SHUTDOWN,
                         tb_ctl_shutdown_encode(&(tb_ctl_shutdown_t){ 0 }));
    if (ch->is_be) {
        ch->state = CH_READY;
        ch->count = 1;
        tb_node_check_ready(n);
    }
    tb_node_ft_child(n, TB_FT_EV_CHILD_UP, (size_t)i);     /* ft answers a joined one */
}

/* A node message (TB_CTL_OWN_NODE) from the parent: m decoded from p. */
static void ctl_down(tb_node_t *n, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    switch (m->op) {
    case TB_CTL_STREAM: {
        const tb_ctl_stream_t *s = &m->u.stream;
        if (s->sync & TB_STREAM_CATCHUP)
            tb_stream_caught_up(n, s);
        else
            tb_stream_create(n, s->id, s->up, s->sync, s->timeout_ms, s->down, s->members,
                             s->nmembers);
        break;
    }
    case TB_CTL_FILTER: {
        const tb_ctl_filter_t *f = &m->u.filter;
        tbon_error_t err;
        if (tb_filter_reg_load(n->filters, f->path, f->func, f->id, &err) < 0) {
            char msg[1200], host[256] = "";
            if (gethostname(host, sizeof host - 1) != 0)
                snprintf(host, sizeof host, "?");
            /* "filter ID ": what tbon_fe_load_filter, waiting, looks for */
            snprintf(msg, sizeof msg, "filter %d did not load at rank %u (%s on %s): %s", f->id,
                     n->rank, tb_role_name(n->role), host, err.msg);
            TB_ERROR("filter", "%s", msg);
            tb_node_send_ctl(n, n->parent, TB_CTL_STREAM_ERR,
                             tb_ctl_stream_err_encode(&(tb_ctl_stream_err_t){ 0, msg }));
        } else {
            tb_node_filter_loaded(n);
        }
        for (size_t i = 0; i < n->nchild; i++)
            if (n->child[i].conn)
                tb_node_send_ctl(n, n->child[i].conn, TB_CTL_FILTER, tbon_packet_ref(p));
        break;
    }
    case TB_CTL_STREAM_END:
        tb_stream_end(n, m->u.stream_end.stream);
        break;
    case TB_CTL_DONE:
        tb_exact_done(n, m->u.done.stream, m->u.done.key, 1);
        break;
    case TB_CTL_PING:
        tb_direct_ping(n, -1, &m->u.ping);
        break;
    case TB_CTL_PERF:
        tb_perf_start(n, m->u.perf.id, m->u.perf.wait_ms);
        break;
    case TB_CTL_DIRECT:
        tb_dlog_route(n, -1, &m->u.direct, p);
        break;
    case TB_CTL_PARAMS: {
        const tb_ctl_params_t *pa = &m->u.params;
        tbon_packet_t *q = tb_packet_decode(pa->payload, pa->len, pa->tag, pa->stream, 0, NULL);
        if (q)
            tb_stream_set_params(n, pa->stream, pa->which, q);
        break;
    }
    case TB_CTL_SHUTDOWN:
        if (n->role == TB_ROLE_BE) {
            atomic_store(&n->closed, 1);
            if (n->cbs.status)
                n->cbs.status(n->cbs.arg, TB_NODE_CLOSED, 0, "the front-end shut the session down");
            tb_node_enter(n, TB_LIFE_STOPPED);
        } else {
            tb_node_begin_shutdown(n);
        }
        break;
    default:
        TB_WARN("conn", "control message %s from the parent is not the node's", tb_ctl_name(m->op));
    }
}

/* A node message (TB_CTL_OWN_NODE) from child i: m decoded from p. */
static void ctl_up(tb_node_t *n, size_t i, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    tb_child_t *ch = &n->child[i];
    switch (m->op) {
    case TB_CTL_READY:
        if (ch->state == CH_CONNECTED) {
            ch->state = CH_READY;
            ch->count = m->u.ready.count;
            tb_node_check_ready(n);
        }
        break;
    case TB_CTL_FAIL:
        /* Pass the first failure up unchanged: it names the node. */
        if (n->role == TB_ROLE_FE)
            tb_node_fail(n, m->u.fail.code, "%s", m->u.fail.msg);
        else if (!n->failed) {
            n->failed = 1;
            tb_node_send_ctl(n, n->parent, TB_CTL_FAIL, tbon_packet_ref(p));
        }
        break;
    case TB_CTL_STREAM_ERR:
        if (n->role == TB_ROLE_FE) {
            if (n->cbs.status)
                n->cbs.status(n->cbs.arg, TB_NODE_STREAM_ERROR, (int)m->u.stream_err.stream,
                              m->u.stream_err.msg);
        } else {
            tb_node_send_ctl(n, n->parent, TB_CTL_STREAM_ERR, tbon_packet_ref(p));
        }
        break;
    case TB_CTL_LEAVE:
        ch->leaving = 1;        /* its end that follows is no failure */
        break;
    case TB_CTL_PING:
        tb_direct_ping(n, (int)i, &m->u.ping);
        break;
    case TB_CTL_PERF_DATA:
        tb_perf_on_data(n, i, &m->u.perf_data, p);
        break;
    case TB_CTL_DIRECT:
        tb_dlog_route(n, (int)i, &m->u.direct, p);
        break;
    case TB_CTL_MISSING:
        tb_node_on_missing(n, &m->u.missing, p);
        break;
    case TB_CTL_FILTER_FAULT:
        if (n->role == TB_ROLE_FE)
            tb_stream_on_filter_fault(n, &m->u.filter_fault);
        else
            tb_node_send_ctl(n, n->parent, TB_CTL_FILTER_FAULT, tbon_packet_ref(p));
        break;
    case TB_CTL_PORT: {
        uint32_t r = m->u.port.rank;
        if (r < tb_topology_size(n->topo)) {
            tb_topology_set_port(n->topo, r, (uint16_t)m->u.port.port);
            if (n->role == TB_ROLE_FE) {
                tb_node_write_attach(n);
                if (n->cfg.slurm)
                    tb_node_slurm_next(n);
            }
            else
                tb_node_send_ctl(n, n->parent, TB_CTL_PORT, tbon_packet_ref(p));
        }
        break;
    }
    default:
        TB_WARN("conn", "control message %s from rank %u is not the node's", tb_ctl_name(m->op),
                ch->rank);
    }
}

/* "the parent" or "rank R", for warnings about a control message. */
static const char *ctl_from(const tb_node_t *n, int child, char *buf, size_t cap)
{
    if (child < 0)
        return "the parent";
    snprintf(buf, cap, "rank %u", n->child[child].rank);
    return buf;
}

/* A CONTROL frame from the parent (child < 0) or child i: decoded once, then
 * taken by the module that owns its op (codec/ctl.h's table). */
void tb_node_on_ctl(tb_node_t *n, int child, int op, tbon_packet_t *p)
{
    const tb_ctl_info_t *info = tb_ctl_info(op);
    char b[32];
    if (!info) {
        TB_WARN("conn", "unknown control message %d from %s", op, ctl_from(n, child, b, sizeof b));
        return;
    }
    if (!(info->dir & (child < 0 ? TB_CTL_DOWN : TB_CTL_UP))) {
        TB_WARN("conn", "control message %s from %s goes %s only; ignored", info->name,
                ctl_from(n, child, b, sizeof b), tb_ctl_dir_name(info->dir));
        return;
    }
    tb_ctl_msg_t m;
    tbon_error_t err;
    if (tb_ctl_decode(op, p, &m, &err) != 0) {
        TB_WARN("conn", "from %s: %s; ignored", ctl_from(n, child, b, sizeof b), err.msg);
        return;
    }
    switch (info->owner) {
    case TB_CTL_OWN_NODE:
        if (child < 0)
            ctl_down(n, &m, p);
        else
            ctl_up(n, (size_t)child, &m, p);
        break;
    case TB_CTL_OWN_FT:
    case TB_CTL_OWN_VIEW:
    case TB_CTL_OWN_ATTR:
        n->ft->ctl(n, child, &m, p);    /* ft dispatches by owner */
        break;
    default:
        /* Read before a connection reaches the reactor (join, adoption). */
        TB_WARN("conn", "control message %s from %s is read at start-up only; ignored",
                info->name, ctl_from(n, child, b, sizeof b));
    }
    tb_ctl_msg_free(&m);
}

/* Take the frames a connection has received. */
