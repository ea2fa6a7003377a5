#!/usr/bin/env bash
# Review console benchmark: the time to render its pages on an audit log of
# RECORDS records (decision records, one push of one ref each, valid
# chain), as medians over RUNS, and ratios against a baseline that reads
# the same log: `refgate audit --json` (every row, to /dev/null).
#   pushes    - the newest page of the pushes listing (read from the end of
#               the log, only as far as the page needs);
#   page100   - page 100 of it (the newest 5,051 pushes read);
#   filtered  - the newest page filtered on one run (1 push in 997 matches);
#   runs      - the runs page (997 runs: the newest 51 found from the end);
#   push      - one push's page (a scan of the whole log), whose ref is
#               a created branch of 60 commits over 300 changed paths in a
#               real upstream: its trace, 50 commits and 200 paths read
#               with libgit2;
#   push-nogit - another push's page, whose new commit upstream lacks (the
#               same scan, no commits read): push minus this is the git part;
#   integrity - the integrity page (audit verify of the whole log + head).
# Usage: bench/console.sh [RECORDS] [RUNS]     (defaults 1000000 and 5)
# Needs a built tree: REFGATE=path/to/refgate (default build/cli/refgate).
set -euo pipefail
RECORDS=${1:-1000000}
RUNS=${2:-5}
REPO=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
REFGATE=$(bench_binary REFGATE cli/refgate)

T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-bench.XXXXXX")
GW_PID=
trap '[ -n "$GW_PID" ] && kill $GW_PID 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
mkdir -p "$T/state" "$T/up"

# The upstream: main, and refs/heads/feature/1 (what the first record
# created) 60 commits ahead of it, touching 5 new paths each.
git init -q --bare "$T/up/acme/app.git"
git init -q "$T/w"
(
  cd "$T/w"
  export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=b@example.com GIT_COMMITTER_NAME=bench \
    GIT_COMMITTER_EMAIL=b@example.com
  echo base >README && git add README && git commit -qm base && git branch -M main
  git checkout -qb feature
  for i in $(seq 1 60); do
    for j in 1 2 3 4 5; do echo "$i $j" >"f$i-$j"; done
    git add . && git commit -qm "commit $i"
  done
  git push -q "$T/up/acme/app.git" main feature:refs/heads/feature/1
)
NEW1=$(git -C "$T/w" rev-parse feature)

# A chained log of RECORDS decision records, as the gateway writes them.
python3 - "$T/state/audit.jsonl" "$RECORDS" "$NEW1" <<'PY'
import hashlib, json, sys
path, n, new1 = sys.argv[1], int(sys.argv[2]), sys.argv[3]
prev = "0" * 64
with open(path, "wb") as f:
    for i in range(1, n + 1):
        rec = {"v": 2, "seq": i, "prev": prev, "time": "2026-01-01T00:00:00.000Z",
               "type": "decision", "push_id": "p%015x" % i, "run": "run-%d" % (i % 997),
               "token": "0123456789ab", "remote": "127.0.0.1", "repo": "local/acme/app",
               "ref": "refs/heads/feature/%d" % (i % 101), "old": "0" * 40, "new": new1 if i == 1 else "1" * 40,
               "action": "create", "decision": "allow" if i % 3 else "deny",
               "rule": "features", "reason": "feature branches are open",
               "outcome": "rejected"}
        line = json.dumps(rec, separators=(",", ":")).encode()
        f.write(line + b"\n")
        prev = hashlib.sha256(line).hexdigest()
PY
cat >"$T/refgate.json" <<JSON
{"listen": "127.0.0.1:0", "state_dir": "state", "console": {"listen": "127.0.0.1:0"},
 "upstreams": [{"host": "local", "url": "file://$T/up"}], "rules": []}
JSON
"$REFGATE" serve --config "$T/refgate.json" 2>"$T/gw.log" &
GW_PID=$!
for _ in $(seq 1 400); do [ -s "$T/state/console.url" ] && break; sleep 0.05; done
C=$(cat "$T/state/console.url")
printf 'bench password\n' | "$REFGATE" console user add --config "$T/refgate.json" bench >/dev/null
curl -s -c "$T/jar" "$C/login" >"$T/l.html"
csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$T/l.html" | cut -d'"' -f4)
curl -s -c "$T/jar" -b "$T/jar" -o /dev/null -H "Origin: $C" \
  -d "csrf=$csrf&user=bench&password=bench+password" "$C/login"

# median SECONDS...: the middle value.
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# time_page PATH: the median seconds of GET PATH over RUNS.
time_page() {
  local t=() i
  for ((i = 0; i < RUNS; i++)); do
    t+=("$(curl -s -b "$T/jar" -o "$T/page" -w '%{time_total}' "$C$1")")
  done
  grep -q '<main>' "$T/page" || { echo "no page for $1" >&2; exit 1; }
  ! grep -q 'class="error"\|chain is broken' "$T/page" || { echo "an error page for $1" >&2; exit 1; }
  case $1 in /push\?id=p000000000000001) grep -q 'Only the first 200 paths' "$T/page" || { echo "no paths for $1" >&2; exit 1; } ;; esac
  case $1 in /pushes*) grep -q 'Pushes [0-9]* to [0-9]*,' "$T/page" || { echo "no rows for $1" >&2; exit 1; } ;; esac
  median "${t[@]}"
}
base=()
for ((i = 0; i < RUNS; i++)); do
  s=$(date +%s.%N)
  "$REFGATE" audit --config "$T/refgate.json" --json >/dev/null
  base+=("$(echo "$(date +%s.%N) - $s" | bc)")
done
b=$(median "${base[@]}")
size=$(stat -c %s "$T/state/audit.jsonl")
echo "log: $RECORDS records, $((size / 1024 / 1024)) MiB; medians of $RUNS"
printf '%-10s %8.3f s  (refgate audit --json >/dev/null)\n' "baseline" "$b"
for p in "pushes:/pushes" "page100:/pushes?page=100" "filtered:/pushes?run=run-5" \
  "runs:/runs" "push:/push?id=p000000000000001" "push-nogit:/push?id=p000000000000002" \
  "integrity:/integrity"; do
  s=$(time_page "${p#*:}")
  printf '%-10s %8.3f s  %5.2fx baseline\n' "${p%%:*}" "$s" "$(echo "$s / $b" | bc -l)"
done
