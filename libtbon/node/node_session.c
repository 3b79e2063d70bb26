/* node_session.c - the front-end's part in a session that outlives it
 * (docs/fault-tolerance.md, "The root"): the session file a new front-end
 * takes the tree over with (written once the tree is up when asked for,
 * again as the FE's children or plug-ins change, and at a detach), and the
 * detach itself: the children told, nothing shut down, nobody reaped. */
#include "node/node_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec/handshake.h"
#include "filter/filter.h"
#include "util/log.h"
#include "util/safefile.h"

/* Write the session file at path (mode 0600, util/safefile.c): the secret,
 * where each live child of ours listens, the plug-ins loaded. 0, or
 * TBON_EIO/TBON_EINVAL with why. */
static int write_session(tb_node_t *n, const char *path, char *why, size_t whylen)
{
    size_t nk;
    const tbon_rank_t *kids = tb_topology_children(n->topo, 0, &nk);
    size_t live = 0;
    for (size_t i = 0; i < nk; i++) {
        if (!tb_topology_alive(n->topo, kids[i]))
            continue;
        if (tb_topology_role(n->topo, kids[i]) != TB_ROLE_COMMNODE) {
            snprintf(why, whylen, "rank %u, a back-end, is a child of the front-end: only "
                     "commnodes can wait for a new front-end (put a commnode between)",
                     kids[i]);
            return TBON_EINVAL;
        }
        if (!tb_topology_port(n->topo, kids[i])) {
            snprintf(why, whylen, "rank %u has not said where it listens yet", kids[i]);
            return TBON_EINVAL;
        }
        live++;
    }
    if (!live) {
        snprintf(why, whylen, "the front-end has no live child");
        return TBON_EINVAL;
    }
    char tmp[4096];
    int fd = tb_safe_create(path, tmp, sizeof tmp, why, whylen);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) {
            snprintf(why, whylen, "%s", strerror(errno));
            close(fd);
            unlink(tmp);
        }
        return TBON_EIO;
    }
    char secret[TB_SECRET_HEX_SIZE];
    tb_secret_to_hex(n->cfg.session.secret, secret);
    fprintf(f, "# tbon session file: a new front-end takes the tree over with "
            "tbon_fe_reattach(FILE)\nversion=1\nsession=%016llx\nsecret=%s\n",
            (unsigned long long)n->cfg.session.id, secret);
    for (size_t i = 0; i < nk; i++)
        if (tb_topology_alive(n->topo, kids[i]))
            fprintf(f, "child=%u port=%u host=%s\n", kids[i],
                    (unsigned)tb_topology_port(n->topo, kids[i]),
                    tb_topology_host(n->topo, kids[i]));
    for (int id = TBON_FILTER_BUILTIN_COUNT;; id++) {
        const tb_filter_t *ft = tb_filter_reg_get(n->filters, id);
        if (!ft)
            break;
        fprintf(f, "filter=%d func=%s path=%s\n", id, ft->name, ft->path);
    }
    int bad = fflush(f) != 0;
    bad |= fclose(f) != 0;
    if (bad) {
        snprintf(why, whylen, "%s", strerror(errno));
        unlink(tmp);
        return TBON_EIO;
    }
    return tb_safe_commit(tmp, path, why, whylen) ? TBON_EIO : 0;
}

void tb_node_session_changed(tb_node_t *n)
{
    if (n->role != TB_ROLE_FE || !n->cfg.session_file || tb_node_life(n) != TB_LIFE_RUNNING)
        return;
    char why[512];
    if (write_session(n, n->cfg.session_file, why, sizeof why) != 0)
        TB_WARN("session", "cannot write the session file %s: %s", n->cfg.session_file, why);
    else
        n->session_written = 1;
}

void tb_node_detach(tb_node_t *n, const char *file, uint32_t hold_ms, tb_node_reply_t *reply)
{
    char why[512] = "";
    int rc = 0;
    if (n->role != TB_ROLE_FE || n->cfg.no_ft) {
        rc = TBON_EINVAL;
        snprintf(why, sizeof why, "%s", n->cfg.no_ft ? "without fault tolerance no tree "
                 "outlives its front-end" : "only the front-end detaches");
    } else if (tb_node_life(n) != TB_LIFE_RUNNING) {
        rc = TBON_ECLOSED;
        snprintf(why, sizeof why, "the session is not running");
    } else if ((rc = write_session(n, file, why, sizeof why)) == 0 &&
               (rc = tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_DETACH,
                                                    .u.fd = (int)hold_ms })) != 0) {
        snprintf(why, sizeof why, "the children could not be told");
    }
    if (rc == 0) {
        /* The tree goes on without us: our children are nobody's to reap or
         * shut down, and their connections close with our process. */
        n->detached = 1;
        for (size_t i = 0; i < n->nchild; i++)
            n->child[i].released = 1;
        TB_INFO("session", "detached: %s holds the session", file);
        tb_node_enter(n, TB_LIFE_STOPPED);
    }
    tb_node_answer(reply, rc, why);
}
