/* ctl.c - the calls over any control message (tb_ctl_encode,
 * tb_ctl_decode, tb_ctl_free): each message's own encoder and decoder are
 * in ctl_msgs.c, the table of their names, directions and owners in
 * ctl_table.c. */
#include "codec/ctl.h"
#include "codec/ctl_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/packet_int.h"
#include "util/error.h"

/* ---- any message ---- */

void tb_ctl_free(int op, void *mp)
{
    if (!mp)
        return;
#define AS(type) ((type *)mp)
    switch (op) {
    case TB_CTL_FAIL:       free(UNCONST(AS(tb_ctl_fail_t)->msg)); break;
    case TB_CTL_STREAM:     free(UNCONST(AS(tb_ctl_stream_t)->members)); break;
    case TB_CTL_GRAFT:      free(UNCONST(AS(tb_ctl_graft_t)->def.members)); break;
    case TB_CTL_FILTER:
        free(UNCONST(AS(tb_ctl_filter_t)->path));
        free(UNCONST(AS(tb_ctl_filter_t)->func));
        break;
    case TB_CTL_PARAMS:     free(UNCONST(AS(tb_ctl_params_t)->payload)); break;
    case TB_CTL_STREAM_ERR: free(UNCONST(AS(tb_ctl_stream_err_t)->msg)); break;
    case TB_CTL_LAUNCH: {
        tb_ctl_launch_t *l = mp;
        free(UNCONST(l->backend_exe));
        tb_ctl_free_strv(UNCONST(l->argv), l->nargv);
        free(UNCONST(l->rsh));
        free(UNCONST(l->commnode));
        break;
    }
    case TB_CTL_PORTS:
        free(UNCONST(AS(tb_ctl_ports_t)->ranks));
        free(UNCONST(AS(tb_ctl_ports_t)->ports));
        break;
    case TB_CTL_VIEW:       free(UNCONST(AS(tb_ctl_view_t)->ch)); break;
    case TB_CTL_CHECKED:
        free(UNCONST(AS(tb_ctl_checked_t)->agree));
        free(UNCONST(AS(tb_ctl_checked_t)->bad));
        break;
    case TB_CTL_ATTR: {
        tb_ctl_attr_t *a = mp;
        tb_ctl_free_strv(UNCONST(a->keys), a->n);
        tb_ctl_free_strv(UNCONST(a->values), a->n);
        free(UNCONST(a->dead));
        free(UNCONST(a->versions));
        break;
    }
    case TB_CTL_JOIN_ACK:   free(UNCONST(AS(tb_ctl_join_ack_t)->host)); break;
    case TB_CTL_MISSING:
        free(UNCONST(AS(tb_ctl_missing_t)->msg));
        free(UNCONST(AS(tb_ctl_missing_t)->moved));
        break;
    case TB_CTL_FILTER_FAULT:
        free(UNCONST(AS(tb_ctl_filter_fault_t)->msg));
        free(UNCONST(AS(tb_ctl_filter_fault_t)->sources));
        break;
    case TB_CTL_DIRECT:
        free(UNCONST(AS(tb_ctl_direct_t)->dst));
        free(UNCONST(AS(tb_ctl_direct_t)->dseq));
        free(UNCONST(AS(tb_ctl_direct_t)->body));
        break;
    case TB_CTL_PING:       free(UNCONST(AS(tb_ctl_ping_t)->route)); break;
    case TB_CTL_PERF_DATA:
        free(UNCONST(AS(tb_ctl_perf_data_t)->node));
        free(UNCONST(AS(tb_ctl_perf_data_t)->strm));
        break;
    default:
        break;
    }
#undef AS
}

void tb_ctl_msg_free(tb_ctl_msg_t *m)
{
    if (m) {
        tb_ctl_free(m->op, &m->u);
        memset(&m->u, 0, sizeof m->u);
    }
}

tbon_packet_t *tb_ctl_encode(const tb_ctl_msg_t *m)
{
    switch (m->op) {
    case TB_CTL_READY:      return tb_ctl_ready_encode(&m->u.ready);
    case TB_CTL_FAIL:       return tb_ctl_fail_encode(&m->u.fail);
    case TB_CTL_STREAM:     return tb_ctl_stream_encode(&m->u.stream);
    case TB_CTL_FILTER:     return tb_ctl_filter_encode(&m->u.filter);
    case TB_CTL_PARAMS:     return tb_ctl_params_encode(&m->u.params);
    case TB_CTL_SHUTDOWN:   return tb_ctl_shutdown_encode(&m->u.shutdown);
    case TB_CTL_STREAM_ERR: return tb_ctl_stream_err_encode(&m->u.stream_err);
    case TB_CTL_PORT:       return tb_ctl_port_encode(&m->u.port);
    case TB_CTL_LAUNCH:     return tb_ctl_launch_encode(&m->u.launch);
    case TB_CTL_PORTS:      return tb_ctl_ports_encode(&m->u.ports);
    case TB_CTL_REPORT:     return tb_ctl_report_encode(&m->u.report);
    case TB_CTL_ADOPT_ACK:  return tb_ctl_adopt_ack_encode(&m->u.adopt_ack);
    case TB_CTL_GRAFT:      return tb_ctl_graft_encode(&m->u.graft);
    case TB_CTL_VIEW:       return tb_ctl_view_encode(&m->u.view);
    case TB_CTL_VIEW_ACK:   return tb_ctl_view_ack_encode(&m->u.view_ack);
    case TB_CTL_CHECK:      return tb_ctl_check_encode(&m->u.check);
    case TB_CTL_CHECKED:    return tb_ctl_checked_encode(&m->u.checked);
    case TB_CTL_ATTR:       return tb_ctl_attr_encode(&m->u.attr);
    case TB_CTL_ATTR_SYNC:  return tb_ctl_attr_sync_encode(&m->u.attr_sync);
    case TB_CTL_JOIN_ACK:   return tb_ctl_join_ack_encode(&m->u.join_ack);
    case TB_CTL_LEAVE:      return tb_ctl_leave_encode(&m->u.leave);
    case TB_CTL_MISSING:    return tb_ctl_missing_encode(&m->u.missing);
    case TB_CTL_FILTER_FAULT: return tb_ctl_filter_fault_encode(&m->u.filter_fault);
    case TB_CTL_STREAM_END: return tb_ctl_stream_end_encode(&m->u.stream_end);
    case TB_CTL_DONE:       return tb_ctl_done_encode(&m->u.done);
    case TB_CTL_STABLE:     return tb_ctl_stable_encode(&m->u.stable);
    case TB_CTL_PING:       return tb_ctl_ping_encode(&m->u.ping);
    case TB_CTL_PERF:       return tb_ctl_perf_encode(&m->u.perf);
    case TB_CTL_PERF_DATA:  return tb_ctl_perf_data_encode(&m->u.perf_data);
    case TB_CTL_CATCH_UP:   return tb_ctl_catch_up_encode(&m->u.catch_up);
    case TB_CTL_DIRECT:     return tb_ctl_direct_encode(&m->u.direct);
    default:                return NULL;
    }
}

int tb_ctl_decode(int op, const tbon_packet_t *p, tb_ctl_msg_t *m, tbon_error_t *err)
{
    memset(m, 0, sizeof *m);
    m->op = op;
    switch (op) {
    case TB_CTL_READY:      return tb_ctl_ready_decode(p, &m->u.ready, err);
    case TB_CTL_FAIL:       return tb_ctl_fail_decode(p, &m->u.fail, err);
    case TB_CTL_STREAM:     return tb_ctl_stream_decode(p, &m->u.stream, err);
    case TB_CTL_FILTER:     return tb_ctl_filter_decode(p, &m->u.filter, err);
    case TB_CTL_PARAMS:     return tb_ctl_params_decode(p, &m->u.params, err);
    case TB_CTL_SHUTDOWN:   return tb_ctl_shutdown_decode(p, &m->u.shutdown, err);
    case TB_CTL_STREAM_ERR: return tb_ctl_stream_err_decode(p, &m->u.stream_err, err);
    case TB_CTL_PORT:       return tb_ctl_port_decode(p, &m->u.port, err);
    case TB_CTL_LAUNCH:     return tb_ctl_launch_decode(p, &m->u.launch, err);
    case TB_CTL_PORTS:      return tb_ctl_ports_decode(p, &m->u.ports, err);
    case TB_CTL_REPORT:     return tb_ctl_report_decode(p, &m->u.report, err);
    case TB_CTL_ADOPT_ACK:  return tb_ctl_adopt_ack_decode(p, &m->u.adopt_ack, err);
    case TB_CTL_GRAFT:      return tb_ctl_graft_decode(p, &m->u.graft, err);
    case TB_CTL_VIEW:       return tb_ctl_view_decode(p, &m->u.view, err);
    case TB_CTL_VIEW_ACK:   return tb_ctl_view_ack_decode(p, &m->u.view_ack, err);
    case TB_CTL_CHECK:      return tb_ctl_check_decode(p, &m->u.check, err);
    case TB_CTL_CHECKED:    return tb_ctl_checked_decode(p, &m->u.checked, err);
    case TB_CTL_ATTR:       return tb_ctl_attr_decode(p, &m->u.attr, err);
    case TB_CTL_ATTR_SYNC:  return tb_ctl_attr_sync_decode(p, &m->u.attr_sync, err);
    case TB_CTL_JOIN_ACK:   return tb_ctl_join_ack_decode(p, &m->u.join_ack, err);
    case TB_CTL_LEAVE:      return tb_ctl_leave_decode(p, &m->u.leave, err);
    case TB_CTL_MISSING:    return tb_ctl_missing_decode(p, &m->u.missing, err);
    case TB_CTL_FILTER_FAULT: return tb_ctl_filter_fault_decode(p, &m->u.filter_fault, err);
    case TB_CTL_STREAM_END: return tb_ctl_stream_end_decode(p, &m->u.stream_end, err);
    case TB_CTL_DONE:       return tb_ctl_done_decode(p, &m->u.done, err);
    case TB_CTL_STABLE:     return tb_ctl_stable_decode(p, &m->u.stable, err);
    case TB_CTL_PING:       return tb_ctl_ping_decode(p, &m->u.ping, err);
    case TB_CTL_PERF:       return tb_ctl_perf_decode(p, &m->u.perf, err);
    case TB_CTL_PERF_DATA:  return tb_ctl_perf_data_decode(p, &m->u.perf_data, err);
    case TB_CTL_CATCH_UP:   return tb_ctl_catch_up_decode(p, &m->u.catch_up, err);
    case TB_CTL_DIRECT:     return tb_ctl_direct_decode(p, &m->u.direct, err);
    default:
        return tb_error_set(err, TBON_EFORMAT, "control message %d: no such op", op);
    }
}

int tb_ctl_decode_bytes(int op, const void *buf, size_t len, tb_ctl_msg_t *m, tbon_error_t *err)
{
    memset(m, 0, sizeof *m);
    m->op = op;
    if (!tb_ctl_info(op))
        return tb_error_set(err, TBON_EFORMAT, "control message %d: no such op", op);
    tbon_error_t perr;
    tbon_packet_t *p = tb_packet_decode(buf, len, op, 0, TBON_RANK_NONE, &perr);
    if (!p)
        return tb_error_set(err, perr.code, "control message %s: %s", tb_ctl_name(op),
                            perr.msg);
    int rc = tb_ctl_decode(op, p, m, err);
    tbon_packet_unref(p);
    return rc;
}
