/* topology.h - the whole TBON tree, as every process holds it (seed 003 V-A)
 *
 * A pure object: build, query, mutate, compare, parse, write, serialise. No I/O
 * except tb_topology_parse_file()/tb_topology_write_file(), no threads, no
 * locks: one owner (or the owner's lock) at a time.
 *
 * Nodes are named by rank: the front-end (FE) is rank 0, the rest follow in
 * breadth-first order with children in file order. Each node has a host and a
 * local id (the N of "host:N"), a parent (TBON_RANK_NONE for rank 0, for dead
 * nodes and for orphans), children kept in increasing rank order, a depth and a
 * subtree height, a role, an alive flag, an incarnation and a port.
 *
 * Depth and height are those of the node's *fragment*: rank 0's fragment is the
 * tree; an orphan (alive, parent NONE, rank > 0) is the root (depth 0) of its
 * own fragment until it is reparented. A dead node is isolated: no parent, no
 * children, depth 0, height 0. Nodes are never deleted, so ranks stay stable.
 */
#ifndef TB_TOPOLOGY_H
#define TB_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tbon/tbon.h>

typedef struct tb_topology tb_topology_t;

typedef enum {
    TB_ROLE_FE = 0,        /* rank 0, the root */
    TB_ROLE_COMMNODE = 1,  /* interior node of the original tree, or joined as one */
    TB_ROLE_BE = 2,        /* leaf of the original tree, or joined as one */
} tb_role_t;

#define TB_TOPOLOGY_MAX_NODES 16777216u          /* 2^24 nodes */
#define TB_TOPOLOGY_MAX_HOST  255u               /* characters in a host name */
#define TB_TOPOLOGY_MAX_ID    2147483647u        /* largest local id (2^31 - 1) */
#define TB_TOPOLOGY_MAX_BYTES (1024u * 1024u * 1024u) /* largest topology file */

/* ---- building ------------------------------------------------------------ */

/* An empty topology, to fill with tb_topology_add() and close with
 * tb_topology_finish(). Returns NULL when out of memory. */
tb_topology_t *tb_topology_new(void);

/* Free t and everything it owns. NULL is a no-op. */
void tb_topology_destroy(tb_topology_t *t);

/* Make room for n nodes in all, so that a large build does not reallocate.
 * Returns 0, TBON_EINVAL (n over the maximum) or TBON_ENOMEM. */
int tb_topology_reserve(tb_topology_t *t, size_t n);

/* Append node host:local_id with rank = the current size, as a child of parent.
 * The first node must have parent TBON_RANK_NONE (it is the FE); every later
 * one an existing parent (nodes added in BFS order get BFS ranks). Returns 0;
 * TBON_EINVAL for a bad host name, id or parent, or after finish; TBON_ETOPOLOGY
 * if host:local_id is already present or the maximum size is reached;
 * TBON_ENOMEM. */
int tb_topology_add(tb_topology_t *t, const char *host, uint32_t local_id,
                    tbon_rank_t parent);

/* Close the build: compute children, depths, heights and roles (rank 0 FE,
 * leaves BE, others COMMNODE); every node alive, incarnation 0, port 0.
 * Returns 0, or fills err and returns TBON_ETOPOLOGY (no nodes) / TBON_ENOMEM. */
int tb_topology_finish(tb_topology_t *t, tbon_error_t *err);

/* A deep copy of a finished topology, or NULL when out of memory. */
tb_topology_t *tb_topology_clone(const tb_topology_t *t);

/* ---- queries (O(1) unless noted; r out of range gives NONE / 0 / NULL) --- */

size_t      tb_topology_size(const tb_topology_t *t);       /* all nodes, dead too */
tbon_rank_t tb_topology_parent(const tb_topology_t *t, tbon_rank_t r);
uint32_t    tb_topology_depth(const tb_topology_t *t, tbon_rank_t r);
uint32_t    tb_topology_height(const tb_topology_t *t, tbon_rank_t r); /* 0 for a leaf */
const char *tb_topology_host(const tb_topology_t *t, tbon_rank_t r);
uint32_t    tb_topology_local_id(const tb_topology_t *t, tbon_rank_t r);
tb_role_t   tb_topology_role(const tb_topology_t *t, tbon_rank_t r);
bool        tb_topology_alive(const tb_topology_t *t, tbon_rank_t r);
uint32_t    tb_topology_incarnation(const tb_topology_t *t, tbon_rank_t r);
uint16_t    tb_topology_port(const tb_topology_t *t, tbon_rank_t r); /* 0 = unknown */

/* The children of r in increasing rank order; *count gets their number. The
 * pointer is valid until the next mutation of t. NULL with *count 0 if none. */
const tbon_rank_t *tb_topology_children(const tb_topology_t *t, tbon_rank_t r,
                                        size_t *count);
size_t tb_topology_num_children(const tb_topology_t *t, tbon_rank_t r);

/* True when r is root or a descendant of root. O(depth). */
bool tb_topology_in_subtree(const tb_topology_t *t, tbon_rank_t root, tbon_rank_t r);

/* The root of r's fragment: 0 when r is attached to the tree, r itself for an
 * orphan or a dead node. O(depth). */
tbon_rank_t tb_topology_root_of(const tb_topology_t *t, tbon_rank_t r);

/* Leaves are the alive back-ends (role BE), attached or orphaned. The count is
 * O(1); tb_topology_leaves() writes up to cap of their ranks, in increasing
 * order, to out and returns their total number (O(size)). */
size_t tb_topology_num_leaves(const tb_topology_t *t);
size_t tb_topology_leaves(const tb_topology_t *t, tbon_rank_t *out, size_t cap);

/* How many alive commnodes have no children (joined ones, or whose children
 * all left or failed). O(1); 0 if t is NULL or unfinished. */
size_t tb_topology_num_childless(const tb_topology_t *t);

/* The path r, parent(r), ..., root of r's fragment: writes up to cap ranks to
 * out and returns the path's length (depth + 1), 0 for a bad r. */
size_t tb_topology_path(const tb_topology_t *t, tbon_rank_t r, tbon_rank_t *out,
                        size_t cap);

/* The rank of host:local_id, or TBON_RANK_NONE. O(1) (hashed). */
tbon_rank_t tb_topology_find(const tb_topology_t *t, const char *host,
                             uint32_t local_id);

/* ---- mutations (each keeps depths, heights and the digest up to date) ----- */

/* Record the port r listens on (learned at start-up). Returns 0 or TBON_EINVAL. */
int tb_topology_set_port(tb_topology_t *t, tbon_rank_t r, uint16_t port);

/* r has failed: it becomes dead and isolated, its children become orphans
 * (parent NONE, roots of their own fragments), its ancestors' heights drop if
 * need be. Removing a dead node again is a no-op returning 0 (duplicate failure
 * reports converge). TBON_EINVAL for a bad rank, TBON_ETOPOLOGY for rank 0. */
int tb_topology_remove(tb_topology_t *t, tbon_rank_t r);

/* Move r (with its subtree) under new_parent and bump r's incarnation: an
 * adoption. Refused with TBON_ETOPOLOGY, leaving t unchanged, when r is 0 or
 * dead, or new_parent is dead, a back-end, r itself or inside r's subtree, so
 * no cycle can form. TBON_EINVAL for bad ranks; TBON_ENOMEM. */
int tb_topology_reparent(tb_topology_t *t, tbon_rank_t r, tbon_rank_t new_parent);

/* Move r (with its subtree) under new_parent, or make it the root of its own
 * fragment when new_parent is TBON_RANK_NONE, leaving its incarnation alone:
 * the primitive under tb_topology_reparent(), for the report rules of
 * reconfig.c, which set incarnations themselves. Same refusals as reparent
 * (TBON_ETOPOLOGY, t unchanged; r == 0 or dead, new_parent dead, a BE or in
 * r's subtree); TBON_EINVAL for bad ranks; TBON_ENOMEM. */
int tb_topology_move(tb_topology_t *t, tbon_rank_t r, tbon_rank_t new_parent);

/* Set r's incarnation (when applying an adoption report that carries one).
 * Returns 0 or TBON_EINVAL. */
int tb_topology_set_incarnation(tb_topology_t *t, tbon_rank_t r, uint32_t inc);

/* Change r's role between COMMNODE and BE (e.g. in attach mode the leaves of
 * the file are commnodes). TBON_ETOPOLOGY for rank 0, for making a node with
 * children a BE or for asking for TB_ROLE_FE; TBON_EINVAL for a bad rank. */
int tb_topology_set_role(tb_topology_t *t, tbon_rank_t r, tb_role_t role);

/* A node joins: host:local_id with the given role (COMMNODE or BE) becomes a
 * child of the alive, non-BE parent, with rank = the old size, stored in *rank.
 * TBON_ETOPOLOGY if the name exists, the parent is dead or a BE, or the maximum
 * size is reached; TBON_EINVAL for bad arguments; TBON_ENOMEM. */
int tb_topology_add_child(tb_topology_t *t, tbon_rank_t parent, const char *host,
                          uint32_t local_id, tb_role_t role, tbon_rank_t *rank);

/* A dead node comes back (a restarted process): r becomes alive again,
 * childless, under the alive, non-BE parent, at incarnation inc, with no
 * port known; its name and role stay. TBON_ETOPOLOGY if r is 0 or alive, or
 * the parent is dead or a BE; TBON_EINVAL for bad ranks; TBON_ENOMEM. */
int tb_topology_revive(tb_topology_t *t, tbon_rank_t r, tbon_rank_t parent, uint32_t inc);

/* Pending claims: a few (rank, claimed parent) pairs that the report rules of
 * reconfig.c keep with the copy. A pending node is an alive orphan whose
 * winning adoption report names an adopter that is, in this copy, inside the
 * orphan's own subtree: attaching it would close a cycle, so it waits (see
 * reconfig.h). Not part of tb_topology_equal(), the digest or the wire format;
 * tb_topology_clone() copies them. Sorted by rank. */

/* Record claim as r's pending parent, or forget r's when claim is
 * TBON_RANK_NONE. Returns 0, TBON_EINVAL (bad rank) or TBON_ENOMEM (never
 * after tb_topology_reserve_pending() made room). */
int tb_topology_set_pending(tb_topology_t *t, tbon_rank_t r, tbon_rank_t claim);
/* Room for `more` pending pairs beyond the present ones: 0 or TBON_ENOMEM. */
int tb_topology_reserve_pending(tb_topology_t *t, size_t more);
/* r's pending parent, or TBON_RANK_NONE. O(log pending). */
tbon_rank_t tb_topology_pending(const tb_topology_t *t, tbon_rank_t r);
/* How many nodes are pending, and the i-th of them in rank order (NONE past
 * the end). */
size_t      tb_topology_num_pending(const tb_topology_t *t);
tbon_rank_t tb_topology_pending_rank(const tb_topology_t *t, size_t i);

/* ---- comparison ---------------------------------------------------------- */

/* True when a and b have the same nodes with the same rank, host, local id,
 * parent, role, alive flag, incarnation and port. */
bool tb_topology_equal(const tb_topology_t *a, const tb_topology_t *b);

/* A 64-bit hash of the structure (per rank: parent, host, local id, role,
 * alive) and the incarnations; ports are left out, as they are learned at
 * different times by different processes. Kept up to date by every mutation,
 * so this is O(1). Equal topologies have equal digests. */
uint64_t tb_topology_digest(const tb_topology_t *t);

/* ---- files (topology_text.c, topology_xml.c, topology_file.c) ----------- */

/* Parse limits; a NULL limits pointer means the maxima above. */
typedef struct tb_topology_limits {
    size_t   max_bytes;   /* largest input */
    uint32_t max_nodes;   /* most nodes */
} tb_topology_limits_t;

/* Read and parse a topology file: XML when its first non-space character
 * (after a UTF-8 byte order mark, if any) is '<', the MRNet text format
 * otherwise. NULL on error, with err filled with
 * "PATH:LINE:COL: sentence" (TBON_ETOPOLOGY, TBON_EIO or TBON_ENOMEM). */
tb_topology_t *tb_topology_parse_file(const char *path, tbon_error_t *err);

/* Parse a buffer (not NUL-terminated) holding either format; name is used in
 * messages. Same results as tb_topology_parse_file(). */
tb_topology_t *tb_topology_parse(const char *buf, size_t len, const char *name,
                                 tbon_error_t *err);

/* Parse the text format: `host:N => host:N host:N ... ;` statements with '#'
 * comments; the first statement's parent is the FE. See docs/topology.md. */
tb_topology_t *tb_topology_parse_text(const char *buf, size_t len, const char *name,
                                      tbon_error_t *err);
tb_topology_t *tb_topology_parse_text_limits(const char *buf, size_t len,
                                             const char *name,
                                             const tb_topology_limits_t *lim,
                                             tbon_error_t *err);

/* Parse the XML format: <topology><node host="h" id="0">...</node></topology>. */
tb_topology_t *tb_topology_parse_xml(const char *buf, size_t len, const char *name,
                                     tbon_error_t *err);
tb_topology_t *tb_topology_parse_xml_limits(const char *buf, size_t len,
                                            const char *name,
                                            const tb_topology_limits_t *lim,
                                            tbon_error_t *err);

/* Write the tree attached to rank 0 (dead nodes and orphans are left out) as
 * canonical text (parent statements in BFS order, children in rank order) or
 * XML, into a fresh malloc'd NUL-terminated buffer the caller frees. For a
 * topology built from a file this parses back to an equal topology. Returns 0,
 * TBON_ETOPOLOGY (text: a lone FE has no statement to write) or TBON_ENOMEM. */
int tb_topology_format_text(const tb_topology_t *t, char **buf, size_t *len);
int tb_topology_format_xml(const tb_topology_t *t, char **buf, size_t *len);

/* Write t to path (text, or XML when xml is true), with an optional one-line
 * comment first. Returns 0 or fills err (TBON_EIO naming the path and errno;
 * the partial file is removed) or as the format functions. */
int tb_topology_write_file(const tb_topology_t *t, const char *path, bool xml,
                           const char *comment, tbon_error_t *err);

/* The same onto an open stream; name is used in messages. */
int tb_topology_fwrite(const tb_topology_t *t, FILE *f, const char *name, bool xml,
                       const char *comment, tbon_error_t *err);

/* ---- wire (topology_wire.c) ---------------------------------------------- */

/* Serialise everything (dead nodes, orphans, incarnations, ports, roles) into
 * a fresh malloc'd buffer the caller frees. Returns 0 or TBON_ENOMEM. */
int tb_topology_serialize(const tb_topology_t *t, uint8_t **buf, size_t *len);

/* Rebuild a topology from tb_topology_serialize() bytes. Any bytes are safe:
 * counts and indices are checked against the remaining bytes and the limits
 * before allocating. NULL on error with err filled (TBON_EFORMAT). */
tb_topology_t *tb_topology_deserialize(const void *buf, size_t len, tbon_error_t *err);

/* ---- generators (topology_gen.c); hosts round-robin in rank order -------- */

/* Balanced by levels: the FE has fanout[0] children, each of them fanout[1]... */
tb_topology_t *tb_topology_gen_shape(const uint32_t *fanout, size_t levels,
                                     const char *const *hosts, size_t nhosts,
                                     tbon_error_t *err);
/* Minimal depth for `leaves` leaves with at most k children per node; at every
 * level the numbers of children differ by at most one. k >= 2. */
tb_topology_t *tb_topology_gen_fanout(uint32_t k, uint32_t leaves,
                                      const char *const *hosts, size_t nhosts,
                                      tbon_error_t *err);
/* A k-nomial tree over `leaves` back-end slots (see docs/topology.md). k >= 2. */
tb_topology_t *tb_topology_gen_knomial(uint32_t k, uint32_t leaves,
                                       const char *const *hosts, size_t nhosts,
                                       tbon_error_t *err);
/* The FE with `leaves` back-ends as children. */
tb_topology_t *tb_topology_gen_flat(uint32_t leaves, const char *const *hosts,
                                    size_t nhosts, tbon_error_t *err);

/* A copy of the (finished, unchanged) topology t with the front-end on host
 * instead (same ranks; its local id kept unless host already has a node with
 * it). NULL with err filled for a bad host name or no memory. */
tb_topology_t *tb_topology_with_fe_host(const tb_topology_t *t, const char *host,
                                        tbon_error_t *err);

/* ---- for the parsers and the deserialiser only --------------------------- */

/* 0 if s[0..len) is a valid host name: 1..255 of letters, digits, '-', '.',
 * '_', starting with a letter or digit; otherwise TBON_EINVAL. */
int tb_topology_check_host(const char *s, size_t len);

/* Intern host s[0..len) (already checked) in t's host table; *idx gets its
 * index. Returns 0 or TBON_ENOMEM. */
int tb_topology_intern_host(tb_topology_t *t, const char *s, size_t len, uint32_t *idx);

/* The host table: count and names by index. */
uint32_t    tb_topology_num_hosts(const tb_topology_t *t);
const char *tb_topology_host_name(const tb_topology_t *t, uint32_t idx);
uint32_t    tb_topology_host_index(const tb_topology_t *t, tbon_rank_t r);

/* tb_topology_add() with an interned host index. */
int tb_topology_add_interned(tb_topology_t *t, uint32_t host_idx, uint32_t local_id,
                             tbon_rank_t parent);

/* Append a node with every field given and its parent not checked yet (it may
 * be a later rank). Returns 0, TBON_ETOPOLOGY (duplicate name or too many
 * nodes), TBON_EINVAL or TBON_ENOMEM. Close with tb_topology_load_finish(). */
int tb_topology_load_node(tb_topology_t *t, uint32_t host_idx, uint32_t local_id,
                          tbon_rank_t parent, tb_role_t role, bool alive,
                          uint32_t incarnation, uint16_t port);

/* Check loaded nodes (parents in range and alive, rank 0 the FE and a root,
 * dead nodes isolated, no other FE, no BE with children, no cycle) and compute
 * children, depths and heights. Returns 0 or fills err (TBON_EFORMAT). */
int tb_topology_load_finish(tb_topology_t *t, tbon_error_t *err);

#endif
