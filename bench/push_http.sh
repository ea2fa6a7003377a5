#!/usr/bin/env bash
# Push benchmark against a real smart-HTTP upstream: a SIZE_MB incompressible
# commit pushed straight to nginx + git http-backend (HTTP Basic, static
# credential) and through refgate to the same upstream with the same
# credential, alternating, RUNS times each, each push to a fresh upstream
# repository. Prints the median wall time of each, their ratio, and the
# gateway's peak RSS (VmHWM). Two gateway paths are measured:
#   create  - a new branch: no rule needs ancestry, the pack streams through
#             to upstream as it arrives;
#   update  - a fast-forward under rules that tell update from force: the
#             pack is checked against the mirror (fetched only when it lacks
#             the old id) and overlapped with forwarding, its trailing
#             checksum held back until the decision.
# Usage: bench/push_http.sh [SIZE_MB] [RUNS]     (defaults 100 and 5)
# Needs a built tree (REFGATE=path/to/refgate, default build/cli/refgate)
# and nginx + fcgiwrap (scripts/lib.sh installs them).
set -euo pipefail
SIZE_MB=${1:-100}
RUNS=${2:-5}
REPO=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
REFGATE=$(bench_binary REFGATE cli/refgate)
export REFGATE

# The integration tests' helpers: a throwaway $T, the gateway, nginx.
# shellcheck source=../tests/integration/lib.sh
source "$REPO/tests/integration/lib.sh"
# shellcheck source=../tests/integration/lib_http.sh
source "$REPO/tests/integration/lib_http.sh"

make_remote b
start_http_upstream basic
write_remote_config '[
  {"name": "open", "repos": ["gitsrv/**"], "refs": ["refs/heads/new"], "actions": ["create"], "effect": "allow"},
  {"name": "ff-only", "repos": ["gitsrv/**"], "refs": ["refs/heads/main"], "actions": ["update"], "effect": "allow"},
  {"name": "no-force", "repos": ["gitsrv/**"], "refs": ["refs/heads/main"], "actions": ["force"], "effect": "deny"}
]' "$(remote_upstream_json gitsrv "$HTTP_URL")"
start_gateway
TOKEN=$(mint gitsrv/acme/b)
DIRECT_URL="http://$REMOTE_USER:$REMOTE_SECRET@${HTTP_URL#http://}/acme/b.git"

# The commit to push: upstream's main, then SIZE_MB of random bytes on top.
git clone -q "file://$T/remote/acme/b.git" "$T/src"
head -c $((SIZE_MB * 1024 * 1024)) /dev/urandom >"$T/src/blob.bin"
git -C "$T/src" add blob.bin && git -C "$T/src" commit -q -m "big"
BASE=$(git -C "$T/src" rev-parse HEAD~1)

fresh_remote() { # upstream acme/b.git with only the base commit
  rm -rf "$T/remote/acme/b.git"
  git init -q --bare "$T/remote/acme/b.git"
  git -C "$T/remote/acme/b.git" config http.receivepack true
  git -C "$T/src" push -q "$T/remote/acme/b.git" "$BASE:refs/heads/main"
}

now() { date +%s.%N; }
elapsed() { awk -v a="$(now)" -v b="$1" 'BEGIN {print a - b}'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
direct_push() { # REF
  env GIT_CONFIG_COUNT=0 git -C "$T/src" push -q "$DIRECT_URL" "HEAD:$1"
}
gateway_push() { # REF
  use_remote_token "$TOKEN" gitsrv
  git -C "$T/src" push -q "$HTTP_URL/acme/b.git" "HEAD:$1"
}
landed() { # REF
  [ "$(remote_ref b "$1")" = "$(git -C "$T/src" rev-parse HEAD)" ] ||
    { echo "push to $1 did not land" >&2; cat "$T/gateway.log" >&2; exit 1; }
}

direct=() create=() update=()
for _ in $(seq "$RUNS"); do
  fresh_remote; t0=$(now); direct_push refs/heads/new; direct+=("$(elapsed "$t0")"); landed refs/heads/new
  fresh_remote; t0=$(now); gateway_push refs/heads/new; create+=("$(elapsed "$t0")"); landed refs/heads/new
  fresh_remote; t0=$(now); gateway_push refs/heads/main; update+=("$(elapsed "$t0")"); landed refs/heads/main
done

md=$(printf '%s\n' "${direct[@]}" | median)
mc=$(printf '%s\n' "${create[@]}" | median)
mu=$(printf '%s\n' "${update[@]}" | median)
rss=$(awk '/VmHWM/ {print $2}' "/proc/$GW_PID/status")
div() { awk -v a="$1" -v b="$2" 'BEGIN {print a / b}'; }
printf 'push of a %d MB incompressible commit to nginx + git http-backend, %d runs each (median wall time)\n' \
  "$SIZE_MB" "$RUNS"
printf '  direct (HTTP Basic)              %6.2f s\n' "$md"
printf '  via refgate, streamed (create)   %6.2f s   ratio %.2f\n' "$mc" "$(div "$mc" "$md")"
printf '  via refgate, checked (ff)        %6.2f s   ratio %.2f\n' "$mu" "$(div "$mu" "$md")"
printf '  gateway peak RSS                 %6.1f MB\n' "$(div "$rss" 1024)"
printf '  runs: direct %s | create %s | ff %s\n' "${direct[*]}" "${create[*]}" "${update[*]}"
