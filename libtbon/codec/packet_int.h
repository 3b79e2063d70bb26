/* packet_int.h - library-internal packet API: encoded payloads, decoding,
 * routing, and typed field access for filters
 *
 * The payload encoding is described at the top of packet.c. Values in the
 * field API are raw little-endian bytes exactly as encoded; read and write
 * them with the tb_elem_* helpers so code stays correct on any host.
 */
#ifndef TB_PACKET_INT_H
#define TB_PACKET_INT_H

#include <tbon/tbon.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* The 22 conversions. An array type is its element type + TB_F_AC. */
enum tb_ftype {
    TB_F_C, TB_F_UC, TB_F_HD, TB_F_UHD, TB_F_D, TB_F_UD, TB_F_LD, TB_F_ULD,
    TB_F_F, TB_F_LF, TB_F_S,
    TB_F_AC, TB_F_AUC, TB_F_AHD, TB_F_AUHD, TB_F_AD, TB_F_AUD, TB_F_ALD,
    TB_F_AULD, TB_F_AF, TB_F_ALF, TB_F_AS,
    TB_F_COUNT
};

#define TB_PACKET_MAX_FORMAT  65535u       /* canonical format characters */
#define TB_PACKET_MAX_PAYLOAD UINT32_MAX   /* encoded bytes (format + values) */

/* 1 for the array types %ac .. %as (not %s). */
int tb_ftype_is_array(enum tb_ftype t);

/* Bytes per encoded element: the width of a scalar or of an array's element;
 * 1 for %s (its bytes); 0 for %as (variable) and out-of-range values. */
size_t tb_ftype_elem_size(enum tb_ftype t);

/* The conversion as written in a canonical format, e.g. "%auhd"; "?" for an
 * out-of-range value. Static string. */
const char *tb_ftype_name(enum tb_ftype t);

/* The element type: an array's scalar type (%aud -> %ud, %as -> %s); a
 * scalar or %s is its own element type. */
enum tb_ftype tb_ftype_elem(enum tb_ftype t);

/* 1 if the element type is %f or %lf. */
int tb_ftype_is_float(enum tb_ftype t);

/* 1 if the element type is signed: %c (taken as int8_t), %hd, %d, %ld and
 * the two float types. */
int tb_ftype_is_signed(enum tb_ftype t);

/* Parse a format string (whitespace-tolerant, as tbon_packet_new does).
 * Stores up to cap types in types (may be NULL if cap is 0) and the total
 * number of conversions in *n. Returns 0 or TBON_EFORMAT (err says where). */
int tb_format_parse(const char *fmt, enum tb_ftype *types, size_t cap,
                    size_t *n, tbon_error_t *err);

/* --- element access: e points at one encoded element of a numeric type --- */

/* An integer element of type t (or an array of it) sign- or zero-extended to
 * 64 bits; %uld values above INT64_MAX come back as their two's complement.
 * 0 for float and string types. */
int64_t tb_elem_get_i64(enum tb_ftype t, const uint8_t *e);

/* An integer element zero-extended (unsigned types) or sign-extended and
 * reinterpreted (signed types). 0 for float and string types. */
uint64_t tb_elem_get_u64(enum tb_ftype t, const uint8_t *e);

/* Any numeric element as a double (integers converted, floats widened). */
double tb_elem_get_f64(enum tb_ftype t, const uint8_t *e);

/* Store v, truncated to the element's width (two's complement), into an
 * integer element. Does nothing for float and string types. */
void tb_elem_put_u64(enum tb_ftype t, uint8_t *e, uint64_t v);

/* Store v into a float element (rounded to float for %f). Does nothing for
 * integer and string types. */
void tb_elem_put_f64(enum tb_ftype t, uint8_t *e, double v);

/* --- packets --- */

/* tbon_packet_vnew that says why it failed in err (may be NULL). */
tbon_packet_t *tb_packet_vcreate(int tag, const char *fmt, va_list ap,
                                 tbon_error_t *err);

/* The encoded payload (u16 format length, canonical format, values): the data
 * of a wire frame, valid as long as p is. Stores its length in *len. */
const uint8_t *tb_packet_payload(const tbon_packet_t *p, size_t *len);

/* CRC32C of the payload (tb_crc32c from 0), computed once per packet: a
 * packet sent to many children is checksummed once. Any thread. */
uint32_t tb_packet_payload_crc(const tbon_packet_t *p);

/* Decode a payload received from the wire into a new packet (one reference)
 * with the given tag, stream and source. Validates everything and never reads
 * outside buf[0..len); the format must be canonical and nothing may follow the
 * last value, so encoding is unique. Returns NULL and TBON_EFORMAT in err,
 * naming what is wrong at which byte offset, or TBON_ENOMEM. */
tbon_packet_t *tb_packet_decode(const void *buf, size_t len, int tag,
                                uint32_t stream, tbon_rank_t source,
                                tbon_error_t *err);

/* The same, decoding in place: the packet takes over *buf (malloc'd, at
 * least len bytes) and *buf becomes NULL; on failure *buf stays the
 * caller's. For large payloads, which a copy would cost a pass over
 * fresh memory. */
tbon_packet_t *tb_packet_decode_take(uint8_t **buf, size_t len, int tag,
                                     uint32_t stream, tbon_rank_t source,
                                     tbon_error_t *err);

/* Bytes that are not a whole packet (a piece of one, passed on as it came:
 * node/node_cut.c) held in a packet object that frames can refer to; it
 * takes over buf (malloc'd, len bytes) and is never decoded. NULL if out of
 * memory (buf stays the caller's). */
tbon_packet_t *tb_packet_raw(uint8_t *buf, size_t len);

/* Set the stream and source of a packet the caller has just created; legal
 * only while the caller holds the only reference (asserted). */
void tb_packet_set_route(tbon_packet_t *p, uint32_t stream, tbon_rank_t source);

/* 1 if fmt (whitespace-tolerant) has the same conversions as p, else 0 (also
 * for a bad fmt). */
int tb_packet_format_matches(const tbon_packet_t *p, const char *fmt);

/* The number of fields of p. */
size_t tb_packet_nfields(const tbon_packet_t *p);

/* The type of field i (i < nfields, asserted). */
enum tb_ftype tb_packet_field_type(const tbon_packet_t *p, size_t i);

/* A field's raw data, O(1). For a scalar: its element bytes and count 1; for
 * an array: its elements (count * elem_size bytes) and count; for %s: the
 * string bytes (no NUL) and their length; for %as: the encoded sequence of
 * (u32 length + bytes) and the number of strings. count may be NULL. The
 * pointer is valid as long as p is; NULL and count 0 if i is out of range. */
const uint8_t *tb_packet_field(const tbon_packet_t *p, size_t i, size_t *count);

/* A field as a value: its type, count and data as tb_packet_field returns
 * them, and size = the number of bytes at data. */
struct tb_field {
    enum tb_ftype  type;
    size_t         count;
    const uint8_t *data;
    size_t         size;
};

/* Fill *f with field i of p. Returns 0 or TBON_EINVAL if i is out of range. */
int tb_packet_get_field(const tbon_packet_t *p, size_t i, struct tb_field *f);

/* Build a packet (one reference) of the given tag from n fields of raw
 * little-endian data, laid out as tb_packet_get_field gives them: e.g. a sum
 * filter copies its input's fields, points data at its sums and builds.
 * The data is copied. Each field is checked (scalars: count 1; size equal to
 * count * element size; %as: a well-formed sequence of exactly size bytes).
 * Returns NULL with TBON_EFORMAT (naming the field) or TBON_ENOMEM in err. */
tbon_packet_t *tb_packet_build(int tag, const struct tb_field *fields, size_t n,
                               tbon_error_t *err);

/* --- coverage (packet_cover.c; docs/api.md, "Coverage") --- */
struct tb_ranks;

/* The back-end ranks whose contributions p holds (empty: none said). The
 * mutable form is for the node that received or made p, before p is shared. */
const struct tb_ranks *tb_packet_cover(const tbon_packet_t *p);
struct tb_ranks *tb_packet_cover_mut(tbon_packet_t *p);

/* FE: the back-ends p's wave expected (copied). 0 or TBON_ENOMEM. */
int tb_packet_set_expect(tbon_packet_t *p, const struct tb_ranks *e);

#endif
