#!/usr/bin/env bash
# Build the libFuzzer targets with clang and run each for SECONDS (default
# 30) from a small seed corpus written here, so a run needs nothing but the
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
cmake --build "$build" -j2 --target fuzz_pktline fuzz_push fuzz_packscan >/dev/null

corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
mkdir -p "$corpus/pktline" "$corpus/push" "$corpus/packscan" "$build/fuzz-artifacts"

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
for target in fuzz_pktline fuzz_push fuzz_packscan; do
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
