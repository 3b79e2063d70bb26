/* filter.h - the filter plug-in interface: what a filter exports and what it gets */
#ifndef TBON_FILTER_H
#define TBON_FILTER_H

#include <stddef.h>
#include <stdint.h>
#include <tbon/common.h>
#include <tbon/packet.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Built-in filter ids (tbon_fe_load_filter returns ids above these). */
#define TBON_FILTER_NULL   0   /* forwards every input unchanged */
#define TBON_FILTER_SUM    1   /* field-wise sum of numeric fields (arrays element-wise) */
#define TBON_FILTER_MIN    2
#define TBON_FILTER_MAX    3
#define TBON_FILTER_AVG    4   /* mean over all back-ends: (sum, count) travels up, "%lf" at the FE */
#define TBON_FILTER_CONCAT 5   /* one array of every input's elements, in child order */
#define TBON_FILTER_UNION  6   /* sorted set of %auld; idempotent; state recoverable */
#define TBON_FILTER_BUILTIN_COUNT 7

/* Upstream synchronisation modes. */
#define TBON_SYNC_WAITFORALL 0 /* one packet from every live child makes a wave */
#define TBON_SYNC_DONTWAIT   1 /* every packet is filtered as soon as it arrives */
#define TBON_SYNC_TIMEOUT    2 /* wait for all, or until the timeout after the wave's first packet */

/* Targets of tbon_stream_set_filter_params. */
#define TBON_FILTER_PARAM_UP   0
#define TBON_FILTER_PARAM_DOWN 1
#define TBON_FILTER_PARAM_SYNC 2
/* "%ud": how long (ms) one call of the stream's plug-in filters may run
 * before its node is taken for failed (default $TBON_FILTER_LIMIT_MS, else
 * 5000; 0: no limit). docs/filter-guide.md, "When a filter crashes or hangs". */
#define TBON_FILTER_PARAM_LIMIT 3

/* The output list a filter appends to. */
typedef struct tbon_packet_list tbon_packet_list_t;

/* Where and for what a filter runs. */
typedef struct tbon_filter_ctx {
    tbon_rank_t rank;            /* where the filter runs */
    uint32_t    num_children;
    uint32_t    depth;           /* 0 at the FE */
    uint32_t    stream;
    const tbon_packet_t *params; /* last tbon_stream_set_filter_params packet, or NULL */
} tbon_filter_ctx_t;

/* Append p to out; takes the reference. Returns 0, or TBON_ENOMEM (p is then
 * released) or TBON_EINVAL for a NULL argument. */
int tbon_packet_list_push(tbon_packet_list_t *out, tbon_packet_t *p);

/* Called by a filter, on the thread running it, just before it returns an
 * error code: the reason (printf-like), which the node reports after the
 * filter's name and file. The last call of a run wins. */
void tbon_filter_error(const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* The shapes of what a plug-in exports for a filter named F:
 *   int F(...)                           tbon_filter_fn
 *   const char F_format_string[]         expected input format; "" takes any
 *   tbon_packet_t *F_get_FilterState(...) optional: state composition
 *   void F_free_state(void *state)       optional
 * F may keep state across waves in *state (NULL at first); it must not keep
 * the input packets without taking a reference (tbon_packet_ref). */
typedef int tbon_filter_fn(tbon_packet_t *const in[], size_t n_in,
                           tbon_packet_list_t *out, void **state,
                           const tbon_filter_ctx_t *ctx);
typedef tbon_packet_t *tbon_filter_state_fn(void **state, uint32_t stream);
typedef void tbon_filter_free_fn(void *state);

#ifdef __cplusplus
}
#endif

#endif
