/* join.c - a launched (or attaching) process joins its parent */
#include "node/join.h"
#include "proc/slurm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "proc/launch.h"
#include "node/node.h"
#include "codec/packet_int.h"
#include "net/sock.h"
#include "util/log.h"

/* Remove argv[i] and argv[i+1 .. i+k-1]. */
static void drop_args(int *argc, char **argv, int i, int k)
{
    for (int j = i; j + k <= *argc; j++)
        argv[j] = argv[j + k];
    *argc -= k;
}

static int parse_hostport(const char *s, char *host, size_t hlen, uint16_t *port)
{
    const char *c = strrchr(s, ':');
    if (!c || c == s || (size_t)(c - s) >= hlen)
        return TBON_EINVAL;
    if (s[0] == '[') {               /* [IPv6]:port */
        if (c[-1] != ']' || c - s < 3)
            return TBON_EINVAL;
        s++;
        char *end;
        unsigned long p = strtoul(c + 1, &end, 10);
        if (*end || p == 0 || p > 65535)
            return TBON_EINVAL;
        memcpy(host, s, (size_t)(c - 1 - s));
        host[c - 1 - s] = 0;
        *port = (uint16_t)p;
        return 0;
    }
    char *end;
    unsigned long p = strtoul(c + 1, &end, 10);
    if (*end || p == 0 || p > 65535)
        return TBON_EINVAL;
    memcpy(host, s, (size_t)(c - s));
    host[c - s] = 0;
    *port = (uint16_t)p;
    return 0;
}

int tb_join_parse_args(int *argc, char **argv, const tb_config_t *conf, tb_join_t *j,
                       tbon_error_t *err)
{
    memset(j, 0, sizeof *j);
    j->rank = TBON_RANK_NONE;
    j->data_fd = j->event_fd = -1;
    j->timeout_ms = 30000;
    int have_parent = 0, have_session = 0;
    for (int i = 1; i < *argc;) {
        const char *a = argv[i];
        if (strncmp(a, "--tbon-", 7) != 0 || strcmp(a, TB_SECRET_STDIN_ARG) == 0) {
            i++;
            continue;
        }
        if (i + 1 >= *argc)
            return tb_error_set(err, TBON_EINVAL, "launcher argument %s needs a value", a);
        const char *v = argv[i + 1];
        char *end;
        if (strcmp(a, "--tbon-parent") == 0) {
            if (parse_hostport(v, j->parent_host, sizeof j->parent_host, &j->parent_port))
                return tb_error_set(err, TBON_EINVAL, "--tbon-parent: expected HOST:PORT, got \"%s\"", v);
            have_parent = 1;
        } else if (strcmp(a, TB_SLURM_MAP_ARG) == 0) {
            /* One task of a Slurm step (slurm.h): our node's entry gives our
             * rank (by our local id) and our parent. */
            const char *node = conf->slurmd_nodename, *lid = conf->slurm_localid;
            char hn[256];
            if (!node || !*node) {
                if (gethostname(hn, sizeof hn - 1) != 0)
                    hn[0] = 0;
                hn[sizeof hn - 1] = 0;
                hn[strcspn(hn, ".")] = 0;
                node = hn;
            }
            unsigned long l = lid ? strtoul(lid, &end, 10) : 0;
            if (!lid || *end || !*lid)
                return tb_error_set(err, TBON_EINVAL, "%s outside a Slurm step (no "
                                    "SLURM_LOCALID)", TB_SLURM_MAP_ARG);
            if (tb_slurm_map_find(v, node, (unsigned)l, &j->rank, j->parent_host,
                                  sizeof j->parent_host, &j->parent_port, err))
                return err ? err->code : TBON_EINVAL;
            have_parent = 1;
        } else if (strcmp(a, "--tbon-rank") == 0) {
            unsigned long r = strtoul(v, &end, 10);
            if (*end || !*v || r >= TBON_RANK_NONE)
                return tb_error_set(err, TBON_EINVAL, "--tbon-rank: bad rank \"%s\"", v);
            j->rank = (tbon_rank_t)r;
        } else if (strcmp(a, "--tbon-session") == 0) {
            j->session.id = strtoull(v, &end, 16);
            if (*end || !*v)
                return tb_error_set(err, TBON_EINVAL, "--tbon-session: bad id \"%s\"", v);
            have_session = 1;
        } else if (strcmp(a, "--tbon-timeout") == 0) {
            long t = strtol(v, &end, 10);
            if (*end || t <= 0)
                return tb_error_set(err, TBON_EINVAL, "--tbon-timeout: bad value \"%s\"", v);
            j->timeout_ms = t > 3600000 ? 3600000 : (int)t;
        } else {
            return tb_error_set(err, TBON_EINVAL, "unknown launcher argument %s", a);
        }
        drop_args(argc, argv, i, 2);
    }
    if (!have_parent || j->rank == TBON_RANK_NONE || !have_session)
        return tb_error_set(err, TBON_EINVAL,
                            "not started by a tbon launcher: --tbon-parent, --tbon-rank and "
                            "--tbon-session are required");
    char hex[TB_SECRET_HEX_SIZE + 8];
    if (tb_launch_take_secret(argc, argv, hex, sizeof hex))
        return tb_error_set(err, TBON_EAUTH, "no session secret (TBON_SECRET or stdin)");
    return tb_secret_from_hex(hex, j->session.secret, err);
}

int tb_join_parse_attach(const char *path, tbon_rank_t rank, tb_join_t *j, tbon_error_t *err)
{
    memset(j, 0, sizeof *j);
    j->rank = rank;
    j->data_fd = j->event_fd = -1;
    j->timeout_ms = 30000;
    FILE *f = fopen(path, "re");
    if (!f)
        return tb_error_set(err, errno == ENOENT ? TBON_ENOTFOUND : TBON_EIO,
                            "cannot open the attach file %s: %s", path, strerror(errno));
    char line[1024], secret[TB_SECRET_HEX_SIZE + 8] = "";
    tbon_rank_t parent = TBON_RANK_NONE;
    int have_session = 0, lineno = 0, rc = 0;
    /* node lines may come before the backend line: remember them all. */
    struct { tbon_rank_t r; char host[256]; unsigned port; } *nodes = NULL;
    size_t nn = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        unsigned r, p;
        char host[256];
        unsigned long long sid;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (sscanf(line, "session=%llx", &sid) == 1) {
            j->session.id = sid;
            have_session = 1;
        } else if (sscanf(line, "secret=%70s", secret) == 1) {
        } else if (sscanf(line, "node=%u host=%255s port=%u", &r, host, &p) == 3) {
            void *nv = realloc(nodes, (nn + 1) * sizeof *nodes);
            if (!nv) {
                rc = tb_error_set(err, TBON_ENOMEM, "out of memory");
                break;
            }
            nodes = nv;
            nodes[nn].r = r;
            snprintf(nodes[nn].host, sizeof nodes[nn].host, "%s", host);
            nodes[nn++].port = p;
        } else if (sscanf(line, "backend=%u parent=%u", &r, &p) == 2) {
            if (r == rank)
                parent = p;
        } else if (strncmp(line, "version=", 8) != 0) {
            rc = tb_error_set(err, TBON_EINVAL, "%s:%d: unrecognised line", path, lineno);
            break;
        }
    }
    fclose(f);
    if (!rc && (!have_session || !secret[0]))
        rc = tb_error_set(err, TBON_EINVAL, "%s: no session or secret line", path);
    if (rank == TBON_RANK_NONE)
        parent = 0;     /* a new back-end asks the FE for a rank and a parent */
    if (!rc && parent == TBON_RANK_NONE)
        rc = tb_error_set(err, TBON_EINVAL, "%s: rank %u is not a back-end of this tree", path, rank);
    if (!rc) {
        size_t i = 0;
        while (i < nn && nodes[i].r != parent)
            i++;
        if (i == nn || nodes[i].port == 0 || nodes[i].port > 65535)
            rc = tb_error_set(err, TBON_EINVAL, "%s: no address for rank %u, the parent of %u",
                              path, parent, rank);
        else {
            snprintf(j->parent_host, sizeof j->parent_host, "%s", nodes[i].host);
            j->parent_port = (uint16_t)nodes[i].port;
        }
    }
    free(nodes);
    if (!rc)
        rc = tb_secret_from_hex(secret, j->session.secret, err);
    return rc;
}

int tb_join_request(tb_join_t *j, tb_role_t role, uint16_t port, tbon_error_t *err)
{
    int64_t deadline = tb_now_ms() + j->timeout_ms;
    tb_welcome_t w;
    tb_frame_t f;
    tbon_rank_t want = j->rank;
    int fd = tb_sock_connect(j->parent_host, j->parent_port, deadline, err);
    if (fd < 0)
        return fd;
    /* docs/protocol.md 9.6: the handshake's incarnation field carries the
     * port a commnode listens on. */
    int rc = tb_auth_client(fd, &j->session, (uint8_t)role, TB_PURPOSE_JOIN, want, port,
                            deadline, &w, err);
    if (!rc)
        rc = tb_sock_recv_frame(fd, 4096, &f, deadline, err);
    close(fd);
    if (rc == TBON_ECLOSED && want != TBON_RANK_NONE)
        return tb_error_set(err, TBON_ECLOSED, "the front-end did not take rank %u back (it is "
                            "not known to have failed, is not a %s, or the session is ending)",
                            want, tb_role_name(role));
    if (rc == TBON_ECLOSED)
        return tb_error_set(err, TBON_ECLOSED, "the front-end did not take us in (shutting "
                            "down, or our parent-to-be failed)");
    if (rc)
        return rc;
    tb_ctl_msg_t m;
    tbon_error_t derr;
    rc = f.hdr.type != TB_FRAME_CONTROL || f.hdr.tag != TB_CTL_JOIN_ACK
         ? tb_error_set(&derr, TBON_EFORMAT, "a %s frame (tag %d), not JOIN_ACK",
                        tb_frame_type_name(f.hdr.type), f.hdr.tag)
         : tb_ctl_decode_bytes(TB_CTL_JOIN_ACK, f.payload, f.hdr.len, &m, &derr);
    tb_frame_release(&f);
    if (rc)
        return tb_error_set(err, TBON_EFORMAT, "a malformed answer from the front-end: %s",
                            derr.msg);
    const tb_ctl_join_ack_t *a = &m.u.join_ack;
    if (a->rank == TBON_RANK_NONE || (want != TBON_RANK_NONE && a->rank != want) ||
        strlen(a->host) >= sizeof j->parent_host) {
        tb_ctl_msg_free(&m);
        return tb_error_set(err, TBON_EFORMAT, "a malformed answer from the front-end");
    }
    j->rank = a->rank;
    j->inc = a->inc;
    snprintf(j->parent_host, sizeof j->parent_host, "%s", a->host);
    j->parent_port = (uint16_t)a->port;
    tb_ctl_msg_free(&m);
    return 0;
}

int tb_join_connect(tb_join_t *j, tb_role_t role, int purpose, tbon_error_t *err)
{
    int64_t deadline = tb_now_ms() + j->timeout_ms;
    tb_welcome_t w;
    tb_frame_t f;
    int rc;
    j->data_fd = tb_sock_connect(j->parent_host, j->parent_port, deadline, err);
    if (j->data_fd < 0)
        return j->data_fd;
    rc = tb_auth_client(j->data_fd, &j->session, (uint8_t)role, (uint8_t)purpose, j->rank,
                        j->inc, deadline, &w, err);
    if (rc)
        return rc;
    rc = tb_sock_recv_frame(j->data_fd, TB_FRAME_MAX_DEFAULT, &f, deadline, err);
    if (rc)
        return rc;
    if (f.hdr.type != TB_FRAME_TOPOLOGY) {
        tb_frame_release(&f);
        return tb_error_set(err, TBON_EFORMAT, "expected the topology from the parent, got %s",
                            tb_frame_type_name(f.hdr.type));
    }
    j->topo = tb_topology_deserialize(f.payload, f.hdr.len, err);
    tb_frame_release(&f);
    if (!j->topo)
        return err ? err->code : TBON_EFORMAT;
    if (j->rank >= tb_topology_size(j->topo) || tb_topology_role(j->topo, j->rank) != role)
        return tb_error_set(err, TBON_ETOPOLOGY, "rank %u is not a %s of the topology", j->rank,
                            tb_role_name(role));
    if (role == TB_ROLE_COMMNODE) {
        rc = tb_sock_recv_frame(j->data_fd, TB_FRAME_MAX_DEFAULT, &f, deadline, err);
        if (rc)
            return rc;
        if (f.hdr.type == TB_FRAME_CONTROL && f.hdr.tag == TB_CTL_LAUNCH)
            j->launch = tb_packet_decode(f.payload, f.hdr.len, f.hdr.tag, 0, f.hdr.source, err);
        tb_frame_release(&f);
        if (!j->launch)
            return tb_error_set(err, TBON_EFORMAT, "expected launch instructions from the parent");
    }
    if (role == TB_ROLE_COMMNODE)
        return 0;   /* its event connection comes after it has launched its children */
    rc = tb_join_connect_event(j, role, err);
    if (rc && role == TB_ROLE_BE &&
        (rc == TBON_ECLOSED || (j->event_fd < 0 && errno == ECONNREFUSED))) {
        /* The parent ended between our two connections (the tree counted us
         * once the first was made, and may be up): start all the same; the
         * data connection's end makes us an orphan, which looks for an
         * adopter (docs/protocol.md 7.1). */
        TB_WARN("join", "no event connection to the parent at %s:%u (%s): it has ended; "
                "looking for another", j->parent_host, (unsigned)j->parent_port, err ? err->msg : "");
        if (j->event_fd >= 0)
            close(j->event_fd);
        j->event_fd = -1;
        tb_error_clear(err);
        return 0;
    }
    return rc;
}

int tb_join_connect_event(tb_join_t *j, tb_role_t role, tbon_error_t *err)
{
    int64_t deadline = tb_now_ms() + j->timeout_ms;
    tb_welcome_t w;
    j->event_fd = tb_sock_connect(j->parent_host, j->parent_port, deadline, err);
    if (j->event_fd < 0)
        return j->event_fd;
    return tb_auth_client(j->event_fd, &j->session, (uint8_t)role, TB_PURPOSE_EVENT, j->rank,
                          j->inc, deadline, &w, err);
}

void tb_join_release(tb_join_t *j)
{
    if (j->data_fd >= 0)
        close(j->data_fd);
    if (j->event_fd >= 0)
        close(j->event_fd);
    tb_topology_destroy(j->topo);
    tbon_packet_unref(j->launch);
    j->launch = NULL;
    j->data_fd = j->event_fd = -1;
    j->topo = NULL;
}
