#!/usr/bin/env bash
# Finding 10: one run could read another concurrent run's private TMPDIR
# (as root, 0700 was no obstacle; and it sat in the shared /tmp). Each run
# now has a private /tmp of its own, with its TMPDIR bound inside it: the
# other run's directory does not exist there.
. "$(dirname "$0")/lib.sh"
require_abi 1

W1="$T/w1" W2="$T/w2"
mkdir -p "$W1" "$W2"
# Run A parks with a secret in its TMPDIR; FIFOs order the two runs.
mkfifo "$W1/ready" "$W1/stop"
"$RUN" -q -d "$W1" -- sh -c 'echo SECRET-TMPDIR >"$TMPDIR/secret"; echo "$TMPDIR" >ready
read x <stop' >"$T/a.out" 2>&1 &
A=$!
CLEANUPS+=("kill $A 2>/dev/null")
TMP_A=$(cat "$W1/ready")
contains "run A has a private TMPDIR" "$TMP_A" "refgate-run."

OUTPUT=$("$RUN" -q -d "$W2" -- sh -c "echo mine >\"\$TMPDIR/own\" && cat \"\$TMPDIR/own\";
ls '$TMP_A'; cat '$TMP_A/secret'; echo \"tmp=[\$(ls /tmp | tr '\\n' ' ')]\"" 2>&1)
echo go >"$W1/stop"
wait "$A"
equals "run A ended normally" "$?" 0
contains "run B's own TMPDIR works" "$OUTPUT" "mine"
denied "run A's TMPDIR is not reachable from run B" "$OUTPUT" "$TMP_A'"
lacks "run A's secret does not leak" "$OUTPUT" "SECRET-TMPDIR"
lacks "run B's /tmp does not list run A's directory" "$(echo "$OUTPUT" | grep '^tmp=')" \
    "$(basename "$TMP_A")"

finish
