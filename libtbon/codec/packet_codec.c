/* packet_codec.c - packets from wire payloads and from raw fields, and typed
 * field access (the encoding is described at the top of packet.c) */
#include "codec/packet_priv.h"
#include "util/hot.h"

#include "util/error.h"

#include <assert.h>
#include <stdlib.h>

TB_HOT const uint8_t *tb_packet_payload(const tbon_packet_t *p, size_t *len)
{
    *len = p->len;
    return p->payload;
}

/* Up to this many fields, decoding keeps the format's types on the stack. */
#define STACK_TYPES 64

/* Walk the values of n fields of the given types from buf + off up to
 * exactly buf + len. With offs NULL it validates untrusted bytes; otherwise
 * it records where each field starts (bytes known valid). Every count is
 * checked against the bytes that remain before it is used. */
TB_HOT static int walk(const uint8_t *buf, size_t len, size_t off, const uint8_t *types,
                size_t n, uint32_t *offs, tbon_error_t *err)
{
    for (size_t i = 0; i < n; i++) {
        enum tb_ftype t = (enum tb_ftype)types[i];
        size_t esz = tb_ftype_size[t], at = off, cnt;
        const char *name = tb_ftype_names[t];

        if (offs)
            offs[i] = (uint32_t)off;
        if (t < TB_F_S) {
            if (len - off < esz)
                return tb_error_set(err, TBON_EFORMAT,
                                    "packet payload: field %zu (%s) at byte %zu needs %zu "
                                    "bytes but %zu remain", i + 1, name, at, esz, len - off);
            off += esz;
            continue;
        }
        if (len - off < 4)
            return tb_error_set(err, TBON_EFORMAT,
                                "packet payload: field %zu (%s) at byte %zu: its 4-byte "
                                "count is cut off (%zu bytes remain)", i + 1, name, at,
                                len - off);
        cnt = tb_ld32(buf + off);
        off += 4;
        if (t != TB_F_AS) {
            if (cnt > (len - off) / esz)
                return tb_error_set(err, TBON_EFORMAT,
                                    "packet payload: field %zu (%s) at byte %zu claims %zu "
                                    "elements of %zu bytes but %zu bytes remain",
                                    i + 1, name, at, cnt, esz, len - off);
            off += cnt * esz;
            continue;
        }
        /* Every string takes at least its 4-byte length: a first bound that
         * rejects absurd counts before the loop. */
        if (cnt > (len - off) / 4)
            return tb_error_set(err, TBON_EFORMAT,
                                "packet payload: field %zu (%%as) at byte %zu claims %zu "
                                "strings but %zu bytes remain", i + 1, at, cnt, len - off);
        for (size_t k = 0; k < cnt; k++) {
            size_t sl;
            if (len - off < 4)
                return tb_error_set(err, TBON_EFORMAT,
                                    "packet payload: field %zu (%%as): the length of string "
                                    "%zu at byte %zu is cut off", i + 1, k, off);
            sl = tb_ld32(buf + off);
            if (sl > len - off - 4)
                return tb_error_set(err, TBON_EFORMAT,
                                    "packet payload: field %zu (%%as): string %zu at byte "
                                    "%zu claims %zu bytes but %zu remain",
                                    i + 1, k, off, sl, len - off - 4);
            off += 4 + sl;
        }
    }
    if (off != len)
        return tb_error_set(err, TBON_EFORMAT,
                            "packet payload: %zu bytes of junk after the last field, at "
                            "byte %zu", len - off, off);
    if (offs)
        offs[n] = (uint32_t)off;
    return 0;
}

/* Parse the strict format s[0..flen) into types (up to cap of them);
 * returns the number of fields, or -1 if it is not canonical (*bad is the
 * offending offset). */
static long parse_strict(const char *s, size_t flen, uint8_t *types, size_t cap,
                         size_t *bad)
{
    struct tb_fmt_iter it;
    size_t n = 0;
    int t;

    tb_fmt_init(&it, s, flen, 1);
    while ((t = tb_fmt_next(&it)) >= 0) {
        if (n < cap)
            types[n] = (uint8_t)t;
        n++;
    }
    *bad = it.pos;
    return t == TB_FMT_END ? (long)n : -1;
}

/* tb_packet_decode, and with take not NULL tb_packet_decode_take (buf is
 * then *take). */
TB_HOT static tbon_packet_t *decode(const void *buf, uint8_t **take, size_t len, int tag,
                             uint32_t stream, tbon_rank_t source, tbon_error_t *err)
{
    uint8_t stack_types[STACK_TYPES], *types = stack_types;
    const uint8_t *b = buf;
    tbon_packet_t *p = NULL;
    size_t flen, n, bad;
    long nf;

    if (len < 2 || !b) {
        tb_error_set(err, TBON_EFORMAT, "packet payload of %zu bytes is shorter than "
                     "its 2-byte format length", b ? len : 0);
        return NULL;
    }
    if (len > TB_PACKET_MAX_PAYLOAD) {
        tb_error_set(err, TBON_EFORMAT, "packet payload of %zu bytes is larger than "
                     "the limit of %u", len, TB_PACKET_MAX_PAYLOAD);
        return NULL;
    }
    flen = tb_ld16(b);
    if (flen > len - 2) {
        tb_error_set(err, TBON_EFORMAT, "packet payload: the format length %zu at byte 0 "
                     "runs past the end (%zu bytes follow)", flen, len - 2);
        return NULL;
    }
    /* The whole format first, so that its errors are named as such. */
    nf = parse_strict((const char *)b + 2, flen, types, STACK_TYPES, &bad);
    if (nf < 0) {
        tb_error_set(err, TBON_EFORMAT, "packet payload: the format (bytes 2 to %zu) is "
                     "not a canonical packet format: bad character at byte %zu",
                     1 + flen, 2 + bad);
        return NULL;
    }
    n = (size_t)nf;
    /* More types than the stack holds: their number is bounded by the
     * format's length (at most 65535 bytes), not by anything it claims. */
    if (n > STACK_TYPES) {
        if (!(types = malloc(n))) {
            tb_error_set(err, TBON_ENOMEM, "out of memory decoding a packet format");
            return NULL;
        }
        parse_strict((const char *)b + 2, flen, types, n, &bad);
    }
    if (walk(b, len, 2 + flen, types, n, NULL, err))
        goto out;
    p = take ? tb_packet_alloc_around(tag, n, flen, *take, len)
             : tb_packet_alloc(tag, n, flen, len);
    if (!p) {
        tb_error_set(err, TBON_ENOMEM, "out of memory for a packet of %zu bytes", len);
        goto out;
    }
    if (take)
        *take = NULL;
    else
        memcpy(p->payload, b, len);
    memcpy(p->types, types, n);
    int rc = walk(p->payload, len, 2 + flen, p->types, n, p->offs, NULL);
    assert(rc == 0);
    (void)rc;
    memcpy(p->format, b + 2, flen);
    p->format[flen] = '\0';
    p->stream = stream;
    p->source = source;
out:
    if (types != stack_types)
        free(types);
    return p;
}

tbon_packet_t *tb_packet_decode(const void *buf, size_t len, int tag, uint32_t stream,
                                tbon_rank_t source, tbon_error_t *err)
{
    return decode(buf, NULL, len, tag, stream, source, err);
}

tbon_packet_t *tb_packet_decode_take(uint8_t **buf, size_t len, int tag, uint32_t stream,
                                     tbon_rank_t source, tbon_error_t *err)
{
    return decode(*buf, buf, len, tag, stream, source, err);
}

size_t tb_packet_nfields(const tbon_packet_t *p)
{
    return p->nfields;
}

enum tb_ftype tb_packet_field_type(const tbon_packet_t *p, size_t i)
{
    assert(i < p->nfields);
    return (enum tb_ftype)p->types[i];
}

/* Whether a field of type t starts with a u32 count. */
static int counted(enum tb_ftype t)
{
    return t == TB_F_S || tb_ftype_is_array(t);
}

TB_HOT const uint8_t *tb_packet_field(const tbon_packet_t *p, size_t i, size_t *count)
{
    if (!p || i >= p->nfields) {
        if (count)
            *count = 0;
        return NULL;
    }
    const uint8_t *b = p->payload + p->offs[i];
    if (counted((enum tb_ftype)p->types[i])) {
        if (count)
            *count = tb_ld32(b);
        return b + 4;
    }
    if (count)
        *count = 1;
    return b;
}

int tb_packet_get_field(const tbon_packet_t *p, size_t i, struct tb_field *f)
{
    if (!p || i >= p->nfields)
        return TBON_EINVAL;
    f->type = (enum tb_ftype)p->types[i];
    f->data = tb_packet_field(p, i, &f->count);
    f->size = p->offs[i + 1] - p->offs[i] - (counted(f->type) ? 4 : 0);
    return 0;
}

/* Check one field given to tb_packet_build and add its encoded size to *len. */
static int check_field(const struct tb_field *f, size_t i, size_t *len,
                       tbon_error_t *err)
{
    size_t esz = tb_ftype_elem_size(f->type), room = TB_PACKET_MAX_PAYLOAD - *len;
    const char *name = tb_ftype_name(f->type);

    if ((unsigned)f->type >= TB_F_COUNT)
        return tb_error_set(err, TBON_EFORMAT, "packet field %zu has no type (%d)",
                            i + 1, (int)f->type);
    if (!f->data && f->size)
        return tb_error_set(err, TBON_EFORMAT, "packet field %zu (%s) has %zu bytes "
                            "at NULL", i + 1, name, f->size);
    if (!counted(f->type)) {
        if (f->count != 1 || f->size != esz)
            return tb_error_set(err, TBON_EFORMAT, "packet field %zu (%s) must have "
                                "count 1 and %zu bytes, not count %zu and %zu bytes",
                                i + 1, name, esz, f->count, f->size);
    } else if (f->count > UINT32_MAX) {
        return tb_error_set(err, TBON_EFORMAT, "packet field %zu (%s) has %zu elements; "
                            "the limit is %u", i + 1, name, f->count, UINT32_MAX);
    } else if (f->type != TB_F_AS) {
        if (f->size / esz != f->count || f->size % esz)
            return tb_error_set(err, TBON_EFORMAT, "packet field %zu (%s) has %zu "
                                "bytes for %zu elements of %zu bytes",
                                i + 1, name, f->size, f->count, esz);
    } else {
        size_t off = 0;
        for (size_t k = 0; k < f->count; k++) {
            if (f->size - off < 4 || tb_ld32(f->data + off) > f->size - off - 4)
                return tb_error_set(err, TBON_EFORMAT, "packet field %zu (%%as): "
                                    "string %zu at byte %zu runs past its %zu bytes",
                                    i + 1, k, off, f->size);
            off += 4 + tb_ld32(f->data + off);
        }
        if (off != f->size)
            return tb_error_set(err, TBON_EFORMAT, "packet field %zu (%%as): %zu bytes "
                                "left after its %zu strings", i + 1, f->size - off,
                                f->count);
    }
    size_t need = f->size + (counted(f->type) ? 4 : 0);
    if (f->size > room || need > room)
        return tb_error_set(err, TBON_EFORMAT, "packet field %zu (%s) makes the packet "
                            "larger than %u bytes", i + 1, name, TB_PACKET_MAX_PAYLOAD);
    *len += need;
    return 0;
}

TB_HOT tbon_packet_t *tb_packet_build(int tag, const struct tb_field *fields, size_t n,
                               tbon_error_t *err)
{
    size_t flen = n ? n - 1 : 0, len;
    tbon_packet_t *p;

    if (!fields && n) {
        tb_error_set(err, TBON_EINVAL, "%zu packet fields at NULL", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        flen += strlen(tb_ftype_name(fields[i].type));
        if (flen > TB_PACKET_MAX_FORMAT) {
            tb_error_set(err, TBON_EFORMAT, "a packet of %zu fields has a format "
                         "longer than %u characters", n, TB_PACKET_MAX_FORMAT);
            return NULL;
        }
    }
    len = 2 + flen;
    for (size_t i = 0; i < n; i++)
        if (check_field(&fields[i], i, &len, err))
            return NULL;
    if (!(p = tb_packet_alloc(tag, n, flen, len))) {
        tb_error_set(err, TBON_ENOMEM, "out of memory for a packet of %zu bytes", len);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        p->types[i] = (uint8_t)fields[i].type;
    size_t off = tb_packet_put_format(p, p->types, NULL, flen);
    for (size_t i = 0; i < n; i++) {
        p->offs[i] = (uint32_t)off;
        if (counted(fields[i].type)) {
            tb_st32(p->payload + off, (uint32_t)fields[i].count);
            off += 4;
        }
        if (fields[i].size)
            memcpy(p->payload + off, fields[i].data, fields[i].size);
        off += fields[i].size;
    }
    p->offs[n] = (uint32_t)off;
    assert(off == len);
    return p;
}
