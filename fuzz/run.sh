#!/usr/bin/env bash
# Build the libFuzzer targets (fuzz/CMakeLists.txt says what each one
# covers) with clang and run each for SECONDS (default 30) from a small
# seed corpus written here, so a run needs nothing but the
# repository. Exits non-zero when a target crashes, leaks or breaks one of
# its checks; the input that did it is kept under the build directory.
#
#   fuzz/run.sh [SECONDS]      (REFGATE_FUZZ_BUILD overrides the build dir)
set -euo pipefail

secs=${1:-30}
case $secs in
'' | *[!0-9]*)
    echo "usage: $0 [SECONDS]" >&2
    exit 2
    ;;
esac
src=$(cd "$(dirname "$0")/.." && pwd)
build=${REFGATE_FUZZ_BUILD:-$src/build-fuzz}

CC=clang cmake -S "$src" -B "$build" -DREFGATE_FUZZ=ON -DREFGATE_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=(fuzz_pktline fuzz_push fuzz_packscan fuzz_report fuzz_advert fuzz_route fuzz_auth
    fuzz_inflate fuzz_config)
cmake --build "$build" -j2 --target "${targets[@]}" >/dev/null

corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
for target in "${targets[@]}"; do mkdir -p "$corpus/${target#fuzz_}"; done
mkdir -p "$build/fuzz-artifacts"

# pkt A [B]: one pkt-line whose payload is A, or A NUL B when B is given.
pkt() {
    if [ $# -eq 2 ]; then
        printf '%04x%s\0%s' $((${#1} + ${#2} + 5)) "$1" "$2"
    else
        printf '%04x%s' $((${#1} + 4)) "$1"
    fi
}
# band N TEXT: one side-band packet.
band() {
    printf '%04x' $((${#2} + 5))
    printf "\\$(printf '%03o' "$1")%s" "$2"
}

z40=0000000000000000000000000000000000000000
a40=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
b40=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
a64=${a40}aaaaaaaaaaaaaaaaaaaaaaaa
b64=${b40}bbbbbbbbbbbbbbbbbbbbbbbb
caps=" report-status side-band-64k quiet atomic ofs-delta push-options object-format=sha1 agent=git/2.39.5"

# Receive-pack requests as git sends them.
printf '0000' >"$corpus/push/probe"
{
    pkt "$z40 $a40 refs/heads/new" "$caps"
    pkt "$a40 $b40 refs/heads/main"
    pkt "$b40 $z40 refs/tags/v1"
    printf '0000'
    pkt "ci.skip"
    pkt "reviewer=alice"
    printf '0000PACK\0\0\0\2\0\0\0\0'
} >"$corpus/push/full"
{
    pkt "shallow $b40"
    pkt "$a40 $b40 refs/heads/main" " report-status"
    printf '0000'
} >"$corpus/push/shallow"
{
    pkt "$a64 $b64 refs/heads/main" " report-status object-format=sha256"
    pkt "$b64 ${z40}000000000000000000000000 refs/heads/old"
    printf '0000'
} >"$corpus/push/sha256"

# Reports, side-band streams and advertisements.
report=$(
    pkt $'unpack ok\n'
    pkt $'ok refs/heads/main\n'
    pkt $'ng refs/heads/dev policy: dev is protected\n'
    printf '0000'
)
printf '%s' "$report" >"$corpus/pktline/report"
printf '%s' "$report" >"$corpus/report/mixed"
{
    pkt $'unpack index-pack abnormal exit\n'
    pkt $'ng refs/heads/main unpacker error\n'
    printf '0000'
} >"$corpus/report/unpack-error"
{
    pkt 'unpack ok'
    pkt 'ok refs/tags/v1'
    printf '0000'
} >"$corpus/report/no-lf"
{
    band 2 $'Resolving deltas: 100%\r'
    band 1 "$report"
    printf '0005\1'
    band 3 "disk full"
    printf '0000'
} >"$corpus/pktline/sideband"
{
    pkt $'# service=git-receive-pack\n'
    printf '0000'
    pkt "$a40 refs/heads/main" $'report-status report-status-v2 push-cert=1-x side-band-64k\n'
    pkt "$b40 refs/heads/dev"$'\n'
    printf '0000'
} >"$corpus/pktline/advert"
{
    pkt "$z40 capabilities^{}" $'report-status delete-refs\n'
    printf '0000'
} >"$corpus/pktline/advert-empty"
printf '00000001000200030004fff0fff1' >"$corpus/pktline/specials"

# Upload-pack advertisements as a remote upstream sends them.
{
    pkt $'# service=git-upload-pack\n'
    printf '0000'
    pkt "$a40 HEAD" $'multi_ack thin-pack side-band side-band-64k ofs-delta shallow no-progress include-tag multi_ack_detailed symref=HEAD:refs/heads/main object-format=sha1 agent=git/github-g1\n'
    pkt "$a40 refs/heads/main"$'\n'
    pkt "$b40 refs/tags/v1"$'\n'
    pkt "$a40 refs/tags/v1^{}"$'\n'
    printf '0000'
} >"$corpus/advert/upload-pack"
{
    pkt "$z40 capabilities^{}" $'object-format=sha1 agent=git/2.39.5\n'
    printf '0000'
} >"$corpus/advert/empty"
{
    pkt "$a64 refs/heads/main" $'object-format=sha256\n'
    printf '0000'
} >"$corpus/advert/sha256"
pkt "ERR access denied" >"$corpus/advert/err"
cp "$corpus/pktline/advert" "$corpus/advert/receive-pack"

# Routes: a method byte (0 GET, 1 POST, 2 PUT...), the URL, NUL, the service.
printf '\1/local/acme/app.git/git-receive-pack' >"$corpus/route/push"
printf '\0/local/acme/app/info/refs\0git-receive-pack' >"$corpus/route/advert"
printf '\0/github.com/acme/lib.git/info/refs\0git-upload-pack' >"$corpus/route/fetch"
printf '\1/github.com/acme/app/info/lfs/objects/batch' >"$corpus/route/lfs"
printf '\1/local/acme/../x/git-upload-pack' >"$corpus/route/dotdot"
printf '\1/git-receive-pack' >"$corpus/route/bare"

# Authorization headers: a mode byte (0 the header, 1 a password, 2 edits
# to a valid token, 3 a valid token with more after it), then the bytes.
printf '\0Basic %s' "$(printf 'run:not-a-token' | base64)" >"$corpus/auth/basic"
printf '\0Bearer abc' >"$corpus/auth/bearer"
printf '\1rgt1.x.y' >"$corpus/auth/password"
printf '\2\5A\11=' >"$corpus/auth/edits"
printf '\3.x' >"$corpus/auth/longer"
printf '\20' >"$corpus/auth/other-repo"

# Gzip bodies: two bytes choosing the output cap and the ratio, then the
# body; among them a small bomb and a stream cut short.
{ printf '\4\0'; printf '%s' "$report" | gzip -c; } >"$corpus/inflate/report"
{ printf '\7\5'; head -c 3000000 /dev/zero | gzip -9c; } >"$corpus/inflate/bomb"
seq 1 2000 | gzip -c >"$corpus/seq.gz"
{ printf '\3\0'; head -c 300 "$corpus/seq.gz"; } >"$corpus/inflate/truncated"
rm "$corpus/seq.gz"
{ printf '\4\0'; printf 'a' | gzip -c; printf 'trailing'; } >"$corpus/inflate/trailing"

# Configs: the examples in deploy/, and one whose local upstream resolves
# (fuzz_config makes upstream/acme/app.git beside its config).
cp "$src"/deploy/*.example.json "$corpus/config/"
cat >"$corpus/config/local.json" <<'JSON'
{"listen": "127.0.0.1:0", "state_dir": "state", "default": "deny",
 "upstreams": [{"host": "local", "url": "file://upstream"}],
 "limits": {"inflate_ratio": 100},
 "rules": [{"name": "main", "refs": ["refs/heads/main"], "actions": ["update", "force", "delete"],
            "effect": "deny", "reason": "protected"},
           {"name": "f", "refs": ["refs/heads/feature/**"], "actions": ["create"], "effect": "allow",
            "repos": ["local/acme/*"], "secrets": true}]}
JSON
cp "$corpus/push/full" "$corpus/pktline/push"

# Packs as git writes them: empty, and one of a small repository with
# deltas (made here, so the corpus needs nothing but git).
printf 'PACK\0\0\0\2\0\0\0\0' >"$corpus/packscan/empty"
head -c 20 /dev/zero >>"$corpus/packscan/empty"
seedrepo=$corpus/repo
git init -q "$seedrepo"
for i in 1 2 3; do
    seq 1 $((i * 300)) >"$seedrepo/f"
    git -C "$seedrepo" add f
    git -C "$seedrepo" -c user.name=f -c user.email=f@f commit -q -m "c$i"
done
echo HEAD | git -C "$seedrepo" pack-objects --revs --stdout -q >"$corpus/packscan/repo"
rm -rf "$seedrepo"

status=0
for target in "${targets[@]}"; do
    dir=$corpus/${target#fuzz_}
    echo "== $target for ${secs}s"
    if ! "$build/fuzz/$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$target-" "$dir" \
        >"$build/fuzz-artifacts/$target.log" 2>&1; then
        echo "$target FAILED; log: $build/fuzz-artifacts/$target.log" >&2
        tail -n 40 "$build/fuzz-artifacts/$target.log" >&2
        status=1
    else
        grep -E '^stat::number_of_executed_units|^Done' "$build/fuzz-artifacts/$target.log" || true
    fi
done
exit $status
