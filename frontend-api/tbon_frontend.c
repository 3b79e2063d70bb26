/* tbon_frontend.c - the tbon_frontend program: launch a tree from a topology
 * file, open a broadcast stream with a filter, send request waves to the
 * back-ends and print what comes back (readable lines or JSON lines).
 *
 * Written against the public API alone. Its parts: the command line
 * (fe_cli.c), the start-up (fe_start.c), the waves (fe_waves.c) and the
 * values of any packet, readable or JSON (fe_values.c). Results go to
 * stdout, everything else (progress, notes, errors) to stderr, so
 * `--json | jq` sees nothing but results.
 */
#include <tbon/tbon.h>

#include "fe_cli.h"
#include "fe_perf.h"
#include "fe_ping.h"
#include "fe_start.h"
#include "fe_waves.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

/* SIGINT/SIGTERM: the first asks the main loop to shut the tree down (it
 * polls fe_stop between slices of waiting); the second kills us at once. */
static void on_signal(int sig)
{
    static const char msg[] = "\n" PROG ": interrupted, shutting the tree down "
                              "(again to quit at once)\n";
    if (fe_stop) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    fe_stop = 1;
    ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)r;
}

/* Parse, start the tree, run the waves, shut the tree down. */
int main(int argc, char **argv)
{
    struct cli c;
    char *backend = NULL;
    int status = EXIT_RUN;

    fe_parse_args(&c, argc, argv);

    struct sigaction sa = { 0 };
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    tbon_net_t *net = fe_start(&c, &backend);
    if (net && !fe_stop) {
        fe_note_missing(net);
        if (c.perf)
            fe_perf_begin(net);
        tbon_stream_t *s = c.ping ? NULL : fe_open_stream(&c, net);
        if (c.ping)
            status = fe_ping(&c, net);
        else if (s)
            status = fe_run_waves(&c, net, s);
        if (c.status && !fe_stop && fe_status(&c, net) != 0)
            status = EXIT_RUN;
        if (c.perf && !fe_stop && fe_perf(&c, net) != 0)
            status = EXIT_RUN;
    }
    /* --detach: the tree stays (Ctrl-C still shuts it down) */
    if (net && c.detach && !fe_stop) {
        if (tbon_fe_detach(net, c.detach) == 0) {
            fprintf(stderr, PROG ": detached: the tree runs on; " PROG " --reattach %s "
                    "takes it over\n", c.detach);
            net = NULL;
        } else {
            fprintf(stderr, PROG ": --detach %s: %s\n", c.detach, tbon_net_error(net));
            status = EXIT_RUN;
        }
    }
    tbon_net_destroy(net);
    free(backend);
    free(c.so_path);
    return status;
}
