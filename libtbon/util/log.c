/* log.c - the library's logger: levelled one-line records to stderr, a file or
 * an application handler
 *
 * A line is formatted on the caller's stack, then handed over under one mutex
 * (the handler call, or one write() by the default handler), so lines from
 * different threads never interleave and the lock is held only for the
 * output itself. Nothing here ever writes to stdout.
 */
#include "util/log.h"
#include "util/hot.h"
#include "util/error.h"
#include "util/clock.h"
#include "util/config.h"
#include "util/safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 4096          /* whole line, newline included */
#define LOG_ROLE_MAX 16

static pthread_once_t   level_once = PTHREAD_ONCE_INIT;
static atomic_int       level = TBON_LOG_WARN;
static atomic_int       bad_env_pending;          /* 1: warn about $TBON_LOG once */
static char             bad_env_value[64];        /* written once, in level_init */

static pthread_mutex_t  id_lock = PTHREAD_MUTEX_INITIALIZER;
static tbon_rank_t      id_rank = TBON_RANK_NONE; /* under id_lock */
static char             id_role[LOG_ROLE_MAX] = "-";

static pthread_mutex_t  out_lock = PTHREAD_MUTEX_INITIALIZER;
static tbon_log_fn     *out_fn;                   /* under out_lock; NULL: default */
static void            *out_arg;
static int              out_fd = -1;              /* default handler's file; -1: stderr */

static const char *const level_names[] = { "error", "warn", "info", "debug" };

/* Clamp any int to a valid level. */
static int clamp_level(int l)
{
    return l < TBON_LOG_ERROR ? TBON_LOG_ERROR : l > TBON_LOG_DEBUG ? TBON_LOG_DEBUG : l;
}

/* pthread_once body: the level from $TBON_LOG (the process's configuration).
 * It must not log itself (a handler calling back into tb_log_enabled would
 * re-enter the once), so a bad value is only recorded here and reported by
 * tb_log_enabled. */
static void level_init(void)
{
    const char *v = tb_config_process()->log;
    if (!v || !*v)
        return;
    for (int l = TBON_LOG_ERROR; l <= TBON_LOG_DEBUG; l++) {
        if (strcasecmp(v, level_names[l]) == 0) {
            atomic_store(&level, l);
            return;
        }
    }
    snprintf(bad_env_value, sizeof bad_env_value, "%s", v);
    atomic_store(&bad_env_pending, 1);
}

/* Make sure the level is known; report a bad $TBON_LOG once (any thread). */
TB_HOT static void level_ready(void)
{
    pthread_once(&level_once, level_init);
    if (atomic_load_explicit(&bad_env_pending, memory_order_relaxed) &&
        atomic_exchange(&bad_env_pending, 0))
        TB_WARN("log", "TBON_LOG=\"%s\" is not one of error, warn, info, debug; "
                "using warn", bad_env_value);
}

int tb_log_enabled(int l)
{
    level_ready();
    return l <= atomic_load_explicit(&level, memory_order_relaxed);
}

void tbon_log_set_level(int l)
{
    level_ready();               /* so that $TBON_LOG, read later, cannot undo this */
    atomic_store(&level, clamp_level(l));
}

void tb_log_set_identity(tbon_rank_t rank, const char *role)
{
    pthread_mutex_lock(&id_lock);
    id_rank = rank;
    snprintf(id_role, sizeof id_role, "%s", role && *role ? role : "-");
    pthread_mutex_unlock(&id_lock);
}

void tbon_log_set_handler(tbon_log_fn *fn, void *arg)
{
    pthread_mutex_lock(&out_lock);
    out_fn = fn;
    out_arg = fn ? arg : NULL;
    pthread_mutex_unlock(&out_lock);
}

int tb_log_to_file(const char *path)
{
    int fd = -1;
    if (path) {
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            return TBON_EIO;
    }
    pthread_mutex_lock(&out_lock);
    int old = out_fd;
    out_fd = fd;
    pthread_mutex_unlock(&out_lock);
    if (old >= 0)
        close(old);
    return 0;
}

void tb_write_stderr(int fd, const char *buf, size_t len)
{
    if (len == 0)
        return;
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EPIPE) {
            struct timespec zero = { 0, 0 };
            sigtimedwait(&pipe_set, NULL, &zero);
        }
        if (n <= 0)
            break;          /* nowhere to say it: dropped */
        buf += n;
        len -= (size_t)n;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* "2026-11-22T10:11:12.345678Z" into out (at least 28 bytes); returns length. */
static size_t format_time(char *out, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    int m = snprintf(out + n, cap - n, ".%06ldZ", (long)(ts.tv_nsec / 1000));
    return n + (m > 0 ? (size_t)m : 0);
}

void tb_log(int l, const char *tag, const char *fmt, ...)
{
    char line[LOG_LINE_MAX + 1];           /* + NUL */
    const size_t max = LOG_LINE_MAX - 1;   /* room for the newline */
    char role[LOG_ROLE_MAX];
    tbon_rank_t rank;
    int saved_errno = errno;               /* callers log errno-based messages */

    l = clamp_level(l);
    pthread_mutex_lock(&id_lock);
    rank = id_rank;
    memcpy(role, id_role, sizeof role);
    pthread_mutex_unlock(&id_lock);

    size_t n = format_time(line, sizeof line);
    char rankbuf[16];
    if (rank == TBON_RANK_NONE)
        snprintf(rankbuf, sizeof rankbuf, "-");
    else
        snprintf(rankbuf, sizeof rankbuf, "%u", (unsigned)rank);
    n += (size_t)snprintf(line + n, sizeof line - n, " %s rank=%s %s [%.32s] ",
                          level_names[l], rankbuf, role, tag && *tag ? tag : "-");
    size_t head = n;

    va_list ap;
    va_start(ap, fmt);
    errno = saved_errno;                   /* so %m still works */
    int m = vsnprintf(line + n, max + 1 - n, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    if ((size_t)m > max - n) {             /* truncated: say so */
        n = max;
        memcpy(line + n - 3, "...", 3);
    } else {
        n += (size_t)m;
    }
    line[n] = '\0';
    /* One record, one line: a message with newlines must not forge others. */
    for (size_t i = head; i < n; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';

    pthread_mutex_lock(&out_lock);
    if (out_fn) {
        out_fn(out_arg, l, line);
    } else {
        line[n] = '\n';
        tb_write_stderr(out_fd >= 0 ? out_fd : STDERR_FILENO, line, n + 1);
    }
    pthread_mutex_unlock(&out_lock);
    errno = saved_errno;
}

static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;

int tb_log_limit(tb_log_limit_t *rl, int lvl, const char *tag)
{
    int64_t now = tb_now_ms();
    pthread_mutex_lock(&limit_lock);
    if (!rl->start_ms || now - rl->start_ms >= TB_LOG_LIMIT_MS) {
        rl->start_ms = now;
        rl->n = 0;
    }
    int ok = rl->n < TB_LOG_LIMIT_LINES;
    unsigned dropped = 0;
    if (ok) {
        rl->n++;
        dropped = rl->dropped;
        rl->dropped = 0;
    } else {
        rl->dropped++;
    }
    pthread_mutex_unlock(&limit_lock);
    if (dropped)
        tb_log(lvl, tag, "%u more lines like the next one were not shown (at most %d every "
               "%d s)", dropped, TB_LOG_LIMIT_LINES, TB_LOG_LIMIT_MS / 1000);
    return ok;
}

/* This user's name for the session directory: the password entry, else $USER
 * (env_user), else the uid; never containing '/'. */
static void user_name(const char *env_user, char *out, size_t cap)
{
    struct passwd pw, *res = NULL;
    char buf[1024];
    const char *name = NULL;
    if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &res) == 0 && res && res->pw_name[0])
        name = res->pw_name;
    else if (env_user && *env_user)
        name = env_user;
    if (name)
        snprintf(out, cap, "%s", name);
    else
        snprintf(out, cap, "%lu", (unsigned long)geteuid());
    for (char *p = out; *p; p++)
        if (*p == '/')
            *p = '_';
}

/* mkdir -p path (mode 0700 for what is created). Returns 0 or -1. */
static int make_dirs(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return TBON_EIO;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
            return TBON_EIO;
        *p = '/';
    }
    if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
        return TBON_EIO;
    struct stat st;
    return stat(tmp, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

int tb_log_session_path(const tb_config_t *conf, uint64_t session, char *out, size_t outlen)
{
    const char *dir = conf ? conf->log_dir : NULL;
    if (dir && *dir)
        return snprintf(out, outlen, "%s", dir) < (int)outlen ? 0 : TBON_EIO;
    const char *tmp = conf ? conf->tmpdir : NULL;
    char user[256];
    user_name(conf ? conf->user : NULL, user, sizeof user);
    int n = snprintf(out, outlen, "%s/tbon-%s-%016llx", tmp && *tmp ? tmp : "/tmp",
                     user, (unsigned long long)session);
    return n < 0 || (size_t)n >= outlen ? TBON_EIO : 0;
}

void tb_log_drop_session_dir(const tb_config_t *conf, uint64_t session, const char *own_log)
{
    struct stat st;
    if (own_log && stat(own_log, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
        unlink(own_log);
    char path[4096];
    if ((conf && conf->log_dir && *conf->log_dir) ||
        tb_log_session_path(conf, session, path, sizeof path) != 0)
        return;
    rmdir(path);            /* fails, as it should, unless it is empty */
}

int tb_log_session_dir(const tb_config_t *conf, uint64_t session, char *out, size_t outlen)
{
    const char *dir = conf ? conf->log_dir : NULL;
    if (dir && *dir) {
        /* The user chose it: create it if needed. Logs name the session and
         * the ssh masters' sockets live here: not in a directory another user
         * could write to (util/safefile.h). */
        if (snprintf(out, outlen, "%s", dir) >= (int)outlen || make_dirs(out) < 0)
            return TBON_EIO;
        char why[512];
        if (tb_safe_dir(out, why, sizeof why) != 0) {
            TB_WARN("log", "TBON_LOG_DIR not used: %s", why);
            return TBON_EIO;
        }
        return 0;
    }
    if (tb_log_session_path(conf, session, out, outlen) != 0)
        return TBON_EIO;
    if (mkdir(out, 0700) == 0)
        return 0;
    if (errno != EEXIST)
        return TBON_EIO;
    /* In a shared /tmp the name is predictable: use it only if it is a real
     * directory (not a symlink) that we own. */
    struct stat st;
    if (lstat(out, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return TBON_EIO;
    return 0;
}
