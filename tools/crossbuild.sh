#!/usr/bin/env bash
# Windows (MSVC and mingw-w64) and macOS builds of the native kernels, checked on Linux x86-64:
#
#   1. MSVC mode: every source the cffi builder compiles on Windows x64 (build_ffi.py,
#      machine AMD64) with clang in cl mode, target x86_64-pc-windows-msvc, __clang__
#      undefined (so the _MSC_VER branches are compiled: empty target pragma, __forceinline,
#      CPUID through <intrin.h>), /W4 /WX, C runtime declared by tools/msvc_shim.  MSVC compiles
#      intrinsics in any function; clang 14's headers declare them only with the feature
#      macros, so each kernel file gets the -m flags of its own SEALSTORE_TARGET (what the
#      target pragma turns on under gcc/clang), nothing else does.
#   2. The same with zig cc -target x86_64-windows-msvc (a newer clang: -Werror), in MSVC mode
#      as above and as clang (target pragmas, no -m flags).
#   3. mingw-w64 gcc, -O3 -Wall -Wextra -Werror.
#   4. kat.exe from the MSVC-mode objects of 1 (the driver tests/native/kat.c itself compiled
#      by mingw-w64 gcc, linked with mingw-w64's runtime: no MSVC runtime exists here), and
#      kat.exe from the mingw objects of 3, both run under wine: "kat selected" must name the
#      same kernel for every variant as the native Linux build on this CPU (and a hardware
#      kernel when the CPU has AES-NI), then the draft vectors and Wycheproof
#      (tools/kat_vectors.py) and every kernel against the portable one: 0 failures.
#      tests/native/portable_check.c (the portable kernel's building blocks against their
#      definitions) from its MSVC-mode object under wine too: 0 failures.
#   5. The inline guard over the COFF objects of clang-cl at /Ob1 and /Ob2
#      (tools/inline_guard.py --msvc).
#   6. macOS: the sources the builder picks on x86_64 and on arm64 (with dispatch.c's
#      sysctlbyname branch) compile with zig cc -target x86_64-macos / aarch64-macos, -Werror.
#
# Exit 0 when all of it passed, 1 on a failure, 2 when a tool is missing.  Environment: PYTHON
# (python3 with sealstore and the ziglang package importable), WINE (wine), KEEP=1 keeps
# the build directory.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WINE="${WINE:-wine}"
CLANG="${CLANG:-clang}"
MINGW="${MINGW:-x86_64-w64-mingw32-gcc}"
for tool in "$PYTHON" "$CLANG" "$MINGW" "$WINE" gcc llvm-objdump; do
    command -v "$tool" >/dev/null || { echo "crossbuild: $tool is missing" >&2; exit 2; }
done
"$PYTHON" -c 'import ziglang' 2>/dev/null \
    || { echo "crossbuild: the ziglang package is missing (pip install ziglang)" >&2; exit 2; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sealstore-cross.XXXXXX")"
# wine keeps its server directory under TMPDIR: in WORK too, so the cleanup removes it
mkdir -p "$WORK/tmp"
export WINEPREFIX="${WINEPREFIX:-$WORK/wine}" WINEDEBUG=-all TMPDIR="$WORK/tmp"
# this prefix's wineserver (started by the runs below) is stopped on exit, before the cleanup
cleanup() {
    if command -v wineserver >/dev/null; then wineserver -k >/dev/null 2>&1 || true; fi
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
t0=$SECONDS
fail() { printf 'CROSSBUILD FAILURE: %s\n' "$*" >&2; exit 1; }
cd "$ROOT"

sources() { # MACHINE: the C sources the cffi builder compiles there
    "$PYTHON" -c '
import importlib.util, sys
from unittest import mock
spec = importlib.util.spec_from_file_location("b", "native/build_ffi.py")
b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)
with mock.patch.object(b.platform, "machine", return_value=sys.argv[1]):
    print("\n".join(b.kernel_sources()))' "$1"
}
# the -m flags of a kernel file's own SEALSTORE_TARGET (MSVC mode, see above)
mflags() {
    sed -n 's/^#define SEALSTORE_TARGET "\(.*\)"/\1/p' "$1" | tr ',' '\n' | sed 's/^/-m/' \
        | tr '\n' ' '
}
mapfile -t WIN < <(sources AMD64)
[ "${#WIN[@]}" -gt 20 ] || fail "the builder lists ${#WIN[@]} sources for AMD64"
mapfile -t MAC_ARM < <(sources arm64)
printf '%s\n' "${MAC_ARM[@]}" | grep -q armcrypto || fail "no armcrypto source for arm64"

# compile SRC... in parallel with compile_one; a failure prints its log
compile_set() { # LABEL OUTDIR EXT MODE SRC...
    local label=$1 out=$2 ext=$3 mode=$4; shift 4
    mkdir -p "$out"
    local pids=() srcs=() s
    for s in "$@"; do
        local o="$out/$(basename "$s" .c).$ext" m=""
        [ "$mode" = msvc ] && m="$(mflags "$s")"
        # shellcheck disable=SC2086
        compile_one "$label" "$s" "$o" $m >"$o.log" 2>&1 &
        pids+=($!); srcs+=("$s")
    done
    local i bad=0
    for i in "${!pids[@]}"; do
        if ! wait "${pids[$i]}"; then
            bad=$((bad + 1))
            echo "--- $label: ${srcs[$i]}"
            cat "$out/$(basename "${srcs[$i]}" .c).$ext.log"
        fi
    done
    [ "$bad" = 0 ] || fail "$label: $bad of $# sources failed"
    echo "$label: $# sources compiled"
}
SHIM="$ROOT/tools/msvc_shim"
compile_one() { # LABEL SRC OBJ [-m flags]
    local label=$1 src=$2 obj=$3; shift 3
    case $label in
    clang-cl)
        "$CLANG" --driver-mode=cl --target=x86_64-pc-windows-msvc /U__clang__ /O2 /W4 /WX /Zl \
            -Wvla -Wgnu \
            -imsvc "$SHIM" "/I$ROOT/native/include" "$@" /c "/Fo$obj" -- "$src" ;;
    zig-msvc)
        "$PYTHON" -m ziglang cc -target x86_64-windows-msvc -U__clang__ -O3 -Wall -Wextra \
            -Werror -Wvla -Wgnu -isystem "$SHIM" "-I$ROOT/native/include" "$@" -c "$src" -o "$obj" ;;
    zig-clang)
        "$PYTHON" -m ziglang cc -target x86_64-windows-msvc -O3 -Wall -Wextra -Werror \
            -isystem "$SHIM" "-I$ROOT/native/include" -c "$src" -o "$obj" ;;
    mingw)
        "$MINGW" -O3 -Wall -Wextra -Werror "-I$ROOT/native/include" -c "$src" -o "$obj" ;;
    native)
        gcc -O3 -Wall -Wextra -Werror "-I$ROOT/native/include" -c "$src" -o "$obj" ;;
    macos-x86_64 | macos-aarch64)
        "$PYTHON" -m ziglang cc -target "${label#macos-}-macos" -O3 -Wall -Wextra -Werror \
            -fvisibility=hidden "-I$ROOT/native/include" -c "$src" -o "$obj" ;;
    *) return 1 ;;
    esac
}

# MSVC mode means MSVC's view of the preprocessor: _MSC_VER, and neither __clang__ nor __GNUC__
cat >"$WORK/msvc_probe.c" <<'PROBE'
#if !defined(_MSC_VER) || defined(__clang__) || defined(__GNUC__)
#error "not MSVC's view of the preprocessor"
#endif
int sealstore_msvc_probe;
PROBE
mkdir -p "$WORK/probe"
compile_one clang-cl "$WORK/msvc_probe.c" "$WORK/probe/cl.obj" || fail "clang-cl is not in MSVC mode"
compile_one zig-msvc "$WORK/msvc_probe.c" "$WORK/probe/zig.obj" || fail "zig cc is not in MSVC mode"

compile_set clang-cl "$WORK/cl" obj msvc "${WIN[@]}"
compile_set zig-msvc "$WORK/zigmsvc" obj msvc "${WIN[@]}"
# the driver is standard C too (it runs below compiled by mingw-w64: no MSVC runtime here)
compile_one clang-cl tests/native/kat.c "$WORK/probe/kat.obj" >"$WORK/probe/kat.log" 2>&1 \
    || { cat "$WORK/probe/kat.log"; fail "tests/native/kat.c in MSVC mode"; }
compile_one zig-msvc tests/native/kat.c "$WORK/probe/kat-zig.obj" >"$WORK/probe/kat-zig.log" 2>&1 \
    || { cat "$WORK/probe/kat-zig.log"; fail "tests/native/kat.c in MSVC mode (zig)"; }
# the portable kernel's building blocks (its MSVC form: scalar planes), run under wine below
PC=tests/native/portable_check.c
compile_one clang-cl "$PC" "$WORK/probe/pc.obj" "-I$ROOT/native/src" >"$WORK/probe/pc.log" 2>&1 \
    || { cat "$WORK/probe/pc.log"; fail "$PC in MSVC mode"; }
compile_one zig-msvc "$PC" "$WORK/probe/pc-zig.obj" "-I$ROOT/native/src" \
    >"$WORK/probe/pc-zig.log" 2>&1 || { cat "$WORK/probe/pc-zig.log"; fail "$PC in MSVC mode (zig)"; }
echo "tests/native/kat.c and portable_check.c compiled in MSVC mode (clang-cl, zig)"
# no GNU C left in what MSVC compiles (clang accepts it in cl mode; MSVC would not)
gnu=0
for src in "${WIN[@]}" tests/native/kat.c "$PC"; do
    # shellcheck disable=SC2046
    "$CLANG" --driver-mode=cl --target=x86_64-pc-windows-msvc /U__clang__ -imsvc "$SHIM" \
        "/I$ROOT/native/include" "/I$ROOT/native/src" $(mflags "$src") /E /clang:-dD -- "$src" \
        2>"$WORK/probe/pp.log" \
        | "$PYTHON" "$SHIM/gnu_scan.py" "$src" || gnu=$((gnu + 1))
done
[ "$gnu" = 0 ] || fail "GNU C outside the guarded branches in $gnu sources"
echo "no GNU C in the MSVC branches of $((${#WIN[@]} + 2)) sources"
compile_set zig-clang "$WORK/zigclang" obj plain "${WIN[@]}"
compile_set mingw "$WORK/mingw" o plain "${WIN[@]}" tests/native/kat.c
compile_set native "$WORK/native" o plain "${WIN[@]}" tests/native/kat.c
compile_set macos-x86_64 "$WORK/mac64" o plain "${WIN[@]}"
compile_set macos-aarch64 "$WORK/macarm" o plain "${MAC_ARM[@]}"
llvm-objdump -t "$WORK/macarm/dispatch.o" | grep -q "UND.*_sysctlbyname$" \
    || fail "the aarch64-macos dispatch.o does not call sysctlbyname"
for o in "$WORK"/cl/*.obj; do
    llvm-objdump -f "$o" | grep -q "file format coff-x86-64" || fail "$o is not an x86-64 COFF object"
done
echo "compiled in $((SECONDS - t0)) s"

# the drivers: native (reference), mingw, and MSVC-mode kernels + mingw-compiled kat.c
gcc "$WORK"/native/*.o -o "$WORK/kat" || fail "link native"
"$MINGW" "$WORK"/mingw/*.o -o "$WORK/kat-mingw.exe" || fail "link mingw"
# /GS is on (MSVC's default): its two runtime symbols come from tools/msvc_shim/gs_support.c
"$MINGW" -O2 -Wall -Wextra -Werror -c "$SHIM/gs_support.c" -o "$WORK/gs_support.o" \
    || fail "gs_support"
"$MINGW" "$WORK"/cl/*.obj "$WORK/mingw/kat.o" "$WORK/gs_support.o" -o "$WORK/kat-msvc.exe" \
    || fail "link MSVC-mode objects"
"$PYTHON" tools/kat_vectors.py --wycheproof >"$WORK/vectors.txt"
grep -q "^AEGIS-128L 16 0 " "$WORK/vectors.txt" || fail "no must-fail vector lines"
"$WORK/kat" selected >"$WORK/selected-native.txt" || fail "native kat selected"
if grep -qw aes /proc/cpuinfo && grep -q ": portable$" "$WORK/selected-native.txt"; then
    fail "the native build selects portable on a CPU with AES-NI"
fi
"$WINE" wineboot -i >/dev/null 2>&1 || true
for exe in kat-msvc kat-mingw; do
    "$WINE" "$WORK/$exe.exe" selected | tr -d '\r' >"$WORK/selected-$exe.txt" \
        || fail "$exe selected"
    echo "$exe under wine selects:" $(tr '\n' ' ' <"$WORK/selected-$exe.txt")
    cmp -s "$WORK/selected-native.txt" "$WORK/selected-$exe.txt" || {
        cat "$WORK/selected-native.txt"; fail "$exe selects other kernels than the native build"; }
    "$WINE" "$WORK/$exe.exe" kernels | tr -d '\r' >"$WORK/kernels-$exe.txt" || fail "$exe kernels"
    "$WINE" "$WORK/$exe.exe" "$WORK/vectors.txt" 2>&1 | tr -d '\r' >"$WORK/$exe.log" \
        || { cat "$WORK/$exe.log"; fail "$exe vectors"; }
    echo "$exe: $(tail -n 1 "$WORK/$exe.log")"
    grep -q " 0 failures;" "$WORK/$exe.log" || fail "$exe: failures"
done
"$MINGW" "$WORK/probe/pc.obj" "$WORK/gs_support.o" -o "$WORK/pc-msvc.exe" || fail "link $PC"
"$WINE" "$WORK/pc-msvc.exe" 2>&1 | tr -d '\r' >"$WORK/pc-msvc.log" \
    || { cat "$WORK/pc-msvc.log"; fail "pc-msvc ($PC from its MSVC-mode object)"; }
echo "pc-msvc: $(tail -n 1 "$WORK/pc-msvc.log")"
grep -q " 0 failures" "$WORK/pc-msvc.log" || fail "pc-msvc: failures"
echo "wine runs done at $((SECONDS - t0)) s"

"$PYTHON" tools/inline_guard.py --msvc || fail "inline guard (clang-cl /Ob1, /Ob2)"
echo "crossbuild: all passed in $((SECONDS - t0)) s"
