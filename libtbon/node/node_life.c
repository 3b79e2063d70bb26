/* node_life.c - the node's life (enum tb_life, node_int.h): the moves its
 * table allows, and the deadline of its end. The lowest file of node/:
 * every other one may move the life; none of this calls them. */
#include "node/node_int.h"

#include "net/loop.h"

/* The moves of enum tb_life (node_int.h): allowed[from] has bit `to`. */
static const unsigned life_moves[] = {
    [TB_LIFE_STARTING] = 1u << TB_LIFE_RUNNING | 1u << TB_LIFE_SHUTTING_DOWN |
                         1u << TB_LIFE_STOPPED,
    [TB_LIFE_RUNNING] = 1u << TB_LIFE_SHUTTING_DOWN | 1u << TB_LIFE_STOPPED,
    [TB_LIFE_SHUTTING_DOWN] = 1u << TB_LIFE_STOPPED,
    [TB_LIFE_STOPPED] = 1u << TB_LIFE_FINISHED,
    [TB_LIFE_FINISHED] = 0,
};

int tb_node_enter(tb_node_t *n, enum tb_life to)
{
    enum tb_life from = tb_node_life(n);
    if (!(life_moves[from] & 1u << to))
        return 0;
    /* only the driver writes it (node_int.h): no other writer to race */
    atomic_store_explicit(&n->life, to, memory_order_release);
    return 1;
}

int tb_node_stopped(const tb_node_t *n)
{
    /* Any thread: pairs with the driver's store. */
    return tb_node_life(n) >= TB_LIFE_STOPPED;
}

void tb_node_shutdown_at(tb_node_t *n, int64_t due)
{
    n->shutdown_deadline = due;
    tb_timer_at(n->loop, &n->shutdown_timer, due);
}
