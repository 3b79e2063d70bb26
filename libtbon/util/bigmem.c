/* bigmem.c - large buffers on huge pages (bigmem.h). */
#include "util/bigmem.h"
#include "util/hot.h"

#include "util/sanitizer.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((uintptr_t)2 << 20)
#define PAGE ((uintptr_t)4096)

/* The buffers kept for reuse (bigmem.h): at most KEEP of them and
 * KEEP_BYTES of address space, the oldest given back to the C library
 * when a newer one needs the room. A commnode passing on a 1 GiB packet
 * holds its 128 pieces of 8 MiB until the last has come (node/node_cut.c),
 * so KEEP lets the next packet's pieces all land in memory already mapped.
 * The pages of blocks of TB_BIG_MIN and more are MADV_FREE: the kernel
 * takes them back when it needs memory (then they read as zeros, and fault
 * afresh when written), so what is kept costs address space, not memory
 * the host needs. Smaller blocks keep their pages, up to KEEP_SMALL bytes
 * of them (as the C library keeps up to 32-64 MiB of its heap's top). Not
 * under AddressSanitizer, whose use-after-free reports need every block
 * freed. */
#define KEEP 256
#define KEEP_BYTES ((size_t)4 << 30)
#define KEEP_SMALL ((size_t)32 << 20)   /* in blocks under TB_BIG_MIN */
#define KEEPING (!TB_UNDER_ASAN)

static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *p;
    size_t n;       /* malloc_usable_size */
    unsigned long age;
} kept[KEEP];
static size_t kept_bytes;
static size_t kept_small;       /* of which in blocks under TB_BIG_MIN */
static unsigned long kept_clock;
/* How many are kept; changed under kept_mu, read without it to pass over
 * the lock and the table when there is none (most processes never keep a
 * block, and every one trims at its end: the lock's first use registers
 * the fork handlers, and the table's first read faults in its pages). A
 * read that misses a block kept at the same moment only allocates anew. */
static atomic_size_t kept_count;

/* A child forked while another thread held kept_mu would wait for ever at
 * its first large buffer: the lock is taken across fork, as the C library
 * does with its own. The handlers are set as the library is loaded, while
 * the process has one thread: set at the first use, behind a pthread_once,
 * a fork racing that first use left the child a once "in progress" that
 * ThreadSanitizer's own pthread_once never lets it finish (the C library's
 * knows a fork from a thread at work). */
static void fork_prepare(void)
{
    pthread_mutex_lock(&kept_mu);
}

static void fork_done(void)
{
    pthread_mutex_unlock(&kept_mu);
}

__attribute__((constructor)) static void at_fork(void)
{
    (void)pthread_atfork(fork_prepare, fork_done, fork_done);
}

static void lock_kept(void)
{
    pthread_mutex_lock(&kept_mu);
}

static int is_small(size_t n)
{
    return n < TB_BIG_MIN;
}

/* Slot i no longer kept. */
static void *unkeep(int i)
{
    kept_bytes -= kept[i].n;
    if (is_small(kept[i].n))
        kept_small -= kept[i].n;
    void *p = kept[i].p;
    kept[i].p = NULL;
    atomic_fetch_sub_explicit(&kept_count, 1, memory_order_relaxed);
    return p;
}

/* A kept block of n to 2n bytes (the smallest), or NULL. */
static void *take_kept(size_t n)
{
    if (!KEEPING || !atomic_load_explicit(&kept_count, memory_order_relaxed))
        return NULL;
    lock_kept();
    int best = -1;
    for (int i = 0; i < KEEP; i++)
        if (kept[i].p && kept[i].n >= n && kept[i].n / 2 <= n &&
            (best < 0 || kept[i].n < kept[best].n))
            best = i;
    void *p = best >= 0 ? unkeep(best) : NULL;
    pthread_mutex_unlock(&kept_mu);
    return p;
}

/* Keep p (n bytes); what no longer fits is freed, the oldest first (of the
 * small blocks, when it is their bound that p passes). */
static void keep(void *p, size_t n)
{
    void *out[KEEP + 1];
    size_t nout = 0;
    lock_kept();
    for (;;) {
        int small_over = is_small(n) && kept_small + n > KEEP_SMALL;
        int slot = -1, old = -1;
        for (int i = 0; i < KEEP; i++) {
            if (!kept[i].p)
                slot = i;
            else if ((!small_over || is_small(kept[i].n)) &&
                     (old < 0 || kept[i].age < kept[old].age))
                old = i;
        }
        if (slot >= 0 && kept_bytes + n <= KEEP_BYTES && !small_over) {
            kept[slot].p = p;
            kept[slot].n = n;
            kept[slot].age = ++kept_clock;
            atomic_fetch_add_explicit(&kept_count, 1, memory_order_relaxed);
            kept_bytes += n;
            if (is_small(n))
                kept_small += n;
            break;
        }
        if (old < 0) {      /* p alone is over a bound */
            out[nout++] = p;
            break;
        }
        out[nout++] = unkeep(old);
    }
    pthread_mutex_unlock(&kept_mu);
    for (size_t i = 0; i < nout; i++)
        free(out[i]);
}

/* Ask for huge pages over the whole 2 MiB pages inside [p, p + n). Before
 * the first touch, so that the first fault of each one maps a huge page.
 * Only advice: where the kernel has none, or refuses, the buffer works as
 * it is. */
static void *advise(void *p, size_t n)
{
    if (!p || n < TB_BIG_MIN)
        return p;
    uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~(HUGE_PAGE - 1);
    if (e > a)
        (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
    return p;
}

TB_HOT void *tb_big_alloc(size_t n)
{
    void *p = n >= TB_BIG_KEEP_MIN ? take_kept(n) : NULL;
    if (p || n < TB_BIG_MIN)
        return p ? p : malloc(n);
    /* On a huge page boundary, so that every page of it can be one (glibc
     * maps a block this large on its own; free() and realloc() take it). */
    if (posix_memalign(&p, HUGE_PAGE, n) != 0)
        return NULL;
    return advise(p, n);
}

void *tb_big_realloc(void *p, size_t n)
{
    if (!p || n < TB_BIG_MIN)
        return advise(realloc(p, n), n);
    /* A large block advised before cannot be moved by mremap (the advice
     * split its mapping), so realloc would copy it into fresh pages that
     * fault 4 KiB at a time; copy it into huge pages instead. */
    size_t old = malloc_usable_size(p);
    if (n <= old)
        return p;
    void *q = tb_big_alloc(n);
    if (!q)
        return NULL;
    memcpy(q, p, old);
    tb_big_free(p);
    return q;
}

size_t tb_big_kept(size_t *bytes)
{
    size_t k = 0;
    lock_kept();
    for (int i = 0; i < KEEP; i++)
        k += kept[i].p != NULL;
    if (bytes)
        *bytes = kept_bytes;
    pthread_mutex_unlock(&kept_mu);
    return k;
}

void tb_big_trim(void)
{
    void *out[KEEP];
    size_t nout = 0;
    if (!atomic_load_explicit(&kept_count, memory_order_relaxed))
        return;
    lock_kept();
    for (int i = 0; i < KEEP; i++)
        if (kept[i].p)
            out[nout++] = unkeep(i);
    pthread_mutex_unlock(&kept_mu);
    for (size_t i = 0; i < nout; i++)
        free(out[i]);
}

void tb_big_free(void *p)
{
    size_t n = p && KEEPING ? malloc_usable_size(p) : 0;
    if (n < TB_BIG_KEEP_MIN) {
        free(p);
        return;
    }
    /* A block of TB_BIG_MIN and more not on a huge page boundary was not
     * made here: not kept, as a request that took it would miss its huge
     * pages. Such blocks' pages are lent back: those wholly inside the
     * block (the C library's own words about it lie outside). Smaller
     * blocks keep theirs: lending 4 KiB pages back one by one cost more
     * than the faults it saved (a 1 MiB packet went ten times slower). */
    uintptr_t a = ((uintptr_t)p + PAGE - 1) & ~(PAGE - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~(PAGE - 1);
    if (n >= TB_BIG_MIN &&
        (((uintptr_t)p & (HUGE_PAGE - 1)) || madvise((void *)a, e - a, MADV_FREE) != 0)) {
        free(p);
        return;
    }
    keep(p, n);
}
