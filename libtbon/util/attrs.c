/* attrs.c - attribute maps with versions and tombstones (attrs.h) */
#include "util/attrs.h"
#include "util/array.h"

#include <stdlib.h>
#include <string.h>

#include <tbon/tbon.h>

struct entry {
    char *key;
    char *value;            /* NULL: tombstone */
    uint64_t version;
};

struct tb_attrs {
    struct entry *v;
    size_t n, cap;
    uint64_t version;
};

tb_attrs_t *tb_attrs_new(void)
{
    return calloc(1, sizeof(tb_attrs_t));
}

void tb_attrs_destroy(tb_attrs_t *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++) {
        free(a->v[i].key);
        free(a->v[i].value);
    }
    free(a->v);
    free(a);
}

int tb_attrs_check(const char *key, const char *value)
{
    if (!key || !*key || strlen(key) > TB_ATTR_KEY_MAX)
        return TBON_EINVAL;
    if (value && strlen(value) > TB_ATTR_VALUE_MAX)
        return TBON_EINVAL;
    return 0;
}

/* Maps are small (a node publishes a handful of keys): a linear search. */
static struct entry *find(const tb_attrs_t *a, const char *key)
{
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i].key, key) == 0)
            return &a->v[i];
    return NULL;
}

/* Store value (copied; NULL for a tombstone) at version in key's entry,
 * creating it. 0 or TBON_ENOMEM (the map unchanged). */
static int put(tb_attrs_t *a, const char *key, const char *value, uint64_t version)
{
    char *copy = NULL;
    if (value && !(copy = strdup(value)))
        return TBON_ENOMEM;
    struct entry *e = find(a, key);
    if (!e) {
        if (TB_ARRAY_ROOM(a->v, a->n, a->cap, 8)) {
            free(copy);
            return TBON_ENOMEM;
        }
        char *k = strdup(key);
        if (!k) {
            free(copy);
            return TBON_ENOMEM;
        }
        e = &a->v[a->n++];
        *e = (struct entry){ k, NULL, 0 };
    }
    free(e->value);
    e->value = copy;
    e->version = version;
    if (version > a->version)
        a->version = version;
    return 0;
}

uint64_t tb_attrs_set(tb_attrs_t *a, const char *key, const char *value)
{
    uint64_t v = a->version + 1;
    return put(a, key, value, v) == 0 ? v : 0;
}

int tb_attrs_apply(tb_attrs_t *a, const char *key, const char *value, uint64_t version)
{
    const struct entry *e = find(a, key);
    if (e && e->version >= version)
        return 0;
    int rc = put(a, key, value, version);
    return rc ? rc : 1;
}

const char *tb_attrs_get(const tb_attrs_t *a, const char *key)
{
    const struct entry *e = a ? find(a, key) : NULL;
    return e ? e->value : NULL;
}

size_t tb_attrs_count(const tb_attrs_t *a)
{
    return a ? a->n : 0;
}

void tb_attrs_entry(const tb_attrs_t *a, size_t i, const char **key, const char **value,
                    uint64_t *version)
{
    *key = a->v[i].key;
    *value = a->v[i].value;
    *version = a->v[i].version;
}

uint64_t tb_attrs_version(const tb_attrs_t *a)
{
    return a ? a->version : 0;
}
