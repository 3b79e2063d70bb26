/* filter.h - filters inside the library: the registry of built-in and loaded
 * filters, the output list, and running a filter over a wave of packets */
#ifndef TB_FILTER_H
#define TB_FILTER_H

#include <tbon/tbon.h>

#include <stdarg.h>

/* The output list (tbon_packet_list_t of the public API). */
struct tbon_packet_list {
    tbon_packet_t **v;
    size_t n, cap;
};
void tb_plist_init(tbon_packet_list_t *l);
void tb_plist_clear(tbon_packet_list_t *l);  /* releases every packet; l stays usable */
void tb_plist_free(tbon_packet_list_t *l);   /* clear and free the array */
void tb_plist_truncate(tbon_packet_list_t *l, size_t keep);  /* release from index keep on */

/* One filter: built-in (dl == NULL) or loaded from a shared object. */
typedef struct tb_filter {
    int                   id;
    char                 *name;        /* "sum", or the function name */
    char                 *path;        /* the shared object, NULL for built-ins */
    void                 *dl;          /* dlopen handle */
    tbon_filter_fn       *fn;
    const char           *format;      /* F_format_string; "" = any */
    tbon_filter_state_fn *get_state;   /* F_get_FilterState, may be NULL */
    tbon_filter_free_fn  *free_state;  /* F_free_state, may be NULL */
    /* Associative and commutative (built-ins sum, min, max, avg, concat;
     * a plug-in exporting F_associative != 0): partial results may
     * be folded in any grouping and order, so after a failure the tree
     * folds each back-end's contribution exactly once (docs/filter-guide.md,
     * "Exact results when commnodes die"). */
    int                   assoc;
    /* Built-ins only, may be NULL: fold inputs into the state with no output
     * (what a back-end keeps of what it sends); the state must stay usable
     * by fn and get_state. Without it the node runs fn and drops the output. */
    int (*keep)(tbon_packet_t *const in[], size_t n, void **state);
} tb_filter_t;

/* The filters of one process, by id. Ids 0..TBON_FILTER_BUILTIN_COUNT-1 are
 * the built-ins, present from creation. Not thread-safe: one owner thread. */
typedef struct tb_filter_reg tb_filter_reg_t;
tb_filter_reg_t *tb_filter_reg_new(void);
void tb_filter_reg_destroy(tb_filter_reg_t *r);     /* dlcloses; NULL is fine */
/* Instead of destroying it: a call of one of r's filters may still run on a
 * thread left behind (node_fecall.c), so r is kept, its objects loaded, for
 * the process's life. NULL is fine. */
void tb_filter_reg_abandon(tb_filter_reg_t *r);

/* Load func from so_path under id (id < 0: the next free id). Returns the id,
 * or TBON_EFILTER with err->msg naming the file and symbol and including
 * dlerror()'s text (missing file, missing F or F_format_string), or TBON_EINVAL
 * for an id already taken. Loading the same path+func again returns its id. */
int tb_filter_reg_load(tb_filter_reg_t *r, const char *so_path, const char *func,
                       int id, tbon_error_t *err);

/* The filter with this id, or NULL. */
const tb_filter_t *tb_filter_reg_get(const tb_filter_reg_t *r, int id);

/* The built-in with this name ("null", "sum", ...): its id, or TBON_ENOTFOUND. */
int tb_filter_builtin_id(const char *name);

/* Run f over in[0..n): checks every input against f->format first (a
 * mismatch is TBON_EFILTER naming the filter, the expected and the actual
 * format, and nothing runs), then calls f->fn. Appends to out. On a filter
 * error returns its code with err->msg saying which filter failed. */
int tb_filter_run(const tb_filter_t *f, tbon_packet_t *const in[], size_t n,
                  tbon_packet_list_t *out, void **state,
                  const tbon_filter_ctx_t *ctx, tbon_error_t *err);

/* Fold in[0..n) into *state as tb_filter_run would, for a node that drops
 * the output (a back-end keeping what it sends): f->keep where the filter has
 * one, else tb_filter_run with the output released. 0 or the error. */
int tb_filter_keep(const tb_filter_t *f, tbon_packet_t *const in[], size_t n,
                   void **state, const tbon_filter_ctx_t *ctx, tbon_error_t *err);

/* Free a filter's state through F_free_state (or free()) and set *state NULL. */
void tb_filter_state_free(const tb_filter_t *f, void **state);

/* ---- added by the filters work (issue 3 item 4) ---- */

/* The built-in filter with this id (0..TBON_FILTER_BUILTIN_COUNT-1), or NULL.
 * The records are static and shared by every registry. */
const tb_filter_t *tb_filter_builtin(int id);

/* Called by a filter (built-in or plug-in) on the thread running it, just
 * before it returns an error code: the reason, which tb_filter_run puts into
 * err->msg after the filter's name. The last call wins. */
void tb_filter_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tb_filter_verrorf(const char *fmt, va_list ap);
/* The calling thread's message from the filter call running on it ("" if
 * none), and clearing it before the next call. */
const char *tb_filter_msg(void);
void tb_filter_msg_clear(void);

/* The same for plug-ins (public name, exported from the library).
 * TODO(lead): declare it in include/tbon/filter.h. */
void tbon_filter_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A rank for messages: its decimal digits in buf, or "none". Returns buf or
 * a static string. */
const char *tb_filter_rank_str(tbon_rank_t r, char buf[16]);

/* ---- a plug-in's crash stays with its call (filter_guard.c) ---- */

/* What ended a guarded call: the signal, the faulting address, where the
 * code was ("in libpoison.so (poison+0x1c)"). */
typedef struct tb_fault {
    int   sig;
    void *addr;
    void *pc;
    char  where[192];
} tb_fault_t;

/* Run fn(arg) on this thread with SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT
 * caught: 0 if it returned, else the signal that ended it (fault filled). */
int tb_guard_call(void (*fn)(void *), void *arg, tb_fault_t *fault);
/* The handlers, once per process (tb_filter_reg_load calls it). */
void tb_guard_install(void);
/* "SIGSEGV" */
const char *tb_fault_name(int sig);

/* tb_filter_run, tb_filter_keep, tb_filter_get_state and
 * tb_filter_state_free return this when a plug-in crashed (err->msg names
 * the filter, the signal and where); the call's output is dropped, the
 * filter's state is left as the filter left it. */
#define TB_FILTER_CRASHED (-1000)
/* The signal of this thread's last TB_FILTER_CRASHED; set: say so for a
 * call that crashed on another thread (node_fecall.c). */
int tb_filter_crash_signal(void);
void tb_filter_set_crash_signal(int sig);
/* A call that ran past its limit (node_fecall.c). */
#define TB_FILTER_HUNG (-1001)

/* F_get_FilterState through the guard: the state packet, or NULL (none, or
 * the call crashed: then *crashed is set and err says so). */
tbon_packet_t *tb_filter_get_state(const tb_filter_t *f, void **state, uint32_t stream,
                                   int *crashed, tbon_error_t *err);

/* The built-in sum, min and max filters (filter_fold.c). */
tbon_filter_fn tb_filter_sum;
tbon_filter_fn tb_filter_min;
tbon_filter_fn tb_filter_max;

/* The built-in union filter (filter_union.c): filter function, state packet
 * ("%auld" of every value seen; NULL if none yet) and state destructor. */
tbon_filter_fn       tb_filter_union;
tbon_filter_state_fn tb_filter_union_get_state;
tbon_filter_free_fn  tb_filter_union_free_state;
int tb_filter_union_keep(tbon_packet_t *const in[], size_t n, void **state);

#endif
