/*
 * The console's server-side sessions: a fixed table in memory (a restart
 * logs everyone out). A session is named by a random id (256 bits, hex,
 * sent only as an HttpOnly SameSite=Strict cookie) and holds a CSRF token
 * of its own (256 bits) that every form posts back. A session without a
 * user is a login form's: it carries the form's CSRF token and nothing
 * else; logging in always makes a new session (the id changes), so an id
 * planted before login is worth nothing after it.
 *
 * Sessions end after CONSOLE_SESSION_IDLE seconds unused or
 * CONSOLE_SESSION_LIFETIME seconds in all; when the table is full the
 * least recently used session goes. Thread-safe.
 */
#ifndef RG_CONSOLE_SESSION_H
#define RG_CONSOLE_SESSION_H

#include "gateway/reviewers.h"

#define CONSOLE_SESSIONS_MAX     256
#define CONSOLE_SESSION_IDLE     (30 * 60)
#define CONSOLE_SESSION_LIFETIME (12 * 3600)
#define CONSOLE_SESSION_ID_LEN   64 /* hex characters */

typedef struct console_sessions console_sessions;

int console_sessions_new(console_sessions **out);
void console_sessions_free(console_sessions *s);

/* A new session for `user` ("" for a login form's); id and csrf get its secrets. */
int console_session_create(console_sessions *s, char id[CONSOLE_SESSION_ID_LEN + 1],
                           char csrf[CONSOLE_SESSION_ID_LEN + 1], const char *user);

/*
 * The live session named `id`: 1 with its user and csrf copied out, 0 when
 * there is none (unknown, expired, malformed).
 */
int console_session_get(console_sessions *s, const char *id,
                        char user[GATEWAY_REVIEWER_NAME_MAX + 1],
                        char csrf[CONSOLE_SESSION_ID_LEN + 1]);

/* End session `id` (logout, or a login form used). */
void console_session_drop(console_sessions *s, const char *id);

#endif
