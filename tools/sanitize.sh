#!/usr/bin/env bash
# Run the native code under AddressSanitizer + UndefinedBehaviorSanitizer and under valgrind
# memcheck.  Any report fails (exit 1).  See docs/HARDENING.md.
#
#   tools/sanitize.sh            both
#   tools/sanitize.sh asan       ASan/UBSan only: build the native modules with
#                                -fsanitize=address,undefined into a scratch dir, run the kernel,
#                                kernel tests against it on every kernel this CPU runs
#                                (LD_PRELOAD of libasan for the interpreter), the format,
#                                keyring, object-stream, bad-input and fuzz-corpus tests on
#                                the portable kernel and on each kernel this CPU selects, the
#                                thread stress tests (tests/native_stress.py, STRESS_SECONDS
#                                per scenario, 3), the C
#                                known-answer driver built the same way, and a short libFuzzer
#                                run of the C open/decrypt entry points (FUZZ_C_SECONDS, 15)
#   tools/sanitize.sh valgrind   memcheck only: the C driver on the portable (and AES-NI) kernel,
#                                and the Python draft vector tests of the AEGIS-128 family on
#                                the portable kernel
#
# Needs clang (or gcc: SAN_CC=gcc), gcc and valgrind, and the test dependencies
# (pip install ".[test]").  Environment: PYTHON (default python3), CC (default gcc, for the
# valgrind build), SAN_CC (default clang, for the sanitizer build), KEEP=1 keeps the scratch dir.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
CC="${CC:-gcc}"
WHAT="${1:-all}"
# the interpreter itself, not a wrapper script such as a pyenv shim (valgrind does not follow an
# exec); in a venv its own bin/python (a link to the binary that finds the venv's packages)
PY="$("$PYTHON" -c 'import os, sys; print(sys.executable if sys.prefix != sys.base_prefix else os.path.realpath(sys.executable))')"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sealstore-sanitize.XXXXXX")"
if [ "${KEEP:-0}" != 1 ]; then
    trap 'rm -rf "$WORK"' EXIT
fi
failed=0

note() { printf '\n== %s\n' "$*"; }
fail() { printf 'SANITIZE FAILURE: %s\n' "$*" >&2; failed=1; }

"$PY" "$ROOT/tools/kat_vectors.py" >"$WORK/vectors.txt"

# ---- ASan + UBSan --------------------------------------------------------------------------
run_asan() {
    local cc="${SAN_CC:-clang}" libasan
    note "ASan/UBSan: building the native modules and the C driver ($cc, tools/sanitized_build.py)"
    libasan="$("$PY" "$ROOT/tools/sanitized_build.py" "$WORK/asan" --cc "$cc" 2>"$WORK/build.log")" \
        || { cat "$WORK/build.log"; fail "sanitized build"; return; }

    export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

    # the method works: a one-byte heap over-read in a kernel call must be reported
    if "$WORK/asan/kat" overflow >"$WORK/control.log" 2>&1 \
        || ! grep -q "heap-buffer-overflow" "$WORK/control.log"; then
        cat "$WORK/control.log"
        fail "the ASan control (kat overflow) was not reported: is the build instrumented?"
    fi

    local env=(env LD_PRELOAD="$libasan" PYTHONPATH="$WORK/asan/site" PYTHONMALLOC=malloc
               PYTHONDONTWRITEBYTECODE=1)
    local where
    where="$(cd "$ROOT" && "${env[@]}" "$PY" -c 'import sealstore._native as n, sealstore._speedups as s; print(n.__file__, s.__file__)')"
    case "$where" in
        "$WORK/asan/site/"*" $WORK/asan/site/"*) echo "sanitized modules: $where" ;;
        *) fail "the sanitized modules are not the ones imported: $where"; return ;;
    esac
    local kernels chosen
    kernels="$(cd "$ROOT" && "${env[@]}" "$PY" -c 'import sealstore.native as n; print(" ".join(n.kernels()))')"
    # the paths above the kernels (format, keyring, streams...): on the portable kernel and on
    # the kernels this CPU selects; the kernel tests above run every kernel (a kernel no variant
    # selects here, such as aesni beside avx2, differs from them only below that interface)
    chosen="$(cd "$ROOT" && "${env[@]}" "$PY" -c 'import sealstore.native as n; print(" ".join(sorted({"portable", *n.info()["selected"].values()})))')"

    note "ASan/UBSan: C known-answer driver (every kernel)"
    "$WORK/asan/kat" "$WORK/vectors.txt" >"$WORK/asan-kat.log" 2>&1 || fail "C driver under ASan/UBSan"
    tail -n 1 "$WORK/asan-kat.log"

    note "ASan/UBSan: kernel tests (parametrized over every kernel: $kernels)"
    (cd "$ROOT" && "${env[@]}" "$PY" -m pytest -q -p no:cacheprovider \
        tests/core/test_aead_vectors.py tests/core/test_aead_api.py tests/core/test_aead_properties.py \
        tests/core/test_native.py tests/core/test_batch.py tests/core/test_rowmap.py tests/core/test_native_boundary.py \
        >"$WORK/asan-kernels.log" 2>&1) \
        || fail "kernel tests under ASan/UBSan"
    tail -n 1 "$WORK/asan-kernels.log"
    for k in $chosen; do
        note "ASan/UBSan: format, keyring, object stream, bad-input and fuzz-corpus tests, SEALSTORE_KERNEL=$k"
        (cd "$ROOT" && "${env[@]}" SEALSTORE_KERNEL="$k" "$PY" -m pytest -q -p no:cacheprovider \
            tests/core/test_format.py tests/core/test_keyring.py tests/core/test_keyring_named.py tests/core/test_stream.py \
            tests/core/test_hardening_inputs.py tests/toolchain/test_hardening_fuzz.py >"$WORK/asan-$k.log" 2>&1) \
            || fail "format/keyring tests on $k"
        tail -n 1 "$WORK/asan-$k.log"
    done

    note "ASan/UBSan: inputs changed by other threads during native calls (tests/native_stress.py)"
    (cd "$ROOT" && "${env[@]}" SEALSTORE_STRESS_SECONDS="${STRESS_SECONDS:-3}" "$PY" -m pytest -q \
        -p no:cacheprovider tests/core/test_native_races.py >"$WORK/asan-races.log" 2>&1) \
        || { tail -n 40 "$WORK/asan-races.log"; fail "race stress tests under ASan/UBSan"; }
    tail -n 1 "$WORK/asan-races.log"

    if [ -x "$WORK/asan/fuzz_open" ]; then
        note "ASan/UBSan: libFuzzer on the C open/decrypt entry points (${FUZZ_C_SECONDS:-15}s)"
        mkdir -p "$WORK/fuzzc/corpus"
        (cd "$WORK/fuzzc" && "$WORK/asan/fuzz_open" -max_total_time="${FUZZ_C_SECONDS:-15}" \
            -timeout=10 -artifact_prefix="$WORK/fuzzc/" corpus >"$WORK/asan-fuzzc.log" 2>&1) \
            || { grep -v -E "^#[0-9]+" "$WORK/asan-fuzzc.log" | tail -n 30
                 fail "C fuzz target (input kept in $WORK/fuzzc; KEEP=1 keeps it)"; }
        grep -E "^Done" "$WORK/asan-fuzzc.log" || true
    fi

    if grep -lE "ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer" "$WORK"/asan-*.log; then
        fail "sanitizer reports in the logs above"
    fi
}

# ---- valgrind memcheck ---------------------------------------------------------------------
# A report counts when one of its frames is in sealstore's native code (the CPython 3.11
# interpreter has a few reports of its own at start-up, outside sealstore).
count_errors() {
    "$PY" - "$@" <<'EOF'
import os
import sys
import xml.etree.ElementTree as ET

def ours(frame):
    obj = os.path.basename(frame.findtext("obj") or "")
    return (obj.startswith(("_native.", "_speedups.")) or obj == "kat"
            or "native/src" in (frame.findtext("dir") or ""))


bad = 0
for path in sys.argv[1:]:
    for err in ET.parse(path).getroot().iter("error"):
        if (err.findtext("kind") or "").startswith("Leak_"):
            continue  # leaks are not checked (the interpreter keeps memory until exit)
        frames = err.findall("./stack/frame")
        if any(ours(f) for f in frames):
            bad += 1
            print(err.findtext("kind"), err.findtext("what") or err.findtext("./xwhat/text"))
            for f in frames[:8]:
                print("    at", f.findtext("fn"), f.findtext("obj"), f.findtext("file"),
                      f.findtext("line"))
print(f"{bad} memcheck report(s) in sealstore code")
sys.exit(1 if bad else 0)
EOF
}

run_valgrind() {
    command -v valgrind >/dev/null || { fail "valgrind is not installed"; return; }
    local vg=(valgrind --tool=memcheck --leak-check=no --child-silent-after-fork=yes --xml=yes)

    note "valgrind: C known-answer driver (portable and AES-NI kernels; valgrind has no VAES/AVX-512)"
    "$PY" "$ROOT/tools/sanitized_build.py" "$WORK/plain" --cc "$CC" --flags= --opt=-O2 \
        >/dev/null 2>"$WORK/build-plain.log" || { cat "$WORK/build-plain.log"; fail "building the C driver"; return; }
    # the method works: the driver's one-byte heap over-read must be counted
    "${vg[@]}" --xml-file="$WORK/vg-control.xml" "$WORK/plain/kat" overflow >/dev/null 2>&1 || true
    if count_errors "$WORK/vg-control.xml" >/dev/null; then
        fail "the memcheck control (kat overflow) was not reported"
    fi
    for k in portable aesni; do
        # -q: every length up to 140 and a 4 KiB message instead of 520 and 1 MiB (valgrind is slow)
        "${vg[@]}" --xml-file="$WORK/vg-kat-$k.xml" "$WORK/plain/kat" -q -k "$k" "$WORK/vectors.txt" \
            || fail "C driver on $k under valgrind"
        count_errors "$WORK/vg-kat-$k.xml" || fail "memcheck reports (C driver, $k)"
    done

    # the AEGIS-128 family: the binding is the same for every variant, and the C driver above
    # runs every variant's vectors under memcheck (halves this step's tests, 26 of 52)
    note "valgrind: Python draft vector tests of the AEGIS-128 family on the portable kernel"
    (cd "$ROOT" && SEALSTORE_KERNEL=portable PYTHONMALLOC=malloc "${vg[@]}" \
        --xml-file="$WORK/vg-py.%p.xml" "$PY" -m pytest -q -p no:cacheprovider \
        tests/core/test_aead_vectors.py -k "portable and draft18 and AEGIS-128" 2>&1 | tail -n 1) \
        || fail "Python tests under valgrind"
    count_errors "$WORK"/vg-py.*.xml || fail "memcheck reports (Python tests)"
}

case "$WHAT" in
    asan) run_asan ;;
    valgrind) run_valgrind ;;
    all) run_asan; run_valgrind ;;
    *) echo "usage: $0 [all|asan|valgrind]" >&2; exit 2 ;;
esac

if [ "$failed" != 0 ]; then
    echo "sanitize: FAILED" >&2
    exit 1
fi
echo "sanitize: clean"
