/* fe_perf.h - tbon_frontend --perf (fe_perf.c): the tree's performance
 * data, gathered up the tree (tbon_fe_perf). */
#ifndef TBON_FE_PERF_H
#define TBON_FE_PERF_H

#include "fe_cli.h"

/* Every node's and stream's figures, two tables or one JSON line. 0, or
 * EXIT_RUN when they cannot be had or some live node did not answer (said
 * on stderr; what came is printed still). */
int fe_perf(const struct cli *c, tbon_net_t *net);
/* A first gathering as the tree comes up: from then on the nodes sample
 * their filter calls' CPU time too (tbon_fe_perf). */
void fe_perf_begin(tbon_net_t *net);

#endif
