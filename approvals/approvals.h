/*
 * Approvals: what turns a rule's `ask` into a push that can land. A push
 * whose ref a rule asks about creates (or finds) a pending approval for
 * exactly that update — (repo, ref, old, new) — and is refused with its
 * id; a reviewer approves or denies it through the running gateway
 * (`refgate approve ID`); the same update pushed again then passes, once:
 * the approval is consumed when upstream took the ref. A different new
 * commit is another update and needs another approval.
 *
 * The approvals live in a store behind an ops table (store_ops.h): the file
 * store under <state_dir>/approvals/ today; a shared database can be added
 * behind the same interface. Only the gateway opens the store (it holds
 * the store's lock, as it holds the audit log's); the CLI goes through the
 * gateway's control socket.
 *
 * Invariants any store keeps:
 * - one live approval per (repo, ref, old, new): a repeated push finds it;
 * - an approval past its `expires` is no approval: it is refused like none,
 *   never returned as live, and removed when seen;
 * - state moves pending -> approved | denied, approved -> denied (revoked),
 *   and an approved one is removed when consumed; nothing else;
 * - an approval is consumed at most once, even by pushes of the same
 *   update through several gateways at once: a push claims it (one holder
 *   at a time) before it forwards, consumes it when upstream took the ref
 *   and gives the claim back otherwise; a claim its holder never settles
 *   (the gateway died) lapses after APPROVALS_CLAIM_SECONDS;
 * - a pending approval may keep the pack of the push that asked (what a
 *   reviewer looks at); the pack goes when the approval is denied,
 *   consumed or expires, and the store says how many bytes went;
 * - every change is durable when the call returns 0;
 * - ids are APPROVALS_ID_LEN characters of [a-z2-7] (50 random bits):
 *   short enough to type, too many to guess.
 * Every op is thread-safe (the gateway's request threads and its control
 * thread share one store). `now` is the caller's clock (Unix seconds), so
 * expiry is tested without waiting.
 */
#ifndef RG_APPROVALS_APPROVALS_H
#define RG_APPROVALS_APPROVALS_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define APPROVALS_ID_LEN   10
#define APPROVALS_REPO_MAX 512
#define APPROVALS_REF_MAX  1024
#define APPROVALS_OID_MAX  64
#define APPROVALS_NAME_MAX 256
#define APPROVALS_TEXT_MAX 600

/* Live approvals a store holds at most; past it new requests are refused. */
#define APPROVALS_LIVE_MAX 4096

/* Who holds a claim: the gateway and the push ("<gateway id>:<push id>"). */
#define APPROVALS_HOLDER_MAX 64

/* How long a claim holds when its holder never settles it: longer than a
 * forwarded push takes (it is given back or consumed when the push ends). */
#define APPROVALS_CLAIM_SECONDS 600

typedef enum approvals_state {
    APPROVALS_PENDING = 1,
    APPROVALS_APPROVED,
    APPROVALS_DENIED,
} approvals_state;

/* The update an approval is for. Strings are borrowed for the call. */
typedef struct approvals_key {
    const char *repo;   /* HOST/PATH, as routing names it */
    const char *ref;    /* the full ref name as pushed */
    const char *old_id; /* hex */
    const char *new_id; /* hex */
} approvals_key;

/* What a push that asks tells the reviewer; strings borrowed, may be NULL. */
typedef struct approvals_ask_info {
    const char *run;    /* the pushing run's name */
    const char *rule;   /* the rule that asks */
    const char *reason; /* its reason, as the pusher is told it */
} approvals_ask_info;

/* One approval, by value (texts cut to their buffers). */
typedef struct approvals_entry {
    char id[APPROVALS_ID_LEN + 1];
    approvals_state state;
    char repo[APPROVALS_REPO_MAX + 1];
    char ref[APPROVALS_REF_MAX + 1];
    char old_id[APPROVALS_OID_MAX + 1];
    char new_id[APPROVALS_OID_MAX + 1];
    char run[APPROVALS_NAME_MAX];
    char rule[APPROVALS_NAME_MAX];
    char reason[APPROVALS_TEXT_MAX];
    char by[APPROVALS_NAME_MAX];      /* who approved or denied it; empty while pending */
    char note[APPROVALS_TEXT_MAX];    /* a denial's reason; may be empty */
    int64_t created;                  /* Unix seconds */
    int64_t decided;                  /* 0 while pending */
    int64_t expires;                  /* pending: created + expire; decided: decided + expire */
    uint64_t pack_bytes;              /* the kept pack's size; 0: none kept */
    char claim[APPROVALS_HOLDER_MAX]; /* an approved one a push is forwarding; "" for none */
    int64_t claim_until;              /* when that claim lapses */
} approvals_entry;

typedef struct approvals_store approvals_store;

/*
 * Open (creating it, 0700) the file store in `dir`; approvals expire
 * `expire_seconds` (> 0) after they are created or decided. Holds an
 * exclusive flock on `dir`/lock until approvals_close: a second open fails
 * with -EBUSY. Files that do not parse are left alone and not loaded
 * (an approval that cannot be read grants nothing).
 */
int approvals_file_open(approvals_store **out, const char *dir, int64_t expire_seconds,
                        rg_error *err);

/*
 * Open the PostgreSQL store over `db` (the schema migrated: db/pool.h);
 * approvals expire `expire_seconds` (> 0) after they are created or
 * decided. Every gateway on the database opens one; approvals are rows of
 * `approvals` that stay as history (pending, approved, denied, expired,
 * consumed), kept packs rows of `approval_packs`. Nothing is cached: each
 * call asks the database, so a decision made through any gateway is seen
 * by all. While the database cannot be reached every call fails with
 * RG_E_STATE (and a push that asks is refused). `db` must outlive it.
 */
struct db_pool;
int approvals_pg_open(approvals_store **out, struct db_pool *db, int64_t expire_seconds,
                      rg_error *err);

/*
 * `refgate db import`: add `e` (a live approval read from a file store) to
 * the PostgreSQL store `s` as it is, id, state and times included. -EEXIST
 * when the id is taken or the update already has a live approval there,
 * -EINVAL when `s` is not a PostgreSQL store.
 */
int approvals_pg_import(approvals_store *s, const approvals_entry *e, rg_error *err);

/*
 * The live approval for `key`, or a new pending one made with `info`.
 * *out gets it; its state says what the push may do. *created (may be
 * NULL) is 1 when it was made by this call. -ENOSPC past
 * APPROVALS_LIVE_MAX, -EINVAL for a key that does not fit an entry.
 */
int approvals_ask(approvals_store *s, approvals_entry *out, int *created, const approvals_key *key,
                  const approvals_ask_info *info, int64_t now, rg_error *err);

/* The live approval `id`: -ENOENT when there is none, -ETIME when it expired. */
int approvals_get(approvals_store *s, approvals_entry *out, const char *id, int64_t now,
                  rg_error *err);

/*
 * Every live approval, oldest first, in a new array the caller frees
 * (*out NULL when there are none). Expired ones are removed on the way.
 */
int approvals_list(approvals_store *s, approvals_entry **out, size_t *n, int64_t now,
                   rg_error *err);

/*
 * Approve pending `id`, as `by`; its expiry restarts from now. -ENOENT,
 * -ETIME (expired), -EALREADY (already decided: the message says how and
 * by whom). *out (may be NULL) gets the approved entry.
 */
int approvals_approve(approvals_store *s, approvals_entry *out, const char *id, const char *by,
                      int64_t now, rg_error *err);

/*
 * Deny `id`, pending or approved (a revocation), as `by`, with an optional
 * `note`. A denied approval stays until it expires, so the same update
 * pushed again is refused with the denial rather than asking again.
 * -ENOENT, -ETIME, -EALREADY (already denied).
 */
int approvals_deny(approvals_store *s, approvals_entry *out, const char *id, const char *by,
                   const char *note, int64_t now, rg_error *err);

/*
 * Claim approved `id` for `holder` (at most APPROVALS_HOLDER_MAX - 1
 * bytes) before forwarding `key` on its strength: one atomic step, so of
 * several pushes claiming at once exactly one succeeds. Claiming again
 * with the same holder renews the claim. *out (may be NULL) gets the
 * entry. -ENOENT when `id` is not a live approval of exactly `key`,
 * -EBUSY when another holder's claim has not lapsed.
 */
int approvals_claim(approvals_store *s, approvals_entry *out, const char *id,
                    const approvals_key *key, const char *holder, int64_t now, rg_error *err);

/* Give back `holder`'s claim on `id` (the push did not land); -ENOENT when it holds none. */
int approvals_unclaim(approvals_store *s, const char *id, const char *holder, rg_error *err);

/*
 * The approved update `key` landed: remove approval `id`, which `holder`
 * claimed. -ENOENT when it is gone, not approved for exactly `key`, or
 * not claimed by `holder` (then nothing changes): a consume succeeds once.
 */
int approvals_consume(approvals_store *s, const char *id, const approvals_key *key,
                      const char *holder, int64_t now, rg_error *err);

/*
 * Keep the pack of pending approval `id` so a reviewer can see what would
 * land: `len` bytes of `fd` from offset 0, written durably. The pack goes
 * when its approval does, and when it is denied. -ENOENT when `id` is not
 * pending, -EEXIST when it has a pack already.
 */
int approvals_keep_pack(approvals_store *s, const char *id, int fd, uint64_t len, int64_t now,
                        rg_error *err);

/* A new read-only descriptor of `id`'s kept pack; -ENOENT when none is kept. */
int approvals_open_pack(int *fd_out, approvals_store *s, const char *id, int64_t now,
                        rg_error *err);

/*
 * The bytes all kept packs take, as loaded or kept since (the PostgreSQL
 * store: all gateways' kept packs in the database; UINT64_MAX when it
 * cannot be asked, so no pack is kept).
 */
uint64_t approvals_pack_total(approvals_store *s);

/*
 * Whether kept packs are on this machine's disk (the file store), so the
 * gateway charges them to its spool budget until they are released; the
 * PostgreSQL store keeps them in the database and never calls the
 * release callback.
 */
int approvals_packs_local(const approvals_store *s);

/*
 * Have `fn(arg, bytes)` called (under the store's lock, so it must not call
 * the store) whenever kept packs are removed, with their size: the gateway
 * gives the bytes back to its spool budget.
 */
typedef void (*approvals_release_fn)(void *arg, uint64_t bytes);
void approvals_on_release(approvals_store *s, approvals_release_fn fn, void *arg);

/* Remove every approval expired at `now`; *removed (may be NULL) gets how many. */
int approvals_expire(approvals_store *s, size_t *removed, int64_t now, rg_error *err);

void approvals_close(approvals_store *s);

/* "pending", "approved", "denied"; "unknown" otherwise. */
const char *approvals_state_name(approvals_state st);

/* Whether `id` has the shape of an approval id (checked before any lookup). */
int approvals_id_ok(const char *id);

#endif
