/*
 * Linux namespaces for a run: which ones the user asked for (the
 * --unshare/--share lists), the clone flags that make them, the uid and gid
 * maps the runner writes for the new user namespace, and a user namespace
 * used only to id-map a mount (so a root caller's fork can be handed to the
 * unprivileged uid the command runs as).
 *
 * The namespaces, and what each closes:
 *   user   the command holds no capability over anything outside; as root it
 *          runs as nobody (SANDBOX_NS_ROOT_UID), inside and outside
 *   mount  a read-only host tree, a private /tmp, /dev, /proc and home
 *   pid    init is the runner: when the command exits, every process of the
 *          run dies; no other process is visible
 *   ipc    SysV shared memory, semaphores and message queues of the host
 *   uts    the host name can be changed inside without changing it outside
 *   net    only a loopback interface
 *
 * Creation fails closed: when a namespace asked for cannot be created, the
 * run is refused and sandbox_ns_explain() says which and which flag shares
 * it instead.
 */
#ifndef RG_SANDBOX_NS_H
#define RG_SANDBOX_NS_H

#include <stddef.h>
#include <sys/types.h>

#include "util/error.h"

#define SANDBOX_NS_USER  (1u << 0)
#define SANDBOX_NS_MOUNT (1u << 1)
#define SANDBOX_NS_PID   (1u << 2)
#define SANDBOX_NS_IPC   (1u << 3)
#define SANDBOX_NS_UTS   (1u << 4)
#define SANDBOX_NS_NET   (1u << 5)
#define SANDBOX_NS_ALL   0x3fu

/*
 * The uid and gid a root caller's command has, outside and inside: nobody.
 * The kernel sees nobody, so /root, /etc/shadow and root's files are out of
 * reach and no capability applies outside; inside it is not root either,
 * so tools behave as for an ordinary user (cp -p, tar and mv do not fail
 * on owners they cannot keep). Chosen over a subuid range: it needs no
 * /etc/subuid setup and owns nothing worth having. Its fork is an
 * id-mapped mount (root's files appear as nobody's), so it owns it.
 */
#define SANDBOX_NS_ROOT_UID 65534
#define SANDBOX_NS_ROOT_GID 65534

/*
 * Parse a comma-separated list of namespace names (user, mount, pid, ipc,
 * uts, net; "all" and "none" too) into *out. `opt` names the option in
 * the error message.
 */
int sandbox_ns_parse(unsigned *out, const char *list, const char *opt, rg_error *err);

/* The names of the namespaces in `set`, comma-separated, into `out`. */
void sandbox_ns_names(char *out, size_t len, unsigned set);

/* The CLONE_NEW* flags for `set`. */
unsigned long sandbox_ns_clone_flags(unsigned set);

/*
 * Check a set for combinations that cannot work: a mount, pid, ipc, uts or
 * net namespace needs the user namespace unless the caller is root (euid
 * 0). Returns 0 or -EINVAL with the reason in `err`.
 */
int sandbox_ns_check(unsigned set, int is_root, rg_error *err);

/*
 * After creating namespaces failed with `errno_`, find which of `set` this
 * kernel refuses (each tried alone in a throwaway child) and describe the
 * refusal in `err`: the namespace, the kernel's reason, what usually causes
 * it and the flag that shares it instead. `simulated` are namespaces
 * --debug-ns-unavailable pretends are missing. Returns a negative code.
 */
int sandbox_ns_explain(unsigned set, unsigned simulated, int errno_, rg_error *err);

/*
 * Whether this kernel lets the caller create the namespaces `set` (tried
 * together in a throwaway child, as a run would); 0, or what
 * sandbox_ns_explain says. `simulated` as there.
 */
int sandbox_ns_probe(unsigned set, unsigned simulated, rg_error *err);

/*
 * Write the uid and gid maps of the user namespace of `pid`: `inside` is
 * mapped to `outside` (one id each). For an unprivileged caller, setgroups
 * is denied first, as the kernel requires.
 */
int sandbox_ns_write_maps(pid_t pid, uid_t inside_uid, uid_t outside_uid, gid_t inside_gid,
                          gid_t outside_gid, rg_error *err);

/*
 * A user namespace mapping id 0 to `uid`/`gid`, for mount_setattr's
 * MOUNT_ATTR_IDMAP: files owned by 0 on disk then appear owned by `uid`.
 * Returns its descriptor in *out (close it). Needs root.
 */
int sandbox_ns_idmap_userns(int *out, uid_t uid, gid_t gid, rg_error *err);

/* Bring up the loopback interface of a new network namespace. */
int sandbox_ns_loopback_up(rg_error *err);

#endif
