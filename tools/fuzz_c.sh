#!/usr/bin/env bash
# A longer libFuzzer run of the C open/decrypt entry points (tests/native/fuzz_open.c) under
# ASan + UBSan, on its own build (CI runs it for 15 s inside tools/sanitize.sh asan, linked
# from the sanitized build's objects).
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
