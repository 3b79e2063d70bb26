/* st_elfs.h - ELF files shared by every process a stack walker samples
 * (internal to st_walker.c).
 *
 * The processes of a job map the same executable and libraries. libdwfl
 * gives each process's Dwfl its own Elf handle for each of them: an open,
 * an mmap, page faults on the headers and sections, and the section data
 * (symbol tables, .eh_frame) read again; and a munmap when the process is
 * dropped. Here one Elf handle per file (device, inode, size, mtime) serves
 * them all: libelf counts references (elf_begin with the handle as ref), so
 * each Dwfl's module releases only its own. */
#ifndef TBON_ST_ELFS_H
#define TBON_ST_ELFS_H

#include <elfutils/libdwfl.h>

typedef struct st_elfs st_elfs_t;

/* An empty set of at most max files (past that, files are opened per
 * process as libdwfl does). NULL when out of memory. */
st_elfs_t *st_elfs_new(size_t max);
void st_elfs_free(st_elfs_t *e);

/* The set the find_elf callback below uses on this thread (NULL: none). */
void st_elfs_use(st_elfs_t *e);

/* The set's Elf of the file at path (a symbolic link is followed, so
 * /proc/PID/exe names the file the process runs), added if new; valid
 * until st_elfs_free. NULL if it is not a regular ELF file or the set is
 * full. */
Elf *st_elfs_get(st_elfs_t *e, const char *path);

/* 1 if elf is one of the set's own handles (valid until st_elfs_free): a
 * module whose file came from the set has exactly that handle, since libelf
 * hands out a file's handle itself, counted once more, as the module's. */
int st_elfs_owns(const st_elfs_t *e, const Elf *elf);

/* Note that module mod is the file the maps name path[0, len) on device
 * major:minor, inode ino: find_elf then needs a stat of the path only for
 * the first module of a file, not for every process that maps it. */
void st_elfs_note(st_elfs_t *e, Dwfl_Module *mod, const char *path, size_t len,
                  unsigned major, unsigned minor, uint64_t ino);

/* A Dwfl_Callbacks.find_elf: a regular file from the shared set; anything
 * else (the vDSO, a deleted file, a file that cannot be opened) as
 * dwfl_linux_proc_find_elf finds it. */
int st_elfs_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                     char **file_name, Elf **elfp);

#endif
