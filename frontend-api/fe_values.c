/* fe_values.c - a packet's values as tbon_frontend prints them, readable or
 * as JSON, whatever its format: each field's conversion is read from the
 * canonical format and the field copied out through the public API
 * (tbon_packet_unpack_field). */
#include "fe_values.h"

#include "fe_cli.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Human output shows at most this many elements of an array (JSON: all). */
#define HUMAN_MAX_ELEMS 64

/* s[0..n) as a JSON string. jansson takes UTF-8 only and a packet string
 * is bytes: a byte outside a valid UTF-8 sequence becomes U+FFFD, so that
 * every line stays valid JSON. NULL when out of memory. */
json_t *fe_json_bytes(const uint8_t *s, size_t n)
{
    json_t *j = json_stringn((const char *)s, n);
    if (j)
        return j;
    char *u = malloc(3 * n + 1);
    if (!u)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        /* The length the first byte announces; jansson says whether the
         * sequence is valid (no overlong form, no surrogate). */
        size_t len = s[i] < 0xc0 ? 1 : s[i] < 0xe0 ? 2 : s[i] < 0xf0 ? 3 : 4;
        json_t *seq = s[i] >= 0x80 && len <= n - i ? json_stringn((const char *)s + i, len)
                                                   : NULL;
        if (s[i] < 0x80 || seq) {
            memcpy(u + k, s + i, len);
            k += len;
            i += len;
        } else {
            memcpy(u + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        }
        json_decref(seq);
    }
    j = json_stringn(u, k);
    free(u);
    return j;
}

/* A string in quotes, escaped as in JSON (readable lines show strings so). */
static void print_string(FILE *f, const uint8_t *s, size_t n)
{
    json_t *j = fe_json_bytes(s, n);
    if (!j || json_dumpf(j, f, JSON_ENCODE_ANY) != 0)
        fputs("\"?\"", f);
    json_decref(j);
}

/* A field of a packet of any format, copied out through the public API
 * (tbon_packet_unpack_field): its conversion from the packet's format, and
 * its values in host order. */
struct field {
    char   kind;        /* 'i' signed (%c too), 'u' unsigned, 'f' float, 's' string */
    int    array;       /* one of the %a conversions */
    size_t size;        /* bytes per number */
    size_t count;       /* elements (1 for a scalar) */
    void  *data;        /* the numbers; the string; for %as the strings */
    union { int8_t c; uint8_t uc; int16_t hd; uint16_t uhd; int32_t d; uint32_t ud;
            int64_t ld; uint64_t uld; float f; double lf; } one;   /* a scalar's room */
};

/* The element types, as a conversion names them after '%' or "%a". */
static const struct {
    const char *name;
    char        kind;
    size_t      size;
} elems[] = {
    { "c", 'i', 1 }, { "uc", 'u', 1 }, { "hd", 'i', 2 }, { "uhd", 'u', 2 }, { "d", 'i', 4 },
    { "ud", 'u', 4 }, { "ld", 'i', 8 }, { "uld", 'u', 8 }, { "f", 'f', 4 }, { "lf", 'f', 8 },
    { "s", 's', 0 },
};

/* Copy a scalar of element type e (elems[e]) into fl->one. */
static int unpack_scalar(const tbon_packet_t *p, size_t i, const char *conv, size_t e,
                         struct field *fl)
{
    switch (e) {
    case 0:  return tbon_packet_unpack_field(p, i, conv, (char *)&fl->one.c);
    case 1:  return tbon_packet_unpack_field(p, i, conv, &fl->one.uc);
    case 2:  return tbon_packet_unpack_field(p, i, conv, &fl->one.hd);
    case 3:  return tbon_packet_unpack_field(p, i, conv, &fl->one.uhd);
    case 4:  return tbon_packet_unpack_field(p, i, conv, &fl->one.d);
    case 5:  return tbon_packet_unpack_field(p, i, conv, &fl->one.ud);
    case 6:  return tbon_packet_unpack_field(p, i, conv, &fl->one.ld);
    case 7:  return tbon_packet_unpack_field(p, i, conv, &fl->one.uld);
    case 8:  return tbon_packet_unpack_field(p, i, conv, &fl->one.f);
    case 9:  return tbon_packet_unpack_field(p, i, conv, &fl->one.lf);
    default: return tbon_packet_unpack_field(p, i, conv, (char **)&fl->data);
    }
}

/* Copy an array of element type e (elems[e]) into fl->data, fl->count. */
static int unpack_array(const tbon_packet_t *p, size_t i, const char *conv, size_t e,
                        struct field *fl)
{
    void **d = &fl->data;
    size_t *n = &fl->count;
    switch (e) {
    case 0:  return tbon_packet_unpack_field(p, i, conv, (char **)d, n);
    case 1:  return tbon_packet_unpack_field(p, i, conv, (unsigned char **)d, n);
    case 2:  return tbon_packet_unpack_field(p, i, conv, (int16_t **)d, n);
    case 3:  return tbon_packet_unpack_field(p, i, conv, (uint16_t **)d, n);
    case 4:  return tbon_packet_unpack_field(p, i, conv, (int32_t **)d, n);
    case 5:  return tbon_packet_unpack_field(p, i, conv, (uint32_t **)d, n);
    case 6:  return tbon_packet_unpack_field(p, i, conv, (int64_t **)d, n);
    case 7:  return tbon_packet_unpack_field(p, i, conv, (uint64_t **)d, n);
    case 8:  return tbon_packet_unpack_field(p, i, conv, (float **)d, n);
    case 9:  return tbon_packet_unpack_field(p, i, conv, (double **)d, n);
    default: return tbon_packet_unpack_field(p, i, conv, (char ***)d, n);
    }
}

/* The number of fields of p: its canonical format has one conversion per
 * field, single spaces between them. */
static size_t nfields(const tbon_packet_t *p)
{
    const char *fmt = tbon_packet_format(p);
    size_t n = fmt && *fmt ? 1 : 0;
    for (const char *s = fmt; n && *s; s++)
        n += *s == ' ';
    return n;
}

/* Field i of p into *fl (release it with field_free): 0, or -1 when it
 * cannot be read (no such field, out of memory). */
static int field_get(const tbon_packet_t *p, size_t i, struct field *fl)
{
    const char *s = tbon_packet_format(p);
    memset(fl, 0, sizeof *fl);
    for (size_t k = 0; s && *s && k < i; s++)
        k += *s == ' ';
    if (!s || *s != '%')
        return -1;
    char conv[8];
    size_t len = strcspn(s, " ");
    if (len >= sizeof conv)
        return -1;
    memcpy(conv, s, len);
    conv[len] = '\0';
    fl->array = conv[1] == 'a';
    const char *name = conv + 1 + fl->array;
    size_t e = 0;
    while (e < sizeof elems / sizeof elems[0] && strcmp(elems[e].name, name) != 0)
        e++;
    if (e == sizeof elems / sizeof elems[0])
        return -1;
    fl->kind = elems[e].kind;
    fl->size = elems[e].size;
    fl->count = fl->array ? 0 : 1;
    int rc = fl->array ? unpack_array(p, i, conv, e, fl) : unpack_scalar(p, i, conv, e, fl);
    if (!fl->array && fl->kind != 's')
        fl->data = &fl->one;
    return rc == 0 ? 0 : -1;
}

static void field_free(struct field *fl)
{
    if (fl->array && fl->kind == 's')
        for (size_t k = 0; k < fl->count; k++)
            free(((char **)fl->data)[k]);
    if (fl->data != &fl->one)
        free(fl->data);
}

/* Element k of an integer field as a signed value (an unsigned one's bits),
 * or of a floating one. */
static int64_t elem_i64(const struct field *fl, size_t k)
{
    const void *d = fl->data;
    if (fl->kind == 'u')
        return (int64_t)(fl->size == 1 ? ((const uint8_t *)d)[k]
                         : fl->size == 2 ? ((const uint16_t *)d)[k]
                         : fl->size == 4 ? ((const uint32_t *)d)[k] : ((const uint64_t *)d)[k]);
    return fl->size == 1 ? ((const int8_t *)d)[k] : fl->size == 2 ? ((const int16_t *)d)[k]
           : fl->size == 4 ? ((const int32_t *)d)[k] : ((const int64_t *)d)[k];
}

static double elem_f64(const struct field *fl, size_t k)
{
    return fl->size == 4 ? ((const float *)fl->data)[k] : ((const double *)fl->data)[k];
}

/* Element k of a string field: its bytes (a %s has one). */
static const char *elem_str(const struct field *fl, size_t k)
{
    return fl->array ? ((char *const *)fl->data)[k] : fl->data;
}

/* One numeric element k of fl. */
static void print_number(FILE *f, const struct field *fl, size_t k)
{
    if (fl->kind == 'f')
        fprintf(f, "%.10g", elem_f64(fl, k));
    else if (fl->kind == 'i')
        fprintf(f, "%" PRId64, elem_i64(fl, k));
    else
        fprintf(f, "%" PRIu64, (uint64_t)elem_i64(fl, k));
}

/* Field i of p: a number, a string, or [elements] for an array. */
static void print_field(FILE *f, const tbon_packet_t *p, size_t i)
{
    struct field fl;

    if (field_get(p, i, &fl) != 0) {
        field_free(&fl);
        fputc('?', f);
        return;
    }
    if (!fl.array) {
        if (fl.kind == 's')
            print_string(f, (const uint8_t *)fl.data, strlen(fl.data));
        else
            print_number(f, &fl, 0);
        field_free(&fl);
        return;
    }
    size_t shown = fl.count <= HUMAN_MAX_ELEMS ? fl.count : HUMAN_MAX_ELEMS;
    fputc('[', f);
    for (size_t k = 0; k < shown; k++) {
        if (k)
            fputs(", ", f);
        if (fl.kind == 's')
            print_string(f, (const uint8_t *)elem_str(&fl, k), strlen(elem_str(&fl, k)));
        else
            print_number(f, &fl, k);
    }
    if (shown < fl.count)
        fprintf(f, ", ... (%zu more)", fl.count - shown);
    fputc(']', f);
    field_free(&fl);
}

/* Every field of p, comma-separated. */
void fe_print_values(FILE *f, const tbon_packet_t *p)
{
    size_t n = nfields(p);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputs(", ", f);
        print_field(f, p, i);
    }
    if (!n)
        fputs("(no values)", f);
}

/* ---- the same as JSON values ---- */

/* One numeric element k of fl; NULL when out of memory. */
static json_t *json_number(const struct field *fl, size_t k)
{
    if (fl->kind == 'f') {
        double d = elem_f64(fl, k);
        return isfinite(d) ? json_real(d) : json_null();   /* JSON has no NaN or infinity */
    }
    if (fl->kind == 'i')
        return json_integer(elem_i64(fl, k));
    /* jansson's integers are signed 64-bit: a larger unsigned value is
     * written as a double (which is what most JSON readers make of it). */
    uint64_t u = (uint64_t)elem_i64(fl, k);
    return u <= INT64_MAX ? json_integer((json_int_t)u) : json_real((double)u);
}

/* Element k of fl (a string or a number); NULL when out of memory. */
static json_t *json_elem(const struct field *fl, size_t k)
{
    if (fl->kind != 's')
        return json_number(fl, k);
    const char *s = elem_str(fl, k);
    return fe_json_bytes((const uint8_t *)s, strlen(s));
}

/* Field i of p: a number, a string, an array of every element, or null
 * when it cannot be read. NULL when out of memory. */
static json_t *json_field(const tbon_packet_t *p, size_t i)
{
    struct field fl;

    if (field_get(p, i, &fl) != 0) {
        field_free(&fl);
        return json_null();
    }
    json_t *a = fl.array ? json_array() : json_elem(&fl, 0);
    for (size_t k = 0; fl.array && a && k < fl.count; k++) {
        if (json_array_append_new(a, json_elem(&fl, k)) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    field_free(&fl);
    return a;
}

/* Every field of p as a JSON array; NULL when out of memory. */
json_t *fe_json_values(const tbon_packet_t *p)
{
    json_t *a = json_array();
    for (size_t i = 0, n = nfields(p); a && i < n; i++) {
        if (json_array_append_new(a, json_field(p, i)) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

/* o on one line of stdout, compact, and released; what (a result, an
 * event) names it on stderr if it cannot be made (o NULL) or written. */
void fe_print_json_line(json_t *o, const char *what)
{
    if (!o || json_dumpf(o, stdout, JSON_COMPACT) != 0)
        fprintf(stderr, PROG ": cannot write %s as JSON (out of memory)\n", what);
    else
        putchar('\n');
    json_decref(o);
}
