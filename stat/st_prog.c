/* st_prog.c - what the parts of tbon_stat share: dying with the clean-up,
 * the clock, this host's name, memory or death, the program's path, the
 * order of the tasks. */
#include "st_prog.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct st_cleanup_list st_cleanup;

static char g_host[256];

/* This host's name (gethostname), as the tree and the tasks name it. */
const char *st_this_host(void)
{
    if (!g_host[0] && gethostname(g_host, sizeof g_host - 1) != 0)
        snprintf(g_host, sizeof g_host, "localhost");
    return g_host;
}

char *st_xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d)
        st_die("out of memory");
    return d;
}

void *st_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        st_die("out of memory");
    return p;
}

double st_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Milliseconds from now to the time dl (st_now's clock), at least 0. */
int st_ms_until(double dl)
{
    double ms = (dl - st_now()) * 1e3;
    return ms <= 0 ? 0 : ms >= 1e9 ? 1000000000 : (int)ms + 1;
}

void st_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (st_cleanup.attach)
        unlink(st_cleanup.attach);
    if (st_cleanup.topo) {
        unlink(st_cleanup.topo);
        rmdir(st_cleanup.topodir);
    }
    if (st_cleanup.srun > 0) {
        kill(st_cleanup.srun, SIGTERM);      /* srun passes it on to the step's tasks */
        waitpid(st_cleanup.srun, NULL, 0);
    }
    exit(EXIT_RUN);
}

void st_self_exe(char *buf, size_t cap)
{
    ssize_t k = readlink("/proc/self/exe", buf, cap - 1);
    buf[k > 0 ? k : 0] = '\0';
}

int st_by_id(const void *a, const void *b)
{
    const struct task *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}
