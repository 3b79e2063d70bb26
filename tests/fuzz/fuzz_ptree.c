/* fuzz_ptree.c - libFuzzer harness for tbon_stat's prefix-tree decoder
 * (stat/st_ptree.c) and the outputs of what it accepts
 *
 * Decodes arbitrary bytes. A refusal must say "at byte N: ...". A tree that
 * decodes, full or counts-only, must be canonical (its encoding is exactly
 * the input), equal to its copy, unchanged by merging itself in, and
 * printable in every format (its JSON valid: jansson reads it back).
 * The generic fuzz rule builds harnesses with the library sources only, so
 * this one includes the prefix-tree sources (the Makefile lists them as
 * prerequisites of fuzz_ptree). */
#include "../../stat/st_ptree.c"
#include "../../stat/st_ptree_out.c"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define FUZZ_ASSERT(c) do { if (!(c)) { \
    fprintf(stderr, "fuzz_ptree: %s:%d: %s\n", __FILE__, __LINE__, #c); \
    abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    char err[256];

    if (!sink)
        FUZZ_ASSERT(sink = fopen("/dev/null", "w"));
    err[0] = '\0';
    st_tree_t *t = st_tree_decode(data, size, err, sizeof err);
    if (!t) {
        FUZZ_ASSERT(strncmp(err, "at byte ", 8) == 0);
        return 0;
    }

    uint8_t *b = NULL;
    size_t len = 0;
    FUZZ_ASSERT(st_tree_encode(t, &b, &len) == 0);
    FUZZ_ASSERT(len == size && memcmp(b, data, size) == 0);
    free(b);

    st_tree_t *c = st_tree_new();
    FUZZ_ASSERT(c);
    FUZZ_ASSERT(st_tree_merge(c, t) == 0);
    FUZZ_ASSERT(st_tree_equal(c, t) && st_tree_size(c) == st_tree_size(t));
    FUZZ_ASSERT(st_tree_merge(c, t) == 0);
    FUZZ_ASSERT(st_tree_equal(c, t));

    FUZZ_ASSERT(st_tree_write_text(t, sink) == 0);
    /* The JSON is valid: jansson reads it back, unless the tree is deeper
     * than its parser goes. */
    char *js = NULL;
    size_t jn = 0;
    FILE *jf = open_memstream(&js, &jn);
    FUZZ_ASSERT(jf && st_tree_write_json(t, jf) == 0);
    FUZZ_ASSERT(fclose(jf) == 0);
    json_error_t je;
    json_t *jv = json_loadb(js, jn, 0, &je);
    FUZZ_ASSERT(jv || strstr(je.text, "depth"));
    FUZZ_ASSERT(!jv || json_integer_value(json_object_get(jv, "count")) ==
                           (json_int_t)st_ranges_count(t->root->set.r, t->root->set.n));
    json_decref(jv);
    free(js);
    FUZZ_ASSERT(st_tree_write_dot(t, sink, "fuzz") == 0);
    FUZZ_ASSERT(st_tree_write_folded(t, sink) == 0);
    /* (a counts-only tree has no sets to make classes of) */
    if (st_tree_is_counts(t))
        FUZZ_ASSERT(st_tree_write_classes(t, sink) == TBON_EINVAL);
    else
        FUZZ_ASSERT(st_tree_write_classes(t, sink) >= 0);

    st_range_t *r = NULL;
    size_t nr = st_tree_tasks(t, &r, NULL);
    for (size_t i = 0; i < nr && i < 4; i++) {
        const char **frames = NULL;
        size_t n = st_tree_path(t, r[i].hi, &frames);
        FUZZ_ASSERT((n == 0) == (frames == NULL));
        free(frames);
    }
    free(r);
    st_tree_free(c);
    st_tree_free(t);
    return 0;
}
