/* set.c - a set of uint64 values (open addressing), for the front-end's
 * output and the back-ends' inputs. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fims.h"

static size_t set_hash(uint64_t v, size_t cap)
{
    v ^= v >> 33;
    v *= 0xFF51AFD7ED558CCDull;
    v ^= v >> 33;
    return (size_t)v & (cap - 1);
}

int set_has(const u64set_t *s, uint64_t v)
{
    if (v == 0)
        return s->has_zero;
    if (!s->cap)
        return 0;
    for (size_t i = set_hash(v, s->cap);; i = (i + 1) & (s->cap - 1)) {
        if (s->slot[i] == v)
            return 1;
        if (s->slot[i] == 0)
            return 0;
    }
}

/* Add v: 1 if it was new, 0 if already there; exits when out of memory. */
int set_add(u64set_t *s, uint64_t v)
{
    if (v == 0) {
        int was = s->has_zero;
        s->has_zero = 1;
        return !was;
    }
    if ((s->n + 1) * 2 > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 1024;
        uint64_t *ns = calloc(ncap, sizeof *ns);
        if (!ns) {
            fprintf(stderr, PROG ": out of memory\n");
            exit(1);
        }
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slot[i])
                continue;
            size_t j = set_hash(s->slot[i], ncap);
            while (ns[j])
                j = (j + 1) & (ncap - 1);
            ns[j] = s->slot[i];
        }
        free(s->slot);
        s->slot = ns;
        s->cap = ncap;
    }
    size_t i = set_hash(v, s->cap);
    while (s->slot[i] && s->slot[i] != v)
        i = (i + 1) & (s->cap - 1);
    if (s->slot[i] == v)
        return 0;
    s->slot[i] = v;
    s->n++;
    return 1;
}

size_t set_size(const u64set_t *s)
{
    return s->n + (size_t)s->has_zero;
}

/* Print the first up-to-SHOW_MAX elements of a not in b; returns how many
 * there are in all. */
size_t set_diff(const u64set_t *a, const u64set_t *b, const char *what)
{
    size_t count = 0;
    if (a->has_zero && !set_has(b, 0)) {
        printf("  %s: 0\n", what);
        count++;
    }
    for (size_t i = 0; i < a->cap; i++) {
        if (!a->slot[i] || set_has(b, a->slot[i]))
            continue;
        if (count < SHOW_MAX)
            printf("  %s: %" PRIu64 "\n", what, a->slot[i]);
        count++;
    }
    return count;
}
