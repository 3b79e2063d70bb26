/* filter.c - the filter registry (built-ins and dlopen'd plug-ins) and
 * running a filter over a wave of packets
 *
 * The built-in filters themselves are in filter_builtin.c (null, avg,
 * concat), filter_fold.c (sum, min, max) and filter_union.c (union); what a
 * call hands back (its output list, its error message) in filter_out.c. Plug-ins export F,
 * F_format_string and optionally F_get_FilterState and F_free_state; the
 * last two follow the get_FilterState routine of seed 003 section V-B.
 */
#include "filter/filter.h"
#include "util/hot.h"

#include "util/error.h"
#include "codec/packet_int.h"
#include "util/array.h"
#include "util/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A plug-in calls the library (tbon_filter_error, tbon_packet_*). A
 * process that loaded libtbon.so with RTLD_LOCAL - Python's ctypes and
 * cffi, a tool's own dlopen - keeps those symbols out of the global scope,
 * and the plug-in's dlopen failed with "undefined symbol". Opening the
 * library again with RTLD_NOLOAD | RTLD_GLOBAL promotes the copy already
 * loaded to the global scope (nothing new is loaded). A program linked
 * with libtbon.a exports them itself (-rdynamic, the Makefile); there
 * dladdr names the program, and nothing is done. */
static pthread_once_t promote_once = PTHREAD_ONCE_INIT;

static void promote_self(void)
{
    Dl_info di;
    if (!dladdr((void *)(uintptr_t)promote_self, &di) || !di.dli_fname ||
        !strstr(di.dli_fname, "libtbon.so"))
        return;
    void *self = dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    if (self)
        dlclose(self);      /* the promotion stays; the count is as it was */
    else
        TB_WARN("filter", "cannot make %s's symbols global for plug-ins: %s", di.dli_fname,
                dlerror());
}

/* Ids come from the FE over the wire to commnodes: bound them so a bad id
 * cannot make the registry allocate an enormous table. */
#define TB_FILTER_MAX_ID 65535

/* Longest function name accepted (the symbol names add a suffix to it). */
#define TB_FILTER_MAX_NAME 255

struct tb_filter_reg {
    tb_filter_t **v;   /* indexed by id; entries below the built-in count unused */
    size_t        cap;
    struct tb_filter_reg *kept_next;   /* tb_filter_reg_abandon's list */
};

/* Registries kept for the process's life (tb_filter_reg_abandon). */
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;
static tb_filter_reg_t *kept;

/* ---- the registry ---- */

tb_filter_reg_t *tb_filter_reg_new(void)
{
    return calloc(1, sizeof(tb_filter_reg_t));
}

/* Free one loaded filter record and drop its dlopen reference. */
static void filter_free(tb_filter_t *f)
{
    if (!f)
        return;
    if (f->dl)
        dlclose(f->dl);
    free(f->name);
    free(f->path);
    free(f);
}

/* Frees every loaded filter and dlcloses its object: the caller frees the
 * filters' states first, since F_free_state lives in that object. */
void tb_filter_reg_destroy(tb_filter_reg_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->cap; i++)
        filter_free(r->v[i]);
    free(r->v);
    free(r);
}

void tb_filter_reg_abandon(tb_filter_reg_t *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&kept_mu);
    r->kept_next = kept;
    kept = r;
    pthread_mutex_unlock(&kept_mu);
}

const tb_filter_t *tb_filter_reg_get(const tb_filter_reg_t *r, int id)
{
    if (id < 0)
        return NULL;
    if (id < TBON_FILTER_BUILTIN_COUNT)
        return tb_filter_builtin(id);
    if (!r || (size_t)id >= r->cap)
        return NULL;
    return r->v[id];
}

/* The id of a loaded filter with this path and function (or, if dl is not
 * NULL, this dlopen handle and function), or -1. */
static int reg_find(const tb_filter_reg_t *r, const char *path, void *dl,
                    const char *func)
{
    for (size_t i = TBON_FILTER_BUILTIN_COUNT; i < r->cap; i++) {
        const tb_filter_t *f = r->v[i];
        if (f && strcmp(f->name, func) == 0 &&
            (dl ? f->dl == dl : strcmp(f->path, path) == 0))
            return (int)i;
    }
    return -1;
}

/* The lowest free id at or above the built-ins. */
static int reg_next_id(const tb_filter_reg_t *r)
{
    size_t i = TBON_FILTER_BUILTIN_COUNT;
    while (i < r->cap && r->v[i])
        i++;
    return (int)i;
}

/* Make room for index id. Returns 0 or TBON_ENOMEM. */
static int reg_reserve(tb_filter_reg_t *r, size_t id)
{
    if (id < r->cap)
        return 0;
    size_t cap = r->cap ? r->cap : 16;
    while (cap <= id)
        cap *= 2;
    tb_filter_t **v = realloc(r->v, cap * sizeof *v);
    if (!v)
        return TBON_ENOMEM;
    memset(v + r->cap, 0, (cap - r->cap) * sizeof *v);
    r->v = v;
    r->cap = cap;
    return 0;
}

/* dlsym that tells "absent" from "present": returns 0 and the address, or -1
 * with the dlerror() text in *why. */
static int lookup(void *dl, const char *sym, void **addr, const char **why)
{
    dlerror();
    *addr = dlsym(dl, sym);
    const char *e = dlerror();
    if (e) {
        *why = e;
        return TBON_ENOTFOUND;
    }
    return 0;
}

/* The plug-in's symbols into f (f->dl open): F and F_format_string (a
 * valid format) required; F_get_FilterState, F_free_state and
 * F_associative optional. 0, or TBON_EFILTER (err names what is wrong). */
static int resolve(tb_filter_t *f, const char *so_path, const char *func, tbon_error_t *err)
{
    char sym[TB_FILTER_MAX_NAME + 32];
    const char *why;
    void *addr;
    why = "the symbol is NULL";
    if (lookup(f->dl, func, &addr, &why) || !addr) {
        return tb_error_set(err, TBON_EFILTER, "%s: no filter function \"%s\": %s",
                            so_path, func, why);
    }
    /* POSIX guarantees dlsym's data pointer converts to a function pointer;
     * memcpy says so without a cast ISO C does not define. */
    memcpy(&f->fn, &addr, sizeof addr);
    snprintf(sym, sizeof sym, "%s_format_string", func);
    why = "the symbol is NULL";
    if (lookup(f->dl, sym, &addr, &why) || !addr) {
        return tb_error_set(err, TBON_EFILTER, "%s: filter \"%s\" lacks \"%s\" "
                            "(export: const char %s[] = \"...\"; \"\" accepts any "
                            "format): %s", so_path, func, sym, sym, why);
    }
    f->format = addr;
    {
        tbon_error_t perr = {0};
        if (tb_format_parse(f->format, NULL, 0, NULL, &perr) != 0) {
            return tb_error_set(err, TBON_EFILTER, "%s: filter \"%s\": %s is not "
                                "a valid format: %s", so_path, func, sym, perr.msg);
        }
    }
    /* The optional two: absent means not state recoverable / free(). */
    snprintf(sym, sizeof sym, "%s_get_FilterState", func);
    if (lookup(f->dl, sym, &addr, &why) == 0 && addr)
        memcpy(&f->get_state, &addr, sizeof addr);
    snprintf(sym, sizeof sym, "%s_free_state", func);
    if (lookup(f->dl, sym, &addr, &why) == 0 && addr)
        memcpy(&f->free_state, &addr, sizeof addr);
    /* Optional too: const int F_associative = 1 earns exact results when
     * commnodes die (docs/filter-guide.md). */
    snprintf(sym, sizeof sym, "%s_associative", func);
    if (lookup(f->dl, sym, &addr, &why) == 0 && addr)
        f->assoc = *(const int *)addr != 0;
    return 0;
}

int tb_filter_reg_load(tb_filter_reg_t *r, const char *so_path, const char *func,
                       int id, tbon_error_t *err)
{
    const char *why;
    void *dl = NULL;
    tb_filter_t *f = NULL;
    int rc, old;

    if (!r || !so_path || !func || !*so_path || !*func)
        return tb_error_set(err, TBON_EINVAL, "loading a filter needs a shared "
                            "object path and a function name");
    if (strlen(func) > TB_FILTER_MAX_NAME)
        return tb_error_set(err, TBON_EINVAL, "%s: filter function name of %zu "
                            "characters; the limit is %d", so_path, strlen(func),
                            TB_FILTER_MAX_NAME);
    if (id >= 0 && (id < TBON_FILTER_BUILTIN_COUNT || id > TB_FILTER_MAX_ID))
        return tb_error_set(err, TBON_EINVAL, "%s: cannot load filter \"%s\" as "
                            "id %d: ids %d..%d are for loaded filters", so_path,
                            func, id, TBON_FILTER_BUILTIN_COUNT, TB_FILTER_MAX_ID);
    old = reg_find(r, so_path, NULL, func);
    if (old >= 0 && (id < 0 || id == old))
        return old;
    if (id >= 0 && (size_t)id < r->cap && r->v[id])
        return tb_error_set(err, TBON_EINVAL, "%s: cannot load filter \"%s\" as "
                            "id %d: that id is filter \"%s\" of %s", so_path, func,
                            id, r->v[id]->name, r->v[id]->path);

    pthread_once(&promote_once, promote_self);
    if (!(dl = dlopen(so_path, RTLD_NOW | RTLD_LOCAL))) {
        why = dlerror();
        return tb_error_set(err, TBON_EFILTER, "%s: cannot load filter \"%s\": %s",
                            so_path, func, why ? why : "dlopen failed");
    }
    /* The same object under another name (a symlink, "./x.so" and "x.so"):
     * dlopen hands back the handle it already has. */
    old = reg_find(r, so_path, dl, func);
    if (old >= 0 && id < 0) {
        dlclose(dl);
        return old;
    }
    if (!(f = calloc(1, sizeof *f))) {
        rc = tb_error_set(err, TBON_ENOMEM, "out of memory loading %s", so_path);
        goto error;
    }
    f->dl = dl;
    dl = NULL;
    if ((rc = resolve(f, so_path, func, err)) != 0)
        goto error;
    if (!(f->name = strdup(func)) || !(f->path = strdup(so_path))) {
        rc = tb_error_set(err, TBON_ENOMEM, "out of memory loading %s", so_path);
        goto error;
    }
    if (id < 0)
        id = reg_next_id(r);
    if (id > TB_FILTER_MAX_ID) {
        rc = tb_error_set(err, TBON_EINVAL, "%s: cannot load filter \"%s\": all "
                          "ids up to %d are taken", so_path, func, TB_FILTER_MAX_ID);
        goto error;
    }
    if (reg_reserve(r, (size_t)id)) {
        rc = tb_error_set(err, TBON_ENOMEM, "out of memory loading %s", so_path);
        goto error;
    }
    f->id = id;
    r->v[id] = f;
    tb_guard_install();     /* its calls run guarded: filter_guard.c */
    return id;

error:
    filter_free(f);
    if (dl)
        dlclose(dl);
    return rc;
}

/* ---- running a filter ---- */

/* 1 if p matches the filter's format: "" takes anything; the canonical form
 * is compared first because that is what a plug-in usually writes. */
static int format_ok(const tb_filter_t *f, const tbon_packet_t *p)
{
    return !f->format || !f->format[0] ||
           strcmp(tbon_packet_format(p), f->format) == 0 ||
           tb_packet_format_matches(p, f->format);
}

/* Check f and its inputs before a run: 0, or the error (nothing runs). */
TB_HOT static int run_check(const tb_filter_t *f, tbon_packet_t *const in[], size_t n,
                     tbon_error_t *err)
{
    char rb[16];
    for (size_t i = 0; i < n; i++) {
        if (!in[i])
            return tb_error_set(err, TBON_EINVAL, "filter \"%s\": input %zu is NULL",
                                f->name, i);
        if (!format_ok(f, in[i]))
            return tb_error_set(err, TBON_EFILTER, "filter \"%s\" expects format "
                                "\"%s\" but input %zu (from rank %s) has \"%s\"",
                                f->name, f->format, i,
                                tb_filter_rank_str(tbon_packet_source(in[i]), rb),
                                tbon_packet_format(in[i]));
    }
    tb_filter_msg_clear();
    return 0;
}

/* The error of a filter call that returned rc != 0, named as filter.h says. */
static int run_error(const tb_filter_t *f, int rc, tbon_error_t *err)
{
    if (rc > 0)
        rc = TBON_EFILTER;
    const char *msg = tb_filter_msg();
    if (msg[0])
        return tb_error_set(err, rc, "filter \"%s\"%s%s: %s", f->name,
                            f->path ? " of " : "", f->path ? f->path : "",
                            msg);
    return tb_error_set(err, rc, "filter \"%s\"%s%s failed: %s", f->name,
                        f->path ? " of " : "", f->path ? f->path : "",
                        tbon_strerror(rc));
}

/* ---- plug-in calls through the guard ---- */

struct run_call {
    const tb_filter_t *f;
    tbon_packet_t *const *in;
    size_t n;
    tbon_packet_list_t *out;
    void **state;
    const tbon_filter_ctx_t *ctx;
    int rc;
};

static void run_fn(void *arg)
{
    struct run_call *c = arg;
    c->rc = c->f->fn(c->in, c->n, c->out, c->state, c->ctx);
}

struct state_call {
    const tb_filter_t *f;
    void **state;
    uint32_t stream;
    tbon_packet_t *pkt;
};

static void state_fn(void *arg)
{
    struct state_call *c = arg;
    c->pkt = c->f->get_state(c->state, c->stream);
}

struct free_call {
    const tb_filter_t *f;
    void *state;
};

static void free_fn(void *arg)
{
    struct free_call *c = arg;
    c->f->free_state(c->state);
}

/* A plug-in's call (what: "F", "F_get_FilterState", "F_free_state") ended
 * with a fault: TB_FILTER_CRASHED, err naming the filter, the signal and
 * where. */
static _Thread_local int last_crash_sig;

int tb_filter_crash_signal(void)
{
    return last_crash_sig;
}

void tb_filter_set_crash_signal(int sig)
{
    last_crash_sig = sig;
}

static int crashed(const tb_filter_t *f, const char *what, const tb_fault_t *fault,
                   tbon_error_t *err)
{
    char addr[48] = "";
    last_crash_sig = fault->sig;
    if (fault->sig == SIGSEGV || fault->sig == SIGBUS)
        snprintf(addr, sizeof addr, " at address %p", fault->addr);
    return tb_error_set(err, TB_FILTER_CRASHED, "filter \"%s\" of %s crashed (%s%s %s%s%s)",
                        f->name, f->path ? f->path : "?", tb_fault_name(fault->sig), addr,
                        fault->where, strcmp(what, "F") ? " in its " : "",
                        strcmp(what, "F") ? what : "");
}

/* See filter.h. Also: a failed call's partial output is dropped from out, and
 * err->msg is 'filter "NAME" [of PATH]: REASON' with the reason the filter
 * gave through tb_filter_errorf / tbon_filter_error, or "failed: " and the
 * code's description if it gave none. */
TB_HOT int tb_filter_run(const tb_filter_t *f, tbon_packet_t *const in[], size_t n,
                  tbon_packet_list_t *out, void **state,
                  const tbon_filter_ctx_t *ctx, tbon_error_t *err)
{
    size_t keep;
    int rc;

    if (!f || !f->fn || !out || !state || (n && !in))
        return tb_error_set(err, TBON_EINVAL, "running a filter needs the filter, "
                            "its inputs, an output list and a state pointer");
    if ((rc = run_check(f, in, n, err)))
        return rc;
    keep = out->n;
    if (f->dl) {
        /* A plug-in: its crash stays with this call (filter_guard.c). */
        struct run_call c = { f, in, n, out, state, ctx, 0 };
        tb_fault_t fault;
        if (tb_guard_call(run_fn, &c, &fault)) {
            /* what it pushed before the fault is dropped, as after an error */
            tb_plist_truncate(out, keep);
            return crashed(f, "F", &fault, err);
        }
        rc = c.rc;
    } else {
        rc = f->fn(in, n, out, state, ctx);
    }
    if (rc == 0)
        return 0;
    /* A partial output is not a result: drop what the failed call pushed. */
    tb_plist_truncate(out, keep);
    return run_error(f, rc, err);
}

tbon_packet_t *tb_filter_get_state(const tb_filter_t *f, void **state, uint32_t stream,
                                   int *was_crash, tbon_error_t *err)
{
    if (was_crash)
        *was_crash = 0;
    if (!f || !f->get_state || !state)
        return NULL;
    if (!f->dl)
        return f->get_state(state, stream);
    struct state_call c = { f, state, stream, NULL };
    tb_fault_t fault;
    if (tb_guard_call(state_fn, &c, &fault)) {
        if (was_crash)
            *was_crash = 1;
        crashed(f, "F_get_FilterState", &fault, err);
        return NULL;
    }
    return c.pkt;
}

int tb_filter_keep(const tb_filter_t *f, tbon_packet_t *const in[], size_t n,
                   void **state, const tbon_filter_ctx_t *ctx, tbon_error_t *err)
{
    int rc;
    if (!f || !f->keep) {
        tbon_packet_list_t out;
        tb_plist_init(&out);
        rc = tb_filter_run(f, in, n, &out, state, ctx, err);
        tb_plist_free(&out);
        return rc;
    }
    if (!state || (n && !in))
        return tb_error_set(err, TBON_EINVAL, "keeping needs the inputs and a state pointer");
    if ((rc = run_check(f, in, n, err)))
        return rc;
    rc = f->keep(in, n, state);
    return rc ? run_error(f, rc, err) : 0;
}

void tb_filter_state_free(const tb_filter_t *f, void **state)
{
    if (!state || !*state)
        return;
    if (f && f->free_state && f->dl) {
        struct free_call c = { f, *state };
        tb_fault_t fault;
        tbon_error_t err;
        if (tb_guard_call(free_fn, &c, &fault)) {
            crashed(f, "F_free_state", &fault, &err);
            TB_ERROR("filter", "%s; its state is left allocated", err.msg);
        }
    } else if (f && f->free_state)
        f->free_state(*state);
    else
        free(*state);
    *state = NULL;
}
