/* ctl.c - the control messages' table (ctl.h) and the calls over any
 * message (tb_ctl_encode, tb_ctl_decode, tb_ctl_free); each message's own
 * encoder and decoder are in ctl_msgs.c. */
#include "codec/ctl.h"
#include "codec/ctl_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/packet_int.h"
#include "util/error.h"

#define N_  TB_CTL_OWN_NODE
#define FT_ TB_CTL_OWN_FT
#define V_  TB_CTL_OWN_VIEW
#define A_  TB_CTL_OWN_ATTR
#define J_  TB_CTL_OWN_JOIN
#define AD_ TB_CTL_OWN_ADOPT

static const tb_ctl_info_t table[] = {
    { TB_CTL_READY, "READY", TB_CTL_UP, N_, "%ud",
      "count: processes in the subtree, once all are connected" },
    { TB_CTL_FAIL, "FAIL", TB_CTL_UP, N_, "%d %s",
      "code, message: start-up failed (the first failure goes up unchanged)" },
    { TB_CTL_STREAM, "STREAM", TB_CTL_DOWN, N_, "%ud %d %d %ud %d %aud",
      "id, up filter, sync mode (with TB_STREAM_BCAST 0x100: over every back-end; "
      "TB_STREAM_CATCHUP 0x200: from an adopter, 8.3), timeout ms, down filter, member "
      "back-ends; only to children whose subtree holds a member (and, for a broadcast stream, "
      "every commnode)" },
    { TB_CTL_FILTER, "FILTER", TB_CTL_DOWN, N_, "%d %s %s",
      "id, path, function: load that filter (to every child, back-ends too)" },
    { TB_CTL_PARAMS, "PARAMS", TB_CTL_DOWN, N_, "%ud %d %d %auc",
      "stream, which (up 0, down 1, sync 2), the parameter packet's tag and encoded "
      "payload" },
    { TB_CTL_SHUTDOWN, "SHUTDOWN", TB_CTL_DOWN, N_, "%ud",
      "0: the session ends: forward it, wait for the children to leave, leave" },
    { TB_CTL_STREAM_ERR, "STREAM_ERR", TB_CTL_UP, N_, "%ud %s",
      "stream (0: a filter load), message: a filter failed" },
    { TB_CTL_PORT, "PORT", TB_CTL_UP, N_, "%ud %ud",
      "rank, port (0-65535; 0: not listening): where the sender listens, sent up by every "
      "process at start-up" },
    { TB_CTL_LAUNCH, "LAUNCH", TB_CTL_DOWN, J_, "%s %as %s %s",
      "back-end program (\"\": the back-ends come by themselves, in attach mode and under "
      "Slurm), its argv, remote shell (\"\": $TBON_RSH or the default), commnode program "
      "(\"\": the receiver's own; \"-\": commnode children come by themselves, under Slurm); "
      "once, to a new commnode after the topology" },
    { TB_CTL_PORTS, "PORTS", TB_CTL_DOWN, FT_, "%aud %aud %d",
      "ranks, ports (0-65535) of the FE and every listening commnode (as many), heartbeat "
      "timeout ms "
      "(0: none); once the tree is up" },
    { TB_CTL_REPORT, "REPORT", TB_CTL_UP, FT_, "%d %ud %ud %ud %auld",
      "kind (1 failed, 2 adopted, 4 joined, 5 left), rank, new parent, incarnation, "
      "5 recovery times in us (new_parent connect compensate cleanup) and 1 if data "
      "may be lost" },
    { TB_CTL_ADOPT_ACK, "ADOPT_ACK", TB_CTL_DOWN, AD_, "%ud",
      "1: the adopter took the orphan; first on the new connection" },
    { TB_CTL_GRAFT, "GRAFT", TB_CTL_UP, FT_, "%ud %d %d %ud %d %aud %uld %uld",
      "as STREAM, then the last wave key sent up and the last request seen; "
      "from an adopted child" },
    { TB_CTL_VIEW, "VIEW", TB_CTL_DOWN, V_, "%uld %uld %ad %aud %aud %aud %as %aud %aud",
      "version, the version it follows (0: whole), and per change (as many each): kind "
      "(1-6), rank, parent, incarnation, host, local id, port" },
    { TB_CTL_VIEW_ACK, "VIEW_ACK", TB_CTL_UP, V_, "%uld %uld %d",
      "version applied here, version the subtree has applied (<= it), 1 to ask for "
      "every version after the first" },
    { TB_CTL_CHECK, "CHECK", TB_CTL_DOWN, V_, "%uld %uld %uld",
      "check id (not 0), the FE's view version and digest" },
    { TB_CTL_CHECKED, "CHECKED", TB_CTL_UP, V_, "%uld %aud %aud",
      "check id, ranks of the subtree that agree, those that do not" },
    { TB_CTL_ATTR, "ATTR", TB_CTL_UP, A_, "%ud %as %as %auc %auld",
      "source rank, keys, values (\"\" for a tombstone), tombstone flags (0 or 1), "
      "versions (as many each)" },
    { TB_CTL_ATTR_SYNC, "ATTR_SYNC", TB_CTL_DOWN, A_, "%ud",
      "0: send your whole map up and ask your children (after an adoption above)" },
    { TB_CTL_JOIN_ACK, "JOIN_ACK", TB_CTL_DOWN, J_, "%ud %ud %s %ud %ud",
      "rank, parent, the parent's host and port (1-65535), incarnation; FE to a "
      "joining process on its JOIN connection" },
    { TB_CTL_LEAVE, "LEAVE", TB_CTL_UP, N_, "%ud", "0: a back-end leaves in order" },
    { TB_CTL_MISSING, "MISSING", TB_CTL_UP, N_, "%d %ud %ud %s %aud",
      "code, rank, the node that launches its children in its place, message (its rank, "
      "host and why), those children (none: its whole subtree is left out): a node left out "
      "of the start-up, applied on the way up" },
    { TB_CTL_FILTER_FAULT, "FILTER_FAULT", TB_CTL_UP, N_, "%ud %d %ud %d %uld %aud %s",
      "stream, filter id, the rank it ran on, signal (0: it ran past its limit; -1: it "
      "returned an error over a wave's input), the wave's key (0: none; that wave's outcome "
      "at the FE is this error), the ranks whose packets were its input, message: a plug-in "
      "filter crashed or hung, or a filter returned an error over a wave" },
    { TB_CTL_STREAM_END, "STREAM_END", TB_CTL_DOWN, N_, "%ud",
      "stream id: the stream ends here (tbon_stream_close); forwarded as STREAM was" },
    { TB_CTL_DONE, "DONE", TB_CTL_DOWN, N_, "%ud %uld",
      "stream id, wave key: the FE has delivered every wave of an exact stream up to the key "
      "(what is kept to send again after an adoption may go); to the children taking part" },
};

const tb_ctl_info_t *tb_ctl_info(int op)
{
    if (op < TB_CTL_READY || op > TB_CTL_OP_MAX)
        return NULL;
    return &table[op - TB_CTL_READY];
}

const char *tb_ctl_name(int op)
{
    const tb_ctl_info_t *i = tb_ctl_info(op);
    return i ? i->name : "?";
}

const char *tb_ctl_dir_name(int dir)
{
    return dir == TB_CTL_UP ? "up" : dir == TB_CTL_DOWN ? "down" : dir == TB_CTL_BOTH ? "both"
                                                                                       : "?";
}

const char *tb_ctl_owner_name(int owner)
{
    static const char *const names[] = { "?", "node", "ft", "view", "attr", "join", "adopt" };
    return owner >= TB_CTL_OWN_NODE && owner <= TB_CTL_OWN_ADOPT ? names[owner] : names[0];
}

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
