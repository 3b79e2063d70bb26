/* st_names.h - a string-to-string cache: the frame names a stack walker has
 * already made, shared by every process it samples (internal to st_walker.c).
 *
 * The processes of a job run the same binaries, so the name of "module X at
 * offset Y" is the same in all of them; looking it up here saves each new
 * process's Dwfl from loading symbol tables and DWARF line tables. */
#ifndef TBON_ST_NAMES_H
#define TBON_ST_NAMES_H

#include <stddef.h>

typedef struct st_names st_names_t;

/* An empty cache of at most max entries (it starts over when full). NULL
 * when out of memory. */
st_names_t *st_names_new(size_t max);
void st_names_free(st_names_t *c);

/* The name cached for key, or NULL. Valid until the next st_names_put. */
const char *st_names_get(const st_names_t *c, const char *key);

/* Cache a copy of key -> name (key must not be cached yet). 0 or TBON_ENOMEM. */
int st_names_put(st_names_t *c, const char *key, const char *name);

#endif
