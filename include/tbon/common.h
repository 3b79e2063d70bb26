/* common.h - ranks, error codes and the error record every tbon header uses */
#ifndef TBON_COMMON_H
#define TBON_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t tbon_rank_t;
#define TBON_RANK_NONE     UINT32_MAX
#define TBON_FIRST_APP_TAG 100          /* tags below are reserved */

enum {                                   /* every call returns 0 or one of these */
    TBON_OK = 0, TBON_EINVAL = -1, TBON_ENOMEM = -2, TBON_ETIMEOUT = -3,
    TBON_ECLOSED = -4, TBON_EFORMAT = -5, TBON_ETOPOLOGY = -6, TBON_ELAUNCH = -7,
    TBON_EFILTER = -8, TBON_EIO = -9, TBON_EAUTH = -10, TBON_ENOTFOUND = -11,
    /* A code beyond the base set (docs/api.md): a receive at the FE in place of a wave
     * that was lost whole with failed nodes (docs/fault-tolerance.md). */
    TBON_ELOST = -12,
    /* A packet larger than a link carries (tbon_stream_send, docs/user-guide.md,
     * "Packets"). */
    TBON_ETOOBIG = -13,
    /* tbon_fe_reattach: the session has a front-end, or another one is
     * reattaching (docs/user-guide.md, "Sessions"). */
    TBON_EBUSY = -14,
};

/* A short English description of a TBON_E* code ("unknown error" otherwise).
 * The string is static; any thread may call it. */
const char *tbon_strerror(int code);

/* Filled by constructors and parsers that fail: the code and a sentence naming
 * what went wrong and where (file:line:col, rank, peer). */
typedef struct tbon_error { int code; char msg[512]; } tbon_error_t;

#ifdef __cplusplus
}
#endif

#endif
