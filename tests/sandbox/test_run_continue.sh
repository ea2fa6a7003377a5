#!/usr/bin/env bash
# Continuing a run: `--continue FORK` (or a working directory in a fork)
# runs again in that fork, shown at the original path, and the second
# command sees the first's edits; `refgate diff` shows both. Run from
# inside a fork, refgate-run never nests a fork in it (no proj.1.1). A fork
# whose run is still alive, a path that is not a fork, and --continue
# outside any fork are refused. As root and as an unprivileged account.
. "$(dirname "$0")/lib.sh"
require_abi 1

# The first run makes the fork.
(cd "$PROJ" && "$RUN" -q -- sh -c 'echo first >>README; echo one >step1') 2>"$T/err"
F=$(fork_path <"$T/err")
equals "the first run makes a fork" "$F" "$PROJ.1"

# The second continues it from elsewhere, at the original path.
OUTPUT=$(cd "$OUT" && "$RUN" --continue "$F" -- sh -c 'pwd; cat step1; echo two >step2' 2>"$T/err")
STATUS=$?
equals "--continue FORK runs" "$STATUS" 0
contains "the continued run is at the original path" "$OUTPUT" "$PROJ"
contains "the second command sees the first's edits" "$OUTPUT" "one"
contains "stderr says the fork is continued" "$(cat "$T/err")" "fork: $F (base $T/.proj.1.base), continued"
contains "the hint says how to continue again" "$(cat "$T/err")" "--continue $F -- CMD"
check "the second command's file is in the fork" test -f "$F/step2"
absent "no new fork was made" "$PROJ.2"
absent "nothing reached the original" "$PROJ/step2"

if [ -n "${REFGATE:-}" ] && [ -x "$REFGATE" ]; then
    diff=$("$REFGATE" diff "$F" 2>&1)
    contains "refgate diff shows the first run's edit" "$diff" "+first"
    contains "... and its new file" "$diff" "step1"
    contains "... and the second run's new file" "$diff" "step2"
fi

# Started inside the fork (in a subdirectory): continued, not nested.
OUTPUT=$(cd "$F/src" && "$RUN" -- sh -c 'pwd; echo three >../step3' 2>&1)
contains "from inside a fork, the run continues it" "$OUTPUT" "$F is a fork: continuing it"
contains "... in the same subdirectory at the original path" "$OUTPUT" "$PROJ/src"
check "... and writes the fork" test -f "$F/step3"
absent "no fork of the fork is made" "$F.1"
absent "no fork of its subdirectory is made" "$F/src.1"
OUTPUT=$(cd "$F" && "$RUN" -q --continue -- cat step3 2>&1)
contains "--continue without FORK takes the fork around the working directory" "$OUTPUT" three

# A fork whose run is alive is refused.
(cd "$OUT" && exec "$RUN" -q --continue "$F" -- sh -c 'echo x >alive; sleep 30') 2>/dev/null &
bg=$!
CLEANUPS+=("kill $bg 2>/dev/null")
if wait_for_file "$F/alive"; then
    OUTPUT=$("$RUN" -q --continue "$F" -- true 2>&1)
    equals "continuing a fork whose run is alive is refused" "$?" 125
    contains "... and says why" "$OUTPUT" "refusing to continue $F: its run is still alive"
else
    not_ok "the background run started"
fi
kill "$bg" 2>/dev/null
wait "$bg" 2>/dev/null
check "the refused run did not remove the fork" test -f "$F/step1"
OUTPUT=$("$RUN" -q --continue "$F" -- true 2>&1)
equals "once the run ends the fork can be continued" "$?" 0

# Not a fork; not in a fork.
mkdir -p "$T/plain.3"
OUTPUT=$("$RUN" -q --continue "$T/plain.3" -- true 2>&1)
equals "a directory named like a fork but without a base is refused" "$?" 125
contains "... as not a fork" "$OUTPUT" "not a fork made by refgate-run"
OUTPUT=$(cd "$OUT" && "$RUN" -q --continue -- true 2>&1)
equals "--continue outside any fork is refused" "$?" 125
contains "... and names the way" "$OUTPUT" "--continue DIR.N"
absent "a refused --continue creates nothing" "$OUT.1"

if user_setup; then
    (cd "$U/proj" && as_user "$RUN" -q -- sh -c 'echo u1 >u1') 2>"$T/uerr"
    UF=$(fork_path <"$T/uerr")
    OUTPUT=$(cd "$U" && as_user "$RUN" -q --continue "$UF" -- sh -c 'pwd; cat u1' 2>&1)
    contains "unprivileged: --continue sees the first run's file" "$OUTPUT" u1
    contains "unprivileged: ... at the original path" "$OUTPUT" "$U/proj"
fi

finish
