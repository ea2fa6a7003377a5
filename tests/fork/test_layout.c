/*
 * fork/layout.c: the names of a fork (DIR.N) and of the files beside it
 * (.DIR.N.base, .DIR.N.excluded, .DIR.N.run), and parsing a fork's name
 * back into DIR and N. Names only, so every case is a row of a table.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fork/layout.h"

/* ---------------------------------------------------------------------------
 * DIR.N
 * ------------------------------------------------------------------------- */

typedef struct fork_case {
    char dir[32];
    unsigned n;
    char fork[48]; /* "": -EINVAL */
} fork_case;

ParameterizedTestParameters(layout, fork_is_dir_dot_n_beside_dir)
{
    static fork_case cases[] = {
        {"/a/b", 1, "/a/b.1"},
        {"/a/b", 3, "/a/b.3"},
        {"/a/b/", 3, "/a/b.3"},
        {"/a/b///", 3, "/a/b.3"},
        {"/top", 1, "/top.1"},
        {"/a/my.app", 7, "/a/my.app.7"},
        {"/a/.hidden", 2, "/a/.hidden.2"},
        {"/a/b.1", 1, "/a/b.1.1"},
        {"/a/b", 9999, "/a/b.9999"},
        {"/a/b", 4294967295u, "/a/b.4294967295"},
        {"rel", 12, "rel.12"},
        {"/", 1, ""},
        {"//", 1, ""},
        {"", 1, ""},
    };

    return cr_make_param_array(fork_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(fork_case *c, layout, fork_is_dir_dot_n_beside_dir)
{
    rg_error err = RG_ERROR_INIT;
    char *out = (char *)"untouched";
    int rc = fork_layout_fork(&out, c->dir, c->n, &err);

    if (c->fork[0] == '\0') {
        cr_assert_eq(rc, -EINVAL, "'%s'", c->dir);
        cr_assert_null(out, "'%s'", c->dir);
        cr_assert(strstr(err.msg, "no directory name") != NULL, "%s", err.msg);
        return;
    }
    cr_assert_eq(rc, 0, "'%s': %s", c->dir, err.msg);
    cr_assert_str_eq(out, c->fork);
    free(out);
}

/* ---------------------------------------------------------------------------
 * .DIR.N.{base,excluded,run}
 * ------------------------------------------------------------------------- */

typedef struct side_case {
    char fork[32];
    char base[48]; /* "": -EINVAL for every side */
    char excluded[48];
    char run[48];
} side_case;

ParameterizedTestParameters(layout, side_files_are_hidden_beside_the_fork)
{
    static side_case cases[] = {
        {"/a/b.1", "/a/.b.1.base", "/a/.b.1.excluded", "/a/.b.1.run"},
        {"/a/b.1/", "/a/.b.1.base", "/a/.b.1.excluded", "/a/.b.1.run"},
        {"/a/b.1//", "/a/.b.1.base", "/a/.b.1.excluded", "/a/.b.1.run"},
        {"/top.3", "/.top.3.base", "/.top.3.excluded", "/.top.3.run"},
        {"app.12", ".app.12.base", ".app.12.excluded", ".app.12.run"},
        {"../w/my.app.7", "../w/.my.app.7.base", "../w/.my.app.7.excluded", "../w/.my.app.7.run"},
        {"/a/.hidden.2", "/a/..hidden.2.base", "/a/..hidden.2.excluded", "/a/..hidden.2.run"},
        {"/a/b.4294967295", "/a/.b.4294967295.base", "/a/.b.4294967295.excluded",
         "/a/.b.4294967295.run"},
        /* Names only: a directory that is no fork still has these names. */
        {"/a/b", "/a/.b.base", "/a/.b.excluded", "/a/.b.run"},
        {"/", "", "", ""},
        {"//", "", "", ""},
        {"", "", "", ""},
        {".", "", "", ""},
        {"..", "", "", ""},
        {"/a/.", "", "", ""},
        {"/a/../", "", "", ""},
    };

    return cr_make_param_array(side_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(side_case *c, layout, side_files_are_hidden_beside_the_fork)
{
    const fork_layout_side sides[3] = {FORK_LAYOUT_BASE, FORK_LAYOUT_EXCLUDED, FORK_LAYOUT_RUN};
    const char *want[3] = {c->base, c->excluded, c->run};
    int s;

    for (s = 0; s < 3; s++) {
        rg_error err = RG_ERROR_INIT;
        char *out = (char *)"untouched";
        int rc = fork_layout_side_path(&out, c->fork, sides[s], &err);

        if (want[s][0] == '\0') {
            cr_assert_eq(rc, -EINVAL, "'%s' side %d", c->fork, s);
            cr_assert_null(out, "'%s' side %d", c->fork, s);
            cr_assert(strstr(err.msg, "not a fork directory name") != NULL, "%s", err.msg);
            continue;
        }
        cr_assert_eq(rc, 0, "'%s' side %d: %s", c->fork, s, err.msg);
        cr_assert_str_eq(out, want[s]);
        free(out);
    }
}

Test(layout, an_unknown_side_is_refused)
{
    char *out = (char *)"untouched";

    cr_assert_eq(fork_layout_side_path(&out, "/a/b.1", (fork_layout_side)3, NULL), -EINVAL);
    cr_assert_null(out);
}

/* ---------------------------------------------------------------------------
 * DIR.N -> DIR, N
 * ------------------------------------------------------------------------- */

typedef struct parse_case {
    char fork[32];
    int rc;
    char dir[32];
    unsigned n; /* 0: DIR.N in form, no N refgate-run makes */
} parse_case;

ParameterizedTestParameters(layout, parse_splits_dir_and_n)
{
    static parse_case cases[] = {
        {"/a/b.1", 0, "/a/b", 1},
        {"/a/b.12", 0, "/a/b", 12},
        {"/a/b.1/", 0, "/a/b", 1},
        {"/a/b.1//", 0, "/a/b", 1},
        {"/a/b.1.2", 0, "/a/b.1", 2},
        {"/a/my.app.7", 0, "/a/my.app", 7},
        {"/top.3", 0, "/top", 3},
        {"app.12", 0, "app", 12},
        {"../w/my.app.7", 0, "../w/my.app", 7},
        {"/a/.hidden.2", 0, "/a/.hidden", 2},
        {"/a/b.9999", 0, "/a/b", 9999},
        /* Of the form, but not a number refgate-run makes. */
        {"/a/b.10000", 0, "/a/b", 0},
        {"/a/b.4294967296", 0, "/a/b", 0},
        {"/a/b.99999999999999999999", 0, "/a/b", 0},
        {"/a/b.0", 0, "/a/b", 0},
        {"/a/b.01", 0, "/a/b", 0},
        /* Not a fork's name at all. */
        {"/a/b", -EINVAL, "", 0},
        {"/a/b.", -EINVAL, "", 0},
        {"/a/b.1x", -EINVAL, "", 0},
        {"/a.1/b", -EINVAL, "", 0},
        {"/a/.1", -EINVAL, "", 0},
        {".1", -EINVAL, "", 0},
        {"1", -EINVAL, "", 0},
        {"/", -EINVAL, "", 0},
        {"", -EINVAL, "", 0},
        {"..", -EINVAL, "", 0},
    };

    return cr_make_param_array(parse_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(parse_case *c, layout, parse_splits_dir_and_n)
{
    rg_error err = RG_ERROR_INIT;
    char *dir = (char *)"untouched";
    unsigned n = 77;
    int rc = fork_layout_parse(&dir, &n, c->fork, &err);

    cr_assert_eq(rc, c->rc, "'%s'", c->fork);
    cr_assert_eq(n, c->n, "'%s': n %u", c->fork, n);
    if (c->rc < 0) {
        cr_assert_null(dir, "'%s'", c->fork);
        cr_assert(strstr(err.msg, "does not end in .<N>") != NULL, "%s", err.msg);
        return;
    }
    cr_assert_str_eq(dir, c->dir);
    free(dir);
}

/* What layout makes, layout reads back, and the side files lie beside it. */
Test(layout, parse_is_the_inverse_of_fork)
{
    static const char *const dirs[] = {"/a/b", "/top", "/a/my.app", "/a/b.1", "rel"};
    static const unsigned ns[] = {1, 2, 10, 9999};
    size_t i, j;

    for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        for (j = 0; j < sizeof(ns) / sizeof(ns[0]); j++) {
            char *fork = NULL, *dir = NULL, *base = NULL;
            const char *slash;
            unsigned n = 0;

            cr_assert_eq(fork_layout_fork(&fork, dirs[i], ns[j], NULL), 0);
            cr_assert_eq(fork_layout_parse(&dir, &n, fork, NULL), 0, "%s", fork);
            cr_assert_str_eq(dir, dirs[i]);
            cr_assert_eq(n, ns[j]);
            cr_assert_eq(fork_layout_side_path(&base, fork, FORK_LAYOUT_BASE, NULL), 0);
            slash = strrchr(fork, '/');
            /* Same directory, and hidden: "." + the fork's name + ".base". */
            cr_assert_eq(strncmp(base, fork, slash ? (size_t)(slash - fork + 1) : 0), 0, "%s",
                         base);
            cr_assert_eq(base[slash ? slash - fork + 1 : 0], '.', "%s", base);
            free(fork);
            free(dir);
            free(base);
        }
    }
}
