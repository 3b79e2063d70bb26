/* bigmem.h - memory for large buffers: packets, frame payloads and their
 * reassembly, arrays unpacked from packets. A buffer of at least
 * TB_BIG_MIN bytes is backed by huge pages where the kernel offers them
 * (transparent huge pages in "madvise" mode, Debian's default): a 64 MiB
 * packet then costs 32 page faults instead of 16,384, which were the
 * largest single cost of moving one (bench/RESULTS.md, issue 32).
 *
 * Buffers of TB_BIG_KEEP_MIN bytes and more that the library frees with
 * tb_big_free are kept for reuse (the large ones with their pages lent to
 * the kernel to take back when it needs them, MADV_FREE; bigmem.c says the
 * bounds): a packet's buffer of the same size next time is memory already
 * mapped, not fresh pages the kernel must find and clear, which cost more
 * than the copies on the test machine. Every buffer is a C-library block:
 * free() takes any of them, tb_big_free any malloc'd block. */
#ifndef TB_BIGMEM_H
#define TB_BIGMEM_H

#include <stddef.h>

/* Two huge pages: below this, a buffer is plain malloc. */
#define TB_BIG_MIN ((size_t)4 << 20)

/* Below this, a buffer freed is not kept. (The C library maps blocks of
 * 128 KiB and more on their own at first, each time afresh: a 1 MiB packet
 * cost 256 page faults at every hop.) */
#define TB_BIG_KEEP_MIN ((size_t)256 << 10)

/* malloc(n), huge pages asked for when n >= TB_BIG_MIN; a kept buffer of
 * n to 2n bytes where there is one (n >= TB_BIG_KEEP_MIN). NULL if out of
 * memory. */
void *tb_big_alloc(size_t n);

/* realloc(p, n), the same. NULL if out of memory (p unchanged). */
void *tb_big_realloc(void *p, size_t n);

/* How many buffers are kept, and their bytes (*bytes, if not NULL). */
size_t tb_big_kept(size_t *bytes);

/* Give every kept buffer back to the C library (tbon_net_destroy; a
 * process about to limit its memory). */
void tb_big_trim(void);

/* free(p), or keep p (a block of at least TB_BIG_KEEP_MIN bytes) for a
 * later tb_big_alloc. p may be any malloc'd block, or NULL. */
void tb_big_free(void *p);

#endif
