/* tbon_stat.c - tbon_stat: sample the stack traces of many processes with a
 * tree of back-ends and merge them up the tree into one call-prefix tree whose
 * nodes carry the tasks that took each path (docs/stat.md).
 *
 * The front-end finds the tasks (-p, --pids-file, -P, -C), starts a tree
 * whose leaves are this program in back-end mode (--be), gives each back-end
 * a contiguous block of ranks, and broadcasts one request; every back-end
 * samples its tasks (st_walker), builds a 2D tree (the last sample) and a 3D
 * tree (all samples) and sends both up, where the stat_merge filter unites
 * them (stat/stat_merge.c). A task the merged tree lacks (its back-end's
 * packet died with a commnode) is asked for again; a task nobody could
 * sample shows as a named frame, never as a gap.
 *
 * This file is main; the parts are the command line (st_cli.c), the plan
 * (st_plan.c: which tasks, which hosts, which tree; st_topo.c writes its
 * topology, st_procs.c starts -C's command and --jobid's srun step), the
 * back-end (st_be.c), the front-end's session (st_fe.c) and the results
 * (st_out.c); st_prog.c has what they share. Written against the public
 * API (include/tbon/) and the library parts of libtbonstat.a. */

#include "st_be.h"
#include "st_cli.h"
#include "st_fe.h"
#include "st_procs.h"
#include "st_prog.h"
#include "st_session.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

int main(int argc, char **argv)
{
    /* A back-end is started as "tbon_stat --be <the tree's own arguments>",
     * or for --jobid as "tbon_stat --be-attach FILE MAP". */
    if (argc > 1 && strcmp(argv[1], "--be") == 0)
        return st_be_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--be-attach") == 0)
        return st_be_attach_main(argc, argv);
    struct cli c;
    st_parse_cli(argc, argv, &c);
    st_catch_signals();
    char self[PATH_MAX];
    st_self_exe(self, sizeof self);
    if (!self[0])
        st_die("/proc/self/exe: %s", strerror(errno));
    return c.session ? st_session_main(&c, self) : st_fe_main(&c, self);
}
