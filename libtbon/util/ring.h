/* ring.h - a growable FIFO of fixed-size elements: the queues of frames on a
 * connection, of packets in a wave, of packets for the application */
#ifndef TB_RING_H
#define TB_RING_H

#include <stddef.h>

typedef struct tb_ring {
    unsigned char *v;
    size_t size;             /* bytes per element */
    size_t head, len, cap;   /* in elements */
} tb_ring_t;

/* An empty ring of elements of `size` bytes (no allocation yet). */
void tb_ring_init(tb_ring_t *r, size_t size);

/* The i-th oldest element (i < len). */
static inline void *tb_ring_at(const tb_ring_t *r, size_t i)
{
    return r->v + ((r->head + i) % r->cap) * r->size;
}

/* A new element at the tail (its bytes zeroed), growing the ring when full;
 * NULL if out of memory (the ring is unchanged). */
void *tb_ring_push(tb_ring_t *r);

/* Make room for n elements in all, so that pushes up to n cannot fail.
 * 0, or TBON_ENOMEM if out of memory (the ring is unchanged). */
int tb_ring_reserve(tb_ring_t *r, size_t n);

/* Remove the oldest element (len > 0); the caller has taken what it owns. */
void tb_ring_drop(tb_ring_t *r);

/* Free the storage (not what elements point to); the ring is empty after. */
void tb_ring_free(tb_ring_t *r);

#endif
