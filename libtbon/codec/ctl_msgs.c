/* ctl_msgs.c - each control message's packet: one encoder and one decoder
 * per message of ctl.h. The formats are the wire format of before the typed
 * codec: packets built here are byte for byte what the call sites built with
 * literal formats (test_ctl checks each against them). Decoders refuse what
 * the table's format does not allow and name the message and the field. */
#include "codec/ctl.h"
#include "codec/ctl_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/packet_int.h"
#include "util/error.h"

/* ---- helpers ---- */

static int bad(tbon_error_t *err, int op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(tbon_error_t *err, int op, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tb_error_set(err, TBON_EFORMAT, "control message %s: %s", tb_ctl_name(op), what);
}

static uint32_t ld32(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* p has op's format and no string with a NUL byte in it (C strings would
 * cut it short, and the message would not say what it said). */
static int check_packet(const tbon_packet_t *p, int op, tbon_error_t *err)
{
    const tb_ctl_info_t *info = tb_ctl_info(op);
    if (!info)
        return tb_error_set(err, TBON_EFORMAT, "control message %d: no such op", op);
    if (!p)
        return bad(err, op, "no packet");
    if (!tb_packet_format_matches(p, info->format))
        return bad(err, op, "format \"%s\", expected \"%s\"", tbon_packet_format(p),
                   info->format);
    for (size_t i = 0; i < tb_packet_nfields(p); i++) {
        enum tb_ftype t = tb_packet_field_type(p, i);
        size_t count;
        const uint8_t *b = tb_packet_field(p, i, &count);
        if (t == TB_F_S && count && memchr(b, 0, count))
            return bad(err, op, "field %zu: a NUL byte in the string", i + 1);
        if (t == TB_F_AS) {
            /* The packet decoder checked the sequence's lengths. */
            for (size_t k = 0; k < count; k++) {
                size_t sl = ld32(b);
                if (sl && memchr(b + 4, 0, sl))
                    return bad(err, op, "field %zu: a NUL byte in string %zu", i + 1, k);
                b += 4 + sl;
            }
        }
    }
    return 0;
}

/* tbon_packet_unpack's result, the format being known to match. */
static int unpacked(int rc, int op, tbon_error_t *err)
{
    if (rc == TBON_ENOMEM)
        return tb_error_set(err, TBON_ENOMEM, "control message %s: out of memory",
                            tb_ctl_name(op));
    return rc ? bad(err, op, "cannot be unpacked (error %d)", rc) : 0;
}

/* Messages of one "%ud" field. */
static tbon_packet_t *enc_u32(int op, uint32_t v)
{
    return tbon_packet_new(op, "%ud", v);
}

static int dec_u32(const tbon_packet_t *p, int op, uint32_t *v, tbon_error_t *err)
{
    int rc = check_packet(p, op, err);
    return rc ? rc : unpacked(tbon_packet_unpack(p, "%ud", v), op, err);
}

/* ---- the messages ---- */

tbon_packet_t *tb_ctl_ready_encode(const tb_ctl_ready_t *m)
{
    return enc_u32(TB_CTL_READY, m->count);
}

int tb_ctl_ready_decode(const tbon_packet_t *p, tb_ctl_ready_t *m, tbon_error_t *err)
{
    return dec_u32(p, TB_CTL_READY, &m->count, err);
}

tbon_packet_t *tb_ctl_fail_encode(const tb_ctl_fail_t *m)
{
    return tbon_packet_new(TB_CTL_FAIL, "%d %s", m->code, m->msg);
}

int tb_ctl_fail_decode(const tbon_packet_t *p, tb_ctl_fail_t *m, tbon_error_t *err)
{
    char *msg = NULL;
    int rc = check_packet(p, TB_CTL_FAIL, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%d %s", &m->code, &msg), TB_CTL_FAIL, err);
    if (!rc)
        m->msg = msg;
    return rc;
}

static tbon_packet_t *stream_enc(int op, const tb_ctl_stream_t *s, uint64_t sent, uint64_t q)
{
    if (op == TB_CTL_GRAFT)
        return tbon_packet_new(op, "%ud %d %d %ud %d %aud %uld %uld", s->id, s->up, s->sync,
                               s->timeout_ms, s->down, s->members, s->nmembers, sent, q);
    return tbon_packet_new(op, "%ud %d %d %ud %d %aud", s->id, s->up, s->sync, s->timeout_ms,
                           s->down, s->members, s->nmembers);
}

static int stream_dec(const tbon_packet_t *p, int op, tb_ctl_stream_t *s, uint64_t *sent,
                      uint64_t *q, tbon_error_t *err)
{
    uint32_t *members = NULL;
    int rc = check_packet(p, op, err);
    if (rc)
        return rc;
    if (op == TB_CTL_GRAFT)
        rc = tbon_packet_unpack(p, "%ud %d %d %ud %d %aud %uld %uld", &s->id, &s->up, &s->sync,
                                &s->timeout_ms, &s->down, &members, &s->nmembers, sent, q);
    else
        rc = tbon_packet_unpack(p, "%ud %d %d %ud %d %aud", &s->id, &s->up, &s->sync,
                                &s->timeout_ms, &s->down, &members, &s->nmembers);
    if ((rc = unpacked(rc, op, err)) != 0)
        return rc;
    s->members = members;
    return 0;
}

tbon_packet_t *tb_ctl_stream_encode(const tb_ctl_stream_t *m)
{
    return stream_enc(TB_CTL_STREAM, m, 0, 0);
}

int tb_ctl_stream_decode(const tbon_packet_t *p, tb_ctl_stream_t *m, tbon_error_t *err)
{
    return stream_dec(p, TB_CTL_STREAM, m, NULL, NULL, err);
}

tbon_packet_t *tb_ctl_filter_encode(const tb_ctl_filter_t *m)
{
    return tbon_packet_new(TB_CTL_FILTER, "%d %s %s", m->id, m->path, m->func);
}

int tb_ctl_filter_decode(const tbon_packet_t *p, tb_ctl_filter_t *m, tbon_error_t *err)
{
    char *path = NULL, *func = NULL;
    int rc = check_packet(p, TB_CTL_FILTER, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%d %s %s", &m->id, &path, &func), TB_CTL_FILTER,
                      err);
    if (!rc) {
        m->path = path;
        m->func = func;
    }
    return rc;
}

tbon_packet_t *tb_ctl_params_encode(const tb_ctl_params_t *m)
{
    return tbon_packet_new(TB_CTL_PARAMS, "%ud %d %d %auc", m->stream, m->which, m->tag,
                           m->payload, m->len);
}

int tb_ctl_params_decode(const tbon_packet_t *p, tb_ctl_params_t *m, tbon_error_t *err)
{
    uint8_t *pl = NULL;
    int rc = check_packet(p, TB_CTL_PARAMS, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%ud %d %d %auc", &m->stream, &m->which, &m->tag,
                                         &pl, &m->len), TB_CTL_PARAMS, err);
    if (!rc)
        m->payload = pl;
    return rc;
}

tbon_packet_t *tb_ctl_shutdown_encode(const tb_ctl_shutdown_t *m)
{
    return enc_u32(TB_CTL_SHUTDOWN, m->unused);
}

int tb_ctl_shutdown_decode(const tbon_packet_t *p, tb_ctl_shutdown_t *m, tbon_error_t *err)
{
    return dec_u32(p, TB_CTL_SHUTDOWN, &m->unused, err);
}

tbon_packet_t *tb_ctl_stream_err_encode(const tb_ctl_stream_err_t *m)
{
    return tbon_packet_new(TB_CTL_STREAM_ERR, "%ud %s", m->stream, m->msg);
}

int tb_ctl_stream_err_decode(const tbon_packet_t *p, tb_ctl_stream_err_t *m, tbon_error_t *err)
{
    char *msg = NULL;
    int rc = check_packet(p, TB_CTL_STREAM_ERR, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%ud %s", &m->stream, &msg), TB_CTL_STREAM_ERR, err);
    if (!rc)
        m->msg = msg;
    return rc;
}

tbon_packet_t *tb_ctl_port_encode(const tb_ctl_port_t *m)
{
    return tbon_packet_new(TB_CTL_PORT, "%ud %ud", m->rank, m->port);
}

int tb_ctl_port_decode(const tbon_packet_t *p, tb_ctl_port_t *m, tbon_error_t *err)
{
    int rc = check_packet(p, TB_CTL_PORT, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%ud %ud", &m->rank, &m->port), TB_CTL_PORT, err);
    if (!rc && m->port > 65535)
        rc = bad(err, TB_CTL_PORT, "rank %u: port %u is over 65535", m->rank, m->port);
    return rc;
}

tbon_packet_t *tb_ctl_launch_encode(const tb_ctl_launch_t *m)
{
    return tbon_packet_new(TB_CTL_LAUNCH, "%s %as %s %s", m->backend_exe, m->argv, m->nargv,
                           m->rsh, m->commnode);
}

int tb_ctl_launch_decode(const tbon_packet_t *p, tb_ctl_launch_t *m, tbon_error_t *err)
{
    char *exe = NULL, *rsh = NULL, *cn = NULL;
    char **argv = NULL;
    int rc = check_packet(p, TB_CTL_LAUNCH, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%s %as %s %s", &exe, &argv, &m->nargv, &rsh, &cn),
                      TB_CTL_LAUNCH, err);
    if (!rc) {
        m->backend_exe = exe;
        m->argv = (const char *const *)argv;
        m->rsh = rsh;
        m->commnode = cn;
    }
    return rc;
}

tbon_packet_t *tb_ctl_ports_encode(const tb_ctl_ports_t *m)
{
    return tbon_packet_new(TB_CTL_PORTS, "%aud %aud %d", m->ranks, m->n, m->ports, m->n,
                           m->heartbeat_ms);
}

int tb_ctl_ports_decode(const tbon_packet_t *p, tb_ctl_ports_t *m, tbon_error_t *err)
{
    uint32_t *ranks = NULL, *ports = NULL;
    size_t nr = 0, np = 0;
    int rc = check_packet(p, TB_CTL_PORTS, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%aud %aud %d", &ranks, &nr, &ports, &np,
                                         &m->heartbeat_ms), TB_CTL_PORTS, err);
    if (!rc && nr != np)
        rc = bad(err, TB_CTL_PORTS, "%zu ranks but %zu ports", nr, np);
    for (size_t i = 0; !rc && i < np; i++)
        if (ports[i] > 65535)
            rc = bad(err, TB_CTL_PORTS, "entry %zu (rank %u): port %u is over 65535", i,
                     ranks[i], ports[i]);
    if (rc) {
        free(ranks);
        free(ports);
        return rc;
    }
    m->ranks = ranks;
    m->ports = ports;
    m->n = nr;
    return 0;
}

tbon_packet_t *tb_ctl_report_encode(const tb_ctl_report_t *m)
{
    return tbon_packet_new(TB_CTL_REPORT, "%d %ud %ud %ud %auld", m->kind, m->rank, m->parent,
                           m->inc, m->us, (size_t)TB_CTL_REPORT_US);
}

int tb_ctl_report_decode(const tbon_packet_t *p, tb_ctl_report_t *m, tbon_error_t *err)
{
    uint64_t *us = NULL;
    size_t nus = 0;
    int rc = check_packet(p, TB_CTL_REPORT, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%d %ud %ud %ud %auld", &m->kind, &m->rank,
                                         &m->parent, &m->inc, &us, &nus), TB_CTL_REPORT, err);
    if (!rc && m->kind != TB_V_FAILED && m->kind != TB_V_ADOPTED && m->kind != TB_V_JOINED &&
        m->kind != TB_V_LEFT)
        rc = bad(err, TB_CTL_REPORT, "kind %d is none of 1 (failed), 2 (adopted), 4 (joined), "
                 "5 (left)", m->kind);
    if (!rc && nus != TB_CTL_REPORT_US)
        rc = bad(err, TB_CTL_REPORT, "%zu recovery times, expected %d", nus, TB_CTL_REPORT_US);
    if (!rc)
        memcpy(m->us, us, sizeof m->us);
    free(us);
    return rc;
}

tbon_packet_t *tb_ctl_adopt_ack_encode(const tb_ctl_adopt_ack_t *m)
{
    return enc_u32(TB_CTL_ADOPT_ACK, m->ok);
}

int tb_ctl_adopt_ack_decode(const tbon_packet_t *p, tb_ctl_adopt_ack_t *m, tbon_error_t *err)
{
    return dec_u32(p, TB_CTL_ADOPT_ACK, &m->ok, err);
}

tbon_packet_t *tb_ctl_graft_encode(const tb_ctl_graft_t *m)
{
    return stream_enc(TB_CTL_GRAFT, &m->def, m->sent_key, m->last_q);
}

int tb_ctl_graft_decode(const tbon_packet_t *p, tb_ctl_graft_t *m, tbon_error_t *err)
{
    return stream_dec(p, TB_CTL_GRAFT, &m->def, &m->sent_key, &m->last_q, err);
}

tbon_packet_t *tb_ctl_view_encode(const tb_ctl_view_t *m)
{
    size_t k = m->n;
    int32_t *kinds = malloc((k ? k : 1) * sizeof *kinds);
    uint32_t *r = malloc((k ? k : 1) * 5 * sizeof *r);
    const char **hosts = malloc((k ? k : 1) * sizeof *hosts);
    tbon_packet_t *p = NULL;
    if (kinds && r && hosts) {
        for (size_t i = 0; i < k; i++) {
            kinds[i] = m->ch[i].kind;
            r[i] = m->ch[i].rank;
            r[k + i] = m->ch[i].parent;
            r[2 * k + i] = m->ch[i].inc;
            r[3 * k + i] = m->ch[i].lid;
            r[4 * k + i] = m->ch[i].port;
            hosts[i] = m->ch[i].host;
        }
        p = tbon_packet_new(TB_CTL_VIEW, "%uld %uld %ad %aud %aud %aud %as %aud %aud",
                            m->version, m->prev, kinds, k, r, k, r + k, k, r + 2 * k, k, hosts,
                            k, r + 3 * k, k, r + 4 * k, k);
    }
    free(kinds);
    free(r);
    free(hosts);
    return p;
}

int tb_ctl_view_decode(const tbon_packet_t *p, tb_ctl_view_t *m, tbon_error_t *err)
{
    int32_t *kinds = NULL;
    uint32_t *r = NULL, *par = NULL, *inc = NULL, *lid = NULL, *port = NULL;
    char **hosts = NULL;
    size_t nk = 0, nr = 0, np = 0, ni = 0, nh = 0, nl = 0, npo = 0;
    tb_vchange_t *ch = NULL;
    int rc = check_packet(p, TB_CTL_VIEW, err);
    if (rc)
        return rc;
    rc = unpacked(tbon_packet_unpack(p, "%uld %uld %ad %aud %aud %aud %as %aud %aud",
                                     &m->version, &m->prev, &kinds, &nk, &r, &nr, &par, &np,
                                     &inc, &ni, &hosts, &nh, &lid, &nl, &port, &npo),
                  TB_CTL_VIEW, err);
    if (rc)
        return rc;
    if (nr != nk || np != nk || ni != nk || nh != nk || nl != nk || npo != nk)
        rc = bad(err, TB_CTL_VIEW, "%zu kinds but %zu ranks, %zu parents, %zu incarnations, "
                 "%zu hosts, %zu local ids, %zu ports", nk, nr, np, ni, nh, nl, npo);
    else if (m->prev >= m->version)
        rc = bad(err, TB_CTL_VIEW, "version %llu follows version %llu",
                 (unsigned long long)m->version, (unsigned long long)m->prev);
    for (size_t i = 0; !rc && i < nk; i++) {
        if (kinds[i] < TB_V_FAILED || kinds[i] > TB_V_JOIN_CN)
            rc = bad(err, TB_CTL_VIEW, "change %zu: kind %d is not 1-6", i, kinds[i]);
        else if (port[i] > 65535)
            rc = bad(err, TB_CTL_VIEW, "change %zu: port %u is over 65535", i, port[i]);
        else if (strlen(hosts[i]) > TB_TOPOLOGY_MAX_HOST)
            rc = bad(err, TB_CTL_VIEW, "change %zu: a host name of %zu bytes (at most %u)", i,
                     strlen(hosts[i]), TB_TOPOLOGY_MAX_HOST);
    }
    if (!rc && !(ch = calloc(nk ? nk : 1, sizeof *ch)))
        rc = tb_error_set(err, TBON_ENOMEM, "control message VIEW: out of memory");
    for (size_t i = 0; !rc && i < nk; i++) {
        ch[i] = (tb_vchange_t){ kinds[i], r[i], par[i], inc[i], lid[i], "", port[i] };
        memcpy(ch[i].host, hosts[i], strlen(hosts[i]) + 1);
    }
    free(kinds);
    free(r);
    free(par);
    free(inc);
    free(lid);
    free(port);
    tb_ctl_free_strv(hosts, nh);
    if (!rc) {
        m->ch = ch;
        m->n = nk;
    }
    return rc;
}

tbon_packet_t *tb_ctl_view_ack_encode(const tb_ctl_view_ack_t *m)
{
    return tbon_packet_new(TB_CTL_VIEW_ACK, "%uld %uld %d", m->applied, m->sub, m->want);
}

int tb_ctl_view_ack_decode(const tbon_packet_t *p, tb_ctl_view_ack_t *m, tbon_error_t *err)
{
    int rc = check_packet(p, TB_CTL_VIEW_ACK, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%uld %uld %d", &m->applied, &m->sub, &m->want),
                      TB_CTL_VIEW_ACK, err);
    if (!rc && m->sub > m->applied)
        rc = bad(err, TB_CTL_VIEW_ACK, "the subtree has version %llu, beyond the %llu applied "
                 "here", (unsigned long long)m->sub, (unsigned long long)m->applied);
    if (!rc && m->want != 0 && m->want != 1)
        rc = bad(err, TB_CTL_VIEW_ACK, "want is %d, not 0 or 1", m->want);
    return rc;
}

tbon_packet_t *tb_ctl_check_encode(const tb_ctl_check_t *m)
{
    return tbon_packet_new(TB_CTL_CHECK, "%uld %uld %uld", m->id, m->version, m->digest);
}

int tb_ctl_check_decode(const tbon_packet_t *p, tb_ctl_check_t *m, tbon_error_t *err)
{
    int rc = check_packet(p, TB_CTL_CHECK, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%uld %uld %uld", &m->id, &m->version, &m->digest),
                      TB_CTL_CHECK, err);
    if (!rc && !m->id)
        rc = bad(err, TB_CTL_CHECK, "check id 0");
    return rc;
}

tbon_packet_t *tb_ctl_checked_encode(const tb_ctl_checked_t *m)
{
    return tbon_packet_new(TB_CTL_CHECKED, "%uld %aud %aud", m->id, m->agree, m->nagree, m->bad,
                           m->nbad);
}

int tb_ctl_checked_decode(const tbon_packet_t *p, tb_ctl_checked_t *m, tbon_error_t *err)
{
    uint32_t *a = NULL, *b = NULL;
    int rc = check_packet(p, TB_CTL_CHECKED, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%uld %aud %aud", &m->id, &a, &m->nagree, &b,
                                         &m->nbad), TB_CTL_CHECKED, err);
    if (!rc) {
        m->agree = a;
        m->bad = b;
    }
    return rc;
}

tbon_packet_t *tb_ctl_attr_encode(const tb_ctl_attr_t *m)
{
    return tbon_packet_new(TB_CTL_ATTR, "%ud %as %as %auc %auld", m->src, m->keys, m->n,
                           m->values, m->n, m->dead, m->n, m->versions, m->n);
}

int tb_ctl_attr_decode(const tbon_packet_t *p, tb_ctl_attr_t *m, tbon_error_t *err)
{
    char **keys = NULL, **vals = NULL;
    uint8_t *dead = NULL;
    uint64_t *ver = NULL;
    size_t nk = 0, nv = 0, nd = 0, nr = 0;
    int rc = check_packet(p, TB_CTL_ATTR, err);
    if (rc)
        return rc;
    rc = unpacked(tbon_packet_unpack(p, "%ud %as %as %auc %auld", &m->src, &keys, &nk, &vals,
                                     &nv, &dead, &nd, &ver, &nr), TB_CTL_ATTR, err);
    if (rc)
        return rc;
    if (nv != nk || nd != nk || nr != nk)
        rc = bad(err, TB_CTL_ATTR, "%zu keys but %zu values, %zu tombstone flags, %zu versions",
                 nk, nv, nd, nr);
    for (size_t i = 0; !rc && i < nk; i++)
        if (dead[i] > 1)
            rc = bad(err, TB_CTL_ATTR, "entry %zu: tombstone flag %u is not 0 or 1", i,
                     dead[i]);
    if (rc) {
        tb_ctl_free_strv(keys, nk);
        tb_ctl_free_strv(vals, nv);
        free(dead);
        free(ver);
        return rc;
    }
    m->keys = (const char *const *)keys;
    m->values = (const char *const *)vals;
    m->dead = dead;
    m->versions = ver;
    m->n = nk;
    return 0;
}

tbon_packet_t *tb_ctl_attr_sync_encode(const tb_ctl_attr_sync_t *m)
{
    return enc_u32(TB_CTL_ATTR_SYNC, m->unused);
}

int tb_ctl_attr_sync_decode(const tbon_packet_t *p, tb_ctl_attr_sync_t *m, tbon_error_t *err)
{
    return dec_u32(p, TB_CTL_ATTR_SYNC, &m->unused, err);
}

tbon_packet_t *tb_ctl_join_ack_encode(const tb_ctl_join_ack_t *m)
{
    return tbon_packet_new(TB_CTL_JOIN_ACK, "%ud %ud %s %ud %ud", m->rank, m->parent, m->host,
                           m->port, m->inc);
}

int tb_ctl_join_ack_decode(const tbon_packet_t *p, tb_ctl_join_ack_t *m, tbon_error_t *err)
{
    char *host = NULL;
    int rc = check_packet(p, TB_CTL_JOIN_ACK, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%ud %ud %s %ud %ud", &m->rank, &m->parent, &host,
                                         &m->port, &m->inc), TB_CTL_JOIN_ACK, err);
    if (rc)
        return rc;
    if (m->port == 0 || m->port > 65535)
        rc = bad(err, TB_CTL_JOIN_ACK, "the parent's port %u is not 1-65535", m->port);
    else if (strlen(host) > TB_TOPOLOGY_MAX_HOST)
        rc = bad(err, TB_CTL_JOIN_ACK, "a host name of %zu bytes (at most %u)", strlen(host),
                 TB_TOPOLOGY_MAX_HOST);
    if (rc)
        free(host);
    else
        m->host = host;
    return rc;
}

tbon_packet_t *tb_ctl_leave_encode(const tb_ctl_leave_t *m)
{
    return enc_u32(TB_CTL_LEAVE, m->unused);
}

int tb_ctl_leave_decode(const tbon_packet_t *p, tb_ctl_leave_t *m, tbon_error_t *err)
{
    return dec_u32(p, TB_CTL_LEAVE, &m->unused, err);
}

tbon_packet_t *tb_ctl_stream_end_encode(const tb_ctl_stream_end_t *m)
{
    return enc_u32(TB_CTL_STREAM_END, m->stream);
}

int tb_ctl_stream_end_decode(const tbon_packet_t *p, tb_ctl_stream_end_t *m, tbon_error_t *err)
{
    return dec_u32(p, TB_CTL_STREAM_END, &m->stream, err);
}

tbon_packet_t *tb_ctl_ping_encode(const tb_ctl_ping_t *m)
{
    return tbon_packet_new(TB_CTL_PING, "%ud %ud %uld %ud %aud", m->origin, m->target, m->id,
                           m->flags, m->route, m->nroute);
}

int tb_ctl_ping_decode(const tbon_packet_t *p, tb_ctl_ping_t *m, tbon_error_t *err)
{
    uint32_t *route = NULL;
    int rc = check_packet(p, TB_CTL_PING, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%ud %ud %uld %ud %aud", &m->origin, &m->target,
                                         &m->id, &m->flags, &route, &m->nroute),
                      TB_CTL_PING, err);
    if (!rc && (m->flags & ~TB_PING_PONG))
        rc = bad(err, TB_CTL_PING, "field 4: unknown flags 0x%x", m->flags);
    if (!rc && (m->nroute == 0 || route[0] != m->origin))
        rc = bad(err, TB_CTL_PING, "field 5: the route does not start at the origin");
    if (rc) {
        free(route);
        m->route = NULL;
        return rc;
    }
    m->route = route;
    return 0;
}

tbon_packet_t *tb_ctl_perf_encode(const tb_ctl_perf_t *m)
{
    return tbon_packet_new(TB_CTL_PERF, "%uld %ud", m->id, m->wait_ms);
}

int tb_ctl_perf_decode(const tbon_packet_t *p, tb_ctl_perf_t *m, tbon_error_t *err)
{
    int rc = check_packet(p, TB_CTL_PERF, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%uld %ud", &m->id, &m->wait_ms), TB_CTL_PERF, err);
    if (!rc && !m->id)
        rc = bad(err, TB_CTL_PERF, "field 1: gathering id 0");
    return rc;
}

tbon_packet_t *tb_ctl_perf_data_encode(const tb_ctl_perf_data_t *m)
{
    return tbon_packet_new(TB_CTL_PERF_DATA, "%uld %ud %ud %auld %auld", m->id, m->nw, m->sw,
                           m->node, m->nnode, m->strm, m->nstrm);
}

int tb_ctl_perf_data_decode(const tbon_packet_t *p, tb_ctl_perf_data_t *m, tbon_error_t *err)
{
    uint64_t *node = NULL, *strm = NULL;
    int rc = check_packet(p, TB_CTL_PERF_DATA, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%uld %ud %ud %auld %auld", &m->id, &m->nw, &m->sw,
                                         &node, &m->nnode, &strm, &m->nstrm),
                      TB_CTL_PERF_DATA, err);
    if (!rc && m->nw < TB_PERF_NW)
        rc = bad(err, TB_CTL_PERF_DATA, "field 2: %u fields per node record (at least %d)",
                 m->nw, TB_PERF_NW);
    else if (!rc && m->sw < TB_PERF_SW)
        rc = bad(err, TB_CTL_PERF_DATA, "field 3: %u fields per stream record (at least %d)",
                 m->sw, TB_PERF_SW);
    else if (!rc && m->nnode % m->nw)
        rc = bad(err, TB_CTL_PERF_DATA, "field 4: %zu values, not whole records of %u",
                 m->nnode, m->nw);
    else if (!rc && m->nstrm % m->sw)
        rc = bad(err, TB_CTL_PERF_DATA, "field 5: %zu values, not whole records of %u",
                 m->nstrm, m->sw);
    if (rc) {
        free(node);
        free(strm);
        m->node = m->strm = NULL;
        return rc;
    }
    m->node = node;
    m->strm = strm;
    return 0;
}

tbon_packet_t *tb_ctl_stable_encode(const tb_ctl_stable_t *m)
{
    return tbon_packet_new(TB_CTL_STABLE, "%uld", m->version);
}

int tb_ctl_stable_decode(const tbon_packet_t *p, tb_ctl_stable_t *m, tbon_error_t *err)
{
    int rc = check_packet(p, TB_CTL_STABLE, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%uld", &m->version), TB_CTL_STABLE, err);
    if (!rc && m->version == 0)
        rc = bad(err, TB_CTL_STABLE, "field 1: view version 0");
    return rc;
}

tbon_packet_t *tb_ctl_done_encode(const tb_ctl_done_t *m)
{
    return tbon_packet_new(TB_CTL_DONE, "%ud %uld", m->stream, m->key);
}

int tb_ctl_done_decode(const tbon_packet_t *p, tb_ctl_done_t *m, tbon_error_t *err)
{
    int rc = check_packet(p, TB_CTL_DONE, err);
    return rc ? rc : unpacked(tbon_packet_unpack(p, "%ud %uld", &m->stream, &m->key),
                              TB_CTL_DONE, err);
}

tbon_packet_t *tb_ctl_catch_up_encode(const tb_ctl_catch_up_t *m)
{
    return tbon_packet_new(TB_CTL_CATCH_UP, "%ud %d", m->filters, m->ports);
}

int tb_ctl_catch_up_decode(const tbon_packet_t *p, tb_ctl_catch_up_t *m, tbon_error_t *err)
{
    int rc = check_packet(p, TB_CTL_CATCH_UP, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%ud %d", &m->filters, &m->ports), TB_CTL_CATCH_UP,
                      err);
    if (!rc && (m->ports < 0 || m->ports > 1))
        rc = bad(err, TB_CTL_CATCH_UP, "field 2: the port table flag %d is not 0 or 1",
                 m->ports);
    return rc;
}

tbon_packet_t *tb_ctl_missing_encode(const tb_ctl_missing_t *m)
{
    return tbon_packet_new(TB_CTL_MISSING, "%d %ud %ud %s %aud", m->code, m->rank, m->parent,
                           m->msg, m->moved, m->nmoved);
}

int tb_ctl_missing_decode(const tbon_packet_t *p, tb_ctl_missing_t *m, tbon_error_t *err)
{
    char *msg = NULL;
    uint32_t *moved = NULL;
    int rc = check_packet(p, TB_CTL_MISSING, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%d %ud %ud %s %aud", &m->code, &m->rank,
                                         &m->parent, &msg, &moved, &m->nmoved),
                      TB_CTL_MISSING, err);
    if (!rc) {
        m->msg = msg;
        m->moved = moved;
    }
    return rc;
}

tbon_packet_t *tb_ctl_filter_fault_encode(const tb_ctl_filter_fault_t *m)
{
    return tbon_packet_new(TB_CTL_FILTER_FAULT, "%ud %d %ud %d %uld %aud %s", m->stream, m->filter,
                           m->rank, m->sig, m->key, m->sources, m->nsources, m->msg);
}

int tb_ctl_filter_fault_decode(const tbon_packet_t *p, tb_ctl_filter_fault_t *m,
                               tbon_error_t *err)
{
    char *msg = NULL;
    uint32_t *src = NULL;
    int rc = check_packet(p, TB_CTL_FILTER_FAULT, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, "%ud %d %ud %d %uld %aud %s", &m->stream, &m->filter,
                                         &m->rank, &m->sig, &m->key, &src, &m->nsources, &msg),
                      TB_CTL_FILTER_FAULT, err);
    if (!rc && (m->sig < -1 || m->sig > 64)) {
        free(src);
        free(msg);
        rc = tb_error_set(err, TBON_EFORMAT, "control message FILTER_FAULT: signal %d is out of "
                          "range (-1-64)", (int)m->sig);
    }
    if (!rc) {
        m->msg = msg;
        m->sources = src;
    }
    return rc;
}

#define DIRECT_FMT "%ud %ud %uld %d %ud %ud %aud %aud %auc"

tbon_packet_t *tb_ctl_direct_encode(const tb_ctl_direct_t *m)
{
    return tbon_packet_new(TB_CTL_DIRECT, DIRECT_FMT, m->src, m->nonce, m->seq, m->tag, m->flags,
                           m->bseq, m->dst, m->ndst, m->dseq, m->ndst, m->body, m->len);
}

/* What is wrong with decoded message m (a field and why), or NULL. */
static const char *direct_wrong(const tb_ctl_direct_t *m, size_t nseq, char *buf, size_t len)
{
    int ack = !!(m->flags & TB_DIRECT_ACK), bc = !!(m->flags & TB_DIRECT_BCAST);
    if (m->flags & ~(TB_DIRECT_BCAST | TB_DIRECT_ACK | TB_DIRECT_GAP))
        snprintf(buf, len, "field 5: unknown flags 0x%x", m->flags);
    else if ((m->flags & TB_DIRECT_GAP) && !ack)
        snprintf(buf, len, "field 5: a gap is told by an acknowledgement only");
    else if (ack && bc)
        snprintf(buf, len, "field 5: an acknowledgement is no broadcast");
    else if (nseq != m->ndst)
        snprintf(buf, len, "field 8: %zu numbers for %zu destinations", nseq, m->ndst);
    else if (!bc && m->ndst == 0)
        snprintf(buf, len, "field 7: no destination");
    else if (ack && (m->ndst != 1 || m->len))
        snprintf(buf, len, "field 7: an acknowledgement goes to one sender, with no body");
    else if (!ack && m->seq == 0)
        snprintf(buf, len, "field 3: the message number is 0");
    else if (bc && m->bseq == 0)
        snprintf(buf, len, "field 6: the broadcast number is 0");
    else
        return NULL;
    return buf;
}

int tb_ctl_direct_decode(const tbon_packet_t *p, tb_ctl_direct_t *m, tbon_error_t *err)
{
    uint32_t *dst = NULL, *dseq = NULL;
    uint8_t *body = NULL;
    size_t nseq = 0;
    char why[96];
    const char *w = NULL;
    int rc = check_packet(p, TB_CTL_DIRECT, err);
    if (!rc)
        rc = unpacked(tbon_packet_unpack(p, DIRECT_FMT, &m->src, &m->nonce, &m->seq, &m->tag,
                                         &m->flags, &m->bseq, &dst, &m->ndst, &dseq, &nseq,
                                         &body, &m->len),
                      TB_CTL_DIRECT, err);
    if (!rc && !(m->flags & TB_DIRECT_ACK))
        for (size_t i = 0; i < m->ndst && !(m->flags & TB_DIRECT_BCAST) && !w; i++)
            if (i < nseq && dseq[i] == 0)
                w = "field 8: a destination's number is 0";
    if (!rc && (w || (w = direct_wrong(m, nseq, why, sizeof why))))
        rc = bad(err, TB_CTL_DIRECT, "%s", w);
    if (rc) {
        free(dst);
        free(dseq);
        free(body);
        m->dst = m->dseq = NULL;
        m->body = NULL;
        return rc;
    }
    m->dst = dst;
    m->dseq = dseq;
    m->body = body;
    return 0;
}
