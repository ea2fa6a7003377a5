/*
 * Reviewer accounts of the review console (console/): one `NAME:HASH` line
 * each in <state_dir>/console-users (0600), the hash libcrypt's yescrypt
 * ("$y$..."). Only the gateway writes the file (the control socket's
 * "console-user-add" op, so a reviewer never needs state_dir); the console
 * reads it at every login, so an account added works at once.
 *
 * A name is 1..GATEWAY_REVIEWER_NAME_MAX bytes of [A-Za-z0-9._-]; a
 * password 8..GATEWAY_REVIEWER_PASSWORD_MAX bytes without NUL or newline.
 */
#ifndef RG_GATEWAY_REVIEWERS_H
#define RG_GATEWAY_REVIEWERS_H

#include "util/error.h"

#define GATEWAY_REVIEWER_NAME_MAX     64
#define GATEWAY_REVIEWER_PASSWORD_MIN 8
#define GATEWAY_REVIEWER_PASSWORD_MAX 1024

/* Whether `name` is a well-formed reviewer name. */
int gateway_reviewer_name_ok(const char *name);

/*
 * Add reviewer `name` with `password` to the file in `state_dir`, or
 * replace that reviewer's password; *replaced (may be NULL) says which.
 * The file is rewritten atomically; writers are serialised in-process.
 */
int gateway_reviewer_set(int *replaced, const char *state_dir, const char *name,
                         const char *password, rg_error *err);

/*
 * 1 when `name` is a reviewer whose password is `password`, 0 when not
 * (no such reviewer, a wrong password, no file), negative when the file
 * cannot be read. An unknown name still costs one hash, so timing does not
 * tell names apart.
 */
int gateway_reviewer_check(const char *state_dir, const char *name, const char *password,
                           rg_error *err);

#endif
