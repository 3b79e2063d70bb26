/* st_draw.h - the SVG drawings of a run's 2D and 3D trees (Graphviz dot). */
#ifndef ST_DRAW_H
#define ST_DRAW_H

#include <sys/types.h>

struct st_draw {
    const char *dir, *exe;     /* DIR/EXE.{2D,3D}.dot, written already */
    const char *keep;          /* a session's directory: its last drawings */
    pid_t pid;                 /* dot, while it draws; else -1 */
    int state;                 /* without a dot running: what finish says */
    int reused[2];             /* 2D, 3D copied from keep */
};

/* Start drawing DIR/EXE.{2D,3D}.svg from their .dot files: a drawing kept
 * in keep (NULL: none) for the same text is copied, the rest are drawn by
 * one dot, in the background. */
void st_draw_start(struct st_draw *d, const char *dir, const char *exe, const char *keep);

/* Wait for it: 0 both drawn, 1 no dot on the PATH, -1 dot failed. The new
 * drawings are kept in keep. */
int st_draw_finish(struct st_draw *d);

/* Remove the drawings kept in keep (a session's stop). */
void st_draw_forget(const char *keep);

#endif
