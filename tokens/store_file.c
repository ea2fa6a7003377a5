/*
 * The token store in files under state_dir (store.h), for one machine:
 *
 *   token-keys  the public keys this state_dir's gateway signed with, one
 *               event a line: `key <kid> <hex public key> <created>` and
 *               `retire <kid> <when>` (unix seconds)
 *   revoked     `<token id> <token exp>` a line, as before the database
 *
 * Both are appended to, never rewritten, under an exclusive flock, with an
 * fsync before the answer, and read as streams every time they are asked
 * (the caller caches keys; revocations are never cached), so what
 * `refgate token revoke` appends is seen by a running gateway at once.
 * Either file decides which tokens work, so one that other users could
 * write (to un-revoke a token or add a key) is refused, not trusted.
 */
#include "tokens/store_ops.h"
#include "util/fs.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KEYS_FILE    "token-keys"
#define REVOKED_FILE "revoked"
#define LINE_MAX_LEN 256 /* longer lines are not ours: skipped */

typedef struct file_store {
    char keys[PATH_MAX];
    char revoked[PATH_MAX];
    char dir[PATH_MAX];
} file_store;

/* Open one of the files; *fd is -1 when it does not exist (and O_CREAT is not asked). */
static int private_open(int *fd, const char *path, int flags, rg_error *err)
{
    struct stat st;
    int rc = 0;

    *fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (*fd < 0) {
        if (errno == ENOENT && !(flags & O_CREAT))
            return 0;
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    }
    if (fstat(*fd, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s: not a regular file", path);
    } else if (st.st_mode & 022) {
        rc = rg_error_set(err, RG_E_CONFIG,
                          "%s: mode %04o lets other users change which tokens verify; it must be "
                          "0600",
                          path, (unsigned)(st.st_mode & 07777));
    }
    if (rc < 0) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

/*
 * Call fn on each line of the open file (without its newline), reading it
 * as a stream so its size needs no cap; a line past LINE_MAX_LEN is
 * skipped. A last line without a newline is still offered: a revocation
 * cut short after a whole id (a revoke that crashed) still counts. fn
 * returns 1 to stop.
 */
static int each_line(int fd, const char *path, int (*fn)(const char *line, void *arg), void *arg,
                     rg_error *err)
{
    char chunk[4096], line[LINE_MAX_LEN + 1];
    size_t len = 0, i;
    int skipping = 0;
    ssize_t n;

    /* Bounded: each round reads some of a finite file, or stops. */
    for (;;) {
        n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        if (n == 0)
            break;
        for (i = 0; i < (size_t)n; i++) {
            if (chunk[i] == '\n') {
                line[len] = '\0';
                if (!skipping && fn(line, arg))
                    return 0;
                len = 0;
                skipping = 0;
            } else if (len == LINE_MAX_LEN) {
                skipping = 1;
            } else {
                line[len++] = chunk[i];
            }
        }
    }
    if (len > 0 && !skipping) {
        line[len] = '\0';
        fn(line, arg);
    }
    return 0;
}

/*
 * Append `text` (whole lines) to the open file, holding its lock: a line a
 * crashed writer left without its newline is ended first, so it cannot
 * swallow the start of ours.
 */
static int append_locked(int fd, const char *path, const char *text, rg_error *err)
{
    struct stat st;
    char last;
    int rc;

    if (fstat(fd, &st) < 0)
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    if (st.st_size > 0) {
        if (pread(fd, &last, 1, st.st_size - 1) != 1)
            return rg_error_set(err, -EIO, "%s: cannot read its last byte", path);
        if (last != '\n' && (rc = rg_fs_write_all(fd, "\n", 1)) < 0)
            return rg_error_set(err, rc, "%s: %s", path, strerror(-rc));
    }
    rc = rg_fs_write_all(fd, text, strlen(text));
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (rc < 0)
        return rg_error_set(err, rc, "%s: %s", path, strerror(-rc));
    return 0;
}

/* Open `path` to append, created 0600 (its directory fsynced), and lock it. */
static int open_locked(int *fd, const file_store *fs, const char *path, rg_error *err)
{
    int existed = access(path, F_OK) == 0, rc;

    rc = private_open(fd, path, O_RDWR | O_APPEND | O_CREAT, err);
    if (rc < 0)
        return rc;
    if (flock(*fd, LOCK_EX) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        close(*fd);
        *fd = -1;
        return rc;
    }
    if (!existed && (rc = rg_fs_fsync_dir(fs->dir)) < 0) {
        close(*fd);
        *fd = -1;
        return rg_error_set(err, rc, "%s: fsync: %s", fs->dir, strerror(-rc));
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Keys
 * ------------------------------------------------------------------------ */

typedef struct key_search {
    const char *kid;
    int found;
    unsigned char pub[TOKENS_PUBLIC_KEY_LEN];
} key_search;

/* `key <kid> <64 hex> <created>` for the kid sought. */
static int key_line(const char *line, void *arg)
{
    key_search *ks = arg;
    const char *p;
    size_t i;
    int hi, lo;

    if (strncmp(line, "key ", 4) != 0 || strncmp(line + 4, ks->kid, TOKENS_KID_HEX) != 0 ||
        line[4 + TOKENS_KID_HEX] != ' ')
        return 0;
    p = line + 4 + TOKENS_KID_HEX + 1;
    for (i = 0; i < TOKENS_PUBLIC_KEY_LEN; i++) {
        hi = rg_hex_digit(p[2 * i]);
        lo = hi < 0 ? -1 : rg_hex_digit(p[2 * i + 1]);
        if (lo < 0)
            return 0; /* a torn line: not a key */
        ks->pub[i] = (unsigned char)(hi << 4 | lo);
    }
    if (p[2 * TOKENS_PUBLIC_KEY_LEN] != ' ')
        return 0;
    ks->found = 1;
    return 1;
}

static int keys_search(key_search *ks, int fd, const file_store *fs, rg_error *err)
{
    ks->found = 0;
    if (fd < 0)
        return 0;
    if (lseek(fd, 0, SEEK_SET) < 0)
        return rg_error_set(err, -errno, "%s: %s", fs->keys, strerror(errno));
    return each_line(fd, fs->keys, key_line, ks, err);
}

static int file_key_find(void *impl, int *found, unsigned char pub[TOKENS_PUBLIC_KEY_LEN],
                         const char *kid, rg_error *err)
{
    file_store *fs = impl;
    key_search ks = {.kid = kid};
    int fd, rc;

    *found = 0;
    rc = private_open(&fd, fs->keys, O_RDONLY, err);
    if (rc < 0)
        return rc;
    rc = keys_search(&ks, fd, fs, err);
    if (fd >= 0)
        close(fd);
    if (rc == 0 && ks.found) {
        memcpy(pub, ks.pub, TOKENS_PUBLIC_KEY_LEN);
        *found = 1;
    }
    return rc;
}

static int file_key_put(void *impl, const char *kid, const unsigned char pub[TOKENS_PUBLIC_KEY_LEN],
                        const char *gateway, rg_error *err)
{
    file_store *fs = impl;
    key_search ks = {.kid = kid};
    char line[LINE_MAX_LEN], hex[2 * TOKENS_PUBLIC_KEY_LEN + 1];
    int fd, rc;

    (void)gateway; /* one gateway per state_dir */
    rc = open_locked(&fd, fs, fs->keys, err);
    if (rc < 0)
        return rc;
    rc = keys_search(&ks, fd, fs, err);
    if (rc < 0)
        goto done;
    if (ks.found) {
        if (memcmp(ks.pub, pub, TOKENS_PUBLIC_KEY_LEN) != 0)
            rc = rg_error_set(err, RG_E_CONFIG, "%s: key id %s is taken by another key", fs->keys,
                              kid);
        goto done;
    }
    rg_hex_encode(hex, pub, TOKENS_PUBLIC_KEY_LEN);
    snprintf(line, sizeof(line), "key %s %s %lld\n", kid, hex, (long long)time(NULL));
    rc = append_locked(fd, fs->keys, line, err);
done:
    close(fd);
    return rc;
}

static int file_key_retire(void *impl, const char *kid, rg_error *err)
{
    file_store *fs = impl;
    char line[LINE_MAX_LEN];
    int fd, rc;

    rc = open_locked(&fd, fs, fs->keys, err);
    if (rc < 0)
        return rc;
    snprintf(line, sizeof(line), "retire %s %lld\n", kid, (long long)time(NULL));
    rc = append_locked(fd, fs->keys, line, err);
    close(fd);
    return rc;
}

/* ------------------------------------------------------------------------
 * Revocations
 * ------------------------------------------------------------------------ */

typedef struct id_search {
    const char *id;
    int found;
} id_search;

/* The first field of `<id> <exp>` (or of a line cut after the id). */
static int revoked_line(const char *line, void *arg)
{
    id_search *is = arg;
    size_t n = strlen(is->id);

    if (strncmp(line, is->id, n) == 0 && (line[n] == ' ' || line[n] == '\0')) {
        is->found = 1;
        return 1;
    }
    return 0;
}

static int revoked_search(id_search *is, int fd, const file_store *fs, rg_error *err)
{
    is->found = 0;
    if (fd < 0)
        return 0;
    if (lseek(fd, 0, SEEK_SET) < 0)
        return rg_error_set(err, -errno, "%s: %s", fs->revoked, strerror(errno));
    return each_line(fd, fs->revoked, revoked_line, is, err);
}

static int file_is_revoked(void *impl, int *revoked, const char *id, rg_error *err)
{
    file_store *fs = impl;
    id_search is = {.id = id};
    int fd, rc;

    *revoked = 0;
    rc = private_open(&fd, fs->revoked, O_RDONLY, err);
    if (rc < 0)
        return rc;
    rc = revoked_search(&is, fd, fs, err);
    if (fd >= 0)
        close(fd);
    *revoked = is.found;
    return rc;
}

static int file_revoke(void *impl, const char *id, int64_t exp, rg_error *err)
{
    file_store *fs = impl;
    id_search is = {.id = id};
    char line[LINE_MAX_LEN];
    int fd, rc;

    rc = open_locked(&fd, fs, fs->revoked, err);
    if (rc < 0)
        return rc;
    rc = revoked_search(&is, fd, fs, err);
    if (rc == 0 && !is.found) {
        snprintf(line, sizeof(line), "%s %lld\n", id, (long long)exp);
        rc = append_locked(fd, fs->revoked, line, err);
    }
    close(fd);
    return rc;
}

static void file_free(void *impl)
{
    free(impl);
}

static const tokens_store_ops file_ops = {
    .kind = "files",
    .key_put = file_key_put,
    .key_retire = file_key_retire,
    .key_find = file_key_find,
    .revoke = file_revoke,
    .is_revoked = file_is_revoked,
    .free = file_free,
};

int tokens_store_file_open(tokens_store **out, const char *state_dir, rg_error *err)
{
    file_store *fs;
    int rc;

    *out = NULL;
    if (state_dir == NULL || state_dir[0] == '\0')
        return rg_error_set(err, -EINVAL, "no state directory");
    fs = calloc(1, sizeof(*fs));
    if (fs == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    if (snprintf(fs->dir, sizeof(fs->dir), "%s", state_dir) >= (int)sizeof(fs->dir) ||
        snprintf(fs->keys, sizeof(fs->keys), "%s/%s", state_dir, KEYS_FILE) >=
            (int)sizeof(fs->keys) ||
        snprintf(fs->revoked, sizeof(fs->revoked), "%s/%s", state_dir, REVOKED_FILE) >=
            (int)sizeof(fs->revoked)) {
        free(fs);
        return rg_error_set(err, -ENAMETOOLONG, "%s: path too long", state_dir);
    }
    rc = rg_fs_mkdir_p(state_dir, 0700, err);
    if (rc < 0) {
        free(fs);
        return rc;
    }
    return tokens_store_new(out, &file_ops, fs, err);
}

/* ------------------------------------------------------------------------
 * Import into another store
 * ------------------------------------------------------------------------ */

typedef struct import_state {
    tokens_store *dst;
    size_t n;
    int rc;
    rg_error *err;
} import_state;

/* `key <kid> <hex> <created>` and `retire <kid> <when>`; torn lines are skipped. */
static int import_key_line(const char *line, void *arg)
{
    import_state *is = arg;
    unsigned char pub[TOKENS_PUBLIC_KEY_LEN];
    char kid[TOKENS_KID_SIZE];
    int hi, lo;
    size_t i;

    if (!strncmp(line, "key ", 4) && strlen(line) > 4 + TOKENS_KID_HEX + 1 + 64 &&
        line[4 + TOKENS_KID_HEX] == ' ') {
        memcpy(kid, line + 4, TOKENS_KID_HEX);
        kid[TOKENS_KID_HEX] = '\0';
        for (i = 0; i < TOKENS_PUBLIC_KEY_LEN; i++) {
            hi = rg_hex_digit(line[4 + TOKENS_KID_HEX + 1 + 2 * i]);
            lo = rg_hex_digit(line[4 + TOKENS_KID_HEX + 2 + 2 * i]);
            if (hi < 0 || lo < 0)
                return 0;
            pub[i] = (unsigned char)(hi << 4 | lo);
        }
        is->rc = tokens_store_key_put(is->dst, kid, pub, "import", is->err);
    } else if (!strncmp(line, "retire ", 7) && strlen(line) > 7 + TOKENS_KID_HEX &&
               line[7 + TOKENS_KID_HEX] == ' ') {
        memcpy(kid, line + 7, TOKENS_KID_HEX);
        kid[TOKENS_KID_HEX] = '\0';
        is->rc = tokens_store_key_retire(is->dst, kid, is->err);
    } else {
        return 0;
    }
    if (is->rc == -EINVAL) /* a kid that is not 16 hex digits: not ours */
        is->rc = 0;
    else if (is->rc == 0)
        is->n++;
    return is->rc < 0;
}

/*
 * `<id> <exp>`. A line a crashed revoke cut after its whole id still
 * revokes (as the file store reads it); its expiry is unknown then, so it
 * is imported as never expiring rather than pruned early.
 */
static int import_revoked_line(const char *line, void *arg)
{
    import_state *is = arg;
    char id[TOKENS_ID_HEX + 1], *end;
    long long exp = 0;

    if (strlen(line) < TOKENS_ID_HEX || (line[TOKENS_ID_HEX] != ' ' && line[TOKENS_ID_HEX] != '\0'))
        return 0;
    memcpy(id, line, TOKENS_ID_HEX);
    id[TOKENS_ID_HEX] = '\0';
    if (line[TOKENS_ID_HEX] == ' ') {
        errno = 0;
        exp = strtoll(line + TOKENS_ID_HEX + 1, &end, 10);
        if (errno != 0 || *end != '\0')
            exp = 0;
    }
    /* Before 2001: not an expiry refgate wrote whole. */
    if (exp < 1000000000LL)
        exp = INT64_MAX;
    is->rc = tokens_store_revoke(is->dst, id, (int64_t)exp, is->err);
    if (is->rc == -EINVAL)
        is->rc = 0;
    else if (is->rc == 0)
        is->n++;
    return is->rc < 0;
}

static int import_file(import_state *is, const char *path, int (*fn)(const char *, void *),
                       rg_error *err)
{
    int fd, rc;

    rc = private_open(&fd, path, O_RDONLY, err);
    if (rc < 0 || fd < 0)
        return rc;
    rc = each_line(fd, path, fn, is, err);
    close(fd);
    return rc < 0 ? rc : is->rc;
}

int tokens_store_import_files(tokens_store *dst, const char *state_dir, size_t *nkeys,
                              size_t *nrevoked, rg_error *err)
{
    import_state keys = {.dst = dst, .err = err}, revs = {.dst = dst, .err = err};
    char path[PATH_MAX];
    int rc;

    *nkeys = *nrevoked = 0;
    if (snprintf(path, sizeof(path), "%s/%s", state_dir, KEYS_FILE) >= (int)sizeof(path))
        return rg_error_set(err, -ENAMETOOLONG, "%s: path too long", state_dir);
    rc = import_file(&keys, path, import_key_line, err);
    if (rc < 0)
        return rc;
    snprintf(path, sizeof(path), "%s/%s", state_dir, REVOKED_FILE);
    rc = import_file(&revs, path, import_revoked_line, err);
    if (rc < 0)
        return rc;
    *nkeys = keys.n;
    *nrevoked = revs.n;
    return 0;
}
