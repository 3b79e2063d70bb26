/* test_config.c - the environment read once into tb_config_t (util/config.c):
 * every variable into its field, a snapshot that later changes of the
 * environment leave alone, the process's own snapshot, and the secret taken
 * out of the environment */
#include "../harness.h"
#include "util/config.h"

#include <stdlib.h>

/* Each variable and the field it must land in (written out here, apart from
 * config.c's table, so that a field mixed up there shows). */
#define F(name, field) { name, offsetof(tb_config_t, field) }
static const struct { const char *name; size_t off; } expect[] = {
    F("TBON_LOG", log), F("TBON_LOG_DIR", log_dir), F("TBON_RSH", rsh),
    F("TBON_SSH_MUX", ssh_mux), F("TBON_COMMNODE", commnode),
    F("TBON_ALLOW_FLAT", allow_flat), F("TBON_FE_HOST", fe_host),
    F("TBON_IFACE", iface), F("TBON_SRUN", srun), F("TBON_ENV", env),
    F("TBON_MAX_PACKET", max_packet), F("TBON_FILTER_LIMIT_MS", filter_limit_ms),
    F("TBON_MEM_WARN_MB", mem_warn_mb), F("TBON_RELINK_MS", relink_ms),
    F("TBON_ACK_TIMEOUT_MS", ack_timeout_ms),
    F("TBON_TEST_DROP_DIRECT", test_drop_direct),
    F("TBON_TEST_ADOPT_DELAY_MS", test_adopt_delay_ms),
    F("TBON_TEST_ADOPT_STALL_MS", test_adopt_stall_ms),
    F("TBON_CRC32C", crc32c), F("SLURM_JOB_NODELIST", slurm_job_nodelist),
    F("SLURM_NODELIST", slurm_nodelist), F("SLURM_TASKS_PER_NODE", slurm_tasks_per_node),
    F("SLURM_NTASKS_PER_NODE", slurm_ntasks_per_node), F("SLURM_LOCALID", slurm_localid),
    F("SLURMD_NODENAME", slurmd_nodename), F("PATH", path), F("TMPDIR", tmpdir),
    F("USER", user),
};
#define NEXPECT (sizeof expect / sizeof expect[0])

static const char *field(const tb_config_t *c, size_t i)
{
    const char *v;
    memcpy(&v, (const char *)c + expect[i].off, sizeof v);
    return v;
}

/* The table of names: the variables above, each once, then NULL. */
TEST(names_are_the_fields)
{
    size_t n = 0;
    while (tb_config_name(n))
        n++;
    CHECK_UINT(n, NEXPECT);
    CHECK_UINT(sizeof(tb_config_t), NEXPECT * sizeof(const char *));
    for (size_t i = 0; i < NEXPECT; i++) {
        int seen = 0;
        for (size_t k = 0; k < n; k++)
            seen += strcmp(tb_config_name(k), expect[i].name) == 0;
        CHECK_INT(seen, 1);
        if (seen != 1)
            printf("    %s\n", expect[i].name);
    }
    CHECK(tb_config_name(n) == NULL);
    CHECK(tb_config_name((size_t)-1) == NULL);
}

/* Every variable into its own field; unset is NULL, empty stays "". */
TEST(load_reads_every_variable)
{
    char val[NEXPECT][32];
    char *path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    REQUIRE(path);
    for (size_t i = 0; i < NEXPECT; i++) {
        snprintf(val[i], sizeof val[i], "value %zu of %s", i, expect[i].name);
        REQUIRE(setenv(expect[i].name, val[i], 1) == 0);
    }
    tb_config_t c;
    tbon_error_t err = { 0 };
    REQUIRE(tb_config_load(&c, &err) == 0);
    for (size_t i = 0; i < NEXPECT; i++)
        CHECK_STR(field(&c, i), val[i]);
    tb_config_free(&c);
    for (size_t i = 0; i < NEXPECT; i++)
        CHECK(field(&c, i) == NULL);

    for (size_t i = 0; i < NEXPECT; i++)
        unsetenv(expect[i].name);
    setenv("TBON_IFACE", "", 1);
    REQUIRE(tb_config_load(&c, &err) == 0);
    for (size_t i = 0; i < NEXPECT; i++) {
        if (strcmp(expect[i].name, "TBON_IFACE") == 0)
            CHECK_STR(field(&c, i), "");
        else
            CHECK(field(&c, i) == NULL);
    }
    tb_config_free(&c);
    tb_config_free(&c);             /* twice is fine, and NULL */
    tb_config_free(NULL);
    setenv("PATH", path, 1);        /* (the harness's clean-up runs rm) */
    free(path);
}

/* A snapshot: what the environment does afterwards changes nothing in it. */
TEST(load_is_a_snapshot)
{
    setenv("TBON_RELINK_MS", "1234", 1);
    setenv("TBON_RSH", "rsh-one", 1);
    unsetenv("TBON_SRUN");
    tb_config_t c;
    REQUIRE(tb_config_load(&c, NULL) == 0);
    const char *before = c.relink_ms;
    setenv("TBON_RELINK_MS", "99", 1);
    unsetenv("TBON_RSH");
    setenv("TBON_SRUN", "/opt/slurm/bin/srun", 1);
    CHECK_STR(c.relink_ms, "1234");
    CHECK(c.relink_ms == before);
    CHECK_STR(c.rsh, "rsh-one");
    CHECK(c.srun == NULL);
    /* not pointers into the environment */
    CHECK(c.relink_ms != getenv("TBON_RELINK_MS"));
    tb_config_t d;
    REQUIRE(tb_config_load(&d, NULL) == 0);
    CHECK_STR(d.relink_ms, "99");
    CHECK(d.rsh == NULL);
    CHECK_STR(d.srun, "/opt/slurm/bin/srun");
    tb_config_free(&c);
    tb_config_free(&d);
}

TEST(set_one_field)
{
    unsetenv("TBON_ENV");
    tb_config_t c;
    REQUIRE(tb_config_load(&c, NULL) == 0);
    CHECK(c.env == NULL);
    CHECK_INT(tb_config_set(&c, "TBON_ENV", "A B"), 0);
    CHECK_STR(c.env, "A B");
    CHECK(getenv("TBON_ENV") == NULL);      /* the snapshot only */
    CHECK_INT(tb_config_set(&c, "TBON_ENV", "A B C"), 0);
    CHECK_STR(c.env, "A B C");
    CHECK_INT(tb_config_set(&c, "TBON_ENV", NULL), 0);
    CHECK(c.env == NULL);
    CHECK_INT(tb_config_set(&c, "TBON_NO_SUCH", "x"), TBON_EINVAL);
    CHECK_INT(tb_config_set(&c, "tbon_env", "x"), TBON_EINVAL);   /* names are exact */
    CHECK(c.env == NULL);
    CHECK_INT(tb_config_set(&c, "USER", "someone"), 0);
    CHECK_STR(c.user, "someone");
    tb_config_free(&c);
}

/* The process's snapshot: loaded at the first call, the same ever after. */
TEST(process_snapshot_once)
{
    setenv("TBON_MAX_PACKET", "64M", 1);
    setenv("TBON_LOG", "info", 1);
    const tb_config_t *p = tb_config_process();
    REQUIRE(p);
    CHECK_STR(p->max_packet, "64M");
    CHECK_STR(p->log, "info");
    setenv("TBON_MAX_PACKET", "1G", 1);
    unsetenv("TBON_LOG");
    CHECK(tb_config_process() == p);
    CHECK_STR(tb_config_process()->max_packet, "64M");
    CHECK_STR(tb_config_process()->log, "info");
}

/* TBON_SECRET: copied out, wiped where it was, and unset; never kept. */
TEST(take_secret)
{
    char out[16];
    const char *s = "0123456789";
    REQUIRE(setenv(TB_SECRET_ENV, s, 1) == 0);
    char *where = getenv(TB_SECRET_ENV);
    REQUIRE(where);
    tb_config_t c;
    REQUIRE(tb_config_load(&c, NULL) == 0);     /* not in a snapshot */
    tb_config_free(&c);
    memset(out, 'x', sizeof out);
    CHECK_INT(tb_config_take_secret(out, sizeof out), 0);
    CHECK_STR(out, s);
    CHECK(getenv(TB_SECRET_ENV) == NULL);
    static const char zero[10];
    CHECK_MEM(where, zero, 10);                 /* wiped (setenv's copy is never freed) */
    /* gone now */
    memset(out, 'x', sizeof out);
    CHECK_INT(tb_config_take_secret(out, sizeof out), TBON_EAUTH);
    CHECK(out[0] == 'x');
    /* too long for out, or empty: not taken, still wiped and unset */
    REQUIRE(setenv(TB_SECRET_ENV, "0123456789abcdef", 1) == 0);
    where = getenv(TB_SECRET_ENV);
    CHECK_INT(tb_config_take_secret(out, sizeof out), TBON_EAUTH);
    CHECK(out[0] == 'x');
    CHECK(getenv(TB_SECRET_ENV) == NULL);
    CHECK_MEM(where, zero, 10);
    REQUIRE(setenv(TB_SECRET_ENV, "", 1) == 0);
    CHECK_INT(tb_config_take_secret(out, sizeof out), TBON_EAUTH);
    CHECK(getenv(TB_SECRET_ENV) == NULL);
    /* without out: only wiped and unset */
    REQUIRE(setenv(TB_SECRET_ENV, "abc", 1) == 0);
    CHECK_INT(tb_config_take_secret(NULL, 0), TBON_EAUTH);
    CHECK(getenv(TB_SECRET_ENV) == NULL);
    /* exactly filling out with its NUL */
    REQUIRE(setenv(TB_SECRET_ENV, "012345678901234", 1) == 0);
    CHECK_INT(tb_config_take_secret(out, sizeof out), 0);
    CHECK_STR(out, "012345678901234");
}
