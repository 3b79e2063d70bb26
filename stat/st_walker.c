/* st_walker.c - stack samples of live processes: ptrace stops them (st_stop.c),
 * elfutils' libdwfl unwinds and symbolises the frames */
#include "st_walker.h"
#include "st_elfs.h"
#include "st_names.h"
#include "st_stop.h"

#include <tbon/common.h>

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <gelf.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#define ST_OWN_ATTACH 1     /* registers mapped to DWARF numbers below */
#endif

/* Deeper stacks are cut (a broken unwind can go round in circles). */
#define ST_MAX_FRAMES 1024
/* Frame names kept for reuse (a few per distinct PC sampled). */
#define ST_MAX_NAMES 65536
/* ELF files shared between processes (a job maps a few dozen at most). */
#define ST_MAX_ELFS 256

/* What the walker keeps of one process between samples: its Dwfl holds the
 * modules with their ELF files, symbol tables and CFI, the main cost of a
 * first sample. */
typedef struct proc {
    pid_t pid;
    Dwfl *dwfl;
    bool attached;              /* the Dwfl is attached to the process (once) */
    bool own;                   /* with our thread callbacks (own_attach) */
    char *maps;                 /* /proc/PID/maps when the modules were reported */
    size_t maps_len;
    unsigned long long used;    /* the walker's tick of its last sample */
} proc_t;

struct st_walker {
    unsigned flags;
    st_names_t *names;          /* frame names by file and offset, for all pids */
    st_elfs_t *elfs;            /* ELF files, for all pids */
    proc_t *procs;              /* a linear search: a sample costs far more */
    size_t nprocs, cap;
    size_t max_procs;           /* kept at most (each holds open files) */
    unsigned long long tick;
    /* The stopped target's memory for the unwinder, a page at a time;
     * valid for one sample of one process. */
    pid_t page_pid;             /* 0: nothing cached */
    Dwarf_Addr page_addr;
    unsigned char page[4096];
    int regs_err;               /* errno of a failed register read */
    pid_t ahead;                /* seized and interrupted for the next sample */
};

/* One thread's unwind: PCs innermost first, or an error. */
typedef struct walk {
    Dwarf_Addr *pc;
    bool *act;                  /* pc[i] is an activation: no "pc - 1" */
    size_t n, cap;
    char *err;                  /* the reason of "[stackwalk error: ...]" */
    bool nomem;
} walk_t;

static const Dwfl_Callbacks proc_callbacks = {
    .find_elf = st_elfs_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
};

st_walker_t *st_walker_new(unsigned flags)
{
    st_walker_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->flags = flags;
    /* A process's Dwfl attached by dwfl_linux_proc_attach keeps a few files
     * open (its task directory, its executable; ours keep none, the shared
     * ELF files being the walker's): stay well inside the descriptor limit,
     * at the price of setting a process up again. */
    struct rlimit rl;
    rlim_t fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    w->max_procs = fds == RLIM_INFINITY || fds / 16 > 4096 ? 4096 : fds / 16 < 16 ? 16 : fds / 16;
    w->names = st_names_new(ST_MAX_NAMES);
    w->elfs = st_elfs_new(ST_MAX_ELFS);
    if (!w->names || !w->elfs) {
        st_names_free(w->names);
        st_elfs_free(w->elfs);
        free(w);
        return NULL;
    }
    return w;
}

static void proc_clear(proc_t *p)
{
    if (p->dwfl)
        dwfl_end(p->dwfl);
    free(p->maps);
}

void st_walker_free(st_walker_t *w)
{
    if (!w)
        return;
    if (w->ahead > 0)
        st_stop_drop(w->ahead);
    for (size_t i = 0; i < w->nprocs; i++)
        proc_clear(&w->procs[i]);
    free(w->procs);
    st_names_free(w->names);
    st_elfs_free(w->elfs);      /* after the Dwfls: they hold references */
    free(w);
}

void st_walker_forget(st_walker_t *w, pid_t pid)
{
    for (size_t i = 0; w && i < w->nprocs; i++)
        if (w->procs[i].pid == pid) {
            proc_clear(&w->procs[i]);
            w->procs[i] = w->procs[--w->nprocs];
            return;
        }
}

void st_stacks_free(st_stack_t *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++) {
        for (size_t f = 0; f < s[i].n; f++)
            free(s[i].frames[f]);
        free(s[i].frames);
    }
    free(s);
}

/* A malloc'ed string, or NULL when out of memory. */
static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    char *s;
    va_start(ap, f);
    int r = vasprintf(&s, f, ap);
    va_end(ap);
    return r < 0 ? NULL : s;
}

/* The whole of a /proc file (they have no size). 0, or an errno value. */
static int slurp(const char *path, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            close(fd);
            return ENOMEM;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            close(fd);
            if (e) {
                free(buf);
                return e;
            }
            buf[n] = '\0';
            *out = buf;
            *len = n;
            return 0;
        }
        n += (size_t)r;
        if (cap - n - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                free(buf);
            buf = nb;
            cap *= 2;
        }
    }
}

/* The walker's record of pid, made if new. A new process with a pid seen
 * before shows in its maps, and proc_refresh sees to it. NULL when out of
 * memory. */
static proc_t *proc_get(st_walker_t *w, pid_t pid)
{
    w->tick++;
    for (size_t i = 0; i < w->nprocs; i++)
        if (w->procs[i].pid == pid) {
            w->procs[i].used = w->tick;
            return &w->procs[i];
        }
    if (w->nprocs >= w->max_procs) {              /* make room: the least recently used goes */
        size_t lru = 0;
        for (size_t i = 1; i < w->nprocs; i++)
            if (w->procs[i].used < w->procs[lru].used)
                lru = i;
        st_walker_forget(w, w->procs[lru].pid);
    }
    if (w->nprocs == w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 16;
        proc_t *np = realloc(w->procs, ncap * sizeof *np);
        if (!np)
            return NULL;
        w->procs = np;
        w->cap = ncap;
    }
    Dwfl *dwfl = dwfl_begin(&proc_callbacks);
    if (!dwfl)
        return NULL;
    proc_t *p = &w->procs[w->nprocs++];
    *p = (proc_t){.pid = pid, .dwfl = dwfl, .used = w->tick};
    return p;
}

#ifdef ST_OWN_ATTACH
/* The process's state for libdwfl's unwinder, from the threads st_stop
 * stopped: registers with PTRACE_GETREGS, memory with process_vm_readv a
 * page at a time. dwfl_linux_proc_attach does the same but first reads
 * /proc/PID/status, opens the task directory and maps /proc/PID/exe again
 * for every process, a fifth of a first sample's cost. */
static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
    (void)dwfl, (void)arg, (void)thread_argp;
    return 0;                   /* only dwfl_getthread_frames is used */
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
    (void)dwfl, (void)tid;
    *thread_argp = arg;         /* the walker, for cb_set_initial_registers */
    return true;                /* the walker asks only for threads it stopped */
}

static bool read_word(pid_t pid, Dwarf_Addr addr, void *out, size_t len)
{
    struct iovec local = { out, len }, remote = { (void *)(uintptr_t)addr, len };
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    st_walker_t *w = arg;
    pid_t pid = dwfl_pid(dwfl);
    const size_t psz = sizeof w->page;
    Dwarf_Addr base = addr & ~(Dwarf_Addr)(psz - 1);
    if (addr - base > psz - sizeof *result)           /* across two pages */
        return read_word(pid, addr, result, sizeof *result);
    if (w->page_pid != pid || w->page_addr != base) {
        w->page_pid = 0;
        if (!read_word(pid, base, w->page, psz))
            return read_word(pid, addr, result, sizeof *result);
        w->page_pid = pid;
        w->page_addr = base;
    }
    memcpy(result, w->page + (addr - base), sizeof *result);
    return true;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
    st_walker_t *w = thread_arg;
    struct user_regs_struct r;
    if (ptrace(PTRACE_GETREGS, dwfl_thread_tid(thread), NULL, &r) != 0) {
        w->regs_err = errno;    /* libdwfl has no way to take our reason */
        return false;
    }
    /* The x86-64 psABI's DWARF numbers: rax rdx rcx rbx rsi rdi rbp rsp,
     * r8-r15, then the return address column, rip. */
    const Dwarf_Word d[17] = { r.rax, r.rdx, r.rcx, r.rbx, r.rsi, r.rdi, r.rbp, r.rsp,
                               r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rip };
    return dwfl_thread_state_registers(thread, 0, 17, d);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
    .next_thread = cb_next_thread,
    .get_thread = cb_get_thread,
    .memory_read = cb_memory_read,
    .set_initial_registers = cb_set_initial_registers,
};

static int first_file(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
                      void *arg)
{
    (void)userdata, (void)start;
    if (name[0] != '/')
        return DWARF_CB_OK;     /* the vDSO: its ELF is read from memory */
    *(Dwfl_Module **)arg = mod;
    return DWARF_CB_ABORT;
}

/* Attach p's Dwfl with the callbacks above if the process runs native x86-64
 * code; false (nothing done) otherwise. libdwfl wants an ELF file of the
 * process for its architecture: that of a module (the executable, first in
 * the maps), which the unwind loads anyway, when the shared set holds it
 * (it then outlives the Dwfl); else /proc/PID/exe. */
static bool own_attach(st_walker_t *w, proc_t *p)
{
    Dwfl_Module *mod = NULL;
    Dwarf_Addr bias;
    dwfl_getmodules(p->dwfl, first_file, &mod, 0);
    Elf *elf = mod ? dwfl_module_getelf(mod, &bias) : NULL;
    if (!st_elfs_owns(w->elfs, elf)) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/exe", (long)p->pid);
        elf = st_elfs_get(w->elfs, path);
    }
    GElf_Ehdr eh;
    if (!elf || !gelf_getehdr(elf, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_machine != EM_X86_64)
        return false;
    return dwfl_attach_state(p->dwfl, elf, p->pid, &thread_callbacks, w);
}
#endif

/* One line of /proc/PID/maps, "start-end perms offset major:minor inode
 * path": false if it is not one. *path is where the path starts (maybe
 * at the end of the line). */
static bool maps_line(const char *l, unsigned long long *start, unsigned long long *end,
                      unsigned *ma, unsigned *mi, unsigned long long *ino, const char **path)
{
    char *e;
    *start = strtoull(l, &e, 16);
    if (*e != '-')
        return false;
    *end = strtoull(e + 1, &e, 16);
    if (*e != ' ' || !(e = strchr(e + 1, ' ')))                 /* perms */
        return false;
    (void)strtoull(e + 1, &e, 16);                               /* offset */
    if (*e != ' ')
        return false;
    *ma = (unsigned)strtoul(e + 1, &e, 16);
    if (*e != ':')
        return false;
    *mi = (unsigned)strtoul(e + 1, &e, 16);
    if (*e != ' ')
        return false;
    *ino = strtoull(e + 1, &e, 10);
    if (*e != ' ' && *e != '\n' && *e != '\0')
        return false;
    *path = e + strspn(e, " ");
    return true;
}

/* Report the module name[0, len) at [low, high). */
static Dwfl_Module *report(Dwfl *dwfl, const char *name, size_t len, Dwarf_Addr low,
                           Dwarf_Addr high)
{
    char buf[PATH_MAX + 1];
    snprintf(buf, sizeof buf, "%.*s", (int)len, name);
    return dwfl_report_module(dwfl, buf, low, high);
}

/* The file being gathered from the maps. */
struct mfile {
    const char *path;           /* in the maps text; NULL: none */
    size_t len;
    unsigned long long low, high, ino;
    unsigned dmaj, dmin;
};

/* Report f as a module, noted for elfs (st_elfs_note). false if libdwfl failed. */
static bool report_file(st_elfs_t *elfs, Dwfl *dwfl, const struct mfile *f)
{
    Dwfl_Module *mod = report(dwfl, f->path, f->len, f->low, f->high);
    if (mod)
        st_elfs_note(elfs, mod, f->path, f->len, f->dmaj, f->dmin, f->ino);
    return mod != NULL;
}

/* Report the modules of maps (the text of /proc/PID/maps) to dwfl (each file noted for elfs), as
 * dwfl_linux_proc_report would from the same text: one module per file,
 * from its first to its last consecutive mapping, and the vDSO as
 * "[vdso: PID]" (libdwfl's name, which its find_elf reads from the
 * process's memory). Doing it here spares reading the maps a second time
 * through stdio and reading /proc/PID/auxv for the vDSO's address. 0, or
 * an errno value. */
static int report_maps(st_elfs_t *elfs, Dwfl *dwfl, pid_t pid, const char *maps)
{
    struct mfile f = { 0 };
    for (const char *line = maps, *next; line && *line; line = next) {
        const char *nl = strchr(line, '\n');
        next = nl ? nl + 1 : NULL;
        unsigned long long start, end, i;
        unsigned ma, mi;
        const char *path;
        if (!maps_line(line, &start, &end, &ma, &mi, &i, &path))
            return EINVAL;
        size_t plen = nl ? (size_t)(nl - path) : strlen(path);
        bool vdso = plen == 6 && memcmp(path, "[vdso]", 6) == 0;
        if (!vdso && (plen == 0 || path[0] != '/' || (i == 0 && ma == 0 && mi == 0)))
            continue;           /* not a file */
        if (f.path && i == f.ino && ma == f.dmaj && mi == f.dmin && plen == f.len &&
            memcmp(path, f.path, plen) == 0) {
            f.high = end;       /* the same file, further on */
            continue;
        }
        if (f.path && !report_file(elfs, dwfl, &f))
            return EIO;
        f.path = NULL;
        if (vdso) {
            char name[32];
            int k = snprintf(name, sizeof name, "[vdso: %ld]", (long)pid);
            if (!report(dwfl, name, (size_t)k, start, end))
                return EIO;
            continue;
        }
        if (plen > PATH_MAX)
            return ENAMETOOLONG;
        f = (struct mfile){ path, plen, start, end, i, ma, mi };
    }
    return f.path && !report_file(elfs, dwfl, &f) ? EIO : 0;
}

/* Bring p's modules up to date (the process is stopped) and attach the Dwfl
 * to it. 0, with *err set to why it failed (malloc'ed) or NULL; or
 * TBON_ENOMEM. */
static int proc_refresh(st_walker_t *w, proc_t *p, char **err)
{
    char path[64], *maps = NULL;
    size_t len = 0;
    *err = NULL;
    /* Modules are reported again only when the maps changed: the usual
     * repeated sample reads them and compares. */
    snprintf(path, sizeof path, "/proc/%ld/maps", (long)p->pid);
    int e = slurp(path, &maps, &len);
    if (e == ENOMEM)
        return TBON_ENOMEM;
    if (e) {
        *err = fmt("%s: %s", path, strerror(e));
        return *err ? 0 : TBON_ENOMEM;
    }
    if (p->maps && len == p->maps_len && memcmp(maps, p->maps, len) == 0) {
        free(maps);
    } else {
        /* Modules reported again with the same name and place are kept with
         * what was loaded for them; the others go. Also when the pid is
         * another process's now: our callbacks keep nothing of a process
         * but its pid, while dwfl_linux_proc_attach took the architecture
         * from the old process's executable (the new one may be 32-bit),
         * so that Dwfl starts again. */
        free(p->maps);
        p->maps = NULL;
        if (p->attached && !p->own) {
            Dwfl *fresh = dwfl_begin(&proc_callbacks);
            if (!fresh) {
                free(maps);
                return TBON_ENOMEM;
            }
            dwfl_end(p->dwfl);
            p->dwfl = fresh;
            p->attached = false;
        }
        dwfl_report_begin(p->dwfl);
        int r = report_maps(w->elfs, p->dwfl, p->pid, maps);
        dwfl_report_end(p->dwfl, NULL, NULL);
        if (r != 0) {
            free(maps);
            *err = r == EIO ? fmt("dwfl_report_module: %s", dwfl_errmsg(-1))
                   : r == EINVAL ? fmt("%s: a line not in the maps format", path)
                                 : fmt("%s: %s", path, strerror(r));
            return *err ? 0 : TBON_ENOMEM;
        }
        p->maps = maps;
        p->maps_len = len;
    }
    if (!p->attached) {
#ifdef ST_OWN_ATTACH
        p->attached = p->own = !(w->flags & ST_WALK_LIBDWFL) && own_attach(w, p);
        if (p->attached)
            return 0;
#else
        (void)w;
#endif
        /* true: st_stop stopped the threads; libdwfl must not ptrace them. */
        int r = dwfl_linux_proc_attach(p->dwfl, p->pid, true);
        if (r != 0) {
            *err = fmt("dwfl_linux_proc_attach: %s", r > 0 ? strerror(r) : dwfl_errmsg(-1));
            return *err ? 0 : TBON_ENOMEM;
        }
        p->attached = true;
    }
    return 0;
}

static int frame_cb(Dwfl_Frame *frame, void *arg)
{
    walk_t *wk = arg;
    Dwarf_Addr pc;
    bool act;
    if (!dwfl_frame_pc(frame, &pc, &act)) {
        wk->err = fmt("%s", dwfl_errmsg(-1));
        wk->nomem = !wk->err;
        return DWARF_CB_ABORT;
    }
    if (wk->n == ST_MAX_FRAMES) {
        wk->err = fmt("more than %d frames", ST_MAX_FRAMES);
        wk->nomem = !wk->err;
        return DWARF_CB_ABORT;
    }
    if (wk->n == wk->cap) {
        size_t ncap = wk->cap ? wk->cap * 2 : 32;
        Dwarf_Addr *npc = realloc(wk->pc, ncap * sizeof *npc);
        if (npc)
            wk->pc = npc;
        bool *nact = npc ? realloc(wk->act, ncap * sizeof *nact) : NULL;
        if (!nact) {
            wk->nomem = true;
            return DWARF_CB_ABORT;
        }
        wk->act = nact;
        wk->cap = ncap;
    }
    wk->pc[wk->n] = pc;
    wk->act[wk->n++] = act;
    return DWARF_CB_OK;
}

/* Unwind the stopped thread tid into wk. */
static void walk_thread(st_walker_t *w, Dwfl *dwfl, pid_t tid, walk_t *wk)
{
    w->regs_err = 0;
    int r = dwfl_getthread_frames(dwfl, tid, frame_cb, wk);
    if (r == -1 && !wk->err && !wk->nomem) {
        wk->err = w->regs_err ? fmt("ptrace(PTRACE_GETREGS): %s", strerror(w->regs_err))
                              : fmt("%s", dwfl_errmsg(-1));
        wk->nomem = !wk->err;
    }
}

/* A module's name and load address; the vDSO is "[vdso]" (to libdwfl
 * "[vdso: PID]", which would differ from process to process). */
static const char *module_name(Dwfl_Module *mod, Dwarf_Addr *low)
{
    const char *name = dwfl_module_info(mod, NULL, low, NULL, NULL, NULL, NULL, NULL);
    if (!name)
        return "?";
    return strncmp(name, "[vdso", 5) == 0 ? "[vdso]" : name;
}

/* The text of the frame at pc (addr: the address to look up) in mod:
 * "func", "func@file:line", "module`func" or "module+0xOFF". NULL when out
 * of memory. */
static char *frame_name(unsigned flags, Dwfl_Module *mod, const char *path, Dwarf_Addr low,
                        Dwarf_Addr pc, Dwarf_Addr addr)
{
    const char *slash = strrchr(path, '/');
    const char *mname = slash ? slash + 1 : path;
    GElf_Off off;
    GElf_Sym sym;
    const char *func = dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL);
    if (!func || !*func)
        return fmt("%s+0x%llx", mname, (unsigned long long)(pc - low));
    const char *mpre = flags & ST_WALK_MODULES ? mname : "";
    const char *mtick = flags & ST_WALK_MODULES ? "`" : "";
    if (flags & ST_WALK_LINES) {
        Dwfl_Line *line = dwfl_module_getsrc(mod, addr);
        int lineno = 0;
        const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
        if (file) {
            slash = strrchr(file, '/');
            return fmt("%s%s%s@%s:%d", mpre, mtick, func, slash ? slash + 1 : file, lineno);
        }
    }
    return fmt("%s%s%s", mpre, mtick, func);
}

/* The name of the frame at pc: "0xPC" outside any module, else frame_name's,
 * from the walker's cache when a process with the same file (path and build
 * id) had a frame at the same offset. malloc'ed; NULL when out of memory. */
static char *frame_text(st_walker_t *w, Dwfl *dwfl, Dwarf_Addr pc, bool act)
{
    /* A return address may be the first byte after the call's function
     * (a call to a noreturn function ends it): look up the call itself. */
    Dwarf_Addr addr = act ? pc : pc - 1;
    Dwfl_Module *mod = dwfl_addrmodule(dwfl, addr);
    if (!mod)
        return fmt("0x%llx", (unsigned long long)pc);
    Dwarf_Addr low = 0;
    const char *path = module_name(mod, &low);
    const unsigned char *id = NULL;
    GElf_Addr id_vaddr;
    int idlen = dwfl_module_build_id(mod, &id, &id_vaddr);
    char key[PATH_MAX + 256];
    int k = snprintf(key, sizeof key, "%s\n%llx%c", path, (unsigned long long)(pc - low),
                     act ? 'a' : 'r');
    for (int i = 0; i < idlen && i < 64 && k > 0 && (size_t)k + 3 < sizeof key; i++)
        k += snprintf(key + k, sizeof key - (size_t)k, "%02x", id[i]);
    bool cacheable = k > 0 && (size_t)k + 3 < sizeof key;
    const char *hit = cacheable ? st_names_get(w->names, key) : NULL;
    if (hit)
        return strdup(hit);
    char *name = frame_name(w->flags, mod, path, low, pc, addr);
    if (name && cacheable && st_names_put(w->names, key, name) != 0) {
        free(name);
        return NULL;
    }
    return name;
}

/* Fill st with the frames of wk, outermost first, then the error if any. */
static int make_stack(st_walker_t *w, Dwfl *dwfl, const walk_t *wk, st_stack_t *st)
{
    size_t n = wk->n + (wk->err ? 1 : 0);
    st->frames = calloc(n ? n : 1, sizeof *st->frames);
    if (!st->frames)
        return TBON_ENOMEM;
    for (size_t i = 0; i < wk->n; i++) {
        size_t k = wk->n - 1 - i;
        st->frames[i] = frame_text(w, dwfl, wk->pc[k], wk->act[k]);
        if (!st->frames[i])
            return TBON_ENOMEM;
        st->n = i + 1;
    }
    if (wk->err) {
        st->frames[wk->n] = fmt("[stackwalk error: %s]", wk->err);
        if (!st->frames[wk->n])
            return TBON_ENOMEM;
        st->n = n;
    }
    return 0;
}

/* One stack of one frame for the whole process. */
static int one_frame(pid_t pid, char *frame, st_stack_t **stacks, size_t *n)
{
    st_stack_t *s = calloc(1, sizeof *s);
    char **f = malloc(sizeof *f);
    if (!frame || !s || !f) {
        free(frame);
        free(s);
        free(f);
        return TBON_ENOMEM;
    }
    f[0] = frame;
    *s = (st_stack_t){.tid = pid, .n = 1, .frames = f};
    *stacks = s;
    *n = 1;
    return 1;
}

int st_sample(st_walker_t *w, pid_t pid, st_stack_t **stacks, size_t *n)
{
    return st_sample_then(w, pid, 0, stacks, n);
}

int st_sample_then(st_walker_t *w, pid_t pid, pid_t next, st_stack_t **stacks, size_t *n)
{
    if (!w || pid <= 0 || !stacks || !n)
        return TBON_EINVAL;
    *stacks = NULL;
    *n = 0;
    bool seized = w->ahead == pid;
    if (w->ahead > 0 && !seized)
        st_stop_drop(w->ahead);
    w->ahead = 0;
    st_elfs_use(w->elfs);       /* for the find_elf callback, on this thread */

    /* A process that is gone (or a zombie) cannot be seized: st_stop says so. */
    st_stopset_t set = {0};
    bool threads = w->flags & ST_WALK_THREADS;
    if ((seized ? st_stop_seized(&set, pid, threads) : st_stop(&set, pid, threads)) != 0) {
        st_stopset_free(&set);
        return TBON_ENOMEM;
    }
    if (set.n == 1 && set.t[0].state == ST_THR_GONE) {
        st_stopset_free(&set);
        st_walker_forget(w, pid);
        return one_frame(pid, fmt("[task exited]"), stacks, n);
    }
    if (set.t[0].state == ST_THR_FAILED) {
        int err = set.t[0].err;
        st_stopset_free(&set);
        return one_frame(pid, fmt("[stackwalk error: ptrace: %s]", strerror(err)), stacks, n);
    }

    /* Unwind while stopped; name the frames only after the resume, so that
     * the target waits for the unwind alone. */
    walk_t *wk = calloc(set.n, sizeof *wk);
    proc_t *p = wk ? proc_get(w, pid) : NULL;
    char *err = NULL;
    w->page_pid = 0;             /* its memory may have changed since */
    int rc = p ? proc_refresh(w, p, &err) : TBON_ENOMEM;
    for (size_t i = 0; rc == 0 && i < set.n; i++) {
        st_thread_t *t = &set.t[i];
        if (t->state == ST_THR_FAILED)
            wk[i].nomem = !(wk[i].err = fmt("ptrace: %s", strerror(t->err)));
        else if (t->state == ST_THR_STOPPED && err)
            wk[i].nomem = !(wk[i].err = fmt("%s", err));
        else if (t->state == ST_THR_STOPPED)
            walk_thread(w, p->dwfl, t->tid, &wk[i]);
        if (wk[i].nomem)
            rc = TBON_ENOMEM;
    }
    st_resume(&set);
    free(err);
    if (next > 0 && next != pid && st_stop_begin(next) == 0)
        w->ahead = next;        /* it stops while we name the frames */

    /* Threads that ended during the sample are left out; if none is left,
     * the process ended. */
    size_t ns = 0;
    st_stack_t *out = rc == 0 ? calloc(set.n, sizeof *out) : NULL;
    if (rc == 0 && !out)
        rc = TBON_ENOMEM;
    for (size_t i = 0; rc == 0 && i < set.n; i++) {
        if (set.t[i].state == ST_THR_GONE)
            continue;
        out[ns].tid = set.t[i].tid;
        rc = make_stack(w, p->dwfl, &wk[i], &out[ns]);
        ns++;
    }
    for (size_t i = 0; wk && i < set.n; i++) {
        free(wk[i].pc);
        free(wk[i].act);
        free(wk[i].err);
    }
    free(wk);
    st_stopset_free(&set);
    if (rc != 0) {
        st_stacks_free(out, ns);
        return rc;
    }
    if (ns == 0) {
        free(out);
        st_walker_forget(w, pid);
        return one_frame(pid, fmt("[task exited]"), stacks, n);
    }
    *stacks = out;
    *n = ns;
    return (int)ns;
}
