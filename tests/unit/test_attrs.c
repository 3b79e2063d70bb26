/* test_attrs.c - attribute maps with versions and tombstones (seed 002
 * section 4): a replica that gets the source's entries in any order, with
 * repeats, ends up equal to the source; stale entries never overwrite newer
 * ones; a delete is a tombstone that an older value cannot undo */
#include "../harness.h"

#include <stdio.h>
#include <string.h>

#include <tbon/tbon.h>

#include "util/attrs.h"

/* Every entry of src applied to dst; how many were news. */
static int copy_all(const tb_attrs_t *src, tb_attrs_t *dst)
{
    int news = 0;
    for (size_t i = 0; i < tb_attrs_count(src); i++) {
        const char *k, *v;
        uint64_t ver;
        tb_attrs_entry(src, i, &k, &v, &ver);
        news += tb_attrs_apply(dst, k, v, ver) == 1;
    }
    return news;
}

TEST(set_overwrite_delete)
{
    tb_attrs_t *a = tb_attrs_new();
    REQUIRE(a);
    CHECK_UINT(tb_attrs_version(a), 0);
    CHECK(tb_attrs_get(a, "x") == NULL);
    CHECK_UINT(tb_attrs_set(a, "x", "1"), 1);
    CHECK_UINT(tb_attrs_set(a, "y", "two"), 2);
    CHECK_UINT(tb_attrs_set(a, "x", "3"), 3);         /* overwrite: a new version */
    CHECK_STR(tb_attrs_get(a, "x"), "3");
    CHECK_STR(tb_attrs_get(a, "y"), "two");
    CHECK_UINT(tb_attrs_set(a, "y", NULL), 4);        /* delete: a tombstone */
    CHECK(tb_attrs_get(a, "y") == NULL);
    CHECK_UINT(tb_attrs_count(a), 2);                 /* the tombstone stays */
    CHECK_UINT(tb_attrs_version(a), 4);
    const char *k, *v;
    uint64_t ver;
    tb_attrs_entry(a, 1, &k, &v, &ver);
    CHECK_STR(k, "y");
    CHECK(v == NULL);
    CHECK_UINT(ver, 4);
    CHECK_UINT(tb_attrs_set(a, "y", ""), 5);          /* an empty value is a value */
    CHECK_STR(tb_attrs_get(a, "y"), "");
    tb_attrs_destroy(a);
    tb_attrs_destroy(NULL);
}

/* Entries applied in every order of a shuffled, repeated sequence give the
 * source's map; older entries never win. */
TEST(replica_converges_in_any_order)
{
    uint64_t st = 42;
    for (int round = 0; round < 200; round++) {
        tb_attrs_t *src = tb_attrs_new();
        REQUIRE(src);
        /* Record every write as it happened. */
        struct { char k[8]; char v[16]; int del; uint64_t ver; } w[64];
        int nw = 0;
        for (int i = 0; i < 40; i++) {
            snprintf(w[nw].k, sizeof w[nw].k, "k%u", (unsigned)(th_rand(&st) % 6));
            w[nw].del = th_rand(&st) % 4 == 0;
            snprintf(w[nw].v, sizeof w[nw].v, "v%d", i);
            w[nw].ver = tb_attrs_set(src, w[nw].k, w[nw].del ? NULL : w[nw].v);
            CHECK_UINT(w[nw].ver, (uint64_t)i + 1);
            nw++;
        }
        tb_attrs_t *rep = tb_attrs_new();
        REQUIRE(rep);
        for (int rep_i = 0; rep_i < 3 * nw; rep_i++) {   /* shuffled, with repeats */
            int j = (int)(th_rand(&st) % (uint64_t)nw);
            tb_attrs_apply(rep, w[j].k, w[j].del ? NULL : w[j].v, w[j].ver);
        }
        copy_all(src, rep);          /* whatever the shuffle missed */
        for (int i = 0; i < 6; i++) {
            char k[16];
            snprintf(k, sizeof k, "k%d", i);
            const char *a = tb_attrs_get(src, k), *b = tb_attrs_get(rep, k);
            if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0))
                th_fail(__FILE__, __LINE__, "round %d key %s: source %s, replica %s", round, k,
                        a ? a : "(none)", b ? b : "(none)");
        }
        CHECK_UINT(tb_attrs_version(rep), tb_attrs_version(src));
        CHECK_INT(copy_all(src, rep), 0);                /* nothing new the second time */
        tb_attrs_destroy(src);
        tb_attrs_destroy(rep);
    }
}

TEST(stale_entries_and_tombstones)
{
    tb_attrs_t *r = tb_attrs_new();
    REQUIRE(r);
    CHECK_INT(tb_attrs_apply(r, "x", "new", 5), 1);
    CHECK_INT(tb_attrs_apply(r, "x", "old", 3), 0);   /* stale: ignored */
    CHECK_STR(tb_attrs_get(r, "x"), "new");
    CHECK_INT(tb_attrs_apply(r, "x", "new", 5), 0);   /* a repeat */
    CHECK_INT(tb_attrs_apply(r, "x", NULL, 7), 1);    /* deleted */
    CHECK(tb_attrs_get(r, "x") == NULL);
    CHECK_INT(tb_attrs_apply(r, "x", "older", 6), 0); /* cannot undo the delete */
    CHECK(tb_attrs_get(r, "x") == NULL);
    CHECK_INT(tb_attrs_apply(r, "x", "again", 8), 1);
    CHECK_STR(tb_attrs_get(r, "x"), "again");
    tb_attrs_destroy(r);
}

TEST(keys_and_values_checked)
{
    static char big[TB_ATTR_VALUE_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    CHECK_INT(tb_attrs_check("k", "v"), 0);
    CHECK_INT(tb_attrs_check("k", NULL), 0);
    CHECK_INT(tb_attrs_check(NULL, "v"), TBON_EINVAL);
    CHECK_INT(tb_attrs_check("", "v"), TBON_EINVAL);
    CHECK_INT(tb_attrs_check("k", big), TBON_EINVAL);
    big[TB_ATTR_VALUE_MAX] = 0;
    CHECK_INT(tb_attrs_check("k", big), 0);
    big[TB_ATTR_KEY_MAX + 1] = 0;
    CHECK_INT(tb_attrs_check(big, "v"), TBON_EINVAL);
    big[TB_ATTR_KEY_MAX] = 0;
    CHECK_INT(tb_attrs_check(big, "v"), 0);
}
