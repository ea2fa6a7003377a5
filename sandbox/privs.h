/*
 * Privileges the command must not have, whoever runs it: no_new_privs (so
 * no setuid binary or file capability can raise it, and so Landlock may be
 * enforced without CAP_SYS_ADMIN), and, when refgate-run runs as root, the
 * capabilities that go around Landlock's file rules. Landlock checks paths;
 * it does not stop root from loading a kernel module, reading a raw disk or
 * /proc/kcore, or typing into another terminal with TIOCSTI. Those
 * capabilities are removed from the bounding set (root regains its
 * capabilities from the bounding set at exec) and from the current sets.
 *
 * Kept, because a root-run command in a fork owned by another user needs
 * them: CHOWN, DAC_OVERRIDE, FOWNER, FSETID, SETUID, SETGID,
 * NET_BIND_SERVICE, SYS_CHROOT, AUDIT_WRITE, SYS_RESOURCE, IPC_LOCK, LEASE.
 * Every other capability, including ones newer than this file, is dropped.
 *
 * In a user namespace nothing is kept (sandbox_privs_drop_all): the fork is
 * the command's own there, so it needs no capability, and root inside
 * (a root caller's command) is made powerless with securebits, so exec
 * does not hand it the namespace's capabilities back.
 */
#ifndef RG_SANDBOX_PRIVS_H
#define RG_SANDBOX_PRIVS_H

#include "util/error.h"

/* Whether capability `cap` is on the keep list above. */
int sandbox_privs_kept(int cap);

/*
 * Drop the capabilities not kept (bounding, effective, permitted,
 * inheritable and ambient sets) and set no_new_privs. Fails closed: when
 * the process holds a capability it cannot drop, it returns an error
 * rather than run the command with it.
 */
int sandbox_privs_drop(rg_error *err);

/*
 * Drop every capability, lock securebits NOROOT and NO_SETUID_FIXUP (uid 0
 * gains nothing at exec or setuid), and set no_new_privs. For a command in
 * a user namespace, where the sandbox's first process held them all.
 */
int sandbox_privs_drop_all(rg_error *err);

#endif
