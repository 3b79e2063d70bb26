/* packet_unpack.c - copying a packet's values out through varargs, and
 * matching formats */
#include "codec/packet_priv.h"
#include "util/hot.h"

#include <assert.h>
#include <stdlib.h>

#include "util/bigmem.h"
#include "util/error.h"

/* Up to this many strings and arrays are tracked on the stack. */
#define STACK_BUFS 32

TB_HOT int tb_packet_format_matches(const tbon_packet_t *p, const char *fmt)
{
    struct tb_fmt_iter it;
    size_t i = 0;
    int t;

    if (!p || !fmt)
        return 0;
    tb_fmt_init(&it, fmt, strlen(fmt), 0);
    while ((t = tb_fmt_next(&it)) >= 0)
        if (i >= p->nfields || p->types[i++] != t)
            return 0;
    return t == TB_FMT_END && i == p->nfields;
}

/* Field i's values as fresh host-order malloc memory, in *out: a string for
 * %s (never NULL), an array of elements, or for %as an array of strings.
 * Empty arrays are NULL. Returns 0 or TBON_ENOMEM (nothing left allocated). */
static int copy_field(const tbon_packet_t *p, size_t i, void **out)
{
    enum tb_ftype t = (enum tb_ftype)p->types[i];
    const uint8_t *b = p->payload + p->offs[i];
    size_t cnt = tb_ld32(b);

    *out = NULL;
    b += 4;
    if (t == TB_F_S) {
        char *s = malloc(cnt + 1);
        if (!s)
            return TBON_ENOMEM;
        memcpy(s, b, cnt);
        s[cnt] = '\0';
        *out = s;
    } else if (t == TB_F_AS) {
        if (!cnt)
            return 0;
        char **strs = malloc(cnt * sizeof *strs);
        if (!strs)
            return TBON_ENOMEM;
        for (size_t k = 0; k < cnt; k++) {
            size_t sl = tb_ld32(b);
            if (!(strs[k] = malloc(sl + 1))) {
                while (k--)
                    free(strs[k]);
                free(strs);
                return TBON_ENOMEM;
            }
            memcpy(strs[k], b + 4, sl);
            strs[k][sl] = '\0';
            b += 4 + sl;
        }
        *out = strs;
    } else if (cnt) {
        size_t esz = tb_ftype_size[t];
        void *a = tb_big_alloc(cnt * esz);
        if (!a)
            return TBON_ENOMEM;
        tb_copy_le(a, b, cnt, esz);
        *out = a;
    }
    return 0;
}

static void free_field(const tbon_packet_t *p, size_t i, void *buf)
{
    if (buf && p->types[i] == TB_F_AS) {
        char **strs = buf;
        size_t cnt = tb_ld32(p->payload + p->offs[i]);
        for (size_t k = 0; k < cnt; k++)
            free(strs[k]);
    }
    free(buf);
}

static int allocates(uint8_t t)
{
    return t == TB_F_S || tb_ftype_is_array((enum tb_ftype)t);
}

/* Store array field i's copy buf and count through the next two arguments,
 * read with their exact pointer types. */
#define PUT_ARRAY(T)                                                       \
    do {                                                                   \
        *va_arg(*ap, T **) = buf;                                          \
        *va_arg(*ap, size_t *) = cnt;                                      \
    } while (0)

/* The writing pass of unpack: every copy is made, nothing can fail now. */
static void store(const tbon_packet_t *p, void *const *bufs, va_list *ap)
{
    size_t k = 0;

    for (size_t i = 0; i < p->nfields; i++) {
        const uint8_t *b = p->payload + p->offs[i];
        enum tb_ftype t = (enum tb_ftype)p->types[i];
        void *buf = NULL;
        size_t cnt = 0;

        if (allocates(t)) {
            buf = bufs[k++];
            cnt = tb_ld32(b);
        }
        switch (t) {
        case TB_F_C:   memcpy(va_arg(*ap, char *), b, 1); break;
        case TB_F_UC:  *va_arg(*ap, unsigned char *) = b[0]; break;
        case TB_F_HD:  *va_arg(*ap, int16_t *) = (int16_t)tb_ld16(b); break;
        case TB_F_UHD: *va_arg(*ap, uint16_t *) = tb_ld16(b); break;
        case TB_F_D:   *va_arg(*ap, int32_t *) = (int32_t)tb_ld32(b); break;
        case TB_F_UD:  *va_arg(*ap, uint32_t *) = tb_ld32(b); break;
        case TB_F_LD:  *va_arg(*ap, int64_t *) = (int64_t)tb_ld64(b); break;
        case TB_F_ULD: *va_arg(*ap, uint64_t *) = tb_ld64(b); break;
        case TB_F_F: {
            uint32_t u = tb_ld32(b);
            memcpy(va_arg(*ap, float *), &u, sizeof u);
            break;
        }
        case TB_F_LF: {
            uint64_t u = tb_ld64(b);
            memcpy(va_arg(*ap, double *), &u, sizeof u);
            break;
        }
        case TB_F_S:    *va_arg(*ap, char **) = buf; break;
        case TB_F_AC:   PUT_ARRAY(char); break;
        case TB_F_AUC:  PUT_ARRAY(unsigned char); break;
        case TB_F_AHD:  PUT_ARRAY(int16_t); break;
        case TB_F_AUHD: PUT_ARRAY(uint16_t); break;
        case TB_F_AD:   PUT_ARRAY(int32_t); break;
        case TB_F_AUD:  PUT_ARRAY(uint32_t); break;
        case TB_F_ALD:  PUT_ARRAY(int64_t); break;
        case TB_F_AULD: PUT_ARRAY(uint64_t); break;
        case TB_F_AF:   PUT_ARRAY(float); break;
        case TB_F_ALF:  PUT_ARRAY(double); break;
        case TB_F_AS:   PUT_ARRAY(char *); break;
        default:        assert(0); break;
        }
    }
}

TB_HOT int tbon_packet_vunpack(const tbon_packet_t *p, const char *fmt, va_list ap)
{
    void *stack_bufs[STACK_BUFS], **bufs = stack_bufs;
    size_t nbufs = 0, k = 0;
    va_list aq;
    int rc = 0;

    if (!p || !fmt)
        return tb_tls_fail(TB_ON_PACKET, TBON_EINVAL, "tbon_packet_unpack: a NULL %s",
                           p ? "format" : "packet");
    if (!tb_packet_format_matches(p, fmt))
        return tb_tls_fail(TB_ON_PACKET, TBON_EFORMAT, "tbon_packet_unpack: format \"%.200s\" "
                           "does not match the packet's \"%.200s\" (tag %d)", fmt,
                           tbon_packet_format(p), tbon_packet_tag(p));
    /* All copies are made before any output is written, so a failure leaves
     * the caller's variables as they were. */
    for (size_t i = 0; i < p->nfields; i++)
        nbufs += allocates(p->types[i]);
    if (nbufs > STACK_BUFS && !(bufs = malloc(nbufs * sizeof *bufs)))
        return TBON_ENOMEM;
    for (size_t i = 0; i < p->nfields && rc == 0; i++)
        if (allocates(p->types[i]) && (rc = copy_field(p, i, &bufs[k])) == 0)
            k++;
    if (rc) {
        for (size_t i = 0, j = 0; j < k; i++)
            if (allocates(p->types[i]))
                free_field(p, i, bufs[j++]);
        goto out;
    }
    va_copy(aq, ap);
    store(p, bufs, &aq);
    va_end(aq);
out:
    if (bufs != stack_bufs)
        free(bufs);
    if (rc)
        tb_tls_fail(TB_ON_PACKET, rc, "tbon_packet_unpack: out of memory copying a field out");
    return rc;
}

TB_HOT int tbon_packet_unpack(const tbon_packet_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = tbon_packet_vunpack(p, fmt, ap);
    va_end(ap);
    return rc;
}
