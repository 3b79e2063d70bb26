/* field.c - one field of a packet: tbon_packet_unpack_field, a copy of a
 * field of any format, for a program that prints whatever comes
 * (tbon_frontend), through the public API (the field goes into a packet of
 * its own, which tbon_packet_vunpack copies out as it would the whole
 * packet's); and tbon_packet_bytes, a field of bytes read in place. */
#include <tbon/tbon.h>

#include <stdarg.h>

#include "codec/packet_int.h"
#include "util/error.h"

int tbon_packet_unpack_field(const tbon_packet_t *p, size_t i, const char *conv, ...)
{
    struct tb_field f;
    tbon_error_t err = { 0 };
    if (!p || !conv)
        return tb_tls_fail(TB_ON_PACKET, TBON_EINVAL, "tbon_packet_unpack_field: a NULL %s",
                           p ? "conversion" : "packet");
    if (tb_packet_get_field(p, i, &f) != 0)
        return tb_tls_fail(TB_ON_PACKET, TBON_EFORMAT, "tbon_packet_unpack_field: the packet "
                           "(format \"%.200s\") has no field %zu", tbon_packet_format(p), i);
    tbon_packet_t *one = tb_packet_build(tbon_packet_tag(p), &f, 1, &err);
    if (!one)
        return err.code ? err.code : TBON_ENOMEM;
    va_list ap;
    va_start(ap, conv);
    int rc = tbon_packet_vunpack(one, conv, ap);
    va_end(ap);
    tbon_packet_unref(one);
    return rc;
}

int tbon_packet_bytes(const tbon_packet_t *p, size_t i, const void **data, size_t *len)
{
    struct tb_field f;
    if (!p || !data || !len)
        return TBON_EINVAL;
    if (tb_packet_get_field(p, i, &f) != 0 ||
        (f.type != TB_F_AC && f.type != TB_F_AUC && f.type != TB_F_S))
        return TBON_EFORMAT;
    *data = f.count ? f.data : NULL;
    *len = f.count;
    return 0;
}
