/* filter_fe_only.c - a plug-in that loads only where the process defines
 * tbon_test_fe_only (the test front-ends do, and export it): at commnodes
 * and back-ends its dlopen fails with "undefined symbol", as a plug-in
 * built against a library the compute nodes lack does. For the test of an
 * all-or-nothing tbon_fe_load_filter (test_filter_fault).
 *   fe_only  any input: the inputs' packets passed on, as the null filter
 */
#include <tbon/tbon.h>

int tbon_test_fe_only(void);        /* not in libtbon: in the test program */

tbon_filter_fn fe_only;

const char fe_only_format_string[] = "";

int fe_only(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out, void **state,
            const tbon_filter_ctx_t *ctx)
{
    (void)state;
    (void)ctx;
    int k = tbon_test_fe_only();
    for (size_t i = 0; i < n_in; i++)
        if (k && tbon_packet_list_push(out, tbon_packet_ref(in[i])) != 0)
            return TBON_ENOMEM;
    return 0;
}
