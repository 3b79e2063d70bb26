/* topology_xml.c - the XML topology format: parser (libxml2) and writer.
 *
 *   <topology>
 *     <node host="fe" id="0">
 *       <node host="n1" id="0"/>
 *     </node>
 *   </topology>
 *
 * Nesting gives the tree; ranks are breadth-first with children in document
 * order, as in the text format. libxml2 parses with its own parser context:
 * no network, input read as UTF-8 whatever the declaration says, errors caught
 * by a per-context callback (the first one is kept), nothing printed. Every element is checked in document order before any node
 * is numbered, so the first error in the file is the one reported.
 */
#include "topo/topology.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "util/error.h"
#include "topo/topology_util.h"

typedef struct xelem {        /* a <node> in document order */
    xmlNodePtr x;
    uint32_t   host, id, line;
} xelem_t;

typedef struct xparser {
    const char    *name;
    tbon_error_t  *err;
    tb_topology_t *t;
    xelem_t       *el;
    uint32_t       n, cap, max_nodes;
    bool           xml_err;      /* the first libxml2 error, if any: */
    int            xml_line, xml_col;
    char           xml_msg[320];
} xparser_t;

/* libxml2 (with ICU and libstdc++ behind it, about 1 ms of dynamic linking)
 * is loaded when the first XML topology is parsed, not when a program that
 * links libtbon starts: most never read one, and start-up is on the critical
 * path of every tree. The types come from libxml2's own headers. */
#define LIBXML2_SONAME "libxml2.so.2"
static struct {
    char why[200];                       /* why it could not be loaded, or "" */
    __typeof__(xmlInitParser)     *InitParser;
    __typeof__(xmlNewParserCtxt)  *NewParserCtxt;
    __typeof__(xmlCtxtReadMemory) *CtxtReadMemory;
    __typeof__(xmlFreeDoc)        *FreeDoc;
    __typeof__(xmlFreeParserCtxt) *FreeParserCtxt;
    __typeof__(xmlDocGetRootElement) *DocGetRootElement;
    __typeof__(xmlGetLineNo)      *GetLineNo;
    __typeof__(xmlGetNoNsProp)    *GetNoNsProp;
    xmlFreeFunc                   *Free;   /* libxml2's variable xmlFree */
} lx;

static pthread_once_t xml_once = PTHREAD_ONCE_INIT;

/* Load libxml2 and set up its global tables, once, before any thread
 * parses; on failure lx.why says why. */
static void xml_init(void)
{
    void *dl = dlopen(LIBXML2_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        snprintf(lx.why, sizeof lx.why, "%s", dlerror());
        return;
    }
    static const char *const names[] = { "xmlInitParser", "xmlNewParserCtxt",
        "xmlCtxtReadMemory", "xmlFreeDoc", "xmlFreeParserCtxt", "xmlDocGetRootElement",
        "xmlGetLineNo", "xmlGetNoNsProp", "xmlFree" };
    void *sym[sizeof names / sizeof names[0]];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(sym[i] = dlsym(dl, names[i]))) {
            snprintf(lx.why, sizeof lx.why, "%s has no %s", LIBXML2_SONAME, names[i]);
            dlclose(dl);
            return;
        }
    /* POSIX lets a data pointer from dlsym become a function pointer. */
    memcpy(&lx.InitParser, &sym[0], sizeof sym[0]);
    memcpy(&lx.NewParserCtxt, &sym[1], sizeof sym[1]);
    memcpy(&lx.CtxtReadMemory, &sym[2], sizeof sym[2]);
    memcpy(&lx.FreeDoc, &sym[3], sizeof sym[3]);
    memcpy(&lx.FreeParserCtxt, &sym[4], sizeof sym[4]);
    memcpy(&lx.DocGetRootElement, &sym[5], sizeof sym[5]);
    memcpy(&lx.GetLineNo, &sym[6], sizeof sym[6]);
    memcpy(&lx.GetNoNsProp, &sym[7], sizeof sym[7]);
    lx.Free = sym[8];
    lx.InitParser();
}

__attribute__((format(printf, 3, 4)))
static int xerr(xparser_t *X, long line, const char *fmt, ...)
{
    char msg[440];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tb_error_set(X->err, TBON_ETOPOLOGY, "%s:%ld: %s", X->name, line, msg);
}

static int xoom(xparser_t *X)
{
    return tb_error_set(X->err, TBON_ENOMEM, "%s: out of memory while parsing the topology",
                        X->name);
}

/* The per-context error callback: libxml2 passes the parser context. */
static void on_xml_error(void *ctx, xmlErrorPtr e)
{
    xmlParserCtxtPtr c = ctx;
    xparser_t *X = c ? c->_private : NULL;
    if (!X || !e || X->xml_err || e->level < XML_ERR_ERROR)
        return;
    X->xml_err = true;
    X->xml_line = e->line;
    X->xml_col = e->int2;
    snprintf(X->xml_msg, sizeof X->xml_msg, "%s", e->message ? e->message : "parse error");
    size_t k = strlen(X->xml_msg);
    while (k && (X->xml_msg[k - 1] == '\n' || X->xml_msg[k - 1] == ' '))
        X->xml_msg[--k] = '\0';
    for (char *m = X->xml_msg; *m; m++)      /* some messages span two lines */
        if (*m == '\n')
            *m = ' ';
}

static bool is_space_text(const xmlChar *s)
{
    for (; s && *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
            return false;
    return true;
}

static const char *kind_name(xmlElementType type)
{
    switch (type) {
    case XML_CDATA_SECTION_NODE: return "a CDATA section";
    case XML_ENTITY_REF_NODE:    return "an entity reference";
    case XML_PI_NODE:            return "a processing instruction";
    default:                     return "unexpected content";
    }
}

/* host and id of a <node>, checked; only those two attributes are allowed. */
static int read_node(xparser_t *X, xmlNodePtr x, long line)
{
    xmlChar *host = NULL, *id = NULL;
    int rc = 0;
    for (xmlAttrPtr a = x->properties; a; a = a->next) {
        const char *an = (const char *)a->name;
        if (a->ns || (strcmp(an, "host") != 0 && strcmp(an, "id") != 0))
            return xerr(X, line, "unknown attribute \"%s%s%.60s\" on <node> (only host and "
                        "id are allowed)", a->ns && a->ns->prefix ? (const char *)a->ns->prefix
                        : "", a->ns && a->ns->prefix ? ":" : "", an);
    }
    host = lx.GetNoNsProp(x, (const xmlChar *)"host");
    id = lx.GetNoNsProp(x, (const xmlChar *)"id");
    const char *h = (const char *)host, *i = (const char *)id;
    if (!h) {
        rc = xerr(X, line, "<node> has no host attribute");
        goto out;
    }
    size_t hl = strlen(h);
    if (hl > TB_TOPOLOGY_MAX_HOST) {
        rc = xerr(X, line, "host name \"%.32s...\" is too long (%zu characters, at most %u)",
                  h, hl, TB_TOPOLOGY_MAX_HOST);
        goto out;
    }
    if (tb_topology_check_host(h, hl) != 0) {
        rc = xerr(X, line, "bad host name \"%.60s\" (letters, digits, '-', '.' and '_', "
                  "starting with a letter or digit)", h);
        goto out;
    }
    if (!i) {
        rc = xerr(X, line, "<node host=\"%.60s\"> has no id attribute", h);
        goto out;
    }
    uint64_t v = 0;
    size_t il = strlen(i);
    bool ok = il > 0 && il <= 10;
    for (size_t k = 0; ok && k < il; k++) {
        ok = i[k] >= '0' && i[k] <= '9';
        v = v * 10 + (uint64_t)(i[k] - '0');
    }
    if (!ok || v > TB_TOPOLOGY_MAX_ID) {
        rc = xerr(X, line, "bad id \"%.24s\" for host \"%.60s\" (a decimal number from 0 to "
                  "%u)", i, h, TB_TOPOLOGY_MAX_ID);
        goto out;
    }
    if (X->n >= X->max_nodes) {
        rc = xerr(X, line, "too many nodes: \"%.60s:%u\" would be node %u (at most %u)",
                  h, (uint32_t)v, X->n + 1, X->max_nodes);
        goto out;
    }
    xelem_t *grown = tb_grow(X->el, X->n, &X->cap, sizeof *grown);
    if (!grown) {
        rc = xoom(X);
        goto out;
    }
    X->el = grown;
    uint32_t hi;
    if (tb_topology_intern_host(X->t, h, hl, &hi) != 0) {
        rc = xoom(X);
        goto out;
    }
    x->_private = (void *)(uintptr_t)(X->n + 1);
    X->el[X->n++] = (xelem_t){ x, hi, (uint32_t)v, (uint32_t)line };
out:
    (*lx.Free)(host);
    (*lx.Free)(id);
    return rc;
}

/* Check everything under the root element in document order (an iterative
 * pre-order walk: libxml2 already bounds the depth, we need no stack). */
static int walk(xparser_t *X, xmlNodePtr root)
{
    if (root->properties)
        return xerr(X, lx.GetLineNo(root), "unknown attribute \"%.60s\" on <topology> (it "
                    "takes none)", (const char *)root->properties->name);
    uint32_t top = 0;      /* <node> elements directly in <topology> */
    uint32_t first_top = 0;
    xmlNodePtr x = root->children;
    while (x) {
        long line = lx.GetLineNo(x);
        const char *in = x->parent == root ? "<topology>" : "<node>";
        bool descend = false;
        if (x->type == XML_ELEMENT_NODE) {
            if (x->ns && x->ns->prefix)
                return xerr(X, line, "unknown element <%.30s:%.60s> in %s (only <node> is "
                            "allowed)", (const char *)x->ns->prefix, (const char *)x->name, in);
            if (x->ns || strcmp((const char *)x->name, "node") != 0)
                return xerr(X, line, "unknown element <%.60s>%s in %s (only <node> is allowed)",
                            (const char *)x->name, x->ns ? " in an XML namespace" : "", in);
            int rc = read_node(X, x, line);
            if (rc)
                return rc;
            if (x->parent == root && top++ == 1) {
                const xelem_t *a = &X->el[first_top], *b = &X->el[X->n - 1];
                return xerr(X, line, "more than one root: \"%.60s:%u\" (line %u) and "
                            "\"%.60s:%u\" (line %u) are both directly in <topology>",
                            tb_topology_host_name(X->t, a->host), a->id, a->line,
                            tb_topology_host_name(X->t, b->host), b->id, b->line);
            }
            if (x->parent == root)
                first_top = X->n - 1;
            descend = true;
        } else if (x->type == XML_TEXT_NODE) {
            if (!is_space_text(x->content)) {
                /* Quote the text from its first visible character to the line's end. */
                const char *txt = (const char *)x->content, *c;
                txt += strspn(txt, " \t\r\n");
                /* libxml2 gives the line where the text ends; count back. */
                for (c = txt; *c; c++)
                    line -= *c == '\n';
                int tl = (int)strcspn(txt, "\r\n");
                return xerr(X, line, "unexpected text \"%.*s%s\" in %s", tl > 40 ? 37 : tl, txt,
                            tl > 40 ? "..." : "", in);
            }
        } else if (x->type != XML_COMMENT_NODE) {
            return xerr(X, line, "%s is not allowed in %s", kind_name(x->type), in);
        }
        if (descend && x->children) {
            x = x->children;
            continue;
        }
        while (x != root && !x->next)
            x = x->parent;
        x = x == root ? NULL : x->next;
    }
    if (X->n == 0)
        return xerr(X, lx.GetLineNo(root), "empty topology: no nodes");
    return 0;
}

/* Duplicate names in document order, then number breadth-first. */
static int build(xparser_t *X)
{
    tb_u64map_t seen;
    uint32_t *queue = NULL, *rank = NULL;
    int rc = 0;
    if (tb_u64map_init(&seen, X->n) != 0)
        return xoom(X);
    for (uint32_t i = 0; i < X->n; i++) {
        const xelem_t *e = &X->el[i];
        uint32_t first = tb_u64map_put(&seen, (uint64_t)e->host << 32 | e->id, i);
        if (first == UINT32_MAX) {
            rc = xoom(X);
            goto out;
        }
        if (first != i) {
            rc = xerr(X, e->line, "\"%.60s:%u\" appears twice (line %u and line %u)",
                      tb_topology_host_name(X->t, e->host), e->id, X->el[first].line, e->line);
            goto out;
        }
    }
    queue = malloc(X->n * sizeof *queue);
    rank = malloc(X->n * sizeof *rank);
    if (!queue || !rank || tb_topology_reserve(X->t, X->n) != 0) {
        rc = xoom(X);
        goto out;
    }
    uint32_t head = 0, tail = 0;
    queue[tail++] = 0;               /* the first element is the root <node> */
    while (head < tail) {
        uint32_t v = queue[head++];
        xmlNodePtr x = X->el[v].x;
        uint32_t p = x->parent->_private ? rank[(uintptr_t)x->parent->_private - 1]
                                         : TBON_RANK_NONE;
        rank[v] = head - 1;
        if (tb_topology_add_interned(X->t, X->el[v].host, X->el[v].id, p) != 0) {
            rc = xoom(X);
            goto out;
        }
        for (xmlNodePtr c = x->children; c; c = c->next)
            if (c->type == XML_ELEMENT_NODE)
                queue[tail++] = (uint32_t)((uintptr_t)c->_private - 1);
    }
    if (tb_topology_finish(X->t, X->err) != 0)
        rc = TBON_ENOMEM;
out:
    tb_u64map_free(&seen);
    free(queue);
    free(rank);
    return rc;
}

/* The line of the first "<!DOCTYPE" in buf (libxml2 keeps none for a DTD). */
static long doctype_line(const char *buf, size_t len)
{
    long line = 1;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == '\n')
            line++;
        else if (buf[i] == '<' && len - i >= 9 && memcmp(buf + i, "<!DOCTYPE", 9) == 0)
            return line;
    }
    return 1;
}

tb_topology_t *tb_topology_parse_xml_limits(const char *buf, size_t len, const char *name,
                                            const tb_topology_limits_t *lim,
                                            tbon_error_t *err)
{
    xparser_t X = { .name = name ? name : "(topology)", .err = err,
                    .max_nodes = lim ? lim->max_nodes : TB_TOPOLOGY_MAX_NODES };
    size_t max_bytes = lim ? lim->max_bytes : TB_TOPOLOGY_MAX_BYTES;
    xmlParserCtxtPtr ctxt = NULL;
    xmlDocPtr doc = NULL;
    int rc = 0;
    if (len > max_bytes || len > INT_MAX) {
        tb_error_set(err, TBON_ETOPOLOGY, "%s:1:1: the topology is too large: %zu bytes "
                     "(at most %zu)", X.name, len, max_bytes);
        return NULL;
    }
    pthread_once(&xml_once, xml_init);
    if (lx.why[0]) {
        tb_error_set(err, TBON_ETOPOLOGY, "%s: reading an XML topology needs libxml2 "
                     "(%s): %s", X.name, LIBXML2_SONAME, lx.why);
        return NULL;
    }
    X.t = tb_topology_new();
    ctxt = lx.NewParserCtxt();
    if (!X.t || !ctxt || !ctxt->sax) {
        rc = xoom(&X);
        goto out;
    }
    ctxt->_private = &X;
    ctxt->sax->serror = on_xml_error;
    /* UTF-8 whatever the document declares: libxml2's other converters report
     * their errors on stderr, outside any parser context. */
    doc = lx.CtxtReadMemory(ctxt, buf ? buf : "", (int)len, X.name, "UTF-8",
                            XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
                            XML_PARSE_BIG_LINES | XML_PARSE_IGNORE_ENC);
    if (!doc || !ctxt->wellFormed) {
        if (X.xml_err)
            rc = tb_error_set(err, TBON_ETOPOLOGY, "%s:%d:%d: malformed XML: %s", X.name,
                              X.xml_line, X.xml_col, X.xml_msg);
        else
            rc = tb_error_set(err, TBON_ETOPOLOGY, "%s:1:1: malformed XML", X.name);
        goto out;
    }
    if (doc->intSubset || doc->extSubset) {
        rc = xerr(&X, doctype_line(buf, len), "DOCTYPE declarations are not allowed in a "
                  "topology");
        goto out;
    }
    xmlNodePtr root = lx.DocGetRootElement(doc);
    if (root && root->ns && strcmp((const char *)root->name, "topology") == 0) {
        rc = xerr(&X, lx.GetLineNo(root), "<topology> must not be in an XML namespace");
        goto out;
    }
    if (!root || root->ns || strcmp((const char *)root->name, "topology") != 0) {
        rc = xerr(&X, root ? lx.GetLineNo(root) : 1, "the root element is <%.60s>; a topology "
                  "file has <topology>", root ? (const char *)root->name : "");
        goto out;
    }
    if ((rc = walk(&X, root)) == 0)
        rc = build(&X);
out:
    free(X.el);
    lx.FreeDoc(doc);                /* both take NULL */
    lx.FreeParserCtxt(ctxt);
    if (rc || !X.t) {
        tb_topology_destroy(X.t);
        return NULL;
    }
    tb_error_clear(err);
    return X.t;
}

tb_topology_t *tb_topology_parse_xml(const char *buf, size_t len, const char *name,
                                     tbon_error_t *err)
{
    return tb_topology_parse_xml_limits(buf, len, name, NULL, err);
}

/* ---- writer -------------------------------------------------------------- */

static void indent(tb_sbuf_t *b, size_t level)
{
    static const char sp[] = "                                                                ";
    size_t n = 2 * (level < 32 ? level : 32);
    tb_sbuf_add(b, sp, n);
}

static void open_node(tb_sbuf_t *b, const tb_topology_t *t, uint32_t r, size_t level,
                      bool empty)
{
    indent(b, level);
    tb_sbuf_str(b, "<node host=\"");
    tb_sbuf_str(b, tb_topology_host(t, r));
    tb_sbuf_str(b, "\" id=\"");
    tb_sbuf_u32(b, tb_topology_local_id(t, r));
    tb_sbuf_str(b, empty ? "\"/>\n" : "\">\n");
}

int tb_topology_format_xml(const tb_topology_t *t, char **buf, size_t *len)
{
    if (!t || !tb_topology_size(t))
        return TBON_EINVAL;
    /* Depth-first with an explicit stack of (rank, next child). */
    size_t cap = (size_t)tb_topology_height(t, 0) + 1, top = 0;
    struct frame { uint32_t r; size_t next; } *st = malloc(cap * sizeof *st);
    if (!st)
        return TBON_ENOMEM;
    tb_sbuf_t b = { 0 };
    tb_sbuf_str(&b, "<?xml version=\"1.0\"?>\n<topology>\n");
    open_node(&b, t, 0, 1, tb_topology_num_children(t, 0) == 0);
    if (tb_topology_num_children(t, 0))
        st[top++] = (struct frame){ 0, 0 };
    while (top) {
        struct frame *f = &st[top - 1];
        size_t nc;
        const tbon_rank_t *c = tb_topology_children(t, f->r, &nc);
        if (f->next == nc) {
            indent(&b, top);
            tb_sbuf_str(&b, "</node>\n");
            top--;
            continue;
        }
        uint32_t k = c[f->next++];
        bool leaf = tb_topology_num_children(t, k) == 0;
        open_node(&b, t, k, top + 1, leaf);
        if (!leaf)
            st[top++] = (struct frame){ k, 0 };
    }
    free(st);
    tb_sbuf_str(&b, "</topology>\n");
    if (b.failed) {
        free(b.p);
        return TBON_ENOMEM;
    }
    *buf = b.p;
    *len = b.len;
    return 0;
}
