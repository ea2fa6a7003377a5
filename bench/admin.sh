#!/usr/bin/env bash
# Admin listener and reload benchmark. Prints:
#   - the cost of one /metrics and one /healthz answer against the
#     listener's cheapest answer (a 404), as medians over N requests on one
#     kept-alive connection, and their ratios;
#   - the time from SIGHUP to the "reloaded" log line, median over R reloads
#     of a config with RULES rules;
#   - the wall time of a 20 MB push through the gateway alone and with a
#     reload every 50 ms during it (ratio), so reloading under load shows
#     its cost.
# Usage: bench/admin.sh [N] [R] [RULES]     (defaults 2000, 20, 200)
# Needs a built tree: REFGATE=path/to/refgate (default build/cli/refgate).
set -euo pipefail
N=${1:-2000}
R=${2:-20}
RULES=${3:-200}
source "$(dirname "$0")/lib.sh"
REFGATE=$(bench_binary REFGATE cli/refgate)

T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-bench-admin.XXXXXX")
GW_PID=
trap '[ -n "$GW_PID" ] && kill $GW_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
bench_git_env "$T"

git init -q --bare "$T/up/acme/app.git"
git init -q "$T/src"
echo base >"$T/src/README" && git -C "$T/src" add README && git -C "$T/src" commit -q -m base
git -C "$T/src" push -q "$T/up/acme/app.git" main

rules=$(python3 -c "
import json
print(json.dumps([{'name': 'r%d' % i, 'refs': ['refs/heads/team%d/**' % i], 'effect': 'allow'}
                  for i in range($RULES)] + [{'name': 'open', 'refs': ['refs/heads/**'], 'effect': 'allow'}]))")
cat >"$T/refgate.json" <<JSON
{"listen": "127.0.0.1:0", "state_dir": "state", "admin": {"listen": "127.0.0.1:0"},
 "upstreams": [{"host": "local", "url": "file://$T/up"}], "rules": $rules}
JSON
"$REFGATE" serve --config "$T/refgate.json" 2>"$T/log" &
GW_PID=$!
for _ in $(seq 200); do [ -s "$T/state/admin.url" ] && [ -s "$T/state/url" ] && break; sleep 0.05; done
ADMIN=$(cat "$T/state/admin.url")
GW=$(cat "$T/state/url")

python3 - "$ADMIN" "$N" <<'PY'
import http.client, statistics, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); n = int(sys.argv[2])
c = http.client.HTTPConnection(u.hostname, u.port)
def median(path):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); c.request("GET", path); r = c.getresponse(); body = r.read()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), len(body)
base, _ = median("/nope")
m, size = median("/metrics")
h, _ = median("/healthz")
print(f"404 (baseline): {base * 1e6:.0f} us   /metrics: {m * 1e6:.0f} us ({size} bytes, x{m / base:.2f})"
      f"   /healthz: {h * 1e6:.0f} us (x{h / base:.2f})   median of {n}")
PY

# reload_once: SIGHUP and wait for one more "reloaded" line; prints seconds.
reload_once() {
  local before t0; before=$(grep -c "reloaded config=" "$T/log" || true)
  t0=$(date +%s.%N)
  kill -HUP "$GW_PID"
  while [ "$(grep -c "reloaded config=" "$T/log" || true)" -le "$before" ]; do sleep 0.001; done
  echo "$(date +%s.%N) - $t0" | bc -l
}
for _ in $(seq "$R"); do reload_once; done | sort -n | awk -v r="$RULES" '{a[NR]=$1} END {
  printf "reload (%d rules): median %.1f ms, max %.1f ms over %d\n", r, a[int((NR+1)/2)]*1000, a[NR]*1000, NR }'

# Two 20 MB commits, each pushed as a new branch: one alone, one with a
# reload every 50 ms while it runs.
for name in alone reloading; do
  git -C "$T/src" switch -q -c "$name" main
  head -c $((20 * 1024 * 1024)) /dev/urandom >"$T/src/big" && git -C "$T/src" add big &&
    git -C "$T/src" commit -q -m "$name"
done
TOKEN=$("$REFGATE" token mint --config "$T/refgate.json" --repo local/acme/app)
# push BRANCH: prints the wall time in seconds.
push() {
  local t0; t0=$(date +%s.%N)
  git -C "$T/src" -c "credential.helper=!f() { echo username=run; echo password=$TOKEN; }; f" \
    push -q "$GW/local/acme/app.git" "$1:refs/heads/$1"
  echo "$(date +%s.%N) - $t0" | bc -l
}
alone=$(push alone)
before=$(grep -c "reloaded config=" "$T/log" || true)
( while :; do kill -HUP "$GW_PID" 2>/dev/null || exit 0; sleep 0.05; done ) &
HUP=$!
reloading=$(push reloading)
kill "$HUP"; wait "$HUP" 2>/dev/null || true
awk -v a="$alone" -v b="$reloading" -v n="$(( $(grep -c "reloaded config=" "$T/log") - before ))" \
  'BEGIN { printf "20 MB push: alone %.2f s, with a reload every 50 ms %.2f s (x%.2f, %d reloads during it)\n", a, b, b / a, n }'
