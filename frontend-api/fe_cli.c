/* fe_cli.c - tbon_frontend's command line: the help, the options and their
 * checks, the defaults that depend on them. A bad command line ends the
 * program with a message and EXIT_USAGE. */
#include "fe_cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_JSON = 256, OPT_ATTACH, OPT_EVENTS, OPT_IDLE, OPT_FE_HOST, OPT_ENV, OPT_SLURM,
       OPT_FANOUT, OPT_PER_NODE, OPT_REQUIRE_ALL, OPT_DETACH, OPT_REATTACH, OPT_GRACE,
       OPT_PING, OPT_PING_COUNT, OPT_STATUS, OPT_PERF };

static const struct {
    const char *name;
    int         id;
    const char *kind;
} builtins[] = {
    { "null", TBON_FILTER_NULL, "int" },     { "sum", TBON_FILTER_SUM, "int" },
    { "min", TBON_FILTER_MIN, "int" },       { "max", TBON_FILTER_MAX, "int" },
    { "avg", TBON_FILTER_AVG, "int" },       { "concat", TBON_FILTER_CONCAT, "array" },
    { "union", TBON_FILTER_UNION, "set" },
};

/* ---- messages ---- */

static void usage_env(FILE *f);

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " -t TOPOLOGY -b BACKEND [options] [-- BACKEND ARGS...]\n"
"       " PROG " --slurm -b BACKEND [options] [-- BACKEND ARGS...]\n"
"       " PROG " -t TOPOLOGY --attach FILE [options]\n"
"       " PROG " --reattach FILE [options]\n"
"\n"
"Launch a tbon tree: the commnodes of TOPOLOGY and BACKEND at each of its\n"
"leaves. Open a stream over every back-end with FILTER, then for each wave\n"
"w = 0..WAVES-1 send the request packet \"%%ud %%s\" (w, KIND) with tag %d and\n"
"print the results that come back up the tree. Shut the tree down at the end.\n"
"\n"
"Options:\n"
"  -t, --topology FILE   the tree (MRNet text format or XML; see tbon_topgen)\n"
"  -b, --backend EXE     the back-end program, e.g. tbon_example_be (a name\n"
"                        without '/' is looked up in PATH, then the current\n"
"                        directory); arguments after -- are passed to it\n"
"  -f, --filter FILTER   the upstream filter: null, sum (default), min, max,\n"
"                        avg, concat, union, or PATH.so:FUNCTION for a filter\n"
"                        plug-in (loaded here and in every commnode)\n"
"  -s, --sync MODE       waitforall (default): one result per wave, made from\n"
"                        every back-end's answer; dontwait: results flow up as\n"
"                        answers arrive; timeout:MS: wait for all, or MS ms\n"
"                        after a wave's first answer\n"
"  -w, --waves N         number of request waves (default 1; 0 only starts\n"
"                        and stops the tree)\n"
"  -k, --kind KIND       the word sent as the request's second field: what\n"
"                        the back-ends answer with; tbon_example_be knows\n"
"                          int     \"%%ld\"   rank + wave\n"
"                          int32   \"%%d\"    rank + wave\n"
"                          double  \"%%lf\"   (rank + wave) / 4\n"
"                          set     \"%%auld\" {rank, rank %% 4, 100 + wave}\n"
"                          array   \"%%ald\"  {rank, wave}\n"
"                        (any other word goes to a back-end of your own)\n"
"                        default: set for union, array for concat, else int\n"
"      --idle MS         dontwait and timeout modes: a wave ends when no result\n"
"                        came for MS ms (default 2000, or the sync timeout +\n"
"                        500 if larger)\n"
"      --json            print one JSON object per result:\n"
"                        {\"wave\":0,\"stream\":1,\"source\":0,\"format\":\"%%ld\",\"values\":[200]}\n"
"      --events          print membership events (node failed, adopted, ...)\n"
"                        between waves\n"
"      --attach FILE     attach mode (without -b): launch no back-ends; write\n"
"                        FILE and wait until back-ends join through it\n"
"                        (tbon_be_attach, or tbon_example_be --attach FILE\n"
"                        --rank R). With -b: write FILE too, for back-ends\n"
"                        that join the running tree later (tbon_example_be\n"
"                        --attach FILE, no --rank), and commnodes\n"
"                        (tbon_commnode --join FILE). FILE holds the session's\n"
"                        secret: it is removed when the session ends\n"
"      --require-all     every process must start: the first commnode or\n"
"                        back-end that cannot be launched, exits before it\n"
"                        is ready or does not connect in time ends the run\n"
"                        (exit 1, naming its rank, host and why). Without it\n"
"                        such a node is left out, its parent launches its\n"
"                        children instead, and the ranks left out are named\n"
"                        on stderr; the run fails only if no back-end is left\n"
"      --slurm           inside a Slurm allocation (salloc, sbatch), instead\n"
"                        of -t: the tree over the allocation's nodes (this\n"
"                        host the front-end, one commnode per node with its\n"
"                        back-ends, commnodes of --fanout children above),\n"
"                        each depth started as one srun step\n"
"      --fanout K        --slurm: children per commnode above the nodes'\n"
"                        own (default 32)\n"
"      --be-per-node N   --slurm: back-ends on each node (default\n"
"                        $SLURM_NTASKS_PER_NODE, else the allocation's tasks\n"
"                        per node, else 1)\n"
"      --fe-host HOST    run here a topology whose front-end host is another\n"
"                        name: HOST is this host's name as the other hosts\n"
"                        know it (default $TBON_FE_HOST); without it the\n"
"                        topology's front-end host must be this host\n"
"      --env NAME[=VALUE]\n"
"                        pass NAME (set to VALUE first, if given) to the\n"
"                        processes on other hosts too; TBON_* and\n"
"                        LD_LIBRARY_PATH always travel (repeatable)\n"
"  -h, --help            show this help\n"
"\n"
"Results (stdout, one line each):\n"
"  waitforall   wave 0: sum = 200 (from 16 back-ends)\n"
"               wave 9: sum = 185 (from 15 of 16 back-ends: missing 13)\n"
"               (the result's own word on who is in it: tbon_packet_covered)\n"
"  null filter  wave 0: back-end 5 sent 5     (one line per back-end and wave)\n"
"  dontwait     wave 0: sum = 47 (result 1 of the wave)\n"
"               wave 0: sum = 3 (late: came during wave 1)\n"
"With the null filter a wave ends when every live back-end has answered; with\n"
"other filters in dontwait/timeout mode the number of answers in a result is\n"
"not known, so a wave ends after --idle ms without a result. Progress, notes\n"
"and errors go to stderr.\n"
"\n",
            TAG_REQUEST);
    usage_env(f);
}

/* The usage's second half: environment, exit status, examples. */
static void usage_env(FILE *f)
{
    fputs(
"Sessions (docs/user-guide.md, \"Sessions\"):\n"
"      --detach FILE     after the waves, leave the tree running (its\n"
"                        processes, streams and filter state) instead of\n"
"                        shutting it down; FILE (mode 0600) holds what a new\n"
"                        front-end needs: " PROG " --reattach FILE\n"
"      --grace MS        with --detach FILE: FILE is written as the tree comes\n"
"                        up, and if this program dies (kill -9, a lost ssh\n"
"                        session) the tree waits MS ms for a --reattach\n"
"                        before every process exits\n"
"      --reattach FILE   instead of -t and -b: become the front-end of the\n"
"                        running tree FILE names (left by --detach, or by a\n"
"                        front-end that died within its --grace); the waves\n"
"                        run on a new stream, and the tree is shut down at\n"
"                        the end (or left again with --detach)\n"
"\n"
"Probing:\n"
"      --ping RANK       instead of waves: the route from the front-end to RANK\n"
"                        (any process, commnodes too) and the round trip to\n"
"                        each process on it, one per line (--json: one line)\n"
"      --ping-count N    pings per process, the median shown (default 3)\n"
"      --status          after the waves (or the ping): every node of the tree\n"
"                        with its state (ok, suspect, adopted, failed, missing,\n"
"                        joined, left), the time in it, its host, its parent\n"
"                        and a ping's round trip; --json: one JSON line\n"
"      --perf            after the waves (or the ping, or --status): each\n"
"                        node's performance data, gathered up the tree (its\n"
"                        memory, CPU, queues, link resends; per stream the\n"
"                        packets and bytes in and out, waves, filter calls and\n"
"                        their time); --json: one JSON line\n"
"\n"
"Environment:\n"
"  TBON_LOG=error|warn|info|debug   library log level (default warn); the\n"
"                                   commnodes log to files in TBON_LOG_DIR,\n"
"                                   default ${TMPDIR:-/tmp}/tbon-USER-SESSION/\n"
"  TBON_RSH=CMD       remote shell for hosts other than this one (default ssh)\n"
"  TBON_COMMNODE=EXE  the commnode program (default: tbon_commnode next to\n"
"                     this program, in the build tree, then in PATH)\n"
"  TBON_IFACE=IF|ADDR the interface (or address) each node gives its\n"
"                     children on other hosts to reach it at (default: the\n"
"                     one routed toward the child's host)\n"
"  TBON_ENV=NAMES     more variables to pass to other hosts (as --env)\n"
"  docs/cluster.md has the details of running across hosts.\n"
"\n"
"Exit status: 0 success, 1 runtime error (message on stderr), 2 usage error.\n"
"\n"
"Examples:\n"
"  " PROG " -t topologies/local-4x4.top -b build/bin/tbon_example_be -w 3\n"
"  " PROG " -t my.top -b tbon_example_be -f avg --json\n"
"  " PROG " -t my.top -b tbon_example_be -f null -s dontwait\n"
"  " PROG " -t my.top -b ./my_be -f ./my_filter.so:my_sum -- --my-be-option\n"
"  " PROG " -t my.top -b tbon_example_be --detach s.tbon; "
"" PROG " --reattach s.tbon -w 3\n",
          f);
}

/* A bad command line: say which argument and how to get help; exit 2. */
static void __attribute__((noreturn, format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nTry '" PROG " --help' for more information.\n", stderr);
    va_end(ap);
    exit(EXIT_USAGE);
}

/* ---- argument parsing ---- */

/* A decimal number in [0, max] without sign or junk. 0 or -1. */
static int parse_ulong(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Decide what FILTER names: a built-in, or PATH.so:FUNCTION (made absolute
 * here, so the commnodes find it whatever their working directory). */
static void parse_filter(struct cli *c)
{
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (strcmp(c->filter, builtins[i].name) == 0) {
            c->filter_id = builtins[i].id;
            c->filter_name = builtins[i].name;
            if (!c->kind)
                c->kind = builtins[i].kind;
            return;
        }
    const char *colon = strrchr(c->filter, ':');
    if (!colon || colon == c->filter || !colon[1] || !strstr(c->filter, ".so"))
        usage_error("unknown filter '%s' (built-ins: null sum min max avg concat "
                    "union; or PATH.so:FUNCTION)", c->filter);
    size_t n = (size_t)(colon - c->filter);
    char *path = strndup(c->filter, n);
    if (!path) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(EXIT_RUN);
    }
    c->so_path = realpath(path, NULL);
    if (!c->so_path) {
        fprintf(stderr, PROG ": filter plug-in %s: %s\n", path, strerror(errno));
        free(path);
        exit(EXIT_RUN);
    }
    free(path);
    c->so_func = colon + 1;
    c->filter_name = c->so_func;
    c->filter_id = -1;
    if (!c->kind)
        c->kind = "int";
}

/* Parse "waitforall", "dontwait" or "timeout:MS". */
static void parse_sync(struct cli *c, const char *s)
{
    if (strcmp(s, "waitforall") == 0) {
        c->sync = TBON_SYNC_WAITFORALL;
    } else if (strcmp(s, "dontwait") == 0) {
        c->sync = TBON_SYNC_DONTWAIT;
    } else if (strncmp(s, "timeout:", 8) == 0) {
        if (parse_ulong(s + 8, UINT32_MAX, &c->sync_ms) != 0 || c->sync_ms == 0)
            usage_error("bad sync mode '%s': the timeout must be a number of ms "
                        "from 1 to %" PRIu32, s, UINT32_MAX);
        c->sync = TBON_SYNC_TIMEOUT;
    } else {
        usage_error("bad sync mode '%s' (waitforall, dontwait or timeout:MS)", s);
    }
}

/* --env NAME (or NAME=VALUE: set here first, then passed on). */
static void add_env(struct cli *c, const char *arg)
{
    char name[256];
    size_t len = strcspn(arg, "=");
    if (len == 0 || len >= sizeof name || strspn(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                 "abcdefghijklmnopqrstuvwxyz0123456789_") != len)
        usage_error("--env: bad variable name in '%s' (NAME or NAME=VALUE)", arg);
    memcpy(name, arg, len);
    name[len] = 0;
    if (arg[len] == '=' && setenv(name, arg + len + 1, 1) != 0)
        usage_error("--env: cannot set %s: %s", name, strerror(errno));
    char *v = NULL;
    if (asprintf(&v, "%s%s%s", c->env ? c->env : "", c->env ? " " : "", name) < 0)
        usage_error("out of memory");
    free(c->env);
    c->env = v;
}

static void check_args(struct cli *c, const char *first);

/* The options of sessions (--detach, --reattach, --grace) and probing
 * (--ping, --ping-count). */
static void session_or_probe_opt(struct cli *c, int opt, const char *arg)
{
    unsigned long v;
    switch (opt) {
    case OPT_DETACH: c->detach = arg; break;
    case OPT_REATTACH: c->reattach = arg; break;
    case OPT_GRACE:
        if (parse_ulong(arg, INT_MAX, &c->grace_ms) != 0 || c->grace_ms == 0)
            usage_error("bad grace '%s' (ms, from 1)", arg);
        break;
    case OPT_PING:
        if (parse_ulong(arg, UINT32_MAX - 1, &v) != 0)
            usage_error("bad rank '%s' for --ping", arg);
        c->ping = 1;
        c->ping_rank = (tbon_rank_t)v;
        break;
    default:
        if (parse_ulong(arg, 64, &c->ping_count) != 0 || c->ping_count == 0)
            usage_error("bad --ping-count '%s' (1 to 64)", arg);
        break;
    }
}

/* The long options (--help lists them). */
static const struct option longopts[] = {
    { "topology", required_argument, NULL, 't' },
    { "backend", required_argument, NULL, 'b' },
    { "filter", required_argument, NULL, 'f' },
    { "sync", required_argument, NULL, 's' },
    { "waves", required_argument, NULL, 'w' },
    { "kind", required_argument, NULL, 'k' },
    { "idle", required_argument, NULL, OPT_IDLE },
    { "json", no_argument, NULL, OPT_JSON },
    { "events", no_argument, NULL, OPT_EVENTS },
    { "attach", required_argument, NULL, OPT_ATTACH },
    { "fe-host", required_argument, NULL, OPT_FE_HOST },
    { "env", required_argument, NULL, OPT_ENV },
    { "slurm", no_argument, NULL, OPT_SLURM },
    { "require-all", no_argument, NULL, OPT_REQUIRE_ALL },
    { "fanout", required_argument, NULL, OPT_FANOUT },
    { "be-per-node", required_argument, NULL, OPT_PER_NODE },
    { "detach", required_argument, NULL, OPT_DETACH },
    { "reattach", required_argument, NULL, OPT_REATTACH },
    { "grace", required_argument, NULL, OPT_GRACE },
    { "ping", required_argument, NULL, OPT_PING },
    { "ping-count", required_argument, NULL, OPT_PING_COUNT },
    { "status", no_argument, NULL, OPT_STATUS },
    { "perf", no_argument, NULL, OPT_PERF },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

void fe_parse_args(struct cli *c, int argc, char **argv)
{
    unsigned long v;
    int opt;

    memset(c, 0, sizeof *c);
    c->filter = "sum";
    c->sync = TBON_SYNC_WAITFORALL;
    c->waves = 1;
    c->idle_ms = -1;
    opterr = 0;
    /* '+': stop at the first non-option, so nothing after "--" is permuted. */
    while ((opt = getopt_long(argc, argv, "+:t:b:f:s:w:k:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 't': c->topology = optarg; break;
        case 'b': c->backend = optarg; break;
        case 'f': c->filter = optarg; break;
        case 's': parse_sync(c, optarg); break;
        case 'w':
            if (parse_ulong(optarg, 100000000, &v) != 0)
                usage_error("bad number of waves '%s' (0 to 100000000)", optarg);
            c->waves = v;
            break;
        case 'k':
            /* Any word: it is the request's second field, for the
             * back-ends to read (tbon_example_be knows the five of
             * --help, a tool's own back-end its own). */
            if (!*optarg || strlen(optarg) > 256 || strpbrk(optarg, " \t\n"))
                usage_error("bad kind '%s' (a word of 1 to 256 characters, e.g. int, int32, "
                            "double, set or array for tbon_example_be)", optarg);
            c->kind = optarg;
            break;
        case OPT_IDLE:
            if (parse_ulong(optarg, INT_MAX, &v) != 0 || v == 0)
                usage_error("bad idle time '%s' (ms, from 1)", optarg);
            c->idle_ms = (long)v;
            break;
        case OPT_JSON: c->json = 1; break;
        case OPT_EVENTS: c->events = 1; break;
        case OPT_STATUS: c->status = 1; break;
        case OPT_PERF: c->perf = 1; break;
        case OPT_ATTACH: c->attach = optarg; break;
        case OPT_FE_HOST: c->fe_host = optarg; break;
        case OPT_ENV: add_env(c, optarg); break;
        case OPT_SLURM: c->slurm = 1; break;
        case OPT_REQUIRE_ALL: c->require_all = 1; break;
        case OPT_FANOUT:
            if (parse_ulong(optarg, 65536, &c->fanout) != 0 || c->fanout < 2)
                usage_error("bad fan-out '%s' (2 to 65536)", optarg);
            break;
        case OPT_PER_NODE:
            if (parse_ulong(optarg, 65536, &c->per_node) != 0 || c->per_node == 0)
                usage_error("bad number of back-ends per node '%s' (1 to 65536)", optarg);
            break;
        case OPT_DETACH: case OPT_REATTACH: case OPT_GRACE: case OPT_PING: case OPT_PING_COUNT:
            session_or_probe_opt(c, opt, optarg);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case ':':
            usage_error("option '%s' needs an argument", argv[optind - 1]);
        default:
            if (optopt)
                usage_error("unknown option '-%c'", optopt);
            usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc && strcmp(argv[optind - 1], "--") != 0)
        usage_error("unexpected argument '%s' (back-end arguments go after --)",
                    argv[optind]);
    c->be_argv = argv + optind;   /* argv[argc] is NULL */
    check_args(c, optind < argc ? argv[optind] : NULL);
}

/* The options taken together (first: the first back-end argument, or
 * NULL); the defaults that depend on them. Exits 2 on a bad combination. */
static void check_args(struct cli *c, const char *first)
{
    if (!c->ping_count)
        c->ping_count = 3;
    if (c->grace_ms && !c->detach)
        usage_error("--grace needs --detach FILE (the file a new front-end reattaches from)");
    if (c->reattach) {
        if (c->topology || c->backend || c->slurm || c->attach || first)
            usage_error("--reattach takes a running tree over: no -t, -b, --slurm, "
                        "--attach or back-end arguments");
        parse_filter(c);
        if (c->idle_ms < 0)
            c->idle_ms = 2000;
        return;
    }
    if (!c->topology && !c->slurm)
        usage_error("missing -t TOPOLOGY (or --slurm inside a Slurm allocation)");
    if (c->topology && c->slurm)
        usage_error("-t and --slurm do not go together (--slurm makes the topology)");
    if (c->slurm && !c->backend)
        usage_error("--slurm needs -b BACKEND");
    if ((c->fanout || c->per_node) && !c->slurm)
        usage_error("--fanout and --be-per-node go with --slurm");
    if (!c->attach && !c->backend)
        usage_error("missing -b BACKEND (or --attach FILE)");
    if (c->attach && !c->backend && first)
        usage_error("unexpected argument '%s': no back-ends are launched in attach "
                    "mode", first);
    parse_filter(c);
    if (c->idle_ms < 0) {
        c->idle_ms = 2000;
        if (c->sync == TBON_SYNC_TIMEOUT && c->sync_ms + 500 > 2000)
            c->idle_ms = c->sync_ms + 500 > INT_MAX ? INT_MAX : (long)(c->sync_ms + 500);
    }
}
