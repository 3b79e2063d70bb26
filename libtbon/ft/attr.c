/* attr.c - attribute replication in the reactor (seed 002 section 4;
 * docs/protocol.md 9.5): a back-end's own map, changes sent up as they are
 * written, handed to the FE's application at the root, and sent again after
 * an adoption in case they died with the old parent.
 *
 * Only changes travel, and nothing at all while nobody writes. Every entry
 * carries the source's version, so the FE's replica takes an entry only if
 * it is newer than what it has: duplicates and late copies change nothing.
 */
#include "ft/ft_int.h"

#include <stdlib.h>
#include <string.h>

#include "util/attrs.h"
#include "util/log.h"

/* A back-end's own attributes, and whether any went up through here. */
struct tb_attr {
    tb_ft_ctx_t *cx;
    struct tb_attrs *attrs;   /* a back-end's own map (NULL until written) */
    int        seen;          /* an attribute went up through here */
};

tb_attr_t *tb_attr_new(tb_ft_ctx_t *cx)
{
    tb_attr_t *at = calloc(1, sizeof *at);
    if (at)
        at->cx = cx;
    return at;
}

void tb_attr_destroy(tb_attr_t *at)
{
    if (!at)
        return;
    tb_attrs_destroy(at->attrs);
    free(at);
}

/* The entries of a (all of them, or only the one for key) as TB_CTL_ATTR. */
static tbon_packet_t *attr_packet(tbon_rank_t src, const tb_attrs_t *a, const char *only)
{
    size_t n = tb_attrs_count(a), k = 0;
    const char **keys = malloc((n ? n : 1) * sizeof *keys);
    const char **vals = malloc((n ? n : 1) * sizeof *vals);
    uint8_t *dead = malloc(n ? n : 1);
    uint64_t *ver = malloc((n ? n : 1) * sizeof *ver);
    tbon_packet_t *p = NULL;
    if (keys && vals && dead && ver) {
        for (size_t i = 0; i < n; i++) {
            const char *key, *val;
            uint64_t v;
            tb_attrs_entry(a, i, &key, &val, &v);
            if (only && strcmp(only, key) != 0)
                continue;
            keys[k] = key;
            vals[k] = val ? val : "";
            dead[k] = val == NULL;
            ver[k++] = v;
        }
        p = tb_ctl_attr_encode(&(tb_ctl_attr_t){ src, keys, vals, dead, ver, k });
    }
    free(keys);
    free(vals);
    free(dead);
    free(ver);
    return p;
}

/* Up to the parent; an orphan drops it (after its adoption the whole map
 * goes again: tb_attr_resync). */
static void up(tb_attr_t *at, tbon_packet_t *p)
{
    at->seen = 1;
    tb_ft_send(at->cx, TB_NFT_PARENT, TB_CTL_ATTR, p);
}

void tb_attr_set(tb_attr_t *at, const char *key, const char *value)
{
    if (!at->attrs && !(at->attrs = tb_attrs_new()))
        return;
    if (!tb_attrs_set(at->attrs, key, value)) {
        TB_WARN("attr", "attribute %s not set: out of memory", key);
        return;
    }
    up(at, attr_packet(at->cx->nd.rank, at->attrs, key));
}

/* At the FE: every entry to the application. */
static void deliver(tb_attr_t *at, const tb_ctl_attr_t *m)
{
    uint32_t src = m->src;
    const tb_node_cbs_t *cbs = at->cx->nd.cbs;
    if (src >= tb_topology_size(at->cx->nd.topo)) {
        TB_WARN("attr", "malformed attributes ignored");
    } else if (!tb_topology_alive(at->cx->nd.topo, src)) {
        TB_DEBUG("attr", "attributes of failed rank %u dropped", src);
    } else {
        for (size_t i = 0; i < m->n; i++) {
            const char *val = m->dead[i] ? NULL : m->values[i];
            if (tb_attrs_check(m->keys[i], val) != 0 || !m->versions[i]) {
                TB_WARN("attr", "rank %u: a malformed attribute ignored", src);
                continue;
            }
            if (cbs->attr)
                cbs->attr(cbs->arg, src, m->keys[i], val, m->versions[i]);
        }
    }
}

/* Our map goes up whole, and the subtree is asked for theirs, if any
 * attribute ever passed through here (none did: nothing can be lost). */
void tb_attr_resync(tb_attr_t *at)
{
    if (!at->seen)
        return;
    if (tb_attrs_count(at->attrs))
        up(at, attr_packet(at->cx->nd.rank, at->attrs, NULL));
    tbon_packet_t *p = tb_ctl_attr_sync_encode(&(tb_ctl_attr_sync_t){ 0 });
    for (size_t i = 0, k = tb_ft_nchild(at->cx); p && i < k; i++)
        if (tb_ft_has_conn(at->cx, i))
            tb_ft_send(at->cx, (int)i, TB_CTL_ATTR_SYNC, tbon_packet_ref(p));
    tbon_packet_unref(p);
}

/* Attribute messages (TB_CTL_OWN_ATTR), m decoded from p: ATTR comes
 * from a child, ATTR_SYNC from the parent (codec/ctl.h). */
void tb_attr_ctl(tb_attr_t *at, int child, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    (void)child;
    switch (m->op) {
    case TB_CTL_ATTR:
        if (tb_ft_is_fe(at->cx))
            deliver(at, &m->u.attr);
        else
            up(at, tbon_packet_ref(p));
        break;
    case TB_CTL_ATTR_SYNC:
        tb_attr_resync(at);
        break;
    default:
        break;
    }
}
