"""Types of ``sealstore._native``, the cffi module built by native/build_ffi.py from
native/sealstore_cdef.h (one entry per declaration there).

Internal: only :mod:`sealstore.native` (and the benchmark) uses ``ffi`` and ``lib``.
"""

from typing import Final

import _cffi_backend

_CData = _cffi_backend._CDataBase

class _Lib:
    SEALSTORE_MAX_KEYBYTES: Final[int]
    SEALSTORE_MAX_NPUBBYTES: Final[int]
    SEALSTORE_NVARIANTS: Final[int]
    SEALSTORE_NKERNELS: Final[int]

    def sealstore_cpu_features(self) -> int: ...
    def sealstore_cpu_mask(self, keep: int, /) -> None: ...
    def sealstore_kernel_supported(self, kernel: int, /) -> int: ...
    def sealstore_variant_has_kernel(self, variant: int, kernel: int, /) -> int: ...
    def sealstore_force_kernel(self, kernel: int, /) -> int: ...
    def sealstore_selected_kernel(self, variant: int, /) -> int: ...
    def sealstore_variant_name(self, variant: int, /) -> _CData: ...
    def sealstore_key_size(self, variant: int, /) -> int: ...
    def sealstore_nonce_size(self, variant: int, /) -> int: ...
    def sealstore_impl(self, variant: int, kernel: int, /) -> _CData: ...
    def sealstore_ctx_new(
        self, variant: int, kernel: int, k: _CData | bytes, maclen: int, /
    ) -> _CData: ...
    def sealstore_ctx_free(self, ctx: _CData, /) -> None: ...
    def sealstore_encrypt(
        self,
        ctx: _CData,
        c: _CData,
        m: _CData | bytes,
        mlen: int,
        ad: _CData | bytes,
        adlen: int,
        npub: _CData | bytes,
        /,
    ) -> int: ...
    def sealstore_decrypt(
        self,
        ctx: _CData,
        m: _CData,
        c: _CData | bytes,
        clen: int,
        ad: _CData | bytes,
        adlen: int,
        npub: _CData | bytes,
        /,
    ) -> int: ...
    def sealstore_encrypt_detached(
        self,
        ctx: _CData,
        c: _CData,
        mac: _CData,
        m: _CData | bytes,
        mlen: int,
        ad: _CData | bytes,
        adlen: int,
        npub: _CData | bytes,
        /,
    ) -> int: ...
    def sealstore_decrypt_detached(
        self,
        ctx: _CData,
        m: _CData,
        c: _CData | bytes,
        clen: int,
        mac: _CData | bytes,
        ad: _CData | bytes,
        adlen: int,
        npub: _CData | bytes,
        /,
    ) -> int: ...
    def sealstore_seal_prefixed(
        self,
        ctx: _CData,
        out: _CData,
        prefix: _CData | bytes,
        prefixlen: int,
        npub: _CData | bytes,
        m: _CData | bytes,
        mlen: int,
        ad: _CData | bytes,
        adlen: int,
        /,
    ) -> int: ...
    def sealstore_open_prefixed(
        self,
        ctx: _CData,
        m: _CData,
        in_: _CData | bytes,
        inlen: int,
        prefixlen: int,
        ad: _CData | bytes,
        adlen: int,
        /,
    ) -> int: ...
    def sealstore_seal_segments(
        self,
        ctx: _CData,
        out: _CData,
        in_: _CData | bytes,
        inlen: int,
        seglen: int,
        nonce_prefix: _CData | bytes,
        first_index: int,
        final: int,
        ad: _CData | bytes,
        adlen: int,
        /,
    ) -> int: ...
    def sealstore_open_segments(
        self,
        ctx: _CData,
        out: _CData,
        in_: _CData | bytes,
        inlen: int,
        seglen: int,
        nonce_prefix: _CData | bytes,
        first_index: int,
        final: int,
        ad: _CData | bytes,
        adlen: int,
        bad_index: _CData,
        /,
    ) -> int: ...
    def sealstore_memzero(self, p: _CData, n: int, /) -> None: ...

ffi: _cffi_backend.FFI
lib: _Lib
