/*
 * The fixture the push-inspection tests share: in a fresh directory, a bare
 * upstream whose `main` holds one commit (tagged `base` in the clone), the
 * clone that made it, and a directory for quarantines; git isolated from
 * the developer's configuration.
 */
#ifndef RG_TESTS_SUPPORT_GITFIX_H
#define RG_TESTS_SUPPORT_GITFIX_H

#include <stddef.h>

/*
 * Make `base` (a mkdtemp template, changed in place) and in it
 * upstream.git, work/ (the clone, whose first commit is what shell command
 * `seed` writes in it) and tmp/, whose paths go to upstream, work and
 * tmp_parent (`cap` bytes each). The test fails when a step does.
 */
void test_gitfix_setup(char *base, char *upstream, char *work, char *tmp_parent, size_t cap,
                       const char *seed);

#endif
