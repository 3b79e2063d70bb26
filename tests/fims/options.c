/* options.c - tbon_fims's command line (usage() says it all) and its
 * schedule of failures (--schedule T:KIND,...), parsed and sorted. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fims.h"

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " -t TOPOLOGY [--duration S] [--rate HZ] [--schedule SPEC]\n"
"                 [--dir DIR] [--seed N] [--heartbeat MS] [--csv FILE] [--timeout S]\n"
"\n"
"The failure injection and management service: runs the integer-union\n"
"computation on the tree of TOPOLOGY (this program at every leaf), kills\n"
"commnodes with SIGKILL on a schedule, reports how long the tree took to\n"
"recover, and checks that the front-end's output set is exactly the union of\n"
"what the back-ends sent, with no element reported as new twice, every\n"
"element in a result whose coverage (tbon_packet_covered) holds the back-end\n"
"that sent it (its own file says which), a failure event for every kill and\n"
"no process of the run left at the end.\n"
"\n"
"Options:\n"
"  -t, --topology FILE  the tree (text or XML topology)\n"
"  --duration S         how long the back-ends send (default 10)\n"
"  --rate HZ            packets per second per back-end (default 10)\n"
"  --schedule SPEC      failures to inject: comma-separated T:KIND, T in seconds\n"
"                       since the start; KIND is one of\n"
"                         one          one random live commnode\n"
"                         several=K    K random live commnodes at once\n"
"                         depth1       a child of the front-end\n"
"                         adopter      a commnode, then %d ms later the node most\n"
"                                      likely to adopt its first orphan\n"
"                         parent       a commnode and its parent at once\n"
"                         every=P      a random commnode every P seconds from T\n"
"                                      to the end of --duration\n"
"                       e.g. 2:one,5:several=2,8:every=2\n"
"  --dir DIR            where the back-ends write be-RANK.txt (default: a new\n"
"                       directory in $TMPDIR, removed when the run passes)\n"
"  --seed N             seed of every random choice (default 1)\n"
"  --heartbeat MS       the tree's heartbeat period (default: the library's)\n"
"  --csv FILE           one row per recovered orphan: injection, victim,\n"
"                       orphan, adopter, the four parts in us, total\n"
"  --timeout S          kill everything and exit 1 after S seconds\n"
"                       (default: duration + 120)\n"
"  -h, --help           show this help\n"
"\n"
"Hosts: a topology may span hosts. The tool starts an agent (this program,\n"
"--agent) on every other host of the topology through the remote shell the\n"
"tree uses ($TBON_RSH, default ssh); a victim is killed, and leftovers are\n"
"looked for, on its own host, by the --tbon-rank and --tbon-session words\n"
"of its command line. DIR must be on a file system every host shares.\n"
"A back-end that fails (its host cut off, say) is reported with the values\n"
"it sent that no one delivered: LOST, by rank; a value of a live back-end\n"
"that did not arrive is missing, and fails the run. A schedule under which\n"
"nothing was killed fails the run.\n"
"\n"
"Exit status: 0 when every check holds, 1 when one does not, 2 for bad usage.\n",
            ADOPTER_DELAY_MS);
}

__attribute__((noreturn, format(printf, 1, 2)))
static void bad_usage(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, PROG ": ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(" PROG " --help shows the options)\n");
    exit(2);
}

/* A finite number > 0 (>= 0 if zero_ok), or a usage error naming opt. */
static double parse_pos(const char *opt, const char *s, int zero_ok)
{
    char *end;
    errno = 0;
    double v = s && *s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !(v == v) || v > 1e9 || v < 0 || (!zero_ok && v == 0))
        bad_usage("%s: expected a %s number, got \"%s\"", opt,
                  zero_ok ? "non-negative" : "positive", s ? s : "");
    return v;
}

static void add_item(struct opts *o, const struct item *it)
{
    struct item *n = realloc(o->items, (o->nitems + 1) * sizeof *n);
    if (!n)
        bad_usage("out of memory");
    o->items = n;
    o->items[o->nitems++] = *it;
}

/* Parse SPEC into o->items (every=P expanded), sorted by time. */
static void parse_schedule(struct opts *o)
{
    char *copy = strdup(o->sched), *save = NULL;
    if (!copy)
        bad_usage("out of memory");
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        struct item it = { 0 };
        snprintf(it.text, sizeof it.text, "%s", tok);
        char *colon = strchr(tok, ':');
        if (!colon)
            bad_usage("--schedule: \"%s\": expected T:KIND (e.g. 2:one)", it.text);
        *colon = '\0';
        char *end, *kind = colon + 1;
        errno = 0;
        it.at = strtod(tok, &end);
        if (!*tok || *end || errno || !(it.at >= 0))
            bad_usage("--schedule: \"%s\": the time \"%s\" is not a number of seconds >= 0",
                      it.text, tok);
        if (it.at >= o->duration)
            bad_usage("--schedule: \"%s\": %g s is not before the end of the run (--duration %g)",
                      it.text, it.at, o->duration);
        char *eq = strchr(kind, '=');
        const char *arg = eq ? eq + 1 : NULL;
        if (eq)
            *eq = '\0';
        if (strcmp(kind, "one") == 0 && !arg) {
            it.kind = K_ONE;
        } else if (strcmp(kind, "depth1") == 0 && !arg) {
            it.kind = K_DEPTH1;
        } else if (strcmp(kind, "adopter") == 0 && !arg) {
            it.kind = K_ADOPTER;
        } else if (strcmp(kind, "parent") == 0 && !arg) {
            it.kind = K_PARENT;
        } else if (strcmp(kind, "several") == 0 && arg) {
            unsigned long k = strtoul(arg, &end, 10);
            if (!*arg || *end || k < 1 || k > MAX_VICTIMS)
                bad_usage("--schedule: \"%s\": several=K needs K from 1 to %d", it.text,
                          MAX_VICTIMS);
            it.kind = K_SEVERAL;
            it.k = (unsigned)k;
        } else if (strcmp(kind, "every") == 0 && arg) {
            errno = 0;
            it.period = strtod(arg, &end);
            if (!*arg || *end || errno || !(it.period >= 0.05))
                bad_usage("--schedule: \"%s\": every=P needs a period P of at least 0.05 s",
                          it.text);
            it.kind = K_EVERY;
        } else {
            bad_usage("--schedule: \"%s\": unknown kind \"%s%s%s\" (one, several=K, depth1, "
                      "adopter, parent, every=P)", it.text, kind, arg ? "=" : "", arg ? arg : "");
        }
        if (it.kind != K_EVERY) {
            add_item(o, &it);
            continue;
        }
        for (double t = it.at; t < o->duration; t += it.period) {
            struct item one = it;
            one.at = t;
            add_item(o, &one);
        }
    }
    free(copy);
    /* Stable insertion sort by time: the schedule's own order breaks ties. */
    for (size_t i = 1; i < o->nitems; i++)
        for (size_t j = i; j > 0 && o->items[j - 1].at > o->items[j].at; j--) {
            struct item t = o->items[j];
            o->items[j] = o->items[j - 1];
            o->items[j - 1] = t;
        }
}

/* The value of option a (argv[i + 1]), or a usage error. */
static const char *value_of(int argc, char **argv, int i)
{
    if (i + 1 >= argc)
        bad_usage("%s needs a value", argv[i]);
    return argv[i + 1];
}

void parse_args(int argc, char **argv, struct opts *o)
{
    static const char *const valued[] = { "-t", "--topology", "--duration", "--rate",
                                          "--schedule", "--dir", "--csv", "--timeout",
                                          "--seed", "--heartbeat", NULL };
    o->duration = 10;
    o->rate = 10;
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        size_t k = 0;
        while (valued[k] && strcmp(valued[k], a) != 0)
            k++;
        if (!valued[k])
            bad_usage("unknown option \"%s\"", a);
        const char *v = value_of(argc, argv, i++);
        if (strcmp(a, "-t") == 0 || strcmp(a, "--topology") == 0)
            o->topo = v;
        else if (strcmp(a, "--duration") == 0)
            o->duration = parse_pos(a, v, 0);
        else if (strcmp(a, "--rate") == 0)
            o->rate = parse_pos(a, v, 0);
        else if (strcmp(a, "--schedule") == 0)
            o->sched = v;
        else if (strcmp(a, "--dir") == 0)
            o->dir = v;
        else if (strcmp(a, "--csv") == 0)
            o->csv = v;
        else if (strcmp(a, "--timeout") == 0)
            o->timeout = parse_pos(a, v, 0);
        else if (strcmp(a, "--seed") == 0) {
            char *end;
            errno = 0;
            o->seed = *v >= '0' && *v <= '9' ? strtoull(v, &end, 0) : 0;
            if (*v < '0' || *v > '9' || *end || errno)
                bad_usage("--seed: expected an unsigned integer, got \"%s\"", v);
        } else {   /* --heartbeat */
            double ms = parse_pos(a, v, 0);
            if (ms != (int)ms || ms > 3600000)
                bad_usage("--heartbeat: expected whole milliseconds up to 3600000, got \"%s\"", v);
            o->heartbeat_ms = (int)ms;
        }
    }
    if (!o->topo)
        bad_usage("no topology: -t TOPOLOGY is required");
    if (o->rate > 10000)
        bad_usage("--rate: %g Hz is more than the 10000 this tool sends", o->rate);
    if (o->sched && *o->sched)
        parse_schedule(o);
    if (o->timeout == 0)
        o->timeout = o->duration + 120;
}
