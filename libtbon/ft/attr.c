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
static void up(tb_node_t *n, tbon_packet_t *p)
{
    n->ftst->attr_seen = 1;
    tb_node_send_ctl(n, n->parent, TB_CTL_ATTR, p);
}

void tb_attr_set(tb_node_t *n, const char *key, const char *value)
{
    struct tb_ft *ft = n->ftst;
    if (!ft->attrs && !(ft->attrs = tb_attrs_new()))
        return;
    if (!tb_attrs_set(ft->attrs, key, value)) {
        TB_WARN("attr", "attribute %s not set: out of memory", key);
        return;
    }
    up(n, attr_packet(n->rank, ft->attrs, key));
}

/* At the FE: every entry to the application. */
static void deliver(tb_node_t *n, const tb_ctl_attr_t *m)
{
    uint32_t src = m->src;
    if (src >= tb_topology_size(n->topo)) {
        TB_WARN("attr", "malformed attributes ignored");
    } else if (!tb_topology_alive(n->topo, src)) {
        TB_DEBUG("attr", "attributes of failed rank %u dropped", src);
    } else {
        for (size_t i = 0; i < m->n; i++) {
            const char *val = m->dead[i] ? NULL : m->values[i];
            if (tb_attrs_check(m->keys[i], val) != 0 || !m->versions[i]) {
                TB_WARN("attr", "rank %u: a malformed attribute ignored", src);
                continue;
            }
            if (n->cbs.attr)
                n->cbs.attr(n->cbs.arg, src, m->keys[i], val, m->versions[i]);
        }
    }
}

/* Our map goes up whole, and the subtree is asked for theirs, if any
 * attribute ever passed through here (none did: nothing can be lost). */
static void sync_subtree(tb_node_t *n)
{
    struct tb_ft *ft = n->ftst;
    if (!ft->attr_seen)
        return;
    if (tb_attrs_count(ft->attrs))
        up(n, attr_packet(n->rank, ft->attrs, NULL));
    tbon_packet_t *p = tb_ctl_attr_sync_encode(&(tb_ctl_attr_sync_t){ 0 });
    for (size_t i = 0; p && i < n->nchild; i++)
        if (n->child[i].conn)
            tb_node_send_ctl(n, n->child[i].conn, TB_CTL_ATTR_SYNC, tbon_packet_ref(p));
    tbon_packet_unref(p);
}

void tb_attr_resync(tb_node_t *n)
{
    sync_subtree(n);
}

/* Attribute messages (TB_CTL_OWN_ATTR), m decoded from p: ATTR comes
 * from a child, ATTR_SYNC from the parent (codec/ctl.h). */
void tb_attr_ctl(tb_node_t *n, int child, const tb_ctl_msg_t *m, tbon_packet_t *p)
{
    (void)child;
    switch (m->op) {
    case TB_CTL_ATTR:
        if (n->role == TB_ROLE_FE)
            deliver(n, &m->u.attr);
        else
            up(n, tbon_packet_ref(p));
        break;
    case TB_CTL_ATTR_SYNC:
        sync_subtree(n);
        break;
    default:
        break;
    }
}

void tb_attr_free(tb_node_t *n)
{
    tb_attrs_destroy(n->ftst->attrs);
    n->ftst->attrs = NULL;
}
