# Shared by the integration tests: a throwaway directory with local bare
# upstreams, a config, a running `refgate serve`, and a git environment that
# pushes through it the way a sandboxed run does (pushInsteadOf + a
# credential helper that answers with the run token, via GIT_CONFIG_*).
# Tests are functions named test_*; `run_tests` runs them all and prints a
# closing "N passed, N failed" line.
set -euo pipefail

: "${REFGATE:?set REFGATE to the refgate binary}"
T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-test.XXXXXX")
GW_PID=
export HOME=$T/home GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 LANG=C
export GIT_AUTHOR_NAME=Tester GIT_AUTHOR_EMAIL=t@example.invalid
export GIT_COMMITTER_NAME=Tester GIT_COMMITTER_EMAIL=t@example.invalid
mkdir -p "$HOME" "$T/upstream"
git config --global init.defaultBranch main
git config --global advice.detachedHead false

cleanup() {
  stop_gateway
  stop_started_gateways
  rm -rf "$T"
}

# run_tests runs each test in a subshell, so a gateway a test started is not
# in this shell's GW_PID: start_gateway lists every one in $T/gateway.pids,
# and this stops those still running (still ours: their command line names
# $T), waiting (bounded) until they are gone.
stop_started_gateways() {
  local p i
  [ -f "$T/gateway.pids" ] || return 0
  for p in $(cat "$T/gateway.pids"); do
    grep -qaF -- "$T/" "/proc/$p/cmdline" 2>/dev/null && kill -TERM "$p" 2>/dev/null || true
  done
  for p in $(cat "$T/gateway.pids"); do
    for i in $(seq 1 600); do
      grep -qaF -- "$T/" "/proc/$p/cmdline" 2>/dev/null || break
      grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null && break
      sleep 0.05
    done
  done
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; return 1; }

# assert_contains FILE TEXT: FILE has TEXT as a fixed string.
assert_contains() {
  grep -qF -- "$2" "$1" || { echo "--- $1:"; cat "$1"; fail "expected '$2' in $1"; }
}
assert_not_contains() {
  ! grep -qF -- "$2" "$1" || { echo "--- $1:"; cat "$1"; fail "did not expect '$2' in $1"; }
}

# make_upstream NAME [git init options]: a bare repo acme/NAME.git with one
# commit on main; prints nothing.
make_upstream() {
  local name=$1; shift
  local bare=$T/upstream/acme/$name.git seed=$T/seed-$name
  git init -q --bare "$@" "$bare"
  git init -q "$@" "$seed"
  echo "# $name" >"$seed/README.md"
  git -C "$seed" add README.md
  git -C "$seed" commit -q -m "Initial commit"
  git -C "$seed" push -q "$bare" main
  rm -rf "$seed"
}

upstream_ref() { git --git-dir="$T/upstream/acme/$1.git" rev-parse --verify -q "$2" || true; }

# write_config RULES_JSON [EXTRA_TOP_LEVEL_JSON_MEMBERS]
write_config() {
  cat >"$T/refgate.json" <<JSON
{
  "listen": "127.0.0.1:0",
  "state_dir": "state",
  ${2:+$2,}
  "upstreams": [{"host": "local", "url": "file://$T/upstream"}],
  "rules": $1
}
JSON
}

# The rules most tests use: main protected, feature branches open to
# create and fast-forward, tags may be created but never moved or deleted.
STANDARD_RULES='[
  {"name": "protect-main", "refs": ["refs/heads/main"], "actions": ["update", "force", "delete"],
   "effect": "deny", "reason": "main is protected"},
  {"name": "features", "refs": ["refs/heads/feature/**"], "actions": ["create", "update"],
   "effect": "allow"},
  {"name": "release-tags", "refs": ["refs/tags/v*"], "actions": ["create"], "effect": "allow"}
]'

start_gateway() {
  rm -f "$T/state/url"
  "$REFGATE" serve --config "$T/refgate.json" 2>>"$T/gateway.log" &
  GW_PID=$!
  echo "$GW_PID" >>"$T/gateway.pids"
  # Bounded (a busy machine under the sanitizers can take long), not timed.
  for _ in $(seq 1 2400); do
    [ -s "$T/state/url" ] && break
    kill -0 "$GW_PID" 2>/dev/null || { cat "$T/gateway.log"; fail "gateway exited"; return 1; }
    sleep 0.05
  done
  [ -s "$T/state/url" ] || { cat "$T/gateway.log"; fail "waited 120 s for the gateway to write $T/state/url"; return 1; }
  GW=$(cat "$T/state/url")
}

stop_gateway() {
  if [ -n "$GW_PID" ]; then
    kill -TERM "$GW_PID" 2>/dev/null || true
    wait "$GW_PID" 2>/dev/null || true
    GW_PID=
  fi
}

# mint REPO... [-- extra token args]: prints a token.
mint() {
  local args=()
  for r in "$@"; do args+=(--repo "$r"); done
  "$REFGATE" token mint --config "$T/refgate.json" "${args[@]}"
}

# use_token TOKEN: route this shell's pushes through the gateway with TOKEN
# (empty: no credential helper at all).
use_token() {
  export REFGATE_TOKEN=$1
  export GIT_CONFIG_COUNT=2
  export GIT_CONFIG_KEY_0="url.$GW/local/.pushInsteadOf" GIT_CONFIG_VALUE_0="file://$T/upstream/"
  export GIT_CONFIG_KEY_1=credential.helper
  if [ -n "$1" ]; then
    export GIT_CONFIG_VALUE_1='!f() { test "$1" = get && echo username=run && echo "password=$REFGATE_TOKEN"; }; f'
  else
    export GIT_CONFIG_VALUE_1=
  fi
}

# clone NAME DIR: a working clone straight from the upstream (fetching does
# not go through the gateway in this version).
clone() { git clone -q "file://$T/upstream/acme/$1.git" "$2"; }

# commit DIR FILE [CONTENT]
commit() {
  echo "${3:-$RANDOM $RANDOM}" >"$1/$2"
  git -C "$1" add "$2"
  git -C "$1" commit -q -m "change $2"
}

# audit_rows: the audit log as one JSON object per ref update: a v2
# decision record with its outcome filled in from its outcome record (when
# it has one), or a v1 record as it is.
audit_rows() {
  jq -c -s '([.[] | select(.type == "outcome") | {key: (.decision_seq | tostring), value: .outcome}]
             | from_entries) as $out
    | .[] | select(.type == "decision" or .type == null)
    | if .outcome == null and $out[.seq | tostring] != null then .outcome = $out[.seq | tostring]
      else . end' "$T/state/audit.jsonl"
}

run_tests() {
  local passed=0 failed=0 t
  # In the order the script defines them, which is the order they build on.
  for t in $(grep -o '^test_[A-Za-z0-9_]*' "${BASH_SOURCE[1]}"); do
    # Not in an `if`: bash ignores errexit inside a tested subshell.
    set +e
    ( set -e; "$t" ) >"$T/$t.out" 2>&1
    local rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
      echo "ok - $t"; passed=$((passed + 1))
    else
      echo "not ok - $t"; sed 's/^/    /' "$T/$t.out"; failed=$((failed + 1))
    fi
  done
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
