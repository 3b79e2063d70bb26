/* filter_fold.c - the built-in filters sum, min and max: field-wise folds of
 * numeric packets
 *
 * Arithmetic works on the little-endian encoded values in place: the output
 * packet is built as a copy of the first input (the call's only allocation)
 * and the other inputs are folded into it field by field, in the C type of
 * the field, with one tight loop per (operation, type, field, input). Inputs
 * they reject are TBON_EFORMAT with a message naming the input, its source
 * rank and what is wrong (tb_filter_errorf); nothing is output then.
 */
#include "filter/filter.h"
#include "util/hot.h"

#include "codec/packet_int.h"
#include "codec/packet_priv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Up to this many fields are described on the stack when building. */
#define STACK_FIELDS 32

/* ---- little-endian element access: packet_priv.h's loads and stores
 * (single moves on a little-endian host, so the folds still vectorise) ---- */
#define ld16 tb_ld16
#define ld32 tb_ld32
#define ld64 tb_ld64
#define st16 tb_st16
#define st32 tb_st32
#define st64 tb_st64

static inline uint8_t ld8(const uint8_t *b)
{
    return b[0];
}

static inline void st8(uint8_t *b, uint8_t v)
{
    b[0] = v;
}

static inline float ldf(const uint8_t *b)
{
    uint32_t u = ld32(b);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline void stf(uint8_t *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    st32(b, u);
}

static inline double ldlf(const uint8_t *b)
{
    uint64_t u = ld64(b);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline void stlf(uint8_t *b, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    st64(b, u);
}

/* ---- element-wise folds: acc[i] = op(acc[i], in[i]) for n elements ---- */

typedef void fold_fn(uint8_t *acc, const uint8_t *in, size_t n);

/* Integers: sums wrap like the unsigned type of the width (so signed sums
 * wrap two's complement, without C's signed-overflow undefined behaviour);
 * min and max compare in the field's own signedness. */
#define INT_FOLDS(NAME, T, UT, W)                                            \
    TB_HOT static void sum_##NAME(uint8_t *a, const uint8_t *b, size_t n)           \
    {                                                                        \
        for (size_t i = 0; i < n; i++, a += W / 8, b += W / 8)              \
            st##W(a, (UT)(ld##W(a) + ld##W(b)));                             \
    }                                                                        \
    static void min_##NAME(uint8_t *a, const uint8_t *b, size_t n)           \
    {                                                                        \
        for (size_t i = 0; i < n; i++, a += W / 8, b += W / 8)              \
            if ((T)ld##W(b) < (T)ld##W(a))                                   \
                st##W(a, ld##W(b));                                          \
    }                                                                        \
    static void max_##NAME(uint8_t *a, const uint8_t *b, size_t n)           \
    {                                                                        \
        for (size_t i = 0; i < n; i++, a += W / 8, b += W / 8)              \
            if ((T)ld##W(b) > (T)ld##W(a))                                   \
                st##W(a, ld##W(b));                                          \
    }

INT_FOLDS(c, int8_t, uint8_t, 8)
INT_FOLDS(uc, uint8_t, uint8_t, 8)
INT_FOLDS(hd, int16_t, uint16_t, 16)
INT_FOLDS(uhd, uint16_t, uint16_t, 16)
INT_FOLDS(d, int32_t, uint32_t, 32)
INT_FOLDS(ud, uint32_t, uint32_t, 32)
INT_FOLDS(ld, int64_t, uint64_t, 64)
INT_FOLDS(uld, uint64_t, uint64_t, 64)

/* Floats: sums in the field's type (float for %f); min and max skip NaN
 * unless every value is NaN (as fmin and fmax do), which keeps them
 * commutative. */
#define FLT_FOLDS(NAME, T, LD, ST, SZ)                                       \
    TB_HOT static void sum_##NAME(uint8_t *a, const uint8_t *b, size_t n)           \
    {                                                                        \
        for (size_t i = 0; i < n; i++, a += SZ, b += SZ)                     \
            ST(a, (T)(LD(a) + LD(b)));                                       \
    }                                                                        \
    static void min_##NAME(uint8_t *a, const uint8_t *b, size_t n)           \
    {                                                                        \
        for (size_t i = 0; i < n; i++, a += SZ, b += SZ) {                   \
            T x = LD(a), y = LD(b);                                          \
            if (y < x || (isnan(x) && !isnan(y)))                            \
                ST(a, y);                                                    \
        }                                                                    \
    }                                                                        \
    static void max_##NAME(uint8_t *a, const uint8_t *b, size_t n)           \
    {                                                                        \
        for (size_t i = 0; i < n; i++, a += SZ, b += SZ) {                   \
            T x = LD(a), y = LD(b);                                          \
            if (y > x || (isnan(x) && !isnan(y)))                            \
                ST(a, y);                                                    \
        }                                                                    \
    }

FLT_FOLDS(f, float, ldf, stf, 4)
FLT_FOLDS(lf, double, ldlf, stlf, 8)

enum fold_op { OP_SUM, OP_MIN, OP_MAX, OP_COUNT };

/* Indexed by operation and element type (%c .. %lf). */
static fold_fn *const folds[OP_COUNT][TB_F_LF + 1] = {
    { sum_c, sum_uc, sum_hd, sum_uhd, sum_d, sum_ud, sum_ld, sum_uld, sum_f, sum_lf },
    { min_c, min_uc, min_hd, min_uhd, min_d, min_ud, min_ld, min_uld, min_f, min_lf },
    { max_c, max_uc, max_hd, max_uhd, max_d, max_ud, max_ld, max_uld, max_f, max_lf },
};

static const char *const op_names[OP_COUNT] = { "sum", "min", "max" };

/* ---- helpers ---- */

/* 1 for the numeric conversions and their arrays (everything but %s, %as). */
static int numeric(enum tb_ftype t)
{
    return tb_ftype_elem(t) != TB_F_S;
}

/* Where field i of a packet this filter has just built starts. Packets are
 * immutable once shared; this one is not yet (we hold its only reference),
 * so writing into it is how the fold avoids a second buffer. */
static uint8_t *fresh_field(tbon_packet_t *p, size_t i, size_t *count)
{
    return (uint8_t *)(uintptr_t)tb_packet_field(p, i, count);
}

/* A copy of p with stream 0 and no source (one reference), or NULL with the
 * reason left for tb_filter_run. */
TB_HOT static tbon_packet_t *copy_packet(const tbon_packet_t *p)
{
    struct tb_field stack[STACK_FIELDS], *fields = stack;
    size_t n = tb_packet_nfields(p);
    tbon_error_t err;
    tbon_packet_t *q;

    if (n > STACK_FIELDS && !(fields = malloc(n * sizeof *fields))) {
        tb_filter_errorf("out of memory for %zu fields", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        tb_packet_get_field(p, i, &fields[i]);
    if (!(q = tb_packet_build(tbon_packet_tag(p), fields, n, &err)))
        tb_filter_errorf("%s", err.msg);
    if (fields != stack)
        free(fields);
    return q;
}

/* Push p (taking the reference); a push failure is the filter's failure. */
static int push(tbon_packet_list_t *out, tbon_packet_t *p)
{
    int rc = tbon_packet_list_push(out, p);
    if (rc)
        tb_filter_errorf("cannot append the output packet: %s", tbon_strerror(rc));
    return rc;
}

/* ---- sum, min, max ---- */

/* Check that every input has the same numeric fields as in[0], arrays of
 * equal lengths. Returns 0 or TBON_EFORMAT with the reason set. */
static int check_same_numeric(tbon_packet_t *const in[], size_t n, enum fold_op op)
{
    const char *fmt0 = tbon_packet_format(in[0]);
    size_t nf = tb_packet_nfields(in[0]);
    char r0[16], rk[16];

    for (size_t i = 0; i < nf; i++) {
        enum tb_ftype t = tb_packet_field_type(in[0], i);
        if (!numeric(t)) {
            tb_filter_errorf("input 0 (from rank %s): field %zu is %s, not a "
                             "number (%s takes %%c %%uc %%hd %%uhd %%d %%ud %%ld "
                             "%%uld %%f %%lf and their arrays)",
                             tb_filter_rank_str(tbon_packet_source(in[0]), r0),
                             i + 1, tb_ftype_name(t), op_names[op]);
            return TBON_EFORMAT;
        }
    }
    for (size_t k = 1; k < n; k++) {
        if (strcmp(tbon_packet_format(in[k]), fmt0) != 0) {
            tb_filter_errorf("input %zu (from rank %s) has format \"%s\" but "
                             "input 0 (from rank %s) has \"%s\"; %s needs the "
                             "same fields in every input", k,
                             tb_filter_rank_str(tbon_packet_source(in[k]), rk),
                             tbon_packet_format(in[k]),
                             tb_filter_rank_str(tbon_packet_source(in[0]), r0),
                             fmt0, op_names[op]);
            return TBON_EFORMAT;
        }
        for (size_t i = 0; i < nf; i++) {
            size_t c0, ck;
            if (!tb_ftype_is_array(tb_packet_field_type(in[0], i)))
                continue;
            tb_packet_field(in[0], i, &c0);
            tb_packet_field(in[k], i, &ck);
            if (c0 != ck) {
                tb_filter_errorf("field %zu (%s): input %zu (from rank %s) has "
                                 "%zu elements but input 0 (from rank %s) has "
                                 "%zu; %s needs arrays of equal length", i + 1,
                                 tb_ftype_name(tb_packet_field_type(in[0], i)), k,
                                 tb_filter_rank_str(tbon_packet_source(in[k]), rk),
                                 ck,
                                 tb_filter_rank_str(tbon_packet_source(in[0]), r0),
                                 c0, op_names[op]);
                return TBON_EFORMAT;
            }
        }
    }
    return 0;
}

/* The field-wise fold of all inputs into one packet of their format. One
 * input is forwarded as it is (same values, no copy). */
TB_HOT static int fold(tbon_packet_t *const in[], size_t n, tbon_packet_list_t *out,
                enum fold_op op)
{
    tbon_packet_t *p;
    size_t nf;
    int rc;

    if (n == 0)
        return 0;
    if ((rc = check_same_numeric(in, n, op)))
        return rc;
    if (n == 1)
        return push(out, tbon_packet_ref(in[0]));
    if (!(p = copy_packet(in[0])))
        return TBON_ENOMEM;
    nf = tb_packet_nfields(p);
    for (size_t i = 0; i < nf; i++) {
        size_t cnt;
        uint8_t *acc = fresh_field(p, i, &cnt);
        fold_fn *fn = folds[op][tb_ftype_elem(tb_packet_field_type(p, i))];
        for (size_t k = 1; k < n; k++)
            fn(acc, tb_packet_field(in[k], i, NULL), cnt);
    }
    return push(out, p);
}

/* sum, min and max: the tbon_filter_fn faces of fold(); stateless. The
 * contract is in docs/filter-guide.md (the built-ins table). */
TB_HOT int tb_filter_sum(tbon_packet_t *const in[], size_t n, tbon_packet_list_t *out,
                 void **state, const tbon_filter_ctx_t *ctx)
{
    (void)state;
    (void)ctx;
    return fold(in, n, out, OP_SUM);
}

int tb_filter_min(tbon_packet_t *const in[], size_t n, tbon_packet_list_t *out,
                 void **state, const tbon_filter_ctx_t *ctx)
{
    (void)state;
    (void)ctx;
    return fold(in, n, out, OP_MIN);
}

int tb_filter_max(tbon_packet_t *const in[], size_t n, tbon_packet_list_t *out,
                 void **state, const tbon_filter_ctx_t *ctx)
{
    (void)state;
    (void)ctx;
    return fold(in, n, out, OP_MAX);
}
