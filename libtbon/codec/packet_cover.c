/* packet_cover.c - a result's coverage: the back-ends whose contributions a
 * packet holds, and at the front-end the back-ends its wave expected
 * (docs/api.md, "Coverage"; how nodes compute it: node/node_cover.c) */
#include "codec/packet_priv.h"

#include <stdlib.h>

const tb_ranks_t *tb_packet_cover(const tbon_packet_t *p)
{
    return &p->cover;
}

tb_ranks_t *tb_packet_cover_mut(tbon_packet_t *p)
{
    return &p->cover;
}

int tb_packet_set_expect(tbon_packet_t *p, const tb_ranks_t *e)
{
    if (!p->expect) {
        p->expect = malloc(sizeof *p->expect);
        if (!p->expect)
            return TBON_ENOMEM;
        tb_ranks_init(p->expect);
    }
    return tb_ranks_copy(p->expect, e);
}

size_t tbon_packet_covered(const tbon_packet_t *p, tbon_rank_t *out, size_t cap)
{
    return p ? tb_ranks_list(&p->cover, out, out ? cap : 0) : 0;
}

size_t tbon_packet_expected(const tbon_packet_t *p, tbon_rank_t *out, size_t cap)
{
    if (!p)
        return 0;
    /* Without the front-end's word (a packet that is no result at the
     * front-end), what it holds is all that can be said. */
    return tb_ranks_list(p->expect ? p->expect : &p->cover, out, out ? cap : 0);
}

size_t tbon_packet_missing(const tbon_packet_t *p, tbon_rank_t *out, size_t cap)
{
    if (!p || !p->expect)
        return 0;
    tb_ranks_t m;
    tb_ranks_init(&m);
    size_t k = 0;
    if (tb_ranks_minus(&m, p->expect, &p->cover) == 0)
        k = tb_ranks_list(&m, out, out ? cap : 0);
    tb_ranks_free(&m);
    return k;
}
