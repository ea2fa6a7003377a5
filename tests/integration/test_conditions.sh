# Content conditions on rules (issue 10) with real pushes through a running
# gateway to local bare upstreams: each condition denies what it names and
# lets the rest through, a content denial refuses the whole push and lands
# nothing (not even an unreferenced blob sent as a raw pack), band 2 names
# the commit, path and rule and never the secret, evaluate mode records
# what it would have decided.
source "$(dirname "$0")/lib.sh"

# A token-shaped test value the built-in github-token detector reports.
SECRET=ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d

make_upstream app
# SSH signing keys: k1 is allowed, k2 is one the pusher made.
ssh-keygen -q -t ed25519 -N '' -f "$T/k1" && ssh-keygen -q -t ed25519 -N '' -f "$T/k2"
echo "t@example.invalid $(cat "$T/k1.pub")" >"$T/allowed_signers"
write_config '[
  {"name": "open", "refs": ["refs/heads/**", "refs/tags/**"], "effect": "allow"},
  {"name": "no-secrets", "secrets": true, "effect": "deny"},
  {"name": "no-workflows", "refs": ["refs/heads/**"], "paths": [".github/workflows/**", "CODEOWNERS", "**/*.pem"],
   "effect": "deny"},
  {"name": "small-files", "max_file_bytes": 100000, "effect": "deny"},
  {"name": "short-paths", "max_path_length": 60, "effect": "deny"},
  {"name": "dco", "refs": ["refs/heads/dco/**"], "message_not": "^Signed-off-by: .+ <.+>$", "effect": "deny"},
  {"name": "company-authors", "refs": ["refs/heads/corp/**"], "author_email_not": "@example\\.invalid$",
   "effect": "deny"},
  {"name": "company-committers", "refs": ["refs/heads/corp/**"],
   "committer_email_not": "@example\\.invalid$", "effect": "deny"},
  {"name": "linear", "refs": ["refs/heads/linear/**"], "merge_commits": true, "effect": "deny"},
  {"name": "trial-no-todo", "refs": ["refs/heads/trial/**"], "paths": ["TODO"], "effect": "deny",
   "mode": "evaluate"},
  {"name": "signed", "refs": ["refs/heads/signed/**"], "unsigned": true, "effect": "deny"}
]' '"signing": {"allowed_signers": "allowed_signers"}'
start_gateway
TOKEN=$(mint local/acme/app)

# push_fails DIR REFSPEC...: the push is refused; its output in $T/out.
push_fails() {
  local dir=$1; shift
  ! git -C "$dir" push origin "$@" >"$T/out" 2>&1 || { cat "$T/out"; fail "push succeeded"; }
}
push_lands() {
  local dir=$1; shift
  git -C "$dir" push origin "$@" >"$T/out" 2>&1 || { cat "$T/out"; fail "push failed"; }
}

test_clean_push_lands() {
  use_token "$TOKEN"
  clone app "$T/w1"
  git -C "$T/w1" switch -q -c feature/clean
  commit "$T/w1" clean.c
  push_lands "$T/w1" feature/clean
  [ "$(upstream_ref app refs/heads/feature/clean)" = "$(git -C "$T/w1" rev-parse HEAD)" ] ||
    fail "feature/clean did not land"
}

test_secret_in_new_file_is_denied_and_never_shown() {
  use_token "$TOKEN"
  clone app "$T/w2"
  git -C "$T/w2" switch -q -c feature/leak
  commit "$T/w2" config.env "token = $SECRET"
  push_fails "$T/w2" feature/leak
  assert_contains "$T/out" '[remote rejected] feature/leak -> feature/leak (policy: push contains a secret (rule "no-secrets"))'
  assert_contains "$T/out" "remote: refgate: rule \"no-secrets\": github-token in config.env line 1 (commit $(git -C "$T/w2" rev-parse --short=7 HEAD)"
  assert_not_contains "$T/out" "$SECRET"
  assert_not_contains "$T/gateway.log" "$SECRET"
  assert_not_contains "$T/state/audit.jsonl" "$SECRET"
  [ -z "$(upstream_ref app refs/heads/feature/leak)" ] || fail "feature/leak landed"
}

test_secret_in_modified_file_is_denied() {
  use_token "$TOKEN"
  clone app "$T/w3"
  git -C "$T/w3" switch -q -c feature/modified
  printf '# app\nsee the docs\n' >"$T/w3/README.md"
  printf 'token: %s\n' "$SECRET" >>"$T/w3/README.md"
  git -C "$T/w3" commit -q -am "docs"
  push_fails "$T/w3" feature/modified
  assert_contains "$T/out" 'policy: push contains a secret (rule "no-secrets")'
  assert_contains "$T/out" 'github-token in README.md line 3'
  [ -z "$(upstream_ref app refs/heads/feature/modified)" ] || fail "landed"
}

test_secret_only_in_an_earlier_commit_of_the_range_is_denied() {
  use_token "$TOKEN"
  clone app "$T/w4"
  git -C "$T/w4" switch -q -c feature/oops
  commit "$T/w4" creds.txt "$SECRET"
  local leaked; leaked=$(git -C "$T/w4" rev-parse --short=7 HEAD)
  git -C "$T/w4" rm -q creds.txt
  git -C "$T/w4" commit -q -m "remove the token again"
  push_fails "$T/w4" feature/oops
  assert_contains "$T/out" "github-token in creds.txt line 1 (commit $leaked"
  [ -z "$(upstream_ref app refs/heads/feature/oops)" ] || fail "landed"
}

test_secret_brought_by_a_merge_is_denied() {
  use_token "$TOKEN"
  clone app "$T/w5"
  git -C "$T/w5" switch -q -c side
  commit "$T/w5" side.env "key=$SECRET"
  git -C "$T/w5" switch -q main
  git -C "$T/w5" switch -q -c feature/merged
  commit "$T/w5" other.c
  git -C "$T/w5" merge -q --no-edit side
  push_fails "$T/w5" feature/merged
  assert_contains "$T/out" 'policy: push contains a secret (rule "no-secrets")'
  assert_contains "$T/out" 'github-token in side.env line 1'
  [ -z "$(upstream_ref app refs/heads/feature/merged)" ] || fail "landed"
}

test_content_denial_refuses_the_whole_push() {
  use_token "$TOKEN"
  clone app "$T/w6"
  git -C "$T/w6" switch -q -c feature/fine
  commit "$T/w6" fine.c
  git -C "$T/w6" switch -q -c feature/codeowners main
  commit "$T/w6" CODEOWNERS "* @someone"
  push_fails "$T/w6" feature/fine feature/codeowners
  assert_contains "$T/out" 'feature/codeowners -> feature/codeowners (policy: push changes CODEOWNERS (rule "no-workflows"))'
  assert_contains "$T/out" 'feature/fine -> feature/fine (policy: push rejected as a whole because refs/heads/feature/codeowners is denied for its content)'
  [ -z "$(upstream_ref app refs/heads/feature/fine)" ] || fail "feature/fine landed"
}

test_unreferenced_secret_blob_in_a_raw_pack_is_denied_and_lands_nothing() {
  use_token "$TOKEN"
  clone app "$T/w7"
  git -C "$T/w7" switch -q -c feature/sneaky
  commit "$T/w7" sneaky.c
  local blob old new
  blob=$(printf 'aws = %s\n' "$SECRET" | git -C "$T/w7" hash-object -w --stdin)
  old=$(git -C "$T/w7" rev-parse main) new=$(git -C "$T/w7" rev-parse HEAD)
  python3 "$REFGATE_SRC/tests/support/rawpush.py" "$GW/local/acme/app.git" "$TOKEN" \
    "0000000000000000000000000000000000000000:$new:refs/heads/feature/sneaky" \
    --pack-repo "$T/w7" --pack-revs "$new ^$old $blob" >"$T/out"
  assert_contains "$T/out" 'ng refs/heads/feature/sneaky policy: push contains a secret (rule "no-secrets")'
  assert_contains "$T/out" "remote: refgate: rule \"no-secrets\": github-token in blob ${blob:0:7} line 1, which no pushed commit adds"
  assert_not_contains "$T/out" "$SECRET"
  [ -z "$(upstream_ref app refs/heads/feature/sneaky)" ] || fail "landed"
  ! git --git-dir="$T/upstream/acme/app.git" cat-file -e "$blob" 2>/dev/null || fail "the blob reached upstream"
  ! git --git-dir="$T/upstream/acme/app.git" cat-file -e "$new" 2>/dev/null || fail "the commit reached upstream"
}

test_protected_paths_are_denied() {
  use_token "$TOKEN"
  clone app "$T/w8"
  git -C "$T/w8" switch -q -c feature/ci
  mkdir -p "$T/w8/.github/workflows"
  commit "$T/w8" .github/workflows/ci.yml "on: push"
  push_fails "$T/w8" feature/ci
  assert_contains "$T/out" 'policy: push changes .github/workflows/ci.yml (rule "no-workflows")'
  assert_contains "$T/out" "remote: refgate: rule \"no-workflows\": commit $(git -C "$T/w8" rev-parse --short=7 HEAD) changes .github/workflows/ci.yml (paths .github/workflows/**)"
  git -C "$T/w8" reset -q --hard main
  mkdir -p "$T/w8/deep/keys"
  commit "$T/w8" deep/keys/server.pem "not a key"
  push_fails "$T/w8" feature/ci
  assert_contains "$T/out" 'push changes deep/keys/server.pem'
  [ -z "$(upstream_ref app refs/heads/feature/ci)" ] || fail "landed"
}

test_large_file_is_denied() {
  use_token "$TOKEN"
  clone app "$T/w9"
  git -C "$T/w9" switch -q -c feature/big
  head -c 200000 /dev/urandom >"$T/w9/big.bin"
  git -C "$T/w9" add big.bin
  git -C "$T/w9" commit -q -m big
  push_fails "$T/w9" feature/big
  assert_contains "$T/out" 'policy: push contains a file larger than 100000 bytes (rule "small-files")'
  assert_contains "$T/out" 'big.bin is 200000 bytes'
  # Just under the limit lands.
  git -C "$T/w9" reset -q --hard main
  head -c 99000 /dev/urandom >"$T/w9/big.bin"
  git -C "$T/w9" add big.bin
  git -C "$T/w9" commit -q -m smaller
  push_lands "$T/w9" feature/big
}

test_long_path_is_denied() {
  use_token "$TOKEN"
  clone app "$T/w10"
  git -C "$T/w10" switch -q -c feature/deep
  local d=aaaaaaaaaa/bbbbbbbbbb/cccccccccc/dddddddddd/eeeeeeeeee
  mkdir -p "$T/w10/$d"
  commit "$T/w10" "$d/file-name.txt"
  push_fails "$T/w10" feature/deep
  assert_contains "$T/out" 'policy: push changes a path longer than 60 bytes (rule "short-paths")'
}

test_commit_message_without_sign_off_is_denied() {
  use_token "$TOKEN"
  clone app "$T/w11"
  git -C "$T/w11" switch -q -c dco/x
  echo a >"$T/w11/a"; git -C "$T/w11" add a
  git -C "$T/w11" commit -q -s -m "signed"
  push_lands "$T/w11" dco/x
  commit "$T/w11" b
  push_fails "$T/w11" dco/x
  assert_contains "$T/out" 'policy: a commit message does not match (rule "dco")'
  assert_contains "$T/out" "commit $(git -C "$T/w11" rev-parse --short=7 HEAD): message does not match message_not"
}

test_foreign_author_and_committer_emails_are_denied() {
  use_token "$TOKEN"
  clone app "$T/w12"
  git -C "$T/w12" switch -q -c corp/x
  commit "$T/w12" ok.txt
  push_lands "$T/w12" corp/x
  echo x >"$T/w12/x"; git -C "$T/w12" add x
  GIT_AUTHOR_EMAIL=someone@elsewhere.test git -C "$T/w12" commit -q -m "foreign author"
  push_fails "$T/w12" corp/x
  assert_contains "$T/out" 'policy: a commit'"'"'s author email does not match (rule "company-authors")'
  assert_contains "$T/out" 'author email <someone@elsewhere.test> does not match'
  git -C "$T/w12" reset -q --hard origin/corp/x
  echo y >"$T/w12/y"; git -C "$T/w12" add y
  GIT_COMMITTER_EMAIL=bot@elsewhere.test git -C "$T/w12" commit -q -m "foreign committer"
  push_fails "$T/w12" corp/x
  assert_contains "$T/out" 'committer email does not match (rule "company-committers")'
}

test_merge_commit_is_denied_where_history_is_linear() {
  use_token "$TOKEN"
  clone app "$T/w13"
  git -C "$T/w13" switch -q -c linear/x
  commit "$T/w13" one.txt
  push_lands "$T/w13" linear/x
  git -C "$T/w13" switch -q -c topic main
  commit "$T/w13" two.txt
  git -C "$T/w13" switch -q linear/x
  git -C "$T/w13" merge -q --no-ff --no-edit topic
  push_fails "$T/w13" linear/x
  assert_contains "$T/out" 'policy: push contains a merge commit (rule "linear")'
  git -C "$T/w13" reset -q --hard HEAD^1
  git -C "$T/w13" cherry-pick topic >/dev/null
  push_lands "$T/w13" linear/x
}

test_evaluate_mode_records_what_it_would_decide_and_lands() {
  use_token "$TOKEN"
  clone app "$T/w14"
  git -C "$T/w14" switch -q -c trial/x
  commit "$T/w14" TODO "later"
  push_lands "$T/w14" trial/x
  assert_contains "$T/out" 'remote: refgate: rule "trial-no-todo" (evaluate mode, would deny): commit'
  [ "$(upstream_ref app refs/heads/trial/x)" = "$(git -C "$T/w14" rev-parse HEAD)" ] || fail "not landed"
  audit_rows | grep -F '"ref":"refs/heads/trial/x"' >"$T/rows"
  assert_contains "$T/rows" '"evaluate":"deny by trial-no-todo: push changes TODO"'
  assert_contains "$T/rows" '"decision":"allow"'
}

test_deny_is_recorded_with_rule_and_why_never_the_secret() {
  audit_rows | grep -F '"ref":"refs/heads/feature/leak"' >"$T/rows"
  assert_contains "$T/rows" '"decision":"deny"'
  assert_contains "$T/rows" '"rule":"no-secrets"'
  assert_contains "$T/rows" 'push contains a secret (rule \"no-secrets\"); github-token in config.env line 1 (commit '
  assert_contains "$T/rows" 'fingerprint github-token:'
  assert_not_contains "$T/state/audit.jsonl" "$SECRET"
}

test_unsigned_commits_are_denied_where_signatures_are_required() {
  use_token "$TOKEN"
  clone app "$T/w17"
  git -C "$T/w17" switch -q -c signed/x
  echo a >"$T/w17/a"; git -C "$T/w17" add a
  git -C "$T/w17" -c gpg.format=ssh -c user.signingkey="$T/k1" commit -q -S -m "signed by k1"
  push_lands "$T/w17" signed/x
  echo b >"$T/w17/b"; git -C "$T/w17" add b
  git -C "$T/w17" -c gpg.format=ssh -c user.signingkey="$T/k2" commit -q -S -m "signed by k2"
  push_fails "$T/w17" signed/x
  assert_contains "$T/out" 'policy: a commit is not signed by a key the config names (rule "signed")'
  assert_contains "$T/out" "commit $(git -C "$T/w17" rev-parse --short=7 HEAD) is signed by a key not among signing.allowed_signers"
  git -C "$T/w17" commit -q --amend --no-edit --no-gpg-sign
  push_fails "$T/w17" signed/x
  assert_contains "$T/out" "has no signature"
}

# restart_with SED_EXPRESSION: the gateway again, with the config edited.
restart_with() {
  stop_gateway
  sed -i "$1" "$T/refgate.json"
  start_gateway
}

test_allowed_fingerprint_lets_the_push_through() {
  use_token "$TOKEN"
  clone app "$T/w15"
  git -C "$T/w15" switch -q -c feature/allowed
  commit "$T/w15" fixture.txt "$SECRET"
  push_fails "$T/w15" feature/allowed
  local fp; fp=$(grep -o 'fingerprint github-token:[0-9a-f]*' "$T/out" | head -1 | cut -d' ' -f2)
  [ -n "$fp" ] || fail "no fingerprint shown"
  restart_with "s|\"rules\": \\[|\"secrets\": {\"allow\": [\"$fp\"]},\n  \"rules\": [|"
  use_token "$TOKEN"
  push_lands "$T/w15" feature/allowed
  stop_gateway
}

test_budget_exceeded_denies_and_says_why() {
  restart_with 's|"rules": \[|"limits": {"inspect_bytes": 1048576},\n  "rules": [|'
  use_token "$TOKEN"
  clone app "$T/w16"
  git -C "$T/w16" switch -q -c feature/huge
  head -c 2000000 /dev/zero | tr '\0' 'a' >"$T/w16/huge.txt"
  git -C "$T/w16" add huge.txt
  git -C "$T/w16" commit -q -m huge
  push_fails "$T/w16" feature/huge
  assert_contains "$T/out" 'inspection budget exceeded (limits.inspect_bytes: 1048576 inflated bytes)'
  [ -z "$(upstream_ref app refs/heads/feature/huge)" ] || fail "landed"
  stop_gateway
}

run_tests
