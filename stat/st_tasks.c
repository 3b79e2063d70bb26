/* st_tasks.c - which processes tbon_stat samples, and their ranks */
#include "st_tasks.h"

#include <tbon/tbon.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int st_errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

static int push_on(st_tasks_t *t, const char *host, size_t hlen, pid_t pid)
{
    char *h = NULL;
    if (host && !(h = strndup(host, hlen)))
        return TBON_ENOMEM;
    st_task_t *nv = realloc(t->v, (t->n + 1) * sizeof *nv);
    if (!nv) {
        free(h);
        return TBON_ENOMEM;
    }
    t->v = nv;
    t->v[t->n] = (st_task_t){ pid, (uint32_t)t->n, h };
    t->n++;
    return 0;
}

static int push(st_tasks_t *t, pid_t pid)
{
    return push_on(t, NULL, 0, pid);
}

int st_is_this_host(const char *host, size_t len)
{
    char me[256] = "";
    if (gethostname(me, sizeof me - 1) != 0)
        me[0] = '\0';
    size_t ml = strlen(me), sl = strcspn(me, ".");
    return (len == 9 && strncmp(host, "localhost", 9) == 0) ||
           (ml && len == ml && strncmp(host, me, len) == 0) ||
           (sl && len == sl && strncmp(host, me, len) == 0);
}

/* A host name: letters, digits, '-', '.', '_', at most 255. */
static int valid_host(const char *s, size_t len)
{
    if (len == 0 || len > 255)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '_')
            return 0;
    return 1;
}

/* One pid of a list: digits only, > 0, fits a pid_t. */
static int parse_pid(const char *s, size_t len, pid_t *out)
{
    if (len == 0 || len > 10)
        return -1;
    long long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v <= 0 || v > INT_MAX)
        return -1;
    *out = (pid_t)v;
    return 0;
}

/* Split s on commas and white space; where names the source in errors. */
static int parse_items(st_tasks_t *t, const char *s, const char *where, char *err,
                       size_t errlen)
{
    while (*s) {
        while (*s == ',' || isspace((unsigned char)*s))
            s++;
        if (!*s)
            break;
        size_t len = strcspn(s, ", \t\r\n");
        const char *colon = memchr(s, ':', len);
        size_t hl = colon ? (size_t)(colon - s) : 0;
        const char *ps = colon ? colon + 1 : s;
        pid_t pid;
        if (colon && !valid_host(s, hl))
            return st_errf(err, errlen, TBON_EINVAL, "%s\"%.*s\": \"%.*s\" is not a host name",
                        where, (int)(len > 80 ? 80 : len), s, (int)(hl > 40 ? 40 : hl), s);
        if (parse_pid(ps, len - (size_t)(ps - s), &pid))
            return st_errf(err, errlen, TBON_EINVAL, "%s\"%.*s\" is not a process id%s", where,
                        (int)(len > 80 ? 80 : len), s, colon ? " on a host (HOST:PID)" : "");
        if (push_on(t, colon && !st_is_this_host(s, hl) ? s : NULL, hl, pid))
            return st_errf(err, errlen, TBON_ENOMEM, "out of memory");
        s += len;
    }
    return 0;
}

int st_tasks_parse_list(st_tasks_t *t, const char *list, char *err, size_t errlen)
{
    size_t before = t->n;
    int rc = parse_items(t, list, "-p: ", err, errlen);
    if (rc == 0 && t->n == before)
        return st_errf(err, errlen, TBON_EINVAL, "-p: no process id in \"%s\"", list);
    return rc;
}

int st_tasks_check_here(const st_tasks_t *t, char *err, size_t errlen)
{
    size_t gone = 0, first = 0;
    for (size_t i = 0; i < t->n; i++)
        if (!t->v[i].host && kill(t->v[i].pid, 0) != 0 && errno == ESRCH && gone++ == 0)
            first = i;
    if (!gone)
        return 0;
    char me[256] = "";
    if (gethostname(me, sizeof me - 1) != 0)
        snprintf(me, sizeof me, "?");
    return st_errf(err, errlen, TBON_ENOTFOUND, "no process %d on this host (%s)%s%s%s",
                   (int)t->v[first].pid, me, gone > 1 ? ", nor " : "",
                   gone > 1 ? "others listed" : "", "; a task of another host is given as "
                   "HOST:PID");
}

int st_tasks_read_file(st_tasks_t *t, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return st_errf(err, errlen, TBON_EIO, "%s: %s", path, strerror(errno));
    char line[4096], where[PATH_MAX + 32];
    int rc = 0, lineno = 0;
    size_t before = t->n;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = st_errf(err, errlen, TBON_EINVAL, "%s:%d: line too long", path, lineno);
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        snprintf(where, sizeof where, "%s:%d: ", path, lineno);
        rc = parse_items(t, line, where, err, errlen);
    }
    if (rc == 0 && ferror(f))
        rc = st_errf(err, errlen, TBON_EIO, "%s: read error", path);
    fclose(f);
    if (rc == 0 && t->n == before)
        rc = st_errf(err, errlen, TBON_EINVAL, "%s: no process id in the file", path);
    return rc;
}

/* ---- /proc ---- */

ssize_t st_proc_read(pid_t pid, const char *name, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || cap == 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    ssize_t k = read(fd, buf, cap - 1);
    close(fd);
    if (k <= 0)
        return -1;
    buf[k] = '\0';
    return k;
}

pid_t st_proc_parent(pid_t pid)
{
    char buf[512];
    if (st_proc_read(pid, "stat", buf, sizeof buf) < 0)
        return -1;
    char *rp = strrchr(buf, ')');        /* the command may hold spaces and ')' */
    int ppid;
    if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1)
        return -1;
    return (pid_t)ppid;
}

/* The executable path of pid into buf, or "" if unreadable. */
static void exe_of(pid_t pid, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t k = readlink(path, buf, cap - 1);
    buf[k > 0 ? k : 0] = '\0';
}

const char *st_task_exe_name(pid_t pid)
{
    static char buf[PATH_MAX];
    exe_of(pid, buf, sizeof buf);
    if (!buf[0])
        return "?";
    const char *slash = strrchr(buf, '/');
    return slash ? slash + 1 : buf;
}

struct proc {
    pid_t pid, ppid;
    char exe[PATH_MAX];
};

int st_tasks_from_launcher(st_tasks_t *t, pid_t launcher, char *err, size_t errlen)
{
    if (st_proc_parent(launcher) < 0)
        return st_errf(err, errlen, TBON_EINVAL, "-P %d: no such process", (int)launcher);
    DIR *d = opendir("/proc");
    if (!d)
        return st_errf(err, errlen, TBON_EIO, "/proc: %s", strerror(errno));
    struct proc *ps = NULL;
    size_t np = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        pid_t pid;
        if (parse_pid(de->d_name, strlen(de->d_name), &pid))
            continue;
        pid_t pp = st_proc_parent(pid);
        if (pp < 0)
            continue;
        if (np == cap) {
            size_t nc = cap ? cap * 2 : 256;
            struct proc *nps = realloc(ps, nc * sizeof *nps);
            if (!nps) {
                rc = st_errf(err, errlen, TBON_ENOMEM, "out of memory");
                break;
            }
            ps = nps;
            cap = nc;
        }
        ps[np].pid = pid;
        ps[np].ppid = pp;
        ps[np].exe[0] = '\0';
        np++;
    }
    closedir(d);
    /* Mark the descendants: repeat until no more join (a pid's parent may
     * come later in /proc's order). */
    unsigned char *desc = rc ? NULL : calloc(np ? np : 1, 1);
    if (!rc && !desc)
        rc = st_errf(err, errlen, TBON_ENOMEM, "out of memory");
    for (int changed = 1; !rc && changed;) {
        changed = 0;
        for (size_t i = 0; i < np; i++) {
            if (desc[i])
                continue;
            int under = ps[i].ppid == launcher;
            for (size_t j = 0; j < np && !under; j++)
                under = desc[j] && ps[j].pid == ps[i].ppid;
            if (under)
                desc[i] = changed = 1;
        }
    }
    char lexe[PATH_MAX];
    exe_of(launcher, lexe, sizeof lexe);
    /* The executable most descendants run, other than the launcher's. */
    const char *best = NULL;
    size_t best_n = 0;
    for (size_t i = 0; !rc && i < np; i++)
        if (desc[i])
            exe_of(ps[i].pid, ps[i].exe, sizeof ps[i].exe);
    for (size_t i = 0; !rc && i < np; i++) {
        if (!desc[i] || !ps[i].exe[0] || strcmp(ps[i].exe, lexe) == 0)
            continue;
        size_t c = 0;
        for (size_t j = 0; j < np; j++)
            c += desc[j] && strcmp(ps[j].exe, ps[i].exe) == 0;
        if (c > best_n) {
            best_n = c;
            best = ps[i].exe;
        }
    }
    if (!rc && !best) {
        /* Nothing but the launcher's own executable: sample its copies (a
         * program that forks its workers), or the launcher itself. */
        size_t before = t->n;
        for (size_t i = 0; i < np; i++)
            if (desc[i] && ps[i].exe[0] && strcmp(ps[i].exe, lexe) == 0 && push(t, ps[i].pid))
                rc = st_errf(err, errlen, TBON_ENOMEM, "out of memory");
        if (!rc && t->n == before && push(t, launcher))
            rc = st_errf(err, errlen, TBON_ENOMEM, "out of memory");
    }
    for (size_t i = 0; !rc && best && i < np; i++)
        if (desc[i] && strcmp(ps[i].exe, best) == 0 && push(t, ps[i].pid))
            rc = st_errf(err, errlen, TBON_ENOMEM, "out of memory");
    free(desc);
    free(ps);
    return rc;
}

/* The base name of pid's executable into buf ("" if unknown). */
static void exe_base(pid_t pid, char *buf, size_t cap)
{
    char exe[PATH_MAX];
    exe_of(pid, exe, sizeof exe);
    const char *slash = strrchr(exe, '/'), *b = slash ? slash + 1 : exe;
    size_t l = strlen(b) < cap ? strlen(b) : cap - 1;
    memcpy(buf, b, l);
    buf[l] = '\0';
}

/* The host an ssh command line goes to: its first argument that is not an
 * option or an option's value (user@ removed), into out. */
static int ssh_host(pid_t pid, char *out, size_t cap)
{
    char buf[4096];
    ssize_t k = st_proc_read(pid, "cmdline", buf, sizeof buf);
    if (k < 0)
        return -1;
    static const char with_value[] = "BbcDEeFIiJLlmOoPpQRSWw";
    size_t off = strlen(buf) + 1;       /* past argv[0] */
    while (off < (size_t)k) {
        const char *a = buf + off;
        off += strlen(a) + 1;
        if (a[0] == '-') {
            if (a[1] && strchr(with_value, a[1]) && !a[2])
                off += strlen(buf + off) + 1;     /* its value */
            continue;
        }
        const char *at = strchr(a, '@'), *h = at ? at + 1 : a;
        size_t l = strlen(h) < cap ? strlen(h) : cap - 1;
        memcpy(out, h, l);
        out[l] = '\0';
        return 0;
    }
    return -1;
}

int st_tasks_launcher_remote(pid_t launcher, pid_t *srun, char *hosts, size_t cap)
{
    char name[NAME_MAX + 1];
    *srun = 0;
    if (cap)
        hosts[0] = '\0';
    exe_base(launcher, name, sizeof name);
    if (strcmp(name, "srun") == 0) {
        *srun = launcher;
        return ST_REMOTE_SRUN;
    }
    DIR *d = opendir("/proc");
    if (!d)
        return ST_REMOTE_NONE;
    /* Descendants, by walking each process's ancestors up to the launcher. */
    int kind = ST_REMOTE_NONE;
    struct dirent *de;
    while ((de = readdir(d))) {
        pid_t pid;
        if (parse_pid(de->d_name, strlen(de->d_name), &pid) || pid == launcher)
            continue;
        int depth = 0, under = 0;
        pid_t outer_srun = 0;
        for (pid_t a = pid; a > 1 && depth < 64 && !under; depth++) {
            char an[NAME_MAX + 1];
            exe_base(a, an, sizeof an);
            if (strcmp(an, "srun") == 0)
                outer_srun = a;
            a = st_proc_parent(a);
            under = a == launcher;
        }
        if (!under)
            continue;
        exe_base(pid, name, sizeof name);
        if (outer_srun) {
            *srun = outer_srun;
            kind = ST_REMOTE_SRUN;
        } else if (kind != ST_REMOTE_SRUN &&
                   (strcmp(name, "ssh") == 0 || strcmp(name, "rsh") == 0)) {
            char h[256];
            if (ssh_host(pid, h, sizeof h) == 0 && !strstr(hosts, h)) {
                size_t l = strlen(hosts);
                snprintf(hosts + l, cap - l, "%s%s", l ? ", " : "", h);
            }
            kind = ST_REMOTE_SSH;
        }
    }
    closedir(d);
    return kind;
}

/* The rank of pid from its environment, or -1. */
static long env_rank(pid_t pid)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_RANK=", "PMI_RANK=", "PMIX_RANK=",
                                        "SLURM_PROCID=" };
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    ssize_t k;
    while (buf && (k = read(fd, buf + len, cap - len)) > 0) {
        len += (size_t)k;
        if (len == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
    }
    close(fd);
    if (!buf)
        return -1;
    buf[len] = '\0';
    long rank = -1;
    for (size_t v = 0; v < sizeof vars / sizeof vars[0] && rank < 0; v++) {
        size_t vl = strlen(vars[v]);
        for (size_t off = 0; off < len; off += strlen(buf + off) + 1) {
            if (strncmp(buf + off, vars[v], vl) == 0) {
                char *end;
                errno = 0;
                long r = strtol(buf + off + vl, &end, 10);
                if (errno == 0 && end != buf + off + vl && *end == '\0' && r >= 0 &&
                    r <= (long)UINT32_MAX - 1)
                    rank = r;
                break;
            }
        }
    }
    free(buf);
    return rank;
}

static int by_pid(const void *a, const void *b)
{
    const st_task_t *x = a, *y = b;
    int h = strcmp(x->host ? x->host : "", y->host ? y->host : "");
    if (h)
        return h;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

int st_tasks_remote(const st_tasks_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].host)
            return 1;
    return 0;
}

static int by_rank(const void *a, const void *b)
{
    const st_task_t *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

void st_tasks_unique(st_tasks_t *t)
{
    if (t->n == 0)
        return;                 /* --jobid: no list */
    /* rank holds the position meanwhile. */
    for (size_t i = 0; i < t->n; i++)
        t->v[i].rank = (uint32_t)i;
    qsort(t->v, t->n, sizeof *t->v, by_pid);
    size_t w = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (w == 0 || by_pid(&t->v[w - 1], &t->v[i]) != 0)
            t->v[w++] = t->v[i];
        else
            free(t->v[i].host);
    }
    t->n = w;
    qsort(t->v, t->n, sizeof *t->v, by_rank);      /* back to list order */
}

int st_tasks_rank(st_tasks_t *t)
{
    st_tasks_unique(t);
    st_task_t *e = malloc((t->n ? t->n : 1) * sizeof *e);
    int from_env = e != NULL && t->n > 0 && !t->ranks_from;
    for (size_t i = 0; from_env && i < t->n; i++) {
        long r = env_rank(t->v[i].pid);
        e[i] = (st_task_t){ t->v[i].pid, (uint32_t)r, t->v[i].host };
        from_env = r >= 0;
    }
    if (from_env) {
        qsort(e, t->n, sizeof *e, by_rank);
        for (size_t i = 1; i < t->n && from_env; i++)
            from_env = e[i].rank != e[i - 1].rank;
    }
    if (from_env)
        memcpy(t->v, e, t->n * sizeof *e);
    else
        for (size_t i = 0; i < t->n; i++)
            t->v[i].rank = (uint32_t)i;
    free(e);
    return from_env || (t->ranks_from && t->n > 0);
}

void st_tasks_free(st_tasks_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].host);
    free(t->v);
    t->v = NULL;
    t->n = 0;
}
