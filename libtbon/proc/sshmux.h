/* sshmux.h - one ssh connection per remote host, shared by the children a
 * node launches there (OpenSSH connection multiplexing). A node with several
 * children on one host would otherwise pay a whole ssh handshake - key
 * exchange, authentication, a new sshd - for each of them; on a busy login
 * node that is most of a tree's start-up (docs/cluster.md, "ssh").
 *
 * For each such host the node first starts a master,
 *     ssh -o ControlMaster=yes -o ControlPath=SOCK HOST 'cat >/dev/null'
 * whose stdin is a pipe the node holds: the master lives as long as the node
 * does (when the node ends, for whatever reason, the remote cat sees the end
 * of its input) and then, as OpenSSH masters do, until the last session it
 * carries has ended - never longer, so nothing is left behind. Children are
 * launched once the masters are ready (their sockets appear) or have failed;
 * a child whose host has no ready master simply connects on its own.
 *
 * Only for the default remote shell (no TBON_RSH, no opts.rsh): another
 * remote shell may not be ssh. TBON_SSH_MUX=0 turns it off. The ssh is the
 * first in PATH. */
#ifndef TB_SSHMUX_H
#define TB_SSHMUX_H

#include <stdint.h>

#include <tbon/tbon.h>

#include "util/config.h"

typedef struct tb_sshmux tb_sshmux_t;

/* A multiplexer for the node of rank in session, or NULL when it does not
 * apply (conf's TBON_RSH names another remote shell, its TBON_SSH_MUX is 0,
 * no room for socket paths in the session directory of its TBON_LOG_DIR or
 * TMPDIR) or without memory. conf NULL: nothing set. */
tb_sshmux_t *tb_sshmux_new(const tb_config_t *conf, uint64_t session, tbon_rank_t rank);

/* Start a master to host unless there is one. 0, or TBON_ELAUNCH or
 * TBON_ENOMEM (then its children connect on their own). */
int tb_sshmux_open(tb_sshmux_t *m, const char *host);

/* Wait until every master is ready or gone, at most ms (blocking in poll on
 * an inotify watch of the sockets' directory and the masters' pidfds). */
void tb_sshmux_wait(tb_sshmux_t *m, int ms);

/* The remote shell for a child on host: the default one through host's
 * master if it is ready, else NULL (the default, alone). The string lives
 * as long as m. */
const char *tb_sshmux_rsh(tb_sshmux_t *m, const char *host);

/* Let the masters go (each ends with its last session: call it once the
 * children are gone) and reap them; one still running at deadline_ms
 * (tb_now_ms scale) is killed then (SIGKILL, as tb_reap does), so that no
 * master outlives the node. NULL is fine. */
void tb_sshmux_destroy(tb_sshmux_t *m, int64_t deadline_ms);

#endif
