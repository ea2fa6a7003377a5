/*
 * Login throttling for the console: after CONSOLE_THROTTLE_FAILURES failed
 * logins for one user name within CONSOLE_THROTTLE_WINDOW seconds, that
 * name may not log in until the window has passed since its first failure
 * (right password or not), so a password cannot be guessed at the rate
 * yescrypt allows. Names are kept in a fixed table (the oldest entry goes
 * when it is full); in memory only. Thread-safe.
 */
#ifndef RG_CONSOLE_THROTTLE_H
#define RG_CONSOLE_THROTTLE_H

#define CONSOLE_THROTTLE_FAILURES 5
#define CONSOLE_THROTTLE_WINDOW   (15 * 60)
#define CONSOLE_THROTTLE_NAMES    256

typedef struct console_throttle console_throttle;

int console_throttle_new(console_throttle **out);
void console_throttle_free(console_throttle *t);

/* Whether `name` may try to log in at `now`. */
int console_throttle_allows(console_throttle *t, const char *name, long long now);

/* Count a failed login for `name` at `now`. */
void console_throttle_failed(console_throttle *t, const char *name, long long now);

/* A successful login: `name` starts afresh. */
void console_throttle_clear(console_throttle *t, const char *name);

#endif
