/* st_topo.c - the topology files tbon_stat writes for the trees it starts,
 * in the documented text format (docs/topology.md): the statements of a
 * tree given in rank order, and the shape of minimal depth for a fan-out
 * bound (as tbon_topgen --fanout makes it). */
#include "st_topo.h"

#include "st_prog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void st_topo_alloc(struct st_topo *t, size_t n)
{
    t->n = n;
    t->host = calloc(n, sizeof *t->host);
    t->id = calloc(n, sizeof *t->id);
    t->parent = calloc(n, sizeof *t->parent);
    if (!t->host || !t->id || !t->parent)
        st_die("out of memory");
}

void st_topo_free(struct st_topo *t)
{
    free(t->host);
    free(t->id);
    free(t->parent);
}

/* Whether a topology file may name host h: 1 to 255 letters, digits, '-',
 * '.' and '_', starting with a letter or digit (docs/topology.md). */
int st_host_ok(const char *h)
{
    size_t len = strlen(h);
    if (len == 0 || len > 255)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)h[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '-' && c != '.' && c != '_')))
            return 0;
    }
    return 1;
}

/* t's statements, "host:id => host:id ... ;" for each node with children,
 * long lines wrapped with indented continuations. */
static void topo_print(const struct st_topo *t, FILE *f)
{
    size_t c = 1;
    for (size_t r = 0; r < t->n && c < t->n; r++) {
        if (t->parent[c] != r)
            continue;
        int col = fprintf(f, "%s:%u =>", t->host[r], t->id[r]);
        for (size_t j = 0; c < t->n && t->parent[c] == r; c++, j++) {
            if (col + (int)strlen(t->host[c]) + 12 > 79 && j > 0) {
                fputs("\n   ", f);
                col = 3;
            }
            col += fprintf(f, " %s:%u", t->host[c], t->id[c]);
        }
        fputs(" ;\n", f);
    }
}

/* Write t to path with a comment line first: 0, or -1 with why in err (the
 * file removed). */
int st_topo_write(const struct st_topo *t, const char *path, const char *comment, char *err,
                  size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "# %s\n", comment);
    topo_print(t, f);
    int rc = 0;
    if (fflush(f) != 0 || ferror(f)) {
        snprintf(err, errlen, "%s: write error: %s", path, strerror(errno));
        rc = -1;
    }
    if (fclose(f) != 0 && rc == 0) {
        snprintf(err, errlen, "%s: write error: %s", path, strerror(errno));
        rc = -1;
    }
    if (rc)
        unlink(path);
    return rc;
}

/* The tree of minimal depth over leaves back-ends with at most k children
 * per node, every node on localhost (ids in rank order): level widths
 * bottom-up, each ceil(below / k), up to one root; then each level shares
 * the next one out as evenly as possible (the first get one more). */
void st_topo_fanout(struct st_topo *t, uint32_t k, uint32_t leaves)
{
    st_topo_fanout_cn(t, k, leaves, 0);
}

void st_topo_fanout_cn(struct st_topo *t, uint32_t k, uint32_t leaves, int commnodes)
{
    uint64_t width[32];
    size_t nl = 0;
    uint64_t n = leaves;
    width[nl++] = leaves;
    do {
        width[nl] = (width[nl - 1] + k - 1) / k;
        n += width[nl];
        nl++;
    } while (width[nl - 1] > 1 || (commnodes && nl < 3));
    st_topo_alloc(t, (size_t)n);
    size_t r = 0, next = 1;
    for (size_t lv = nl; lv-- > 0;) {
        uint64_t w = width[lv], below = lv ? width[lv - 1] : 0;
        for (uint64_t j = 0; j < w; j++, r++) {
            t->host[r] = "localhost";
            t->id[r] = (uint32_t)r;
            for (uint64_t c = 0; lv && c < below / w + (j < below % w); c++)
                t->parent[next++] = (uint32_t)r;
        }
    }
}
