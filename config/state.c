/*
 * The "state" object (config/state.h). The connection string is checked
 * with libpq's own parser, so a typo is a config error at load rather than
 * a refused push later, and a password in it is refused before it can be
 * logged or copied anywhere.
 */
#include "config/state.h"

#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(rg_error *err, const char *file, const char *key, const char *problem)
{
    return rg_error_set(err, RG_E_CONFIG, "%s: state%s%s: %s", file, key ? "." : "", key ? key : "",
                        problem);
}

static int check_conninfo(const char *s, const char *file, rg_error *err)
{
    PQconninfoOption *opts, *o;
    char *perr = NULL;
    int rc = 0;

    opts = PQconninfoParse(s, &perr);
    if (opts == NULL) {
        /* libpq's message names the bad part; it cannot hold a password we keep. */
        rc = rg_error_set(err, RG_E_CONFIG, "%s: state.postgres: not a libpq connection string: %s",
                          file, perr ? strtok(perr, "\n") : "out of memory");
        PQfreemem(perr);
        return rc;
    }
    for (o = opts; o->keyword != NULL; o++)
        if (!strcmp(o->keyword, "password") && o->val != NULL && o->val[0] != '\0')
            rc = fail(err, file, "postgres",
                      "holds a password; put it in state.password_file or PGPASSWORD instead");
    PQconninfoFree(opts);
    return rc;
}

int config_state_parse(config_state *out, const json_t *v, const char *file, const char *dir,
                       rg_error *err)
{
    const char *key, *s;
    json_t *val;
    int rc;

    memset(out, 0, sizeof(*out));
    out->connections = CONFIG_STATE_CONNECTIONS_DEFAULT;
    if (v == NULL)
        return 0;
    if (!json_is_object(v))
        return fail(err, file, NULL, "expected an object");
    json_object_foreach((json_t *)v, key, val)
    {
        if (strcmp(key, "postgres") && strcmp(key, "password_file") && strcmp(key, "connections"))
            return fail(err, file, key,
                        "unknown key (expected postgres, password_file or connections)");
    }
    val = json_object_get(v, "postgres");
    if (val == NULL)
        return fail(err, file, "postgres", "required in \"state\" (a libpq connection string)");
    if (!json_is_string(val) || json_string_length(val) == 0)
        return fail(err, file, "postgres", "expected a libpq connection string");
    s = json_string_value(val);
    if ((rc = check_conninfo(s, file, err)) < 0)
        return rc;
    if ((out->postgres = strdup(s)) == NULL)
        return rg_error_set(err, -ENOMEM, "%s: out of memory", file);

    val = json_object_get(v, "password_file");
    if (val != NULL) {
        if (!json_is_string(val) || json_string_length(val) == 0)
            return fail(err, file, "password_file", "expected a file name");
        s = json_string_value(val);
        if ((s[0] == '/' ? asprintf(&out->password_file, "%s", s)
                         : asprintf(&out->password_file, "%s/%s", dir, s)) < 0) {
            out->password_file = NULL;
            return rg_error_set(err, -ENOMEM, "%s: out of memory", file);
        }
    }

    val = json_object_get(v, "connections");
    if (val != NULL) {
        if (!json_is_integer(val) || json_integer_value(val) < 1 ||
            json_integer_value(val) > CONFIG_STATE_CONNECTIONS_MAX)
            return fail(err, file, "connections", "expected an integer from 1 to 64");
        out->connections = (unsigned)json_integer_value(val);
    }
    return 0;
}

void config_state_free(config_state *s)
{
    if (s == NULL)
        return;
    free(s->postgres);
    free(s->password_file);
    memset(s, 0, sizeof(*s));
}
