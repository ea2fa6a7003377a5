/*
 * What fork/gitconf.c (the config filter) and fork/gitconf_neutralise.c
 * (the fork's .git walked and neutralised) share: their limits and the
 * filter of one config file named for the messages. Private to fork/.
 */
#ifndef REFGATE_FORK_GITCONF_PRIV_H
#define REFGATE_FORK_GITCONF_PRIV_H

#include "fork/gitconf.h"

#include <stddef.h>

#define GC_FILE_MAX    ((size_t)1 << 20) /* a config larger than this is refused */
#define GC_OUT_MAX     ((size_t)4 << 20) /* the rewritten config, at most */
#define GC_ENTRIES_MAX 100000            /* keys in one file, at most */
#define GC_NAME_MAX    1024              /* a section, subsection or key name */
#define GC_MODULES_MAX 1000              /* submodule repositories visited */
#define GC_DEPTH_MAX   8                 /* nesting of .git/modules */
#define GC_HOOKS_TOLD  64                /* hook names told, at most */
#define GC_WALK_DEPTH  200               /* the fork's depth walked, as tree.c copies */

int gc_filter_at(char **out, const char *config, size_t len, const char *base, size_t base_len,
                 const char *where, fork_gitconf_tell_fn tell, void *ctx);

#endif
