#!/usr/bin/env bash
# Finding 12: the home directory was readable through another mount of it
# (a bind mount elsewhere, found in /proc/self/mountinfo): Landlock hid the
# path, not the directory. Every other mount through which the home is
# visible is hidden too.
. "$(dirname "$0")/lib.sh"
require_abi 1
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root to make a bind mount"
    exit 77
fi

# Outside /tmp, so the private /tmp alone would not hide it.
M=$(mktemp -d /var/tmp/rg-alias.XXXXXX)
chmod 755 "$M"
CLEANUPS+=("rmdir '$M'")
if ! mount --bind "$HOME" "$M"; then
    echo "SKIP: cannot bind-mount here"
    exit 77
fi
CLEANUPS=("umount '$M'" "${CLEANUPS[@]}")
check "control: the secret is readable through the bind mount outside" \
    grep -q SECRET-SSH-KEY "$M/.ssh/id_ed25519"

sandbox_sh "cat \"\$HOME/.gitconfig\" >/dev/null && echo gitconfig-ok; cat '$M/.ssh/id_ed25519'; echo \"list=[\$(ls -A '$M' | tr '\\n' ' ')]\""
contains "HOME's toolchain files stay readable" "$OUTPUT" "gitconfig-ok"
denied "the secret is unreadable through the bind mount" "$OUTPUT" "$M/.ssh/id_ed25519"
lacks "the secret does not leak" "$OUTPUT" "SECRET-SSH-KEY"
contains "the bind mount lists nothing" "$OUTPUT" "list=[]"

if user_setup; then
    M2=$(mktemp -d /var/tmp/rg-alias.XXXXXX)
    chmod 755 "$M2"
    CLEANUPS+=("rmdir '$M2'")
    if mount --bind "$U/home" "$M2"; then
        CLEANUPS=("umount '$M2'" "${CLEANUPS[@]}")
        user_sandbox_sh "cat '$M2/.ssh/id_ed25519'; echo \"list=[\$(ls -A '$M2' | tr '\\n' ' ')]\""
        denied "unprivileged: the secret is unreadable through a bind mount of HOME" "$OUTPUT" \
            "$M2/.ssh/id_ed25519"
        lacks "unprivileged: the secret does not leak" "$OUTPUT" "SECRET-USER-SSH-KEY"
        contains "unprivileged: the bind mount lists nothing" "$OUTPUT" "list=[]"
    fi
fi

finish
