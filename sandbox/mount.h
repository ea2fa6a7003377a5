/*
 * The mount namespace's layout: a plan of what goes where (pure, so a test
 * can read it) and the code that builds it inside the new namespace.
 *
 * The layout, bubblewrap's model: the host tree bound read-only, nosuid and
 * nodev recursively (mount_setattr with AT_RECURSIVE: chmod, chown, xattrs
 * and utimes outside fail with EROFS, whatever the caller's uid); a fresh
 * /proc; a minimal /dev (null, zero, full, random, urandom, tty, a new
 * devpts instance so no other terminal exists inside, a private /dev/shm);
 * then the plan's entries, parents before children: private tmpfs (/tmp,
 * the home directory), binds (the fork and -w read-write, toolchain paths
 * and -r read-only) and hides (an empty, unreadable, read-only directory or
 * file over each path that must stay out of reach).
 *
 * Every bind's source is opened (open_tree(OPEN_TREE_CLONE)) in the runner
 * before any tmpfs or hide is mounted, so a source inside a hidden
 * directory (a fork in the home directory) is still reached.
 */
#ifndef RG_SANDBOX_MOUNT_H
#define RG_SANDBOX_MOUNT_H

#include <stddef.h>

#include "util/error.h"

typedef enum sandbox_mount_kind {
    SANDBOX_MOUNT_BIND = 0, /* src at dst */
    SANDBOX_MOUNT_TMPFS,    /* a private, empty, writable tmpfs at dst */
    SANDBOX_MOUNT_HIDE,     /* an empty, unreadable, read-only dir or file over dst */
} sandbox_mount_kind;

#define SANDBOX_MOUNT_RW       (1u << 0) /* a bind stays writable */
#define SANDBOX_MOUNT_OPTIONAL (1u << 1) /* a missing source or target is skipped */
#define SANDBOX_MOUNT_IDMAP    (1u << 2) /* a bind is id-mapped (sandbox_mount_prepare) */
#define SANDBOX_MOUNT_PRIVATE  (1u << 3) /* a tmpfs is mode 0700, not 0755 */

typedef struct sandbox_mount_op {
    sandbox_mount_kind kind;
    char *src; /* binds only */
    char *dst;
    unsigned flags;
    int fd; /* the detached source tree, once opened; -1 before */
} sandbox_mount_op;

typedef struct sandbox_mount_plan {
    sandbox_mount_op *ops;
    size_t n;
} sandbox_mount_plan;

#define SANDBOX_MOUNT_PLAN_INIT                                                                    \
    {                                                                                              \
        NULL, 0                                                                                    \
    }

/*
 * Add an entry. Paths are absolute and canonical; `src` is NULL except for
 * binds. A second entry with the same kind and dst is ignored.
 */
int sandbox_mount_plan_add(sandbox_mount_plan *p, sandbox_mount_kind kind, const char *src,
                           const char *dst, unsigned flags, rg_error *err);

/*
 * Order the entries so a parent is mounted before what lies inside it (by
 * depth, stable), and refuse a plan where a hide or a tmpfs is or contains
 * a writable bind added before it (that would hide the fork or a -w path).
 */
int sandbox_mount_plan_finish(sandbox_mount_plan *p, rg_error *err);

void sandbox_mount_plan_free(sandbox_mount_plan *p);

/*
 * In a root runner, before the namespace exists: open every bind's source
 * as a detached tree (the sandbox's first process may no longer be allowed
 * to reach it: a root caller's runs as nobody), read-only unless RW, and
 * id-map IDMAP ones through the user namespace `userns_fd` (from
 * sandbox_ns_idmap_userns; -1: none), so files root owns there are the
 * command's. Fails when the filesystem cannot id-map. Without root the
 * kernel refuses this outside; sandbox_mount_apply opens them inside then.
 */
int sandbox_mount_prepare(sandbox_mount_plan *p, int userns_fd, rg_error *err);

/* What sandbox_mount_apply builds besides the plan. */
typedef struct sandbox_mount_opts {
    int proc; /* a fresh /proc (needs a new pid namespace to be one's own) */
} sandbox_mount_opts;

/*
 * In the child, inside a new mount namespace with CAP_SYS_ADMIN over it:
 * build the layout. Closes the trees it opened.
 */
int sandbox_mount_apply(sandbox_mount_plan *p, const sandbox_mount_opts *opts, rg_error *err);

/*
 * Other places where the directory `path` (canonical) is visible, read from
 * `mountinfo` (the text of /proc/self/mountinfo): mounts of the same
 * filesystem whose root is the directory, lies inside it or contains it
 * (a bind mount of the home elsewhere, or the whole disk mounted a second
 * time). Stores malloc'd canonical paths in *out (*n of them, at most
 * `max`); the mount `path` is reached through is not listed.
 */
int sandbox_mount_aliases(char ***out, size_t *n, const char *mountinfo, const char *path,
                          size_t max, rg_error *err);

#endif
