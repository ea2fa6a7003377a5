/*
 * This gateway's signing key (see key.h): the Ed25519 seed in a 0600 file
 * of state_dir, its kid, publication, rotation and signing.
 */
#include "tokens/key.h"
#include "util/fs.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEED_LEN 32

struct tokens_key {
    pthread_mutex_t mu; /* mint and rotate: the key and its kid change together */
    EVP_PKEY *pkey;
    unsigned char pub[TOKENS_PUBLIC_KEY_LEN];
    char kid[TOKENS_KID_SIZE];
};

static int seed_read(unsigned char seed[SEED_LEN], const char *path, rg_error *err)
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
                          "%s: mode %04o lets other users read or change the token signing key; "
                          "it must be 0600 (chmod 600 it, and consider it leaked: rotate it with "
                          "`refgate token key rotate`)",
                          path, (unsigned)(st.st_mode & 07777));
        goto done;
    }
    if (st.st_uid != geteuid()) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s: owned by uid %ld, not by this user (uid %ld)",
                          path, (long)st.st_uid, (long)geteuid());
        goto done;
    }
    if (st.st_size != SEED_LEN) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s: is %lld bytes; a token signing key is exactly %d",
                          path, (long long)st.st_size, SEED_LEN);
        goto done;
    }
    n = rg_fs_read_full(fd, seed, SEED_LEN);
    if (n < 0) {
        rc = rg_error_set(err, (int)n, "%s: %s", path, strerror((int)-n));
        goto done;
    }
    /* The size was checked, but the file could change between fstat and read. */
    if (n != SEED_LEN || rg_fs_read_full(fd, &extra, 1) != 0) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s: changed while being read", path);
        goto done;
    }
done:
    if (rc < 0)
        explicit_bzero(seed, SEED_LEN);
    close(fd);
    return rc;
}

/*
 * Write a new random seed to a private temporary file (mkstemp: O_EXCL,
 * 0600) and fsync it; *tmp names it. The caller links or renames it into
 * place, so no process ever sees a half-written key.
 */
static int seed_write_tmp(char tmp[PATH_MAX], const char *dir, rg_error *err)
{
    unsigned char seed[SEED_LEN];
    int fd = -1, rc = 0, created = 0;

    if (snprintf(tmp, PATH_MAX, "%s/.%s.XXXXXX", dir, TOKENS_KEY_FILE) >= PATH_MAX)
        return rg_error_set(err, -ENAMETOOLONG, "%s: path too long", dir);
    if (RAND_bytes(seed, sizeof(seed)) != 1)
        return rg_error_set(err, -EIO, "no randomness for a token signing key");
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    created = 1;
    if (fchmod(fd, 0600) < 0 || (rc = rg_fs_write_all(fd, seed, sizeof(seed))) < 0 ||
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
done:
    explicit_bzero(seed, sizeof(seed));
    if (fd >= 0)
        close(fd);
    if (rc < 0 && created)
        unlink(tmp);
    return rc;
}

/*
 * Create the key when absent: link() fails with EEXIST when another
 * process got there first; then theirs is the key and ours is thrown away,
 * so concurrent first starts agree on one key.
 */
static int seed_create(const char *dir, const char *path, rg_error *err)
{
    char tmp[PATH_MAX];
    int rc, linked = 0;

    rc = seed_write_tmp(tmp, dir, err);
    if (rc < 0)
        return rc;
    if (link(tmp, path) < 0) {
        if (errno != EEXIST)
            rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    } else {
        linked = 1;
    }
    unlink(tmp);
    if (rc == 0 && linked && (rc = rg_fs_fsync_dir(dir)) < 0)
        rg_error_set(err, rc, "%s: fsync: %s", dir, strerror(-rc));
    return rc;
}

/* The EVP key, raw public key and kid of a seed. */
static int key_from_seed(EVP_PKEY **pkey, unsigned char pub[TOKENS_PUBLIC_KEY_LEN],
                         char kid[TOKENS_KID_SIZE], const unsigned char seed[SEED_LEN],
                         rg_error *err)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    size_t publen = TOKENS_PUBLIC_KEY_LEN;

    *pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, SEED_LEN);
    if (*pkey == NULL)
        return rg_error_set(err, -EIO, "libcrypto cannot make an Ed25519 key");
    if (EVP_PKEY_get_raw_public_key(*pkey, pub, &publen) != 1 || publen != TOKENS_PUBLIC_KEY_LEN ||
        EVP_Digest(pub, publen, md, &mdlen, EVP_sha256(), NULL) != 1) {
        EVP_PKEY_free(*pkey);
        *pkey = NULL;
        return rg_error_set(err, -EIO, "libcrypto cannot derive an Ed25519 public key");
    }
    rg_hex_encode(kid, md, TOKENS_KID_HEX / 2);
    kid[TOKENS_KID_HEX] = '\0';
    return 0;
}

static int key_path(char out[PATH_MAX], const char *state_dir, rg_error *err)
{
    if (state_dir == NULL || state_dir[0] == '\0')
        return rg_error_set(err, -EINVAL, "no state directory");
    if (snprintf(out, PATH_MAX, "%s/%s", state_dir, TOKENS_KEY_FILE) >= PATH_MAX)
        return rg_error_set(err, -ENAMETOOLONG, "%s/%s: path too long", state_dir, TOKENS_KEY_FILE);
    return 0;
}

int tokens_key_load(tokens_key **out, const char *state_dir, rg_error *err)
{
    unsigned char seed[SEED_LEN];
    char path[PATH_MAX];
    tokens_key *k = NULL;
    int rc;

    *out = NULL;
    rc = key_path(path, state_dir, err);
    if (rc < 0)
        return rc;
    rc = rg_fs_mkdir_p(state_dir, 0700, err);
    if (rc < 0)
        return rc;
    rc = seed_read(seed, path, err);
    if (rc == -ENOENT) {
        rc = seed_create(state_dir, path, err);
        if (rc == 0)
            rc = seed_read(seed, path, err);
    }
    if (rc < 0)
        goto done;
    k = calloc(1, sizeof(*k));
    if (k == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    pthread_mutex_init(&k->mu, NULL);
    rc = key_from_seed(&k->pkey, k->pub, k->kid, seed, err);
    if (rc < 0)
        goto done;
    *out = k;
    k = NULL;
done:
    explicit_bzero(seed, sizeof(seed));
    tokens_key_free(k);
    return rc;
}

void tokens_key_free(tokens_key *k)
{
    if (k == NULL)
        return;
    EVP_PKEY_free(k->pkey); /* libcrypto clears private key material it frees */
    pthread_mutex_destroy(&k->mu);
    free(k);
}

void tokens_key_kid(char out[TOKENS_KID_SIZE], tokens_key *k)
{
    pthread_mutex_lock(&k->mu);
    memcpy(out, k->kid, TOKENS_KID_SIZE);
    pthread_mutex_unlock(&k->mu);
}

int tokens_key_publish(tokens_key *k, tokens_store *s, const char *gateway, rg_error *err)
{
    unsigned char pub[TOKENS_PUBLIC_KEY_LEN];
    char kid[TOKENS_KID_SIZE];

    pthread_mutex_lock(&k->mu);
    memcpy(pub, k->pub, sizeof(pub));
    memcpy(kid, k->kid, sizeof(kid));
    pthread_mutex_unlock(&k->mu);
    return tokens_store_key_put(s, kid, pub, gateway, err);
}

int tokens_key_rotate(tokens_key *k, tokens_store *s, const char *state_dir, const char *gateway,
                      char old_kid[TOKENS_KID_SIZE], char new_kid[TOKENS_KID_SIZE], rg_error *err)
{
    unsigned char seed[SEED_LEN], pub[TOKENS_PUBLIC_KEY_LEN];
    char path[PATH_MAX], tmp[PATH_MAX], kid[TOKENS_KID_SIZE], prev[TOKENS_KID_SIZE];
    EVP_PKEY *pkey = NULL;
    int rc, tmp_made = 0;

    /* One rotation at a time, and no mint signs with a key half replaced. */
    pthread_mutex_lock(&k->mu);
    rc = key_path(path, state_dir, err);
    if (rc < 0)
        goto done;
    rc = seed_write_tmp(tmp, state_dir, err);
    if (rc < 0)
        goto done;
    tmp_made = 1;
    rc = seed_read(seed, tmp, err);
    if (rc == 0)
        rc = key_from_seed(&pkey, pub, kid, seed, err);
    explicit_bzero(seed, sizeof(seed));
    if (rc < 0)
        goto done;
    /* Published before it signs anything, so no gateway sees a token of an unknown kid. */
    rc = tokens_store_key_put(s, kid, pub, gateway, err);
    if (rc < 0) {
        rg_error_wrap(err, "the new key was not published, the old one still signs");
        goto done;
    }
    if (rename(tmp, path) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s (the old key still signs)", path, strerror(errno));
        goto done;
    }
    tmp_made = 0;
    if ((rc = rg_fs_fsync_dir(state_dir)) < 0) {
        rg_error_set(err, rc, "%s: fsync: %s", state_dir, strerror(-rc));
        goto done;
    }
    memcpy(prev, k->kid, sizeof(prev));
    EVP_PKEY_free(k->pkey);
    k->pkey = pkey;
    pkey = NULL;
    memcpy(k->pub, pub, sizeof(pub));
    memcpy(k->kid, kid, sizeof(kid));
    if (old_kid != NULL)
        memcpy(old_kid, prev, TOKENS_KID_SIZE);
    if (new_kid != NULL)
        memcpy(new_kid, kid, TOKENS_KID_SIZE);
    /* The new key signs from here on; the old one only verifies what it signed. */
    rc = tokens_store_key_retire(s, prev, err);
    if (rc < 0)
        rg_error_wrap(err, "the new key %s signs, but the old key %s was not marked retired", kid,
                      prev);
done:
    pthread_mutex_unlock(&k->mu);
    if (tmp_made)
        unlink(tmp);
    EVP_PKEY_free(pkey);
    return rc;
}

int tokens_key_sign_built(unsigned char sig[TOKENS_SIG_LEN], tokens_key *k,
                          tokens_key_build_fn build, void *arg, rg_error *err)
{
    EVP_MD_CTX *md = NULL;
    const void *msg;
    size_t len, siglen = TOKENS_SIG_LEN;
    int rc;

    pthread_mutex_lock(&k->mu);
    rc = build(k->kid, arg, &msg, &len, err);
    if (rc < 0)
        goto done;
    md = EVP_MD_CTX_new();
    if (md == NULL || EVP_DigestSignInit(md, NULL, NULL, NULL, k->pkey) != 1 ||
        EVP_DigestSign(md, sig, &siglen, msg, len) != 1 || siglen != TOKENS_SIG_LEN)
        rc = rg_error_set(err, -EIO, "Ed25519 signing failed");
done:
    pthread_mutex_unlock(&k->mu);
    EVP_MD_CTX_free(md);
    return rc;
}
