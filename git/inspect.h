/*
 * Reading what a quarantined push brings, for content conditions: every
 * object of the pushed pack (referenced or not: an unreferenced blob lands
 * upstream too), and, per ref update, the commits it introduces with their
 * identities, messages and changed paths. Read-only, over the quarantine's
 * libgit2 repository (the upstream's objects and the pack as alternates).
 *
 * Bounded: everything runs against one budget of inflated object bytes and
 * wall time. An object whose size would pass the byte budget is not read,
 * and the deadline is checked between objects and commits; past either the
 * call fails with RG_E_TOO_BIG and a message saying which budget, so the
 * caller fails closed. A zlib or delta bomb costs at most the budget, since
 * an object's inflated size is read from its header before its data.
 *
 * SHA-1 only (libgit2 1.5): for SHA-256 every call fails with RG_E_PROTOCOL.
 */
#ifndef RG_GIT_INSPECT_H
#define RG_GIT_INSPECT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "git/quarantine.h"
#include "util/error.h"

typedef struct rgit_inspect_budget {
    uint64_t bytes_left;      /* inflated bytes still to be read */
    uint64_t bytes_max;       /* for the message */
    unsigned seconds;         /* for the message */
    struct timespec deadline; /* CLOCK_MONOTONIC */
} rgit_inspect_budget;

/* A budget of `bytes` inflated bytes and `seconds` from now. */
void rgit_inspect_budget_init(rgit_inspect_budget *out, uint64_t bytes, unsigned seconds);

typedef enum rgit_inspect_type {
    RGIT_INSPECT_COMMIT = 1,
    RGIT_INSPECT_TREE = 2,
    RGIT_INSPECT_BLOB = 3,
    RGIT_INSPECT_TAG = 4,
} rgit_inspect_type;

typedef struct rgit_inspect_object {
    char id[41];
    rgit_inspect_type type;
    uint64_t size; /* inflated */
} rgit_inspect_object;

/*
 * What a walk over the pack's objects calls: `object` for each (nonzero
 * stops the walk), then, when `data` is set, the content of each blob,
 * commit and tag in chunks (a negative return fails the walk, with `err`
 * set) and `end` after the last chunk (likewise). Trees are never read.
 */
typedef struct rgit_inspect_object_fns {
    int (*object)(const rgit_inspect_object *o, void *arg);
    int (*data)(const rgit_inspect_object *o, const void *data, size_t len, void *arg,
                rg_error *err);
    int (*end)(const rgit_inspect_object *o, void *arg, rg_error *err);
    void *arg;
} rgit_inspect_object_fns;

/* Objects larger than this are streamed from a `git cat-file` child rather than held in memory. */
#define RGIT_INSPECT_INLINE_MAX ((uint64_t)32 << 20)

/*
 * Every object of the pushed pack that the upstream does not already hold
 * (a thin pack's bases, completed into the pack, are upstream's), in pack
 * order. Content read is charged to the budget before it is read.
 */
int rgit_inspect_objects(rgit_quarantine *q, const rgit_inspect_object_fns *fns,
                         rgit_inspect_budget *b, rg_error *err);

typedef struct rgit_inspect_commit {
    char id[41];
    const char *author_email;
    const char *committer_email;
    const char *message;
    size_t nparents;
} rgit_inspect_commit;

/* A path a commit changes against one of its parents (or, for a root commit, adds). */
typedef struct rgit_inspect_path {
    const char *path;
    char blob[41]; /* its new content's id; "" when the change deletes it */
} rgit_inspect_path;

typedef struct rgit_inspect_range_fns {
    int (*commit)(const rgit_inspect_commit *c, void *arg);
    int (*path)(const rgit_inspect_commit *c, const rgit_inspect_path *p,
                void *arg); /* NULL: no diffs */
    void *arg;
} rgit_inspect_range_fns;

/*
 * The commits an update introduces: `new_hex` not reachable from
 * `old_hex`, or, for a create (`old_hex` NULL), from any ref of the
 * upstream (as GitHub rulesets count them). A merge's paths are those it
 * changes against each parent. A new id that is no commit (a tag of a
 * blob) introduces none. Callbacks return 0 to go on, nonzero to stop.
 */
int rgit_inspect_range(rgit_quarantine *q, const char *old_hex, const char *new_hex,
                       const rgit_inspect_range_fns *fns, rgit_inspect_budget *b, rg_error *err);

/* The keys a signature must verify against; either may be NULL. */
typedef struct rgit_inspect_signing {
    const char *allowed_signers; /* SSH: git's gpg.ssh.allowedSignersFile */
    const char *gpg_keyring;     /* OpenPGP: a keyring file (gpg --export) */
} rgit_inspect_signing;

/*
 * For each commit of the same range as rgit_inspect_range, whether its
 * signature verifies against `keys` only: `fn(id, verified, letter, arg)`,
 * with git's %G? letter (N no signature, G good, U a key not among the
 * allowed signers, B bad, E cannot be checked, X/Y/R expired or revoked).
 * Only G counts. One `git log` child does it, with gpg.ssh.allowedSignersFile
 * set and GNUPGHOME a fresh private home holding only `keys.gpg_keyring`
 * (every key there trusted, so a key the pusher made and signed with
 * itself is unknown to it); nothing else of the machine's keys is seen.
 * Within the budget's deadline; `fn` returns nonzero to stop.
 */
int rgit_inspect_signatures(rgit_quarantine *q, const char *old_hex, const char *new_hex,
                            const rgit_inspect_signing *keys,
                            int (*fn)(const char *id, int verified, char letter, void *arg),
                            void *arg, rgit_inspect_budget *b, rg_error *err);

#endif
