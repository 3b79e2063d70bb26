/* array.h - room for one more element in a growable array, written once
 * (the tables of children, timers, pending view changes, missing ranks...) */
#ifndef TB_ARRAY_H
#define TB_ARRAY_H

#include <stddef.h>

/* If n == *cap, grow the array *basep (elements of size bytes) to twice its
 * capacity, or to first elements when it has none. Returns 0 when there is
 * room for element n, or TBON_ENOMEM (out of memory: the array and *cap as they
 * were). basep is the address of the array's pointer (any object type). */
int tb_array_room(void *basep, size_t *cap, size_t n, size_t size, size_t first);

/* The same for an array variable: TB_ARRAY_ROOM(v, n, cap, 16). */
#define TB_ARRAY_ROOM(arr, n, cap, first) \
    tb_array_room(&(arr), &(cap), (n), sizeof *(arr), (first))

#endif
