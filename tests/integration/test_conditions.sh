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
   "mode": "evaluate"}
]'
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
run_tests
