# Run tokens across three gateways on one database: a token minted on one
# gateway pushes through every other; revoked through one gateway, it is
# refused by the others within a second (polled over raw HTTP, timed, no
# fixed sleep), with the reason, and git's push through them fails without
# landing; other tokens keep working.
source "$(dirname "$0")/lib_multi.sh"

make_upstream app
multi_setup 3 "$STANDARD_RULES"
TOKEN=$(gw_mint 1 local/acme/app)
OTHER=$(gw_mint 3 local/acme/app)
clone app "$T/w"

# status I TOKEN: the HTTP status of an authenticated advertisement request
# to gateway I, its body in $T/status.body (the token goes to curl on
# stdin, never in its arguments).
status() {
  curl -s -o "$T/status.body" -w '%{http_code}' -K - \
    "$(gw_url "$1")/local/acme/app.git/info/refs?service=git-receive-pack" <<<"user = \"run:$2\""
}

# push_through I TOKEN BRANCH: push a new commit as feature/BRANCH through
# gateway I; git's output in $T/push.out. Fails when git does.
push_through() {
  gw_use "$1" "$2"
  git -C "$T/w" switch -q -C "feature/$3" main
  commit "$T/w" "$3.txt"
  git -C "$T/w" push origin "feature/$3" >"$T/push.out" 2>&1
}

test_a_token_minted_on_one_gateway_pushes_through_every_gateway() {
  local i
  for i in 1 2 3; do
    push_through "$i" "$TOKEN" "minted-on-1-via-$i" || { cat "$T/push.out"; fail "push through gateway $i"; }
    [ "$(upstream_ref app "feature/minted-on-1-via-$i")" = "$(git -C "$T/w" rev-parse HEAD)" ] ||
      fail "feature/minted-on-1-via-$i did not land through gateway $i"
  done
  [ "$(status 2 "$OTHER")" = 200 ] || fail "gateway 2 refuses gateway 3's token"
}

test_a_token_revoked_through_one_gateway_is_refused_by_the_others_within_a_second() {
  local i ts t0 t1 ms code
  # Every gateway accepts it right before (so a cache, if any, holds it).
  for i in 1 2 3; do [ "$(status "$i" "$TOKEN")" = 200 ] || fail "gateway $i refused it before"; done
  ts=${EPOCHREALTIME/./}
  "$REFGATE" token revoke --config "$(gw_cfg 2)" - <<<"$TOKEN" >"$T/revoke.out" 2>&1 ||
    { cat "$T/revoke.out"; fail "revoke through gateway 2"; }
  t0=${EPOCHREALTIME/./}
  note "refgate token revoke took $(( (t0 - ts) / 1000 )) ms"
  for i in 1 3 2; do
    # Bounded: 10 s; the assertion below is on the time it took.
    while code=$(status "$i" "$TOKEN"); [ "$code" = 200 ]; do
      [ $(( ${EPOCHREALTIME/./} - t0 )) -lt 10000000 ] || fail "gateway $i still accepts it after 10 s"
    done
    t1=${EPOCHREALTIME/./}
    ms=$(( (t1 - t0) / 1000 ))
    note "gateway $i refused the revoked token $ms ms after the revoke returned (HTTP $code)"
    [ "$code" = 403 ] || { cat "$T/status.body"; fail "gateway $i answered $code, not 403"; }
    assert_contains "$T/status.body" "revoked"
    [ "$ms" -lt 1000 ] || fail "gateway $i took $ms ms (>= 1 s) to refuse it"
  done
}

test_git_push_with_the_revoked_token_fails_on_every_gateway_and_lands_nothing() {
  local i
  for i in 1 2 3; do
    if push_through "$i" "$TOKEN" "after-revoke-$i"; then fail "a push with a revoked token passed gateway $i"; fi
    assert_contains "$T/push.out" "revoked"
    [ -z "$(upstream_ref app "feature/after-revoke-$i")" ] || fail "it landed through gateway $i"
  done
}

test_another_token_still_pushes_through_every_gateway() {
  local i
  for i in 1 2 3; do
    push_through "$i" "$OTHER" "other-via-$i" || { cat "$T/push.out"; fail "push through gateway $i"; }
  done
}

test_the_revocation_is_in_the_one_audit_chain() {
  db_lines >"$T/lines"
  jq -e -s '[.[] | select(.type == "event" and .event == "token-revoke")] | length == 1' "$T/lines" >/dev/null ||
    { cat "$T/lines"; fail "no single token-revoke event in the database chain"; }
  multi_verify
}

run_tests
