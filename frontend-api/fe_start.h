/* fe_start.h - tbon_frontend's start-up (fe_start.c): the tree of the
 * command line started, with a progress line while it starts. */
#ifndef TBON_FE_START_H
#define TBON_FE_START_H

#include "fe_cli.h"

#include <time.h>

/* Start the tree c names: the back-end program looked up as a shell would
 * (PATH, then the current directory) and made absolute into *backend
 * (malloc'd, NULL when it is not an executable here: it is then passed as
 * given; free it after tbon_net_destroy), or in attach mode the way to
 * start the back-ends said on stderr. "starting tree: R/T processes" on
 * stderr while a start-up takes more than 0.5 s. The network, or NULL
 * after saying why on stderr. */
tbon_net_t *fe_start(const struct cli *c, char **backend);

/* The nodes left out of the start-up, named on stderr (their failures are
 * among the events too). */
void fe_note_missing(tbon_net_t *net);

/* Milliseconds from a to b (CLOCK_MONOTONIC times). */
long fe_ms_since(const struct timespec *a, const struct timespec *b);

#endif
