/* attrs.h - attribute maps (seed 002 section 4): one node's key/value map
 * with versions, or the FE's replica of it
 *
 * A pure module: no I/O, no threads. A node writes its own map one key at a
 * time; each write takes the map's next version number, so no two entries
 * share one and the map's version is its highest. Deleting a key writes a
 * tombstone (a "death certificate": no value, a new version), so that a
 * delete travels like any write and an older value arriving later cannot
 * bring the key back. A replica applies entries from the source only when
 * they are newer than what it has for that key, in any order, any number
 * of times: it ends up equal to the source's map.
 */
#ifndef TB_ATTRS_H
#define TB_ATTRS_H

#include <stddef.h>
#include <stdint.h>

#define TB_ATTR_KEY_MAX   255u          /* bytes in a key */
#define TB_ATTR_VALUE_MAX 65536u        /* bytes in a value */

typedef struct tb_attrs tb_attrs_t;

tb_attrs_t *tb_attrs_new(void);          /* NULL when out of memory */
void        tb_attrs_destroy(tb_attrs_t *a); /* NULL is fine */

/* 0 if key (1..TB_ATTR_KEY_MAX bytes, no NUL) and value (NULL, or at most
 * TB_ATTR_VALUE_MAX bytes) may be stored; TBON_EINVAL otherwise. */
int tb_attrs_check(const char *key, const char *value);

/* Write key = value in our own map (value NULL: delete, leaving a
 * tombstone). Returns the entry's version (> 0), or 0 when out of memory. */
uint64_t tb_attrs_set(tb_attrs_t *a, const char *key, const char *value);

/* Apply a source's entry to its replica: 1 if it was newer than what the
 * replica had for key (and is now there), 0 if stale or a repeat, or
 * TBON_ENOMEM. */
int tb_attrs_apply(tb_attrs_t *a, const char *key, const char *value, uint64_t version);

/* The value of key, or NULL when it was never set or is deleted. */
const char *tb_attrs_get(const tb_attrs_t *a, const char *key);

/* Every entry, tombstones included, in the order they were first written:
 * i < tb_attrs_count(a). value is NULL for a tombstone. */
size_t tb_attrs_count(const tb_attrs_t *a);
void   tb_attrs_entry(const tb_attrs_t *a, size_t i, const char **key, const char **value,
                      uint64_t *version);

/* The map's version: its highest entry version (0 when empty). */
uint64_t tb_attrs_version(const tb_attrs_t *a);

#endif
