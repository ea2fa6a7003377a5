/*
 * The reviewer account file (reviewers.h): read whole (it is small and
 * capped), edited in memory, written back with rg_fs_write_atomic. Hashes
 * are made and checked with crypt_r, never compared with strcmp.
 */
#include "gateway/reviewers.h"

#include <crypt.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/fs.h"

/* The file holds at most this many bytes: a few thousand reviewers. */
#define FILE_MAX (1024 * 1024)

/* yescrypt's default cost (libcrypt's choice when count is 0). */
#define HASH_PREFIX "$y$"

static pthread_mutex_t writer = PTHREAD_MUTEX_INITIALIZER;

int gateway_reviewer_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;

    if (n == 0 || n > GATEWAY_REVIEWER_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return 0;
    }
    return 1;
}

static int password_ok(const char *pw, rg_error *err)
{
    size_t n = pw ? strlen(pw) : 0;

    if (n < GATEWAY_REVIEWER_PASSWORD_MIN || n > GATEWAY_REVIEWER_PASSWORD_MAX)
        return rg_error_set(err, -EINVAL, "password: %d to %d bytes", GATEWAY_REVIEWER_PASSWORD_MIN,
                            GATEWAY_REVIEWER_PASSWORD_MAX);
    if (strchr(pw, '\n') != NULL)
        return rg_error_set(err, -EINVAL, "password: one line");
    return 0;
}

static int file_path(char *out, size_t outsz, const char *state_dir, rg_error *err)
{
    if ((size_t)snprintf(out, outsz, "%s/console-users", state_dir) >= outsz)
        return rg_error_set(err, -ENAMETOOLONG, "state_dir is too long");
    return 0;
}

/* The file's text (empty when there is none yet). */
static int read_all(rg_buf *out, const char *path, rg_error *err)
{
    int rc = rg_fs_read_file(out, path, err);

    if (rc == -ENOENT && err != NULL)
        *err = (rg_error)RG_ERROR_INIT;
    return rc == -ENOENT ? 0 : rc;
}

/* The hash stored for `name` in `text` (NUL-terminated), copied to out; 0 when none. */
static int find_hash(char *out, size_t outsz, const char *text, const char *name)
{
    size_t nlen = strlen(name);

    /* Bounded: one step per line of a capped file. */
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);

        if (len > nlen && line[nlen] == ':' && !strncmp(line, name, nlen) &&
            len - nlen - 1 < outsz) {
            memcpy(out, line + nlen + 1, len - nlen - 1);
            out[len - nlen - 1] = '\0';
            return 1;
        }
        line = end ? end + 1 : NULL;
    }
    return 0;
}

int gateway_reviewer_set(int *replaced, const char *state_dir, const char *name,
                         const char *password, rg_error *err)
{
    rg_buf old = RG_BUF_INIT(FILE_MAX), out = RG_BUF_INIT(FILE_MAX);
    struct crypt_data *cd = NULL;
    char path[4200], salt[CRYPT_GENSALT_OUTPUT_SIZE];
    const char *hash;
    int rc, found = 0;

    if (replaced)
        *replaced = 0;
    if (!gateway_reviewer_name_ok(name))
        return rg_error_set(err, -EINVAL, "name: 1 to %d of A-Z a-z 0-9 . _ -",
                            GATEWAY_REVIEWER_NAME_MAX);
    if ((rc = password_ok(password, err)) < 0 ||
        (rc = file_path(path, sizeof(path), state_dir, err)) < 0)
        return rc;
    cd = calloc(1, sizeof(*cd));
    if (cd == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    if (crypt_gensalt_rn(HASH_PREFIX, 0, NULL, 0, salt, sizeof(salt)) == NULL) {
        rc = rg_error_set(err, -ENOTSUP, "libcrypt cannot make a yescrypt salt");
        goto done;
    }
    hash = crypt_r(password, salt, cd);
    if (hash == NULL || hash[0] == '*') {
        rc = rg_error_set(err, -ENOTSUP, "libcrypt cannot hash with yescrypt");
        goto done;
    }
    pthread_mutex_lock(&writer);
    rc = read_all(&old, path, err);
    /* Bounded: one step per line of a capped file. */
    for (const char *line = old.data; rc == 0 && line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line), nlen = strlen(name);

        if (len > nlen && line[nlen] == ':' && !strncmp(line, name, nlen)) {
            found = 1;
            rc = rg_buf_printf(&out, "%s:%s\n", name, hash);
        } else if (len > 0) {
            rc = rg_buf_append(&out, line, len);
            if (rc == 0)
                rc = rg_buf_append(&out, "\n", 1);
        }
        line = end ? end + 1 : NULL;
    }
    if (rc == 0 && !found)
        rc = rg_buf_printf(&out, "%s:%s\n", name, hash);
    if (rc == RG_E_TOO_BIG)
        rg_error_set(err, rc, "the reviewer file would pass %d bytes", FILE_MAX);
    if (rc == 0)
        rc = rg_fs_write_atomic(path, out.data, out.len, 0600, err);
    pthread_mutex_unlock(&writer);
    if (rc == 0 && replaced)
        *replaced = found;
done:
    if (cd != NULL) {
        explicit_bzero(cd, sizeof(*cd));
        free(cd);
    }
    rg_buf_free(&old);
    rg_buf_free(&out);
    return rc;
}

int gateway_reviewer_check(const char *state_dir, const char *name, const char *password,
                           rg_error *err)
{
    rg_buf text = RG_BUF_INIT(FILE_MAX);
    struct crypt_data *cd = NULL;
    char path[4200], stored[512];
    const char *got;
    int rc, known = 0;

    if ((rc = file_path(path, sizeof(path), state_dir, err)) < 0)
        return rc;
    if ((rc = read_all(&text, path, err)) < 0)
        goto done;
    if (gateway_reviewer_name_ok(name) && text.data != NULL)
        known = find_hash(stored, sizeof(stored), text.data, name);
    /* An unknown name is hashed against a valid setting all the same. */
    if (!known || strncmp(stored, HASH_PREFIX, strlen(HASH_PREFIX)) != 0) {
        known = 0;
        if (crypt_gensalt_rn(HASH_PREFIX, 0, NULL, 0, stored, sizeof(stored)) == NULL) {
            rc = rg_error_set(err, -ENOTSUP, "libcrypt cannot make a yescrypt salt");
            goto done;
        }
    }
    cd = calloc(1, sizeof(*cd));
    if (cd == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    got = crypt_r(password ? password : "", stored, cd);
    rc = known && got != NULL && strlen(got) == strlen(stored) &&
         CRYPTO_memcmp(got, stored, strlen(stored)) == 0;
done:
    if (cd != NULL) {
        explicit_bzero(cd, sizeof(*cd));
        free(cd);
    }
    rg_buf_free(&text);
    return rc;
}
