/* packet.c - tbon packets: creation from varargs, sharing, getters
 *
 * A packet is one allocation (see struct tbon_packet in packet_priv.h) that
 * holds its encoded payload, so sending one is zero-copy and forwarding one
 * is a reference count increment. Unpacking is in packet_unpack.c, decoding,
 * field access and building from raw fields in packet_codec.c, formats in
 * packet_fmt.c.
 *
 * Payload encoding - the data of a wire data frame; integers little-endian:
 *   u16          F, the length of the format
 *   F bytes      the canonical format: conversions separated by single
 *                spaces, no other whitespace, no NUL ("" for no fields)
 *   then each field in order:
 *     %c %uc     1 byte          %hd %uhd   2 bytes
 *     %d %ud     4 bytes         %ld %uld   8 bytes
 *     %f         4 bytes, the IEEE-754 binary32 bit pattern
 *     %lf        8 bytes, the IEEE-754 binary64 bit pattern
 *     %s         u32 length, then that many bytes (no NUL)
 *     %aX        u32 count, then count elements encoded as X
 *     %as        u32 count, then count times (u32 length, bytes)
 * Nothing follows the last field. The decoder (packet_codec.c) accepts only
 * this exact form, so a packet has exactly one encoding.
 */
#include "util/bigmem.h"
#include "util/hot.h"
#include "util/crc32c.h"
#include "codec/packet_priv.h"

#include "util/error.h"

#include <assert.h>
#include <stdlib.h>

/* Formats of up to this many conversions compile into a stack buffer, so
 * tbon_packet_new costs a single malloc for them. */
#define STACK_FIELDS 32

TB_HOT tbon_packet_t *tb_packet_alloc(int tag, size_t nfields, size_t flen, size_t len)
{
    size_t offs = (nfields + 1) * sizeof(uint32_t);
    size_t fixed = sizeof(tbon_packet_t) + offs + nfields + flen + 1;
    /* Only a 32-bit host could overflow here (len may be 4 GiB). */
    if (len > SIZE_MAX - fixed)
        return NULL;
    tbon_packet_t *p = tb_big_alloc(fixed + len);
    if (!p)
        return NULL;
    atomic_init(&p->refs, 1u);
    atomic_init(&p->crc_known, 0u);
    atomic_init(&p->crc, 0u);
    p->tag = tag;
    p->stream = 0;
    p->source = TBON_RANK_NONE;
    p->nfields = (uint32_t)nfields;
    p->len = (uint32_t)len;
    p->payload = (uint8_t *)p->offs + offs;
    p->types = p->payload + len;
    p->format = (char *)p->types + nfields;
    tb_ranks_init(&p->cover);
    p->expect = NULL;
    p->own = NULL;
    return p;
}

tbon_packet_t *tb_packet_alloc_around(int tag, size_t nfields, size_t flen, uint8_t *payload,
                                      size_t len)
{
    tbon_packet_t *p = tb_packet_alloc(tag, nfields, flen, 0);
    if (!p)
        return NULL;
    p->len = (uint32_t)len;
    p->payload = p->own = payload;
    return p;
}

tbon_packet_t *tb_packet_raw(uint8_t *buf, size_t len)
{
    return tb_packet_alloc_around(0, 0, 0, buf, len);
}

TB_HOT size_t tb_packet_put_format(tbon_packet_t *p, const uint8_t *types,
                            const char *canon, size_t flen)
{
    size_t n = p->nfields;
    if (types != p->types)
        memcpy(p->types, types, n);
    if (canon)
        memcpy(p->format, canon, flen);
    else
        tb_fmt_write_canonical(p->format, types, n);
    p->format[flen] = '\0';
    tb_st16(p->payload, (uint16_t)flen);
    memcpy(p->payload + 2, p->format, flen);
    return 2 + flen;
}

/* Add a field of hdr + count * esz bytes to *len, refusing to pass
 * TB_PACKET_MAX_PAYLOAD. */
static int grow(size_t *len, size_t hdr, size_t count, size_t esz)
{
    size_t room = TB_PACKET_MAX_PAYLOAD - *len;
    if (room < hdr || (esz && count > (room - hdr) / esz))
        return TBON_ETOOBIG;
    *len += hdr + count * esz;
    return 0;
}

/* The sizing pass over the arguments: checks pointers and counts and adds
 * every field's encoded size to *len. */
static int measure(const uint8_t *types, size_t n, va_list *ap, size_t *len,
                   tbon_error_t *err)
{
    for (size_t i = 0; i < n; i++) {
        enum tb_ftype t = (enum tb_ftype)types[i];
        size_t esz = tb_ftype_size[t];
        int bad = 0;

        switch (t) {
        case TB_F_C: case TB_F_UC: case TB_F_HD: case TB_F_UHD:
            (void)va_arg(*ap, int);
            bad = grow(len, 0, 1, esz);
            break;
        case TB_F_D:   (void)va_arg(*ap, int32_t);  bad = grow(len, 0, 1, esz); break;
        case TB_F_UD:  (void)va_arg(*ap, uint32_t); bad = grow(len, 0, 1, esz); break;
        case TB_F_LD:  (void)va_arg(*ap, int64_t);  bad = grow(len, 0, 1, esz); break;
        case TB_F_ULD: (void)va_arg(*ap, uint64_t); bad = grow(len, 0, 1, esz); break;
        case TB_F_F: case TB_F_LF:
            (void)va_arg(*ap, double);
            bad = grow(len, 0, 1, esz);
            break;
        case TB_F_S: {
            const char *s = va_arg(*ap, const char *);
            if (!s)
                return tb_error_set(err, TBON_EINVAL,
                                    "packet field %zu (%%s) is a NULL string", i + 1);
            bad = grow(len, 4, strlen(s), 1);
            break;
        }
        case TB_F_AS: {
            const char *const *strs = va_arg(*ap, const char *const *);
            size_t cnt = va_arg(*ap, size_t);
            if (!strs && cnt)
                return tb_error_set(err, TBON_EINVAL,
                                    "packet field %zu (%%as) is a NULL array of %zu strings",
                                    i + 1, cnt);
            bad = cnt > UINT32_MAX || grow(len, 4, 0, 0);
            for (size_t k = 0; k < cnt && !bad; k++) {
                if (!strs[k])
                    return tb_error_set(err, TBON_EINVAL,
                                        "packet field %zu (%%as): string %zu is NULL",
                                        i + 1, k);
                bad = grow(len, 4, strlen(strs[k]), 1);
            }
            break;
        }
        default: {   /* numeric arrays */
            const void *ptr = va_arg(*ap, const void *);
            size_t cnt = va_arg(*ap, size_t);
            if (!ptr && cnt)
                return tb_error_set(err, TBON_EINVAL,
                                    "packet field %zu (%s) is a NULL array of %zu elements",
                                    i + 1, tb_ftype_name(t), cnt);
            bad = cnt > UINT32_MAX || grow(len, 4, cnt, esz);
            break;
        }
        }
        if (bad)
            return tb_error_set(err, TBON_EINVAL,
                                "packet field %zu (%s) makes the packet larger than "
                                "%u bytes or has more than %u elements",
                                i + 1, tb_ftype_name(t), TB_PACKET_MAX_PAYLOAD,
                                UINT32_MAX);
    }
    return 0;
}

/* The writing pass: the same arguments as measure() saw, encoded from the
 * payload offset off on; fills p->offs. */
static void encode(tbon_packet_t *p, size_t off, va_list *ap)
{
    uint8_t *b = p->payload;

    for (size_t i = 0; i < p->nfields; i++) {
        enum tb_ftype t = (enum tb_ftype)p->types[i];
        p->offs[i] = (uint32_t)off;
        switch (t) {
        case TB_F_C: case TB_F_UC:
            b[off++] = (uint8_t)va_arg(*ap, int);
            break;
        case TB_F_HD: case TB_F_UHD:
            tb_st16(b + off, (uint16_t)va_arg(*ap, int));
            off += 2;
            break;
        case TB_F_D:
            tb_st32(b + off, (uint32_t)va_arg(*ap, int32_t));
            off += 4;
            break;
        case TB_F_UD:
            tb_st32(b + off, va_arg(*ap, uint32_t));
            off += 4;
            break;
        case TB_F_LD:
            tb_st64(b + off, (uint64_t)va_arg(*ap, int64_t));
            off += 8;
            break;
        case TB_F_ULD:
            tb_st64(b + off, va_arg(*ap, uint64_t));
            off += 8;
            break;
        case TB_F_F: {
            float f = (float)va_arg(*ap, double);
            uint32_t u;
            memcpy(&u, &f, sizeof u);
            tb_st32(b + off, u);
            off += 4;
            break;
        }
        case TB_F_LF: {
            double d = va_arg(*ap, double);
            uint64_t u;
            memcpy(&u, &d, sizeof u);
            tb_st64(b + off, u);
            off += 8;
            break;
        }
        case TB_F_S: {
            const char *s = va_arg(*ap, const char *);
            size_t sl = strlen(s);
            tb_st32(b + off, (uint32_t)sl);
            memcpy(b + off + 4, s, sl);
            off += 4 + sl;
            break;
        }
        case TB_F_AS: {
            const char *const *strs = va_arg(*ap, const char *const *);
            size_t cnt = va_arg(*ap, size_t);
            tb_st32(b + off, (uint32_t)cnt);
            off += 4;
            for (size_t k = 0; k < cnt; k++) {
                size_t sl = strlen(strs[k]);
                tb_st32(b + off, (uint32_t)sl);
                memcpy(b + off + 4, strs[k], sl);
                off += 4 + sl;
            }
            break;
        }
        default: {
            const void *ptr = va_arg(*ap, const void *);
            size_t cnt = va_arg(*ap, size_t), esz = tb_ftype_size[t];
            tb_st32(b + off, (uint32_t)cnt);
            tb_copy_le(b + off + 4, ptr, cnt, esz);
            off += 4 + cnt * esz;
            break;
        }
        }
    }
    p->offs[p->nfields] = (uint32_t)off;
    assert(off == p->len);
}

TB_HOT tbon_packet_t *tb_packet_vcreate(int tag, const char *fmt, va_list ap,
                                 tbon_error_t *err)
{
    uint8_t stack_types[STACK_FIELDS], *types = stack_types;
    tbon_packet_t *p = NULL;
    struct tb_fmt_iter it;
    size_t fmtlen = 0, maxn = 0, n = 0, flen, len, i;
    va_list aq;
    int t, rc, canonical;

    if (!fmt) {
        tb_error_set(err, TBON_EFORMAT, "packet format is NULL");
        return NULL;
    }
    /* Every conversion starts with '%', which bounds the number of fields. */
    for (; fmt[fmtlen]; fmtlen++)
        maxn += fmt[fmtlen] == '%';
    if (maxn > STACK_FIELDS && !(types = malloc(maxn))) {
        tb_error_set(err, TBON_ENOMEM, "out of memory compiling a packet format");
        return NULL;
    }
    /* Formats are mostly written in canonical form, which then need not be
     * built: try the strict parse first. */
    tb_fmt_init(&it, fmt, fmtlen, 1);
    while ((t = tb_fmt_next(&it)) >= 0)
        types[n++] = (uint8_t)t;
    canonical = t == TB_FMT_END;
    if (!canonical) {
        n = 0;
        tb_fmt_init(&it, fmt, fmtlen, 0);
        while ((t = tb_fmt_next(&it)) >= 0)
            types[n++] = (uint8_t)t;
    }
    if (t == TB_FMT_BAD) {
        tb_error_set(err, TBON_EFORMAT,
                     "packet format \"%s\": bad conversion at character %zu",
                     fmt, it.pos + 1);
        goto out;
    }
    flen = canonical ? fmtlen : tb_fmt_canonical_len(types, n);
    if (flen > TB_PACKET_MAX_FORMAT) {
        tb_error_set(err, TBON_EFORMAT,
                     "packet format of %zu conversions is %zu characters long in "
                     "canonical form; the limit is %u", n, flen, TB_PACKET_MAX_FORMAT);
        goto out;
    }
    /* Only strings and arrays need a pass over the arguments to size the
     * packet; scalars have their size in the format. */
    len = 2 + flen;
    for (i = 0; i < n && types[i] < TB_F_S; i++)
        len += tb_ftype_size[types[i]];
    if (i < n) {
        len = 2 + flen;
        va_copy(aq, ap);
        rc = measure(types, n, &aq, &len, err);
        va_end(aq);
        if (rc)
            goto out;
    }
    p = tb_packet_alloc(tag, n, flen, len);
    if (!p) {
        tb_error_set(err, TBON_ENOMEM, "out of memory for a packet of %zu bytes", len);
        goto out;
    }
    size_t off = tb_packet_put_format(p, types, canonical ? fmt : NULL, flen);
    va_copy(aq, ap);
    encode(p, off, &aq);
    va_end(aq);
out:
    if (types != stack_types)
        free(types);
    return p;
}

tbon_packet_t *tbon_packet_vnew(int tag, const char *fmt, va_list ap)
{
    return tb_packet_vcreate(tag, fmt, ap, NULL);
}

tbon_packet_t *tbon_packet_new(int tag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tbon_packet_t *p = tb_packet_vcreate(tag, fmt, ap, NULL);
    va_end(ap);
    return p;
}

int tbon_packet_tag(const tbon_packet_t *p)
{
    return p ? p->tag : 0;
}

const char *tbon_packet_format(const tbon_packet_t *p)
{
    return p ? p->format : NULL;
}

uint32_t tbon_packet_stream(const tbon_packet_t *p)
{
    return p ? p->stream : 0;
}

tbon_rank_t tbon_packet_source(const tbon_packet_t *p)
{
    return p ? p->source : TBON_RANK_NONE;
}

tbon_packet_t *tbon_packet_ref(tbon_packet_t *p)
{
    if (p)
        atomic_fetch_add_explicit(&p->refs, 1u, memory_order_relaxed);
    return p;
}

TB_HOT static void packet_free(tbon_packet_t *p)
{
    tb_ranks_free(&p->cover);
    if (p->expect) {
        tb_ranks_free(p->expect);
        free(p->expect);
    }
    /* a large payload's buffer kept for the next (util/bigmem.h) */
    if (p->len < TB_BIG_KEEP_MIN) {
        free(p->own);
        free(p);
    } else if (p->own) {
        tb_big_free(p->own);
        free(p);
    } else {
        tb_big_free(p);
    }
}

TB_HOT void tbon_packet_unref(tbon_packet_t *p)
{
    if (!p)
        return;
    /* A count of 1 is ours alone: nobody else can take a reference without
     * holding one, so no atomic read-modify-write is needed (the acquire
     * pairs with other threads' releasing decrements). */
    if (atomic_load_explicit(&p->refs, memory_order_acquire) == 1u) {
        packet_free(p);
        return;
    }
    /* Release orders this thread's reads of the packet before the count
     * drops; acquire, for the thread that drops it to 0, makes every other
     * thread's reads happen before the free. (One acq_rel decrement rather
     * than a release decrement and an acquire fence: ThreadSanitizer does
     * not model standalone fences.) */
    if (atomic_fetch_sub_explicit(&p->refs, 1u, memory_order_acq_rel) == 1u)
        packet_free(p);
}

void tb_packet_set_route(tbon_packet_t *p, uint32_t stream, tbon_rank_t source)
{
    assert(atomic_load_explicit(&p->refs, memory_order_relaxed) == 1u);
    p->stream = stream;
    p->source = source;
}

TB_HOT uint32_t tb_packet_payload_crc(const tbon_packet_t *cp)
{
    /* Packets are immutable: the CRC is computed once, whichever thread
     * asks first (two that ask at once both compute it and store the same
     * value: crc is atomic, so that is no data race). */
    tbon_packet_t *p = (tbon_packet_t *)cp;
    if (atomic_load_explicit(&p->crc_known, memory_order_acquire))
        return atomic_load_explicit(&p->crc, memory_order_relaxed);
    uint32_t crc = tb_crc32c(0, p->payload, p->len);
    atomic_store_explicit(&p->crc, crc, memory_order_relaxed);
    atomic_store_explicit(&p->crc_known, 1u, memory_order_release);
    return crc;
}
