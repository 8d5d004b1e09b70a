#!/usr/bin/env bash
# libFuzzer run of the C open/decrypt entry points (tests/native/fuzz_open.c) under
# ASan + UBSan.  Not in CI yet: it finds the size_t overflows of issue 8's report (huge
# prefix length / segment size through the C API) until those are fixed in native/src/calls.c.
#
#   tools/fuzz_c.sh [seconds]        default 60; the build takes about 2 minutes
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
CLANG="${CLANG:-clang}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sealstore-fuzzc.XXXXXX")"
SOURCES=$(cd "$ROOT" && "$PYTHON" -c "import sys; sys.path.insert(0, 'native'); import build_ffi; print(' '.join(build_ffi.kernel_sources()))")
(cd "$ROOT" && "$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Inative/include tests/native/fuzz_open.c $SOURCES -o "$WORK/fuzz_open")
mkdir -p "$WORK/corpus"
cd "$WORK"
if ./fuzz_open -max_total_time="${1:-60}" -timeout=10 corpus; then
    rm -rf "$WORK"
    echo "fuzz_c: no failures"
else
    echo "fuzz_c: FAILED; input kept in $WORK (replay: $WORK/fuzz_open $WORK/crash-*)" >&2
    exit 1
fi
