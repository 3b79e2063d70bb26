/* config.h - the environment the library reads, read once into one struct
 *
 * Every environment variable libtbon reads is a field of tb_config_t, read
 * by tb_config_load and by no other code of the library; docs/user-guide.md,
 * "Environment variables", lists them all with their meaning and default
 * (keep the two lists together: tests/scripts/test_config_env.sh checks).
 *
 * A field holds the variable's value as it was set (an empty value stays
 * ""), or NULL if it was unset. What a value means, its default, and the
 * warning or error a bad one gets stay with the code it steers (it parses
 * the field where it used to read the variable).
 *
 * Two snapshots:
 *  - a network's: loaded when it is created (tbon_fe_create, tbon_be_create,
 *    tbon_be_attach; tbon_commnode's main) and reached through the node's
 *    configuration (tb_node_config_t.conf), or passed to the function that
 *    needs it. Setting a variable afterwards changes nothing for that
 *    network; the next one created sees it.
 *  - the process's (tb_config_process): loaded at its first use, for what is
 *    set up once per process: the log level (TBON_LOG, at the first line
 *    logged or level asked for), the CRC-32C implementation (TBON_CRC32C, at
 *    the first checksum) and the largest packet (TBON_MAX_PACKET, at the
 *    first packet sent or received).
 * TBON_SECRET is no configuration but how a launcher hands a process its
 * session's secret: it is never copied into a snapshot (tb_config_take_secret
 * takes it out of the environment).
 */
#ifndef TB_CONFIG_H
#define TB_CONFIG_H

#include <stddef.h>

#include <tbon/tbon.h>

/* The launcher's hand-over of the secret to a local child (proc/launch.h). */
#define TB_SECRET_ENV "TBON_SECRET"

typedef struct tb_config {
    /* tbon's own (docs/user-guide.md, "Environment variables") */
    const char *log;                    /* TBON_LOG (process-wide) */
    const char *log_dir;                /* TBON_LOG_DIR */
    const char *rsh;                    /* TBON_RSH */
    const char *ssh_mux;                /* TBON_SSH_MUX */
    const char *commnode;               /* TBON_COMMNODE */
    const char *allow_flat;             /* TBON_ALLOW_FLAT */
    const char *fe_host;                /* TBON_FE_HOST */
    const char *iface;                  /* TBON_IFACE */
    const char *srun;                   /* TBON_SRUN */
    const char *env;                    /* TBON_ENV */
    const char *max_packet;             /* TBON_MAX_PACKET (process-wide) */
    const char *filter_limit_ms;        /* TBON_FILTER_LIMIT_MS */
    const char *mem_warn_mb;            /* TBON_MEM_WARN_MB */
    const char *relink_ms;              /* TBON_RELINK_MS */
    const char *ack_timeout_ms;         /* TBON_ACK_TIMEOUT_MS */
    const char *test_drop_direct;       /* TBON_TEST_DROP_DIRECT (tests only) */
    const char *test_adopt_delay_ms;    /* TBON_TEST_ADOPT_DELAY_MS (tests only) */
    const char *test_adopt_stall_ms;    /* TBON_TEST_ADOPT_STALL_MS (tests only) */
    const char *crc32c;                 /* TBON_CRC32C (process-wide) */
    /* Slurm's, read under Slurm */
    const char *slurm_job_nodelist;     /* SLURM_JOB_NODELIST */
    const char *slurm_nodelist;         /* SLURM_NODELIST */
    const char *slurm_tasks_per_node;   /* SLURM_TASKS_PER_NODE */
    const char *slurm_ntasks_per_node;  /* SLURM_NTASKS_PER_NODE */
    const char *slurm_localid;          /* SLURM_LOCALID */
    const char *slurmd_nodename;        /* SLURMD_NODENAME */
    /* any program's */
    const char *path;                   /* PATH */
    const char *tmpdir;                 /* TMPDIR */
    const char *user;                   /* USER */
} tb_config_t;

/* Read every variable of tb_config_t from the environment into c (copies:
 * c does not change when the environment does). 0, or TBON_ENOMEM with err
 * filled and c empty. Free with tb_config_free. */
int tb_config_load(tb_config_t *c, tbon_error_t *err);

/* Free what c holds and empty it (every field NULL). NULL is fine. */
void tb_config_free(tb_config_t *c);

/* Set the field of variable name (as the environment names it) to a copy
 * of value (NULL: unset). 0, TBON_EINVAL (no such variable in tb_config_t)
 * or TBON_ENOMEM (the field as it was). */
int tb_config_set(tb_config_t *c, const char *name, const char *value);

/* The variables of tb_config_t, by index: the name of the i-th, or NULL past
 * the last. */
const char *tb_config_name(size_t i);

/* The process's snapshot, loaded at the first call (any thread) and kept
 * until the process ends; every field NULL if there was no memory for it.
 * Never NULL. Only for the process-wide set-ups named above. */
const tb_config_t *tb_config_process(void);

/* Take TB_SECRET_ENV out of the environment: with out, copy its value there
 * when it is set, not empty, and fits (with its NUL) in outlen bytes; then,
 * if it was set, wipe the environment's copy of the value (the initial
 * environment stays readable in /proc/PID/environ) and unset it. Returns 0
 * if the value was copied, else TBON_EAUTH (out untouched). Call at
 * start-up, one thread. */
int tb_config_take_secret(char *out, size_t outlen);

#endif
