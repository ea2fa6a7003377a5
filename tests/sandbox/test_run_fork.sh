#!/usr/bin/env bash
# The fork: <dir>.<N> with its base .<dir>.<N>.base beside it, N the first
# free number; everything copied (.git, uncommitted work, build output,
# empty directories) with modes, times and symlinks kept, hard links split,
# sockets skipped; the base is the directory as it was and the command
# cannot write it; --rm removes both; -d makes no fork; a fork that would
# copy a secret is refused before anything is created.
. "$(dirname "$0")/lib.sh"
require_abi 1

# Shapes the copy must keep.
chmod 751 "$PROJ/src/main.c"
mkdir -p "$PROJ/private" "$PROJ/readonly"
chmod 700 "$PROJ/private"
echo ro >"$PROJ/readonly/file"
chmod 555 "$PROJ/readonly"
touch -d '2001-02-03 04:05:06' "$PROJ/README"
ln -s src/main.c "$PROJ/rel-link"
ln -s /nonexistent/target "$PROJ/dangling"
mkfifo "$PROJ/fifo"
echo shared >"$PROJ/hl-a"
ln "$PROJ/hl-a" "$PROJ/hl-b"
if command -v python3 >/dev/null; then
    python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('$PROJ/sock')"
fi

first=$(cd "$PROJ" && "$RUN" -- sh -c 'pwd; echo changed >>README; echo new >new' 2>"$T/err1")
err=$(cat "$T/err1")
equals "the command runs at the directory's own path (the fork shown there)" "$first" "$PROJ"
contains "the fork's path is printed on stderr" "$err" "fork: $PROJ.1 (base $T/.proj.1.base)"
contains "stderr says how files were forked" "$err" "files"
case "$err" in
*FICLONE* | *copy_file_range*) ok "stderr names FICLONE or copy_file_range" ;;
*) not_ok "stderr names FICLONE or copy_file_range" ;;
esac
contains "the hard-link behaviour is stated" "$err" "hard-linked names became independent files"
contains "skipped sockets are stated" "$err" "sockets or device nodes were not copied"
check "the base exists" test -d "$T/.proj.1.base"

F="$PROJ.1"
B="$T/.proj.1.base"
if command -v git >/dev/null; then
    check "the fork has .git" test -d "$F/.git"
    check "git works in the fork" sh -c "git -C '$F' log --oneline -1 >/dev/null"
fi
check "the fork has build output" test -f "$F/build/main.o"
check "the fork keeps empty directories" test -d "$F/empty"
equals "a file mode is kept" "$(stat -c %a "$F/src/main.c")" 751
equals "a directory mode is kept" "$(stat -c %a "$F/private")" 700
equals "a read-only directory stays read-only" "$(stat -c %a "$F/readonly")" 555
equals "the base keeps modification times" "$(stat -c %Y "$B/README")" "$(stat -c %Y "$PROJ/README")"
equals "a symlink stays a symlink" "$(readlink "$F/rel-link")" "src/main.c"
equals "a dangling symlink is kept" "$(readlink "$F/dangling")" "/nonexistent/target"
check "a FIFO is kept" test -p "$F/fifo"
absent "a socket is not copied" "$F/sock"
equals "hard links are split" "$(stat -c %h "$F/hl-a")" 1
echo changed >"$F/hl-a"
equals "a split hard link is independent" "$(cat "$F/hl-b")" "shared"
if [ "$(stat -c %i "$F/README")" != "$(stat -c %i "$PROJ/README")" ] &&
    [ "$(stat -c %i "$B/README")" != "$(stat -c %i "$PROJ/README")" ]; then
    ok "no inode is shared with the source"
else not_ok "no inode is shared with the source"; fi

equals "the command's change is in the fork" "$(tail -1 "$F/README")" "changed"
check "the command's new file is in the fork" test -f "$F/new"
equals "the base holds the directory as it was" "$(tail -1 "$B/README")" "uncommitted"
absent "the base does not get the command's files" "$B/new"
equals "the source is untouched" "$(tail -1 "$PROJ/README")" "uncommitted"

# The base is not writable from inside the next fork's run either.
(cd "$PROJ" && "$RUN" -q -- sh -c "echo x >>'$B/README'" 2>"$T/err2")
equals "the next fork is <dir>.2" "$(fork_path <"$T/err2")" "$PROJ.2"
contains "another fork's base is not writable" "$(cat "$T/err2")" "Permission denied"
equals "the base stays unchanged" "$(tail -1 "$B/README")" "uncommitted"

# N is the first number for which neither name exists.
mkdir "$PROJ.3" "$T/.proj.4.base"
third=$(cd "$PROJ" && "$RUN" -q -- true 2>&1 | fork_path)
equals "a taken fork or base name is skipped" "$third" "$PROJ.5"

# --rm removes the fork and its base.
out=$(cd "$PROJ" && "$RUN" -q --rm -- true 2>&1 | fork_path)
equals "--rm runs in a fork too" "$out" "$PROJ.6"
absent "--rm removes the fork" "$PROJ.6"
absent "--rm removes the base" "$T/.proj.6.base"

# -d runs in place.
mkdir -p "$T/work"
out=$(cd "$PROJ" && "$RUN" -q -d "$T/work" -- sh -c 'pwd; echo here >file' 2>&1)
equals "-d runs in DIR" "$out" "$T/work"
check "-d DIR is writable" test -f "$T/work/file"
absent "-d makes no fork" "$PROJ.7"

# Forks that would copy a secret are refused before anything is created.
out=$(cd "$T" && "$RUN" -q -- true 2>&1)
st=$?
equals "forking a directory that contains HOME is refused" "$st" 125
contains "the refusal says why" "$out" "refusing to fork $T: it is, contains or lies inside"
absent "nothing was created for the refused fork" "$T.1"
out=$(cd "$HOME" && "$RUN" -q -- true 2>&1)
equals "forking HOME is refused" "$?" 125
out=$(cd "$HOME/.ssh" && "$RUN" -q -- true 2>&1)
equals "forking a directory inside a secret is refused" "$?" 125
absent "no fork of ~/.ssh was made" "$HOME/.ssh.1"

if [ "$(id -u)" = 0 ] && mkdir "$PROJ/mnt" && mount --bind "$HOME/.ssh" "$PROJ/mnt" 2>/dev/null; then
    CLEANUPS+=("umount '$PROJ/mnt' 2>/dev/null")
    out=$(cd "$PROJ" && "$RUN" -q --rm -- cat mnt/id_ed25519 2>&1)
    st=$?
    umount "$PROJ/mnt"
    equals "forking a tree with a secret bind-mounted inside is refused" "$st" 125
    contains "the refusal names the mount" "$out" "secret directory mounted or linked at mnt"
    lacks "the secret did not leak" "$out" "SECRET-"
    absent "no fork was left behind" "$PROJ.7"
fi

finish
