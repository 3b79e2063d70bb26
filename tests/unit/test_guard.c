/* test_guard.c - a plug-in's crash stays with its call (filter_guard.c):
 * faults inside tb_guard_call come back as a signal number, one after
 * another; outside one, the process's own handler runs, or the default
 * action, as if the guard were not there. */
#include "../harness.h"
#include "filter/filter.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t old_handler_ran;

static void old_handler(int sig)
{
    (void)sig;
    old_handler_ran = 1;
}

/* First in this file: the children fork before anything here installs the
 * guard. A handler the process had is kept for faults outside a call;
 * without one, the default action ends the process. */
TEST(outside_a_call_the_process_handler_or_default_acts)
{
    pid_t c = fork();
    REQUIRE(c >= 0);
    if (c == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = old_handler;
        sigaction(SIGUSR1, &sa, NULL);      /* not guarded: untouched */
        sigaction(SIGFPE, &sa, NULL);
        tb_guard_install();
        raise(SIGFPE);                       /* outside any call */
        _exit(old_handler_ran ? 0 : 1);
    }
    int st = 0;
    CHECK_INT(waitpid(c, &st, 0), c);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    c = fork();
    REQUIRE(c >= 0);
    if (c == 0) {
        signal(SIGFPE, SIG_DFL);
        tb_guard_install();
        raise(SIGFPE);
        _exit(0);                            /* must not get here */
    }
    CHECK_INT(waitpid(c, &st, 0), c);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGFPE);
}

static void *no_access;

static void write_forbidden(void *arg)
{
    (void)arg;
    *(volatile int *)no_access = 1;          /* a real fault, no undefined behaviour */
}

static void send_fpe(void *arg)
{
    (void)arg;
    raise(SIGFPE);
}

static void send_bus(void *arg)
{
    (void)arg;
    raise(SIGBUS);
}

static void send_ill(void *arg)
{
    (void)arg;
    raise(SIGILL);
}

static void call_abort(void *arg)
{
    (void)arg;
    abort();
}

static void returns(void *arg)
{
    *(int *)arg = 42;
}

TEST(faults_inside_a_call_come_back_one_after_another)
{
    no_access = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(no_access != MAP_FAILED);
    tb_fault_t f;
    for (int round = 0; round < 2; round++) {     /* the second: the mask is back */
        memset(&f, 0, sizeof f);
        CHECK_INT(tb_guard_call(write_forbidden, NULL, &f), SIGSEGV);
        CHECK(f.addr == no_access);
        CHECK(f.where[0] != 0);
        CHECK_INT(tb_guard_call(send_fpe, NULL, &f), SIGFPE);
        CHECK_INT(tb_guard_call(call_abort, NULL, &f), SIGABRT);
        CHECK_INT(tb_guard_call(send_bus, NULL, &f), SIGBUS);
        CHECK_INT(tb_guard_call(send_ill, NULL, &f), SIGILL);
    }
    CHECK_STR(tb_fault_name(SIGSEGV), "SIGSEGV");
    int v = 0;
    CHECK_INT(tb_guard_call(returns, &v, &f), 0);
    CHECK_INT(v, 42);
    munmap(no_access, 4096);
}

/* A guarded call inside a guarded call: the inner fault is the inner
 * call's, and the outer call goes on. */
static void inner_faults(void *arg)
{
    tb_fault_t f;
    *(int *)arg = tb_guard_call(write_forbidden, NULL, &f);
}

TEST(nested_calls_keep_their_own_faults)
{
    no_access = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(no_access != MAP_FAILED);
    int inner = -1;
    tb_fault_t f;
    CHECK_INT(tb_guard_call(inner_faults, &inner, &f), 0);
    CHECK_INT(inner, SIGSEGV);
    CHECK_INT(tb_guard_call(write_forbidden, NULL, &f), SIGSEGV);
    munmap(no_access, 4096);
}
