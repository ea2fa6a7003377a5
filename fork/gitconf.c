/*
 * Neutralising a fork's .git after a run; see gitconf.h. The parser follows
 * git's config.c (get_base_var, get_extended_base_var, parse_value) closely
 * enough that every key git would see is seen here: where the two could
 * disagree, the file is refused as a whole and replaced by an empty one.
 */
#include "fork/gitconf.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buf.h"

#define GC_FILE_MAX    ((size_t)1 << 20) /* a config larger than this is refused */
#define GC_OUT_MAX     ((size_t)4 << 20) /* the rewritten config, at most */
#define GC_ENTRIES_MAX 100000            /* keys in one file, at most */
#define GC_NAME_MAX    1024              /* a section, subsection or key name */
#define GC_MODULES_MAX 1000              /* submodule repositories visited */
#define GC_DEPTH_MAX   8                 /* nesting of .git/modules */
#define GC_HOOKS_TOLD  64                /* hook names told, at most */
#define GC_WALK_DEPTH  200               /* the fork's depth walked, as tree.c copies */

typedef struct gc_entry {
    char *section; /* lowercased */
    char *sub;     /* as written; NULL: none */
    char *name;    /* lowercased */
    char *value;   /* NULL: a bare key (boolean true) */
} gc_entry;

typedef struct gc_list {
    gc_entry *v;
    size_t n, cap;
} gc_list;

static void gc_list_free(gc_list *l)
{
    size_t i;

    for (i = 0; i < l->n; i++) {
        free(l->v[i].section);
        free(l->v[i].sub);
        free(l->v[i].name);
        free(l->v[i].value);
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* ------------------------------------------------------------------------ */
/* The allow-list                                                            */
/* ------------------------------------------------------------------------ */

/*
 * Keys without a subsection that are kept. Each only describes the
 * repository or the worktree and names no program, path or URL:
 * repositoryformatversion, bare and the extensions are needed to read the
 * repository at all (objectformat for SHA-256, refstorage for reftable);
 * filemode, symlinks, ignorecase, precomposeunicode, checkstat and
 * trustctime describe the filesystem the clone was made on, and without
 * them `git status` reports every file changed; logallrefupdates keeps the
 * reflog; autocrlf, eol and safecrlf keep line endings as checked out;
 * user.name/email and init.defaultbranch are plain strings; pull.rebase,
 * pull.ff and push.default only pick among git's own behaviours.
 */
static const char *const gc_plain[] = {
    "core.repositoryformatversion",
    "core.bare",
    "core.filemode",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.checkstat",
    "core.trustctime",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "extensions.objectformat",
    "extensions.refstorage",
    "user.name",
    "user.email",
    "init.defaultbranch",
    "pull.rebase",
    "pull.ff",
    "push.default",
    NULL,
};

/*
 * Keys with a subsection that are kept: a remote's refspecs and a branch's
 * upstream only name refs. URLs are kept only as the base had them: a run
 * that points `origin` elsewhere would get the user's credentials at the
 * next fetch, and a URL like `ext::` runs a program. submodule.*.update is
 * not kept: `!command` there runs the command.
 */
static const struct {
    const char *section, *name;
    int need_base;
} gc_sub[] = {
    {"remote", "url", 1},    {"remote", "pushurl", 1},
    {"remote", "fetch", 0},  {"remote", "push", 0},
    {"branch", "remote", 0}, {"branch", "merge", 0},
    {"branch", "rebase", 0}, {"branch", "pushremote", 0},
    {"submodule", "url", 1}, {"submodule", "active", 0},
    {NULL, NULL, 0},
};

int fork_gitconf_allowed(const char *section, const char *subsection, const char *name,
                         int *need_base)
{
    char key[2 * GC_NAME_MAX + 2];
    size_t i;

    *need_base = 0;
    if (subsection == NULL) {
        snprintf(key, sizeof(key), "%s.%s", section, name);
        for (i = 0; gc_plain[i] != NULL; i++)
            if (strcmp(key, gc_plain[i]) == 0)
                return 1;
        return 0;
    }
    for (i = 0; gc_sub[i].section != NULL; i++) {
        if (strcmp(section, gc_sub[i].section) == 0 && strcmp(name, gc_sub[i].name) == 0) {
            *need_base = gc_sub[i].need_base;
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct gc_parser {
    const char *p, *end;
    char section[GC_NAME_MAX];
    char sub[GC_NAME_MAX];
    int have_sub;
    int have_section;
} gc_parser;

static int gc_peek(const gc_parser *g)
{
    return g->p < g->end ? (unsigned char)*g->p : -1;
}

static void gc_skip_line(gc_parser *g)
{
    while (g->p < g->end && *g->p != '\n')
        g->p++;
    if (g->p < g->end)
        g->p++;
}

static int gc_is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* "[section]", "[section "sub"]" or the old "[section.sub]"; g->p is past '['. */
static int gc_parse_header(gc_parser *g)
{
    size_t n = 0, m = 0;
    int c;

    g->have_sub = 0;
    while ((c = gc_peek(g)) != -1 && (isalnum(c) || c == '-' || c == '.')) {
        if (n + 1 >= sizeof(g->section))
            return RG_E_CONFIG;
        g->section[n++] = (char)tolower(c);
        g->p++;
    }
    g->section[n] = '\0';
    if (n == 0)
        return RG_E_CONFIG;
    if (c == ']') {
        char *dot = strchr(g->section, '.');
        g->p++;
        if (dot != NULL) {
            /* The old form: the subsection is lowercased, as git does. */
            *dot = '\0';
            snprintf(g->sub, sizeof(g->sub), "%s", dot + 1);
            g->have_sub = 1;
        }
        g->have_section = 1;
        return 0;
    }
    if (!gc_is_space(c) || strchr(g->section, '.') != NULL)
        return RG_E_CONFIG;
    while (gc_is_space(gc_peek(g)))
        g->p++;
    if (gc_peek(g) != '"')
        return RG_E_CONFIG;
    g->p++;
    /* Bounded: by the file's end and the name's size. */
    for (;;) {
        c = gc_peek(g);
        if (c == -1 || c == '\n')
            return RG_E_CONFIG;
        g->p++;
        if (c == '"')
            break;
        if (c == '\\') {
            c = gc_peek(g);
            if (c == -1 || c == '\n')
                return RG_E_CONFIG;
            g->p++;
        }
        if (m + 1 >= sizeof(g->sub))
            return RG_E_CONFIG;
        g->sub[m++] = (char)c;
    }
    g->sub[m] = '\0';
    if (memchr(g->sub, '\0', m) != NULL || gc_peek(g) != ']')
        return RG_E_CONFIG;
    g->p++;
    g->have_sub = 1;
    g->have_section = 1;
    return 0;
}

/* A value after '=', as git's parse_value reads it, into `v`. */
static int gc_parse_value(gc_parser *g, rg_buf *v)
{
    int quote = 0, comment = 0, c;
    size_t spaces = 0;

    while (gc_is_space(gc_peek(g)))
        g->p++;
    /* Bounded: each turn consumes a byte of the file. */
    for (;;) {
        c = gc_peek(g);
        if (c == -1 || c == '\n') {
            if (quote)
                return RG_E_CONFIG;
            if (c == '\n')
                g->p++;
            return 0;
        }
        g->p++;
        if (comment)
            continue;
        if (gc_is_space(c) && !quote) {
            spaces++;
            continue;
        }
        if (!quote && (c == ';' || c == '#')) {
            comment = 1;
            continue;
        }
        for (; spaces > 0; spaces--)
            if (rg_buf_append(v, " ", 1) < 0)
                return RG_E_TOO_BIG;
        if (c == '\\') {
            c = gc_peek(g);
            if (c == -1)
                return RG_E_CONFIG;
            g->p++;
            switch (c) {
            case '\n':
                continue; /* a continuation line */
            case 't':
                c = '\t';
                break;
            case 'b':
                c = '\b';
                break;
            case 'n':
                c = '\n';
                break;
            case '\\':
            case '"':
                break;
            default:
                return RG_E_CONFIG;
            }
            if (rg_buf_append(v, &(char){(char)c}, 1) < 0)
                return RG_E_TOO_BIG;
            continue;
        }
        if (c == '"') {
            quote = !quote;
            continue;
        }
        if (rg_buf_append(v, &(char){(char)c}, 1) < 0)
            return RG_E_TOO_BIG;
    }
}

static int gc_push(gc_list *l, const gc_parser *g, const char *name, const char *value)
{
    gc_entry *e;

    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        gc_entry *v;
        if (l->n >= GC_ENTRIES_MAX)
            return RG_E_TOO_BIG;
        v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    e = &l->v[l->n];
    memset(e, 0, sizeof(*e));
    e->section = strdup(g->section);
    e->sub = g->have_sub ? strdup(g->sub) : NULL;
    e->name = strdup(name);
    e->value = value ? strdup(value) : NULL;
    l->n++;
    if (e->section == NULL || e->name == NULL || (g->have_sub && e->sub == NULL) ||
        (value && e->value == NULL))
        return -ENOMEM;
    return 0;
}

static int gc_parse(gc_list *out, const char *text, size_t len)
{
    gc_parser g;
    rg_buf v = RG_BUF_INIT(GC_FILE_MAX);
    char name[GC_NAME_MAX];
    size_t n;
    int c, rc = 0;

    memset(&g, 0, sizeof(g));
    g.p = text;
    g.end = text + len;
    /* A UTF-8 byte order mark, which git skips. */
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        g.p += 3;
    /* Bounded: each turn consumes at least one byte of the file. */
    while (rc == 0 && g.p < g.end) {
        c = gc_peek(&g);
        if (gc_is_space(c) || c == '\n') {
            g.p++;
        } else if (c == '#' || c == ';') {
            gc_skip_line(&g);
        } else if (c == '[') {
            g.p++;
            rc = gc_parse_header(&g);
        } else if (isalpha(c)) {
            n = 0;
            while ((c = gc_peek(&g)) != -1 && (isalnum(c) || c == '-')) {
                if (n + 1 >= sizeof(name)) {
                    rc = RG_E_CONFIG;
                    break;
                }
                name[n++] = (char)tolower(c);
                g.p++;
            }
            name[n] = '\0';
            if (rc < 0 || !g.have_section) {
                rc = RG_E_CONFIG;
                break;
            }
            while (gc_is_space(gc_peek(&g)))
                g.p++;
            c = gc_peek(&g);
            if (c == '=') {
                g.p++;
                rg_buf_reset(&v);
                rc = gc_parse_value(&g, &v);
                if (rc == 0)
                    rc = gc_push(out, &g, name, v.data ? v.data : "");
            } else if (c == -1 || c == '\n' || c == '#' || c == ';') {
                gc_skip_line(&g);
                rc = gc_push(out, &g, name, NULL);
            } else {
                rc = RG_E_CONFIG;
            }
        } else {
            rc = RG_E_CONFIG;
        }
    }
    rg_buf_free(&v);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Rewriting                                                                 */
/* ------------------------------------------------------------------------ */

static int gc_quoted(rg_buf *out, const char *s, int subsection)
{
    int rc = rg_buf_puts(out, "\"");

    for (; rc == 0 && *s; s++) {
        if (*s == '"' || *s == '\\')
            rc = rg_buf_printf(out, "\\%c", *s);
        else if (!subsection && *s == '\n')
            rc = rg_buf_puts(out, "\\n");
        else if (!subsection && *s == '\t')
            rc = rg_buf_puts(out, "\\t");
        else if (!subsection && *s == '\b')
            rc = rg_buf_puts(out, "\\b");
        else
            rc = rg_buf_append(out, s, 1);
    }
    return rc == 0 ? rg_buf_puts(out, "\"") : rc;
}

static int gc_in_base(const gc_list *base, const gc_entry *e)
{
    size_t i;

    for (i = 0; base != NULL && i < base->n; i++) {
        const gc_entry *b = &base->v[i];
        if (!strcmp(b->section, e->section) && !strcmp(b->name, e->name) &&
            (b->sub == NULL) == (e->sub == NULL) && (!b->sub || !strcmp(b->sub, e->sub)) &&
            (b->value == NULL) == (e->value == NULL) && (!b->value || !strcmp(b->value, e->value)))
            return 1;
    }
    return 0;
}

static void gc_tell_key(fork_gitconf_tell_fn tell, void *ctx, const char *where, const gc_entry *e)
{
    char what[3 * GC_NAME_MAX + 16];
    size_t i;

    if (tell == NULL)
        return;
    snprintf(what, sizeof(what), "config %s%s%s.%s", e->section, e->sub ? "." : "",
             e->sub ? e->sub : "", e->name);
    /* The name goes to a terminal: no control characters. */
    for (i = 0; what[i]; i++)
        if ((unsigned char)what[i] < 0x20 || what[i] == 0x7f)
            what[i] = '?';
    tell(ctx, where, what);
}

static int gc_filter_at(char **out, const char *config, size_t len, const char *base,
                        size_t base_len, const char *where, fork_gitconf_tell_fn tell, void *ctx)
{
    gc_list l = {NULL, 0, 0}, bl = {NULL, 0, 0};
    rg_buf o = RG_BUF_INIT(GC_OUT_MAX);
    const gc_entry *prev = NULL;
    int rc, removed = 0, need_base, have_base = 0;
    size_t i;

    *out = NULL;
    rc = gc_parse(&l, config, len);
    if (rc < 0) {
        if (rc == -ENOMEM)
            goto done;
        rc = RG_E_CONFIG;
        if (tell != NULL)
            tell(ctx, where, "config (does not parse: every key removed)");
        goto done;
    }
    /* The base's config only matters for URLs; one that does not parse
     * matches nothing. */
    if (base != NULL && gc_parse(&bl, base, base_len) == 0)
        have_base = 1;
    rc = rg_buf_puts(&o, "# Rewritten by refgate-run: only keys that run nothing are kept.\n"
                         "# The run's original is config.refgate-run-orig.\n");
    for (i = 0; rc == 0 && i < l.n; i++) {
        const gc_entry *e = &l.v[i];
        if (!fork_gitconf_allowed(e->section, e->sub, e->name, &need_base) ||
            (need_base && (!have_base || !gc_in_base(&bl, e)))) {
            gc_tell_key(tell, ctx, where, e);
            removed = 1;
            continue;
        }
        if (prev == NULL || strcmp(prev->section, e->section) != 0 ||
            (prev->sub == NULL) != (e->sub == NULL) || (e->sub && strcmp(prev->sub, e->sub))) {
            rc = rg_buf_printf(&o, "[%s", e->section);
            if (rc == 0 && e->sub != NULL)
                rc = rg_buf_puts(&o, " ") == 0 ? gc_quoted(&o, e->sub, 1) : -ENOMEM;
            if (rc == 0)
                rc = rg_buf_puts(&o, "]\n");
        }
        if (rc == 0)
            rc = rg_buf_printf(&o, "\t%s", e->name);
        if (rc == 0 && e->value != NULL)
            rc = rg_buf_puts(&o, " = ") == 0 ? gc_quoted(&o, e->value, 0) : -ENOMEM;
        if (rc == 0)
            rc = rg_buf_puts(&o, "\n");
        prev = e;
    }
    if (rc == 0)
        rc = removed;
done:
    if (rc == RG_E_CONFIG || rc >= 0) {
        if (rc == RG_E_CONFIG)
            rg_buf_reset(&o);
        *out = rg_buf_detach(&o);
        if (*out == NULL)
            *out = strdup("");
        if (*out == NULL)
            rc = -ENOMEM;
    }
    rg_buf_free(&o);
    gc_list_free(&l);
    gc_list_free(&bl);
    return rc;
}

int fork_gitconf_filter(char **out, const char *config, size_t len, const char *base,
                        size_t base_len, fork_gitconf_tell_fn tell, void *ctx)
{
    return gc_filter_at(out, config, len, base, base_len, "", tell, ctx);
}

/* ------------------------------------------------------------------------ */
/* The fork's .git                                                           */
/* ------------------------------------------------------------------------ */

typedef struct gc_run {
    fork_gitconf_tell_fn tell;
    void *ctx;
    int count;
    unsigned modules;
    rg_error *err;
} gc_run;

static void gc_told(gc_run *r, const char *where, const char *what)
{
    r->count++;
    if (r->tell != NULL)
        r->tell(r->ctx, where, what);
}

/* Read a small regular file at dirfd/name without following a link: 0 and
 * *out (malloc'd) on success, -ENOENT when absent, -EINVAL when not a
 * regular file, -EFBIG when larger than `max`. */
static int gc_read(char **out, size_t *len, int dirfd, const char *name, size_t max)
{
    struct stat st;
    char *buf = NULL;
    size_t got = 0;
    ssize_t n;
    int fd, rc = 0;

    *out = NULL;
    *len = 0;
    fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return errno == ELOOP ? -EINVAL : -errno;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        goto done;
    }
    if ((size_t)st.st_size > max) {
        rc = -EFBIG;
        goto done;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        rc = -ENOMEM;
        goto done;
    }
    /* Bounded: at most st_size bytes are read. */
    while (got < (size_t)st.st_size) {
        n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            goto done;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    buf = NULL;
done:
    free(buf);
    close(fd);
    return rc;
}

/* Rename dirfd/name to the first free "<name><suffix>[.N]". */
int fork_gitconf_move_aside(int dirfd, const char *name, const char *suffix)
{
    char to[512];
    unsigned i;

    for (i = 0; i < 100; i++) {
        if (i == 0)
            snprintf(to, sizeof(to), "%s%s", name, suffix);
        else
            snprintf(to, sizeof(to), "%s%s.%u", name, suffix, i);
        if (renameat2(dirfd, name, dirfd, to, RENAME_NOREPLACE) == 0)
            return 0;
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

/* Whether dirfd/name and basefd/name are both regular files with the same
 * bytes (a small file such as a gitfile or commondir). */
static int gc_same_file(int dirfd, int basefd, const char *name)
{
    char *a = NULL, *b = NULL;
    size_t la, lb;
    int same;

    same = basefd >= 0 && gc_read(&a, &la, dirfd, name, 65536) == 0 &&
           gc_read(&b, &lb, basefd, name, 65536) == 0 && la == lb && memcmp(a, b, la) == 0;
    free(a);
    free(b);
    return same;
}

/* Write `text` as gitfd/config by a new file renamed into place. */
static int gc_write_config(int gitfd, const char *text, const struct stat *was)
{
    static const char tmp[] = "config.refgate-run-tmp";
    size_t len = strlen(text), off = 0;
    ssize_t n;
    int fd, rc = 0;

    if (unlinkat(gitfd, tmp, 0) < 0 && errno != ENOENT)
        (void)fork_gitconf_move_aside(gitfd, tmp, ".old");
    fd = openat(gitfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    /* Bounded: each turn writes at least one byte. */
    while (off < len) {
        n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        off += (size_t)n;
    }
    if (rc == 0 && was != NULL && geteuid() == 0 && fchown(fd, was->st_uid, was->st_gid) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(gitfd, tmp, gitfd, "config") < 0)
        rc = -errno;
    if (rc < 0)
        (void)unlinkat(gitfd, tmp, 0);
    return rc;
}

static int gc_config(gc_run *r, int gitfd, int basegit, const char *where)
{
    char *text = NULL, *base = NULL, *out = NULL;
    size_t len = 0, blen = 0;
    struct stat st;
    int rc, have;

    have = fstatat(gitfd, "config", &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!have)
        return errno == ENOENT
                   ? 0
                   : rg_error_set(r->err, -errno, "%s/config: %s", where, strerror(errno));
    rc = gc_read(&text, &len, gitfd, "config", GC_FILE_MAX);
    if (rc == -EINVAL || rc == -EFBIG) {
        gc_told(r, where, rc == -EINVAL ? "config (not a regular file)" : "config (too large)");
        rc = RG_E_CONFIG;
        out = strdup("");
        if (out == NULL)
            rc = -ENOMEM;
    } else if (rc < 0) {
        rg_error_set(r->err, rc, "%s/config: %s", where, strerror(-rc));
        goto done;
    } else {
        if (basegit >= 0)
            (void)gc_read(&base, &blen, basegit, "config", GC_FILE_MAX);
        rc = gc_filter_at(&out, text, len, base, blen, where, r->tell, r->ctx);
        if (rc == 1 || rc == RG_E_CONFIG)
            r->count++;
    }
    if (rc == -ENOMEM || rc == RG_E_TOO_BIG) {
        rc = rg_error_set(r->err, rc, "%s/config: out of memory", where);
        goto done;
    }
    if (rc == 0)
        goto done; /* nothing to remove: left as it is */
    /* Keep the run's version for the user to read; git never reads it. */
    /* The run may have put anything at that name (a directory, a link):
     * it goes aside itself rather than block this. */
    if (unlinkat(gitfd, "config.refgate-run-orig", 0) < 0 && errno != ENOENT)
        (void)fork_gitconf_move_aside(gitfd, "config.refgate-run-orig", ".old");
    if (renameat(gitfd, "config", gitfd, "config.refgate-run-orig") < 0) {
        rc = rg_error_set(r->err, -errno, "%s/config: %s", where, strerror(errno));
        goto done;
    }
    /* Never through a link: a config that was a symlink stays one. */
    (void)fchmodat(gitfd, "config.refgate-run-orig", 0600, AT_SYMLINK_NOFOLLOW);
    rc = gc_write_config(gitfd, out, &st);
    if (rc < 0)
        rg_error_set(r->err, rc, "%s/config: writing: %s", where, strerror(-rc));
done:
    free(text);
    free(base);
    free(out);
    return rc < 0 ? rc : 0;
}

/* Move the hooks directory aside when it holds anything git would run. */
static int gc_hooks(gc_run *r, int gitfd, const char *where)
{
    struct dirent *de;
    char what[300];
    unsigned told = 0, live = 0;
    struct stat st;
    DIR *d;
    int fd, rc;

    if (fstatat(gitfd, "hooks", &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    if (S_ISDIR(st.st_mode)) {
        fd = openat(gitfd, "hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        d = fd < 0 ? NULL : fdopendir(fd);
        if (d == NULL) {
            if (fd >= 0)
                close(fd);
            live = 1; /* unreadable: moved aside all the same */
        }
        /* Bounded: one directory's entries. */
        while (d != NULL && (de = readdir(d)) != NULL) {
            size_t n = strlen(de->d_name);
            if (de->d_name[0] == '.' || (n > 7 && strcmp(de->d_name + n - 7, ".sample") == 0))
                continue; /* git runs hooks by exact name only */
            live++;
            if (told++ < GC_HOOKS_TOLD) {
                snprintf(what, sizeof(what), "hooks/%.250s", de->d_name);
                gc_told(r, where, what);
            }
        }
        if (d != NULL)
            closedir(d);
        if (live == 0)
            return 0;
    } else {
        gc_told(r, where, "hooks (not a directory)");
    }
    rc = fork_gitconf_move_aside(gitfd, "hooks", ".refgate-disabled");
    if (rc < 0)
        return rg_error_set(r->err, rc, "%s/hooks: moving aside: %s", where, strerror(-rc));
    return 0;
}

static int gc_gitdir(gc_run *r, int gitfd, int basegit, const char *where, unsigned depth);

/*
 * The entries of a .git/modules directory (`listfd`, whose path is
 * `where`): a directory with a HEAD is a submodule repository; one without
 * is part of a name with slashes ("a/b" is modules/a/b).
 */
static int gc_modules_list(gc_run *r, int listfd, int baselist, const char *where, unsigned depth)
{
    struct dirent *de;
    char sub[1024];
    struct stat st;
    DIR *d;
    int fd, sfd, bfd, rc = 0;

    if (depth >= GC_DEPTH_MAX)
        return 0;
    fd = openat(listfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    /* Bounded: GC_MODULES_MAX directories in all, GC_DEPTH_MAX deep. */
    while (rc == 0 && (de = readdir(d)) != NULL && r->modules < GC_MODULES_MAX) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        sfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sfd < 0)
            continue;
        r->modules++;
        snprintf(sub, sizeof(sub), "%s/%s", where, de->d_name);
        bfd = baselist < 0
                  ? -1
                  : openat(baselist, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fstatat(sfd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0)
            rc = gc_gitdir(r, sfd, bfd, sub, depth + 1);
        else
            rc = gc_modules_list(r, sfd, bfd, sub, depth + 1);
        if (bfd >= 0)
            close(bfd);
        close(sfd);
    }
    closedir(d);
    return rc;
}

/* A git directory's modules/, where the submodules' repositories live. */
static int gc_modules(gc_run *r, int gitfd, int basegit, const char *where, unsigned depth)
{
    char sub[1024];
    int fd, bfd, rc;

    fd = openat(gitfd, "modules", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    bfd = basegit < 0 ? -1
                      : openat(basegit, "modules", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    snprintf(sub, sizeof(sub), "%s/modules", where);
    rc = gc_modules_list(r, fd, bfd, sub, depth);
    if (bfd >= 0)
        close(bfd);
    close(fd);
    return rc;
}

/* The run may have taken its own write permission away from a directory
 * (chmod 555 .git): the runner owns it, so it gives it back. */
static void gc_writable(int fd)
{
    struct stat st;

    if (fstat(fd, &st) == 0 && (st.st_mode & S_IRWXU) != S_IRWXU)
        (void)fchmod(fd, (st.st_mode & 07777) | S_IRWXU);
}

/* One git directory: its config, hooks, commondir, config.worktree. */
static int gc_gitdir(gc_run *r, int gitfd, int basegit, const char *where, unsigned depth)
{
    static const char *const redirect[] = {"commondir", "config.worktree", NULL};
    char what[64];
    struct stat st;
    size_t i;
    int rc;

    gc_writable(gitfd);
    rc = gc_config(r, gitfd, basegit, where);
    if (rc == 0)
        rc = gc_hooks(r, gitfd, where);
    /* Either would point git at a configuration not rewritten here. */
    for (i = 0; rc == 0 && redirect[i] != NULL; i++) {
        if (fstatat(gitfd, redirect[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (gc_same_file(gitfd, basegit, redirect[i]) && strcmp(redirect[i], "commondir") == 0)
            continue;
        snprintf(what, sizeof(what), "%s", redirect[i]);
        gc_told(r, where, what);
        rc = fork_gitconf_move_aside(gitfd, redirect[i], ".refgate-disabled");
        if (rc < 0)
            rg_error_set(r->err, rc, "%s/%s: moving aside: %s", where, redirect[i], strerror(-rc));
    }
    if (rc == 0)
        rc = gc_modules(r, gitfd, basegit, where, depth);
    return rc;
}

/* A .git below the top of the fork (`name` in `dirfd`, whose path is
 * `rel`): a repository of its own, or a gitfile the base did not have. */
static int gc_nested(gc_run *r, int dirfd, int basedir, const char *rel)
{
    char where[4096], what[4200];
    struct stat st;
    int fd, bfd, rc;

    snprintf(where, sizeof(where), "%s%s.git", rel, rel[0] ? "/" : "");
    if (fstatat(dirfd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    if (S_ISDIR(st.st_mode)) {
        fd = openat(dirfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return rg_error_set(r->err, -errno, "%s: %s", where, strerror(errno));
        bfd = basedir < 0
                  ? -1
                  : openat(basedir, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rc = gc_gitdir(r, fd, bfd, where, 1);
        if (bfd >= 0)
            close(bfd);
        close(fd);
        return rc;
    }
    if (S_ISREG(st.st_mode) && gc_same_file(dirfd, basedir, ".git"))
        return 0;
    snprintf(what, sizeof(what), "%s (%s)", where,
             S_ISLNK(st.st_mode)   ? "a symlink"
             : S_ISREG(st.st_mode) ? "a new gitfile"
                                   : "odd");
    gc_told(r, "", what);
    rc = fork_gitconf_move_aside(dirfd, ".git", ".refgate-disabled");
    if (rc < 0)
        rg_error_set(r->err, rc, "%s: moving aside: %s", where, strerror(-rc));
    return rc;
}

/*
 * The fork's working tree, for a .git below the top: `git status` at the
 * top recurses into a submodule (a gitlink in the index, which the run
 * may have written) and reads that repository's config; `cd sub && git
 * status` reads it too. The top .git itself is handled by the caller.
 */
static int gc_worktree(gc_run *r, int wfd, int basedir, const char *rel, unsigned depth)
{
    struct dirent *de;
    char sub[4096];
    struct stat st;
    DIR *d;
    int fd, sfd, bfd, rc = 0, isdir;

    if (depth > 0 && (rc = gc_nested(r, wfd, basedir, rel)) < 0)
        return rc;
    if (depth >= GC_WALK_DEPTH)
        return 0; /* deeper than a fork is copied (tree.c) */
    fd = openat(wfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    /* Bounded: by the fork's tree, GC_WALK_DEPTH deep (one fd per level). */
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, ".git"))
            continue;
        isdir = de->d_type == DT_DIR;
        if (de->d_type == DT_UNKNOWN)
            isdir =
                fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        if (!isdir)
            continue;
        sfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sfd < 0)
            continue;
        bfd = basedir < 0
                  ? -1
                  : openat(basedir, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        rc = gc_worktree(r, sfd, bfd, sub, depth + 1);
        if (bfd >= 0)
            close(bfd);
        close(sfd);
    }
    closedir(d);
    return rc;
}

int fork_gitconf_neutralise(int *out, const char *fork, const char *base, fork_gitconf_tell_fn tell,
                            void *ctx, rg_error *err)
{
    gc_run r = {tell, ctx, 0, 0, err};
    int forkfd = -1, basefd = -1, gitfd = -1, basegit = -1, rc = 0;
    struct stat st;

    *out = 0;
    forkfd = open(fork, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (forkfd < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", fork, strerror(errno));
        goto done;
    }
    gc_writable(forkfd);
    if (base != NULL)
        basefd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    /* A .git the run created counts as much as one it was given: the
     * user's first git command in the fork would read it either way. */
    if (fstatat(forkfd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0)
        goto done;
    if (!S_ISDIR(st.st_mode)) {
        /* A gitfile (a worktree's, a submodule's) is kept when the base
         * had the same; anything else would send git elsewhere. */
        if (S_ISREG(st.st_mode) && gc_same_file(forkfd, basefd, ".git"))
            goto done;
        gc_told(&r, "", S_ISLNK(st.st_mode) ? ".git (a symlink)" : ".git (not a directory)");
        rc = fork_gitconf_move_aside(forkfd, ".git", ".refgate-disabled");
        if (rc < 0)
            rg_error_set(err, rc, ".git: moving aside: %s", strerror(-rc));
        goto done;
    }
    gitfd = openat(forkfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (gitfd < 0) {
        rc = rg_error_set(err, -errno, "%s/.git: %s", fork, strerror(errno));
        goto done;
    }
    if (basefd >= 0)
        basegit = openat(basefd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    rc = gc_gitdir(&r, gitfd, basegit, ".git", 0);
    if (rc < 0) {
        /* Fail closed: a .git that could not be made safe is no repository
         * for git at all until the user looks at it. */
        close(gitfd);
        gitfd = -1;
        if (fork_gitconf_move_aside(forkfd, ".git", ".refgate-disabled") == 0)
            gc_told(&r, "", ".git (could not be neutralised: moved to .git.refgate-disabled)");
        goto done;
    }
    rc = gc_worktree(&r, forkfd, basefd, "", 0);
done:
    *out = r.count;
    if (rc < 0)
        rg_error_wrap(err, "neutralising %s/.git", fork);
    if (gitfd >= 0)
        close(gitfd);
    if (basegit >= 0)
        close(basegit);
    if (basefd >= 0)
        close(basefd);
    if (forkfd >= 0)
        close(forkfd);
    return rc;
}
