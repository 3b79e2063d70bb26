/* packet_fmt.c - packet format strings, field types and element coding */
#include "codec/packet_priv.h"
#include "util/hot.h"

#include "util/error.h"

const char *const tb_ftype_names[TB_F_COUNT] = {
    "%c", "%uc", "%hd", "%uhd", "%d", "%ud", "%ld", "%uld", "%f", "%lf", "%s",
    "%ac", "%auc", "%ahd", "%auhd", "%ad", "%aud", "%ald", "%auld", "%af",
    "%alf", "%as",
};

const uint8_t tb_ftype_name_len[TB_F_COUNT] = {
    2, 3, 3, 4, 2, 3, 3, 4, 2, 3, 2,
    3, 4, 4, 5, 3, 4, 4, 5, 3, 4, 3,
};

const uint8_t tb_ftype_size[TB_F_COUNT] = {
    1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 1,
    1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 0,
};

int tb_ftype_is_array(enum tb_ftype t)
{
    return t >= TB_F_AC && t < TB_F_COUNT;
}

size_t tb_ftype_elem_size(enum tb_ftype t)
{
    return (unsigned)t < TB_F_COUNT ? tb_ftype_size[t] : 0;
}

const char *tb_ftype_name(enum tb_ftype t)
{
    return (unsigned)t < TB_F_COUNT ? tb_ftype_names[t] : "?";
}

enum tb_ftype tb_ftype_elem(enum tb_ftype t)
{
    return tb_ftype_is_array(t) ? (enum tb_ftype)(t - TB_F_AC) : t;
}

int tb_ftype_is_float(enum tb_ftype t)
{
    t = tb_ftype_elem(t);
    return t == TB_F_F || t == TB_F_LF;
}

int tb_ftype_is_signed(enum tb_ftype t)
{
    switch (tb_ftype_elem(t)) {
    case TB_F_C: case TB_F_HD: case TB_F_D: case TB_F_LD: case TB_F_F:
    case TB_F_LF:
        return 1;
    default:
        return 0;
    }
}

size_t tb_fmt_canonical_len(const uint8_t *types, size_t n)
{
    size_t len = n ? n - 1 : 0;
    for (size_t i = 0; i < n; i++)
        len += tb_ftype_name_len[types[i]];
    return len;
}

TB_HOT char *tb_fmt_write_canonical(char *out, const uint8_t *types, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i)
            *out++ = ' ';
        memcpy(out, tb_ftype_names[types[i]], tb_ftype_name_len[types[i]]);
        out += tb_ftype_name_len[types[i]];
    }
    return out;
}

int tb_format_parse(const char *fmt, enum tb_ftype *types, size_t cap,
                    size_t *n, tbon_error_t *err)
{
    struct tb_fmt_iter it;
    size_t count = 0;
    int t;

    if (!fmt)
        return tb_error_set(err, TBON_EFORMAT, "packet format is NULL");
    tb_fmt_init(&it, fmt, strlen(fmt), 0);
    while ((t = tb_fmt_next(&it)) >= 0) {
        if (count < cap)
            types[count] = (enum tb_ftype)t;
        count++;
    }
    if (t == TB_FMT_BAD)
        return tb_error_set(err, TBON_EFORMAT,
                            "packet format \"%s\": bad conversion at character %zu",
                            fmt, it.pos + 1);
    if (n)
        *n = count;
    return 0;
}

int64_t tb_elem_get_i64(enum tb_ftype t, const uint8_t *e)
{
    switch (tb_ftype_elem(t)) {
    case TB_F_C:   return (int8_t)e[0];
    case TB_F_UC:  return e[0];
    case TB_F_HD:  return (int16_t)tb_ld16(e);
    case TB_F_UHD: return tb_ld16(e);
    case TB_F_D:   return (int32_t)tb_ld32(e);
    case TB_F_UD:  return tb_ld32(e);
    case TB_F_LD:
    case TB_F_ULD: return (int64_t)tb_ld64(e);
    default:       return 0;
    }
}

uint64_t tb_elem_get_u64(enum tb_ftype t, const uint8_t *e)
{
    return (uint64_t)tb_elem_get_i64(t, e);
}

double tb_elem_get_f64(enum tb_ftype t, const uint8_t *e)
{
    switch (tb_ftype_elem(t)) {
    case TB_F_F: {
        uint32_t u = tb_ld32(e);
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    case TB_F_LF: {
        uint64_t u = tb_ld64(e);
        double d;
        memcpy(&d, &u, sizeof d);
        return d;
    }
    case TB_F_ULD:
        return (double)tb_ld64(e);
    default:
        return (double)tb_elem_get_i64(t, e);
    }
}

void tb_elem_put_u64(enum tb_ftype t, uint8_t *e, uint64_t v)
{
    switch (tb_ftype_elem(t)) {
    case TB_F_C: case TB_F_UC:   e[0] = (uint8_t)v; break;
    case TB_F_HD: case TB_F_UHD: tb_st16(e, (uint16_t)v); break;
    case TB_F_D: case TB_F_UD:   tb_st32(e, (uint32_t)v); break;
    case TB_F_LD: case TB_F_ULD: tb_st64(e, v); break;
    default: break;
    }
}

void tb_elem_put_f64(enum tb_ftype t, uint8_t *e, double v)
{
    switch (tb_ftype_elem(t)) {
    case TB_F_F: {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        tb_st32(e, u);
        break;
    }
    case TB_F_LF: {
        uint64_t u;
        memcpy(&u, &v, sizeof u);
        tb_st64(e, u);
        break;
    }
    default:
        break;
    }
}
