#!/usr/bin/env bash
# The aarch64 kernels, tested on an x86 host: cross-compile the native sources the cffi builder
# picks for aarch64 (portable + armcrypto) with the C driver tests/native/kat.c, then run it
# under qemu-aarch64 -cpu max (which has the Crypto Extension):
#
#   * "kat kernels"/"kat selected": armcrypto is built, runnable and chosen for every variant;
#   * armcrypto on the draft vectors and Project Wycheproof's AEGIS-128L and AEGIS-256 files
#     (the variants the suite registry has: tools/kat_vectors.py), then against
#     the portable kernel on pseudo-random inputs of every length 0..4096 and large odd ones
#     (4 KiB + 133, 8 KiB - 1, 1 MiB +- a few bytes, 1.5 MiB + 13), encrypt and decrypt,
#     tampered ciphertext/tag/AD rejected with the output wiped, and the attached, prefixed
#     and segment calls (kat -L);
#   * a CPU without the Crypto Extension (every qemu CPU model has it, so the driver, linked
#     with --wrap=getauxval, clears HWCAP_AES from what the kernel reports: KAT_HWCAP_CLEAR):
#     portable is selected, armcrypto is not offered, "-k armcrypto" is refused, and the
#     vectors (draft and Wycheproof) pass on portable.
#
# Exit 0 when all of it passed, 1 on a failure, 2 when a tool is missing.  Environment: CC
# (default aarch64-linux-gnu-gcc), QEMU (qemu-aarch64), SYSROOT (/usr/aarch64-linux-gnu),
# PYTHON (python3, with sealstore importable: tools/kat_vectors.py), KEEP=1 keeps the build.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CC="${CC:-aarch64-linux-gnu-gcc}"
QEMU="${QEMU:-qemu-aarch64}"
SYSROOT="${SYSROOT:-/usr/aarch64-linux-gnu}"
PYTHON="${PYTHON:-python3}"
for tool in "$CC" "$QEMU" "$PYTHON"; do
    command -v "$tool" >/dev/null || { echo "cross_aarch64: $tool is missing" >&2; exit 2; }
done
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sealstore-aarch64.XXXXXX")"
if [ "${KEEP:-0}" != 1 ]; then
    trap 'rm -rf "$WORK"' EXIT
fi
t0=$SECONDS
fail() { printf 'AARCH64 FAILURE: %s\n' "$*" >&2; exit 1; }
HWCAP_AES=8 # <asm/hwcap.h>, aarch64

# the sources the cffi builder compiles on aarch64, and the driver
mapfile -t SOURCES < <(cd "$ROOT" && "$PYTHON" -c '
import importlib.util, platform
from unittest import mock
spec = importlib.util.spec_from_file_location("b", "native/build_ffi.py")
b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)
with mock.patch.object(b.platform, "machine", return_value="aarch64"):
    print("\n".join(b.kernel_sources()))')
printf '%s\n' "${SOURCES[@]}" | grep -q armcrypto || fail "the builder picks no armcrypto source"
pids=()
for src in "${SOURCES[@]}" tests/native/kat.c; do
    obj="$WORK/$(basename "$src" .c).o"
    "$CC" -c -O3 -Wall -Wextra -Werror -fvisibility=hidden -DKAT_WRAP_GETAUXVAL \
        -I"$ROOT/native/include" "$ROOT/$src" -o "$obj" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "compile"; done
"$CC" "$WORK"/*.o -Wl,--wrap=getauxval -o "$WORK/kat" || fail "link"
echo "built in $((SECONDS - t0)) s"

"$PYTHON" "$ROOT/tools/kat_vectors.py" --wycheproof >"$WORK/vectors.txt"
grep -q "^AEGIS-128L 16 0 " "$WORK/vectors.txt" || fail "no must-fail vector lines"
run() { "$QEMU" -L "$SYSROOT" -cpu max "$WORK/kat" "$@"; }

# the variants the C library has (build_ffi.VARIANTS names their source directories)
NVARIANTS="$(cd "$ROOT" && "$PYTHON" -c '
import importlib.util
spec = importlib.util.spec_from_file_location("b", "native/build_ffi.py")
b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)
print(len(b.VARIANTS))')"
want_all() { # FILE KERNEL: one line per variant, every one "VARIANT: KERNEL"
    local n lines
    n="$(grep -c ": $2\$" "$1" || true)"
    lines="$(wc -l <"$1")"
    [ "$n" = "$NVARIANTS" ] && [ "$lines" = "$NVARIANTS" ] \
        || { cat "$1"; fail "expected $2 for the $NVARIANTS variants"; }
}
run kernels >"$WORK/kernels.txt" || fail "kat kernels"
want_all "$WORK/kernels.txt" "portable armcrypto"
run selected >"$WORK/selected.txt" || fail "kat selected"
want_all "$WORK/selected.txt" armcrypto

t1=$SECONDS
# armcrypto against portable (which the no-AES run below checks on the vectors itself)
run -k armcrypto -L "$WORK/vectors.txt" >"$WORK/kat.log" 2>&1 || { cat "$WORK/kat.log"; fail "kat -L"; }
tail -n 1 "$WORK/kat.log"
grep -q " 0 failures; kernels: armcrypto$" "$WORK/kat.log" || fail "armcrypto did not run"
echo "armcrypto, every length: $((SECONDS - t1)) s"

# no Crypto Extension
export KAT_HWCAP_CLEAR="$HWCAP_AES"
run kernels >"$WORK/kernels-noaes.txt" || fail "kat kernels (no AES)"
want_all "$WORK/kernels-noaes.txt" portable
run selected >"$WORK/selected-noaes.txt" || fail "kat selected (no AES)"
want_all "$WORK/selected-noaes.txt" portable
if run -k armcrypto "$WORK/vectors.txt" >"$WORK/forced.log" 2>&1; then
    fail "armcrypto forced on a CPU without AES"
fi
grep -q "kernel armcrypto cannot run here" "$WORK/forced.log" || { cat "$WORK/forced.log"; fail "refusal message"; }
run -q "$WORK/vectors.txt" >"$WORK/noaes.log" 2>&1 || { cat "$WORK/noaes.log"; fail "portable without AES"; }
grep -q " 0 failures; kernels: portable$" "$WORK/noaes.log" || fail "portable alone without AES"
unset KAT_HWCAP_CLEAR
echo "cross_aarch64: all passed in $((SECONDS - t0)) s"
