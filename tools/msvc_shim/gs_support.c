/*
 * MSVC-mode compile shim (tools/msvc_shim/README.md): the two /GS (buffer security check,
 * MSVC's default) symbols the MSVC C runtime provides, for linking MSVC-mode objects with
 * mingw-w64's runtime under wine.  Same contract: a cookie, and a check that ends the
 * process when a function's stack copy of it was overwritten.
 */
#include <stdint.h>
#include <stdlib.h>

uintptr_t __security_cookie = (uintptr_t)0x00002b992ddfa232ull;

void __security_check_cookie(uintptr_t cookie);
void __security_check_cookie(uintptr_t cookie)
{
    if (cookie != __security_cookie) {
        abort();
    }
}
