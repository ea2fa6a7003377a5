/*
 * Dropping privileges before exec; see privs.h. Raw capget/capset keep the
 * runner free of libcap.
 */
#include "sandbox/privs.h"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT           47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* The bounding set has at most 64 entries; the kernel says EINVAL past its last. */
#define PRIVS_CAP_MAX 64

static const int privs_keep[] = {
    CAP_CHOWN,       CAP_DAC_OVERRIDE, CAP_FOWNER,           CAP_FSETID,
    CAP_SETUID,      CAP_SETGID,       CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
    CAP_AUDIT_WRITE, CAP_SYS_RESOURCE, CAP_IPC_LOCK,         CAP_LEASE,
};

int sandbox_privs_kept(int cap)
{
    size_t i;

    for (i = 0; i < sizeof(privs_keep) / sizeof(privs_keep[0]); i++)
        if (privs_keep[i] == cap)
            return 1;
    return 0;
}

static int privs_drop(int keep_some, rg_error *err)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    int cap, held;

    memset(data, 0, sizeof(data));
    if (syscall(SYS_capget, &hdr, data) < 0)
        return rg_error_set(err, -errno, "reading capabilities: %s", strerror(errno));
    /* Without any capability now, the bounding set only matters to root
     * (who regains it at exec) or through file capabilities, which
     * no_new_privs disables. */
    held = data[0].permitted || data[1].permitted || geteuid() == 0;
    for (cap = 0; cap < PRIVS_CAP_MAX; cap++) {
        int in_bset = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);

        if (in_bset < 0)
            break; /* past the kernel's last capability */
        if (keep_some && sandbox_privs_kept(cap))
            continue;
        data[cap / 32].effective &= ~(UINT32_C(1) << (cap % 32));
        data[cap / 32].permitted &= ~(UINT32_C(1) << (cap % 32));
        data[cap / 32].inheritable &= ~(UINT32_C(1) << (cap % 32));
        if (in_bset == 1 && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && held)
            return rg_error_set(err, -errno,
                                "cannot drop capability %d from the bounding set (%s); "
                                "refusing to run a privileged command with it",
                                cap, strerror(errno));
    }
    /* Ambient capabilities survive exec for non-root; none are wanted.
     * Kernels before 4.3 have none, hence EINVAL is fine. */
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return rg_error_set(err, -errno, "clearing ambient capabilities: %s", strerror(errno));
    if (syscall(SYS_capset, &hdr, data) < 0)
        return rg_error_set(err, -errno, "dropping capabilities: %s", strerror(errno));
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return rg_error_set(err, -errno, "setting no_new_privs: %s", strerror(errno));
    return 0;
}

int sandbox_privs_drop(rg_error *err)
{
    return privs_drop(1, err);
}

int sandbox_privs_drop_all(rg_error *err)
{
    const unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                               SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;

    /* Needs CAP_SETPCAP, so before the drop; without it (no user
     * namespace, not root) there is no root to neuter. */
    if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0 && (geteuid() == 0 || errno != EPERM))
        return rg_error_set(err, -errno, "setting securebits: %s", strerror(errno));
    return privs_drop(0, err);
}
