/*
 * Descriptors passed over a unix socket (SCM_RIGHTS) between the runner,
 * the sandbox's init and the fork's guardian: one message carries a few
 * bytes and up to SANDBOX_FDPASS_MAX descriptors. Received descriptors are
 * close-on-exec; what does not fit the caller's array is closed, never
 * leaked into a process that must not hold it.
 */
#ifndef RG_SANDBOX_FDPASS_H
#define RG_SANDBOX_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

#define SANDBOX_FDPASS_MAX 16

/*
 * Send `len` bytes (1..) with the `nfds` descriptors (0..SANDBOX_FDPASS_MAX)
 * in one message, retrying on EINTR, never raising SIGPIPE. Returns the
 * bytes sent, or -errno (-EINVAL for a bad count).
 */
ssize_t sandbox_fdpass_send(int sock, const void *data, size_t len, const int *fds, size_t nfds);

/*
 * Receive one message into `data` (`cap` bytes) and its descriptors into
 * `fds` (at most `maxfds`, their count in *nfds; descriptors past that are
 * closed). Returns the bytes received, 0 at end of file, or -errno.
 */
ssize_t sandbox_fdpass_recv(int sock, void *data, size_t cap, int *fds, size_t maxfds,
                            size_t *nfds);

#endif
