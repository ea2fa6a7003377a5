#!/usr/bin/env bash
# Benchmark refgate-run:
#
#  1. Wrapping overhead: `refgate-run -d DIR -- /bin/true` with every layer
#     (namespaces, mounts, Landlock, seccomp) against plain /bin/true,
#     refgate-run --unshare=none (Landlock only) and Debian's bubblewrap
#     doing comparable work (`bwrap --unshare-all --die-with-parent
#     --new-session --ro-bind / / --dev /dev --proc /proc /bin/true`),
#     timed interleaved (bench/interleave.py): medians and ratios, as root
#     and, run as root, as nobody. Target: under bwrap.
#  2. Forking a SIZE_MB / FILES tree on an XFS (reflink=1) loop image
#     against an ext4 one: wall time, and the extra disk space base + fork
#     take (df), so cloning is compared with copying.
#
#   bench/sandbox.sh [SIZE_MB] [FILES] [RUNS]
#
# Defaults: 1024 MB in 50,000 files, 200 timed runs. Part 2 needs root,
# loop devices, mkfs.xfs and mkfs.ext4, and is skipped otherwise (or with
# BENCH_SKIP_FORK=1). The whole script stops itself after BENCH_TIMEOUT
# seconds (default 1800). The binary is $REFGATE_RUN, else
# $REFGATE_BUILD/runner/refgate-run, else build/runner/refgate-run.
set -euo pipefail

size_mb=${1:-1024}
files=${2:-50000}
runs=${3:-200}
limit=${BENCH_TIMEOUT:-1800}

# Stop by ourselves, whatever hangs: re-run under timeout(1) once.
if [[ -z ${BENCH_SANDBOX_TIMED:-} ]]; then
    BENCH_SANDBOX_TIMED=1 exec timeout --kill-after=30 "$limit" "$0" "$@"
fi

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
run=$(bench_binary REFGATE_RUN runner/refgate-run)
for tool in jq python3; do
    command -v "$tool" >/dev/null || {
        echo "bench/sandbox.sh: needs $tool" >&2
        exit 2
    }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/refgate-bench-sandbox.XXXXXX")
mounts=()
cleanup() {
    local m
    for m in "${mounts[@]+"${mounts[@]}"}"; do
        umount "$m" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

ms() { awk -v s="$1" 'BEGIN { printf "%.3f ms", s * 1000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# --- 1. wrapping overhead --------------------------------------------------------
# Start-to-exec of /bin/true: refgate-run with every layer (user, mount,
# pid, ipc, uts and net namespaces, the mount layout, Landlock, seccomp)
# against bubblewrap doing the comparable work, and refgate-run with
# Landlock only (--unshare=none) for what the namespaces cost, and with
# --net gateway (the listening socket bound inside and passed out, the
# relay's thread started; no gateway needs to run for that) for what the
# bridge costs.
echo "== wrapping overhead ($runs runs each, interleaved, 20 warm-up rounds)"
echo "   $("$run" --version)"
mkdir -p "$work/dir"
bw_all="bwrap --unshare-all --die-with-parent --new-session --ro-bind / / --dev /dev --proc /proc /bin/true"
names=("/bin/true" "refgate-run, all layers" "refgate-run --unshare=none (Landlock only)"
    "refgate-run, all layers, --net gateway")
cmds=(/bin/true "$run -q -d $work/dir -- /bin/true" "$run -q --unshare=none -d $work/dir -- /bin/true"
    "$run -q --net gateway=127.0.0.1:8470 -d $work/dir -- /bin/true")
bw_i=
if command -v bwrap >/dev/null && $bw_all 2>/dev/null; then
    bw_i=${#cmds[@]}
    names+=("bwrap --unshare-all ... --proc /proc")
    cmds+=("$bw_all")
else
    echo "   (bwrap missing or unusable here: compared with /bin/true only)"
fi
python3 "$(dirname "$0")/interleave.py" --warmup 20 --runs "$runs" --json "$work/wrap.json" \
    "${cmds[@]}"
true_s=$(jq '.results[0].median' "$work/wrap.json")
for i in "${!cmds[@]}"; do
    m=$(jq ".results[$i].median" "$work/wrap.json")
    if [[ $i == 0 ]]; then
        printf '   %-46s median %s\n' "${names[$i]}" "$(ms "$m")"
    else
        printf '   %-46s median %s  (%sx /bin/true, +%s)\n' "${names[$i]}" "$(ms "$m")" \
            "$(ratio "$m" "$true_s")" "$(ms "$(awk -v a="$m" -v b="$true_s" 'BEGIN{print a-b}')")"
    fi
done
if [[ -n $bw_i ]]; then
    rg_s=$(jq '.results[1].median' "$work/wrap.json")
    bw_s=$(jq ".results[$bw_i].median" "$work/wrap.json")
    printf '   refgate-run (all layers) / bwrap --unshare-all: %s (target: < 1)\n' "$(ratio "$rg_s" "$bw_s")"
fi
jq -r '.results[] | "   raw: \(.command): mean \(.mean*1000|.*1000|round/1000) ms, min \(.min*1000|.*1000|round/1000) ms, max \(.max*1000|.*1000|round/1000) ms"' \
    "$work/wrap.json"

# The same comparison as an unprivileged user (nobody), where refgate-run
# needs no id-mapped mounts (as root it maps the command to nobody with
# them, which bwrap does not do).
if [[ -n $bw_i && $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
    mkdir -p "$work/nobody/dir"
    chmod 0777 "$work/nobody" "$work/nobody/dir"
    chmod o+x "$work"
    # A python3 nobody can run (root's own, e.g. pyenv's under /root, is not).
    nobody_py=$(command -v /usr/bin/python3 || command -v python3)
    mkdir -p "$work/nobody/home"
    chown 65534:65534 "$work/nobody/home"
    if setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$work/nobody/home" \
        "$nobody_py" "$(dirname "$0")/interleave.py" --warmup 20 --runs "$runs" --json "$work/nobody/wrap.json" \
        "$run -q -d $work/nobody/dir -- /bin/true" "$bw_all" 2>"$work/nobody/err"; then
        rg_s=$(jq '.results[0].median' "$work/nobody/wrap.json")
        bw_s=$(jq '.results[1].median' "$work/nobody/wrap.json")
        echo "   as nobody: refgate-run (all layers) median $(ms "$rg_s"), bwrap median $(ms "$bw_s")"
        printf '   as nobody: refgate-run (all layers) / bwrap --unshare-all: %s (target: < 1)\n' \
            "$(ratio "$rg_s" "$bw_s")"
    else
        echo "   (as nobody: $(tail -1 "$work/nobody/err"))"
    fi
fi

# --- 2. fork: XFS reflink against ext4 copy ------------------------------------------------
if [[ ${BENCH_SKIP_FORK:-0} == 1 ]]; then
    exit 0
fi
if [[ $(id -u) != 0 ]] || ! command -v mkfs.xfs >/dev/null || ! command -v mkfs.ext4 >/dev/null; then
    echo "== fork benchmark skipped: needs root, mkfs.xfs (xfsprogs) and mkfs.ext4 (e2fsprogs)"
    exit 0
fi

echo
echo "== fork of a ${size_mb} MB / ${files}-file tree (base + fork), XFS reflink vs ext4"

# mount_image FS SIZE_MB DIR
mount_image() {
    local img="$work/$1.img"
    truncate -s "${2}M" "$img"
    case "$1" in
    xfs) mkfs.xfs -q -f -m reflink=1 "$img" ;;
    ext4) mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 -N $((files * 3 + 10000)) "$img" ;;
    esac
    mkdir -p "$3"
    mount -o loop "$img" "$3"
    mounts+=("$3")
}

# The same tree on each filesystem: FILES files of SIZE_MB/FILES bytes in
# directories of 100, random-looking content.
populate() {
    python3 - "$1" "$size_mb" "$files" <<'EOF'
import os, sys
root, size_mb, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
each = size_mb * 1024 * 1024 // files
pool = os.urandom(4 * 1024 * 1024)
for i in range(files):
    d = os.path.join(root, "d%04d" % (i // 100))
    if i % 100 == 0:
        os.makedirs(d, exist_ok=True)
    off = (i * 7919) % (len(pool) - each) if each < len(pool) else 0
    with open(os.path.join(d, "f%06d" % i), "wb") as f:
        f.write(pool[off:off + each] if each <= len(pool) else pool * (each // len(pool)))
EOF
}

used_kb() {
    sync -f "$1"
    df --output=used -k "$1" | tail -1 | tr -d ' '
}

now_ns() { date +%s%N; }

bench_fork() {
    local fs=$1 mnt=$2 before after t0 t1 t2 msg
    mkdir -p "$mnt/tree"
    populate "$mnt/tree"
    sync -f "$mnt"
    before=$(used_kb "$mnt")
    t0=$(now_ns)
    msg=$(cd "$mnt/tree" && HOME="$work/home" "$run" -- /bin/true 2>&1 | grep -E 'FICLONE|copy_file_range' || true)
    t1=$(now_ns)
    sync -f "$mnt"
    t2=$(now_ns)
    after=$(used_kb "$mnt")
    printf '   %-5s fork %7.2f s (%7.2f s with sync)  extra disk %8.1f MiB  du of fork %8.1f MiB\n' \
        "$fs" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print (b-a)/1e9}')" \
        "$(awk -v a="$t0" -v b="$t2" 'BEGIN{print (b-a)/1e9}')" \
        "$(awk -v a="$before" -v b="$after" 'BEGIN{print (b-a)/1024}')" \
        "$(du -sk "$mnt/tree.1" | awk '{print $1/1024}')"
    echo "         refgate-run said: ${msg#refgate-run: }"
}

mkdir -p "$work/home"
if mount_image xfs $((size_mb * 13 / 10 + 512)) "$work/xfs" 2>"$work/err"; then
    bench_fork xfs "$work/xfs"
else
    echo "   xfs: cannot mount a loop image: $(cat "$work/err")"
fi
if mount_image ext4 $((size_mb * 33 / 10 + 512)) "$work/ext4" 2>"$work/err"; then
    bench_fork ext4 "$work/ext4"
else
    echo "   ext4: cannot mount a loop image: $(cat "$work/err")"
fi
