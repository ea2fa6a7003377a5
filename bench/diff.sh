#!/usr/bin/env bash
# Benchmark `refgate diff` against `git diff --no-index --binary` on a fork of
# a large tree, the way refgate-run leaves it: DIR.1 beside .DIR.1.base.
#
#   bench/diff.sh [SIZE_MB] [FILES] [CHANGED] [RUNS]
#
# Defaults: 1024 MB in 50,000 files, 100 changed files, 5 timed runs of each
# (after one warm-up, so both read from the page cache). The tree is
# generated once under $BENCH_DIR (default: a fresh directory under $TMPDIR,
# removed at exit unless BENCH_KEEP=1). The refgate binary is $REFGATE, else
# $REFGATE_BUILD/cli/refgate, else build/cli/refgate.
set -euo pipefail

size_mb=${1:-1024}
files=${2:-50000}
changed=${3:-100}
runs=${4:-5}

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
refgate=$(bench_binary REFGATE cli/refgate)
command -v python3 >/dev/null || { echo "bench/diff.sh: needs python3" >&2; exit 2; }

if [[ -n ${BENCH_DIR:-} ]]; then
    work=$BENCH_DIR
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/refgate-bench.XXXXXX")
fi
cleanup() { [[ ${BENCH_KEEP:-0} == 1 ]] || rm -rf "$work"; }
trap cleanup EXIT

base=$work/.app.1.base
fork=$work/app.1

# The tree: text files of varied size in nested directories (100 per
# directory, as in a source tree), a few percent binary, a .gitignore.
if [[ ! -d $base ]]; then
    echo "generating ${size_mb} MB in ${files} files under $work ..."
    python3 - "$base" "$size_mb" "$files" <<'EOF'
import os, random, sys
root, size_mb, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(1)
total = size_mb << 20
avg = max(1, total // files)
# Bytes -> lowercase words and newlines, fast: translate urandom output.
table = bytes((b"abcdefghijklmnopqrstuvwxyz    \n"[i % 31]) for i in range(256))
os.makedirs(root)
with open(os.path.join(root, ".gitignore"), "w") as f:
    f.write("*.o\nbuild/\n")
left = total
for i in range(files):
    d = os.path.join(root, "d%03d" % (i // 10000), "e%03d" % ((i // 100) % 100))
    if i % 100 == 0:
        os.makedirs(d, exist_ok=True)
    n = avg if i < files - 1 else max(0, left)
    n = max(0, min(left, int(n * rnd.uniform(0.25, 1.75)))) if i < files - 1 else n
    left -= n
    data = os.urandom(n)
    binary = i % 50 == 7
    name = "f%06d.%s" % (i, "bin" if binary else "txt")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if binary else data.translate(table))
EOF
    cp -a --reflink=auto "$base" "$fork"
    # Change $changed files: most modified in the middle, some added,
    # deleted, made executable, or binary.
    python3 - "$fork" "$changed" <<'EOF'
import os, random, sys
root, changed = sys.argv[1], int(sys.argv[2])
rnd = random.Random(2)
paths = []
for d, _, fs in os.walk(root):
    paths += [os.path.join(d, f) for f in fs if f.startswith("f")]
paths.sort()
picks = rnd.sample(paths, changed)
for k, p in enumerate(picks):
    kind = k % 10
    if kind < 6:                     # modify a line in the middle
        with open(p, "rb") as f:
            data = f.read()
        mid = len(data) // 2
        data = data[:mid] + b"\nchanged by the run %d\n" % k + data[mid:]
        with open(p, "wb") as f:
            f.write(data)
    elif kind == 6:                  # add a file beside it
        with open(p + ".new", "w") as f:
            f.write("added by the run\n" * 20)
    elif kind == 7:                  # delete
        os.unlink(p)
    elif kind == 8:                  # chmod +x
        os.chmod(p, 0o755)
    else:                            # append binary bytes
        with open(p, "ab") as f:
            f.write(os.urandom(64))
EOF
fi

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# Time one command $runs times (after a warm-up); prints the median seconds.
timeit() {
    local i t0 t1
    "$@" >/dev/null 2>&1 || true
    for ((i = 0; i < runs; i++)); do
        t0=$(date +%s.%N)
        "$@" >/dev/null 2>&1 || true
        t1=$(date +%s.%N)
        echo "$t1 - $t0" | bc -l
    done | median
}

cd "$work"
set +e
"$refgate" diff app.1 >"$work/refgate.patch"
rc=$?
set -e
if [[ $rc != 1 ]]; then
    echo "refgate diff exited $rc (expected 1: changes)" >&2
    exit 1
fi
n_changed=$(grep -c '^diff --git ' "$work/refgate.patch")
patch_kb=$(( $(stat -c %s "$work/refgate.patch") / 1024 ))

t_refgate=$(timeit "$refgate" diff app.1)
t_git=$(timeit git diff --no-index --binary .app.1.base app.1)
t_stat=$(timeit "$refgate" diff --stat app.1)

rss=""
if [[ -x /usr/bin/time ]]; then
    rss=$({ /usr/bin/time -f %M "$refgate" diff app.1 2>&1 >/dev/null || true; } | tail -1)
fi

du_mb=$(du -sm "$base" | cut -f1)
nfiles=$(find "$base" -type f | wc -l)
printf 'tree:                %s MB, %s files in the base; %s changed paths, a %s KB patch\n' \
    "$du_mb" "$nfiles" "$n_changed" "$patch_kb"
printf 'refgate diff:        %.3f s (median of %d)%s\n' "$t_refgate" "$runs" \
    "${rss:+, peak RSS ${rss} KB}"
printf 'refgate diff --stat: %.3f s\n' "$t_stat"
printf 'git diff --no-index: %.3f s\n' "$t_git"
printf 'ratio git/refgate:   %.2f\n' "$(echo "$t_git / $t_refgate" | bc -l)"
