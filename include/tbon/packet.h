/* packet.h - tbon packets: a tag, a format string and typed values, immutable
 * and reference counted
 *
 * Format conversions (separated by optional whitespace):
 *   %c char   %uc unsigned char   %hd int16_t   %uhd uint16_t
 *   %d int32_t   %ud uint32_t   %ld int64_t   %uld uint64_t
 *   %f float   %lf double   %s NUL-terminated string
 * and the arrays %ac %auc %ahd %auhd %ad %aud %ald %auld %af %alf %as.
 *
 * Packing (tbon_packet_new) takes, per conversion:
 *   %c %uc %hd %uhd   an int (C's default promotion), stored at its width
 *   %d / %ud          int32_t / uint32_t
 *   %ld / %uld        int64_t / uint64_t
 *   %f / %lf          a double (promotion), %f stored as float
 *   %s                const char * (NULL is refused)
 *   %aX               (const T *ptr, size_t len); ptr may be NULL only if len is 0
 *   %as               (const char *const *strs, size_t n); no NULL strings
 * Unpacking (tbon_packet_unpack) takes a pointer per conversion:
 *   %c char *, %uc unsigned char *, %hd int16_t *, ..., %lf double *,
 *   %s char ** (fresh malloc copy), %aX (T **ptr, size_t *len),
 *   %as (char ***strs, size_t *n) (the array and each string fresh mallocs).
 * An unpacked array or %as of length 0 is returned as NULL with length 0;
 * an empty %s is returned as a malloc'd "" (never NULL). Strings travel with
 * their length: a %s that arrives with an embedded NUL (only a foreign
 * encoder can produce one) unpacks to a C string that ends at that NUL.
 * Counts and string lengths are limited to UINT32_MAX, the encoded packet to
 * UINT32_MAX bytes and the canonical format to 65535 characters.
 */
#ifndef TBON_PACKET_H
#define TBON_PACKET_H

#include <tbon/common.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tbon_packet tbon_packet_t;

/* Build a packet with the given tag from a format string and the values it
 * names (see the top of this file). The caller owns the one reference.
 * Returns NULL on a bad format, a NULL string or array pointer, an oversized
 * value, or out of memory. Any thread may call it. */
tbon_packet_t *tbon_packet_new(int tag, const char *fmt, ...);

/* tbon_packet_new with a va_list (which it consumes as va_arg would). */
tbon_packet_t *tbon_packet_vnew(int tag, const char *fmt, va_list ap);

/* Copy the values of p into the pointers that follow fmt. fmt must have the
 * same sequence of conversions as p's format (whitespace does not matter).
 * Returns 0; TBON_EFORMAT on a mismatch or bad fmt and TBON_ENOMEM when a copy
 * cannot be allocated, in both cases without touching any output; TBON_EINVAL
 * for a NULL p or fmt. Strings and arrays are fresh mallocs the caller frees. */
int tbon_packet_unpack(const tbon_packet_t *p, const char *fmt, ...);

/* tbon_packet_unpack with a va_list. */
int tbon_packet_vunpack(const tbon_packet_t *p, const char *fmt, va_list ap);

/* Copy field i of p alone (0 first), for code that reads packets of any
 * format: conv is that field's conversion as tbon_packet_format(p) writes
 * it (e.g. "%ald"), and the pointers that follow are those
 * tbon_packet_unpack takes for it (here "int64_t **, size_t *"). Returns 0;
 * TBON_EFORMAT when p has no field i or conv is not its conversion, and
 * TBON_ENOMEM, in both cases without touching any output; TBON_EINVAL for
 * a NULL p or conv. docs/api.md, "Packets of any format". */
int tbon_packet_unpack_field(const tbon_packet_t *p, size_t i, const char *conv, ...);

/* Field i of p (0 first), a %ac, %auc or %s, read in place without a copy:
 * *data points at its bytes inside p (read-only, not NUL-terminated, valid
 * while a reference to p is held; NULL when there are none) and *len is
 * their number. For bulk data: a large packet received is decoded in place,
 * so its bytes are never copied again (docs/api.md, "Large packets").
 * Returns 0; TBON_EFORMAT when p has no field i or it is of another type,
 * without touching any output; TBON_EINVAL for a NULL argument. */
int tbon_packet_bytes(const tbon_packet_t *p, size_t i, const void **data, size_t *len);

/* The packet's tag (0 for a NULL packet). */
int tbon_packet_tag(const tbon_packet_t *p);

/* The packet's format in canonical form: conversions separated by single
 * spaces, e.g. "%d %as"; "" for no fields. Valid as long as p is; NULL for a
 * NULL packet. */
const char *tbon_packet_format(const tbon_packet_t *p);

/* The stream the packet travels on (0 until the library routes it). */
uint32_t tbon_packet_stream(const tbon_packet_t *p);

/* The rank of the node that produced the packet: TBON_RANK_NONE for a packet
 * created locally and not yet sent. */
tbon_rank_t tbon_packet_source(const tbon_packet_t *p);

/* Coverage (docs/api.md, "Coverage"). A result received at the front-end
 * says which back-ends it holds: tbon_packet_covered gives their ranks, in
 * ascending order, at most cap of them into out (out may be NULL with cap
 * 0), and returns how many there are; tbon_packet_expected the back-ends its
 * wave expected (the stream's members that were in the tree when its
 * request went down, and every one it holds); tbon_packet_missing those
 * expected and not held (failed, cut off, or lost with a commnode). A packet
 * a filter made covers every input of its wave; one it passed on unchanged
 * keeps its own. A packet that is no result (made here, or received by a
 * back-end) covers nothing and expects nothing. Thread-safe on a packet
 * nobody changes. */
size_t tbon_packet_covered(const tbon_packet_t *p, tbon_rank_t *out, size_t cap);
size_t tbon_packet_expected(const tbon_packet_t *p, tbon_rank_t *out, size_t cap);
size_t tbon_packet_missing(const tbon_packet_t *p, tbon_rank_t *out, size_t cap);

/* Take one more reference to p; returns p. Thread-safe. */
tbon_packet_t *tbon_packet_ref(tbon_packet_t *p);

/* Drop one reference; the last one frees the packet. NULL is a no-op.
 * Thread-safe. */
void tbon_packet_unref(tbon_packet_t *p);

#ifdef __cplusplus
}
#endif

#endif
