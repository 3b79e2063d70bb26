/* log.h - the library's logger: levelled lines with time, rank, role and tag */
#ifndef TB_LOG_H
#define TB_LOG_H

#include <stdint.h>

#include <tbon/tbon.h>

#include "util/config.h"
#include "util/hot.h"

/* Who this process is, for every line from now on (role: "fe", "commnode",
 * "be"; rank TBON_RANK_NONE before it is known). Any thread. */
void tb_log_set_identity(tbon_rank_t rank, const char *role);

/* Send the default logger's lines to this file (appending, created 0600)
 * instead of stderr; NULL goes back to stderr. Returns 0 or TBON_EIO. Used by
 * commnodes: their lines go to tb_log_session_dir()/commnode-RANK.log. */
int tb_log_to_file(const char *path);

/* The per-session log directory for session id `session`: conf's
 * TBON_LOG_DIR if set, else ${TMPDIR:-/tmp}/tbon-<user>-<session hex> (user:
 * the password entry's name, else $USER, else the uid); created (0700) if
 * missing. conf NULL: nothing set. Writes the path into out. Returns 0 or
 * TBON_EIO. */
int tb_log_session_dir(const tb_config_t *conf, uint64_t session, char *out, size_t outlen);
/* Its path alone (nothing created): 0, or TBON_EIO when it does not fit. */
int tb_log_session_path(const tb_config_t *conf, uint64_t session, char *out, size_t outlen);
/* At a process's end: its own log file (own_log, or NULL) goes if nothing
 * was written to it, and the default directory if that left it empty (a
 * session with nothing to log leaves nothing behind; the last process of
 * the session on a host removes it). A TBON_LOG_DIR of the user's stays. */
void tb_log_drop_session_dir(const tb_config_t *conf, uint64_t session, const char *own_log);

/* Write all of buf to fd, a stderr or a log file (one write() unless the
 * kernel takes less). One that is gone - a pipe whose reader died, such as
 * the one a remote shell or a dead parent gave us - costs the lines, never
 * the process: SIGPIPE is held back around the write, and the one it
 * raised taken. Other errors drop the rest: there is nowhere to say them. */
void tb_write_stderr(int fd, const char *buf, size_t len);

/* 1 if lines of this level are written (level from $TBON_LOG, read once,
 * from the process's configuration, util/config.h: error|warn|info|debug,
 * default warn, or tbon_log_set_level). */
int tb_log_enabled(int level);

/* Log one line: "2026-11-22T10:11:12.345678Z warn rank=3 commnode [tag] text".
 * tag: a short stable word ("launch", "conn", "filter"). Thread-safe. */
void tb_log(int level, const char *tag, const char *fmt, ...)
    __attribute__((format(printf, 3, 4))) TB_COLD;

#define TB_LOG(level, tag, ...) \
    do { if (tb_log_enabled(level)) tb_log(level, tag, __VA_ARGS__); } while (0)
#define TB_ERROR(tag, ...) TB_LOG(TBON_LOG_ERROR, tag, __VA_ARGS__)
#define TB_WARN(tag, ...)  TB_LOG(TBON_LOG_WARN, tag, __VA_ARGS__)
#define TB_INFO(tag, ...)  TB_LOG(TBON_LOG_INFO, tag, __VA_ARGS__)
#define TB_DEBUG(tag, ...) TB_LOG(TBON_LOG_DEBUG, tag, __VA_ARGS__)

/* Lines a peer can cause at will (a connection refused, a notice rejected)
 * are limited per call site: at most TB_LOG_LIMIT_LINES in every
 * TB_LOG_LIMIT_MS, the rest counted, and the count said in a line of its
 * own before the next line the site may write. */
#define TB_LOG_LIMIT_LINES 10
#define TB_LOG_LIMIT_MS 10000
typedef struct {
    int64_t start_ms;          /* the current window's start (0: none yet) */
    unsigned n;                /* lines written in it */
    unsigned dropped;          /* lines not written since the last one written */
} tb_log_limit_t;

/* 1 if the site rl may write a line now (after saying how many it did not
 * write, if any), 0 if the line is to be dropped (and counted). Any thread. */
int tb_log_limit(tb_log_limit_t *rl, int lvl, const char *tag) TB_COLD;

#define TB_LOG_LIMITED(level, tag, ...) \
    do { static tb_log_limit_t tb_rl_; \
         if (tb_log_enabled(level) && tb_log_limit(&tb_rl_, level, tag)) \
             tb_log(level, tag, __VA_ARGS__); } while (0)
#define TB_WARN_LIMITED(tag, ...) TB_LOG_LIMITED(TBON_LOG_WARN, tag, __VA_ARGS__)

#endif
