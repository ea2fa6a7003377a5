/*
 * The console's templates and static assets: the files of console/assets/,
 * embedded at build time (embed.cmake). Templates hold `{{name}}` slots that
 * html.h's console_html_render fills.
 */
#ifndef RG_CONSOLE_ASSETS_H
#define RG_CONSOLE_ASSETS_H

#include <stddef.h>

typedef struct console_asset {
    const char *name; /* the file name under console/assets/ */
    const char *data; /* NUL-terminated */
    size_t len;
} console_asset;

/* Ends with an entry whose name is NULL. */
extern const console_asset console_assets[];

/* The asset called `name`, or NULL. */
const console_asset *console_asset_find(const char *name);

#endif
