/*
 * The store-independent part of approvals (approvals.h): argument checks
 * before a store is called, and the names of states.
 */
#include "approvals/store_ops.h"

#include <string.h>

#define ID_ALPHABET "abcdefghijklmnopqrstuvwxyz234567"

const char *approvals_state_name(approvals_state st)
{
    switch (st) {
    case APPROVALS_PENDING:
        return "pending";
    case APPROVALS_APPROVED:
        return "approved";
    case APPROVALS_DENIED:
        return "denied";
    }
    return "unknown";
}

int approvals_id_ok(const char *id)
{
    return id != NULL && strlen(id) == APPROVALS_ID_LEN &&
           strspn(id, ID_ALPHABET) == APPROVALS_ID_LEN;
}

/* What a malformed id is told: it is not echoed (it may be anything). */
static int bad_id(rg_error *err)
{
    return rg_error_set(err, -ENOENT,
                        "not an approval id: ids are %d characters of a-z and 2-7 (see "
                        "`refgate approvals`)",
                        APPROVALS_ID_LEN);
}

/* A key that fits an entry: every part present and within its buffer, ids hex. */
static int key_check(const approvals_key *key, rg_error *err)
{
    if (key == NULL || key->repo == NULL || key->ref == NULL || key->old_id == NULL ||
        key->new_id == NULL || key->repo[0] == '\0' || key->ref[0] == '\0')
        return rg_error_set(err, -EINVAL, "an approval needs a repo, a ref and both ids");
    if (strlen(key->repo) > APPROVALS_REPO_MAX || strlen(key->ref) > APPROVALS_REF_MAX)
        return rg_error_set(err, -EINVAL,
                            "the repo or ref name is too long for an approval (at most %d and %d "
                            "bytes)",
                            APPROVALS_REPO_MAX, APPROVALS_REF_MAX);
    if (strlen(key->old_id) > APPROVALS_OID_MAX || strlen(key->new_id) > APPROVALS_OID_MAX ||
        strspn(key->old_id, "0123456789abcdef") != strlen(key->old_id) ||
        strspn(key->new_id, "0123456789abcdef") != strlen(key->new_id))
        return rg_error_set(err, -EINVAL, "an approval's object ids are lowercase hex");
    return 0;
}

int approvals_ask(approvals_store *s, approvals_entry *out, int *created, const approvals_key *key,
                  const approvals_ask_info *info, int64_t now, rg_error *err)
{
    static const approvals_ask_info none = {0};
    int rc = key_check(key, err);

    if (created)
        *created = 0;
    if (rc < 0)
        return rc;
    return s->ops->ask(s, out, created, key, info ? info : &none, now, err);
}

int approvals_get(approvals_store *s, approvals_entry *out, const char *id, int64_t now,
                  rg_error *err)
{
    if (!approvals_id_ok(id))
        return bad_id(err);
    return s->ops->get(s, out, id, now, err);
}

int approvals_list(approvals_store *s, approvals_entry **out, size_t *n, int64_t now, rg_error *err)
{
    *out = NULL;
    *n = 0;
    return s->ops->list(s, out, n, now, err);
}

int approvals_approve(approvals_store *s, approvals_entry *out, const char *id, const char *by,
                      int64_t now, rg_error *err)
{
    if (!approvals_id_ok(id))
        return bad_id(err);
    return s->ops->decide(s, out, id, 0, by ? by : "", NULL, now, err);
}

int approvals_deny(approvals_store *s, approvals_entry *out, const char *id, const char *by,
                   const char *note, int64_t now, rg_error *err)
{
    if (!approvals_id_ok(id))
        return bad_id(err);
    return s->ops->decide(s, out, id, 1, by ? by : "", note, now, err);
}

/* A claim's holder: present, short enough to store, printable. */
static int holder_check(const char *holder, rg_error *err)
{
    size_t len = holder ? strlen(holder) : 0;

    if (len == 0 || len >= APPROVALS_HOLDER_MAX)
        return rg_error_set(err, -EINVAL, "a claim needs a holder of 1 to %d bytes",
                            APPROVALS_HOLDER_MAX - 1);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)holder[i] <= 0x20 || (unsigned char)holder[i] >= 0x7f)
            return rg_error_set(err, -EINVAL, "a claim's holder is printable ASCII");
    return 0;
}

int approvals_claim(approvals_store *s, approvals_entry *out, const char *id,
                    const approvals_key *key, const char *holder, int64_t now, rg_error *err)
{
    approvals_entry e;
    int rc;

    if (!approvals_id_ok(id))
        return bad_id(err);
    if ((rc = key_check(key, err)) < 0 || (rc = holder_check(holder, err)) < 0)
        return rc;
    return s->ops->claim(s, out ? out : &e, id, key, holder, now, err);
}

int approvals_unclaim(approvals_store *s, const char *id, const char *holder, rg_error *err)
{
    int rc;

    if (!approvals_id_ok(id))
        return bad_id(err);
    rc = holder_check(holder, err);
    return rc < 0 ? rc : s->ops->unclaim(s, id, holder, err);
}

int approvals_consume(approvals_store *s, const char *id, const approvals_key *key,
                      const char *holder, int64_t now, rg_error *err)
{
    int rc;

    if (!approvals_id_ok(id))
        return bad_id(err);
    if ((rc = key_check(key, err)) < 0 || (rc = holder_check(holder, err)) < 0)
        return rc;
    return s->ops->consume(s, id, key, holder, now, err);
}

int approvals_expire(approvals_store *s, size_t *removed, int64_t now, rg_error *err)
{
    if (removed)
        *removed = 0;
    return s->ops->expire(s, removed, now, err);
}

int approvals_keep_pack(approvals_store *s, const char *id, int fd, uint64_t len, int64_t now,
                        rg_error *err)
{
    if (!approvals_id_ok(id))
        return bad_id(err);
    return s->ops->keep_pack(s, id, fd, len, now, err);
}

int approvals_open_pack(int *fd_out, approvals_store *s, const char *id, int64_t now, rg_error *err)
{
    *fd_out = -1;
    if (!approvals_id_ok(id))
        return bad_id(err);
    return s->ops->open_pack(fd_out, s, id, now, err);
}

uint64_t approvals_pack_total(approvals_store *s)
{
    return s->ops->pack_total(s);
}

int approvals_packs_local(const approvals_store *s)
{
    return s->ops->packs_local;
}

void approvals_on_release(approvals_store *s, approvals_release_fn fn, void *arg)
{
    s->released = fn;
    s->released_arg = arg;
}

void approvals_close(approvals_store *s)
{
    if (s != NULL)
        s->ops->close(s);
}

void approvals_text_copy(char *dst, size_t size, const char *s)
{
    size_t len = s ? strlen(s) : 0;

    if (len >= size) {
        len = size - 1;
        while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
            len--;
    }
    if (len)
        memcpy(dst, s, len);
    dst[len] = '\0';
}
