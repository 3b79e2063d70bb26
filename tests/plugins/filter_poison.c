/* filter_poison.c - a test plug-in with a bug a given input sets off:
 *   poison  format "%ld": outputs "%ld", the sum of its inputs (tag of the
 *           first input), unless one input equals the poison value of its up
 *           parameters ("%ld %d": value, how); then, by how:
 *             1 dereferences NULL (SIGSEGV)      2 divides by zero (SIGFPE)
 *             3 abort()s (SIGABRT)               4 recurses without end
 *                                                  (stack overflow: SIGSEGV)
 *             5 spins forever (a hang)           6 sleeps for 1.5 s, then
 *                                                  goes on (slow, not hung);
 *                                                  it first creates the file
 *                                                  $POISON_MARK, if set
 *             8 spins for 3 s, then goes on (hung past a 1 s limit, and
 *               back later: its thread is not lost for the test's run)
 *             7 keeps 1 MiB more on every call, whatever its input (a
 *               leak, given back when the object is unloaded)
 *           Without parameters it never misbehaves.
 *   poison_kept  format "" ("%ld" from back-ends, "%ald" from commnodes):
 *           outputs "%ald", every value of its inputs in order; its state
 *           (F_get_FilterState) is its last output. It misbehaves as poison
 *           does, only over a commnode's output that holds the poison value
 *           (not over the back-end's own answer): a node that gets the
 *           poison as composed state from an orphan is set off as well.
 */
#include <tbon/tbon.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

tbon_filter_fn poison;

const char poison_format_string[] = "%ld";

static volatile int zero, one = 1;

static int deeper(volatile char *p, int d)
{
    volatile char pad[4096];
    pad[0] = (char)d;
    pad[4095] = p ? p[0] : 0;
    if (d > 1000000000)
        return 0;
    return deeper(pad, d + 1) + pad[4095];
}

static void misbehave(int how)
{
    switch (how) {
    case 1: {
        volatile int *volatile p = NULL;
        *p = 1;
        break;
    }
    case 2: {
        volatile int x = one / zero;   /* 1 / x would be a compare */
        (void)x;
        break;
    }
    case 3:
        abort();
    case 4:
        (void)deeper(NULL, 0);
        break;
    case 5:
        for (volatile unsigned long i = 0;; i++)
            ;
    case 8: {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do
            clock_gettime(CLOCK_MONOTONIC, &t1);
        while ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 3000);
        break;
    }
    case 6: {
        const char *mark = getenv("POISON_MARK");
        int fd = mark ? open(mark, O_CREAT | O_WRONLY | O_CLOEXEC, 0600) : -1;
        if (fd >= 0)
            close(fd);
        struct timespec ts = { 1, 500000000 };
        while (nanosleep(&ts, &ts) != 0)
            ;
        break;
    }
    default:
        break;
    }
}

static void **kept_blocks;

/* Unloaded (dlclose at the end of the session): given back, so that a
 * leak checker does not count what was kept on purpose. */
__attribute__((destructor)) static void give_back(void)
{
    while (kept_blocks) {
        void **next = kept_blocks[0];
        free(kept_blocks);
        kept_blocks = next;
    }
}

static void leak_a_mib(void)
{
    void **b = malloc(1 << 20);
    if (!b)
        return;
    memset(b, 0x5a, 1 << 20);
    b[0] = kept_blocks;
    kept_blocks = b;
}

int poison(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out, void **state,
           const tbon_filter_ctx_t *ctx)
{
    int64_t sum = 0, v, bad = 0;
    int32_t how = 0;

    (void)state;
    if (ctx->params && tbon_packet_unpack(ctx->params, "%ld %d", &bad, &how))
        how = 0;
    if (how == 7)
        leak_a_mib();
    for (size_t i = 0; i < n_in; i++) {
        if (tbon_packet_unpack(in[i], "%ld", &v))
            return TBON_EFORMAT;
        if (how && v == bad)
            misbehave(how);
        sum += v;
    }
    if (n_in == 0)
        return 0;
    return tbon_packet_list_push(out, tbon_packet_new(tbon_packet_tag(in[0]), "%ld", sum));
}

tbon_filter_fn poison_kept;
tbon_filter_state_fn poison_kept_get_FilterState;

const char poison_kept_format_string[] = "";

struct kept {
    size_t n;
    int64_t v[];
};

int poison_kept(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out, void **state,
                const tbon_filter_ctx_t *ctx)
{
    int64_t bad = 0, v, *arr = NULL;
    int32_t how = 0;
    size_t n = 0, cap = 0, k;

    if (ctx->params && tbon_packet_unpack(ctx->params, "%ld %d", &bad, &how))
        how = 0;
    for (size_t i = 0; i < n_in; i++) {
        int64_t *a = NULL;
        int scalar = strcmp(tbon_packet_format(in[i]), "%ld") == 0;
        if (scalar ? tbon_packet_unpack(in[i], "%ld", &v) : tbon_packet_unpack(in[i], "%ald", &a, &k)) {
            free(arr);
            return TBON_EFORMAT;
        }
        if (scalar) {
            a = &v;
            k = 1;
        }
        for (size_t j = 0; j < k; j++) {
            if (how && !scalar && a[j] == bad)
                misbehave(how);
            if (n == cap) {
                int64_t *g = realloc(arr, (cap = cap ? 2 * cap : 16) * sizeof *arr);
                if (!g) {
                    free(arr);
                    if (!scalar)
                        free(a);
                    return TBON_ENOMEM;
                }
                arr = g;
            }
            arr[n++] = a[j];
        }
        if (!scalar)
            free(a);
    }
    if (n_in == 0) {
        free(arr);
        return 0;
    }
    struct kept *st = malloc(sizeof *st + n * sizeof st->v[0]);
    if (st) {
        st->n = n;
        memcpy(st->v, arr, n * sizeof *arr);
        free(*state);
        *state = st;
    }
    int rc = tbon_packet_list_push(out, tbon_packet_new(tbon_packet_tag(in[0]), "%ald", arr, n));
    free(arr);
    return rc;
}

tbon_packet_t *poison_kept_get_FilterState(void **state, uint32_t stream)
{
    const struct kept *st = *state;
    (void)stream;
    return st ? tbon_packet_new(100, "%ald", st->v, st->n) : NULL;
}
