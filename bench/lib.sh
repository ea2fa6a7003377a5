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
