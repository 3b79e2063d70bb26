/* tbon_commnode - an interior process of a tbon tree: started by its parent
 * (never by hand), it launches its own children, filters their packets up
 * and routes requests down until the front-end ends the session. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "error.h"
#include "handshake.h"
#include "join.h"
#include "log.h"
#include "node.h"
#include "packet_int.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tbon_commnode --tbon-parent HOST:PORT --tbon-rank RANK\n"
            "                     --tbon-session HEX [--tbon-timeout MS]\n"
            "\n"
            "The communication process of a tbon tree. A front-end (tbon_fe_create,\n"
            "tbon_frontend) or a parent commnode starts it with these arguments and\n"
            "the session secret in the environment (TBON_SECRET) or, through a remote\n"
            "shell, on stdin (--tbon-secret-stdin); it is not meant to be run by hand.\n"
            "\n"
            "It connects to its parent, receives the topology, launches its children\n"
            "(local ones directly, others through $TBON_RSH), runs the streams' filters\n"
            "and exits when the session ends or its parent goes away.\n"
            "\n"
            "Environment:\n"
            "  TBON_LOG      error|warn|info|debug (default warn)\n"
            "  TBON_LOG_DIR  where the log goes (default ${TMPDIR:-/tmp}/tbon-USER-SESSION/),\n"
            "                one file per commnode: commnode-RANK.log\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
    }
    tbon_error_t err = { 0 };
    tb_join_t j;
    if (tb_join_parse_args(&argc, argv, &j, &err)) {
        fprintf(stderr, "tbon_commnode: %s\n", err.msg);
        usage(stderr);
        return 2;
    }
    tb_log_set_identity(j.rank, "commnode");
    char dir[PATH_MAX], path[PATH_MAX + 32];
    if (tb_log_session_dir(j.session.id, dir, sizeof dir) == 0) {
        snprintf(path, sizeof path, "%s/commnode-%u.log", dir, j.rank);
        tb_log_to_file(path);
    }
    if (tb_join_connect(&j, TB_ROLE_COMMNODE, TB_PURPOSE_DATA, &err)) {
        TB_ERROR("startup", "cannot join the parent at %s:%u: %s", j.parent_host,
                 (unsigned)j.parent_port, err.msg);
        tb_join_release(&j);
        return 1;
    }
    char *bexe = NULL, *rsh = NULL, *cn = NULL;
    char **bargv = NULL;
    size_t nargs = 0;
    if (tbon_packet_unpack(j.launch, "%s %as %s %s", &bexe, &bargv, &nargs, &rsh, &cn)) {
        TB_ERROR("startup", "bad launch instructions from the parent");
        tb_join_release(&j);
        return 1;
    }
    char **argvz = calloc(nargs + 1, sizeof *argvz);
    for (size_t i = 0; argvz && i < nargs; i++)
        argvz[i] = bargv[i];
    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = 0;
    tb_node_config_t cfg = {
        .role = TB_ROLE_COMMNODE, .rank = j.rank, .topo = j.topo, .session = j.session,
        .commnode_path = *cn ? cn : self, .backend_exe = *bexe ? bexe : NULL,
        .backend_argv = (const char *const *)argvz, .rsh = *rsh ? rsh : NULL,
        .startup_timeout_ms = j.timeout_ms,
        .parent_fd = j.data_fd, .parent_event_fd = j.event_fd,
    };
    j.topo = NULL;
    j.data_fd = j.event_fd = -1;
    tb_node_t *n = argvz ? tb_node_new(&cfg, NULL, &err) : NULL;
    int rc = 0;
    if (!n) {
        TB_ERROR("startup", "%s", err.msg);
        rc = 1;
    } else if (tb_join_connect_event(&j, TB_ROLE_COMMNODE, &err) != 0) {
        TB_ERROR("startup", "no event connection to the parent: %s", err.msg);
        tb_node_destroy(n);
        rc = 1;
    } else {
        tb_node_watch_parent(n, j.event_fd);
        j.event_fd = -1;
        tb_node_run(n);
        tb_node_destroy(n);
    }
    tb_join_release(&j);
    for (size_t i = 0; i < nargs; i++)
        free(bargv[i]);
    free(bargv);
    free(argvz);
    free(bexe);
    free(rsh);
    free(cn);
    return rc;
}
