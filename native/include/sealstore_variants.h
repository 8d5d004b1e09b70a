/*
 * The one table of AEGIS variants (an X-macro list: no include guard, on purpose).  Every other
 * list of variants is derived from it: the ids (sealstore.h), the kernels' externs
 * (src/implementations.h), the dispatch, name and size tables (src/dispatch.c), the sources the
 * package builds (native/build_ffi.py parses this file), the Python classes' key and nonce
 * sizes (plugin/aead.py reads them from the library) and the inline guard's kernels
 * (tools/inline_guard.py parses it too).  tests/core/test_native_variants.py forbids a second
 * list.
 *
 * One line per variant, its id the line's position (0, 1, ...):
 *   SEALSTORE_VARIANT(ID, dir, "name", family, keybytes, npubbytes, lanes,
 *                     aesni, avx2, avx512, armcrypto, batch_avx512)
 * ID        the C id's suffix (SEALSTORE_<ID>)
 * dir       the kernels' directory and prefix: src/<dir>/<dir>_<kernel>.c defines
 *           sealstore_<dir>_<kernel> (every variant has a portable kernel)
 * "name"    the suite registry's name (plugin/suites.py native_variant)
 * family    128 (AEGIS-128L state: 8 words) or 256 (AEGIS-256 state: 6 words)
 * lanes     the degree of parallelism (1, 2, 4)
 * aesni ... 1 when src/<dir>/<dir>_<kernel>.c exists (x86: aesni, avx2, avx512; aarch64:
 *           armcrypto), 0 otherwise
 * batch_avx512  1 when src/<dir>/<dir>_batch_avx512.c holds the four-message kernels
 *           (sealstore_<dir>_encrypt4_avx512 / _decrypt4_avx512: Keyring.seal_many)
 * Keep the arguments plain tokens: build_ffi.py and tools/inline_guard.py read them as text.
 */
SEALSTORE_VARIANT(AEGIS128L, aegis128l, "AEGIS-128L", 128, 16, 16, 1, 1, 1, 0, 1, 1)
SEALSTORE_VARIANT(AEGIS128X2, aegis128x2, "AEGIS-128X2", 128, 16, 16, 2, 1, 1, 0, 1, 0)
SEALSTORE_VARIANT(AEGIS128X4, aegis128x4, "AEGIS-128X4", 128, 16, 16, 4, 1, 1, 1, 1, 0)
SEALSTORE_VARIANT(AEGIS256, aegis256, "AEGIS-256", 256, 32, 32, 1, 1, 1, 0, 1, 0)
SEALSTORE_VARIANT(AEGIS256X2, aegis256x2, "AEGIS-256X2", 256, 32, 32, 2, 1, 1, 0, 1, 0)
SEALSTORE_VARIANT(AEGIS256X4, aegis256x4, "AEGIS-256X4", 256, 32, 32, 4, 1, 1, 1, 1, 0)
