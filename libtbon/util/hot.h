/* hot.h - TB_HOT marks a function that runs for every wave or frame in a
 * front-end, commnode or back-end. GCC places such functions together
 * (.text.hot), so that a wave touches a dozen pages of the library's code
 * rather than forty: in a tree of a thousand processes on a few cores each
 * process runs with cold caches and TLBs, and a page touched costs more than
 * the instructions run on it (docs/architecture.md, "Code layout";
 * bench/RESULTS.md). Keep it to what bench/hot.sh finds on a wave's path.
 * TB_COLD marks what runs only when something went wrong (a log line, an
 * error message): the compiler moves the branches that call it out of the
 * hot functions, which keeps those small. */
#ifndef TB_UTIL_HOT_H
#define TB_UTIL_HOT_H

#if defined(__GNUC__)
#define TB_HOT __attribute__((hot))
#define TB_COLD __attribute__((cold))
#else
#define TB_HOT
#define TB_COLD
#endif

#endif
