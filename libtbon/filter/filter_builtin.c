/* filter_builtin.c - the built-in filters null, avg and concat, and the
 * table of all built-ins (sum, min and max are in filter_fold.c, union in
 * filter_union.c)
 *
 * They are ordinary tbon_filter_fn functions with the format string "" (they
 * check their inputs themselves, because each accepts a family of formats),
 * so the node runs them exactly as it runs a plug-in. An input they reject
 * is TBON_EFORMAT with a message (tb_filter_errorf) naming the input, its
 * source rank and what is wrong; nothing is output then.
 */
#include "filter/filter.h"

#include "codec/packet_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* 1 for the numeric conversions and their arrays (everything but %s, %as). */
static int numeric(enum tb_ftype t)
{
    return tb_ftype_elem(t) != TB_F_S;
}

/* Push p (taking the reference); a push failure is the filter's failure. */
static int push(tbon_packet_list_t *out, tbon_packet_t *p)
{
    int rc = tbon_packet_list_push(out, p);
    if (rc)
        tb_filter_errorf("cannot append the output packet: %s", tbon_strerror(rc));
    return rc;
}

/* ---- null ---- */

/* Forwards every input unchanged (a reference each), keeping its source. */
static int f_null(tbon_packet_t *const in[], size_t n, tbon_packet_list_t *out,
                  void **state, const tbon_filter_ctx_t *ctx)
{
    (void)state;
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        int rc = push(out, tbon_packet_ref(in[i]));
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- avg ---- */

/* The mean over all back-ends, not a mean of means: below the FE (depth > 0)
 * the output is the partial "%lf %uld" (sum, count); at the FE (depth 0, or
 * no ctx) it is "%lf" sum / count (NaN for a count of 0). Inputs are one
 * numeric scalar (a back-end's value, counting 1) or such a partial. */
static int f_avg(tbon_packet_t *const in[], size_t n, tbon_packet_list_t *out,
                 void **state, const tbon_filter_ctx_t *ctx)
{
    struct tb_field f[2];
    uint8_t sb[8], cb[8];
    double sum = 0;
    uint64_t count = 0;
    tbon_error_t err;
    tbon_packet_t *p;
    char rb[16];

    (void)state;
    if (n == 0)
        return 0;
    for (size_t k = 0; k < n; k++) {
        size_t nf = tb_packet_nfields(in[k]);
        enum tb_ftype t = nf ? tb_packet_field_type(in[k], 0) : TB_F_COUNT;
        const uint8_t *d = tb_packet_field(in[k], 0, NULL);
        if (nf == 2 && t == TB_F_LF && tb_packet_field_type(in[k], 1) == TB_F_ULD) {
            sum += tb_elem_get_f64(TB_F_LF, d);
            count += tb_elem_get_u64(TB_F_ULD, tb_packet_field(in[k], 1, NULL));
        } else if (nf == 1 && numeric(t) && !tb_ftype_is_array(t)) {
            sum += tb_elem_get_f64(t, d);
            count++;
        } else {
            tb_filter_errorf("input %zu (from rank %s) has format \"%s\"; avg "
                             "takes one numeric scalar (%%c %%uc %%hd %%uhd %%d "
                             "%%ud %%ld %%uld %%f %%lf) from a back-end, or its "
                             "own partial \"%%lf %%uld\" (sum, count)", k,
                             tb_filter_rank_str(tbon_packet_source(in[k]), rb),
                             tbon_packet_format(in[k]));
            return TBON_EFORMAT;
        }
    }
    f[0] = (struct tb_field){ TB_F_LF, 1, sb, 8 };
    f[1] = (struct tb_field){ TB_F_ULD, 1, cb, 8 };
    if (ctx && ctx->depth > 0) {
        tb_elem_put_f64(TB_F_LF, sb, sum);
        tb_elem_put_u64(TB_F_ULD, cb, count);
        p = tb_packet_build(tbon_packet_tag(in[0]), f, 2, &err);
    } else {
        tb_elem_put_f64(TB_F_LF, sb, count ? sum / (double)count : NAN);
        p = tb_packet_build(tbon_packet_tag(in[0]), f, 1, &err);
    }
    if (!p) {
        tb_filter_errorf("%s", err.msg);
        return err.code;
    }
    return push(out, p);
}

/* ---- concat ---- */

/* One array of every input's elements in input order. Each input is one
 * field: a scalar X or an array %aX of one element type for all inputs
 * (strings too: %s and %as make %as). One array input is forwarded. */
static int f_concat(tbon_packet_t *const in[], size_t n, tbon_packet_list_t *out,
                    void **state, const tbon_filter_ctx_t *ctx)
{
    enum tb_ftype elem = TB_F_COUNT;
    struct tb_field f;
    size_t count = 0, size = 0, off = 0;
    uint8_t *buf = NULL;
    tbon_error_t err;
    tbon_packet_t *p;
    char r0[16], rk[16];

    (void)state;
    (void)ctx;
    if (n == 0)
        return 0;
    for (size_t k = 0; k < n; k++) {
        if (tb_packet_nfields(in[k]) != 1) {
            tb_filter_errorf("input %zu (from rank %s) has format \"%s\"; concat "
                             "takes one field per input (X or %%aX)", k,
                             tb_filter_rank_str(tbon_packet_source(in[k]), rk),
                             tbon_packet_format(in[k]));
            return TBON_EFORMAT;
        }
        tb_packet_get_field(in[k], 0, &f);
        if (k == 0)
            elem = tb_ftype_elem(f.type);
        if (tb_ftype_elem(f.type) != elem) {
            tb_filter_errorf("input %zu (from rank %s) is \"%s\" but input 0 "
                             "(from rank %s) is \"%s\"; concat needs one element "
                             "type in every input (X and %%aX mix)", k,
                             tb_filter_rank_str(tbon_packet_source(in[k]), rk),
                             tbon_packet_format(in[k]),
                             tb_filter_rank_str(tbon_packet_source(in[0]), r0),
                             tbon_packet_format(in[0]));
            return TBON_EFORMAT;
        }
        /* A lone %s becomes one encoded string of the %as: length + bytes. */
        size_t add = f.type == TB_F_S ? 4 + f.size : f.size;
        count += f.type == TB_F_S ? 1 : f.count;
        if (add > TB_PACKET_MAX_PAYLOAD - size || count > UINT32_MAX) {
            tb_filter_errorf("the concatenation of %zu inputs is larger than a "
                             "packet can be", n);
            return TBON_EFORMAT;
        }
        size += add;
    }
    if (n == 1 && tb_ftype_is_array(tb_packet_field_type(in[0], 0)))
        return push(out, tbon_packet_ref(in[0]));
    if (size && !(buf = malloc(size))) {
        tb_filter_errorf("out of memory for %zu bytes", size);
        return TBON_ENOMEM;
    }
    for (size_t k = 0; k < n; k++) {
        tb_packet_get_field(in[k], 0, &f);
        if (f.type == TB_F_S) {
            tb_elem_put_u64(TB_F_UD, buf + off, f.size);
            off += 4;
        }
        if (f.size)
            memcpy(buf + off, f.data, f.size);
        off += f.size;
    }
    f = (struct tb_field){ (enum tb_ftype)(elem + TB_F_AC), count, buf, size };
    p = tb_packet_build(tbon_packet_tag(in[0]), &f, 1, &err);
    free(buf);
    if (!p) {
        tb_filter_errorf("%s", err.msg);
        return err.code;
    }
    return push(out, p);
}

/* ---- the table ---- */

#define BUILTIN(ID, NAME, FN, ASSOC) \
    [ID] = { .id = ID, .name = NAME, .fn = FN, .format = "", .assoc = ASSOC }
static const tb_filter_t builtins[TBON_FILTER_BUILTIN_COUNT] = {
    BUILTIN(TBON_FILTER_NULL, "null", f_null, 0),
    BUILTIN(TBON_FILTER_SUM, "sum", tb_filter_sum, 1),
    BUILTIN(TBON_FILTER_MIN, "min", tb_filter_min, 1),
    BUILTIN(TBON_FILTER_MAX, "max", tb_filter_max, 1),
    BUILTIN(TBON_FILTER_AVG, "avg", f_avg, 1),
    BUILTIN(TBON_FILTER_CONCAT, "concat", f_concat, 1),
    /* union is associative too, but idempotent and state recoverable: it
     * keeps seed 003's state composition (an orphan's composed state joins
     * the next wave), which duplicates cannot hurt. */
    [TBON_FILTER_UNION] = { .id = TBON_FILTER_UNION, .name = "union",
                            .fn = tb_filter_union, .format = "",
                            .get_state = tb_filter_union_get_state,
                            .free_state = tb_filter_union_free_state,
                            .keep = tb_filter_union_keep },
};
#undef BUILTIN

const tb_filter_t *tb_filter_builtin(int id)
{
    if (id < 0 || id >= TBON_FILTER_BUILTIN_COUNT)
        return NULL;
    return &builtins[id];
}

int tb_filter_builtin_id(const char *name)
{
    for (int i = 0; name && i < TBON_FILTER_BUILTIN_COUNT; i++)
        if (strcmp(builtins[i].name, name) == 0)
            return i;
    return TBON_ENOTFOUND;
}
