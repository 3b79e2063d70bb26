/* reconfig.h - what an orphan and a topology copy do after a failure (seed
 * 003 V-A, "Dynamic Topology Configuration" and "Topology Updates")
 *
 * A pure module: functions of a topology copy, no I/O, no threads. Two parts:
 *
 * 1. Adopter choice. When node P fails, each of its children O (an orphan)
 *    picks a new parent from its own copy, without coordination. Potential
 *    adopters are the nodes A that
 *      - are alive and not back-ends (the FE or commnodes),
 *      - are attached to the FE in this copy (A's parent chain ends at rank 0:
 *        a node of another orphan's fragment cannot forward to the FE yet, and
 *        adopting under it invites cycles between fragments),
 *      - are not O, not P and not in O's or P's subtree,
 *      - and whose adoption of O does not raise the tree height:
 *        height(A) >= the height P had before it failed (seed: "the depth of
 *        each potential adopter's subtree must be equal or greater than that
 *        of the orphan's failed parent"). Heights are >= 1 here, so leaves never
 *        qualify; a childless commnode counts as height 1 (tb_adopt_height:
 *        one that joined the running tree takes over adoptions of leaves).
 *    They are sorted by weight: subtree height closest to height(O) + 1 first
 *    (all heights are >= that, so: ascending height, which keeps the tree
 *    balanced), then fewer children first, then lower rank. The sorted list of
 *    length L is rotated by rank(O) mod L, so that orphans with consecutive
 *    ranks start at consecutive adopters and, as the seed notes, the numbers
 *    of adoptions by any two adopters differ by at most one. The FE is not
 *    rotated with the others: it is the last resort and always ends the list.
 *
 *    An index (buckets by height, each ordered by fan-out and rank) makes this
 *    lazy: producing the first k candidates costs O(k * depth) after an O(1)
 *    search, instead of sorting every commnode per orphan.
 *
 * 2. Topology reports. Failure and adoption reports flood over tree edges and
 *    arrive in any order, duplicated and late. tb_report_failure() and
 *    tb_report_adoption() apply one report to a copy. Their rules make the
 *    copy a function of the *set* of reports received (together with the
 *    starting topology), so every copy that has received the same reports is
 *    equal (tb_topology_equal(), equal digests, equal pending claims):
 *
 *    - Dead is sticky: a failure report is final (a suspect is fenced, its
 *      incarnation retired, docs/fault-tolerance.md, "One truth"), whatever its
 *      incarnation within the node's generation. Only a join of a later
 *      generation (a restarted process, tb_report_join) brings the rank
 *      back, and reports of older generations are stale from then on. A node's incarnation is the highest one any report about
 *      it carried (failure or adoption), so a dead node still records it.
 *    - Per orphan, the adoption report with the highest incarnation wins
 *      ("Processes disregard adoption reports of orphans for which they have
 *      received a report with a higher incarnation number"); lower ones are
 *      stale and ignored. Two reports naming different adopters with the same
 *      incarnation are a conflict (the protocol never produces one: an orphan
 *      takes a new incarnation for every adoption): the orphan then stays
 *      parentless at that incarnation until a higher one arrives.
 *    - The orphan hangs under the winning adopter if that adopter is alive.
 *      If it is dead, now or when its failure report comes later, the orphan
 *      is parentless (an orphan again, until a report with a higher
 *      incarnation).
 *    - Cycles: stale views can make the winning claims form a cycle (o1
 *      adopted inside o2's subtree while o2 is adopted inside o1's). A copy
 *      never holds a cycle: on each cycle of winning claims, the member with
 *      the lowest rank is left parentless and its claim kept as *pending*
 *      (tb_topology_pending()). Whenever a report breaks the cycle (a member
 *      dies or is adopted again), the pending claim is honoured. Which member
 *      waits depends only on the cycle, not on the order reports came in.
 *
 *    Formally, for each alive node o != 0, let d(o) be its winning adopter
 *    (the parent in the starting topology while no adoption report for o has
 *    arrived), or none on a conflict or when that adopter is dead. The copy is
 *    the graph o -> d(o) with, on each cycle, the lowest rank cut. The unit
 *    test checks every copy against this definition.
 */
#ifndef TB_RECONFIG_H
#define TB_RECONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "topo/topology.h"

/* ---- adopter choice ------------------------------------------------------ */

typedef struct tb_adopt_index tb_adopt_index_t;

/* An index of the potential adopters of t (built at once, as by
 * tb_adopt_index_update()). NULL when out of memory or t is NULL. The index
 * keeps no pointer to t. O(N log N) in the number N of nodes of height >= 1
 * (O(size) more while some commnode has no children). */
tb_adopt_index_t *tb_adopt_index_new(const tb_topology_t *t);

/* Free x. NULL is a no-op. */
void tb_adopt_index_destroy(tb_adopt_index_t *x);

/* Bring x up to date with t after mutations. O(1) when t's digest and size
 * are those of the last update; otherwise a walk over the nodes of height >= 1
 * attached to the FE (and the leaves, while some commnode has no children),
 * re-sorting only the entries whose key (height, fan-out)
 * changed. Returns 0, TBON_EINVAL (NULL argument) or TBON_ENOMEM (x then holds
 * no entries, and is rebuilt at the next update). */
int tb_adopt_index_update(tb_adopt_index_t *x, const tb_topology_t *t);

/* Write to out up to cap ranks that orphan o should try, in order, after its
 * parent failed_parent (whose height before the failure was old_height)
 * failed; returns how many were written. The rules are in the comment at the
 * top. If the FE is not among the first cap candidates, it takes the last
 * place, so a result with cap >= 1 always contains rank 0. t is o's copy and
 * x must be up to date with it (a stale index still yields only nodes that
 * pass the rules, checked against t, but may miss some or order them
 * differently from other orphans). Heights and fan-outs are those of t: apply
 * the parent's failure first (tb_report_failure), so that all of its orphans
 * rotate over the same list; P's ancestors may then have become lower and no
 * longer qualify, which keeps any adoption from raising any height. Asked
 * before the failure is applied, the list has the same members but P's parent
 * is weighed with P still among its children.
 * Returns 0 when o is 0, dead or out of range, when failed_parent is 0, o or
 * out of range, and when cap is 0. Cost: O(log N + depth * tried) - candidates
 * that no longer pass the rules are skipped while walking. */
size_t tb_adopt_candidates(const tb_adopt_index_t *x, const tb_topology_t *t,
                           tbon_rank_t o, tbon_rank_t failed_parent, uint32_t old_height,
                           tbon_rank_t *out, size_t cap);

/* The adopter-side check before accepting o: true when adopter is o itself or
 * inside o's subtree in t (adopting would close a cycle), or a rank is out of
 * range. O(depth of adopter). */
bool tb_adopt_would_cycle(const tb_topology_t *t, tbon_rank_t o, tbon_rank_t adopter);

/* The parent of a node joining the running tree, by the weights of
 * adoption: the alive node attached to the FE, not a back-end, whose height
 * is at least 1 for a joining back-end and at least 2 for a joining commnode
 * (which counts as height 1 itself, so no height grows), that is lowest,
 * then has the fewest children, then the lowest rank; the FE when there is
 * none. Joins are decided one at a time at the FE, so no rotation is needed
 * to spread them: each join adds a child to its parent, and the next goes to
 * the next least loaded. O(size x depth). */
tbon_rank_t tb_join_parent(const tb_topology_t *t, tb_role_t role);

/* The height a node counts with as an adopter or a parent: its subtree's,
 * but 1 for an alive commnode without children (one that joined the running
 * tree, or whose children all left) above the tree's deepest level: it can
 * take back-ends without making the tree any higher. */
uint32_t tb_adopt_height(const tb_topology_t *t, tbon_rank_t r);

/* ---- incarnations --------------------------------------------------------- */

/* An incarnation is a generation in its high bits and a count of adoptions
 * in its low bits. A node starts at generation 0; an adoption adds 1; a
 * restarted process (a rank that failed and comes back, seed 002 section 3)
 * gets the next generation with a count of 0, so everything its old process
 * could still say - at most 65535 adoptions later - is older. */
#define TB_INC_GEN_SHIFT 16
static inline uint32_t tb_inc_gen(uint32_t inc) { return inc >> TB_INC_GEN_SHIFT; }
/* The first incarnation of the generation after inc's. */
static inline uint32_t tb_inc_next_gen(uint32_t inc)
{
    return (tb_inc_gen(inc) + 1) << TB_INC_GEN_SHIFT;
}

/* ---- topology reports ---------------------------------------------------- */

/* Apply a failure report: rank r, last known at incarnation inc, failed.
 * Returns 1 when t changed (r newly dead, or its incarnation raised; the
 * caller floods the report on), 0 for a duplicate or a stale report (inc of
 * an older generation than r's: a failure of a process that has since been
 * restarted), TBON_EINVAL for a rank out
 * of range or NULL t, TBON_ETOPOLOGY for r == 0 (the FE cannot be reported
 * dead), TBON_ENOMEM (the report is applied and t is a valid forest, but a
 * claim the failure freed may stay pending until the next report). */
int tb_report_failure(tb_topology_t *t, tbon_rank_t r, uint32_t inc);

/* Apply an adoption report: orphan o, now at incarnation inc, was adopted by
 * p. Returns 1 when t changed, 0 for a duplicate or a stale report (inc below
 * o's incarnation, or equal to it and nothing new), TBON_EINVAL for a
 * malformed report (a rank out of range, o == 0, o == p, inc == 0 - adoptions
 * start at incarnation 1 - or p a back-end), TBON_ENOMEM (t is a valid
 * forest: either nothing changed, or the report is applied and a claim may
 * stay pending until the next report). */
int tb_report_adoption(tb_topology_t *t, tbon_rank_t o, tbon_rank_t p, uint32_t inc);

/* Apply a join (the FE's view change TB_V_JOIN, docs/protocol.md 9.6): rank
 * r with the given role, named host:lid, under p, at incarnation inc. If r is
 * the next rank it is added; if r exists and inc is of a later generation
 * than r's, r is a restarted process: its old incarnation is taken for
 * failed (if this copy still had it alive) and r comes back, childless,
 * under p. A parent that is dead, a back-end or not yet known is replaced by
 * the FE (later reports say more). Returns 1 when t changed, 0 when it has that
 * incarnation of r already (or a later one), TBON_EINVAL for a malformed
 * join (a rank past the next, a bad name or role), TBON_ENOMEM.
 * Unlike the other reports, joins are ordered: only the FE makes them, and
 * every copy applies them in its order of view versions. */
int tb_report_join(tb_topology_t *t, tb_role_t role, tbon_rank_t r, tbon_rank_t p,
                   const char *host, uint32_t lid, uint32_t inc);

#endif
