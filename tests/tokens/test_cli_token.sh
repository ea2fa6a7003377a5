# `refgate token mint|revoke|key rotate` as a launcher uses them: mint
# prints the token and nothing else, repos are checked against the
# configured upstreams, usage errors exit 2 and failures 1, revocation is by
# hash prefix (in the store when no gateway answers), key rotation needs the
# running gateway, and no error message ever carries a token.
set -uo pipefail

: "${REFGATE:?set REFGATE to the refgate binary}"
T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-token.XXXXXX")
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/upstream" "$T/other/upstream"
# The state directories exist already; tokens/test_token.c covers creating them.
mkdir -m 700 "$T/state" "$T/other/state"
cat >"$T/refgate.json" <<JSON
{"state_dir": "state",
 "upstreams": [{"host": "local", "url": "file://$T/upstream"},
               {"host": "github.com", "url": "https://github.com"}]}
JSON
cat >"$T/other/refgate.json" <<JSON
{"state_dir": "state", "upstreams": [{"host": "local", "url": "file://$T/other/upstream"}]}
JSON
CFG=$T/refgate.json
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# run EXPECTED_STATUS ARGS...: run refgate, keep stdout/stderr in $T/out, $T/err.
run() {
  local want=$1 got
  shift
  "$REFGATE" "$@" >"$T/out" 2>"$T/err"
  got=$?
  if [ "$got" != "$want" ]; then
    fail "refgate $* exited $got, expected $want; stderr: $(cat "$T/err")"
    return 1
  fi
  return 0
}

# claims TOKEN: the decoded JSON claims of a token.
claims() {
  local p
  p=$(printf '%s' "$1" | cut -d. -f3 | tr '_-' '/+')
  while [ $((${#p} % 4)) -ne 0 ]; do p="$p="; done
  printf '%s' "$p" | base64 -d
}

# never_leaks TOKEN: the token is in neither stdout nor stderr of the last run.
never_leaks() {
  if grep -qF -- "$1" "$T/err" "$T/out"; then
    fail "the token appeared in the output of a failed command"
  fi
}

# --- mint ------------------------------------------------------------------

run 0 token mint --config "$CFG" --repo local/acme/app --run ci-42
TOKEN=$(cat "$T/out")
[ "$(wc -l <"$T/out")" = 1 ] || fail "mint must print exactly one line"
[[ "$TOKEN" =~ ^rg2\.[0-9a-f]{16}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{86}$ ]] || fail "not a token: $TOKEN"
[ ! -s "$T/err" ] || fail "mint printed on stderr: $(cat "$T/err")"
claims "$TOKEN" | grep -qF '"run":"ci-42","repos":["local/acme/app"]' ||
  fail "claims: $(claims "$TOKEN")"
[ "$(stat -c %a "$T/state/token-ed25519.key")" = 600 ] || fail "token-ed25519.key is not 0600"
kid=$(printf '%s' "$TOKEN" | cut -d. -f2)
grep -q "^key $kid [0-9a-f]\{64\} " "$T/state/token-keys" || fail "the public key was not published: $(cat "$T/state/token-keys")"

run 0 token mint --config "$CFG" --repo local/acme/app.git --repo github.com/acme/lib \
  --repo=local/acme/app --ttl 2h
T2=$(cat "$T/out")
claims "$T2" | grep -qF '"repos":["local/acme/app","github.com/acme/lib"]' ||
  fail ".git is dropped and duplicates merged: $(claims "$T2")"
claims "$T2" | grep -qE '"run":"run-[0-9a-f]{8}"' || fail "default run name: $(claims "$T2")"
exp=$(claims "$T2" | sed 's/.*"exp":\([0-9]*\).*/\1/')
now=$(date +%s)
[ $((exp - now)) -ge 7190 ] && [ $((exp - now)) -le 7200 ] || fail "--ttl 2h gave exp-now=$((exp - now))"

run 2 token mint --config "$CFG" --repo nowhere.example/acme/app &&
  grep -qF "not an upstream host" "$T/err" || fail "unconfigured host: $(cat "$T/err")"
[ ! -s "$T/out" ] || fail "a failed mint printed on stdout"
run 2 token mint --config "$CFG" --repo local/../etc
run 2 token mint --config "$CFG" --repo /local/acme/app
run 2 token mint --config "$CFG" --repo local
run 2 token mint --config "$CFG" --repo local/acme//app
run 2 token mint --config "$CFG" --repo "local/acme/a b"
run 2 token mint --config "$CFG" --repo local/acme/app --ttl 8d
run 2 token mint --config "$CFG" --repo local/acme/app --ttl 0
run 2 token mint --config "$CFG" --repo local/acme/app --ttl soon
run 2 token mint --config "$CFG" --repo local/acme/app --run "two words"
run 2 token mint --config "$CFG"
run 2 token mint --repo local/acme/app
run 2 token mint --config "$CFG" --repo
run 1 token mint --config "$T/missing.json" --repo local/acme/app
run 2 token mint --config "$CFG" --repo local/acme/app "$TOKEN" && never_leaks "$TOKEN"
run 2 token "$TOKEN" && never_leaks "$TOKEN"

# --- revoke ----------------------------------------------------------------

prefix=$(printf '%s' "$TOKEN" | sha256sum | cut -c1-12)
run 0 token revoke --config "$CFG" "$TOKEN" &&
  [ "$(cat "$T/out")" = "revoked $prefix" ] || fail "revoke said: $(cat "$T/out")"
[ "$(stat -c %a "$T/state/revoked")" = 600 ] || fail "revoked is not 0600"
[ "$(wc -l <"$T/state/revoked")" = 1 ] || fail "one revocation line expected"
grep -qF -- "$TOKEN" "$T/state/revoked" && fail "the revocation file holds the token itself"

prefix2=$(printf '%s' "$T2" | sha256sum | cut -c1-12)
printf '%s\n' "$T2" | "$REFGATE" token revoke --config "$CFG" - >"$T/out" 2>"$T/err" ||
  fail "revoke from stdin failed: $(cat "$T/err")"
[ "$(cat "$T/out")" = "revoked $prefix2" ] || fail "revoke - said: $(cat "$T/out")"
run 0 token revoke --config "$CFG" "$TOKEN" || fail "revoking twice is fine"

run 0 token mint --config "$T/other/refgate.json" --repo local/acme/app
FOREIGN=$(cat "$T/out")
run 1 token revoke --config "$CFG" "$FOREIGN" && never_leaks "$FOREIGN"
grep -qF "this gateway's token store" "$T/err" || fail "foreign token: $(cat "$T/err")"
run 1 token revoke --config "$CFG" "${FOREIGN%?}" && never_leaks "${FOREIGN%?}"
run 2 token revoke --config "$CFG" "$FOREIGN" "$TOKEN" && never_leaks "$FOREIGN"
run 2 token revoke --config "$CFG"
printf '' | "$REFGATE" token revoke --config "$CFG" - >"$T/out" 2>"$T/err"
[ $? = 1 ] || fail "revoke of empty stdin must fail"

# --- key rotate -------------------------------------------------------------

run 1 token key rotate --config "$CFG" && grep -qF "is the gateway running" "$T/err" ||
  fail "rotate without a gateway: $(cat "$T/err")"
run 2 token key --config "$CFG"
run 2 token key rotate --config "$CFG" extra

# --- help ------------------------------------------------------------------

run 0 token --help && grep -qF "usage: refgate token mint" "$T/out" || fail "token --help"
run 0 token mint --help && grep -qF -- "--ttl" "$T/out" || fail "token mint --help"
run 0 token revoke --help || fail "token revoke --help"
run 0 token key rotate --help && grep -qF "key rotate" "$T/out" || fail "token key rotate --help"
run 2 token
run 2 token frobnicate

if [ "$failures" -gt 0 ]; then
  echo "$failures failed" >&2
  exit 1
fi
echo "all passed"
