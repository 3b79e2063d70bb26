/* node_start.c - a node's start-up and end: launching its children (parallel
 * and recursive: each commnode launches its own, as DESIGN.md "Start-up"
 * says), counting them in, reporting failures by node and host, writing the
 * attach file, and reaping */
#include "node_int.h"

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

#include "error.h"
#include "launch.h"
#include "log.h"
#include "sock.h"

static const char *host_of(const tb_node_t *n, tbon_rank_t r)
{
    return tb_topology_host(n->topo, r);
}

/* The address other hosts reach this node at: the one it uses itself towards
 * its parent (what the network routes to it), or at the front-end, its
 * topology host name. A topology name need not resolve everywhere. */
static void own_address(const tb_node_t *n, char *out, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (n->parent && getsockname(n->parent->fd, (struct sockaddr *)&ss, &sl) == 0 &&
        getnameinfo((struct sockaddr *)&ss, sl, out, (socklen_t)len, NULL, 0,
                    NI_NUMERICHOST) == 0)
        return;
    snprintf(out, len, "%s", host_of(n, n->rank));
}

int tb_node_launch_children(tb_node_t *n, tbon_error_t *err)
{
    if (n->nchild == 0)
        return 0;
    char secret[TB_SECRET_HEX_SIZE], session[24], rank[16], parent[300], tmo[24];
    tb_secret_to_hex(n->cfg.session.secret, secret);
    snprintf(session, sizeof session, "%016llx", (unsigned long long)n->cfg.session.id);
    int64_t left = n->start_deadline - tb_now_ms();
    /* Each level gets three quarters of what is left, so that the node
     * nearest a failure reports it (by name) before its ancestors time out. */
    snprintf(tmo, sizeof tmo, "%lld", (long long)(left > 4 ? left * 3 / 4 : 1));
    const char *env[4] = { NULL };
    char logenv[64], direnv[600];
    size_t ne = 0;
    const char *lv = getenv("TBON_LOG");
    if (lv && strlen(lv) < 40) {
        snprintf(logenv, sizeof logenv, "TBON_LOG=%s", lv);
        env[ne++] = logenv;
    }
    const char *ld = getenv("TBON_LOG_DIR");
    if (ld && strlen(ld) < 500) {
        snprintf(direnv, sizeof direnv, "TBON_LOG_DIR=%s", ld);
        env[ne++] = direnv;
    }
    const char *rsh = n->cfg.rsh ? n->cfg.rsh : "ssh";
    char self[256];
    own_address(n, self, sizeof self);
    for (size_t i = 0; i < n->nchild; i++) {
        tb_child_t *ch = &n->child[i];
        const char *host = host_of(n, ch->rank);
        const char *exe = ch->is_be ? n->cfg.backend_exe : n->cfg.commnode_path;
        if (!exe)
            continue;   /* attach mode: the back-end comes by itself */
        /* A child on our own topology host runs beside us, whatever the
         * name: launch it directly and let it connect over loopback. */
        int local = tb_host_is_local(host) || strcmp(host, host_of(n, n->rank)) == 0;
        snprintf(parent, sizeof parent, "%s:%u", local ? "127.0.0.1" : self, (unsigned)n->port);
        snprintf(rank, sizeof rank, "%u", ch->rank);
        const char *tail[] = { "--tbon-parent", parent, "--tbon-rank", rank,
                               "--tbon-session", session, "--tbon-timeout", tmo, NULL };
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
        tb_launch_spec_t spec = { .host = local ? "localhost" : host, .exe = exe, .argv = argv, .env = env,
                                  .secret = secret, .rsh = rsh };
        int rc = tb_launch(&spec, &ch->pid, err);
        free(argv);
        if (rc) {
            /* The message names the program and the host; add the rank. */
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
            return tb_error_set(err, TBON_ELAUNCH, "rank %u: %s", ch->rank, msg);
        }
        TB_DEBUG("launch", "rank %u on %s: pid %d (%s)", ch->rank, host, (int)ch->pid, exe);
        tb_eds_watch_child(n->eds, ch->rank, ch->pid);
    }
    return 0;
}

void tb_node_check_ready(tb_node_t *n)
{
    if (n->ready_sent || n->failed || n->role == TB_ROLE_BE)
        return;
    size_t count = 1, ready = 0;
    for (size_t i = 0; i < n->nchild; i++) {
        if (n->child[i].state == CH_READY) {
            count += n->child[i].count;
            ready++;
        }
    }
    if (n->role == TB_ROLE_FE && n->cbs.progress && ready > n->ready_count)
        n->cbs.progress(n->cbs.arg, count, n->total);
    n->ready_count = ready;
    if (ready < n->nchild)
        return;
    n->ready_sent = 1;
    TB_DEBUG("startup", "subtree of %zu processes ready", count);
    if (n->role == TB_ROLE_FE) {
        if (n->cbs.status)
            n->cbs.status(n->cbs.arg, TB_NODE_READY, 0, "ready");
        /* Every node learns where the FE and the commnodes listen: an orphan
         * asks one of them to adopt it (docs/protocol.md 8.1). */
        if (!n->cfg.no_ft)
            tb_ft_send_ports(n);
    } else {
        tb_node_send_ctl(n, n->parent, TB_CTL_READY,
                         tbon_packet_new(TB_CTL_READY, "%ud", (uint32_t)count));
    }
}

void tb_node_startup_timer(tb_node_t *n)
{
    int ms = n->cfg.startup_timeout_ms > 0 ? n->cfg.startup_timeout_ms : 30000;
    for (size_t i = 0; i < n->nchild; i++) {
        tb_child_t *ch = &n->child[i];
        if (ch->state == CH_LAUNCHED) {
            tb_node_fail(n, TBON_ETIMEOUT, "rank %u on host %s did not connect within %d ms",
                         ch->rank, host_of(n, ch->rank), ms);
            return;
        }
        if (ch->state == CH_CONNECTED) {
            tb_node_fail(n, TBON_ETIMEOUT,
                         "rank %u on host %s did not report its subtree ready within %d ms",
                         ch->rank, host_of(n, ch->rank), ms);
            return;
        }
    }
    tb_node_fail(n, TBON_ETIMEOUT, "rank %u on host %s: start-up timed out after %d ms",
                 n->rank, host_of(n, n->rank), ms);
}

void tb_node_child_exited(tb_node_t *n, tbon_rank_t r, int status)
{
    int i = tb_node_child_index(n, r);
    if (i < 0)
        return;
    tb_child_t *ch = &n->child[i];
    ch->exited = 1;
    ch->status = status;
    if (n->shutting_down || n->ready_sent || ch->state == CH_READY)
        return;
    char how[64];
    if (status >= 0 && WIFEXITED(status))
        snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
    else if (status >= 0 && WIFSIGNALED(status))
        snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(how, sizeof how, "ended");
    tb_node_fail(n, TBON_ELAUNCH, "rank %u on host %s %s before it was ready", r,
                 host_of(n, r), how);
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
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", n->cfg.attach_file, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        tb_node_fail(n, TBON_EIO, "cannot write the attach file %s: %s", n->cfg.attach_file,
                     strerror(errno));
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
    if (bad || rename(tmp, n->cfg.attach_file) != 0) {
        unlink(tmp);
        tb_node_fail(n, TBON_EIO, "cannot write the attach file %s: %s", n->cfg.attach_file,
                     strerror(errno));
        return;
    }
    n->attach_written = 1;
    free(n->attach_path);
    n->attach_path = strdup(n->cfg.attach_file);    /* removed with the session */
    TB_INFO("attach", "wrote %s", n->cfg.attach_file);
}

void tb_node_reap_all(tb_node_t *n)
{
    int64_t deadline = tb_now_ms() + 2000;
    for (size_t i = 0; i < n->nchild; i++) {
        tb_child_t *ch = &n->child[i];
        if (ch->pid <= 0 || ch->released || (n->eds && tb_eds_reaped(n->eds, ch->pid)))
            continue;
        /* One that never connected is not coming: no reason to wait. */
        int64_t left = ch->state == CH_LAUNCHED ? 0 : deadline - tb_now_ms();
        int st = tb_reap(ch->pid, left > 0 ? (int)left : 0);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
            TB_DEBUG("shutdown", "rank %u: wait status %#x", ch->rank, (unsigned)st);
        ch->pid = 0;
    }
}
