/* test_bigmem.c - large buffers kept for reuse (util/bigmem.c): what is
 * kept, what a request gets back, the bounds, and threads at once. */
#include "../harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/bigmem.h"
#include "lib/sanitizer.h"

#define MIB ((size_t)1 << 20)

/* Under AddressSanitizer nothing is kept (every block freed, for its
 * use-after-free reports): a freed block is gone. */
#define KEEPS (!UNDER_ASAN)

TEST(freed_block_comes_back_for_the_same_size)
{
    tb_big_trim();
    uint8_t *p = tb_big_alloc(8 * MIB);
    REQUIRE(p != NULL);
    CHECK_INT((uintptr_t)p % (2 * MIB), 0);       /* whole huge pages */
    memset(p, 0x5a, 8 * MIB);
    tb_big_free(p);
    size_t bytes = 0;
    CHECK_INT(tb_big_kept(&bytes), KEEPS ? 1 : 0);
    CHECK(KEEPS ? bytes >= 8 * MIB : bytes == 0);
    uint8_t *q = tb_big_alloc(8 * MIB - 100);
    REQUIRE(q != NULL);
    CHECK_INT(tb_big_kept(NULL), 0);
    /* the pages lent back read as what was there or as zeros, and write */
    if (KEEPS) {
        CHECK(q == p);
        CHECK(q[0] == 0x5a || q[0] == 0);
    }
    memset(q, 1, 8 * MIB - 100);
    CHECK(q[8 * MIB - 101] == 1);
    free(q);    /* any kept block is a C library block */
}

TEST(block_too_small_or_twice_too_large_is_not_given)
{
    tb_big_trim();
    void *p = tb_big_alloc(16 * MIB);
    REQUIRE(p != NULL);
    tb_big_free(p);
    void *big = tb_big_alloc(32 * MIB);     /* over p's size */
    void *small = tb_big_alloc(4 * MIB);    /* p is over twice this */
    REQUIRE(big && small);
    CHECK(big != p && small != p);
    CHECK_INT(tb_big_kept(NULL), KEEPS ? 1 : 0);
    void *q = tb_big_alloc(9 * MIB);        /* within: p */
    if (KEEPS)
        CHECK(q == p);
    tb_big_free(q);
    tb_big_free(big);
    tb_big_free(small);
    CHECK_INT(tb_big_kept(NULL), KEEPS ? 3 : 0);
    tb_big_trim();
    CHECK_INT(tb_big_kept(NULL), 0);
}

TEST(small_and_unaligned_blocks_are_freed)
{
    tb_big_trim();
    tb_big_free(NULL);
    tb_big_free(malloc(100));
    char *u = malloc(6 * MIB + 1);      /* not on a huge page boundary */
    REQUIRE(u != NULL);
    if ((uintptr_t)u % (2 * MIB) == 0) {
        free(u);
        u = NULL;
    }
    tb_big_free(u);
    CHECK_INT(tb_big_kept(NULL), 0);
}

/* More than the bound of buffers (256) or bytes (4 GiB of address space):
 * the oldest go, the newest stay. */
TEST(bounds_give_the_oldest_back)
{
    if (!KEEPS)
        return;
    tb_big_trim();
    enum { N = 300 };
    static void *v[N];
    for (int i = 0; i < N; i++)
        REQUIRE((v[i] = tb_big_alloc(4 * MIB)) != NULL);
    for (int i = 0; i < N; i++)
        tb_big_free(v[i]);
    size_t bytes = 0;
    CHECK_INT(tb_big_kept(&bytes), 256);
    /* the last one freed is kept, the first is not */
    void *q = tb_big_alloc(4 * MIB);
    int newest = 0;
    for (int i = N - 256; i < N; i++)
        newest |= q == v[i];
    CHECK(newest);
    tb_big_free(q);
    /* two blocks of 3 GiB of address space (untouched: no memory) */
    void *a = tb_big_alloc((size_t)3 << 30), *b = tb_big_alloc((size_t)3 << 30);
    if (a && b) {
        tb_big_free(a);
        tb_big_free(b);
        CHECK(tb_big_kept(&bytes) >= 1);
        CHECK(bytes <= (size_t)4 << 30);
        CHECK(tb_big_alloc((size_t)3 << 30) == b);      /* the newer */
        tb_big_trim();
        free(b);
    } else {
        free(a);
        free(b);
    }
    tb_big_trim();
}

static void *churn(void *arg)
{
    uintptr_t seed = (uintptr_t)arg;
    /* (few: under AddressSanitizer every one is a fresh mapping) */
    for (int i = 0; i < (KEEPS ? 500 : 50); i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        size_t n = 4 * MIB + (seed >> 40) % (4 * MIB);
        uint8_t *p = tb_big_alloc(n);
        if (!p)
            return (void *)1;
        p[0] = (uint8_t)i;
        p[n - 1] = (uint8_t)i;
        if (p[0] != (uint8_t)i || p[n - 1] != (uint8_t)i)
            return (void *)1;
        tb_big_free(p);
    }
    return NULL;
}

/* Threads taking and giving back at once (ThreadSanitizer runs this). */
TEST(threads_at_once)
{
    tb_big_trim();
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++)
        REQUIRE(pthread_create(&t[i], NULL, churn, (void *)(i + 1)) == 0);
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        CHECK(r == NULL);
    }
    CHECK(tb_big_kept(NULL) <= 256);
    tb_big_trim();
}

/* A block under the huge-page size, of the size a 1 MiB packet takes, is
 * kept too: the C library would map it afresh each time. */
TEST(block_of_a_mib_is_kept)
{
    tb_big_trim();
    void *p = tb_big_alloc(MIB);
    REQUIRE(p != NULL);
    tb_big_free(p);
    CHECK_INT(tb_big_kept(NULL), KEEPS ? 1 : 0);
    void *q = tb_big_alloc(MIB - 4096);
    if (KEEPS)
        CHECK(q == p);
    tb_big_free(q);
    void *s = malloc(100 << 10);        /* under TB_BIG_KEEP_MIN */
    tb_big_free(s);
    CHECK_INT(tb_big_kept(NULL), KEEPS ? 1 : 0);
    tb_big_trim();
}

static atomic_int forking_done;

static void *churn_until_done(void *arg)
{
    (void)arg;
    while (!atomic_load(&forking_done)) {
        void *p = tb_big_alloc(MIB);
        tb_big_free(p);
    }
    return NULL;
}

/* A child forked while another thread takes and gives back buffers gets
 * its own first large buffer (the lock is not left held in it). Under
 * ThreadSanitizer the child only takes the lock: gcc 12's runtime does not
 * hold its own large-block allocator's lock across fork, and a child
 * forked while the other thread is in it waits for ever in malloc (seen
 * once in 70 runs, stack in the runtime's LargeMmapAllocator). The same
 * under AddressSanitizer, whose buffers are never kept (KEEPS), so that
 * every one comes from its allocator (a child stuck so once in a make
 * check on a loaded machine). */
TEST(fork_while_another_thread_keeps)
{
    tb_big_trim();
    atomic_store(&forking_done, 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, churn_until_done, NULL) == 0);
    int stuck = 0;
    for (int i = 0; i < 50 && !stuck; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(10);      /* a child stuck on the lock dies of it */
            if (UNDER_TSAN || UNDER_ASAN)
                _exit(tb_big_kept(NULL) <= 1 ? 0 : 1);
            void *p = tb_big_alloc(MIB);
            tb_big_free(p);
            _exit(p ? 0 : 1);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            stuck = 1;
    }
    atomic_store(&forking_done, 1);
    pthread_join(t, NULL);
    CHECK(!stuck);
    tb_big_trim();
}
