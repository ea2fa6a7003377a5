/*
 * Directory diff: what a sandboxed run changed in its fork, as a patch that
 * `git apply` applies to the original directory.
 *
 * refgate-run forks DIR into DIR.<N> and keeps .DIR.<N>.base beside it (DIR
 * as it was at the fork). Both are read here as plain directories, never as
 * repositories: every file is read with open(O_NOFOLLOW), symlinks are read
 * with readlink and never followed, only regular files, symlinks and
 * directories count (a FIFO or device is treated as absent), and `.git` is
 * skipped at every level (with its case and NTFS variants). Nothing from the
 * fork's .git -- config, hooks, attributes -- is ever read, and no git
 * program is ever run, so nothing the run wrote there can execute.
 *
 * Which paths are hidden is decided by the base alone: its .gitignore files
 * (nested ones too), its .git/info/exclude, and its .git/index (a tracked
 * file stays visible even when a rule matches it, as in git). The same rules
 * apply to both trees, so a run cannot hide a change by editing .gitignore;
 * the user's global excludes file is not used, so the result does not depend
 * on who runs the diff.
 *
 * The changed paths become two small git trees in a private object database
 * (in memory; blobs are read back from the directories on demand and checked
 * against their ids). Files that are byte-for-byte identical on both sides
 * are left out of both trees without being hashed, which is what keeps a
 * large tree fast; modification times are never trusted. libgit2 then diffs
 * the trees without rename detection, so a type change prints as a deletion
 * and an addition, exactly as git does.
 *
 * Files larger than opts->max_file_size (apparent size, so a sparse file
 * counts by the size it claims) are never read: they are listed as
 * skipped, whether or not they changed, and never applied.
 *
 * The digest binds a review to an apply: it is a SHA-256 over the patch
 * and the skipped list, so `--apply --digest` applies only a diff that is
 * byte for byte what was shown. Apply writes blobs read back through the
 * object database and checked against their ids, so once the digest
 * matched, what is written is what was hashed, whatever changes after.
 */
#ifndef RG_REVIEW_DIRDIFF_H
#define RG_REVIEW_DIRDIFF_H

#include <stddef.h>

#include "util/buf.h"
#include "util/error.h"

typedef struct review_dirdiff review_dirdiff;

typedef struct review_dirdiff_opts {
    /* Parent of the short-lived private repository that holds the ignore
     * machinery's state; NULL: $TMPDIR, else /tmp. Never the base or fork. */
    const char *tmp_parent;
    /* Deepest directory nesting read before failing; 0: 256. */
    unsigned int max_depth;
    /* Larger files are skipped, not read; 0: REVIEW_DIRDIFF_MAX_FILE_SIZE. */
    unsigned long long max_file_size;
    /* Paths left out of both sides, with everything below them: `excluded`
     * holds `excluded_len` bytes of NUL-terminated relative paths (what
     * refgate-run excluded from the fork; review_dirdiff_default_excluded).
     * Not copied: it must outlive review_dirdiff_new only. */
    const char *excluded;
    size_t excluded_len;
} review_dirdiff_opts;

#define REVIEW_DIRDIFF_OPTS_INIT                                                                   \
    {                                                                                              \
        NULL, 0, 0, NULL, 0                                                                        \
    }

#define REVIEW_DIRDIFF_MAX_FILE_SIZE (64ULL << 20)

/* "sha256:" and 64 hex digits, with the NUL. */
#define REVIEW_DIRDIFF_DIGEST_SIZE 72

typedef enum review_dirdiff_status {
    REVIEW_DIRDIFF_ADDED = 'A',
    REVIEW_DIRDIFF_DELETED = 'D',
    REVIEW_DIRDIFF_MODIFIED = 'M', /* content, mode or both */
} review_dirdiff_status;

/* One changed path. Modes are git's: 0100644, 0100755 or 0120000, 0 absent. */
typedef struct review_dirdiff_change {
    const char *path; /* '/'-separated, relative; owned by the diff */
    review_dirdiff_status status;
    unsigned int old_mode;
    unsigned int new_mode;
} review_dirdiff_change;

/*
 * Compare the directory `base` (the fork point) with `fork` and keep the
 * result in *out (free with review_dirdiff_free). `opts` may be NULL. Fails
 * with a message naming the path when a file cannot be read, a directory is
 * nested deeper than opts->max_depth, or base and fork are the same.
 */
int review_dirdiff_new(review_dirdiff **out, const char *base, const char *fork,
                       const review_dirdiff_opts *opts, rg_error *err);

/* Number of changed paths; a type change counts twice (delete + add). */
size_t review_dirdiff_count(const review_dirdiff *d);

/* The i-th change in path order; -ERANGE when i >= count. */
int review_dirdiff_get(review_dirdiff_change *out, const review_dirdiff *d, size_t i);

/* A file left out for its size: sizes in bytes, -1 on a side without it. */
typedef struct review_dirdiff_skipped {
    const char *path; /* owned by the diff */
    long long base_size;
    long long fork_size;
} review_dirdiff_skipped;

/* Number of skipped files, and the i-th in walk order (-ERANGE past). */
size_t review_dirdiff_skipped_count(const review_dirdiff *d);
int review_dirdiff_skipped_get(review_dirdiff_skipped *out, const review_dirdiff *d, size_t i);

/*
 * Receives the patch in pieces, in order. Return 0 to go on; anything else
 * stops the printing and is returned by review_dirdiff_print.
 */
typedef int (*review_dirdiff_write_fn)(const void *data, size_t len, void *payload);

/*
 * Write the patch: `diff --git a/<path> b/<path>` sections with modes,
 * symlinks as links and binary files as git binary patches, so that
 * `git apply` reproduces the fork from a copy of the base. Nothing is
 * written when there are no changes.
 */
int review_dirdiff_print(review_dirdiff *d, review_dirdiff_write_fn write, void *payload,
                         rg_error *err);

/*
 * Like review_dirdiff_print (`write` may be NULL: digest only), and put the
 * digest of the patch and the skipped list in `digest` ("sha256:<hex>").
 */
int review_dirdiff_print_digest(review_dirdiff *d, review_dirdiff_write_fn write, void *payload,
                                char digest[REVIEW_DIRDIFF_DIGEST_SIZE], rg_error *err);

/* The same patch appended to `out` (which keeps its cap). */
int review_dirdiff_patch(rg_buf *out, review_dirdiff *d, rg_error *err);

/* A `git diff --stat --summary` style summary, `width` columns (0: 80). */
int review_dirdiff_stat(rg_buf *out, review_dirdiff *d, size_t width, rg_error *err);

typedef enum review_dirdiff_outcome {
    REVIEW_DIRDIFF_APPLIED, /* the original now has the fork's version */
    REVIEW_DIRDIFF_ALREADY, /* the original already had the fork's version */
    REVIEW_DIRDIFF_REFUSED, /* the original changed since the fork: left alone */
} review_dirdiff_outcome;

/* Told the outcome of each path as it is decided; `reason` is NULL unless
 * refused. */
typedef void (*review_dirdiff_apply_fn)(const char *path, review_dirdiff_outcome outcome,
                                        const char *reason, void *payload);

/*
 * Apply the changes to the directory `original` by writing files directly
 * (never through git, never through a symlink, never inside .git). Each
 * path is applied only when the original still has exactly what the base
 * has there (type, executable bit and content); otherwise it is refused and
 * the rest go on. Deletions come first so type changes work; directories
 * left empty by a deletion are removed, as git apply does. Each file is
 * replaced by rename, so a reader sees the old or the new file. *refused
 * gets the number of refused paths; skipped files (too large to show) are
 * all refused. A filesystem error stops the run
 * (paths already reported as applied stay applied) and returns negative.
 */
int review_dirdiff_apply(size_t *refused, review_dirdiff *d, const char *original,
                         review_dirdiff_apply_fn report, void *payload, rg_error *err);

/* Free the diff and remove its private repository. Accepts NULL. */
void review_dirdiff_free(review_dirdiff *d);

/*
 * refgate-run's naming: the base of FORK is `<dirname FORK>/.<basename
 * FORK>.base` and the original is FORK without its trailing `.<N>`. Trailing
 * slashes of `fork` are ignored. Appends to `out`; the original fails with
 * -EINVAL when FORK does not end in `.<digits>`.
 */
int review_dirdiff_default_base(rg_buf *out, const char *fork, rg_error *err);
int review_dirdiff_default_original(rg_buf *out, const char *fork, rg_error *err);

/*
 * Whether the run that made FORK is still alive. refgate-run holds an
 * exclusive flock on `<dirname FORK>/.<basename FORK>.run` for the run's
 * whole life (and, with a pid namespace, every process of the run is dead
 * before it lets go). RG_E_DENIED while it is held; 0 when free or absent
 * (a fork made before the marker existed, or not by refgate-run).
 */
int review_dirdiff_check_run(const char *fork, rg_error *err);

/*
 * What refgate-run left out of FORK (--exclude): the NUL-terminated paths
 * recorded in `<dirname FORK>/.<basename FORK>.excluded`, appended to `out`
 * (nothing when there is no record). The record lies outside the fork, where
 * the run could not write. RG_E_TAMPER for a record that is not one.
 */
int review_dirdiff_default_excluded(rg_buf *out, const char *fork, rg_error *err);

#endif
