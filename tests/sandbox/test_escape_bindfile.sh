#!/usr/bin/env bash
# Finding 11: a file bind-mounted into DIR from elsewhere (a secret mounted
# at DIR/secret.txt) was copied into the fork, where the command reads it.
# The fork copy does not cross mount points: an entry on another mount than
# DIR's (the same filesystem included, told apart by the mount id) is
# skipped and said on stderr; everything else is copied as before.
if [ -z "${RG_BINDFILE_NS:-}" ]; then
    # The mounts are made in a mount namespace of the test's own, so
    # nothing is left mounted on the host whatever happens.
    if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null ||
        ! unshare -m --propagation private true 2>/dev/null; then
        echo "SKIP: needs root and unshare -m to bind-mount into the project"
        exit 77
    fi
    RG_BINDFILE_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
require_abi 1

echo "SECRET-BOUND-FILE" >"$OUT/secret.txt"
mkdir -p "$OUT/secretdir"
echo "SECRET-BOUND-DIR" >"$OUT/secretdir/key"
: >"$PROJ/secret.txt"
mkdir -p "$PROJ/mnt"
if ! mount --bind "$OUT/secret.txt" "$PROJ/secret.txt" ||
    ! mount --bind "$OUT/secretdir" "$PROJ/mnt"; then
    echo "SKIP: mount --bind failed"
    exit 77
fi

out=$(cd "$PROJ" && "$RUN" -- sh -c 'cat secret.txt mnt/key 2>&1; cat README' 2>"$T/err")
err=$(cat "$T/err")
F="$PROJ.1"
lacks "the bind-mounted file's content is not in the fork" "$out" "SECRET-BOUND-FILE"
lacks "the bind-mounted directory's content is not in the fork" "$out" "SECRET-BOUND-DIR"
absent "the fork has no copy of the mounted file" "$F/secret.txt"
absent "the fork has no copy of the mounted directory" "$F/mnt"
absent "the base has no copy of the mounted file" "$T/.proj.1.base/secret.txt"
contains "stderr names the skipped file" "$err" "not copied into the fork: secret.txt is on another mount"
contains "stderr names the skipped directory" "$err" "not copied into the fork: mnt is on another mount"
contains "the end-of-run summary counts them" "$err" "blocked during the run: 2 entries on other mounts left out of the fork"
# Normal work: the rest of the tree is copied.
contains "ordinary files are copied" "$out" "uncommitted"
check "the fork has the sources" test -f "$F/src/main.c"
umount "$PROJ/secret.txt" "$PROJ/mnt"
finish
