/* harness.h - a small test harness: TEST() cases, CHECK macros, one fork per case
 *
 * Each test binary links harness.c, which provides main(). Every TEST runs in
 * its own child process with an alarm (TBON_TEST_TIMEOUT seconds, default 60),
 * so a crash or hang fails that case only. A run prints one line per case and
 * ends with "NAME: N passed, N failed"; tests/run.sh adds those up.
 * Run one case with: build/tests/unit/test_x CASE_NAME (several: each named);
 * list them with: build/tests/unit/test_x --list ("NAME" or "NAME long").
 * TEST_LONG cases are skipped when TBON_TEST_TIER=short (named on the
 * command line, they run whatever the tier).
 */
#ifndef TB_HARNESS_H
#define TB_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*th_fn)(void);
/* long: the case runs only in the full tier (see TEST_LONG). */
void th_register(const char *name, th_fn fn, int is_long);
void th_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
extern int th_failures;   /* failures in the current case */

#define TH_CASE(name, is_long)                                            \
    static void name(void);                                               \
    __attribute__((constructor)) static void th_reg_##name(void)          \
    { th_register(#name, name, is_long); }                                \
    static void name(void)

#define TEST(name) TH_CASE(name, 0)

/* A case too long to run once per build: it runs in the full tier (the
 * plain build of `make check`, `make san`, `make tsan`, a binary run by
 * hand) and is left out of the short tier (TBON_TEST_TIER=short: the
 * sanitizer builds of `make check`, tests/run.sh --short). Mark a case so
 * when it takes more than about 4 s under a sanitizer and what it checks
 * is not mainly memory or thread safety (a fixed pause, thousands of
 * streams, a long schedule); tests/run.sh lists the slowest cases of each
 * tier at its end. */
#define TEST_LONG(name) TH_CASE(name, 1)

#define CHECK(cond) do { if (!(cond))                                     \
    th_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); } while (0)

/* CHECK and stop the case (for pointers the rest depends on). */
#define REQUIRE(cond) do { if (!(cond)) {                                 \
    th_fail(__FILE__, __LINE__, "REQUIRE(%s)", #cond); return; } } while (0)

#define CHECK_INT(a, b) do { long long th_a = (long long)(a),             \
    th_b = (long long)(b); if (th_a != th_b)                              \
    th_fail(__FILE__, __LINE__, "%s == %lld, expected %s == %lld",        \
            #a, th_a, #b, th_b); } while (0)

#define CHECK_UINT(a, b) do { unsigned long long th_a =                   \
    (unsigned long long)(a), th_b = (unsigned long long)(b);              \
    if (th_a != th_b) th_fail(__FILE__, __LINE__,                         \
    "%s == %llu, expected %s == %llu", #a, th_a, #b, th_b); } while (0)

#define CHECK_STR(a, b) do { const char *th_a = (a), *th_b = (b);         \
    if (!th_a || !th_b || strcmp(th_a, th_b) != 0)                        \
    th_fail(__FILE__, __LINE__, "%s == \"%s\", expected \"%s\"",          \
            #a, th_a ? th_a : "(null)", th_b ? th_b : "(null)"); } while (0)

#define CHECK_MEM(a, b, n) do { if (memcmp((a), (b), (n)) != 0)           \
    th_fail(__FILE__, __LINE__, "%s and %s differ in their first %zu bytes", \
            #a, #b, (size_t)(n)); } while (0)

/* A scratch directory for the current case, removed after it ends. Its
 * name is chosen before the case starts, so that the harness can still look
 * into it and remove it when the case dies (a crash, its time out): it
 * shows the last lines of the files in its logs/ folder (th_dump_logs),
 * where an integration case keeps its processes' logs and its front-end's. */
const char *th_tmpdir(void);

/* The last lines of every file in dir that has any (40 of front-end.log,
 * 12 of the others), on stderr. */
void th_dump_logs(const char *dir);

/* Write text to a fresh file in th_tmpdir(); returns its path (static buffer
 * per call slot, valid until the case ends). */
const char *th_write_file(const char *name, const char *text);

/* The whole of a small file as a malloc'd string ("" if it is missing;
 * NULL when out of memory). */
char *th_read_file(const char *path);

/* Wait (at most ms) until process pid has exec'ed name (its /proc/PID/comm
 * starts with it) and exec has set up its environment (/proc/PID/environ is
 * not empty). 1 once it has, 0 on time-out. */
int th_wait_comm(int pid, const char *name, int ms);

/* Deterministic pseudo-random numbers (xorshift64*), so that a failing case
 * reproduces: the next value from *state, which must not be 0. */
uint64_t th_rand(uint64_t *state);

/* Fill p[0..n) with bytes that depend only on seed (any value, 0 too). */
void th_fill_random(void *p, size_t n, uint64_t seed);

#endif
