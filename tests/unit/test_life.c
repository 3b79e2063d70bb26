/* test_life.c - the node's life (node_int.h, enum tb_life): tb_node_enter
 * moves only along the table, from every state to every state, and a refused
 * move changes nothing. */
#include "../harness.h"

#include <stdlib.h>

#include "node/node_int.h"

#define S TB_LIFE_STARTING
#define R TB_LIFE_RUNNING
#define D TB_LIFE_SHUTTING_DOWN
#define P TB_LIFE_STOPPED
#define F TB_LIFE_FINISHED

/* ok[from][to]: the moves the node may make (written out here, apart from
 * node.c's table, so that a change to one without the other fails). */
static const int ok[5][5] = {
    /*        S  R  D  P  F */
    [S] = { 0, 1, 1, 1, 0 },
    [R] = { 0, 0, 1, 1, 0 },
    [D] = { 0, 0, 0, 1, 0 },
    [P] = { 0, 0, 0, 0, 1 },
    [F] = { 0, 0, 0, 0, 0 },
};

TEST(every_move_checked_against_the_table)
{
    tb_node_t *n = calloc(1, sizeof *n);
    REQUIRE(n);
    for (int from = S; from <= F; from++) {
        for (int to = S; to <= F; to++) {
            atomic_store(&n->life, from);
            int moved = tb_node_enter(n, (enum tb_life)to);
            CHECK_INT(moved, ok[from][to]);
            CHECK_INT(tb_node_life(n), ok[from][to] ? to : from);
        }
    }
    free(n);
}

/* The paths a real node takes, and what each state means to the readers. */
TEST(paths_and_readers)
{
    tb_node_t *n = calloc(1, sizeof *n);
    REQUIRE(n);
    /* a tree that comes up and shuts down in order */
    CHECK_INT(tb_node_life(n), S);                /* a new node starts */
    CHECK(!tb_node_ending(n) && !tb_node_stopped(n));
    CHECK(tb_node_enter(n, R));
    CHECK(!tb_node_enter(n, R));                  /* READY goes up once */
    CHECK(tb_node_enter(n, D));
    CHECK(tb_node_ending(n) && !tb_node_stopped(n));
    CHECK(!tb_node_enter(n, D));                  /* a second shutdown: nothing */
    CHECK(tb_node_enter(n, P));
    CHECK(tb_node_ending(n) && tb_node_stopped(n));
    CHECK(!tb_node_enter(n, R));                  /* never back */
    CHECK(tb_node_enter(n, F));
    CHECK(!tb_node_enter(n, F));                  /* the waiters are told once */
    CHECK(tb_node_stopped(n));

    /* a session that ends before the tree is up: no READY after that */
    atomic_store(&n->life, S);
    CHECK(tb_node_enter(n, D));
    CHECK(!tb_node_enter(n, R));
    free(n);
}
