#!/bin/bash
# Where a container engine works (docker, else podman), deploy/Containerfile
# builds with the command its header gives, and the image runs refgate as a
# user other than root, has /var/lib/refgate as a volume, and serves
# /etc/refgate/refgate.json on the host's loopback: it writes its URL into
# the volume and stops cleanly on `stop` (SIGTERM). Without an engine the
# test says why and skips (test_container_deps.sh still checks the package
# lists).
set -euo pipefail

fail() { echo "FAIL: $*"; exit 1; }
engine=
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  engine=docker
elif command -v podman >/dev/null && podman info >/dev/null 2>&1; then
  engine=podman
else
  # engine_error NAME: why NAME does not work.
  engine_error() {
    command -v "$1" >/dev/null || { echo "not installed"; return; }
    { "$1" info 2>&1 || true; } | grep -iE -m1 'error|cannot' || echo "$1 info failed"
  }
  why="docker: $(engine_error docker); podman: $(engine_error podman)"
  echo "SKIP: no container engine works here ($why)"
  exit 77
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-container.XXXXXX")
TAG=refgate-test:$$
NAME=refgate-test-$$
cleanup() {
  "$engine" rm -f "$NAME" >/dev/null 2>&1 || true
  "$engine" rmi -f "$TAG" >/dev/null 2>&1 || true
  "$engine" volume rm -f "$NAME" >/dev/null 2>&1 || true
  rm -rf "$T"
}
trap cleanup EXIT

ignore=()
[ "$engine" = podman ] && ignore=(--ignorefile "$REFGATE_SRC/deploy/Containerfile.dockerignore")
"$engine" build -q -f "$REFGATE_SRC/deploy/Containerfile" "${ignore[@]}" -t "$TAG" "$REFGATE_SRC" \
  >"$T/build.log" 2>&1 || { tail -n 40 "$T/build.log"; fail "$engine build"; }
echo "ok: $engine build -f deploy/Containerfile"

want=$("$REFGATE" --version)
got=$("$engine" run --rm --entrypoint /usr/local/bin/refgate "$TAG" --version)
[ "$got" = "$want" ] || fail "the image's refgate --version says '$got', not '$want'"
uid=$("$engine" run --rm --entrypoint id "$TAG" -u)
[ "$uid" != 0 ] || fail "the image runs as root"
"$engine" image inspect -f '{{json .Config.Volumes}}' "$TAG" | grep -q '"/var/lib/refgate"' ||
  fail "/var/lib/refgate is not a volume"
echo "ok: $got, uid $uid, /var/lib/refgate a volume"

mkdir -p "$T/etc"
printf '{"listen": "127.0.0.1:0", "state_dir": "/var/lib/refgate"}\n' >"$T/etc/refgate.json"
chmod 0755 "$T/etc" && chmod 0644 "$T/etc/refgate.json"
"$engine" run -d --name "$NAME" --init --network host \
  -v "$T/etc:/etc/refgate:ro" -v "$NAME:/var/lib/refgate" "$TAG" >/dev/null
url=
for _ in $(seq 1 100); do
  url=$("$engine" exec "$NAME" cat /var/lib/refgate/url 2>/dev/null) && [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { "$engine" logs "$NAME"; fail "the container's gateway wrote no url"; }
# The gateway answers on the host's loopback: a request without a token is
# refused with 401, as git expects.
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/local/acme/app.git/info/refs?service=git-receive-pack")
[ "$code" = 401 ] || [ "$code" = 404 ] || fail "the gateway at $url answered $code"
"$engine" stop -t 30 "$NAME" >/dev/null
status=$("$engine" inspect -f '{{.State.ExitCode}}' "$NAME")
[ "$status" = 0 ] || { "$engine" logs "$NAME"; fail "the gateway exited $status on stop"; }
echo "ok: serves $url (HTTP $code without a token), stops with status 0"
