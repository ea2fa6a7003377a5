/*
 * Upstream credential providers (see credentials.h): none, static and
 * github-app. What is secret on disk (a static token, an App's private key)
 * is checked and read once, when the provider is made, so a config mistake
 * stops the gateway at startup rather than at the first push; a file that
 * group or others can read is refused, because such a file has already
 * leaked to every account on the machine. Secrets in memory are wiped
 * before they are freed and are never put in a message.
 */
#include "tokens/credentials.h"
#include "tokens/github_app.h"
#include "tokens/token.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A token is a line; a PEM RSA key of any sane size is a few KiB. */
#define STATIC_TOKEN_MAX (16u * 1024)
#define PRIVATE_KEY_MAX  (64u * 1024)

struct tokens_provider {
    config_cred_type type;
    char *username; /* static */
    char *secret;   /* static: the token */
    tokens_github_app *app;
};

/* ------------------------------------------------------------------------
 * Secret files
 * ------------------------------------------------------------------------ */

/*
 * Read the secret file `path` into a fresh buffer (*out, *out_len; free
 * with wipe_free). Refused: not a regular file, accessible to group or
 * others, empty, or larger than `max`. `what` names the file's role.
 */
static int secret_file_read(char **out, size_t *out_len, const char *path, const char *what,
                            size_t max, rg_error *err)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0;
    ssize_t n;
    int fd = -1, rc = 0;

    *out = NULL;
    *out_len = 0;
    if (path == NULL)
        return rg_error_set(err, RG_E_CONFIG, "no %s configured", what);
    /* Symlinks are followed: secret stores rotate files by swapping one. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        rc = rg_error_set(err, -errno, "%s %s: %s", what, path, strerror(errno));
        goto done;
    }
    if (fstat(fd, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s %s: %s", what, path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s %s is not a regular file", what, path);
        goto done;
    }
    if (st.st_mode & 077) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s %s is %s by group/others (mode %04o): chmod 600 it",
                          what, path, (st.st_mode & 044) ? "readable" : "writable",
                          (unsigned)(st.st_mode & 07777));
        goto done;
    }
    if (st.st_size > (off_t)max) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s %s is larger than %zu bytes", what, path, max);
        goto done;
    }
    /* One allocation of the most we accept: growing would leave copies. */
    buf = malloc(max + 1);
    if (buf == NULL) {
        rc = rg_error_set(err, -ENOMEM, "%s %s: out of memory", what, path);
        goto done;
    }
    while (len <= max) {
        n = read(fd, buf + len, max + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = rg_error_set(err, -errno, "%s %s: %s", what, path, strerror(errno));
            goto done;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len > max) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s %s is larger than %zu bytes", what, path, max);
        goto done;
    }
    if (len == 0) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s %s is empty", what, path);
        goto done;
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    buf = NULL;
done:
    if (buf != NULL) {
        explicit_bzero(buf, max + 1);
        free(buf);
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

static void wipe_free(char *p, size_t len)
{
    if (p == NULL)
        return;
    explicit_bzero(p, len);
    free(p);
}

/*
 * The token of a static credential: the file's text without one trailing
 * newline (editors add one). What is left must be one line of visible
 * ASCII, since it is sent in an HTTP header; a second line or a space means
 * the file holds something other than a token.
 */
static int static_token_load(char **out, const char *path, rg_error *err)
{
    char *text = NULL;
    size_t len = 0, i;
    int rc;

    *out = NULL;
    rc = secret_file_read(&text, &len, path, "token_file", STATIC_TOKEN_MAX, err);
    if (rc < 0)
        return rc;
    if (len > 0 && text[len - 1] == '\n')
        text[--len] = '\0';
    if (len > 0 && text[len - 1] == '\r')
        text[--len] = '\0';
    if (len == 0) {
        rc = rg_error_set(err, RG_E_CONFIG, "token_file %s holds no token", path);
        goto done;
    }
    for (i = 0; i < len; i++) {
        if ((unsigned char)text[i] <= 0x20 || (unsigned char)text[i] >= 0x7f) {
            rc = rg_error_set(err, RG_E_CONFIG,
                              "token_file %s must hold just the token on one line (found a "
                              "space, a control character or a second line at byte %zu)",
                              path, i + 1);
            goto done;
        }
    }
    *out = strdup(text);
    if (*out == NULL)
        rc = rg_error_set(err, -ENOMEM, "token_file %s: out of memory", path);
done:
    wipe_free(text, STATIC_TOKEN_MAX + 1);
    return rc;
}

/* ------------------------------------------------------------------------
 * Providers
 * ------------------------------------------------------------------------ */

int tokens_provider_new(tokens_provider **out, const config_credentials *cfg, const char *ca_file,
                        rg_error *err)
{
    tokens_provider *p = NULL;
    char *pem = NULL;
    size_t pemlen = 0;
    int rc = 0;

    *out = NULL;
    if (cfg == NULL)
        return rg_error_set(err, -EINVAL, "no credentials configuration");
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    p->type = cfg->type;
    switch (cfg->type) {
    case CONFIG_CRED_NONE:
        break;
    case CONFIG_CRED_STATIC:
        p->username = strdup(cfg->username ? cfg->username : "x-access-token");
        if (p->username == NULL) {
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            goto done;
        }
        rc = static_token_load(&p->secret, cfg->token_file, err);
        break;
    case CONFIG_CRED_GITHUB_APP:
        rc = secret_file_read(&pem, &pemlen, cfg->private_key_file, "private_key_file",
                              PRIVATE_KEY_MAX, err);
        if (rc == 0)
            rc = tokens_github_app_new(&p->app, cfg, pem, pemlen, cfg->private_key_file, ca_file,
                                       err);
        break;
    default:
        rc = rg_error_set(err, -EINVAL, "unknown credentials type %d", (int)cfg->type);
        break;
    }
    if (rc < 0)
        goto done;
    *out = p;
    p = NULL;
done:
    wipe_free(pem, PRIVATE_KEY_MAX + 1);
    tokens_provider_free(p);
    return rc;
}

void tokens_provider_set_clock(tokens_provider *p, const tokens_clock *clock)
{
    /* Only github-app reads the time; the other types hold fixed secrets. */
    if (p->app != NULL)
        tokens_github_app_set_clock(p->app, clock);
}

void tokens_provider_free(tokens_provider *p)
{
    if (p == NULL)
        return;
    free(p->username);
    tokens_secret_free(p->secret);
    tokens_github_app_free(p->app);
    free(p);
}

static void credential_free(tokens_credential *c)
{
    if (c == NULL)
        return;
    free(c->username);
    tokens_secret_free(c->password);
    explicit_bzero(c, sizeof(*c));
    free(c);
}

int tokens_provider_acquire(tokens_credential **out, tokens_provider *p, const char *repo_path,
                            tokens_access access, unsigned flags, rg_error *err)
{
    tokens_credential *c = NULL;
    int rc = 0;

    *out = NULL;
    if (p == NULL)
        return rg_error_set(err, -EINVAL, "no credential provider");
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    switch (p->type) {
    case CONFIG_CRED_NONE:
        /* Anonymous: nothing to send and nothing to name in logs. */
        goto ok;
    case CONFIG_CRED_STATIC:
        c->username = strdup(p->username);
        c->password = strdup(p->secret);
        if (c->username == NULL || c->password == NULL)
            rc = rg_error_set(err, -ENOMEM, "out of memory");
        break;
    case CONFIG_CRED_GITHUB_APP:
        c->username = strdup("x-access-token");
        if (c->username == NULL)
            rc = rg_error_set(err, -ENOMEM, "out of memory");
        else
            rc = tokens_github_app_mint(&c->password, p->app, repo_path, access, flags, err);
        break;
    default:
        rc = rg_error_set(err, -EINVAL, "unknown credentials type %d", (int)p->type);
        break;
    }
    if (rc < 0)
        goto done;
    tokens_hash_prefix(c->hash, c->password);
ok:
    *out = c;
    c = NULL;
done:
    credential_free(c);
    return rc;
}

int tokens_provider_release_checked(tokens_provider *p, tokens_credential *c, rg_error *err)
{
    int rc = 0;

    if (c == NULL)
        return 0;
    if (p != NULL && p->type == CONFIG_CRED_GITHUB_APP && c->password != NULL) {
        rc = tokens_github_app_revoke(p->app, c->password, err);
        if (rc < 0)
            rg_error_wrap(err, "revoking token %s", c->hash);
    }
    credential_free(c);
    return rc;
}

void tokens_provider_release(tokens_provider *p, tokens_credential *c)
{
    (void)tokens_provider_release_checked(p, c, NULL);
}
