/*
 * The ref advertisement (`git receive-pack --advertise-refs`): ref lines,
 * capabilities after a NUL on the first one, then a flush. The gateway
 * passes it through with the capabilities it cannot honour removed, since a
 * client never asks for a capability that was not advertised. For a remote
 * upstream it builds one from upstream's upload-pack advertisement, which
 * a read-only credential may fetch.
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
int rgit_advert_filter(rg_buf *out, const char *in, size_t len, const char *const *drop,
                       const char *service, rg_error *err);

/*
 * Append to `out` a receive-pack advertisement (no smart-HTTP preamble)
 * built from upstream's upload-pack protocol v0 advertisement
 * in[0..len), with or without its `# service=git-upload-pack` preamble:
 * the refs without HEAD and without peeled `^{}` lines, the first one
 * carrying the capabilities the gateway can forward (object-format taken
 * from upstream's, sha1 when it names none, and `agent=<agent>`), or for a
 * repository without refs the `<zero-id> capabilities^{}` line that
 * receive-pack sends, then a flush. RG_E_PROTOCOL when the input is not
 * such an advertisement (an `ERR` line's text is in the message), with
 * `out` left as it was; RG_E_TOO_BIG when `out` would pass its cap.
 */
int rgit_advert_for_push(rg_buf *out, const char *in, size_t len, const char *agent, rg_error *err);

#endif
