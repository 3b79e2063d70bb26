/* st_fe.h - tbon_stat's front-end (st_fe.c): one run, from the command
 * line to the results. */
#ifndef TBON_ST_FE_H
#define TBON_ST_FE_H

#include "st_cli.h"
#include "st_prog.h"

/* Run the front-end of c, with self (this program) as the back-ends: find
 * the tasks, start the tree, sample and merge, write and print the
 * results. The exit status: 0, EXIT_RUN, EXIT_USAGE (a bad list of pids)
 * or EXIT_UNREACHED. */
int st_fe_main(const struct cli *c, char *self);

/* Its parts, for a session (st_session.c). st_fe_plan: the tasks found,
 * the tree started, the merge filter loaded (its id returned) into r; a
 * failure ends the program. st_fe_sample: one sampling on r's tree, its
 * results written and printed, then the tree shut down - or with
 * detach_to left running, its session file there - and r freed; the exit
 * status as st_fe_main's. st_fe_free_run: what r holds. */
int st_fe_plan(const struct cli *c, char *self, struct run *r);
int st_fe_sample(const struct cli *c, struct run *r, int fid, const char *detach_to);
void st_fe_free_run(struct run *r);

#endif
