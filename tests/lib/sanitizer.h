/* sanitizer.h - which sanitizer a test is built with (UNDER_ASAN,
 * UNDER_TSAN: 1 or 0), and TH_TSAN_MALLOC_MAY_FAIL(), for a test that
 * limits its address space: under ThreadSanitizer malloc must then return
 * NULL, as libc's does, where the sanitizer's allocator would end the
 * process (TSAN_OPTIONS, read after it, can still override it). Use the
 * macro once, at file scope, in the test's one source file. */
#ifndef TB_TEST_SANITIZER_H
#define TB_TEST_SANITIZER_H

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

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
