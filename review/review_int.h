/*
 * What the files of review/ share behind review/dirdiff.h: the diff object,
 * the private object database, the walk's state and the helpers that read
 * files without following symlinks. Not for use outside review/.
 */
#ifndef REFGATE_REVIEW_REVIEW_INT_H
#define REFGATE_REVIEW_REVIEW_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include <git2.h>
#include <git2/sys/odb_backend.h>

#include "review/dirdiff.h"
#include "util/buf.h"
#include "util/error.h"

#define DD_DEFAULT_DEPTH 256
#define DD_PATH_MAX      (64 * 1024)  /* longest relative path walked */
#define DD_CHUNK         (256 * 1024) /* compare buffer, per side */
#define DD_READ_MAX      (8u << 20)   /* larger files are mapped to hash them */

#define DD_MODE_FILE 0100644u
#define DD_MODE_EXEC 0100755u
#define DD_MODE_LINK 0120000u
#define DD_MODE_TREE 0040000u

enum { DD_BASE = 0, DD_FORK = 1 };

/* What a directory entry is, as far as a diff cares. */
enum { DD_NONE, DD_REG, DD_LNK, DD_DIR };

/*
 * Trees live in memory; a blob is a reference to the file or symlink it was
 * hashed from (side + relative path), read again only when libgit2 needs
 * its content -- for a changed path, never for the thousands that are not.
 */
typedef struct dd_obj {
    git_oid id;
    git_object_t type;
    size_t size;
    int side; /* DD_BASE or DD_FORK for blobs, -1 for in-memory data */
    bool link;
    char *path;
    char *data;
} dd_obj;

typedef struct dd_store {
    git_odb_backend parent; /* first: libgit2 hands back this pointer */
    dd_obj *objs;
    size_t nobjs, capobjs;
    size_t *slots; /* open addressing: index + 1, 0 when empty */
    size_t nslots;
    int rootfd[2]; /* borrowed from the review_dirdiff */
} dd_store;

/* Reusable buffers so that 50,000 small files do not mean 50,000 mallocs. */
typedef struct dd_scratch {
    char *a, *b; /* DD_CHUNK each, for comparing */
    char *file;  /* whole small files, for hashing */
    size_t filecap;
} dd_scratch;

/* A file left out for its size (review_dirdiff_skipped, owning its path). */
typedef struct dd_skip {
    char *path;
    long long size[2]; /* -1: absent on that side */
} dd_skip;

struct review_dirdiff {
    dd_skip *skips; /* bounded by the files walked */
    size_t nskips, capskips;
    char *tmpdir;         /* the private repository; removed by free */
    git_repository *repo; /* owns the odb, which owns the store */
    dd_store *store;
    git_index *index; /* the base's .git/index, when it has one */
    git_diff *diff;
    int rootfd[2];
    bool inited;
};

typedef struct dd_walk {
    review_dirdiff *d;
    dd_scratch sc;
    rg_buf query; /* the ignore question being asked */
    unsigned int max_depth;
    unsigned long long max_size; /* larger files are skipped, not read */
    const char **excluded;       /* sorted; left out of both sides */
    size_t nexcluded;
    rg_error *err;
} dd_walk;

typedef struct dd_tent {
    unsigned int mode;
    const char *name;
    git_oid id;
} dd_tent;

typedef struct dd_tvec {
    dd_tent *v;
    size_t n, cap;
} dd_tvec;

/* A directory's entries: names, and what readdir says each one is. */
typedef struct dd_name {
    char *name;
    unsigned char type; /* DT_* */
} dd_name;

typedef struct dd_names {
    dd_name *v;
    size_t n, cap;
} dd_names;

/* objects.c: the store and its odb backend */
int review_store_add(dd_store *s, const git_oid *id, git_object_t type, size_t size, int side,
                     bool link, const char *path, char *data);
int review_store_new(dd_store **out);
void review_backend_free(git_odb_backend *b);

/* objects.c: reading files without following symlinks */
int review_open_parent(int rootfd, const char *rel, const char **name, bool create);
int review_open_reg(int dirfd, const char *name, struct stat *st);
void review_scratch_free(dd_scratch *sc);
int review_hash_fd(git_oid *out, int fd, size_t size, bool may_map, dd_scratch *sc);
int review_same_bytes(bool *same, int fa, int fb, size_t size, dd_scratch *sc);
int review_readlink(char **out, size_t *len, int dirfd, const char *name);

/* walk.c */
extern const char *const review_side_name[2];
int review_list(dd_names *out, int dirfd);
void review_names_free(dd_names *l);
int review_str_cmp(const void *a, const void *b);
int review_tree_write(git_oid *out, dd_store *s, dd_tvec *t);
unsigned int review_file_mode(const struct stat *st);
int review_kind(int *out, int dirfd, const dd_name *e);
int review_walk_dir(dd_walk *w, int dirfd[2], rg_buf *rel, unsigned int depth, git_oid tree[2],
                    bool have[2]);

/* diff.c */
const char *review_git_msg(void);
int review_open_root(int *out, const char *path, const char *what, rg_error *err);

#endif
