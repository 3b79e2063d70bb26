/* st_ptree_out.c - what a call-prefix tree looks like outside: Graphviz dot,
 * JSON, an indented text tree, and STAT's equivalence classes */
#include "st_ptree_int.h"

#include <tbon/common.h>

#include <stdlib.h>
#include <string.h>

/* A node's task set as "count:[ranges]", malloc'ed (NULL when out of memory). */
static char *label_of(const st_node_t *n)
{
    size_t need = st_tree_label(n->r, n->nr, NULL, 0) + 1;
    char *s = malloc(need);
    if (s)
        st_tree_label(n->r, n->nr, s, need);
    return s;
}

/* s with " \ and control characters escaped for a dot or JSON string. */
static void put_escaped(FILE *f, const char *s, int json)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, json ? "\\u%04x" : "\\\\x%02x", c);
        else
            fputc(c, f);
    }
}

/* ---- dot ---- */

static int dot_node(FILE *f, const st_node_t *n, size_t id, size_t *next)
{
    for (size_t i = 0; i < n->nk; i++) {
        const st_node_t *k = n->kid[i];
        size_t kid = (*next)++;
        char *lab = label_of(k);
        if (!lab)
            return TBON_ENOMEM;
        fprintf(f, "  n%zu [label=\"", kid);
        put_escaped(f, k->frame, 0);
        fprintf(f, "\"];\n  n%zu -> n%zu [label=\"%s\"];\n", id, kid, lab);
        free(lab);
        int rc = dot_node(f, k, kid, next);
        if (rc)
            return rc;
    }
    return 0;
}

int st_tree_write_dot(const st_tree_t *t, FILE *f, const char *title)
{
    char *lab = label_of(t->root);
    if (!lab)
        return TBON_ENOMEM;
    fputs("digraph \"", f);
    put_escaped(f, title ? title : "tbon_stat", 0);
    fputs("\" {\n  node [shape=box, fontname=\"monospace\"];\n"
          "  edge [fontname=\"monospace\"];\n  n0 [label=\"", f);
    put_escaped(f, title ? title : "all tasks", 0);
    fprintf(f, "\\n%s\"];\n", lab);
    free(lab);
    size_t next = 1;
    int rc = dot_node(f, t->root, 0, &next);
    fputs("}\n", f);
    return rc ? rc : ferror(f) ? TBON_EIO : 0;
}

/* ---- JSON ---- */

static int json_node(FILE *f, const st_node_t *n, int depth)
{
    char *lab = label_of(n);
    if (!lab)
        return TBON_ENOMEM;
    fprintf(f, "%*s{\"frame\": ", depth * 2, "");
    if (n->frame) {
        fputc('"', f);
        put_escaped(f, n->frame, 1);
        fputc('"', f);
    } else {
        fputs("null", f);
    }
    /* "count:[ranges]": the ranges part only, and the count as a number. */
    fprintf(f, ", \"count\": %llu, \"tasks\": \"%s\", \"children\": [",
            (unsigned long long)st_set_count(n->r, n->nr), strchr(lab, ':') + 1);
    free(lab);
    for (size_t i = 0; i < n->nk; i++) {
        fputs(i ? ",\n" : "\n", f);
        int rc = json_node(f, n->kid[i], depth + 1);
        if (rc)
            return rc;
    }
    if (n->nk)
        fprintf(f, "\n%*s", depth * 2, "");
    fputs("]}", f);
    return 0;
}

int st_tree_write_json(const st_tree_t *t, FILE *f)
{
    int rc = json_node(f, t->root, 0);
    fputc('\n', f);
    return rc ? rc : ferror(f) ? TBON_EIO : 0;
}

/* ---- text ---- */

static int text_node(FILE *f, const st_node_t *n, int depth)
{
    char *lab = label_of(n);
    if (!lab)
        return TBON_ENOMEM;
    fprintf(f, "%*s%s  %s\n", depth * 2, "", n->frame ? n->frame : "all", lab);
    free(lab);
    for (size_t i = 0; i < n->nk; i++) {
        int rc = text_node(f, n->kid[i], depth + 1);
        if (rc)
            return rc;
    }
    return 0;
}

int st_tree_write_text(const st_tree_t *t, FILE *f)
{
    int rc = text_node(f, t->root, 0);
    return rc ? rc : ferror(f) ? TBON_EIO : 0;
}

/* ---- equivalence classes ----
 * A task "ends" at a node when it is in the node's set and in none of its
 * children's. Tasks that end at the same set of nodes form a class. The
 * computation works on ranges: every end set cuts the task space at its
 * range bounds; between two cuts all tasks end at the same nodes. */

struct end { const st_node_t *node; st_range_t *r; size_t nr; };
struct ends { struct end *v; size_t n, cap; int oom; };

/* n's set minus its children's. */
static void end_set(const st_node_t *n, struct ends *e)
{
    /* Walk n's ranges, cutting out every child's ranges (children's sets are
     * inside n's, but may overlap each other). Merge the children's first. */
    st_node_t u = { 0 };
    for (size_t i = 0; i < n->nk && !e->oom; i++) {
        st_range_t *m = malloc((u.nr + n->kid[i]->nr) * sizeof *m + sizeof *m);
        if (!m) {
            e->oom = 1;
            break;
        }
        size_t a = 0, b = 0, k = 0;
        const st_node_t *c = n->kid[i];
        while (a < u.nr || b < c->nr) {
            st_range_t x = b >= c->nr || (a < u.nr && u.r[a].lo <= c->r[b].lo) ? u.r[a++] : c->r[b++];
            if (k && (m[k - 1].hi == UINT32_MAX || x.lo <= m[k - 1].hi + 1)) {
                if (x.hi > m[k - 1].hi)
                    m[k - 1].hi = x.hi;
            } else {
                m[k++] = x;
            }
        }
        free(u.r);
        u.r = m;
        u.nr = k;
    }
    /* Cutting u's ranges out of n's leaves at most one piece more than u has. */
    size_t no = 0, cap = n->nr + u.nr + 1;
    st_range_t *out = e->oom ? NULL : malloc(cap * sizeof *out);
    if (!out) {
        free(u.r);
        e->oom = 1;
        return;
    }
    size_t j = 0;
    for (size_t i = 0; i < n->nr && !e->oom; i++) {
        uint64_t lo = n->r[i].lo, hi = n->r[i].hi;
        while (j < u.nr && u.r[j].hi < lo)
            j++;
        size_t k = j;
        while (lo <= hi) {
            if (k < u.nr && u.r[k].lo <= hi) {
                if (u.r[k].lo > lo && no < cap)
                    out[no++] = (st_range_t){ (uint32_t)lo, u.r[k].lo - 1 };
                lo = (uint64_t)u.r[k].hi + 1;
                k++;
            } else {
                if (no < cap)
                    out[no++] = (st_range_t){ (uint32_t)lo, (uint32_t)hi };
                break;
            }
        }
    }
    free(u.r);
    if (e->oom || no == 0) {
        free(out);
        return;
    }
    if (e->n == e->cap) {
        size_t c = e->cap ? e->cap * 2 : 16;
        struct end *nv = realloc(e->v, c * sizeof *nv);
        if (!nv) {
            free(out);
            e->oom = 1;
            return;
        }
        e->v = nv;
        e->cap = c;
    }
    e->v[e->n++] = (struct end){ n, out, no };
}

static void collect_ends(const st_node_t *n, struct ends *e)
{
    end_set(n, e);
    for (size_t i = 0; i < n->nk && !e->oom; i++)
        collect_ends(n->kid[i], e);
}

struct piece { uint64_t lo, hi; size_t *sig; size_t nsig; };

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_piece(const void *a, const void *b)
{
    const struct piece *x = a, *y = b;
    size_t n = x->nsig < y->nsig ? x->nsig : y->nsig;
    for (size_t i = 0; i < n; i++)
        if (x->sig[i] != y->sig[i])
            return x->sig[i] < y->sig[i] ? -1 : 1;
    if (x->nsig != y->nsig)
        return x->nsig < y->nsig ? -1 : 1;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

struct cls { st_range_t *r; size_t nr; uint64_t count; size_t *sig; size_t nsig; };

static int cmp_cls(const void *a, const void *b)
{
    const struct cls *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return (x->r[0].lo > y->r[0].lo) - (x->r[0].lo < y->r[0].lo);
}

/* The last frames of node's path ("... > a > b > c"). */
static void put_tail(FILE *f, const st_node_t *n)
{
    const char *fr[3];
    size_t k = 0;
    int more = 0;
    for (const st_node_t *p = n; p && p->frame; p = p->parent) {
        if (k < 3)
            fr[k++] = p->frame;
        else
            more = 1;
    }
    if (k == 0) {
        fputs("(no frames)", f);
        return;
    }
    if (more)
        fputs("... > ", f);
    for (size_t i = k; i-- > 0;)
        fprintf(f, "%s%s", fr[i], i ? " > " : "");
}

int st_tree_write_classes(const st_tree_t *t, FILE *f)
{
    struct ends e = { 0 };
    collect_ends(t->root, &e);
    size_t ncut = 0;
    for (size_t i = 0; i < e.n; i++)
        ncut += 2 * e.v[i].nr;
    uint64_t *cut = malloc((ncut + 1) * sizeof *cut);
    struct piece *pc = NULL;
    struct cls *cl = NULL;
    size_t np = 0, nc = 0;
    int rc = e.oom || !cut ? TBON_ENOMEM : 0;
    if (rc == 0) {
        size_t k = 0;
        for (size_t i = 0; i < e.n; i++)
            for (size_t j = 0; j < e.v[i].nr; j++) {
                cut[k++] = e.v[i].r[j].lo;
                cut[k++] = (uint64_t)e.v[i].r[j].hi + 1;
            }
        qsort(cut, k, sizeof *cut, cmp_u64);
        size_t u = 0;
        for (size_t i = 0; i < k; i++)
            if (u == 0 || cut[u - 1] != cut[i])
                cut[u++] = cut[i];
        ncut = u;
        pc = calloc(ncut ? ncut : 1, sizeof *pc);
        if (!pc)
            rc = TBON_ENOMEM;
        for (size_t i = 0; rc == 0 && i + 1 < ncut; i++)
            pc[i] = (struct piece){ cut[i], cut[i + 1] - 1, NULL, 0 };
        np = ncut ? ncut - 1 : 0;
    }
    /* Each end set's ranges mark the pieces they cover. */
    for (size_t i = 0; rc == 0 && i < e.n; i++)
        for (size_t j = 0; rc == 0 && j < e.v[i].nr; j++) {
            uint64_t lo = e.v[i].r[j].lo, hi = e.v[i].r[j].hi;
            size_t a = 0, b = np;
            while (a < b) {
                size_t mid = a + (b - a) / 2;
                if (pc[mid].lo < lo)
                    a = mid + 1;
                else
                    b = mid;
            }
            for (size_t p = a; p < np && pc[p].hi <= hi && rc == 0; p++) {
                size_t *ns = realloc(pc[p].sig, (pc[p].nsig + 1) * sizeof *ns);
                if (!ns) {
                    rc = TBON_ENOMEM;
                    break;
                }
                pc[p].sig = ns;
                pc[p].sig[pc[p].nsig++] = i;
            }
        }
    if (rc == 0) {
        qsort(pc, np, sizeof *pc, cmp_piece);
        cl = calloc(np ? np : 1, sizeof *cl);
        if (!cl)
            rc = TBON_ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < np; i++) {
        if (pc[i].nsig == 0)
            continue;           /* tasks in no tree */
        struct cls *c = nc ? &cl[nc - 1] : NULL;
        if (!c || c->nsig != pc[i].nsig ||
            memcmp(c->sig, pc[i].sig, pc[i].nsig * sizeof *c->sig) != 0) {
            c = &cl[nc++];
            c->sig = pc[i].sig;
            c->nsig = pc[i].nsig;
            c->r = malloc((np - i) * sizeof *c->r);
            if (!c->r) {
                rc = TBON_ENOMEM;
                break;
            }
        }
        st_range_t x = { (uint32_t)pc[i].lo, (uint32_t)pc[i].hi };
        if (c->nr && (uint64_t)c->r[c->nr - 1].hi + 1 == pc[i].lo)
            c->r[c->nr - 1].hi = x.hi;
        else
            c->r[c->nr++] = x;
        c->count += pc[i].hi - pc[i].lo + 1;
    }
    if (rc == 0) {
        qsort(cl, nc, sizeof *cl, cmp_cls);
        for (size_t i = 0; i < nc; i++) {
            size_t need = st_tree_label(cl[i].r, cl[i].nr, NULL, 0) + 1;
            char *lab = malloc(need);
            if (!lab) {
                rc = TBON_ENOMEM;
                break;
            }
            st_tree_label(cl[i].r, cl[i].nr, lab, need);
            fprintf(f, "%s  representative %u:  ", lab, cl[i].r[0].lo);
            free(lab);
            for (size_t k = 0; k < cl[i].nsig; k++) {
                if (k)
                    fputs("  |  ", f);
                put_tail(f, e.v[cl[i].sig[k]].node);
            }
            fputc('\n', f);
        }
    }
    for (size_t i = 0; cl && i < nc; i++)
        free(cl[i].r);
    for (size_t i = 0; pc && i < np; i++)
        free(pc[i].sig);
    for (size_t i = 0; i < e.n; i++)
        free(e.v[i].r);
    free(e.v);
    free(cl);
    free(pc);
    free(cut);
    if (rc == 0 && ferror(f))
        rc = TBON_EIO;
    return rc ? rc : (int)nc;
}
