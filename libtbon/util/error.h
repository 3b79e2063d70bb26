/* error.h - filling tbon_error_t, the one error convention of the library */
#ifndef TB_ERROR_H
#define TB_ERROR_H

#include <tbon/tbon.h>

#include <stdarg.h>
#include <stdint.h>

#include "util/hot.h"

/* Set err (which may be NULL) to code and a printf-formatted message.
 * Returns code, so callers can write `return tb_error_set(err, ...)`. */
int tb_error_set(tbon_error_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4))) TB_COLD;

/* Clear err (may be NULL) to TBON_OK and an empty message. */
void tb_error_clear(tbon_error_t *err);

/* The calling thread's last failure, what tbon_net_error(NULL) says: its
 * message, the network it was on (NULL: a call that had none, such as a
 * failed tbon_fe_create; TB_ON_PACKET: a packet's, such as
 * tbon_packet_unpack's) and its place in a process-wide order of failures
 * (tbon_net_error(net) says this thread's last packet failure when it came
 * after net's last failure). tb_tls_fail records one and returns code;
 * tb_tls_error gives the message, *net and *seq. */
#define TB_ON_PACKET ((const void *)1)   /* a failure of a packet call */
int tb_tls_fail(const void *net, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4))) TB_COLD;
int tb_tls_vfail(const void *net, int code, const char *fmt, va_list ap) TB_COLD;
const char *tb_tls_error(const void **net, uint64_t *seq);

#endif
