/* api/be.c - the back-end API: join the tree as a launched or attaching back-end */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tbon/tbon.h>

#include "util/error.h"
#include "codec/handshake.h"
#include "node/join.h"
#include "util/log.h"
#include "api/net_int.h"
#include "ft/ft.h"

/* Connect through j (0, or err filled naming the parent). */
static int be_connect(tb_join_t *j, int purpose, tbon_error_t *err)
{
    tb_log_set_identity(j->rank, "be");
    if (tb_join_connect(j, TB_ROLE_BE, purpose, err) == 0)
        return 0;
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
    return tb_error_set(err, err && err->code ? err->code : TBON_EIO,
                        "back-end rank %u cannot join its parent at %s:%u: %s", j->rank,
                        j->parent_host, (unsigned)j->parent_port, msg);
}

/* Start the node over j's connections, with conf (taken over: the net's), or
 * NULL: the environment read now. */
static tbon_net_t *be_node(tb_join_t *j, int joined, tb_config_t *conf, tbon_error_t *err)
{
    tbon_net_t *net = tb_net_alloc(0);
    tb_topology_t *mine = tb_topology_clone(j->topo);
    if (!net || !mine || (!conf && tb_config_load(&net->conf, err) != 0)) {
        tb_net_free(net);
        tb_topology_destroy(mine);
        tb_join_release(j);
        tb_config_free(conf);
        tb_error_set(err, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    if (conf)
        net->conf = *conf;
    net->rank = j->rank;
    net->topo = mine;
    tb_node_config_t cfg = {
        .ft = &tb_ft_ops, .conf = &net->conf,
        .role = TB_ROLE_BE, .rank = j->rank, .topo = j->topo, .session = j->session,
        .parent_fd = j->data_fd, .parent_event_fd = j->event_fd, .joined = joined,
    };
    j->topo = NULL;   /* the node owns these now */
    j->data_fd = j->event_fd = -1;
    net->inline_node = 1;   /* the application's calls drive it */
    tb_kicker_t *k = tb_kicker_new(tb_net_kick, net);
    if (!k) {
        tb_net_free(net);
        tb_join_release(j);
        tb_error_set(err, TBON_ENOMEM, "cannot make the back-end's kicker: %s", strerror(errno));
        return NULL;
    }
    cfg.share_io = tb_kicker_share_io(k);
    cfg.share_fd = tb_kicker_share_fd(k);
    tb_node_cbs_t cbs = tb_net_callbacks(net);
    tb_node_t *node = tb_node_new(&cfg, &cbs, err);
    if (!node) {
        tb_kicker_destroy(k);
        tb_net_free(net);
        tb_join_release(j);
        return NULL;
    }
    if (tb_kicker_start(k, node) != 0) {
        tb_kicker_stop(k);
        tb_node_destroy(node);
        tb_kicker_destroy(k);
        tb_net_free(net);
        tb_join_release(j);
        tb_error_set(err, TBON_ENOMEM, "cannot start the back-end's kicker thread");
        return NULL;
    }
    pthread_mutex_lock(&net->mu);     /* the EDS thread may read both (cb_status) */
    net->node = node;
    net->kicker = k;
    pthread_mutex_unlock(&net->mu);
    /* From now on the kicker may run the node while the application does not. */
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
    tb_config_t conf;         /* the environment, read once: the net's */
    if (tb_config_load(&conf, err) != 0)
        return NULL;
    if (tb_join_parse_args(argc, *argv, &conf, &j, err)) {
        tb_config_free(&conf);
        return NULL;
    }
    if (be_connect(&j, TB_PURPOSE_DATA, err)) {
        tb_join_release(&j);
        tb_config_free(&conf);
        return NULL;
    }
    return be_node(&j, 0, &conf, err);
}

/* Ask the FE (the attach file's) for a place in the running tree: as a new
 * back-end (rank TBON_RANK_NONE) or as the failed rank restarted; then
 * connect to the parent it chose. 0 or err filled. */
static int be_join(const char *attach_file, tbon_rank_t rank, tb_join_t *j, tbon_error_t *err)
{
    if (tb_join_parse_attach(attach_file, TBON_RANK_NONE, j, err))
        return err ? err->code : TBON_EINVAL;
    j->rank = rank;
    tb_log_set_identity(rank == TBON_RANK_NONE ? 0 : rank, "be");
    if (tb_join_request(j, TB_ROLE_BE, 0, err)) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        tb_error_set(err, err && err->code ? err->code : TBON_EIO,
                     "cannot join the tree through the front-end at %s:%u: %s",
                     j->parent_host, (unsigned)j->parent_port, msg);
        tb_join_release(j);
        return err ? err->code : TBON_EIO;
    }
    if (be_connect(j, TB_PURPOSE_ATTACH, err)) {
        tb_join_release(j);
        return err ? err->code : TBON_EIO;
    }
    return 0;
}

tbon_net_t *tbon_be_attach(const char *attach_file, tbon_rank_t rank, tbon_error_t *err)
{
    tb_join_t j;
    tb_error_clear(err);
    if (!attach_file) {
        tb_error_set(err, TBON_EINVAL, "no attach file given");
        return NULL;
    }
    if (rank == TBON_RANK_NONE) {
        /* Joining the running tree: the FE gives us a rank and a parent. */
        return be_join(attach_file, rank, &j, err) ? NULL : be_node(&j, 1, NULL, err);
    }
    /* The place the attach file gives rank; if it is not there (it is not
     * a back-end of the file, or its parent refuses: it failed, and this is
     * its process restarted), the FE takes it back at a new incarnation. */
    int rc = tb_join_parse_attach(attach_file, rank, &j, err);
    if (rc == TBON_ENOTFOUND || rc == TBON_EIO)
        return NULL;
    if (rc == 0 && be_connect(&j, TB_PURPOSE_ATTACH, err) == 0)
        return be_node(&j, 0, NULL, err);
    tb_join_release(&j);
    char first[sizeof err->msg];
    snprintf(first, sizeof first, "%s", err ? err->msg : "");
    if (be_join(attach_file, rank, &j, err) == 0)
        return be_node(&j, 1, NULL, err);
    char second[sizeof err->msg];
    snprintf(second, sizeof second, "%s", err ? err->msg : "");
    tb_error_set(err, err && err->code ? err->code : TBON_EIO, "%s; and as a restarted "
                 "process: %s", first, second);
    return NULL;
}

int tbon_be_membership_events(tbon_net_t *net, int on)
{
    if (!net || net->is_fe)
        return tb_net_fail(net, TBON_EINVAL, "tbon_be_membership_events needs a back-end's "
                           "network");
    pthread_mutex_lock(&net->mu);
    net->be_events = on != 0;
    if (!on)
        while (net->events.len)
            tb_ring_drop(&net->events);
    tb_net_fd_sync(net);
    pthread_mutex_unlock(&net->mu);
    return 0;
}
