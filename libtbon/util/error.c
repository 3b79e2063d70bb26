/* error.c - error codes, their descriptions and tbon_error_t filling */
#include "util/error.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

const char *tbon_strerror(int code)
{
    switch (code) {
    case TBON_OK:        return "success";
    case TBON_EINVAL:    return "invalid argument";
    case TBON_ENOMEM:    return "out of memory";
    case TBON_ETIMEOUT:  return "timed out";
    case TBON_ECLOSED:   return "network closed";
    case TBON_EFORMAT:   return "format mismatch or malformed data";
    case TBON_ETOPOLOGY: return "invalid topology";
    case TBON_ELAUNCH:   return "launch failed";
    case TBON_EFILTER:   return "filter error";
    case TBON_EIO:       return "I/O error";
    case TBON_EAUTH:     return "authentication failed";
    case TBON_ENOTFOUND: return "not found";
    case TBON_ELOST:     return "a wave was lost with failed nodes";
    case TBON_ETOOBIG:   return "packet too large";
    case TBON_EBUSY:     return "taken by another front-end";
    default:             return "unknown error";
    }
}

int tb_error_set(tbon_error_t *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void tb_error_clear(tbon_error_t *err)
{
    if (err) {
        err->code = TBON_OK;
        err->msg[0] = '\0';
    }
}

static _Atomic uint64_t fail_seq;
static __thread struct {
    char msg[512];
    const void *net;
    uint64_t seq;
} tls_fail;

int tb_tls_vfail(const void *net, int code, const char *fmt, va_list ap)
{
    vsnprintf(tls_fail.msg, sizeof tls_fail.msg, fmt, ap);
    tls_fail.net = net;
    tls_fail.seq = atomic_fetch_add(&fail_seq, 1) + 1;
    return code;
}

int tb_tls_fail(const void *net, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tb_tls_vfail(net, code, fmt, ap);
    va_end(ap);
    return code;
}

const char *tb_tls_error(const void **net, uint64_t *seq)
{
    if (net)
        *net = tls_fail.net;
    if (seq)
        *seq = tls_fail.seq;
    return tls_fail.msg;
}
