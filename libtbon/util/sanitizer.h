/* sanitizer.h - which sanitizer this file is built with, for the library
 * and the tests alike: TB_UNDER_ASAN and TB_UNDER_TSAN, each 1 or 0 (gcc
 * says so with __SANITIZE_*__, clang with __has_feature). */
#ifndef TB_UTIL_SANITIZER_H
#define TB_UTIL_SANITIZER_H

#if defined(__SANITIZE_ADDRESS__)
#define TB_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TB_UNDER_ASAN 1
#endif
#endif
#ifndef TB_UNDER_ASAN
#define TB_UNDER_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define TB_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TB_UNDER_TSAN 1
#endif
#endif
#ifndef TB_UNDER_TSAN
#define TB_UNDER_TSAN 0
#endif

#endif
