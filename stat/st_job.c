/* st_job.c - the tasks of a Slurm job on this node, and what the front-end
 * asks Slurm (scontrol) */
#include "st_job.h"
#include "st_tasks.h"

#include <tbon/tbon.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;


/* A whole decimal number of at most 10 digits in s[0..len), or -1. */
static long long decimal(const char *s, size_t len)
{
    if (len == 0 || len > 10)
        return -1;
    long long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static long long decimal_str(const char *s)
{
    return s ? decimal(s, strlen(s)) : -1;
}

/* ---- environments ---- */

const char *st_env_get(const char *env, size_t len, const char *name)
{
    size_t nl = strlen(name);
    for (size_t off = 0; off < len; off += strlen(env + off) + 1)
        if (strncmp(env + off, name, nl) == 0 && env[off + nl] == '=')
            return env + off + nl + 1;
    return NULL;
}

void st_env_rank(const char *env, size_t len, int32_t *rank, int32_t *size)
{
    static const char *const vars[][3] = {
        { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL },
        { "PMI_RANK", "PMI_SIZE", NULL },
        { "PMIX_RANK", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS" },
        { "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS" },
    };
    *rank = *size = -1;
    for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++) {
        long long r = decimal_str(st_env_get(env, len, vars[v][0]));
        if (r < 0 || r > INT32_MAX)
            continue;
        *rank = (int32_t)r;
        for (size_t k = 1; k < 3 && vars[v][k] && *size < 0; k++) {
            long long s = decimal_str(st_env_get(env, len, vars[v][k]));
            if (s > r && s <= INT32_MAX)
                *size = (int32_t)s;
        }
        return;
    }
}

char *st_proc_environ(pid_t pid, size_t *len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 1 << 14, n = 0;
    char *buf = malloc(cap + 1);
    ssize_t k = 0;
    while (buf && (k = read(fd, buf + n, cap - n)) > 0) {
        n += (size_t)k;
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    close(fd);
    if (!buf || k < 0) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* ---- the scan ---- */

struct cand {
    pid_t pid, ppid;
    st_jtask_t t;
    int wrapper;
};


static int in_list(pid_t p, const pid_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == p)
            return 1;
    return 0;
}

static int by_step_rank(const void *a, const void *b)
{
    const st_jtask_t *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Is the process pid one that is never a task (tbon_stat itself, Slurm's
 * step daemon)? */
static int excluded_exe(pid_t pid, const char *self_exe)
{
    char path[64], exe[PATH_MAX];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t k = readlink(path, exe, sizeof exe - 1);
    if (k <= 0)
        return 0;
    exe[k] = '\0';
    if (self_exe && strcmp(exe, self_exe) == 0)
        return 1;
    const char *base = strrchr(exe, '/');
    return strcmp(base ? base + 1 : exe, "slurmstepd") == 0;
}

int st_job_scan(uint32_t job, const uint32_t *steps, size_t nsteps, uint32_t skip_step,
                const pid_t *allowed, size_t nallowed, const char *self_exe,
                st_jtask_t **out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return st_errf(err, errlen, TBON_EIO, "/proc: %s", strerror(errno));
    struct cand *c = NULL;
    size_t nc = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    pid_t me = getpid();
    while ((de = readdir(d)) && rc == 0) {
        long long p = decimal_str(de->d_name);
        if (p <= 0 || p > INT_MAX || (pid_t)p == me)
            continue;
        pid_t pid = (pid_t)p;
        if (allowed && !in_list(pid, allowed, nallowed))
            continue;
        size_t len = 0;
        char *env = st_proc_environ(pid, &len);
        if (!env)
            continue;
        long long j = decimal_str(st_env_get(env, len, "SLURM_JOB_ID"));
        long long s = decimal_str(st_env_get(env, len, "SLURM_STEP_ID"));
        int take = j == (long long)job && s >= 0 && s < (long long)UINT32_MAX &&
                   (uint32_t)s != skip_step;
        if (take && nsteps) {
            take = 0;
            for (size_t i = 0; i < nsteps && !take; i++)
                take = steps[i] == (uint32_t)s;
        }
        if (take && excluded_exe(pid, self_exe))
            take = 0;
        if (take) {
            if (nc == cap) {
                size_t ncap = cap ? 2 * cap : 64;
                struct cand *nv = realloc(c, ncap * sizeof *nv);
                if (!nv) {
                    rc = st_errf(err, errlen, TBON_ENOMEM, "out of memory");
                    free(env);
                    break;
                }
                c = nv;
                cap = ncap;
            }
            struct cand *x = &c[nc++];
            *x = (struct cand){ .pid = pid, .ppid = st_proc_parent(pid) };
            x->t.pid = pid;
            x->t.step = (uint32_t)s;
            st_env_rank(env, len, &x->t.rank, &x->t.size);
        }
        free(env);
    }
    closedir(d);
    /* Wrappers: every ancestor of a candidate that is a candidate of the
     * same step. */
    for (size_t i = 0; rc == 0 && i < nc; i++) {
        pid_t a = c[i].ppid;
        for (int depth = 0; a > 1 && depth < 64; depth++) {
            pid_t next = -1;
            for (size_t k = 0; k < nc; k++)
                if (c[k].pid == a) {
                    if (c[k].t.step == c[i].t.step)
                        c[k].wrapper = 1;
                    next = c[k].ppid;
                    break;
                }
            a = next >= 0 ? next : st_proc_parent(a);
        }
    }
    st_jtask_t *v = rc == 0 ? malloc((nc ? nc : 1) * sizeof *v) : NULL;
    if (rc == 0 && !v)
        rc = st_errf(err, errlen, TBON_ENOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; rc == 0 && i < nc; i++)
        if (!c[i].wrapper)
            v[m++] = c[i].t;
    free(c);
    if (rc) {
        free(v);
        return rc;
    }
    qsort(v, m, sizeof *v, by_step_rank);
    *out = v;
    *n = m;
    return 0;
}

/* ---- running Slurm's commands ---- */

int st_run(char *const argv[], char **out, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) != 0)
        return st_errf(err, errlen, -1, "pipe: %s", strerror(errno)), -1;
    if (pipe2(pe, O_CLOEXEC) != 0) {
        close(po[0]);
        close(po[1]);
        return st_errf(err, errlen, -1, "pipe: %s", strerror(errno)), -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, po[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, pe[1], STDERR_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    close(pe[1]);
    if (e != 0) {
        close(po[0]);
        close(pe[0]);
        st_errf(err, errlen, -1, "cannot run %s: %s", argv[0], strerror(e));
        return -1;
    }
    size_t cap = 4096, n = 0, ne = 0;
    char *buf = malloc(cap + 1), ebuf[1024];
    struct pollfd pf[2] = { { po[0], POLLIN, 0 }, { pe[0], POLLIN, 0 } };
    int open_fds = 2;
    while (open_fds > 0) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[0].revents) {
            if (buf && n == cap) {
                char *nb = realloc(buf, 2 * cap + 1);
                if (!nb) {
                    free(buf);
                    buf = NULL;
                } else {
                    buf = nb;
                    cap *= 2;
                }
            }
            char sink[4096];
            ssize_t k = buf ? read(po[0], buf + n, cap - n) : read(po[0], sink, sizeof sink);
            if (k <= 0) {
                pf[0].fd = -1;
                open_fds--;
            } else if (buf) {
                n += (size_t)k;
            }
        }
        if (pf[1].revents) {
            char sink[1024];
            ssize_t k = ne < sizeof ebuf - 1 ? read(pe[0], ebuf + ne, sizeof ebuf - 1 - ne)
                                             : read(pe[0], sink, sizeof sink);
            if (k <= 0) {
                pf[1].fd = -1;
                open_fds--;
            } else if (ne < sizeof ebuf - 1) {
                ne += (size_t)k;
            }
        }
    }
    close(po[0]);
    close(pe[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    ebuf[ne] = '\0';
    ebuf[strcspn(ebuf, "\n")] = '\0';
    if (err && errlen)
        snprintf(err, errlen, "%s", ebuf);
    if (!buf) {
        st_errf(err, errlen, -1, "out of memory");
        return -1;
    }
    buf[n] = '\0';
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int st_job_listpids(uint32_t job, pid_t **pids, size_t *n, char *err, size_t errlen)
{
    *pids = NULL;
    *n = 0;
    char jid[16], msg[512];
    snprintf(jid, sizeof jid, "%u", job);
    char *const argv[] = { "scontrol", "listpids", jid, NULL };
    char *out = NULL;
    int st = st_run(argv, &out, msg, sizeof msg);
    if (st != 0) {
        free(out);
        return st_errf(err, errlen, TBON_EIO, "scontrol listpids %u: %s", job,
                    msg[0] ? msg : "failed");
    }
    /* "PID JOBID STEPID LOCALID GLOBALID", then one line per process. */
    size_t cap = 0;
    pid_t *v = NULL;
    for (char *line = out, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        long long p = decimal(line, strcspn(line, " \t"));
        if (p <= 0 || p > INT_MAX)
            continue;                           /* the heading */
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            pid_t *nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                free(v);
                free(out);
                return st_errf(err, errlen, TBON_ENOMEM, "out of memory");
            }
            v = nv;
        }
        v[(*n)++] = (pid_t)p;
    }
    free(out);
    *pids = v;
    return 0;
}

/* The value of KEY= in a "KEY=VALUE KEY=VALUE" line, copied into out. */
static int field(const char *line, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *p = line; (p = strstr(p, key)); p += kl) {
        if ((p == line || isspace((unsigned char)p[-1])) && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t len = strcspn(v, " \t\n");
            if (len >= cap)
                return -1;
            memcpy(out, v, len);
            out[len] = '\0';
            return 0;
        }
    }
    return -1;
}

void st_job_free_nodes(char **nodes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(nodes[i]);
    free(nodes);
}

int st_job_nodes(uint32_t job, char ***nodes, size_t *n, char *err, size_t errlen)
{
    *nodes = NULL;
    *n = 0;
    char jid[16], msg[512], state[64], list[4096];
    snprintf(jid, sizeof jid, "%u", job);
    char *const argv[] = { "scontrol", "-o", "show", "job", jid, NULL };
    char *out = NULL;
    int st = st_run(argv, &out, msg, sizeof msg);
    if (st < 0)
        return st_errf(err, errlen, TBON_EIO, "--jobid %u: %s (is Slurm installed here?)", job,
                    msg);
    if (st != 0 || !out || !strstr(out, "JobId=")) {
        free(out);
        return st_errf(err, errlen, TBON_ENOTFOUND, "--jobid %u: no such job (scontrol: %s)", job,
                    msg[0] ? msg : "no answer");
    }
    if (field(out, "JobState", state, sizeof state) != 0 ||
        field(out, "NodeList", list, sizeof list) != 0) {
        free(out);
        return st_errf(err, errlen, TBON_EIO, "--jobid %u: scontrol show job gave no %s", job,
                    "JobState or NodeList");
    }
    free(out);
    if (strcmp(state, "RUNNING") != 0)
        return st_errf(err, errlen, TBON_EINVAL, "--jobid %u: the job is %s, not running", job,
                    state);
    char *const hv[] = { "scontrol", "show", "hostnames", list, NULL };
    st = st_run(hv, &out, msg, sizeof msg);
    if (st != 0) {
        free(out);
        return st_errf(err, errlen, TBON_EIO, "--jobid %u: scontrol show hostnames %s: %s", job,
                    list, msg);
    }
    char **v = NULL;
    size_t cnt = 0;
    for (char *line = out, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (!*line)
            continue;
        char **nv = realloc(v, (cnt + 1) * sizeof *nv);
        char *s = nv ? strdup(line) : NULL;
        if (nv)
            v = nv;
        if (!s) {
            st_job_free_nodes(v, cnt);
            free(out);
            return st_errf(err, errlen, TBON_ENOMEM, "out of memory");
        }
        v[cnt++] = s;
    }
    free(out);
    if (cnt == 0)
        return st_errf(err, errlen, TBON_EIO, "--jobid %u: no nodes in \"%s\"", job, list);
    *nodes = v;
    *n = cnt;
    return 0;
}

int st_job_of_srun(const char *host, pid_t pid, uint32_t *job, uint32_t *step, char *err,
                   size_t errlen)
{
    char msg[512];
    char *const argv[] = { "scontrol", "-o", "show", "steps", NULL };
    char *out = NULL;
    int st = st_run(argv, &out, msg, sizeof msg);
    if (st != 0) {
        free(out);
        return st_errf(err, errlen, TBON_EIO, "scontrol show steps: %s",
                    msg[0] ? msg : "failed");
    }
    char want[300];
    snprintf(want, sizeof want, "%s:%d", host, (int)pid);
    int rc = TBON_ENOTFOUND;
    for (char *line = out, *next; line && *line && rc; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char id[64], srun[300];
        if (field(line, "StepId", id, sizeof id) || field(line, "SrunHost:Pid", srun, sizeof srun))
            continue;
        /* The host as srun gave it may be the full name. */
        size_t hl = strcspn(srun, ":");
        const char *sp = srun + hl;
        size_t short_len = strcspn(srun, ".:");
        int same = strcmp(srun, want) == 0 ||
                   (strlen(host) == short_len && strncmp(srun, host, short_len) == 0 &&
                    strcmp(sp + 1, want + strlen(host) + 1) == 0);
        unsigned j, s;
        char tail;
        if (same && sscanf(id, "%u.%u%c", &j, &s, &tail) == 2) {
            *job = j;
            *step = s;
            rc = 0;
        }
    }
    free(out);
    if (rc)
        st_errf(err, errlen, rc, "no Slurm step was started by srun %s (scontrol show steps)",
             want);
    return rc;
}
