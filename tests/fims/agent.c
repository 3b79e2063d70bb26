/* agent.c - the run's processes on one host.
 *
 * A run's processes are found on every host of its topology, by what the
 * tree puts on their command line: every process it launches has the words
 * "--tbon-rank R" and "--tbon-session S" in its argv (a remote shell's
 * client holds them quoted, as one shell command, so it does not match).
 * On this host, processes that carry RUN_ENV (our own children: commnodes,
 * remote shell clients) count too, which also covers the time before the
 * session id is known. On other hosts an agent does the same: this program
 * started with --agent through the remote shell ($TBON_RSH, default ssh),
 * one per host for the whole run, taking one command per line on its stdin
 * and answering on its stdout (agent_do). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tbon/tbon.h>

#include "fims.h"
#include "lib/procscan.h"

char run_kv[64];

/* 1 if the NUL-separated words of cmdline (n bytes) hold word followed by
 * value; the value's start goes to *val when val is not NULL. */
static int cmdline_has(const char *cmd, ssize_t n, const char *word, const char *value,
                       const char **val)
{
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(cmd + i) + 1) {
        ssize_t next = i + (ssize_t)strlen(cmd + i) + 1;
        if (strcmp(cmd + i, word) != 0 || next >= n)
            continue;
        if (value && strcmp(cmd + next, value) != 0)
            continue;
        if (val)
            *val = cmd + next;
        return 1;
    }
    return 0;
}

/* The live (not zombie) processes of the run on this host other than this
 * one: --tbon-session session on the command line (if session is not
 * empty), or kv in the environment (if kv is not NULL). Returns how many,
 * with the first cap in out; -1 without memory. */
long scan_procs(const char *session, const char *kv, struct proc *out, size_t cap)
{
    enum { ENV_MAX = 1 << 18, CMD_MAX = 1 << 16 };
    DIR *d = opendir("/proc");
    char *buf = malloc(ENV_MAX), *cmd = malloc(CMD_MAX);
    long found = 0;
    struct dirent *e;
    if (!d || !buf || !cmd)
        found = -1;
    while (found >= 0 && (e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid())
            continue;
        char st = tb_proc_state(pid);
        if (!st || st == 'Z' || st == 'X')
            continue;
        ssize_t n = tb_proc_read(pid, "cmdline", cmd, CMD_MAX);
        int ours = n > 0 && session && *session &&
                   cmdline_has(cmd, n, "--tbon-session", session, NULL);
        if (!ours && kv)
            ours = tb_proc_env_has(pid, kv, 0, buf, ENV_MAX);
        if (!ours)
            continue;
        const char *r = NULL;
        if ((size_t)found < cap) {
            out[found].pid = pid;
            out[found].rank = n > 0 && cmdline_has(cmd, n, "--tbon-rank", NULL, &r)
                                  ? (tbon_rank_t)strtoul(r, NULL, 10) : TBON_RANK_NONE;
        }
        found++;
    }
    if (d)
        closedir(d);
    free(buf);
    free(cmd);
    return found;
}

/* One command of the agent protocol, run on this host; the answer goes to
 * out, without the final "." line:
 *   session S      remember the session id     -> "ok"
 *   kill R...      SIGKILL rank R's processes  -> "R PID" or "R -" per rank
 *   list           the run's processes         -> "PID RANK" per process
 *   killall        SIGKILL all of them         -> "N" (how many)
 * kv (this host only) adds the processes that carry it in their environment.
 * Unknown commands get "error: ...". */
void agent_do(char *line, char *session, size_t slen, const char *kv, FILE *out)
{
    char *save = NULL, *verb = strtok_r(line, " \t", &save);
    if (!verb) {
        fprintf(out, "error: empty command\n");
        return;
    }
    if (strcmp(verb, "session") == 0) {
        const char *s = strtok_r(NULL, " \t", &save);
        snprintf(session, slen, "%s", s ? s : "");
        fprintf(out, "ok\n");
        return;
    }
    int kill_ranks = strcmp(verb, "kill") == 0, list = strcmp(verb, "list") == 0;
    int killall = strcmp(verb, "killall") == 0;
    if (!kill_ranks && !list && !killall) {
        fprintf(out, "error: unknown command \"%s\"\n", verb);
        return;
    }
    struct proc *p = malloc(SCAN_MAX * sizeof *p);
    long n = p ? scan_procs(session, kv, p, SCAN_MAX) : -1;
    if (n < 0) {
        fprintf(out, "error: cannot read /proc (out of memory)\n");
        free(p);
        return;
    }
    if (n > SCAN_MAX)
        n = SCAN_MAX;
    if (kill_ranks) {
        /* Every victim's pid first, then the signals back to back. */
        long victim[MAX_VICTIMS];
        char *rs[MAX_VICTIMS];
        size_t nr = 0;
        for (char *t; nr < MAX_VICTIMS && (t = strtok_r(NULL, " \t", &save));) {
            tbon_rank_t r = (tbon_rank_t)strtoul(t, NULL, 10);
            rs[nr] = t;
            victim[nr] = 0;
            for (long i = 0; i < n && !victim[nr]; i++)
                if (p[i].rank == r)
                    victim[nr] = p[i].pid;
            nr++;
        }
        for (size_t i = 0; i < nr; i++)
            if (victim[i])
                kill((pid_t)victim[i], SIGKILL);
        for (size_t i = 0; i < nr; i++) {
            if (victim[i])
                fprintf(out, "%s %ld\n", rs[i], victim[i]);
            else
                fprintf(out, "%s -\n", rs[i]);
        }
    } else if (list) {
        for (long i = 0; i < n; i++) {
            if (p[i].rank == TBON_RANK_NONE)
                fprintf(out, "%ld -\n", p[i].pid);
            else
                fprintf(out, "%ld %u\n", p[i].pid, (unsigned)p[i].rank);
        }
    } else {
        for (long i = 0; i < n; i++)
            kill((pid_t)p[i].pid, SIGKILL);
        fprintf(out, "%ld\n", n);
    }
    free(p);
}

/* tbon_fims --agent: the agent of one host (see above). Ends at the end of
 * its input, i.e. when the front-end closes it or dies. */
int agent_main(void)
{
    char line[4096], session[64] = "";
    signal(SIGPIPE, SIG_IGN);
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        agent_do(line, session, sizeof session, NULL, stdout);
        if (printf(".\n") < 0 || fflush(stdout) != 0)
            break;
    }
    return 0;
}
