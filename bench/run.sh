#!/usr/bin/env bash
# What `refgate run` adds to refgate-run: its own start (the libraries it
# links, libgit2's initialisation), the remotes read, the run token minted
# and revoked over the gateway's control socket. `refgate run --rm --
# /bin/true` in a small clone against `refgate-run --rm -- /bin/true` in
# the same clone (both fork it with every layer and remove the fork), and
# `refgate-run -d` (no fork) for what the fork costs; medians of
# interleaved runs (bench/interleave.py) and the differences. The
# sandbox's own start-up against bwrap is bench/sandbox.sh's part 1.
#
#   bench/run.sh [RUNS]     (default 100)
#
# Needs a built tree: REFGATE and REFGATE_RUN (default: refgate-run next to
# it; see bench/lib.sh for the lookup), python3, jq and git.
set -euo pipefail
runs=${1:-100}
src=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$src/bench/lib.sh"
REFGATE=$(bench_binary REFGATE cli/refgate)
REFGATE_RUN=${REFGATE_RUN:-$(dirname "$(dirname "$REFGATE")")/runner/refgate-run}
REFGATE_RUN=$(bench_binary REFGATE_RUN runner/refgate-run)
for tool in jq git python3; do
    command -v "$tool" >/dev/null || { echo "bench/run.sh: needs $tool" >&2; exit 2; }
done
export REFGATE_RUN

T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-bench-run.XXXXXX")
GW_PID=
trap '[[ -n $GW_PID ]] && kill "$GW_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
bench_git_env "$T/home"
mkdir -p "$T/up/acme"

# A small repository (200 files) and its clone, the directory runs start in.
git init -q "$T/seed"
for i in $(seq 1 200); do echo "line $i" >"$T/seed/f$i.c"; done
git -C "$T/seed" add . && git -C "$T/seed" commit -q -m seed
git clone -q --bare "$T/seed" "$T/up/acme/app.git"
git clone -q "file://$T/up/acme/app.git" "$T/w"
cat >"$T/refgate.json" <<JSON
{"listen": "127.0.0.1:0", "state_dir": "state",
 "upstreams": [{"host": "local", "url": "file://$T/up"}],
 "rules": [{"name": "all", "effect": "allow"}]}
JSON
"$REFGATE" serve --config "$T/refgate.json" 2>"$T/gateway.log" &
GW_PID=$!
for _ in $(seq 1 200); do [[ -s $T/state/url ]] && break; sleep 0.05; done
[[ -s $T/state/url ]] || { cat "$T/gateway.log" >&2; exit 1; }
mkdir -p "$T/nofork"

echo "== refgate run against refgate-run ($runs runs each, interleaved; every run forks and removes its fork)"
python3 "$src/bench/interleave.py" --warmup 5 --runs "$runs" --cwd "$T/w" --json "$T/run.json" \
    "$REFGATE_RUN -q -d $T/nofork -- /bin/true" \
    "$REFGATE_RUN -q --rm -- /bin/true" \
    "$REFGATE run --config $T/refgate.json -q --rm -- /bin/true"
med() { jq ".results[$1].median" "$T/run.json"; }
ms() { awk -v s="$1" 'BEGIN { printf "%.2f ms", s * 1000 }'; }
d=$(med 0) f=$(med 1) r=$(med 2)
echo "   refgate-run -d (no fork)                 median $(ms "$d")"
echo "   refgate-run --rm (fork of 200 files)     median $(ms "$f")   the fork: +$(ms "$(awk -v a="$f" -v b="$d" 'BEGIN{print a-b}')")"
echo "   refgate run --rm (token mint + revoke)   median $(ms "$r")   refgate run: +$(ms "$(awk -v a="$r" -v b="$f" 'BEGIN{print a-b}')")"
echo "   (the gateway's audit log holds $(jq -r 'select(.event == "token-mint") | .event' "$T/state/audit.jsonl" | wc -l) mints and as many revokes)"
