/* tbon_topgen.c - write generated tbon topologies (text or XML) for a host list.
 *
 * Exit status: 0 on success, 1 when a file cannot be read or written (or a
 * host file holds a bad name), 2 for bad arguments.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topology.h"

static const char *prog = "tbon_topgen";

static void usage(FILE *f)
{
    fprintf(f,
"usage: %s MODE [HOSTS] [--xml] [-o FILE]\n"
"       %s --check FILE\n"
"Write a tbon topology (MRNet text format, or XML) to stdout or FILE,\n"
"or check a topology file and describe it.\n"
"\n"
"Modes (exactly one):\n"
"  --shape AxBx...         balanced by levels: the front-end has A children,\n"
"                          each of them B children, and so on\n"
"  --fanout K --leaves N   N leaves in the shallowest tree whose nodes have at\n"
"                          most K children; leaves spread evenly (at each level\n"
"                          the numbers of children differ by at most one)\n"
"  --knomial K --leaves N  a k-nomial tree over N back-end slots: slot i's\n"
"                          k-nomial children hang under a commnode standing for\n"
"                          i, which also has the back-end of i as its first child\n"
"                          (the front-end stands for slot 0); exactly N leaves\n"
"  --flat N                the front-end with N back-ends as children\n"
"  --check FILE            parse FILE (text or XML) and describe the tree, or\n"
"                          print the first error as FILE:LINE:COL: message\n"
"                          and exit 1\n"
"\n"
"Hosts (at most one option; default --host localhost), assigned round-robin\n"
"in rank order with the front-end on the first, local ids counted per host:\n"
"  --host H                every node on H\n"
"  --hosts A,B,C           a comma-separated list\n"
"  --hostfile F            one host per line; '#' starts a comment\n"
"  --fe-host H             the front-end on H (where tbon_frontend will run,\n"
"                          e.g. a login node) and the other nodes round-robin\n"
"                          over the hosts from the first\n"
"\n"
"Output:\n"
"  --xml                   write XML instead of the text format\n"
"  -o, --output FILE       write FILE instead of stdout\n"
"  -h, --help              show this help\n"
"\n"
"Ranks are breadth-first from the front-end (rank 0); see docs/topology.md.\n"
"\n"
"Examples:\n"
"  %s --shape 4x4                     # 1 FE, 4 commnodes, 16 back-ends\n"
"  %s --shape 32x32 -o local-32x32.top\n"
"  %s --fanout 16 --leaves 1000 --hostfile nodes.txt\n"
"  %s --knomial 2 --leaves 8 --hosts n1,n2,n3\n"
"  %s --shape 4x4 --fe-host login1 --hosts n1,n2,n3,n4\n"
"  %s --flat 8 --xml\n"
"  %s --check my.top\n",
            prog, prog, prog, prog, prog, prog, prog, prog, prog);
}

/* Print "tbon_topgen: message", a usage hint, and exit 2. */
__attribute__((format(printf, 1, 2), noreturn))
static void bad_usage(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help' for usage.\n", prog);
    exit(2);
}

__attribute__((format(printf, 1, 2), noreturn))
static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* A decimal count in [1, 2^24] (no sign, no spaces); exits 2 otherwise. */
static uint32_t parse_count(const char *s, size_t len, const char *opt, const char *whole)
{
    uint64_t v = 0;
    bool ok = len > 0 && len <= 10;
    for (size_t i = 0; ok && i < len; i++) {
        ok = s[i] >= '0' && s[i] <= '9';
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (!ok || v < 1 || v > TB_TOPOLOGY_MAX_NODES)
        bad_usage("%s: \"%s\" is not a number from 1 to %u", opt, whole, TB_TOPOLOGY_MAX_NODES);
    return (uint32_t)v;
}

/* The option given from a group whose options exclude each other: its code,
 * its name as written in messages, and its value. */
typedef struct choice {
    int opt;
    const char *name, *arg;
} choice_t;

/* Record option opt (named name, value optarg) as ch's choice; a second option
 * of the group (listed in `group` for the message) is a usage error. */
static void choose(choice_t *ch, int opt, const char *name, const char *group)
{
    if (ch->opt)
        bad_usage("%s: only one of %s may be given (%s was given already)", name, group,
                  ch->name);
    ch->opt = opt;
    ch->name = name;
    ch->arg = optarg;
}

typedef struct hostlist {
    char  **v;
    size_t  n, cap;
} hostlist_t;

static void host_push(hostlist_t *h, const char *s, size_t len)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 16;
        h->v = realloc(h->v, h->cap * sizeof *h->v);
        if (!h->v)
            die("out of memory");
    }
    h->v[h->n] = strndup(s, len);
    if (!h->v[h->n])
        die("out of memory");
    h->n++;
}

static void hosts_from_list(hostlist_t *h, const char *opt, const char *list)
{
    const char *s = list;
    for (;;) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (tb_topology_check_host(s, len) != 0)
            bad_usage("%s: bad host name \"%.*s\" in \"%s\" (letters, digits, '-', '.' and "
                      "'_', starting with a letter or digit, at most %u characters)",
                      opt, (int)(len > 60 ? 60 : len), s, list, TB_TOPOLOGY_MAX_HOST);
        host_push(h, s, len);
        if (!e)
            break;
        s = e + 1;
    }
}

static void hosts_from_file(hostlist_t *h, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("cannot read the host file \"%s\": %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    unsigned lineno = 0;
    while ((got = getline(&line, &cap, f)) >= 0) {
        lineno++;
        char *s = line, *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        while (*s == ' ' || *s == '\t')
            s++;
        size_t len = strlen(s);
        while (len && strchr(" \t\r\n", s[len - 1]))
            len--;
        if (len == 0)
            continue;
        if (tb_topology_check_host(s, len) != 0)
            die("%s:%u: bad host name \"%.*s\" (letters, digits, '-', '.' and '_', starting "
                "with a letter or digit, at most %u characters)", path, lineno,
                (int)(len > 60 ? 60 : len), s, TB_TOPOLOGY_MAX_HOST);
        host_push(h, s, len);
    }
    if (ferror(f))
        die("cannot read the host file \"%s\": %s", path, strerror(errno));
    free(line);
    fclose(f);
    if (h->n == 0)
        die("%s: the host file names no hosts", path);
}

/* --check: parse a file and describe the tree it makes. */
static int check_file(const char *path)
{
    tbon_error_t err = { 0 };
    tb_topology_t *t = tb_topology_parse_file(path, &err);
    if (!t) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t n = tb_topology_size(t), counts[3] = { 0 }, max_fan = 0, nhosts = 0;
    uint32_t height = tb_topology_height(t, 0);
    size_t *level = calloc((size_t)height + 1, sizeof *level);
    const char **hosts = calloc(n, sizeof *hosts);
    if (!level || !hosts)
        die("out of memory");
    for (tbon_rank_t r = 0; r < n; r++) {
        counts[tb_topology_role(t, r)]++;
        level[tb_topology_depth(t, r)]++;
        size_t fan = tb_topology_num_children(t, r);
        max_fan = fan > max_fan ? fan : max_fan;
        /* Hosts are interned, so the same name is the same pointer. */
        const char *h = tb_topology_host(t, r);
        size_t i = 0;
        while (i < nhosts && hosts[i] != h)
            i++;
        if (i == nhosts && nhosts < 64)
            hosts[nhosts++] = h;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (tb_topology_serialize(t, &buf, &len) != 0)
        die("%s: cannot serialise the topology", path);
    free(buf);

    printf("%s: a valid topology\n", path);
    printf("  nodes:       %zu (1 front-end, %zu commnodes, %zu back-ends)\n",
           n, counts[TB_ROLE_COMMNODE], counts[TB_ROLE_BE]);
    printf("  depth:       %u; nodes per level:", height);
    for (uint32_t d = 0; d <= height; d++)
        printf(" %zu", level[d]);
    printf("\n  max fan-out: %zu\n", max_fan);
    printf("  hosts:      ");
    for (size_t i = 0; i < nhosts && i < 8; i++)
        printf(" %s", hosts[i]);
    printf("%s\n", nhosts > 8 ? " ..." : "");
    printf("  serialised:  %zu bytes (sent by each parent to its children at start-up)\n",
           len);
    free(level);
    free(hosts);
    tb_topology_destroy(t);
    return 0;
}

/* The long options without a short one. */
enum { O_SHAPE = 256, O_FANOUT, O_KNOMIAL, O_LEAVES, O_FLAT, O_HOST, O_HOSTS,
       O_HOSTFILE, O_XML, O_CHECK, O_FE_HOST };

/* --shape's "4x4x2": the fan-out of each level into fan[], their number. */
static size_t parse_shape(const char *arg, uint32_t fan[64])
{
    size_t levels = 0;
    const char *s = arg;
    for (;;) {
        const char *e = strchr(s, 'x');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (levels == 64)
            bad_usage("--shape: \"%s\" has more than 64 levels", arg);
        bool digits = len > 0;
        for (size_t i = 0; i < len; i++)
            digits &= s[i] >= '0' && s[i] <= '9';
        if (!digits)
            bad_usage("--shape: \"%s\" is not a shape like 4x4 (numbers of children per "
                      "level, from 1, separated by 'x')", arg);
        fan[levels++] = parse_count(s, len, "--shape", arg);
        if (!e)
            break;
        s = e + 1;
    }
    return levels;
}

/* The topology of the mode asked for over the hosts hv[0..nh). NULL on
 * error (err). */
static tb_topology_t *generate(const choice_t *mode, uint32_t leaves, const char *const *hv,
                               size_t nh, tbon_error_t *err)
{
    if (mode->opt == O_SHAPE) {
        uint32_t fan[64];
        size_t levels = parse_shape(mode->arg, fan);
        return tb_topology_gen_shape(fan, levels, hv, nh, err);
    }
    if (mode->opt == O_FLAT)
        return tb_topology_gen_flat(parse_count(mode->arg, strlen(mode->arg), "--flat",
                                                mode->arg), hv, nh, err);
    uint32_t k = parse_count(mode->arg, strlen(mode->arg), mode->name, mode->arg);
    if (k < 2)
        bad_usage("%s: the %s must be at least 2 (got %u)", mode->name,
                  mode->opt == O_FANOUT ? "fan-out" : "degree", k);
    return mode->opt == O_FANOUT ? tb_topology_gen_fanout(k, leaves, hv, nh, err)
                                 : tb_topology_gen_knomial(k, leaves, hv, nh, err);
}

/* A comment line recording how the file was made (the command line
 * without -o). */
static void make_comment(int argc, char **argv, char *comment, size_t cap)
{
    size_t off = (size_t)snprintf(comment, cap, "generated by: tbon_topgen");
    for (int i = 1; i < argc && off < cap; i++) {
        if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) {
            i++;
            continue;
        }
        if (strncmp(argv[i], "-o", 2) == 0 || strncmp(argv[i], "--output=", 9) == 0)
            continue;
        off += (size_t)snprintf(comment + off, cap - off, " %s", argv[i]);
    }
}

/* The command line, taken. */
struct args {
    choice_t mode, hostopt;
    const char *out, *fe_host;
    uint32_t leaves;
    bool xml;
};

/* Take the options into o; exits 2 on a bad command line. -1 to go on, or
 * the exit status of what was done already (--help, --check). */
static int parse_cmdline(int argc, char **argv, struct args *o)
{
    static const struct option opts[] = {
        { "shape", required_argument, NULL, O_SHAPE },
        { "fanout", required_argument, NULL, O_FANOUT },
        { "knomial", required_argument, NULL, O_KNOMIAL },
        { "leaves", required_argument, NULL, O_LEAVES },
        { "flat", required_argument, NULL, O_FLAT },
        { "host", required_argument, NULL, O_HOST },
        { "hosts", required_argument, NULL, O_HOSTS },
        { "hostfile", required_argument, NULL, O_HOSTFILE },
        { "fe-host", required_argument, NULL, O_FE_HOST },
        { "xml", no_argument, NULL, O_XML },
        { "check", required_argument, NULL, O_CHECK },
        { "output", required_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        const char *name = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        switch (c) {
        case O_SHAPE: case O_FANOUT: case O_KNOMIAL: case O_FLAT:
            choose(&o->mode, c, c == O_SHAPE ? "--shape" : c == O_FANOUT ? "--fanout"
                                : c == O_KNOMIAL ? "--knomial" : "--flat",
                   "--shape, --fanout, --knomial and --flat");
            break;
        case O_LEAVES:
            o->leaves = parse_count(optarg, strlen(optarg), "--leaves", optarg);
            break;
        case O_HOST: case O_HOSTS: case O_HOSTFILE:
            choose(&o->hostopt, c, c == O_HOST ? "--host" : c == O_HOSTS ? "--hosts"
                                   : "--hostfile", "--host, --hosts and --hostfile");
            break;
        case O_XML:
            o->xml = true;
            break;
        case O_FE_HOST:
            o->fe_host = optarg;
            break;
        case O_CHECK:
            if (argc > 3)
                bad_usage("--check FILE takes no other option");
            return check_file(optarg);
        case 'o':
            o->out = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case ':':
            bad_usage("option %s needs a value", name);
        default:
            if (optopt && optopt < 256)
                bad_usage("unknown option -%c", optopt);
            bad_usage("unknown option \"%s\"", name);
        }
    }
    if (optind < argc)
        bad_usage("unexpected argument \"%s\"", argv[optind]);
    if (!o->mode.opt)
        bad_usage("no mode: give one of --shape, --fanout, --knomial and --flat");
    if ((o->mode.opt == O_FANOUT || o->mode.opt == O_KNOMIAL) && !o->leaves)
        bad_usage("%s needs --leaves N", o->mode.name);
    if (o->leaves && o->mode.opt != O_FANOUT && o->mode.opt != O_KNOMIAL)
        bad_usage("--leaves goes with --fanout or --knomial, not %s", o->mode.name);
    return -1;
}

int main(int argc, char **argv)
{
    struct args o = { 0 };
    int done = parse_cmdline(argc, argv, &o);
    if (done >= 0)
        return done;
    choice_t mode = o.mode, hostopt = o.hostopt;
    const char *out = o.out, *fe_host = o.fe_host;
    uint32_t leaves = o.leaves;
    bool xml = o.xml;

    hostlist_t hosts = { 0 };
    if (hostopt.opt == O_HOST)
        hosts_from_list(&hosts, "--host", hostopt.arg);   /* a comma makes it a bad name */
    else if (hostopt.opt == O_HOSTS)
        hosts_from_list(&hosts, "--hosts", hostopt.arg);
    else if (hostopt.opt == O_HOSTFILE)
        hosts_from_file(&hosts, hostopt.arg);
    if (hostopt.opt == O_HOST && hosts.n != 1)
        bad_usage("--host: bad host name \"%s\" (use --hosts for a list)", hostopt.arg);

    tbon_error_t err = { 0 };
    tb_topology_t *t = NULL;
    const char *const *hv = (const char *const *)hosts.v;
    /* --fe-host: the other nodes round-robin from the first host, so the
     * generators see the list turned by one (rank 0 on the last, rank 1 on
     * the first); the front-end then moves to its own host. */
    const char **turned = NULL;
    if (fe_host && hosts.n > 1) {
        turned = malloc(hosts.n * sizeof *turned);
        if (!turned)
            die("out of memory");
        turned[0] = hosts.v[hosts.n - 1];
        for (size_t i = 1; i < hosts.n; i++)
            turned[i] = hosts.v[i - 1];
        hv = turned;
    }
    t = generate(&mode, leaves, hv, hosts.n, &err);
    free(turned);
    if (t && fe_host) {
        tb_topology_t *moved = tb_topology_with_fe_host(t, fe_host, &err);
        tb_topology_destroy(t);
        t = moved;
    }
    if (!t) {
        if (err.code == TBON_EINVAL)
            bad_usage("%s", err.msg);
        die("%s", err.msg);
    }

    char comment[1024];
    make_comment(argc, argv, comment, sizeof comment);

    if (out ? tb_topology_write_file(t, out, xml, comment, &err) != 0
            : tb_topology_fwrite(t, stdout, "stdout", xml, comment, &err) != 0)
        die("%s", err.msg);
    tb_topology_destroy(t);
    for (size_t i = 0; i < hosts.n; i++)
        free(hosts.v[i]);
    free(hosts.v);
    return 0;
}
