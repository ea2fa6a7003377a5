/*
 * Build tool (cmake/ManHelp.cmake): turns a man page into a program's
 * --help text, so the page is the one source of it. It runs
 * `mandoc -T utf8` on the page, strips the overstrike that makes bold and
 * underline on a terminal, and writes a C file with the page's SYNOPSIS
 * and one text per top-level item of a section (COMMANDS): the item's
 * words are what its `.It Nm Cm WORDS ...` line names (`token mint`), an
 * item without Cm (`.It Nm Fl -version`) is skipped.
 *
 *   man_help MANDOC PAGE SECTION PREFIX OUT
 *
 * writes to OUT:
 *   const char PREFIX_synopsis[];
 *   const char *const PREFIX_words[];   (NULL-terminated)
 *   const char *const PREFIX_texts[];   (same order)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ITEMS_MAX 256
#define INDENT    5

static char *slurp(FILE *f)
{
    size_t cap = 65536, len = 0, n;
    char *s = malloc(cap);

    while (s != NULL && (n = fread(s + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *t = realloc(s, cap *= 2);

            if (t == NULL)
                free(s);
            s = t;
        }
    }
    if (s != NULL)
        s[len] = '\0';
    return s;
}

/* The rendered page: mandoc's output with X\bX (bold) and _\bX (underline) made X. */
static char *render(const char *mandoc, const char *page)
{
    int fd[2], st;
    pid_t pid;
    FILE *f;
    char *s, *r, *w;

    if (pipe(fd) < 0)
        return NULL;
    pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execl(mandoc, mandoc, "-T", "utf8", "-O", "width=78", page, (char *)NULL);
        fprintf(stderr, "man_help: cannot run %s: %s\n", mandoc, strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    f = fdopen(fd[0], "r");
    s = f ? slurp(f) : NULL;
    if (f)
        fclose(f);
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "man_help: %s -T utf8 %s failed\n", mandoc, page);
        free(s);
        return NULL;
    }
    /* mandoc overstrikes a character with itself (bold) or with _ (underline). */
    for (r = w = s; s != NULL && *r; r++) {
        if (r[1] == '\b' && r[2] != '\0') {
            r++;
            continue;
        }
        *w++ = *r;
    }
    if (s != NULL)
        *w = '\0';
    return s;
}

/* The command words of each top-level `.It` of section `sec` in the mdoc source. */
static int item_words(char **out, size_t max, const char *src, const char *sec)
{
    char head[256];
    const char *p = src, *e;
    size_t n = 0;
    int in = 0, depth = 0;

    snprintf(head, sizeof(head), ".Sh %s\n", sec);
    for (; *p; p = *e ? e + 1 : e) {
        e = strchr(p, '\n');
        if (e == NULL)
            e = p + strlen(p);
        if (!strncmp(p, ".Sh ", 4)) {
            in = !strncmp(p, head, strlen(head));
            continue;
        }
        if (!in)
            continue;
        if (!strncmp(p, ".Bl", 3))
            depth++;
        else if (!strncmp(p, ".El", 3))
            depth--;
        else if (depth == 1 && !strncmp(p, ".It", 3)) {
            const char *cm = strstr(p, " Cm ");
            char buf[256] = "";
            size_t b = 0;

            if (n == max)
                return -1;
            if (cm != NULL && cm < e) {
                /* Words up to the next macro (macros are capitalised: Fl, Ar, Op). */
                for (cm += 4; cm < e && !(cm[0] >= 'A' && cm[0] <= 'Z') && b + 1 < sizeof(buf);
                     cm++)
                    buf[b++] = *cm;
                while (b > 0 && buf[b - 1] == ' ')
                    b--;
                buf[b] = '\0';
            }
            out[n++] = strdup(buf);
        }
    }
    return (int)n;
}

static void put_c_string(FILE *f, const char *s, size_t len)
{
    size_t i;

    fputs("\"", f);
    for (i = 0; i < len; i++) {
        if (s[i] == '\\' || s[i] == '"')
            fprintf(f, "\\%c", s[i]);
        else if (s[i] == '\n')
            fputs(i + 1 < len ? "\\n\"\n    \"" : "\\n", f);
        else
            fputc(s[i], f);
    }
    fputs("\"", f);
}

/*
 * The lines of rendered section `sec`, dedented by the section indent:
 * appended to *out; the start of each top-level item (a line at exactly
 * the section indent) recorded in starts unless it is NULL.
 */
static int section_text(char **out, size_t *starts, size_t max, const char *text, const char *sec)
{
    const char *p = text, *e;
    size_t n = 0, len = 0, cap = strlen(text) + 1;
    int in = 0;

    *out = malloc(cap);
    if (*out == NULL)
        return -1;
    for (; *p; p = *e ? e + 1 : e) {
        e = strchr(p, '\n');
        if (e == NULL)
            e = p + strlen(p);
        if (p[0] != ' ' && p != e) {
            in = (size_t)(e - p) == strlen(sec) && !strncmp(p, sec, strlen(sec));
            continue;
        }
        if (!in)
            continue;
        if (starts != NULL && e - p > INDENT && !strncmp(p, "     ", INDENT) && p[INDENT] != ' ') {
            if (n == max)
                return -1;
            starts[n++] = len;
        }
        if (e - p >= INDENT) {
            memcpy(*out + len, p + INDENT, (size_t)(e - p) - INDENT);
            len += (size_t)(e - p) - INDENT;
        }
        (*out)[len++] = '\n';
    }
    (*out)[len] = '\0';
    return (int)n;
}

int main(int argc, char **argv)
{
    char *words[ITEMS_MAX], *src, *text, *synopsis, *items, *tmp;
    size_t starts[ITEMS_MAX], i, end, len;
    int nwords, nitems;
    FILE *f;

    if (argc != 6) {
        fprintf(stderr, "usage: man_help MANDOC PAGE SECTION PREFIX OUT\n");
        return 2;
    }
    f = fopen(argv[2], "r");
    src = f ? slurp(f) : NULL;
    if (f)
        fclose(f);
    text = render(argv[1], argv[2]);
    if (src == NULL || text == NULL) {
        fprintf(stderr, "man_help: cannot read or render %s\n", argv[2]);
        return 1;
    }
    nwords = item_words(words, ITEMS_MAX, src, argv[3]);
    nitems = section_text(&items, starts, ITEMS_MAX, text, argv[3]);
    if (section_text(&synopsis, NULL, 0, text, "SYNOPSIS") < 0)
        return 1;
    if (nwords < 0 || nitems < 0 || nwords != nitems) {
        fprintf(stderr,
                "man_help: %s: section %s has %d items in the source but %d rendered; "
                "each top-level item must be one `.It Nm ...` line\n",
                argv[2], argv[3], nwords, nitems);
        return 1;
    }
    if (asprintf(&tmp, "%s.tmp", argv[5]) < 0 || (f = fopen(tmp, "w")) == NULL) {
        fprintf(stderr, "man_help: cannot write %s\n", argv[5]);
        return 1;
    }
    fprintf(f, "/* Made by cmake/man_help from %s: do not edit. */\n#include <stddef.h>\n\n",
            argv[2]);
    fprintf(f, "extern const char %s_synopsis[];\n", argv[4]);
    fprintf(f, "extern const char *const %s_words[];\n", argv[4]);
    fprintf(f, "extern const char *const %s_texts[];\n\n", argv[4]);
    fprintf(f, "const char %s_synopsis[] =\n    ", argv[4]);
    put_c_string(f, synopsis, strlen(synopsis));
    fprintf(f, ";\n\nconst char *const %s_words[] = {\n", argv[4]);
    for (i = 0; i < (size_t)nwords; i++)
        if (words[i][0] != '\0')
            fprintf(f, "    \"%s\",\n", words[i]);
    fprintf(f, "    NULL,\n};\n\nconst char *const %s_texts[] = {\n", argv[4]);
    for (i = 0; i < (size_t)nitems; i++) {
        if (words[i][0] == '\0')
            continue;
        end = i + 1 < (size_t)nitems ? starts[i + 1] : strlen(items);
        len = end - starts[i];
        /* The blank lines between items belong to neither. */
        while (len > 1 && items[starts[i] + len - 1] == '\n' && items[starts[i] + len - 2] == '\n')
            len--;
        fputs("    ", f);
        put_c_string(f, items + starts[i], len);
        fputs(",\n", f);
    }
    fputs("    NULL,\n};\n", f);
    if (fclose(f) != 0 || rename(tmp, argv[5]) < 0) {
        fprintf(stderr, "man_help: cannot write %s\n", argv[5]);
        return 1;
    }
    /* Freed so that a sanitizer build's leak check passes the tool. */
    for (i = 0; i < (size_t)nwords; i++)
        free(words[i]);
    free(tmp);
    free(items);
    free(synopsis);
    free(text);
    free(src);
    return 0;
}
