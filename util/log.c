/*
 * The logger (see log.h): one formatted line per event handed to the sink
 * the program set.
 */
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The longest line; longer field text is cut. */
#define LOG_LINE_MAX 2048

static rg_log_sink log_sink;
static void *log_sink_arg;

void rg_log_set_sink(rg_log_sink sink, void *arg)
{
    log_sink = sink;
    log_sink_arg = arg;
}

void rg_log(rg_log_level level, const char *event, const char *fmt, ...)
{
    char line[LOG_LINE_MAX];
    int n;
    va_list ap;

    if (log_sink == NULL)
        return;
    n = snprintf(line, sizeof(line), "%s", event);
    if (n >= 0 && (size_t)n < sizeof(line) - 1 && fmt && fmt[0]) {
        line[n++] = ' ';
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        va_end(ap);
    }
    log_sink(log_sink_arg, level, line);
}

static int plain_char(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != '"' && c != '\\';
}

char *rg_log_quote(char *out, size_t outsz, const char *s)
{
    size_t o = 0, need;
    int plain = s && s[0];

    if (outsz == 0)
        return out;
    if (s == NULL)
        s = "";
    for (const char *p = s; *p && plain; p++)
        plain = plain_char((unsigned char)*p);
    if (plain) {
        snprintf(out, outsz, "%s", s);
        if (strlen(s) >= outsz && outsz > 4)
            memcpy(out + outsz - 4, "...", 4);
        return out;
    }
    /* Room is kept for the closing quote, an ellipsis and the NUL. */
    if (outsz < 8) {
        out[0] = '\0';
        return out;
    }
    out[o++] = '"';
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;

        need = plain_char(c) || c == ' ' ? 1 : (c == '"' || c == '\\') ? 2 : 4;
        if (o + need + 5 > outsz) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (need == 1)
            out[o++] = (char)c;
        else if (need == 2) {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else {
            snprintf(out + o, 5, "\\x%02x", c);
            o += 4;
        }
    }
    out[o++] = '"';
    out[o] = '\0';
    return out;
}

void rg_log_stderr_sink(void *arg, rg_log_level level, const char *line)
{
    const int *journald = arg;

    /* One fprintf per line: stdio locks the stream, so lines never mix. */
    if (journald && *journald)
        fprintf(stderr, "<%d>%s\n", (int)level, line);
    else
        fprintf(stderr, "refgate: %s\n", line);
}
