/* tbon_frontend.c - the tbon_frontend program: launch a tree from a topology
 * file, open a broadcast stream with a filter, send request waves to the
 * back-ends and print what comes back (readable lines or JSON lines).
 *
 * Written against the public API alone: any packet's values, whatever its
 * format, are read one field at a time (tbon_packet_unpack_field).
 * Results go to stdout, everything else (progress, notes, errors) to stderr,
 * so `--json | jq` sees nothing but results.
 */
#include <tbon/tbon.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define PROG        "tbon_frontend"
#define EXIT_RUN    1
#define EXIT_USAGE  2
#define TAG_REQUEST TBON_FIRST_APP_TAG

/* While waiting for results, wake up this often to notice Ctrl-C and back-ends
 * that died (a null-filter wave then needs fewer packets). */
#define RECV_SLICE_MS 200

/* Human output shows at most this many elements of an array (JSON: all). */
#define HUMAN_MAX_ELEMS 64

enum { OPT_JSON = 256, OPT_ATTACH, OPT_EVENTS, OPT_IDLE, OPT_FE_HOST, OPT_ENV, OPT_SLURM,
       OPT_FANOUT, OPT_PER_NODE, OPT_REQUIRE_ALL };

/* The command line, parsed. */
struct cli {
    const char        *topology;
    const char        *backend;       /* NULL in attach mode */
    const char        *attach;        /* --attach FILE */
    const char        *fe_host;       /* --fe-host HOST */
    int                slurm;         /* --slurm */
    int                require_all;   /* --require-all */
    unsigned long      fanout, per_node; /* --fanout, --be-per-node (0: default) */
    char              *env;           /* --env NAME..., blank-separated (malloc'd) */
    const char        *filter;        /* as given */
    char              *so_path;       /* PATH.so of a plug-in (absolute), else NULL */
    const char        *so_func;       /* its function */
    const char        *filter_name;   /* "sum", or the plug-in's function */
    int                filter_id;     /* built-in id, or -1 for a plug-in */
    const char        *kind;          /* what the back-ends send: int|double|set|array */
    int                sync;          /* TBON_SYNC_* */
    unsigned long      sync_ms;       /* for TBON_SYNC_TIMEOUT */
    unsigned long      waves;
    long               idle_ms;       /* dontwait/timeout: end of a wave */
    int                json, events;
    char *const       *be_argv;       /* NULL-terminated (argv's tail) */
};

/* A wave's outcome was TBON_EFILTER: the run goes on, and exits EXIT_RUN. */
static int g_wave_failed;
static volatile sig_atomic_t g_stop;  /* set by SIGINT/SIGTERM */

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

static const char *const kinds[] = { "int", "int32", "double", "set", "array" };

/* ---- messages ---- */

static void usage_env(FILE *f);

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " -t TOPOLOGY -b BACKEND [options] [-- BACKEND ARGS...]\n"
"       " PROG " --slurm -b BACKEND [options] [-- BACKEND ARGS...]\n"
"       " PROG " -t TOPOLOGY --attach FILE [options]\n"
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
"  -k, --kind KIND       what the back-ends answer with (tbon_example_be):\n"
"                          int     \"%%ld\"   rank + wave\n"
"                          int32   \"%%d\"    rank + wave\n"
"                          double  \"%%lf\"   (rank + wave) / 4\n"
"                          set     \"%%auld\" {rank, rank %% 4, 100 + wave}\n"
"                          array   \"%%ald\"  {rank, wave}\n"
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
"  " PROG " -t my.top -b ./my_be -f ./my_filter.so:my_sum -- --my-be-option\n",
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

static void parse_args(struct cli *c, int argc, char **argv)
{
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
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
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
            c->kind = NULL;
            for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
                if (strcmp(optarg, kinds[i]) == 0)
                    c->kind = kinds[i];
            if (!c->kind)
                usage_error("bad kind '%s' (int, int32, double, set or array)", optarg);
            break;
        case OPT_IDLE:
            if (parse_ulong(optarg, INT_MAX, &v) != 0 || v == 0)
                usage_error("bad idle time '%s' (ms, from 1)", optarg);
            c->idle_ms = (long)v;
            break;
        case OPT_JSON: c->json = 1; break;
        case OPT_EVENTS: c->events = 1; break;
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

/* path made absolute (without resolving symbolic links: a multi-call
 * program looks at its name). A malloc'd string, or NULL. */
static char *absolute(const char *path)
{
    char cwd[PATH_MAX], *out;
    if (path[0] == '/')
        return strdup(path);
    if (!getcwd(cwd, sizeof cwd) || asprintf(&out, "%s/%s", cwd, path) < 0)
        return NULL;
    return out;
}

/* The back-end program as the launcher needs it: a name without '/' is
 * searched in PATH and then the current directory, as a shell would, and a
 * path is made absolute so the commnodes find it whatever their directory.
 * Returns a malloc'd string, or NULL if it is not an executable here (it is
 * then passed as given: it may exist on the hosts of the back-ends). */
static char *resolve_backend(const char *exe)
{
    if (strchr(exe, '/'))
        return access(exe, X_OK) == 0 ? absolute(exe) : NULL;
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        char buf[PATH_MAX];
        if (n > 0 && (size_t)snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, exe) < sizeof buf &&
            access(buf, X_OK) == 0)
            return absolute(buf);
        path = end ? end + 1 : NULL;
    }
    return access(exe, X_OK) == 0 ? absolute(exe) : NULL;
}

/* ---- start-up progress ---- */

struct progress {
    struct timespec t0, last;
    int             tty;        /* stderr is a terminal: overwrite one line */
    int             open;       /* a progress line without its newline is on screen */
    int             shown;      /* printed at least once */
    size_t          total;
    const char     *attach;     /* attach mode: announce when the file exists */
    int             announced;
};

static long ms_since(const struct timespec *a, const struct timespec *b)
{
    return (long)(b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;
}

/* The progress hook of tbon_fe_create (on our thread, inside the call): a
 * line "starting tree: R/T processes", only once start-up has taken 0.5 s,
 * at most 10 times a second on a terminal (overwritten with \r) and once a
 * second otherwise (one line each). */
static void on_progress(void *arg, size_t ready, size_t total)
{
    struct progress *p = arg;
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    p->total = total;
    if (p->attach && !p->announced && access(p->attach, F_OK) == 0) {
        fprintf(stderr, "%sattach file %s is ready: start the back-ends now\n",
                p->open ? "\n" : "", p->attach);
        p->open = 0;
        p->announced = 1;
    }
    if (ms_since(&p->t0, &now) < 500)
        return;
    if (p->shown && ms_since(&p->last, &now) < (p->tty ? 100 : 1000))
        return;
    if (p->tty) {
        fprintf(stderr, "\rstarting tree: %zu/%zu processes ", ready, total);
        p->open = 1;
    } else {
        fprintf(stderr, "starting tree: %zu/%zu processes\n", ready, total);
    }
    fflush(stderr);
    p->shown = 1;
    p->last = now;
}

/* The nodes left out of the start-up, named on stderr (their failures are
 * among the events too). */
static void note_missing(tbon_net_t *net)
{
    tbon_rank_t r[16];
    int n = tbon_fe_missing(net, r, 16);
    if (n <= 0)
        return;
    fprintf(stderr, PROG ": note: %d node%s left out of the start-up (rank%s", n,
            n == 1 ? "" : "s", n == 1 ? "" : "s");
    for (int i = 0; i < n && i < 16; i++)
        fprintf(stderr, "%s %u", i ? "," : "", (unsigned)r[i]);
    fprintf(stderr, "%s); the tree runs without them (--require-all makes that an error)\n",
            n > 16 ? ", ..." : "");
}

/* After tbon_fe_create: end the progress line, if one was shown. */
static void progress_done(struct progress *p, int ok)
{
    struct timespec now;

    if (!p->shown)
        return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (ok)   /* on a terminal this overwrites the progress line */
        fprintf(stderr, "%sstarted tree: %zu processes in %.1f s     \n", p->open ? "\r" : "",
                p->total, (double)ms_since(&p->t0, &now) / 1000.0);
    else if (p->open)
        fputc('\n', stderr);
    p->open = 0;
}

/* ---- printing packets ---- */

/* s[0..n) as a JSON string. jansson takes UTF-8 only and a packet string
 * is bytes: a byte outside a valid UTF-8 sequence becomes U+FFFD, so that
 * every line stays valid JSON. NULL when out of memory. */
static json_t *json_bytes(const uint8_t *s, size_t n)
{
    json_t *j = json_stringn((const char *)s, n);
    if (j)
        return j;
    char *u = malloc(3 * n + 1);
    if (!u)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        /* The length the first byte announces; jansson says whether the
         * sequence is valid (no overlong form, no surrogate). */
        size_t len = s[i] < 0xc0 ? 1 : s[i] < 0xe0 ? 2 : s[i] < 0xf0 ? 3 : 4;
        json_t *seq = s[i] >= 0x80 && len <= n - i ? json_stringn((const char *)s + i, len)
                                                   : NULL;
        if (s[i] < 0x80 || seq) {
            memcpy(u + k, s + i, len);
            k += len;
            i += len;
        } else {
            memcpy(u + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        }
        json_decref(seq);
    }
    j = json_stringn(u, k);
    free(u);
    return j;
}

/* A string in quotes, escaped as in JSON (readable lines show strings so). */
static void print_string(FILE *f, const uint8_t *s, size_t n)
{
    json_t *j = json_bytes(s, n);
    if (!j || json_dumpf(j, f, JSON_ENCODE_ANY) != 0)
        fputs("\"?\"", f);
    json_decref(j);
}

/* A field of a packet of any format, copied out through the public API
 * (tbon_packet_unpack_field): its conversion from the packet's format, and
 * its values in host order. */
struct field {
    char   kind;        /* 'i' signed (%c too), 'u' unsigned, 'f' float, 's' string */
    int    array;       /* one of the %a conversions */
    size_t size;        /* bytes per number */
    size_t count;       /* elements (1 for a scalar) */
    void  *data;        /* the numbers; the string; for %as the strings */
    union { int8_t c; uint8_t uc; int16_t hd; uint16_t uhd; int32_t d; uint32_t ud;
            int64_t ld; uint64_t uld; float f; double lf; } one;   /* a scalar's room */
};

/* The element types, as a conversion names them after '%' or "%a". */
static const struct {
    const char *name;
    char        kind;
    size_t      size;
} elems[] = {
    { "c", 'i', 1 }, { "uc", 'u', 1 }, { "hd", 'i', 2 }, { "uhd", 'u', 2 }, { "d", 'i', 4 },
    { "ud", 'u', 4 }, { "ld", 'i', 8 }, { "uld", 'u', 8 }, { "f", 'f', 4 }, { "lf", 'f', 8 },
    { "s", 's', 0 },
};

/* Copy a scalar of element type e (elems[e]) into fl->one. */
static int unpack_scalar(const tbon_packet_t *p, size_t i, const char *conv, size_t e,
                         struct field *fl)
{
    switch (e) {
    case 0:  return tbon_packet_unpack_field(p, i, conv, (char *)&fl->one.c);
    case 1:  return tbon_packet_unpack_field(p, i, conv, &fl->one.uc);
    case 2:  return tbon_packet_unpack_field(p, i, conv, &fl->one.hd);
    case 3:  return tbon_packet_unpack_field(p, i, conv, &fl->one.uhd);
    case 4:  return tbon_packet_unpack_field(p, i, conv, &fl->one.d);
    case 5:  return tbon_packet_unpack_field(p, i, conv, &fl->one.ud);
    case 6:  return tbon_packet_unpack_field(p, i, conv, &fl->one.ld);
    case 7:  return tbon_packet_unpack_field(p, i, conv, &fl->one.uld);
    case 8:  return tbon_packet_unpack_field(p, i, conv, &fl->one.f);
    case 9:  return tbon_packet_unpack_field(p, i, conv, &fl->one.lf);
    default: return tbon_packet_unpack_field(p, i, conv, (char **)&fl->data);
    }
}

/* Copy an array of element type e (elems[e]) into fl->data, fl->count. */
static int unpack_array(const tbon_packet_t *p, size_t i, const char *conv, size_t e,
                        struct field *fl)
{
    void **d = &fl->data;
    size_t *n = &fl->count;
    switch (e) {
    case 0:  return tbon_packet_unpack_field(p, i, conv, (char **)d, n);
    case 1:  return tbon_packet_unpack_field(p, i, conv, (unsigned char **)d, n);
    case 2:  return tbon_packet_unpack_field(p, i, conv, (int16_t **)d, n);
    case 3:  return tbon_packet_unpack_field(p, i, conv, (uint16_t **)d, n);
    case 4:  return tbon_packet_unpack_field(p, i, conv, (int32_t **)d, n);
    case 5:  return tbon_packet_unpack_field(p, i, conv, (uint32_t **)d, n);
    case 6:  return tbon_packet_unpack_field(p, i, conv, (int64_t **)d, n);
    case 7:  return tbon_packet_unpack_field(p, i, conv, (uint64_t **)d, n);
    case 8:  return tbon_packet_unpack_field(p, i, conv, (float **)d, n);
    case 9:  return tbon_packet_unpack_field(p, i, conv, (double **)d, n);
    default: return tbon_packet_unpack_field(p, i, conv, (char ***)d, n);
    }
}

/* The number of fields of p: its canonical format has one conversion per
 * field, single spaces between them. */
static size_t nfields(const tbon_packet_t *p)
{
    const char *fmt = tbon_packet_format(p);
    size_t n = fmt && *fmt ? 1 : 0;
    for (const char *s = fmt; n && *s; s++)
        n += *s == ' ';
    return n;
}

/* Field i of p into *fl (release it with field_free): 0, or -1 when it
 * cannot be read (no such field, out of memory). */
static int field_get(const tbon_packet_t *p, size_t i, struct field *fl)
{
    const char *s = tbon_packet_format(p);
    memset(fl, 0, sizeof *fl);
    for (size_t k = 0; s && *s && k < i; s++)
        k += *s == ' ';
    if (!s || *s != '%')
        return -1;
    char conv[8];
    size_t len = strcspn(s, " ");
    if (len >= sizeof conv)
        return -1;
    memcpy(conv, s, len);
    conv[len] = '\0';
    fl->array = conv[1] == 'a';
    const char *name = conv + 1 + fl->array;
    size_t e = 0;
    while (e < sizeof elems / sizeof elems[0] && strcmp(elems[e].name, name) != 0)
        e++;
    if (e == sizeof elems / sizeof elems[0])
        return -1;
    fl->kind = elems[e].kind;
    fl->size = elems[e].size;
    fl->count = fl->array ? 0 : 1;
    int rc = fl->array ? unpack_array(p, i, conv, e, fl) : unpack_scalar(p, i, conv, e, fl);
    if (!fl->array && fl->kind != 's')
        fl->data = &fl->one;
    return rc == 0 ? 0 : -1;
}

static void field_free(struct field *fl)
{
    if (fl->array && fl->kind == 's')
        for (size_t k = 0; k < fl->count; k++)
            free(((char **)fl->data)[k]);
    if (fl->data != &fl->one)
        free(fl->data);
}

/* Element k of an integer field as a signed value (an unsigned one's bits),
 * or of a floating one. */
static int64_t elem_i64(const struct field *fl, size_t k)
{
    const void *d = fl->data;
    if (fl->kind == 'u')
        return (int64_t)(fl->size == 1 ? ((const uint8_t *)d)[k]
                         : fl->size == 2 ? ((const uint16_t *)d)[k]
                         : fl->size == 4 ? ((const uint32_t *)d)[k] : ((const uint64_t *)d)[k]);
    return fl->size == 1 ? ((const int8_t *)d)[k] : fl->size == 2 ? ((const int16_t *)d)[k]
           : fl->size == 4 ? ((const int32_t *)d)[k] : ((const int64_t *)d)[k];
}

static double elem_f64(const struct field *fl, size_t k)
{
    return fl->size == 4 ? ((const float *)fl->data)[k] : ((const double *)fl->data)[k];
}

/* Element k of a string field: its bytes (a %s has one). */
static const char *elem_str(const struct field *fl, size_t k)
{
    return fl->array ? ((char *const *)fl->data)[k] : fl->data;
}

/* One numeric element k of fl. */
static void print_number(FILE *f, const struct field *fl, size_t k)
{
    if (fl->kind == 'f')
        fprintf(f, "%.10g", elem_f64(fl, k));
    else if (fl->kind == 'i')
        fprintf(f, "%" PRId64, elem_i64(fl, k));
    else
        fprintf(f, "%" PRIu64, (uint64_t)elem_i64(fl, k));
}

/* Field i of p: a number, a string, or [elements] for an array. */
static void print_field(FILE *f, const tbon_packet_t *p, size_t i)
{
    struct field fl;

    if (field_get(p, i, &fl) != 0) {
        field_free(&fl);
        fputc('?', f);
        return;
    }
    if (!fl.array) {
        if (fl.kind == 's')
            print_string(f, (const uint8_t *)fl.data, strlen(fl.data));
        else
            print_number(f, &fl, 0);
        field_free(&fl);
        return;
    }
    size_t shown = fl.count <= HUMAN_MAX_ELEMS ? fl.count : HUMAN_MAX_ELEMS;
    fputc('[', f);
    for (size_t k = 0; k < shown; k++) {
        if (k)
            fputs(", ", f);
        if (fl.kind == 's')
            print_string(f, (const uint8_t *)elem_str(&fl, k), strlen(elem_str(&fl, k)));
        else
            print_number(f, &fl, k);
    }
    if (shown < fl.count)
        fprintf(f, ", ... (%zu more)", fl.count - shown);
    fputc(']', f);
    field_free(&fl);
}

/* Every field of p, comma-separated. */
static void print_values(FILE *f, const tbon_packet_t *p)
{
    size_t n = nfields(p);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputs(", ", f);
        print_field(f, p, i);
    }
    if (!n)
        fputs("(no values)", f);
}

/* ---- the same as JSON values ---- */

/* One numeric element k of fl; NULL when out of memory. */
static json_t *json_number(const struct field *fl, size_t k)
{
    if (fl->kind == 'f') {
        double d = elem_f64(fl, k);
        return isfinite(d) ? json_real(d) : json_null();   /* JSON has no NaN or infinity */
    }
    if (fl->kind == 'i')
        return json_integer(elem_i64(fl, k));
    /* jansson's integers are signed 64-bit: a larger unsigned value is
     * written as a double (which is what most JSON readers make of it). */
    uint64_t u = (uint64_t)elem_i64(fl, k);
    return u <= INT64_MAX ? json_integer((json_int_t)u) : json_real((double)u);
}

/* Element k of fl (a string or a number); NULL when out of memory. */
static json_t *json_elem(const struct field *fl, size_t k)
{
    if (fl->kind != 's')
        return json_number(fl, k);
    const char *s = elem_str(fl, k);
    return json_bytes((const uint8_t *)s, strlen(s));
}

/* Field i of p: a number, a string, an array of every element, or null
 * when it cannot be read. NULL when out of memory. */
static json_t *json_field(const tbon_packet_t *p, size_t i)
{
    struct field fl;

    if (field_get(p, i, &fl) != 0) {
        field_free(&fl);
        return json_null();
    }
    json_t *a = fl.array ? json_array() : json_elem(&fl, 0);
    for (size_t k = 0; fl.array && a && k < fl.count; k++) {
        if (json_array_append_new(a, json_elem(&fl, k)) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    field_free(&fl);
    return a;
}

/* Every field of p as a JSON array; NULL when out of memory. */
static json_t *json_values(const tbon_packet_t *p)
{
    json_t *a = json_array();
    for (size_t i = 0, n = nfields(p); a && i < n; i++) {
        if (json_array_append_new(a, json_field(p, i)) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

/* o on one line of stdout, compact, and released; what (a result, an
 * event) names it on stderr if it cannot be made (o NULL) or written. */
static void print_json_line(json_t *o, const char *what)
{
    if (!o || json_dumpf(o, stdout, JSON_COMPACT) != 0)
        fprintf(stderr, PROG ": cannot write %s as JSON (out of memory)\n", what);
    else
        putchar('\n');
    json_decref(o);
}

/* How a result was made, for the readable line. */
enum origin { ORIGIN_ALL, ORIGIN_BACKEND, ORIGIN_PARTIAL, ORIGIN_LATE };

/* The events taken from the library since the last drain_events: those of
 * the wave under way (a result may need them), printed after it. */
static tbon_event_t g_ev[256];
static size_t g_nev;

static void take_events(tbon_net_t *net)
{
    while (g_nev < sizeof g_ev / sizeof g_ev[0] &&
           tbon_net_next_event(net, &g_ev[g_nev], 0) == 0)
        g_nev++;
}

/* The nodes whose subtree the waves in flight may miss (TBON_EV_DATA_LOST
 * since the last drain), up to cap of them; returns how many. */
static size_t lossy_subtrees(tbon_rank_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < g_nev; i++)
        if (g_ev[i].type == TBON_EV_DATA_LOST) {
            if (n < cap)
                out[n] = g_ev[i].rank;
            n++;
        }
    return n;
}

static void print_ranks(const char *what, const tbon_rank_t *r, size_t n)
{
    if (!n)
        return;
    printf("; %s", what);
    for (size_t i = 0; i < n && i < 8; i++)
        printf(" %" PRIu32, r[i]);
    if (n > 8)
        printf(" and %zu more", n - 8);
}

/* What the result p holds, from its coverage (tbon_packet_covered): " (from
 * 16 back-ends)", or " (from 15 of 16 back-ends: missing 13)"; then the
 * back-ends cut off from the tree, if any ("; cut off: 13"), and the
 * subtrees a wave in flight during a failure may lack ("; may miss the
 * subtree of: 2"). */
static void print_from(const tbon_packet_t *p, const tbon_rank_t *cut, size_t ncut)
{
    tbon_rank_t lossy[8], miss[8];
    size_t nl = lossy_subtrees(lossy, 8);
    size_t n = tbon_packet_covered(p, NULL, 0), m = tbon_packet_expected(p, NULL, 0);
    size_t nm = tbon_packet_missing(p, miss, 8);
    if (nm == 0) {
        printf(" (from %zu back-end%s", n, n == 1 ? "" : "s");
    } else {
        printf(" (from %zu of %zu back-end%s: missing", n, m, m == 1 ? "" : "s");
        for (size_t i = 0; i < nm && i < 8; i++)
            printf(" %" PRIu32, miss[i]);
        if (nm > 8)
            printf(" and %zu more", nm - 8);
    }
    print_ranks("cut off:", cut, ncut);
    print_ranks("may miss the subtree of:", lossy, nl);
    printf(")\n");
}

/* One result line on stdout: JSON, or readable according to origin (n: the
 * back-ends of a complete wave, the result's number within its wave, or for
 * a late one the wave under way when it came). */
static void print_result(const struct cli *c, unsigned long wave, const tbon_packet_t *p,
                         enum origin how, size_t n, const tbon_rank_t *cut, size_t ncut)
{
    if (c->json) {
        /* The keys in this order (jansson keeps insertion order). */
        const char *fmt = tbon_packet_format(p);
        tbon_rank_t src = tbon_packet_source(p);
        print_json_line(json_pack("{s:I, s:I, s:o, s:o, s:o}",
                                  "wave", (json_int_t)wave,
                                  "stream", (json_int_t)tbon_packet_stream(p),
                                  "source", src == TBON_RANK_NONE ? json_null()
                                                                  : json_integer(src),
                                  "format", json_bytes((const uint8_t *)fmt, strlen(fmt)),
                                  "values", json_values(p)),
                        "a result");
    } else if (how == ORIGIN_BACKEND) {
        printf("wave %lu: back-end %" PRIu32 " sent ", wave, tbon_packet_source(p));
        print_values(stdout, p);
        putchar('\n');
    } else {
        printf("wave %lu: %s = ", wave, c->filter_name);
        print_values(stdout, p);
        if (how == ORIGIN_ALL)
            print_from(p, cut, ncut);
        else if (how == ORIGIN_LATE)
            printf(" (late: came during wave %zu)\n", n);
        else
            printf(" (result %zu of the wave)\n", n);
    }
    fflush(stdout);
}

/* Print the membership events that are waiting (none if --events is off). */
static void drain_events(const struct cli *c, tbon_net_t *net)
{
    static const char *const names[] = {
        [TBON_EV_NODE_FAILED] = "node_failed", [TBON_EV_NODE_ADOPTED] = "node_adopted",
        [TBON_EV_NODE_JOINED] = "node_joined", [TBON_EV_NODE_LEFT] = "node_left",
        [TBON_EV_VIEW_STABLE] = "view_stable", [TBON_EV_DATA_LOST] = "data_lost",
        [TBON_EV_NODE_SUSPECT] = "node_suspect", [TBON_EV_NODE_ALIVE] = "node_alive",
        [TBON_EV_FILTER_ERROR] = "filter_error",
    };
    take_events(net);
    size_t nev = g_nev;
    g_nev = 0;
    for (size_t k = 0; c->events && k < nev; k++) {
        const tbon_event_t ev = g_ev[k];
        const char *name = (unsigned)ev.type < sizeof names / sizeof names[0] &&
                           names[ev.type] ? names[ev.type] : "unknown";
        if (c->json && ev.type == TBON_EV_FILTER_ERROR) {
            print_json_line(json_pack("{s:s, s:I, s:I, s:I, s:i, s:s}", "event", name,
                                      "rank", (json_int_t)ev.rank,
                                      "stream", (json_int_t)ev.stream,
                                      "filter", (json_int_t)ev.filter,
                                      "signal", ev.signal, "detail", ev.detail),
                            "an event");
            continue;
        }
        if (c->json) {
            print_json_line(json_pack("{s:s, s:I, s:I, s:I, s:I}", "event", name,
                                      "rank", (json_int_t)ev.rank,
                                      "parent", (json_int_t)ev.parent,
                                      "incarnation", (json_int_t)ev.incarnation,
                                      "view_version", (json_int_t)ev.view_version),
                            "an event");
            continue;
        }
        switch (ev.type) {
        case TBON_EV_NODE_FAILED:
            printf("event: node %" PRIu32 " failed (incarnation %" PRIu32 ")\n",
                   ev.rank, ev.incarnation);
            break;
        case TBON_EV_NODE_ADOPTED:
            printf("event: node %" PRIu32 " adopted by %" PRIu32 "\n", ev.rank, ev.parent);
            break;
        case TBON_EV_NODE_JOINED:
            printf("event: node %" PRIu32 " joined under %" PRIu32 "\n", ev.rank, ev.parent);
            break;
        case TBON_EV_NODE_LEFT:
            printf("event: node %" PRIu32 " left\n", ev.rank);
            break;
        case TBON_EV_VIEW_STABLE:
            printf("event: view %" PRIu64 " is stable\n", ev.view_version);
            break;
        case TBON_EV_DATA_LOST:
            printf("event: waves in flight may miss the subtree of node %" PRIu32
                   " (its stream keeps no recoverable state)\n", ev.rank);
            break;
        case TBON_EV_NODE_SUSPECT:
            printf("event: node %" PRIu32 " suspected (silent; seen by %" PRIu32 ")\n",
                   ev.rank, ev.parent);
            break;
        case TBON_EV_NODE_ALIVE:
            printf("event: node %" PRIu32 " is alive again (no longer suspected)\n", ev.rank);
            break;
        case TBON_EV_FILTER_ERROR:
            printf("event: a filter %s on node %" PRIu32 ": %s\n",
                   ev.signal ? "crashed" : "hung", ev.rank, ev.detail);
            break;
        default:
            printf("event: type %d, node %" PRIu32 "\n", (int)ev.type, ev.rank);
            break;
        }
    }
    fflush(stdout);
}

/* ---- waves ---- */

/* Say why receiving failed; returns EXIT_RUN. */
static int recv_failed(const struct cli *c, tbon_net_t *net, unsigned long wave, int rc)
{
    const char *why = tbon_net_error(net);
    if (rc == TBON_ECLOSED)
        fprintf(stderr, PROG ": wave %lu: the network shut down\n", wave);
    else
        fprintf(stderr, PROG ": wave %lu: %s%s%s\n", wave, tbon_strerror(rc),
                why && *why ? ": " : "", why && *why ? why : "");
    /* The usual cause: answers in a format the filter does not take. */
    if (rc == TBON_EFILTER && why && !strstr(why, "crashed") && !strstr(why, "past its limit"))
        fprintf(stderr, PROG ": note: the back-ends were asked for kind '%s'; -k chooses "
                "another (int, int32, double, set, array; see --help)\n", c->kind);
    return EXIT_RUN;
}

/* Receive the next result of s: waits at most timeout_ms (-1: for ever) in
 * slices, so Ctrl-C is noticed. Returns as tbon_stream_recv, or TBON_ECLOSED
 * with g_stop set. */
static int recv_result(tbon_stream_t *s, tbon_packet_t **pkt, long timeout_ms)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int slice = RECV_SLICE_MS;
        if (timeout_ms >= 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            long left = timeout_ms - ms_since(&t0, &now);
            if (left <= 0)
                return TBON_ETIMEOUT;
            if (left < slice)
                slice = (int)left;
        }
        int rc = tbon_stream_recv(s, pkt, slice);
        if (rc != TBON_ETIMEOUT)
            return rc;
        if (g_stop)
            return TBON_ECLOSED;
    }
}

static int no_backends(unsigned long wave)
{
    fprintf(stderr, PROG ": wave %lu: no back-end is left to answer (every one failed; "
            "--events shows which)\n", wave);
    return EXIT_RUN;
}

/* A wave lost whole (TBON_ELOST): every part of it died with failed nodes. */
static int lost_wave(tbon_net_t *net, unsigned long wave)
{
    if (tbon_net_num_backends(net) == 0)
        return no_backends(wave);
    fprintf(stderr, PROG ": wave %lu: lost whole: every part of it died with failed nodes (%s; "
            "--events shows which)\n", wave, tbon_net_error(net));
    return EXIT_RUN;
}

/* One wave: send the request, then print its results. Returns 0 or EXIT_RUN. */
static int run_wave(const struct cli *c, tbon_net_t *net, tbon_stream_t *s, unsigned long w)
{
    tbon_packet_t *p = NULL;
    if (tbon_net_num_backends(net) == 0)
        return no_backends(w);
    int rc = tbon_stream_send(s, TAG_REQUEST, "%ud %s", (uint32_t)w, c->kind);
    if (rc != 0) {
        fprintf(stderr, PROG ": wave %lu: sending the request: %s %s\n", w,
                tbon_strerror(rc), tbon_net_error(net));
        return EXIT_RUN;
    }

    if (c->filter_id == TBON_FILTER_NULL) {
        /* Every answer comes up unchanged: one per live back-end. */
        size_t got = 0;
        while (got < tbon_net_num_backends(net)) {
            rc = recv_result(s, &p, RECV_SLICE_MS);
            if (rc == TBON_ETIMEOUT)
                continue;    /* re-read the number of live back-ends */
            if (rc == TBON_ELOST)
                return lost_wave(net, w);
            if (rc != 0)
                return g_stop ? EXIT_RUN : recv_failed(c, net, w, rc);
            print_result(c, w, p, ORIGIN_BACKEND, 0, NULL, 0);
            tbon_packet_unref(p);
            got++;
        }
        return 0;
    }

    if (c->sync == TBON_SYNC_WAITFORALL) {
        /* In slices: a wave that no back-end is left to answer (they all
         * failed, or their host fell off the network) ends with an error
         * instead of a wait for ever. */
        for (;;) {
            while ((rc = recv_result(s, &p, RECV_SLICE_MS)) == TBON_ETIMEOUT)
                if (tbon_net_num_backends(net) == 0)
                    return no_backends(w);
            /* Wave w answers request w + 1 (the FE numbers a stream's
             * requests from 1). A result of an earlier request is a second
             * wave for it (a back-end sent two packets for one request):
             * said, and not taken for this wave's. */
            uint64_t q = rc == 0 ? tbon_stream_request(s) : 0;
            if (q == 0 || q > w)
                break;
            fprintf(stderr, PROG ": wave %lu: a second result of wave %llu (a back-end "
                    "answered it twice) left out\n", w, (unsigned long long)(q - 1));
            tbon_packet_unref(p);
            p = NULL;
        }
        if (rc == TBON_ELOST)
            return lost_wave(net, w);
        if (rc == TBON_EFILTER && !g_stop) {
            /* This wave's outcome: a filter failed over its input. The
             * next waves go on (the run's status says one failed). */
            recv_failed(c, net, w, rc);
            g_wave_failed = 1;
            return 0;
        }
        if (rc != 0)
            return g_stop ? EXIT_RUN : recv_failed(c, net, w, rc);
        /* The back-ends cut off from the tree (their parent failed, no
         * adoption yet) are not in the result: say so, by rank. */
        tbon_rank_t cut[8];
        int ncut = tbon_fe_cut_off(net, cut, 8);
        take_events(net);
        ncut = ncut < 0 ? 0 : ncut;
        print_result(c, w, p, ORIGIN_ALL, 0, cut, (size_t)ncut);
        tbon_packet_unref(p);
        return 0;
    }

    /* dontwait / timeout: partial results; the wave ends after an idle gap.
     * A result of an earlier request (wave w answers request w + 1) came
     * after its wave's gap: it goes under its own wave, marked late, and does
     * not count for this one. */
    size_t n = 0;
    for (;;) {
        rc = recv_result(s, &p, c->idle_ms);
        if (rc == TBON_ETIMEOUT)
            break;
        if (rc != 0)
            return g_stop ? EXIT_RUN : recv_failed(c, net, w, rc);
        uint64_t q = tbon_stream_request(s);
        if (q != 0 && q <= w)
            print_result(c, (unsigned long)(q - 1), p, ORIGIN_LATE, w, NULL, 0);
        else
            print_result(c, w, p, ORIGIN_PARTIAL, ++n, NULL, 0);
        tbon_packet_unref(p);
    }
    if (n == 0) {
        fprintf(stderr, PROG ": wave %lu: no result within %ld ms\n", w, c->idle_ms);
        return EXIT_RUN;
    }
    return 0;
}

/* Load the plug-in if any, open the broadcast stream with the filter and
 * sync mode, and say what was opened (stderr). The stream, or NULL after
 * printing why. */
static tbon_stream_t *open_stream(const struct cli *c, tbon_net_t *net)
{
    int fid = c->filter_id;
    if (c->so_path) {
        fid = tbon_fe_load_filter(net, c->so_path, c->so_func);
        if (fid < 0) {
            fprintf(stderr, PROG ": loading filter %s from %s: %s\n", c->so_func,
                    c->so_path, tbon_net_error(net));
            return NULL;
        }
    }
    tbon_stream_t *s = tbon_fe_stream_new(net, tbon_fe_broadcast_comm(net), fid,
                                          c->sync, TBON_FILTER_NULL);
    if (!s) {
        fprintf(stderr, PROG ": creating the stream: %s\n", tbon_net_error(net));
        return NULL;
    }
    char sync[32];
    if (c->sync == TBON_SYNC_TIMEOUT) {
        int rc = tbon_stream_set_filter_params(s, TBON_FILTER_PARAM_SYNC, "%ud",
                                               (uint32_t)c->sync_ms);
        if (rc != 0) {
            fprintf(stderr, PROG ": setting the sync timeout: %s %s\n",
                    tbon_strerror(rc), tbon_net_error(net));
            return NULL;
        }
        snprintf(sync, sizeof sync, "timeout:%lu", c->sync_ms);
    } else {
        snprintf(sync, sizeof sync, "%s",
                 c->sync == TBON_SYNC_WAITFORALL ? "waitforall" : "dontwait");
    }
    fprintf(stderr, PROG ": %zu back-ends; stream %" PRIu32 ": filter %s, %s, "
            "back-ends answer '%s'\n", tbon_net_num_backends(net), tbon_stream_id(s),
            c->filter_name, sync, c->kind);
    return s;
}

/* SIGINT/SIGTERM: the first asks the main loop to shut the tree down (it
 * polls g_stop between slices of waiting); the second kills us at once. */
static void on_signal(int sig)
{
    static const char msg[] = "\n" PROG ": interrupted, shutting the tree down "
                              "(again to quit at once)\n";
    if (g_stop) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_stop = 1;
    ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)r;
}

/* Parse, start the tree, run the waves, shut the tree down. */
int main(int argc, char **argv)
{
    struct cli c;
    tbon_error_t err = { 0 };
    tbon_fe_options_t opts = { 0 };
    struct progress prog = { 0 };
    char *backend = NULL;
    tbon_net_t *net = NULL;
    int status = EXIT_RUN;

    parse_args(&c, argc, argv);

    struct sigaction sa = { 0 };
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if (c.backend) {
        backend = resolve_backend(c.backend);
    } else {
        fprintf(stderr, PROG ": attach mode: the tree's commnodes start now and write "
                "%s; then start, for each leaf of %s, a back-end that calls\n"
                "  tbon_be_attach(\"%s\", RANK, &err)   (RANK: the leaf's rank, "
                "breadth-first from 0 at the front-end)\n"
                "for example: tbon_example_be --attach %s --rank RANK\n",
                c.attach, c.topology, c.attach, c.attach);
    }

    clock_gettime(CLOCK_MONOTONIC, &prog.t0);
    prog.tty = isatty(STDERR_FILENO);
    prog.attach = c.backend ? NULL : c.attach;
    opts.progress = on_progress;
    opts.progress_arg = &prog;
    opts.attach_file = c.attach;
    opts.fe_host = c.fe_host;
    opts.slurm = c.slurm;
    opts.slurm_fanout = (unsigned)c.fanout;
    opts.slurm_be_per_node = (unsigned)c.per_node;
    opts.env = c.env;
    opts.require_all = c.require_all;
    net = tbon_fe_create(c.topology, c.backend ? (backend ? backend : c.backend) : NULL,
                         (const char *const *)c.be_argv, &opts, &err);
    progress_done(&prog, net != NULL);
    if (!net) {
        fprintf(stderr, PROG ": %s\n", err.msg[0] ? err.msg : tbon_strerror(err.code));
        /* The commnode that failed to start it logs why; say the likely cause. */
        if (c.backend && !backend)
            fprintf(stderr, PROG ": note: back-end '%s' is %s on this machine\n", c.backend,
                    strchr(c.backend, '/') ? "not an executable file"
                                           : "not in PATH nor in the current directory");
        goto out;
    }
    if (g_stop)
        goto out;
    note_missing(net);

    tbon_stream_t *s = open_stream(&c, net);
    if (!s)
        goto out;

    drain_events(&c, net);
    status = 0;
    for (unsigned long w = 0; w < c.waves && !status && !g_stop; w++) {
        status = run_wave(&c, net, s, w);
        drain_events(&c, net);
    }
    if (g_stop || (!status && g_wave_failed))
        status = EXIT_RUN;

out:
    tbon_net_destroy(net);
    free(backend);
    free(c.so_path);
    return status;
}
