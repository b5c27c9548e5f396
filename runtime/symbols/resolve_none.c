/* pathscope-symbolize --resolve in a build without Zydis (Debian: libzydis-dev): the resolver
 * decodes function entries with it, so it refuses to run rather than give plans it cannot make. */
#include "symbols.h"

int symbols_resolve_main(void)
{
    fputs("pathscope-symbolize: --resolve is not available: this build has no Zydis "
          "(Debian: libzydis-dev); install it and rebuild\n", stderr);
    return 1;
}
