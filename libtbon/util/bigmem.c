/* bigmem.c - large buffers on huge pages (bigmem.h). */
#include "util/bigmem.h"

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((uintptr_t)2 << 20)

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

void *tb_big_alloc(size_t n)
{
    if (n < TB_BIG_MIN)
        return malloc(n);
    /* On a huge page boundary, so that every page of it can be one (glibc
     * maps a block this large on its own; free() and realloc() take it). */
    void *p = NULL;
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
    free(p);
    return q;
}
