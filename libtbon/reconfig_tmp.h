/* reconfig_tmp.h - a plain stand-in for the indexed adopter choice and the
 * report rules of reconfig.h, until that lands (same semantics, brute force) */
#ifndef TB_RECONFIG_TMP_H
#define TB_RECONFIG_TMP_H

#include "topology.h"

/* Adopters for orphan o of the failed parent lost (of height old_height
 * before it failed), in the order to try, the FE last. */
size_t tb_tmp_adopt_candidates(const tb_topology_t *t, tbon_rank_t o, tbon_rank_t lost,
                               uint32_t old_height, tbon_rank_t *out, size_t cap);
/* 1 if the report changed t, 0 if it was known or stale. */
int tb_tmp_report_failure(tb_topology_t *t, tbon_rank_t r, uint32_t inc);
int tb_tmp_report_adoption(tb_topology_t *t, tbon_rank_t o, tbon_rank_t p, uint32_t inc);

#endif
