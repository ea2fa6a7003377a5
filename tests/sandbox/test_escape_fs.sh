#!/usr/bin/env bash
# Escapes through the filesystem: a confined command must not read the
# secrets in a test HOME, write outside its fork, reach a secret through a
# symlink, a hard link or /proc/self/root, or move a file out of the fork.
# Each check asserts the kernel's error text and, for writes, that the
# target is absent afterwards. Positive checks first, so a sandbox that
# denies everything cannot pass.
# shellcheck disable=SC2088  # "~/..." in check names is text, not a path
. "$(dirname "$0")/lib.sh"
require_abi 2

# --- what must work -------------------------------------------------------
sandbox_sh 'set -e
cat README; cat src/main.c >/dev/null && echo read-fork-ok
echo new >new.txt && cat new.txt
mkdir -p a/b && echo x >a/f && mv a/f a/b/f && cat a/b/f && echo rename-ok
echo t >"$TMPDIR/t" && cat "$TMPDIR/t" && echo tmp-ok
echo null >/dev/null && echo devnull-ok
cat /etc/passwd >/dev/null && echo etc-read-ok
cat "$HOME/.gitconfig" >/dev/null && echo gitconfig-ok
"$HOME/.local/bin/hello"
cat "$HOME/docs/readme" 2>&1 || echo docs-denied'
equals "a command that only works in its fork succeeds" "$STATUS" 0
contains "the fork holds the uncommitted work" "$OUTPUT" "uncommitted"
contains "files can be created in the fork" "$OUTPUT" "new"
contains "files can be renamed across directories in the fork (REFER)" "$OUTPUT" "rename-ok"
contains "TMPDIR is writable" "$OUTPUT" "tmp-ok"
contains "/dev/null is writable" "$OUTPUT" "devnull-ok"
contains "files outside HOME are readable" "$OUTPUT" "etc-read-ok"
contains "git's global config is readable" "$OUTPUT" "gitconfig-ok"
contains "~/.local/bin programs run" "$OUTPUT" "local-bin-ok"
denied "other files in HOME are not readable" "$OUTPUT" "docs/readme"

# --- reading secrets -------------------------------------------------------
for f in .ssh/id_ed25519 .aws/credentials .netrc .config/gh/hosts.yml .kube/config; do
    sandbox_sh "cat \"\$HOME/$f\""
    denied "reading ~/$f is denied" "$OUTPUT" "$f"
    lacks "~/$f's content does not leak" "$OUTPUT" "SECRET-"
done
sandbox_sh 'ls "$HOME/.ssh"; ls "$HOME"'
denied "listing ~/.ssh is denied" "$OUTPUT" "'$HOME/.ssh'"
denied "listing HOME is denied" "$OUTPUT" "cannot open directory '$HOME'"
lacks "no secret file name leaks" "$OUTPUT" "id_ed25519"

# The passwd entry's home is hidden too when HOME points elsewhere, so a
# test (or a user) setting HOME does not expose the real ~/.ssh.
pwhome=$(getent passwd "$(id -u)" | cut -d: -f6)
case "$pwhome" in
"" | / | "$HOME" | "$HOME"/*) ;;
*)
    if [ -d "$pwhome" ]; then
        sandbox_sh "ls '$pwhome' >/dev/null"
        denied "the real home ($pwhome) stays hidden under a test HOME" "$OUTPUT" \
            "cannot open directory '$pwhome'"
    fi
    ;;
esac

# --- writing outside the fork ----------------------------------------------
sandbox_sh 'echo pwned >"$HOME/pwned"'
denied "writing to HOME is denied" "$OUTPUT" "$HOME/pwned"
absent "nothing was written to HOME" "$HOME/pwned"

# With the mount namespace the fork is shown at the original's path, so
# writes there land in the fork; the original is out of reach. Without it
# (--share=mount; as root --share=user,mount) the path is the original's
# own, and Landlock refuses.
NO_MOUNT=--share=mount
[ "$(id -u)" = 0 ] && NO_MOUNT=--share=user,mount
writes="echo pwned >\"$PROJ/pwned\"; echo more >>\"$PROJ/README\"; rm -f \"$PROJ/src/main.c\""
sandbox_sh "$writes; cat \"$PROJ/pwned\"; tail -1 \"$PROJ/README\""
contains "a write to the original's path inside lands in the fork shown there" "$OUTPUT" \
    "pwned
more"
sandbox $NO_MOUNT -- sh -c "$writes"
denied "creating a file in the original directory is denied" "$OUTPUT" \
    "$PROJ/pwned"
denied "appending to a file in the original directory is denied" "$OUTPUT" \
    "$PROJ/README"
denied "removing a file in the original directory is denied" "$OUTPUT" \
    "'$PROJ/src/main.c'"
absent "nothing was created in the original directory" "$PROJ/pwned"
check "the original directory's files are untouched" test -f "$PROJ/src/main.c"
equals "the original README is unchanged" "$(tail -1 "$PROJ/README")" "uncommitted"

sandbox_sh 'touch /etc/refgate-pwned; echo x >/etc/hostname'
denied "creating a file in /etc is denied" "$OUTPUT" "'/etc/refgate-pwned'"
denied "overwriting /etc/hostname is denied" "$OUTPUT" "/etc/hostname"
absent "nothing was created in /etc" /etc/refgate-pwned

sandbox $NO_MOUNT -- truncate -s 0 "$PROJ/README"
if [ "$(landlock_abi)" -ge 3 ]; then
    denied "truncating a file outside the fork is denied (ABI 3)" "$OUTPUT" "README' for writing"
    equals "the file outside keeps its content" "$(tail -1 "$PROJ/README")" "uncommitted"
fi

# /tmp is the run's own tmpfs: writing there works and reaches nothing outside.
sandbox_sh 'echo x >/tmp/refgate-pwned && cat /tmp/refgate-pwned && echo private-tmp-ok'
contains "the private /tmp is writable" "$OUTPUT" "private-tmp-ok"
absent "a file written to /tmp inside is not in the host's /tmp" /tmp/refgate-pwned

# --- symlinks ---------------------------------------------------------------
ln -s "$HOME/.ssh/id_ed25519" "$PROJ/key-link"
sandbox_sh 'test -L key-link && echo is-link; cat key-link'
rm -f "$PROJ/key-link"
contains "a symlink in the source is kept as a link in the fork" "$OUTPUT" "is-link"
denied "reading a secret through a symlink in the fork is denied" "$OUTPUT" \
    "key-link"
lacks "the secret does not leak through the symlink" "$OUTPUT" "SECRET-"

sandbox_sh 'ln -s "$HOME/.aws/credentials" made-link && cat made-link'
denied "reading through a symlink made inside is denied" "$OUTPUT" "made-link"
lacks "the secret does not leak through a new symlink" "$OUTPUT" "SECRET-"

# --- hard links -------------------------------------------------------------
sandbox_sh 'ln "$HOME/.ssh/id_ed25519" hl; ls hl'
# The secret is not there to link (the home is a private tmpfs); where it
# is, Landlock refuses the link with EXDEV.
contains "hard-linking a secret into the fork fails" "$OUTPUT" "ln: failed to"
contains "no hard link was made" "$OUTPUT" "cannot access 'hl'"

# A hard link to a secret already in the source tree must not be copied.
ln "$HOME/.ssh/id_ed25519" "$PROJ/stolen-key"
sandbox_sh 'cat stolen-key'
rm -f "$PROJ/stolen-key"
equals "forking a tree with a hard link to a secret is refused" "$STATUS" 125
contains "the refusal names the hard link" "$OUTPUT" "hard link to a secret at stolen-key"
lacks "the secret was not shown" "$OUTPUT" "SECRET-"
absent "no fork was left behind" "$PROJ.1"
absent "no base was left behind" "$T/.proj.1.base"

# --- moving files out --------------------------------------------------------
sandbox_sh "mv README \"$OUT/\"; ls README; mv src \"$HOME/\"; ls -d src"
contains "moving a file out of the fork is denied" "$OUTPUT" "'README' to '$OUT/README'"
absent "the moved file did not arrive outside" "$OUT/README"
absent "the moved directory did not arrive in HOME" "$HOME/src"
contains "the file stays in the fork" "$OUTPUT" "README"

sandbox $NO_MOUNT -- sh -c "mv \"$PROJ/README\" ./stolen; ls stolen"
contains "moving a file from the original directory into the fork is denied" "$OUTPUT" \
    "cannot move '$PROJ/README' to './stolen': Permission denied"
check "the original's file is still there" test -f "$PROJ/README"

# --- /proc/self/root ------------------------------------------------------------
sandbox_sh 'cat /proc/self/root"$HOME/.ssh/id_ed25519"; cat /proc/self/root"$HOME/.netrc";
echo x >/proc/self/root'"$PROJ"'/pwned-root'
denied "reading a secret via /proc/self/root is denied" "$OUTPUT" \
    "/proc/self/root$HOME/.ssh/id_ed25519"
denied "reading ~/.netrc via /proc/self/root is denied" "$OUTPUT" \
    "/proc/self/root$HOME/.netrc"
absent "a write via /proc/self/root to the original's path lands in the fork" "$PROJ/pwned-root"
sandbox $NO_MOUNT -- sh -c 'echo x >/proc/self/root'"$PROJ"'/pwned-root'
denied "writing via /proc/self/root is denied" "$OUTPUT" "pwned-root"
absent "nothing was written via /proc/self/root" "$PROJ/pwned-root"
lacks "no secret leaked via /proc/self/root" "$OUTPUT" "SECRET-"

sandbox_sh 'cat /proc/self/cwd/../home/.ssh/id_ed25519'
denied "reading a secret via /proc/self/cwd/.. is denied" "$OUTPUT" "id_ed25519"

# --- raw devices --------------------------------------------------------------
dev=$(findmnt -no SOURCE / 2>/dev/null | head -1)
if [ "$(id -u)" = 0 ] && [ -b "$dev" ]; then
    sandbox_sh "head -c 512 $dev | wc -c"
    denied "root cannot read the raw disk $dev" "$OUTPUT" "$dev' for reading"
fi

finish
