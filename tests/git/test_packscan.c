/*
 * Tests for git/packscan.c: where a pack ends, found as its bytes stream
 * past in chunks of every size, for packs git itself writes (SHA-1 and
 * SHA-256, deltas of both kinds, empty) with and without bytes after them;
 * and what is refused.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "git/packscan.h"
#include "support/shell.h"

static char dir[] = "/tmp/rg-test-packscan-XXXXXX";

static void setup(void)
{
    char home[64];

    strcpy(dir, "/tmp/rg-test-packscan-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(home, sizeof(home), "%s/home", dir);
    test_git_env(home);
}

static void teardown(void)
{
    test_run("rm -rf %s", dir);
}

TestSuite(packscan, .init = setup, .fini = teardown);

/* A pack of a repository with history (so deltas exist) in `format`. */
static char *make_pack(size_t *len, const char *format, const char *revs_flags)
{
    char path[128];
    FILE *f;
    char *buf;
    long n;

    test_run("cd %s && rm -rf r && git init -q --object-format=%s r && cd r && "
             "for i in 1 2 3 4 5 6; do seq 1 $((i * 2000)) > big.txt; echo $i >> big.txt; "
             "git add big.txt && git commit -q -m c$i; done && "
             "git tag -a -m tag v1 && "
             "git pack-objects --stdout %s -q >../p.pack <<EOF\nHEAD\nv1\nEOF",
             dir, format, revs_flags);
    snprintf(path, sizeof(path), "%s/p.pack", dir);
    f = fopen(path, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 100);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Scan in chunks of `step`; returns the end found (0 if none). */
static uint64_t scan(const char *buf, size_t len, size_t step, size_t hexlen, uint64_t *safe,
                     int *rc_out)
{
    rgit_packscan *s;
    rg_error err = RG_ERROR_INIT;
    uint64_t end;
    int rc = 0;

    cr_assert_eq(rgit_packscan_new(&s, hexlen, 1 << 30), 0);
    for (size_t off = 0; off < len && rc == 0; off += step) {
        size_t n = len - off < step ? len - off : step;
        rc = rgit_packscan_feed(s, buf + off, n, &err);
        /* Never past the trailer while it is unseen. */
        cr_assert_leq(rgit_packscan_safe(s), off + n);
    }
    *safe = rgit_packscan_safe(s);
    end = rgit_packscan_end(s);
    *rc_out = rc;
    rgit_packscan_free(s);
    return end;
}

Test(packscan, finds_the_end_of_sha1_and_sha256_packs_in_any_chunking)
{
    static const char *const formats[] = {"sha1", "sha256"};
    static const size_t steps[] = {1, 2, 7, 4096, 1 << 20};

    for (size_t f = 0; f < 2; f++) {
        size_t len, hexlen = f ? 64 : 40;
        char *pack = make_pack(&len, formats[f], "--revs");

        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
            uint64_t safe, end;
            int rc;

            end = scan(pack, len, steps[i], hexlen, &safe, &rc);
            cr_expect_eq(rc, 1, "%s step %zu", formats[f], steps[i]);
            cr_expect_eq(end, len, "%s step %zu: end %llu of %zu", formats[f], steps[i],
                         (unsigned long long)end, len);
            cr_expect_eq(safe, len - hexlen / 2, "%s step %zu: the trailer is held back",
                         formats[f], steps[i]);
        }
        free(pack);
    }
}

Test(packscan, bytes_after_the_pack_are_not_part_of_it)
{
    size_t len;
    char *pack = make_pack(&len, "sha1", "--revs --delta-base-offset");
    uint64_t safe, end;
    int rc;

    memcpy(pack + len, "0000JUNKJUNKJUNKJUNKJUNKJUNKJUNKJUNKJUNK", 40);
    end = scan(pack, len + 40, 5, 40, &safe, &rc);
    cr_expect_eq(rc, 1);
    cr_expect_eq(end, len, "the junk is not the pack");
    cr_expect_eq(safe, len - 20);
    free(pack);
}

Test(packscan, an_empty_pack_is_its_header_and_trailer)
{
    char pack[32] = "PACK\0\0\0\2\0\0\0\0";
    uint64_t safe, end;
    int rc;

    end = scan(pack, 32, 3, 40, &safe, &rc);
    cr_expect_eq(rc, 1);
    cr_expect_eq(end, 32);
    cr_expect_eq(safe, 12);
}

Test(packscan, a_cut_pack_never_ends)
{
    size_t len;
    char *pack = make_pack(&len, "sha1", "--revs");
    uint64_t safe, end;
    int rc;

    end = scan(pack, len - 1, 100, 40, &safe, &rc);
    cr_expect_eq(rc, 0);
    cr_expect_eq(end, 0);
    cr_expect_eq(safe, len - 20, "the trailer's first bytes are held back too");
    free(pack);
}

Test(packscan, what_is_not_a_pack_is_refused)
{
    static const struct {
        const char *what;
        const char *bytes;
        size_t len;
    } cases[] = {
        {"no signature", "PACX\0\0\0\2\0\0\0\1", 12},
        {"version 4", "PACK\0\0\0\4\0\0\0\1", 12},
        {"object type 0", "PACK\0\0\0\2\0\0\0\1\x05", 13},
        {"object type 5", "PACK\0\0\0\2\0\0\0\1\x55", 13},
        {"endless size varint", "PACK\0\0\0\2\0\0\0\1\xb5\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
         23},
        {"not zlib", "PACK\0\0\0\2\0\0\0\1\x35\xff\xff\xff\xff", 17},
    };
    rgit_packscan *s;
    rg_error err = RG_ERROR_INIT;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_assert_eq(rgit_packscan_new(&s, 40, 1 << 20), 0);
        cr_expect_lt(rgit_packscan_feed(s, cases[i].bytes, cases[i].len, &err), 0, "%s",
                     cases[i].what);
        rgit_packscan_free(s);
    }
}

Test(packscan, a_stream_inflating_past_its_declared_size_or_the_cap_is_refused)
{
    unsigned char zero[1 << 16] = {0}, z[1024], pack[2048];
    uLongf zlen = sizeof(z);
    rgit_packscan *s;
    rg_error err = RG_ERROR_INIT;
    size_t n = 0;

    cr_assert_eq(compress(z, &zlen, zero, sizeof(zero)), Z_OK);
    memcpy(pack, "PACK\0\0\0\2\0\0\0\1", 12);
    n = 12;
    pack[n++] = 0x30 | 0x80 | 0x0; /* a blob whose size says 0 + ... */
    pack[n++] = 0x01;              /* ... 16 bytes, far less than 64 KiB */
    memcpy(pack + n, z, zlen);
    n += zlen;
    cr_assert_eq(rgit_packscan_new(&s, 40, 1 << 30), 0);
    cr_expect_lt(rgit_packscan_feed(s, (char *)pack, n, &err), 0);
    cr_expect(strstr(err.msg, "larger than its header") != NULL, "%s", err.msg);
    rgit_packscan_free(s);

    /* Declared honestly, but over the cap on inflated bytes. */
    n = 12;
    pack[n++] = 0x30 | 0x80;
    pack[n++] = 0x80 | 0x00;
    pack[n++] = 0x20; /* 0 | 0 << 4 | 32 << 11 = 65536 */
    memcpy(pack + n, z, zlen);
    n += zlen;
    cr_assert_eq(rgit_packscan_new(&s, 40, 1000), 0);
    cr_expect_eq(rgit_packscan_feed(s, (char *)pack, n, &err), RG_E_TOO_BIG, "%s", err.msg);
    rgit_packscan_free(s);
}
