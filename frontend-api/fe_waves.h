/* fe_waves.h - tbon_frontend's waves (fe_waves.c): the broadcast stream,
 * the requests, the results and events printed on stdout. */
#ifndef TBON_FE_WAVES_H
#define TBON_FE_WAVES_H

#include "fe_cli.h"

#include <signal.h>

/* Set by SIGINT/SIGTERM: the waves end at their next slice of waiting. */
extern volatile sig_atomic_t fe_stop;

/* Load the plug-in if any, open the broadcast stream with the filter and
 * sync mode, and say what was opened (stderr). The stream, or NULL after
 * printing why. */
tbon_stream_t *fe_open_stream(const struct cli *c, tbon_net_t *net);

/* Run c->waves waves on s, printing their results (and the events, with
 * --events) on stdout: 0, or EXIT_RUN when one failed or fe_stop was set. */
int fe_run_waves(const struct cli *c, tbon_net_t *net, tbon_stream_t *s);

#endif
