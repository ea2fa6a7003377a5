#!/usr/bin/env bash
# Finding 6: with HOME inside the passwd entry's home (HOME=~/agent-home),
# only HOME was hidden, so the rest of the real home (~/.claude's
# credentials, shell history) was readable. Now the passwd home is a
# private tmpfs too, holding only the way to HOME.
. "$(dirname "$0")/lib.sh"
require_abi 1

# attempt PWHOME PREFIX...: HOME inside PWHOME; a secret beside it.
attempt() {
    local pw=$1
    shift
    "$@" sh -c '
H=$(mktemp -d "$1/.rg-test-home.XXXXXX") || exit 1
chmod 755 "$H"
printf "[user]\n\tname = T\n" >"$H/.gitconfig"
S="$1/.rg-test-secret"
echo SECRET-REAL-HOME >"$S"
cd "$2" && HOME=$H "$3" -q --rm -- sh -c "cat \"\$HOME/.gitconfig\" >/dev/null && echo gitconfig-ok
cat $S; ls -a $1"
rm -rf "$H" "$S"' rg "$pw" "$PWD_PROJ" "$RUN" 2>&1
}

pwhome=$(getent passwd "$(id -u)" | cut -d: -f6)
if [ -z "$pwhome" ] || [ "$pwhome" = / ] || [ ! -w "$pwhome" ]; then
    echo "SKIP: the passwd entry's home ($pwhome) is missing or not writable here"
    exit 77
fi
PWD_PROJ=$PROJ
OUTPUT=$(attempt "$pwhome")
contains "HOME's own files are readable" "$OUTPUT" "gitconfig-ok"
denied "a file elsewhere in the real home is unreadable" "$OUTPUT" "$pwhome/.rg-test-secret"
lacks "its content does not leak" "$OUTPUT" "SECRET-REAL-HOME"
lacks "the real home lists only the way to HOME" "$OUTPUT" ".bash_history"

if user_setup; then
    uhome=$(getent passwd "$RG_TEST_USER" | cut -d: -f6)
    if [ -d "$uhome" ]; then
        PWD_PROJ=$U/proj
        OUTPUT=$(attempt "$uhome" setpriv --reuid "$RG_TEST_USER" --regid "$RG_TEST_USER" \
            --init-groups)
        contains "unprivileged: HOME's own files are readable" "$OUTPUT" "gitconfig-ok"
        denied "unprivileged: a file elsewhere in the real home is unreadable" "$OUTPUT" \
            "$uhome/.rg-test-secret"
        lacks "unprivileged: its content does not leak" "$OUTPUT" "SECRET-REAL-HOME"
    else
        echo "# $RG_TEST_USER has no home directory: unprivileged variant skipped"
    fi
fi

finish
