/* st_view.c - the viewer page: stat/view/stat_view.html, built into the
 * program (.incbin), written with the run's data as JSON in place of its
 * placeholder line. The JSON escapes '/' and writes '<' as \u003c, so no
 * "</script>" can end its script element early and no "<!--" followed by
 * "<script" (two frames are enough) can make the HTML parser swallow the
 * rest of the page into it. */
#include "st_view.h"

#include <stdlib.h>
#include <string.h>

/* The Makefile counts the template's placeholder lines. */
#ifndef ST_VIEW_FILE
#error "the Makefile gives the template's path: ST_VIEW_FILE"
#endif
#if !defined(ST_VIEW_CHECKED) || ST_VIEW_CHECKED != 1
#error "stat/view/stat_view.html must have exactly one line that is @STAT_DATA@"
#endif

/* The template's bytes, st_view_html[0..st_view_html_end). */
__asm__(".section .rodata\n"
        ".global st_view_html\n"
        ".type st_view_html, @object\n"
        "st_view_html:\n"
        ".incbin \"" ST_VIEW_FILE "\"\n"
        ".global st_view_html_end\n"
        "st_view_html_end:\n"
        ".byte 0\n"
        ".previous\n");
extern const char st_view_html[], st_view_html_end[];

#define PLACEHOLDER "@STAT_DATA@"

int st_view_write(FILE *f, const json_t *data)
{
    const char *t = st_view_html, *at = strstr(t, "\n" PLACEHOLDER "\n");
    if (!at)
        return -1;    /* (the build checked that the template has it) */
    at++;
    char *js = json_dumps(data, JSON_COMPACT | JSON_ESCAPE_SLASH);
    int bad = !js || fwrite(t, 1, (size_t)(at - t), f) != (size_t)(at - t);
    /* '<' is only ever inside a JSON string, where \u003c says the same */
    for (const char *p = js; !bad && *p;) {
        size_t k = strcspn(p, "<");
        bad = fwrite(p, 1, k, f) != k || (p[k] == '<' && fputs("\\u003c", f) < 0);
        p += k + (p[k] == '<');
    }
    free(js);
    if (bad)
        return -1;
    const char *rest = at + strlen(PLACEHOLDER);
    size_t n = (size_t)(st_view_html_end - rest);
    return fwrite(rest, 1, n, f) == n ? 0 : -1;
}
