#!/usr/bin/env bash
# Bounded coverage-guided fuzzing of every target in tests/fuzz/ (atheris), starting from the
# seed corpus in tests/fuzz/corpus/<target>/.  Any crash, hang (>10 s per input) or property
# failure fails (exit 1); the input is kept and printed, to be added to the corpus as a
# regression.  See docs/HARDENING.md.
#
#   tools/fuzz.sh [TARGET...]          targets: sealed aead object keyfile metadata columns config
#                                      registry (default: all)
#   FUZZ_SECONDS=60 tools/fuzz.sh      time per target (default 20)
#
# Needs atheris (pip install atheris) and the package installed.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
SECONDS_PER_TARGET="${FUZZ_SECONDS:-20}"
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(sealed aead object keyfile metadata columns config registry)
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sealstore-fuzz.XXXXXX")"
failed=0

for t in "${TARGETS[@]}"; do
    script="$ROOT/tests/fuzz/fuzz_$t.py"
    [ -f "$script" ] || { echo "no fuzz target $t" >&2; exit 2; }
    mkdir -p "$WORK/$t/new" "$WORK/$t/artifacts"
    printf '\n== fuzz %s (%ss)\n' "$t" "$SECONDS_PER_TARGET"
    # TMPDIR: scratch files of a target (the key file one) go away with the work dir
    if (cd "$WORK/$t" && TMPDIR="$WORK/$t" "$PYTHON" "$script" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
        -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 \
        -artifact_prefix="$WORK/$t/artifacts/" "$WORK/$t/new" "$ROOT/tests/fuzz/corpus/$t" \
        >"$WORK/$t/log" 2>&1); then
        grep -E "^(Done|stat::number_of_executed_units)" "$WORK/$t/log" || tail -n 2 "$WORK/$t/log"
    else
        failed=1
        grep -v -E "^#[0-9]+" "$WORK/$t/log" | tail -n 40
        for a in "$WORK/$t/artifacts/"*; do
            [ -e "$a" ] || continue
            echo "FUZZ FAILURE ($t): input kept at $a (base64 below); add it to"
            echo "tests/fuzz/corpus/$t/ as a regression once fixed"
            base64 -w0 "$a"; echo
        done
    fi
done

if [ "$failed" != 0 ]; then
    echo "fuzz: FAILED (work dir kept: $WORK)" >&2
    exit 1
fi
rm -rf "$WORK"
echo "fuzz: no failures"
