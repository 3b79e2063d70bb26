/* ctl_table.c - the control messages' table (ctl.h): each op's name,
 * direction, owner, format and meaning; below the encoders (ctl_msgs.c) and
 * the calls over any message (ctl.c), which both read it. */
#include "codec/ctl.h"
#include "codec/ctl_int.h"

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
    { TB_CTL_CATCH_UP, "CATCH_UP", TB_CTL_UP, FT_, "%ud %d",
      "plug-in filters loaded here (from the first plug-in id on, without a gap), 1 if the "
      "port table is here (else 0): from an adopted child after its grafts; the adopter "
      "sends what it lacks (8.3)" },
    { TB_CTL_DIRECT, "DIRECT", TB_CTL_BOTH, N_, "%ud %ud %uld %d %ud %ud %aud %aud %auc",
      "sender's rank and process tag (random, drawn once), its number for the message (from "
      "1, per sender; 0 in an acknowledgement), the application's tag, flags (1: broadcast, "
      "2: acknowledgement, 4: with 2, the receiver keeps later messages and lacks one), the "
      "broadcast number, the destinations this hop serves and the sender's number for the "
      "message at each, the application's packet encoded: a message between any two "
      "processes, passed towards each destination by the topology (10)" },
    { TB_CTL_STABLE, "STABLE", TB_CTL_DOWN, V_, "%uld",
      "view version: stable (every live process has applied it, every live node has a "
      "parent); from the FE down to every process, which passes it on (9.2)" },
    { TB_CTL_PING, "PING", TB_CTL_BOTH, N_, "%ud %ud %uld %ud %aud",
      "origin, target (any rank), the origin's id, flags (1: the answer), the ranks passed on "
      "the way out (the origin first): a ping, passed towards the target by the topology "
      "and answered back to the origin with the route (10.3)" },
    { TB_CTL_PERF, "PERF", TB_CTL_DOWN, N_, "%uld %ud",
      "gathering id (not 0), ms to wait for the children's answers: performance data asked "
      "for, passed to every child (10.4)" },
    { TB_CTL_PERF_DATA, "PERF_DATA", TB_CTL_UP, N_, "%uld %ud %ud %auld %auld",
      "gathering id, fields per node record (at least 12) and per stream record (at least "
      "16), the node records, the stream records: a subtree's answer, or late parts of it "
      "(10.4)" },
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
