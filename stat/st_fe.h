/* st_fe.h - tbon_stat's front-end (st_fe.c): one run, from the command
 * line to the results. */
#ifndef TBON_ST_FE_H
#define TBON_ST_FE_H

#include "st_cli.h"

/* Run the front-end of c, with self (this program) as the back-ends: find
 * the tasks, start the tree, sample and merge, write and print the
 * results. The exit status: 0, EXIT_RUN, EXIT_USAGE (a bad list of pids)
 * or EXIT_UNREACHED. */
int st_fe_main(const struct cli *c, char *self);

#endif
