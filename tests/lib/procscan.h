/* procscan.h - reading /proc for the tools that find the processes of their
 * own run (bench_tree, bench_ft, tbon_fims, the integration tests): an
 * environment entry, a process's state letter, the rank on its command line.
 * Header-only (static inline functions, no state). */
#ifndef TB_PROCSCAN_H
#define TB_PROCSCAN_H

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tbon/common.h>

/* Read /proc/PID/NAME into buf (at most cap - 1 bytes, NUL-terminated);
 * the byte count, or -1. */
static inline ssize_t tb_proc_read(long pid, const char *name, char *buf, size_t cap)
{
    char path[128];
    snprintf(path, sizeof path, "/proc/%ld/%s", pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/* 1 if pid's environment holds the entry key exactly, or (dot_suffix) key
 * followed by '.' and anything. buf: scratch of cap bytes. */
static inline int tb_proc_env_has(long pid, const char *key, int dot_suffix, char *buf,
                                  size_t cap)
{
    ssize_t n = tb_proc_read(pid, "environ", buf, cap);
    size_t kl = strlen(key);
    for (ssize_t i = 0; n > 0 && i + (ssize_t)kl <= n;) {
        if (memcmp(buf + i, key, kl) == 0 &&
            (i + (ssize_t)kl == n || buf[i + kl] == '\0' || (dot_suffix && buf[i + kl] == '.')))
            return 1;
        char *z = memchr(buf + i, '\0', (size_t)(n - i));
        if (!z)
            break;
        i = z - buf + 1;
    }
    return 0;
}

/* The state letter of pid (from /proc/PID/stat), or 0 if it is gone. */
static inline char tb_proc_state(long pid)
{
    char buf[512];
    if (tb_proc_read(pid, "stat", buf, sizeof buf) <= 0)
        return 0;
    char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' ? rp[2] : 0;
}

/* 1 if pid is gone or a zombie. */
static inline int tb_proc_dead(long pid)
{
    char st = tb_proc_state(pid);
    return !st || st == 'Z' || st == 'X';
}

/* The system call thread tid of pid is in (/proc/PID/task/TID/syscall's
 * first field), or -1 (running, gone, or unreadable). */
static inline long tb_proc_syscall(long pid, long tid)
{
    char name[48], buf[64];
    snprintf(name, sizeof name, "task/%ld/syscall", tid);
    if (tb_proc_read(pid, name, buf, sizeof buf) <= 0 || buf[0] < '0' || buf[0] > '9')
        return -1;
    return strtol(buf, NULL, 10);
}

/* The value of --tbon-rank on pid's command line, or TBON_RANK_NONE. */
static inline tbon_rank_t tb_proc_rank(long pid)
{
    char buf[4096];
    ssize_t n = tb_proc_read(pid, "cmdline", buf, sizeof buf);
    for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(buf + i) + 1)
        if (strcmp(buf + i, "--tbon-rank") == 0 && i + (ssize_t)strlen(buf + i) + 1 < n)
            return (tbon_rank_t)strtoul(buf + i + strlen(buf + i) + 1, NULL, 10);
    return TBON_RANK_NONE;
}

/* Walk the live processes but this one whose environment holds the entry key
 * (dot_suffix: or key followed by '.' and anything). With pids, store the
 * pid of each one launched as rank r < npids in pids[r]; with sig, send it
 * to each. Returns how many there are. */
static inline long tb_proc_scan_env(const char *key, int dot_suffix, int sig, pid_t *pids,
                                    size_t npids)
{
    enum { ENV_MAX = 1 << 18 };
    DIR *d = opendir("/proc");
    char *buf = malloc(ENV_MAX);    /* not static: two threads may scan */
    long found = 0;
    struct dirent *e;
    while (d && buf && (e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid() || tb_proc_dead(pid) ||
            !tb_proc_env_has(pid, key, dot_suffix, buf, ENV_MAX))
            continue;
        found++;
        tbon_rank_t r = pids ? tb_proc_rank(pid) : TBON_RANK_NONE;
        if (pids && r < npids)
            pids[r] = (pid_t)pid;
        if (sig)
            kill((pid_t)pid, sig);
    }
    if (d)
        closedir(d);
    free(buf);
    return found;
}

#endif
