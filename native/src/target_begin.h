/*
 * Turn on an instruction set for the rest of this translation unit only (the build passes no
 * -m flags).  Define SEALSTORE_TARGET to a target string, e.g. "aes,avx2,vaes", first, and
 * include target_end.h at the end of the file.
 *
 * MSVC (_MSC_VER without __clang__ or __GNUC__) compiles every intrinsic in any function, with
 * no per-function target, so there the pragma is empty; dispatch.c still calls a kernel only
 * on a CPU (and OS) that has its instruction set.  Any other compiler is refused here rather
 * than left to build kernels whose instruction sets it may not have turned on.
 */
#define SEALSTORE_DO_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define SEALSTORE_TARGET_PRAGMA(t)                                                              \
    SEALSTORE_DO_PRAGMA(clang attribute push(__attribute__((target(t))), apply_to = function))
#elif defined(__GNUC__)
#pragma GCC push_options
#define SEALSTORE_TARGET_PRAGMA(t) SEALSTORE_DO_PRAGMA(GCC target(t))
#elif defined(_MSC_VER)
#define SEALSTORE_TARGET_PRAGMA(t)
#else
#error "sealstore: no way to turn on a kernel's instruction set with this compiler"
#endif
SEALSTORE_TARGET_PRAGMA(SEALSTORE_TARGET)
