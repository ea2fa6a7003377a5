/*
 * Inside the approvals library: the ops table a store implements
 * (approvals.c checks ids and keys before calling them, so a store sees
 * only well-formed arguments). Not for use outside approvals/.
 */
#ifndef RG_APPROVALS_STORE_OPS_H
#define RG_APPROVALS_STORE_OPS_H

#include "approvals/approvals.h"

typedef struct approvals_store_ops {
    int (*ask)(approvals_store *s, approvals_entry *out, int *created, const approvals_key *key,
               const approvals_ask_info *info, int64_t now, rg_error *err);
    int (*get)(approvals_store *s, approvals_entry *out, const char *id, int64_t now,
               rg_error *err);
    int (*list)(approvals_store *s, approvals_entry **out, size_t *n, int64_t now, rg_error *err);
    /* Approve (deny 0) or deny (deny 1, with note) one approval. */
    int (*decide)(approvals_store *s, approvals_entry *out, const char *id, int deny,
                  const char *by, const char *note, int64_t now, rg_error *err);
    int (*claim)(approvals_store *s, approvals_entry *out, const char *id, const approvals_key *key,
                 const char *holder, int64_t now, rg_error *err);
    int (*unclaim)(approvals_store *s, const char *id, const char *holder, rg_error *err);
    int (*consume)(approvals_store *s, const char *id, const approvals_key *key, const char *holder,
                   int64_t now, rg_error *err);
    int (*expire)(approvals_store *s, size_t *removed, int64_t now, rg_error *err);
    int (*keep_pack)(approvals_store *s, const char *id, int fd, uint64_t len, int64_t now,
                     rg_error *err);
    int (*open_pack)(int *fd_out, approvals_store *s, const char *id, int64_t now, rg_error *err);
    uint64_t (*pack_total)(approvals_store *s);
    int packs_local; /* kept packs are on this machine's disk */
    void (*close)(approvals_store *s);
} approvals_store_ops;

/* Copy `s` (NULL: "") into dst (size > 0), cut on a UTF-8 character boundary. */
void approvals_text_copy(char *dst, size_t size, const char *s);

/* The head of every store's own struct, which embeds it first. */
struct approvals_store {
    const approvals_store_ops *ops;
    approvals_release_fn released; /* may be NULL */
    void *released_arg;
};

#endif
