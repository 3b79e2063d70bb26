/* st_view.h - the page tbon_stat writes to explore its results in a
 * browser (<exe>.html, docs/stat.md "The viewer"). */
#ifndef TBON_ST_VIEW_H
#define TBON_ST_VIEW_H

#include <stdio.h>

#include <jansson.h>

/* Write the page with data (the run's tasks, trees and classes, as
 * docs/stat.md gives them) to f: the viewer's HTML, built into the
 * program, with data in place of its placeholder line. 0, or -1 when
 * writing failed. */
int st_view_write(FILE *f, const json_t *data);

#endif
