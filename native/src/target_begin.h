/*
 * Turn on an instruction set for the rest of this translation unit only (the build passes no
 * -m flags).  Define SEALSTORE_TARGET to a target string, e.g. "aes,avx2,vaes", first, and
 * include target_end.h at the end of the file.
 */
#define SEALSTORE_DO_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define SEALSTORE_TARGET_PRAGMA(t)                                                              \
    SEALSTORE_DO_PRAGMA(clang attribute push(__attribute__((target(t))), apply_to = function))
#elif defined(__GNUC__)
#pragma GCC push_options
#define SEALSTORE_TARGET_PRAGMA(t) SEALSTORE_DO_PRAGMA(GCC target(t))
#endif
SEALSTORE_TARGET_PRAGMA(SEALSTORE_TARGET)
