"""Shared pytest setup.  Cipher parts: hypothesis runs without deadlines (tests never time
anything), and the AEAD test helpers live in ``aead_cases.py`` beside this file."""

from __future__ import annotations

from hypothesis import settings

pytest_plugins = [
    "fixtures_pg",  # PostgreSQL server + SQLite/PostgreSQL engine fixtures
    "fixtures_s3",  # moto S3 server over HTTP + boto3 clients
    "fixtures_gcs",  # gcp-storage-emulator server + google-cloud-storage clients
]

settings.register_profile("sealstore", deadline=None, print_blob=True)
settings.load_profile("sealstore")
