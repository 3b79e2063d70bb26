/* st_out.h - tbon_stat's results (st_out.c): the files of a run and what
 * the terminal shows. */
#ifndef TBON_ST_OUT_H
#define TBON_ST_OUT_H

#include "st_cli.h"
#include "st_prog.h"
#include "st_ptree.h"

/* Make dir and its parents (mkdir -p), or die. */
void st_make_dirs(const char *dir);

/* DIR/<exe>.NNNN, the first that does not exist yet (created), or death. */
char *st_run_dir(const char *outdir, const char *exe);

/* The files of the run in dir (the trees, their classes, the tasks, the
 * figures); *svg: whether dot drew the trees (cleared when it did not). */
void st_write_results(const struct cli *c, struct run *r, const char *dir, st_tree_t *t2,
                      st_tree_t *t3, int *svg, size_t nbe, const struct sampled *o,
                      size_t missing, size_t failed);

/* What the user reads: the merged tree and its classes (unless -q), the
 * summary line, where the files are, what was not reached. */
void st_print_results(const struct cli *c, const struct run *r, const char *dir,
                      st_tree_t *t2, int svg, size_t nbe, double t_sample, size_t missing);

#endif
