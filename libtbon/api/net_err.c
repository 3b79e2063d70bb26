/* net_err.c - a network's errors: what a failed call records (for
 * tbon_net_error(net), from any thread, and for tbon_net_error(NULL), the
 * calling thread's), and tbon_net_error itself. Calls nothing of the API:
 * every other file of it calls here. */
#include "api/net_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

static __thread char tls_copy[512];     /* tbon_net_error(net)'s answer */

int tb_net_seterr(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tb_tls_vfail(NULL, code, fmt, ap);
    va_end(ap);
    return code;
}

int tb_net_fail(tbon_net_t *net, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tb_tls_vfail(net, code, fmt, ap);
    va_end(ap);
    if (net) {
        uint64_t seq;
        const char *msg = tb_tls_error(NULL, &seq);
        pthread_mutex_lock(&net->errmu);
        snprintf(net->last_error, sizeof net->last_error, "%s", msg);
        net->last_seq = seq;
        pthread_mutex_unlock(&net->errmu);
    }
    return code;
}

/* net's last failure; or this thread's, if it came later on no network (a
 * packet's unpack: the application asks net what went wrong with what net
 * gave it). */
const char *tbon_net_error(const tbon_net_t *net)
{
    const void *on;
    uint64_t seq;
    const char *mine = tb_tls_error(&on, &seq);
    if (!net)
        return mine;
    tbon_net_t *n = (tbon_net_t *)net;      /* the lock, not the net, changes */
    pthread_mutex_lock(&n->errmu);
    if (on == TB_ON_PACKET && seq > n->last_seq)
        snprintf(tls_copy, sizeof tls_copy, "%s", mine);
    else
        memcpy(tls_copy, n->last_error, sizeof tls_copy);
    pthread_mutex_unlock(&n->errmu);
    return tls_copy;
}
