/* node_start.c - launching a node's children (parallel and recursive: each
 * commnode launches its own, docs/protocol.md 7.1), one process at a time
 * or as Slurm steps, with errors that name the rank and host; writing the
 * attach file, and reaping. What a failed launch means for the start-up
 * (a child left out, the tree ready without it) is node_missing.c's, which
 * calls this file; this file calls none of it. */
#include "node/node_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"
#include "proc/launch.h"
#include "util/log.h"
#include "util/safefile.h"
#include "proc/relay.h"
#include "proc/slurm.h"
#include "proc/sshmux.h"
#include "net/sock.h"

static const char *host_of(const tb_node_t *n, tbon_rank_t r)
{
    return tb_topology_host(n->topo, r);
}

static int is_loopback_addr(const char *a)
{
    return strncmp(a, "127.", 4) == 0 || strcmp(a, "::1") == 0;
}

/* Where children reach us when the route toward their host is unknown (a
 * name only the remote shell resolves, through its own configuration): the
 * address our parent reaches us at, unless that is the loopback; else the
 * one routed toward our own topology host; else the loopback address our
 * parent uses after all (the child host is a name for this machine that only
 * the remote shell knows); else our topology host name. */
static void fallback_address(const tb_node_t *n, char *out, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char seen[64] = "";
    if (n->parent && getsockname(n->parent->fd, (struct sockaddr *)&ss, &sl) == 0 &&
        tb_sock_addr_string((struct sockaddr *)&ss, seen, sizeof seen) == 0 &&
        !is_loopback_addr(seen)) {
        snprintf(out, len, "%s", seen);
        return;
    }
    if (tb_sock_route_addr(n->cfg.conf, host_of(n, n->rank), out, len, NULL) == 0 &&
        !is_loopback_addr(out))
        return;
    snprintf(out, len, "%s", *seen ? seen : host_of(n, n->rank));
}

/* Does environment entry kv travel to remote children (docs/cluster.md,
 * "What travels")? TBON_* (but the secret, which goes on stdin, and a
 * TBON_IFACE that is an address of this host only), LD_LIBRARY_PATH, and the
 * names listed in $TBON_ENV (blanks, commas or colons between them). */
static int env_travels(const char *kv, const char *names)
{
    size_t len = strcspn(kv, "=");
    if (!kv[len] || len == 0)
        return 0;
    if (len == strlen(TB_SECRET_ENV) && strncmp(kv, TB_SECRET_ENV, len) == 0)
        return 0;
    if (strncmp(kv, "TBON_IFACE=", 11) == 0) {
        /* an interface name means the same on every host, an address not */
        struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *res = NULL;
        int numeric = getaddrinfo(kv + 11, NULL, &hints, &res) == 0;
        if (res)
            freeaddrinfo(res);
        return !numeric;
    }
    if (strncmp(kv, "TBON_", 5) == 0 ||
        (len == 15 && strncmp(kv, "LD_LIBRARY_PATH", 15) == 0))
        return 1;
    for (const char *p = names; p && *p;) {
        p += strspn(p, " \t,:");
        size_t l = strcspn(p, " \t,:");
        if (l == len && strncmp(p, kv, len) == 0)
            return 1;
        p += l;
    }
    return 0;
}

/* The environment entries that travel, NULL-terminated (entries point into
 * environ; the array is malloc'd), or NULL when out of memory. names: the
 * configuration's TBON_ENV. */
static const char **travelling_env(const char *names)
{
    extern char **environ;
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    const char **env = calloc(n + 1, sizeof *env);
    for (size_t i = 0; env && i < n; i++)
        if (env_travels(environ[i], names))
            env[k++] = environ[i];
    return env;
}

/* A child on our own topology host runs beside us, whatever the name: it
 * is launched directly and connects over the loopback. */
static int child_is_local(const tb_node_t *n, tbon_rank_t r)
{
    return tb_host_is_local(host_of(n, r)) || strcmp(host_of(n, r), host_of(n, n->rank)) == 0;
}

/* The --tbon-timeout a launched child gets: three quarters of what is left,
 * so that the node nearest a failure reports it (by name) before its
 * ancestors time out. */
static void child_timeout(const tb_node_t *n, char *out, size_t len)
{
    int64_t left = n->start_deadline - tb_now_ms();
    snprintf(out, len, "%lld", (long long)(left > 4 ? left * 3 / 4 : 1));
}

/* Start depth d's srun step (FE under Slurm). 0 or an error code (err). */
static int slurm_step(tb_node_t *n, uint32_t d, tbon_error_t *err)
{
    /* The FE is named by the address routed toward the first node. */
    char fe[64] = "";
    tbon_rank_t first = 1;
    while (first < tb_topology_size(n->topo) && tb_topology_depth(n->topo, first) != 1)
        first++;
    if (tb_sock_route_addr(n->cfg.conf, host_of(n, first), fe, sizeof fe, NULL) != 0)
        snprintf(fe, sizeof fe, "%s", host_of(n, 0));
    char *nodelist = NULL, *map = NULL, secret[TB_SECRET_HEX_SIZE], session[24], tmo[24];
    unsigned per = 0;
    size_t nnodes = 0;
    int rc = tb_slurm_step(n->topo, d, fe, &nodelist, &per, &nnodes, &map, err);
    if (rc)
        return rc;
    int be = d == n->fe->slurm_depth;
    const char *exe = be ? n->cfg.backend_exe : n->cfg.commnode_path;
    const char *cn_argv[] = { exe, NULL };
    tb_secret_to_hex(n->cfg.session.secret, secret);
    snprintf(session, sizeof session, "%016llx", (unsigned long long)n->cfg.session.id);
    child_timeout(n, tmo, sizeof tmo);
    int errfd = -1;
    pid_t pid = 0;
    if (!exe)
        rc = tb_error_set(err, TBON_ELAUNCH, "no %s program to start at depth %u",
                          be ? "back-end" : "commnode", d);
    else
        rc = tb_slurm_spawn(n->cfg.conf, exe, be ? n->cfg.backend_argv : cn_argv, nodelist,
                            per, nnodes, map, session, tmo, secret, &errfd, &pid, err);
    explicit_bzero(secret, sizeof secret);
    free(nodelist);
    free(map);
    if (rc)
        return rc;
    n->fe->slurm_pid[d] = pid;
    tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_LAUNCHED,
                                   .u.launched = { TB_SLURM_STEP_RANK(d), pid } });
    if (errfd >= 0 && tb_relay_add(n->relay, TB_SLURM_STEP_RANK(d), errfd) != 0)
        TB_WARN("launch", "the srun step of depth %u: its stderr is not relayed", d);
    return 0;
}

void tb_node_slurm_next(tb_node_t *n)
{
    if (!n->fe || n->failed || tb_node_ending(n) || !n->fe->slurm_pid)
        return;
    while (n->fe->slurm_next <= n->fe->slurm_depth) {
        uint32_t d = n->fe->slurm_next;
        /* every parent of depth d listens (its port came up) */
        for (tbon_rank_t r = 1; r < tb_topology_size(n->topo); r++)
            if (tb_topology_depth(n->topo, r) == d - 1 && tb_topology_port(n->topo, r) == 0)
                return;
        n->fe->slurm_next++;
        tbon_error_t err = { 0 };
        if (slurm_step(n, d, &err) != 0) {
            tb_node_fail(n, err.code ? err.code : TBON_ELAUNCH, "%s", err.msg);
            return;
        }
    }
}

/* "exited with status 1", "was killed by signal 9" */
void tb_node_describe_exit(int status, char *how, size_t len)
{
    if (status >= 0 && WIFEXITED(status))
        snprintf(how, len, "exited with status %d", WEXITSTATUS(status));
    else if (status >= 0 && WIFSIGNALED(status))
        snprintf(how, len, "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(how, len, "ended");
}

/* An srun step ended (FE under Slurm): before the tree is ready, the
 * start-up failed, and srun's first line (or its tasks') says why. */
int tb_node_slurm_exited(tb_node_t *n, tbon_rank_t r, int status)
{
    if (!n->fe || !n->fe->slurm_pid || TB_SLURM_STEP_DEPTH(r) > n->fe->slurm_depth)
        return 0;
    uint32_t d = TB_SLURM_STEP_DEPTH(r);
    if (d <= n->fe->slurm_depth)
        n->fe->slurm_pid[d] = 0;
    if (tb_node_life(n) != TB_LIFE_STARTING)
        return 1;
    char said[320], how[64];
    int has = tb_relay_first_line(n->relay, r, said, sizeof said);
    tb_node_describe_exit(status, how, sizeof how);
    tb_node_fail(n, TBON_ELAUNCH, "the srun step of depth %u %s before the tree was ready%s%s",
                 d, how, has ? ": " : "", has ? said : "");
    return 1;
}

/* What every launch of one round shares: the secret and session as
 * arguments, the environment that travels, and where each host's children
 * reach us (by host index, looked up once). */
struct tb_launch_round {
    char secret[TB_SECRET_HEX_SIZE], session[24];
    const char **env;
    char (*addr)[64];
};
typedef struct tb_launch_round launch_ctx_t;

tb_launch_round_t *tb_node_round_new(tb_node_t *n, tbon_error_t *err)
{
    launch_ctx_t *c = calloc(1, sizeof *c);
    if (c) {
        c->env = travelling_env(n->cfg.conf->env);
        c->addr = calloc(tb_topology_num_hosts(n->topo) + 1, sizeof *c->addr);
    }
    if (!c || !c->env || !c->addr || (!n->relay && !(n->relay = tb_relay_new()))) {
        tb_node_round_destroy(c);
        tb_error_set(err, TBON_ENOMEM, "out of memory");
        return NULL;
    }
    tb_secret_to_hex(n->cfg.session.secret, c->secret);
    snprintf(c->session, sizeof c->session, "%016llx", (unsigned long long)n->cfg.session.id);
    return c;
}

void tb_node_round_destroy(tb_launch_round_t *c)
{
    if (!c)
        return;
    explicit_bzero(c->secret, sizeof c->secret);
    free(c->env);
    free(c->addr);
    free(c);
}

int tb_node_launch_one(tb_node_t *n, size_t i, const char *exe, tb_launch_round_t *c,
                       tbon_error_t *err)
{
    tb_child_t *ch = &n->child[i];
    const char *host = host_of(n, ch->rank);
    char rank[16], parent[96], tmo[24];
    int local = child_is_local(n, ch->rank);
    /* Others reach us at the address the kernel routes toward their host
     * from, never at the loopback (nor at what our own parent saw, which
     * is the loopback when it runs beside us). */
    char *a = c->addr[tb_topology_host_index(n->topo, ch->rank)];
    if (!local && !*a) {
        tbon_error_t rerr = { 0 };
        if (tb_sock_route_addr(n->cfg.conf, host, a, sizeof c->addr[0], &rerr) == TBON_EINVAL)
            return tb_error_set(err, TBON_ELAUNCH, "rank %u on host %s: %s", ch->rank, host,
                                rerr.msg);
        if (!*a) {
            fallback_address(n, a, sizeof c->addr[0]);
            TB_INFO("launch", "%s; children on %s are told to reach us at %s", rerr.msg,
                    host, a);
        }
    }
    child_timeout(n, tmo, sizeof tmo);
    tb_sock_format_hostport(local ? "127.0.0.1" : a, n->port, parent, sizeof parent);
    snprintf(rank, sizeof rank, "%u", ch->rank);
    const char *tail[] = { "--tbon-parent", parent, "--tbon-rank", rank,
                           "--tbon-session", c->session, "--tbon-timeout", tmo, NULL };
    size_t nargs = 0;
    const char *const *uargs = ch->is_be ? n->cfg.backend_argv : NULL;
    while (uargs && uargs[nargs])
        nargs++;
    const char **argv = calloc(nargs + 11, sizeof *argv);
    if (!argv)
        return tb_error_set(err, TBON_ENOMEM, "out of memory");
    size_t k = 0;
    if (nargs == 0)
        argv[k++] = exe;
    for (size_t j = 0; j < nargs; j++)
        argv[k++] = uargs[j];
    for (size_t j = 0; tail[j]; j++)
        argv[k++] = tail[j];
    /* A remote child's stderr comes through a pipe from the remote shell
     * (which outlives our death: it ignores SIGPIPE), so that its first
     * words can explain its failure. A local child keeps ours: a pipe
     * would break with us and take an orphan with it. */
    int errfd = -1;
    const char *via = local ? NULL : tb_sshmux_rsh(n->sshmux, host);
    tb_launch_spec_t spec = { .host = host, .here = local, .exe = exe, .argv = argv,
                              .env = c->env, .secret = c->secret,
                              .rsh = via ? via : n->cfg.rsh,  /* NULL: $TBON_RSH, else
                                                                 TB_DEFAULT_RSH */
                              .stderr_pipe = local ? NULL : &errfd };
    int rc = tb_launch(&spec, &ch->pid, err);
    free(argv);
    if (rc) {
        /* The message names the program and the host; add the rank. */
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        return tb_error_set(err, TBON_ELAUNCH, "rank %u: %s", ch->rank, msg);
    }
    TB_DEBUG("launch", "rank %u on %s: pid %d (%s), parent address %s", ch->rank, host,
             (int)ch->pid, exe, parent);
    tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_LAUNCHED,
                                   .u.launched = { ch->rank, ch->pid } });
    if (errfd >= 0 && tb_relay_add(n->relay, ch->rank, errfd) != 0)
        TB_WARN("launch", "rank %u: its stderr is not relayed", ch->rank);
    return 0;
}

int tb_node_launch_prepare(tb_node_t *n, int *slurm, tbon_error_t *err)
{
    *slurm = 0;
    if (n->cfg.slurm && n->role == TB_ROLE_FE) {
        *slurm = 1;
        n->fe->slurm_depth = tb_slurm_depth(n->topo);
        n->fe->slurm_next = 1;
        n->fe->slurm_pid = calloc(n->fe->slurm_depth + 1, sizeof *n->fe->slurm_pid);
        if (!n->fe->slurm_pid || (!n->relay && !(n->relay = tb_relay_new())))
            return tb_error_set(err, TBON_ENOMEM, "out of memory");
        /* depth 1's parent, the FE, listens already */
        n->fe->slurm_next = 2;
        return slurm_step(n, 1, err);
    }
    /* Hosts with several of our children share one ssh connection
     * (sshmux.h): start their masters and wait for them first. */
    uint32_t nhosts = tb_topology_num_hosts(n->topo);
    uint32_t *count = !n->cfg.rsh && !n->sshmux ? calloc(nhosts, sizeof *count) : NULL;
    for (size_t i = 0; count && i < n->nchild; i++) {
        const char *exe = n->child[i].is_be ? n->cfg.backend_exe : n->cfg.commnode_path;
        if (exe && !child_is_local(n, n->child[i].rank))
            count[tb_topology_host_index(n->topo, n->child[i].rank)]++;
    }
    for (size_t i = 0; count && i < n->nchild; i++) {
        uint32_t h = tb_topology_host_index(n->topo, n->child[i].rank);
        if (count[h] >= 2 && (n->sshmux || (n->sshmux = tb_sshmux_new(n->cfg.conf,
                                                                        n->cfg.session.id,
                                                                        n->rank))))
            tb_sshmux_open(n->sshmux, host_of(n, n->child[i].rank));
    }
    free(count);
    if (n->sshmux) {
        int64_t left = n->start_deadline - tb_now_ms();
        tb_sshmux_wait(n->sshmux, left > 20000 ? 10000 : (int)(left > 0 ? left / 2 : 0));
    }
    return 0;
}

static int parent_of_be(const tb_node_t *n, tbon_rank_t r)
{
    size_t k;
    const tbon_rank_t *kids = tb_topology_children(n->topo, r, &k);
    for (size_t i = 0; i < k; i++)
        if (tb_topology_role(n->topo, kids[i]) == TB_ROLE_BE)
            return 1;
    return 0;
}

/* The attach file (docs/user-guide.md, "Attach mode"): written once every
 * back-end's parent is listening. Mode 0600: it holds the session secret. */
void tb_node_write_attach(tb_node_t *n)
{
    if (n->attach_written || !n->cfg.attach_file)
        return;
    size_t size = tb_topology_size(n->topo);
    for (tbon_rank_t r = 0; r < size; r++) {
        if (tb_topology_role(n->topo, r) != TB_ROLE_BE)
            continue;
        if (tb_topology_port(n->topo, tb_topology_parent(n->topo, r)) == 0)
            return;
    }
    /* Issue 19, item 5: a name of mkstemp's, mode 0600 from creation, in a
     * directory nobody else can write to (util/safefile.c). */
    char tmp[4096], why[512];
    int fd = tb_safe_create(n->cfg.attach_file, tmp, sizeof tmp, why, sizeof why);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) {
            snprintf(why, sizeof why, "%s", strerror(errno));
            close(fd);
            unlink(tmp);
        }
        tb_node_fail(n, TBON_EIO, "cannot write the attach file %s: %s", n->cfg.attach_file,
                     why);
        return;
    }
    char secret[TB_SECRET_HEX_SIZE];
    tb_secret_to_hex(n->cfg.session.secret, secret);
    fprintf(f, "# tbon attach file: back-ends join with tbon_be_attach(FILE, RANK)\n");
    fprintf(f, "version=1\nsession=%016llx\nsecret=%s\n",
            (unsigned long long)n->cfg.session.id, secret);
    for (tbon_rank_t r = 0; r < size; r++) {
        /* The FE's line always: new back-ends ask it to join. */
        if (tb_topology_role(n->topo, r) == TB_ROLE_BE || (r && !parent_of_be(n, r)))
            continue;
        fprintf(f, "node=%u host=%s port=%u\n", r, host_of(n, r),
                (unsigned)tb_topology_port(n->topo, r));
    }
    for (tbon_rank_t r = 0; r < size; r++)
        if (tb_topology_role(n->topo, r) == TB_ROLE_BE)
            fprintf(f, "backend=%u parent=%u host=%s\n", r, tb_topology_parent(n->topo, r),
                    host_of(n, r));
    int bad = fflush(f) != 0;
    bad |= fclose(f) != 0;
    if (bad) {
        snprintf(why, sizeof why, "%s", strerror(errno));
        unlink(tmp);
    }
    if (bad || tb_safe_commit(tmp, n->cfg.attach_file, why, sizeof why) != 0) {
        tb_node_fail(n, TBON_EIO, "cannot write the attach file %s: %s", n->cfg.attach_file,
                     why);
        return;
    }
    n->attach_written = 1;
    free(n->fe->attach_path);
    n->fe->attach_path = strdup(n->cfg.attach_file);    /* removed with the session */
    TB_INFO("attach", "wrote %s", n->cfg.attach_file);
}

void tb_node_reap_all(tb_node_t *n)
{
    if (n->detached)
        return;         /* the tree goes on: nobody here is ours to end */
    int64_t deadline = tb_now_ms() + 2000;
    /* Slurm steps end when their tasks do (they have been told to); one
     * that does not is killed, and Slurm then ends its tasks. */
    for (uint32_t d = 0; n->fe && n->fe->slurm_pid && d <= n->fe->slurm_depth; d++) {
        pid_t pid = n->fe->slurm_pid[d];
        if (pid <= 0 || n->ft->reaped(n, pid))
            continue;
        int64_t left = deadline - tb_now_ms();
        tb_reap(pid, left > 0 ? (int)left : 0);
        n->fe->slurm_pid[d] = 0;
    }
    /* (the ssh masters go after the children: see tb_node_destroy) */
    for (size_t i = 0; i < n->nchild; i++) {
        tb_child_t *ch = &n->child[i];
        if (ch->pid <= 0 || ch->released || n->ft->reaped(n, ch->pid))
            continue;
        /* One that never connected is not coming: no reason to wait. */
        int64_t left = ch->state == CH_LAUNCHED ? 0 : deadline - tb_now_ms();
        int st = tb_reap(ch->pid, left > 0 ? (int)left : 0);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
            TB_DEBUG("shutdown", "rank %u: wait status %#x", ch->rank, (unsigned)st);
        ch->pid = 0;
    }
}
