/* safefile.h - files that hold a session's secret or name it (the attach
 * file, the logs): created so that no other local user can read, replace or
 * redirect them (issue 19, item 5). */
#ifndef TB_SAFEFILE_H
#define TB_SAFEFILE_H

#include <stddef.h>

/* 0 if dir may hold such a file: a directory owned by us or by root, and
 * writable by nobody else unless its sticky bit is set (as /tmp's is: others
 * may create names there, but not rename or remove ours). Else -1, with the
 * reason in why ("DIR is writable by others and not sticky"). */
int tb_safe_dir(const char *dir, char *why, size_t whylen);

/* Create a new file to become `path`: a name of mkstemp's in path's own
 * directory (checked with tb_safe_dir), opened O_EXCL|O_NOFOLLOW with mode
 * 0600 from the start, its name written into tmp. The fd, or TBON_EIO with the
 * reason in why. A name someone made beforehand is never opened. */
int tb_safe_create(const char *path, char *tmp, size_t tmplen, char *why, size_t whylen);

/* Put tmp in place as path (rename: a symlink already at path is replaced,
 * never followed). 0, or TBON_EIO with tmp removed and the reason in why. */
int tb_safe_commit(const char *tmp, const char *path, char *why, size_t whylen);

#endif
