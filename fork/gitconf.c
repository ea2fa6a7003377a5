/*
 * The config filter of a fork's .git (see gitconf.h; the walk that
 * neutralises the rest is gitconf_neutralise.c). The parser follows
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

#include "fork/gitconf_priv.h"
#include "util/buf.h"

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

int gc_filter_at(char **out, const char *config, size_t len, const char *base, size_t base_len,
                 const char *where, fork_gitconf_tell_fn tell, void *ctx)
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
