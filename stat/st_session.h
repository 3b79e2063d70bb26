/* st_session.h - tbon_stat --session DIR start|sample|stop (st_session.c):
 * a tree that outlives the program, sampled many times. */
#ifndef TBON_ST_SESSION_H
#define TBON_ST_SESSION_H

#include "st_cli.h"

/* Run c's verb on the session c->session, with self (this program) as the
 * back-ends of a tree it starts; the exit status. */
int st_session_main(const struct cli *c, char *self);

#endif
