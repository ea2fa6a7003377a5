#!/usr/bin/env bash
# Load: CLIENTS concurrent git clients (default 64) push allowed and denied
# refs of 10 KB to 10 MB through one gateway to a local upstream for SECONDS
# (default 30), then every decision is checked against upstream and the
# audit log (bench/load.py says how). Prints pushes/s, p50/p99 latency and
# the gateway's peak RSS; exits 1 on any wrong decision or audit gap.
# Usage: bench/load.sh [CLIENTS] [SECONDS]
# Needs a built tree: REFGATE=path/to/refgate (default build/cli/refgate).
set -euo pipefail
CLIENTS=${1:-64}
SECONDS_=${2:-30}
REPO=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
REFGATE=$(bench_binary REFGATE cli/refgate)

T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-load.XXXXXX")
GW_PID=
trap '[ -n "$GW_PID" ] && kill $GW_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
export HOME=$T GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
export GIT_AUTHOR_NAME=l GIT_AUTHOR_EMAIL=l@l GIT_COMMITTER_NAME=l GIT_COMMITTER_EMAIL=l@l
git config --global init.defaultBranch main

git init -q --bare "$T/up/acme/app.git"
git init -q "$T/seed"
echo seed >"$T/seed/README" && git -C "$T/seed" add README && git -C "$T/seed" commit -q -m seed
git -C "$T/seed" push -q "$T/up/acme/app.git" main

# main protected; feature branches created and fast-forwarded; no force.
cat >"$T/refgate.json" <<JSON
{"listen": "127.0.0.1:0", "state_dir": "state",
 "upstreams": [{"host": "local", "url": "file://$T/up"}],
 "rules": [
  {"name": "protect-main", "refs": ["refs/heads/main"], "effect": "deny", "reason": "main is protected"},
  {"name": "features", "refs": ["refs/heads/feature/**"], "actions": ["create", "update"], "effect": "allow"}]}
JSON
"$REFGATE" serve --config "$T/refgate.json" 2>"$T/gw.log" &
GW_PID=$!
for _ in $(seq 100); do [ -s "$T/state/url" ] && break; sleep 0.05; done
# One run token per client, as 64 sandboxed runs would hold (one token's
# concurrent requests are capped by limits.per_token).
for i in $(seq "$CLIENTS"); do
  "$REFGATE" token mint --config "$T/refgate.json" --repo local/acme/app --ttl 2h --run "load-$i"
done >"$T/tokens"
python3 "$REPO/bench/load.py" --gateway "$(cat "$T/state/url")" --tokens "$T/tokens" \
  --upstream "$T/up" --state "$T/state" --refgate "$REFGATE" --config "$T/refgate.json" \
  --work "$T/work" --gateway-pid "$GW_PID" --clients "$CLIENTS" --seconds "$SECONDS_"
