# The review console's one-push page for a remote upstream (nginx + git
# http-backend, static credentials): what an update brought is read from
# the gateway's mirror of upstream, which is made and fetched only for a
# push the rules must inspect (here: an update of a feature branch, where
# update and force differ), before it is forwarded. So the first push (a
# create) finds no mirror; once the next push has fetched one, the first
# push's page lists its commits and changed paths while the second's says
# the mirror lacks them; a denied ref's objects never reached upstream.
source "$(dirname "$0")/lib_console.sh"
source "$(dirname "$0")/lib_http.sh"

make_remote app
start_http_upstream basic
write_remote_config "$CONSOLE_RULES" "$(remote_upstream_json gitsrv "$HTTP_URL")" \
  '"console": {"listen": "127.0.0.1:0"}'
start_gateway
for _ in $(seq 1 100); do [ -s "$T/state/console.url" ] && break; sleep 0.05; done
load_console
add_reviewer >/dev/null
login "$T/jar" >/dev/null
TOKEN=$(mint gitsrv/acme/app)

# push_page REF [N]: the page of the Nth push (default 1) of REF.
push_page() {
  local id
  id=$(jq -r --arg r "$1" 'select(.type == "decision" and .ref == $r) | .push_id' \
    "$T/state/audit.jsonl" | sed -n "${2:-1}p")
  [ -n "$id" ] || fail "no push of $1"
  ccurl -b "$T/jar" "$CONSOLE/push?id=$id"
}

test_a_landed_push_is_read_from_the_mirror_once_it_has_fetched() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w1"
  git -C "$T/w1" switch -q -c feature/r
  commit "$T/w1" 'r1&.txt'
  commit "$T/w1" r2.txt
  git -C "$T/w1" push -q origin feature/r 2>"$T/p1" || { cat "$T/p1"; fail "push 1"; }
  [ -n "$(remote_ref app refs/heads/feature/r)" ] || fail "feature/r did not land"
  push_page refs/heads/feature/r >"$T/r1.html"
  assert_contains "$T/r1.html" "Unavailable: there is no mirror of gitsrv/acme/app here"
  # An update: the rules need its ancestry, so the mirror is made (fetched) first.
  commit "$T/w1" r3.txt
  git -C "$T/w1" push -q origin feature/r 2>"$T/p2" || { cat "$T/p2"; fail "push 2"; }
  push_page refs/heads/feature/r 1 >"$T/r2.html"
  assert_contains "$T/r2.html" "<td>change r2.txt</td>"
  assert_contains "$T/r2.html" "<td>change r1&amp;.txt</td>"
  assert_contains "$T/r2.html" "<li><code>A r1&amp;.txt</code></li>"
  assert_contains "$T/r2.html" "<li><code>A r2.txt</code></li>"
  assert_not_contains "$T/r2.html" "README.md"
  assert_contains "$T/r2.html" '<tr class="decides"><td>features</td><td>allow</td><td>enforce</td><td>matched</td><td>decided</td></tr>'
  push_page refs/heads/feature/r 2 >"$T/r3.html"
  assert_contains "$T/r3.html" "unavailable: the objects are not in this gateway&#39;s mirror of upstream"
  [ -d "$T/state/mirrors/gitsrv/acme/app.git" ] || fail "no mirror"
}

test_a_denied_ref_never_reached_upstream() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w2"
  commit "$T/w2" main.txt
  ! git -C "$T/w2" push origin main 2>"$T/p3" || fail "main moved"
  push_page refs/heads/main >"$T/m.html"
  assert_contains "$T/m.html" '<p class="note unavailable">unavailable: the objects never reached upstream</p>'
  assert_contains "$T/m.html" 'Decided by (as recorded): <strong class="decided-by">protect-main</strong>.'
}

run_tests
