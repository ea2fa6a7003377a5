#!/usr/bin/env bash
# Finding 10: one run could read another concurrent run's private TMPDIR
# (as root, 0700 was no obstacle; and it sat in the shared /tmp). Each run
# now has a private /tmp of its own, with its TMPDIR bound inside it: the
# other run's directory does not exist there.
. "$(dirname "$0")/lib.sh"
require_abi 1

# two_runs BASE PREFIX... : run A parks with a secret in its TMPDIR while
# run B looks for it (FIFOs order them); B's output in $OUTPUT.
two_runs() {
    local base=$1 a
    shift
    W1="$base/w1" W2="$base/w2"
    "$@" mkdir -p "$W1" "$W2"
    "$@" mkfifo "$W1/ready" "$W1/stop"
    "$@" "$RUN" -q -d "$W1" -- sh -c 'echo SECRET-TMPDIR >"$TMPDIR/secret"; echo "$TMPDIR" >ready
read x <stop' >/dev/null 2>&1 &
    a=$!
    TMP_A=$(cat "$W1/ready")
    OUTPUT=$("$@" "$RUN" -q -d "$W2" -- sh -c "echo mine >\"\$TMPDIR/own\" && cat \"\$TMPDIR/own\";
ls '$TMP_A'; cat '$TMP_A/secret'; echo \"tmp=[\$(ls /tmp | tr '\\n' ' ')]\"" 2>&1)
    echo go >"$W1/stop"
    wait "$a"
    A_STATUS=$?
}

two_runs "$T"
contains "run A has a private TMPDIR" "$TMP_A" "refgate-run."
equals "run A ended normally" "$A_STATUS" 0
contains "run B's own TMPDIR works" "$OUTPUT" "mine"
denied "run A's TMPDIR is not reachable from run B" "$OUTPUT" "$TMP_A'"
lacks "run A's secret does not leak" "$OUTPUT" "SECRET-TMPDIR"
lacks "run B's /tmp does not list run A's directory" "$(echo "$OUTPUT" | grep '^tmp=')" \
    "$(basename "$TMP_A")"

if user_setup; then
    two_runs "$U" as_user
    contains "unprivileged: run B's own TMPDIR works" "$OUTPUT" "mine"
    denied "unprivileged: run A's TMPDIR is not reachable from run B" "$OUTPUT" "$TMP_A'"
    lacks "unprivileged: run A's secret does not leak" "$OUTPUT" "SECRET-TMPDIR"
fi

finish
