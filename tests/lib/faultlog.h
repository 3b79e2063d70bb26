/* faultlog.h - reading the fault shim's log (tests/faultshim/faultshim.c,
 * TBON_FAULT_LOG): one line per fault injected, its kind first ("flip",
 * "rflip", "reset", "delay"). For test_link and bench_ft --link.
 * Header-only. */
#ifndef TB_FAULTLOG_H
#define TB_FAULTLOG_H

#include <stdio.h>
#include <string.h>

/* How many faults of kind `what` the log at path records. */
static inline size_t tb_fault_count(const char *path, const char *what)
{
    FILE *f = fopen(path, "r");
    size_t n = 0, k = strlen(what);
    char line[128];
    while (f && fgets(line, sizeof line, f))
        n += strncmp(line, what, k) == 0 && line[k] == ' ';
    if (f)
        fclose(f);
    return n;
}

#endif
