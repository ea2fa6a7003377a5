# The review console in a real browser (headless Chromium driven by
# Selenium): a reviewer logs in, sees the pushes with a hostile run name
# shown as inert text, approves one pending push (and the next git push of
# it lands) and denies another with a reason full of markup (and the next
# git push of it is refused with that reason), the approval's page shows
# its commit's hostile subject and author as text, and the push's page
# shows the reason literally. Screenshots go to $REFGATE_BUILD/console-shots.
source "$(dirname "$0")/lib_console.sh"

PY=/usr/bin/python3
if ! [ -x /usr/bin/chromium ] || ! [ -x /usr/bin/chromedriver ] ||
  ! "$PY" -c 'import selenium' 2>/dev/null; then
  echo "skip: needs chromium, chromium-driver and python3-selenium (scripts/lib.sh installs them)"
  exit 77
fi
SHOTS=${REFGATE_BUILD:-$T}/console-shots
mkdir -p "$SHOTS"
DENY_REASON='not <b>"this"</b> & not now'
SUBJECT='<script>document.title="pwned"</script> & <b>bold</b>'

make_upstream app
start_console
add_reviewer >/dev/null
"$REFGATE" token mint --config "$CFG" --repo local/acme/app --run "$XSS_RUN" >"$T/token"

id_in() { grep -o 'refgate approve [a-z2-7]\{10\}' "$1" | head -1 | cut -d' ' -f3; }

test_pushes_to_review() {
  use_token "$(cat "$T/token")"
  clone app "$T/w"
  commit "$T/w" a.txt
  git -C "$T/w" push -q origin "HEAD:refs/heads/feature/a" 2>"$T/p0" || { cat "$T/p0"; fail "push"; }
  echo release >"$T/w/r.txt"
  git -C "$T/w" add r.txt
  GIT_AUTHOR_NAME="Eve \"&amp;\" O'Hara" git -C "$T/w" commit -q -m "$SUBJECT"
  git -C "$T/w" tag v1
  git -C "$T/w" tag v2
  ! git -C "$T/w" push origin v1 2>"$T/p1" || fail "v1 landed"
  ! git -C "$T/w" push origin v2 2>"$T/p2" || fail "v2 landed"
  id_in "$T/p1" >"$T/id1"
  id_in "$T/p2" >"$T/id2"
  [ -s "$T/id1" ] && [ -s "$T/id2" ] || fail "no approval ids"
}

test_a_reviewer_approves_one_and_denies_the_other_in_the_browser() {
  load_console
  "$PY" "$REFGATE_SRC/tests/support/console_browser.py" decide "$CONSOLE" "$REVIEWER" \
    "$REVIEWER_PASSWORD" "$(cat "$T/id1")" "$(cat "$T/id2")" "$DENY_REASON" "$SUBJECT" "$SHOTS"
}

test_the_approved_push_lands_and_the_denied_one_is_refused() {
  load_console
  use_token "$(cat "$T/token")"
  git -C "$T/w" push -q origin v1 2>"$T/p3" || { cat "$T/p3"; fail "the approved push"; }
  [ -n "$(upstream_ref app refs/tags/v1)" ] || fail "v1 did not land"
  ! git -C "$T/w" push origin v2 2>"$T/p4" || fail "the denied push landed"
  assert_contains "$T/p4" "denied by alice via console: $DENY_REASON"
  [ -z "$(upstream_ref app refs/tags/v2)" ] || fail "v2 landed"
}

test_the_denied_pushs_page_shows_the_reason_inert() {
  load_console
  local id
  id=$(jq -r 'select(.type == "decision" and .ref == "refs/tags/v2") | .push_id' \
    "$T/state/audit.jsonl" | tail -1)
  "$PY" "$REFGATE_SRC/tests/support/console_browser.py" push "$CONSOLE" "$REVIEWER" \
    "$REVIEWER_PASSWORD" "$id" "$DENY_REASON" "$SHOTS"
  ls "$SHOTS"/console-*.png >/dev/null
}

run_tests
