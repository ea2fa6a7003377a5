#!/usr/bin/env bash
# Benchmark the secret scanner (content/secrets.c) on one core: ~320 MB of
# source-like text, scanned object by object (256 KB blobs in 64 KB chunks,
# as the gateway will feed a pack's blobs) with the built-in detectors, then
# with 100 extra config patterns besides them. Prints MB/s (median of RUNS).
#
#   bench/secrets.sh [SIZE_MB] [RUNS]
#
# The corpus is this repository's tracked files plus /usr/include's headers,
# repeated up to SIZE_MB, with a made-up secret planted every ~1 MB (so the
# confirmation path runs too); it is written under $BENCH_DIR (default: a
# fresh directory under $TMPDIR, removed at exit unless BENCH_KEEP=1). The
# program is $SECRETS_BENCH, else $REFGATE_BUILD/bench/secrets_bench, else
# build/bench/secrets_bench (configure with the default RelWithDebInfo or
# Release for figures: a Debug build is several times slower).
set -euo pipefail

size_mb=${1:-320}
runs=${2:-5}

src=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench=$(bench_binary SECRETS_BENCH bench/secrets_bench)
command -v python3 >/dev/null || { echo "bench/secrets.sh: needs python3" >&2; exit 2; }

if [[ -n ${BENCH_DIR:-} ]]; then
    work=$BENCH_DIR
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/refgate-bench.XXXXXX")
fi
cleanup() { [[ ${BENCH_KEEP:-0} == 1 ]] || rm -rf "$work"; }
trap cleanup EXIT

corpus=$work/corpus.txt
if [[ ! -s $corpus ]]; then
    echo "generating ${size_mb} MB of source text under $work ..."
    { git -C "$src" ls-files -z | (cd "$src" && xargs -0 cat 2>/dev/null)
      find /usr/include -name '*.h' -type f -print0 2>/dev/null | sort -z | xargs -0 cat 2>/dev/null
    } >"$work/seed.txt" || true
    python3 - "$work/seed.txt" "$corpus" "$size_mb" <<'PY'
import random, string, sys
seed, out, size_mb = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(seed, "rb").read()
if not data:
    sys.exit("no seed text")
rnd = random.Random(1)
an = string.ascii_letters + string.digits
def tok(n, cs=an): return "".join(rnd.choice(cs) for _ in range(n))
# Made-up secrets of every built-in kind, planted about once per MB.
def secret(i):
    k = i % 6
    if k == 0: return 'token = "ghp_%s"\n' % tok(36)
    if k == 1: return "aws_access_key_id = AKIA%s\naws_secret_access_key = %s\n" % (
        tok(16, string.ascii_uppercase + string.digits), tok(40, an + "/+"))
    if k == 2: return "SLACK=xoxb-%s-%s-%s\n" % (tok(12, string.digits), tok(13, string.digits), tok(24))
    if k == 3: return 'password = "%s"\n' % tok(20, an + "!@#%^&*")
    if k == 4: return "-----BEGIN PRIVATE KEY-----\n%s\n%s\n-----END PRIVATE KEY-----\n" % (
        tok(64, an + "+/"), tok(64, an + "+/"))
    return "key=AIza%s\n" % tok(35, an + "_-")
total, i, pos = size_mb << 20, 0, 0
with open(out, "wb") as f:
    written = 0
    while written < total:
        n = min(1 << 20, total - written)
        piece = data[pos:pos + n]
        if len(piece) < n:
            piece += data[:n - len(piece)]
        pos = (pos + n) % len(data)
        cut = piece.rfind(b"\n", 0, len(piece) // 2) + 1
        planted = secret(i).encode()
        i += 1
        f.write(piece[:cut] + planted + piece[cut:])
        written += n + len(planted)
print("planted %d secrets" % i)
PY
    rm -f "$work/seed.txt"
    # 100 extra patterns as a configuration would add them: vendor tokens
    # with a literal prefix, and keyword-anchored assignments.
    python3 - "$work/patterns.txt" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(50):
        f.write("vendor%d-token \\bvnd%d_[A-Za-z0-9]{32}\\b\n" % (i, i))
    for i in range(50):
        f.write("service%d-key (?i)\\bsvc%d[_-]key[ \\t]{0,4}=[ \\t]{0,4}[A-Za-z0-9+/]{24,40}\\b\n" % (i, i))
PY
fi

pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)
echo "== built-in detectors"
"${pin[@]}" "$bench" "$corpus" - "$runs"
echo "== built-in detectors + 100 extra patterns"
"${pin[@]}" "$bench" "$corpus" "$work/patterns.txt" "$runs"
echo "gitleaks: not measured (not installed here, no network to fetch it) and no"
echo "published MB/s figure known reliably enough to quote"
