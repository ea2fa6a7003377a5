# Git LFS through the gateway: a run's URL rewrite sends git-lfs's API
# (`.../info/lfs/objects/batch`, `.../info/lfs/locks...`) to the gateway,
# which forwards no LFS objects. It must answer with a refusal in LFS's own
# error format that git-lfs prints, never a 404 that reads as a missing
# repository. With curl, and with the real git-lfs when it is installed.
source "$(dirname "$0")/lib.sh"

make_upstream app
write_config "$STANDARD_RULES"
start_gateway
TOKEN=$(mint local/acme/app)
MSG='refgate: Git LFS is not supported through the gateway (objects are not forwarded); push LFS objects outside the sandbox'

test_the_batch_api_is_refused_in_lfs_error_format() {
  curl -sS -o "$T/body" -D "$T/headers" -w '%{http_code}\n' -u "run:$TOKEN" \
    -H 'Accept: application/vnd.git-lfs+json' -H 'Content-Type: application/vnd.git-lfs+json' \
    --data '{"operation": "upload", "transfers": ["basic"], "objects": []}' \
    "$GW/local/acme/app.git/info/lfs/objects/batch" >"$T/code"
  assert_contains "$T/code" '501'
  grep -qi '^content-type: application/vnd.git-lfs+json' "$T/headers" ||
    { cat "$T/headers"; fail "not the LFS content type"; }
  [ "$(jq -r .message "$T/body")" = "$MSG" ] || { cat "$T/body"; fail "not the refusal message"; }
}

test_the_locks_api_and_no_credential_get_the_same_refusal() {
  curl -sS -o "$T/body" -w '%{http_code}\n' "$GW/local/acme/app.git/info/lfs/locks" >"$T/code"
  assert_contains "$T/code" '501'
  [ "$(jq -r .message "$T/body")" = "$MSG" ] || { cat "$T/body"; fail "not the refusal message"; }
  curl -sS -o "$T/body" -w '%{http_code}\n' -X POST --data '{}' \
    "$GW/local/acme/app/info/lfs/locks/verify" >"$T/code"
  assert_contains "$T/code" '501'
}

test_git_lfs_push_prints_the_refusal_and_lands_nothing() {
  if ! git lfs version >/dev/null 2>&1; then
    echo "# git-lfs is not installed (apt-get install git-lfs): the real client is not tried"
    return 0
  fi
  clone app "$T/w"
  git -C "$T/w" lfs install --local >/dev/null
  git -C "$T/w" lfs track '*.bin' >/dev/null
  head -c 4096 /dev/urandom >"$T/w/blob.bin"
  git -C "$T/w" add .gitattributes blob.bin
  git -C "$T/w" commit -q -m "an LFS object"
  git -C "$T/w" switch -q -c feature/lfs
  use_token "$TOKEN"
  # git-lfs's own pre-push hook uploads the object to the rewritten (gateway) URL.
  ! git -C "$T/w" push origin feature/lfs >"$T/out" 2>&1 || { cat "$T/out"; fail "the push succeeded"; }
  assert_contains "$T/out" "$MSG"
  [ -z "$(upstream_ref app refs/heads/feature/lfs)" ] || fail "the branch landed without its LFS object"
}

run_tests
