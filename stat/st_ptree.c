/* st_ptree.c - call-prefix trees with task sets: build, merge, compare,
 * encode and decode (the part the stat_merge plug-in carries too; the
 * outputs are in st_ptree_out.c) */
#include "st_ptree.h"
#include "st_ptree_int.h"

#include <tbon/common.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "STP1"
#define MAX_FRAME 4096          /* bytes of one frame name */
#define MAX_DEPTH 4096          /* nodes on a path */
#define MAX_NODES (1u << 24)

/* ---- task sets ---- */

static int set_reserve(st_node_t *n, size_t need)
{
    if (need <= n->cr)
        return 0;
    size_t c = n->cr ? n->cr * 2 : 4;
    while (c < need)
        c *= 2;
    st_range_t *r = realloc(n->r, c * sizeof *r);
    if (!r)
        return TBON_ENOMEM;
    n->r = r;
    n->cr = c;
    return 0;
}

/* Add task x to n's set. */
static int set_add(st_node_t *n, uint32_t x)
{
    size_t lo = 0, hi = n->nr;          /* first range with hi >= x */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (n->r[mid].hi < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n->nr && n->r[lo].lo <= x)
        return 0;                                   /* already in */
    int join_prev = lo > 0 && n->r[lo - 1].hi + 1 == x;
    int join_next = lo < n->nr && x != UINT32_MAX && n->r[lo].lo == x + 1;
    if (join_prev && join_next) {
        n->r[lo - 1].hi = n->r[lo].hi;
        memmove(&n->r[lo], &n->r[lo + 1], (n->nr - lo - 1) * sizeof *n->r);
        n->nr--;
    } else if (join_prev) {
        n->r[lo - 1].hi = x;
    } else if (join_next) {
        n->r[lo].lo = x;
    } else {
        if (set_reserve(n, n->nr + 1))
            return TBON_ENOMEM;
        memmove(&n->r[lo + 1], &n->r[lo], (n->nr - lo) * sizeof *n->r);
        n->r[lo] = (st_range_t){ x, x };
        n->nr++;
    }
    return 0;
}

/* n's set |= the ranges b[0..nb). */
static int set_union(st_node_t *n, const st_range_t *b, size_t nb)
{
    if (nb == 0)
        return 0;
    st_range_t *out = malloc((n->nr + nb) * sizeof *out);
    if (!out)
        return TBON_ENOMEM;
    size_t i = 0, j = 0, k = 0;
    while (i < n->nr || j < nb) {
        st_range_t x = j >= nb || (i < n->nr && n->r[i].lo <= b[j].lo) ? n->r[i++] : b[j++];
        if (k > 0 && (out[k - 1].hi == UINT32_MAX || x.lo <= out[k - 1].hi + 1)) {
            if (x.hi > out[k - 1].hi)
                out[k - 1].hi = x.hi;
        } else {
            out[k++] = x;
        }
    }
    free(n->r);
    n->r = out;
    n->nr = k;
    n->cr = n->nr + nb;
    return 0;
}

uint64_t st_set_count(const st_range_t *r, size_t nr)
{
    uint64_t c = 0;
    for (size_t i = 0; i < nr; i++)
        c += (uint64_t)r[i].hi - r[i].lo + 1;
    return c;
}

int st_set_has(const st_range_t *r, size_t nr, uint32_t x)
{
    size_t lo = 0, hi = nr;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].hi < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nr && r[lo].lo <= x;
}

/* 1 if every range of a[] is inside the set b[]. */
static int set_within(const st_range_t *a, size_t na, const st_range_t *b, size_t nb)
{
    size_t j = 0;
    for (size_t i = 0; i < na; i++) {
        while (j < nb && b[j].hi < a[i].lo)
            j++;
        if (j == nb || b[j].lo > a[i].lo || b[j].hi < a[i].hi)
            return 0;
    }
    return 1;
}

/* ---- nodes ---- */

static st_node_t *node_new(const char *frame, size_t len, st_node_t *parent)
{
    st_node_t *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->parent = parent;
    if (frame) {
        n->frame = malloc(len + 1);
        if (!n->frame) {
            free(n);
            return NULL;
        }
        memcpy(n->frame, frame, len);
        n->frame[len] = '\0';
    }
    return n;
}

static void node_free(st_node_t *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nk; i++)
        node_free(n->kid[i]);
    free(n->kid);
    free(n->r);
    free(n->frame);
    free(n);
}

/* The index of frame among n's children, or where it would go (*found 0). */
static size_t kid_find(const st_node_t *n, const char *frame, int *found)
{
    size_t lo = 0, hi = n->nk;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(n->kid[mid]->frame, frame);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

/* n's child named frame, made if needed; NULL when out of memory. */
static st_node_t *kid_get(st_tree_t *t, st_node_t *n, const char *frame)
{
    int found;
    size_t i = kid_find(n, frame, &found);
    if (found)
        return n->kid[i];
    if (n->nk == n->ck) {
        size_t c = n->ck ? n->ck * 2 : 2;
        st_node_t **k = realloc(n->kid, c * sizeof *k);
        if (!k)
            return NULL;
        n->kid = k;
        n->ck = c;
    }
    st_node_t *x = node_new(frame, strlen(frame), n);
    if (!x)
        return NULL;
    memmove(&n->kid[i + 1], &n->kid[i], (n->nk - i) * sizeof *n->kid);
    n->kid[i] = x;
    n->nk++;
    t->nnodes++;
    return x;
}

st_tree_t *st_tree_new(void)
{
    st_tree_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->root = node_new(NULL, 0, NULL);
    if (!t->root) {
        free(t);
        return NULL;
    }
    t->nnodes = 1;
    return t;
}

void st_tree_free(st_tree_t *t)
{
    if (!t)
        return;
    node_free(t->root);
    free(t);
}

size_t st_tree_size(const st_tree_t *t)
{
    return t ? t->nnodes : 0;
}

int st_tree_add(st_tree_t *t, const char *const *frames, size_t n, uint32_t task)
{
    if (!t || (n && !frames))
        return TBON_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!frames[i] || !frames[i][0] || strlen(frames[i]) > MAX_FRAME)
            return TBON_EINVAL;
    st_node_t *cur = t->root;
    if (set_add(cur, task))
        return TBON_ENOMEM;
    for (size_t i = 0; i < n && i < MAX_DEPTH; i++) {
        cur = kid_get(t, cur, frames[i]);
        if (!cur || set_add(cur, task))
            return TBON_ENOMEM;
    }
    return 0;
}

static int merge_node(st_tree_t *dt, st_node_t *d, const st_node_t *s)
{
    if (set_union(d, s->r, s->nr))
        return TBON_ENOMEM;
    for (size_t i = 0; i < s->nk; i++) {
        st_node_t *k = kid_get(dt, d, s->kid[i]->frame);
        if (!k || merge_node(dt, k, s->kid[i]))
            return TBON_ENOMEM;
    }
    return 0;
}

int st_tree_merge(st_tree_t *dst, const st_tree_t *src)
{
    if (!dst || !src)
        return TBON_EINVAL;
    return merge_node(dst, dst->root, src->root);
}

static int node_equal(const st_node_t *a, const st_node_t *b)
{
    if (a->nr != b->nr || a->nk != b->nk ||
        (a->nr && memcmp(a->r, b->r, a->nr * sizeof *a->r) != 0))
        return 0;
    for (size_t i = 0; i < a->nk; i++)
        if (strcmp(a->kid[i]->frame, b->kid[i]->frame) != 0 ||
            !node_equal(a->kid[i], b->kid[i]))
            return 0;
    return 1;
}

int st_tree_equal(const st_tree_t *a, const st_tree_t *b)
{
    return a && b && node_equal(a->root, b->root);
}

size_t st_tree_tasks(const st_tree_t *t, st_range_t **ranges, uint64_t *tasks_count)
{
    *ranges = NULL;
    if (tasks_count)
        *tasks_count = t ? st_set_count(t->root->r, t->root->nr) : 0;
    if (!t || !t->root->nr)
        return 0;
    *ranges = malloc(t->root->nr * sizeof **ranges);
    if (!*ranges)
        return 0;
    memcpy(*ranges, t->root->r, t->root->nr * sizeof **ranges);
    return t->root->nr;
}

static void deepest(const st_node_t *n, uint32_t task, size_t depth, const st_node_t **best,
                    size_t *best_depth)
{
    if (depth > *best_depth) {
        *best = n;
        *best_depth = depth;
    }
    for (size_t i = 0; i < n->nk; i++)
        if (st_set_has(n->kid[i]->r, n->kid[i]->nr, task))
            deepest(n->kid[i], task, depth + 1, best, best_depth);
}

size_t st_tree_path(const st_tree_t *t, uint32_t task, const char ***frames)
{
    *frames = NULL;
    if (!t || !st_set_has(t->root->r, t->root->nr, task))
        return 0;
    const st_node_t *best = t->root;
    size_t d = 0;
    deepest(t->root, task, 0, &best, &d);
    if (d == 0)
        return 0;
    *frames = malloc(d * sizeof **frames);
    if (!*frames)
        return 0;
    for (size_t i = d; i-- > 0; best = best->parent)
        (*frames)[i] = best->frame;
    return d;
}

/* ---- the binary form ----
 * "STP1", then the nodes in pre-order, each: u32 frame length, the frame
 * (none for the root, at least one byte for every other node), u32 number
 * of ranges, the ranges (u32 lo, u32 hi), u32 number of children. All
 * little-endian. Siblings come in strictly increasing frame order, ranges
 * strictly increasing and not adjacent, every set inside its parent's. */

struct wbuf { uint8_t *b; size_t n, cap; int oom; };

static void put(struct wbuf *w, const void *p, size_t len)
{
    if (w->oom || len == 0)
        return;
    if (w->n + len > w->cap) {
        size_t c = w->cap ? w->cap * 2 : 256;
        while (c < w->n + len)
            c *= 2;
        uint8_t *nb = realloc(w->b, c);
        if (!nb) {
            w->oom = 1;
            return;
        }
        w->b = nb;
        w->cap = c;
    }
    memcpy(w->b + w->n, p, len);
    w->n += len;
}

static void put32(struct wbuf *w, uint32_t v)
{
    uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    put(w, b, 4);
}

static void enc_node(struct wbuf *w, const st_node_t *n)
{
    size_t fl = n->frame ? strlen(n->frame) : 0;
    put32(w, (uint32_t)fl);
    put(w, n->frame, fl);
    put32(w, (uint32_t)n->nr);
    for (size_t i = 0; i < n->nr; i++) {
        put32(w, n->r[i].lo);
        put32(w, n->r[i].hi);
    }
    put32(w, (uint32_t)n->nk);
    for (size_t i = 0; i < n->nk; i++)
        enc_node(w, n->kid[i]);
}

int st_tree_encode(const st_tree_t *t, uint8_t **buf, size_t *len)
{
    struct wbuf w = { 0 };
    put(&w, MAGIC, 4);
    enc_node(&w, t->root);
    if (w.oom) {
        free(w.b);
        return TBON_ENOMEM;
    }
    *buf = w.b;
    *len = w.n;
    return 0;
}

struct rbuf {
    const uint8_t *b;
    size_t n, off;
    char *err;
    size_t errlen;
    int failed;
    size_t nodes;
};

static void rfail(struct rbuf *r, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void rfail(struct rbuf *r, size_t at, const char *fmt, ...)
{
    if (r->failed)
        return;
    r->failed = 1;
    if (!r->err || !r->errlen)
        return;
    int k = snprintf(r->err, r->errlen, "at byte %zu: ", at);
    if (k >= 0 && (size_t)k < r->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err + k, r->errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
}

static int get32(struct rbuf *r, uint32_t *v, const char *what)
{
    if (r->n - r->off < 4) {
        rfail(r, r->off, "the tree ends inside %s", what);
        return -1;
    }
    const uint8_t *p = r->b + r->off;
    *v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    r->off += 4;
    return 0;
}

/* Decode one node into n (whose frame the caller set), below parent (NULL
 * for the root). */
static int dec_node(struct rbuf *r, st_tree_t *t, st_node_t *n, const st_node_t *parent,
                    size_t depth)
{
    uint32_t nr, nk;
    size_t at = r->off;
    if (get32(r, &nr, "a range count"))
        return -1;
    if (nr > (r->n - r->off) / 8) {
        rfail(r, at, "%u ranges, more than the %zu bytes left hold", nr, r->n - r->off);
        return -1;
    }
    if (nr) {
        n->r = malloc(nr * sizeof *n->r);
        if (!n->r) {
            rfail(r, at, "out of memory");
            return -1;
        }
        n->cr = nr;
    }
    for (uint32_t i = 0; i < nr; i++) {
        size_t ra = r->off;
        st_range_t x;
        get32(r, &x.lo, "a range");
        get32(r, &x.hi, "a range");
        if (x.lo > x.hi) {
            rfail(r, ra, "range %u-%u runs backwards", x.lo, x.hi);
            return -1;
        }
        if (i > 0 && (n->r[i - 1].hi == UINT32_MAX || x.lo <= n->r[i - 1].hi + 1)) {
            rfail(r, ra, "range %u-%u overlaps or touches the one before (%u-%u)", x.lo, x.hi,
                  n->r[i - 1].lo, n->r[i - 1].hi);
            return -1;
        }
        n->r[n->nr++] = x;
    }
    if (parent && !set_within(n->r, n->nr, parent->r, parent->nr)) {
        rfail(r, at, "the tasks of frame \"%.64s\" are not all in its caller's", n->frame);
        return -1;
    }
    at = r->off;
    if (get32(r, &nk, "a child count"))
        return -1;
    if (nk > (r->n - r->off) / 12) {
        rfail(r, at, "%u children, more than the %zu bytes left hold", nk, r->n - r->off);
        return -1;
    }
    if (nk && depth + 1 >= MAX_DEPTH) {
        rfail(r, at, "paths deeper than %d frames", MAX_DEPTH);
        return -1;
    }
    if (nk) {
        n->kid = calloc(nk, sizeof *n->kid);
        if (!n->kid) {
            rfail(r, at, "out of memory");
            return -1;
        }
        n->ck = nk;
    }
    for (uint32_t i = 0; i < nk; i++) {
        size_t fa = r->off;
        uint32_t fl;
        if (get32(r, &fl, "a frame's length"))
            return -1;
        if (fl == 0 || fl > MAX_FRAME) {
            rfail(r, fa, "a frame of %u bytes (1 to %d)", fl, MAX_FRAME);
            return -1;
        }
        if (fl > r->n - r->off) {
            rfail(r, fa, "a frame of %u bytes, %zu left", fl, r->n - r->off);
            return -1;
        }
        if (memchr(r->b + r->off, 0, fl)) {
            rfail(r, fa, "a frame with a NUL byte");
            return -1;
        }
        if (++r->nodes > MAX_NODES) {
            rfail(r, fa, "more than %u nodes", MAX_NODES);
            return -1;
        }
        st_node_t *k = node_new((const char *)r->b + r->off, fl, n);
        if (!k) {
            rfail(r, fa, "out of memory");
            return -1;
        }
        r->off += fl;
        n->kid[n->nk++] = k;
        t->nnodes++;
        if (i > 0 && strcmp(n->kid[i - 1]->frame, k->frame) >= 0) {
            rfail(r, fa, "frame \"%.64s\" out of order after \"%.64s\"", k->frame,
                  n->kid[i - 1]->frame);
            return -1;
        }
        if (dec_node(r, t, k, n, depth + 1))
            return -1;
    }
    return 0;
}

st_tree_t *st_tree_decode(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    struct rbuf r = { buf, len, 0, err, errlen, 0, 1 };
    if (!buf || len < 4 || memcmp(buf, MAGIC, 4) != 0) {
        rfail(&r, 0, "not a tbon_stat tree (no \"%s\" header)", MAGIC);
        return NULL;
    }
    r.off = 4;
    uint32_t fl;
    if (get32(&r, &fl, "the root"))
        return NULL;
    if (fl != 0) {
        rfail(&r, 4, "the root has a frame (%u bytes)", fl);
        return NULL;
    }
    st_tree_t *t = st_tree_new();
    if (!t) {
        rfail(&r, 0, "out of memory");
        return NULL;
    }
    if (dec_node(&r, t, t->root, NULL, 0) == 0 && r.off != len)
        rfail(&r, r.off, "%zu bytes after the tree", len - r.off);
    if (r.failed) {
        st_tree_free(t);
        return NULL;
    }
    return t;
}

size_t st_tree_label(const st_range_t *r, size_t nr, char *out, size_t cap)
{
    char tmp[32];
    size_t need = (size_t)snprintf(tmp, sizeof tmp, "%llu:[",
                                   (unsigned long long)st_set_count(r, nr));
    if (cap)
        snprintf(out, cap, "%s", tmp);
    for (size_t i = 0; i < nr; i++) {
        int k = r[i].lo == r[i].hi ? snprintf(tmp, sizeof tmp, "%s%u", i ? "," : "", r[i].lo)
                                   : snprintf(tmp, sizeof tmp, "%s%u-%u", i ? "," : "",
                                              r[i].lo, r[i].hi);
        if (need < cap)
            snprintf(out + need, cap - need, "%s", tmp);
        need += (size_t)k;
    }
    if (need < cap)
        snprintf(out + need, cap - need, "]");
    return need + 1;            /* the length, without the NUL (as snprintf) */
}
