/* libbe.c - the back-end API: join the tree as a launched or attaching back-end */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tbon/tbon.h>

#include "error.h"
#include "handshake.h"
#include "join.h"
#include "log.h"
#include "net_int.h"

/* Connect through j and start the node: shared by create and attach. */
static tbon_net_t *be_start(tb_join_t *j, int purpose, int joined, tbon_error_t *err)
{
    tb_log_set_identity(j->rank, "be");
    if (tb_join_connect(j, TB_ROLE_BE, purpose, err)) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        tb_error_set(err, err && err->code ? err->code : TBON_EIO,
                     "back-end rank %u cannot join its parent at %s:%u: %s", j->rank,
                     j->parent_host, (unsigned)j->parent_port, msg);
        tb_join_release(j);
        return NULL;
    }
    tbon_net_t *net = tb_net_alloc(0);
    tb_topology_t *mine = tb_topology_clone(j->topo);
    if (!net || !mine) {
        tb_net_free(net);
        tb_topology_destroy(mine);
        tb_join_release(j);
        tb_error_set(err, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    net->rank = j->rank;
    net->topo = mine;
    tb_node_config_t cfg = {
        .role = TB_ROLE_BE, .rank = j->rank, .topo = j->topo, .session = j->session,
        .parent_fd = j->data_fd, .parent_event_fd = j->event_fd, .joined = joined,
    };
    j->topo = NULL;   /* the node owns these now */
    j->data_fd = j->event_fd = -1;
    net->inline_node = 1;   /* the application's calls drive it */
    tb_node_cbs_t cbs = tb_net_callbacks(net);
    tb_node_t *node = tb_node_new(&cfg, &cbs, err);
    if (!node) {
        tb_net_free(net);
        tb_join_release(j);
        return NULL;
    }
    pthread_mutex_lock(&net->mu);
    net->node = node;
    pthread_mutex_unlock(&net->mu);
    /* From now on the EDS may run the node while the application does not. */
    tb_node_arm(node, 1);
    tb_join_release(j);
    return net;
}

tbon_net_t *tbon_be_create(int *argc, char ***argv, tbon_error_t *err)
{
    tb_join_t j;
    tb_error_clear(err);
    if (!argc || !argv || !*argv) {
        tb_error_set(err, TBON_EINVAL, "tbon_be_create needs &argc and &argv");
        return NULL;
    }
    if (tb_join_parse_args(argc, *argv, &j, err))
        return NULL;
    return be_start(&j, TB_PURPOSE_DATA, 0, err);
}

tbon_net_t *tbon_be_attach(const char *attach_file, tbon_rank_t rank, tbon_error_t *err)
{
    tb_join_t j;
    tb_error_clear(err);
    if (!attach_file) {
        tb_error_set(err, TBON_EINVAL, "no attach file given");
        return NULL;
    }
    if (tb_join_parse_attach(attach_file, rank, &j, err))
        return NULL;
    if (rank == TBON_RANK_NONE) {
        /* Joining the running tree: the FE gives us a rank and a parent. */
        tb_log_set_identity(0, "be");
        if (tb_join_request(&j, err)) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
            tb_error_set(err, err && err->code ? err->code : TBON_EIO,
                         "cannot join the tree through the front-end at %s:%u: %s",
                         j.parent_host, (unsigned)j.parent_port, msg);
            tb_join_release(&j);
            return NULL;
        }
    }
    return be_start(&j, TB_PURPOSE_ATTACH, rank == TBON_RANK_NONE, err);
}
