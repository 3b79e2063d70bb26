/* slurm.c - Slurm as a launcher: the allocation's nodes, a topology over
 * them, one srun step per depth (slurm.h, docs/cluster.md "Slurm") */
#include "proc/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"
#include "proc/launch.h"
#include "util/log.h"

/* ---- the allocation ---- */

/* Run argv (no shell), its stdout into a malloc'd string. 0, or an errno
 * value (or -1: it failed; its stderr went to ours). */
static int capture(char *const argv[], char **out)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return e;
    }
    if (pid == 0) {
        dup2(p[1], 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    for (;;) {
        if (buf && len + 1 >= cap) {
            char *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                buf = NULL;
            } else {
                buf = b;
                cap *= 2;
            }
        }
        if (!buf)
            break;
        ssize_t n = read(p[0], buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!buf)
        return ENOMEM;
    buf[len] = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        free(buf);
        return WIFEXITED(st) && WEXITSTATUS(st) == 127 ? ENOENT : -1;
    }
    *out = buf;
    return 0;
}

int tb_slurm_nodes(const tb_config_t *conf, char ***hosts, size_t *n, tbon_error_t *err)
{
    const char *list = conf ? conf->slurm_job_nodelist : NULL;
    if (!list || !*list)
        list = conf ? conf->slurm_nodelist : NULL;
    if (!list || !*list)
        return tb_error_set(err, TBON_EINVAL, "not inside a Slurm allocation "
                            "(SLURM_JOB_NODELIST is not set): run under salloc or sbatch");
    char *argv[] = { (char *)"scontrol", (char *)"show", (char *)"hostnames", (char *)list, NULL };
    char *out = NULL;
    int e = capture(argv, &out);
    if (e)
        return tb_error_set(err, TBON_ELAUNCH, "scontrol show hostnames %s: %s", list,
                            e > 0 ? strerror(e) : "it failed (its message is above)");
    size_t cap = 16, k = 0;
    char **v = malloc(cap * sizeof *v);
    char *save = NULL;
    for (char *t = strtok_r(out, " \t\r\n", &save); v && t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (k == cap) {
            char **nv = realloc(v, 2 * cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
            cap *= 2;
        }
        if (!(v[k] = strdup(t)))
            break;
        k++;
    }
    int oom = !v || strtok_r(NULL, " \t\r\n", &save) != NULL;
    free(out);
    if (oom || k == 0) {
        tb_slurm_free_nodes(v, k);
        return oom ? tb_error_set(err, TBON_ENOMEM, "out of memory")
                   : tb_error_set(err, TBON_EINVAL, "SLURM_JOB_NODELIST=%s names no node", list);
    }
    *hosts = v;
    *n = k;
    return 0;
}

void tb_slurm_free_nodes(char **hosts, size_t n)
{
    for (size_t i = 0; hosts && i < n; i++)
        free(hosts[i]);
    free(hosts);
}

unsigned tb_slurm_default_per_node(const tb_config_t *conf)
{
    const char *v = conf ? conf->slurm_ntasks_per_node : NULL;
    char *end;
    unsigned long k = v ? strtoul(v, &end, 10) : 0;
    if (v && *v && !*end && k > 0 && k < 1u << 20)
        return (unsigned)k;
    /* "4(x2),2": counts, some repeated. */
    v = conf ? conf->slurm_tasks_per_node : NULL;
    unsigned long least = 0;
    while (v && *v) {
        k = strtoul(v, &end, 10);
        if (end == v)
            break;
        if (k > 0 && (!least || k < least))
            least = k;
        v = end + strcspn(end, ",");
        if (*v == ',')
            v++;
    }
    return least > 0 && least < 1u << 20 ? (unsigned)least : 1;
}

/* ---- the topology ---- */

/* The topology being built, its size so far (tb_topology_size says 0 until
 * it is finished), and per node how many local ids its host has used. */
struct build {
    tb_topology_t *t;
    uint32_t *next_lid;     /* by node index */
    tbon_rank_t size;
};

static int add(struct build *b, char *const *hosts, size_t node, tbon_rank_t parent,
               tbon_rank_t *rank)
{
    *rank = b->size;
    int rc = tb_topology_add(b->t, hosts[node], b->next_lid[node]++, parent);
    b->size += rc == 0;
    return rc;
}

tb_topology_t *tb_slurm_topology(const char *fe_host, char *const *hosts, size_t n,
                                 unsigned per_node, unsigned fanout, tbon_error_t *err)
{
    if (n == 0 || per_node == 0 || fanout < 2) {
        tb_error_set(err, TBON_EINVAL, "a Slurm tree needs nodes, at least one back-end per "
                     "node and a fan-out of at least 2");
        return NULL;
    }
    /* levels of commnodes above the nodes' own: fanout^levels >= n */
    uint32_t levels = 0;
    for (uint64_t reach = 1; reach < n; reach *= fanout)
        levels++;
    struct build b = { tb_topology_new(), calloc(n, sizeof(uint32_t)), 1 };
    /* One work list per depth: (first node, count, parent rank) groups. */
    struct grp { size_t first, count; tbon_rank_t parent; } *cur = malloc(n * sizeof *cur),
                                                             *next = malloc(n * sizeof *next);
    tbon_rank_t *node_cn = malloc(n * sizeof *node_cn);
    size_t ncur = 1, nnext;
    int rc = !b.t || !b.next_lid || !cur || !next || !node_cn ? TBON_ENOMEM : 0;
    if (!rc)
        rc = tb_topology_reserve(b.t, 1 + n * (size_t)(levels + 1) + n * (size_t)per_node);
    if (!rc)
        rc = tb_topology_add(b.t, fe_host, 0, TBON_RANK_NONE);
    /* The FE's host may be a node too: its local ids start after the FE's. */
    for (size_t i = 0; !rc && i < n; i++)
        if (strcmp(hosts[i], fe_host) == 0)
            b.next_lid[i] = 1;
    if (!rc) {
        cur[0].first = 0;
        cur[0].count = n;
        cur[0].parent = 0;
    }
    /* Each level splits every group into at most fanout groups, each under a
     * commnode on its first node; after `levels` splits every group is one
     * node, whose commnode is the one made at the last level. */
    for (uint32_t lv = 0; !rc && lv < levels; lv++) {
        nnext = 0;
        for (size_t g = 0; !rc && g < ncur; g++) {
            /* at most fanout parts; a group holds at most fanout^(levels-lv)
             * nodes, so every part ends as one node at the last level */
            size_t size = (cur[g].count + fanout - 1) / fanout;
            for (size_t f = cur[g].first; !rc && f < cur[g].first + cur[g].count; f += size) {
                size_t cnt = cur[g].first + cur[g].count - f;
                if (cnt > size)
                    cnt = size;
                tbon_rank_t r;
                rc = add(&b, hosts, f, cur[g].parent, &r);
                next[nnext].first = f;
                next[nnext].count = cnt;
                next[nnext].parent = r;
                nnext++;
            }
        }
        struct grp *tmp = cur;
        cur = next;
        next = tmp;
        ncur = nnext;
    }
    if (!rc && levels == 0) {
        /* one node: its commnode under the FE */
        tbon_rank_t r;
        rc = add(&b, hosts, 0, 0, &r);
        cur[0].parent = r;
    }
    for (size_t g = 0; !rc && g < ncur; g++)
        node_cn[cur[g].first] = cur[g].parent;
    for (size_t i = 0; !rc && i < n; i++)
        for (unsigned k = 0; !rc && k < per_node; k++) {
            tbon_rank_t r;
            rc = add(&b, hosts, i, node_cn[i], &r);
        }
    free(cur);
    free(next);
    free(node_cn);
    free(b.next_lid);
    if (rc) {
        tb_topology_destroy(b.t);
        tb_error_set(err, rc, rc == TBON_ENOMEM ? "out of memory"
                              : "cannot build the tree over the allocation's nodes (a "
                                "node named twice?)");
        return NULL;
    }
    if (tb_topology_finish(b.t, err) != 0) {
        tb_topology_destroy(b.t);
        return NULL;
    }
    return b.t;
}

uint32_t tb_slurm_depth(const tb_topology_t *t)
{
    uint32_t d = 0;
    for (tbon_rank_t r = 0; r < tb_topology_size(t); r++)
        if (tb_topology_depth(t, r) > d)
            d = tb_topology_depth(t, r);
    return d;
}

/* ---- steps ---- */

/* Append to a malloc'd string. 0 or TBON_ENOMEM. */
static int append(char **s, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int append(char **s, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(*s ? *s + *len : NULL, *s ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (k < 0)
            return TBON_ENOMEM;
        if (*s && *len + (size_t)k < *cap) {
            *len += (size_t)k;
            return 0;
        }
        size_t nc = (*cap ? *cap : 256) * 2 + (size_t)k;
        char *ns = realloc(*s, nc);
        if (!ns)
            return TBON_ENOMEM;
        if (!*s)
            ns[0] = 0;
        *s = ns;
        *cap = nc;
    }
}

int tb_slurm_step(const tb_topology_t *t, uint32_t d, const char *fe_addr, char **nodelist,
                  unsigned *per_node, size_t *nnodes, char **map, tbon_error_t *err)
{
    char *nl = NULL, *mp = NULL;
    size_t nll = 0, nlc = 0, mpl = 0, mpc = 0, nodes = 0;
    unsigned count = 0;
    int rc = 0;
    size_t size = tb_topology_size(t);
    for (tbon_rank_t r = 1; r < size && !rc;) {
        if (tb_topology_depth(t, r) != d) {
            r++;
            continue;
        }
        /* the run of this depth's ranks on one host with one parent */
        const char *host = tb_topology_host(t, r);
        tbon_rank_t p = tb_topology_parent(t, r), first = r;
        unsigned k = 0;
        while (r < size && tb_topology_depth(t, r) == d && tb_topology_parent(t, r) == p &&
               strcmp(tb_topology_host(t, r), host) == 0) {
            r++;
            k++;
        }
        if (count && k != count) {
            rc = tb_error_set(err, TBON_EINVAL, "depth %u has %u processes on %s but %u "
                              "elsewhere: one srun step needs the same number on every node",
                              d, k, host, count);
            break;
        }
        count = k;
        char phost[300];
        if (p == 0)
            snprintf(phost, sizeof phost, strchr(fe_addr, ':') ? "[%s]" : "%s", fe_addr);
        else
            snprintf(phost, sizeof phost, "%s", tb_topology_host(t, p));
        rc = append(&nl, &nll, &nlc, "%s%s", nodes ? "," : "", host);
        if (!rc)
            rc = append(&mp, &mpl, &mpc, "%s%s=%u@%s:%u", nodes ? ";" : "", host, first, phost,
                        (unsigned)tb_topology_port(t, p));
        if (rc)
            tb_error_set(err, rc, "out of memory");
        nodes++;
    }
    if (!rc && nodes == 0)
        rc = tb_error_set(err, TBON_EINVAL, "no process at depth %u", d);
    if (rc) {
        free(nl);
        free(mp);
        return rc;
    }
    *nodelist = nl;
    *map = mp;
    *per_node = count;
    *nnodes = nodes;
    return 0;
}

int tb_slurm_map_find(const char *map, const char *node, unsigned local_id, tbon_rank_t *rank,
                      char *host, size_t hostlen, uint16_t *port, tbon_error_t *err)
{
    size_t nlen = strlen(node);
    for (const char *e = map; e && *e;) {
        size_t len = strcspn(e, ";");
        const char *eq = memchr(e, '=', len);
        if (!eq)
            break;
        if ((size_t)(eq - e) == nlen && strncmp(e, node, nlen) == 0) {
            char *end;
            unsigned long first = strtoul(eq + 1, &end, 10);
            const char *at = end, *colon = NULL;
            for (const char *c = at; c < e + len; c++)
                if (*c == ':')
                    colon = c;
            if (*at != '@' || !colon || colon == at + 1)
                break;
            const char *h = at + 1;
            size_t hl = (size_t)(colon - h);
            if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
                h++;
                hl -= 2;
            }
            unsigned long p = strtoul(colon + 1, &end, 10);
            if (end != e + len || p == 0 || p > 65535 || hl >= hostlen ||
                first + local_id >= TBON_RANK_NONE)
                break;
            memcpy(host, h, hl);
            host[hl] = 0;
            *port = (uint16_t)p;
            *rank = (tbon_rank_t)(first + local_id);
            return 0;
        }
        e += len;
        if (*e == ';')
            e++;
    }
    return tb_error_set(err, TBON_EINVAL, "%s: no well-formed entry for node %s",
                        TB_SLURM_MAP_ARG, node);
}

int tb_slurm_spawn(const tb_config_t *conf, const char *exe, const char *const *argv,
                   const char *nodelist, unsigned per_node, size_t nnodes, const char *map,
                   const char *session, const char *timeout_ms, const char *secret,
                   int *stderr_pipe, pid_t *pid, tbon_error_t *err)
{
    const char *srun = conf ? conf->srun : NULL;
    if (!srun || !*srun)
        srun = "srun";
    char nn[32], nt[32], pn[32];
    snprintf(nn, sizeof nn, "--nodes=%zu", nnodes);
    snprintf(nt, sizeof nt, "--ntasks=%zu", nnodes * per_node);
    snprintf(pn, sizeof pn, "--ntasks-per-node=%u", per_node);
    size_t na = 0;
    while (argv && argv[na])
        na++;
    const char **v = calloc(na + 32, sizeof *v);
    char *nlarg = NULL;
    if (!v || asprintf(&nlarg, "--nodelist=%s", nodelist) < 0) {
        free(v);
        return tb_error_set(err, TBON_ENOMEM, "out of memory");
    }
    size_t k = 0;
    v[k++] = srun;
    /* --overlap: beside the job's own steps (and each other), on CPUs they
     * hold; --overcommit: more tasks than CPUs (they mostly wait);
     * --input=all: the secret line to every task; --kill-on-bad-exit=0: one
     * task's failure is the tree's to handle, not Slurm's. */
    const char *opts[] = { "--overlap", "--overcommit", "--input=all", "--kill-on-bad-exit=0",
                           "--quiet", nn, nt, pn, nlarg, NULL };
    for (size_t i = 0; opts[i]; i++)
        v[k++] = opts[i];
    v[k++] = exe;
    for (size_t i = 1; i < na; i++)
        v[k++] = argv[i];
    const char *tail[] = { TB_SLURM_MAP_ARG, map, "--tbon-session", session, "--tbon-timeout",
                           timeout_ms, TB_SECRET_STDIN_ARG, NULL };
    for (size_t i = 0; tail[i]; i++)
        v[k++] = tail[i];
    /* srun from PATH: tb_launch wants a path it can check. */
    char path[4096];
    const char *exe_path = srun;
    if (!strchr(srun, '/')) {
        const char *pathv = conf ? conf->path : NULL;
        exe_path = NULL;
        for (const char *p = pathv; p && *p && !exe_path;) {
            size_t l = strcspn(p, ":");
            snprintf(path, sizeof path, "%.*s/%s", (int)l, p, srun);
            if (l && access(path, X_OK) == 0)
                exe_path = path;
            p += l + (p[l] == ':');
        }
    }
    int rc;
    if (!exe_path) {
        rc = tb_error_set(err, TBON_ELAUNCH, "cannot launch a Slurm step: %s is not in PATH "
                          "(TBON_SRUN names another)", srun);
    } else {
        tb_launch_spec_t spec = { .host = "localhost", .here = 1, .exe = exe_path, .argv = v,
                                  .secret = secret, .secret_stdin = 1,
                                  .stderr_pipe = stderr_pipe };
        rc = tb_launch(&spec, pid, err);
        if (rc == 0)
            TB_INFO("launch", "srun step of %zu x %u %s on %s (pid %d)", nnodes, per_node, exe,
                    nodelist, (int)*pid);
    }
    free(nlarg);
    free(v);
    return rc;
}
