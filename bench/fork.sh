#!/usr/bin/env bash
# Benchmark refgate-run's fork of a tree shaped like a real project, on an
# ext4 loop image (no reflink: every byte copied twice, base and fork) and
# an XFS one (reflink=1: cloned), with and without the exclusions:
#
#   - a git repository of SRC_MB of sources in SRC_FILES files (committed,
#     so .git holds about as much again, compressed);
#   - a git-ignored node_modules of DEP_MB in DEP_FILES small files in
#     nested package directories, as npm leaves it.
#
# For each filesystem and each of `refgate-run -- CMD` and
# `refgate-run --exclude-ignored -- CMD` (CMD lists node_modules, so the
# read-only view is used): the wall time of the whole run, what refgate-run
# said about the fork, and the extra disk space the base and the fork take
# (df before and after, synced). The fork is removed between runs. The page
# cache is warm (the tree was just written), as it is for a project in use;
# BENCH_COLD=1 drops it before each run (echo 3 >/proc/sys/vm/drop_caches),
# as after a reboot or under memory pressure.
#
#   bench/fork.sh [SRC_MB] [SRC_FILES] [DEP_MB] [DEP_FILES]
#
# Defaults: 90 MB in 2,000 files, and 400 MB in 20,000 files. Needs root,
# loop devices, mkfs.xfs, mkfs.ext4, git and python3. Stops itself after
# BENCH_TIMEOUT seconds (default 1800). The binary is $REFGATE_RUN, else
# $REFGATE_BUILD/runner/refgate-run, else build/runner/refgate-run.
set -euo pipefail

src_mb=${1:-90}
src_files=${2:-2000}
dep_mb=${3:-400}
dep_files=${4:-20000}
limit=${BENCH_TIMEOUT:-1800}

if [[ -z ${BENCH_FORK_TIMED:-} ]]; then
    BENCH_FORK_TIMED=1 exec timeout --kill-after=30 "$limit" "$0" "$@"
fi

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
run=$(bench_binary REFGATE_RUN runner/refgate-run)
if [[ $(id -u) != 0 ]]; then
    echo "bench/fork.sh: needs root (loop mounts)" >&2
    exit 2
fi
for tool in mkfs.xfs mkfs.ext4 git python3; do
    command -v "$tool" >/dev/null || {
        echo "bench/fork.sh: needs $tool" >&2
        exit 2
    }
done

work=$(mktemp -d /var/tmp/refgate-bench-fork.XXXXXX)
# Searchable by others: run as root, the command is nobody outside.
chmod 755 "$work"
mounts=()
cleanup() {
    local m
    for m in "${mounts[@]+"${mounts[@]}"}"; do
        umount "$m" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

total_mb=$((src_mb * 2 + dep_mb))
total_files=$((src_files * 2 + dep_files + 1000))

# mount_image FS DIR: room for the tree, its .git, a base and a fork.
mount_image() {
    local img="$work/$1.img" mb=$((total_mb * 3 + 1024))
    truncate -s "${mb}M" "$img"
    case "$1" in
    xfs) mkfs.xfs -q -f -m reflink=1 "$img" ;;
    ext4) mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 -N $((total_files * 4 + 10000)) "$img" ;;
    esac
    mkdir -p "$2"
    mount -o loop "$img" "$2"
    mounts+=("$2")
}

# populate DIR: sources (committed) and an ignored node_modules.
populate() {
    python3 - "$1" "$src_mb" "$src_files" "$dep_mb" "$dep_files" <<'EOF'
import os, random, sys
root = sys.argv[1]
src_mb, src_files, dep_mb, dep_files = map(int, sys.argv[2:6])
rnd = random.Random(42)
# Text-like content, so git compresses it the way it does sources.
words = [bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 10)))
         for _ in range(5000)]
pool = b" ".join(rnd.choice(words) + (b"\n" if i % 12 == 0 else b"") for i in range(1200000))

def write(path, size, salt):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    off = (salt * 7919) % max(1, len(pool) - size)
    with open(path, "wb") as f:
        f.write(pool[off:off + size])

each = src_mb * 1024 * 1024 // src_files
for i in range(src_files):
    write(os.path.join(root, "src", "m%03d" % (i // 50), "f%05d.c" % i), each, i)
# node_modules: packages of 1 to 60 files at two levels, sizes skewed small.
i, pkg = 0, 0
sizes = [rnd.paretovariate(1.2) for _ in range(dep_files)]
scale = dep_mb * 1024 * 1024 / sum(sizes)
while i < dep_files:
    n = min(rnd.randint(1, 60), dep_files - i)
    base = os.path.join(root, "node_modules", "pkg%04d" % pkg)
    if pkg % 7 == 3:
        base = os.path.join(base, "node_modules", "sub%04d" % pkg)
    for k in range(n):
        write(os.path.join(base, "lib" if k % 3 else "dist", "m%03d.js" % k),
              min(int(sizes[i] * scale), 3 * 1024 * 1024), i + 100000)
        i += 1
    pkg += 1
with open(os.path.join(root, ".gitignore"), "w") as f:
    f.write("node_modules/\n")
EOF
    git -C "$1" init -q
    git -C "$1" add .
    git -C "$1" -c user.name=b -c user.email=b@b commit -qm tree
}

used_kb() {
    sync -f "$1"
    df --output=used -k "$1" | tail -1 | tr -d ' '
}

now_ns() { date +%s%N; }

# bench_one FS MNT LABEL ARGS...: one run, then the fork removed.
bench_one() {
    local fs=$1 mnt=$2 label=$3 before after t0 t1 msg
    shift 3
    sync -f "$mnt"
    before=$(used_kb "$mnt")
    if [[ ${BENCH_COLD:-0} == 1 ]]; then
        sync
        echo 3 >/proc/sys/vm/drop_caches
    fi
    t0=$(now_ns)
    if ! (cd "$mnt/proj" && HOME="$work/home" "$run" "$@" -- sh -c 'ls node_modules >/dev/null') \
        2>"$work/err"; then
        echo "   $fs $label: the run failed:"
        sed 's/^/     /' "$work/err"
    fi
    t1=$(now_ns)
    after=$(used_kb "$mnt")
    printf '   %-5s %-22s %6.2f s  extra disk %8.1f MiB\n' "$fs" "$label" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print (b-a)/1e9}')" \
        "$(awk -v a="$before" -v b="$after" 'BEGIN{print (b-a)/1024}')"
    msg=$(grep -E 'FICLONE|copy_file_range|excluded' "$work/err" | sed 's/^refgate-run: /         /' || true)
    [[ -n $msg ]] && echo "$msg"
    rm -rf "$mnt/proj.1" "$mnt/.proj.1.base" "$mnt/.proj.1.run" "$mnt/.proj.1.excluded"
    sync -f "$mnt"
}

mkdir -p "$work/home"
echo "== fork of a project: ${src_mb} MB in ${src_files} source files (+ .git) and an ignored"
echo "   node_modules of ${dep_mb} MB in ${dep_files} files; base + fork;" \
    "$([[ ${BENCH_COLD:-0} == 1 ]] && echo "cold (dropped)" || echo warm) page cache"
for fs in ext4 xfs; do
    if ! mount_image "$fs" "$work/$fs" 2>"$work/err"; then
        echo "   $fs: cannot mount a loop image: $(cat "$work/err")"
        continue
    fi
    populate "$work/$fs/proj"
    echo "   $fs: tree $(du -sm "$work/$fs/proj" | cut -f1) MiB," \
        "$(find "$work/$fs/proj" -type f | wc -l) files"
    bench_one "$fs" "$work/$fs" "plain"
    bench_one "$fs" "$work/$fs" "--exclude-ignored" --exclude-ignored
done
