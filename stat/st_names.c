/* st_names.c - a string-to-string cache (open addressing, FNV-1a) */
#include "st_names.h"

#include <tbon/common.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    uint64_t hash;
    char *key;          /* NULL: a free slot */
    char *name;         /* in the same allocation as key */
} entry_t;

struct st_names {
    entry_t *slot;
    size_t cap;         /* a power of two, at least twice count */
    size_t count, max;
};

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

st_names_t *st_names_new(size_t max)
{
    st_names_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cap = 64;
    c->max = max ? max : 1;
    c->slot = calloc(c->cap, sizeof *c->slot);
    if (!c->slot) {
        free(c);
        return NULL;
    }
    return c;
}

static void clear(st_names_t *c)
{
    for (size_t i = 0; i < c->cap; i++)
        free(c->slot[i].key);
    memset(c->slot, 0, c->cap * sizeof *c->slot);
    c->count = 0;
}

void st_names_free(st_names_t *c)
{
    if (!c)
        return;
    clear(c);
    free(c->slot);
    free(c);
}

static entry_t *find(entry_t *slot, size_t cap, uint64_t hash, const char *key)
{
    size_t i = (size_t)hash & (cap - 1);
    while (slot[i].key && (slot[i].hash != hash || strcmp(slot[i].key, key) != 0))
        i = (i + 1) & (cap - 1);
    return &slot[i];
}

const char *st_names_get(const st_names_t *c, const char *key)
{
    entry_t *e = find(c->slot, c->cap, fnv1a(key), key);
    return e->key ? e->name : NULL;
}

int st_names_put(st_names_t *c, const char *key, const char *name)
{
    /* A long run with ever new addresses (a spinning process) must not grow
     * without bound: start over, the names are made again on demand. */
    if (c->count >= c->max)
        clear(c);
    if (2 * (c->count + 1) > c->cap) {
        size_t ncap = c->cap * 2;
        entry_t *ns = calloc(ncap, sizeof *ns);
        if (!ns)
            return TBON_ENOMEM;
        for (size_t i = 0; i < c->cap; i++)
            if (c->slot[i].key)
                *find(ns, ncap, c->slot[i].hash, c->slot[i].key) = c->slot[i];
        free(c->slot);
        c->slot = ns;
        c->cap = ncap;
    }
    size_t kl = strlen(key) + 1, nl = strlen(name) + 1;
    char *mem = malloc(kl + nl);
    if (!mem)
        return TBON_ENOMEM;
    memcpy(mem, key, kl);
    memcpy(mem + kl, name, nl);
    uint64_t h = fnv1a(key);
    entry_t *e = find(c->slot, c->cap, h, key);
    *e = (entry_t){.hash = h, .key = mem, .name = mem + kl};
    c->count++;
    return 0;
}
