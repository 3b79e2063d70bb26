/* api/fe.c - the front-end API: launch a tree from a topology file, load
 * filters, make communicators and streams, shut the tree down */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "util/attrs.h"
#include "util/error.h"
#include "filter/filter.h"
#include "codec/handshake.h"
#include "proc/launch.h"
#include "util/log.h"
#include "util/safefile.h"
#include "api/net_int.h"
#include "codec/packet_int.h"
#include "proc/slurm.h"
#include "topo/topology.h"
#include "ft/ft.h"

#ifndef TBON_BUILD_BINDIR
#define TBON_BUILD_BINDIR "/usr/local/bin"
#endif

static int is_exe(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

/* PREFIX/bin/tbon_commnode when this code runs from PREFIX/lib/libtbon.so.*
 * (an installed library, or the build tree's lib/ beside its bin/): 0 and
 * the path in out, or -1. A program linked with libtbon.a has no such
 * object (dladdr names the program). */
static int beside_library(char *out, size_t len)
{
    Dl_info di;
    if (!dladdr((void *)(uintptr_t)beside_library, &di) || !di.dli_fname ||
        !strstr(di.dli_fname, "libtbon.so"))
        return -1;
    char lib[PATH_MAX];
    if (!realpath(di.dli_fname, lib))
        return -1;
    char *slash = strrchr(lib, '/');
    if (!slash)
        return -1;
    *slash = 0;                                 /* PREFIX/lib */
    slash = strrchr(lib, '/');
    if (!slash)
        return -1;
    *slash = 0;                                 /* PREFIX */
    return snprintf(out, len, "%s/bin/tbon_commnode", lib) < (int)len && is_exe(out) ? 0 : -1;
}

/* Where tbon_commnode is: opt, conf's TBON_COMMNODE, beside this program,
 * beside the shared library this code is in (PREFIX/bin for PREFIX/lib),
 * the build's bin/ (a program linked with libtbon.a), then its PATH. */
static int find_commnode(const tb_config_t *conf, const char *opt, char *out, size_t len)
{
    const char *env = conf->commnode;
    if (opt && *opt)
        return snprintf(out, len, "%s", opt) < (int)len ? 0 : -1;
    if (env && *env)
        return snprintf(out, len, "%s", env) < (int)len ? 0 : -1;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            if (snprintf(out, len, "%.*s/tbon_commnode", (int)(len - 16), self) < (int)len &&
                is_exe(out))
                return 0;
        }
    }
    if (beside_library(out, len) == 0)
        return 0;
    snprintf(out, len, "%s/tbon_commnode", TBON_BUILD_BINDIR);
    if (is_exe(out))
        return 0;
    const char *path = conf->path;
    while (path && *path) {
        const char *colon = strchr(path, ':');
        size_t l = colon ? (size_t)(colon - path) : strlen(path);
        snprintf(out, len, "%.*s/tbon_commnode", (int)l, path);
        if (l && is_exe(out))
            return 0;
        path = colon ? colon + 1 : NULL;
    }
    return TBON_ENOTFOUND;
}

static tbon_comm_t *comm_add(tbon_net_t *net, tbon_rank_t *ranks, size_t n)
{
    tbon_comm_t *c = calloc(1, sizeof *c);
    if (!c) {
        free(ranks);
        return NULL;
    }
    c->ranks = ranks;
    c->n = n;
    pthread_mutex_lock(&net->mu);
    c->next = net->comms;
    net->comms = c;
    pthread_mutex_unlock(&net->mu);
    return c;
}

/* Wait for the tree, reporting progress on the caller's thread. */
int tb_fe_wait_ready(tbon_net_t *net)
{
    size_t shown = 0;
    pthread_mutex_lock(&net->mu);
    while (!net->ready && !net->failed && !net->closed) {
        if (net->progress && net->prog_ready != shown) {
            size_t r = net->prog_ready, t = net->prog_total;
            shown = r;
            pthread_mutex_unlock(&net->mu);
            net->progress(net->progress_arg, r, t);
            pthread_mutex_lock(&net->mu);
            continue;
        }
        pthread_cond_wait(&net->cond, &net->mu);
    }
    int ok = net->ready && !net->failed;
    size_t t = net->prog_total;
    pthread_mutex_unlock(&net->mu);
    if (ok && net->progress)
        net->progress(net->progress_arg, t, t);
    return ok;
}

/* Is a host name one of the loopback's? */
static int loopback_name(const char *h)
{
    return strcasecmp(h, "localhost") == 0 || strncmp(h, "127.", 4) == 0 ||
           strncasecmp(h, "localhost.", 10) == 0;
}

/* The front-end runs where its topology says (docs/cluster.md, "The
 * front-end's host"): its host must be this one, or fe_host (else conf's
 * TBON_FE_HOST) names this host and takes its place. A loopback name with
 * other hosts in the tree becomes this host's name: the other hosts resolve
 * the FE's name (to ask it for an adoption, to send it failure notices). */
static int place_fe(const tb_config_t *conf, tb_topology_t **topo, const char *file,
                    const char *fe_host, tbon_error_t *err)
{
    const char *host = tb_topology_host(*topo, 0);
    char me[256] = "";
    gethostname(me, sizeof me - 1);
    if (!fe_host || !*fe_host)
        fe_host = conf->fe_host;
    if (fe_host && *fe_host) {
        if (!tb_host_is_local(fe_host))
            return tb_error_set(err, TBON_ETOPOLOGY, "--fe-host %s: that is not a name or "
                                "address of this host (%s)", fe_host, me);
    } else if (!tb_host_is_local(host)) {
        return tb_error_set(err, TBON_ETOPOLOGY,
                            "%s puts the front-end on host %s, but this is host %s: run the "
                            "front-end on %s, or run it here with --fe-host %s "
                            "(TBON_FE_HOST, tbon_fe_options_t.fe_host)",
                            file, host, me, host, me);
    } else if (loopback_name(host) && *me) {
        size_t n = tb_topology_size(*topo);
        for (tbon_rank_t r = 1; r < n && !fe_host; r++)
            if (!tb_host_is_local(tb_topology_host(*topo, r)))
                fe_host = me;
    }
    if (!fe_host || strcmp(fe_host, host) == 0)
        return 0;
    tb_topology_t *t = tb_topology_with_fe_host(*topo, fe_host, err);
    if (!t)
        return err ? err->code : TBON_EINVAL;
    TB_INFO("startup", "the front-end, %s in %s, is %s to the other hosts", host, file,
            fe_host);
    tb_topology_destroy(*topo);
    *topo = t;
    return 0;
}

/* The tree over the Slurm allocation's nodes (slurm.h). */
static tb_topology_t *slurm_topology(const tb_config_t *conf, const tbon_fe_options_t *o,
                                     tbon_error_t *err)
{
    char **nodes = NULL;
    size_t n = 0;
    if (tb_slurm_nodes(conf, &nodes, &n, err) != 0)
        return NULL;
    char me[256] = "";
    const char *fe = o->fe_host;
    if (!fe || !*fe) {
        gethostname(me, sizeof me - 1);
        fe = me;
    }
    unsigned per = o->slurm_be_per_node ? o->slurm_be_per_node
                                        : tb_slurm_default_per_node(conf);
    tb_topology_t *t = tb_slurm_topology(fe, nodes, n, per, o->slurm_fanout ? o->slurm_fanout
                                                                            : 32, err);
    if (t)
        TB_INFO("startup", "Slurm: %zu nodes (%s%s), %u back-ends on each", n, nodes[0],
                n > 1 ? ", ..." : "", per);
    tb_slurm_free_nodes(nodes, n);
    return t;
}

/* Add the names of env to TBON_ENV, conf's (what our node passes on) and
 * the environment's (which travels, and names what else does, further
 * down). */
static int add_env_names(tb_config_t *conf, const char *env, tbon_error_t *err)
{
    if (!env || !*env)
        return 0;
    const char *old = conf->env;
    char *v = NULL;
    if (asprintf(&v, "%s%s%s", old && *old ? old : "", old && *old ? " " : "", env) < 0)
        return tb_error_set(err, TBON_ENOMEM, "out of memory");
    int rc = tb_config_set(conf, "TBON_ENV", v) == 0 ? setenv("TBON_ENV", v, 1) : -1;
    free(v);
    return rc == 0 ? 0 : tb_error_set(err, TBON_ENOMEM, "out of memory");
}

/* The arguments of tbon_fe_create checked, the tree read (or made from the
 * Slurm allocation) and placed here. NULL on error (err). */
static tb_topology_t *fe_topology(tb_config_t *conf, const char **topology_file,
                                  const char *backend_exe, const tbon_fe_options_t *o,
                                  tbon_error_t *err)
{
    if (!*topology_file && !o->slurm) {
        tb_error_set(err, TBON_EINVAL, "no topology file given");
        return NULL;
    }
    if (*topology_file && o->slurm) {
        tb_error_set(err, TBON_EINVAL, "a topology file and the Slurm launcher (which makes "
                     "its own topology) do not go together");
        return NULL;
    }
    if (!backend_exe && !o->attach_file) {
        tb_error_set(err, TBON_EINVAL, "no back-end executable and no attach file given");
        return NULL;
    }
    tb_topology_t *topo = o->slurm ? slurm_topology(conf, o, err)
                                   : tb_topology_parse_file(*topology_file, err);
    if (o->slurm)
        *topology_file = "the Slurm allocation";
    if (!topo || place_fe(conf, &topo, *topology_file, o->fe_host, err) != 0 ||
        add_env_names(conf, o->env, err) != 0) {
        tb_topology_destroy(topo);
        return NULL;
    }
    if (tb_topology_size(topo) < 2) {
        tb_topology_destroy(topo);
        tb_error_set(err, TBON_ETOPOLOGY, "%s: the tree has no back-end", *topology_file);
        return NULL;
    }
    return topo;
}

/* The commnode program into out ("" if none is found and none is needed).
 * 0, or TBON_ELAUNCH (err) when the tree has commnodes and none is found. */
static int fe_commnode(const tb_config_t *conf, const tb_topology_t *topo, const char *path,
                       char *out, size_t len, tbon_error_t *err)
{
    int need_cn = 0;
    for (tbon_rank_t r = 1; r < tb_topology_size(topo); r++)
        need_cn |= tb_topology_role(topo, r) == TB_ROLE_COMMNODE;
    if (find_commnode(conf, path, out, len) == 0)
        return 0;
    out[0] = 0;
    if (!need_cn)
        return 0;
    return tb_error_set(err, TBON_ELAUNCH,
                        "cannot find tbon_commnode (set TBON_COMMNODE or opts.commnode_path)");
}

/* The back-end's argv (bexe first, then backend_argv), malloc'd; NULL when
 * out of memory. */
static const char **fe_backend_argv(const char *bexe, const char *const backend_argv[])
{
    size_t na = 0;
    while (backend_argv && backend_argv[na])
        na++;
    const char **argv = calloc(na + 2, sizeof *argv);
    if (!argv)
        return NULL;
    argv[0] = bexe;
    for (size_t i = 0; i < na; i++)
        argv[i + 1] = backend_argv[i];
    return argv;
}

/* The front-end node's configuration from the options and conf (a new
 * session's id; its secret is generated by the caller). */
tb_node_config_t tb_fe_config(const tbon_fe_options_t *o, const tb_config_t *conf,
                                  tb_topology_t *topo, const char *commnode, const char *bexe,
                                  const char **argv)
{
    return (tb_node_config_t){
        .ft = &tb_ft_ops, .conf = conf,
        .role = TB_ROLE_FE, .rank = 0, .topo = topo,
        .commnode_path = commnode[0] ? commnode : NULL,
        .backend_exe = bexe, .backend_argv = argv,
        .rsh = o->rsh ? o->rsh : conf->rsh,
        .attach_file = o->attach_file, .slurm = o->slurm != 0,
        .startup_timeout_ms = o->startup_timeout_ms > 0 ? o->startup_timeout_ms : 30000,
        .no_ft = o->no_fault_tolerance != 0,
        .require_all = o->require_all != 0,
        .heartbeat_ms = o->heartbeat_ms < 0 ? 0 : o->heartbeat_ms > 0 ? o->heartbeat_ms
                        : TB_HEARTBEAT_DEFAULT_MS,
        .suspect_ms = o->suspect_ms > 0 ? o->suspect_ms : 0,
        .exact_off = o->exact_off != 0,
        .parent_fd = -1, .parent_event_fd = -1,
        .grace_ms = o->grace_ms > 0 ? o->grace_ms : 0,
    };
}

/* The options of a session that outlives its front-end, checked; the
 * session file's copy kept with net (the node points to it). 0 or
 * TBON_EINVAL/TBON_ENOMEM (err). */
int tb_fe_session_opts(tbon_net_t *net, const tbon_fe_options_t *o, tb_node_config_t *cfg,
                       tbon_error_t *err)
{
    if (o->grace_ms < 0 || o->detach_ms < 0)
        return tb_error_set(err, TBON_EINVAL, "grace_ms and detach_ms are times (ms >= 0)");
    if (o->grace_ms > 0 && !(o->session_file && *o->session_file))
        return tb_error_set(err, TBON_EINVAL, "a grace (grace_ms) needs a session file "
                            "(session_file): a new front-end reattaches from it");
    if ((o->grace_ms > 0 || (o->session_file && *o->session_file)) && o->no_fault_tolerance)
        return tb_error_set(err, TBON_EINVAL, "without fault tolerance no tree outlives its "
                            "front-end (grace_ms, session_file)");
    net->detach_ms = (uint32_t)o->detach_ms;
    if (o->session_file && *o->session_file) {
        char dir[4096], why[512];
        snprintf(dir, sizeof dir, "%s", o->session_file);
        char *slash = strrchr(dir, '/');
        if (slash)
            *(slash == dir ? slash + 1 : slash) = 0;
        else
            snprintf(dir, sizeof dir, ".");
        if (tb_safe_dir(dir, why, sizeof why) != 0)
            return tb_error_set(err, TBON_EIO, "session file %s: %s", o->session_file, why);
        if (!(net->session_file = strdup(o->session_file)))
            return tb_error_set(err, TBON_ENOMEM, "out of memory");
    }
    cfg->session_file = net->session_file;
    cfg->grace_ms = o->grace_ms > 0 ? o->grace_ms : 0;
    return 0;
}

/* The tree is up: the broadcast communicator over every back-end. */
void tb_fe_ready(tbon_net_t *net)
{
    size_t nb = tbon_net_num_backends(net);
    tbon_rank_t *ranks = malloc((nb ? nb : 1) * sizeof *ranks);
    if (ranks) {
        tbon_net_backends(net, ranks, nb);
        tbon_comm_t *bcast = comm_add(net, ranks, nb);
        pthread_mutex_lock(&net->mu);     /* cb_event reads it */
        net->bcast = bcast;
        pthread_mutex_unlock(&net->mu);
    }
    pthread_mutex_lock(&net->mu);
    size_t size = tb_topology_size(net->topo);
    pthread_mutex_unlock(&net->mu);
    TB_INFO("startup", "tree of %zu processes ready", size);
}

/* Every commnode of the topology was left out of the start-up: the FE
 * would hold every back-end itself, one process with thousands of
 * connections, and the usual cause is one mistake made everywhere (a wrong
 * commnode path, a binary missing on the hosts). 1 with err saying so and
 * the first node's reason, else 0. */
static int every_commnode_missing(tbon_net_t *net, tbon_error_t *err)
{
    size_t size = tb_topology_size(net->topo), ncn = 0, nbe = 0;
    for (tbon_rank_t r = 1; r < size; r++) {
        int role = tb_topology_role(net->topo, r);
        ncn += role == TB_ROLE_COMMNODE;
        nbe += role == TB_ROLE_BE;
    }
    pthread_mutex_lock(&net->mu);
    size_t gone = 0;
    for (size_t i = 0; i < net->nmissing; i++)
        gone += tb_topology_role(net->topo, net->missing[i]) == TB_ROLE_COMMNODE;
    int all = ncn > 0 && gone == ncn;
    if (all)
        tb_error_set(err, TBON_ELAUNCH, "every commnode (%zu) failed to start, and the "
                     "front-end would hold all %zu back-ends itself; the first: %s "
                     "(tbon_fe_options_t.allow_flat, or TBON_ALLOW_FLAT=1, goes on without "
                     "them)", ncn, nbe, net->first_missing[0] ? net->first_missing : "?");
    pthread_mutex_unlock(&net->mu);
    return all;
}

tbon_net_t *tbon_fe_create(const char *topology_file, const char *backend_exe,
                           const char *const backend_argv[], const tbon_fe_options_t *opts,
                           tbon_error_t *err)
{
    tbon_fe_options_t o = { 0 };
    if (opts)
        o = *opts;
    tb_error_clear(err);
    tb_log_set_identity(0, "fe");
    tb_config_t conf;         /* the environment, read once: the net's */
    if (tb_config_load(&conf, err) != 0)
        return NULL;
    if (conf.allow_flat && atoi(conf.allow_flat) > 0)
        o.allow_flat = 1;
    tb_topology_t *topo = fe_topology(&conf, &topology_file, backend_exe, &o, err);
    char commnode[PATH_MAX];
    if (!topo || fe_commnode(&conf, topo, o.commnode_path, commnode, sizeof commnode, err)) {
        tb_topology_destroy(topo);
        tb_config_free(&conf);
        return NULL;
    }
    char bexe[PATH_MAX];
    if (backend_exe) {
        /* Children run from other directories: make the path absolute. */
        if (backend_exe[0] != '/' && strchr(backend_exe, '/') && realpath(backend_exe, bexe))
            ;
        else
            snprintf(bexe, sizeof bexe, "%s", backend_exe);
    }
    const char **argv = fe_backend_argv(backend_exe ? bexe : "", backend_argv);
    tbon_net_t *net = tb_net_alloc(1);
    if (!argv || !net) {
        free(argv);
        tb_net_free(net);
        tb_topology_destroy(topo);
        tb_config_free(&conf);
        tb_error_set(err, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    net->conf = conf;         /* the net's now (tb_net_free) */
    net->rank = 0;
    net->progress = o.progress;
    net->progress_arg = o.progress_arg;
    net->topo = tb_topology_clone(topo);
    tb_node_config_t cfg = tb_fe_config(&o, &net->conf, topo, commnode, backend_exe ? bexe : NULL,
                                     argv);
    if (!net->topo || tb_fe_session_opts(net, &o, &cfg, err) ||
        tb_secret_generate(cfg.session.secret, err)) {
        free(argv);
        tb_net_free(net);
        tb_topology_destroy(topo);
        if (err && !err->code)
            tb_error_set(err, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    uint8_t idb[TB_SECRET_SIZE];
    tb_secret_generate(idb, NULL);
    memcpy(&cfg.session.id, idb, sizeof cfg.session.id);
    tb_node_cbs_t cbs = tb_net_callbacks(net);
    net->node = tb_node_new(&cfg, &cbs, err);
    if (!net->node || tb_node_start(net->node)) {
        if (net->node)
            tb_node_destroy(net->node);
        free(argv);
        tb_net_free(net);
        return NULL;
    }
    /* The node copied the pointers in cfg; argv must live as long as it. */
    int ok = tb_fe_wait_ready(net);
    if (!ok)
        tb_error_set(err, net->fail_code ? net->fail_code : TBON_ELAUNCH, "%s",
                     net->fail_msg[0] ? net->fail_msg : "the tree did not start");
    else if (!o.allow_flat && every_commnode_missing(net, err))
        ok = 0;
    if (!ok) {
        tb_cmd_t *c = tb_cmd_shutdown();
        if (c)
            tb_node_post(net->node, c);
        tb_node_destroy(net->node);
        free(argv);
        tb_net_free(net);
        return NULL;
    }
    /* argv is still referenced by the node (for late commnodes in attach
     * mode); keep it with the net. */
    net->argv_keep = argv;
    tb_fe_ready(net);
    return net;
}

/* How long tbon_fe_load_filter waits for every node's answer. */
#define TB_LOAD_MS 60000

/* Forget filter id (it did not load everywhere): a later load of the
 * same path and function tries again, under a new id. */
static void forget_filter(tbon_net_t *net, int id)
{
    for (size_t i = 0; i < net->nloaded; i++)
        if (net->loaded[i].id == id) {
            free(net->loaded[i].path);
            free(net->loaded[i].func);
            net->loaded[i] = net->loaded[--net->nloaded];
            return;
        }
}

/* The load of filter id, posted, is all or nothing: a check sent after it
 * (tbon_fe_check_views' message) reaches each node after the load did,
 * and each node's answer comes up after its report of a failed load
 * (STREAM_ERR, on the same connections in order), so once the check is
 * back every failure is here (net->lerr, cb_status). Returns id, or
 * TBON_EFILTER naming every node that failed (rank, host, dlerror's
 * text), or TBON_ETIMEOUT / TBON_ECLOSED. */
static int load_everywhere(tbon_net_t *net, int id, const char *path, const char *func)
{
    struct timespec ts, *abs = tb_net_deadline(TB_LOAD_MS, &ts);
    pthread_mutex_lock(&net->mu);
    uint64_t chk = ++net->chk_next;
    tb_cmd_t *c = tb_cmd_check(chk);
    if (c)
        tb_node_post(net->node, c);
    int rc = c ? 0 : TBON_ENOMEM;
    while (rc == 0 && net->chk_done < chk && !net->closed)
        rc = tb_net_wait_until(net, abs) ? TBON_ETIMEOUT : 0;
    if (rc == 0 && net->closed)
        rc = TBON_ECLOSED;
    char prefix[32], why[1024] = "";
    size_t nbad = 0, at = 0;
    int n = snprintf(prefix, sizeof prefix, "filter %d ", id);
    for (size_t i = 0; i < net->nlerr;) {
        if (strncmp(net->lerr[i], prefix, (size_t)n) != 0) {
            i++;
            continue;
        }
        if (nbad++ < 3 && at < sizeof why)
            at += (size_t)snprintf(why + at, sizeof why - at, "%s%s", nbad > 1 ? "; " : "",
                                   net->lerr[i] + n);
        free(net->lerr[i]);
        net->lerr[i] = net->lerr[--net->nlerr];
    }
    if (rc != 0 || nbad)
        forget_filter(net, id);
    pthread_mutex_unlock(&net->mu);
    if (nbad)
        return tb_net_fail(net, TBON_EFILTER, "filter \"%s\" of %s did not load on %zu "
                           "node%s: %s%s", func, path, nbad, nbad > 1 ? "s" : "", why,
                           nbad > 3 ? "; ..." : "");
    if (rc == TBON_ETIMEOUT)
        return tb_net_fail(net, rc, "filter \"%s\" of %s: not every node said whether it "
                           "loaded within %d ms", func, path, TB_LOAD_MS);
    if (rc == TBON_ECLOSED)
        return tb_net_fail(net, rc, "the network has shut down");
    if (rc)
        return tb_net_fail(net, rc, "out of memory");
    return id;
}

int tbon_fe_load_filter(tbon_net_t *net, const char *so_path, const char *func)
{
    if (!net || !net->is_fe || !so_path || !func)
        return tb_net_fail(net, TBON_EINVAL,
                           "tbon_fe_load_filter needs a front-end network, a path and a function");
    char abs[PATH_MAX];
    if (!realpath(so_path, abs))
        return tb_net_fail(net, TBON_EFILTER, "cannot load filter %s from %s: %s", func, so_path,
                           strerror(errno));
    pthread_mutex_lock(&net->mu);
    for (size_t i = 0; i < net->nloaded; i++) {
        if (!strcmp(net->loaded[i].path, abs) && !strcmp(net->loaded[i].func, func)) {
            int id = net->loaded[i].id;
            pthread_mutex_unlock(&net->mu);
            return id;
        }
    }
    pthread_mutex_unlock(&net->mu);
    /* Try it here first, so that the caller hears what is wrong. */
    tb_filter_reg_t *probe = tb_filter_reg_new();
    tbon_error_t err;
    int rc = probe ? tb_filter_reg_load(probe, abs, func, -1, &err) : TBON_ENOMEM;
    tb_filter_reg_destroy(probe);
    if (rc < 0)
        return tb_net_fail(net, TBON_EFILTER, "%s", probe ? err.msg : "out of memory");
    pthread_mutex_lock(&net->mu);
    struct tb_loaded *nl = realloc(net->loaded, (net->nloaded + 1) * sizeof *nl);
    char *p = strdup(abs), *f = strdup(func);
    int id = net->next_filter;
    tb_cmd_t *c = tb_cmd_filter(id, abs, func);
    if (!nl || !p || !f || !c) {
        if (nl)
            net->loaded = nl;
        pthread_mutex_unlock(&net->mu);
        free(p);
        free(f);
        tb_cmd_free(c);
        return tb_net_fail(net, TBON_ENOMEM, "out of memory");
    }
    net->loaded = nl;
    net->next_filter++;
    nl[net->nloaded++] = (struct tb_loaded){ p, f, id };
    net->loading++;
    pthread_mutex_unlock(&net->mu);
    tb_node_post(net->node, c);
    rc = load_everywhere(net, id, abs, func);
    pthread_mutex_lock(&net->mu);
    net->loading--;
    pthread_mutex_unlock(&net->mu);
    return rc;
}

tbon_comm_t *tbon_fe_broadcast_comm(tbon_net_t *net)
{
    return net && net->is_fe ? net->bcast : NULL;
}

static int cmp_rank(const void *a, const void *b)
{
    tbon_rank_t x = *(const tbon_rank_t *)a, y = *(const tbon_rank_t *)b;
    return x < y ? -1 : x > y;
}

tbon_comm_t *tbon_fe_comm_new(tbon_net_t *net, const tbon_rank_t *backends, size_t n)
{
    if (!net || !net->is_fe || (n && !backends)) {
        tb_net_fail(net, TBON_EINVAL, "tbon_fe_comm_new needs a front-end network and ranks");
        return NULL;
    }
    tbon_rank_t *r = malloc((n ? n : 1) * sizeof *r);
    if (!r) {
        tb_net_fail(net, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    memcpy(r, backends, n * sizeof *r);
    qsort(r, n, sizeof *r, cmp_rank);
    size_t k = 0;
    /* net->topo grows when nodes join (cb_view, on the reactor thread). */
    pthread_mutex_lock(&net->mu);
    for (size_t i = 0; i < n; i++) {
        if (r[i] >= tb_topology_size(net->topo) || tb_topology_role(net->topo, r[i]) != TB_ROLE_BE) {
            pthread_mutex_unlock(&net->mu);
            tb_net_fail(net, TBON_EINVAL, "rank %u is not a back-end of this tree", r[i]);
            free(r);
            return NULL;
        }
        if (k == 0 || r[k - 1] != r[i])
            r[k++] = r[i];
    }
    pthread_mutex_unlock(&net->mu);
    return comm_add(net, r, k);
}

static int filter_known(tbon_net_t *net, int id)
{
    pthread_mutex_lock(&net->mu);
    int ok = id >= 0 && id < net->next_filter;
    pthread_mutex_unlock(&net->mu);
    return ok;
}

tbon_stream_t *tbon_fe_stream_new(tbon_net_t *net, tbon_comm_t *comm, int up_filter, int sync,
                                  int down_filter)
{
    if (!net || !net->is_fe || !comm) {
        tb_net_fail(net, TBON_EINVAL,
                    "tbon_fe_stream_new needs a front-end network and a communicator");
        return NULL;
    }
    if (!filter_known(net, up_filter) || !filter_known(net, down_filter)) {
        tb_net_fail(net, TBON_EFILTER, "unknown filter id %d",
                    filter_known(net, up_filter) ? down_filter : up_filter);
        return NULL;
    }
    if (sync < TBON_SYNC_WAITFORALL || sync > TBON_SYNC_TIMEOUT) {
        tb_net_fail(net, TBON_EINVAL, "unknown sync mode %d", sync);
        return NULL;
    }
    /* The broadcast communicator grows on the reactor thread (cb_event, a
     * back-end joined): its members are copied under mu. */
    pthread_mutex_lock(&net->mu);
    size_t nm = comm->n;
    tbon_rank_t *m = malloc((nm ? nm : 1) * sizeof *m);
    if (m)
        memcpy(m, comm->ranks, nm * sizeof *m);
    pthread_mutex_unlock(&net->mu);
    if (!m) {
        tb_net_fail(net, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&net->mu);
    uint32_t id = net->next_stream++;
    tbon_stream_t *s = tb_net_stream_locked(net, id, 1);
    pthread_mutex_unlock(&net->mu);
    if (!s) {
        free(m);
        tb_net_fail(net, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    /* 1000: TBON_SYNC_TIMEOUT's default until set. m is taken over. */
    tb_cmd_t *c = tb_cmd_stream(id, up_filter, sync | (comm == net->bcast ? TB_STREAM_BCAST : 0),
                                1000, down_filter, m, nm);
    if (!c) {
        tb_net_fail(net, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    tb_node_post(net->node, c);
    return s;
}

int tbon_stream_set_filter_params(tbon_stream_t *s, int which, const char *fmt, ...)
{
    if (!s || !fmt || !s->net->is_fe)
        return tb_net_fail(s ? s->net : NULL, TBON_EINVAL,
                           "tbon_stream_set_filter_params needs a front-end stream and a format");
    if (which != TBON_FILTER_PARAM_UP && which != TBON_FILTER_PARAM_DOWN &&
        which != TBON_FILTER_PARAM_SYNC && which != TBON_FILTER_PARAM_LIMIT)
        return tb_net_fail(s ? s->net : NULL, TBON_EINVAL, "unknown parameter target %d", which);
    va_list ap;
    va_start(ap, fmt);
    tbon_error_t err;
    tbon_packet_t *p = tb_packet_vcreate(TBON_FIRST_APP_TAG, fmt, ap, &err);
    va_end(ap);
    if (!p)
        return tb_net_fail(s ? s->net : NULL, err.code, "%s", err.msg);
    if ((which == TBON_FILTER_PARAM_SYNC || which == TBON_FILTER_PARAM_LIMIT) &&
        !tb_packet_format_matches(p, "%ud")) {
        tbon_packet_unref(p);
        return tb_net_fail(s ? s->net : NULL, TBON_EFORMAT, "the %s is one \"%%ud\" (ms)",
                           which == TBON_FILTER_PARAM_SYNC ? "sync timeout" : "filter limit");
    }
    tb_cmd_t *c = tb_cmd_params(s->id, which, p);     /* p is taken over */
    if (!c)
        return tb_net_fail(s ? s->net : NULL, TBON_ENOMEM, "out of memory");
    tb_node_post(s->net->node, c);
    return 0;
}

/* ---- membership, checks and attributes, seen from the front-end ---- */

int tbon_fe_missing(tbon_net_t *net, tbon_rank_t *out, size_t cap)
{
    if (!net || !net->is_fe || (cap && !out))
        return tb_net_fail(net, TBON_EINVAL, "tbon_fe_missing needs a front-end network and room "
                           "for ranks");
    pthread_mutex_lock(&net->mu);
    size_t n = net->nmissing;
    for (size_t i = 0; i < n && i < cap; i++)
        out[i] = net->missing[i];
    pthread_mutex_unlock(&net->mu);
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

int tbon_fe_cut_off(tbon_net_t *net, tbon_rank_t *out, size_t cap)
{
    if (!net || (cap && !out))
        return tb_net_fail(net, TBON_EINVAL, "tbon_fe_cut_off needs a network and room for ranks");
    pthread_mutex_lock(&net->mu);
    size_t n = 0, size = tb_topology_size(net->topo);
    for (tbon_rank_t r = 1; r < size; r++) {
        if (tb_topology_role(net->topo, r) != TB_ROLE_BE || !tb_topology_alive(net->topo, r) ||
            tb_topology_root_of(net->topo, r) == 0)
            continue;
        if (n < cap)
            out[n] = r;
        n++;
    }
    pthread_mutex_unlock(&net->mu);
    return (int)n;
}

static void note_rank(tbon_rank_t *v, size_t cap, size_t *n, tbon_rank_t r)
{
    if (*n < cap)
        v[*n] = r;
    (*n)++;
}

static int check_views(tbon_net_t *net, tbon_view_check_t *out, int timeout_ms)
{
    struct timespec ts, *abs = tb_net_deadline(timeout_ms, &ts);
    pthread_mutex_lock(&net->mu);
    uint64_t id = net->chk_next + 1;
    tb_cmd_t *c = tb_cmd_check(id);
    if (!c) {
        pthread_mutex_unlock(&net->mu);
        return tb_net_fail(net, TBON_ENOMEM, "out of memory");
    }
    net->chk_next = id;
    tb_node_post(net->node, c);
    int rc = 0;
    while (net->chk_done != id && !net->closed && rc == 0)
        rc = timeout_ms == 0 ? TBON_ETIMEOUT : tb_net_wait_until(net, abs);
    if (net->chk_done != id) {
        int closed = net->closed;
        pthread_mutex_unlock(&net->mu);
        if (closed)
            return tb_net_fail(net, TBON_ECLOSED, "the network has shut down");
        return tb_net_fail(net, TBON_ETIMEOUT, "not every node answered the check within %d ms",
                           timeout_ms);
    }
    /* Every live node of our view should have answered and agreed. */
    out->view_version = net->view_version;
    qsort(net->chk_agree, net->chk_nagree, sizeof *net->chk_agree, cmp_rank);
    qsort(net->chk_bad, net->chk_nbad, sizeof *net->chk_bad, cmp_rank);
    const size_t cap = sizeof out->disagree / sizeof out->disagree[0];
    for (size_t i = 0; i < net->chk_nbad; i++)
        note_rank(out->disagree, cap, &out->ndisagree, net->chk_bad[i]);
    out->agree = net->chk_nagree;
    size_t size = tb_topology_size(net->topo), ia = 0, ib = 0;
    for (tbon_rank_t r = 0; r < size; r++) {
        if (!tb_topology_alive(net->topo, r))
            continue;
        out->nodes++;
        while (ia < net->chk_nagree && net->chk_agree[ia] < r)
            ia++;
        while (ib < net->chk_nbad && net->chk_bad[ib] < r)
            ib++;
        if ((ia == net->chk_nagree || net->chk_agree[ia] != r) &&
            (ib == net->chk_nbad || net->chk_bad[ib] != r))
            note_rank(out->missing, cap, &out->nmissing, r);
    }
    pthread_mutex_unlock(&net->mu);
    if (out->ndisagree || out->nmissing)
        return tb_net_fail(net, TBON_ETOPOLOGY,
                           "%zu of %zu live nodes disagree with the front-end's "
                           "view and topology, %zu did not answer", out->ndisagree, out->nodes,
                           out->nmissing);
    return 0;
}

int tbon_fe_check_views(tbon_net_t *net, tbon_view_check_t *out, int timeout_ms)
{
    if (!net || !net->is_fe || !out)
        return tb_net_fail(net, TBON_EINVAL,
                           "tbon_fe_check_views needs a front-end network and a result");
    memset(out, 0, sizeof *out);
    /* (a destroy wakes the call, and waits for it to be gone) */
    tb_net_call_enter(net);
    return tb_net_call_leave(net, check_views(net, out, timeout_ms));
}

int tbon_fe_get_attr(tbon_net_t *net, tbon_rank_t rank, const char *key, char *buf, size_t cap)
{
    if (!net || !net->is_fe || !key || (cap && !buf))
        return tb_net_fail(net, TBON_EINVAL,
                           "tbon_fe_get_attr needs a front-end network, a key and "
                           "a buffer");
    pthread_mutex_lock(&net->mu);
    const char *v = tb_attrs_get(tb_net_replica(net, rank, 0), key);
    size_t len = v ? strlen(v) : 0;
    if (v && cap) {
        size_t k = len < cap - 1 ? len : cap - 1;
        memcpy(buf, v, k);
        buf[k] = 0;
    }
    pthread_mutex_unlock(&net->mu);
    if (!v)
        return tb_net_fail(net, TBON_ENOTFOUND, "rank %u has no attribute \"%s\"", rank, key);
    return len > INT32_MAX ? INT32_MAX : (int)len;
}

static int attrs_changed(tbon_net_t *net, tbon_rank_t *ranks, size_t cap, int timeout_ms)
{
    struct timespec ts, *abs = tb_net_deadline(timeout_ms, &ts);
    pthread_mutex_lock(&net->mu);
    while (!net->nchg && !net->closed && timeout_ms != 0 && tb_net_wait_until(net, abs) == 0)
        ;
    size_t k = 0;
    for (size_t r = 0; r < net->nrep && k < cap && net->nchg; r++)
        if (net->chg[r]) {
            net->chg[r] = 0;
            net->nchg--;
            ranks[k++] = (tbon_rank_t)r;
        }
    int closed = net->closed;
    pthread_mutex_unlock(&net->mu);
    if (k)
        return (int)k;
    if (closed)
        return tb_net_fail(net, TBON_ECLOSED, "the network has shut down");
    return tb_net_fail(net, TBON_ETIMEOUT, "no attribute changed within %d ms", timeout_ms);
}

int tbon_fe_attrs_changed(tbon_net_t *net, tbon_rank_t *ranks, size_t cap, int timeout_ms)
{
    if (!net || !net->is_fe || !ranks || !cap)
        return tb_net_fail(net, TBON_EINVAL, "tbon_fe_attrs_changed needs a front-end network and "
                           "room for ranks");
    tb_net_call_enter(net);
    return tb_net_call_leave(net, attrs_changed(net, ranks, cap, timeout_ms));
}

