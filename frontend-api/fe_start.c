/* fe_start.c - tbon_frontend's start-up: the back-end program found as the
 * launcher needs it, the options of tbon_fe_create, the progress line while
 * the tree starts, and what is said when it does not (or not all of it). */
#include "fe_start.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* path made absolute (without resolving symbolic links: a multi-call
 * program looks at its name). A malloc'd string, or NULL. */
static char *absolute(const char *path)
{
    char cwd[PATH_MAX], *out;
    if (path[0] == '/')
        return strdup(path);
    if (!getcwd(cwd, sizeof cwd) || asprintf(&out, "%s/%s", cwd, path) < 0)
        return NULL;
    return out;
}

/* The back-end program as the launcher needs it: a name without '/' is
 * searched in PATH and then the current directory, as a shell would, and a
 * path is made absolute so the commnodes find it whatever their directory.
 * Returns a malloc'd string, or NULL if it is not an executable here (it is
 * then passed as given: it may exist on the hosts of the back-ends). */
static char *resolve_backend(const char *exe)
{
    if (strchr(exe, '/'))
        return access(exe, X_OK) == 0 ? absolute(exe) : NULL;
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        char buf[PATH_MAX];
        if (n > 0 && (size_t)snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, exe) < sizeof buf &&
            access(buf, X_OK) == 0)
            return absolute(buf);
        path = end ? end + 1 : NULL;
    }
    return access(exe, X_OK) == 0 ? absolute(exe) : NULL;
}

/* ---- start-up progress ---- */

struct progress {
    struct timespec t0, last;
    int             tty;        /* stderr is a terminal: overwrite one line */
    int             open;       /* a progress line without its newline is on screen */
    int             shown;      /* printed at least once */
    size_t          total;
    const char     *attach;     /* attach mode: announce when the file exists */
    int             announced;
};

long fe_ms_since(const struct timespec *a, const struct timespec *b)
{
    return (long)(b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;
}

/* The progress hook of tbon_fe_create (on our thread, inside the call): a
 * line "starting tree: R/T processes", only once start-up has taken 0.5 s,
 * at most 10 times a second on a terminal (overwritten with \r) and once a
 * second otherwise (one line each). */
static void on_progress(void *arg, size_t ready, size_t total)
{
    struct progress *p = arg;
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    p->total = total;
    if (p->attach && !p->announced && access(p->attach, F_OK) == 0) {
        fprintf(stderr, "%sattach file %s is ready: start the back-ends now\n",
                p->open ? "\n" : "", p->attach);
        p->open = 0;
        p->announced = 1;
    }
    if (fe_ms_since(&p->t0, &now) < 500)
        return;
    if (p->shown && fe_ms_since(&p->last, &now) < (p->tty ? 100 : 1000))
        return;
    if (p->tty) {
        fprintf(stderr, "\rstarting tree: %zu/%zu processes ", ready, total);
        p->open = 1;
    } else {
        fprintf(stderr, "starting tree: %zu/%zu processes\n", ready, total);
    }
    fflush(stderr);
    p->shown = 1;
    p->last = now;
}

/* The nodes left out of the start-up, named on stderr (their failures are
 * among the events too). */
void fe_note_missing(tbon_net_t *net)
{
    tbon_rank_t r[16];
    int n = tbon_fe_missing(net, r, 16);
    if (n <= 0)
        return;
    fprintf(stderr, PROG ": note: %d node%s left out of the start-up (rank%s", n,
            n == 1 ? "" : "s", n == 1 ? "" : "s");
    for (int i = 0; i < n && i < 16; i++)
        fprintf(stderr, "%s %u", i ? "," : "", (unsigned)r[i]);
    fprintf(stderr, "%s); the tree runs without them (--require-all makes that an error)\n",
            n > 16 ? ", ..." : "");
}

/* After tbon_fe_create: end the progress line, if one was shown. */
static void progress_done(struct progress *p, int ok)
{
    struct timespec now;

    if (!p->shown)
        return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (ok)   /* on a terminal this overwrites the progress line */
        fprintf(stderr, "%sstarted tree: %zu processes in %.1f s     \n", p->open ? "\r" : "",
                p->total, (double)fe_ms_since(&p->t0, &now) / 1000.0);
    else if (p->open)
        fputc('\n', stderr);
    p->open = 0;
}

tbon_net_t *fe_start(const struct cli *c, char **backend)
{
    tbon_error_t err = { 0 };
    tbon_fe_options_t opts = { 0 };
    struct progress prog = { 0 };

    *backend = NULL;
    if (c->backend) {
        *backend = resolve_backend(c->backend);
    } else if (!c->reattach) {
        fprintf(stderr, PROG ": attach mode: the tree's commnodes start now and write "
                "%s; then start, for each leaf of %s, a back-end that calls\n"
                "  tbon_be_attach(\"%s\", RANK, &err)   (RANK: the leaf's rank, "
                "breadth-first from 0 at the front-end)\n"
                "for example: tbon_example_be --attach %s --rank RANK\n",
                c->attach, c->topology, c->attach, c->attach);
    }

    clock_gettime(CLOCK_MONOTONIC, &prog.t0);
    prog.tty = isatty(STDERR_FILENO);
    prog.attach = c->backend ? NULL : c->attach;
    opts.progress = on_progress;
    opts.progress_arg = &prog;
    opts.attach_file = c->attach;
    opts.fe_host = c->fe_host;
    opts.slurm = c->slurm;
    opts.slurm_fanout = (unsigned)c->fanout;
    opts.slurm_be_per_node = (unsigned)c->per_node;
    opts.env = c->env;
    opts.require_all = c->require_all;
    if (c->grace_ms) {
        opts.session_file = c->detach;
        opts.grace_ms = (int)c->grace_ms;
    }
    if (c->reattach) {
        tbon_net_t *net = tbon_fe_reattach(c->reattach, &opts, &err);
        if (!net)
            fprintf(stderr, PROG ": --reattach %s: %s\n", c->reattach,
                    err.msg[0] ? err.msg : tbon_strerror(err.code));
        return net;
    }
    tbon_net_t *net = tbon_fe_create(c->topology,
                                     c->backend ? (*backend ? *backend : c->backend) : NULL,
                                     (const char *const *)c->be_argv, &opts, &err);
    progress_done(&prog, net != NULL);
    if (!net) {
        fprintf(stderr, PROG ": %s\n", err.msg[0] ? err.msg : tbon_strerror(err.code));
        /* The commnode that failed to start it logs why; say the likely cause. */
        if (c->backend && !*backend)
            fprintf(stderr, PROG ": note: back-end '%s' is %s on this machine\n", c->backend,
                    strchr(c->backend, '/') ? "not an executable file"
                                            : "not in PATH nor in the current directory");
    }
    return net;
}
