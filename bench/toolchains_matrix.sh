#!/usr/bin/env bash
# Each toolchain's everyday job outside refgate-run and inside it, side by
# side (issue 9): the median wall time of RUNS runs of each, and the ratio
# inside/outside.
#
#   git     init, 200 commits, gc, log
#   cmake   configure, build and ctest of a small C project
#   python  venv, pip install -e . (offline), unittest (multiprocessing)
#   node    npm install of a local tarball (offline), npm test
#   go      go test of a module with a local replace (GOPROXY=off)
#   rust    cargo build and cargo test, offline, with a path dependency
#
# The projects are adapted from tests/sandbox/test_toolchains.sh; Python
# uses the first python3 with setuptools, wheel and venv. Outside, a job
# runs in a fresh copy of its project; inside, in refgate-run's fork of it
# with the default options (the fork removed with --rm), except that the
# tool caches live in this benchmark's directory (--cache-dir), so they
# start empty. Each side has one untimed run first, so caches are warm (go's
# build cache; npm's and pip's). A toolchain that is missing is skipped,
# saying why. Offline: nothing is fetched.
#
#   bench/toolchains_matrix.sh [RUNS]      (default 3)
#
# Run it as root where toolchains live under /root (cargo, pyenv): inside,
# the command runs as nobody with root's home showing only the toolchain
# paths. The binary is $REFGATE_RUN, else $REFGATE_BUILD/runner/refgate-run,
# else build/runner/refgate-run.
#
# shellcheck disable=SC2016 # the jobs' $ expand in their own sh -c
set -euo pipefail

runs=${1:-3}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
run=$(bench_binary REFGATE_RUN runner/refgate-run)

# Not under /tmp: the run's /tmp is its own.
work=$(mktemp -d /var/tmp/refgate-bench-matrix.XXXXXX)
chmod 755 "$work"
trap 'chmod -R u+rwx "$work"; rm -rf "$work"' EXIT

# time_it CMD...: wall seconds of one run; a failure stops the benchmark.
time_it() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >"$work/log" 2>&1 || {
        echo "bench/toolchains_matrix.sh: failed in $PWD: $*" >&2
        tail -20 "$work/log" >&2
        exit 1
    }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}'; }

# bench NAME JOB SCRIPT: time `sh -c SCRIPT` in a copy of $work/NAME and in
# a fork of it inside, alternately (the machine's noise hits both), and
# print the row.
bench() {
    local name=$1 job=$2 script=$3 out=() in=() i t o n
    for i in $(seq 0 "$runs"); do
        rm -rf "$work/copy" && cp -a "$work/$name" "$work/copy"
        t=$(cd "$work/copy" && time_it sh -c "$script")
        ((i)) && out+=("$t")
        t=$(cd "$work/$name" && time_it "$run" -q --rm --cache-dir "$work/caches" -- sh -c "$script")
        ((i)) && in+=("$t")
    done
    rm -rf "$work/copy"
    o=$(median "${out[@]}") n=$(median "${in[@]}")
    printf '%-7s %-44s %7s %7s %6s\n' "$name" "$job" "$o" "$n" "$(awk -v n="$n" -v o="$o" 'BEGIN {printf "%.2f", n / o}')"
}
skip() { printf '%-7s skipped: %s\n' "$1" "$2"; }
have() { command -v "$1" >/dev/null 2>&1; }

printf 'median of %d runs, wall seconds (refgate-run: %s)\n' "$runs" "$run"
printf '%-7s %-44s %7s %7s %6s\n' tool job outside inside ratio

# --- git ---------------------------------------------------------------------
if have git; then
    mkdir "$work/git"
    bench git "init, 200 commits, gc, log" '
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b \
    GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
git init -q -b main && i=0 && while [ $i -lt 200 ]; do
    i=$((i + 1)) && echo $i >f && git add f && git commit -qm "c$i" || exit 1
done && git gc -q && git log --oneline | wc -l'
else
    skip git "no git on PATH"
fi

# --- C: cmake ----------------------------------------------------------------
if have cmake && have cc; then
    mkdir "$work/cmake"
    printf 'int add(int a, int b) { return a + b; }\n' >"$work/cmake/add.c"
    printf 'int add(int a, int b);\nint main(void) { return add(2, 3) != 5; }\n' >"$work/cmake/t.c"
    printf '%s\n' 'cmake_minimum_required(VERSION 3.10)' 'project(t C)' 'enable_testing()' \
        'add_library(add add.c)' 'add_executable(t t.c)' 'target_link_libraries(t add)' \
        'add_test(NAME t COMMAND t)' >"$work/cmake/CMakeLists.txt"
    bench cmake "configure, build, ctest" 'cmake -S . -B build && cmake --build build && cd build && ctest'
else
    skip cmake "needs cmake and cc on PATH"
fi

# --- Python ------------------------------------------------------------------
# The first python3 that can build an editable install offline (pyenv's
# may lack wheel; Debian's has it).
PY=
for c in "$(command -v python3 || true)" /usr/bin/python3; do
    if [[ -x $c ]] && "$c" -c 'import setuptools, venv, wheel' 2>/dev/null && "$c" -m pip --version >/dev/null 2>&1; then
        PY=$c && break
    fi
done
if [[ -n $PY ]]; then
    P=$work/python
    mkdir -p "$P/rgpkg"
    printf 'from setuptools import setup\nsetup(name="rgpkg", version="1.0", packages=["rgpkg"])\n' >"$P/setup.py"
    echo 'def add(a, b): return a + b' >"$P/rgpkg/__init__.py"
    cat >"$P/test_add.py" <<'PY'
import multiprocessing as mp
import unittest
import rgpkg

def sq(x):
    return x * x

class T(unittest.TestCase):
    def test_add(self):
        self.assertEqual(rgpkg.add(2, 3), 5)

    def test_pool(self):
        with mp.Pool(2) as p:
            self.assertEqual(p.map(sq, [1, 2, 3]), [1, 4, 9])
PY
    bench python "venv, pip install -e ., unittest" "
$PY -m venv --without-pip --system-site-packages .venv &&
.venv/bin/python -m pip install -q --no-build-isolation --no-index -e . &&
.venv/bin/python -m unittest -q test_add"
    echo "        (python: $PY)"
else
    skip python "needs a python3 with venv, setuptools, wheel and pip"
fi

# --- Node --------------------------------------------------------------------
if have npm; then
    P=$work/node
    mkdir -p "$P/lib" "$P/app"
    echo '{"name":"rglib","version":"1.0.0","main":"index.js"}' >"$P/lib/package.json"
    echo 'module.exports = (a, b) => a + b;' >"$P/lib/index.js"
    echo '{"name":"rgapp","version":"1.0.0","scripts":{"test":"node test.js"}}' >"$P/app/package.json"
    echo 'if (require("rglib")(2, 3) !== 5) process.exit(1); console.log("add ok");' >"$P/app/test.js"
    (cd "$P/lib" && npm pack -q >/dev/null 2>&1)
    bench node "npm install of a local tarball, npm test" '
cd app && npm install --offline --no-audit --no-fund ../lib/rglib-1.0.0.tgz && npm test'
else
    skip node "no npm on PATH"
fi

# --- Go ----------------------------------------------------------------------
if have go; then
    P=$work/go
    mkdir -p "$P/lib" "$P/app"
    printf 'module example.com/lib\n\ngo 1.18\n' >"$P/lib/go.mod"
    printf 'package lib\n\nfunc Add(a, b int) int { return a + b }\n' >"$P/lib/lib.go"
    printf 'module example.com/app\n\ngo 1.18\n\nrequire example.com/lib v0.0.0\n\nreplace example.com/lib => ../lib\n' \
        >"$P/app/go.mod"
    printf 'package main\n\nimport (\n\t"fmt"\n\n\t"example.com/lib"\n)\n\nfunc main() { fmt.Println(lib.Add(2, 3)) }\n' \
        >"$P/app/main.go"
    printf 'package main\n\nimport (\n\t"testing"\n\n\t"example.com/lib"\n)\n\nfunc TestAdd(t *testing.T) {\n\tif lib.Add(2, 3) != 5 {\n\t\tt.Fatal()\n\t}\n}\n' \
        >"$P/app/main_test.go"
    bench go "go test, local replace, warm build cache" '
cd app && GOFLAGS=-mod=mod GOPROXY=off go test -count=1 ./...'
else
    skip go "no go on PATH"
fi

# --- Rust --------------------------------------------------------------------
if have cargo; then
    P=$work/rust
    mkdir -p "$P/dep/src" "$P/app/src"
    printf '[package]\nname = "dep"\nversion = "0.1.0"\nedition = "2021"\n' >"$P/dep/Cargo.toml"
    printf 'pub fn add(a: i32, b: i32) -> i32 { a + b }\n' >"$P/dep/src/lib.rs"
    printf '[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\ndep = { path = "../dep" }\n' \
        >"$P/app/Cargo.toml"
    printf 'fn main() { println!("{}", dep::add(2, 3)); }\n#[test]\nfn adds() { assert_eq!(dep::add(2, 3), 5); }\n' \
        >"$P/app/src/main.rs"
    bench rust "cargo build, cargo test, path dependency" 'cd app && cargo build --offline && cargo test --offline'
else
    skip rust "no cargo on PATH"
fi
