/* ctl_int.h - what ctl.c and ctl_msgs.c share; nothing else includes it */
#ifndef TB_CTL_INT_H
#define TB_CTL_INT_H

#include <stdint.h>
#include <stdlib.h>

/* Free what a decoder allocated in a message it hands out as const. */
#define UNCONST(p) ((void *)(uintptr_t)(p))

static inline void tb_ctl_free_strv(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

#endif
