"""Shared pytest setup.  Cipher parts: hypothesis runs without deadlines (tests never time
anything), and the AEAD test helpers live in ``aead_cases.py`` beside this file."""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("sealstore", deadline=None, print_blob=True)
settings.load_profile("sealstore")
