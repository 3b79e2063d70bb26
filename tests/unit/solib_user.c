/* solib_user.c - a program linked as a user links one against the build
 * tree (-L BUILD/lib -ltbon, no rpath), which test_solib starts with
 * LD_LIBRARY_PATH=BUILD/lib: the dynamic loader must find libtbon.so.0 there.
 * It packs and unpacks a packet through the shared library and prints the
 * file the library was loaded from. Exit 0 when the round trip holds. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tbon/tbon.h>

int main(void)
{
    tbon_packet_t *p = tbon_packet_new(7, "%d %s", 42, "shared");
    if (!p) {
        fprintf(stderr, "solib_user: tbon_packet_new failed\n");
        return 1;
    }
    int v = 0;
    char *s = NULL;
    int rc = tbon_packet_unpack(p, "%d %s", &v, &s);
    int ok = rc == 0 && v == 42 && s && strcmp(s, "shared") == 0;
    free(s);
    tbon_packet_unref(p);
    Dl_info info;
    if (!dladdr((void *)tbon_packet_new, &info) || !info.dli_fname) {
        fprintf(stderr, "solib_user: dladdr found no object for tbon_packet_new\n");
        return 1;
    }
    printf("%s\n", info.dli_fname);
    if (!ok)
        fprintf(stderr, "solib_user: the packet did not round-trip (%d: %s)\n", rc,
                tbon_strerror(rc));
    return ok ? 0 : 1;
}
