#!/usr/bin/env bash
# The fork is a reflink clone where the filesystem can clone: on an XFS
# loop image made with reflink=1 a fork of a 64 MiB tree takes no extra
# space (df) and its extents are shared, and stderr says FICLONE; on an
# ext4 loop image it falls back to copy_file_range and says so. Needs root,
# loop devices, mkfs.xfs (xfsprogs) and mkfs.ext4 (e2fsprogs); skips (77)
# with the reason otherwise.
. "$(dirname "$0")/lib.sh"
require_abi 1

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: loop mounts need root"
    exit 77
fi
for tool in mkfs.xfs mkfs.ext4 losetup mount umount df; do
    if ! command -v "$tool" >/dev/null; then
        echo "SKIP: $tool is not installed (Debian: xfsprogs, e2fsprogs, mount)"
        exit 77
    fi
done

MB=64
RAN=0

# mount_image FS SIZE DIR: make a loop image with FS and mount it at DIR.
mount_image() {
    local fs=$1 size=$2 dir=$3 img="$T/$1.img" out
    truncate -s "$size" "$img"
    case "$fs" in
    xfs) out=$(mkfs.xfs -q -f -m reflink=1 "$img" 2>&1) ;;
    ext4) out=$(mkfs.ext4 -q -F "$img" 2>&1) ;;
    esac || {
        echo "# mkfs.$fs failed: $out"
        return 1
    }
    mkdir -p "$dir"
    if ! out=$(mount -o loop "$img" "$dir" 2>&1); then
        echo "# cannot mount a loop image ($fs): $out"
        return 1
    fi
    CLEANUPS+=("umount '$dir' 2>/dev/null")
}

used_kb() {
    sync -f "$1"
    df --output=used -k "$1" | tail -1 | tr -d ' '
}

# fork_on FS DIR: make a tree on DIR, fork it, report in $ERR and $DELTA_KB.
fork_on() {
    local dir=$2 before after
    mkdir -p "$dir/src/sub" "$dir/src/empty"
    head -c "${MB}M" /dev/urandom >"$dir/src/big"
    for i in $(seq 20); do echo "small $i" >"$dir/src/sub/f$i"; done
    ln -s big "$dir/src/link"
    before=$(used_kb "$dir")
    ERR=$(cd "$dir/src" && "$RUN" -- true 2>&1)
    STATUS=$?
    after=$(used_kb "$dir")
    DELTA_KB=$((after - before))
    echo "# $1: df used grew by ${DELTA_KB} KiB for a ${MB} MiB tree (base + fork);" \
        "du says $(du -sk "$dir/src.1" | cut -f1) KiB for the fork"
}

if mount_image xfs 512M "$T/xfs"; then
    RAN=1
    fork_on xfs "$T/xfs"
    equals "xfs: the fork succeeds" "$STATUS" 0
    contains "xfs: stderr says the files were cloned with FICLONE" "$ERR" "cloned with FICLONE (reflink)"
    if [ "$DELTA_KB" -lt 4096 ]; then
        ok "xfs: the fork takes no extra space (${DELTA_KB} KiB < 4 MiB)"
    else not_ok "xfs: the fork takes no extra space (grew ${DELTA_KB} KiB)"; fi
    check "xfs: the fork's big file has the same content" cmp -s "$T/xfs/src/big" "$T/xfs/src.1/big"
    if command -v filefrag >/dev/null; then
        contains "xfs: the fork's extents are shared" "$(filefrag -v "$T/xfs/src.1/big")" "shared"
    fi
    equals "xfs: symlinks stay links" "$(readlink "$T/xfs/src.1/link")" "big"
    echo changed >>"$T/xfs/src.1/sub/f1"
    equals "xfs: writing the clone leaves the base alone" "$(tail -1 "$T/xfs/.src.1.base/sub/f1")" "small 1"
fi

if mount_image ext4 400M "$T/ext4"; then
    RAN=1
    fork_on ext4 "$T/ext4"
    equals "ext4: the fork succeeds" "$STATUS" 0
    contains "ext4: stderr says the files were copied" "$ERR" "copied with copy_file_range"
    contains "ext4: stderr says why" "$ERR" "no reflink here"
    if [ "$DELTA_KB" -ge $((2 * MB * 1024 * 9 / 10)) ]; then
        ok "ext4: base and fork are real copies (${DELTA_KB} KiB)"
    else not_ok "ext4: base and fork are real copies (grew only ${DELTA_KB} KiB)"; fi
    check "ext4: the fork's big file has the same content" cmp -s "$T/ext4/src/big" "$T/ext4/src.1/big"
fi

if [ "$RAN" = 0 ]; then
    echo "SKIP: neither an XFS nor an ext4 loop image could be mounted here"
    exit 77
fi
finish
