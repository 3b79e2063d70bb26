/* reconfig_tmp.c - see reconfig_tmp.h */
#include "reconfig_tmp.h"

#include <stdlib.h>

struct cand { tbon_rank_t r; size_t fan; uint32_t h; };

static uint32_t hdist;

static int cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->fan != y->fan)
        return x->fan < y->fan ? -1 : 1;
    uint32_t dx = x->h - hdist, dy = y->h - hdist;
    if (dx != dy)
        return dx < dy ? -1 : 1;
    return x->r < y->r ? -1 : x->r > y->r;
}

size_t tb_tmp_adopt_candidates(const tb_topology_t *t, tbon_rank_t o, tbon_rank_t lost,
                               uint32_t old_height, tbon_rank_t *out, size_t cap)
{
    size_t n = tb_topology_size(t), k = 0;
    struct cand *v = malloc((n ? n : 1) * sizeof *v);
    if (!v || cap == 0) {
        free(v);
        if (cap)
            out[0] = 0;
        return cap ? 1 : 0;
    }
    for (tbon_rank_t r = 1; r < n; r++) {
        if (r == o || r == lost || !tb_topology_alive(t, r) ||
            tb_topology_role(t, r) == TB_ROLE_BE || tb_topology_in_subtree(t, o, r) ||
            tb_topology_height(t, r) < old_height ||
            tb_topology_root_of(t, r) != 0)
            continue;
        v[k++] = (struct cand){ r, tb_topology_num_children(t, r), tb_topology_height(t, r) };
    }
    hdist = old_height;
    qsort(v, k, sizeof *v, cmp);
    size_t m = 0;
    for (size_t i = 0; i < k && m + 1 < cap; i++)
        out[m++] = v[(i + o) % k].r;
    out[m++] = 0;
    free(v);
    return m;
}

int tb_tmp_report_failure(tb_topology_t *t, tbon_rank_t r, uint32_t inc)
{
    (void)inc;
    if (r == 0 || r >= tb_topology_size(t) || !tb_topology_alive(t, r))
        return 0;
    return tb_topology_remove(t, r) == 0;
}

int tb_tmp_report_adoption(tb_topology_t *t, tbon_rank_t o, tbon_rank_t p, uint32_t inc)
{
    if (o >= tb_topology_size(t) || p >= tb_topology_size(t) ||
        inc <= tb_topology_incarnation(t, o))
        return 0;
    if (tb_topology_parent(t, o) != p)
        tb_topology_reparent(t, o, p);
    tb_topology_set_incarnation(t, o, inc);
    return 1;
}
