/* sanitizer.h - which sanitizer a test is built with (UNDER_ASAN,
 * UNDER_TSAN: 1 or 0), and TH_TSAN_MALLOC_MAY_FAIL(), for a test that
 * limits its address space: under ThreadSanitizer malloc must then return
 * NULL, as libc's does, where the sanitizer's allocator would end the
 * process (TSAN_OPTIONS, read after it, can still override it). Use the
 * macro once, at file scope, in the test's one source file. */
#ifndef TB_TEST_SANITIZER_H
#define TB_TEST_SANITIZER_H

#include "util/sanitizer.h"

#define UNDER_ASAN TB_UNDER_ASAN
#define UNDER_TSAN TB_UNDER_TSAN

#if UNDER_TSAN
#define TH_TSAN_MALLOC_MAY_FAIL()                                         \
    const char *__tsan_default_options(void);                             \
    const char *__tsan_default_options(void)                              \
    {                                                                     \
        return "allocator_may_return_null=1";                             \
    }
#else
#define TH_TSAN_MALLOC_MAY_FAIL()
#endif

#endif
