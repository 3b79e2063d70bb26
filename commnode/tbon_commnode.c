/* tbon_commnode - an interior process of a tbon tree: started by its parent,
 * it launches its own children, filters their packets up and routes requests
 * down until the front-end ends the session; or, started by hand with
 * --join, it joins a running tree and takes over later joins and adoptions. */
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "util/error.h"
#include "codec/handshake.h"
#include "node/join.h"
#include "util/log.h"
#include "node/node.h"
#include "codec/packet_int.h"
#include "net/sock.h"
#include "proc/launch.h"
#include "proc/slurm.h"
#include "util/config.h"
#include "ft/ft.h"

/* The environment, read once at the start (util/config.h); the node's. */
static tb_config_t conf;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tbon_commnode --tbon-parent HOST:PORT --tbon-rank RANK\n"
            "                     --tbon-session HEX [--tbon-timeout MS]\n"
            "                     [--tbon-secret-stdin]\n"
            "       tbon_commnode --tbon-slurm-map MAP --tbon-session HEX\n"
            "                     [--tbon-timeout MS] [--tbon-secret-stdin]\n"
            "       tbon_commnode --join ATTACH_FILE [--rank RANK]\n"
            "       tbon_commnode -h | --help\n"
            "\n"
            "The communication process of a tbon tree.\n"
            "\n"
            "In the first form a front-end (tbon_fe_create, tbon_frontend) or a parent\n"
            "commnode starts it, with the session secret in the environment\n"
            "(TBON_SECRET) or, through a remote shell, on stdin (--tbon-secret-stdin);\n"
            "it connects to its parent, receives the topology, launches its children\n"
            "(local ones directly, others through $TBON_RSH), runs the streams' filters\n"
            "and exits when the session ends or its parent goes away.\n"
            "\n"
            "In the second form it joins a running tree through the attach file its\n"
            "front-end wrote (tbon_frontend --attach FILE, or the attach_file option):\n"
            "the front-end gives it a rank and a parent, and from then on it takes in\n"
            "back-ends that join and orphans that need a new parent. With --rank it\n"
            "comes back as that commnode rank, which must have failed (a restarted\n"
            "process, on the host it had): the new incarnation makes whatever its\n"
            "old process may still say stale.\n"
            "\n"
            "Under Slurm (tbon_frontend --slurm) it is a task of a job step and finds\n"
            "its rank and parent in --tbon-slurm-map by its node and local id, and\n"
            "launches nothing itself.\n"
            "\n"
            "Environment (what the front-end had travels here: docs/cluster.md):\n"
            "  TBON_LOG      error|warn|info|debug (default warn)\n"
            "  TBON_LOG_DIR  where the log goes (default ${TMPDIR:-/tmp}/tbon-USER-SESSION/),\n"
            "                one file per commnode: commnode-RANK.log\n"
            "  TBON_RSH      the remote shell for children on other hosts (default ssh\n"
            "                -o BatchMode=yes -o ConnectTimeout=10, one connection per host)\n"
            "  TBON_IFACE    the interface (or address) children on other hosts reach it at\n"
            "                (default: the one routed toward their host)\n"
            "  TBON_ENV      names of more variables to pass on to children elsewhere\n");
}

/* A start-up failure goes to the log and to stderr: before the commnode is
 * connected its parent can only learn why from what the launcher relays of
 * its stderr (docs/cluster.md, "Errors and logs"). */
#define STARTUP_ERROR(...) do {                                                 \
        TB_ERROR("startup", __VA_ARGS__);                                       \
        char line_[1400];                                                       \
        snprintf(line_, sizeof line_, __VA_ARGS__);                             \
        fprintf(stderr, "tbon_commnode: %s\n", line_);                          \
    } while (0)

/* The second form: ask the FE for a place (docs/protocol.md 9.6). */
static int join_running(const char *file, const char *rank_arg, tb_join_t *j, int *lfd,
                        uint16_t *port, tbon_error_t *err)
{
    tbon_rank_t want = TBON_RANK_NONE;
    if (rank_arg) {
        char *end;
        unsigned long r = strtoul(rank_arg, &end, 10);
        if (*end || !*rank_arg || r == 0 || r >= TBON_RANK_NONE)
            return tb_error_set(err, TBON_EINVAL, "--rank: bad rank \"%s\"", rank_arg);
        want = (tbon_rank_t)r;
    }
    if (tb_join_parse_attach(file, TBON_RANK_NONE, j, err))
        return err->code;
    j->rank = want;
    *lfd = tb_sock_listen(port, err);
    if (*lfd < 0)
        return err->code;
    if (tb_join_request(j, TB_ROLE_COMMNODE, *port, err)) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return tb_error_set(err, err->code ? err->code : TBON_EIO,
                            "cannot join the tree through the front-end at %s:%u: %s",
                            j->parent_host, (unsigned)j->parent_port, msg);
    }
    return 0;
}

/* Options. The --tbon-* ones are what a launcher passes (node_start.c,
 * slurm.c; launch.c adds --tbon-secret-stdin through a remote shell):
 * getopt checks them here, tb_join_parse_args reads their values. */
enum { OPT_JOIN = 256, OPT_RANK, OPT_LAUNCHER };
static const struct option longopts[] = {
    { "join", required_argument, NULL, OPT_JOIN },
    { "rank", required_argument, NULL, OPT_RANK },
    { "help", no_argument, NULL, 'h' },
    { "tbon-parent", required_argument, NULL, OPT_LAUNCHER },
    { "tbon-rank", required_argument, NULL, OPT_LAUNCHER },
    { "tbon-session", required_argument, NULL, OPT_LAUNCHER },
    { "tbon-timeout", required_argument, NULL, OPT_LAUNCHER },
    { &TB_SLURM_MAP_ARG[2], required_argument, NULL, OPT_LAUNCHER },   /* without "--" */
    { &TB_SECRET_STDIN_ARG[2], no_argument, NULL, OPT_LAUNCHER },
    { NULL, 0, NULL, 0 },
};

/* The exit status of a commnode whose filter call hung (docs/filter-guide.md,
 * "When a filter crashes or hangs"). */
#define EXIT_FILTER_HUNG 75

/* The node cannot go on (tb_node_config_t.fatal): its thread is stuck in a
 * plug-in's call, the report has gone up and the log has it; end here. */
static void node_fatal(int code, const char *msg)
{
    (void)code;
    (void)msg;
    _exit(EXIT_FILTER_HUNG);
}

/* Usage error: the message, the usage on stderr; the exit status 2. */
static int usage_error(const char *fmt, const char *what)
{
    fputs("tbon_commnode: ", stderr);
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    usage(stderr);
    return 2;
}

/* Joined (j filled in: launched, or by --join with its listening socket
 * lfd and port): the log (and at the end, an empty one removed: run_node),
 * the parent's connections and its launch instructions, then the node runs
 * until the session ends. The exit status. */
static int run_joined(tb_join_t *jp, const char *join_file, int lfd, uint16_t port);

static int run_node(tb_join_t *jp, const char *join_file, int lfd, uint16_t port)
{
    tb_log_set_identity(jp->rank, "commnode");
    char dir[PATH_MAX], path[PATH_MAX + 32] = "";
    uint64_t session = jp->session.id;
    if (tb_log_session_dir(&conf, session, dir, sizeof dir) == 0) {
        snprintf(path, sizeof path, "%s/commnode-%u.log", dir, jp->rank);
        if (tb_log_to_file(path) != 0)
            path[0] = 0;
    }
    int rc = run_joined(jp, join_file, lfd, port);
    tb_log_to_file(NULL);
    tb_log_drop_session_dir(&conf, session, path[0] ? path : NULL);
    return rc;
}

static int run_joined(tb_join_t *jp, const char *join_file, int lfd, uint16_t port)
{
    tbon_error_t err = { 0 };
    tb_join_t j = *jp;
    if (join_file)
        TB_INFO("join", "the front-end gave us rank %u (incarnation %u) under %s:%u", j.rank,
                j.inc, j.parent_host, (unsigned)j.parent_port);
    if (tb_join_connect(&j, TB_ROLE_COMMNODE, join_file ? TB_PURPOSE_ATTACH : TB_PURPOSE_DATA,
                        &err)) {
        if (lfd >= 0)
            close(lfd);
        STARTUP_ERROR("rank %u: cannot join the parent at %s:%u: %s", j.rank, j.parent_host,
                      (unsigned)j.parent_port, err.msg);
        tb_join_release(&j);
        return 1;
    }
    tb_ctl_launch_t launch;
    if (tb_ctl_launch_decode(j.launch, &launch, &err)) {
        STARTUP_ERROR("rank %u: bad launch instructions from the parent: %s", j.rank, err.msg);
        tb_join_release(&j);
        if (lfd >= 0)
            close(lfd);
        return 1;
    }
    const char *cn = launch.commnode, *bexe = launch.backend_exe, *rsh = launch.rsh;
    const char **argvz = calloc(launch.nargv + 1, sizeof *argvz);
    for (size_t i = 0; argvz && i < launch.nargv; i++)
        argvz[i] = launch.argv[i];
    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = 0;
    tb_node_config_t cfg = {
        .ft = &tb_ft_ops, .conf = &conf,
        .role = TB_ROLE_COMMNODE, .rank = j.rank, .topo = j.topo, .session = j.session,
        .commnode_path = strcmp(cn, "-") == 0 ? NULL : *cn ? cn : self,
        .backend_exe = *bexe ? bexe : NULL,
        .backend_argv = argvz,
        /* the parent's remote shell, else our own $TBON_RSH */
        .rsh = *rsh ? rsh : conf.rsh && *conf.rsh ? conf.rsh : NULL,
        .startup_timeout_ms = j.timeout_ms,
        .parent_fd = j.data_fd, .parent_event_fd = j.event_fd, .fatal = node_fatal,
        .joined = join_file != NULL, .listening = lfd >= 0, .listen_fd = lfd, .port = port,
    };
    j.topo = NULL;
    j.data_fd = j.event_fd = -1;
    tb_node_t *n = argvz ? tb_node_new(&cfg, NULL, &err) : NULL;
    if (!argvz && lfd >= 0)
        close(lfd);
    int rc = 0;
    if (!n) {
        STARTUP_ERROR("rank %u: %s", j.rank, err.msg);
        rc = 1;
    } else if (tb_join_connect_event(&j, TB_ROLE_COMMNODE, &err) != 0) {
        STARTUP_ERROR("rank %u: no event connection to the parent: %s", j.rank, err.msg);
        tb_node_destroy(n);
        rc = 1;
    } else {
        tb_node_watch_parent(n, j.event_fd);
        j.event_fd = -1;
        tb_node_run(n);
        tb_node_destroy(n);
    }
    tb_join_release(&j);
    free(argvz);
    tb_ctl_free(TB_CTL_LAUNCH, &launch);
    return rc;
}

int main(int argc, char **argv)
{
    tbon_error_t err = { 0 };
    tb_join_t j;
    const char *join_file = NULL, *rank_arg = NULL;
    /* The launcher's options, spelt out in full whatever the command line
     * abbreviated (getopt accepts --tbon-par and --tbon-rank=3), for
     * tb_join_parse_args: argv[0], then each option and its value. */
    char **largv = calloc((size_t)argc + 1, 2 * sizeof *largv);
    char *first_launcher = NULL;
    int largc = 0, opt, idx;
#ifdef M_ARENA_MAX
    /* One heap for all of this process's threads. glibc gives each new
     * thread that allocates a heap of its own (a 64 MiB reservation, its
     * pages touched fresh): here the node's reactor, the EDS and the
     * adopter thread, of which only the reactor allocates much (small
     * blocks go through each thread's own cache either way). A killed
     * commnode tears its memory down before the kernel closes its
     * sockets: with one heap its orphans hear of the loss sooner
     * (docs/architecture.md, bench/RESULTS.md "one heap per commnode"). */
    mallopt(M_ARENA_MAX, 1);
#endif
    if (!largv || tb_config_load(&conf, &err) != 0) {
        free(largv);
        fprintf(stderr, "tbon_commnode: out of memory\n");
        return 1;
    }
    largv[largc++] = argv[0];
    opterr = 0;
    /* '+': no permutation, the first word that is not an option is refused. */
    while ((opt = getopt_long(argc, argv, "+:h", longopts, &idx)) != -1) {
        switch (opt) {
        case 'h':
            usage(stdout);
            free(largv);
            return 0;
        case OPT_JOIN: join_file = optarg; break;
        case OPT_RANK: rank_arg = optarg; break;
        case OPT_LAUNCHER: {
            static char names[sizeof longopts / sizeof longopts[0]][32];
            snprintf(names[idx], sizeof names[idx], "--%s", longopts[idx].name);
            if (!first_launcher)
                first_launcher = names[idx];
            largv[largc++] = names[idx];
            if (longopts[idx].has_arg)
                largv[largc++] = optarg;
            break;
        }
        case ':':
            free(largv);
            return usage_error("%s needs a value", argv[optind - 1]);
        default: {
            /* (optopt is a long option's value when it was given one it does
             * not take: name the word instead.) */
            const char *w = argv[optind - 1];
            free(largv);
            if (strncmp(w, "--", 2) != 0)
                return usage_error("unknown option '%s'", (char[]){ '-', (char)optopt, 0 });
            if (strchr(w, '='))
                return usage_error("option '%s': unknown, or it takes no value", w);
            return usage_error("unknown or ambiguous option '%s'", w);
        }
        }
    }
    if (optind < argc) {
        free(largv);
        return usage_error("unexpected argument '%s' (it takes options only)", argv[optind]);
    }
    if ((join_file || rank_arg) && first_launcher) {
        free(largv);
        return usage_error("--join and the launcher's %s do not go together", first_launcher);
    }
    int lfd = -1;
    uint16_t port = 0;
    if (rank_arg && !join_file) {
        free(largv);
        return usage_error("%s goes with --join", "--rank");
    }
    if (join_file && join_running(join_file, rank_arg, &j, &lfd, &port, &err)) {
        fprintf(stderr, "tbon_commnode: %s\n", err.msg);
        if (lfd >= 0)
            close(lfd);
        free(largv);
        return 1;
    }
    if (!join_file && tb_join_parse_args(&largc, largv, &conf, &j, &err)) {
        fprintf(stderr, "tbon_commnode: %s\n", err.msg);
        usage(stderr);
        free(largv);
        return 2;
    }
    free(largv);
    return run_node(&j, join_file, lfd, port);
}
