/* st_ptree.c - call-prefix trees with task sets: building, merging, comparing
 * and the binary form. The merge filter (stat_merge.so) links this file
 * alone, so everything it needs lives here; queries and text outputs are in
 * st_ptree_out.c.
 *
 * The binary form, all numbers unsigned LEB128 (7 bits a byte, low first,
 * at most 5 bytes, no superfluous zero byte), the nodes in pre-order:
 *
 *   "STPT" version(1 byte)  node(root)
 *   node  = [flen frame]            (not for the root) frame: flen bytes, no NUL
 *           nranges range*          the task set
 *           nkids node*             children, frames strictly increasing
 *   range = lo hi-lo                the first range
 *         | lo-(prev hi)-2 hi-lo    the others: ranges are increasing and
 *                                   non-adjacent by construction
 *
 * A counts-only tree (st_tree_to_counts) is version 2: its round after the
 * version, and each node below the root has "count rep" (how many tasks,
 * the lowest of them) where a set would be; the root keeps its set:
 *
 *   "STPT" 2 round  root = nranges range* nkids node*
 *                   node = flen frame count rep nkids node*
 *
 * Every tree has one encoding (sets and children are canonical), so equal
 * trees give identical bytes. */
#include "st_ptree_int.h"

#include <tbon/common.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t st_magic[4] = { 'S', 'T', 'P', 'T' };

/* ---- task sets ---- */

static int rset_reserve(st_rset_t *s, size_t need)
{
    if (need <= s->cap)
        return 0;
    if (s->cap == 0 && need == 1) {
        s->r = &s->one;
        s->cap = 1;
        return 0;
    }
    if (need > SIZE_MAX / 2 / sizeof *s->r)
        return TBON_ENOMEM;
    size_t cap = s->cap ? 2 * s->cap : 2;
    while (cap < need)
        cap *= 2;
    int inl = s->r == &s->one;
    st_range_t *r = realloc(inl ? NULL : s->r, cap * sizeof *r);
    if (!r)
        return TBON_ENOMEM;
    if (inl)
        r[0] = s->one;
    s->r = r;
    s->cap = cap;
    return 0;
}

static void rset_release(st_rset_t *s)
{
    if (s->r != &s->one)
        free(s->r);
    s->r = NULL;
    s->n = s->cap = 0;
}

/* The index of the first range that t falls in, touches or precedes
 * (hi + 1 >= t), or s->n. */
static size_t rset_find(const st_rset_t *s, uint32_t t)
{
    size_t lo = 0, hi = s->n;
    /* Tasks mostly arrive in increasing order: check the end first. */
    if (s->n && (uint64_t)s->r[s->n - 1].hi + 1 < t)
        return s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)s->r[mid].hi + 1 < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int st_rset_has(const st_rset_t *s, uint32_t task)
{
    size_t i = rset_find(s, task);
    return i < s->n && s->r[i].lo <= task && task <= s->r[i].hi;
}

static int rset_add(st_rset_t *s, uint32_t t)
{
    size_t i = rset_find(s, t);

    if (i < s->n) {
        st_range_t *r = &s->r[i];
        if (r->lo <= t && t <= r->hi)
            return 0;
        if ((uint64_t)t == (uint64_t)r->hi + 1) {
            r->hi = t;
            /* t may close the gap to the next range. */
            if (i + 1 < s->n && (uint64_t)s->r[i + 1].lo == (uint64_t)t + 1) {
                r->hi = s->r[i + 1].hi;
                memmove(&s->r[i + 1], &s->r[i + 2], (s->n - i - 2) * sizeof *r);
                s->n--;
            }
            return 0;
        }
        /* Here t < r->lo, and the range before ends below t - 1. */
        if ((uint64_t)t + 1 == r->lo) {
            r->lo = t;
            return 0;
        }
    }
    if (rset_reserve(s, s->n + 1))
        return TBON_ENOMEM;
    memmove(&s->r[i + 1], &s->r[i], (s->n - i) * sizeof *s->r);
    s->r[i].lo = s->r[i].hi = t;
    s->n++;
    return 0;
}

/* 1 if a is a subset of b. A range of a must lie inside one range of b,
 * since b's ranges are not adjacent. */
static int rset_subset(const st_rset_t *a, const st_rset_t *b)
{
    size_t j = 0;
    for (size_t i = 0; i < a->n; i++) {
        while (j < b->n && b->r[j].hi < a->r[i].lo)
            j++;
        if (j == b->n || b->r[j].lo > a->r[i].lo || b->r[j].hi < a->r[i].hi)
            return 0;
    }
    return 1;
}

/* 1 if a and b have no task in common. */
static int rset_disjoint(const st_rset_t *a, const st_rset_t *b)
{
    size_t i = 0, j = 0;
    while (i < a->n && j < b->n) {
        if (a->r[i].hi < b->r[j].lo)
            i++;
        else if (b->r[j].hi < a->r[i].lo)
            j++;
        else
            return 0;
    }
    return 1;
}

/* d = d U s, built in tmp and copied back, or when d must grow, tmp's
 * buffer and d's change places: a whole merge allocates only when a set
 * grows past what it had. */
static int rset_union(st_rset_t *d, const st_rset_t *s, st_rset_t *tmp)
{
    if (s->n == 0 || rset_subset(s, d))
        return 0;
    if (d->n == 0) {
        if (rset_reserve(d, s->n))
            return TBON_ENOMEM;
        memcpy(d->r, s->r, s->n * sizeof *d->r);
        d->n = s->n;
        return 0;
    }
    if (rset_reserve(tmp, d->n + s->n))
        return TBON_ENOMEM;
    size_t i = 0, j = 0, k = 0;
    while (i < d->n || j < s->n) {
        st_range_t x;
        if (j == s->n || (i < d->n && d->r[i].lo <= s->r[j].lo))
            x = d->r[i++];
        else
            x = s->r[j++];
        if (k && (uint64_t)tmp->r[k - 1].hi + 1 >= x.lo) {
            if (x.hi > tmp->r[k - 1].hi)
                tmp->r[k - 1].hi = x.hi;
        } else {
            tmp->r[k++] = x;
        }
    }
    if (k <= d->cap) {
        memcpy(d->r, tmp->r, k * sizeof *d->r);
    } else {
        /* d->n and s->n are at least 1, so tmp's buffer (room for both)
         * is on the heap: d takes it, tmp takes d's old one unless that
         * was inline. */
        st_range_t *r = d->r;
        size_t cap = d->cap;
        d->r = tmp->r;
        d->cap = tmp->cap;
        tmp->r = r == &d->one ? NULL : r;
        tmp->cap = r == &d->one ? 0 : cap;
    }
    d->n = k;
    tmp->n = 0;
    return 0;
}

uint64_t st_ranges_count(const st_range_t *r, size_t n)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += (uint64_t)r[i].hi - r[i].lo + 1;
    return c;
}

/* ---- nodes ---- */

static st_node_t *node_new(const char *frame, size_t flen)
{
    st_node_t *nd = calloc(1, sizeof *nd + flen + 1);
    if (!nd)
        return NULL;
    if (flen)
        memcpy(nd->frame, frame, flen);
    nd->flen = flen;
    return nd;
}

/* Recursive: depth is at most ST_MAX_DEPTH, and the frames are small. */
static void node_free(st_node_t *nd)
{
    if (!nd)
        return;
    for (size_t i = 0; i < nd->nkids; i++)
        node_free(nd->kids[i]);
    if (nd->kids != &nd->kid1)
        free(nd->kids);
    rset_release(&nd->set);
    free(nd);
}

/* Bytewise order, a prefix first: strcmp's order for frames without NUL. */
static int frame_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c)
        return c;
    return (al > bl) - (al < bl);
}

/* The child of nd with this frame, or NULL with *pos where it would go. */
static st_node_t *kid_find(const st_node_t *nd, const char *f, size_t fl, size_t *pos)
{
    size_t lo = 0, hi = nd->nkids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const st_node_t *k = nd->kids[mid];
        int c = frame_cmp(k->frame, k->flen, f, fl);
        if (c == 0)
            return nd->kids[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *pos = lo;
    return NULL;
}

/* Room for need children. */
static int kids_reserve(st_node_t *nd, size_t need)
{
    if (need <= nd->kcap)
        return 0;
    if (nd->kcap == 0 && need == 1) {
        nd->kids = &nd->kid1;
        nd->kcap = 1;
        return 0;
    }
    if (need > SIZE_MAX / 2 / sizeof *nd->kids)
        return TBON_ENOMEM;
    size_t cap = nd->kcap ? 2 * nd->kcap : 2;
    while (cap < need)
        cap *= 2;
    int inl = nd->kids == &nd->kid1;
    st_node_t **k = realloc(inl ? NULL : nd->kids, cap * sizeof *k);
    if (!k)
        return TBON_ENOMEM;
    if (inl)
        k[0] = nd->kid1;
    nd->kids = k;
    nd->kcap = cap;
    return 0;
}

static int kid_insert(st_node_t *nd, size_t pos, st_node_t *kid)
{
    if (kids_reserve(nd, nd->nkids + 1))
        return TBON_ENOMEM;
    memmove(&nd->kids[pos + 1], &nd->kids[pos], (nd->nkids - pos) * sizeof *nd->kids);
    nd->kids[pos] = kid;
    nd->nkids++;
    return 0;
}

/* A deep copy of s, or NULL (nothing of it kept). *count grows by the
 * number of nodes copied. */
static st_node_t *node_copy(const st_node_t *s, size_t *count)
{
    st_node_t *d = node_new(s->frame, s->flen);
    if (!d)
        return NULL;
    d->count = s->count;
    d->rep = s->rep;
    if (s->set.n) {
        if (rset_reserve(&d->set, s->set.n))
            goto error;
        memcpy(d->set.r, s->set.r, s->set.n * sizeof *s->set.r);
        d->set.n = s->set.n;
    }
    if (s->nkids) {
        if (kids_reserve(d, s->nkids))
            goto error;
        for (size_t i = 0; i < s->nkids; i++) {
            if (!(d->kids[i] = node_copy(s->kids[i], count)))
                goto error;
            d->nkids++;
        }
    }
    (*count)++;
    return d;
error:
    node_free(d);
    return NULL;
}

/* ---- trees ---- */

st_tree_t *st_tree_new(void)
{
    st_tree_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (!(t->root = node_new("", 0))) {
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
    if (!t || (n && !frames) || n > ST_MAX_DEPTH || t->counts)
        return TBON_EINVAL;
    /* Check the whole stack first, so that a refused one changes nothing. */
    for (size_t i = 0; i < n; i++)
        if (!frames[i] || strnlen(frames[i], ST_MAX_FRAME + 1) > ST_MAX_FRAME)
            return TBON_EINVAL;

    /* Each node gets the task before its children, so that on ENOMEM the
     * tree still has every child's set inside its parent's. */
    st_node_t *nd = t->root;
    if (rset_add(&nd->set, task))
        return TBON_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        size_t fl = strlen(frames[i]), pos = 0;
        st_node_t *kid = kid_find(nd, frames[i], fl, &pos);
        if (!kid) {
            kid = node_new(frames[i], fl);
            if (!kid || rset_add(&kid->set, task) || kid_insert(nd, pos, kid)) {
                node_free(kid);
                return TBON_ENOMEM;
            }
            t->nnodes++;
        } else if (rset_add(&kid->set, task)) {
            return TBON_ENOMEM;
        }
        nd = kid;
    }
    return 0;
}

struct merge_ctx {
    st_rset_t tmp;      /* scratch for set unions */
    size_t added;       /* nodes copied from the source */
};

/* A counts-only node takes s's tasks (disjoint from d's: the caller
 * checked the roots). */
static void add_counts(st_node_t *d, const st_node_t *s)
{
    if (d->count == 0 || s->rep < d->rep)
        d->rep = s->rep;
    d->count += s->count;
}

/* d = d U s, then the same for their children: a walk of the two sorted
 * child arrays side by side, O(|d| + |s|) per node. New children are
 * merged into a fresh array in one go rather than inserted one by one. */
static int merge_node(st_node_t *d, const st_node_t *s, struct merge_ctx *m)
{
    /* (in a counts-only tree, sets are the root's only) */
    int rc = rset_union(&d->set, &s->set, &m->tmp);
    if (rc == 0)
        add_counts(d, s);
    if (rc)
        return rc;   /* d's children stay inside d's set: do not descend */
    if (s->nkids == 0)
        return 0;

    size_t missing = 0, i = 0, j = 0;
    while (j < s->nkids) {
        int c = i < d->nkids ? frame_cmp(d->kids[i]->frame, d->kids[i]->flen,
                                         s->kids[j]->frame, s->kids[j]->flen) : 1;
        if (c <= 0)
            i++;
        if (c >= 0)
            j++;
        if (c > 0)
            missing++;
    }

    st_node_t **nk = NULL;
    size_t ncap = d->nkids + missing;
    if (missing && !(nk = malloc(ncap * sizeof *nk)))
        rc = TBON_ENOMEM;   /* merge what is there, add nothing */
    size_t k = 0;
    i = j = 0;
    while (i < d->nkids || j < s->nkids) {
        int c;
        if (i == d->nkids)
            c = 1;
        else if (j == s->nkids)
            c = -1;
        else
            c = frame_cmp(d->kids[i]->frame, d->kids[i]->flen,
                          s->kids[j]->frame, s->kids[j]->flen);
        if (c < 0) {
            if (nk)
                nk[k++] = d->kids[i];
            i++;
        } else if (c == 0) {
            int r = merge_node(d->kids[i], s->kids[j], m);
            if (r)
                rc = r;
            if (nk)
                nk[k++] = d->kids[i];
            i++, j++;
        } else {
            if (nk) {
                size_t cnt = 0;
                st_node_t *cp = node_copy(s->kids[j], &cnt);
                if (cp) {
                    nk[k++] = cp;
                    m->added += cnt;
                } else {
                    rc = TBON_ENOMEM;
                }
            }
            j++;
        }
    }
    if (nk) {
        if (d->kids != &d->kid1)
            free(d->kids);
        d->kids = nk;
        d->nkids = k;
        d->kcap = ncap;
    }
    return rc;
}

int st_tree_merge(st_tree_t *dst, const st_tree_t *src)
{
    if (!dst || !src)
        return TBON_EINVAL;
    if (dst == src)
        return 0;
    if (src->counts && !dst->counts && dst->nnodes == 1 && dst->root->set.n == 0) {
        dst->counts = 1;        /* an empty tree takes the kind of the first */
        dst->round = src->round;
    }
    if (dst->counts != src->counts)
        return TBON_EINVAL;
    if (src->counts) {
        if (rset_subset(&src->root->set, &dst->root->set))
            return 0;           /* its tasks are in already, and the same */
        if (!rset_disjoint(&src->root->set, &dst->root->set))
            return ST_OVERLAP;
    }
    struct merge_ctx m = { { NULL, 0, 0, { 0, 0 } }, 0 };
    int rc = merge_node(dst->root, src->root, &m);
    dst->nnodes += m.added;
    rset_release(&m.tmp);
    return rc;
}

static int node_equal(const st_node_t *a, const st_node_t *b)
{
    if (a->flen != b->flen || memcmp(a->frame, b->frame, a->flen) != 0 ||
        a->set.n != b->set.n || a->nkids != b->nkids || a->count != b->count ||
        a->rep != b->rep)
        return 0;
    if (a->set.n && memcmp(a->set.r, b->set.r, a->set.n * sizeof *a->set.r) != 0)
        return 0;
    for (size_t i = 0; i < a->nkids; i++)
        if (!node_equal(a->kids[i], b->kids[i]))
            return 0;
    return 1;
}

int st_tree_equal(const st_tree_t *a, const st_tree_t *b)
{
    if (!a || !b)
        return a == b;
    return a->nnodes == b->nnodes && a->counts == b->counts && a->round == b->round &&
           node_equal(a->root, b->root);
}

/* Counts and representatives from the sets; the sets dropped below the root. */
static void node_to_counts(st_node_t *nd, int is_root)
{
    nd->count = st_ranges_count(nd->set.r, nd->set.n);
    nd->rep = nd->set.n ? nd->set.r[0].lo : 0;
    if (!is_root)
        rset_release(&nd->set);
    for (size_t i = 0; i < nd->nkids; i++)
        node_to_counts(nd->kids[i], 0);
}

int st_tree_to_counts(st_tree_t *t, uint32_t round)
{
    if (!t || t->counts)
        return TBON_EINVAL;
    node_to_counts(t->root, 1);
    t->counts = 1;
    t->round = round;
    return 0;
}

void st_tree_swap(st_tree_t *a, st_tree_t *b)
{
    st_tree_t x = *a;
    *a = *b;
    *b = x;
}

int st_tree_is_counts(const st_tree_t *t)
{
    return t && t->counts;
}

uint32_t st_tree_round(const st_tree_t *t)
{
    return t ? t->round : 0;
}

size_t st_tree_tasks(const st_tree_t *t, st_range_t **ranges, uint64_t *tasks_count)
{
    const st_rset_t *s = t ? &t->root->set : NULL;
    size_t n = s ? s->n : 0;

    if (tasks_count)
        *tasks_count = n ? st_ranges_count(s->r, n) : 0;
    if (!ranges)
        return n;
    *ranges = NULL;
    if (n) {
        if (!(*ranges = malloc(n * sizeof **ranges))) {
            if (tasks_count)
                *tasks_count = 0;
            return 0;
        }
        memcpy(*ranges, s->r, n * sizeof **ranges);
    }
    return n;
}

/* ---- encoding ---- */

struct wbuf {
    uint8_t *b;
    size_t n, cap;
    int err;
};

/* Room for n more bytes. */
static int wbuf_room(struct wbuf *w, size_t n)
{
    if (w->err)
        return 0;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->n + n)
            cap *= 2;
        uint8_t *b = realloc(w->b, cap);
        if (!b) {
            w->err = TBON_ENOMEM;
            return 0;
        }
        w->b = b;
        w->cap = cap;
    }
    return 1;
}

static void put_bytes(struct wbuf *w, const void *p, size_t n)
{
    if (n && wbuf_room(w, n)) {
        memcpy(w->b + w->n, p, n);
        w->n += n;
    }
}

static void put_num(struct wbuf *w, uint64_t v)
{
    if (!wbuf_room(w, 10))
        return;
    while (v >= 0x80) {
        w->b[w->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    w->b[w->n++] = (uint8_t)v;
}

static void enc_node(struct wbuf *w, const st_node_t *nd, int is_root, int counts)
{
    if (!is_root) {
        put_num(w, nd->flen);
        put_bytes(w, nd->frame, nd->flen);
    }
    if (counts && !is_root) {
        put_num(w, nd->count);
        put_num(w, nd->rep);
        goto kids;
    }
    put_num(w, nd->set.n);
    for (size_t k = 0; k < nd->set.n; k++) {
        const st_range_t *r = &nd->set.r[k];
        put_num(w, k ? (uint64_t)r->lo - nd->set.r[k - 1].hi - 2 : r->lo);
        put_num(w, (uint64_t)r->hi - r->lo);
    }
kids:
    put_num(w, nd->nkids);
    for (size_t i = 0; i < nd->nkids; i++)
        enc_node(w, nd->kids[i], 0, counts);
}

int st_tree_encode(const st_tree_t *t, uint8_t **buf, size_t *len)
{
    if (!t || !buf || !len)
        return TBON_EINVAL;
    struct wbuf w = { NULL, 0, 0, 0 };
    uint8_t version = t->counts ? ST_ENC_VERSION_COUNTS : ST_ENC_VERSION;
    put_bytes(&w, st_magic, sizeof st_magic);
    put_bytes(&w, &version, 1);
    if (t->counts)
        put_num(&w, t->round);
    enc_node(&w, t->root, 1, t->counts);
    if (w.err) {
        free(w.b);
        return w.err;
    }
    *buf = w.b;
    *len = w.n;
    return 0;
}

/* ---- decoding ---- */

struct rbuf {
    const uint8_t *b;
    size_t len, off;
    char *err;
    size_t errlen;
    size_t nnodes;
    int counts;                 /* version 2 */
    const st_node_t *root;      /* its set: what a counts node's rep is in */
};

static void fail(struct rbuf *r, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct rbuf *r, size_t at, const char *fmt, ...)
{
    if (!r->err || r->errlen == 0)
        return;
    int n = snprintf(r->err, r->errlen, "at byte %zu: ", at);
    if (n < 0 || (size_t)n >= r->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* One number: 0, or -1 after fail() naming what it is. */
static int get_num(struct rbuf *r, const char *what, uint64_t max, uint64_t *v)
{
    size_t at = r->off;
    uint64_t x = 0;
    for (unsigned shift = 0;; shift += 7) {
        if (shift > 28) {
            fail(r, at, "%s: a number of more than 5 bytes", what);
            return -1;
        }
        if (r->off >= r->len) {
            fail(r, at, "%s: truncated (the data ends inside it)", what);
            return -1;
        }
        uint8_t c = r->b[r->off++];
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            if (c == 0 && shift) {
                fail(r, at, "%s: superfluous zero byte at the end of a number", what);
                return -1;
            }
            break;
        }
    }
    if (x > max) {
        fail(r, at, "%s %llu exceeds the limit %llu", what, (unsigned long long)x,
             (unsigned long long)max);
        return -1;
    }
    *v = x;
    return 0;
}

static size_t left(const struct rbuf *r)
{
    return r->len - r->off;
}

/* The smallest encoded child: empty frame, one one-task range, no children. */
#define ST_MIN_NODE_BYTES 5
/* ... in a counts-only tree: empty frame, count, rep, no children. */
#define ST_MIN_COUNTS_NODE_BYTES 4

/* A counts-only node's "count rep": at least one task, no more than its
 * parent has, the lowest of them one of the tree's and not below the
 * parent's lowest. 0, or -1 after fail(). */
static int dec_counts(struct rbuf *r, st_node_t *nd, const st_node_t *parent)
{
    size_t at = r->off;
    uint64_t c, rep;
    if (get_num(r, "task count", UINT32_MAX + 1ull, &c) ||
        get_num(r, "representative", UINT32_MAX, &rep))
        return -1;
    if (c == 0 || c > parent->count) {
        fail(r, at, "a node of %llu tasks below one of %llu", (unsigned long long)c,
             (unsigned long long)parent->count);
        return -1;
    }
    if (rep < parent->rep || !st_rset_has(&r->root->set, (uint32_t)rep)) {
        fail(r, at, "representative %llu is not one of its parent's tasks",
             (unsigned long long)rep);
        return -1;
    }
    nd->count = c;
    nd->rep = (uint32_t)rep;
    return 0;
}

/* A node's task set ("nranges range*"); root: the root's, which may be
 * empty. 0, or -1 after fail(). */
static int dec_set(struct rbuf *r, st_node_t *nd, size_t set_at, int root)
{
    uint64_t v;
    if (get_num(r, "range count", UINT32_MAX, &v))
        return -1;
    if (v > left(r) / 2) {
        fail(r, set_at, "%llu ranges but only %zu bytes left", (unsigned long long)v, left(r));
        return -1;
    }
    if (v == 0 && !root) {
        fail(r, set_at, "a node below the root with no tasks");
        return -1;
    }
    if (rset_reserve(&nd->set, (size_t)v)) {
        fail(r, set_at, "out of memory");
        return -1;
    }
    for (size_t k = 0, n = (size_t)v; k < n; k++) {
        size_t rat = r->off;
        uint64_t a, b;
        if (get_num(r, k ? "range gap" : "range start", UINT32_MAX, &a) ||
            get_num(r, "range length", UINT32_MAX, &b))
            return -1;
        uint64_t lo = k ? (uint64_t)nd->set.r[k - 1].hi + 2 + a : a;
        if (lo + b > UINT32_MAX) {
            fail(r, rat, "range %llu-%llu goes past task %lu", (unsigned long long)lo,
                 (unsigned long long)(lo + b), (unsigned long)UINT32_MAX);
            return -1;
        }
        nd->set.r[k].lo = (uint32_t)lo;
        nd->set.r[k].hi = (uint32_t)(lo + b);
        nd->set.n++;
    }
    return 0;
}

/* Reads one node and its subtree; NULL after fail(). parent: NULL for the
 * root; prev: the previous sibling, for the order. */
static st_node_t *dec_node(struct rbuf *r, const st_node_t *parent, const st_node_t *prev,
                           unsigned depth)
{
    size_t at = r->off;
    uint64_t v;
    st_node_t *nd;

    if (!parent) {
        nd = node_new("", 0);
    } else {
        if (depth > ST_MAX_DEPTH) {
            fail(r, at, "nodes nested deeper than %d frames", ST_MAX_DEPTH);
            return NULL;
        }
        if (get_num(r, "frame length", ST_MAX_FRAME, &v))
            return NULL;
        if (v > left(r)) {
            fail(r, at, "frame length %llu but only %zu bytes left", (unsigned long long)v,
                 left(r));
            return NULL;
        }
        const char *f = (const char *)r->b + r->off;
        const char *nul = memchr(f, '\0', (size_t)v);
        if (nul) {
            fail(r, r->off + (size_t)(nul - f), "NUL byte inside a frame");
            return NULL;
        }
        if (prev && frame_cmp(prev->frame, prev->flen, f, (size_t)v) >= 0) {
            fail(r, at, "sibling frames not in strictly increasing order");
            return NULL;
        }
        nd = node_new(f, (size_t)v);
        r->off += (size_t)v;
    }
    if (!nd) {
        fail(r, at, "out of memory");
        return NULL;
    }

    size_t set_at = r->off;
    if (r->counts && parent) {
        if (dec_counts(r, nd, parent))
            goto error;
        goto kids;
    }
    if (dec_set(r, nd, set_at, !parent))
        goto error;
    if (parent && !rset_subset(&nd->set, &parent->set)) {
        fail(r, set_at, "the tasks of a node are not a subset of its parent's");
        goto error;
    }
    if (!parent) {
        nd->count = st_ranges_count(nd->set.r, nd->set.n);
        nd->rep = nd->set.n ? nd->set.r[0].lo : 0;
        r->root = nd;
        if (!r->counts)
            nd->count = nd->rep = 0;   /* as a full tree's nodes have them */
    }

kids:;
    size_t kids_at = r->off;
    if (get_num(r, "child count", UINT32_MAX, &v))
        goto error;
    if (v > left(r) / (r->counts ? ST_MIN_COUNTS_NODE_BYTES : ST_MIN_NODE_BYTES)) {
        fail(r, kids_at, "%llu children but only %zu bytes left", (unsigned long long)v,
             left(r));
        goto error;
    }
    if (kids_reserve(nd, (size_t)v)) {
        fail(r, kids_at, "out of memory");
        goto error;
    }
    for (size_t k = 0, n = (size_t)v; k < n; k++) {
        st_node_t *kid = dec_node(r, nd, k ? nd->kids[k - 1] : NULL, depth + 1);
        if (!kid)
            goto error;
        nd->kids[nd->nkids++] = kid;
    }
    r->nnodes++;
    return nd;
error:
    node_free(nd);
    return NULL;
}

st_tree_t *st_tree_decode(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    struct rbuf r = { buf, len, 0, err, errlen, 0, 0, NULL };

    if (err && errlen)
        err[0] = '\0';
    if (!buf && len) {
        fail(&r, 0, "no data");
        return NULL;
    }
    for (size_t i = 0; i < sizeof st_magic; i++) {
        if (i >= len) {
            fail(&r, i, "truncated header (%zu bytes)", len);
            return NULL;
        }
        if (buf[i] != st_magic[i]) {
            fail(&r, i, "bad magic: not a tbon_stat prefix tree");
            return NULL;
        }
    }
    if (len < 5) {
        fail(&r, 4, "truncated header (%zu bytes)", len);
        return NULL;
    }
    if (buf[4] != ST_ENC_VERSION && buf[4] != ST_ENC_VERSION_COUNTS) {
        fail(&r, 4, "version %u, this code reads versions %d and %d", buf[4], ST_ENC_VERSION,
             ST_ENC_VERSION_COUNTS);
        return NULL;
    }
    r.off = 5;
    r.counts = buf[4] == ST_ENC_VERSION_COUNTS;
    uint64_t round = 0;
    if (r.counts && get_num(&r, "round", UINT32_MAX, &round))
        return NULL;

    st_tree_t *t = calloc(1, sizeof *t);
    if (!t) {
        fail(&r, 0, "out of memory");
        return NULL;
    }
    if (!(t->root = dec_node(&r, NULL, NULL, 0))) {
        free(t);
        return NULL;
    }
    if (r.off != len) {
        fail(&r, r.off, "%zu bytes after the end of the tree", len - r.off);
        st_tree_free(t);
        return NULL;
    }
    t->nnodes = r.nnodes;
    t->counts = r.counts;
    t->round = (uint32_t)round;
    return t;
}
