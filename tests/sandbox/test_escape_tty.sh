#!/usr/bin/env bash
# The command never holds the caller's terminal (findings 1 and 2 from the
# other side): when stdin is a terminal, init gives the command a pty of the
# run's own devpts and relays it; input, output, the exit code and the
# window size pass, and the caller's terminal modes are restored after.
. "$(dirname "$0")/lib.sh"
require_abi 1
if ! command -v script >/dev/null; then
    echo "SKIP: needs script (util-linux) to run under a terminal"
    exit 77
fi
W="$T/work"
mkdir -p "$W"

# Under script(1)'s terminal: its device, its size and modes before and
# after, and what the command sees.
OUTPUT=$(printf 'typed-line\n' | script -qec "stty rows 33 cols 101
echo outer=\$(stat -L -c %d:%t:%T /proc/self/fd/0); echo before=\$(stty -g)
$RUN -q -d $W -- sh -c 'echo inner=\$(stat -L -c %d:%t:%T /proc/self/fd/0)
echo size=\$(stty size); read l; echo got=\$l; echo pts=[\$(ls /dev/pts | tr \"\\n\" \" \")]; exit 7'
echo status=\$?; echo after=\$(stty -g)" /dev/null 2>&1 | tr -d '\r')
outer=$(echo "$OUTPUT" | sed -n 's/^outer=//p')
inner=$(echo "$OUTPUT" | sed -n 's/^inner=//p')
if [ -n "$inner" ] && [ "$inner" != "$outer" ]; then
    ok "the command's stdin is not the caller's terminal"
else
    not_ok "the command's stdin is not the caller's terminal"
    echo "  outer $outer, inner $inner"
fi
contains "the command's terminal is in the run's devpts" "$OUTPUT" "pts=[0 ptmx ]"
contains "input typed at the caller's terminal reaches the command" "$OUTPUT" "got=typed-line"
contains "the window size is the caller's" "$OUTPUT" "size=33 101"
contains "the exit code passes through" "$OUTPUT" "status=7"
equals "the caller's terminal modes are restored" \
    "$(echo "$OUTPUT" | sed -n 's/^after=//p')" "$(echo "$OUTPUT" | sed -n 's/^before=//p')"

OUTPUT=$(script -qec "echo outer=\$(stat -L -c %d:%t:%T /proc/self/fd/0)
$RUN -q --no-pty -d $W -- sh -c 'echo inner=\$(stat -L -c %d:%t:%T /proc/self/fd/0)'" /dev/null 2>&1 | tr -d '\r')
equals "--no-pty gives the command the caller's terminal" \
    "$(echo "$OUTPUT" | sed -n 's/^inner=//p')" "$(echo "$OUTPUT" | sed -n 's/^outer=//p')"

finish
