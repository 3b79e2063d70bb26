/* st_elfs.c - ELF files shared by every process a stack walker samples */
#include "st_elfs.h"

#include <fcntl.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

typedef struct ent {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int fd;
    Elf *elf;                   /* our reference; each module holds its own */
} ent_t;

/* A file as a process's maps name it (path, device, inode), and the entry
 * it turned out to be, once a stat of the path found the same device and
 * inode: later processes that map it need no stat of their own. */
typedef struct note {
    dev_t dev;
    ino_t ino;
    char *path;
    ent_t *ent;
} note_t;

struct st_elfs {
    ent_t *v;
    size_t n, max;
    note_t *notes;
    size_t nnotes, capnotes;
};

static _Thread_local st_elfs_t *current;

st_elfs_t *st_elfs_new(size_t max)
{
    st_elfs_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->v = calloc(max ? max : 1, sizeof *e->v);
    if (!e->v) {
        free(e);
        return NULL;
    }
    e->max = max;
    elf_version(EV_CURRENT);
    return e;
}

void st_elfs_free(st_elfs_t *e)
{
    if (!e)
        return;
    if (current == e)
        current = NULL;
    for (size_t i = 0; i < e->n; i++) {
        elf_end(e->v[i].elf);
        close(e->v[i].fd);
    }
    for (size_t i = 0; i < e->nnotes; i++)
        free(e->notes[i].path);
    free(e->notes);
    free(e->v);
    free(e);
}

void st_elfs_use(st_elfs_t *e)
{
    current = e;
}

static bool same(const ent_t *x, const struct stat *sb)
{
    return x->dev == sb->st_dev && x->ino == sb->st_ino && x->size == sb->st_size &&
           x->mtime.tv_sec == sb->st_mtim.tv_sec && x->mtime.tv_nsec == sb->st_mtim.tv_nsec;
}

/* The entry of the file at path (opened and added if new), or NULL. */
static ent_t *get(st_elfs_t *e, const char *path, const struct stat *sb)
{
    for (size_t i = 0; i < e->n; i++)
        if (same(&e->v[i], sb))
            return &e->v[i];
    if (e->n == e->max)
        return NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat fsb;
    /* The file opened must be the one stat saw (not replaced in between). */
    if (fstat(fd, &fsb) != 0 || fsb.st_dev != sb->st_dev || fsb.st_ino != sb->st_ino) {
        close(fd);
        return NULL;
    }
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        elf_end(elf);
        close(fd);
        return NULL;
    }
    ent_t *x = &e->v[e->n++];
    *x = (ent_t){ .dev = sb->st_dev, .ino = sb->st_ino, .size = sb->st_size,
                  .mtime = sb->st_mtim, .fd = fd, .elf = elf };
    return x;
}

Elf *st_elfs_get(st_elfs_t *e, const char *path)
{
    struct stat sb;
    ent_t *x = e && stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? get(e, path, &sb) : NULL;
    return x ? x->elf : NULL;
}

int st_elfs_owns(const st_elfs_t *e, const Elf *elf)
{
    for (size_t i = 0; e && elf && i < e->n; i++)
        if (e->v[i].elf == elf)
            return 1;
    return 0;
}

void st_elfs_note(st_elfs_t *e, Dwfl_Module *mod, const char *path, size_t len,
                  unsigned major, unsigned minor, uint64_t ino)
{
    dev_t dev = makedev(major, minor);
    size_t i = 0;
    while (i < e->nnotes && !(e->notes[i].ino == (ino_t)ino && e->notes[i].dev == dev &&
                              strlen(e->notes[i].path) == len &&
                              memcmp(e->notes[i].path, path, len) == 0))
        i++;
    if (i == e->nnotes) {
        if (e->nnotes == e->capnotes) {
            size_t nc = e->capnotes ? 2 * e->capnotes : 16;
            note_t *nn = realloc(e->notes, nc * sizeof *nn);
            if (!nn)
                return;
            e->notes = nn;
            e->capnotes = nc;
        }
        char *p = strndup(path, len);
        if (!p)
            return;
        e->notes[e->nnotes++] = (note_t){ .dev = dev, .ino = (ino_t)ino, .path = p };
    }
    void **ud = NULL;
    dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
    if (ud)
        *ud = (void *)(uintptr_t)(i + 1);
}

int st_elfs_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                     char **file_name, Elf **elfp)
{
    struct stat sb;
    ent_t *x = NULL;
    uintptr_t k = current && userdata ? (uintptr_t)*userdata : 0;
    note_t *note = k && k <= current->nnotes ? &current->notes[k - 1] : NULL;
    if (note && note->ent) {
        x = note->ent;
    } else if (current && modname[0] == '/' && stat(modname, &sb) == 0 && S_ISREG(sb.st_mode)) {
        x = get(current, modname, &sb);
        /* The file at the path is the one the maps named: it stays open in
         * the set, so its inode cannot be another file's while noted. */
        if (x && note && sb.st_dev == note->dev && sb.st_ino == note->ino)
            note->ent = x;
    }
    if (x) {
        char *name = strdup(modname);
        Elf *ref = name ? elf_begin(x->fd, ELF_C_READ_MMAP, x->elf) : NULL;   /* one more reference */
        if (ref) {
            *file_name = name;
            *elfp = ref;
            return -1;          /* no descriptor of its own: the Elf is the file */
        }
        free(name);
    }
    return dwfl_linux_proc_find_elf(mod, userdata, modname, base, file_name, elfp);
}
