/* relay.h - the standard error of a node's children, relayed to its own and
 * remembered: each child launched with a stderr pipe has what it writes
 * copied to this process's stderr (so lines from any host reach the
 * front-end's terminal, hop by hop), and its first line is kept, so that a
 * child that dies during start-up is reported with its own words ("rank 3 on
 * host n4 exited with status 1 before it was ready: cannot connect to ...").
 *
 * One thread per relay copies the bytes, started with the first pipe: its
 * writes to our stderr may block (a stopped terminal, a parent that does not
 * read), and neither the reactor nor the EDS thread may. */
#ifndef TB_RELAY_H
#define TB_RELAY_H

#include <stddef.h>

#include <tbon/tbon.h>

typedef struct tb_relay tb_relay_t;

/* A relay with no pipes yet; NULL when out of memory. */
tb_relay_t *tb_relay_new(void);

/* Relay the read end fd of child rank's stderr pipe (taken over, made
 * non-blocking). 0, or TBON_ENOMEM / TBON_EIO (fd closed). Any thread. */
int tb_relay_add(tb_relay_t *r, tbon_rank_t rank, int fd);

/* Take in what rank's pipe holds now (a child that has exited has written
 * all it will), relay it, and copy its first non-empty line (a log line
 * without its time stamp) to out. 1 with a line, 0 without. Any thread. */
int tb_relay_first_line(tb_relay_t *r, tbon_rank_t rank, char *out, size_t len);

/* Stop the thread, relay what is left and close every pipe. NULL is fine. */
void tb_relay_destroy(tb_relay_t *r);

#endif
