#!/usr/bin/env bash
# Approvals benchmark: what an `ask` costs a push of a SIZE_MB incompressible
# commit through refgate, as medians over RUNS and ratios against the
# plain paths:
#   deny     - a tag create a deny rule refuses (the pack is read and dropped);
#   ask      - the same refused by an ask rule: a pending approval is made
#              and the pack kept with it (copied into <state_dir>/approvals);
#   allow    - a tag create an allow rule lets through;
#   approved - the same update approved, pushed again: it lands and the
#              approval is used up;
#   show     - `refgate approvals show` of the kept pack (indexed into a
#              quarantine, then walked).
# Usage: bench/approvals.sh [SIZE_MB] [RUNS]     (defaults 50 and 5)
# Needs a built tree: REFGATE=path/to/refgate (default build/cli/refgate).
set -euo pipefail
SIZE_MB=${1:-50}
RUNS=${2:-5}
REPO=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
REFGATE=$(bench_binary REFGATE cli/refgate)

T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-bench.XXXXXX")
GW_PID=
trap '[ -n "$GW_PID" ] && kill $GW_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
bench_git_env "$T"

git init -q "$T/src"
echo base >"$T/src/README"
git -C "$T/src" add README && git -C "$T/src" commit -q -m base
git init -q --bare "$T/up/b.git"
git -C "$T/src" push -q "$T/up/b.git" main
head -c $((SIZE_MB * 1024 * 1024)) /dev/urandom >"$T/src/blob.bin"
git -C "$T/src" add blob.bin && git -C "$T/src" commit -q -m big

cat >"$T/refgate.json" <<JSON
{"listen": "127.0.0.1:0", "state_dir": "state",
 "upstreams": [{"host": "local", "url": "file://$T/up"}],
 "rules": [{"refs": ["refs/tags/deny-*"], "effect": "deny"},
           {"refs": ["refs/tags/ask-*"], "effect": "ask"},
           {"refs": ["refs/tags/allow-*"], "effect": "allow"}]}
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
# timed REF: seconds to push HEAD as REF through the gateway (refused or not)
timed() {
  local t0 t1
  t0=$(now)
  git -C "$T/src" push -q "$GW/local/b.git" "HEAD:$1" 2>"$T/push.err" || true
  t1=$(now)
  echo "$t1 - $t0" | bc
}

# forget TAG: upstream loses the tag and the commit it brought.
forget() {
  git --git-dir="$T/up/b.git" tag -d "$1" >/dev/null
  git --git-dir="$T/up/b.git" reflog expire --expire=now --all
  git --git-dir="$T/up/b.git" gc -q --prune=now
}

deny=() ask=() allow=() approved=() show=()
for i in $(seq "$RUNS"); do
  deny+=("$(timed "refs/tags/deny-$i")")
  ask+=("$(timed "refs/tags/ask-$i")")
  id=$(grep -o 'refgate approve [a-z2-7]*' "$T/push.err" | cut -d' ' -f3)
  [ -s "$T/state/approvals/$id.pack" ] || { cat "$T/push.err" "$T/gw.log"; echo "no kept pack" >&2; exit 1; }
  t0=$(now)
  "$REFGATE" approvals show --config "$T/refgate.json" "$id" >/dev/null
  t1=$(now)
  show+=("$(echo "$t1 - $t0" | bc)")
  "$REFGATE" approve --config "$T/refgate.json" "$id" >/dev/null
  approved+=("$(timed "refs/tags/ask-$i")")
  [ -n "$(git --git-dir="$T/up/b.git" rev-parse -q --verify "refs/tags/ask-$i")" ] ||
    { cat "$T/push.err"; echo "the approved push did not land" >&2; exit 1; }
  # Every push sends the whole commit: upstream must not have it before.
  forget "ask-$i"
  allow+=("$(timed "refs/tags/allow-$i")")
  forget "allow-$i"
done

md() { printf '%s\n' "$@" | median; }
D=$(md "${deny[@]}") A=$(md "${ask[@]}") L=$(md "${allow[@]}") P=$(md "${approved[@]}") S=$(md "${show[@]}")
printf 'push of %d MB, median of %d runs\n' "$SIZE_MB" "$RUNS"
printf '  deny      %6.3f s\n' "$D"
printf '  ask       %6.3f s   %.2fx deny   (pending approval, pack kept)\n' "$A" "$(echo "$A / $D" | bc -l)"
printf '  allow     %6.3f s\n' "$L"
printf '  approved  %6.3f s   %.2fx allow  (approval looked up and used)\n' "$P" "$(echo "$P / $L" | bc -l)"
printf '  show      %6.3f s   (index the kept pack, list its commits)\n' "$S"
