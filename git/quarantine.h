/*
 * Pack inspection. A pushed pack is indexed (by git index-pack, in a child
 * that can be killed) into a private quarantine directory, with the
 * upstream repository's objects available read-only to resolve thin-pack
 * deltas, so that questions such as "is the old commit an ancestor of the
 * new one?" can be answered with libgit2 before anything reaches upstream.
 * Nothing is ever written into the upstream repository.
 *
 * Content conditions (git/inspect.h: every object of the pack, the commits
 * of each update) ask their questions through this same object.
 */
#ifndef RG_GIT_QUARANTINE_H
#define RG_GIT_QUARANTINE_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/error.h"

typedef struct rgit_quarantine rgit_quarantine;

/*
 * Create a quarantine under `tmp_parent` (a fresh directory inside it) for a
 * push to the bare repository `upstream_gitdir`. `oid_hexlen` is 40 or 64
 * (SHA-256 questions are answered by git, which libgit2 1.5 cannot read).
 * Writing to the indexer after it gave up raises SIGPIPE: callers ignore
 * that signal.
 */
int rgit_quarantine_new(rgit_quarantine **out, const char *upstream_gitdir, const char *tmp_parent,
                        size_t oid_hexlen, rg_error *err);

/* Stream the next bytes of the pack into the indexer. */
int rgit_quarantine_write(rgit_quarantine *q, const void *data, size_t len, rg_error *err);

/* The pack is complete: finish indexing (resolving thin deltas). */
int rgit_quarantine_finish(rgit_quarantine *q, rg_error *err);

/*
 * *out = 1 when `ancestor_hex` is `descendant_hex` or one of its ancestors,
 * 0 when it is not. Both must name commits in the upstream or the pack;
 * when either is missing or not a commit, returns RG_E_PROTOCOL, so the
 * caller can treat the update as a force (fail closed).
 */
int rgit_quarantine_is_ancestor(int *out, rgit_quarantine *q, const char *ancestor_hex,
                                const char *descendant_hex, rg_error *err);

/*
 * *out = 1 when anything at or under the directory `prefix` (such as
 * ".github/workflows/") differs between the tree of commit `old_hex` and
 * that of commit `new_hex`, 0 when it is identical. Only the two endpoints
 * are compared, not each commit in between: a change made and reverted
 * within the push is no change. `old_hex` NULL compares against the
 * upstream repository's HEAD commit, or against an empty tree when the
 * upstream has none (an unborn HEAD). A commit that is missing or not a
 * commit gives RG_E_PROTOCOL, so the caller can fail closed; a prefix that
 * is not a plain relative path gives -EINVAL.
 */
int rgit_quarantine_changes_prefix(int *out, rgit_quarantine *q, const char *old_hex,
                                   const char *new_hex, const char *prefix, rg_error *err);

/*
 * For content inspection (git/inspect.c), once finished: the read-only
 * repository over the upstream's objects and the pack (NULL for SHA-256,
 * which libgit2 1.5 cannot read), the pack's index file, and the upstream
 * git directory. Valid while `q` is.
 */
struct git_repository;
struct git_repository *rgit_quarantine_repository(const rgit_quarantine *q);
const char *rgit_quarantine_pack_index(const rgit_quarantine *q);
const char *rgit_quarantine_upstream(const rgit_quarantine *q);
/* The quarantine's private directory (0700): scratch space for its questions. */
const char *rgit_quarantine_dir(const rgit_quarantine *q);

/*
 * Run a read-only git command (`args` after `git --git-dir=<upstream>`, at
 * most 13) over the upstream with the pack's objects as an alternate, in
 * the gateway's git environment plus `config` (key, value pairs ending in
 * NULL; may be NULL) and GNUPGHOME `gnupg_home` (may be NULL), killed at
 * `deadline` (rg_proc_deadline). Its stdout goes to `out` (may be NULL).
 */
int rgit_quarantine_run_git(int *status, rg_buf *out, rgit_quarantine *q, const char *const *args,
                            const char *const *config, const char *gnupg_home, int64_t deadline,
                            rg_error *err);

/*
 * Stream the content of object `id_hex` of type `type` ("blob", "commit",
 * "tag") to `sink(ctx, ...)` in chunks, from `git cat-file` in a child, so
 * an object of any size costs fixed memory. RG_E_PROTOCOL when git fails;
 * a sink's negative return is returned.
 */
int rgit_quarantine_stream_object(rgit_quarantine *q, const char *type, const char *id_hex,
                                  int (*sink)(void *ctx, const char *data, size_t len,
                                              rg_error *err),
                                  void *ctx, int64_t deadline, rg_error *err);

/*
 * What `new_hex` brings: the commits reachable from it but not from
 * `old_hex` (NULL: from no ref of the upstream), newest first, at most
 * `max`, appended to `out` one a line as "<id> TAB <author date, ISO 8601>
 * TAB <author name> TAB <subject>" (name and subject cut to 80 and 200
 * characters and padded with spaces, which callers trim). `new_hex` must
 * name a commit in the upstream or the pack (RG_E_PROTOCOL if not).
 */
int rgit_quarantine_log(rg_buf *out, rgit_quarantine *q, const char *old_hex, const char *new_hex,
                        unsigned max, rg_error *err);

/* Remove the quarantine directory and free. Accepts NULL. */
void rgit_quarantine_free(rgit_quarantine *q);

#endif
