/*
 * Ref names as git's check-ref-format accepts them (without
 * --allow-onelevel or --refspec-pattern), plus a `refs/` prefix: the gateway
 * matches rules on these names, so a name git would treat differently from
 * how it reads (`refs/heads/main.lock`, `refs/heads//main`) must not pass,
 * whether a client pushes it (push.c) or an upstream advertises it
 * (advert.c).
 */
#ifndef RG_GIT_REFNAME_H
#define RG_GIT_REFNAME_H

#include <stddef.h>

/* NULL when the n bytes at s are a valid ref name, else why not (static). */
const char *rgit_refname_problem(const char *s, size_t n);

#endif
