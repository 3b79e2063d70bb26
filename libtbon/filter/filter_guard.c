/* filter_guard.c - a plug-in filter's crash stays with its call
 *
 * A filter is the user's code, run on the node's own thread over data from
 * back-ends: one input it does not expect (a NULL it dereferences, a divide by
 * zero, a failed assert) must not end the process, or its adopter, which
 * gets the same data as composed state (seed 003 IV-C), and so on up to the
 * front-end. tb_guard_call runs one call with the synchronous fault signals
 * (SIGSEGV, SIGBUS, SIGFPE, SIGILL) and SIGABRT caught: the handler, seeing
 * that this thread is inside a guarded call, jumps back out of it, and the
 * call reports the signal instead of returning. docs/filter-guide.md,
 * "When a filter crashes or hangs", says what the node then does.
 *
 * The handlers are the process's: installed once, the first time a plug-in
 * is loaded, on top of whatever was there (the application's, a sanitizer's).
 * A signal on a thread outside a guarded call goes to the handler that was
 * there before, or to the default action, as if we were not there. A stack
 * overflow in a filter is caught on an alternate signal stack, set up for a
 * thread at its first guarded call if it has none.
 */
#include "filter/filter.h"

#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

static const int guarded_sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
#define NSIGS (sizeof guarded_sigs / sizeof guarded_sigs[0])

static struct sigaction prev[NSIGS];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* This thread's guarded call, if one is running. */
static _Thread_local sigjmp_buf *volatile cur_jb;
static _Thread_local volatile sig_atomic_t cur_sig;
static _Thread_local void *volatile cur_addr, *volatile cur_pc;

/* The alternate signal stack this thread set up (freed at its exit). */
static pthread_key_t stack_key;
#define ALT_STACK_SIZE (64 * 1024)

static void *fault_pc(void *uc)
{
    const ucontext_t *u = uc;
    (void)u;
#if defined(__x86_64__)
    return (void *)u->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (void *)u->uc_mcontext.pc;
#else
    return NULL;
#endif
}

static int sig_index(int sig)
{
    for (size_t i = 0; i < NSIGS; i++)
        if (guarded_sigs[i] == sig)
            return (int)i;
    return -1;
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    sigjmp_buf *jb = cur_jb;
    if (jb) {
        cur_jb = NULL;
        cur_sig = sig;
        cur_addr = si ? si->si_addr : NULL;
        cur_pc = uc ? fault_pc(uc) : NULL;
        siglongjmp(*jb, 1);
    }
    /* Not ours: as if we were not there. */
    int i = sig_index(sig);
    const struct sigaction *p = i >= 0 ? &prev[i] : NULL;
    if (p && (p->sa_flags & SA_SIGINFO) && p->sa_sigaction) {
        p->sa_sigaction(sig, si, uc);
    } else if (p && p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
        p->sa_handler(sig);
    } else {
        /* SIG_DFL or SIG_IGN before us. A fault (si_code > 0) comes again
         * as the instruction runs again on return, and the kernel ends the
         * process then, ignored or not, as it would have without us. A
         * signal sent (kill, raise, abort: si_code <= 0) takes the default
         * action now, or is dropped if it was ignored. */
        int sent = !si || si->si_code <= 0;
        int ignored = p && p->sa_handler == SIG_IGN;
        if (sent && ignored)
            return;
        signal(sig, SIG_DFL);
        if (sent)
            raise(sig);
    }
}

static void free_stack(void *p)
{
    stack_t off = { .ss_flags = SS_DISABLE };
    sigaltstack(&off, NULL);
    free(p);
}

static void install(void)
{
    pthread_key_create(&stack_key, free_stack);
    for (size_t i = 0; i < NSIGS; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(guarded_sigs[i], &sa, &prev[i]);
    }
}

void tb_guard_install(void)
{
    pthread_once(&once, install);
}

/* An alternate stack for this thread, unless it has one (a sanitizer's):
 * looked at once per thread. */
static _Thread_local int alt_looked;

static void ensure_alt_stack(void)
{
    stack_t cur;
    if (alt_looked)
        return;
    alt_looked = 1;
    if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE))
        return;
    void *mem = malloc(ALT_STACK_SIZE);
    if (!mem)
        return;
    stack_t ss = { .ss_sp = mem, .ss_size = ALT_STACK_SIZE, .ss_flags = 0 };
    if (sigaltstack(&ss, NULL) != 0 || pthread_setspecific(stack_key, mem) != 0) {
        stack_t off = { .ss_flags = SS_DISABLE };
        sigaltstack(&off, NULL);
        free(mem);
    }
}

const char *tb_fault_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS:  return "SIGBUS";
    case SIGFPE:  return "SIGFPE";
    case SIGILL:  return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default:      return "a signal";
    }
}

/* "in libpoison.so (poison_up+0x1c)" or "in an unknown place". */
static void describe_pc(void *pc, char *buf, size_t len)
{
    Dl_info di;
    if (!pc || !dladdr(pc, &di) || !di.dli_fname) {
        snprintf(buf, len, "at %p", pc);
        return;
    }
    const char *base = strrchr(di.dli_fname, '/');
    base = base ? base + 1 : di.dli_fname;
    if (di.dli_sname && di.dli_saddr)
        snprintf(buf, len, "in %s (%s+%#tx)", base, di.dli_sname,
                 (char *)pc - (char *)di.dli_saddr);
    else
        snprintf(buf, len, "in %s (+%#tx)", base, (char *)pc - (char *)di.dli_fbase);
}

int tb_guard_call(void (*fn)(void *), void *arg, tb_fault_t *fault)
{
    sigjmp_buf jb;
    sigjmp_buf *volatile outer = cur_jb;     /* a guarded call inside one */
    tb_guard_install();
    ensure_alt_stack();
    /* The signal mask is saved and restored by the jump: a handler that
     * chains to ours may have blocked signals around it (ThreadSanitizer's
     * does), and a signal left blocked would make the next fault fatal. */
    if (sigsetjmp(jb, 1)) {
        cur_jb = outer;
        if (fault) {
            fault->sig = cur_sig;
            fault->addr = cur_addr;
            fault->pc = cur_pc;
            describe_pc(cur_pc, fault->where, sizeof fault->where);
        }
        return cur_sig ? cur_sig : -1;
    }
    cur_jb = &jb;
    fn(arg);
    cur_jb = outer;
    return 0;
}
