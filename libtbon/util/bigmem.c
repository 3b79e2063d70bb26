/* bigmem.c - large buffers on huge pages (bigmem.h). */
#include "util/bigmem.h"

#include <stdint.h>
#include <stdlib.h>
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
    return advise(realloc(p, n), n);
}
