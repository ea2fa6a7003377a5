#!/usr/bin/env bash
# Namespaces fail closed: when one asked for cannot be created (simulated
# with --debug-ns-unavailable) refgate-run refuses, names it and the
# --share that runs without it, runs nothing and creates nothing. Sharing
# one runs without it; the option lists are checked strictly.
. "$(dirname "$0")/lib.sh"
require_abi 1

attempt() {
    rm -f "$PROJ".*/ran
    OUT=$(cd "$PROJ" && "$RUN" --rm "$@" -- sh -c 'touch ran; echo RAN; readlink /proc/self/ns/net' 2>&1)
    ST=$?
}

for ns in user mount pid ipc uts net; do
    attempt --debug-ns-unavailable=$ns
    equals "no $ns namespace: refused" "$ST" 125
    contains "no $ns namespace: named" "$OUT" "cannot create the $ns namespace"
    contains "no $ns namespace: the way out is named" "$OUT" "--share=$ns"
    contains "no $ns namespace: ... as a way to run without it" "$OUT" "runs without it"
    lacks "no $ns namespace: the command did not run" "$OUT" "RAN"
    absent "no $ns namespace: no fork was created" "$PROJ.1"
done

attempt --share=net --debug-ns-unavailable=net
equals "--share=net runs without a net namespace" "$ST" 0
contains "--share=net: the command ran" "$OUT" "RAN"
contains "--share=net: the network namespace is the caller's" "$OUT" "$(readlink /proc/self/ns/net)"
attempt --share-net
contains "--share-net is --share=net" "$OUT" "$(readlink /proc/self/ns/net)"
attempt
lacks "by default the network namespace is new" "$OUT" "$(readlink /proc/self/ns/net)"
contains "by default all namespaces are named" "$OUT" "namespaces (user,mount,pid,ipc,uts,net)"

attempt --unshare=user,bogus
equals "an unknown namespace is a usage error" "$ST" 125
contains "the unknown name and the choices are said" "$OUT" "unknown namespace 'bogus' (expected user"
attempt --share=mount --hide /etc
equals "--hide without the mount namespace is refused" "$ST" 125
contains "the refusal says why" "$OUT" "--hide needs the mount namespace"
attempt --unshare=none
equals "--unshare=none runs with Landlock only" "$ST" 0
contains "--unshare=none: the command ran" "$OUT" "RAN"

out=$("$RUN" --check 2>&1)
contains "--check says the namespaces can be created" "$out" \
    "namespaces: user,mount,pid,ipc,uts,net can be created"
out=$("$RUN" --check --debug-ns-unavailable=pid 2>&1)
equals "--check with a namespace missing exits 125" "$?" 125
contains "--check names the missing namespace" "$out" "cannot create the pid namespace"

if [ "$(id -u)" = 0 ]; then
    attempt --share=mount
    equals "as root, a user namespace without a mount namespace is refused" "$ST" 125
    contains "the refusal says why and what to share" "$OUT" "--share=user,mount"
    attempt --share=user,mount
    equals "as root, sharing both runs" "$ST" 0
fi

out=$("$RUN" --help)
contains "--help documents --unshare" "$out" "--unshare=LIST"
contains "--help documents --share-net" "$out" "--share-net"
contains "--help documents --hide" "$out" "--hide PATH"

finish
