#!/usr/bin/env bash
# The seccomp deny-list's refusals are in the end-of-run summary: a
# supervisor outside the sandbox answers each denied call with the errno
# the plain filter gives (EPERM; other socket families EAFNOSUPPORT) and
# counts it by name with its first caller. clone3's ENOSYS, libc's cue to
# fall back to clone, stays as it was and is not counted. The command
# never holds the supervisor's descriptor. A run denied nothing prints no
# summary. As root and as the unprivileged test user.
. "$(dirname "$0")/lib.sh"
require_abi 1
if ! command -v perl >/dev/null; then
    echo "SKIP: needs perl (for raw system calls)"
    exit 77
fi

# x86_64 and arm64 numbers differ: ask the C library's headers through perl.
CALLS='require "syscall.ph";
for (1..2) { syscall(&SYS_keyctl, 0, -3, 0); print "keyctl: $!\n" }
syscall(&SYS_ptrace, 0, 0, 0, 0); print "ptrace: $!\n";
syscall(&SYS_unshare, 0x10000000); print "unshare: $!\n";
syscall(435, 0, 0); print "clone3: $!\n";
socket(S, 17, 3, 0) or print "packet socket: $!\n";
print "getpid works: ", (getppid() >= 0 ? "yes" : "no"), "\n";'
if ! perl -e 'require "syscall.ph"' 2>/dev/null; then
    echo "SKIP: perl has no syscall.ph (h2ph headers)"
    exit 77
fi

# check_denied WHO: the errnos and the summary in $OUTPUT.
check_denied() {
    contains "$1: keyctl fails with EPERM" "$OUTPUT" "keyctl: Operation not permitted"
    contains "$1: ptrace fails with EPERM" "$OUTPUT" "ptrace: Operation not permitted"
    contains "$1: unshare fails with EPERM" "$OUTPUT" "unshare: Operation not permitted"
    contains "$1: clone3 fails with ENOSYS" "$OUTPUT" "clone3: Function not implemented"
    contains "$1: a packet socket fails with EAFNOSUPPORT" "$OUTPUT" \
        "packet socket: Address family not supported by protocol"
    contains "$1: allowed calls go on" "$OUTPUT" "getpid works: yes"
    contains "$1: the summary counts and names the denied calls" "$OUTPUT" \
        "blocked during the run: 5 system calls denied by seccomp: keyctl x2, ptrace, unshare, socket (by perl, pid "
    contains "$1: the summary says Landlock's denials are not in it" "$OUTPUT" \
        "Landlock denials not counted"
}

sandbox -- perl -e "$CALLS"
equals "the run succeeds" "$STATUS" 0
check_denied root

# The supervisor's descriptor never reaches the command: not among its
# descriptors, not in its process.
sandbox -- sh -c 'ls -l /proc/self/fd/ /proc/$$/fd/ 2>&1'
lacks "the command holds no seccomp listener" "$OUTPUT" "seccomp"
lacks "a run denied nothing prints no summary" "$OUTPUT" "blocked during the run"

# Without a pid namespace the command is the runner's own child: the same.
sandbox --share=pid -- perl -e "$CALLS"
check_denied "--share=pid"

contains "--check says the denials are counted" "$("$RUN" --check)" \
    "seccomp: denials answered and counted by refgate-run's supervisor"
contains "--help names the supervisor" "$("$RUN" --help)" "goes to a supervisor in"

if user_setup; then
    OUTPUT=$(cd "$U/proj" && as_user "$RUN" -q --rm -- perl -e "$CALLS" 2>&1)
    check_denied unprivileged
fi

finish
