/*
 * Run tokens: minting, verification and revocation (see token.h).
 *
 * A token is `rg1.<b64url(claims JSON)>.<b64url(HMAC-SHA-256)>`, the MAC
 * taken over everything before the second dot, so the version prefix is
 * signed too. Verification checks the shape, then the MAC in constant time,
 * and only then parses the claims: nothing an attacker wrote reaches the
 * JSON parser unless it was signed with the key. The key lives in
 * `<state_dir>/token.key`; revocations are lines `<id> <exp>` appended to
 * `<state_dir>/revoked`, which verification reads every time so that a
 * revocation written by `refgate token revoke` takes effect in a running
 * gateway at once.
 */
#include "tokens/token.h"
#include "tokens/b64url.h"
#include "util/text.h"
#include "util/fs.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_LEN       32
#define MAC_LEN       32
#define ID_BYTES      16
#define ID_HEX        (ID_BYTES * 2)
#define TOKEN_PREFIX  "rg1."
#define HOST_MAX      127 /* as gateway/route.h: host[128], path[512] */
#define REPO_PATH_MAX 511
#define REPO_SEGS_MAX 16
#define KEY_FILE      "token.key"
#define REVOKED_FILE  "revoked"

struct tokens_key {
    unsigned char bytes[KEY_LEN];
};

/* ------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------ */

static int join_path(char out[PATH_MAX], const char *dir, const char *name, rg_error *err)
{
    if (dir == NULL || dir[0] == '\0')
        return rg_error_set(err, -EINVAL, "no state directory");
    if (snprintf(out, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX)
        return rg_error_set(err, -ENAMETOOLONG, "%s/%s: path too long", dir, name);
    return 0;
}

/*
 * fsync a directory so that a file just created or linked in it survives a
 * crash; without this a fresh key could vanish and every token minted with
 * it would stop verifying after a reboot.
 */
static int fsync_dir(const char *dir)
{
    int fd, rc = 0;

    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fsync(fd) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

/* ------------------------------------------------------------------------
 * Validation of what goes into claims
 * ------------------------------------------------------------------------ */

static int run_valid(const char *run, rg_error *err)
{
    size_t i, len;

    if (run == NULL || run[0] == '\0')
        return rg_error_set(err, -EINVAL, "run name is empty");
    len = strnlen(run, TOKENS_RUN_MAX + 1);
    if (len > TOKENS_RUN_MAX)
        return rg_error_set(err, -EINVAL, "run name is longer than %d characters", TOKENS_RUN_MAX);
    /* Run names end up in logs and terminals: printable ASCII only. */
    for (i = 0; i < len; i++)
        if ((unsigned char)run[i] <= ' ' || (unsigned char)run[i] >= 0x7f)
            return rg_error_set(err, -EINVAL,
                                "run name may hold only printable ASCII without spaces");
    return 0;
}

/* The same segment rule as gateway/route.c, so a token names what a URL can. */
static int repo_valid(const char *repo, rg_error *err)
{
    const char *slash, *p;
    size_t len, seglen, nseg = 0;

    if (repo == NULL || repo[0] == '\0')
        return rg_error_set(err, -EINVAL, "empty repository name");
    len = strnlen(repo, HOST_MAX + 1 + REPO_PATH_MAX + 1);
    if (len > HOST_MAX + 1 + REPO_PATH_MAX)
        return rg_error_set(err, -EINVAL, "repository name is too long");
    slash = strchr(repo, '/');
    if (slash == NULL)
        return rg_error_set(err, -EINVAL, "repository '%s' is not <host>/<path>", repo);
    if ((size_t)(slash - repo) > HOST_MAX || !rg_name_segment_ok(repo, (size_t)(slash - repo)))
        return rg_error_set(err, -EINVAL, "repository '%s': invalid host", repo);
    p = slash + 1;
    if (strlen(p) > REPO_PATH_MAX)
        return rg_error_set(err, -EINVAL, "repository '%s': path is too long", repo);
    for (;; p = slash + 1) {
        slash = strchr(p, '/');
        seglen = slash ? (size_t)(slash - p) : strlen(p);
        if (!rg_name_segment_ok(p, seglen))
            return rg_error_set(err, -EINVAL,
                                "repository '%s': path segments must be plain names "
                                "(letters, digits, ._-+~; no empty, '.' or '..' segment)",
                                repo);
        if (++nseg > REPO_SEGS_MAX)
            return rg_error_set(err, -EINVAL, "repository '%s': more than %d path segments", repo,
                                REPO_SEGS_MAX);
        if (slash == NULL)
            break;
    }
    if (len >= 4 && !strcmp(repo + len - 4, ".git"))
        return rg_error_set(err, -EINVAL, "repository '%s': name it without '.git'", repo);
    return 0;
}

/* ------------------------------------------------------------------------
 * The key
 * ------------------------------------------------------------------------ */

static int key_read(tokens_key *k, const char *path, rg_error *err)
{
    unsigned char extra;
    struct stat st;
    ssize_t n;
    int fd, rc = 0;

    /* O_NOFOLLOW: a symlink in the state directory must not choose our key. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ELOOP)
            return rg_error_set(err, RG_E_CONFIG, "%s: is a symbolic link; refusing it as key",
                                path);
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    }
    if (fstat(fd, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s: not a regular file", path);
        goto done;
    }
    if (st.st_mode & 077) {
        rc = rg_error_set(err, RG_E_CONFIG,
                          "%s: mode %04o lets other users read or change the token key; "
                          "it must be 0600 (chmod 600 it, and consider tokens minted with it "
                          "leaked: delete it to make a new key)",
                          path, (unsigned)(st.st_mode & 07777));
        goto done;
    }
    if (st.st_uid != geteuid()) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s: owned by uid %ld, not by this user (uid %ld)",
                          path, (long)st.st_uid, (long)geteuid());
        goto done;
    }
    if (st.st_size != KEY_LEN) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s: is %lld bytes; a token key is exactly %d", path,
                          (long long)st.st_size, KEY_LEN);
        goto done;
    }
    n = rg_fs_read_full(fd, k->bytes, KEY_LEN);
    if (n < 0) {
        rc = rg_error_set(err, (int)n, "%s: %s", path, strerror((int)-n));
        goto done;
    }
    /* The size was checked, but the file could change between fstat and read. */
    if (n != KEY_LEN || rg_fs_read_full(fd, &extra, 1) != 0) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s: changed while being read", path);
        goto done;
    }
done:
    if (rc < 0)
        explicit_bzero(k->bytes, sizeof(k->bytes));
    close(fd);
    return rc;
}

/*
 * Create the key without a window in which another process could see it
 * half-written: write it to a private temporary file (mkstemp: O_EXCL,
 * 0600), fsync, then link() it into place. link() fails with EEXIST when
 * another process got there first; then theirs is the key and ours is
 * thrown away, so concurrent first starts agree on one key.
 */
static int key_create(const char *dir, const char *path, rg_error *err)
{
    unsigned char bytes[KEY_LEN];
    char tmp[PATH_MAX];
    int fd = -1, rc = 0, created = 0, linked = 0;

    if (snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, KEY_FILE) >= (int)sizeof(tmp))
        return rg_error_set(err, -ENAMETOOLONG, "%s: path too long", dir);
    if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
        rc = rg_error_set(err, -EIO, "no randomness for a token key");
        goto done;
    }
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    created = 1;
    if (fchmod(fd, 0600) < 0 || (rc = rg_fs_write_all(fd, bytes, sizeof(bytes))) < 0 ||
        fsync(fd) < 0) {
        rc = rg_error_set(err, rc < 0 ? rc : -errno, "%s: %s", tmp, strerror(rc < 0 ? -rc : errno));
        goto done;
    }
    if (close(fd) < 0) {
        fd = -1;
        rc = rg_error_set(err, -errno, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    fd = -1;
    if (link(tmp, path) < 0) {
        if (errno != EEXIST) {
            rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
            goto done;
        }
    } else {
        linked = 1;
    }
done:
    explicit_bzero(bytes, sizeof(bytes));
    if (fd >= 0)
        close(fd);
    if (created)
        unlink(tmp);
    if (rc == 0 && linked && (rc = fsync_dir(dir)) < 0)
        rg_error_set(err, rc, "%s: fsync: %s", dir, strerror(-rc));
    return rc;
}

int tokens_key_load(tokens_key **out, const char *state_dir, rg_error *err)
{
    char path[PATH_MAX];
    tokens_key *k = NULL;
    int rc;

    *out = NULL;
    rc = join_path(path, state_dir, KEY_FILE, err);
    if (rc < 0)
        goto done;
    rc = rg_fs_mkdir_p(state_dir, 0700, err);
    if (rc < 0)
        goto done;
    k = calloc(1, sizeof(*k));
    if (k == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    rc = key_read(k, path, err);
    if (rc == -ENOENT) {
        rc = key_create(state_dir, path, err);
        if (rc == 0)
            rc = key_read(k, path, err);
    }
    if (rc < 0)
        goto done;
    *out = k;
    k = NULL;
done:
    tokens_key_free(k);
    return rc;
}

void tokens_key_free(tokens_key *k)
{
    if (k == NULL)
        return;
    explicit_bzero(k->bytes, sizeof(k->bytes));
    free(k);
}

/* ------------------------------------------------------------------------
 * Minting
 * ------------------------------------------------------------------------ */

int tokens_mint(char **out, const tokens_key *k, const char *run, const char *const *repos,
                size_t nrepos, int64_t ttl, int64_t now, rg_error *err)
{
    unsigned char id[ID_BYTES], mac[MAC_LEN];
    unsigned int maclen = 0;
    char idhex[ID_HEX + 1];
    json_t *claims = NULL, *list = NULL;
    char *json = NULL, *tok = NULL;
    size_t i, jlen, plen, total;
    int rc = 0;

    *out = NULL;
    if (k == NULL || (repos == NULL && nrepos > 0))
        return rg_error_set(err, -EINVAL, "tokens_mint: missing argument");
    rc = run_valid(run, err);
    if (rc < 0)
        goto done;
    if (nrepos == 0 || nrepos > TOKENS_REPOS_MAX) {
        rc = rg_error_set(err, -EINVAL, "a token names 1 to %d repositories, not %zu",
                          TOKENS_REPOS_MAX, nrepos);
        goto done;
    }
    for (i = 0; i < nrepos; i++) {
        rc = repo_valid(repos[i], err);
        if (rc < 0)
            goto done;
    }
    if (ttl <= 0 || ttl > TOKENS_TTL_MAX) {
        rc = rg_error_set(err, -EINVAL, "token lifetime must be 1 to %d seconds", TOKENS_TTL_MAX);
        goto done;
    }
    if (now < 0 || now > INT64_MAX - ttl) {
        rc = rg_error_set(err, -EINVAL, "bad current time");
        goto done;
    }
    if (RAND_bytes(id, sizeof(id)) != 1) {
        rc = rg_error_set(err, -EIO, "no randomness for a token id");
        goto done;
    }
    rg_hex_encode(idhex, id, sizeof(id));

    claims = json_object();
    list = json_array();
    if (claims == NULL || list == NULL)
        goto nomem;
    for (i = 0; i < nrepos; i++)
        if (json_array_append_new(list, json_string(repos[i])) < 0)
            goto nomem;
    if (json_object_set_new(claims, "id", json_string(idhex)) < 0 ||
        json_object_set_new(claims, "run", json_string(run)) < 0 ||
        json_object_set(claims, "repos", list) < 0 ||
        json_object_set_new(claims, "exp", json_integer((json_int_t)(now + ttl))) < 0)
        goto nomem;
    json = json_dumps(claims, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (json == NULL)
        goto nomem;
    jlen = strlen(json);

    plen = strlen(TOKEN_PREFIX) + tokens_b64url_encoded_len(jlen);
    total = plen + 1 + tokens_b64url_encoded_len(MAC_LEN);
    if (total > TOKENS_MAX_LEN) {
        rc = rg_error_set(err, RG_E_TOO_BIG,
                          "the token would be %zu bytes, more than %d: name fewer repositories",
                          total, TOKENS_MAX_LEN);
        goto done;
    }
    tok = malloc(total + 1);
    if (tok == NULL)
        goto nomem;
    memcpy(tok, TOKEN_PREFIX, strlen(TOKEN_PREFIX));
    tokens_b64url_encode(tok + strlen(TOKEN_PREFIX), json, jlen);
    if (HMAC(EVP_sha256(), k->bytes, KEY_LEN, (const unsigned char *)tok, plen, mac, &maclen) ==
            NULL ||
        maclen != MAC_LEN) {
        rc = rg_error_set(err, -EIO, "HMAC-SHA-256 failed");
        goto done;
    }
    tok[plen] = '.';
    tokens_b64url_encode(tok + plen + 1, mac, MAC_LEN);
    *out = tok;
    tok = NULL;
    goto done;
nomem:
    rc = rg_error_set(err, -ENOMEM, "out of memory");
done:
    explicit_bzero(mac, sizeof(mac));
    tokens_secret_free(tok);
    free(json);
    json_decref(list);
    json_decref(claims);
    return rc;
}

/* ------------------------------------------------------------------------
 * Verification
 * ------------------------------------------------------------------------ */

void tokens_claims_free(tokens_claims *c)
{
    size_t i;

    if (c == NULL)
        return;
    free(c->id);
    free(c->run);
    for (i = 0; i < c->nrepos; i++)
        free(c->repos[i]);
    free(c->repos);
    free(c);
}

static int is_id(const char *s)
{
    size_t i;

    for (i = 0; i < ID_HEX; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return s[ID_HEX] == '\0';
}

/*
 * Turn signed claims JSON into tokens_claims. A signed token is one we
 * minted, so anything unexpected here means a different version or a bug:
 * it is refused as malformed rather than half-understood.
 */
static int claims_parse(tokens_claims **out, const unsigned char *json, size_t len)
{
    json_t *root, *id, *run, *repos, *exp, *item;
    tokens_claims *c = NULL;
    size_t i;
    int rc = -EINVAL;

    *out = NULL;
    root = json_loadb((const char *)json, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(root) || json_object_size(root) != 4)
        goto done;
    id = json_object_get(root, "id");
    run = json_object_get(root, "run");
    repos = json_object_get(root, "repos");
    exp = json_object_get(root, "exp");
    if (!json_is_string(id) || !is_id(json_string_value(id)) || !json_is_string(run) ||
        run_valid(json_string_value(run), NULL) < 0 || !json_is_array(repos) ||
        json_array_size(repos) == 0 || json_array_size(repos) > TOKENS_REPOS_MAX ||
        !json_is_integer(exp) || json_integer_value(exp) <= 0)
        goto done;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        goto nomem;
    c->id = strdup(json_string_value(id));
    c->run = strdup(json_string_value(run));
    c->repos = calloc(json_array_size(repos), sizeof(char *));
    if (c->id == NULL || c->run == NULL || c->repos == NULL)
        goto nomem;
    json_array_foreach(repos, i, item)
    {
        if (!json_is_string(item) || repo_valid(json_string_value(item), NULL) < 0)
            goto done;
        c->repos[i] = strdup(json_string_value(item));
        if (c->repos[i] == NULL)
            goto nomem;
        c->nrepos = i + 1;
    }
    c->exp = (int64_t)json_integer_value(exp);
    *out = c;
    c = NULL;
    rc = 0;
    goto done;
nomem:
    rc = -ENOMEM;
done:
    tokens_claims_free(c);
    json_decref(root);
    return rc;
}

/*
 * Check shape and signature and return the claims, whatever the expiry or
 * revocation: tokens_verify adds those checks, tokens_revoke must not.
 * Returns 0 with *status set, or -ENOMEM.
 */
static int token_check(tokens_claims **out, tokens_status *status, const tokens_key *k,
                       const char *token)
{
    unsigned char given[MAC_LEN + 2], mac[MAC_LEN];
    unsigned char *json = NULL;
    unsigned int maclen = 0;
    const char *body, *dot, *sig;
    size_t len, plen, siglen, givenlen = 0, jlen = 0;
    int rc = 0;

    *out = NULL;
    *status = TOKENS_MALFORMED;
    if (token == NULL)
        goto done;
    len = strnlen(token, TOKENS_MAX_LEN + 1);
    if (len > TOKENS_MAX_LEN || len < strlen(TOKEN_PREFIX) ||
        memcmp(token, TOKEN_PREFIX, strlen(TOKEN_PREFIX)) != 0)
        goto done;
    body = token + strlen(TOKEN_PREFIX);
    dot = memchr(body, '.', len - strlen(TOKEN_PREFIX));
    if (dot == NULL || dot == body)
        goto done;
    plen = (size_t)(dot - token);
    sig = dot + 1;
    siglen = len - plen - 1;
    /* A fixed length, and the decoder refuses any further dot. */
    if (siglen != tokens_b64url_encoded_len(MAC_LEN) ||
        tokens_b64url_decode(given, &givenlen, sig, siglen) < 0 || givenlen != MAC_LEN)
        goto done;
    if (HMAC(EVP_sha256(), k->bytes, KEY_LEN, (const unsigned char *)token, plen, mac, &maclen) ==
            NULL ||
        maclen != MAC_LEN) {
        rc = -EIO;
        goto done;
    }
    if (CRYPTO_memcmp(mac, given, MAC_LEN) != 0) {
        *status = TOKENS_BAD_SIGNATURE;
        goto done;
    }
    /* Signed by us: only now is the payload worth decoding and parsing. */
    json = malloc((plen - strlen(TOKEN_PREFIX)) * 3 / 4 + 1);
    if (json == NULL) {
        rc = -ENOMEM;
        goto done;
    }
    if (tokens_b64url_decode(json, &jlen, body, plen - strlen(TOKEN_PREFIX)) < 0)
        goto done;
    rc = claims_parse(out, json, jlen);
    if (rc == -EINVAL)
        rc = 0; /* malformed claims: *status stays TOKENS_MALFORMED */
    else if (rc == 0)
        *status = TOKENS_OK;
done:
    explicit_bzero(mac, sizeof(mac));
    explicit_bzero(given, sizeof(given));
    free(json);
    return rc;
}

/*
 * Open the revocation file for reading; *fd is -1 when there is none. The
 * file decides which tokens still work, so one that others could rewrite
 * (to un-revoke a token) is refused rather than trusted.
 */
static int revoked_open(int *fd, const char *path, int flags, rg_error *err)
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
                          "%s: mode %04o lets other users change revocations; it must be 0600",
                          path, (unsigned)(st.st_mode & 07777));
    }
    if (rc < 0) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

/*
 * Whether `id` is the first field of any line of the revocation file. The
 * file is matched as a stream, so its size needs no cap and no line is
 * ever buffered. A last line cut short after a whole id (a revoke that
 * crashed) still counts: a partial revocation errs on the side of refusing.
 */
static int revoked_lookup(int *revoked, const char *state_dir, const char *id, rg_error *err)
{
    char path[PATH_MAX], chunk[4096];
    size_t col = 0, idlen = strlen(id), i;
    int fd = -1, rc, in_field = 1, match = 1;
    ssize_t n;

    *revoked = 0;
    rc = join_path(path, state_dir, REVOKED_FILE, err);
    if (rc < 0)
        return rc;
    rc = revoked_open(&fd, path, O_RDONLY, err);
    if (rc < 0 || fd < 0)
        return rc;
    for (;;) {
        n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
            goto done;
        }
        if (n == 0)
            break;
        for (i = 0; i < (size_t)n; i++) {
            char c = chunk[i];
            if (c == '\n' || (in_field && c == ' ')) {
                if (in_field && match && col == idlen) {
                    *revoked = 1;
                    goto done;
                }
                in_field = c == ' ' ? 0 : 1;
                if (c == '\n') {
                    col = 0;
                    match = 1;
                }
            } else if (in_field) {
                if (col >= idlen || c != id[col])
                    match = 0;
                col++;
            }
        }
    }
    if (in_field && match && col == idlen)
        *revoked = 1;
done:
    close(fd);
    return rc;
}

int tokens_verify(tokens_claims **out, tokens_status *status, const tokens_key *k,
                  const char *state_dir, const char *token, int64_t now, rg_error *err)
{
    tokens_claims *c = NULL;
    int rc, revoked = 0;

    *out = NULL;
    *status = TOKENS_MALFORMED;
    if (k == NULL || state_dir == NULL)
        return rg_error_set(err, -EINVAL, "tokens_verify: missing argument");
    rc = token_check(&c, status, k, token);
    if (rc < 0) {
        rc = rg_error_set(err, rc, "verifying a token: %s", strerror(-rc));
        goto done;
    }
    if (*status != TOKENS_OK)
        goto done;
    if (now >= c->exp) {
        *status = TOKENS_EXPIRED;
        goto done;
    }
    rc = revoked_lookup(&revoked, state_dir, c->id, err);
    if (rc < 0) {
        /* Fail closed: a token we cannot check against revocations is refused. */
        *status = TOKENS_REVOKED;
        rg_error_wrap(err, "cannot check token revocations");
        goto done;
    }
    if (revoked) {
        *status = TOKENS_REVOKED;
        goto done;
    }
    *out = c;
    c = NULL;
done:
    tokens_claims_free(c);
    return rc;
}

int tokens_claims_allow_repo(const tokens_claims *c, const char *repo)
{
    size_t i;

    if (c == NULL || repo == NULL)
        return 0;
    for (i = 0; i < c->nrepos; i++)
        if (!strcmp(c->repos[i], repo))
            return 1;
    return 0;
}

/* ------------------------------------------------------------------------
 * Revocation
 * ------------------------------------------------------------------------ */

int tokens_revoke(const tokens_key *k, const char *state_dir, const char *token, rg_error *err)
{
    char path[PATH_MAX], line[ID_HEX + 32];
    tokens_claims *c = NULL;
    tokens_status status;
    struct stat st;
    int fd = -1, rc, revoked = 0, n;
    char last;

    if (k == NULL || state_dir == NULL)
        return rg_error_set(err, -EINVAL, "tokens_revoke: missing argument");
    rc = token_check(&c, &status, k, token);
    if (rc < 0) {
        rc = rg_error_set(err, rc, "checking the token: %s", strerror(-rc));
        goto done;
    }
    if (status != TOKENS_OK) {
        rc = rg_error_set(err, RG_E_AUTH, "%s",
                          status == TOKENS_BAD_SIGNATURE
                              ? "the token was not signed with this gateway's key"
                              : "not a refgate run token");
        goto done;
    }
    rc = revoked_lookup(&revoked, state_dir, c->id, err);
    if (rc < 0 || revoked)
        goto done;
    rc = join_path(path, state_dir, REVOKED_FILE, err);
    if (rc < 0)
        goto done;
    rc = revoked_open(&fd, path, O_RDWR | O_APPEND | O_CREAT, err);
    if (rc < 0)
        goto done;
    /*
     * Serialise revokers: the check for a torn last line and the append
     * below must not interleave with another process doing the same.
     */
    if (flock(fd, LOCK_EX) < 0 || fstat(fd, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    /* A revoke that crashed mid-line must not swallow the start of ours. */
    n = 0;
    if (st.st_size > 0) {
        if (pread(fd, &last, 1, st.st_size - 1) != 1) {
            rc = rg_error_set(err, -EIO, "%s: cannot read its last byte", path);
            goto done;
        }
        if (last != '\n')
            line[n++] = '\n';
    }
    n += snprintf(line + n, sizeof(line) - (size_t)n, "%s %lld\n", c->id, (long long)c->exp);
    rc = rg_fs_write_all(fd, line, (size_t)n);
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (rc == 0 && st.st_size == 0)
        rc = fsync_dir(state_dir);
    if (rc < 0)
        rg_error_set(err, rc, "%s: %s", path, strerror(-rc));
done:
    if (fd >= 0)
        close(fd);
    tokens_claims_free(c);
    return rc;
}

/* ------------------------------------------------------------------------
 * Naming and freeing
 * ------------------------------------------------------------------------ */

void tokens_hash_prefix(char out[TOKENS_HASH_PREFIX_SIZE], const char *token)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    const char *t = token ? token : "";

    if (EVP_Digest(t, strlen(t), md, &mdlen, EVP_sha256(), NULL) != 1 ||
        mdlen < TOKENS_HASH_PREFIX_HEX / 2) {
        /* Never fall back to anything derived from the token itself. */
        memset(out, '?', TOKENS_HASH_PREFIX_HEX);
        out[TOKENS_HASH_PREFIX_HEX] = '\0';
        return;
    }
    rg_hex_encode(out, md, TOKENS_HASH_PREFIX_HEX / 2);
}

void tokens_secret_free(char *s)
{
    if (s == NULL)
        return;
    explicit_bzero(s, strlen(s));
    free(s);
}

const char *tokens_status_message(tokens_status s)
{
    switch (s) {
    case TOKENS_OK:
        return "valid";
    case TOKENS_MALFORMED:
        return "not a refgate run token";
    case TOKENS_BAD_SIGNATURE:
        return "token signature does not verify";
    case TOKENS_EXPIRED:
        return "token has expired";
    case TOKENS_REVOKED:
        return "token has been revoked";
    }
    return "unknown token status";
}
