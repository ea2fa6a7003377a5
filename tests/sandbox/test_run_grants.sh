#!/usr/bin/env bash
# -r and -w widen the sandbox, but never over a secret: a grant that is,
# contains or lies inside one (or that contains HOME) is refused unless
# --force, before anything is created. Secrets named by credential
# variables or reached through a symlink out of HOME count too.
. "$(dirname "$0")/lib.sh"
require_abi 2

W="$T/work"
mkdir -p "$W" "$HOME/cache"

# refused NAME ARGS...: refgate-run must refuse (125) and say why.
refused() {
    local name=$1 out st
    shift
    out=$(cd "$PROJ" && "$RUN" -q "$@" -- sh -c 'echo RAN' 2>&1)
    st=$?
    equals "$name: refused" "$st" 125
    contains "$name: the refusal names --force" "$out" "--force"
    lacks "$name: the command did not run" "$out" "RAN"
}

refused "-r ~/.ssh" -r "$HOME/.ssh"
refused "-r a file inside ~/.aws" -r "$HOME/.aws/credentials"
refused "-r ~/.netrc" -r "$HOME/.netrc"
refused "-r HOME (contains secrets)" -r "$HOME"
refused "-r a parent of HOME" -r "$T"
refused "-w HOME" -w "$HOME"
refused "-w ~/.config (contains ~/.config/gh)" -w "$HOME/.config"
refused "-w a directory containing HOME" -w "$T"
refused "-d HOME" -d "$HOME"
refused "-d a parent of HOME" -d "$T"
absent "refusals create no fork" "$PROJ.1"

out=$("$RUN" -q -d "$W" -r "$T/does-not-exist" -- true 2>&1)
equals "a grant of a missing path is refused" "$?" 125
contains "the missing path is named" "$out" "does-not-exist: No such file or directory"

# Allowed grants work.
out=$("$RUN" -q -d "$W" -r "$HOME/docs" -w "$HOME/cache" -- \
    sh -c 'cat "$HOME/docs/readme"; echo w >"$HOME/cache/f"; echo x >"$HOME/docs/x"' 2>&1)
contains "-r inside HOME is readable" "$out" "readable doc"
check "-w inside HOME is writable" test -f "$HOME/cache/f"
denied "-r is not writable" "$out" "docs/x"

# --force grants a secret anyway, with a warning.
out=$("$RUN" -q -d "$W" --force -r "$HOME/.ssh" -- cat "$HOME/.ssh/id_ed25519" 2>&1)
contains "--force grants the secret" "$out" "SECRET-SSH-KEY"
contains "--force warns" "$out" "warning: -r $HOME/.ssh exposes"

# A secret named by a variable, outside HOME, is hidden and protected.
mkdir -p "$T/elsewhere/kube" "$T/elsewhere/gnupg"
echo "SECRET-KUBECONFIG" >"$T/elsewhere/kube/config"
echo "SECRET-GNUPG" >"$T/elsewhere/gnupg/key"
out=$(KUBECONFIG="$T/elsewhere/kube/config" GNUPGHOME="$T/elsewhere/gnupg" \
    "$RUN" -q -d "$W" -- sh -c "cat '$T/elsewhere/kube/config' '$T/elsewhere/gnupg/key'" 2>&1)
contains "a KUBECONFIG outside HOME is unreadable" "$out" "kube/config: Permission denied"
contains "a GNUPGHOME outside HOME is unreadable" "$out" "gnupg/key: Permission denied"
lacks "neither leaks" "$out" "SECRET-"
out=$(GNUPGHOME="$T/elsewhere/gnupg" "$RUN" -q -d "$W" -r "$T/elsewhere" -- true 2>&1)
equals "-r containing GNUPGHOME is refused" "$?" 125

# A secret that is a symlink out of HOME is hidden where it points.
mkdir -p "$T/dotfiles/aws2"
echo "SECRET-LINKED" >"$T/dotfiles/aws2/credentials"
mv "$HOME/.aws" "$HOME/.aws.orig"
ln -s "$T/dotfiles/aws2" "$HOME/.aws"
out=$("$RUN" -q -d "$W" -- cat "$T/dotfiles/aws2/credentials" 2>&1)
contains "a symlinked ~/.aws is unreadable where it points" "$out" "Permission denied"
lacks "the linked secret does not leak" "$out" "SECRET-"
out=$("$RUN" -q -d "$W" -r "$T/dotfiles" -- true 2>&1)
equals "-r containing the target of ~/.aws is refused" "$?" 125
rm "$HOME/.aws"
mv "$HOME/.aws.orig" "$HOME/.aws"

finish
