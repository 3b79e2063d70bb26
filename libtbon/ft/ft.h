/* ft.h - the fault-tolerance layer (seed 003 V-A; seed 000 section 3;
 * seed 002 sections 3-4) as whoever creates a node sees it: the table the
 * node reaches ft through (node/node_ft.h, tb_ft_ops_t). Inside ft/,
 * ft_int.h has ft's parts and what they share. */
#ifndef TB_FT_H
#define TB_FT_H

#include "node/node_ft.h"

/* The table every node is created with (tb_node_config_t.ft; ops.c). */
extern const tb_ft_ops_t tb_ft_ops;

#endif
