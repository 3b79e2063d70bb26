/* test_ring.c - the FIFO behind the connection, wave and receive queues */
#include "../harness.h"

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
