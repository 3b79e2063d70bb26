/* st_ptree_out.c - what a prefix tree says: task-set labels, a task's path,
 * and the DOT, JSON, text and equivalence-class outputs. The root is shown
 * as "/" (as STAT does); frames are escaped for each format, so that any
 * bytes a stack walker reports give valid output. jansson writes the JSON. */
#include "st_ptree_int.h"

#include <tbon/common.h>

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define ST_ROOT_NAME "/"

/* ---- labels ---- */

/* A snprintf-like appender: writes what fits, counts what is needed. */
struct sbuf {
    char *out;
    size_t cap, n;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    char *p = b->n < b->cap ? b->out + b->n : NULL;
    va_start(ap, fmt);
    int k = vsnprintf(p, p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k > 0)
        b->n += (size_t)k;
}

size_t st_tree_label(const st_range_t *r, size_t nr, char *out, size_t cap)
{
    struct sbuf b = { out, out ? cap : 0, 0 };
    if (b.cap)
        out[0] = '\0';
    sb_printf(&b, "%llu:[", (unsigned long long)st_ranges_count(r, nr));
    for (size_t i = 0; i < nr; i++) {
        if (r[i].lo == r[i].hi)
            sb_printf(&b, "%s%lu", i ? "," : "", (unsigned long)r[i].lo);
        else
            sb_printf(&b, "%s%lu-%lu", i ? "," : "", (unsigned long)r[i].lo,
                      (unsigned long)r[i].hi);
    }
    sb_printf(&b, "]");
    return b.n;
}

/* The ranges alone ("[0-2,7]"), or with the count first ("4:[0-2,7]"). */
static void put_ranges(FILE *f, const st_range_t *r, size_t n, int with_count)
{
    if (with_count)
        fprintf(f, "%llu:", (unsigned long long)st_ranges_count(r, n));
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        if (r[i].lo == r[i].hi)
            fprintf(f, "%s%lu", i ? "," : "", (unsigned long)r[i].lo);
        else
            fprintf(f, "%s%lu-%lu", i ? "," : "", (unsigned long)r[i].lo,
                    (unsigned long)r[i].hi);
    }
    fputc(']', f);
}

/* ---- escaping ---- */

/* DOT strings, text lines, folded stacks (text, with ';' escaped too: it
 * separates the frames there). */
enum esc { ESC_DOT, ESC_TEXT, ESC_FOLD };

/* The length of the valid UTF-8 sequence at s[0..n), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, cp = c & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    /* No overlong forms, surrogates or code points past U+10FFFF. */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* Frame bytes for a quoted DOT string or a text line. Quotes, backslashes
 * and control characters are escaped; bytes that are not UTF-8 become \xHH
 * (still readable, still one line). */
static void put_escaped(FILE *f, const char *str, size_t n, enum esc mode)
{
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t ul = utf8_len(s + i, n - i);
        if (ul > 1) {
            fwrite(s + i, 1, ul, f);
            i += ul;
            continue;
        }
        i++;
        if (ul == 0) {
            if (mode == ESC_DOT)
                fprintf(f, "\\\\x%02x", c);   /* DOT shows "\x.." */
            else
                fprintf(f, "\\x%02x", c);
            continue;
        }
        if (c == ';' && mode == ESC_FOLD) {
            fputs("\\x3b", f);
        } else if (c == '"' && mode == ESC_DOT) {
            fputs("\\\"", f);
        } else if (c == '\\') {
            fputs("\\\\", f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c < 0x20 || c == 0x7f) {
            if (mode == ESC_DOT) {
                fprintf(f, "\\\\x%02x", c);
            } else {
                fprintf(f, "\\x%02x", c);
            }
        } else {
            fputc(c, f);
        }
    }
}

static void put_frame(FILE *f, const st_node_t *nd, int is_root, enum esc mode)
{
    if (is_root)
        fputs(ST_ROOT_NAME, f);
    else
        put_escaped(f, nd->frame, nd->flen, mode);
}

static int finish(FILE *f)
{
    if (fflush(f) != 0 || ferror(f))
        return TBON_EIO;
    return 0;
}

/* ---- a task's path ---- */

struct path_walk {
    uint32_t task;
    const char **cur, **best;
    size_t nbest;
    int err;
};

static void path_dfs(struct path_walk *w, const st_node_t *nd, size_t depth)
{
    if (depth > w->nbest) {
        const char **b = realloc(w->best, depth * sizeof *b);
        if (!b) {
            w->err = 1;
            return;
        }
        memcpy(b, w->cur, depth * sizeof *b);
        w->best = b;
        w->nbest = depth;
    }
    for (size_t i = 0; i < nd->nkids && !w->err; i++) {
        const st_node_t *k = nd->kids[i];
        if (depth < ST_MAX_DEPTH && st_rset_has(&k->set, w->task)) {
            w->cur[depth] = k->frame;
            path_dfs(w, k, depth + 1);
        }
    }
}

size_t st_tree_path(const st_tree_t *t, uint32_t task, const char ***frames)
{
    struct path_walk w = { task, NULL, NULL, 0, 0 };
    if (!frames)
        return 0;
    *frames = NULL;
    if (!t || t->counts || !st_rset_has(&t->root->set, task))
        return 0;
    if (!(w.cur = malloc(ST_MAX_DEPTH * sizeof *w.cur)))
        return 0;
    path_dfs(&w, t->root, 0);
    free(w.cur);
    if (w.err) {
        free(w.best);
        return 0;
    }
    *frames = w.best;
    return w.nbest;
}

/* ---- DOT, JSON, text ---- */

/* A node's label: "4:[0-2,7]", or in a counts-only tree "4 (rep 0)" (the
 * root's is its set in both). */
static void put_label(FILE *f, const st_tree_t *t, const st_node_t *nd)
{
    if (t->counts && nd != t->root)
        fprintf(f, "%llu (rep %lu)", (unsigned long long)nd->count, (unsigned long)nd->rep);
    else
        put_ranges(f, nd->set.r, nd->set.n, 1);
}

static void dot_node(FILE *f, const st_tree_t *t, const st_node_t *nd, size_t parent,
                     size_t *next)
{
    size_t id = (*next)++;
    fprintf(f, "  n%zu [label=\"", id);
    put_frame(f, nd, id == 0, ESC_DOT);
    fputs("\"];\n", f);
    if (id) {
        fprintf(f, "  n%zu -> n%zu [label=\"", parent, id);
        put_label(f, t, nd);
        fputs("\"];\n", f);
    }
    for (size_t i = 0; i < nd->nkids; i++)
        dot_node(f, t, nd->kids[i], id, next);
}

int st_tree_write_dot(const st_tree_t *t, FILE *f, const char *title)
{
    size_t next = 0;
    if (!t || !f)
        return TBON_EINVAL;
    fputs("digraph \"", f);
    if (!title)
        title = "tbon_stat";
    put_escaped(f, title, strlen(title), ESC_DOT);
    fputs("\" {\n  node [shape=box];\n", f);
    dot_node(f, t, t->root, 0, &next);
    fputs("}\n", f);
    return finish(f);
}

/* A frame as a JSON string. jansson takes UTF-8 only: each byte outside a
 * valid sequence becomes U+FFFD (3 bytes). NULL when out of memory. */
static json_t *json_frame(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    char *u = malloc(3 * n + 1);
    if (!u)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t ul = utf8_len(s + i, n - i);
        if (ul == 0) {
            memcpy(u + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        } else {
            memcpy(u + k, s + i, ul);
            k += ul;
            i += ul;
        }
    }
    json_t *j = json_stringn(u, k);
    free(u);
    return j;
}

/* {"frame", "tasks", "count", "children"} for nd and below (jansson keeps
 * the keys in this order). NULL when out of memory. */
static json_t *json_node(const st_tree_t *t, const st_node_t *nd, int is_root)
{
    /* The label "N:[ranges]" without its count is the task set. */
    size_t ln = t->counts ? 0 : st_tree_label(nd->set.r, nd->set.n, NULL, 0);
    char *label = malloc(ln + 1);
    json_t *o = json_object(), *kids = json_array();
    int bad = !label || !o || !kids;
    if (!bad) {
        st_tree_label(nd->set.r, nd->set.n, label, ln + 1);
        json_t *frame = is_root ? json_string(ST_ROOT_NAME) : json_frame(nd->frame, nd->flen);
        bad = json_object_set_new(o, "frame", frame) ||
              (!t->counts &&
               json_object_set_new(o, "tasks", json_string(strchr(label, ':') + 1))) ||
              json_object_set_new(o, "count", json_integer((json_int_t)st_node_count(t, nd))) ||
              (t->counts &&
               json_object_set_new(o, "rep", json_integer((json_int_t)st_node_rep(t, nd)))) ||
              json_object_set(o, "children", kids);
    }
    for (size_t i = 0; !bad && i < nd->nkids; i++)
        bad = json_array_append_new(kids, json_node(t, nd->kids[i], 0)) != 0;
    free(label);
    json_decref(kids);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int st_tree_write_json(const st_tree_t *t, FILE *f)
{
    if (!t || !f)
        return TBON_EINVAL;
    json_t *j = st_tree_json(t);
    if (!j)
        return TBON_ENOMEM;
    int rc = json_dumpf(j, f, JSON_COMPACT);
    json_decref(j);
    if (rc != 0)
        return TBON_EIO;
    fputc('\n', f);
    return finish(f);
}

static void text_node(FILE *f, const st_tree_t *t, const st_node_t *nd, size_t depth)
{
    for (size_t i = 0; i < depth; i++)
        fputs("  ", f);
    put_frame(f, nd, depth == 0, ESC_TEXT);
    fputs("  ", f);
    put_label(f, t, nd);
    fputc('\n', f);
    for (size_t i = 0; i < nd->nkids; i++)
        text_node(f, t, nd->kids[i], depth + 1);
}

int st_tree_write_text(const st_tree_t *t, FILE *f)
{
    if (!t || !f)
        return TBON_EINVAL;
    text_node(f, t, t->root, 0);
    return finish(f);
}

/* ---- folded stacks ---- */

static int by_lo(const void *a, const void *b)
{
    const st_range_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The tasks of nd that end there: in nd and in none of its children (in a
 * counts-only tree: its count less its children's). */
static uint64_t ends_at(const st_tree_t *t, const st_node_t *nd, st_range_t **tmp, size_t *cap,
                        int *err)
{
    if (t->counts) {
        uint64_t below = 0;
        for (size_t i = 0; i < nd->nkids; i++)
            below += nd->kids[i]->count;
        return nd->count > below ? nd->count - below : 0;
    }
    uint64_t all = st_ranges_count(nd->set.r, nd->set.n);
    size_t n = 0;
    for (size_t i = 0; i < nd->nkids; i++)
        n += nd->kids[i]->set.n;
    if (!n)
        return all;
    if (n > *cap) {
        st_range_t *v = realloc(*tmp, n * sizeof *v);
        if (!v) {
            *err = TBON_ENOMEM;
            return 0;
        }
        *tmp = v;
        *cap = n;
    }
    n = 0;
    for (size_t i = 0; i < nd->nkids; i++)
        for (size_t j = 0; j < nd->kids[i]->set.n; j++)
            (*tmp)[n++] = nd->kids[i]->set.r[j];
    qsort(*tmp, n, sizeof **tmp, by_lo);
    /* the children's union, counted as its ranges are merged */
    uint64_t below = 0;
    uint32_t lo = (*tmp)[0].lo, hi = (*tmp)[0].hi;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && (*tmp)[i].lo <= (uint64_t)hi + 1) {
            if ((*tmp)[i].hi > hi)
                hi = (*tmp)[i].hi;
            continue;
        }
        below += (uint64_t)hi - lo + 1;
        if (i < n) {
            lo = (*tmp)[i].lo;
            hi = (*tmp)[i].hi;
        }
    }
    return all > below ? all - below : 0;
}

struct fold_walk {
    const st_tree_t *t;
    FILE *f;
    const st_node_t **path;
    size_t cap;
    st_range_t *tmp;
    size_t tmpcap;
    int err;
};

static void fold_node(struct fold_walk *w, const st_node_t *nd, size_t depth)
{
    if (w->err)
        return;
    if (depth >= w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        const st_node_t **v = realloc(w->path, cap * sizeof *v);
        if (!v) {
            w->err = TBON_ENOMEM;
            return;
        }
        w->path = v;
        w->cap = cap;
    }
    w->path[depth] = nd;
    uint64_t n = depth ? ends_at(w->t, nd, &w->tmp, &w->tmpcap, &w->err) : 0;
    if (n) {
        for (size_t i = 1; i <= depth; i++) {
            if (i > 1)
                fputc(';', w->f);
            put_escaped(w->f, w->path[i]->frame, w->path[i]->flen, ESC_FOLD);
        }
        fprintf(w->f, " %llu\n", (unsigned long long)n);
    }
    for (size_t i = 0; i < nd->nkids; i++)
        fold_node(w, nd->kids[i], depth + 1);
}

int st_tree_write_folded(const st_tree_t *t, FILE *f)
{
    if (!t || !f)
        return TBON_EINVAL;
    struct fold_walk w = { .t = t, .f = f };
    fold_node(&w, t->root, 0);
    free(w.path);
    free(w.tmp);
    return w.err ? w.err : finish(f);
}

/* ---- equivalence classes ----
 *
 * A task ends at node v when v holds it and no child of v does; its class
 * is the set of nodes it ends at (several with threads). The end sets are
 * ranges, so the classes come from a sweep over their end points: between
 * two consecutive end points every task ends at the same nodes. Nodes are
 * numbered in pre-order, so a class's key is a sorted array of numbers. */

struct cls_ev {
    uint64_t pos;       /* a range's lo, or its hi + 1 */
    size_t node;
    int start;
};

struct cls_seg {
    uint32_t lo, hi;
    size_t koff, klen;  /* the key: pool[koff..koff+klen) */
    const size_t *key;
};

struct cls_class {
    uint32_t rep;
    size_t first, n;    /* its segments */
};

struct cls_walk {
    const st_node_t **nodes;
    size_t nnodes;
    struct cls_ev *ev;
    size_t nev, evcap;
    st_range_t *tmp;    /* the union of a node's children's sets */
    size_t tmpcap;
    int err;
};

static int range_cmp(const void *a, const void *b)
{
    const st_range_t *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static int ev_cmp(const void *a, const void *b)
{
    const struct cls_ev *x = a, *y = b;
    if (x->pos != y->pos)
        return (x->pos > y->pos) - (x->pos < y->pos);
    return x->start - y->start;   /* ends first */
}

static int seg_cmp(const void *a, const void *b)
{
    const struct cls_seg *x = a, *y = b;
    for (size_t i = 0; i < x->klen && i < y->klen; i++)
        if (x->key[i] != y->key[i])
            return (x->key[i] > y->key[i]) - (x->key[i] < y->key[i]);
    if (x->klen != y->klen)
        return (x->klen > y->klen) - (x->klen < y->klen);
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static int class_cmp(const void *a, const void *b)
{
    const struct cls_class *x = a, *y = b;
    return (x->rep > y->rep) - (x->rep < y->rep);
}

static void cls_emit(struct cls_walk *w, uint64_t lo, uint64_t hi, size_t node)
{
    if (w->nev + 2 > w->evcap) {
        size_t cap = w->evcap ? 2 * w->evcap : 64;
        struct cls_ev *e = realloc(w->ev, cap * sizeof *e);
        if (!e) {
            w->err = TBON_ENOMEM;
            return;
        }
        w->ev = e;
        w->evcap = cap;
    }
    w->ev[w->nev++] = (struct cls_ev){ lo, node, 1 };
    w->ev[w->nev++] = (struct cls_ev){ hi + 1, node, 0 };
}

/* Number the nodes in pre-order and emit each one's end set. */
static void cls_collect(struct cls_walk *w, const st_node_t *nd)
{
    size_t idx = w->nnodes++, nk = 0, m = 0;
    w->nodes[idx] = nd;

    for (size_t i = 0; i < nd->nkids; i++)
        nk += nd->kids[i]->set.n;
    if (nk > w->tmpcap) {
        st_range_t *r = realloc(w->tmp, nk * sizeof *r);
        if (!r) {
            w->err = TBON_ENOMEM;
            return;
        }
        w->tmp = r;
        w->tmpcap = nk;
    }
    for (size_t i = 0; i < nd->nkids; i++) {
        memcpy(w->tmp + m, nd->kids[i]->set.r, nd->kids[i]->set.n * sizeof *w->tmp);
        m += nd->kids[i]->set.n;
    }
    if (nd->nkids > 1)
        qsort(w->tmp, m, sizeof *w->tmp, range_cmp);

    /* nd's set minus the children's; both sorted, so one walk. */
    size_t j = 0;
    for (size_t k = 0; k < nd->set.n && !w->err; k++) {
        uint64_t cur = nd->set.r[k].lo, hi = nd->set.r[k].hi;
        while (j < m && w->tmp[j].hi < cur)
            j++;
        while (j < m && w->tmp[j].lo <= hi) {
            if (w->tmp[j].lo > cur)
                cls_emit(w, cur, w->tmp[j].lo - 1, idx);
            if ((uint64_t)w->tmp[j].hi + 1 > cur)
                cur = (uint64_t)w->tmp[j].hi + 1;
            if (w->tmp[j].hi >= hi)
                break;
            j++;
        }
        if (cur <= hi)
            cls_emit(w, cur, hi, idx);
    }
    for (size_t i = 0; i < nd->nkids && !w->err; i++)
        cls_collect(w, nd->kids[i]);
}

/* A class's task set as ranges, into rbuf (its segments are sorted and
 * disjoint: adjacent ones join); returns how many. */
static size_t cls_ranges(const struct cls_seg *segs, const struct cls_class *c, st_range_t *rbuf)
{
    size_t nr = 0;
    for (size_t i = c->first; i < c->first + c->n; i++) {
        if (nr && (uint64_t)rbuf[nr - 1].hi + 1 == segs[i].lo)
            rbuf[nr - 1].hi = segs[i].hi;
        else
            rbuf[nr++] = (st_range_t){ segs[i].lo, segs[i].hi };
    }
    return nr;
}

/* What is done with each class, in order of representative: its ranges
 * (r[0..nr)), and its first segment, whose key is the class's end nodes.
 * 0 or an error that stops the walk. */
typedef int (*cls_each_fn)(void *arg, const struct cls_walk *w, const struct cls_seg *s,
                           uint32_t rep, const st_range_t *r, size_t nr);

/* Sweep the end sets' events in task order: a segment is a run of tasks
 * with the same active end nodes (its key). 0 or TBON_ENOMEM. */
static int cls_segments(struct cls_walk *w, size_t *active, struct cls_seg **segsp,
                        size_t *nsegp, size_t **poolp)
{
    struct cls_seg *segs = NULL;
    size_t nact = 0, *pool = NULL, npool = 0, poolcap = 0, nseg = 0, segcap = 0;

    for (size_t i = 0; i < w->nev;) {
        uint64_t pos = w->ev[i].pos;
        for (; i < w->nev && w->ev[i].pos == pos; i++) {
            size_t lo = 0, hi = nact, v = w->ev[i].node;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (active[mid] < v)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (w->ev[i].start) {
                memmove(&active[lo + 1], &active[lo], (nact - lo) * sizeof *active);
                active[lo] = v;
                nact++;
            } else if (lo < nact && active[lo] == v) {
                memmove(&active[lo], &active[lo + 1], (nact - lo - 1) * sizeof *active);
                nact--;
            }
        }
        if (!nact || i == w->nev)
            continue;
        if (nseg == segcap) {
            size_t cap = segcap ? 2 * segcap : 64;
            struct cls_seg *s = realloc(segs, cap * sizeof *s);
            if (!s)
                goto oom;
            segs = s;
            segcap = cap;
        }
        if (npool + nact > poolcap) {
            size_t cap = poolcap ? 2 * poolcap : 256;
            while (cap < npool + nact)
                cap *= 2;
            size_t *p = realloc(pool, cap * sizeof *p);
            if (!p)
                goto oom;
            pool = p;
            poolcap = cap;
        }
        memcpy(pool + npool, active, nact * sizeof *active);
        segs[nseg++] = (struct cls_seg){ (uint32_t)pos, (uint32_t)(w->ev[i].pos - 1),
                                         npool, nact, NULL };
        npool += nact;
    }
    for (size_t i = 0; i < nseg; i++)
        segs[i].key = pool + segs[i].koff;
    *segsp = segs;
    *nsegp = nseg;
    *poolp = pool;
    return 0;
oom:
    free(segs);
    free(pool);
    return TBON_ENOMEM;
}

/* The classes of t, each given to fn. The number of classes (at most
 * INT_MAX), or < 0: TBON_EINVAL, TBON_ENOMEM, or fn's error. */
static int cls_walk_classes(const st_tree_t *t, cls_each_fn fn, void *arg)
{
    struct cls_walk w = { 0 };
    size_t *active = NULL, *pool = NULL, nseg = 0, ncls = 0;
    struct cls_seg *segs = NULL;
    struct cls_class *cls = NULL;
    st_range_t *rbuf = NULL;
    int rc = TBON_ENOMEM;

    if (!t || t->counts)
        return TBON_EINVAL;     /* (classes need the task sets) */
    if (!(w.nodes = malloc(t->nnodes * sizeof *w.nodes)) ||
        !(active = malloc(t->nnodes * sizeof *active)))
        goto out;
    cls_collect(&w, t->root);
    if (w.err)
        goto out;
    if (w.nev)
        qsort(w.ev, w.nev, sizeof *w.ev, ev_cmp);
    if (cls_segments(&w, active, &segs, &nseg, &pool) != 0)
        goto out;
    if (nseg)
        qsort(segs, nseg, sizeof *segs, seg_cmp);

    if (nseg && (!(cls = malloc(nseg * sizeof *cls)) || !(rbuf = malloc(nseg * sizeof *rbuf))))
        goto out;
    for (size_t i = 0; i < nseg; i++) {
        if (i && segs[i].klen == segs[i - 1].klen &&
            memcmp(segs[i].key, segs[i - 1].key, segs[i].klen * sizeof *segs[i].key) == 0) {
            cls[ncls - 1].n++;
        } else {
            cls[ncls++] = (struct cls_class){ segs[i].lo, i, 1 };
        }
    }
    if (ncls)
        qsort(cls, ncls, sizeof *cls, class_cmp);
    rc = 0;
    for (size_t i = 0; i < ncls && rc == 0; i++)
        rc = fn(arg, &w, &segs[cls[i].first], cls[i].rep, rbuf, cls_ranges(segs, &cls[i], rbuf));
    if (rc == 0)
        rc = ncls > INT_MAX ? INT_MAX : (int)ncls;
out:
    free(w.nodes);
    free(w.ev);
    free(w.tmp);
    free(active);
    free(pool);
    free(segs);
    free(cls);
    free(rbuf);
    return rc;
}

struct cls_text {
    FILE *f;
    st_task_name_fn name, after;
    void *arg;
};

/* "4:[0-2,7]  rep 0 (n1:4242)  poll | compute", and after's line. */
static int cls_print(void *arg, const struct cls_walk *w, const struct cls_seg *s, uint32_t rep,
                     const st_range_t *r, size_t nr)
{
    const struct cls_text *ct = arg;
    FILE *f = ct->f;
    put_ranges(f, r, nr, 1);
    const char *who = ct->name ? ct->name(ct->arg, rep) : NULL;
    if (who)
        fprintf(f, "  rep %lu (%s)  ", (unsigned long)rep, who);
    else
        fprintf(f, "  rep %lu  ", (unsigned long)rep);
    for (size_t i = 0; i < s->klen; i++) {
        if (i)
            fputs(" | ", f);
        put_frame(f, w->nodes[s->key[i]], s->key[i] == 0, ESC_TEXT);
    }
    fputc('\n', f);
    const char *line = ct->after ? ct->after(ct->arg, rep) : NULL;
    if (line)
        fprintf(f, "    %s\n", line);
    return 0;
}

int st_tree_write_classes(const st_tree_t *t, FILE *f)
{
    return st_tree_write_classes_named(t, f, NULL, NULL);
}

int st_tree_write_classes_named(const st_tree_t *t, FILE *f, st_task_name_fn name, void *arg)
{
    return st_tree_write_classes_ex(t, f, name, NULL, arg);
}

int st_tree_write_classes_ex(const st_tree_t *t, FILE *f, st_task_name_fn name,
                             st_task_name_fn after, void *arg)
{
    if (!f)
        return TBON_EINVAL;
    struct cls_text ct = { f, name, after, arg };
    int n = cls_walk_classes(t, cls_print, &ct);
    if (n < 0)
        return n;
    int rc = finish(f);
    return rc ? rc : n;
}

/* {"tasks", "count", "rep", "ends"} onto the array arg. */
static int cls_json(void *arg, const struct cls_walk *w, const struct cls_seg *s, uint32_t rep,
                    const st_range_t *r, size_t nr)
{
    (void)w;
    size_t ln = st_tree_label(r, nr, NULL, 0);
    char *label = malloc(ln + 1);
    json_t *ends = json_array();
    int bad = !label || !ends;
    for (size_t i = 0; !bad && i < s->klen; i++)
        bad = json_array_append_new(ends, json_integer((json_int_t)s->key[i])) != 0;
    if (!bad) {
        st_tree_label(r, nr, label, ln + 1);
        bad = json_array_append_new(arg, json_pack("{s:s, s:I, s:I, s:O}", "tasks",
                                                   strchr(label, ':') + 1, "count",
                                                   (json_int_t)st_ranges_count(r, nr), "rep",
                                                   (json_int_t)rep, "ends", ends)) != 0;
    }
    json_decref(ends);
    free(label);
    return bad ? TBON_ENOMEM : 0;
}

json_t *st_tree_classes_json(const st_tree_t *t)
{
    json_t *a = json_array();
    if (a && cls_walk_classes(t, cls_json, a) < 0) {
        json_decref(a);
        a = NULL;
    }
    return a;
}

json_t *st_tree_json(const st_tree_t *t)
{
    return t ? json_node(t, t->root, 1) : NULL;
}
