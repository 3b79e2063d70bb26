/* st_mpir.c - the MPIR process table of a running launcher. The symbols
 * MPIR_proctable (a pointer to an array of {char *host_name, char
 * *executable_name, int pid}), MPIR_proctable_size and MPIR_debug_state are
 * found in the launcher's program or one of its libraries with libdwfl, as
 * the stack walker finds frames; their values, the array and its strings are
 * read with process_vm_readv. The launcher is not stopped: Open MPI's mpirun
 * fills the table once all ranks are spawned (MPIR_debug_state 1) and does
 * not change it after, whether a debugger is there or not. Only launchers
 * of this machine's word size are read (the layout is the C one). */
#include "st_mpir.h"

#include <tbon/common.h>

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define MPIR_DEBUG_SPAWNED 1
#define MPIR_MAX_TASKS (1u << 22)   /* a table larger than this is not one */

/* One entry, as the launcher's C compiler lays it out. */
struct mpir_desc {
    char *host_name;
    char *executable_name;
    int pid;
};

struct mpir_syms {
    GElf_Addr table, size, state;   /* 0: not found */
};

static int peek(pid_t pid, GElf_Addr addr, void *buf, size_t len)
{
    struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

/* A NUL-terminated string of at most cap - 1 bytes at addr, into buf. */
static int peek_str(pid_t pid, GElf_Addr addr, char *buf, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        /* up to the end of addr's page: the next one may not be mapped */
        size_t chunk = 4096 - ((addr + n) & 4095);
        if (chunk > cap - 1 - n)
            chunk = cap - 1 - n;
        if (peek(pid, addr + n, buf + n, chunk) != 0)
            return -1;
        char *z = memchr(buf + n, '\0', chunk);
        if (z)
            return 0;
        n += chunk;
    }
    return -1;   /* longer than cap */
}

static int find_in_module(Dwfl_Module *m, void **ud, const char *name, Dwarf_Addr start,
                          void *arg)
{
    struct mpir_syms *s = arg;
    (void)ud;
    (void)name;
    (void)start;
    int n = dwfl_module_getsymtab(m);
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *sn = dwfl_module_getsym_info(m, i, &sym, &addr, NULL, NULL, NULL);
        if (!sn || strncmp(sn, "MPIR_", 5) != 0 || sym.st_shndx == SHN_UNDEF ||
            GELF_ST_TYPE(sym.st_info) != STT_OBJECT)
            continue;
        if (!s->table && strcmp(sn, "MPIR_proctable") == 0)
            s->table = addr;
        else if (!s->size && strcmp(sn, "MPIR_proctable_size") == 0)
            s->size = addr;
        else if (!s->state && strcmp(sn, "MPIR_debug_state") == 0)
            s->state = addr;
    }
    return s->table && s->size ? DWARF_CB_ABORT : DWARF_CB_OK;
}

/* The symbols' addresses in launcher: 0, or -1 (err says why). */
static int find_syms(pid_t launcher, struct mpir_syms *s, char *err, size_t errlen)
{
    static const Dwfl_Callbacks cb = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
    };
    Dwfl *d = dwfl_begin(&cb);
    if (!d) {
        snprintf(err, errlen, "libdwfl: %s", dwfl_errmsg(-1));
        return -1;
    }
    dwfl_report_begin(d);
    int rc = dwfl_linux_proc_report(d, launcher);
    dwfl_report_end(d, NULL, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "cannot read its memory map: %s",
                 rc > 0 ? strerror(rc) : dwfl_errmsg(-1));
        dwfl_end(d);
        return -1;
    }
    *s = (struct mpir_syms){ 0 };
    dwfl_getmodules(d, find_in_module, s, 0);
    dwfl_end(d);
    return 0;
}

/* "HOST:PID,HOST:PID,..." of the table's n entries at table, into *list. */
static int read_table(pid_t launcher, GElf_Addr table, size_t n, char **list, char *exe,
                      size_t cap, char *err, size_t errlen)
{
    struct mpir_desc *v = malloc(n * sizeof *v);
    char *out = malloc(n * 280 + 1);
    size_t len = 0;
    int rc = -1;
    if (!v || !out) {
        snprintf(err, errlen, "out of memory for %zu ranks", n);
        goto done;
    }
    if (peek(launcher, table, v, n * sizeof *v) != 0) {
        snprintf(err, errlen, "cannot read its MPIR_proctable (%zu entries at 0x%llx): %s", n,
                 (unsigned long long)table, strerror(errno));
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        char host[256];
        if (v[i].pid <= 0 || !v[i].host_name ||
            peek_str(launcher, (GElf_Addr)(uintptr_t)v[i].host_name, host, sizeof host) != 0 ||
            !host[0] || strchr(host, ',') || strchr(host, ':')) {
            snprintf(err, errlen, "its MPIR_proctable entry %zu (rank %zu) is not a host and a "
                     "pid (pid %d)", i, i, v[i].pid);
            goto done;
        }
        if (i == 0 && cap &&
            (!v[i].executable_name ||
             peek_str(launcher, (GElf_Addr)(uintptr_t)v[i].executable_name, exe, cap) != 0))
            exe[0] = '\0';
        len += (size_t)sprintf(out + len, "%s%s:%d", i ? "," : "", host, v[i].pid);
    }
    *list = out;
    out = NULL;
    rc = 0;
done:
    free(v);
    free(out);
    return rc;
}

int st_mpir_tasks(pid_t launcher, st_tasks_t *t, char *exe, size_t cap, char *err,
                  size_t errlen)
{
    struct mpir_syms s;
    if (cap)
        exe[0] = '\0';
    if (find_syms(launcher, &s, err, errlen) != 0)
        return TBON_EIO;
    if (!s.table || !s.size)
        return 1;
    int size = 0, state = MPIR_DEBUG_SPAWNED;
    void *table = NULL;
    if (peek(launcher, s.size, &size, sizeof size) != 0 ||
        peek(launcher, s.table, &table, sizeof table) != 0 ||
        (s.state && peek(launcher, s.state, &state, sizeof state) != 0)) {
        snprintf(err, errlen, "cannot read its MPIR variables: %s", strerror(errno));
        return TBON_EIO;
    }
    if (size <= 0 || !table || state != MPIR_DEBUG_SPAWNED) {
        snprintf(err, errlen, "its MPIR process table is %s (MPIR_proctable_size %d, "
                 "MPIR_debug_state %d): the job is not (yet) running", !table || size <= 0
                 ? "empty" : "not complete", size, state);
        return TBON_ENOTFOUND;
    }
    if ((unsigned)size > MPIR_MAX_TASKS) {
        snprintf(err, errlen, "its MPIR_proctable_size is %d: not a process table", size);
        return TBON_EFORMAT;
    }
    char *list = NULL;
    if (read_table(launcher, (GElf_Addr)(uintptr_t)table, (size_t)size, &list, exe, cap, err,
                   errlen) != 0)
        return TBON_EFORMAT;
    size_t before = t->n;
    char perr[256];
    int rc = st_tasks_parse_list(t, list, perr, sizeof perr);
    free(list);
    if (rc) {
        for (size_t i = before; i < t->n; i++)
            free(t->v[i].host);
        t->n = before;
        snprintf(err, errlen, "its MPIR process table: %s", perr + (strncmp(perr, "-p: ", 4)
                                                                     ? 0 : 4));
        return rc;
    }
    t->ranks_from = "the launcher's MPIR table";
    return 0;
}
