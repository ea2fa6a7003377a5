# shellcheck shell=bash
# Sourced by the bench scripts.

# bench_binary VAR RELPATH: print the program the bench runs: $VAR when set,
# else $REFGATE_BUILD/RELPATH, else build/RELPATH in this checkout; exit 2
# saying how to name it when none is executable.
bench_binary() {
    local var=$1 rel=$2 src c
    src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    for c in "${!var:-}" "${REFGATE_BUILD:-}/$rel" "$src/build/$rel"; do
        [[ -n $c && -x $c && ! -d $c ]] && { echo "$c"; return 0; }
    done
    echo "bench/$(basename "$0"): set $var to the $(basename "$rel") binary (or REFGATE_BUILD to a build directory)" >&2
    exit 2
}

# bench_git_env HOME: git that reads no config of the machine's or the
# user's, commits as one fixed identity, and makes `main` by default.
bench_git_env() {
    export HOME=$1 GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
    export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
    mkdir -p "$1"
    git config --global init.defaultBranch main
}
