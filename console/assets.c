/* Looking up the embedded assets (assets.h). */
#include "console/assets.h"

#include <string.h>

const console_asset *console_asset_find(const char *name)
{
    for (const console_asset *a = console_assets; a->name != NULL; a++)
        if (!strcmp(a->name, name))
            return a;
    return NULL;
}
