#!/usr/bin/env bash
# Everyday toolchains work inside refgate-run with its default options: git
# (a commit running a hook, rebase, stash, a worktree inside the fork, gc),
# C (cmake configure, build, ctest), Python (multiprocessing's Pool and
# SemLock on /dev/shm, a hard-coded /tmp path, unittest or pytest, an
# editable pip install and an sdist, offline), Node (npm install and npm ci
# from a tarball `npm pack` made, npm test), Go (build, test, `go mod tidy`
# with a local replace, GOFLAGS=-mod=mod GOPROXY=off, a fresh home) and Rust
# (cargo build and test --offline with a path dependency, fresh caches).
# Each case runs the same script outside, in a copy, and asserts the same
# output. A case whose tool is missing skips, saying so.
#
# As the unprivileged test user where it can run the tool (the suite's
# root installs some toolchains under /root, out of that user's reach);
# otherwise as root, with the real HOME (where the toolchain is) and
# --cache-dir in the test's directory, so the caches start empty.
#
# RG_TOOLCHAINS_RUNNER, when set, is a program that takes refgate-run's
# arguments and runs the case through something else
# (tests/integration/test_run_toolchains.sh: `refgate run`).
. "$(dirname "$0")/lib.sh"
require_abi 1
if [ -n "${RG_TOOLCHAINS_RUNNER:-}" ]; then
    RUN=$RG_TOOLCHAINS_RUNNER
    echo "# every case through $RUN"
fi

SYSPATH=/usr/local/bin:/usr/bin:/bin
if user_setup; then
    BOX=$U/box
    mkdir -p "$BOX"
    chown "$RG_TEST_USER:" "$BOX"
    # as_box CMD...: as the test user, with a PATH it can search.
    as_box() { as_user env PATH="$SYSPATH" "$@"; }
    BOX_HOME=$U/home
else
    BOX=$T/box
    mkdir -p "$BOX"
    as_box() { "$@"; }
    BOX_HOME=$HOME
fi

# compare NAME DIR SCRIPT [RUNNER_ARGS...]: run SCRIPT in a fork of DIR
# inside, and in a copy of DIR outside, as the test user; both must exit 0
# and print the same.
compare() {
    local name=$1 dir=$2 script=$3 inside outside st_in st_out
    shift 3
    inside=$(cd "$dir" && "${RUNNER[@]}" "$RUN" -q --rm "$@" -- /bin/sh -c "$script" 2>&1)
    st_in=$?
    # The fork's path is refgate-run's one line even with -q.
    inside=$(echo "$inside" | grep -v '^refgate-run: fork: ')
    rm -rf "$dir.outside"
    cp -a "$dir" "$dir.outside"
    outside=$(cd "$dir.outside" && "${RUNNER[@]}" /bin/sh -c "$script" 2>&1)
    st_out=$?
    rm -rf "$dir.outside"
    if [ "$st_out" != 0 ]; then
        not_ok "$name: the script fails outside too (the test's own fault)"
        echo "$outside" | tail -20
        return
    fi
    INSIDE=$inside
    equals "$name: succeeds inside" "$st_in" 0
    equals "$name: same output inside as outside" "$inside" "$outside"
}

# have NAME CMD...: whether the runner can run CMD; else a printed skip.
have() {
    local name=$1
    shift
    if "${RUNNER[@]}" "$@" >/dev/null 2>&1; then return 0; fi
    echo "ok - $name # SKIP: '$*' does not run here (tool missing or out of reach)"
    return 1
}

# proj NAME: a fresh git project directory for one case, owned by the runner.
proj() {
    P=$BOX/$1
    mkdir -p "$P"
}
own() { [ "${RUNNER[0]:-}" = as_box ] && chown -R "$RG_TEST_USER:" "$BOX" || true; }

RUNNER=(as_box)
# Outside the sandbox /tmp and /dev/shm are shared with every other test
# (this one runs twice at once under ctest -j: here and through
# integration/test_run_toolchains), so what a case writes there outside is
# named after this test's directory.
ID=$(basename "$T")

GITID='export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
export GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z'

# --- git ---------------------------------------------------------------------
if have git git --version; then
    proj git
    (cd "$P" && eval "$GITID" && git init -q -b main && echo a >a && git add a &&
        git commit -qm one && git branch topic && echo b >b && git add b && git commit -qm two &&
        git checkout -q topic && echo c >c && git add c && git commit -qm three && git checkout -q main)
    own
    compare "git" "$P" "$GITID"'
printf "#!/bin/sh\necho hook-ran >&2\n" >.git/hooks/pre-commit && chmod +x .git/hooks/pre-commit
echo d >d && git add d && git commit -qm four 2>&1
git checkout -q topic && git rebase -q main && git log --format=%s | tr "\n" " "; echo
echo dirty >>a && git stash -q && cat a && git stash pop -q && git diff --stat | tail -1
git worktree add -q wt-inside main 2>&1 && git -C wt-inside log --format=%s -1
git gc -q && git count-objects -v | grep -E "^(count|packs):"
git fsck --no-progress 2>&1 && echo fsck-ok'
    contains "git: the pre-commit hook ran" "$INSIDE" "hook-ran"
    contains "git: the rebase replayed the branch" "$INSIDE" "three four two one"
    contains "git: the worktree inside the fork works" "$INSIDE" "four"
fi

# --- C: cmake ----------------------------------------------------------------
if have cmake cmake --version && have cc cc --version; then
    proj c
    printf 'int main(void) { return 0; }\n' >"$P/t.c"
    printf 'cmake_minimum_required(VERSION 3.10)\nproject(t C)\nenable_testing()\nadd_executable(t t.c)\nadd_test(NAME t COMMAND t)\n' \
        >"$P/CMakeLists.txt"
    own
    compare "cmake" "$P" 'cmake -S . -B build >/dev/null && cmake --build build >/dev/null &&
cd build && ctest 2>&1 | grep "tests passed"'
    # A build directory configured before the run names the original path:
    # the fork is shown there, so it builds (in the fork).
    (cd "$P" && "${RUNNER[@]}" cmake -S . -B prebuilt >/dev/null 2>&1)
    OUTPUT=$(cd "$P" && "${RUNNER[@]}" "$RUN" -q --rm -- sh -c \
        'cmake --build prebuilt >/dev/null && test -x prebuilt/t && echo prebuilt-ok' 2>&1)
    contains "cmake with a build dir configured before the run builds" "$OUTPUT" "prebuilt-ok"
    absent "the build landed in the fork, not the original" "$P/prebuilt/t"
fi

# --- Python ------------------------------------------------------------------
PY=$(command -v python3 || true)
if [ -n "$PY" ] && have python3 python3 -c 'import multiprocessing, unittest'; then
    proj py
    mkdir -p "$P/rgpkg"
    printf 'from setuptools import setup\nsetup(name="rgpkg", version="1.0", packages=["rgpkg"])\n' >"$P/setup.py"
    echo 'def add(a, b): return a + b' >"$P/rgpkg/__init__.py"
    cat >"$P/test_add.py" <<'PYEOF'
import multiprocessing as mp
import queue
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

    def test_semlock_and_queue(self):
        lock, q = mp.Lock(), mp.Queue()
        with lock:
            p = mp.Process(target=q.put, args=(42,))
            p.start()
            # Bounded for a hung child, not timed: a busy machine may
            # take long to start one.
            try:
                got = q.get(timeout=600)
            except queue.Empty:
                self.fail("waited 600 s for the child process's value on the Queue")
            self.assertEqual(got, 42)
            p.join()

if __name__ == "__main__":
    unittest.main()
PYEOF
    own
    TESTER='python3 -m unittest -q test_add 2>&1 | tail -1'
    if "${RUNNER[@]}" python3 -c 'import pytest' 2>/dev/null; then
        TESTER='python3 -m pytest -q -p no:cacheprovider test_add.py 2>&1 | tail -1 | sed "s/ in .*//"'
    fi
    # A hard-coded /tmp path.
    FIXED=/tmp/rg-toolchains-fixed.$ID
    compare "python: multiprocessing, /dev/shm, /tmp, tests" "$P" "
echo shm >/dev/shm/rg-test.$ID && cat /dev/shm/rg-test.$ID && rm /dev/shm/rg-test.$ID
echo fixed-path >$FIXED && cat $FIXED && rm $FIXED
$TESTER"
    contains "python: the tests passed" "$INSIDE" "OK"
    if have "pip install -e" sh -c 'python3 -c "import setuptools, venv" && python3 -m pip --version'; then
        compare "python: pip install -e (offline), sdist" "$P" "V=/tmp/rg-venv.$ID"'
rm -rf $V && python3 -m venv --without-pip --system-site-packages $V &&
$V/bin/python -m pip install -q --no-build-isolation --no-index -e . 2>&1 | grep -v "^\s*$" | grep -iv warning
cd / && $V/bin/python -c "import rgpkg; print(rgpkg.add(1, 1))" && cd "$OLDPWD" &&
rm -rf $V && python3 setup.py -q sdist >/dev/null 2>&1 && tar tzf dist/rgpkg-1.0.tar.gz | sort'
    fi
fi

# --- Node --------------------------------------------------------------------
if have npm npm --version; then
    proj node
    mkdir -p "$P/lib" "$P/app"
    echo '{"name":"rglib","version":"1.0.0","main":"index.js"}' >"$P/lib/package.json"
    echo 'module.exports = (a, b) => a + b;' >"$P/lib/index.js"
    echo '{"name":"rgapp","version":"1.0.0","scripts":{"test":"node test.js"}}' >"$P/app/package.json"
    echo 'if (require("rglib")(2, 3) !== 5) process.exit(1); console.log("add ok");' >"$P/app/test.js"
    own
    (cd "$P/lib" && "${RUNNER[@]}" npm pack -q >/dev/null 2>&1)
    NPM='--offline --no-audit --no-fund --loglevel=error'
    compare "npm" "$P" "cd app && npm install $NPM ../lib/rglib-1.0.0.tgz >/dev/null && npm test 2>&1 | grep ok &&
rm -rf node_modules && npm ci $NPM >/dev/null && npm test 2>&1 | grep ok && ls node_modules"
    contains "npm: npm test passed after install and ci" "$INSIDE" "add ok
add ok"
fi

# --- Go ----------------------------------------------------------------------
if have go go version; then
    proj go
    mkdir -p "$P/lib" "$P/app"
    printf 'module example.com/lib\n\ngo 1.18\n' >"$P/lib/go.mod"
    printf 'package lib\n\nfunc Add(a, b int) int { return a + b }\n' >"$P/lib/lib.go"
    printf 'module example.com/app\n\ngo 1.18\n\nrequire example.com/lib v0.0.0\n\nreplace example.com/lib => ../lib\n' \
        >"$P/app/go.mod"
    printf 'package main\n\nimport (\n\t"fmt"\n\n\t"example.com/lib"\n)\n\nfunc main() { fmt.Println(lib.Add(2, 3)) }\n' \
        >"$P/app/main.go"
    printf 'package main\n\nimport (\n\t"testing"\n\n\t"example.com/lib"\n)\n\nfunc TestAdd(t *testing.T) {\n\tif lib.Add(2, 3) != 5 {\n\t\tt.Fatal()\n\t}\n}\n' \
        >"$P/app/main_test.go"
    own
    # A fresh home: no build or module cache of the user's to lean on.
    rm -rf "$BOX_HOME/.cache/go-build" "$BOX_HOME/go" "$BOX_HOME/.cache/refgate"
    export GOFLAGS=-mod=mod GOPROXY=off
    compare "go" "$P" "A=/tmp/rg-go-app.$ID"'
cd app && go build -o $A . && $A && rm $A && go vet ./... &&
go test -count=1 ./... | sed "s/[[:space:]]*[0-9.]*s$//" && go mod tidy && cat go.mod'
    contains "go: the program built and ran" "$INSIDE" "5"
    contains "go: its test passed" "$(echo "$INSIDE" | grep '^ok')" "example.com/app"
    check "go: a run filled refgate's build cache" [ -d "$BOX_HOME/.cache/refgate/caches/go-build/00" ]
    unset GOFLAGS GOPROXY
fi

# --- Rust --------------------------------------------------------------------
RUNNER=(as_box)
CARGO_ARGS=()
if ! "${RUNNER[@]}" cargo --version >/dev/null 2>&1 && [ "$(id -u)" = 0 ] &&
    HOME=$(getent passwd root | cut -d: -f6) cargo --version >/dev/null 2>&1; then
    echo "# cargo is out of $RG_TEST_USER's reach: the Rust case runs as root, real HOME, fresh --cache-dir"
    RUNNER=(env HOME="$(getent passwd root | cut -d: -f6)")
    CARGO_ARGS=(--cache-dir "$T/rust-caches")
fi
if have cargo cargo --version; then
    proj rust
    mkdir -p "$P/dep/src" "$P/app/src"
    printf '[package]\nname = "dep"\nversion = "0.1.0"\nedition = "2021"\n' >"$P/dep/Cargo.toml"
    printf 'pub fn add(a: i32, b: i32) -> i32 { a + b }\n' >"$P/dep/src/lib.rs"
    printf '[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\ndep = { path = "../dep" }\n' \
        >"$P/app/Cargo.toml"
    printf 'fn main() { println!("{}", dep::add(2, 3)); }\n#[test]\nfn adds() { assert_eq!(dep::add(2, 3), 5); }\n' \
        >"$P/app/src/main.rs"
    [ "${RUNNER[0]}" = as_box ] && own
    compare "cargo" "$P" 'cd app && cargo build -q --offline && cargo run -q --offline &&
cargo test -q --offline 2>&1 | grep "test result" | sed "s/; finished in .*//"' "${CARGO_ARGS[@]}"
    contains "cargo: the test passed" "$INSIDE" "test result: ok. 1 passed"
fi

finish
