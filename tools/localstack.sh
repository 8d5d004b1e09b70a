#!/usr/bin/env bash
# Install LocalStack's S3 provider (PyPI localstack-core, no Docker) in a venv of its own, for the
# tests that run the S3 adapter against a second S3 implementation besides moto
# (tests/fixtures_s3.py, tests/adapters/s3/test_s3_backends.py).
#
# The venv is $SEALSTORE_LOCALSTACK_VENV (default /opt/sealstore-localstack); the fixtures run
# its python ($SEALSTORE_LOCALSTACK_PY, default $SEALSTORE_LOCALSTACK_VENV/bin/python).  It is
# kept apart from the project's venv because localstack-core pins its own boto3/botocore and
# moto fork.  4.4.0 is the last release that runs on Python 3.11; the other pins are what that
# release needs to import and serve on this Python.
#
# Usage: bash tools/localstack.sh [PYTHON]   (PYTHON: the interpreter for the venv, default python3)
set -euo pipefail

venv="${SEALSTORE_LOCALSTACK_VENV:-/opt/sealstore-localstack}"
python="${1:-python3}"
pins=(
    "localstack-core[runtime]==4.4.0"
    "cbor2<6"
    "pyopenssl<24.3"
    "service_identity"
)

if [ -x "$venv/bin/python" ] && "$venv/bin/python" - <<'EOF' 2>/dev/null
import importlib.metadata as m, sys
sys.exit(m.version("localstack-core") != "4.4.0")
EOF
then
    echo "localstack-core 4.4.0 already in $venv"
    exit 0
fi
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q "${pins[@]}"
"$venv/bin/python" -c "import localstack.runtime.main, localstack.services.s3.provider"
echo "localstack-core 4.4.0 installed in $venv"
