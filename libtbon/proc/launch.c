/* launch.c - start tree processes (posix_spawn here, a remote shell
 * elsewhere), hand them the session secret, and reap them
 *
 * Launching is on the start-up critical path (every commnode launches its
 * children), so the local path is one posix_spawn (vfork semantics in glibc:
 * no copy of the parent, exec errors reported synchronously), no shell.
 * The secret never appears in an argv: locally it is in the child's
 * environment; remotely it is the first line of the remote shell's stdin.
 */
#include "proc/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"
#include "util/log.h"
#include "util/array.h"

extern char **environ;

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
#define HAVE_ADDCLOSEFROM 1
#endif

#define SECRET_LINE_MAX   1024     /* longest secret line read from stdin */
#define SECRET_STDIN_WAIT 30000    /* ms to wait for it */

/* ---- is a host this machine? ---- */

struct host_entry { char *name; int local; };
static pthread_mutex_t    host_lock = PTHREAD_MUTEX_INITIALIZER;
static struct host_entry *host_cache;      /* under host_lock */
static size_t             host_count, host_cap;

/* 1 for 127.0.0.0/8, ::1 and ::ffff:127.x.y.z. */
static int addr_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return 0;
}

/* 1 if a and b are the same IP address (ports and scopes aside). */
static int addr_equal(const struct sockaddr *a, const struct sockaddr *b)
{
    if (!a || !b || a->sa_family != b->sa_family)
        return 0;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)(const void *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)(const void *)b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    return 0;
}

/* The uncached answer: names first (no resolver), then addresses. A name
 * that does not resolve is not local (the remote shell will say why). */
static int host_is_local_uncached(const char *host)
{
    char hn[HOST_NAME_MAX + 1];
    if (strcasecmp(host, "localhost") == 0)
        return 1;
    if (gethostname(hn, sizeof hn) == 0) {
        hn[HOST_NAME_MAX] = '\0';
        size_t shortlen = strcspn(hn, ".");
        if (strcasecmp(host, hn) == 0 ||
            (strlen(host) == shortlen && strncasecmp(host, hn, shortlen) == 0))
            return 1;
    }
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return 0;
    int local = 0;
    struct ifaddrs *ifs = NULL;
    for (struct addrinfo *ai = res; ai && !local; ai = ai->ai_next) {
        if (addr_is_loopback(ai->ai_addr)) {
            local = 1;
            break;
        }
        if (!ifs && getifaddrs(&ifs) < 0)
            break;
        for (struct ifaddrs *i = ifs; i && !local; i = i->ifa_next)
            local = addr_equal(ai->ai_addr, i->ifa_addr);
    }
    if (ifs)
        freeifaddrs(ifs);
    freeaddrinfo(res);
    return local;
}

int tb_host_is_local(const char *host)
{
    if (!host || !*host)
        return 1;                        /* no host given: here */
    pthread_mutex_lock(&host_lock);
    for (size_t i = 0; i < host_count; i++) {
        if (strcmp(host_cache[i].name, host) == 0) {
            int local = host_cache[i].local;
            pthread_mutex_unlock(&host_lock);
            return local;
        }
    }
    pthread_mutex_unlock(&host_lock);

    /* Resolve without the lock: a slow resolver must not stall other hosts. */
    int local = host_is_local_uncached(host);
    char *name = strdup(host);
    pthread_mutex_lock(&host_lock);
    if (name && !TB_ARRAY_ROOM(host_cache, host_count, host_cap, 16)) {
        host_cache[host_count].name = name;
        host_cache[host_count].local = local;
        host_count++;
        name = NULL;
    }
    pthread_mutex_unlock(&host_lock);
    free(name);                          /* not cached (no memory): fine */
    TB_DEBUG("launch", "host %s is %s", host, local ? "local" : "remote");
    return local;
}

/* ---- launching ---- */

/* 1 if environ entry e sets the variable that kv ("NAME=...") names. */
static int same_name(const char *e, const char *kv)
{
    size_t len = strcspn(kv, "=");
    return strncmp(e, kv, len) == 0 && e[len] == '=';
}

/* A NULL-terminated environment (pointers only; the strings are not copied):
 * environ without TBON_SECRET or any variable extra sets, then extra, then
 * secret_kv if not NULL. Returns NULL without memory. */
static char **build_env(const char *const *extra, char *secret_kv)
{
    size_t n = 0, k = 0;
    while (environ && environ[n])
        n++;
    while (extra && extra[k])
        k++;
    char **envp = malloc((n + k + 2) * sizeof *envp);
    if (!envp)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int skip = same_name(environ[i], TB_SECRET_ENV "=");
        for (size_t j = 0; j < k && !skip; j++)
            skip = same_name(environ[i], extra[j]);
        if (!skip)
            envp[o++] = environ[i];
    }
    for (size_t j = 0; j < k; j++)
        envp[o++] = (char *)extra[j];
    if (secret_kv)
        envp[o++] = secret_kv;
    envp[o] = NULL;
    return envp;
}

/* Spawn attributes and file actions shared by both paths: signals back to
 * default and unblocked (the launcher may block or ignore some for its own
 * threads), stdin from stdin_fd (or /dev/null if -1), every other descriptor
 * but stdout and stderr closed. Returns 0 or an errno value. */
static int spawn_setup(posix_spawnattr_t *attr, posix_spawn_file_actions_t *fa, int stdin_fd,
                       int stderr_fd)
{
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    int rc = posix_spawnattr_init(attr);
    if (rc)
        return rc;
    rc = posix_spawn_file_actions_init(fa);
    if (rc) {
        posix_spawnattr_destroy(attr);
        return rc;
    }
    if (!rc) rc = posix_spawnattr_setsigmask(attr, &none);
    if (!rc) rc = posix_spawnattr_setsigdefault(attr, &all);
    if (!rc) rc = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (!rc)
        rc = stdin_fd < 0 ? posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0)
                          : posix_spawn_file_actions_adddup2(fa, stdin_fd, 0);
    if (!rc && stderr_fd >= 0)
        rc = posix_spawn_file_actions_adddup2(fa, stderr_fd, 2);
#ifdef HAVE_ADDCLOSEFROM
    /* Belt and braces: our descriptors are O_CLOEXEC, the application's
     * may not be. */
    if (!rc)
        rc = posix_spawn_file_actions_addclosefrom_np(fa, 3);
#endif
    if (rc) {
        posix_spawn_file_actions_destroy(fa);
        posix_spawnattr_destroy(attr);
    }
    return rc;
}

/* A pipe whose read end holds "secret\n" and then end-of-file: its write
 * end is filled and closed before any child exists, so the write cannot
 * block (<= PIPE_BUF) nor raise SIGPIPE. 0 with *rfd, or an errno value. */
static int secret_pipe(const char *secret, int *rfd)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return errno;
    size_t len = strlen(secret);
    char line[PIPE_BUF];
    int e = 0;
    if (len + 1 > sizeof line) {
        e = EMSGSIZE;
    } else {
        memcpy(line, secret, len);
        line[len] = '\n';
        ssize_t n;
        do
            n = write(pfd[1], line, len + 1);
        while (n < 0 && errno == EINTR);
        explicit_bzero(line, len + 1);
        if (n != (ssize_t)(len + 1))
            e = n < 0 ? errno : EIO;
    }
    close(pfd[1]);
    if (e) {
        close(pfd[0]);
        return e;
    }
    *rfd = pfd[0];
    return 0;
}

/* posix_spawn exe here, secret in the environment (or on stdin). */
static int launch_local(const tb_launch_spec_t *s, const char *host, int errfd, pid_t *pid,
                        tbon_error_t *err)
{
    struct stat st;
    int e = 0;
    /* Checked first so that the message says what is wrong with the file. */
    if (stat(s->exe, &st) < 0)
        e = errno;
    else if (S_ISDIR(st.st_mode))
        e = EISDIR;
    else if (access(s->exe, X_OK) < 0)
        e = errno;
    if (e)
        return tb_error_set(err, TBON_ELAUNCH, "cannot launch %s on host %s: %s",
                            s->exe, host, strerror(e));

    char *secret_kv = NULL;
    char **envp = NULL;
    int in = -1;
    if (s->secret && s->secret_stdin) {
        e = secret_pipe(s->secret, &in);
        if (e)
            goto error;
    } else if (s->secret && asprintf(&secret_kv, "%s=%s", TB_SECRET_ENV, s->secret) < 0) {
        secret_kv = NULL;
        e = ENOMEM;
        goto error;
    }
    envp = build_env(s->env, secret_kv);
    if (!envp) {
        e = ENOMEM;
        goto error;
    }
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t fa;
    e = spawn_setup(&attr, &fa, in, errfd);
    if (e)
        goto error;
    e = posix_spawn(pid, s->exe, &fa, &attr, (char *const *)s->argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (e)
        goto error;
    TB_DEBUG("launch", "started %s on %s (pid %d)", s->exe, host, (int)*pid);
    if (in >= 0)
        close(in);
    free(envp);
    if (secret_kv) {
        explicit_bzero(secret_kv, strlen(secret_kv));
        free(secret_kv);
    }
    return 0;

error:
    if (in >= 0)
        close(in);
    free(envp);
    if (secret_kv) {
        explicit_bzero(secret_kv, strlen(secret_kv));
        free(secret_kv);
    }
    return tb_error_set(err, TBON_ELAUNCH, "cannot launch %s on host %s: %s",
                        s->exe, host, strerror(e));
}

/* w quoted for a POSIX shell: 'w', each ' written as '\''. Caller frees. */
static char *shell_quote(const char *w)
{
    size_t n = 3;
    for (const char *p = w; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *q = malloc(n), *o = q;
    if (!q)
        return NULL;
    *o++ = '\'';
    for (const char *p = w; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return q;
}

/* posix_spawnp the remote shell: [rsh words..., host, env, 'NAME=V'...,
 * 'exe', 'args'..., '--tbon-secret-stdin'], with the secret line already
 * waiting in a pipe on its stdin. */
static int launch_remote(const tb_launch_spec_t *s, const char *host, int errfd, pid_t *pid,
                         tbon_error_t *err)
{
    const char *rsh = s->rsh && *s->rsh ? s->rsh : TB_DEFAULT_RSH;
    size_t nenv = 0, nargs = 0;
    while (s->env && s->env[nenv])
        nenv++;
    while (s->argv[nargs])
        nargs++;
    char *rshcopy = strdup(rsh);
    /* rsh words (at most strlen/2+1) + host + env + vars + exe + args + flag + NULL */
    size_t cap = strlen(rsh) / 2 + 1 + 2 + nenv + 1 + nargs + 2;
    char **words = calloc(cap, sizeof *words);
    size_t nquoted = 0, first_quoted = 0, w = 0;
    char **envp = NULL;
    int pfd[2] = { -1, -1 };
    int e = ENOMEM;
    const char *what = NULL;         /* NULL: the remote shell failed */
    if (!rshcopy || !words)
        goto error;

    /* "ssh -x" and the like: split the remote shell on blanks. */
    char *save = NULL;
    for (char *t = strtok_r(rshcopy, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
        words[w++] = t;
    if (w == 0) {
        e = EINVAL;
        goto error;
    }
    words[w++] = (char *)host;
    words[w++] = (char *)"env";
    first_quoted = w;
    for (size_t i = 0; i < nenv; i++)
        if (!(words[w++] = shell_quote(s->env[i])))
            goto error;
    if (!(words[w++] = shell_quote(s->exe)))
        goto error;
    for (size_t i = 1; i < nargs; i++)
        if (!(words[w++] = shell_quote(s->argv[i])))
            goto error;
    if (s->secret && !(words[w++] = shell_quote(TB_SECRET_STDIN_ARG)))
        goto error;
    nquoted = w - first_quoted;

    what = "the secret's stdin pipe";
    if (s->secret) {
        e = secret_pipe(s->secret, &pfd[0]);
        if (e)
            goto error;
    }

    what = NULL;
    envp = build_env(NULL, NULL);      /* never TBON_SECRET, even inherited */
    if (!envp)
        goto error;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t fa;
    e = spawn_setup(&attr, &fa, pfd[0], errfd);
    if (e)
        goto error;
    e = posix_spawnp(pid, words[0], &fa, &attr, words, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (e)
        goto error;
    TB_DEBUG("launch", "started %s on %s through %s (pid %d)", s->exe, host, words[0], (int)*pid);
    close(pfd[0]);
    for (size_t i = 0; i < nquoted; i++)
        free(words[first_quoted + i]);
    free(words);
    free(rshcopy);
    free(envp);
    return 0;

error:
    if (pfd[0] >= 0)
        close(pfd[0]);
    if (pfd[1] >= 0)
        close(pfd[1]);
    if (words && first_quoted)
        for (size_t i = first_quoted; i < cap && words[i]; i++)
            free(words[i]);
    if (what)
        tb_error_set(err, TBON_ELAUNCH, "cannot launch %s on host %s: %s: %s", s->exe,
                     host, what, strerror(e));
    else
        tb_error_set(err, TBON_ELAUNCH, "cannot launch %s on host %s: remote shell %s: %s",
                     s->exe, host, words && words[0] ? words[0] : rsh, strerror(e));
    free(words);
    free(rshcopy);
    free(envp);
    return TBON_ELAUNCH;
}

int tb_launch(const tb_launch_spec_t *s, pid_t *pid, tbon_error_t *err)
{
    if (!s || !pid || !s->exe || !*s->exe || !s->argv || !s->argv[0])
        return tb_error_set(err, TBON_EINVAL, "tb_launch: no program or argv given");
    const char *host = s->host && *s->host ? s->host : "localhost";
    for (size_t i = 0; s->env && s->env[i]; i++)
        if (!strchr(s->env[i], '=') || s->env[i][0] == '=')
            return tb_error_set(err, TBON_EINVAL, "cannot launch %s on host %s: "
                                "environment entry \"%s\" is not NAME=VALUE",
                                s->exe, host, s->env[i]);
    if (host[0] == '-')   /* would be an option of the remote shell */
        return tb_error_set(err, TBON_ELAUNCH, "cannot launch %s on host %s: "
                            "a host name cannot start with '-'", s->exe, host);
    int ep[2] = { -1, -1 };
    if (s->stderr_pipe) {
        *s->stderr_pipe = -1;
        if (pipe2(ep, O_CLOEXEC) < 0)
            return tb_error_set(err, TBON_ELAUNCH, "cannot launch %s on host %s: a pipe for "
                                "its stderr: %s", s->exe, host, strerror(errno));
    }
    int rc = s->here || tb_host_is_local(host) ? launch_local(s, host, ep[1], pid, err)
                                    : launch_remote(s, host, ep[1], pid, err);
    if (ep[1] >= 0)
        close(ep[1]);
    if (rc == 0 && s->stderr_pipe)
        *s->stderr_pipe = ep[0];
    else if (ep[0] >= 0)
        close(ep[0]);
    return rc;
}

/* ---- the launched side: taking the secret ---- */

/* The first line of stdin (bounded in length and time) into out, without its
 * line end. Returns 0 or TBON_EAUTH. */
static int read_secret_line(char *out, size_t outlen)
{
    char buf[SECRET_LINE_MAX];
    size_t len = 0;
    int rc = TBON_EAUTH;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        char *nl = memchr(buf, '\n', len);
        if (nl) {
            len = (size_t)(nl - buf);
            break;
        }
        if (len == sizeof buf)
            goto done;                     /* no line end: not a secret */
        clock_gettime(CLOCK_MONOTONIC, &now);
        long waited = (long)(now.tv_sec - t0.tv_sec) * 1000 +
                      (now.tv_nsec - t0.tv_nsec) / 1000000;
        struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
        int r = poll(&p, 1, waited >= SECRET_STDIN_WAIT ? 0 : (int)(SECRET_STDIN_WAIT - waited));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            goto done;
        ssize_t n = read(STDIN_FILENO, buf + len, sizeof buf - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            goto done;
        if (n == 0)
            break;                         /* a last line without '\n' */
        len += (size_t)n;
    }
    while (len > 0 && buf[len - 1] == '\r')
        len--;
    if (len > 0 && len < outlen) {
        memcpy(out, buf, len);
        out[len] = '\0';
        rc = 0;
    }
done:
    explicit_bzero(buf, sizeof buf);
    return rc;
}

/* Point stdin at /dev/null, so nothing reads the rest of the launcher's pipe. */
static void stdin_to_devnull(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    if (fd == STDIN_FILENO) {
        fcntl(fd, F_SETFD, 0);
        return;
    }
    dup2(fd, STDIN_FILENO);               /* fd 0 itself is not close-on-exec */
    close(fd);
}

int tb_launch_take_secret(int *argc, char **argv, char *out, size_t outlen)
{
    int rc = TBON_EAUTH;
    int found = -1;
    for (int i = 1; argc && argv && i < *argc; i++) {
        if (argv[i] && strcmp(argv[i], TB_SECRET_STDIN_ARG) == 0) {
            found = i;
            break;
        }
    }
    if (found >= 0) {
        memmove(&argv[found], &argv[found + 1], (size_t)(*argc - found - 1) * sizeof *argv);
        (*argc)--;
        argv[*argc] = NULL;
        rc = read_secret_line(out, outlen);
        stdin_to_devnull();
        tb_config_take_secret(NULL, 0);     /* wiped and unset all the same */
    } else {
        rc = tb_config_take_secret(out, outlen);
    }
    if (rc < 0 && outlen > 0)
        out[0] = '\0';
    return rc;
}

/* ---- reaping ---- */

static atomic_int reap_no_pidfd;     /* tests: force the fallback */

void tb_reap_force_fallback(int on)
{
    atomic_store(&reap_no_pidfd, on);
}

/* waitpid(pid, 0) through EINTR. Returns the status or -1. */
static int wait_status(pid_t pid)
{
    int st;
    pid_t r;
    do
        r = waitpid(pid, &st, 0);
    while (r < 0 && errno == EINTR);
    return r == pid ? st : -1;
}

/* Milliseconds left until deadline (>= 0). */
static int ms_left(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long ms = (long long)(deadline->tv_sec - now.tv_sec) * 1000 +
                   (deadline->tv_nsec - now.tv_nsec) / 1000000;
    return ms < 0 ? 0 : ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Fallback without pidfd_open: a timer thread kills pid at the deadline
 * while this thread blocks in waitid(WNOWAIT). The child stays a zombie until
 * `exited` is set, so the kill can never hit a recycled pid. */
struct killer {
    pthread_mutex_t lock;
    pthread_cond_t  cond;
    int             exited;
    pid_t           pid;
    struct timespec deadline;        /* CLOCK_MONOTONIC */
};

static void *killer_main(void *arg)
{
    struct killer *k = arg;
    pthread_mutex_lock(&k->lock);
    while (!k->exited) {
        if (pthread_cond_timedwait(&k->cond, &k->lock, &k->deadline) == ETIMEDOUT) {
            if (!k->exited)
                kill(k->pid, SIGKILL);
            break;
        }
    }
    pthread_mutex_unlock(&k->lock);
    return NULL;
}

static int reap_with_thread(pid_t pid, const struct timespec *deadline)
{
    struct killer k = { .exited = 0, .pid = pid, .deadline = *deadline };
    pthread_condattr_t ca;
    pthread_t th;
    pthread_mutex_init(&k.lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&k.cond, &ca);
    pthread_condattr_destroy(&ca);
    int have_thread = pthread_create(&th, NULL, killer_main, &k) == 0;
    if (!have_thread)
        kill(pid, SIGKILL);          /* no timer: the caller's bound still holds */
    siginfo_t si;
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
        ;
    pthread_mutex_lock(&k.lock);
    k.exited = 1;
    pthread_cond_signal(&k.cond);
    pthread_mutex_unlock(&k.lock);
    if (have_thread)
        pthread_join(th, NULL);
    pthread_cond_destroy(&k.cond);
    pthread_mutex_destroy(&k.lock);
    return wait_status(pid);
}

int tb_reap(pid_t pid, int timeout_ms)
{
    siginfo_t si;
    if (pid <= 0)
        return TBON_EINVAL;
    /* Not our child (or already reaped): never signal it. */
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
        return TBON_EINVAL;
    if (si.si_pid == pid || timeout_ms < 0)
        return wait_status(pid);

    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }

    int pfd = -1;
#ifdef SYS_pidfd_open
    if (!atomic_load(&reap_no_pidfd))
        pfd = (int)syscall(SYS_pidfd_open, pid, 0);
#endif
    if (pfd < 0)
        return reap_with_thread(pid, &deadline);

    /* A pidfd becomes readable when the process exits. */
    for (;;) {
        struct pollfd p = { .fd = pfd, .events = POLLIN };
        int r = poll(&p, 1, ms_left(&deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {                 /* cannot happen; keep the bound anyway */
            close(pfd);
            return reap_with_thread(pid, &deadline);
        }
        if (r == 0) {
            TB_DEBUG("launch", "pid %d still running after %d ms: killing it",
                     (int)pid, timeout_ms);
            kill(pid, SIGKILL);
        }
        break;
    }
    close(pfd);
    return wait_status(pid);
}
