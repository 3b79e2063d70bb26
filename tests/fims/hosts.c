/* hosts.c - the front-end's hosts: this one, and the others each with its
 * agent (agent.c, started through the remote shell the tree uses), asked
 * to kill victims, list or kill the run's processes; what the watchdog
 * kills; the leftovers at the end. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "fims.h"
#include "proc/launch.h"

struct host *hosts;
size_t       nhosts;
size_t      *host_of;
static const char  *agent_rsh;   /* $TBON_RSH, else the library's default ssh */
static char         agent_self[4096];
char         session_id[64];

extern char **environ;

/* Start the agent of h: [rsh words..., host, 'SELF' --agent], with our
 * environment minus RUN_ENV (so that nothing of the agent counts as a
 * process of the run). Returns 0, or -1 with h->why set. */
static int agent_start(struct host *h)
{
    char *rsh = strdup(agent_rsh), *save = NULL, qself[4200];
    char *words[64];
    size_t w = 0;
    snprintf(qself, sizeof qself, "'%s'", agent_self);   /* a shell word (no ' in it) */
    for (char *t = rsh ? strtok_r(rsh, " \t", &save) : NULL; t && w < 60;
         t = strtok_r(NULL, " \t", &save))
        words[w++] = t;
    if (w == 0) {
        snprintf(h->why, sizeof h->why, "the remote shell \"%s\" is empty", agent_rsh);
        free(rsh);
        return -1;
    }
    words[w++] = h->name;
    words[w++] = qself;
    words[w++] = (char *)"--agent";
    words[w] = NULL;
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **envp = calloc(ne + 1, sizeof *envp);
    int in[2] = { -1, -1 }, out[2] = { -1, -1 }, e = ENOMEM;
    if (envp && pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0) {
        size_t k = 0;
        for (size_t i = 0; i < ne; i++)
            if (strncmp(environ[i], RUN_ENV "=", sizeof RUN_ENV) != 0)
                envp[k++] = environ[i];
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        e = posix_spawnp(&h->pid, words[0], &fa, NULL, words, envp);
        posix_spawn_file_actions_destroy(&fa);
    } else if (envp) {
        e = errno;
    }
    free(envp);
    free(rsh);
    if (in[0] >= 0)
        close(in[0]);
    if (out[1] >= 0)
        close(out[1]);
    if (e) {
        snprintf(h->why, sizeof h->why, "cannot start the remote shell %s: %s", agent_rsh,
                 strerror(e));
        h->pid = 0;
        if (in[1] >= 0)
            close(in[1]);
        if (out[0] >= 0)
            close(out[0]);
        return -1;
    }
    h->to = in[1];
    h->from = out[0];
    h->nin = 0;
    h->skip = 0;
    return 0;
}

/* End h's agent: close its input, give it up to ms to go, then kill the
 * remote shell client. */
void agent_stop(struct host *h, int ms)
{
    if (!h->pid)
        return;
    if (h->to >= 0)
        close(h->to);
    close(h->from);
    h->to = -1;
    int64_t end = now_us() + (int64_t)ms * 1000;
    for (;;) {
        pid_t w = waitpid(h->pid, NULL, WNOHANG);
        if (w == h->pid || (w < 0 && errno == ECHILD))
            break;
        if (now_us() >= end) {
            kill(h->pid, SIGKILL);
            waitpid(h->pid, NULL, 0);
            break;
        }
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    h->pid = 0;
}

/* Send one command to host h (its agent, started if need be; on this host
 * it runs at once). Returns 0, or -1 with h->why set. */
int host_send(struct host *h, const char *cmd)
{
    if (h->local) {
        char line[4096];
        size_t len = 0;
        snprintf(line, sizeof line, "%s", cmd);
        FILE *f = open_memstream(&h->local_reply, &len);
        if (!f) {
            snprintf(h->why, sizeof h->why, "out of memory");
            return -1;
        }
        agent_do(line, session_id, sizeof session_id, run_kv, f);
        fclose(f);
        return 0;
    }
    if (!h->pid) {
        if (agent_start(h) != 0)
            return -1;
        if (session_id[0]) {
            char s[96];
            snprintf(s, sizeof s, "session %s\n", session_id);
            if (write(h->to, s, strlen(s)) != (ssize_t)strlen(s)) {
                snprintf(h->why, sizeof h->why, "its remote shell ended at once");
                agent_stop(h, 0);
                return -1;
            }
            h->skip++;
        }
    }
    size_t l = strlen(cmd);
    char *line = malloc(l + 2);
    if (!line) {
        snprintf(h->why, sizeof h->why, "out of memory");
        return -1;
    }
    memcpy(line, cmd, l);
    line[l] = '\n';
    ssize_t n = write(h->to, line, l + 1);
    free(line);
    if (n != (ssize_t)(l + 1)) {
        snprintf(h->why, sizeof h->why, "its remote shell has ended (%s)",
                 n < 0 ? strerror(errno) : "short write");
        agent_stop(h, 0);
        return -1;
    }
    return 0;
}

/* Where the answer at the start of b (n bytes) ends: the index of its
 * final line ".", or -1 while it is not complete. */
static long answer_end(const char *b, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        if (b[i] == '.' && b[i + 1] == '\n' && (i == 0 || b[i - 1] == '\n'))
            return (long)i;
    return -1;
}

/* The answer of the oldest command sent to h (malloc'd, without the "."
 * line; the caller frees), waiting until deadline (now_us() time). NULL with
 * h->why set when the agent ended or did not answer in time; the agent is
 * then stopped (the next command starts a new one). */
char *host_reply(struct host *h, int64_t deadline)
{
    if (h->local) {
        char *r = h->local_reply;
        h->local_reply = NULL;
        if (!r)
            snprintf(h->why, sizeof h->why, "no command was run");
        return r;
    }
    if (!h->pid) {
        snprintf(h->why, sizeof h->why, "no remote shell");
        return NULL;
    }
    for (;;) {
        long e = answer_end(h->in, h->nin);
        if (e >= 0) {
            char *r = malloc((size_t)e + 1);
            if (r) {
                memcpy(r, h->in, (size_t)e);
                r[e] = '\0';
            }
            memmove(h->in, h->in + e + 2, h->nin - (size_t)e - 2);
            h->nin -= (size_t)e + 2;
            if (h->skip > 0) {          /* the answer to a "session" we sent */
                h->skip--;
                free(r);
                continue;
            }
            if (!r)
                snprintf(h->why, sizeof h->why, "out of memory");
            return r;
        }
        int64_t left = deadline - now_us();
        if (left <= 0 || h->nin == sizeof h->in) {
            snprintf(h->why, sizeof h->why, "its agent (through %s %s) did not answer in time",
                     agent_rsh, h->name);
            agent_stop(h, 0);
            return NULL;
        }
        struct pollfd pf = { .fd = h->from, .events = POLLIN };
        int pr = poll(&pf, 1, (int)(left / 1000 + 1));
        if (pr <= 0)
            continue;
        ssize_t n = read(h->from, h->in + h->nin, sizeof h->in - h->nin);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(h->why, sizeof h->why, "its agent (through %s %s) ended", agent_rsh,
                     h->name);
            agent_stop(h, 0);
            return NULL;
        }
        h->nin += (size_t)n;
    }
}

/* SIGKILL every process of the run on every host, rescanning until none is
 * left here (one may have been starting while we looked). Also called by
 * the watchdog's thread: it only writes to the agents, closes their input
 * (they end after the command) and waits for them. */
void kill_run(void)
{
    for (size_t i = 0; i < nhosts; i++)
        if (!hosts[i].local && hosts[i].pid && hosts[i].to >= 0 && session_id[0] &&
            write(hosts[i].to, "killall\n", 8) != 8)
            continue;
    struct proc *p = malloc(SCAN_MAX * sizeof *p);
    long n;
    for (int i = 0; p && i < 10 && (n = scan_procs(session_id, run_kv, p, SCAN_MAX)) > 0; i++)
        for (long k = 0; k < n && k < SCAN_MAX; k++)
            kill((pid_t)p[k].pid, SIGKILL);
    free(p);
    for (size_t i = 0; i < nhosts; i++)
        if (!hosts[i].local && hosts[i].pid) {
            close(hosts[i].to);
            hosts[i].to = -1;
            agent_stop(&hosts[i], 3000);
        }
}

/* Reap every zombie child (this process is a subreaper: orphans of the
 * tree come back here). Only once the library has reaped its own. */
void reap_all(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* --------------------------------------------------------------- watchdog */

/* The watchdog (tests/lib/watchdog.h) fired: FAIL, and no process left. */
void wd_fire(const char *phase)
{
    fprintf(stderr, PROG ": watchdog: the run is still going (%s) after its time limit; "
            "killing every process of the run\n", phase);
    printf(PROG ": FAIL: watchdog fired during %s\n", phase);
    fflush(stdout);
    kill_run();
    _exit(1);
}

/* ------------------------------------------- the hosts at the start and the end */

/* The hosts of fe.topo: this one (the front-end's topology host, or a name
 * of this machine) and the others, each with its agent started (its login
 * overlaps the tree's start-up). Returns 0, or -1 (message printed). */
int hosts_init(const char *self)
{
    size_t size = tb_topology_size(fe.topo);
    const char *rsh = getenv("TBON_RSH");
    agent_rsh = rsh && *rsh ? rsh : TB_DEFAULT_RSH;   /* as the tree's launches */
    snprintf(agent_self, sizeof agent_self, "%s", self);
    hosts = calloc(size, sizeof *hosts);
    host_of = calloc(size, sizeof *host_of);
    if (!hosts || !host_of) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    const char *fe_host = tb_topology_host(fe.topo, 0);
    for (tbon_rank_t r = 0; r < size; r++) {
        fe.is_be[r] = tb_topology_role(fe.topo, r) == TB_ROLE_BE;
        const char *hn = tb_topology_host(fe.topo, r);
        size_t i = 0;
        while (i < nhosts && strcmp(hosts[i].name, hn) != 0)
            i++;
        if (i == nhosts) {
            hosts[i].name = strdup(hn);
            if (!hosts[i].name) {
                fprintf(stderr, PROG ": out of memory\n");
                return -1;
            }
            hosts[i].local = strcmp(hn, fe_host) == 0 || tb_host_is_local(hn);
            hosts[i].to = hosts[i].from = -1;
            nhosts++;
            if (!hosts[i].local && agent_start(&hosts[i]) != 0) {
                fprintf(stderr, PROG ": host %s: %s\n", hn, hosts[i].why);
                return -1;
            }
        }
        host_of[r] = i;
    }
    return 0;
}

/* The session id of the running tree, from the attach file the front-end
 * wrote (docs/user-guide.md, "Attach mode"), into session_id; then every
 * agent is told. Returns 0, or -1 with a FAIL line printed. */
int hosts_session(const char *attach)
{
    FILE *f = fopen(attach, "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "session=", 8) == 0 && strlen(line + 8) > 1 &&
            strlen(line + 8) < sizeof session_id) {
            line[strcspn(line, "\n")] = '\0';
            memcpy(session_id, line + 8, strlen(line + 8) + 1);   /* (fits: checked) */
        }
    if (f)
        fclose(f);
    if (!session_id[0]) {
        printf(PROG ": FAIL: no session id in the attach file %s\n", attach);
        return -1;
    }
    char cmd[96];
    snprintf(cmd, sizeof cmd, "session %s", session_id);
    int fail = 0;
    for (size_t i = 0; i < nhosts; i++)
        if (!hosts[i].local && host_send(&hosts[i], cmd) != 0) {
            printf(PROG ": FAIL: host %s: %s\n", hosts[i].name, hosts[i].why);
            fail = 1;
        }
    /* A login may be slow (a loaded node): as long as a tree's start-up. */
    int64_t deadline = now_us() + 30 * 1000000LL;
    for (size_t i = 0; i < nhosts; i++) {
        if (hosts[i].local || !hosts[i].pid)
            continue;
        char *r = host_reply(&hosts[i], deadline);
        if (!r || strcmp(r, "ok\n") != 0) {
            printf(PROG ": FAIL: host %s: %s\n", hosts[i].name,
                   r ? "its agent answered something else than ok" : hosts[i].why);
            fail = 1;
        }
        free(r);
    }
    return fail ? -1 : 0;
}

/* Poll every host until no process of the run is left there, or ms pass.
 * Returns how many are left in all (each host's printed), or -1 if a host
 * could not be asked (said). */
long hosts_left(int ms)
{
    int64_t end = now_us() + (int64_t)ms * 1000;
    long left;
    int unasked;
    char *ans[4096] = { NULL };
    int sent[4096];
    size_t nh = nhosts < 4096 ? nhosts : 4096;
    for (;;) {
        reap_all();
        left = 0;
        unasked = 0;
        for (size_t i = 0; i < nh; i++) {
            free(ans[i]);
            ans[i] = NULL;
            sent[i] = host_send(&hosts[i], "list") == 0;
        }
        for (size_t i = 0; i < nh; i++) {
            ans[i] = sent[i] ? host_reply(&hosts[i], now_us() + 10 * 1000000LL) : NULL;
            if (!ans[i]) {
                unasked++;
                continue;
            }
            for (const char *c = ans[i]; *c; c++)
                left += *c == '\n';
        }
        if ((left == 0 && unasked == 0) || now_us() >= end)
            break;
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    for (size_t i = 0; i < nh; i++) {
        if (!ans[i] && !hosts[i].local)
            printf(PROG ": host %s: cannot look for leftovers: %s\n", hosts[i].name,
                   hosts[i].why);
        else if (ans[i] && ans[i][0]) {
            long n = 0;
            for (const char *c = ans[i]; *c; c++)
                n += *c == '\n';
            printf(PROG ": host %s: %ld process%s of the run left (pid rank):", hosts[i].name,
                   n, n == 1 ? "" : "es");
            for (char *c = ans[i]; *c;) {
                size_t l = strcspn(c, "\n");
                printf(" [%.*s]", (int)l, c);
                c += l + (c[l] != '\0');
            }
            printf("\n");
        }
        free(ans[i]);
    }
    return unasked ? -1 : left;
}
