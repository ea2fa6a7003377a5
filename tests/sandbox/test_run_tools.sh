#!/usr/bin/env bash
# What toolchains get by default: caches they can write that are refgate's
# own (never the user's: a run must not poison them), the toolchain configs
# that hold no credential (~/.npmrc without its auth lines; a pip.conf with
# a password in its index URL and cargo's credentials.toml stay hidden), the
# everyday variables (EDITOR, CC, GOFLAGS, proxies without credentials) with
# the dropped names said in one line, a warning for a signing git config,
# and -w of a missing path refused with how to create it, or made (--mkdir).
. "$(dirname "$0")/lib.sh"
require_abi 1

# run_box ARGS...: refgate-run (not quiet) in a throwaway fork of $PROJ.
run_box() {
    OUTPUT=$(cd "$PROJ" && "$RUN" --rm "$@" 2>&1)
    STATUS=$?
}

# --- caches ------------------------------------------------------------------
CACHES=$HOME/.cache/refgate/caches
mkdir -p "$HOME/.cache/go-build" "$HOME/.npm"
echo "users-own" >"$HOME/.cache/go-build/marker"
run_box -- sh -c 'echo POISON >~/.cache/go-build/poison && echo go-cache-writable
echo x >~/.npm/x && echo npm-cache-writable; echo y >~/.cargo/registry/y && echo cargo-cache-writable
cat ~/.cache/go-build/marker; echo "GOCACHE=$GOCACHE npm_config_cache=$npm_config_cache"'
equals "caches: the command ran" "$STATUS" 0
contains "caches: go's build cache is writable" "$OUTPUT" "go-cache-writable"
contains "caches: npm's cache is writable" "$OUTPUT" "npm-cache-writable"
contains "caches: cargo's registry cache is writable" "$OUTPUT" "cargo-cache-writable"
contains "caches: GOCACHE names the cache where go looks by default" "$OUTPUT" \
    "GOCACHE=$HOME/.cache/go-build "
contains "caches: npm_config_cache too" "$OUTPUT" "npm_config_cache=$HOME/.npm"
lacks "caches: the user's own cache is not the run's" "$OUTPUT" "users-own"
absent "caches: nothing written into the user's own go cache" "$HOME/.cache/go-build/poison"
absent "caches: nothing written into the user's own npm cache" "$HOME/.npm/x"
equals "caches: the write landed in refgate's cache" "$(cat "$CACHES/go-build/poison")" POISON
equals "caches: which is the caller's alone" "$(stat -c %a "$CACHES/go-build")" 700
equals "caches: the root too" "$(stat -c %a "$CACHES")" 700

run_box -- sh -c 'cat ~/.cache/go-build/poison'
contains "caches: persistent from one run to the next" "$OUTPUT" "POISON"

run_box --no-caches -- sh -c 'echo z >~/.cache/go-build/z && echo wrote; echo "GOCACHE=${GOCACHE-unset}"'
lacks "--no-caches: no writable cache" "$OUTPUT" "wrote"
contains "--no-caches: GOCACHE not set" "$OUTPUT" "GOCACHE=unset"
absent "--no-caches: nothing written to the user's cache" "$HOME/.cache/go-build/z"

run_box --cache-dir "$T/mycaches" -- sh -c 'echo w >~/.cache/pip/w && echo pip-cache-writable'
contains "--cache-dir: the cache is writable" "$OUTPUT" "pip-cache-writable"
equals "--cache-dir: and lives there" "$(cat "$T/mycaches/pip/w" 2>&1)" w

# Go's module cache is seeded from the user's: a module downloaded before is
# found offline (GOPROXY=file://<the user's download cache, read-only>,...).
if command -v go >/dev/null && command -v python3 >/dev/null; then
    FAKE=$T/goproxy/example.com/dep/@v
    mkdir -p "$FAKE" "$PROJ/gomod"
    printf 'module example.com/dep\n\ngo 1.18\n' >"$FAKE/v1.0.0.mod"
    echo '{"Version":"v1.0.0","Time":"2020-01-01T00:00:00Z"}' >"$FAKE/v1.0.0.info"
    echo v1.0.0 >"$FAKE/list"
    python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1], "w")
z.writestr("example.com/dep@v1.0.0/go.mod", "module example.com/dep\n\ngo 1.18\n")
z.writestr("example.com/dep@v1.0.0/dep.go", "package dep\n\nfunc Seven() int { return 7 }\n")' "$FAKE/v1.0.0.zip"
    printf 'module example.com/app\n\ngo 1.18\n\nrequire example.com/dep v1.0.0\n' >"$PROJ/gomod/go.mod"
    printf 'package main\n\nimport (\n\t"fmt"\n\n\t"example.com/dep"\n)\n\nfunc main() { fmt.Println(dep.Seven()) }\n' \
        >"$PROJ/gomod/main.go"
    # The user's download cache gets the module, as a real `go get` would.
    (cd "$PROJ/gomod" && GOPROXY=file://$T/goproxy GOSUMDB=off GOFLAGS=-mod=mod go mod download example.com/dep 2>&1)
    rm -rf "$T/gocaches"
    run_box -q --cache-dir "$T/gocaches" -e GOSUMDB=off -- sh -c 'cd gomod && GOFLAGS=-mod=mod go run . 2>&1; echo "GOPROXY=$GOPROXY"'
    contains "go seed: a module in the user's cache builds offline" "$OUTPUT" "7"
    contains "go seed: GOPROXY reads the user's download cache first" "$OUTPUT" \
        "GOPROXY=file://$HOME/.cache/refgate-seed/go,https://proxy.golang.org,direct"
    check "go seed: the module landed in refgate's cache" [ -d "$T/gocaches/go-mod/example.com/dep@v1.0.0" ]
    run_box -q --cache-dir "$T/gocaches2" -e GOSUMDB=off -e GOPROXY=off -- sh -c 'cd gomod && GOFLAGS=-mod=mod go run . 2>&1'
    contains "go seed: GOPROXY=off is respected (no seed)" "$OUTPUT" "module lookup disabled by GOPROXY=off"
    chmod -R u+w "$HOME/go" && rm -rf "$HOME/go" "$PROJ/gomod"
else
    echo "ok - go seed # SKIP: needs go and python3"
fi

# -w of a tool's usual path is a choice to write the user's own cache: it wins.
run_box -w "$HOME/.cache/go-build" -- sh -c 'echo mine >~/.cache/go-build/w && echo "GOCACHE=$GOCACHE"'
equals "-w of the real cache: written there, as asked" "$(cat "$HOME/.cache/go-build/w" 2>&1)" mine
contains "-w of the real cache: GOCACHE names it" "$OUTPUT" "GOCACHE=$HOME/.cache/go-build"
absent "-w of the real cache: refgate's got nothing" "$CACHES/go-build/w"
rm -f "$HOME/.cache/go-build/w"

run_box --cache-dir "$HOME/.ssh/caches" -- true
equals "--cache-dir in a secret: refused" "$STATUS" 125
absent "--cache-dir in a secret: nothing made there" "$HOME/.ssh/caches"

chmod 777 "$CACHES/npm"
run_box -- true
equals "caches: one others can write refuses the run" "$STATUS" 125
contains "caches: and says why" "$OUTPUT" "writable by group or others"
chmod 700 "$CACHES/npm"

# --- toolchain configs -------------------------------------------------------
printf 'save-exact=true\n//registry.npmjs.org/:_authToken=SECRET-NPM-TOKEN\n_auth=SECRET-NPM-AUTH\n' \
    >"$HOME/.npmrc"
mkdir -p "$HOME/.config/pip" "$HOME/.cargo" "$HOME/.config/go"
printf '[global]\nindex-url = https://me:SECRET-PIP@pypi.example/simple\n' >"$HOME/.config/pip/pip.conf"
printf '[build]\njobs = 3\n' >"$HOME/.cargo/config.toml"
printf '[registry]\ntoken = "SECRET-CARGO"\n' >"$HOME/.cargo/credentials.toml"
printf 'GOFLAGS=-mod=mod\n' >"$HOME/.config/go/env"
run_box -- sh -c 'cat ~/.npmrc; cat ~/.cargo/config.toml ~/.config/go/env
cat ~/.config/pip/pip.conf; cat ~/.cargo/credentials.toml'
equals "configs: the command ran" "$STATUS" 1
contains "configs: ~/.npmrc is given" "$OUTPUT" "save-exact=true"
lacks "configs: without its auth token" "$OUTPUT" "SECRET-NPM"
contains "configs: and says which settings it left out (names)" "$OUTPUT" \
    "~/.npmrc given without its auth settings (//registry.npmjs.org/:_authToken, _auth)"
contains "configs: a clean cargo config.toml is readable" "$OUTPUT" "jobs = 3"
contains "configs: go's env file is readable" "$OUTPUT" "GOFLAGS=-mod=mod"
denied "configs: a pip.conf with a password in it stays hidden" "$OUTPUT" \
    "$HOME/.config/pip/pip.conf"
contains "configs: and the run says so (the key, not the value)" "$OUTPUT" \
    "~/.config/pip/pip.conf hidden (it sets index-url)"
denied "configs: cargo's credentials.toml stays hidden" "$OUTPUT" "$HOME/.cargo/credentials.toml"
lacks "configs: no credential leaks anywhere" "$OUTPUT" "SECRET-"

run_box -q -- true
lacks "configs: -q keeps it quiet" "$OUTPUT" "toolchain configs"
rm -f "$HOME/.npmrc" "$HOME/.config/pip/pip.conf"

# --- environment -------------------------------------------------------------
OUTPUT=$(cd "$PROJ" && EDITOR=ed CC=cc-x CFLAGS=-O1 GOFLAGS=-mod=mod CI=true \
    https_proxy=http://proxy.example:3128 HTTP_PROXY=http://me:SECRET-PROXY@proxy.example:3128 \
    RG_TEST_UNLISTED=1 "$RUN" --rm -- sh -c 'env | sort' 2>&1)
for v in EDITOR=ed CC=cc-x CFLAGS=-O1 GOFLAGS=-mod=mod CI=true https_proxy=http://proxy.example:3128; do
    contains "env: ${v%%=*} passes" "$OUTPUT" "$v"
done
lacks "env: a proxy with credentials does not pass" "$OUTPUT" "HTTP_PROXY=http"
lacks "env: nor does its value show" "$OUTPUT" "SECRET-PROXY"
contains "env: the dropped names are said in one line" "$OUTPUT" "env: not passed: "
contains "env: naming the unlisted one" "$(echo "$OUTPUT" | grep 'not passed')" RG_TEST_UNLISTED
contains "env: and the proxy with credentials" "$(echo "$OUTPUT" | grep 'not passed')" HTTP_PROXY
OUTPUT=$(cd "$PROJ" && RG_TEST_UNLISTED=1 "$RUN" -q --rm -- true 2>&1)
lacks "env: -q keeps it quiet" "$OUTPUT" "not passed"

# --- git signing, -w of a missing path --------------------------------------
printf '[commit]\n\tgpgsign = true\n' >>"$HOME/.gitconfig"
run_box -q -- true
contains "gpgsign: a signing git config is warned about (even with -q)" "$OUTPUT" \
    "warning: your git config sets commit.gpgsign"
sed -i '/\[commit\]/,$d' "$HOME/.gitconfig"

run_box -w "$OUT/new/dir" -- true
equals "-w missing: refused" "$STATUS" 125
contains "-w missing: saying how to create it" "$OUTPUT" "mkdir -p $OUT/new/dir) or add --mkdir"
absent "-w missing: nothing created" "$OUT/new"
run_box --mkdir -w "$OUT/new/dir" -- sh -c "echo made >$OUT/new/dir/f"
equals "--mkdir: the run ran" "$STATUS" 0
equals "--mkdir: the directory was made and is writable" "$(cat "$OUT/new/dir/f" 2>&1)" made
run_box --mkdir -w "$HOME/.ssh/new" -- true
equals "--mkdir: never inside a secret" "$STATUS" 125
absent "--mkdir: nothing made there" "$HOME/.ssh/new"
ln -s "$HOME/.ssh" "$HOME/docs/keys"
run_box --mkdir -w "$HOME/docs/keys/new/x" -- true
equals "--mkdir: nor through a symlink into one" "$STATUS" 125
absent "--mkdir: nothing made there either" "$HOME/.ssh/new"
rm "$HOME/docs/keys"
run_box --mkdir -w "$OUT/.hidden/new" -- sh -c "echo ok >$OUT/.hidden/new/f"
equals "--mkdir: a dot-directory is fine" "$(cat "$OUT/.hidden/new/f" 2>&1)" ok
run_box --mkdir -w "$OUT/a/../b" -- true
equals "--mkdir: a .. component is refused" "$STATUS" 125

# --- as an unprivileged user -------------------------------------------------
if user_setup; then
    OUTPUT=$(cd "$U/proj" && as_user "$RUN" -q --rm -- sh -c 'echo u >~/.cache/go-build/u && echo ok-u' 2>&1)
    contains "unprivileged: the go cache is writable" "$OUTPUT" "ok-u"
    equals "unprivileged: in refgate's cache, owned by the user" \
        "$(stat -c '%U %a' "$U/home/.cache/refgate/caches/go-build" 2>&1)" "$RG_TEST_USER 700"
    absent "unprivileged: the user's own go cache untouched" "$U/home/.cache/go-build/u"
fi

finish
