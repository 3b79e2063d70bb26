/* config.c - the environment, read once (config.h; the variables are listed
 * in docs/user-guide.md, "Environment variables")
 *
 * The only file of the library that calls getenv. */
#include "util/config.h"
#include "util/error.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Each variable and its field. */
#define VAR(name, field) { name, offsetof(tb_config_t, field) }
static const struct {
    const char *name;
    size_t off;
} vars[] = {
    VAR("TBON_LOG", log),
    VAR("TBON_LOG_DIR", log_dir),
    VAR("TBON_RSH", rsh),
    VAR("TBON_SSH_MUX", ssh_mux),
    VAR("TBON_COMMNODE", commnode),
    VAR("TBON_ALLOW_FLAT", allow_flat),
    VAR("TBON_FE_HOST", fe_host),
    VAR("TBON_IFACE", iface),
    VAR("TBON_SRUN", srun),
    VAR("TBON_ENV", env),
    VAR("TBON_MAX_PACKET", max_packet),
    VAR("TBON_FILTER_LIMIT_MS", filter_limit_ms),
    VAR("TBON_MEM_WARN_MB", mem_warn_mb),
    VAR("TBON_RELINK_MS", relink_ms),
    VAR("TBON_ACK_TIMEOUT_MS", ack_timeout_ms),
    VAR("TBON_TEST_DROP_DIRECT", test_drop_direct),
    VAR("TBON_TEST_ADOPT_DELAY_MS", test_adopt_delay_ms),
    VAR("TBON_TEST_ADOPT_STALL_MS", test_adopt_stall_ms),
    VAR("TBON_CRC32C", crc32c),
    VAR("SLURM_JOB_NODELIST", slurm_job_nodelist),
    VAR("SLURM_NODELIST", slurm_nodelist),
    VAR("SLURM_TASKS_PER_NODE", slurm_tasks_per_node),
    VAR("SLURM_NTASKS_PER_NODE", slurm_ntasks_per_node),
    VAR("SLURM_LOCALID", slurm_localid),
    VAR("SLURMD_NODENAME", slurmd_nodename),
    VAR("PATH", path),
    VAR("TMPDIR", tmpdir),
    VAR("USER", user),
};
#define NVARS (sizeof vars / sizeof vars[0])
_Static_assert(NVARS * sizeof(const char *) == sizeof(tb_config_t),
               "every field of tb_config_t is a variable of the table");

static const char **field(tb_config_t *c, size_t i)
{
    return (const char **)(void *)((char *)c + vars[i].off);
}

int tb_config_load(tb_config_t *c, tbon_error_t *err)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NVARS; i++) {
        const char *v = getenv(vars[i].name);
        if (v && !(*field(c, i) = strdup(v))) {
            tb_config_free(c);
            return tb_error_set(err, TBON_ENOMEM, "out of memory");
        }
    }
    return 0;
}

void tb_config_free(tb_config_t *c)
{
    for (size_t i = 0; c && i < NVARS; i++) {
        free((void *)(uintptr_t)*field(c, i));
        *field(c, i) = NULL;
    }
}

int tb_config_set(tb_config_t *c, const char *name, const char *value)
{
    for (size_t i = 0; i < NVARS; i++) {
        if (strcmp(vars[i].name, name) != 0)
            continue;
        char *v = value ? strdup(value) : NULL;
        if (value && !v)
            return TBON_ENOMEM;
        free((void *)(uintptr_t)*field(c, i));
        *field(c, i) = v;
        return 0;
    }
    return TBON_EINVAL;
}

const char *tb_config_name(size_t i)
{
    return i < NVARS ? vars[i].name : NULL;
}

static pthread_once_t process_once = PTHREAD_ONCE_INIT;
static tb_config_t process_conf;

/* (It must not log: the log level's own first use comes here.) */
static void process_load(void)
{
    tb_config_load(&process_conf, NULL);
}

const tb_config_t *tb_config_process(void)
{
    pthread_once(&process_once, process_load);
    return &process_conf;
}

int tb_config_take_secret(char *out, size_t outlen)
{
    char *env = getenv(TB_SECRET_ENV);
    int rc = TBON_EAUTH;
    if (out && env && *env && strlen(env) < outlen) {
        memcpy(out, env, strlen(env) + 1);
        rc = 0;
    }
    if (env) {
        /* unsetenv leaves the string in memory, and the initial environment
         * stays readable in /proc/PID/environ: wipe the value first. */
        explicit_bzero(env, strlen(env));
        unsetenv(TB_SECRET_ENV);
    }
    return rc;
}
