# The review console over raw HTTP (curl), against a real gateway: off
# unless configured and never on the push port; reviewer accounts stored
# hashed and audited; no session redirects to the login; a foreign Host is
# refused (DNS rebinding); a run token is never a credential; every POST
# needs the session's CSRF token and the console's own Origin (port
# included); the pages carry a strict CSP and show pushes, one push's refs,
# approvals and the audit head; one push's page lists each ref's commits
# and changed paths read from upstream (escaped), says unavailable for a
# denied ref, and traces the rules; an approval decided here lets the next push
# land and is audited "via console".
source "$(dirname "$0")/lib_console.sh"

make_upstream app

test_without_a_console_key_there_is_no_console() {
  write_config "$CONSOLE_RULES"
  start_gateway
  sleep 0.2
  [ ! -e "$T/state/console.url" ] || fail "a console without configuration"
  stop_gateway
}

test_the_console_refuses_the_push_port() {
  write_config "$CONSOLE_RULES" '"console": {"listen": "127.0.0.1:8470"}'
  sed -i 's/"listen": "127.0.0.1:0"/"listen": "127.0.0.1:8470"/' "$CFG"
  ! "$REFGATE" serve --config "$CFG" 2>"$T/e1" || fail "served the console on the push port"
  assert_contains "$T/e1" "console.listen"
  assert_contains "$T/e1" "a port of its own"
}

test_the_console_serves_on_its_own_port_and_writes_its_url() {
  start_console
  [ -n "$CONSOLE" ] || fail "no console.url"
  [ "$CONSOLE" != "$GW" ] || fail "the console shares the push URL"
  assert_contains "$T/gateway.log" "console_serving url=$CONSOLE"
}

test_user_add_stores_a_yescrypt_hash_and_audits_it() {
  load_console
  add_reviewer >"$T/u1"
  assert_contains "$T/u1" "added console user alice"
  grep -q '^alice:\$y\$' "$T/state/console-users" || { cat "$T/state/console-users"; fail "not yescrypt"; }
  assert_not_contains "$T/state/console-users" "$REVIEWER_PASSWORD"
  [ "$(stat -c %a "$T/state/console-users")" = 600 ] || fail "mode"
  jq -r 'select(.event == "console-user-add") | .detail' "$T/state/audit.jsonl" >"$T/ev"
  assert_contains "$T/ev" "console user alice set by peer uid $(id -u)"
  assert_not_contains "$T/state/audit.jsonl" "$REVIEWER_PASSWORD"
  assert_not_contains "$T/gateway.log" "$REVIEWER_PASSWORD"
  ! printf 'short\n' | "$REFGATE" console user add --config "$CFG" bob 2>"$T/u2" ||
    fail "a short password was taken"
  assert_contains "$T/u2" "password: 8 to 1024 bytes"
  ! printf 'long enough pw\n' | "$REFGATE" console user add --config "$CFG" 'b<b' 2>"$T/u3" ||
    fail "a bad name was taken"
}

test_pushes_land_in_the_log_for_the_pages() {
  load_console
  "$REFGATE" token mint --config "$CFG" --repo local/acme/app --run "$XSS_RUN" >"$T/token"
  use_token "$(cat "$T/token")"
  clone app "$T/w"
  commit "$T/w" a.txt
  git -C "$T/w" push -q origin "HEAD:$XSS_REF" 2>"$T/p1" || { cat "$T/p1"; fail "feature push"; }
  commit "$T/w" b.txt
  ! git -C "$T/w" push origin HEAD:main 2>"$T/p2" || fail "main moved"
  git -C "$T/w" tag v1
  ! git -C "$T/w" push origin v1 2>"$T/p3" || fail "v1 landed without approval"
  assert_contains "$T/p3" "approval needed"
}

test_without_a_session_pages_redirect_to_login() {
  load_console
  for page in / /pushes /approvals /integrity "/push?id=x"; do
    ccurl -o /dev/null -D "$T/h" "$CONSOLE$page"
    grep -qi '^HTTP/1.1 303' "$T/h" || { cat "$T/h"; fail "$page: not a redirect"; }
    grep -qi '^Location: /login' "$T/h" || { cat "$T/h"; fail "$page: not to the login"; }
  done
  [ "$(status_of -H "Origin: $CONSOLE" -d 'csrf=x&id=y&action=approve' "$CONSOLE/approvals")" = 403 ] ||
    fail "a POST without a session"
}

test_a_foreign_host_is_refused() {
  load_console
  local port=${CONSOLE_HOST##*:}
  for host in "evil.example:$port" "localhost:$port" "127.0.0.1" "127.0.0.1:1"; do
    code=$(status_of -H "Host: $host" "$CONSOLE/login")
    [ "$code" = 421 ] || fail "Host $host answered $code"
  done
}

test_a_run_token_is_never_a_credential() {
  load_console
  local tok; tok=$("$REFGATE" token mint --config "$CFG" --repo local/acme/app)
  [ "$(status_of -u "run:$tok" "$CONSOLE/pushes")" = 403 ] || fail "Basic with a run token"
  [ "$(status_of -H "Authorization: Bearer $tok" "$CONSOLE/pushes")" = 403 ] || fail "Bearer"
  ccurl -o "$T/t1" -D "$T/h" -b "refgate_console=$tok" "$CONSOLE/pushes"
  grep -qi '^Location: /login' "$T/h" || fail "the token as a cookie"
}

test_login_checks_the_password_and_changes_the_session_id() {
  load_console
  ccurl -c "$T/jar0" "$CONSOLE/login" >"$T/l.html"
  local pre csrf
  pre=$(awk '$6 == "refgate_console" {print $7}' "$T/jar0")
  csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$T/l.html" | cut -d'"' -f4)
  [ ${#csrf} = 64 ] || fail "no CSRF token in the form"
  [ "$(status_of -b "$T/jar0" -H "Origin: $CONSOLE" --data-urlencode "csrf=$csrf" \
    --data-urlencode "user=alice" --data-urlencode "password=wrong password" "$CONSOLE/login")" = 403 ] ||
    fail "a wrong password"
  [ "$(status_of -b "$T/jar0" -H "Origin: $CONSOLE" --data-urlencode "user=alice" \
    --data-urlencode "password=$REVIEWER_PASSWORD" "$CONSOLE/login")" = 403 ] ||
    fail "a login without the form's CSRF token"
  ccurl -c "$T/jar0" -b "$T/jar0" -D "$T/h" -o /dev/null -H "Origin: $CONSOLE" \
    --data-urlencode "csrf=$csrf" --data-urlencode "user=alice" \
    --data-urlencode "password=$REVIEWER_PASSWORD" "$CONSOLE/login"
  grep -qi '^Location: /pushes' "$T/h" || { cat "$T/h"; fail "not logged in"; }
  grep -i '^Set-Cookie:' "$T/h" >"$T/c"
  assert_contains "$T/c" "HttpOnly"
  assert_contains "$T/c" "SameSite=Strict"
  assert_contains "$T/c" "Path=/"
  [ "$(awk '$6 == "refgate_console" {print $7}' "$T/jar0")" != "$pre" ] || fail "the id did not change"
  # The pre-login id is worth nothing now.
  ccurl -o /dev/null -D "$T/h2" -b "refgate_console=$pre" "$CONSOLE/pushes"
  grep -qi '^Location: /login' "$T/h2" || fail "the pre-login session logs in"
}

test_failed_logins_lock_that_name_for_a_while() {
  load_console
  ccurl -c "$T/jar9" "$CONSOLE/login" >"$T/l9.html"
  local csrf code
  csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$T/l9.html" | cut -d'"' -f4)
  for i in 1 2 3 4 5; do
    code=$(status_of -b "$T/jar9" -H "Origin: $CONSOLE" --data-urlencode "csrf=$csrf" \
      --data-urlencode "user=mallory" --data-urlencode "password=guess $i" "$CONSOLE/login")
    [ "$code" = 403 ] || fail "guess $i answered $code"
  done
  [ "$(status_of -b "$T/jar9" -H "Origin: $CONSOLE" --data-urlencode "csrf=$csrf" \
    --data-urlencode "user=mallory" --data-urlencode "password=guess 6" "$CONSOLE/login")" = 429 ] ||
    fail "a sixth guess was checked"
  assert_contains "$T/gateway.log" "console_login_throttled user=mallory"
}

test_pages_carry_a_strict_csp_and_escape_what_pushes_chose() {
  load_console
  login "$T/jar" >"$T/csrf"
  ccurl -D "$T/h" -b "$T/jar" "$CONSOLE/pushes" >"$T/pushes.html"
  assert_contains "$T/h" "Content-Security-Policy: default-src 'self'; script-src 'none'"
  assert_contains "$T/h" "X-Frame-Options: DENY"
  assert_not_contains "$T/pushes.html" "<script"
  assert_not_contains "$T/pushes.html" "<img"
  assert_contains "$T/pushes.html" "&lt;img/src=x/onerror=document.title=&quot;pwned&quot;&gt;"
  assert_contains "$T/pushes.html" "Pushes 1 to 3, newest first."
  assert_contains "$T/pushes.html" "refs/heads/feature/x&#39;onmouseover=&#39;alert(1)&#39;&amp;amp;"
}

test_the_pushes_page_filters_and_one_push_shows_its_refs() {
  load_console
  ccurl -b "$T/jar" "$CONSOLE/pushes?decision=deny" >"$T/f1"
  assert_contains "$T/f1" "Pushes 1 to 2, newest first."
  ccurl -b "$T/jar" "$CONSOLE/pushes?ref=refs/heads/main" >"$T/f2"
  assert_contains "$T/f2" "Pushes 1 to 1, newest first."
  local id
  id=$(jq -r 'select(.type == "decision" and .ref == "refs/heads/main") | .push_id' "$T/state/audit.jsonl")
  ccurl -b "$T/jar" "$CONSOLE/push?id=$id" >"$T/one"
  assert_contains "$T/one" "main is protected"
  assert_contains "$T/one" "protect-main"
  assert_contains "$T/one" "rejected"
  [ "$(status_of -b "$T/jar" "$CONSOLE/pushes?page=-1")" = 400 ] || fail "a negative page"
  ccurl -b "$T/jar" "$CONSOLE/runs" >"$T/runs"
  assert_contains "$T/runs" '<a href="/pushes?run=%3Cimg%2Fsrc%3Dx%2Fonerror%3Ddocument.title%3D%22pwned%22%3E">&lt;img/src=x/onerror=document.title=&quot;pwned&quot;&gt;</a>'
  assert_not_contains "$T/runs" "<img"
}

# commit_as DIR FILE AUTHOR SUBJECT: a commit with an attacker-chosen author and subject.
commit_as() {
  echo "$RANDOM" >"$1/$2"
  git -C "$1" add "$2"
  GIT_AUTHOR_NAME=$3 GIT_AUTHOR_EMAIL='m@example.com' git -C "$1" commit -q -m "$4"
}

test_one_push_lists_its_commits_paths_and_rule_trace_escaped() {
  load_console
  use_token "$(cat "$T/token")"
  clone app "$T/w2"
  commit_as "$T/w2" 'a&b.txt' 'Mal "Q" & Co' '<script>alert("one")</script> & '"'q'"
  commit_as "$T/w2" 'c"d.txt' "Eve O'Neil & Friends" 'second <script>x</script> "two" & more'
  git -C "$T/w2" push -q origin HEAD:refs/heads/feature/detail 2>"$T/d1" || { cat "$T/d1"; fail "push"; }
  local id
  id=$(jq -r 'select(.type == "decision" and .ref == "refs/heads/feature/detail") | .push_id' \
    "$T/state/audit.jsonl")
  ccurl -b "$T/jar" "$CONSOLE/push?id=$id" >"$T/d.html"
  assert_not_contains "$T/d.html" "<script"
  # A created ref: its two commits (none is on another ref), newest first, and their paths.
  assert_contains "$T/d.html" "<td>Eve O&#39;Neil &amp; Friends &lt;m@example.com&gt;</td><td>second &lt;script&gt;x&lt;/script&gt; &quot;two&quot; &amp; more</td>"
  assert_contains "$T/d.html" "<td>Mal &quot;Q&quot; &amp; Co &lt;m@example.com&gt;</td><td>&lt;script&gt;alert(&quot;one&quot;)&lt;/script&gt; &amp; &#39;q&#39;</td>"
  [ "$(grep -o '<tr><td><code>[0-9a-f]\{12\}</code>' "$T/d.html" | wc -l)" = 2 ] || fail "not two commits"
  assert_contains "$T/d.html" "<li><code>A a&amp;b.txt</code></li>"
  assert_contains "$T/d.html" "<li><code>A c&quot;d.txt</code></li>"
  assert_contains "$T/d.html" '<tr class="decides"><td>features</td><td>allow</td><td>enforce</td><td>matched</td><td>decided</td></tr>'
  # An update: old..new only.
  commit_as "$T/w2" 'e.txt' 'Third & Last' 'third'
  git -C "$T/w2" push -q origin HEAD:refs/heads/feature/detail 2>"$T/d2" || { cat "$T/d2"; fail "push 2"; }
  id=$(jq -r 'select(.type == "decision" and .ref == "refs/heads/feature/detail") | .push_id' \
    "$T/state/audit.jsonl" | tail -1)
  ccurl -b "$T/jar" "$CONSOLE/push?id=$id" >"$T/d3.html"
  [ "$(grep -o '<tr><td><code>[0-9a-f]\{12\}</code>' "$T/d3.html" | wc -l)" = 1 ] || fail "not one commit"
  assert_contains "$T/d3.html" "<td>third</td>"
  assert_contains "$T/d3.html" "<li><code>A e.txt</code></li>"
  assert_not_contains "$T/d3.html" "a&amp;b.txt"
}

test_a_denied_ref_is_unavailable_and_its_trace_names_the_deciding_rule() {
  load_console
  local id
  id=$(jq -r 'select(.type == "decision" and .ref == "refs/heads/main") | .push_id' "$T/state/audit.jsonl")
  ccurl -b "$T/jar" "$CONSOLE/push?id=$id" >"$T/m.html"
  assert_contains "$T/m.html" '<p class="note unavailable">unavailable: the objects never reached upstream</p>'
  assert_contains "$T/m.html" 'Decided by (as recorded): <strong class="decided-by">protect-main</strong>.'
  assert_contains "$T/m.html" '<tr class="decides"><td>protect-main</td><td>deny</td><td>enforce</td><td>matched</td><td>decided</td></tr>'
  assert_contains "$T/m.html" '<tr><td>features</td><td>allow</td><td>enforce</td><td>not matched: ref does not match</td><td></td></tr>'
  assert_contains "$T/m.html" '<tr><td>release-tags</td><td>ask</td><td>enforce</td><td>not matched: ref, action do not match</td><td></td></tr>'
  assert_contains "$T/m.html" "Content conditions are shown as recorded"
}

test_posts_need_the_csrf_token_and_the_consoles_own_origin() {
  load_console
  local csrf id port=${CONSOLE_HOST##*:}
  csrf=$(cat "$T/csrf")
  id=$(grep -o 'refgate approve [a-z2-7]\{10\}' "$T/p3" | head -1 | cut -d' ' -f3)
  echo "$id" >"$T/id"
  [ "$(status_of -b "$T/jar" -H "Origin: $CONSOLE" -d "id=$id&action=approve" "$CONSOLE/approvals")" = 403 ] ||
    fail "no CSRF token"
  local other; other=$(printf '%s' "$csrf" | tr '0-9a-f' '1-9a-f0')
  [ "$(status_of -b "$T/jar" -H "Origin: $CONSOLE" -d "csrf=$other&id=$id&action=approve" "$CONSOLE/approvals")" = 403 ] ||
    fail "a wrong CSRF token"
  for origin in "http://evil.example" "http://127.0.0.1:$((port + 1))" "http://127.0.0.1" "null" \
    "https://$CONSOLE_HOST"; do
    [ "$(status_of -b "$T/jar" -H "Origin: $origin" -d "csrf=$csrf&id=$id&action=approve" "$CONSOLE/approvals")" = 403 ] ||
      fail "Origin $origin"
  done
  [ "$(status_of -b "$T/jar" -d "csrf=$csrf&id=$id&action=approve" "$CONSOLE/approvals")" = 403 ] ||
    fail "no Origin"
  [ -z "$(jq -r 'select(.event == "approval-grant") | .detail' "$T/state/audit.jsonl")" ] ||
    fail "a refused POST granted"
}

test_an_approval_decided_here_lets_the_next_push_land_and_is_audited() {
  load_console
  local csrf id
  csrf=$(cat "$T/csrf")
  id=$(cat "$T/id")
  ccurl -b "$T/jar" "$CONSOLE/approvals" >"$T/a1"
  assert_contains "$T/a1" "$id"
  assert_contains "$T/a1" "release tags need a maintainer"
  use_token "$(cat "$T/token")"
  [ "$(status_of -b "$T/jar" -H "Origin: $CONSOLE" -d "csrf=$csrf&id=$id&action=approve" "$CONSOLE/approvals")" = 200 ] ||
    fail "approve"
  git -C "$T/w" push -q origin v1 2>"$T/p4" || { cat "$T/p4"; fail "the approved push"; }
  [ -n "$(upstream_ref app refs/tags/v1)" ] || fail "v1 did not land"
  jq -r 'select(.event == "approval-grant") | .detail' "$T/state/audit.jsonl" >"$T/ev"
  assert_contains "$T/ev" "approval $id granted by console user alice via console"
}

test_the_integrity_page_shows_the_verified_head() {
  load_console
  ccurl -b "$T/jar" "$CONSOLE/integrity" >"$T/i1"
  assert_contains "$T/i1" "The chain is intact"
  "$REFGATE" audit verify --config "$CFG" >/dev/null
  local seq; seq=$(grep -o 'class="head-seq">[0-9]*' "$T/i1" | cut -d'>' -f2)
  [ "$seq" -gt 0 ] || fail "no head seq"
}

test_logout_ends_the_session() {
  load_console
  local csrf; csrf=$(cat "$T/csrf")
  ccurl -b "$T/jar" -o /dev/null -H "Origin: $CONSOLE" -d "csrf=$csrf" "$CONSOLE/logout"
  ccurl -b "$T/jar" -o /dev/null -D "$T/h" "$CONSOLE/pushes"
  grep -qi '^Location: /login' "$T/h" || fail "still logged in"
}

run_tests
