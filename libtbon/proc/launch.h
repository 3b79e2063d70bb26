/* launch.h - start a tree process: locally by posix_spawn, or on another host
 * through a remote shell; the session secret never goes on a command line */
#ifndef TB_LAUNCH_H
#define TB_LAUNCH_H

#include <sys/types.h>
#include <tbon/tbon.h>

#include "util/config.h"

/* How a launched process learns the secret: locally from the environment
 * variable TB_SECRET_ENV (util/config.h; it unsets it at once); through a
 * remote shell from the first line of its stdin, announced by the argument
 * TB_SECRET_STDIN_ARG that tb_launch appends. */
#define TB_SECRET_STDIN_ARG "--tbon-secret-stdin"

/* The remote shell when the caller names none ($TBON_RSH, opts.rsh): ssh that
 * never stops to ask for a password (it fails at once and says why, instead
 * of prompting many times on one terminal) and gives up on a host it cannot
 * reach within 10 s (a host that is down then reads "connect to host n3 port
 * 22: Connection timed out" rather than a bare start-up time-out). */
#define TB_DEFAULT_RSH "ssh -o BatchMode=yes -o ConnectTimeout=10"

typedef struct tb_launch_spec {
    const char         *host;      /* topology host name */
    const char         *exe;       /* program path */
    const char *const  *argv;      /* argv[0..] for the program, NULL-terminated */
    const char *const  *env;       /* extra NAME=VALUE to set, NULL-terminated; may be NULL */
    const char         *secret;    /* hex secret */
    const char         *rsh;       /* remote shell for non-local hosts, split on
                                      blanks (NULL or "": TB_DEFAULT_RSH; the
                                      caller passes $TBON_RSH or opts.rsh) */
    int                 here;      /* 1: start it on this machine, whatever host says
                                      (host then only names it in messages) */
    int                 secret_stdin; /* local: the secret on stdin, not in the
                                      environment (a launcher such as srun that
                                      passes its stdin on); argv must then
                                      carry TB_SECRET_STDIN_ARG itself */
    int                *stderr_pipe; /* non-NULL: the child's stderr is a pipe whose
                                      read end (close-on-exec) is stored here;
                                      NULL: it shares ours */
} tb_launch_spec_t;

/* 1 if host names this machine: "localhost", "127.*", "::1", this machine's
 * hostname (short or full) or one of its interface addresses. */
int tb_host_is_local(const char *host);

/* Start the process. Local: posix_spawn(exe, argv) with environ + env +
 * TBON_SECRET=secret, stdin from /dev/null. Remote: posix_spawnp(rsh, [rsh,
 * host, "env", env..., exe, argv[1..], TB_SECRET_STDIN_ARG]) with every word
 * quoted for the remote shell, and "secret\n" written to its stdin. A missing
 * or non-executable local exe is detected before spawning. Returns 0 with
 * *pid, or TBON_ELAUNCH with err->msg naming exe and host and the reason
 * (TBON_EINVAL for a spec without exe/argv or an env entry without '=').
 * host NULL or "" means this machine. Any thread. */
int tb_launch(const tb_launch_spec_t *s, pid_t *pid, tbon_error_t *err);

/* Read the secret a launcher passed: from TB_SECRET_ENV (then unset), or if
 * the argument TB_SECRET_STDIN_ARG is in argv (it is removed from argv), the
 * first line of stdin (stdin is then reopened on /dev/null; the argument wins
 * over the variable, which is wiped and unset either way). Writes the hex
 * string into out. Returns 0, or TBON_EAUTH if there is none (or it does not
 * fit in out, or no line came within 30 s). Call at start-up, one thread. */
int tb_launch_take_secret(int *argc, char **argv, char *out, size_t outlen);

/* Wait for pid to exit for up to timeout_ms (blocking in waitpid with a
 * timer, or a pidfd, never spinning); then SIGKILL it and reap it. Returns its
 * wait status. timeout_ms < 0 waits without limit; a pid that is not an
 * unreaped child of this process is never signalled and gives TBON_EINVAL. */
int tb_reap(pid_t pid, int timeout_ms);

/* Tests only: 1 makes tb_reap use its fallback for kernels without
 * pidfd_open (a timer thread), 0 restores the pidfd path. */
void tb_reap_force_fallback(int on);

#endif
