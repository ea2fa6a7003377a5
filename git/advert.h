/*
 * The ref advertisement (`git receive-pack --advertise-refs`): ref lines,
 * capabilities after a NUL on the first one, then a flush. The gateway
 * passes it through with the capabilities it cannot honour removed, since a
 * client never asks for a capability that was not advertised.
 */
#ifndef RG_GIT_ADVERT_H
#define RG_GIT_ADVERT_H

#include <stddef.h>

#include "util/buf.h"
#include "util/error.h"

/*
 * Append to `out` the advertisement in[0..len) with every capability named
 * in `drop` (NULL-terminated; a name drops `name` and `name=...`) removed.
 * When `service` is non-NULL the smart-HTTP preamble
 * `# service=<service>\n` and a flush come first.
 */
int git_advert_filter(rg_buf *out, const char *in, size_t len, const char *const *drop,
                      const char *service, rg_error *err);

#endif
