/* fuzz_packet.c - libFuzzer harness for the packet payload decoder and the
 * format parser
 *
 * Decodes arbitrary bytes. A payload that decodes must be exactly the bytes
 * given, must rebuild byte for byte from its fields (tb_packet_build), every
 * field and element must be readable through the field API, and a packet of
 * one field must unpack to the field's values. The same bytes are also
 * parsed as a format string: if it parses, a packet built with its types must
 * have the canonical format, match the input format and decode back.
 */
#include "codec/packet_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_ASSERT(c) do { if (!(c)) { \
    fprintf(stderr, "fuzz_packet: %s:%d: %s\n", __FILE__, __LINE__, #c); \
    abort(); } } while (0)

static void walk_fields(const tbon_packet_t *p, struct tb_field *fields)
{
    size_t n = tb_packet_nfields(p);
    volatile double sink = 0;

    for (size_t i = 0; i < n; i++) {
        struct tb_field *f = &fields[i];
        FUZZ_ASSERT(tb_packet_get_field(p, i, f) == 0);
        FUZZ_ASSERT(f->type == tb_packet_field_type(p, i));
        size_t count;
        FUZZ_ASSERT(tb_packet_field(p, i, &count) == f->data && count == f->count);
        enum tb_ftype e = tb_ftype_elem(f->type);
        if (f->type == TB_F_AS) {
            size_t off = 0;
            for (size_t k = 0; k < f->count; k++) {
                FUZZ_ASSERT(f->size - off >= 4);
                uint32_t sl = (uint32_t)f->data[off] | (uint32_t)f->data[off + 1] << 8 |
                              (uint32_t)f->data[off + 2] << 16 |
                              (uint32_t)f->data[off + 3] << 24;
                FUZZ_ASSERT(sl <= f->size - off - 4);
                off += 4 + sl;
            }
            FUZZ_ASSERT(off == f->size);
        } else if (e == TB_F_S) {
            FUZZ_ASSERT(f->size == f->count);
        } else {
            size_t esz = tb_ftype_elem_size(f->type);
            FUZZ_ASSERT(f->size == f->count * esz);
            for (size_t k = 0; k < f->count; k++) {
                if (tb_ftype_is_float(f->type))
                    sink += tb_elem_get_f64(f->type, f->data + k * esz);
                else
                    sink += (double)tb_elem_get_i64(f->type, f->data + k * esz);
            }
        }
    }
    FUZZ_ASSERT(tb_packet_field(p, n, NULL) == NULL);
    (void)sink;
}

/* Unpack a one-field packet with its own format and compare with the raw
 * field bytes. */
static void unpack_one(const tbon_packet_t *p)
{
    const char *fmt = tbon_packet_format(p);
    size_t cnt, n = 0;
    const uint8_t *raw = tb_packet_field(p, 0, &cnt);
    enum tb_ftype t = tb_packet_field_type(p, 0);
    uint64_t scalar = 0;   /* aligned for any scalar type */
    const uint16_t one = 1;
    int host_le = *(const uint8_t *)&one == 1;
    void *arr = NULL;

    if (t == TB_F_S) {
        char *s = NULL;
        FUZZ_ASSERT(tbon_packet_unpack(p, fmt, &s) == 0 && s);
        FUZZ_ASSERT(strlen(s) <= cnt && memcmp(s, raw, strlen(s)) == 0);
        free(s);
    } else if (t == TB_F_AS) {
        char **strs = NULL;
        FUZZ_ASSERT(tbon_packet_unpack(p, fmt, &strs, &n) == 0 && n == cnt);
        FUZZ_ASSERT((n == 0) == (strs == NULL));
        for (size_t k = 0; k < n; k++)
            free(strs[k]);
        free(strs);
    } else if (tb_ftype_is_array(t)) {
        FUZZ_ASSERT(tbon_packet_unpack(p, fmt, &arr, &n) == 0 && n == cnt);
        FUZZ_ASSERT((n == 0) == (arr == NULL));
        /* On a little-endian host the copy has the wire's bytes. */
        if (host_le)
            FUZZ_ASSERT(n == 0 || memcmp(arr, raw, n * tb_ftype_elem_size(t)) == 0);
        free(arr);
    } else {
        FUZZ_ASSERT(tbon_packet_unpack(p, fmt, &scalar) == 0);
        FUZZ_ASSERT(!host_le || memcmp(&scalar, raw, tb_ftype_elem_size(t)) == 0);
    }
    /* A different format is refused without touching the output. */
    int32_t sentinel = 12345;
    FUZZ_ASSERT(tbon_packet_unpack(p, t == TB_F_D ? "%ud" : "%d", &sentinel) ==
                TBON_EFORMAT && sentinel == 12345);
}

/* Parse the input as a format; build a packet of those types with empty or
 * zero values and check the round trip. */
static void parse_format(const uint8_t *data, size_t size)
{
    enum tb_ftype types[64];
    struct tb_field fields[64];
    static const uint8_t zero[8];
    size_t n;
    char *fmt = malloc(size + 1);
    FUZZ_ASSERT(fmt);
    memcpy(fmt, data, size);
    fmt[size] = '\0';
    tbon_error_t err;
    if (tb_format_parse(fmt, types, 64, &n, &err) != 0 || n > 64) {
        free(fmt);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        int counted = types[i] == TB_F_S || tb_ftype_is_array(types[i]);
        fields[i].type = types[i];
        fields[i].count = counted ? 0 : 1;
        fields[i].data = zero;
        fields[i].size = counted ? 0 : tb_ftype_elem_size(types[i]);
    }
    tbon_packet_t *p = tb_packet_build(1, fields, n, &err);
    FUZZ_ASSERT(p);
    FUZZ_ASSERT(tb_packet_format_matches(p, fmt));
    FUZZ_ASSERT(tb_packet_format_matches(p, tbon_packet_format(p)));
    size_t len;
    const uint8_t *pl = tb_packet_payload(p, &len);
    tbon_packet_t *q = tb_packet_decode(pl, len, 1, 0, 0, &err);
    FUZZ_ASSERT(q);
    FUZZ_ASSERT(strcmp(tbon_packet_format(q), tbon_packet_format(p)) == 0);
    tbon_packet_unref(q);
    tbon_packet_unref(p);
    free(fmt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tbon_error_t err;
    parse_format(data, size);
    tbon_packet_t *p = tb_packet_decode(data, size, 7, 3, 9, &err);
    if (!p) {
        FUZZ_ASSERT(err.code == TBON_EFORMAT);
        FUZZ_ASSERT(err.msg[0] != '\0');
        return 0;
    }
    size_t len;
    const uint8_t *pl = tb_packet_payload(p, &len);
    FUZZ_ASSERT(len == size && memcmp(pl, data, size) == 0);
    FUZZ_ASSERT(tbon_packet_tag(p) == 7 && tbon_packet_stream(p) == 3 &&
                tbon_packet_source(p) == 9);

    const char *fmt = tbon_packet_format(p);
    size_t n = tb_packet_nfields(p);
    FUZZ_ASSERT(strlen(fmt) == (size_t)(data[0] | data[1] << 8));
    FUZZ_ASSERT(memcmp(fmt, data + 2, strlen(fmt)) == 0);
    FUZZ_ASSERT(tb_packet_format_matches(p, fmt));

    struct tb_field *fields = calloc(n ? n : 1, sizeof *fields);
    FUZZ_ASSERT(fields);
    walk_fields(p, fields);

    tbon_packet_t *q = tb_packet_build(7, fields, n, &err);
    FUZZ_ASSERT(q);
    size_t qlen;
    const uint8_t *qpl = tb_packet_payload(q, &qlen);
    FUZZ_ASSERT(qlen == size && memcmp(qpl, data, size) == 0);
    FUZZ_ASSERT(strcmp(tbon_packet_format(q), fmt) == 0);

    if (n == 1)
        unpack_one(p);
    free(fields);
    tbon_packet_unref(q);
    tbon_packet_unref(p);
    return 0;
}
