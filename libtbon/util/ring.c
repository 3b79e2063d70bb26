/* ring.c - a growable FIFO of fixed-size elements */
#include "util/ring.h"
#include "util/hot.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

void tb_ring_init(tb_ring_t *r, size_t size)
{
    memset(r, 0, sizeof *r);
    r->size = size;
}

TB_HOT int tb_ring_reserve(tb_ring_t *r, size_t n)
{
    if (n <= r->cap)
        return 0;
    /* the first allocation: n if under 16 (a ring of which there is one per
     * stream asks for a few, tb_ring_reserve(r, 4)), else 16 doubled */
    size_t ncap = r->cap ? r->cap : n < 16 ? n : 16;
    while (ncap < n)
        ncap *= 2;
    unsigned char *nv = malloc(ncap * r->size);
    if (!nv)
        return TBON_ENOMEM;
    /* Unwrap: the oldest element goes first. */
    for (size_t i = 0; i < r->len; i++)
        memcpy(nv + i * r->size, tb_ring_at(r, i), r->size);
    free(r->v);
    r->v = nv;
    r->cap = ncap;
    r->head = 0;
    return 0;
}

TB_HOT void *tb_ring_push(tb_ring_t *r)
{
    if (r->len == r->cap && tb_ring_reserve(r, r->cap ? r->cap * 2 : 16) != 0)
        return NULL;
    void *slot = r->v + ((r->head + r->len) % r->cap) * r->size;
    memset(slot, 0, r->size);
    r->len++;
    return slot;
}

void tb_ring_drop(tb_ring_t *r)
{
    r->head = (r->head + 1) % r->cap;
    r->len--;
}

void tb_ring_free(tb_ring_t *r)
{
    free(r->v);
    r->v = NULL;
    r->head = r->len = r->cap = 0;
}
