/* net_direct.c - messages from any process to any back-end or the FE
 * (docs/user-guide.md, "Messages between processes"): the calls that send;
 * tbon_net_recv_direct is in net.c beside tbon_net_recv, and the routing in
 * node/node_direct.c. */
#include "api/net_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codec/ctl.h"
#include "codec/packet_int.h"
#include "net/conn.h"
#include "topo/topology.h"

/* Whether rank r can take messages (a back-end or the FE, not failed), or
 * why not in *why. Under net->mu. */
static const char *unfit(const tbon_net_t *net, tbon_rank_t r)
{
    if (r >= tb_topology_size(net->topo))
        return "is not a rank of the tree";
    if (tb_topology_role(net->topo, r) == TB_ROLE_COMMNODE)
        return "is a commnode (messages go to back-ends and the front-end)";
    if (!tb_topology_alive(net->topo, r))
        return "has failed or left";
    return NULL;
}

/* Send packet p (taken) to dst[0..n) (taken; NULL and 0 with flags
 * TB_DIRECT_BCAST). */
static int submit(tbon_net_t *net, tbon_rank_t *dst, size_t n, uint32_t flags, tbon_packet_t *p)
{
    int rc = 0;
    const char *why = NULL;
    tbon_rank_t bad = 0;
    size_t len;
    tb_packet_payload(p, &len);
    pthread_mutex_lock(&net->mu);
    int closed = net->closed;
    for (size_t i = 0; i < n && !why; i++)
        if ((why = unfit(net, dst[i])))
            bad = dst[i];
    pthread_mutex_unlock(&net->mu);
    if (closed || (net->node && tb_node_stopped(net->node)))
        rc = tb_net_fail(net, TBON_ECLOSED, "the network has shut down");
    else if (why)
        rc = tb_net_fail(net, TBON_EINVAL, "rank %u %s: nothing sent", bad, why);
    else if (len > tb_conn_max_packet())
        rc = tb_net_fail(net, TBON_ETOOBIG, "a message of %zu bytes is over the session's "
                         "maximum of %zu bytes (TBON_MAX_PACKET): not sent", len,
                         tb_conn_max_packet());
    if (rc) {
        free(dst);
        tbon_packet_unref(p);
        return rc;
    }
    tb_cmd_t *c = tb_cmd_direct(dst, n, flags, p, tb_net_pkt_size(p));
    if (!c)
        return tb_net_fail(net, TBON_ENOMEM, "out of memory");
    /* counted now: the command may wait in the node's mailbox */
    tb_dlog_window_add(net->node, tb_dlog_bytes(c->u.direct.pkt));
    tb_net_submit_burst(net, c);
    /* Back-pressure: past the window, the next send waits here until the
     * destinations acknowledge (they do as their applications take them). */
    if (tb_node_dlog_full(net->node) && tb_net_wait_dlog(net) != 0)
        return tb_net_fail(net, TBON_ECLOSED, "the network has shut down");
    return 0;
}

/* The packet of tag and fmt, or NULL with the error set on net and its
 * code in *rc. */
static tbon_packet_t *make(tbon_net_t *net, int tag, const char *fmt, va_list ap, int *rc)
{
    if (tag < TBON_FIRST_APP_TAG) {
        *rc = tb_net_fail(net, TBON_EINVAL, "tag %d is reserved (an application's tags start "
                          "at %d)", tag, TBON_FIRST_APP_TAG);
        return NULL;
    }
    tbon_error_t err;
    tbon_packet_t *p = tb_packet_vcreate(tag, fmt, ap, &err);
    if (!p)
        *rc = tb_net_fail(net, err.code, "%s", err.msg);
    return p;
}

/* Make the packet of tag and fmt and send it to to[0..n) (copied; NULL
 * and 0 with flags TB_DIRECT_BCAST). */
static int vsend(tbon_net_t *net, const tbon_rank_t *to, size_t n, uint32_t flags, int tag,
                 const char *fmt, va_list ap)
{
    int rc = TBON_ENOMEM;
    tbon_packet_t *p = make(net, tag, fmt, ap, &rc);
    if (!p)
        return rc;
    tbon_rank_t *dst = n ? malloc(n * sizeof *dst) : NULL;
    if (n && !dst) {
        tbon_packet_unref(p);
        return tb_net_fail(net, TBON_ENOMEM, "out of memory");
    }
    if (n)
        memcpy(dst, to, n * sizeof *dst);
    /* (it may wait for the window: a destroy wakes it) */
    tb_net_call_enter(net);
    return tb_net_call_leave(net, submit(net, dst, n, flags, p));
}

int tbon_net_send_to(tbon_net_t *net, tbon_rank_t to, int tag, const char *fmt, ...)
{
    if (!net || !fmt)
        return tb_net_fail(net, TBON_EINVAL, "NULL argument");
    va_list ap;
    va_start(ap, fmt);
    int rc = vsend(net, &to, 1, 0, tag, fmt, ap);
    va_end(ap);
    return rc;
}

int tbon_net_multicast(tbon_net_t *net, const tbon_rank_t *to, size_t n, int tag,
                       const char *fmt, ...)
{
    if (!net || !fmt || (!to && n))
        return tb_net_fail(net, TBON_EINVAL, "NULL argument");
    if (n == 0)
        return tb_net_fail(net, TBON_EINVAL, "no destination");
    va_list ap;
    va_start(ap, fmt);
    int rc = vsend(net, to, n, 0, tag, fmt, ap);
    va_end(ap);
    return rc;
}

int tbon_net_broadcast(tbon_net_t *net, int tag, const char *fmt, ...)
{
    if (!net || !fmt)
        return tb_net_fail(net, TBON_EINVAL, "NULL argument");
    va_list ap;
    va_start(ap, fmt);
    int rc = vsend(net, NULL, 0, TB_DIRECT_BCAST, tag, fmt, ap);
    va_end(ap);
    return rc;
}
