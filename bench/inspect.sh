#!/usr/bin/env bash
# Benchmark content inspection for rules with conditions (issue 10): a push
# of COMMITS commits bringing SIZE_MB of source-like text (one new or
# changed file per commit), indexed into a quarantine and inspected with
# every condition at once (secrets, paths, max_file_bytes, max_path_length,
# author_email_not, committer_email_not, message_not, merge_commits). Run at
# a tenth of the size and at full size, it prints seconds per MB and
# milliseconds per commit for each (the median of RUNS inspections), and
# how much longer the full size took, which is 10x when the cost scales
# linearly.
#
#   bench/inspect.sh [COMMITS] [SIZE_MB] [RUNS]      (default 10000 200 3)
#
# The program is $INSPECT_BENCH, else $REFGATE_BUILD/bench/inspect_bench,
# else build/bench/inspect_bench (configure RelWithDebInfo or Release for
# figures). Work goes under a fresh directory in $TMPDIR, removed at exit.
set -euo pipefail

commits=${1:-10000}
size_mb=${2:-200}
runs=${3:-3}

src=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench=$(bench_binary INSPECT_BENCH bench/inspect_bench)

work=$(mktemp -d "${TMPDIR:-/tmp}/refgate-bench-inspect.XXXXXX")
trap 'rm -rf "$work"' EXIT
export HOME=$work GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null

git -C "$src" ls-files -z | (cd "$src" && xargs -0 cat 2>/dev/null) >"$work/seed.txt" || true

cat >"$work/refgate.json" <<JSON
{"state_dir": "state", "limits": {"inspect_bytes": 17179869184, "inspect_seconds": 3600},
 "rules": [
  {"name": "all", "effect": "deny", "secrets": true, "paths": [".github/workflows/**", "**/*.pem"],
   "max_file_bytes": 104857600, "max_path_length": 4096, "author_email_not": "@example\\\\.com$",
   "committer_email_not": "@example\\\\.com$", "message_not": "^Signed-off-by: ",
   "merge_commits": true}]}
JSON

# run N MB: build a repository of N commits bringing MB of text, push its
# base to a bare upstream, pack the rest as a client would, inspect it.
run() {
    local n=$1 mb=$2 d=$work/r$1
    git init -q -b main "$d/repo" && git init -q --bare -b main "$d/up.git"
    python3 - "$work/seed.txt" "$n" "$mb" <<'PY' | git -C "$d/repo" fast-import --quiet
import sys
seed = open(sys.argv[1], "rb").read() or b"int main(void) { return 0; }\n" * 1000
n, mb = int(sys.argv[2]), int(sys.argv[3])
per = max(1, mb * 1024 * 1024 // n)
out = sys.stdout.buffer
def blob(i):
    off = (i * 7919) % max(1, len(seed) - per)
    body = (b"/* file %d */\n" % i + seed[off:off + per])[:per]
    while len(body) < per:
        body += seed[:per - len(body)]
    return body
# The base (upstream already has it) holds all 1,000 files the commits then
# change, so trees are the same size at both sizes and only the count of
# commits and bytes differs.
def path(k): return b"src/m%02d/f%03d.c" % (k % 50, k)
for i in range(n + 1):
    msg = b"change %d\n\nSigned-off-by: Bench <bench@example.com>\n" % i
    out.write(b"commit refs/heads/main\nmark :%d\n" % (i + 1))
    out.write(b"author Bench <bench@example.com> %d +0000\n" % (1700000000 + i))
    out.write(b"committer Bench <bench@example.com> %d +0000\n" % (1700000000 + i))
    out.write(b"data %d\n%s" % (len(msg), msg))
    if i:
        out.write(b"from :%d\n" % i)
        data = blob(i)
        out.write(b"M 100644 inline %s\ndata %d\n%s\n" % (path(i % 1000), len(data), data))
    else:
        for k in range(1000):
            data = b"/* file %d */\n" % k
            out.write(b"M 100644 inline %s\ndata %d\n%s\n" % (path(k), len(data), data))
PY
    local base head
    base=$(git -C "$d/repo" rev-list --max-parents=0 main)
    head=$(git -C "$d/repo" rev-parse main)
    git -C "$d/repo" push -q "$d/up.git" "$base:refs/heads/main"
    printf '%s\n^%s\n' "$head" "$base" |
        git -C "$d/repo" pack-objects -q --stdout --revs --thin --delta-base-offset >"$d/push.pack"
    local pack_mb; pack_mb=$(du -m "$d/push.pack" | cut -f1)
    local r
    for r in $(seq 1 "$runs"); do
        "$bench" "$work/refgate.json" "$d/up.git" "$d/push.pack" "$base" "$head"
    done >"$d/times"
    # The median run of each phase: the machine may be shared.
    read -r index_ms inspect_ms < <(python3 -c '
import sys, statistics
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
print(statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows))' "$d/times")
    python3 - "$n" "$mb" "$pack_mb" "$index_ms" "$inspect_ms" <<'PY'
import sys
n, mb, pack_mb, index_ms, inspect_ms = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
print("%6d commits %5d MB (pack %s MB): index-pack %.2f s, inspect %.2f s = %.4f s/MB, %.3f ms/commit"
      % (n, mb, pack_mb, index_ms / 1e3, inspect_ms / 1e3, inspect_ms / 1e3 / mb, inspect_ms / n))
PY
    echo "$inspect_ms" >"$work/ms.$n"
    rm -rf "$d"
}

small_n=$((commits / 10)) small_mb=$((size_mb / 10))
run "$small_n" "$small_mb"
run "$commits" "$size_mb"
python3 - "$(cat "$work/ms.$small_n")" "$(cat "$work/ms.$commits")" <<'PY'
import sys
a, b = float(sys.argv[1]), float(sys.argv[2])
print("scaling: 10x the push took %.1fx the inspection time (linear: 10x)" % (b / a))
PY
