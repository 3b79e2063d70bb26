/* error.h - filling tbon_error_t, the one error convention of the library */
#ifndef TB_ERROR_H
#define TB_ERROR_H

#include <tbon/tbon.h>

#include "util/hot.h"

/* Set err (which may be NULL) to code and a printf-formatted message.
 * Returns code, so callers can write `return tb_error_set(err, ...)`. */
int tb_error_set(tbon_error_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4))) TB_COLD;

/* Clear err (may be NULL) to TBON_OK and an empty message. */
void tb_error_clear(tbon_error_t *err);

#endif
