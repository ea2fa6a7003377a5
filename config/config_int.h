/*
 * Private to config/: what the loader's sections (load.c, keypath.c,
 * upstreams.c, rules.c, services.c) share. Not for other folders; they
 * use config/config.h. The helpers are link-visible since the split, so
 * they carry a cfg_ prefix: a bare `fail` would clash with any other
 * library's.
 */
#ifndef RG_CONFIG_CONFIG_INT_H
#define RG_CONFIG_CONFIG_INT_H

#include "config/config.h"

#include <jansson.h>
#include <stdint.h>

/* A config is a page of JSON; anything near this size is not one. */
#define CONFIG_MAX_BYTES (16u * 1024 * 1024)

#define DEFAULT_LISTEN_HOST "127.0.0.1"
#define DEFAULT_LISTEN_PORT 8470
#define DEFAULT_MAX_BODY    ((uint64_t)2 * 1024 * 1024 * 1024)

/*
 * Names and reasons end up in ng lines, audit records and terminals, so
 * they are kept to one short line of printable text.
 */
#define NAME_MAX_LEN   100
#define REASON_MAX_LEN 256
#define HOST_MAX_LEN   100

#define KEYPATH_MAX 160

typedef struct parse_ctx {
    const char *file; /* as the caller named it: what the user will recognise */
    const char *dir;  /* absolute directory relative paths start from */
    rg_error *err;
} parse_ctx;

/* keypath.c */
int cfg_fail(const parse_ctx *ctx, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int cfg_fail_oom(const parse_ctx *ctx);
const char *cfg_json_kind(const json_t *v);
int cfg_fail_type(const parse_ctx *ctx, const char *key, const char *want, const json_t *v);
void cfg_keypath_key(char *out, const char *parent, const char *key);
void cfg_keypath_index(char *out, const char *parent, size_t i);
int cfg_check_keys(const parse_ctx *ctx, const json_t *obj, const char *parent,
                   const char *const *allowed, const char *expected);
int cfg_is_one_line(const char *s);
int cfg_check_text(const parse_ctx *ctx, const char *parent, const char *key, const char *s,
                   size_t max);
int cfg_get_string(const char **out, const parse_ctx *ctx, const json_t *obj, const char *parent,
                   const char *key, int required, const char *hint);
int cfg_dup_string(char **out, const parse_ctx *ctx, const char *s);
void cfg_path_normalize(char *p);
char *cfg_path_join(const char *base, const char *rel);
int cfg_path_absolute(char **out, const char *base, const char *rel);
int config_locate(char **out_path, char **out_dir, const char *path, rg_error *err);

/* load.c */
int cfg_parse_listen(char **out_host, unsigned *out_port, const parse_ctx *ctx, const char *key,
                     const char *s);
int cfg_parse_effect(config_effect *out, const parse_ctx *ctx, const char *key, const char *s);
void cfg_free_strings(char **v, size_t n);

/* upstreams.c */
void cfg_free_credentials(config_credentials *c);
int cfg_parse_upstreams(config_model *cfg, const parse_ctx *ctx, const json_t *arr);

/* rules.c */
int cfg_effect_from_name(config_effect *out, const char *s);
int cfg_parse_rules(config_model *cfg, const parse_ctx *ctx, const json_t *arr);

/* services.c */
int cfg_parse_control(config_control *out, const config_model *cfg, const parse_ctx *ctx,
                      const json_t *obj);
int cfg_parse_approvals(config_approvals *out, const parse_ctx *ctx, const json_t *obj);
int cfg_parse_admin(config_admin *out, const config_model *cfg, const parse_ctx *ctx,
                    const json_t *obj);
int cfg_parse_console(config_console *out, const config_model *cfg, const parse_ctx *ctx,
                      const json_t *obj);

#endif
