/* sshmux.c - one ssh master per remote host for a node's children (sshmux.h) */
#include "proc/sshmux.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc/launch.h"
#include "util/log.h"
#include "net/sock.h"
#include "util/array.h"

#define MAX_SOCK_PATH 100     /* sun_path is 108 bytes */

struct master {
    char  *host;
    char   sock[MAX_SOCK_PATH];
    char  *rsh;               /* TB_DEFAULT_RSH through this master */
    pid_t  pid;
    int    in;                /* the write end of its stdin */
    int    pidfd;
    int    ready, gone;
};

struct tb_sshmux {
    char dir[MAX_SOCK_PATH];
    tbon_rank_t rank;
    struct master *m;
    size_t n, cap;
};

extern char **environ;

tb_sshmux_t *tb_sshmux_new(const tb_config_t *conf, uint64_t session, tbon_rank_t rank)
{
    const char *rsh = conf ? conf->rsh : NULL, *off = conf ? conf->ssh_mux : NULL;
    if ((rsh && *rsh) || (off && strcmp(off, "0") == 0))
        return NULL;
    tb_sshmux_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->rank = rank;
    /* The session's own directory (mode 0700, ours): nobody else can reach
     * the sockets, which carry our logins. */
    if (tb_log_session_dir(conf, session, m->dir, sizeof m->dir) != 0 ||
        strlen(m->dir) + 24 >= MAX_SOCK_PATH) {
        free(m);
        return NULL;
    }
    return m;
}

static struct master *find(tb_sshmux_t *m, const char *host)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->m[i].host, host) == 0)
            return &m->m[i];
    return NULL;
}

int tb_sshmux_open(tb_sshmux_t *m, const char *host)
{
    if (!m || find(m, host))
        return m ? 0 : TBON_EINVAL;
    if (TB_ARRAY_ROOM(m->m, m->n, m->cap, 8))
        return TBON_ENOMEM;
    struct master *x = &m->m[m->n];
    memset(x, 0, sizeof *x);
    x->in = x->pidfd = -1;
    if ((size_t)snprintf(x->sock, sizeof x->sock, "%s/ssh-%u.%zu", m->dir, (unsigned)m->rank,
                         m->n) >= sizeof x->sock)
        return TBON_ELAUNCH;
    unlink(x->sock);       /* a stale one of a restarted rank */
    char cp[MAX_SOCK_PATH + 16];
    snprintf(cp, sizeof cp, "ControlPath=%s", x->sock);
    if (!(x->host = strdup(host)) ||
        asprintf(&x->rsh, "%s -o ControlMaster=no -o %s", TB_DEFAULT_RSH, cp) < 0) {
        free(x->host);
        return TBON_ENOMEM;
    }
    /* TB_DEFAULT_RSH's words, then the master's */
    char *words = strdup(TB_DEFAULT_RSH);
    const char *argv[24];
    size_t k = 0;
    char *save = NULL;
    for (char *t = words ? strtok_r(words, " ", &save) : NULL; t && k < 16;
         t = strtok_r(NULL, " ", &save))
        argv[k++] = t;
    argv[k++] = "-o";
    argv[k++] = "ControlMaster=yes";
    argv[k++] = "-o";
    argv[k++] = cp;
    argv[k++] = host;
    argv[k++] = "cat >/dev/null";
    argv[k] = NULL;
    int p[2] = { -1, -1 };
    posix_spawn_file_actions_t fa;
    int e = !words ? ENOMEM : pipe2(p, O_CLOEXEC) < 0 ? errno : 0;
    if (!e && (e = posix_spawn_file_actions_init(&fa)) == 0) {
        posix_spawn_file_actions_adddup2(&fa, p[0], 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        e = posix_spawnp(&x->pid, argv[0], &fa, NULL, (char *const *)argv, environ);
        posix_spawn_file_actions_destroy(&fa);
    }
    free(words);
    if (p[0] >= 0)
        close(p[0]);
    if (e) {
        if (p[1] >= 0)
            close(p[1]);
        free(x->host);
        free(x->rsh);
        TB_DEBUG("launch", "no ssh master to %s: %s", host, strerror(e));
        return TBON_ELAUNCH;
    }
    x->in = p[1];
    x->pidfd = (int)syscall(SYS_pidfd_open, x->pid, 0);
    m->n++;
    TB_DEBUG("launch", "ssh master to %s: pid %d, %s", host, (int)x->pid, x->sock);
    return 0;
}

/* Look again at every master: ready (its socket is there) or gone. Returns
 * how many are neither. */
static size_t pending(tb_sshmux_t *m)
{
    size_t left = 0;
    for (size_t i = 0; i < m->n; i++) {
        struct master *x = &m->m[i];
        if (x->ready || x->gone)
            continue;
        struct stat st;
        int status;
        if (stat(x->sock, &st) == 0 && S_ISSOCK(st.st_mode)) {
            x->ready = 1;
        } else if (waitpid(x->pid, &status, WNOHANG) == x->pid) {
            x->gone = 1;
            x->pid = 0;
        } else {
            left++;
        }
    }
    return left;
}

void tb_sshmux_wait(tb_sshmux_t *m, int ms)
{
    if (!m || m->n == 0)
        return;
    int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (in >= 0 && inotify_add_watch(in, m->dir, IN_CREATE | IN_MOVED_TO) < 0) {
        close(in);
        in = -1;
    }
    int64_t end = tb_now_ms() + ms;
    struct pollfd *pf = calloc(m->n + 1, sizeof *pf);
    while (pf && pending(m) > 0) {
        int64_t left = end - tb_now_ms();
        if (left <= 0)
            break;
        size_t k = 0;
        int blind = in < 0;     /* something would not wake the poll */
        if (in >= 0)
            pf[k++] = (struct pollfd){ .fd = in, .events = POLLIN };
        for (size_t i = 0; i < m->n; i++) {
            struct master *x = &m->m[i];
            if (x->ready || x->gone)
                continue;
            if (x->pidfd >= 0)
                pf[k++] = (struct pollfd){ .fd = x->pidfd, .events = POLLIN };
            else
                blind = 1;
        }
        /* without inotify, or a pidfd for a master (kernels before 5.3),
         * look every 20 ms */
        int slice = !blind ? (int)left : left < 20 ? (int)left : 20;
        if (poll(pf, k, slice) > 0 && in >= 0) {
            char buf[4096];
            while (read(in, buf, sizeof buf) > 0)
                ;
        }
    }
    free(pf);
    if (in >= 0)
        close(in);
    size_t ready = 0;
    for (size_t i = 0; i < m->n; i++)
        ready += m->m[i].ready;
    TB_DEBUG("launch", "%zu of %zu ssh masters ready", ready, m->n);
}

const char *tb_sshmux_rsh(tb_sshmux_t *m, const char *host)
{
    struct master *x = m ? find(m, host) : NULL;
    return x && x->ready ? x->rsh : NULL;
}

void tb_sshmux_destroy(tb_sshmux_t *m, int64_t deadline_ms)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        if (m->m[i].in >= 0)
            close(m->m[i].in);     /* the remote cat ends: the master follows */
    for (size_t i = 0; i < m->n; i++) {
        struct master *x = &m->m[i];
        if (x->pid > 0) {
            int64_t left = deadline_ms - tb_now_ms();
            tb_reap(x->pid, left > 0 ? (int)left : 0);
        }
        if (x->pidfd >= 0)
            close(x->pidfd);
        free(x->host);
        free(x->rsh);
    }
    free(m->m);
    free(m);
}
