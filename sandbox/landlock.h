/*
 * Landlock confinement of the command, after the kernel's
 * samples/landlock/sandboxer.c: probe the ABI, mask the rights the kernel
 * lacks, add one rule per granted path (opened O_PATH), then restrict the
 * process just before exec. Unlike the sample, it fails closed: a missing
 * right that would let the command do what the runner promised it cannot
 * (truncate files outside the fork, signal or reach abstract sockets
 * outside the sandbox) refuses the run unless the user accepted that loss
 * by name, and no Landlock at all refuses unless --allow-unconfined.
 *
 * Landlock only allows, and a rule grants a whole hierarchy; so "readable:
 * everything outside the home directory" is built by walking from / down to
 * each hidden path and granting every sibling met on the way
 * (sandbox_landlock_allow_all_except()).
 */
#ifndef RG_SANDBOX_LANDLOCK_H
#define RG_SANDBOX_LANDLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* The newest ABI this file knows; a newer kernel is used at this level. */
#define SANDBOX_LANDLOCK_ABI_LAST 7

/* Losses the user accepts by name (`accept` below). */
#define SANDBOX_LANDLOCK_ACCEPT_NO_SCOPE    (1u << 0) /* --no-scope, ABI < 6 */
#define SANDBOX_LANDLOCK_ACCEPT_NO_TRUNCATE (1u << 1) /* --no-truncate-control, ABI < 3 */
#define SANDBOX_LANDLOCK_ACCEPT_ANY         (1u << 2) /* --allow-unconfined */

/* What a rule grants (`access` below). */
#define SANDBOX_LANDLOCK_READ     (1u << 0) /* read files, list directories, execute */
#define SANDBOX_LANDLOCK_WRITE    (1u << 1) /* READ, plus create, write, remove, rename */
#define SANDBOX_LANDLOCK_DEV      (1u << 2) /* a device: read, write, truncate, ioctl */
#define SANDBOX_LANDLOCK_OPTIONAL (1u << 3) /* a path that does not exist is skipped */

#define SANDBOX_LANDLOCK_DEGRADED_MAX 6

typedef struct sandbox_landlock_plan {
    int abi;             /* the ABI in use; 0 when there is no Landlock */
    int kernel_abi;      /* what the kernel offered (before any cap) */
    int enforce;         /* 0: run without Landlock (accepted with ACCEPT_ANY) */
    int loud;            /* a loss was accepted only by --allow-unconfined */
    uint64_t handled_fs; /* LANDLOCK_ACCESS_FS_* the ruleset handles */
    uint64_t scoped;     /* LANDLOCK_SCOPE_* */
    const char *degraded[SANDBOX_LANDLOCK_DEGRADED_MAX]; /* what is lost, as sentences */
    size_t ndegraded;
} sandbox_landlock_plan;

/*
 * The ABI the kernel offers: *out >= 1, or 0 with the reason in `err`
 * (Landlock not built in, or disabled at boot). `cap` >= 0 lowers the
 * answer to at most `cap`, to simulate an older kernel in tests; it can
 * never raise it. Returns 0; the probe itself cannot fail.
 */
int sandbox_landlock_probe(int *out, int cap, rg_error *err);

/*
 * Decide what to enforce at `abi` given the losses in `accept`: fills *out
 * and returns 0, or returns RG_E_DENIED with every reason to refuse (and the
 * option that overrides it) in `err`. Pure: no system calls.
 */
int sandbox_landlock_plan_make(sandbox_landlock_plan *out, int abi, unsigned accept, rg_error *err);

typedef struct sandbox_landlock sandbox_landlock;

/*
 * A ruleset for `plan` (copied). When the plan does not enforce, the rule
 * functions below do nothing and succeed.
 */
int sandbox_landlock_new(sandbox_landlock **out, const sandbox_landlock_plan *plan, rg_error *err);

/*
 * Called for every rule added, with the path and a short description of
 * the rights ("read", "write", "device"), so a verbose caller can list them.
 */
void sandbox_landlock_set_trace(sandbox_landlock *ll,
                                void (*trace)(void *ctx, const char *path, const char *what),
                                void *ctx);

/*
 * Grant `access` on canonical `path` and everything below it. A file gets
 * the rights that apply to files. Symlinks are not followed: a path that is
 * a symlink is refused (or skipped when OPTIONAL).
 */
int sandbox_landlock_allow(sandbox_landlock *ll, const char *path, unsigned access, rg_error *err);

/*
 * Grant read on everything reachable from / except the canonical paths in
 * `hidden` and `skip`: walking down from / towards each hidden path, every
 * entry that is neither hidden, nor skipped, nor on the way to a hidden
 * path is granted as a whole; the directories on the way are not (they
 * cannot be listed, only traversed). Symlinks met on the way are never
 * followed, so none can lead a grant into a hidden path.
 */
int sandbox_landlock_allow_all_except(sandbox_landlock *ll, const char *const *hidden,
                                      size_t nhidden, const char *const *skip, size_t nskip,
                                      rg_error *err);

/* The number of rules added so far. */
size_t sandbox_landlock_count(const sandbox_landlock *ll);

/*
 * Restrict the calling process (and what it will exec) to the ruleset.
 * Needs no_new_privs set first. Meant for the child just before exec.
 */
int sandbox_landlock_enforce(sandbox_landlock *ll, rg_error *err);

void sandbox_landlock_free(sandbox_landlock *ll);

#endif
