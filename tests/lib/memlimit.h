/* memlimit.h - tests of running out of memory: keep the address space within
 * extra bytes above what the process uses now, so that large allocations
 * fail. 0, or -1 if /proc/self/statm cannot be read or setrlimit fails. Not
 * usable under ASan (its shadow memory); under TSan see sanitizer.h. */
#ifndef TB_TEST_MEMLIMIT_H
#define TB_TEST_MEMLIMIT_H

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

static inline int limit_memory(size_t extra)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || fscanf(f, "%lu", &pages) != 1) {
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = pages * (size_t)sysconf(_SC_PAGESIZE) + extra;
    return setrlimit(RLIMIT_AS, &rl);
}

#endif
