/* safefile.c - files that hold a session's secret or name it (safefile.h).
 *
 * The attach file was written as FILE.tmp.PID with O_CREAT|O_TRUNC: a name
 * anyone could guess, and a file anyone could make first. A local user who
 * made it 0666 beforehand got an attach file of mode 0666, secret and all;
 * one who made it a symlink had us write the secret where they liked. Here
 * the temporary name is mkstemp's (O_EXCL, so a name made beforehand is
 * never opened, and mode 0600 from the first moment), in a directory where
 * nobody else can rename or remove what we put there. */
#include "util/safefile.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tb_safe_dir(const char *dir, char *why, size_t whylen)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(why, whylen, "%s: %s", dir, strerror(errno));
        return TBON_EIO;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "%s is not a directory", dir);
        return TBON_EIO;
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        snprintf(why, whylen, "directory %s belongs to another user (uid %u)", dir,
                 (unsigned)st.st_uid);
        return TBON_EIO;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        snprintf(why, whylen, "directory %s is writable by %s and not sticky: another user "
                 "could replace the file", dir, st.st_mode & S_IWOTH ? "others" : "its group");
        return TBON_EIO;
    }
    return 0;
}

/* The directory part of path ("." for a bare name). */
static void dir_of(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, cap, ".");
    else if (slash == path)
        snprintf(out, cap, "/");
    else
        snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

int tb_safe_create(const char *path, char *tmp, size_t tmplen, char *why, size_t whylen)
{
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    if (tb_safe_dir(dir, why, whylen) != 0)
        return TBON_EIO;
    if (snprintf(tmp, tmplen, "%s.XXXXXX", path) >= (int)tmplen) {
        snprintf(why, whylen, "%s: name too long", path);
        return TBON_EIO;
    }
    /* mkostemp: O_CREAT|O_EXCL, mode 0600 whatever the umask. O_NOFOLLOW is
     * implied by O_EXCL (a symlink at the name makes it fail). */
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, whylen, "cannot create a file in %s: %s", dir, strerror(errno));
        return TBON_EIO;
    }
    return fd;
}

int tb_safe_commit(const char *tmp, const char *path, char *why, size_t whylen)
{
    if (rename(tmp, path) == 0)
        return 0;
    int e = errno;
    unlink(tmp);
    snprintf(why, whylen, "cannot put the file in place as %s: %s%s", path, strerror(e),
             e == EPERM || e == EACCES ? " (a file of another user has that name?)" : "");
    return TBON_EIO;
}
