/* join.h - the child's side of start-up: the launcher's arguments, the
 * connections to the parent, and the topology it sends */
#ifndef TB_JOIN_H
#define TB_JOIN_H

#include <tbon/tbon.h>

#include "net/auth.h"
#include "topo/topology.h"
#include "util/config.h"

typedef struct tb_join {
    tbon_rank_t    rank;
    uint32_t       inc;         /* our incarnation (a restarted process: > 0) */
    char           parent_host[256];
    uint16_t       parent_port;
    tb_session_t   session;
    int            timeout_ms;
    int            data_fd, event_fd;
    tb_topology_t *topo;
    tbon_packet_t *launch;      /* commnodes: the TB_CTL_LAUNCH packet */
} tb_join_t;

/* Take the launcher's arguments (--tbon-parent HOST:PORT, --tbon-rank R,
 * --tbon-session HEX, --tbon-timeout MS, or a Slurm step's map with conf's
 * SLURMD_NODENAME and SLURM_LOCALID; and the secret from the environment or
 * stdin) out of argc/argv. 0, or TBON_EINVAL / TBON_EAUTH with err saying
 * which argument is missing or bad. */
int tb_join_parse_args(int *argc, char **argv, const tb_config_t *conf, tb_join_t *j,
                       tbon_error_t *err);

/* Fill j from an attach file for back-end rank (TBON_RANK_NONE: a new
 * back-end, aimed at the FE's address). 0, TBON_ENOTFOUND (no such file),
 * or TBON_EINVAL naming the file, line and what is wrong. */
int tb_join_parse_attach(const char *path, tbon_rank_t rank, tb_join_t *j, tbon_error_t *err);

/* Ask the FE to join the running tree (j aimed at the FE: from
 * tb_join_parse_attach with rank TBON_RANK_NONE): as a new node when j->rank
 * is TBON_RANK_NONE, else as that failed rank restarted. A commnode says
 * where it listens (port; 0 for a back-end). The FE answers once the parent
 * it chose expects us. Fills j->rank, j->inc and the parent's address.
 * 0, TBON_ECLOSED (the FE refused: the message says what may be why), or
 * another error. */
int tb_join_request(tb_join_t *j, tb_role_t role, uint16_t port, tbon_error_t *err);

/* Connect the data connection (purpose DATA or ATTACH) and receive the
 * topology (and, for a commnode, the launch instructions), then (not for a
 * commnode) the event connection. 0 or an error naming the parent. */
int tb_join_connect(tb_join_t *j, tb_role_t role, int purpose, tbon_error_t *err);

/* tb_join_connect opens the event connection too, except for a commnode:
 * it launches its children first (start-up is a chain of such steps), then
 * calls this. 0 or an error naming the parent. */
int tb_join_connect_event(tb_join_t *j, tb_role_t role, tbon_error_t *err);

/* Close what j holds (fds not handed over, topology). */
void tb_join_release(tb_join_t *j);

#endif
