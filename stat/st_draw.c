/* st_draw.c - the SVG drawings of a run's two trees: one Graphviz dot for
 * both (its start-up, fonts and plug-ins, is most of its time: two trees of
 * 256 tasks drew in 30 ms where two dots took 72), started before the other
 * files are written and waited for after. A session's sample keeps its last
 * drawings in the session's directory and copies one whose tree has not
 * changed since (a hung job sampled again draws the same trees). */
#include "st_draw.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const which[2] = { "2D", "3D" };

/* The whole of path (NUL added, not counted), or NULL. */
static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 8192, n = 0;
    char *b = malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        char *nb = realloc(b, cap *= 2);
        if (!nb) {
            free(b);
            b = NULL;
        } else {
            b = nb;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!b || bad) {
        free(b);
        return NULL;
    }
    b[n] = '\0';
    *len = n;
    return b;
}

/* len bytes of b into path, through a temporary file and a rename (a
 * reader never sees half of it): 0 or -1. */
static int write_all(const char *path, const char *b, size_t len)
{
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    int bad = fwrite(b, 1, len, f) != len;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void paths(const struct st_draw *d, int i, char *dot, char *svg, char *kdot, char *ksvg)
{
    snprintf(dot, PATH_MAX, "%s/%s.%s.dot", d->dir, d->exe, which[i]);
    snprintf(svg, PATH_MAX, "%s/%s.%s.svg", d->dir, d->exe, which[i]);
    if (d->keep) {
        snprintf(kdot, PATH_MAX, "%s/drawn.%s.dot", d->keep, which[i]);
        snprintf(ksvg, PATH_MAX, "%s/drawn.%s.svg", d->keep, which[i]);
    }
}

/* The kept drawing of tree i copied when its dot text is the kept one's. */
static int reuse(const struct st_draw *d, int i)
{
    char dot[PATH_MAX], svg[PATH_MAX], kdot[PATH_MAX], ksvg[PATH_MAX];
    paths(d, i, dot, svg, kdot, ksvg);
    size_t a = 0, b = 0, s = 0;
    char *now = read_all(dot, &a), *then = read_all(kdot, &b), *pic = NULL;
    int same = now && then && a == b && memcmp(now, then, a) == 0;
    if (same)
        pic = read_all(ksvg, &s);
    int ok = pic && write_all(svg, pic, s) == 0;
    free(now);
    free(then);
    free(pic);
    return ok;
}

void st_draw_start(struct st_draw *d, const char *dir, const char *exe, const char *keep)
{
    *d = (struct st_draw){ .dir = dir, .exe = exe, .keep = keep, .pid = -1 };
    char *argv[6] = { "dot", "-Tsvg", "-O" };
    int argc = 3;
    char in[2][PATH_MAX];
    for (int i = 0; i < 2; i++) {
        if (keep && reuse(d, i)) {
            d->reused[i] = 1;
            continue;
        }
        snprintf(in[i], PATH_MAX, "%s/%s.%s.dot", dir, exe, which[i]);
        argv[argc++] = in[i];
    }
    argv[argc] = NULL;
    if (argc == 3) {
        d->state = 0;                   /* both copied */
        return;
    }
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0) {
        d->state = -1;
        return;
    }
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawnp(&d->pid, "dot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        d->pid = -1;
        d->state = rc == ENOENT ? 1 : -1;
    }
}

/* dot -O wrote X.dot.svg: name it X.svg, and keep it when asked. */
static int place(const struct st_draw *d, int i)
{
    char dot[PATH_MAX], svg[PATH_MAX], kdot[PATH_MAX], ksvg[PATH_MAX], out[PATH_MAX + 8];
    paths(d, i, dot, svg, kdot, ksvg);
    snprintf(out, sizeof out, "%s.svg", dot);
    if (rename(out, svg) != 0)
        return -1;
    if (d->keep) {
        size_t a = 0, s = 0;
        char *t = read_all(dot, &a), *pic = read_all(svg, &s);
        /* The old text out first: a kept text never stands beside another
         * tree's picture, even if we die in between. */
        unlink(kdot);
        if (!t || !pic || write_all(ksvg, pic, s) != 0 || write_all(kdot, t, a) != 0) {
            unlink(kdot);
            unlink(ksvg);
        }
        free(t);
        free(pic);
    }
    return 0;
}

int st_draw_finish(struct st_draw *d)
{
    if (d->pid < 0)
        return d->state;
    int st;
    while (waitpid(d->pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    d->pid = -1;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    for (int i = 0; i < 2; i++)
        if (!d->reused[i] && place(d, i) != 0)
            return -1;
    return 0;
}

void st_draw_forget(const char *keep)
{
    char p[PATH_MAX];
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/drawn.%s.dot", keep, which[i]);
        unlink(p);
        snprintf(p, sizeof p, "%s/drawn.%s.svg", keep, which[i]);
        unlink(p);
    }
}
