/* topology_text.c - the MRNet text topology format: parser and writer.
 *
 *   # a comment
 *   fe:0 => node1:0 node2:0 ;
 *   node1:0 => node1:1 node1:2 ;
 *
 * The parser first reads every statement into a graph of the names it meets
 * (in order of first appearance), checking syntax and parent uniqueness as it
 * goes, then checks the whole graph (cycles, roots), then numbers the nodes
 * breadth-first from the first statement's parent. Every error names the file,
 * line and column (1-based, columns count bytes) of the offending token.
 */
#include "topo/topology.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "topo/topology_util.h"

#define NONE UINT32_MAX

enum { T_WORD, T_COLON, T_ARROW, T_SEMI, T_EOF, T_BAD };

typedef struct tok {
    int         kind;
    const char *s;
    size_t      len;
    uint32_t    line, col;
} tok_t;

typedef struct tnode {        /* a name as the parser meets it */
    uint32_t host, id;
    uint32_t parent;          /* parser index of its parent, or NONE */
    uint32_t stmt;            /* its statement, or NONE */
    uint32_t cline, ccol;     /* where it is listed as a child */
} tnode_t;

typedef struct stmt {
    uint32_t node, line, col; /* the parent and where it stands */
    uint32_t first, count;    /* its children: kids[first .. first + count) */
} stmt_t;

typedef struct parser {
    const char    *name;
    const char    *p, *end;
    uint32_t       line, col;
    tb_topology_t *t;
    tbon_error_t  *err;
    uint32_t       max_nodes;
    tnode_t       *nodes;
    uint32_t       nn, ncap;
    stmt_t        *stmts;
    uint32_t       ns, scap;
    uint32_t      *kids;
    uint32_t       nk, kcap;
    tb_u64map_t    map;      /* (host, id) -> parser index */
    char           names[4][96]; /* scratch for nm() */
    unsigned       nmk;
    const char    *last_s;       /* the host met last, and its index */
    size_t         last_len;
    uint32_t       last_host;
} parser_t;

/* Fill err with "NAME:LINE:COL: message"; returns TBON_ETOPOLOGY. */
__attribute__((format(printf, 4, 5)))
static int perr(parser_t *P, uint32_t line, uint32_t col, const char *fmt, ...)
{
    char msg[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tb_error_set(P->err, TBON_ETOPOLOGY, "%s:%u:%u: %s", P->name, line, col, msg);
}

static int oom(parser_t *P)
{
    return tb_error_set(P->err, TBON_ENOMEM, "%s: out of memory while parsing the topology",
                        P->name);
}

/* `"host:id"` for messages, long host names shortened. Rotates among four
 * buffers so that one message can name up to four nodes. */
static const char *nm(parser_t *P, uint32_t i)
{
    char *b = P->names[P->nmk++ % 4];
    const char *h = tb_topology_host_name(P->t, P->nodes[i].host);
    if (strlen(h) > 60)
        snprintf(b, sizeof P->names[0], "\"%.57s...:%u\"", h, P->nodes[i].id);
    else
        snprintf(b, sizeof P->names[0], "\"%s:%u\"", h, P->nodes[i].id);
    return b;
}

static bool hostchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_';
}

static bool alnum(unsigned char c)
{
    return hostchar(c) && c != '-' && c != '.' && c != '_';
}

static void next(parser_t *P, tok_t *k)
{
    while (P->p < P->end) {
        char c = *P->p;
        if (c == '\n') {
            P->line++;
            P->col = 1;
            P->p++;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            P->col++;
            P->p++;
        } else if (c == '#') {
            while (P->p < P->end && *P->p != '\n')
                P->p++;
        } else {
            break;
        }
    }
    k->line = P->line;
    k->col = P->col;
    k->s = P->p;
    k->len = 1;
    if (P->p == P->end) {
        k->kind = T_EOF;
        k->len = 0;
    } else if (alnum((unsigned char)*P->p)) {
        const char *q = P->p;
        while (q < P->end && hostchar((unsigned char)*q))
            q++;
        k->kind = T_WORD;
        k->len = (size_t)(q - P->p);
    } else if (*P->p == ':') {
        k->kind = T_COLON;
    } else if (*P->p == ';') {
        k->kind = T_SEMI;
    } else if (*P->p == '=' && P->p + 1 < P->end && P->p[1] == '>') {
        k->kind = T_ARROW;
        k->len = 2;
    } else {
        k->kind = T_BAD;
    }
    P->p += k->len;
    P->col += (uint32_t)k->len;
}

/* "expected WHAT but found X", or "unexpected character" for a stray byte. */
static int expect_fail(parser_t *P, const tok_t *k, const char *what)
{
    unsigned char c = (unsigned char)(k->len ? k->s[0] : 0);
    switch (k->kind) {
    case T_EOF:
        return perr(P, k->line, k->col, "expected %s but reached the end of the file", what);
    case T_BAD:
        if (c > 0x20 && c < 0x7f)
            return perr(P, k->line, k->col, "unexpected character '%c' where %s was expected",
                        c, what);
        return perr(P, k->line, k->col, "unexpected byte 0x%02x where %s was expected", c, what);
    case T_WORD:
        if (k->len > 40)
            return perr(P, k->line, k->col, "expected %s but found \"%.37s...\"", what, k->s);
        return perr(P, k->line, k->col, "expected %s but found \"%.*s\"", what, (int)k->len,
                    k->s);
    default:
        return perr(P, k->line, k->col, "expected %s but found '%.*s'", what, (int)k->len, k->s);
    }
}

/* Read host ':' id starting at word k; *idx gets the name's parser index. */
static int parse_node(parser_t *P, const tok_t *k, uint32_t *idx)
{
    char what[128];
    if (k->len > TB_TOPOLOGY_MAX_HOST)
        return perr(P, k->line, k->col, "host name \"%.32s...\" is too long (%zu characters, "
                    "at most %u)", k->s, k->len, TB_TOPOLOGY_MAX_HOST);
    int hl = k->len > 60 ? 60 : (int)k->len;
    tok_t c, n;
    next(P, &c);
    if (c.kind != T_COLON) {
        snprintf(what, sizeof what, "':' after the host \"%.*s\"", hl, k->s);
        return expect_fail(P, &c, what);
    }
    next(P, &n);
    bool digits = n.kind == T_WORD;
    for (size_t i = 0; digits && i < n.len; i++)
        digits = n.s[i] >= '0' && n.s[i] <= '9';
    if (!digits) {
        snprintf(what, sizeof what, "a decimal id after \"%.*s:\"", hl, k->s);
        return expect_fail(P, &n, what);
    }
    uint64_t id = 0;
    for (size_t i = 0; i < n.len && id <= TB_TOPOLOGY_MAX_ID; i++)
        id = id * 10 + (uint64_t)(n.s[i] - '0');
    if (id > TB_TOPOLOGY_MAX_ID)
        return perr(P, n.line, n.col, "id %.*s%s of host \"%.*s\" is too large (at most %u)",
                    n.len > 24 ? 21 : (int)n.len, n.s, n.len > 24 ? "..." : "", hl, k->s,
                    TB_TOPOLOGY_MAX_ID);
    /* Consecutive names are mostly on one host: skip the host table then. */
    uint32_t h = P->last_host;
    if (h == UINT32_MAX || k->len != P->last_len || memcmp(k->s, P->last_s, k->len) != 0) {
        if (tb_topology_intern_host(P->t, k->s, k->len, &h) != 0)
            return oom(P);
        P->last_host = h;
        P->last_s = k->s;
        P->last_len = k->len;
    }
    uint32_t v = tb_u64map_get(&P->map, (uint64_t)h << 32 | id);
    if (v == UINT32_MAX) {
        if (P->nn >= P->max_nodes)
            return perr(P, k->line, k->col, "too many nodes: \"%.*s:%u\" would be node %u "
                        "(at most %u)", hl, k->s, (uint32_t)id, P->nn + 1, P->max_nodes);
        tnode_t *a = tb_grow(P->nodes, P->nn, &P->ncap, sizeof *a);
        if (!a)
            return oom(P);
        P->nodes = a;
        v = P->nn;
        if (tb_u64map_put(&P->map, (uint64_t)h << 32 | id, v) != v)
            return oom(P);
        P->nodes[P->nn++] = (tnode_t){ h, (uint32_t)id, NONE, NONE, 0, 0 };
    }
    *idx = v;
    return 0;
}

static int add_kid(parser_t *P, uint32_t c)
{
    uint32_t *a = tb_grow(P->kids, P->nk, &P->kcap, sizeof *a);
    if (!a)
        return oom(P);
    P->kids = a;
    P->kids[P->nk++] = c;
    return 0;
}

/* One statement, starting at word k (its parent's host). */
static int parse_statement(parser_t *P, const tok_t *k)
{
    uint32_t p, c;
    int rc = parse_node(P, k, &p);
    if (rc)
        return rc;
    if (P->nodes[p].stmt != NONE)
        return perr(P, k->line, k->col, "%s already has a statement (line %u); list all of "
                    "its children there", nm(P, p), P->stmts[P->nodes[p].stmt].line);
    stmt_t *sa = tb_grow(P->stmts, P->ns, &P->scap, sizeof *sa);
    if (!sa)
        return oom(P);
    P->stmts = sa;
    stmt_t *s = &P->stmts[P->ns];
    *s = (stmt_t){ p, k->line, k->col, P->nk, 0 };
    P->nodes[p].stmt = P->ns++;

    char what[200];
    tok_t t;
    next(P, &t);
    if (t.kind == T_SEMI)
        return perr(P, t.line, t.col, "the statement of %s has no children (a statement "
                    "lists at least one child)", nm(P, p));
    if (t.kind != T_ARROW) {
        snprintf(what, sizeof what, "'=>' after %s", nm(P, p));
        return expect_fail(P, &t, what);
    }
    next(P, &t);
    for (;;) {
        if (t.kind == T_SEMI) {
            if (s->count == 0)
                return perr(P, t.line, t.col, "the statement of %s has no children "
                            "(a statement lists at least one child)", nm(P, p));
            return 0;
        }
        if (t.kind == T_EOF)
            return perr(P, t.line, t.col, "missing ';' at the end of the statement of %s "
                        "(line %u)", nm(P, p), s->line);
        if (t.kind != T_WORD) {
            snprintf(what, sizeof what, "a child or ';' in the statement of %s", nm(P, p));
            return expect_fail(P, &t, what);
        }
        tok_t at = t;
        if ((rc = parse_node(P, &at, &c)) != 0)
            return rc;
        next(P, &t);
        if (t.kind == T_ARROW)
            return perr(P, at.line, at.col, "missing ';' at the end of the statement of %s "
                        "(line %u), before the statement of %s", nm(P, p), s->line, nm(P, c));
        tnode_t *n = &P->nodes[c];
        if (n->parent == p)
            return perr(P, at.line, at.col, "%s is listed twice as a child of %s (line %u "
                        "and line %u)", nm(P, c), nm(P, p), n->cline, at.line);
        if (n->parent != NONE)
            return perr(P, at.line, at.col, "%s has two parents: %s (line %u) and %s "
                        "(line %u)", nm(P, c), nm(P, n->parent), n->cline, nm(P, p), at.line);
        n->parent = p;
        n->cline = at.line;
        n->ccol = at.col;
        if ((rc = add_kid(P, c)) != 0)
            return rc;
        s->count++;
    }
}

/* Whole-graph checks: cycles, then the root's own parent, then extra roots.
 * With none of these, every node is reachable from the root. */
static int check_graph(parser_t *P)
{
    uint32_t *mark = calloc(P->nn, sizeof *mark);
    if (!mark)
        return oom(P);
    for (uint32_t i = 0; i < P->nn; i++) {
        uint32_t v = i;
        while (v != NONE && mark[v] == 0) {
            mark[v] = i + 1;
            v = P->nodes[v].parent;
        }
        if (v == NONE || mark[v] != i + 1)
            continue;
        /* v is on a cycle. Name it from the member listed last as a child:
         * that occurrence closes the cycle, so the error points there. */
        uint32_t x = v, len = 0;
        bool has_root = false;
        uint32_t u = v;
        do {
            const tnode_t *a = &P->nodes[u], *b = &P->nodes[x];
            if (a->cline > b->cline || (a->cline == b->cline && a->ccol > b->ccol))
                x = u;
            has_root |= u == 0;
            len++;
            u = P->nodes[u].parent;
        } while (u != v);
        /* Going up from x lists the cycle backwards; print it parent => child. */
        uint32_t *up = malloc((len + 1) * sizeof *up);
        if (!up) {
            free(mark);
            return oom(P);
        }
        u = x;
        for (uint32_t j = 0; j <= len; j++, u = P->nodes[u].parent)
            up[j] = u;
        /* up[len], ..., up[0] is the cycle parent => child; long ones keep
         * their first three and last two names. */
        char list[400] = "";
        size_t off = 0;
        for (uint32_t j = len + 1; j-- > 0;) {
            if (len > 8 && j == len - 3) {
                off += (size_t)snprintf(list + off, sizeof list - off, " => ... (%u nodes)",
                                        len);
                j = 2;
                continue;
            }
            if (off < sizeof list)
                off += (size_t)snprintf(list + off, sizeof list - off, "%s%s",
                                        j == len ? "" : " => ", nm(P, up[j]));
        }
        free(up);
        free(mark);
        const tnode_t *xn = &P->nodes[x];
        if (has_root)
            return perr(P, xn->cline, xn->ccol, "cycle through the front-end: %s", list);
        return perr(P, xn->cline, xn->ccol, "cycle: %s (not reachable from the front-end %s)",
                    list, nm(P, 0));
    }
    free(mark);
    const tnode_t *root = &P->nodes[0];
    if (root->parent != NONE)
        return perr(P, root->cline, root->ccol, "the front-end %s (the parent of the first "
                    "statement) cannot be a child of %s", nm(P, 0), nm(P, root->parent));
    for (uint32_t s = 1; s < P->ns; s++) {
        const stmt_t *st = &P->stmts[s];
        if (P->nodes[st->node].parent == NONE)
            return perr(P, st->line, st->col, "two roots: %s (line %u) and %s (line %u); %s "
                        "and its subtree are not reachable from the front-end",
                        nm(P, 0), P->stmts[0].line, nm(P, st->node), st->line,
                        nm(P, st->node));
    }
    return 0;
}

/* Number the nodes breadth-first from the root, children in file order. */
static int build(parser_t *P)
{
    uint32_t *queue = malloc(P->nn * sizeof *queue);
    uint32_t *rank = malloc(P->nn * sizeof *rank);
    int rc = 0;
    if (!queue || !rank || tb_topology_reserve(P->t, P->nn) != 0) {
        rc = oom(P);
        goto out;
    }
    uint32_t head = 0, tail = 0;
    queue[tail++] = 0;
    rank[0] = 0;
    while (head < tail) {
        uint32_t v = queue[head++];
        const tnode_t *n = &P->nodes[v];
        rc = tb_topology_add_interned(P->t, n->host, n->id,
                                      n->parent == NONE ? TBON_RANK_NONE : rank[n->parent]);
        if (rc) {
            rc = oom(P);
            goto out;
        }
        if (n->stmt == NONE)
            continue;
        const stmt_t *s = &P->stmts[n->stmt];
        for (uint32_t j = 0; j < s->count; j++) {
            uint32_t c = P->kids[s->first + j];
            rank[c] = tail;
            queue[tail++] = c;
        }
    }
    if (tb_topology_finish(P->t, P->err) != 0)
        rc = TBON_ENOMEM;
out:
    free(queue);
    free(rank);
    return rc;
}

tb_topology_t *tb_topology_parse_text_limits(const char *buf, size_t len, const char *name,
                                             const tb_topology_limits_t *lim,
                                             tbon_error_t *err)
{
    parser_t P = { .name = name ? name : "(topology)", .p = buf, .end = buf + len,
                   .line = 1, .col = 1, .err = err,
                   .max_nodes = lim ? lim->max_nodes : TB_TOPOLOGY_MAX_NODES };
    size_t max_bytes = lim ? lim->max_bytes : TB_TOPOLOGY_MAX_BYTES;
    int rc = 0;
    if (len > max_bytes) {
        perr(&P, 1, 1, "the topology is too large: %zu bytes (at most %zu)", len, max_bytes);
        return NULL;
    }
    if (!buf && len) {
        tb_error_set(err, TBON_EINVAL, "%s: no buffer to parse", P.name);
        return NULL;
    }
    /* A name takes a dozen bytes or more: size the map for the likely node
     * count (up to a million) rather than grow it step by step. */
    size_t expect = len / 16 < 64 ? 64 : len / 16 > (1u << 20) ? (1u << 20) : len / 16;
    P.last_host = UINT32_MAX;
    P.t = tb_topology_new();
    if (!P.t || tb_u64map_init(&P.map, expect) != 0) {
        rc = oom(&P);
        goto out;
    }
    tok_t k;
    for (next(&P, &k); k.kind != T_EOF; next(&P, &k)) {
        if (k.kind != T_WORD) {
            rc = expect_fail(&P, &k, "a host name to start a statement");
            goto out;
        }
        if ((rc = parse_statement(&P, &k)) != 0)
            goto out;
    }
    if (P.ns == 0) {
        rc = perr(&P, 1, 1, "empty topology: no nodes");
        goto out;
    }
    if ((rc = check_graph(&P)) == 0)
        rc = build(&P);
out:
    free(P.nodes);
    free(P.stmts);
    free(P.kids);
    tb_u64map_free(&P.map);
    if (rc || !P.t) {
        tb_topology_destroy(P.t);
        return NULL;
    }
    tb_error_clear(err);
    return P.t;
}

tb_topology_t *tb_topology_parse_text(const char *buf, size_t len, const char *name,
                                      tbon_error_t *err)
{
    return tb_topology_parse_text_limits(buf, len, name, NULL, err);
}

/* ---- writer -------------------------------------------------------------- */

/* The ranks attached to rank 0, breadth-first; *count gets their number. */
static uint32_t *bfs_order(const tb_topology_t *t, size_t *count)
{
    size_t n = tb_topology_size(t), head = 0, tail = 0;
    uint32_t *q = malloc((n ? n : 1) * sizeof *q);
    if (!q)
        return NULL;
    q[tail++] = 0;
    while (head < tail) {
        size_t nc;
        const tbon_rank_t *c = tb_topology_children(t, q[head++], &nc);
        for (size_t i = 0; i < nc; i++)
            q[tail++] = c[i];
    }
    *count = tail;
    return q;
}

static void put_node(tb_sbuf_t *b, const tb_topology_t *t, uint32_t r)
{
    tb_sbuf_str(b, tb_topology_host(t, r));
    tb_sbuf_add(b, ":", 1);
    tb_sbuf_u32(b, tb_topology_local_id(t, r));
}

int tb_topology_format_text(const tb_topology_t *t, char **buf, size_t *len)
{
    if (!t || !tb_topology_size(t))
        return TBON_EINVAL;
    if (tb_topology_num_children(t, 0) == 0)
        return TBON_ETOPOLOGY;
    size_t n;
    uint32_t *q = bfs_order(t, &n);
    if (!q)
        return TBON_ENOMEM;
    tb_sbuf_t b = { 0 };
    for (size_t i = 0; i < n; i++) {
        size_t nc;
        const tbon_rank_t *c = tb_topology_children(t, q[i], &nc);
        if (!nc)
            continue;
        size_t line_start = b.len;
        put_node(&b, t, q[i]);
        tb_sbuf_add(&b, " =>", 3);
        for (size_t j = 0; j < nc; j++) {
            /* Wrap long lines; continuation lines are indented. */
            size_t w = strlen(tb_topology_host(t, c[j])) + 12;
            if (b.len - line_start + w > 79 && j > 0) {
                tb_sbuf_add(&b, "\n   ", 4);
                line_start = b.len - 3;
            }
            tb_sbuf_add(&b, " ", 1);
            put_node(&b, t, c[j]);
        }
        tb_sbuf_add(&b, " ;\n", 3);
    }
    free(q);
    if (b.failed) {
        free(b.p);
        return TBON_ENOMEM;
    }
    *buf = b.p;
    *len = b.len;
    return 0;
}
