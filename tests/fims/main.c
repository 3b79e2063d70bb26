/* main.c - tbon_fims, the failure injection and management service of
 * seed 003 (section VI-A): run the integer-union computation (VI-B) on a
 * tree, kill commnodes on a schedule, time each recovery (VI-C) and check
 * the output. One file per part of the tool (fims.h lists them).
 *
 * Usage: tbon_fims -t TOPOLOGY [options]      (see usage() or --help)
 *        tbon_fims --be ...                   (a back-end; started by the tree)
 *        tbon_fims --agent                    (a host's agent; started by the FE)
 *
 * The front-end starts the tree with this program at every leaf, opens one
 * union/don't-wait stream over every back-end and sends it the run's
 * parameters. Each back-end then sends random uint64 values at --rate Hz for
 * --duration seconds and writes every value it sent to DIR/be-RANK.txt. The
 * front-end keeps the union of what it receives, injects the scheduled
 * failures, follows the membership events on a private copy of the topology
 * (so it only ever picks live commnodes and knows each victim's orphans) and
 * takes the per-orphan timings from the runtime's "recovery" log lines. At
 * the end it checks: output set == union of the back-ends' files, no element
 * reported as new twice, a failure event for every kill, no process of the
 * run left. Exit 0 only if all of that holds.
 *
 * The processes of a run are found on every host of the topology: by the
 * words "--tbon-rank R" and "--tbon-session S" the tree puts on their command
 * lines (S read from the attach file the front-end writes), and on this host
 * also by TBON_FIMS_RUN=<id> in their environment. On other hosts an agent
 * (this program with --agent, started through $TBON_RSH) finds, kills and
 * counts them; that is how victims are killed, leftovers counted and what
 * the watchdog kills.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fims.h"

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--be") == 0)
            return be_main(argc, argv);
    if (argc == 2 && strcmp(argv[1], "--agent") == 0)
        return agent_main();
    struct opts o = { 0 };
    parse_args(argc, argv, &o);
    char self[4096];
    ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
    if (l <= 0) {
        perror(PROG ": readlink /proc/self/exe");
        return 1;
    }
    self[l] = '\0';
    int rc = fe_main(&o, self);
    free(o.items);
    return rc;
}
