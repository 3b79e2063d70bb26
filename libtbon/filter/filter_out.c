/* filter_out.c - what a filter call hands back: the packets of its output
 * list and the message of its error (filter.h). Below the registry and the
 * built-in filters, which all use it.
 */
#include "filter/filter.h"
#include "util/hot.h"

#include "util/error.h"
#include "codec/packet_int.h"
#include "util/array.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* The message a running filter left with tb_filter_errorf (one per thread:
 * filters of different processes' threads never share it). */
static _Thread_local char filter_msg[400];

/* ---- the output list ---- */

void tb_plist_init(tbon_packet_list_t *l)
{
    l->v = NULL;
    l->n = l->cap = 0;
}

void tb_plist_clear(tbon_packet_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        tbon_packet_unref(l->v[i]);
    l->n = 0;
}

void tb_plist_free(tbon_packet_list_t *l)
{
    tb_plist_clear(l);
    free(l->v);
    tb_plist_init(l);
}

/* Release the packets from index keep on: a failed filter's partial output. */
void tb_plist_truncate(tbon_packet_list_t *l, size_t keep)
{
    while (l->n > keep)
        tbon_packet_unref(l->v[--l->n]);
}

TB_HOT int tbon_packet_list_push(tbon_packet_list_t *out, tbon_packet_t *p)
{
    if (!out || !p) {
        tbon_packet_unref(p);
        return TBON_EINVAL;
    }
    if (TB_ARRAY_ROOM(out->v, out->n, out->cap, 4)) {
        tbon_packet_unref(p);
        return TBON_ENOMEM;
    }
    out->v[out->n++] = p;
    return 0;
}

/* ---- filter error messages ---- */

const char *tb_filter_msg(void)
{
    return filter_msg;
}

void tb_filter_msg_clear(void)
{
    filter_msg[0] = '\0';
}

void tb_filter_verrorf(const char *fmt, va_list ap)
{
    vsnprintf(filter_msg, sizeof filter_msg, fmt, ap);
}

void tb_filter_errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tb_filter_verrorf(fmt, ap);
    va_end(ap);
}

void tbon_filter_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tb_filter_verrorf(fmt, ap);
    va_end(ap);
}

const char *tb_filter_rank_str(tbon_rank_t r, char buf[16])
{
    if (r == TBON_RANK_NONE)
        return "none";
    snprintf(buf, 16, "%u", (unsigned)r);
    return buf;
}

