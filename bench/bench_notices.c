/* bench_notices.c - the front-end's CPU under a flood of forged failure
 * notices (issue 19): anyone on the machine can read a session's id (ps) and
 * send its front-end UDP notices with a made-up HMAC. The FE checks every
 * cheap field first and at most 20,000 HMACs a second (docs/protocol.md 9.3);
 * this measures what the rest costs it.
 *
 * A tree FE -> commnode -> 2 back-ends (this program) is up and idle. The
 * FE's CPU (getrusage: all its threads) over SECONDS, first with no flood
 * (the baseline), then while another process sends 100,000 notices a second
 * (right session, magic and version, a sender rank in the view, new sequence
 * numbers, a made-up HMAC), alternating, REPS times.
 *
 *   bench_notices          the rows (BENCH_NOTICES_DEBUG=1: say the session and port)
 *   bench_notices --be     a back-end (started by the tree)
 *
 * Rows: | notices | FE CPU ... | <percent of one core> | % | <notes> |
 */
#include <tbon/tbon.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/bench.h"

#define PROG "bench_notices"
#define RATE 100000       /* notices a second */
#define SECONDS 3
#define REPS 5

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Send RATE notices a second to port until killed (docs/protocol.md 9.3). */
static void flood(uint16_t port, uint64_t session)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port) };
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    uint8_t b[72];
    uint64_t seq = 1000;
    double t = bench_now();
    for (unsigned i = 0;; i++) {
        memset(b, 0, sizeof b);
        put32(b, 0x464E4254u);
        b[4] = 2;
        b[5] = (uint8_t)(i % 2);
        put64(b + 8, session);
        put32(b + 16, 2 + i % 2);             /* from a back-end of the tree */
        put32(b + 20, 1);                     /* about the commnode */
        put64(b + 32, seq++);
        for (int k = 40; k < 72; k++)
            b[k] = (uint8_t)(i * 31 + (unsigned)k);
        sendto(fd, b, sizeof b, 0, (struct sockaddr *)&to, sizeof to);
        if (i % 1000 == 999) {                /* paced: 1,000 every 10 ms */
            t += 1000.0 / RATE;
            double d = t - bench_now();
            if (d > 0)
                sleep_s(d);
        }
    }
}

static int be_main(int argc, char **argv)
{
    tbon_net_t *net = bench_be_create(PROG, &argc, &argv);
    tbon_packet_t *p;
    tbon_stream_t *s;
    while (tbon_net_recv(net, &p, &s, -1) == 0)
        tbon_packet_unref(p);
    tbon_net_destroy(net);
    return 0;
}

/* The UDP port this process (the FE) receives notices on: its one UDP
 * socket, from /proc (as anyone could see it with ss -u). 0 if none. */
static uint16_t udp_port(void)
{
    unsigned long inodes[256];
    size_t ni = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && ni < 256 && (e = readdir(d));) {
        char fp[300], link[128];
        snprintf(fp, sizeof fp, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(fp, link, sizeof link - 1);
        if (k <= 0)
            continue;
        link[k] = 0;
        if (sscanf(link, "socket:[%lu]", &inodes[ni]) == 1)
            ni++;
    }
    if (d)
        closedir(d);
    for (int v6 = 0; v6 < 2; v6++) {
        FILE *f = fopen(v6 ? "/proc/self/net/udp6" : "/proc/self/net/udp", "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            char local[64];
            unsigned long ino;
            if (sscanf(line, " %*d: %63s %*s %*x %*s %*s %*s %*s %*s %lu", local, &ino) != 2)
                continue;
            char *colon = strchr(local, ':');
            for (size_t i = 0; colon && i < ni; i++)
                if (inodes[i] == ino) {
                    fclose(f);
                    return (uint16_t)strtoul(colon + 1, NULL, 16);
                }
        }
        if (f)
            fclose(f);
    }
    return 0;
}

/* Our child commnode's session id, from its command line (as anyone could
 * read it). 0 if not found. */
static int from_ps(uint64_t *session)
{
    DIR *d = opendir("/proc");
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        char path[300], buf[4096];
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        if (!strstr(buf, "tbon_commnode"))
            continue;
        for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
            if (strcmp(buf + i, "--tbon-session") == 0 && i + 15 < n)
                *session = strtoull(buf + i + 15, NULL, 16);
        found = *session != 0;
    }
    if (d)
        closedir(d);
    return found;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        printf("usage: " PROG "\n"
               "The front-end's CPU (percent of one core) while idle and while another\n"
               "process sends it %d forged failure notices a second; Markdown rows on\n"
               "stdout (bench/run.sh collects them).\n", RATE);
        return 0;
    }
    if (bench_is_be(argc, argv))
        return be_main(argc, argv);
    tbon_net_t *net = bench_start_tree(PROG, "localhost:0 => localhost:1 ;\n"
                                             "localhost:1 => localhost:2 localhost:3 ;\n",
                                       "--be");
    uint64_t session = 0;
    uint16_t port = 0;
    for (int i = 0; i < 100 && !(port = udp_port()); i++)
        sleep_s(0.05);                      /* opened once the tree is up */
    if (!from_ps(&session) || !port)
        bench_die(PROG, "finding the session in ps and the FE's UDP port");
    if (getenv("BENCH_NOTICES_DEBUG"))
        fprintf(stderr, PROG ": session %016llx, port %u\n", (unsigned long long)session,
                (unsigned)port);
    double idle[REPS], flooded[REPS];
    for (int r = 0; r < REPS; r++) {
        double c0 = cpu_s(), t0 = bench_now();
        sleep_s(SECONDS);
        idle[r] = 100 * (cpu_s() - c0) / (bench_now() - t0);
        pid_t f = fork();
        if (f < 0)
            bench_die(PROG, "fork");
        if (f == 0) {
            flood(port, session);
            _exit(0);
        }
        sleep_s(0.2);                          /* under way */
        c0 = cpu_s(), t0 = bench_now();
        sleep_s(SECONDS);
        flooded[r] = 100 * (cpu_s() - c0) / (bench_now() - t0);
        kill(f, SIGKILL);
        waitpid(f, NULL, 0);
    }
    tbon_event_t ev;
    int believed = 0;
    while (tbon_net_next_event(net, &ev, 0) == 0)
        believed += ev.type == TBON_EV_NODE_FAILED || ev.type == TBON_EV_NODE_SUSPECT;
    double im = bench_median(idle, REPS), fm = bench_median(flooded, REPS);
    bench_row("notices", "FE CPU, idle tree", "%.2f", im, "% of a core",
              "FE -> commnode -> 2 back-ends; getrusage over %d s, median of %d (the baseline "
              "of the next row, alternating)", SECONDS, REPS);
    bench_row("notices", "FE CPU under 100,000 forged notices/s", "%.1f", fm, "% of a core",
              "same tree; another process sends %d notices/s with a made-up HMAC (right "
              "session, sender in the view, new sequence numbers); at most 20,000 HMACs/s are "
              "checked, the rest dropped after the cheap checks; idle baseline %.2f%%; "
              "failures or suspicions believed: %d", RATE, im, believed);
    tbon_net_destroy(net);
    return believed ? 1 : 0;
}
