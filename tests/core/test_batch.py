"""The four-lane AEGIS-128L batch kernel behind seal_prefixed_many/open_prefixed_many.

Values sealed four at a time must be exactly what the one-by-one path produces: each opens
with the other path, for every length around the block size, mixed in one list, and a forged
value anywhere in a list is named by its index.
"""

import os
import random

import pytest

from sealstore import AEGIS128L, native
from sealstore.errors import InvalidTag

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)

LENGTHS = [0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 1000]


@pytest.fixture(params=[16, 32], ids=["tag128", "tag256"])
def pair(request):
    """(default cipher, cipher without the batch kernel) on the same key."""
    key = os.urandom(16)
    batch = AEGIS128L(key, request.param)
    native.force_kernel("aesni")
    try:
        single = AEGIS128L(key, request.param)
    finally:
        native.force_kernel(None)
    return batch, single


def test_batch_kernel_is_used_where_the_cpu_has_it():
    c = AEGIS128L(os.urandom(16))
    has = native.lib.sealstore_kernel_supported(native.KERNELS.index("avx512"))
    assert (c._ctx.batch != native.ffi.NULL) == bool(has)


@pytest.mark.parametrize("seed", range(40))
def test_batch_and_single_paths_agree(pair, seed):
    batch, single = pair
    rnd = random.Random(seed)
    n = rnd.randrange(0, 14)
    values = [os.urandom(rnd.choice(LENGTHS)) for _ in range(n)]
    prefix = os.urandom(rnd.choice([0, 7]))
    ad = os.urandom(rnd.choice([0, 32, 300]))
    for sealer, opener in ((batch, single), (single, batch)):
        sealed = sealer.seal_prefixed_many(prefix, values, ad)
        assert [opener.open_prefixed(len(prefix), s, ad) for s in sealed] == values
        assert opener.open_prefixed_many(len(prefix), sealed, ad) == values
        assert all(s[: len(prefix)] == prefix for s in sealed)


@pytest.mark.parametrize("where", range(9))
def test_forged_value_in_a_batch_is_named(pair, where):
    batch, _ = pair
    values = [os.urandom(50 + i) for i in range(9)]
    sealed = batch.seal_prefixed_many(b"hdr", values, b"ctx")
    forged = bytearray(sealed[where])
    forged[-1] ^= 0x80
    sealed[where] = bytes(forged)
    with pytest.raises(InvalidTag) as info:
        batch.open_prefixed_many(3, sealed, b"ctx")
    assert info.value.index == where


def test_mixed_prefixes_fall_back_and_still_open(pair):
    batch, _ = pair
    a = batch.seal_prefixed_many(b"AAA", [b"x" * 40] * 3, None)
    b = batch.seal_prefixed_many(b"BBB", [b"y" * 40] * 3, None)
    # a list whose prefixes differ cannot share one AD: every value still opens on its own
    mixed = [a[0], b[0], a[1], b[1], a[2], b[2]]
    with pytest.raises(InvalidTag):
        batch.open_prefixed_many(3, mixed, b"other")
    assert [batch.open_prefixed(3, s) for s in mixed] == [b"x" * 40, b"y" * 40] * 3


@pytest.mark.parametrize("where", [0, 1, 3, 5])
def test_non_bytes_item_is_named(pair, where):
    batch, _ = pair
    sealed = batch.seal_prefixed_many(b"hdr", [b"v" * 20] * 6, None)
    sealed[where] = 12345
    with pytest.raises(TypeError) as info:
        batch.open_prefixed_many(3, sealed, None)
    assert info.value.index == where
