/* st_be.h - tbon_stat's back-end side (st_be.c): the processes at the
 * leaves of the tree, which find and sample their share of the tasks. */
#ifndef TBON_ST_BE_H
#define TBON_ST_BE_H

/* A back-end the tree launched: "tbon_stat --be <the tree's arguments>".
 * Its exit status: 0 when the front-end ended the session, EXIT_RUN. */
int st_be_main(int argc, char **argv);

/* A back-end of --jobid, one per node in an srun step of the job:
 * "tbon_stat --be-attach FILE NODE=RANK,NODE=RANK,...", which takes its
 * node's rank and attaches through FILE once the front-end wrote it. Its
 * exit status (EXIT_USAGE for other arguments). */
int st_be_attach_main(int argc, char **argv);

#endif
