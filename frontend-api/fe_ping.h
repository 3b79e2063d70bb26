/* fe_ping.h - tbon_frontend --ping (fe_ping.c): the route to a rank and the
 * round trip to each process on it. */
#ifndef TBON_FE_PING_H
#define TBON_FE_PING_H

#include "fe_cli.h"

/* Ping c->ping_rank: its route, then each process on it c->ping_count
 * times, the median printed (readable, or one JSON line). 0, or EXIT_RUN
 * when a process did not answer (said on stderr). */
int fe_ping(const struct cli *c, tbon_net_t *net);

/* --status: every node's state (tbon_fe_status), a table or one JSON line.
 * 0, or EXIT_RUN when it cannot be had. */
int fe_status(const struct cli *c, tbon_net_t *net);

#endif
