/*
 * The fork's guardian: the fork's .git is neutralised (gitconf.h) when the
 * run ends, even when the runner does not live to do it (SIGKILL, OOM
 * killer, a crash), so a person's later `git status` in the fork runs
 * nothing the run planted.
 *
 * Started as soon as the fork exists, before the sandbox: a child of the
 * runner in a session (and process group) of its own, outside the run's
 * namespaces, ignoring the terminal's signals, holding nothing but its
 * socket to the runner, the fork marker's descriptor and stderr. The
 * runner sends it a pidfd of the sandbox's first process before that
 * process may start the command. Then:
 *
 * - the runner finishes (it neutralised the fork itself): it says so and
 *   waits the moment the guardian takes to exit;
 * - the runner's end of the socket closes without that word (it died):
 *   the guardian waits for the pidfd to say the sandbox's first process
 *   exited (with the pid namespace, the kernel reports that only once
 *   every process of the run is gone), then neutralises the fork's .git,
 *   says so on stderr and exits. It holds the fork's marker until then,
 *   so `refgate diff --apply` waits for it as it would for the runner.
 *
 * Without the pid namespace a process the command left behind may outlive
 * the run, as it may outlive the runner's own neutralising.
 */
#ifndef RG_FORK_GUARD_H
#define RG_FORK_GUARD_H

#include <sys/types.h>

#include "util/error.h"

typedef struct fork_guard fork_guard;

/*
 * Start the guardian of the fork `fork_path` (its base `base`, which may be
 * NULL); `lock_fd` is the fork marker's descriptor, kept by the guardian.
 * Call before any thread is started.
 */
int fork_guard_start(fork_guard **out, const char *fork_path, const char *base, int lock_fd,
                     rg_error *err);

/* Send the guardian a pidfd of `pid`, the sandbox's first process; once. */
int fork_guard_watch(fork_guard *g, pid_t pid, rg_error *err);

/* The runner is done with the fork: the guardian exits, and is reaped.
 * NULL: nothing. */
void fork_guard_free(fork_guard *g);

#endif
