/* ctl.h - the control messages between the processes of a tree: one struct
 * and one encode/decode pair per message, and the table that names each
 * message's direction and the module that takes it (docs/protocol.md,
 * "Control messages").
 *
 * A control message travels in a CONTROL frame whose tag is its op and whose
 * payload is an encoded packet (packet.c) with the message's fixed format.
 * Encoders build that packet; decoders take one (or the payload bytes) and
 * fill the struct, refusing with TBON_EFORMAT and a message naming the
 * control message and the field when the format is not the message's, an
 * array's length disagrees with its siblings', a string holds a NUL byte, or
 * a value is out of its range. Checks that need the topology (is this rank
 * in it?) are the receiver's.
 *
 * Pointers in the structs are borrowed when encoding; a successful decode
 * allocates them, and tb_ctl_free (or tb_ctl_msg_free) releases them.
 */
#ifndef TB_CTL_H
#define TB_CTL_H

#include <stddef.h>
#include <stdint.h>

#include <tbon/tbon.h>

#include "topo/topology.h"

/* The ops (a CONTROL frame's tag). Numbers are the wire format: never
 * reuse or renumber one. */
enum tb_ctl {
    TB_CTL_READY = 1,
    TB_CTL_FAIL,
    TB_CTL_STREAM,
    TB_CTL_FILTER,
    TB_CTL_PARAMS,
    TB_CTL_SHUTDOWN,
    TB_CTL_STREAM_ERR,
    TB_CTL_PORT,
    TB_CTL_LAUNCH,
    /* Fault tolerance (docs/protocol.md 8) */
    TB_CTL_PORTS,
    TB_CTL_REPORT,
    TB_CTL_ADOPT_ACK,
    TB_CTL_GRAFT,
    /* Membership (docs/protocol.md 9) */
    TB_CTL_VIEW,
    TB_CTL_VIEW_ACK,
    TB_CTL_CHECK,
    TB_CTL_CHECKED,
    TB_CTL_ATTR,
    TB_CTL_ATTR_SYNC,
    TB_CTL_JOIN_ACK,
    TB_CTL_LEAVE,
    /* Start-up (docs/protocol.md 7.1) */
    TB_CTL_MISSING,
    /* Filters (docs/filter-guide.md, "When a filter crashes or hangs") */
    TB_CTL_FILTER_FAULT,
    /* Streams (docs/user-guide.md, tbon_stream_close) */
    TB_CTL_STREAM_END,
    /* Exact streams (docs/protocol.md 8.6): the FE has delivered the waves
     * up to a key */
    TB_CTL_DONE,
    /* Adoption (docs/protocol.md 8.3): what an adopted child lacks */
    TB_CTL_CATCH_UP,
    /* Messages between any two processes (docs/protocol.md 10) */
    TB_CTL_DIRECT,
    /* Membership (docs/protocol.md 9.2): a view version is stable */
    TB_CTL_STABLE,
    /* A ping to any rank and its answer (docs/protocol.md 10.3) */
    TB_CTL_PING,
    /* Run-time performance data gathered up the tree (docs/protocol.md 10.4) */
    TB_CTL_PERF,
    TB_CTL_PERF_DATA,
    TB_CTL_OP_MAX = TB_CTL_PERF_DATA
};

/* Which way a message goes: up (child to parent), down, or both. */
enum tb_ctl_dir { TB_CTL_UP = 1, TB_CTL_DOWN = 2, TB_CTL_BOTH = 3 };

/* Who takes a message. The reactor dispatches node, ft, view and attr
 * messages to that module; join and adopt messages are read before a
 * connection reaches the reactor (node/join.c, ft/eds.c). */
enum tb_ctl_owner {
    TB_CTL_OWN_NODE = 1,    /* node/node.c: start-up, streams, filters, shutdown */
    TB_CTL_OWN_FT,          /* ft/recovery.c: port table, reports, grafts */
    TB_CTL_OWN_VIEW,        /* ft/view.c: views and consistency checks */
    TB_CTL_OWN_ATTR,        /* ft/attr.c: attributes */
    TB_CTL_OWN_JOIN,        /* node/join.c, commnode: a new process's start-up */
    TB_CTL_OWN_ADOPT,       /* ft/eds.c: the orphan asking an adopter */
};

typedef struct tb_ctl_info {
    int         op;         /* enum tb_ctl */
    const char *name;       /* "READY" */
    int         dir;        /* enum tb_ctl_dir */
    int         owner;      /* enum tb_ctl_owner */
    const char *format;     /* the packet format, canonical */
    const char *fields;     /* what the fields are, for people */
} tb_ctl_info_t;

/* The entry of op, or NULL for an op no message has. */
const tb_ctl_info_t *tb_ctl_info(int op);
/* "READY", or "?" for an unknown op. */
const char *tb_ctl_name(int op);
const char *tb_ctl_dir_name(int dir);       /* "up", "down", "both" */
const char *tb_ctl_owner_name(int owner);   /* "node", "ft", ... */

/* One change of the membership view (TB_CTL_VIEW). */
enum tb_vkind {
    TB_V_FAILED = 1,          /* rank failed */
    TB_V_ADOPTED = 2,         /* rank adopted by parent at inc */
    TB_V_JOIN = 3,            /* a back-end joins: rank (the next one, or a failed
                                 one restarted at a later generation of inc)
                                 under parent, named host:lid */
    TB_V_JOINED = 4,          /* it is connected and in its parent's streams */
    TB_V_LEFT = 5,            /* rank left in order (dead from now on) */
    TB_V_JOIN_CN = 6,         /* a commnode joins, as TB_V_JOIN; it listens on port */
};
typedef struct tb_vchange {
    int32_t     kind;         /* enum tb_vkind */
    tbon_rank_t rank, parent;
    uint32_t    inc;
    uint32_t    lid;          /* joins: the local id */
    char        host[TB_TOPOLOGY_MAX_HOST + 1];   /* joins: the host */
    uint32_t    port;         /* TB_V_JOIN_CN: where it listens */
} tb_vchange_t;

/* The number of recovery times in a TB_CTL_REPORT. */
#define TB_CTL_REPORT_US 5

/* ---- the messages ---- */

typedef struct { uint32_t count; } tb_ctl_ready_t;      /* processes in the subtree */
typedef struct { int32_t code; const char *msg; } tb_ctl_fail_t;
/* A stream's definition. sync may carry TB_STREAM_BCAST (node.h). */
typedef struct {
    uint32_t id;
    int32_t up, sync;
    uint32_t timeout_ms;
    int32_t down;
    const uint32_t *members;
    size_t nmembers;
} tb_ctl_stream_t;
typedef struct { int32_t id; const char *path, *func; } tb_ctl_filter_t;
/* payload: the encoded parameter packet (tb_packet_payload), tag its tag. */
typedef struct {
    uint32_t stream;
    int32_t which, tag;
    const uint8_t *payload;
    size_t len;
} tb_ctl_params_t;
typedef struct { uint32_t unused; } tb_ctl_shutdown_t;  /* 0 */
typedef struct { uint32_t stream; const char *msg; } tb_ctl_stream_err_t;
typedef struct { uint32_t rank, port; } tb_ctl_port_t;  /* port 0-65535 (0: none) */
/* To a new commnode, after the topology. backend_exe "": back-ends attach;
 * commnode "": its own program, "-": it launches nothing (Slurm steps). */
typedef struct {
    const char *backend_exe;
    const char *const *argv;
    size_t nargv;
    const char *rsh;
    const char *commnode;
} tb_ctl_launch_t;
/* Where the FE and every commnode listen; the heartbeat timeout (0: none). */
typedef struct {
    const uint32_t *ranks, *ports;       /* n each; ports 0-65535 */
    size_t n;
    int32_t heartbeat_ms;
} tb_ctl_ports_t;
/* kind: TB_V_FAILED, ADOPTED, JOINED or LEFT. us: the recovery times
 * (new_parent, connect, compensate, cleanup) and 1 if a stream may have lost
 * data. */
typedef struct {
    int32_t kind;
    uint32_t rank, parent, inc;
    uint64_t us[TB_CTL_REPORT_US];
} tb_ctl_report_t;
typedef struct { uint32_t ok; } tb_ctl_adopt_ack_t;    /* 1: adopted */
/* A stream an adopted child takes part in, the last wave key it sent up and
 * the last request it saw. */
typedef struct {
    tb_ctl_stream_t def;
    uint64_t sent_key, last_q;
} tb_ctl_graft_t;
/* View version, the version it follows (0: a whole view; prev < version),
 * and its changes (kinds 1-6, ports 0-65535). */
typedef struct {
    uint64_t version, prev;
    const tb_vchange_t *ch;
    size_t n;
} tb_ctl_view_t;
/* The version applied here, the one the whole subtree has (<= applied), and
 * want 1 to ask for every version after the first (0 or 1). */
typedef struct { uint64_t applied, sub; int32_t want; } tb_ctl_view_ack_t;
typedef struct { uint64_t id, version, digest; } tb_ctl_check_t;   /* id != 0 */
typedef struct {
    uint64_t id;
    const uint32_t *agree, *bad;
    size_t nagree, nbad;
} tb_ctl_checked_t;
/* Entries of source src: keys, values ("" for a tombstone), dead (0 or 1:
 * a tombstone) and versions, n each. */
typedef struct {
    uint32_t src;
    const char *const *keys, *const *values;
    const uint8_t *dead;
    const uint64_t *versions;
    size_t n;
} tb_ctl_attr_t;
typedef struct { uint32_t unused; } tb_ctl_attr_sync_t; /* 0 */
/* A joining process's rank and incarnation, and its parent's rank, host
 * and port (1-65535). */
typedef struct {
    uint32_t rank, parent;
    const char *host;
    uint32_t port, inc;
} tb_ctl_join_ack_t;
typedef struct { uint32_t unused; } tb_ctl_leave_t;     /* 0 */
typedef struct { uint32_t stream; } tb_ctl_stream_end_t;
/* The FE has delivered every wave of stream up to key: what is kept for
 * them may go. */
typedef struct { uint32_t stream; uint64_t key; } tb_ctl_done_t;
/* View version `version` is stable (the FE's TBON_EV_VIEW_STABLE), down to
 * every process. */
typedef struct { uint64_t version; } tb_ctl_stable_t;
/* A ping from origin to target (any rank, commnodes too) and, flag
 * TB_PING_PONG, its answer back; id: the origin's; route: the ranks it
 * passed on its way out, the origin first (each hop adds itself). */
#define TB_PING_PONG 1u
typedef struct {
    uint32_t origin, target;
    uint64_t id;
    uint32_t flags;
    const uint32_t *route;
    size_t nroute;
} tb_ctl_ping_t;
/* A gathering of performance data (docs/protocol.md 10.4): id, the FE's
 * (not 0), and how long the receiver waits for its children's answers
 * before it sends what it has (the rest follows as it comes). */
typedef struct { uint64_t id; uint32_t wait_ms; } tb_ctl_perf_t;
/* The answer of a subtree, or part of it: records of nw (node) and sw
 * (stream) 64-bit fields each, node[0..nnode) and strm[0..nstrm) values
 * (multiples of nw and sw; fields past those a reader knows are skipped,
 * so that a newer node may send more). The fields: TB_PERF_N_* and
 * TB_PERF_S_* below, the rank first in both. */
enum {
    TB_PERF_N_RANK, TB_PERF_N_ROLE, TB_PERF_N_RSS, TB_PERF_N_CPU_US, TB_PERF_N_QUEUED,
    TB_PERF_N_STREAM_QUEUED, TB_PERF_N_RESENT, TB_PERF_N_RELINKS, TB_PERF_N_CRC,
    TB_PERF_N_UPTIME_MS, TB_PERF_N_CHILDREN, TB_PERF_N_MSGS_DROPPED,
    TB_PERF_NW                /* the fields a node record has (now) */
};
enum {
    TB_PERF_S_RANK, TB_PERF_S_STREAM, TB_PERF_S_UP_IN, TB_PERF_S_UP_IN_BYTES, TB_PERF_S_UP_OUT,
    TB_PERF_S_UP_OUT_BYTES, TB_PERF_S_DOWN_IN, TB_PERF_S_DOWN_IN_BYTES, TB_PERF_S_DOWN_OUT,
    TB_PERF_S_DOWN_OUT_BYTES, TB_PERF_S_WAVES, TB_PERF_S_FCALLS, TB_PERF_S_FWALL_NS,
    TB_PERF_S_FCPU_NS, TB_PERF_S_FCPU_SAMPLES, TB_PERF_S_QUEUED,
    TB_PERF_SW
};
typedef struct {
    uint64_t id;
    uint32_t nw, sw;
    const uint64_t *node, *strm;
    size_t nnode, nstrm;
} tb_ctl_perf_data_t;
/* An adopted child, after its grafts: the plug-in filters it has loaded
 * (ids TBON_FILTER_BUILTIN_COUNT on, without a gap) and whether it has the
 * port table (0 or 1); the adopter sends what it lacks. */
typedef struct { uint32_t filters; int32_t ports; } tb_ctl_catch_up_t;
/* A message from any process to others, routed hop by hop (node_direct.c),
 * and delivered once and in order for each sender and receiver
 * (node_dlog.c): its sender and the sender's process tag (a random number
 * drawn when the process first sends or takes a message), the sender's
 * number for it (0 in an acknowledgement), the application's tag, flags
 * (TB_DIRECT_*), a broadcast number (a broadcast's own, 1, 2, ...; for
 * anything else the number of the sender's broadcasts before it, or 0 if
 * the destination need not wait for any), the destinations this hop still
 * serves with the sender's number for the message at each (its unicasts to
 * that destination: 1, 2, ...; a broadcast names only destinations that
 * must first take the unicast of that number), and the application's
 * packet, encoded. An acknowledgement names the sender it goes to, with the
 * unicasts (dseq) and broadcasts (bseq) taken from it in order so far. */
#define TB_DIRECT_BCAST 1u      /* every back-end and the FE, the sender excepted */
#define TB_DIRECT_ACK   2u      /* an acknowledgement (no body) */
#define TB_DIRECT_GAP   4u      /* (with ACK) the receiver keeps later ones: one is missing */
typedef struct {
    uint32_t src;
    uint32_t nonce;
    uint64_t seq;
    int32_t tag;
    uint32_t flags;
    uint32_t bseq;
    const uint32_t *dst;
    const uint32_t *dseq;
    size_t ndst;
    const uint8_t *body;
    size_t len;
} tb_ctl_direct_t;
/* A node left out of the start-up: why (code and a message naming its rank,
 * host and what happened), the node that launches its children in its
 * place, and those children (none: its whole subtree is left out). */
typedef struct {
    int32_t code;
    uint32_t rank, parent;
    const char *msg;
    const uint32_t *moved;
    size_t nmoved;
} tb_ctl_missing_t;
/* A plug-in filter crashed (sig) or ran past its limit (sig 0) on node rank:
 * the stream, the filter's id, the wave, the ranks whose packets were its input, and a
 * message naming all of it. Goes up unchanged to the FE. */
typedef struct {
    uint32_t stream;
    int32_t filter;
    uint32_t rank;
    int32_t sig;
    uint64_t key;           /* the wave's key (0: none): the FE drops that wave */
    const uint32_t *sources;
    size_t nsources;
    const char *msg;
} tb_ctl_filter_fault_t;

/* Encoders: a new packet (one reference, tag = op), NULL only when out of
 * memory. Decoders: 0, or TBON_EFORMAT / TBON_ENOMEM with err saying what
 * is wrong (err may be NULL); on failure nothing is left allocated. */
tbon_packet_t *tb_ctl_ready_encode(const tb_ctl_ready_t *m);
int tb_ctl_ready_decode(const tbon_packet_t *p, tb_ctl_ready_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_fail_encode(const tb_ctl_fail_t *m);
int tb_ctl_fail_decode(const tbon_packet_t *p, tb_ctl_fail_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_stream_encode(const tb_ctl_stream_t *m);
int tb_ctl_stream_decode(const tbon_packet_t *p, tb_ctl_stream_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_filter_encode(const tb_ctl_filter_t *m);
int tb_ctl_filter_decode(const tbon_packet_t *p, tb_ctl_filter_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_params_encode(const tb_ctl_params_t *m);
int tb_ctl_params_decode(const tbon_packet_t *p, tb_ctl_params_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_shutdown_encode(const tb_ctl_shutdown_t *m);
int tb_ctl_shutdown_decode(const tbon_packet_t *p, tb_ctl_shutdown_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_stream_err_encode(const tb_ctl_stream_err_t *m);
int tb_ctl_stream_err_decode(const tbon_packet_t *p, tb_ctl_stream_err_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_port_encode(const tb_ctl_port_t *m);
int tb_ctl_port_decode(const tbon_packet_t *p, tb_ctl_port_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_launch_encode(const tb_ctl_launch_t *m);
int tb_ctl_launch_decode(const tbon_packet_t *p, tb_ctl_launch_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_ports_encode(const tb_ctl_ports_t *m);
int tb_ctl_ports_decode(const tbon_packet_t *p, tb_ctl_ports_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_report_encode(const tb_ctl_report_t *m);
int tb_ctl_report_decode(const tbon_packet_t *p, tb_ctl_report_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_adopt_ack_encode(const tb_ctl_adopt_ack_t *m);
int tb_ctl_adopt_ack_decode(const tbon_packet_t *p, tb_ctl_adopt_ack_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_graft_encode(const tb_ctl_graft_t *m);
int tb_ctl_graft_decode(const tbon_packet_t *p, tb_ctl_graft_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_view_encode(const tb_ctl_view_t *m);
int tb_ctl_view_decode(const tbon_packet_t *p, tb_ctl_view_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_view_ack_encode(const tb_ctl_view_ack_t *m);
int tb_ctl_view_ack_decode(const tbon_packet_t *p, tb_ctl_view_ack_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_check_encode(const tb_ctl_check_t *m);
int tb_ctl_check_decode(const tbon_packet_t *p, tb_ctl_check_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_checked_encode(const tb_ctl_checked_t *m);
int tb_ctl_checked_decode(const tbon_packet_t *p, tb_ctl_checked_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_attr_encode(const tb_ctl_attr_t *m);
int tb_ctl_attr_decode(const tbon_packet_t *p, tb_ctl_attr_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_attr_sync_encode(const tb_ctl_attr_sync_t *m);
int tb_ctl_attr_sync_decode(const tbon_packet_t *p, tb_ctl_attr_sync_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_join_ack_encode(const tb_ctl_join_ack_t *m);
int tb_ctl_join_ack_decode(const tbon_packet_t *p, tb_ctl_join_ack_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_leave_encode(const tb_ctl_leave_t *m);
tbon_packet_t *tb_ctl_ping_encode(const tb_ctl_ping_t *m);
int tb_ctl_ping_decode(const tbon_packet_t *p, tb_ctl_ping_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_perf_encode(const tb_ctl_perf_t *m);
int tb_ctl_perf_decode(const tbon_packet_t *p, tb_ctl_perf_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_perf_data_encode(const tb_ctl_perf_data_t *m);
int tb_ctl_perf_data_decode(const tbon_packet_t *p, tb_ctl_perf_data_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_stable_encode(const tb_ctl_stable_t *m);
int tb_ctl_stable_decode(const tbon_packet_t *p, tb_ctl_stable_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_stream_end_encode(const tb_ctl_stream_end_t *m);
int tb_ctl_stream_end_decode(const tbon_packet_t *p, tb_ctl_stream_end_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_done_encode(const tb_ctl_done_t *m);
int tb_ctl_done_decode(const tbon_packet_t *p, tb_ctl_done_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_catch_up_encode(const tb_ctl_catch_up_t *m);
int tb_ctl_catch_up_decode(const tbon_packet_t *p, tb_ctl_catch_up_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_direct_encode(const tb_ctl_direct_t *m);
int tb_ctl_direct_decode(const tbon_packet_t *p, tb_ctl_direct_t *m, tbon_error_t *err);
int tb_ctl_leave_decode(const tbon_packet_t *p, tb_ctl_leave_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_missing_encode(const tb_ctl_missing_t *m);
int tb_ctl_missing_decode(const tbon_packet_t *p, tb_ctl_missing_t *m, tbon_error_t *err);
tbon_packet_t *tb_ctl_filter_fault_encode(const tb_ctl_filter_fault_t *m);
int tb_ctl_filter_fault_decode(const tbon_packet_t *p, tb_ctl_filter_fault_t *m,
                               tbon_error_t *err);

/* Release what a successful decode of op allocated in m (the struct of that
 * op). NULL is fine. */
void tb_ctl_free(int op, void *m);

/* Any message: op says which member of u holds it. */
typedef struct tb_ctl_msg {
    int op;
    union {
        tb_ctl_ready_t ready;
        tb_ctl_fail_t fail;
        tb_ctl_stream_t stream;
        tb_ctl_filter_t filter;
        tb_ctl_params_t params;
        tb_ctl_shutdown_t shutdown;
        tb_ctl_stream_err_t stream_err;
        tb_ctl_port_t port;
        tb_ctl_launch_t launch;
        tb_ctl_ports_t ports;
        tb_ctl_report_t report;
        tb_ctl_adopt_ack_t adopt_ack;
        tb_ctl_graft_t graft;
        tb_ctl_view_t view;
        tb_ctl_view_ack_t view_ack;
        tb_ctl_check_t check;
        tb_ctl_checked_t checked;
        tb_ctl_attr_t attr;
        tb_ctl_attr_sync_t attr_sync;
        tb_ctl_join_ack_t join_ack;
        tb_ctl_leave_t leave;
        tb_ctl_missing_t missing;
        tb_ctl_filter_fault_t filter_fault;
        tb_ctl_stream_end_t stream_end;
        tb_ctl_done_t done;
        tb_ctl_catch_up_t catch_up;
        tb_ctl_direct_t direct;
        tb_ctl_stable_t stable;
        tb_ctl_ping_t ping;
        tb_ctl_perf_t perf;
        tb_ctl_perf_data_t perf_data;
    } u;
} tb_ctl_msg_t;

/* The packet of m (tag m->op); NULL if out of memory or m->op is no op. */
tbon_packet_t *tb_ctl_encode(const tb_ctl_msg_t *m);
/* Decode packet p as control message op into m (m->op = op). An unknown op
 * is TBON_EFORMAT too. */
int tb_ctl_decode(int op, const tbon_packet_t *p, tb_ctl_msg_t *m, tbon_error_t *err);
/* The same from a CONTROL frame's payload bytes (never read beyond
 * buf[0..len)). */
int tb_ctl_decode_bytes(int op, const void *buf, size_t len, tb_ctl_msg_t *m,
                        tbon_error_t *err);
void tb_ctl_msg_free(tb_ctl_msg_t *m);

#endif
