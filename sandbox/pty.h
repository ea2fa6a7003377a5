/*
 * A terminal of the run's own. When refgate-run's stdin is a terminal, the
 * command does not get it: init opens a pty in the run's private devpts,
 * the command takes the pty's slave as its controlling terminal (for each
 * of 0-2 that was the caller's terminal), and init relays bytes between
 * the caller's terminal and the pty's master. So the command never holds
 * the caller's terminal: it cannot read it after the run, change its modes
 * or push input into it, whatever the other layers allow.
 *
 * The caller's terminal is put in raw mode for the run (the pty's line
 * discipline does the editing and turns ^C into SIGINT for the command)
 * and restored afterwards; its window size is copied to the pty at start
 * and on SIGWINCH.
 */
#ifndef RG_SANDBOX_PTY_H
#define RG_SANDBOX_PTY_H

#include <stddef.h>
#include <termios.h>

#include "util/error.h"

/* Open a new pty in /dev/pts (the run's devpts): its master in *out, the
 * slave's path in `name`. The window size of `size_from` is copied. */
int sandbox_pty_open(int *out, char *name, size_t len, int size_from, rg_error *err);

/* In the command, after setsid(): make `name` the controlling terminal
 * and put it on each of 0-2 that is a terminal (redirections stay). */
int sandbox_pty_attach(const char *name, rg_error *err);

/* Copy the window size of terminal `from` to the pty master `to`. */
void sandbox_pty_copy_size(int from, int to);

/* Put terminal `fd` in raw mode, saving its modes in *saved. */
int sandbox_pty_raw(int fd, struct termios *saved, rg_error *err);

/* Restore modes saved by sandbox_pty_raw. */
void sandbox_pty_restore(int fd, const struct termios *saved);

/*
 * Relay once: wait for input on `in` (the caller's terminal; -1 once it is
 * closed), output on `master`, or anything on `wake` (init's SIGCHLD
 * pipe), and move at most one buffer each way; `out` is where the pty's
 * output goes. Sets *in or *master to -1 when that side is finished (EOF,
 * EIO). Returns 0, or a negative errno when poll fails other than EINTR.
 */
int sandbox_pty_relay(int *in, int out, int *master, int wake);

/* Copy what the pty still holds to `out`, without waiting. */
void sandbox_pty_drain(int master, int out);

#endif
