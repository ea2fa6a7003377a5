/*
 * The environment of every git child the gateway runs (receive-pack,
 * upload-pack, index-pack, merge-base, cat-file, clone/fetch/gc of a
 * mirror). It is built from nothing, so no variable of whoever started the
 * gateway reaches git: not GIT_DIR, GIT_WORK_TREE, GIT_OBJECT_DIRECTORY,
 * GIT_CONFIG / GIT_CONFIG_PARAMETERS / GIT_CONFIG_COUNT, GIT_EXEC_PATH,
 * GIT_SSH_COMMAND, GIT_ASKPASS, XDG_CONFIG_HOME, LD_PRELOAD... Only the
 * variables listed in gitenv.c are set, each for a stated reason, plus the
 * few options that differ between callers (rg_gitenv_opts) and settings
 * passed as GIT_CONFIG_KEY_n/VALUE_n, which is how a secret (the mirror's
 * read credential as http.extraHeader) reaches git without being in argv.
 */
#ifndef RG_UTIL_GITENV_H
#define RG_UTIL_GITENV_H

#include <stddef.h>

#include "util/error.h"

/* The most settings one child gets through GIT_CONFIG_KEY_n/VALUE_n. */
#define RG_GITENV_CONFIG_MAX 8

typedef struct rg_gitenv rg_gitenv;

typedef struct rg_gitenv_opts {
    const char *object_dir; /* GIT_OBJECT_DIRECTORY: the only place objects are written */
    const char *alternates; /* GIT_ALTERNATE_OBJECT_DIRECTORIES: read-only object stores */
    const char *protocol;   /* GIT_PROTOCOL: what the client asked for (checked by the caller) */
    const char *gnupg_home; /* GNUPGHOME: a private keyring for verifying signatures */
} rg_gitenv_opts;

#define RG_GITENV_OPTS_INIT                                                                        \
    {                                                                                              \
        NULL, NULL, NULL, NULL                                                                     \
    }

/* A new environment with the fixed variables and `opts` (may be NULL). */
int rg_gitenv_new(rg_gitenv **out, const rg_gitenv_opts *opts, rg_error *err);

/* Add one configuration setting (key=value) for the child; the value may be a secret. */
int rg_gitenv_config(rg_gitenv *e, const char *key, const char *value, rg_error *err);

/* The NULL-terminated environment, valid until the next call or rg_gitenv_free. */
const char *const *rg_gitenv_envp(const rg_gitenv *e);

/* Wipe every string (one may hold a credential) and free. Accepts NULL. */
void rg_gitenv_free(rg_gitenv *e);

#endif
