/*
 * Secret scanning throughput on one core, for bench/secrets.sh: read a
 * corpus into memory, then scan it as the gateway will, object by object in
 * chunks, with the built-in detectors and optionally extra patterns, and
 * print MB/s (the median of RUNS passes) and what was found.
 *
 *   secrets_bench CORPUS [PATTERNS] [RUNS] [CHUNK_KB] [OBJECT_KB]
 *
 * PATTERNS is a file of `name regex` lines (extra config patterns), or `-`
 * for none. The corpus is cut into objects of OBJECT_KB (a blob each), each
 * fed in chunks of CHUNK_KB.
 */
#include "content/secrets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PATTERNS_MAX 1000

struct tally {
    size_t findings;
    size_t by_line[3]; /* the first few findings' lines, for a sanity check */
};

static int count(const content_secret_finding *f, void *arg)
{
    struct tally *t = arg;

    if (t->findings < 3)
        t->by_line[t->findings] = (size_t)f->line;
    t->findings++;
    return 0;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    long n;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0 || (data = malloc((size_t)n + 1)) == NULL ||
        fread(data, 1, (size_t)n, f) != (size_t)n) {
        free(data);
        data = NULL;
    } else {
        *len = (size_t)n;
    }
    if (f != NULL)
        fclose(f);
    return data;
}

static size_t load_patterns(content_secret_pattern *out, char *text)
{
    size_t n = 0;

    for (char *line = strtok(text, "\n"); line != NULL && n < PATTERNS_MAX;
         line = strtok(NULL, "\n")) {
        char *sp = strchr(line, ' ');

        if (sp == NULL)
            continue;
        *sp = '\0';
        out[n].name = line;
        out[n].regex = sp + 1;
        n++;
    }
    return n;
}

int main(int argc, char **argv)
{
    static content_secret_pattern extra[PATTERNS_MAX];
    rg_error err = RG_ERROR_INIT;
    content_secrets *s = NULL;
    content_secrets_scan *scan = NULL;
    struct tally t;
    char *corpus, *ptext = NULL;
    size_t len = 0, plen = 0, nextra = 0;
    int runs = argc > 3 ? atoi(argv[3]) : 5;
    size_t chunk = (argc > 4 ? (size_t)atol(argv[4]) : 64) * 1024;
    size_t object = (argc > 5 ? (size_t)atol(argv[5]) : 256) * 1024;
    double *secs, t0;

    if (argc < 2 || runs < 1 || runs > 100 || chunk == 0 || object == 0) {
        fprintf(stderr, "usage: secrets_bench CORPUS [PATTERNS|-] [RUNS] [CHUNK_KB] "
                        "[OBJECT_KB]\n");
        return 2;
    }
    corpus = read_all(argv[1], &len);
    if (corpus == NULL) {
        fprintf(stderr, "secrets_bench: cannot read %s\n", argv[1]);
        return 1;
    }
    if (argc > 2 && strcmp(argv[2], "-") != 0) {
        ptext = read_all(argv[2], &plen);
        if (ptext == NULL) {
            fprintf(stderr, "secrets_bench: cannot read %s\n", argv[2]);
            return 1;
        }
        ptext[plen] = '\0';
        nextra = load_patterns(extra, ptext);
    }
    t0 = now();
    if (content_secrets_new(&s, extra, nextra, NULL, 0, &err) < 0 ||
        content_secrets_scan_new(&scan, s, count, &t, &err) < 0) {
        fprintf(stderr, "secrets_bench: %s\n", err.msg);
        return 1;
    }
    printf("compiled the built-in detectors + %zu extra patterns in %.1f ms\n", nextra,
           (now() - t0) * 1e3);
    secs = calloc((size_t)runs, sizeof(*secs));
    for (int r = 0; r < runs; r++) {
        memset(&t, 0, sizeof(t));
        t0 = now();
        for (size_t o = 0; o < len; o += object) {
            size_t oend = o + object < len ? o + object : len;

            for (size_t c = o; c < oend; c += chunk) {
                size_t n = c + chunk < oend ? chunk : oend - c;

                if (content_secrets_scan_feed(scan, corpus + c, n, &err) < 0)
                    goto fail;
            }
            if (content_secrets_scan_end(scan, &err) < 0)
                goto fail;
        }
        secs[r] = now() - t0;
    }
    qsort(secs, (size_t)runs, sizeof(*secs), cmp_double);
    printf("scanned %.1f MB in %zu KB objects, %zu KB chunks: %zu findings\n", len / 1e6,
           object / 1024, chunk / 1024, t.findings);
    printf("median %.0f MB/s, best %.0f MB/s (%d runs, one thread)\n", len / 1e6 / secs[runs / 2],
           len / 1e6 / secs[0], runs);
    free(secs);
    content_secrets_scan_free(scan);
    content_secrets_free(s);
    free(corpus);
    free(ptext);
    return 0;
fail:
    fprintf(stderr, "secrets_bench: %s\n", err.msg);
    return 1;
}
