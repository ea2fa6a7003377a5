#!/usr/bin/env bash
# Clone benchmark: a repository of a SIZE_MB incompressible blob plus a
# history of 200 small commits, cloned (--no-checkout, so only the
# transfer and the index of the pack are timed) straight from the local
# bare upstream (file://, git upload-pack over a pipe: the floor) and
# through refgate (smart HTTP, the gateway running upload-pack against the
# same upstream), alternating, RUNS times each. Prints the median wall time
# of each, their ratio, and the gateway's peak RSS.
#
#   bench/clone.sh [SIZE_MB] [RUNS]     (defaults 100 and 5)
#
# The binary is $REFGATE, else $REFGATE_BUILD/cli/refgate, else
# build/cli/refgate.
set -euo pipefail
SIZE_MB=${1:-100}
RUNS=${2:-5}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
REFGATE=$(bench_binary REFGATE cli/refgate)

T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-bench-clone.XXXXXX")
GW_PID=
trap '[[ -n $GW_PID ]] && kill "$GW_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
bench_git_env "$T"

# The upstream: 200 small commits, then SIZE_MB of random bytes.
git init -q "$T/src"
for i in $(seq 200); do
    echo "change $i" >>"$T/src/log.txt"
    git -C "$T/src" add log.txt && git -C "$T/src" commit -q -m "change $i"
done
head -c $((SIZE_MB * 1024 * 1024)) /dev/urandom >"$T/src/blob.bin"
git -C "$T/src" add blob.bin && git -C "$T/src" commit -q -m big
git clone -q --bare "$T/src" "$T/up/b.git"

cat >"$T/refgate.json" <<JSON
{"listen": "127.0.0.1:0", "state_dir": "state",
 "upstreams": [{"host": "local", "url": "file://$T/up"}],
 "rules": [{"refs": ["refs/heads/**"], "actions": ["create", "update"], "effect": "allow"}]}
JSON
"$REFGATE" serve --config "$T/refgate.json" 2>"$T/gw.log" &
GW_PID=$!
for _ in $(seq 100); do [[ -s $T/state/url ]] && break; sleep 0.05; done
[[ -s $T/state/url ]] || { cat "$T/gw.log" >&2; exit 1; }
GW=$(cat "$T/state/url")
REFGATE_TOKEN=$("$REFGATE" token mint --config "$T/refgate.json" --repo local/b)
export REFGATE_TOKEN GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=credential.helper
# shellcheck disable=SC2016 # expanded by the helper's shell, not here
export GIT_CONFIG_VALUE_0='!f() { echo username=b; echo "password=$REFGATE_TOKEN"; }; f'

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN {print a / b}'; }
timed_clone() { # URL: prints the wall time, checks the clone is whole
    local t0 t1
    rm -rf "$T/c"
    t0=$(now)
    git clone -q --no-checkout "$1" "$T/c"
    t1=$(now)
    [[ $(git -C "$T/c" rev-parse HEAD) == "$(git -C "$T/src" rev-parse HEAD)" ]] ||
        { echo "bench/clone.sh: the clone of $1 is not whole" >&2; exit 1; }
    awk -v a="$t1" -v b="$t0" 'BEGIN {print a - b}'
}

direct=() gateway=()
for _ in $(seq "$RUNS"); do
    direct+=("$(timed_clone "file://$T/up/b.git")")
    gateway+=("$(timed_clone "$GW/local/b.git")")
done
md=$(printf '%s\n' "${direct[@]}" | median)
mg=$(printf '%s\n' "${gateway[@]}" | median)
rss=$(awk '/VmHWM/ {print $2}' "/proc/$GW_PID/status")
printf 'clone of a %d MB repository (200 commits + one incompressible blob), %d runs each (median wall time)\n' \
    "$SIZE_MB" "$RUNS"
printf '  direct (file://)     %6.2f s\n' "$md"
printf '  via refgate          %6.2f s   ratio %.2f\n' "$mg" "$(div "$mg" "$md")"
printf '  gateway peak RSS     %6.1f MB\n' "$(div "$rss" 1024)"
printf '  runs: direct %s | refgate %s\n' "${direct[*]}" "${gateway[*]}"
