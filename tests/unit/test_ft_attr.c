/* test_ft_attr.c - attribute replication (ft/attr.c) against a fake node
 * (ft_fake.h): a back-end's write goes up as one entry with its version, a
 * delete as a tombstone; a commnode passes a child's entries on unchanged;
 * the FE hands each entry to the application and drops a failed source's
 * and malformed ones; after an adoption the whole map goes again and the
 * subtree is asked for theirs, but only where an attribute ever passed. */
#include "../harness.h"

#include "ft_fake.h"
#include "topo/reconfig.h"

static const uint32_t FAN[] = { 2, 2 };     /* 0; 1, 2; 3, 4 under 1; 5, 6 under 2 */

/* What the FE's application was handed (cbs.attr). */
struct got {
    size_t n;
    tbon_rank_t src[8];
    char key[8][32], val[8][32];
    int dead[8];
    uint64_t ver[8];
};

static struct got got;

static void record(void *arg, tbon_rank_t src, const char *key, const char *value,
                   uint64_t version)
{
    (void)arg;
    if (got.n == 8)
        return;
    got.src[got.n] = src;
    snprintf(got.key[got.n], sizeof got.key[0], "%s", key);
    snprintf(got.val[got.n], sizeof got.val[0], "%s", value ? value : "");
    got.dead[got.n] = value == NULL;
    got.ver[got.n++] = version;
}

/* The k-th TB_CTL_ATTR sent, which must exist. */
static const tb_ctl_attr_t *attr_sent(const ff_t *f, size_t k)
{
    const ff_sent_t *s = ff_find(f, TB_CTL_ATTR, k);
    return s ? &s->m.u.attr : NULL;
}

/* An ATTR message of source src with one entry. */
static tbon_packet_t *one_entry(tbon_rank_t src, const char *key, const char *val, int dead,
                                uint64_t ver)
{
    const char *keys[] = { key }, *vals[] = { val };
    uint8_t d[] = { (uint8_t)dead };
    uint64_t v[] = { ver };
    return tb_ctl_attr_encode(&(tb_ctl_attr_t){ src, keys, vals, d, v, 1 });
}

TEST(backend_write_goes_up_with_its_version)
{
    ff_t *f = ff_new(FAN, 2, 3);
    REQUIRE(f);
    tb_attr_set(f->at, "phase", "init");
    tb_attr_set(f->at, "phase", "solve");
    tb_attr_set(f->at, "phase", NULL);          /* deleted: a tombstone */
    CHECK_UINT(ff_count(f, TB_CTL_ATTR), 3);
    uint64_t last = 0;
    for (size_t k = 0; k < 3; k++) {
        const ff_sent_t *s = ff_find(f, TB_CTL_ATTR, k);
        REQUIRE(s);
        CHECK_INT(s->to, TB_NFT_PARENT);
        const tb_ctl_attr_t *a = &s->m.u.attr;
        CHECK_UINT(a->src, 3);
        REQUIRE(a->n == 1);                     /* only the key written */
        CHECK_STR(a->keys[0], "phase");
        CHECK(a->versions[0] > last);
        last = a->versions[0];
        CHECK_INT(a->dead[0], k == 2);
    }
    CHECK_STR(attr_sent(f, 1)->values[0], "solve");
    ff_free(f);
}

TEST(commnode_passes_entries_on_unchanged)
{
    ff_t *f = ff_new(FAN, 2, 1);
    REQUIRE(f);
    FF_DELIVER(tb_attr_ctl, f->at, 0, TB_CTL_ATTR, one_entry(3, "k", "v", 0, 41));
    CHECK_UINT(ff_count(f, TB_CTL_ATTR), 1);
    const ff_sent_t *s = ff_find(f, TB_CTL_ATTR, 0);
    REQUIRE(s);
    CHECK_INT(s->to, TB_NFT_PARENT);
    CHECK_UINT(s->m.u.attr.src, 3);
    CHECK_STR(s->m.u.attr.values[0], "v");
    CHECK_UINT(s->m.u.attr.versions[0], 41);
    ff_free(f);
}

TEST(front_end_hands_entries_over_and_drops_bad_ones)
{
    ff_t *f = ff_new(FAN, 2, 0);
    REQUIRE(f);
    memset(&got, 0, sizeof got);
    f->cbs.attr = record;
    FF_DELIVER(tb_attr_ctl, f->at, 0, TB_CTL_ATTR, one_entry(3, "phase", "solve", 0, 7));
    FF_DELIVER(tb_attr_ctl, f->at, 0, TB_CTL_ATTR, one_entry(4, "phase", "", 1, 9));
    FF_DELIVER(tb_attr_ctl, f->at, 0, TB_CTL_ATTR, one_entry(4, "bad", "x", 0, 0));  /* version 0 */
    FF_DELIVER(tb_attr_ctl, f->at, 0, TB_CTL_ATTR, one_entry(99, "k", "v", 0, 1));   /* no such rank */
    tb_report_failure(f->node.topo, 5, 0);
    FF_DELIVER(tb_attr_ctl, f->at, 1, TB_CTL_ATTR, one_entry(5, "k", "v", 0, 2));    /* failed */
    REQUIRE(got.n == 2);
    CHECK_UINT(got.src[0], 3);
    CHECK_STR(got.key[0], "phase");
    CHECK_STR(got.val[0], "solve");
    CHECK_UINT(got.ver[0], 7);
    CHECK_INT(got.dead[0], 0);
    CHECK_UINT(got.src[1], 4);
    CHECK_INT(got.dead[1], 1);
    CHECK_UINT(got.ver[1], 9);
    CHECK_UINT(ff_count(f, TB_CTL_ATTR), 0);    /* the root sends nothing up */
    ff_free(f);
}

TEST(orphan_drops_then_resends_its_whole_map)
{
    ff_t *f = ff_new(FAN, 2, 3);
    REQUIRE(f);
    f->node.pflags = 0;                         /* the parent is gone */
    tb_attr_set(f->at, "a", "1");
    tb_attr_set(f->at, "b", "2");
    CHECK_UINT(ff_count(f, TB_CTL_ATTR), 0);
    f->node.pflags = TB_NFT_CONN | TB_NFT_OPEN; /* adopted */
    tb_attr_resync(f->at);
    REQUIRE(ff_count(f, TB_CTL_ATTR) == 1);
    const tb_ctl_attr_t *a = attr_sent(f, 0);
    REQUIRE(a->n == 2);
    CHECK_STR(a->keys[0], "a");
    CHECK_STR(a->values[1], "2");
    CHECK(a->versions[0] < a->versions[1]);
    CHECK_UINT(ff_count(f, TB_CTL_ATTR_SYNC), 0);   /* a back-end has no subtree */
    ff_free(f);
}

TEST(resync_asks_the_subtree_only_where_attributes_passed)
{
    ff_t *f = ff_new(FAN, 2, 1);
    REQUIRE(f);
    tb_attr_resync(f->at);                      /* nothing ever passed: nothing to lose */
    CHECK_UINT(f->node.nsent, 0);
    FF_DELIVER(tb_attr_ctl, f->at, 1, TB_CTL_ATTR, one_entry(4, "k", "v", 0, 3));
    f->node.flags[1] &= ~(TB_NFT_CONN | TB_NFT_OPEN);   /* child 4 is gone */
    FF_DELIVER(tb_attr_ctl, f->at, TB_NFT_PARENT, TB_CTL_ATTR_SYNC,
               tb_ctl_attr_sync_encode(&(tb_ctl_attr_sync_t){ 0 }));
    /* the forwarded entry, then one ATTR_SYNC to the connected child */
    CHECK_UINT(ff_count(f, TB_CTL_ATTR), 1);
    REQUIRE(ff_count(f, TB_CTL_ATTR_SYNC) == 1);
    CHECK_INT(ff_find(f, TB_CTL_ATTR_SYNC, 0)->to, 0);
    ff_free(f);
}
