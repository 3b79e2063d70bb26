/* slurm.h - Slurm as a launcher (docs/cluster.md, "Slurm"): a topology over
 * the nodes of the allocation the front-end runs in, and each depth of the
 * tree started as ONE job step (srun) instead of one remote shell per
 * process.
 *
 * The tree: the front-end where it runs (a login node under salloc, the
 * first node under sbatch); on every node of the allocation one commnode,
 * parent of that node's back-ends (per_node of them); above those, as many
 * levels of commnodes of at most fanout children as it takes, each placed on
 * the first node of its group, so that every node's commnode has the same
 * depth. Ranks are breadth-first, so at every depth the processes of one
 * node have consecutive ranks and one parent: a step's task knows its rank
 * and its parent from its node's name and its local id, given one map per
 * step (--tbon-slurm-map, tb_slurm_map_find).
 *
 * The front-end starts depth 1 at once, and depth d+1 as soon as every
 * commnode of depth d listens (its TB_CTL_PORT came up): the map then names
 * each parent by its node's name and its port. */
#ifndef TB_SLURM_H
#define TB_SLURM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tbon/tbon.h>

#include "topo/topology.h"
#include "util/config.h"

/* The launcher argument that carries a step's map, and the separators of
 * the map: "NODE=RANK@HOST:PORT;NODE=RANK@HOST:PORT;..." */
#define TB_SLURM_MAP_ARG "--tbon-slurm-map"

/* The allocation's nodes, in Slurm's order: conf's SLURM_JOB_NODELIST (or
 * SLURM_NODELIST) expanded by `scontrol show hostnames`. *hosts is a
 * malloc'd array of malloc'd names. 0, or TBON_EINVAL (not inside an
 * allocation) / TBON_ELAUNCH (scontrol failed: its message) with err. */
int  tb_slurm_nodes(const tb_config_t *conf, char ***hosts, size_t *n, tbon_error_t *err);
void tb_slurm_free_nodes(char **hosts, size_t n);

/* Back-ends per node when the caller gives none: conf's
 * SLURM_NTASKS_PER_NODE, else the smallest count of its SLURM_TASKS_PER_NODE
 * ("4(x2),2"), else 1. */
unsigned tb_slurm_default_per_node(const tb_config_t *conf);

/* The topology described above. NULL with err for bad arguments (no nodes,
 * per_node 0, fanout < 2) or no memory. */
tb_topology_t *tb_slurm_topology(const char *fe_host, char *const *hosts, size_t n,
                                 unsigned per_node, unsigned fanout, tbon_error_t *err);

/* The deepest depth of t (its back-ends'). */
uint32_t tb_slurm_depth(const tb_topology_t *t);

/* The step of depth d (>= 1) of t: its nodes (comma-separated, for
 * --nodelist), the number of tasks on each, and its map. Every parent of
 * depth d-1 must have its port known; the FE (rank 0) is named fe_addr
 * (the address routed toward the nodes) instead of its host. 0, or
 * TBON_EINVAL (a depth with no process, or with different counts on two
 * nodes) / TBON_ENOMEM with err. The strings are malloc'd. */
int tb_slurm_step(const tb_topology_t *t, uint32_t d, const char *fe_addr, char **nodelist,
                  unsigned *per_node, size_t *nnodes, char **map, tbon_error_t *err);

/* A task's place in a step: from map, the entry of node (its
 * $SLURMD_NODENAME), rank = first + local_id, and the parent's host and
 * port. 0, or TBON_EINVAL with err (malformed map, node not in it). */
int tb_slurm_map_find(const char *map, const char *node, unsigned local_id, tbon_rank_t *rank,
                      char *host, size_t hostlen, uint16_t *port, tbon_error_t *err);

/* Start a step: `srun --overlap --input=all ... exe argv[1..] --tbon-slurm-map
 * MAP --tbon-session SESSION --tbon-timeout MS --tbon-secret-stdin`, the
 * secret on its stdin, its stderr into *stderr_pipe. conf's TBON_SRUN names
 * srun (default srun, found in its PATH). 0 with *pid, or TBON_ELAUNCH with
 * err. */
int tb_slurm_spawn(const tb_config_t *conf, const char *exe, const char *const *argv,
                   const char *nodelist, unsigned per_node, size_t nnodes, const char *map,
                   const char *session, const char *timeout_ms, const char *secret,
                   int *stderr_pipe, pid_t *pid, tbon_error_t *err);

#endif
