/* test_solib.c - BUILD/lib holds the shared library as an installed one is
 * laid out (libtbon.so -> libtbon.so.0 -> libtbon.so.0.MINOR, the soname
 * libtbon.so.0), so that a program linked with -L BUILD/lib -ltbon starts
 * with LD_LIBRARY_PATH=BUILD/lib (BUILD: the build this test belongs to). */
#include "../harness.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* BUILD, from this program's path BUILD/tests/unit/test_solib. */
static const char *build_dir(void)
{
    static char dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0)
        return NULL;
    dir[n] = '\0';
    for (int i = 0; i < 3; i++) {
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
            return NULL;
        *slash = '\0';
    }
    return dir;
}

/* The target of the symbolic link path, or "" (not a link). */
static const char *link_of(const char *path)
{
    static char t[PATH_MAX];
    ssize_t n = readlink(path, t, sizeof t - 1);
    t[n > 0 ? n : 0] = '\0';
    return t;
}

TEST(lib_links_as_installed)
{
    const char *b = build_dir();
    REQUIRE(b);
    char so[PATH_MAX + 32], so0[PATH_MAX + 32];
    snprintf(so, sizeof so, "%s/lib/libtbon.so", b);
    snprintf(so0, sizeof so0, "%s/lib/libtbon.so.0", b);
    CHECK_STR(link_of(so), "libtbon.so.0");
    const char *real = link_of(so0);
    /* libtbon.so.0.N, N a number, and a regular file. */
    CHECK(strncmp(real, "libtbon.so.0.", 13) == 0 && real[13] >= '0' && real[13] <= '9' &&
          real[13 + strspn(real + 13, "0123456789")] == '\0');
    char file[2 * PATH_MAX];
    snprintf(file, sizeof file, "%s/lib/%s", b, real);
    CHECK_STR(link_of(file), "");
    CHECK(access(file, R_OK) == 0);
}

/* The program starts, works, and runs the library of this build. */
TEST(program_linked_against_the_build_starts)
{
    const char *b = build_dir();
    REQUIRE(b);
    char exe[PATH_MAX + 32], lib[PATH_MAX + 32], out[PATH_MAX + 32];
    snprintf(exe, sizeof exe, "%s/tests/bin/solib_user", b);
    snprintf(lib, sizeof lib, "%s/lib", b);
    snprintf(out, sizeof out, "%s/solib.out", th_tmpdir());
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (!freopen(out, "w", stdout))
            _exit(126);
        setenv("LD_LIBRARY_PATH", lib, 1);
        execl(exe, exe, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        th_fail(__FILE__, __LINE__, "%s with LD_LIBRARY_PATH=%s: status 0x%x (127: not "
                "started; the loader's message is above)", exe, lib, st);
    char *text = th_read_file(out);
    REQUIRE(text);
    text[strcspn(text, "\n")] = '\0';
    char want[PATH_MAX], got[PATH_MAX];
    char so0[PATH_MAX + 64];
    snprintf(so0, sizeof so0, "%s/libtbon.so.0", lib);
    REQUIRE(realpath(so0, want));
    if (!realpath(text, got))
        th_fail(__FILE__, __LINE__, "loaded from \"%s\": %s", text, strerror(errno));
    else
        CHECK_STR(got, want);
    free(text);
}
