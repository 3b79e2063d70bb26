/* test_sshmux.c - one ssh master per host (proc/sshmux.c) with real processes:
 * the masters are this test binary run as "ssh" (found first in PATH), which
 * plays OpenSSH's part on this machine: a master makes its control socket
 * and runs its command with sh, a session through it connects to that
 * socket and runs its own; hosts named fail*, latefail* (after 200 ms),
 * exit3*, hang*, slow* and stubborn* misbehave as their names say. Every case checks that no process
 * it started is left. */
#include "../harness.h"
#include "lib/procscan.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "proc/launch.h"
#include "proc/sshmux.h"
#include "util/clock.h"
#include "util/config.h"

#define SESSION 0x55aa00ff1234ull
#define LOG_ENV "TBON_SSHMUX_TEST_LOG"     /* the fake ssh's record of its runs */
#define RUN_ENV "TBON_SSHMUX_TEST_RUN"     /* marks every process of one case */

/* The environment as the library would read it now, at a network's creation
 * (util/config.h). Valid until the next call. */
static const tb_config_t *conf_now(void)
{
    static tb_config_t c;
    tb_config_free(&c);
    if (tb_config_load(&c, NULL) != 0)
        th_fail(__FILE__, __LINE__, "tb_config_load: out of memory");
    return &c;
}

/* ---- the fake ssh (this binary, run as "ssh") ---- */

/* Append one line to $LOG_ENV: "PID HOST MASTER PATH\tARG|ARG|...". */
static void fake_log(int argc, char **argv, const char *host, const char *master,
                     const char *path)
{
    const char *log = getenv(LOG_ENV);
    char line[4096];
    int n = snprintf(line, sizeof line, "%d %s %s %s\t", (int)getpid(), host,
                     master ? master : "-", path ? path : "-");
    for (int i = 1; i < argc && n > 0 && (size_t)n < sizeof line; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s%s", argv[i], i + 1 < argc ? "|" : "");
    if (n <= 0 || (size_t)n >= sizeof line - 1 || !log)
        return;
    line[n++] = '\n';
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
        ssize_t w = write(fd, line, (size_t)n);
        (void)w;
        close(fd);
    }
}

static int unix_socket(const char *path, int do_bind)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path)
        return -1;
    strcpy(sa.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    int rc = do_bind ? bind(s, (struct sockaddr *)&sa, sizeof sa)
                     : connect(s, (struct sockaddr *)&sa, sizeof sa);
    if (rc < 0 || (do_bind && listen(s, 8) < 0)) {
        close(s);
        return -1;
    }
    return s;
}

static int run_sh(const char *cmd)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return 255;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A master: the control socket, then the command until it ends. */
static int fake_master(const char *host, const char *path, const char *cmd)
{
    if (starts(host, "latefail"))
        usleep(200 * 1000);
    if (starts(host, "fail") || starts(host, "latefail")) {
        fputs("Permission denied (publickey).\r\n", stderr);
        return 255;
    }
    if (starts(host, "exit3"))
        return run_sh("exit 3");              /* its command fails at once */
    if (starts(host, "hang"))
        for (;;)
            pause();                          /* never logs in, never ends */
    if (starts(host, "slow"))
        usleep(300 * 1000);
    int s = path ? unix_socket(path, 1) : -1;
    if (s < 0)
        return 255;
    if (starts(host, "stubborn"))
        for (;;)
            pause();                          /* never ends, whatever its stdin */
    int st = run_sh(cmd);
    unlink(path);
    close(s);
    return st;
}

static int fake_ssh(int argc, char **argv)
{
    const char *master = NULL, *path = NULL, *host = NULL;
    int i = 1;
    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            if (starts(argv[i + 1], "ControlMaster="))
                master = argv[i + 1] + strlen("ControlMaster=");
            else if (starts(argv[i + 1], "ControlPath="))
                path = argv[i + 1] + strlen("ControlPath=");
            i += 2;
        } else {
            i++;
        }
    }
    if (i >= argc)
        return 255;
    host = argv[i++];
    fake_log(argc, argv, host, master, path);
    /* the command: its words joined with spaces, as ssh does */
    char cmd[8192] = "";
    size_t n = 0;
    for (; i < argc; i++)
        n += (size_t)snprintf(cmd + n, n < sizeof cmd ? sizeof cmd - n : 0, "%s%s",
                              n ? " " : "", argv[i]);
    if (n >= sizeof cmd)
        return 255;
    if (master && strcmp(master, "yes") == 0)
        return fake_master(host, path, cmd);
    if (master && strcmp(master, "no") == 0 && path) {
        /* a session through the master: its socket must be there */
        int s = unix_socket(path, 0);
        if (s < 0) {
            fprintf(stderr, "Control socket connect(%s): %s\n", path, strerror(errno));
            return 255;
        }
        close(s);
    }
    return run_sh(cmd);
}

__attribute__((constructor)) static void maybe_ssh(int argc, char **argv, char **envp)
{
    (void)envp;
    const char *base = argc > 0 && argv && argv[0] ? strrchr(argv[0], '/') : NULL;
    base = base ? base + 1 : argc > 0 && argv ? argv[0] : NULL;
    if (base && strcmp(base, "ssh") == 0)
        _exit(fake_ssh(argc, argv));
}

/* ---- the case's set-up ---- */

static char run_entry[600];

/* PATH with the fake ssh first, the session directory in the case's
 * tmpdir, the log, and the mark on every process to come. */
static void setup(void)
{
    const char *tmp = th_tmpdir();
    char bin[512], ssh[600], self[PATH_MAX], path[8192], logdir[600], log[600];
    snprintf(bin, sizeof bin, "%s/bin", tmp);
    snprintf(ssh, sizeof ssh, "%s/ssh", bin);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || mkdir(bin, 0700) != 0) {
        th_fail(__FILE__, __LINE__, "set-up: %s", strerror(errno));
        return;
    }
    self[n] = 0;
    if (symlink(self, ssh) != 0)
        th_fail(__FILE__, __LINE__, "symlink %s: %s", ssh, strerror(errno));
    const char *old = getenv("PATH");
    snprintf(path, sizeof path, "%s:%s", bin, old ? old : "/usr/bin:/bin");
    setenv("PATH", path, 1);
    snprintf(logdir, sizeof logdir, "%s/s", tmp);
    setenv("TBON_LOG_DIR", logdir, 1);
    snprintf(log, sizeof log, "%s/ssh.log", tmp);
    setenv(LOG_ENV, log, 1);
    unsetenv("TBON_RSH");
    unsetenv("TBON_SSH_MUX");
    snprintf(run_entry, sizeof run_entry, "%s=%s", RUN_ENV, tmp);
    setenv(RUN_ENV, tmp, 1);
}

/* How many processes of this case are alive (not this one). */
static long alive(void)
{
    return tb_proc_scan_env(run_entry, 0, 0, NULL, 0);
}

/* Wait (at most ms) until none is. */
static long alive_after(int ms)
{
    int64_t end = tb_now_ms() + ms;
    long k;
    while ((k = alive()) > 0 && tb_now_ms() < end)
        usleep(10 * 1000);
    return k;
}

/* The fake's log: lines for host with ControlMaster master ("yes", "no"). */
static int log_lines(const char *host, const char *master, char lines[][1024], int max)
{
    char path[600];
    snprintf(path, sizeof path, "%s/ssh.log", th_tmpdir());
    char *all = th_read_file(path);
    int k = 0;
    for (char *save = NULL, *l = all ? strtok_r(all, "\n", &save) : NULL; l;
         l = strtok_r(NULL, "\n", &save)) {
        char h[256], m[16];
        if (sscanf(l, "%*d %255s %15s", h, m) == 2 && strcmp(h, host) == 0 &&
            strcmp(m, master) == 0) {
            if (k < max)
                snprintf(lines[k], sizeof lines[0], "%s", l);
            k++;
        }
    }
    free(all);
    return k;
}

static int is_socket(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* The ControlPath the master to host was given ("" if none ran). */
static const char *master_path(const char *host)
{
    static char p[8][256];
    static int slot;
    char *out = p[slot++ % 8];
    char lines[4][1024];
    out[0] = 0;
    if (log_lines(host, "yes", lines, 4) >= 1)
        sscanf(lines[0], "%*d %*s %*s %255s", out);
    return out;
}

/* ---- cases ---- */

/* Two hosts, one master each (a second open of a host starts none); each
 * master is the default remote shell with the master's options, its
 * control socket in the session directory; the remote shell handed out for
 * a host goes through its master and works; at the end every master goes
 * with its stdin, none is killed, nothing is left. */
TEST(one_master_per_host_and_sessions_through_it)
{
    setup();
    tb_sshmux_t *m = tb_sshmux_new(conf_now(), SESSION, 6);
    REQUIRE(m);
    CHECK_INT(tb_sshmux_open(m, "okA"), 0);
    CHECK_INT(tb_sshmux_open(m, "okB"), 0);
    CHECK_INT(tb_sshmux_open(m, "okA"), 0);
    CHECK(tb_sshmux_rsh(m, "okA") == NULL);     /* not ready before the wait */
    int64_t t0 = tb_now_ms();
    tb_sshmux_wait(m, 10000);
    CHECK(tb_now_ms() - t0 < 5000);
    char lines[4][1024];
    CHECK_INT(log_lines("okA", "yes", lines, 4), 1);
    CHECK_INT(log_lines("okB", "yes", lines, 4), 1);
    char want[1024];
    snprintf(want, sizeof want, "%s/s/ssh-6.1", th_tmpdir());
    CHECK_STR(master_path("okB"), want);
    snprintf(want, sizeof want, "%s/s/ssh-6.0", th_tmpdir());
    CHECK_STR(master_path("okA"), want);
    CHECK(is_socket(want));
    /* the master's whole command line */
    char *tab = strchr(lines[0], '\t');
    snprintf(want, sizeof want, "-o|BatchMode=yes|-o|ConnectTimeout=10|-o|ControlMaster=yes|"
             "-o|ControlPath=%s/s/ssh-6.1|okB|cat >/dev/null", th_tmpdir());
    CHECK_STR(tab ? tab + 1 : NULL, want);

    const char *rsh = tb_sshmux_rsh(m, "okA");
    snprintf(want, sizeof want, "ssh -o BatchMode=yes -o ConnectTimeout=10 -o ControlMaster=no "
             "-o ControlPath=%s/s/ssh-6.0", th_tmpdir());
    CHECK_STR(rsh, want);
    CHECK(tb_sshmux_rsh(m, "okC") == NULL);     /* never opened */
    /* a child launched through it: a session over the master's socket */
    const char *argv[] = { "sh", "-c", "exit 7", NULL };
    tb_launch_spec_t spec = { .host = "okA", .exe = "/bin/sh", .argv = argv,
                              .secret = "00", .rsh = rsh };
    pid_t pid = -1;
    tbon_error_t err = { 0 };
    REQUIRE(tb_launch(&spec, &pid, &err) == 0);
    int st = tb_reap(pid, 10000);
    CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 7);
    CHECK_INT(log_lines("okA", "no", lines, 4), 1);
    CHECK(alive() >= 2);                        /* the masters, and their commands */

    t0 = tb_now_ms();
    tb_sshmux_destroy(m, tb_now_ms() + 10000);
    CHECK(tb_now_ms() - t0 < 3000);             /* they ended on their own */
    CHECK_INT(alive_after(2000), 0);
    snprintf(want, sizeof want, "%s/s/ssh-6.0", th_tmpdir());
    CHECK(!is_socket(want));
}

/* Hosts whose master fails (the login refused; its command failing at
 * once) are gone: the wait does not wait for them, and their children get
 * no master; the others are served. */
TEST(failing_masters_are_gone_not_waited_for)
{
    setup();
    tb_sshmux_t *m = tb_sshmux_new(conf_now(), SESSION, 1);
    REQUIRE(m);
    CHECK_INT(tb_sshmux_open(m, "fail1"), 0);
    CHECK_INT(tb_sshmux_open(m, "exit3"), 0);
    CHECK_INT(tb_sshmux_open(m, "okX"), 0);
    int64_t t0 = tb_now_ms();
    tb_sshmux_wait(m, 20000);
    CHECK(tb_now_ms() - t0 < 5000);
    CHECK(tb_sshmux_rsh(m, "fail1") == NULL);
    CHECK(tb_sshmux_rsh(m, "exit3") == NULL);
    CHECK(tb_sshmux_rsh(m, "okX") != NULL);
    char lines[2][1024];
    CHECK_INT(log_lines("fail1", "yes", lines, 2), 1);
    CHECK_INT(log_lines("exit3", "yes", lines, 2), 1);
    /* a second open of a failed host starts nothing new */
    CHECK_INT(tb_sshmux_open(m, "fail1"), 0);
    CHECK_INT(log_lines("fail1", "yes", lines, 2), 1);
    tb_sshmux_destroy(m, tb_now_ms() + 10000);
    CHECK_INT(alive_after(2000), 0);
}

/* A host that never answers: the wait ends at its bound with the others
 * ready; the end kills that master at its deadline; nothing is left. */
TEST(hung_master_bounded_wait_and_killed_at_the_end)
{
    setup();
    tb_sshmux_t *m = tb_sshmux_new(conf_now(), SESSION, 2);
    REQUIRE(m);
    CHECK_INT(tb_sshmux_open(m, "hang1"), 0);
    CHECK_INT(tb_sshmux_open(m, "okY"), 0);
    int64_t t0 = tb_now_ms();
    tb_sshmux_wait(m, 600);
    int64_t took = tb_now_ms() - t0;
    CHECK(took >= 550 && took < 3000);
    CHECK(tb_sshmux_rsh(m, "hang1") == NULL);
    CHECK(tb_sshmux_rsh(m, "okY") != NULL);
    /* a zero wait looks once and returns */
    t0 = tb_now_ms();
    tb_sshmux_wait(m, 0);
    CHECK(tb_now_ms() - t0 < 500);
    t0 = tb_now_ms();
    tb_sshmux_destroy(m, tb_now_ms() + 400);
    took = tb_now_ms() - t0;
    CHECK(took >= 300 && took < 3000);
    CHECK_INT(alive_after(2000), 0);
}

/* A master that is ready but does not end when its stdin does (a remote
 * command that ignores it): killed at the deadline, nothing left. */
TEST(stubborn_master_killed_at_the_deadline)
{
    setup();
    tb_sshmux_t *m = tb_sshmux_new(conf_now(), SESSION, 3);
    REQUIRE(m);
    CHECK_INT(tb_sshmux_open(m, "stubborn1"), 0);
    tb_sshmux_wait(m, 10000);
    CHECK(tb_sshmux_rsh(m, "stubborn1") != NULL);
    int64_t t0 = tb_now_ms();
    tb_sshmux_destroy(m, tb_now_ms() + 300);
    int64_t took = tb_now_ms() - t0;
    CHECK(took >= 200 && took < 3000);
    CHECK_INT(alive_after(2000), 0);
}

/* A slow login: the wait wakes when its socket appears, not at its bound. */
TEST(slow_master_waited_for_until_ready)
{
    setup();
    tb_sshmux_t *m = tb_sshmux_new(conf_now(), SESSION, 4);
    REQUIRE(m);
    CHECK_INT(tb_sshmux_open(m, "slow1"), 0);
    int64_t t0 = tb_now_ms();
    tb_sshmux_wait(m, 20000);
    int64_t took = tb_now_ms() - t0;
    CHECK(took >= 250 && took < 5000);
    CHECK(tb_sshmux_rsh(m, "slow1") != NULL);
    tb_sshmux_destroy(m, tb_now_ms() + 10000);
    CHECK_INT(alive_after(2000), 0);
}

/* This process and its children as on a kernel without pidfd_open (before
 * 5.3: RHEL 8's 4.18, say): the call fails with ENOSYS (a seccomp filter).
 * 0, or -1 where that cannot be done. */
static int no_pidfd_open(void)
{
#if defined(__x86_64__)
    const uint32_t arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
    const uint32_t arch = AUDIT_ARCH_AARCH64;
#else
    return -1;
#endif
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_open, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = sizeof f / sizeof f[0], .filter = f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return -1;
    errno = 0;
    return syscall(SYS_pidfd_open, getpid(), 0) == -1 && errno == ENOSYS ? 0 : -1;
}

/* Without pidfds a master that fails is still seen soon (the wait looks
 * every 20 ms), not at the end of the wait; with a hung one, the wait still
 * ends at its bound. */
TEST(failing_master_seen_without_pidfds)
{
    setup();
    if (no_pidfd_open() != 0) {
        printf("    (skipped: no seccomp filter to take pidfd_open away)\n");
        return;
    }
    tb_sshmux_t *m = tb_sshmux_new(conf_now(), SESSION, 5);
    REQUIRE(m);
    CHECK_INT(tb_sshmux_open(m, "latefail2"), 0);
    int64_t t0 = tb_now_ms();
    tb_sshmux_wait(m, 8000);
    int64_t took = tb_now_ms() - t0;
    CHECK(took >= 150 && took < 5000);
    CHECK(tb_sshmux_rsh(m, "latefail2") == NULL);
    char lines[2][1024];
    CHECK_INT(log_lines("latefail2", "yes", lines, 2), 1);
    /* a ready one is still seen (its socket) */
    CHECK_INT(tb_sshmux_open(m, "slow2"), 0);
    t0 = tb_now_ms();
    tb_sshmux_wait(m, 8000);
    took = tb_now_ms() - t0;
    CHECK(took >= 250 && took < 5000);
    CHECK(tb_sshmux_rsh(m, "slow2") != NULL);
    CHECK_INT(tb_sshmux_open(m, "hang2"), 0);
    t0 = tb_now_ms();
    tb_sshmux_wait(m, 300);
    took = tb_now_ms() - t0;
    CHECK(took >= 250 && took < 3000);
    tb_sshmux_destroy(m, tb_now_ms() + 300);
    CHECK_INT(alive_after(2000), 0);
}

/* Many hosts: each its own master and socket, past the table's first size. */
TEST(many_hosts)
{
    setup();
    tb_sshmux_t *m = tb_sshmux_new(conf_now(), SESSION, 4000000000u);
    REQUIRE(m);
    enum { N = 20 };
    char host[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(host[i], sizeof host[i], "ok%02d", i);
        CHECK_INT(tb_sshmux_open(m, host[i]), 0);
    }
    tb_sshmux_wait(m, 20000);
    for (int i = 0; i < N; i++) {
        char want[1024];
        snprintf(want, sizeof want, "ssh -o BatchMode=yes -o ConnectTimeout=10 "
                 "-o ControlMaster=no -o ControlPath=%s/s/ssh-4000000000.%d", th_tmpdir(), i);
        CHECK_STR(tb_sshmux_rsh(m, host[i]), want);
    }
    CHECK(alive() >= N);
    tb_sshmux_destroy(m, tb_now_ms() + 10000);
    CHECK_INT(alive_after(3000), 0);
}

/* Off, or another remote shell: no multiplexer. NULL is fine everywhere. */
TEST(off_other_rsh_and_null)
{
    setup();
    setenv("TBON_SSH_MUX", "0", 1);
    CHECK(tb_sshmux_new(conf_now(), SESSION, 1) == NULL);
    setenv("TBON_SSH_MUX", "1", 1);
    tb_sshmux_t *m = tb_sshmux_new(conf_now(), SESSION, 1);
    CHECK(m != NULL);
    tb_sshmux_destroy(m, 0);
    unsetenv("TBON_SSH_MUX");
    setenv("TBON_RSH", "rsh-local", 1);
    CHECK(tb_sshmux_new(conf_now(), SESSION, 1) == NULL);
    setenv("TBON_RSH", "", 1);                  /* empty: the default */
    m = tb_sshmux_new(conf_now(), SESSION, 1);
    CHECK(m != NULL);
    /* no master: the wait returns at once */
    int64_t t0 = tb_now_ms();
    tb_sshmux_wait(m, 5000);
    CHECK(tb_now_ms() - t0 < 500);
    tb_sshmux_destroy(m, 0);
    unsetenv("TBON_RSH");
    CHECK_INT(tb_sshmux_open(NULL, "okA"), TBON_EINVAL);
    tb_sshmux_wait(NULL, 1000);
    CHECK(tb_sshmux_rsh(NULL, "okA") == NULL);
    tb_sshmux_destroy(NULL, 0);
    CHECK_INT(alive(), 0);
}

/* Bounds: a session directory too long for the sockets' paths gives no
 * multiplexer; ssh missing gives TBON_ELAUNCH and no master. */
TEST(bounds_and_no_ssh)
{
    setup();
    /* the sockets' names take up to 24 more bytes of sun_path's 100 */
    char dir[200];
    int base = snprintf(dir, sizeof dir, "%s/", th_tmpdir());
    memset(dir + base, 'd', (size_t)(75 - base));
    dir[75] = 0;
    setenv("TBON_LOG_DIR", dir, 1);
    tb_sshmux_t *m = tb_sshmux_new(conf_now(), SESSION, 1);
    CHECK(m != NULL);
    tb_sshmux_destroy(m, 0);
    dir[75] = 'd';
    dir[76] = 0;
    setenv("TBON_LOG_DIR", dir, 1);
    CHECK(tb_sshmux_new(conf_now(), SESSION, 1) == NULL);
    /* no ssh anywhere in PATH */
    char logdir[600];
    snprintf(logdir, sizeof logdir, "%s/s", th_tmpdir());
    setenv("TBON_LOG_DIR", logdir, 1);
    m = tb_sshmux_new(conf_now(), SESSION, 1);
    REQUIRE(m);
    char *path = strdup(getenv("PATH"));
    setenv("PATH", "/nonexistent", 1);
    CHECK_INT(tb_sshmux_open(m, "okA"), TBON_ELAUNCH);
    setenv("PATH", path, 1);            /* (the harness's clean-up runs rm) */
    free(path);
    tb_sshmux_wait(m, 1000);
    CHECK(tb_sshmux_rsh(m, "okA") == NULL);
    tb_sshmux_destroy(m, 0);
    CHECK_INT(alive(), 0);
}
