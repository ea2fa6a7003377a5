# Content conditions with a remote smart-HTTP upstream (nginx + git
# http-backend): decided from the mirror exactly as for a local upstream,
# and a push denied for its content never reaches upstream at all (no
# POST, so not even an incomplete pack carrying the secret).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_http.sh"

SECRET=ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d

make_remote app
start_http_upstream basic
write_remote_config '[
  {"name": "open", "refs": ["refs/heads/**"], "effect": "allow"},
  {"name": "no-secrets", "secrets": true, "effect": "deny"},
  {"name": "no-workflows", "paths": [".github/workflows/**"], "effect": "deny"}
]' "$(remote_upstream_json gitsrv "$HTTP_URL")"
start_gateway
TOKEN=$(mint gitsrv/acme/app)

posts() { grep -c "^POST /acme/app.git/git-receive-pack" "$NGINX_DIR/access.log" || true; }

test_clean_push_lands_upstream() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w1"
  git -C "$T/w1" switch -q -c feature/clean
  commit "$T/w1" clean.c
  git -C "$T/w1" push origin feature/clean >"$T/out" 2>&1 || { cat "$T/out"; fail "push failed"; }
  [ "$(remote_ref app refs/heads/feature/clean)" = "$(git -C "$T/w1" rev-parse HEAD)" ] ||
    fail "feature/clean did not land"
}

test_secret_in_an_earlier_commit_never_reaches_upstream() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w2"
  local posts_before; posts_before=$(posts)
  git -C "$T/w2" switch -q -c feature/leak
  commit "$T/w2" token.txt "$SECRET"
  git -C "$T/w2" rm -q token.txt
  git -C "$T/w2" commit -q -m "remove it"
  ! git -C "$T/w2" push origin feature/leak >"$T/out" 2>&1 || { cat "$T/out"; fail "push succeeded"; }
  assert_contains "$T/out" 'feature/leak -> feature/leak (policy: push contains a secret (rule "no-secrets"))'
  assert_contains "$T/out" 'remote: refgate: rule "no-secrets": github-token in token.txt line 1'
  assert_not_contains "$T/out" "$SECRET"
  [ -z "$(remote_ref app refs/heads/feature/leak)" ] || fail "landed"
  [ "$(posts)" = "$posts_before" ] || fail "the denied push reached upstream"
}

test_protected_path_on_an_update_is_denied() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w3"
  git -C "$T/w3" switch -q -c feature/wf
  commit "$T/w3" a.txt
  git -C "$T/w3" push -q origin feature/wf 2>"$T/out" || { cat "$T/out"; fail "first push failed"; }
  mkdir -p "$T/w3/.github/workflows"
  commit "$T/w3" .github/workflows/x.yml "on: push"
  ! git -C "$T/w3" push origin feature/wf >"$T/out" 2>&1 || { cat "$T/out"; fail "push succeeded"; }
  assert_contains "$T/out" 'policy: push changes .github/workflows/x.yml (rule "no-workflows")'
}

run_tests
