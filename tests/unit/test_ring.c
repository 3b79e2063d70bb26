/* test_ring.c - the FIFO behind the connection, wave and receive queues,
 * the growth of the library's arrays (util/array.h), and large buffers
 * (util/bigmem.h) */
#include "../harness.h"

#include <stdint.h>
#include <stdlib.h>

#include "util/array.h"
#include "util/bigmem.h"
#include "util/error.h"
#include "util/ring.h"

struct ent { int a; char pad[13]; };

/* FIFO order holds across growth while the ring is wrapped around. */
TEST(fifo_across_growth_and_wrap)
{
    tb_ring_t r;
    tb_ring_init(&r, sizeof(struct ent));
    int next_in = 0, next_out = 0;
    uint64_t st = 7;
    for (int round = 0; round < 2000; round++) {
        int push = (int)(th_rand(&st) % 5), pop = (int)(th_rand(&st) % 4);
        for (int i = 0; i < push; i++) {
            struct ent *e = tb_ring_push(&r);
            REQUIRE(e);
            CHECK_INT(e->a, 0);            /* new slots come zeroed */
            e->a = next_in++;
        }
        for (int i = 0; i < pop && r.len; i++) {
            CHECK_INT(((struct ent *)tb_ring_at(&r, 0))->a, next_out);
            next_out++;
            tb_ring_drop(&r);
        }
        CHECK_UINT(r.len, (size_t)(next_in - next_out));
        for (size_t i = 0; i < r.len; i++)
            CHECK_INT(((struct ent *)tb_ring_at(&r, i))->a, next_out + (int)i);
    }
    tb_ring_free(&r);
    CHECK_UINT(r.len, 0);
    CHECK(r.v == NULL);
}

/* An array grows to its first capacity, then doubles, keeping what it
 * holds; a size that would overflow is refused with the array untouched. */
TEST(array_room_doubles_and_keeps)
{
    int *v = NULL;
    size_t n = 0, cap = 0, grew = 0, last = 0;
    for (int i = 0; i < 1000; i++) {
        REQUIRE(TB_ARRAY_ROOM(v, n, cap, 4) == 0);
        CHECK(cap > n);
        if (cap != last) {
            CHECK_UINT(cap, last ? 2 * last : 4);
            last = cap;
            grew++;
        }
        v[n++] = i;
    }
    CHECK_UINT(grew, 9);               /* 4, 8, ..., 1024 */
    for (int i = 0; i < 1000; i++)
        CHECK_INT(v[i], i);
    REQUIRE(TB_ARRAY_ROOM(v, 10, cap, 4) == 0);   /* room already: unchanged */
    CHECK_UINT(cap, 1024);
    int *before = v;
    size_t c2 = cap;
    CHECK_INT(tb_array_room(&v, &c2, c2, SIZE_MAX / 1024, 4), TBON_ENOMEM);
    CHECK(v == before);
    CHECK_UINT(c2, 1024);
    free(v);
}

/* Large buffers (util/bigmem.h): from TB_BIG_MIN on, on a huge page
 * boundary and whole; growing keeps the bytes; below it, plain malloc.
 * That the kernel backs them with huge pages is its choice (none with
 * transparent huge pages "never"): bench_large shows the effect. */
TEST(big_buffers_aligned_and_kept_when_grown)
{
    size_t n = TB_BIG_MIN + 12345;
    uint8_t *b = tb_big_alloc(n);
    REQUIRE(b);
    CHECK_UINT((uintptr_t)b % ((uintptr_t)2 << 20), 0);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(i * 7);
    uint8_t *g = tb_big_realloc(b, 4 * n);
    REQUIRE(g);
    int same = 1;
    for (size_t i = 0; i < n && same; i++)
        same = g[i] == (uint8_t)(i * 7);
    CHECK(same);
    g[4 * n - 1] = 1;
    free(g);
    uint8_t *s = tb_big_alloc(100);
    REQUIRE(s);
    s[99] = 1;
    free(s);
    uint8_t *r = tb_big_realloc(NULL, 10);   /* as realloc: NULL is malloc */
    REQUIRE(r);
    free(r);
}
