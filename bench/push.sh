#!/usr/bin/env bash
# Push benchmark: a 100 MB incompressible commit pushed to a local bare
# upstream directly (file://) and through refgate, alternating, RUNS times
# each; prints the median wall time of each, their ratio, and the gateway's
# peak RSS. Two gateway paths are measured:
#   create  - a new branch: no rule needs ancestry, the pack streams through;
#   update  - a fast-forward under rules that tell update from force: the
#             pack is indexed in a quarantine, and overlapped: it goes
#             upstream as it arrives, all but its trailing checksum, which
#             follows the decision.
# Usage: bench/push.sh [SIZE_MB] [RUNS]     (defaults 100 and 5)
# Needs a built tree: REFGATE=path/to/refgate (default build/cli/refgate).
set -euo pipefail
SIZE_MB=${1:-100}
RUNS=${2:-5}
REPO=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
REFGATE=$(bench_binary REFGATE cli/refgate)

T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-bench.XXXXXX")
GW_PID=
trap '[ -n "$GW_PID" ] && kill $GW_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
bench_git_env "$T"

# The commit to push: a base commit, then SIZE_MB of random bytes on top.
git init -q "$T/src"
echo base >"$T/src/README"
git -C "$T/src" add README && git -C "$T/src" commit -q -m base
head -c $((SIZE_MB * 1024 * 1024)) /dev/urandom >"$T/src/blob.bin"
git -C "$T/src" add blob.bin && git -C "$T/src" commit -q -m "big"

fresh_upstream() { # NAME: a bare upstream that has only the base commit
  rm -rf "$T/up/$1.git"
  git init -q --bare "$T/up/$1.git"
  git -C "$T/src" push -q "$T/up/$1.git" HEAD~1:refs/heads/main
}

mkdir -p "$T/up"
cat >"$T/refgate.json" <<JSON
{"listen": "127.0.0.1:0", "state_dir": "state",
 "upstreams": [{"host": "local", "url": "file://$T/up"}],
 "rules": [{"refs": ["refs/heads/**"], "actions": ["create", "update"], "effect": "allow"}]}
JSON
"$REFGATE" serve --config "$T/refgate.json" 2>"$T/gw.log" &
GW_PID=$!
for _ in $(seq 100); do [ -s "$T/state/url" ] && break; sleep 0.05; done
GW=$(cat "$T/state/url")
TOKEN=$("$REFGATE" token mint --config "$T/refgate.json" --repo local/b)
export REFGATE_TOKEN=$TOKEN GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=credential.helper
export GIT_CONFIG_VALUE_0='!f() { echo username=b; echo "password=$REFGATE_TOKEN"; }; f'

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

direct=() create=() update=()
for i in $(seq "$RUNS"); do
  fresh_upstream b
  t0=$(now); git -C "$T/src" push -q "file://$T/up/b.git" HEAD:refs/heads/new; t1=$(now)
  direct+=("$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a - b}')")
  fresh_upstream b
  t0=$(now); git -C "$T/src" push -q "$GW/local/b.git" HEAD:refs/heads/new; t1=$(now)
  create+=("$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a - b}')")
  fresh_upstream b
  t0=$(now); git -C "$T/src" push -q "$GW/local/b.git" HEAD:refs/heads/main; t1=$(now)
  update+=("$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a - b}')")
  [ "$(git --git-dir="$T/up/b.git" rev-parse main)" = "$(git -C "$T/src" rev-parse HEAD)" ] ||
    { echo "update push did not land" >&2; exit 1; }
done

md=$(printf '%s\n' "${direct[@]}" | median)
mc=$(printf '%s\n' "${create[@]}" | median)
mu=$(printf '%s\n' "${update[@]}" | median)
rss=$(awk '/VmHWM/ {print $2}' "/proc/$GW_PID/status")
printf 'push of a %d MB incompressible commit, %d runs each (median wall time)\n' "$SIZE_MB" "$RUNS"
printf '  direct (file://)                 %6.2f s\n' "$md"
div() { awk -v a="$1" -v b="$2" 'BEGIN {print a / b}'; }
printf '  via refgate, streamed (create)   %6.2f s   ratio %.2f\n' "$mc" "$(div "$mc" "$md")"
printf '  via refgate, checked (ff)        %6.2f s   ratio %.2f\n' "$mu" "$(div "$mu" "$md")"
printf '  gateway peak RSS                 %6.1f MB\n' "$(div "$rss" 1024)"
