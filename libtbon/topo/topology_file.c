/* topology_file.c - topology files: format sniffing, reading, writing.
 *
 * The parsers and writers work on buffers; this is the thin layer of I/O
 * around them. A file is read whole (after a size check) and handed to the
 * XML parser when its first non-space character is '<', to the text parser
 * otherwise.
 */
#include "topo/topology.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

tb_topology_t *tb_topology_parse(const char *buf, size_t len, const char *name,
                                 tbon_error_t *err)
{
    size_t i = len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;   /* UTF-8 BOM */
    while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n'))
        i++;
    if (i < len && buf[i] == '<')
        return tb_topology_parse_xml(buf, len, name, err);
    return tb_topology_parse_text(buf, len, name, err);
}

tb_topology_t *tb_topology_parse_file(const char *path, tbon_error_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tb_error_set(err, TBON_EIO, "%s: cannot open the topology file: %s", path,
                     strerror(errno));
        return NULL;
    }
    tb_topology_t *t = NULL;
    char *buf = NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        tb_error_set(err, TBON_EIO, "%s: cannot stat the topology file: %s", path,
                     strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        tb_error_set(err, TBON_EIO, "%s: not a regular file", path);
        goto out;
    }
    if ((uint64_t)st.st_size > TB_TOPOLOGY_MAX_BYTES) {
        tb_error_set(err, TBON_ETOPOLOGY, "%s:1:1: the topology is too large: %lld bytes "
                     "(at most %u)", path, (long long)st.st_size, TB_TOPOLOGY_MAX_BYTES);
        goto out;
    }
    size_t size = (size_t)st.st_size;
    buf = malloc(size + 1);
    if (!buf) {
        tb_error_set(err, TBON_ENOMEM, "%s: out of memory for %zu bytes", path, size);
        goto out;
    }
    size_t got = fread(buf, 1, size, f);
    if (got != size || ferror(f)) {
        tb_error_set(err, TBON_EIO, "%s: read error: %s", path,
                     ferror(f) ? strerror(errno) : "the file shrank while being read");
        goto out;
    }
    t = tb_topology_parse(buf, size, path, err);
out:
    free(buf);
    fclose(f);
    return t;
}

int tb_topology_fwrite(const tb_topology_t *t, FILE *f, const char *name, bool xml,
                      const char *comment, tbon_error_t *err)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = xml ? tb_topology_format_xml(t, &buf, &len) : tb_topology_format_text(t, &buf, &len);
    if (rc == TBON_ETOPOLOGY)
        return tb_error_set(err, rc, "%s: a topology of the front-end alone cannot be "
                            "written in the text format", name);
    if (rc)
        return tb_error_set(err, rc, "%s: cannot format the topology: %s", name,
                            tbon_strerror(rc));
    const char *body = buf;
    if (comment) {
        /* One line; in XML a comment may not contain "--". */
        char *c = strdup(comment);
        for (char *s = c; s && *s; s++) {
            if (*s == '\n' || *s == '\r')
                *s = ' ';
            if (xml && s[0] == '-' && s[1] == '-')
                s[1] = ' ';
        }
        if (xml) {
            body = strchr(buf, '\n') + 1;     /* after the XML declaration */
            fwrite(buf, 1, (size_t)(body - buf), f);
            fprintf(f, "<!-- %s -->\n", c ? c : "");
        } else {
            fprintf(f, "# %s\n", c ? c : "");
        }
        free(c);
    }
    fwrite(body, 1, len - (size_t)(body - buf), f);
    free(buf);
    if (fflush(f) != 0 || ferror(f))
        return tb_error_set(err, TBON_EIO, "%s: write error: %s", name, strerror(errno));
    return 0;
}

int tb_topology_write_file(const tb_topology_t *t, const char *path, bool xml,
                           const char *comment, tbon_error_t *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return tb_error_set(err, TBON_EIO, "%s: cannot create: %s", path, strerror(errno));
    int rc = tb_topology_fwrite(t, f, path, xml, comment, err);
    if (fclose(f) != 0 && rc == 0)
        rc = tb_error_set(err, TBON_EIO, "%s: write error: %s", path, strerror(errno));
    if (rc)
        unlink(path);
    return rc;
}
