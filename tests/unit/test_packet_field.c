/* test_packet_field.c - tbon_packet_unpack_field: each field of a packet
 * copied out alone, whatever its conversion, as tbon_packet_unpack would;
 * the wrong conversion, a field past the end and NULL refused, outputs
 * untouched; and tbon_packet_bytes, a field of bytes read in place.
 * Public API only. */
#include "../harness.h"

#include <tbon/tbon.h>

#include <stdlib.h>
#include <string.h>

/* Every scalar and %s, one at a time, in the order they were packed. */
TEST(every_scalar_field_alone)
{
    tbon_packet_t *p = tbon_packet_new(5, "%c %uc %hd %uhd %d %ud %ld %uld %f %lf %s", 'x',
                                       200, -300, 60000, -70000, 4000000000u,
                                       (int64_t)-5000000000, (uint64_t)18000000000000000000u,
                                       1.5, -2.25, "text");
    REQUIRE(p != NULL);
    char c = 0;
    unsigned char uc = 0;
    int16_t hd = 0;
    uint16_t uhd = 0;
    int32_t d = 0;
    uint32_t ud = 0;
    int64_t ld = 0;
    uint64_t uld = 0;
    float f = 0;
    double lf = 0;
    char *s = NULL;
    CHECK_INT(tbon_packet_unpack_field(p, 0, "%c", &c), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 1, "%uc", &uc), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 2, "%hd", &hd), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 3, "%uhd", &uhd), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 4, "%d", &d), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 5, "%ud", &ud), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 6, "%ld", &ld), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 7, "%uld", &uld), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 8, "%f", &f), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 9, "%lf", &lf), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 10, " %s ", &s), 0);   /* blanks allowed */
    CHECK_INT(c, 'x');
    CHECK_INT(uc, 200);
    CHECK_INT(hd, -300);
    CHECK_INT(uhd, 60000);
    CHECK_INT(d, -70000);
    CHECK(ud == 4000000000u);
    CHECK(ld == (int64_t)-5000000000);
    CHECK(uld == (uint64_t)18000000000000000000u);
    CHECK(f == 1.5f);
    CHECK(lf == -2.25);
    CHECK_STR(s, "text");
    free(s);
    tbon_packet_unref(p);
}

/* Arrays (an empty one comes back NULL with 0) and %as. */
TEST(array_fields_alone)
{
    const int64_t a[] = { 1, -2, 3 };
    const double b[] = { 0.5 };
    const char *const strs[] = { "one", "", "three" };
    tbon_packet_t *p = tbon_packet_new(0, "%ald %alf %aud %as", a, (size_t)3, b, (size_t)1,
                                       (const uint32_t *)NULL, (size_t)0, strs, (size_t)3);
    REQUIRE(p != NULL);
    int64_t *va = NULL;
    double *vb = NULL;
    uint32_t *vc = (uint32_t *)&p;   /* must become NULL */
    char **vs = NULL;
    size_t na = 0, nb = 0, nc = 9, ns = 0;
    CHECK_INT(tbon_packet_unpack_field(p, 0, "%ald", &va, &na), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 1, "%alf", &vb, &nb), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 2, "%aud", &vc, &nc), 0);
    CHECK_INT(tbon_packet_unpack_field(p, 3, "%as", &vs, &ns), 0);
    CHECK_INT(na, 3);
    CHECK(va && va[0] == 1 && va[1] == -2 && va[2] == 3);
    CHECK_INT(nb, 1);
    CHECK(vb && vb[0] == 0.5);
    CHECK(vc == NULL);
    CHECK_INT(nc, 0);
    CHECK_INT(ns, 3);
    if (vs && ns == 3) {
        CHECK_STR(vs[0], "one");
        CHECK_STR(vs[1], "");
        CHECK_STR(vs[2], "three");
        for (size_t k = 0; k < ns; k++)
            free(vs[k]);
    }
    free(va);
    free(vb);
    free(vs);
    tbon_packet_unref(p);
}

/* The wrong conversion, two of them, a field past the end, NULL. */
TEST(refusals_leave_outputs_alone)
{
    tbon_packet_t *p = tbon_packet_new(0, "%d %s", 7, "seven");
    REQUIRE(p != NULL);
    int32_t d = 99;
    uint32_t ud = 99;
    char *s = (char *)"untouched";
    CHECK_INT(tbon_packet_unpack_field(p, 0, "%ud", &ud), TBON_EFORMAT);
    CHECK_INT(tbon_packet_unpack_field(p, 0, "%d %s", &d, &s), TBON_EFORMAT);
    CHECK_INT(tbon_packet_unpack_field(p, 1, "%d", &d), TBON_EFORMAT);
    CHECK_INT(tbon_packet_unpack_field(p, 2, "%d", &d), TBON_EFORMAT);
    CHECK_INT(tbon_packet_unpack_field(p, 0, "%q", &d), TBON_EFORMAT);
    CHECK_INT(tbon_packet_unpack_field(p, 0, "", &d), TBON_EFORMAT);
    CHECK_INT(tbon_packet_unpack_field(NULL, 0, "%d", &d), TBON_EINVAL);
    CHECK_INT(tbon_packet_unpack_field(p, 0, NULL, &d), TBON_EINVAL);
    CHECK_INT(d, 99);
    CHECK_INT(ud, 99);
    CHECK_STR(s, "untouched");
    tbon_packet_t *none = tbon_packet_new(0, "");
    REQUIRE(none != NULL);
    CHECK_INT(tbon_packet_unpack_field(none, 0, "%d", &d), TBON_EFORMAT);
    tbon_packet_unref(none);
    tbon_packet_unref(p);
}

/* tbon_packet_bytes: a field of bytes where it lies in the packet, the
 * same bytes every time; an empty one NULL; any other type, a field past
 * the end and NULL refused, outputs untouched. */
TEST(bytes_read_in_place)
{
    const unsigned char raw[] = { 0, 1, 2, 0xff, 0x80, 'x' };
    const char chars[] = { 'a', 0, 'b' };
    const uint32_t words[] = { 1, 2 };
    tbon_packet_t *p = tbon_packet_new(3, "%d %auc %ac %s %auc %aud", 7, raw, sizeof raw, chars,
                                       sizeof chars, "text", (const unsigned char *)NULL,
                                       (size_t)0, words, (size_t)2);
    REQUIRE(p != NULL);
    const void *b = NULL, *again = NULL;
    size_t n = 0, m = 0;
    CHECK_INT(tbon_packet_bytes(p, 1, &b, &n), 0);
    CHECK_INT((int)n, (int)sizeof raw);
    REQUIRE(b != NULL);
    CHECK(memcmp(b, raw, sizeof raw) == 0);
    CHECK_INT(tbon_packet_bytes(p, 1, &again, &m), 0);
    CHECK(again == b && m == n);        /* in place: no copy made */
    CHECK_INT(tbon_packet_bytes(p, 2, &b, &n), 0);
    CHECK(n == sizeof chars && memcmp(b, chars, sizeof chars) == 0);
    CHECK_INT(tbon_packet_bytes(p, 3, &b, &n), 0);
    CHECK(n == 4 && memcmp(b, "text", 4) == 0);
    CHECK_INT(tbon_packet_bytes(p, 4, &b, &n), 0);
    CHECK(b == NULL && n == 0);
    b = raw;
    n = 99;
    CHECK_INT(tbon_packet_bytes(p, 0, &b, &n), TBON_EFORMAT);       /* %d */
    CHECK_INT(tbon_packet_bytes(p, 5, &b, &n), TBON_EFORMAT);       /* %aud */
    CHECK_INT(tbon_packet_bytes(p, 6, &b, &n), TBON_EFORMAT);       /* past the end */
    CHECK(b == raw && n == 99);
    CHECK_INT(tbon_packet_bytes(NULL, 1, &b, &n), TBON_EINVAL);
    CHECK_INT(tbon_packet_bytes(p, 1, NULL, &n), TBON_EINVAL);
    CHECK_INT(tbon_packet_bytes(p, 1, &b, NULL), TBON_EINVAL);
    tbon_packet_unref(p);
}
