/* st_ptree.h - call-prefix trees whose nodes carry task sets: what tbon_stat
 * merges up the tree (docs/stat.md).
 *
 * A tree has a root (no frame) and one node per distinct call prefix: the
 * path from the root to a node is a sequence of frames, outermost first
 * ("_start", "__libc_start_main", "main", ...). Each node carries the set of
 * tasks (MPI-style ranks, uint32_t) whose sampled stack has that prefix; the
 * root's set is every task in the tree. Sets are kept as sorted, disjoint,
 * non-adjacent ranges, so 1,024 tasks in one call path cost one range.
 *
 * Merging is set union node by node: associative, commutative and
 * idempotent, as state composition needs (seed 003, IV-C).
 *
 * The binary form (st_tree_encode) is what travels in tbon packets; the
 * decoder checks everything (lengths, counts, range order, nesting depth)
 * and says what is wrong and at which byte offset. */
#ifndef TBON_ST_PTREE_H
#define TBON_ST_PTREE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct st_tree st_tree_t;

/* Limits, kept by st_tree_add and checked by st_tree_decode, so that every
 * tree the code builds also decodes: stacks of at most ST_MAX_DEPTH frames,
 * frames of at most ST_MAX_FRAME bytes (no NUL inside). */
#define ST_MAX_DEPTH 4096
#define ST_MAX_FRAME 65535

/* The binary form: "STPT", then this version byte (2: counts-only). */
#define ST_ENC_VERSION 1
#define ST_ENC_VERSION_COUNTS 2

/* st_tree_merge of counts-only trees that share some tasks, not all. */
#define ST_OVERLAP 1

/* A task range [lo, hi], lo <= hi. */
typedef struct st_range {
    uint32_t lo, hi;
} st_range_t;

st_tree_t *st_tree_new(void);
void st_tree_free(st_tree_t *t);

/* Add one sampled stack of task: frames[0] is the outermost frame, frames[n-1]
 * the innermost; every node on the path (and the root) gets task. n may be 0
 * (the task is only in the root's set). 0, or TBON_ENOMEM, or TBON_EINVAL
 * (tree unchanged) for a NULL frame, more than ST_MAX_DEPTH frames (deep
 * recursion: the caller cuts the stack) or a frame over ST_MAX_FRAME bytes. */
int st_tree_add(st_tree_t *t, const char *const *frames, size_t n, uint32_t task);

/* dst = dst U src. 0 or TBON_ENOMEM (dst may then hold part of src: still a
 * valid tree, a subset of the union).
 * Counts-only trees (an empty dst takes src's kind and round): the counts
 * add up when the two have no task in common (their roots' sets); when
 * every task of src is in dst already, nothing changes (a task's stacks
 * are sampled once, so they are the same); when they share some but not
 * all, ST_OVERLAP and dst unchanged. TBON_EINVAL for two kinds. */
int st_tree_merge(st_tree_t *dst, const st_tree_t *src);

/* Counts-only trees, for very large jobs (tbon_stat --counts-only): every
 * node but the root keeps how many tasks it has and the lowest of them (its
 * representative) instead of their set; the root keeps its set, so that
 * what is missing is known. round: which request of the front-end it
 * answers (its asks again count up). TBON_EINVAL if t is one already. */
int st_tree_to_counts(st_tree_t *t, uint32_t round);
int st_tree_is_counts(const st_tree_t *t);
/* a and b trade contents. */
void st_tree_swap(st_tree_t *a, st_tree_t *b);
uint32_t st_tree_round(const st_tree_t *t);

/* 1 if a and b have the same nodes with the same task sets. */
int st_tree_equal(const st_tree_t *a, const st_tree_t *b);

/* The binary form: *buf is malloc'ed. 0 or TBON_ENOMEM. */
int st_tree_encode(const st_tree_t *t, uint8_t **buf, size_t *len);
/* A tree from its binary form, or NULL with the reason in err ("at byte N:
 * ..."). Never reads outside buf[0..len). */
st_tree_t *st_tree_decode(const uint8_t *buf, size_t len, char *err, size_t errlen);

/* The root's task set: *ranges is malloc'ed (NULL when empty); returns the
 * number of ranges. tasks_count: the number of tasks in it. ranges may be
 * NULL (the count only); out of memory gives 0 ranges and a count of 0. */
size_t st_tree_tasks(const st_tree_t *t, st_range_t **ranges, uint64_t *tasks_count);

/* The deepest path holding task, frames outermost first: *frames is a
 * malloc'ed array of pointers into the tree (valid while it is unchanged);
 * returns its length, 0 if task is only in the root or absent (or out of
 * memory), *frames then NULL. With several deepest paths (threads, 3D
 * trees) the first in frame order. */
size_t st_tree_path(const st_tree_t *t, uint32_t task, const char ***frames);

/* Task sets as text: "4:[0-2,7]" (count, then the ranges). Writes at most
 * cap bytes with a NUL; returns the length it needed (as snprintf). */
size_t st_tree_label(const st_range_t *r, size_t nr, char *out, size_t cap);

/* Outputs. Edge labels are the task sets of the child nodes ("4:[0-2,7]").
 * The root is shown as "/"; frames are escaped as each format needs (any
 * bytes give valid DOT and JSON, and one text line per node). 0, or
 * TBON_EIO if writing failed (TBON_EINVAL for a NULL argument).
 * DOT: digraph "title" (NULL: "tbon_stat"), nodes n0 (the root), n1, ... in
 * pre-order labelled with their frames, an edge from each node's parent. */
int st_tree_write_dot(const st_tree_t *t, FILE *f, const char *title);
/* JSON, one line: {"frame":"/","tasks":"[0-7]","count":8,"children":[...]},
 * each child an object of the same form. */
int st_tree_write_json(const st_tree_t *t, FILE *f);
/* An indented text tree, one node per line, two spaces per level:
 * "/  8:[0-7]", then "  _start  8:[0-7]", ... "    main  4:[0-2,7]". */
int st_tree_write_text(const st_tree_t *t, FILE *f);
/* Folded stacks, as flame-graph tools read them: one line per node where
 * tasks end (a node holding them where no child does), its frames from
 * the root's child down joined by ';' (a ';' in a frame is written \x3b,
 * other bytes as in the text), a space, and how many tasks end there:
 * "_start;main;poll 3". In pre-order; the counts add up to the tasks'
 * ends (a task with threads ends once per distinct path). */
int st_tree_write_folded(const st_tree_t *t, FILE *f);
/* Equivalence classes (as STAT): the tasks grouped by the set of nodes they
 * end in (a node holding the task where no child does: a leaf of the task's
 * paths). One line per class, in order of representative:
 * "4:[0-2,7]  rep 0  poll | compute": its task set, its representative (its
 * lowest task) and the frames of the nodes it ends in, in pre-order. A task
 * with an empty stack ends in the root ("/"). Returns the number of classes,
 * or < 0 on an error. */
int st_tree_write_classes(const st_tree_t *t, FILE *f);

/* The same, each representative followed by its name in parentheses
 * ("rep 0 (n1:4242)") where name(arg, task) gives one (NULL: none). */
typedef const char *(*st_task_name_fn)(void *arg, uint32_t task);
int st_tree_write_classes_named(const st_tree_t *t, FILE *f, st_task_name_fn name, void *arg);

/* The same, with after(arg, rep)'s line (NULL: none) under each class,
 * indented by four spaces: tbon_stat --classes writes the command that
 * attaches a debugger to the representative there. */
int st_tree_write_classes_ex(const st_tree_t *t, FILE *f, st_task_name_fn name,
                             st_task_name_fn after, void *arg);

/* jansson values (NULL when out of memory): the tree as st_tree_write_json
 * writes it; its classes as an array, in order of representative, of
 * {"tasks": "[0-2,7]", "count": 4, "rep": 0, "ends": [5, 9]}, ends being
 * the pre-order numbers of the nodes the class ends in (the root is 0, a
 * node's children follow it in their JSON order). */
struct json_t;
struct json_t *st_tree_json(const st_tree_t *t);
struct json_t *st_tree_classes_json(const st_tree_t *t);

/* Number of nodes, root included. */
size_t st_tree_size(const st_tree_t *t);

#endif
