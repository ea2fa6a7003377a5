/*
 * libFuzzer target for config loading (config/config.h): the JSON a
 * gateway reads at start and on every reload, parsed from memory as
 * config_parse does and read from a file (a memfd named by its /proc
 * path) as config_load does. The config names a directory of its own with
 * an upstream root in it, so local upstreams can resolve. Besides "no
 * crash, no leak, no UB" it checks: a refusal leaves *out NULL with a
 * message and a documented code; a loaded config finds each of its
 * upstreams by host, and the file and the memory give the same answer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], path[128];

static void cleanup(void)
{
    char sub[160];

    snprintf(sub, sizeof(sub), "%s/upstream/acme/app.git", dir);
    rmdir(sub);
    snprintf(sub, sizeof(sub), "%s/upstream/acme", dir);
    rmdir(sub);
    snprintf(sub, sizeof(sub), "%s/upstream", dir);
    rmdir(sub);
    rmdir(dir);
}

/* Once: <dir>/refgate.json's directory, with upstream/acme/app.git in it. */
static void setup(void)
{
    char sub[160];

    snprintf(dir, sizeof(dir), "/tmp/rgfuzz-config.XXXXXX");
    FUZZ_CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/refgate.json", dir);
    snprintf(sub, sizeof(sub), "%s/upstream", dir);
    FUZZ_CHECK(mkdir(sub, 0700) == 0);
    snprintf(sub, sizeof(sub), "%s/upstream/acme", dir);
    FUZZ_CHECK(mkdir(sub, 0700) == 0);
    snprintf(sub, sizeof(sub), "%s/upstream/acme/app.git", dir);
    FUZZ_CHECK(mkdir(sub, 0700) == 0);
    atexit(cleanup);
}

static void check(int rc, config_model *cfg, const rg_error *err)
{
    size_t i;

    if (rc < 0) {
        FUZZ_CHECK(cfg == NULL);
        FUZZ_CHECK(err->msg[0] != '\0');
        FUZZ_CHECK(rc == RG_E_CONFIG || (rc > -4096 && rc < 0));
        return;
    }
    FUZZ_CHECK(rc == 0 && cfg != NULL);
    FUZZ_CHECK(cfg->state_dir != NULL && cfg->state_dir[0] == '/');
    for (i = 0; i < cfg->nupstreams; i++)
        FUZZ_CHECK(config_find_upstream(cfg, cfg->upstreams[i].host) == &cfg->upstreams[i]);
}

/* The same bytes through config_load, from a memfd. */
static int load_from_file(const uint8_t *data, size_t size)
{
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    char fdpath[64];
    int fd, rc;

    fd = memfd_create("refgate.json", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(write(fd, data, size) == (ssize_t)size);
    snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
    rc = config_load(&cfg, fdpath, &err);
    check(rc, cfg, &err);
    config_free(cfg);
    close(fd);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    int rc;

    if (dir[0] == '\0')
        setup();
    rc = config_parse(&cfg, (const char *)data, size, path, &err);
    check(rc, cfg, &err);
    config_free(cfg);
    /* Paths in the config resolve against the file's directory, which for
     * the memfd is /proc/self/fd: compare only configs without any. */
    if (memchr(data, '/', size) == NULL && memchr(data, '\\', size) == NULL)
        FUZZ_CHECK((load_from_file(data, size) < 0) == (rc < 0));
    else
        load_from_file(data, size);
    return 0;
}
