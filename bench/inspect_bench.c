/*
 * Times the content inspection of one push (bench/inspect.sh drives it):
 * the pack indexed into a quarantine (git index-pack, what any inspected
 * push pays), then inspect_conditions_inspect with the config's rules
 * (every object of the pack read and secret-scanned, every commit of the
 * range walked and diffed). Prints "index_ms inspect_ms objects".
 *
 *   inspect_bench CONFIG UPSTREAM_GITDIR PACK OLD_ID NEW_ID
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "inspect/conditions.h"
#include "git/quarantine.h"
#include "util/buf.h"
#include "util/fs.h"

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    rg_buf pack = RG_BUF_INIT((size_t)4 << 30);
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;
    rgit_quarantine *q = NULL;
    inspect_conditions *g = NULL;
    inspect_conditions_ref ref;
    const policy_facts *f;
    double t0, t1, t2;
    int rc = 1;

    if (argc != 6) {
        fprintf(stderr, "usage: inspect_bench CONFIG UPSTREAM_GITDIR PACK OLD_ID NEW_ID\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (config_load(&cfg, argv[1], &err) < 0 || rg_fs_read_file(&pack, argv[3], &err) < 0)
        goto done;
    t0 = now_ms();
    if (rgit_quarantine_new(&q, argv[2], "/tmp", 40, &err) < 0 ||
        rgit_quarantine_write(q, pack.data, pack.len, &err) < 0 ||
        rgit_quarantine_finish(q, &err) < 0)
        goto done;
    t1 = now_ms();
    ref = (inspect_conditions_ref){argv[4], argv[5], 1};
    if (inspect_conditions_inspect(&g, cfg, q, NULL, &ref, 1, &err) < 0)
        goto done;
    t2 = now_ms();
    f = inspect_conditions_facts(g, 0);
    for (size_t i = 0; i < cfg->nrules; i++)
        if (cfg->rules[i].cond.set && f->cond[i] == POLICY_COND_UNKNOWN) {
            fprintf(stderr, "inspect_bench: rule %s unknown: %s\n", cfg->rules[i].name,
                    f->why[i] ? f->why[i] : "");
            goto done;
        }
    printf("%.1f %.1f\n", t1 - t0, t2 - t1);
    rc = 0;
done:
    if (rc != 0 && err.msg[0])
        fprintf(stderr, "inspect_bench: %s\n", err.msg);
    inspect_conditions_free(g);
    rgit_quarantine_free(q);
    config_free(cfg);
    rg_buf_free(&pack);
    return rc;
}
