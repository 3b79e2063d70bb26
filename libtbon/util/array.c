/* array.c - see array.h */
#include "util/array.h"
#include "util/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int tb_array_room(void *basep, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? 2 * *cap : first;
    if (nc <= n)
        nc = n + 1;
    if (size && nc > SIZE_MAX / size)
        return TBON_ENOMEM;
    void *base;
    memcpy(&base, basep, sizeof base);  /* the caller's pointer, whatever its type */
    void *nb = realloc(base, nc * size);
    if (!nb)
        return TBON_ENOMEM;
    memcpy(basep, &nb, sizeof nb);
    *cap = nc;
    return 0;
}
