/* relay.c - children's stderr copied to ours, first lines kept (relay.h) */
#include "proc/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "util/error.h"
#include "util/log.h"
#include "net/loop.h"
#include "util/array.h"

#define LINE_MAX_KEPT 400
#define CHUNK 65536

struct pipe_ent {
    tb_io_t io;                   /* in the relay's loop (arg: the relay) */
    tbon_rank_t rank;
    int    fd;                    /* -1 once at end of file */
    char   line[LINE_MAX_KEPT];   /* the first non-empty line, or what came of it */
    size_t len;
    int    done;                  /* line is complete */
};

struct tb_relay {
    pthread_mutex_t mu;           /* guards everything below but the thread */
    struct pipe_ent **ents;
    size_t n, cap;
    tb_loop_t *loop;              /* net/loop.h: the pipes (the thread runs it) */
    char *buf;                    /* the thread's */
    int stop;
    int started;
    pthread_t thread;
};

tb_relay_t *tb_relay_new(void)
{
    tb_relay_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

/* A log line's time stamp ("2026-11-25T09:02:05.186608Z ") is noise in a
 * message that quotes it. */
static size_t stamp_len(const char *s, size_t len)
{
    if (len < 21 || s[4] != '-' || s[7] != '-' || s[10] != 'T')
        return 0;
    const char *z = memchr(s, ' ', len);
    return z && z[-1] == 'Z' ? (size_t)(z - s) + 1 : 0;
}

/* Keep the first non-empty line of what e sent (under mu). */
static void note_line(struct pipe_ent *e, const char *buf, size_t len)
{
    for (size_t i = 0; i < len && !e->done; i++) {
        char c = buf[i];
        if (c == '\n') {
            size_t skip = stamp_len(e->line, e->len);
            memmove(e->line, e->line + skip, e->len - skip);
            e->len -= skip;
            while (e->len && (e->line[e->len - 1] == ' ' || e->line[e->len - 1] == '\r'))
                e->len--;
            if (e->len)
                e->done = 1;
            continue;
        }
        if (e->len + 1 < sizeof e->line && (c == '\t' || (unsigned char)c >= ' '))
            e->line[e->len++] = c;
    }
    e->line[e->len] = 0;
}

/* Read what e's pipe holds (under mu) into buf; at end of file close it. */
static size_t drain(tb_relay_t *r, struct pipe_ent *e, char *buf, size_t cap)
{
    size_t got = 0;
    while (e->fd >= 0 && got < cap) {
        ssize_t n = read(e->fd, buf + got, cap - got);
        if (n > 0) {
            note_line(e, buf + got, (size_t)n);
            got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        tb_loop_forget(r->loop, &e->io);
        close(e->fd);
        e->fd = -1;
    }
    return got;
}

static void on_pipe(tb_io_t *io, uint32_t events)
{
    (void)events;
    tb_relay_t *r = io->arg;
    struct pipe_ent *e = (struct pipe_ent *)((char *)io - offsetof(struct pipe_ent, io));
    pthread_mutex_lock(&r->mu);
    size_t got = drain(r, e, r->buf, CHUNK);
    pthread_mutex_unlock(&r->mu);
    tb_write_stderr(STDERR_FILENO, r->buf, got);
}

static void *relay_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "tbon-relay");
    tb_relay_t *r = arg;
    for (;;) {
        if (tb_loop_wait(r->loop, -1) < 0)
            break;
        pthread_mutex_lock(&r->mu);
        int stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop)
            break;
    }
    return NULL;
}

/* The loop and the thread, with the first pipe (under mu). */
static int start(tb_relay_t *r)
{
    if (r->started)
        return 0;
    r->loop = tb_loop_new(NULL, NULL);
    r->buf = malloc(CHUNK);
    if (!r->loop || !r->buf || pthread_create(&r->thread, NULL, relay_thread, r) != 0) {
        tb_loop_destroy(r->loop);
        free(r->buf);
        r->loop = NULL;
        r->buf = NULL;
        return TBON_EIO;
    }
    r->started = 1;
    return 0;
}

int tb_relay_add(tb_relay_t *r, tbon_rank_t rank, int fd)
{
    struct pipe_ent *e = calloc(1, sizeof *e);
    int rc = e ? 0 : TBON_ENOMEM;
    pthread_mutex_lock(&r->mu);
    if (!rc && TB_ARRAY_ROOM(r->ents, r->n, r->cap, 16))
        rc = TBON_ENOMEM;
    if (!rc)
        rc = start(r);
    if (!rc) {
        e->rank = rank;
        e->fd = fd;
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        e->io = (tb_io_t){ .fd = fd, .fn = on_pipe, .arg = r };
        if (tb_loop_watch(r->loop, &e->io, EPOLLIN) < 0)
            rc = TBON_EIO;
    }
    if (!rc)
        r->ents[r->n++] = e;
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        free(e);
        close(fd);
    }
    return rc;
}

int tb_relay_first_line(tb_relay_t *r, tbon_rank_t rank, char *out, size_t len)
{
    if (!r || !len)
        return 0;
    char *buf = malloc(CHUNK);
    size_t got = 0;
    int have = 0;
    out[0] = 0;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n; i++) {
        struct pipe_ent *e = r->ents[i];
        if (e->rank != rank)
            continue;
        if (buf)
            got = drain(r, e, buf, CHUNK);
        if (e->len) {
            size_t l = e->len < len - 1 ? e->len : len - 1;
            memcpy(out, e->line, l);
            out[l] = 0;
            have = 1;
        }
        break;
    }
    pthread_mutex_unlock(&r->mu);
    if (buf)
        tb_write_stderr(STDERR_FILENO, buf, got);
    free(buf);
    return have;
}

void tb_relay_destroy(tb_relay_t *r)
{
    if (!r)
        return;
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->stop = 1;
        pthread_mutex_unlock(&r->mu);
        tb_loop_wake(r->loop);
        pthread_join(r->thread, NULL);
    }
    char *buf = malloc(CHUNK);
    for (size_t i = 0; i < r->n; i++) {
        struct pipe_ent *e = r->ents[i];
        if (buf)
            tb_write_stderr(STDERR_FILENO, buf, drain(r, e, buf, CHUNK));
        if (e->fd >= 0)
            close(e->fd);
        free(e);
    }
    free(buf);
    free(r->ents);
    tb_loop_destroy(r->loop);
    free(r->buf);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
