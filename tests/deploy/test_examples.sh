#!/bin/bash
# The example configs `cmake --install` ships are valid and mean what they
# say: deploy/refgate.example.json (a local upstream),
# deploy/github-app.example.json (GitHub through a GitHub App) and
# deploy/gitlab.example.json (GitLab with a static token, user oauth2).
# With their paths pointed at temporary files (a generated App key, a 0600
# token file), each lints clean (`refgate policy lint`), a push to main is
# denied by `refgate policy check`, and `refgate serve` starts on it (which
# also checks the credential files) and stops on SIGTERM.
set -euo pipefail

T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-examples.XXXXXX")
GW_PID=
cleanup() {
  [ -z "$GW_PID" ] || { kill "$GW_PID" 2>/dev/null || true; wait "$GW_PID" 2>/dev/null || true; }
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# localize NAME: the example in $T/NAME/refgate.json with every machine
# path moved under $T/NAME and the port left to the kernel.
localize() {
  local d=$T/$1
  mkdir -p "$d/etc" "$d/srv/git" "$d/run"
  sed -e "s|/var/lib/refgate|$d/state|g; s|/etc/refgate/|$d/etc/|g; s|/run/refgate/|$d/run/|g" \
    -e "s|file:///srv/git|file://$d/srv/git|g; s|127.0.0.1:8470|127.0.0.1:0|" \
    "$REFGATE_SRC/deploy/$1" >"$d/refgate.json"
  ! grep -nE '"/(etc|var|run|srv)/|file:///srv' "$d/refgate.json" ||
    fail "$1 names a path this test does not move"
}

check() {
  local name=$1 d=$T/$1 host rc
  host=$(jq -r '.upstreams[0].host' "$d/refgate.json")
  "$REFGATE" policy lint --config "$d/refgate.json" >"$d/lint" 2>&1 ||
    { cat "$d/lint"; fail "$name: policy lint"; }
  grep -q 'no findings' "$d/lint" || { cat "$d/lint"; fail "$name: lint findings"; }
  rc=0
  "$REFGATE" policy check --config "$d/refgate.json" --repo "$host/acme/app" \
    --ref refs/heads/main --action update >"$d/check" 2>&1 || rc=$?
  [ "$rc" = 1 ] || { cat "$d/check"; fail "$name: a push to main is not denied (exit $rc)"; }
  rc=0
  "$REFGATE" policy check --config "$d/refgate.json" --repo "$host/acme/app" \
    --ref refs/heads/agent/fix-1 --action create >"$d/check" 2>&1 || rc=$?
  [ "$rc" = 0 ] || { cat "$d/check"; fail "$name: an agent branch is not allowed (exit $rc)"; }
  "$REFGATE" serve --config "$d/refgate.json" 2>"$d/serve.log" &
  GW_PID=$!
  for _ in $(seq 1 200); do
    [ -s "$d/state/url" ] && break
    kill -0 "$GW_PID" 2>/dev/null || { cat "$d/serve.log"; fail "$name: refgate serve exited"; }
    sleep 0.05
  done
  [ -s "$d/state/url" ] || fail "$name: refgate serve wrote no url"
  kill -TERM "$GW_PID"
  rc=0; wait "$GW_PID" || rc=$?
  GW_PID=
  [ "$rc" = 0 ] || { cat "$d/serve.log"; fail "$name: refgate serve exited $rc on SIGTERM"; }
  echo "ok: $name ($host): lints clean, denies main, allows agent/**, serves"
}

localize refgate.example.json
[ "$(jq -r '.upstreams[0].url' "$T/refgate.example.json/refgate.json")" = "file://$T/refgate.example.json/srv/git" ] ||
  fail "refgate.example.json: not a local upstream"
check refgate.example.json

localize github-app.example.json
d=$T/github-app.example.json
[ "$(jq -r '.upstreams[0].credentials.type' "$d/refgate.json")" = github-app ] ||
  fail "github-app.example.json: no github-app credentials"
key=$(jq -r '.upstreams[0].credentials.private_key_file' "$d/refgate.json")
openssl genrsa -out "$key" 2048 2>/dev/null
chmod 600 "$key"
check github-app.example.json

localize gitlab.example.json
d=$T/gitlab.example.json
[ "$(jq -r '.upstreams[0].credentials | .type + " " + .username' "$d/refgate.json")" = "static oauth2" ] ||
  fail "gitlab.example.json: not a static oauth2 credential"
tok=$(jq -r '.upstreams[0].credentials.token_file' "$d/refgate.json")
printf 'glpat-example\n' >"$tok"
chmod 600 "$tok"
check gitlab.example.json
