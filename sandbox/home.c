/*
 * The home directory, its secrets and its toolchain paths; see home.h.
 *
 * The lists below are the policy a reviewer should read: what counts as a
 * secret (so a grant may not expose it) and what a toolchain may read by
 * default. Everything else in the home directory is unreadable because the
 * runner never grants it, not because it is listed here.
 */
#include "sandbox/home.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Policy lists                                                              */
/* ------------------------------------------------------------------------ */

const char *const sandbox_home_secret_names[] = {
    /* The ones the issue names. */
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".docker",
    ".netrc",
    ".config/gh",
    /* git credential stores (git-credential-store's two default files). */
    ".git-credentials",
    ".config/git/credentials",
    /* Cloud and infrastructure CLIs. */
    ".azure",
    ".config/gcloud",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".config/hub",
    ".config/rclone",
    ".s3cfg",
    ".boto",
    /* Package registries: these files hold publish tokens. */
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    /* Password stores, keyrings, database passwords. */
    ".password-store",
    ".local/share/keyrings",
    ".config/op",
    ".pgpass",
    ".my.cnf",
    /* Browser profiles hold session cookies. */
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    NULL,
};

const char *const sandbox_home_readable_names[] = {
    /* git's global configuration, file by file: the directory may also hold
     * git-credential-store's `credentials`. */
    ".gitconfig",
    ".config/git/config",
    ".config/git/ignore",
    ".config/git/attributes",
    /* User-installed programs. */
    ".local/bin",
    ".local/lib",
    /* Rust: binaries, toolchains and the crate caches, not ~/.cargo as a
     * whole, which holds the registry token. */
    ".cargo/bin",
    ".cargo/registry",
    ".cargo/git",
    ".rustup",
    /* Go: GOPATH binaries, module and build caches. */
    "go/bin",
    "go/pkg/mod",
    ".cache/go-build",
    /* JavaScript: version managers and the npm cache (~/.npmrc is apart). */
    ".nvm",
    ".volta",
    ".npm",
    ".bun/bin",
    ".deno",
    /* Python. */
    ".pyenv",
    ".cache/pip",
    ".cache/uv",
    ".local/share/uv",
    /* Ruby, Java, and multi-language version managers. */
    ".rbenv",
    ".local/share/gem",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
    ".sdkman/candidates",
    ".asdf",
    ".local/share/mise",
    NULL,
};

/*
 * Environment variables that point at credentials outside the default
 * places; what they name is a secret wherever it lives. KUBECONFIG is a
 * colon-separated list.
 */
static const char *const secret_vars[] = {
    "GNUPGHOME",
    "KUBECONFIG",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "DOCKER_CONFIG",
    "GH_CONFIG_DIR",
    "NETRC",
    "CLOUDSDK_CONFIG",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CONFIG_DIR",
    "PASSWORD_STORE_DIR",
    NULL,
};

/* ------------------------------------------------------------------------ */
/* Paths                                                                     */
/* ------------------------------------------------------------------------ */

sandbox_home_relation sandbox_home_relate(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);

    if (la == lb && memcmp(a, b, la) == 0)
        return SANDBOX_HOME_SAME;
    /* "/" is the one canonical path that ends in a slash. */
    if (la < lb && memcmp(a, b, la) == 0 && (la == 1 || b[la] == '/'))
        return SANDBOX_HOME_CONTAINS;
    if (lb < la && memcmp(a, b, lb) == 0 && (lb == 1 || a[lb] == '/'))
        return SANDBOX_HOME_INSIDE;
    return SANDBOX_HOME_UNRELATED;
}

/*
 * Canonicalise a path that may not exist: realpath() when it does, else
 * the path with repeated and trailing slashes removed. A secret that does
 * not exist has nothing to protect, so resolving its parents is not needed
 * (and skipping realpath() for it keeps the runner's start cheap: it would
 * readlink every component). Returns NULL for relative or over-long paths.
 */
static char *home_canon(const char *path)
{
    char buf[PATH_MAX];
    struct stat st;
    size_t i, j;

    if (path == NULL || path[0] != '/' || strlen(path) >= sizeof(buf))
        return NULL;
    if (lstat(path, &st) == 0 && realpath(path, buf) != NULL)
        return strdup(buf);
    for (i = 0, j = 0; path[i]; i++)
        if (!(path[i] == '/' && j > 0 && buf[j - 1] == '/'))
            buf[j++] = path[i];
    while (j > 1 && buf[j - 1] == '/')
        j--;
    buf[j] = '\0';
    return strdup(buf);
}

static int home_push(char ***list, size_t *n, char *path)
{
    char **grown;
    size_t i;

    if (path == NULL)
        return -ENOMEM;
    for (i = 0; i < *n; i++) {
        if (strcmp((*list)[i], path) == 0) {
            free(path);
            return 0;
        }
    }
    grown = realloc(*list, (*n + 1) * sizeof(*grown));
    if (grown == NULL) {
        free(path);
        return -ENOMEM;
    }
    grown[(*n)++] = path;
    *list = grown;
    return 0;
}

static char *home_join(const char *dir, const char *name)
{
    size_t ld = strlen(dir), ln = strlen(name);
    char *p = malloc(ld + ln + 2);

    if (p == NULL)
        return NULL;
    memcpy(p, dir, ld);
    p[ld] = '/';
    memcpy(p + ld + 1, name, ln + 1);
    return p;
}

/*
 * Add `path` as a secret, and where it resolves elsewhere (a symlinked
 * ~/.ssh) add that location too; a location outside the home directory
 * also goes on the hidden list, since the runner would otherwise grant it
 * as "outside home".
 */
static int home_add_secret(sandbox_home *h, const char *path)
{
    char *canon = home_canon(path);
    int rc;

    if (canon == NULL)
        return path[0] == '/' ? -ENOMEM : 0;
    rc = home_push(&h->secrets, &h->nsecrets, strdup(path));
    if (rc == 0 && strcmp(canon, path) != 0)
        rc = home_push(&h->secrets, &h->nsecrets, strdup(canon));
    if (rc == 0 && sandbox_home_relate(canon, h->path) == SANDBOX_HOME_UNRELATED)
        rc = home_push(&h->hidden, &h->nhidden, strdup(canon));
    free(canon);
    return rc;
}

int sandbox_home_init(sandbox_home *out, const char *path, const char *const *extra, size_t nextra,
                      rg_error *err)
{
    sandbox_home h = SANDBOX_HOME_INIT;
    size_t i;
    int rc = 0;

    if (path == NULL || path[0] != '/' || strcmp(path, "/") == 0) {
        rc = rg_error_set(err, -EINVAL,
                          "the home directory is %s%s%s; refusing, since nothing outside it "
                          "would be left to read and nothing in it could be hidden",
                          path ? "\"" : "", path ? path : "unknown", path ? "\"" : "");
        goto done;
    }
    h.path = strdup(path);
    rc = h.path ? home_push(&h.hidden, &h.nhidden, strdup(path)) : -ENOMEM;
    for (i = 0; rc == 0 && sandbox_home_secret_names[i]; i++) {
        char *p = home_join(path, sandbox_home_secret_names[i]);

        rc = p ? home_add_secret(&h, p) : -ENOMEM;
        free(p);
    }
    for (i = 0; rc == 0 && i < nextra; i++)
        rc = home_add_secret(&h, extra[i]);
    if (rc < 0)
        rg_error_set(err, rc, "listing secrets: %s", strerror(-rc));
done:
    if (rc < 0)
        sandbox_home_free(&h);
    else
        *out = h;
    return rc;
}

static const char *home_getenv(char *const *envp, const char *name)
{
    size_t len = strlen(name), i;

    for (i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], name, len) == 0 && envp[i][len] == '=')
            return envp[i] + len + 1;
    return NULL;
}

int sandbox_home_load(sandbox_home *out, char *const *envp, rg_error *err)
{
    char **extra = NULL, *canon = NULL, *list = NULL;
    size_t nextra = 0, i;
    const char *env, *v;
    struct passwd *pw;
    int rc = 0;

    pw = getpwuid(getuid());
    env = home_getenv(envp, "HOME");
    if (env == NULL || env[0] != '/')
        env = pw ? pw->pw_dir : NULL; /* the order: $HOME, then passwd */
    canon = home_canon(env);
    if (canon == NULL) {
        rc = rg_error_set(err, -ENOENT,
                          "no home directory: HOME is unset or relative and "
                          "the passwd entry has none");
        goto done;
    }
    /*
     * HOME pointed elsewhere (HOME=/tmp/x refgate-run ...) must not make the
     * real home's secrets readable as "outside home": they are secrets too,
     * and the passwd entry's home is hidden as a whole when it lies apart
     * from $HOME.
     */
    if (pw != NULL && pw->pw_dir[0] == '/' && strcmp(pw->pw_dir, "/") != 0) {
        char *real = home_canon(pw->pw_dir);
        sandbox_home_relation rel = real ? sandbox_home_relate(real, canon) : SANDBOX_HOME_SAME;

        for (i = 0; rc == 0 && rel == SANDBOX_HOME_CONTAINS && sandbox_home_secret_names[i]; i++)
            rc = home_push(&extra, &nextra, home_join(real, sandbox_home_secret_names[i]));
        if (rc == 0 && rel == SANDBOX_HOME_UNRELATED) {
            rc = home_push(&extra, &nextra, real);
            real = NULL;
        }
        free(real);
    }
    for (i = 0; rc == 0 && secret_vars[i]; i++) {
        char *save = NULL, *tok;

        v = home_getenv(envp, secret_vars[i]);
        if (v == NULL || v[0] == '\0')
            continue;
        free(list);
        list = strdup(v);
        if (list == NULL) {
            rc = -ENOMEM;
            break;
        }
        for (tok = strtok_r(list, ":", &save); rc == 0 && tok; tok = strtok_r(NULL, ":", &save))
            if (tok[0] == '/')
                rc = home_push(&extra, &nextra, strdup(tok));
    }
    v = home_getenv(envp, "XDG_CONFIG_HOME");
    if (rc == 0 && v != NULL && v[0] == '/') {
        char *gh = home_join(v, "gh"), *cred = home_join(v, "git/credentials");

        rc = home_push(&extra, &nextra, gh);
        if (rc == 0)
            rc = home_push(&extra, &nextra, cred);
        else
            free(cred);
    }
    if (rc < 0) {
        rg_error_set(err, rc, "listing secrets: %s", strerror(-rc));
        goto done;
    }
    rc = sandbox_home_init(out, canon, (const char *const *)extra, nextra, err);
    if (rc == 0) {
        out->env = strdup(env);
        if (out->env == NULL) {
            sandbox_home_free(out);
            rc = rg_error_set(err, -ENOMEM, "out of memory");
        }
    }
done:
    for (i = 0; i < nextra; i++)
        free(extra[i]);
    free(extra);
    free(list);
    free(canon);
    return rc;
}

void sandbox_home_free(sandbox_home *h)
{
    size_t i;

    if (h == NULL)
        return;
    for (i = 0; i < h->nsecrets; i++)
        free(h->secrets[i]);
    for (i = 0; i < h->nhidden; i++)
        free(h->hidden[i]);
    free(h->secrets);
    free(h->hidden);
    free(h->path);
    free(h->env);
    memset(h, 0, sizeof(*h));
}

const char *sandbox_home_conflict(const sandbox_home *h, const char *path)
{
    sandbox_home_relation rel;
    size_t i;

    for (i = 0; i < h->nsecrets; i++)
        if (sandbox_home_relate(path, h->secrets[i]) != SANDBOX_HOME_UNRELATED)
            return h->secrets[i];
    /* Granting inside the home directory is what -r and -w are for;
     * granting all of it, or anything that contains it, is not: Landlock
     * cannot carve a hole for the secrets back out of such a grant. */
    for (i = 0; i < h->nhidden; i++) {
        rel = sandbox_home_relate(path, h->hidden[i]);
        if (rel == SANDBOX_HOME_SAME || rel == SANDBOX_HOME_CONTAINS)
            return h->hidden[i];
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Secret inodes                                                             */
/* ------------------------------------------------------------------------ */

typedef struct home_inodes {
    sandbox_home_inode *v;
    size_t n, cap, max;
    int truncated;
} home_inodes;

static int home_inodes_add(home_inodes *s, const struct stat *st)
{
    sandbox_home_inode *grown;

    if (s->n >= s->max) {
        s->truncated = 1;
        return 0;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;

        grown = realloc(s->v, cap * sizeof(*grown));
        if (grown == NULL)
            return -ENOMEM;
        s->v = grown;
        s->cap = cap;
    }
    s->v[s->n].dev = st->st_dev;
    s->v[s->n].ino = st->st_ino;
    s->n++;
    return 0;
}

/* Record every inode below the directory `fd` (consumed), to `depth` levels. */
static int home_inodes_walk(home_inodes *s, int fd, int depth)
{
    struct dirent *de;
    struct stat st;
    DIR *d;
    int rc = 0, sub;

    d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return 0;
    }
    while (rc == 0 && !s->truncated && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        rc = home_inodes_add(s, &st);
        if (rc == 0 && S_ISDIR(st.st_mode) && depth > 0) {
            sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                rc = home_inodes_walk(s, sub, depth - 1);
        }
    }
    closedir(d);
    return rc;
}

static int home_inode_cmp(const void *a, const void *b)
{
    const sandbox_home_inode *x = a, *y = b;

    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return 0;
}

int sandbox_home_secret_inodes(sandbox_home_inode **out, size_t *n, int *truncated,
                               const sandbox_home *h, size_t max, rg_error *err)
{
    home_inodes s = {NULL, 0, 0, max, 0};
    struct stat st;
    size_t i;
    int rc = 0, fd;

    if (stat(h->path, &st) == 0)
        rc = home_inodes_add(&s, &st);
    for (i = 0; rc == 0 && i < h->nsecrets; i++) {
        /* stat, not lstat: a symlinked secret is protected where it points. */
        if (stat(h->secrets[i], &st) < 0)
            continue;
        rc = home_inodes_add(&s, &st);
        if (rc == 0 && S_ISDIR(st.st_mode)) {
            fd = open(h->secrets[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd >= 0)
                rc = home_inodes_walk(&s, fd, 16);
        }
    }
    if (rc < 0) {
        free(s.v);
        return rg_error_set(err, rc, "indexing secrets: %s", strerror(-rc));
    }
    if (s.n > 1)
        qsort(s.v, s.n, sizeof(*s.v), home_inode_cmp);
    *out = s.v;
    *n = s.n;
    *truncated = s.truncated;
    return 0;
}

int sandbox_home_inode_find(const sandbox_home_inode *set, size_t n, dev_t dev, ino_t ino)
{
    sandbox_home_inode key = {dev, ino};

    return n > 0 && bsearch(&key, set, n, sizeof(key), home_inode_cmp) != NULL;
}
