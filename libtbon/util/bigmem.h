/* bigmem.h - memory for large buffers: packets, frame payloads and their
 * reassembly, arrays unpacked from packets. A buffer of at least
 * TB_BIG_MIN bytes is backed by huge pages where the kernel offers them
 * (transparent huge pages in "madvise" mode, Debian's default): a 64 MiB
 * packet then costs 32 page faults instead of 16,384, which were the
 * largest single cost of moving one (bench/RESULTS.md, issue 32). Freed
 * with free(); smaller buffers are plain malloc. */
#ifndef TB_BIGMEM_H
#define TB_BIGMEM_H

#include <stddef.h>

/* Two huge pages: below this, a buffer is plain malloc. */
#define TB_BIG_MIN ((size_t)4 << 20)

/* malloc(n), huge pages asked for when n >= TB_BIG_MIN. NULL if out of memory. */
void *tb_big_alloc(size_t n);

/* realloc(p, n), the same. NULL if out of memory (p unchanged). */
void *tb_big_realloc(void *p, size_t n);

#endif
